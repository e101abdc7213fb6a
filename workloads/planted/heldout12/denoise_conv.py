"""Training of a residual image denoiser (DnCNN-style) on 192 x 192 RGB crops: a 3 x 3 convolution 3 -> 64 and GELU,
8 body blocks (3 x 3 convolution 64 -> 64, LayerNorm, GELU), a 3 x 3 convolution 64 -> 3 that predicts the noise,
subtracted from the noisy input; MSE against the clean crop, fused AdamW, pure bf16 parameters, NCHW tensors,
cudnn.benchmark on. 16 crops per step (synthetic clean crops and Gaussian noise resident on the GPU, two batches used
alternately), the host kept one step ahead by an event sync on the previous step.
The body's normalization is nn.LayerNorm([64, 192, 192]): normalized_shape is the feature map's (C, H, W), as in
PyTorch's LayerNorm example for images (chosen over BatchNorm because the batch is small), so each crop's 2.36 M
activations form one row.
No NVTX ranges.

--fixed: the same normalization (mean and variance over C, H, W per crop, an elementwise affine of shape [C, H, W])
written as torch.var_mean over dims (1, 2, 3) and elementwise ops; checked against F.layer_norm before training.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=16, help="crops per step")
p.add_argument("--size", type=int, default=192, help="crop height and width")
p.add_argument("--channels", type=int, default=64)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--sigma", type=float, default=0.1, help="noise level")
p.add_argument("--fixed", action="store_true", help="statistics by torch.var_mean instead of F.layer_norm")
a = parse(p)
torch.backends.cudnn.benchmark = True

KW = dict(device="cuda", dtype=torch.bfloat16)


class SampleNorm(nn.Module):
    """LayerNorm over every dimension but the batch, as a reduction and elementwise ops."""

    def __init__(self, shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(shape, **KW))
        self.bias = nn.Parameter(torch.zeros(shape, **KW))

    def forward(self, x):
        var, mean = torch.var_mean(x, dim=tuple(range(1, x.dim())), keepdim=True, correction=0)
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias


class Body(nn.Module):
    def __init__(self, c, size):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, **KW)
        self.norm = SampleNorm([c, size, size]) if a.fixed else nn.LayerNorm([c, size, size], **KW)

    def forward(self, x):
        return F.gelu(self.norm(self.conv(x)))


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        c = a.channels
        self.head = nn.Conv2d(3, c, 3, padding=1, **KW)
        self.body = nn.Sequential(*(Body(c, a.size) for _ in range(a.blocks)))
        self.tail = nn.Conv2d(c, 3, 3, padding=1, **KW)

    def forward(self, noisy):
        return noisy - self.tail(self.body(F.gelu(self.head(noisy))))  # the network predicts the noise


torch.manual_seed(a.seed)
model = Denoiser()
opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.0, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = []
for _ in range(2):
    clean = torch.rand(a.batch, 3, a.size, a.size, generator=g, **KW)
    batches.append((clean + a.sigma * torch.randn(clean.shape, generator=g, **KW), clean))

if a.fixed:  # the rewritten normalization against F.layer_norm
    norm = model.body[0].norm
    xs = torch.randn(2, a.channels, a.size, a.size, generator=g, **KW) * 3 + 1
    with torch.no_grad():
        ref = F.layer_norm(xs, norm.weight.shape, norm.weight, norm.bias, norm.eps)
        torch.testing.assert_close(norm(xs).float(), ref.float(), rtol=2e-2, atol=2e-2)
    print("var_mean normalization matches F.layer_norm", flush=True)
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    noisy, clean = batches[step % len(batches)]
    loss = F.mse_loss(model(noisy).float(), clean.float())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses[step] = loss.detach()
    throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M")
