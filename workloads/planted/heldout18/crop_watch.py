"""Training of a crop-type segmentation CNN on satellite tiles: 128 tiles per step of 4 bands (R, G, B, NIR) x 512 x
512 uint8 (134 MB per batch), normalized on the GPU, a strided convolutional encoder (4 -> 32 patchify 4x4/4, 32 ->
64 -> 128 3x3/2, two 128 3x3 convolutions, BatchNorm + ReLU) and a 1x1 classifier over 12 crop classes at 1/16
resolution, bf16 autocast, channels-last, fused AdamW. Labels are synthetic and resident on the GPU.
The host-side loader's 8 decoder threads write each batch from a pool of decoded tiles (two 134 MB batches in host
memory, standing in for the decoder's output; NumPy copies without the GIL), 16 tiles each. Its "zero-copy" staging:
every step it allocates a fresh NumPy array for the batch, has the threads fill it, page-locks it with
cudaHostRegister (torch.cuda.cudart()), copies it to the GPU, waits for the copy (the stream), unregisters it and
drops it.
NVTX: step_N > data / forward / backward / optimizer.

--fixed: two pinned staging buffers allocated once (torch.empty(pin_memory=True)) and reused in turn: the loader
fills the free one, the copy is issued non_blocking, no per-step registration and no wait for the copy.
"""
import concurrent.futures as cf
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=128, help="tiles per step")
p.add_argument("--bands", type=int, default=4)
p.add_argument("--tile", type=int, default=512, help="pixels per side")
p.add_argument("--classes", type=int, default=12)
p.add_argument("--fixed", action="store_true", help="reuse two pinned staging buffers")
a = parse(p)

SHAPE = (a.batch, a.bands, a.tile, a.tile)
NBYTES = int(np.prod(SHAPE))
rng = np.random.default_rng(a.seed)
decoded = [rng.integers(0, 256, size=SHAPE, dtype=np.uint8) for _ in range(2)]  # the decoder's output, in turn
cudart = torch.cuda.cudart()
decoders = cf.ThreadPoolExecutor(max_workers=8)


def fill(dst, src):
    """The decoder threads: each writes its share of the tiles into dst."""
    cuts = np.linspace(0, len(src), 9).astype(int)
    list(decoders.map(lambda k: np.copyto(dst[cuts[k]:cuts[k + 1]], src[cuts[k]:cuts[k + 1]]), range(8)))


def conv_bn(cin, cout, k, s):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride=s, padding=(k - s + 1) // 2 if k > s else 0, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


model = nn.Sequential(conv_bn(a.bands, 32, 4, 4), conv_bn(32, 64, 3, 2), conv_bn(64, 128, 3, 2),
                      conv_bn(128, 128, 3, 1), conv_bn(128, 128, 3, 1), nn.Conv2d(128, a.classes, 1))
model = model.cuda().to(memory_format=torch.channels_last)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
out_side = a.tile // 16
labels = [torch.randint(0, a.classes, (a.batch, out_side, out_side), device="cuda", generator=g) for _ in range(2)]
mean = torch.tensor([90.0, 100.0, 80.0, 120.0][: a.bands], device="cuda").view(1, -1, 1, 1)
std = torch.tensor([40.0, 40.0, 40.0, 50.0][: a.bands], device="cuda").view(1, -1, 1, 1)
pinned = [torch.empty(SHAPE, dtype=torch.uint8, pin_memory=True) for _ in range(2)] if a.fixed else None
losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
print(f"crop segmentation CNN, {a.batch} tiles of {a.bands} x {a.tile} x {a.tile} uint8 ({NBYTES / 1e6:.0f} MB) per "
      f"step, staging {'two reused pinned buffers' if a.fixed else 'registered per step'}", flush=True)


def load(step):
    """The loader: returns the batch as a GPU uint8 tensor."""
    src = decoded[step % 2]
    if a.fixed:
        buf = pinned[step % 2]  # free: the throttle has waited for the step that last read it
        fill(buf.numpy(), src)
        return buf.to("cuda", non_blocking=True)
    host = np.empty(SHAPE, dtype=np.uint8)
    fill(host, src)
    ptr = host.ctypes.data
    err = cudart.cudaHostRegister(ptr, NBYTES, 0)
    if int(err) != 0:
        raise RuntimeError(f"cudaHostRegister failed: {err}")
    x = torch.from_numpy(host).to("cuda", non_blocking=True)
    torch.cuda.current_stream().synchronize()  # the copy must finish before the pages are unlocked
    cudart.cudaHostUnregister(ptr)
    del host
    return x


throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with nvtx("data"):
            raw = load(step)
        with nvtx("forward"):
            x = ((raw.float() - mean) / std).contiguous(memory_format=torch.channels_last)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
            loss = F.cross_entropy(logits.float(), labels[step % 2])
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("last loss", float(losses[-1]))
