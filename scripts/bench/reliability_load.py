#!/usr/bin/env python3
"""Peak memory of `aisp serve --transport http` under concurrent profile calls.

usage: python3 scripts/bench/reliability_load.py AISP_BIN [AISP_BIN ...] [--levels 1,10,50,200]
                                                 [--profile tests/data/ddp.sqlite.xz]

For each binary and each concurrency level N, starts a fresh server (fresh $AISP_HOME, so no result cache),
fires N `POST /api/profile/summary` calls at once on the 56 MB ddp export, each with a different `limit`
(1..N, so no cache or single-flight can serve one call from another's answer), and waits for all of them.
Reports the server's peak RSS (VmHWM from /proc, the kernel's high-water mark), its peak thread count
(sampled every 20 ms), the wall time for all N, and how many calls failed (non-200 or connection errors).
The export is decompressed once into a temporary folder and read from the page cache by every run.
Prints a Markdown table.
"""
import http.client
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = v.strip()
    except OSError:
        pass
    return out


def start_server(binary, home, args=(), extra_env=None):
    """A fresh `aisp serve --transport http` on a free port: (process, port)."""
    env = dict(os.environ)
    env.update({"AISP_HOME": home, "AISP_CONFIG": os.path.join(home, "none.toml"), "RUST_LOG": "warn"})
    for k in ["AISP_TOOLS", "AISP_ALLOW_EXEC", "AISP_TOKEN", "AISP_HEAVY_CALLS", "AISP_MAX_JOBS"]:
        env.pop(k, None)
    env.update(extra_env or {})
    p = subprocess.Popen([binary, "serve", "--transport", "http", "--bind", "127.0.0.1:0", *args],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    port = None
    deadline = time.time() + 30
    while time.time() < deadline:
        line = p.stderr.readline()
        if "listening on http://" in line:
            port = int(line.split("listening on http://")[1].split()[0].rsplit(":", 1)[1])
            break
    if port is None:
        p.kill()
        raise SystemExit(f"{binary} did not start")
    # Keep draining stderr so the server never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    return p, port


def call(port, body, results, i):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
        c.request("POST", "/api/profile/summary", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        ok = r.status == 200 and b'"cuda_gpu_kern_sum"' in data
        results[i] = (ok, r.status, data[:200] if not ok else b"")
        c.close()
    except Exception as e:  # a refused or reset connection counts as a failure
        results[i] = (False, None, str(e).encode())


def run_level(binary, profile, n):
    home = tempfile.mkdtemp(prefix="aisp-load-")
    p, port = start_server(binary, home)
    try:
        peak_threads = 0
        stop = threading.Event()

        def sample():
            nonlocal peak_threads
            while not stop.is_set():
                t = proc_status(p.pid).get("Threads")
                if t:
                    peak_threads = max(peak_threads, int(t))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        results = [None] * n
        threads = [threading.Thread(target=call, args=(port, {"path": profile, "limit": i + 1}, results, i))
                   for i in range(n)]
        started = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - started
        stop.set()
        sampler.join()
        st = proc_status(p.pid)
        hwm_kb = int(st.get("VmHWM", "0 kB").split()[0])
        failed = [r for r in results if not r or not r[0]]
        alive = p.poll() is None
        return {"n": n, "peak_rss_mb": hwm_kb / 1024, "peak_threads": peak_threads, "wall_s": wall,
                "failed": len(failed), "first_failure": failed[0] if failed else None, "alive": alive}
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(home, ignore_errors=True)


def main():
    args = sys.argv[1:]
    levels = [1, 10, 50, 200]
    profile_xz = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "ddp.sqlite.xz")
    binaries = []
    i = 0
    while i < len(args):
        if args[i] == "--levels":
            levels = [int(x) for x in args[i + 1].split(",")]
            i += 2
        elif args[i] == "--profile":
            profile_xz = args[i + 1]
            i += 2
        else:
            binaries.append(os.path.abspath(args[i]))
            i += 1
    if not binaries:
        raise SystemExit(__doc__)
    work = tempfile.mkdtemp(prefix="aisp-load-data-")
    try:
        profile = os.path.join(work, "ddp.sqlite")
        if profile_xz.endswith(".xz"):
            with lzma.open(profile_xz) as src, open(profile, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        else:
            shutil.copyfile(profile_xz, profile)
        with open(profile, "rb") as f:  # into the page cache
            while f.read(1 << 20):
                pass
        print(f"profile: {os.path.getsize(profile) / 1e6:.1f} MB, {os.cpu_count()} CPUs")
        print()
        print("| binary | concurrent calls | peak RSS (MB) | peak threads | wall (s) | failed | server alive |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for b in binaries:
            for n in levels:
                r = run_level(b, profile, n)
                print(f"| {os.path.basename(os.path.dirname(b)) + '/' + os.path.basename(b)} | {n} | "
                      f"{r['peak_rss_mb']:.0f} | {r['peak_threads']} | {r['wall_s']:.1f} | {r['failed']} | "
                      f"{'yes' if r['alive'] else 'NO'} |", flush=True)
                if r["first_failure"]:
                    print(f"  first failure: {r['first_failure']}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
