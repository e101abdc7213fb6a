#!/usr/bin/env bash
# Lays out the held-out evaluation cases under $1 (default /tmp/eval) with neutral names:
# case1..3/profile.sqlite, case4/rank{0..3}.sqlite, case5/{before,after}.sqlite, case6/rank{0..3}.sqlite,
# plus questions.md (what the assistant is given; the answer key stays in cases.json).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
H="$ROOT/tests/data/planted/heldout"
OUT=${1:-/tmp/eval}
mkdir -p "$OUT"/case{1,2,3,4,5,6}
xz -dkc "$H/d2h_sync.sqlite.xz" >"$OUT/case1/profile.sqlite"
xz -dkc "$H/norm_chain.sqlite.xz" >"$OUT/case2/profile.sqlite"
xz -dkc "$H/graph_infer.sqlite.xz" >"$OUT/case3/profile.sqlite"
for r in 0 1 2 3; do
  xz -dkc "$H/ddp_host_straggler/rank$r.sqlite.xz" >"$OUT/case4/rank$r.sqlite"
  xz -dkc "$H/ddp_flat_allreduce/rank$r.sqlite.xz" >"$OUT/case6/rank$r.sqlite"
done
xz -dkc "$H/fp32_head.sqlite.xz" >"$OUT/case5/before.sqlite"
xz -dkc "$H/fp32_head.fixed.sqlite.xz" >"$OUT/case5/after.sqlite"
python3 - "$ROOT/scripts/agent-eval/cases.json" "$OUT" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
out = sys.argv[2]
with open(f"{out}/questions.md", "w") as f:
    for c in cases:
        files = ", ".join(f"{out}/{c['case']}/{x}" for x in c["files"])
        f.write(f"## {c['case']}\nFiles: {files}\nQuestion: {c['question']}\nWrite your answer to {out}/{c['case']}/answer.md\n\n")
PY
echo "cases laid out in $OUT"
