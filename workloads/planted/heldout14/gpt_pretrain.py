"""Pre-training of a GPT-2-style language model on the GPT-2 byte-pair vocabulary (50257 tokens): token embeddings of
width 1024 plus learned positions (1024), 12 pre-LN causal blocks (LayerNorm, fused QKV projection, 16 heads of 64
through F.scaled_dot_product_attention with is_causal=True, output projection, residual; LayerNorm, GELU MLP 1024 -> 4096
-> 1024, residual; biases everywhere), a final LayerNorm and an LM head tied to the token embedding (204 M parameters);
bf16 autocast over fp32 weights, fused AdamW with weight decay. 16 sequences of 1024 tokens per step (synthetic ids below
50257, resident on the GPU, two batches used alternately), the host kept one step ahead by an event sync on the
previous step.
The embedding (and so the tied head) has exactly as many rows as the tokenizer has tokens: 50257, an odd number, so the
logits [16384, 50257] have rows of 100 514 bytes, not a multiple of 16, and every GEMM of the head reads or writes a
matrix whose leading dimension breaks the 16-byte alignment cuBLAS's fast (TMA) kernels need: the head's forward GEMM
(logits written with ld 50257), and its two backward GEMMs (the logits' gradient read with ld 50257).
NVTX: step_N > forward / backward / optimizer.

--fixed: the vocabulary padded to 50304 (a multiple of 64): 47 embedding rows no token id uses (their logits only take
part in the softmax), every leading dimension aligned.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=16)
p.add_argument("--batch", type=int, default=16, help="sequences per step")
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--vocab", type=int, default=50257, help="tokenizer vocabulary (token ids are below it)")
p.add_argument("--pad-vocab-to", type=int, default=64, help="with --fixed: embedding rows rounded up to a multiple of it")
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=12)
p.add_argument("--fixed", action="store_true", help="pad the embedding / head rows to a multiple of --pad-vocab-to")
a = parse(p)

# rows of the embedding and of the tied head: the tokenizer's size, or (fixed) rounded up to a multiple of 64
ROWS = a.vocab if not a.fixed else (a.vocab + a.pad_vocab_to - 1) // a.pad_vocab_to * a.pad_vocab_to


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


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        self.tok = nn.Embedding(ROWS, d)
        self.pos = nn.Parameter(torch.zeros(a.seq, d))
        self.blocks = nn.ModuleList(Block(d, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(d)

    def forward(self, ids):
        h = self.tok(ids) + self.pos[:ids.shape[1]]
        for blk in self.blocks:
            h = blk(h)
        return F.linear(self.norm(h), self.tok.weight)  # LM head tied to the token embedding: [B, S, ROWS]


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = GPT()
for name, q in model.named_parameters():
    if name.endswith("bias"):
        nn.init.zeros_(q)
    elif q.dim() >= 2:
        nn.init.normal_(q, std=0.02)
decay = [q for n, q in model.named_parameters() if q.dim() >= 2]
no_decay = [q for n, q in model.named_parameters() if q.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=3e-4, betas=(0.9, 0.95), fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
data = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda", generator=g) for _ in range(2)]
torch.cuda.synchronize()
print(f"embedding / head rows {ROWS} (tokenizer vocabulary {a.vocab}), logits row {ROWS * 2} bytes in bf16", flush=True)

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    seq = data[step % len(data)]
    ids, targets = seq[:, :-1], seq[:, 1:]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(ids)
                loss = F.cross_entropy(logits.view(-1, ROWS), targets.reshape(-1))
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
