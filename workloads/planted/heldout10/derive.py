#!/usr/bin/env python3
"""First-principles truth for the tenth held-out set (heldout10): writes heldout10/manifests/<case>.json from FLOPs,
bytes, call counts and rate bands alone (no capture, no aisp output), with the helpers of ../derive.py.

    python3 workloads/planted/heldout10/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout10/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout10/derive.py --table    # the README table only

Method: as ../derive.py and heldout9/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or calls x a host cost per call; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the one GPU; severity:
info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical. This set is made for ONE GPU (an H200): five
one-GPU programs, one of them with a captured fixed variant (a before/after pair), no multi-rank case. Every model also
gives the host time of a step (Python ops x eager_op_us + backward nodes x bwd_node_us) and checks it against the GPU
time, so that a case meant to be GPU-bound stays GPU-bound at every corner (host_margin_ms > 0). New bands (each with
its source in the manifests' `rates`): the pinned host-to-device rate of the H200 host (not measured: widened down),
flash attention at 49 tokens, the round trip of one launch under CUDA_LAUNCH_BLOCKING, and the bandwidth fraction of
broadcasting elementwise kernels and reductions; four bands of heldout2-9 are copied with their sources so that this
set depends on no other held-out set.
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
ADAM_B, GB, Q, LOSS_B = D.ADAM_B, D.GB, D.Q, D.LOSS_B
mlp_params, gelu_train_bytes = D.mlp_params, D.gelu_train_bytes
pct, planted, r2, rng, techniques, uses = D.pct, D.planted, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link

SET = "heldout10"

# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; fractions as named.
NEW_H100 = {
    # copied from heldout2-9 (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "eager_op_us": (20.0, 70.0),
    "tiny_kernel_us": (2.0, 6.0),
    "bwd_node_us": (10.0, 30.0),
    # new here
    "h2d_pinned_host_gbs": (42.0, 56.0),
    "attn_short_tflops": (30.0, 150.0),
    "blocking_rtt_us": (4.0, 12.0),
    "bcast_eff": (0.6, 0.95),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 2048 or less (or a varying M): below the 8192^3 rate (732-787 "
                       "measured) as tiles and waves shrink and the epilogue's writes weigh more; an assumption widened "
                       "down to 550 (heldout2-9). Used for every GEMM whose smallest dimension is <= 2048; bf16_tflops "
                       "for the others",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing: 29-36 µs "
                   "measured (quoted by ../derive.py), ~70 implied by heldout2; band 20-70 (heldout3-9)",
    "tiny_kernel_us": "GPU time of one tiny kernel (a scalar op, a reduction over a few thousand elements) in a chain of "
                      "dependent kernels, including the launch latency to the next one when the host is ahead: 2-6 µs "
                      "(assumption of heldout7-9)",
    "bwd_node_us": "host time of one backward node in the C++ autograd engine (the node's function, 1-3 kernel launches "
                   "at 4-10 µs under CUPTI, the ready-queue bookkeeping): 10-30 µs (assumption of heldout9)",
    "h2d_pinned_host_gbs": "pinned host-to-device copy of hundreds of MB: 55.1 GB/s measured on the H100 host (aisp hw "
                           "pcie, PCIe Gen5 x16, quoted by ../derive.py as h2d_pinned_gbs 50-56); the H200 host's link is "
                           "not measured here, so the band is widened down to 42 (a Gen5 x16 link behind a switch or with "
                           "a busier root complex); assumption",
    "attn_short_tflops": "SDPA flash forward + backward, bf16, head_dim 64, non-causal, at 49 tokens per sequence, counted "
                         "as 14*B*S^2*D FLOPs: one 64- or 128-row tile per (sequence, head), mostly masked, so far below "
                         "the long-sequence rate (200-450); 30-150 (assumption). Only ~1 % of that case's step",
    "blocking_rtt_us": "with CUDA_LAUNCH_BLOCKING=1 every launch returns only after its kernel ends: per launch, the time "
                       "from the launch call to the kernel's start on an idle GPU plus the time from its end to the "
                       "host's return (completion polling or a blocking wait and the wake-up): 4-12 µs (assumption: "
                       "launch latency 2-5 µs, completion to return 2-7 µs under CUPTI)",
    "bcast_eff": "fraction of the HBM rate reached by elementwise kernels with broadcast operands (reading a 4096 x 128 and "
                 "a 1024 x 128 operand while writing 4096 x 1024 x 128) and by reductions of such tensors over their "
                 "first or middle dimension (strided reads): 0.6-0.95 (assumption; contiguous elementwise kernels reach "
                 "~0.9-1.0 of hbm_tbs)",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q10 = dict(Q)
Q10.update({
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


# ---------------------------------------------------------------------------------------------------
# The cases.

# pixel_stream: ViT-style, patch 32 on 224^2 (49 tokens of 3072), d 384, 2 blocks (6 heads of 64, MLP 4x, biases),
# 1000 classes, 2048 images; pinned float32 image cache copied on a side stream one step ahead (uint8 when fixed).
PX = dict(batch=2048, image=224, patch=32, d=384, heads=6, blocks=2, classes=1000, steps=25)
PX_HOST_OPS = 56  # prep 2, embed, +pos, 16 per block, norm, mean, head, float, CE; prefetch 4; backward, step, zero_grad,
# loss copy, event 5; (+2 for the GPU normalization when fixed)
PX_BWD_NODES = 44  # per block ~17 (2 LN, 4 linears x 2, SDPA, GELU, 2 adds, views/transposes), embed 2, pos, head 2, ...


def px_dims():
    B, I, P = PX["batch"], PX["image"], PX["patch"]
    S = (I // P) ** 2
    return B, S, 3 * P * P, B * S, B * 3 * I * I


def px_params():
    B, S, PD, T, pix = px_dims()
    d, L, K = PX["d"], PX["blocks"], PX["classes"]
    return float(PD * d + d + S * d + L * (12 * d * d + 13 * d) + 2 * d + d * K + K)


def m_px(r, fixed=False):
    B, S, PD, T, pix = px_dims()
    d, L, K = PX["d"], PX["blocks"], PX["classes"]
    hbm, tiny, mid = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3, r["bf16_mid_tflops"]
    P = px_params()
    c = {# per pixel: planted patchify copy of float32 (r4 w4) + cast to bf16 (r4 w2) = 14 B; fixed patchify of uint8
         # (r1 w1), cast (r1 w2), in-place scale (r2 w2) and shift (r2 w2) = 13 B
         "patchify_cast_normalize": t_bytes((13.0 if fixed else 14.0) * pix, hbm),
         "patch_embed_gemm": gemm(r, T, PD, d, 2.0),  # forward + weight gradient (the pixels need no gradient)
         "pos_add": t_bytes(6.0 * T * d, hbm),        # add r2 w2, its gradient summed over the batch r2
         "linear_gemm_bf16": t_flops(L * 72.0 * T * d * d, mid),
         "attention_flash_49": t_flops(L * 14.0 * B * S * S * d, r["attn_short_tflops"]),
         # LayerNorms, residual adds, GELU, head-merge copies, q/k/v gradient stacking: 112 B per token x d per block
         # (heldout2's count); final LayerNorm and mean pooling 20 B per token x d
         "layernorm_gelu_residual_copies": t_bytes((L * 112.0 + 20.0) * T * d, hbm),
         "head_loss": 3 * max(t_flops(2.0 * B * d * K, mid), tiny) + 6 * tiny,
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    compute = sum(c.values())
    copy = t_link((1.0 if fixed else 4.0) * pix, r["h2d_pinned_host_gbs"])
    host = (PX_HOST_OPS + (2 if fixed else 0)) * r["eager_op_us"] / 1e3 + PX_BWD_NODES * r["bwd_node_us"] / 1e3
    step = max(compute, copy, host)
    out = {"c": dict(c), "step": step, "compute_ms": compute, "copy_ms": copy, "params_m": P / 1e6,
           "copy_gb": (1.0 if fixed else 4.0) * pix / GB}
    # the copy runs on its own stream beside the compute; what it adds to the step is the part not hidden
    out["c"]["h2d_copy_exposed"] = max(0.0, step - max(compute, host))
    out["c"]["gpu_waiting_for_host"] = max(0.0, host - max(compute, copy))
    finish_gpu_host(out, max(compute, copy), host)
    out["copy_share"] = pct(copy, step)
    out["compute_share"] = pct(compute, step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_px(r, fixed=True)["step"]
    rm = {"h2d_wide_dtype": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after})
    return out


# resmlp_fit: input 1024 -> 1536, 6 pre-LN blocks d 1536 -> 6144 (biases, pure bf16), output 1536 -> 256, 6144 rows,
# fused AdamW; CUDA_LAUNCH_BLOCKING=1 unless fixed.
RB = dict(rows=6144, d_in=1024, d=1536, hidden=6144, blocks=6, d_out=256, steps=25)


def rb_counts():
    L = RB["blocks"]
    fwd_ops = 2 + 5 * L + 4     # input linear, per block (ln, fc1, gelu, fc2, add), output linear, float, sub, pow, mean
    other_ops = 8               # backward call, opt.step (~3 ops of Python over 40 tensors), zero_grad, loss copy, event,
    # batch pick
    bwd_nodes = 7 * L + 8       # per block LayerNorm, 2 x (AddmmBackward + TBackward), GELU, Add; 2 + 2 linears; loss 4
    fwd_k = fwd_ops             # one kernel per forward op (nn.Linear: one cuBLASLt GEMM with the bias in its epilogue)
    # backward kernels: loss ~5 (mean, pow backward 3, cast); output linear 3 (input and weight gradient GEMMs, bias
    # reduction); per block 10 (fc2 3, GELU 1, fc1 3, LayerNorm 2, residual gradient sum 1); input linear 2
    bwd_k = 5 + 3 + 10 * L + 2
    P = rb_params()
    adam_k = int(P // (320 * 65536)) + 2  # fused AdamW: multi_tensor_apply launches of <= 320 chunks of 65536
    return fwd_ops, other_ops, bwd_nodes, fwd_k + bwd_k + adam_k + 1  # + the loss copy


def rb_params():
    di, d, h, L, O = RB["d_in"], RB["d"], RB["hidden"], RB["blocks"], RB["d_out"]
    return float(di * d + d + L * (2 * d * h + h + 3 * d) + d * O + O)


def m_rb(r, fixed=False):
    R, di, d, h, L, O = (RB[k] for k in ("rows", "d_in", "d", "hidden", "blocks", "d_out"))
    hbm = r["hbm_tbs"]
    P = rb_params()
    fwd_ops, other_ops, bwd_nodes, kernels = rb_counts()
    gpu = {"gemm_bf16": gemm(r, R, di, d, 2.0) + L * 2 * gemm(r, R, d, h, 3.0) + gemm(r, R, d, O, 3.0),
           # bf16 per row: forward LN r2 w2 on d, GELU r2 w2 on h, add r2 r2 w2 on d; backward LN ~10 B on d, GELU
           # r2 r2 w2 on h, residual-gradient sum 6 on d, bias-gradient reductions r2 on h and d
           "layernorm_gelu_residual_bias": t_bytes(L * (28.0 * d + 12.0 * h) * R, hbm),
           "loss_fp32": t_bytes(LOSS_B * R * O, hbm),
           "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    gpu_ms = sum(gpu.values())
    host = (fwd_ops + other_ops) * r["eager_op_us"] / 1e3 + bwd_nodes * r["bwd_node_us"] / 1e3
    c = dict(gpu)
    if fixed:
        step = max(gpu_ms, host)
        if step > gpu_ms:
            c["gpu_waiting_for_host"] = step - gpu_ms
        out = {"c": c, "step": step, "kernels": kernels, "rm": {}, "share": {}, "after": None}
        return finish_gpu_host(out, gpu_ms, host)
    # blocking launches: the host never runs ahead, so every microsecond of host work between two launches is GPU idle,
    # and each launch adds its round trip
    c["gpu_idle_host_work"] = host
    c["gpu_idle_launch_round_trips"] = kernels * r["blocking_rtt_us"] / 1e3
    step = sum(c.values())
    after = m_rb(r, fixed=True)["step"]
    rm = {"launch_blocking": step - after}
    out = {"c": c, "step": step, "kernels": kernels, "rm": rm, "share": shares(rm, step), "after": after,
           "gpu_idle_share": pct(step - gpu_ms, step), "params_m": P / 1e6}
    return finish_gpu_host(out, gpu_ms, host)


# proto_metric: bias-free MLP encoder 1024 -> 4096 x 4 -> 128 (GELU, pure bf16), 1024 prototypes of 128, 4096 rows,
# squared distances by broadcasting (a matrix product when fixed), cross-entropy, fused AdamW.
PM = dict(rows=4096, dims=[1024, 4096, 4096, 4096, 4096, 128], protos=1024, steps=25)
PM_HOST_OPS = 26  # 5 linears, 4 GELUs, distance 7 (fixed 9), neg/div 2, float, CE, backward, step, zero_grad, copy, event
PM_BWD_NODES = 24
PM_BCAST_B = 28.0  # bytes per element of the N x M x D tensors, derived in m_pm


def pm_params():
    return float(mlp_params(PM["dims"]) + PM["protos"] * PM["dims"][-1])


def m_pm(r, fixed=False):
    R, dims, M = PM["rows"], PM["dims"], PM["protos"]
    D_ = dims[-1]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P = pm_params()
    c = {"encoder_gemm_bf16": sum(gemm(r, R, a_, b_, 3.0 if i else 2.0) for i, (a_, b_) in enumerate(zip(dims, dims[1:]))),
         "gelu_bf16": t_bytes(gelu_train_bytes(R, dims, 2), hbm),
         # logits = -d2 / tau in bf16 (neg, div and their backward: ~16 B per logit), cross-entropy over the fp32 copy
         # (float r2 w4, log_softmax, nll and backward, cast back: ~46 B per logit)
         "logits_scale_loss": t_bytes((16.0 + 46.0) * R * M, hbm) + 4 * tiny,
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    n3 = float(R) * M * D_
    if fixed:
        # |z|^2 and |p|^2 (small reductions), the R x M x D product and its two gradients, the adds over R x M
        c["distance_matmul"] = 3 * max(gemm(r, R, M, D_), tiny) + t_bytes(30.0 * R * M, hbm) + 8 * tiny
    else:
        # forward: sub writes the N x M x D difference (w2), pow r2 w2, sum over D r2 = 8 B; backward: pow's gradient
        # grad * (2 * diff.pow(1)): a copy, a scale and a product with the expanded gradient (r2 w2 each) = 12 B; sub's
        # gradient summed over M for z (r2) and negated (r2 w2) then summed over N for the prototypes (r2) = 8 B
        c["pairwise_broadcast"] = t_bytes(PM_BCAST_B * n3, hbm * r["bcast_eff"])
    gpu_ms = sum(c.values())
    host = (PM_HOST_OPS + (2 if fixed else 0)) * r["eager_op_us"] / 1e3 + PM_BWD_NODES * r["bwd_node_us"] / 1e3
    step = max(gpu_ms, host)
    if step > gpu_ms:
        c["gpu_waiting_for_host"] = step - gpu_ms
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "bcast_gb": PM_BCAST_B * n3 / GB,
                           "diff_gb": 2.0 * n3 / GB}, gpu_ms, host)
    out["gemm_share"] = pct(c["encoder_gemm_bf16"], step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_pm(r, fixed=True)["step"]
    rm = {"pairwise_broadcast": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after})
    return out


# monitored_lm: vocab 8192 -> d 2048, 3 pre-LN causal blocks (16 heads of 128, MLP 4x, biases, pure bf16), untied head,
# 2 x 4096 tokens, fused AdamW; an RMS forward hook on each of the 13 nn.Linear unless fixed.
ML = dict(batch=2, seq=4096, vocab=8192, d=2048, heads=16, blocks=3, steps=25)
ML_HOOK_B = 18.0  # per output element: .float() r2 w4, .pow(2) r4 w4, .mean() r4
ML_HOOK_OPS = 6   # per hook: the hook call, detach, float, pow, mean, sqrt (+ the dict store)


def ml_params():
    V, d, L = ML["vocab"], ML["d"], ML["blocks"]
    return float(V * d + L * (12 * d * d + 13 * d) + 2 * d + d * V + V)


def ml_counts():
    L = ML["blocks"]
    hooks = 4 * L + 1
    fwd_ops = 16 * L + 8 + 6  # 16 per block; embedding, norm, head, float, view, CE, ids/targets slices; 6 other
    bwd_nodes = 20 * L + 8
    return hooks, fwd_ops, bwd_nodes


def m_ml(r, fixed=False):
    B, S, V, d, L = (ML[k] for k in ("batch", "seq", "vocab", "d", "blocks"))
    T = float(B * S)
    hbm, tiny, mid = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3, r["bf16_mid_tflops"]
    P = ml_params()
    hooks, fwd_ops, bwd_nodes = ml_counts()
    c = {"linear_gemm_bf16": L * (gemm(r, T, d, 3 * d, 3.0) + gemm(r, T, d, d, 3.0) + 2 * gemm(r, T, d, 4 * d, 3.0)),
         "lm_head_gemm": gemm(r, T, d, V, 3.0),
         "attention_flash_causal": t_flops(L * 7.0 * B * S * S * d, r["attn_tflops"]),
         # 112 B per token x d per block (heldout2's count); final LayerNorm 14
         "layernorm_gelu_residual_copies": t_bytes((L * 112.0 + 14.0) * T * d, hbm),
         # gather r2 w2; backward: table gradient zero-filled (w2 V x d), rows summed in (~8 B per token x d), sort passes
         "embedding": t_bytes(4.0 * T * d + 2.0 * V * d + 8.0 * T * d, hbm) + 12 * tiny,
         "cross_entropy_fp32": t_bytes(LOSS_B * T * V, hbm),
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    hook_el = L * 9.0 * T * d + T * V  # outputs of qkv (3d), proj (d), fc1 (4d), fc2 (d) per block, and the head (V)
    if not fixed:
        c["activation_hooks"] = t_bytes(ML_HOOK_B * hook_el, hbm) + hooks * tiny  # + one sqrt of a scalar per hook
    gpu_ms = sum(c.values())
    host = ((fwd_ops + (0 if fixed else hooks * ML_HOOK_OPS)) * r["eager_op_us"] / 1e3
            + bwd_nodes * r["bwd_node_us"] / 1e3)
    step = max(gpu_ms, host)
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "hook_gb": ML_HOOK_B * hook_el / GB,
                           "hooks": hooks}, gpu_ms, host)
    out["gemm_share"] = pct(c["linear_gemm_bf16"] + c["lm_head_gemm"], step)
    out["attn_share"] = pct(c["attention_flash_causal"], step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_ml(r, fixed=True)["step"]
    rm = {"activation_hooks": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after})
    return out


# factorized_mlp: 6 low-rank layers 4096 -> 4096 (U 4096 x 512, V 512 x 4096, bias, GELU), dense head 4096 -> 1000,
# 16384 rows, fused AdamW; the dense weight U @ V rebuilt every forward unless fixed.
FM = dict(rows=16384, width=4096, rank=512, layers=6, classes=1000, steps=25)
FM_HOST_OPS = 3 * FM["layers"] + 3 + 6  # per layer (U @ V, linear, GELU); head, float, CE; 6 other
FM_BWD_NODES = 4 * FM["layers"] + 6


def fm_params():
    d, rk, L, K = FM["width"], FM["rank"], FM["layers"], FM["classes"]
    return float(L * (2 * d * rk + d) + d * K + K)


def m_fm(r, fixed=False):
    T, d, rk, L, K = (FM[k] for k in ("rows", "width", "rank", "layers", "classes"))
    hbm = r["hbm_tbs"]
    P = fm_params()
    c = {"gelu_bias_grad_bf16": t_bytes(L * 12.0 * T * d, hbm),  # GELU r2 w2 + r2 r2 w2, bias gradient r2
         "head_gemm": gemm(r, T, d, K, 3.0),
         "cross_entropy_fp32": t_bytes(LOSS_B * T * K, hbm),
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    if fixed:
        # per layer x @ V^T and h @ U^T, forward, weight gradients and input gradients (the first layer's input needs
        # none): 6 (5) GEMMs of 2 * T * d * r
        c["lowrank_gemms"] = sum(gemm(r, T, d, rk, 5.0 if i == 0 else 6.0) for i in range(L))
    else:
        # per layer: the dense T x d x d GEMM forward, its weight gradient and its input gradient (first layer: 2)
        c["dense_gemm_T_d_d"] = sum(gemm(r, T, d, d, 2.0 if i == 0 else 3.0) for i in range(L))
        # U @ V forward and the factors' gradients gW @ V^T, U^T @ gW: 3 GEMMs of 2 * d * d * r per layer
        c["weight_rebuild_gemms"] = L * gemm(r, d, d, rk, 3.0)
        # the dense weight written and read, its gradient written and read twice (bf16 d x d): ~10 B per element
        c["dense_weight_traffic"] = t_bytes(L * 10.0 * d * d, hbm)
    gpu_ms = sum(c.values())
    host = FM_HOST_OPS * r["eager_op_us"] / 1e3 + FM_BWD_NODES * r["bwd_node_us"] / 1e3
    step = max(gpu_ms, host)
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6}, gpu_ms, host)
    if fixed:
        out["gemm_share"] = pct(c["lowrank_gemms"] + c["head_gemm"], step)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_fm(r, fixed=True)["step"]
    rm = {"lowrank_materialized": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after,
                "dense_gemm_share": pct(c["dense_gemm_T_d_d"], step)})
    return out


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=25, warmup=3):
    return D.base(name, f"heldout10/{workload}", variant, SET, args, ranks=1, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def finish(m, b, b2, keys, after=True, fixed_case=None):
    m["lacks"] = [v for k, v in D.LACKS.items() if m["uses"].get(k) is False and k != "ddp"]
    m["expected_step_ms"] = {"h100": r2(b["step"]), "h200": r2(b2["step"])}
    m["components_ms"] = {"h100": {k[2:]: r2(v) for k, v in b.items() if k.startswith("c.")},
                          "h200": {k[2:]: r2(v) for k, v in b2.items() if k.startswith("c.")}}
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


# Kernels launched per steady step (approximate counts, for checking that the host work stays below the GPU work: the
# host time per step is in each manifest's host_ms).
KERNELS = {
    "pixel_stream": "~95: the H2D copy on the side stream; forward ~34 (patchify copy and cast, embedding, position add, "
                    "~12 per block, final norm, mean, head, cross-entropy); backward ~57 (~22 per block); fused AdamW 1-2; "
                    "loss copy",
    "pixel_stream.fixed": "~97: as the planted run plus the in-place scale and shift of the uint8 input",
    "resmlp_fit": "~114: forward 36, backward 70, fused AdamW ~7, loss copy (rb_counts)",
    "proto_metric": "~50: forward ~16 (5 GEMMs, 4 GELUs, sub, pow, sum, neg, div, cross-entropy), backward ~28 (GEMMs, "
                    "GELU backward, 6 passes over the 4096 x 1024 x 128 tensors, loss), fused AdamW 3-4",
    "monitored_lm": "~195: forward ~95 (~12 per block, 4 hook kernels after each of the 13 Linear GEMMs, head, loss), "
                    "backward ~87, fused AdamW ~10",
    "factorized_mlp": "~72: forward ~22 (per layer U @ V, the dense GEMM, GELU; head, loss), backward ~47 (per layer the "
                      "dense weight- and input-gradient GEMMs, bias reduction, two factor-gradient GEMMs, GELU backward), "
                      "fused AdamW 2-3",
}

EVENT_SYNC = "event sync on the previous step (lag 1: never idles the GPU)"


def build():
    out = {}

    # ---- pixel_stream (h2d_wide_dtype) and pixel_stream.fixed ------------------------------------------------------
    B, S, PD, T, pix = px_dims()
    d, H, L, K = PX["d"], PX["heads"], PX["blocks"], PX["classes"]
    args = ["--batch", B, "--image", PX["image"], "--patch", PX["patch"], "--d-model", d, "--heads", H, "--blocks", L,
            "--classes", K]
    b, b2, keys = ev(m_px)
    bf, bf2, keys_f = ev(lambda r: m_px(r, fixed=True))
    m = base("pixel_stream", "pixel_stream.py", "planted", args, steps=PX["steps"], est=55)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", attention=True, pinned=True, host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, non-causal, {H} heads of 64, {S} tokens per image"
    m["uses"]["input_pipeline"] = (f"a pinned host cache of normalized float32 images (3 x 224 x 224), copied with "
                                   f"non_blocking=True on a side stream one step ahead ({pix * 4 / GB:.2f} GB per step)")
    m["techniques"] = techniques(
        "move fewer bytes over PCIe: keep the cache (and copy the batch) as uint8 pixels, 4x fewer bytes than "
        "float32, and do the per-channel normalization and the cast to bf16 on the GPU after the copy (or at least "
        "cache and copy fp16/bf16, 2x fewer); the copy is already pinned, asynchronous and overlapped",
        ["pinned memory (already pinned)", "non_blocking / a side stream / prefetching (already overlapped)",
         "more DataLoader workers (no loader: the cache is in memory)", "CUDA graphs / launch overhead (the compute "
         "stream waits on the copy, not on launches)", "bf16 / lower precision for the model (already bf16)",
         "fused optimizer (already)", "flash/fused attention (already SDPA; ~5-15 % of the compute)",
         "faster GEMMs / kernel tuning", "a larger batch"])
    m["planted"] = [planted(
        "h2d_wide_dtype", {"device": "GPU 0", "region": f"the side stream: one {pix * 4 / 1e9:.2f} GB host-to-device "
                           f"copy (pinned) per step, back to back, that the compute stream waits for at the top of each "
                           f"step_N; the step's kernels ({rng(b2, 'compute_ms', 1)} ms) finish long before the next copy"},
        "uint8 cache and copy, normalization on the GPU (--fixed, captured as pixel_stream.fixed)", b,
        "rm.h2d_wide_dtype", "share.h2d_wide_dtype",
        f"{B} images of 3 x 224 x 224 = {pix / 1e6:.0f} M values per step, cached as normalized float32: "
        f"{pix * 4 / 1e9:.2f} GB over PCIe per step at 42-56 GB/s (pinned) = {rng(b, 'copy_ms')} ms. The copy is "
        f"already pinned, asynchronous and issued one step ahead on a side stream, so it overlaps the compute, but it "
        f"is longer than the step's compute: patchify + cast {rng(b, 'c.patchify_cast_normalize')} ms, patch embedding "
        f"{rng(b, 'c.patch_embed_gemm')} ms, block GEMMs 72 x {T} x {d}^2 x {L} at 550-800 "
        f"({rng(b, 'c.linear_gemm_bf16')} ms), flash attention over {S} tokens at 30-150 "
        f"({rng(b, 'c.attention_flash_49')} ms), LayerNorm / GELU / residual / copies "
        f"({rng(b, 'c.layernorm_gelu_residual_copies')} ms), head, loss and AdamW: {rng(b, 'compute_ms')} ms in all "
        f"(host {rng(b, 'host_ms')} ms). The step is set by the copy engine: {rng(b, 'step')} ms, the compute stream "
        f"idle between steps. Copying uint8 pixels ({pix / 1e9:.2f} GB, {rng(bf, 'copy_ms')} ms) and normalizing on "
        f"the GPU (13 B per pixel in place of 14) leaves the compute as the bound: {rng(b, 'after')} ms; removed "
        f"{rng(b, 'rm.h2d_wide_dtype')} ms = {rng(b, 'share.h2d_wide_dtype', 1)} % -> critical (H200: "
        f"{rng(b2, 'share.h2d_wide_dtype', 1)} %). New cause name: h2d_wide_dtype.",
        accept=["h2d_wide_dtype", "copy_bound", "copy_bound_pinned", "h2d_bound", "input_bound"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / head-merge copies (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("Here are two profiles of our image classifier on an H200 (a small ViT-style model: 224 x 224 images "
                     "in 32 x 32 patches, 2 transformer blocks of d 384, 1000 classes, 2048 images per step, bf16 "
                     "weights, fused AdamW; the batches come from a pinned in-memory cache and are prefetched on a side "
                     "stream), before and after we changed how the image cache is stored. How much did the change buy "
                     "per step, why, and what bounds the step now?")
    m["diagnosis"] = (f"Before: the cache held normalized float32 images, so every step copied {pix * 4 / 1e9:.2f} GB host "
                      f"to device (~{rng(b2, 'copy_ms', 1)} ms at PCIe rate). The copy was already pinned, asynchronous "
                      f"and prefetched on a side stream, but it took longer than the step's compute "
                      f"(~{rng(b2, 'compute_ms', 1)} ms), so the step ran at the copy's pace, {rng(b2, 'step', 1)} ms, the "
                      f"compute stream idle between steps waiting for the next batch. After: uint8 pixels, 4x fewer bytes "
                      f"({pix / 1e9:.2f} GB, ~{rng(bf2, 'copy_ms', 1)} ms, hidden beside the compute) and the normalization "
                      f"on the GPU: {rng(bf2, 'step', 1)} ms per step; the change removed "
                      f"{rng(b2, 'share.h2d_wide_dtype', 0)} % of the step (critical). Now the step is GPU compute-bound: "
                      f"the blocks' bf16 GEMMs, LayerNorm / GELU / residual kernels and the small-sequence attention; the "
                      f"copy still runs beside it (close to the compute only at the slow-link corner).")
    m["measure"] = [{"what": "step period", "query": Q10["step"], "expect_ms": r2(b["step"])},
                    {"what": "copies", "query": Q10["memcpy"],
                     "expect": f"one pinned host-to-device copy of {pix * 4 / 1e9:.2f} GB per step at 42-56 GB/s, on a "
                               f"stream of its own, busy ~100 % of the steady period; the compute stream's kernels "
                               f"{rng(b, 'compute_ms', 1)} ms per step"}]
    m["new_cause"] = {"name": "h2d_wide_dtype", "why": "input batches moved over PCIe in a wider type than they need "
                      "(normalized float32 images where uint8 pixels carry the same information): the copy, already "
                      "pinned and overlapped, sets the step; fixed by copying the narrow type and converting on the GPU"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="pixel_stream.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("pixel_stream.fixed", "pixel_stream.py", "fixed", args + ["--fixed"], steps=PX["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", attention=True, pinned=True, host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, non-causal, {H} heads of 64, {S} tokens per image"
    m["uses"]["input_pipeline"] = (f"a pinned host cache of uint8 images, copied with non_blocking=True on a side stream "
                                   f"one step ahead ({pix / GB:.2f} GB per step), normalized on the GPU")
    m["techniques"] = techniques(None, ["uint8 inputs (already)", "pinned memory (already)", "prefetching (already)",
                                        "bf16 (already)", "fused optimizer (already)",
                                        "CUDA graphs (GPU-bound: ~150 launches per 7-10 ms step)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / head-merge copies (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "high"},
                      {"what": "the overlapped uint8 copy, close to the compute at the slow-link corner",
                       "cause": "copy_bound", "max_severity": "low"}]
    m["expect_quiet"] = True
    m["question"] = "We now cache uint8 images. Is anything still holding the step back?"
    m["diagnosis"] = (f"Nothing planted: a step is ~{rng(b2, 'step', 1)} ms on an H200, GPU compute-bound (block GEMMs "
                      f"~{rng(b2, 'c.linear_gemm_bf16', 1)} ms, LayerNorm / GELU / residual "
                      f"~{rng(b2, 'c.layernorm_gelu_residual_copies', 1)} ms, attention over 49 tokens "
                      f"~{rng(b2, 'c.attention_flash_49', 1)} ms); the {pix / 1e9:.2f} GB uint8 copy "
                      f"(~{rng(b2, 'copy_ms', 1)} ms) runs beside it on the side stream.")
    m["measure"] = [{"what": "step period", "query": Q10["step"], "expect_ms": r2(b["step"])},
                    {"what": "copies", "query": Q10["memcpy"],
                     "expect": f"one pinned host-to-device copy of {pix / 1e9:.2f} GB per step, overlapped with the "
                               f"compute stream"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- resmlp_fit (launch_blocking; no NVTX) ---------------------------------------------------------------------
    R, di, d, h, L, O = (RB[k] for k in ("rows", "d_in", "d", "hidden", "blocks", "d_out"))
    fwd_ops, other_ops, bwd_nodes, kernels = rb_counts()
    args = ["--rows", R, "--d-in", di, "--d-model", d, "--hidden", h, "--blocks", L, "--d-out", O]
    b, b2, keys = ev(m_rb)
    m = base("resmlp_fit", "resmlp_fit.py", "planted", args, nvtx=False, steps=RB["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused",
                     host_sync="every launch (CUDA_LAUNCH_BLOCKING=1); the event sync on the previous step is then moot")
    m["uses"]["launch_blocking"] = "os.environ['CUDA_LAUNCH_BLOCKING'] = '1' at the top of the script"
    m["techniques"] = techniques(
        "remove CUDA_LAUNCH_BLOCKING=1 (a debugging setting: use it only to localize a device-side error), so that "
        "launches are asynchronous and the host queues work ahead of the GPU",
        ["CUDA graphs as the top fix (the host is not slow: it is made to wait for every kernel)",
         "removing .item() / synchronize calls from the loop (there are none; the waits are inside every launch)",
         "bf16 (already)", "fused optimizer (already)", "TF32 (no fp32 GEMMs)",
         "flash/fused attention (no attention in this run)", "pinned memory / data loading (batches resident on the GPU)",
         "faster GEMMs / kernel tuning", "a larger batch as the top fix"])
    m["planted"] = [planted(
        "launch_blocking", {"device": "GPU 0", "region": f"every iteration (no NVTX): ~{kernels} kernels, each "
                            f"cudaLaunchKernel call lasting as long as its kernel, a GPU gap before every kernel (the host "
                            f"work between two launches) and no queue of launched work"},
        "CUDA_LAUNCH_BLOCKING unset (--fixed; not captured)", b, "rm.launch_blocking", "share.launch_blocking",
        f"CUDA_LAUNCH_BLOCKING=1: every launch returns only when its kernel has ended, so the host never runs ahead and "
        f"all its work between launches is GPU idle time: {fwd_ops + other_ops} Python ops at 20-70 µs and {bwd_nodes} "
        f"backward nodes at 10-30 µs = {rng(b, 'host_ms')} ms per step, plus a 4-12 µs round trip for each of ~{kernels} "
        f"launches ({rng(b, 'c.gpu_idle_launch_round_trips')} ms). The GPU's own work: GEMMs (6 x {R} x "
        f"{b['params_m'][0]:.0f} M, 550-800 TFLOP/s for the 1536-wide shapes) {rng(b, 'c.gemm_bf16')} ms, LayerNorm / "
        f"GELU / residual / bias gradients {rng(b, 'c.layernorm_gelu_residual_bias')} ms, fused AdamW "
        f"{rng(b, 'c.adamw_fused_bf16')} ms: {rng(b, 'gpu_ms')} ms, more than the host work at every corner (margin "
        f"{rng(b, 'host_margin_ms')} ms), so without the variable the step is GPU-bound at {rng(b, 'after')} ms. Step "
        f"{rng(b, 'step')} ms, the GPU idle {rng(b, 'gpu_idle_share', 0)} % of it: removed "
        f"{rng(b, 'rm.launch_blocking')} ms = {rng(b, 'share.launch_blocking', 1)} % -> high (H200: "
        f"{rng(b2, 'share.launch_blocking', 1)} %). The band is wide because the host costs per op are known to a "
        f"factor of 3. New cause name: launch_blocking.",
        accept=["launch_blocking", "host_sync", "host_bound", "sync_launch"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual kernels (memory-bound, bf16)", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a 115 M-parameter residual MLP regressor (6 pre-LN blocks, d 1536, hidden 6144, bf16 weights, "
                     "fused AdamW) on one H200 with 6144 rows per step. nvidia-smi never shows the GPU fully busy, and "
                     "the step is slower than the matmul FLOPs suggest. What is holding it back?")
    m["diagnosis"] = (f"Every kernel launch is synchronous: the script sets CUDA_LAUNCH_BLOCKING=1 (left from debugging). "
                      f"Each cudaLaunchKernel call lasts as long as its kernel, the host never queues work ahead, and the "
                      f"GPU sits idle in a gap before every one of the ~{kernels} kernels of an iteration while Python and "
                      f"the autograd engine prepare the next launch (~{rng(b2, 'c.gpu_idle_host_work', 1)} ms of host work "
                      f"plus ~{rng(b2, 'c.gpu_idle_launch_round_trips', 1)} ms of launch round trips) in a "
                      f"{rng(b2, 'step', 1)} ms step on an H200. Remove the variable: the host runs ahead again and the "
                      f"step is GPU-bound at ~{rng(b2, 'after', 1)} ms ({rng(b2, 'share.launch_blocking', 0)} %, high). "
                      "There is no .item() or synchronize in the loop; the GEMMs and fused AdamW are fine.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q10["anchor"] + " with ANCHOR = the output layer's forward "
                     "GEMM or the fused AdamW kernel group, C = 1, WARM = 3", "expect_ms": r2(b["step"])},
                    {"what": "launch durations", "query": "CUPTI_ACTIVITY_KIND_RUNTIME: cudaLaunchKernel durations vs the "
                     "kernels they launch", "expect": "each launch call as long as its kernel (milliseconds for the "
                     "GEMMs), instead of a few µs"},
                    {"what": "idle split", "query": Q10["starved"] + " over one step",
                     "expect": f"~{kernels} gaps per step, each before a kernel not yet launched; the GPU idle "
                               f"{rng(b, 'gpu_idle_share', 0)} % of the step"}]
    m["new_cause"] = {"name": "launch_blocking", "why": "CUDA_LAUNCH_BLOCKING=1 left set outside debugging: every launch "
                      "and async copy waits for its work to finish, so the host cannot run ahead and its per-op time "
                      "becomes GPU idle time; fixed by unsetting it"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- proto_metric (pairwise_broadcast) -------------------------------------------------------------------------
    R, dims, M = PM["rows"], PM["dims"], PM["protos"]
    Dz = dims[-1]
    args = ["--rows", R, "--dims", ",".join(map(str, dims)), "--protos", M]
    b, b2, keys = ev(m_pm)
    n3 = R * M * Dz
    m = base("proto_metric", "proto_metric.py", "planted", args, steps=PM["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", host_sync=EVENT_SYNC)
    m["uses"]["distance"] = "((z[:, None, :] - protos[None, :, :]) ** 2).sum(-1) over 4096 x 1024 x 128"
    m["techniques"] = techniques(
        "compute the squared distances with a matrix product: |z|^2 + |p|^2 - 2 z @ p.T (or torch.cdist, which does "
        "this for large inputs), so no 4096 x 1024 x 128 tensor is materialized forward or backward",
        ["CUDA graphs / launch overhead (GPU-bound)", "bf16 / lower precision (already bf16)", "fused optimizer (already)",
         "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (batches resident on the GPU)", "faster GEMMs / kernel tuning for the encoder",
         "activation checkpointing (memory is not the problem)", "a larger batch"])
    m["planted"] = [planted(
        "pairwise_broadcast", {"device": "GPU 0", "region": f"step_N > forward: an elementwise subtraction writing "
                               f"{n3 / 1e9:.2f} G bf16 values, a square and a sum over the last dimension after the "
                               f"encoder; step_N > backward: copy / multiply kernels and reductions over tensors of the "
                               f"same size"},
        "distances through a matrix product (--fixed; not captured)", b, "rm.pairwise_broadcast",
        "share.pairwise_broadcast",
        f"Squared distances of {R} embeddings to {M} prototypes of {Dz} by broadcasting: the forward writes the {R} x {M} "
        f"x {Dz} difference ({b['diff_gb'][0]:.2f} GB bf16), squares it (r2 w2) and sums it (r2): 8 B per element; the "
        f"backward of the square is grad * (2 * diff.pow(1)) (a copy, a scale, a product with the expanded gradient: "
        f"12 B) and the subtraction's gradients are reduced over the prototypes for z and negated and reduced over the "
        f"batch for the prototypes (8 B): 28 B x {n3 / 1e9:.2f} G = {b['bcast_gb'][0]:.1f} GB at 0.6-0.95 of 2.6-3.0 "
        f"TB/s = {rng(b, 'c.pairwise_broadcast')} ms. The rest: encoder GEMMs at tensor-core rate "
        f"{rng(b, 'c.encoder_gemm_bf16')} ms, GELU, logits and loss, fused AdamW "
        f"{rng(b, 'c.adamw_fused_bf16')} ms. Step {rng(b, 'step')} ms (GPU-bound: host {rng(b, 'host_ms')} ms); with "
        f"|z|^2 + |p|^2 - 2 z p^T (a {R} x {M} x {Dz} GEMM, microseconds) {rng(b, 'after')} ms: removed "
        f"{rng(b, 'rm.pairwise_broadcast')} ms = {rng(b, 'share.pairwise_broadcast', 1)} % -> critical (H200: "
        f"{rng(b2, 'share.pairwise_broadcast', 1)} %). New cause name: pairwise_broadcast.",
        accept=["pairwise_broadcast", "materialized_broadcast", "wasted_compute", "elementwise_unfused"], b2=b2)]
    m["tolerated"] = [{"what": "GELU / loss kernels (memory-bound)", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a prototype-based metric-learning classifier on one H200: a 55 M-parameter MLP encoder "
                     "(1024 -> 4096 x 4 -> 128) and 1024 learned class prototypes, logits = negative squared distance "
                     "to each prototype, bf16 weights, fused AdamW, 4096 samples per step. The encoder is small, yet a "
                     "step takes several times longer than its matmuls. Where does the time go?")
    m["diagnosis"] = (f"In the distance computation: ((z[:, None] - protos[None]) ** 2).sum(-1) materializes a "
                      f"{R} x {M} x {Dz} tensor ({n3 / 1e9:.2f} G bf16 values): the forward runs a subtraction, a square "
                      f"and a sum over it and the backward six more elementwise / reduction passes, ~{b2['bcast_gb'][0]:.0f} GB "
                      f"of memory traffic, ~{rng(b2, 'c.pairwise_broadcast', 1)} ms of a {rng(b2, 'step', 1)} ms step on "
                      f"an H200. Compute the distances as |z|^2 + |p|^2 - 2 z @ p.T (one small GEMM; or torch.cdist): "
                      f"~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.pairwise_broadcast', 0)} %, critical). The "
                      f"encoder GEMMs and fused AdamW are fine.")
    m["measure"] = [{"what": "step period", "query": Q10["step"], "expect_ms": r2(b["step"])},
                    {"what": "kernels", "query": Q10["kernels"] + " (divide by the steps)",
                     "expect": f"elementwise and reduction kernels over {n3 / 1e9:.2f} G elements (sub, pow, sum in the "
                               f"forward range; copy, mul, mul, neg and two reductions in the backward range), "
                               f"{rng(b, 'c.pairwise_broadcast', 1)} ms together, next to "
                               f"{rng(b, 'c.encoder_gemm_bf16', 1)} ms of GEMMs"}]
    m["new_cause"] = {"name": "pairwise_broadcast", "why": "pairwise distances (or scores) computed by broadcasting "
                      "(x[:, None] - y[None]) into an N x M x D tensor and reducing it, where a matrix product gives the "
                      "same N x M result without materializing N x M x D: memory-bound passes over a huge tensor "
                      "forward and backward"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- monitored_lm (activation_hooks) ---------------------------------------------------------------------------
    Bm, Sm, V, d, H, L = (ML[k] for k in ("batch", "seq", "vocab", "d", "heads", "blocks"))
    hooks, fwd_ops, bwd_nodes = ml_counts()
    args = ["--batch", Bm, "--seq", Sm, "--vocab", V, "--d-model", d, "--heads", H, "--blocks", L]
    b, b2, keys = ev(m_ml)
    m = base("monitored_lm", "monitored_lm.py", "planted", args, steps=ML["steps"], est=50)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", attention=True,
                     sequences=f"{Bm} sequences of {Sm} tokens, equal lengths (no padding)", host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, causal (flash), {H} heads of {d // H}"
    m["uses"]["hooks"] = (f"a forward hook on each of the {hooks} nn.Linear computing "
                          "out.detach().float().pow(2).mean().sqrt() every step")
    m["techniques"] = techniques(
        "compute the activation statistics only on the steps they are logged (register the hooks, or let them run, every "
        "N steps), or compute them without the fp32 copy (e.g. torch.linalg.vector_norm(out, dtype=torch.float32) in one "
        "reduction)",
        ["CUDA graphs / launch overhead (GPU-bound)", "bf16 (already)", "fused optimizer (already)",
         "TF32 (no fp32 GEMMs)", "flash/fused attention (already SDPA flash, causal)",
         "sequence packing / padding removal (equal lengths, no padding)",
         "pinned memory / data loading (batches resident on the GPU)", "faster GEMMs / kernel tuning",
         "activation checkpointing"])
    m["planted"] = [planted(
        "activation_hooks", {"device": "GPU 0", "region": f"step_N > forward: after each of the {hooks} Linear GEMMs a "
                             "cast to fp32, a square, a mean reduction and a scalar sqrt over the layer's output"},
        "no hooks, or statistics only on logged steps (--fixed; not captured)", b, "rm.activation_hooks",
        "share.activation_hooks",
        f"{b['params_m'][0]:.0f} M bf16 parameters, {Bm * Sm} tokens per step. A forward hook on each of the {hooks} "
        f"nn.Linear computes out.detach().float().pow(2).mean().sqrt(): a cast (r2 w4), a square (r4 w4) and a mean "
        f"(r4), 18 B per output element, over 9 x {Bm * Sm} x {d} outputs per block and the {Bm * Sm} x {V} logits: "
        f"{b['hook_gb'][0]:.1f} GB = {rng(b, 'c.activation_hooks')} ms. The rest of the step: the blocks' GEMMs "
        f"72 x {Bm * Sm} x {d}^2 x {L} at 550-800 ({rng(b, 'c.linear_gemm_bf16')} ms), the LM head "
        f"{rng(b, 'c.lm_head_gemm')} ms, causal flash attention 7 x B x S^2 x d per block at 300-500 "
        f"({rng(b, 'c.attention_flash_causal')} ms), LayerNorm / GELU / residual / copies "
        f"{rng(b, 'c.layernorm_gelu_residual_copies')} ms, fp32 cross-entropy {rng(b, 'c.cross_entropy_fp32')} ms, "
        f"fused AdamW {rng(b, 'c.adamw_fused_bf16')} ms. Step {rng(b, 'step')} ms (GPU-bound: host "
        f"{rng(b, 'host_ms')} ms, the hooks' ~{hooks * ML_HOOK_OPS} ops included); without the hooks "
        f"{rng(b, 'after')} ms: removed {rng(b, 'rm.activation_hooks')} ms = {rng(b, 'share.activation_hooks', 1)} % "
        f"-> medium (H200: {rng(b2, 'share.activation_hooks', 1)} %). New cause name: activation_hooks.",
        accept=["activation_hooks", "debug_hooks", "redundant_pass", "elementwise_unfused"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / head-merge copies of the blocks (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "low"},
                      {"what": "the fp32 cross-entropy over 8192 x 8192 logits", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a 185 M-parameter decoder-only language model on one H200 (8192-token vocabulary, 3 blocks "
                     "of d 2048 with causal SDPA attention, 2 x 4096 tokens per step, bf16 weights, fused AdamW). The "
                     "step looks GPU-bound and the GEMMs efficient. Is there any overhead worth removing?")
    m["diagnosis"] = (f"Yes, a modest one: forward hooks on every nn.Linear ({hooks} of them) compute an RMS of the "
                      f"layer's output every step, out.detach().float().pow(2).mean().sqrt(): after each Linear GEMM a "
                      f"cast to fp32, a square and a mean over the whole output ({b2['hook_gb'][0]:.1f} GB of traffic, "
                      f"~{rng(b2, 'c.activation_hooks', 1)} ms) in a {rng(b2, 'step', 1)} ms step on an H200. Compute the "
                      f"statistics only on the steps they are logged (or in one fp32-accumulating reduction without the "
                      f"copy): ~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.activation_hooks', 0)} %, medium). The "
                      f"GEMMs (~{rng(b2, 'gemm_share', 0)} %), flash attention and fused AdamW are fine.")
    m["measure"] = [{"what": "step period", "query": Q10["step"], "expect_ms": r2(b["step"])},
                    {"what": "kernels", "query": Q10["kernels"] + " (divide by the steps)",
                     "expect": f"{hooks} fp32 cast kernels, {hooks} pow kernels and {hooks} mean reductions in the forward "
                               f"range per step ({rng(b, 'c.activation_hooks', 2)} ms together)"}]
    m["new_cause"] = {"name": "activation_hooks", "why": "monitoring hooks left on every layer computing activation "
                      "statistics every step (extra passes over every layer output, often through an fp32 copy) when "
                      "they are read only every N steps; fixed by computing them only on logged steps"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- factorized_mlp (lowrank_materialized; no NVTX) ------------------------------------------------------------
    T, dw, rk, L, K = (FM[k] for k in ("rows", "width", "rank", "layers", "classes"))
    args = ["--rows", T, "--width", dw, "--rank", rk, "--layers", L, "--classes", K]
    b, b2, keys = ev(m_fm)
    m = base("factorized_mlp", "factorized_mlp.py", "planted", args, nvtx=False, steps=FM["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", host_sync=EVENT_SYNC)
    m["uses"]["factorized_layers"] = f"F.linear(x, U @ V, bias) with U {dw} x {rk}, V {rk} x {dw}"
    m["techniques"] = techniques(
        "apply the factors to the activations one after the other, F.linear(F.linear(x, V), U, bias) (i.e. (x @ V^T) "
        "@ U^T): two thin GEMMs of rank 512 instead of rebuilding the dense 4096 x 4096 weight and multiplying by it",
        ["CUDA graphs / launch overhead (GPU-bound)", "bf16 / FP8 / lower precision (already bf16; the extra FLOPs are "
                                                      "the waste)",
         "fused optimizer (already)", "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (batches resident on the GPU)", "faster GEMMs / kernel tuning (they run at "
                                                                        "tensor-core rate)",
         "caching U @ V across steps (the factors change every step)", "a larger batch"])
    m["planted"] = [planted(
        "lowrank_materialized", {"device": "GPU 0", "region": f"every iteration (no NVTX): per layer a {dw} x {dw} x "
                                 f"{rk} GEMM (U @ V) before a {T} x {dw} x {dw} GEMM in the forward, and {T} x {dw} x "
                                 f"{dw} gradient GEMMs plus two {dw} x {dw} x {rk} GEMMs in the backward"},
        "F.linear(F.linear(x, V), U, bias) (--fixed; not captured)", b, "rm.lowrank_materialized",
        "share.lowrank_materialized",
        f"{fm_params() / 1e6:.1f} M parameters, {T} rows. Each of the {L} factorized layers rebuilds its dense weight, "
        f"U @ V (2 x {dw}^2 x {rk} FLOPs), multiplies the activations by it (2 x {T} x {dw}^2) and in the backward "
        f"forms the dense weight's gradient ({T} x {dw} x {dw}) and the input gradient through the dense weight, then "
        f"the factors' gradients: dense GEMMs 6 x {T} x {dw}^2 per layer (4 for the first) at 650-820 = "
        f"{rng(b, 'c.dense_gemm_T_d_d')} ms, the rebuild and factor-gradient GEMMs {rng(b, 'c.weight_rebuild_gemms')} ms, "
        f"dense weight traffic {rng(b, 'c.dense_weight_traffic')} ms. Applying the factors in turn costs "
        f"12 x {T} x {dw} x {rk} per layer (10 for the first) at 550-800: {rng(m_fm_fixed_b(), 'c.lowrank_gemms')} ms. "
        f"The rest (GELU / bias gradients {rng(b, 'c.gelu_bias_grad_bf16')} ms, head {rng(b, 'c.head_gemm')} ms, loss, "
        f"AdamW) is shared. Step {rng(b, 'step')} ms (GPU-bound: host {rng(b, 'host_ms')} ms); fixed "
        f"{rng(b, 'after')} ms: removed {rng(b, 'rm.lowrank_materialized')} ms = "
        f"{rng(b, 'share.lowrank_materialized', 1)} % -> critical (H200: {rng(b2, 'share.lowrank_materialized', 1)} %). "
        f"New cause name: lowrank_materialized.",
        accept=["lowrank_materialized", "matmul_order", "wasted_compute"], b2=b2)]
    m["tolerated"] = [{"what": "GELU / bias-gradient kernels (memory-bound)", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We fine-tune a compressed MLP classifier on one H200: 6 hidden layers of width 4096 stored as rank-512 "
                     "SVD factors (29 M parameters instead of 100 M), a 1000-class head, bf16 weights, fused AdamW, 16384 "
                     "rows per step. The compressed model trains no faster than the dense one did. Why, and what would "
                     "make it faster?")
    m["diagnosis"] = (f"The factorized layers rebuild the dense weight every forward, F.linear(x, U @ V, bias), so the "
                      f"activations still go through full {T} x {dw} x {dw} GEMMs forward and backward (plus the "
                      f"{dw} x {dw} x {rk} rebuild and factor-gradient GEMMs): ~{rng(b2, 'c.dense_gemm_T_d_d', 1)} ms of "
                      f"dense GEMMs in a {rng(b2, 'step', 1)} ms step on an H200, the same work as the dense model. Apply "
                      f"the factors in turn, F.linear(F.linear(x, V), U, bias): two thin rank-{rk} GEMMs per layer, "
                      f"~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.lowrank_materialized', 0)} %, critical). The "
                      "GEMMs themselves run at tensor-core rate; the problem is the order of the products.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q10["anchor"] + " with ANCHOR = the head's forward GEMM "
                     "or the fused AdamW kernel group, C = 1, WARM = 3", "expect_ms": r2(b["step"])},
                    {"what": "kernels", "query": Q10["kernels"] + " (divide by the steps)",
                     "expect": f"{3 * L - 1} GEMMs of {T} x {dw} x {dw} per step ({rng(b, 'c.dense_gemm_T_d_d', 1)} ms) "
                               f"and {3 * L} GEMMs of {dw} x {dw} x {rk}"}]
    m["new_cause"] = {"name": "lowrank_materialized", "why": "a low-rank (factorized) layer that multiplies its factors "
                      "into the dense weight and applies that, x @ (U @ V)^T, instead of applying the factors in turn: "
                      "the dense GEMM cost comes back (d / 2r times the FLOPs); fixed by reassociating the product"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


def m_fm_fixed_b():
    return ev(lambda r: m_fm(r, fixed=True))[0]


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.table)
