#!/usr/bin/env python3
"""Independent measurement (plain SQL over the export, not aisp) of device idle the host is late for, in the
steady NVTX steps: every gap between the device's operations (kernels, copies, memsets, merged) whose next
operation's launch call started after the gap began; split by what the launching thread was doing at the gap's
start: inside a synchronizing call (stream/device/event sync, blocking memcpy) → `sync`, else → `late` (the host
was running its own code or issuing earlier launches). Gaps of 1 ms or more are reported apart (`long`).

    python3 scripts/host_late_idle.py EXPORT.sqlite [WARMUP_STEPS]      (WARMUP_STEPS: 3 by default)
"""
import bisect
import sqlite3
import sys


def main(path, warmup=3):
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    steps = c.execute("SELECT start, end FROM NVTX_EVENTS WHERE text GLOB 'step_[0-9]*' ORDER BY start").fetchall()
    ops = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        ops += c.execute(f"SELECT start, end, correlationId FROM {table}").fetchall()
    ops.sort()
    calls = {cid: (s, e, tid) for s, e, tid, cid in
             c.execute("SELECT start, end, globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
    syncs = {}
    for s, e, tid in c.execute(
            "SELECT r.start, r.end, r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds n ON n.id = r.nameId "
            "WHERE n.value GLOB 'cuda*Synchronize*' OR n.value GLOB 'cudaMemcpy_*' OR n.value = 'cudaMemcpy'"):
        syncs.setdefault(tid, []).append((s, e))
    for v in syncs.values():
        v.sort()
    # Steady window on the device: from the first op launched in step WARMUP to the first op of the last step.
    first_op = []
    for s, e in steps:
        launched = [o for o in ops if o[2] in calls and s <= calls[o[2]][0] < e]
        first_op.append(min(o[0] for o in launched) if launched else None)
    lo, hi = first_op[int(warmup)], first_op[-1]
    window = [o for o in ops if lo <= o[0] < hi]
    sync_ns = late_ns = long_ns = 0
    busy_end = window[0][1]
    for o in window[1:]:
        if o[0] > busy_end:
            gap = (busy_end, o[0])
            call = calls.get(o[2])
            if call and call[0] > gap[0]:
                length = gap[1] - gap[0]
                tid = call[2]
                ss = syncs.get(tid, [])
                i = bisect.bisect_right(ss, (gap[0], float("inf"))) - 1
                in_sync = i >= 0 and ss[i][0] <= gap[0] < ss[i][1]
                if in_sync:
                    sync_ns += length
                elif length >= 1_000_000:
                    long_ns += length
                else:
                    late_ns += length
        busy_end = max(busy_end, o[1])
    w = hi - lo
    print(f"{path}: steady window {w / 1e6:.1f} ms; host late: {late_ns / 1e6:.1f} ms ({100 * late_ns / w:.1f} %) "
          f"in gaps under 1 ms, {long_ns / 1e6:.1f} ms ({100 * long_ns / w:.1f} %) in longer ones; "
          f"host in a sync: {sync_ns / 1e6:.1f} ms ({100 * sync_ns / w:.1f} %)")


if __name__ == "__main__":
    main(sys.argv[1], *(int(x) for x in sys.argv[2:]))
