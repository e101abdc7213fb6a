"""Self-supervised pre-training of a speech encoder, HuBERT-style masked prediction: 15-second utterances as 80-band
log-mel features at 100 frames per second ([16, 80, 1500] per step, synthetic, resident on the GPU, two batches used
alternately) go through a convolutional front end (Conv1d 80 -> 1024, kernel 3, GELU; Conv1d 1024 -> 1024, kernel 3,
stride 2, GELU: 750 frames), about half of the frames (spans of 10) replaced by a learned mask embedding, sinusoidal
positions, 8 pre-LN transformer blocks of width 1024 (LayerNorm, nn.MultiheadAttention with 16 heads of 64 and
batch_first=True, residual; LayerNorm, GELU MLP 1024 -> 4096 -> 1024, residual), a final LayerNorm and a linear
classifier over 504 k-means cluster targets, with the cross-entropy taken on the masked frames only (105 M parameters);
bf16 autocast over fp32 weights, fused AdamW; the host kept one step ahead by an event sync on the previous step.
The blocks call the attention module as self.attn(h, h, h)[0]: nn.MultiheadAttention's need_weights defaults to True, so
in training it returns the attention probabilities averaged over the heads, and to produce them it takes its explicit
path: q @ k^T with torch.bmm into a [256, 750, 750] score tensor per block, softmax (float32 under autocast), a bf16
copy of the probabilities for the second bmm with v, and their mean over the heads, which the caller throws away;
the backward walks the same score-sized tensors back.
NVTX: step_N > forward / backward / optimizer.

--fixed: self.attn(h, h, h, need_weights=False)[0]: the module then calls F.scaled_dot_product_attention (a fused
kernel; no score tensor in memory).
"""
import math
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=16)
p.add_argument("--batch", type=int, default=16, help="utterances per step")
p.add_argument("--frames", type=int, default=1500, help="log-mel frames per utterance (100 per second)")
p.add_argument("--mels", type=int, default=80)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--targets", type=int, default=504, help="k-means cluster targets")
p.add_argument("--span", type=int, default=10, help="frames per mask span")
p.add_argument("--fixed", action="store_true", help="need_weights=False (fused attention)")
a = parse(p)
S = (a.frames + 1) // 2  # frames after the stride-2 convolution


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, nh, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.ln1(x)
        if a.fixed:
            h = self.attn(h, h, h, need_weights=False)[0]
        else:
            h = self.attn(h, h, h)[0]  # need_weights left at its default
        x = x + h
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def sinusoids(length, d):
    t = torch.arange(length, dtype=torch.float32)[:, None]
    inv = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)[None, :]
    return torch.cat([torch.sin(t * inv), torch.cos(t * inv)], dim=1)


class SpeechEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        self.conv1 = nn.Conv1d(a.mels, d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.mask_emb = nn.Parameter(torch.randn(d) * 0.02)
        self.register_buffer("pos", sinusoids(S, d), persistent=False)
        self.blocks = nn.ModuleList(Block(d, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, a.targets)

    def forward(self, mel, mask):
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x)).transpose(1, 2)  # [B, S, d]
        x = torch.where(mask[..., None], self.mask_emb.to(x.dtype), x)
        x = x + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = SpeechEncoder()
opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = []
for _ in range(2):
    mel = torch.randn(a.batch, a.mels, a.frames, device="cuda", generator=g)
    spans = torch.rand(a.batch, S // a.span, device="cuda", generator=g) < 0.5
    mask = spans.repeat_interleave(a.span, dim=1)  # [B, S]: spans of masked frames
    targets = torch.randint(0, a.targets, (a.batch, S), device="cuda", generator=g)
    targets = targets.masked_fill(~mask, -100)  # the loss sees the masked frames only
    batches.append((mel, mask, targets))
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    mel, mask, targets = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(mel, mask)
                loss = F.cross_entropy(logits.reshape(-1, a.targets), targets.reshape(-1), ignore_index=-100)
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
