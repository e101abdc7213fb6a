"""torch.compile with a planted graph break and a planted recompilation, under torch.profiler.

The model's forward reads a tensor value into Python (`.item()`) to pick a branch: Dynamo cannot
trace a data-dependent Python branch, so it breaks the graph there (two compiled graphs instead of
one). The batch size then changes from 64 to 96, which recompiles the graphs (reason: a size
mismatch at index 0). Run with the logs on:

  TORCH_LOGS=graph_breaks,recompiles python3 compile_graph_break.py --out DIR 2> DIR/compile.log

Writes DIR/compile.kineto.json (every step, the first compile included) and prints per-step times.
"""
import argparse
import os
import time

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

p = argparse.ArgumentParser()
p.add_argument("--out", default=".")
p.add_argument("--steps", type=int, default=8)
p.add_argument("--no-profiler", action="store_true", help="run without its own profiler (under aisp_profile_torch)")
a = p.parse_args()


class Gated(nn.Module):
    def __init__(self, width=1024):
        super().__init__()
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.up(self.norm(x)))
        # Planted graph break: a Python branch on a tensor's value.
        if h.mean().item() > 0.0:
            h = h * 2.0
        return x + self.down(h)


torch.manual_seed(0)
model = Gated().cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
compiled = torch.compile(model)


def step(batch):
    x = torch.randn(batch, 1024, device="cuda")
    loss = compiled(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


import contextlib

with (contextlib.nullcontext() if a.no_profiler else profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])) as prof:
    for i in range(a.steps):
        batch = 64 if i < a.steps // 2 else 96  # planted recompilation halfway
        t0 = time.perf_counter()
        with torch.profiler.record_function(f"step_{i}"):
            step(batch)
        print(f"step {i} batch {batch}: {1e3 * (time.perf_counter() - t0):.1f} ms", flush=True)
if prof is not None:
    prof.export_chrome_trace(os.path.join(a.out, "compile.kineto.json"))
try:
    from torch._dynamo.utils import compile_times

    print(compile_times(repr="str", aggregate=True), flush=True)
except Exception as e:  # the helper's signature changed between releases
    print(f"compile_times unavailable: {e}", flush=True)
