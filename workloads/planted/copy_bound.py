"""Copy-bound loop: every step copies its fp32 batch (8192 x 8192, 268 MB) from pageable host memory
(x.to("cuda"): staged through the driver's bounce buffer, synchronous with the host and serialized with
compute), then trains a small bf16 MLP on it (fused AdamW). The copy is well over half of the step.

--fixed: the host batches are pinned, and the next batch is copied with non_blocking=True on a side
stream while the current step computes (prefetch; the compute stream waits on an event). NVTX: step_N.
"""
import torch

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=8192)
p.add_argument("--width", type=int, default=8192)
p.add_argument("--head", type=int, default=256)
p.add_argument("--pool", type=int, default=4, help="distinct host batches, cycled")
p.add_argument("--fixed", action="store_true", help="pinned batches, copied one step ahead on a side stream")
a = parse(p)

model = MLP([a.width, a.width, a.width, a.head]).cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
# Host batches made on the GPU and brought back once (fast), pageable by default.
host = [torch.randn(a.rows, a.width, device="cuda").cpu() for _ in range(a.pool)]
if a.fixed:
    host = [t.pin_memory() for t in host]
torch.cuda.synchronize()

copy_stream = torch.cuda.Stream()


def prefetch(i):
    """Start copying batch i on the side stream; returns the device tensor and its ready event."""
    with torch.cuda.stream(copy_stream):
        xd = host[i % a.pool].to("cuda", non_blocking=True)
        ev = torch.cuda.Event()
        ev.record(copy_stream)
    return xd, ev


def compute(xd):
    loss = model(xd.to(torch.bfloat16)).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1 if a.fixed else 0), StepClock(a)
nxt = prefetch(0) if a.fixed else None
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        if a.fixed:
            xd, ready = nxt
            torch.cuda.current_stream().wait_event(ready)
            xd.record_stream(torch.cuda.current_stream())
            nxt = prefetch(step + 1)  # overlaps with this step's compute
        else:
            xd = host[step % a.pool].to("cuda")  # pageable: blocks the host until the copy is done
        losses[step] = compute(xd)
        del xd
        throttle.step_done()
clock.end(f", {'pinned prefetch' if a.fixed else 'pageable blocking copy'}")
print("final loss", float(losses[-1]))
