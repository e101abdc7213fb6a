#!/usr/bin/env python3
"""First-principles truth for the third held-out set (heldout3): writes heldout3/manifests/<case>.json from
FLOPs, bytes, launch counts and rate bands alone (no capture, no aisp output), with the helpers of ../derive.py.

    python3 workloads/planted/heldout3/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout3/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout3/derive.py --table    # the README table only

Method: as ../derive.py. Each case is a small model of one steady step; every part is FLOPs / rate, bytes /
bandwidth, or launches x a host cost per launch; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the device where
the problem sits; severity: info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical. The new bands
below (host cost of an eager op under nsys, tiny-kernel durations, the fp32 cross-entropy's re-reads, pageable
D2H into a reused buffer, ...) say where each comes from; the rest are ../derive.py's (and three of heldout2's,
copied here with their sources so that this set does not depend on heldout2/derive.py).
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
mlp_forward, mlp_params, mlp_train_flops = D.mlp_forward, D.mlp_params, D.mlp_train_flops
pct, planted, r2, rng, techniques, uses = D.pct, D.planted, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link

SET = "heldout3"

# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; fractions and bytes as named.
NEW_H100 = {
    "bf16_mid_tflops": (550.0, 800.0),
    "attn_train_d128_tflops": (250.0, 480.0),
    "attn_short_train_tflops": (150.0, 400.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    "ew_bf16_tokd_bytes": (90.0, 130.0),
    "ce_reread_frac": (0.0, 0.5),
    "embed_bwd_extra_ms": (0.05, 0.3),
    "eager_op_us": (20.0, 70.0),
    "tiny_kernel_us": (2.5, 5.0),
    "small_gemm_us": (5.0, 12.0),
    "small_sdpa_us": (6.0, 16.0),
    "graph_node_gap_us": (0.5, 2.0),
    "d2h_pageable_reuse_gbs": (8.0, 14.0),
    "recompute_gemm_frac": (2.0 / 3.0, 1.0),
    "bwd_gemm_rate_ratio": (0.8, 1.1),
}
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 1024 (tokens x 1024 x {1024, 3072, 4096}, or K = 1024 for the "
                       "LM head): below the 8192^3 rate (732-787 measured) as tiles and waves shrink and the epilogue's "
                       "writes weigh more; as heldout2/derive.py, an assumption widened down to 550",
    "attn_train_d128_tflops": "SDPA flash forward + backward, bf16, head_dim 128, non-causal, counted as 14*B*S^2*D FLOPs "
                              "(forward 4, backward 10 with the recomputed scores); FlashAttention-2 on H100 ~350 forward, "
                              "~250-300 backward at head_dim 128 (published FA2 figures); band 250-480 (as heldout2)",
    "attn_short_train_tflops": "the same kernels at S = 256 (ViT-style: 256 patches per image, many (batch, head) "
                               "tiles of one 256-long block row each): shorter rows amortise the softmax and the "
                               "prologue less; band 150-400 (assumption; the attention is ~2 % of that step)",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: "
                     "torch busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (BENCHMARKS.md figures quoted by "
                     "heldout2/derive.py), 329 at 1 GiB on 2 H100; band 200-300",
    "ew_bf16_tokd_bytes": "elementwise bytes per token x d_model per pre-LN transformer block with pure bf16 parameters "
                          "(no autocast casts): LayerNorm forward 2 x 4, backward 2 x 6; residual adds forward 2 x 6 and "
                          "their gradient sums 2 x 6; GELU on 4d forward 16, backward 24; attention-output transpose copy "
                          "4 + 4 (forward, backward); assembling dq/dk/dv into the qkv gradient 12: ~100 counted; band 90-130 "
                          "(LayerNorm backward's parameter-gradient pass and SDPA's backward pre-processing of dO.O add a little)",
    "ce_reread_frac": "PyTorch's log_softmax forward on long rows (cunn_SoftMaxForward, rows too long for shared memory) "
                      "reads each row three times (max, sum of exp, write pass) and its backward reads the incoming "
                      "gradient twice (row sum, write pass); a 32000-wide fp32 row is 128 KB and ~132-264 rows are in "
                      "flight (17-34 MB), under the 50 MB L2, so most re-reads hit L2: fraction of the extra passes that "
                      "reach DRAM 0-0.5 (assumption)",
    "embed_bwd_extra_ms": "embedding_dense_backward beyond its bytes: sorting 32768 token ids and the segment "
                          "reduction's launches (a few small kernels); band 0.05-0.3 ms (assumption)",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python (module call, dispatcher, cudaLaunchKernel) under "
                   "nsys with cuda+nvtx+osrt tracing on this pool: 29-36 µs per kernel measured (tests/data/workloads/"
                   "tiny_kernels.sqlite: 943 kernels in 27-34 ms of CPU per step, quoted by ../derive.py), and ~70 µs "
                   "per op implied by heldout2's attn_eager.fixed capture (the host needed ~11 ms to issue a ~150-op "
                   "step, heldout2/measured.json); 10-15 µs on a fast CPU without a profiler. Band 20-70 µs",
    "tiny_kernel_us": "device time of an elementwise / LayerNorm / copy / reduction kernel on a 1024 x 512 bf16 tensor "
                      "(1 MB): launch-to-end on the GPU is 2-3 µs for an empty-ish kernel on H100, plus ~1 µs of "
                      "traffic; band 2.5-5 µs",
    "small_gemm_us": "device time of one cuBLAS bf16 GEMM of 1024 x {1536, 512, 2048} x {512, 2048} (0.5-2.1 GFLOP; "
                     "32-128 tiles of 128 x 128 on 132 SMs, one wave): 5-12 µs (latency-bound, 100-300 TFLOP/s)",
    "small_sdpa_us": "device time of one flash forward on 16 x 8 heads x 64 x 64 (head_dim 64): one tile per (batch, "
                     "head), 128 CTAs, a few µs of math plus the prologue; band 6-16 µs",
    "graph_node_gap_us": "gap between consecutive kernel nodes of a replayed CUDA graph (no host in the loop): ~1 µs on "
                         "H100; band 0.5-2 µs",
    "d2h_pageable_reuse_gbs": "device-to-host copy into a pageable buffer that is reused (already faulted in): 11.1 GB/s "
                              "measured (aisp hw pcie, quoted by ../derive.py's d2h_pageable_gbs); the driver stages "
                              "through a pinned bounce buffer and the host memcpy out of it; band 8-14",
    "recompute_gemm_frac": "share of a block's forward GEMM FLOPs that the checkpointed recompute runs again: non-reentrant "
                           "checkpointing stops recomputing once every tensor the backward saved has been regenerated "
                           "(early stop, on by default); autograd packs an op's saved inputs before running it, so the last "
                           "op, the down projection (whose input, the GELU output, is the last saved tensor), and the residual "
                           "add after it may be skipped: 16 of the 24 x T x d^2 FLOPs (2/3) if so, all of them if not; band 2/3-1",
    "bwd_gemm_rate_ratio": "rate of the backward's GEMMs (input and weight gradients, the weight gradient reducing over the "
                           "12288 tokens) relative to the forward's at the same shapes: 0.8-1.1 (assumption)",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H100)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q3 = dict(Q)
Q3.update({
    "nvtx_ranges": "sql/nvtx_range_ms.sql: CPU duration of each NVTX range name (count, mean, min, max)",
    "starved": "sql/launch_starved_idle.sql: GPU idle split into gaps whose next kernel had not been launched yet "
               "(the GPU waits for the host) and other gaps, between T0 and T1",
})


# ---------------------------------------------------------------------------------------------------
# DDP on 2 ranks: a timeline of the backward with DDP's buckets (as heldout2/derive.py).
FIRST_BUCKET = float(1 << 20)   # DDP's first bucket: 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES)
BUCKET = 25.0 * (1 << 20)       # bucket_cap_mb = 25


def ddp_timeline(r, nodes):
    """nodes: [(ms, grad bytes made ready at the node's end)] in backward order. Buckets fill in ready order,
    the first closing at >= 1 MiB, the others at >= 25 MiB (the last with whatever is left); one all-reduce per
    bucket, in order on one communicator, each starting when its bucket is full and the previous one is done,
    lasting bytes / algbw + a per-call latency. Returns (backward ms, all-reduce ms left after the backward,
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
    """Backward nodes of a bias-free GELU MLP, last layer first: its GEMMs (weight grad, and input grad except
    for the first layer), the GELU backward in front of it (6 B per bf16 element), the loss backward on the
    last one; each node makes its layer's fp32 weight gradient (4 B per parameter) ready."""
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

# lm_head_ce: GPT-style LM, 16 x 2048 tokens, d 1024, 8 heads of 128, 2 causal blocks, vocabulary 32000, bf16
# parameters, fused AdamW; the loss on logits cast to fp32.
LM = dict(batch=16, seq=2048, d=1024, heads=8, blocks=3, vocab=32000, steps=25)


def lm_ce_bytes(r):
    """Bytes per logit element of F.cross_entropy(logits.float(), y) forward + backward:
    .float() r2 w4 = 6; log_softmax forward r4 w4 + 2 re-reads of 4 (a fraction from DRAM) = 8 + 8f; nll_loss forward
    gathers one element per row (nothing per element); nll_loss backward zero-fills its fp32 gradient w4 = 4 (then
    scatters one element per row); log_softmax backward reads grad 4 and output 4, writes 4, re-reads grad for the
    row sum 4f = 12 + 4f; the cast's backward r4 w2 = 6. Total 36 + 12f."""
    f = r["ce_reread_frac"]
    return 6.0 + (8.0 + 8.0 * f) + 4.0 + (12.0 + 4.0 * f) + 6.0


FUSED_CE_B = 6.0  # a fused (chunked) CE on the bf16 logits: forward reads them once (2), backward reads once, writes the bf16 grad (4)


def m_lmce(r):
    B, S, d, L, V = LM["batch"], LM["seq"], LM["d"], LM["blocks"], LM["vocab"]
    T, N = B * S, B * S * V
    hbm = r["hbm_tbs"]
    P = 2.0 * V * d + L * (12.0 * d * d + 4 * d) + 2 * d
    c = {"trunk_gemm_bf16": t_flops(L * 72.0 * T * d * d, r["bf16_mid_tflops"]),
         "attention_sdpa_causal": t_flops(L * 7.0 * B * S * S * d, r["attn_tflops"]),
         "trunk_layernorm_gelu_residual_copies": t_bytes(L * r["ew_bf16_tokd_bytes"] * T * d, hbm),
         # embedding: gather forward r2 w2 per token x d; backward reads the grad (2), zero-fills and writes the V x d
         # weight grad (2 + 2), plus its sort; final LayerNorm forward 4 + backward 6
         "embedding_final_norm": t_bytes(4.0 * T * d + 2.0 * T * d + 4.0 * V * d + 10.0 * T * d, hbm) + r["embed_bwd_extra_ms"],
         "lm_head_gemm_bf16": t_flops(6.0 * T * d * V, r["bf16_mid_tflops"]),
         "cross_entropy_fp32_unfused": t_bytes(lm_ce_bytes(r) * N, hbm),
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    step = sum(c.values())
    fused = t_bytes(FUSED_CE_B * N, hbm)
    bf16_ce = t_bytes((12.0 + 6.0 * r["ce_reread_frac"]) * N, hbm)  # F.cross_entropy on the bf16 logits, no .float()
    rm = {"elementwise_unfused": c["cross_entropy_fp32_unfused"] - fused,
          "drop_float_only": c["cross_entropy_fp32_unfused"] - bf16_ce}
    return {"c": c, "step": step, "rm": rm, "share": shares(rm, step), "after": step - rm["elementwise_unfused"],
            "ce_share_of_step": pct(c["cross_entropy_fp32_unfused"], step), "fused_ce": fused, "ce_bytes_per_logit": lm_ce_bytes(r),
            "head_gemm_share": pct(c["lm_head_gemm_bf16"], step), "params_m": P / 1e6}


# ranker_serve: small ranking transformer, 16 requests x 64 tokens, d 512, 8 heads of 64, FFN 2048, 12 blocks, biases;
# eager (planted) or one CUDA graph per call (--fixed). No NVTX.
RS = dict(batch=16, seq=64, d=512, heads=8, ffn=2048, blocks=12, vocab=32000, steps=150, warmup=10)
RS_BLOCK_OPS = 11   # ln1, qkv, sdpa, transpose copy, proj, add, ln2, fc1, gelu, fc2, add
RS_TAIL_OPS = 7     # embedding gather, + position, final LayerNorm, mean, score head, sigmoid, copy into the ring
RS_LOOP_OPS = 2     # the throttle's event record and event synchronize
RS_GRAPH_OPS = 3    # --fixed: copy the ids into the static input, replay, copy the scores into the ring


def m_ranker(r, fixed=False):
    L = RS["blocks"]
    tiny, gemm, sdpa = r["tiny_kernel_us"], r["small_gemm_us"], r["small_sdpa_us"]
    # Device time per call: per block 4 GEMMs (qkv, proj, fc1, fc2; bias in the epilogue), 6 tiny kernels (2 LayerNorms,
    # transpose copy, 2 residual adds, GELU) and a flash forward; the tail's 7 kernels are tiny (the head is 1024 x 1).
    kernels = L * RS_BLOCK_OPS + RS_TAIL_OPS
    gpu = (L * (4 * gemm + 6 * tiny + sdpa) + RS_TAIL_OPS * tiny) / 1e3
    u = r["eager_op_us"] / 1e3
    if fixed:
        host = (RS_GRAPH_OPS + RS_LOOP_OPS) * u
        graph = gpu + kernels * r["graph_node_gap_us"] / 1e3
        c = {"gpu_kernels": gpu, "graph_node_gaps": kernels * r["graph_node_gap_us"] / 1e3}
        step = max(graph, host)
        return {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "host_ms": host,
                "host_margin_ms": graph - host, "gpu_busy_share": pct(gpu, step), "kernels": kernels}
    host = (kernels + RS_LOOP_OPS) * u
    c = {"host_launch_eager": host, "gpu_kernels_under_it": gpu}
    step = max(host, gpu)
    after = m_ranker(r, fixed=True)["step"]
    rm = {"launch_bound": step - after}
    return {"c": c, "step": step, "rm": rm, "share": shares(rm, step), "after": after, "kernels": kernels,
            "gpu_busy_share": pct(gpu, step), "gpu_idle_share": pct(step - gpu, step), "speedup": step / after}


# ckpt_train: ViT-style encoder, 48 images x 256 patches of 768 features, d 2048, 16 heads of 128, FFN 8192, 4 blocks,
# 1000 classes, bf16 parameters, fused AdamW, every block under torch.utils.checkpoint (non-reentrant).
CK = dict(batch=48, patches=256, patch_dim=768, d=2048, heads=16, blocks=4, classes=1000, steps=25)
FWD_EW_B = 40.0  # the forward's share of ew_bf16_tokd_bytes: LayerNorms 8, residual adds 12, GELU 16, transpose copy 4


def m_ckpt(r):
    B, S, Fp, d, L, K = CK["batch"], CK["patches"], CK["patch_dim"], CK["d"], CK["blocks"], CK["classes"]
    T = B * S
    hbm = r["hbm_tbs"]
    P = L * (12.0 * d * d + 4 * d) + Fp * d + S * d + d * K + 4 * d
    blk_fwd_gemm = t_flops(24.0 * T * d * d, r["bf16_tflops"])
    blk_bwd_gemm = t_flops(48.0 * T * d * d, r["bf16_tflops"] * r["bwd_gemm_rate_ratio"])
    blk_fwd_attn = t_flops(4.0 * B * S * S * d, r["attn_short_train_tflops"])
    frac = r["recompute_gemm_frac"]
    # what the recompute runs again: frac of the GEMMs, the attention forward, the forward's elementwise traffic less
    # the final residual add (6 B) when the down projection is skipped too
    blk_re_ew = t_bytes((FWD_EW_B - 6.0 * (1.0 - frac) * 3.0) * T * d, hbm)
    c = {"block_gemm_bf16_fwd_bwd": L * (blk_fwd_gemm + blk_bwd_gemm),
         "block_attention_fwd_bwd": L * t_flops(14.0 * B * S * S * d, r["attn_short_train_tflops"]),
         "block_elementwise_fwd_bwd": L * t_bytes(r["ew_bf16_tokd_bytes"] * T * d, hbm),
         "recompute_forward_of_every_block": L * (frac * blk_fwd_gemm + blk_fwd_attn + blk_re_ew),
         # patch embedding GEMM (weight grad only: the input needs none) + position add; pooling, head, CE (tiny)
         "patch_embed_head": t_flops(4.0 * T * Fp * d + 6.0 * B * d * K, r["bf16_tflops"]) + t_bytes(6.0 * T * Fp + 12.0 * T * d, hbm),
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    step = sum(c.values())
    rm = {"activation_recompute": c["recompute_forward_of_every_block"]}
    # Peak memory without checkpointing (GB): bf16 params, grads, Adam m and v (8 B per parameter) + per block saved
    # activations ~17 x T x d x 2 B (LN outputs 2, qkv 3, attention out + its transpose 2, residual 2, up 4, GELU 4).
    act = L * 17.0 * T * d * 2.0
    return {"c": c, "step": step, "rm": rm, "share": shares(rm, step), "after": step - rm["activation_recompute"],
            "params_m": P / 1e6, "peak_gb_without_ckpt": (8.0 * P + act) / GB, "gemm_share": pct(c["block_gemm_bf16_fwd_bwd"] + c["recompute_forward_of_every_block"], step)}


# longctx_train (healthy): 1 x 8192 tokens, vocabulary 4096, d 2048, 16 heads of 128, 3 bidirectional blocks,
# a 256-wide regression head, bf16 parameters, fused AdamW.
LC = dict(batch=1, seq=8192, d=2048, heads=16, blocks=3, vocab=4096, out=256, steps=25)


def m_longctx(r):
    B, S, d, L, V, O = LC["batch"], LC["seq"], LC["d"], LC["blocks"], LC["vocab"], LC["out"]
    T = B * S
    hbm = r["hbm_tbs"]
    P = L * (12.0 * d * d + 4 * d) + V * d + d * O + 2 * d
    c = {"gemm_bf16": t_flops(L * 72.0 * T * d * d + 6.0 * T * d * O, r["bf16_tflops"]),
         "attention_sdpa_flash": t_flops(L * 14.0 * B * S * S * d, r["attn_train_d128_tflops"]),
         "layernorm_gelu_residual_copies": t_bytes(L * r["ew_bf16_tokd_bytes"] * T * d, hbm),
         # embedding gather + backward into a zeroed 4096 x d grad, final LayerNorm, the regression loss
         "embedding_norm_loss": t_bytes(6.0 * T * d + 4.0 * V * d + 10.0 * T * d + LOSS_B * T * O, hbm),
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    step = sum(c.values())
    head = {"gelu_into_gemm_epilogue": t_bytes(L * 16.0 * T * d, hbm),
            "residual_add_into_layernorm": t_bytes(L * 8.0 * T * d, hbm)}
    return {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "headroom_share": shares(head, step),
            "attention_share": pct(c["attention_sdpa_flash"], step), "elementwise_share": pct(c["layernorm_gelu_residual_copies"], step),
            "params_m": P / 1e6}


# ddp2_snapshot: 2 ranks, MLP 1024 -> 4096 -> 4096 -> 1024 (25.2 M fp32 parameters), 131072 rows per rank, bf16
# autocast, DDP, fused AdamW; rank 0 copies every parameter into a reused pageable host tensor after each step.
DS = dict(rows=131072, dims=[1024, 4096, 4096, 1024], snapshot_rank=0, steps=25)


def m_snapshot(r):
    B, dims = DS["rows"], DS["dims"]
    hbm = r["hbm_tbs"]
    P = mlp_params(dims)
    fwd = mlp_forward(r, B, dims) + t_bytes(6.0 * B * dims[0], hbm)  # GEMMs, GELUs, loss; the input's autocast cast
    bwd, left, total, nb = ddp_timeline(r, mlp_bwd_nodes(r, B, dims))
    fx = t_bytes((AMP_B + ADAM_B[4] + DDP_B) * P, hbm)
    ov = r["overlap_penalty"] * (total - left)
    base = fwd + bwd + left + fx + ov
    copy = t_link(4.0 * P, r["d2h_pageable_reuse_gbs"])
    gap = r["ddp_sync_gap_us"] / 1e3  # rank 0's host was blocked in the copy: its next forward starts from an empty queue
    c = {"forward": fwd, "backward": bwd, "amp_casts_adam_ddp_copies": fx, "allreduce_left_after_backward": left,
         "overlap_slowdown": ov, "allreduce_total_overlapped": total,
         "rank0_snapshot_d2h_pageable": copy, "rank0_relaunch_gap": gap}
    step = base + copy + gap
    pinned = t_link(4.0 * P, r["d2h_pinned_gbs"])
    rm = {"copy_not_overlapped": copy + gap, "copy_bound_pageable_only": copy - pinned}
    return {"c": c, "step": step, "rm": rm, "share": shares(rm, step), "after": base, "buckets": nb,
            "tail_share": pct(left, step), "rank1_wait": copy + gap, "pinned_async_copy": pinned,
            "pinned_copy_hidden_margin": base - pinned, "params_m": P / 1e6}


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, ranks=1, nvtx=True, est=45, steps=30, warmup=3):
    return D.base(name, f"heldout3/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
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


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


def build():
    out = {}

    # ---- lm_head_ce (elementwise_unfused: the fp32 cross-entropy) -----------------------------------------
    B, S, d, L, V = LM["batch"], LM["seq"], LM["d"], LM["blocks"], LM["vocab"]
    T, N = B * S, B * S * V
    args = ["--batch", B, "--seq", S, "--d-model", d, "--heads", LM["heads"], "--blocks", L, "--vocab", V]
    b, b2, keys = ev(m_lmce)
    m = base("lm_head_ce", "lm_head_ce.py", "planted", args, steps=LM["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute; the logits cast to fp32 for the loss)", "AdamW fused", attention=True,
                     sequences=True, host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["fused_attention"] = True
    m["techniques"] = techniques(
        "a fused (chunked) cross-entropy on the bf16 logits (a fused linear-cross-entropy / Liger-style kernel, or torch.compile "
        "of the loss) instead of logits.float() + F.cross_entropy; at the least drop the .float()",
        ["flash/fused attention (SDPA already)", "bf16 / autocast for the GEMMs (already bf16)", "fused optimizer (already fused)",
         "CUDA graphs (GPU-bound: ~140 launches per ~37-53 ms step)", "pinned memory / data loading (tokens resident on the GPU)",
         "TF32 (no fp32 GEMMs)", "sequence packing (fixed-length sequences, no padding)"])
    m["planted"] = [planted(
        "elementwise_unfused", {"device": "GPU 0", "region": "step_N > forward (loss) and step_N > backward (its gradient)"},
        "fused cross-entropy on the bf16 logits (not captured: the share is the traffic it removes)", b,
        "rm.elementwise_unfused", "share.elementwise_unfused",
        f"Logits: {T} tokens x {V} = {N / 1e9:.2f} G elements. logits.float() + F.cross_entropy runs as separate kernels over them: "
        f"the cast (r2 w4), log_softmax (r4 w4, plus 2 re-reads of each 128 KB row, 0-50 % of them from DRAM), nll_loss's "
        f"backward zero-fill (w4), log_softmax backward (r4 r4 w4, plus a re-read of the gradient), the cast's backward (r4 w2): "
        f"36-42 B per logit = {36 * N / GB:.1f}-{42 * N / GB:.1f} GB per step at 2.6-3.0 TB/s = {rng(b, 'c.cross_entropy_fp32_unfused')} ms "
        f"({rng(b, 'ce_share_of_step', 1)} % of the step). A fused cross-entropy on the bf16 logits reads them once forward, once "
        f"backward and writes the bf16 gradient: 6 B per logit = {rng(b, 'fused_ce')} ms. Rest of the step: trunk GEMMs "
        f"{L * 72 * T * d * d / 1e12:.2f} TFLOP at 550-800 = {rng(b, 'c.trunk_gemm_bf16')} ms, causal flash attention "
        f"{rng(b, 'c.attention_sdpa_causal')} ms, LayerNorm/GELU/residual/copies {rng(b, 'c.trunk_layernorm_gelu_residual_copies')} ms, "
        f"LM-head GEMMs {6 * T * d * V / 1e12:.2f} TFLOP = {rng(b, 'c.lm_head_gemm_bf16')} ms, embedding and final norm "
        f"{rng(b, 'c.embedding_final_norm')} ms, fused AdamW ({b['params_m'][0]:.0f} M bf16 parameters) {rng(b, 'c.adamw_fused_bf16')} ms. "
        f"Step {rng(b, 'step', 1)} ms; removed {rng(b, 'rm.elementwise_unfused', 1)} ms = {rng(b, 'share.elementwise_unfused', 1)} % -> high "
        f"(H200 at 3.9-4.4 TB/s: {rng(b2, 'share.elementwise_unfused', 1)} %, high). Dropping .float() alone (cross_entropy on the bf16 "
        f"logits, 12-15 B per logit) removes {rng(b, 'share.drop_float_only', 1)} %.", b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / transpose kernels of the 3 blocks (memory-bound, bf16; ~1/3 of their "
                       "traffic could go into GEMM epilogues)", "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expect_quiet"] = False
    m["question"] = ("I'm pretraining a small GPT-style language model in bf16 on one H100 and the step time is well above what I "
                     "budgeted from the model's FLOPs. Where is the time going, and what should I fix first?")
    m["diagnosis"] = (f"In the loss: the {T} x {V} logits are cast to fp32 (logits.float()) and F.cross_entropy runs log_softmax, "
                      f"nll_loss and their backward as separate memory-bound kernels over a {4 * N / GB:.1f} GB fp32 tensor, ~36-42 B per "
                      f"logit, {rng(b, 'c.cross_entropy_fp32_unfused', 1)} ms per step ({rng(b, 'ce_share_of_step', 0)} % of it, more than "
                      f"the LM-head GEMMs). A fused or chunked cross-entropy on the bf16 logits (fused linear-cross-entropy, or "
                      f"torch.compile of the loss) needs ~6 B per logit: it removes {rng(b, 'rm.elementwise_unfused', 1)} ms "
                      f"({rng(b, 'share.elementwise_unfused', 0)} %, high), ~{rng(b, 'step', 0)} -> ~{rng(b, 'after', 0)} ms per step. "
                      "The trunk (bf16 GEMMs, flash attention) and the fused AdamW are fine.")
    m["measure"] = [{"what": "step period", "query": Q3["step"], "expect_ms": r2(b["step"])},
                     {"what": "cross-entropy kernels", "query": Q3["kernels"],
                      "expect": "log_softmax forward and backward (cunn_SoftMaxForward / cunn_SoftMaxBackward), the fp32 cast and its "
                                "backward (elementwise copy kernels), nll_loss's zero-fill: one of each per step, "
                                f"{rng(b, 'c.cross_entropy_fp32_unfused', 1)} ms per step together"},
                     {"what": "their bandwidth", "query": Q3["ew_bw"] + f" with BYTES = {6 * N} (the forward cast), MIN_US = 500",
                      "expect": "2.6-3.0 TB/s: memory-bound, so the removed time scales with the bytes"}]
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- ranker_serve (launch_bound) and ranker_serve.fixed (CUDA graph) -----------------------------------------
    args = ["--batch", RS["batch"], "--seq", RS["seq"], "--d-model", RS["d"], "--heads", RS["heads"], "--ffn", RS["ffn"],
            "--blocks", RS["blocks"], "--vocab", RS["vocab"], "--warmup", RS["warmup"]]
    b, b2, keys = ev(m_ranker)
    k = int(b["kernels"][0])
    m = base("ranker_serve", "ranker_serve.py", "planted", args, nvtx=False, steps=RS["steps"], warmup=RS["warmup"], est=40)
    m["uses"] = uses("bf16", "none (inference)", attention=True, sequences=True,
                     host_sync="event sync two calls back (never idles the GPU)")
    m["uses"]["fused_attention"] = True
    m["techniques"] = techniques(
        "CUDA graphs: capture the forward once and replay it per call (torch.cuda.CUDAGraph, or torch.compile(mode='reduce-overhead'))",
        ["flash attention (SDPA already)", "bf16 (already)", "TF32 (no fp32 GEMMs)", "pinned memory / data loading (inputs resident on the GPU)",
         "optimizer changes (inference)", "GEMM or kernel tuning (the GPU idles most of the call, waiting for launches)",
         "elementwise fusion alone as the top fix (it removes some launches, not the per-op host cost of the GEMMs and attention)"])
    m["planted"] = [planted(
        "launch_bound", {"device": "GPU 0", "region": "every call (no NVTX): ~139 launches per call"},
        "one CUDA graph per call: copy the ids into a static input, replay, copy the scores out (--fixed)", b,
        "rm.launch_bound", "share.launch_bound",
        f"Per call (16 x 64 = 1024 tokens, d 512, 12 blocks): {k} kernels ({RS_BLOCK_OPS} per block: 2 LayerNorms, 4 GEMMs with bias, "
        f"flash attention, a transpose copy, GELU, 2 residual adds; {RS_TAIL_OPS} in the embedding and head) of 2.5-16 µs each: "
        f"{rng(b, 'c.gpu_kernels_under_it')} ms of GPU work. Eager, each is one Python-level op costing 20-70 µs of host time under "
        f"nsys (module call, dispatcher, cudaLaunchKernel), plus {RS_LOOP_OPS} event calls per call: {rng(b, 'c.host_launch_eager')} ms "
        f"per call, so the GPU waits for launches {rng(b, 'gpu_idle_share', 0)} % of the time. Graphed: {RS_GRAPH_OPS + RS_LOOP_OPS} host "
        f"calls per call (0.10-0.35 ms, below the GPU time at every corner) and the kernels back to back with ~0.5-2 µs between graph "
        f"nodes: {rng(b, 'after')} ms. Step {rng(b, 'step')} ms; removed {rng(b, 'rm.launch_bound')} ms = {rng(b, 'share.launch_bound', 1)} % "
        f"-> critical at every corner (no HBM term: the same on H200).", accept=["launch_bound", "host_bound"], b2=b2)]
    m["tolerated"] = [{"what": "start-up before the first call (model construction, cuBLAS / attention initialisation, warm-up calls): "
                       "outside the steady loop", "cause": "host_bound", "max_severity": "info"}]
    m["expect_quiet"] = False
    m["question"] = ("Our ranking model is tiny (12 layers, d 512) and scores 16 requests per call on an H100, yet each call takes "
                     "several milliseconds. Is the GPU the bottleneck?")
    m["diagnosis"] = (f"No, the host is: each call issues ~{k} tiny kernels one eager op at a time (~{rng(b, 'c.gpu_kernels_under_it', 1)} ms "
                      f"of GPU work in all), and every op costs tens of µs of Python, dispatch and launch on the host, so a call takes "
                      f"~{rng(b, 'step', 1)} ms with the GPU idle {rng(b, 'gpu_idle_share', 0)} % of it, waiting for launches. Capture the "
                      f"forward in a CUDA graph (or torch.compile mode='reduce-overhead') and replay it per call: ~{rng(b, 'after', 1)} ms per "
                      f"call ({rng(b, 'share.launch_bound', 0)} % less, {rng(b, 'speedup', 0)}x faster: critical).")
    m["measure"] = [{"what": "call period (no NVTX)", "query": Q3["anchor"] + " with ANCHOR = the embedding gather kernel (indexSelect... or "
                     f"vectorized_gather...), C = 1, WARM = {RS['warmup']}", "expect_ms": r2(b["step"])},
                    {"what": "GPU waiting for launches", "query": Q3["starved"] + " (T0, T1 = the anchor's starts after the warm-up)",
                     "expect": f"launch-starved idle {rng(b, 'gpu_idle_share', 0)} % of the window; {k} +- 5 kernels per call (the SDPA "
                               "backend and the bias epilogues may add or merge one or two)"}]
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="ranker_serve.fixed")

    b, b2, keys = ev(lambda r: m_ranker(r, fixed=True))
    m = base("ranker_serve.fixed", "ranker_serve.py", "fixed", args + ["--fixed"], nvtx=False, steps=RS["steps"], warmup=RS["warmup"], est=40)
    m["uses"] = uses("bf16", "none (inference)", graphs=True, attention=True, sequences=True,
                     host_sync="event sync two calls back (never idles the GPU)")
    m["uses"]["fused_attention"] = True
    m["techniques"] = techniques(None, ["CUDA graphs (already)", "flash attention (SDPA already)", "bf16 (already)", "TF32 (no fp32 GEMMs)",
                                        "pinned memory (inputs resident on the GPU)", "optimizer changes (inference)"])
    m["planted"] = []
    m["tolerated"] = [{"what": f"the ~0.5-2 µs gaps between the graph's {k} kernel nodes ({rng(b, 'c.graph_node_gaps', 2)} ms per call): only "
                       "fewer, fused kernels would shorten them", "cause": "launch_bound", "max_severity": "medium"},
                      {"what": "LayerNorm / GELU / add kernels between the GEMMs (tiny; fusion would remove nodes)", "cause": "elementwise_unfused",
                       "max_severity": "low"},
                      {"what": "start-up before the first call (model construction, graph capture, warm-up)", "cause": "host_bound",
                       "max_severity": "info"}]
    m["expect_quiet"] = False
    m["question"] = "We now replay the scoring forward as a CUDA graph. Is the host still holding the GPU back?"
    m["diagnosis"] = (f"No: the host makes {RS_GRAPH_OPS + RS_LOOP_OPS} API calls per scoring call ({rng(b, 'host_ms', 2)} ms), less than the graph's "
                      f"GPU time, so the kernels run back to back and a call takes ~{rng(b, 'step', 2)} ms, the GPU busy "
                      f"{rng(b, 'gpu_busy_share', 0)} % of it; what is left between kernels is the graph's own node-to-node gap.")
    m["measure"] = [{"what": "call period (no NVTX)", "query": Q3["anchor"] + " with ANCHOR = the embedding gather kernel, C = 1, "
                     f"WARM = {RS['warmup']} (graph kernels are traced per node and carry the graph launch's correlation id)",
                     "expect_ms": r2(b["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- ckpt_train (activation_recompute) ------------------------------------------------------------------------
    Bc, Sc, dc, Lc = CK["batch"], CK["patches"], CK["d"], CK["blocks"]
    Tc = Bc * Sc
    args = ["--batch", Bc, "--patches", Sc, "--patch-dim", CK["patch_dim"], "--d-model", dc, "--heads", CK["heads"], "--blocks", Lc,
            "--classes", CK["classes"]]
    b, b2, keys = ev(m_ckpt)
    m = base("ckpt_train", "ckpt_train.py", "planted", args, steps=CK["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", attention=True, sequences=True,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["fused_attention"] = True
    m["uses"]["activation_checkpointing"] = "every block (torch.utils.checkpoint, use_reentrant=False)"
    m["techniques"] = techniques(
        "turn activation checkpointing off (the run needs ~5 GB without it on an 80 GB card), or checkpoint only what memory requires",
        ["flash attention (SDPA already)", "bf16 (already)", "fused optimizer (already fused)", "CUDA graphs (GPU-bound: ~220 launches per "
         "28-45 ms step)", "pinned memory / data loading (the batch is resident on the GPU)", "TF32 (no fp32 GEMMs)",
         "sequence packing (fixed 256 patches per image, no padding)"])
    m["planted"] = [planted(
        "activation_recompute", {"device": "GPU 0", "region": "step_N > backward (each block's forward runs again before its gradients)"},
        "no activation checkpointing (memory allows it); not captured", b, "rm.activation_recompute", "share.activation_recompute",
        f"{Bc} images x {Sc} patches = {Tc} tokens, d {dc}, {Lc} blocks. Each block's forward: 4 GEMMs of 24 x T x d^2 = "
        f"{24 * Tc * dc * dc / 1e12:.2f} TFLOP, flash attention forward at S = 256 and ~40 B per token x d of LayerNorm/residual/GELU/copy "
        f"traffic. Under checkpointing the backward re-runs it before the block's gradients: 3 2/3 to 4 forward-sized GEMM passes per block "
        f"per step instead of 3 (the non-reentrant checkpoint's early stop may skip the down projection and the last residual add, "
        f"2/3-1 of the GEMM FLOPs; backward GEMMs at 0.8-1.1 x the forward rate). Step: GEMMs forward + backward {rng(b, 'c.block_gemm_bf16_fwd_bwd')} ms at "
        f"650-820, attention {rng(b, 'c.block_attention_fwd_bwd')} ms, elementwise {rng(b, 'c.block_elementwise_fwd_bwd')} ms, the recomputed "
        f"forwards {rng(b, 'c.recompute_forward_of_every_block')} ms, patch embedding / head {rng(b, 'c.patch_embed_head')} ms, fused AdamW "
        f"({b['params_m'][0]:.0f} M bf16 parameters) {rng(b, 'c.adamw_fused_bf16')} ms: {rng(b, 'step', 1)} ms. Without checkpointing the "
        f"peak is ~{b['peak_gb_without_ckpt'][0]:.0f} GB (parameters, gradients and Adam states 8 B x {b['params_m'][0]:.0f} M, ~17 saved "
        f"activations of T x d x 2 B per block), nowhere near 80 GB, so the recompute buys nothing. Removed "
        f"{rng(b, 'rm.activation_recompute', 1)} ms = {rng(b, 'share.activation_recompute', 1)} % -> high (H200: "
        f"{rng(b2, 'share.activation_recompute', 1)} %). New cause name: activation_recompute.", accept=["activation_recompute"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / transpose kernels (memory-bound, bf16; ~1/3 fusable into GEMM epilogues)",
                       "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expect_quiet"] = False
    m["question"] = ("I'm training a ViT-style image encoder in bf16 on one H100. It only uses a few GB of the 80 GB, yet each step is "
                     "slower than I expected from the FLOP count. What's costing the time?")
    m["diagnosis"] = ("Activation checkpointing: every block runs under torch.utils.checkpoint, so the backward re-runs each block's "
                      "forward (its GEMMs, attention and elementwise kernels) before computing its gradients: ~3 2/3-4 forward-sized GEMM "
                      f"passes per block per step instead of 3, {rng(b, 'rm.activation_recompute', 1)} ms of the {rng(b, 'step', 0)} ms step "
                      f"({rng(b, 'share.activation_recompute', 0)} %, high). Memory is no reason for it here (~{b['peak_gb_without_ckpt'][0]:.0f} GB "
                      f"without it): turn it off, or checkpoint selectively: ~{rng(b, 'after', 0)} ms per step. The GEMMs run at tensor-core "
                      "rates, attention is SDPA, the optimizer is fused.")
    m["measure"] = [{"what": "step period", "query": Q3["step"], "expect_ms": r2(b["step"])},
                    {"what": "GEMM and attention kernels per step", "query": Q3["kernels"] + " (divide the counts by the steps)",
                     "expect": f"{Lc * 15 + 5}-{Lc * 16 + 5} GEMM kernels per step ({Lc} x 15-16: forward 4, recompute 3-4, gradients 8; patch "
                               f"embedding and head 5) where {Lc * 12 + 5} would do; flash forward kernels {2 * Lc} per step ({Lc} forward "
                               f"+ {Lc} recompute) next to {Lc} flash backward"},
                    {"what": "backward range", "query": Q3["step"] + " with the range name 'backward' in place of step_N",
                     "expect": "the kernels launched inside 'backward' include forward-shaped GEMMs and flash forward kernels, one "
                               "block's recompute before that block's gradient GEMMs"}]
    m["new_cause"] = {"name": "activation_recompute", "why": "forward work recomputed in the backward (activation checkpointing) that "
                      "memory does not require: none of the existing causes names redundant recomputation, and its fix (stop "
                      "checkpointing, or checkpoint selectively) differs from every other cause's"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- longctx_train (healthy) ----------------------------------------------------------------------------------
    args = ["--batch", LC["batch"], "--seq", LC["seq"], "--d-model", LC["d"], "--heads", LC["heads"], "--blocks", LC["blocks"],
            "--vocab", LC["vocab"], "--out", LC["out"]]
    b, b2, keys = ev(m_longctx)
    m = base("longctx_train", "longctx_train.py", "healthy", args, steps=LC["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", attention=True, sequences=True,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["fused_attention"] = True
    m["techniques"] = techniques(None, ["flash attention (SDPA flash already)", "bf16 (already)", "fused optimizer (already)",
                                        "CUDA graphs (GPU-bound: ~140 launches per 23-38 ms step)", "pinned memory / data loading "
                                        "(data resident on the GPU)", "TF32 (no fp32 GEMMs)", "sequence packing (one full-length sequence, "
                                        "no padding)", "activation checkpointing changes (none used; memory is no concern)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "GELU into the GEMM epilogue", "cause": "elementwise_unfused", "max_severity": "low",
                       "share_pct": r2(b["headroom_share.gelu_into_gemm_epilogue"])},
                      {"what": "residual add into LayerNorm", "cause": "elementwise_unfused", "max_severity": "low",
                       "share_pct": r2(b["headroom_share.residual_add_into_layernorm"])},
                      {"what": "the LayerNorm / GELU / residual / transpose kernels in all (memory-bound, bf16): only the two "
                       "fusions above would remove time", "cause": "elementwise_unfused", "max_severity": "low",
                       "share_pct": r2(b["elementwise_share"])}]
    m["expect_quiet"] = True
    m["question"] = ("We train a long-context (8k-token) bidirectional encoder on one H100 and attention seems to take most of the "
                     "step. Is something wrong, or is there an easy speed-up?")
    m["diagnosis"] = (f"Nothing is wrong: at S = 8192 attention is {rng(b, 'attention_share', 0)} % of the ~{rng(b, 'step', 1)} ms step by its "
                      f"FLOPs alone ({14 * LC['seq'] ** 2 * LC['d'] / 1e12:.2f} TFLOP per block forward + backward) and it already runs as "
                      f"the flash kernel (SDPA) at a normal rate; the GEMMs are bf16 on tensor cores, LayerNorm/GELU/residual kernels are "
                      f"{rng(b, 'elementwise_share', 0)} % with ~1-2 % fusable, the optimizer is fused and the host stays ahead. Nothing above low; a shorter context or a "
                      "sparse/local attention pattern would be a modelling change, not a fix.")
    m["measure"] = [{"what": "step period", "query": Q3["step"], "expect_ms": r2(b["step"])},
                    {"what": "attention share", "query": Q3["kernels"], "expect": f"flash forward + backward kernels "
                     f"{rng(b, 'c.attention_sdpa_flash', 1)} ms per step ({LC['blocks']} of each)"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- ddp2_snapshot (copy_not_overlapped on rank 0; rank 1 waits) -----------------------------------------------
    dims = ",".join(map(str, DS["dims"]))
    args = ["--rows", DS["rows"], "--dims", dims, "--snapshot-rank", DS["snapshot_rank"]]
    b, b2, keys = ev(m_snapshot)
    P = mlp_params(DS["dims"])
    m = base("ddp2_snapshot", "ddp2_snapshot.py", "planted", args, ranks=2, steps=DS["steps"], est=55)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=True, pinned=False,
                     host_sync="rank 0: a blocking device-to-host copy of the weights every step; rank 1: none")
    m["techniques"] = techniques(
        "take the host snapshot off rank 0's critical path: pinned host buffers and copy_(non_blocking=True) on a side stream "
        "(read a step later), or snapshot every N steps / split it across ranks",
        NOT_ATT + ["bf16 autocast (already)", "fused optimizer (already)", "NCCL / interconnect tuning (the all-reduce is ~0.4-0.6 ms "
                   "per step and overlaps the backward)", "bucket size tuning", "rebalancing rows (rows are equal)",
                   "CUDA graphs (GPU-bound: ~50 launches per ~36-49 ms step)"])
    m["planted"] = [planted(
        "copy_not_overlapped", {"rank": DS["snapshot_rank"], "waiting_ranks": [1], "region": "step_N > snapshot (rank 0)"},
        "pinned buffers + non_blocking copy on a side stream (or a snapshot every N steps); not captured", b,
        "rm.copy_not_overlapped", "share.copy_not_overlapped",
        f"After every optimizer step rank 0 alone copies its {P / 1e6:.1f} M fp32 weights ({4 * P / 1e6:.0f} MB, 3 tensors) into "
        f"reused pageable host tensors with a plain copy_: a blocking device-to-host copy on its compute stream at 8-14 GB/s = "
        f"{rng(b, 'c.rank0_snapshot_d2h_pageable')} ms, its host blocked meanwhile, then {rng(b, 'c.rank0_relaunch_gap')} ms until its next "
        f"forward's first kernel. Rank 1 runs its forward and backward and waits inside its first all-reduce of the step for as long. "
        f"Per-rank work (131072 rows, equal): forward {rng(b, 'c.forward')} ms, backward {rng(b, 'c.backward')} ms, AMP casts / fused "
        f"AdamW / DDP copies {rng(b, 'c.amp_casts_adam_ddp_copies')} ms, all-reduce ({int(b['buckets'][0])} buckets, {4 * P / 1e6:.0f} MB at "
        f"200-300 GB/s) {rng(b, 'c.allreduce_total_overlapped')} ms overlapped, {rng(b, 'c.allreduce_left_after_backward')} ms left after "
        f"the backward. Step (both ranks) {rng(b, 'step', 1)} ms. Fix: pinned buffers and a non_blocking copy on a side stream "
        f"({rng(b, 'pinned_async_copy')} ms at 50-56 GB/s, hidden under the next step's compute) removes {rng(b, 'rm.copy_not_overlapped', 1)} "
        f"ms = {rng(b, 'share.copy_not_overlapped', 1)} % -> high (H200: {rng(b2, 'share.copy_not_overlapped', 1)} %). Pinned but still "
        f"blocking would remove only the pageable part: {rng(b, 'share.copy_bound_pageable_only', 1)} %.",
        accept=["copy_not_overlapped", "copy_bound_pageable", "straggler_host", "straggler_compute", "host_sync"], b2=b2)]
    m["tolerated"] = [{"what": "NCCL kernels on rank 1 that last wait + transfer (the straggler's symptom)", "cause": "exposed_communication",
                       "max_severity": "info", "why": "the wait is rank 0's copy; counting it again as communication double-counts it"},
                      {"what": "the all-reduce left after the backward on both ranks (the last bucket)", "cause": "exposed_communication",
                       "max_severity": "low", "share_pct": r2(b["tail_share"])},
                      {"what": "GELU / loss / cast kernels under autocast", "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expect_quiet"] = False
    m["question"] = ("Our 2-GPU DDP job gives both GPUs the same batch, but GPU 1 spends a big part of every step inside NCCL "
                     "all-reduce. Is communication our bottleneck, and how do we get the step time down?")
    m["diagnosis"] = (f"No, rank 1 is waiting for rank 0: after every optimizer step rank 0 alone copies all {4 * P / 1e6:.0f} MB of fp32 "
                      f"weights into pageable host tensors with a blocking copy_ ({rng(b, 'c.rank0_snapshot_d2h_pageable', 1)} ms at "
                      "8-14 GB/s, its host blocked), so its next forward and first all-reduce start that much later and rank 1 idles "
                      "inside that all-reduce. Copy into pinned buffers with non_blocking=True on a side stream (read it a step later), or "
                      f"snapshot every N steps: ~{rng(b, 'step', 0)} -> ~{rng(b, 'after', 0)} ms per step ({rng(b, 'share.copy_not_overlapped', 0)} %, "
                      f"high). The all-reduce itself ({int(b['buckets'][0])} buckets, ~0.4-0.6 ms) overlaps the backward.")
    m["measure"] = [{"what": "step period per rank", "query": Q3["step"], "expect_ms": r2(b["step"])},
                    {"what": "the snapshot copies", "query": Q3["memcpy"] + " (rank 0's export)",
                     "expect": f"copyKind 2 (DtoH), dstKind 0 (pageable): 3 per step, {4 * P / 1e6:.0f} MB, 8-14 GB/s; none on rank 1"},
                    {"what": "rank 1's wait", "query": Q3["nccl"], "expect": "rank 1's first all-reduce of each step lasts ~the copy time "
                     "longer than rank 0's"},
                    {"what": "the snapshot range", "query": Q3["nvtx_ranges"] + " (rank 0)",
                     "expect": f"'snapshot' lasts {rng(b, 'c.rank0_snapshot_d2h_pageable', 1)} ms of host time per step"}]
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.table)
