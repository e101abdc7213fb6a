#!/usr/bin/env python3
"""Independent measurement (plain SQL over the export, not aisp) of unfused pointwise runs: runs of three or
more PyTorch pointwise kernels (vectorized/unrolled/index elementwise) back to back on one stream, no other
kernel between them, in the steady window (kernels from the start of the second NVTX range of FAMILY on).
Prints the runs' kernel time and the saving if each run were one kernel as long as its longest member.

    python3 scripts/pointwise_runs.py EXPORT.sqlite [FAMILY]     (FAMILY: request_ by default)

Used to check `elementwise_unfused` on `decode_fixed` (tests/data/workloads): 2,519 runs (the per-layer
attention-mask conversion and the two KV-cache writes) take 21.4 ms of the 144.6 ms steady window; one kernel
per run would save 15.2 ms = 10.5 % (medium).
"""
import sqlite3
import sys

POINTWISE = ("vectorized_elementwise_kernel", "elementwise_kernel", "index_elementwise_kernel",
             "unrolled_elementwise_kernel")


def main(path, family="request_"):
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ranges = c.execute("SELECT start FROM NVTX_EVENTS WHERE text LIKE ? ORDER BY start", (family + "%",)).fetchall()
    lo = ranges[1][0] if len(ranges) > 1 else 0
    kernels = c.execute(
        "SELECT k.start, k.end, k.streamId, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.shortName WHERE k.start >= ? ORDER BY k.streamId, k.start", (lo,)).fetchall()
    window = max(k[1] for k in kernels) - min(k[0] for k in kernels)
    runs, cur, stream = [], [], None
    for start, end, sid, name in kernels + [(0, 0, None, "")]:
        if sid != stream or name not in POINTWISE:
            if len(cur) >= 3:
                runs.append(cur)
            cur = []
        stream = sid
        if name in POINTWISE:
            cur.append(end - start)
    total = sum(sum(r) for r in runs)
    one = sum(max(r) for r in runs)
    print(f"steady window {window / 1e6:.1f} ms, {len(runs)} runs, {total / 1e6:.1f} ms of kernel time; "
          f"one kernel per run saves {(total - one) / 1e6:.1f} ms = {100 * (total - one) / window:.1f} %")


if __name__ == "__main__":
    main(*sys.argv[1:])
