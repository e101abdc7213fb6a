"""Collectives of known sizes on one GPU (torch.distributed, nccl, world_size=1), for aisp's
message-size readers. --kineto OUT.json: record with torch.profiler instead (run outside nsys).
Writes the sizes used to manifest.json (per call: collective, dtype, elements, bytes)."""
import json, os, sys
import torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29533")
os.environ.setdefault("RANK", "0"); os.environ.setdefault("WORLD_SIZE", "1"); os.environ.setdefault("LOCAL_RANK", "0")
dev = torch.device("cuda:0"); torch.cuda.set_device(dev)
dist.init_process_group("nccl", device_id=dev)
AVG = "--avg" in sys.argv  # one-rank reductions that make NCCL launch a kernel (AVG / PREMUL_SUM scale on the GPU)
PLAN = [("all_reduce_avg", torch.float32, 1048576), ("all_reduce_premul", torch.bfloat16, 524288),
        ("all_reduce", torch.float32, 262144)] if AVG else [  # (collective, dtype, elements)
    ("all_reduce", torch.float32, 1048576),
    ("all_gather", torch.bfloat16, 524288),
    ("broadcast", torch.float16, 262144),
    ("reduce_scatter", torch.float32, 131072),
    ("all_to_all", torch.float32, 65536),
]
def one(kind, dt, n):
    x = torch.ones(n, dtype=dt, device=dev)
    if kind == "all_reduce": dist.all_reduce(x)
    elif kind == "all_reduce_avg": dist.all_reduce(x, op=dist.ReduceOp.AVG)
    elif kind == "all_reduce_premul": dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.5))
    elif kind == "all_gather":
        out = torch.empty(n * dist.get_world_size(), dtype=dt, device=dev); dist.all_gather_into_tensor(out, x)
    elif kind == "broadcast": dist.broadcast(x, 0)
    elif kind == "reduce_scatter":
        out = torch.empty(n // dist.get_world_size(), dtype=dt, device=dev); dist.reduce_scatter_tensor(out, x)
    elif kind == "all_to_all":
        out = torch.empty_like(x); dist.all_to_all_single(out, x)
a = torch.randn(2048, 2048, device=dev)
def step(i):
    torch.cuda.nvtx.range_push(f"step_{i}")
    for _ in range(4): a @ a
    for kind, dt, n in PLAN: one(kind, dt, n)
    torch.cuda.synchronize(); torch.cuda.nvtx.range_pop()
for i in range(2): step(i)  # warm-up (communicator init)
STEPS = 3
if "--kineto" in sys.argv:
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as p:
        for i in range(STEPS): step(i); p.step()
    p.export_chrome_trace(sys.argv[sys.argv.index("--kineto") + 1])
else:
    torch.cuda.cudart().cudaProfilerStart()
    for i in range(STEPS): step(i)
    torch.cuda.cudart().cudaProfilerStop()
man = {"world_size": 1, "steps_profiled": STEPS, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
       "torch": torch.__version__,
       "calls": [{"collective": k, "dtype": str(d).replace("torch.", ""), "elements": n,
                  "bytes": n * torch.tensor([], dtype=d).element_size()} for k, d, n in PLAN]}
json.dump(man, open(os.environ.get("MANIFEST", "manifest.json"), "w"), indent=1)
dist.destroy_process_group()
print("ok", man["nccl"])
