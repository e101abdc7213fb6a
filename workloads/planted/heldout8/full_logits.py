"""Batched prefill of a small decoder-only language model (bf16, torch.inference_mode): token embedding, 4 pre-LN
blocks (LayerNorm, fused QKV projection, 16-head causal attention through F.scaled_dot_product_attention, output
projection, residual; LayerNorm, MLP 2048 -> 8192 -> 2048 with GELU, residual; biases everywhere), a final LayerNorm
and an untied LM head 2048 -> 128256 (727 M parameters). Each step takes a batch of 8 prompts of 1024 tokens (token ids
resident on the GPU, cycled from a pool of 4 batches) and picks the next token of each prompt greedily. The head is
applied to the hidden states of every position and the logits are upcast, `lm_head(norm(h)).float()` (8192 x 128256:
2.1 GB of bf16 logits and 4.2 GB in fp32), and then only `logits[:, -1]` is used for the argmax; the next tokens are
written into a buffer on the GPU (read back once at the end).
NVTX: step_N per batch.

--fixed: the head is applied to the last position only, `lm_head(norm(h[:, -1]))`.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=20)
p.add_argument("--batch", type=int, default=8, help="prompts per step")
p.add_argument("--seq", type=int, default=1024, help="tokens per prompt")
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=4)
p.add_argument("--vocab", type=int, default=128256)
p.add_argument("--fixed", action="store_true", help="apply the LM head to the last position only")
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
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(B, S, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.d_model, **KW)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model, **KW)
        self.lm_head = nn.Linear(a.d_model, a.vocab, bias=False, **KW)

    def forward(self, ids):
        h = self.embed(ids)
        for blk in self.blocks:
            h = blk(h)
        if a.fixed:
            return self.lm_head(self.norm(h[:, -1])).float()          # [B, V]
        logits = self.lm_head(self.norm(h)).float()                    # [B, S, V]
        return logits[:, -1]


torch.manual_seed(a.seed)
model = Decoder().eval()
g = torch.Generator(device="cuda").manual_seed(a.seed)
pool = torch.randint(0, a.vocab, (4, a.batch, a.seq), device="cuda", generator=g)
next_tokens = torch.zeros(a.steps, a.batch, dtype=torch.long, device="cuda")
torch.cuda.synchronize()

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        with nvtx(f"step_{step}"):
            last = model(pool[step % 4])
            next_tokens[step] = last.argmax(dim=-1)
        throttle.step_done()
clock.end()
print("params M", round(sum(q.numel() for q in model.parameters()) / 1e6, 1),
      "first next tokens", next_tokens[a.warmup, :4].tolist(), "distinct", int(next_tokens.unique().numel()))
