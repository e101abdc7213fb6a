#!/usr/bin/env bash
# Install CUDA 13.0 NVRTC from PyPI (the `nvidia-cuda-nvrtc` wheel) into a
# virtual environment and print the folder that holds libnvrtc.so.13.
#
# NVRTC compiles CUDA C++ without a GPU, so CI uses it to compile every kernel
# in kernels/ for sm_80, sm_90, sm_90a and sm_100 (crates/hw/tests/it/kernels_compile.rs).
#
# Usage:  lib_dir=$(scripts/ci-install-nvrtc.sh [VENV_DIR])
#         LD_LIBRARY_PATH="$lib_dir" AISP_REQUIRE_NVRTC=1 cargo test -p aisp-hw --test it kernels_compile
#
# The last line of stdout is the library folder; progress goes to stderr.
set -euo pipefail

venv="${1:-${AISP_NVRTC_VENV:-$HOME/.cache/aisp-nvrtc-venv}}"
spec="${AISP_NVRTC_SPEC:-nvidia-cuda-nvrtc==13.0.*}"

find_lib() {
    find "$venv" -name 'libnvrtc.so.13' -path '*nvidia*' 2>/dev/null | head -n 1
}

lib="$(find_lib || true)"
if [ -z "$lib" ]; then
    python="${PYTHON:-python3}"
    if ! "$python" -m venv "$venv" >&2 2>&1; then
        # Debian's python3 lacks ensurepip without python3-venv; fall back to --target.
        echo "python3 -m venv failed; installing with pip --target instead" >&2
        mkdir -p "$venv"
        "$python" -m pip install --quiet --disable-pip-version-check --no-deps \
            --target "$venv/site" "$spec" >&2
    else
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$spec" >&2
    fi
    lib="$(find_lib || true)"
fi

if [ -z "$lib" ]; then
    echo "error: libnvrtc.so.13 not found after installing $spec into $venv" >&2
    exit 1
fi
dirname "$lib"
