#!/usr/bin/env python3
"""First-principles truth for the thirteenth held-out set (heldout13): writes heldout13/manifests/<case>.json from FLOPs,
bytes, call counts and rate bands alone (no capture, no aisp output, no GPU run), with the helpers of ../derive.py.

    python3 workloads/planted/heldout13/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout13/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout13/derive.py --table    # the table only

Method: as ../derive.py and heldout11-12/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, calls x a host cost per call, or (for the one serial kernel) a chain of dependent iterations x
the time of one; a quantity's band is its min and max over the corners of the bands it uses. Shares are "time the fix
removes from the critical path / steady step period" of the GPU (for the 2-rank case: of either rank, the ranks being
symmetric).

Severity (as heldout11-12): info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical; each planted problem
also carries `severity_legacy` under the bands of the earlier sets (info < 1 % <= low < 5 % <= medium < 15 % <= high <
40 % <= critical), so that both readings are on record.

Made for H200s, like heldout11-12: four one-GPU programs, one of them with a captured fixed variant (a before/after
pair), and one 2-rank DDP program (torchrun --nproc_per_node=2): the set needs an nvidia-h200-x2 host for its multi
phase. Every model gives the host time of a step (Python ops x eager_op_us + backward nodes x bwd_node_us, plus the
launches an op makes from C++ where there are many) beside the GPU time and takes the larger, so that a GPU-bound case
is checked at every corner (host_margin_ms). Software assumed: the capture image's PyTorch 2.1x with cuDNN 9, on sm_90.
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

SET = "heldout13"

# ---------------------------------------------------------------------------------------------------
# Severity bands (heldout11-12's; see the docstring).
BANDS13 = [(1.0, "info"), (3.0, "low"), (10.0, "medium"), (25.0, "high"), (math.inf, "critical")]
SEV_DOC13 = ("info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical, of the device's steady step period "
             "(severity_legacy: the earlier sets' info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical)")


def band13(p):
    for edge, name in BANDS13:
        if p < edge:
            return name
    return "critical"


def band_of13(b, key):
    lo, hi = b[key]
    return band13((lo + hi) / 2), [band13(lo), band13(hi)]


# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; fractions as named.
NEW_H100 = {
    # copied from heldout2-12 (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "eager_op_us": (20.0, 70.0),
    "tiny_kernel_us": (2.0, 6.0),
    "bwd_node_us": (10.0, 30.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    "nccl_small_gpu_us": (8.0, 25.0),
    "ddp_hook_us": (2.0, 5.0),
    "attn_short_fwd_tflops": (100.0, 300.0),
    "conv_stem_tflops": (40.0, 150.0),
    "conv_nchw_tflops": (120.0, 400.0),
    "nchw_xform_passes": (0.0, 1.0),
    "bn_eff": (0.5, 0.9),
    "ew_amp_block_b": (140.0, 220.0),
    "ce_fp32_b": (30.0, 42.0),
    "gather_eff": (0.5, 0.9),
    # new here
    "bf16_narrow_tflops": (400.0, 700.0),
    "attn_tiny_fwd_tflops": (40.0, 200.0),
    "attn_short_train_tflops": (80.0, 250.0),
    "view_op_us": (3.0, 10.0),
    "segsort_eff": (0.35, 0.75),
    "topk_eff": (0.5, 0.85),
    "fallback_eff": (0.45, 0.8),
    "skinny_gemm_tflops": (100.0, 400.0),
    "wgrad_gemm_tflops": (30.0, 300.0),
    "launch_cpp_us": (4.0, 12.0),
    "index_bwd_iter_us": (1.6, 3.0),
    "emb_bwd_partial_us": (0.05, 0.15),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 2048 or less (or a varying M): below the 8192^3 rate (732-787 "
                       "measured) as tiles and waves shrink and the epilogue's writes weigh more; an assumption widened "
                       "down to 550 (heldout2-12). Used here for every GEMM whose smallest dimension is 513-2048; "
                       "bf16_narrow_tflops below that, bf16_tflops above",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing: 29-36 µs "
                   "measured (quoted by ../derive.py), ~70 implied by heldout2; band 20-70 (heldout3-12)",
    "tiny_kernel_us": "GPU time of one tiny kernel (a scalar op, a reduction over a few thousand elements) in a chain of "
                      "dependent kernels, including the launch latency to the next one when the host is ahead: 2-6 µs "
                      "(assumption of heldout7-12)",
    "bwd_node_us": "host time of one backward node in the C++ autograd engine (the node's function, 1-3 kernel launches "
                   "at 4-10 µs under CUPTI, the ready-queue bookkeeping): 10-30 µs (assumption of heldout9-12)",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: "
                     "torch busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (quoted by heldout2/derive.py); "
                     "band 200-300 (heldout3-12); used for the 1.2 GB flat buffer too (larger messages run at the top "
                     "of the band or a little above it)",
    "nccl_small_gpu_us": "fixed GPU time of one NCCL collective on 2 H200 (launch, the protocol's handshakes), charged "
                         "once per DDP bucket or flat all-reduce on top of its bytes: 8-25 µs (heldout11-12)",
    "ddp_hook_us": "host time of DDP's autograd hook per parameter (marking it ready in its bucket): 2-5 µs "
                   "(heldout11-12)",
    "attn_short_fwd_tflops": "SDPA forward only, bf16, head_dim 64, non-causal, 197 tokens per image, counted as "
                             "4*B*S^2*d: two 128-row query tiles per (image, head), the second mostly empty; 100-300 "
                             "(heldout11's band)",
    "conv_stem_tflops": "cuDNN convolutions with 3 input channels (the 16 x 16 stride-16 patch embedding, K = 768 after "
                        "im2col; the first 3 x 3 convolution of the U-Net, K = 27, padded): 40-150 (heldout11-12's stem "
                        "band); each pass also bounded below by its bytes at hbm_tbs",
    "conv_nchw_tflops": "cuDNN bf16 3 x 3 convolutions with 32-192 channels on NCHW tensors (implicit GEMMs with K = "
                        "288-1728 and N = 32-128: narrow tiles), forward, data gradient and weight gradient alike: "
                        "120-400 (heldout12's band; each pass also bounded below by its bytes at hbm_tbs)",
    "nchw_xform_passes": "extra read + write passes of each convolution's input and output that cuDNN may spend "
                         "transposing NCHW to its preferred NHWC layout and back: 0-1 per pass (heldout12)",
    "bn_eff": "fraction of the HBM rate reached by BatchNorm statistics / normalization / backward kernels, ReLU, max "
              "pooling, nearest upsampling and concatenation copies (per-channel reductions, simple streams): 0.5-0.9 "
              "(heldout11's band)",
    "ew_amp_block_b": "bytes per token x d_model per transformer block of the elementwise work around the GEMMs under bf16 "
                      "autocast with an fp32 residual stream, forward and backward (LayerNorms in fp32 and their casts, "
                      "residual adds, GELU on the 4 x d hidden, the head-merge copy, q/k/v gradient stacking): 140-220 "
                      "(heldout12)",
    "ce_fp32_b": "bytes per logit of F.cross_entropy under bf16 autocast (autocast runs it in float32): the cast of the "
                 "bf16 logits, log_softmax, nll, and the backward: 30-42 (heldout12)",
    "gather_eff": "fraction of the HBM rate reached by row gathers (embedding lookups of 8 KB fp32 rows) and by the "
                  "embedding backward's segment sums: 0.5-0.9 (heldout12)",
    "bf16_narrow_tflops": "bf16 GEMMs whose smallest dimension is 512 or less (the text tower's K = 512 projections and "
                          "N = 512 outputs at M = 77 000; the retrieval scores, M = 512 queries): a K-loop of 8 tiles "
                          "of 64 or a tile row of 4 leaves the epilogue and the pipeline fill a larger part of each "
                          "tile's time than at d >= 1024; 400-700 (assumption)",
    "attn_tiny_fwd_tflops": "SDPA forward only, bf16, head_dim 64, sequences of 32 (non-causal) or 77 (causal) tokens, "
                            "counted as 4*B*S^2*d (2*B*S^2*d when causal): one 128-row query tile per (sequence, head), "
                            "mostly empty; 40-200 (assumption)",
    "attn_short_train_tflops": "SDPA forward + backward, bf16, head_dim 64, non-causal, 197 tokens per image, counted as "
                               "12*B*S^2*d (forward 4, backward 8): the forward band of heldout11 (100-300) lowered for "
                               "the backward's extra passes; 80-250 (assumption)",
    "view_op_us": "host time of one view-like op issued from Python (view, narrow, a flattened-tensor helper) or of an "
                  "autocast weight cast made inside an op's dispatch: 3-10 µs (assumption)",
    "segsort_eff": "fraction of the HBM rate reached by CUB's DeviceSegmentedRadixSort as PyTorch calls it for a "
                   "[512, 524288] float32 sort (512 segments >= 128 and rows < 10^6: at::cuda::cub::segmented_sort_pairs, "
                   "read from PyTorch's SortStable.cu): one thread block per segment, 6 passes of 6 bits over the keys, "
                   "each an upsweep (keys read) and a downsweep (keys and int64 values read and scattered to 64 bins "
                   "through shared memory), ~4 resident blocks per SM streaming their own segment: 0.35-0.75 "
                   "(assumption)",
    "topk_eff": "fraction of the HBM rate reached by torch.topk's multi-block radix selection on a [512, 524288] float32 "
                "tensor (4 digit passes reading every key, then a gather pass; sorting the 100 selected per row is "
                "negligible): 0.5-0.85 (assumption)",
    "fallback_eff": "fraction of the HBM rate reached by slow_conv2d's memory-bound per-image kernels: im2col / col2im "
                    "on one image's bf16 feature map (one thread per column position with 64-bit index arithmetic, 9 "
                    "two-byte taps read or written, coalesced along the row; the input re-read 9 times mostly from L1 / "
                    "L2) and the thin GEMMs streaming the column buffer (N = C_out = 32-128, K = 9 C_in): 0.45-0.8 "
                    "(assumption)",
    "skinny_gemm_tflops": "cuBLAS bf16 GEMMs of slow_conv2d's per-image loop with M = C_out = 32-128 rows, N = H x W = "
                          "16 384-262 144, K = 9 x C_in = 288-1728 (the forward, and the column-buffer gradient W^T x "
                          "dY): thin tiles; 100-400 (assumption; each also bounded below by its bytes at hbm_tbs)",
    "wgrad_gemm_tflops": "cuBLAS bf16 GEMMs of slow_conv2d's weight gradient per image, dY [C_out, H x W] x columns^T: an "
                         "output of C_out x 9 C_in (9 216-221 184 elements, a few tiles) reduced over 16 384-262 144: "
                         "fast only with split-K; 30-300 (assumption; also bounded below by its bytes)",
    "launch_cpp_us": "host time of one kernel or cuBLAS launch issued from C++ inside an op's per-image loop (im2col, "
                     "cublasGemmEx, col2im) under CUPTI tracing: 4-12 µs (assumption)",
    "index_bwd_iter_us": "time of one step of indexing_backward_kernel's serial loop over a run of equal sorted indices "
                         "(PyTorch's Indexing.cu, general kernel for rows wider than 32): per duplicate, the sorted and "
                         "original index loads, the gradient row chunk's load and the read-modify-write of the "
                         "accumulated row (the next load waits on the previous store: no overlap across duplicates), "
                         "for one warp of 32 x 4 features (the slowness with many duplicates is known upstream: pytorch/pytorch "
                         "issue 41162). Measured 2.3 µs on an H200 in heldout12/measured.json: "
                         "moe_lm.fixed's indexing_backward_kernel, 944.5 ms over 25 steps, ~9.4 ms per launch for a run "
                         "of 4096 duplicates of the zero row (bf16 rows of 2048). Band 1.6-3.0 µs (assumption around "
                         "that measurement: fp32 rows here, consecutive gradient rows)",
    "emb_bwd_partial_us": "time per partial segment (10 rows) of embedding_dense_backward's final sum_and_scatter loop, "
                          "run serially per feature for a segment of 16 384 equal indices (1 639 partial sums read from "
                          "L2, loads pipelined): 0.05-0.15 µs (assumption)",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q13 = dict(Q)
Q13.update({
    "nvtx_ranges": "sql/nvtx_range_ms.sql: CPU duration of each NVTX range name (count, mean, min, max)",
    "starved": "sql/launch_starved_idle.sql: GPU idle split into gaps whose next kernel had not been launched yet "
               "(the GPU waits for the host) and other gaps, between T0 and T1",
})


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


def gemm(r, m, n, k, mult=1.0):
    """mult x 2*m*n*k FLOPs at the rate for this shape: bf16_tflops when every dimension exceeds 2048,
    bf16_narrow_tflops when one is 512 or less, else the mid band."""
    small = min(m, n, k)
    rate = r["bf16_tflops"] if small > 2048 else r["bf16_mid_tflops"] if small > 512 else r["bf16_narrow_tflops"]
    return t_flops(mult * 2.0 * m * n * k, rate)


def block_gemms(r, T, d, mult=1.0):
    """The four GEMMs of a pre-LN block with a 4x MLP (fused QKV, output projection, fc1, fc2) over T tokens."""
    return (gemm(r, T, d, 3 * d, mult) + gemm(r, T, d, d, mult) + gemm(r, T, d, 4 * d, mult)
            + gemm(r, T, 4 * d, d, mult))


def finish_gpu_host(out, gpu_ms, host_ms):
    out["gpu_ms"] = gpu_ms
    out["host_ms"] = host_ms
    out["host_margin_ms"] = gpu_ms - host_ms
    return out


EW_FWD_B = 40.0     # bytes per token x d per block of a bf16 pre-LN block's elementwise work in inference: LayerNorms
# 2 x (r2 w2), residual adds 2 x (r2 r2 w2), GELU on 4d (r2 w2 x 4), the attention output's transpose-reshape copy (r2 w2)
# (heldout11's EW_BLOCK_FWD_B)
BLOCK_OPS_FWD = 15  # Python ops of one pre-LN block's forward: ln1, qkv, view, permute, unbind (or split + 3 views and
# transposes, counted alike), sdpa, transpose, reshape, proj, add, ln2, fc1, gelu, fc2, add
BLOCK_CASTS = 4     # autocast's weight casts per block (qkv, proj, fc1, fc2), made inside the linear's dispatch
BLOCK_BWD_NODES = 23  # backward nodes of one block under autocast: 2 LayerNorms, 4 x (addmm, t, the cast's ToCopy), SDPA,
# the view / permute / unbind / transpose / reshape nodes (~5), GELU, 2 adds


# ---------------------------------------------------------------------------------------------------
# zeroshot_clip: CLIP-style zero-shot classification, bf16 inference. Image tower ViT-B/16 (768 wide, 12 blocks, 197
# tokens), text tower 12 causal blocks of width 512 over 77-token prompts; 1000 class prompts, 256 images per batch; the
# prompts are re-encoded every batch unless fixed (class embeddings computed once).
ZS = dict(batch=256, image=224, patch=16, width=768, heads=12, layers=12, classes=1000, context=77, vocab=49408,
          twidth=512, theads=8, tlayers=12, embed=512, topk=5, steps=30, steps_fixed=30)
ZS_IMG_OPS = 12      # patch conv, flatten, transpose, cls expand, cat, pos add, ln_pre, class-token slice, ln_post,
# projection matmul, normalize (norm, clamp, div counted as 1)
ZS_TXT_OPS = 10      # embedding, position add, ln_final, arange, argmax, the end-of-text gather, projection, normalize,
# the function call and the None test
ZS_OTHER_OPS = 9     # image batch pick, logit scale multiply, scores matmul, t(), topk, .indices, to(int32), the
# prediction-slice write, event record and wait (+ 3 NVTX ranges, not counted)


def zs_params():
    w, L, n, tw, Lt, V, ctx, E = (ZS[k] for k in ("width", "layers", "patch", "twidth", "tlayers", "vocab", "context",
                                                 "embed"))
    npatch = (ZS["image"] // n) ** 2
    img = 3 * n * n * w + w + (npatch + 1) * w + 2 * w + L * (12 * w * w + 13 * w) + 2 * w + w * E
    txt = V * tw + ctx * tw + Lt * (12 * tw * tw + 13 * tw) + 2 * tw + tw * E
    return float(img), float(txt)


def m_zs(r, fixed=False):
    B, w, L, C, ctx, tw, Lt, E, p = (ZS[k] for k in ("batch", "width", "layers", "classes", "context", "twidth",
                                                     "tlayers", "embed", "patch"))
    n = (ZS["image"] // p) ** 2
    S = n + 1
    Ti, Tt = float(B * S), float(C * ctx)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    c = {"image_patch_conv": max(t_flops(2.0 * B * n * 3 * p * p * w, r["conv_stem_tflops"]),
                                 t_bytes(2.0 * (B * 3 * ZS["image"] ** 2 + B * n * w), hbm)),
         "image_gemm": L * block_gemms(r, Ti, w),
         "image_attention": t_flops(L * 4.0 * B * S * S * w, r["attn_short_fwd_tflops"]),
         # per block EW_FWD_B; around the tower: the flatten-transpose-cat copy (r2 w2), the position add (r2 r2 w2),
         # ln_pre (r2 w2)
         "image_elementwise": t_bytes((L * EW_FWD_B + 14.0) * Ti * w, hbm) + 6 * tiny,
         "scores_topk": gemm(r, B, C, E) + 6 * tiny}
    ops = ZS_IMG_OPS + L * BLOCK_OPS_FWD + ZS_OTHER_OPS
    if not fixed:
        c["text_gemm"] = Lt * block_gemms(r, Tt, tw)
        c["text_attention"] = t_flops(Lt * 2.0 * C * ctx * ctx * tw, r["attn_tiny_fwd_tflops"])
        # per block EW_FWD_B; the embedding gather (r2 w2), the position add (r2 r2 w2), ln_final (r2 w2)
        c["text_elementwise"] = t_bytes((Lt * EW_FWD_B + 14.0) * Tt * tw, hbm) + 8 * tiny
        ops += ZS_TXT_OPS + Lt * BLOCK_OPS_FWD
    gpu = sum(c.values())
    host = ops * r["eager_op_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "image_tflop": (L * 24.0 * Ti * w * w) / 1e12}, gpu, host)
    out["image_share"] = pct(c["image_gemm"] + c["image_attention"] + c["image_elementwise"] + c["image_patch_conv"],
                             step)
    out["image_gemm_share"] = pct(c["image_gemm"], step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["text_ms"] = c["text_gemm"] + c["text_attention"] + c["text_elementwise"]
    out["text_tflop"] = (Lt * 24.0 * Tt * tw * tw) / 1e12
    fx = m_zs(r, fixed=True)
    rm = {"loop_invariant_recompute": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"],
                "after_image_gemm_share": fx["image_gemm_share"], "after_image_share": fx["image_share"]})
    return out


# ---------------------------------------------------------------------------------------------------
# seg_unet: U-Net-lite on 8 x 3 x 512 x 512 crops, 10 3 x 3 convolutions (32 / 64 / 128 channels at 512 / 256 / 128)
# + BatchNorm + ReLU, a 1 x 1 head to 8 classes; bf16 autocast over fp32 weights, fused AdamW. cuDNN disabled (every
# convolution through slow_conv2d's per-image im2col + GEMM loop) unless fixed.
UN = dict(batch=8, size=512, width=32, classes=8, steps=25)
UN_FWD_OPS = 44   # 10 x (conv, BatchNorm, ReLU), 2 max pools, 2 interpolations, 2 cats, the head, the cross-entropy,
# autocast's enter / exit, the batch pick
UN_OTHER_OPS = 8  # backward call, fused AdamW (~3), zero_grad, loss copy, event record and wait
UN_BWD_NODES = 42  # 10 x (convolution, BatchNorm, ReLU), 2 max pools, 2 upsamplings, 2 cats, the head, cross-entropy and
# its casts, the weight casts' ToCopy nodes (counted in the convolution nodes)


def un_convs():
    """(C_in, C_out, side, needs the input gradient) of every 3 x 3 convolution, in forward order."""
    S, c1 = UN["size"], UN["width"]
    c2, c3 = 2 * c1, 4 * c1
    return [(3, c1, S, False), (c1, c1, S, True), (c1, c2, S // 2, True), (c2, c2, S // 2, True),
            (c2, c3, S // 4, True), (c3, c3, S // 4, True), (c3 + c2, c2, S // 2, True), (c2, c2, S // 2, True),
            (c2 + c1, c1, S, True), (c1, c1, S, True)]


def un_params():
    c1, K = UN["width"], UN["classes"]
    return float(sum(9 * ci * co + 2 * co for ci, co, _, _ in un_convs()) + c1 * K + K)


def un_slow_conv(r, ci, co, side, dgrad):
    """One 3 x 3 convolution of one image through slow_conv2d: forward im2col + GEMM; backward (GEMM into the column
    buffer + col2im when the input needs a gradient) + im2col + weight-gradient GEMM. Returns (ms, launches)."""
    hbm = r["hbm_tbs"]
    hw = float(side * side)
    X, Y, F_ = ci * hw, co * hw, 18.0 * ci * co * hw  # input and output elements, FLOPs of each of the three GEMMs
    bw = hbm * r["fallback_eff"]
    im2col = t_bytes(20.0 * X, bw)  # read the input (2 B, re-reads cached), write 9 x C_in rows
    col2im = t_bytes(20.0 * X, bw)  # read the 9 x C_in rows, write the input gradient
    g_fwd = max(t_flops(F_, r["skinny_gemm_tflops"]), t_bytes(18.0 * X + 6.0 * Y, bw))  # columns read; output fill,
    # read and write (beta = 1)
    g_dcol = max(t_flops(F_, r["skinny_gemm_tflops"]), t_bytes(18.0 * X + 2.0 * Y, bw))
    g_wgt = max(t_flops(F_, r["wgrad_gemm_tflops"]), t_bytes(18.0 * X + 2.0 * Y, bw))
    ms = im2col + g_fwd + im2col + g_wgt + ((g_dcol + col2im) if dgrad else 0.0)
    return ms, 4 + (2 if dgrad else 0)


def un_cudnn_conv(r, ci, co, side, dgrad):
    """The same convolution for the whole batch through cuDNN: forward, data gradient (if needed), weight gradient."""
    hbm, B = r["hbm_tbs"], UN["batch"]
    hw = float(side * side)
    X, Y, F_ = B * ci * hw, B * co * hw, B * 18.0 * ci * co * hw
    rate = r["conv_stem_tflops"] if ci == 3 else r["conv_nchw_tflops"]
    one = max(t_flops(F_, rate), t_bytes(2.0 * (X + Y), hbm)) + t_bytes(r["nchw_xform_passes"] * 4.0 * (X + Y), hbm)
    return one * (3 if dgrad else 2)


def m_un(r, fixed=False):
    B, S, c1, K = UN["batch"], UN["size"], UN["width"], UN["classes"]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    ew = hbm * r["bn_eff"]
    convs = un_convs()
    out_el = sum(B * co * s * s for _, co, s, _ in convs)  # conv outputs: each gets BatchNorm + ReLU
    full, half, quarter = float(B * S * S), float(B * S * S // 4), float(B * S * S // 16)
    c = {# BatchNorm (statistics r2, normalize r2 w2), ReLU in place (r2 w2), their backward (r2 r2 w2; r2 r2 + r2 r2 w2)
         "batchnorm_relu": t_bytes(26.0 * out_el, ew) + len(convs) * 6 * tiny,
         # max pools (in r2, out w2 + int64 indices w8; backward: zero fill, scatter), nearest upsampling (out w2; the
         # backward sums 4 -> 1) and the cats (r2 w2 both ways), on the level sizes
         "pool_upsample_cat": t_bytes(c1 * full * 4.0 + c1 * half * 22.0 + 2 * c1 * half * 4.0 + 2 * c1 * quarter * 22.0
                                      + 4 * c1 * half * 8.0 + 2 * c1 * full * 8.0
                                      + (6 * c1 * half + 3 * c1 * full) * 10.0, ew),
         # 1 x 1 head (per-image GEMM in both paths: input r2, logits w2; backward both ways), the fp32 cross-entropy
         # over B x 8 x 512 x 512 logits (~42 B per logit), the input's cast to bf16
         "head_loss": t_bytes(6.0 * c1 * full + 10.0 * K * full + 42.0 * K * full + 6.0 * 3 * full, hbm) + 8 * tiny,
         "adamw_fused": t_bytes(ADAM_B[4] * un_params(), hbm) + 4 * tiny}
    host = (UN_FWD_OPS + UN_OTHER_OPS) * r["eager_op_us"] / 1e3 + UN_BWD_NODES * r["bwd_node_us"] / 1e3
    if fixed:
        c["conv_cudnn"] = sum(un_cudnn_conv(r, *cv) for cv in convs)
        launches = 0
    else:
        per = [un_slow_conv(r, *cv) for cv in convs]
        c["conv_slow_im2col_gemm"] = B * sum(ms for ms, _ in per)
        launches = B * (sum(n for _, n in per) + 3)  # + the head's per-image GEMMs (forward, both gradients)
        host += launches * r["launch_cpp_us"] / 1e3
    gpu = sum(c.values())
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    flops = sum(3.0 * B * 18.0 * ci * co * s * s for ci, co, s, _ in convs)
    out = finish_gpu_host({"c": c, "step": step, "params_m": un_params() / 1e6, "conv_tflop": flops / 1e12,
                           "launches": launches}, gpu, host)
    if fixed:
        out["conv_share"] = pct(c["conv_cudnn"], step)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["conv_share"] = pct(c["conv_slow_im2col_gemm"], step)
    cols = sum(B * 2.0 * 9 * ci * s * s * (3 if dg else 2) for ci, _, s, dg in convs)  # column-buffer bytes written
    out["columns_gb"] = cols / GB
    fx = m_un(r, fixed=True)
    rm = {"cudnn_disabled": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "after_conv_ms": fx["c"]["conv_cudnn"]})
    return out


# ---------------------------------------------------------------------------------------------------
# dense_retrieval: 512 queries x 32 tokens through a 6-block encoder (d 768), scored against 524 288 bf16 passage
# embeddings (float32 scores), the 100 best kept; a full argsort of every row unless fixed (topk).
RET = dict(queries=512, qlen=32, vocab=30522, d=768, heads=12, blocks=6, passages=524288, k=100, steps=30)
RET_OPS = 18        # query batch pick, embedding, position add, final LayerNorm, mean, projection, normalize; the scores
# matmul, t(), float(); the result slices, the id cast, 2 writes; event record and wait (+ the sort's ops below)
RET_SORT_OPS = 3    # argsort, slice, gather
RET_TOPK_OPS = 1    # topk
SEG_SORT_B = 8.0 + 6 * 28.0  # bytes per element of the [512, 524288] argsort: PyTorch's fill of the int64 value
# indices (w8), then 6 radix passes of 6 bits, each an upsweep over the keys (r4) and a downsweep reading keys and values
# (r4 r8) and writing them (w4 w8)
TOPK_B = 20.0       # bytes per element of topk's radix selection: 4 digit passes reading the float32 keys, a gather pass


def ret_params():
    d, L, V, S = (RET[k] for k in ("d", "blocks", "vocab", "qlen"))
    return float(V * d + S * d + L * (12 * d * d + 13 * d) + 2 * d + d * d + d)


def m_ret(r, fixed=False):
    Qn, S, d, L, N, k = (RET[x] for x in ("queries", "qlen", "d", "blocks", "passages", "k"))
    T = float(Qn * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    n_el = float(Qn) * N
    c = {"encoder_gemm": L * block_gemms(r, T, d) + gemm(r, Qn, d, d),
         "encoder_attention": t_flops(L * 4.0 * Qn * S * S * d, r["attn_tiny_fwd_tflops"]),
         # per block EW_FWD_B; the embedding gather (r2 w2), position add (r2 r2 w2), final LayerNorm (r2 w2), mean (r2)
         "encoder_elementwise": t_bytes((L * EW_FWD_B + 16.0) * T * d, hbm) + 6 * tiny,
         # the scores GEMM [512, 768] x [768, 524288]: the index read (805 MB) and the bf16 scores written
         "scores_gemm": max(gemm(r, Qn, N, d), t_bytes(2.0 * N * d + 2.0 * n_el, hbm)),
         "scores_to_float32": t_bytes(6.0 * n_el, hbm),
         "results_write": 6 * tiny}
    ops = RET_OPS + L * BLOCK_OPS_FWD
    if fixed:
        c["topk_radix_select"] = t_bytes(TOPK_B * n_el, hbm * r["topk_eff"]) + 8 * tiny
        ops += RET_TOPK_OPS
    else:
        c["argsort_segmented_radix_sort"] = t_bytes(SEG_SORT_B * n_el, hbm * r["segsort_eff"]) + 4 * tiny
        ops += RET_SORT_OPS
    gpu = sum(c.values())
    host = ops * r["eager_op_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "params_m": ret_params() / 1e6, "elements_m": n_el / 1e6}, gpu, host)
    if fixed:
        out["select_ms"] = c["topk_radix_select"]
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["sort_share"] = pct(c["argsort_segmented_radix_sort"], step)
    out["sort_gb"] = SEG_SORT_B * n_el / GB
    fx = m_ret(r, fixed=True)
    rm = {"full_sort_topk": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "after_select_ms": fx["select_ms"]})
    return out


# ---------------------------------------------------------------------------------------------------
# multilingual_lm: vocab 64000 (head tied), d 2048, 12 blocks (16 heads of 128, GELU MLP 4x, biases), learned positions,
# an [8, 2048] language table added to every token; bf16 autocast over fp32 weights, fused AdamW; 16 x 1024 tokens per
# step, one language per batch. The table is read by advanced indexing (serial index_put_ backward) unless fixed
# (F.embedding).
ML = dict(batch=16, seq=1024, vocab=64000, d=2048, heads=16, blocks=12, langs=8, steps=20)
ML_OTHER_OPS = 26   # batch pick, id / target slices, language ids pick, embedding, position slice, language lookup, 2 adds,
# final norm, tied head (+ cast), view, reshape, cross-entropy (+ cast), backward call, fused AdamW (~3), zero_grad, loss
# copy, event record and wait
ML_OTHER_NODES = 16  # embedding, index (or embedding) backward, position slice, adds, norm, head, casts, cross-entropy
ML_BLOCK_OPS = BLOCK_OPS_FWD + 3  # + the split's 3 views counted apart from the transposes


def ml_params():
    V, S, d, L, n = (ML[k] for k in ("vocab", "seq", "d", "blocks", "langs"))
    return float(V * d + S * d + n * d + L * (12 * d * d + 13 * d) + 2 * d)


def m_ml(r, fixed=False):
    B, S, V, d, L = (ML[k] for k in ("batch", "seq", "vocab", "d", "blocks"))
    T = float(B * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P = ml_params()
    c = {"block_gemm_bf16": L * block_gemms(r, T, d, 3.0),
         "attention_causal": t_flops(L * 7.0 * B * S * S * d, r["attn_tflops"]),
         "block_elementwise": t_bytes(L * r["ew_amp_block_b"] * T * d, hbm),
         "lm_head_gemm": gemm(r, T, d, V, 3.0),
         "cross_entropy_fp32": t_bytes(r["ce_fp32_b"] * T * V, hbm) + 4 * tiny,
         # forward: token gather (r4 w4), position slice add and language add (r4 r4 w4 each), the language gather (w4);
         # backward: the token rows summed into a zero-filled fp32 [V, d] gradient (w4 V d, ~8 B per token x d) and added
         # to the tied head's weight gradient (r4 r4 w4 V d), the position gradient (a sum over the batch, r4)
         "embeddings": t_bytes(36.0 * T * d + 16.0 * V * d + 12.0 * T * d, hbm) + 10 * tiny,
         "autocast_weight_casts": t_bytes(AMP_B * P, hbm),
         "adamw_fused_fp32": t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny}
    if fixed:
        # embedding_dense_backward: sort of the 16384 indices, segment offsets, partial sums of <= 10 rows in parallel
        # (grad r4 T d, partials w4 r4), then one serial pass over the 1639 partials per feature
        c["language_lookup_backward"] = (t_bytes(12.0 * T * d, hbm * r["gather_eff"])
                                         + math.ceil(T / 10) * r["emb_bwd_partial_us"] / 1e3 + 8 * tiny)
    else:
        # index_put_ with accumulate: the radix sort of the 16384 indices (a few tiny kernels), then
        # indexing_backward_kernel: one run of T equal indices, walked serially by d / 128 warps
        c["language_index_backward_serial"] = T * r["index_bwd_iter_us"] / 1e3 + 6 * tiny
    gpu = sum(c.values())
    ops = L * ML_BLOCK_OPS + ML_OTHER_OPS
    host = (ops * r["eager_op_us"] + L * BLOCK_CASTS * r["view_op_us"]
            + (L * BLOCK_BWD_NODES + ML_OTHER_NODES) * r["bwd_node_us"]) / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "tokens": T}, gpu, host)
    out["gemm_share"] = pct(c["block_gemm_bf16"] + c["lm_head_gemm"], step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["index_ms"] = c["language_index_backward_serial"]
    fx = m_ml(r, fixed=True)
    rm = {"duplicate_index_backward": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_lookup_ms":
                fx["c"]["language_lookup_backward"], "slowdown": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# vit_ddp: 2 ranks, ViT-L/16 (d 1024, 24 blocks, 16 heads of 64, MLP 4x, biases), 224 x 224 images, 1000 classes; bf16
# autocast over fp32 weights, fused AdamW, DDP defaults; 128 images per rank. After the backward, a second all-reduce of
# all gradients (flattened into one buffer, divided, copied back) unless fixed.
VD = dict(batch=128, image=224, patch=16, d=1024, heads=16, blocks=24, classes=1000, ranks=2, steps=20)
DDP_BUCKET_B = 25 * 2 ** 20
VD_OTHER_OPS = 22   # batch pick, DDP's forward prologue (~5), patch conv, flatten, transpose, cls expand, cat, position
# add, class-token slice, final norm, head, cross-entropy (+ cast), backward call, fused AdamW (~3), zero_grad, loss
# copy, event record and wait
VD_OTHER_NODES = 15  # patch conv, cat, position add, slice, norm, head (+ cast), cross-entropy and its casts
VD_HELPER_OPS = 5    # the helper's call, the parameter walk, the flatten, the all_reduce call, div_, the unflatten


def vd_tensors():
    return 4 + 12 * VD["blocks"] + 4  # patch weight and bias, cls, positions; 12 per block; final norm and head


def vd_params():
    d, L, p, K = VD["d"], VD["blocks"], VD["patch"], VD["classes"]
    n = (VD["image"] // p) ** 2
    return float(3 * p * p * d + d + d + (n + 1) * d + L * (12 * d * d + 13 * d) + 2 * d + d * K + K)


def vd_block_params():
    d = VD["d"]
    return float(12 * d * d + 13 * d)


def m_vd(r, fixed=False):
    b, d, L, p = (VD[k] for k in ("batch", "d", "blocks", "patch"))
    n = (VD["image"] // p) ** 2
    S = n + 1
    T = float(b * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P, Pb = vd_params(), vd_block_params()
    g_blk = block_gemms(r, T, d, 3.0)
    a_blk = t_flops(12.0 * b * S * S * d, r["attn_short_train_tflops"])
    e_blk = t_bytes(r["ew_amp_block_b"] * T * d, hbm)
    patch = max(t_flops(2.0 * b * n * 3 * p * p * d, r["conv_stem_tflops"]),
                t_bytes(4.0 * b * 3 * VD["image"] ** 2 + 2.0 * b * n * d, hbm))  # one pass (forward or weight grad)
    embed = t_bytes(24.0 * T * d, hbm) + 6 * tiny  # the cat, the position add and their backward, the position gradient
    head = 12 * tiny                               # final LayerNorm on 128 rows, the 1024 x 1000 head, cross-entropy
    cast = lambda k: t_bytes(6.0 * k, hbm)  # autocast's weight cast (forward r4 w2) or its gradient's (backward r2 w4)
    copy_in = lambda k: t_bytes(8.0 * k, hbm)  # DDP: a gradient copied into its bucket (r4 w4)
    fwd = L * (g_blk / 3.0 + a_blk / 3.0 + 0.4 * e_blk) + patch + 0.4 * embed + head / 2 + cast(P)
    head_b = head / 2 + cast(VD["classes"] * d) + copy_in(d * VD["classes"] + 2 * d)
    blk_b = 2.0 * g_blk / 3.0 + 2.0 * a_blk / 3.0 + 0.6 * e_blk + cast(Pb) + copy_in(Pb)
    rest = P - L * Pb - d * VD["classes"] - VD["classes"] - 2 * d
    bwd = head_b + L * blk_b + patch + 0.6 * embed + copy_in(rest)
    # DDP's buckets in gradient-ready order: each block once its backward ends, then the patch embedding, class token and
    # positions; 25 MiB buckets, all-reduced one after another on NCCL's stream while the backward goes on
    algbw, lat = r["ar2_algbw_gbs"], r["nccl_small_gpu_us"] / 1e3
    groups = [(head_b + (i + 1) * blk_b, 4.0 * Pb) for i in range(L)] + [(bwd, 4.0 * rest)]
    free, comm_total = 0.0, 0.0
    for ready, nbytes in groups:
        n_buckets = max(1, math.ceil(nbytes / DDP_BUCKET_B))
        dur = t_link(nbytes, algbw) + n_buckets * lat
        free = max(free, ready) + dur
        comm_total += dur
    bwd_pen = bwd + r["overlap_penalty"] * min(bwd, comm_total)
    exposed = max(free, bwd_pen) - bwd_pen
    copy_back = t_bytes(8.0 * P, hbm)  # DDP copies the averaged buckets back into .grad (r4 w4)
    opt = t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny
    c = {"forward": fwd, "backward_compute": bwd_pen, "ddp_allreduce_exposed": exposed, "ddp_bucket_copy_back": copy_back,
         "adamw_fused_fp32": opt}
    n_t = vd_tensors()
    host = ((L * BLOCK_OPS_FWD + VD_OTHER_OPS) * r["eager_op_us"] + (L * BLOCK_CASTS + 2) * r["view_op_us"]
            + (L * BLOCK_BWD_NODES + VD_OTHER_NODES) * r["bwd_node_us"] + n_t * r["ddp_hook_us"]) / 1e3
    if not fixed:
        # the flatten (one cat: r4 w4), the all-reduce of the flat 4P bytes (after DDP's last bucket, on the same NCCL
        # stream; the compute stream waits for it), div_ (r4 w4), the copy back into each of the 296 .grad (r4 w4, one
        # small kernel each)
        c["second_allreduce_flatten"] = t_bytes(8.0 * P, hbm)
        c["second_allreduce_nccl"] = t_link(4.0 * P, algbw) + lat
        c["second_allreduce_div_copy_back"] = t_bytes(8.0 * P, hbm) + max(t_bytes(8.0 * P, hbm), n_t * tiny)
        host += ((VD_HELPER_OPS + n_t) * r["eager_op_us"] + 2 * n_t * r["view_op_us"]) / 1e3
    gpu = sum(c.values())
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "grad_gb": 4.0 * P / GB,
                           "allreduce_ms": comm_total, "gemm_ms": L * g_blk, "attention_ms": L * a_blk,
                           "elementwise_ms": L * e_blk,
                           "buckets": sum(max(1, math.ceil(nb / DDP_BUCKET_B)) for _, nb in groups),
                           "backward_ms": bwd}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["second_ms"] = c["second_allreduce_flatten"] + c["second_allreduce_nccl"] + c["second_allreduce_div_copy_back"]
    fx = m_vd(r, fixed=True)
    rm = {"redundant_allreduce": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_exposed_ms":
                fx["c"]["ddp_allreduce_exposed"], "after_host_ms": fx["host_ms"]})
    return out


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=25, warmup=3, ranks=1):
    return D.base(name, f"heldout13/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def planted13(cause, where, fix, b, key_rm, key_share, derivation, accept, b2):
    sev, sev_rng = band_of13(b2, key_share)
    return {"cause": cause, "accept_causes": accept, "where": where, "fix": fix, "top": True,
            "removed_ms": {"h100": r2(b[key_rm]), "h200": r2(b2[key_rm])},
            "share_pct": {"h100": r2(b[key_share]), "h200": r2(b2[key_share])},
            "severity": sev, "severity_range": sev_rng,
            "severity_legacy": D.band_of(b2, key_share)[0], "severity_legacy_range": D.band_of(b2, key_share)[1],
            "derivation": derivation}


def finish(m, b, b2, keys, after=True, fixed_case=None):
    m["severity_bands"] = SEV_DOC13
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
    "zeroshot_clip": "~290 per batch: the text tower over 1000 x 77 tokens (per block 2 LayerNorms, 4 GEMMs with M = 77 "
                     "000, a causal SDPA, GELU, 2 adds, the head-merge copy; the embedding gather, the end-of-text "
                     "gather, the projection and normalization), the image tower over 256 x 197 tokens (the patch "
                     "convolution, the same 12-block pattern with a non-causal SDPA, the class-token LayerNorm and "
                     "projection), the [256, 1000] scores and top-5",
    "zeroshot_clip.fixed": "~150 per batch: the image tower, the scores and the top-5 (the text tower ran once, before "
                           "the loop)",
    "seg_unet": "per step ~490 from the convolutions alone, no NVTX: for each of the 10 3 x 3 convolutions and each of "
                "the 8 images, im2col_kernel and a GEMM forward, and backward a GEMM into the column buffer, "
                "col2im_kernel, im2col_kernel again and a weight-gradient GEMM (the first convolution without the input "
                "gradient); the 1 x 1 head's per-image GEMMs; BatchNorm / ReLU / pooling / upsampling / cat kernels, "
                "the cross-entropy, fused AdamW; no cuDNN kernels",
    "seg_unet.fixed": "~150 per step: one cuDNN kernel (or a few) per convolution and pass, BatchNorm / ReLU / pooling "
                      "/ upsampling kernels, the cross-entropy, fused AdamW",
    "dense_retrieval": "~100 per batch: the 6-block encoder (per block 2 LayerNorms, 4 GEMMs with M = 16 384, SDPA on 32 "
                       "tokens, GELU, 2 adds, a copy), mean pooling and projection, the [512, 524288] scores GEMM and "
                       "its float32 cast, then PyTorch's argsort: a fill of the int64 indices and CUB's segmented radix "
                       "sort (DeviceSegmentedRadixSortKernel, 6 launches, one block per query row), the gather of the "
                       "first 100 and the result writes",
    "dense_retrieval.fixed": "~100 per batch: the same, with topk's radix-select kernels (a few per digit pass) and "
                             "gatherTopK in place of the sort",
    "multilingual_lm": "~700 per step: per block forward 2 LayerNorms (fp32), 4 GEMMs, one causal SDPA, GELU, casts, "
                       "adds; the backward about twice that; the tied head GEMM, the fp32 cross-entropy, fused AdamW; in "
                       "the backward, for the language lookup, a small radix sort of 16 384 indices and one "
                       "indexing_backward_kernel launched with 65 536 blocks of which 16 warps do the work",
    "multilingual_lm.fixed": "the same with the language lookup's backward as embedding_dense_backward's kernels (sort, "
                             "segment offsets, partial sums, sum_and_scatter)",
    "vit_ddp": "per rank ~1100: per block forward 2 LayerNorms (fp32), 4 GEMMs, one SDPA over 197 tokens, GELU, casts, "
               "adds; the backward about twice that; the patch convolution, fused AdamW; ~50 DDP bucket all-reduces "
               "(25 MiB) on NCCL's stream during the backward and DDP's bucket copies; then one cat of all gradients, "
               "one 1.2 GB all-reduce, a div and 296 small copy kernels",
    "vit_ddp.fixed": "per rank ~800: the same without the flat all-reduce, its cat, div and copies",
}

EVENT_SYNC = "event sync on the previous step (lag 1: never idles the GPU)"


def build():
    out = {}

    # ---- zeroshot_clip (loop_invariant_recompute) and zeroshot_clip.fixed --------------------------------------------
    Bz, Cz, ctx = ZS["batch"], ZS["classes"], ZS["context"]
    args = ["--batch", Bz, "--image", ZS["image"], "--patch", ZS["patch"], "--width", ZS["width"], "--heads", ZS["heads"],
            "--layers", ZS["layers"], "--classes", Cz, "--context", ctx, "--vocab", ZS["vocab"], "--text-width",
            ZS["twidth"], "--text-heads", ZS["theads"], "--text-layers", ZS["tlayers"], "--embed", ZS["embed"],
            "--topk", ZS["topk"]]
    b, b2, keys = ev(m_zs)
    bf, bf2, keys_f = ev(lambda r: m_zs(r, fixed=True))
    Pi, Pt = zs_params()
    m = base("zeroshot_clip", "zeroshot_clip.py", "planted", args, steps=ZS["steps"], est=40)
    m["uses"] = uses("bf16 (parameters and compute), inference", "none (inference, torch.inference_mode)",
                     attention=True, host_sync=EVENT_SYNC)
    m["uses"]["attention"] = ("F.scaled_dot_product_attention: image tower non-causal over 197 tokens (12 heads of 64), "
                              "text tower causal over 77 tokens (8 heads of 64)")
    m["uses"]["class_prompts"] = f"{Cz} prompts of {ctx} tokens, the same every batch, encoded inside the batch loop"
    m["techniques"] = techniques(
        "hoist the loop-invariant text encoding out of the batch loop: compute the normalized class embeddings once "
        "(they depend only on the fixed prompts and weights), keep the [1000, 512] tensor, and score each image batch "
        "against it; (caching them on disk works too)",
        ["CUDA graphs / launch overhead (GPU-bound)", "FP8 / quantization as the top fix",
         "flash attention (already SDPA)", "a larger image batch as the fix (the text work is per batch)",
         "faster GEMMs / kernel tuning (they run at their rate)", "torch.compile as the top fix",
         "pinned memory / data loading (images on the GPU)", "prompt ensembling changes"])
    m["planted"] = [planted13(
        "loop_invariant_recompute", {"device": "GPU 0", "region": f"step_N > forward, before the image tower: the "
                                     f"whole text tower over the {Cz} class prompts ({Cz} x {ctx} = {Cz * ctx} tokens, "
                                     f"{ZS['tlayers']} causal blocks of width {ZS['twidth']}) every batch, with the same "
                                     f"inputs and weights each time"},
        "class embeddings computed once before the loop (--fixed, captured as zeroshot_clip.fixed)", b,
        "rm.loop_invariant_recompute", "share.loop_invariant_recompute",
        f"{(Pi + Pt) / 1e6:.0f} M bf16 parameters ({Pi / 1e6:.1f} M image tower, {Pt / 1e6:.1f} M text tower). Per batch "
        f"of {Bz} images the image tower does {b2['image_tflop'][0]:.1f} TFLOP of GEMMs over {Bz} x 197 tokens "
        f"({rng(b2, 'c.image_gemm')} ms at 550-800 on an H200), attention over 197 tokens "
        f"({rng(b2, 'c.image_attention')} ms), elementwise ({rng(b2, 'c.image_elementwise')} ms) and the patch "
        f"convolution ({rng(b2, 'c.image_patch_conv')} ms). The text tower re-encodes the {Cz} prompts: "
        f"{b2['text_tflop'][0]:.1f} TFLOP of GEMMs with M = {Cz * ctx} and K or N = 512 at 400-700 "
        f"({rng(b2, 'c.text_gemm')} ms), causal attention over 77 tokens ({rng(b2, 'c.text_attention')} ms), elementwise "
        f"({rng(b2, 'c.text_elementwise')} ms): {rng(b2, 'text_ms')} ms per batch for a result that never changes. "
        f"Step {rng(b2, 'step')} ms (GPU-bound: host {rng(b2, 'host_ms')} ms); with the class embeddings computed once "
        f"{rng(b2, 'after')} ms (host {rng(bf2, 'host_ms')} ms): removed {rng(b2, 'rm.loop_invariant_recompute')} ms = "
        f"{rng(b2, 'share.loop_invariant_recompute', 1)} % (H100 {rng(b, 'share.loop_invariant_recompute', 1)} %), "
        f"{rng(b2, 'speedup')}x. New cause name: loop_invariant_recompute.",
        ["loop_invariant_recompute", "redundant_compute", "redundant_forward", "wasted_compute", "invariant_recompute"],
        b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / head-merge copy kernels of both towers (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "SDPA on 77- and 197-token sequences (short sequences, partly empty tiles)",
                       "cause": "grid_underutilized", "max_severity": "low"}]
    m["expected_in_trace"] = [
        f"in every step_N > forward, first a transformer pass over {Cz * ctx} tokens of width 512 ({ZS['tlayers']} blocks: "
        f"4 GEMMs with M = {Cz * ctx}, a causal SDPA, LayerNorms, GELU), then the image tower over {Bz} x 197 tokens "
        f"of width 768",
        "the text tower's kernels identical from batch to batch (same shapes, same inputs)",
        "step_N > predict short: a [256, 1000] GEMM and a top-5",
        "no host-to-device copies, no host synchronization but the event wait; the GPU busy throughout"]
    m["must_not"] = [
        "the GEMMs as inefficient, or kernel tuning / FP8 as the top fix (they run at their rate)",
        "CUDA graphs / launch overhead (GPU-bound)", "attention as the main cost, or flash attention as the fix",
        "data loading / host-to-device copies", "a host synchronization per batch as the problem",
        "the image tower as the thing to shrink first", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Here are two profiles of our zero-shot image classifier on one H200 (a CLIP-style model: ViT-B/16 "
                     f"image tower, 12-block text tower of width 512, {Cz} class prompts, {Bz} images per batch, bf16, "
                     f"inference mode), before and after a change to the classification loop. How much did the change "
                     f"buy per batch, why, and what bounds a batch now?")
    m["diagnosis"] = (f"Before: every batch re-encoded the {Cz} fixed class prompts through the text tower ({Cz * ctx} "
                      f"tokens, {b2['text_tflop'][0]:.1f} TFLOP of GEMMs plus attention and elementwise work, "
                      f"~{rng(b2, 'text_ms', 0)} ms) before encoding the images, in a {rng(b2, 'step', 1)} ms batch on "
                      f"the H200; the class embeddings depend only on the prompts and the weights, so the work is loop-"
                      f"invariant. After: they are computed once, before the loop: {rng(b2, 'after', 1)} ms per batch, "
                      f"{rng(b2, 'speedup', 2)}x, {rng(b2, 'share.loop_invariant_recompute', 0)} % of the batch removed "
                      f"({band_of13(b2, 'share.loop_invariant_recompute')[0]}). A batch is now the image tower alone, "
                      f"GPU-bound: its GEMMs ~{rng(bf2, 'image_gemm_share', 0)} % of the step, then the memory-bound "
                      f"LayerNorm / GELU / residual kernels and the attention; nothing planted is left.")
    m["measure"] = [{"what": "step period", "query": Q13["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q13["kernels"],
                     "expect": f"GEMMs with M = {Cz * ctx} ({ZS['tlayers'] * 4} per batch, "
                               f"{rng(b2, 'c.text_gemm', 1)} ms) besides the image tower's (M = {Bz * 197})"}]
    m["new_cause"] = {"name": "loop_invariant_recompute", "why": "work inside the hot loop whose inputs do not change "
                      "from iteration to iteration (encoding a fixed set of class prompts, normalizing a fixed index, "
                      "rebuilding a constant table): the same kernels on the same data every step; fixed by hoisting "
                      "it out of the loop (compute once, keep the result)"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="zeroshot_clip.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("zeroshot_clip.fixed", "zeroshot_clip.py", "fixed", args + ["--fixed"], steps=ZS["steps_fixed"], est=35)
    m["uses"] = uses("bf16 (parameters and compute), inference", "none (inference, torch.inference_mode)",
                     attention=True, host_sync=EVENT_SYNC)
    m["uses"]["attention"] = "F.scaled_dot_product_attention: image tower non-causal over 197 tokens (12 heads of 64)"
    m["uses"]["class_prompts"] = f"{Cz} prompts encoded once before the loop; the [1000, 512] embeddings reused"
    m["techniques"] = techniques(
        "nothing planted is left: a batch is the image tower's GEMMs, its attention and memory-bound elementwise "
        "kernels; the next gains would come from fusing the LayerNorm / GELU / residual kernels or from lower precision, "
        "each modest",
        ["re-encoding the prompts (gone)", "CUDA graphs / launch overhead (GPU-bound)", "flash attention (already)",
         "pinned memory / data loading (images on the GPU)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / head-merge copy kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "SDPA on 197-token sequences (partly empty tiles)", "cause": "grid_underutilized",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        f"per step_N > forward only the image tower: the patch convolution, {ZS['layers']} blocks of 4 GEMMs with M = "
        f"{Bz * 197}, a non-causal SDPA, LayerNorms, GELU, adds",
        "no GEMMs with M = 77 000 inside the loop (one text pass before the first step)",
        "no host synchronization but the event wait"]
    m["must_not"] = ["the text tower as still running every batch", "a host-bound or launch-bound step",
                     "a critical or high problem left"]
    m["expect_quiet"] = False
    m["question"] = "After the change, is anything still holding a batch back?"
    m["diagnosis"] = (f"No planted problem is left: {rng(b2, 'step', 1)} ms per batch on the H200, GPU-bound (host "
                      f"{rng(b2, 'host_ms', 1)} ms), the image tower's GEMMs ~{rng(b2, 'image_gemm_share', 0)} % of it, "
                      f"the rest its attention over 197 tokens ({rng(b2, 'c.image_attention', 1)} ms) and memory-bound "
                      f"elementwise kernels ({rng(b2, 'c.image_elementwise', 1)} ms), which fusion could trim.")
    m["measure"] = [{"what": "step period", "query": Q13["step"], "expect_ms": r2(b2["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- seg_unet (cudnn_disabled; no NVTX) -------------------------------------------------------------------------
    Bu, Su, c1, Ku = UN["batch"], UN["size"], UN["width"], UN["classes"]
    args = ["--batch", Bu, "--size", Su, "--width", c1, "--classes", Ku]
    b, b2, keys = ev(m_un)
    bf2 = ev(lambda r: m_un(r, fixed=True))[1]
    m = base("seg_unet", "seg_unet.py", "planted", args, nvtx=False, steps=UN["steps"], est=45)
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", host_sync=EVENT_SYNC)
    m["uses"]["cudnn"] = "torch.backends.cudnn.enabled = False at the top of the script (cudnn.benchmark = True has no effect)"
    m["uses"]["memory_format"] = "NCHW (contiguous)"
    m["techniques"] = techniques(
        "re-enable cuDNN (drop torch.backends.cudnn.enabled = False; if the old CUDNN_STATUS_NOT_SUPPORTED error "
        "returns, fix its cause: a cuDNN / driver mismatch, an unsupported dtype or layout), so convolutions run as "
        "cuDNN implicit-GEMM kernels over the whole batch instead of the per-image im2col + GEMM fallback",
        ["CUDA graphs / launch overhead as the top fix (the fallback's kernels are GPU work, big ones)",
         "channels_last / layout changes as the top fix (no cuDNN to benefit)", "precision changes (already bf16)",
         "fused optimizer (already)", "a larger batch as the fix", "data loading (crops on the GPU)",
         "torch.compile as the top fix"])
    m["planted"] = [planted13(
        "cudnn_disabled", {"device": "GPU 0", "region": f"every iteration (no NVTX): each of the {len(un_convs())} "
                           f"3 x 3 convolutions runs as {Bu} x (im2col_kernel + GEMM) forward and {Bu} x (GEMM + "
                           f"col2im_kernel + im2col_kernel + GEMM) backward, one image at a time, through column "
                           f"buffers 9 x C_in times the size of the input"},
        "cuDNN enabled (--fixed; not captured)", b, "rm.cudnn_disabled", "share.cudnn_disabled",
        f"{Bu} crops of {Su} x {Su}, a {b2['params_m'][0]:.2f} M-parameter U-Net: the 10 3 x 3 convolutions are "
        f"{b2['conv_tflop'][0]:.2f} TFLOP per step (forward and both gradients). With cuDNN off, slow_conv2d writes and "
        f"reads column buffers of 9 x C_in x H x W per image ({b2['columns_gb'][0]:.1f} GB written per step, im2col / "
        f"col2im and the GEMMs streaming them at 45-80 % of HBM) and runs one thin GEMM per image and pass (M = C_out = 32-128; 100-400 TFLOP/s, the "
        f"weight-gradient GEMMs 30-300): {rng(b2, 'c.conv_slow_im2col_gemm')} ms of convolution per step on an H200, "
        f"{b2['launches'][0]:.0f} launches from C++. Through cuDNN (implicit GEMMs over the batch, 120-400 TFLOP/s, "
        f"bytes-bounded, 0-1 layout passes) the same convolutions take {rng(b2, 'after_conv_ms')} ms. The rest is the "
        f"same either way: BatchNorm + ReLU ({rng(b2, 'c.batchnorm_relu')} ms), pooling / upsampling / cat "
        f"({rng(b2, 'c.pool_upsample_cat')} ms), head and fp32 cross-entropy ({rng(b2, 'c.head_loss')} ms), AdamW. "
        f"Step {rng(b2, 'step')} ms (GPU-bound: host {rng(b2, 'host_ms')} ms); with cuDNN {rng(b2, 'after')} ms (host "
        f"{rng(bf2, 'host_ms')} ms): removed {rng(b2, 'rm.cudnn_disabled')} ms = {rng(b2, 'share.cudnn_disabled', 1)} % "
        f"(H100 {rng(b, 'share.cudnn_disabled', 1)} %), {rng(b2, 'speedup', 1)}x. New cause name: cudnn_disabled.",
        ["cudnn_disabled", "library_fallback", "slow_conv_fallback", "kernel_inefficient"], b2)]
    m["tolerated"] = [{"what": "BatchNorm / ReLU / pooling / upsampling / cat kernels (memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "the fp32 cross-entropy over 8 x 8 x 512 x 512 logits", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        "no NVTX; an iteration starts with the first convolution's 8 im2col_kernel + GEMM pairs on the 3-channel input",
        "im2col_kernel / col2im_kernel and small-grid GEMM kernels alternating, 8 of each per convolution and pass, "
        "together most of the GPU time; no cuDNN convolution kernels at all",
        "BatchNorm (native) and ReLU kernels, max pooling, nearest upsampling, cat copies, the cross-entropy, fused "
        "AdamW",
        "the host well ahead of the GPU (GPU-bound)"]
    m["must_not"] = [
        "a host-bound or launch-bound loop as the cause (the fallback's kernels are long; the host is ahead)",
        "the GEMMs as inefficient / cuBLAS tuning as the fix (they are the fallback's per-image GEMMs)",
        "channels_last or cuDNN autotuning (benchmark) as the top fix (cuDNN is off)",
        "data loading or host-to-device copies", "precision changes as the fix", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We train a small U-Net for semantic segmentation on one H200 ({Bu} crops of {Su} x {Su} per step, "
                     f"32 / 64 / 128 channels, BatchNorm, bf16 autocast, fused AdamW). The model has under half a "
                     f"million parameters, yet a training step takes tens of milliseconds and the GPU is busy the whole "
                     f"time. Where does the time go?")
    m["diagnosis"] = (f"Into PyTorch's fallback convolution: the script sets torch.backends.cudnn.enabled = False, so every "
                      f"convolution runs slow_conv2d, which loops over the {Bu} images and, per image, writes a column "
                      f"buffer 9 x C_in times the input (im2col_kernel), multiplies it in a thin GEMM, and in the backward "
                      f"does a GEMM into the columns, col2im_kernel, im2col_kernel again and a weight-gradient GEMM: "
                      f"{rng(b2, 'c.conv_slow_im2col_gemm', 0)} ms of a {rng(b2, 'step', 0)} ms step on the H200 "
                      f"(~{rng(b2, 'conv_share', 0)} %), {b2['columns_gb'][0]:.0f} GB of column traffic written per step. "
                      f"Re-enable cuDNN (and fix whatever made it fail originally): the convolutions become "
                      f"~{rng(b2, 'after_conv_ms', 1)} ms of implicit-GEMM kernels over the batch, a step "
                      f"~{rng(b2, 'after', 1)} ms, {rng(b2, 'share.cudnn_disabled', 0)} % of the step removed "
                      f"({band_of13(b2, 'share.cudnn_disabled')[0]}), {rng(b2, 'speedup', 1)}x.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q13["anchor"] + " with ANCHOR = im2col_kernel, C = "
                     f"{2 * len(un_convs()) * Bu} (10 convolutions x {Bu} images x (forward + weight gradient)), WARM = 3",
                     "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q13["kernels"],
                     "expect": f"im2col_kernel, col2im_kernel and GEMM kernels {rng(b2, 'c.conv_slow_im2col_gemm', 0)} ms "
                               f"per step together; no cudnn / xmma convolution kernels"}]
    m["new_cause"] = {"name": "cudnn_disabled", "why": "cuDNN switched off (torch.backends.cudnn.enabled = False, often "
                      "left from a workaround), so convolutions (and RNNs) fall back to PyTorch's native kernels: for "
                      "convolutions a per-image im2col / col2im + GEMM loop with 9x column buffers, several times slower "
                      "than cuDNN; fixed by re-enabling cuDNN"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- dense_retrieval (full_sort_topk) ---------------------------------------------------------------------------
    Qn, Np, kk = RET["queries"], RET["passages"], RET["k"]
    args = ["--queries", Qn, "--qlen", RET["qlen"], "--vocab", RET["vocab"], "--d-model", RET["d"], "--heads",
            RET["heads"], "--blocks", RET["blocks"], "--passages", Np, "--k", kk]
    b, b2, keys = ev(m_ret)
    bf2 = ev(lambda r: m_ret(r, fixed=True))[1]
    m = base("dense_retrieval", "dense_retrieval.py", "planted", args, steps=RET["steps"], est=40)
    m["uses"] = uses("bf16 (parameters and compute), float32 scores, inference", "none (inference, torch.inference_mode)",
                     attention=True, host_sync=EVENT_SYNC)
    m["uses"]["attention"] = "F.scaled_dot_product_attention, non-causal, 12 heads of 64, 32 tokens"
    m["uses"]["selection"] = (f"scores.argsort(dim=1, descending=True)[:, :{kk}] over [{Qn}, {Np}] float32, then a "
                              f"gather of the scores")
    m["techniques"] = techniques(
        f"select instead of sorting: scores.topk({kk}, dim=1) (a radix selection; its output comes back sorted), or an "
        f"approximate / fused top-k in the search library; a full argsort of {Np} passages to keep {kk} does ~9x the "
        f"memory traffic of the selection",
        ["CUDA graphs / launch overhead (GPU-bound)", "faster GEMMs / FP8 for the scores (a small part)",
         "flash attention (already SDPA; 32-token queries)", "a smaller encoder as the top fix",
         "pinned memory / data loading (queries and index on the GPU)", "torch.compile as the top fix",
         "an approximate-nearest-neighbour index as the only fix (the exact top-k is cheap with topk)"])
    m["planted"] = [planted13(
        "full_sort_topk", {"device": "GPU 0", "region": f"step_N > search: the argsort of the [{Qn}, {Np}] float32 "
                           f"scores (PyTorch's fill of int64 indices, then CUB's DeviceSegmentedRadixSort: one block per "
                           f"query row, 6 passes of 6 bits), of which only the first {kk} columns are used"},
        f"scores.topk({kk}, dim=1) (--fixed; not captured)", b, "rm.full_sort_topk", "share.full_sort_topk",
        f"{Qn} queries x {Np} passages = {b2['elements_m'][0]:.0f} M float32 scores per batch. The encoder "
        f"({b2['params_m'][0]:.0f} M parameters, {Qn} x {RET['qlen']} tokens: {rng(b2, 'c.encoder_gemm')} ms of GEMMs, "
        f"{rng(b2, 'c.encoder_elementwise')} ms elementwise, {rng(b2, 'c.encoder_attention')} ms attention), the scores "
        f"GEMM ({rng(b2, 'c.scores_gemm')} ms) and their cast to float32 ({rng(b2, 'c.scores_to_float32')} ms) are the "
        f"useful work. The argsort ranks every passage: ~{SEG_SORT_B:.0f} B per score (int64 index fill, 6 radix passes "
        f"each reading the keys twice and moving keys and int64 values), {b2['sort_gb'][0]:.0f} GB at 35-75 % of HBM: "
        f"{rng(b2, 'c.argsort_segmented_radix_sort')} ms. torch.topk selects the {kk} largest in ~{TOPK_B:.0f} B per "
        f"score at 50-85 % of HBM ({rng(b2, 'after_select_ms')} ms). Step {rng(b2, 'step')} ms (GPU-bound: host "
        f"{rng(b2, 'host_ms')} ms); with topk {rng(b2, 'after')} ms (GPU {rng(bf2, 'gpu_ms')} ms, host "
        f"{rng(bf2, 'host_ms')} ms: the fixed loop may become host-paced at the slow-host corner): removed "
        f"{rng(b2, 'rm.full_sort_topk')} ms = {rng(b2, 'share.full_sort_topk', 1)} % (H100 "
        f"{rng(b, 'share.full_sort_topk', 1)} %), {rng(b2, 'speedup', 1)}x. New cause name: full_sort_topk.",
        ["full_sort_topk", "sort_for_topk", "wasted_compute", "algorithm_inefficient"], b2)]
    m["tolerated"] = [{"what": "the float32 cast of the [512, 524288] scores", "cause": "elementwise_unfused",
                       "max_severity": "low"},
                      {"what": "the encoder's LayerNorm / GELU / residual kernels", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        "step_N > encode short: the 6-block encoder over 16 384 tokens",
        f"step_N > search dominated by DeviceSegmentedRadixSortKernel launches (one per radix pass, {Qn} blocks each) "
        f"after a fill kernel over {b2['elements_m'][0]:.0f} M int64 indices; the scores GEMM and cast before them",
        "a small gather and the result writes at the end; no host synchronization but the event wait"]
    m["must_not"] = [
        "the scores GEMM or the encoder as the main cost", "CUDA graphs / launch overhead as the fix (GPU-bound)",
        "data loading or host-to-device copies", "a host synchronization as the cause",
        "an approximate nearest-neighbour index as the only fix", "a modest problem (the sort is most of the batch)"]
    m["expect_quiet"] = False
    m["question"] = (f"We generate retrieval candidates offline on one H200: {Qn} queries per batch go through a 6-layer "
                     f"query encoder (d 768, bf16) and are scored against {Np} passage embeddings kept on the GPU; we "
                     f"keep the {kk} best passages per query. The encoder and the scoring matmul are cheap, yet a batch "
                     f"takes several times longer than they do. Where does the time go?")
    m["diagnosis"] = (f"Into ranking every passage to keep {kk}: the search step calls scores.argsort(dim=1, "
                      f"descending=True)[:, :{kk}] on the [{Qn}, {Np}] float32 scores, a full segmented radix sort "
                      f"(CUB DeviceSegmentedRadixSort, 6 passes moving float32 keys and int64 indices, "
                      f"~{b2['sort_gb'][0]:.0f} GB of traffic): {rng(b2, 'c.argsort_segmented_radix_sort', 0)} ms of a "
                      f"{rng(b2, 'step', 0)} ms batch on the H200 (~{rng(b2, 'sort_share', 0)} %). Use "
                      f"scores.topk({kk}, dim=1), which selects by radix in a few passes over the keys "
                      f"(~{rng(b2, 'after_select_ms', 1)} ms) and returns them sorted: ~{rng(b2, 'after', 1)} ms per "
                      f"batch, {rng(b2, 'share.full_sort_topk', 0)} % of the batch removed "
                      f"({band_of13(b2, 'share.full_sort_topk')[0]}), {rng(b2, 'speedup', 1)}x. The encoder and the "
                      f"scores GEMM are fine.")
    m["measure"] = [{"what": "step period", "query": Q13["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q13["kernels"],
                     "expect": f"DeviceSegmentedRadixSortKernel {rng(b2, 'c.argsort_segmented_radix_sort', 0)} ms per "
                               f"batch, most of the GPU time"},
                    {"what": "NVTX ranges", "query": Q13["nvtx_ranges"],
                     "expect": "search much longer than encode (on the GPU; the CPU ranges are short, the host is ahead)"}]
    m["new_cause"] = {"name": "full_sort_topk", "why": "a full sort (sort / argsort over a whole row) used to take the "
                      "first k of a large set (top-k retrieval, top-p sampling over a vocabulary, hard-negative mining): "
                      "every element moved through every radix pass with its int64 index, where a selection (topk) reads "
                      "the keys a few times; fixed by topk (or a fused / approximate top-k)"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- multilingual_lm (duplicate_index_backward) -----------------------------------------------------------------
    Bm, Sm, Vm, dm, Hm, Lm, nl = (ML[k] for k in ("batch", "seq", "vocab", "d", "heads", "blocks", "langs"))
    args = ["--batch", Bm, "--seq", Sm, "--vocab", Vm, "--d-model", dm, "--heads", Hm, "--blocks", Lm, "--langs", nl]
    b, b2, keys = ev(m_ml)
    bf2 = ev(lambda r: m_ml(r, fixed=True))[1]
    Tm = Bm * Sm
    m = base("multilingual_lm", "multilingual_lm.py", "planted", args, steps=ML["steps"], est=45)
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", attention=True,
                     sequences=f"{Bm} sequences of {Sm} tokens, one language per batch (no padding)",
                     host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, is_causal=True, {Hm} heads of {dm // Hm}"
    m["uses"]["language_embedding"] = (f"nn.Parameter [{nl}, {dm}] read as lang_table[lang_ids], lang_ids [{Bm}, {Sm}] "
                                       f"all equal within a batch")
    m["techniques"] = techniques(
        "read the language table with F.embedding(lang_ids, lang_table) (nn.Embedding) or index_select, whose backward "
        "sums duplicate indices in parallel, instead of advanced indexing (index_put_ with accumulate walks each run of "
        "equal indices serially); or add the language vector per sequence (lang_table[seq_lang][:, None, :], "
        f"broadcast over the {Sm} positions) so the lookup has {Bm} indices, not {Tm}",
        ["CUDA graphs / launch overhead (GPU-bound)", "FP8 / precision changes as the top fix",
         "faster GEMMs / kernel tuning (they run at their rate)", "fused optimizer (already)",
         "flash attention (already SDPA, causal)", "activation checkpointing",
         "deterministic-algorithm settings as the cause (none are set)", "data loading (ids on the GPU)"])
    m["planted"] = [planted13(
        "duplicate_index_backward", {"device": "GPU 0", "region": f"step_N > backward, at its end (the embeddings' "
                                     f"backward): one indexing_backward_kernel for lang_table[lang_ids], {Tm} sorted "
                                     f"indices all equal, walked serially by {dm // 128} warps (one per 128 features), "
                                     f"the rest of its {Tm // 4 * (dm // 128)} blocks exiting at once"},
        "F.embedding(lang_ids, lang_table) (--fixed; not captured)", b, "rm.duplicate_index_backward",
        "share.duplicate_index_backward",
        f"{b2['params_m'][0]:.0f} M parameters (head tied), {Tm} tokens per step. The model: block GEMMs "
        f"{rng(b2, 'c.block_gemm_bf16')} ms at 550-800, causal attention {rng(b2, 'c.attention_causal')} ms, "
        f"elementwise {rng(b2, 'c.block_elementwise')} ms, head {rng(b2, 'c.lm_head_gemm')} ms and fp32 cross-entropy "
        f"{rng(b2, 'c.cross_entropy_fp32')} ms over {Vm} classes, embeddings, casts, AdamW "
        f"({rng(b2, 'c.adamw_fused_fp32')} ms) on an H200. The language table's advanced-indexing backward is "
        f"index_put_(accumulate=True): a radix sort of the {Tm} indices, then indexing_backward_kernel, where the warp "
        f"that owns the first index of a run loops over every duplicate, loading its gradient row chunk and "
        f"reading-adding-writing the accumulated row, one duplicate after another; with one language per batch the run "
        f"is {Tm} long and only {dm // 128} warps work: {Tm} x 1.6-3.0 µs (the per-duplicate time measured at 2.3 µs in "
        f"heldout12) = {rng(b2, 'c.language_index_backward_serial')} ms. F.embedding's backward splits the run into "
        f"segments of 10 rows summed in parallel: {rng(b2, 'after_lookup_ms', 3)} ms. Step {rng(b2, 'step')} ms "
        f"(GPU-bound: host {rng(b2, 'host_ms')} ms); fixed {rng(b2, 'after')} ms: removed "
        f"{rng(b2, 'rm.duplicate_index_backward')} ms = {rng(b2, 'share.duplicate_index_backward', 1)} % (H100 "
        f"{rng(b, 'share.duplicate_index_backward', 1)} %). New cause name: duplicate_index_backward.",
        ["duplicate_index_backward", "serialized_index_accumulate", "kernel_inefficient", "scatter_contention"], b2)]
    m["tolerated"] = [{"what": "the fp32 cross-entropy over 16384 x 64000 logits and the LayerNorm / cast / residual "
                               "kernels (memory-bound)", "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "autocast's per-step weight casts", "cause": "autocast_weight_cast", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "GEMMs, causal SDPA and elementwise kernels as in any GPT-style step, GPU-bound",
        f"near the end of step_N > backward, one indexing_backward_kernel lasting "
        f"{rng(b2, 'c.language_index_backward_serial', 0)} ms (grid {Tm // 4} x {dm // 128} blocks of 32 x 4 threads), "
        f"after a small radix sort; nothing else runs while it does",
        "the embedding's own backward (embedding_dense_backward kernels) short"]
    m["must_not"] = [
        "the GEMMs or attention as the cause", "CUDA graphs / launch overhead (GPU-bound)",
        "a host synchronization or host-bound step as the cause",
        "torch.use_deterministic_algorithms or atomics contention as the cause (the kernel is the sort-based path, "
        "serial by design)", "the optimizer as the problem (fused)", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We pre-train a {b2['params_m'][0]:.0f} M-parameter multilingual GPT-style model on one H200 "
                     f"({Lm} blocks of d {dm}, {Bm} x {Sm} tokens per step, bf16 autocast, fused AdamW, a language "
                     f"embedding added to every token). The step is well above what the model's FLOPs suggest, and the "
                     f"backward looks longer than it should. What is taking the time?")
    m["diagnosis"] = (f"One kernel at the end of the backward: the language embedding is read as lang_table[lang_ids] "
                      f"(advanced indexing on an [{nl}, {dm}] parameter with [{Bm}, {Sm}] ids), whose backward is "
                      f"index_put_ with accumulate: after sorting the {Tm} indices, indexing_backward_kernel has one warp "
                      f"per 128 features walk each run of equal indices serially, and since every batch is in one "
                      f"language all {Tm} indices are equal: {dm // 128} warps, {Tm} dependent steps each, "
                      f"{rng(b2, 'c.language_index_backward_serial', 0)} ms of a {rng(b2, 'step', 0)} ms step on the "
                      f"H200. Use F.embedding(lang_ids, lang_table) (or nn.Embedding / index_select), whose backward "
                      f"sums duplicates in parallel (~{rng(b2, 'after_lookup_ms', 2)} ms), or add the language vector per "
                      f"sequence: ~{rng(b2, 'after', 0)} ms per step, {rng(b2, 'share.duplicate_index_backward', 0)} % "
                      f"removed ({band_of13(b2, 'share.duplicate_index_backward')[0]}). The GEMMs, attention and the "
                      f"rest of the step are normal.")
    m["measure"] = [{"what": "step period", "query": Q13["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q13["kernels"],
                     "expect": f"indexing_backward_kernel once per step, {rng(b2, 'c.language_index_backward_serial', 0)} "
                               f"ms"}]
    m["new_cause"] = {"name": "duplicate_index_backward", "why": "a gather by advanced indexing (table[idx]) whose "
                      "indices repeat massively (a few rows looked up by every token): its backward, index_put_ with "
                      "accumulate, sorts the indices and walks each run of duplicates serially in one warp per 128 "
                      "features, so one long run becomes one long latency-bound kernel; fixed by F.embedding / "
                      "index_select (parallel duplicate reduction) or by looking up once per sequence and broadcasting"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- vit_ddp (redundant_allreduce; 2 ranks) ---------------------------------------------------------------------
    Bv, dv, Hv, Lv = VD["batch"], VD["d"], VD["heads"], VD["blocks"]
    args = ["--batch", Bv, "--image", VD["image"], "--patch", VD["patch"], "--d-model", dv, "--heads", Hv, "--blocks", Lv,
            "--classes", VD["classes"]]
    b, b2, keys = ev(m_vd)
    bf2 = ev(lambda r: m_vd(r, fixed=True))[1]
    n_t = vd_tensors()
    m = base("vit_ddp", "vit_ddp.py", "planted", args, steps=VD["steps"], est=60, ranks=VD["ranks"])
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", attention=True, ddp=True, host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, non-causal, {Hv} heads of {dv // Hv}, 197 tokens"
    m["uses"]["gradient_sync"] = ("DDP defaults (25 MB buckets, overlapped with the backward), then a legacy helper: "
                                  "_flatten_dense_tensors of all .grad, dist.all_reduce, div_(world), copy back")
    m["techniques"] = techniques(
        "delete the leftover averaging helper: DistributedDataParallel has already averaged the gradients during the "
        "backward, so the second flat all-reduce (and its flatten, divide and copy-back) recomputes the same values",
        ["larger / fewer buckets or gradient_as_bucket_view as the top fix (DDP's own all-reduce is hidden)",
         "gradient compression hooks (bf16 / PowerSGD) as the fix", "no_sync / gradient accumulation",
         "a straggler rank (the ranks are symmetric)", "NCCL settings / a faster interconnect",
         "CUDA graphs / launch overhead", "FSDP / ZeRO as the fix", "data loading (data on the GPU)"])
    m["planted"] = [planted13(
        "redundant_allreduce", {"ranks": [0, 1], "region": f"step_N > backward, after loss.backward() returns: one cat of "
                                f"all {n_t} gradients into a {b2['grad_gb'][0]:.2f} GB fp32 buffer, one all-reduce of it "
                                f"(after DDP's last bucket, on the same NCCL stream), a div and {n_t} small copies back "
                                f"into .grad; the optimizer waits for them"},
        "no second all-reduce (--fixed; not captured)", b, "rm.redundant_allreduce", "share.redundant_allreduce",
        f"{b2['params_m'][0]:.0f} M parameters in {n_t} tensors, {Bv} images x 197 tokens per rank. Compute per rank "
        f"(same either way): GEMMs {rng(b2, 'gemm_ms')} ms at 550-800, attention over 197 tokens "
        f"{rng(b2, 'attention_ms')} ms, elementwise {rng(b2, 'elementwise_ms')} ms, casts, DDP's bucket copies: forward "
        f"{rng(b2, 'c.forward')} ms, backward {rng(b2, 'backward_ms')} ms on an H200. DDP all-reduces the "
        f"{b2['grad_gb'][0]:.2f} GB of fp32 gradients in {b2['buckets'][0]:.0f} buckets during the backward "
        f"({rng(b2, 'allreduce_ms')} ms at 200-300 GB/s, hidden but for {rng(b2, 'c.ddp_allreduce_exposed', 2)} ms). "
        f"The helper then flattens them ({rng(b2, 'c.second_allreduce_flatten')} ms), all-reduces "
        f"{b2['grad_gb'][0]:.2f} GB again with nothing left to overlap ({rng(b2, 'c.second_allreduce_nccl')} ms), "
        f"divides and copies back ({rng(b2, 'c.second_allreduce_div_copy_back')} ms): {rng(b2, 'second_ms')} ms on the "
        f"critical path of both ranks. Step {rng(b2, 'step')} ms (host {rng(b2, 'host_ms')} ms); without the helper "
        f"{rng(b2, 'after')} ms: removed {rng(b2, 'rm.redundant_allreduce')} ms = "
        f"{rng(b2, 'share.redundant_allreduce', 1)} % (H100 {rng(b, 'share.redundant_allreduce', 1)} %). New cause "
        f"name: redundant_allreduce.",
        ["redundant_allreduce", "duplicate_allreduce", "redundant_communication", "exposed_communication"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / cast / GELU / residual kernels under autocast (memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "high"},
                      {"what": "DDP's bucket copies into and out of the buckets (default gradient_as_bucket_view=False)",
                       "cause": "copy_bound", "max_severity": "low"},
                      {"what": "autocast's per-step weight casts", "cause": "autocast_weight_cast", "max_severity": "low"},
                      {"what": "SDPA on 197-token sequences (partly empty tiles)", "cause": "grid_underutilized",
                       "max_severity": "medium"}]
    m["expected_in_trace"] = [
        "both ranks alike (no straggler)",
        f"~{b2['buckets'][0]:.0f} ncclDevKernel_AllReduce kernels of ~25 MiB per step and rank during step_N > backward, "
        f"overlapped with the backward's kernels",
        f"then, still inside step_N > backward, one more AllReduce of {b2['grad_gb'][0]:.2f} GB "
        f"({rng(b2, 'c.second_allreduce_nccl', 1)} ms) with the compute stream idle, framed by a cat kernel before it and "
        f"a div and {n_t} copy kernels after it",
        "fused AdamW starting only after those copies"]
    m["must_not"] = [
        "a straggler or imbalanced rank", "the compute (GEMMs, attention) as the cause",
        "DDP's bucketed all-reduce as exposed or too slow (it is hidden in the backward)",
        "bucket size, gradient_as_bucket_view or compression hooks as the main fix",
        "NCCL / NVLink as slow (the all-reduce runs at NVLink speed)", "data loading or host-to-device copies",
        "a critical or high problem (the second all-reduce is a modest share)"]
    m["expect_quiet"] = False
    m["question"] = (f"We train a ViT-L/16 classifier ({b2['params_m'][0]:.0f} M parameters) with DDP on 2 H200s over "
                     f"NVLink, {Bv} images per GPU, bf16 autocast, fused AdamW. Scaling from one GPU to two looks a "
                     f"bit worse than we hoped. Is anything in the 2-GPU step worth fixing?")
    m["diagnosis"] = (f"One modest thing: after loss.backward() the step still runs the pre-DDP trainer's gradient "
                      f"averaging helper, which flattens all {n_t} gradients, all-reduces the "
                      f"{b2['grad_gb'][0]:.1f} GB buffer, divides and copies it back: DDP had already averaged them "
                      f"during the backward (its {b2['buckets'][0]:.0f} bucket all-reduces are hidden), so this second "
                      f"all-reduce recomputes the same values with nothing to overlap: "
                      f"~{rng(b2, 'second_ms', 1)} ms of a {rng(b2, 'step', 0)} ms step on each rank. Delete the helper: "
                      f"~{rng(b2, 'after', 0)} ms ({rng(b2, 'share.redundant_allreduce', 1)} %, "
                      f"{band_of13(b2, 'share.redundant_allreduce')[0]}). The ranks are balanced, DDP's own "
                      f"communication is overlapped, and the rest of the step is GEMMs, attention and the memory-bound "
                      f"elementwise kernels of an autocast ViT.")
    m["measure"] = [{"what": "step period per rank", "query": Q13["step"] + " (both ranks)", "expect_ms": r2(b2["step"])},
                    {"what": "NCCL kernels", "query": Q13["nccl"],
                     "expect": f"~{b2['buckets'][0]:.0f} bucket all-reduces plus one of {b2['grad_gb'][0]:.2f} GB "
                               f"({rng(b2, 'c.second_allreduce_nccl', 1)} ms) per step and rank"},
                    {"what": "NCCL vs compute", "query": Q13["split"],
                     "expect": "an NCCL-only stretch of a few ms at the end of every backward"}]
    m["new_cause"] = {"name": "redundant_allreduce", "why": "gradients (or other state) all-reduced a second time after "
                      "DistributedDataParallel already synchronized them (a leftover manual averaging helper, an EMA "
                      "or metric all-reduce of replicated values): the same bytes cross the interconnect twice, the "
                      "second time exposed; fixed by deleting the redundant collective"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.h200_table)
