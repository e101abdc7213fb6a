"""Planted problem: every step copies its batch from pageable (not pinned) host memory.
The copies are staged through a driver bounce buffer, run at a fraction of pinned bandwidth
and block the thread. Expected: cuda_memcpy_async_pageable (and heavy_h2d_per_step) at medium or above."""
import torch
from common import args, mlp, nvtx

a = args()
model = mlp(a.width)
opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
# 4 batches of 4 x batch x width fp32 = 32 MiB each at the defaults, in pageable memory.
batches = [torch.randn(a.batch * 4, a.width) for _ in range(4)]
for step in range(a.steps):
    with nvtx(f"step_{step}"):
        with nvtx("data"):
            x = batches[step % 4].cuda(non_blocking=True)  # non_blocking does nothing for pageable memory
        with nvtx("forward"), torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
