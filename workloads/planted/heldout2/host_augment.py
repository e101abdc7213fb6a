"""Image-patch classifier trained with the batch prepared on the host, in the training loop's own thread:
every step draws 128 uint8 images (112 x 112 x 3) from a host pool and augments them with NumPy (random
96 x 96 crop, horizontal flip of about half, conversion to float32, per-channel normalisation, HWC -> CHW),
then copies the float32 batch (14 MB) to the GPU with a plain .cuda() (pageable). The loss is logged with
loss.item() at the end of every step, so the GPU has finished and waits, idle, through the whole host
preparation of the next batch. On the GPU: 8 x 8 patches (144 tokens of 192), a 4-layer GELU MLP of
width 4096 under bf16 autocast, mean pooling, a 100-class head, cross-entropy, fused AdamW.
NVTX: step_N > data / train.

--fixed: the augmentation runs on the GPU: the host only gathers the raw uint8 images of the next step
into a pinned buffer (double-buffered) and starts their non_blocking copy on a side stream before waiting
on loss.item(); crop, flip, conversion and normalisation are torch ops on the GPU (checked against the
NumPy path before the steps).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import MLP, StepClock, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--batch", type=int, default=128)
p.add_argument("--pool", type=int, default=512, help="images in the host pool")
p.add_argument("--raw", type=int, default=112, help="raw image side")
p.add_argument("--crop", type=int, default=96)
p.add_argument("--patch", type=int, default=8)
p.add_argument("--width", type=int, default=4096)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--classes", type=int, default=100)
p.add_argument("--fixed", action="store_true", help="augment on the GPU; pinned, prefetched uint8 input")
a = parse(p)

B, R, C, P = a.batch, a.raw, a.crop, a.patch
rng = np.random.default_rng(a.seed)
images = rng.integers(0, 256, size=(a.pool, R, R, 3), dtype=np.uint8)
labels = rng.integers(0, a.classes, size=a.pool).astype(np.int64)
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32) * 255.0
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32) * 255.0


def draw(step):
    """The step's sample: image indices, one crop offset for the batch, which images to flip."""
    r = np.random.default_rng((a.seed, step))
    idx = r.integers(0, a.pool, size=B)
    top, left = (int(v) for v in r.integers(0, R - C + 1, size=2))
    flip = r.random(B) < 0.5
    return idx, top, left, flip


def augment_numpy(raw, top, left, flip):
    """raw: (n, R, R, 3) uint8 -> (n, 3, C, C) float32, normalised."""
    x = raw[:, top:top + C, left:left + C, :].copy()
    x[flip] = x[flip, :, ::-1, :]
    x = x.astype(np.float32)
    x -= MEAN
    x /= STD
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


mean_d = torch.tensor(MEAN, device="cuda").view(1, 3, 1, 1)
std_d = torch.tensor(STD, device="cuda").view(1, 3, 1, 1)


def augment_gpu(raw, top, left, flip):
    """The same on the GPU: raw (n, R, R, 3) uint8 on the device, flip a bool tensor on the device."""
    x = raw[:, top:top + C, left:left + C, :]
    x = torch.where(flip.view(-1, 1, 1, 1), x.flip(2), x)
    x = x.permute(0, 3, 1, 2).float()
    return ((x - mean_d) / std_d).contiguous()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = MLP([3 * P * P] + [a.width] * a.layers)
        self.head = nn.Linear(a.width, a.classes, bias=False)

    def forward(self, x):
        n = x.shape[0]
        g = C // P
        tokens = x.view(n, 3, g, P, g, P).permute(0, 2, 4, 1, 3, 5).reshape(n, g * g, 3 * P * P)
        h = F.gelu(self.body(tokens))  # MLP leaves the last layer without GELU: one more here
        return self.head(h.mean(dim=1))


torch.manual_seed(a.seed)
model = Net().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)


def train(x, y):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


if a.fixed:
    # Check the GPU augmentation against NumPy on a few images.
    idx, top, left, flip = draw(10_000)
    ref = augment_numpy(images[idx[:8]], top, left, flip[:8])
    got = augment_gpu(torch.from_numpy(images[idx[:8]]).cuda(), top, left, torch.from_numpy(flip[:8]).cuda()).cpu().numpy()
    err = float(np.abs(got - ref).max())
    assert err < 1e-4, f"GPU augmentation differs from NumPy: max abs error {err:.3g}"
    print(f"GPU augmentation matches NumPy (max abs error {err:.1e})", flush=True)

    copy_stream = torch.cuda.Stream()
    pin_x = [torch.empty(B, R, R, 3, dtype=torch.uint8).pin_memory() for _ in range(2)]
    pin_y = [torch.empty(B, dtype=torch.int64).pin_memory() for _ in range(2)]
    pin_f = [torch.empty(B, dtype=torch.bool).pin_memory() for _ in range(2)]
    ready = [torch.cuda.Event() for _ in range(2)]
    offsets = [None, None]

    def prefetch(step):
        """Gather step's raw images into pinned buffer step % 2 and copy them on the side stream."""
        j = step % 2
        idx, top, left, flip = draw(step)
        np.take(images, idx, axis=0, out=pin_x[j].numpy(), mode="clip")
        pin_y[j].numpy()[:] = labels[idx]
        pin_f[j].numpy()[:] = flip
        offsets[j] = (top, left)
        with torch.cuda.stream(copy_stream):
            dev = (pin_x[j].to("cuda", non_blocking=True), pin_y[j].to("cuda", non_blocking=True),
                   pin_f[j].to("cuda", non_blocking=True))
            ready[j].record(copy_stream)
        return dev

torch.cuda.synchronize()
log = []
clock = StepClock(a)
nxt = prefetch(0) if a.fixed else None
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with nvtx("data"):
            if a.fixed:
                j = step % 2
                raw_d, y, flip_d = nxt
                cur = torch.cuda.current_stream()
                cur.wait_event(ready[j])
                for t in (raw_d, y, flip_d):
                    t.record_stream(cur)
                x = augment_gpu(raw_d, *offsets[j], flip_d)
            else:
                idx, top, left, flip = draw(step)
                x = torch.from_numpy(augment_numpy(images[idx], top, left, flip)).cuda()
                y = torch.from_numpy(labels[idx]).cuda()
        with nvtx("train"):
            loss = train(x, y)
        if a.fixed:
            nxt = prefetch(step + 1)  # host gather + async copy while the GPU trains
        log.append(loss.item())
clock.end(f", augmentation on the {'GPU (pinned prefetch)' if a.fixed else 'host (NumPy, in the loop)'}")
print("final loss", log[-1])
