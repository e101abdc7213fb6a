#!/usr/bin/env python3
"""First-principles truth for the planted workloads: writes manifests/<case>.json and
heldout/manifests/<case>.json from FLOPs, bytes and rate bands alone (no capture, no aisp output).

    python3 workloads/planted/derive.py            # write every manifest, print a summary table
    python3 workloads/planted/derive.py --check    # recompute and fail if a manifest on disk differs

Method. Each case is a small model of one steady step: every kernel class is FLOPs / rate or
bytes / bandwidth, with the rate given as a band (low, high). A quantity's band is its minimum and
maximum over every corner of the bands it uses (each time is linear in 1/rate, so a sum or a
ratio of sums is monotone in each rate and its extremes sit at corners). Shares are "time a fix
removes from the critical path / steady step period" of the device where the problem sits, and the
severity band follows issue 31: info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical.
Where a share band straddles a boundary, `severity` is the band of the band's midpoint and
`severity_range` names both ends.

Bytes count what DRAM must move (reads + writes) for tensors far larger than L2 (50 MB); FLOPs are
2*m*n*k per GEMM. Kernel-launch gaps are neglected where the GPU is kept fed (every GPU-bound case
here launches far less than 1 µs of CPU work per µs of GPU work).
"""
import argparse
import itertools
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------------------------------
# Rate bands. Units: TFLOP/s, TB/s (bytes read + written), GB/s, µs.
RATES_H100 = {
    "bf16_tflops": (650.0, 820.0),
    "tf32_tflops": (330.0, 400.0),
    "sgemm_tflops": (47.0, 55.0),
    "attn_tflops": (300.0, 500.0),
    "hbm_tbs": (2.6, 3.0),
    "h2d_pinned_gbs": (50.0, 56.0),
    "h2d_pageable_gbs": (6.0, 14.0),
    "d2h_pinned_gbs": (50.0, 56.0),
    "d2h_pageable_gbs": (4.0, 14.0),
    "ar_algbw_gbs": (170.0, 230.0),
    "ar_small_us": (15.0, 40.0),
    "sync_gap_us": (50.0, 300.0),
    "ddp_sync_gap_us": (150.0, 800.0),
    "host_sleep_ms": (3.05, 3.25),
    "overlap_penalty": (0.0, 0.15),
}
RATES_H200 = dict(RATES_H100, hbm_tbs=(3.9, 4.4))
RATE_SOURCES = {
    "bf16_tflops": "dense bf16 GEMM as cuBLAS reaches it for shapes >= 2048x4096x4096: 732 (aisp roofline 8192^3, "
                   "BENCHMARKS.md), 769-798 (KINDS.md, H100 and H200 of this pool), 780-820 (2048x4096x4096 nvjet "
                   "kernels in tests/data/workloads/healthy.sqlite); datasheet 989",
    "tf32_tflops": "383 measured (8192^3, BENCHMARKS.md); datasheet 494.7 dense",
    "sgemm_tflops": "51.7 measured (8192^3, BENCHMARKS.md), ~51 in tests/data/workloads/fp32_no_tf32.sqlite "
                    "(1024x4096x4096 FFMA kernels, 670 µs each); datasheet 66.9",
    "attn_tflops": "SDPA causal bf16 forward+backward, counted as 7*B*S^2*d FLOPs per block: an assumption "
                   "(flash/cuDNN kernels reach 50-70 % of 989 forward, less backward)",
    "hbm_tbs": "large elementwise kernels and the fused optimizer: DtoD copy 3.03-3.07 TB/s measured, fused Adam "
               "2.65 TB/s in tests/data/workloads/healthy.sqlite; datasheet 3.35 (H100). H200: 4.3 copy (KINDS.md), "
               "datasheet 4.8",
    "h2d_pinned_gbs": "55.1 measured (aisp hw pcie, BENCHMARKS.md); 54.0 in train_adam_storm.sqlite; PCIe Gen5 x16",
    "h2d_pageable_gbs": "7.9 measured (aisp hw pcie), 7.6 (pinned_memory lesson), 8.2 in pageable_copies.sqlite on "
                        "this pool; 10-25 typical on bare-metal hosts; band widened to 6-14",
    "d2h_pinned_gbs": "55.1 measured (aisp hw pcie)",
    "d2h_pageable_gbs": "11.1 measured into a reused buffer (aisp hw pcie); out.cpu() allocates a fresh pageable "
                        "buffer every step (mmap'd, page-faulted and zeroed during the copy), so the band reaches down to 4",
    "ar_algbw_gbs": "NCCL ring all-reduce, 4 ranks, NVLink 4 through NVSwitch, NVLS off, 16-270 MB messages: "
                    "algbw = busbw * n / (2(n-1)) = busbw * 2/3; busbw 355 GB/s at 1 GiB on 4 H100 of this pool "
                    "(KINDS.md), 253-297 at 64-256 MiB on 2 H200 (BENCHMARKS.md) -> algbw 170-230",
    "ar_small_us": "one small (<= 64 KB) all-reduce through torch.distributed: NCCL latency plus the Python call",
    "sync_gap_us": "GPU idle after a host sync until the next step's first kernel: wake-up, Python and the first "
                   "op's dispatch; PyTorch eager costs 30-100 µs of CPU per op on this pool under nsys (tiny_kernels.sqlite: "
                   "943 kernels in 27-34 ms of CPU per step; healthy.sqlite: 8 AMP layers forward in 1.38 ms)",
    "host_sleep_ms": "time.sleep(0.003) on Linux: 3 ms plus timer slack",
    "ddp_sync_gap_us": "the same gap under DDP: its forward pre-hooks run on the host before the first kernel (an assumption)",
    "overlap_penalty": "compute slowed by NCCL kernels running beside it (SMs and HBM shared), as a fraction of "
                       "the overlapped all-reduce time: an assumption, 0-15 %",
}

BANDS = [(1.0, "info"), (5.0, "low"), (15.0, "medium"), (40.0, "high"), (math.inf, "critical")]


def band(pct):
    for edge, name in BANDS:
        if pct < edge:
            return name
    return "critical"


# ---------------------------------------------------------------------------------------------------
# Interval evaluation over the corners of the rate bands a model uses.
class _Track(dict):
    def __init__(self, d):
        super().__init__(d)
        self.used = set()

    def __getitem__(self, k):
        self.used.add(k)
        return super().__getitem__(k)


def _flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        elif isinstance(v, (int, float)):
            out[key] = float(v)
    return out


def evaluate(model, rates):
    mid = {k: (lo + hi) / 2 for k, (lo, hi) in rates.items()}
    t = _Track(mid)
    model(t)
    keys = sorted(t.used)
    lo, hi = {}, {}
    for combo in itertools.product(*[rates[k] for k in keys]):
        r = dict(mid)
        r.update(zip(keys, combo))
        for k, v in _flat(model(r)).items():
            lo[k] = min(lo.get(k, v), v)
            hi[k] = max(hi.get(k, v), v)
    return {k: (lo[k], hi[k]) for k in lo}, keys


# Time helpers (ms).
def t_flops(flops, tflops):
    return flops / (tflops * 1e12) * 1e3


def t_bytes(nbytes, tbs):
    return nbytes / (tbs * 1e12) * 1e3


def t_link(nbytes, gbs):
    return nbytes / (gbs * 1e9) * 1e3


def mlp_train_flops(rows, dims, input_grad=False):
    """Forward, weight-gradient and input-gradient GEMMs of a bias-free MLP; the first layer's input
    gradient is skipped when the input needs none."""
    f = 0.0
    for i, (a, b) in enumerate(zip(dims, dims[1:])):
        one = 2.0 * rows * a * b
        f += one * (3 if (i > 0 or input_grad) else 2)
    return f


def mlp_params(dims):
    return sum(a * b for a, b in zip(dims, dims[1:]))


def gelu_train_bytes(rows, dims, s):
    """GELU after every layer but the last: forward reads and writes (2s), backward reads the incoming
    gradient and the input and writes the gradient (3s), per element."""
    return 5.0 * s * rows * sum(dims[1:-1])


LOSS_B = 40.0  # bytes per output element: out.float().pow(2).mean() forward (18) and backward (~22)
ADAM_B = {4: 28.0, 2: 14.0}  # fused Adam(W): reads p, g, m, v and writes p, m, v
AMP_B = 12.0  # per fp32 parameter under bf16 autocast: weight cast in forward (r4 w2), grad cast back (r2 w4)
DDP_B = 16.0  # per fp32 gradient, DDP defaults: copy (with 1/world scaling) into the bucket, copy back out


def pct(x, step):
    return 100.0 * x / step


# ---------------------------------------------------------------------------------------------------
# The cases. Each model(r) returns {"c": components (ms), "step": ms, "rm": {problem: ms removed},
# "after": ms predicted after the fix (None if none), plus anything else worth a band}.
CASES = {}


def case(name, **meta):
    def deco(fn):
        CASES[name] = dict(meta, model=fn, name=name)
        return fn
    return deco


# ---- tuned ------------------------------------------------------------------------------------------
EW = dict(numel=1 << 27, gemm_n=4096, gemms=6, steps=40)


def m_elementwise(r, fixed=False):
    N, n, G = EW["numel"], EW["gemm_n"], EW["gemms"]
    chain_bytes = 20 * 8.0 * N
    fused_bytes = 8.0 * N
    c = {"gemm_bf16": t_flops(G * 2.0 * n ** 3, r["bf16_tflops"])}
    if fixed:
        c["chain_fused"] = t_bytes(fused_bytes, r["hbm_tbs"])
    else:
        c["chain_eager_20_kernels"] = t_bytes(chain_bytes, r["hbm_tbs"])
    step = sum(c.values())
    rm = {} if fixed else {"elementwise_unfused": t_bytes(chain_bytes - fused_bytes, r["hbm_tbs"])}
    return {"c": c, "step": step, "rm": rm, "share": {k: pct(v, step) for k, v in rm.items()},
            "after": None if fixed else step - rm["elementwise_unfused"]}


FP = dict(rows=4096, width=4096, layers=4, steps=30)


def m_fp32(r, fixed=False):
    B, W, L = FP["rows"], FP["width"], FP["layers"]
    dims = [W] * (L + 1)
    fl = mlp_train_flops(B, dims)
    rate = r["tf32_tflops"] if fixed else r["sgemm_tflops"]
    c = {"gemm_tf32" if fixed else "gemm_fp32_simt": t_flops(fl, rate)}
    ew = gelu_train_bytes(B, dims, 4) + LOSS_B * B * W + ADAM_B[4] * mlp_params(dims)
    c["elementwise_and_adam"] = t_bytes(ew, r["hbm_tbs"])
    c["item_sync_gap"] = r["sync_gap_us"] / 1e3
    step = sum(c.values())
    rm = {}
    if not fixed:
        rm["fp32_gemm_simt"] = c["gemm_fp32_simt"] * (1 - 66.9 / 494.7)
    return {"c": c, "step": step, "rm": rm, "share": {k: pct(v, step) for k, v in rm.items()},
            "after": None if fixed else step - rm["fp32_gemm_simt"],
            "after_measured_rates": None if fixed else step - c["gemm_fp32_simt"] + t_flops(fl, r["tf32_tflops"])}


GA = dict(rows=8192, width=8192, head=256, steps=20)


def m_gpu_ahead(r, fixed=False):
    B, W, H = GA["rows"], GA["width"], GA["head"]
    N = B * W
    dims = [W, W, W, H]
    c = {}
    if fixed:
        c["chain_fused_to_bf16"] = t_bytes(6.0 * N, r["hbm_tbs"])
    else:
        c["chain_eager_20_kernels"] = t_bytes(20 * 8.0 * N, r["hbm_tbs"])
        c["cast_to_bf16"] = t_bytes(6.0 * N, r["hbm_tbs"])
    c["gemm_bf16"] = t_flops(mlp_train_flops(B, dims), r["bf16_tflops"])
    c["gelu_loss_adam"] = t_bytes(gelu_train_bytes(B, dims, 2) + LOSS_B * B * H + ADAM_B[2] * mlp_params(dims), r["hbm_tbs"])
    step = sum(c.values())
    rm = {} if fixed else {"elementwise_unfused": t_bytes(20 * 8.0 * N, r["hbm_tbs"])}
    return {"c": c, "step": step, "rm": rm, "share": {k: pct(v, step) for k, v in rm.items()},
            "after": None if fixed else step - rm["elementwise_unfused"],
            "chain_share_of_step": 0 if fixed else pct(c["chain_eager_20_kernels"] + c["cast_to_bf16"], step)}


GS = dict(rows=4096, width=8192, layers=3, head=256, steps=40)


def m_graph_step(r):
    B, W, L, H = GS["rows"], GS["width"], GS["layers"], GS["head"]
    dims = [W] * (L + 1) + [H]
    c = {"gemm_bf16": t_flops(mlp_train_flops(B, dims), r["bf16_tflops"]),
         "gelu": t_bytes(gelu_train_bytes(B, dims, 2), r["hbm_tbs"]),
         "loss": t_bytes(LOSS_B * B * H, r["hbm_tbs"]),
         "fused_adam_bf16": t_bytes(ADAM_B[2] * mlp_params(dims), r["hbm_tbs"]),
         "input_copy_dtod": t_bytes(2 * 2.0 * B * W, r["hbm_tbs"])}
    step = sum(c.values())
    head = {"gelu_epilogue_fusion": 0.6 * c["gelu"]}
    return {"c": c, "step": step, "rm": {}, "share": {}, "after": None,
            "headroom_share": {k: pct(v, step) for k, v in head.items()}}


CB = dict(rows=8192, width=8192, head=256, pool=4, steps=30)


def m_copy_bound(r, fixed=False):
    B, W, H = CB["rows"], CB["width"], CB["head"]
    dims = [W, W, W, H]
    nbytes = 4.0 * B * W
    comp = {"cast_to_bf16": t_bytes(6.0 * B * W, r["hbm_tbs"]),
            "gemm_bf16": t_flops(mlp_train_flops(B, dims), r["bf16_tflops"]),
            "gelu_loss_adam": t_bytes(gelu_train_bytes(B, dims, 2) + LOSS_B * B * H + ADAM_B[2] * mlp_params(dims), r["hbm_tbs"])}
    C = sum(comp.values())
    t_pg = t_link(nbytes, r["h2d_pageable_gbs"])
    t_pin = t_link(nbytes, r["h2d_pinned_gbs"])
    c = dict(comp)
    if fixed:
        c["h2d_pinned_overlapped_excess"] = max(0.0, t_pin - C)
        step = sum(c.values())
        return {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "compute": C, "h2d_pinned": t_pin,
                "copy_hidden_margin": C - t_pin}
    c["h2d_pageable"] = t_pg
    c["sync_gap"] = r["sync_gap_us"] / 1e3
    step = sum(c.values())
    after = max(C, t_pin)
    rm = {"copy_bound_pageable": t_pg - t_pin,
          "copy_not_overlapped": min(t_pg, C),
          "combined_fix": step - after}
    return {"c": c, "step": step, "rm": rm, "share": {k: pct(v, step) for k, v in rm.items()},
            "after": after, "copy_share_of_step": pct(t_pg, step), "compute": C, "h2d_pinned": t_pin}


HT = dict(batch=6, seq=1024, d=4096, heads=32, blocks=2, head=256, steps=30)


def m_healthy(r):
    Bt, S, d, nb, H = HT["batch"], HT["seq"], HT["d"], HT["blocks"], HT["head"]
    T = Bt * S
    gemm = nb * 72.0 * T * d * d + 3 * 2.0 * T * d * H
    attn = nb * 7.0 * Bt * S * S * d
    ew = nb * 92.0 * T * d + LOSS_B * T * H
    params = nb * (12.0 * d * d + 4 * d) + d * H
    c = {"gemm_bf16": t_flops(gemm, r["bf16_tflops"]),
         "attention_sdpa": t_flops(attn, r["attn_tflops"]),
         "layernorm_gelu_residual_copies": t_bytes(ew, r["hbm_tbs"]),
         "fused_adam_bf16": t_bytes(ADAM_B[2] * params, r["hbm_tbs"])}
    step = sum(c.values())
    head = {"adjacent_elementwise_fusion": t_bytes(nb * 4 * 2.0 * T * d, r["hbm_tbs"]),
            "gelu_into_gemm_epilogue": t_bytes(nb * 20 * 2.0 * T * d, r["hbm_tbs"])}
    return {"c": c, "step": step, "rm": {}, "share": {}, "after": None,
            "headroom_share": {k: pct(v, step) for k, v in head.items()}}


# ---- DDP timeline -----------------------------------------------------------------------------------
def mlp_forward(r, rows, dims, s=2):
    """Forward GEMMs, GELU forward and the loss of one rank."""
    fl = sum(2.0 * rows * a * b for a, b in zip(dims, dims[1:]))
    ew = 2.0 * s * rows * sum(dims[1:-1]) + 18.0 * rows * dims[-1]
    return t_flops(fl, r["bf16_tflops"]) + t_bytes(ew, r["hbm_tbs"])


def ddp_backward(r, rows, dims, grad_bytes=4.0, bias=False, small_us=0.0):
    """Backward of a bias-free MLP layer by layer (last layer first) with each layer's gradients
    all-reduced in their own bucket as soon as its node ends, one all-reduce at a time (NCCL runs them
    in order on one communicator). Every layer's gradient here is either >= 25 MB (DDP closes a bucket
    on it alone) or the only one left, so one bucket per layer is what DDP builds.
    Returns (backward ms, all-reduce ms left after the backward, all-reduce ms in all)."""
    t = ar_end = total = 0.0
    n = len(dims) - 1
    for i in reversed(range(n)):
        a, b = dims[i], dims[i + 1]
        gemms = 2 if i > 0 else 1
        node = t_flops(gemms * 2.0 * rows * a * b, r["bf16_tflops"])
        if i > 0:  # the GELU in front of this layer: backward reads grad and input, writes grad
            node += t_bytes(3 * 2.0 * rows * a, r["hbm_tbs"])
        t += node
        ar = t_link(grad_bytes * (a * b + (b if bias else 0)), r["ar_algbw_gbs"]) + small_us / 1e3
        total += ar
        ar_end = max(ar_end, t) + ar
    return t, ar_end - t, total


# DDP straggler: rank `slow_rank` gets slow_factor x the rows.
DS = dict(rows=16384, slow_factor=1.75, slow_rank=2, dims=[1024, 2048, 4096, 4096, 4096, 4096, 1024], steps=30)


def m_ddp_straggler(r, fixed=False):
    B, f, dims = DS["rows"], DS["slow_factor"], DS["dims"]
    P = mlp_params(dims)
    # The fix rebalances the same global batch: every rank gets (3 + f) / 4 x the rows.
    balanced = int(B * (3 + f) / 4)
    fast_rows = balanced if fixed else B
    slow_rows = balanced if fixed else int(B * f)
    fast = mlp_forward(r, fast_rows, dims) + ddp_backward(r, fast_rows, dims)[0]
    bwd_slow, tail, ar_total = ddp_backward(r, slow_rows, dims)
    slow = mlp_forward(r, slow_rows, dims) + bwd_slow
    fx = t_bytes((AMP_B + ADAM_B[4] + DDP_B) * P, r["hbm_tbs"])
    step = slow + tail + fx
    bwd_bal, tail_bal, _ = ddp_backward(r, balanced, dims)
    step_balanced = mlp_forward(r, balanced, dims) + bwd_bal + tail_bal + fx
    c = {"forward_backward_fast_ranks": fast, "forward_backward_slow_rank": slow,
         "amp_casts_adam_ddp_copies": fx, "allreduce_left_after_slowest_backward": tail,
         "allreduce_total_overlapped": ar_total}
    if fixed:
        return {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "tail_share": pct(tail, step)}
    wait = slow - fast
    rm = {"straggler_compute": wait}
    return {"c": c, "step": step, "rm": rm, "share": {k: pct(v, step) for k, v in rm.items()},
            "after": step_balanced, "other_ranks_wait": wait}


DX = dict(rows=4096, dims=[1024] + [8192] * 5, steps=30)


def m_ddp_exposed(r, fixed=False):
    B, dims = DX["rows"], DX["dims"]
    L = len(dims) - 1
    P = mlp_params(dims) + sum(dims[1:])  # weights + biases
    fwd = mlp_forward(r, B, dims)
    # bias gradients: one column-sum per layer over the rows (reads rows x width bf16)
    bias_grad = t_bytes(2.0 * B * sum(dims[1:]), r["hbm_tbs"])
    ew = t_bytes((AMP_B + ADAM_B[4]) * P, r["hbm_tbs"])
    if not fixed:
        bwd, _, _ = ddp_backward(r, B, dims)
        weights = sum(t_link(4.0 * a * b, r["ar_algbw_gbs"]) for a, b in zip(dims, dims[1:]))
        biases = L * (t_link(4.0 * 4096, r["ar_algbw_gbs"]) + r["ar_small_us"] / 1e3)
        step = fwd + bwd + bias_grad + ew + weights + biases
        # What an overlapped schedule (DDP buckets) hides: every all-reduce but what is left after the
        # backward when each layer's gradient is reduced as soon as it is ready; the bias all-reduces
        # join their layer's bucket (no per-call latency).
        _, left, _ = ddp_backward(r, B, dims, bias=True)
        hideable = weights + biases - left
        c = {"forward": fwd, "backward": bwd + bias_grad, "amp_casts_adam": ew,
             "allreduce_weights_serial": weights, "allreduce_biases_serial": biases}
        rm = {"exposed_communication": hideable}
        # The fix: DDP (gradient_as_bucket_view=True) adds one scaled copy of each gradient into its
        # bucket, and NCCL kernels running beside the backward slow it a little (0-15 % of the overlap).
        over = weights + biases - left
        after = step - hideable + t_bytes(8.0 * P, r["hbm_tbs"]) + r["overlap_penalty"] * over
        return {"c": c, "step": step, "rm": rm, "share": {k: pct(v, step) for k, v in rm.items()},
                "after": after, "all_nccl_time_share": pct(weights + biases, step)}
    bwd, left, total = ddp_backward(r, B, dims, bias=True)
    c = {"forward": fwd, "backward": bwd + bias_grad, "amp_casts_adam": ew,
         "ddp_bucket_copy": t_bytes(8.0 * P, r["hbm_tbs"]), "allreduce_left_after_backward": left,
         "overlap_slowdown": r["overlap_penalty"] * (total - left)}
    step = sum(c.values())
    return {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "exposed_share": pct(left, step)}


DB = dict(rows=12288, dims=[1024, 2048, 4096, 8192, 8192, 4096, 1024], steps=30)


def m_ddp_balanced(r):
    B, dims = DB["rows"], DB["dims"]
    P = mlp_params(dims)
    bwd, tail, total = ddp_backward(r, B, dims)
    fwd = mlp_forward(r, B, dims)
    fx = t_bytes((AMP_B + ADAM_B[4] + DDP_B) * P, r["hbm_tbs"])
    c = {"forward": fwd, "backward": bwd, "amp_casts_adam_ddp_copies": fx,
         "allreduce_left_after_backward": tail, "allreduce_total_overlapped": total}
    step = fwd + bwd + fx + tail
    head = {"allreduce_left_after_backward": tail,
            "gelu_epilogue_fusion": t_bytes(0.6 * gelu_train_bytes(B, dims, 2), r["hbm_tbs"])}
    return {"c": c, "step": step, "rm": {}, "share": {}, "after": None,
            "headroom_share": {k: pct(v, step) for k, v in head.items()}}


# ---- held out ---------------------------------------------------------------------------------------
NC = dict(tokens=8192, d=4096, ffn=6144, layers=6, steps=30)


def m_norm_chain(r, fixed=False):
    T, d, h, L = NC["tokens"], NC["d"], NC["ffn"], NC["layers"]
    td, th = T * d, T * h
    eager = td * (36.0 * L + 6.0 * L + 36.0) + th * 10.0 * L
    fused = td * (4.0 + 8.0 * (L - 1) + 8.0) + th * 6.0 * L
    c = {"gemm_bf16": t_flops(6.0 * T * d * h * L, r["bf16_tflops"])}
    if fixed:
        c["norm_silu_fused"] = t_bytes(fused, r["hbm_tbs"])
    else:
        c["norm_silu_residual_eager"] = t_bytes(eager, r["hbm_tbs"])
    step = sum(c.values())
    rm = {} if fixed else {"elementwise_unfused": t_bytes(eager - fused, r["hbm_tbs"])}
    return {"c": c, "step": step, "rm": rm, "share": {k: pct(v, step) for k, v in rm.items()},
            "after": None if fixed else step - rm["elementwise_unfused"]}


FH = dict(rows=8192, dims=[1024, 4096, 8192, 4096], vocab=3072, steps=30)


def m_fp32_head(r, fixed=False):
    """fp32 SIMT head (top problem) + a blocking pageable input copy (second problem). --fixed applies
    the top fix only (TF32), so the copy remains."""
    B, dims, V = FH["rows"], FH["dims"], FH["vocab"]
    d = dims[-1]
    trunk = t_flops(mlp_train_flops(B, dims), r["bf16_tflops"])
    head_fl = 6.0 * B * d * V
    c = {"trunk_gemm_bf16": trunk,
         "head_gemm_tf32" if fixed else "head_gemm_fp32_simt": t_flops(head_fl, r["tf32_tflops"] if fixed else r["sgemm_tflops"])}
    P = mlp_params(dims) + d * V
    # GELU between trunk layers; cross-entropy on fp32 logits (log-softmax forward r4 w4, backward r4 r4 w4);
    # the trunk output cast to fp32 for the head and its gradient cast back (6 + 6 bytes per element).
    ew = gelu_train_bytes(B, dims, 2) + 20.0 * B * V + 12.0 * B * d + AMP_B * mlp_params(dims) + ADAM_B[4] * P
    c["elementwise_ce_amp_adam"] = t_bytes(ew, r["hbm_tbs"])
    C = sum(c.values())
    nbytes = 4.0 * B * dims[0]
    c["h2d_pageable_input"] = t_link(nbytes, r["h2d_pageable_gbs"])
    c["sync_gap"] = r["sync_gap_us"] / 1e3
    step = sum(c.values())
    t_pin = t_link(nbytes, r["h2d_pinned_gbs"])
    rm = {"copy_bound_pageable": c["h2d_pageable_input"] + c["sync_gap"] - max(0.0, t_pin - C)}
    if not fixed:
        rm["fp32_gemm_simt"] = c["head_gemm_fp32_simt"] * (1 - 66.9 / 494.7)
    out = {"c": c, "step": step, "rm": rm, "share": {k: pct(v, step) for k, v in rm.items()}, "compute": C}
    if fixed:
        out["after_copy_fix"] = step - rm["copy_bound_pageable"]
    else:
        out["after"] = step - rm["fp32_gemm_simt"]
        out["fp32_gemm_share_of_step"] = pct(c["head_gemm_fp32_simt"], step)
    return out


DH = dict(rows=8192, dims=[4096, 8192, 8192, 4096], steps=30)


def m_d2h(r, fixed=False):
    B, dims = DH["rows"], DH["dims"]
    out = B * dims[-1]
    comp = {"gemm_bf16": t_flops(mlp_train_flops(B, dims), r["bf16_tflops"]),
            "gelu_loss_adam": t_bytes(gelu_train_bytes(B, dims, 2) + LOSS_B * out + ADAM_B[2] * mlp_params(dims), r["hbm_tbs"])}
    C = sum(comp.values())
    nbytes = 4.0 * out
    t_pg = t_link(nbytes, r["d2h_pageable_gbs"])
    t_pin = t_link(nbytes, r["d2h_pinned_gbs"])
    c = dict(comp)
    if fixed:
        c["d2h_pinned_overlapped_excess"] = max(0.0, t_pin - C)
        step = sum(c.values())
        return {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "copy_hidden_margin": C - t_pin}
    c["d2h_pageable"] = t_pg
    c["sync_gap"] = r["sync_gap_us"] / 1e3
    step = sum(c.values())
    after = max(C, t_pin)
    rm = {"copy_bound_pageable": t_pg - t_pin, "copy_not_overlapped": min(t_pg, C), "combined_fix": step - after,
          "host_sync": c["sync_gap"]}
    return {"c": c, "step": step, "rm": rm, "share": {k: pct(v, step) for k, v in rm.items()}, "after": after,
            "copy_share_of_step": pct(t_pg, step)}


GI = dict(tokens=1024, width=8192, ffn=16384, blocks=6, steps=40)


def m_graph_infer(r):
    T, W, F, nb = GI["tokens"], GI["width"], GI["ffn"], GI["blocks"]
    c = {"gemm_bf16": t_flops(nb * 2 * 2.0 * T * W * F, r["bf16_tflops"]),
         "gelu": t_bytes(nb * 4.0 * T * F, r["hbm_tbs"]),
         "input_h2d_pinned": t_link(2.0 * T * W, r["h2d_pinned_gbs"])}
    step = c["gemm_bf16"] + c["gelu"]  # the small pinned copy runs on its own stream, overlapped
    head = {"gelu_into_gemm_epilogue": c["gelu"], "graph_node_gaps": nb * 3 * 2e-3}
    return {"c": c, "step": step, "rm": {}, "share": {}, "after": None,
            "headroom_share": {k: pct(v, step) for k, v in head.items()}}


HS = dict(rows=16384, dims=[1024, 2048, 4096, 8192, 4096, 1024], slow_rank=1, sleep_ms=3.0, steps=30)


def m_host_straggler(r, fixed=False):
    B, dims = HS["rows"], HS["dims"]
    P = mlp_params(dims)
    fwd = mlp_forward(r, B, dims)
    bwd, tail, total = ddp_backward(r, B, dims)
    fx = t_bytes((AMP_B + ADAM_B[4] + DDP_B) * P, r["hbm_tbs"])
    gap = r["ddp_sync_gap_us"] / 1e3
    sleep = 0.0 if fixed else r["host_sleep_ms"]
    c = {"forward": fwd, "backward": bwd, "amp_casts_adam_ddp_copies": fx, "allreduce_left_after_backward": tail,
         "item_sync_gap": gap, "host_sleep_slow_rank": sleep}
    step = sum(c.values())
    if fixed:
        return {"c": c, "step": step, "rm": {}, "share": {}, "after": None}
    rm = {"straggler_host": sleep}
    return {"c": c, "step": step, "rm": rm, "share": {k: pct(v, step) for k, v in rm.items()},
            "after": step - sleep, "sync_gap_share": pct(gap, step)}


XL = dict(rows=8192, dims=[1024, 4096, 8192, 8192, 4096, 1024], steps=30)


def m_exposed_large(r):
    """All gradients flattened into one buffer (torch.cat), one all-reduce after the backward, copied back."""
    B, dims = XL["rows"], XL["dims"]
    P = mlp_params(dims)
    fwd = mlp_forward(r, B, dims)
    bwd, left, _ = ddp_backward(r, B, dims)
    flat = t_link(4.0 * P, r["ar_algbw_gbs"])
    copies = t_bytes(16.0 * P, r["hbm_tbs"])
    ew = t_bytes((AMP_B + ADAM_B[4]) * P, r["hbm_tbs"])
    step = fwd + bwd + ew + copies + flat
    # Bucketed and overlapped (DDP): only the all-reduce left after the backward stays exposed; DDP's
    # default bucket copies cost the same 16 bytes per gradient as the cat and the copy back.
    rm = {"exposed_communication": flat - left}
    return {"c": {"forward": fwd, "backward": bwd, "amp_casts_adam": ew, "flatten_and_copy_back": copies,
                  "allreduce_one_flat_buffer": flat},
            "step": step, "rm": rm, "share": {k: pct(v, step) for k, v in rm.items()},
            "after": step - rm["exposed_communication"] + r["overlap_penalty"] * (flat - left),
            "all_nccl_time_share": pct(flat, step), "left_if_overlapped": left}


# ---------------------------------------------------------------------------------------------------
# Manifests.
def rng(b, key, nd=2):
    lo, hi = b[key]
    return f"{lo:.{nd}f}-{hi:.{nd}f}"


def band_of(b, key):
    lo, hi = b[key]
    mid = band((lo + hi) / 2)
    return mid, [band(lo), band(hi)]


def r2(v):
    return [round(v[0], 3), round(v[1], 3)]


GB = 1e9
SEV_DOC = "info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical, of the device's steady step period"

Q = {  # SQL measurements (files in workloads/planted/sql/); the scorer runs them before reading aisp's answer
    "step": "sql/step_period_nvtx.sql: GPU step period per step (median over steps >= warmup_steps)",
    "anchor": "sql/step_period_anchor.sql: GPU step period without NVTX (ANCHOR, C per step, WARM)",
    "kernels": "sql/kernel_classes.sql: kernel time by name (divide by steps)",
    "ew_bw": "sql/elementwise_bandwidth.sql: achieved GB/s of the large elementwise kernels (BYTES per kernel)",
    "memcpy": "sql/memcpy_rates.sql: copies by direction and memory kind, with their rates",
    "nccl": "sql/nccl_kernels.sql: NCCL kernel count and durations per rank export",
    "split": "sql/gpu_time_split.sql: NCCL-only / compute / idle time of one device between T0 and T1",
}


def base(name, workload, variant, set_name, args, ranks=1, nvtx=True, est=45, steps=30, warmup=3):
    script = os.path.basename(workload)
    m = {"case": name, "workload": f"workloads/planted/{workload}", "variant": variant, "set": set_name,
         "ranks": ranks, "command": ["python3", script, "--steps", str(steps)] + [str(x) for x in args],
         "cwd": os.path.dirname(f"workloads/planted/{workload}"),
         "launcher": ["torchrun", "--standalone", f"--nproc_per_node={ranks}"] if ranks > 1 else None,
         "steps": steps, "warmup_steps": warmup, "nvtx_steps": nvtx, "capture_estimate_s": est,
         "severity_bands": SEV_DOC}
    if ranks > 1:
        m["env"] = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    return m


def uses(dtype, optimizer, graphs=False, attention=False, sequences=False, pinned=None, ddp=False, tf32=None,
         host_sync=None, triton=False):
    return {"compute_dtype": dtype, "optimizer": optimizer, "cuda_graphs": graphs, "attention": attention,
            "sequences": sequences, "pinned_memory": pinned, "ddp": ddp, "tf32": tf32,
            "host_sync_in_loop": host_sync, "torch_compile": False, "triton_kernels": triton}


def techniques(right, wrong):
    """right: what the top recommendation must be about; wrong: techniques that would target something
    the run lacks or already has (issue 32: none of them may be in the top 3)."""
    return {"top_technique": right, "must_not_recommend": wrong}


NOT_ATT = ["flash/fused attention (no attention in this run)", "sequence packing or length bucketing (no sequences)"]


def planted(cause, where, fix, b, key_rm, key_share, derivation, accept=None, top=True, b2=None):
    sev, sev_rng = band_of(b, key_share)
    p = {"cause": cause, "accept_causes": accept or [cause], "where": where, "fix": fix, "top": top,
         "removed_ms": {"h100": r2(b[key_rm])}, "share_pct": {"h100": r2(b[key_share])},
         "severity": sev, "severity_range": sev_rng, "derivation": derivation}
    if b2 is not None:
        p["removed_ms"]["h200"] = r2(b2[key_rm])
        p["share_pct"]["h200"] = r2(b2[key_share])
        p["severity_h200"] = band_of(b2, key_share)[0]
    return p


LACKS = {"cuda_graphs": "CUDA graphs", "attention": "attention", "sequences": "sequences", "pinned_memory": "pinned host memory",
         "ddp": "DistributedDataParallel", "torch_compile": "torch.compile", "triton_kernels": "custom fused kernels", "tf32": "TF32"}


def finish(m, b, b2, keys, after=True, fixed_case=None):
    m["lacks"] = [v for k, v in LACKS.items() if m["uses"].get(k) is False and (k != "ddp" or m["ranks"] > 1)]
    m["expected_step_ms"] = {"h100": r2(b["step"]), "h200": r2(b2["step"])}
    m["components_ms"] = {"h100": {k[2:]: r2(v) for k, v in b.items() if k.startswith("c.")},
                          "h200": {k[2:]: r2(v) for k, v in b2.items() if k.startswith("c.")}}
    if after and "after" in b:
        m["predicted_step_after_fix_ms"] = {"h100": r2(b["after"]), "h200": r2(b2["after"])}
        m["fixed_case"] = fixed_case
    else:
        m["predicted_step_after_fix_ms"] = None
    m["rates"] = {k: {"band": list(RATES_H100[k]), "h200_band": list(RATES_H200[k]) if RATES_H200[k] != RATES_H100[k] else None,
                      "source": RATE_SOURCES[k]} for k in sorted(keys)}
    return m


def build():
    out = {}

    def ev(fn):
        b, keys = evaluate(fn, RATES_H100)
        b2, _ = evaluate(fn, RATES_H200)
        return b, b2, keys

    # ---- elementwise_chain -------------------------------------------------------------------------
    N = EW["numel"]
    args = ["--numel-log2", 27, "--gemm-n", EW["gemm_n"], "--gemms", EW["gemms"]]
    b, b2, keys = ev(m_elementwise)
    m = base("elementwise_chain", "elementwise_chain.py", "planted", "tuned", args, steps=EW["steps"], est=35)
    m["uses"] = uses("fp32 elementwise + bf16 GEMM", "none (no training step)", host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["techniques"] = techniques("kernel fusion of the elementwise chain (Triton / torch.compile)",
                                 NOT_ATT + ["bf16 autocast for the GEMMs (already bf16)", "CUDA graphs (GPU-bound: ~26 launches per 8-9 ms step)",
                                            "fused optimizer (there is none)", "pinned memory (no host copies)"])
    m["planted"] = [planted(
        "elementwise_unfused", {"device": "GPU 0", "region": "step_N"}, "fuse the 20 ops into one kernel (the --fixed Triton kernel)",
        b, "rm.elementwise_unfused", "share.elementwise_unfused",
        f"Chain: 20 unary fp32 kernels over N = 2^27 elements (512 MiB), each reading and writing N x 4 B: 20 x 8N = "
        f"{20 * 8 * N / GB:.1f} GB per step at {RATES_H100['hbm_tbs'][0]}-{RATES_H100['hbm_tbs'][1]} TB/s = {rng(b, 'c.chain_eager_20_kernels')} ms. "
        f"Fused lower bound: one read, one write, 8N = {8 * N / GB:.2f} GB. Removed = 19 x 8N = {19 * 8 * N / GB:.1f} GB = {rng(b, 'rm.elementwise_unfused')} ms. "
        f"GEMMs: 6 x 2 x 4096^3 = {6 * 2 * 4096 ** 3 / 1e12:.2f} TFLOP at 650-820 TFLOP/s = {rng(b, 'c.gemm_bf16')} ms. "
        f"Step = {rng(b, 'step')} ms (GPU-bound: ~1 ms of CPU launches per step). Share = {rng(b, 'share.elementwise_unfused', 1)} % -> critical "
        f"(H200 at 3.9-4.4 TB/s: {rng(b2, 'share.elementwise_unfused', 1)} %).", b2=b2)]
    m["tolerated"] = []
    m["expect_quiet"] = False
    m["question"] = "My GPU is at 100% utilization the whole time, so I assume this loop can't go faster. Is that right?"
    m["diagnosis"] = ("No: the GPU is busy but ~80 % of each step is 20 separate fp32 elementwise kernels that each stream the "
                      "same 512 MiB tensor through HBM (about 21 GB of traffic per step for what needs 1 GB). Fusing the "
                      "chain into one kernel (Triton or torch.compile) cuts the step from ~8.5 ms to ~1.5 ms; the bf16 GEMMs are fine.")
    m["measure"] = [{"what": "steady step period", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "chain kernel rate", "query": Q["ew_bw"] + " with BYTES = 1073741824, MIN_US = 100",
                     "expect": "20 kernels per step (vectorized_elementwise_kernel / elementwise_kernel), each ~0.36-0.41 ms at 2.6-3.0 TB/s; "
                               "re-derive the removed time as 19/20 of their summed time per step"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="elementwise_chain.fixed")

    b, b2, keys = ev(lambda r: m_elementwise(r, fixed=True))
    m = base("elementwise_chain.fixed", "elementwise_chain.py", "fixed", "tuned", args + ["--fixed"], steps=EW["steps"], est=35)
    m["uses"] = uses("fp32 elementwise (one Triton kernel) + bf16 GEMM", "none (no training step)",
                     host_sync="event sync on the previous step (lag 1)", triton=True)
    m["techniques"] = techniques(None, NOT_ATT + ["kernel fusion (already one kernel)", "CUDA graphs (GPU-bound: 7 launches per ~1.5 ms step)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "the fused chain kernel itself (memory-bound, at its lower bound: nothing left to fuse)",
                       "cause": "elementwise_unfused", "max_severity": "info"}]
    m["expect_quiet"] = True
    m["question"] = "I fused my preprocessing into one Triton kernel. Is anything else slowing this loop down?"
    m["diagnosis"] = ("Nothing significant: the step is ~1.4-1.7 ms of bf16 GEMMs at tensor-core rates plus one memory-bound "
                      "kernel already at its one-read-one-write lower bound; the GPU never waits for the host.")
    m["measure"] = [{"what": "steady step period", "query": Q["step"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- fp32_gemm ----------------------------------------------------------------------------------
    args = ["--rows", FP["rows"], "--width", FP["width"], "--layers", FP["layers"]]
    fl = mlp_train_flops(FP["rows"], [FP["width"]] * (FP["layers"] + 1))
    b, b2, keys = ev(m_fp32)
    m = base("fp32_gemm", "fp32_gemm.py", "planted", "tuned", args, nvtx=False, steps=FP["steps"], est=35)
    m["uses"] = uses("fp32 (TF32 off)", "Adam fused", tf32=False, host_sync="loss.item() every step")
    m["techniques"] = techniques("TF32 (allow_tf32) or bf16 autocast for the GEMMs",
                                 NOT_ATT + ["fused optimizer (already fused)", "CUDA graphs (GPU-bound: ~30 ms steps)", "pinned memory (no host copies)"])
    m["planted"] = [planted(
        "fp32_gemm_simt", {"device": "GPU 0"}, "torch.backends.cuda.matmul.allow_tf32 = True (or bf16 autocast)",
        b, "rm.fp32_gemm_simt", "share.fp32_gemm_simt",
        f"4 fp32 layers 4096x4096, 4096 rows: forward 4, weight-grad 4, input-grad 3 GEMMs of 2 x 4096^3 = {fl / 1e12:.2f} TFLOP "
        f"per step, on CUDA cores (FFMA SGEMM) at 47-55 TFLOP/s = {rng(b, 'c.gemm_fp32_simt')} ms. What-if: x (1 - 66.9/494.7) = x 0.865 "
        f"(datasheet FP32 / TF32 dense; the measured 51.7/383 gives the same 0.135) -> removed {rng(b, 'rm.fp32_gemm_simt')} ms. "
        f"Rest: GELU fp32 (3 x 20 B x 16.8M), loss, fused Adam (28 B x 67.1M) = {rng(b, 'c.elementwise_and_adam')} ms; .item() gap "
        f"{RATES_H100['sync_gap_us'][0]:.0f}-{RATES_H100['sync_gap_us'][1]:.0f} µs. Step {rng(b, 'step')} ms; share {rng(b, 'share.fp32_gemm_simt', 1)} % -> critical. "
        f"Measured-rate check of the fix: GEMMs at 330-400 TFLOP/s TF32 give {rng(b, 'after_measured_rates')} ms.", b2=b2)]
    m["tolerated"] = [{"what": "loss.item() every step (host sync)", "cause": "host_sync", "max_severity": "info",
                       "why": f"the GPU idles only {RATES_H100['sync_gap_us'][0]:.0f}-{RATES_H100['sync_gap_us'][1]:.0f} µs per ~30 ms step (< 1 %)"}]
    m["expect_quiet"] = False
    m["question"] = "Training this MLP in fp32 takes ~30 ms a step on an H100. Is that what the hardware can do?"
    m["diagnosis"] = ("No: TF32 is off, so every GEMM runs as FP32 SGEMM on CUDA cores (~52 TFLOP/s) instead of tensor cores; "
                      "the GEMMs are ~95 % of the step. Enabling TF32 (or bf16 autocast) should take the step from ~31 ms to ~5-6 ms. "
                      "The per-step loss.item() costs well under 1 %.")
    m["measure"] = [{"what": "steady step period (no NVTX)", "query": Q["anchor"] + " with ANCHOR = the fused Adam kernel "
                     "(multi_tensor_apply_kernel), C = its count / 30, WARM = 3", "expect_ms": r2(b["step"])},
                    {"what": "SGEMM share", "query": Q["kernels"], "expect": "FFMA gemm kernels (names with 'ffma' or 'sgemm', or cuBLAS 'Kernel2') "
                     f"~{rng(b, 'c.gemm_fp32_simt', 1)} ms per step"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="fp32_gemm.fixed")

    b, b2, keys = ev(lambda r: m_fp32(r, fixed=True))
    m = base("fp32_gemm.fixed", "fp32_gemm.py", "fixed", "tuned", args + ["--fixed"], nvtx=False, steps=FP["steps"], est=35)
    m["uses"] = uses("fp32 with TF32 tensor cores", "Adam fused", tf32=True, host_sync="loss.item() every step")
    m["techniques"] = techniques(None, NOT_ATT + ["TF32 (already on)", "fused optimizer (already fused)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "loss.item() every step", "cause": "host_sync", "max_severity": "low",
                       "why": "50-300 µs of GPU idle per ~5-6 ms step (1-5 %)"},
                      {"what": "fp32 GELU / loss / Adam kernels (single memory-bound kernels between GEMMs)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = True
    m["question"] = "After enabling TF32 my fp32 MLP step is ~5.5 ms. Anything left that matters?"
    m["diagnosis"] = ("Nothing big: TF32 GEMMs are ~70 % of the step, the rest is memory-bound GELU, loss and fused Adam near HBM "
                      "bandwidth; the per-step .item() costs at most a few percent. bf16 autocast would be the next step, not a fix of a problem.")
    m["measure"] = [{"what": "steady step period (no NVTX)", "query": Q["anchor"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- gpu_ahead ----------------------------------------------------------------------------------
    args = ["--rows", GA["rows"], "--width", GA["width"], "--head", GA["head"]]
    NA = GA["rows"] * GA["width"]
    b, b2, keys = ev(m_gpu_ahead)
    m = base("gpu_ahead", "gpu_ahead.py", "planted", "tuned", args, steps=GA["steps"], est=35)
    m["uses"] = uses("bf16 (parameters and GEMMs) + fp32 preprocessing", "AdamW fused", host_sync="none (the CPU runs ahead)")
    m["techniques"] = techniques("kernel fusion of the fp32 preprocessing chain",
                                 NOT_ATT + ["bf16 (already bf16)", "fused optimizer (already fused)",
                                            "CUDA graphs / launch overhead (the GPU is the bottleneck; CPU ranges are short because it runs ahead)",
                                            "pinned memory (data on the GPU)"])
    m["planted"] = [planted(
        "elementwise_unfused", {"device": "GPU 0", "region": "step_N (GPU side)"}, "fuse the chain and the bf16 cast into one kernel (--fixed)",
        b, "rm.elementwise_unfused", "share.elementwise_unfused",
        f"Chain: 20 fp32 unary kernels over 8192 x 8192 = {NA / 1e6:.1f}M elements, 8 B each = {20 * 8 * NA / GB:.2f} GB, then a cast "
        f"to bf16 (6 B/elem); fused: read fp32 once, write bf16 once (6 B/elem). Removed = 160 B x {NA / 1e6:.1f}M = {160 * NA / GB:.2f} GB "
        f"= {rng(b, 'rm.elementwise_unfused')} ms at 2.6-3.0 TB/s. Rest of the GPU step: bf16 GEMMs {mlp_train_flops(GA['rows'], [GA['width']] * 3 + [GA['head']]) / 1e12:.2f} TFLOP "
        f"= {rng(b, 'c.gemm_bf16')} ms, GELU/loss/fused AdamW {rng(b, 'c.gelu_loss_adam')} ms. GPU step {rng(b, 'step')} ms; the CPU issues a step in "
        f"~2-3 ms and never waits, so its NVTX ranges are a fraction of the GPU step and run ahead by up to the launch-queue depth. "
        f"Share {rng(b, 'share.elementwise_unfused', 1)} % -> high.", b2=b2)]
    m["tolerated"] = [{"what": "single GELU kernels between GEMMs (epilogue fusion only)", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = "The profiler shows each training step taking only 2-3 ms on the CPU, but the run is much slower than that. Where does the time go?"
    m["diagnosis"] = ("The CPU is not the bottleneck: it queues steps far ahead and the GPU takes ~12-14 ms per step. On the GPU "
                      "~30 % of each step is a 20-kernel fp32 elementwise preprocessing chain (plus a cast) that streams a 268 MB tensor "
                      "21 times; fusing it into one kernel saves ~3.6-4.1 ms per step. The bf16 GEMMs and fused AdamW are fine.")
    m["measure"] = [{"what": "GPU step period (the NVTX ranges are CPU-side and short)", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "chain kernels", "query": Q["ew_bw"] + " with BYTES = 536870912, MIN_US = 100",
                     "expect": "20 fp32 kernels per step of ~0.18-0.21 ms each"}]
    m["notes"] = ["20 steps of ~50 launches: about CUDA's launch-queue depth (~1000 pending launches), so the CPU stays "
                  "ahead for the whole run and its step ranges stay short; with many more steps the host would block in "
                  "cudaLaunchKernel once the queue is full and its later ranges would stretch to the GPU step."]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="gpu_ahead.fixed")

    b, b2, keys = ev(lambda r: m_gpu_ahead(r, fixed=True))
    m = base("gpu_ahead.fixed", "gpu_ahead.py", "fixed", "tuned", args + ["--fixed"], steps=GA["steps"], est=35)
    m["uses"] = uses("bf16 + one fused Triton preprocessing kernel", "AdamW fused", host_sync="none (the CPU runs ahead)", triton=True)
    m["techniques"] = techniques(None, NOT_ATT + ["bf16 (already)", "fused optimizer (already)", "kernel fusion (already fused)",
                                                  "CUDA graphs (GPU-bound)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "single GELU kernels between GEMMs", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = True
    m["question"] = "I fused the preprocessing. Is this loop now GPU-efficient?"
    m["diagnosis"] = "Yes: the GPU step is ~8-10 ms of bf16 GEMMs, GELU and fused AdamW with no idle; the CPU stays ahead."
    m["measure"] = [{"what": "GPU step period", "query": Q["step"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- graph_step ---------------------------------------------------------------------------------
    args = ["--rows", GS["rows"], "--width", GS["width"], "--layers", GS["layers"], "--head", GS["head"]]
    b, b2, keys = ev(m_graph_step)
    m = base("graph_step", "graph_step.py", "healthy", "tuned", args, steps=GS["steps"], est=35)
    m["uses"] = uses("bf16", "Adam fused, capturable", graphs=True, host_sync="none (one graph launch per step)")
    m["techniques"] = techniques(None, NOT_ATT + ["CUDA graphs (already)", "bf16 (already)", "fused optimizer (already)", "pinned memory (data on the GPU)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "GELU kernels between GEMMs (epilogue fusion headroom)", "cause": "elementwise_unfused",
                       "max_severity": "low", "share_pct": r2(b["headroom_share.gelu_epilogue_fusion"])},
                      {"what": "fused Adam (memory-bound, already one pass)", "cause": "elementwise_unfused", "max_severity": "info"}]
    m["expect_quiet"] = True
    m["question"] = "Is my CUDA-graph training step using the H100 well, or is something holding it back?"
    m["diagnosis"] = ("It is healthy: one graph launch per step, the GPU busy back to back with large bf16 GEMMs (~80 % of the "
                      f"{rng(b, 'step', 1)} ms step) and fused Adam; no host waits, no copies to speak of, nothing above low.")
    m["measure"] = [{"what": "GPU step period", "query": Q["step"], "expect_ms": r2(b["step"])}]
    m["notes"] = ["The graph is traced per node (aisp passes --cuda-graph-trace=node): the kernels appear individually, "
                  "with the correlation id of the cudaGraphLaunch."]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- copy_bound ---------------------------------------------------------------------------------
    args = ["--rows", CB["rows"], "--width", CB["width"], "--head", CB["head"], "--pool", CB["pool"]]
    nbytes = 4 * CB["rows"] * CB["width"]
    b, b2, keys = ev(m_copy_bound)
    m = base("copy_bound", "copy_bound.py", "planted", "tuned", args, steps=CB["steps"], est=45)
    m["uses"] = uses("bf16", "AdamW fused", pinned=False, host_sync="the blocking pageable copy each step")
    m["techniques"] = techniques("pinned host memory + non_blocking copy prefetched on a side stream (DataLoader pin_memory)",
                                 NOT_ATT + ["bf16 (already)", "fused optimizer (already)", "CUDA graphs (the copy, not launches, is the bottleneck)"])
    m["planted"] = [
        planted("copy_bound_pageable", {"device": "GPU 0", "region": "step_N (start)"},
                "pin the host batches and copy with non_blocking=True on a side stream, one step ahead (--fixed)",
                b, "rm.combined_fix", "share.combined_fix",
                f"Each step copies {nbytes / 1e6:.0f} MB (8192 x 8192 fp32) H2D from pageable memory at 6-14 GB/s "
                f"(7.6-8.2 measured on this pool) = {rng(b, 'c.h2d_pageable', 1)} ms, blocking the host and serialized after the previous "
                f"step's compute. Compute: cast + bf16 GEMMs {mlp_train_flops(CB['rows'], [CB['width']] * 3 + [CB['head']]) / 1e12:.2f} TFLOP + "
                f"GELU/loss/fused AdamW = {rng(b, 'compute')} ms. Step {rng(b, 'step', 1)} ms; copy share {rng(b, 'copy_share_of_step', 1)} %. "
                f"Fix (pinned at 50-56 GB/s = {rng(b, 'h2d_pinned')} ms, overlapped with compute): removed {rng(b, 'rm.combined_fix', 1)} ms = "
                f"{rng(b, 'share.combined_fix', 1)} % -> critical. Separately: the pinned rate alone removes {rng(b, 'rm.copy_bound_pageable', 1)} ms "
                f"({rng(b, 'share.copy_bound_pageable', 1)} %, critical); overlap alone (at the pageable rate) would hide min(copy, compute) = "
                f"{rng(b, 'rm.copy_not_overlapped', 1)} ms ({rng(b, 'share.copy_not_overlapped', 1)} %, high).",
                accept=["copy_bound_pageable", "copy_not_overlapped"], b2=b2),
        planted("copy_not_overlapped", {"device": "GPU 0"}, "prefetch the next batch on a side stream (part of the same fix)",
                b, "rm.copy_not_overlapped", "share.copy_not_overlapped",
                "The copy is on the compute stream and blocking, so none of it overlaps compute; an overlapped schedule hides "
                f"min(copy, compute) = {rng(b, 'rm.copy_not_overlapped', 1)} ms. Same fix as above; a ledger may report both as one copy finding.",
                accept=["copy_not_overlapped", "copy_bound_pageable"], top=False, b2=b2)]
    m["tolerated"] = [{"what": "host waits inside the pageable copy (it is the copy itself)", "cause": "host_sync", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = "My GPU sits at ~25 % utilization while training this small model. What is it waiting for?"
    m["diagnosis"] = ("The input copy: each step moves a 268 MB fp32 batch from pageable host memory at ~8 GB/s (~20-45 ms), "
                      "blocking and serialized with the ~8-10 ms of compute, so the copy is 2/3 or more of the step. Pin the batches and "
                      "prefetch the next one with non_blocking=True on a side stream: the copy drops to ~5 ms at ~55 GB/s and hides "
                      "behind compute, so the step becomes ~8-10 ms.")
    m["measure"] = [{"what": "steady step period", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "pageable H2D rate (the uncertain input)", "query": Q["memcpy"],
                     "expect": "copyKind 1, srcKind 0 (pageable), 268 MB per step; re-derive the share with the measured rate"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="copy_bound.fixed")

    b, b2, keys = ev(lambda r: m_copy_bound(r, fixed=True))
    m = base("copy_bound.fixed", "copy_bound.py", "fixed", "tuned", args + ["--fixed"], steps=CB["steps"], est=45)
    m["uses"] = uses("bf16", "AdamW fused", pinned=True, host_sync="event sync on the previous step (lag 1)")
    m["techniques"] = techniques(None, NOT_ATT + ["pinned memory / prefetch (already)", "bf16 (already)", "fused optimizer (already)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "pinned H2D on a side stream, overlapped with compute", "cause": "copy_not_overlapped", "max_severity": "info",
                       "why": f"hidden behind compute with {rng(b, 'copy_hidden_margin', 1)} ms to spare"}]
    m["expect_quiet"] = True
    m["question"] = "I switched to pinned memory with prefetching. Is the input pipeline still a bottleneck?"
    m["diagnosis"] = ("No: the 268 MB copy now runs at ~55 GB/s (~5 ms) on a side stream while the previous batch computes, and the "
                      "step (~8-10 ms) is bound by bf16 compute.")
    m["measure"] = [{"what": "steady step period", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "pinned H2D rate", "query": Q["memcpy"], "expect": "copyKind 1, srcKind 1 (pinned), ~50-56 GB/s"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- healthy ------------------------------------------------------------------------------------
    args = ["--batch", HT["batch"], "--seq", HT["seq"], "--d-model", HT["d"], "--heads", HT["heads"], "--blocks", HT["blocks"], "--head", HT["head"]]
    b, b2, keys = ev(m_healthy)
    m = base("healthy", "healthy.py", "healthy", "tuned", args, steps=HT["steps"], est=40)
    m["uses"] = uses("bf16 (parameters and compute)", "Adam fused", attention=True, sequences=True,
                     host_sync="event sync on the previous step (lag 1)")
    m["techniques"] = techniques(None, ["bf16 (already)", "fused optimizer (already)", "flash attention (SDPA already picks a fused kernel)",
                                        "pinned memory (data on the GPU)", "CUDA graphs (GPU-bound, ~15-25 % CPU load)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual-add kernels (adjacent-kernel fusion headroom)", "cause": "elementwise_unfused",
                       "max_severity": "info", "share_pct": r2(b["headroom_share.adjacent_elementwise_fusion"])},
                      {"what": "GELU into the GEMM epilogue", "cause": "elementwise_unfused", "max_severity": "low",
                       "share_pct": r2(b["headroom_share.gelu_into_gemm_epilogue"])}]
    m["expect_quiet"] = True
    m["question"] = "Here's a profile of my transformer training step. Is anything obviously wrong?"
    m["diagnosis"] = ("No: ~75 % of the step is bf16 GEMMs at tensor-core rates, attention uses SDPA's fused kernel, the optimizer is "
                      "fused Adam (~10 %, memory-bound at its one-pass minimum), the host never makes the GPU wait. "
                      "Nothing above low.")
    m["measure"] = [{"what": "steady step period", "query": Q["step"], "expect_ms": r2(b["step"])}]
    m["notes"] = [f"Elementwise per block: ~92 B per token x d_model (LayerNorm, transpose copy, residual adds, GELU on 4d, forward and "
                  f"backward) = {rng(b, 'c.layernorm_gelu_residual_copies')} ms per step; adjacent-kernel fusion (add + LayerNorm) would save "
                  f"~{rng(b, 'headroom_share.adjacent_elementwise_fusion', 1)} %, GELU into GEMM epilogues ~{rng(b, 'headroom_share.gelu_into_gemm_epilogue', 1)} %."]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- ddp_straggler ------------------------------------------------------------------------------
    dims = ",".join(map(str, DS["dims"]))
    args = ["--rows", DS["rows"], "--dims", dims, "--slow-rank", DS["slow_rank"], "--slow-factor", DS["slow_factor"]]
    b, b2, keys = ev(m_ddp_straggler)
    m = base("ddp_straggler", "ddp_straggler.py", "planted", "tuned", args, ranks=4, steps=DS["steps"], est=40)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=True, host_sync="none")
    m["techniques"] = techniques("balance the work per rank (equal rows / per-rank batch)",
                                 NOT_ATT + ["bf16 (already autocast)", "fused optimizer (already)", "gradient bucketing / overlap (DDP already overlaps)"])
    m["planted"] = [
        planted("straggler_compute", {"rank": DS["slow_rank"], "waiting_ranks": [0, 1, 3]},
                "rebalance: the same global batch, equal rows on every rank (--fixed)", b, "rm.straggler_compute", "share.straggler_compute",
                f"Rows: 16384 on ranks 0, 1, 3; 1.75 x 16384 = 28672 on rank 2. Per-rank forward + backward scales with rows: "
                f"GEMMs 6 x rows x {mlp_params(DS['dims']) / 1e6:.1f}M params (the first layer's input grad skipped) at 650-820 TFLOP/s + "
                f"GELU/loss bytes = {rng(b, 'c.forward_backward_fast_ranks')} ms (fast) vs {rng(b, 'c.forward_backward_slow_rank')} ms (rank 2). "
                f"Fixed part (AMP casts 12 B, fused AdamW 28 B, DDP bucket copies 16 B per parameter) {rng(b, 'c.amp_casts_adam_ddp_copies')} ms, "
                f"all-reduce left after rank 2's backward {rng(b, 'c.allreduce_left_after_slowest_backward')} ms (the rest, "
                f"{rng(b, 'c.allreduce_total_overlapped')} ms in all, overlaps the backward). Step (all ranks) {rng(b, 'step', 1)} ms. "
                f"Ranks 0, 1, 3 wait {rng(b, 'other_ranks_wait', 1)} ms per step inside the first all-reduce of the backward = "
                f"{rng(b, 'share.straggler_compute', 1)} % -> at the high/critical boundary (either band is right).",
                accept=["straggler_compute"], b2=b2)]
    m["tolerated"] = [{"what": "NCCL kernels on ranks 0, 1, 3 that last wait + transfer (the symptom of the straggler)",
                       "cause": "exposed_communication", "max_severity": "info",
                       "why": "the wait is the straggler's; an exposed-communication finding for the same time double-counts it"}]
    m["expect_quiet"] = False
    m["question"] = "Why is my 4-GPU DDP training slower per step than the same model on one GPU with the same per-GPU batch?"
    m["diagnosis"] = ("Rank 2 gets 1.75x the rows of the others, so its forward and backward take ~75 % longer and ranks 0, 1 and 3 "
                      "wait for it in the all-reduce every step (~40 % of their step). Give every rank the same batch: the step drops from "
                      "~17-21 ms to ~10-12.5 ms. Communication itself overlaps the backward fine.")
    m["measure"] = [{"what": "step period per rank", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "wait inside NCCL on the fast ranks", "query": Q["nccl"],
                     "expect": "on ranks 0, 1, 3 the first all-reduce of each step lasts ~wait + transfer; rank 2's do not"},
                    {"what": "GEMM time per rank", "query": Q["kernels"], "expect": "rank 2's GEMM time per step ~1.75x the others'"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="ddp_straggler.fixed")

    b, b2, keys = ev(lambda r: m_ddp_straggler(r, fixed=True))
    m = base("ddp_straggler.fixed", "ddp_straggler.py", "fixed", "tuned", args + ["--fixed"], ranks=4, steps=DS["steps"], est=40)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=True, host_sync="none")
    m["techniques"] = techniques(None, NOT_ATT + ["bf16 (already)", "fused optimizer (already)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "all-reduce left after the backward", "cause": "exposed_communication", "max_severity": "low",
                       "share_pct": r2(b["tail_share"])}]
    m["expect_quiet"] = True
    m["question"] = "With equal batches on the 4 GPUs, is there still any imbalance or communication problem?"
    m["diagnosis"] = "No: all ranks do the same work, the all-reduces overlap the backward, and the steps line up (~10-12.5 ms)."
    m["measure"] = [{"what": "step period per rank", "query": Q["step"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- ddp_exposed --------------------------------------------------------------------------------
    dims = ",".join(map(str, DX["dims"]))
    args = ["--rows", DX["rows"], "--dims", dims]
    b, b2, keys = ev(m_ddp_exposed)
    m = base("ddp_exposed", "ddp_exposed.py", "planted", "tuned", args, ranks=4, steps=DX["steps"], est=40)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=False, host_sync="none")
    m["techniques"] = techniques("overlap gradient all-reduce with the backward (DDP buckets)",
                                 NOT_ATT + ["bf16 (already)", "fused optimizer (already)", "CUDA graphs (GPU-bound)"])
    m["planted"] = [planted(
        "exposed_communication", {"ranks": [0, 1, 2, 3]}, "DistributedDataParallel (default 25 MB buckets, overlapped with the backward) (--fixed)",
        b, "rm.exposed_communication", "share.exposed_communication",
        f"After the backward, 10 all-reduces (AVG) in a row on the compute stream: 5 weights ({4 * 1024 * 8192 / 1e6:.0f} MB + 4 x "
        f"{4 * 8192 * 8192 / 1e6:.0f} MB fp32) at an algbw of 170-230 GB/s (busbw x 2/3 on 4 ranks) = {rng(b, 'c.allreduce_weights_serial')} ms, "
        f"and 5 bias vectors (32 KB) at 15-40 µs each = {rng(b, 'c.allreduce_biases_serial')} ms; nothing overlaps them. NCCL-only time "
        f"{rng(b, 'all_nccl_time_share', 1)} % of the {rng(b, 'step', 1)} ms step. What-if (overlapped schedule): each layer's gradient "
        f"all-reduced as soon as its backward node ends hides all but what is left after the backward, so removed = "
        f"{rng(b, 'rm.exposed_communication')} ms = {rng(b, 'share.exposed_communication', 1)} % -> high. (A ledger that removes all "
        f"NCCL-only time also lands in high.)", b2=b2)]
    m["tolerated"] = []
    m["expect_quiet"] = False
    m["question"] = "I wrote my own gradient averaging for 4 GPUs. Scaling is worse than I expected. Why?"
    m["diagnosis"] = ("Every gradient tensor is all-reduced one after another after the backward has finished, on the compute stream, "
                      "so ~25-35 % of each step is the GPUs doing nothing but communication. Bucketing the all-reduces and overlapping "
                      "them with the backward (DDP) hides most of it: ~18-22 ms -> ~15-19 ms per step.")
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "NCCL-only time per step", "query": Q["split"], "expect": f"~{rng(b, 'c.allreduce_weights_serial')} ms of NCCL-only time per step"},
                    {"what": "all-reduce rate", "query": Q["nccl"], "expect": "10 AllReduce kernels per step; the 268 MB ones at 1.2-1.6 ms"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="ddp_exposed.fixed")

    b, b2, keys = ev(lambda r: m_ddp_exposed(r, fixed=True))
    m = base("ddp_exposed.fixed", "ddp_exposed.py", "fixed", "tuned", args + ["--fixed"], ranks=4, steps=DX["steps"], est=40)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=True, host_sync="none")
    m["techniques"] = techniques(None, NOT_ATT + ["bf16 (already)", "fused optimizer (already)", "DDP / bucketing (already)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "all-reduce of the first large layer (and any queue left) after the backward", "cause": "exposed_communication",
                       "max_severity": "medium", "share_pct": r2(b["exposed_share"]),
                       "why": "what an overlapped schedule cannot hide (nothing left to overlap with); its what-if should be ~0"}]
    m["expect_quiet"] = False
    m["question"] = "I switched to DDP. Is communication still hurting the step?"
    m["diagnosis"] = ("Much less: the all-reduces now run beside the backward; only the last large layer's (~268 MB) transfer and "
                      "whatever queued behind it remain after the backward, a cost an overlapped schedule cannot remove.")
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "NCCL-only time per step", "query": Q["split"], "expect": f"~{rng(b, 'c.allreduce_left_after_backward')} ms"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- ddp_balanced -------------------------------------------------------------------------------
    dims = ",".join(map(str, DB["dims"]))
    args = ["--rows", DB["rows"], "--dims", dims]
    b, b2, keys = ev(m_ddp_balanced)
    m = base("ddp_balanced", "ddp_balanced.py", "healthy", "tuned", args, ranks=4, steps=DB["steps"], est=40)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=True, host_sync="none")
    m["techniques"] = techniques(None, NOT_ATT + ["bf16 (already)", "fused optimizer (already)", "DDP / overlap (already)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "all-reduce left after the backward", "cause": "exposed_communication", "max_severity": "low",
                       "share_pct": r2(b["headroom_share.allreduce_left_after_backward"])},
                      {"what": "GELU kernels between GEMMs (epilogue fusion)", "cause": "elementwise_unfused", "max_severity": "low",
                       "share_pct": r2(b["headroom_share.gelu_epilogue_fusion"])}]
    m["expect_quiet"] = True
    m["question"] = "Is my 4-GPU DDP job scaling well, or is communication or load imbalance costing me?"
    m["diagnosis"] = ("It is healthy: equal work per rank, the steps line up, the all-reduces overlap the backward and only a small "
                      f"tail (~{rng(b, 'headroom_share.allreduce_left_after_backward', 1)} % of the step) is left after it. Nothing above low.")
    m["measure"] = [{"what": "step period per rank", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "NCCL-only time", "query": Q["split"], "expect": f"~{rng(b, 'c.allreduce_left_after_backward')} ms per step"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- held out: norm_chain -----------------------------------------------------------------------
    args = ["--tokens", NC["tokens"], "--d-model", NC["d"], "--ffn", NC["ffn"], "--layers", NC["layers"]]
    T, d, h, L = NC["tokens"], NC["d"], NC["ffn"], NC["layers"]
    b, b2, keys = ev(m_norm_chain)
    m = base("norm_chain", "heldout/norm_chain.py", "planted", "heldout", args, nvtx=False, steps=NC["steps"], est=35)
    m["uses"] = uses("bf16", "none (inference)", host_sync="none (the CPU runs ahead)")
    m["techniques"] = techniques("fuse RMSNorm (+ residual add) and silu*mul (Triton / torch.compile / a fused RMSNorm)",
                                 NOT_ATT + ["bf16 (already)", "optimizer changes (inference)", "CUDA graphs (GPU-bound)"])
    m["planted"] = [planted(
        "elementwise_unfused", {"device": "GPU 0"}, "one-pass add+RMSNorm and silu*mul kernels (--fixed)",
        b, "rm.elementwise_unfused", "share.elementwise_unfused",
        f"Per step on T x d = {T}x{d} (bf16) and T x f = {T}x{h}: each eager RMSNorm moves 36 B/elem (cast to fp32 6, pow 8, mean 4, "
        f"mul 8, cast back 6, weight mul 4), the residual add 6, silu then mul 10 B per ffn element; {L} layers + a final norm = "
        f"{(T * d * (42 * L + 36) + T * h * 10 * L) / GB:.2f} GB = {rng(b, 'c.norm_silu_residual_eager')} ms. Fused lower bound: add+norm "
        f"reads x and delta, writes x and the normed output (8 B/elem; 4 for the first), silu*mul 6 B: "
        f"{(T * d * (4 + 8 * L) + T * h * 6 * L) / GB:.2f} GB. Removed {rng(b, 'rm.elementwise_unfused')} ms. GEMMs 6 x T x d x f x {L} = "
        f"{6 * T * d * h * L / 1e12:.2f} TFLOP = {rng(b, 'c.gemm_bf16')} ms. Step {rng(b, 'step', 1)} ms; share "
        f"{rng(b, 'share.elementwise_unfused', 1)} % -> high.", b2=b2)]
    m["tolerated"] = []
    m["expect_quiet"] = False
    m["question"] = "This inference loop of my MLP stack seems slower than its FLOPs suggest. What's eating the time?"
    m["diagnosis"] = ("About a fifth to a quarter of each iteration is memory-bound elementwise work: the hand-written RMSNorm runs as 8 "
                      "separate kernels (with fp32 round trips) plus an unfused silu*mul and residual add. Fusing add+RMSNorm and "
                      "silu*mul into one pass each saves ~3 ms of ~13-16 ms. The GEMMs are fine.")
    m["measure"] = [{"what": "iteration period (no NVTX)", "query": Q["anchor"] + " with ANCHOR = a GEMM kernel that runs 3 x 6 = 18 times "
                     "per iteration (C = 18), or the mean reduce_kernel (C = 7)", "expect_ms": r2(b["step"])},
                    {"what": "elementwise time", "query": Q["kernels"], "expect": f"elementwise + reduce kernels ~{rng(b, 'c.norm_silu_residual_eager', 1)} ms per iteration"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="norm_chain.fixed")

    b, b2, keys = ev(lambda r: m_norm_chain(r, fixed=True))
    m = base("norm_chain.fixed", "heldout/norm_chain.py", "fixed", "heldout", args + ["--fixed"], nvtx=False, steps=NC["steps"], est=35)
    m["uses"] = uses("bf16", "none (inference)", host_sync="none", triton=True)
    m["techniques"] = techniques(None, NOT_ATT + ["bf16 (already)", "kernel fusion (already)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "the fused norm / silu kernels (memory-bound at their lower bound)", "cause": "elementwise_unfused", "max_severity": "info"}]
    m["expect_quiet"] = True
    m["question"] = "After fusing the norm and activation, is there anything left to fix here?"
    m["diagnosis"] = "No: ~85-90 % of each iteration is bf16 GEMMs; the fused kernels run once each at their memory lower bound."
    m["measure"] = [{"what": "iteration period", "query": Q["anchor"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- held out: fp32_head (a combination: fp32 SIMT head + pageable input copy) --------------------
    dims = ",".join(map(str, FH["dims"]))
    args = ["--rows", FH["rows"], "--dims", dims, "--vocab", FH["vocab"]]
    b, b2, keys = ev(m_fp32_head)
    hf = 6.0 * FH["rows"] * FH["dims"][-1] * FH["vocab"]
    ib = 4 * FH["rows"] * FH["dims"][0]
    copy_text = (f"Each step's input, 8192 x 1024 fp32 = {ib / 1e6:.1f} MB, is copied from pageable memory with a blocking "
                 f"x.to('cuda') at 6-14 GB/s (7.6-8.2 measured on this pool) = {rng(b, 'c.h2d_pageable_input')} ms plus a "
                 f"50-300 µs relaunch gap, serialized with compute. Fix: pinned batches, non_blocking copy prefetched on a side "
                 f"stream (0.6 ms at 50-56 GB/s, hidden behind compute). ")
    m = base("fp32_head", "heldout/fp32_head.py", "planted", "heldout", args, steps=FH["steps"], est=35)
    m["uses"] = uses("bf16 autocast trunk + fp32 head (TF32 off)", "AdamW fused", tf32=False, pinned=False,
                     host_sync="the blocking pageable input copy each step")
    m["techniques"] = techniques("TF32 for the fp32 head (or run the head under bf16 autocast); second: pinned, prefetched input",
                                 NOT_ATT + ["bf16 autocast for the trunk (already)", "fused optimizer (already)", "CUDA graphs (not launch-bound)"])
    m["planted"] = [
        planted("fp32_gemm_simt", {"device": "GPU 0", "region": "forward / backward (head)"}, "allow TF32 (--fixed), or keep the head in autocast",
                b, "rm.fp32_gemm_simt", "share.fp32_gemm_simt",
                f"Head: Linear 4096 -> {FH['vocab']} in fp32 outside autocast, 8192 rows: forward, weight-grad and input-grad GEMMs = "
                f"6 x 8192 x 4096 x {FH['vocab']} = {hf / 1e12:.2f} TFLOP on CUDA cores at 47-55 TFLOP/s = {rng(b, 'c.head_gemm_fp32_simt')} ms "
                f"({rng(b, 'fp32_gemm_share_of_step', 1)} % of the step). Trunk bf16 GEMMs {rng(b, 'c.trunk_gemm_bf16')} ms; GELU, "
                f"cross-entropy, casts, AMP, fused AdamW {rng(b, 'c.elementwise_ce_amp_adam')} ms; input copy "
                f"{rng(b, 'c.h2d_pageable_input')} ms. Step {rng(b, 'step', 1)} ms. What-if x 0.865 -> removed "
                f"{rng(b, 'rm.fp32_gemm_simt')} ms = {rng(b, 'share.fp32_gemm_simt', 1)} % -> the top finding.", b2=b2),
        planted("copy_bound_pageable", {"device": "GPU 0", "region": "data"}, "pinned host batches, non_blocking copy prefetched on a side stream",
                b, "rm.copy_bound_pageable", "share.copy_bound_pageable",
                copy_text + f"Removed {rng(b, 'rm.copy_bound_pageable')} ms = {rng(b, 'share.copy_bound_pageable', 1)} % -> second.",
                accept=["copy_bound_pageable", "copy_not_overlapped"], top=False, b2=b2)]
    m["tolerated"] = [{"what": "GELU / cross-entropy kernels", "cause": "elementwise_unfused", "max_severity": "low"},
                      {"what": "host waits inside the pageable copy", "cause": "host_sync", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = "I use bf16 autocast, yet my step is much slower than I estimated from the model's FLOPs. Why?"
    m["diagnosis"] = ("Two things, in this order. The output head runs outside autocast in fp32 with TF32 off, so its three GEMMs run as "
                      "CUDA-core SGEMM and take about half of the step although they are a fifth of the FLOPs: enable TF32 (or keep the "
                      "head under autocast), ~20-26 ms -> ~10-15 ms. Then the 34 MB input batch is copied from pageable memory with a "
                      "blocking copy every step (~2.5-6 ms): pin it and prefetch on a side stream.")
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "SGEMM time", "query": Q["kernels"], "expect": f"FFMA gemm kernels ~{rng(b, 'c.head_gemm_fp32_simt', 1)} ms per step"},
                    {"what": "pageable H2D rate", "query": Q["memcpy"], "expect": "copyKind 1, srcKind 0, 33.6 MB per step"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="fp32_head.fixed")

    b, b2, keys = ev(lambda r: m_fp32_head(r, fixed=True))
    m = base("fp32_head.fixed", "heldout/fp32_head.py", "fixed", "heldout", args + ["--fixed"], steps=FH["steps"], est=35)
    m["uses"] = uses("bf16 autocast trunk + fp32 head on TF32", "AdamW fused", tf32=True, pinned=False,
                     host_sync="the blocking pageable input copy each step")
    m["techniques"] = techniques("pinned host memory + non_blocking prefetch of the input",
                                 NOT_ATT + ["TF32 (already)", "fused optimizer (already)", "bf16 autocast (already)"])
    m["planted"] = [planted("copy_bound_pageable", {"device": "GPU 0", "region": "data"},
                            "pinned host batches, non_blocking copy prefetched on a side stream",
                            b, "rm.copy_bound_pageable", "share.copy_bound_pageable",
                            copy_text + f"With the head on TF32 ({rng(b, 'c.head_gemm_tf32')} ms) the step is {rng(b, 'step', 1)} ms; removed "
                            f"{rng(b, 'rm.copy_bound_pageable')} ms = {rng(b, 'share.copy_bound_pageable', 1)} % -> now the top finding.",
                            accept=["copy_bound_pageable", "copy_not_overlapped"], b2=b2)]
    m["tolerated"] = [{"what": "GELU / cross-entropy / Adam kernels", "cause": "elementwise_unfused", "max_severity": "low"},
                      {"what": "host waits inside the pageable copy", "cause": "host_sync", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = "With TF32 on, the head is fast now. What's the next bottleneck?"
    m["diagnosis"] = ("The input copy: the 34 MB batch comes from pageable memory with a blocking copy every step (~2.5-6 ms of a "
                      "~10-15 ms step). Pin the batches and prefetch the next one on a side stream; the step becomes compute-bound.")
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "pageable H2D rate", "query": Q["memcpy"], "expect": "copyKind 1, srcKind 0, 33.6 MB per step"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)
    out[m["case"]]["predicted_step_after_fix_ms"] = {"h100": r2(b["after_copy_fix"]), "h200": r2(b2["after_copy_fix"]),
                                                     "note": "if the input copy were fixed too (not captured)"}

    # ---- held out: d2h_sync -------------------------------------------------------------------------
    dims = ",".join(map(str, DH["dims"]))
    args = ["--rows", DH["rows"], "--dims", dims]
    b, b2, keys = ev(m_d2h)
    ob = 4 * DH["rows"] * DH["dims"][-1]
    m = base("d2h_sync", "heldout/d2h_sync.py", "planted", "heldout", args, steps=DH["steps"], est=45)
    m["uses"] = uses("bf16", "AdamW fused", pinned=False, host_sync="out.cpu() every step (pageable, blocking)")
    m["techniques"] = techniques("copy outputs asynchronously into pinned buffers on a side stream and read them a step later",
                                 NOT_ATT + ["bf16 (already)", "fused optimizer (already)", "CUDA graphs (not launch-bound)"])
    m["planted"] = [
        planted("copy_bound_pageable", {"device": "GPU 0", "region": "end of step_N"},
                "pinned double buffer + non_blocking D2H on a side stream, read one step later (--fixed)",
                b, "rm.combined_fix", "share.combined_fix",
                f"Each step copies the fp32 outputs, {ob / 1e6:.0f} MB, D2H into a freshly allocated pageable buffer at 4-14 GB/s (11.1 "
                f"measured into a reused buffer on this pool; first-touch page faults slow a fresh one) "
                f"= {rng(b, 'c.d2h_pageable', 1)} ms, after the step's compute and before the next step can launch (out.cpu() syncs the host). "
                f"Compute {rng(b, 'c.gemm_bf16')} ms GEMMs + {rng(b, 'c.gelu_loss_adam')} ms GELU/loss/AdamW. Step {rng(b, 'step', 1)} ms, copy "
                f"share {rng(b, 'copy_share_of_step', 1)} %. Fix (pinned 50-56 GB/s, overlapped with the next step): removed "
                f"{rng(b, 'rm.combined_fix', 1)} ms = {rng(b, 'share.combined_fix', 1)} % -> critical. Pinned rate alone: "
                f"{rng(b, 'share.copy_bound_pageable', 1)} %; overlap alone: {rng(b, 'share.copy_not_overlapped', 1)} %.",
                accept=["copy_bound_pageable", "copy_not_overlapped", "host_sync"], b2=b2),
        planted("copy_not_overlapped", {"device": "GPU 0"}, "same fix", b, "rm.copy_not_overlapped", "share.copy_not_overlapped",
                f"The D2H sits on the critical path after compute; an overlapped schedule hides min(copy, compute) = "
                f"{rng(b, 'rm.copy_not_overlapped', 1)} ms.", accept=["copy_not_overlapped", "copy_bound_pageable"], top=False, b2=b2)]
    m["tolerated"] = [{"what": "the host sync of out.cpu() beyond the copy (relaunch gap)", "cause": "host_sync", "max_severity": "low",
                       "share_pct": r2(b["share.host_sync"])}]
    m["expect_quiet"] = False
    m["question"] = "I log my model's outputs every step and training got much slower. Is the logging the problem?"
    m["diagnosis"] = ("Yes: out.cpu() copies 134 MB of fp32 outputs into pageable memory every step at ~11 GB/s (~12 ms), blocking and "
                      "after the compute, so half or more of each step is that copy. Copy into pinned buffers with non_blocking=True "
                      "on a side stream and read the previous step's buffer: the step returns to ~9-11 ms of compute.")
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "pageable D2H rate", "query": Q["memcpy"], "expect": "copyKind 2, dstKind 0 (pageable), 134 MB per step"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="d2h_sync.fixed")

    b, b2, keys = ev(lambda r: m_d2h(r, fixed=True))
    m = base("d2h_sync.fixed", "heldout/d2h_sync.py", "fixed", "heldout", args + ["--fixed"], steps=DH["steps"], est=45)
    m["uses"] = uses("bf16", "AdamW fused", pinned=True, host_sync="event sync on the previous step's copy (lag 1)")
    m["techniques"] = techniques(None, NOT_ATT + ["pinned memory (already)", "bf16 (already)", "fused optimizer (already)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "pinned D2H on a side stream, overlapped", "cause": "copy_not_overlapped", "max_severity": "info"}]
    m["expect_quiet"] = True
    m["question"] = "With async pinned copies for logging, does the logging still cost anything?"
    m["diagnosis"] = "Almost nothing: the 134 MB copy takes ~2.5 ms on a side stream beside the next step's compute (~9-11 ms)."
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- held out: graph_infer ----------------------------------------------------------------------
    args = ["--tokens", GI["tokens"], "--width", GI["width"], "--ffn", GI["ffn"], "--blocks", GI["blocks"]]
    b, b2, keys = ev(m_graph_infer)
    m = base("graph_infer", "heldout/graph_infer.py", "healthy", "heldout", args, steps=GI["steps"], est=35)
    m["uses"] = uses("bf16", "none (inference)", graphs=True, pinned=True, host_sync="event sync on the previous step (lag 1)")
    m["techniques"] = techniques(None, NOT_ATT + ["CUDA graphs (already)", "bf16 (already)", "pinned memory / async copies (already)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "GELU into the GEMM epilogue", "cause": "elementwise_unfused", "max_severity": "low",
                       "share_pct": r2(b["headroom_share.gelu_into_gemm_epilogue"])},
                      {"what": "16.8 MB pinned H2D per step on a side stream (overlapped)", "cause": "copy_not_overlapped", "max_severity": "info"}]
    m["expect_quiet"] = True
    m["question"] = "Is this CUDA-graph inference server loop leaving performance on the table?"
    m["diagnosis"] = ("No: each step is one graph replay of large bf16 GEMMs (~95 % of the GPU time), inputs arrive by pinned async copies "
                      "overlapped with the previous replay, and the GPU never waits for the host. Nothing above low.")
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- held out: ddp_host_straggler ---------------------------------------------------------------
    dims = ",".join(map(str, HS["dims"]))
    args = ["--rows", HS["rows"], "--dims", dims, "--slow-rank", HS["slow_rank"], "--sleep-ms", HS["sleep_ms"]]
    b, b2, keys = ev(m_host_straggler)
    m = base("ddp_host_straggler", "heldout/ddp_host_straggler.py", "planted", "heldout", args, ranks=4, steps=HS["steps"], est=40)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=True, host_sync="loss.item() every step on every rank")
    m["techniques"] = techniques("take the per-step host work off the critical path on rank 1 (background thread / DataLoader workers)",
                                 NOT_ATT + ["bf16 (already)", "fused optimizer (already)", "rebalancing rows (the ranks do equal GPU work)"])
    m["planted"] = [planted(
        "straggler_host", {"rank": HS["slow_rank"], "waiting_ranks": [0, 2, 3]}, "remove the per-step host delay on rank 1 (--fixed)",
        b, "rm.straggler_host", "share.straggler_host",
        f"Rank 1's host sleeps 3 ms (time.sleep; 3.05-3.25 ms with timer slack) at the top of every step; because every rank "
        f"syncs on loss.item() at the end of the step, rank 1's GPU has nothing queued during the sleep, starts its step that much "
        f"later, and ranks 0, 2, 3 wait for it at the first all-reduce. Per-rank work (equal rows): forward {rng(b, 'c.forward')} ms, "
        f"backward {rng(b, 'c.backward')} ms, AMP/AdamW/DDP copies {rng(b, 'c.amp_casts_adam_ddp_copies')} ms, all-reduce left after the "
        f"backward {rng(b, 'c.allreduce_left_after_backward')} ms, .item() relaunch gap 150-800 µs (DDP pre-forward hooks). Step {rng(b, 'step', 1)} ms; removed "
        f"{rng(b, 'rm.straggler_host')} ms = {rng(b, 'share.straggler_host', 1)} % -> high. On rank 1 it shows as GPU idle with no "
        f"kernel queued (host-caused); on the others as wait inside NCCL.", accept=["straggler_host", "host_bound"], b2=b2)]
    m["tolerated"] = [{"what": "loss.item() every step", "cause": "host_sync", "max_severity": "low", "share_pct": r2(b["sync_gap_share"])},
                      {"what": "wait inside NCCL on ranks 0, 2, 3 (the straggler's symptom)", "cause": "exposed_communication", "max_severity": "info"}]
    m["expect_quiet"] = False
    m["question"] = "All 4 GPUs get the same batch size, but one of them always seems to arrive late at the all-reduce. Why?"
    m["diagnosis"] = ("Rank 1's host spends ~3 ms per step before launching any GPU work, and since every rank syncs on loss.item() "
                      "each step, rank 1's GPU sits idle for those 3 ms; the other three then wait for it at the all-reduce. It is a "
                      "host-side straggler, not a compute imbalance: moving that host work off the step (or removing it) saves ~3 ms of "
                      "~16-19 ms per step on every rank.")
    m["measure"] = [{"what": "step period per rank", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "GPU idle on rank 1", "query": Q["split"] + " (rank 1's export)", "expect": "~3 ms idle per step on rank 1 only"},
                    {"what": "the sleep", "query": "SELECT COUNT(*), AVG(end - start) / 1e6 FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId WHERE s.value LIKE '%sleep%'",
                     "expect": "rank 1: ~30 calls of ~3.1 ms"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="ddp_host_straggler.fixed")

    b, b2, keys = ev(lambda r: m_host_straggler(r, fixed=True))
    m = base("ddp_host_straggler.fixed", "heldout/ddp_host_straggler.py", "fixed", "heldout", args + ["--fixed"], ranks=4, steps=HS["steps"], est=40)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=True, host_sync="loss.item() every step on every rank")
    m["techniques"] = techniques(None, NOT_ATT + ["bf16 (already)", "fused optimizer (already)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "loss.item() every step", "cause": "host_sync", "max_severity": "low"}]
    m["expect_quiet"] = True
    m["question"] = "Without the extra host work, do the four ranks stay in step?"
    m["diagnosis"] = "Yes: equal work, no rank idles; the per-step .item() costs only a relaunch gap (~1-6 %, low)."
    m["measure"] = [{"what": "step period per rank", "query": Q["step"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- held out: ddp_flat_allreduce ---------------------------------------------------------------
    dims = ",".join(map(str, XL["dims"]))
    args = ["--rows", XL["rows"], "--dims", dims]
    b, b2, keys = ev(m_exposed_large)
    P = mlp_params(XL["dims"])
    m = base("ddp_flat_allreduce", "heldout/ddp_flat_allreduce.py", "planted", "heldout", args, ranks=4, steps=XL["steps"], est=40)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=False, host_sync="none")
    m["techniques"] = techniques("overlap gradient all-reduce with the backward (DDP buckets)",
                                 NOT_ATT + ["bf16 (already)", "fused optimizer (already)"])
    m["planted"] = [planted(
        "exposed_communication", {"ranks": [0, 1, 2, 3]}, "DistributedDataParallel (bucketed, overlapped with the backward)",
        b, "rm.exposed_communication", "share.exposed_communication",
        f"After the backward all {P / 1e6:.1f}M fp32 gradients are concatenated ({4 * P / 1e6:.0f} MB), all-reduced once at 170-230 GB/s "
        f"algbw = {rng(b, 'c.allreduce_one_flat_buffer')} ms with nothing beside it, and copied back ({rng(b, 'c.flatten_and_copy_back')} ms of copies). "
        f"NCCL-only {rng(b, 'all_nccl_time_share', 1)} % of the {rng(b, 'step', 1)} ms step. What-if: per-layer buckets reduced as each layer's "
        f"backward ends leave {rng(b, 'left_if_overlapped')} ms after the backward, so removed = {rng(b, 'rm.exposed_communication')} ms = "
        f"{rng(b, 'share.exposed_communication', 1)} % -> medium (a ledger that removes all NCCL-only time gets high: within one band).", b2=b2)]
    m["tolerated"] = [{"what": "torch.cat / copy-back kernels (part of the same pattern; DDP's bucket copies cost the same)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = "My hand-rolled data-parallel loop spends time in one big all-reduce every step. Is that avoidable?"
    m["diagnosis"] = ("Mostly: the single flattened all-reduce (~570 MB) runs after the backward with nothing to overlap it. Reducing "
                      "gradients in buckets as the backward produces them (DDP) hides all but the last layers' share: ~2-3 ms of a "
                      "~14-18 ms step.")
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(b["step"])},
                    {"what": "NCCL-only time", "query": Q["split"], "expect": f"~{rng(b, 'c.allreduce_one_flat_buffer')} ms per step, one AllReduce kernel"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case=None)
    out[m["case"]]["predicted_step_after_fix_ms"]["note"] = "no fixed variant is captured for this held-out case"
    return out


def write(check=False):
    cases = build()
    bad = []
    for name, m in cases.items():
        d = os.path.join(HERE, "heldout", "manifests") if m["set"] == "heldout" else os.path.join(HERE, "manifests")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"{name}.json")
        text = json.dumps(m, indent=1, ensure_ascii=False) + "\n"
        if check:
            if not os.path.isfile(path) or open(path, encoding="utf-8").read() != text:
                bad.append(path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    return cases, bad


def table(cases):
    rows = ["| case | set | ranks | NVTX | planted (severity, share % H100) | expected step ms (H100) | after fix ms |",
            "|---|---|---|---|---|---|---|"]
    for name, m in cases.items():
        pl = "; ".join(f"{p['cause']} {p['severity']} ({p['share_pct']['h100'][0]:.0f}-{p['share_pct']['h100'][1]:.0f})"
                       for p in m["planted"]) or ("none (quiet)" if m["expect_quiet"] else "none")
        st = m["expected_step_ms"]["h100"]
        af = m.get("predicted_step_after_fix_ms")
        af = f"{af['h100'][0]:.1f}-{af['h100'][1]:.1f}" if af else "-"
        rows.append(f"| {name} | {m['set']} | {m['ranks']} | {'yes' if m['nvtx_steps'] else 'no'} | {pl} | {st[0]:.1f}-{st[1]:.1f} | {af} |")
    return "\n".join(rows)


def h200_planted(cause, where, fix, b, b2, key_rm, key_share, derivation, accept, band_of_set):
    """A set's planted problem (heldout18 on): its removed time and share on both cards, severity under the set's bands
    (`band_of_set`) and the legacy ones."""
    sev, sev_rng = band_of_set(b2, key_share)
    return {"cause": cause, "accept_causes": accept, "where": where, "fix": fix, "top": True,
            "removed_ms": {"h100": r2(b[key_rm]), "h200": r2(b2[key_rm])},
            "share_pct": {"h100": r2(b[key_share]), "h200": r2(b2[key_share])},
            "severity": sev, "severity_range": sev_rng,
            "severity_legacy": band_of(b2, key_share)[0], "severity_legacy_range": band_of(b2, key_share)[1],
            "derivation": derivation}


def h200_finish(m, b, b2, keys, sev_doc, kernels, rates_h100, rates_h200, sources, after=True, fixed_case=None):
    """A set's manifest completed from its model (heldout18 on): bands, lacks, the step and its parts on both cards,
    the step after the fix, and the rates used with their sources."""
    m["severity_bands"] = sev_doc
    m["lacks"] = [v for k, v in LACKS.items() if m["uses"].get(k) is False and k != "ddp"]
    m["expected_step_ms"] = {"h100": r2(b["step"]), "h200": r2(b2["step"])}
    m["components_ms"] = {"h100": {k[2:]: r2(v) for k, v in b.items() if k.startswith("c.")},
                          "h200": {k[2:]: r2(v) for k, v in b2.items() if k.startswith("c.")}}
    m["gpu_ms"] = {"h100": r2(b["gpu_ms"]), "h200": r2(b2["gpu_ms"])}
    m["host_ms"] = {"h100": r2(b["host_ms"]), "h200": r2(b2["host_ms"])}
    m["kernels_per_step"] = kernels[m["case"]]
    if after and "after" in b:
        m["predicted_step_after_fix_ms"] = {"h100": r2(b["after"]), "h200": r2(b2["after"])}
        m["fixed_case"] = fixed_case
    else:
        m["predicted_step_after_fix_ms"] = None
    m["rates"] = {k: {"band": list(rates_h100[k]),
                      "h200_band": list(rates_h200[k]) if rates_h200[k] != rates_h100[k] else None,
                      "source": sources[k]} for k in sorted(keys)}
    return m


def write_set(here, cases, check=False):
    """Write a held-out set's manifests to `here`/manifests (only those that changed); with `check`, write nothing
    and return the paths that differ from `cases`, or name a case that no longer exists."""
    bad = []
    d = os.path.join(here, "manifests")
    os.makedirs(d, exist_ok=True)
    for name, m in cases.items():
        path = os.path.join(d, f"{name}.json")
        text = json.dumps(m, indent=1, ensure_ascii=False) + "\n"
        same = os.path.isfile(path) and open(path, encoding="utf-8").read() == text
        if check and not same:
            bad.append(path)
        elif not same:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    stale = sorted(set(f[:-5] for f in os.listdir(d) if f.endswith(".json")) - set(cases))
    return bad + [os.path.join(d, f"{s}.json (no such case)") for s in stale]


def h200_table(cases):
    """The markdown table of a set made for H200s (heldout11 on)."""
    rows = ["| case | ranks | NVTX | planted (severity, share % H200) | expected step ms (H200) | after fix ms (H200) |",
            "|---|---|---|---|---|---|"]
    for name, m in cases.items():
        pl = "; ".join(f"{p['cause']} {p['severity']} ({p['share_pct']['h200'][0]:.0f}-{p['share_pct']['h200'][1]:.0f})"
                       for p in m["planted"]) or "none"
        st = m["expected_step_ms"]["h200"]
        af = m.get("predicted_step_after_fix_ms")
        af = f"{af['h200'][0]:.1f}-{af['h200'][1]:.1f}" if af else "-"
        rows.append(f"| {name} | {m['ranks']} | {'yes' if m['nvtx_steps'] else 'no'} | {pl} | {st[0]:.1f}-{st[1]:.1f} | "
                    f"{af} |")
    return "\n".join(rows)


def set_main(doc, here, build, table=table):
    """The command line of a held-out set's derive.py: write its manifests (or --check them) and print its table."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail if a manifest on disk differs from the derivation")
    ap.add_argument("--table", action="store_true", help="print the markdown table only")
    a = ap.parse_args()
    cases = build()
    if a.table:
        print(table(cases))
        return
    bad = write_set(here, cases, check=a.check)
    if a.check and bad:
        print(f"stale manifests (run {os.path.basename(here)}/derive.py):\n" + "\n".join(bad))
        sys.exit(1)
    print(table(cases))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail if a manifest on disk differs from the derivation")
    ap.add_argument("--table", action="store_true", help="print the markdown table only")
    a = ap.parse_args()
    cases, bad = write(check=a.check)
    if a.check and bad:
        print("stale manifests (run derive.py):\n" + "\n".join(bad))
        sys.exit(1)
    print(table(cases))
