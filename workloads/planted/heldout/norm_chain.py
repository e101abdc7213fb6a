"""Inference loop (no autograd) of a 6-layer SwiGLU MLP stack with a hand-written RMSNorm in eager
PyTorch: each norm is 8 kernels (cast to fp32, pow, mean, add eps, rsqrt, mul, cast back, weight mul),
plus an unfused silu * up and the residual add, next to bf16 GEMMs. The host never syncs and the loop
has NO NVTX ranges: iterations must be found from the kernel pattern.

--fixed: two hand-written Triton kernels, residual add + RMSNorm in one pass per row and silu * up in
one pass, checked against the eager ops before the loop.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--tokens", type=int, default=8192)
p.add_argument("--d-model", type=int, default=4096)
p.add_argument("--ffn", type=int, default=6144)
p.add_argument("--layers", type=int, default=6)
p.add_argument("--fixed", action="store_true", help="fused add+RMSNorm and silu*mul (Triton)")
a = parse(p)
EPS = 1e-6


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.float32)
        var = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(var + EPS)
        return self.weight * h.to(dtype)


class Layer(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.norm = RMSNorm(d)
        self.gate = nn.Linear(d, f, bias=False)
        self.up = nn.Linear(d, f, bias=False)
        self.down = nn.Linear(f, d, bias=False)


layers = nn.ModuleList(Layer(a.d_model, a.ffn) for _ in range(a.layers))
final = RMSNorm(a.d_model)
with torch.no_grad():  # non-trivial norm weights, so that a wrong fused kernel shows
    for m in list(layers) + [final]:
        nrm = m.norm if isinstance(m, Layer) else m
        nrm.weight.uniform_(0.5, 1.5)
layers, final = layers.cuda().to(torch.bfloat16), final.cuda().to(torch.bfloat16)


def forward_eager(x):
    for l in layers:
        n = l.norm(x)
        x = x + l.down(F.silu(l.gate(n)) * l.up(n))
    return final(x)


try:  # module level: a @triton.jit kernel resolves `tl` through its module's globals
    import triton
    import triton.language as tl
except ImportError:  # the eager variant needs no Triton
    triton = tl = None

if triton is not None:
    @triton.jit
    def add_rmsnorm_kernel(x_ptr, d_ptr, w_ptr, res_ptr, out_ptr, n_cols, eps, HAS_DELTA: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_DELTA:
            dl = tl.load(d_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
            s = (x + dl).to(tl.bfloat16)  # the residual, rounded as eager bf16 rounds it
            tl.store(res_ptr + row * n_cols + cols, s, mask=mask)
            x = s.to(tl.float32)
        var = tl.sum(x * x, axis=0) / n_cols
        h = (x * tl.rsqrt(var + eps)).to(tl.bfloat16).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * n_cols + cols, (w * h).to(tl.bfloat16), mask=mask)

    @triton.jit
    def silu_mul_kernel(g_ptr, u_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        s = (g * tl.sigmoid(g)).to(tl.bfloat16).to(tl.float32)
        tl.store(out_ptr + offs, (s * u).to(tl.bfloat16), mask=mask)


def add_rmsnorm(x, delta, w):
    """(x + delta, rmsnorm(x + delta) * w) in one pass; delta None: (x, rmsnorm(x) * w)."""
    rows, cols = x.shape
    out = torch.empty_like(x)
    res = torch.empty_like(x) if delta is not None else x
    add_rmsnorm_kernel[(rows,)](x, delta if delta is not None else x, w, res, out, cols, EPS,
                                HAS_DELTA=delta is not None, BLOCK=triton.next_power_of_2(cols), num_warps=8)
    return res, out


def silu_mul(g, u):
    out = torch.empty_like(g)
    n = g.numel()
    silu_mul_kernel[((n + 4095) // 4096,)](g, u, out, n, BLOCK=4096, num_warps=8)
    return out


def forward_fused(x):
    delta = None
    for l in layers:
        x, n = add_rmsnorm(x, delta, l.norm.weight)
        delta = l.down(silu_mul(l.gate(n), l.up(n)))
    return add_rmsnorm(x, delta, final.weight)[1]


torch.manual_seed(a.seed)
x = torch.randn(a.tokens, a.d_model, device="cuda", dtype=torch.bfloat16)
forward = forward_fused if a.fixed else forward_eager
with torch.inference_mode():
    if a.fixed:
        small = x[:256].contiguous()
        f, e = forward_fused(small).float(), forward_eager(small).float()
        rel = float((f - e).norm() / e.norm())
        assert rel < 1e-2, f"fused and eager differ: relative error {rel:.3g}"
        print(f"fused norm/activation match eager (relative error {rel:.2e})", flush=True)
    sums = torch.zeros(a.steps, device="cuda")
    clock = StepClock(a)
    for step in range(a.steps):
        clock.at(step)
        out = forward(x)
        sums[step] = out[0, 0].float()
    clock.end(f", norm/activation {'fused' if a.fixed else 'eager'}")
print("checksum", float(sums.sum()))
