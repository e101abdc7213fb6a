"""GPU-busy MLP training step in fp32 with TF32 off: cuBLAS runs every GEMM on CUDA cores (FFMA SGEMM,
~52 TFLOP/s on an H100) instead of tensor cores. Fused Adam; the loss is read back every step with
.item() (a host sync, harmless here: the GPU step is ~30 ms). No NVTX ranges at all: iterations must be
found from the kernel pattern.

--fixed: TF32 on (torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32).
"""
import torch

from common import MLP, StepClock, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=4096)
p.add_argument("--width", type=int, default=4096)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--fixed", action="store_true", help="allow TF32 tensor cores for fp32 GEMMs")
a = parse(p)

# The legacy switches only (mixing them with the newer fp32_precision API makes PyTorch >= 2.9 complain).
torch.backends.cuda.matmul.allow_tf32 = a.fixed
torch.backends.cudnn.allow_tf32 = a.fixed

model = MLP([a.width] * (a.layers + 1)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
x = torch.randn(a.rows, a.width, device="cuda")
clock = StepClock(a)
losses = []
for step in range(a.steps):
    clock.at(step)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses.append(loss.item())
clock.end(f", tf32 {'on' if a.fixed else 'off'}")
print("final loss", losses[-1])
