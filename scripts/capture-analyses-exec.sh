#!/usr/bin/env bash
# Run on a GPU host from a folder holding workloads/ (copy of ../workloads), kernels/ (copy of ../kernels),
# lib/ (libdw/libelf for nsys) and, for the -exec script, aisp.xz (an xz-compressed aisp binary); OUT=results.
# h23 second capture: with_stack trace (small), aisp's exec paths (memory-patterns under ncu,
# profile torch with compile_logs, then profile compile on the run), nsys data-loader export.
set -u
C=$(cd "$(dirname "$0")" && pwd)
W=/tmp/h23b; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1 AISP_HOME=/tmp/aisphome
LOG=$OUT/capture2.log
say() { echo "== $(date -u +%T) $*" | tee -a $LOG; }
xz -dc $C/aisp.xz > /tmp/aisp && chmod +x /tmp/aisp
cd $C/workloads
say "flame with_stack"
timeout 90 python3 flame_stacks.py --out $W > $W/flame.stdout 2>&1; echo "rc=$?" | tee -a $LOG
ls -la $W | tee -a $LOG
(cd $W && xz -9 -k flame.kineto.json && tar cf $OUT/h23b-flame.tar flame.kineto.json.xz flame.stdout) 2>>$LOG
say "aisp analyze memory-patterns --command (ncu)"
timeout 150 /tmp/aisp --allow-exec --format json analyze memory-patterns --json "{\"command\":[\"python3\",\"ncu_lessons.py\",\"--kernels\",\"$C/kernels\"],\"kernel_regex\":\"^(copy_f32_strided|copy_f32|divergent_branch|predicated_select|transpose_naive|transpose_tiled|transpose_tiled_padded)\$\",\"launch_count\":7}" > $W/mp-exec.json 2> $W/mp-exec.err; echo "rc=$?" | tee -a $LOG
python3 -c "
import json; d=json.load(open('$W/mp-exec.json'))
for k in d.get('kernels',[]): print(k['kernel_name'], k['verdict'], '|', k['verdict_reason'])
print(d.get('run_id'), d.get('missing_metrics'), d.get('left_out'), d.get('error'))" 2>&1 | tee -a $LOG
say "aisp profile torch compile_logs"
timeout 200 /tmp/aisp --allow-exec --format json profile torch --json '{"command":["python3","compile_graph_break.py","--no-profiler"],"compile_logs":true,"step_on":"none","profile_memory":false,"record_shapes":false,"with_flops":false}' > $W/torch-compile.json 2> $W/torch-compile.err; echo "rc=$?" | tee -a $LOG
RUN=$(python3 -c "import json;print(json.load(open('$W/torch-compile.json'))['run_id'])" 2>>$LOG)
echo "run $RUN" | tee -a $LOG
timeout 60 /tmp/aisp --format json profile compile --run-id "$RUN" > $W/compile-run.json 2> $W/compile-run.err; echo "rc=$?" | tee -a $LOG
python3 -c "
import json; d=json.load(open('$W/compile-run.json')); print('\n'.join(d.get('findings',[])), d.get('left_out'), d.get('error'))" 2>&1 | tee -a $LOG
(cd $W && tar cJf $OUT/h23b-exec.tar.xz mp-exec.* torch-compile.* compile-run.*) 2>>$LOG
say "nsys data-loader (no sampling)"
NSYS=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys
export LD_LIBRARY_PATH=$C/lib:${LD_LIBRARY_PATH:-}
timeout 100 $NSYS profile -t cuda,nvtx,osrt -s none --cpuctxsw=none --wait=primary --force-overwrite=true -o $W/dataloader python3 dataloader_bound.py --nvtx > $W/nsys.log 2>&1; echo "rc=$?" | tee -a $LOG
tail -5 $W/nsys.log | tee -a $LOG
[ -f $W/dataloader.nsys-rep ] && timeout 60 $NSYS export --type sqlite --force-overwrite true --output $W/dataloader.sqlite $W/dataloader.nsys-rep >> $W/nsys.log 2>&1
ls -la $W | tee -a $LOG
[ -f $W/dataloader.sqlite ] && (cd $W && tar cJf $OUT/h23b-nsys.tar.xz dataloader.sqlite nsys.log) 2>>$LOG
say "nsys CPU sampling on flame"
timeout 70 $NSYS profile -t none -s cpu --cpuctxsw=none --wait=primary --force-overwrite=true -o $W/flame-samples python3 flame_stacks.py --out /tmp > $W/nsys-s.log 2>&1; echo "rc=$?" | tee -a $LOG
tail -5 $W/nsys-s.log | tee -a $LOG
[ -f $W/flame-samples.nsys-rep ] && timeout 60 $NSYS export --type sqlite --force-overwrite true --output $W/flame-samples.sqlite $W/flame-samples.nsys-rep >> $W/nsys-s.log 2>&1
[ -f $W/flame-samples.sqlite ] && (cd $W && tar cJf $OUT/h23b-samples.tar.xz flame-samples.sqlite nsys-s.log) 2>>$LOG
cp $W/nsys-s.log $W/nsys.log $OUT/ 2>/dev/null
ls -la $OUT | tee -a $LOG
say done
