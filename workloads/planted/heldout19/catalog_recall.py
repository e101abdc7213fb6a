"""Candidate scoring for a shop's recommendation service: for each of 32768 user queries, 128 candidate items from
the retrieval stage are looked up in an item-embedding table of 2.1 M items x 128 float32 features, scored against
the query's user vector (a bias-free bf16 user tower 256 -> 512 -> 128) by a dot product, and the best 16 kept.
Inference only (torch.inference_mode); everything synthetic and resident on the GPU (two request batches used in
turn); the host kept one step ahead by an event sync on the previous step.
The item table arrives from the columnar feature store feature-major ([128, 2.1 M]); the service keeps that array and
looks items up through its transpose view (table_fm.t(), a [2.1 M, 128] view with strides (1, 2.1 M)) with
torch.index_select.
NVTX: step_N > users / lookup / score.

--fixed: the table is made row-major once at load (table_fm.t().contiguous()), the same index_select.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--items", type=int, default=1 << 21, help="rows of the item table")
p.add_argument("--dim", type=int, default=128)
p.add_argument("--queries", type=int, default=32768)
p.add_argument("--candidates", type=int, default=128)
p.add_argument("--user-features", type=int, default=256)
p.add_argument("--keep", type=int, default=16)
p.add_argument("--fixed", action="store_true", help="row-major table (one transpose copy at load)")
a = parse(p)

g = torch.Generator(device="cuda").manual_seed(a.seed)
table_fm = torch.randn(a.dim, a.items, device="cuda", generator=g)  # feature-major, as exported
table = table_fm.t().contiguous() if a.fixed else table_fm.t()
del table_fm
w1 = (torch.randn(512, a.user_features, device="cuda", generator=g) / a.user_features ** 0.5).to(torch.bfloat16)
w2 = (torch.randn(a.dim, 512, device="cuda", generator=g) / 512 ** 0.5).to(torch.bfloat16)
reqs = []
for _ in range(2):
    u = torch.randn(a.queries, a.user_features, device="cuda", generator=g).to(torch.bfloat16)
    cand = torch.randint(0, a.items, (a.queries * a.candidates,), device="cuda", generator=g)
    reqs.append((u, cand))
best = torch.zeros(a.steps, a.queries, a.keep, dtype=torch.long, device="cuda")
torch.cuda.synchronize()
print(f"candidate scoring, {a.items} items x {a.dim}, {a.queries} queries x {a.candidates} candidates", flush=True)

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        with nvtx(f"step_{step}"):
            u, cand = reqs[step % 2]
            with nvtx("users"):
                q = F.linear(F.gelu(F.linear(u, w1)), w2).float()
            with nvtx("lookup"):
                items = torch.index_select(table, 0, cand).view(a.queries, a.candidates, a.dim)
            with nvtx("score"):
                s = torch.bmm(items, q.unsqueeze(2)).squeeze(2)
                best[step] = s.topk(a.keep, dim=1).indices
            throttle.step_done()
clock.end()
print("first query's best candidates", best[-1, 0, :4].tolist())
