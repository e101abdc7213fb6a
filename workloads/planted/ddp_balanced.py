"""Healthy 4-rank DDP: equal rows on every rank, bf16 autocast, fp32 parameters, fused AdamW, DDP
defaults; the layers next to the input are narrow, so the all-reduce left after the backward is small
and the rest overlaps the backward. Nothing planted: the truth is "nothing above low". NVTX: step_N.
"""
import torch

from common import MLP, StepClock, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=12288, help="rows per rank")
p.add_argument("--dims", default="1024,2048,4096,8192,8192,4096,1024")
a = parse(p)

dist, rank, world, local = init_distributed()
dims = [int(v) for v in a.dims.split(",")]
torch.manual_seed(a.seed)
model = MLP(dims).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=True)
torch.manual_seed(a.seed + rank)
x = torch.randn(a.rows, dims[0], device="cuda")
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
clock.end(f", rank {rank}")
dist.destroy_process_group()
