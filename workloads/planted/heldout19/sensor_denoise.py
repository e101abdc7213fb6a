"""Training of a denoiser for vibration-sensor windows: a bias-free MLP 1024 -> 4096 -> 1024 (GELU) that predicts
the noise added to 32768 clean windows of 1024 samples per step (a diffusion-style objective at one noise level),
bf16 autocast on float32 weights, fused AdamW, MSE on the noise. Clean windows are synthetic and resident on the GPU
(two batches used in turn); the host kept one step ahead by an event sync on the previous step.
The noise of each step is drawn with torch.randn(batch, 1024) (on the CPU, the default device) and moved to the GPU
with .to("cuda").
NVTX: step_N > noise / forward / backward / optimizer.

--fixed: the noise is drawn on the GPU (torch.randn(..., device="cuda")).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=32768, help="windows per step")
p.add_argument("--window", type=int, default=1024)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--sigma", type=float, default=0.5)
p.add_argument("--fixed", action="store_true", help="noise drawn on the GPU")
a = parse(p)

model = MLP([a.window, a.hidden, a.window]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
clean = [torch.sin(torch.linspace(0, 60, a.window, device="cuda") * (1 + torch.rand(a.batch, 1, device="cuda", generator=g)))
         for _ in range(2)]
losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
print(f"denoiser MLP, {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M parameters, batch {a.batch}", flush=True)

throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        x0 = clean[step % 2]
        with nvtx("noise"):
            if a.fixed:
                eps = torch.randn(a.batch, a.window, device="cuda")
            else:
                eps = torch.randn(a.batch, a.window).to("cuda")
            xt = x0 + a.sigma * eps
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                pred = model(xt)
            loss = F.mse_loss(pred.float(), eps)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("last loss", float(losses[-1]))
