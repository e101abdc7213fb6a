#!/usr/bin/env python3
"""First-principles truth for the fifth held-out set (heldout5): writes heldout5/manifests/<case>.json from FLOPs,
bytes, launch / sync counts and rate bands alone (no capture, no aisp output), with the helpers of ../derive.py.

    python3 workloads/planted/heldout5/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout5/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout5/derive.py --table    # the README table only

Method: as ../derive.py and heldout4/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or round trips x a host latency; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the device where the
problem sits; severity: info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical. New bands (each with its
source in the manifests' `rates`): the GPU idle of one `.item()` round trip, the fp64 GEMM rate, the 2-rank NCCL
broadcast rate and the elementwise bytes of a pre-LN MLP block; three of heldout4's are copied here with their
sources so that this set depends on no other held-out set.
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
ADAM_B, AMP_B, DDP_B, GB, Q, LOSS_B = D.ADAM_B, D.AMP_B, D.DDP_B, D.GB, D.Q, D.LOSS_B
mlp_params, mlp_train_flops, gelu_train_bytes = D.mlp_params, D.mlp_train_flops, D.gelu_train_bytes
pct, planted, r2, rng, techniques, uses = D.pct, D.planted, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link

SET = "heldout5"

# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; bytes as named.
NEW_H100 = {
    # copied from heldout4/derive.py (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    "eager_op_us": (20.0, 70.0),
    # new here
    "item_gap_us": (25.0, 80.0),
    "dgemm_tflops": (45.0, 62.0),
    "bcast2_algbw_gbs": (220.0, 380.0),
    "mlp_block_ew_tokd_bytes": (60.0, 95.0),
}
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 1024 (or a varying M): below the 8192^3 rate (732-787 measured) as "
                       "tiles and waves shrink and the epilogue's writes weigh more; an assumption widened down to 550 "
                       "(heldout2, heldout3, heldout4). Used for every GEMM whose smallest dimension is <= 2048",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: torch "
                     "busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (figures quoted by heldout2/derive.py), 329 at "
                     "1 GiB on 2 H100; band 200-300 (heldout3, heldout4)",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python (module call, dispatcher, cudaLaunchKernel) under nsys "
                   "with cuda+nvtx+osrt tracing on this pool: 29-36 µs per kernel measured (tiny_kernels.sqlite, quoted by "
                   "../derive.py), ~70 implied by heldout2's attn_eager.fixed; band 20-70 (heldout3, heldout4). Used here to "
                   "show that a case's GPU work outlasts its host work",
    "item_gap_us": "GPU idle per `t.norm().item()` round trip in a Python loop: after the stream sync returns, the host wakes "
                   "(5-15 µs), runs the loop body (a few µs), dispatches the next reduction (an eager op, 20-70 µs under nsys "
                   "by heldout3's band, the low end for a bare tensor method) and the 4-byte D2H copy; the GPU runs the "
                   "reduction (2-15 µs) and the copy, then waits. heldout2 measured 25-60 µs per small pageable .to('cuda') "
                   "with its stream sync, a round trip of the same shape; band 25-80 µs (assumption)",
    "dgemm_tflops": "fp64 GEMM (cuBLAS DGEMM on the FP64 tensor cores, DMMA): datasheet 67 TFLOP/s dense on H100 SXM and on "
                    "H200; cuBLAS reaches ~55-60 on large squares; shapes here are 4096 x 4096 x 4096 and 4096 x 512 x 4096, "
                    "band 45-62 (assumption); the same on H200 (same FP64 units and clocks)",
    "bcast2_algbw_gbs": "NCCL broadcast of one large tensor (384 MB) on 2 ranks over NVLink, NVLS off: the root sends every "
                        "byte once over the link (a 2-rank ring all-reduce also sends n bytes per rank, and reaches 253-285 "
                        "GB/s at 64-256 MiB here), with no reduction; nccl-tests broadcast busbw on NVLink-4 hosts is ~300-370; "
                        "band 220-380 (assumption)",
    "mlp_block_ew_tokd_bytes": "elementwise bytes per token x d_model of a pre-LN MLP block (LayerNorm, Linear d -> 4d with bias, "
                               "GELU, Linear 4d -> d with bias, residual add), pure bf16, forward + backward: LayerNorm forward "
                               "4, backward ~8 (with its weight / bias reductions); GELU on 4d forward 16, backward 24; residual "
                               "add forward 6, the two branches' gradient sum 6; bias gradients (column sums) 2 x 4 + 2: ~74; "
                               "band 60-95 (assumption; bias adds fused into the GEMM epilogues)",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H100)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q5 = dict(Q)
Q5.update({
    "nvtx_ranges": "sql/nvtx_range_ms.sql: CPU duration of each NVTX range name (count, mean, min, max)",
    "starved": "sql/launch_starved_idle.sql: GPU idle split into gaps whose next kernel had not been launched yet "
               "(the GPU waits for the host) and other gaps, between T0 and T1",
})


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


# ---------------------------------------------------------------------------------------------------
# DDP on 2 ranks: a timeline of the backward with DDP's buckets (as heldout4/derive.py).
FIRST_BUCKET = float(1 << 20)   # DDP's first bucket: 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES)
BUCKET = 25.0 * (1 << 20)       # bucket_cap_mb = 25


def ddp_timeline(r, nodes):
    """nodes: [(ms, grad bytes made ready at the node's end)] in backward order. Buckets fill in ready order, the
    first closing at >= 1 MiB, the others at >= 25 MiB (the last with whatever is left); one all-reduce per bucket, in
    order, each starting when its bucket is full and the previous one is done, lasting bytes / algbw + a per-call
    latency. Returns (backward ms, all-reduce ms left after the backward, all-reduce ms in all, buckets)."""
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

# grad_stats: 12 pre-LN MLP blocks d 1024 -> 4096 -> 1024 with biases, final LN, d -> d head with bias; 16384 rows; pure
# bf16, fused AdamW; a hand-written per-parameter norm logging + global-norm clipping with one .item() per tensor.
GS = dict(rows=16384, d=1024, hidden=4096, blocks=12, steps=25)
GS_BLOCK_FWD_OPS = 5   # ln, fc1, gelu, fc2, add (Python-level eager ops per block in the forward)
GS_ITEMS = 3           # .item() round trips per parameter tensor: grad norm, grad max |g|, weight norm


def gs_counts():
    d, h, L = GS["d"], GS["hidden"], GS["blocks"]
    P = L * (2 * d * h + h + d + 2 * d) + 2 * d + d * d + d
    N = L * 6 + 4
    return float(P), N


def m_grad(r, fixed=False):
    R, d, h, L = GS["rows"], GS["d"], GS["hidden"], GS["blocks"]
    hbm = r["hbm_tbs"]
    P, N = gs_counts()
    block_fwd = t_flops(2.0 * R * 2 * d * h, r["bf16_mid_tflops"]) + t_bytes(26.0 * R * d, hbm)
    c = {"gemm_bf16_fwd_bwd": t_flops(L * 3 * 2.0 * R * 2 * d * h + 3 * 2.0 * R * d * d, r["bf16_mid_tflops"]),
         "block_elementwise": t_bytes(L * r["mlp_block_ew_tokd_bytes"] * R * d + 10.0 * R * d, hbm),
         "loss_mse": t_bytes(LOSS_B * R * d, hbm),
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm),
         # planted: grad norm r2, abs r2 w2 + max r2, weight norm r2, clip multiply r2 w2 = 14 B per parameter; fixed:
         # foreach norms (2 and inf) of the gradients and of the weights 2 + 2 + 2, clip_grad_norm_'s own norm 2 and
         # multiply 4 = 12 B
         "stats_and_clip_kernels": t_bytes((12.0 if fixed else 14.0) * P, hbm)}
    if not fixed:
        c["item_round_trips_gpu_idle"] = GS_ITEMS * N * r["item_gap_us"] / 1e3
    step = sum(c.values())
    host_fwd = GS_BLOCK_FWD_OPS * r["eager_op_us"] / 1e3
    out = {"c": c, "step": step, "params_m": P / 1e6, "tensors": N, "block_fwd_gpu_ms": block_fwd,
           "block_fwd_host_ms": host_fwd, "host_margin_per_block_ms": block_fwd - host_fwd,
           "gemm_share": pct(c["gemm_bf16_fwd_bwd"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    rm = {"host_sync": c["item_round_trips_gpu_idle"] + t_bytes(2.0 * P, hbm)}
    out.update({"rm": rm, "share": shares(rm, step), "after": step - rm["host_sync"]})
    return out


# weight_upload: 8192 tokens x 4096 -> 16384 -> (frozen 16384 x 16384, re-uploaded from pinned memory) -> 4096, bf16.
# (one GELU, after the first Linear)
WU = dict(tokens=8192, d_in=4096, width=16384, steps=25)


def m_upload(r, fixed=False):
    T, di, W = WU["tokens"], WU["d_in"], WU["width"]
    hbm = r["hbm_tbs"]
    c = {"gemm_bf16": t_flops(2.0 * T * (di * W + W * W + W * di), r["bf16_tflops"]),
         # one GELU forward (r2 w2), the score: out.float() r2 w4, pow r4 w4, mean r4 (18 B per output element)
         "gelu_score": t_bytes(4.0 * T * W + 18.0 * T * di, hbm)}
    if not fixed:
        c["h2d_pinned_upload_serialised"] = t_link(2.0 * W * W, r["h2d_pinned_gbs"])
    step = sum(c.values())
    host = 8 * r["eager_op_us"] / 1e3
    out = {"c": c, "step": step, "host_ms": host, "host_margin_ms": step - host, "upload_mb": 2.0 * W * W / 1e6,
           "gemm_share": pct(c["gemm_bf16"], step), "gelu_share": pct(c["gelu_score"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    rm = {"redundant_transfer": c["h2d_pinned_upload_serialised"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": step - rm["redundant_transfer"]})
    return out


# tabular_fp64: MLP 512 -> 4096 x3 -> 1 (bias-free, GELU), 4096 rows; float64 everything (model.double()). No NVTX.
TF = dict(rows=4096, dims=[512, 4096, 4096, 4096, 1], steps=25)


def m_fp64(r, fixed=False):
    R, dims = TF["rows"], TF["dims"]
    hbm = r["hbm_tbs"]
    P = float(mlp_params(dims))
    fl = mlp_train_flops(R, dims)
    if fixed:
        c = {"gemm_bf16": t_flops(fl, r["bf16_mid_tflops"]),
             "gelu_bf16": t_bytes(gelu_train_bytes(R, dims, 2), hbm),
             "input_cast_loss": t_bytes(6.0 * R * dims[0] + LOSS_B * R * dims[-1], hbm),
             "amp_casts_adamw_fused_fp32": t_bytes((AMP_B + ADAM_B[4]) * P, hbm)}
    else:
        c = {"gemm_fp64": t_flops(fl, r["dgemm_tflops"]),
             "gelu_fp64": t_bytes(gelu_train_bytes(R, dims, 8), hbm),
             "loss_fp64": t_bytes(2 * LOSS_B * R * dims[-1], hbm),
             # fused AdamW in fp64: reads p, g, m, v (32 B), writes p, m, v (24 B)
             "adamw_fused_fp64": t_bytes(56.0 * P, hbm)}
    step = sum(c.values())
    out = {"c": c, "step": step, "params_m": P / 1e6, "tflop": fl / 1e12}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_fp64(r, fixed=True)["step"]
    rm = {"fp64_compute": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after, "speedup": step / after,
                "gemm_share": pct(c["gemm_fp64"], step)})
    return out


# embed_collect: 32 chunks x 8192 rows through an MLP 1024 -> 4096 -> 4096 -> 2048 (bf16 inference), the chunk outputs
# collected with a growing torch.cat; scored against 16 queries.
EC = dict(chunk=8192, chunks=32, dims=[1024, 4096, 4096, 2048], queries=16, steps=25)
EC_CHUNK_HOST_OPS = 7  # slice, 3 Linear, 2 GELU, cat


def ec_bytes():
    C, K, E = EC["chunk"], EC["chunks"], EC["dims"][-1]
    cb = 2.0 * C * E                                   # one chunk's embeddings, bf16
    cat = 2.0 * cb * (K * (K + 1) / 2 - 1)             # cat k (k = 2..K) reads k chunks and writes k chunks
    prealloc = 2.0 * cb * K                            # each chunk copied once into the buffer
    return cb, cat, prealloc


def m_collect(r, fixed=False):
    C, K, dims = EC["chunk"], EC["chunks"], EC["dims"]
    hbm = r["hbm_tbs"]
    cb, cat, pre = ec_bytes()
    chunk_gpu = t_flops(2.0 * C * sum(a * b for a, b in zip(dims, dims[1:])), r["bf16_mid_tflops"]) + \
        t_bytes(4.0 * C * sum(dims[1:-1]), hbm)
    c = {"gemm_bf16": K * t_flops(2.0 * C * sum(a * b for a, b in zip(dims, dims[1:])), r["bf16_mid_tflops"]),
         "gelu": K * t_bytes(4.0 * C * sum(dims[1:-1]), hbm),
         # out @ queries reads the shard's embeddings once (thin GEMM, memory-bound), then a small amax / mean
         "score": t_bytes(K * cb, hbm)}
    if fixed:
        c["copy_into_buffer"] = t_bytes(pre, hbm)
    else:
        c["growing_cat_copies"] = t_bytes(cat, hbm)
    step = sum(c.values())
    host = EC_CHUNK_HOST_OPS * r["eager_op_us"] / 1e3
    out = {"c": c, "step": step, "chunk_gpu_ms": chunk_gpu, "chunk_host_ms": host, "host_margin_per_chunk_ms": chunk_gpu - host,
           "cat_gb": cat / GB, "prealloc_gb": pre / GB, "shard_gb": K * cb / GB}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    rm = {"quadratic_concat": t_bytes(cat - pre, hbm)}
    out.update({"rm": rm, "share": shares(rm, step), "after": step - rm["quadratic_concat"],
                "cat_share_of_step": pct(c["growing_cat_copies"], step)})
    return out


# ddp2_buffers: 2 ranks, frozen 1.5 M x 128 bf16 table registered as a buffer (384 MB), 8 ids per row, MLP 1024 -> 4096 x3
# -> 1 (fp32 parameters, bf16 autocast), 8192 rows per rank, fused AdamW; DDP broadcasts the buffer at every forward.
DB = dict(rows=8192, vocab=1_500_000, emb=128, tokens=8, hidden=[4096, 4096, 4096], steps=25)


def db_dims():
    return [DB["tokens"] * DB["emb"]] + DB["hidden"] + [1]


def db_table_bytes():
    return 2.0 * DB["vocab"] * DB["emb"]


def db_nodes(r, R):
    """Backward nodes, last layer first: weight-gradient GEMM, input-gradient GEMM except for the first layer (its input,
    the gathered table rows, needs no gradient), the GELU backward in front of each layer but the first (6 B per bf16
    element); each layer's fp32 gradient (4 B per parameter) ready at its node's end."""
    dims = db_dims()
    nodes = [(t_bytes(40.0 * R, r["hbm_tbs"]), 0.0)]  # the loss's backward (R outputs)
    for i in reversed(range(len(dims) - 1)):
        a, b = dims[i], dims[i + 1]
        ms = t_flops((2 if i > 0 else 1) * 2.0 * R * a * b, r["bf16_mid_tflops"])
        if i > 0:
            ms += t_bytes(6.0 * R * a, r["hbm_tbs"])
        nodes.append((ms, 4.0 * a * b))
    return nodes


def m_buffers(r, fixed=False):
    R, dims = DB["rows"], db_dims()
    hbm = r["hbm_tbs"]
    P = float(mlp_params(dims))
    fwd = t_flops(2.0 * R * sum(a * b for a, b in zip(dims, dims[1:])), r["bf16_mid_tflops"]) + \
        t_bytes(4.0 * R * dims[0] + 4.0 * R * sum(dims[1:-1]) + 18.0 * R, hbm)  # gather r2 w2, GELUs r2 w2, loss
    bwd, left, total, nb = ddp_timeline(r, db_nodes(r, R))
    c = {"forward": fwd, "backward": bwd, "allreduce_left_after_backward": left,
         "amp_casts_adam_ddp_copies": t_bytes((AMP_B + ADAM_B[4] + DDP_B) * P, hbm),
         "overlap_slowdown": r["overlap_penalty"] * (total - left),
         "allreduce_total_overlapped": 0.0}
    step_compute = sum(c.values())
    c["allreduce_total_overlapped"] = total  # informative, not on the critical path (added after the sum)
    bc = t_link(db_table_bytes(), r["bcast2_algbw_gbs"]) + r["ar_small_us"] / 1e3
    if not fixed:
        c["buffer_broadcast_before_forward"] = bc
    step = step_compute + (0.0 if fixed else bc)
    out = {"c": c, "step": step, "buckets": nb, "params_m": P / 1e6, "tail_share": pct(left, step),
           "table_mb": db_table_bytes() / 1e6}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    rm = {"buffer_broadcast": bc}
    out.update({"rm": rm, "share": shares(rm, step), "after": step - bc})
    return out


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, ranks=1, nvtx=True, est=45, steps=25, warmup=3):
    return D.base(name, f"heldout5/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
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

    # ---- grad_stats (host_sync) ------------------------------------------------------------------------------------
    R, d, h, L = GS["rows"], GS["d"], GS["hidden"], GS["blocks"]
    P, N = gs_counts()
    args = ["--rows", R, "--d-model", d, "--hidden", h, "--blocks", L]
    b, b2, keys = ev(m_grad)
    m = base("grad_stats", "grad_stats.py", "planted", args, steps=GS["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused",
                     host_sync=f"{GS_ITEMS * N} .item() calls per step in the grad_stats range (planted); event sync on the "
                               "previous step (lag 1)")
    m["techniques"] = techniques(
        "keep the gradient / weight statistics and the global-norm clip on the GPU (torch._foreach_norm, "
        "clip_grad_norm_(foreach=True)) and read them back once per step, or every N steps, instead of one .item() per "
        "parameter tensor and statistic",
        ["CUDA graphs as the top fix (the syncs, not launches, idle the GPU; the loop cannot be captured with .item())",
         "bf16 (already)", "fused optimizer (already)", "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (batches resident on the GPU)", "activation checkpointing",
         "elementwise fusion of LayerNorm / GELU as the top fix"])
    m["planted"] = [planted(
        "host_sync", {"device": "GPU 0", "region": f"step_N > grad_stats: {GS_ITEMS * N} short reductions each followed by a "
                      "4-byte device-to-host copy and a stream sync, the GPU idle between them"},
        "statistics and clipping on the GPU with foreach ops, read back once (--fixed; not captured)", b, "rm.host_sync",
        "share.host_sync",
        f"{N} parameter tensors ({P / 1e6:.1f} M bf16 parameters: 12 blocks x (LayerNorm weight, bias, fc1 weight, bias, fc2 "
        f"weight, bias) + final LayerNorm + head). Per tensor the dashboard reads grad.norm(), grad.abs().max() and "
        f"weight.norm() with .item(): {GS_ITEMS * N} round trips per step, each a reduction of 2-70 µs of GPU work, a 4-byte "
        f"D2H copy and a cudaStreamSynchronize, after which the host must wake, run the loop and dispatch the next "
        f"reduction while the GPU waits: 25-80 µs of GPU idle per round trip = {rng(b, 'c.item_round_trips_gpu_idle')} ms. "
        f"The rest of the step: GEMMs {(L * 12 * R * d * h + 6 * R * d * d) / 1e12:.2f} TFLOP at 550-800 = "
        f"{rng(b, 'c.gemm_bf16_fwd_bwd')} ms, LayerNorm / GELU / residual / bias-gradient kernels {rng(b, 'c.block_elementwise')} ms, "
        f"MSE {rng(b, 'c.loss_mse')} ms, fused AdamW {rng(b, 'c.adamw_fused_bf16')} ms, the statistics' and clip's kernels "
        f"{rng(b, 'c.stats_and_clip_kernels')} ms. Step {rng(b, 'step', 1)} ms; with the statistics on the GPU (foreach norms, "
        f"12 B per parameter instead of 14) {rng(b, 'after', 1)} ms: removed {rng(b, 'rm.host_sync', 1)} ms = "
        f"{rng(b, 'share.host_sync', 1)} % (H200: {rng(b2, 'share.host_sync', 1)} %): high at the middle, critical at the slow-host "
        f"corner (the per-round-trip latency is known to a factor 3.2). The forward stays GPU-bound: per block "
        f"{rng(b, 'block_fwd_gpu_ms', 3)} ms of GPU work against {rng(b, 'block_fwd_host_ms', 3)} ms of host issue.",
        accept=["host_sync", "host_bound", "launch_bound"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / bias-gradient kernels (memory-bound, bf16)", "cause": "elementwise_unfused",
                       "max_severity": "medium"},
                      {"what": "the 228 small reduction kernels and 4-byte D2H copies themselves (GPU time; the idle between "
                       "them is the planted problem)", "cause": "copy_many_small", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("I'm training a 12-block residual MLP (d 1024, 16384 rows per step, bf16, ~102 M parameters) on one H200. "
                     "The GPU shows gaps every step although the model is small enough to fit easily. What is slowing it down?")
    m["diagnosis"] = (f"The grad_stats range: for each of the {N} parameter tensors the loop reads the gradient norm, the "
                      f"gradient's max |g| and the weight norm with .item(), {GS_ITEMS * N} host syncs per step; between them the "
                      f"GPU runs one tiny reduction and waits for the host ({rng(b, 'c.item_round_trips_gpu_idle', 1)} ms idle per "
                      f"step). Compute the statistics with torch._foreach_norm (ord 2 and inf) and clip with "
                      f"clip_grad_norm_(foreach=True), keep them on the GPU and read them once per step or every N steps: "
                      f"~{rng(b, 'step', 0)} -> ~{rng(b, 'after', 0)} ms ({rng(b, 'share.host_sync', 0)} %, high, critical if the "
                      "host is slow). GEMMs are bf16 at tensor-core rate, AdamW is fused.")
    m["measure"] = [{"what": "step period", "query": Q5["step"], "expect_ms": r2(b["step"])},
                    {"what": "the grad_stats range", "query": Q5["nvtx_ranges"] + " (grad_stats)",
                     "expect": f"{rng(b, 'c.item_round_trips_gpu_idle', 1)} ms per step of CPU time, {GS_ITEMS * N} "
                               "cudaStreamSynchronize / cudaMemcpyAsync pairs inside it"},
                    {"what": "idle split", "query": Q5["starved"] + " over one step",
                     "expect": "most idle time in gaps inside grad_stats, after a D2H copy of 4 bytes"}]
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- weight_upload (redundant_transfer) and weight_upload.fixed ------------------------------------------------
    T, di, W = WU["tokens"], WU["d_in"], WU["width"]
    args = ["--tokens", T, "--d-in", di, "--width", W]
    b, b2, keys = ev(m_upload)
    m = base("weight_upload", "weight_upload.py", "planted", args, steps=WU["steps"], est=45)
    m["uses"] = uses("bf16 (weights and compute)", "none (inference)", pinned=True,
                     host_sync="event sync on the previous batch (lag 1: never idles the GPU)")
    m["uses"]["offload"] = f"a frozen {W} x {W} bf16 projection in pinned host memory, copied to the GPU every batch"
    m["techniques"] = techniques(
        "keep the frozen projection resident on the GPU (copy it once before the loop; 537 MB fits easily): a weight that "
        "never changes need not cross PCIe every batch",
        ["pinned memory (already pinned: the copy runs at full PCIe rate)", "overlapping the copy on a side stream as the top fix "
         "(it would still move 537 MB per batch over PCIe; the weight is constant)", "bf16 (already)", "TF32 (no fp32 GEMMs)",
         "flash/fused attention (no attention in this run)", "CUDA graphs (GPU-bound: ~10 kernels per batch)",
         "optimizer changes (inference)", "quantisation as the top fix"])
    m["planted"] = [planted(
        "redundant_transfer", {"device": "GPU 0", "region": "step_N > upload: one 537 MB pageable-free (pinned) H2D copy per "
                               "batch on the compute stream, before the GEMM that reads it"},
        "the projection moved to the GPU once (--fixed, captured as weight_upload.fixed)", b, "rm.redundant_transfer",
        "share.redundant_transfer",
        f"The frozen projection is {W} x {W} bf16 = {b['upload_mb'][0]:.0f} MB in pinned host memory; every batch copies it with "
        f".to('cuda', non_blocking=True) on the compute stream, so the copy runs at the pinned PCIe rate (50-56 GB/s: "
        f"{rng(b, 'c.h2d_pinned_upload_serialised')} ms) and the next GEMM waits for it. Compute: GEMMs "
        f"{2 * T * (di * W + W * W + W * di) / 1e12:.2f} TFLOP at 650-820 = {rng(b, 'c.gemm_bf16')} ms, GELU and the score "
        f"{rng(b, 'c.gelu_score')} ms. Batch {rng(b, 'step', 1)} ms; resident weight {rng(b, 'after', 1)} ms: removed "
        f"{rng(b, 'rm.redundant_transfer', 1)} ms = {rng(b, 'share.redundant_transfer', 1)} % -> critical (H200, same PCIe: "
        f"{rng(b2, 'share.redundant_transfer', 1)} %). Overlapping the copy on a side stream would hide most of it but still move "
        "537 MB per batch; the weight is constant. New cause name: redundant_transfer.",
        accept=["redundant_transfer", "copy_not_overlapped"], b2=b2)]
    m["tolerated"] = [{"what": "the GELU kernel (epilogue fusion)", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We run batch inference of a feature projector (bf16, 8192 x 4096 inputs, a 16384-wide hidden layer) on one "
                     "H200. A batch takes ~20 ms although the GEMMs are ~9 ms of work. Is the GPU used well?")
    m["diagnosis"] = (f"No: every batch copies the frozen 16384 x 16384 projection (537 MB) from pinned host memory to the GPU "
                      f"on the compute stream ({rng(b, 'c.h2d_pinned_upload_serialised', 1)} ms at full PCIe rate) and the GEMMs "
                      f"wait for it. The weight never changes and fits: keep it on the GPU: ~{rng(b, 'step', 0)} -> "
                      f"~{rng(b, 'after', 0)} ms per batch ({rng(b, 'share.redundant_transfer', 0)} %, critical). The copy is "
                      "already pinned; the GEMMs run at tensor-core rate.")
    m["measure"] = [{"what": "batch period", "query": Q5["step"], "expect_ms": r2(b["step"])},
                    {"what": "the upload", "query": Q5["memcpy"],
                     "expect": f"one H2D copy per batch, {2 * W * W} bytes from pinned memory at 50-56 GB/s "
                               f"({rng(b, 'c.h2d_pinned_upload_serialised', 1)} ms), nothing overlapping it on the GPU"}]
    m["new_cause"] = {"name": "redundant_transfer", "why": "a tensor that never changes (a frozen weight, a constant table) "
                      "copied host-to-device again every step although it fits on the GPU: the copy may be pinned and "
                      "fast, and overlapping it (copy_not_overlapped, accepted) would hide it, but the fix is to stop "
                      "moving it: keep it resident"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="weight_upload.fixed")

    b, b2, keys = ev(lambda r: m_upload(r, fixed=True))
    m = base("weight_upload.fixed", "weight_upload.py", "fixed", args + ["--fixed"], steps=WU["steps"], est=40)
    m["uses"] = uses("bf16 (weights and compute)", "none (inference)", pinned=None,
                     host_sync="event sync on the previous batch (lag 1: never idles the GPU)")
    m["uses"]["offload"] = "none: every weight resident on the GPU"
    m["techniques"] = techniques(None, ["keeping the weight resident (already)", "pinned memory (no per-batch copies)",
                                        "bf16 (already)", "TF32 (no fp32 GEMMs)", "CUDA graphs (GPU-bound: ~10 kernels per batch)",
                                        "flash/fused attention (no attention in this run)", "optimizer changes (inference)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "the GELU kernel (epilogue fusion would remove it)", "cause": "elementwise_unfused",
                       "max_severity": "low", "share_pct": r2(b["gelu_share"])}]
    m["expect_quiet"] = True
    m["question"] = "We now keep the projection on the GPU. Is anything still holding the batch time back?"
    m["diagnosis"] = (f"No: a batch is ~{rng(b, 'step', 1)} ms, {rng(b, 'gemm_share', 0)} % of it three bf16 GEMMs at tensor-core "
                      f"rate, one GELU kernel {rng(b, 'gelu_share', 0)} %; no copies, the host a batch ahead. Nothing above low.")
    m["measure"] = [{"what": "batch period", "query": Q5["step"], "expect_ms": r2(b["step"])},
                    {"what": "copies", "query": Q5["memcpy"], "expect": "no H2D copy in the steady batches"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- tabular_fp64 (fp64_compute; no NVTX) -----------------------------------------------------------------------
    Rt, tdims = TF["rows"], TF["dims"]
    args = ["--rows", Rt, "--dims", ",".join(map(str, tdims))]
    b, b2, keys = ev(m_fp64)
    m = base("tabular_fp64", "tabular_fp64.py", "planted", args, nvtx=False, steps=TF["steps"], est=45)
    m["uses"] = uses("float64 (parameters, activations, optimizer)", "AdamW fused (fp64 states)", tf32=False,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["techniques"] = techniques(
        "train in fp32 with bf16 autocast (or TF32): cast the NumPy float64 features to float32 once and drop model.double(); "
        "FP64 GEMMs run at ~1/12 of the bf16 tensor-core rate and every activation and optimizer state is twice fp32's bytes",
        ["CUDA graphs or launch overhead (GPU-bound: ~40 launches per 15-20 ms step)", "fused optimizer (already fused)",
         "flash/fused attention (no attention in this run)", "sequence packing (no sequences)",
         "pinned memory / data loading (features resident on the GPU)", "activation checkpointing",
         "TF32 alone while the model stays float64 (TF32 applies to fp32 only)"])
    m["planted"] = [planted(
        "fp64_compute", {"device": "GPU 0", "region": "every iteration (no NVTX): the 4 forward and 7 backward GEMMs are "
                         "fp64 (DGEMM) kernels; GELU, loss and AdamW kernels on float64"},
        "float32 features and parameters with bf16 autocast (--fixed; not captured)", b, "rm.fp64_compute", "share.fp64_compute",
        f"MLP {' -> '.join(map(str, tdims))}, {Rt} rows, {b['params_m'][0]:.1f} M parameters, all float64 (model.double() to "
        f"match torch.from_numpy's float64 features). GEMMs {b['tflop'][0]:.2f} TFLOP at the FP64 tensor-core rate (45-62 "
        f"TFLOP/s, datasheet 67) = {rng(b, 'c.gemm_fp64')} ms, {rng(b, 'gemm_share', 0)} % of the step; GELUs on 8-byte elements "
        f"{rng(b, 'c.gelu_fp64')} ms, fused AdamW at 56 B per parameter {rng(b, 'c.adamw_fused_fp64')} ms. Step "
        f"{rng(b, 'step', 1)} ms. With fp32 parameters and bf16 autocast: GEMMs at 550-800, GELUs on bf16, AMP casts + fused "
        f"AdamW 40 B per parameter: {rng(b, 'after', 2)} ms ({rng(b, 'speedup', 1)}x). Removed {rng(b, 'rm.fp64_compute', 1)} ms "
        f"= {rng(b, 'share.fp64_compute', 1)} % -> critical (H200: {rng(b2, 'share.fp64_compute', 1)} %). Plain fp32 without "
        "TF32 would run its GEMMs on CUDA cores at ~50 TFLOP/s, barely faster than FP64: the fix needs bf16 or TF32. New cause "
        "name: fp64_compute.", accept=["fp64_compute", "fp32_gemm_simt"], b2=b2)]
    m["tolerated"] = []
    m["expect_quiet"] = False
    m["question"] = ("Our tabular regression MLP (512 -> 4096 x3 -> 1, 4096 rows per step) trains at ~15-20 ms per step on one "
                     "H200, which seems slow for 36 M parameters. What's wrong?")
    m["diagnosis"] = (f"Everything runs in float64: the GEMMs are DGEMM kernels ({rng(b, 'c.gemm_fp64', 1)} ms, "
                      f"{rng(b, 'gemm_share', 0)} % of the step) and activations, gradients and AdamW states are 8-byte. The "
                      "features came from NumPy as float64 and the model was cast with .double(). Cast the features to float32 "
                      f"once, keep fp32 parameters and train under bf16 autocast (or enable TF32): ~{rng(b, 'step', 0)} -> "
                      f"~{rng(b, 'after', 1)} ms per step ({rng(b, 'share.fp64_compute', 0)} %, critical). The optimizer is "
                      "already fused; the host keeps ahead.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q5["anchor"] + " with ANCHOR = the fused AdamW kernel (once per "
                     "step), C = 1, WARM = 3", "expect_ms": r2(b["step"])},
                    {"what": "GEMM kernels", "query": Q5["kernels"] + " (divide by the steps)",
                     "expect": f"~11 GEMM kernels per step whose names say fp64 / dgemm (e.g. *_f64f64_*), "
                               f"{rng(b, 'c.gemm_fp64', 1)} ms per step"}]
    m["new_cause"] = {"name": "fp64_compute", "why": "work run in float64 (DGEMM and 8-byte elementwise / optimizer traffic) "
                      "where fp32/bf16 would do, typically from NumPy's float64 default and model.double(); a precision cause "
                      "like fp32_gemm_simt (accepted), but FP64 has its own units and rate and its fix is leaving float64"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- embed_collect (quadratic_concat) --------------------------------------------------------------------------
    C, K, edims = EC["chunk"], EC["chunks"], EC["dims"]
    args = ["--chunk", C, "--chunks", K, "--dims", ",".join(map(str, edims)), "--queries", EC["queries"]]
    b, b2, keys = ev(m_collect)
    cb, cat, pre = ec_bytes()
    m = base("embed_collect", "embed_collect.py", "planted", args, steps=EC["steps"], est=60)
    m["uses"] = uses("bf16 (weights and compute)", "none (inference)",
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["techniques"] = techniques(
        "collect the chunk embeddings without re-copying them: append to a Python list and torch.cat once at the end, or "
        "write each chunk into a preallocated shard buffer (or the last Linear's out= slice)",
        ["CUDA graphs (GPU-bound: ~230 launches per 30-45 ms step)", "bf16 (already)", "TF32 (no fp32 GEMMs)",
         "flash/fused attention (no attention in this run)", "pinned memory / data loading (shards resident on the GPU)",
         "optimizer changes (inference)", "a faster copy kernel or more bandwidth (the bytes themselves are unnecessary)"])
    m["planted"] = [planted(
        "quadratic_concat", {"device": "GPU 0", "region": "step_N > encode > chunk_K (K >= 1): one concatenation copy per chunk "
                             "whose duration grows linearly with K"},
        "a preallocated shard buffer (--fixed; not captured)", b, "rm.quadratic_concat", "share.quadratic_concat",
        f"{K} chunks of {C} rows per step; each chunk's embeddings are {C} x {edims[-1]} bf16 = {cb / 1e6:.1f} MB. "
        f"`out = torch.cat([out, emb])` at chunk k reads the k-1 earlier chunks and the new one and writes all k: "
        f"sum over k = 2..{K} of 2 k x {cb / 1e6:.1f} MB = {cat / GB:.1f} GB per step at 2.6-3.0 TB/s = "
        f"{rng(b, 'c.growing_cat_copies')} ms ({rng(b, 'cat_share_of_step', 0)} % of the step), where copying each chunk once "
        f"into a buffer moves {pre / GB:.2f} GB. The rest: encoder GEMMs {K * 2 * C * sum(x * y for x, y in zip(edims, edims[1:])) / 1e12:.2f} "
        f"TFLOP at 550-800 = {rng(b, 'c.gemm_bf16')} ms, GELUs {rng(b, 'c.gelu')} ms, scoring {rng(b, 'c.score')} ms. Step "
        f"{rng(b, 'step', 1)} ms; with a buffer {rng(b, 'after', 1)} ms: removed {rng(b, 'rm.quadratic_concat', 1)} ms = "
        f"{rng(b, 'share.quadratic_concat', 1)} % -> high (H200 at 3.9-4.4 TB/s: {rng(b2, 'share.quadratic_concat', 1)} %, high). "
        f"GPU-bound: per chunk {rng(b, 'chunk_gpu_ms', 2)} ms of encoder work against {rng(b, 'chunk_host_ms', 2)} ms of host "
        "issue. New cause name: quadratic_concat.", accept=["quadratic_concat", "elementwise_unfused"], b2=b2)]
    m["tolerated"] = [{"what": "GELU kernels (epilogue fusion)", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We extract embeddings for a corpus on one H200: 32 chunks of 8192 rows per shard through a small bf16 "
                     "MLP encoder. The encoder's FLOPs say ~20 ms per shard, but a shard takes ~30-40 ms. Where does the rest go?")
    m["diagnosis"] = (f"Into copies: the chunk embeddings are collected with out = torch.cat([out, emb]) after every chunk, so "
                      f"chunk k re-copies all earlier embeddings: {cat / GB:.1f} GB of copies per shard "
                      f"({rng(b2, 'c.growing_cat_copies', 1)} ms on an H200), growing linearly within each shard. Append to a "
                      f"list and cat once, or write into a preallocated buffer ({pre / GB:.1f} GB): ~{rng(b2, 'step', 0)} -> "
                      f"~{rng(b2, 'after', 0)} ms per shard ({rng(b2, 'share.quadratic_concat', 0)} %, high). The encoder GEMMs "
                      "run at tensor-core rate; the host keeps ahead.")
    m["measure"] = [{"what": "step period", "query": Q5["step"], "expect_ms": r2(b["step"])},
                    {"what": "the concatenations", "query": Q5["kernels"] + " (divide by the steps)",
                     "expect": f"{K - 1} cat (CatArrayBatchedCopy or DtoD copy) launches per step, {rng(b, 'c.growing_cat_copies', 1)} "
                               "ms together; inside a step each lasts ~k times the first"}]
    m["new_cause"] = {"name": "quadratic_concat", "why": "a tensor grown by repeated torch.cat (or stack / append-by-copy) in a "
                      "loop: each iteration re-copies everything collected so far, so the bytes grow with the square of the "
                      "iterations; memory-bound copies (elementwise_unfused is accepted), but no fusion removes them: the fix is "
                      "collecting once or writing into a preallocated buffer"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- ddp2_buffers (buffer_broadcast) ---------------------------------------------------------------------------
    Rb = DB["rows"]
    args = ["--rows", Rb, "--vocab", DB["vocab"], "--emb-dim", DB["emb"], "--tokens", DB["tokens"],
            "--hidden", ",".join(map(str, DB["hidden"]))]
    b, b2, keys = ev(m_buffers)
    m = base("ddp2_buffers", "ddp2_buffers.py", "planted", args, ranks=2, steps=DB["steps"], est=80)
    m["uses"] = uses("bf16 autocast, fp32 parameters, bf16 frozen table", "AdamW fused", ddp=True,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["ddp_broadcast_buffers"] = True
    m["techniques"] = techniques(
        "stop DDP from broadcasting the constant buffer every forward: DistributedDataParallel(broadcast_buffers=False) "
        "(no buffer here changes during training), or keep the frozen table out of the module's buffers",
        ["NCCL / interconnect tuning (the broadcast moves 384 MB that need not move at all)", "bucket size tuning",
         "gradient compression", "bf16 autocast (already)", "fused optimizer (already)", "a slow GPU or straggler rank (both "
         "ranks wait the same time)", "flash/fused attention (no attention in this run)", "CUDA graphs (GPU-bound)",
         "pinned memory / data loading (batches resident on the GPU)"])
    m["planted"] = [planted(
        "buffer_broadcast", {"ranks": [0, 1], "region": "step_N > forward: an NCCL broadcast of the 384 MB buffer (rank 0 -> "
                             "rank 1) before the forward's first kernel, on both ranks"},
        "DistributedDataParallel(broadcast_buffers=False) (--fixed; not captured)", b, "rm.buffer_broadcast",
        "share.buffer_broadcast",
        f"The frozen table ({DB['vocab']} x {DB['emb']} bf16 = {b['table_mb'][0]:.0f} MB) is a registered buffer and DDP's default "
        f"broadcast_buffers=True broadcasts every buffer from rank 0 at the start of every forward (one NCCL broadcast; the "
        f"forward's kernels wait on it): at 220-380 GB/s {rng(b, 'c.buffer_broadcast_before_forward')} ms on both ranks. The "
        f"rest: forward {rng(b, 'c.forward')} ms, backward {rng(b, 'c.backward')} ms with {int(b['buckets'][0])} all-reduce "
        f"buckets ({4 * b['params_m'][0]:.0f} MB at 200-300 GB/s, {rng(b, 'c.allreduce_total_overlapped')} ms overlapped, "
        f"{rng(b, 'c.allreduce_left_after_backward')} ms left after the backward), AMP casts + fused AdamW + DDP bucket copies "
        f"{rng(b, 'c.amp_casts_adam_ddp_copies')} ms. Step {rng(b, 'step', 1)} ms; without the broadcast {rng(b, 'after', 1)} ms: "
        f"removed {rng(b, 'rm.buffer_broadcast', 1)} ms = {rng(b, 'share.buffer_broadcast', 1)} % -> high (H200: "
        f"{rng(b2, 'share.buffer_broadcast', 1)} %). New cause name: buffer_broadcast.",
        accept=["buffer_broadcast", "exposed_communication"], b2=b2)]
    m["tolerated"] = [{"what": "the all-reduce left after the backward (the first layer's bucket)", "cause": "exposed_communication",
                       "max_severity": "low", "share_pct": r2(b["tail_share"])},
                      {"what": "GELU / gather / cast kernels under autocast", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("Our 2-GPU DDP tagger on H200s (frozen pretrained token vectors, a 4-layer MLP, 8192 rows per GPU) spends a "
                     "large part of every step in NCCL although the model has only ~38 M trainable parameters. Is the "
                     "gradient all-reduce the problem?")
    m["diagnosis"] = (f"Not the gradient all-reduce (it overlaps the backward but for a small tail): at the start of every forward "
                      f"both GPUs run an NCCL broadcast of the 384 MB frozen table, which the model registers as a buffer; DDP's "
                      f"default broadcast_buffers=True re-sends every buffer from rank 0 each step "
                      f"({rng(b2, 'c.buffer_broadcast_before_forward', 1)} ms). The table never changes: broadcast_buffers=False "
                      f"(or keep it out of the buffers): ~{rng(b2, 'step', 1)} -> ~{rng(b2, 'after', 1)} ms per step "
                      f"({rng(b2, 'share.buffer_broadcast', 0)} %, high).")
    m["measure"] = [{"what": "step period per rank", "query": Q5["step"] + " (both ranks)", "expect_ms": r2(b["step"])},
                    {"what": "NCCL kernels", "query": Q5["nccl"],
                     "expect": f"per step and rank one Broadcast kernel of {rng(b, 'c.buffer_broadcast_before_forward', 1)} ms at the "
                               f"start of the forward range, then {int(b['buckets'][0])} AllReduce kernels during the backward"}]
    m["new_cause"] = {"name": "buffer_broadcast", "why": "DDP's per-forward broadcast of module buffers (broadcast_buffers=True) "
                      "that never change: communication on the critical path that is not gradient synchronisation; "
                      "exposed_communication is accepted, but the fix (broadcast_buffers=False, or not a buffer) removes the "
                      "traffic instead of overlapping it"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.table)
