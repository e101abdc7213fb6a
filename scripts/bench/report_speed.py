#!/usr/bin/env python3
"""Wall time of a report of one profile: `aisp export pdf|html --profile FILE`,
whole processes, each run with a fresh $AISP_HOME (no result cache) and a new
output file. With --before BIN, the same file through an older aisp's
`profile export --format html` (the text-only HTML report it had), side by side.

usage: report_speed.py AISP PROFILE [--runs N] [--before OLD_AISP]
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time


def timed(cmd, env):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return dt, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("aisp")
    ap.add_argument("profile")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--before", help="an older aisp binary with `profile export --format html`")
    a = ap.parse_args()
    rows = []
    cases = [
        ("export pdf", lambda out: [a.aisp, "--format", "json", "export", "pdf", "--profile", a.profile, "--output", out + ".pdf"]),
        ("export html", lambda out: [a.aisp, "--format", "json", "export", "html", "--profile", a.profile, "--output", out + ".html"]),
    ]
    if a.before:
        cases.append(
            ("before: profile export --format html", lambda out: [a.before, "profile", "export", "--json", json.dumps({"path": a.profile, "format": "html", "output": out + ".html"})])
        )
    # One untimed run so the file's pages are in the OS page cache for every case.
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, AISP_HOME=home)
        timed(cases[0][1](os.path.join(home, "warm")), env)
    for name, make in cases:
        times = []
        info = {}
        for i in range(a.runs):
            with tempfile.TemporaryDirectory() as home:
                env = dict(os.environ, AISP_HOME=home)
                dt, out = timed(make(os.path.join(home, f"r{i}")), env)
                times.append(dt)
                try:
                    info = json.loads(out)
                except json.JSONDecodeError:
                    info = {}
        rows.append((name, statistics.median(times), min(times), max(times), info.get("pages"), info.get("bytes") or info.get("result", {}).get("bytes")))
    print(f"{'case':42} {'median s':>9} {'min s':>7} {'max s':>7} {'pages':>6} {'bytes':>9}")
    for name, med, lo, hi, pages, size in rows:
        print(f"{name:42} {med:9.3f} {lo:7.3f} {hi:7.3f} {str(pages or ''):>6} {str(size or ''):>9}")


if __name__ == "__main__":
    main()
