#!/usr/bin/env bash
# Capture the workloads on an NVIDIA GPU host through aisp (CLI and MCP stdio) with
# Nsight Systems, Nsight Compute and the PyTorch profiler, and keep the small artifacts.
#
#   scripts/capture-verify.sh --aisp target/release/aisp [--nsys PATH] [--nsys-libs DIR]
#                             [--workloads DIR] [--mode single|ddp] [--out DIR]
#
#   --aisp       a release aisp binary (x86-64)
#   --nsys       the nsys CLI (default: aisp's own discovery, e.g.
#                /opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys)
#   --nsys-libs  a folder with libdw.so.1 and libelf.so.1 for nsys's importer (passed to
#                the captures through their `env` input, the fix aisp's error names)
#   --workloads  folder with train_good.py, train_bad.py, ddp.py (default: workloads/)
#   --mode       single (one GPU, default) or ddp (two GPUs: torchrun --nproc_per_node=2)
#   --out        where results go (default: $OUT)
#
# single: importer failure without the libs (expected on images lacking elfutils); nsys on
# train_good over MCP stdio (progress notifications counted); nsys `full` on train_bad; nsys
# with an NVTX capture range; ncu basic (12 launches) and ncu full (2 GEMM launches: warp
# stalls, roofline); torch.profiler on train_good; a timeout that must leave no process
# behind; aisp_profile_list. ddp: nsys and torch.profiler on the DDP workload (2 ranks),
# then aisp_profile_trace across the ranks. About 4-6 minutes either way.
#
# On this project's device machines (run from the repository root; the binary and the libraries
# travel in an ignored folder named in `carry`):
#   cargo build --release && mkdir -p .capture-carry/lib && cp target/release/aisp .capture-carry/ \
#     && cp -L /work/shared/nsys-runtime/lib/*.so.1 .capture-carry/lib/ && echo /.capture-carry/ >> .git/info/exclude
#   run(kind="nvidia-h100-x1", carry=[".capture-carry"], timeout_s=600, command=
#       "scripts/capture-verify.sh --aisp .capture-carry/aisp --nsys-libs .capture-carry/lib")
#   run(kind="nvidia-h200-x2", carry=[".capture-carry"], timeout_s=600, command=
#       "scripts/capture-verify.sh --aisp .capture-carry/aisp --nsys-libs .capture-carry/lib --mode ddp")
#
# $OUT receives at most 6 files: summary.md, outputs.tar.xz (every JSON answer, logs),
# nsys.tar.xz (SQLite exports), ncu.tar.xz (reports, CSV pages), torch.tar.xz (Kineto traces).
set -u

AISP=""
NSYS=""
NSYS_LIBS=""
WORKLOADS="$(cd "$(dirname "$0")/.." && pwd)/workloads"
MODE="single"
DEST="${OUT:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --aisp) AISP="$2"; shift 2 ;;
    --nsys) NSYS="$2"; shift 2 ;;
    --nsys-libs) NSYS_LIBS="$2"; shift 2 ;;
    --workloads) WORKLOADS="$2"; shift 2 ;;
    --mode) MODE="$2"; shift 2 ;;
    --out) DEST="$2"; shift 2 ;;
    -h|--help) sed -n 2,36p "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$AISP" ] || [ ! -x "$AISP" ]; then echo "--aisp must name an executable aisp" >&2; exit 2; fi
if [ -z "$DEST" ]; then echo "--out or \$OUT is required" >&2; exit 2; fi
AISP="$(cd "$(dirname "$AISP")" && pwd)/$(basename "$AISP")"
WORKLOADS="$(cd "$WORKLOADS" && pwd)"
if [ -n "$NSYS_LIBS" ]; then NSYS_LIBS="$(cd "$NSYS_LIBS" && pwd)"; fi
mkdir -p "$DEST"

WORK="$(mktemp -d /tmp/capture-verify.XXXXXX)"
mkdir -p "$WORK/outputs" "$WORK/pack/nsys" "$WORK/pack/ncu" "$WORK/pack/torch"
export AISP_HOME="$WORK/home"
export AISP_CONFIG="$WORK/no-config.toml"
export PYTHONUNBUFFERED=1
# NVLink multicast stays off on shared hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -n "$NSYS" ]; then export AISP_NSYS="$NSYS"; fi
SUMMARY="$WORK/summary.md"
START=$(date +%s)

say() { echo "$*" | tee -a "$SUMMARY"; }

# The env object every capture gets; with_libs adds LD_LIBRARY_PATH for nsys's importer.
env_json() {
  python3 - "$1" "$NSYS_LIBS" <<'EOF'
import json, os, sys
with_libs, libs = sys.argv[1] == "with_libs", sys.argv[2]
env = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
       "PYTHONUNBUFFERED": "1"}
if with_libs and libs:
    env["LD_LIBRARY_PATH"] = libs + ((":" + os.environ["LD_LIBRARY_PATH"]) if os.environ.get("LD_LIBRARY_PATH") else "")
print(json.dumps(env))
EOF
}

# step NAME DOMAIN OP JSON_ARGS: one CLI call; the answer (or error envelope) in outputs/NAME.json.
step() {
  local name="$1" domain="$2" op="$3" args="$4" t0 rc
  t0=$(date +%s)
  "$AISP" --allow-exec --format json "$domain" "$op" --json "$args" \
    >"$WORK/outputs/$name.json" 2>"$WORK/outputs/$name.stderr"
  rc=$?
  say ""
  say "### $name — \`aisp $domain $op\` — exit $rc, $(( $(date +%s) - t0 )) s"
  say '```'
  say "$args"
  say '```'
  python3 - "$WORK/outputs/$name.json" <<'EOF' | tee -a "$SUMMARY"
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"- (no JSON answer: {e})"); sys.exit()
if "error" in v and isinstance(v["error"], dict):
    e = v["error"]
    print(f"- error `{e['kind']}`: {e['message'][:1500]}")
    print(f"- hint: {e['hint'][:600]}")
    sys.exit()
for k in ("run_id", "exit_code", "duration_ms"):
    if k in v: print(f"- {k}: {v[k]}")
if "profiler" in v: print(f"- profiler: {v['profiler']}")
for n in v.get("notes", []): print(f"- note: {n}")
for k, p in v.get("artifacts", {}).items(): print(f"- artifact {k}: {p}")
info = v.get("info")
if info:
    for k in ("kernels", "kernel_count", "devices", "gpus"):
        if k in info: print(f"- info.{k}: {json.dumps(info[k])[:400]}")
for f in v.get("top_findings", []):
    print(f"- finding [{f.get('severity')}] {f.get('title')} (share {f.get('share_pct')})")
s = v.get("summary")
if s:
    print(f"- ncu: {s['kernel_count']} kernels, pages {s['pages']}, Σ {s['total_duration_ns']} ns, device {s.get('device_name')}")
    for g in s["by_name"][:4]:
        print(f"  - {g['launches']}× {g['kernel_name'][:70]}: {g['total_duration_ns']} ns, SM {g.get('mean_sm_throughput_pct')} %, mem {g.get('mean_memory_throughput_pct')} %, {g.get('sol_bound')}")
    for k in s["kernels"][:3]:
        print(f"  - #{k['id']} stalls {[(w['reason'], round(w['share_pct'], 1)) for w in k['warp_stalls']]} roofline {k.get('roofline')} L2 hit {k.get('l2_hit_rate_pct')} limiters {k['occupancy_limiters']}")
    for a in s["top_advice"][:3]:
        print(f"  - advice {a['rule']} ×{a['launches']}: {a['estimated_savings_ns']:.0f} ns")
a = v.get("analysis") or (v if "traces" in v and "findings" in v else None)
if a:
    for t in a["traces"]:
        for d in t["devices"]:
            tb = d["temporal"]
            print(f"- rank {t.get('rank')} GPU {d['device']}: window {d['window_ns']} ns, busy {d['busy_pct']:.2f} %, compute {tb['compute_pct']:.2f} %, comm exposed {tb['communication_exposed_pct']:.2f} %, idle {tb['idle_pct']:.2f} % (host wait {d['idle']['host_wait_ns']} ns), overlap {d.get('overlap')}")
        print(f"  - steps {t['steps']['count']}, median CPU {t['steps'].get('cpu_median_ns')} ns, GPU {t['steps'].get('gpu_busy_median_ns')} ns; short kernels {t['launch_stats']['short_kernels']}")
    if a.get("cross_rank"): print(f"- cross-rank: {json.dumps(a['cross_rank'])[:600]}")
    for f in a["findings"][:5]:
        print(f"- finding [{f['severity']}] {f['title']}")
if "captures" in v:
    for c in v["captures"]:
        print(f"- {c['run_id']} {c['state']} {' '.join(c['command'])[:80]} findings {c['findings'][:2]}")
EOF
  return $rc
}

# Copy an artifact named in an answer into the pack.
keep() {
  local name="$1" key="$2" dest="$3"
  python3 - "$WORK/outputs/$name.json" "$key" "$dest" <<'EOF'
import json, shutil, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception:
    sys.exit()
p = v.get("artifacts", {}).get(sys.argv[2])
if p:
    shutil.copy(p, sys.argv[3])
EOF
}

say "# capture-verify ($MODE) — $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say ""
say '```'
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())';
  "$AISP" --version; uname -r; } 2>&1 | tee -a "$SUMMARY"
say '```'

G="$WORKLOADS/train_good.py"
B="$WORKLOADS/train_bad.py"
D="$WORKLOADS/ddp.py"
ENV_NOLIBS="$(env_json without)"
ENV_LIBS="$(env_json with_libs)"

if [ "$MODE" = "single" ]; then
  # 1. Without the importer libraries (the image's default): the error must name libdw/libelf.
  if [ -n "$NSYS_LIBS" ]; then
    step nsys_importer_check profile nsys \
      "{\"command\": [\"python3\", \"$G\"], \"cwd\": \"$WORKLOADS\", \"env\": $ENV_NOLIBS, \"timeout_s\": 240, \"analyze\": false}"
  fi

  # 2. nsys on train_good over MCP stdio, counting progress notifications.
  python3 - "$AISP" "$G" "$WORKLOADS" "$ENV_LIBS" "$WORK/outputs/nsys_train_good.json" <<'EOF' | tee -a "$SUMMARY"
import json, subprocess, sys, time
aisp, script, cwd, env, out = sys.argv[1:6]
t0 = time.time()
p = subprocess.Popen([aisp, "--allow-exec", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                     stderr=open(out.replace(".json", ".server.stderr"), "w"))
def send(m):
    p.stdin.write(json.dumps(m) + "\n"); p.stdin.flush()
def until(i):
    notes = []
    for line in p.stdout:
        m = json.loads(line)
        if m.get("id") == i:
            return m, notes
        notes.append(m)
    raise SystemExit("server closed")
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
      "capabilities": {}, "clientInfo": {"name": "capture-verify", "version": "1"}}})
init, _ = until(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
args = {"command": ["python3", script], "cwd": cwd, "env": json.loads(env), "preset": "light", "timeout_s": 300}
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
      "params": {"name": "aisp_profile_nsys", "arguments": args, "_meta": {"progressToken": "cap"}}})
resp, notes = until(2)
p.stdin.close(); p.wait(timeout=30)
progress = [n["params"] for n in notes if n.get("method") == "notifications/progress"]
res = resp.get("result", {})
body = res.get("structuredContent") or (json.loads(res["content"][0]["text"]) if res.get("content") else resp)
json.dump(body, open(out, "w"), indent=1)
print(f"\n### nsys_train_good — MCP stdio tools/call aisp_profile_nsys — {time.time() - t0:.0f} s")
print(f"- server: {init['result'].get('serverInfo')}; isError {res.get('isError')}")
print(f"- progress notifications: {len(progress)}; first {progress[:1]}; last {progress[-1:]}")
EOF
  python3 - "$WORK/outputs/nsys_train_good.json" <<'EOF' | tee -a "$SUMMARY"
import json, sys
v = json.load(open(sys.argv[1]))
if "error" in v: print(f"- error: {v['error']}")
else:
    print(f"- run {v['run_id']}, artifacts {sorted(v['artifacts'])}, notes {v['notes']}")
    for f in v.get("top_findings", []): print(f"- finding [{f.get('severity')}] {f.get('title')}")
EOF
  keep nsys_train_good sqlite "$WORK/pack/nsys/train_good.sqlite"

  # 3. nsys `full` preset on the variant with deliberate problems.
  step nsys_train_bad profile nsys \
    "{\"command\": [\"python3\", \"$B\"], \"cwd\": \"$WORKLOADS\", \"env\": $ENV_LIBS, \"preset\": \"full\", \"timeout_s\": 300}"
  keep nsys_train_bad sqlite "$WORK/pack/nsys/train_bad.sqlite"

  # 4. An NVTX capture range: only step_5 of train_good.
  step nsys_nvtx_range profile nsys \
    "{\"command\": [\"python3\", \"$G\"], \"cwd\": \"$WORKLOADS\", \"env\": $ENV_LIBS, \"capture_range\": \"nvtx\", \"nvtx_range\": \"step_5\", \"timeout_s\": 240}"
  keep nsys_nvtx_range sqlite "$WORK/pack/nsys/train_good_step5.sqlite"

  # 5. ncu: basic set on 12 launches (as the fixture), then the full set on two GEMMs.
  step ncu_basic profile ncu \
    "{\"command\": [\"python3\", \"$G\"], \"cwd\": \"$WORKLOADS\", \"env\": $ENV_NOLIBS, \"set\": \"basic\", \"launch_count\": 12, \"timeout_s\": 300}"
  keep ncu_basic raw_csv "$WORK/pack/ncu/train_good.basic.raw.csv"
  keep ncu_basic details_csv "$WORK/pack/ncu/train_good.basic.details.csv"
  keep ncu_basic ncu_rep "$WORK/pack/ncu/train_good.basic.ncu-rep"
  step ncu_full_gemm profile ncu \
    "{\"command\": [\"python3\", \"$G\"], \"cwd\": \"$WORKLOADS\", \"env\": $ENV_NOLIBS, \"set\": \"full\", \"kernel_regex\": \"nvjet|gemm\", \"launch_count\": 2, \"timeout_s\": 300}"
  keep ncu_full_gemm raw_csv "$WORK/pack/ncu/train_good.full_gemm.raw.csv"
  keep ncu_full_gemm details_csv "$WORK/pack/ncu/train_good.full_gemm.details.csv"
  keep ncu_full_gemm ncu_rep "$WORK/pack/ncu/train_good.full_gemm.ncu-rep"

  # 6. torch.profiler on train_good (as the Kineto fixture: wait 5, warmup 2, active 5).
  step torch_train_good profile torch \
    "{\"command\": [\"python3\", \"$G\"], \"cwd\": \"$WORKLOADS\", \"env\": $ENV_NOLIBS, \"wait\": 5, \"warmup\": 2, \"active\": 5, \"timeout_s\": 240}"
  keep torch_train_good trace "$WORK/pack/torch/train_good.kineto.json"
  step torch_train_bad profile torch \
    "{\"command\": [\"python3\", \"$B\"], \"cwd\": \"$WORKLOADS\", \"env\": $ENV_NOLIBS, \"wait\": 5, \"warmup\": 2, \"active\": 5, \"timeout_s\": 240}"
  keep torch_train_bad trace "$WORK/pack/torch/train_bad.kineto.json"

  # 7. A timeout: the program and everything it started must be gone afterwards.
  step nsys_timeout profile nsys \
    "{\"command\": [\"python3\", \"-c\", \"import torch, time; torch.ones(1, device='cuda'); print('ready', flush=True); time.sleep(600)  # aisp-timeout-probe\"], \"env\": $ENV_LIBS, \"timeout_s\": 25}"
  sleep 2
  say "- processes left by the timed-out capture: $(pgrep -fc 'aisp-timeout-probe' || true)"
else
  # DDP on two GPUs: nsys over the whole torchrun tree, then torch.profiler per rank.
  step nsys_ddp profile nsys \
    "{\"command\": [\"torchrun\", \"--standalone\", \"--nproc_per_node=2\", \"$D\"], \"cwd\": \"$WORKLOADS\", \"env\": $ENV_LIBS, \"preset\": \"light\", \"timeout_s\": 360}"
  keep nsys_ddp sqlite "$WORK/pack/nsys/ddp.sqlite"
  step torch_ddp profile torch \
    "{\"command\": [\"torchrun\", \"--standalone\", \"--nproc_per_node=2\", \"$D\"], \"cwd\": \"$WORKLOADS\", \"env\": $ENV_NOLIBS, \"wait\": 5, \"warmup\": 2, \"active\": 5, \"timeout_s\": 300}"
  python3 - "$WORK/outputs/torch_ddp.json" "$WORK/pack/torch" <<'EOF'
import json, shutil, sys, os
try:
    v = json.load(open(sys.argv[1]))
except Exception:
    sys.exit()
for t in v.get("traces", []):
    shutil.copy(t, os.path.join(sys.argv[2], "ddp." + os.path.basename(t)))
EOF
  RUN_ID="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('run_id',''))" "$WORK/outputs/torch_ddp.json" 2>/dev/null)"
  if [ -n "$RUN_ID" ]; then
    step trace_ddp profile trace "{\"paths\": [\"$RUN_ID\"]}"
  fi
fi

step list profile list "{\"limit\": 50}"
say ""
say "total $(( $(date +%s) - START )) s"

# Pack: SQLite exports and traces compressed one by one (as the fixtures are), then tarred.
for f in "$WORK"/pack/nsys/*.sqlite "$WORK"/pack/torch/*.json; do [ -f "$f" ] && xz -T0 -9 "$f"; done
cp -r "$AISP_HOME/runs" "$WORK/outputs/runs-logs" 2>/dev/null
find "$WORK/outputs/runs-logs" -type f ! -name '*.log' ! -name 'meta*.json' -delete 2>/dev/null
tar -C "$WORK" -cJf "$DEST/outputs.tar.xz" outputs summary.md
for kind in nsys ncu torch; do
  if [ -n "$(ls -A "$WORK/pack/$kind")" ]; then tar -C "$WORK/pack" -cJf "$DEST/$kind.tar.xz" "$kind"; fi
done
cp "$SUMMARY" "$DEST/summary.md"
ls -la "$DEST"
