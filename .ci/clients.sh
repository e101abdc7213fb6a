#!/usr/bin/env bash
# Check aisp with clients other than our own: the official MCP Python SDK
# (mcp==2.3.0) and the MCP Inspector CLI (2.12.0), over stdio and HTTP.
# usage: .ci/clients.sh /path/to/aisp
set -euo pipefail
AISP=$(realpath "$1")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK="$ROOT/target/ci-clients"
mkdir -p "$WORK"
export AISP_HOME="$WORK/home" RUST_LOG=warn

echo "== Python SDK (mcp==2.3.0)"
if [ ! -x "$WORK/venv/bin/python" ]; then
  python3 -m venv "$WORK/venv"
  "$WORK/venv/bin/pip" install -q --disable-pip-version-check mcp==2.3.0
fi
"$AISP" tools --format json >"$WORK/tools.json"
"$WORK/venv/bin/python" "$ROOT/.ci/py_client.py" stdio "$AISP" "$AISP_HOME" "$WORK/tools.json"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$AISP" serve --transport http --bind "127.0.0.1:$PORT" 2>"$WORK/http.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "listening on" "$WORK/http.log" 2>/dev/null && break; sleep 0.1; done
"$WORK/venv/bin/python" "$ROOT/.ci/py_client.py" http "http://127.0.0.1:$PORT/mcp" "$WORK/tools.json"

echo "== MCP Inspector CLI (2.12.0)"
if [ ! -x "$WORK/inspector/node_modules/.bin/mcp-inspector" ]; then
  mkdir -p "$WORK/inspector"
  (cd "$WORK/inspector" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error @modelcontextprotocol/inspector@2.12.0)
fi
INSPECTOR="$WORK/inspector/node_modules/.bin/mcp-inspector"
# The default tool list is the core and default tiers; `--tools all` lists every tool. The
# inspector's CLI opens a new session per call and only calls tools its tools/list showed, so it
# cannot follow list_changed: it checks the default listing, the enable call, and every tool
# through `--tools all` (the Python SDK above follows list_changed in one session).
EXPECTED=$(python3 -c 'import json,sys; print(sum(t["tier"] != "domain" for t in json.load(open(sys.argv[1]))["tools"]))' "$WORK/tools.json")
EXPECTED_ALL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["count"])' "$WORK/tools.json")

for target in "stdio" "http"; do
  if [ "$target" = stdio ]; then
    # The inspector passes only a minimal environment to the server: name what it needs.
    SERVER_ARGS=("$AISP" serve -e "AISP_HOME=$AISP_HOME" -e RUST_LOG=warn)
  else
    SERVER_ARGS=("http://127.0.0.1:$PORT/mcp")
  fi
  count=$("$INSPECTOR" --cli "${SERVER_ARGS[@]}" --method tools/list 2>/dev/null \
    | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tools"]))')
  [ "$count" = "$EXPECTED" ] || { echo "FAIL: inspector ($target) listed $count tools, expected $EXPECTED"; exit 1; }
  echo "ok: inspector ($target) tools/list: $count tools"
  "$INSPECTOR" --cli "${SERVER_ARGS[@]}" --method tools/list --strict >/dev/null 2>"$WORK/strict.log" \
    || { cat "$WORK/strict.log"; echo "FAIL: inspector ($target) --strict schema portability"; exit 1; }
  echo "ok: inspector ($target) --strict: schemas are portable"
  "$INSPECTOR" --cli "${SERVER_ARGS[@]}" --method tools/call --tool-name aisp_list_domains --tool-arg 'enable=["hw"]' 2>/dev/null \
    | python3 -c 'import json,sys; r=json.load(sys.stdin); sc=r["structuredContent"]; assert not r.get("isError") and (sc["enabled"]==["hw"] or (sc["enabled"]==[] and "--tools default,hw" in sc["note"])), r'
  # A session enables; a stateless connection (streamable HTTP at 2026-07-28) says it cannot, and how instead.
  echo "ok: inspector ($target) aisp_list_domains enable"
  "$INSPECTOR" --cli "${SERVER_ARGS[@]}" --method tools/call --tool-name aisp_status 2>/dev/null \
    | python3 -c 'import json,sys; r=json.load(sys.stdin); assert not r.get("isError") and r["structuredContent"]["version"], r'
  echo "ok: inspector ($target) aisp_status"
  # The inspector exits 5 when a tool answers isError: true, which is what we expect here.
  rc=0
  out=$("$INSPECTOR" --cli "${SERVER_ARGS[@]}" --method tools/call --tool-name aisp_job_status --tool-arg job_id=job_missing 2>/dev/null) || rc=$?
  [ "$rc" = 5 ] || { echo "FAIL: inspector ($target) exit code $rc for an isError result, expected 5"; exit 1; }
  python3 -c 'import json,sys; r=json.loads(sys.stdin.read().split("\n}\n")[0]+"\n}"); assert r["isError"] and r["structuredContent"]["error"]["kind"]=="not_found", r' <<<"$out"
  echo "ok: inspector ($target) error result with kind not_found"
  "$INSPECTOR" --cli "${SERVER_ARGS[@]}" --method tools/call --tool-name aisp_suggest_tools --tool-arg "task=list recent jobs" limit=1 2>/dev/null \
    | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["structuredContent"]["suggestions"][0]["tool"]=="aisp_job_list", r'
  echo "ok: inspector ($target) aisp_suggest_tools"
done
# Every tool listed at once: the count, and the portability of every schema.
ALL_ARGS=("$AISP" serve --tools all -e "AISP_HOME=$AISP_HOME" -e RUST_LOG=warn)
count=$("$INSPECTOR" --cli "${ALL_ARGS[@]}" --method tools/list 2>/dev/null \
  | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tools"]))')
[ "$count" = "$EXPECTED_ALL" ] || { echo "FAIL: inspector (--tools all) listed $count tools, expected $EXPECTED_ALL"; exit 1; }
echo "ok: inspector (--tools all) tools/list: $count tools"
"$INSPECTOR" --cli "${ALL_ARGS[@]}" --method tools/list --strict >/dev/null 2>"$WORK/strict.log" \
  || { cat "$WORK/strict.log"; echo "FAIL: inspector (--tools all) --strict schema portability"; exit 1; }
echo "ok: inspector (--tools all) --strict: every tool's schemas are portable"
"$INSPECTOR" --cli "${ALL_ARGS[@]}" --method tools/call --tool-name aisp_system_env 2>/dev/null \
  | python3 -c 'import json,sys; r=json.load(sys.stdin); assert not r.get("isError") and "variables" in r["structuredContent"], r'
echo "ok: inspector (--tools all) a tool outside the default list answers"
echo "other clients: all checks passed"
