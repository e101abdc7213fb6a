"""2-rank data-parallel training (torchrun --nproc_per_node=2) of a ViT-L/16 image classifier: 224 x 224 images cut
into 196 patches of 16 x 16 by a strided convolution, a class token and learned positions (197 tokens), 24 pre-LN
blocks of width 1024 (LayerNorm, fused QKV projection, 16 heads of 64 through F.scaled_dot_product_attention, output
projection, residual; LayerNorm, GELU MLP 1024 -> 4096 -> 1024, residual; biases everywhere), a final LayerNorm on the
class token and a 1000-way linear head (304 M parameters, 296 parameter tensors); bf16 autocast over fp32 weights, fused
AdamW, label-smoothed cross-entropy, DistributedDataParallel with its defaults (25 MB buckets, all-reduced during the
backward); 128 images per GPU and step (synthetic, resident on the GPU, two batches per rank used alternately), the
host kept one step ahead by an event sync on the previous step.
The training step still calls the gradient-averaging helper of the team's pre-DDP trainer after loss.backward(): it
flattens every gradient into one buffer (torch._utils._flatten_dense_tensors), all-reduces the buffer, divides it by
the world size and copies it back into each .grad, on gradients that DDP has just averaged (the result is the same, so
nothing looked wrong).
NVTX: step_N > forward / backward / optimizer.

--fixed: the helper is not called (DDP's own all-reduce only).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from common import StepClock, Throttle, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=20)
p.add_argument("--batch", type=int, default=128, help="images per GPU and step")
p.add_argument("--image", type=int, default=224)
p.add_argument("--patch", type=int, default=16)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=24)
p.add_argument("--classes", type=int, default=1000)
p.add_argument("--fixed", action="store_true", help="no second gradient average after DDP's")
a = parse(p)
dist, rank, world, local = init_distributed()


def average_gradients(module, world_size):
    """From the pre-DDP trainer: average the gradients over the ranks in one flat all-reduce."""
    grads = [q.grad for q in module.parameters() if q.grad is not None]
    flat = torch._utils._flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    flat.div_(world_size)
    for grad, synced in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
        grad.copy_(synced)


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        B, N, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, N, 3, self.nh, d // self.nh).permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(B, N, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        n = (a.image // a.patch) ** 2
        self.embed = nn.Conv2d(3, d, a.patch, stride=a.patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, a.classes)

    def forward(self, img):
        x = self.embed(img).flatten(2).transpose(1, 2)  # [B, 196, d]
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x[:, 0]))


torch.manual_seed(a.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
with torch.device("cuda"):
    model = ViT()
for name, q in model.named_parameters():
    if name.endswith("bias"):
        nn.init.zeros_(q)
    elif q.dim() == 2:
        nn.init.trunc_normal_(q, std=0.02)
net = DDP(model, device_ids=[local])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed + rank)  # each rank its own data
batches = [(torch.randn(a.batch, 3, a.image, a.image, device="cuda", generator=g),
            torch.randint(0, a.classes, (a.batch,), device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(net(x), y, label_smoothing=0.1)
        with nvtx("backward"):
            loss.backward()
            if not a.fixed:
                average_gradients(model, world)
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end(f", rank {rank}")
print(f"rank {rank} loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.0f} M")
dist.destroy_process_group()
