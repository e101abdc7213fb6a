#!/usr/bin/env python3
"""First-principles truth for the seventh held-out set (heldout7): writes heldout7/manifests/<case>.json from FLOPs,
bytes, call counts and rate bands alone (no capture, no aisp output), with the helpers of ../derive.py.

    python3 workloads/planted/heldout7/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout7/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout7/derive.py --table    # the README table only

Method: as ../derive.py and heldout6/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or calls x a host cost per call; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the device where the
problem sits; severity: info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical. New bands (each with its
source in the manifests' `rates`): the host cost of cudaMalloc / cudaFree of large segments (a fixed part and a part
per GB) with the segment count and bytes of one step of the tower (counted from the caching allocator's rules), the
effective memory rate of torch.optim.AdamW on CPU tensors, the DRAM rate of a bf16 matrix-vector product (or a GEMM
of 16 rows) over a weight far larger than L2, the GPU time of a tiny kernel in a dependent chain, and NCCL
send / recv between two GPUs; four bands of heldout4-6 are copied with their sources so that this set depends on no
other held-out set.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_base():
    """../derive.py under its own module name (this file is derive.py too): evaluate, time and manifest helpers."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("planted_derive", os.path.join(os.path.dirname(HERE), "derive.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


D = _load_base()
ADAM_B, AMP_B, GB, Q, LOSS_B = D.ADAM_B, D.AMP_B, D.GB, D.Q, D.LOSS_B
mlp_params, mlp_train_flops, gelu_train_bytes = D.mlp_params, D.mlp_train_flops, D.gelu_train_bytes
pct, planted, r2, rng, techniques, uses = D.pct, D.planted, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link

SET = "heldout7"

# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; counts and GB as named.
NEW_H100 = {
    # copied from heldout4-6 (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    "eager_op_us": (20.0, 70.0),
    "mlp_block_ew_tokd_bytes": (60.0, 95.0),
    # new here
    "cuda_malloc_us": (15.0, 80.0),
    "cuda_malloc_ms_per_gb": (0.1, 1.5),
    "cuda_free_us": (15.0, 80.0),
    "cuda_free_ms_per_gb": (0.1, 1.5),
    "tc_segments": (32.0, 40.0),
    "tc_segment_gb": (1.25, 1.5),
    "cpu_adam_gbs": (8.0, 40.0),
    "gemv_tbs": (2.0, 3.0),
    "tiny_kernel_us": (2.0, 6.0),
    "p2p_gbs": (120.0, 350.0),
    "skinny_gemm_read_frac": (0.7, 1.05),
}
NEW_H200 = dict(NEW_H100, gemv_tbs=(2.9, 4.3))
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 1024 (or a varying M): below the 8192^3 rate (732-787 measured) as "
                       "tiles and waves shrink and the epilogue's writes weigh more; an assumption widened down to 550 "
                       "(heldout2-6). Used for every GEMM whose smallest dimension is <= 2048",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: torch "
                     "busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (quoted by heldout2/derive.py); band 200-300 "
                     "(heldout3-6)",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing: 29-36 µs "
                   "measured (quoted by ../derive.py), ~70 implied by heldout2; band 20-70 (heldout3-6)",
    "mlp_block_ew_tokd_bytes": "elementwise bytes per token x d_model of a pre-LN MLP block (LayerNorm, Linear d -> 4d with "
                               "bias, GELU, Linear 4d -> d with bias, residual add), pure bf16, forward + backward: ~74; band "
                               "60-95 (heldout5, heldout6); the forward's part is 26 of the 74 (LayerNorm 4, GELU 16, "
                               "residual add 6), taken as the fixed fraction 26/74 here",
    "cuda_malloc_us": "fixed host cost of one cudaMalloc of a large (>= 2 MB) segment, besides the part per GB: the driver's "
                      "allocation call, VA reservation and page-table update, the CUPTI record under nsys; NVIDIA's guides "
                      "call device allocation expensive and advise reuse; tens of µs per call in typical traces; band "
                      "15-80 µs (assumption)",
    "cuda_malloc_ms_per_gb": "size-dependent part of cudaMalloc: physical pages taken from the driver's pool and mapped (and, "
                             "where the driver scrubs memory before handing it out, cleared); 0.1 ms per GB if only "
                             "mappings are made, up to 1.5 ms per GB if the pages are cleared at ~0.7-1 TB/s; band 0.1-1.5 "
                             "(assumption, wide on purpose)",
    "cuda_free_us": "fixed host cost of one cudaFree of a large segment once the device is idle (cudaFree waits for all "
                    "queued work first; that wait is counted as GPU time, not here); band 15-80 µs (assumption, as "
                    "cudaMalloc)",
    "cuda_free_ms_per_gb": "size-dependent part of cudaFree: unmapping, TLB invalidation and returning (or scrubbing) the "
                           "pages; band 0.1-1.5 ms per GB (assumption, as cudaMalloc)",
    "tc_segments": "count, not a rate: cudaMalloc calls per steady step of tower_cache after torch.cuda.empty_cache(), from "
                   "the caching allocator's rules (requests > 10 MB get their own segment, rounded to 2 MB; 1-10 MB ones a "
                   "20 MB segment that later ones of that size split; a freed block is reused by a later request it fits): "
                   "per block the bf16 input cast (16.8 MB), the fc1 output and the GELU output (67 MB each), the fc2 "
                   "output (16.8 MB) and one 20 MB segment for the two 8.4 MB bf16 weight casts; two 33.5 MB fp32 residual "
                   "outputs that alternate; the loss's difference and square (33.5 MB each); 1-3 segments in the backward "
                   "where a 67 MB gradient finds no free block; 1-3 small-pool segments: 6 x 5 + 2 + 2 + 1-3 + 1-3 = 35-39, "
                   "band 32-40",
    "tc_segment_gb": "GB, not a rate: bytes of those segments: 6 x 188 MB + 2 x 34 + 2 x 34 + 67-201 MB = 1.33-1.46 GB, band "
                     "1.25-1.5",
    "cpu_adam_gbs": (8.0, 40.0),
    "gemv_tbs": (2.0, 3.0),
    "tiny_kernel_us": (2.0, 6.0),
    "p2p_gbs": (120.0, 350.0),
    "skinny_gemm_read_frac": (0.7, 1.05),
}
NEW_H200 = dict(NEW_H100, gemv_tbs=(2.9, 4.3))
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 1024 (or a varying M): below the 8192^3 rate (732-787 measured) as "
                       "tiles and waves shrink and the epilogue's writes weigh more; an assumption widened down to 550 "
                       "(heldout2-6). Used for every GEMM whose smallest dimension is <= 2048",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: torch "
                     "busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (quoted by heldout2/derive.py); band 200-300 "
                     "(heldout3-6)",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing: 29-36 µs "
                   "measured (quoted by ../derive.py), ~70 implied by heldout2; band 20-70 (heldout3-6)",
    "mlp_block_ew_tokd_bytes": "elementwise bytes per token x d_model of a pre-LN MLP block (LayerNorm, Linear d -> 4d with "
                               "bias, GELU, Linear 4d -> d with bias, residual add), pure bf16, forward + backward: ~74; band "
                               "60-95 (heldout5, heldout6); the forward's part is 26 of the 74 (LayerNorm 4, GELU 16, "
                               "residual add 6), taken as the fixed fraction 26/74 here",
    "cuda_malloc_us": "fixed host cost of one cudaMalloc of a large (>= 2 MB) segment, besides the part per GB: the driver's "
                      "allocation call, VA reservation and page-table update, the CUPTI record under nsys; NVIDIA's guides "
                      "call device allocation expensive and advise reuse; tens of µs per call in typical traces; band "
                      "15-80 µs (assumption)",
    "cuda_malloc_ms_per_gb": "size-dependent part of cudaMalloc: physical pages taken from the driver's pool and mapped (and, "
                             "where the driver scrubs memory before handing it out, cleared); 0.1 ms per GB if only "
                             "mappings are made, up to 1.5 ms per GB if the pages are cleared at ~0.7-1 TB/s; band 0.1-1.5 "
                             "(assumption, wide on purpose)",
    "cuda_free_us": "fixed host cost of one cudaFree of a large segment once the device is idle (cudaFree waits for all "
                    "queued work first; that wait is counted as GPU time, not here); band 15-80 µs (assumption, as "
                    "cudaMalloc)",
    "cuda_free_ms_per_gb": "size-dependent part of cudaFree: unmapping, TLB invalidation and returning (or scrubbing) the "
                           "pages; band 0.1-1.5 ms per GB (assumption, as cudaMalloc)",
    "tc_segments": "count, not a rate: cudaMalloc calls per steady step of tower_cache after torch.cuda.empty_cache(), from "
                   "the caching allocator's rules (requests > 10 MB get their own segment, rounded to 2 MB; 1-10 MB ones a "
                   "20 MB segment that later ones of that size split; a freed block is reused by a later request it fits): "
                   "per block the bf16 input cast (33.5 MB), the fc1 output and the GELU output (134 MB each), the fc2 "
                   "output (33.5 MB) and one 20 MB segment for the two bf16 weight casts; two 67 MB fp32 residual outputs "
                   "that alternate; the loss's difference and square (67 MB each); 1-3 segments in the backward where a "
                   "134 MB gradient finds no free block; 1-3 small-pool segments: 6 x 5 + 2 + 2 + 1-3 + 1-3 = 35-39, band "
                   "32-40",
    "tc_segment_gb": "GB, not a rate: bytes of those segments: 6 x 355 MB + 2 x 67 + 2 x 67 + 134-402 MB = 2.4-2.7 GB, band "
                     "2.25-2.75",
    "cpu_adam_gbs": "effective memory traffic per second of torch.optim.AdamW's single-tensor path on CPU tensors (foreach and "
                    "fused default to off there): 8 multi-threaded elementwise passes per tensor (weight decay, lerp, mul + "
                    "addcmul, sqrt, divide, add eps, addcdiv), ~80 bytes per parameter, two of them into freshly "
                    "allocated tensors; a server socket streams 100-300 GB/s, but one PyTorch CPU op over a 4-17 MB "
                    "tensor on 16-32 threads (OpenMP wake-up, NUMA, a shared VM, osrt tracing) reaches far less; band "
                    "8-40 GB/s (assumption, wide on purpose)",
    "gemv_tbs": "DRAM bytes per second of a bf16 matrix-vector product (M = 1), or a GEMM of 16 rows, over a 1.07 GB weight "
                "(far larger than the 50 MB L2): cuBLAS's gemv / skinny-GEMM kernels read the weight once at 60-90 % of the "
                "datasheet (3.35 TB/s H100, 4.8 TB/s H200); a plain DtoD copy reaches 3.0 (H100) and 4.3 (H200) on this "
                "pool (../derive.py); band 2.0-3.0 TB/s H100, 2.9-4.3 H200 (assumption)",
    "tiny_kernel_us": "GPU time of one tiny kernel (a GELU or add over 16-32 k elements, a 16384 x 1 GEMV, a sigmoid, a 1-"
                      "element copy) in a chain of dependent kernels, including the launch latency to the next one when the "
                      "host is ahead: 2-6 µs (assumption; ~2-3 µs kernels plus ~1-2 µs gaps in traces of eager loops)",
    "skinny_gemm_read_frac": "DRAM rate of a bf16 GEMM with 16 rows over the same weight, as a fraction of the gemv rate: "
                             "cuBLAS picks a GEMM kernel (tiles of 64-128 rows, mostly empty) rather than a gemv one; it "
                             "still streams the weight once but may read it less (or slightly more) efficiently; band "
                             "0.7-1.05 (assumption)",
    "p2p_gbs": "NCCL send / recv of one 33.5 MB bf16 tensor between 2 GPUs of one host over NVLink (NVLS off): NVLink 4 "
               "gives 450 GB/s per direction, NCCL's SendRecv kernels reach ~200-370 for large messages; band 120-350 GB/s "
               "(assumption), plus one small-call latency (ar_small_us)",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q7 = dict(Q)
Q7.update({
    "nvtx_ranges": "sql/nvtx_range_ms.sql: CPU duration of each NVTX range name (count, mean, min, max)",
    "starved": "sql/launch_starved_idle.sql: GPU idle split into gaps whose next kernel had not been launched yet "
               "(the GPU waits for the host) and other gaps, between T0 and T1",
})

EW_FWD = 26.0 / 74.0  # forward's part of a pre-LN MLP block's elementwise bytes (mlp_block_ew_tokd_bytes)


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


# ---------------------------------------------------------------------------------------------------
# DDP on 2 ranks: a timeline of the backward with DDP's buckets (as heldout4-6).
FIRST_BUCKET = float(1 << 20)
BUCKET = 25.0 * (1 << 20)


def ddp_timeline(r, nodes):
    t = ar_end = total = acc = 0.0
    limit, buckets = FIRST_BUCKET, 0
    for i, (ms, nb) in enumerate(nodes):
        t += ms
        acc += nb
        if acc > 0 and (acc >= limit or i == len(nodes) - 1):
            ar = t_link(acc, r["ar2_algbw_gbs"]) + r["ar_small_us"] / 1e3
            total += ar
            ar_end = max(ar_end, t) + ar
            acc, limit, buckets = 0.0, BUCKET, buckets + 1
    return t, max(0.0, ar_end - t), total, buckets


# ---------------------------------------------------------------------------------------------------
# The cases.

# probe_head: backbone of 8 pre-LN blocks d 2048 -> 8192 (biases, bf16), head LN + Linear 2048 -> 1000, 8192 rows;
# fused AdamW over the head only; the backbone's requires_grad left on (backward through it) unless fixed.
PH = dict(rows=8192, d=2048, hidden=8192, blocks=8, classes=1000, steps=25)
PH_HOST_OPS = 5 * PH["blocks"] + 14  # 5 ops per block; head LN, Linear, float, cross-entropy, backward, optimizer, ...


def ph_params():
    d, h, L, K = PH["d"], PH["hidden"], PH["blocks"], PH["classes"]
    return float(L * (2 * d * h + h + 3 * d)), float(2 * d + d * K + K)


def m_probe(r, fixed=False):
    R, d, h, L, K = PH["rows"], PH["d"], PH["hidden"], PH["blocks"], PH["classes"]
    hbm, mid = r["hbm_tbs"], r["bf16_mid_tflops"]
    P_bb, P_head = ph_params()
    blk_gemm = t_flops(2.0 * R * 2 * d * h, mid)
    blk_ew = r["mlp_block_ew_tokd_bytes"] * R * d
    c = {"backbone_gemm_fwd": L * blk_gemm,
         "backbone_elementwise_fwd": t_bytes(L * EW_FWD * blk_ew, hbm),
         # head: LayerNorm fwd + bwd (~12 B per row x d), GEMM fwd + both grads, logits.float() + cross-entropy (~36 B)
         "head_fwd_bwd": t_flops(3 * 2.0 * R * d * K, mid) + t_bytes(12.0 * R * d + 36.0 * R * K, hbm),
         "head_adamw_fused": t_bytes(ADAM_B[2] * P_head, hbm)}
    if not fixed:
        c["backbone_gemm_bwd"] = L * 2 * blk_gemm
        c["backbone_elementwise_bwd"] = t_bytes(L * (1 - EW_FWD) * blk_ew, hbm)
        # AccumulateGrad adds each step's bf16 weight gradients into the existing .grad: r2 r2 w2 per parameter
        c["backbone_grad_accumulate"] = t_bytes(6.0 * P_bb, hbm)
    gpu = sum(c.values())
    host = PH_HOST_OPS * r["eager_op_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_idle_waiting_for_host"] = step - gpu
    out = {"c": c, "step": step, "gpu_busy_ms": gpu, "host_ms": host, "host_margin_ms": gpu - host,
           "params_bb_m": P_bb / 1e6, "fwd_gemm_share": pct(c["backbone_gemm_fwd"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None,
                    "head_share": pct(c["head_fwd_bwd"] + c["head_adamw_fused"], step),
                    "ew_share": pct(c["backbone_elementwise_fwd"], step)})
        return out
    after = m_probe(r, fixed=True)["step"]
    rm = {"frozen_backward": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after,
                "bwd_ms": c["backbone_gemm_bwd"] + c["backbone_elementwise_bwd"] + c["backbone_grad_accumulate"]})
    return out


# score_loop: 2 FFN blocks d 16384 -> 32768 (bias-free, bf16, 4.3 GB), a 1-wide head; 16 requests per tick, one
# forward per request (M = 1) unless fixed (one forward, M = 16).
SL = dict(requests=16, d=16384, hidden=32768, blocks=2, steps=20)
SL_TINY = 2 * SL["blocks"] + 3      # GELU and residual add per block, the head's GEMV, sigmoid, the score copy
SL_HOST_OPS = 4 * SL["blocks"] + 5  # fc1, gelu, fc2, add per block; slice, head, sigmoid, squeeze, the score write


def m_score(r, fixed=False):
    n, d, h, L = SL["requests"], SL["d"], SL["hidden"], SL["blocks"]
    W = 2.0 * d * h * 2  # bytes of one block's two weights
    gemm_one = L * t_bytes(W, r["gemv_tbs"])
    tiny = SL_TINY * r["tiny_kernel_us"] / 1e3
    host = SL_HOST_OPS * r["eager_op_us"] / 1e3
    if fixed:
        # one forward with M = 16: the weight is read once; 2*16*d*h FLOPs per GEMM are far below the read time
        gemm = L * 2 * max(t_bytes(W / 2, r["gemv_tbs"] * r["skinny_gemm_read_frac"]),
                           t_flops(2.0 * n * d * h, r["bf16_mid_tflops"]))
        c = {"gemm_weight_reads": gemm, "tiny_kernels": tiny}
        gpu = sum(c.values())
        step = max(gpu, host)
        if step > gpu:
            c["gpu_idle_waiting_for_host"] = step - gpu
        return {"c": c, "step": step, "gpu_busy_ms": gpu, "host_ms": host, "host_margin_ms": gpu - host,
                "gemm_share": pct(gemm, step), "rm": {}, "share": {}, "after": None}
    per_req_gpu = gemm_one + tiny
    per_req = max(per_req_gpu, host)
    c = {"gemv_weight_reads": n * gemm_one, "tiny_kernels": n * tiny}
    step = n * per_req
    if step > sum(c.values()):
        c["gpu_idle_waiting_for_host"] = step - sum(c.values())
    after = m_score(r, fixed=True)["step"]
    rm = {"unbatched_requests": step - after}
    return {"c": c, "step": step, "per_request_ms": per_req, "per_request_host_ms": host,
            "host_margin_per_request_ms": per_req_gpu - host, "weights_gb": L * W / 1e9,
            "rm": rm, "share": shares(rm, step), "after": after}


# offload_adam: MLP 1024 -> 2048 -> 2048 -> 1024 (fp32 params on the GPU, autocast), 32768 rows; AdamW on the host
# (grads D2H into fresh pageable tensors, CPU AdamW, params H2D from pageable) unless fixed (fused AdamW on the GPU).
OA = dict(rows=32768, dims=[1024, 2048, 2048, 1024], steps=20)
OA_CPU_B = 80.0     # bytes per parameter of the single-tensor AdamW passes (see cpu_adam_gbs)
OA_HOST_OPS = 14    # eager ops that issue the GPU step (forward, loss, backward call, zero_grad, loss copy, event)


def m_offload(r, fixed=False):
    R, dims = OA["rows"], OA["dims"]
    hbm = r["hbm_tbs"]
    P = float(mlp_params(dims))
    n_t = len(dims) - 1
    c = {"gemm_bf16": t_flops(mlp_train_flops(R, dims), r["bf16_mid_tflops"]),
         "gelu_bf16": t_bytes(gelu_train_bytes(R, dims, 2), hbm),
         "input_cast_loss": t_bytes(6.0 * R * dims[0] + LOSS_B * R * dims[-1], hbm),
         "amp_casts": t_bytes(AMP_B * P, hbm)}
    host = OA_HOST_OPS * r["eager_op_us"] / 1e3
    if fixed:
        c["adamw_fused"] = t_bytes(ADAM_B[4] * P, hbm)
        gpu = sum(c.values())
        step = max(gpu, host)
        return {"c": c, "step": step, "gpu_busy_ms": gpu, "host_margin_ms": gpu - host,
                "rm": {}, "share": {}, "after": None}
    gpu = sum(c.values())
    # after the backward the GPU idles: D2H of the gradients (pageable, fresh, synchronous), AdamW on the CPU, H2D of
    # the weights (pageable), then the host issues the next forward (its first op); per tensor ~3 Python-level calls
    c["grads_d2h_pageable"] = t_link(4.0 * P, r["d2h_pageable_gbs"])
    c["adamw_on_cpu"] = t_link(OA_CPU_B * P, r["cpu_adam_gbs"])
    c["weights_h2d_pageable"] = t_link(4.0 * P, r["h2d_pageable_gbs"])
    c["host_calls_and_restart"] = (3 * n_t + 2) * r["eager_op_us"] / 1e3
    step = sum(c.values())
    after = m_offload(r, fixed=True)["step"]
    rm = {"cpu_optimizer": step - after}
    copies = c["grads_d2h_pageable"] + c["weights_h2d_pageable"]
    return {"c": c, "step": step, "gpu_busy_ms": gpu, "params_m": P / 1e6, "master_mb": 4.0 * P / 1e6,
            "cpu_share": pct(c["adamw_on_cpu"], step), "copy_ms": copies, "copy_share": pct(copies, step),
            "rm": rm, "share": shares(rm, step), "after": after, "gpu_idle_share": pct(step - gpu, step)}


# tower_cache: 6 residual blocks d 1024 -> 4096 -> 1024 (bias-free, fp32 params, autocast), 16384 rows, fused AdamW;
# torch.cuda.empty_cache() after every step unless fixed.
TC = dict(rows=8192, d=1024, hidden=4096, blocks=6, steps=25)
TC_FWD_OPS = 4       # per block: fc1 (input and weight casts inside), gelu, fc2, residual add
TC_FWD_MALLOCS = 5   # per block: input cast, fc1 out, gelu out, fc2 out, (half) the weight-cast segment + residual
TC_BLOCK_NEW_GB = (4.0 * TC["rows"] * (TC["d"] + TC["hidden"]) + 20.0 * (1 << 20)) / GB  # x cast, fc1 out, GELU out, fc2 out, 20 MB
TC_HOST_OPS = 4 * TC["blocks"] + 12


def m_tower(r, fixed=False):
    R, d, h, L = TC["rows"], TC["d"], TC["hidden"], TC["blocks"]
    hbm, mid = r["hbm_tbs"], r["bf16_mid_tflops"]
    P = float(L * 2 * d * h)
    blk_f = t_flops(2.0 * R * 2 * d * h, mid)
    # per block and token: input cast r4 w2 (6d), GELU r2 w2 on h, residual add r4 r2 w4 (10d); backward: grad cast to
    # bf16 for fc2 (6d), GELU backward r2 r2 w2 on h, the input cast's backward r2 w4 (6d), residual gradient sum r4 r4
    # w4 (12d): 40 d + 10 h bytes
    ew_blk_f = (16.0 * d + 4.0 * h) * R
    ew_blk = (40.0 * d + 10.0 * h) * R
    g_f = L * blk_f + t_bytes(L * ew_blk_f + 16.0 * R * d, hbm)          # + the loss's difference and square
    g_b = (L * 2 * blk_f - blk_f / 2) + t_bytes(L * (ew_blk - ew_blk_f) + 16.0 * R * d, hbm)
    g_opt = t_bytes((AMP_B + ADAM_B[4]) * P, hbm)
    c = {"gemm_bf16": L * 3 * blk_f - blk_f / 2,
         "elementwise_fp32_residual_gelu_loss": t_bytes(L * ew_blk + 32.0 * R * d, hbm),
         "amp_casts_adamw_fused": g_opt}
    gpu = g_f + g_b + g_opt
    host = TC_HOST_OPS * r["eager_op_us"] / 1e3
    if fixed:
        step = max(gpu, host)
        return {"c": c, "step": step, "gpu_busy_ms": gpu, "host_margin_ms": gpu - host, "rm": {}, "share": {},
                "after": None, "gemm_share": pct(c["gemm_bf16"], step)}
    seg, gb = r["tc_segments"], r["tc_segment_gb"]
    malloc = lambda n, size: n * r["cuda_malloc_us"] / 1e3 + size * r["cuda_malloc_ms_per_gb"]
    # end of step: empty_cache's first cudaFree waits for the GPU; the remaining frees run with the GPU idle
    free_all = seg * r["cuda_free_us"] / 1e3 + gb * r["cuda_free_ms_per_gb"]
    # next step: Python and the first op after the wake-up (sync_gap), the first malloc (the input cast) before the
    # first kernel; then the forward is issued with ~5 cudaMallocs per block: if the host's issue time exceeds the
    # GPU's forward the GPU waits for it (the backward allocates little: GPU-bound)
    t_first = r["sync_gap_us"] / 1e3 + malloc(1, 2.0 * R * d / GB)
    h_f = L * (TC_FWD_OPS * r["eager_op_us"] / 1e3 + malloc(TC_FWD_MALLOCS, TC_BLOCK_NEW_GB)) + malloc(2, 8.0 * R * d / GB)  # the loss's two fp32 tensors
    wait_f = max(0.0, h_f + 0.05 - g_f)
    c["cudafree_all_segments"] = free_all
    c["restart_first_op_and_malloc"] = t_first
    c["forward_waiting_for_mallocs"] = wait_f
    step = free_all + t_first + g_f + wait_f + g_b + g_opt
    after = m_tower(r, fixed=True)["step"]
    rm = {"allocator_churn": step - after}
    return {"c": c, "step": step, "gpu_busy_ms": gpu, "free_ms": free_all, "fwd_host_ms": h_f, "fwd_gpu_ms": g_f,
            "malloc_ms": malloc(seg, gb), "rm": rm, "share": shares(rm, step), "after": after,
            "gpu_idle_ms": step - gpu}


# pipe2_split: 8 pre-LN blocks d 2048 -> 8192 (biases, bf16) + final LN + head d -> d, 8192 rows per step; stages of 4
# blocks on 2 ranks with send / recv, no micro-batches; fixed: DDP over the whole tower, 4096 rows per rank.
PP = dict(rows=8192, d=2048, hidden=8192, blocks=8, steps=25)


def pp_params():
    d, h, L = PP["d"], PP["hidden"], PP["blocks"]
    blk = float(2 * d * h + h + 3 * d)
    return blk, 2.0 * d + d * d + d


def m_pipe(r, fixed=False):
    R, d, h, L = PP["rows"], PP["d"], PP["hidden"], PP["blocks"]
    hbm, mid = r["hbm_tbs"], r["bf16_mid_tflops"]
    P_blk, P_head = pp_params()
    rows = R // 2 if fixed else R
    blk_gemm = t_flops(2.0 * rows * 2 * d * h, mid)
    blk_ew = r["mlp_block_ew_tokd_bytes"] * rows * d
    blk_f = blk_gemm + t_bytes(EW_FWD * blk_ew, hbm)
    blk_b = 2 * blk_gemm + t_bytes((1 - EW_FWD) * blk_ew, hbm)
    head_f = t_flops(2.0 * rows * d * d, mid) + t_bytes(4.0 * rows * d + 18.0 * rows * d, hbm)
    head_b = t_flops(4.0 * rows * d * d, mid) + t_bytes(8.0 * rows * d + 22.0 * rows * d, hbm)
    if fixed:
        P = L * P_blk + P_head
        nodes = [(head_b, 2.0 * P_head)] + [(blk_b, 2.0 * P_blk) for _ in range(L)]
        _, left, total, nb = ddp_timeline(r, nodes)
        c = {"forward": L * blk_f + head_f, "backward": L * blk_b + head_b,
             "allreduce_left_after_backward": left,
             "ddp_bucket_copies": t_bytes(2 * 2.0 * P, hbm),
             "overlap_slowdown": r["overlap_penalty"] * (total - left),
             "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
        step = sum(c.values())
        return {"c": c, "step": step, "buckets": nb, "rm": {}, "share": {}, "after": None}
    half = L // 2
    P0, P1 = half * P_blk, half * P_blk + P_head
    send = t_link(2.0 * R * d, r["p2p_gbs"]) + r["ar_small_us"] / 1e3
    F0, B0 = half * blk_f, half * blk_b
    F1, B1 = half * blk_f + head_f, half * blk_b + head_b
    opt0, opt1 = t_bytes(ADAM_B[2] * P0, hbm), t_bytes(ADAM_B[2] * P1, hbm)
    c = {"rank0_forward": F0, "activation_send": send, "rank1_forward_loss": F1, "rank1_backward": B1,
         "gradient_send": send, "rank0_backward": B0, "rank0_adamw": opt0}
    step = sum(c.values())  # rank 1's AdamW runs while rank 0 runs its backward
    busy0, busy1 = F0 + B0 + opt0 + 2 * send, F1 + B1 + opt1 + 2 * send
    after = m_pipe(r, fixed=True)["step"]
    rm = {"pipeline_bubble": step - after}
    return {"c": c, "step": step, "rank0_busy_ms": busy0, "rank1_busy_ms": busy1,
            "rank0_idle_share": pct(step - busy0, step), "rank1_idle_share": pct(step - busy1, step),
            "params_m": (L * P_blk + P_head) / 1e6, "act_mb": 2.0 * R * d / 1e6,
            "rm": rm, "share": shares(rm, step), "after": after, "opt1_fits": B0 - opt1}


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, ranks=1, nvtx=True, est=45, steps=25, warmup=3):
    return D.base(name, f"heldout7/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def finish(m, b, b2, keys, after=True, fixed_case=None):
    m["lacks"] = [v for k, v in D.LACKS.items() if m["uses"].get(k) is False and (k != "ddp" or m["ranks"] > 1)]
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


def both(b, b2, key, nd=1):
    return f"{rng(b, key, nd)} (H200: {rng(b2, key, nd)})"


def build():
    out = {}

    # ---- probe_head (frozen_backward) and probe_head.fixed ---------------------------------------------------------
    R, d, h, L, K = PH["rows"], PH["d"], PH["hidden"], PH["blocks"], PH["classes"]
    P_bb, P_head = ph_params()
    args = ["--rows", R, "--d-model", d, "--hidden", h, "--blocks", L, "--classes", K]
    b, b2, keys = ev(m_probe)
    bf, bf2, _ = ev(lambda r: m_probe(r, fixed=True))
    m = base("probe_head", "probe_head.py", "planted", args, steps=PH["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused (head parameters only)",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["frozen_backbone"] = "left out of the optimizer only: requires_grad still on, forward under autograd"
    m["techniques"] = techniques(
        "freeze the backbone for real: backbone.requires_grad_(False) and run its forward under torch.no_grad() (or "
        "inference_mode), so the backward covers only the head; optionally precompute the features once if the inputs "
        "repeat",
        ["CUDA graphs / launch overhead (GPU-bound: ~100 launches per 20-30 ms step)", "bf16 (already)",
         "fused optimizer (already; the optimizer is 0.01 ms)", "TF32 (no fp32 GEMMs)",
         "flash/fused attention (no attention in this run)", "pinned memory / data loading (batches resident on the GPU)",
         "activation checkpointing (it would add recompute to a backward that should not exist)",
         "faster GEMMs / kernel tuning (the GEMMs run at tensor-core rate)"])
    m["planted"] = [planted(
        "frozen_backward", {"device": "GPU 0", "region": f"step_N > backward: {2 * 2 * L} backbone GEMMs (input and weight "
                            f"gradients of {L} blocks) plus LayerNorm / GELU / bias-gradient kernels and {4 * L + 2 * L} "
                            "gradient-accumulation adds, for parameters the optimizer never touches"},
        "backbone frozen properly (--fixed, captured as probe_head.fixed)", b, "rm.frozen_backward", "share.frozen_backward",
        f"The backbone ({b['params_bb_m'][0]:.1f} M bf16 parameters) is meant to be frozen, but only its exclusion from the "
        f"optimizer freezes it: with requires_grad on, autograd keeps its activations and the backward computes input and "
        f"weight gradients through all {L} blocks. Forward GEMMs {L} x 2 x {R} x 2 x {d} x {h} = "
        f"{L * 4.0 * R * d * h / 1e12:.2f} TFLOP at 550-800 = {rng(b, 'c.backbone_gemm_fwd')} ms; the backward's GEMMs twice "
        f"that, {rng(b, 'c.backbone_gemm_bwd')} ms; LayerNorm / GELU / residual / bias-gradient kernels 60-95 B per token x "
        f"d (26/74 of it in the forward): {rng(b, 'c.backbone_elementwise_fwd')} ms forward, "
        f"{rng(b, 'c.backbone_elementwise_bwd')} ms backward; AccumulateGrad adds the new gradients into .grad every step "
        f"(6 B per parameter, {rng(b, 'c.backbone_grad_accumulate')} ms). The head (LayerNorm, 2048 x 1000 GEMMs, cross-"
        f"entropy, fused AdamW) is {rng(b, 'c.head_fwd_bwd')} ms. Step {rng(b, 'step')} ms; with the backbone frozen "
        f"(no_grad forward, head-only backward) {rng(b, 'after')} ms: removed {rng(b, 'rm.frozen_backward')} ms = "
        f"{rng(b, 'share.frozen_backward', 1)} % -> critical (H200: {rng(b2, 'share.frozen_backward', 1)} %). The host issues "
        f"~{PH_HOST_OPS} ops per step ({rng(b, 'host_ms')} ms): GPU-bound. New cause name: frozen_backward.",
        accept=["frozen_backward"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / bias-gradient kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "high"}]
    m["expect_quiet"] = False
    m["question"] = ("Here are two profiles of our linear-probe fine-tuning on an H200 (a 1000-class head trained on top of a "
                     "frozen 8-block, 268 M-parameter bf16 feature extractor, 8192 samples per step), before and after we "
                     "changed how the backbone is frozen. Did the change help, by how much per step, and what limits the "
                     "step now?")
    m["diagnosis"] = (f"Before: the backbone was frozen only by leaving it out of the optimizer; its requires_grad was on, so "
                      f"every backward computed the input and weight gradients of all {L} blocks ({4 * L} GEMMs, "
                      f"{rng(b2, 'bwd_ms', 1)} ms of a {rng(b2, 'step', 1)} ms step on an H200) and accumulated gradients "
                      f"nobody uses. After: requires_grad off and a no_grad forward: {rng(b2, 'after', 1)} ms per step; the "
                      f"change removed {rng(b2, 'share.frozen_backward', 1)} % of the step (critical), ~3x faster. Now the "
                      f"backbone's forward GEMMs at tensor-core rate are {rng(bf2, 'fwd_gemm_share', 0)} % of the step, "
                      f"its LayerNorm / GELU / residual kernels {rng(bf2, 'ew_share', 0)} %, the head "
                      f"{rng(bf2, 'head_share', 1)} %: GPU-bound; nothing planted remains, the only headroom is fusing those "
                      "memory-bound elementwise kernels.")
    m["measure"] = [{"what": "step period", "query": Q7["step"], "expect_ms": r2(b["step"])},
                    {"what": "the backward", "query": Q7["nvtx_ranges"] + " (forward, backward)",
                     "expect": f"backward ~2x forward: {rng(b, 'bwd_ms', 1)} ms of backbone gradient work per step"}]
    m["new_cause"] = {"name": "frozen_backward", "why": "a backward pass (input and weight gradients, gradient accumulation) "
                      "through layers whose parameters are never updated, because they were left with requires_grad=True "
                      "and run under autograd; the kernels are efficient, the work is unnecessary: fixed by "
                      "requires_grad_(False) and a no_grad forward for the frozen part"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="probe_head.fixed")

    b, b2, keys = bf, bf2, ev(lambda r: m_probe(r, fixed=True))[2]
    m = base("probe_head.fixed", "probe_head.py", "fixed", args + ["--fixed"], steps=PH["steps"], est=40)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused (head parameters only)",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["frozen_backbone"] = "requires_grad_(False), forward under torch.no_grad()"
    m["techniques"] = techniques(None, ["freezing the backbone (already)", "bf16 (already)", "fused optimizer (already)",
                                        "TF32 (no fp32 GEMMs)", "CUDA graphs (GPU-bound: ~60 launches per 6-10 ms step)",
                                        "flash/fused attention (no attention in this run)",
                                        "activation checkpointing (no activations are kept for the backbone)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "the backbone's LayerNorm / GELU / residual kernels", "cause": "elementwise_unfused",
                       "max_severity": "high", "share_pct": r2(b["ew_share"])}]
    m["expect_quiet"] = True
    m["question"] = "We now freeze the backbone properly. Is anything still holding the step back?"
    m["diagnosis"] = (f"No: a step is ~{rng(b2, 'step', 1)} ms on an H200, {rng(b2, 'fwd_gemm_share', 0)} % of it the "
                      f"backbone's forward GEMMs at tensor-core rate, its elementwise kernels {rng(b2, 'ew_share', 0)} %, "
                      f"the head's forward, backward and fused AdamW {rng(b2, 'head_share', 1)} %; the host a step ahead. "
                      "Nothing planted remains; the only headroom is the memory-bound elementwise kernels (fusion, e.g. torch.compile).")
    m["measure"] = [{"what": "step period", "query": Q7["step"], "expect_ms": r2(b["step"])},
                    {"what": "kernels", "query": Q7["kernels"] + " (divide by the steps)",
                     "expect": f"{2 * L} backbone GEMMs per step (forward only), 3 head GEMMs, one fused AdamW kernel"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- pipe2_split (pipeline_bubble) -----------------------------------------------------------------------------
    R, d, h, L = PP["rows"], PP["d"], PP["hidden"], PP["blocks"]
    args = ["--rows", R, "--d-model", d, "--hidden", h, "--blocks", L]
    b, b2, keys = ev(m_pipe)
    bfx, bfx2, _ = ev(lambda r: m_pipe(r, fixed=True))
    m = base("pipe2_split", "pipe2_split.py", "planted", args, ranks=2, steps=PP["steps"], est=80)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused (per stage)", ddp=False,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["model_parallel"] = (f"2 pipeline stages of {L // 2} blocks, dist.send / dist.recv of the {2 * R * d / 1e6:.1f} MB "
                                   "activation and its gradient, one batch per step, no micro-batches")
    m["techniques"] = techniques(
        "the model fits on one GPU: use data parallelism (DDP over the whole tower, half the rows per GPU), so both GPUs "
        "compute all the time and only the gradients cross NVLink, overlapped with the backward; if the split must stay, "
        "split each batch into micro-batches and pipeline them (GPipe / 1F1B schedule, e.g. torch.distributed.pipelining) "
        "so the bubble shrinks to (stages - 1) / (micro-batches + stages - 1)",
        ["NCCL / interconnect tuning or a faster link (the transfers are ~0.1-0.3 ms; the waiting is for the other GPU's compute)",
         "overlapping the send / recv with compute as the fix (nothing runs beside them to overlap)",
         "a straggler or slow rank (the two ranks take turns)", "bf16 (already)", "fused optimizer (already)",
         "CUDA graphs / launch overhead", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (batches resident on the GPU)"])
    m["planted"] = [planted(
        "pipeline_bubble", {"ranks": [0, 1], "region": "every step: rank 0 idle in a receive (one long NCCL SendRecv kernel) "
                            "while rank 1 runs its forward and backward; rank 1 idle in a receive while rank 0 runs its "
                            "backward, optimizer and next forward"},
        "DistributedDataParallel over the whole tower, 4096 rows per rank (--fixed; not captured)", b, "rm.pipeline_bubble",
        "share.pipeline_bubble",
        f"{b['params_m'][0]:.0f} M bf16 parameters split into two stages of {L // 2} blocks; one batch of {R} rows goes "
        f"through them in turn with no micro-batching, so the two GPUs never compute at the same time. Per stage (H100): "
        f"forward {rng(b, 'c.rank0_forward')} ms (GEMMs {L // 2} x 2 x {R} x 2 x {d} x {h} at 550-800 plus LayerNorm / GELU / "
        f"residual at 26/74 of 60-95 B per token x d), backward {rng(b, 'c.rank0_backward')} ms (rank 1 adds the final "
        f"norm, the {d} x {d} head and the loss); each {2 * R * d / 1e6:.1f} MB transfer at 120-350 GB/s plus 15-40 µs = "
        f"{rng(b, 'c.activation_send', 3)} ms; rank 0's fused AdamW {rng(b, 'c.rank0_adamw')} ms (rank 1's runs during rank "
        f"0's backward). Step = F0 + send + F1 + B1 + send + B0 + AdamW0 = {rng(b, 'step', 1)} ms, each rank idle "
        f"{rng(b, 'rank0_idle_share', 0)} % (rank 0) / {rng(b, 'rank1_idle_share', 0)} % (rank 1) of it in NCCL receives. "
        f"With DDP (every rank the whole tower on {R // 2} rows: the same FLOPs per rank as one stage on {R}; "
        f"its {2.0 * (L * pp_params()[0] + pp_params()[1]) / 1e6:.0f} MB of gradients all-reduced in DDP buckets at 200-300 GB/s "
        f"during the backward, bucket copies, a fused AdamW over all parameters) {rng(b, 'after', 1)} ms: removed {rng(b, 'rm.pipeline_bubble', 1)} ms = "
        f"{rng(b, 'share.pipeline_bubble', 1)} % -> critical, high at the low corner (H200: "
        f"{rng(b2, 'share.pipeline_bubble', 1)} %). New cause name: pipeline_bubble.",
        accept=["pipeline_bubble", "exposed_communication"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / bias-gradient kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a 273 M-parameter bf16 residual MLP tower (8 blocks, d 2048) on 2 H200s, split model-parallel: "
                     "blocks 0-3 on GPU 0, blocks 4-7 and the head on GPU 1, activations passed with send/recv, 8192 rows "
                     "per step. The step is much slower than we expected from two GPUs. What is wrong, and what should we "
                     "do?")
    m["diagnosis"] = (f"A pipeline bubble: with one batch per step and no micro-batches, the two stages run strictly one after "
                      f"the other; each GPU spends ~{rng(b2, 'rank0_idle_share', 0)} % of the {rng(b2, 'step', 1)} ms step "
                      f"(H200) waiting in an NCCL receive (long SendRecv kernels) while the other computes. The transfers "
                      f"themselves are ~{rng(b2, 'c.activation_send', 2)} ms. The model fits on one GPU: use DDP (whole "
                      f"tower per GPU, 4096 rows each, gradients all-reduced during the backward): ~{rng(b2, 'after', 1)} ms "
                      f"per step ({rng(b2, 'share.pipeline_bubble', 0)} %, critical; high at the low corner); or keep the "
                      "split and pipeline micro-batches (GPipe / 1F1B). Not a straggler, not a slow link.")
    m["measure"] = [{"what": "step period per rank", "query": Q7["step"] + " (both ranks)", "expect_ms": r2(b["step"])},
                    {"what": "NCCL kernels", "query": Q7["nccl"],
                     "expect": f"2 SendRecv kernels per step and rank; on each rank one of them lasts about the other "
                               f"rank's compute ({rng(b, 'rank0_busy_ms', 1)} ms), the other ~{rng(b, 'c.activation_send', 2)} ms"},
                    {"what": "GPU split", "query": Q7["split"] + " over one step per rank",
                     "expect": f"NCCL-only time {rng(b, 'rank0_idle_share', 0)} % on rank 0, {rng(b, 'rank1_idle_share', 0)} % "
                               "on rank 1"}]
    m["new_cause"] = {"name": "pipeline_bubble", "why": "model (pipeline) parallelism without micro-batching: stages run one "
                      "after the other, so each GPU idles while the others compute, waiting in point-to-point receives; "
                      "the NCCL kernels are long because they wait, not because the link is slow (exposed_communication "
                      "accepted); fixed by data parallelism when the model fits, or by micro-batch pipelining"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- tower_cache (allocator_churn; no NVTX) --------------------------------------------------------------------
    R, d, h, L = TC["rows"], TC["d"], TC["hidden"], TC["blocks"]
    args = ["--rows", R, "--d-model", d, "--hidden", h, "--blocks", L]
    b, b2, keys = ev(m_tower)
    m = base("tower_cache", "tower_cache.py", "planted", args, nvtx=False, steps=TC["steps"], est=45)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused",
                     host_sync="torch.cuda.empty_cache() every step (cudaFree waits for the device); event sync on the "
                               "previous step")
    m["uses"]["allocator"] = "PyTorch caching allocator, emptied after every step"
    m["techniques"] = techniques(
        "remove torch.cuda.empty_cache() from the training loop (call it, if at all, between phases such as before an "
        "evaluation); if reserved memory is the worry, cap it with torch.cuda.set_per_process_memory_fraction or reduce "
        "fragmentation with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True instead of handing segments back every step",
        ["CUDA graphs as the top fix (the host time is cudaMalloc / cudaFree, not kernel launches)", "bf16 (already)",
         "fused optimizer (already)", "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (batches resident on the GPU)", "activation checkpointing",
         "a larger batch as the top fix"])
    m["planted"] = [planted(
        "allocator_churn", {"device": "GPU 0", "region": "every iteration (no NVTX): after the fused AdamW kernel a run of "
                            "~35 cudaFree calls with the GPU idle, then cudaMalloc calls interleaved with the next forward's "
                            "launches"},
        "no empty_cache() in the loop (--fixed; not captured)", b, "rm.allocator_churn", "share.allocator_churn",
        f"torch.cuda.empty_cache() after every step returns all ~32-40 cached segments ({rng(b, 'c.cudafree_all_segments')} "
        f"ms of cudaFree at 15-80 µs per call plus 0.1-1.5 ms per GB over 1.25-1.5 GB; the first cudaFree waits for the "
        f"step's kernels, the rest run with the GPU idle). The next step reallocates them: the first op waits for the "
        f"wake-up and its cudaMalloc ({rng(b, 'c.restart_first_op_and_malloc', 2)} ms), and the forward's issue "
        f"(4 eager ops and ~5 cudaMallocs per block, {rng(b, 'fwd_host_ms')} ms) can fall behind the GPU's forward "
        f"({rng(b, 'fwd_gpu_ms')} ms): {rng(b, 'c.forward_waiting_for_mallocs')} ms of waiting. The GPU's own step: GEMMs "
        f"{(L * 3 * 4.0 * R * d * h - 2.0 * R * d * h) / 1e12:.2f} TFLOP at 550-800 = {rng(b, 'c.gemm_bf16')} ms, fp32 "
        f"residual stream / GELU / casts / loss {rng(b, 'c.elementwise_fp32_residual_gelu_loss')} ms, AMP weight casts + "
        f"fused AdamW {rng(b, 'c.amp_casts_adamw_fused')} ms: {rng(b, 'gpu_busy_ms')} ms. Step {rng(b, 'step')} ms; "
        f"without the per-step empty_cache {rng(b, 'after')} ms: removed {rng(b, 'rm.allocator_churn')} ms = "
        f"{rng(b, 'share.allocator_churn', 1)} % -> high at the middle, medium to critical at the corners (H200: "
        f"{rng(b2, 'share.allocator_churn', 1)} %, its middle just above 40 %: critical). The band is wide because the driver's cudaMalloc / cudaFree costs are "
        "known only to a factor of 5-15. New cause name: allocator_churn.",
        accept=["allocator_churn", "host_bound", "host_sync"], b2=b2)]
    m["tolerated"] = [{"what": "fp32 residual stream, GELU and cast kernels (memory-bound)", "cause": "elementwise_unfused",
                       "max_severity": "high"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a 50 M-parameter residual MLP (6 blocks, d 1024 -> 4096, fp32 weights with bf16 autocast, "
                     "fused AdamW) on one H200, 8192 rows per step. Steps take noticeably longer than the model's FLOPs "
                     "suggest. Where does the time go?")
    m["diagnosis"] = (f"Into the CUDA allocator: every iteration ends with torch.cuda.empty_cache(), so ~35 segments "
                      f"(~1.3-1.5 GB) are cudaFree'd after the optimizer (the first call waits for the GPU, the rest run "
                      f"with it idle) and cudaMalloc'd again during the next forward, whose issue then falls behind the "
                      f"GPU: {rng(b2, 'rm.allocator_churn', 1)} ms of GPU idle per {rng(b2, 'step', 1)} ms step on an H200. "
                      f"Remove empty_cache() from the loop (or call it between phases; use expandable_segments / a memory "
                      f"fraction if reserved memory matters): ~{rng(b2, 'after', 1)} ms per step "
                      f"({rng(b2, 'share.allocator_churn', 0)} %: a wide band whose middle sits at the high / critical boundary). Secondary: the fp32 "
                      "residual stream's elementwise kernels. The GEMMs and AdamW are fine.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q7["anchor"] + " with ANCHOR = the fused AdamW kernel (once per "
                     "step), C = 1, WARM = 3", "expect_ms": r2(b["step"])},
                    {"what": "idle split", "query": Q7["starved"] + " over one step",
                     "expect": f"{rng(b, 'gpu_idle_ms', 1)} ms of idle per step, most of it in the gap after the AdamW kernel "
                               "(launch-starved: the host is in cudaFree / cudaMalloc); ~32-40 cudaFree and as many "
                               "cudaMalloc calls per step in the CUDA API rows"}]
    m["new_cause"] = {"name": "allocator_churn", "why": "device memory handed back to the driver and reallocated every step "
                      "(torch.cuda.empty_cache() in the loop, or an allocator without caching): cudaFree waits for the "
                      "device and both calls cost host time on the critical path, idling the GPU; host_bound / host_sync "
                      "accepted, but the fix is keeping the cache (no empty_cache in the loop)"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- offload_adam (cpu_optimizer) ------------------------------------------------------------------------------
    R, dims = OA["rows"], OA["dims"]
    args = ["--rows", R, "--dims", ",".join(map(str, dims))]
    b, b2, keys = ev(m_offload)
    m = base("offload_adam", "offload_adam.py", "planted", args, steps=OA["steps"], est=55)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW on the CPU (torch.optim.AdamW over host tensors)",
                     host_sync="blocking D2H copies of the gradients and pageable H2D copies of the weights every step; "
                               "event sync on the previous step")
    m["uses"]["offload"] = "fp32 master weights and AdamW moments in (pageable) host memory"
    m["techniques"] = techniques(
        "keep the optimizer on the GPU: torch.optim.AdamW(fused=True) over the GPU parameters (the moments are 67 MB); "
        "offloading only pays for models whose optimizer state does not fit, and then with pinned buffers, a fused CPU "
        "Adam and copies overlapped with the backward (DeepSpeed ZeRO-Offload style)",
        ["CUDA graphs / launch overhead (the GPU idles for the CPU optimizer, not for launches)", "bf16 (already)",
         "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory alone as the fix (the CPU AdamW stays on the critical path)",
         "data loading (batches resident on the GPU)", "a faster GEMM / larger batch as the top fix",
         "more CPU threads as the top fix"])
    m["planted"] = [planted(
        "cpu_optimizer", {"device": "GPU 0", "region": "step_N > optimizer: 3 D2H copies of the gradients, a long span with no "
                          "GPU work while AdamW runs on the CPU, then 3 pageable H2D copies of the weights"},
        "AdamW(fused=True) on the GPU (--fixed; not captured)", b, "rm.cpu_optimizer", "share.cpu_optimizer",
        f"{b['params_m'][0]:.1f} M fp32 parameters ({b['master_mb'][0]:.1f} MB): after each backward the gradients go to the "
        f"host into fresh pageable tensors (4-14 GB/s: {rng(b, 'c.grads_d2h_pageable')} ms), torch.optim.AdamW's single-"
        f"tensor CPU path streams ~80 B per parameter at 8-40 GB/s ({rng(b, 'c.adamw_on_cpu', 1)} ms), and the weights come "
        f"back from pageable memory (6-14 GB/s: {rng(b, 'c.weights_h2d_pageable')} ms); the GPU idles throughout. The GPU's "
        f"own step: GEMMs {mlp_train_flops(R, dims) / 1e12:.2f} TFLOP at 550-800 = {rng(b, 'c.gemm_bf16')} ms, GELU / casts "
        f"/ loss {b['c.gelu_bf16'][0] + b['c.input_cast_loss'][0] + b['c.amp_casts'][0]:.2f}-"
        f"{b['c.gelu_bf16'][1] + b['c.input_cast_loss'][1] + b['c.amp_casts'][1]:.2f} ms: "
        f"{rng(b, 'gpu_busy_ms')} ms. Step {rng(b, 'step', 1)} ms; with fused AdamW on the GPU {rng(b, 'after')} ms: removed "
        f"{rng(b, 'rm.cpu_optimizer', 1)} ms = {rng(b, 'share.cpu_optimizer', 1)} % -> critical (H200: "
        f"{rng(b2, 'share.cpu_optimizer', 1)} %). The CPU AdamW is {rng(b, 'cpu_share', 0)} % of the step, the copies "
        f"{rng(b, 'copy_share', 0)} %. New cause name: cpu_optimizer.",
        accept=["cpu_optimizer", "host_bound", "host_sync"], b2=b2)]
    m["tolerated"] = [{"what": "the pageable D2H / H2D copies of gradients and weights", "cause": "copy_bound_pageable",
                       "max_severity": "high"},
                      {"what": "GELU / casts / loss kernels", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("Our small regression MLP (8.4 M parameters, 32768 rows per step, bf16 autocast, AdamW) trains on one "
                     "H200. The GPU is idle most of the time and a step takes tens of milliseconds. Why, and what would "
                     "you change?")
    m["diagnosis"] = (f"The optimizer runs on the CPU: in the optimizer range the gradients are copied to pageable host "
                      f"memory, torch.optim.AdamW steps fp32 master weights on the host ({rng(b2, 'c.adamw_on_cpu', 0)} ms), "
                      f"and the weights are copied back, all with the GPU idle ({rng(b2, 'gpu_idle_share', 0)} % of a "
                      f"{rng(b2, 'step', 0)} ms step on an H200). The model's optimizer state is 67 MB: use "
                      f"AdamW(fused=True) on the GPU: ~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.cpu_optimizer', 0)} %, "
                      "critical). Pinning the buffers would only shave the copies. The GEMMs and the forward / backward are "
                      "fine.")
    m["measure"] = [{"what": "step period", "query": Q7["step"], "expect_ms": r2(b["step"])},
                    {"what": "the optimizer range", "query": Q7["nvtx_ranges"] + " (optimizer)",
                     "expect": f"{rng(b, 'rm.cpu_optimizer', 0)} ms per step of CPU time, 3 D2H and 3 H2D pageable copies "
                               "inside it and no kernel"},
                    {"what": "copies", "query": Q7["memcpy"],
                     "expect": f"per step 3 D2H and 3 H2D pageable copies of {b['master_mb'][0]:.1f} MB in all each way"}]
    m["new_cause"] = {"name": "cpu_optimizer", "why": "the optimizer step run on the CPU over host copies of the parameters "
                      "(offloaded master weights / moments): gradients copied down, a slow CPU AdamW, weights copied back, "
                      "the GPU idle throughout; host_bound / host_sync accepted, but the fix is a (fused) GPU optimizer, not "
                      "faster copies"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- score_loop (unbatched_requests) ---------------------------------------------------------------------------
    n, d, h, L = SL["requests"], SL["d"], SL["hidden"], SL["blocks"]
    args = ["--requests", n, "--d-model", d, "--hidden", h, "--blocks", L]
    b, b2, keys = ev(m_score)
    m = base("score_loop", "score_loop.py", "planted", args, steps=SL["steps"], est=45)
    m["uses"] = uses("bf16 (weights and compute)", "none (inference)",
                     host_sync="event sync on the previous tick (lag 1: never idles the GPU)")
    m["uses"]["batching"] = f"none: {n} requests per tick scored one at a time (M = 1)"
    m["techniques"] = techniques(
        f"batch the requests: score each tick's {n} queued requests in one forward (dynamic batching in the serving "
        f"loop), so the {b['weights_gb'][0]:.1f} GB of weights are read once per tick instead of once per request",
        ["CUDA graphs / launch overhead (the GPU is busy: each request is ~1-2 ms of weight reads)", "bf16 (already)",
         "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)", "optimizer changes (inference)",
         "pinned memory / data loading (requests resident on the GPU)",
         "faster GEMM kernels / kernel tuning (the GEMVs run near HBM bandwidth)",
         "a second GPU or model parallelism as the top fix"])
    m["planted"] = [planted(
        "unbatched_requests", {"device": "GPU 0", "region": f"step_N: {n} repetitions of the same {2 * L + 1} matrix-vector "
                               f"kernels (M = 1), {2 * L} of them reading a 1.07 GB weight each, with tiny GELU / add "
                               "kernels between them"},
        f"one batched forward per tick, M = {n} (--fixed; not captured)", b, "rm.unbatched_requests",
        "share.unbatched_requests",
        f"Each request is a forward with M = 1: {2 * L} GEMVs over {d} x {h} bf16 weights, {b['weights_gb'][0]:.2f} GB read "
        f"from HBM per request at 2.0-3.0 TB/s (H100; 2.9-4.3 on H200) and only 2 FLOPs per weight; plus {SL_TINY} tiny "
        f"kernels at 2-6 µs. Per request {rng(b, 'per_request_ms', 3)} ms of GPU time against {rng(b, 'per_request_host_ms', 2)} "
        f"ms of host issue ({SL_HOST_OPS} eager ops): GPU-bound. Tick = {n} x that = {rng(b, 'step', 1)} ms. Batched "
        f"(M = {n}): the weights are read once, by GEMM kernels at 0.7-1.05 x the gemv rate ({2 * n} FLOPs per weight: the "
        f"reads still dominate): "
        f"{rng(b, 'after', 2)} ms: removed {rng(b, 'rm.unbatched_requests', 1)} ms = {rng(b, 'share.unbatched_requests', 1)} "
        f"% -> critical (H200: {rng(b2, 'share.unbatched_requests', 1)} %). New cause name: unbatched_requests.",
        accept=["unbatched_requests", "small_batch"], b2=b2)]
    m["tolerated"] = [{"what": "tiny GELU / add / sigmoid kernels between the GEMVs", "cause": "launch_bound",
                       "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("Our scoring service runs a 2.15 B-parameter bf16 ranking tower on one H200. Each tick drains a queue "
                     "of 16 requests and takes ~20 ms; the GPU shows 100 % utilisation all the time. Can we serve more "
                     "requests per second, and how?")
    m["diagnosis"] = (f"Yes, by about an order of magnitude: the loop scores the queued requests one at a time (M = 1), so every request reads all "
                      f"{b['weights_gb'][0]:.1f} GB of weights from HBM ({2 * L} matrix-vector kernels at near-peak "
                      f"bandwidth, ~{rng(b2, 'per_request_ms', 2)} ms per request on an H200): the GPU is busy, but with one "
                      f"multiply-add per weight read. Batch the tick's {n} requests into one forward: ~{rng(b2, 'after', 1)} ms "
                      f"per tick instead of ~{rng(b2, 'step', 0)} ({rng(b2, 'share.unbatched_requests', 1)} %, critical). The "
                      "kernels themselves are efficient; launch overhead is not the issue.")
    m["measure"] = [{"what": "tick period", "query": Q7["step"], "expect_ms": r2(b["step"])},
                    {"what": "GEMV kernels", "query": Q7["kernels"] + " (divide by the steps)",
                     "expect": f"{2 * L * n} large GEMV / skinny-GEMM kernels per tick, {rng(b, 'c.gemv_weight_reads', 1)} ms "
                               f"together (~{rng(b, 'per_request_ms', 2)} ms per request)"}]
    m["new_cause"] = {"name": "unbatched_requests", "why": "inference requests processed one at a time (batch 1) although "
                      "several are waiting: every request re-reads all weights in memory-bound matrix-vector kernels, so "
                      "the GPU looks busy while its throughput is a fraction of what batching gives; small_batch accepted; "
                      "fixed by (dynamic) batching"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.table)
