#!/usr/bin/env bash
# Issue 21 on a GPU host: the nine questions over one MCP session on 1 GB and 5 GB exports inflated there
# from tests/data/ddp.sqlite.xz, with the page-cache read of each file beside the figures.
#
#   scripts/bench/big_exports_device.sh CARRY     (CARRY holds aisp.xz and inflate_profile.xz; results in $OUT)
set -u
CARRY="$(cd "$1" && pwd)"
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
W=/tmp/big; rm -rf $W; mkdir -p $W
xz -dc "$CARRY/aisp.xz" > $W/aisp && chmod +x $W/aisp
xz -dc "$CARRY/inflate_profile.xz" > $W/inflate && chmod +x $W/inflate
xz -dc "$REPO/tests/data/ddp.sqlite.xz" > $W/ddp.sqlite
{ nproc; grep -m1 'model name' /proc/cpuinfo; free -g | head -2; nvidia-smi -L; } 2>&1
for mb in 1000 5000; do
  f=$W/ddp_$mb.sqlite
  t=$(date +%s); $W/inflate $W/ddp.sqlite $f --target-mb $mb > /dev/null; echo "inflated $mb MB in $(( $(date +%s) - t )) s: $(stat -c %s $f) bytes"
  for i in 1 2 3; do python3 $REPO/scripts/bench/profile_session.py $W/aisp $f --label "${mb}MB_run$i" --json $OUT/sessions.jsonl | sed -n 1,13p; done
  dd if=$f of=/dev/null bs=4M 2>&1 | tail -1
  rm -f $f
done
