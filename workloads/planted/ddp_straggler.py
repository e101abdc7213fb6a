"""4-rank DDP (torchrun --nproc_per_node=4) with a compute straggler: rank 2 trains on 1.75x the rows of
the others (more GEMM work), everything else equal (bf16 autocast, fp32 parameters, fused AdamW, DDP
defaults). The other ranks wait for rank 2 at every step's all-reduces.

--fixed: the same global batch spread evenly: every rank gets (world - 1 + slow_factor) / world x the rows
(the rebalancing fix; the total work is unchanged). NVTX: step_N.
"""
import torch

from common import MLP, StepClock, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=16384, help="rows per rank")
p.add_argument("--dims", default="1024,2048,4096,4096,4096,4096,1024")
p.add_argument("--slow-rank", type=int, default=2)
p.add_argument("--slow-factor", type=float, default=1.75)
p.add_argument("--fixed", action="store_true", help="the same global batch, equal rows on every rank")
a = parse(p)

dist, rank, world, local = init_distributed()
dims = [int(v) for v in a.dims.split(",")]
if a.fixed:
    rows = int(a.rows * (world - 1 + a.slow_factor) / world)
else:
    rows = a.rows if rank != a.slow_rank else int(a.rows * a.slow_factor)
torch.manual_seed(a.seed)
model = MLP(dims).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=True)
torch.manual_seed(a.seed + rank)
x = torch.randn(rows, dims[0], device="cuda")
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
clock.end(f", rank {rank} rows {rows}")
dist.destroy_process_group()
