"""A training loop starved by its DataLoader: each sample costs ~1.5 ms of Python/NumPy work in
the workers, two workers feed batches of 32, and the GPU step takes a few milliseconds, so the
loop waits on data most of every step. pin_memory is on (a pin-memory thread in the main process).

  python3 dataloader_bound.py --out DIR [--nvtx [--emit-nvtx]] [--workers N] [--sample-ms MS]
                               [--prefetch N] [--steps N]

Writes DIR/dataloader.kineto.json (torch.profiler, schedule wait 2 / warmup 2 / active 8 steps).
With --nvtx every step is an NVTX range `step_N` (for Nsight Systems captures) and no Kineto trace
is written; --emit-nvtx also runs the loop under torch.autograd.profiler.emit_nvtx(), so every
record_function scope (operators, and the DataLoader's `enumerate(DataLoader)#...__next__`) is an
NVTX range too. A healthy variant: `--workers 4 --sample-ms 0.2 --prefetch 4 --gpu-ms 15` (a
batch every ~1.6 ms against a step of ~17 ms).
"""
import contextlib
import argparse
import os
import time

import numpy as np
import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--out", default=".")
p.add_argument("--nvtx", action="store_true")
p.add_argument("--steps", type=int, default=12)
p.add_argument("--emit-nvtx", action="store_true")
p.add_argument("--workers", type=int, default=2)
p.add_argument("--sample-ms", type=float, default=1.5)
p.add_argument("--prefetch", type=int, default=2)
p.add_argument("--gpu-ms", type=float, default=0.0)
a = p.parse_args()


class SlowImages(Dataset):
    """Synthetic images with an expensive per-sample decode-and-augment step on the CPU."""

    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        img = rng.random((3, 96, 96), dtype=np.float32)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < a.sample_ms / 1e3:  # decode + augment stand-in, ~1.5 ms of CPU
            img = np.flip(img, axis=2).copy()
        return torch.from_numpy(img), i % 10


def main():
    loader = DataLoader(SlowImages(), batch_size=32, num_workers=a.workers, pin_memory=True,
                        prefetch_factor=a.prefetch, persistent_workers=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 96 * 96, 2048), nn.ReLU(), nn.Linear(2048, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()

    def train_step(x, y):
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if a.gpu_ms > 0:  # a heavier model's step: the GPU busy this long more (no host work)
            torch.cuda._sleep(int(a.gpu_ms * 1e-3 * clock_hz))

    clock_hz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 1_980_000) * 1e3  # kHz -> Hz
    it = iter(loader)
    if a.nvtx:
        ranges = torch.autograd.profiler.emit_nvtx() if a.emit_nvtx else contextlib.nullcontext()
        with ranges:
            for s in range(a.steps):
                torch.cuda.nvtx.range_push(f"step_{s}")
                x, y = next(it)
                train_step(x, y)
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
        return
    sched = schedule(wait=2, warmup=2, active=8, repeat=1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched) as prof:
        for s in range(a.steps):
            x, y = next(it)
            train_step(x, y)
            torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(os.path.join(a.out, "dataloader.kineto.json"))


if __name__ == "__main__":
    main()
