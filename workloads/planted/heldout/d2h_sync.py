"""Training step that copies its fp32 outputs (8192 x 4096, 134 MB) back to the host every step for
metrics with out.cpu(): a device-to-host copy into pageable memory, synchronous with the host and
serialized after the step's compute; the host then reads a value from it. bf16 MLP, fused AdamW,
batch resident on the GPU. NVTX: step_N.

--fixed: two pinned host buffers; each step's outputs are copied with non_blocking=True on a side
stream (overlapping the next step's compute) and read one step later, after that copy's event.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch

from common import MLP, StepClock, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=8192)
p.add_argument("--dims", default="4096,8192,8192,4096")
p.add_argument("--fixed", action="store_true", help="pinned double buffer, async copy read a step later")
a = parse(p)

dims = [int(v) for v in a.dims.split(",")]
model = MLP(dims).cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
x = torch.randn(a.rows, dims[0], device="cuda", dtype=torch.bfloat16)
copy_stream = torch.cuda.Stream()
bufs = [torch.empty(a.rows, dims[-1], dtype=torch.float32, pin_memory=True) for _ in range(2)] if a.fixed else []
copied = [torch.cuda.Event() for _ in range(2)]
stats = []
clock = StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        out = model(x).float()
        loss = out.pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        preds = out.detach()
        if a.fixed:
            j = step % 2
            ready = torch.cuda.Event()
            ready.record()
            with torch.cuda.stream(copy_stream):
                copy_stream.wait_event(ready)
                bufs[j].copy_(preds, non_blocking=True)
                copied[j].record(copy_stream)
            preds.record_stream(copy_stream)
            if step > 0:  # the previous step's copy has had a whole step to finish
                copied[1 - j].synchronize()
                stats.append(float(bufs[1 - j][0, 0]))
        else:
            host = preds.cpu()  # pageable, blocking: waits for the step, then copies
            stats.append(float(host[0, 0]))
        del out, preds
clock.end(f", {'pinned async' if a.fixed else 'pageable blocking'} output copy")
print("last stat", stats[-1])
