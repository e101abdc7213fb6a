"""A training loop whose host side is dominated by one Python function, profiled with stacks.

`build_features` turns each batch's token ids into bag-of-words counts in pure Python (a dict per
row): the planted top self-time frame. The model step itself is small.

  python3 flame_stacks.py --out DIR

Writes DIR/flame.kineto.json (torch.profiler with with_stack=True, 2 active steps).
With --seconds S it runs the same loop for S seconds without torch.profiler and writes nothing: the
workload for Nsight Systems CPU sampling (`nsys profile -s process-tree --backtrace=dwarf`).
"""
import time
import argparse
import os

import numpy as np

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

p = argparse.ArgumentParser()
p.add_argument("--out", default=".")
p.add_argument("--seconds", type=float, default=0.0)
a = p.parse_args()

VOCAB = 256


def build_features(rows):
    """Pure-Python bag of words: slow on purpose."""
    out = []
    for ids in rows:
        counts = {}
        for t in ids:
            counts[t] = counts.get(t, 0) + 1
        out.append([counts.get(v, 0) for v in range(VOCAB)])
    return out


def make_batch(rng):
    rows = rng.integers(0, VOCAB, (32, 64)).tolist()  # one call: ids are cheap, features are not
    return torch.tensor(build_features(rows), dtype=torch.float32)


def train_step(model, opt, x):
    loss = model(x.cuda(non_blocking=True)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def main():
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(VOCAB, 1024), nn.ReLU(), nn.Linear(1024, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    if a.seconds > 0:
        end = time.perf_counter() + a.seconds
        while time.perf_counter() < end:
            train_step(model, opt, make_batch(rng))
            torch.cuda.synchronize()
        return
    sched = schedule(wait=1, warmup=1, active=2, repeat=1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 with_stack=True) as prof:
        for _ in range(4):
            train_step(model, opt, make_batch(rng))
            torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(os.path.join(a.out, "flame.kineto.json"))


if __name__ == "__main__":
    main()
