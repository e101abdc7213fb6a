"""bf16 pre-training of a long-context decoder-only language model: a 32768-token vocabulary embedded to d 1024, 8
pre-LN causal blocks (LayerNorm, fused QKV projection, 8 heads of 128 through F.scaled_dot_product_attention, output
projection, residual; LayerNorm, GELU MLP 1024 -> 4096 -> 1024, residual; biases everywhere), a final LayerNorm and an
untied LM head (168 M parameters); one sequence of 8192 tokens per step (ids resident on the GPU, two batches used
alternately), pure bf16 parameters, fused AdamW, the host kept one step ahead by an event sync on the previous step.
The attention code was ported from a hand-written attention: causality comes from an explicit boolean mask, a
lower-triangular [8192, 8192] buffer built once (torch.ones(S, S, dtype=torch.bool).tril()) and passed to
F.scaled_dot_product_attention as attn_mask= in every block.
NVTX: step_N > forward / backward / optimizer.

--fixed: is_causal=True and no mask.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=1, help="sequences per step")
p.add_argument("--seq", type=int, default=8192)
p.add_argument("--vocab", type=int, default=32768)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--heads", type=int, default=8)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--fixed", action="store_true", help="is_causal=True instead of the boolean mask")
a = parse(p)

KW = dict(device="cuda", dtype=torch.bfloat16)


class Block(nn.Module):
    def __init__(self, d, nh, mask):
        super().__init__()
        self.nh, self.mask = nh, mask
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
        if self.mask is None:
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask[:S, :S])
        x = x + self.proj(att.transpose(1, 2).reshape(B, S, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class LM(nn.Module):
    def __init__(self, mask):
        super().__init__()
        self.tok = nn.Embedding(a.vocab, a.d_model, **KW)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads, mask) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model, **KW)
        self.head = nn.Linear(a.d_model, a.vocab, **KW)

    def forward(self, ids):
        h = self.tok(ids)
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.norm(h))


torch.manual_seed(a.seed)
causal = None if a.fixed else torch.ones(a.seq, a.seq, dtype=torch.bool, device="cuda").tril()
model = LM(causal)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
data = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda", generator=g) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    seq = data[step % len(data)]
    ids, targets = seq[:, :-1], seq[:, 1:]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            logits = model(ids)
            loss = F.cross_entropy(logits.view(-1, a.vocab), targets.reshape(-1))
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
