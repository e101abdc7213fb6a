#!/usr/bin/env bash
# The Python API (python/): build the extension with the dev profile in the shared target/ (maturin develop,
# reusing what `cargo test` compiled) into a venv under target/, lint the extension crate, and run the pytest
# suite against tests/data beside the CLI.
# usage: .ci/python.sh /path/to/aisp
set -euo pipefail
AISP=$(realpath "$1")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV="$ROOT/target/ci-python/venv"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "maturin==1.16.0" "pytest==9.2.0" "pandas==3.1.1"
fi
cd "$ROOT"
export CARGO_TARGET_DIR="$ROOT/target" VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" PYO3_PYTHON="$VENV/bin/python"
maturin develop -m python/Cargo.toml
cargo clippy -p aisp-python -- -D warnings
AISP_BIN="$AISP" python -m pytest -q python/tests
