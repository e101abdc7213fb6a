"""bf16 pretraining step of a small GPT-style language model: token embedding (vocabulary 32000), 3 pre-LayerNorm
causal blocks (d_model 1024, 8 heads of 128, scaled_dot_product_attention with is_causal, GELU MLP of 4 x d_model),
a final LayerNorm and an untied LM head; 16 sequences of 2048 tokens per step (next-token targets). The loss is
written as in many reference implementations, "upcast the logits for a stable loss":
    logits = model(ids).float(); loss = F.cross_entropy(logits.view(-1, V), labels.view(-1))
so the 32768 x 32000 logits (1.05 G elements) are cast to fp32 and go through log_softmax, nll_loss and their
backward as separate memory-bound kernels over a 4.2 GB fp32 tensor. Pure bf16 parameters, fused AdamW, the
token batches resident on the GPU, the host kept one step ahead by an event sync on the previous step.
NVTX: step_N > forward / backward / optimizer.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--seq", type=int, default=2048)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--heads", type=int, default=8)
p.add_argument("--blocks", type=int, default=3)
p.add_argument("--vocab", type=int, default=32000)
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
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.d_model)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model)
        self.lm_head = nn.Linear(a.d_model, a.vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(self.norm(x))


torch.manual_seed(a.seed)
model = LM().cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)

# Two token batches resident on the GPU (inputs and next-token labels, contiguous), used alternately.
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = []
for _ in range(2):
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda", generator=g)
    batches.append((tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()))
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    ids, labels = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            logits = model(ids).float()
            loss = F.cross_entropy(logits.view(-1, a.vocab), labels.view(-1))
            del logits
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]))
