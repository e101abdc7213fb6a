"""Healthy batched inference (scoring) with a bf16 transformer encoder: token embedding, 3 pre-LayerNorm
blocks of d_model 5120 (40 heads of 128, bidirectional scaled_dot_product_attention, GELU MLP of
4 x d_model), mean pooling and a classifier, under torch.inference_mode, 8 sequences of 512 tokens per
step. Token ids come from pinned host batches copied with non_blocking=True; the predictions stay on the
GPU until the end; the host is kept one step ahead by an event sync on the previous step. No CUDA graphs
(each step is ~12 ms of large GEMMs for ~50 launches). Nothing planted: the truth is "nothing above low".
NVTX: step_N.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--seq", type=int, default=512)
p.add_argument("--d-model", type=int, default=5120)
p.add_argument("--heads", type=int, default=40)
p.add_argument("--blocks", type=int, default=3)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--classes", type=int, default=16)
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
        self.cls = nn.Linear(a.d_model, a.classes, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.cls(self.norm(x).mean(dim=1))


torch.manual_seed(a.seed)
model = Encoder().cuda().to(torch.bfloat16).eval()
host = [torch.randint(0, a.vocab, (a.batch, a.seq)).pin_memory() for _ in range(4)]
preds = torch.zeros(a.steps, a.batch, dtype=torch.int64, device="cuda")
torch.cuda.synchronize()

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        with nvtx(f"step_{step}"):
            ids = host[step % len(host)].to("cuda", non_blocking=True)
            preds[step] = model(ids).argmax(dim=-1)
            throttle.step_done()
    clock.end(", bf16 encoder inference")
print("prediction histogram", torch.bincount(preds.flatten(), minlength=a.classes).tolist())
