#!/usr/bin/env bash
# GPU verification of the benchmark harness on one H100/H200 (issue 6, and
# aisp_gpu_bandwidth from issue 3). Runs every lesson and hardware roof
# through the CLI, checks the bars side by side in the same job, and writes
# at most 7 files to $OUT:
#   summary.txt        bars (PASS/FAIL) and the full results table
#   bars.json          the bar figures
#   run.json           aisp benchmark run, all targets, size medium
#   hw.json            hw roofline, pcie, cache, tensor_cores, gpu bandwidth, speed test
#   side_by_side.json  cuBLAS BF16 8192^3 before/after torch.matmul; 5 repeats of two variants
#   env.txt            nvidia-smi, versions, libraries found, per-step timings and stderr
# Total about 6-7 minutes on an H100.
#
# Usage (from the repository root on the GPU machine, with a release binary
# built on the CPU machine and carried over):
#   OUT=/some/dir scripts/bench-verify.sh target/release/aisp
set -uo pipefail

AISP="${1:-${AISP_BIN:-target/release/aisp}}"
OUT="${OUT:?set OUT to the folder that comes back}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d /tmp/aisp-verify.XXXXXX)"
export AISP_HOME="$work/home"
# Multicast over NVLink stays off on shared hosts (harmless on one GPU).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT" "$AISP_HOME"
env_txt="$OUT/env.txt"
started=$(date +%s)

log() { echo "[$(( $(date +%s) - started ))s] $*" | tee -a "$env_txt" >&2; }

# step NAME TIMEOUT_S aisp-args... : run aisp, JSON to $work/NAME.json, stderr to env.txt.
step() {
    local name="$1" limit="$2"; shift 2
    log "start $name: aisp $*"
    local t0=$(date +%s)
    timeout "$limit" "$AISP" --format json "$@" > "$work/$name.json" 2>> "$work/stderr.txt"
    local rc=$?
    log "end $name: rc=$rc in $(( $(date +%s) - t0 ))s"
}

{
    echo "== date"; date -u
    echo "== nvidia-smi"; nvidia-smi 2>&1
    echo "== nvidia-smi -q (clocks, power, pcie)"; nvidia-smi -q -d CLOCK,POWER,PERFORMANCE 2>&1 | head -120
    echo "== aisp"; "$AISP" --version 2>&1
    echo "== python/torch"; python3 -c 'import torch,sys; print(sys.version); print(torch.__version__, torch.version.cuda)' 2>&1
    echo "== libraries on the loader path"; ldconfig -p 2>/dev/null | grep -E 'libnvrtc|libcublas|libnccl' | head
} > "$env_txt"

step status 60 status
step roofline 240 hw roofline
step pcie 120 hw pcie
step bandwidth 180 gpu bandwidth --sizes-mib 256 1024
step run 400 benchmark run --size medium --time-budget-s 1

# Bar: cuBLAS BF16 8192^3 vs torch.matmul, aisp before and after torch.
step gemm_bf16_a 180 benchmark run --targets gemm --variants cublas_bf16 cublaslt_bf16 --size large --time-budget-s 2
log "start torch_matmul"
timeout 180 python3 "$here/torch_matmul.py" --size 8192 --dtype bf16 --budget-s 2 > "$work/torch_matmul.json" 2>> "$work/stderr.txt"
log "end torch_matmul: rc=$?"
step gemm_bf16_b 180 benchmark run --targets gemm --variants cublas_bf16 cublaslt_bf16 --size large --time-budget-s 2

# Bar: five separate processes measuring one variant.
for i in 1 2 3 4 5; do
    step "repeat_copy_$i" 90 benchmark run --targets vectorized_loads --variants vec4_unroll4_copy --size large --time-budget-s 1
done
for i in 1 2 3 4 5; do
    step "repeat_gemm_$i" 90 benchmark run --targets gemm --variants cublas_bf16 --size medium --time-budget-s 1
done

step speed_test 120 benchmark speed-test
step cache 180 hw cache --max-mib 2048
step tensor_cores 300 hw tensor-cores

cp "$work/run.json" "$OUT/run.json" 2>/dev/null
python3 "$here/bench_bars.py" "$work" "$OUT" > "$OUT/summary.txt" 2>> "$work/stderr.txt"
{
    echo "== aisp status"; cat "$work/status.json"
    echo "== stderr of every step"; tail -c 200000 "$work/stderr.txt"
} >> "$env_txt"
log "done"
cat "$OUT/summary.txt"
