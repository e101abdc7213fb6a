#!/usr/bin/env bash
# Default answer sizes of the profile operations, counted as tests/it/profile_output.rs counts them
# (Python's json.dumps of the CLI's JSON answer), on the one- and two-GPU fixtures and a tuned 4-rank set.
# usage: scripts/bench/answer_sizes.sh BINARY [BINARY ...]     (e.g. a build before the change, and this one)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
xz -dkc "$ROOT/tests/data/ddp.sqlite.xz" >"$WORK/ddp.sqlite"
mkdir -p "$WORK/set"
for r in 0 1 2 3; do xz -dkc "$ROOT/tests/data/planted/ddp_exposed/rank$r.sqlite.xz" >"$WORK/set/rank$r.sqlite"; done
T="$ROOT/tests/data/train_good.sqlite"; D="$WORK/ddp.sqlite"; C="$ROOT/tests/data/capture"
len() { python3 -c 'import json,sys; print(len(json.dumps(json.load(sys.stdin))))' 2>/dev/null || echo err; }
for B in "$@"; do
  export AISP_HOME="$WORK/home-$(basename "$B")-$RANDOM"
  echo "== $B (train_good, ddp)"
  for op in info summary kernels utilization gaps memory nvtx iterations nccl overlap timeline rules ledger; do
    echo "$op $("$B" --format json profile $op "$T" | len) $("$B" --format json profile $op "$D" | len)"
  done
  echo "search $("$B" --format json profile search "$T" --pattern elementwise | len) $("$B" --format json profile search "$D" --pattern elementwise | len)"
  echo "compare(train_good,ddp) $("$B" --format json profile compare "$T" "$D" | len)"
  echo "ncu_summary $("$B" --format json profile ncu-summary "$C/train_good.ncu-raw.csv" | len)"
  echo "trace $("$B" --format json profile trace "$C/train_good.kineto.json.xz" | len) $("$B" --format json profile trace "$C/ddp.rank0.kineto.json.xz" "$C/ddp.rank1.kineto.json.xz" | len)"
  for op in rules ledger ranks; do echo "$op(4-rank set) $("$B" --format json profile $op "$WORK/set" | len)"; done
done
