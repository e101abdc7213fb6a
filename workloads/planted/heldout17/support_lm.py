"""2-GPU data-parallel training (torchrun --nproc_per_node=2) of a 42 M-parameter GPT-style language model on
customer-support chat logs: token embeddings of width 512 (vocabulary 32768) plus learned positions (512), 8 pre-LN
causal blocks (LayerNorm, fused QKV projection, 8 heads of 64 through F.scaled_dot_product_attention with
is_causal=True, output projection, residual; LayerNorm, GELU MLP 512 -> 2048 -> 512, residual; biases everywhere), a
final LayerNorm and an LM head tied to the token embedding; bf16 autocast over fp32 weights, cross-entropy, fused
AdamW. Per GPU 32 sequences of 512 tokens per step (synthetic ids, resident on the GPU, two batches used alternately);
DistributedDataParallel with its default buckets; the host kept one step ahead by an event sync on the previous step.
The training script initializes torch.distributed with backend="gloo" (its launcher's default, kept from the CPU-only
CI runs), and DDP runs its gradient all-reduce through that process group: for every bucket Gloo copies the float32
gradients to pinned host memory, reduces them on the CPUs over TCP between the two processes and copies them back, and
the backward waits for the last bucket (the tied embedding's 67 MB gradient is complete only at the end of the
backward). No NCCL kernel runs.
NVTX: step_N > forward / backward / optimizer.

--fixed: backend="nccl": the same DDP all-reduce as NCCL kernels over NVLink, overlapped with the backward.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from common import MULTICAST_OFF, StepClock, Throttle, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=32, help="sequences per GPU per step")
p.add_argument("--seq", type=int, default=512)
p.add_argument("--vocab", type=int, default=32768)
p.add_argument("--d-model", type=int, default=512)
p.add_argument("--heads", type=int, default=8)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--fixed", action="store_true", help="NCCL process group instead of Gloo")
a = parse(p)


def init_gloo():
    """The job's own set-up: torch.distributed over Gloo (TCP on the loopback interface between the two processes)."""
    for k, v in MULTICAST_OFF.items():
        os.environ[k] = v
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("gloo")
    return dist, dist.get_rank(), dist.get_world_size(), local


dist, rank, world, local = init_distributed() if a.fixed else init_gloo()


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
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.nh, d // self.nh).permute(2, 0, 3, 1, 4).unbind(0)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(o.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class SupportLM(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        self.tok = nn.Embedding(a.vocab, d)
        nn.init.normal_(self.tok.weight, std=0.02)
        self.pos = nn.Parameter(torch.randn(a.seq, d) * 0.01)
        self.blocks = nn.ModuleList(Block(d, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(d)

    def forward(self, ids):
        h = self.tok(ids) + self.pos[: ids.shape[1]]
        for blk in self.blocks:
            h = blk(h)
        return F.linear(self.norm(h), self.tok.weight)  # tied LM head


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = SupportLM()
net = DDP(model, device_ids=[local])
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed + rank)
data = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda", generator=g) for _ in range(2)]
losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
if rank == 0:
    print(f"DDP over {dist.get_backend()}: {world} ranks, {a.batch} x {a.seq} tokens per GPU, "
          f"{sum(q.numel() for q in model.parameters()) / 1e6:.1f} M parameters", flush=True)

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
