#!/usr/bin/env bash
# Nsight Systems fixtures for issue 23's data-loader and flame-graph paths. Run on a GPU host from a folder
# holding workloads/ (copy of ../workloads) and lib/ (libdw.so.1, libelf.so.1: real files, not the 14-byte
# text stubs); OUT=results. Each capture is bounded by `timeout`; everything lands in $OUT as .sqlite.xz.
#   bound         dataloader_bound.py --nvtx --emit-nvtx: 2 workers at 1.5 ms/sample, step_N + DataLoader ranges
#   bound_plain   the same without emit_nvtx (step_N only): what the OS-runtime/scheduling path must read
#   healthy       4 workers at 0.2 ms/sample, prefetch 4, a 15 ms longer GPU step, --emit-nvtx: the loader keeps up
#   healthy_plain the same without emit_nvtx
#   flame         (FLAME=1) flame_stacks.py --seconds 3 with CPU sampling (dwarf backtraces, Python sampling)
set -u
C=$(cd "$(dirname "$0")" && pwd)
W=/tmp/nsysw; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1
LOG=$OUT/log.txt
say() { echo "== $(date -u +%T) $*" | tee -a $LOG; }
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH=$C/lib:${LD_LIBRARY_PATH:-}
{ date -u +%FT%TZ; $NSYS --version; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  python3 -c 'import torch,sys; print("torch", torch.__version__, sys.version.split()[0])'; ls -la $C/lib; } 2>&1 | tee -a $LOG
$NSYS profile --help > $W/help.txt 2>&1
grep -E -A4 -- '--(sample|backtrace|cpuctxsw|python-sampling|python-sampling-frequency|sampling-frequency|trace-fork-before-exec|wait|kill|osrt-threshold)[ =,]' $W/help.txt > $OUT/help.txt
PYS=""; grep -q -- '--python-sampling' $W/help.txt && PYS="--python-sampling=true --python-sampling-frequency=1000"
cd $C/workloads
cap() { # name, nsys flags..., --, command...
  local n=$1; shift; local f=(); while [ "$1" != "--" ]; do f+=("$1"); shift; done; shift
  say "capture $n: ${f[*]} -- $*"
  timeout -k 10 150 $NSYS profile "${f[@]}" --wait=primary --force-overwrite=true -o $W/$n "$@" > $W/$n.log 2>&1
  echo "rc=$?" | tee -a $LOG; tail -6 $W/$n.log | tee -a $LOG
  if [ -f $W/$n.nsys-rep ]; then
    timeout -k 10 120 $NSYS export --type sqlite --force-overwrite true --output $W/$n.sqlite $W/$n.nsys-rep >> $W/$n.log 2>&1
    echo "export rc=$?" | tee -a $LOG
  else ls -la $W | tee -a $LOG; fi
  [ -f $W/$n.sqlite ] && { ls -la $W/$n.sqlite | tee -a $LOG; xz -T0 -9 -c $W/$n.sqlite > $OUT/$n.sqlite.xz; ls -la $OUT/$n.sqlite.xz | tee -a $LOG; }
  return 0
}
# CPU samples are left out of the loader captures (scheduling events give each thread's running time; the
# samples' call chains would make the exports ~10x larger).
LOADER="-t cuda,nvtx,osrt -s none --cpuctxsw=process-tree --trace-fork-before-exec=true"
cap bound $LOADER -- python3 dataloader_bound.py --nvtx --emit-nvtx --steps 40
cap bound_plain $LOADER -- python3 dataloader_bound.py --nvtx --steps 40
HEALTHY="--workers 4 --sample-ms 0.2 --prefetch 4 --gpu-ms 15 --steps 120"
cap healthy $LOADER -- python3 dataloader_bound.py --nvtx --emit-nvtx $HEALTHY
cap healthy_plain $LOADER -- python3 dataloader_bound.py --nvtx $HEALTHY
[ -n "${FLAME:-}" ] && cap flame -t cuda,nvtx,osrt -s process-tree --backtrace=dwarf --cpuctxsw=process-tree $PYS -- python3 flame_stacks.py --seconds 3
[ -n "${FLAME:-}" ] && [ ! -f $W/flame.sqlite ] && cap flame -t none -s process-tree --backtrace=fp --cpuctxsw=none -- python3 flame_stacks.py --seconds 3
(cd $W && tail -n 30 *.log) > $OUT/nsys-logs.txt 2>&1
ls -la $OUT | tee -a $LOG
say done
