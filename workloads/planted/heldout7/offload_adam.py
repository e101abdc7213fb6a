"""bf16-autocast training of a regression MLP 1024 -> 2048 -> 2048 -> 1024 (bias-free, GELU; 8.4 M parameters held in
fp32 on the GPU for the forward and backward), 32768 rows per step (inputs and targets resident on the GPU, two
batches used alternately), mean squared error, the host kept one step ahead by an event sync on the previous step.
The optimizer is "offloaded to save GPU memory", as in a hand-rolled ZeRO-Offload: fp32 master weights and AdamW's
two moments live in host memory; after each backward every gradient is copied to the host (`p.grad.to("cpu")`, a
fresh pageable tensor), torch.optim.AdamW (its default implementation for CPU tensors) steps the host tensors on the
CPU, and the updated weights are copied back into the GPU parameters from pageable memory.
NVTX: step_N > forward / backward / optimizer.

--fixed: AdamW(fused=True) on the GPU parameters (its 67 MB of moments fit easily): no copies, no CPU work.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=20)
p.add_argument("--rows", type=int, default=32768)
p.add_argument("--dims", default="1024,2048,2048,1024")
p.add_argument("--fixed", action="store_true", help="fused AdamW on the GPU instead of the host")
a = parse(p)

torch.manual_seed(a.seed)
dims = [int(v) for v in a.dims.split(",")]
model = MLP(dims).cuda()
params = list(model.parameters())
if a.fixed:
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, fused=True)
    master = None
else:
    master = [q.detach().cpu().requires_grad_(True) for q in params]  # fp32 master weights on the host
    opt = torch.optim.AdamW(master, lr=1e-4, weight_decay=0.01)      # moments created on the host at the first step
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
            if a.fixed:
                opt.step()
                opt.zero_grad(set_to_none=True)
            else:
                for q, m in zip(params, master):
                    m.grad = q.grad.to("cpu")          # blocking device-to-host copy into a new pageable tensor
                opt.step()                             # AdamW on the CPU
                with torch.no_grad():
                    for q, m in zip(params, master):
                        q.copy_(m)                     # host-to-device copy from pageable memory
                opt.zero_grad(set_to_none=True)
                model.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]), "params", sum(q.numel() for q in params),
      "cpu threads", torch.get_num_threads())
