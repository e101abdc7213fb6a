"""Batch inference of a feature projector (bf16): x (8192 x 4096) -> Linear 4096 -> 16384 -> GELU -> a frozen
16384 x 16384 projection -> Linear 16384 -> 4096, the output reduced to one score per row on the GPU. The
frozen projection (537 MB of bf16) was "offloaded" to pinned host memory to save GPU memory, as one would on a
small card, and is copied to the GPU with `.to("cuda", non_blocking=True)` at every batch on the compute stream,
right before the GEMM that reads it. Inputs resident on the GPU (two batches used alternately); the host kept one
batch ahead by an event sync on the previous batch.
NVTX: step_N > upload / forward.

--fixed: the projection is moved to the GPU once before the loop and stays there (no per-batch copy).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--tokens", type=int, default=8192)
p.add_argument("--d-in", type=int, default=4096)
p.add_argument("--width", type=int, default=16384)
p.add_argument("--fixed", action="store_true", help="the frozen projection stays on the GPU")
a = parse(p)

torch.manual_seed(a.seed)
bf = torch.bfloat16
w_in = (torch.randn(a.width, a.d_in, device="cuda") * a.d_in ** -0.5).to(bf)
w_out = (torch.randn(a.d_in, a.width, device="cuda") * a.width ** -0.5).to(bf)
w_frozen_host = (torch.randn(a.width, a.width) * a.width ** -0.5).to(bf).pin_memory()
w_frozen_gpu = w_frozen_host.to("cuda") if a.fixed else None
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [torch.randn(a.tokens, a.d_in, device="cuda", generator=g, dtype=bf) for _ in range(2)]
torch.cuda.synchronize()

scores = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        x = batches[step % len(batches)]
        with nvtx(f"step_{step}"):
            with nvtx("upload"):
                w = w_frozen_gpu if a.fixed else w_frozen_host.to("cuda", non_blocking=True)
            with nvtx("forward"):
                h = F.gelu(F.linear(x, w_in))
                h = F.linear(h, w)
                out = F.linear(h, w_out)
                scores[step] = out.float().pow(2).mean()
        throttle.step_done()
clock.end()
print("score first/last", float(scores[0]), float(scores[-1]))
