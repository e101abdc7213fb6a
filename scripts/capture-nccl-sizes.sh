#!/bin/bash
# Issue 16's NCCL message-size captures (tests/data/capture/nccl_sizes_1gpu*). Run on the GPU machine from a
# folder C holding this script, capture-nccl-sizes.py and lib/ (libdw.so.1, libelf.so.1 for nsys's importer:
# copies of /work/shared/nsys-runtime/lib/*-0.188.so); results under $OUT.
# h16 capture: NCCL collectives of known sizes under nsys (NVTX payloads) and torch.profiler.
C=$(cd "$(dirname "$0")" && pwd); W=/tmp/w; mkdir -p $W; LOG=$OUT/log.txt
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
NSYS=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys
export LD_LIBRARY_PATH=$C/lib:${LD_LIBRARY_PATH:-}
{ date -u; $NSYS --version; nvidia-smi --query-gpu=name,driver_version --format=csv; } >> $LOG 2>&1
$NSYS export --help > $OUT/export-help.txt 2>&1
cd $W
echo "== kineto" >> $LOG
MANIFEST=$W/manifest_kineto.json timeout 120 python3 $C/capture-nccl-sizes.py --kineto $W/colls.kineto.json >> $LOG 2>&1; echo "rc=$?" >> $LOG
echo "== nsys" >> $LOG
MANIFEST=$W/manifest.json timeout 150 $NSYS profile -t cuda,nvtx --force-overwrite=true -o $W/colls python3 $C/capture-nccl-sizes.py >> $LOG 2>&1; echo "rc=$?" >> $LOG
timeout 90 $NSYS export --type sqlite --include-blobs=true --force-overwrite true --output $W/colls.sqlite $W/colls.nsys-rep >> $LOG 2>&1; echo "export rc=$?" >> $LOG
ls -la $W >> $LOG
python3 - >> $OUT/inspect.txt 2>&1 <<'PY'
import sqlite3
c = sqlite3.connect("/tmp/w/colls.sqlite")
tabs = [r[0] for r in c.execute("select name from sqlite_master where type='table'")]
print(tabs)
for t in tabs:
    if "NVTX" in t or "PAYLOAD" in t:
        cols = [r[1] for r in c.execute(f"pragma table_info({t})")]
        n = c.execute(f"select count(*) from {t}").fetchone()[0]
        print("##", t, n, cols)
        for r in c.execute(f"select * from {t} limit 12"):
            print("  ", [x.hex() if isinstance(x, bytes) else x for x in r])
print("## NVTX with binaryData or jsonText")
try:
  for r in c.execute("select e.start,e.end,e.eventType,s.value,e.text,e.domainId,e.category, e.jsonText, e.binaryData from NVTX_EVENTS e left join StringIds s on s.id=e.textId where e.binaryData is not null or e.jsonText is not null limit 40"):
    print("  ", [x.hex() if isinstance(x, bytes) else x for x in r])
except Exception as e: print("ERR", e)
print("## distinct NVTX names")
for r in c.execute("select coalesce(e.text,s.value), count(*) from NVTX_EVENTS e left join StringIds s on s.id=e.textId group by 1 order by 2 desc limit 60"): print("  ", r)
PY
cd $W && xz -9 -k -T4 colls.sqlite && xz -9 -k colls.kineto.json
cp colls.sqlite.xz colls.kineto.json.xz manifest.json manifest_kineto.json $OUT/ 2>>$LOG
ls -la $OUT >> $LOG
