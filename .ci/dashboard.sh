#!/usr/bin/env bash
# Browser tests of the dashboard: Debian's chromium and chromium-driver (apt-get),
# Selenium 4.x from PyPI in a venv under target/, against a real `aisp serve`.
# usage: .ci/dashboard.sh /path/to/aisp [--screenshots DIR]
set -euo pipefail
AISP=$(realpath "$1"); shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK="$ROOT/target/ci-dashboard"
mkdir -p "$WORK"

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
if [ ! -x "$WORK/venv/bin/python" ]; then
  python3 -m venv "$WORK/venv"
  "$WORK/venv/bin/pip" install -q --disable-pip-version-check "selenium==4.51.0"
fi
echo "== $(chromium --version 2>/dev/null | head -1), $(chromedriver --version | head -1)"
"$WORK/venv/bin/python" "$ROOT/.ci/dashboard_test.py" "$AISP" "$@"
