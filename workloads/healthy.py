"""Healthy: GPU-bound training with nothing wrong — bf16 autocast (tensor cores), the batch lives on
the GPU (no host traffic per step), no host sync in the loop, fused Adam, enough work per kernel.
aisp_profile_rules should report nothing above `low` here (only one-time first-step overhead)."""
import torch
from common import args, mlp, nvtx

a = args()
model = mlp(a.width)
opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
x = torch.randn(a.batch * 4, a.width, device="cuda")
losses = torch.zeros(a.steps, device="cuda")
for step in range(a.steps):
    with nvtx(f"step_{step}"):
        with nvtx("forward"), torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
torch.cuda.synchronize()
print("final loss", losses[-1].item())
