"""bf16 fine-tuning of a compressed (low-rank factorized) MLP classifier over precomputed 4096-d features: 6 hidden
layers of width 4096, each weight stored as two factors from a truncated SVD, U (4096 x 512) and V (512 x 4096), plus a
bias (GELU after each), and a dense 1000-class head (29.3 M parameters), trained with cross-entropy; 16384 rows per step
(features and labels resident on the GPU, two batches used alternately), pure bf16 parameters, fused AdamW, the host
kept one step ahead by an event sync on the previous step. A factorized layer computes its output as
F.linear(x, self.U @ self.V, self.bias): the dense 4096 x 4096 weight is rebuilt from the factors in every forward and
the activations are multiplied by it (16384 x 4096 x 4096), and the backward computes the dense weight's gradient
(4096 x 4096, over the 16384 rows) and from it the factors' gradients.
NO NVTX ranges: iterations must be found from the kernel pattern.

--fixed: F.linear(F.linear(x, self.V), self.U, self.bias): the activations go through the rank-512 factors one after the
other; same parameters, same function.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=16384)
p.add_argument("--width", type=int, default=4096)
p.add_argument("--rank", type=int, default=512)
p.add_argument("--layers", type=int, default=6)
p.add_argument("--classes", type=int, default=1000)
p.add_argument("--fixed", action="store_true", help="apply the factors one after the other")
a = parse(p)

KW = dict(device="cuda", dtype=torch.bfloat16)


class LowRankLinear(nn.Module):
    def __init__(self, d_in, d_out, r):
        super().__init__()
        self.U = nn.Parameter(torch.randn(d_out, r, **KW) * r ** -0.5)
        self.V = nn.Parameter(torch.randn(r, d_in, **KW) * d_in ** -0.5)
        self.bias = nn.Parameter(torch.zeros(d_out, **KW))

    def forward(self, x):
        if a.fixed:
            return F.linear(F.linear(x, self.V), self.U, self.bias)
        return F.linear(x, self.U @ self.V, self.bias)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(LowRankLinear(a.width, a.width, a.rank) for _ in range(a.layers))
        self.head = nn.Linear(a.width, a.classes, **KW)

    def forward(self, x):
        for layer in self.layers:
            x = F.gelu(layer(x))
        return self.head(x)


torch.manual_seed(a.seed)
model = Classifier()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, a.width, generator=g, **KW),
            torch.randint(0, a.classes, (a.rows,), device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    loss = F.cross_entropy(model(x).float(), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses[step] = loss.detach()
    throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M")
