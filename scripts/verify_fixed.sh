#!/usr/bin/env bash
# An independent check of findings the manifests did not plant: capture a planted program's --fixed variant (the
# manifest's own fix, not captured for the evaluation) through aisp, and read what is left of the step. Used for the
# launch-bound findings of heldout7/tower_cache, heldout8/layer_timer and heldout8/accum_ddp: if the fixed run is
# still launch-bound, the waits were the host's own and the finding stands; if they are gone with the planted fix,
# they were its symptom.
#   run(kind="nvidia-h200-x2", carry=[".carry-planted"], command="bash scripts/verify_fixed.sh .carry-planted")
# Writes $OUT/verify_fixed.json: per case, the program's mean-step line and aisp's rules answer in short.
set -u
CARRY="$(cd "${1:?usage: verify_fixed.sh CARRY}" && pwd)"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
W=/tmp/vf; rm -rf "$W"; mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export AISP_NSYS="${AISP_NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}"
export LD_LIBRARY_PATH="$CARRY/lib:${LD_LIBRARY_PATH:-}" AISP_HOME="$W/home"
xz -dc "$CARRY/aisp.xz" > "$W/aisp" && chmod +x "$W/aisp"
python3 - "$W" "$REPO" <<'PY'
import json, os, subprocess, sys
w, repo = sys.argv[1], sys.argv[2]
cases = [("heldout7/tower_cache", None), ("heldout8/layer_timer", None),
         ("heldout8/accum_ddp", ["torchrun", "--standalone", "--nproc_per_node=2"])]
out = {}
for case, launcher in cases:
    s, name = case.split("/")
    m = json.load(open(f"{repo}/workloads/planted/{s}/manifests/{name}.json"))
    cmd = m["command"] + ["--fixed"]
    req = {"command": cmd, "cwd": f"{repo}/workloads/planted/{s}", "trace": ["cuda", "nvtx", "osrt"],
           "analyze": False, "timeout_s": 240}
    if launcher:
        req["launcher"] = launcher
    p = subprocess.run([f"{w}/aisp", "--allow-exec", "--format", "json", "profile", "nsys", "--json", json.dumps(req)],
                       capture_output=True, text=True)
    ans = json.loads(p.stdout or "{}")
    tail = [l for l in ((ans.get("stdout") or {}).get("tail") or []) if "mean step" in l]
    rules = {}
    for k, path in sorted((ans.get("artifacts") or {}).items()):
        if not k.startswith("sqlite"):
            continue
        r = subprocess.run([f"{w}/aisp", "--format", "json", "profile", "rules", "--json", json.dumps({"path": path})],
                           capture_output=True, text=True)
        v = json.loads(r.stdout or "{}")
        rules[k] = {"verdict": v.get("verdict"),
                    "findings": [(f["id"], f["severity"], f.get("share_pct")) for f in v.get("findings", [])],
                    "ledger": v.get("ledger")}
    out[case + ".fixed"] = {"mean_step": tail, "rules": rules, "error": ans.get("error")}
    print(case, tail, json.dumps({k: v["findings"] for k, v in rules.items()}), flush=True)
json.dump(out, open(os.path.join(os.environ["OUT"], "verify_fixed.json"), "w"), indent=1)
PY
