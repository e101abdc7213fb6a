#!/usr/bin/env python3
"""MCP server latency and memory, measured the same way for any stdio server.

For each server command: start it cold, send `initialize`, `notifications/initialized`
and `tools/list` over raw newline-delimited JSON-RPC, and time from process start to
the tools/list answer. Then, on the warm server, time N sequential round trips of
`tools/list` and of one trivial tools/call, and read the resident memory after idling.

usage: mcp_latency.py [--runs 10] [--calls 200] NAME=CMD [NAME=CMD ...]
       e.g. aisp='target/release/aisp serve' nsys-ai='/tmp/venv/bin/nsys-ai-mcp'
Optionally NAME=CMD@TOOL:ARGS_JSON names the trivial tool (default aisp_status / first tool).
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import time


# Arrival time of the last reply line, before the client parses it: separates the
# server and transport from the client's own JSON decoding (proportional to size).
LAST_ARRIVAL = [0.0]


def rpc(proc, msg, want_id=None):
    proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()
    if want_id is None:
        return None
    while True:
        line = proc.stdout.readline()
        LAST_ARRIVAL[0] = time.perf_counter()
        if not line:
            raise RuntimeError("server closed stdout")
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            raise RuntimeError(f"non-JSON on stdout: {line[:200]!r}")
        if reply.get("id") == want_id:
            return reply


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def start(cmd, env):
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    rpc(proc, INIT, 1)
    rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    tools = rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, 2)
    return proc, time.perf_counter() - t0, tools["result"]["tools"]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(name, spec, runs, calls):
    if "@" in spec:
        cmd_text, tool_spec = spec.rsplit("@", 1)
        tool, args = tool_spec.split(":", 1)
        args = json.loads(args)
    else:
        cmd_text, tool, args = spec, None, {}
    cmd = shlex.split(cmd_text)
    env = dict(os.environ, RUST_LOG="warn")
    cold = []
    for _ in range(runs):
        proc, dt, tools = start(cmd, env)
        cold.append(dt)
        proc.stdin.close()
        proc.wait(timeout=30)
    proc, _, tools = start(cmd, env)
    tool = tool or tools[0]["name"]
    next_id = 10
    list_t, list_recv_t, call_t = [], [], []
    list_bytes = len(json.dumps({"tools": tools}, separators=(",", ":")))
    for _ in range(calls):
        t0 = time.perf_counter()
        rpc(proc, {"jsonrpc": "2.0", "id": next_id, "method": "tools/list"}, next_id)
        list_t.append(time.perf_counter() - t0)
        list_recv_t.append(LAST_ARRIVAL[0] - t0)
        next_id += 1
        t0 = time.perf_counter()
        reply = rpc(proc, {"jsonrpc": "2.0", "id": next_id, "method": "tools/call",
                           "params": {"name": tool, "arguments": args}}, next_id)
        call_t.append(time.perf_counter() - t0)
        next_id += 1
    time.sleep(1.0)
    mem = rss_mib(proc.pid)
    proc.stdin.close()
    proc.wait(timeout=30)
    return {
        "server": name,
        "tools": len(tools),
        "cold_start_to_tools_list_ms_median": round(1000 * statistics.median(cold), 1),
        "cold_start_to_tools_list_ms_min": round(1000 * min(cold), 1),
        "tools_list_bytes": list_bytes,
        "tools_list_ms_median": round(1000 * statistics.median(list_t), 3),
        "tools_list_received_ms_median": round(1000 * statistics.median(list_recv_t), 3),
        "trivial_call": tool,
        "trivial_call_ms_median": round(1000 * statistics.median(call_t), 3),
        "idle_rss_mib": round(mem, 1),
        "call_error": reply.get("result", {}).get("isError"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("servers", nargs="+")
    a = ap.parse_args()
    results = []
    for s in a.servers:
        name, spec = s.split("=", 1)
        results.append(measure(name, spec, a.runs, a.calls))
        print(json.dumps(results[-1]))
    if len(results) >= 2:
        base, other = results[0], results[1]
        for k in ("cold_start_to_tools_list_ms_median", "tools_list_ms_median", "trivial_call_ms_median", "idle_rss_mib"):
            print(f"{other['server']} / {base['server']} {k}: {other[k] / base[k]:.1f}x")


if __name__ == "__main__":
    main()
