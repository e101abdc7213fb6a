"""bf16-autocast training of a small regression MLP 1024 -> 2048 -> 2048 -> 1024 (bias-free, GELU, fp32
parameters, 8.4 M of them), 32768 rows per step (inputs and targets resident on the GPU, two batches used
alternately), mean squared error, fused AdamW, the host kept one step ahead by an event sync on the previous step.
After every optimizer step the loop writes a "latest" checkpoint of the model (`torch.save(model.state_dict(),
...)`, 33.5 MB of fp32 tensors still on the GPU) to a file beside the program, so that a crash loses nothing.
NVTX: step_N > forward / backward / optimizer / checkpoint.

--fixed: the checkpoint is written only after the last step (as one would every few hundred steps).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=32768)
p.add_argument("--dims", default="1024,2048,2048,1024")
p.add_argument("--path", default="ckpt_latest.pt")
p.add_argument("--fixed", action="store_true", help="save once after the loop")
a = parse(p)

torch.manual_seed(a.seed)
dims = [int(v) for v in a.dims.split(",")]
model = MLP(dims).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, dims[0], device="cuda", generator=g),
            torch.randn(a.rows, dims[-1], device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

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
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        if not a.fixed:
            with nvtx("checkpoint"):
                torch.save(model.state_dict(), a.path)
        throttle.step_done()
clock.end()
if a.fixed:
    torch.save(model.state_dict(), a.path)
print("loss first/last", float(losses[0]), float(losses[-1]), "checkpoint bytes", os.path.getsize(a.path))
os.remove(a.path)
