"""Class-conditional image generation with a latent diffusion transformer (DiT-XL/2-style), bf16 inference: 512 x 512
images as 4 x 64 x 64 latents, patches of 2 x 2 (1024 tokens per image), a 2 x 2 stride-2 convolution into width 1152
plus fixed 2-D sine-cosine positions, 28 blocks with adaLN-Zero conditioning (per block a Linear 1152 -> 6 x 1152 on
SiLU(timestep embedding + class embedding) gives the shift / scale / gate of both halves; LayerNorm without affine,
modulate, fused QKV projection, 18 heads of 64 through F.scaled_dot_product_attention (non-causal), output projection,
gated residual; LayerNorm, modulate, GELU(tanh) MLP 1152 -> 4608 -> 1152, gated residual), a final adaLN layer and a
linear head to 2 x 2 x 8 values per token (noise and variance, unpatchified to 8 x 64 x 64); 675 M parameters, all
bf16, torch.inference_mode(). 16 images per batch with classifier-free guidance (32 rows: the 16 class labels and 16
null labels), a deterministic DDIM sampler over a 1000-step linear schedule, one denoising step per loop iteration
(latents and the sampler's arithmetic in float32); the host kept one step ahead by an event sync on the previous step.
The attention module came from a Stable-Diffusion-2.x code base with its `upcast_attention` option on "for numerical
stability": q, k and v are cast to float32 before F.scaled_dot_product_attention and the output cast back to bf16. With
float32 inputs neither the flash nor the cuDNN attention kernels apply, so SDPA runs the memory-efficient (CUTLASS)
kernel in float32, on the SIMT units instead of the tensor cores, in every block of every step.
NVTX: step_N > forward / sampler.

--fixed: the attention in the model's dtype (bf16, no upcast): SDPA takes its flash / cuDNN tensor-core kernels.
"""
import math
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--images", type=int, default=16, help="images per batch (twice the rows with classifier-free guidance)")
p.add_argument("--latent", type=int, default=64, help="latent side (image side / 8)")
p.add_argument("--channels", type=int, default=4, help="latent channels")
p.add_argument("--patch", type=int, default=2)
p.add_argument("--d-model", type=int, default=1152)
p.add_argument("--heads", type=int, default=18)
p.add_argument("--blocks", type=int, default=28)
p.add_argument("--classes", type=int, default=1000)
p.add_argument("--cfg-scale", type=float, default=4.0)
p.add_argument("--fixed", action="store_true", help="attention in bf16 (no float32 upcast)")
a = parse(p)

UPCAST_ATTENTION = not a.fixed  # the inherited config flag
KW = dict(device="cuda", dtype=torch.bfloat16)
G = a.latent // a.patch  # tokens per side
C = a.channels


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def timestep_embedding(t, dim=256):
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def pos_embed_2d(d, g):
    """Fixed 2-D sine-cosine positions [g*g, d]: a quarter of the channels each for sin / cos of the row and column."""
    q = d // 4
    omega = 1.0 / 10000.0 ** (torch.arange(q, dtype=torch.float64) / q)
    ys, xs = torch.meshgrid(torch.arange(g, dtype=torch.float64), torch.arange(g, dtype=torch.float64), indexing="ij")
    parts = []
    for pos in (ys.reshape(-1), xs.reshape(-1)):
        arg = pos[:, None] * omega[None]
        parts += [torch.sin(arg), torch.cos(arg)]
    return torch.cat(parts, dim=1).float()


class Attention(nn.Module):
    def __init__(self, d, nh, upcast):
        super().__init__()
        self.nh, self.upcast = nh, upcast
        self.qkv = nn.Linear(d, 3 * d, **KW)
        self.proj = nn.Linear(d, d, **KW)

    def forward(self, x):
        B, S, d = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, self.nh, d // self.nh).permute(2, 0, 3, 1, 4).unbind(0)
        if self.upcast:  # "numerical stability", from the SD-2.x config
            q, k, v = q.float(), k.float(), v.float()
        o = F.scaled_dot_product_attention(q, k, v)
        o = o.to(x.dtype)
        return self.proj(o.transpose(1, 2).reshape(B, S, d))


class DiTBlock(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6, **KW)
        self.attn = Attention(d, nh, UPCAST_ATTENTION)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6, **KW)
        self.fc1 = nn.Linear(d, 4 * d, **KW)
        self.fc2 = nn.Linear(4 * d, d, **KW)
        self.ada = nn.Linear(d, 6 * d, **KW)

    def forward(self, x, c):
        sh1, sc1, g1, sh2, sc2, g2 = self.ada(F.silu(c)).chunk(6, dim=1)
        x = x + g1.unsqueeze(1) * self.attn(modulate(self.norm1(x), sh1, sc1))
        h = self.fc2(F.gelu(self.fc1(modulate(self.norm2(x), sh2, sc2)), approximate="tanh"))
        return x + g2.unsqueeze(1) * h


class DiT(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        self.x_embed = nn.Conv2d(C, d, a.patch, stride=a.patch, **KW)
        self.t_fc1 = nn.Linear(256, d, **KW)
        self.t_fc2 = nn.Linear(d, d, **KW)
        self.y_embed = nn.Embedding(a.classes + 1, d, **KW)  # the last row is the null class of the guidance
        self.register_buffer("pos", pos_embed_2d(d, G).to(**KW).unsqueeze(0), persistent=False)
        self.blocks = nn.ModuleList(DiTBlock(d, a.heads) for _ in range(a.blocks))
        self.norm_f = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6, **KW)
        self.ada_f = nn.Linear(d, 2 * d, **KW)
        self.out = nn.Linear(d, a.patch * a.patch * 2 * C, **KW)

    def forward(self, x, t, y):
        B = x.shape[0]
        x = self.x_embed(x).flatten(2).transpose(1, 2) + self.pos  # [B, S, d]
        c = self.t_fc2(F.silu(self.t_fc1(timestep_embedding(t).to(torch.bfloat16)))) + self.y_embed(y)
        for blk in self.blocks:
            x = blk(x, c)
        shift, scale = self.ada_f(F.silu(c)).chunk(2, dim=1)
        x = self.out(modulate(self.norm_f(x), shift, scale))  # [B, S, p*p*2C]
        x = x.view(B, G, G, a.patch, a.patch, 2 * C).permute(0, 5, 1, 3, 2, 4)
        return x.reshape(B, 2 * C, G * a.patch, G * a.patch)


torch.manual_seed(a.seed)
model = DiT()
model.eval()
model.requires_grad_(False)

# DDIM over a 1000-step linear-beta schedule: the timesteps and their cumulative alphas are Python numbers
betas = torch.linspace(1e-4, 0.02, 1000, dtype=torch.float64)
alpha_bar = torch.cumprod(1.0 - betas, dim=0)
timesteps = [int(round(v)) for v in torch.linspace(999, 0, a.steps).tolist()]
abar = [float(alpha_bar[t]) for t in timesteps] + [1.0]

g = torch.Generator(device="cuda").manual_seed(a.seed)
x = torch.randn(a.images, C, a.latent, a.latent, device="cuda", generator=g)  # float32 latents
y = torch.randint(0, a.classes, (a.images,), device="cuda", generator=g)
y_in = torch.cat([y, torch.full_like(y, a.classes)])  # conditional rows, then the null class
torch.cuda.synchronize()
print(f"attention inputs {'float32 (upcast)' if UPCAST_ATTENTION else 'bf16'}, "
      f"{2 * a.images} rows x {G * G} tokens", flush=True)

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        a_t, a_prev = abar[step], abar[step + 1]
        with nvtx(f"step_{step}"):
            with nvtx("forward"):
                x_in = torch.cat([x, x]).to(torch.bfloat16)
                t_in = torch.full((2 * a.images,), float(timesteps[step]), device="cuda")
                out = model(x_in, t_in, y_in)
            with nvtx("sampler"):
                eps_c, eps_u = out[:, :C].float().chunk(2)
                eps = eps_u + a.cfg_scale * (eps_c - eps_u)
                x0 = (x - math.sqrt(1.0 - a_t) * eps) / math.sqrt(a_t)
                x = math.sqrt(a_prev) * x0 + math.sqrt(1.0 - a_prev) * eps
            throttle.step_done()
    clock.end()
print("latents mean/std", float(x.mean()), float(x.std()),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.0f} M")
