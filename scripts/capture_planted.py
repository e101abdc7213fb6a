#!/usr/bin/env python3
"""Runner behind scripts/capture-planted.sh (read that file's header for how it is called).

Every case is a manifest (workloads/planted/manifests/*.json, workloads/planted/heldout/manifests/*.json,
workloads/planted/heldout2/manifests/*.json, workloads/planted/heldout3/manifests/*.json,
workloads/planted/heldout4/manifests/*.json, workloads/planted/heldout5/manifests/*.json,
workloads/planted/heldout6/manifests/*.json, workloads/planted/heldout7/manifests/*.json,
workloads/planted/heldout8/manifests/*.json, workloads/planted/heldout9/manifests/*.json,
workloads/planted/heldout10/manifests/*.json, workloads/planted/heldout11/manifests/*.json,
workloads/planted/heldout12/manifests/*.json, workloads/planted/heldout13/manifests/*.json,
workloads/planted/heldout14/manifests/*.json, workloads/planted/heldout15/manifests/*.json,
workloads/planted/heldout16/manifests/*.json, workloads/planted/heldout17/manifests/*.json,
workloads/planted/heldout18/manifests/*.json, workloads/planted/heldout19/manifests/*.json,
workloads/planted/heldout20/manifests/*.json) holding the program, its
arguments and its rank count. --set (or SET=) picks the sets: "tuned,heldout" by default (the 4-GPU captures),
"heldout2", "heldout3", "heldout4", "heldout5", "heldout6", "heldout7" or "heldout8" for the second to eighth held-out sets (one-GPU
and 2-rank cases, made for a 2-GPU host), "heldout9" for the ninth and "heldout10" for the tenth (one-GPU cases only,
made for one H200: the smoke and single phases), "heldout11" for the eleventh, "heldout12" for the twelfth,
"heldout13" for the thirteenth, "heldout14" for the fourteenth, "heldout15" for the fifteenth, "heldout16" for the
sixteenth and "heldout17" for the seventeenth (one-GPU cases and one 2-rank case each, made for 2 H200s: all three
phases), "heldout18" for the eighteenth, "heldout19" for the nineteenth and "heldout20" for the twentieth (one-GPU cases
only, made for one H200: the smoke and single phases).
Each capture goes through aisp's own capture operation, `aisp --allow-exec --format json profile nsys --json {...}`
("launcher": torchrun for the 4-rank cases), with "analyze": false; the SQLite exports it lists under `artifacts`
(`sqlite`, `sqlite_rank_N`) are kept.

Neutral names: nsys records the command line, the working folder and the environment in the export
(META_DATA_CAPTURE), so each case runs as `python3 train.py` from a folder named by a hash
(/tmp/pl/cases/c1a2b3c4), with its arguments in run_args.json beside it (the programs read that file):
an export read later as an evaluation case does not name its workload or variant.

Phases (N = the GPUs of the host, from nvidia-smi -L, or --gpus):
  smoke   every case for 5 steps without nsys or aisp (the 1-rank ones N at a time, then the multi-rank
          ones under torchrun): a ~2-4-minute check that every program runs before the captures
  single  every 1-rank case, N at a time, one GPU each (CUDA_VISIBLE_DEVICES); the cases that move
          data over PCIe share one GPU slot so that no two run at once
  multi   every multi-rank case (ranks <= N), one after another, on the first `ranks` GPUs
A case that would not finish inside the budget (default 540 s from the start) is skipped and listed;
a failing case is logged and the run goes on.

Writes under --out (at most 8 files): <phase>_summary.md, <phase>_results.json, <phase>_logs.tar.xz
(aisp answers and program output) and the exports, each xz-compressed, in plain tars of at most
15 MiB: <phase>_<set>[_<n>].tar holding <phase>_<set>/<case>.sqlite.xz or <case>.rank<N>.sqlite.xz.
"""
import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANTED = os.path.join(REPO, "workloads", "planted")
MANIFEST_DIRS = [("tuned", os.path.join(PLANTED, "manifests")), ("heldout", os.path.join(PLANTED, "heldout", "manifests")),
                 ("heldout2", os.path.join(PLANTED, "heldout2", "manifests")),
                 ("heldout3", os.path.join(PLANTED, "heldout3", "manifests")),
                 ("heldout4", os.path.join(PLANTED, "heldout4", "manifests")),
                 ("heldout5", os.path.join(PLANTED, "heldout5", "manifests")),
                 ("heldout6", os.path.join(PLANTED, "heldout6", "manifests")),
                 ("heldout7", os.path.join(PLANTED, "heldout7", "manifests")),
                 ("heldout8", os.path.join(PLANTED, "heldout8", "manifests")),
                 ("heldout9", os.path.join(PLANTED, "heldout9", "manifests")),
                 ("heldout10", os.path.join(PLANTED, "heldout10", "manifests")),
                 ("heldout11", os.path.join(PLANTED, "heldout11", "manifests")),
                 ("heldout12", os.path.join(PLANTED, "heldout12", "manifests")),
                 ("heldout13", os.path.join(PLANTED, "heldout13", "manifests")),
                 ("heldout14", os.path.join(PLANTED, "heldout14", "manifests")),
                 ("heldout15", os.path.join(PLANTED, "heldout15", "manifests")),
                 ("heldout16", os.path.join(PLANTED, "heldout16", "manifests")),
                 ("heldout17", os.path.join(PLANTED, "heldout17", "manifests")),
                 ("heldout18", os.path.join(PLANTED, "heldout18", "manifests")),
                 ("heldout19", os.path.join(PLANTED, "heldout19", "manifests")),
                 ("heldout20", os.path.join(PLANTED, "heldout20", "manifests"))]
DEFAULT_SETS = "tuned,heldout"
# workloads with pageable or host-heavy copies, or host-bound steps (heldout8: emb_loop, layer_timer; heldout9:
# anomaly_fit; heldout10: pixel_stream, a 1.23 GB pinned copy per step, and resmlp_fit, blocking launches; heldout11:
# chat_decode, whose fixed variant's decode step is set by the host; heldout15: vit_finetune, 9.3 GB of pinned copies
# per step, and char_lstm, whose step is set by the host; heldout16: ctr_batch, a CPU embedding gather and a 436 MB
# pageable copy per batch, and intent_finetune, whose step is set by the host; heldout17: photo_tagger, DataLoader
# workers forked every step, policy_learner, actor processes and a pipe, and query_embed, a CUDA graph captured per
# request, all three set by the host; heldout18: crop_watch, a 134 MB host array page-locked per step, session_ranker,
# a full garbage collection per step, and answer_rerank, a per-query loss loop, all three set by the host; heldout19:
# review_tagger, a GIL-holding serializer thread, fare_forecast, a tensor built from a Python list per step, and
# sensor_denoise, CPU-drawn noise and a 134 MB pageable copy per step, all three set by the host; heldout20:
# ledger_classifier, nvidia-smi spawned per step, claims_encoder, a SHA-256 of a 134 MB pinned batch per step, and
# shelf_tagger, a 10 MB JSON re-parsed per step, all three set by the host): one GPU slot, one at a time
PCIE_HEAVY = ("copy_bound", "d2h_sync", "fp32_head", "host_augment", "small_copies", "weight_upload", "ckpt_save",
              "text_tagger", "offload_adam", "tower_cache", "emb_loop", "layer_timer", "anomaly_fit", "pixel_stream", "resmlp_fit",
              "chat_decode", "vit_finetune", "char_lstm", "ctr_batch", "intent_finetune", "photo_tagger", "policy_learner",
              "query_embed", "crop_watch", "session_ranker", "answer_rerank", "review_tagger", "fare_forecast",
              "sensor_denoise", "ledger_classifier", "claims_encoder", "shelf_tagger")
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
TAR_LIMIT = 15 * 1024 * 1024

_lock = threading.Lock()
T0 = time.time()


def log(fh, msg):
    line = f"[{time.time() - T0:6.1f} s] {msg}"
    with _lock:
        print(line, flush=True)
        fh.write(line + "\n")
        fh.flush()


def load_cases(ranks, only, sets, gpus=None):
    """ranks 1: the one-GPU cases; ranks "multi": every case with more ranks than 1 that fits on `gpus`."""
    cases = []
    for set_name, d in MANIFEST_DIRS:
        if set_name not in sets or not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if not f.endswith(".json"):
                continue
            m = json.load(open(os.path.join(d, f)))
            r = m.get("ranks", 1)
            if (ranks == 1 and r != 1) or (ranks == "multi" and (r == 1 or (gpus and r > gpus))):
                continue
            if only and m["case"] not in only:
                continue
            m["_set"] = set_name
            cases.append(m)
    # Planted and healthy cases first (tuned, then held out), fixed variants last: if the budget runs
    # out, what is skipped is the cheapest to send again (ONLY=...).
    cases.sort(key=lambda m: (m.get("variant") == "fixed", m["_set"] != "tuned", m["case"]))
    return cases


def prepare(m, work):
    """A neutral folder: train.py (the workload), common.py, run_args.json (its arguments)."""
    cid = "c" + hashlib.sha1(m["case"].encode()).hexdigest()[:8]
    d = os.path.join(work, "cases", cid)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    shutil.copy(os.path.join(REPO, m["workload"]), os.path.join(d, "train.py"))
    shutil.copy(os.path.join(PLANTED, "common.py"), os.path.join(d, "common.py"))
    args = m["command"][2:]  # ["python3", "<script>", args...]
    with open(os.path.join(d, "run_args.json"), "w") as f:
        json.dump(args, f)
    return cid, d


def run_case(m, gpu, a, fh, deadline):
    name = m["case"]
    cid, d = prepare(m, a.work)
    home = os.path.join(a.work, "home", f"slot{gpu if gpu is not None else 'all'}")
    os.makedirs(home, exist_ok=True)
    env = dict(MULTICAST_OFF, PYTHONUNBUFFERED="1", TRITON_CACHE_DIR=os.path.join(a.work, "triton"),
               LD_LIBRARY_PATH=f"{a.lib}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    elif m.get("ranks", 1) < a.gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(m.get("ranks", 1)))
    timeout = max(20, min(a.case_timeout, int(deadline - time.time()) - 5))
    req = {"command": ["python3", "train.py"], "cwd": d, "env": env, "timeout_s": timeout,
           "trace": ["cuda", "nvtx", "osrt"], "analyze": False}
    if m.get("launcher"):
        req["launcher"] = m["launcher"]
    penv = dict(os.environ, AISP_HOME=home, AISP_CONFIG=os.path.join(a.work, "no-config.toml"))
    t = time.time()
    log(fh, f"start {name} ({cid}) {'gpu ' + str(gpu) if gpu is not None else 'all gpus'}, limit {timeout} s")
    out_json = os.path.join(a.work, "logs", f"{name}.aisp.json")
    err_txt = os.path.join(a.work, "logs", f"{name}.aisp.stderr")
    rec = {"case": name, "set": m["_set"], "id": cid, "gpu": gpu, "ranks": m.get("ranks", 1)}
    try:
        with open(out_json, "w") as fo, open(err_txt, "w") as fe:
            p = subprocess.run([a.aisp, "--allow-exec", "--format", "json", "profile", "nsys", "--json", json.dumps(req)],
                               stdout=fo, stderr=fe, env=penv, timeout=timeout + 60)
        rec["exit"] = p.returncode
    except subprocess.TimeoutExpired:
        rec["exit"] = "timeout"
    except OSError as e:
        rec["exit"] = f"not run: {e}"
    rec["wall_s"] = round(time.time() - t, 1)
    exports = {}
    try:
        ans = json.load(open(out_json))
    except Exception as e:  # noqa: BLE001
        ans = {"error": {"kind": "no answer", "message": str(e)}}
    if "error" in ans:
        rec["error"] = f"{ans['error'].get('kind')}: {ans['error'].get('message', '')[:600]}"
    else:
        rec["program_exit"] = ans.get("exit_code")
        rec["duration_ms"] = ans.get("duration_ms")
        rec["notes"] = ans.get("notes", [])[:4]
        tail = (ans.get("stdout") or {}).get("tail") or []
        rec["stdout_tail"] = [l for l in tail if "mean step" in l or "Error" in l or "error" in l][-8:] or tail[-4:]
        rec["stderr_tail"] = ((ans.get("stderr") or {}).get("tail") or [])[-6:]
        for k, path in sorted((ans.get("artifacts") or {}).items()):
            if not k.startswith("sqlite") or not os.path.isfile(path):
                continue
            suffix = "" if k == "sqlite" else "." + k[len("sqlite_"):].replace("_", "")
            dest_dir = os.path.join(a.work, "pack", m["_set"])
            os.makedirs(dest_dir, exist_ok=True)
            dest = os.path.join(dest_dir, f"{name}{suffix}.sqlite")
            shutil.copy(path, dest)
            exports[os.path.basename(dest)] = os.path.getsize(dest)
    rec["exports"] = exports
    status = "ok" if exports and rec.get("program_exit") == 0 else "FAILED"
    rec["status"] = status
    log(fh, f"end {name}: {status}, exit {rec.get('exit')}, program {rec.get('program_exit')}, {rec['wall_s']} s, "
            f"exports {', '.join(f'{k} {v / 1e6:.1f} MB' for k, v in exports.items()) or 'none'}"
            + (f", error {rec['error']}" if "error" in rec else ""))
    for l in rec.get("stdout_tail", []):
        log(fh, f"    | {l}")
    return rec


def smoke_case(m, gpu, a, fh):
    """Run the program directly for 5 steps (2 warm-up), no profiler: does it run at all?"""
    name = m["case"]
    cid, d = prepare(m, a.work)
    env = dict(os.environ, **MULTICAST_OFF, PYTHONUNBUFFERED="1", TRITON_CACHE_DIR=os.path.join(a.work, "triton"))
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    elif m.get("ranks", 1) < a.gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(m.get("ranks", 1)))
    cmd = ["python3", "train.py", "--steps", "5", "--warmup", "2"]
    if m.get("launcher"):
        cmd = m["launcher"] + ["train.py", "--steps", "5", "--warmup", "2"]
    t = time.time()
    try:
        p = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=180)
        code, text = p.returncode, (p.stdout + p.stderr)
    except subprocess.TimeoutExpired as e:
        code, text = "timeout", str(e)
    except OSError as e:  # e.g. torchrun not on PATH
        code, text = "not run", str(e)
    lines = [l for l in text.splitlines() if l.strip()]
    with open(os.path.join(a.work, "logs", f"{name}.smoke.txt"), "w") as f:
        f.write(text)
    rec = {"case": name, "set": m["_set"], "gpu": gpu, "exit": code, "wall_s": round(time.time() - t, 1),
           "status": "ok" if code == 0 else "FAILED",
           "stdout_tail": [l for l in lines if "mean step" in l][-4:] or lines[-6:]}
    if code != 0:
        rec["error"] = "\n".join(lines[-15:])
        rec["stderr_tail"] = lines[-15:]
    log(fh, f"smoke {name}: {rec['status']} ({code}) in {rec['wall_s']} s: " + " / ".join(rec["stdout_tail"][-2:]))
    return rec


def schedule_single(cases, n):
    """n slots (one per GPU); the PCIe-heavy cases all on slot 0, the rest spread by estimated cost."""
    slots = [[] for _ in range(n)]
    cost = [0.0] * n
    heavy = [m for m in cases if any(m["case"].startswith(h) for h in PCIE_HEAVY)]
    rest = [m for m in cases if m not in heavy]
    for m in heavy:
        slots[0].append(m)
        cost[0] += m.get("capture_estimate_s", 45)
    for m in sorted(rest, key=lambda m: -m.get("capture_estimate_s", 45)):
        i = min(range(n), key=lambda j: cost[j])
        slots[i].append(m)
        cost[i] += m.get("capture_estimate_s", 45)
    return slots


def pack(a, phase, fh):
    """xz every export, then tar them per set in files of at most TAR_LIMIT bytes."""
    made = []
    for set_name, _ in MANIFEST_DIRS:
        d = os.path.join(a.work, "pack", set_name)
        if not os.path.isdir(d):
            continue
        files = sorted(f for f in os.listdir(d) if f.endswith(".sqlite"))
        with cf.ThreadPoolExecutor(max_workers=8) as ex:
            list(ex.map(lambda f: subprocess.run(["xz", "-6", "-f", os.path.join(d, f)], check=False), files))
        xzs = sorted(f for f in os.listdir(d) if f.endswith(".sqlite.xz"))
        groups, cur, size = [], [], 0
        for f in xzs:
            s = os.path.getsize(os.path.join(d, f))
            if cur and size + s > TAR_LIMIT:
                groups.append(cur)
                cur, size = [], 0
            cur.append(f)
            size += s
        if cur:
            groups.append(cur)
        for i, g in enumerate(groups):
            name = f"{phase}_{set_name}{'' if len(groups) == 1 else '_' + str(i + 1)}.tar"
            path = os.path.join(a.out, name)
            with tarfile.open(path, "w") as t:
                for f in g:
                    t.add(os.path.join(d, f), arcname=f"{phase}_{set_name}/{f}")
            made.append((name, os.path.getsize(path), len(g)))
            log(fh, f"packed {name}: {len(g)} exports, {os.path.getsize(path) / 2**20:.1f} MiB")
    return made


def versions(a):
    cmds = [["nvidia-smi", "-L"],
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"],
            ["python3", "-c", "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, "
                              "'nccl', '.'.join(map(str, torch.cuda.nccl.version())), 'triton', triton.__version__, "
                              "'gpus', torch.cuda.device_count())"],
            [a.aisp, "--version"], [os.environ.get("AISP_NSYS", "nsys"), "--version"]]
    out = []
    for c in cmds:
        try:
            r = subprocess.run(c, capture_output=True, text=True, timeout=60)
            out.append(f"$ {' '.join(c[:2])}\n{(r.stdout + r.stderr).strip()}")
        except Exception as e:  # noqa: BLE001
            out.append(f"$ {' '.join(c[:2])}\n(failed: {e})")
    return "\n".join(out)


def count_gpus():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
        n = sum(1 for l in r.stdout.splitlines() if l.startswith("GPU "))
        return n or 1
    except Exception:  # noqa: BLE001
        return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", choices=["smoke", "single", "multi"], required=True)
    ap.add_argument("--aisp", required=True)
    ap.add_argument("--lib", required=True, help="folder prepended to LD_LIBRARY_PATH for nsys")
    ap.add_argument("--work", default="/tmp/pl")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=540.0, help="seconds from the start within which the phase ends")
    ap.add_argument("--pack-reserve", type=float, default=45.0, help="seconds kept for compressing and packing")
    ap.add_argument("--case-timeout", type=int, default=200)
    ap.add_argument("--only", default=os.environ.get("ONLY", ""), help="comma-separated case names")
    ap.add_argument("--set", default=os.environ.get("SET", "") or DEFAULT_SETS,
                    help=f"comma-separated sets ({', '.join(n for n, _ in MANIFEST_DIRS)}); default {DEFAULT_SETS}")
    ap.add_argument("--gpus", type=int, default=int(os.environ.get("GPUS", "0") or 0), help="GPUs to use (default: all)")
    a = ap.parse_args()
    sets = {s.strip() for s in a.set.split(",") if s.strip()}
    unknown = sets - {n for n, _ in MANIFEST_DIRS}
    if unknown:
        ap.error(f"unknown set(s): {', '.join(sorted(unknown))}")
    a.gpus = a.gpus or count_gpus()
    for sub in ("logs", "pack", "home", "cases"):
        os.makedirs(os.path.join(a.work, sub), exist_ok=True)
    open(os.path.join(a.work, "no-config.toml"), "w").close()
    os.makedirs(a.out, exist_ok=True)
    fh = open(os.path.join(a.work, "log.txt"), "a")
    only = {c.strip() for c in a.only.split(",") if c.strip()}
    if a.phase == "smoke":
        cases = load_cases(1, only, sets) + load_cases("multi", only, sets, a.gpus)
    else:
        cases = load_cases(1 if a.phase == "single" else "multi", only, sets, a.gpus)
    head = versions(a)
    log(fh, f"phase {a.phase}, sets {','.join(sorted(sets))}, {a.gpus} GPUs: {len(cases)} cases, budget {a.budget:.0f} s\n{head}")
    deadline = T0 + a.budget - a.pack_reserve
    results = []
    if a.phase == "smoke":
        ones = [m for m in cases if m.get("ranks", 1) == 1]
        slots = [ones[i::a.gpus] for i in range(a.gpus)]
        with cf.ThreadPoolExecutor(max_workers=a.gpus) as ex:
            for recs in ex.map(lambda i: [smoke_case(m, i, a, fh) for m in slots[i]], range(a.gpus)):
                results.extend(recs)
        for m in cases:
            if m.get("ranks", 1) > 1:
                results.append(smoke_case(m, None, a, fh))
    elif a.phase == "single":
        slots = schedule_single(cases, a.gpus)

        def worker(i):
            recs = []
            for m in slots[i]:
                est = m.get("capture_estimate_s", 45)
                if time.time() + est > deadline:
                    recs.append({"case": m["case"], "set": m["_set"], "status": "skipped (time)", "gpu": i})
                    log(fh, f"skip {m['case']}: {deadline - time.time():.0f} s left, needs ~{est} s")
                    continue
                recs.append(run_case(m, i, a, fh, deadline))
            return recs

        with cf.ThreadPoolExecutor(max_workers=a.gpus) as ex:
            for recs in ex.map(worker, range(a.gpus)):
                results.extend(recs)
    else:
        for m in cases:
            est = m.get("capture_estimate_s", 70)
            if time.time() + est > deadline:
                results.append({"case": m["case"], "set": m["_set"], "status": "skipped (time)"})
                log(fh, f"skip {m['case']}: {deadline - time.time():.0f} s left, needs ~{est} s")
                continue
            results.append(run_case(m, None, a, fh, deadline))
    made = pack(a, a.phase, fh)
    with tarfile.open(os.path.join(a.out, f"{a.phase}_logs.tar.xz"), "w:xz") as t:
        t.add(os.path.join(a.work, "logs"), arcname=f"{a.phase}_logs")
        t.add(os.path.join(a.work, "log.txt"), arcname=f"{a.phase}_logs/log.txt")
    json.dump({"phase": a.phase, "sets": sorted(sets), "gpus": a.gpus, "versions": head, "results": results, "tars": made,
               "elapsed_s": round(time.time() - T0, 1)}, open(os.path.join(a.out, f"{a.phase}_results.json"), "w"), indent=1)
    with open(os.path.join(a.out, f"{a.phase}_summary.md"), "w") as s:
        s.write(f"# planted captures, phase {a.phase}, sets {','.join(sorted(sets))}, {a.gpus} GPUs "
                f"({time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())})\n\n```\n{head}\n```\n\n")
        s.write("| case | set | status | exit | program | wall s | exports (MB) | mean step line |\n|---|---|---|---|---|---|---|---|\n")
        for r in results:
            ex = ", ".join(f"{k} {v / 1e6:.1f}" for k, v in (r.get("exports") or {}).items())
            line = "; ".join(r.get("stdout_tail", [])[-4:]).replace("|", "/")
            s.write(f"| {r['case']} | {r.get('set')} | {r.get('status')} | {r.get('exit', '')} | {r.get('program_exit', '')} | "
                    f"{r.get('wall_s', '')} | {ex} | {line[:300]} |\n")
        for r in results:
            if r.get("error") or r.get("status") == "FAILED":
                s.write(f"\n## {r['case']}\n\nerror: {r.get('error', '')}\n\nstderr tail:\n```\n" +
                        "\n".join(r.get("stderr_tail", [])) + "\n```\n")
        s.write(f"\ntars: {made}\n\nelapsed {time.time() - T0:.1f} s\n")
    log(fh, f"done in {time.time() - T0:.1f} s: " + ", ".join(f"{r['case']} {r.get('status')}" for r in results))
    failed = [r for r in results if r.get("status") != "ok"]
    sys.exit(0 if not failed else 1)


if __name__ == "__main__":
    main()
