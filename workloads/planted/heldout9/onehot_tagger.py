"""bf16 training of a token-tagging encoder (named-entity style): a 32000-token vocabulary embedded to d 1024, 4 pre-LN
bidirectional transformer blocks (LayerNorm, fused QKV projection, 16 heads of 64 through
F.scaled_dot_product_attention, output projection, residual; LayerNorm, GELU MLP 1024 -> 4096 -> 1024, residual;
biases everywhere), a final LayerNorm and a 17-tag classifier trained with cross-entropy (83 M parameters); 16
sequences of 512 tokens per step (ids and tags resident on the GPU, two batches used alternately), pure bf16
parameters, fused AdamW, the host kept one step ahead by an event sync on the previous step. The token embedding is
written as in the TPU code the model was ported from: the table is a plain parameter and the lookup multiplies one-hot
rows with it, `F.one_hot(ids, V).to(E.dtype) @ E`, i.e. an 8192 x 32000 one-hot matrix built each step (as int64, then
cast to bf16) and an 8192 x 32000 x 1024 matrix product in the forward, with a second one of the same size for the
table's gradient in the backward.
NVTX: step_N > forward / backward / optimizer.

--fixed: the lookup is F.embedding(ids, E) (a gather; its backward a sort and a scatter-add into the table's
gradient), on the same parameter with the same initial values.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=16, help="sequences per step")
p.add_argument("--seq", type=int, default=512)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=4)
p.add_argument("--tags", type=int, default=17)
p.add_argument("--fixed", action="store_true", help="F.embedding lookup instead of the one-hot product")
a = parse(p)

KW = dict(device="cuda", dtype=torch.bfloat16)


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(d, **KW)
        self.qkv = nn.Linear(d, 3 * d, **KW)
        self.proj = nn.Linear(d, d, **KW)
        self.ln2 = nn.LayerNorm(d, **KW)
        self.fc1 = nn.Linear(d, 4 * d, **KW)
        self.fc2 = nn.Linear(4 * d, d, **KW)

    def forward(self, x):
        B, S, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(B, S, self.nh, d // self.nh).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(B, S, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Parameter(torch.randn(a.vocab, a.d_model, **KW) * 0.02)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model, **KW)
        self.head = nn.Linear(a.d_model, a.tags, **KW)

    def embed(self, ids):
        if a.fixed:
            return F.embedding(ids, self.emb)
        return F.one_hot(ids, a.vocab).to(self.emb.dtype) @ self.emb

    def forward(self, ids):
        h = self.embed(ids)
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.norm(h))


torch.manual_seed(a.seed)
model = Tagger()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g),
            torch.randint(0, a.tags, (a.batch, a.seq), device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    ids, tags = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            logits = model(ids)
            loss = F.cross_entropy(logits.float().view(-1, a.tags), tags.view(-1))
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M")
