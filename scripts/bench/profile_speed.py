#!/usr/bin/env python3
"""Profile-analysis speed, aisp side by side with nsys-ai and the sqlite3 CLI.

usage: python3 scripts/bench/profile_speed.py AISP_BIN NSYS_AI_BIN PROFILE.sqlite [--runs N] [--skip-nsys-ai]

For each question, runs both tools as whole processes on the same file:
  cold  aisp: a fresh $AISP_HOME (empty result cache);
        nsys-ai: a fresh copy of the file in a fresh folder (no Parquet sidecar), so its cache build is
        included. A copy, not a link: nsys-ai adds indexes (_nsysai_*) to the SQLite file it reads, which
        would leave later "cold" runs, and the original, with them.
  warm  the same command again with the cache each tool built.
The profile's pages are in the OS page cache for both (read once before timing). Wall time is the median of
N runs; peak RSS (max over the runs) comes from wait4(). The sqlite3 CLI line runs the bare aggregates behind
`aisp profile summary` (kernels by name, runtime API by name, memcpy by kind, OSRT by name, NVTX by text).
Prints a Markdown table.

nsys-ai needs its DuckDB sqlite_scanner installed beforehand (pip install duckdb-extension-sqlite-scanner, then
duckdb's install_extension on the .duckdb_extension file) or it waits on a download.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

QUESTIONS = [
    # (question, aisp args, nsys-ai args)
    ("summary", ["profile", "summary"], ["skill", "run", "profile_health_manifest"]),
    ("top kernels", ["profile", "kernels"], ["skill", "run", "top_kernels"]),
    ("idle gaps", ["profile", "gaps"], ["skill", "run", "gpu_idle_gaps"]),
    ("NCCL", ["profile", "nccl"], ["skill", "run", "nccl_breakdown"]),
    ("overlap", ["profile", "overlap"], ["skill", "run", "overlap_breakdown"]),
    ("rules / root causes", ["profile", "rules"], ["skill", "run", "root_cause_matcher"]),
]

SUMMARY_SQL = """
SELECT shortName, count(*), sum("end"-start) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY shortName;
SELECT nameId, count(*), sum("end"-start) FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY nameId;
SELECT copyKind, count(*), sum(bytes), sum("end"-start) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind;
SELECT nameId, count(*), sum("end"-start) FROM OSRT_API GROUP BY nameId;
SELECT coalesce(text, textId), count(*), sum("end"-start) FROM NVTX_EVENTS GROUP BY 1;
"""


def run(cmd, env=None, cwd=None):
    """Wall seconds and peak RSS (MiB) of one process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {code}: {err[-800:]}")
    return wall, ru.ru_maxrss / 1024


def measure(make_cmd, runs, prepare):
    walls, rss = [], 0.0
    for _ in range(runs):
        cmd, env, cwd = prepare(make_cmd)
        w, r = run(cmd, env, cwd)
        walls.append(w)
        rss = max(rss, r)
    return statistics.median(walls), rss


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = 3
    if "--runs" in sys.argv:
        runs = int(sys.argv[sys.argv.index("--runs") + 1])
        args = [a for a in args if a != str(runs)]
    skip_nsys_ai = "--skip-nsys-ai" in sys.argv
    aisp, nsys_ai, profile = args[:3]
    profile = os.path.abspath(profile)
    with open(profile, "rb") as f:  # into the page cache
        while f.read(1 << 24):
            pass
    size_mb = os.path.getsize(profile) / 1e6
    work = tempfile.mkdtemp(prefix="aisp-speed-")
    rows = []

    t0 = time.perf_counter()
    subprocess.run(["sqlite3", profile], input=SUMMARY_SQL.encode(), stdout=subprocess.DEVNULL, check=True)
    sql_s = time.perf_counter() - t0

    for question, a_args, n_args in QUESTIONS:
        def aisp_cold(_):
            home = tempfile.mkdtemp(dir=work)
            return [aisp, *a_args, profile, "--format", "json"], {**os.environ, "AISP_HOME": home}, None

        warm_home = tempfile.mkdtemp(dir=work)
        run([aisp, *a_args, profile, "--format", "json"], {**os.environ, "AISP_HOME": warm_home})

        def aisp_warm(_):
            return [aisp, *a_args, profile, "--format", "json"], {**os.environ, "AISP_HOME": warm_home}, None

        a_cold = measure(None, runs, aisp_cold)
        a_warm = measure(None, runs, aisp_warm)
        n_cold = n_warm = None
        if not skip_nsys_ai:
            def nsys_cold(_):
                d = tempfile.mkdtemp(dir=work)
                dst = os.path.join(d, os.path.basename(profile))
                shutil.copyfile(profile, dst)  # a copy: nsys-ai writes indexes into the file it reads
                return [nsys_ai, *n_args, dst], None, d

            n_cold = measure(None, runs, nsys_cold)
            wd = tempfile.mkdtemp(dir=work)
            wdst = os.path.join(wd, os.path.basename(profile))
            shutil.copyfile(profile, wdst)
            run([nsys_ai, *n_args, wdst], None, wd)
            n_warm = measure(None, runs, lambda _: ([nsys_ai, *n_args, wdst], None, wd))
        rows.append((question, a_args, n_args, a_cold, a_warm, n_cold, n_warm))
    shutil.rmtree(work, ignore_errors=True)

    print(f"profile: {profile} ({size_mb:.1f} MB); median of {runs} runs; sqlite3 CLI bare summary aggregates: {sql_s:.3f} s\n")
    print("| question | aisp cold s | aisp warm s | aisp peak RSS MiB | nsys-ai cold s | nsys-ai warm s | nsys-ai peak RSS MiB | cold ratio | warm ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for q, a_args, n_args, ac, aw, nc, nw in rows:
        if nc:
            print(f"| {q} (`aisp {' '.join(a_args)}` vs `nsys-ai {' '.join(n_args)}`) | {ac[0]:.3f} | {aw[0]:.3f} | {max(ac[1], aw[1]):.0f} | "
                  f"{nc[0]:.3f} | {nw[0]:.3f} | {max(nc[1], nw[1]):.0f} | {nc[0] / ac[0]:.1f}× | {nw[0] / aw[0]:.1f}× |")
        else:
            print(f"| {q} (`aisp {' '.join(a_args)}`) | {ac[0]:.3f} | {aw[0]:.3f} | {max(ac[1], aw[1]):.0f} | – | – | – | – | – |")


if __name__ == "__main__":
    main()
