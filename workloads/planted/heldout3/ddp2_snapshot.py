"""Data-parallel training (torchrun --nproc_per_node=2; runs with any rank count) of a bias-free GELU MLP
1024 -> 4096 -> 4096 -> 1024 (25.2 M fp32 parameters) under bf16 autocast, DDP with default buckets, fused AdamW,
131072 rows per rank per step (equal on every rank, resident on the GPU). After every optimizer step rank 0 alone
refreshes a host copy of the weights (read by an evaluation process / kept as a fault-tolerance snapshot): each
parameter is copied into a preallocated, reused pageable CPU tensor with a plain copy_, i.e. a blocking
device-to-host copy of ~101 MB on rank 0's compute stream with its host thread waiting. The other ranks go on to
their next forward and backward and wait inside their first all-reduce until rank 0 catches up.
NVTX: step_N > forward / backward / optimizer (/ snapshot on rank 0).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch

from common import MLP, StepClock, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=131072, help="rows per rank")
p.add_argument("--dims", default="1024,4096,4096,1024")
p.add_argument("--snapshot-rank", type=int, default=0, help="the rank that keeps the host copy of the weights")
a = parse(p)

dist, rank, world, local = init_distributed()
dims = [int(v) for v in a.dims.split(",")]
torch.manual_seed(a.seed)
model = MLP(dims).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=True)
torch.manual_seed(a.seed + rank)
x = torch.randn(a.rows, dims[0], device="cuda")
snapshot = rank == a.snapshot_rank
host = [torch.empty(q.shape, dtype=q.dtype) for q in model.parameters()] if snapshot else []  # pageable, reused
losses = torch.zeros(a.steps, device="cuda")
clock = StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = ddp(x).float().pow(2).mean()
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        if snapshot:
            with nvtx("snapshot"), torch.no_grad():
                for h, q in zip(host, model.parameters()):
                    h.copy_(q)
clock.end(f", rank {rank} of {world}")
if snapshot:
    print("snapshot checksum", float(sum(h.double().abs().sum() for h in host)))
dist.destroy_process_group()
