#!/usr/bin/env bash
# Issue 25: per-rank captures and cross-rank analysis on two NVLink-joined GPUs, through aisp.
#
#   scripts/capture-2gpu-ranks.sh CARRY        (CARRY: aisp.xz, lib/, inflate_profile.xz; results under $OUT)
#
# 1. aisp_hw_nccl: the all-reduce bus bandwidth of this pair, measured first in the same call.
# 2. aisp_profile_nsys with `launcher` (torchrun --no-python nsys ... per rank) on workloads/ddp.py, plain and
#    with a planted straggler (rank 1 spins its GPU STRAGGLE_MS before each all-reduce bucket); each rank's
#    report exported (NCCL payloads kept) and analysed as a set by aisp_profile_ranks.
# 3. aisp_profile_torch on the straggler run and the plain run (both ranks' Kineto traces), aisp_profile_trace over each.
# 4. Issue 21 on this host: the nine questions over one MCP session on a 1 GB export inflated here, the
#    page-cache read of the file, and `nsys stats` computing six of the reports on the same file.
# Keeps NCCL_NVLS_ENABLE=0 and the other multicast switches off throughout.
set -u
CARRY="$(cd "$1" && pwd)"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${OUT:?}"
STRAGGLE_MS="${STRAGGLE_MS:-1}"
W=/tmp/r2; rm -rf $W; mkdir -p $W/outputs $W/pack/plain $W/pack/straggler $W/pack/torch_straggler $W/pack/torch_plain
export AISP_HOME=$W/home AISP_CONFIG=$W/no-config.toml PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export AISP_NSYS=${AISP_NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
xz -dc "$CARRY/aisp.xz" > $W/aisp && chmod +x $W/aisp; AISP=$W/aisp
S=$W/summary.md; T0=$(date +%s)
say() { echo "$*" | tee -a $S; }
ENV="{\"NCCL_NVLS_ENABLE\": \"0\", \"TORCH_SYMM_MEM_DISABLE_MULTICAST\": \"1\", \"NVSHMEM_DISABLE_NVLS\": \"1\", \"PYTHONUNBUFFERED\": \"1\", \"LD_LIBRARY_PATH\": \"$CARRY/lib:${LD_LIBRARY_PATH:-}\"}"
# step NAME DOMAIN OP JSON: one CLI call; the answer in outputs/NAME.json, a line in the summary.
step() {
  local t=$(date +%s)
  timeout "${5:-300}" $AISP --allow-exec --format json "$2" "$3" --json "$4" > $W/outputs/$1.json 2> $W/outputs/$1.stderr
  say "- $1 (\`aisp $2 $3\`): exit $?, $(( $(date +%s) - t )) s"
}
say "# two-GPU per-rank run — $(date -u +%FT%TZ)"
{ nvidia-smi -L; nvidia-smi topo -m; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'; $AISP --version; $AISP_NSYS --version; } 2>&1 | tee -a $S

step hw_nccl hw nccl '{"max_bytes": 1073741824}' 120
D=$REPO/workloads/ddp.py
LAUNCH='["torchrun", "--standalone", "--nproc_per_node=2"]'
step nsys_plain profile nsys "{\"command\": [\"python3\", \"$D\", \"--manifest\", \"$W/pack/plain/manifest.json\"], \"launcher\": $LAUNCH, \"cwd\": \"$W\", \"env\": $ENV, \"timeout_s\": 200}" 220
step nsys_straggler profile nsys "{\"command\": [\"python3\", \"$D\", \"--straggle-ms\", \"$STRAGGLE_MS\", \"--manifest\", \"$W/pack/straggler/manifest.json\"], \"launcher\": $LAUNCH, \"cwd\": \"$W\", \"env\": $ENV, \"timeout_s\": 200}" 220
step torch_straggler profile torch "{\"command\": [\"torchrun\", \"--standalone\", \"--nproc_per_node=2\", \"$D\", \"--straggle-ms\", \"$STRAGGLE_MS\"], \"cwd\": \"$W\", \"env\": $ENV, \"wait\": 5, \"warmup\": 2, \"active\": 5, \"timeout_s\": 150}" 170
step torch_plain profile torch "{\"command\": [\"torchrun\", \"--standalone\", \"--nproc_per_node=2\", \"$D\"], \"cwd\": \"$W\", \"env\": $ENV, \"wait\": 5, \"warmup\": 2, \"active\": 5, \"timeout_s\": 150}" 170

# The exports and traces the captures wrote, and the set analyses run again from the files.
python3 - $W <<'EOF' | tee -a $S
import json, os, shutil, sys
w = sys.argv[1]
for name, dest in (("nsys_plain", "plain"), ("nsys_straggler", "straggler"), ("torch_straggler", "torch_straggler"), ("torch_plain", "torch_plain")):
    try:
        v = json.load(open(f"{w}/outputs/{name}.json"))
    except Exception as e:
        print(f"- {name}: no answer ({e})"); continue
    if "error" in v:
        print(f"- {name}: error {v['error'].get('kind')}: {v['error'].get('message', '')[:800]}"); continue
    for k, p in v.get("artifacts", {}).items():
        if k.startswith("sqlite_") or k.startswith("trace"):
            shutil.copy(p, f"{w}/pack/{dest}/{os.path.basename(p)}")
    print(f"- {name}: run {v.get('run_id')}, exit {v.get('exit_code')}, {v.get('duration_ms')} ms, notes {v.get('notes', [])[:3]}")
    for f in (v.get("top_findings") or v.get("findings") or [])[:5]:
        print(f"  - [{f.get('severity')}] {f.get('title')}")
EOF
for set in plain straggler; do
  step ranks_$set profile ranks "{\"path\": \"$W/pack/$set\"}" 120
  step ranks_${set}_nccl profile ranks "{\"path\": \"$W/pack/$set\", \"each\": \"nccl\"}" 120
done
step trace_straggler profile trace "{\"paths\": [\"$W/pack/torch_straggler\"]}" 120
step trace_plain profile trace "{\"paths\": [\"$W/pack/torch_plain\"]}" 120
ls -la $W/pack/* | tee -a $S

# Issue 21 on this host.
xz -dc "$CARRY/inflate_profile.xz" > $W/inflate && chmod +x $W/inflate
xz -dc $REPO/tests/data/ddp.sqlite.xz > $W/ddp.sqlite
t=$(date +%s); $W/inflate $W/ddp.sqlite $W/ddp_1g.sqlite --target-mb 1000 > $W/outputs/inflate.log 2>&1; say "- inflate to 1 GB: $(( $(date +%s) - t )) s, $(stat -c %s $W/ddp_1g.sqlite) bytes"
for i in 1 2 3; do python3 $REPO/scripts/bench/profile_session.py $AISP $W/ddp_1g.sqlite --label "run$i" --json $W/outputs/session.jsonl --save $W/outputs/answers$i 2>&1 | tee -a $S; done
python3 $REPO/scripts/bench/profile_session.py $AISP $W/ddp_1g.sqlite --label budget0 --env AISP_PROFILE_TABLES_MIB=0 --json $W/outputs/session.jsonl 2>&1 | tee -a $S
t=$(date +%s); dd if=$W/ddp_1g.sqlite of=/dev/null bs=4M 2>&1 | tail -1 | tee -a $S
cp $W/ddp_1g.sqlite $W/stats.sqlite
python3 - $AISP_NSYS $W/stats.sqlite $W/outputs/stats <<'EOF' 2>&1 | tee -a $S
import resource, subprocess, sys, time
t = time.perf_counter()
r = subprocess.run([sys.argv[1], "stats", "--report", "cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,nvtx_sum,osrt_sum",
                    "--format", "csv", "--output", sys.argv[3], sys.argv[2]], capture_output=True, timeout=150)
print(f"- nsys stats (six reports) on the 1 GB export: exit {r.returncode}, {time.perf_counter() - t:.2f} s, "
      f"peak RSS {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MiB")
EOF
say "total $(( $(date +%s) - T0 )) s"

for f in $W/pack/*/*.sqlite $W/pack/torch_*/*.json; do [ -f "$f" ] && xz -T0 -9 "$f"; done
tar -C $W -cJf $DEST/outputs.tar.xz outputs summary.md
for s in plain straggler torch_straggler torch_plain; do tar -C $W/pack -cf $DEST/$s.tar $s; done
cp $S $DEST/summary.md
ls -la $DEST
