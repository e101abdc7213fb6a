"""Data-parallel training with gradient accumulation done naively (torchrun --nproc_per_node=2; runs with
any rank count): each optimizer step runs 4 micro-batches of 2048 rows per rank through a DDP-wrapped
MLP (1024 -> 8192 -> 8192 -> 8192 -> 1024, 151 M parameters, 604 MB of fp32 gradients), and DDP
all-reduces the gradients after every micro-batch's backward (no no_sync()), so the full gradient set
crosses NVLink 4 times per step where once would do, and each all-reduce that outlasts its micro-batch's
backward holds up the next micro-batch. bf16 autocast, fp32 parameters, fused AdamW after the 4th
micro-batch. NVTX: step_N > micro_K.

--fixed: the first 3 micro-batches run under ddp.no_sync() (gradients accumulate locally); only the last
one all-reduces, overlapped with its backward.
"""
import contextlib
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch

from common import MLP, StepClock, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=2048, help="rows per micro-batch per rank")
p.add_argument("--micro", type=int, default=4, help="micro-batches per optimizer step")
p.add_argument("--dims", default="1024,8192,8192,8192,1024")
p.add_argument("--fixed", action="store_true", help="no_sync() on all but the last micro-batch")
a = parse(p)

dist, rank, world, local = init_distributed()
dims = [int(v) for v in a.dims.split(",")]
torch.manual_seed(a.seed)
model = MLP(dims).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=True)
torch.manual_seed(a.seed + rank)
xs = [torch.randn(a.rows, dims[0], device="cuda") for _ in range(a.micro)]
losses = torch.zeros(a.steps, device="cuda")
clock = StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        total = torch.zeros((), device="cuda")
        for k in range(a.micro):
            last = k == a.micro - 1
            sync = contextlib.nullcontext() if (last or not a.fixed) else ddp.no_sync()
            with nvtx(f"micro_{k}"), sync:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = ddp(xs[k]).float().pow(2).mean() / a.micro
                loss.backward()
                total += loss.detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses[step] = total
clock.end(f", rank {rank} of {world}, {'no_sync on' if a.fixed else 'all-reduce on every'} micro-batch")
dist.destroy_process_group()
