"""Shared pieces of the aisp profile workloads: an MLP, NVTX step ranges, argument parsing.

Every workload runs STEPS training steps, each wrapped in an NVTX range `step_N` (the convention
aisp's iteration detection and steady-state window use), after the same model setup, so the
captures differ only in the planted problem.
"""
import argparse
import contextlib

import torch
import torch.nn as nn


def args(default_steps=30):
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=default_steps)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--width", type=int, default=4096)
    return p.parse_args()


def mlp(width, layers=8, dtype=torch.float32):
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(layers)]).cuda().to(dtype)


@contextlib.contextmanager
def nvtx(name):
    torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()
