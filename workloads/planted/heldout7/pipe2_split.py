"""2-rank model-parallel training (torchrun --nproc_per_node=2) of a residual MLP tower split into two pipeline stages
without micro-batching: 8 pre-LayerNorm blocks (LayerNorm, Linear d 2048 -> 8192 with bias, GELU, Linear 8192 -> 2048
with bias, residual add; 268 M parameters in all, pure bf16), a final LayerNorm and a d -> d head with bias, mean
squared error; one batch of 8192 rows per step. Rank 0 holds blocks 0-3, rank 1 blocks 4-7, the final norm and the
head (a split carried over from a configuration that did not fit on one GPU; this one would, with room to spare).
Each step: rank 0 runs its forward and sends the 33.5 MB activation to rank 1 (dist.send), rank 1 runs its forward,
the loss and its backward and sends the activation's gradient back (dist.send), rank 0 runs its backward; each rank
then steps a fused AdamW over its own parameters. While one rank computes, the other waits in a receive. Inputs and
targets resident on the GPU (two batches used alternately); the host kept one step ahead by an event sync on the
previous step. Both ranks build the same tower from the same seed and keep their own stage.
NVTX: step_N > forward / backward / optimizer.

--fixed: plain data parallelism: every rank holds the whole tower under DistributedDataParallel (default buckets)
and takes its half of each step's 8192 rows.
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
p.add_argument("--rows", type=int, default=8192, help="rows per step (the whole batch, all ranks together)")
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--hidden", type=int, default=8192)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--fixed", action="store_true", help="DistributedDataParallel over the whole tower instead of 2 stages")
a = parse(p)
dist, rank, world, local = init_distributed()
if not a.fixed and world != 2:
    raise SystemExit(f"the 2-stage pipeline needs exactly 2 ranks (got {world})")

KW = dict(device="cuda", dtype=torch.bfloat16)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln = nn.LayerNorm(d, **KW)
        self.fc1 = nn.Linear(d, h, **KW)
        self.fc2 = nn.Linear(h, d, **KW)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Stage(nn.Module):
    def __init__(self, blocks, norm=None, head=None):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.norm = norm
        self.head = head

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        if self.head is not None:
            x = self.head(self.norm(x))
        return x


torch.manual_seed(a.seed)  # the same tower on every rank
blocks = [Block(a.d_model, a.hidden) for _ in range(a.blocks)]
norm, head = nn.LayerNorm(a.d_model, **KW), nn.Linear(a.d_model, a.d_model, **KW)
half = a.blocks // 2
if a.fixed:
    model = Stage(blocks, norm, head)
    net = DDP(model, device_ids=[local])
elif rank == 0:
    model = Stage(blocks[:half])
else:
    model = Stage(blocks[half:], norm, head)
del blocks, norm, head
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
R, d = a.rows, a.d_model
g = torch.Generator(device="cuda").manual_seed(a.seed)  # the same batches on every rank
batches = [(torch.randn(R, d, device="cuda", generator=g, dtype=torch.bfloat16),
            torch.randn(R, d, device="cuda", generator=g)) for _ in range(2)]
recv_buf = torch.empty(R, d, **KW)  # rank 1: the incoming activation; rank 0: the incoming gradient
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    loss = None
    with nvtx(f"step_{step}"):
        if a.fixed:
            lo, n = rank * (R // world), R // world
            with nvtx("forward"):
                out = net(x[lo:lo + n])
                loss = (out.float() - y[lo:lo + n]).pow(2).mean()
            with nvtx("backward"):
                loss.backward()
        elif rank == 0:
            with nvtx("forward"):
                h = model(x)
                dist.send(h.detach(), dst=1)
            with nvtx("backward"):
                dist.recv(recv_buf, src=1)
                h.backward(recv_buf)
        else:
            with nvtx("forward"):
                dist.recv(recv_buf, src=0)
                h_in = recv_buf.detach().requires_grad_(True)
                out = model(h_in)
                loss = (out.float() - y).pow(2).mean()
            with nvtx("backward"):
                loss.backward()
                dist.send(h_in.grad, dst=0)
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        if loss is not None:
            losses[step] = loss.detach()
        throttle.step_done()
clock.end(f", rank {rank}")
print(f"rank {rank} loss first/last", float(losses[0]), float(losses[-1]),
      "params", sum(q.numel() for q in model.parameters()))
dist.destroy_process_group()
