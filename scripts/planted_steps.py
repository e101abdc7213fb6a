#!/usr/bin/env python3
"""Independent step measurements of the planted pairs (issue 32): the median GPU step period of each tuned
case and of its fixed variant, and the change with a bootstrap 95 % confidence interval, read from the
exports with plain SQL (scripts/planted_steps.sql) — no aisp code. BENCHMARKS.md and the compare tests
(crates/profile/tests/it/compare_planted.rs) quote its output.

    python3 scripts/planted_steps.py DIR     # DIR holds the decompressed tests/data/planted exports
    python3 scripts/planted_steps.py DIR --json

Step periods: NVTX `step_N` ranges (Q1 of the .sql: first GPU operation launched inside the range to the
next step's first), or, for the case without ranges (fp32_gemm), an anchor kernel that runs a fixed number
of times per step (Q2). The first `warmup_steps` of the manifest are left out, and so is the last step (no
next step to end its period). A set of ranks: each rank's median; the run's step is the slowest rank's (in a
synchronous job the ranks step together; the slowest sets the pace), its per-step periods give the interval.

Interval: the change of the median step, (after / before − 1), with a percentile bootstrap over the steps of
each side (10,000 resamples, seed 32), 2.5th and 97.5th percentiles.
"""

import json
import random
import re
import sqlite3
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "workloads" / "planted" / "manifests"
SQL = (Path(__file__).resolve().parent / "planted_steps.sql").read_text()

# The tuned pairs (held-out cases are not measured here). The anchor is only needed without NVTX ranges:
# fp32_gemm's fused Adam kernel runs a fixed number of times per step.
PAIRS = ["elementwise_chain", "fp32_gemm", "gpu_ahead", "copy_bound", "ddp_straggler", "ddp_exposed"]
ANCHORS = {"fp32_gemm": "multi_tensor_apply_kernel"}


def query(name):
    m = re.search(rf"-- @{name}\n(.*?);", SQL, re.S)
    return m.group(1)


def periods_of(path, steps, warmup, anchor=None):
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    if anchor is None:
        rows = c.execute(query("nvtx")).fetchall()
        starts = [r[1] for r in rows]
        per = [b - a for a, b in zip(starts, starts[1:])]
        return per[warmup:]
    starts = [r[0] for r in c.execute(query("anchor"), {"anchor": anchor})]
    per_step = len(starts) // steps
    firsts = starts[::per_step][:steps]
    per = [b - a for a, b in zip(firsts, firsts[1:])]
    return per[warmup:]


def run(dir_, case):
    m = json.loads((MANIFESTS / f"{case}.json").read_text())
    steps, warmup = m["steps"], m["warmup_steps"]
    base = case.split(".")[0]
    anchor = ANCHORS.get(base)
    if m["ranks"] > 1:
        ranks = []
        for r in range(m["ranks"]):
            p = periods_of(Path(dir_) / case / f"rank{r}.sqlite", steps, warmup, anchor)
            ranks.append((statistics.median(p), r, p))
        med, rank, per = max(ranks)
        return {"periods": per, "median": med, "rank": rank, "rank_medians": [x[0] for x in sorted(ranks, key=lambda x: x[1])]}
    per = periods_of(Path(dir_) / f"{case}.sqlite", steps, warmup, anchor)
    return {"periods": per, "median": statistics.median(per), "rank": None}


def bootstrap(before, after, n=10_000, seed=32):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        b = statistics.median(rng.choices(before, k=len(before)))
        a = statistics.median(rng.choices(after, k=len(after)))
        out.append(a / b - 1.0)
    out.sort()
    return out[int(0.025 * n)], out[int(0.975 * n) - 1]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    dir_ = sys.argv[1]
    rows = []
    for case in PAIRS:
        b = run(dir_, case)
        a = run(dir_, f"{case}.fixed")
        change = a["median"] / b["median"] - 1.0
        lo, hi = bootstrap(b["periods"], a["periods"])
        rows.append({
            "case": case,
            "before_ms": round(b["median"] / 1e6, 3),
            "after_ms": round(a["median"] / 1e6, 3),
            "before_steps": len(b["periods"]),
            "after_steps": len(a["periods"]),
            "before_rank": b["rank"],
            "after_rank": a["rank"],
            "change_pct": round(100 * change, 2),
            "ci_low_pct": round(100 * lo, 2),
            "ci_high_pct": round(100 * hi, 2),
        })
    if "--json" in sys.argv:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'case':18} {'before ms':>10} {'after ms':>9} {'n':>7} {'change %':>9} {'95% CI %':>18}")
    for r in rows:
        n = f"{r['before_steps']}/{r['after_steps']}"
        ci = f"[{r['ci_low_pct']:+.2f}, {r['ci_high_pct']:+.2f}]"
        print(f"{r['case']:18} {r['before_ms']:10.3f} {r['after_ms']:9.3f} {n:>7} {r['change_pct']:+9.2f} {ci:>18}")


if __name__ == "__main__":
    main()
