#!/usr/bin/env python3
"""An independent computation of the step ledger's groups, straight from an export's tables with SQL and Python
(no aisp code), to check `aisp_profile_ledger` against: for each device, the NVTX `step`/`step_N` ranges of the
process with most GPU operations there, each step's period on the GPU timeline (its first operation — kernel,
memcpy or memset whose launching CUDA call, joined by correlationId and process, lies inside the range — to the
next step's first operation), the warm-up steps (the first, then each while its period exceeds 1.25x the median of
the later half, at most half), and per steady step the exclusive partition: compute (union of non-NCCL kernels),
communication (NCCL kernels minus compute), copy (memcpy/memset minus kernels), idle (the rest).

    scripts/ledger_sql.py EXPORT.sqlite [DEVICE]

Prints JSON: per device the steady window, its step count, period median, and the four groups in ns.
"""
import json
import sqlite3
import sys

PID_MASK = 0xFFFFFFFFFF000000


def union(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [tuple(x) for x in out]


def length(u):
    return sum(e - s for s, e in u)


def clip(u, a, b):
    return [(max(s, a), min(e, b)) for s, e in u if e > a and s < b]


def subtract(a, b):
    out = []
    for s, e in a:
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return out


def tables(db):
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def main(path, want=None):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t = tables(db)
    strings = dict(db.execute("SELECT id, value FROM StringIds"))
    ops = {}  # device -> [(start, end, kind, process, corr)]
    for s, e, dev, gpid, corr, short in db.execute(
            "SELECT start, end, deviceId, globalPid, correlationId, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL"):
        if e <= s:
            continue
        name = strings.get(short, "")
        nccl = (len(name) >= 4 and "nccl" in name.lower()) or name == "oneRankReduce"
        ops.setdefault(dev, []).append((s, e, "comm" if nccl else "compute", gpid & PID_MASK, corr))
    for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if table in t:
            for s, e, dev, gpid, corr in db.execute(
                    f"SELECT start, end, deviceId, globalPid, correlationId FROM {table}"):
                if e > s:
                    ops.setdefault(dev, []).append((s, e, "copy", gpid & PID_MASK, corr))
    calls = {}
    for s, e, tid, corr in db.execute(
            "SELECT start, end, globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId != 0 "
            "ORDER BY start"):
        calls.setdefault((tid & PID_MASK, corr), (s, e))
    ranges = []
    for s, e, text, tid_text, tid in db.execute(
            "SELECT start, end, text, textId, globalTid FROM NVTX_EVENTS WHERE eventType = 59 AND end IS NOT NULL"):
        name = text if text is not None else strings.get(tid_text, "")
        if name.lower() == "step" or (len(name) > 5 and name[:5].lower() == "step_"):
            ranges.append((s, e, tid & PID_MASK))
    out = {}
    for dev, dops in sorted(ops.items()):
        if want is not None and dev != want:
            continue
        count = {}
        for o in dops:
            count[o[3]] = count.get(o[3], 0) + 1
        main_pid = sorted(count.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        rs = sorted([r for r in ranges if r[2] == main_pid], key=lambda r: (r[0], -r[1]))
        starts = [r[0] for r in rs]
        first, last, n = {}, {}, {}
        import bisect
        for s, e, kind, proc, corr in dops:
            c = calls.get((proc, corr))
            if c is None or proc != main_pid:
                continue
            i = bisect.bisect_right(starts, c[0])
            for j in range(i - 1, max(i - 5, -1), -1):
                if rs[j][0] <= c[0] and c[1] <= rs[j][1]:
                    first[j] = min(first.get(j, s), s)
                    last[j] = max(last.get(j, e), e)
                    n[j] = n.get(j, 0) + 1
                    break
        found = sorted((first[j], last[j]) for j in first)
        if len(found) < 2:
            out[dev] = {"steps": len(found), "note": "fewer than two NVTX steps: not checked here"}
            continue
        periods = []
        for i, (s, le) in enumerate(found):
            end = found[i + 1][0] if i + 1 < len(found) else le
            periods.append((s, max(end, s)))
        lens = [e - s for s, e in periods]
        later = sorted(lens[len(lens) // 2:])
        med = later[len(later) // 2]
        w = 1
        while w < len(lens) // 2 and lens[w] > 1.25 * med:
            w += 1
        comp = union([(s, e) for s, e, k, *_ in dops if k == "compute"])
        comm = union([(s, e) for s, e, k, *_ in dops if k == "comm"])
        copy = union([(s, e) for s, e, k, *_ in dops if k == "copy"])
        kern = union(comp + comm)
        groups = {"compute": 0, "communication": 0, "copy": 0, "idle": 0}
        for a, b in periods[w:]:
            c = length(clip(comp, a, b))
            m = length(subtract(clip(comm, a, b), comp))
            cp = length(subtract(clip(copy, a, b), kern))
            groups["compute"] += c
            groups["communication"] += m
            groups["copy"] += cp
            groups["idle"] += (b - a) - c - m - cp
        steady = lens[w:]
        sl = sorted(steady)
        out[dev] = {
            "steps": len(periods), "warmup": w, "steady_steps": len(steady),
            "steps_start_ns": periods[0][0], "steps_end_ns": periods[-1][1],
            "steady_start_ns": periods[w][0], "steady_end_ns": periods[-1][1],
            "steady_length_ns": sum(steady),
            "period_median_ns": (sl[(len(sl) - 1) // 2] + sl[len(sl) // 2]) // 2,
            "groups_ns": groups,
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
