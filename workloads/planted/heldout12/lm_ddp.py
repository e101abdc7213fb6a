"""2-rank data-parallel training (torchrun --nproc_per_node=2) of a decoder-only language model: a 32768-token vocabulary
embedded to d 2048 with learned positions (1024), 8 pre-LN causal blocks (LayerNorm, fused QKV projection, 16 heads of
128 through F.scaled_dot_product_attention with is_causal=True, output projection, residual; LayerNorm, GELU MLP
2048 -> 8192 -> 2048, residual; biases everywhere), a final LayerNorm and an LM head tied to the token embedding
(472 M parameters), bf16 autocast over fp32 weights, fused AdamW, DistributedDataParallel with its defaults (25 MB
buckets); 8 sequences of 1024 tokens per GPU and step (synthetic ids resident on the GPU, two batches per rank used
alternately), the host kept one step ahead by an event sync on the previous step.
The launch code was carried over from the team's workstation scripts, written for GPUs without a peer-to-peer path
between them: it sets NCCL_P2P_DISABLE=1 (unless the environment already sets it) before the process group is created,
so NCCL moves every gradient all-reduce between the two GPUs through host shared memory instead of NVLink.
NVTX: step_N > forward / backward / optimizer.

--fixed: NCCL_P2P_DISABLE left unset (NCCL's own choice of transport: NVLink between the two GPUs).
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
p.add_argument("--batch", type=int, default=8, help="sequences per GPU and step")
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--vocab", type=int, default=32768)
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--fixed", action="store_true", help="leave NCCL_P2P_DISABLE unset")
a = parse(p)
if not a.fixed:
    # from the workstation launcher (its GPUs have no P2P path; NCCL hung without this)
    os.environ.setdefault("NCCL_P2P_DISABLE", "1")
dist, rank, world, local = init_distributed()


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
        B, S, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(B, S, self.nh, d // self.nh).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(B, S, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(a.vocab, a.d_model)
        self.pos = nn.Embedding(a.seq, a.d_model)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model)

    def forward(self, ids):
        h = self.tok(ids) + self.pos.weight[:ids.shape[1]]
        for blk in self.blocks:
            h = blk(h)
        return F.linear(self.norm(h), self.tok.weight)  # LM head tied to the token embedding


torch.manual_seed(a.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
with torch.device("cuda"):
    model = GPT()
for name, q in model.named_parameters():
    if name.endswith("bias"):
        nn.init.zeros_(q)
    elif q.dim() >= 2:
        nn.init.normal_(q, std=0.02)
net = DDP(model, device_ids=[local])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed + rank)  # each rank its own data
data = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda", generator=g) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
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
print(f"rank {rank} loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.0f} M")
dist.destroy_process_group()
