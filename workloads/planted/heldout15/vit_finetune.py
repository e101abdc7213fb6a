"""Fine-tuning of a ViT-B/16 image classifier (a product-photo classifier, 1000 classes): 224 x 224 images, a 16 x 16
stride-16 patch convolution into width 768, a class token and learned positions (197 tokens), 12 pre-LN blocks
(LayerNorm, fused QKV projection, 12 heads of 64 through F.scaled_dot_product_attention, output projection, residual;
LayerNorm, GELU MLP 768 -> 3072 -> 768, residual; biases everywhere), a final LayerNorm and a linear head on the class
token (87 M parameters); bf16 autocast over fp32 weights, cross-entropy, fused AdamW. 64 images per step (synthetic,
resident on the GPU, two batches used alternately); the host kept one step ahead by an event sync on the previous step.
The training script was adapted from a recipe for a much larger model that did not fit in memory, and kept its memory
saver: the forward and the loss run under torch.autograd.graph.save_on_cpu(pin_memory=True), so every tensor autograd
saves for the backward (the LayerNorm inputs and statistics, the bf16 inputs and weight casts of every linear layer,
q, k, v, the attention output and its log-sum-exp, the GELU input) is copied to pinned host memory as soon as it is
saved, a blocking device-to-host copy each, and copied back to the GPU when the backward needs it. The model and a
batch of 64 use a few GB of the H200's 141 GB.
NVTX: step_N > forward / backward / optimizer.

--fixed: no save_on_cpu (the saved tensors stay on the GPU).
"""
import contextlib
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=64, help="images per step")
p.add_argument("--image", type=int, default=224)
p.add_argument("--patch", type=int, default=16)
p.add_argument("--d-model", type=int, default=768)
p.add_argument("--heads", type=int, default=12)
p.add_argument("--blocks", type=int, default=12)
p.add_argument("--classes", type=int, default=1000)
p.add_argument("--fixed", action="store_true", help="no activation offloading")
a = parse(p)
S = (a.image // a.patch) ** 2 + 1  # tokens with the class token


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
        self.patch = nn.Conv2d(3, d, a.patch, stride=a.patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, S, d))
        self.blocks = nn.ModuleList(Block(d, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, a.classes)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)  # [B, 196, d]
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x)[:, 0])


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = ViT()
for name, q in model.named_parameters():
    if name.endswith("bias"):
        nn.init.zeros_(q)
    elif q.dim() >= 2:
        nn.init.normal_(q, std=0.02)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.batch, 3, a.image, a.image, device="cuda", generator=g),
            torch.randint(0, a.classes, (a.batch,), device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()
print(f"saved tensors {'on the GPU' if a.fixed else 'offloaded to pinned host memory (save_on_cpu)'}", flush=True)


def memory_saver():
    """The recipe's activation offloading (kept from the large-model script)."""
    if a.fixed:
        return contextlib.nullcontext()
    return torch.autograd.graph.save_on_cpu(pin_memory=True)


losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    img, labels = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with memory_saver(), torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(img)
                loss = F.cross_entropy(logits, labels)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.0f} M, "
      f"peak GPU memory {torch.cuda.max_memory_allocated() / 1e9:.1f} GB")
