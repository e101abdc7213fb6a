"""Pre-training of a multilingual decoder-only language model: a 64000-token shared vocabulary embedded to d 2048, plus
learned positions (1024) and a learned language embedding (8 languages, one row each, added to every token), 12 pre-LN
causal blocks (LayerNorm, fused QKV projection, 16 heads of 128 through F.scaled_dot_product_attention with
is_causal=True, output projection, residual; LayerNorm, GELU MLP 2048 -> 8192 -> 2048, residual; biases everywhere), a
final LayerNorm and an LM head tied to the token embedding (737 M parameters); bf16 autocast over fp32 weights, fused
AdamW. 16 sequences of 1024 tokens per step (synthetic ids resident on the GPU, two batches used alternately); the data
pipeline samples a language per batch, as in XLM-style training, so every batch is in one language (it cycles through
the 8 from step to step) and each token carries its sequence's language id; the host kept one step ahead by an event
sync on the previous step.
The language table is an nn.Parameter of shape [8, 2048] read by advanced indexing, lang_table[lang_ids], with lang_ids
of shape [16, 1024]. Its backward is index_put_ with accumulate=True, which sorts the 16384 indices and then walks each
run of equal indices serially (one warp per 128 features, reading and rewriting the accumulated row for every
duplicate); in a one-language batch the run is all 16384 tokens long.
NVTX: step_N > forward / backward / optimizer.

--fixed: F.embedding(lang_ids, lang_table) (the same lookup; its backward sums runs of equal indices in short segments,
in parallel).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=20)
p.add_argument("--batch", type=int, default=16, help="sequences per step")
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--vocab", type=int, default=64000)
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=12)
p.add_argument("--langs", type=int, default=8)
p.add_argument("--fixed", action="store_true", help="F.embedding for the language table")
a = parse(p)


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        B, S, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(B, S, self.nh, d // self.nh).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(B, S, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class MultilingualLM(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        self.tok = nn.Embedding(a.vocab, d)
        self.pos = nn.Parameter(torch.zeros(a.seq, d))
        self.lang_table = nn.Parameter(torch.zeros(a.langs, d))
        self.blocks = nn.ModuleList(Block(d, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(d)

    def forward(self, ids, lang_ids):
        if a.fixed:
            lang = F.embedding(lang_ids, self.lang_table)
        else:
            lang = self.lang_table[lang_ids]  # [B, S, d]
        h = self.tok(ids) + self.pos[:ids.shape[1]] + lang
        for blk in self.blocks:
            h = blk(h)
        return F.linear(self.norm(h), self.tok.weight)  # LM head tied to the token embedding


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = MultilingualLM()
for name, q in model.named_parameters():
    if name.endswith("bias"):
        nn.init.zeros_(q)
    elif q.dim() >= 2:
        nn.init.normal_(q, std=0.02)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
data = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda", generator=g) for _ in range(2)]
# the pipeline's language ids, one per token: a batch of language `lang` is all `lang`
lang_batches = [torch.full((a.batch, a.seq), lang, dtype=torch.long, device="cuda") for lang in range(a.langs)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    seq = data[step % len(data)]
    ids, targets = seq[:, :-1], seq[:, 1:]
    lang_ids = lang_batches[step % a.langs]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(ids, lang_ids)
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
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.0f} M")
