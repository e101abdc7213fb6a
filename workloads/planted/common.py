"""Shared pieces of the planted workloads (issue 31/32): arguments, seeding, NVTX step ranges, a host
throttle that never starves the GPU, a bias-free MLP, the 20-op fp32 elementwise chain (eager and fused
in one Triton kernel), and the DDP set-up.

Every program here is self-contained apart from this file. Arguments come from the command line and,
when the current folder holds `run_args.json` (a JSON list of strings), from that file first: the
capture script uses it so that the command line nsys records (`python3 train.py`) does not name the
workload or its variant.
"""
import argparse
import collections
import contextlib
import json
import os
import random
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

ARGS_FILE = "run_args.json"


def parser(doc, steps=30, warmup=3):
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--steps", type=int, default=steps, help="steps in all, warm-up included")
    p.add_argument("--warmup", type=int, default=warmup, help="the first steps are warm-up (lazy init, cuBLAS handles, allocator)")
    p.add_argument("--seed", type=int, default=0)
    return p


def parse(p):
    extra = []
    if os.path.isfile(ARGS_FILE):
        with open(ARGS_FILE) as f:
            extra = [str(a) for a in json.load(f)]
    a = p.parse_args(extra + sys.argv[1:])
    if a.steps <= a.warmup:
        p.error(f"--steps ({a.steps}) must exceed --warmup ({a.warmup})")
    random.seed(a.seed)
    torch.manual_seed(a.seed)
    torch.cuda.manual_seed_all(a.seed)
    return a


@contextlib.contextmanager
def nvtx(name, on=True):
    if on:
        torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        if on:
            torch.cuda.nvtx.range_pop()


class Throttle:
    """Keeps the host at most `depth` steps ahead of the GPU without ever leaving it idle: after queuing
    step N it waits for the end of step N-depth, so step N is still queued when the host wakes up.
    depth=0 turns it off (the host runs as far ahead as CUDA's launch queue lets it)."""

    def __init__(self, depth=1):
        self.depth = depth
        self.pending = collections.deque()

    def step_done(self):
        if self.depth <= 0:
            return
        ev = torch.cuda.Event()
        ev.record()
        self.pending.append(ev)
        while len(self.pending) > self.depth:
            self.pending.popleft().synchronize()


class MLP(nn.Module):
    """Bias-free Linear layers of widths dims[0] -> dims[1] -> ... with GELU between them (none after
    the last)."""

    def __init__(self, dims):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=False) for a, b in zip(dims, dims[1:]))

    def forward(self, x):
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < last:
                x = F.gelu(x)
        return x


# ---------------------------------------------------------------------------------------------------
# The 20-op elementwise chain: 20 separate fp32 kernels in eager mode, one read and one write each.
# Values stay bounded for any input (the comments give the range after each op for x ~ N(0, 1)).
CHAIN_OPS = 20


def chain_eager(x):
    y = x * 0.5
    y = y + 0.25
    y = y.abs()                 # >= 0
    y = y + 1e-3                # >= 0.001
    y = y.sqrt()
    y = y * 1.5
    y = y - 0.75                # >= -0.70
    y = torch.sigmoid(y)        # (0, 1)
    y = y * 2.0
    y = y - 1.0                 # (-1, 1)
    y = torch.square(y)         # [0, 1)
    y = y + 0.5                 # [0.5, 1.5)
    y = y.clamp_min(0.6)        # [0.6, 1.5)
    y = y.exp()                 # [1.82, 4.49)
    y = y * 0.3
    y = y.neg()
    y = y + 2.0                 # (0.65, 1.46]
    y = y.reciprocal()
    y = y * 0.7
    y = y.clamp_max(1.0)        # [0.48, 1.0]
    return y


# Triton is imported at module level: a @triton.jit kernel resolves names such as `tl` through its
# module's globals, so the kernels below live at module level too.
try:
    import triton
    import triton.language as tl
except ImportError:  # the eager paths need no Triton
    triton = tl = None

if triton is not None:
    @triton.jit
    def fused_pointwise_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        y = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = y * 0.5
        y = y + 0.25
        y = tl.abs(y)
        y = y + 1e-3
        y = tl.sqrt(y)
        y = y * 1.5
        y = y - 0.75
        y = tl.sigmoid(y)
        y = y * 2.0
        y = y - 1.0
        y = y * y
        y = y + 0.5
        y = tl.maximum(y, 0.6)
        y = tl.exp(y)
        y = y * 0.3
        y = -y
        y = y + 2.0
        y = 1.0 / y
        y = y * 0.7
        y = tl.minimum(y, 1.0)
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def chain_fused(x, out_dtype=torch.float32):
    """The same 20 ops in one Triton kernel: reads x once, writes the result once (in out_dtype, so a
    following cast is fused too)."""
    assert triton is not None, "the fused variant needs Triton"
    assert x.is_contiguous() and x.dtype == torch.float32
    y = torch.empty(x.shape, device=x.device, dtype=out_dtype)
    n = x.numel()
    block = 2048
    fused_pointwise_kernel[((n + block - 1) // block,)](x, y, n, BLOCK=block, num_warps=8)
    return y


def check_chain(out_dtype=torch.float32, n=1 << 20):
    """The fused chain equals the eager one (within fp32 rounding of approximate sqrt/exp/div) on a
    small input; run once before the steps so that the check costs the capture nothing."""
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(n, device="cuda", generator=g)
    ref = chain_eager(x).to(out_dtype)
    got = chain_fused(x, out_dtype)
    tol = dict(rtol=1e-4, atol=1e-5) if out_dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-3)
    torch.testing.assert_close(got, ref, **tol)
    print(f"fused chain matches eager ({n} elements, {out_dtype})", flush=True)


# ---------------------------------------------------------------------------------------------------
# Distributed set-up (torchrun). NVLink multicast stays off in every multi-GPU run.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def init_distributed():
    for k, v in MULTICAST_OFF.items():
        os.environ[k] = v  # before the first communicator exists; the capture script sets them too
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return dist, dist.get_rank(), dist.get_world_size(), local


def report(a, t0_event, t1_event, extra=""):
    """One line at the end: the mean GPU step over the steady steps (CUDA events recorded on the
    compute stream before the first steady step and after the last step). The line names no workload:
    the capture's own output should not give the answer away."""
    torch.cuda.synchronize()
    steady = max(a.steps - a.warmup, 1)
    ms = t0_event.elapsed_time(t1_event) / steady
    print(f"steady steps {steady}, mean step {ms:.3f} ms (CUDA events){extra}", flush=True)
    return ms


class StepClock:
    """CUDA events around the steady steps: call at() at the top of every step and end() after the loop."""

    def __init__(self, a):
        self.a = a
        self.t0 = torch.cuda.Event(enable_timing=True)
        self.t1 = torch.cuda.Event(enable_timing=True)

    def at(self, step):
        if step == self.a.warmup:
            self.t0.record()

    def end(self, extra=""):
        self.t1.record()
        return report(self.a, self.t0, self.t1, extra)
