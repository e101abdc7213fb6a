"""2-GPU training (torchrun --nproc_per_node=2) of a 337 M-parameter GPT-style language model on news text: token
embeddings of width 1024 (vocabulary 32768) plus learned positions (1024), 24 pre-LN causal blocks (LayerNorm, fused QKV
projection, 16 heads of 64 through F.scaled_dot_product_attention with is_causal=True, output projection, residual;
LayerNorm, GELU MLP 1024 -> 4096 -> 1024, residual; biases everywhere), a final LayerNorm and an LM head tied to the
token embedding; bf16 autocast over fp32 weights, cross-entropy, fused AdamW. 32 sequences of 1024 tokens per step
(synthetic ids, resident on the GPU, two batches used alternately); the host kept one step ahead by an event sync on the
previous step.
The two GPUs split the model Megatron-style (the team's in-house layers, kept from a 13 B-parameter run): in every block
the QKV projection and fc1 are column-parallel (each GPU holds 8 of the 16 heads and 2048 of the 4096 hidden units) and
the output projection and fc2 row-parallel, so both GPUs process the same 32 x 1024 tokens and every block all-reduces
its [32, 1024, 1024] bf16 activations twice in the forward (after the output projection and after fc2, 67 MB each) and
its input gradients twice in the backward (before the QKV projection and before fc1: float32, 134 MB each, as the
LayerNorm outputs are float32 under autocast): 96 all-reduces per step, each on the critical path. The embeddings, LayerNorms, residual stream, LM head and loss are replicated: both GPUs compute them
in full for the same tokens.
NVTX: step_N > forward / backward / optimizer.

--fixed: plain data parallelism: each GPU holds the whole model (DistributedDataParallel, default buckets) and
processes 16 of the 32 sequences.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from common import StepClock, Throttle, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=16)
p.add_argument("--batch", type=int, default=32, help="sequences per step (over both GPUs)")
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--vocab", type=int, default=32768)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=24)
p.add_argument("--fixed", action="store_true", help="data parallel (DDP) instead of tensor parallel")
a = parse(p)
dist, rank, world, local = init_distributed()
TP = 1 if a.fixed else world  # tensor-parallel degree


class CopyToTP(torch.autograd.Function):
    """Identity in the forward; all-reduce of the input gradient in the backward (Megatron's f)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        dist.all_reduce(g)
        return g


class ReduceFromTP(torch.autograd.Function):
    """All-reduce of the partial sums in the forward; identity in the backward (Megatron's g)."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def copy_to_tp(x):
    return CopyToTP.apply(x) if TP > 1 else x


def reduce_from_tp(x):
    return ReduceFromTP.apply(x) if TP > 1 else x


def shard(full, dim):
    """This rank's slice of a weight built in full (the same on every rank)."""
    n = full.shape[dim] // TP
    r = rank if TP > 1 else 0
    return nn.Parameter(full.narrow(dim, r * n, n).clone())


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh = nh // TP
        self.dh = d // nh
        self.ln1 = nn.LayerNorm(d)
        # column-parallel QKV: the rows of this rank's heads for q, k and v
        r = rank if TP > 1 else 0
        wqkv = torch.randn(3, nh, self.dh, d) * 0.02
        self.w_qkv = nn.Parameter(wqkv[:, r * self.nh:(r + 1) * self.nh].reshape(-1, d).clone())
        self.b_qkv = nn.Parameter(torch.zeros(3 * self.nh * self.dh))
        self.w_proj = shard(torch.randn(d, d) * 0.02, 1)     # row-parallel
        self.b_proj = nn.Parameter(torch.zeros(d))           # added once, after the reduction
        self.ln2 = nn.LayerNorm(d)
        self.w_fc1 = shard(torch.randn(4 * d, d) * 0.02, 0)  # column-parallel
        self.b_fc1 = nn.Parameter(torch.zeros(4 * d // TP))
        self.w_fc2 = shard(torch.randn(d, 4 * d) * 0.02, 1)  # row-parallel
        self.b_fc2 = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        B, S, d = x.shape
        h = copy_to_tp(self.ln1(x))
        q, k, v = F.linear(h, self.w_qkv, self.b_qkv).view(B, S, 3, self.nh, self.dh).permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        o = F.linear(att.transpose(1, 2).reshape(B, S, self.nh * self.dh), self.w_proj)
        x = x + (reduce_from_tp(o) + self.b_proj)
        h = copy_to_tp(self.ln2(x))
        m = F.linear(F.gelu(F.linear(h, self.w_fc1, self.b_fc1)), self.w_fc2)
        return x + (reduce_from_tp(m) + self.b_fc2)


class NewsLM(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        self.tok = nn.Embedding(a.vocab, d)
        nn.init.normal_(self.tok.weight, std=0.02)
        self.pos = nn.Parameter(torch.randn(a.seq, d) * 0.01)
        self.blocks = nn.ModuleList(Block(d, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(d)

    def forward(self, ids):
        h = self.tok(ids) + self.pos[:ids.shape[1]]
        for blk in self.blocks:
            h = blk(h)
        return F.linear(self.norm(h), self.tok.weight)  # tied LM head, replicated: [B, S, V]


torch.manual_seed(a.seed)  # the same full weights on every rank; each keeps its shard
with torch.device("cuda"):
    model = NewsLM()
net = DDP(model, device_ids=[local]) if a.fixed else model
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
per_rank = a.batch // world if a.fixed else a.batch  # DP: each rank its half; TP: both ranks the same sequences
g = torch.Generator(device="cuda").manual_seed(a.seed + (rank if a.fixed else 0))
data = [torch.randint(0, a.vocab, (per_rank, a.seq + 1), device="cuda", generator=g) for _ in range(2)]
losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
if rank == 0:
    print(f"{'data parallel (DDP)' if a.fixed else f'tensor parallel x{TP}'}: {per_rank} x {a.seq} tokens per GPU, "
          f"{sum(q.numel() for q in model.parameters()) / 1e6:.0f} M parameters on each GPU", flush=True)

throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    seq = data[step % len(data)]
    ids, targets = seq[:, :-1], seq[:, 1:]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = net(ids)
                loss = F.cross_entropy(logits.view(-1, a.vocab), targets.reshape(-1))
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end(f", rank {rank}")
if rank == 0:
    print("loss first/last", float(losses[0]), float(losses[-1]))
dist.destroy_process_group()
