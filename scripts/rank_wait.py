#!/usr/bin/env python3
"""Independent measurement (plain SQL over the exports, not aisp) of cross-rank waiting: the n-th NCCL kernel of
each rank is the same collective (ranks run the same collectives in the same order); it cannot finish its
transfer before the last rank's kernel starts, so a rank waits (last start − its start) inside it. Each export
has its own time base: the ranks' clocks are aligned by the median difference of their collectives' end times
(a ring all-reduce ends on every rank within microseconds). Waiting while the rank's own compute kernels run
beside the collective costs nothing; the wait with no other kernel of the rank running is reported apart
(`exposed`): it is on the rank's critical path. Summed over
the collectives that start inside the steady NVTX steps (from step WARMUP on), per rank, as a share of that
rank's steady window (first kernel of step WARMUP to the first kernel of the last step).

    python3 scripts/rank_wait.py RANK0.sqlite RANK1.sqlite [...] [--warmup N]
"""
import sqlite3
import sys


def load(path, warmup):
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    steps = c.execute("SELECT start, end FROM NVTX_EVENTS WHERE text GLOB 'step_[0-9]*' ORDER BY start").fetchall()
    ks = c.execute(
        "SELECT k.start, k.end, s.value, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId ORDER BY k.start").fetchall()

    def first_kernel(step):
        s, e = steps[step]
        return min(k[0] for k in ks if s <= k[3] < e)

    lo, hi = first_kernel(warmup), first_kernel(len(steps) - 1)
    is_nccl = [k[2].startswith("ncclDevKernel") or k[2].startswith("ncclKernel") for k in ks]
    nccl = [(k[0], k[1]) for k, n in zip(ks, is_nccl) if n]
    compute = union([(k[0], k[1]) for k, n in zip(ks, is_nccl) if not n])
    return nccl, lo, hi, compute


def union(ivs):
    out = []
    for s, e in sorted(ivs):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def uncovered(s, e, covered):
    """Length of [s, e) outside the sorted, disjoint intervals `covered`."""
    import bisect
    i = max(0, bisect.bisect_left(covered, [s, s]) - 1)
    left = e - s
    while i < len(covered) and covered[i][0] < e:
        a, b = max(s, covered[i][0]), min(e, covered[i][1])
        if b > a:
            left -= b - a
        i += 1
    return left


def main(args):
    warmup = 3
    if "--warmup" in args:
        i = args.index("--warmup")
        warmup = int(args[i + 1])
        del args[i:i + 2]
    ranks = [load(p, warmup) for p in args]
    n = min(len(r[0]) for r in ranks)
    # Shift every rank onto rank 0's clock.
    aligned = []
    for nccl, lo, hi, compute in ranks:
        d = sorted(ranks[0][0][j][1] - nccl[j][1] for j in range(n))[n // 2]
        aligned.append(([(s + d, e + d) for s, e in nccl], lo + d, hi + d, [[a + d, b + d] for a, b in compute]))
    ranks = aligned
    for i, (nccl, lo, hi, compute) in enumerate(ranks):
        wait = exposed = 0
        for j in range(n):
            if not lo <= nccl[j][0] < hi:
                continue
            last = max(r[0][j][0] for r in ranks)
            end = min(last, nccl[j][1])
            if end > nccl[j][0]:
                wait += end - nccl[j][0]
                exposed += uncovered(nccl[j][0], end, compute)
        w = hi - lo
        print(f"rank {i}: {n} collectives matched, steady window {w / 1e6:.1f} ms, waits {wait / 1e6:.1f} ms "
              f"({100 * wait / w:.1f} %) for the last rank, {exposed / 1e6:.1f} ms ({100 * exposed / w:.1f} %) "
              f"with no compute kernel of its own beside it")


if __name__ == "__main__":
    main(sys.argv[1:])
