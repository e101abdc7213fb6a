"""The CPU runs far ahead of a GPU-bound bf16 training loop: no host sync anywhere in the loop, so each
NVTX step_N range on the CPU lasts a few ms while the GPU takes ~12 ms per step and finishes long after
the CPU has queued every step. The problem is visible only on the GPU timeline: each step first runs a
20-op unfused fp32 elementwise chain over the fp32 input (then a cast to bf16), ~30 % of the GPU step,
before the bf16 MLP (fused AdamW, bf16 parameters).

--fixed: the chain and the cast in one Triton kernel (reads fp32 once, writes bf16 once).
"""
import torch

from common import MLP, StepClock, chain_eager, chain_fused, check_chain, nvtx, parse, parser

p = parser(__doc__, steps=20)
p.add_argument("--rows", type=int, default=8192)
p.add_argument("--width", type=int, default=8192)
p.add_argument("--head", type=int, default=256)
p.add_argument("--fixed", action="store_true", help="fuse the preprocessing chain into one Triton kernel")
a = parse(p)

model = MLP([a.width, a.width, a.width, a.head]).cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
raw = torch.randn(a.rows, a.width, device="cuda")  # fp32 features, preprocessed on the GPU every step
losses = torch.zeros(a.steps, device="cuda")
if a.fixed:
    check_chain(torch.bfloat16)
clock = StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        xb = chain_fused(raw, torch.bfloat16) if a.fixed else chain_eager(raw).to(torch.bfloat16)
        loss = model(xb).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
clock.end(f", chain {'fused' if a.fixed else 'eager'}")
print("final loss", float(losses[-1]))
