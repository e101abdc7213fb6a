#!/usr/bin/env python3
"""Floods of issue 33 against `aisp serve --transport http`: peak memory and control-call latency.

usage: python3 scripts/bench/floods.py [LABEL=]AISP_BIN ... [--floods jobs,bodies20,bodies120,sessions,idle,kineto4,kineto8]
                                       [--kineto-gib 2]

For each binary and each flood, a fresh server (fresh $AISP_HOME, port 0) takes the flood; while it runs, a
control call (`POST /api/status`, then `POST /api/job/list` where jobs are involved) is timed every 0.5 s from
another connection. Reported per flood: the server's peak RSS (VmHWM, the kernel's high-water mark since start),
the slowest control call during the flood (or "no answer" after 20 s), and what the flood got back.

Floods (the adversarial pass's, issue 33):
- jobs: 600 `aisp_system_monitor` jobs (`async: true`, 120 s each), one connection, one after another;
  jobs600: the same with AISP_MAX_JOBS=600 (every job accepted: more jobs than tokio's 512 blocking threads).
- bodies20 / bodies120: 20 x 60 MB / 120 x 63 MiB request bodies sent at once without the token to a server
  started with one (`--token`); the control calls carry it.
- sessions: 30,000 MCP `initialize` requests (protocol 2025-06-18, each one a session), 16 at a time.
- idle: 1,100 TCP connections that send nothing, then one `GET /healthz` and the control calls.
- kineto4 / kineto8: 4 / 8 concurrent `aisp_profile_compile {"trace": F}` on a sparse file F of --kineto-gib GiB
  whose byte 0 is `x` (not JSON), like the issue's reproducer. (Sparse: no disk space, but read whole it is
  F's size in memory per call: --kineto-gib 2 with 8 calls needs 16+ GiB before the fix; choose with care on a
  shared machine.)

Prints a Markdown table. Needs only the Python standard library.
"""
import http.client
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability_load  # noqa: E402  (start_server: one way to start a server for both scripts)

TOKEN = "flood-token"


def vm_hwm_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def start_server(binary, home, token=False, extra_env=None):
    return reliability_load.start_server(binary, home, ["--token", TOKEN] if token else [], extra_env)


def post(port, path, body, token=None, timeout=20.0, headers=None):
    """(status, json) or (None, error text)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    h.update(headers or {})
    try:
        data = body if isinstance(body, (bytes, bytearray, memoryview)) else json.dumps(body).encode()
        c.request("POST", path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw or b"null")
        except ValueError:
            return r.status, raw[:200].decode(errors="replace")
    except Exception as e:  # noqa: BLE001 - a flood reports every failure as data
        return None, f"{type(e).__name__}: {e}"
    finally:
        c.close()


class ControlProbe:
    """Times control calls every 0.5 s while a flood runs."""

    def __init__(self, port, token=None, jobs=False):
        self.port, self.token, self.jobs = port, token, jobs
        self.worst = 0.0
        self.failures = 0
        self.calls = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _one(self, path, body):
        t = time.time()
        status, _ = post(self.port, path, body, token=self.token, timeout=20.0)
        took = time.time() - t
        self.calls += 1
        if status != 200:
            self.failures += 1
            took = max(took, 20.0)
        self.worst = max(self.worst, took)

    def _run(self):
        while not self._stop.is_set():
            self._one("/api/status", {})
            if self.jobs:
                self._one("/api/job/list", {"limit": 5})
            self._stop.wait(0.5)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(timeout=45)

    def text(self):
        if self.calls == 0:
            return "none made"
        s = f"{self.worst:.2f} s"
        if self.failures:
            s += f" ({self.failures} of {self.calls} unanswered in 20 s)"
        return s


def flood_jobs(port, _ctx):
    accepted = refused = hung = 0
    for _ in range(600):
        status, v = post(port, "/api/system/monitor", {"duration_s": 120, "interval_ms": 1000, "async": True})
        if status == 200:
            accepted += 1
        elif status is None:
            hung += 1
            break
        else:
            refused += 1
    note = f"{accepted} jobs accepted, {refused} refused"
    if hung:
        note += f", then a job call got no answer in 20 s (stopped at {accepted + refused + hung})"
    return note


def send_body(port, size):
    """POST `size` bytes to /api/status over a raw socket, 1 MiB at a time, reading the answer as soon as the
    server sends one (a server that refuses before reading answers mid-body). The answer's status, or 'closed'."""
    import select
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    head = (f"POST /api/status HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\n\r\n").encode()
    chunk = bytes(1 << 20)
    status = "closed"
    try:
        s.sendall(head)
        sent = 0
        while sent < size:
            r, _, _ = select.select([s], [], [], 0)
            if r:
                break
            n = min(len(chunk), size - sent)
            s.sendall(chunk[:n])
            sent += n
    except OSError:
        pass
    try:
        data = s.recv(64)
        if data.startswith(b"HTTP/1.1 "):
            status = data[9:12].decode()
    except OSError:
        pass
    s.close()
    return status


def flood_bodies(n, size):
    def run(port, _ctx):
        codes = {}
        lock = threading.Lock()

        def one():
            status = send_body(port, size)
            with lock:
                codes[status] = codes.get(status, 0) + 1

        ts = [threading.Thread(target=one) for _ in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return ", ".join(f"{k}: {v}" for k, v in sorted(codes.items()))

    return run


def flood_sessions(port, _ctx, total=30_000, workers=16):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}}).encode()
    counts = {}
    lock = threading.Lock()
    left = [total]

    def worker():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while True:
            with lock:
                if left[0] == 0:
                    break
                left[0] -= 1
            try:
                c.request("POST", "/mcp", body=body, headers={
                    "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
                r = c.getresponse()
                r.read()
                status = r.status
            except Exception:  # noqa: BLE001
                status = None
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            with lock:
                counts[status] = counts.get(status, 0) + 1
        c.close()

    ts = [threading.Thread(target=worker) for _ in range(workers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return ", ".join(f"{k if k is not None else 'error'}: {v}" for k, v in sorted(counts.items(), key=str))


def flood_idle(port, ctx, n=1100):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        socks.append(s)
    time.sleep(1.5)
    t = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", "/healthz", headers={"Connection": "close"})
        r = c.getresponse()
        r.read()
        took = time.time() - t
        note = f"GET /healthz behind {n} idle sockets: {r.status} in {took:.2f} s"
    except Exception as e:  # noqa: BLE001
        note = f"GET /healthz behind {n} idle sockets: {type(e).__name__} after {time.time() - t:.1f} s"
    ctx["hold"] = socks
    return note


def flood_kineto(n):
    def run(port, ctx):
        path = ctx["sparse"]
        results = {}
        lock = threading.Lock()

        def one():
            status, v = post(port, "/api/profile/compile", {"trace": path}, timeout=600)
            with lock:
                results[status] = results.get(status, 0) + 1

        ts = [threading.Thread(target=one) for _ in range(n)]
        t = time.time()
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        return (f"{n} calls: " + ", ".join(f"{k if k is not None else 'error'}: {v}" for k, v in results.items())
                + f" in {time.time() - t:.1f} s")

    return run


FLOODS = {
    "jobs": ("600 async monitor jobs", flood_jobs, False, True),
    "jobs600": ("600 async monitor jobs, AISP_MAX_JOBS=600", flood_jobs, False, True),
    "bodies20": ("20 x 60 MB bodies, no token", flood_bodies(20, 60_000_000), True, False),
    "bodies120": ("120 x 63 MiB bodies, no token", flood_bodies(120, 63 << 20), True, False),
    "sessions": ("30,000 MCP sessions", flood_sessions, False, False),
    "idle": ("1,100 idle sockets", flood_idle, False, False),
    "kineto4": ("4 x Kineto {gib} GiB, byte 0 not JSON", flood_kineto(4), False, False),
    "kineto8": ("8 x Kineto {gib} GiB, byte 0 not JSON", flood_kineto(8), False, False),
}


def main():
    args = sys.argv[1:]
    floods = list(FLOODS)
    gib = 2.0
    bins = []
    i = 0
    while i < len(args):
        if args[i] == "--floods":
            floods = args[i + 1].split(",")
            i += 2
        elif args[i] == "--kineto-gib":
            gib = float(args[i + 1])
            i += 2
        else:
            bins.append(args[i])
            i += 1
    if not bins:
        raise SystemExit(__doc__)
    work = tempfile.mkdtemp(prefix="aisp-floods-")
    sparse = os.path.join(work, "trace.json")
    with open(sparse, "wb") as f:
        f.truncate(int(gib * (1 << 30)))
        f.seek(0)
        f.write(b"x")
    rows = []
    try:
        for spec in bins:
            tag, _, binary = spec.rpartition("=")
            tag = tag or binary
            for name in floods:
                label, run, token, jobs = FLOODS[name]
                home = tempfile.mkdtemp(prefix="home-", dir=work)
                env = {"AISP_MAX_JOBS": "600"} if name == "jobs600" else None
                p, port = start_server(binary, home, token=token, extra_env=env)
                ctx = {"sparse": sparse}
                try:
                    time.sleep(0.3)
                    with ControlProbe(port, token=TOKEN if token else None, jobs=jobs) as probe:
                        t = time.time()
                        note = run(port, ctx)
                        wall = time.time() - t
                        time.sleep(1.0)
                    peak = vm_hwm_mb(p.pid)
                    alive = p.poll() is None
                    rows.append((tag, label.format(gib=f"{gib:g}"), f"{peak:.0f}" if alive else f"{peak:.0f} (exited)",
                                 probe.text(), f"{wall:.1f}", note))
                    print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
                finally:
                    for s in ctx.get("hold", []):
                        s.close()
                    p.kill()
                    p.wait()
                    shutil.rmtree(home, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| binary | flood | peak RSS (MB) | slowest control call | flood wall (s) | what the flood got |")
    print("|---|---|---:|---|---:|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
