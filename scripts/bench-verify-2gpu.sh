#!/usr/bin/env bash
# GPU verification of the multi-GPU tools on a host with two or more GPUs
# (kind nvidia-h200-x2): peer-to-peer bandwidth/latency matrix and NCCL
# all-reduce bus bandwidth, next to PyTorch's all-reduce on the same GPUs
# (torch.distributed, NCCL backend, one process per GPU) as a reference.
# Writes to $OUT: p2p.json, nccl.json, torch_allreduce.json, env.txt.
# About 2-3 minutes.
#
# NVLink multicast (NVLS) must stay off on these shared hosts: this script
# exports NCCL_NVLS_ENABLE=0 (and the PyTorch/NVSHMEM equivalents) before
# anything starts, and aisp does not change NCCL's environment.
#
# Usage: OUT=/some/dir scripts/bench-verify-2gpu.sh target/release/aisp
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

AISP="${1:-${AISP_BIN:-target/release/aisp}}"
OUT="${OUT:?set OUT to the folder that comes back}"
here="$(cd "$(dirname "$0")" && pwd)"
export AISP_HOME="$(mktemp -d /tmp/aisp-verify2.XXXXXX)"
mkdir -p "$OUT"
env_txt="$OUT/env.txt"
started=$(date +%s)
log() { echo "[$(( $(date +%s) - started ))s] $*" | tee -a "$env_txt" >&2; }

# libnccl from PyTorch's wheel unless the caller set AISP_NCCL_LIB.
if [ -z "${AISP_NCCL_LIB:-}" ]; then
    nccl=$(python3 -c 'import nvidia.nccl, os; d = os.path.join(list(nvidia.nccl.__path__)[0], "lib"); print(os.path.join(d, sorted(f for f in os.listdir(d) if f.startswith("libnccl.so"))[0]))' 2>/dev/null || true)
    [ -n "$nccl" ] && export AISP_NCCL_LIB="$nccl"
fi

{
    echo "== date"; date -u
    echo "== nvidia-smi"; nvidia-smi 2>&1
    echo "== nvidia-smi topo -m"; nvidia-smi topo -m 2>&1
    echo "== NCCL"; echo "AISP_NCCL_LIB=${AISP_NCCL_LIB:-<search>} NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
    echo "== aisp"; "$AISP" --version 2>&1
} > "$env_txt"

log "start p2p"
timeout 240 "$AISP" --format json hw p2p --size-mib 256 > "$OUT/p2p.json" 2>> "$env_txt"
log "end p2p rc=$?"

log "start nccl"
timeout 300 "$AISP" --format json hw nccl --min-bytes 65536 --max-bytes 1073741824 --step-factor 4 > "$OUT/nccl.json" 2>> "$env_txt"
log "end nccl rc=$?"

log "start torch all-reduce reference"
timeout 300 python3 "$here/torch_allreduce.py" --min-bytes 65536 --max-bytes 1073741824 --step-factor 4 > "$OUT/torch_allreduce.json" 2>> "$env_txt"
log "end torch all-reduce rc=$?"

python3 - "$OUT" <<'PY' | tee -a "$env_txt"
import json, os, sys
out = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(out, n)))
    except Exception as e:
        return {"error": str(e)}
p2p, nccl, torch_ref = load("p2p.json"), load("nccl.json"), load("torch_allreduce.json")
for p in p2p.get("pairs", []):
    print(f"p2p {p['src']}->{p['dst']}: peer={p['peer_access']} uni {p['unidirectional_gb_per_s']:.1f} GB/s, "
          f"bi {p['bidirectional_gb_per_s']:.1f} GB/s, latency {p['latency_us']:.2f} us")
ref = {r["bytes"]: r for r in torch_ref.get("rows", [])}
for r in nccl.get("rows", []):
    t = ref.get(r["bytes"], {})
    print(f"all-reduce {r['bytes']:>11} B: aisp busbw {r['busbw_gb_per_s']:8.2f} GB/s (verified={r['verified']}), "
          f"torch busbw {t.get('busbw_gb_per_s', float('nan')):8.2f} GB/s")
print("nccl", nccl.get("nccl_version"), nccl.get("nccl_library"), "NVLS env:", nccl.get("nvls_enable_env"))
PY
log "done"
