#!/usr/bin/env python3
"""First-principles truth for the eighth held-out set (heldout8): writes heldout8/manifests/<case>.json from FLOPs,
bytes, call counts and rate bands alone (no capture, no aisp output), with the helpers of ../derive.py.

    python3 workloads/planted/heldout8/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout8/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout8/derive.py --table    # the README table only

Method: as ../derive.py and heldout7/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or calls x a host cost per call; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the device where the
problem sits; severity: info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical. New bands (each with its
source in the manifests' `rates`): the kernels one EmbeddingBag forward + backward launches and the host cost of its
backward node, the DRAM bytes of an embedding-bag forward + backward per looked-up row, the bytes per bf16 gradient of
DDP's bucket copies and averaging, the rate of a causal flash-attention forward and the elementwise bytes of a pre-LN
decoder block's forward; four bands of heldout4-7 are copied with their sources so that this set depends on no other
held-out set.
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
ADAM_B, AMP_B, GB, Q, LOSS_B = D.ADAM_B, D.AMP_B, D.GB, D.Q, D.LOSS_B
mlp_params, mlp_train_flops, gelu_train_bytes = D.mlp_params, D.mlp_train_flops, D.gelu_train_bytes
pct, planted, r2, rng, techniques, uses = D.pct, D.planted, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link

SET = "heldout8"

# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; counts as named.
NEW_H100 = {
    # copied from heldout4-7 (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    "eager_op_us": (20.0, 70.0),
    "tiny_kernel_us": (2.0, 6.0),
    # new here
    "emb_kernels_per_table": (18.0, 30.0),
    "emb_bwd_host_us": (100.0, 400.0),
    "emb_bytes_x": (2.5, 4.0),
    "ddp_bf16_bucket_b": (8.0, 12.0),
    "attn_fwd_tflops": (300.0, 550.0),
    "dec_ew_tokd_bytes": (34.0, 50.0),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 1024 (or a varying M): below the 8192^3 rate (732-787 measured) as "
                       "tiles and waves shrink and the epilogue's writes weigh more; an assumption widened down to 550 "
                       "(heldout2-7). Used for every GEMM whose smallest dimension is <= 2048",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: torch "
                     "busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (quoted by heldout2/derive.py); band 200-300 "
                     "(heldout3-7)",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing: 29-36 µs "
                   "measured (quoted by ../derive.py), ~70 implied by heldout2; band 20-70 (heldout3-7)",
    "tiny_kernel_us": "GPU time of one tiny kernel (a GELU or add over 16-32 k elements, a 16384 x 1 GEMV, a sigmoid, a 1-"
                      "element copy) in a chain of dependent kernels, including the launch latency to the next one when the "
                      "host is ahead: 2-6 µs (assumption of heldout7; ~2-3 µs kernels plus ~1-2 µs gaps in traces of eager "
                      "loops)",
    "emb_kernels_per_table": "count, not a rate: CUDA kernels of one nn.EmbeddingBag (mode sum, 2-D input) forward and "
                             "backward: forward 3-5 (offsets arange, zero-fills of the bag bookkeeping, the gather-sum "
                             "kernel), backward 15-25 (the grad zero-fill, a cub radix sort of the ids in 2 passes with its "
                             "histogram / scan / onesweep kernels, segment offsets and counts with scans, partial sums per "
                             "segment, the scatter into the weight gradient); band 18-30 (assumption from ATen's "
                             "EmbeddingBag.cu / EmbeddingBackwardKernel.cu)",
    "emb_bwd_host_us": "host cost of one EmbeddingBagBackward node run by the autograd engine: 15-25 kernel launches at "
                       "4-10 µs each under CUPTI, several caching-allocator calls and the dispatcher; 100-400 µs (assumption; "
                       "more if the build reads a segment count back to the host)",
    "emb_bytes_x": "DRAM bytes of an embedding-bag forward + backward per looked-up row, as a multiple of the row's size: "
                   "forward reads the row (1x), backward reads the pooled gradient per id, sums per unique row and writes "
                   "the weight gradient, plus the sort's keys and values (1.5-3x); the 26 tables (27 MB) partly stay in "
                   "the 50 MB L2, which lowers the DRAM traffic: band 2.5-4 (assumption)",
    "ddp_bf16_bucket_b": "bytes per bf16 gradient of DDP's default reducer, per all-reduce: the copy into the flat bucket "
                         "(r2 w2), the division by the world size (r2 w2, unless fused into the copy) and the copy back "
                         "into .grad (r2 w2): 8-12 (../derive.py's DDP_B = 16 for fp32 gradients, halved, plus the division)",
    "attn_fwd_tflops": "F.scaled_dot_product_attention forward only, causal, bf16, head dim 128, 1024 tokens per sequence, "
                       "counted as 2 * B * S^2 * d FLOPs (QK^T and PV, half the square): the flash kernel reaches 350-550 "
                       "on H100 at this length; band 300-550 (assumption)",
    "dec_ew_tokd_bytes": "elementwise bytes per token x d_model of a pre-LN decoder block's forward (inference, bf16): two "
                         "LayerNorms (r2 w2 each), the head-merge copy of the attention output (r2 w2), two residual adds "
                         "(r2 r2 w2 each), GELU over 4d (r2 w2 on 4 d); bias adds fused into the GEMMs: 4 + 4 + 4 + 12 + "
                         "16 = 40; band 34-50 (assumption)",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q8 = dict(Q)
Q8.update({
    "nvtx_ranges": "sql/nvtx_range_ms.sql: CPU duration of each NVTX range name (count, mean, min, max)",
    "starved": "sql/launch_starved_idle.sql: GPU idle split into gaps whose next kernel had not been launched yet "
               "(the GPU waits for the host) and other gaps, between T0 and T1",
})


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


# ---------------------------------------------------------------------------------------------------
# DDP on 2 ranks: a timeline of the backward with DDP's buckets (as heldout4-7).
FIRST_BUCKET = float(1 << 20)
BUCKET = 25.0 * (1 << 20)


def ddp_timeline(r, nodes):
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
# The cases.

# emb_loop: 26 EmbeddingBag tables 4096 x 64 (sum, 8 ids per bag), dense 256 -> 64, top MLP 1728 -> 4096 -> 4096 -> 1
# (biases, GELU, bf16 autocast, fp32 params), 8192 rows, fused AdamW; one EmbeddingBag call per table unless fixed.
EL = dict(rows=8192, tables=26, table_rows=4096, dim=64, bag=8, dense=256, hidden=4096, steps=25)
EL_FWD_OPS = 3     # per table: the slice, F.embedding_bag's arange + reshape of the 2-D ids, the op
EL_DENSE_OPS = 18  # cat, bottom, top (5 modules), squeeze, float, loss, backward call, opt.step, zero_grad, loss copy, event ...


def el_params():
    B, T, V, Dm, dn, h = EL["rows"], EL["tables"], EL["table_rows"], EL["dim"], EL["dense"], EL["hidden"]
    p_emb = float(T * V * Dm)
    p_dense = float(dn * Dm + Dm + (T + 1) * Dm * h + h + h * h + h + h + 1)
    return p_emb, p_dense


def m_emb(r, fixed=False):
    B, T, V, Dm, bag, dn, h = (EL[k] for k in ("rows", "tables", "table_rows", "dim", "bag", "dense", "hidden"))
    hbm, mid = r["hbm_tbs"], r["bf16_mid_tflops"]
    p_emb, p_dense = el_params()
    zin = (T + 1) * Dm
    flops = 3 * 2.0 * B * (zin * h + h * h + h) + 2 * 2.0 * B * dn * Dm  # top: fwd + both grads; bottom: fwd + wgrad
    lookups = float(B * T * bag)
    emb_bytes = lookups * Dm * 4 * r["emb_bytes_x"]
    c = {"dense_gemm_bf16": t_flops(flops, mid),
         # 2 GELUs over B x h in bf16 (fwd r2 w2, bwd r2 r2 w2), the fp32 concat and its cast, the loss
         "gelu_cat_casts_loss": t_bytes(2 * 10.0 * B * h + 24.0 * B * zin + 64.0 * B, hbm),
         "amp_weight_casts": t_bytes(AMP_B * p_dense, hbm),
         "adamw_fused": t_bytes(ADAM_B[4] * (p_emb + p_dense), hbm)}
    k = r["emb_kernels_per_table"]
    op = r["eager_op_us"] / 1e3
    if fixed:
        c["embedding_bag_one_call"] = t_bytes(emb_bytes, hbm) + k * r["tiny_kernel_us"] / 1e3
        host = (EL_DENSE_OPS + EL_FWD_OPS + 1) * op + r["emb_bwd_host_us"] / 1e3
    else:
        # 26 calls: the same bytes, but each table's ~20 kernels are tiny (a floor of 2-6 µs each)
        c["embedding_bag_26_calls"] = max(t_bytes(emb_bytes, hbm), T * k * r["tiny_kernel_us"] / 1e3)
        host = (EL_DENSE_OPS + EL_FWD_OPS * T) * op + T * r["emb_bwd_host_us"] / 1e3
    gpu = sum(c.values())
    step = max(gpu, host)
    if step > gpu:
        c["gpu_idle_waiting_for_host"] = step - gpu
    out = {"c": c, "step": step, "gpu_busy_ms": gpu, "host_ms": host, "host_margin_ms": host - gpu,
           "gemm_share": pct(c["dense_gemm_bf16"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None,
                    "emb_share": pct(c["embedding_bag_one_call"], step), "adam_share": pct(c["adamw_fused"], step)})
        return out
    after = m_emb(r, fixed=True)["step"]
    rm = {"per_table_loop": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after,
                "bwd_host_ms": T * r["emb_bwd_host_us"] / 1e3, "idle_share": pct(step - gpu, step)})
    return out


# accum_ddp: 6 bias-free bf16 Linear 4096 -> 4096 (GELU), DDP on 2 ranks, 4 micro-batches of 1024 rows per rank and
# step, fused AdamW; an all-reduce of all gradients after every micro-batch unless fixed (no_sync for the first 3).
AD = dict(rows=1024, accum=4, width=4096, layers=6, steps=20)


def m_accum(r, fixed=False):
    R, A, W, L = AD["rows"], AD["accum"], AD["width"], AD["layers"]
    hbm, mid = r["hbm_tbs"], r["bf16_mid_tflops"]
    P = float(L * W * W)
    g = t_flops(2.0 * R * W * W, mid)
    fwd = L * g + t_bytes((L - 1) * 4.0 * R * W + LOSS_B * R * W, hbm)
    # backward, last layer first: input and weight gradients (the first layer's input needs none), GELU backward
    nodes = []
    for i in reversed(range(L)):
        ms = (2 * g if i > 0 else g) + (t_bytes(6.0 * R * W, hbm) if i < L - 1 else 0.0)
        nodes.append((ms, 2.0 * W * W))
    bwd, left, total, nb = ddp_timeline(r, nodes)
    comm = {"allreduce_left_after_backward": left,
            "ddp_bucket_copies_and_average": t_bytes(r["ddp_bf16_bucket_b"] * P, hbm),
            "overlap_slowdown": r["overlap_penalty"] * (total - left)}
    per_comm = sum(comm.values())
    n_comm = 1 if fixed else A
    c = {"forward": A * fwd, "backward": A * bwd,
         "grad_accumulate": t_bytes(6.0 * P * (A - 1), hbm),  # AccumulateGrad adds into .grad (r2 r2 w2) after micro 1
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    for k, v in comm.items():
        c[k] = n_comm * v
    step = sum(c.values())
    out = {"c": c, "step": step, "buckets": nb, "allreduce_ms_per_micro": total, "bwd_per_micro": bwd,
           "comm_per_micro": per_comm, "params_m": P / 1e6}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_accum(r, fixed=True)["step"]
    rm = {"accumulation_allreduce": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after,
                "nccl_share": pct(A * total, step)})
    return out


# layer_timer: 24 residual blocks d 1024 -> 4096 -> 1024 (bias-free, pure bf16), 4096 rows, fused AdamW; forward
# pre-hook and hook on every block call torch.cuda.synchronize() unless fixed.
LT = dict(rows=4096, d=1024, hidden=4096, blocks=24, steps=25)
LT_BLOCK_OPS = 4       # fc1, gelu, fc2, add
LT_OTHER_OPS = 10      # float, sub, pow, mean, backward call, opt.step, zero_grad, loss copy, event record, batch pick


def m_timer(r, fixed=False):
    R, d, h, L = LT["rows"], LT["d"], LT["hidden"], LT["blocks"]
    hbm, mid = r["hbm_tbs"], r["bf16_mid_tflops"]
    P = float(L * 2 * d * h)
    gm = t_flops(2.0 * R * 2 * d * h, mid)
    t_add = t_bytes(6.0 * R * d, hbm)
    blk_f = gm + t_bytes(4.0 * R * h, hbm) + t_add
    blk_b = 2 * gm + t_bytes(6.0 * R * h + 6.0 * R * d, hbm)
    c = {"forward_blocks": L * blk_f, "loss": t_bytes(LOSS_B * R * d, hbm),
         "backward_blocks": L * blk_b - gm / 2,  # the first block's fc1 needs no input gradient
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    gpu = sum(c.values())
    op = r["eager_op_us"] / 1e3
    if fixed:
        host = (LT_BLOCK_OPS * L + LT_OTHER_OPS) * op
        step = max(gpu, host)
        if step > gpu:
            c["gpu_idle_waiting_for_host"] = step - gpu
        return {"c": c, "step": step, "gpu_busy_ms": gpu, "host_ms": host, "host_margin_ms": gpu - host,
                "gemm_share": pct(3 * L * gm - gm / 2, step), "rm": {}, "share": {}, "after": None}
    # every block: the pre-hook's synchronize drains the queue (the previous block, or the previous step's backward and
    # AdamW); the GPU then idles for the wake-up, the hook's Python and the first op (sync_gap); the host issues the
    # other 3 ops while fc1 runs; the post-hook waits for the block. One more gap after the last block (loss, backward).
    gap = r["sync_gap_us"] / 1e3
    c["gpu_idle_after_syncs"] = (L + 1) * gap
    c["forward_issue_shortfall"] = L * max(0.0, (LT_BLOCK_OPS - 1) * op + t_add - blk_f)
    step = sum(c.values())
    after = m_timer(r, fixed=True)["step"]
    rm = {"per_layer_sync": step - after}
    return {"c": c, "step": step, "gpu_busy_ms": gpu, "syncs": 2 * L, "block_fwd_ms": blk_f, "rm": rm,
            "share": shares(rm, step), "after": after, "idle_share": pct(step - gpu, step)}


# snap_rollback: bias-free MLP 2048 -> 8192 -> 8192 -> 8192 -> 2048 (fp32 params, bf16 autocast), 2048 rows, fused
# AdamW; parameters and both AdamW moments cloned (DtoD) before every optimizer step unless fixed.
SR = dict(rows=1024, dims=[2048, 8192, 8192, 8192, 2048], steps=25)
SR_HOST_OPS = 14 + 12  # the step's eager ops + 12 clones


def m_snap(r, fixed=False):
    R, dims = SR["rows"], SR["dims"]
    hbm = r["hbm_tbs"]
    P = float(mlp_params(dims))
    c = {"gemm_bf16": t_flops(mlp_train_flops(R, dims), r["bf16_mid_tflops"]),
         "gelu_bf16": t_bytes(gelu_train_bytes(R, dims, 2), hbm),
         "input_cast_loss": t_bytes(6.0 * R * dims[0] + LOSS_B * R * dims[-1], hbm),
         "amp_casts": t_bytes(AMP_B * P, hbm),
         "adamw_fused": t_bytes(ADAM_B[4] * P, hbm)}
    if not fixed:
        c["snapshot_dtod_copies"] = t_bytes(3 * 2 * 4.0 * P, hbm)  # params, exp_avg, exp_avg_sq: read 4 + write 4 each
    gpu = sum(c.values())
    host = SR_HOST_OPS * r["eager_op_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_idle_waiting_for_host"] = step - gpu
    out = {"c": c, "step": step, "gpu_busy_ms": gpu, "host_margin_ms": gpu - host, "params_m": P / 1e6,
           "snapshot_gb": 3 * 4.0 * P / 1e9, "gemm_share": pct(c["gemm_bf16"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_snap(r, fixed=True)["step"]
    rm = {"snapshot_copy": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after})
    return out


# full_logits: decoder prefill, 4 pre-LN blocks d 2048 (16 heads, MLP 4x, biases, bf16), LM head 2048 -> 65536, 8 x 1024
# tokens per step; head over all positions, logits upcast to fp32, only the last position used, unless fixed.
FL = dict(batch=8, seq=1024, d=2048, heads=16, blocks=4, vocab=128256, steps=20)
FL_HOST_OPS = 17 * FL["blocks"] + 10


def fl_params():
    d, L, V = FL["d"], FL["blocks"], FL["vocab"]
    return float(2 * V * d + L * (12 * d * d + 13 * d) + 2 * d)


def m_logits(r, fixed=False):
    B, S, d, L, V = FL["batch"], FL["seq"], FL["d"], FL["blocks"], FL["vocab"]
    hbm, mid = r["hbm_tbs"], r["bf16_mid_tflops"]
    T = float(B * S)
    c = {"trunk_gemm_bf16": t_flops(L * 24.0 * T * d * d, mid),
         "attention_flash_fwd": t_flops(L * 2.0 * B * S * S * d, r["attn_fwd_tflops"]),
         "trunk_elementwise": t_bytes(L * r["dec_ew_tokd_bytes"] * T * d + 4.0 * T * d, hbm)}  # + the embedding gather
    rows = B if fixed else T
    c["final_norm"] = t_bytes(4.0 * rows * d, hbm)
    if fixed:
        # 8 rows: a skinny GEMM that streams the 268 MB head weight once
        c["lm_head_last_position"] = t_bytes(2.0 * d * V, hbm) + t_flops(2.0 * B * d * V, mid)
        c["logits_float_argmax"] = t_bytes(10.0 * B * V, hbm) + 3 * r["tiny_kernel_us"] / 1e3
    else:
        c["lm_head_all_positions"] = t_flops(2.0 * T * d * V, mid)
        # bf16 logits written (2), read by .float() (2), fp32 written (4); argmax over the last position
        c["logits_write_and_float"] = t_bytes(8.0 * T * V, hbm)
        c["argmax_last"] = t_bytes(4.0 * B * V, hbm) + 2 * r["tiny_kernel_us"] / 1e3
    gpu = sum(c.values())
    host = FL_HOST_OPS * r["eager_op_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_idle_waiting_for_host"] = step - gpu
    out = {"c": c, "step": step, "gpu_busy_ms": gpu, "host_ms": host, "host_margin_ms": gpu - host,
           "trunk_share": pct(c["trunk_gemm_bf16"] + c["attention_flash_fwd"] + c["trunk_elementwise"], step),
           "logits_gb": 6.0 * T * V / 1e9}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_logits(r, fixed=True)["step"]
    rm = {"unused_logits": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after,
                "head_share": pct(c["lm_head_all_positions"], step),
                "logits_share": pct(c["logits_write_and_float"], step)})
    return out


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, ranks=1, nvtx=True, est=45, steps=25, warmup=3):
    return D.base(name, f"heldout8/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
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


def build():
    out = {}

    # ---- emb_loop (per_table_loop) and emb_loop.fixed --------------------------------------------------------------
    B, T, V, Dm, bag, dn, h = (EL[k] for k in ("rows", "tables", "table_rows", "dim", "bag", "dense", "hidden"))
    p_emb, p_dense = el_params()
    args = ["--rows", B, "--tables", T, "--table-rows", V, "--dim", Dm, "--bag", bag, "--dense", dn, "--hidden", h]
    b, b2, keys = ev(m_emb)
    bf, bf2, keys_f = ev(lambda r: m_emb(r, fixed=True))
    m = base("emb_loop", "emb_loop.py", "planted", args, steps=EL["steps"], est=45)
    m["uses"] = uses("bf16 autocast for the MLPs, fp32 parameters (embedding bags in fp32)", "AdamW fused",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["embeddings"] = f"{T} nn.EmbeddingBag tables ({V} x {Dm}, sum of {bag} ids), one call per table in a Python loop"
    m["techniques"] = techniques(
        "batch the embedding lookups: one concatenated table (or torchrec's EmbeddingBagCollection / FBGEMM's table-batched "
        "embedding) with each feature's ids offset by its table's first row, so the forward and the backward are one "
        "embedding-bag call each instead of 26",
        ["CUDA graphs as the top fix (the backward's 26 embedding-bag nodes are issued by the autograd engine; batching the "
         "tables removes the work itself)", "bf16 (already for the MLPs)", "fused optimizer (already)",
         "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (batches resident on the GPU)", "a larger embedding dimension or more GPUs",
         "sparse gradients / SparseAdam (every row of the small tables is touched each step)"])
    m["planted"] = [planted(
        "per_table_loop", {"device": "GPU 0", "region": f"step_N > forward: {T} embedding-bag forwards issued one by one; "
                           f"step_N > backward: {T} embedding-bag backwards (sort + segment-reduce, ~15-25 small kernels "
                           "each) with the GPU waiting for the host between them"},
        "one concatenated table, one EmbeddingBag call (--fixed, captured as emb_loop.fixed)", b, "rm.per_table_loop",
        "share.per_table_loop",
        f"{T} categorical features, each looked up with its own nn.EmbeddingBag in a Python loop: the forward issues "
        f"{EL_FWD_OPS * T} eager ops for them and the backward runs {T} EmbeddingBagBackward nodes, each launching ~15-25 kernels "
        f"(a radix sort of the ids, segment offsets, partial sums, the scatter) at 100-400 µs of host time: host "
        f"{rng(b, 'host_ms')} ms per step ({T} x 100-400 µs backward + {EL_DENSE_OPS + EL_FWD_OPS * T} eager ops at 20-70 µs). The "
        f"GPU's own step: top / bottom MLP GEMMs {(3 * 2.0 * B * ((T + 1) * Dm * h + h * h + h) + 4.0 * B * dn * Dm) / 1e12:.2f} "
        f"TFLOP at 550-800 = {rng(b, 'c.dense_gemm_bf16')} ms, GELU / concat / casts / loss {rng(b, 'c.gelu_cat_casts_loss')} "
        f"ms, fused AdamW over {(p_emb + p_dense) / 1e6:.1f} M fp32 parameters {rng(b, 'c.adamw_fused')} ms, the "
        f"embedding bags ({B * T * bag / 1e6:.2f} M rows of {Dm * 4} B looked up, 2.5-4x that in DRAM traffic, or {T} x "
        f"18-30 tiny kernels at 2-6 µs) {rng(b, 'c.embedding_bag_26_calls')} ms: {rng(b, 'gpu_busy_ms')} ms. Step "
        f"{rng(b, 'step')} ms (host-bound except at the lowest host corner); with one concatenated table "
        f"{rng(b, 'after')} ms (GPU-bound): removed {rng(b, 'rm.per_table_loop')} ms = {rng(b, 'share.per_table_loop', 1)} % "
        f"-> critical at the middle, high at the low corner (H200: {rng(b2, 'share.per_table_loop', 1)} %). The band is "
        "wide because the host cost of an embedding-bag backward node is known only to a factor of 4. New cause name: "
        "per_table_loop.",
        accept=["per_table_loop", "launch_bound", "host_bound"], b2=b2)]
    m["tolerated"] = [{"what": "GELU / concat / cast kernels of the MLPs (memory-bound, bf16)", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = (f"Here are two profiles of our click-through-rate model on an H200 ({T} categorical features with "
                     f"{V}-row embedding bags, 256 dense features, a 4096-wide top MLP, 8192 samples per step), before and "
                     "after we restructured the embedding lookups. How much did the change buy per step, why, and what "
                     "bounds the step now?")
    m["diagnosis"] = (f"Before: the {T} embedding tables were looked up one at a time in a Python loop, so each step ran "
                      f"{T} embedding-bag forwards and {T} embedding-bag backwards (a sort and a segmented reduction of "
                      f"~15-25 small kernels each); the host issuing them ({rng(b2, 'host_ms', 1)} ms) set the step "
                      f"({rng(b2, 'step', 1)} ms on an H200) and the GPU waited between tiny kernels. After: one "
                      f"concatenated table with offset ids, one call each way: {rng(bf2, 'step', 1)} ms, the change removed "
                      f"{rng(b2, 'share.per_table_loop', 0)} % of the step (critical at the middle of a wide band). Now "
                      f"the step is GPU-bound: the top MLP's bf16 GEMMs are {rng(bf2, 'gemm_share', 0)} % of it, the single "
                      f"embedding bag {rng(bf2, 'emb_share', 0)} %, fused AdamW {rng(bf2, 'adam_share', 0)} %; nothing "
                      "planted remains.")
    m["measure"] = [{"what": "step period", "query": Q8["step"], "expect_ms": r2(b["step"])},
                    {"what": "the backward", "query": Q8["nvtx_ranges"] + " (forward, backward)",
                     "expect": f"the backward range {rng(b, 'bwd_host_ms', 1)} ms of CPU time, {T} repetitions of the "
                               "embedding-bag backward kernel group (radix sort, segment kernels) per step"},
                    {"what": "idle split", "query": Q8["starved"] + " over one step",
                     "expect": f"{rng(b, 'c.gpu_idle_waiting_for_host', 1)} ms of launch-starved idle per step"}]
    m["new_cause"] = {"name": "per_table_loop", "why": "many small embedding tables looked up one at a time in a Python "
                      "loop: every table costs an embedding-bag forward and a multi-kernel backward of host time for "
                      "microseconds of GPU work; launch_bound / host_bound accepted; fixed by batching the tables (one "
                      "concatenated table with offsets, a table-batched embedding kernel)"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="emb_loop.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("emb_loop.fixed", "emb_loop.py", "fixed", args + ["--fixed"], steps=EL["steps"], est=40)
    m["uses"] = uses("bf16 autocast for the MLPs, fp32 parameters (embedding bags in fp32)", "AdamW fused",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["embeddings"] = f"one concatenated nn.EmbeddingBag ({T * V} x {Dm}), ids offset per feature, one call"
    m["techniques"] = techniques(None, ["batching the embedding tables (already)", "bf16 (already for the MLPs)",
                                        "fused optimizer (already)", "TF32 (no fp32 GEMMs)",
                                        "CUDA graphs (GPU-bound: a few dozen launches per 2-4 ms step)",
                                        "flash/fused attention (no attention in this run)",
                                        "sparse gradients / SparseAdam (every row is touched each step)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "GELU / concat / cast kernels of the MLPs", "cause": "elementwise_unfused",
                       "max_severity": "medium"}]
    m["expect_quiet"] = True
    m["question"] = "We now look the embeddings up in one call. Is anything still holding the step back?"
    m["diagnosis"] = (f"No: a step is ~{rng(b2, 'step', 1)} ms on an H200, {rng(b2, 'gemm_share', 0)} % of it the top MLP's "
                      f"bf16 GEMMs, the embedding bag {rng(b2, 'emb_share', 0)} %, fused AdamW {rng(b2, 'adam_share', 0)} %; "
                      "the host a step ahead. Nothing planted remains.")
    m["measure"] = [{"what": "step period", "query": Q8["step"], "expect_ms": r2(b["step"])},
                    {"what": "kernels", "query": Q8["kernels"] + " (divide by the steps)",
                     "expect": "one embedding-bag forward kernel group and one backward group per step, 6 top-MLP GEMMs "
                               "forward and backward, one fused AdamW kernel"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- accum_ddp (accumulation_allreduce) ------------------------------------------------------------------------
    R, A, W, L = AD["rows"], AD["accum"], AD["width"], AD["layers"]
    args = ["--micro-rows", R, "--accum", A, "--width", W, "--layers", L]
    b, b2, keys = ev(m_accum)
    m = base("accum_ddp", "accum_ddp.py", "planted", args, ranks=2, steps=AD["steps"], est=60)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", ddp=True,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["grad_accumulation"] = f"{A} micro-batches of {R} rows per rank, no no_sync(): DDP all-reduces after each"
    m["techniques"] = techniques(
        "wrap all but the last micro-batch's forward and backward in DDP's no_sync() context, so gradients accumulate "
        "locally and are all-reduced once per optimizer step (FSDP: no_sync / set_requires_gradient_sync(False))",
        ["NCCL / interconnect tuning or a faster link as the fix (the volume is 4x what is needed)",
         "larger DDP buckets or gradient_as_bucket_view as the top fix", "a straggler or slow rank (the ranks are equal)",
         "bf16 / fused optimizer (already)", "CUDA graphs / launch overhead", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (batches resident on the GPU)"])
    m["planted"] = [planted(
        "accumulation_allreduce", {"ranks": [0, 1], "region": f"step_N > micro_K > backward, every K: {L} NCCL all-reduce "
                                   "kernels (one per 33.5 MB bucket) and DDP's bucket copies, the last all-reduces after "
                                   "the backward's last GEMM"},
        "no_sync() for the first 3 micro-batches (--fixed; not captured)", b, "rm.accumulation_allreduce",
        "share.accumulation_allreduce",
        f"{b['params_m'][0]:.1f} M bf16 parameters, {A} micro-batches of {R} rows per rank and step. Per micro-batch: "
        f"forward {L} GEMMs of 2 x {R} x {W}^2 at 550-800 + GELU / loss = {rng(b, 'bwd_per_micro')} ms of backward (input and "
        f"weight gradients) and ~1/2 that forward; DDP all-reduces the {2 * W * W * L / 1e6:.0f} MB of gradients in {L} "
        f"buckets at 200-300 GB/s plus 15-40 µs each ({rng(b, 'allreduce_ms_per_micro')} ms, more than the backward it "
        f"overlaps), leaving {rng(b, 'c.allreduce_left_after_backward')} ms exposed over the {A} micro-batches; the "
        f"bucket copies and averaging (8-12 B per gradient) add {rng(b, 'c.ddp_bucket_copies_and_average')} ms and NCCL beside "
        f"the backward slows it by 0-15 % ({rng(b, 'c.overlap_slowdown')} ms). Step {rng(b, 'step')} ms; with no_sync() "
        f"for micro-batches 0-{A - 2} only one all-reduce per step: {rng(b, 'after')} ms: removed "
        f"{rng(b, 'rm.accumulation_allreduce')} ms = {rng(b, 'share.accumulation_allreduce', 1)} % -> high (H200: "
        f"{rng(b2, 'share.accumulation_allreduce', 1)} %). New cause name: accumulation_allreduce.",
        accept=["accumulation_allreduce", "exposed_communication"], b2=b2)]
    m["tolerated"] = [{"what": "the one all-reduce per step that remains after the fix (its exposed tail)",
                       "cause": "exposed_communication", "max_severity": "medium"},
                      {"what": "GELU / loss kernels", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a 101 M-parameter bf16 MLP tower (6 layers of 4096) with DDP on 2 H200s, accumulating "
                     "gradients over 4 micro-batches of 1024 rows per GPU before each AdamW step. NCCL shows up a lot in "
                     "the profile and scaling from one GPU is poor. What is going on, and what should we change?")
    m["diagnosis"] = (f"Every micro-batch's backward all-reduces the gradients: the loop calls loss.backward() on the DDP "
                      f"module without no_sync(), so each {rng(b2, 'step', 1)} ms step (H200) runs {A} x {L} NCCL all-reduces "
                      f"of 33.5 MB instead of {L}; per micro-batch the all-reduces outlast the backward they overlap and "
                      f"leave a tail, and DDP's bucket copies run {A} times. Wrap micro-batches 0-{A - 2} in net.no_sync(): "
                      f"~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.accumulation_allreduce', 0)} %, high). Both ranks "
                      "are equal (no straggler); the link is not slow, the volume is 4x what is needed.")
    m["measure"] = [{"what": "step period per rank", "query": Q8["step"] + " (both ranks)", "expect_ms": r2(b["step"])},
                    {"what": "NCCL kernels", "query": Q8["nccl"],
                     "expect": f"{A * L} all-reduce kernels per step and rank ({L} per micro_K range), ~0.13-0.21 ms each"},
                    {"what": "GPU split", "query": Q8["split"] + " over one step per rank",
                     "expect": f"NCCL-only time {rng(b, 'c.allreduce_left_after_backward', 1)} ms per step"}]
    m["new_cause"] = {"name": "accumulation_allreduce", "why": "gradient accumulation under DDP without no_sync(): the "
                      "gradients are all-reduced after every micro-batch instead of once per optimizer step, multiplying "
                      "the communication volume and its exposed tail by the accumulation count; exposed_communication "
                      "accepted with the right fix (no_sync)"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- layer_timer (per_layer_sync; no NVTX) ---------------------------------------------------------------------
    R, d, h, L = LT["rows"], LT["d"], LT["hidden"], LT["blocks"]
    args = ["--rows", R, "--d-model", d, "--hidden", h, "--blocks", L]
    b, b2, keys = ev(m_timer)
    m = base("layer_timer", "layer_timer.py", "planted", args, nvtx=False, steps=LT["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused",
                     host_sync=f"torch.cuda.synchronize() in a forward pre-hook and a forward hook of each of the {L} "
                               "blocks (per-layer timing); event sync on the previous step")
    m["techniques"] = techniques(
        "remove the per-layer timing hooks from the training loop (or time layers with CUDA events read once at the end, "
        "or profile a few steps with the PyTorch / Nsight profiler instead of synchronizing in every forward)",
        ["CUDA graphs as the top fix (the GPU idles at host syncs, not at kernel launches)", "bf16 (already)",
         "fused optimizer (already)", "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (batches resident on the GPU)", "activation checkpointing",
         "faster GEMMs / kernel tuning (the GEMMs run at tensor-core rate)"])
    m["planted"] = [planted(
        "per_layer_sync", {"device": "GPU 0", "region": f"every iteration (no NVTX): the forward's {L} blocks separated by "
                           f"gaps, {2 * L} cudaDeviceSynchronize calls per iteration in the CUDA API rows; the backward "
                           "and AdamW run without gaps"},
        "no timing hooks (--fixed; not captured)", b, "rm.per_layer_sync", "share.per_layer_sync",
        f"Forward pre-hooks and hooks call torch.cuda.synchronize() around each of the {L} blocks: the host waits for the "
        f"GPU {2 * L} times per step and the GPU idles after each of the {L + 1} drains for the wake-up, the hook's Python "
        f"and the first launch (50-300 µs: {rng(b, 'c.gpu_idle_after_syncs')} ms); within a block the host issues 3 more "
        f"ops at 20-70 µs while fc1 runs, which can outlast the block's {rng(b, 'block_fwd_ms', 3)} ms of GPU work "
        f"({rng(b, 'c.forward_issue_shortfall')} ms). The GPU's own step: {L} blocks of 2 GEMMs 2 x {R} x {d} x {h} at "
        f"550-800 (forward {rng(b, 'c.forward_blocks')} ms, backward {rng(b, 'c.backward_blocks')} ms with GELU / residual "
        f"kernels), fused AdamW over {2 * L * d * h / 1e6:.0f} M bf16 parameters {rng(b, 'c.adamw_fused_bf16')} ms: "
        f"{rng(b, 'gpu_busy_ms')} ms. Step {rng(b, 'step')} ms; without the hooks {rng(b, 'after')} ms (GPU-bound, the host "
        f"a step ahead): removed {rng(b, 'rm.per_layer_sync')} ms = {rng(b, 'share.per_layer_sync', 1)} % -> high at the "
        f"middle (H200: {rng(b2, 'share.per_layer_sync', 1)} %). New cause name: per_layer_sync.",
        accept=["per_layer_sync", "host_sync"], b2=b2)]
    m["tolerated"] = [{"what": "GELU / residual kernels (memory-bound, bf16)", "cause": "elementwise_unfused",
                       "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a 201 M-parameter bf16 residual MLP (24 blocks, d 1024 -> 4096, fused AdamW) on one H200 "
                     "with 4096 rows per step. The GPU never seems fully busy although the model is all large GEMMs. Where "
                     "is the time lost?")
    m["diagnosis"] = (f"In host synchronizations inside the forward: a per-layer timing hook calls "
                      f"torch.cuda.synchronize() before and after each of the {L} blocks ({2 * L} cudaDeviceSynchronize per "
                      f"iteration), so the host never runs ahead and the GPU idles after every block while the host wakes "
                      f"up and issues the next one: ~{rng(b2, 'c.gpu_idle_after_syncs', 1)} ms of gaps per "
                      f"{rng(b2, 'step', 1)} ms step on an H200. Remove the hooks (time with CUDA events read at the end, or "
                      f"use a profiler for a few steps): ~{rng(b2, 'after', 1)} ms per step "
                      f"({rng(b2, 'share.per_layer_sync', 0)} %, high at the middle). The GEMMs, the backward and AdamW are "
                      "fine.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q8["anchor"] + " with ANCHOR = the fused AdamW kernel (once per "
                     "step), C = 1, WARM = 3", "expect_ms": r2(b["step"])},
                    {"what": "idle split", "query": Q8["starved"] + " over one step",
                     "expect": f"{L + 1} gaps per step in the forward, {rng(b, 'c.gpu_idle_after_syncs', 1)} ms together; "
                               f"{2 * L} cudaDeviceSynchronize calls per step"}]
    m["new_cause"] = {"name": "per_layer_sync", "why": "device-wide synchronizations inside the step for per-layer timing "
                      "(torch.cuda.synchronize in module hooks): every layer drains the queue and the GPU waits for the host "
                      "to wake up and issue the next layer; host_sync accepted; fixed by removing the syncs (CUDA events, "
                      "a profiler)"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- snap_rollback (snapshot_copy) -----------------------------------------------------------------------------
    R, dims = SR["rows"], SR["dims"]
    args = ["--rows", R, "--dims", ",".join(map(str, dims))]
    b, b2, keys = ev(m_snap)
    m = base("snap_rollback", "snap_rollback.py", "planted", args, steps=SR["steps"], est=40)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["snapshot"] = "parameters and both AdamW moments cloned on the GPU before every optimizer step"
    m["techniques"] = techniques(
        "stop snapshotting every step: keep a periodic checkpoint (every few hundred steps) to roll back to, or guard "
        "against spikes without copies (skip the update on the GPU when the gradients are non-finite or the loss spikes, "
        "as GradScaler / found_inf does)",
        ["CUDA graphs / launch overhead (GPU-bound)", "bf16 (already)", "fused optimizer (already)",
         "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (no host copies; batches resident on the GPU)",
         "faster GEMMs / kernel tuning", "a larger batch as the top fix"])
    m["planted"] = [planted(
        "snapshot_copy", {"device": "GPU 0", "region": "step_N > optimizer: 12 device-to-device memcpys (4 parameters and "
                          "their 2 AdamW moments) before the fused AdamW kernel"},
        "no per-step snapshot (--fixed; not captured)", b, "rm.snapshot_copy", "share.snapshot_copy",
        f"{b['params_m'][0]:.1f} M fp32 parameters; before every optimizer step the parameters and both AdamW moments are "
        f"cloned ({b['snapshot_gb'][0]:.2f} GB, read and written: 24 B per parameter at 2.6-3.0 TB/s = "
        f"{rng(b, 'c.snapshot_dtod_copies')} ms of DtoD memcpy). The rest of the step: GEMMs "
        f"{mlp_train_flops(R, dims) / 1e12:.2f} TFLOP at 550-800 = {rng(b, 'c.gemm_bf16')} ms, AMP weight casts "
        f"{rng(b, 'c.amp_casts')} ms, fused AdamW (28 B per parameter) {rng(b, 'c.adamw_fused')} ms, GELU / loss "
        f"{b['c.gelu_bf16'][0] + b['c.input_cast_loss'][0]:.2f}-{b['c.gelu_bf16'][1] + b['c.input_cast_loss'][1]:.2f} ms. "
        f"Step {rng(b, 'step')} ms (GPU-bound); without the snapshot {rng(b, 'after')} ms: removed "
        f"{rng(b, 'rm.snapshot_copy')} ms = {rng(b, 'share.snapshot_copy', 1)} % -> high (H200 at 3.9-4.4 TB/s: "
        f"{rng(b2, 'share.snapshot_copy', 1)} %). New cause name: snapshot_copy.",
        accept=["snapshot_copy", "redundant_copy", "redundant_transfer"], b2=b2)]
    m["tolerated"] = [{"what": "AMP weight casts (memory-bound)", "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a 168 M-parameter MLP (2048 -> 8192 x 3 -> 2048, fp32 weights with bf16 autocast, fused "
                     "AdamW) on one H200 with 1024 rows per step. The optimizer phase looks slower than it should. Is "
                     "something wasting time there?")
    m["diagnosis"] = (f"Yes: before every AdamW step the loop clones the parameters and both AdamW moments "
                      f"({b['snapshot_gb'][0]:.1f} GB) as a rollback snapshot: 12 device-to-device copies, "
                      f"~{rng(b2, 'c.snapshot_dtod_copies', 2)} ms of a {rng(b2, 'step', 1)} ms step on an H200, inside the "
                      f"optimizer range next to the fused AdamW kernel ({rng(b2, 'c.adamw_fused', 2)} ms). Snapshot rarely "
                      f"(periodic checkpoint) or guard on the GPU without copies: ~{rng(b2, 'after', 1)} ms per step "
                      f"({rng(b2, 'share.snapshot_copy', 0)} %, high). The GEMMs and the fused AdamW are fine.")
    m["measure"] = [{"what": "step period", "query": Q8["step"], "expect_ms": r2(b["step"])},
                    {"what": "copies", "query": Q8["memcpy"],
                     "expect": f"12 DtoD copies per step, {b['snapshot_gb'][0]:.2f} GB in all, at ~2.6-3.0 TB/s (H100; "
                               "3.9-4.4 H200) counting read + write"}]
    m["new_cause"] = {"name": "snapshot_copy", "why": "a full device-side copy of the weights and optimizer state made every "
                      "step (rollback snapshot, deepcopy of a state dict) though it is needed rarely: GPU time in "
                      "DtoD memcpy on the critical path; fixed by snapshotting rarely or guarding without copies"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- full_logits (unused_logits) -------------------------------------------------------------------------------
    Bt, S, d, H, L, V = FL["batch"], FL["seq"], FL["d"], FL["heads"], FL["blocks"], FL["vocab"]
    args = ["--batch", Bt, "--seq", S, "--d-model", d, "--heads", H, "--blocks", L, "--vocab", V]
    b, b2, keys = ev(m_logits)
    m = base("full_logits", "full_logits.py", "planted", args, steps=FL["steps"], est=45)
    m["uses"] = uses("bf16 (weights and compute)", "none (inference)", attention=True,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["attention"] = "F.scaled_dot_product_attention, causal (flash)"
    m["uses"]["sequences"] = f"{Bt} prompts of {S} tokens, equal lengths (no padding)"
    m["techniques"] = techniques(
        "apply the LM head (and the final norm and the fp32 upcast) to the positions whose logits are used, here the last "
        "one: lm_head(norm(h[:, -1])) (Hugging Face: logits_to_keep / num_logits_to_keep=1 in prefill)",
        ["CUDA graphs / launch overhead (GPU-bound)", "flash/fused attention as the fix (already SDPA flash; attention is "
         "~2-4 % of the step)", "lower precision (FP8) as the top fix", "a faster GEMM / kernel tuning (the GEMMs run at "
         "tensor-core rate)", "KV cache / speculative decoding (a single prefill pass per step)",
         "pinned memory / data loading (prompts resident on the GPU)", "optimizer changes (inference)"])
    m["planted"] = [planted(
        "unused_logits", {"device": "GPU 0", "region": "step_N: after the 4 blocks, one 8192 x 2048 x 128256 GEMM (the LM "
                          "head over every position) and the elementwise upcast of its 2.1 GB output to fp32, of which one "
                          "row per prompt is used"},
        "lm_head(norm(h[:, -1])) (--fixed; not captured)", b, "rm.unused_logits", "share.unused_logits",
        f"{fl_params() / 1e6:.0f} M parameters, {Bt} x {S} = {Bt * S} tokens per step. Trunk: {L} blocks of 24 x T x d^2 "
        f"GEMM FLOPs = {L * 24.0 * Bt * S * d * d / 1e12:.2f} TFLOP at 550-800 = {rng(b, 'c.trunk_gemm_bf16')} ms, causal "
        f"flash attention 2 x B x S^2 x d per block at 300-550 = {rng(b, 'c.attention_flash_fwd')} ms, LayerNorm / "
        f"residual / GELU / head-merge 34-50 B per token x d per block = {rng(b, 'c.trunk_elementwise')} ms. The head over "
        f"all {Bt * S} positions: 2 x {Bt * S} x {d} x {V} = {2.0 * Bt * S * d * V / 1e12:.2f} TFLOP = "
        f"{rng(b, 'c.lm_head_all_positions')} ms, the logits written in bf16, read and written again in fp32 by .float() "
        f"(8 B per logit, {8.0 * Bt * S * V / 1e9:.1f} GB) = {rng(b, 'c.logits_write_and_float')} ms; only {Bt} rows are "
        f"used. Step {rng(b, 'step')} ms (GPU-bound: {FL_HOST_OPS} ops of host time, {rng(b, 'host_ms')} ms); with the head "
        f"on the last position (a skinny GEMM streaming the {2 * d * V / 1e6:.0f} MB head weight) {rng(b, 'after')} ms: "
        f"removed {rng(b, 'rm.unused_logits')} ms = {rng(b, 'share.unused_logits', 1)} % -> critical (H200: "
        f"{rng(b2, 'share.unused_logits', 1)} %). New cause name: unused_logits.",
        accept=["unused_logits", "wasted_compute", "redundant_forward"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / residual / GELU / head-merge copies of the trunk (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We run batched prefill for a 727 M-parameter decoder (4 blocks, d 2048, 128 k vocabulary, bf16, SDPA "
                     "attention) on one H200: 8 prompts of 1024 tokens per step, greedy next token. A step takes longer "
                     "than the model's size suggests. What is the GPU spending its time on, and can we cut it?")
    m["diagnosis"] = (f"The LM head runs over every position: an 8192 x 2048 x 128256 GEMM "
                      f"({rng(b2, 'c.lm_head_all_positions', 1)} ms) and a 2.1 GB -> 4.2 GB fp32 upcast of the logits "
                      f"({rng(b2, 'c.logits_write_and_float', 1)} ms) per {rng(b2, 'step', 1)} ms step on an H200, though "
                      f"only the last position's logits are used. Apply the final norm, the head and .float() to "
                      f"h[:, -1] (logits_to_keep=1): ~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.unused_logits', 0)} "
                      "%, critical). The trunk's GEMMs and flash attention are fine.")
    m["measure"] = [{"what": "step period", "query": Q8["step"], "expect_ms": r2(b["step"])},
                    {"what": "kernels", "query": Q8["kernels"] + " (divide by the steps)",
                     "expect": f"one large GEMM per step of {rng(b, 'c.lm_head_all_positions', 1)} ms (the head), the "
                               f"largest single kernel, and an elementwise copy of ~{rng(b, 'c.logits_write_and_float', 1)} "
                               "ms (bf16 -> fp32)"}]
    m["new_cause"] = {"name": "unused_logits", "why": "an output projection (LM head) computed, and upcast, for every "
                      "position although only a few rows are consumed: efficient kernels on work whose result is "
                      "discarded; fixed by slicing the hidden states before the head"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.table)
