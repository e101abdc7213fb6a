"""Data-parallel training of an embedding MLP (torchrun --nproc_per_node=2; runs with any rank count)
where rank 0 alone also computes a monitoring metric every step: after the forward, it takes the first
5120 rows of its 8192-wide features, L2-normalises them in fp32 and forms their 5120 x 5120 cosine
similarity matrix (an "embedding collapse" statistic, kept on the GPU). It runs outside autocast, in fp32
with TF32 off (PyTorch's default), i.e. as a CUDA-core SGEMM, and only on rank 0, so rank 0 starts its
backward late and the other ranks wait for it in the all-reduces. Equal rows on every rank (16384), bf16
autocast, fp32 parameters, fused AdamW, DDP defaults. NVTX: step_N (> metrics on rank 0).

--fixed: the metric is logged every 50 steps, as monitoring usually is (in this 30-step run: at step 0
only, a warm-up step), so the steady steps carry no rank-0-only work.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import MLP, StepClock, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=16384, help="rows per rank")
p.add_argument("--dims", default="2048,8192,8192,8192", help="body widths (GELU after every layer)")
p.add_argument("--out", type=int, default=2048, help="projection width")
p.add_argument("--metric-rows", type=int, default=5120)
p.add_argument("--metric-rank", type=int, default=0)
p.add_argument("--metric-every", type=int, default=50, help="with --fixed: steps between metrics")
p.add_argument("--fixed", action="store_true", help="the metric every --metric-every steps instead of every step")
a = parse(p)

torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default, stated
torch.backends.cudnn.allow_tf32 = False

dist, rank, world, local = init_distributed()
dims = [int(v) for v in a.dims.split(",")]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = MLP(dims)
        self.proj = nn.Linear(dims[-1], a.out, bias=False)

    def forward(self, x):
        feats = F.gelu(self.body(x))
        return feats, self.proj(feats)


def collapse_metric(feats):
    """Mean squared off-diagonal cosine similarity of the first metric_rows rows."""
    f = F.normalize(feats[:a.metric_rows].float(), dim=1)
    sim = f @ f.T
    n = sim.shape[0]
    return (sim.pow(2).sum() - n) / (n * (n - 1))


torch.manual_seed(a.seed)
model = Net().cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=True)
torch.manual_seed(a.seed + rank)
x = torch.randn(a.rows, dims[0], device="cuda")
losses = torch.zeros(a.steps, device="cuda")
metrics = torch.zeros(a.steps, device="cuda")
clock = StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            feats, out = ddp(x)
            loss = out.float().pow(2).mean()
        if rank == a.metric_rank and (not a.fixed or step % a.metric_every == 0):
            with nvtx("metrics"), torch.no_grad():
                metrics[step] = collapse_metric(feats.detach())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
clock.end(f", rank {rank} of {world}, metric on rank {a.metric_rank} every {a.metric_every if a.fixed else 1} steps")
if rank == a.metric_rank:
    print("first metric", float(metrics[0]))
dist.destroy_process_group()
