"""Shared-bottom multi-task ranking model (bf16 autocast, fp32 parameters): 8192 samples of 1024 dense features per step
through a shared bias-free MLP trunk 1024 -> 4096 -> 4096 -> 4096 -> 4096 -> 1024 (GELU; 58.7 M parameters) and three
task towers 1024 -> 512 -> 1 (click and conversion with binary cross-entropy, dwell time with a mean squared error);
features and labels resident on the GPU (two batches used alternately), fused AdamW over every parameter, the host kept
one step ahead by an event sync on the previous step. The three task losses are back-propagated one after the other,
`loss.backward(retain_graph=True)` for the first two and `loss.backward()` for the last (written that way to look at
each task's gradients separately; that logging is gone), so every task's backward runs through the whole shared trunk
and adds its gradients into the trunk's .grad.
NVTX: step_N > forward / backward / optimizer.

--fixed: one backward of the summed losses, (l_click + l_conversion + l_dwell).backward().
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=8192, help="samples per step")
p.add_argument("--dims", default="1024,4096,4096,4096,4096,1024", help="shared trunk widths")
p.add_argument("--tower", type=int, default=512, help="hidden width of each task tower")
p.add_argument("--fixed", action="store_true", help="one backward of the summed task losses")
a = parse(p)
dims = [int(v) for v in a.dims.split(",")]
TASKS = ("click", "conversion", "dwell")


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = MLP(dims)
        self.towers = nn.ModuleList(MLP([dims[-1], a.tower, 1]) for _ in TASKS)

    def forward(self, x):
        h = self.trunk(x)
        return [tower(h).squeeze(-1).float() for tower in self.towers]


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = MultiTask()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)


def make_batch():
    x = torch.randn(a.rows, dims[0], device="cuda", generator=g)
    click = (torch.rand(a.rows, device="cuda", generator=g) < 0.3).float()
    conversion = click * (torch.rand(a.rows, device="cuda", generator=g) < 0.2).float()
    dwell = torch.randn(a.rows, device="cuda", generator=g)
    return x, click, conversion, dwell


batches = [make_batch() for _ in range(2)]
torch.cuda.synchronize()

history = torch.zeros(a.steps, len(TASKS), device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, click, conversion, dwell = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(x)
            losses = [F.binary_cross_entropy_with_logits(out[0], click),
                      F.binary_cross_entropy_with_logits(out[1], conversion),
                      F.mse_loss(out[2], dwell)]
        with nvtx("backward"):
            if a.fixed:
                (losses[0] + losses[1] + losses[2]).backward()
            else:
                for i, loss in enumerate(losses):
                    loss.backward(retain_graph=i < len(losses) - 1)
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        history[step] = torch.stack([l.detach() for l in losses])
        throttle.step_done()
clock.end()
print("task losses first", [round(v, 4) for v in history[0].tolist()], "last", [round(v, 4) for v in history[-1].tolist()],
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M")
