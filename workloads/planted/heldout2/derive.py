#!/usr/bin/env python3
"""First-principles truth for the second held-out set (heldout2): writes heldout2/manifests/<case>.json from
FLOPs, bytes and rate bands alone (no capture, no aisp output), with the helpers of ../derive.py.

    python3 workloads/planted/heldout2/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout2/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout2/derive.py --table    # the README table only

Method: as ../derive.py. Each case is a small model of one steady step; every part is FLOPs / rate or
bytes / bandwidth (or a host cost band), a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the device
where the problem sits; severity: info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical.
The new bands below (attention, skinny GEMMs, host NumPy work, small pageable copies, 2-rank all-reduce)
say where each comes from; the rest are ../derive.py's.
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
ADAM_B, AMP_B, DDP_B, GB, LOSS_B, NOT_ATT, Q = D.ADAM_B, D.AMP_B, D.DDP_B, D.GB, D.LOSS_B, D.NOT_ATT, D.Q
gelu_train_bytes, mlp_forward, mlp_params, mlp_train_flops = D.gelu_train_bytes, D.mlp_forward, D.mlp_params, D.mlp_train_flops
pct, planted, r2, rng, techniques, uses = D.pct, D.planted, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link

SET = "heldout2"

# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms.
NEW_H100 = {
    "bf16_mid_tflops": (550.0, 800.0),
    "bmm_mem_tbs": (1.8, 3.0),
    "attn_train_d64_tflops": (200.0, 450.0),
    "attn_train_d128_tflops": (250.0, 480.0),
    "attn_fwd_d128_tflops": (300.0, 600.0),
    "sgemm_skinny_tflops": (40.0, 55.0),
    "bf16_skinny_tflops": (400.0, 750.0),
    "np_prep_ms": (10.0, 60.0),
    "small_copy_us": (25.0, 60.0),
    "small_pageable_gbs": (15.0, 40.0),
    "launch_us": (8.0, 40.0),
    "host_stack_gbs": (2.0, 10.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    "ew_tokd_bytes": (150.0, 250.0),
}
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 1024 (8192 x 1024 x {1024, 3072, 4096}): below the 8192^3 rate "
                       "(732-787 measured) as tiles and waves shrink; an assumption, widened down to 550",
    "bmm_mem_tbs": "batched GEMMs on the S x S score tensor with k = head_dim = 64 (q @ k^T writes it, p @ v reads it): "
                   "64 FLOP per byte, below the ~250 FLOP/B ridge, so HBM-bound; cuBLAS strided-batched kernels reach "
                   "60-100 % of the 3.0 TB/s copy rate (assumption). H200: 2.6-4.2",
    "attn_train_d64_tflops": "SDPA flash forward + backward, bf16, head_dim 64, non-causal, counted as 14*B*S^2*D FLOPs "
                             "(forward 4, backward 10 with the recomputed scores); FlashAttention-2 on H100 reaches "
                             "~300-350 forward and ~200-300 backward at head_dim 64 (published FA2 figures); band 200-450",
    "attn_train_d128_tflops": "the same at head_dim 128 (FA2 ~350 forward, ~250-300 backward); band 250-480",
    "attn_fwd_d128_tflops": "SDPA flash forward only, bf16, head_dim 128, non-causal, counted as 4*B*S^2*D; band 300-600",
    "sgemm_skinny_tflops": "FP32 SGEMM (TF32 off) with N or K = 512 (8192 x 4096 x 512 and 8192 x 512 x 4096): "
                           "51.7 at 8192^3 (BENCHMARKS.md), less for a thin operand (fewer tiles); band 40-55",
    "bf16_skinny_tflops": "bf16 GEMMs with N or K = 512: the same thin shapes on tensor cores; band 400-750 (assumption)",
    "np_prep_ms": "the NumPy augmentation of one 128 x 112 x 112 x 3 uint8 batch (gather, 96 x 96 crop, flip of ~half, "
                  "astype float32, subtract/divide by per-channel mean/std broadcast over the last axis, HWC -> CHW "
                  "copy): 21-43 ms measured on a 2-vCPU Xeon dev container (single-threaded ufuncs, ~100 MB of "
                  "strided traffic); the capture host's CPU is unknown: band 10-60 ms. Re-derive from the 'data' "
                  "NVTX range (sql/nvtx_range_ms.sql)",
    "small_copy_us": "one small tensor.to('cuda') from pageable memory (Python, allocation, cudaMemcpyAsync ~20 µs and "
                     "cudaStreamSynchronize ~7 µs under nsys): the GPU idles 33-60 µs between back-to-back small pageable "
                     "copies in tests/data/workloads/tiny_kernels.sqlite (1 KB) and 25-56 µs in train_adam_storm.sqlite "
                     "(2 KB); band 25-60 µs. Re-derive with sql/h2d_small_copies.sql",
    "small_pageable_gbs": "DMA rate of one small (64-256 KB) pageable H2D copy: 27 GB/s (66 KB) and 36-40 GB/s (256 KB) "
                          "in the same exports; band 15-40",
    "launch_us": "host cost of one eager PyTorch op launch under nsys on this pool: cudaLaunchKernel 9-10 µs of API "
                 "time (tiny_kernels.sqlite), 30-36 µs per op with Python and the dispatcher; band 8-40 µs",
    "host_stack_gbs": "torch.stack of 256 host tensors into a pinned buffer (16.8 MB written): 2-10 GB/s of output "
                      "(one memcpy-like pass per sample, single thread; assumption)",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 25-270 MB "
                     "messages: torch busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (BENCHMARKS.md), "
                     "329 at 1 GiB on 2 H100 (KINDS.md); band 200-300",
    "ew_tokd_bytes": "elementwise bytes per token x d_model per transformer block under bf16 autocast with an fp32 "
                     "residual stream: LayerNorms in fp32 (8 fwd, ~20 bwd each), casts to bf16 for the GEMMs (6), "
                     "residual adds (10-12), GELU on 4d (16 fwd, 24 bwd), attention transposes and q/k/v stacking "
                     "(~20): ~196 counted, band 150-250",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **dict(NEW_H100, bmm_mem_tbs=(2.6, 4.2)))
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q2 = dict(Q)
Q2.update({
    "nvtx_ranges": "sql/nvtx_range_ms.sql: CPU duration of each NVTX range name (count, mean, median-ish)",
    "small_copies": "sql/h2d_small_copies.sql: H2D copies under 1 MB: count, size, DMA time and the GPU-side gap "
                    "between consecutive ones",
})


# ---------------------------------------------------------------------------------------------------
# DDP on 2 ranks: a timeline of the backward with DDP's buckets.
FIRST_BUCKET = float(1 << 20)   # DDP's first bucket: 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES)
BUCKET = 25.0 * (1 << 20)       # bucket_cap_mb = 25


def ddp_timeline(r, nodes):
    """nodes: [(ms, grad bytes made ready at the node's end)] in backward order. DDP (rebuilt after the first
    step in ready order) fills buckets in that order, closing the first at >= 1 MiB and the others at
    >= 25 MiB (the last one with whatever is left); one all-reduce per bucket, in order on one
    communicator, each starting when its bucket is full and the previous one is done, lasting
    bytes / algbw + a per-call latency. Returns (backward ms, all-reduce ms left after the backward,
    all-reduce ms in all, buckets)."""
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


def mlp_bwd_nodes(r, rows, dims, loss_bytes=22.0):
    """Backward nodes of a bias-free GELU MLP (GELU in front of every layer but the first), last layer
    first: its GEMMs (weight grad, and input grad except for the first layer), the GELU backward in front
    of it (reads grad and input, writes grad: 6 B per bf16 element), the loss backward on the last one.
    Each node makes its layer's fp32 weight gradient (4 B per parameter) ready."""
    nodes, n = [], len(dims) - 1
    for i in reversed(range(n)):
        a, b = dims[i], dims[i + 1]
        ms = t_flops((2 if i > 0 else 1) * 2.0 * rows * a * b, r["bf16_tflops"])
        if i > 0:
            ms += t_bytes(6.0 * rows * a, r["hbm_tbs"])
        if i == n - 1:
            ms += t_bytes(loss_bytes * rows * b, r["hbm_tbs"])
        nodes.append((ms, 4.0 * a * b))
    return nodes


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


# ---------------------------------------------------------------------------------------------------
# The cases (models of one steady step).

# attn_eager: 4 pre-LN blocks, d 1024, 16 heads of 64, S 1024, batch 8, bf16 parameters, fused Adam.
AE = dict(batch=8, seq=1024, d=1024, heads=16, blocks=4, head=256, steps=30)


def m_attn(r, fixed=False):
    B, S, d, H, L, O = AE["batch"], AE["seq"], AE["d"], AE["heads"], AE["blocks"], AE["head"]
    T, Z = B * S, B * H * S * S  # tokens; score elements per layer
    hbm = r["hbm_tbs"]
    # Linear layers: qkv 3d^2, proj d^2, up 4d^2, down 4d^2 = 12 d^2 per block, x2 FLOPs x3 (forward, weight
    # grad, input grad: every block's input grad is needed, the first for LayerNorm 1's parameters); head d x 256.
    c = {"linear_gemm_bf16": t_flops(L * 72.0 * T * d * d + 6.0 * T * d * O, r["bf16_mid_tflops"]),
         # per block per token x d: LayerNorms 2 x 4 fwd + 2 x 10 bwd, residual adds 12 fwd + 12 bwd, GELU on 4d 16 fwd +
         # 24 bwd, attention-output transpose copy 4 + 4, q/k/v grad stacking 12: 112 B (bf16)
         "layernorm_gelu_residual_copies": t_bytes(L * 112.0 * T * d, hbm),
         "loss": t_bytes(LOSS_B * T * O, hbm),
         "fused_adam_bf16": t_bytes(ADAM_B[2] * (L * (12.0 * d * d + 4 * d) + d * O), hbm)}
    flash = t_flops(L * 14.0 * B * S * S * d, r["attn_train_d64_tflops"])
    # Eager attention, bytes per score element (bf16 2 B, fp32 4 B): forward: *scale r2 w2, .float() r2 w4,
    # softmax r4 w4 (one pass: rows of 1024 fit a warp), .type_as r4 w2 = 24; backward: type_as grad r2 w4, softmax
    # backward r4 (grad) r4 (output) w4, .float() grad r4 w2, *scale r2 w2 = 28. 52 B in elementwise kernels.
    ew = t_bytes(L * 52.0 * Z, hbm)
    # The six batched GEMMs touch the scores once each: q@k^T writes 2, p@v reads 2, dP = dO@v^T writes 2, dV = p^T@dO
    # reads 2, dQ and dK read dS 2 + 2 = 12 B per element, at 64 FLOP per byte: HBM-bound (max with their FLOPs).
    bmm = L * max(t_bytes(12.0 * Z, r["bmm_mem_tbs"]), t_flops(12.0 * B * S * S * d, r["bf16_mid_tflops"]))
    # torch.matmul on the permuted q, k, v views copies them contiguous first (r2 w2 each): eager only.
    qkv_copies = t_bytes(L * 12.0 * T * d, hbm)
    if fixed:
        c["attention_sdpa_flash"] = flash
    else:
        c["attention_eager_elementwise"] = ew
        c["attention_eager_bmm"] = bmm
        c["attention_eager_qkv_copies"] = qkv_copies
    step = sum(c.values())
    out = {"c": c, "step": step, "flash": flash}
    if fixed:
        out.update(rm={}, share={}, after=None)
        return out
    rm = {"elementwise_unfused": ew + bmm + qkv_copies - flash, "attention_elementwise_only": ew}
    out.update(rm=rm, share=shares(rm, step), after=step - rm["elementwise_unfused"],
               eager_attention_share=pct(ew + bmm + qkv_copies, step), score_gb_per_step=L * 64.0 * Z / GB)
    return out


# mixed_adapter: 4 bf16 encoder blocks + 2 fp32 adapters, 8192 tokens, inference.
MA = dict(tokens=8192, d=4096, ffn=8192, blocks=4, adapters=2, r=512, steps=40)


def m_adapter(r, fixed=False):
    T, d, f, Le, La, R = MA["tokens"], MA["d"], MA["ffn"], MA["blocks"], MA["adapters"], MA["r"]
    hbm = r["hbm_tbs"]
    c = {"encoder_gemm_bf16": t_flops(Le * 4.0 * T * d * f, r["bf16_tflops"]),
         # LayerNorm r2 w2 on d, GELU r2 w2 on f, residual add r2 r2 w2 on d
         "encoder_layernorm_gelu_residual": t_bytes(Le * T * (10.0 * d + 4.0 * f), hbm)}
    ad_fl = La * 4.0 * T * d * R
    sg = t_flops(ad_fl, r["sgemm_skinny_tflops"])
    # fp32 adapter: x.float() r2 w4 on d, GELU fp32 r4 w4 on r, residual add fp32 r4 r4 w4 on d, .to(bf16) r4 w2 on d
    ew32 = t_bytes(La * T * (24.0 * d + 8.0 * R), hbm)
    bf = t_flops(ad_fl, r["bf16_skinny_tflops"])
    ew16 = t_bytes(La * T * (6.0 * d + 4.0 * R), hbm)  # bf16 adapter: GELU r2 w2 on r, add r2 r2 w2 on d
    if fixed:
        c["adapter_gemm_bf16"] = bf
        c["adapter_gelu_residual_bf16"] = ew16
    else:
        c["adapter_gemm_fp32_simt"] = sg
        c["adapter_casts_gelu_residual_fp32"] = ew32
    step = sum(c.values())
    if fixed:
        return {"c": c, "step": step, "rm": {}, "share": {}, "after": None}
    rm = {"fp32_gemm_simt": sg + ew32 - bf - ew16, "tf32_only": sg - t_flops(ad_fl, r["tf32_tflops"])}
    return {"c": c, "step": step, "rm": rm, "share": shares(rm, step), "after": step - rm["fp32_gemm_simt"],
            "sgemm_share_of_step": pct(sg, step)}


# host_augment: NumPy augmentation in the loop + loss.item(); patch MLP under autocast.
HA = dict(batch=128, raw=112, crop=96, patch=8, width=4096, layers=4, classes=100, steps=30)


def m_host_aug(r, fixed=False):
    B, C, P, W, L, K = HA["batch"], HA["crop"], HA["patch"], HA["width"], HA["layers"], HA["classes"]
    hbm = r["hbm_tbs"]
    T, feat = B * (C // P) ** 2, 3 * P * P  # 18432 tokens of 192
    dims = [feat] + [W] * L
    params = mlp_params(dims) + W * K
    gemm = mlp_train_flops(T, dims) + 6.0 * B * W * K
    # GELU after each of the 4 layers (bf16: 4 B fwd, 6 B bwd per element), mean over tokens (read 2 B fwd,
    # write the expanded grad 2 B bwd), patchify copy of the fp32 batch (r4 w4) and its autocast cast (r4 w2),
    # AMP weight casts and fused AdamW on fp32 parameters.
    ew = L * 10.0 * T * W + 4.0 * T * W + 14.0 * T * feat + (AMP_B + ADAM_B[4]) * params
    comp = t_flops(gemm, r["bf16_tflops"]) + t_bytes(ew, hbm)
    xbytes = 4.0 * B * 3 * C * C  # the augmented fp32 batch, 14.2 MB
    gap = r["sync_gap_us"] / 1e3  # loss.item() at the end of every step
    c = {"gpu_compute": comp, "item_sync_gap": gap}
    if fixed:
        # GPU augmentation: crop + flip (uint8, ~3 B), float (r1 w4), subtract, divide, contiguous (r4 w4 each): ~36 B
        # per element; after loss.item() the GPU waits for ~12 small launches (augmentation, first forward ops).
        c["gpu_augment"] = t_bytes(36.0 * B * 3 * C * C, hbm)
        c["launch_ramp_after_sync"] = 12 * r["launch_us"] / 1e3
        step = sum(c.values())
        return {"c": c, "step": step, "rm": {}, "share": {}, "after": None,
                "host_share_left": pct(c["launch_ramp_after_sync"] + gap, step)}
    c["host_numpy_augment"] = r["np_prep_ms"]
    c["h2d_pageable_batch"] = t_link(xbytes, r["h2d_pageable_gbs"])
    c["h2d_labels_small_copy"] = r["small_copy_us"] / 1e3
    c["launch_ramp_after_copy"] = 5 * r["launch_us"] / 1e3
    step = sum(c.values())
    after = comp + gap + t_bytes(36.0 * B * 3 * C * C, hbm) + 12 * r["launch_us"] / 1e3
    rm = {"host_bound": step - after}
    return {"c": c, "step": step, "rm": rm, "share": shares(rm, step), "after": after,
            "numpy_share_of_step": pct(r["np_prep_ms"], step), "copy_share_of_step": pct(c["h2d_pageable_batch"], step),
            "gpu_busy_share": pct(comp, step)}


# small_copies: 256 samples x (features 32 x 512 fp32 + int64 label), each tensor .to("cuda") on its own.
SC = dict(samples=256, seq=32, features=512, width=8192, layers=3, classes=10, steps=30)


def m_small(r, fixed=False):
    N, L, Fe, W, K = SC["samples"], SC["seq"], SC["features"], SC["width"], SC["classes"]
    hbm = r["hbm_tbs"]
    T = N * L
    dims = [Fe] + [W] * SC["layers"] + [Fe]
    params = mlp_params(dims) + Fe * K
    gemm = mlp_train_flops(T, dims) + 6.0 * N * Fe * K
    # GELUs (3 x T x 8192 bf16), input cast (r4 w2), mean pooling (r2 fwd, w2 bwd), AMP casts + fused AdamW (fp32)
    ew = gelu_train_bytes(T, dims, 2) + 6.0 * T * Fe + 4.0 * T * Fe + (AMP_B + ADAM_B[4]) * params
    comp = t_flops(gemm, r["bf16_tflops"]) + t_bytes(ew, hbm)
    sample = 4.0 * L * Fe  # 64 KB
    c = {"gpu_compute": comp}
    if fixed:
        # Host per step: stack 256 samples into pinned memory + ~90 launches; the GPU stays busy while it is below compute.
        host = t_link(N * sample, r["host_stack_gbs"]) + 90 * r["launch_us"] / 1e3
        c["pinned_copy_overlapped_excess"] = max(0.0, t_link(N * sample, r["h2d_pinned_gbs"]) - comp)
        c["host_bound_excess"] = max(0.0, host - comp)
        step = sum(c.values())
        return {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "host_ms": host, "host_margin": comp - host}
    feats = N * (r["small_copy_us"] / 1e3 + t_link(sample, r["small_pageable_gbs"]))
    labels = N * r["small_copy_us"] / 1e3
    c["h2d_feature_copies_256"] = feats
    c["h2d_label_copies_256"] = labels
    c["gpu_stack_and_ramp"] = t_bytes(2.0 * N * sample, hbm) + 3 * r["launch_us"] / 1e3
    step = sum(c.values())
    rm = {"copy_many_small": feats + labels + c["gpu_stack_and_ramp"]}
    return {"c": c, "step": step, "rm": rm, "share": shares(rm, step), "after": step - rm["copy_many_small"],
            "copies_per_step": 2 * N, "pageable_bytes_share": pct(N * t_link(sample, r["small_pageable_gbs"]), step)}


# encoder_infer (healthy): 3 blocks, d 5120, 40 heads of 128, 8 x 512 tokens, bf16 inference.
EI = dict(batch=8, seq=512, d=5120, heads=40, blocks=3, vocab=32000, classes=16, steps=30)


def m_enc_infer(r):
    B, S, d, L, K = EI["batch"], EI["seq"], EI["d"], EI["blocks"], EI["classes"]
    T = B * S
    hbm = r["hbm_tbs"]
    c = {"gemm_bf16": t_flops(L * 24.0 * T * d * d + 2.0 * B * d * K, r["bf16_tflops"]),
         "attention_sdpa_flash_fwd": t_flops(L * 4.0 * B * S * S * d, r["attn_fwd_d128_tflops"]),
         # per block per token x d (bf16): LayerNorms 2 x 4, residual adds 2 x 6, GELU on 4d 16, attention-output
         # transpose copy 4 = 40 B; embedding gather 4, final LayerNorm 4, mean 2
         "layernorm_gelu_residual_copies": t_bytes((L * 40.0 + 10.0) * T * d, hbm)}
    step = sum(c.values())
    head = {"gelu_into_gemm_epilogue": t_bytes(L * 16.0 * T * d, hbm),
            "residual_add_into_layernorm": t_bytes(L * 8.0 * T * d, hbm)}
    return {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "headroom_share": shares(head, step)}


# ddp2_encoder (healthy, 2 ranks): input proj 256 -> 2048, 4 blocks d 2048 (16 heads of 128), 4 x 1024 tokens per rank.
DE = dict(batch=4, seq=1024, d=2048, heads=16, blocks=4, features=256, steps=30)


def m_ddp2_encoder(r):
    B, S, d, L, F = DE["batch"], DE["seq"], DE["d"], DE["blocks"], DE["features"]
    T = B * S
    hbm, bf = r["hbm_tbs"], r["bf16_tflops"]
    ew_blk = t_bytes(r["ew_tokd_bytes"] * T * d, hbm)
    att = r["attn_train_d128_tflops"]
    fwd = (t_flops(2.0 * T * F * d * 2 + L * 24.0 * T * d * d, bf) + L * t_flops(4.0 * B * S * S * d, att)
           + L * 0.35 * ew_blk + t_bytes(18.0 * T * F + 6.0 * T * F, hbm))  # loss forward, input cast
    nodes = [(t_flops(4.0 * T * d * F, bf) + t_bytes(22.0 * T * F, hbm), 4.0 * d * F)]  # output projection
    ew_node = 0.65 * ew_blk / 4
    for _ in range(L):  # backward order inside a block: down, up, ln2, proj, attention, qkv, ln1
        nodes += [(t_flops(16.0 * T * d * d, bf) + ew_node, 16.0 * d * d),
                  (t_flops(16.0 * T * d * d, bf) + ew_node, 16.0 * d * d),
                  (0.0, 8.0 * d),
                  (t_flops(4.0 * T * d * d, bf) + ew_node, 4.0 * d * d),
                  (t_flops(10.0 * B * S * S * d, att), 0.0),
                  (t_flops(12.0 * T * d * d, bf) + ew_node, 12.0 * d * d),
                  (0.0, 8.0 * d)]
    nodes.append((t_flops(2.0 * T * F * d, bf), 4.0 * F * d))  # input projection: weight grad only
    bwd, left, total, nb = ddp_timeline(r, nodes)
    P = L * (12.0 * d * d + 4 * d) + 2.0 * F * d
    fx = t_bytes((AMP_B + ADAM_B[4] + DDP_B) * P, hbm)
    c = {"forward": fwd, "backward": bwd, "amp_casts_adam_ddp_copies": fx, "allreduce_left_after_backward": left,
         "overlap_slowdown": r["overlap_penalty"] * (total - left), "allreduce_total_overlapped": total}
    step = fwd + bwd + fx + left + c["overlap_slowdown"]
    head = {"allreduce_left_after_backward": left, "gradient_as_bucket_view": t_bytes(8.0 * P, hbm)}
    return {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "buckets": nb, "params_m": P / 1e6,
            "headroom_share": shares(head, step)}


# ddp2_rank0_metrics: MLP 2048 -> 8192 x3 -> 2048, 16384 rows per rank; rank 0 adds an fp32 4096 x 4096 x 8192 SGEMM.
DM = dict(rows=16384, dims=[2048, 8192, 8192, 8192], out=2048, metric_rows=5120, metric_rank=0, steps=30)


def m_ddp2_metrics(r, fixed=False):
    B, m = DM["rows"], DM["metric_rows"]
    dims = DM["dims"] + [DM["out"]]
    W = DM["dims"][-1]
    hbm = r["hbm_tbs"]
    P = mlp_params(dims)
    fwd = mlp_forward(r, B, dims) + t_bytes(6.0 * B * dims[0], hbm)  # GEMMs, GELUs, loss; the input's autocast cast
    bwd, left, total, nb = ddp_timeline(r, mlp_bwd_nodes(r, B, dims))
    fx = t_bytes((AMP_B + ADAM_B[4] + DDP_B) * P, hbm)
    ov = r["overlap_penalty"] * (total - left)
    balanced = fwd + bwd + left + fx + ov
    # The metric on rank 0: slice .float() (r2 w4), normalize (norm r4, divide r4 w4), SGEMM 2 m^2 W on CUDA cores,
    # sim.pow(2) (r4 w4) and its sum (r4).
    metric_gemm = t_flops(2.0 * m * m * W, r["sgemm_tflops"])
    metric_ew = t_bytes(18.0 * m * W + 12.0 * m * m, hbm)
    c = {"forward": fwd, "backward": bwd, "amp_casts_adam_ddp_copies": fx, "allreduce_left_after_backward": left,
         "overlap_slowdown": ov, "allreduce_total_overlapped": total}
    if fixed:
        return {"c": c, "step": balanced, "rm": {}, "share": {}, "after": None, "buckets": nb,
                "tail_share": pct(left, balanced)}
    c["rank0_metric_fp32_sgemm"] = metric_gemm
    c["rank0_metric_elementwise"] = metric_ew
    step = balanced + metric_gemm + metric_ew
    rm = {"straggler_compute": metric_gemm + metric_ew}
    return {"c": c, "step": step, "rm": rm, "share": shares(rm, step), "after": balanced, "buckets": nb,
            "tail_share": pct(left, step), "other_ranks_wait": metric_gemm + metric_ew, "metric_if_bf16": t_flops(2.0 * m * m * W, r["bf16_tflops"])}


# ddp2_accum_sync: MLP 1024 -> 8192 x3 -> 1024 (151 M parameters), 4 micro-batches of 2048 rows per rank.
DA = dict(rows=2048, micro=4, dims=[1024, 8192, 8192, 8192, 1024], steps=30)


def m_ddp2_accum(r, fixed=False):
    B, k, dims = DA["rows"], DA["micro"], DA["dims"]
    hbm = r["hbm_tbs"]
    P = mlp_params(dims)
    fwd = mlp_forward(r, B, dims) + t_bytes(6.0 * B * dims[0], hbm)
    bwd, left, total, nb = ddp_timeline(r, mlp_bwd_nodes(r, B, dims))
    amp = t_bytes(AMP_B * P, hbm)       # per micro-batch: weight casts (own autocast region) and grad casts
    accum = t_bytes(12.0 * P, hbm)      # AccumulateGrad into the existing .grad (micro-batches 2..k)
    ddp_copy = t_bytes(DDP_B * P, hbm)  # per synchronised micro-batch: into the bucket and back
    adam = t_bytes(ADAM_B[4] * P, hbm)
    ov = r["overlap_penalty"] * (total - left)
    micro_sync = fwd + bwd + amp + ddp_copy + left + ov
    micro_local = fwd + bwd + amp
    c = {"forward_per_micro": fwd, "backward_per_micro": bwd, "amp_casts_per_micro": amp,
         "accumulate_grads": (k - 1) * accum, "fused_adamw": adam,
         "allreduce_per_sync": total, "allreduce_left_after_backward_per_sync": left, "ddp_copies_per_sync": ddp_copy}
    if fixed:
        step = (k - 1) * micro_local + micro_sync + (k - 1) * accum + adam
        return {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "buckets": nb,
                "exposed_share": pct(left, step)}
    step = k * micro_sync + (k - 1) * accum + adam
    removed = (k - 1) * (left + ddp_copy + ov)
    rm = {"exposed_communication": removed, "exposed_allreduce_only": (k - 1) * left}
    return {"c": c, "step": step, "rm": rm, "share": shares(rm, step), "after": step - removed, "buckets": nb,
            "nccl_time_share": pct(k * total, step)}


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, ranks=1, nvtx=True, est=45, steps=30, warmup=3):
    m = D.base(name, f"heldout2/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
               warmup=warmup)
    return m


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


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


def build():
    out = {}

    # ---- attn_eager ---------------------------------------------------------------------------------
    args = ["--batch", AE["batch"], "--seq", AE["seq"], "--d-model", AE["d"], "--heads", AE["heads"], "--blocks", AE["blocks"],
            "--head", AE["head"]]
    B, S, H, L = AE["batch"], AE["seq"], AE["heads"], AE["blocks"]
    Z = B * H * S * S
    b, b2, keys = ev(m_attn)
    m = base("attn_eager", "attn_eager.py", "planted", args, steps=AE["steps"], est=40)
    m["uses"] = uses("bf16 (parameters and compute; softmax in fp32)", "Adam fused", attention=True, sequences=True,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["techniques"] = techniques("fused attention: F.scaled_dot_product_attention (flash) instead of the hand-written "
                                 "q@k^T / softmax / @v (or torch.compile of the attention)",
                                 ["bf16 (already bf16)", "fused optimizer (already fused)", "CUDA graphs (GPU-bound, ~17-22 ms steps)",
                                  "pinned memory / data loading (the batch is resident on the GPU)",
                                  "sequence packing (fixed-length batches, no padding)", "TF32 (no fp32 GEMMs)"])
    m["planted"] = [planted(
        "elementwise_unfused", {"device": "GPU 0", "region": "forward / backward (attention of every block)"},
        "F.scaled_dot_product_attention on the same q, k, v (--fixed)", b, "rm.elementwise_unfused", "share.elementwise_unfused",
        f"Scores per block: B x H x S x S = {B}x{H}x{S}x{S} = {Z / 1e6:.0f}M elements. Eager attention moves 64 B per score "
        f"element per training step: 52 B in elementwise kernels (forward *scale 4, .float() 6, softmax 8, .type_as 6; backward "
        f"6 + 12 + 6 + 4) and 12 B in the six batched GEMMs that write or read the scores (head_dim 64: 64 FLOP/B, HBM-bound): "
        f"{L * 64 * Z / GB:.1f} GB per step = {rng(b, 'c.attention_eager_elementwise')} ms elementwise at 2.6-3.0 TB/s + "
        f"{rng(b, 'c.attention_eager_bmm')} ms bmm at 1.8-3.0 TB/s + {rng(b, 'c.attention_eager_qkv_copies')} ms of q/k/v copies "
        f"(matmul on permuted views). Flash (SDPA) instead: 14 x B x S^2 x d = {L * 14 * B * S * S * AE['d'] / 1e12:.2f} TFLOP at "
        f"200-450 TFLOP/s = {rng(b, 'flash')} ms, the scores never reach HBM. Rest of the step: linear GEMMs "
        f"{rng(b, 'c.linear_gemm_bf16')} ms at 550-800 TFLOP/s, LayerNorm/GELU/residual/copies {rng(b, 'c.layernorm_gelu_residual_copies')} ms, "
        f"fused Adam {rng(b, 'c.fused_adam_bf16')} ms. Step {rng(b, 'step', 1)} ms, eager attention {rng(b, 'eager_attention_share', 1)} % of it; "
        f"removed {rng(b, 'rm.elementwise_unfused', 1)} ms = {rng(b, 'share.elementwise_unfused', 1)} % -> critical "
        f"(the elementwise kernels alone: {rng(b, 'share.attention_elementwise_only', 1)} %, critical too; "
        f"H200: {rng(b2, 'share.elementwise_unfused', 1)} %).", b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual kernels beside the GEMMs (nothing else to fuse at this scale)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("I'm training a small transformer encoder in bf16 on an H100 and it's far slower than I estimated from "
                     "the parameter count. What's taking the time?")
    m["diagnosis"] = ("The attention, not the linear layers: it is written by hand (q @ k^T, scale, fp32 softmax, cast back, @ v), so "
                      "each block materialises the 8x16x1024x1024 score tensor several times forward and backward (~34 GB of HBM "
                      f"traffic per step), {rng(b, 'eager_attention_share', 0)} % of the step, in memory-bound elementwise and "
                      "softmax kernels and HBM-bound batched GEMMs. Switching to F.scaled_dot_product_attention (flash) takes the "
                      f"step from ~{rng(b, 'step', 0)} ms to ~{rng(b, 'after', 0)} ms. The GEMMs, LayerNorm and fused Adam are fine.")
    m["measure"] = [{"what": "steady step period", "query": Q2["step"], "expect_ms": r2(b["step"])},
                    {"what": "score-tensor kernels", "query": Q2["kernels"],
                     "expect": f"softmax forward/backward, mul and cast kernels over 134M-element tensors (~0.09-0.5 ms each), 4 x 10 "
                               f"per step, ~{rng(b, 'c.attention_eager_elementwise', 1)} ms per step in all"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="attn_eager.fixed")

    b, b2, keys = ev(lambda r: m_attn(r, fixed=True))
    m = base("attn_eager.fixed", "attn_eager.py", "fixed", args + ["--fixed"], steps=AE["steps"], est=40)
    m["uses"] = uses("bf16", "Adam fused", attention=True, sequences=True, host_sync="event sync on the previous step (lag 1)")
    m["uses"]["fused_attention"] = True
    m["techniques"] = techniques(None, ["flash/fused attention (already SDPA)", "bf16 (already)", "fused optimizer (already)",
                                        "CUDA graphs (GPU-bound)", "pinned memory (data on the GPU)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / transpose kernels", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = True
    m["question"] = "I switched my hand-written attention to scaled_dot_product_attention. Is anything still holding the step back?"
    m["diagnosis"] = (f"No: the step (~{rng(b, 'step', 1)} ms) is mostly bf16 GEMMs and flash attention kernels, with LayerNorm/GELU/"
                      "residual kernels and fused Adam as the memory-bound remainder; the host never makes the GPU wait. Nothing above low.")
    m["measure"] = [{"what": "steady step period", "query": Q2["step"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- mixed_adapter (no NVTX, no once-per-iteration kernel) -----------------------------------------
    args = ["--tokens", MA["tokens"], "--d-model", MA["d"], "--ffn", MA["ffn"], "--blocks", MA["blocks"],
            "--adapters", MA["adapters"], "--adapter-dim", MA["r"]]
    T, d, R, La = MA["tokens"], MA["d"], MA["r"], MA["adapters"]
    b, b2, keys = ev(m_adapter)
    m = base("mixed_adapter", "mixed_adapter.py", "planted", args, nvtx=False, steps=MA["steps"], est=50)
    m["uses"] = uses("bf16 encoder + fp32 adapters (TF32 off)", "none (inference)", tf32=False, host_sync="none (the CPU runs ahead)")
    m["techniques"] = techniques("run the adapters in bf16 like the rest (or allow TF32): remove the x.float() workaround",
                                 NOT_ATT + ["optimizer changes (inference)", "CUDA graphs (GPU-bound, ~10 ms iterations)",
                                            "pinned memory / data loading (inputs resident on the GPU)",
                                            "kernel fusion of the encoder's LayerNorm/GELU (a few %)"])
    m["planted"] = [planted(
        "fp32_gemm_simt", {"device": "GPU 0", "region": "the two adapter blocks at the end of every iteration"},
        "convert the adapters to bf16 (--fixed), or allow TF32", b, "rm.fp32_gemm_simt", "share.fp32_gemm_simt",
        f"Adapters: 2 x (4096 -> 512 -> 4096) on {T} tokens in fp32 with TF32 off: 4 x T x d x r x 2 = {La * 4 * T * d * R / 1e12:.3f} TFLOP "
        f"on CUDA cores at 40-55 TFLOP/s (thin operands) = {rng(b, 'c.adapter_gemm_fp32_simt')} ms, plus fp32 casts in and out, GELU and "
        f"residual in fp32 ({rng(b, 'c.adapter_casts_gelu_residual_fp32')} ms). Encoder: 4 x 4 x T x d x f = "
        f"{4 * 4 * T * d * MA['ffn'] / 1e12:.2f} TFLOP bf16 = {rng(b, 'c.encoder_gemm_bf16')} ms + {rng(b, 'c.encoder_layernorm_gelu_residual')} ms "
        f"of LayerNorm/GELU/residual. Iteration {rng(b, 'step', 1)} ms; the SGEMMs alone are {rng(b, 'sgemm_share_of_step', 1)} %. "
        f"Fix (bf16 adapters: GEMMs at 400-750 TFLOP/s, no casts, bf16 GELU/add): removed {rng(b, 'rm.fp32_gemm_simt')} ms = "
        f"{rng(b, 'share.fp32_gemm_simt', 1)} % -> high; TF32 alone would remove {rng(b, 'share.tf32_only', 1)} %.", b2=b2)]
    m["tolerated"] = [{"what": "encoder LayerNorm / GELU / residual kernels", "cause": "elementwise_unfused", "max_severity": "low"},
                      {"what": "the host start-up phase before the loop (weights made on the CPU, Python tokenisation)",
                       "cause": "host_bound", "max_severity": "info", "why": "outside the steady iterations"}]
    m["expect_quiet"] = False
    m["question"] = ("This is our feature-encoder inference service: each call embeds 8192 tokens on one H100. Is it running as "
                     "fast as the hardware allows? If not, what should we change first?")
    m["diagnosis"] = ("The adapters were added after the model was converted to bf16, so they run in fp32 (the x.float() cast) with "
                      "TF32 off: their GEMMs run as CUDA-core SGEMM at ~50 TFLOP/s, 15x slower than the bf16 encoder GEMMs, plus fp32 "
                      f"casts, GELU and residual. They take ~{rng(b, 'share.fp32_gemm_simt', 0)} % of each ~{rng(b, 'step', 0)} ms iteration for ~3 % "
                      f"of the FLOPs. Convert them to bf16 (or at least allow TF32): ~{rng(b, 'after', 1)} ms per iteration. "
                      "The start-up phase on the host is outside the loop and not a problem.")
    m["measure"] = [{"what": "iteration period (no NVTX)", "query": Q2["anchor"] + " with ANCHOR = the LayerNorm kernel "
                     "(vectorized_layer_norm_kernel, C = 4) or the fp32 GEMM of the adapters (C = 4: 2 per adapter), WARM = 3",
                     "expect_ms": r2(b["step"])},
                    {"what": "SGEMM time", "query": Q2["kernels"], "expect": f"FP32 (ffma/sgemm/'f32f32') GEMM kernels ~{rng(b, 'c.adapter_gemm_fp32_simt', 1)} ms per iteration"}]
    m["notes"] = ["Every kernel runs 2 or 4 times per iteration (4 encoder blocks, 2 adapters): no kernel marks the iteration "
                  "by running once, and the 4+2 block pattern is the period.",
                  "Start-up: weights made on the CPU (~300 M fp32 parameters) and copied over, 200 000 requests tokenised in "
                  "Python: several seconds of host-only work before the first iteration."]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="mixed_adapter.fixed")

    b, b2, keys = ev(lambda r: m_adapter(r, fixed=True))
    m = base("mixed_adapter.fixed", "mixed_adapter.py", "fixed", args + ["--fixed"], nvtx=False, steps=MA["steps"], est=50)
    m["uses"] = uses("bf16", "none (inference)", tf32=False, host_sync="none (the CPU runs ahead)")
    m["techniques"] = techniques(None, NOT_ATT + ["bf16 (already)", "TF32 (no fp32 GEMMs left)", "CUDA graphs (GPU-bound)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual kernels", "cause": "elementwise_unfused", "max_severity": "low"},
                              {"what": "the host start-up phase before the loop", "cause": "host_bound", "max_severity": "info"}]
    m["expect_quiet"] = True
    m["question"] = "After converting the adapters to bf16, is the encoder service using the GPU well?"
    m["diagnosis"] = (f"Yes: each ~{rng(b, 'step', 1)} ms iteration is ~85 % bf16 GEMMs at tensor-core rates; the LayerNorm/GELU/"
                      "residual kernels are the memory-bound rest and the host runs ahead. Nothing above low.")
    m["measure"] = [{"what": "iteration period (no NVTX)", "query": Q2["anchor"] + " with ANCHOR = vectorized_layer_norm_kernel, C = 4, WARM = 3",
                     "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- host_augment --------------------------------------------------------------------------------
    args = ["--batch", HA["batch"], "--raw", HA["raw"], "--crop", HA["crop"], "--patch", HA["patch"], "--width", HA["width"],
            "--layers", HA["layers"], "--classes", HA["classes"]]
    b, b2, keys = ev(m_host_aug)
    xb = 4.0 * HA["batch"] * 3 * HA["crop"] ** 2
    m = base("host_augment", "host_augment.py", "planted", args, steps=HA["steps"], est=50)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", pinned=False,
                     host_sync="loss.item() at the end of every step; a blocking pageable copy")
    m["techniques"] = techniques("take the augmentation off the training thread's critical path: do it on the GPU (or in "
                                 "DataLoader workers with pinned memory and prefetch)",
                                 NOT_ATT + ["bf16 autocast (already)", "fused optimizer (already)",
                                            "CUDA graphs (the GPU waits for NumPy, not for launches)",
                                            "kernel fusion (the GPU is idle most of the step)"])
    m["planted"] = [planted(
        "host_bound", {"device": "GPU 0 (idle) / the training thread on the host", "region": "step_N > data"},
        "augment on the GPU from pinned, prefetched uint8 images (--fixed)", b, "rm.host_bound", "share.host_bound",
        f"Every step the training thread runs the NumPy augmentation of 128 x 112 x 112 x 3 uint8 images (crop, flip, float32, "
        f"normalise, CHW) = 10-60 ms (21-43 ms measured on a dev CPU), then copies the {xb / 1e6:.1f} MB fp32 batch from pageable "
        f"memory ({rng(b, 'c.h2d_pageable_batch')} ms at 6-14 GB/s) and the labels (one small copy); loss.item() at the end of the "
        f"previous step has drained the GPU, so it is idle through all of it. GPU compute {rng(b, 'c.gpu_compute')} ms (bf16 GEMMs "
        f"{mlp_train_flops(HA['batch'] * 144, [192] + [HA['width']] * HA['layers']) / 1e12:.2f} TFLOP + GELU/AMP/AdamW). Step {rng(b, 'step', 1)} ms, the GPU "
        f"busy {rng(b, 'gpu_busy_share', 0)} % of it. Fix: the host only gathers uint8 images into pinned memory for the next step while "
        f"the GPU trains, the augmentation runs on the GPU (~0.05 ms): step {rng(b, 'after')} ms; removed {rng(b, 'rm.host_bound', 1)} ms = "
        f"{rng(b, 'share.host_bound', 1)} % -> critical at every corner (re-derive with the measured 'data' range).",
        accept=["host_bound", "host_sync"], b2=b2)]
    m["tolerated"] = [{"what": "the blocking 14 MB pageable H2D copy of the augmented batch (part of the same data path)",
                       "cause": "copy_bound_pageable", "max_severity": "medium", "share_pct": r2(b["copy_share_of_step"])},
                      {"what": "loss.item() every step (it is what exposes the host work; alone it costs a relaunch gap)",
                       "cause": "host_sync", "max_severity": "medium"}]
    m["expect_quiet"] = False
    m["question"] = "GPU utilization on my image-classifier training is low, mostly well under 50 %. The model is a plain MLP on patches. What's wrong?"
    m["diagnosis"] = ("The GPU waits for the CPU: every step the training loop itself augments the batch in NumPy (crop, flip, float "
                      "conversion, normalisation, HWC->CHW), tens of ms of single-threaded host work, then copies 14 MB from pageable "
                      "memory; because loss.item() syncs at the end of each step, nothing is queued meanwhile, so the GPU idles "
                      f"~{rng(b, 'share.host_bound', 0)} % of the step. Move the augmentation to the GPU (copy uint8 images pinned and "
                      "prefetched) or into DataLoader worker processes with pin_memory: the step drops to the ~6-8 ms of GPU compute. "
                      "The model's GPU kernels are not the problem.")
    m["measure"] = [{"what": "step period", "query": Q2["step"], "expect_ms": r2(b["step"])},
                    {"what": "host augmentation time", "query": Q2["nvtx_ranges"], "expect": "the 'data' range lasts ~10-60 ms per step "
                     "(re-derive: share = (data + copy - ~0.5) / period)"},
                    {"what": "GPU idle", "query": Q2["split"], "expect": "idle most of each step (compute ~6-8 ms per step)"},
                    {"what": "pageable H2D", "query": Q2["memcpy"], "expect": "copyKind 1, srcKind 0, 14.2 MB per step"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="host_augment.fixed")

    b, b2, keys = ev(lambda r: m_host_aug(r, fixed=True))
    m = base("host_augment.fixed", "host_augment.py", "fixed", args + ["--fixed"], steps=HA["steps"], est=45)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", pinned=True,
                     host_sync="loss.item() at the end of every step")
    m["techniques"] = techniques(None, NOT_ATT + ["bf16 autocast (already)", "fused optimizer (already)",
                                                  "pinned memory / prefetch (already)", "GPU augmentation / DataLoader workers (already on the GPU)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "loss.item() every step: relaunch gap and the launches of the small augmentation kernels after it",
                       "cause": "host_sync", "max_severity": "medium", "share_pct": r2(b["host_share_left"]),
                       "why": "not planted (logging every step is the program's choice); 50-300 µs of wake-up plus ~12 launches of "
                              "8-40 µs before the first large GEMM: low at the band's middle, medium at its slow-host corner"},
                      {"what": "small GPU augmentation kernels (crop/flip/normalise)", "cause": "elementwise_unfused", "max_severity": "info"}]
    m["expect_quiet"] = False
    m["question"] = "I moved the augmentation onto the GPU and prefetch the raw images. Is the input pipeline still the bottleneck?"
    m["diagnosis"] = (f"No: the step (~{rng(b, 'step', 1)} ms) is GPU compute; the host gathers the next uint8 batch into pinned memory "
                      "while the GPU trains, the copy runs on a side stream, and the GPU augmentation costs well under 1 %. The per-step "
                      "loss.item() leaves only a relaunch gap of a few percent (deferring the read by one step would remove it).")
    m["measure"] = [{"what": "step period", "query": Q2["step"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- small_copies ----------------------------------------------------------------------------------
    args = ["--samples", SC["samples"], "--seq", SC["seq"], "--features", SC["features"], "--width", SC["width"],
            "--layers", SC["layers"], "--classes", SC["classes"]]
    b, b2, keys = ev(m_small)
    m = base("small_copies", "small_copies.py", "planted", args, steps=SC["steps"], est=45)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", pinned=False, host_sync="a stream sync inside every pageable copy")
    m["techniques"] = techniques("collate on the host into one pinned buffer and copy it once with non_blocking=True, "
                                 "prefetched on a side stream (DataLoader with pin_memory)",
                                 NOT_ATT + ["bf16 autocast (already)", "fused optimizer (already)",
                                            "CUDA graphs (copies and host syncs, not kernel launches, leave the GPU idle)",
                                            "kernel fusion (the GPU is idle, not busy)"])
    m["planted"] = [planted(
        "copy_many_small", {"device": "GPU 0", "region": "step_N > collate"},
        "one pinned, batched, prefetched copy per step (--fixed)", b, "rm.copy_many_small", "share.copy_many_small",
        f"512 H2D copies per step from pageable memory (256 x 64 KB features, 256 x 8 B labels), each a separate .to('cuda'): "
        f"PyTorch issues cudaMemcpyAsync and then synchronises the stream, so the copies are serialised with host overhead "
        f"between them (25-60 µs each on this pool) and the GPU does nothing else: features {rng(b, 'c.h2d_feature_copies_256', 1)} ms, "
        f"labels {rng(b, 'c.h2d_label_copies_256', 1)} ms, then the GPU stack. The bytes themselves (16.8 MB) would take 0.3 ms pinned. "
        f"GPU compute {rng(b, 'c.gpu_compute', 1)} ms (bf16 GEMMs {mlp_train_flops(8192, [512, 8192, 8192, 8192, 512]) / 1e12:.2f} TFLOP, "
        f"GELU, AMP, AdamW). Step {rng(b, 'step', 1)} ms; removed {rng(b, 'rm.copy_many_small', 1)} ms = "
        f"{rng(b, 'share.copy_many_small', 1)} % -> critical. New cause name: copy_many_small (per-copy overhead and a sync per "
        f"copy, not PCIe bandwidth, is what costs; the existing copy causes describe a bandwidth-bound or non-overlapped large copy "
        f"and are accepted as well).", accept=["copy_many_small", "copy_bound_pageable", "copy_not_overlapped", "host_sync"], b2=b2)]
    m["tolerated"] = []
    m["expect_quiet"] = False
    m["question"] = ("My custom collate function moves each sample to the GPU and stacks there. The model is big, yet the GPU looks "
                     "half idle. Where does the step go?")
    m["diagnosis"] = ("Into 512 tiny host-to-device copies per step: each .to('cuda') of a pageable tensor is a separate copy followed "
                      f"by a stream sync, ~25-60 µs each, so ~{rng(b, 'rm.copy_many_small', 0)} ms per step pass with the GPU idle "
                      f"({rng(b, 'share.copy_many_small', 0)} % of the step) while the data is only 16.8 MB. Stack the samples on the host "
                      "into one pinned buffer and copy it once with non_blocking=True, a step ahead on a side stream (a DataLoader with "
                      f"pin_memory does this): the step becomes the ~{rng(b, 'after', 0)} ms of GPU compute.")
    m["measure"] = [{"what": "step period", "query": Q2["step"], "expect_ms": r2(b["step"])},
                    {"what": "small copies", "query": Q2["small_copies"], "expect": "512 H2D copies per step (256 of 65536 B, 256 of 8 B), "
                     "gaps of ~25-60 µs between them; re-derive the removed time as the span from the first to the last copy of a step"}]
    m["new_cause"] = {"name": "copy_many_small", "why": "hundreds of small host-device copies per step whose per-copy cost (API, "
                      "staging, a stream sync each) dominates, not the bytes: none of the existing causes names it; the fix differs "
                      "from a pageable-bandwidth fix (batch the copies into one)"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="small_copies.fixed")

    b, b2, keys = ev(lambda r: m_small(r, fixed=True))
    m = base("small_copies.fixed", "small_copies.py", "fixed", args + ["--fixed"], steps=SC["steps"], est=45)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", pinned=True, host_sync="event sync on the previous step (lag 1)")
    m["techniques"] = techniques(None, NOT_ATT + ["pinned memory / prefetch (already)", "bf16 autocast (already)", "fused optimizer (already)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "one 16.8 MB pinned H2D per step on a side stream (overlapped)", "cause": "copy_not_overlapped",
                       "max_severity": "info"},
                      {"what": "GELU kernels between GEMMs", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = True
    m["question"] = "With a pinned, batched, prefetched copy, is data loading still costing me?"
    m["diagnosis"] = (f"No: one 16.8 MB copy per step runs on a side stream at PCIe speed beside the compute; the step (~{rng(b, 'step', 1)} ms) "
                      f"is GPU-bound bf16 training (the host needs {rng(b, 'host_ms', 1)} ms per step to stack and launch, less than the GPU step).")
    m["measure"] = [{"what": "step period", "query": Q2["step"], "expect_ms": r2(b["step"])},
                    {"what": "copies", "query": Q2["memcpy"], "expect": "copyKind 1, srcKind 1 (pinned): 2 per step, 16.8 MB + 2 KB"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- encoder_infer (healthy) -----------------------------------------------------------------------
    args = ["--batch", EI["batch"], "--seq", EI["seq"], "--d-model", EI["d"], "--heads", EI["heads"], "--blocks", EI["blocks"],
            "--vocab", EI["vocab"], "--classes", EI["classes"]]
    b, b2, keys = ev(m_enc_infer)
    m = base("encoder_infer", "encoder_infer.py", "healthy", args, steps=EI["steps"], est=40)
    m["uses"] = uses("bf16", "none (inference)", attention=True, sequences=True, pinned=True,
                     host_sync="event sync on the previous step (lag 1)")
    m["uses"]["fused_attention"] = True
    m["techniques"] = techniques(None, ["flash attention (SDPA already)", "bf16 (already)", "pinned memory (already)",
                                        "CUDA graphs (GPU-bound: ~50 launches per ~12 ms step)", "optimizer changes (inference)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "GELU into the GEMM epilogue", "cause": "elementwise_unfused", "max_severity": "low",
                       "share_pct": r2(b["headroom_share.gelu_into_gemm_epilogue"])},
                      {"what": "residual add into LayerNorm", "cause": "elementwise_unfused", "max_severity": "low",
                       "share_pct": r2(b["headroom_share.residual_add_into_layernorm"])}]
    m["expect_quiet"] = True
    m["question"] = "Is this batched bf16 scoring loop for my encoder using the H100 well, or is something holding it back?"
    m["diagnosis"] = (f"It is healthy: each ~{rng(b, 'step', 1)} ms step is ~85-90 % bf16 GEMMs at tensor-core rates plus flash "
                      "attention; LayerNorm/GELU/residual kernels are the small memory-bound rest, inputs arrive by a tiny pinned async "
                      "copy and the host stays ahead. Nothing above low.")
    m["measure"] = [{"what": "step period", "query": Q2["step"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- ddp2_encoder (healthy, 2 ranks) -------------------------------------------------------------
    args = ["--batch", DE["batch"], "--seq", DE["seq"], "--d-model", DE["d"], "--heads", DE["heads"], "--blocks", DE["blocks"],
            "--features", DE["features"]]
    b, b2, keys = ev(m_ddp2_encoder)
    m = base("ddp2_encoder", "ddp2_encoder.py", "healthy", args, ranks=2, steps=DE["steps"], est=50)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", attention=True, sequences=True, ddp=True, host_sync="none")
    m["uses"]["fused_attention"] = True
    m["techniques"] = techniques(None, ["bf16 (already autocast)", "fused optimizer (already)", "flash attention (SDPA already)",
                                        "DDP / overlap (already)", "rebalancing (equal work per rank)", "pinned memory (data on the GPU)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "all-reduce left after the backward", "cause": "exposed_communication", "max_severity": "low",
                       "share_pct": r2(b["headroom_share.allreduce_left_after_backward"])},
                      {"what": "DDP's bucket copies (gradient_as_bucket_view=True would save one)", "cause": "elementwise_unfused",
                       "max_severity": "low", "share_pct": r2(b["headroom_share.gradient_as_bucket_view"])},
                      {"what": "LayerNorm / GELU / residual / cast kernels under autocast", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = True
    m["question"] = "Is my 2-GPU DDP transformer run scaling well, or is communication or imbalance costing me?"
    m["diagnosis"] = (f"It is healthy: both ranks do the same work and their steps (~{rng(b, 'step', 1)} ms) line up; the "
                      f"{b['params_m'][0]:.0f} M fp32 gradients ({4 * b['params_m'][0]:.0f} MB) are all-reduced in DDP's buckets while the "
                      f"backward runs, and only the last bucket (~{rng(b, 'c.allreduce_left_after_backward', 2)} ms) is left after it. Nothing above low.")
    m["measure"] = [{"what": "step period per rank", "query": Q2["step"], "expect_ms": r2(b["step"])},
                    {"what": "NCCL-only time", "query": Q2["split"], "expect": f"~{rng(b, 'c.allreduce_left_after_backward')} ms per step"},
                    {"what": "all-reduces", "query": Q2["nccl"], "expect": f"{int(b['buckets'][0])} AllReduce kernels per step per rank"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- ddp2_rank0_metrics (straggler_compute, 2 ranks) ------------------------------------------------
    dims = ",".join(map(str, DM["dims"]))
    args = ["--rows", DM["rows"], "--dims", dims, "--out", DM["out"], "--metric-rows", DM["metric_rows"], "--metric-rank", DM["metric_rank"]]
    b, b2, keys = ev(m_ddp2_metrics)
    mm = DM["metric_rows"]
    m = base("ddp2_rank0_metrics", "ddp2_rank0_metrics.py", "planted", args, ranks=2, steps=DM["steps"], est=50)
    m["uses"] = uses("bf16 autocast, fp32 parameters (the rank-0 metric in fp32, TF32 off)", "AdamW fused", ddp=True, tf32=False,
                     host_sync="none")
    m["techniques"] = techniques("take the rank-0-only metric off the step: log it every N steps (or in bf16, or split it across ranks)",
                                 NOT_ATT + ["bf16 (already autocast for the model)", "fused optimizer (already)",
                                            "gradient bucketing / overlap (DDP already overlaps)", "rebalancing rows (rows are equal)"])
    m["planted"] = [planted(
        "straggler_compute", {"rank": DM["metric_rank"], "waiting_ranks": [1], "region": "step_N > metrics (rank 0)"},
        "log the metric every 50 steps (--fixed) (bf16 would also shrink it to ~0.4-0.8 ms)", b, "rm.straggler_compute", "share.straggler_compute",
        f"Rank 0 alone runs, after every forward, an fp32 cosine-similarity matrix of {mm} x 8192 features: a {mm} x {mm} x 8192 SGEMM "
        f"= {2 * mm * mm * 8192 / 1e12:.3f} TFLOP on CUDA cores at 47-55 TFLOP/s = {rng(b, 'c.rank0_metric_fp32_sgemm')} ms, plus "
        f"{rng(b, 'c.rank0_metric_elementwise')} ms of casts/normalise/pow/sum. Its backward (and so every all-reduce) starts that much "
        f"later; rank 1 waits inside the NCCL kernels. Per-rank work (equal rows): forward {rng(b, 'c.forward')} ms, backward "
        f"{rng(b, 'c.backward')} ms, AMP casts/fused AdamW/DDP copies {rng(b, 'c.amp_casts_adam_ddp_copies')} ms, all-reduce left after the "
        f"backward {rng(b, 'c.allreduce_left_after_backward')} ms ({int(b['buckets'][0])} buckets, 671 MB at 200-300 GB/s, overlapped). Step (both ranks) "
        f"{rng(b, 'step', 1)} ms; removed {rng(b, 'rm.straggler_compute')} ms = {rng(b, 'share.straggler_compute', 1)} % -> high.",
        accept=["straggler_compute", "fp32_gemm_simt"], b2=b2)]
    m["tolerated"] = [{"what": "NCCL kernels on rank 1 that last wait + transfer (the straggler's symptom)", "cause": "exposed_communication",
                       "max_severity": "info", "why": "the wait is the straggler's; counting it again as communication double-counts it"},
                      {"what": "the all-reduce left after the backward on both ranks (the last 268 MB layer's bucket)",
                       "cause": "exposed_communication", "max_severity": "low", "share_pct": r2(b["tail_share"])}]
    m["expect_quiet"] = False
    m["question"] = "Both GPUs get the same batch, but rank 1 spends a big chunk of every step inside NCCL. Is my interconnect slow?"
    m["diagnosis"] = ("No, rank 1 is waiting for rank 0: rank 0 alone computes a monitoring metric every step, an fp32 5120x5120 "
                      f"cosine-similarity matrix (SGEMM on CUDA cores, TF32 off, ~{rng(b, 'rm.straggler_compute', 1)} ms) between its forward "
                      "and backward, so its all-reduces start late and rank 1 idles inside them. Log the metric every N steps (or compute "
                      f"it in bf16 / split across ranks): the step drops from ~{rng(b, 'step', 0)} to ~{rng(b, 'after', 0)} ms. The all-reduce "
                      "itself overlaps the backward fine.")
    m["measure"] = [{"what": "step period per rank", "query": Q2["step"], "expect_ms": r2(b["step"])},
                    {"what": "the metric on rank 0", "query": Q2["kernels"] + " (rank 0's export)",
                     "expect": f"one FP32 GEMM kernel per step of ~{rng(b, 'c.rank0_metric_fp32_sgemm', 1)} ms, absent on rank 1"},
                    {"what": "wait inside NCCL on rank 1", "query": Q2["nccl"], "expect": "rank 1's first all-reduce of each step lasts "
                     "~the metric time longer than rank 0's"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="ddp2_rank0_metrics.fixed")

    b, b2, keys = ev(lambda r: m_ddp2_metrics(r, fixed=True))
    m = base("ddp2_rank0_metrics.fixed", "ddp2_rank0_metrics.py", "fixed", args + ["--fixed"], ranks=2, steps=DM["steps"], est=50)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=True, tf32=False, host_sync="none")
    m["techniques"] = techniques(None, NOT_ATT + ["bf16 (already)", "fused optimizer (already)", "rebalancing (equal work)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "all-reduce left after the backward", "cause": "exposed_communication", "max_severity": "low",
                       "share_pct": r2(b["tail_share"])},
                      {"what": "the metric at step 0 (a warm-up step)", "cause": "straggler_compute", "max_severity": "info"}]
    m["expect_quiet"] = True
    m["question"] = "I now log the similarity metric only every 50 steps. Are the two ranks in step now?"
    m["diagnosis"] = (f"Yes: in the steady steps both ranks do the same work (~{rng(b, 'step', 1)} ms per step), the all-reduces overlap the "
                      "backward and neither rank waits for the other beyond noise. Nothing above low.")
    m["measure"] = [{"what": "step period per rank", "query": Q2["step"], "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- ddp2_accum_sync (exposed_communication, 2 ranks) ------------------------------------------------
    dims = ",".join(map(str, DA["dims"]))
    args = ["--rows", DA["rows"], "--micro", DA["micro"], "--dims", dims]
    b, b2, keys = ev(m_ddp2_accum)
    P = mlp_params(DA["dims"])
    m = base("ddp2_accum_sync", "ddp2_accum_sync.py", "planted", args, ranks=2, steps=DA["steps"], est=50)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=True, host_sync="none")
    m["uses"]["gradient_accumulation"] = "4 micro-batches per optimizer step, all synchronised"
    m["techniques"] = techniques("wrap all but the last micro-batch in ddp.no_sync() so gradients are all-reduced once per optimizer step",
                                 NOT_ATT + ["bf16 (already)", "fused optimizer (already)", "rebalancing (equal work)",
                                            "CUDA graphs (GPU/communication-bound)"])
    m["planted"] = [planted(
        "exposed_communication", {"ranks": [0, 1], "region": "step_N > micro_0..micro_2"},
        "ddp.no_sync() on micro-batches 1-3 (--fixed)", b, "rm.exposed_communication", "share.exposed_communication",
        f"{P / 1e6:.0f} M fp32 gradients ({4 * P / 1e6:.0f} MB) are all-reduced after each of the 4 micro-batches instead of once: "
        f"{rng(b, 'c.allreduce_per_sync')} ms of all-reduce per micro-batch at 200-300 GB/s ({int(b['buckets'][0])} buckets) against a "
        f"{rng(b, 'c.backward_per_micro')} ms backward (2048 rows), so {rng(b, 'c.allreduce_left_after_backward_per_sync')} ms of it is left "
        f"after each backward and the next micro-batch waits (DDP's finalize makes the compute stream wait); each sync also copies the "
        f"gradients into and out of the buckets ({rng(b, 'c.ddp_copies_per_sync')} ms). Step {rng(b, 'step', 1)} ms (NCCL kernels run "
        f"{rng(b, 'nccl_time_share', 0)} % of it). no_sync on 3 of 4 micro-batches removes 3 x (left + copies + overlap slowdown) = "
        f"{rng(b, 'rm.exposed_communication', 1)} ms = {rng(b, 'share.exposed_communication', 1)} % -> high (the exposed all-reduce "
        f"alone: {rng(b, 'share.exposed_allreduce_only', 1)} %).", accept=["exposed_communication"], b2=b2)]
    m["tolerated"] = [{"what": "the all-reduce left after the last micro-batch's backward (needed once per step)",
                       "cause": "exposed_communication", "max_severity": "medium"}]
    m["expect_quiet"] = False
    m["question"] = ("I use gradient accumulation (4 micro-batches) with DDP on 2 GPUs to get a bigger batch, and the step takes "
                     "much longer than 4x a single micro-batch. Why?")
    m["diagnosis"] = ("DDP all-reduces all 604 MB of gradients after every micro-batch, not once per optimizer step: the 4 syncs put "
                      f"~{rng(b, 'nccl_time_share', 0)} % of the step in NCCL, and each all-reduce outlasts its micro-batch's backward "
                      "(~1.5-2 ms with 2048 rows), so the next micro-batch waits. Run the first 3 micro-batches under ddp.no_sync(): "
                      f"~{rng(b, 'step', 0)} ms -> ~{rng(b, 'after', 0)} ms per step, same gradients.")
    m["measure"] = [{"what": "step period", "query": Q2["step"], "expect_ms": r2(b["step"])},
                    {"what": "all-reduces per step", "query": Q2["nccl"],
                     "expect": f"{4 * int(b['buckets'][0])} AllReduce kernels per step per rank ({int(b['buckets'][0])} per micro-batch)"},
                    {"what": "NCCL-only time", "query": Q2["split"], "expect": f"~4 x {rng(b, 'c.allreduce_left_after_backward_per_sync')} ms per step"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="ddp2_accum_sync.fixed")

    b, b2, keys = ev(lambda r: m_ddp2_accum(r, fixed=True))
    m = base("ddp2_accum_sync.fixed", "ddp2_accum_sync.py", "fixed", args + ["--fixed"], ranks=2, steps=DA["steps"], est=50)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=True, host_sync="none")
    m["uses"]["gradient_accumulation"] = "4 micro-batches per optimizer step, no_sync on the first 3"
    m["techniques"] = techniques(None, NOT_ATT + ["bf16 (already)", "fused optimizer (already)", "no_sync (already)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "the all-reduce left after the last micro-batch's backward", "cause": "exposed_communication",
                       "max_severity": "medium", "share_pct": r2(b["exposed_share"]),
                       "why": "one gradient sync per optimizer step is the minimum; only a larger last micro-batch or a "
                              "different parallelism would hide more"}]
    m["expect_quiet"] = False
    m["question"] = "With no_sync on the first three micro-batches, is communication still a problem?"
    m["diagnosis"] = (f"Much less: one all-reduce per step, overlapped with the last micro-batch's backward; what is left after it "
                      f"(~{rng(b, 'c.allreduce_left_after_backward_per_sync', 1)} ms, {rng(b, 'exposed_share', 0)} % of the "
                      f"~{rng(b, 'step', 0)} ms step) is the unavoidable tail of a once-per-step sync with a short backward.")
    m["measure"] = [{"what": "step period", "query": Q2["step"], "expect_ms": r2(b["step"])},
                    {"what": "all-reduces per step", "query": Q2["nccl"], "expect": f"{int(b['buckets'][0])} AllReduce kernels per step per rank"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.table)
