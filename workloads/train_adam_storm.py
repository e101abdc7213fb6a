"""Training loop with planted problems (default) or fixed (--fixed).

A patch-MLP classifier (24 blocks of LayerNorm + Linear(512, 512) + GELU, bf16 autocast) trained on
images of 3x256x256. NVTX: `step_N` > `data`, `forward`, `backward`, `optimizer`.

Planted (default):
  1. per-parameter Adam (foreach=False, fused=False): ~100 parameters, about ten tiny kernels each,
     launched one by one in the `optimizer` region: a tiny-kernel storm the GPU waits on;
  2. a large host-to-device copy every step, blocking (non_blocking=False, pinned source) and
     serialised with compute: 100 MB of fp32 pixels copied each step although the GPU could hold
     the data set (or take uint8 pixels, 4x fewer bytes, on a side stream).
Fixed (--fixed): fused Adam (capturable); the batches are copied to the GPU once before the loop, and
the whole step (forward, backward, optimizer) is captured once in a CUDA graph and replayed: with 24
small layers, the backward alone launches ~200 kernels of a few microseconds each, so even with a fused
optimizer the eager step is launch-bound; the graph removes the launches.
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
opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=a.fixed, foreach=False, capturable=a.fixed)
n_batches = 4
host = [torch.randn(a.batch, 3, 256, 256).pin_memory() for _ in range(n_batches)]
labels = torch.randint(0, 10, (a.batch,), device="cuda")


def train_step(img):
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
        loss = nn.functional.cross_entropy(model(img).float(), labels)
    loss.backward()
    opt.step()
    return loss


if a.fixed:
    resident = [h.cuda() for h in host]
    static_img = resident[0].clone()
    # Warm up on a side stream (allocator pools, cuBLAS workspaces), then capture one whole step.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            train_step(static_img)
    torch.cuda.current_stream().wait_stream(side)
    opt.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = train_step(static_img)
torch.cuda.synchronize()

for step in range(a.steps):
    if a.fixed:
        nvtx(f"step_{step}")
        nvtx("data")
        static_img.copy_(resident[step % n_batches], non_blocking=True)
        pop()
        nvtx("graph")
        graph.replay()
        pop()
        pop()
        loss = static_loss
        continue
    nvtx(f"step_{step}")
    nvtx("data")
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
