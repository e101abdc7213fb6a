"""2-rank data-parallel training of a residual MLP tower without DistributedDataParallel: 16 pre-LayerNorm blocks
(LayerNorm, Linear d 1024 -> 4096 with bias, GELU, Linear 4096 -> 1024 with bias, residual add), a final LayerNorm
and a d -> d head with bias (100 parameter tensors, 134 M parameters), pure bf16 parameters, mean squared error,
fused AdamW; 4096 rows per rank per step (resident on the GPU, two batches used alternately), the host kept one
step ahead by an event sync on the previous step. The gradients are averaged by hand after the backward: one
`dist.all_reduce(p.grad, op=AVG)` per parameter tensor, 100 NCCL calls per step, none of them started before the
whole backward has finished. Parameters start equal on both ranks (same seed).
NVTX: step_N > forward / backward / allreduce / optimizer.

--fixed: DistributedDataParallel with its defaults (25 MB buckets, all-reduces overlapped with the backward).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from common import StepClock, Throttle, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=4096, help="rows per rank per step")
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--blocks", type=int, default=16)
p.add_argument("--fixed", action="store_true", help="DistributedDataParallel (bucketed, overlapped)")
a = parse(p)
dist, rank, world, local = init_distributed()


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(a.d_model, a.hidden) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model)
        self.head = nn.Linear(a.d_model, a.d_model)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


torch.manual_seed(a.seed)  # the same initial parameters on both ranks
model = Tower().cuda().to(torch.bfloat16)
net = DDP(model, device_ids=[local]) if a.fixed else model
params = list(model.parameters())
opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed + 17 * rank)
batches = [(torch.randn(a.rows, a.d_model, device="cuda", generator=g, dtype=torch.bfloat16),
            torch.randn(a.rows, a.d_model, device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            out = net(x)
            loss = (out.float() - y).pow(2).mean()
        with nvtx("backward"):
            loss.backward()
        if not a.fixed:
            with nvtx("allreduce"):
                for q in params:
                    dist.all_reduce(q.grad, op=dist.ReduceOp.AVG)
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end(f", rank {rank}")
print(f"rank {rank} loss first/last", float(losses[0]), float(losses[-1]), "tensors", len(params))
dist.destroy_process_group()
