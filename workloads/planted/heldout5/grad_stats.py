"""bf16 training of a residual MLP tower (a point-cloud / tabular feature encoder): 12 pre-LayerNorm blocks
(LayerNorm, Linear d -> 4d with bias, GELU, Linear 4d -> d with bias, residual add), a final LayerNorm and a d -> d
head with bias, regressing d targets with a mean squared error; 16384 rows per step (inputs and targets resident on
the GPU, two batches used alternately), pure bf16 parameters, fused AdamW, the host kept one step ahead by an event
sync on the previous step. Between the backward and the optimizer the loop fills a training dashboard and clips
the gradients by their global norm, written by hand: for each of the 76 parameter tensors the gradient's norm, its
largest magnitude and the weight's norm, each read with `.item()` (a reduction, a 4-byte copy to the host and a
stream sync each: 228 round trips per step), the global norm summed in Python, then every gradient multiplied by
the clip coefficient.
NVTX: step_N > forward / backward / grad_stats / optimizer.

--fixed: the three statistics with torch._foreach_norm (ord 2 and inf) kept on the GPU (read once at the end) and
torch.nn.utils.clip_grad_norm_(foreach=True): no host sync in the step.
"""
import math
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=16384)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--blocks", type=int, default=12)
p.add_argument("--max-norm", type=float, default=1.0)
p.add_argument("--fixed", action="store_true", help="foreach clip_grad_norm_ and norms kept on the GPU")
a = parse(p)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(a.d_model, a.hidden) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model)
        self.head = nn.Linear(a.d_model, a.d_model)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


torch.manual_seed(a.seed)
model = Tower().cuda().to(torch.bfloat16)
params = [q for q in model.parameters()]
names = [n for n, _ in model.named_parameters()]
opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, a.d_model, device="cuda", generator=g, dtype=torch.bfloat16),
            torch.randn(a.rows, a.d_model, device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
norm_log = {}  # parameter name -> last (grad norm, grad max |g|, weight norm) on the host (planted), or GPU tensors (fixed)
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            out = model(x)
            loss = (out.float() - y).pow(2).mean()
        with nvtx("backward"):
            loss.backward()
        with nvtx("grad_stats"):
            grads = [q.grad for q in params]
            if a.fixed:
                norm_log["all"] = torch.stack(torch._foreach_norm(grads))
                norm_log["max"] = torch.stack(torch._foreach_norm(grads, float("inf")))
                norm_log["weight"] = torch.stack(torch._foreach_norm([q.detach() for q in params]))
                torch.nn.utils.clip_grad_norm_(params, a.max_norm, foreach=True)
            else:
                sq = 0.0
                for n, q, gr in zip(names, params, grads):
                    gn = gr.norm().item()
                    norm_log[n] = (gn, gr.abs().max().item(), q.detach().norm().item())
                    sq += gn * gn
                coef = min(1.0, a.max_norm / (math.sqrt(sq) + 1e-6))
                for gr in grads:
                    gr.mul_(coef)
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
last = float(norm_log["all"].float().norm()) if a.fixed else math.sqrt(sum(v[0] * v[0] for v in norm_log.values()))
print("loss first/last", float(losses[0]), float(losses[-1]), "last grad norm", last, "tensors", len(params))
