"""Fine-tuning a BERT-base-style text encoder for intent classification (150 intents): token embeddings (30522 x 768) plus
learned positions and an embedding LayerNorm, 12 post-LN encoder blocks of width 768 (fused QKV projection, 12 heads of
64 through F.scaled_dot_product_attention, output projection, residual and LayerNorm; GELU MLP 768 -> 3072 -> 768,
residual and LayerNorm), a tanh pooler on the first token and a linear classifier; 109 M parameters, bf16 autocast over
fp32 weights, cross-entropy, fused AdamW. An update is 64 sequences of 256 tokens (synthetic ids, resident on the GPU).
The training config came from a 16 GB card: per_device_batch_size 4 with gradient_accumulation_steps 16, so every
update runs 16 forward / backward passes of 4 x 256 tokens (the loss divided by 16, the gradients accumulated in .grad)
and then one optimizer step; the host kept one update ahead by an event sync on the previous one.
NVTX: step_N > micro_K > forward / backward, step_N > optimizer.

--fixed: micro-batch 64, no accumulation (one forward / backward of 64 x 256 tokens per update).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=64, help="sequences per update")
p.add_argument("--micro", type=int, default=4, help="sequences per forward / backward pass")
p.add_argument("--seq", type=int, default=256)
p.add_argument("--vocab", type=int, default=30522)
p.add_argument("--d-model", type=int, default=768)
p.add_argument("--heads", type=int, default=12)
p.add_argument("--blocks", type=int, default=12)
p.add_argument("--classes", type=int, default=150)
p.add_argument("--fixed", action="store_true", help="micro-batch = batch (no accumulation)")
a = parse(p)
MICRO = a.batch if a.fixed else a.micro
ACCUM = a.batch // MICRO
assert MICRO * ACCUM == a.batch


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh = nh
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d, eps=1e-12)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-12)

    def forward(self, x):
        B, S, d = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, self.nh, d // self.nh).permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v)
        x = self.ln1(x + self.proj(att.transpose(1, 2).reshape(B, S, d)))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        self.tok = nn.Embedding(a.vocab, d)
        self.pos = nn.Embedding(a.seq, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.blocks = nn.ModuleList(Block(d, a.heads) for _ in range(a.blocks))
        self.pool = nn.Linear(d, d)
        self.cls = nn.Linear(d, a.classes)

    def forward(self, ids):
        x = self.ln(self.tok(ids) + self.pos.weight[: ids.shape[1]])
        for blk in self.blocks:
            x = blk(x)
        return self.cls(torch.tanh(self.pool(x[:, 0])))


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = Encoder()
opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
ids_all = [torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g) for _ in range(2)]
labels_all = [torch.randint(0, a.classes, (a.batch,), device="cuda", generator=g) for _ in range(2)]
losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
print(f"micro-batch {MICRO} x {ACCUM} accumulation steps per update of {a.batch} sequences, "
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.0f} M", flush=True)

throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    ids_b, lab_b = ids_all[step % 2], labels_all[step % 2]
    with nvtx(f"step_{step}"):
        total = torch.zeros((), device="cuda")
        for k in range(ACCUM):
            with nvtx(f"micro_{k}"):
                ids, lab = ids_b[k * MICRO:(k + 1) * MICRO], lab_b[k * MICRO:(k + 1) * MICRO]
                with nvtx("forward"):
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        loss = F.cross_entropy(model(ids), lab) / ACCUM
                with nvtx("backward"):
                    loss.backward()
                total += loss.detach()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = total
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]))
