"""bf16-autocast training of a wide bias-free MLP 2048 -> 8192 -> 8192 -> 8192 -> 2048 (GELU; 168 M fp32 parameters),
mean squared error, 1024 rows per step (inputs and targets resident on the GPU, two batches used alternately), fused
AdamW, the host kept one step ahead by an event sync on the previous step. A "loss-spike guard" added after a
divergence: right before every optimizer step the loop snapshots the parameters and both AdamW moments
(`t.detach().clone()` of each, 2.0 GB) so that the step can be rolled back if a later check (every 500 steps, on the
lagged loss; never within this run) finds a spike. Each snapshot is three device-to-device copies of every tensor.
NVTX: step_N > forward / backward / optimizer (the snapshot is inside optimizer).

--fixed: no per-step snapshot (keep a checkpoint every few hundred steps instead, or skip non-finite steps on the GPU).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=1024)
p.add_argument("--dims", default="2048,8192,8192,8192,2048")
p.add_argument("--fixed", action="store_true", help="no per-step snapshot of weights and optimizer state")
a = parse(p)
dims = [int(v) for v in a.dims.split(",")]

torch.manual_seed(a.seed)
model = MLP(dims).cuda()
params = list(model.parameters())
opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, dims[0], device="cuda", generator=g),
            torch.randn(a.rows, dims[-1], device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()


def snapshot():
    snap = {"params": [q.detach().clone() for q in params]}
    for key in ("exp_avg", "exp_avg_sq"):
        snap[key] = [opt.state[q][key].clone() for q in params if key in opt.state[q]]
    return snap


backup = None
losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(x)
            loss = (out.float() - y).pow(2).mean()
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            if not a.fixed:
                backup = snapshot()
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
held = 0 if backup is None else sum(t.numel() * t.element_size() for v in backup.values() for t in v)
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in params) / 1e6:.1f} M, snapshot {held / 1e6:.1f} MB")
