"""Planted problem: launch-bound — a model of many small layers on a tiny batch, an unfused
per-parameter optimizer (foreach=False) and a chain of elementwise ops: thousands of kernels per
second that each run for a few microseconds. Expected: launch_bound_tiny_kernels at medium or above
and low utilization."""
import torch
import torch.nn as nn
from common import args, nvtx

a = args()
torch.manual_seed(0)
model = nn.Sequential(*[nn.Sequential(nn.Linear(256, 256), nn.LayerNorm(256), nn.ReLU()) for _ in range(24)]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False, fused=False)
x = torch.randn(8, 256, device="cuda")
for step in range(a.steps):
    with nvtx(f"step_{step}"):
        h = model(x)
        for _ in range(50):  # an unfused elementwise chain
            h = h * 1.0001 + 0.0001
        loss = h.pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
