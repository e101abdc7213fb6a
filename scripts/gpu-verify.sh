#!/usr/bin/env bash
# Verify aisp's GPU and system tools on a real NVIDIA host in one go.
#
#   OUT=/tmp/out scripts/gpu-verify.sh path/to/release/aisp
#
# Writes to $OUT:
#   aisp/<tool>.json           every gpu/system tool's output through the CLI (--format json)
#   aisp/<tool>.stderr         its stderr; aisp/<tool>.rc its exit status
#   nvidia-smi/q.txt           nvidia-smi -q
#   nvidia-smi/topo-m.txt      nvidia-smi topo -m
#   nvidia-smi/topo-p2p-*.txt  nvidia-smi topo -p2p r|w|a
#   nvidia-smi/nvlink-s.txt    nvidia-smi nvlink -s (and -c, -e where supported)
#   nvidia-smi/query-gpu.csv   the --query-gpu fields compared with aisp_gpu_info
#   compare.txt                PASS/FAIL of aisp against nvidia-smi (topology matrix and
#                              affinities, gpu info fields, NVLink counts and speeds)
#   latency.txt                warm per-call latency of each tool through `aisp serve` (MCP stdio)
#   timings.txt                wall time of each CLI run (includes process start and NVML init)
#   host/<name>/...            /proc and /sys samples (scripts/capture-host-samples.sh) for tests/data/host/
#   env.txt                    uname, driver, GPU list
# Exit status: 0 when every comparison passed, 1 otherwise (all files are written either way).
set -u
AISP=${1:?usage: OUT=dir $0 path/to/aisp}
OUT=${OUT:?set OUT to the output directory}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/aisp" "$OUT/nvidia-smi"
export AISP_HOME="$OUT/.aisp-home"

{
    echo "date: $(date -u +%FT%TZ)"
    echo "uname: $(uname -a)"
    echo "aisp: $("$AISP" --version 2>&1)"
    nvidia-smi -L 2>&1
    nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -1 | sed 's/^/driver: /'
} >"$OUT/env.txt"

# nvidia-smi's view, taken first so that both see the same state.
nvidia-smi -q >"$OUT/nvidia-smi/q.txt" 2>&1
nvidia-smi topo -m >"$OUT/nvidia-smi/topo-m.txt" 2>&1
for c in r w a; do nvidia-smi topo -p2p "$c" >"$OUT/nvidia-smi/topo-p2p-$c.txt" 2>&1; done
nvidia-smi nvlink -s >"$OUT/nvidia-smi/nvlink-s.txt" 2>&1
nvidia-smi nvlink -c >"$OUT/nvidia-smi/nvlink-c.txt" 2>&1
nvidia-smi nvlink -e >"$OUT/nvidia-smi/nvlink-e.txt" 2>&1
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,clocks.max.sm,clocks.max.memory,enforced.power.limit,power.default_limit,power.min_limit,power.max_limit,compute_cap,pcie.link.gen.max,pcie.link.width.max,persistence_mode,ecc.mode.current,mig.mode.current,compute_mode,driver_version,vbios_version,temperature.gpu.tlimit \
    --format=csv,noheader,nounits >"$OUT/nvidia-smi/query-gpu.csv" 2>"$OUT/nvidia-smi/query-gpu.err"

# Every gpu/system tool through the CLI.
run() {
    local name=$1
    shift
    local t0 t1
    t0=$(date +%s%N)
    "$AISP" "$@" --format json >"$OUT/aisp/$name.json" 2>"$OUT/aisp/$name.stderr"
    echo $? >"$OUT/aisp/$name.rc"
    t1=$(date +%s%N)
    printf '%-28s rc=%s %6d ms\n' "$name" "$(cat "$OUT/aisp/$name.rc")" $(((t1 - t0) / 1000000)) >>"$OUT/timings.txt"
}
: >"$OUT/timings.txt"
run status status
run gpu_info gpu info
run gpu_info_device0 gpu info --device 0
run gpu_topology gpu topology
run gpu_power gpu power
run gpu_nvlink gpu nvlink
run gpu_nvlink_sampled gpu nvlink --sample-ms 200
run system_software system software
run system_dependencies system dependencies
run system_capabilities system capabilities
run system_capabilities_sm100 system capabilities --compute-capability 10.0
run system_parameters system parameters
run system_container system container
run system_cpu_memory system cpu-memory
run system_network system network
run system_env system env
run system_context system context
run system_context_full system context --detail full
run triage triage

# /proc and /sys samples for the parser tests.
OUT="$OUT" bash "$HERE/capture-host-samples.sh" >"$OUT/capture.log" 2>&1

status=0
if command -v python3 >/dev/null 2>&1; then
    python3 "$HERE/gpu-verify-compare.py" "$OUT" >"$OUT/compare.txt" 2>&1 || status=1
    python3 "$HERE/gpu-verify-compare.py" --latency "$AISP" >"$OUT/latency.txt" 2>&1 || true
else
    echo "python3 not found: comparisons skipped" >"$OUT/compare.txt"
    status=1
fi
rm -rf "$OUT/.aisp-home"
tail -n 3 "$OUT/compare.txt"
cat "$OUT/timings.txt"
exit $status
