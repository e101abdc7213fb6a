"""Training of a taxi-fare regressor: a bias-free MLP 32 -> 2048 -> 2048 -> 1 (GELU) over 65536 trips per step, bf16
autocast on float32 weights, fused AdamW, MSE. The host kept one step ahead by an event sync on the previous step.
Input: the trip-feature service hands each batch over as a flat Python list of floats (65536 trips x 32 features,
2.1 M values; a pool of two such batches is built at start-up, standing in for the service); the loop turns each
batch into a tensor with torch.tensor(values, dtype=torch.float32) and copies it to the GPU.
No NVTX ranges: a step is one pass of the loop.

--fixed: the pool is converted to pinned tensors once at start-up; each step copies its batch non_blocking.
"""
import os
import random
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=65536, help="trips per step")
p.add_argument("--features", type=int, default=32)
p.add_argument("--hidden", type=int, default=2048)
p.add_argument("--fixed", action="store_true", help="batches converted to pinned tensors once")
a = parse(p)

rnd = random.Random(a.seed)
n = a.batch * a.features
pool = [[rnd.gauss(0.0, 1.0) for _ in range(n)] for _ in range(2)]  # the service's flat lists
if a.fixed:
    pool = [torch.tensor(v, dtype=torch.float32).view(a.batch, a.features).pin_memory() for v in pool]

model = MLP([a.features, a.hidden, a.hidden, 1]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
ys = [torch.randn(a.batch, 1, device="cuda", generator=g) for _ in range(2)]
losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
print(f"fare MLP, {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M parameters, batch {a.batch}", flush=True)

throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    if a.fixed:
        x = pool[step % 2].to("cuda", non_blocking=True)
    else:
        x = torch.tensor(pool[step % 2], dtype=torch.float32).view(a.batch, a.features).to("cuda", non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        pred = model(x)
    loss = F.mse_loss(pred.float(), ys[step % 2])
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses[step] = loss.detach()
    throttle.step_done()
clock.end()
print("last loss", float(losses[-1]))
