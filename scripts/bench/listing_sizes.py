#!/usr/bin/env python3
"""Tool-listing sizes over MCP stdio, counted as issue 14 counts them.

For each toolset (the default, `--tools all`, `--tools core`): the number of tools, the listing size
= sum over listed tools of len(json.dumps({"name", "description", "input_schema"})) with Python's
default (ASCII-escaping) json.dumps, an estimate of tokens (characters / 4), the size of the whole
definitions (output schemas included) and the largest single definition.

usage: scripts/bench/listing_sizes.py BINARY [BINARY ...]   (e.g. a build of main before, and this one)
"""
import json
import os
import subprocess
import sys
import tempfile


def listing(binary, args):
    home = tempfile.mkdtemp(prefix="aisp-listing-")
    env = dict(os.environ, RUST_LOG="warn", AISP_HOME=home)
    env.pop("AISP_TOOLS", None)
    p = subprocess.Popen([binary, "serve", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)

    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()

    def answer():
        while True:
            m = json.loads(p.stdout.readline())
            if "id" in m:
                return m

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "sizes", "version": "0"}}})
    answer()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    tools = answer()["result"]["tools"]
    p.stdin.close()
    p.wait()
    return tools


def main():
    for binary in sys.argv[1:]:
        print(binary)
        for name, args in (("default", []), ("all", ["--tools", "all"]), ("core", ["--tools", "core"])):
            tools = listing(binary, args)
            listed = sum(len(json.dumps({"name": t["name"], "description": t["description"],
                                         "input_schema": t["inputSchema"]})) for t in tools)
            whole = sum(len(json.dumps(t)) for t in tools)
            big = max((len(json.dumps(t)), t["name"]) for t in tools)
            print(f"  {name:8} {len(tools):3} tools  listing {listed:7,} chars ~{listed // 4:6,} tokens  "
                  f"whole {whole:7,} chars  largest {big[0]:6,} ({big[1]})")


main()
