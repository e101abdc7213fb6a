"""Linear-probe fine-tuning on top of a pretrained feature extractor (bf16): a backbone of 8 pre-LayerNorm residual
MLP blocks (LayerNorm, Linear d 2048 -> 8192 with bias, GELU, Linear 8192 -> 2048 with bias, residual add; 268 M
parameters, "pretrained" and meant to stay frozen) and a head (LayerNorm, Linear 2048 -> 1000) trained with
cross-entropy; 8192 samples of 2048 input features per step (resident on the GPU, two batches used alternately),
pure bf16 parameters, fused AdamW over the head's parameters only, the host kept one step ahead by an event sync on
the previous step. The backbone is "frozen" only by leaving its parameters out of the optimizer: its requires_grad
flags are still on and its forward runs under autograd, so every backward also computes the input and weight
gradients of all 8 blocks and accumulates the weight gradients into .grad tensors that nothing reads or clears.
NVTX: step_N > forward / backward / optimizer.

--fixed: backbone.requires_grad_(False) and its forward under torch.no_grad(): the backward covers the head only.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=8192, help="samples per step")
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--hidden", type=int, default=8192)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--classes", type=int, default=1000)
p.add_argument("--fixed", action="store_true", help="freeze the backbone (requires_grad off, forward under no_grad)")
a = parse(p)

KW = dict(device="cuda", dtype=torch.bfloat16)  # parameters made on the GPU in bf16 (no 1 GB fp32 init on the CPU)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln = nn.LayerNorm(d, **KW)
        self.fc1 = nn.Linear(d, h, **KW)
        self.fc2 = nn.Linear(h, d, **KW)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(a.d_model, a.hidden) for _ in range(a.blocks))

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


torch.manual_seed(a.seed)
backbone = Backbone()
head = nn.Sequential(nn.LayerNorm(a.d_model, **KW), nn.Linear(a.d_model, a.classes, **KW))
if a.fixed:
    backbone.requires_grad_(False)
opt = torch.optim.AdamW(head.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.rows, a.d_model, device="cuda", generator=g, dtype=torch.bfloat16),
            torch.randint(0, a.classes, (a.rows,), device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            if a.fixed:
                with torch.no_grad():
                    feats = backbone(x)
            else:
                feats = backbone(x)
            logits = head(feats)
            loss = F.cross_entropy(logits.float(), y)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
n_bb = sum(q.numel() for q in backbone.parameters())
with_grad = sum(q.grad is not None for q in backbone.parameters())
print("loss first/last", float(losses[0]), float(losses[-1]), f"backbone params {n_bb / 1e6:.1f} M,",
      f"backbone tensors holding a .grad: {with_grad}")
