#!/usr/bin/env bash
# Run on a GPU host from a folder holding workloads/ (copy of ../workloads), kernels/ (copy of ../kernels),
# lib/ (libdw/libelf for nsys) and, for the -exec script, aisp.xz (an xz-compressed aisp binary); OUT=results.
# h23 fixture capture: ncu on aisp's lesson kernels, torch.compile logs+trace, data-loader and
# with_stack Kineto traces, an nsys export of the data-loader run. Everything lands in $OUT.
set -u
C=$(cd "$(dirname "$0")" && pwd)
W=/tmp/h23; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1
LOG=$OUT/capture.log
say() { echo "== $(date -u +%T) $*" | tee -a $LOG; }
{
  date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, cupy; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), "cupy", cupy.__version__)'
} > $W/env.txt 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" >> $W/env.txt; $NCU --version >> $W/env.txt 2>&1
cat $W/env.txt | tee -a $LOG
say "ncu query-metrics"
timeout 60 $NCU --query-metrics > $W/query-metrics.txt 2>&1
CAND="gpu__time_duration l1tex__t_sectors_pipe_lsu_mem_global_op_ld l1tex__t_requests_pipe_lsu_mem_global_op_ld l1tex__t_sectors_pipe_lsu_mem_global_op_st l1tex__t_requests_pipe_lsu_mem_global_op_st smsp__sass_inst_executed_op_global_ld smsp__sass_inst_executed_op_global_st sm__sass_data_bytes_mem_global_op_ld sm__sass_data_bytes_mem_global_op_st smsp__sass_branch_targets smsp__sass_branch_targets_threads_divergent smsp__sass_branch_targets_threads_uniform smsp__thread_inst_executed smsp__inst_executed l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st smsp__sass_inst_executed_op_shared_ld smsp__sass_inst_executed_op_shared_st"
M=""; for c in $CAND; do if grep -q "^$c " $W/query-metrics.txt || grep -q "^$c$" $W/query-metrics.txt || grep -qw "$c" $W/query-metrics.txt; then M="$M,$c.sum"; else echo "metric missing: $c" | tee -a $LOG; fi; done
M=${M#,}; echo "metrics: $M" | tee -a $LOG
cd $C/workloads
say "ncu lessons (all variants)"
timeout 150 $NCU --clock-control none --set detailed --section WarpStateStats --metrics "$M" \
  -k 'regex:^(copy_f32_strided|copy_f32|divergent_branch|predicated_select|transpose_naive|transpose_tiled|transpose_tiled_padded)$' \
  -f -o $W/lessons python3 ncu_lessons.py --kernels $C/kernels > $W/ncu-lessons.log 2>&1; echo "rc=$?" | tee -a $LOG
tail -5 $W/ncu-lessons.log | tee -a $LOG
for pr in before after; do
  say "ncu pair $pr"
  timeout 90 $NCU --clock-control none --set detailed --section WarpStateStats --metrics "$M" -k 'regex:^lesson_' \
    -f -o $W/pair-$pr python3 ncu_lessons.py --kernels $C/kernels --pair $pr > $W/ncu-$pr.log 2>&1; echo "rc=$?" | tee -a $LOG
done
for r in lessons pair-before pair-after; do
  [ -f $W/$r.ncu-rep ] || continue
  for pg in raw details; do timeout 60 $NCU --import $W/$r.ncu-rep --csv --page $pg > $W/$r.$pg.csv 2>>$LOG; done
  ls -la $W/$r.* | tee -a $LOG
done
(cd $W && tar cJf $OUT/h23-ncu.tar.xz env.txt *.csv ncu-*.log; tar cJf $OUT/h23-reps.tar.xz *.ncu-rep) 2>>$LOG
say "torch.compile with a graph break"
TORCH_LOGS=graph_breaks,recompiles timeout 150 python3 compile_graph_break.py --out $W > $W/compile.stdout 2> $W/compile.log; echo "rc=$?" | tee -a $LOG
tail -15 $W/compile.stdout | tee -a $LOG; grep -c . $W/compile.log | tee -a $LOG; head -c 1500 $W/compile.log | tee -a $LOG
say "data-loader-bound kineto"
timeout 90 python3 dataloader_bound.py --out $W > $W/dataloader.stdout 2>&1; echo "rc=$?" | tee -a $LOG
say "flame with_stack kineto"
timeout 90 python3 flame_stacks.py --out $W > $W/flame.stdout 2>&1; echo "rc=$?" | tee -a $LOG
ls -la $W | tee -a $LOG
(cd $W && tar cJf $OUT/h23-torch.tar.xz compile.* dataloader.kineto.json dataloader.stdout flame.*) 2>>$LOG
say "nsys data-loader"
NSYS=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys
export LD_LIBRARY_PATH=$C/lib:${LD_LIBRARY_PATH:-}
timeout 100 $NSYS profile -t cuda,nvtx,osrt -s cpu --cpuctxsw=process-tree --force-overwrite=true -o $W/dataloader python3 dataloader_bound.py --nvtx > $W/nsys.log 2>&1; echo "rc=$?" | tee -a $LOG
tail -8 $W/nsys.log | tee -a $LOG
[ -f $W/dataloader.nsys-rep ] && timeout 60 $NSYS export --type sqlite --force-overwrite true --output $W/dataloader.sqlite $W/dataloader.nsys-rep >> $W/nsys.log 2>&1
ls -la $W | tee -a $LOG
say "pack"
cd $W
[ -f dataloader.sqlite ] && tar cJf $OUT/h23-nsys.tar.xz dataloader.sqlite nsys.log 2>>$LOG
ls -la $OUT | tee -a $LOG
grep -E "l1tex__t_sectors|branch|bank|thread_inst" $W/query-metrics.txt | head -30 > $OUT/metrics-grep.txt
say done
