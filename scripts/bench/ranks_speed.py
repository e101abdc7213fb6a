#!/usr/bin/env python3
"""Cross-rank analysis speed: digest and merge times and peak RSS of `aisp profile ranks` on sets of
per-rank exports, with nsys-ai's closest counterpart where it runs.

usage: python3 scripts/bench/ranks_speed.py AISP_BIN EXPORT_EDIT_BIN DDP.sqlite WORK_DIR
           [--ranks 2,16,64] [--big FILE_1G --big-count 16 [--distinct]] [--nsys-ai NSYS_AI_BIN]

Sets: DDP.sqlite (the 2-GPU DDP export) split per rank with `export_edit split` (full files, OS runtime kept),
then copied to N ranks with `export_edit identity` (rank r is a copy of real rank r % 2, on host node<r/8>,
device r % 8). `--big`: FILE_1G (made by examples/inflate_profile.rs from DDP.sqlite; two processes, so two
ranks per file) named --big-count times through symbolic links (disk space), each a clock domain; with
`--distinct`, --big-count real copies (distinct inodes, --big-count × its size of disk), each written, synced
and evicted from the page cache (posix_fadvise DONTNEED) before the run, so every byte is read from disk; nsys-ai
then runs once, on one more evicted copy (its per-file NCCL breakdown; the set would take 16 × that).

For each set, whole processes with a fresh $AISP_HOME, files in the OS page cache (generated just before):
  digest+merge  aisp profile ranks SET --write-digests D   (wall, peak RSS; digest_ms/merge_ms from its answer)
  merge only    aisp profile ranks D                         (reads the Parquet digests alone)
nsys-ai has no set analysis; its closest counterpart is its NCCL breakdown skill run once per rank file, one
after another, with `-p device=<the rank's device>` (it reads device 0 otherwise), on a fresh copy of each file (it
writes indexes and a Parquet cache beside what it reads). Prints Markdown rows.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def run(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {code}: {err.decode(errors='replace')[-800:]}")
    return wall, ru.ru_maxrss / 1024, out


def flag(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def make_set(edit, base, n, out):
    os.makedirs(out)
    for r in range(n):
        subprocess.run(
            [edit, "identity", base[r % 2], os.path.join(out, f"rank_{r}.sqlite"), "--rank", str(r),
             "--local-rank", str(r % 8), "--world", str(n), "--hostname", f"node{r // 8}", "--device", str(r % 8)],
            check=True, stderr=subprocess.DEVNULL)


def aisp_pair(aisp, set_path, work):
    env = dict(os.environ, AISP_HOME=tempfile.mkdtemp(dir=work))
    digests = os.path.join(work, "digests")
    shutil.rmtree(digests, ignore_errors=True)
    w1, r1, out = run([aisp, "profile", "ranks", set_path, "--write-digests", digests, "--format", "json"], env)
    a = json.loads(out)
    w2, r2, out2 = run([aisp, "profile", "ranks", digests, "--format", "json"], env)
    b = json.loads(out2)
    assert b["source"] == "digests"
    assert len(b["set"]["identities"]) == len(a["set"]["identities"])
    s = a["set"]["cross_rank"]["stragglers"]
    return {
        "wall": w1, "rss": r1, "digest_ms": a["digest_ms"], "merge_ms": a["merge_ms"],
        "merge_wall": w2, "merge_rss": r2, "ranks": len(a["set"]["identities"]),
        "straggler": s[0]["rank"] if s else None,
        "residual_ns": a["set"]["alignment"]["residual_ns"],
    }


def nsys_ai_per_file(bin_, files, work):
    total, rss = 0.0, 0.0
    for f in files:
        d = tempfile.mkdtemp(dir=work)
        dst = os.path.join(d, os.path.basename(f))
        shutil.copyfile(f, dst)
        # Its skills read device 0 unless told; rank r of these sets runs on device r % 8.
        rank = int(os.path.basename(f).split("_")[1].split(".")[0])
        w, r, _ = run([bin_, "skill", "run", "nccl_breakdown", dst, "-p", f"device={rank % 8}"])
        total += w
        rss = max(rss, r)
        shutil.rmtree(d)
    return total, rss


def evict(path):
    """Drop a file's pages from the page cache (dirty pages are written first)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    skip = {flag(n) for n in ("--ranks", "--big", "--big-count", "--nsys-ai") if flag(n)}
    aisp, edit, ddp, work = [a for a in args if a not in skip][:4]
    os.makedirs(work, exist_ok=True)
    nsys_ai = flag("--nsys-ai")
    base_dir = os.path.join(work, "base")
    if not os.path.isdir(base_dir):
        subprocess.run([edit, "split", ddp, base_dir], check=True, stderr=subprocess.DEVNULL)
    base = [os.path.join(base_dir, f"rank_{r}.sqlite") for r in range(2)]
    print("| set | ranks | files (MB) | digest+merge s | digest ms | merge ms | peak RSS MiB | merge from digests s | its RSS MiB | nsys-ai NCCL per file, serial s | its RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in flag("--ranks", "2,16,64").split(",")]:
        set_dir = os.path.join(work, f"set{n}")
        shutil.rmtree(set_dir, ignore_errors=True)
        make_set(edit, base, n, set_dir)
        files = sorted(os.path.join(set_dir, f) for f in os.listdir(set_dir))
        mb = sum(os.path.getsize(f) for f in files) / 1e6
        a = aisp_pair(aisp, set_dir, work)
        ns = nsys_ai_per_file(nsys_ai, files, work) if nsys_ai else None
        print(f"| ddp split, {n} ranks | {a['ranks']} | {mb:,.0f} | {a['wall']:.2f} | {a['digest_ms']:,} | {a['merge_ms']:,} | "
              f"{a['rss']:.0f} | {a['merge_wall']:.3f} | {a['merge_rss']:.0f} | "
              + (f"{ns[0]:.2f} | {ns[1]:.0f} |" if ns else "– | – |"))
        shutil.rmtree(set_dir)
    big = flag("--big")
    if big:
        count = int(flag("--big-count", "16"))
        set_dir = os.path.join(work, "big")
        shutil.rmtree(set_dir, ignore_errors=True)
        os.makedirs(set_dir)
        distinct = "--distinct" in sys.argv
        for i in range(count):
            dst = os.path.join(set_dir, f"node{i}.sqlite")
            if distinct:
                shutil.copyfile(big, dst)
            else:
                os.symlink(os.path.abspath(big), dst)
        if distinct:
            for f in os.listdir(set_dir):
                evict(os.path.join(set_dir, f))
            evict(big)
        mb = os.path.getsize(big) * count / 1e6
        a = aisp_pair(aisp, set_dir, work)
        ns = "– | – |"
        if distinct and nsys_ai:
            shutil.rmtree(set_dir)  # disk: the copies go before nsys-ai's one copy
            d = tempfile.mkdtemp(dir=work)
            one = os.path.join(d, "rank_0.sqlite")
            shutil.copyfile(big, one)
            evict(one)
            try:
                w, r, _ = run(["timeout", "900", nsys_ai, "skill", "run", "nccl_breakdown", one, "-p", "device=0"])
                ns = f"{w:.2f} (one file) | {r:.0f} |"
            except SystemExit as e:
                ns = f"failed: {str(e)[-120:]} | – |"
            shutil.rmtree(d)
        kind = "distinct files, evicted from the page cache" if distinct else "symlinks to one cached file"
        print(f"| {count} x {os.path.getsize(big) / 1e6:,.0f} MB ({kind}) | {a['ranks']} | {mb:,.0f} | {a['wall']:.2f} | "
              f"{a['digest_ms']:,} | {a['merge_ms']:,} | {a['rss']:.0f} | {a['merge_wall']:.3f} | {a['merge_rss']:.0f} | {ns}")
        shutil.rmtree(set_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
