"""2-rank data-parallel training (torchrun --nproc_per_node=2) of a bias-free bf16 MLP tower of 6 Linear 4096 -> 4096
layers with GELU between them (101 M parameters, pure bf16) under DistributedDataParallel (default 25 MB buckets),
mean squared error, with gradient accumulation: each optimizer step is 4 micro-batches of 1024 rows per rank (8192
rows per step over both ranks), fused AdamW, the host kept one step ahead by an event sync on the previous step.
The micro-batches' backward passes are run as plain `loss.backward()` calls on the DDP module, so DDP all-reduces the
(accumulated) gradients, 201 MB of them, after every micro-batch, not only after the last one.
NVTX: step_N > micro_K (K = 0..3) > forward / backward; step_N > optimizer.

--fixed: the first 3 micro-batches run inside `net.no_sync()` (gradients accumulate locally; one all-reduce per step).
"""
import contextlib
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from common import MLP, StepClock, Throttle, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=20)
p.add_argument("--micro-rows", type=int, default=1024, help="rows per micro-batch and rank")
p.add_argument("--accum", type=int, default=4, help="micro-batches per optimizer step")
p.add_argument("--width", type=int, default=4096)
p.add_argument("--layers", type=int, default=6)
p.add_argument("--fixed", action="store_true", help="no_sync() for all but the last micro-batch")
a = parse(p)
dist, rank, world, local = init_distributed()

torch.manual_seed(a.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
model = MLP([a.width] * (a.layers + 1)).to(device="cuda", dtype=torch.bfloat16)
net = DDP(model, device_ids=[local])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
R, W = a.micro_rows, a.width
g = torch.Generator(device="cuda").manual_seed(a.seed + rank)  # each rank its own data
batches = [(torch.randn(a.accum, R, W, device="cuda", generator=g, dtype=torch.bfloat16),
            torch.randn(a.accum, R, W, device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        for k in range(a.accum):
            last = k == a.accum - 1
            ctx = net.no_sync() if (a.fixed and not last) else contextlib.nullcontext()
            with nvtx(f"micro_{k}"), ctx:
                with nvtx("forward"):
                    out = net(x[k])
                    loss = (out.float() - y[k]).pow(2).mean() / a.accum
                with nvtx("backward"):
                    loss.backward()
            losses[step] += loss.detach()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        throttle.step_done()
clock.end(f", rank {rank}")
print(f"rank {rank} loss first/last", float(losses[0]), float(losses[-1]),
      "params", sum(q.numel() for q in model.parameters()))
dist.destroy_process_group()
