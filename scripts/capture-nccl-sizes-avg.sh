#!/bin/bash
# Issue 16's NCCL message-size captures (tests/data/capture/nccl_sizes_1gpu*). Run on the GPU machine from a
# folder C holding this script, capture-nccl-sizes.py and lib/ (libdw.so.1, libelf.so.1 for nsys's importer:
# copies of /work/shared/nsys-runtime/lib/*-0.188.so); results under $OUT.
C=$(cd "$(dirname "$0")" && pwd); W=/tmp/w2; mkdir -p $W; LOG=$OUT/log.txt
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
NSYS=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys
export LD_LIBRARY_PATH=$C/lib:${LD_LIBRARY_PATH:-}
cd $W
MANIFEST=$W/manifest.json timeout 150 $NSYS profile -t cuda,nvtx --force-overwrite=true -o $W/avg python3 $C/capture-nccl-sizes.py --avg >> $LOG 2>&1; echo "rc=$?" >> $LOG
timeout 90 $NSYS export --type sqlite --include-blobs=true --force-overwrite true --output $W/avg.sqlite $W/avg.nsys-rep > /dev/null 2>&1; echo "export rc=$?" >> $LOG
python3 - >> $LOG 2>&1 <<'PY'
import sqlite3
c = sqlite3.connect("/tmp/w2/avg.sqlite")
for r in c.execute("select s.value, count(*) from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id=k.shortName group by 1"): print(r)
for r in c.execute("select coalesce(e.text,s.value), count(*) from NVTX_EVENTS e left join StringIds s on s.id=e.textId where e.binaryData is not null group by 1"): print(r)
PY
xz -9 -k -T4 avg.sqlite; cp avg.sqlite.xz manifest.json $OUT/
