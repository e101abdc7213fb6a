"""4-rank data parallelism done by hand with fully exposed communication: no DDP; after the backward,
one torch.distributed.all_reduce (AVG) per parameter tensor (weights and biases), one after another on
the compute stream (synchronous collectives run on the current stream), so no transfer overlaps any
compute. bf16 autocast, fp32 parameters, fused AdamW.

--fixed: DistributedDataParallel with its default 25 MB buckets (all-reduces overlapped with the
backward), gradient_as_bucket_view=True. NVTX: step_N.
"""
import torch

from common import StepClock, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=4096, help="rows per rank")
p.add_argument("--dims", default="1024,8192,8192,8192,8192,8192")
p.add_argument("--fixed", action="store_true", help="DDP, overlapped bucketed all-reduce")
a = parse(p)

dist, rank, world, local = init_distributed()
dims = [int(v) for v in a.dims.split(",")]
torch.manual_seed(a.seed)
model = torch.nn.Sequential()
for i, (din, dout) in enumerate(zip(dims, dims[1:])):
    model.append(torch.nn.Linear(din, dout, bias=True))
    if i < len(dims) - 2:
        model.append(torch.nn.GELU())
model = model.cuda()
if a.fixed:
    net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local], gradient_as_bucket_view=True)
else:
    net = model
    for prm in model.parameters():  # same start on every rank, as DDP would broadcast
        dist.broadcast(prm.data, src=0)
opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)
torch.manual_seed(a.seed + rank)
x = torch.randn(a.rows, dims[0], device="cuda")
losses = torch.zeros(a.steps, device="cuda")
clock = StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = net(x).float().pow(2).mean()
        loss.backward()
        if not a.fixed:
            for prm in model.parameters():
                dist.all_reduce(prm.grad, op=dist.ReduceOp.AVG)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
clock.end(f", rank {rank}")
dist.destroy_process_group()
