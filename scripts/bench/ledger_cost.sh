#!/usr/bin/env bash
# The step ledger's cost on the nine-question session (issue 31): the release build before the ledger and the one
# after, alternating, on the 56 MB two-GPU export and on a ~1 GB export inflated from it.
#   scripts/bench/ledger_cost.sh BEFORE_AISP AFTER_AISP INFLATE_PROFILE OUTDIR [RUNS]
# BEFORE/AFTER: release binaries (or .xz of them); INFLATE_PROFILE: `cargo build --release --example inflate_profile`.
set -euo pipefail
before=$1 after=$2 inflate=$3 out=$4 runs=${5:-3}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
for pair in "before:$before" "after:$after" "inflate:$inflate"; do
  name=${pair%%:*} src=${pair#*:}
  case $src in *.xz) xz -dc "$src" > "$w/$name" ;; *) cp "$src" "$w/$name" ;; esac
  chmod +x "$w/$name"
done
mkdir -p "$out"
{ nproc; grep -m1 "model name" /proc/cpuinfo; uptime; } > "$out/machine.txt"
xz -dkc tests/data/ddp.sqlite.xz > "$w/ddp.sqlite"
"$w/inflate" "$w/ddp.sqlite" "$w/ddp_1g.sqlite" --target-mb 1000 > "$out/inflate.log" 2>&1
stat -c '%n %s' "$w/ddp.sqlite" "$w/ddp_1g.sqlite" >> "$out/machine.txt"
for f in ddp ddp_1g; do
  for i in $(seq 1 "$runs"); do
    for b in before after; do
      python3 scripts/bench/profile_session.py "$w/$b" "$w/$f.sqlite" --label "$b $f run$i" --json "$out/session.jsonl"
    done
  done
done
