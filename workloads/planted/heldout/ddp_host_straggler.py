"""4-rank DDP (torchrun --nproc_per_node=4) with a straggler caused by the HOST: before launching each
step, rank 1 spends ~3 ms in host work (time.sleep: a stand-in for per-step Python preprocessing), and
every rank reads its loss with .item() at the end of the step (logging), so rank 1's GPU idles while
its host sleeps and the other ranks then wait for rank 1 at the step's all-reduces. Equal rows, bf16
autocast, fp32 parameters, fused AdamW, DDP defaults. NVTX: step_N.

--fixed: no host delay on any rank.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import time

import torch

from common import MLP, StepClock, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=16384, help="rows per rank")
p.add_argument("--dims", default="1024,2048,4096,8192,4096,1024")
p.add_argument("--slow-rank", type=int, default=1)
p.add_argument("--sleep-ms", type=float, default=3.0)
p.add_argument("--fixed", action="store_true", help="no host delay")
a = parse(p)

dist, rank, world, local = init_distributed()
dims = [int(v) for v in a.dims.split(",")]
torch.manual_seed(a.seed)
model = MLP(dims).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=True)
torch.manual_seed(a.seed + rank)
x = torch.randn(a.rows, dims[0], device="cuda")
delay = a.sleep_ms / 1e3 if (rank == a.slow_rank and not a.fixed) else 0.0
log = []
clock = StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        if delay:
            time.sleep(delay)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = ddp(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        log.append(loss.item())
clock.end(f", rank {rank}")
dist.destroy_process_group()
