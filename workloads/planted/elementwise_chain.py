"""GPU-busy loop whose time goes to an unfused elementwise chain: 20 separate fp32 kernels (mul, add,
abs, sqrt, sigmoid, exp, reciprocal, clamps...) over a 512 MiB tensor, each reading and writing it
once, next to a little bf16 GEMM work. The host stays one step ahead (event sync on the previous step),
so the GPU never waits for it.

--fixed: the same 20 ops in one hand-written Triton kernel (one read, one write), checked against the
eager chain before the steps. NVTX: step_N.
"""
import torch

from common import CHAIN_OPS, StepClock, Throttle, chain_eager, chain_fused, check_chain, nvtx, parse, parser

p = parser(__doc__, steps=40)
p.add_argument("--numel-log2", type=int, default=27, help="chain tensor: 2**N fp32 elements (27: 512 MiB)")
p.add_argument("--gemm-n", type=int, default=4096)
p.add_argument("--gemms", type=int, default=6, help="bf16 n x n x n products per step")
p.add_argument("--fixed", action="store_true", help="fuse the chain into one Triton kernel")
a = parse(p)

x = torch.randn(1 << a.numel_log2, device="cuda")
n = a.gemm_n
h0 = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
w = (torch.randn(n, n, device="cuda") / n ** 0.5).to(torch.bfloat16)
sums = torch.zeros(a.steps, device="cuda")
if a.fixed:
    check_chain(torch.float32)
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        y = chain_fused(x) if a.fixed else chain_eager(x)
        h = h0
        for _ in range(a.gemms):
            h = h @ w
        sums[step] = h[0, 0].float() + y[0]
        del y, h
        throttle.step_done()
clock.end(f", chain of {CHAIN_OPS} ops {'fused' if a.fixed else 'eager'}")
print("checksum", float(sums.sum()))
