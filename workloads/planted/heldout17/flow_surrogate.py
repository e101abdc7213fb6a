"""Batch inference of a Fourier neural operator (FNO-2D) surrogate for steady Darcy flow, float32 with TF32 matmuls,
torch.inference_mode(): per query a permeability field a(x) on the full 421 x 421 grid of the training data plus the two
grid coordinates -> a lifting Linear 3 -> 32, 4 Fourier layers (rfft2 over the grid, the 12 x 12 lowest modes of two
corners multiplied by complex weights, irfft2, plus a pointwise 1x1 convolution; GELU between layers), a projection
32 -> 128 -> 1 (GELU). 20 fields per batch (synthetic, resident on the GPU, two batches used in turn); the host kept one
batch ahead by an event sync on the previous one.
The serving copy of the model dropped the domain padding of the training code ("our fields are treated as periodic"),
so every 2-D FFT runs on 421 points per side: 421 is prime, and cuFFT computes prime lengths with Bluestein's algorithm
(each transform re-expressed as convolutions of a zero-padded length >= 2 x 421 - 1), several times the memory traffic
of a transform whose length factors into 2, 3, 5 and 7.
NVTX: step_N > forward.

--fixed: the one-line change: the lifted fields are zero-padded to 432 = 2^4 x 3^3 points per side (F.pad) before the
Fourier layers and cropped back to 421 after them, so cuFFT runs its mixed-radix kernels.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=20, help="fields per batch")
p.add_argument("--grid", type=int, default=421, help="points per side")
p.add_argument("--width", type=int, default=32, help="channels of the Fourier layers")
p.add_argument("--modes", type=int, default=12, help="retained modes per dimension and corner")
p.add_argument("--layers", type=int, default=4)
p.add_argument("--hidden", type=int, default=128, help="width of the projection")
p.add_argument("--fixed", action="store_true", help="pad the grid to a 2,3,5,7-smooth size for the FFTs")
a = parse(p)
torch.set_float32_matmul_precision("high")  # TF32 for the float32 matmuls (lifting, projection, 1x1 convolutions)


def smooth_size(n):
    """The smallest m >= n whose prime factors are all 2, 3, 5 or 7 (cuFFT's fast radices): 421 -> 432."""
    m = n
    while True:
        k = m
        for q in (2, 3, 5, 7):
            while k % q == 0:
                k //= q
        if k == 1:
            return m
        m += 1


S = a.grid
PAD = smooth_size(S) - S if a.fixed else 0


class SpectralConv2d(nn.Module):
    def __init__(self, c, m):
        super().__init__()
        self.m = m
        scale = 1.0 / (c * c)
        # complex weights stored as (real, imag) pairs, viewed as complex in the forward
        self.w1 = nn.Parameter(scale * torch.rand(c, c, m, m, 2))
        self.w2 = nn.Parameter(scale * torch.rand(c, c, m, m, 2))

    def forward(self, x):
        b, c, h, w = x.shape
        m = self.m
        x_ft = torch.fft.rfft2(x)
        out_ft = torch.zeros(b, c, h, w // 2 + 1, dtype=torch.cfloat, device=x.device)
        out_ft[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :m, :m], torch.view_as_complex(self.w1))
        out_ft[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -m:, :m], torch.view_as_complex(self.w2))
        return torch.fft.irfft2(out_ft, s=(h, w))


class FNO2d(nn.Module):
    def __init__(self):
        super().__init__()
        c = a.width
        self.fc0 = nn.Linear(3, c)
        self.spec = nn.ModuleList(SpectralConv2d(c, a.modes) for _ in range(a.layers))
        self.pw = nn.ModuleList(nn.Conv2d(c, c, 1) for _ in range(a.layers))
        self.fc1 = nn.Linear(c, a.hidden)
        self.fc2 = nn.Linear(a.hidden, 1)

    def forward(self, field, grid):  # field [B, S, S, 1], grid [B, S, S, 2]
        x = self.fc0(torch.cat([field, grid], dim=-1))
        x = x.permute(0, 3, 1, 2).contiguous()  # [B, C, S, S]
        if PAD:
            x = F.pad(x, [0, PAD, 0, PAD])
        last = len(self.spec) - 1
        for i, (spec, pw) in enumerate(zip(self.spec, self.pw)):
            x = spec(x) + pw(x)
            if i < last:
                x = F.gelu(x)
        if PAD:
            x = x[..., :S, :S]
        x = x.permute(0, 2, 3, 1)
        return self.fc2(F.gelu(self.fc1(x))).squeeze(-1)  # [B, S, S]


torch.manual_seed(a.seed)
model = FNO2d().cuda().eval()
model.requires_grad_(False)
g = torch.Generator(device="cuda").manual_seed(a.seed)
fields = [torch.rand(a.batch, S, S, 1, device="cuda", generator=g) * 11.0 + 1.0 for _ in range(2)]  # permeability 1..12
xs = torch.linspace(0.0, 1.0, S, device="cuda")
grid = torch.stack(torch.meshgrid(xs, xs, indexing="ij"), dim=-1).unsqueeze(0).expand(a.batch, S, S, 2)
means = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
print(f"FNO-2D, {a.batch} fields of {S} x {S}, FFTs on {S + PAD} x {S + PAD} points "
      f"({'padded' if PAD else 'unpadded'})", flush=True)

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        with nvtx(f"step_{step}"):
            with nvtx("forward"):
                u = model(fields[step % len(fields)], grid)
            means[step] = u.mean()
            throttle.step_done()
    clock.end()
print("mean pressure (last batch)", float(means[-1]))
