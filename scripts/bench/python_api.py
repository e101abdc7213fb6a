#!/usr/bin/env python3
"""The Python API's speed: `engine.profile.summary` in process vs the CLI vs nsys-ai's Python API, and the
per-call overhead of a trivial operation.

usage: python scripts/bench/python_api.py AISP_BIN PROFILE.sqlite [--runs N] [--calls N] [--skip-nsys-ai]

Run with the Python that has the release extension installed (`maturin develop --release -m python/Cargo.toml`)
and, for the comparison, nsys-ai 0.3.0 with DuckDB's sqlite_scanner installed (see BENCHMARKS.md).

  aisp in process  cold: a fresh Engine on a fresh $AISP_HOME (empty result cache), the call alone timed;
                   warm: the same call again on that engine (the answer cache in the store).
  aisp CLI         cold/warm: whole `aisp profile summary FILE --format json` processes, same homes.
  nsys-ai          cold: `nsys_ai.profile.open(copy)` + `summary.gpu_summary(prof, d)` for every GPU, on a fresh
                   copy of the file in a fresh folder (nsys-ai writes indexes and a sidecar cache next to the file
                   it reads); warm: the same again on that copy (its cache built).
  per call         medians of N sequential calls in one process: `engine.status()` and `engine.list_domains()`
                   (the whole path: keyword check, json.dumps, the extension, dispatch on the runtime thread,
                   output check, json.loads, Result), and the extension's floor: a call to an unknown tool
                   (the FFI crossing, the runtime hop is skipped: answered before dispatch); and the same operations
                   through `dispatch::invoke` alone, called from Rust (`_native.Engine._time_dispatch`).
Prints Markdown tables.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import aisp


def median_ms(xs):
    return statistics.median(xs) * 1e3


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 5
    calls = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else 2000
    args = [a for a in args if a not in (str(runs), str(calls))]
    aisp_bin, profile = args[0], os.path.abspath(args[1])
    skip_nsys_ai = "--skip-nsys-ai" in sys.argv
    with open(profile, "rb") as f:  # into the page cache for every contender
        while f.read(1 << 24):
            pass
    size_mb = os.path.getsize(profile) / 1e6
    rows = []

    # --- aisp in process and through the CLI --------------------------------------------------------------
    cold, warm, cli_cold, cli_warm = [], [], [], []
    for _ in range(runs):
        home = tempfile.mkdtemp(prefix="aisp-bench-")
        engine = aisp.Engine(home=home)
        cold.append(timed(lambda: engine.profile.summary(path=profile)))
        warm.append(timed(lambda: engine.profile.summary(path=profile)))
        del engine
        shutil.rmtree(home)
        home = tempfile.mkdtemp(prefix="aisp-bench-cli-")
        env = dict(os.environ, AISP_HOME=home)
        cmd = [aisp_bin, "profile", "summary", profile, "--format", "json"]
        run = lambda: subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)  # noqa: E731
        cli_cold.append(timed(run))
        cli_warm.append(timed(run))
        shutil.rmtree(home)
    rows.append(("aisp `engine.profile.summary` (in process)", median_ms(cold), median_ms(warm)))
    rows.append(("aisp CLI `aisp profile summary` (whole process)", median_ms(cli_cold), median_ms(cli_warm)))

    # --- nsys-ai's Python API -------------------------------------------------------------------------------
    if not skip_nsys_ai:
        import nsys_ai
        from nsys_ai import profile as nprofile
        from nsys_ai import summary as nsummary

        def nsys_ai_summary(path):
            prof = nprofile.open(path)
            try:
                devices = sorted(prof.meta.gpu_info) or [0]
                return [nsummary.gpu_summary(prof, d) for d in devices]
            finally:
                close = getattr(prof, "close", None)
                if close:
                    close()

        n_cold, n_warm = [], []
        for _ in range(runs):
            d = tempfile.mkdtemp(prefix="nsysai-bench-")
            copy = os.path.join(d, os.path.basename(profile))
            shutil.copyfile(profile, copy)
            n_cold.append(timed(lambda: nsys_ai_summary(copy)))
            n_warm.append(timed(lambda: nsys_ai_summary(copy)))
            shutil.rmtree(d)
        rows.append(
            (f"nsys-ai {nsys_ai.__version__} `profile.open` + `summary.gpu_summary` per GPU", median_ms(n_cold), median_ms(n_warm))
        )

    print(f"\n`profile summary` on {os.path.basename(profile)} ({size_mb:.0f} MB), median of {runs} runs\n")
    print("| contender | cold ms | warm ms |")
    print("|---|---|---|")
    for name, c, w in rows:
        print(f"| {name} | {c:,.1f} | {w:,.1f} |")
    base_c, base_w = rows[0][1], rows[0][2]
    for name, c, w in rows[1:]:
        print(f"\n{name}: {c / base_c:.1f}× cold, {w / base_w:.1f}× warm the in-process time")

    # --- per-call overhead ------------------------------------------------------------------------------------
    engine = aisp.Engine(home=tempfile.mkdtemp(prefix="aisp-bench-calls-"))
    native = engine._native
    results = []
    for label, fn in (
        ("`engine.status()`", engine.status),
        ("`engine.list_domains()`", engine.list_domains),
        ("extension floor: `_native.call` of an unknown tool", lambda: native.call("aisp_no_such_tool", "{}", None)),
    ):
        for _ in range(50):
            fn()
        xs = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            xs.append(time.perf_counter() - t0)
        xs.sort()
        results.append((label, statistics.median(xs) * 1e6, xs[int(0.9 * len(xs))] * 1e6))
    # The same operations through dispatch alone, called from Rust on the engine's runtime: the rest is this
    # front end's overhead (Python wrapper, JSON both ways, the FFI crossing, the hop to the runtime and back).
    alone = {
        "`engine.status()`": native._time_dispatch("aisp_status", "{}", calls) * 1e6,
        "`engine.list_domains()`": native._time_dispatch("aisp_list_domains", "{}", calls) * 1e6,
    }
    print(f"\nper call, {calls} sequential calls, one engine\n")
    print("| call | median µs | p90 µs | dispatch alone (mean, from Rust) µs | Python front end's overhead µs |")
    print("|---|---|---|---|---|")
    for label, med, p90 in results:
        a = alone.get(label)
        extra = f"{a:,.1f} | {med - a:,.1f}" if a is not None else "– | –"
        print(f"| {label} | {med:,.1f} | {p90:,.1f} | {extra} |")


if __name__ == "__main__":
    main()
