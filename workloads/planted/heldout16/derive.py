#!/usr/bin/env python3
"""First-principles truth for the sixteenth held-out set (heldout16): writes heldout16/manifests/<case>.json from FLOPs,
bytes, call counts and rate bands alone (no capture, no aisp output, no GPU run), with the helpers of ../derive.py and
the rate bands of heldout15/derive.py.

    python3 workloads/planted/heldout16/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout16/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout16/derive.py --table    # the table only

Method: as ../derive.py and heldout11-15/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or calls x a host cost per call; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the GPU (for the 2-rank
case: of either rank, the ranks being symmetric).

Severity (as heldout11-15): info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical; each planted problem
also carries `severity_legacy` under the bands of the earlier sets (info < 1 % <= low < 5 % <= medium < 15 % <= high <
40 % <= critical), so that both readings are on record.

Made for H200s, like heldout11-15: four one-GPU programs, one of them with a captured fixed variant (a before/after
pair), and one 2-rank program (torchrun --nproc_per_node=2): the set needs an nvidia-h200-x2 host for its multi phase.
Every model gives the host time of a step (Python ops x eager_op_us + view-like ops x view_op_us + backward nodes x
bwd_node_us, plus the per-call costs of the planted mechanism where it has them) beside the GPU time and takes the
larger (the throttle lets the host run one step ahead), so that a GPU-bound case is checked at every corner
(host_margin_ms). Two cases are host-paced by design: intent_finetune, whose planted micro-batches of 4 sequences leave
each forward / backward launch-bound (step = max(GPU, host) over the whole update), and ctr_batch, whose planted CPU
lookup and pageable copy hold the host (and the GPU waits for them) every batch.
Lessons of the earlier sets kept in mind: no SDPA call whose shapes change every step (heldout11), so the decode case
uses a static cache and writes its attention with two matmuls of fixed shapes (heldout14); heldout14/15 measured the
memory-bound elementwise / layout-copy classes at 1.4-2.8x their bands, so each one-GPU plant is sized to stay the
largest removable item even if those tolerated classes ran at twice their bands (in the 2-rank case the replicated
elementwise work is part of what the fix removes, and the exposed all-reduces alone exceed any tolerated item); host op
costs of 30-40 µs measured on this pool sit inside the 20-70 µs band, but heldout15's char_lstm measured ~395 µs of
host per LSTMCell against 105-320 modelled, so the host-paced cases keep their GPU work well under their host time.
Peak memory: summ_decode ~46 GB (34 GB static cache + 8.6 GB repeated per layer, transient), news_lm ~40 GB per rank,
ctr_batch 4 GB of host table + 0.4 GB of fresh pageable rows per batch, the others < 10 GB.
Software assumed: the capture image's PyTorch 2.11 with CUDA 13, cuDNN 9, cuSPARSE 12 and NCCL 2.28, on sm_90.
"""
import importlib.util
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


D = _load("planted_derive", os.path.join(os.path.dirname(HERE), "derive.py"))   # evaluate, time and manifest helpers
H15 = _load("planted_derive15", os.path.join(os.path.dirname(HERE), "heldout15", "derive.py"))  # its rate bands
ADAM_B, GB, AMP_B = D.ADAM_B, D.GB, D.AMP_B
pct, r2, rng, techniques, uses = D.pct, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link
gemm, block_gemms, step_of, finish_gpu_host = H15.gemm, H15.block_gemms, H15.step_of, H15.finish_gpu_host
EVENT_SYNC = H15.EVENT_SYNC
BLOCK_BWD_NODES = H15.BLOCK_BWD_NODES

SET = "heldout16"

# ---------------------------------------------------------------------------------------------------
# Severity bands (heldout11-15's; see the docstring).
BANDS16 = [(1.0, "info"), (3.0, "low"), (10.0, "medium"), (25.0, "high"), (math.inf, "critical")]
SEV_DOC16 = H15.SEV_DOC15


def band16(p):
    for edge, name in BANDS16:
        if p < edge:
            return name
    return "critical"


def band_of16(b, key):
    lo, hi = b[key]
    return band16((lo + hi) / 2), [band16(lo), band16(hi)]


# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's and heldout15's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; fractions as named.
NEW_H100 = {
    "spmm_csr_fp32_tflops": (2.0, 15.0),
    "strided_ew_eff": (0.5, 0.9),
    "kv_bmm_eff": (0.35, 0.85),
    "gemm_micro_tflops": (150.0, 450.0),
    "attn_micro_tflops": (30.0, 150.0),
    "cpu_gather_gbs": (2.0, 15.0),
    "nccl_call_us": (20.0, 60.0),
    "ew_repl_frac": (0.5, 0.7),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "spmm_csr_fp32_tflops": "cuSPARSE SpMM (cusparseSpMM, CSR with int64 indices, float32: CUDA cores, no TF32, no "
                            "tensor cores) of a 50 %-dense 8192 x 2048 or 2048 x 8192 matrix by a dense [K, 4096] operand, "
                            "counted as 2 x nnz x 4096 FLOPs: irregular row lengths, indices and values streamed per "
                            "row, the dense operand re-read through L2; published SpMM rates at 50-90 % sparsity are "
                            "a few to ~10 TFLOP/s on A100-class parts, against 19.5 dense SIMT float32 there; 2-15 "
                            "(assumption, wide; the pair measures it)",
    "strided_ew_eff": "fraction of the HBM rate reached by the elementwise kernels around the CSR products, whose "
                      "outputs are transposed views (bias adds, GELU, residual add and the LayerNorm's contiguous copy "
                      "on column-major [4096, 2048 / 8192] float32): 0.5-0.9 (assumption; heldout14/15 measured "
                      "strided elementwise_kernel copies at ~0.4-0.56 of the copy rate, at this band's floor)",
    "kv_bmm_eff": "fraction of the HBM rate reached by the decode attention's batched matmuls that stream the cached keys "
                  "and values (q [1 or 4, 128] against [128, 16384] keys, probabilities [1 or 4, 16384] against "
                  "[16384, 128] values, 256-1024 batches: cuBLAS gemv / split-K kernels): 0.35-0.85 (assumption, wider "
                  "below than gemv_eff for the long-K product by the values); the same band for both variants",
    "gemm_micro_tflops": "bf16 GEMMs of a 4 x 256-token micro-batch (M = 1024 rows against 768 x 768-3072 weights, "
                         "3.2-4.8 GFLOP each, a few waves of 128 x 128 tiles): 150-450 (assumption, below "
                         "bf16_mid_tflops)",
    "attn_micro_tflops": "SDPA forward + backward on 4 sequences x 12 heads of 256 tokens (48 heads: fewer CTAs than "
                         "SMs), counted as 12*B*S^2*d: 30-150 (assumption, below attn_short_train_tflops)",
    "cpu_gather_gbs": "host rate of F.embedding / index_select on the CPU over a 4 GB float32 table (512-byte rows at "
                      "random, at::parallel_for over the ids on the host's cores) into a fresh 436 MB pageable tensor "
                      "(its pages faulted and zeroed on first touch), counted as output bytes per second: 2-15 GB/s "
                      "(assumption: DRAM-latency-bound row reads on a shared host)",
    "nccl_call_us": "host time of one torch.distributed.all_reduce on a CUDA tensor through ProcessGroupNCCL (the "
                    "work object, its events, the stream wait, the enqueue): 20-60 µs (assumption)",
    "ew_repl_frac": "fraction of a block's elementwise bytes (forward and backward, under autocast) that sit on the "
                    "residual stream and are therefore replicated by a Megatron-style split (the two LayerNorms in "
                    "fp32 and their casts, the residual and bias adds, their gradients) rather than split by it (GELU "
                    "on the hidden units, the heads' layout copies): 0.5-0.7 (assumption)",
}
RATES_H100 = dict(H15.RATES_H100, **NEW_H100)
RATES_H200 = dict(H15.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(H15.RATE_SOURCES, **NEW_SOURCES)
Q16 = dict(H15.Q15)


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# relevance_mlp: residual MLP scorer, float32 with TF32, 4096 rows per step, input 512 -> 2048, 8 blocks (LayerNorm,
# 2048 -> 8192, GELU, 8192 -> 2048, residual), head 2048 -> 1, top-100. Planted: the blocks' 16 pruned matrices (50 %
# dense) stored as sparse CSR and multiplied with torch.sparse.mm (cuSPARSE SpMM, float32) unless fixed (dense, TF32).
RM = dict(rows=4096, features=512, d=2048, hidden=8192, blocks=8, density=0.5, topk=100, steps=14, warmup=3)
RM_BLOCK_OPS = 7        # planted: norm, 2 x (sparse.mm, bias add), gelu, add
RM_BLOCK_VIEWS = 4      # planted: 2 x (x.t(), result .t())
RM_BLOCK_OPS_FIXED = 5  # norm, linear, gelu, linear, add
RM_OTHER_OPS = 7        # input linear, final norm, head, topk, the index write, event record and wait
RM_SMALL = 6            # small kernels: head GEMM (N = 1), squeeze / topk, the index write


def m_rm(r, fixed=False):
    R, Fi, d, h, L = (RM[k] for k in ("rows", "features", "d", "hidden", "blocks"))
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    nnz = round(RM["density"] * d * h)
    c = {"input_head": t_flops(2.0 * R * Fi * d, r["tf32_mid_tflops"]) + t_bytes(12.0 * R * d, hbm) + RM_SMALL * tiny}
    if fixed:
        c["block_gemm_tf32"] = L * 2 * t_flops(2.0 * R * d * h, r["tf32_mid_tflops"])
        # LayerNorm r4 w4 on d, GELU r4 w4 on h, residual r4 r4 w4 on d (the biases in the GEMMs' epilogues)
        c["block_elementwise"] = t_bytes(L * R * (20.0 * d + 8.0 * h), hbm)
        ops, views = L * RM_BLOCK_OPS_FIXED + RM_OTHER_OPS, 1
    else:
        c["block_spmm_csr_fp32"] = L * 2 * t_flops(2.0 * nnz * R, r["spmm_csr_fp32_tflops"])
        # LayerNorm and its contiguous copy of the transposed residual (r4 w4 on d each), bias adds (r4 w4 on h and on
        # d), GELU (r4 w4 on h), residual add (r4 r4 w4 on d), on column-major layouts
        c["block_elementwise_strided"] = t_bytes(L * R * (36.0 * d + 16.0 * h), hbm * r["strided_ew_eff"])
        ops, views = L * RM_BLOCK_OPS + RM_OTHER_OPS, L * RM_BLOCK_VIEWS + 1
    gpu = sum(c.values())
    host = (ops * r["eager_op_us"] + views * r["view_op_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "nnz_m": L * 2 * nnz / 1e6,
                           "dense_tflop": L * 2 * 2.0 * R * d * h / 1e12,
                           "sparse_tflop": L * 2 * 2.0 * nnz * R / 1e12}, gpu, host)
    if fixed:
        out["gemm_share"] = pct(c["block_gemm_tf32"], step)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["spmm_share"] = pct(c["block_spmm_csr_fp32"], step)
    fx = m_rm(r, fixed=True)
    rm = {"sparse_weights_spmm": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"],
                "after_gemm_ms": fx["c"]["block_gemm_tf32"]})
    return out


# ---------------------------------------------------------------------------------------------------
# summ_decode: Llama-style decoder, bf16, d 4096, 16 layers, 32 query heads / 8 kv heads of 128, SwiGLU 11008, vocab
# 32000; 32 requests against a static cache of 16384 positions (prefilled to 16320), one greedy token per step.
# Planted: repeat_kv (expand + reshape: a copy 4x the cache) of keys and values in every layer before two matmuls,
# unless fixed (query heads grouped per kv head, the cache read once).
SD = dict(batch=32, ctx=16384, prefill=16320, d=4096, heads=32, kv_heads=8, layers=16, ffn=11008, vocab=32000, steps=14,
          warmup=3)
SD_LAYER_OPS = 33        # rms_norm (~2), qkv, rope on q (neg, cat, mul, mul, add, scale) and k (5), 2 cache writes,
# 2 repeat reshapes (copies), matmul, mask add, softmax, cast, matmul, head-merge reshape, o, add, rms_norm (~2),
# gate_up, silu, mul, down, add
SD_LAYER_VIEWS = 20      # split, 3 views, 3 transposes, 4 rope slices, 2 cache selects, 2 x ([:, :, None], expand),
# the key transpose, the output transpose, chunk
SD_LAYER_OPS_FIXED = 31  # without the two repeat copies
SD_LAYER_VIEWS_FIXED = 17
SD_OTHER_OPS = 9         # mask write, embedding, final rms_norm (~2), head, argmax, token write, event record and wait
SD_OTHER_VIEWS = 3       # cos / sin selects, [:, -1]
SD_LAYER_TINY = 24       # small kernels per layer on [32, 1, *] tensors (norms, rope, cache writes, adds, silu, mul)


def sd_params():
    d, H, K, Dh, L, f, V = (SD["d"], SD["heads"], SD["kv_heads"], SD["d"] // SD["heads"], SD["layers"], SD["ffn"],
                            SD["vocab"])
    layer = d * (H + 2 * K) * Dh + H * Dh * d + d * 2 * f + f * d + 2 * d
    return float(L * layer + 2 * V * d + d)


def m_sd(r, fixed=False):
    B, T, H, K, L = SD["batch"], SD["ctx"], SD["heads"], SD["kv_heads"], SD["layers"]
    Dh, G = SD["d"] // H, H // K
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    cache_l = 2.0 * 2 * B * K * T * Dh  # keys and values of one layer, bf16
    P = sd_params()
    c = {"weights_stream": t_bytes(2.0 * P, hbm * r["gemv_eff"]),
         # scores written by the matmul (2), mask add r2 w2, float32 softmax r2 w4, cast r4 w2, read by the matmul (2)
         "scores_softmax": t_bytes(L * 20.0 * B * H * T, hbm),
         "small_kernels": (L * SD_LAYER_TINY + 8) * tiny}
    if fixed:
        c["attention_matmuls"] = L * t_bytes(cache_l, hbm * r["kv_bmm_eff"])
        ops = L * SD_LAYER_OPS_FIXED + SD_OTHER_OPS
        views = L * SD_LAYER_VIEWS_FIXED + SD_OTHER_VIEWS
    else:
        # expand + reshape: each layer's keys and values read once and written G times (a broadcast-source copy)
        c["repeat_kv_copies"] = L * t_bytes(cache_l * (1 + G), hbm * r["bcast_eff"])
        c["attention_matmuls"] = L * t_bytes(cache_l * G, hbm * r["kv_bmm_eff"])
        ops = L * SD_LAYER_OPS + SD_OTHER_OPS
        views = L * SD_LAYER_VIEWS + SD_OTHER_VIEWS
    gpu = sum(c.values())
    host = (ops * r["eager_op_us"] + views * r["view_op_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "params_b": P / 1e9, "cache_gb": L * cache_l / GB,
                           "repeat_gb_layer": cache_l * G / GB}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["repeat_ms"] = c["repeat_kv_copies"] + c["attention_matmuls"]
    out["repeat_share"] = pct(c["repeat_kv_copies"], step)
    out["traffic_gb"] = L * cache_l * (1 + 2 * G) / GB
    fx = m_sd(r, fixed=True)
    out["after_traffic_gb"] = L * cache_l / GB
    rm = {"gqa_kv_repeat": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"],
                "after_attn_ms": fx["c"]["attention_matmuls"]})
    return out


# ---------------------------------------------------------------------------------------------------
# intent_finetune: BERT-base-style encoder (d 768, 12 post-LN blocks, 12 heads, seq 256, vocab 30522), tanh pooler and
# a 150-way classifier, bf16 autocast over fp32 weights, fused AdamW; 64 sequences per update. Planted: 16 micro-batches
# of 4 (gradient accumulation) per update, unless fixed (one pass of 64).
IF = dict(batch=64, micro=4, seq=256, vocab=30522, d=768, heads=12, blocks=12, classes=150, steps=14, warmup=3)
IF_BLOCK_OPS = 11     # qkv, sdpa, head-merge reshape, proj, add, ln1, fc1, gelu, fc2, add, ln2
IF_BLOCK_VIEWS = 8    # view, permute, unbind, transpose; autocast's 4 weight casts (inside the linears' dispatch)
IF_MICRO_OPS = 11     # token embedding, position slice add, embedding LN, pool, tanh, classifier, cross-entropy, / accum,
# backward call, total += loss, the micro-batch's zero-init / slicing bookkeeping
IF_MICRO_VIEWS = 12   # id / label slices, [:, 0], detach, autocast enter / exit, 6 NVTX push / pop
IF_MICRO_NODES = 12   # embeddings (2), add, LN, select, pool addmm, tanh, classifier addmm, log_softmax, nll, div, view
IF_STEP_OPS = 8       # zeros, fused AdamW (~3), zero_grad, loss write, event record and wait
IF_MICRO_TINY = 40    # small kernels per pass besides the blocks' (pooler, classifier, loss, its backward, the embedding
# gradient's zero fill and scatter, the loss accumulation)


def if_params():
    V, S, d, L, C = IF["vocab"], IF["seq"], IF["d"], IF["blocks"], IF["classes"]
    return float(V * d + S * d + 2 * d + L * (12 * d * d + 13 * d) + d * d + d + d * C + C), 4 + L * 16 + 4


def m_if(r, fixed=False):
    Bt, S, d, L, V, H = (IF[k] for k in ("batch", "seq", "d", "blocks", "vocab", "heads"))
    mb = Bt if fixed else IF["micro"]
    A = Bt // mb
    T = float(mb * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P, n_tensors = if_params()
    if fixed:
        g_pass = L * block_gemms(r, T, d, 3.0)
        a_pass = t_flops(L * 12.0 * mb * S * S * d, r["attn_short_train_tflops"])
    else:
        g_pass = L * 3 * t_flops(2.0 * T * (12 * d * d), r["gemm_micro_tflops"])
        a_pass = t_flops(L * 12.0 * mb * S * S * d, r["attn_micro_tflops"])
    e_pass = t_bytes(L * r["ew_amp_block_b"] * T * d, hbm)
    # autocast re-casts the block weights every pass (r4 w2 forward, r2 w4 their gradients); the embedding's dense
    # gradient ([V, d] zero-filled and scattered into); from the second pass on, .grad += new (r4 r4 w4 per parameter)
    casts = t_bytes(AMP_B * (P - V * d - S * d), hbm)
    emb = t_bytes(8.0 * V * d + 24.0 * T * d, hbm)
    small = (L * 30 + IF_MICRO_TINY) * tiny  # the blocks' bias / LayerNorm-backward / reduction kernels, the rest
    acc = t_bytes(12.0 * P, hbm)
    c = {"block_gemm_bf16": A * g_pass, "attention": A * a_pass, "block_elementwise": A * e_pass,
         "autocast_weight_casts": A * casts, "embeddings": A * emb, "small_kernels": A * small,
         "grad_accumulation_adds": (A - 1) * acc,
         "adamw_fused_fp32": t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny}
    gpu = sum(c.values())
    host_pass = ((L * IF_BLOCK_OPS + IF_MICRO_OPS) * r["eager_op_us"]
                 + (L * IF_BLOCK_VIEWS + IF_MICRO_VIEWS + n_tensors) * r["view_op_us"]  # + AccumulateGrad per tensor
                 + (L * BLOCK_BWD_NODES + IF_MICRO_NODES) * r["bwd_node_us"]) / 1e3
    host = A * host_pass + IF_STEP_OPS * r["eager_op_us"] / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "passes": float(A), "host_pass_ms": host_pass,
                           "gpu_pass_ms": (gpu - c["adamw_fused_fp32"]) / A}, gpu, host)
    out["idle_share"] = pct(step - gpu, step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = m_if(r, fixed=True)
    rm = {"tiny_microbatch_accumulation": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# ctr_batch: DLRM-style CTR scorer, float32 / TF32 inference, 32768 samples per batch, 13 dense features (bottom MLP
# 13 -> 512 -> 256 -> 128), 26 categorical features in a 7.8 M x 128 float32 table (4.0 GB), 351 pairwise dots, top MLP
# 479 -> 1024 -> 1024 -> 512 -> 256 -> 1. Planted: the table in host memory, the lookup on the CPU and the gathered rows
# (436 MB, pageable) copied to the GPU every batch, unless fixed (table on the GPU, ids copied).
CT = dict(batch=32768, dense=13, sparse=26, rows=300000, dim=128, steps=20, warmup=3)
CT_OPS = 24          # 2 copies (to cuda), embedding, bottom 3 linears + 3 relus, unsqueeze-cat, bmm, flatten, index,
# cat, top 5 linears + 4 relus, sigmoid, squeeze, the score write, event record and wait (minus views)
CT_SMALL = 22        # small kernels per batch: the MLPs' biases / ReLUs are fused or tiny, cat, index, sigmoid, write


def ct_mlp_flops():
    B, Fd, d = CT["batch"], CT["dense"], CT["dim"]
    nf = CT["sparse"] + 1
    dims_b = [Fd, 512, 256, d]
    dims_t = [nf * (nf - 1) // 2 + d, 1024, 1024, 512, 256, 1]
    f = sum(2.0 * B * x * y for x, y in zip(dims_b, dims_b[1:])) + sum(2.0 * B * x * y for x, y in zip(dims_t, dims_t[1:]))
    return f, 2.0 * B * nf * nf * d


def m_ct(r, fixed=False):
    B, Fs, Fd, d = CT["batch"], CT["sparse"], CT["dense"], CT["dim"]
    nf = Fs + 1
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    rows_b = 4.0 * B * Fs * d
    mlp_f, bmm_f = ct_mlp_flops()
    c = {"mlps_tf32": t_flops(mlp_f, r["tf32_mid_tflops"]),
         # cat into [B, 27, d] (r4 w4), the bmm (reads it, FLOPs negligible at this size), the [B, 729] result and its
         # gather (r4 w4 each)
         "interaction": t_bytes(12.0 * B * nf * d + 16.0 * B * nf * nf, hbm) + t_flops(bmm_f, r["tf32_mid_tflops"]),
         "small_kernels": CT_SMALL * tiny}
    host_ops = CT_OPS * r["eager_op_us"] / 1e3
    if fixed:
        c["h2d_ids_dense_pinned"] = t_link(8.0 * B * Fs + 4.0 * B * Fd, r["h2d_pinned_gbs"])
        c["gpu_gather"] = t_bytes(2 * rows_b + 8.0 * B * Fs, hbm * r["gather_eff"])
        gpu = sum(c.values())
        host = host_ops
        step = step_of(c, gpu, host)
    else:
        c["h2d_dense_pinned"] = t_link(4.0 * B * Fd, r["h2d_pinned_gbs"])
        c["h2d_rows_pageable"] = t_link(rows_b, r["h2d_pageable_gbs"])
        cpu = t_link(rows_b, r["cpu_gather_gbs"])
        gpu = sum(c.values())
        # the host gathers on the CPU (the GPU has finished the previous batch long before), then stages the pageable
        # copy (blocking), then issues the model: the GPU waits for the host's gather every batch
        host = cpu + c["h2d_rows_pageable"] + host_ops
        step = step_of(c, gpu, host)  # gpu_waiting_for_host: the CPU gather and the host's ops
    out = finish_gpu_host({"c": c, "step": step, "rows_gb": rows_b / GB,
                           "table_gb": 4.0 * Fs * CT["rows"] * d / GB}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["cpu_gather_ms"] = cpu
    out["offload_ms"] = cpu + c["h2d_rows_pageable"]
    out["gpu_busy_share"] = pct(gpu, step)
    fx = m_ct(r, fixed=True)
    rm = {"cpu_embedding_table": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# news_lm: 2 ranks, GPT-style LM (d 1024, 24 blocks, 16 heads of 64, vocab 32768, tied head), 32 x 1024 tokens per step
# over both GPUs, bf16 autocast, fused AdamW. Planted: 2-way Megatron-style tensor parallelism (both ranks the same 32
# sequences, 4 exposed all-reduces of [32768, 1024] bf16 per block, the residual stream, head and loss replicated),
# unless fixed (DDP, 16 sequences per rank).
NL = dict(batch=32, seq=1024, vocab=32768, d=1024, heads=16, blocks=24, ranks=2, steps=16, warmup=3)
NL_BLOCK_OPS_TP = 17     # ln1, copy_to_tp, qkv, sdpa, head-merge reshape, proj, reduce_from_tp, bias add, add, ln2,
# copy_to_tp, fc1, gelu, fc2, reduce_from_tp, bias add, add
NL_BLOCK_OPS_DP = 13     # the same without the 4 TP functions
NL_BLOCK_VIEWS = 8       # view, permute, unbind, transpose; autocast's 4 weight casts
NL_BLOCK_PY_BWD = 4      # TP only: the 4 custom Functions' Python backward calls (an eager op each)
NL_OTHER_OPS = 18        # embedding, position slice add, final norm, tied head, view, reshape, cross-entropy, autocast
# enter / exit, backward call, fused AdamW (~3), zero_grad, loss write, event record and wait
NL_OTHER_VIEWS = 6
NL_OTHER_NODES = 12
NL_DDP_OPS = 5           # DDP's forward prologue


def nl_params():
    V, S, d, L = NL["vocab"], NL["seq"], NL["d"], NL["blocks"]
    full = float(V * d + S * d + 2 * d + L * (12 * d * d + 13 * d))
    tp = float(V * d + S * d + 2 * d + L * (6 * d * d + 3 * d // 2 + d + 4 * d + 2 * d + d))
    return full, tp, float(V * d + S * d), 4 + 12 * L


def m_nl(r, fixed=False):
    Bt, S, V, d, L, W = (NL[k] for k in ("batch", "seq", "vocab", "d", "blocks", "ranks"))
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    lat = r["nccl_small_gpu_us"] / 1e3
    P_full, P_tp, P_last, n_tensors = nl_params()
    if fixed:
        B = Bt // W
        T = float(B * S)
        c = {"block_gemm_bf16": L * block_gemms(r, T, d, 3.0),
             "attention_causal": t_flops(L * 7.0 * B * S * S * d, r["attn_tflops"]),
             "block_elementwise": t_bytes(L * r["ew_amp_block_b"] * T * d, hbm),
             "lm_head_gemm": gemm(r, T, d, V, 3.0),
             "cross_entropy_fp32": t_bytes(r["ce_fp32_b"] * T * V, hbm) + 4 * tiny,
             "embeddings": t_bytes(32.0 * T * d + 16.0 * V * d, hbm) + 8 * tiny,
             "autocast_weight_casts": t_bytes(AMP_B * P_full, hbm),
             "ddp_bucket_copies": t_bytes(16.0 * P_full, hbm),
             # the tied embedding's and the positions' bucket is ready only after the embedding's backward
             "ddp_allreduce_exposed": t_link(4.0 * P_last, r["ar2_algbw_gbs"]) + 2 * lat,
             "ddp_overlap_penalty": r["overlap_penalty"] * t_link(4.0 * (P_full - P_last), r["ar2_algbw_gbs"]),
             "adamw_fused_fp32": t_bytes(ADAM_B[4] * P_full, hbm) + 4 * tiny}
        host = ((L * NL_BLOCK_OPS_DP + NL_OTHER_OPS + NL_DDP_OPS) * r["eager_op_us"]
                + (L * NL_BLOCK_VIEWS + NL_OTHER_VIEWS) * r["view_op_us"]
                + (L * (BLOCK_BWD_NODES + 2) + NL_OTHER_NODES) * r["bwd_node_us"]
                + n_tensors * r["ddp_hook_us"]) / 1e3
        P = P_full
    else:
        B = Bt
        T = float(B * S)
        f = r["ew_repl_frac"]
        c = {"block_gemm_bf16": L * block_gemms(r, T, d, 3.0) / W,
             "attention_causal": t_flops(L * 7.0 * B * S * S * d, r["attn_tflops"]) / W,
             "block_elementwise": t_bytes(L * r["ew_amp_block_b"] * T * d * (f + (1 - f) / W), hbm),
             "lm_head_gemm": gemm(r, T, d, V, 3.0),
             "cross_entropy_fp32": t_bytes(r["ce_fp32_b"] * T * V, hbm) + 4 * tiny,
             "embeddings": t_bytes(32.0 * T * d + 16.0 * V * d, hbm) + 8 * tiny,
             "autocast_weight_casts": t_bytes(AMP_B * P_tp, hbm),
             # per block 2 in the forward ([T, d] bf16: the row-parallel GEMMs' outputs) and 2 in the backward ([T, d]
             # float32: the gradients of the LayerNorms' outputs, float32 under autocast), nothing left to overlap
             "tp_allreduce_exposed": 2 * L * (t_link(2.0 * T * d, r["ar2_algbw_gbs"])
                                              + t_link(4.0 * T * d, r["ar2_algbw_gbs"]) + 2 * lat),
             "adamw_fused_fp32": t_bytes(ADAM_B[4] * P_tp, hbm) + 4 * tiny}
        host = ((L * (NL_BLOCK_OPS_TP + NL_BLOCK_PY_BWD) + NL_OTHER_OPS) * r["eager_op_us"]
                + (L * NL_BLOCK_VIEWS + NL_OTHER_VIEWS) * r["view_op_us"]
                + (L * (BLOCK_BWD_NODES + 2) + NL_OTHER_NODES) * r["bwd_node_us"]
                + 4 * L * r["nccl_call_us"]) / 1e3
        P = P_tp
    gpu = sum(c.values())
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "params_m": P_full / 1e6, "params_rank_m": P / 1e6,
                           "tokens_rank": T}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    repl = (c["block_elementwise"] - t_bytes(L * r["ew_amp_block_b"] * T * d / W, hbm)
            + c["lm_head_gemm"] / 2 + c["cross_entropy_fp32"] / 2 + c["embeddings"] / 2)
    out["duplicated_ms"] = repl
    out["allreduce_ms"] = c["tp_allreduce_exposed"]
    out["allreduce_share"] = pct(c["tp_allreduce_exposed"], step)
    out["ar_gb"] = 2 * L * 6.0 * T * d / GB
    fx = m_nl(r, fixed=True)
    rm = {"tensor_parallel_unneeded": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"],
                "after_allreduce_exposed_ms": fx["c"]["ddp_allreduce_exposed"]})
    return out


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=14, warmup=3, ranks=1):
    return D.base(name, f"heldout16/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def planted16(cause, where, fix, b, key_rm, key_share, derivation, accept, b2):
    sev, sev_rng = band_of16(b2, key_share)
    return {"cause": cause, "accept_causes": accept, "where": where, "fix": fix, "top": True,
            "removed_ms": {"h100": r2(b[key_rm]), "h200": r2(b2[key_rm])},
            "share_pct": {"h100": r2(b[key_share]), "h200": r2(b2[key_share])},
            "severity": sev, "severity_range": sev_rng,
            "severity_legacy": D.band_of(b2, key_share)[0], "severity_legacy_range": D.band_of(b2, key_share)[1],
            "derivation": derivation}


def finish(m, b, b2, keys, after=True, fixed_case=None):
    m["severity_bands"] = SEV_DOC16
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
    "relevance_mlp": "~75 per step: per block a LayerNorm (and the contiguous copy of its column-major input), per pruned "
                     "matrix cuSPARSE's SpMM kernel(s) for a CSR matrix in float32 (csrmm / cusparse::csrmm_* or "
                     "spmm_* family, no TF32, no tensor cores) and a bias-add elementwise kernel, a GELU, the residual add; "
                     "the input and head GEMMs (TF32), the top-k",
    "relevance_mlp.fixed": "~45 per step: per block a LayerNorm, two TF32 GEMMs with their bias in the epilogue (cutlass / "
                           "nvjet tf32 kernels on the tensor cores), a GELU and the residual add; input and head GEMMs, "
                           "the top-k; no cuSPARSE kernel",
    "summ_decode": "~800 per decode step: per layer ~24 small kernels on [32, 1, *] tensors (RMSNorms, rotary, the cache "
                   "writes, residual adds, SiLU and multiply), 4 weight-streaming GEMMs (qkv, o, gate_up, down), two "
                   "large copy kernels (elementwise_kernel / unrolled copy: repeat_kv's expand + reshape of the keys and of "
                   "the values, [32, 8, 16384, 128] -> [32, 32, 16384, 128] bf16, 4.3 GB written each), two batched "
                   "matmuls over [32 x 32] heads (q K^T and P V, gemv / split-K kernels) reading them, the mask add, "
                   "a float32 softmax and its cast; then the head GEMM and an argmax",
    "summ_decode.fixed": "~770 per decode step: the same without the two repeat copies; the two matmuls batched over "
                         "[32 x 8] kv heads with 4 query rows each, reading the cache itself",
    "intent_finetune": "~12000 per update: 16 micro-batches of 4 x 256 tokens, each ~570 kernels (per block 6 small bf16 "
                       "GEMMs forward and 12 backward with M = 1024, SDPA forward and backward, LayerNorms, GELU, casts, "
                       "bias reductions; embeddings, pooler, classifier and loss) and from the second micro-batch on ~200 "
                       "gradient accumulation adds (one per parameter tensor); then one fused AdamW",
    "intent_finetune.fixed": "~800 per update: one forward and backward of 64 x 256 tokens (GEMMs with M = 16384) and "
                             "one fused AdamW",
    "ctr_batch": "per batch, no NVTX: one pageable HtoD memcpy of 436 MB (the rows gathered on the CPU) and a small pinned "
                 "one (dense features), then ~25 kernels: the bottom and top MLPs' TF32 GEMMs with bias / ReLU, the "
                 "concatenation, one bmm for the pairwise dots, an index gather, the sigmoid and the score write; long "
                 "GPU idle gaps while the host gathers",
    "ctr_batch.fixed": "per batch a 6.8 MB pinned HtoD copy of the ids (and the dense features), one embedding gather "
                       "kernel (indexSelect / vectorized_gather) writing [32768, 26, 128], and the same ~25 kernels",
    "news_lm": "per rank per step ~2300: per block the LayerNorms (fp32), 4 half-width GEMMs forward and 8 backward, one "
               "causal SDPA forward and backward over 8 heads, GELU, casts, adds; 96 ncclDevKernel_AllReduce (Sum; 2 per block "
               "in step_N > forward of 67 MB bf16 activations, 2 in step_N > backward of 134 MB float32 gradients) with "
               "the compute stream waiting on each; the replicated tied head's 3 GEMMs over [32768, 32768], the float32 cross-entropy, the embedding "
               "backward; fused AdamW over each rank's 186 M parameters; no DDP bucket all-reduce",
    "news_lm.fixed": "per rank per step ~1400: the full-width block kernels on 16 x 1024 tokens, DDP's bucket all-reduces "
                     "(ncclDevKernel_AllReduce, fp32, ~25 MB each) overlapped with the backward and the tied embedding's "
                     "bucket after it, fused AdamW over 337 M parameters",
}


def build():
    out = {}

    # ---- relevance_mlp (sparse_weights_spmm) and relevance_mlp.fixed ------------------------------------------------
    R, Fi, dm, hm, Lm = (RM[k] for k in ("rows", "features", "d", "hidden", "blocks"))
    args = ["--rows", R, "--features", Fi, "--d-model", dm, "--hidden", hm, "--blocks", Lm, "--density", RM["density"],
            "--topk", RM["topk"]]
    b, b2, keys = ev(m_rm)
    bf, bf2, keys_f = ev(lambda r: m_rm(r, fixed=True))
    use_rm = dict(dtype="float32 weights, TF32 matmuls, inference", optimizer="none (inference, torch.inference_mode)",
                  tf32=True, host_sync=EVENT_SYNC)
    m = base("relevance_mlp", "relevance_mlp.py", "planted", args, steps=RM["steps"], warmup=RM["warmup"], est=45)
    m["uses"] = uses(**use_rm)
    m["uses"]["weights"] = (f"the blocks' {2 * Lm} large matrices ({dm} x {hm} and {hm} x {dm}) magnitude-pruned to "
                            f"{RM['density']:.0%} density and stored as torch sparse CSR tensors (float32, int64 indices), "
                            f"multiplied with torch.sparse.mm (cuSPARSE SpMM)")
    m["techniques"] = techniques(
        "store the pruned matrices dense (zeros included) and use F.linear: at 50 % density unstructured sparsity saves "
        "nothing on a GPU, while the dense product runs on the TF32 tensor cores (sparse formats pay off only at a few "
        "per cent density; 2:4 semi-structured sparsity with to_sparse_semi_structured is the tensor-core route if "
        "sparsity is wanted)",
        ["CUDA graphs / launch overhead (GPU-bound)", "a larger batch", "more pruning / lower density as the fix",
         "bf16 / FP8 quantization as the top fix (the dense TF32 product alone removes ~80-99 %)",
         "torch.compile as the top fix", "data loading (features on the GPU)",
         "TF32 settings as the fix (cuSPARSE's float32 SpMM does not use them)"])
    m["planted"] = [planted16(
        "sparse_weights_spmm", {"device": "GPU 0", "region": f"step_N > forward, every block: the two pruned matrices "
                                f"multiplied as sparse CSR by cuSPARSE SpMM kernels in float32 ({b2['nnz_m'][0] / (2 * Lm):.1f} "
                                f"M non-zeros each), with a separate bias add and layout copies around them"},
        "pruned weights stored dense, F.linear on TF32 tensor cores (--fixed, captured as relevance_mlp.fixed)", b,
        "rm.sparse_weights_spmm", "share.sparse_weights_spmm",
        f"{R} rows per step through {Lm} blocks of {dm} -> {hm} -> {dm}. Dense, the blocks are "
        f"{b2['dense_tflop'][0]:.2f} TFLOP of TF32 GEMMs (150-350 TFLOP/s: {rng(bf2, 'c.block_gemm_tf32')} ms). Stored as "
        f"CSR at {RM['density']:.0%} density they are {b2['sparse_tflop'][0]:.2f} TFLOP on the non-zeros, run by "
        f"cuSPARSE's float32 SpMM on the CUDA cores at 2-15 TFLOP/s: {rng(b2, 'c.block_spmm_csr_fp32')} ms, plus "
        f"bias adds and layout copies on column-major outputs ({rng(b2, 'c.block_elementwise_strided')} ms). Step "
        f"{rng(b2, 'step')} ms (GPU-bound: host {rng(b2, 'host_ms')} ms); dense {rng(b2, 'after')} ms: removed "
        f"{rng(b2, 'rm.sparse_weights_spmm')} ms = {rng(b2, 'share.sparse_weights_spmm', 1)} % (H100 "
        f"{rng(b, 'share.sparse_weights_spmm', 1)} %), {rng(b2, 'speedup')}x. The band is wide because the SpMM rate is "
        f"an assumption; the pair measures it. New cause name: sparse_weights_spmm.",
        ["sparse_weights_spmm", "unstructured_sparsity", "sparse_matmul", "cusparse_spmm", "fp32_gemm_simt"], b2)]
    m["tolerated"] = [{"what": "bias adds, GELU, LayerNorm and residual kernels on column-major float32 outputs",
                       "cause": "layout_copy", "max_severity": "low"},
                      {"what": "float32 / TF32 model rather than bf16", "cause": "fp32_gemm_simt", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "step_N > forward / select, GPU-bound (the host a step ahead, no synchronization but the event wait)",
        f"{2 * Lm} cuSPARSE SpMM launches per step (csrmm / spmm kernels, float32), "
        f"{rng(b2, 'c.block_spmm_csr_fp32', 0)} ms per step, the largest class by far; no TF32 GEMM in the blocks",
        "in the after run the same place holds dense TF32 GEMMs (tensor cores) and no cuSPARSE kernel"]
    m["must_not"] = [
        "the GEMMs' precision, TF32 settings or bf16 / FP8 quantization as the cause or top fix",
        "CUDA graphs / launch overhead (GPU-bound)", "a host synchronization or a host-bound step",
        "more pruning / lower density as the fix", "a larger batch as the fix",
        "the elementwise or layout-copy kernels as the main cost", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Here are two profiles of our candidate-scoring model on one H200 (a residual MLP in float32 with "
                     f"TF32: {Lm} blocks of width {dm} with {hm} hidden units, {R} candidates per request, top {RM['topk']} "
                     f"kept), before and after a one-line change to the code that loads the checkpoint. How much did the "
                     f"change buy per request, where did the time go before, and what bounds a request now?")
    m["diagnosis"] = (f"Before, the blocks' pruned weights were stored as sparse CSR tensors and multiplied with "
                      f"torch.sparse.mm: cuSPARSE's float32 SpMM on the CUDA cores, {b2['nnz_m'][0] / (2 * Lm):.1f} M "
                      f"non-zeros per matrix at 50 % density, {rng(b2, 'c.block_spmm_csr_fp32', 0)} ms of a "
                      f"{rng(b2, 'step', 0)} ms step on the H200 (~{rng(b2, 'spmm_share', 0)} %), where the same matrices "
                      f"dense are {b2['dense_tflop'][0]:.1f} TFLOP of TF32 tensor-core GEMMs "
                      f"({rng(bf2, 'c.block_gemm_tf32', 1)} ms): unstructured sparsity at 50 % saves nothing on a GPU. "
                      f"After (dense storage): a step {rng(b2, 'after', 1)} ms, "
                      f"{rng(b2, 'share.sparse_weights_spmm', 0)} % removed "
                      f"({band_of16(b2, 'share.sparse_weights_spmm')[0]}), {rng(b2, 'speedup', 0)}x. A step is now "
                      f"GPU-bound on the TF32 GEMMs (~{rng(bf2, 'gemm_share', 0)} %), then LayerNorm / GELU / residual "
                      f"kernels; nothing planted is left.")
    m["measure"] = [{"what": "step period", "query": Q16["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q16["kernels"],
                     "expect": f"cuSPARSE SpMM kernels {2 * Lm} per step, {rng(b2, 'c.block_spmm_csr_fp32', 0)} ms per "
                               f"step, the largest class"}]
    m["new_cause"] = {"name": "sparse_weights_spmm", "why": "pruned weights at moderate sparsity (30-90 %) stored in a "
                      "sparse format (CSR / COO) and multiplied with sparse kernels (cuSPARSE SpMM, torch.sparse.mm): "
                      "irregular, index-bound kernels without tensor cores that are several to tens of times slower than "
                      "the dense GEMM of the same matrix with its zeros; fixed by storing the pruned matrix dense (or "
                      "2:4 semi-structured sparsity on the tensor cores)"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="relevance_mlp.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("relevance_mlp.fixed", "relevance_mlp.py", "fixed", args + ["--fixed"], steps=RM["steps"],
             warmup=RM["warmup"], est=25)
    m["uses"] = uses(**use_rm)
    m["uses"]["weights"] = "the pruned matrices stored dense (zeros included), F.linear (TF32 GEMMs)"
    m["techniques"] = techniques(
        "nothing planted is left: a step is the TF32 GEMMs, then the LayerNorm / GELU / residual kernels; bf16 or FP8 "
        "weights (or 2:4 semi-structured sparsity) would be the next, separate, gains",
        ["sparse storage (done: dense now)", "CUDA graphs / launch overhead (GPU-bound)", "data loading"])
    m["planted"] = []
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual kernels (float32, memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "float32 / TF32 model rather than bf16", "cause": "fp32_gemm_simt", "max_severity": "high"}]
    m["expected_in_trace"] = [
        "dense TF32 GEMMs in every block, no cuSPARSE kernel",
        f"GEMMs ~{rng(b2, 'gemm_share', 0)} % of the step, GPU-bound, no host synchronization but the event wait"]
    m["must_not"] = ["sparse kernels still present or slow", "a host-bound or launch-bound step",
                     "a critical problem left"]
    m["expect_quiet"] = False
    m["question"] = "After the change, is anything still holding a request back?"
    m["diagnosis"] = (f"No planted problem is left: {rng(b2, 'step', 1)} ms per step on the H200, GPU-bound (host "
                      f"{rng(b2, 'host_ms', 1)} ms), the TF32 GEMMs ~{rng(b2, 'gemm_share', 0)} % of it, then the "
                      f"LayerNorm / GELU / residual kernels ({rng(b2, 'c.block_elementwise', 1)} ms); bf16 weights would "
                      f"be the next, separate, gain.")
    m["measure"] = [{"what": "step period", "query": Q16["step"], "expect_ms": r2(b2["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- summ_decode (gqa_kv_repeat) --------------------------------------------------------------------------------
    Bs, Ts, Hs, Ks, Ls, ds = (SD[k] for k in ("batch", "ctx", "heads", "kv_heads", "layers", "d"))
    Gs, Dhs = Hs // Ks, ds // Hs
    args = ["--batch", Bs, "--ctx", Ts, "--prefill", SD["prefill"], "--d-model", ds, "--heads", Hs, "--kv-heads", Ks,
            "--layers", Ls, "--ffn", SD["ffn"], "--vocab", SD["vocab"]]
    b, b2, keys = ev(m_sd)
    bf2 = ev(lambda r: m_sd(r, fixed=True))[1]
    m = base("summ_decode", "summ_decode.py", "planted", args, steps=SD["steps"], warmup=SD["warmup"], est=40)
    m["uses"] = uses("bf16 weights, inference", "none (inference, torch.inference_mode)", attention=True,
                     sequences=f"{Bs} requests decoded together against a static cache of {Ts} positions (prefilled to "
                               f"{SD['prefill']}; later positions masked), fixed shapes", host_sync=EVENT_SYNC)
    m["uses"]["attention"] = (f"grouped-query attention, {Hs} query heads and {Ks} key/value heads of {Dhs}, written as "
                              f"two torch.matmul calls over the static cache after the modelling code's repeat_kv "
                              f"(expand + reshape of the cached keys and values to {Hs} heads)")
    m["uses"]["kv_cache"] = f"bf16, [{Bs}, {Ks}, {Ts}, {Dhs}] per layer for keys and for values, {b2['cache_gb'][0]:.1f} GB"
    m["techniques"] = techniques(
        f"attend without materializing the repeat: group the query heads by key/value head (q viewed as [B, {Ks}, {Gs}, "
        f"{Dhs}] against the cache's [B, {Ks}, T, {Dhs}]) or call F.scaled_dot_product_attention(..., enable_gqa=True) / "
        f"a GQA-aware decode kernel (flash-decoding, FlashInfer, paged attention), so each cached key and value is read "
        f"once per token",
        ["a wider / lower-precision KV cache change as the top fix (bf16 is not the problem; FP8 would only shrink what "
         "is copied 4 times)", "CUDA graphs / launch overhead as the top fix (GPU-bound)", "a smaller batch",
         "speculative decoding as the top fix", "re-enabling a KV cache (there is one)",
         "weight quantization (the weights are ~2 % of the traffic)", "torch.compile as the top fix"])
    m["planted"] = [planted16(
        "gqa_kv_repeat", {"device": "GPU 0", "region": f"step_N > forward, every layer: repeat_kv's two copies of the "
                          f"whole cache (keys and values, [{Bs}, {Ks}, {Ts}, {Dhs}] -> [{Bs}, {Hs}, {Ts}, {Dhs}] bf16, "
                          f"{b2['repeat_gb_layer'][0] / 2:.1f} GB written each) and the two matmuls that read the "
                          f"copies"},
        "query heads grouped per key/value head, no repeat (--fixed; not captured)", b, "rm.gqa_kv_repeat",
        "share.gqa_kv_repeat",
        f"{b2['params_b'][0]:.2f} B bf16 parameters ({rng(b2, 'c.weights_stream')} ms to stream them at 60-90 % of HBM) "
        f"and a {b2['cache_gb'][0]:.1f} GB static cache per token step. repeat_kv expands each layer's cached keys and "
        f"values to the {Hs} query heads and reshapes, a copy that reads the cache and writes {Gs}x it "
        f"({b2['repeat_gb_layer'][0]:.1f} GB per layer; a broadcast-source copy at 60-90 % of HBM: "
        f"{rng(b2, 'c.repeat_kv_copies')} ms per step), and the two matmuls then read the copies (35-85 % of HBM: "
        f"{rng(b2, 'c.attention_matmuls')} ms): {b2['traffic_gb'][0]:.0f} GB per token against "
        f"{b2['after_traffic_gb'][0]:.0f} GB for reading the cache once. Step {rng(b2, 'step')} ms (GPU-bound: host "
        f"{rng(b2, 'host_ms')} ms). Grouped: attention {rng(b2, 'after_attn_ms')} ms, step {rng(b2, 'after')} ms (GPU "
        f"{rng(bf2, 'gpu_ms')}, host {rng(bf2, 'host_ms')} ms: eager decode is host-paced at the slow-host corners once "
        f"the copies are gone): removed {rng(b2, 'rm.gqa_kv_repeat')} ms = {rng(b2, 'share.gqa_kv_repeat', 1)} % (H100 "
        f"{rng(b, 'share.gqa_kv_repeat', 1)} %), {rng(b2, 'speedup')}x. New cause name: gqa_kv_repeat.",
        ["gqa_kv_repeat", "repeat_kv", "kv_repeat_copy", "materialized_broadcast", "layout_copy"], b2)]
    m["tolerated"] = [{"what": "the ~24 small kernels per layer on [32, 1, *] tensors (norms, rotary, adds)",
                       "cause": "launch_bound", "max_severity": "low"},
                      {"what": f"the static cache's masked tail ({Ts - SD['prefill'] - SD['steps']}-{Ts - SD['prefill']} "
                               f"of {Ts} positions)", "cause": "padding_waste", "max_severity": "info"},
                      {"what": "the float32 softmax over [32, 32, 1, 16384] scores and its cast",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "step_N > forward / sample, GPU-bound (the host a step ahead, no synchronization but the event wait)",
        f"per layer two large copy kernels writing [{Bs}, {Hs}, {Ts}, {Dhs}] bf16 (4.3 GB each) and two batched matmuls "
        f"reading them: {rng(b2, 'repeat_ms', 0)} ms per step, the weight-streaming GEMMs ~{rng(b2, 'c.weights_stream', 1)} "
        f"ms",
        "no flash / SDPA attention kernel (the attention is two matmuls and a softmax)"]
    m["must_not"] = [
        "the weights / GEMMs or weight quantization as the cause", "the KV cache's dtype or size as the cause (it is "
        "bf16 and read once with the fix)", "CUDA graphs / launch overhead as the cause (GPU-bound)",
        "a missing KV cache / recomputation", "a host synchronization", "a smaller batch as the fix",
        "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We serve a {b2['params_b'][0]:.0f} B-parameter Llama-style model ({Ls} layers of width {ds}, "
                     f"grouped-query attention with {Hs} query and {Ks} key/value heads, bf16) for long-document "
                     f"summarization on one H200: {Bs} requests with ~16 k-token contexts decoded together, greedy. Each "
                     f"output token takes several times what reading the weights and the KV cache once should take. "
                     f"Where does the decode time go, and what should we change?")
    m["diagnosis"] = (f"The attention materializes the grouped-query repeat: every layer calls repeat_kv on the whole "
                      f"static cache (expand + reshape of keys and values from {Ks} to {Hs} heads: a copy that writes "
                      f"{Gs}x the cache, {b2['repeat_gb_layer'][0]:.1f} GB per layer) and the two matmuls read the "
                      f"copies: {rng(b2, 'repeat_ms', 0)} ms of a {rng(b2, 'step', 0)} ms token step on the H200, "
                      f"{b2['traffic_gb'][0]:.0f} GB of traffic per token where reading the cache once is "
                      f"{b2['after_traffic_gb'][0]:.0f} GB. Group the query heads by key/value head (q as [B, {Ks}, {Gs}, "
                      f"{Dhs}]) or use a GQA-aware attention (SDPA enable_gqa, flash-decoding): a step "
                      f"~{rng(b2, 'after', 0)} ms, {rng(b2, 'share.gqa_kv_repeat', 0)} % removed "
                      f"({band_of16(b2, 'share.gqa_kv_repeat')[0]}), {rng(b2, 'speedup', 1)}x; eager decode is then "
                      f"near the host's pace. The weights, the bf16 cache and the batch size are not the problem.")
    m["measure"] = [{"what": "step period", "query": Q16["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q16["kernels"],
                     "expect": f"copy kernels ({2 * Ls} per step, writing 4.3 GB each) {rng(b2, 'c.repeat_kv_copies', 0)} "
                               f"ms and the batched attention matmuls {rng(b2, 'c.attention_matmuls', 0)} ms per step, the "
                               f"two largest classes"},
                    {"what": "elementwise bandwidth", "query": Q16["ew_bw"],
                     "expect": "the copies near HBM speed (their existence, not their rate, is the problem)"}]
    m["new_cause"] = {"name": "gqa_kv_repeat", "why": "grouped- or multi-query attention computed by first repeating "
                      "(repeat_kv / repeat_interleave / expand + reshape) the key and value heads to the number of query "
                      "heads: in decode this copies the whole KV cache, several times its size, in every layer at every "
                      "token and reads the copies back, undoing GQA's bandwidth saving; fixed by grouping the query heads "
                      "per key/value head or a GQA-aware attention kernel"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- intent_finetune (tiny_microbatch_accumulation) -------------------------------------------------------------
    Bi, mi, Si, di, Li = (IF[k] for k in ("batch", "micro", "seq", "d", "blocks"))
    Ai = Bi // mi
    args = ["--batch", Bi, "--micro", mi, "--seq", Si, "--vocab", IF["vocab"], "--d-model", di, "--heads", IF["heads"],
            "--blocks", Li, "--classes", IF["classes"]]
    b, b2, keys = ev(m_if)
    bf2 = ev(lambda r: m_if(r, fixed=True))[1]
    m = base("intent_finetune", "intent_finetune.py", "planted", args, steps=IF["steps"], warmup=IF["warmup"], est=45)
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", attention=True,
                     sequences=f"{Bi} sequences of {Si} tokens per update (no padding)", host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, non-causal, {IF['heads']} heads of {di // IF['heads']}"
    m["uses"]["accumulation"] = (f"micro-batch {mi} x {Ai} gradient-accumulation passes per update (loss / {Ai}, "
                                 f"gradients summed in .grad), one optimizer step per update")
    m["techniques"] = techniques(
        f"run the update as one pass of {Bi} sequences (per-device batch {Bi}, no accumulation: the activations of "
        f"{Bi} x {Si} tokens need a few GB of the 141), or at least the largest micro-batch that fits, so each kernel "
        f"does {Ai}x the work for the same host cost",
        ["CUDA graphs or torch.compile as the top fix (they hide launches but keep 16 passes of tiny GEMMs)",
         "a faster optimizer (it is fused and runs once per update)", "FP8 / precision changes",
         "data loading (ids on the GPU)", "flash attention (SDPA already)", "activation checkpointing"])
    m["planted"] = [planted16(
        "tiny_microbatch_accumulation", {"device": "GPU 0", "region": f"step_N > micro_0 ... micro_{Ai - 1}: {Ai} forward "
                                         f"/ backward passes of {mi} x {Si} tokens, each ~570 small kernels issued from "
                                         f"Python and the autograd engine faster than the host can launch them"},
        f"micro-batch {Bi}, no accumulation (--fixed; not captured)", b, "rm.tiny_microbatch_accumulation",
        "share.tiny_microbatch_accumulation",
        f"{b2['params_m'][0]:.0f} M parameters, {Bi} x {Si} tokens per update. In {Ai} passes of {mi} sequences each "
        f"pass costs the host its ~{Li * IF_BLOCK_OPS + IF_MICRO_OPS} Python ops (20-70 µs), ~"
        f"{Li * BLOCK_BWD_NODES + IF_MICRO_NODES} backward nodes (10-30 µs) and ~"
        f"{Li * IF_BLOCK_VIEWS + IF_MICRO_VIEWS + if_params()[1]} views, autocast casts and AccumulateGrad nodes (3-10 µs): {rng(b2, 'host_pass_ms')} ms per pass, against "
        f"{rng(b2, 'gpu_pass_ms')} ms of GPU work (GEMMs with M = {mi * Si} at 150-450 TFLOP/s, attention over {mi} "
        f"sequences at 30-150, ~400 small kernels, autocast's weight casts and the .grad adds repeated per pass). Update "
        f"{rng(b2, 'step')} ms on an H200 (host {rng(b2, 'host_ms')}, GPU {rng(b2, 'gpu_ms')} ms: host-paced at most "
        f"corners, GPU idle {rng(b2, 'idle_share', 0)} %). One pass of {Bi}: GEMMs at 550-800 TFLOP/s, attention at "
        f"80-250, GPU {rng(bf2, 'gpu_ms')} ms against host {rng(bf2, 'host_ms')} ms: {rng(b2, 'after')} ms, removed "
        f"{rng(b2, 'rm.tiny_microbatch_accumulation')} ms = {rng(b2, 'share.tiny_microbatch_accumulation', 1)} % (H100 "
        f"{rng(b, 'share.tiny_microbatch_accumulation', 1)} %), {rng(b2, 'speedup')}x. New cause name: "
        f"tiny_microbatch_accumulation.",
        ["tiny_microbatch_accumulation", "small_microbatch", "gradient_accumulation_microbatch", "launch_bound",
         "host_bound"], b2)]
    m["tolerated"] = [{"what": "autocast's weight casts, repeated every pass", "cause": "autocast_weight_cast",
                       "max_severity": "medium"},
                      {"what": "LayerNorm / GELU / residual kernels under autocast", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        f"step_N > micro_0 ... micro_{Ai - 1} (forward / backward each), then step_N > optimizer",
        f"~{Ai * 570} kernels per update plus ~{(Ai - 1) * 200} gradient-accumulation adds, almost all a few to tens of "
        f"microseconds long; GEMMs with M = {mi * Si}",
        "the GPU idle in launch-starved gaps most of the update (the next kernel not yet launched), no synchronization "
        "but the event wait"]
    m["must_not"] = [
        "the GEMM rate, precision or FP8 as the cause", "the optimizer as the problem (fused, once per update)",
        "a host synchronization (.item(), synchronize) as the cause", "data loading or host-to-device copies",
        "memory pressure as a reason to keep the micro-batch (a few GB of 141)", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We fine-tune a BERT-base-sized intent classifier ({b2['params_m'][0]:.0f} M parameters, {Bi} "
                     f"sequences of {Si} tokens per optimizer update, bf16 autocast, fused AdamW) on one H200. An update "
                     f"takes several times what the model's FLOPs should need, and the GPU looks mostly idle. What is "
                     f"going on, and what should we change?")
    m["diagnosis"] = (f"The update runs as {Ai} gradient-accumulation passes of {mi} sequences (a per-device batch of "
                      f"{mi} kept from a 16 GB card): each pass issues the full set of ~570 kernels for {mi * Si} tokens, "
                      f"so the host's Python ops and backward nodes ({rng(b2, 'host_pass_ms', 1)} ms per pass) set the "
                      f"pace while the GPU's work per pass is {rng(b2, 'gpu_pass_ms', 1)} ms: an update "
                      f"{rng(b2, 'step', 0)} ms with the GPU idle in launch-starved gaps most of it. One pass of {Bi} "
                      f"(activations of a few GB; the card has 141): ~{rng(b2, 'after', 0)} ms, "
                      f"{rng(b2, 'share.tiny_microbatch_accumulation', 0)} % removed "
                      f"({band_of16(b2, 'share.tiny_microbatch_accumulation')[0]}), {rng(b2, 'speedup', 1)}x. The "
                      f"kernels themselves, the optimizer and the data are fine.")
    m["measure"] = [{"what": "step period", "query": Q16["step"], "expect_ms": r2(b2["step"])},
                    {"what": "launch-starved idle", "query": Q16["starved"],
                     "expect": "most of the GPU idle time in gaps whose next kernel had not been launched"},
                    {"what": "NVTX ranges", "query": Q16["nvtx_ranges"],
                     "expect": f"{Ai} micro_K ranges per step of {rng(b2, 'host_pass_ms', 0)} ms each"}]
    m["new_cause"] = {"name": "tiny_microbatch_accumulation", "why": "an update split into many gradient-accumulation "
                      "passes of a tiny micro-batch (a per-device batch kept from a smaller card) when the whole batch "
                      "fits: every pass pays the full host cost of the model's ops and backward nodes for a fraction of "
                      "the work, so the step turns launch-bound; fixed by the largest micro-batch that fits and fewer "
                      "accumulation steps"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- ctr_batch (cpu_embedding_table; no NVTX) -------------------------------------------------------------------
    Bc, Fsc, dc = CT["batch"], CT["sparse"], CT["dim"]
    args = ["--batch", Bc, "--dense", CT["dense"], "--sparse", Fsc, "--rows", CT["rows"], "--dim", dc]
    b, b2, keys = ev(m_ct)
    bf2 = ev(lambda r: m_ct(r, fixed=True))[1]
    m = base("ctr_batch", "ctr_batch.py", "planted", args, nvtx=False, steps=CT["steps"], warmup=CT["warmup"], est=45)
    m["uses"] = uses("float32 weights, TF32 matmuls, inference", "none (inference, torch.inference_mode)", tf32=True,
                     pinned=True, host_sync=EVENT_SYNC)
    m["uses"]["embeddings"] = (f"{Fsc} tables of {CT['rows']:,} x {dc} float32 as one {b2['table_gb'][0]:.1f} GB table "
                               f"in host memory, looked up on the CPU (F.embedding on the CPU tensor); the gathered rows "
                               f"[{Bc}, {Fsc}, {dc}] ({b2['rows_gb'][0] * 1e3:.0f} MB, pageable) copied to the GPU")
    m["uses"]["pinned_memory"] = "the input batches (ids, dense features) are pinned; the gathered rows are not"
    m["techniques"] = techniques(
        f"keep the embedding table on the GPU ({b2['table_gb'][0]:.1f} GB of the 141) and gather there: copy only the "
        f"ids ({8 * Bc * Fsc / 1e6:.1f} MB per batch, pinned) instead of gathering {b2['rows_gb'][0] * 1e3:.0f} MB of "
        f"rows on the CPU and copying them from pageable memory (for tables that do not fit: a GPU cache of hot rows or "
        f"sharding across GPUs)",
        ["pinning the gathered rows or overlapping their copy as the top fix (the CPU gather remains)",
         "faster / fused MLP kernels, TF32 or bf16 as the top fix (the MLPs are ~1 %)", "CUDA graphs",
         "a larger batch", "more data-loader workers (the inputs are already pinned batches)",
         "torch.compile as the top fix"])
    m["planted"] = [planted16(
        "cpu_embedding_table", {"device": "GPU 0 (and the host)", "region": f"every batch (no NVTX): the host gathers "
                                f"{Bc * Fsc:,} rows on the CPU with the GPU idle, then one pageable HtoD memcpy of "
                                f"{b2['rows_gb'][0] * 1e3:.0f} MB, then the MLP kernels"},
        "embedding table on the GPU, ids copied (--fixed; not captured)", b, "rm.cpu_embedding_table",
        "share.cpu_embedding_table",
        f"{Bc} samples x {Fsc} ids per batch: {b2['rows_gb'][0] * 1e3:.0f} MB of 512-byte rows. The table lives in host "
        f"memory, so the host gathers them (F.embedding on the CPU into a fresh pageable tensor, 2-15 GB/s: "
        f"{rng(b2, 'cpu_gather_ms')} ms with the GPU idle) and copies them from pageable memory (6-14 GB/s: "
        f"{rng(b2, 'c.h2d_rows_pageable')} ms); the MLPs and interaction take {rng(b2, 'c.mlps_tf32')} + "
        f"{rng(b2, 'c.interaction')} ms. Batch {rng(b2, 'step')} ms on an H200 (host-paced: the GPU busy "
        f"{rng(b2, 'gpu_busy_share', 0)} %, its copy included). With the table on the GPU: the ids ({8 * Bc * Fsc / 1e6:.1f} "
        f"MB, pinned) copied in {rng(bf2, 'c.h2d_ids_dense_pinned')} ms and gathered in {rng(bf2, 'c.gpu_gather')} ms: "
        f"batch {rng(b2, 'after')} ms, removed {rng(b2, 'rm.cpu_embedding_table')} ms = "
        f"{rng(b2, 'share.cpu_embedding_table', 1)} % (H100 {rng(b, 'share.cpu_embedding_table', 1)} %), "
        f"{rng(b2, 'speedup', 0)}x. New cause name: cpu_embedding_table.",
        ["cpu_embedding_table", "cpu_embedding_lookup", "cpu_offload", "copy_bound_pageable", "host_bound"], b2)]
    m["tolerated"] = [{"what": "the MLPs' TF32 GEMMs and the interaction (needed work, ~1 ms)",
                       "cause": "kernel_inefficient", "max_severity": "low"},
                      {"what": "the small pinned copy of the dense features", "cause": "copy_many_small",
                       "max_severity": "info"}]
    m["expected_in_trace"] = [
        f"no NVTX; a batch is a long stretch of host time with no CUDA call (the CPU gather), one pageable HtoD memcpy of "
        f"{b2['rows_gb'][0] * 1e3:.0f} MB ({rng(b2, 'c.h2d_rows_pageable', 0)} ms), a small pinned one, then ~25 short "
        f"kernels",
        f"the GPU idle ~{100 - b2['gpu_busy_share'][1]:.0f}-{100 - b2['gpu_busy_share'][0]:.0f} % of each batch; no "
        f"embedding gather kernel on the GPU"]
    m["must_not"] = [
        "pageable memory / pinning as the root cause or the top fix (the CPU gather dominates as much as the copy)",
        "the MLPs, GEMMs or TF32 as the cause", "a data-loader / input pipeline problem (the batches arrive pinned)",
        "CUDA graphs / launch overhead", "a host synchronization (.item()) as the cause", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Our nightly job scores {Bc} (user, ad) samples per batch with a DLRM-style click-through model on "
                     f"one H200 ({CT['dense']} dense features, {Fsc} categorical features with {dc}-wide embeddings, "
                     f"float32 with TF32). The GPU utilization graph stays low and a batch takes far longer than its "
                     f"MLPs should. Where does the time go?")
    m["diagnosis"] = (f"The embedding table ({b2['table_gb'][0]:.1f} GB) is kept in host memory from the model's first "
                      f"deployment on 16 GB cards: every batch the CPU gathers {Bc * Fsc:,} rows "
                      f"({rng(b2, 'cpu_gather_ms', 0)} ms, the GPU idle) into a pageable tensor that is copied to "
                      f"the GPU ({b2['rows_gb'][0] * 1e3:.0f} MB at pageable speed, {rng(b2, 'c.h2d_rows_pageable', 0)} "
                      f"ms): a batch {rng(b2, 'step', 0)} ms on the H200 for ~1-2 ms of GPU work. Put the table on the "
                      f"GPU (it fits 35 times over) and copy the ids: ~{rng(b2, 'after', 1)} ms a batch, "
                      f"{rng(b2, 'share.cpu_embedding_table', 0)} % removed "
                      f"({band_of16(b2, 'share.cpu_embedding_table')[0]}). Pinning the rows would only shorten the "
                      f"copy.")
    m["measure"] = [{"what": "batch period (no NVTX)", "query": Q16["anchor"] + " with ANCHOR = the interaction bmm's "
                     "kernel or the 436 MB HtoD memcpy (one per batch), C = 1, WARM = 3", "expect_ms": r2(b2["step"])},
                    {"what": "copies", "query": Q16["memcpy"],
                     "expect": f"one pageable HtoD copy of {b2['rows_gb'][0] * 1e3:.0f} MB per batch at 6-14 GB/s and a "
                               f"small pinned one"}]
    m["new_cause"] = {"name": "cpu_embedding_table", "why": "embedding tables kept in host memory and looked up on the "
                      "CPU (a hybrid CPU-GPU recommender from smaller cards, an offload option) although they fit on the "
                      "GPU: every batch the host gathers the rows with the GPU idle and copies them over PCIe; fixed by "
                      "moving the tables to the GPU and copying only the ids"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- news_lm (tensor_parallel_unneeded; 2 ranks) ----------------------------------------------------------------
    Bn, Sn, Vn, dn, Ln = (NL[k] for k in ("batch", "seq", "vocab", "d", "blocks"))
    args = ["--batch", Bn, "--seq", Sn, "--vocab", Vn, "--d-model", dn, "--heads", NL["heads"], "--blocks", Ln]
    b, b2, keys = ev(m_nl)
    bf2 = ev(lambda r: m_nl(r, fixed=True))[1]
    m = base("news_lm", "news_lm.py", "planted", args, steps=NL["steps"], warmup=NL["warmup"], est=60, ranks=NL["ranks"])
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", attention=True,
                     sequences=f"{Bn} sequences of {Sn} tokens per step, the same on both ranks (no padding)",
                     ddp=False, host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, is_causal=True, {NL['heads'] // 2} of {NL['heads']} heads per rank"
    m["uses"]["parallelism"] = ("2-way tensor parallelism by hand (column-parallel QKV / fc1, row-parallel proj / fc2, "
                                "Megatron's f / g autograd functions with dist.all_reduce): per block 2 all-reduces of the "
                                f"[{Bn}, {Sn}, {dn}] bf16 activations and 2 of float32 input gradients; embeddings, "
                                "LayerNorms, head and loss replicated; no data parallelism, no DDP")
    m["techniques"] = techniques(
        f"use plain data parallelism (DDP, {Bn // 2} sequences per GPU): the {b2['params_m'][0]:.0f} M-parameter model "
        f"and its AdamW state need ~{b2['params_m'][0] * 16 / 1e3:.0f} GB per GPU, so nothing needs splitting; the "
        f"gradient all-reduce overlaps the backward and the replicated work is no longer done twice",
        ["a faster interconnect / NCCL tuning as the top fix (the all-reduces run at link speed)",
         "overlapping the TP all-reduces (sequence parallelism, async TP) as the top fix (they stay, plus the replicated "
         "work)", "FSDP / ZeRO", "bucket sizes (no DDP here)", "a straggler rank (the ranks are symmetric)",
         "CUDA graphs / launch overhead (GPU-bound)", "FP8 GEMMs as the top fix"])
    m["planted"] = [planted16(
        "tensor_parallel_unneeded", {"ranks": [0, 1], "region": f"both ranks, every block: 2 ncclDevKernel_AllReduce of "
                                     f"[{Bn * Sn}, {dn}] bf16 in step_N > forward and 2 of float32 gradients in "
                                     f"step_N > backward ({4 * Ln} per step, nothing overlapping them), and the replicated residual stream, head and "
                                     f"loss computed in full on both ranks"},
        "data parallelism: DDP, 16 sequences per rank (--fixed; not captured)", b, "rm.tensor_parallel_unneeded",
        "share.tensor_parallel_unneeded",
        f"{b2['params_m'][0]:.0f} M parameters, {Bn} x {Sn} tokens per step over both GPUs. Split 2-way: per rank half the "
        f"block GEMMs ({rng(b2, 'c.block_gemm_bf16')} ms at 550-800 TFLOP/s) and of the attention "
        f"({rng(b2, 'c.attention_causal')} ms), but the residual stream's elementwise work (50-70 % of the blocks' "
        f"140-220 B per token x d) in full ({rng(b2, 'c.block_elementwise')} ms in all), the tied head "
        f"({rng(b2, 'c.lm_head_gemm')} ms) and the float32 cross-entropy ({rng(b2, 'c.cross_entropy_fp32')} ms) in full, "
        f"and {4 * Ln} all-reduces on the critical path ({2 * Ln} of {2 * Bn * Sn * dn / 1e6:.0f} MB of bf16 activations in "
        f"the forward, {2 * Ln} of {4 * Bn * Sn * dn / 1e6:.0f} MB of float32 gradients in the backward: "
        f"{b2['ar_gb'][0]:.1f} GB at 200-300 GB/s, {rng(b2, 'c.tp_allreduce_exposed')} ms). Step {rng(b2, 'step')} ms (GPU-bound: host "
        f"{rng(b2, 'host_ms')} ms). Data parallel: the same GEMM and attention FLOPs per rank, half the rest, DDP's "
        f"all-reduce overlapped with the backward but for the tied embedding's bucket "
        f"({rng(b2, 'after_allreduce_exposed_ms', 2)} ms), AdamW over the full model: {rng(b2, 'after')} ms (host "
        f"{rng(bf2, 'host_ms')} ms): removed {rng(b2, 'rm.tensor_parallel_unneeded')} ms = "
        f"{rng(b2, 'share.tensor_parallel_unneeded', 1)} % (H100 {rng(b, 'share.tensor_parallel_unneeded', 1)} %), "
        f"{rng(b2, 'speedup')}x (the split step holds {rng(b2, 'allreduce_ms', 1)} ms of exposed all-reduces and "
        f"{rng(b2, 'duplicated_ms', 1)} ms of replicated work; data parallelism adds back the full model's optimizer, "
        f"casts and bucket copies). New cause name: tensor_parallel_unneeded.",
        ["tensor_parallel_unneeded", "tensor_parallel_overhead", "unneeded_model_parallel", "exposed_communication",
         "wrong_parallelism"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / cast / GELU / residual kernels under autocast (memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "high"},
                      {"what": f"the float32 cross-entropy over {Bn * Sn} x {Vn} logits", "cause": "elementwise_unfused",
                       "max_severity": "medium"},
                      {"what": "autocast's per-step weight casts", "cause": "autocast_weight_cast", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "both ranks alike (no straggler), the same kernels on both",
        f"{4 * Ln} ncclDevKernel_AllReduce per step and rank ({Ln * 2} in step_N > forward, {Ln * 2} in step_N > "
        f"backward), {rng(b2, 'c.tp_allreduce_exposed', 0)} ms in all, with no compute kernel beside them",
        "half-width GEMMs in the blocks (N = 1536 / 2048 or K = 512 / 2048), full-size head and cross-entropy",
        "no DDP bucket all-reduce; no host synchronization in the loop but the event wait; GPU-bound"]
    m["must_not"] = [
        "a straggler or imbalanced rank", "NCCL / NVLink / P2P configuration as slow (the all-reduces run at link "
        "speed)", "DDP bucket size or gradient all-reduce as the cause (there is no DDP)",
        "the compute (GEMMs, attention) as the cause", "a host synchronization or .item() as the cause",
        "FSDP / ZeRO as the fix", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We train a {b2['params_m'][0]:.0f} M-parameter GPT-style model (d {dn}, {Ln} layers, {Bn} x {Sn} "
                     f"tokens per step) on 2 H200s with bf16 autocast and fused AdamW, split across the two GPUs with "
                     f"our in-house model-parallel layers. Throughput per GPU is well below what a single H200 gets on "
                     f"models of this size. What costs the time on both GPUs, and is it worth fixing?")
    m["diagnosis"] = (f"The model is split Megatron-style (2-way tensor parallelism) although it fits one GPU many times "
                      f"over: both ranks process the same {Bn} x {Sn} tokens, every block all-reduces its activations "
                      f"twice in the forward and its input gradients twice in the backward ({4 * Ln} all-reduces per step, "
                      f"{b2['ar_gb'][0]:.1f} GB: {2 * Bn * Sn * dn / 1e6:.0f} MB bf16 forward, {4 * Bn * Sn * dn / 1e6:.0f} "
                      f"MB float32 backward; {rng(b2, 'c.tp_allreduce_exposed', 0)} ms with nothing to overlap them), and the residual stream, head and loss are computed in full on both ranks: a "
                      f"step {rng(b2, 'step', 0)} ms on the H200s. Data parallelism (DDP, {Bn // 2} sequences per GPU, "
                      f"the gradient all-reduce hidden in the backward): ~{rng(b2, 'after', 0)} ms, "
                      f"{rng(b2, 'share.tensor_parallel_unneeded', 0)} % removed "
                      f"({band_of16(b2, 'share.tensor_parallel_unneeded')[0]}), {rng(b2, 'speedup', 2)}x. The ranks "
                      f"are balanced and the links run at speed; the rest of the step is GEMMs, the memory-bound "
                      f"elementwise kernels of an autocast transformer and the float32 cross-entropy.")
    m["measure"] = [{"what": "step period per rank", "query": Q16["step"] + " (both ranks)", "expect_ms": r2(b2["step"])},
                    {"what": "NCCL kernels", "query": Q16["nccl"],
                     "expect": f"{4 * Ln} all-reduces per step and rank (~0.2-0.3 ms bf16 forward, ~0.4-0.7 ms float32 backward), "
                               f"{rng(b2, 'c.tp_allreduce_exposed', 0)} ms in all"},
                    {"what": "exposed communication", "query": Q16["split"],
                     "expect": f"~{rng(b2, 'c.tp_allreduce_exposed', 0)} ms of NCCL-only time per step, in step_N > "
                               f"forward and step_N > backward"}]
    m["new_cause"] = {"name": "tensor_parallel_unneeded", "why": "tensor (Megatron-style) model parallelism used for a "
                      "model that fits on each GPU: per-layer activation all-reduces on the critical path of both the "
                      "forward and the backward, and the replicated parts (residual stream, norms, embeddings, head, "
                      "loss) computed on every rank; fixed by data parallelism (DDP / FSDP without sharding need), "
                      "keeping tensor parallelism for models that do not fit"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.h200_table)
