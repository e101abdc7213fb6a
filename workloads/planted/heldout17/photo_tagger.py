"""Training a small vision transformer that tags 32 x 32 photo thumbnails (100 tags): 4 x 4 patches (64 patches and a
class token), width 384, 8 pre-LN blocks (6 heads of 64 through F.scaled_dot_product_attention, a GELU MLP of 1536,
biases), a final LayerNorm and a linear head on the class token; bf16 autocast over fp32 weights, cross-entropy, fused
AdamW; 1024 images per step. The images come from a torch.utils.data.DataLoader over an in-memory uint8 dataset (20,000
thumbnails; per image a random crop out of a 4-pixel reflect padding and a random horizontal flip in NumPy), batch
1024, 4 worker processes (fork), pin_memory=True; the batch is copied non_blocking and normalized on the GPU; the host
kept one step ahead by an event sync on the previous step.
The training loop takes each batch through a helper written for a notebook, `next(iter(loader))`: every step builds a
new DataLoader iterator, i.e. forks 4 worker processes and starts a pin-memory thread, hands the workers their first
8 index batches, waits for the first batch, and, when the iterator is dropped at the end of the call, waits for the
workers to finish the batch each is on and joins them.
NVTX: step_N > data / forward / backward / optimizer.

--fixed: one iterator kept across steps (a new one only when an epoch ends), so the 4 workers stay up and prefetch.
"""
import os
import sys
import warnings

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from common import StepClock, Throttle, nvtx, parse, parser

warnings.filterwarnings("ignore", category=DeprecationWarning)  # fork() of a multi-threaded process (Python >= 3.12)


class Thumbnails(Dataset):
    """uint8 HWC thumbnails in memory; __getitem__ does the usual crop / flip augmentation in NumPy."""

    def __init__(self, n, size, classes, seed):
        rng = np.random.default_rng(seed)
        self.x = rng.integers(0, 256, size=(n, size, size, 3), dtype=np.uint8)
        self.y = rng.integers(0, classes, size=n)
        self.size = size

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        s = self.size
        img = np.pad(self.x[i], ((4, 4), (4, 4), (0, 0)), mode="reflect")
        r, c = np.random.randint(0, 9, size=2)
        img = img[r:r + s, c:c + s]
        if np.random.rand() < 0.5:
            img = img[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), int(self.y[i])


class Block(nn.Module):
    def __init__(self, d, nh, f):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, f)
        self.fc2 = nn.Linear(f, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.nh, d // self.nh).permute(2, 0, 3, 1, 4).unbind(0)
        o = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(o.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self, a):
        super().__init__()
        d = a.d_model
        n = (a.image // a.patch) ** 2
        self.patch = nn.Conv2d(3, d, a.patch, a.patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, a.heads, a.ffn) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, a.classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x[:, 0]))


def main():
    p = parser(__doc__, steps=14)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--images", type=int, default=20000, help="thumbnails in the dataset")
    p.add_argument("--image", type=int, default=32)
    p.add_argument("--patch", type=int, default=4)
    p.add_argument("--d-model", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--ffn", type=int, default=1536)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--fixed", action="store_true", help="keep one DataLoader iterator across steps")
    a = parse(p)

    ds = Thumbnails(a.images, a.image, a.classes, a.seed)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, pin_memory=True,
                        drop_last=True, multiprocessing_context=mp.get_context("fork"))

    def next_batch():  # the notebook helper: a fresh iterator (workers forked, then torn down) on every call
        return next(iter(loader))

    torch.manual_seed(a.seed)
    with torch.device("cuda"):
        model = ViT(a)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05, fused=True)
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1) * 255.0
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1) * 255.0
    losses = torch.zeros(a.steps, device="cuda")
    torch.cuda.synchronize()
    print(f"ViT {a.blocks} x {a.d_model} on {a.image} x {a.image} thumbnails, batch {a.batch}, {a.workers} loader "
          f"workers, {'one iterator kept' if a.fixed else 'a new iterator every step'}", flush=True)

    it = iter(loader) if a.fixed else None
    throttle, clock = Throttle(1), StepClock(a)
    for step in range(a.steps):
        clock.at(step)
        with nvtx(f"step_{step}"):
            with nvtx("data"):
                if a.fixed:
                    try:
                        x, y = next(it)
                    except StopIteration:
                        it = iter(loader)
                        x, y = next(it)
                else:
                    x, y = next_batch()
                x = x.cuda(non_blocking=True)
                y = y.cuda(non_blocking=True)
                x = (x.float() - mean) / std
            with nvtx("forward"):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = F.cross_entropy(model(x), y)
            with nvtx("backward"):
                loss.backward()
            with nvtx("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            losses[step] = loss.detach()
            throttle.step_done()
    clock.end()
    print("loss first/last", float(losses[0]), float(losses[-1]))
    del it


if __name__ == "__main__":
    main()
