#!/usr/bin/env python3
"""First-principles truth for the fourteenth held-out set (heldout14): writes heldout14/manifests/<case>.json from FLOPs,
bytes, call counts and rate bands alone (no capture, no aisp output, no GPU run), with the helpers of ../derive.py.

    python3 workloads/planted/heldout14/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout14/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout14/derive.py --table    # the table only

Method: as ../derive.py and heldout11-13/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or calls x a host cost per call; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the GPU (for the 2-rank
case: of either rank, the ranks being symmetric).

Severity (as heldout11-13): info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical; each planted problem
also carries `severity_legacy` under the bands of the earlier sets (info < 1 % <= low < 5 % <= medium < 15 % <= high <
40 % <= critical), so that both readings are on record.

Made for H200s, like heldout11-13: four one-GPU programs, one of them with a captured fixed variant (a before/after
pair), and one 2-rank DDP program (torchrun --nproc_per_node=2): the set needs an nvidia-h200-x2 host for its multi
phase. Every model gives the host time of a step (Python ops x eager_op_us + view-like ops x view_op_us + backward
nodes x bwd_node_us) beside the GPU time and takes the larger, so that a GPU-bound case is checked at every corner
(host_margin_ms). The 2-rank case is the exception by design: its planted problem drains the GPU queue every step, so
its step is GPU work + the host's tail after the first .item() + the restart of the next step (modelled explicitly).
Lessons of the earlier sets kept in mind: no SDPA call whose shapes change every step (heldout11's decode rebuilt a
cuDNN attention graph per token and turned host-bound), so the decode case writes its attention with two matmuls.
Software assumed: the capture image's recent PyTorch (2.9-2.10) with CUDA 13 and cuDNN 9, on sm_90.
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
ADAM_B, GB, Q, AMP_B = D.ADAM_B, D.GB, D.Q, D.AMP_B
pct, r2, rng, techniques, uses = D.pct, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link

SET = "heldout14"

# ---------------------------------------------------------------------------------------------------
# Severity bands (heldout11-13's; see the docstring).
BANDS14 = [(1.0, "info"), (3.0, "low"), (10.0, "medium"), (25.0, "high"), (math.inf, "critical")]
SEV_DOC14 = ("info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical, of the device's steady step period "
             "(severity_legacy: the earlier sets' info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical)")


def band14(p):
    for edge, name in BANDS14:
        if p < edge:
            return name
    return "critical"


def band_of14(b, key):
    lo, hi = b[key]
    return band14((lo + hi) / 2), [band14(lo), band14(hi)]


# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; fractions and factors as named.
NEW_H100 = {
    # copied from heldout2-13 (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "bf16_narrow_tflops": (400.0, 700.0),
    "eager_op_us": (20.0, 70.0),
    "view_op_us": (3.0, 10.0),
    "tiny_kernel_us": (2.0, 6.0),
    "bwd_node_us": (10.0, 30.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    "nccl_small_gpu_us": (8.0, 25.0),
    "ddp_hook_us": (2.0, 5.0),
    "sync_rtt_us": (10.0, 40.0),
    "ew_amp_block_b": (140.0, 220.0),
    "ce_fp32_b": (30.0, 42.0),
    "gemv_eff": (0.6, 0.9),
    # new here
    "unaligned_gemm_slowdown": (2.0, 4.0),
    "mat_attn_b": (60.0, 72.0),
    "softmax_eff": (0.6, 0.9),
    "mha_copy_b": (12.0, 36.0),
    "attn_s750_train_tflops": (150.0, 400.0),
    "conv1d_tflops": (120.0, 450.0),
    "cast_eff": (0.55, 0.95),
    "decode_attn_eff": (0.35, 0.85),
    "attn_s128_train_tflops": (60.0, 220.0),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 2048 or less (or a varying M): below the 8192^3 rate (732-787 "
                       "measured) as tiles and waves shrink and the epilogue's writes weigh more; an assumption widened "
                       "down to 550 (heldout2-13; heldout13/measured.json: ViT-B GEMMs at ~713, text-tower GEMMs with "
                       "K = 512 at 676). Used for every GEMM whose smallest dimension is 513-2048",
    "bf16_narrow_tflops": "bf16 GEMMs whose smallest dimension is 512 or less (here the 504-way classifier of the speech "
                          "encoder, and the bound on the explicit attention's batched matmuls with K or N = 64): 400-700 "
                          "(heldout13's assumption)",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing: 29-36 µs "
                   "measured (quoted by ../derive.py), ~70 implied by heldout2, ~39 in heldout13/measured.json "
                   "(zeroshot_clip.fixed: ~200 ops in a 7.86 ms host step); band 20-70 (heldout3-13)",
    "view_op_us": "host time of one view-like op issued from Python (view, transpose, unbind, a slice, a .to() that "
                  "returns its input) or of an autocast weight cast made inside an op's dispatch: 3-10 µs (heldout13)",
    "tiny_kernel_us": "GPU time of one tiny kernel (a scalar op, a reduction over a few thousand elements, an "
                      "elementwise op on 32 x 2048 values) in a chain of dependent kernels, including the launch latency "
                      "to the next one when the host is ahead: 2-6 µs (assumption of heldout7-13)",
    "bwd_node_us": "host time of one backward node in the C++ autograd engine (the node's function, 1-3 kernel launches "
                   "at 4-10 µs under CUPTI, the ready-queue bookkeeping): 10-30 µs (assumption of heldout9-13)",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: "
                     "torch busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (quoted by heldout2/derive.py); "
                     "band 200-300 (heldout3-13; heldout13/measured.json: ~316 GB/s for one 1.2 GB message)",
    "nccl_small_gpu_us": "fixed GPU time of one NCCL collective on 2 H200 (launch, the protocol's handshakes), charged "
                         "once per DDP bucket or tiny collective (an all-gather of 8 bytes or of a pickled dict, an "
                         "all-reduce of 6 floats): 8-25 µs (heldout11-13)",
    "ddp_hook_us": "host time of DDP's autograd hook per parameter (marking it ready in its bucket): 2-5 µs "
                   "(heldout11-13)",
    "sync_rtt_us": "a device-to-host synchronization once the GPU has drained (an .item(), a blocking .cpu() or "
                   "pageable .to('cuda') of a few bytes, bool() of a CUDA tensor): the copy, cudaStreamSynchronize's "
                   "return and the thread's wake-up: 10-40 µs (heldout11's assumption)",
    "ew_amp_block_b": "bytes per token x d_model per transformer block of the elementwise work around the GEMMs under bf16 "
                      "autocast with an fp32 residual stream, forward and backward (LayerNorms in fp32 and their casts, "
                      "residual adds, GELU on the 4 x d hidden, the head-merge copy, q/k/v gradient stacking): 140-220 "
                      "(heldout12-13)",
    "ce_fp32_b": "bytes per logit of F.cross_entropy under bf16 autocast (autocast runs it in float32): the cast of the "
                 "bf16 logits, log_softmax, nll, and the backward: 30-42 (heldout12-13)",
    "gemv_eff": "fraction of the HBM rate reached by GEMMs with M = 32 rows (decode: the weights stream once per token): "
                "0.6-0.9 (heldout11's assumption for M = 8)",
    "unaligned_gemm_slowdown": "time of a bf16 GEMM one of whose matrices has a leading dimension of 50257 elements "
                               "(100 514 bytes: not a multiple of 16, so no TMA loads or stores, and cuBLAS falls back "
                               "to kernels with 2-byte alignment, cutlass_75/80 *_align1 class, or to non-TMA sm90 "
                               "ones) relative to the same GEMM with the dimension padded to 50304: an LM head about "
                               "3x slower with a misaligned vocabulary (Netflix, 'Scaling LLM post-training', 2026, "
                               "vocabularies of 128003 / 50257 / 32003 rounded to multiples of 64); pytorch/pytorch issue "
                               "181718 (an RTX 4090, align1 kernels ~1.35x slower than aligned ones) and issue 146817 "
                               "(an A100, a 32x32 wmma align1 kernel picked for odd sizes, up to 100x) bound it below and "
                               "above; band 2-4x around Netflix's 3x (assumption; the pair's capture measures it)",
    "mat_attn_b": "bytes moved per element of the [B x H, S, S] score tensor by nn.MultiheadAttention's need_weights "
                  "path under bf16 autocast, forward and backward: bmm writes the bf16 scores (2); softmax under "
                  "autocast runs with dtype=float32, which for bf16 (only Half has the fused half_to_float kernel, "
                  "aten/src/ATen/native/SoftMax.cpp) is a cast (r2 w4) then a float32 softmax (r4 w4, up to 4 more if "
                  "the 750-wide rows are re-read); the second bmm's autocast cast of the probabilities (r4 w2) and its "
                  "read (2); the mean over the heads (r4); backward: the probabilities' gradient written in bf16 (2) and "
                  "the bf16 copy read for v's gradient (2), the cast's backward (r2 w4), softmax's backward (r4 r4 w4, "
                  "up to 4 more), the input cast's backward (r4 w2), the two gradients of q @ k^T reading the scores' "
                  "gradient (2 + 2): 60-72 (count from F.multi_head_attention_forward and the autocast policy)",
    "softmax_eff": "fraction of the HBM rate reached by those score-sized kernels (softmax forward / backward over rows of "
                   "750, casts, the mean over heads, the batched matmuls' score reads and writes with K or N = 64): "
                   "0.6-0.9 (assumption)",
    "mha_copy_b": "extra bytes per token x d_model per block of nn.MultiheadAttention's own copies, either path: the "
                  "in-projection's unflatten / transpose / .contiguous() into [3, S, B, d] (r2 w2 over 3d) and, in the "
                  "backward, the three select-backwards that zero-fill and fill that buffer, the batch-first transposes "
                  "and the output's transpose-.contiguous(): 12-36 (assumption)",
    "attn_s750_train_tflops": "F.scaled_dot_product_attention forward + backward, bf16, head_dim 64, non-causal, 750 "
                              "tokens, counted as 12*B*S^2*d (forward 4, backward 8): between heldout13's 197-token band "
                              "(80-250) and heldout9's long-sequence band (200-450 counted as 14*B*S^2*d); 150-400 "
                              "(assumption)",
    "conv1d_tflops": "cuDNN bf16 Conv1d (kernel 3) on NCL tensors with 80 or 1024 input channels (implicit GEMMs with "
                     "K = 240 or 3072), forward and gradients, including its layout conversions: 120-450 (assumption, "
                     "around heldout11-13's convolution bands)",
    "cast_eff": "fraction of the HBM rate reached by the float32 -> bf16 copy of the cache's used part "
                "(cache[:, :, :n].to(bf16): 512 contiguous runs of n x 128 values; a strided source may send TensorIterator to its "
                "non-vectorized kernel with per-element offset arithmetic): 0.55-0.95 (assumption; a contiguous DtoD "
                "copy runs at ~4.3 TB/s on an H200, KINDS.md)",
    "decode_attn_eff": "fraction of the HBM rate reached by the decode attention's batched matmuls reading the keys and "
                       "the values (torch.matmul with M = 1 per (request, head): 512 GEMV-like products over n x 128 "
                       "bf16 each, cuBLAS strided-batched): 0.35-0.85 (assumption)",
    "attn_s128_train_tflops": "F.scaled_dot_product_attention forward + backward, bf16, head_dim 64, non-causal, 128 "
                              "tokens, counted as 12*B*S^2*d: one 128-row tile per (sequence, head); 60-220 (assumption, "
                              "below heldout13's 197-token band)",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q14 = dict(Q)
Q14.update({
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
    """The four GEMMs of a block with a 4x MLP (fused QKV, output projection, fc1, fc2) over T tokens."""
    return (gemm(r, T, d, 3 * d, mult) + gemm(r, T, d, d, mult) + gemm(r, T, d, 4 * d, mult)
            + gemm(r, T, 4 * d, d, mult))


def finish_gpu_host(out, gpu_ms, host_ms):
    out["gpu_ms"] = gpu_ms
    out["host_ms"] = host_ms
    out["host_margin_ms"] = gpu_ms - host_ms
    return out


def step_of(c, gpu, host):
    """The step of a model whose host runs ahead: the larger of GPU and host; the difference is booked as GPU idle."""
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    return step


BLOCK_OPS_FWD = 15  # Python ops of one pre-LN block's forward: ln1, qkv, view, permute, unbind (or split + views and
# transposes, counted alike), sdpa, transpose, reshape, proj, add, ln2, fc1, gelu, fc2, add (heldout13)
BLOCK_CASTS = 4     # autocast's weight casts per block (qkv, proj, fc1, fc2), made inside the linear's dispatch
BLOCK_BWD_NODES = 23  # backward nodes of one block under autocast (heldout13)
EVENT_SYNC = "event sync on the previous step (lag 1: never idles the GPU)"


# ---------------------------------------------------------------------------------------------------
# gpt_pretrain: GPT-2-style LM, d 1024, 12 blocks (16 heads of 64), 16 x 1024 tokens, bf16 autocast over fp32 weights,
# fused AdamW; tied embedding / head with as many rows as the tokenizer (50257, odd: every head GEMM misaligned) unless
# fixed (rows padded to 50304).
GP = dict(batch=16, seq=1024, vocab=50257, pad=64, d=1024, heads=16, blocks=12, steps=16)
GP_BLOCK_OPS = BLOCK_OPS_FWD + 3  # + the split's 3 views counted apart from the transposes
GP_OTHER_OPS = 22   # id / target slices, embedding, position slice, add, final norm, tied head, view, reshape,
# cross-entropy, autocast enter / exit, backward call, fused AdamW (~3), zero_grad, loss copy, event record and wait
GP_OTHER_NODES = 12  # embedding, position slice and add, final norm, head (mm + the weight cast), view, cross-entropy
# (log_softmax, nll) and its casts


def gp_rows(fixed):
    V, pad = GP["vocab"], GP["pad"]
    return (V + pad - 1) // pad * pad if fixed else V


def gp_params(rows):
    S, d, L = GP["seq"], GP["d"], GP["blocks"]
    return float(rows * d + S * d + L * (12 * d * d + 13 * d) + 2 * d)


def m_gp(r, fixed=False):
    B, S, d, L = (GP[k] for k in ("batch", "seq", "d", "blocks"))
    T = float(B * S)
    rows = gp_rows(fixed)
    P = gp_params(rows)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    head_aligned = gemm(r, T, d, rows, 3.0)  # forward, input gradient, weight gradient
    c = {"block_gemm_bf16": L * block_gemms(r, T, d, 3.0),
         "attention_causal": t_flops(L * 7.0 * B * S * S * d, r["attn_tflops"]),
         "block_elementwise": t_bytes(L * r["ew_amp_block_b"] * T * d, hbm),
         "lm_head_gemm": head_aligned * (1.0 if fixed else r["unaligned_gemm_slowdown"]),
         "cross_entropy_fp32": t_bytes(r["ce_fp32_b"] * T * rows, hbm) + 4 * tiny,
         # forward: token gather (r4 w4), position add (r4 r4 w4); backward: the position gradient (a sum over the batch,
         # r4), the token rows summed into a zero-filled [rows, d] gradient (~8 B per token x d, w4 rows x d) and added to
         # the tied head's weight gradient (r4 r4 w4 rows x d)
         "embeddings": t_bytes(32.0 * T * d + 16.0 * rows * d, hbm) + 8 * tiny,
         "autocast_weight_casts": t_bytes(AMP_B * P, hbm),
         "adamw_fused_fp32": t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny}
    gpu = sum(c.values())
    host = ((L * GP_BLOCK_OPS + GP_OTHER_OPS) * r["eager_op_us"] + L * BLOCK_CASTS * r["view_op_us"]
            + (L * BLOCK_BWD_NODES + GP_OTHER_NODES) * r["bwd_node_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "rows": rows,
                           "head_tflop": 6.0 * T * d * rows / 1e12, "head_aligned_ms": head_aligned}, gpu, host)
    out["head_share"] = pct(c["lm_head_gemm"], step)
    out["gemm_share"] = pct(c["block_gemm_bf16"] + c["lm_head_gemm"], step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = m_gp(r, fixed=True)
    rm = {"misaligned_gemm_dims": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "after_head_ms": fx["c"]["lm_head_gemm"],
                "after_head_share": fx["head_share"], "after_gemm_share": fx["gemm_share"]})
    return out


# ---------------------------------------------------------------------------------------------------
# speech_ssl: HuBERT-style encoder, 16 x 1500 log-mel frames -> conv front end (stride 2: 750 frames) -> 8 pre-LN blocks
# of width 1024 with nn.MultiheadAttention (16 heads of 64) called with need_weights at its default (True): explicit
# bmm / softmax / bmm / mean over heads; unless fixed (need_weights=False: SDPA).
SP = dict(batch=16, frames=1500, mels=80, d=1024, heads=16, blocks=8, targets=504, span=10, steps=16)
SP_BLOCK_HEAVY = 16   # ln1, in-projection linear, the packing .contiguous(), q * scale, bmm, softmax (its cast inside),
# bmm (its autocast cast inside), the output's .contiguous(), out-projection linear, mean over heads, add, ln2, fc1,
# gelu, fc2, add
SP_BLOCK_HEAVY_FIXED = 12  # the same without q * scale, two bmm, softmax, mean; with one SDPA call
SP_BLOCK_VIEWS = 21   # MultiheadAttention's Python: the batch-first transposes, unflatten / unsqueeze / transpose /
# squeeze, 3 selects, 3 views, 3 transposes, k.transpose, views of the output and of the weights, the mask / shape
# checks (~4)
SP_BLOCK_NODES = 35   # LayerNorms, 4 linears (addmm, t, the weight cast), the packing copy and 3 select-backwards, mul,
# 2 bmm, softmax, 2 casts, transposes / views, gelu, 2 adds
SP_BLOCK_NODES_FIXED = 30
SP_OTHER_OPS = 24     # conv1, gelu, conv2, gelu, transpose, mask_emb cast, where, position add, final norm, head, 2
# reshapes, cross-entropy, autocast enter / exit, backward call, fused AdamW (~3), zero_grad, loss copy, event record and
# wait
SP_OTHER_NODES = 16


def sp_params():
    d, L, M, K = SP["d"], SP["blocks"], SP["mels"], SP["targets"]
    stem = M * 3 * d + d + d * 3 * d + d
    return float(stem + d + L * (12 * d * d + 13 * d) + 2 * d + d * K + K)


def m_sp(r, fixed=False):
    B, F_, d, H, L, K = (SP[k] for k in ("batch", "frames", "d", "heads", "blocks", "targets"))
    S = (F_ + 1) // 2
    T = float(B * S)
    Ns = float(B * H * S * S)  # score elements per block
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P = sp_params()
    conv_flops = 2 * (2.0 * B * F_ * (SP["mels"] * 3) * d) + 3 * (2.0 * B * S * (3 * d) * d)  # conv1: forward + weight
    # gradient; conv2: forward + both gradients
    c = {"stem_conv": t_flops(conv_flops, r["conv1d_tflops"])
                      # GELU on both conv outputs (r2 w2, backward r2 r2 w2), the masked where and the position add on
                      # [T, d] (r2 r2 w2, r2 r4 w4) and their backward
                      + t_bytes(10.0 * B * F_ * d + 10.0 * T * d + 24.0 * T * d, hbm) + 6 * tiny,
         "block_gemm_bf16": L * block_gemms(r, T, d, 3.0),
         "block_elementwise": t_bytes(L * (r["ew_amp_block_b"] + r["mha_copy_b"]) * T * d, hbm),
         # final LayerNorm (r4 w4 forward, ~12 backward), the 504-way head, the float32 cross-entropy (~42 B per logit)
         "head_loss": gemm(r, T, d, K, 3.0) + t_bytes(20.0 * T * d + 42.0 * T * K, hbm) + 6 * tiny,
         "autocast_weight_casts": t_bytes(AMP_B * P, hbm),
         "adamw_fused_fp32": t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny}
    attn_flops = L * 12.0 * B * S * S * d
    if fixed:
        c["attention_sdpa"] = t_flops(attn_flops, r["attn_s750_train_tflops"])
        heavy, nodes = SP_BLOCK_HEAVY_FIXED, SP_BLOCK_NODES_FIXED
    else:
        per_block = max(t_bytes(r["mat_attn_b"] * Ns, hbm * r["softmax_eff"]),
                        t_flops(12.0 * B * S * S * d, r["bf16_narrow_tflops"]))
        c["attention_explicit_scores"] = L * per_block + L * 10 * tiny
        heavy, nodes = SP_BLOCK_HEAVY, SP_BLOCK_NODES
    gpu = sum(c.values())
    host = ((L * heavy + SP_OTHER_OPS) * r["eager_op_us"] + L * (SP_BLOCK_VIEWS + BLOCK_CASTS) * r["view_op_us"]
            + (L * nodes + SP_OTHER_NODES) * r["bwd_node_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "tokens": T, "scores_m": Ns / 1e6,
                           "scores_gb_per_block": r["mat_attn_b"] * Ns / GB, "attn_tflop": attn_flops / 1e12}, gpu, host)
    out["gemm_share"] = pct(c["block_gemm_bf16"], step)
    if fixed:
        out["attn_share"] = pct(c["attention_sdpa"], step)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["attn_ms"] = c["attention_explicit_scores"]
    out["attn_share"] = pct(c["attention_explicit_scores"], step)
    fx = m_sp(r, fixed=True)
    rm = {"attention_weights_materialized": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "after_attn_ms": fx["c"]["attention_sdpa"]})
    return out


# ---------------------------------------------------------------------------------------------------
# serve_decode: 12-block decoder (d 2048, 16 heads of 128), bf16 weights, 32 requests decoded together after 7680-token
# prompts; the key / value cache allocated without a dtype (float32) and read with .to(bf16) every token unless fixed.
DC = dict(batch=32, prompt=7680, max_len=8192, vocab=32000, d=2048, heads=16, blocks=12, steps=24, warmup=3)
DC_BLOCK_HEAVY = 19   # ln1, qkv, 2 cache writes, 2 casts (.to), matmul, scale, float, softmax, to, matmul, proj, add,
# ln2, fc1, gelu, fc2, add
DC_BLOCK_HEAVY_FIXED = 17  # the two .to() return their input (counted as view-like)
DC_BLOCK_VIEWS = 8    # view, unbind, 2 cache slices, unsqueeze, transpose, reshape, the module call
DC_BLOCK_KERNELS = 16  # small kernels per block besides the GEMMs and the cache reads: layer norms, bias / residual adds,
# scale, float, softmax, to, gelu, the 2 cache writes
DC_OTHER_OPS = 8      # embedding, position select + add, final norm, head, argmax, the write into the output buffer,
# event record and wait


def dc_n_mean():
    """Mean attention length over the steady steps (steps warmup..steps-1 attend to prompt + step + 1 positions)."""
    s0, s1 = DC["warmup"], DC["steps"] - 1
    return DC["prompt"] + (s0 + s1) / 2.0 + 1.0


def dc_params():
    V, d, L, M = DC["vocab"], DC["d"], DC["blocks"], DC["max_len"]
    return float(V * d + M * d + L * (12 * d * d + 13 * d) + 2 * d + V * d)


def m_dc(r, fixed=False):
    B, d, H, L, V = (DC[k] for k in ("batch", "d", "heads", "blocks", "vocab"))
    n = dc_n_mean()
    E = 2.0 * B * d * n  # key and value elements read per block and token
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    c = {"kv_attention_read": L * t_bytes(2.0 * E, hbm * r["decode_attn_eff"]),
         # scores and probabilities [B, H, 1, n]: bf16 out of the matmul (2), float (r2 w4), softmax (r4 w4), to bf16
         # (r4 w2), read by the second matmul (2)
         "scores_softmax": L * t_bytes(22.0 * B * H * n, hbm),
         "weights_stream": L * t_bytes(2.0 * 12 * d * d, hbm * r["gemv_eff"]) + t_bytes(2.0 * V * d, hbm * r["gemv_eff"]),
         "small_kernels": (L * DC_BLOCK_KERNELS + 6) * tiny}
    if not fixed:
        c["kv_cache_cast_fp32_to_bf16"] = L * t_bytes(6.0 * E, hbm * r["cast_eff"])  # read float32 (4), write bf16 (2)
        heavy, views = DC_BLOCK_HEAVY, DC_BLOCK_VIEWS
    else:
        heavy, views = DC_BLOCK_HEAVY_FIXED, DC_BLOCK_VIEWS + 2
    gpu = sum(c.values())
    host = ((L * heavy + DC_OTHER_OPS) * r["eager_op_us"] + L * views * r["view_op_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "params_m": dc_params() / 1e6, "n_mean": n,
                           "kv_gb_bf16": 2.0 * E * L / GB,
                           "cache_gb": 2.0 * L * B * H * DC["max_len"] * (d // H) * (2 if fixed else 4) / GB},
                          gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["cast_ms"] = c["kv_cache_cast_fp32_to_bf16"]
    out["cast_share"] = pct(c["kv_cache_cast_fp32_to_bf16"], step)
    out["cast_gb"] = 6.0 * E * L / GB
    fx = m_dc(r, fixed=True)
    rm = {"kv_cache_wide_dtype": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# ctr_accum: DCN-v2-style ranking model (26 fields x 2048 buckets x 128, 2 cross layers of 3456, deep 3456 -> 8192 x 3
# -> 4096 -> 1; 227 M fp32 parameters), bf16 autocast, clip + fused AdamW; 8 micro-batches of 2048 rows per step; the
# clip / step / zero_grad after every micro-batch unless fixed (once per cycle, gradients accumulated).
CT = dict(micro=2048, accum=8, fields=26, buckets=2048, emb=128, dense=13, cross=2, deep=[8192, 8192, 8192, 4096],
          steps=12)
CT_FWD_OPS = 23     # offsets add, embedding, bottom linear, relu, cat, 2 x (linear, mul, add), 4 x (linear, relu), out
# linear, BCE, the division by 8, the backward call, the loss accumulation
CT_VIEWS = 3        # flatten, squeeze, the micro-batch pick
CT_CASTS = 8        # autocast's weight casts (bottom, 2 cross, 4 deep, out) made inside the linears' dispatch
CT_NODES = 40       # 8 linears x (addmm, t, the weight cast), relus, the cross layers' mul / add, cat, embedding, BCE,
# the division
CT_OPT_OPS = 14     # clip_grad_norm_ (grouping, _foreach_norm, stack, norm, add, div, clamp, _foreach_mul_), the norm's
# copy into the log, fused AdamW's step (state steps, one _fused_adamw_ call), zero_grad
CT_OTHER_OPS = 2    # event record and wait


def ct_params():
    Fd, Bk, e, nd, nc = (CT[k] for k in ("fields", "buckets", "emb", "dense", "cross"))
    w = (Fd + 1) * e
    dims = [w] + CT["deep"]
    deep = sum(i * o + o for i, o in zip(dims, dims[1:])) + dims[-1] + 1
    linear = nd * e + e + nc * (w * w + w) + deep
    return float(Fd * Bk * e), float(linear)


def ct_tensors():
    return 1 + 2 + 2 * CT["cross"] + 2 * len(CT["deep"]) + 2


def m_ct(r, fixed=False):
    M, A, Fd, e, nc = (CT[k] for k in ("micro", "accum", "fields", "emb", "cross"))
    w = (Fd + 1) * e
    dims = [w] + CT["deep"]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P_emb, P_lin = ct_params()
    P = P_emb + P_lin
    gem = nc * gemm(r, M, w, w, 3.0) + sum(gemm(r, M, i, o, 3.0) for i, o in zip(dims, dims[1:]))
    # per micro-batch elementwise: each cross layer ~76 B per element of [M, w] (the float32 cast of x for the linear,
    # x0 * y and + x in float32, their backward, the cast's backward, x0's gradient accumulated over the layers); the
    # first deep layer's input cast and its gradient's (r4 w2 twice); ReLUs on the deep tower (r2 w2, backward r2 r2 w2);
    # the cat (r w of [M, w]); the embedding gather and its backward (the zero-filled table gradient, the row sums)
    ew = (nc * 76.0 + 12.0 + 14.0) * M * w + 10.0 * M * sum(CT["deep"]) + 4.0 * P_emb + 20.0 * M * Fd * e
    micro = {"gemm_bf16": gem, "elementwise": t_bytes(ew, hbm) + 30 * tiny,
             "autocast_weight_casts": t_bytes(AMP_B * P_lin, hbm)}
    clip = t_bytes(12.0 * P, hbm) + 6 * tiny   # _foreach_norm (r4), _foreach_mul_ (r4 w4), the norm of the norms
    adam = t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny
    accumulate = t_bytes(12.0 * P, hbm) + 10 * tiny  # .grad += new gradient (r4 r4 w4) once .grad exists
    c = {k: A * v for k, v in micro.items()}
    if fixed:
        c["grad_accumulate"] = (A - 1) * accumulate
        c["clip_grad_norm"] = clip
        c["adamw_fused_fp32"] = adam
        n_opt = 1
    else:
        c["clip_grad_norm"] = A * clip
        c["adamw_fused_fp32"] = A * adam
        n_opt = A
    gpu = sum(c.values())
    host = ((A * CT_FWD_OPS + n_opt * CT_OPT_OPS + CT_OTHER_OPS) * r["eager_op_us"]
            + A * (CT_VIEWS + CT_CASTS) * r["view_op_us"] + A * CT_NODES * r["bwd_node_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "micro_ms": sum(micro.values()),
                           "update_ms": clip + adam, "accumulate_ms": accumulate,
                           "update_gb": (12.0 + ADAM_B[4]) * P / GB,
                           "micro_tflop": 3.0 * 2.0 * M * (nc * w * w + sum(i * o for i, o in zip(dims, dims[1:]))) / 1e12},
                          gpu, host)
    out["optimizer_share"] = pct(c["clip_grad_norm"] + c["adamw_fused_fp32"], step)
    out["cast_share"] = pct(c["autocast_weight_casts"], step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = m_ct(r, fixed=True)
    rm = {"optimizer_per_microbatch": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"],
                "after_optimizer_share": fx["optimizer_share"], "after_cast_share": fx["cast_share"]})
    return out


# ---------------------------------------------------------------------------------------------------
# nli_ddp: 2 ranks, DDP, BERT-base (post-LN, 12 blocks d 768, 12 heads of 64), 256 x 128 tokens per rank, bf16 autocast,
# clip + fused AdamW; every step: 6 metric .item() reads and dist.all_gather_object of the metrics dict, unless fixed
# (metrics stacked on the GPU and all-reduced, no host read).
NL = dict(batch=256, seq=128, vocab=30522, d=768, heads=12, blocks=12, classes=3, ranks=2, steps=20)
DDP_BUCKET_B = 25 * 2 ** 20
NL_OTHER_OPS = 34   # DDP's forward prologue (~5), embedding path (3 lookups / slice, 2 adds, LayerNorm), pooler (slice,
# linear, tanh), classifier, cross-entropy, autocast enter / exit, backward call, clip_grad_norm_ (~8), fused AdamW (~4),
# zero_grad, event record and wait
NL_OTHER_NODES = 14  # embeddings, 2 adds, LayerNorm, pooler (linear, tanh, slice), classifier, cross-entropy and casts
NL_METRIC_OPS = 55   # argmax; 3 .item() reads (loss, accuracy: eq, float, mean; gradient norm); per class 16 ops: 2 eq,
# and, 3 sums, 3 clamps, 3 divisions, 2 muls, add, .item()
NL_METRIC_SYNCS = 6  # loss, accuracy, gradient norm, 3 F1 .item() reads
NL_OBJ_OPS = 24      # all_gather_object: pickle into a ByteStorage, torch.ByteTensor, .to(device) of the bytes and of their
# length, zeros, 2 x (index, unsqueeze), all_gather of the lengths, max (a CUDA tensor comparison), .item(), resize_,
# empty, 2 slices, all_gather of the bytes, 2 x (.type, .cpu()), 2 unpickles (a bytes slice by a CUDA length each);
# rank 0's average
NL_OBJ_SYNCS = 8     # the 2 blocking pageable copies to the GPU, bool() of the comparison, .item(), 2 x .cpu(), 2 x the
# length read through __index__
NL_OBJ_COLLECTIVES = 2
NL_FIX_OPS = 59      # the same metric ops without the .item() reads, stack, all_reduce, division, the history write
NL_FIX_KERNELS = 56  # the tiny kernels they launch
NL_PRE_OPS = 5       # DDP's forward prologue before the first kernel of a step
NL_EMB_OPS = 7       # autocast enter, 3 lookups / slice, 2 adds, LayerNorm


def nl_params():
    d, L, V, K = NL["d"], NL["blocks"], NL["vocab"], NL["classes"]
    emb = V * d + 512 * d + 2 * d + 2 * d
    return float(emb + L * (12 * d * d + 13 * d) + d * d + d + d * K + K), float(emb), float(d * d + d + d * K + K)


def nl_tensors():
    return 5 + 12 * NL["blocks"] + 4


def m_nl(r, fixed=False):
    b, S, d, L, V = (NL[k] for k in ("batch", "seq", "d", "blocks", "vocab"))
    T = float(b * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P, P_emb, P_head = nl_params()
    Pb = 12.0 * d * d + 13.0 * d
    g_blk = block_gemms(r, T, d, 3.0)
    a_blk = t_flops(12.0 * b * S * S * d, r["attn_s128_train_tflops"])
    e_blk = t_bytes(r["ew_amp_block_b"] * T * d, hbm)
    # embeddings: forward 2 gathers and a broadcast position slice (r4 w4), 2 adds (r4 r4 w4), LayerNorm (r4 w4);
    # backward: LayerNorm (~12), the position gradient (a sum over the batch), the token and segment tables' gradients
    # (zero-filled [V, d], row sums ~8 B per token x d)
    emb_fwd = t_bytes(48.0 * T * d, hbm) + 6 * tiny
    emb_bwd = t_bytes(28.0 * T * d + 4.0 * V * d, hbm) + 6 * tiny
    head = 14 * tiny
    cast = lambda k: t_bytes(6.0 * k, hbm)     # autocast's weight cast (forward r4 w2) or its gradient's (r2 w4)
    copy_in = lambda k: t_bytes(8.0 * k, hbm)  # DDP: a gradient copied into its bucket (r4 w4)
    fwd_blk = g_blk / 3.0 + a_blk / 3.0 + 0.4 * e_blk
    fwd = L * fwd_blk + emb_fwd + head / 2 + cast(P - P_emb)
    blk_b = 2.0 * g_blk / 3.0 + 2.0 * a_blk / 3.0 + 0.6 * e_blk + cast(Pb) + copy_in(Pb)
    head_b = head / 2 + cast(P_head) + copy_in(P_head)
    bwd = head_b + L * blk_b + emb_bwd + copy_in(P_emb)
    # DDP's buckets in gradient-ready order: the pooler / classifier, then each block once its backward ends, then the
    # embeddings; 25 MiB buckets, all-reduced one after another on NCCL's stream while the backward goes on
    algbw, lat = r["ar2_algbw_gbs"], r["nccl_small_gpu_us"] / 1e3
    groups = ([(head_b, 4.0 * P_head)] + [(head_b + (i + 1) * blk_b, 4.0 * Pb) for i in range(L)]
              + [(bwd, 4.0 * P_emb)])
    free, comm_total = 0.0, 0.0
    for ready, nbytes in groups:
        n_buckets = max(1, math.ceil(nbytes / DDP_BUCKET_B))
        dur = t_link(nbytes, algbw) + n_buckets * lat
        free = max(free, ready) + dur
        comm_total += dur
    bwd_pen = bwd + r["overlap_penalty"] * min(bwd, comm_total)
    exposed = max(free, bwd_pen) - bwd_pen
    c = {"forward": fwd, "backward_compute": bwd_pen, "ddp_allreduce_exposed": exposed,
         "ddp_bucket_copy_back": t_bytes(8.0 * P, hbm),
         "clip_grad_norm": t_bytes(12.0 * P, hbm) + 6 * tiny,
         "adamw_fused_fp32": t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny}
    n_t = nl_tensors()
    host_main = ((L * BLOCK_OPS_FWD + NL_OTHER_OPS) * r["eager_op_us"] + (L * BLOCK_CASTS + 2) * r["view_op_us"]
                 + (L * BLOCK_BWD_NODES + NL_OTHER_NODES) * r["bwd_node_us"] + n_t * r["ddp_hook_us"]) / 1e3
    main_gpu = sum(c.values())
    # the restart of a step when the queue is empty: DDP's prologue before any kernel, the embedding ops if the host
    # issues them slower than the GPU runs them, and each block's forward if its ops cost the host more than the GPU
    host_blk_fwd = (BLOCK_OPS_FWD * r["eager_op_us"] + BLOCK_CASTS * r["view_op_us"]) / 1e3
    restart = (NL_PRE_OPS * r["eager_op_us"] / 1e3 + max(0.0, NL_EMB_OPS * r["eager_op_us"] / 1e3 - emb_fwd)
               + L * max(0.0, host_blk_fwd - fwd_blk))
    out = {"params_m": P / 1e6, "grad_gb": 4.0 * P / GB, "allreduce_ms": comm_total, "tensors": n_t,
           "gemm_ms": L * g_blk, "attention_ms": L * a_blk, "elementwise_ms": L * e_blk, "backward_ms": bwd,
           "fwd_ms": fwd, "host_blk_fwd_ms": host_blk_fwd, "gpu_blk_fwd_ms": fwd_blk, "main_gpu_ms": main_gpu,
           "buckets": sum(max(1, math.ceil(nb / DDP_BUCKET_B)) for _, nb in groups)}
    if fixed:
        c["metrics_gpu"] = NL_FIX_KERNELS * tiny + lat
        gpu = sum(c.values())
        host = host_main + NL_FIX_OPS * r["eager_op_us"] / 1e3
        step = step_of(c, gpu, host)
        out.update({"c": c, "step": step, "rm": {}, "share": {}, "after": None})
        out["elementwise_share"] = pct(out["elementwise_ms"], step)
        return finish_gpu_host(out, gpu, host)
    # planted: the first .item() waits for the whole step; from there the GPU runs only the tail's tiny kernels while
    # the host works through the metric ops, the .item() reads and all_gather_object (two tiny all-gathers), then the
    # next step restarts from an empty queue
    tail = ((NL_METRIC_OPS - 1 + NL_OBJ_OPS) * r["eager_op_us"] + (NL_METRIC_SYNCS + NL_OBJ_SYNCS) * r["sync_rtt_us"]
            + NL_OBJ_COLLECTIVES * r["nccl_small_gpu_us"]) / 1e3
    c["metrics_tail_gpu_idle"] = tail
    c["restart_gpu_idle"] = restart
    gpu_busy = main_gpu
    step = main_gpu + tail + restart
    host = host_main + (NL_METRIC_OPS + NL_OBJ_OPS) * r["eager_op_us"] / 1e3
    out.update({"c": c, "step": step, "tail_ms": tail, "restart_ms": restart, "idle_ms": tail + restart})
    out["elementwise_share"] = pct(out["elementwise_ms"], step)
    out["idle_share"] = pct(tail + restart, step)
    finish_gpu_host(out, gpu_busy, host)
    fx = m_nl(r, fixed=True)
    rm = {"object_collective": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "after_exposed_ms": fx["c"]["ddp_allreduce_exposed"]})
    return out


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=25, warmup=3, ranks=1):
    return D.base(name, f"heldout14/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def planted14(cause, where, fix, b, key_rm, key_share, derivation, accept, b2):
    sev, sev_rng = band_of14(b2, key_share)
    return {"cause": cause, "accept_causes": accept, "where": where, "fix": fix, "top": True,
            "removed_ms": {"h100": r2(b[key_rm]), "h200": r2(b2[key_rm])},
            "share_pct": {"h100": r2(b[key_share]), "h200": r2(b2[key_share])},
            "severity": sev, "severity_range": sev_rng,
            "severity_legacy": D.band_of(b2, key_share)[0], "severity_legacy_range": D.band_of(b2, key_share)[1],
            "derivation": derivation}


def finish(m, b, b2, keys, after=True, fixed_case=None):
    m["severity_bands"] = SEV_DOC14
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
    "gpt_pretrain": "~620 per step: per block forward 2 LayerNorms (fp32), 4 GEMMs, one causal SDPA, GELU, casts, adds; the "
                    "backward about twice that; the tied head: one GEMM writing [16384, 50257] bf16 logits and two "
                    "gradient GEMMs reading their gradient, all three with a leading dimension of 50257 (cuBLAS kernels "
                    "for 2-byte alignment instead of the nvjet TMA kernels of the blocks), the float32 cross-entropy, "
                    "the embedding backward, fused AdamW",
    "gpt_pretrain.fixed": "the same ~620, the head's three GEMMs now on [16384, 50304] with aligned leading dimensions "
                          "(the same kernel family as the blocks' GEMMs)",
    "speech_ssl": "~560 per step: the two Conv1d of the front end (cuDNN, forward and gradients), then per block forward "
                  "2 LayerNorms, the in-projection GEMM, a packing copy, q * scale, a batched GEMM writing [256, 750, "
                  "750] bf16 scores, a cast to float32 and a softmax over them, a cast back to bf16, a second batched "
                  "GEMM with v, the head-merge copy, the out-projection, the mean of the float32 probabilities over the "
                  "16 heads, GELU MLP, adds; the backward walks the same score-sized tensors (bmm gradients, "
                  "softmax_backward, casts); the head, the cross-entropy, fused AdamW",
    "speech_ssl.fixed": "~400 per step: per block one fused attention kernel forward and one backward in place of the "
                        "score-sized kernels",
    "serve_decode": "per token ~205, no NVTX: per block a LayerNorm, the QKV GEMM (M = 32), 2 cache writes, two "
                    "float32 -> bf16 copy kernels of the used cache (keys and values, ~0.5 G values each), a batched "
                    "matmul of q with the keys, scale, float, softmax, a cast, a batched matmul with the values, the "
                    "out-projection, the MLP's 2 GEMMs and GELU, adds; then the embedding gather of the next tokens "
                    "(once per token), the final LayerNorm, the head GEMM and the argmax",
    "serve_decode.fixed": "per token ~180: the same without the two cache copies per block",
    "ctr_accum": "per step 8 x (~45 forward / backward kernels: the embedding gather, 8 GEMMs forward and ~15 backward, "
                 "ReLUs, the cross layers' float32 mul / add, casts, BCE) and 8 x (clip_grad_norm_'s _foreach_norm and "
                 "_foreach_mul_ multi-tensor kernels, fused AdamW's multi_tensor_apply kernels over all 227 M "
                 "parameters): 8 optimizer bursts per step_N, one after each micro-batch's backward",
    "ctr_accum.fixed": "per step 8 x the forward / backward kernels, with the gradient accumulation adds from the 2nd "
                       "micro-batch on, then one clip and one fused AdamW burst",
    "nli_ddp": "per rank per step ~1000: per block forward 4 GEMMs, SDPA over 128 tokens, 2 LayerNorms (fp32), GELU, "
               "casts, adds; the backward about twice that; ~29 DDP bucket all-reduces on NCCL's stream during the "
               "backward and DDP's bucket copies; clip and fused AdamW; then step_N > logging: ~55 tiny kernels (argmax, "
               "compares, sums, divisions) interleaved with 6 device-to-host copies of one value, then all_gather_object's "
               "2 host-to-device copies of a few hundred bytes, 2 tiny ncclDevKernel_AllGather and 4 device-to-host "
               "copies, the GPU idle in between",
    "nli_ddp.fixed": "per rank the same, step_N > logging as ~56 tiny kernels and one tiny all-reduce queued behind the "
                     "optimizer, no device-to-host copy",
}


def build():
    out = {}

    # ---- gpt_pretrain (misaligned_gemm_dims) and gpt_pretrain.fixed ---------------------------------------------------
    Bg, Sg, Vg, dg, Hg, Lg = (GP[k] for k in ("batch", "seq", "vocab", "d", "heads", "blocks"))
    Tg = Bg * Sg
    Vf = gp_rows(True)
    args = ["--batch", Bg, "--seq", Sg, "--vocab", Vg, "--d-model", dg, "--heads", Hg, "--blocks", Lg]
    b, b2, keys = ev(m_gp)
    bf, bf2, keys_f = ev(lambda r: m_gp(r, fixed=True))
    m = base("gpt_pretrain", "gpt_pretrain.py", "planted", args, steps=GP["steps"], est=45)
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", attention=True,
                     sequences=f"{Bg} sequences of {Sg} tokens (no padding)", host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, is_causal=True, {Hg} heads of {dg // Hg}"
    m["uses"]["vocabulary"] = (f"tied embedding / LM head with {Vg} rows, the tokenizer's size (odd): logits [{Tg}, {Vg}], "
                               f"rows of {2 * Vg} bytes in bf16")
    m["techniques"] = techniques(
        f"pad the vocabulary dimension of the tied embedding / LM head to a multiple of 64 ({Vg} -> {Vf}; the extra rows "
        f"are never a target), so the logits and their gradient have 16-byte-aligned leading dimensions and the head's "
        f"three GEMMs run on cuBLAS's TMA tensor-core kernels like the rest of the model",
        ["CUDA graphs / launch overhead (GPU-bound)", "flash attention (already SDPA, causal)",
         "fused optimizer (already)", "FP8 / precision changes as the top fix",
         "a fused or chunked cross-entropy as the top fix (the float32 loss is a tolerated secondary)",
         "activation checkpointing", "data loading (ids on the GPU)", "a larger batch as the fix"])
    m["planted"] = [planted14(
        "misaligned_gemm_dims", {"device": "GPU 0", "region": f"the tied LM head: in step_N > forward its GEMM writing the "
                                 f"[{Tg}, {Vg}] bf16 logits, in step_N > backward the two GEMMs reading their gradient "
                                 f"(input gradient and weight gradient); leading dimension {Vg} elements = {2 * Vg} bytes, "
                                 f"not a multiple of 16"},
        f"vocabulary rows padded to {Vf} (--fixed, captured as gpt_pretrain.fixed)", b, "rm.misaligned_gemm_dims",
        "share.misaligned_gemm_dims",
        f"{b2['params_m'][0]:.0f} M parameters (head tied), {Tg} tokens per step. The blocks: GEMMs "
        f"{rng(b2, 'c.block_gemm_bf16')} ms at 550-800 TFLOP/s, causal attention {rng(b2, 'c.attention_causal')} ms, "
        f"elementwise {rng(b2, 'c.block_elementwise')} ms; the float32 cross-entropy over {Vg} classes "
        f"{rng(b2, 'c.cross_entropy_fp32')} ms, embeddings, casts, AdamW ({rng(b2, 'c.adamw_fused_fp32')} ms) on an "
        f"H200. The head is {b2['head_tflop'][0]:.2f} TFLOP per step (forward and both gradients) and would take "
        f"{rng(b2, 'head_aligned_ms')} ms at the same rate as the blocks; with {Vg} rows every one of its GEMMs has a "
        f"matrix whose leading dimension is {2 * Vg} bytes, which rules out TMA (16-byte strides) and the vectorized "
        f"loads of cuBLAS's fast kernels: 2-4x slower (an LM head ~3x slower with a misaligned vocabulary in Netflix's "
        f"measurements), {rng(b2, 'c.lm_head_gemm')} ms. Step {rng(b2, 'step')} ms (GPU-bound: host "
        f"{rng(b2, 'host_ms')} ms); with {Vf} rows {rng(b2, 'after')} ms: removed {rng(b2, 'rm.misaligned_gemm_dims')} ms "
        f"= {rng(b2, 'share.misaligned_gemm_dims', 1)} % (H100 {rng(b, 'share.misaligned_gemm_dims', 1)} %), "
        f"{rng(b2, 'speedup')}x. New cause name: misaligned_gemm_dims.",
        ["misaligned_gemm_dims", "unaligned_vocab", "gemm_alignment", "tensor_core_alignment", "kernel_inefficient"], b2)]
    m["tolerated"] = [{"what": f"the float32 cross-entropy over {Tg} x {Vg} logits (memory-bound, under autocast)",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "LayerNorm / cast / GELU / residual kernels of the blocks (memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "autocast's per-step weight casts", "cause": "autocast_weight_cast", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "GEMMs (nvjet / sm90 kernels), causal SDPA and elementwise kernels as in any GPT-style step, GPU-bound",
        f"the head's three GEMMs (one at the end of step_N > forward, two at the start of step_N > backward) on other "
        f"kernels than the blocks' (cutlass / sm80-class kernels for small alignments, or non-TMA variants) and {rng(b2, 'c.lm_head_gemm', 0)} "
        f"ms per step together, against {rng(b2, 'c.block_gemm_bf16', 0)} ms for the 48 block GEMMs' forward and backward",
        "the float32 cross-entropy kernels between them",
        "no host synchronization but the event wait"]
    m["must_not"] = [
        "the block GEMMs or attention as the cause", "CUDA graphs / launch overhead (GPU-bound)",
        "a host synchronization or a host-bound step as the cause", "data loading or host-to-device copies",
        "the optimizer as the problem (fused)", "the float32 cross-entropy as the top problem",
        "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Here are two profiles of our GPT-2-style pre-training run on one H200 (d {dg}, {Lg} layers, {Bg} x "
                     f"{Sg} tokens per step, bf16 autocast, fused AdamW, LM head tied to the token embedding), before and "
                     f"after a one-line change to the model configuration. How much did the change buy per step, where did "
                     f"the time come from, and what bounds a step now?")
    m["diagnosis"] = (f"Before, the tied embedding / LM head had {Vg} rows (the tokenizer's size, an odd number), so the "
                      f"[{Tg}, {Vg}] logits and their gradient have rows of {2 * Vg} bytes, not a multiple of 16: the head's "
                      f"forward GEMM and its two backward GEMMs cannot use the TMA / vectorized tensor-core kernels and run "
                      f"on slower kernels for small alignments, {rng(b2, 'c.lm_head_gemm', 0)} ms per step for "
                      f"{b2['head_tflop'][0]:.1f} TFLOP (the blocks' GEMMs run the same FLOPs per ms 2-4x faster), in a "
                      f"{rng(b2, 'step', 0)} ms step on the H200. After: the rows are padded to {Vf} (a multiple of 64, "
                      f"the extra rows never used as targets): the head takes ~{rng(b2, 'after_head_ms', 1)} ms, a step "
                      f"{rng(b2, 'after', 0)} ms, {rng(b2, 'share.misaligned_gemm_dims', 0)} % of the step removed "
                      f"({band_of14(b2, 'share.misaligned_gemm_dims')[0]}), {rng(b2, 'speedup', 2)}x. A step is now "
                      f"GPU-bound on its GEMMs (~{rng(bf2, 'gemm_share', 0)} %), then the memory-bound elementwise kernels "
                      f"and the float32 cross-entropy ({rng(bf2, 'c.cross_entropy_fp32', 1)} ms); nothing planted is left.")
    m["measure"] = [{"what": "step period", "query": Q14["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q14["kernels"],
                     "expect": f"the head's 3 GEMMs (names unlike the blocks' nvjet kernels) "
                               f"{rng(b2, 'c.lm_head_gemm', 0)} ms per step"}]
    m["new_cause"] = {"name": "misaligned_gemm_dims", "why": "a GEMM dimension that breaks the 16-byte alignment of a "
                      "leading dimension (an odd vocabulary such as 50257 or 32001, a feature size not a multiple of 8 "
                      "in bf16): cuBLAS cannot use TMA or vectorized loads and falls back to kernels several times "
                      "slower; fixed by padding the dimension to a multiple of 8 (64 or 128 in practice)"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="gpt_pretrain.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("gpt_pretrain.fixed", "gpt_pretrain.py", "fixed", args + ["--fixed"], steps=GP["steps"], est=40)
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", attention=True,
                     sequences=f"{Bg} sequences of {Sg} tokens (no padding)", host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, is_causal=True, {Hg} heads of {dg // Hg}"
    m["uses"]["vocabulary"] = f"tied embedding / LM head with {Vf} rows ({Vg} tokens padded to a multiple of 64)"
    m["techniques"] = techniques(
        "nothing planted is left: a step is the GEMMs, then the memory-bound LayerNorm / GELU / residual kernels and the "
        "float32 cross-entropy; the next gains would come from a fused cross-entropy or fused elementwise kernels, each "
        "modest",
        ["vocabulary padding (done)", "CUDA graphs / launch overhead (GPU-bound)", "flash attention (already)",
         "fused optimizer (already)", "data loading (ids on the GPU)"])
    m["planted"] = []
    m["tolerated"] = [{"what": f"the float32 cross-entropy over {Tg} x {Vf} logits", "cause": "elementwise_unfused",
                       "max_severity": "medium"},
                      {"what": "LayerNorm / cast / GELU / residual kernels (memory-bound)", "cause": "elementwise_unfused",
                       "max_severity": "medium"},
                      {"what": "autocast's per-step weight casts", "cause": "autocast_weight_cast", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "the head's GEMMs on the same kernel family as the blocks' (nvjet / sm90 TMA kernels)",
        f"GEMMs ~{rng(b2, 'gemm_share', 0)} % of the step, GPU-bound, no host synchronization but the event wait"]
    m["must_not"] = ["the head's GEMMs as misaligned or slow", "a host-bound or launch-bound step",
                     "a critical or high problem left"]
    m["expect_quiet"] = False
    m["question"] = "After the change, is anything still holding a step back?"
    m["diagnosis"] = (f"No planted problem is left: {rng(b2, 'step', 1)} ms per step on the H200, GPU-bound (host "
                      f"{rng(b2, 'host_ms', 1)} ms), the GEMMs ~{rng(b2, 'gemm_share', 0)} % of it (the head's "
                      f"{rng(b2, 'c.lm_head_gemm', 1)} ms at the blocks' rate), the rest the memory-bound elementwise "
                      f"kernels ({rng(b2, 'c.block_elementwise', 1)} ms), the float32 cross-entropy "
                      f"({rng(b2, 'c.cross_entropy_fp32', 1)} ms) and attention ({rng(b2, 'c.attention_causal', 1)} ms), "
                      f"which fusion could trim.")
    m["measure"] = [{"what": "step period", "query": Q14["step"], "expect_ms": r2(b2["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- speech_ssl (attention_weights_materialized) -----------------------------------------------------------------
    Bs, Fs, ds, Hs, Ls, Ks = (SP[k] for k in ("batch", "frames", "d", "heads", "blocks", "targets"))
    Ss = (Fs + 1) // 2
    args = ["--batch", Bs, "--frames", Fs, "--mels", SP["mels"], "--d-model", ds, "--heads", Hs, "--blocks", Ls,
            "--targets", Ks, "--span", SP["span"]]
    b, b2, keys = ev(m_sp)
    bf2 = ev(lambda r: m_sp(r, fixed=True))[1]
    m = base("speech_ssl", "speech_ssl.py", "planted", args, steps=SP["steps"], est=45)
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", attention=True,
                     sequences=f"{Bs} utterances of {Fs} frames, {Ss} after the stride-2 convolution (no padding)",
                     host_sync=EVENT_SYNC)
    m["uses"]["attention"] = (f"nn.MultiheadAttention({ds}, {Hs}, batch_first=True) called as attn(h, h, h)[0]: "
                              f"need_weights at its default (True), so the explicit bmm / softmax / bmm path with the "
                              f"probabilities averaged over heads")
    m["techniques"] = techniques(
        "call the attention with need_weights=False (self.attn(h, h, h, need_weights=False)[0]): nn.MultiheadAttention "
        "then runs F.scaled_dot_product_attention (a fused kernel, no score tensor in memory) instead of materializing "
        f"[{Bs * Hs}, {Ss}, {Ss}] scores and probabilities and their float32 softmax in every block",
        ["CUDA graphs / launch overhead (GPU-bound)", "fused optimizer (already)", "FP8 / precision changes as the top fix",
         "faster GEMMs / kernel tuning (they run at their rate)", "a smaller batch or shorter utterances as the fix",
         "activation checkpointing as the fix", "data loading (features on the GPU)", "channels_last for the front end"])
    m["planted"] = [planted14(
        "attention_weights_materialized", {"device": "GPU 0", "region": f"every block's attention, step_N > forward and "
                                           f"step_N > backward: torch.bmm into [{Bs * Hs}, {Ss}, {Ss}] bf16 scores, a cast "
                                           f"to float32 and softmax, a cast back for the bmm with v, the mean over heads "
                                           f"of the float32 probabilities (returned and discarded), and their backward"},
        "need_weights=False (--fixed; not captured)", b, "rm.attention_weights_materialized",
        "share.attention_weights_materialized",
        f"{b2['params_m'][0]:.0f} M parameters, {Bs} x {Ss} = {Bs * Ss} frames per step after the front end. The "
        f"encoder's GEMMs {rng(b2, 'c.block_gemm_bf16')} ms at 550-800 TFLOP/s, elementwise (with the attention module's "
        f"packing copies) {rng(b2, 'c.block_elementwise')} ms, the convolutional front end {rng(b2, 'c.stem_conv')} ms, "
        f"AdamW {rng(b2, 'c.adamw_fused_fp32')} ms on an H200. nn.MultiheadAttention's default need_weights=True makes "
        f"every block materialize {b2['scores_m'][0]:.0f} M score elements and move 60-72 B per element forward and "
        f"backward (bf16 scores, the float32 softmax that autocast imposes, the bf16 copy for the second bmm, the mean "
        f"over heads, their gradients): {b2['scores_gb_per_block'][0]:.1f}-{b2['scores_gb_per_block'][1]:.1f} GB per "
        f"block at 60-90 % of HBM, {rng(b2, 'c.attention_explicit_scores')} ms for the {Ls} blocks. The fused SDPA kernels "
        f"do the same {b2['attn_tflop'][0]:.2f} TFLOP in {rng(b2, 'after_attn_ms')} ms. Step {rng(b2, 'step')} ms "
        f"(GPU-bound: host {rng(b2, 'host_ms')} ms); with need_weights=False {rng(b2, 'after')} ms: removed "
        f"{rng(b2, 'rm.attention_weights_materialized')} ms = {rng(b2, 'share.attention_weights_materialized', 1)} % "
        f"(H100 {rng(b, 'share.attention_weights_materialized', 1)} %), {rng(b2, 'speedup')}x. New cause name: "
        f"attention_weights_materialized.",
        ["attention_weights_materialized", "mha_need_weights", "unfused_attention", "attention_unfused",
         "elementwise_unfused"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / cast / GELU / residual kernels and nn.MultiheadAttention's packing copies "
                               "(memory-bound)", "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "autocast's per-step weight casts", "cause": "autocast_weight_cast", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "the front end's two Conv1d (cuDNN) at the start of step_N > forward",
        f"in each of the {Ls} blocks, between the in-projection and the out-projection GEMMs: a batched GEMM writing "
        f"[{Bs * Hs}, {Ss}, {Ss}] bf16, an elementwise cast to float32, a softmax kernel, a cast back, a second batched "
        f"GEMM, a mean reduction over the heads; no flash / cuDNN attention kernel",
        "the backward's softmax_backward and cast kernels on the same score-sized tensors",
        "no host synchronization but the event wait; the GPU busy throughout"]
    m["must_not"] = [
        "the projection / MLP GEMMs as the cause, or kernel tuning / FP8 as the top fix",
        "CUDA graphs / launch overhead (GPU-bound)", "a host synchronization or host-bound step as the cause",
        "data loading or host-to-device copies", "the convolutional front end as the cause",
        "the attention FLOPs as the problem (it is the memory traffic of the materialized scores)",
        "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We pre-train a HuBERT-style speech encoder on one H200 (a convolutional front end, {Ls} transformer "
                     f"blocks of width {ds} built on nn.MultiheadAttention, {Bs} utterances of 15 s per step, bf16 "
                     f"autocast, fused AdamW). A step takes far longer than the encoder's matmul FLOPs suggest, and it "
                     f"uses more memory than we expected. What is going on?")
    m["diagnosis"] = (f"The attention is not fused: the blocks call self.attn(h, h, h)[0], and nn.MultiheadAttention's "
                      f"need_weights defaults to True, so in training it takes its explicit path to return the attention "
                      f"probabilities averaged over heads (which the code discards): per block a bmm into "
                      f"[{Bs * Hs}, {Ss}, {Ss}] bf16 scores, a float32 softmax (autocast), a bf16 copy for the bmm with "
                      f"v, the mean over heads, and the same tensors again in the backward: "
                      f"~{b2['scores_gb_per_block'][0]:.0f}-{b2['scores_gb_per_block'][1]:.0f} GB of traffic per block, "
                      f"{rng(b2, 'c.attention_explicit_scores', 0)} ms of a {rng(b2, 'step', 0)} ms step on the H200 "
                      f"(~{rng(b2, 'attn_share', 0)} %), and the float32 probabilities kept for the backward (~0.9 GB per "
                      f"block). Pass need_weights=False: the module then calls F.scaled_dot_product_attention "
                      f"(~{rng(b2, 'after_attn_ms', 1)} ms for all blocks), a step ~{rng(b2, 'after', 0)} ms, "
                      f"{rng(b2, 'share.attention_weights_materialized', 0)} % removed "
                      f"({band_of14(b2, 'share.attention_weights_materialized')[0]}), {rng(b2, 'speedup', 1)}x. The "
                      f"GEMMs and the front end are fine.")
    m["measure"] = [{"what": "step period", "query": Q14["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q14["kernels"],
                     "expect": f"softmax, cast and batched-GEMM kernels on {Bs * Hs} x {Ss} x {Ss} tensors "
                               f"{rng(b2, 'c.attention_explicit_scores', 0)} ms per step together; no fused attention "
                               f"kernel"},
                    {"what": "elementwise bandwidth", "query": Q14["ew_bw"],
                     "expect": "the score-sized softmax / cast kernels near HBM speed (their number, not their rate, is "
                               "the problem)"}]
    m["new_cause"] = {"name": "attention_weights_materialized", "why": "attention computed through an explicit path that "
                      "writes the full score / probability tensors to memory (nn.MultiheadAttention with its default "
                      "need_weights=True, an attention module asked to return its weights, output_attentions=True), "
                      "where a fused attention kernel would keep them on chip: memory traffic quadratic in the sequence "
                      "length; fixed by not requesting the weights (need_weights=False) so the fused kernel runs"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- serve_decode (kv_cache_wide_dtype; no NVTX) -----------------------------------------------------------------
    Bd, Pd, Md, Vd, dd, Hd, Ld = (DC[k] for k in ("batch", "prompt", "max_len", "vocab", "d", "heads", "blocks"))
    args = ["--batch", Bd, "--prompt", Pd, "--max-len", Md, "--vocab", Vd, "--d-model", dd, "--heads", Hd, "--blocks", Ld]
    b, b2, keys = ev(m_dc)
    bf2 = ev(lambda r: m_dc(r, fixed=True))[1]
    m = base("serve_decode", "serve_decode.py", "planted", args, nvtx=False, steps=DC["steps"], warmup=DC["warmup"],
             est=45)
    m["uses"] = uses("bf16 weights, inference", "none (inference, torch.inference_mode)", attention=True,
                     sequences=f"{Bd} requests with {Pd}-token prompts (prefilled, synthetic), one new token per step",
                     host_sync=EVENT_SYNC)
    m["uses"]["attention"] = ("hand-written decode attention: torch.matmul(q, keys^T), float32 softmax, torch.matmul with "
                              "the values, over the cache up to the position")
    m["uses"]["kv_cache"] = (f"preallocated [{Bd}, {Hd}, {Md}, {dd // Hd}] per block for keys and for values, "
                             f"torch.zeros without a dtype: float32 ({b2['cache_gb'][0]:.1f} GB), read as "
                             f"cache[:, :, :n].to(bf16)")
    m["techniques"] = techniques(
        "allocate the key / value cache in the model's dtype (bf16) so the attention reads it in place: no per-token "
        f"float32 -> bf16 copy of the whole used cache ({b2['cast_gb'][0]:.0f} GB of traffic per token); it also halves "
        "the cache's memory",
        ["CUDA graphs as the top fix (the GPU is busy: the token is bound by memory traffic, not launches)",
         "weight quantization / FP8 as the top fix (the weights are ~1.5 GB of the traffic)",
         "a KV cache (already there, preallocated)", "flash / fused attention as the top fix (the cost is the cast)",
         "a larger batch as the fix", "speculative decoding", "data loading"])
    m["planted"] = [planted14(
        "kv_cache_wide_dtype", {"device": "GPU 0", "region": f"every decode step (no NVTX), in each of the {Ld} blocks: "
                                f"two float32 -> bf16 copy kernels of the used cache, keys and values "
                                f"({Bd} x {dd} x ~{b2['n_mean'][0]:.0f} values each), before the two attention matmuls"},
        "cache allocated in bf16 (--fixed; not captured)", b, "rm.kv_cache_wide_dtype", "share.kv_cache_wide_dtype",
        f"{b2['params_m'][0]:.0f} M bf16 parameters ({2 * b2['params_m'][0] / 1e3:.1f} GB read per token at 60-90 % of "
        f"HBM with M = {Bd}: {rng(b2, 'c.weights_stream')} ms), {Bd} requests at ~{b2['n_mean'][0]:.0f} positions of "
        f"context over the steady tokens: the keys and values the attention needs are "
        f"{b2['kv_gb_bf16'][0]:.1f} GB per token in bf16, read by the batched matmuls at 35-85 % of HBM "
        f"({rng(b2, 'c.kv_attention_read')} ms). The cache is float32, and .to(q.dtype) first copies all of it: read 4 B, "
        f"write 2 B per value, {b2['cast_gb'][0]:.1f} GB per token at 55-95 % of HBM: "
        f"{rng(b2, 'c.kv_cache_cast_fp32_to_bf16')} ms. Token {rng(b2, 'step')} ms (GPU-bound: host "
        f"{rng(b2, 'host_ms')} ms for {Ld * DC_BLOCK_HEAVY + DC_OTHER_OPS} ops); with a bf16 cache {rng(b2, 'after')} ms "
        f"(GPU {rng(bf2, 'gpu_ms')} ms, host {rng(bf2, 'host_ms')} ms: the fixed loop may be host-paced at the slow-host "
        f"corner): removed {rng(b2, 'rm.kv_cache_wide_dtype')} ms = {rng(b2, 'share.kv_cache_wide_dtype', 1)} % (H100 "
        f"{rng(b, 'share.kv_cache_wide_dtype', 1)} %), {rng(b2, 'speedup')}x. New cause name: kv_cache_wide_dtype.",
        ["kv_cache_wide_dtype", "kv_cache_fp32", "redundant_cast", "dtype_mismatch_cast", "wide_dtype_cache"], b2)]
    m["tolerated"] = [{"what": "the decode attention's batched matmuls reading the cache (GEMV-like, M = 1 per request and "
                               "head)", "cause": "kernel_inefficient", "max_severity": "medium"},
                      {"what": "the small per-block kernels (LayerNorms, adds, softmax on 32 x 16 rows)",
                       "cause": "launch_bound", "max_severity": "low"},
                      {"what": f"the weight GEMMs at M = {Bd} (memory-bound, normal for decoding)",
                       "cause": "small_batch", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "no NVTX; a token starts with the embedding gather of the 32 new ids and ends with the head GEMM and the argmax",
        f"per block two long copy kernels (float32 -> bf16, ~{b2['cast_gb'][0] / Ld / 2:.1f} GB of traffic each) before "
        f"the two batched matmuls, together {rng(b2, 'c.kv_cache_cast_fp32_to_bf16', 0)} ms per token, the largest "
        f"kernel class",
        "the GPU busy throughout (the host a token ahead), no host-to-device copies; one event wait per token"]
    m["must_not"] = [
        "a host-bound or launch-bound decode loop as the cause (the copies are long GPU kernels)",
        "CUDA graphs as the top fix", "the weight GEMMs / weight quantization as the top fix",
        "a missing KV cache or recomputation of the prompt (the cache is there)",
        "cache re-allocation or concatenation (the cache is preallocated)",
        "flash / fused attention as the top fix (without a bf16 cache it cannot read the float32 cache in place)",
        "data loading or host-to-device copies", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Our offline generation job decodes {Bd} long-prompt requests together on one H200 (a {Ld}-layer, "
                     f"d-{dd} decoder in bf16 with a preallocated key/value cache, ~{Pd / 1000:.1f}k tokens of "
                     f"context each, greedy). Each new token takes tens of milliseconds, several times what reading the "
                     f"weights and the cache once should cost. Where does the time go?")
    m["diagnosis"] = (f"Into copying the cache every token: the engine allocated the key / value cache with torch.zeros "
                      f"and no dtype, so it is float32 ({b2['cache_gb'][0]:.0f} GB) while the model is bf16, and the "
                      f"attention reads it as cache[:, :, :n].to(q.dtype): in each of the {Ld} blocks two copy kernels "
                      f"read the used keys and values in float32 and write bf16 copies that the matmuls then read, "
                      f"{b2['cast_gb'][0]:.0f} GB of traffic per token, {rng(b2, 'c.kv_cache_cast_fp32_to_bf16', 0)} ms "
                      f"of a {rng(b2, 'step', 0)} ms token on the H200 (~{rng(b2, 'cast_share', 0)} %). Allocate the "
                      f"cache in bf16: the matmuls read it in place ({b2['kv_gb_bf16'][0]:.0f} GB per token, "
                      f"{rng(b2, 'c.kv_attention_read', 0)} ms), a token ~{rng(b2, 'after', 0)} ms (host-paced at the "
                      f"slow-host end), {rng(b2, 'share.kv_cache_wide_dtype', 0)} % removed "
                      f"({band_of14(b2, 'share.kv_cache_wide_dtype')[0]}), {rng(b2, 'speedup', 1)}x, and half the "
                      f"cache memory. The weights ({2 * b2['params_m'][0] / 1e3:.1f} GB per token) are a small part.")
    m["measure"] = [{"what": "token period (no NVTX)", "query": Q14["anchor"] + " with ANCHOR = the token embedding's "
                     "gather kernel (vectorized_gather_kernel or indexSelect*; or the argmax's reduce_kernel), C = 1, "
                     "WARM = 3", "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q14["kernels"],
                     "expect": f"float32 -> bf16 copy kernels (elementwise / copy, {2 * Ld} per token) "
                               f"{rng(b2, 'c.kv_cache_cast_fp32_to_bf16', 0)} ms per token, the largest class"}]
    m["new_cause"] = {"name": "kv_cache_wide_dtype", "why": "a key / value cache (or another large state read every step) "
                      "kept in a wider dtype than the compute, float32 for a bf16 model (a torch.zeros without dtype), "
                      "and converted on every read: each step copies and casts the whole used cache before using it, "
                      "three to four times the traffic of reading it; fixed by allocating the cache in the compute dtype"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- ctr_accum (optimizer_per_microbatch) ------------------------------------------------------------------------
    Mc, Ac = CT["micro"], CT["accum"]
    args = ["--micro", Mc, "--accum", Ac, "--fields", CT["fields"], "--buckets", CT["buckets"], "--emb", CT["emb"],
            "--dense", CT["dense"], "--cross", CT["cross"], "--deep", ",".join(str(w) for w in CT["deep"])]
    b, b2, keys = ev(m_ct)
    bf2 = ev(lambda r: m_ct(r, fixed=True))[1]
    m = base("ctr_accum", "ctr_accum.py", "planted", args, steps=CT["steps"], est=40)
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused, clip_grad_norm_ (foreach)", host_sync=EVENT_SYNC)
    m["uses"]["gradient_accumulation"] = (f"{Ac} micro-batches of {Mc} rows per step, each loss / {Ac}; clip, "
                                          f"optimizer.step() and zero_grad(set_to_none=True) after every micro-batch")
    m["techniques"] = techniques(
        f"move the clipping, optimizer.step() and zero_grad() out of the micro-batch loop: once per accumulation cycle, "
        f"after the {Ac}th backward (the gradients then accumulate in .grad): {Ac - 1} of the {Ac} clip + AdamW passes over "
        f"the {b2['params_m'][0]:.0f} M parameters disappear (and the run trains with the intended global batch)",
        ["a fused / foreach optimizer (already fused)", "CUDA graphs / launch overhead (GPU-bound)",
         "FP8 / precision changes as the top fix", "faster GEMMs / kernel tuning", "data loading (data on the GPU)",
         "sparse embedding gradients (the tables are small)", "torch.compile as the top fix"])
    m["planted"] = [planted14(
        "optimizer_per_microbatch", {"device": "GPU 0", "region": f"step_N: after each of the {Ac} micro-batches' backward, "
                                     f"an optimizer range with clip_grad_norm_'s _foreach_norm / _foreach_mul_ and fused "
                                     f"AdamW's multi-tensor kernels over all {b2['params_m'][0]:.0f} M parameters: {Ac} "
                                     f"updates per step where one is meant"},
        "clip / step / zero_grad once per cycle (--fixed; not captured)", b, "rm.optimizer_per_microbatch",
        "share.optimizer_per_microbatch",
        f"{b2['params_m'][0]:.0f} M fp32 parameters (the deep tower {3456 * 8192 + 2 * 8192 * 8192 + 8192 * 4096:,} "
        f"weights). A micro-batch of {Mc} rows: {b2['micro_tflop'][0]:.1f} TFLOP of GEMMs forward and backward at "
        f"550-800 TFLOP/s plus elementwise and autocast's weight casts: {rng(b2, 'micro_ms')} ms on an H200. An update: "
        f"clip_grad_norm_ (read the gradients for the norm, scale them: 12 B per parameter) and fused AdamW (28 B): "
        f"{b2['update_gb'][0]:.1f} GB, {rng(b2, 'update_ms')} ms. Stepping after every micro-batch runs it {Ac} times per "
        f"step ({rng(b2, 'c.adamw_fused_fp32')} + {rng(b2, 'c.clip_grad_norm')} ms); once per cycle it runs once, and "
        f"micro-batches 2-{Ac} add their gradients into .grad (12 B per parameter, {rng(b2, 'accumulate_ms')} ms each). "
        f"Step {rng(b2, 'step')} ms (GPU-bound: host {rng(b2, 'host_ms')} ms); fixed {rng(b2, 'after')} ms: removed "
        f"{rng(b2, 'rm.optimizer_per_microbatch')} ms = {rng(b2, 'share.optimizer_per_microbatch', 1)} % (H100 "
        f"{rng(b, 'share.optimizer_per_microbatch', 1)} %), {rng(b2, 'speedup')}x. New cause name: optimizer_per_microbatch.",
        ["optimizer_per_microbatch", "optimizer_in_accumulation_loop", "redundant_optimizer_step"], b2)]
    m["tolerated"] = [{"what": f"autocast's weight casts, repeated for each of the {Ac} micro-batches "
                               f"({rng(b2, 'cast_share', 0)} % of the step)", "cause": "autocast_weight_cast",
                       "max_severity": "medium"},
                      {"what": "ReLU / cross-layer float32 elementwise kernels, the embedding gather and its backward",
                       "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expected_in_trace"] = [
        f"step_N holding {Ac} forward / backward / optimizer range triples",
        f"{Ac} bursts of multi_tensor_apply kernels per step (clip's norm and scale, fused AdamW), each "
        f"~{rng(b2, 'update_ms', 1)} ms, between the micro-batches' GEMMs",
        "no gradient-accumulation adds in the backward (every backward starts from .grad = None)",
        "GPU-bound, no host synchronization but the event wait"]
    m["must_not"] = [
        "the optimizer as unfused or foreach=False (it is fused)", "the GEMMs as inefficient / kernel tuning",
        "CUDA graphs / launch overhead (GPU-bound)", "a host synchronization or host-bound step as the cause",
        "data loading or host-to-device copies", "gradient accumulation itself as the problem",
        "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We train a DCN-v2-style click-through-rate model ({b2['params_m'][0]:.0f} M parameters, mostly a "
                     f"wide MLP tower) on one H200 with gradient accumulation: {Ac} micro-batches of {Mc} rows per "
                     f"optimizer step, bf16 autocast, gradient clipping at 1.0, fused AdamW. Throughput is below what the "
                     f"matmuls should allow. What is worth fixing?")
    m["diagnosis"] = (f"The update runs after every micro-batch: clip_grad_norm_, optimizer.step() and zero_grad() sit "
                      f"inside the micro-batch loop, so each step has {Ac} optimizer ranges, each a clip (norm and scale) "
                      f"and a fused AdamW pass over all {b2['params_m'][0]:.0f} M parameters ({b2['update_gb'][0]:.1f} GB, "
                      f"{rng(b2, 'update_ms', 1)} ms), {rng(b2, 'optimizer_share', 0)} % of a {rng(b2, 'step', 0)} ms "
                      f"step on the H200, and the gradients never accumulate (the run trains with micro-batches of "
                      f"{Mc}, not the intended {Mc * Ac}). Step once per cycle, after the {Ac}th backward: micro-batches "
                      f"2-{Ac} then add into .grad ({rng(b2, 'accumulate_ms', 2)} ms each), a step "
                      f"~{rng(b2, 'after', 0)} ms, {rng(b2, 'share.optimizer_per_microbatch', 0)} % removed "
                      f"({band_of14(b2, 'share.optimizer_per_microbatch')[0]}). The GEMMs run at their rate; autocast's "
                      f"weight casts repeated per micro-batch ({rng(b2, 'cast_share', 0)} %) are a smaller, secondary "
                      f"cost.")
    m["measure"] = [{"what": "step period", "query": Q14["step"], "expect_ms": r2(b2["step"])},
                    {"what": "NVTX ranges", "query": Q14["nvtx_ranges"],
                     "expect": f"{Ac} optimizer ranges per step_N"},
                    {"what": "kernels", "query": Q14["kernels"],
                     "expect": f"multi_tensor_apply kernels (fused AdamW, foreach norm / mul) "
                               f"{rng(b2, 'c.adamw_fused_fp32', 0)} + {rng(b2, 'c.clip_grad_norm', 0)} ms per step"}]
    m["new_cause"] = {"name": "optimizer_per_microbatch", "why": "under gradient accumulation, the optimizer step (and "
                      "its clipping / zeroing) run after every micro-batch instead of once per accumulation cycle: N "
                      "passes over the parameters and optimizer state where one is meant, and no accumulation; fixed by "
                      "stepping once per cycle"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- nli_ddp (object_collective; 2 ranks) ------------------------------------------------------------------------
    Bn, Sn, dn, Hn, Ln = (NL[k] for k in ("batch", "seq", "d", "heads", "blocks"))
    args = ["--batch", Bn, "--seq", Sn, "--vocab", NL["vocab"], "--d-model", dn, "--heads", Hn, "--blocks", Ln,
            "--classes", NL["classes"]]
    b, b2, keys = ev(m_nl)
    bf2 = ev(lambda r: m_nl(r, fixed=True))[1]
    m = base("nli_ddp", "nli_ddp.py", "planted", args, steps=NL["steps"], est=60, ranks=NL["ranks"])
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused, clip_grad_norm_ (foreach)", attention=True,
                     sequences=f"{Bn} pairs per rank packed to {Sn} tokens (no padding)", ddp=True,
                     host_sync=f"per step: {NL_METRIC_SYNCS} .item() reads of metrics and dist.all_gather_object of the "
                               f"metrics dict (the planted problem)")
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, non-causal, {Hn} heads of {dn // Hn}, {Sn} tokens"
    m["uses"]["gradient_sync"] = "DDP defaults (25 MB buckets, overlapped with the backward)"
    m["techniques"] = techniques(
        "keep the per-step metrics on the GPU: compute them as tensors, stack them, all_reduce the small tensor (no host "
        "round trip) into a GPU history and read it only when logging (every N steps or at the end); drop the .item() "
        "reads and dist.all_gather_object from the step",
        ["larger / fewer DDP buckets or gradient_as_bucket_view (DDP's all-reduce is hidden)",
         "a straggler rank (the ranks are symmetric)", "NCCL settings / a faster interconnect",
         "CUDA graphs as the top fix (.item() and pickling cannot be captured; the fix is removing the round trips)",
         "gradient compression hooks", "FSDP / ZeRO", "data loading (data on the GPU)", "FP8 / precision changes"])
    m["planted"] = [planted14(
        "object_collective", {"ranks": [0, 1], "region": f"step_N > logging on both ranks, after the optimizer: the first "
                              f".item() waits for the whole step, then {NL_METRIC_OPS} metric ops with {NL_METRIC_SYNCS} "
                              f".item() reads and dist.all_gather_object ({NL_OBJ_SYNCS} blocking copies or reads, 2 tiny "
                              f"NCCL all-gathers) run with the GPU idle; the next step starts from an empty queue"},
        "metrics stacked on the GPU and all_reduce'd, read after the loop (--fixed; not captured)", b,
        "rm.object_collective", "share.object_collective",
        f"{b2['params_m'][0]:.0f} M parameters, {Bn} x {Sn} tokens per rank. Compute per rank: GEMMs "
        f"{rng(b2, 'gemm_ms')} ms at 550-800 TFLOP/s, attention over {Sn} tokens {rng(b2, 'attention_ms')} ms, "
        f"elementwise {rng(b2, 'elementwise_ms')} ms, embeddings, casts, DDP's bucket copies, clip and AdamW: "
        f"{rng(b2, 'main_gpu_ms')} ms on an H200; DDP's {b2['buckets'][0]:.0f} bucket all-reduces "
        f"({rng(b2, 'allreduce_ms')} ms at 200-300 GB/s) hidden in the backward but for "
        f"{rng(b2, 'c.ddp_allreduce_exposed', 2)} ms. Then the logging: {NL_METRIC_OPS + NL_OBJ_OPS} Python-issued ops at "
        f"20-70 µs, {NL_METRIC_SYNCS + NL_OBJ_SYNCS} device-to-host round trips at 10-40 µs and 2 tiny all-gathers at "
        f"8-25 µs, all with the queue empty: {rng(b2, 'tail_ms')} ms of GPU idle; and the next step restarts from an empty "
        f"queue (DDP's prologue, the embedding ops, any block whose ops cost the host more than the GPU: "
        f"{rng(b2, 'restart_ms')} ms). Step {rng(b2, 'step')} ms (host issue of the step's work "
        f"{rng(b2, 'host_ms')} ms); with the metrics on the GPU {rng(b2, 'after')} ms (GPU-bound, host "
        f"{rng(bf2, 'host_ms')} ms): removed {rng(b2, 'rm.object_collective')} ms = "
        f"{rng(b2, 'share.object_collective', 1)} % (H100 {rng(b, 'share.object_collective', 1)} %). The band is wide "
        f"because it is host time: the cost of an op issued from Python (20-70 µs) sets it. New cause name: "
        f"object_collective.",
        ["object_collective", "python_object_collective", "metrics_sync", "host_sync"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / cast / GELU / residual kernels under autocast (memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "high"},
                      {"what": "DDP's bucket copies (default gradient_as_bucket_view=False) and its last buckets after "
                               "the backward", "cause": "exposed_communication", "max_severity": "low"},
                      {"what": "autocast's per-step weight casts", "cause": "autocast_weight_cast", "max_severity": "low"},
                      {"what": "SDPA on 128-token sequences", "cause": "grid_underutilized", "max_severity": "medium"}]
    m["expected_in_trace"] = [
        "both ranks alike (no straggler)",
        f"~{b2['buckets'][0]:.0f} ncclDevKernel_AllReduce kernels per step and rank during step_N > backward, overlapped",
        f"step_N > logging on the CPU for {rng(b2, 'tail_ms', 1)} ms with the GPU idle except for tiny kernels, "
        f"{NL_METRIC_SYNCS + NL_OBJ_SYNCS - 2} device-to-host copies of a few bytes, 2 host-to-device copies of a few hundred bytes "
        f"(pageable) and 2 tiny ncclDevKernel_AllGather kernels per step",
        "cudaStreamSynchronize / cudaMemcpy calls blocking the main thread inside step_N > logging"]
    m["must_not"] = [
        "a straggler or imbalanced rank", "DDP's gradient all-reduce as exposed or too slow (it is hidden)",
        "bucket size, gradient_as_bucket_view or compression hooks as the main fix",
        "NCCL / NVLink as slow", "data loading or host-to-device copies of data",
        "the compute (GEMMs, attention) as the cause", "a critical problem"]
    m["expect_quiet"] = False
    m["question"] = (f"We fine-tune a BERT-base NLI classifier with DDP on 2 H200s ({Bn} pairs of {Sn} tokens per GPU, "
                     f"bf16 autocast, fused AdamW, gradient clipping). Our GPU dashboard shows a gap in every step on "
                     f"both GPUs. What causes the gaps, and is it worth fixing?")
    m["diagnosis"] = (f"The per-step logging. After the optimizer, each rank reads {NL_METRIC_SYNCS} metrics with .item() "
                      f"(the first waits for the whole step) and calls dist.all_gather_object on the dict of floats, "
                      f"which pickles it, copies the bytes and their length to the GPU, all-gathers the lengths, reads "
                      f"the largest back, all-gathers the bytes and copies them back: {NL_METRIC_SYNCS + NL_OBJ_SYNCS} "
                      f"host round trips and ~{NL_METRIC_OPS + NL_OBJ_OPS} Python-issued ops with the GPU idle, "
                      f"{rng(b2, 'tail_ms', 1)} ms per step on both ranks, plus {rng(b2, 'restart_ms', 1)} ms while the "
                      f"next step refills an empty queue: {rng(b2, 'share.object_collective', 0)} % of a "
                      f"{rng(b2, 'step', 0)} ms step ({band_of14(b2, 'share.object_collective')[0]}; the band is wide "
                      f"because it is host time). Keep the metrics as GPU tensors, stack them and dist.all_reduce the "
                      f"small tensor (no host round trip), read the history only when printing: ~{rng(b2, 'after', 0)} ms. "
                      f"The ranks are balanced and DDP's own all-reduce is hidden; the rest of the step is GEMMs, the "
                      f"memory-bound elementwise kernels of an autocast BERT and attention.")
    m["measure"] = [{"what": "step period per rank", "query": Q14["step"] + " (both ranks)", "expect_ms": r2(b2["step"])},
                    {"what": "GPU idle and its cause", "query": Q14["starved"],
                     "expect": f"~{rng(b2, 'idle_ms', 1)} ms idle per step, in gaps inside step_N > logging (the host in "
                               f"cudaStreamSynchronize / cudaMemcpy or issuing tiny ops) and at the next step's start"},
                    {"what": "NCCL kernels", "query": Q14["nccl"],
                     "expect": f"~{b2['buckets'][0]:.0f} bucket all-reduces plus 2 tiny all-gathers per step and rank"},
                    {"what": "NVTX ranges", "query": Q14["nvtx_ranges"],
                     "expect": f"logging {rng(b2, 'tail_ms', 1)} ms of CPU per step"}]
    m["new_cause"] = {"name": "object_collective", "why": "Python objects exchanged between ranks every step "
                      "(dist.all_gather_object / broadcast_object_list / gather_object of metrics or state), usually "
                      "built from .item() reads: pickling, blocking host-device copies, two collectives and several "
                      "device-to-host reads drain the GPU queue on every rank; fixed by keeping the values in a tensor "
                      "reduced on the GPU (all_reduce) and reading it rarely"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.h200_table)
