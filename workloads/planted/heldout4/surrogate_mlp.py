"""bf16-autocast training of a neural surrogate (a physics emulator): a bias-free GELU MLP 1024 -> 8192 -> 8192 ->
8192 -> 8192 -> 1024 (218 M fp32 parameters in 5 tensors) regressing 1024 outputs from 1024 inputs with a mean
squared error, 4096 samples per step (inputs and targets resident on the GPU, two batches used alternately), the
host kept one step ahead by an event sync on the previous step. The optimizer is AdamW with foreach=False, a setting
carried over from a memory-tight configuration (PyTorch's foreach path keeps temporary copies of every tensor's
state; the single-tensor path does not): per parameter tensor, eight separate kernels (weight decay, the two moment
updates, the square root, the bias-correction divide, eps and the update), each a full pass over the tensor.
NO NVTX ranges: iterations must be found from the kernel pattern.

--fixed: AdamW(fused=True), one fused kernel pass over parameters, gradients and both moments.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch

from common import MLP, StepClock, Throttle, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=4096, help="samples per step")
p.add_argument("--dims", default="1024,8192,8192,8192,8192,1024")
p.add_argument("--fixed", action="store_true", help="fused AdamW")
a = parse(p)

dims = [int(v) for v in a.dims.split(",")]
torch.manual_seed(a.seed)
model = MLP(dims).cuda()
if a.fixed:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
else:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, foreach=False)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, dims[0], device="cuda", generator=g),
            torch.randn(a.rows, dims[-1], device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(x)
    loss = (out.float() - y).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses[step] = loss.detach()
    throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]))
