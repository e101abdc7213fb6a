"""Healthy data-parallel training of a transformer encoder (torchrun --nproc_per_node=2; runs with any
rank count): an input projection (256 -> 2048), 4 pre-LayerNorm blocks of d_model 2048 (16 heads of
128, bidirectional scaled_dot_product_attention, GELU MLP of 4 x d_model), an output projection to 256;
4 sequences of 1024 tokens per rank, bf16 autocast with fp32 parameters, fused AdamW, DDP with its
defaults (25 MB buckets, all-reduces overlapped with the backward). Equal work on every rank, the batch
resident on the GPU, no host sync in the loop. Nothing planted: the truth is "nothing above low".
NVTX: step_N.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--batch", type=int, default=4, help="sequences per rank")
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=4)
p.add_argument("--features", type=int, default=256, help="input and output width")
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


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(a.features, a.d_model, bias=False)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.out = nn.Linear(a.d_model, a.features, bias=False)

    def forward(self, x):
        x = self.inp(x)
        for blk in self.blocks:
            x = blk(x)
        return self.out(x)


dist, rank, world, local = init_distributed()
torch.manual_seed(a.seed)
model = Encoder().cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=True)
torch.manual_seed(a.seed + rank)
x = torch.randn(a.batch, a.seq, a.features, device="cuda")
losses = torch.zeros(a.steps, device="cuda")
clock = StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = ddp(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
clock.end(f", rank {rank} of {world}")
dist.destroy_process_group()
