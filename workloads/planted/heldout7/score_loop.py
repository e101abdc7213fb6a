"""Online scoring service for a large bf16 ranking tower (torch.inference_mode): 2 residual feed-forward blocks of
d 16384 with hidden 32768 (x + fc2(gelu(fc1(x))), bias-free; 2.15 G parameters, 4.3 GB of bf16 weights) and a
1-wide score head with a sigmoid. Each tick of the service loop drains a queue of 16 requests (one 16384-wide feature
row each, resident on the GPU, cycled from a pool of 4 ticks' worth) and scores them one at a time in a Python loop,
`model(queue[i:i + 1])`, writing each score into a buffer on the GPU (read back once at the end); the host is kept
one tick ahead by an event sync. Every request is a matrix-vector product over all 4.3 GB of weights.
NVTX: step_N per tick.

--fixed: the tick's 16 requests are scored in one batched forward (one pass over the weights for all of them).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=20)
p.add_argument("--requests", type=int, default=16, help="requests per tick")
p.add_argument("--d-model", type=int, default=16384)
p.add_argument("--hidden", type=int, default=32768)
p.add_argument("--blocks", type=int, default=2)
p.add_argument("--fixed", action="store_true", help="score each tick's requests in one batched forward")
a = parse(p)

KW = dict(device="cuda", dtype=torch.bfloat16)  # weights made on the GPU in bf16 (no 17 GB fp32 init on the CPU)


class FFN(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.fc1 = nn.Linear(d, h, bias=False, **KW)
        self.fc2 = nn.Linear(h, d, bias=False, **KW)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(x)))


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(FFN(a.d_model, a.hidden) for _ in range(a.blocks))
        self.head = nn.Linear(a.d_model, 1, **KW)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return torch.sigmoid(self.head(x)).squeeze(-1)


torch.manual_seed(a.seed)
model = Tower().eval()
n = a.requests
g = torch.Generator(device="cuda").manual_seed(a.seed)
pool = torch.randn(4 * n, a.d_model, device="cuda", generator=g, dtype=torch.bfloat16)
scores = torch.zeros(a.steps * n, device="cuda")
torch.cuda.synchronize()

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        queue = pool[(step % 4) * n:(step % 4 + 1) * n]
        base = step * n
        with nvtx(f"step_{step}"):
            if a.fixed:
                scores[base:base + n] = model(queue)
            else:
                for i in range(n):
                    scores[base + i:base + i + 1] = model(queue[i:i + 1])
        throttle.step_done()
clock.end()
print("weights GB", round(sum(q.numel() for q in model.parameters()) * 2 / 1e9, 2),
      "score mean", float(scores.mean()), "requests", a.steps * n)
