#!/usr/bin/env python3
"""First-principles truth for the fourth held-out set (heldout4): writes heldout4/manifests/<case>.json from FLOPs,
bytes, launch counts and rate bands alone (no capture, no aisp output), with the helpers of ../derive.py.

    python3 workloads/planted/heldout4/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout4/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout4/derive.py --table    # the README table only

Method: as ../derive.py and heldout3/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or launches x a host cost per launch; a quantity's band is its min and max over the corners
of the bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the device
where the problem sits; severity: info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical. The 2-rank
case replays the program's own per-step schedule (history_lengths, read from ddp2_history.py's source) so that its
imbalance is exact, not a statistical estimate. New bands (each with its source in the manifests' `rates`): the
SDPA forward rate alone, the cost of SparseAdam's row update, the thin LoRA GEMMs' fraction of HBM bandwidth, the
host cost of one in-place tensor op; the rest are ../derive.py's, and six of heldout3's copied here with their
sources so that this set depends on no other held-out set.
"""
import ast
import os
import random
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_base():
    """../derive.py under its own module name (this file is derive.py too): evaluate, time and manifest helpers."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("planted_derive", os.path.join(os.path.dirname(HERE), "derive.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


D = _load_base()
ADAM_B, AMP_B, DDP_B, GB, Q = D.ADAM_B, D.AMP_B, D.DDP_B, D.GB, D.Q
mlp_params, mlp_train_flops, gelu_train_bytes = D.mlp_params, D.mlp_train_flops, D.gelu_train_bytes
pct, planted, r2, rng, techniques, uses = D.pct, D.planted, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link

SET = "heldout4"

# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; fractions as named.
NEW_H100 = {
    # copied from heldout3/derive.py (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "attn_train_d128_tflops": (250.0, 480.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    "ew_bf16_tokd_bytes": (90.0, 130.0),
    "embed_bwd_extra_ms": (0.05, 0.3),
    "eager_op_us": (20.0, 70.0),
    # new here
    "attn_fwd_d128_tflops": (300.0, 600.0),
    "sparse_update_ms": (0.5, 2.0),
    "thin_gemm_eff": (0.5, 0.9),
    "tensor_op_us": (5.0, 30.0),
}
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 1024 (tokens x 1024 x {1024, 3072, 4096}, or K = 1024 for the "
                       "LM head): below the 8192^3 rate (732-787 measured) as tiles and waves shrink and the epilogue's "
                       "writes weigh more; as heldout2/derive.py, an assumption widened down to 550 (heldout3/derive.py). "
                       "Used here for every GEMM whose smallest dimension is <= 1024 or whose M varies per step",
    "attn_train_d128_tflops": "SDPA flash forward + backward, bf16, head_dim 128, non-causal, counted as 14*B*S^2*D FLOPs "
                              "(forward 4, backward 10 with the recomputed scores); FlashAttention-2 on H100 ~350 forward, "
                              "~250-300 backward at head_dim 128 (published FA2 figures); band 250-480 (heldout2, heldout3)",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: "
                     "torch busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (BENCHMARKS.md figures quoted by "
                     "heldout2/derive.py), 329 at 1 GiB on 2 H100; band 200-300 (heldout3)",
    "ew_bf16_tokd_bytes": "elementwise bytes per token x d_model per pre-LN transformer block with pure bf16 parameters "
                          "(no autocast casts), forward + backward: LayerNorm forward 2 x 4, backward 2 x 6; residual adds "
                          "forward 2 x 6 and their gradient sums 2 x 6; GELU on 4d forward 16, backward 24; attention-output "
                          "transpose copy 4 + 4; assembling dq/dk/dv into the qkv gradient 12: ~100 counted; band 90-130 "
                          "(heldout3). The forward alone is 40 of them (LayerNorms 8, residual adds 12, GELU 16, copy 4)",
    "embed_bwd_extra_ms": "embedding_dense_backward beyond its bytes: sorting the looked-up ids and the segment reduction's "
                          "launches (a few small kernels); band 0.05-0.3 ms (assumption, heldout3)",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python (module call, dispatcher, cudaLaunchKernel) under "
                   "nsys with cuda+nvtx+osrt tracing on this pool: 29-36 µs per kernel measured (tests/data/workloads/"
                   "tiny_kernels.sqlite, quoted by ../derive.py), ~70 µs per op implied by heldout2's attn_eager.fixed "
                   "capture; band 20-70 µs (heldout3). Used here only to show that a case is GPU-bound (host margin)",
    "attn_fwd_d128_tflops": "SDPA forward alone (inference or a no_grad forward), bf16, head_dim 128, non-causal, counted as "
                            "4*B*S^2*D FLOPs: FlashAttention-2 forward ~330-380 on H100 at head_dim 128 (published FA2 "
                            "figures), cuDNN / FA3-class kernels up to ~600; band 300-600 (assumption; attention is 2-4 % "
                            "of the steps that use it)",
    "sparse_update_ms": "the table's update once its gradient is sparse (nn.Embedding(sparse=True) + SparseAdam): the sparse "
                        "gradient's values copy (131072 x 128 fp32, 67 MB), coalesce (sort of 131072 ids, unique, segment "
                        "sum; it reads the number of unique rows back to the host: one stream sync), then ~15 elementwise / "
                        "gather / index_add kernels over the ~130 000 touched rows (67 MB each way) and the host issuing them "
                        "after the sync (~20 ops at 5-30 µs): 0.5-2.0 ms (assumption, from bytes ~2 GB at HBM rate and the "
                        "serialised host work)",
    "thin_gemm_eff": "achieved fraction of HBM bandwidth of the LoRA GEMMs (8192 x 3584 x 16 reading the activation, "
                     "8192 x 16 x 3584 writing the output; 14336 wide for the MLP's): memory-bound, cuBLAS picks small-N "
                     "or split-K tiles; 0.5-0.9 of the copy rate (assumption)",
    "tensor_op_us": "host cost of one in-place tensor method call inside a Python loop (exp_avg.lerp_, param.addcdiv_, ...: "
                    "no module call, dispatcher + cudaLaunchKernel) under nsys on this pool: ~5-10 µs without a profiler, "
                    "up to ~30 with cuda+osrt tracing (assumption); used only to show the host keeps ahead",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H100)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q4 = dict(Q)
Q4.update({
    "nvtx_ranges": "sql/nvtx_range_ms.sql: CPU duration of each NVTX range name (count, mean, min, max)",
    "starved": "sql/launch_starved_idle.sql: GPU idle split into gaps whose next kernel had not been launched yet "
               "(the GPU waits for the host) and other gaps, between T0 and T1",
})


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


# ---------------------------------------------------------------------------------------------------
# DDP on 2 ranks: a timeline of the backward with DDP's buckets (as heldout3/derive.py).
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


# ---------------------------------------------------------------------------------------------------
# The cases (models of one steady step).

# ctr_embed: CTR model, 8192 impressions x 16 fields hashed into one 8,000,000 x 128 fp32 table (dense gradients),
# 64 dense features, bias-free GELU MLP 2112 -> 4096 -> 4096 -> 1024 -> 1 under bf16 autocast, one fused AdamW.
CE = dict(batch=8192, fields=16, rows=8_000_000, dim=128, dense=64, hidden=[4096, 4096, 1024], steps=25)


def ce_dims():
    return [CE["fields"] * CE["dim"] + CE["dense"]] + CE["hidden"] + [1]


def m_ctr(r):
    B, F, N, Dm = CE["batch"], CE["fields"], CE["rows"], CE["dim"]
    dims = ce_dims()
    hbm = r["hbm_tbs"]
    L = B * F                      # lookups per step
    Pt, Pm = float(N * Dm), float(mlp_params(dims))
    c = {"mlp_gemm_bf16": t_flops(mlp_train_flops(B, dims, input_grad=True), r["bf16_mid_tflops"]),
         # GELUs forward + backward (bf16), the concatenated input's autocast cast (r4 w2) and its gradient's cast back
         # (r2 w4), the logit's loss (a few bytes per impression)
         "mlp_gelu_input_casts": t_bytes(gelu_train_bytes(B, dims, 2) + 12.0 * B * dims[0] + 64.0 * B, hbm),
         # gather r4 w4 per looked-up element; the concatenation reads and writes the 2112-wide fp32 input
         "embedding_gather_concat": t_bytes(8.0 * L * Dm + 8.0 * B * dims[0], hbm),
         # the gradient's strided view made contiguous (r4 w4), then segment sums into the rows (r4 w4); sort of the ids
         "embedding_backward_rows": t_bytes(16.0 * L * Dm, hbm) + r["embed_bwd_extra_ms"],
         "amp_casts_mlp_weights": t_bytes(AMP_B * Pm, hbm),
         "adamw_fused_mlp": t_bytes(ADAM_B[4] * Pm, hbm),
         # planted: the dense gradient of the whole table is zero-filled every step, then fused AdamW reads and writes
         # every row's parameters and moments
         "table_grad_zero_fill": t_bytes(4.0 * Pt, hbm),
         "adamw_fused_table": t_bytes(ADAM_B[4] * Pt, hbm)}
    step = sum(c.values())
    dense = c["table_grad_zero_fill"] + c["adamw_fused_table"]
    rm = {"dense_embedding_update": dense - r["sparse_update_ms"]}
    return {"c": c, "step": step, "rm": rm, "share": shares(rm, step), "after": step - rm["dense_embedding_update"],
            "table_share_of_step": pct(dense, step), "table_gb": 4.0 * Pt / GB, "mlp_params_m": Pm / 1e6,
            "table_traffic_gb": 32.0 * Pt / GB, "touched_rows_pct": 100.0 * L / N,
            "peak_gb": (16.0 * Pt + 16.0 * Pm) / GB}


# surrogate_mlp: bias-free GELU MLP 1024 -> 8192 x4 -> 1024 (5 fp32 tensors, 218 M parameters), 4096 rows, bf16 autocast,
# AdamW(foreach=False): the single-tensor path, 8 kernels per parameter tensor. No NVTX.
SM = dict(rows=4096, dims=[1024, 8192, 8192, 8192, 8192, 1024], steps=25)
ADAM_SINGLE_B = 80.0  # per fp32 parameter: mul_ 8, lerp_ 12, mul_ 8, addcmul_ 12, sqrt 8, div 8, add_ 8, addcdiv_ 16
ADAM_SINGLE_KERNELS = 8
MSE_B = 52.0  # per output element: out.float() 6, - y 12, pow 8, mean 4; backward ~22


def m_surrogate(r, fixed=False):
    R, dims = SM["rows"], SM["dims"]
    hbm = r["hbm_tbs"]
    P = float(mlp_params(dims))
    n_t = len(dims) - 1
    c = {"gemm_bf16": t_flops(mlp_train_flops(R, dims), r["bf16_tflops"]),
         "gelu": t_bytes(gelu_train_bytes(R, dims, 2), hbm),
         "input_cast_loss": t_bytes(6.0 * R * dims[0] + MSE_B * R * dims[-1], hbm),
         "amp_casts": t_bytes(AMP_B * P, hbm)}
    if fixed:
        c["adamw_fused"] = t_bytes(ADAM_B[4] * P, hbm)
    else:
        c["adamw_single_tensor_8_passes"] = t_bytes(ADAM_SINGLE_B * P, hbm)
    step = sum(c.values())
    # host per step: forward ~3 ops per layer, autograd's backward ~4 kernels per layer (C++, counted at the same
    # cost), the loss and the optimizer's calls (8 per tensor, or ~6 fused launches)
    host_ops = 3 * n_t + 4 * n_t + 8 + (6 if fixed else ADAM_SINGLE_KERNELS * n_t + 2 * n_t)
    host = host_ops * r["tensor_op_us"] / 1e3
    out = {"c": c, "step": step, "host_ms": host, "host_margin_ms": step - host, "params_m": P / 1e6, "tensors": n_t,
           "fused_adamw_ms": t_bytes(ADAM_B[4] * P, hbm)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None, "optimizer_share": pct(c["adamw_fused"], step)})
        return out
    rm = {"optimizer_unfused": t_bytes((ADAM_SINGLE_B - ADAM_B[4]) * P, hbm)}
    out.update({"rm": rm, "share": shares(rm, step), "after": step - rm["optimizer_unfused"],
                "optimizer_share": pct(c["adamw_single_tensor_8_passes"], step)})
    return out


# text_cls: encoder classifier, 32 x 512 tokens, d 1024, 8 heads of 128, 8 blocks, vocabulary 32000, 4 classes, pure bf16,
# fused AdamW; after every step a second forward of the same batch under no_grad for the training accuracy.
TC = dict(batch=32, seq=512, d=1024, heads=8, blocks=8, vocab=32000, classes=4, steps=25)
FWD_EW_B = 40.0  # the forward's share of ew_bf16_tokd_bytes


def m_textcls(r):
    B, S, d, L, V, K = TC["batch"], TC["seq"], TC["d"], TC["blocks"], TC["vocab"], TC["classes"]
    T = B * S
    hbm = r["hbm_tbs"]
    P = L * (12.0 * d * d + 4 * d) + V * d + 2 * d + d * K
    fwd_gemm = t_flops(L * 24.0 * T * d * d, r["bf16_mid_tflops"])
    fwd_attn = t_flops(L * 4.0 * B * S * S * d, r["attn_fwd_d128_tflops"])
    # no-grad forward's elementwise: blocks 40 B per token x d, embedding gather r2 w2, final LayerNorm r2 w2, pooling r2
    fwd_ew = t_bytes(L * FWD_EW_B * T * d + 10.0 * T * d, hbm)
    c = {"gemm_bf16_fwd_bwd": t_flops(L * 72.0 * T * d * d, r["bf16_mid_tflops"]),
         "attention_sdpa_fwd_bwd": t_flops(L * 14.0 * B * S * S * d, r["attn_train_d128_tflops"]),
         "layernorm_gelu_residual_copies": t_bytes(L * r["ew_bf16_tokd_bytes"] * T * d, hbm),
         # embedding gather (r2 w2) and its backward (read the grad 2, zero-fill and write the V x d grad 2 + 2), final
         # LayerNorm forward 4 + backward 6, mean pooling forward 2 and its backward's expand 2
         "embedding_norm_pool": t_bytes(4.0 * T * d + 2.0 * T * d + 4.0 * V * d + 10.0 * T * d + 4.0 * T * d, hbm)
                                + r["embed_bwd_extra_ms"],
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm),
         "metrics_forward_no_grad": fwd_gemm + fwd_attn + fwd_ew}
    step = sum(c.values())
    rm = {"redundant_forward": c["metrics_forward_no_grad"]}
    return {"c": c, "step": step, "rm": rm, "share": shares(rm, step), "after": step - rm["redundant_forward"],
            "params_m": P / 1e6, "gemm_share": pct(c["gemm_bf16_fwd_bwd"] + fwd_gemm, step),
            "metrics_gemm": fwd_gemm, "metrics_attn": fwd_attn, "metrics_ew": fwd_ew}


# lora_score: LoRA-tuned encoder scoring 8 x 1024 tokens per batch, d 3584, 28 heads of 128, FFN 14336, 4 blocks, bf16,
# inference; rank-16 adapters on q, k, v, o, up, down applied unmerged (base + B(A(x)) * scaling) or merged (--fixed).
LS = dict(batch=8, seq=1024, d=3584, heads=28, ffn=14336, blocks=4, rank=16, alpha=32.0, vocab=32000, pool=4, ring=64,
          steps=25)
LS_ADAPTED = 6                 # q, k, v, o, up, down
LS_BLOCK_KERNELS = 13          # ln1, q, k, v, sdpa, transpose copy, o, add, ln2, up, gelu, down, add
LS_LORA_KERNELS = 4            # per adapted Linear: A GEMM, B GEMM, * scaling, + (dropout is the identity in eval)
LS_BLOCK_HOST_OPS = 10         # ln1, 3 view/transpose + sdpa, transpose/reshape, add, ln2, gelu, add (Python-level)
LS_LORA_HOST_OPS = 6           # LoRALinear call: base, dropout, lora_A, lora_B, mul, add (merged: base only, 2)


def m_lora(r, fixed=False):
    B, S, d, f, L = LS["batch"], LS["seq"], LS["d"], LS["ffn"], LS["blocks"]
    T = B * S
    hbm = r["hbm_tbs"]
    # (d_in, d_out) of the adapted Linears of one block
    lin = [(d, d)] * 4 + [(d, f), (f, d)]
    c = {"gemm_bf16_base": t_flops(L * 2.0 * T * sum(i * o for i, o in lin), r["bf16_tflops"]),
         "attention_sdpa_fwd": t_flops(L * 4.0 * B * S * S * d, r["attn_fwd_d128_tflops"]),
         "layernorm_gelu_residual_copy": t_bytes(L * FWD_EW_B * T * d, hbm),
         # embedding gather r2 w2, final LayerNorm r2 w2, mean pooling r2; the score head is 8 x 4096 x 1
         "embedding_norm_pool": t_bytes(10.0 * T * d, hbm)}
    lora_gemm = t_bytes(L * sum(2.0 * T * i + 2.0 * T * o for i, o in lin), r["thin_gemm_eff"] * hbm)
    lora_ew = t_bytes(L * sum(10.0 * T * o for _, o in lin), hbm)
    if not fixed:
        c["lora_thin_gemms"] = lora_gemm
        c["lora_scale_and_add"] = lora_ew
    step = sum(c.values())
    per_block_gpu = step / L
    host_ops = L * (LS_BLOCK_HOST_OPS + LS_ADAPTED * (2 if fixed else LS_LORA_HOST_OPS)) + 8
    host = host_ops * r["eager_op_us"] / 1e3
    kernels = L * (LS_BLOCK_KERNELS + (0 if fixed else LS_ADAPTED * LS_LORA_KERNELS)) + 7
    gelu_epi = t_bytes(L * 16.0 * T * d, hbm)  # GELU into the up-projection's epilogue (the merged model's best fusion)
    out = {"c": c, "step": step, "host_ms": host, "host_margin_ms": step - host, "kernels": kernels,
           "per_block_gpu_ms": per_block_gpu, "gemm_share": pct(c["gemm_bf16_base"], step),
           "elementwise_share": pct(c["layernorm_gelu_residual_copy"], step), "gelu_epilogue_share": pct(gelu_epi, step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    rm = {"lora_unmerged": lora_gemm + lora_ew}
    after = m_lora(r, fixed=True)["step"]
    out.update({"rm": rm, "share": shares(rm, step), "after": after, "speedup": step / after,
                "lora_share_of_step": pct(lora_gemm + lora_ew, step)})
    return out


# ddp2_history: 2 ranks, event encoder 512 -> 4096 x4 -> 1024 and user tower 1024 -> 1024 -> 1 (57.7 M fp32 parameters),
# bf16 autocast, DDP, fused AdamW; per step 16 users per rank with heavy-tailed histories, packed per rank (padded to 256).
DH = dict(users=16, feat=512, event_dims=[4096, 4096, 4096, 4096, 1024], tower=[1024, 1024, 1], pad=256, steps=25, warmup=3,
          seed=0)
POOL_FWD_B = 10.0   # per event x 1024: the encoder output cast to fp32 (r2 w4) and index_add_ reading it (4)
POOL_BWD_B = 14.0   # per event x 1024: index_add_'s backward gathers the pooled grad (w4, reads hit L2) and casts it back (r4 w2)


def _history_lengths():
    """ddp2_history.py's own history_lengths, read from its source (the program imports torch; this does not)."""
    src = open(os.path.join(HERE, "ddp2_history.py"), encoding="utf-8").read()
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "history_lengths")
    ns = {"random": random}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "ddp2_history.py", "exec"), ns)
    return ns["history_lengths"]


history_lengths = _history_lengths()
DH_PLAN = [history_lengths(DH["seed"], s, DH["users"], 2, False, DH["pad"])[1] for s in range(DH["steps"])]
DH_BAL = [history_lengths(DH["seed"], s, DH["users"], 2, True, DH["pad"])[1] for s in range(DH["steps"])]
DH_STEADY = list(range(DH["warmup"], DH["steps"]))


def dh_dims():
    return [DH["feat"]] + DH["event_dims"]


def dh_params():
    return float(mlp_params(dh_dims()) + mlp_params(DH["tower"]))


def dh_fwd(r, T):
    dims = dh_dims()
    fl = sum(2.0 * T * a * b for a, b in zip(dims, dims[1:]))
    ew = 4.0 * T * sum(dims[1:-1]) + POOL_FWD_B * T * dims[-1]
    return t_flops(fl, r["bf16_mid_tflops"]) + t_bytes(ew, r["hbm_tbs"])


def dh_bwd_nodes(r, T):
    """Backward nodes, in order: the user tower (16 rows: tiny, its 4.2 MB of gradients ready first), pooling's backward,
    then the event encoder last layer first: weight-gradient GEMM, input-gradient GEMM except for the first layer, the
    GELU backward in front of each layer but the first (6 B per bf16 element); each layer's fp32 gradient (4 B per
    parameter) ready at its node's end."""
    dims, tw = dh_dims(), DH["tower"]
    nodes = [(0.0, 4.0 * mlp_params(tw)), (t_bytes(POOL_BWD_B * T * dims[-1], r["hbm_tbs"]), 0.0)]
    n = len(dims) - 1
    for i in reversed(range(n)):
        a, b = dims[i], dims[i + 1]
        ms = t_flops((2 if i > 0 else 1) * 2.0 * T * a * b, r["bf16_mid_tflops"])
        if i > 0:
            ms += t_bytes(6.0 * T * a, r["hbm_tbs"])
        nodes.append((ms, 4.0 * a * b))
    return nodes


def dh_step(r, T):
    """One step's period when the slower rank has T events: its forward and backward, the all-reduce left after its
    backward, the per-step fixed work (AMP weight casts, fused AdamW, DDP's bucket copies) and NCCL's slowdown of the
    compute it overlaps."""
    P = dh_params()
    fwd = dh_fwd(r, T)
    bwd, left, total, nb = ddp_timeline(r, dh_bwd_nodes(r, T))
    fixed = t_bytes((AMP_B + ADAM_B[4] + DDP_B) * P, r["hbm_tbs"])
    ov = r["overlap_penalty"] * (total - left)
    return {"fwd": fwd, "bwd": bwd, "left": left, "fixed": fixed, "ov": ov, "ar_total": total, "buckets": nb,
            "step": fwd + bwd + left + fixed + ov}


def m_history(r, fixed=False):
    plan = DH_BAL if fixed else DH_PLAN
    per = [dh_step(r, max(plan[s])) for s in DH_STEADY]
    fast = [dh_step(r, min(plan[s])) for s in DH_STEADY]
    bal = [dh_step(r, max(DH_BAL[s])) for s in DH_STEADY]
    n = len(DH_STEADY)
    mean = lambda xs: sum(xs) / len(xs)
    step = mean([p["step"] for p in per])
    c = {"forward_slower_rank": mean([p["fwd"] for p in per]),
         "backward_slower_rank": mean([p["bwd"] for p in per]),
         "allreduce_left_after_backward": mean([p["left"] for p in per]),
         "amp_casts_adam_ddp_copies": per[0]["fixed"],
         "overlap_slowdown": mean([p["ov"] for p in per]),
         "allreduce_total_overlapped": mean([p["ar_total"] for p in per])}
    out = {"c": c, "step": step, "step_median": statistics.median([p["step"] for p in per]),
           "buckets": per[0]["buckets"], "tail_share": pct(c["allreduce_left_after_backward"], step),
           "params_m": dh_params() / 1e6}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    # the faster rank's wait: the slower rank's forward + backward beyond its own, every step
    wait = mean([p["fwd"] + p["bwd"] - f["fwd"] - f["bwd"] for p, f in zip(per, fast)])
    after = mean([b["step"] for b in bal])
    rm = {"load_imbalance": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after, "faster_rank_wait": wait,
                "faster_rank_wait_share": pct(wait, step)})
    return out


def dh_stats():
    """Exact per-step facts of the schedule (no rates): events per rank, which rank is slower, the imbalance."""
    steady = [DH_PLAN[s] for s in DH_STEADY]
    slower = [p.index(max(p)) for p in steady]
    ev_max = sum(max(p) for p in steady) / len(steady)
    ev_mean = sum(sum(p) / 2 for p in steady) / len(steady)
    ev_bal = sum(max(DH_BAL[s]) for s in DH_STEADY) / len(steady)
    return {"steady": steady, "slower": slower, "slower_counts": [slower.count(0), slower.count(1)], "ev_max": ev_max,
            "ev_mean": ev_mean, "ev_bal": ev_bal, "most": max(max(p) for p in DH_PLAN),
            "ratio_max": max(max(p) / min(p) for p in steady), "ratio_mean": sum(max(p) / min(p) for p in steady) / len(steady),
            "excess_pct": 100.0 * (ev_max - ev_bal) / ev_max}


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, ranks=1, nvtx=True, est=45, steps=30, warmup=3):
    return D.base(name, f"heldout4/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
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

    # ---- ctr_embed (dense_embedding_update) -----------------------------------------------------------------------
    B, F, N, Dm = CE["batch"], CE["fields"], CE["rows"], CE["dim"]
    dims = ce_dims()
    args = ["--batch", B, "--fields", F, "--rows", N, "--emb-dim", Dm, "--dense", CE["dense"],
            "--hidden", ",".join(map(str, CE["hidden"]))]
    b, b2, keys = ev(m_ctr)
    Pt = N * Dm
    m = base("ctr_embed", "ctr_embed.py", "planted", args, steps=CE["steps"], est=45)
    m["uses"] = uses("bf16 autocast (MLP), fp32 parameters and embedding table", "AdamW fused (one optimizer, table included)",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["embedding"] = f"nn.Embedding({N}, {Dm}), dense gradients (sparse=False)"
    m["techniques"] = techniques(
        "sparse embedding gradients with a row-wise / sparse optimizer that touches only the looked-up rows "
        "(nn.Embedding(sparse=True) + SparseAdam, or a fused row-wise optimizer such as TorchRec / FBGEMM's), instead of "
        "a dense gradient and dense AdamW over the whole table",
        ["fused optimizer (already fused: the optimizer's kernels already run at HBM rate)", "bf16 / autocast for the MLP "
         "(already)", "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)", "sequence packing (no sequences)",
         "CUDA graphs (GPU-bound: ~100 launches per 14-17 ms step)", "pinned memory / data loading (batches resident on the GPU)",
         "activation checkpointing", "elementwise fusion of the MLP's GELUs as the top fix (~2 % of the step)"])
    m["planted"] = [planted(
        "dense_embedding_update", {"device": "GPU 0", "region": "step_N > backward (the table gradient's zero fill) and "
                                   "step_N > optimizer (fused AdamW over the table)"},
        "nn.Embedding(sparse=True) for the table + SparseAdam (or a row-wise fused optimizer): only the ~130 000 looked-up "
        "rows are written (--fixed; not captured)", b, "rm.dense_embedding_update", "share.dense_embedding_update",
        f"Table {N} x {Dm} fp32 = {Pt / 1e9:.3f} G parameters ({4 * Pt / GB:.1f} GB). Each step looks up {B} x {F} = {B * F} rows "
        f"(at most {b['touched_rows_pct'][0]:.1f} % of the table), but with dense gradients the embedding backward allocates and "
        f"zero-fills a {4 * Pt / GB:.1f} GB gradient for the whole table (w4: {rng(b, 'c.table_grad_zero_fill')} ms at 2.6-3.0 TB/s) "
        f"before summing the {B * F} looked-up rows into it, and fused AdamW then reads parameters, gradient and both moments "
        f"(16 B) and writes parameters and moments (12 B) for every row: 28 B x {Pt / 1e9:.3f} G = {28 * Pt / GB:.1f} GB = "
        f"{rng(b, 'c.adamw_fused_table')} ms. Together {32 * Pt / GB:.1f} GB per step, {rng(b, 'table_share_of_step', 0)} % of the "
        f"step. The rest: MLP GEMMs (bf16, input gradient included) {mlp_train_flops(B, dims, True) / 1e12:.2f} TFLOP at 550-800 = "
        f"{rng(b, 'c.mlp_gemm_bf16')} ms, GELUs and casts {rng(b, 'c.mlp_gelu_input_casts')} ms, gather and concat "
        f"{rng(b, 'c.embedding_gather_concat')} ms, the looked-up rows' backward (contiguous copy, sort, segment sums) "
        f"{rng(b, 'c.embedding_backward_rows')} ms, AMP casts and fused AdamW of the MLP's {b['mlp_params_m'][0]:.1f} M parameters "
        f"{rng(b, 'c.amp_casts_mlp_weights')} + {rng(b, 'c.adamw_fused_mlp')} ms: step {rng(b, 'step', 1)} ms. With sparse gradients "
        f"and SparseAdam the table's update costs 0.5-2.0 ms (values copy, coalesce with one stream sync, ~15 kernels over the "
        f"touched rows): removed {rng(b, 'rm.dense_embedding_update', 1)} ms = {rng(b, 'share.dense_embedding_update', 1)} % -> "
        f"critical at every corner (H200 at 3.9-4.4 TB/s: {rng(b2, 'share.dense_embedding_update', 1)} %, critical). New cause "
        "name: dense_embedding_update.", accept=["dense_embedding_update"], b2=b2)]
    m["tolerated"] = [{"what": "GELU kernels and the input's autocast casts of the MLP", "cause": "elementwise_unfused",
                       "max_severity": "low"},
                      {"what": "the looked-up rows' backward (contiguous copy of the strided gradient, sort, segment sums)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a click-through-rate model on one H100: a hashed embedding table and a small MLP, 8192 impressions "
                     "per step. The MLP is tiny, yet a step takes ~15 ms. Where does the time go?")
    m["diagnosis"] = (f"Into the embedding table's update, not the MLP: the table ({N / 1e6:.0f} M x {Dm} fp32, {4 * Pt / GB:.1f} GB) has "
                      f"dense gradients, so every step zero-fills a {4 * Pt / GB:.1f} GB gradient and the (already fused) AdamW "
                      f"reads and writes every row's parameters and moments: ~{32 * Pt / GB:.0f} GB of HBM traffic, "
                      f"{rng(b, 'table_share_of_step', 0)} % of the step, although only {B * F} rows ({b['touched_rows_pct'][0]:.1f} %) "
                      f"are looked up. Use sparse gradients with a sparse / row-wise optimizer (nn.Embedding(sparse=True) + "
                      f"SparseAdam, or a fused row-wise optimizer as in TorchRec/FBGEMM): ~{rng(b, 'step', 0)} -> ~{rng(b, 'after', 0)} "
                      f"ms per step ({rng(b, 'share.dense_embedding_update', 0)} %, critical). The MLP's bf16 GEMMs are fine.")
    m["measure"] = [{"what": "step period", "query": Q4["step"], "expect_ms": r2(b["step"])},
                    {"what": "the table's kernels", "query": Q4["kernels"] + " (divide by the steps)",
                     "expect": f"a fill (FillFunctor) kernel writing {4 * Pt / GB:.1f} GB once per step "
                               f"({rng(b, 'c.table_grad_zero_fill')} ms) and fused AdamW (multi_tensor_apply_kernel ... FusedAdam) "
                               f"{rng(b, 'c.adamw_fused_table', 1)} ms per step in the optimizer range; the MLP's GEMMs "
                               f"{rng(b, 'c.mlp_gemm_bf16', 1)} ms"},
                    {"what": "the fill's bandwidth", "query": Q4["ew_bw"] + f" with BYTES = {4 * Pt} (the table gradient's zero fill), "
                     "MIN_US = 500", "expect": "2.6-3.0 TB/s (H100), 3.9-4.4 (H200): memory-bound, so the removed time scales with "
                                               "the table's bytes"}]
    m["new_cause"] = {"name": "dense_embedding_update", "why": "memory-bound work over a whole embedding table (a dense "
                      "gradient's zero fill and a dense optimizer update) where each step touches a small fraction of its "
                      "rows; the optimizer is already fused, so neither elementwise_unfused nor a precision cause names it, "
                      "and its fix (sparse gradients with a sparse / row-wise optimizer) is its own"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- surrogate_mlp (optimizer_unfused; no NVTX) -----------------------------------------------------------------
    R, sdims = SM["rows"], SM["dims"]
    args = ["--rows", R, "--dims", ",".join(map(str, sdims))]
    b, b2, keys = ev(m_surrogate)
    P = mlp_params(sdims)
    nt = len(sdims) - 1
    m = base("surrogate_mlp", "surrogate_mlp.py", "planted", args, nvtx=False, steps=SM["steps"], est=40)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW, foreach=False (single-tensor path)",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["techniques"] = techniques(
        "a fused (or at least multi-tensor) optimizer: AdamW(fused=True) (or foreach=True), one pass over parameters, "
        "gradients and moments instead of eight per tensor",
        ["bf16 / autocast (already)", "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "sequence packing (no sequences)", "CUDA graphs or launch overhead (GPU-bound: ~90 launches per 14-16 ms step, the "
         "optimizer's 40 kernels each 0.02-0.4 ms of HBM traffic)", "pinned memory / data loading (batches resident on the GPU)",
         "activation checkpointing", "GEMM tuning (the GEMMs run at tensor-core rate)"])
    m["planted"] = [planted(
        "optimizer_unfused", {"device": "GPU 0", "region": f"the optimizer step at the end of every iteration (no NVTX): "
                              f"{ADAM_SINGLE_KERNELS} elementwise kernels per parameter tensor, {ADAM_SINGLE_KERNELS * nt} per step"},
        "AdamW(fused=True) (--fixed; not captured)", b, "rm.optimizer_unfused", "share.optimizer_unfused",
        f"{P / 1e6:.1f} M fp32 parameters in {nt} tensors. AdamW(foreach=False) runs the single-tensor path: per tensor "
        f"param.mul_ (weight decay, r4 w4), exp_avg.lerp_ (r8 w4), exp_avg_sq.mul_ (r4 w4) and .addcmul_ (r8 w4), sqrt (r4 w4, a "
        f"new tensor), the bias-correction divide (r4 w4), add_(eps) (r4 w4), param.addcdiv_ (r12 w4): {ADAM_SINGLE_KERNELS} "
        f"full passes, 80 B per parameter = {80 * P / GB:.1f} GB at 2.6-3.0 TB/s = {rng(b, 'c.adamw_single_tensor_8_passes')} ms "
        f"({rng(b, 'optimizer_share', 0)} % of the step). Fused AdamW reads p, g, m, v and writes p, m, v once: 28 B per "
        f"parameter = {rng(b, 'fused_adamw_ms')} ms; removed 52 B per parameter. "
        f"Rest of the step: GEMMs {mlp_train_flops(R, sdims) / 1e12:.2f} TFLOP at 650-820 = {rng(b, 'c.gemm_bf16')} ms, GELUs "
        f"{rng(b, 'c.gelu')} ms, AMP weight casts {rng(b, 'c.amp_casts')} ms, input cast and MSE {rng(b, 'c.input_cast_loss')} ms: "
        f"step {rng(b, 'step', 1)} ms. Removed {rng(b, 'rm.optimizer_unfused', 1)} ms = {rng(b, 'share.optimizer_unfused', 1)} % "
        f"-> high (H200: {rng(b2, 'share.optimizer_unfused', 1)} %, high). The host keeps ahead: ~{7 * nt + 8 + 10 * nt} calls per "
        f"step at 5-30 µs = {rng(b, 'host_ms')} ms against a {rng(b, 'step', 1)} ms GPU step, so the cost is the kernels' HBM "
        "traffic, not launches. New cause name: optimizer_unfused.", accept=["optimizer_unfused", "elementwise_unfused"], b2=b2)]
    m["tolerated"] = [{"what": "AMP weight casts (fp32 -> bf16 in the forward, gradients back to fp32): part of autocast with fp32 "
                       "parameters", "cause": "elementwise_unfused", "max_severity": "low"},
                      {"what": "GELU kernels between the GEMMs (epilogue fusion)", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("I'm training an MLP surrogate model (about 218 M parameters) with bf16 autocast on one H100. The GEMMs should "
                     "take about 7 ms per step but each step takes over 14. What else is eating the time?")
    m["diagnosis"] = (f"The optimizer: AdamW runs with foreach=False, so for each of the {nt} weight tensors it launches "
                      f"{ADAM_SINGLE_KERNELS} separate elementwise kernels (weight decay, two moment updates, sqrt, divide, eps, "
                      f"update), each a full pass over the tensor: ~80 B of HBM traffic per parameter, {rng(b, 'c.adamw_single_tensor_8_passes', 1)} "
                      f"ms per step ({rng(b, 'optimizer_share', 0)} %). AdamW(fused=True) does it in one pass (28 B per parameter): "
                      f"~{rng(b, 'step', 0)} -> ~{rng(b, 'after', 0)} ms per step ({rng(b, 'share.optimizer_unfused', 0)} %, high). The GEMMs "
                      "run at tensor-core rate and the host keeps ahead.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q4["anchor"] + " with ANCHOR = reduce_kernel (the loss's mean, once per "
                     "step), C = 1, WARM = 3", "expect_ms": r2(b["step"])},
                    {"what": "optimizer kernels", "query": Q4["kernels"] + " (divide by the steps)",
                     "expect": f"{ADAM_SINGLE_KERNELS * nt} elementwise kernels per step after the last weight-gradient GEMM "
                               f"({ADAM_SINGLE_KERNELS} per tensor: mul, lerp, mul, addcmul, sqrt, div, add, addcdiv), "
                               f"{rng(b, 'c.adamw_single_tensor_8_passes', 1)} ms per step together, at 2.6-3.0 TB/s"}]
    m["new_cause"] = {"name": "optimizer_unfused", "why": "an optimizer run one tensor and one operation at a time (foreach=False "
                      "or a hand-written per-parameter loop): several full passes over parameters and states where one fused "
                      "pass would do; it is memory-bound elementwise work (elementwise_unfused is accepted), but its place (the "
                      "optimizer step) and its fix (fused=True / foreach) are specific"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- text_cls (redundant_forward) -----------------------------------------------------------------------------------
    Bt, St, dt, Lt = TC["batch"], TC["seq"], TC["d"], TC["blocks"]
    Tt = Bt * St
    args = ["--batch", Bt, "--seq", St, "--d-model", dt, "--heads", TC["heads"], "--blocks", Lt, "--vocab", TC["vocab"],
            "--classes", TC["classes"]]
    b, b2, keys = ev(m_textcls)
    m = base("text_cls", "text_cls.py", "planted", args, steps=TC["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", attention=True, sequences=True,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["fused_attention"] = True
    m["techniques"] = techniques(
        "take the training accuracy from the training forward's logits (logits.detach().argmax()) instead of a second, "
        "gradient-free forward of the same batch; or log it every N steps",
        ["flash attention (SDPA already)", "bf16 (already)", "fused optimizer (already)", "CUDA graphs (GPU-bound: ~400 launches "
         "per 26-39 ms step)", "pinned memory / data loading (batches resident on the GPU)", "TF32 (no fp32 GEMMs)",
         "activation checkpointing (none used; it would add recomputation)", "sequence packing (fixed 512-token sequences, no "
         "padding)"])
    m["planted"] = [planted(
        "redundant_forward", {"device": "GPU 0", "region": "step_N > metrics (a second forward of the batch under no_grad)"},
        "accuracy from the training forward's logits (--fixed; not captured)", b, "rm.redundant_forward", "share.redundant_forward",
        f"{Bt} x {St} = {Tt} tokens, d {dt}, {Lt} blocks. The training step: GEMMs forward + backward {Lt * 72 * Tt * dt * dt / 1e12:.2f} "
        f"TFLOP at 550-800 = {rng(b, 'c.gemm_bf16_fwd_bwd')} ms, flash attention forward + backward {rng(b, 'c.attention_sdpa_fwd_bwd')} ms, "
        f"LayerNorm/GELU/residual/copies {rng(b, 'c.layernorm_gelu_residual_copies')} ms, embedding / final norm / pooling "
        f"{rng(b, 'c.embedding_norm_pool')} ms, fused AdamW ({b['params_m'][0]:.0f} M bf16 parameters) {rng(b, 'c.adamw_fused_bf16')} ms. "
        f"Then the metrics range runs the whole model again on the same batch: its GEMMs ({Lt * 24 * Tt * dt * dt / 1e12:.2f} TFLOP, "
        f"{rng(b, 'metrics_gemm')} ms), attention forward ({rng(b, 'metrics_attn')} ms at 300-600) and forward elementwise kernels "
        f"(40 B per token x d per block, {rng(b, 'metrics_ew')} ms): {rng(b, 'c.metrics_forward_no_grad')} ms, a third of the "
        f"training step's compute again, only to read an argmax the training forward already had. Step {rng(b, 'step', 1)} ms; "
        f"removed {rng(b, 'rm.redundant_forward', 1)} ms = {rng(b, 'share.redundant_forward', 1)} % -> high (H200: "
        f"{rng(b2, 'share.redundant_forward', 1)} %). New cause name: redundant_forward.", accept=["redundant_forward"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / transpose kernels (memory-bound, bf16; ~1/3 fusable into GEMM epilogues)",
                       "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expect_quiet"] = False
    m["question"] = ("I'm fine-tuning a BERT-sized text classifier (8 layers, d 1024, 32 x 512 tokens per step) in bf16 on one H100. "
                     "Each step takes longer than the FLOPs of a forward and backward say it should. Is something wasting time?")
    m["diagnosis"] = (f"Yes: after every optimizer step the 'metrics' range runs a second, gradient-free forward of the same batch "
                      f"(model.eval() + torch.no_grad()) just to compute the training accuracy: {rng(b, 'c.metrics_forward_no_grad', 1)} ms "
                      f"of GEMMs, attention and elementwise kernels per step. Take the argmax from the training forward's logits "
                      f"(detached), or log accuracy every N steps: ~{rng(b, 'step', 0)} -> ~{rng(b, 'after', 0)} ms per step "
                      f"({rng(b, 'share.redundant_forward', 0)} %, high). The GEMMs are bf16 at tensor-core rate, attention is SDPA "
                      "flash, the optimizer is fused, the host stays ahead.")
    m["measure"] = [{"what": "step period", "query": Q4["step"], "expect_ms": r2(b["step"])},
                    {"what": "the metrics range", "query": Q4["step"] + " with the range name 'metrics' in place of step_N",
                     "expect": f"{rng(b, 'c.metrics_forward_no_grad', 1)} ms of GPU time per step"},
                    {"what": "forward kernels per step", "query": Q4["kernels"] + " (divide by the steps)",
                     "expect": f"{2 * Lt} flash forward kernels per step ({Lt} training + {Lt} metrics) next to {Lt} flash backward; "
                               f"~{16 * Lt + 4} GEMMs per step (per block 4 forward + 8 backward + 4 again in metrics; the head's 3 + 1) "
                               f"where ~{12 * Lt + 3} would do"}]
    m["new_cause"] = {"name": "redundant_forward", "why": "a whole forward pass run again on data whose outputs the training "
                      "forward already produced (here for a logged metric): not recomputation for memory (activation_recompute), "
                      "not a kernel inefficiency; its fix is to reuse the outputs"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- lora_score (lora_unmerged) and lora_score.fixed (merged) ----------------------------------------------------
    Bl, Sl, dl, fl, Ll = LS["batch"], LS["seq"], LS["d"], LS["ffn"], LS["blocks"]
    Tl = Bl * Sl
    args = ["--batch", Bl, "--seq", Sl, "--d-model", dl, "--heads", LS["heads"], "--ffn", fl, "--blocks", Ll, "--rank", LS["rank"],
            "--alpha", int(LS["alpha"]), "--vocab", LS["vocab"]]
    b, b2, keys = ev(m_lora)
    bf_, bf2_, _ = ev(lambda r: m_lora(r, fixed=True))
    k_pl, k_fx = int(b["kernels"][0]), int(bf_["kernels"][0])
    m = base("lora_score", "lora_score.py", "planted", args, steps=LS["steps"], est=50)
    m["uses"] = uses("bf16 (weights and compute)", "none (inference)", attention=True, sequences=True,
                     host_sync="event sync two batches back (never idles the GPU)")
    m["uses"]["fused_attention"] = True
    m["uses"]["lora"] = f"rank-{LS['rank']} adapters on q, k, v, o, up, down, applied unmerged"
    m["techniques"] = techniques(
        "merge the LoRA adapters into the base weights for inference (W + scaling * B @ A, PEFT's merge_and_unload); at the "
        "least fold the scaling and the add into the second GEMM (addmm)",
        ["flash attention (SDPA already)", "bf16 (already)", "TF32 (no fp32 GEMMs)", "CUDA graphs or launch overhead (GPU-bound: "
         f"~{k_pl} kernels per {rng(b, 'step', 0)} ms batch)", "pinned memory / data loading (ids resident on the GPU)", "optimizer changes "
         "(inference)", "quantisation as the top fix (a model change, not the inefficiency)"])
    m["planted"] = [planted(
        "lora_unmerged", {"device": "GPU 0", "region": "every step_N: each of the 6 adapted Linears of every block"},
        "merged adapters (--fixed, captured as lora_score.fixed)", b, "rm.lora_unmerged", "share.lora_unmerged",
        f"{Bl} x {Sl} = {Tl} tokens per batch, d {dl}, FFN {fl}, {Ll} blocks, bf16. Base GEMMs {Ll * 2 * Tl * (4 * dl * dl + 2 * dl * fl) / 1e12:.2f} "
        f"TFLOP at 650-820 = {rng(b, 'c.gemm_bf16_base')} ms, attention forward {rng(b, 'c.attention_sdpa_fwd')} ms, LayerNorm / GELU / "
        f"residual / transpose {rng(b, 'c.layernorm_gelu_residual_copy')} ms. Unmerged, each adapted Linear (d_in -> d_out) also runs "
        f"lora_A (reads the T x d_in activation again: 2 T d_in bytes), lora_B (writes a T x d_out output: 2 T d_out), the * scaling "
        f"(r2 w2) and the + (r2 r2 w2): 2 T d_in + 12 T d_out bytes; per block (q, k, v, o: d -> d; up: d -> 4d; down: 4d -> d) "
        f"126 T d bytes = {126 * Tl * dl * Ll / GB:.1f} GB per batch; the thin GEMMs at 0.5-0.9 of HBM rate {rng(b, 'c.lora_thin_gemms')} ms, "
        f"the multiplies and adds {rng(b, 'c.lora_scale_and_add')} ms ({LS_LORA_KERNELS} extra kernels per adapted Linear, {k_pl} kernels "
        f"per batch instead of {k_fx}). Batch {rng(b, 'step', 1)} ms; merged {rng(b, 'after', 1)} ms: removed {rng(b, 'rm.lora_unmerged', 1)} "
        f"ms = {rng(b, 'share.lora_unmerged', 1)} % -> high (H200 at 3.9-4.4 TB/s: {rng(b2, 'share.lora_unmerged', 1)} %, high). "
        f"GPU-bound: the host issues a batch's ~{LS_BLOCK_HOST_OPS + LS_ADAPTED * LS_LORA_HOST_OPS} Python-level ops per block at "
        f"20-70 µs ({rng(b, 'host_ms', 1)} ms per batch) within its {rng(b, 'step', 1)} ms of GPU work. New cause name: lora_unmerged.",
        accept=["lora_unmerged", "elementwise_unfused"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / transpose kernels of the blocks", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We serve a LoRA fine-tune of a 4-layer encoder (d 3584) for offline document scoring on one H100, 8 x 1024 "
                     "tokens per batch. Is the GPU used well?")
    m["diagnosis"] = (f"Mostly, but ~{rng(b, 'share.lora_unmerged', 0)} % of every batch goes to the unmerged LoRA adapters: each of "
                      f"the 24 adapted projections runs two thin GEMMs (rank 16) that re-read its input and write a full-size output, "
                      f"then a scaling multiply and an add, all memory-bound ({rng(b, 'rm.lora_unmerged', 1)} ms per batch). Merge the "
                      f"adapters into the base weights for inference (merge_and_unload): ~{rng(b, 'step', 0)} -> ~{rng(b, 'after', 0)} ms "
                      "per batch (high). The base GEMMs run at tensor-core rate and attention is SDPA.")
    m["measure"] = [{"what": "batch period", "query": Q4["step"], "expect_ms": r2(b["step"])},
                    {"what": "kernels per batch", "query": Q4["kernels"] + " (divide by the steps)",
                     "expect": f"~{k_pl} kernels per batch: {Ll * 18 + 1} GEMMs ({Ll * 6} base, {Ll * 12} thin with 16-wide N or K, the "
                               f"head) and {Ll * 12} extra elementwise multiply / add kernels over T x d_out"}]
    m["new_cause"] = {"name": "lora_unmerged", "why": "low-rank adapters applied as separate thin GEMMs plus a scale and an add at "
                      "inference time: memory-bound work beside every adapted GEMM that merging the adapters into the base weights "
                      "removes entirely; the scale and add are unfused elementwise kernels (elementwise_unfused is accepted), but "
                      "fusing them removes only part of it and the fix is structural"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="lora_score.fixed")

    b, b2, keys = ev(lambda r: m_lora(r, fixed=True))
    m = base("lora_score.fixed", "lora_score.py", "fixed", args + ["--fixed"], steps=LS["steps"], est=50)
    m["uses"] = uses("bf16 (weights and compute)", "none (inference)", attention=True, sequences=True,
                     host_sync="event sync two batches back (never idles the GPU)")
    m["uses"]["fused_attention"] = True
    m["uses"]["lora"] = "merged into the base weights"
    m["techniques"] = techniques(None, ["merging adapters (already merged)", "flash attention (SDPA already)", "bf16 (already)",
                                        "TF32 (no fp32 GEMMs)", f"CUDA graphs (GPU-bound: {k_fx} kernels per {rng(b, 'step', 0)} ms batch)",
                                        "pinned memory (ids resident on the GPU)", "optimizer changes (inference)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "GELU into the up-projection's GEMM epilogue", "cause": "elementwise_unfused", "max_severity": "low",
                       "share_pct": r2(b["gelu_epilogue_share"])},
                      {"what": "LayerNorm / GELU / residual / transpose kernels in all (memory-bound, bf16): only epilogue / "
                       "add+norm fusion would remove time", "cause": "elementwise_unfused", "max_severity": "low",
                       "share_pct": r2(b["elementwise_share"])}]
    m["expect_quiet"] = True
    m["question"] = ("We merged the LoRA adapters of our scoring model into the base weights. Is anything still holding the batch "
                     "time back?")
    m["diagnosis"] = (f"No: a batch is now {k_fx} kernels in ~{rng(b, 'step', 1)} ms, {rng(b, 'gemm_share', 0)} % of it bf16 GEMMs at "
                      f"tensor-core rate, SDPA attention, and LayerNorm/GELU/residual kernels at {rng(b, 'elementwise_share', 0)} % with "
                      f"at most a few % fusable; the host stays ahead. Nothing above low.")
    m["measure"] = [{"what": "batch period", "query": Q4["step"], "expect_ms": r2(b["step"])},
                    {"what": "kernels per batch", "query": Q4["kernels"] + " (divide by the steps)",
                     "expect": f"~{k_fx} kernels per batch, {Ll * 6 + 1} GEMMs, no thin GEMMs"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- ddp2_history (load_imbalance) ----------------------------------------------------------------------------------
    st = dh_stats()
    dims = dh_dims()
    args = ["--users", DH["users"], "--feat", DH["feat"], "--event-dims", ",".join(map(str, DH["event_dims"])), "--pad", DH["pad"]]
    b, b2, keys = ev(m_history)
    m = base("ddp2_history", "ddp2_history.py", "planted", args, ranks=2, steps=DH["steps"], est=70)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused", ddp=True, sequences=True,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["variable_shapes"] = "events per rank change every step (packed histories)"
    steady_txt = ", ".join(f"{p[0]}/{p[1]}" for p in st["steady"])
    m["techniques"] = techniques(
        "balance the work, not the user count, across ranks: assign each step's users to ranks by event count (longest first "
        "to the rank with the fewest events, or an event-budget batch sampler), so both ranks pack ~the same number of events",
        ["NCCL / interconnect tuning (the all-reduce is ~1 ms per step and overlaps the backward)", "bucket size tuning",
         "bf16 autocast (already)", "fused optimizer (already)", "a fixed slow GPU or rank (the slower rank changes from step to "
         "step)", "flash/fused attention (no attention in this run)", "CUDA graphs (GPU-bound, and shapes change every step)",
         "pinned memory / data loading (batches staged on the GPU)"])
    m["planted"] = [planted(
        "load_imbalance", {"ranks": [0, 1], "region": "every step_N: the rank with fewer events waits in its all-reduces for the "
                           "other", "slower_rank_per_steady_step": st["slower"],
                           "events_per_rank_per_steady_step": st["steady"]},
        "event-balanced assignment of users to ranks (--fixed; not captured)", b, "rm.load_imbalance", "share.load_imbalance",
        f"Each step draws {2 * DH['users']} users from one seeded generator (history lengths 55 % 64-255, 30 % 256-1023, 12 % "
        f"1024-4095, 3 % 4096-16383 events); rank r takes every second user and packs its events (padded to {DH['pad']}). The "
        f"program's own schedule (history_lengths, replayed here) gives events per rank (rank 0 / rank 1) over the {len(st['steady'])} "
        f"steady steps: {steady_txt}. The slower rank changes: rank 0 in {st['slower_counts'][0]} steps, rank 1 in "
        f"{st['slower_counts'][1]}; the larger count is {st['ratio_mean']:.2f}x the smaller on average (up to {st['ratio_max']:.1f}x). "
        f"Per event the encoder ({mlp_params(dims) / 1e6:.1f} M parameters) costs {6 * mlp_params(dims) / 1e6:.0f} MFLOP of bf16 GEMMs "
        f"(550-800 TFLOP/s) and ~190 KB of GELU / pooling traffic; per step the fixed work (AMP casts, fused AdamW, DDP bucket copies "
        f"of {b['params_m'][0]:.1f} M fp32 parameters, 56 B each) is {rng(b, 'c.amp_casts_adam_ddp_copies')} ms, the all-reduce "
        f"({int(b['buckets'][0])} buckets, {4 * dh_params() / 1e6:.0f} MB at 200-300 GB/s) {rng(b, 'c.allreduce_total_overlapped')} ms "
        f"overlapped and {rng(b, 'c.allreduce_left_after_backward')} ms left after the backward. A step lasts as long as its slower "
        f"rank (mean {st['ev_max']:.0f} events) plus that tail: mean period {rng(b, 'step', 1)} ms (median {rng(b, 'step_median', 1)}); "
        f"the faster rank idles in NCCL {rng(b, 'faster_rank_wait_share', 0)} % of it. Event-balanced (greedy longest-first), both "
        f"ranks pack ~{st['ev_bal']:.0f} events: {rng(b, 'after', 1)} ms. Removed {rng(b, 'rm.load_imbalance', 1)} ms = "
        f"{rng(b, 'share.load_imbalance', 1)} % -> high (H200: {rng(b2, 'share.load_imbalance', 1)} %); almost rate-independent, since "
        f"it is {st['excess_pct']:.1f} % of the slower rank's events. New cause name: load_imbalance.",
        accept=["load_imbalance", "straggler_compute"], b2=b2)]
    m["tolerated"] = [{"what": "NCCL kernels on the faster rank of each step that last wait + transfer (the imbalance's symptom)",
                       "cause": "exposed_communication", "max_severity": "info",
                       "why": "the wait is the other rank's extra events; counting it again as communication double-counts it"},
                      {"what": "the all-reduce left after the backward (the first layers' buckets)", "cause": "exposed_communication",
                       "max_severity": "low", "share_pct": r2(b["tail_share"])},
                      {"what": "GELU / pooling / cast kernels under autocast", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("Our 2-GPU DDP recommender job (H100s) has a strange profile: in some steps GPU 0 sits in NCCL all-reduce for "
                     "a long time, in others GPU 1 does. Both GPUs get the same number of users per step. Is the interconnect the "
                     "problem, and what would speed it up?")
    m["diagnosis"] = (f"Not the interconnect: the work per rank differs every step. Users' histories are heavy-tailed and each rank "
                      f"gets the same number of users, not of events, so one rank packs {st['ratio_mean']:.1f}x the other's events "
                      f"on average (up to {st['ratio_max']:.1f}x), and which one changes from step to step (rank 0 slower in "
                      f"{st['slower_counts'][0]} of {len(st['steady'])} steady steps). The faster rank waits for the slower one "
                      f"inside its all-reduces ({rng(b, 'faster_rank_wait_share', 0)} % of the step). Assign users to ranks by event "
                      f"count (longest first to the lighter rank, or an event-budget sampler): ~{rng(b, 'step', 1)} -> ~{rng(b, 'after', 1)} "
                      f"ms per step ({rng(b, 'share.load_imbalance', 0)} %, high). The all-reduce itself ({int(b['buckets'][0])} buckets) "
                      "overlaps the backward but for a small tail.")
    m["measure"] = [{"what": "step period per rank", "query": Q4["step"] + " (both ranks; it varies from step to step: compare "
                     "the mean as well as the median)", "expect_ms": r2(b["step"]), "expect_median_ms": r2(b["step_median"])},
                    {"what": "which rank waits", "query": Q4["nccl"],
                     "expect": "per step, the first all-reduce on the rank with fewer events lasts about the difference of the two "
                               f"ranks' compute; the long waits alternate between the exports (slower rank per steady step: {st['slower']})"},
                    {"what": "work per rank per step", "query": Q4["split"] + " (per step_N range on each rank)",
                     "expect": "compute time per step proportional to the events in 'events_per_rank_per_steady_step' (planted[0].where)"}]
    m["new_cause"] = {"name": "load_imbalance", "why": "per-step work that differs between ranks because of the data (variable-"
                      "length samples assigned by count), with the slower rank changing from step to step; straggler_compute "
                      "(one rank persistently heavier) is accepted, but the fix here is balancing the data assignment, not a rank"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.table)
