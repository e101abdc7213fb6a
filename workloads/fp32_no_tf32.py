"""Planted problem: fp32 GEMMs with TF32 disabled, so cuBLAS runs them on CUDA cores (FFMA kernels
such as sm80_xmma_gemm_f32f32_..._ffma_...) instead of tensor cores. Expected:
fp32_gemm_on_cuda_cores at high or above, and kernels classified gemm_simt_fp32."""
import torch
from common import args, mlp, nvtx

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")

a = args(default_steps=20)
model = mlp(a.width, layers=4)
opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
x = torch.randn(a.batch * 2, a.width, device="cuda")
for step in range(a.steps):
    with nvtx(f"step_{step}"):
        loss = model(x).pow(2).mean()  # full fp32, no autocast
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
