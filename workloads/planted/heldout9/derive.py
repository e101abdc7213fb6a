#!/usr/bin/env python3
"""First-principles truth for the ninth held-out set (heldout9): writes heldout9/manifests/<case>.json from FLOPs,
bytes, call counts and rate bands alone (no capture, no aisp output), with the helpers of ../derive.py.

    python3 workloads/planted/heldout9/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout9/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout9/derive.py --table    # the README table only

Method: as ../derive.py and heldout8/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or calls x a host cost per call; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the one GPU; severity:
info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical. This set is made for ONE GPU (an H200): five
one-GPU programs, one of them with a captured fixed variant (a before/after pair), no multi-rank case. New bands (each
with its source in the manifests' `rates`): the host cost of anomaly mode's stack capture per autograd node, the cost
of one NaN check (isnan + any + a read on the host) in anomaly mode's backward, and the host cost of one backward node
in the C++ autograd engine; four bands of heldout2-8 are copied with their sources so that this set depends on no
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
ADAM_B, GB, Q, LOSS_B = D.ADAM_B, D.GB, D.Q, D.LOSS_B
mlp_params, mlp_train_flops, gelu_train_bytes = D.mlp_params, D.mlp_train_flops, D.gelu_train_bytes
pct, planted, r2, rng, techniques, uses = D.pct, D.planted, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops = D.t_bytes, D.t_flops

SET = "heldout9"

# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; counts as named.
NEW_H100 = {
    # copied from heldout2-8 (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "attn_train_d64_tflops": (200.0, 450.0),
    "eager_op_us": (20.0, 70.0),
    "tiny_kernel_us": (2.0, 6.0),
    # new here
    "anomaly_stack_us": (40.0, 250.0),
    "anomaly_check_us": (30.0, 120.0),
    "bwd_node_us": (10.0, 30.0),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 2048 or less (or a varying M): below the 8192^3 rate (732-787 "
                       "measured) as tiles and waves shrink and the epilogue's writes weigh more; an assumption widened "
                       "down to 550 (heldout2-8). Used for every GEMM whose smallest dimension is <= 2048; bf16_tflops "
                       "for the others",
    "attn_train_d64_tflops": "SDPA flash forward + backward, bf16, head_dim 64, non-causal, counted as 14*B*S^2*D FLOPs "
                             "(forward 4, backward 10 with the recomputed scores); FlashAttention-2 on H100 reaches "
                             "~300-350 forward and ~200-300 backward at head_dim 64 (published FA2 figures); band 200-450 "
                             "(heldout2)",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing: 29-36 µs "
                   "measured (quoted by ../derive.py), ~70 implied by heldout2; band 20-70 (heldout3-8)",
    "tiny_kernel_us": "GPU time of one tiny kernel (a scalar multiply, a fill of one element, a reduction over a few "
                      "thousand elements, a GEMV with N = 1) in a chain of dependent kernels, including the launch latency "
                      "to the next one when the host is ahead: 2-6 µs (assumption of heldout7-8)",
    "anomaly_stack_us": "host time anomaly mode adds to the creation of one autograd node: PyAnomalyMetadata::store_stack "
                        "calls torch.fx.traceback.format_stack(), i.e. traceback.extract_stack() + format_list() over the "
                        "~2-12 Python frames of the call (module level, nn.Module __call__ / _call_impl / forward per "
                        "nesting level): a FrameSummary, a linecache line lookup and a formatted string per frame (3-10 "
                        "µs each in CPython 3.12) plus linecache.checkcache's os.stat of each file in the stack (2-20 µs "
                        "each in a sandboxed kernel) and the dictionary store; 40-250 µs per node (assumption). A check on a dev CPU "
                        "(Python 3.11, torch 2.11 on the CPU, no profiler; the same 4-block model at toy sizes, so the "
                        "ops are host-bound): the forward's 36 nodes took 4.0-4.7 ms more with anomaly mode on, "
                        "~110-130 µs per node, inside the band",
    "anomaly_check_us": "one NaN check of anomaly mode's backward (engine.cpp call_function: for every defined output of a "
                        "node, isnan(output)._is_any_true().item()): two ATen dispatches and launches (isnan, the any "
                        "reduction) at 5-15 µs each under CUPTI, a 1-byte cudaMemcpyAsync to the host and a "
                        "cudaStreamSynchronize (10-30 µs), the latency of the 2-3 small kernels the host then waits for "
                        "(2-6 µs each) and the wake-up; the GPU is idle from the end of the copy until the next launch: "
                        "30-120 µs per checked output (assumption)",
    "bwd_node_us": "host time of one backward node in the C++ autograd engine without anomaly mode (the node's function, "
                   "1-3 kernel launches at 4-10 µs under CUPTI, the ready-queue bookkeeping): 10-30 µs (assumption); "
                   "far below the GPU time of the nodes here",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q9 = dict(Q)
Q9.update({
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


# ---------------------------------------------------------------------------------------------------
# The cases.

# mtl_ranker: shared trunk 1024 -> 4096 x 4 -> 1024 (bias-free, GELU, bf16 autocast, fp32 params), 3 towers
# 1024 -> 512 -> 1, 8192 rows, fused AdamW; one backward per task loss (retain_graph) unless fixed.
MT = dict(rows=8192, dims=[1024, 4096, 4096, 4096, 4096, 1024], tower=512, tasks=3, steps=25)
MT_HOST_OPS = 36  # trunk 9, towers 15, losses 3, backward calls 3, opt.step + zero_grad 2, stack/copy 3, event 1


def mt_params():
    dims, W, K = MT["dims"], MT["tower"], MT["tasks"]
    pt = float(mlp_params(dims))
    pw = float(dims[-1] * W + W)
    return pt, pw, pt + K * pw


def m_mtl(r, fixed=False):
    R, dims, W, K = MT["rows"], MT["dims"], MT["tower"], MT["tasks"]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    layers = list(zip(dims, dims[1:]))
    pt, pw, P = mt_params()
    hid = sum(dims[1:-1])
    fwd = sum(gemm(r, R, a, b) for a, b in layers)
    # backward GEMMs: weight and input gradients, the first layer's input gradient skipped (the features need none)
    bwd = sum(gemm(r, R, a, b, 2.0 if i else 1.0) for i, (a, b) in enumerate(layers))
    c = {"trunk_forward_gemm": fwd,
         # each tower: 1024 x 512 forward + both gradients, the 512 -> 1 layer a GEMV (3 tiny kernels)
         "towers_gemm": K * (gemm(r, R, W, dims[-1], 3.0) + 3 * max(t_flops(2.0 * R * W, r["bf16_mid_tflops"]), tiny)),
         # the fp32 features cast to bf16 (r4 w2), GELU forward in bf16 (r2 w2) in the trunk and the towers
         "input_cast_gelu_forward": t_bytes(6.0 * R * dims[0] + 4.0 * R * hid + K * 4.0 * R * W, hbm),
         "amp_weight_casts_forward": t_bytes(6.0 * P, hbm),  # autocast: every fp32 weight read, written in bf16 once
         "losses_small_kernels": K * 8 * tiny,  # squeeze/float, BCE / MSE forward and backward over 8192 values
         "adamw_fused": t_bytes(ADAM_B[4] * P, hbm)}
    # one backward through the trunk: GEMMs, GELU backward in bf16 (r2 r2 w2), the weight gradients cast back to
    # fp32 by ToCopyBackward (r2 w4)
    once = bwd + t_bytes(6.0 * R * hid + 6.0 * pt, hbm)
    c["trunk_backward"] = (1 if fixed else K) * once
    c["towers_backward_elementwise"] = t_bytes(K * (6.0 * R * W + 6.0 * pw), hbm)
    if fixed:
        # the engine sums the three towers' gradients at the trunk output (2 adds of 8192 x 1024 bf16)
        c["grad_sum_trunk_output"] = t_bytes((K - 1) * 6.0 * R * dims[-1], hbm)
    else:
        # backward 1 hands its fp32 gradients to .grad (no copy); backwards 2 and 3 add into .grad (r4 r4 w4)
        c["grad_accumulate_trunk"] = t_bytes((K - 1) * 12.0 * pt, hbm)
    step = sum(c.values())
    host = MT_HOST_OPS * r["eager_op_us"] / 1e3
    out = {"c": c, "step": step, "host_ms": host, "host_margin_ms": step - host, "trunk_bwd_once_ms": once,
           "params_m": P / 1e6, "trunk_params_m": pt / 1e6}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_mtl(r, fixed=True)["step"]
    rm = {"repeated_backward": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after,
                "backward_share": pct(c["trunk_backward"] + c["grad_accumulate_trunk"], step)})
    return out


# tower_serve: 6 pre-LN residual MLP blocks d 4096 -> 16384 (biases), fp32 checkpoint under per-request bf16 autocast,
# 2048 rows per request, inference; model.to(bf16) once when fixed.
TS = dict(rows=2048, d=4096, hidden=16384, blocks=6, steps=30)


def ts_params():
    d, h, L = TS["d"], TS["hidden"], TS["blocks"]
    return float(L * (2 * d * h + h + 3 * d) + 3 * d + 1)


def m_serve(r, fixed=False):
    T, d, h, L = TS["rows"], TS["d"], TS["hidden"], TS["blocks"]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    cast_p = L * (2.0 * d * h + h + d) + d + 1  # the Linear weights and biases autocast casts (LayerNorms stay fp32)
    c = {"gemm_bf16": L * gemm(r, T, d, h, 2.0) + max(t_flops(2.0 * T * d, r["bf16_mid_tflops"]), tiny),
         # bf16 bytes per token x d: LayerNorm r2 w2, GELU on 4d r2 w2 (16), residual add r2 r2 w2 = 26 per block; the
         # final LayerNorm 4
         "layernorm_gelu_residual": t_bytes((L * 26.0 + 4.0) * T * d, hbm),
         "score_head_sigmoid": 3 * tiny}
    if not fixed:
        c["weight_casts_fp32_to_bf16"] = t_bytes(6.0 * cast_p, hbm)  # r4 w2 per weight, every request
        # fp32 residual stream: LayerNorm r4 w4 instead of r2 w2 (+4), the LayerNorm output cast to bf16 before fc1
        # (r4 w2, +6), the add fp32 + bf16 -> fp32 r4 r2 w4 instead of r2 r2 w2 (+4): +14 per block; final LN +4 and
        # the head's input cast +6
        c["fp32_activation_traffic"] = t_bytes((L * 14.0 + 10.0) * T * d, hbm)
    step = sum(c.values())
    ops = L * (5 + (0 if fixed else 5)) + 8  # per block LN, fc1, gelu, fc2, add (+5 casts); norm, head, float, ...
    host = ops * r["eager_op_us"] / 1e3
    out = {"c": c, "step": step, "host_ms": host, "host_margin_ms": step - host, "params_m": ts_params() / 1e6,
           "cast_gb": 6.0 * cast_p / GB, "gemm_share": pct(c["gemm_bf16"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_serve(r, fixed=True)["step"]
    rm = {"autocast_weight_cast": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after,
                "weight_cast_share": pct(c["weight_casts_fp32_to_bf16"], step)})
    return out


# anomaly_fit: input 512 -> 1536, 4 pre-LN blocks d 1536 -> 6144 (biases, pure bf16), output 1536 -> 256, 4096 rows,
# fused AdamW; torch.autograd.set_detect_anomaly(True) unless fixed.
AN = dict(rows=4096, d_in=512, d=1536, hidden=6144, blocks=4, d_out=256, steps=25)


def an_counts():
    L = AN["blocks"]
    ops = 2 + 5 * L + 4         # forward Python ops: input linear, per block (ln, fc1, gelu, fc2, add), output linear,
    # float, sub, pow, mean
    nodes = 2 + 7 * L + 2 + 4   # autograd nodes: linear = TBackward0 + AddmmBackward0; per block LayerNorm, 2 linears,
    # GELU, add; loss ToCopy, Sub, Pow, Mean
    checks = 14 * L + 11        # defined node outputs: per block LN 3, 2 x (T 1 + Addmm 3), GELU 1, Add 2 = 14; input
    # linear T 1 + Addmm 2 (bias, weight); output linear 1 + 3; loss 4
    return ops, nodes, checks


def an_params():
    di, d, h, L, O = AN["d_in"], AN["d"], AN["hidden"], AN["blocks"], AN["d_out"]
    return float(di * d + d + L * (2 * d * h + h + 3 * d) + d * O + O)


AN_OTHER_OPS = 6  # backward call, opt.step, zero_grad, loss copy, event record, batch pick


def m_anom(r, fixed=False):
    R, di, d, h, L, O = (AN[k] for k in ("rows", "d_in", "d", "hidden", "blocks", "d_out"))
    hbm = r["hbm_tbs"]
    P = an_params()
    ops, nodes, checks = an_counts()
    gf = gemm(r, R, di, d) + L * 2 * gemm(r, R, d, h) + gemm(r, R, d, O)
    gb = gemm(r, R, di, d) + L * 2 * gemm(r, R, d, h, 2.0) + gemm(r, R, d, O, 2.0)
    # bf16 elementwise per row: forward LN r2 w2 on d, GELU r2 w2 on h, add r2 r2 w2 on d; backward LN ~10 B on d,
    # GELU r2 r2 w2 on h, residual-gradient add 6 on d; the loss on 256 outputs (float, sub, pow, mean: ~20 B forward,
    # ~22 backward)
    ew_f = t_bytes(L * (4.0 * d + 4.0 * h + 6.0 * d) * R + 20.0 * R * O, hbm)
    ew_b = t_bytes(L * (10.0 * d + 6.0 * h + 6.0 * d) * R + 22.0 * R * O, hbm)
    adam = t_bytes(ADAM_B[2] * P, hbm)
    op, bn = r["eager_op_us"] / 1e3, r["bwd_node_us"] / 1e3
    gpu = {"forward_gpu": gf + ew_f, "backward_gpu": gb + ew_b, "adamw_fused_bf16": adam}
    gpu_ms = sum(gpu.values())
    if fixed:
        host = (ops + AN_OTHER_OPS) * op + nodes * bn
        c = dict(gpu)
        step = max(gpu_ms, host)
        if step > gpu_ms:
            c["gpu_idle_waiting_for_host"] = step - gpu_ms
        return {"c": c, "step": step, "gpu_busy_ms": gpu_ms, "host_ms": host, "host_margin_ms": gpu_ms - host,
                "rm": {}, "share": {}, "after": None}
    # elements each NaN check reads (isnan r2 w1, any r1: 4 B per element): per block LN (input grad R x d, d, d),
    # fc1 (T: d x h; Addmm: h, R x d, d x h), GELU R x h, fc2 (T: h x d; Addmm: d, R x h, h x d), add 2 x R x d; the
    # input linear (T: di x d; Addmm: d, di x d), the output linear (T: d x O; Addmm: O, R x d, d x O), the loss 4 x R x O
    el = (L * (4.0 * R * d + 2.0 * R * h + 4.0 * d * h + h + 3.0 * d) + 2.0 * di * d + d + R * d + 2.0 * d * O + O
          + 4.0 * R * O)
    fwd_host = ops * op + nodes * r["anomaly_stack_us"] / 1e3
    c = {"forward_host_bound": max(fwd_host, gf + ew_f),
         "backward_gpu": max(gb + ew_b, nodes * bn),
         "nan_check_syncs": checks * r["anomaly_check_us"] / 1e3,
         "nan_check_kernels": t_bytes(4.0 * el, hbm),
         "adamw_fused_bf16": adam}
    step = sum(c.values())
    after = m_anom(r, fixed=True)["step"]
    rm = {"anomaly_detection": step - after}
    return {"c": c, "step": step, "gpu_busy_ms": gpu_ms + c["nan_check_kernels"], "fwd_host_ms": fwd_host,
            "forward_gpu_ms": gf + ew_f, "rm": rm, "share": shares(rm, step), "after": after,
            "gpu_idle_share": pct(step - gpu_ms - c["nan_check_kernels"], step), "params_m": P / 1e6}


# onehot_tagger: vocab 32000 -> d 1024 (one-hot product unless fixed), 4 pre-LN encoder blocks (16 heads of 64, MLP 4x,
# biases, pure bf16), 17 tags, 16 x 512 tokens, fused AdamW.
OH = dict(batch=16, seq=512, vocab=32000, d=1024, heads=16, blocks=4, tags=17, steps=25)
OH_HOST_OPS = 11 * OH["blocks"] + 10  # kernel-issuing ops per block 11; embed, norm, head, float, CE, backward, step, ...


def oh_params():
    V, d, L, K = OH["vocab"], OH["d"], OH["blocks"], OH["tags"]
    return float(V * d + L * (12 * d * d + 13 * d) + 2 * d + d * K + K)


def m_oh(r, fixed=False):
    B, S, V, d, L, K = (OH[k] for k in ("batch", "seq", "vocab", "d", "blocks", "tags"))
    T = float(B * S)
    hbm, tiny, mid = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3, r["bf16_mid_tflops"]
    P = oh_params()
    c = {# qkv 3d^2, proj d^2, fc1 4d^2, fc2 4d^2 = 12 d^2 per block, x2 FLOPs, x3 (forward, weight and input grads: the
         # first block's input gradient is needed for the embedding); the 17-tag head (3 small GEMMs)
         "linear_gemm_bf16": t_flops(L * 72.0 * T * d * d, mid) + 3 * max(t_flops(2.0 * T * d * K, mid), tiny),
         "attention_flash": t_flops(L * 14.0 * B * S * S * d, r["attn_train_d64_tflops"]),
         # bf16 per block per token x d: LayerNorms 2 x 4 fwd + 2 x 10 bwd, residual adds 12 + 12, GELU on 4d 16 + 24,
         # attention-output transpose copy 4 + 4, q/k/v gradient stacking 12 = 112 (heldout2's count); final LN 4 + 10
         "layernorm_gelu_residual_copies": t_bytes((L * 112.0 + 14.0) * T * d, hbm),
         "loss": 6 * tiny,  # 8192 x 17 logits: float, log_softmax, nll and their backward
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    if fixed:
        # gather r2 w2 per token x d; backward: the dense table gradient zero-filled (w2 V x d), the 8192 ids sorted and
        # their rows summed into it (~r2 w2 + index traffic, 8 B per token x d), ~12 small kernels (sort passes, scans)
        c["embedding_gather_and_backward"] = t_bytes(4.0 * T * d + 2.0 * V * d + 8.0 * T * d, hbm) + 12 * tiny
    else:
        # F.one_hot: an int64 T x V zero-fill (w8) and a scatter of the ones; .to(bf16) r8 w2
        c["onehot_build_and_cast"] = t_bytes(8.0 * T * V + 10.0 * T * V, hbm) + tiny
        c["onehot_gemm_forward"] = t_flops(2.0 * T * V * d, mid)       # [T, V] @ [V, d]
        c["onehot_gemm_table_grad"] = t_flops(2.0 * T * V * d, mid)    # [V, T] @ [T, d]
    step = sum(c.values())
    host = (OH_HOST_OPS + (0 if fixed else 2)) * r["eager_op_us"] / 1e3
    out = {"c": c, "step": step, "host_ms": host, "host_margin_ms": step - host, "params_m": P / 1e6,
           "gemm_share": pct(c["linear_gemm_bf16"], step), "attn_share": pct(c["attention_flash"], step),
           "ew_share": pct(c["layernorm_gelu_residual_copies"], step), "adam_share": pct(c["adamw_fused_bf16"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_oh(r, fixed=True)["step"]
    rm = {"onehot_matmul": step - after}
    emb = c["onehot_build_and_cast"] + c["onehot_gemm_forward"] + c["onehot_gemm_table_grad"]
    out.update({"rm": rm, "share": shares(rm, step), "after": after, "onehot_ms": emb,
                "onehot_gemm_ms": c["onehot_gemm_forward"] + c["onehot_gemm_table_grad"],
                "onehot_gb": 18.0 * T * V / GB})
    return out


# category_mlp: bias-free MLP 2560 -> 8192 x 5 -> 4096 (GELU, pure bf16 parameters), 2048 rows, cross-entropy, fused
# AdamW; opt.zero_grad(set_to_none=False) unless fixed.
CM = dict(rows=2048, dims=[2560, 8192, 8192, 8192, 8192, 8192, 4096], steps=25)
CM_HOST_OPS = 22  # 6 linears, 5 GELUs, float, CE, backward call, opt.step, zero_grad, loss copy, event, batch pick ...


def m_cm(r, fixed=False):
    R, dims = CM["rows"], CM["dims"]
    hbm = r["hbm_tbs"]
    P = float(mlp_params(dims))
    c = {"gemm_bf16": t_flops(mlp_train_flops(R, dims), r["bf16_mid_tflops"]),
         "gelu_bf16": t_bytes(gelu_train_bytes(R, dims, 2), hbm),
         "cross_entropy_fp32": t_bytes(LOSS_B * R * dims[-1], hbm),  # logits .float(), log_softmax, nll, backward
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    if not fixed:
        c["grad_zero_fill"] = t_bytes(2.0 * P, hbm)          # _foreach_zero_: every bf16 gradient written (w2)
        c["grad_accumulate_add"] = t_bytes(6.0 * P, hbm)     # AccumulateGrad: .grad += new (r2 r2 w2) per weight
    step = sum(c.values())
    host = CM_HOST_OPS * r["eager_op_us"] / 1e3
    out = {"c": c, "step": step, "host_ms": host, "host_margin_ms": step - host, "params_m": P / 1e6,
           "gemm_share": pct(c["gemm_bf16"], step), "adam_share": pct(c["adamw_fused_bf16"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_cm(r, fixed=True)["step"]
    rm = {"zero_grad_inplace": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after,
                "extra_ms": c["grad_zero_fill"] + c["grad_accumulate_add"]})
    return out


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=25, warmup=3):
    return D.base(name, f"heldout9/{workload}", variant, SET, args, ranks=1, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def finish(m, b, b2, keys, after=True, fixed_case=None):
    m["lacks"] = [v for k, v in D.LACKS.items() if m["uses"].get(k) is False and k != "ddp"]
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


def build():
    out = {}

    # ---- mtl_ranker (repeated_backward) ----------------------------------------------------------------------------
    R, dims, W, K = MT["rows"], MT["dims"], MT["tower"], MT["tasks"]
    pt, pw, P = mt_params()
    args = ["--rows", R, "--dims", ",".join(map(str, dims)), "--tower", W]
    b, b2, keys = ev(m_mtl)
    m = base("mtl_ranker", "mtl_ranker.py", "planted", args, steps=MT["steps"], est=45)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["multi_task"] = (f"a shared trunk and {K} task towers; the {K} task losses back-propagated one by one, "
                               "retain_graph=True on the first two")
    m["techniques"] = techniques(
        "back-propagate once: sum (or weight and sum) the task losses and call backward() on the total, so the shared "
        "trunk's backward runs once per step instead of once per task (per-task gradient statistics, if needed, from "
        "torch.autograd.grad on the towers' outputs or only every N steps)",
        ["CUDA graphs / launch overhead (GPU-bound)", "bf16 / lower precision (already autocast)",
         "fused optimizer (already)", "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (batches resident on the GPU)", "activation checkpointing",
         "faster GEMMs / kernel tuning (the GEMMs run at tensor-core rate)", "gradient accumulation / a larger batch"])
    m["planted"] = [planted(
        "repeated_backward", {"device": "GPU 0", "region": f"step_N > backward: the trunk's backward kernel sequence "
                              f"({len(dims) - 1} layers of weight- and input-gradient GEMMs, GELU backward, the fp32 "
                              f"gradient casts) three times, the 2nd and 3rd followed by adds into .grad"},
        "one backward of the summed losses (--fixed; not captured)", b, "rm.repeated_backward", "share.repeated_backward",
        f"{P / 1e6:.1f} M fp32 parameters ({pt / 1e6:.1f} M in the trunk), {R} rows. Forward: trunk GEMMs 2 x {R} x "
        f"{pt / 1e6:.1f} M = {2.0 * R * pt / 1e12:.2f} TFLOP ({rng(b, 'c.trunk_forward_gemm')} ms at 650-820 for the 4096 x "
        f"4096 layers and 550-800 for the 1024-wide ones), towers, casts and GELU ~"
        f"{b['c.towers_gemm'][0] + b['c.input_cast_gelu_forward'][0] + b['c.amp_weight_casts_forward'][0]:.2f} ms. Each "
        f"task loss is back-propagated on its own with retain_graph=True, so the trunk's backward (weight and input "
        f"gradient GEMMs {2.0 * 2.0 * R * pt / 1e12 - 2.0 * R * dims[0] * dims[1] / 1e12:.2f} TFLOP, GELU backward, "
        f"ToCopyBackward of the weight gradients: {rng(b, 'trunk_bwd_once_ms')} ms) runs {K} times "
        f"({rng(b, 'c.trunk_backward')} ms), and backwards 2 and 3 add into the fp32 .grad (12 B per trunk parameter each: "
        f"{rng(b, 'c.grad_accumulate_trunk')} ms); fused AdamW {rng(b, 'c.adamw_fused')} ms. Step {rng(b, 'step')} ms "
        f"(GPU-bound: ~{MT_HOST_OPS} ops of host time, {rng(b, 'host_ms')} ms); with one backward of the summed losses "
        f"{rng(b, 'after')} ms: removed {rng(b, 'rm.repeated_backward')} ms = {rng(b, 'share.repeated_backward', 1)} % -> "
        f"critical (H200: {rng(b2, 'share.repeated_backward', 1)} %). New cause name: repeated_backward.",
        accept=["repeated_backward", "redundant_backward", "wasted_compute"], b2=b2)]
    m["tolerated"] = [{"what": "AMP weight casts and GELU kernels (memory-bound)", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a shared-bottom multi-task ranking model on one H200: a 58.7 M-parameter MLP trunk (1024 -> "
                     "4096 x 4 -> 1024) feeding three small task towers (click, conversion, dwell time), bf16 autocast "
                     "with fp32 weights, fused AdamW, 8192 samples per step. The backward phase takes far longer than the "
                     "forward. Is that expected, or is something wrong?")
    m["diagnosis"] = (f"Something is wrong: each step runs the shared trunk's backward three times. The three task losses "
                      f"are back-propagated one by one (retain_graph=True), so inside every backward range the trunk's "
                      f"gradient GEMMs, GELU backward and fp32 gradient casts appear {K} times "
                      f"({rng(b2, 'c.trunk_backward', 1)} ms of a {rng(b2, 'step', 1)} ms step on an H200, ~6x the forward "
                      f"GEMMs instead of ~2x), and the 2nd and 3rd add into .grad. Sum the losses and call backward once: "
                      f"~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.repeated_backward', 0)} %, critical). The "
                      "GEMMs themselves, the casts and fused AdamW are fine.")
    m["measure"] = [{"what": "step period", "query": Q9["step"], "expect_ms": r2(b["step"])},
                    {"what": "ranges", "query": Q9["nvtx_ranges"] + " (forward, backward)",
                     "expect": "the backward range's GPU work ~6-7x the forward's: the trunk's 9 gradient GEMMs repeated "
                               "3 times per step"},
                    {"what": "kernels", "query": Q9["kernels"] + " (divide by the steps)",
                     "expect": f"{3 * 9} trunk gradient GEMMs per step (3 x 9) next to 5 forward trunk GEMMs"}]
    m["new_cause"] = {"name": "repeated_backward", "why": "several losses back-propagated separately (retain_graph=True) "
                      "through a shared part of the graph: that part's backward runs once per loss instead of once; fixed "
                      "by one backward of the (weighted) sum"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- tower_serve (autocast_weight_cast; no NVTX) ---------------------------------------------------------------
    T, d, h, L = TS["rows"], TS["d"], TS["hidden"], TS["blocks"]
    args = ["--rows", T, "--d-model", d, "--hidden", h, "--blocks", L]
    b, b2, keys = ev(m_serve)
    m = base("tower_serve", "tower_serve.py", "planted", args, nvtx=False, steps=TS["steps"], est=45)
    m["uses"] = uses("fp32 weights, bf16 autocast entered per request", "none (inference)",
                     host_sync="event sync on the previous request (lag 1: never idles the GPU)")
    m["uses"]["inference"] = "torch.inference_mode, 2048 rows per request, scores kept on the GPU"
    m["techniques"] = techniques(
        "convert the served weights to bf16 once at load (model.to(torch.bfloat16), bf16 inputs) instead of keeping the "
        "fp32 checkpoint and re-casting it under autocast on every request; if autocast must stay, keep one autocast "
        "context open across requests so its weight-cast cache is reused",
        ["CUDA graphs / launch overhead (GPU-bound)", "TF32 (the GEMMs already run in bf16)", "FP8 as the top fix",
         "flash/fused attention (no attention in this run)", "pinned memory / data loading (inputs resident on the GPU)",
         "faster GEMMs / kernel tuning (the GEMMs run at tensor-core rate)", "optimizer changes (inference)",
         "a larger batch as the top fix"])
    m["planted"] = [planted(
        "autocast_weight_cast", {"device": "GPU 0", "region": f"every request (no NVTX): before each of the {2 * L} large "
                                 "GEMMs a cast kernel reading a 268 MB fp32 weight and writing it in bf16, LayerNorms and "
                                 "residual adds in fp32"},
        "model.to(torch.bfloat16) once at load, bf16 inputs, no autocast (--fixed; not captured)", b,
        "rm.autocast_weight_cast", "share.autocast_weight_cast",
        f"{ts_params() / 1e6:.0f} M fp32 parameters served under a bf16 autocast context entered per request: every request "
        f"re-casts every Linear weight and bias (r4 w2: {b['cast_gb'][0]:.2f} GB at 2.6-3.0 TB/s = "
        f"{rng(b, 'c.weight_casts_fp32_to_bf16')} ms), and the residual stream and LayerNorms stay fp32 (+14 B per token x "
        f"d per block: {rng(b, 'c.fp32_activation_traffic')} ms). The request's useful work: {2 * L} GEMMs 2 x {T} x {d} x "
        f"{h} at 550-800 = {rng(b, 'c.gemm_bf16')} ms, LayerNorm / GELU / residual in bf16 "
        f"{rng(b, 'c.layernorm_gelu_residual')} ms. Step {rng(b, 'step')} ms (GPU-bound: {rng(b, 'host_ms')} ms of host "
        f"ops); with bf16 weights converted once {rng(b, 'after')} ms: removed {rng(b, 'rm.autocast_weight_cast')} ms = "
        f"{rng(b, 'share.autocast_weight_cast', 1)} % -> high (H200 at 3.9-4.4 TB/s: "
        f"{rng(b2, 'share.autocast_weight_cast', 1)} %). New cause name: autocast_weight_cast.",
        accept=["autocast_weight_cast", "redundant_cast", "elementwise_unfused"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual kernels (memory-bound)", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We serve an 805 M-parameter residual MLP ranking tower (6 pre-LN blocks, d 4096, hidden 16384) on one "
                     "H200, scoring 2048 candidates per request under torch.inference_mode with bf16 autocast. Requests "
                     "take noticeably longer than the matmul FLOPs suggest. Where does the rest of the time go, and how do "
                     "we get it back?")
    m["diagnosis"] = (f"The weights are fp32 and are cast to bf16 again on every request: autocast is entered per request "
                      f"and drops its casts when the context closes, so each request runs a cast kernel over every weight "
                      f"matrix ({b2['cast_gb'][0]:.1f} GB read+write, ~{rng(b2, 'c.weight_casts_fp32_to_bf16', 2)} ms) before "
                      f"its GEMM, and the LayerNorms / residual stream run in fp32 "
                      f"(~{rng(b2, 'c.fp32_activation_traffic', 2)} ms more) in a {rng(b2, 'step', 1)} ms request on an "
                      f"H200. Convert the model to bf16 once at load (bf16 inputs, no autocast): ~{rng(b2, 'after', 1)} ms "
                      f"per request ({rng(b2, 'share.autocast_weight_cast', 0)} %, high). The GEMMs themselves are fine.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q9["anchor"] + " with ANCHOR = the score head's GEMV or the "
                     "sigmoid (once per request), C = 1, WARM = 3", "expect_ms": r2(b["step"])},
                    {"what": "kernels", "query": Q9["kernels"] + " (divide by the requests)",
                     "expect": f"{2 * L} large cast/copy kernels per request of ~{b['c.weight_casts_fp32_to_bf16'][0] / (2 * L):.2f}"
                               f"-{b['c.weight_casts_fp32_to_bf16'][1] / (2 * L):.2f} ms each (268 MB fp32 -> 134 MB bf16), "
                               f"{2 * L} bf16 GEMMs, fp32 LayerNorm kernels"}]
    m["new_cause"] = {"name": "autocast_weight_cast", "why": "fp32 weights served under an autocast context opened per "
                      "call: every weight is re-cast to bf16 on every forward (and the activations between GEMMs stay "
                      "fp32), memory traffic that a one-time conversion removes"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- anomaly_fit (anomaly_detection; no NVTX) ------------------------------------------------------------------
    R, di, d, h, L, O = (AN[k] for k in ("rows", "d_in", "d", "hidden", "blocks", "d_out"))
    ops, nodes, checks = an_counts()
    args = ["--rows", R, "--d-in", di, "--d-model", d, "--hidden", h, "--blocks", L, "--d-out", O]
    b, b2, keys = ev(m_anom)
    m = base("anomaly_fit", "anomaly_fit.py", "planted", args, nvtx=False, steps=AN["steps"], est=50)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused",
                     host_sync=f"anomaly mode: one isnan / any / .item() check per gradient a backward node returns "
                               f"({checks} per step); event sync on the previous step")
    m["uses"]["anomaly_detection"] = "torch.autograd.set_detect_anomaly(True) for the whole run"
    m["techniques"] = techniques(
        "switch autograd anomaly detection off for training (torch.autograd.set_detect_anomaly(False), or use "
        "torch.autograd.detect_anomaly() only around a step being debugged); to catch NaNs cheaply check the loss or the "
        "gradient norm on the GPU every N steps",
        ["CUDA graphs as the top fix (the GPU waits on host syncs and host-side stack captures, not on launches)",
         "bf16 (already)", "fused optimizer (already)", "TF32 (no fp32 GEMMs)",
         "flash/fused attention (no attention in this run)", "pinned memory / data loading (batches resident on the GPU)",
         "faster GEMMs / kernel tuning", "removing .item() calls from the training loop (the loop has none; the reads "
                                          "come from the autograd engine)"])
    m["planted"] = [planted(
        "anomaly_detection", {"device": "GPU 0", "region": f"every iteration (no NVTX): a forward issued slowly (long CPU "
                              f"gaps between its kernels), then a backward in which each node's kernels are followed by an "
                              f"isnan and an any-reduction kernel, a 1-byte device-to-host memcpy and a "
                              f"cudaStreamSynchronize ({checks} per iteration)"},
        "set_detect_anomaly off (--fixed; not captured)", b, "rm.anomaly_detection", "share.anomaly_detection",
        f"Anomaly mode left on: every one of the {nodes} autograd nodes the forward creates records the Python stack "
        f"(traceback.extract_stack + format, 40-250 µs each), so the forward's {ops} ops take "
        f"{rng(b, 'fwd_host_ms')} ms of host time for {rng(b, 'forward_gpu_ms', 2)} ms of GPU work; in the backward the "
        f"engine checks each of the {checks} gradients the nodes return with isnan(...)._is_any_true().item(): a "
        f"synchronization per check (30-120 µs of host, copy and wake-up during which the GPU idles: "
        f"{rng(b, 'c.nan_check_syncs')} ms) plus the checks' own kernels reading every gradient "
        f"({rng(b, 'c.nan_check_kernels')} ms). The GPU's own step: GEMMs 6 x {R} x {b['params_m'][0]:.1f} M at 550-800, "
        f"LayerNorm / GELU / residual, fused AdamW: {rng(b, 'after')} ms, GPU-bound without anomaly mode (host "
        f"{ops + AN_OTHER_OPS} ops at 20-70 µs + {nodes} backward nodes at 10-30 µs). Step {rng(b, 'step')} ms, the GPU idle "
        f"{rng(b, 'gpu_idle_share', 0)} % of it: removed {rng(b, 'rm.anomaly_detection')} ms = "
        f"{rng(b, 'share.anomaly_detection', 1)} % -> critical (H200: {rng(b2, 'share.anomaly_detection', 1)} %). The band "
        "is wide because the stack capture's and a check's host costs are known only to a factor of 4-6. New cause "
        "name: anomaly_detection.",
        accept=["anomaly_detection", "host_sync", "host_bound"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual kernels (memory-bound, bf16)", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a 77 M-parameter residual MLP regressor (4 pre-LN blocks, d 1536, bf16 weights, fused AdamW) "
                     "on one H200 with 4096 rows per step. The GPU is idle most of the time and a step takes several "
                     "times longer than the model's FLOPs suggest. What is holding it back?")
    m["diagnosis"] = (f"Autograd anomaly detection is on (torch.autograd.set_detect_anomaly(True)). In the backward the "
                      f"engine checks every gradient a node returns for NaNs with isnan + any + .item(): {checks} tiny "
                      f"device-to-host copies and cudaStreamSynchronize calls per iteration, each leaving the GPU idle "
                      f"(~{rng(b2, 'c.nan_check_syncs', 1)} ms), and in the forward every autograd node records a Python "
                      f"stack trace, so the forward is issued at host speed ({rng(b2, 'fwd_host_ms', 1)} ms for "
                      f"~{rng(b2, 'forward_gpu_ms', 1)} ms of GPU work). A step is {rng(b2, 'step', 1)} ms on an H200 with the "
                      f"GPU idle ~{rng(b2, 'gpu_idle_share', 0)} % of it. Turn anomaly detection off (use it only around a "
                      f"step being debugged): ~{rng(b2, 'after', 1)} ms per step, GPU-bound "
                      f"({rng(b2, 'share.anomaly_detection', 0)} %, critical). The loop itself has no .item(); the GEMMs and "
                      "fused AdamW are fine.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q9["anchor"] + " with ANCHOR = the fused AdamW kernel (once per "
                     "step), C = 1, WARM = 3", "expect_ms": r2(b["step"])},
                    {"what": "syncs and copies", "query": Q9["memcpy"],
                     "expect": f"{checks} device-to-host copies of 1 byte per step, each with a cudaStreamSynchronize, "
                               "between the backward's kernels"},
                    {"what": "idle split", "query": Q9["starved"] + " over one step",
                     "expect": f"the GPU idle {rng(b, 'gpu_idle_share', 0)} % of the step: long gaps in the forward, "
                               f"{checks} short gaps in the backward"}]
    m["new_cause"] = {"name": "anomaly_detection", "why": "autograd anomaly mode left on in training: a Python stack "
                      "capture for every autograd node in the forward and a NaN check with a host read after every "
                      "backward node; host_sync / host_bound accepted with the right fix (anomaly detection off)"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- onehot_tagger (onehot_matmul) and onehot_tagger.fixed -----------------------------------------------------
    B, S, V, d, H, L, Kt = (OH[k] for k in ("batch", "seq", "vocab", "d", "heads", "blocks", "tags"))
    Tk = B * S
    args = ["--batch", B, "--seq", S, "--vocab", V, "--d-model", d, "--heads", H, "--blocks", L, "--tags", Kt]
    b, b2, keys = ev(m_oh)
    bf, bf2, keys_f = ev(lambda r: m_oh(r, fixed=True))
    m = base("onehot_tagger", "onehot_tagger.py", "planted", args, steps=OH["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", attention=True,
                     sequences=f"{B} sequences of {S} tokens, equal lengths (no padding)",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["attention"] = "F.scaled_dot_product_attention, non-causal (flash), 16 heads of 64"
    m["uses"]["embedding"] = f"one-hot product F.one_hot(ids, {V}).to(bf16) @ E ({V} x {d} parameter)"
    m["techniques"] = techniques(
        "replace the one-hot product with an index lookup: nn.Embedding / F.embedding(ids, E) (a gather of 8192 rows, "
        "its backward a sort and scatter-add), which removes the 2.1 GB one-hot build, its cast and both 0.54 TFLOP GEMMs",
        ["CUDA graphs / launch overhead (GPU-bound)", "bf16 (already)", "fused optimizer (already)",
         "TF32 (no fp32 GEMMs)", "flash/fused attention as the fix (already SDPA flash)",
         "FP8 / faster GEMMs for the one-hot product (the product itself is the waste)",
         "sequence packing / padding removal (equal lengths, no padding)",
         "pinned memory / data loading (batches resident on the GPU)", "sparse gradients / SparseAdam as the top fix"])
    m["planted"] = [planted(
        "onehot_matmul", {"device": "GPU 0", "region": f"step_N > forward: an int64 fill of {Tk} x {V} (2.1 GB), a cast "
                          f"to bf16 and a {Tk} x {V} x {d} GEMM before the first block; step_N > backward: a {V} x {Tk} x "
                          f"{d} GEMM for the table's gradient"},
        "F.embedding(ids, E) (--fixed, captured as onehot_tagger.fixed)", b, "rm.onehot_matmul", "share.onehot_matmul",
        f"{oh_params() / 1e6:.0f} M bf16 parameters, {Tk} tokens per step. The embedding is a one-hot product: "
        f"F.one_hot writes an int64 {Tk} x {V} matrix (zero-fill 8 B per element) and .to(bf16) reads and writes it again "
        f"(10 B): {b['onehot_gb'][0]:.1f} GB = {rng(b, 'c.onehot_build_and_cast')} ms; the product 2 x {Tk} x {V} x {d} = "
        f"{2.0 * Tk * V * d / 1e12:.2f} TFLOP at 550-800 = {rng(b, 'c.onehot_gemm_forward')} ms, and the same again for "
        f"the table's gradient in the backward ({rng(b, 'c.onehot_gemm_table_grad')} ms). The rest of the step: "
        f"linear GEMMs 72 x {Tk} x {d}^2 per block = {L * 72.0 * Tk * d * d / 1e12:.2f} TFLOP ({rng(b, 'c.linear_gemm_bf16')} "
        f"ms), flash attention 14 x B x S^2 x d per block at 200-450 ({rng(b, 'c.attention_flash')} ms), LayerNorm / "
        f"GELU / residual / copies 112 B per token x d per block ({rng(b, 'c.layernorm_gelu_residual_copies')} ms), fused "
        f"AdamW {rng(b, 'c.adamw_fused_bf16')} ms. Step {rng(b, 'step')} ms (GPU-bound: {rng(b, 'host_ms')} ms of host "
        f"ops); with F.embedding (a gather, a sort and scatter-add backward) {rng(b, 'after')} ms: removed "
        f"{rng(b, 'rm.onehot_matmul')} ms = {rng(b, 'share.onehot_matmul', 1)} % -> high (H200: "
        f"{rng(b2, 'share.onehot_matmul', 1)} %). New cause name: onehot_matmul.",
        accept=["onehot_matmul", "wasted_compute", "elementwise_unfused"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / head-merge copies of the blocks (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expect_quiet"] = False
    m["question"] = ("Here are two profiles of our token-tagging encoder on an H200 (32000-token vocabulary, 4 transformer "
                     "blocks of d 1024 with SDPA attention, 17 tags, 16 x 512 tokens per step, bf16 weights, fused AdamW), "
                     "before and after we rewrote the token-embedding layer. How much did the change buy per step, why, "
                     "and what bounds the step now?")
    m["diagnosis"] = (f"Before: the embedding was a one-hot matrix product, F.one_hot(ids, {V}).to(bf16) @ E: each step "
                      f"built an 8192 x 32000 int64 one-hot (2.1 GB fill) and cast it to bf16 "
                      f"(~{rng(b2, 'c.onehot_build_and_cast', 1)} ms on an H200), ran an 8192 x 32000 x 1024 GEMM in the "
                      f"forward and another for the table's gradient (~{rng(b2, 'onehot_gemm_ms', 1)} ms together): "
                      f"{rng(b2, 'step', 1)} ms per step. After: an F.embedding gather (and a sort / scatter-add backward): "
                      f"{rng(bf2, 'step', 1)} ms; the change removed {rng(b2, 'share.onehot_matmul', 0)} % of the step "
                      f"(high). Now the step is GPU-bound and healthy: the blocks' bf16 GEMMs ~{rng(bf2, 'gemm_share', 0)} "
                      f"%, flash attention ~{rng(bf2, 'attn_share', 0)} %, LayerNorm / GELU / residual kernels "
                      f"~{rng(bf2, 'ew_share', 0)} %, fused AdamW ~{rng(bf2, 'adam_share', 0)} %; nothing planted remains.")
    m["measure"] = [{"what": "step period", "query": Q9["step"], "expect_ms": r2(b["step"])},
                    {"what": "kernels", "query": Q9["kernels"] + " (divide by the steps)",
                     "expect": f"a fill of 2.1 GB and a cast kernel in the forward range, two GEMMs with a 32000 dimension "
                               f"({rng(b, 'onehot_gemm_ms', 2)} ms together); none of them in the fixed export"}]
    m["new_cause"] = {"name": "onehot_matmul", "why": "an embedding lookup written as a one-hot matrix times the table: a "
                      "tokens x vocabulary one-hot built and cast every step and two dense GEMMs over the vocabulary where "
                      "a gather and a scatter-add suffice; fixed by nn.Embedding / F.embedding"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="onehot_tagger.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("onehot_tagger.fixed", "onehot_tagger.py", "fixed", args + ["--fixed"], steps=OH["steps"], est=40)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", attention=True,
                     sequences=f"{B} sequences of {S} tokens, equal lengths (no padding)",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["attention"] = "F.scaled_dot_product_attention, non-causal (flash), 16 heads of 64"
    m["uses"]["embedding"] = f"F.embedding(ids, E) ({V} x {d} parameter, dense gradient)"
    m["techniques"] = techniques(None, ["an index lookup for the embedding (already)", "bf16 (already)",
                                        "fused optimizer (already)", "TF32 (no fp32 GEMMs)",
                                        "CUDA graphs (GPU-bound: ~150-200 launches per 5-7 ms step)",
                                        "flash/fused attention (already SDPA flash)",
                                        "sequence packing (equal lengths, no padding)",
                                        "sparse gradients / SparseAdam"])
    m["planted"] = []
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / head-merge copies of the blocks (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "high"}]
    m["expect_quiet"] = True
    m["question"] = "We now use an embedding lookup. Is anything still holding the step back?"
    m["diagnosis"] = (f"Nothing planted: a step is ~{rng(b2, 'step', 1)} ms on an H200, ~{rng(b2, 'gemm_share', 0)} % of it "
                      f"the blocks' bf16 GEMMs, flash attention ~{rng(b2, 'attn_share', 0)} %, LayerNorm / GELU / residual "
                      f"kernels ~{rng(b2, 'ew_share', 0)} % (fusing them would be the next, smaller gain), fused AdamW "
                      f"~{rng(b2, 'adam_share', 0)} %; the host a step ahead.")
    m["measure"] = [{"what": "step period", "query": Q9["step"], "expect_ms": r2(b["step"])},
                    {"what": "kernels", "query": Q9["kernels"] + " (divide by the steps)",
                     "expect": "no GEMM with a 32000 dimension, one embedding gather and an embedding-backward kernel group "
                               "(sort, segment sums) per step"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- category_mlp (zero_grad_inplace) -------------------------------------------------------------------------
    R, dims = CM["rows"], CM["dims"]
    P = float(mlp_params(dims))
    n_w = len(dims) - 1
    args = ["--rows", R, "--dims", ",".join(map(str, dims))]
    b, b2, keys = ev(m_cm)
    m = base("category_mlp", "category_mlp.py", "planted", args, steps=CM["steps"], est=40)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["zero_grad"] = "opt.zero_grad(set_to_none=False): gradients zeroed in place every step"
    m["techniques"] = techniques(
        "set the gradients to None instead of zeroing them: opt.zero_grad(set_to_none=True) (the default since PyTorch "
        "2.0) or model.zero_grad(set_to_none=True), so no zero-fill runs and the backward hands each new gradient over as "
        ".grad instead of adding it into a zeroed buffer",
        ["CUDA graphs / launch overhead (GPU-bound)", "bf16 (already)", "fused optimizer (already)",
         "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (batches resident on the GPU)", "faster GEMMs / kernel tuning",
         "a larger batch as the top fix", "gradient accumulation / checkpointing"])
    m["planted"] = [planted(
        "zero_grad_inplace", {"device": "GPU 0", "region": f"step_N > optimizer: a multi-tensor zero-fill over every "
                              f"gradient after the fused AdamW kernel; step_N > backward: an elementwise add after each of "
                              f"the {n_w} weight-gradient GEMMs (AccumulateGrad into the existing .grad)"},
        "opt.zero_grad(set_to_none=True) (--fixed; not captured)", b, "rm.zero_grad_inplace", "share.zero_grad_inplace",
        f"{P / 1e6:.0f} M bf16 parameters, {R} rows. opt.zero_grad(set_to_none=False) keeps the .grad tensors and zeroes "
        f"them every step (_foreach_zero_: 2 B per parameter written, {rng(b, 'c.grad_zero_fill')} ms at 2.6-3.0 TB/s); "
        f"the backward then cannot hand each new weight gradient over as .grad and adds it into the zeroed buffer "
        f"(AccumulateGrad's in-place add, r2 r2 w2 = 6 B per parameter: {rng(b, 'c.grad_accumulate_add')} ms). The rest "
        f"of the step: GEMMs {mlp_train_flops(R, dims) / 1e12:.2f} TFLOP at 550-800 = {rng(b, 'c.gemm_bf16')} ms, fused "
        f"AdamW (14 B per bf16 parameter) {rng(b, 'c.adamw_fused_bf16')} ms, GELU / fp32 cross-entropy "
        f"{b['c.gelu_bf16'][0] + b['c.cross_entropy_fp32'][0]:.2f}-{b['c.gelu_bf16'][1] + b['c.cross_entropy_fp32'][1]:.2f} "
        f"ms. Step {rng(b, 'step')} ms (GPU-bound: {rng(b, 'host_ms')} ms of host ops); with set_to_none=True "
        f"{rng(b, 'after')} ms: removed {rng(b, 'rm.zero_grad_inplace', 3)} ms = {rng(b, 'share.zero_grad_inplace', 1)} % "
        f"-> medium (H200: {rng(b2, 'share.zero_grad_inplace', 1)} %). New cause name: zero_grad_inplace.",
        accept=["zero_grad_inplace", "redundant_pass", "elementwise_unfused"], b2=b2)]
    m["tolerated"] = [{"what": "GELU / cross-entropy kernels (memory-bound)", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a 323 M-parameter MLP classifier (2560 -> 8192 x 5 -> 4096 categories, bf16 weights, fused "
                     "AdamW) on one H200 with 2048 rows per step. The matmuls look efficient. Is there any overhead in the "
                     "step worth removing?")
    m["diagnosis"] = (f"Yes, a modest one: the gradients are zeroed in place (zero_grad(set_to_none=False)). Every step a "
                      f"multi-tensor zero-fill writes all {P / 1e6:.0f} M bf16 gradients after AdamW "
                      f"(~{rng(b2, 'c.grad_zero_fill', 2)} ms), and in the backward each weight gradient is added into the "
                      f"zeroed .grad by an extra elementwise kernel after its GEMM (~{rng(b2, 'c.grad_accumulate_add', 2)} "
                      f"ms), in a {rng(b2, 'step', 1)} ms step on an H200. Set the gradients to None "
                      f"(zero_grad(set_to_none=True), the default): ~{rng(b2, 'after', 1)} ms per step "
                      f"({rng(b2, 'share.zero_grad_inplace', 0)} %, medium). The GEMMs (~{rng(b2, 'gemm_share', 0)} %) and "
                      f"the fused AdamW (~{rng(b2, 'adam_share', 0)} %) are fine.")
    m["measure"] = [{"what": "step period", "query": Q9["step"], "expect_ms": r2(b["step"])},
                    {"what": "kernels", "query": Q9["kernels"] + " (divide by the steps)",
                     "expect": f"a multi-tensor zero kernel group ({rng(b, 'c.grad_zero_fill', 2)} ms) in the optimizer "
                               f"range and {n_w} elementwise adds over the weight gradients "
                               f"({rng(b, 'c.grad_accumulate_add', 2)} ms together) in the backward range per step"}]
    m["new_cause"] = {"name": "zero_grad_inplace", "why": "gradients zeroed in place every step (zero_grad(set_to_none="
                      "False) or p.grad.zero_()) instead of set to None: a zero-fill pass over every gradient plus an "
                      "accumulate-add per parameter in the backward instead of handing the new gradient over; fixed by "
                      "set_to_none=True"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.table)
