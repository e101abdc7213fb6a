"""Fits a neural field to a 4096 x 2048 panorama (8.4 M pixels, RGB kept on the GPU as uint8): pixel coordinates
(x, y) scaled to [-1, 1] go through Gaussian Fourier features (256 random frequencies, sin and cos: 512 features,
computed in float32 and cast to bf16), then a GELU MLP 512 -> 1024 -> 1024 -> 1024 -> 1024 -> 3 (biases, 3.7 M
parameters, pure bf16), mean squared error against the pixel's RGB in [0, 1], fused AdamW; the host kept one step ahead
by an event sync on the previous step. Each step trains on 262144 random pixels, drawn as
idx = torch.randperm(H * W, device="cuda")[:batch]: a fresh permutation of every pixel index, of which the first
262144 are used.
NVTX: step_N > sample / forward / backward / optimizer.

--fixed: idx = torch.randint(H * W, (batch,), device="cuda") (uniform sampling with replacement; a permutation drawn
once per epoch and sliced per step would do as well).
"""
import math
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--width", type=int, default=4096)
p.add_argument("--height", type=int, default=2048)
p.add_argument("--batch", type=int, default=262144, help="pixels per step")
p.add_argument("--freqs", type=int, default=256, help="Fourier frequencies (features = 2 x freqs)")
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=4, help="hidden layers")
p.add_argument("--fixed", action="store_true", help="torch.randint instead of a full randperm per step")
a = parse(p)

KW = dict(device="cuda", dtype=torch.bfloat16)
W, H = a.width, a.height
N = W * H


class Field(nn.Module):
    def __init__(self):
        super().__init__()
        dims = [2 * a.freqs] + [a.hidden] * a.layers + [3]
        self.layers = nn.ModuleList(nn.Linear(i, o, **KW) for i, o in zip(dims, dims[1:]))

    def forward(self, feats):
        x = feats
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.gelu(x)
        return x


torch.manual_seed(a.seed)
model = Field()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
bmat = torch.randn(2, a.freqs, device="cuda", generator=g) * 10.0  # Fourier frequencies (fixed)
image = torch.randint(0, 256, (N, 3), dtype=torch.uint8, device="cuda", generator=g)  # the panorama, row-major
torch.cuda.synchronize()


def features(idx):
    y = torch.div(idx, W, rounding_mode="floor")
    x = idx - y * W
    coords = torch.stack([x.float() * (2.0 / (W - 1)) - 1.0, y.float() * (2.0 / (H - 1)) - 1.0], dim=-1)
    proj = (coords @ bmat) * (2.0 * math.pi)
    return torch.cat([torch.sin(proj), torch.cos(proj)], dim=-1).to(torch.bfloat16)


losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with nvtx("sample"):
            if a.fixed:
                idx = torch.randint(N, (a.batch,), device="cuda")
            else:
                idx = torch.randperm(N, device="cuda")[:a.batch]
            feats = features(idx)
            target = image[idx].float() / 255.0
        with nvtx("forward"):
            loss = F.mse_loss(model(feats).float(), target)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.2f} M")
