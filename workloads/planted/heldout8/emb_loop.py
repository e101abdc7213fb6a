"""Click-through-rate model in the DLRM style (bf16 autocast for the MLPs, fp32 parameters): 26 categorical features,
each with its own nn.EmbeddingBag table (4096 rows x 64, mode "sum", 8 ids per bag), 256 dense features through a
Linear 256 -> 64, the 27 pooled vectors concatenated (1728) and a top MLP 1728 -> 4096 -> 4096 -> 1 (GELU) trained
with binary cross-entropy; 8192 samples per step (ids, dense features and labels resident on the GPU, two batches used
alternately), fused AdamW over every parameter, the host kept one step ahead by an event sync on the previous step.
The embedding lookups are written as a Python loop over the 26 tables: one EmbeddingBag call per table in the forward,
and so one embedding-bag backward per table (a sort and a segmented reduction, a dozen small kernels each) in the
backward.
NVTX: step_N > forward / backward / optimizer.

--fixed: the 26 tables stored as one 106496-row table (the same initial values), each feature's ids offset by its
table's first row, and a single EmbeddingBag call over all 26 x 8192 bags (one backward).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=8192, help="samples per step")
p.add_argument("--tables", type=int, default=26, help="categorical features (one table each)")
p.add_argument("--table-rows", type=int, default=4096)
p.add_argument("--dim", type=int, default=64)
p.add_argument("--bag", type=int, default=8, help="ids per bag")
p.add_argument("--dense", type=int, default=256, help="dense features")
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--fixed", action="store_true", help="one concatenated table and one EmbeddingBag call")
a = parse(p)
T, V, D = a.tables, a.table_rows, a.dim


class PerTable(nn.Module):
    def __init__(self):
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(V, D, mode="sum") for _ in range(T))

    def forward(self, ids):  # ids [B, T, bag]
        return torch.cat([emb(ids[:, t]) for t, emb in enumerate(self.tables)], dim=1)


class Concatenated(nn.Module):
    def __init__(self, per_table):
        super().__init__()
        w = torch.cat([e.weight.detach() for e in per_table.tables])  # the same initial values, no extra RNG draws
        self.table = nn.EmbeddingBag.from_pretrained(w, freeze=False, mode="sum")
        self.register_buffer("first_row", (torch.arange(T) * V).view(1, T, 1))

    def forward(self, ids):
        B = ids.shape[0]
        return self.table((ids + self.first_row).view(B * T, -1)).view(B, T * D)


class CTR(nn.Module):
    def __init__(self):
        super().__init__()
        per_table = PerTable()
        self.bottom = nn.Linear(a.dense, D)
        self.top = nn.Sequential(nn.Linear((T + 1) * D, a.hidden), nn.GELU(), nn.Linear(a.hidden, a.hidden), nn.GELU(),
                                 nn.Linear(a.hidden, 1))
        self.sparse = Concatenated(per_table) if a.fixed else per_table

    def forward(self, ids, dense):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            z = torch.cat([self.sparse(ids), self.bottom(dense)], dim=1)
            return self.top(z).squeeze(-1)


torch.manual_seed(a.seed)
model = CTR().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randint(0, V, (a.rows, T, a.bag), device="cuda", generator=g),
            torch.randn(a.rows, a.dense, device="cuda", generator=g),
            (torch.rand(a.rows, device="cuda", generator=g) < 0.25).float()) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    ids, dense, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            logit = model(ids, dense)
            loss = F.binary_cross_entropy_with_logits(logit.float(), y)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"embedding params {sum(q.numel() for q in model.sparse.parameters()) / 1e6:.1f} M,",
      f"all params {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M")
