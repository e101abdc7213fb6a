"""Planted problem: a host synchronization every iteration (`loss.item()` for logging, plus a
`torch.cuda.synchronize()` to "time" the step). Expected: host_sync_every_iteration and
cuda_api_sync; the GPU drains at the end of every step."""
import time
import torch
from common import args, mlp, nvtx

a = args()
model = mlp(a.width, layers=4)
opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
x = torch.randn(a.batch, a.width, device="cuda")
for step in range(a.steps):
    with nvtx(f"step_{step}"):
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with nvtx("log"):
            value = loss.item()  # device-to-host copy + stream sync
            torch.cuda.synchronize()
            # CPU-side work that now cannot overlap GPU work.
            _ = sum(i * i for i in range(20000))
        if step % 10 == 0:
            print(f"step {step} loss {value:.4f} {1e3 * (time.perf_counter() - t0):.2f} ms")
