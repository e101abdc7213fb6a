#!/usr/bin/env python3
"""The nine usual questions about one export over ONE MCP stdio session.

Starts `AISP serve` (stdio) on a fresh $AISP_HOME (empty answer cache; every question is a
different tool, so no answer is ever served from the answer cache), asks the nine questions
in order (tools/call of Domain-tier tools works without enabling them), and prints each
question's wall time (request written -> answer read), the total, the number of progress
notifications, and the server's peak RSS (VmHWM). Also times reading the file once through
the page cache (`cat FILE > /dev/null`, warm) as the physical floor.

usage: profile_session.py AISP FILE [--env K=V ...] [--label NAME] [--json OUT] [--save DIR]
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

NINE = [
    ("info", "aisp_profile_info", {}),
    ("summary", "aisp_profile_summary", {}),
    ("kernels", "aisp_profile_kernels", {}),
    ("gaps", "aisp_profile_gaps", {}),
    ("rules", "aisp_profile_rules", {}),
    ("memory", "aisp_profile_memory", {}),
    ("nvtx", "aisp_profile_nvtx", {}),
    ("iterations", "aisp_profile_iterations", {}),
    ("nccl", "aisp_profile_nccl", {}),
]


def rpc(proc, msg, want_id=None, progress=None):
    proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()
    if want_id is None:
        return None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("server closed stdout")
        reply = json.loads(line)
        if reply.get("method") == "notifications/progress" and progress is not None:
            progress.append(reply["params"])
            continue
        if reply.get("id") == want_id:
            return reply


def hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


def page_cache_read_s(path):
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # warm it
    t0 = time.perf_counter()
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("aisp")
    ap.add_argument("file")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--label", default="")
    ap.add_argument("--json")
    ap.add_argument("--save", help="folder to write each answer's structuredContent into")
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="aisp-session-")
    env = dict(os.environ, AISP_HOME=home)
    for kv in a.env:
        k, v = kv.split("=", 1)
        env[k] = v
    floor = page_cache_read_s(a.file)
    proc = subprocess.Popen([a.aisp, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}}, 1)
    rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    rows = []
    total = 0.0
    progress = []
    for i, (label, tool, args) in enumerate(NINE):
        args = dict(args, path=a.file)
        msg = {"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
               "params": {"name": tool, "arguments": args, "_meta": {"progressToken": f"p{i}"}}}
        before = len(progress)
        t0 = time.perf_counter()
        reply = rpc(proc, msg, 100 + i, progress)
        dt = time.perf_counter() - t0
        total += dt
        res = reply.get("result", {})
        ok = "error" not in reply and not res.get("isError")
        if a.save:
            os.makedirs(a.save, exist_ok=True)
            with open(os.path.join(a.save, f"{label}.json"), "w") as f:
                json.dump(res.get("structuredContent", res), f)
        rows.append({"question": label, "tool": tool, "s": round(dt, 4), "ok": ok,
                     "progress": len(progress) - before})
    status = rpc(proc, {"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                        "params": {"name": "aisp_status", "arguments": {}}}, 99)
    tables = None
    try:
        tables = status["result"]["structuredContent"]["profile_tables"]
    except (KeyError, TypeError):
        pass
    peak = hwm_mib(proc.pid)
    proc.stdin.close()
    proc.wait(timeout=30)
    shutil.rmtree(home, ignore_errors=True)
    out = {"label": a.label, "file": a.file, "bytes": os.path.getsize(a.file),
           "page_cache_read_s": round(floor, 3), "questions": rows, "total_s": round(total, 3),
           "peak_rss_mib": round(peak) if peak else None, "profile_tables": tables}
    print(f"{a.label}: {a.file} ({out['bytes'] / 1e6:.1f} MB), page-cache read {floor:.3f} s")
    for r in rows:
        print(f"  {r['question']:11} {r['s']:8.3f} s  ok={r['ok']}  progress={r['progress']}")
    print(f"  total {total:.3f} s, peak RSS {out['peak_rss_mib']} MiB")
    if tables:
        print(f"  kept: {tables.get('used_bytes', 0) / 2**20:.0f} MiB of {tables.get('budget_bytes', 0) / 2**20:.0f} MiB; "
              f"not kept: {[(n['table'], n['bytes']) for n in tables.get('not_kept', [])]}")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
