"""bf16 training of a ViT-style image encoder: 48 images per step, already cut into 256 patches of 16 x 16 x 3 = 768
features (resident on the GPU), a patch embedding (768 -> 2048) plus learned positions, 4 pre-LayerNorm blocks of
d_model 2048 (16 heads of 128, bidirectional scaled_dot_product_attention, GELU MLP of 8192), a final LayerNorm,
mean pooling, a 1000-class head and cross-entropy. Pure bf16 parameters, fused AdamW, the host kept one step ahead
by an event sync on the previous step. Every block runs under torch.utils.checkpoint (use_reentrant=False), a
memory-saving setting carried over from a much larger configuration: the backward recomputes each block's forward
before computing its gradients, although this run would need only ~5 GB without it.
NVTX: step_N > forward / backward / optimizer.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=48, help="images per step")
p.add_argument("--patches", type=int, default=256, help="patches per image")
p.add_argument("--patch-dim", type=int, default=768, help="features per patch (16 x 16 x 3)")
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=4)
p.add_argument("--classes", type=int, default=1000)
a = parse(p)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.up = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Linear(a.patch_dim, a.d_model, bias=False)
        self.pos = nn.Parameter(torch.randn(a.patches, a.d_model) * 0.02)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model)
        self.head = nn.Linear(a.d_model, a.classes, bias=False)

    def forward(self, x):
        x = self.patch(x) + self.pos
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False)
        return self.head(self.norm(x).mean(dim=1))


torch.manual_seed(a.seed)
model = ViT().cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.batch, a.patches, a.patch_dim, device="cuda", generator=g).to(torch.bfloat16),
            torch.randint(0, a.classes, (a.batch,), device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            loss = F.cross_entropy(model(x).float(), y)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end(f", peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
print("loss first/last", float(losses[0]), float(losses[-1]))
