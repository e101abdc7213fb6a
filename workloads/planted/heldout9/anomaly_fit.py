"""bf16 training of a residual MLP regressor: an input projection 512 -> 1536, 4 pre-LN blocks
x = x + fc2(gelu(fc1(ln(x)))) with d 1536 and hidden 6144, and an output projection 1536 -> 256 (biases everywhere, pure
bf16 parameters, 76.7 M of them), regressed on targets with a mean squared error; 4096 rows per step (inputs and
targets resident on the GPU, two batches used alternately), fused AdamW, the host kept one step ahead by an event sync
on the previous step. Autograd anomaly detection is switched on at the top of the script,
torch.autograd.set_detect_anomaly(True), left from an earlier hunt for NaNs: every autograd node records the Python
stack when the forward creates it, and in the backward the engine checks every gradient a node returns for NaNs
(isnan, any, and a read of the result on the host) before it goes on to the next node.
NO NVTX ranges: iterations must be found from the kernel pattern.

--fixed: anomaly detection off.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=4096)
p.add_argument("--d-in", type=int, default=512)
p.add_argument("--d-model", type=int, default=1536)
p.add_argument("--hidden", type=int, default=6144)
p.add_argument("--blocks", type=int, default=4)
p.add_argument("--d-out", type=int, default=256)
p.add_argument("--fixed", action="store_true", help="anomaly detection off")
a = parse(p)

if not a.fixed:
    torch.autograd.set_detect_anomaly(True)

KW = dict(device="cuda", dtype=torch.bfloat16)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln = nn.LayerNorm(d, **KW)
        self.fc1 = nn.Linear(d, h, **KW)
        self.fc2 = nn.Linear(h, d, **KW)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(a.d_in, a.d_model, **KW)
        self.blocks = nn.ModuleList(Block(a.d_model, a.hidden) for _ in range(a.blocks))
        self.out = nn.Linear(a.d_model, a.d_out, **KW)

    def forward(self, x):
        x = self.inp(x)
        for blk in self.blocks:
            x = blk(x)
        return self.out(x)


torch.manual_seed(a.seed)
model = Regressor()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, a.d_in, generator=g, **KW),
            torch.randn(a.rows, a.d_out, device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    loss = (model(x).float() - y).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses[step] = loss.detach()
    throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M")
