#!/usr/bin/env python3
"""Slim a per-rank Nsight Systems export before keeping it as a fixture.

torchrun's TCPStore server thread (rank 0 of each capture, or whichever rank hosts the store) polls
`accept` without blocking: over a million OS runtime rows in a 20 s capture, 90 % of the file, on a
thread that never launches GPU work. This drops the `accept` rows (and their call chains) of any
thread with more than 10,000 of them, then VACUUMs. Nothing else changes: every kernel, copy, CUDA
API call, NVTX range and every other OS runtime row stays, so every answer about the training
threads is the one the full export gives. Prints what it removed.

    scripts/slim_export.py FILE.sqlite [...]
"""
import sqlite3
import sys

POLL_LIMIT = 10_000

for path in sys.argv[1:]:
    db = sqlite3.connect(path)
    ids = [r[0] for r in db.execute("SELECT id FROM StringIds WHERE value = 'accept'")]
    if not ids:
        print(f"{path}: no accept rows")
        continue
    marks = ",".join("?" * len(ids))
    threads = [r for r in db.execute(
        f"SELECT globalTid, COUNT(*) FROM OSRT_API WHERE nameId IN ({marks}) GROUP BY globalTid HAVING COUNT(*) > ?",
        (*ids, POLL_LIMIT))]
    removed = 0
    cols = {r[1] for r in db.execute("PRAGMA table_info(OSRT_API)")}
    for tid, n in threads:
        if "callchainId" in cols:
            db.execute(
                f"DELETE FROM OSRT_CALLCHAINS WHERE id IN (SELECT callchainId FROM OSRT_API "
                f"WHERE globalTid = ? AND nameId IN ({marks}))", (tid, *ids))
        db.execute(f"DELETE FROM OSRT_API WHERE globalTid = ? AND nameId IN ({marks})", (tid, *ids))
        removed += n
        print(f"{path}: removed {n} accept rows of thread {tid}")
    db.commit()
    db.execute("VACUUM")
    db.close()
    print(f"{path}: {removed} rows removed")
