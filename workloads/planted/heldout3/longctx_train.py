"""Healthy bf16 training of a long-context bidirectional encoder (e.g. for genomic or audio token streams): one
sequence of 8192 tokens per step (vocabulary 4096), token embedding, 3 pre-LayerNorm blocks of d_model 2048 (16
heads of 128, scaled_dot_product_attention: the flash kernel, GELU MLP of 8192), a final LayerNorm, a 256-wide
output head and a regression loss against per-token targets. Pure bf16 parameters, fused AdamW, the batch
resident on the GPU, the host kept one step ahead by an event sync on the previous step. At this length attention
is about half of every step: the cost of the sequence length with a flash kernel, not a problem. Nothing planted:
the truth is "nothing above low". NVTX: step_N > forward / backward / optimizer.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=1)
p.add_argument("--seq", type=int, default=8192)
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=3)
p.add_argument("--vocab", type=int, default=4096)
p.add_argument("--out", type=int, default=256)
a = parse(p)


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
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.d_model)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model)
        self.out = nn.Linear(a.d_model, a.out, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.out(self.norm(x))


torch.manual_seed(a.seed)
model = Encoder().cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g),
            torch.randn(a.batch, a.seq, a.out, device="cuda", generator=g).to(torch.bfloat16)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    ids, target = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            loss = (model(ids) - target).float().pow(2).mean()
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]))
