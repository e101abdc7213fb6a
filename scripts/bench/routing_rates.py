#!/usr/bin/env python3
"""Routing rates of `aisp ai suggest-tools` over tests/data/routing_eval.toml, through the CLI of the
given binaries (run on a host without a GPU, as tests/it/routing.rs simulates): first suggestion right,
right tool in the top three, and GPU tools first on questions not about the GPU; for the tuned part
and the held-out part separately.

usage: scripts/bench/routing_rates.py BINARY [BINARY ...]
"""
import json
import os
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    questions = tomllib.load(open(os.path.join(ROOT, "tests/data/routing_eval.toml"), "rb"))["question"]
    for binary in sys.argv[1:]:
        env = dict(os.environ, RUST_LOG="error", AISP_HOME=tempfile.mkdtemp(prefix="aisp-routing-"))
        tools = {t["tool"]: t for t in json.loads(subprocess.check_output([binary, "tools", "--format", "json"], env=env))["tools"]}
        rows = {False: [0, 0, 0, 0], True: [0, 0, 0, 0]}  # total, first, top3, gpu-first wrongly
        for q in questions:
            out = subprocess.run([binary, "ai", "suggest-tools", q["text"], "--limit", "3", "--format", "json"],
                                 env=env, capture_output=True, text=True)
            names = [s["tool"] for s in json.loads(out.stdout)["suggestions"]]
            r = rows[bool(q.get("heldout"))]
            r[0] += 1
            r[1] += bool(names) and names[0] in q["expect"]
            r[2] += any(n in q["expect"] for n in names[:3])
            r[3] += bool(names) and tools[names[0]]["gpu"] and not q.get("about_gpu", False)
        print(binary)
        for part, heldout in (("tuned", False), ("held-out", True)):
            t, f, t3, g = rows[heldout]
            print(f"  {part:9} {t:3} questions  first {f:3} = {100 * f / t:5.1f} %  top 3 {t3:3} = {100 * t3 / t:5.1f} %  "
                  f"GPU tool first wrongly {g}")


main()
