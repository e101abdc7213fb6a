"""Training of a click-through-rate ranking model, DCN-v2 style, with gradient accumulation to reach the global batch of
the paper on one GPU: 26 categorical fields hashed into 2048 buckets each (one concatenated 53 248 x 128 embedding
table, per-field offsets), 13 dense features through Linear 13 -> 128 + ReLU, the 27 x 128 = 3456 features crossed by
2 cross layers (x_{l+1} = x0 * (W_l x_l + b_l) + x_l, W 3456 x 3456) and a deep tower 3456 -> 8192 -> 8192 -> 8192 ->
4096 -> 1 with ReLU (227 M parameters in all); bf16 autocast over fp32 weights, binary cross-entropy with logits,
gradient clipping at 1.0, fused AdamW. A step is one accumulation cycle: 8 micro-batches of 2048 rows (16 384 rows,
synthetic, resident on the GPU), each loss divided by 8 before its backward; the host kept one step ahead by an event
sync on the previous step.
The loop came from a trainer without accumulation: the clipping, optimizer.step() and zero_grad() stayed inside the
micro-batch loop, so they run after every micro-batch (8 clip + AdamW updates of all 227 M parameters per step, and the
gradients never accumulate: each micro-batch's backward starts from None).
NVTX: step_N > (forward / backward / optimizer) per micro-batch.

--fixed: clip, step and zero_grad once per cycle, after the 8th micro-batch's backward (micro-batches 2-8 accumulate
into .grad).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=12)
p.add_argument("--micro", type=int, default=2048, help="rows per micro-batch")
p.add_argument("--accum", type=int, default=8, help="micro-batches per optimizer step")
p.add_argument("--fields", type=int, default=26, help="categorical fields")
p.add_argument("--buckets", type=int, default=2048, help="hash buckets per field")
p.add_argument("--emb", type=int, default=128)
p.add_argument("--dense", type=int, default=13, help="dense features")
p.add_argument("--cross", type=int, default=2, help="cross layers")
p.add_argument("--deep", default="8192,8192,8192,4096", help="deep tower widths")
p.add_argument("--fixed", action="store_true", help="optimizer step once per accumulation cycle")
a = parse(p)
DEEP = [int(w) for w in a.deep.split(",")]


class DCN(nn.Module):
    def __init__(self):
        super().__init__()
        w = (a.fields + 1) * a.emb
        self.emb = nn.Embedding(a.fields * a.buckets, a.emb)
        self.register_buffer("offsets", torch.arange(a.fields) * a.buckets, persistent=False)
        self.bottom = nn.Linear(a.dense, a.emb)
        self.cross = nn.ModuleList(nn.Linear(w, w) for _ in range(a.cross))
        dims = [w] + DEEP
        self.deep = nn.ModuleList(nn.Linear(i, o) for i, o in zip(dims, dims[1:]))
        self.out = nn.Linear(dims[-1], 1)

    def forward(self, cat, dense):
        e = self.emb(cat + self.offsets).flatten(1)  # [B, fields * emb]
        x0 = torch.cat([F.relu(self.bottom(dense)), e], dim=1)  # [B, 3456]
        x = x0
        for layer in self.cross:
            x = x0 * layer(x) + x
        for layer in self.deep:
            x = F.relu(layer(x))
        return self.out(x).squeeze(1)


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = DCN()
nn.init.normal_(model.emb.weight, std=0.01)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-5, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
micro_batches = [(torch.randint(0, a.buckets, (a.micro, a.fields), device="cuda", generator=g),
                  torch.randn(a.micro, a.dense, device="cuda", generator=g),
                  (torch.rand(a.micro, device="cuda", generator=g) < 0.25).float()) for _ in range(2 * a.accum)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
norms = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        for k in range(a.accum):
            cat, dense, y = micro_batches[(step * a.accum + k) % len(micro_batches)]
            with nvtx("forward"):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = F.binary_cross_entropy_with_logits(model(cat, dense), y) / a.accum
            with nvtx("backward"):
                loss.backward()
            # the update: once per cycle when fixed; in the trainer as found, after every micro-batch
            if not a.fixed or k == a.accum - 1:
                with nvtx("optimizer"):
                    norms[step] = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            losses[step] += loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]), "grad norm last", float(norms[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.0f} M")
