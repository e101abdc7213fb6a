#!/usr/bin/env python3
"""First-principles truth for the eleventh held-out set (heldout11): writes heldout11/manifests/<case>.json from FLOPs,
bytes, call counts and rate bands alone (no capture, no aisp output, no GPU run), with the helpers of ../derive.py.

    python3 workloads/planted/heldout11/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout11/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout11/derive.py --table    # the table only

Method: as ../derive.py and heldout10/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or calls x a host cost per call; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the GPU (for the 2-rank
case: of either rank, the ranks being symmetric).

Severity (this set): the bands of the brief this set was written to, info < 1 % <= low < 3 % <= medium < 10 % <= high
< 25 % <= critical; each planted problem also carries `severity_legacy` under the bands of the earlier sets (info < 1 %
<= low < 5 % <= medium < 15 % <= high < 40 % <= critical), so that both readings are on record.

Made for H200s: four one-GPU programs, one of them with a captured fixed variant (a before/after pair), and one 2-rank
DDP program (torchrun --nproc_per_node=2): the set needs an nvidia-h200-x2 host for its multi phase. Every model gives
the host time of a step (Python ops x eager_op_us + backward nodes x bwd_node_us) beside the GPU time and takes the
larger, so that a case meant to be GPU-bound is checked at every corner (host_margin_ms) and a host-bound one is
modelled as such. Software assumed (the capture image as KINDS.md records it): PyTorch 2.11 with cuDNN 9.19 on sm_90,
where F.scaled_dot_product_attention prefers the cuDNN backend, which also takes an attention mask as a bias.
"""
import math
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
ADAM_B, GB, Q, AMP_B, DDP_B = D.ADAM_B, D.GB, D.Q, D.AMP_B, D.DDP_B
pct, r2, rng, techniques, uses = D.pct, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link

SET = "heldout11"

# ---------------------------------------------------------------------------------------------------
# Severity bands (see the docstring).
BANDS11 = [(1.0, "info"), (3.0, "low"), (10.0, "medium"), (25.0, "high"), (math.inf, "critical")]
SEV_DOC11 = ("info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical, of the device's steady step period "
             "(severity_legacy: the earlier sets' info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical)")


def band11(p):
    for edge, name in BANDS11:
        if p < edge:
            return name
    return "critical"


def band_of11(b, key):
    lo, hi = b[key]
    return band11((lo + hi) / 2), [band11(lo), band11(hi)]


# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; fractions as named.
NEW_H100 = {
    # copied from heldout2-10 (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "eager_op_us": (20.0, 70.0),
    "tiny_kernel_us": (2.0, 6.0),
    "bwd_node_us": (10.0, 30.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    # new here
    "attn_fwd_tflops": (300.0, 550.0),
    "mask_bias_ratio": (1.7, 3.0),
    "bias_l2_miss": (0.125, 1.0),
    "gemv_eff": (0.6, 0.9),
    "attn_short_fwd_tflops": (100.0, 300.0),
    "dropout_eff": (0.6, 0.95),
    "attn_dropout_slowdown": (1.1, 1.6),
    "sort_eff": (0.5, 0.85),
    "conv_tflops": (180.0, 450.0),
    "conv_stem_tflops": (40.0, 150.0),
    "bn_eff": (0.5, 0.9),
    "nccl_small_gpu_us": (8.0, 25.0),
    "sync_rtt_us": (10.0, 40.0),
    "ddp_hook_us": (2.0, 5.0),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 2048 or less (or a varying M): below the 8192^3 rate (732-787 "
                       "measured) as tiles and waves shrink and the epilogue's writes weigh more; an assumption widened "
                       "down to 550 (heldout2-10). Used for every GEMM whose smallest dimension is <= 2048; bf16_tflops "
                       "for the others",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing: 29-36 µs "
                   "measured (quoted by ../derive.py), ~70 implied by heldout2; band 20-70 (heldout3-10)",
    "tiny_kernel_us": "GPU time of one tiny kernel (a scalar op, a reduction over a few thousand elements) in a chain of "
                      "dependent kernels, including the launch latency to the next one when the host is ahead: 2-6 µs "
                      "(assumption of heldout7-10)",
    "bwd_node_us": "host time of one backward node in the C++ autograd engine (the node's function, 1-3 kernel launches "
                   "at 4-10 µs under CUPTI, the ready-queue bookkeeping): 10-30 µs (assumption of heldout9-10)",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: "
                     "torch busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (quoted by heldout2/derive.py); "
                     "band 200-300 (heldout3-8)",
    "attn_fwd_tflops": "SDPA forward only (inference prefill), bf16, head_dim 128, causal, counted as 2*B*S^2*d FLOPs per "
                       "block (the causal half of 4*B*S^2*d): cuDNN's Hopper attention forward reaches ~500-650 "
                       "non-causal, causal tiles and short (1-2k) sequences less; 300-550 (assumption)",
    "mask_bias_ratio": "time of one SDPA call forward + backward with an explicit [S, S] mask (taken by cuDNN as an "
                       "additive bias, every tile computed: 14*B*S^2*d FLOPs) over the same call with is_causal=True "
                       "(masked tiles skipped: 7*B*S^2*d): 2x the FLOPs, times 0.85-1.5 for the per-FLOP rate (the "
                       "non-causal kernel has no ragged diagonal tiles, but loads a bias tile per score tile). Assumes "
                       "cuDNN runs both calls (PyTorch 2.11 + cuDNN 9.19 on sm_90, KINDS.md); were the mask sent to the "
                       "memory-efficient kernel instead, the ratio would be 3-6 (assumption)",
    "bias_l2_miss": "fraction of the bias tile reads (one [S, S] bf16 bias, re-read by every head of every sequence, "
                    "forward and backward) that reach HBM: 1/heads when the heads of one query tile run together and "
                    "the 134 MB bias (S = 8192) streams through the 60 MB L2 once per pass, 1 when every head re-reads it "
                    "from HBM; 0.125-1 (assumption)",
    "gemv_eff": "fraction of the HBM rate reached by GEMMs with M = 8 rows (decode: the weights stream once per token) "
                "and by the decode attention kernel reading the key/value cache: 0.6-0.9 (assumption)",
    "attn_short_fwd_tflops": "SDPA forward only, bf16, head_dim 64, non-causal, 197 tokens per image, counted as "
                             "4*B*S^2*d: two 128-row query tiles per (image, head), the second mostly empty; 100-300 "
                             "(assumption)",
    "dropout_eff": "fraction of the HBM rate reached by the fused dropout kernel (bf16 in, bf16 out and a bool mask "
                   "written, a Philox draw per element): 0.6-0.95 (assumption)",
    "attn_dropout_slowdown": "SDPA forward with dropout_p = 0.1 (a Philox draw and a mask test per attention score inside "
                             "the kernel) over the same call without dropout, at 197 tokens, head_dim 64: 1.1-1.6 "
                             "(assumption)",
    "sort_eff": "fraction of the HBM rate reached by CUB's onesweep radix sort passes over 64-bit keys with 64-bit "
                "values (decoupled look-back, scattered writes): 0.5-0.85 (assumption)",
    "conv_tflops": "cuDNN bf16 convolutions, channels_last, ResNet-50 shapes at 224 x 224 and 128 images (implicit GEMMs "
                   "with K = 64-4608), forward, data gradient and weight gradient alike: 180-450 (assumption; "
                   "each pass also bounded below by its bytes at hbm_tbs x bn_eff)",
    "conv_stem_tflops": "the 7 x 7 stride-2 stem convolution on 3 input channels (K = 147, padded): 40-150 (assumption)",
    "bn_eff": "fraction of the HBM rate reached by BatchNorm statistics / normalization / backward kernels, ReLU, "
              "residual adds and max pooling on channels_last bf16 tensors (per-channel reductions): 0.5-0.9 "
              "(assumption)",
    "nccl_small_gpu_us": "GPU time of one tiny NCCL collective (an all-gather or all-reduce of <= 16 KB) on 2 H200 over "
                         "NVLink, NVLS off, the compute stream waiting on it: 8-25 µs (assumption)",
    "sync_rtt_us": "a device-to-host synchronization once the GPU has drained: the 8-byte D2H copy of a nonzero count, "
                   "cudaStreamSynchronize's return and the thread's wake-up: 10-40 µs (assumption)",
    "ddp_hook_us": "host time of DDP's autograd hook per parameter (marking it ready in its bucket): 2-5 µs "
                   "(assumption)",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q11 = dict(Q)
Q11.update({
    "nvtx_ranges": "sql/nvtx_range_ms.sql: CPU duration of each NVTX range name (count, mean, min, max)",
    "starved": "sql/launch_starved_idle.sql: GPU idle split into gaps whose next kernel had not been launched yet "
               "(the GPU waits for the host) and other gaps, between T0 and T1",
})


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


def gemm(r, m, n, k, mult=1.0):
    """mult x 2*m*n*k FLOPs at the rate for this shape: bf16_tflops when every dimension exceeds 2048, else the
    mid band."""
    rate = r["bf16_tflops"] if min(m, n, k) > 2048 else r["bf16_mid_tflops"]
    return t_flops(mult * 2.0 * m * n * k, rate)


def finish_gpu_host(out, gpu_ms, host_ms):
    out["gpu_ms"] = gpu_ms
    out["host_ms"] = host_ms
    out["host_margin_ms"] = gpu_ms - host_ms
    return out


EW_BLOCK_B = 112.0  # bytes per token x d per transformer block in training: LayerNorms, GELU, residuals, head-merge
# copies, q/k/v gradient stacking (heldout2's count)
EW_BLOCK_FWD_B = 40.0  # the same, forward only: LayerNorms 2 x (r2 w2), residual adds 2 x (r2 r2 w2), GELU on 4d
# (r2 w2 x 4), the attention output's transpose-reshape copy (r2 w2)


# ---------------------------------------------------------------------------------------------------
# chat_decode: vocab 32768, d 3072, 8 blocks (24 heads of 128, MLP 4x, biases, bf16), learned positions, untied head;
# 8 prompts of 1024 tokens, 32 greedy tokens; no KV cache (the whole sequence every token) unless fixed.
DEC = dict(batch=8, prompt=1024, vocab=32768, d=3072, heads=24, blocks=8, max_pos=2048, steps=32, warmup=3)
DEC_BLOCK_OPS = 18        # ln1, qkv, view, unbind, 3 transposes, sdpa, transpose, reshape, proj, add, ln2, fc1, gelu,
# fc2, add (+ the block call)
DEC_BLOCK_OPS_FIXED = 22  # the same less the k / v transposes, plus 2 cache writes, 2 slices and 2 transposes of the cache
DEC_OTHER_OPS = 12        # ids slice, embedding, position slice, add, last-position slice, norm, head, argmax, id write,
# the event record and wait, the NVTX ranges
DEC_KERNELS_BLOCK = (11, 13)  # per block: 2 LN, 4 GEMMs, SDPA, 2 adds, GELU, output copy (+ 2 cache-write copies, fixed)


def dec_params():
    d, L, V, Pm = DEC["d"], DEC["blocks"], DEC["vocab"], DEC["max_pos"]
    return float(V * d + Pm * d + L * (12 * d * d + 13 * d) + 2 * d + d * V)


def dec_mean_tokens():
    """Tokens per sequence the planted forward runs over, averaged over the steady steps (1024 + step)."""
    s0, s1 = DEC["warmup"], DEC["steps"] - 1
    return DEC["prompt"] + (s0 + s1) / 2.0


def m_dec(r, fixed=False):
    B, d, L, V = DEC["batch"], DEC["d"], DEC["blocks"], DEC["vocab"]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    n = dec_mean_tokens()
    P = dec_params()
    if fixed:
        # one token per sequence: every weight streams once (M = 8 GEMMs), the cache is read by the attention
        w_bytes = 2.0 * (L * (12 * d * d + 13 * d) + d * V)
        kv_bytes = L * 2 * B * n * d * 2.0
        c = {"weights_stream": t_bytes(w_bytes, hbm * r["gemv_eff"]),
             "kv_cache_read": t_bytes(kv_bytes, hbm * r["gemv_eff"]),
             "small_kernels": (L * (DEC_KERNELS_BLOCK[1] - 5) + 6) * tiny}
        gpu = sum(c.values())
        host = (L * DEC_BLOCK_OPS_FIXED + DEC_OTHER_OPS) * r["eager_op_us"] / 1e3
        step = max(gpu, host)
        c["gpu_waiting_for_host"] = step - gpu
        out = {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "params_b": P / 1e9,
               "weights_gb": w_bytes / GB, "kv_gb": kv_bytes / GB, "gpu_busy_share": pct(gpu, step)}
        return finish_gpu_host(out, gpu, host)
    T = B * n
    c = {"linear_gemm_bf16": L * (gemm(r, T, d, 3 * d) + gemm(r, T, d, d) + 2 * gemm(r, T, d, 4 * d)),
         "attention_causal_fwd": t_flops(L * 2.0 * B * n * n * d, r["attn_fwd_tflops"]),
         "layernorm_gelu_residual_copies": t_bytes(L * EW_BLOCK_FWD_B * T * d, hbm),
         "embedding_head_sample": t_bytes(6.0 * T * d + 2.0 * d * V, hbm) + 4 * tiny}
    gpu = sum(c.values())
    host = (L * DEC_BLOCK_OPS + DEC_OTHER_OPS) * r["eager_op_us"] / 1e3
    step = max(gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "params_b": P / 1e9, "tokens_per_step": T,
                           "gemm_tflop": L * 24.0 * T * d * d / 1e12}, gpu, host)
    fx = m_dec(r, fixed=True)
    rm = {"no_kv_cache": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# vit_embed: ViT-B/16 (d 768, 12 blocks, 12 heads of 64, MLP 4x, biases, bf16), 197 tokens, 256 images per batch,
# inference_mode; dropout 0.1 (attention, projection, MLP x 2) and drop path up to 0.1 active (training mode) unless fixed.
VIT = dict(batch=256, image=224, patch=16, d=768, heads=12, blocks=12, drop=0.1, drop_path=0.1, steps=30)
VIT_BLOCK_OPS = 20        # eval: ln1, qkv, view, permute, unbind, sdpa, transpose, reshape, proj, proj_drop (a call that
# returns its input), drop_path (returns), add, ln2, fc1, gelu, drop1, fc2, drop2, drop_path, add
VIT_BLOCK_OPS_TRAIN = 26  # training mode: each of the two drop paths runs new_empty, bernoulli_, div_, mul
VIT_OTHER_OPS = 14        # conv, flatten, transpose, expand, cat, + pos, final norm, class-token slice, float, normalize,
# to bf16, index write, event record and wait
VIT_DROPOUT_B = 5.0       # per element: bf16 read and write, bool mask written


def vit_dims():
    B, I, Pt, d = VIT["batch"], VIT["image"], VIT["patch"], VIT["d"]
    S = (I // Pt) ** 2 + 1
    return B, S, B * S, d


def vit_params():
    d, L, Pt = VIT["d"], VIT["blocks"], VIT["patch"]
    S = (VIT["image"] // Pt) ** 2 + 1
    return float(3 * Pt * Pt * d + d + d + S * d + L * (12 * d * d + 13 * d) + 2 * d)


def vit_droppath_blocks():
    L = VIT["blocks"]
    return sum(1 for i in range(L) if VIT["drop_path"] * i / max(L - 1, 1) > 0)


def m_vit(r, fixed=False):
    B, S, T, d = vit_dims()
    L = VIT["blocks"]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    pix = B * 3 * VIT["image"] ** 2
    c = {"linear_gemm_bf16": L * (gemm(r, T, d, 3 * d) + gemm(r, T, d, d) + 2 * gemm(r, T, d, 4 * d)),
         "patch_embed_conv": gemm(r, B * (S - 1), 3 * VIT["patch"] ** 2, d) + t_bytes(2.0 * pix, hbm),
         "attention_fwd": t_flops(L * 4.0 * B * S * S * d, r["attn_short_fwd_tflops"]),
         # blocks' LayerNorms / residuals / GELU / copies; embedding flatten-transpose, class-token cat, + positions
         # (~14 B per token x d); final LayerNorm on the class tokens, normalize and the index write: tiny
         "layernorm_gelu_residual_copies": t_bytes((L * EW_BLOCK_FWD_B + 14.0) * T * d, hbm) + 4 * tiny}
    ops = L * VIT_BLOCK_OPS + VIT_OTHER_OPS
    if not fixed:
        nd = vit_droppath_blocks()
        # three dropouts per block: after the projection (T x d), after the GELU (T x 4d), after fc2 (T x d)
        c["dropout_masks"] = t_bytes(L * 6.0 * T * d * VIT_DROPOUT_B, hbm * r["dropout_eff"]) + L * 3 * tiny
        # drop path: a [B, 1, 1] Bernoulli draw and a rescale (tiny) and x * mask (r2 w2) on both residual branches
        c["drop_path"] = t_bytes(nd * 2 * 4.0 * T * d, hbm) + nd * 2 * 2 * tiny
        c["attention_dropout_extra"] = c["attention_fwd"] * (r["attn_dropout_slowdown"] - 1.0)
        ops = L * VIT_BLOCK_OPS_TRAIN + VIT_OTHER_OPS
    gpu = sum(c.values())
    host = ops * r["eager_op_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "params_m": vit_params() / 1e6, "tokens": T}, gpu, host)
    out["gemm_share"] = pct(c["linear_gemm_bf16"] + c["patch_embed_conv"], step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_vit(r, fixed=True)["step"]
    rm = {"train_mode_inference": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after,
                "dropout_gb": L * 6.0 * T * d * VIT_DROPOUT_B / GB})
    return out


# ---------------------------------------------------------------------------------------------------
# long_lm: vocab 32768, d 1024, 8 blocks (8 heads of 128, MLP 4x, biases, bf16), untied head, 1 x 8192 tokens, fused AdamW;
# causality from an explicit [8192, 8192] boolean mask passed as attn_mask (is_causal=True when fixed).
LL = dict(batch=1, seq=8192, vocab=32768, d=1024, heads=8, blocks=8, steps=25)
LL_BLOCK_OPS = 19      # ln1, qkv, split, 3 views, 3 transposes, sdpa, transpose, reshape, proj, add, ln2, fc1, gelu, fc2,
# add (+ the mask slice when planted)
LL_OTHER_OPS = 16      # batch slices, embedding, norm, head, view, reshape, cross-entropy, backward call, fused AdamW
# (~3), zero_grad, loss copy, event record and wait
LL_BWD_NODES = 20      # per block: 2 LayerNorm, 4 addmm (+ transposes), SDPA, GELU, 2 adds, views / transposes / split


def ll_params():
    V, d, L = LL["vocab"], LL["d"], LL["blocks"]
    return float(V * d + L * (12 * d * d + 13 * d) + 2 * d + d * V + V)


def m_ll(r, fixed=False):
    B, S, V, d, H, L = (LL[k] for k in ("batch", "seq", "vocab", "d", "heads", "blocks"))
    T = float(B * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P = ll_params()
    attn_causal = t_flops(L * 7.0 * B * S * S * d, r["attn_tflops"])
    c = {"linear_gemm_bf16": L * (gemm(r, T, d, 3 * d, 3.0) + gemm(r, T, d, d, 3.0) + 2 * gemm(r, T, d, 4 * d, 3.0)),
         "lm_head_gemm": gemm(r, T, d, V, 3.0),
         "layernorm_gelu_residual_copies": t_bytes((L * EW_BLOCK_B + 14.0) * T * d, hbm),
         # bf16 logits: log_softmax r2 w2, its backward r2 r2 w2, the NLL gradient's zero fill w2 (and a scatter)
         "cross_entropy_bf16": t_bytes(12.0 * T * V, hbm) + 4 * tiny,
         # gather r2 w2; backward: the table's gradient zero-filled (w2 V x d) and the rows summed in (~8 B per token x d)
         "embedding": t_bytes(4.0 * T * d + 2.0 * V * d + 8.0 * T * d, hbm) + 12 * tiny,
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    if fixed:
        c["attention_causal"] = attn_causal
    else:
        c["attention_masked_full"] = attn_causal * r["mask_bias_ratio"]
        # torch.where(mask, 0, -inf): the bool mask read (1 B) and the bf16 bias written (2 B) per block call
        c["mask_to_bias"] = t_bytes(L * 3.0 * S * S, hbm) + L * tiny
        # the bias tiles read from HBM: B x heads x S^2 x 2 B per pass, forward and backward, times the L2 miss fraction
        c["bias_reads_hbm"] = t_bytes(L * 2 * B * H * S * S * 2.0 * r["bias_l2_miss"], hbm)
    gpu = sum(c.values())
    ops = L * (LL_BLOCK_OPS + (0 if fixed else 1)) + LL_OTHER_OPS
    host = ops * r["eager_op_us"] / 1e3 + (L * LL_BWD_NODES + 8) * r["bwd_node_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "attn_causal_ms": attn_causal}, gpu, host)
    out["gemm_share"] = pct(c["linear_gemm_bf16"] + c["lm_head_gemm"], step)
    if fixed:
        out["attn_share"] = pct(c["attention_causal"], step)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["attn_share"] = pct(c["attention_masked_full"], step)
    after = m_ll(r, fixed=True)["step"]
    rm = {"sdpa_explicit_mask": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after})
    return out


# ---------------------------------------------------------------------------------------------------
# pano_field: 4096 x 2048 pixels, 262144 per step; Fourier features (256 frequencies) -> MLP 512 -> 1024 x 4 -> 3 (GELU,
# biases, bf16), MSE, fused AdamW; the pixel indices from a full torch.randperm(8.4 M) per step unless fixed (randint).
FLD = dict(width=4096, height=2048, batch=262144, freqs=256, hidden=1024, layers=4, steps=30)
FLD_OPS = 37       # sample ~20 (randperm / randint, slice, floor-divide, multiply, subtract, 2 casts, 4 scale / shift,
# stack, matmul, x 2 pi, sin, cos, cat, cast, gather, float, / 255); forward 11; backward call, fused AdamW, zero_grad,
# loss copy, event, NVTX
FLD_BWD_NODES = 20
FLD_FEAT_B = 56.0  # bytes per (row, frequency): coords @ bmat w4, x 2 pi r4 w4, sin r4 w4, cos r4 w4, cat r8 w8, cast to
# bf16 (r4 w2 per feature, two features)


def fld_params():
    dims = [2 * FLD["freqs"]] + [FLD["hidden"]] * FLD["layers"] + [3]
    return float(sum(i * o + o for i, o in zip(dims, dims[1:])))


def randperm_bits(n):
    """Key bits PyTorch's CUDA randperm sorts on (Randperm.cu: enough bits that duplicate keys are rare)."""
    return min(64, int(math.ceil(math.log2(n - (6.0 * n * n + 1) / (math.log(0.9) * 12)))))


def randperm_bytes(n):
    """Bytes a CUDA torch.randperm(n) moves: random int64 keys (w8) and the index range (w8); CUB onesweep radix sort
    of (int64 key, int64 value) pairs: one histogram pass over the keys (r8) and ceil(bits / 8) passes each reading
    and writing keys and values (32 B); the duplicate-key fix-up kernel reads the sorted keys (~r8)."""
    passes = int(math.ceil(randperm_bits(n) / 8.0))
    return (8 + 8 + 8 + 32 * passes + 8) * float(n), passes


def m_fld(r, fixed=False):
    N = FLD["width"] * FLD["height"]
    R, F_, Hd, L = FLD["batch"], FLD["freqs"], FLD["hidden"], FLD["layers"]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    dims = [2 * F_] + [Hd] * L + [3]
    c = {"index_math_gather": t_bytes(120.0 * R, hbm) + 14 * tiny,
         "fourier_features": t_bytes(FLD_FEAT_B * R * F_, hbm),
         "mlp_gemm_bf16": sum(gemm(r, R, i, o, 2.0 if k == 0 else 3.0) for k, (i, o) in enumerate(zip(dims, dims[1:]))),
         # GELU forward r2 w2, backward r2 r2 w2, bias-gradient reduction r2, on each hidden activation
         "gelu_bias_grad": t_bytes(12.0 * R * Hd * L, hbm),
         "loss_adamw": t_bytes(ADAM_B[2] * fld_params(), hbm) + 8 * tiny}
    if not fixed:
        nbytes, passes = randperm_bytes(N)
        c["randperm_full"] = t_bytes(nbytes, hbm * r["sort_eff"]) + (passes + 5) * tiny
    gpu = sum(c.values())
    host = FLD_OPS * r["eager_op_us"] / 1e3 + FLD_BWD_NODES * r["bwd_node_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "params_m": fld_params() / 1e6}, gpu, host)
    out["gemm_share"] = pct(c["mlp_gemm_bf16"], step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    nbytes, passes = randperm_bytes(N)
    after = m_fld(r, fixed=True)["step"]
    rm = {"randperm_sampling": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after, "randperm_gb": nbytes / GB,
                "randperm_passes": passes, "randperm_bits": randperm_bits(N)})
    return out


# ---------------------------------------------------------------------------------------------------
# resnet_ddp: 2 ranks, ResNet-50 at 224 x 224, 128 images per GPU, channels_last, bf16 autocast, fp32 weights, SGD
# Nesterov (foreach), DDP defaults; SyncBatchNorm (53 layers) unless fixed.
RN = dict(batch=128, image=224, classes=1000, steps=25, ranks=2)


def rn_layers():
    """The network in forward order as segments ending in a BatchNorm: each a dict with the convolution (cin, cout, k,
    stride, input size), the BN's elements, what follows the BN (ReLU, residual add) and the host ops of the segment
    besides the BN. The last entry is the tail (pooling, fc, loss)."""
    N, I = RN["batch"], RN["image"]
    segs = []
    hw = I // 2
    segs.append(dict(name="stem", cin=3, cout=64, k=7, hin=I, hout=hw, relu=True, add=0, pool=True, stem=True))
    hw //= 2  # max pool
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            s = stride if i == 0 else 1
            ho = hw // s
            cout = 4 * width
            segs.append(dict(name="conv1", cin=cin, cout=width, k=1, hin=hw, hout=hw, relu=True, add=0))
            segs.append(dict(name="conv2", cin=width, cout=width, k=3, hin=hw, hout=ho, relu=True, add=0))
            last_relu = True
            if s != 1 or cin != cout:
                segs.append(dict(name="conv3", cin=width, cout=cout, k=1, hin=ho, hout=ho, relu=False, add=0))
                segs.append(dict(name="down", cin=cin, cout=cout, k=1, hin=hw, hout=ho, relu=last_relu, add=1,
                                 add_in=cin * hw * hw))
            else:
                segs.append(dict(name="conv3", cin=width, cout=cout, k=1, hin=ho, hout=ho, relu=last_relu, add=1,
                                 add_in=cin * hw * hw))
            cin, hw = cout, ho
    for sg in segs:
        sg["n"] = N
    return segs, cin, hw


def rn_params():
    segs, cfin, _ = rn_layers()
    p = sum(sg["cin"] * sg["cout"] * sg["k"] ** 2 + 2 * sg["cout"] for sg in segs)
    return float(p + cfin * RN["classes"] + RN["classes"])


RN_SBN_PRE_OPS = 15.0   # SyncBatchNorm forward before its first sync: module checks and num_batches_tracked.add_,
# get_world_size, Function.apply, contiguity checks, batch_norm_stats, full, cat, empty, all_gather_into_tensor (~3: the
# c10d wrapper, the work object, the stream wait), reshape, split, squeeze, >= 1
RN_SBN_POST_OPS = 8.5   # after it: three boolean-mask indexings (each a nonzero with a D2H copy and a sync, then the
# index kernel), view, batch_norm_gather_stats_with_counts, .to(int32), save_for_backward, batch_norm_elemt, the
# Function's return
RN_BN_OPS = 3.0         # plain BatchNorm2d forward: module checks, num_batches_tracked.add_, F.batch_norm
RN_SBN_BWD_OPS = 8.0    # SyncBatchNorm backward in Python: contiguity check, saved tensors, batch_norm_backward_reduce,
# cat, all_reduce (~3), split, batch_norm_backward_elemt (the node itself counted in bwd nodes)
RN_SEG_OPS = 2.0        # per segment besides the BN: the autocast weight cast and the convolution
RN_TAIL_OPS = 12.0      # DDP forward prologue (buffer broadcast, ~3), max pool, adaptive avg pool, flatten, fc (+ its
# casts), cross-entropy, autocast enter / exit
RN_OPT_OPS = 12.0       # foreach SGD (~6 foreach kernels), zero_grad, loss copy, event record and wait, NVTX
RN_SGD_B = 48.0         # per fp32 parameter: weight decay add, momentum update, Nesterov add, parameter update
# (each r4 r4 w4)
RN_DDP_BUCKET_B = 25e6


def rn_conv_ms(r, sg, passes):
    """One convolution's passes (forward, data gradient, weight gradient): each the larger of FLOPs / rate and bytes /
    (hbm x bn_eff)."""
    n, k = sg["n"], sg["k"]
    fl = 2.0 * n * sg["hout"] ** 2 * sg["cin"] * sg["cout"] * k * k
    byts = 2.0 * n * (sg["hin"] ** 2 * sg["cin"] + sg["hout"] ** 2 * sg["cout"]) + 2.0 * sg["cin"] * sg["cout"] * k * k
    rate = r["conv_stem_tflops"] if sg.get("stem") else r["conv_tflops"]
    one = max(t_flops(fl, rate), t_bytes(byts, r["hbm_tbs"] * r["bn_eff"]))
    return one * passes, fl * passes


def rn_seg_gpu(r, sg):
    """GPU ms of one segment, forward and backward: the convolution, the BN (16 B per element: statistics r2, normalize
    r2 w2; backward reduce r2 r2, elementwise r2 r2 w2), the ReLU (forward r2 w2, backward r2 r2 w2), the residual add
    (forward r2 r2 w2 over the output, backward the sum of the two input-gradient branches r2 r2 w2 over the block
    input) and the max pool (~36 B per pooled element, forward and backward, int64 indices)."""
    hbm = r["hbm_tbs"] * r["bn_eff"]
    el = sg["n"] * sg["hout"] ** 2 * sg["cout"]
    conv_f, _ = rn_conv_ms(r, sg, 1)
    conv_b, _ = rn_conv_ms(r, sg, 1 if sg.get("stem") else 2)
    bn_f, bn_b = t_bytes(6.0 * el, hbm), t_bytes(10.0 * el, hbm)
    relu_f = t_bytes(4.0 * el, hbm) if sg["relu"] else 0.0
    relu_b = t_bytes(6.0 * el, hbm) if sg["relu"] else 0.0
    add_f = t_bytes(6.0 * el, hbm) if sg["add"] else 0.0
    add_b = t_bytes(6.0 * sg["n"] * sg.get("add_in", 0), hbm) if sg["add"] else 0.0
    pool = t_bytes(36.0 * el / 4.0, hbm) if sg.get("pool") else 0.0
    fwd = conv_f + bn_f + relu_f + add_f + pool / 2
    bwd = conv_b + bn_b + relu_b + add_b + pool / 2
    return fwd, bwd, conv_f + conv_b, bn_f + bn_b + relu_f + relu_b + add_f + add_b + pool


def m_rn(r, fixed=False):
    segs, cfin, hw = rn_layers()
    nb = len(segs)
    n, K = RN["batch"], RN["classes"]
    op, node = r["eager_op_us"] / 1e3, r["bwd_node_us"] / 1e3
    tiny, nccl, rtt = r["tiny_kernel_us"] / 1e3, r["nccl_small_gpu_us"] / 1e3, r["sync_rtt_us"] / 1e3
    hbm = r["hbm_tbs"]
    P = rn_params()
    fwd_g, bwd_g, conv_g, ew_g = [], [], 0.0, 0.0
    for sg in segs:
        f, b, cv, ew = rn_seg_gpu(r, sg)
        fwd_g.append(f)
        bwd_g.append(b)
        conv_g += cv
        ew_g += ew
    tail_g = t_bytes(2.0 * n * hw * hw * cfin * 2, hbm) + gemm(r, n, cfin, K, 3.0) + 6 * tiny  # pool, fc, loss
    opt_g = t_bytes(RN_SGD_B * P + AMP_B * P + DDP_B * P, hbm)  # SGD, autocast weight casts, DDP bucket copies
    ddp_tail = t_link(RN_DDP_BUCKET_B, r["ar2_algbw_gbs"]) + nccl  # the last 25 MB bucket after the backward's end
    bcast = nccl  # DDP's buffer broadcast before the forward
    gpu_fwd, gpu_bwd = sum(fwd_g) + tail_g / 2, sum(bwd_g) + tail_g / 2
    relus = sum(1 for sg in segs if sg["relu"])
    adds = sum(sg["add"] for sg in segs)
    bwd_nodes = 2 * nb + nb + relus + adds + 8  # conv, BN, weight cast per segment; ReLUs, adds; pool, fc, loss
    c = {"conv_fwd_bwd": conv_g, "bn_relu_add_pool": ew_g, "pool_fc_loss": tail_g, "sgd_cast_ddp_copies": opt_g,
         "ddp_exposed": ddp_tail + bcast}
    gpu = sum(c.values())
    if fixed:
        host_f = (nb * (RN_BN_OPS + RN_SEG_OPS) + relus + adds + RN_TAIL_OPS) * op
        host_b = bwd_nodes * node + (3 * nb + 2) * r["ddp_hook_us"] / 1e3
        host = host_f + host_b + RN_OPT_OPS * op
        step = max(gpu, host)
        c["gpu_waiting_for_host"] = step - gpu
        out = {"c": c, "step": step, "rm": {}, "share": {}, "after": None, "params_m": P / 1e6, "bn_layers": nb,
               "gpu_fwd_ms": gpu_fwd, "gpu_bwd_ms": gpu_bwd}
        return finish_gpu_host(out, gpu, host)
    # SyncBatchNorm: the forward is cut at every BN by a synchronization; per segment the host runs the rest of the
    # previous BN (RN_SBN_POST_OPS, two more syncs), the ReLU / add, the weight cast and the convolution, then this BN's
    # ops up to its first sync, which waits for the GPU to finish the segment's convolution, statistics and all-gather
    fwd = 0.0
    for i, sg in enumerate(segs):
        post = RN_SBN_POST_OPS * op + 2 * rtt
        pre_conv = (RN_SEG_OPS + (1 if sg["relu"] else 0) + sg["add"]) * op
        fwd += post + max(pre_conv + RN_SBN_PRE_OPS * op, pre_conv + fwd_g[i] + nccl) + rtt
    fwd += (RN_TAIL_OPS * op + tail_g / 2)
    # backward: no host block, but every BN backward waits on a small all-reduce (and may queue behind a DDP bucket)
    host_b = bwd_nodes * node + nb * RN_SBN_BWD_OPS * op + (3 * nb + 2) * r["ddp_hook_us"] / 1e3
    bucket_wait = 0.5 * (P * 4.0 / RN_DDP_BUCKET_B) * t_link(RN_DDP_BUCKET_B, r["ar2_algbw_gbs"])
    bwd = max(host_b, gpu_bwd + nb * nccl + bucket_wait)
    opt_t = max(opt_g, RN_OPT_OPS * op)
    step = fwd + bwd + opt_t + ddp_tail + bcast
    cp = dict(c)
    c = {"forward_serialized_by_syncbn": fwd, "backward_with_bn_allreduce": bwd, "optimizer_casts_copies": opt_t,
         "ddp_exposed": ddp_tail + bcast}
    host = (nb * (RN_SBN_PRE_OPS + RN_SBN_POST_OPS + RN_SEG_OPS) + relus + adds + RN_TAIL_OPS) * op + host_b \
        + RN_OPT_OPS * op
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "bn_layers": nb, "gpu_fwd_ms": gpu_fwd,
                           "gpu_bwd_ms": gpu_bwd, "gpu_work_ms": gpu, "fwd_gpu_idle_ms": fwd - gpu_fwd,
                           "conv_ms": cp["conv_fwd_bwd"], "bn_ew_ms": cp["bn_relu_add_pool"],
                           "syncs_per_step": 3 * nb, "nccl_per_step": 2 * nb}, gpu, host)
    after = m_rn(r, fixed=True)["step"]
    rm = {"sync_batchnorm": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after})
    return out


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=25, warmup=3, ranks=1):
    return D.base(name, f"heldout11/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def planted11(cause, where, fix, b, key_rm, key_share, derivation, accept, b2):
    sev, sev_rng = band_of11(b2, key_share)
    return {"cause": cause, "accept_causes": accept, "where": where, "fix": fix, "top": True,
            "removed_ms": {"h100": r2(b[key_rm]), "h200": r2(b2[key_rm])},
            "share_pct": {"h100": r2(b[key_share]), "h200": r2(b2[key_share])},
            "severity": sev, "severity_range": sev_rng,
            "severity_legacy": D.band_of(b2, key_share)[0], "severity_legacy_range": D.band_of(b2, key_share)[1],
            "derivation": derivation}


def finish(m, b, b2, keys, after=True, fixed_case=None):
    m["severity_bands"] = SEV_DOC11
    m["lacks"] = [v for k, v in D.LACKS.items() if m["uses"].get(k) is False and (k != "ddp" or m["ranks"] > 1)]
    m["expected_step_ms"] = {"h100": r2(b["step"]), "h200": r2(b2["step"])}
    m["components_ms"] = {"h100": {k[2:]: r2(v) for k, v in b.items() if k.startswith("c.")},
                          "h200": {k[2:]: r2(v) for k, v in b2.items() if k.startswith("c.")}}
    m["gpu_ms"] = {"h100": r2(b["gpu_ms"]), "h200": r2(b2["gpu_ms"])}
    m["host_ms"] = {"h100": r2(b["host_ms"]), "h200": r2(b2["host_ms"])}
    m["kernels_per_step"] = KERNELS[m["case"]]
    if after and "after" in b:
        m["predicted_step_after_fix_ms"] = {"h100": r2(b["after"]), "h200": r2(b2["after"])}
        m["fixed_case"] = fixed_case
    else:
        m["predicted_step_after_fix_ms"] = None
    m["rates"] = {k: {"band": list(RATES_H100[k]), "h200_band": list(RATES_H200[k]) if RATES_H200[k] != RATES_H100[k] else None,
                      "source": RATE_SOURCES[k]} for k in sorted(keys)}
    return m


KERNELS = {
    "chat_decode": "~95 per token: per block 2 LayerNorms, 4 GEMMs over 8 x (1024 + step) rows, one causal SDPA, 2 "
                   "residual adds, GELU, the attention output's copy; embedding, position add, final norm on 8 rows, the "
                   "head GEMV, argmax, the id write. The GEMMs' M grows by 8 rows every token",
    "chat_decode.fixed": "~112 per token: as the planted run, but every GEMM has M = 8 (one token per sequence), 2 copy "
                         "kernels per block write the new keys and values into the cache, and the attention reads the "
                         "cache (one query per sequence and head). Step 0 is the 8 x 1024-token prefill",
    "vit_embed": "~250 per batch: per block 2 LayerNorms, 4 GEMMs, one SDPA with dropout, 2 residual adds, GELU, the "
                 "output copy, 3 fused dropout kernels, 2 x (Bernoulli draw, rescale, multiply) for drop path (not in "
                 "block 0); the patch-embedding convolution, class-token cat, position add, final norm, normalize, the "
                 "index write",
    "vit_embed.fixed": "~140 per batch: the planted run less the dropout and drop-path kernels",
    "long_lm": "~220: forward ~100 (per block the mask-to-bias torch.where, 2 LayerNorms, 4 GEMMs, one SDPA with a bias, "
               "residuals, GELU, copies), backward ~110, fused AdamW ~10",
    "long_lm.fixed": "~210: as the planted run, causal SDPA without the bias and without the torch.where",
    "pano_field": "~70: the randperm (random keys, arange, ~8 CUB radix-sort kernels over 8.4 M pairs, the "
                  "duplicate-key fix-up), ~14 index / coordinate kernels, the Fourier matmul, sin, cos, cat, cast, gather; "
                  "5 GEMMs and 4 GELUs forward, ~14 GEMMs, GELU and bias-gradient kernels backward, fused AdamW",
    "pano_field.fixed": "~58: one randint in place of the randperm",
    "resnet_ddp": "per rank ~1000: per SyncBatchNorm forward ~15 (statistics, fill, cat, an NCCL all-gather, a compare, "
                  "three nonzero / index pairs each with an 8-byte D2H copy and a synchronization, gather, cast, "
                  "normalize) and backward ~5 (reduce, cat, an NCCL all-reduce, elementwise); 53 convolutions forward and "
                  "~105 backward, ReLU / add / pool kernels, 4-5 DDP bucket all-reduces, a buffer broadcast, foreach SGD",
    "resnet_ddp.fixed": "per rank ~450: as the planted run without the SyncBatchNorm kernels, collectives and "
                        "synchronizations (plain BatchNorm: statistics + normalize forward, reduce + elementwise backward)",
}

EVENT_SYNC = "event sync on the previous step (lag 1: never idles the GPU)"


def build():
    out = {}

    # ---- chat_decode (no_kv_cache) and chat_decode.fixed ------------------------------------------------------------
    Bd, Pd, V, d, H, L = (DEC[k] for k in ("batch", "prompt", "vocab", "d", "heads", "blocks"))
    args = ["--batch", Bd, "--prompt", Pd, "--vocab", V, "--d-model", d, "--heads", H, "--blocks", L,
            "--max-pos", DEC["max_pos"]]
    b, b2, keys = ev(m_dec)
    bf, bf2, keys_f = ev(lambda r: m_dec(r, fixed=True))
    n = dec_mean_tokens()
    m = base("chat_decode", "chat_decode.py", "planted", args, steps=DEC["steps"], est=50)
    m["uses"] = uses("bf16 (parameters and compute)", "none (inference, torch.inference_mode)", attention=True,
                     sequences=f"{Bd} prompts of {Pd} tokens, equal lengths, {DEC['steps']} greedy tokens",
                     host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, causal, {H} heads of {d // H}, over the whole sequence"
    m["uses"]["kv_cache"] = False
    m["techniques"] = techniques(
        "keep a key/value cache (use_cache=True, or a preallocated static cache): prefill the prompt once, then run "
        "each new token alone through the model, attending to the cached keys and values",
        ["CUDA graphs / launch overhead as the top fix (the planted run is GPU-bound on the recomputed prefix)",
         "FP8 / quantization / a faster GEMM library as the top fix (the work itself is redundant)",
         "flash attention (already SDPA; attention is a small part)", "a larger batch as the top fix",
         "speculative decoding as the top fix", "pinned memory / data loading (ids resident on the GPU)",
         "slicing the LM head to the last position (already done)"])
    m["planted"] = [planted11(
        "no_kv_cache", {"device": "GPU 0", "region": f"every step_N > forward: the whole model over {Bd} x (1024 + N) "
                        f"tokens (4 GEMMs per block with M = {Bd} x (1024 + N), a causal SDPA over 1024 + N positions) "
                        f"to produce one new token per sequence"},
        "a key/value cache: prefill once, then one token per step (--fixed, captured as chat_decode.fixed)", b,
        "rm.no_kv_cache", "share.no_kv_cache",
        f"{b2['params_b'][0]:.2f} B bf16 parameters. Without a cache every token re-runs the model over the prompt and "
        f"the tokens so far: {Bd} x {n:.0f} = {Bd * n:.0f} rows on average over the steady steps. Block GEMMs "
        f"24 x {Bd * n:.0f} x {d}^2 x {L} = {b2['gemm_tflop'][0]:.1f} TFLOP at 650-820 ({rng(b2, 'c.linear_gemm_bf16')} "
        f"ms on an H200), causal attention forward 2 x B x S^2 x d per block at 300-550 "
        f"({rng(b2, 'c.attention_causal_fwd')} ms), LayerNorm / GELU / residual / copies 40 B per token x d per block "
        f"({rng(b2, 'c.layernorm_gelu_residual_copies')} ms), embedding, head GEMV and argmax "
        f"({rng(b2, 'c.embedding_head_sample')} ms): step {rng(b2, 'step')} ms, GPU-bound (host "
        f"{rng(b2, 'host_ms')} ms for {L * DEC_BLOCK_OPS + DEC_OTHER_OPS} ops at 20-70 µs). With the cache a step "
        f"streams the {bf2['weights_gb'][0]:.2f} GB of weights once at M = {Bd} and reads {bf2['kv_gb'][0]:.2f} GB of "
        f"cache at 60-90 % of 3.9-4.4 TB/s ({rng(bf2, 'gpu_ms')} ms of GPU work), but its "
        f"{L * DEC_BLOCK_OPS_FIXED + DEC_OTHER_OPS} eager ops cost the host {rng(bf2, 'host_ms')} ms: the fixed step "
        f"is host-bound at {rng(b2, 'after')} ms. Removed {rng(b2, 'rm.no_kv_cache')} ms = "
        f"{rng(b2, 'share.no_kv_cache', 1)} % of the step (H200; H100 {rng(b, 'share.no_kv_cache', 1)} %), "
        f"{rng(b2, 'speedup', 1)}x -> critical. New cause name: no_kv_cache.",
        ["no_kv_cache", "redundant_recompute", "wasted_compute", "redundant_forward"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / head-merge copies (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "GEMM kernels whose duration grows a little every step (M = 8 x (1024 + N))",
        "one causal SDPA (cuDNN or flash) per block per step over 1024 + N positions",
        "an argmax and an index write per step; no device-to-host copy or synchronization inside the loop except the "
        "event wait that keeps the host one step ahead",
        "the host well ahead of the GPU (GPU-bound)"]
    m["must_not"] = [
        "the run is host-bound / launch-bound, or CUDA graphs as the top fix (that is the after run's bound, not this one's)",
        "the GEMMs are inefficient, or kernel tuning / FP8 as the top fix",
        "the LM head or unused logits as the problem (the head already runs on the last position only)",
        "a host synchronization (.item(), cpu copy) per token as the problem (there is none)",
        "attention as the main cost, or flash attention as the fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Here are two profiles of our chat model's generation loop on an H200 (a 1.1 B-parameter decoder, "
                     f"{L} layers of d {d} with {H} heads, vocabulary {V}; {Bd} prompts of {Pd} tokens, {DEC['steps']} "
                     f"new tokens each, greedy, bf16), before and after we rewrote the generation loop. How much did the "
                     f"rewrite buy per token, why, and what bounds a token now?")
    m["diagnosis"] = (f"Before: the loop kept no key/value cache, so every new token re-ran the whole model over the prompt "
                      f"and all tokens so far ({Bd} x ~{n:.0f} rows per step): {b2['gemm_tflop'][0]:.0f} TFLOP of GEMMs "
                      f"per token, {rng(b2, 'step', 1)} ms per token on the H200, GPU-bound. After: a cache, so each step "
                      f"runs one token per sequence (GEMMs with M = {Bd}, {bf2['weights_gb'][0]:.1f} GB of weights and "
                      f"{bf2['kv_gb'][0]:.1f} GB of cache streamed, ~{rng(bf2, 'gpu_ms', 1)} ms of GPU work): "
                      f"{rng(b2, 'after', 1)} ms per token, {rng(b2, 'speedup', 0)}x, removing "
                      f"{rng(b2, 'share.no_kv_cache', 0)} % of the step (critical). What bounds a token now is the host: "
                      f"~{L * DEC_BLOCK_OPS_FIXED + DEC_OTHER_OPS} eager PyTorch ops per token ({rng(bf2, 'host_ms', 1)} ms "
                      f"of Python and launch overhead) while the GPU is busy only {rng(bf2, 'gpu_busy_share', 0)} % of the "
                      f"step; the next step is CUDA graphs (torch.compile mode='reduce-overhead' with a static cache) or a "
                      f"larger batch per launch.")
    m["measure"] = [{"what": "step period", "query": Q11["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q11["kernels"],
                     "expect": f"{4 * L} GEMMs per step over {Bd} x (1024 + N) rows, {rng(b2, 'c.linear_gemm_bf16', 1)} ms "
                               f"together, and {L} causal SDPA kernels"}]
    m["new_cause"] = {"name": "no_kv_cache", "why": "autoregressive generation without a key/value cache (use_cache=False "
                      "or a hand-written loop calling the model on the whole sequence): every new token recomputes the "
                      "keys, values and activations of the whole prefix, so each step costs a prefill; fixed by caching "
                      "keys and values and running only the new token"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="chat_decode.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("chat_decode.fixed", "chat_decode.py", "fixed", args + ["--fixed"], steps=DEC["steps"], est=40)
    m["uses"] = uses("bf16 (parameters and compute)", "none (inference, torch.inference_mode)", attention=True,
                     sequences=f"{Bd} prompts of {Pd} tokens, equal lengths, {DEC['steps']} greedy tokens",
                     host_sync=EVENT_SYNC)
    m["uses"]["attention"] = (f"F.scaled_dot_product_attention: causal over the prompt at step 0, then one query per "
                              f"sequence over the cached keys ({H} heads of {d // H})")
    m["uses"]["kv_cache"] = "preallocated per layer, [8, 2048, 24, 128] bf16 keys and values"
    m["techniques"] = techniques(
        "cut the per-token host work: CUDA graphs (torch.compile mode='reduce-overhead' with the static cache, or "
        "torch.cuda.graphs around the decode step), or amortize it over more sequences per step",
        ["a key/value cache (already)", "FP8 / quantization as the top fix (the GPU is mostly idle)",
         "flash attention (already SDPA)", "faster GEMMs / kernel tuning", "pinned memory / data loading"])
    m["planted"] = []
    m["tolerated"] = [{"what": "the host-bound decode step (~180 eager ops per token)", "cause": "launch_bound",
                       "max_severity": "critical"},
                      {"what": "small kernels (LayerNorm, adds, GELU on 8 rows)", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        "a long step 0 (the 8 x 1024-token prefill) before the steady steps",
        "GEMMs with M = 8, microseconds each; gaps between kernels while the host issues the next op",
        "2 small copy kernels per block per step (the cache writes)"]
    m["must_not"] = ["the run is still GPU-bound on GEMMs", "a missing key/value cache", "a host sync per token"]
    m["expect_quiet"] = False
    m["question"] = "With the cache, is anything still holding a token back?"
    m["diagnosis"] = (f"No planted problem is left, but the step is host-bound: ~{L * DEC_BLOCK_OPS_FIXED + DEC_OTHER_OPS} "
                      f"eager ops per token take {rng(b2, 'host_ms', 1)} ms of CPU while the GPU works "
                      f"~{rng(b2, 'gpu_ms', 1)} ms ({b2['weights_gb'][0]:.1f} GB of weights at M = {Bd}); CUDA graphs "
                      f"(or torch.compile's reduce-overhead mode with the static cache) would take the step toward the "
                      f"GPU time.")
    m["measure"] = [{"what": "step period", "query": Q11["step"], "expect_ms": r2(b2["step"])},
                    {"what": "launch-starved idle", "query": Q11["starved"],
                     "expect": "most GPU idle time is in gaps whose next kernel had not been launched yet"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- vit_embed (train_mode_inference; no NVTX) -----------------------------------------------------------------
    Bv, Sv, Tv, dv = vit_dims()
    Lv = VIT["blocks"]
    args = ["--batch", Bv, "--image", VIT["image"], "--patch", VIT["patch"], "--d-model", dv, "--heads", VIT["heads"],
            "--blocks", Lv, "--dropout", VIT["drop"], "--drop-path", VIT["drop_path"]]
    b, b2, keys = ev(m_vit)
    bf2 = ev(lambda r: m_vit(r, fixed=True))[1]
    m = base("vit_embed", "vit_embed.py", "planted", args, nvtx=False, steps=VIT["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "none (inference, torch.inference_mode)", attention=True,
                     host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, non-causal, {VIT['heads']} heads of 64, {Sv} tokens"
    m["uses"]["module_mode"] = "training (model.eval() never called): dropout 0.1 x 3 per block, drop path up to 0.1, attention dropout 0.1"
    m["techniques"] = techniques(
        "call model.eval() (or model.train(False)) before inference: dropout, drop path and attention dropout become "
        "identities (and the outputs deterministic)",
        ["CUDA graphs / launch overhead (GPU-bound)", "precision changes / FP8 as the top fix (already bf16)",
         "flash attention (already SDPA)", "torch.no_grad / inference_mode (already inference_mode: the mode flag is "
                                           "a different switch)",
         "a larger batch as the top fix", "pinned memory / data loading (images resident on the GPU)",
         "faster GEMMs / kernel tuning"])
    m["planted"] = [planted11(
        "train_mode_inference", {"device": "GPU 0", "region": "every batch (no NVTX): after the attention projection, "
                                 "the GELU and fc2 of every block a fused dropout kernel (output and a bool mask "
                                 "written); drop-path Bernoulli draws and multiplies on both residual branches of blocks "
                                 "1-11; the attention kernel running with dropout"},
        "model.eval() before the loop (--fixed; not captured)", b, "rm.train_mode_inference",
        "share.train_mode_inference",
        f"ViT-B/16, {b2['params_m'][0]:.0f} M bf16 parameters, {Bv} images of {Sv} tokens = {Tv} tokens per batch. "
        f"Inference work: block GEMMs 24 x {Tv} x {dv}^2 x {Lv} at 550-800 ({rng(b2, 'c.linear_gemm_bf16')} ms on an "
        f"H200), patch embedding {rng(b2, 'c.patch_embed_conv')} ms, attention forward 4 x B x S^2 x d per block at "
        f"100-300 ({rng(b2, 'c.attention_fwd')} ms), LayerNorm / GELU / residual / copies "
        f"({rng(b2, 'c.layernorm_gelu_residual_copies')} ms): {rng(bf2, 'step')} ms per batch in eval mode. Left in "
        f"training mode, each block adds three fused dropouts over T x d, T x 4d and T x d elements (5 B each: "
        f"{b2['dropout_gb'][0]:.1f} GB per batch at 60-95 % of HBM: {rng(b2, 'c.dropout_masks')} ms), drop path on "
        f"both branches of {vit_droppath_blocks()} blocks ({rng(b2, 'c.drop_path')} ms) and dropout inside the "
        f"attention kernel (x1.1-1.6: {rng(b2, 'c.attention_dropout_extra')} ms). Step {rng(b2, 'step')} ms (host "
        f"{rng(b2, 'host_ms')} ms); removed {rng(b2, 'rm.train_mode_inference')} ms = "
        f"{rng(b2, 'share.train_mode_inference', 1)} % (H100 {rng(b, 'share.train_mode_inference', 1)} %). "
        f"New cause name: train_mode_inference.",
        ["train_mode_inference", "dropout_at_inference", "wasted_compute", "elementwise_unfused"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / head-merge copies (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "no NVTX: an iteration is one patch-embedding convolution, 12 blocks of GEMMs, SDPA and elementwise kernels, a "
        "final norm and the index write",
        "fused dropout kernels (native dropout, Philox) and Bernoulli kernels inside an inference loop",
        "no backward kernels, no optimizer, no host copies",
        "GEMMs the largest kernel class"]
    m["must_not"] = [
        "gradients / autograd as the cost (inference_mode is on; there is no backward)",
        "a host-bound or launch-bound loop, or CUDA graphs as the top fix",
        "data loading / host-to-device copies (the images are on the GPU)",
        "precision as the problem (bf16 already)", "nothing significant to remove"]
    m["expect_quiet"] = False
    m["question"] = ("We embed an image corpus with a fine-tuned ViT-B/16 on one H200 (224 x 224 images, 12 blocks of d "
                     "768, bf16 weights, batches of 256 under torch.inference_mode(), embeddings written into a GPU "
                     "index). Throughput is below what we expected from the model's FLOPs. Is there anything to fix?")
    m["diagnosis"] = (f"Yes: the model runs in training mode (model.eval() is never called), so every batch runs dropout "
                      f"after each attention projection, GELU and fc2 (three fused dropout kernels per block, writing a "
                      f"mask too: {b2['dropout_gb'][0]:.1f} GB of traffic), drop path on both residual branches and "
                      f"dropout inside the attention kernel: ~{rng(b2, 'rm.train_mode_inference', 1)} ms of a "
                      f"{rng(b2, 'step', 1)} ms batch on an H200. Call model.eval(): ~{rng(b2, 'after', 1)} ms per batch "
                      f"({rng(b2, 'share.train_mode_inference', 0)} %, {band_of11(b2, 'share.train_mode_inference')[0]}), "
                      f"and the embeddings become deterministic. The GEMMs (~{rng(b2, 'gemm_share', 0)} % of the batch) "
                      f"and SDPA are otherwise fine.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q11["anchor"] + " with ANCHOR = the patch-embedding "
                     "convolution kernel, C = 1, WARM = 3", "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q11["kernels"],
                     "expect": f"{3 * Lv} fused dropout kernels and {2 * vit_droppath_blocks()} Bernoulli draws per "
                               f"batch, {rng(b2, 'c.dropout_masks', 2)} ms of dropout together"}]
    m["new_cause"] = {"name": "train_mode_inference", "why": "a model run for inference while still in training mode "
                      "(model.eval() never called): dropout, drop path and attention dropout draw masks and rescale "
                      "activations on every batch (and BatchNorm would use batch statistics); fixed by model.eval()"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- long_lm (sdpa_explicit_mask) ------------------------------------------------------------------------------
    Bl, Sl, Vl, dl, Hl, Ll = (LL[k] for k in ("batch", "seq", "vocab", "d", "heads", "blocks"))
    args = ["--batch", Bl, "--seq", Sl, "--vocab", Vl, "--d-model", dl, "--heads", Hl, "--blocks", Ll]
    b, b2, keys = ev(m_ll)
    bf2 = ev(lambda r: m_ll(r, fixed=True))[1]
    m = base("long_lm", "long_lm.py", "planted", args, steps=LL["steps"], est=50)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", attention=True,
                     sequences=f"{Bl} sequence of {Sl} tokens (no padding)", host_sync=EVENT_SYNC)
    m["uses"]["attention"] = (f"F.scaled_dot_product_attention with attn_mask = a lower-triangular [{Sl}, {Sl}] bool "
                              f"buffer, {Hl} heads of {dl // Hl}")
    m["techniques"] = techniques(
        "drop the explicit mask and pass is_causal=True to F.scaled_dot_product_attention: the kernel then skips the "
        "masked upper-triangle tiles (half the work) and reads no [S, S] bias; (flex attention / a causal flash kernel "
        "likewise)",
        ["CUDA graphs / launch overhead (GPU-bound)", "precision changes / FP8 (already bf16)", "fused optimizer (already)",
         "writing a hand-made fused attention (SDPA is already fused; only its mask is wrong)",
         "activation checkpointing", "sequence packing / padding removal (no padding)",
         "pinned memory / data loading (ids resident on the GPU)", "faster GEMMs / kernel tuning"])
    m["planted"] = [planted11(
        "sdpa_explicit_mask", {"device": "GPU 0", "region": f"step_N > forward and backward: in each of the {Ll} blocks a "
                               f"torch.where turning the [{Sl}, {Sl}] bool mask into a bf16 bias, then an SDPA forward "
                               f"and backward that compute every one of the {Sl}^2 score tiles with the bias added "
                               f"(no causal skipping)"},
        "is_causal=True without attn_mask (--fixed; not captured)", b, "rm.sdpa_explicit_mask",
        "share.sdpa_explicit_mask",
        f"{b2['params_m'][0]:.0f} M bf16 parameters, {Bl * Sl} tokens per step. With is_causal=True the attention costs "
        f"7 x B x S^2 x d per block at 300-500 ({rng(bf2, 'c.attention_causal')} ms on an H200); with the explicit "
        f"mask SDPA (cuDNN, the mask as an additive bias) computes all S^2 scores, 2x the FLOPs at 0.85-1.5x the time per "
        f"FLOP (x1.7-3.0: {rng(b2, 'c.attention_masked_full')} ms), converts the mask to a bias each call "
        f"({rng(b2, 'c.mask_to_bias')} ms) and reads the 134 MB bias per head from L2 or HBM "
        f"({rng(b2, 'c.bias_reads_hbm')} ms). The rest: block GEMMs 72 x {Bl * Sl} x {dl}^2 x {Ll} at 550-800 "
        f"({rng(b2, 'c.linear_gemm_bf16')} ms), LM head {rng(b2, 'c.lm_head_gemm')} ms, LayerNorm / GELU / residual "
        f"{rng(b2, 'c.layernorm_gelu_residual_copies')} ms, bf16 cross-entropy {rng(b2, 'c.cross_entropy_bf16')} ms, "
        f"fused AdamW {rng(b2, 'c.adamw_fused_bf16')} ms. Step {rng(b2, 'step')} ms (GPU-bound: host "
        f"{rng(b2, 'host_ms')} ms); fixed {rng(b2, 'after')} ms: removed {rng(b2, 'rm.sdpa_explicit_mask')} ms = "
        f"{rng(b2, 'share.sdpa_explicit_mask', 1)} % (H100 {rng(b, 'share.sdpa_explicit_mask', 1)} %). "
        f"New cause name: sdpa_explicit_mask.",
        ["sdpa_explicit_mask", "attention_mask_dense", "attention_inefficient", "wasted_compute"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / head-merge copies (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "low"},
                      {"what": "the bf16 cross-entropy over 8192 x 32768 logits", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        "one fused attention kernel per block forward and one or two backward (cuDNN; not an eager softmax / bmm "
        "chain), the largest single kernels of the step",
        f"one torch.where kernel per block writing a {Sl} x {Sl} bf16 tensor",
        "GEMMs of the blocks and the LM head at tensor-core rate; fused AdamW"]
    m["must_not"] = [
        "an eager / unfused attention (softmax and bmm kernels) as the problem: SDPA is fused here",
        "padding or sequence packing as the fix (no padding)",
        "CUDA graphs / launch overhead", "precision changes as the fix",
        "the GEMMs or the optimizer as the main problem"]
    m["expect_quiet"] = False
    m["question"] = (f"We pre-train a 168 M-parameter decoder-only language model with 8192-token context on one H200 "
                     f"({Ll} blocks of d {dl}, {Hl} heads of 128, vocabulary {Vl}, one 8192-token sequence per step, bf16 "
                     f"weights, fused AdamW, attention through F.scaled_dot_product_attention). Attention takes a larger "
                     f"share of the step than we expected. Is that just the 8k context, or is something off?")
    m["diagnosis"] = (f"It is more than the context: causality comes from an explicit [{Sl}, {Sl}] boolean attn_mask, not is_causal=True, so SDPA "
                      f"takes the mask as a dense additive bias: every block converts it with a torch.where and the "
                      f"attention forward and backward compute all {Sl}^2 score tiles, the masked half included, and "
                      f"read the bias: ~{rng(b2, 'c.attention_masked_full', 1)} ms of attention plus "
                      f"~{rng(b2, 'c.bias_reads_hbm', 1)} ms of bias traffic in a {rng(b2, 'step', 1)} ms step on an H200, "
                      f"against ~{rng(bf2, 'c.attention_causal', 1)} ms for the causal kernel. Pass is_causal=True and drop "
                      f"the mask: ~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.sdpa_explicit_mask', 0)} %, "
                      f"{band_of11(b2, 'share.sdpa_explicit_mask')[0]}). The GEMMs, cross-entropy and fused AdamW are "
                      f"fine.")
    m["measure"] = [{"what": "step period", "query": Q11["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q11["kernels"],
                     "expect": f"attention kernels {rng(b2, 'c.attention_masked_full', 1)} ms per step; {Ll} where "
                               f"kernels over {Sl}^2 elements"}]
    m["new_cause"] = {"name": "sdpa_explicit_mask", "why": "causal attention requested through an explicit [S, S] "
                      "mask (attn_mask=tril) instead of is_causal=True: the fused kernel treats it as an arbitrary bias, "
                      "computes the masked half of the scores and reads the bias (on older stacks it also falls back "
                      "from the flash kernel); fixed by is_causal=True"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- pano_field (randperm_sampling) ----------------------------------------------------------------------------
    Nf = FLD["width"] * FLD["height"]
    args = ["--width", FLD["width"], "--height", FLD["height"], "--batch", FLD["batch"], "--freqs", FLD["freqs"],
            "--hidden", FLD["hidden"], "--layers", FLD["layers"]]
    b, b2, keys = ev(m_fld)
    bf2 = ev(lambda r: m_fld(r, fixed=True))[1]
    m = base("pano_field", "pano_field.py", "planted", args, steps=FLD["steps"], est=40)
    m["uses"] = uses("bf16 (parameters and compute; Fourier features computed in float32)", "AdamW fused",
                     host_sync=EVENT_SYNC)
    m["uses"]["sampling"] = f"torch.randperm({Nf}, device='cuda')[:{FLD['batch']}] every step"
    m["techniques"] = techniques(
        f"draw the batch's pixel indices with torch.randint(N, (batch,), device='cuda') (or permute once per epoch and "
        f"slice it): {FLD['batch']} random draws in place of a sort of all {Nf / 1e6:.1f} M indices every step",
        ["CUDA graphs / launch overhead (GPU-bound)", "precision changes / FP8", "fused optimizer (already)",
         "a larger batch as the top fix", "tiny-cuda-nn / fused MLP kernels as the top fix",
         "pinned memory / data loading (the image is on the GPU)", "flash attention (no attention)"])
    m["planted"] = [planted11(
        "randperm_sampling", {"device": "GPU 0", "region": f"step_N > sample: random 64-bit keys, an arange and a CUB "
                              f"radix sort ({b2['randperm_passes'][0]:.0f} onesweep passes) of {Nf / 1e6:.1f} M "
                              f"(key, index) pairs, then a duplicate-key fix-up, to use the first {FLD['batch']} indices"},
        "torch.randint (--fixed; not captured)", b, "rm.randperm_sampling", "share.randperm_sampling",
        f"{Nf / 1e6:.2f} M pixels, {FLD['batch']} per step. torch.randperm(N) on the GPU draws N random int64 keys and "
        f"sorts (key, index) pairs on the low {b2['randperm_bits'][0]:.0f} bits (PyTorch's Randperm.cu, so that equal "
        f"keys are rare): {b2['randperm_passes'][0]:.0f} onesweep passes of 32 B per pair plus the keys, the range, the "
        f"histogram and the fix-up: {b2['randperm_gb'][0]:.2f} GB per step at 50-85 % of HBM "
        f"({rng(b2, 'c.randperm_full')} ms on an H200). The training work: MLP GEMMs "
        f"({rng(b2, 'c.mlp_gemm_bf16')} ms at 550-800), GELU and bias gradients ({rng(b2, 'c.gelu_bias_grad')} ms), "
        f"Fourier features in float32 ({rng(b2, 'c.fourier_features')} ms), index math, gather, loss and AdamW. Step "
        f"{rng(b2, 'step')} ms (GPU-bound: host {rng(b2, 'host_ms')} ms); with torch.randint {rng(b2, 'after')} ms: "
        f"removed {rng(b2, 'rm.randperm_sampling')} ms = {rng(b2, 'share.randperm_sampling', 1)} % (H100 "
        f"{rng(b, 'share.randperm_sampling', 1)} %). New cause name: randperm_sampling.",
        ["randperm_sampling", "sampling_overhead", "wasted_compute", "input_bound"], b2)]
    m["tolerated"] = [{"what": "GELU / bias-gradient kernels (memory-bound)", "cause": "elementwise_unfused",
                       "max_severity": "medium"},
                      {"what": "the float32 Fourier features (sin, cos, cat, cast)", "cause": "elementwise_unfused",
                       "max_severity": "medium"}]
    m["expected_in_trace"] = [
        "in every sample range: a random-number kernel, an arange, CUB DeviceRadixSort histogram and onesweep kernels "
        "over 8.4 M elements and a duplicate-key kernel",
        "index math, the Fourier-feature sin / cos kernels, a gather of the targets",
        "MLP GEMMs with M = 262144, GELU kernels, fused AdamW"]
    m["must_not"] = [
        "host-side sampling or a host-to-device copy of indices (the randperm runs on the GPU)",
        "CUDA graphs / launch overhead", "the MLP GEMMs as inefficient",
        "the sort as a necessary part of training (only 3 % of the permutation is used)",
        "a critical problem (the sampling is a modest share)"]
    m["expect_quiet"] = False
    m["question"] = (f"We fit a neural field (Fourier features + a 4-layer GELU MLP of width 1024, 3.7 M parameters, bf16, "
                     f"fused AdamW) to a 4096 x 2048 panorama on one H200, {FLD['batch']} random pixels per step. The MLP "
                     f"is small. Where does the step's time go, and is anything worth fixing?")
    m["diagnosis"] = (f"Mostly the network (MLP GEMMs ~{rng(b2, 'gemm_share', 0)} %, GELU / bias gradients "
                      f"~{rng(b2, 'c.gelu_bias_grad', 1)} ms), plus one modest overhead worth fixing: each step draws its pixels as torch.randperm(8.4 M, device='cuda')[:262144], "
                      f"a full permutation for 3 % of it: random 64-bit keys and a CUB radix sort of 8.4 M (key, index) "
                      f"pairs on {b2['randperm_bits'][0]:.0f} bits ({b2['randperm_passes'][0]:.0f} passes, "
                      f"{b2['randperm_gb'][0]:.1f} GB of traffic), ~{rng(b2, 'c.randperm_full', 1)} ms of a "
                      f"{rng(b2, 'step', 1)} ms step on an H200. torch.randint(N, (batch,)) (or one permutation per epoch, "
                      f"sliced) removes it: ~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.randperm_sampling', 0)} %, "
                      f"{band_of11(b2, 'share.randperm_sampling')[0]}). The rest is the network's own work and fine.")
    m["measure"] = [{"what": "step period", "query": Q11["step"], "expect_ms": r2(b2["step"])},
                    {"what": "NVTX ranges", "query": Q11["nvtx_ranges"],
                     "expect": "the sample range's GPU work dominated by the radix sort kernels"}]
    m["new_cause"] = {"name": "randperm_sampling", "why": "a mini-batch of k indices drawn as torch.randperm(N)[:k] every "
                      "step: a full random permutation (a radix sort of N keys) for k << N samples; fixed by "
                      "torch.randint (with replacement) or one permutation per epoch, sliced"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- resnet_ddp (sync_batchnorm; 2 ranks) ----------------------------------------------------------------------
    args = ["--batch", RN["batch"], "--image", RN["image"], "--classes", RN["classes"]]
    b, b2, keys = ev(m_rn)
    bf2 = ev(lambda r: m_rn(r, fixed=True))[1]
    nb = b2["bn_layers"][0]
    m = base("resnet_ddp", "resnet_ddp.py", "planted", args, steps=RN["steps"], est=90, ranks=RN["ranks"])
    m["uses"] = uses("bf16 autocast over fp32 weights", "SGD Nesterov (foreach)", ddp=True, host_sync=EVENT_SYNC)
    m["uses"]["batchnorm"] = f"nn.SyncBatchNorm ({nb:.0f} layers) over 2 ranks x {RN['batch']} images"
    m["uses"]["memory_format"] = "channels_last, cudnn.benchmark"
    m["techniques"] = techniques(
        f"use plain BatchNorm2d (drop convert_sync_batchnorm): with {RN['batch']} images per GPU the per-GPU statistics "
        f"are as good; keep SyncBatchNorm for per-GPU batches of a few images (detection / segmentation), or sync only "
        f"where needed",
        ["NCCL / interconnect tuning or a faster link (the collectives are tiny; the syncs and their latency are the cost)",
         "larger DDP buckets / gradient_as_bucket_view / no_sync (the gradient all-reduce is not the problem)",
         "removing .item() calls from the training loop (there are none: the syncs are inside SyncBatchNorm)",
         "a straggler rank (the ranks are symmetric)", "CUDA graphs as the top fix (SyncBatchNorm's syncs prevent "
                                                       "capture anyway)",
         "channels_last / bf16 (already)", "data loading / pinned memory (data resident on the GPU)"])
    m["planted"] = [planted11(
        "sync_batchnorm", {"ranks": [0, 1], "region": f"step_N > forward: at each of the {nb:.0f} BatchNorm layers an NCCL "
                           f"all-gather, then three 8-byte device-to-host copies each followed by a stream "
                           f"synchronization (boolean-mask indexing), the GPU idle while the host issues the next ops; "
                           f"step_N > backward: an NCCL all-reduce per BN on the critical path"},
        "plain BatchNorm2d (--fixed; not captured)", b, "rm.sync_batchnorm", "share.sync_batchnorm",
        f"ResNet-50 at 224 x 224, {RN['batch']} images per GPU, {nb:.0f} BN layers. The GPU work of a step (same with "
        f"either BN): convolutions forward and backward at 180-450 TFLOP/s or their bytes ({rng(b2, 'conv_ms')} ms on an "
        f"H200), BN / ReLU / add / pool at 50-90 % of HBM ({rng(b2, 'bn_ew_ms')} ms), SGD, casts and DDP copies: "
        f"{rng(b2, 'gpu_work_ms')} ms (forward {rng(b2, 'gpu_fwd_ms')} ms). PyTorch's SyncBatchNorm forward all-gathers "
        f"mean / invstd / count and filters them by boolean-mask indexing: three nonzero calls, each an 8-byte D2H copy "
        f"and a synchronization, per layer ({3 * nb:.0f} per step). Every layer's first sync drains the GPU; the host then "
        f"issues ~{RN_SBN_POST_OPS:.0f} ops (two more syncs) before the GPU gets the next convolution, and ~"
        f"{RN_SBN_PRE_OPS:.0f} ops of the next SyncBatchNorm at 20-70 µs before its sync: the forward becomes a "
        f"host-paced chain, {rng(b2, 'c.forward_serialized_by_syncbn')} ms (GPU idle {rng(b2, 'fwd_gpu_idle_ms')} ms). "
        f"The backward adds an all-reduce on the critical path per layer and ~{RN_SBN_BWD_OPS:.0f} Python ops per "
        f"layer: {rng(b2, 'c.backward_with_bn_allreduce')} ms. Step {rng(b2, 'step')} ms; with plain BatchNorm "
        f"{rng(b2, 'after')} ms (GPU {rng(bf2, 'gpu_ms')} ms, host {rng(bf2, 'host_ms')} ms): removed "
        f"{rng(b2, 'rm.sync_batchnorm')} ms = {rng(b2, 'share.sync_batchnorm', 1)} % (H100 "
        f"{rng(b, 'share.sync_batchnorm', 1)} %). New cause name: sync_batchnorm.",
        ["sync_batchnorm", "host_sync", "per_layer_sync", "exposed_communication"], b2)]
    m["tolerated"] = [{"what": "DDP's buffer broadcast at each forward and the last bucket's all-reduce after the backward",
                       "cause": "exposed_communication", "max_severity": "low"},
                      {"what": "BatchNorm / ReLU / add kernels (memory-bound)", "cause": "elementwise_unfused",
                       "max_severity": "medium"},
                      {"what": "the host close to the GPU once plain BatchNorm is used (~400 eager ops per step)",
                       "cause": "launch_bound", "max_severity": "medium"}]
    m["expected_in_trace"] = [
        "both ranks alike (no straggler); NCCL all-gather kernels in the forward range and all-reduce kernels in the "
        "backward range, 53 each per step, microseconds each",
        "159 cudaStreamSynchronize (or equivalent) calls and 159 tiny D2H copies per step inside the forward range",
        "4-5 large DDP gradient all-reduces (25 MB buckets) overlapping the backward; one small broadcast per step",
        "cuDNN convolution kernels, BatchNorm statistics / elementwise kernels, foreach SGD kernels"]
    m["must_not"] = [
        "slow interconnect or NCCL bandwidth as the cause (the collectives are tiny)",
        "the DDP gradient all-reduce as the main problem",
        "a straggler or imbalanced rank",
        ".item() / logging in the training loop as the cause (the syncs come from SyncBatchNorm)",
        "data loading or host-to-device copies", "precision or memory-format changes as the fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We train ResNet-50 on ImageNet-sized images (224 x 224) with DDP on 2 H200s, {RN['batch']} images "
                     f"per GPU, bf16 autocast, channels_last, SGD. A step takes several times longer than one GPU's "
                     f"compute would suggest, and the GPUs look idle much of the forward pass. What is wrong?")
    m["diagnosis"] = (f"The model's BatchNorm layers were converted to SyncBatchNorm. Each of the {nb:.0f} BN forwards "
                      f"all-gathers the statistics across the 2 ranks and then synchronizes the host three times "
                      f"(boolean-mask indexing inside PyTorch's SyncBatchNorm: {3 * nb:.0f} D2H copies + syncs per step), "
                      f"so the forward runs at the host's pace with the GPU idle between layers "
                      f"({rng(b2, 'c.forward_serialized_by_syncbn', 1)} ms, of which ~{rng(b2, 'fwd_gpu_idle_ms', 1)} ms "
                      f"idle), and each BN backward waits on an all-reduce: {rng(b2, 'step', 1)} ms per step on 2 H200s. "
                      f"With {RN['batch']} images per GPU, plain BatchNorm2d is enough: ~{rng(b2, 'after', 1)} ms per step "
                      f"({rng(b2, 'share.sync_batchnorm', 0)} %, critical). The collectives are tiny (not a bandwidth "
                      f"problem), the ranks are balanced, and the DDP gradient all-reduce overlaps the backward.")
    m["measure"] = [{"what": "step period per rank", "query": Q11["step"] + " (both ranks)", "expect_ms": r2(b2["step"])},
                    {"what": "NCCL kernels", "query": Q11["nccl"],
                     "expect": f"{nb:.0f} all-gathers and {nb:.0f} small all-reduces per step and rank, plus 4-5 "
                               f"gradient all-reduces and a broadcast"},
                    {"what": "launch-starved idle", "query": Q11["starved"],
                     "expect": "most forward idle in gaps whose next kernel had not been launched yet, after syncs"}]
    m["new_cause"] = {"name": "sync_batchnorm", "why": "SyncBatchNorm used where per-GPU batches are large enough for "
                      "local statistics: a collective per BN layer forward and backward, and in PyTorch's implementation "
                      "three host synchronizations per BN forward, turning the forward into a host-paced chain; fixed "
                      "by plain BatchNorm (or SyncBatchNorm only for small per-GPU batches)"}
    out[m["case"]] = finish(m, b, b2, keys)
    m["gpu_work_ms"] = {"h200": {"conv_fwd_bwd": r2(b2["conv_ms"]), "bn_relu_add_pool": r2(b2["bn_ew_ms"]),
                                 "forward_only": r2(b2["gpu_fwd_ms"]), "all": r2(b2["gpu_work_ms"])},
                        "note": "GPU work of one step with either BatchNorm (the kernels are the same bytes); the planted "
                                "step adds the idle gaps the synchronizations open"}
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.h200_table)
