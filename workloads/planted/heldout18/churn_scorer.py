"""Nightly churn scoring: a bias-free bf16 MLP 32 -> 64 -> 1 (GELU, sigmoid) over 16.8 M customers per batch (features
resident on the GPU, two batches used in turn), then a roll-up of the scores per sales region for the dashboard: the
sum of the churn probabilities and the customer count of each of 8 regions. 85 % of the customers are in the home
region (region 0), the rest spread over the other 7.
The roll-up is written as regions.index_add_(0, region_id, p) (and the same with ones for the counts): one float
atomicAdd per customer, 85 % of them onto the same address.
No NVTX ranges: a batch is one pass of the loop (the host kept one batch ahead by an event sync on the previous one).

--fixed: the customers of a batch are stored sorted by region (done once when the batch is loaded), so each region is
a contiguous slice: the roll-up is one sum per slice and the counts are known on the host.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--rows", type=int, default=1 << 24, help="customers per batch")
p.add_argument("--features", type=int, default=32)
p.add_argument("--hidden", type=int, default=64)
p.add_argument("--regions", type=int, default=8)
p.add_argument("--home-share", type=float, default=0.85, help="fraction of customers in region 0")
p.add_argument("--fixed", action="store_true", help="rows sorted by region, one sum per region slice")
a = parse(p)

R = a.regions
g = torch.Generator(device="cuda").manual_seed(a.seed)
w1 = (torch.randn(a.hidden, a.features, device="cuda", generator=g) / a.features ** 0.5).to(torch.bfloat16)
w2 = (torch.randn(1, a.hidden, device="cuda", generator=g) / a.hidden ** 0.5).to(torch.bfloat16)
batches = []
for _ in range(2):
    x = torch.randn(a.rows, a.features, device="cuda", generator=g).to(torch.bfloat16)
    u = torch.rand(a.rows, device="cuda", generator=g)
    other = torch.randint(1, R, (a.rows,), device="cuda", generator=g)
    region = torch.where(u < a.home_share, torch.zeros_like(other), other)
    if a.fixed:
        order = torch.argsort(region, stable=True)
        x, region = x[order].contiguous(), region[order].contiguous()
        lens = torch.bincount(region, minlength=R).tolist()
        batches.append((x, region, lens))
    else:
        batches.append((x, region, None))
ones = torch.ones(a.rows, device="cuda")
report = torch.zeros(a.steps, 2, R, device="cuda")
torch.cuda.synchronize()
print(f"churn scoring, {a.rows} customers per batch, {R} regions", flush=True)

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        x, region, lens = batches[step % 2]
        h = F.gelu(F.linear(x, w1))
        prob = torch.sigmoid(F.linear(h, w2)).float().squeeze(1)
        if a.fixed:
            sums = torch.stack([s.sum() for s in prob.split(lens)])
            counts = torch.tensor(lens, dtype=torch.float32).to("cuda", non_blocking=True)
        else:
            sums = torch.zeros(R, device="cuda").index_add_(0, region, prob)
            counts = torch.zeros(R, device="cuda").index_add_(0, region, ones)
        report[step, 0] = sums / counts.clamp_min(1.0)
        report[step, 1] = counts
        throttle.step_done()
    clock.end()
print("mean churn probability per region (last batch)", [round(v, 4) for v in report[-1, 0].tolist()])
