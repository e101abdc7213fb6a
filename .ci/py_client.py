"""Check aisp with the official MCP Python SDK (mcp==2.3.0), over stdio and HTTP,
in every connection mode the SDK offers. Exits non-zero on any failure.

usage: py_client.py stdio /path/to/aisp
       py_client.py http  http://127.0.0.1:PORT/mcp
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok: {what}")


async def exercise(target, mode):
    async with Client(target, mode=mode) as client:
        tools = (await client.list_tools()).tools
        names = [t.name for t in tools]
        check(len(tools) >= 7, f"[{mode}] tools/list returned {len(tools)} tools")
        check(names == sorted(names), f"[{mode}] tools/list is sorted")
        for t in tools:
            check(t.output_schema is not None and t.output_schema.get("type") == "object",
                  f"[{mode}] {t.name} has an object output schema")
        res = await client.call_tool("aisp_status", {})
        check(not res.is_error, f"[{mode}] aisp_status succeeded")
        sc = res.structured_content
        check(isinstance(sc, dict) and "version" in sc and "gpu" in sc,
              f"[{mode}] aisp_status structuredContent has version and gpu")
        check(json.loads(res.content[0].text) == sc, f"[{mode}] text block mirrors structuredContent")
        res = await client.call_tool("aisp_job_status", {"job_id": "job_missing"})
        check(res.is_error and res.structured_content["error"]["kind"] == "not_found",
              f"[{mode}] a missing job is an isError result with kind not_found")
        res = await client.call_tool("aisp_suggest_tools", {"task": "cancel a background job", "limit": 3})
        check(not res.is_error and res.structured_content["suggestions"][0]["tool"] == "aisp_job_cancel",
              f"[{mode}] aisp_suggest_tools routes a job question to aisp_job_cancel")
        seen = []

        async def on_progress(progress, total, message):
            seen.append(progress)

        res = await client.call_tool("aisp_system_monitor", {"duration_s": 0.5, "interval_ms": 100},
                                     progress_callback=on_progress)
        check(not res.is_error and len(res.structured_content["samples"]) >= 5,
              f"[{mode}] aisp_system_monitor returned its samples")
        check(len(seen) >= 3, f"[{mode}] progress notifications arrived ({len(seen)})")
        print(f"[{mode}] negotiated protocol {client.protocol_version}")


async def main():
    kind, where = sys.argv[1], sys.argv[2]
    if kind == "stdio":
        target = StdioServerParameters(command=where, args=["serve"], env={"RUST_LOG": "warn", "AISP_HOME": sys.argv[3]})
    else:
        target = where
    for mode in ("auto", "2026-07-28", "legacy"):
        await exercise(target, mode)
    print("python sdk: all checks passed")


asyncio.run(main())
