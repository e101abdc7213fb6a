"""Training loop with planted problems (default) or fixed (--fixed).

A patch-MLP classifier (24 blocks of LayerNorm + Linear(512, 512) + GELU, bf16 autocast) trained on
images of 3x256x256. NVTX: `step_N` > `data`, `forward`, `backward`, `optimizer`.

Planted (default):
  1. per-parameter Adam (foreach=False, fused=False): ~100 parameters, about ten tiny kernels each,
     launched one by one in the `optimizer` region: a tiny-kernel storm the GPU waits on;
  2. a large host-to-device copy every step, blocking (non_blocking=False, pinned source) and
     serialised with compute: 100 MB of fp32 pixels copied each step although the GPU could hold
     the data set (or take uint8 pixels, 4x fewer bytes, on a side stream).
Fixed (--fixed): fused Adam; the batches are copied to the GPU once before the loop.
"""
import argparse

import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--fixed", action="store_true")
p.add_argument("--steps", type=int, default=30)
p.add_argument("--batch", type=int, default=128)
a = p.parse_args()

PATCH, W, DEPTH = 16, 512, 24


class PatchMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3 * PATCH * PATCH, W)
        self.blocks = nn.Sequential(*[nn.Sequential(nn.LayerNorm(W), nn.Linear(W, W), nn.GELU()) for _ in range(DEPTH)])
        self.head = nn.Linear(W, 10)

    def forward(self, img):
        b = img.shape[0]
        x = img.unfold(2, PATCH, PATCH).unfold(3, PATCH, PATCH)  # b, 3, 16, 16, P, P
        x = x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, 3 * PATCH * PATCH)
        return self.head(self.blocks(self.embed(x)).mean(1))


def nvtx(name):
    torch.cuda.nvtx.range_push(name)


def pop():
    torch.cuda.nvtx.range_pop()


torch.manual_seed(0)
model = PatchMLP().cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=a.fixed, foreach=False)
n_batches = 4
host = [torch.randn(a.batch, 3, 256, 256).pin_memory() for _ in range(n_batches)]
labels = torch.randint(0, 10, (a.batch,), device="cuda")
if a.fixed:
    resident = [h.cuda() for h in host]
torch.cuda.synchronize()

for step in range(a.steps):
    nvtx(f"step_{step}")
    nvtx("data")
    if a.fixed:
        img = resident[step % n_batches]
    else:
        img = host[step % n_batches].to("cuda", non_blocking=False)
    pop()
    nvtx("forward")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(img).float(), labels)
    pop()
    nvtx("backward")
    loss.backward()
    pop()
    nvtx("optimizer")
    opt.step()
    opt.zero_grad(set_to_none=True)
    pop()
    pop()
torch.cuda.synchronize()
print("done", "fixed" if a.fixed else "planted", float(loss))
