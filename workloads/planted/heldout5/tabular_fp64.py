"""Training of a tabular regression MLP 512 -> 4096 -> 4096 -> 4096 -> 1 (GELU, bias-free) on 4096 rows per step.
The features were prepared with NumPy (float64) and handed to torch with torch.from_numpy, and the model was cast
with model.double() to match them: every GEMM is a float64 GEMM, every activation, gradient and AdamW state is
float64. Features and targets are uploaded once and stay on the GPU (two batches used alternately), fused AdamW,
the host kept one step ahead by an event sync on the previous step.
NO NVTX ranges: iterations must be found from the kernel pattern.

--fixed: features cast to float32 once, fp32 parameters, the forward under bf16 autocast.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import numpy as np
import torch

from common import MLP, StepClock, Throttle, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=4096)
p.add_argument("--dims", default="512,4096,4096,4096,1")
p.add_argument("--fixed", action="store_true", help="fp32 features and parameters, bf16 autocast")
a = parse(p)

dims = [int(v) for v in a.dims.split(",")]
rs = np.random.default_rng(a.seed)
feats = [rs.standard_normal((a.rows, dims[0])) for _ in range(2)]         # float64, as NumPy makes them
targets = [rs.standard_normal((a.rows, dims[-1])) for _ in range(2)]
dt = torch.float32 if a.fixed else torch.float64
batches = [(torch.from_numpy(f).to("cuda", dt), torch.from_numpy(t).to("cuda", dt)) for f, t in zip(feats, targets)]
torch.manual_seed(a.seed)
model = MLP(dims).cuda()
if not a.fixed:
    model = model.double()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda", dtype=dt)
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.fixed):
        out = model(x)
    loss = (out.to(dt) - y).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses[step] = loss.detach()
    throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]))
