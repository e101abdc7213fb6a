"""Healthy: the whole bf16 training step (forward, backward, fused capturable Adam) captured once in a
CUDA graph and replayed every step; static input buffer refilled by a device-to-device copy from a pool
of batches resident on the GPU. One graph launch per step, so the CPU runs far ahead; the GPU is busy
with large GEMMs. Nothing planted: the truth is "nothing above low". NVTX: step_N.
"""
import torch

from common import MLP, StepClock, nvtx, parse, parser

p = parser(__doc__, steps=40)
p.add_argument("--rows", type=int, default=4096)
p.add_argument("--width", type=int, default=8192)
p.add_argument("--layers", type=int, default=3)
p.add_argument("--head", type=int, default=256)
a = parse(p)

model = MLP([a.width] * (a.layers + 1) + [a.head]).cuda().to(torch.bfloat16)
opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True, capturable=True)
pool = [torch.randn(a.rows, a.width, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
static_x = pool[0].clone()


def train_step():
    loss = model(static_x).float().pow(2).mean()
    loss.backward()
    opt.step()
    return loss


# Warm up on a side stream (allocations, cuBLAS workspaces, optimizer state), then capture.
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        train_step()
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(graph):
    static_loss = train_step()
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
clock = StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        static_x.copy_(pool[step % len(pool)])
        graph.replay()
        losses[step] = static_loss.detach()
clock.end(", one graph launch per step")
print("final loss", float(losses[-1]))
