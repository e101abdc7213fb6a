"""bf16-autocast training of a residual MLP tower: 6 blocks x = x + fc2(gelu(fc1(x))) with d 1024 and hidden 4096
(bias-free; fp32 parameters, 50 M of them), the tower's output regressed on targets with a mean squared error, 8192
rows per step (inputs and targets resident on the GPU, two batches used alternately), fused AdamW, the host kept one
step ahead by an event sync on the previous step. After every optimizer step the loop calls torch.cuda.empty_cache()
(added once to keep the process's reserved memory low next to an evaluation job on the same GPU): the caching
allocator hands every cached segment back to the driver (cudaFree, which also waits for the GPU to go idle), and the
next step's forward and backward cudaMalloc their ~1.3-1.5 GB of activations and gradients again, ~35 segments.
NO NVTX ranges: iterations must be found from the kernel pattern.

--fixed: no empty_cache() in the loop (the caching allocator reuses its segments from step to step).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=8192)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--blocks", type=int, default=6)
p.add_argument("--fixed", action="store_true", help="no torch.cuda.empty_cache() in the loop")
a = parse(p)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.fc1 = nn.Linear(d, h, bias=False)
        self.fc2 = nn.Linear(h, d, bias=False)

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


torch.manual_seed(a.seed)
model = Tower().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, a.d_model, device="cuda", generator=g),
            torch.randn(a.rows, a.d_model, device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(x)
    loss = (out.float() - y).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses[step] = loss.detach()
    if not a.fixed:
        torch.cuda.empty_cache()
    throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"reserved {torch.cuda.memory_reserved() / 1e9:.2f} GB, peak allocated {torch.cuda.max_memory_allocated() / 1e9:.2f} GB")
