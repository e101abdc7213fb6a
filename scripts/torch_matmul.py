#!/usr/bin/env python3
"""Time torch.matmul on one GPU the way aisp times cuBLAS: random inputs
uniform in [-1, 1), warm-up, CUDA events around each product, median.

Prints one JSON object: {"size", "dtype", "median_ms", "tflop_per_s", ...}.
Used by scripts/bench-verify.sh for the "cuBLAS BF16 8192^3 >= 97% of
PyTorch" bar, measured side by side with aisp in the same job.
"""
import argparse
import json
import statistics
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32", "tf32"])
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--budget-s", type=float, default=2.0)
    ap.add_argument("--device", type=int, default=0)
    args = ap.parse_args()

    dev = torch.device("cuda", args.device)
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}[args.dtype]
    n = args.size
    a = (torch.rand(n, n, device=dev) * 2 - 1).to(dtype)
    b = (torch.rand(n, n, device=dev) * 2 - 1).to(dtype)
    c = torch.empty(n, n, device=dev, dtype=dtype)

    # Correctness on a few entries against float64 (same criterion as aisp).
    torch.matmul(a, b, out=c)
    torch.cuda.synchronize(dev)
    rows = torch.randint(0, n, (64,), device=dev)
    cols = torch.randint(0, n, (64,), device=dev)
    ref = (a[rows].double() * b[:, cols].t().double()).sum(dim=1)
    got = c[rows, cols].double()
    rel_err = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))

    for _ in range(args.warmup):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize(dev)

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    samples = []
    began = time.monotonic()
    while len(samples) < 10 or time.monotonic() - began < args.budget_s:
        start.record()
        torch.matmul(a, b, out=c)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
        if len(samples) >= 2000:
            break
    med = statistics.median(samples)
    flops = 2.0 * n * n * n
    print(
        json.dumps(
            {
                "tool": "torch.matmul",
                "torch_version": torch.__version__,
                "cuda_version": torch.version.cuda,
                "device_name": torch.cuda.get_device_name(dev),
                "size": n,
                "dtype": args.dtype,
                "median_ms": med,
                "min_ms": min(samples),
                "repetitions": len(samples),
                "tflop_per_s": flops / (med / 1e3) / 1e12,
                "rel_err_sampled": rel_err,
            }
        )
    )


if __name__ == "__main__":
    main()
