"""Sequence classifier whose hand-written collate moves every sample to the GPU on its own: each step
takes 256 samples from a host dataset of per-sample tensors (features 32 x 512 fp32, 64 KB, and an int64
class label), calls .to("cuda") on each tensor of each sample (512 small copies from pageable memory,
each one a cudaMemcpyAsync followed by a stream synchronisation), then torch.stack()s them on the GPU.
On the GPU: a 3-layer GELU MLP of width 8192 on the 8192 tokens under bf16 autocast, mean pooling per
sample, a 10-class head, cross-entropy, fused AdamW. No host sync besides the copies. NVTX: step_N >
collate / train.

--fixed: the host stacks the step's samples into one pinned buffer (torch.stack(out=...), double
buffered) and copies it with one non_blocking copy on a side stream, a step ahead (prefetch); the host
stays at most one step ahead (event sync on the previous step).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--samples", type=int, default=256, help="samples per step")
p.add_argument("--seq", type=int, default=32)
p.add_argument("--features", type=int, default=512)
p.add_argument("--width", type=int, default=8192)
p.add_argument("--layers", type=int, default=3, help="hidden layers of the MLP")
p.add_argument("--classes", type=int, default=10)
p.add_argument("--dataset", type=int, default=1024, help="samples in the host dataset")
p.add_argument("--fixed", action="store_true", help="collate into one pinned buffer, one async copy, prefetched")
a = parse(p)

# A map-style dataset of per-sample host tensors (pageable), as a Dataset.__getitem__ would return them.
gen = torch.Generator().manual_seed(a.seed)
dataset = [(torch.randn(a.seq, a.features, generator=gen), torch.randint(0, a.classes, (), generator=gen))
           for _ in range(a.dataset)]


def sample_ids(step):
    return [(step * a.samples + i * 7) % a.dataset for i in range(a.samples)]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = MLP([a.features] + [a.width] * a.layers + [a.features])
        self.head = nn.Linear(a.features, a.classes, bias=False)

    def forward(self, x):  # x: (samples, seq, features)
        return self.head(self.body(x).mean(dim=1))


torch.manual_seed(a.seed)
model = Net().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)


def train(x, y):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def collate_naive(ids):
    """Every tensor of every sample to the GPU on its own, then stacked there."""
    xs = [dataset[i][0].to("cuda") for i in ids]
    ys = [dataset[i][1].to("cuda") for i in ids]
    return torch.stack(xs), torch.stack(ys)


if a.fixed:
    copy_stream = torch.cuda.Stream()
    pin_x = [torch.empty(a.samples, a.seq, a.features).pin_memory() for _ in range(2)]
    pin_y = [torch.empty(a.samples, dtype=torch.int64).pin_memory() for _ in range(2)]
    ready = [torch.cuda.Event() for _ in range(2)]
    consumed = [torch.cuda.Event() for _ in range(2)]

    def prefetch(step):
        j = step % 2
        if step >= 2:
            consumed[j].synchronize()  # the copy out of this pinned buffer two steps ago has finished
        ids = sample_ids(step)
        torch.stack([dataset[i][0] for i in ids], out=pin_x[j])
        torch.stack([dataset[i][1] for i in ids], out=pin_y[j])
        with torch.cuda.stream(copy_stream):
            dev = (pin_x[j].to("cuda", non_blocking=True), pin_y[j].to("cuda", non_blocking=True))
            ready[j].record(copy_stream)
            consumed[j].record(copy_stream)
        return dev

losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
throttle, clock = Throttle(1 if a.fixed else 0), StepClock(a)
nxt = prefetch(0) if a.fixed else None
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with nvtx("collate"):
            if a.fixed:
                x, y = nxt
                cur = torch.cuda.current_stream()
                cur.wait_event(ready[step % 2])
                x.record_stream(cur)
                y.record_stream(cur)
            else:
                x, y = collate_naive(sample_ids(step))
        with nvtx("train"):
            losses[step] = train(x, y)
        if a.fixed:
            nxt = prefetch(step + 1)  # the next batch's host stacking and copy overlap this step's compute
        del x, y
        throttle.step_done()
clock.end(f", {'one pinned prefetched copy' if a.fixed else 'per-sample pageable copies'}")
print("final loss", float(losses[-1]))
