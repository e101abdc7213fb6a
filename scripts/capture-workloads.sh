#!/usr/bin/env bash
# Capture every workload in workloads/ under Nsight Systems, export each to SQLite, and (when an
# aisp binary is given) check aisp_profile_rules against workloads/expectations.json.
#
# usage: OUT=/tmp/captures [ONLY="a b"] scripts/capture-workloads.sh NSYS_BIN [AISP_BIN] [PYTHON]
#   NSYS_BIN  path of the nsys binary (e.g. /opt/nvidia/nsight-systems/2025.3.2/bin/nsys)
#   AISP_BIN  optional: release aisp binary; runs the checks and writes $OUT/checks.txt
#   PYTHON    python with torch+CUDA (default: python3)
# Writes under $OUT: <name>.nsys-rep, <name>.sqlite, <name>.log, <name>.rules.json, env.txt, checks.txt.
set -euo pipefail
NSYS=${1:?usage: OUT=dir $0 NSYS_BIN [AISP_BIN] [PYTHON]}
AISP=${2:-}
PY=${3:-python3}
OUT=${OUT:?set OUT to the output folder}
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
{
  date -u +%FT%TZ
  "$NSYS" --version || true
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
} > "$OUT/env.txt" 2>&1
WORKLOADS=(healthy pageable_copies host_sync fp32_no_tf32 tiny_kernels decode_loop decode_fixed train_adam_storm train_fixed)
# ONLY="decode_fixed train_fixed" captures a subset.
if [ -n "${ONLY:-}" ]; then read -r -a WORKLOADS <<< "$ONLY"; fi
# name → script and arguments (the fixed runs are the same scripts with --fixed)
script_of() {
  case $1 in
    decode_fixed) echo "decode_loop.py --fixed" ;;
    train_fixed) echo "train_adam_storm.py --fixed" ;;
    *) echo "$1.py" ;;
  esac
}
for w in "${WORKLOADS[@]}"; do
  echo "== capturing $w"
  # shellcheck disable=SC2046
  (cd "$HERE/workloads" && "$NSYS" profile -t cuda,nvtx,osrt --cuda-graph-trace=node --cuda-memory-usage=true --force-overwrite=true \
      -o "$OUT/$w" "$PY" $(script_of "$w")) > "$OUT/$w.log" 2>&1 || { echo "capture of $w failed: see $OUT/$w.log"; continue; }
  "$NSYS" export --type sqlite --force-overwrite true --output "$OUT/$w.sqlite" "$OUT/$w.nsys-rep" >> "$OUT/$w.log" 2>&1 \
      || echo "export of $w failed: see $OUT/$w.log"
done
[ -n "$AISP" ] || { echo "no aisp binary given: captures only"; exit 0; }
export AISP_HOME="$OUT/aisp-home"
: > "$OUT/checks.txt"
for w in "${WORKLOADS[@]}"; do
  [ -f "$OUT/$w.sqlite" ] || { echo "$w FAIL (no export)" >> "$OUT/checks.txt"; continue; }
  "$AISP" --format json profile rules "$OUT/$w.sqlite" > "$OUT/$w.rules.json" 2> "$OUT/$w.rules.err" || true
  "$PY" - "$HERE/workloads/expectations.json" "$w" "$OUT/$w.rules.json" >> "$OUT/checks.txt" <<'PY'
import json, sys
order = ["info", "low", "medium", "high", "critical"]
exp = json.load(open(sys.argv[1]))[sys.argv[2]]
try:
    res = json.load(open(sys.argv[3]))
except Exception as e:
    print(f"{sys.argv[2]} FAIL (no rules output: {e})"); sys.exit()
found = {}
for f in res.get("findings", []):  # one finding per device: keep the most severe
    if order.index(f["severity"]) >= order.index(found.get(f["id"], "info")):
        found[f["id"]] = f["severity"]
problems = []
floor = order.index(exp.get("min_severity", "low"))
for rid in exp.get("require", []):
    if rid not in found:
        problems.append(f"missing {rid}")
    elif order.index(found[rid]) < max(floor, order.index(exp.get("require_at", {}).get(rid, "info"))):
        problems.append(f"{rid} only {found[rid]}")
if "forbid_at_or_above" in exp:
    cap = order.index(exp["forbid_at_or_above"])
    problems += [f"unexpected {i} ({s})" for i, s in found.items()
                 if order.index(s) >= cap and i not in exp.get("require", [])]
print(f"{sys.argv[2]} {'PASS' if not problems else 'FAIL'} {'; '.join(problems)} | {res.get('verdict', '')}")
PY
done
cat "$OUT/checks.txt"
