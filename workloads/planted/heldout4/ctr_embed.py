"""bf16-autocast training of a click-through-rate model: 16 categorical fields hashed into one shared embedding
table of 8,000,000 rows x 128 (fp32, 4.1 GB; field f owns rows [f * 500000, (f + 1) * 500000)), their 16 x 128
embeddings concatenated with 64 dense features and fed to a bias-free GELU MLP 2112 -> 4096 -> 4096 -> 1024 -> 1,
a binary cross-entropy on the logit. 8192 impressions per step (ids, dense features and clicks resident on the
GPU, two batches used alternately); one AdamW (fused) over every parameter, table included; the host kept one
step ahead by an event sync on the previous step. The table is a plain nn.Embedding (dense gradients).
NVTX: step_N > forward / backward / optimizer.

--fixed: the table gives sparse gradients (nn.Embedding(sparse=True)) and is updated by SparseAdam (only the rows
looked up in the step); the MLP keeps its fused AdamW.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=8192, help="impressions per step")
p.add_argument("--fields", type=int, default=16, help="categorical fields (one id each)")
p.add_argument("--rows", type=int, default=8_000_000, help="rows of the shared hashed table")
p.add_argument("--emb-dim", type=int, default=128)
p.add_argument("--dense", type=int, default=64, help="dense features per impression")
p.add_argument("--hidden", default="4096,4096,1024", help="MLP widths between the input and the logit")
p.add_argument("--fixed", action="store_true", help="sparse table gradients + SparseAdam for the table")
a = parse(p)


class CTR(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(a.rows, a.emb_dim, sparse=a.fixed, device="cuda")
        self.mlp = MLP([a.fields * a.emb_dim + a.dense] + [int(v) for v in a.hidden.split(",")] + [1]).cuda()

    def forward(self, ids, dense):
        e = self.table(ids)                                   # [batch, fields, emb_dim]
        return self.mlp(torch.cat([e.flatten(1), dense], dim=1)).squeeze(-1)


torch.manual_seed(a.seed)
model = CTR()
if a.fixed:
    opts = [torch.optim.SparseAdam(list(model.table.parameters()), lr=1e-3),
            torch.optim.AdamW(model.mlp.parameters(), lr=1e-3, weight_decay=1e-5, fused=True)]
else:
    opts = [torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-5, fused=True)]

g = torch.Generator(device="cuda").manual_seed(a.seed)
per_field = a.rows // a.fields
offsets = torch.arange(a.fields, device="cuda") * per_field
batches = [(torch.randint(0, per_field, (a.batch, a.fields), device="cuda", generator=g) + offsets,
            torch.randn(a.batch, a.dense, device="cuda", generator=g),
            torch.randint(0, 2, (a.batch,), device="cuda", generator=g).float()) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    ids, dense, click = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logit = model(ids, dense)
            loss = F.binary_cross_entropy_with_logits(logit.float(), click)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            for opt in opts:
                opt.step()
                opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end(f", peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
print("loss first/last", float(losses[0]), float(losses[-1]))
