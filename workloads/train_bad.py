# train_good.py with deliberate problems, for the capture and analysis rules:
# - fp32 GEMMs with TF32 off (CUDA-core SIMT GEMMs instead of tensor cores),
# - pageable host batches copied synchronously (no pin_memory, no non_blocking),
# - a host sync every step (loss.item() for logging),
# - a per-parameter Adam (foreach=False, not fused): many tiny kernels,
# - the same 5 ms CPU stall in `data`.
import time, torch, torch.nn as nn
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
model = nn.Sequential(*[nn.Sequential(nn.Linear(2048, 2048), nn.GELU()) for _ in range(8)]).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False, fused=False)
batches = [torch.randn(512, 2048) for _ in range(4)]
for step in range(40):
    torch.cuda.nvtx.range_push(f"step_{step}")
    torch.cuda.nvtx.range_push("data")
    time.sleep(0.005)
    x = batches[step % 4].cuda()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("forward")
    loss = model(x).pow(2).mean()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("backward")
    loss.backward()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("optimizer")
    opt.step(); opt.zero_grad(set_to_none=True)
    torch.cuda.nvtx.range_pop()
    print(f"step {step} loss {loss.item():.6f}")
    torch.cuda.nvtx.range_pop()
print("final loss", loss.item())
