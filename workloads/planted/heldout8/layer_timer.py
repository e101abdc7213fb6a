"""bf16 training of a deep residual MLP tower: 24 blocks x = x + fc2(gelu(fc1(x))) with d 1024 and hidden 4096
(bias-free, pure bf16 parameters, 201 M of them), the tower's output regressed on targets with a mean squared error,
4096 rows per step (inputs and targets resident on the GPU, two batches used alternately), fused AdamW, the host kept
one step ahead by an event sync on the previous step. Per-layer timing left switched on from a profiling session: a
forward pre-hook and a forward hook on every block call torch.cuda.synchronize() and read time.perf_counter(), and the
per-block forward times are accumulated in a Python list (printed at the end).
NO NVTX ranges: iterations must be found from the kernel pattern.

--fixed: no timing hooks (the forward is queued without waiting for the GPU).
"""
import os
import sys
import time

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=4096)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--blocks", type=int, default=24)
p.add_argument("--fixed", action="store_true", help="no per-block timing hooks")
a = parse(p)

KW = dict(device="cuda", dtype=torch.bfloat16)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.fc1 = nn.Linear(d, h, bias=False, **KW)
        self.fc2 = nn.Linear(h, d, bias=False, **KW)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(x)))


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(a.d_model, a.hidden) for _ in range(a.blocks))

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


class LayerTimer:
    """Wall time of each block's forward: synchronize before and after it."""

    def __init__(self, blocks):
        self.ms = [0.0] * len(blocks)
        self.t0 = 0.0
        for i, blk in enumerate(blocks):
            blk.register_forward_pre_hook(self.pre)
            blk.register_forward_hook(lambda m, inp, out, i=i: self.post(i))

    def pre(self, module, inp):
        torch.cuda.synchronize()
        self.t0 = time.perf_counter()

    def post(self, i):
        torch.cuda.synchronize()
        self.ms[i] += (time.perf_counter() - self.t0) * 1e3


torch.manual_seed(a.seed)
model = Tower()
timer = None if a.fixed else LayerTimer(model.blocks)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, a.d_model, generator=g, **KW),
            torch.randn(a.rows, a.d_model, device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    out = model(x)
    loss = (out.float() - y).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses[step] = loss.detach()
    throttle.step_done()
clock.end()
extra = "" if timer is None else f", slowest block forward {max(timer.ms) / a.steps:.3f} ms (host wall, mean)"
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M" + extra)
