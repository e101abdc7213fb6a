"""Batch inference of a channel-mixing encoder for a 1-D signal (bf16): x arrives channel-first, (batch 8,
channels 2048, time 2048), from the signal frontend; 8 residual pointwise projections C -> C, each written as
`torch.addmm(h, h, W)` (the residual folded into the GEMM) on the time-major view. Each layer converts the
channel-first tensor to time-major with `x.permute(0, 2, 1).contiguous()` before its GEMM and back with another
`.permute(0, 2, 1).contiguous()` after it, so every layer makes two full transposed copies of the activations.
The output is reduced to one score on the GPU. Inputs resident on the GPU (two batches used alternately); the host
kept one batch ahead by an event sync on the previous batch.
NVTX: step_N > forward.

--fixed: the frontend's output is kept time-major ((batch x time) x channels) and every layer works on it in
place of the permuted copies: no transposes at all.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=40)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--channels", type=int, default=2048)
p.add_argument("--time", type=int, default=2048)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--fixed", action="store_true", help="time-major layout throughout, no permuted copies")
a = parse(p)

torch.manual_seed(a.seed)
bf = torch.bfloat16
B, C, T = a.batch, a.channels, a.time
weights = [(torch.randn(C, C, device="cuda") * (0.5 * C ** -0.5)).to(bf) for _ in range(a.layers)]
g = torch.Generator(device="cuda").manual_seed(a.seed)
if a.fixed:
    batches = [torch.randn(B * T, C, device="cuda", generator=g, dtype=bf) for _ in range(2)]
else:
    batches = [torch.randn(B, C, T, device="cuda", generator=g, dtype=bf) for _ in range(2)]
torch.cuda.synchronize()

scores = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        x = batches[step % len(batches)]
        with nvtx(f"step_{step}"):
            with nvtx("forward"):
                for w in weights:
                    if a.fixed:
                        x = torch.addmm(x, x, w)
                    else:
                        h = x.permute(0, 2, 1).contiguous().view(B * T, C)
                        h = torch.addmm(h, h, w)
                        x = h.view(B, T, C).permute(0, 2, 1).contiguous()
                scores[step] = x.mean(dtype=torch.float32)
        throttle.step_done()
clock.end()
print("score first/last", float(scores[0]), float(scores[-1]))
