"""bf16 training of a large MLP classifier over precomputed 2560-d embeddings (product-category tagging): a bias-free MLP
2560 -> 8192 x 5 -> 4096 categories (GELU; 323 M parameters, pure bf16) with cross-entropy, 2048 rows per step
(embeddings and labels resident on the GPU, two batches used alternately), fused AdamW, the host kept one step ahead by
an event sync on the previous step. The gradients are cleared with `opt.zero_grad(set_to_none=False)`, kept from an
older recipe so that the .grad tensors stay allocated between steps: every step a multi-tensor zero-fill runs over all
323 M bf16 gradients, and in the backward each new weight gradient is then added into the zeroed .grad (one elementwise
add per parameter tensor) instead of being handed over as the .grad itself.
NVTX: step_N > forward / backward / optimizer.

--fixed: opt.zero_grad(set_to_none=True) (the default).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=2048)
p.add_argument("--dims", default="2560,8192,8192,8192,8192,8192,4096")
p.add_argument("--fixed", action="store_true", help="set the gradients to None instead of zeroing them")
a = parse(p)
dims = [int(v) for v in a.dims.split(",")]

torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = MLP(dims)
model = model.to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, dims[0], device="cuda", generator=g).to(torch.bfloat16),
            torch.randint(0, dims[-1], (a.rows,), device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            logits = model(x)
            loss = F.cross_entropy(logits.float(), y)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=a.fixed)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M")
