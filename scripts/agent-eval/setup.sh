#!/usr/bin/env bash
# Lays out evaluation cases under OUT (default /tmp/eval) with neutral names, from a cases file (default
# scripts/agent-eval/cases.json, the first held-out set; cases2.json the second, cases3.json the third,
# cases4.json the fourth, cases5.json the fifth, cases6.json the sixth): each case's `source` exports (under tests/data/planted/) become its `files`
# (profile.sqlite, rank<N>.sqlite, before/after.sqlite), plus OUT/questions.md (what the assistant is given; the
# answer key stays in the cases file).
#   bash scripts/agent-eval/setup.sh [OUT] [CASES_JSON]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/eval}
CASES=${2:-$ROOT/scripts/agent-eval/cases.json}
python3 - "$CASES" "$OUT" "$ROOT/tests/data/planted" <<'PY'
import json, lzma, os, re, shutil, sys
cases, out, data = json.load(open(sys.argv[1]))["cases"], sys.argv[2], sys.argv[3]


def expand(src):
    """`rank{0..3}` in a source stands for one export per rank."""
    m = re.search(r"\{(\d+)\.\.(\d+)\}", src)
    if not m:
        return [src]
    return [src[:m.start()] + str(i) + src[m.end():] for i in range(int(m[1]), int(m[2]) + 1)]


os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "questions.md"), "w") as q:
    for c in cases:
        d = os.path.join(out, c["case"])
        os.makedirs(d, exist_ok=True)
        sources = [x for s in c["source"] for x in expand(s)]
        for name, src in zip(c["files"], sources):
            with lzma.open(os.path.join(data, src)) as f, open(os.path.join(d, name), "wb") as g:
                shutil.copyfileobj(f, g)
        files = ", ".join(os.path.join(d, x) for x in c["files"])
        q.write(f"## {c['case']}\nFiles: {files}\nQuestion: {c['question']}\nWrite your answer to {d}/answer.md\n\n")
PY
echo "cases laid out in $OUT"
