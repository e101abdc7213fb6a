"""bf16 training of a prototype (nearest-class-centre) classifier for metric learning: a bias-free MLP encoder
1024 -> 4096 -> 4096 -> 4096 -> 4096 -> 128 (GELU; 55 M parameters) maps each sample to a 128-d embedding, and the
logits are the negative squared Euclidean distances to 1024 learned class prototypes (a 1024 x 128 parameter), divided
by a temperature, trained with cross-entropy; 4096 samples per step (features and labels resident on the GPU, two
batches used alternately), pure bf16 parameters, fused AdamW, the host kept one step ahead by an event sync on the
previous step. The distances are written the way the formula reads, with broadcasting:
((z[:, None, :] - protos[None, :, :]) ** 2).sum(-1), so the forward materializes a 4096 x 1024 x 128 difference
tensor (0.54 G bf16 elements, 1.07 GB) and its square, and the backward runs elementwise kernels and reductions over
tensors of the same size.
NVTX: step_N > forward / backward / optimizer.

--fixed: the same distances from the expansion |z|^2 + |p|^2 - 2 z p^T (one 4096 x 1024 x 128 matrix product).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=4096)
p.add_argument("--dims", default="1024,4096,4096,4096,4096,128", help="encoder widths (the last is the embedding)")
p.add_argument("--protos", type=int, default=1024, help="classes, one prototype each")
p.add_argument("--tau", type=float, default=8.0)
p.add_argument("--fixed", action="store_true", help="distances through a matrix product")
a = parse(p)
dims = [int(v) for v in a.dims.split(",")]


class ProtoNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = MLP(dims)
        self.protos = nn.Parameter(torch.randn(a.protos, dims[-1]))

    def forward(self, x):
        z = self.encoder(x)
        if a.fixed:
            d2 = (z * z).sum(-1, keepdim=True) + (self.protos * self.protos).sum(-1) - 2.0 * (z @ self.protos.t())
        else:
            d2 = ((z[:, None, :] - self.protos[None, :, :]) ** 2).sum(-1)
        return -d2 / a.tau


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = ProtoNet()
model = model.to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, dims[0], device="cuda", generator=g).to(torch.bfloat16),
            torch.randint(0, a.protos, (a.rows,), device="cuda", generator=g)) for _ in range(2)]
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
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M")
