# aisp torch.profiler wrapper: runs a Python script under torch.profiler and writes
# Kineto (Chrome trace) JSON files. Written into the run folder by aisp_profile_torch.
#
#   python3 aisp_torch_profile.py --out DIR [options] -- script.py [script args...]
#
# The profiler schedule (wait/warmup/active) advances once per optimizer step, through a
# global optimizer step hook, so training scripts need no changes. With --step-on none, or
# when the script never steps an optimizer, the whole run is recorded in one trace.
# Under torchrun each rank writes trace.rank<RANK>.json; otherwise trace.json.
import argparse
import json
import os
import runpy
import sys
import time


def main():
    ap = argparse.ArgumentParser(prog="aisp_torch_profile")
    ap.add_argument("--out", required=True)
    ap.add_argument("--wait", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--active", type=int, default=3)
    ap.add_argument("--step-on", choices=["optimizer", "none"], default="optimizer")
    ap.add_argument("--record-shapes", action="store_true")
    ap.add_argument("--profile-memory", action="store_true")
    ap.add_argument("--with-stack", action="store_true")
    ap.add_argument("--with-flops", action="store_true")
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") + 1 >= len(argv):
        ap.error("usage: aisp_torch_profile.py [options] -- script.py [args...]")
    split = argv.index("--")
    args = ap.parse_args(argv[:split])
    script, script_args = argv[split + 1], argv[split + 2:]

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    rank = os.environ.get("RANK")
    name = "trace.json" if rank is None else f"trace.rank{rank}.json"
    out_path = os.path.join(args.out, name)
    meta_path = os.path.join(args.out, "meta.json" if rank is None else f"meta.rank{rank}.json")
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)

    written = []

    def on_ready(p):
        p.export_chrome_trace(out_path)
        written.append(out_path)

    stepped = {"n": 0}
    use_schedule = args.step_on == "optimizer"
    kwargs = dict(
        activities=activities,
        record_shapes=args.record_shapes,
        profile_memory=args.profile_memory,
        with_stack=args.with_stack,
        with_flops=args.with_flops,
    )
    if use_schedule:
        kwargs["schedule"] = schedule(wait=args.wait, warmup=args.warmup, active=args.active, repeat=1)
        kwargs["on_trace_ready"] = on_ready

    prof = profile(**kwargs)
    handle = None
    if use_schedule:
        def hook(optimizer, *a, **k):
            stepped["n"] += 1
            prof.step()

        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            handle = register_optimizer_step_post_hook(hook)
        except ImportError:
            print("aisp: this torch has no global optimizer step hook; recording the whole run",
                  file=sys.stderr)
            use_schedule = False

    sys.argv = [script] + script_args
    script_dir = os.path.dirname(os.path.abspath(script))
    sys.path.insert(0, script_dir)
    started = time.time()
    status = 0
    prof.start()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        try:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except Exception as e:  # a failed script may leave the device in an error state
            print(f"aisp: cuda synchronize failed: {e}", file=sys.stderr)
        prof.stop()
        if handle is not None:
            handle.remove()
        if not use_schedule or not written:
            # No schedule, or the script stopped before the schedule's active steps ended:
            # export what was recorded (nothing when the schedule never reached its active steps).
            try:
                prof.export_chrome_trace(out_path)
                written.append(out_path)
            except Exception as e:  # an empty recording cannot be exported
                print(f"aisp: no trace exported: {e}", file=sys.stderr)
        meta = {
            "torch_version": torch.__version__,
            "cuda_available": torch.cuda.is_available(),
            "rank": rank,
            "optimizer_steps": stepped["n"],
            "schedule": {"wait": args.wait, "warmup": args.warmup, "active": args.active}
            if use_schedule else None,
            "traces": sorted(set(written)),
            "elapsed_s": round(time.time() - started, 3),
            "exit_status": status,
        }
        with open(meta_path, "w") as f:
            json.dump(meta, f, indent=1)
    sys.exit(status)


if __name__ == "__main__":
    main()
