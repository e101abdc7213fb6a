"""bf16 training of a 4-block pre-LayerNorm transformer encoder (bidirectional, d_model 1024, 16 heads of
64, GELU MLP of 4 x d_model, a 256-wide output head) whose attention is written by hand in eager ops, as
in many reference implementations: scores = (q @ k^T) * scale, softmax taken in fp32 "for stability"
(scores.float().softmax(-1).type_as(q)), then p @ v. Every op materialises the B x H x S x S score
tensor (8 x 16 x 1024 x 1024) in HBM, forward and backward. Pure bf16 parameters, fused Adam, the batch
resident on the GPU, the host kept one step ahead by an event sync on the previous step.
NVTX: step_N > forward / backward / optimizer.

--fixed: F.scaled_dot_product_attention (a fused flash kernel) on the same q, k, v; checked against the
eager attention before the steps.
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
p.add_argument("--batch", type=int, default=8)
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=4)
p.add_argument("--head", type=int, default=256)
p.add_argument("--fixed", action="store_true", help="fused attention (scaled_dot_product_attention)")
a = parse(p)


def attention_eager(q, k, v):
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    probs = scores.float().softmax(dim=-1).type_as(q)
    return probs @ v


def attention_fused(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


attention = attention_fused if a.fixed else attention_eager


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.up = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        att = attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.out = nn.Linear(a.d_model, a.head, bias=False)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.out(x)


model = Model().cuda().to(torch.bfloat16)
opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
x = torch.randn(a.batch, a.seq, a.d_model, device="cuda", dtype=torch.bfloat16)

if a.fixed:  # the fused attention equals the eager one (bf16 rounding) on a small input
    g = torch.Generator(device="cuda").manual_seed(1)
    qs, ks, vs = (torch.randn(2, a.heads, 256, a.d_model // a.heads, device="cuda", generator=g).to(torch.bfloat16) for _ in range(3))
    ref, got = attention_eager(qs, ks, vs).float(), attention_fused(qs, ks, vs).float()
    rel = float((got - ref).norm() / ref.norm())
    assert rel < 2e-2, f"fused and eager attention differ: relative error {rel:.3g}"
    print(f"fused attention matches eager (relative error {rel:.2e})", flush=True)

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            loss = model(x).float().pow(2).mean()
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end(f", attention {'fused (SDPA)' if a.fixed else 'eager'}")
print("final loss", float(losses[-1]))
