"""Training of a large residual MLP that predicts 1024 assay targets from precomputed 4096-d molecule embeddings: an input
projection 4096 -> 8192, 6 pre-LN residual blocks (LayerNorm, Linear 8192 -> 16384, GELU, Linear 16384 -> 8192,
residual add; biases everywhere), a final LayerNorm and a head 8192 -> 1024 (1.65 B parameters, fp32 master weights),
bf16 autocast, MSE loss, fused AdamW; 2048 embeddings per step (synthetic, resident on the GPU, two batches used
alternately), the host kept one step ahead by an event sync on the previous step.
The training loop was written for float16 autocast and later switched to bfloat16; it kept its torch.amp.GradScaler:
every step scales the loss, checks every gradient for inf / NaN (one in-place pass over the 1.65 B fp32 gradients, the
fused optimizer taking the scale), and updates the scale.
NVTX: step_N > forward / backward / optimizer.

--fixed: no GradScaler (bfloat16 has float32's exponent range: loss scaling is not needed).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=2048, help="embeddings per step")
p.add_argument("--d-in", type=int, default=4096)
p.add_argument("--width", type=int, default=8192)
p.add_argument("--hidden", type=int, default=16384)
p.add_argument("--blocks", type=int, default=6)
p.add_argument("--targets", type=int, default=1024)
p.add_argument("--fixed", action="store_true", help="no GradScaler")
a = parse(p)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class PropertyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(a.d_in, a.width)
        self.blocks = nn.Sequential(*(Block(a.width, a.hidden) for _ in range(a.blocks)))
        self.norm = nn.LayerNorm(a.width)
        self.head = nn.Linear(a.width, a.targets)

    def forward(self, x):
        return self.head(self.norm(self.blocks(self.inp(x))))


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = PropertyMLP()
for name, q in model.named_parameters():
    if name.endswith("bias"):
        nn.init.zeros_(q)
    elif q.dim() >= 2:
        nn.init.normal_(q, std=0.02 if not name.startswith("blocks") else 0.01)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
scaler = torch.amp.GradScaler("cuda", enabled=not a.fixed)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, a.d_in, device="cuda", generator=g),
            torch.randn(a.rows, a.targets, device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                pred = model(x)
            loss = F.mse_loss(pred.float(), y)
        with nvtx("backward"):
            scaler.scale(loss).backward()
        with nvtx("optimizer"):
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e9:.2f} B")
