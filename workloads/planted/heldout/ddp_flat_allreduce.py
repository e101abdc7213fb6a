"""4-rank data parallelism by hand with one big exposed all-reduce: no DDP; after the backward every
gradient is flattened into one buffer (torch.cat), all-reduced once (AVG) on the compute stream, and
copied back, so the whole transfer sits between the backward and the optimizer with nothing to overlap.
bf16 autocast, fp32 parameters, fused AdamW. NVTX: step_N. No fixed variant.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch

from common import MLP, StepClock, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=8192, help="rows per rank")
p.add_argument("--dims", default="1024,4096,8192,8192,4096,1024")
a = parse(p)

dist, rank, world, local = init_distributed()
dims = [int(v) for v in a.dims.split(",")]
torch.manual_seed(a.seed)
model = MLP(dims).cuda()
params = list(model.parameters())
for prm in params:
    dist.broadcast(prm.data, src=0)
opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
torch.manual_seed(a.seed + rank)
x = torch.randn(a.rows, dims[0], device="cuda")
losses = torch.zeros(a.steps, device="cuda")
clock = StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        grads = [prm.grad for prm in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.AVG)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
        del flat
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
clock.end(f", rank {rank}")
dist.destroy_process_group()
