#!/usr/bin/env python3
"""First-principles truth for the twelfth held-out set (heldout12): writes heldout12/manifests/<case>.json from FLOPs,
bytes, call counts and rate bands alone (no capture, no aisp output, no GPU run), with the helpers of ../derive.py.

    python3 workloads/planted/heldout12/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout12/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout12/derive.py --table    # the table only

Method: as ../derive.py and heldout11/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, calls x a host cost per call, or (for the one autotuned kernel) the benchmark loop's own time
budget; a quantity's band is its min and max over the corners of the bands it uses. Shares are "time the fix removes
from the critical path / steady step period" of the GPU (for the 2-rank case: of either rank, the ranks being
symmetric).

Severity (as heldout11): info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical; each planted problem also
carries `severity_legacy` under the bands of the earlier sets (info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 %
<= critical), so that both readings are on record.

Made for H200s, like heldout11: four one-GPU programs, one of them with a captured fixed variant (a before/after pair),
and one 2-rank DDP program (torchrun --nproc_per_node=2): the set needs an nvidia-h200-x2 host for its multi phase. Every
model gives the host time of a step (Python ops x eager_op_us + backward nodes x bwd_node_us) beside the GPU time and
takes the larger, so that a GPU-bound case is checked at every corner (host_margin_ms). Software assumed: the capture
image's PyTorch 2.1x with cuDNN 9 and the Triton that ships with it, on sm_90.
"""
import math
import os
import random

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

SET = "heldout12"

# ---------------------------------------------------------------------------------------------------
# Severity bands (heldout11's; see the docstring).
BANDS12 = [(1.0, "info"), (3.0, "low"), (10.0, "medium"), (25.0, "high"), (math.inf, "critical")]
SEV_DOC12 = ("info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical, of the device's steady step period "
             "(severity_legacy: the earlier sets' info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical)")


def band12(p):
    for edge, name in BANDS12:
        if p < edge:
            return name
    return "critical"


def band_of12(b, key):
    lo, hi = b[key]
    return band12((lo + hi) / 2), [band12(lo), band12(hi)]


# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; fractions as named.
NEW_H100 = {
    # copied from heldout2-11 (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "eager_op_us": (20.0, 70.0),
    "tiny_kernel_us": (2.0, 6.0),
    "bwd_node_us": (10.0, 30.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    "nccl_small_gpu_us": (8.0, 25.0),
    "ddp_hook_us": (2.0, 5.0),
    "conv_stem_tflops": (40.0, 150.0),
    # new here
    "shm_ar2_algbw_gbs": (8.0, 30.0),
    "ew_amp_block_b": (140.0, 220.0),
    "ce_fp32_b": (30.0, 42.0),
    "gather_eff": (0.5, 0.9),
    "ln_block_gels": (0.6, 4.0),
    "conv_nchw_tflops": (120.0, 400.0),
    "nchw_xform_passes": (0.0, 1.0),
    "red_eff": (0.6, 0.9),
    "ln_gelu_eff": (0.6, 0.9),
    "bench_host_ms": (1.0, 6.0),
    "bench_iter_host_us": (30.0, 150.0),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 2048 or less (or a varying M): below the 8192^3 rate (732-787 "
                       "measured) as tiles and waves shrink and the epilogue's writes weigh more; an assumption widened "
                       "down to 550 (heldout2-11). Used for every GEMM whose smallest dimension is <= 2048; bf16_tflops "
                       "for the others",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing: 29-36 µs "
                   "measured (quoted by ../derive.py), ~70 implied by heldout2; band 20-70 (heldout3-11)",
    "tiny_kernel_us": "GPU time of one tiny kernel (a scalar op, a reduction over a few thousand elements) in a chain of "
                      "dependent kernels, including the launch latency to the next one when the host is ahead: 2-6 µs "
                      "(assumption of heldout7-11)",
    "bwd_node_us": "host time of one backward node in the C++ autograd engine (the node's function, 1-3 kernel launches "
                   "at 4-10 µs under CUPTI, the ready-queue bookkeeping): 10-30 µs (assumption of heldout9-11)",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: "
                     "torch busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (quoted by heldout2/derive.py); "
                     "band 200-300 (heldout3-11)",
    "nccl_small_gpu_us": "fixed GPU time of one NCCL collective on 2 H200 (launch, the protocol's handshakes), charged "
                         "once per DDP bucket on top of its bytes: 8-25 µs (heldout11's band for tiny collectives)",
    "ddp_hook_us": "host time of DDP's autograd hook per parameter (marking it ready in its bucket): 2-5 µs "
                   "(heldout11)",
    "conv_stem_tflops": "cuDNN convolutions with 3 input or 3 output channels (K or N = 27 after im2col, padded): "
                        "40-150 (heldout11's stem band)",
    "shm_ar2_algbw_gbs": "NCCL all-reduce on 2 ranks of one host when peer-to-peer is disabled (NCCL_P2P_DISABLE=1): the "
                         "SHM transport, each rank's GPU writing into and reading from pinned host memory over its own "
                         "PCIe Gen5 x16 link (~55 GB/s DMA, less for SM loads and stores across PCIe) with a CPU-visible "
                         "flag handshake per chunk; PCIe-only 2-GPU systems show 10-25 GB/s busbw in nccl-tests, and for "
                         "n = 2 algbw = busbw: band 8-30 (assumption). Were /dev/shm too small for NCCL's buffers, NCCL "
                         "would fail or fall back to sockets (slower still); the run's own CUDA-event step says which",
    "ew_amp_block_b": "bytes per token x d_model per transformer block of the elementwise work around the GEMMs under bf16 "
                      "autocast with an fp32 residual stream: LayerNorms in fp32 (forward r4 w4, backward ~r4 r4 w4 plus "
                      "the weight-gradient reduction), the casts of their outputs to bf16 (r4 w2) and back in the "
                      "backward, residual adds in fp32, GELU on the 4 x d hidden (bf16, forward r2 w2, backward r2 r2 "
                      "w2), the head-merge copy and q/k/v gradient stacking: 140-220 (heldout2's 112 for pure bf16, "
                      "scaled up for the fp32 stream; assumption)",
    "ce_fp32_b": "bytes per logit of F.cross_entropy under bf16 autocast (autocast runs it in float32): the cast of the bf16 "
                 "logits (r2 w4), log_softmax (r4 w4, its row re-read partly from L2), nll, and the backward (zero fill, "
                 "log_softmax backward r4 r4 w4, the cast back r4 w2): 30-42 (heldout3's lm_head_ce counted 36-42)",
    "gather_eff": "fraction of the HBM rate reached by row gathers and index_put accumulations of 4 KB bf16 rows "
                  "(advanced indexing forward, its sort-based backward) and by the torch.cat copies around them: 0.5-0.9 "
                  "(assumption)",
    "ln_block_gels": "elements per second that ONE thread block of PyTorch's CUDA LayerNorm kernels processes in one pass "
                     "over its row: the forward (vectorized_layer_norm_kernel) and the input-gradient kernel "
                     "(layer_norm_grad_input_kernel[_vectorized]) launch one 128-thread block per row (grid = M rows) "
                     "and make two passes over it (statistics, then output); with one block of 4 warps on an SM there is "
                     "no other work to hide memory latency, so a pass runs at (128 threads x 4 elements x 1-4 loads in "
                     "flight) / (0.5-0.8 µs latency) ~ 0.6-4 G elements/s (the second pass partly from L2), below the "
                     "~8 G elements/s its Welford arithmetic allows; band 0.6-4.0 G elements/s (Little's law; "
                     "assumption). Kernel structure read from PyTorch's aten/src/ATen/native/cuda/layer_norm_kernel.cu",
    "conv_nchw_tflops": "cuDNN bf16 3 x 3 convolutions with 64 channels on NCHW tensors at 192 x 192 x 16 images "
                        "(implicit GEMMs with K = 576, N = 64: narrow tiles), forward, data gradient and weight gradient "
                        "alike: 120-400 (heldout11's channels_last 180-450 widened down for NCHW and the narrow N; "
                        "assumption; each pass also bounded below by its bytes at hbm_tbs)",
    "nchw_xform_passes": "extra read + write passes of each convolution's input and output that cuDNN may spend "
                         "transposing NCHW to its preferred NHWC layout and back: 0-1 per pass (assumption)",
    "red_eff": "fraction of the HBM rate reached by torch.var_mean over (C, H, W) with 16 outputs (PyTorch splits each "
               "2.36 M-element reduction across many blocks) and by the broadcasting elementwise kernels of the "
               "rewritten normalization and their backward: 0.6-0.9 (assumption)",
    "ln_gelu_eff": "fraction of the HBM rate reached by the Triton LayerNorm + GELU kernel (bf16 rows of 1024, one read "
                   "and one write per element) over its four configurations: 0.6-0.9 (assumption)",
    "bench_host_ms": "host time per autotuned configuration outside the timed loops: triton.testing.do_bench's "
                     "synchronizations, creating ~2 x 300 CUDA events and reading ~300 elapsed times, the quantiles: "
                     "1-6 ms (assumption)",
    "bench_iter_host_us": "host time of one timed iteration of do_bench: cache.zero_() on the 256 MiB L2-flush buffer (an "
                          "eager op), two event records and the Triton launch through the autotuner: 30-150 µs "
                          "(assumption; it only matters if it exceeds the iteration's GPU time)",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q12 = dict(Q)
Q12.update({
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


EW_ATTN_B = 72.0  # bytes per token x d per block of the non-FFN elementwise work of a pure-bf16 block (heldout2's 112
# less its GELU on 4 x d: forward r2 w2 and backward r2 r2 w2, 40): LayerNorms, residual adds, head-merge copies, q/k/v
# gradient stacking

# ---------------------------------------------------------------------------------------------------
# moe_lm: vocab 32768, d 2048, 4 blocks (16 heads of 128, causal SDPA, biases, bf16), each FFN a mixture of 8 GELU experts
# 2048 -> 8192 -> 2048 with top-2 routing; untied head; 4 x 2048 tokens per step; fused AdamW. Every expert runs on every
# token (dense gates) unless fixed (capacity-based dispatch, capacity factor 1.25, batched matmuls).
MOE = dict(batch=4, seq=2048, vocab=32768, d=2048, heads=16, blocks=4, experts=8, top_k=2, d_ff=8192, cf=1.25,
           steps=20, steps_fixed=25)
MOE_BLOCK_OPS = 18          # ln1, qkv, split, 3 views, 3 transposes, sdpa, transpose, reshape, proj, add, ln2, view, view,
# add
MOE_DENSE_OPS = 10 + 6 * 8  # router, float, softmax, topk, sum, div, to, zeros, scatter, zeros_like; per expert a gate
# slice, fc1, gelu, fc2, mul, add
MOE_DISPATCH_OPS = 47       # route (7), the slot arithmetic (t, reshape, one_hot, cumsum, sub, index, gather, squeeze, lt,
# invert, sum, mul, add, where, full, arange, remainder, scatter_: 18), the gather (new_zeros, cat, slice, index, view),
# the experts (2 transposes, 2 baddbmm, gelu, view), the combine (new_zeros, cat, index, view, t, unsqueeze, mul, sum)
MOE_OTHER_OPS = 18          # batch slices, embedding, norm, head, views, cross-entropy, backward call, fused AdamW (~3),
# zero_grad, loss copy, event record and wait
MOE_BWD_ATTN = 20           # backward nodes per block outside the FFN: LayerNorms, addmm + t, SDPA, views, split, adds
MOE_BWD_DENSE = 9 + 8 * 8   # router nodes, scatter; per expert: slice, 2 x (addmm + t), gelu, mul, add
MOE_BWD_DISPATCH = 25       # router nodes, index / cat / view nodes, 2 baddbmm + transposes, gelu, mul, sum


def moe_params(fixed=False):
    d, f, E, L, V = (MOE[k] for k in ("d", "d_ff", "experts", "blocks", "vocab"))
    block = 4 * d + 3 * d * d + 3 * d + d * d + d + d * E + E + E * (d * f + f + f * d + d)
    return float(V * d + L * block + 2 * d + d * V + V)


def moe_capacity():
    T = MOE["batch"] * MOE["seq"]
    return int(math.ceil(MOE["cf"] * T * MOE["top_k"] / MOE["experts"]))


def m_moe(r, fixed=False):
    B, S, V, d, L, E, k, f = (MOE[x] for x in ("batch", "seq", "vocab", "d", "blocks", "experts", "top_k", "d_ff"))
    T = float(B * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P = moe_params(fixed)
    c = {"attn_proj_gemm_bf16": L * (gemm(r, T, d, 3 * d, 3.0) + gemm(r, T, d, d, 3.0)),
         "attention_causal": t_flops(L * 7.0 * B * S * S * d, r["attn_tflops"]),
         "router": L * gemm(r, T, d, E, 3.0) + L * 12 * tiny,
         "lm_head_gemm": gemm(r, T, d, V, 3.0),
         "layernorm_residual_copies": t_bytes((L * EW_ATTN_B + 14.0) * T * d, hbm),
         # bf16 logits: log_softmax r2 w2, its backward r2 r2 w2, the NLL gradient's zero fill w2 (and a scatter)
         "cross_entropy_bf16": t_bytes(12.0 * T * V, hbm) + 4 * tiny,
         # gather r2 w2; backward: the table's gradient zero-filled (w2 V x d) and the rows summed in (~8 B per token x d)
         "embedding": t_bytes(4.0 * T * d + 2.0 * V * d + 8.0 * T * d, hbm) + 12 * tiny,
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    if fixed:
        EC = float(E * moe_capacity())
        c["experts_bmm"] = L * (gemm(r, EC, d, f, 3.0) + gemm(r, EC, f, d, 3.0))
        # GELU on [E x C, f] (forward r2 w2, backward r2 r2 w2); baddbmm's broadcast bias copied into the output before
        # the GEMM (w2, read back r2) and its gradient (a reduction, r2), on both matmuls
        c["experts_gelu_bias"] = L * t_bytes(10.0 * EC * f + 6.0 * EC * (f + d), hbm)
        # dispatch: cat (r2 w2 T x d), gather into [E, C, d] (r2 w2), its sort-based backward (zero fill, rows summed
        # back, ~8 B per gathered row element); combine: cat (r2 w2 E C x d), gather of each token's k outputs (r2 w2),
        # the gate multiply and the sum over k, their backward (gate gradient reduction, the index_put back into
        # [E C, d] with its zero fill): ~18 B x E C d + 30 B x k T d + 8 B x T d in all
        c["dispatch_combine"] = L * t_bytes(18.0 * EC * d + 30.0 * k * T * d + 8.0 * T * d,
                                            hbm * r["gather_eff"]) + L * 20 * tiny
        ops = L * (MOE_BLOCK_OPS + MOE_DISPATCH_OPS) + MOE_OTHER_OPS
        nodes = L * (MOE_BWD_ATTN + MOE_BWD_DISPATCH) + 10
    else:
        c["experts_dense_gemm"] = L * E * (gemm(r, T, d, f, 3.0) + gemm(r, T, f, d, 3.0))
        # per expert and block: GELU on [T, f] (10 B), the two bias gradients (r2 over [T, f] and [T, d]), the gate
        # multiply (forward r2 w2, backward: grad x gate r2 w2, the gate's gradient r2 r2 -> 12 B x T x d), the running
        # sum (r2 r2 w2) and the summation of the 8 input gradients into x's (r2 r2 w2)
        c["experts_dense_elementwise"] = L * E * t_bytes(10.0 * T * f + 2.0 * T * (f + d) + 12.0 * T * d + 6.0 * T * d
                                                         + 6.0 * T * d, hbm) + L * E * 2 * tiny
        ops = L * (MOE_BLOCK_OPS + MOE_DENSE_OPS) + MOE_OTHER_OPS
        nodes = L * (MOE_BWD_ATTN + MOE_BWD_DENSE) + 10
    gpu = sum(c.values())
    host = ops * r["eager_op_us"] / 1e3 + nodes * r["bwd_node_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "params_b": P / 1e9, "tokens": T}, gpu, host)
    if fixed:
        out["expert_share"] = pct(c["experts_bmm"], step)
        out["gemm_share"] = pct(c["experts_bmm"] + c["attn_proj_gemm_bf16"] + c["lm_head_gemm"], step)
        out.update({"rm": {}, "share": {}, "after": None, "expert_tflop": L * 12.0 * EC * d * f / 1e12})
        return out
    out["expert_share"] = pct(c["experts_dense_gemm"], step)
    out["expert_tflop"] = L * E * 12.0 * T * d * f / 1e12
    fx = m_moe(r, fixed=True)
    rm = {"moe_dense_dispatch": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "after_expert_share": fx["expert_share"],
                "after_gemm_share": fx["gemm_share"]})
    return out


# ---------------------------------------------------------------------------------------------------
# lm_ddp: 2 ranks, vocab 32768 (head tied to the embedding), learned positions, d 2048, 8 blocks (16 heads of 128, GELU MLP
# 4x, biases), bf16 autocast over fp32 weights, fused AdamW, DDP defaults; 8 x 1024 tokens per rank. NCCL_P2P_DISABLE=1
# (the SHM transport through host memory) unless fixed.
DDPC = dict(batch=8, seq=1024, vocab=32768, d=2048, heads=16, blocks=8, ranks=2, steps=20)
DDP_BUCKET_B = 25 * 2 ** 20
DDP_BLOCK_OPS = 28          # ln1, qkv, split, 3 views, 3 transposes, sdpa, transpose, reshape, proj, add, ln2, fc1, gelu,
# fc2, add (20) and autocast's casts of the 4 weights and of the LayerNorm outputs (8)
DDP_OTHER_OPS = 24          # batch slices, DDP's forward prologue (~5), embedding, position slice, add, norm, tied head
# (+ casts), views, cross-entropy (+ cast), backward call, fused AdamW (~3), zero_grad, loss copy, event record and wait
DDP_BWD_BLOCK = 33          # backward nodes per block: LayerNorms, addmm + t (4), SDPA, GELU, adds, views / transposes /
# split, the autocast casts' ToCopy nodes


def ddp_params():
    V, S, d, L = (DDPC[k] for k in ("vocab", "seq", "d", "blocks"))
    return float(V * d + S * d + L * (12 * d * d + 13 * d) + 2 * d)


def ddp_block_params():
    d = DDPC["d"]
    return float(12 * d * d + 13 * d)


def m_ddp(r, fixed=False):
    B, S, V, d, L = (DDPC[k] for k in ("batch", "seq", "vocab", "d", "blocks"))
    T = float(B * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P, Pb = ddp_params(), ddp_block_params()
    g_blk = gemm(r, T, d, 3 * d, 3.0) + gemm(r, T, d, d, 3.0) + gemm(r, T, d, 4 * d, 3.0) + gemm(r, T, 4 * d, d, 3.0)
    a_blk = t_flops(7.0 * B * S * S * d, r["attn_tflops"])
    e_blk = t_bytes(r["ew_amp_block_b"] * T * d, hbm)
    head = gemm(r, T, d, V, 3.0)
    ce = t_bytes(r["ce_fp32_b"] * T * V, hbm) + 4 * tiny
    # embedding + positions: gather r4 w4, the add r4 r4 w4; backward: the position gradient (a sum over the batch, r4),
    # the token rows summed into a zero-filled fp32 [V, d] gradient (w4 V d, r4 w4 rows) and added to the tied head's
    # weight gradient (r4 r4 w4 V d)
    emb_f = t_bytes(20.0 * T * d, hbm) + 3 * tiny
    emb_b = t_bytes(12.0 * T * d + 16.0 * V * d, hbm) + 8 * tiny
    cast = lambda n: t_bytes(6.0 * n, hbm)  # autocast's weight cast (forward r4 w2) or its gradient's (backward r2 w4)
    copy_in = lambda n: t_bytes(8.0 * n, hbm)  # DDP: a gradient copied into its bucket (r4 w4)
    fwd = L * (g_blk / 3.0 + a_blk * 2.0 / 7.0 + 0.4 * e_blk) + head / 3.0 + 0.4 * ce + emb_f + cast(P)
    head_b = 2.0 * head / 3.0 + 0.6 * ce + cast(V * d) + copy_in(2 * d)
    blk_b = 2.0 * g_blk / 3.0 + a_blk * 5.0 / 7.0 + 0.6 * e_blk + cast(Pb) + copy_in(Pb)
    emb_bb = emb_b + copy_in(V * d + S * d)
    bwd = head_b + L * blk_b + emb_bb
    # gradient-ready groups in DDP's rebuilt bucket order (the order gradients became ready in the first step): each block
    # once its backward ends, then the positions and the tied embedding (its gradient completes only after the embedding's
    # backward); each group in 25 MiB buckets, all-reduced one after another on NCCL's stream
    algbw = r["ar2_algbw_gbs"] if fixed else r["shm_ar2_algbw_gbs"]
    lat = r["nccl_small_gpu_us"] / 1e3
    groups = [(head_b + (i + 1) * blk_b, 4.0 * Pb) for i in range(L)] + [(bwd, 4.0 * (V * d + S * d + 2 * d))]
    free, comm_total = 0.0, 0.0
    for ready, nbytes in groups:
        n_buckets = max(1, math.ceil(nbytes / DDP_BUCKET_B))
        dur = t_link(nbytes, algbw) + n_buckets * lat
        free = max(free, ready) + dur
        comm_total += dur
    # compute slowed by NCCL kernels running beside it (SMs and HBM shared), on the part of the backward they overlap
    bwd_pen = bwd + r["overlap_penalty"] * min(bwd, comm_total)
    comm_end = max(free, bwd_pen)
    exposed = comm_end - bwd_pen
    copy_back = t_bytes(8.0 * P, hbm)  # DDP copies the averaged buckets back into .grad (r4 w4)
    opt = t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny
    gpu_step = fwd + bwd_pen + exposed + copy_back + opt
    ops = L * DDP_BLOCK_OPS + DDP_OTHER_OPS
    params_n = L * 12 + 5
    host = ops * r["eager_op_us"] / 1e3 + (L * DDP_BWD_BLOCK + 15) * r["bwd_node_us"] / 1e3 \
        + params_n * r["ddp_hook_us"] / 1e3
    step = max(gpu_step, host)
    c = {"forward": fwd, "backward_compute": bwd_pen, "allreduce_exposed_after_backward": exposed,
         "bucket_copy_back": copy_back, "adamw_fused_fp32": opt}
    if step > gpu_step:
        c["gpu_waiting_for_host"] = step - gpu_step
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "grad_gb": 4.0 * P / GB,
                           "allreduce_ms": comm_total, "gemm_ms": L * g_blk + head, "attention_ms": L * a_blk,
                           "buckets": sum(max(1, math.ceil(nb / DDP_BUCKET_B)) for _, nb in groups),
                           "backward_ms": bwd}, gpu_step, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = m_ddp(r, fixed=True)
    rm = {"nccl_p2p_disabled": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_exposed_ms":
                fx["c"]["allreduce_exposed_after_backward"], "after_allreduce_ms": fx["allreduce_ms"],
                "slowdown": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# lidar_seg: per-point network, width 1024 (input projection, 5 residual blocks of Linear + Triton LayerNorm + GELU, a
# 20-class head), bf16, inference; 8 scans of 30000-45000 points per batch (a new total every batch); the Triton kernel
# autotuned over 4 configurations with key (n_rows, n_cols) unless fixed (key n_cols).
LID = dict(scans=8, min_points=30000, max_points=45000, width=1024, blocks=5, classes=20, features=16, steps=12,
           warmup=3, seed=0, configs=4, check_rows=1000)
LID_OPS = 30                # the pool slice, input linear, 6 x (empty_like + the autotuned launch), 5 x (linear, add),
# head, argmax, to(uint8), the label write, event record and wait
BENCH_WARMUP_MS, BENCH_REP_MS = 25.0, 100.0  # triton.testing.do_bench's defaults (the autotuner's benchmarker)
CACHE_CLEAR_B = 256.0 * 2 ** 20             # do_bench zeroes a 256 MiB int32 buffer before every timed run


def lid_counts():
    """Every batch's point count, replaying the program's own random.Random(seed + 12) draws."""
    g = random.Random(LID["seed"] + 12)
    return [sum(g.randint(LID["min_points"], LID["max_points"]) for _ in range(LID["scans"]))
            for _ in range(LID["steps"])]


def lid_steady_points():
    n = lid_counts()[LID["warmup"]:]
    return sum(n) / len(n), min(n), max(n)


def lid_params():
    W, F_, Cn, L = LID["width"], LID["features"], LID["classes"], LID["blocks"]
    return float(F_ * W + W + L * (W * W + W) + (L + 1) * 2 * W + W * Cn + Cn)


def lid_kernel_ms(r, n):
    return t_bytes(4.0 * n * LID["width"], r["hbm_tbs"] * r["ln_gelu_eff"])


def m_lid(r, fixed=False):
    W, L, Cn, F_ = LID["width"], LID["blocks"], LID["classes"], LID["features"]
    n = lid_steady_points()[0]
    hbm, tiny, mid = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3, r["bf16_mid_tflops"]
    k_ln = lid_kernel_ms(r, n)
    c = {"linear_gemm_bf16": L * gemm(r, n, W, W)
         + max(t_flops(2.0 * n * F_ * W, mid), t_bytes(2.0 * n * (F_ + W), hbm))
         + max(t_flops(2.0 * n * W * Cn, mid), t_bytes(2.0 * n * (W + Cn), hbm)),
         "ln_gelu_triton": (L + 1) * k_ln,
         "residual_adds": t_bytes(L * 6.0 * n * W, hbm),
         "argmax_labels": t_bytes(2.0 * n * Cn + 9.0 * n, hbm) + 2 * tiny}
    gpu = sum(c.values())
    host = LID_OPS * r["eager_op_us"] / 1e3
    out = {"points": n, "kernel_ms": k_ln, "params_m": lid_params() / 1e6}
    if not fixed:
        # one new key per batch: do_bench per configuration = 5 estimate runs (L2 flush + kernel), n_warmup = 25 ms / est
        # runs of the kernel, n_repeat = 100 ms / est timed runs (flush + kernel), est = the measured flush + kernel
        # (or the host's pace, if slower), plus the host's own work per configuration
        flush = t_bytes(CACHE_CLEAR_B, hbm)
        it_host = r["bench_iter_host_us"] / 1e3
        est = max(k_ln + flush, it_host)
        per_cfg = (k_ln + 5 * est + BENCH_WARMUP_MS / est * max(k_ln, 0.5 * it_host) + BENCH_REP_MS
                   + r["bench_host_ms"])
        c["autotune_benchmark"] = LID["configs"] * per_cfg + 2 * r["eager_op_us"] / 1e3
        out.update({"per_config_ms": per_cfg, "flush_ms": flush, "timed_runs_per_config": BENCH_REP_MS / est,
                    "warmup_runs_per_config": BENCH_WARMUP_MS / est})
    step = max(gpu, host) + c.get("autotune_benchmark", 0.0)
    gpu_all = gpu + c.get("autotune_benchmark", 0.0)
    out = finish_gpu_host(dict(out, c=c, step=step), gpu_all, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_lid(r, fixed=True)["step"]
    rm = {"autotune_per_shape": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after, "slowdown": step / after})
    return out


# ---------------------------------------------------------------------------------------------------
# denoise_conv: 16 x 3 x 192 x 192 crops, a 3 x 3 conv 3 -> 64 + GELU, 8 blocks (3 x 3 conv 64 -> 64, LayerNorm over
# [64, 192, 192], GELU), a 3 x 3 conv 64 -> 3; pure bf16, NCHW, fused AdamW. The LayerNorm rows are whole feature maps
# (16 rows of 2.36 M elements) unless fixed (torch.var_mean + elementwise).
DN = dict(batch=16, size=192, channels=64, blocks=8, steps=25)
DN_OPS = 40                 # head conv, GELU, 8 x (conv, norm, GELU), tail conv, subtract, 2 casts, MSE, backward call,
# fused AdamW (~3), zero_grad, loss copy, event record and wait
DN_NORM_EXTRA_OPS = 6       # the rewritten norm: var_mean, + eps, rsqrt, subtract, 2 multiplies, add (7) in place of 1
DN_BWD = 32                 # backward nodes: 10 convolutions, 8 norms, 9 GELUs, subtract, casts, MSE
DN_FIX_NORM_B = 74.0        # bytes per element of the rewritten normalization, forward and backward: var_mean r2, x - mean
# r2 w2, x rstd r2 w2, x weight r2 r2 w2, + bias r2 r2 w2 (22); backward: the bias and weight gradients (products and
# reductions over the batch), x rstd and its reduction, the mean's and the variance's gradients, the three input
# gradients summed (~52)


def dn_params():
    C, L, H = DN["channels"], DN["blocks"], DN["size"]
    return float(L * (C * C * 9 + C) + (3 * C * 9 + C) + (C * 3 * 9 + 3) + L * 2 * C * H * H)


def dn_conv_pass(r, cin, cout, small=False):
    B, H = DN["batch"], DN["size"]
    fl = 2.0 * B * H * H * cin * cout * 9
    by = 2.0 * B * H * H * (cin + cout)
    rate = r["conv_stem_tflops"] if small else r["conv_nchw_tflops"]
    return max(t_flops(fl, rate), t_bytes(by, r["hbm_tbs"])), fl


def m_dn(r, fixed=False):
    B, H, C, L = DN["batch"], DN["size"], DN["channels"], DN["blocks"]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    N_el = float(B * C * H * H)     # elements of one feature map batch
    row = float(C * H * H)          # elements of one LayerNorm row
    body, fl = dn_conv_pass(r, C, C)
    head, _ = dn_conv_pass(r, 3, C, small=True)
    tail, _ = dn_conv_pass(r, C, 3, small=True)
    xform = t_bytes(r["nchw_xform_passes"] * 4.0 * 2.0 * N_el, hbm)  # per pass: input and output, read + write
    c = {"conv_body": L * 3 * (body + xform),
         "conv_head_tail": 2 * head + 3 * tail,
         "conv_bias_add_grad": (L + 1) * t_bytes(6.0 * N_el, hbm),
         "gelu": (L + 1) * t_bytes(10.0 * N_el, hbm),
         "loss_adamw": t_bytes(ADAM_B[2] * dn_params(), hbm) + t_bytes(40.0 * B * 3 * H * H, hbm) + 8 * tiny}
    if fixed:
        c["norm_var_mean_elementwise"] = L * t_bytes(DN_FIX_NORM_B * N_el, hbm * r["red_eff"]) + L * 10 * tiny
        ops, nodes = DN_OPS + L * DN_NORM_EXTRA_OPS, DN_BWD + L * DN_NORM_EXTRA_OPS
    else:
        # forward: statistics pass + output pass; input gradient: statistics pass + output pass; each pass runs B
        # blocks (one per row) at ln_block_gels; the gamma / beta gradient kernel (N / 256 blocks) reads dY and X once
        passes = 4.0 * N_el / (B * r["ln_block_gels"] * 1e9) * 1e3
        c["layernorm_row_per_block"] = L * (passes + t_bytes(4.0 * N_el + 8.0 * row, hbm))
        ops, nodes = DN_OPS, DN_BWD
    gpu = sum(c.values())
    host = ops * r["eager_op_us"] / 1e3 + nodes * r["bwd_node_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "params_m": dn_params() / 1e6, "conv_tflop": L * 3 * fl / 1e12,
                           "ln_elements_m": N_el / 1e6, "row_elements_m": row / 1e6}, gpu, host)
    out["conv_share"] = pct(c["conv_body"] + c["conv_head_tail"], step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["ln_share"] = pct(c["layernorm_row_per_block"], step)
    out["ln_per_layer_ms"] = c["layernorm_row_per_block"] / L
    out["ln_at_hbm_ms"] = L * t_bytes(20.0 * N_el, hbm)  # the same LayerNorm bytes at the HBM rate (~20 B per element)
    fx = m_dn(r, fixed=True)
    rm = {"grid_underutilized": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# prop_mlp: residual MLP 4096 -> 8192, 6 x (LN, 8192 -> 16384, GELU, 16384 -> 8192, residual), LN, 8192 -> 1024; 1.65 B
# fp32 parameters, bf16 autocast, fused AdamW, 2048 rows; a torch.amp.GradScaler every step unless fixed.
PM = dict(rows=2048, d_in=4096, width=8192, hidden=16384, blocks=6, targets=1024, steps=25)
PM_EW_BLOCK_B = 82.0        # bytes per row x width per block, forward and backward: LayerNorm in fp32 (~28), the casts of
# its output to bf16 and of the gradient back (12), GELU on the 2 x width hidden (bf16: 10 B x 2 = 20), the residual add
# of a bf16 output into the fp32 stream (10), the gradient's cast for the fc2 branch (6), the two bias gradients (6)
PM_OPS = 72                 # forward ~63 (3 per linear with autocast's casts, LayerNorms, GELUs, adds, casts, MSE),
# backward call, fused AdamW (~3), zero_grad, loss copy, event record and wait
PM_SCALER_OPS = 8           # scale (mul), _check_inf_per_device (2 fills, the foreach check), found_inf sum / to,
# update (to, _amp_update_scale_)
PM_BWD = 70                 # backward nodes: per block LayerNorm, ToCopy casts, 2 x (addmm + t), GELU, add; head, loss


def pm_params():
    di, W, H, L, Tg = (PM[k] for k in ("d_in", "width", "hidden", "blocks", "targets"))
    return float(di * W + W + L * (2 * W + W * H + H + H * W + W) + 2 * W + W * Tg + Tg)


def m_pm(r, fixed=False):
    R, di, W, H, L, Tg = (PM[k] for k in ("rows", "d_in", "width", "hidden", "blocks", "targets"))
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P = pm_params()
    c = {"linear_gemm_bf16": gemm(r, R, di, W, 2.0) + L * (gemm(r, R, W, H, 3.0) + gemm(r, R, H, W, 3.0))
         + gemm(r, R, W, Tg, 3.0),
         "layernorm_gelu_residual_casts": t_bytes((L * PM_EW_BLOCK_B + 28.0) * R * W, hbm),
         "autocast_weight_casts": t_bytes(AMP_B * P, hbm),
         "adamw_fused_fp32": t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny,
         "loss": t_bytes(24.0 * R * Tg, hbm) + 4 * tiny}
    ops = PM_OPS
    if not fixed:
        # GradScaler.step with a fused optimizer: _check_inf_per_device runs _amp_foreach_non_finite_check_and_unscale_
        # (inv_scale 1) over every fp32 gradient in place (r4 w4); scale(), the found_inf sum and update() are tiny
        c["gradscaler_check_unscale"] = t_bytes(8.0 * P, hbm) + 6 * tiny
        ops += PM_SCALER_OPS
    gpu = sum(c.values())
    host = ops * r["eager_op_us"] / 1e3 + PM_BWD * r["bwd_node_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "params_b": P / 1e9}, gpu, host)
    out["gemm_share"] = pct(c["linear_gemm_bf16"], step)
    out["optimizer_share"] = pct(c["adamw_fused_fp32"], step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_pm(r, fixed=True)["step"]
    rm = {"loss_scaling_bf16": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after, "scaler_gb": 8.0 * P / GB})
    return out


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=25, warmup=3, ranks=1):
    return D.base(name, f"heldout12/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def planted12(cause, where, fix, b, key_rm, key_share, derivation, accept, b2):
    sev, sev_rng = band_of12(b2, key_share)
    return {"cause": cause, "accept_causes": accept, "where": where, "fix": fix, "top": True,
            "removed_ms": {"h100": r2(b[key_rm]), "h200": r2(b2[key_rm])},
            "share_pct": {"h100": r2(b[key_share]), "h200": r2(b2[key_share])},
            "severity": sev, "severity_range": sev_rng,
            "severity_legacy": D.band_of(b2, key_share)[0], "severity_legacy_range": D.band_of(b2, key_share)[1],
            "derivation": derivation}


def finish(m, b, b2, keys, after=True, fixed_case=None):
    m["severity_bands"] = SEV_DOC12
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
    "moe_lm": "~650: per block forward 2 LayerNorms, the QKV and output GEMMs, one causal SDPA, residual adds, the router "
              "(GEMM, softmax, top-k, scatter into the gate matrix) and for each of the 8 experts 2 GEMMs over all 8192 "
              "tokens, a GELU, a gate multiply and an add; the backward about twice that; the LM head GEMM, bf16 "
              "cross-entropy, fused AdamW",
    "moe_lm.fixed": "~500: as the planted run, but per block the 8 experts are 2 batched GEMMs (baddbmm) over an "
                    "[8, 2560, 2048] buffer, with the slot arithmetic (one_hot, cumsum, gather, where, scatter), the "
                    "dispatch gather and the combine gather around them and their index_put backward",
    "lm_ddp": "per rank ~650: per block forward 2 LayerNorms (fp32), 4 GEMMs, one causal SDPA, GELU, casts, adds; backward "
              "about twice that; the tied head GEMM, the fp32 cross-entropy, fused AdamW; ~75 bucket all-reduces "
              "(25 MiB, the 268 MB embedding alone) on NCCL's stream, and DDP's bucket copies",
    "lidar_seg": "per batch ~20 for the network (6 GEMMs, 6 Triton LayerNorm + GELU, 5 adds, argmax, the label write) "
                 "and, for the autotuning of each new point count, 4 x ~220-340 runs of the same Triton kernel (one "
                 "configuration after another, ~170-270 of them each preceded by a 256 MiB fill of the L2-flush "
                 "buffer) with as many event pairs and synchronizations per configuration",
    "lidar_seg.fixed": "~20 per batch: the network alone (the kernel tuned once, before the loop)",
    "denoise_conv": "~110 per step, no NVTX: per body block a cuDNN convolution (+ bias add), vectorized_layer_norm_kernel "
                    "with a grid of 16 blocks, a GELU; backward: the convolution's data and weight gradients, the "
                    "LayerNorm input gradient (16 blocks again) and its gamma / beta gradient (4096 blocks), GELU; "
                    "head and tail convolutions, MSE, fused AdamW",
    "denoise_conv.fixed": "~200 per step: the LayerNorm kernels replaced by var_mean reductions and broadcasting "
                          "elementwise kernels (and their backward)",
    "prop_mlp": "~150 per step: 14 GEMMs forward, ~26 backward, LayerNorm / GELU / cast / add kernels, autocast's weight "
                "casts, the GradScaler's multi_tensor_apply kernel (_amp_foreach_non_finite_check_and_unscale_) over "
                "all 1.65 B gradients and its small kernels (loss scale, found_inf, _amp_update_scale_), fused AdamW",
    "prop_mlp.fixed": "the same without the GradScaler's kernels",
}

EVENT_SYNC = "event sync on the previous step (lag 1: never idles the GPU)"


def build():
    out = {}

    # ---- moe_lm (moe_dense_dispatch) and moe_lm.fixed ---------------------------------------------------------------
    Bm, Sm, Vm, dm, Hm, Lm, Em, km, fm = (MOE[x] for x in ("batch", "seq", "vocab", "d", "heads", "blocks", "experts",
                                                            "top_k", "d_ff"))
    cap = moe_capacity()
    args = ["--batch", Bm, "--seq", Sm, "--vocab", Vm, "--d-model", dm, "--heads", Hm, "--blocks", Lm, "--experts", Em,
            "--top-k", km, "--d-ff", fm, "--capacity-factor", MOE["cf"]]
    b, b2, keys = ev(m_moe)
    bf, bf2, keys_f = ev(lambda r: m_moe(r, fixed=True))
    T = Bm * Sm
    m = base("moe_lm", "moe_lm.py", "planted", args, steps=MOE["steps"], est=50)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", attention=True,
                     sequences=f"{Bm} sequences of {Sm} tokens (no padding)", host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, is_causal=True, {Hm} heads of {dm // Hm}"
    m["uses"]["moe"] = (f"{Em} experts {dm} -> {fm} -> {dm} per block, top-{km} routing; every expert run on every token "
                        f"with a dense gate matrix")
    m["techniques"] = techniques(
        f"dispatch tokens to their experts instead of running every expert on every token: capacity-based routing "
        f"(gather each expert's tokens into a fixed [{Em}, capacity, {dm}] buffer, batched or grouped GEMMs, gather the "
        f"outputs back), or a grouped-GEMM MoE kernel (megablocks-style); {km} of {Em} experts per token is "
        f"{Em // km}x less expert work",
        ["CUDA graphs / launch overhead (GPU-bound)", "FP8 / precision changes as the top fix (the work itself is wasted)",
         "faster GEMMs / kernel tuning (the GEMMs run at their rate)", "fused optimizer (already)",
         "flash attention (already SDPA, causal)", "activation checkpointing",
         "expert parallelism across GPUs as the fix (one GPU; the waste is per token)",
         "pinned memory / data loading (ids resident on the GPU)"])
    m["planted"] = [planted12(
        "moe_dense_dispatch", {"device": "GPU 0", "region": f"step_N > forward and backward: in each of the {Lm} MoE "
                               f"layers, {Em} experts x 2 GEMMs over all {T} tokens (M = {T}), a GELU over [{T}, {fm}] "
                               f"per expert, a gate multiply and an add, though only {km} gates per token are nonzero"},
        "capacity-based dispatch with batched expert GEMMs (--fixed, captured as moe_lm.fixed)", b,
        "rm.moe_dense_dispatch", "share.moe_dense_dispatch",
        f"{b2['params_b'][0]:.2f} B bf16 parameters, {T} tokens per step. The dense loop runs {Em} experts on every "
        f"token: {Lm} x {Em} x 2 GEMMs of {T} x {dm} x {fm}, forward and backward, {b2['expert_tflop'][0]:.0f} TFLOP "
        f"at 550-800 ({rng(b2, 'c.experts_dense_gemm')} ms on an H200), plus GELU, bias-gradient, gate-multiply and "
        f"summation traffic over [{T}, {fm}] and [{T}, {dm}] per expert ({rng(b2, 'c.experts_dense_elementwise')} ms). "
        f"With top-{km} routing and capacity factor {MOE['cf']} each expert needs {cap} rows: {Lm} x 2 batched GEMMs of "
        f"[{Em}, {cap}, {dm}] x [{dm}, {fm}], {bf2['expert_tflop'][0]:.0f} TFLOP ({rng(bf2, 'c.experts_bmm')} ms), "
        f"GELU and bias ({rng(bf2, 'c.experts_gelu_bias')} ms), dispatch and combine gathers at 50-90 % of HBM "
        f"({rng(bf2, 'c.dispatch_combine')} ms). The rest is the same in both: attention-block GEMMs "
        f"({rng(b2, 'c.attn_proj_gemm_bf16')} ms), causal SDPA ({rng(b2, 'c.attention_causal')} ms), LM head "
        f"({rng(b2, 'c.lm_head_gemm')} ms), cross-entropy, embedding, fused AdamW ({rng(b2, 'c.adamw_fused_bf16')} ms). "
        f"Step {rng(b2, 'step')} ms (GPU-bound: host {rng(b2, 'host_ms')} ms); fixed {rng(b2, 'after')} ms (host "
        f"{rng(bf2, 'host_ms')} ms): removed {rng(b2, 'rm.moe_dense_dispatch')} ms = "
        f"{rng(b2, 'share.moe_dense_dispatch', 1)} % (H100 {rng(b, 'share.moe_dense_dispatch', 1)} %), "
        f"{rng(b2, 'speedup', 1)}x. New cause name: moe_dense_dispatch.",
        ["moe_dense_dispatch", "wasted_compute", "redundant_compute", "moe_no_token_dispatch"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / gate-multiply kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "the bf16 cross-entropy over 8192 x 32768 logits", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        f"per block and step {Em} pairs of expert GEMMs of equal size (M = {T}) forward and {2 * Em} pairs backward, "
        f"each as long as a dense FFN's",
        f"{Lm} router GEMMs with N = {Em}, softmax / top-k / scatter kernels building a [{T}, {Em}] gate matrix",
        "one causal SDPA per block, the LM head GEMM, bf16 cross-entropy, fused AdamW",
        "the host well ahead of the GPU (GPU-bound)"]
    m["must_not"] = [
        "the GEMMs as inefficient, or kernel tuning / FP8 as the top fix (they run at their rate; there are too many)",
        "CUDA graphs / launch overhead (GPU-bound)",
        "attention as the main cost, or flash attention as the fix",
        "expert load imbalance as the problem (every expert sees every token)",
        "a host synchronization per step as the problem (there is none)", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Here are two profiles of our mixture-of-experts language model's training step on an H200 ({Lm} "
                     f"blocks of d {dm}, {Em} experts of {dm} -> {fm} -> {dm} per block with top-{km} routing, {Bm} x "
                     f"{Sm} tokens per step, bf16, fused AdamW), before and after we rewrote the MoE layer. How much did "
                     f"the rewrite buy per step, why, and what bounds the step now?")
    m["diagnosis"] = (f"Before: the MoE layer ran every expert on every token and multiplied by a gate matrix that is "
                      f"zero for {Em - km} of the {Em} experts: {Lm} x {Em} expert GEMM pairs over all {T} tokens, "
                      f"{b2['expert_tflop'][0]:.0f} TFLOP per step, ~{rng(b2, 'expert_share', 0)} % of a "
                      f"{rng(b2, 'step', 1)} ms step on the H200, GPU-bound. After: tokens are dispatched to per-expert "
                      f"buffers of {cap} rows (capacity factor {MOE['cf']}) and the experts run as batched GEMMs "
                      f"({bf2['expert_tflop'][0]:.0f} TFLOP) with gather / index kernels around them: "
                      f"{rng(b2, 'after', 1)} ms per step, {rng(b2, 'speedup', 1)}x, removing "
                      f"{rng(b2, 'share.moe_dense_dispatch', 0)} % of the step (critical). The step is still GPU-bound "
                      f"on tensor-core GEMMs (expert batched GEMMs ~{rng(b2, 'after_expert_share', 0)} %, all GEMMs "
                      f"~{rng(b2, 'after_gemm_share', 0)} %), attention and the optimizer; the dispatch / combine "
                      f"gathers are a few percent; nothing planted is left.")
    m["measure"] = [{"what": "step period", "query": Q12["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q12["kernels"],
                     "expect": f"{Lm * Em * 6} expert GEMMs per step (per block {Em} experts x 2 linears x 3: forward, "
                               f"data and weight gradients), {rng(b2, 'c.experts_dense_gemm', 1)} ms together"}]
    m["new_cause"] = {"name": "moe_dense_dispatch", "why": "a mixture-of-experts layer that computes every expert on "
                      "every token and masks the outputs with sparse gates (a 'soft' loop over experts): E / k times the "
                      "expert FLOPs and memory traffic the routing asks for; fixed by dispatching each token to its k "
                      "experts (capacity buffers + batched GEMMs, or grouped GEMMs)"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="moe_lm.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("moe_lm.fixed", "moe_lm.py", "fixed", args + ["--fixed"], steps=MOE["steps_fixed"], est=40)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", attention=True,
                     sequences=f"{Bm} sequences of {Sm} tokens (no padding)", host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, is_causal=True, {Hm} heads of {dm // Hm}"
    m["uses"]["moe"] = (f"{Em} experts per block, top-{km}, capacity {cap} tokens per expert (factor {MOE['cf']}), "
                        f"batched expert GEMMs over stacked weights")
    m["techniques"] = techniques(
        "nothing planted is left: the step is tensor-core GEMMs, attention and the optimizer; the next gains would come "
        "from grouped GEMMs without capacity padding or from fusing the dispatch gathers, each worth a few percent",
        ["running every expert on every token (the planted problem, gone)", "CUDA graphs / launch overhead (GPU-bound)",
         "FP8 / precision changes as the top fix", "fused optimizer (already)", "flash attention (already)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "dispatch / combine gathers, their index_put backward and the slot arithmetic",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "LayerNorm / GELU / residual kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "capacity padding (2560 slots per expert for ~2048 tokens)", "cause": "padding_waste",
                       "max_severity": "medium"}]
    m["expected_in_trace"] = [
        f"per block 2 batched GEMMs forward (baddbmm over [{Em}, {cap}, {dm}] and [{Em}, {cap}, {fm}]) and their "
        f"backward",
        "one_hot / cumsum / gather / scatter kernels (slot arithmetic), index kernels for the dispatch and the combine",
        "no host synchronization inside the loop but the event wait"]
    m["must_not"] = ["the expert computation as still dense", "a host-bound or launch-bound step",
                     "a critical problem left"]
    m["expect_quiet"] = False
    m["question"] = "After the rewrite, is anything still holding the step back?"
    m["diagnosis"] = (f"No planted problem is left: {rng(b2, 'step', 1)} ms per step on the H200, GPU-bound (host "
                      f"{rng(b2, 'host_ms', 1)} ms), ~{rng(b2, 'gemm_share', 0)} % of it tensor-core GEMMs (expert "
                      f"batched GEMMs ~{rng(b2, 'expert_share', 0)} %); the dispatch / combine gathers "
                      f"({rng(b2, 'c.dispatch_combine', 1)} ms) and capacity padding are the only overheads, each a few "
                      f"percent.")
    m["measure"] = [{"what": "step period", "query": Q12["step"], "expect_ms": r2(b2["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- lidar_seg (autotune_per_shape) ----------------------------------------------------------------------------
    counts = lid_counts()
    if len(set(counts)) != len(counts) or LID["check_rows"] in counts:
        raise SystemExit("lidar_seg: a point count repeats; the schedule no longer gives a new autotune key each batch")
    n_mean, n_min, n_max = lid_steady_points()
    args = ["--scans", LID["scans"], "--min-points", LID["min_points"], "--max-points", LID["max_points"],
            "--width", LID["width"], "--blocks", LID["blocks"], "--classes", LID["classes"]]
    b, b2, keys = ev(m_lid)
    bf2 = ev(lambda r: m_lid(r, fixed=True))[1]
    m = base("lidar_seg", "lidar_seg.py", "planted", args, steps=LID["steps"], est=60)
    m["uses"] = uses("bf16 (parameters and compute)", "none (inference, torch.inference_mode)", host_sync=EVENT_SYNC,
                     triton=True)
    m["uses"]["triton_kernels"] = ("a hand-written LayerNorm + GELU, @triton.autotune over 4 configurations, "
                                   "key=['n_rows', 'n_cols']")
    m["uses"]["batch_shapes"] = (f"a new number of rows every batch: {n_min}-{n_max} points in the steady batches "
                                 f"(8 scans of {LID['min_points']}-{LID['max_points']}), never repeated in the run")
    m["techniques"] = techniques(
        "take the per-batch size out of the autotune key (key=['n_cols'], or bucket n_rows to a few powers of two via a "
        "rounded key argument), or tune once offline and pin the configuration (triton.Config without autotune): the "
        "best configuration of a row-wise kernel does not change with the number of rows",
        ["CUDA graphs / launch overhead as the top fix (a graph would replay only the chosen kernel; the benchmarking is "
         "the cost)", "a faster kernel / kernel tuning (each run of it is fast; it is run hundreds of times)",
         "padding every batch to the largest size as the only fix (it works by making the key constant, but wastes "
         "work: the key is the issue)", "precision changes", "pinned memory / data loading (points on the GPU)",
         "torch.compile as the top fix"])
    m["planted"] = [planted12(
        "autotune_per_shape", {"device": "GPU 0", "region": "step_N > forward, at the first LayerNorm + GELU: the Triton "
                               "autotuner benchmarks all 4 configurations for the batch's new number of points "
                               "(triton.testing.do_bench: ~220-340 runs of the kernel per configuration, ~170-270 of "
                               "them after a 256 MiB L2-flush fill, events and synchronizations) before the batch's "
                               "real work"},
        "key=['n_cols'] (--fixed; not captured)", b, "rm.autotune_per_shape", "share.autotune_per_shape",
        f"{b2['points'][0] / 1e3:.0f} k points per steady batch on average (every batch a new count: the autotune key "
        f"(n_rows, n_cols) is new every time). The network: 6 GEMMs over the points at 550-800 "
        f"({rng(b2, 'c.linear_gemm_bf16')} ms on an H200), 6 Triton LayerNorm + GELU at 60-90 % of HBM "
        f"({rng(b2, 'c.ln_gelu_triton')} ms, {rng(b2, 'kernel_ms', 3)} ms each), residual adds "
        f"({rng(b2, 'c.residual_adds')} ms), argmax and labels: {rng(bf2, 'step')} ms per batch (host "
        f"{rng(bf2, 'host_ms')} ms). For a new key the autotuner runs triton.testing.do_bench on each of the 4 "
        f"configurations: 5 estimate runs, then 25 ms worth of warm-up runs and 100 ms worth of timed runs (each timed "
        f"run preceded by zeroing a 256 MiB buffer, {rng(b2, 'flush_ms', 3)} ms), ~{rng(b2, 'timed_runs_per_config', 0)} "
        f"timed runs: {rng(b2, 'per_config_ms', 1)} ms per configuration with its host work, "
        f"{rng(b2, 'c.autotune_benchmark', 0)} ms per batch. Step {rng(b2, 'step', 1)} ms; with the kernel tuned once "
        f"{rng(b2, 'after')} ms: removed {rng(b2, 'rm.autotune_per_shape', 0)} ms = "
        f"{rng(b2, 'share.autotune_per_shape', 1)} % (H100 {rng(b, 'share.autotune_per_shape', 1)} %), "
        f"{rng(b2, 'slowdown', 0)}x. The share rests on do_bench's fixed time budget, not on the kernel. New cause "
        f"name: autotune_per_shape.",
        ["autotune_per_shape", "dynamic_shape_retuning", "recompilation", "wasted_compute"], b2)]
    m["tolerated"] = [{"what": "the host synchronizations inside do_bench (a consequence of the re-tuning)",
                       "cause": "host_sync", "max_severity": "medium"},
                      {"what": "the residual-add kernels (memory-bound)", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        "in every step's forward range ~900-1400 launches of the same Triton kernel (4 grid shapes, one per "
        "configuration), ~700-1100 of them right after a 256 MiB fill kernel, with event records and synchronizations "
        "per configuration",
        "then the batch's own 6 GEMMs, 6 Triton kernels, 5 adds, argmax and the label write (~10 ms)",
        "no host-to-device copies (the points are on the GPU), no backward"]
    m["must_not"] = [
        "the Triton kernel itself as slow, or rewriting it as the fix (one run is ~0.3 ms)",
        "the GEMMs / the network as the cost", "data loading / host-to-device copies",
        "a host-bound or launch-bound loop as the cause (the GPU is busy benchmarking)",
        "CUDA graphs as the top fix", "a modest problem (it is nearly the whole step)"]
    m["expect_quiet"] = False
    m["question"] = ("We run offline semantic segmentation of LiDAR scans on one H200: a per-point network (an input "
                     "projection to width 1024, 5 residual blocks with a LayerNorm + GELU we wrote in Triton, a 20-class "
                     "head; bf16, inference mode), 8 scans of 30-45 k points per batch, all points of a batch "
                     "concatenated. Throughput is far below what such a small model should give. Where does the time "
                     "go?")
    m["diagnosis"] = (f"Almost all of it goes to re-tuning the Triton kernel: it is @triton.autotune'd with key=['n_rows', "
                      f"'n_cols'], and every batch has a different number of points, so every batch the autotuner "
                      f"benchmarks all 4 configurations with triton.testing.do_bench (~25 ms of warm-up and ~100 ms of "
                      f"timed runs each, every timed run after a 256 MiB L2-flush fill): "
                      f"~{rng(b2, 'c.autotune_benchmark', 0)} ms of a {rng(b2, 'step', 0)} ms batch on the H200, "
                      f"against ~{rng(b2, 'after', 1)} ms for the network itself. Drop n_rows from the key "
                      f"(key=['n_cols'], or a bucketed size argument), or pin the tuned configuration: "
                      f"{rng(b2, 'share.autotune_per_shape', 1)} % of the step removed (critical), "
                      f"~{rng(b2, 'slowdown', 0)}x the throughput. The kernel and the GEMMs are fine.")
    m["measure"] = [{"what": "step period", "query": Q12["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q12["kernels"],
                     "expect": "the Triton LayerNorm + GELU kernel ~900-1400 times per step and a fill kernel "
                               "~700-1100 times, together most of the GPU time"},
                    {"what": "NVTX ranges", "query": Q12["nvtx_ranges"],
                     "expect": "the forward range a few hundred ms, the labels range short"}]
    m["new_cause"] = {"name": "autotune_per_shape", "why": "an autotuned kernel (Triton @autotune, or cuDNN / Inductor "
                      "benchmarking) whose tuning key includes a size that changes from call to call (tokens or points "
                      "per batch): every new size re-runs the whole benchmark sweep in the hot loop; fixed by keying on "
                      "the shape parameters that matter (bucketed), or tuning once"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- denoise_conv (grid_underutilized; no NVTX) -----------------------------------------------------------------
    Bd, Hd, Cd, Ld = DN["batch"], DN["size"], DN["channels"], DN["blocks"]
    args = ["--batch", Bd, "--size", Hd, "--channels", Cd, "--blocks", Ld]
    b, b2, keys = ev(m_dn)
    bf2 = ev(lambda r: m_dn(r, fixed=True))[1]
    m = base("denoise_conv", "denoise_conv.py", "planted", args, nvtx=False, steps=DN["steps"], est=40)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", host_sync=EVENT_SYNC)
    m["uses"]["normalization"] = (f"nn.LayerNorm([{Cd}, {Hd}, {Hd}]) after each of the {Ld} body convolutions: "
                                  f"{Bd} rows of {Cd * Hd * Hd} elements per call")
    m["uses"]["memory_format"] = "NCHW (contiguous), cudnn.benchmark"
    m["techniques"] = techniques(
        f"compute the per-sample statistics with a reduction that spreads each row over many blocks (torch.var_mean over "
        f"dims (1, 2, 3) + elementwise affine, or a two-stage / split-row Triton kernel); PyTorch's LayerNorm kernels "
        f"give each row one 128-thread block, and with {Bd} rows of {Cd * Hd * Hd / 1e6:.2f} M elements {Bd} blocks run "
        f"on 132 SMs (or normalize over C per pixel, the usual 'LayerNorm2d', if that is what was meant)",
        ["channels_last / layout changes as the top fix (the convolutions are a small part)",
         "precision changes (already bf16)", "CUDA graphs / launch overhead (GPU-bound)",
         "a larger batch as the only fix (it helps only by adding rows)", "fused optimizer (already)",
         "faster convolutions / cuDNN tuning as the top fix", "data loading (crops on the GPU)"])
    m["planted"] = [planted12(
        "grid_underutilized", {"device": "GPU 0", "region": f"every iteration (no NVTX): the {Ld} LayerNorm forward "
                               f"kernels (vectorized_layer_norm_kernel) and {Ld} input-gradient kernels "
                               f"(layer_norm_grad_input_kernel), each launched with a grid of {Bd} blocks of 128 "
                               f"threads, one per {Cd * Hd * Hd}-element row"},
        "per-sample statistics by torch.var_mean + elementwise affine (--fixed; not captured)", b,
        "rm.grid_underutilized", "share.grid_underutilized",
        f"{Bd} crops of {Hd} x {Hd}, {Cd} channels: each LayerNorm normalizes {Bd} rows of {Cd * Hd * Hd} elements "
        f"({b2['ln_elements_m'][0]:.1f} M per call). PyTorch's LayerNorm forward and input-gradient kernels run one "
        f"128-thread block per row, two passes over it each; {Bd} blocks occupy {Bd} of 132 SMs and each is "
        f"latency-bound at 0.6-4 G elements/s per pass: {rng(b2, 'ln_per_layer_ms')} ms per LayerNorm layer "
        f"(forward + backward), {rng(b2, 'c.layernorm_row_per_block')} ms per step, against "
        f"{rng(b2, 'ln_at_hbm_ms')} ms were the same ~20 B per element streamed at the HBM rate. The rest: "
        f"body convolutions {b2['conv_tflop'][0]:.2f} TFLOP at 120-400 plus layout passes "
        f"({rng(b2, 'c.conv_body')} ms), GELU ({rng(b2, 'c.gelu')} ms), bias add and gradient, head / tail "
        f"convolutions, loss and AdamW. Step {rng(b2, 'step')} ms (GPU-bound: host {rng(b2, 'host_ms')} ms); with "
        f"var_mean statistics and elementwise ops ({rng(bf2, 'c.norm_var_mean_elementwise')} ms at 60-90 % of HBM, "
        f"~{DN_FIX_NORM_B:.0f} B per element) {rng(b2, 'after')} ms (GPU {rng(bf2, 'gpu_ms')} ms, host "
        f"{rng(bf2, 'host_ms')} ms): removed {rng(b2, 'rm.grid_underutilized')} ms = "
        f"{rng(b2, 'share.grid_underutilized', 1)} % (H100 {rng(b, 'share.grid_underutilized', 1)} %). The low end is "
        f"the fastest-block corner; the kernels' launch grid ({Bd} blocks) is certain. New cause name: "
        f"grid_underutilized.",
        ["grid_underutilized", "low_occupancy", "kernel_inefficient", "normalization_inefficient"], b2)]
    m["tolerated"] = [{"what": "GELU and convolution bias kernels (memory-bound)", "cause": "elementwise_unfused",
                       "max_severity": "medium"},
                      {"what": "NCHW convolutions (cuDNN may transpose to NHWC internally)", "cause": "layout_copy",
                       "max_severity": "medium"}]
    m["expected_in_trace"] = [
        f"no NVTX: an iteration is 10 forward convolutions (first a 3 -> {Cd} one), {Ld} LayerNorm and 9 GELU "
        f"kernels, then the backward and fused AdamW",
        f"vectorized_layer_norm_kernel and layer_norm_grad_input_kernel launched with gridX = {Bd}, each taking "
        f"milliseconds: the largest kernels of the step",
        "GammaBetaBackward kernels with thousands of blocks, short",
        "cuDNN convolution kernels, short relative to the LayerNorm kernels"]
    m["must_not"] = [
        "the convolutions as the main cost, or cuDNN / channels_last as the top fix",
        "a host-bound or launch-bound loop", "data loading or host-to-device copies",
        "elementwise fusion of the LayerNorm's ops as the fix (one kernel per pass already; its grid is the problem)",
        "precision changes as the fix", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We train a DnCNN-style image denoiser on one H200 ({Ld} blocks of a 3 x 3 convolution with {Cd} "
                     f"channels, LayerNorm and GELU; {Hd} x {Hd} RGB crops, {Bd} per step; bf16, fused AdamW). The GPU "
                     f"is busy all the time, yet a step takes far longer than the convolutions' FLOPs suggest. What is "
                     f"the GPU doing, and what would you change?")
    m["diagnosis"] = (f"Mostly normalizing, with almost all SMs idle: the LayerNorm is nn.LayerNorm([{Cd}, {Hd}, {Hd}]), "
                      f"so each call has {Bd} rows of {Cd * Hd * Hd} elements, and PyTorch's LayerNorm forward and "
                      f"input-gradient kernels give one 128-thread block to each row: grids of {Bd} blocks on a 132-SM "
                      f"GPU, each block latency-bound. These {2 * Ld} kernels ({Ld} forward, {Ld} input-gradient) take "
                      f"{rng(b2, 'c.layernorm_row_per_block', 0)} ms of a {rng(b2, 'step', 0)} ms step on the H200 (~{rng(b2, 'ln_share', 0)} %), against "
                      f"~{rng(b2, 'ln_at_hbm_ms', 1)} ms for the same bytes at HBM speed; the convolutions are "
                      f"~{rng(b2, 'conv_share', 0)} %. Compute the same statistics with a reduction PyTorch spreads "
                      f"over many blocks (torch.var_mean over (C, H, W) + the elementwise affine) or a split-row "
                      f"kernel: ~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.grid_underutilized', 0)} %, "
                      f"{band_of12(b2, 'share.grid_underutilized')[0]}); or, if per-pixel channel normalization was "
                      f"meant, LayerNorm over C (a 'LayerNorm2d'), which has {Bd * Hd * Hd} rows.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q12["anchor"] + " with ANCHOR = the first (3 -> 64) "
                     "convolution's forward kernel, once per iteration, C = 1, WARM = 3",
                     "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q12["kernels"],
                     "expect": f"vectorized_layer_norm_kernel and layer_norm_grad_input_kernel {Ld} times each per step, "
                               f"{rng(b2, 'c.layernorm_row_per_block', 0)} ms together, gridX = {Bd}"}]
    m["new_cause"] = {"name": "grid_underutilized", "why": "a kernel launched with far fewer blocks than the GPU has SMs "
                      "because its parallel dimension is small (here: a normalization whose rows are whole feature maps, "
                      "one block per row), so most SMs idle and the few busy ones are latency-bound; fixed by "
                      "parallelizing the long dimension (split reductions) or changing which dimension is rows"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- prop_mlp (loss_scaling_bf16) -------------------------------------------------------------------------------
    args = ["--rows", PM["rows"], "--d-in", PM["d_in"], "--width", PM["width"], "--hidden", PM["hidden"],
            "--blocks", PM["blocks"], "--targets", PM["targets"]]
    b, b2, keys = ev(m_pm)
    bf2 = ev(lambda r: m_pm(r, fixed=True))[1]
    P = pm_params()
    m = base("prop_mlp", "prop_mlp.py", "planted", args, steps=PM["steps"], est=40)
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", host_sync=EVENT_SYNC)
    m["uses"]["grad_scaler"] = "torch.amp.GradScaler('cuda') (init scale 65536), under bfloat16 autocast"
    m["techniques"] = techniques(
        "drop the GradScaler (or GradScaler(enabled=False)) under bfloat16 autocast: bf16 has float32's exponent range, "
        "so loss scaling only adds a pass over every gradient and a few kernels per step",
        ["CUDA graphs / launch overhead (GPU-bound)", "FP8 / precision changes as the top fix",
         "fused optimizer (already)", "faster GEMMs / kernel tuning (GEMMs at their rate)",
         "a larger batch as the top fix", "data loading / pinned memory (data on the GPU)",
         "flash attention (no attention)"])
    m["planted"] = [planted12(
        "loss_scaling_bf16", {"device": "GPU 0", "region": "step_N > optimizer: GradScaler.step -> "
                              "_check_inf_per_device: one multi_tensor_apply kernel series "
                              "(_amp_foreach_non_finite_check_and_unscale_) reading and rewriting all "
                              f"{P / 1e9:.2f} B fp32 gradients; step_N > backward: the loss scale; the scale update"},
        "no GradScaler under bf16 (--fixed; not captured)", b, "rm.loss_scaling_bf16", "share.loss_scaling_bf16",
        f"{P / 1e9:.2f} B fp32 parameters, {PM['rows']} rows per step. The GEMMs: {PM['blocks']} blocks of "
        f"{PM['rows']} x {PM['width']} x {PM['hidden']} twice, forward and backward, plus input and head, at 550-800 "
        f"(M = {PM['rows']}: {rng(b2, 'c.linear_gemm_bf16')} ms on an H200); autocast's weight casts (12 B per "
        f"parameter, {rng(b2, 'c.autocast_weight_casts')} ms), fused AdamW (28 B per parameter, "
        f"{rng(b2, 'c.adamw_fused_fp32')} ms), LayerNorm / GELU / casts ({rng(b2, 'c.layernorm_gelu_residual_casts')} "
        f"ms). The GradScaler with a fused optimizer checks every gradient for inf / NaN in place (r4 w4: "
        f"{b2['scaler_gb'][0]:.1f} GB, {rng(b2, 'c.gradscaler_check_unscale')} ms) and adds a handful of tiny kernels. "
        f"Step {rng(b2, 'step')} ms (GPU-bound: host {rng(b2, 'host_ms')} ms); without it {rng(b2, 'after')} ms: removed "
        f"{rng(b2, 'rm.loss_scaling_bf16')} ms = {rng(b2, 'share.loss_scaling_bf16', 1)} % (H100 "
        f"{rng(b, 'share.loss_scaling_bf16', 1)} %). New cause name: loss_scaling_bf16.",
        ["loss_scaling_bf16", "gradscaler_unneeded", "wasted_compute", "redundant_pass"], b2)]
    m["tolerated"] = [{"what": "autocast's per-step weight casts (12 B per parameter)", "cause": "autocast_weight_cast",
                       "max_severity": "medium"},
                      {"what": "LayerNorm / GELU / cast / residual kernels", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        "GEMMs with M = 2048 dominating the step; fused AdamW (FusedAdamMathFunctor) over 1.65 B parameters",
        "in the optimizer range, before AdamW: multi_tensor_apply kernels of _amp_foreach_non_finite_check_and_unscale_ "
        "over all gradients, and an _amp_update_scale_ kernel after it",
        "no host synchronization in the loop but the event wait (the fused optimizer reads found_inf on the GPU)"]
    m["must_not"] = [
        "the GEMMs as inefficient, or kernel tuning / FP8 as the top fix",
        "a host sync from the GradScaler as the cost (with a fused optimizer there is none)",
        "the optimizer as unfused (it is fused)", "a critical or high problem (the scaler pass is a modest share)",
        "autocast's weight casts ranked above the GradScaler as the thing to fix (they are the normal price of fp32 "
        "master weights under autocast, one cast per weight per step, with no one-line fix)",
        "nothing worth fixing"]
    m["expect_quiet"] = False
    m["question"] = (f"We train a {P / 1e9:.2f} B-parameter residual MLP ({PM['blocks']} blocks of {PM['width']} -> "
                     f"{PM['hidden']} -> {PM['width']}, bf16 autocast over fp32 weights, fused AdamW) on precomputed "
                     f"embeddings on one H200, {PM['rows']} rows per step. Most of the step is GEMMs, as we expected. "
                     f"Is anything in the step worth fixing?")
    m["diagnosis"] = (f"One modest thing: the loop still uses torch.amp.GradScaler, left over from float16, and under "
                      f"bfloat16 it is not needed. Every step it checks all {P / 1e9:.2f} B fp32 gradients for inf / NaN "
                      f"in place (_amp_foreach_non_finite_check_and_unscale_, {b2['scaler_gb'][0]:.0f} GB of traffic, "
                      f"~{rng(b2, 'c.gradscaler_check_unscale', 1)} ms) plus a few small kernels, in a "
                      f"{rng(b2, 'step', 0)} ms step on the H200; dropping it gives ~{rng(b2, 'after', 0)} ms "
                      f"({rng(b2, 'share.loss_scaling_bf16', 1)} %, {band_of12(b2, 'share.loss_scaling_bf16')[0]}). The "
                      f"rest is as it should be: GEMMs ~{rng(b2, 'gemm_share', 0)} %, fused AdamW "
                      f"~{rng(b2, 'optimizer_share', 0)} %, autocast's weight casts and the elementwise kernels.")
    m["measure"] = [{"what": "step period", "query": Q12["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q12["kernels"],
                     "expect": f"_amp_foreach_non_finite_check_and_unscale_ kernels "
                               f"{rng(b2, 'c.gradscaler_check_unscale', 1)} ms per step"}]
    m["new_cause"] = {"name": "loss_scaling_bf16", "why": "dynamic loss scaling (torch.amp.GradScaler) kept under "
                      "bfloat16 autocast, where gradients cannot underflow the way float16 ones do: an inf / NaN check "
                      "and unscale pass over every gradient each step (and, with a non-fused optimizer, a host sync "
                      "for found_inf); fixed by removing the scaler"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- lm_ddp (nccl_p2p_disabled; 2 ranks) -----------------------------------------------------------------------
    Bq, Sq, Vq, dq, Hq, Lq = (DDPC[k] for k in ("batch", "seq", "vocab", "d", "heads", "blocks"))
    args = ["--batch", Bq, "--seq", Sq, "--vocab", Vq, "--d-model", dq, "--heads", Hq, "--blocks", Lq]
    b, b2, keys = ev(m_ddp)
    bf2 = ev(lambda r: m_ddp(r, fixed=True))[1]
    m = base("lm_ddp", "lm_ddp.py", "planted", args, steps=DDPC["steps"], est=75, ranks=DDPC["ranks"])
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", attention=True, ddp=True,
                     sequences=f"{Bq} sequences of {Sq} tokens per rank (no padding)", host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, is_causal=True, {Hq} heads of {dq // Hq}"
    m["uses"]["nccl_env"] = "NCCL_P2P_DISABLE=1 set by the program before init_process_group (not in the launch env)"
    m["techniques"] = techniques(
        "remove NCCL_P2P_DISABLE=1 (and any NCCL_P2P_LEVEL / NCCL_SHM settings copied from workstation scripts) so NCCL "
        "uses NVLink between the GPUs; check with NCCL_DEBUG=INFO that the channels say P2P/CUMEM or NVLS, not SHM",
        ["larger buckets / gradient_as_bucket_view / bucket tuning as the top fix (the transport is 10x slower, not the "
         "bucketing)", "gradient compression (bf16 / PowerSGD hooks) as the top fix",
         "no_sync / gradient accumulation as the fix", "a straggler rank (the ranks are symmetric)",
         "CUDA graphs / launch overhead", "FSDP / ZeRO as the fix", "a faster interconnect (NVLink is there, unused)",
         "data loading / pinned memory (data on the GPU)"])
    m["planted"] = [planted12(
        "nccl_p2p_disabled", {"ranks": [0, 1], "region": f"step_N > backward into step_N > optimizer: the "
                              f"{b2['buckets'][0]:.0f} bucket all-reduces ({b2['grad_gb'][0]:.2f} GB of fp32 gradients "
                              f"per rank) run one after another on NCCL's stream at host-memory (SHM) speed, far longer "
                              f"than the backward, and the optimizer waits for the last one"},
        "NCCL_P2P_DISABLE unset: NVLink (--fixed; not captured)", b, "rm.nccl_p2p_disabled", "share.nccl_p2p_disabled",
        f"{b2['params_m'][0]:.0f} M parameters (the head tied to the embedding), {Bq * Sq} tokens per rank. Compute per "
        f"rank (same either way): GEMMs {rng(b2, 'gemm_ms')} ms at 550-800, causal attention "
        f"{rng(b2, 'attention_ms')} ms, fp32 cross-entropy, elementwise, casts and DDP's bucket copies: forward "
        f"{rng(b2, 'c.forward')} ms, backward {rng(b2, 'backward_ms')} ms on an H200. DDP all-reduces "
        f"{b2['grad_gb'][0]:.2f} GB of fp32 gradients per step in {b2['buckets'][0]:.0f} buckets (25 MiB; the 268 MB "
        f"embedding alone, last). With NCCL_P2P_DISABLE=1 NCCL carries them through host shared memory at 8-30 GB/s: "
        f"{rng(b2, 'allreduce_ms')} ms of all-reduce per step, all but the backward's length exposed "
        f"({rng(b2, 'c.allreduce_exposed_after_backward')} ms after the backward ends). Over NVLink at 200-300 GB/s the "
        f"same all-reduces take {rng(b2, 'after_allreduce_ms')} ms, hidden behind the backward except the last bucket's "
        f"{rng(b2, 'after_exposed_ms')} ms. Step {rng(b2, 'step')} ms (host {rng(b2, 'host_ms')} ms); fixed "
        f"{rng(b2, 'after')} ms: removed {rng(b2, 'rm.nccl_p2p_disabled')} ms = {rng(b2, 'share.nccl_p2p_disabled', 1)} "
        f"% (H100 {rng(b, 'share.nccl_p2p_disabled', 1)} %), {rng(b2, 'slowdown', 1)}x. New cause name: "
        f"nccl_p2p_disabled.",
        ["nccl_p2p_disabled", "comm_transport_degraded", "slow_interconnect", "exposed_communication"], b2)]
    m["tolerated"] = [{"what": "the fp32 cross-entropy over 8192 x 32768 logits and the LayerNorm / cast / residual "
                               "kernels (memory-bound)", "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "autocast's per-step weight casts", "cause": "autocast_weight_cast",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        "both ranks alike (no straggler)",
        f"{b2['buckets'][0]:.0f} ncclDevKernel_AllReduce kernels per step and rank, each ~1-3 ms for 25 MiB (achieved "
        f"8-30 GB/s where NVLink gives 200-300), back to back from early in the backward until well after it",
        "the optimizer's fused AdamW starting only after the last all-reduce",
        "GEMMs, SDPA and elementwise kernels as in a one-GPU run"]
    m["must_not"] = [
        "a straggler or imbalanced rank", "the compute (GEMMs, attention) as the cause",
        "bucket size or gradient_as_bucket_view as the main fix",
        "the hardware / NVLink as slow (NCCL was told not to use it)",
        "data loading or host-to-device copies", "a host sync in the loop as the cause"]
    m["expect_quiet"] = False
    m["question"] = (f"We train a {b2['params_m'][0]:.0f} M-parameter GPT-style model with DDP on 2 H200s connected by "
                     f"NVLink ({Lq} blocks of d {dq}, {Bq} x {Sq} tokens per GPU, bf16 autocast, fused AdamW). Going "
                     f"from one GPU to two made each step much slower than the one-GPU step, instead of keeping it "
                     f"about the same. What is wrong?")
    m["diagnosis"] = (f"The gradient all-reduces are crawling: DDP's {b2['buckets'][0]:.0f} bucket all-reduces "
                      f"({b2['grad_gb'][0]:.1f} GB per step) take {rng(b2, 'allreduce_ms', 0)} ms, i.e. 8-30 GB/s, where "
                      f"NVLink between two H200s gives 200-300 GB/s, so they run far past the backward and the "
                      f"optimizer waits ({rng(b2, 'step', 0)} ms per step against ~{rng(b2, 'after', 0)} ms). The "
                      f"program sets NCCL_P2P_DISABLE=1 (copied from workstation scripts for GPUs without P2P), so NCCL "
                      f"routes the traffic through host shared memory instead of NVLink. Remove it (check NCCL_DEBUG=INFO "
                      f"shows P2P / NVLink channels): {rng(b2, 'share.nccl_p2p_disabled', 0)} % of the step removed "
                      f"(critical). The ranks are balanced and the compute is normal; bucket tuning or compression would "
                      f"only shave the symptom.")
    m["measure"] = [{"what": "step period per rank", "query": Q12["step"] + " (both ranks)", "expect_ms": r2(b2["step"])},
                    {"what": "NCCL kernels", "query": Q12["nccl"],
                     "expect": f"{b2['buckets'][0]:.0f} all-reduces per step and rank, {rng(b2, 'allreduce_ms', 0)} ms "
                               f"together ({b2['grad_gb'][0]:.2f} GB: 8-30 GB/s achieved)"},
                    {"what": "NCCL vs compute", "query": Q12["split"],
                     "expect": "a long NCCL-only stretch after the backward in every step"}]
    m["new_cause"] = {"name": "nccl_p2p_disabled", "why": "NCCL forced off the GPUs' direct path (NCCL_P2P_DISABLE=1, "
                      "NCCL_P2P_LEVEL too low, a container without the IPC it needs): collectives between GPUs of one "
                      "host go through host memory (SHM) or sockets at a tenth of NVLink's bandwidth or less; fixed by "
                      "removing the setting (or fixing the container), confirmed by NCCL_DEBUG=INFO's transport lines"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.h200_table)
