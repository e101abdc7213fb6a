"""Online scoring service for a large residual MLP ranking tower: 6 pre-LN blocks x = x + fc2(gelu(fc1(ln(x)))) with
d 4096 and hidden 16384 (biases; 805 M parameters), a final LayerNorm and a score head 4096 -> 1 with a sigmoid, run
under torch.inference_mode. The checkpoint is served as trained, in fp32, and the scoring function opens
`torch.autocast("cuda", dtype=torch.bfloat16)` around each request so that the matmuls run in bf16: every request
therefore casts every weight matrix and bias to bf16 again (autocast keeps its casts only until the context closes),
and the LayerNorms and the residual stream stay in fp32. Each request is a batch of 2048 candidate feature vectors
(resident on the GPU, cycled from a pool of 4 batches); the scores are written into a buffer on the GPU (read back once
at the end), the host kept one request ahead by an event sync on the previous one.
NO NVTX ranges: iterations must be found from the kernel pattern.

--fixed: the model converted to bf16 once at load (model.to(torch.bfloat16)), the inputs in bf16, no autocast.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=2048, help="candidates per request")
p.add_argument("--d-model", type=int, default=4096)
p.add_argument("--hidden", type=int, default=16384)
p.add_argument("--blocks", type=int, default=6)
p.add_argument("--fixed", action="store_true", help="bf16 weights converted once, no autocast")
a = parse(p)


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
        self.head = nn.Linear(a.d_model, 1)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = Tower().eval()  # fp32, as the checkpoint was saved
g = torch.Generator(device="cuda").manual_seed(a.seed)
pool = torch.randn(4, a.rows, a.d_model, device="cuda", generator=g)
if a.fixed:
    model = model.to(torch.bfloat16)
    pool = pool.to(torch.bfloat16)
scores = torch.zeros(a.steps, a.rows, device="cuda")
torch.cuda.synchronize()


def score(x):
    if a.fixed:
        return torch.sigmoid(model(x).float().squeeze(-1))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return torch.sigmoid(model(x).float().squeeze(-1))


throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        scores[step] = score(pool[step % pool.shape[0]])
        throttle.step_done()
clock.end()
print("params M", round(sum(q.numel() for q in model.parameters()) / 1e6, 1),
      "mean score", round(float(scores[a.warmup:].mean()), 4), "first", [round(v, 4) for v in scores[a.warmup, :4].tolist()])
