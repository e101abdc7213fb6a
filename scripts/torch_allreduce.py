#!/usr/bin/env python3
"""Reference all-reduce bandwidth with torch.distributed (NCCL backend, one
process per GPU), timed like aisp_hw_nccl: float32 sum, CUDA events around
back-to-back all-reduces, slowest rank per repetition, median; algbw = bytes /
time and busbw = algbw * 2(n-1)/n as nccl-tests defines them (GB = 1e9).

Prints one JSON object {"ranks", "rows": [{"bytes", "time_us", "algbw_gb_per_s",
"busbw_gb_per_s"}]}. NCCL_NVLS_ENABLE=0 must be set by the caller.
"""
import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, sizes, port, q):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    rows = []
    for nbytes in sizes:
        count = max(nbytes // 4, 1)
        x = torch.rand(count, device="cuda")
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dist.all_reduce(x)
        end.record()
        end.synchronize()
        # Every rank must run the same number of all-reduces: size the loop
        # from the slowest rank's probe (per-rank counts deadlock NCCL).
        probe = torch.tensor([max(start.elapsed_time(end), 1e-3)], device="cuda")
        dist.all_reduce(probe, op=dist.ReduceOp.MAX)
        one = probe.item()
        iters = max(1, min(1000, int(2.0 / one) + 1))
        samples = []
        for _ in range(20):
            dist.barrier()
            start.record()
            for _ in range(iters):
                dist.all_reduce(x)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3 / iters)
        t = torch.tensor(samples, device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        rows.append((nbytes, statistics.median(t.tolist())))
    if rank == 0:
        q.put(rows)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=int, default=65536)
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--step-factor", type=int, default=4)
    args = ap.parse_args()
    world = torch.cuda.device_count()
    sizes, s = [], args.min_bytes
    while s <= args.max_bytes:
        sizes.append(s)
        s *= args.step_factor
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, sizes, 29533, q)) for r in range(world)]
    for p in procs:
        p.start()
    rows = q.get()
    for p in procs:
        p.join()
    out = []
    for nbytes, t_us in rows:
        algbw = nbytes / (t_us / 1e6) / 1e9
        out.append({"bytes": nbytes, "time_us": t_us, "algbw_gb_per_s": algbw, "busbw_gb_per_s": algbw * 2 * (world - 1) / world})
    print(json.dumps({"tool": "torch.distributed.all_reduce", "torch_version": torch.__version__, "ranks": world, "rows": out}))


if __name__ == "__main__":
    main()
