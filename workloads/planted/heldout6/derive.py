#!/usr/bin/env python3
"""First-principles truth for the sixth held-out set (heldout6): writes heldout6/manifests/<case>.json from FLOPs,
bytes, launch / sync counts and rate bands alone (no capture, no aisp output), with the helpers of ../derive.py.

    python3 workloads/planted/heldout6/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout6/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout6/derive.py --table    # the README table only

Method: as ../derive.py and heldout4/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or round trips x a host latency; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the device where the
problem sits; severity: info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical. New bands (each with its
source in the manifests' `rates`): the rate of a transposing `.contiguous()` copy, CPython tokenisation and
list-to-tensor costs per word, torch.save's host throughput and fixed cost, and the host cost of one dist.all_reduce
call; four bands of heldout4/5 are copied here with their sources so that this set depends on no other held-out set.
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

SET = "heldout6"

# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms, ns; bytes as named.
NEW_H100 = {
    # copied from heldout4/5 (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    "eager_op_us": (20.0, 70.0),
    "mlp_block_ew_tokd_bytes": (60.0, 95.0),
    # new here
    "transpose_copy_tbs": (0.8, 2.8),
    "py_token_ns": (120.0, 400.0),
    "list_tensor_ns": (15.0, 80.0),
    "save_gbs": (0.4, 3.0),
    "save_fixed_ms": (0.2, 2.0),
    "c10d_call_us": (25.0, 80.0),
}
NEW_H200 = dict(NEW_H100, transpose_copy_tbs=(1.0, 3.8))
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 1024 (or a varying M): below the 8192^3 rate (732-787 measured) as "
                       "tiles and waves shrink and the epilogue's writes weigh more; an assumption widened down to 550 "
                       "(heldout2-5). Used for every GEMM whose smallest dimension is <= 2048",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: torch "
                     "busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (quoted by heldout2/derive.py); band 200-300 "
                     "(heldout3-5)",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing: 29-36 µs "
                   "measured (quoted by ../derive.py), ~70 implied by heldout2; band 20-70 (heldout3-5)",
    "mlp_block_ew_tokd_bytes": "elementwise bytes per token x d_model of a pre-LN MLP block (LayerNorm, Linear d -> 4d with "
                               "bias, GELU, Linear 4d -> d with bias, residual add), pure bf16, forward + backward: ~74; band "
                               "60-95 (heldout5)",
    "transpose_copy_tbs": "achieved bytes (read + written) per second of `x.permute(0, 2, 1).contiguous()` on a bf16 (8, 2048, "
                          "2048) tensor: PyTorch's generic strided copy kernel (TensorIterator, no tiled transpose) writes "
                          "contiguously but reads 2-byte elements 4 KB apart, relying on L2 to merge the sectors; a plain "
                          "DtoD copy reaches 3.0 TB/s on H100 (../derive.py), a transposing one typically 30-90 % of it; band "
                          "0.8-2.8 TB/s on H100, 1.0-3.8 on H200 (assumption, wide on purpose)",
    "py_token_ns": "CPython time per word of `[vocab.get(w.lower(), UNK) for w in doc]`: w.lower() allocates a new 8-10 "
                   "character str (50-120 ns), its hash is computed afresh (10-30 ns), the dict probe (20-60 ns), the "
                   "comprehension's append and loop (15-40 ns); 100-250 ns on a fast server core, more on a slower one or "
                   "under osrt tracing; band 120-400 ns (assumption)",
    "list_tensor_ns": "torch.tensor(list of lists of Python ints, dtype=long): per element a PyLong unbox and store after a "
                      "type / shape inference pass over the nested list; 15-80 ns per element (assumption)",
    "save_gbs": "host throughput of torch.save once the tensors are on the host: pickling the state_dict, the zip writer "
                "computing CRC32 over every byte (miniz, ~1-3 GB/s) and writing the records into the page cache (memcpy-"
                "bound, 3-10 GB/s) on one thread; band 0.4-3.0 GB/s (assumption)",
    "save_fixed_ms": "fixed cost of one torch.save of a 3-tensor state_dict: opening / truncating the file, the zip "
                     "headers, pickling the small dict, closing; 0.2-2 ms (assumption)",
    "c10d_call_us": "host cost of one `dist.all_reduce(t)` from Python with the NCCL backend: argument checks, work object, "
                    "events recorded on the compute and NCCL streams, the ncclAllReduce enqueue (its cudaLaunchKernel); "
                    "somewhat above an eager op's 20-70 µs; band 25-80 µs (assumption). Used only to show that the host "
                    "keeps ahead",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q6 = dict(Q)
Q6.update({
    "nvtx_ranges": "sql/nvtx_range_ms.sql: CPU duration of each NVTX range name (count, mean, min, max)",
    "starved": "sql/launch_starved_idle.sql: GPU idle split into gaps whose next kernel had not been launched yet "
               "(the GPU waits for the host) and other gaps, between T0 and T1",
})


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


# ---------------------------------------------------------------------------------------------------
# DDP on 2 ranks: a timeline of the backward with DDP's buckets (as heldout4/5).
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

# layout_mixer: (8, 2048, 2048) bf16 channel-first; 8 layers of permute-copy, addmm (residual folded), permute-copy.
LM = dict(batch=8, channels=2048, time=2048, layers=8, steps=40)


def m_layout(r, fixed=False):
    R, C, L = LM["batch"] * LM["time"], LM["channels"], LM["layers"]
    gemm_layer = t_flops(2.0 * R * C * C, r["bf16_mid_tflops"])
    copy_layer = t_bytes(2 * 4.0 * R * C, r["transpose_copy_tbs"])
    c = {"gemm_bf16": L * gemm_layer,
         "score_mean": t_bytes(2.0 * R * C, r["hbm_tbs"])}
    if not fixed:
        c["permute_copies"] = L * copy_layer
    step = sum(c.values())
    host_layer = (1 if fixed else 3) * r["eager_op_us"] / 1e3
    gpu_layer = gemm_layer + (0.0 if fixed else copy_layer)
    out = {"c": c, "step": step, "layer_gpu_ms": gpu_layer, "layer_host_ms": host_layer,
           "host_margin_per_layer_ms": gpu_layer - host_layer, "copy_gb": 0.0 if fixed else L * 8.0 * R * C / GB,
           "gemm_share": pct(c["gemm_bf16"], step), "mean_share": pct(c["score_mean"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    rm = {"layout_copy": c["permute_copies"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": step - rm["layout_copy"]})
    return out


# ckpt_save: MLP 1024 -> 2048 -> 2048 -> 1024 (bias-free, GELU, fp32 params, autocast), 32768 rows, fused AdamW;
# torch.save(model.state_dict()) every step.
CK = dict(rows=32768, dims=[1024, 2048, 2048, 1024], steps=25)


def m_ckpt(r, fixed=False):
    R, dims = CK["rows"], CK["dims"]
    hbm = r["hbm_tbs"]
    P = float(mlp_params(dims))
    c = {"gemm_bf16": t_flops(mlp_train_flops(R, dims), r["bf16_mid_tflops"]),
         "gelu_bf16": t_bytes(gelu_train_bytes(R, dims, 2), hbm),
         "input_cast_loss": t_bytes(6.0 * R * dims[0] + LOSS_B * R * dims[-1], hbm),
         "amp_casts_adamw_fused": t_bytes((AMP_B + ADAM_B[4]) * P, hbm)}
    gpu = sum(c.values())
    if not fixed:
        # the GPU idles from the end of the step's work until the next step's first kernel: the D2H copies of the
        # state_dict (pageable, synchronous), the host's serialisation and write, then one eager op to issue again
        c["save_d2h_pageable"] = t_link(4.0 * P, r["d2h_pageable_gbs"])
        c["save_serialise_write"] = t_link(4.0 * P, r["save_gbs"]) + r["save_fixed_ms"]
        c["restart_gap"] = r["eager_op_us"] / 1e3
    step = sum(c.values())
    out = {"c": c, "step": step, "gpu_busy_ms": gpu, "params_m": P / 1e6, "ckpt_mb": 4.0 * P / 1e6,
           "gemm_share": pct(c["gemm_bf16"], step), "gelu_share": pct(c["gelu_bf16"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    rm = {"checkpoint_io": step - gpu}
    out.update({"rm": rm, "share": shares(rm, step), "after": gpu, "gpu_idle_share": pct(step - gpu, step)})
    return out


# text_tagger: 128 docs x 512 words tokenised in Python every step; emb 50000 x 1024, MLP 1024 -> 2048 -> 1024, 256 tags.
TT = dict(docs=128, words=512, vocab=50000, d=1024, hidden=2048, tags=256, steps=25)
TT_HOST_OPS = 20  # Python-level ops that issue GPU work per step (forward, loss, backward call, optimizer, bookkeeping)


def m_text(r, fixed=False):
    N, V, d, h, K = TT["docs"] * TT["words"], TT["vocab"], TT["d"], TT["hidden"], TT["tags"]
    hbm = r["hbm_tbs"]
    P_lin = 2.0 * d * h + d * K
    P = V * d + P_lin
    c = {"gemm_bf16": t_flops(3 * 2.0 * N * P_lin, r["bf16_mid_tflops"]),
         # embedding gather fp32 (r4 w4), residual add fp32 + bf16 (r4 r2 w4) and its backward (~8), embedding
         # backward (sort + accumulate, ~12): 38 B per token x d; GELU bf16 on h: 10 B; zeroed embedding gradient;
         # logits / cross-entropy ~30 B per token x tag
         "elementwise": t_bytes(38.0 * N * d + 10.0 * N * h + 4.0 * V * d + 30.0 * N * K, hbm),
         "amp_casts_adamw_fused": t_bytes(AMP_B * P_lin + ADAM_B[4] * P, hbm)}
    gpu = sum(c.values())
    issue = TT_HOST_OPS * r["eager_op_us"] / 1e3
    collate = N * (r["py_token_ns"] + r["list_tensor_ns"]) / 1e6 + t_link(8.0 * N, r["h2d_pageable_gbs"])
    host = issue + (0.0 if fixed else collate)
    step = max(gpu, host)
    if step > gpu:
        c["gpu_idle_waiting_for_host"] = step - gpu
    out = {"c": c, "step": step, "gpu_busy_ms": gpu, "host_collate_ms": 0.0 if fixed else collate, "host_issue_ms": issue,
           "tokens": N, "gemm_share": pct(c["gemm_bf16"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = max(gpu, issue)
    rm = {"host_bound": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after})
    return out


# ddp2_manual: 2 ranks, 16 pre-LN blocks d 1024 -> 4096 (biases), final LN, head; pure bf16; 4096 rows per rank;
# one dist.all_reduce(AVG) per parameter tensor after the backward.
DM = dict(rows=4096, d=1024, hidden=4096, blocks=16, steps=25)


def dm_tensors():
    d, h, L = DM["d"], DM["hidden"], DM["blocks"]
    sizes = []
    for _ in range(L):
        sizes += [d, d, h * d, h, d * h, d]
    sizes += [d, d, d * d, d]
    return sizes


def m_manual(r, fixed=False):
    R, d, h, L = DM["rows"], DM["d"], DM["hidden"], DM["blocks"]
    hbm = r["hbm_tbs"]
    sizes = dm_tensors()
    P, N = float(sum(sizes)), len(sizes)
    blk_fwd = t_flops(2.0 * R * 2 * d * h, r["bf16_mid_tflops"])
    blk_ew = t_bytes(r["mlp_block_ew_tokd_bytes"] * R * d, hbm)
    c = {"gemm_bf16_fwd_bwd": 3 * L * blk_fwd + t_flops(3 * 2.0 * R * d * d, r["bf16_mid_tflops"]),
         "block_elementwise": L * blk_ew + t_bytes(10.0 * R * d, hbm),
         "loss_mse": t_bytes(LOSS_B * R * d, hbm),
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    host_issue = (L * 5 + 10) * r["eager_op_us"] / 1e3
    if fixed:
        nodes = [(t_flops(2 * 2.0 * R * d * d, r["bf16_mid_tflops"]), 2.0 * (d * d + 3 * d))]
        nodes += [(2 * blk_fwd + blk_ew * 0.6, 2.0 * (2 * d * h + h + 3 * d)) for _ in range(L)]
        _, left, total, nb = ddp_timeline(r, nodes)
        c["allreduce_left_after_backward"] = left
        c["ddp_bucket_copies"] = t_bytes(2 * 2.0 * P, hbm)
        c["overlap_slowdown"] = r["overlap_penalty"] * (total - left)
        step = sum(c.values())
        out = {"c": c, "step": step, "buckets": nb, "params_m": P / 1e6, "tensors": N, "host_issue_ms": host_issue,
               "host_margin_ms": step - host_issue, "rm": {}, "share": {}, "after": None}
        return out
    # one NCCL all-reduce per tensor on the NCCL stream, back to back after the backward: latency + bytes / algbw each
    chain = sum(t_link(2.0 * s, r["ar2_algbw_gbs"]) + r["ar_small_us"] / 1e3 for s in sizes)
    c["per_tensor_allreduce_after_backward"] = chain
    host = host_issue + N * r["c10d_call_us"] / 1e3
    step = max(sum(c.values()), host)  # the host issues 100 calls; at its slowest corner it may set the pace
    if step > sum(c.values()):
        c["gpu_idle_waiting_for_host"] = step - sum(c.values())
    fx = m_manual(r, fixed=True)
    rm = {"per_tensor_allreduce": step - fx["step"]}
    out = {"c": c, "step": step, "params_m": P / 1e6, "tensors": N, "grad_mb": 2.0 * P / 1e6,
           "latency_part_ms": N * r["ar_small_us"] / 1e3, "host_ms": host, "host_margin_ms": step - host,
           "ew_share": pct(c["block_elementwise"], step), "rm": rm, "share": shares(rm, step), "after": fx["step"],
           "ddp_buckets": fx["buckets"]}
    return out


# pad_tagger: 16 sequences (real lengths 64-256) padded to 2048; per-token MLP 1024 -> 4096 -> 1024 -> 4096 -> 1024 -> 64,
# pure bf16, fused AdamW, masked cross-entropy.
PT = dict(batch=16, min_len=64, max_len=256, pad_to=2048, dims=[1024, 4096, 1024, 4096, 1024, 64], steps=25)
PT_HOST_OPS = 16  # 5 Linear, 4 GELU, float, cross-entropy, backward call, optimizer, zero_grad, loss copy, event


def m_pad(r, fixed=False):
    dims = PT["dims"]
    R = PT["batch"] * (PT["max_len"] if fixed else PT["pad_to"])
    hbm = r["hbm_tbs"]
    P = float(mlp_params(dims))
    c = {"gemm_bf16": t_flops(mlp_train_flops(R, dims), r["bf16_mid_tflops"]),
         "gelu_bf16": t_bytes(gelu_train_bytes(R, dims, 2), hbm),
         # logits.float() r2 w4, cross-entropy forward / backward ~30 B, per row x tag
         "cross_entropy": t_bytes(36.0 * R * dims[-1], hbm),
         "adamw_fused_bf16": t_bytes(ADAM_B[2] * P, hbm)}
    gpu = sum(c.values())
    host = PT_HOST_OPS * r["eager_op_us"] / 1e3
    step = max(gpu, host)
    if step > gpu:
        c["gpu_idle_waiting_for_host"] = step - gpu
    out = {"c": c, "step": step, "gpu_busy_ms": gpu, "host_ms": host, "rows": R, "params_m": P / 1e6,
           "gemm_share": pct(c["gemm_bf16"], step)}
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    after = m_pad(r, fixed=True)["step"]
    rm = {"padding_waste": step - after}
    out.update({"rm": rm, "share": shares(rm, step), "after": after, "host_margin_ms": gpu - host})
    return out


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, ranks=1, nvtx=True, est=45, steps=25, warmup=3):
    return D.base(name, f"heldout6/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
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

    # ---- layout_mixer (layout_copy) and layout_mixer.fixed --------------------------------------------------------
    B, C, T, L = LM["batch"], LM["channels"], LM["time"], LM["layers"]
    R = B * T
    args = ["--batch", B, "--channels", C, "--time", T, "--layers", L]
    b, b2, keys = ev(m_layout)
    m = base("layout_mixer", "layout_mixer.py", "planted", args, steps=LM["steps"], est=40)
    m["uses"] = uses("bf16 (weights and compute)", "none (inference)",
                     host_sync="event sync on the previous batch (lag 1: never idles the GPU)")
    m["techniques"] = techniques(
        "keep one layout through the stack: have the frontend emit time-major activations (or transpose once at entry) and "
        "run every projection on the (batch x time, channels) view, instead of two permute(...).contiguous() copies per layer",
        ["CUDA graphs (GPU-bound: ~25 launches per 2-4 ms batch)", "bf16 (already)", "TF32 (no fp32 GEMMs)",
         "flash/fused attention (no attention in this run)", "pinned memory / data loading (inputs resident on the GPU)",
         "optimizer changes (inference)", "a faster transpose kernel as the top fix (the copies need not exist)",
         "elementwise fusion / torch.compile of activations (there are none)"])
    m["planted"] = [planted(
        "layout_copy", {"device": "GPU 0", "region": f"step_N > forward: {2 * L} copy kernels per batch, one before and one "
                        "after each GEMM, each reading and writing the whole 67 MB activation"},
        "a time-major layout throughout (--fixed, captured as layout_mixer.fixed)", b, "rm.layout_copy", "share.layout_copy",
        f"Activations are ({B}, {C}, {T}) bf16 = {2 * R * C / 1e6:.0f} MB. Each of the {L} layers runs "
        f"x.permute(0, 2, 1).contiguous() before its GEMM and again after it: {2 * L} transposing copies of 4 B per element "
        f"(read 2, write 2) = {b['copy_gb'][0]:.2f} GB per batch, at 0.8-2.8 TB/s for a strided (transposing) copy = "
        f"{rng(b, 'c.permute_copies')} ms. The GEMMs: {L} x 2 x {R} x {C} x {C} = {L * 2 * R * C * C / 1e12:.2f} TFLOP at "
        f"550-800 = {rng(b, 'c.gemm_bf16')} ms (the residual is folded into addmm's beta = 1 epilogue); the score reads the "
        f"output once ({rng(b, 'c.score_mean', 3)} ms). Batch {rng(b, 'step', 2)} ms; time-major {rng(b, 'after', 2)} ms: "
        f"removed {rng(b, 'rm.layout_copy', 2)} ms = {rng(b, 'share.layout_copy', 1)} % -> critical, high at the fast-copy "
        f"end (H200 at 1.0-3.8 TB/s for the copies: {rng(b2, 'share.layout_copy', 1)} %). GPU-bound: per layer "
        f"{rng(b, 'layer_gpu_ms', 2)} ms of GPU work against {rng(b, 'layer_host_ms', 2)} ms of host issue. New cause name: "
        "layout_copy.", accept=["layout_copy", "elementwise_unfused", "copy_many_small"], b2=b2)]
    m["tolerated"] = []
    m["expect_quiet"] = False
    m["question"] = ("Here are two profiles of our 1-D signal encoder's batch inference on an H200 (bf16, 8 channel-mixing "
                     "projection layers over 8 x 2048 channels x 2048 time steps), before and after we changed the tensor "
                     "layout the layers work on. Did the change help, by how much per batch, and what limits it now?")
    m["diagnosis"] = (f"Before: every layer transposes the activations to time-major with permute(...).contiguous() and back "
                      f"after its GEMM, {2 * L} copy kernels of 67 MB each per batch ({rng(b2, 'c.permute_copies', 2)} ms of "
                      f"a {rng(b2, 'step', 2)} ms batch on an H200). After: time-major throughout, no copies: "
                      f"{rng(b2, 'after', 2)} ms; the change removed {rng(b2, 'share.layout_copy', 0)} % of the batch "
                      f"(critical; high at the fast-copy end). Now the bf16 GEMMs are ~{rng(ev(lambda r: m_layout(r, True))[1], 'gemm_share', 0)} % of the "
                      "batch at tensor-core rate: compute-bound, nothing above low.")
    m["measure"] = [{"what": "batch period", "query": Q6["step"], "expect_ms": r2(b["step"])},
                    {"what": "the copies", "query": Q6["kernels"] + " (divide by the steps)",
                     "expect": f"{2 * L} copy (elementwise / direct_copy) kernels per batch, {rng(b, 'c.permute_copies', 2)} ms "
                               f"together, {2 * R * C} bytes read and written each"}]
    m["new_cause"] = {"name": "layout_copy", "why": "full copies made only to change a tensor's memory layout "
                      "(permute / transpose followed by .contiguous(), channels-first <-> channels-last) inside the model, "
                      "every layer or every step; memory-bound copy kernels (elementwise_unfused and copy_many_small "
                      "accepted), but the fix is keeping one layout, not fusing or speeding up the copy"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="layout_mixer.fixed")

    b, b2, keys = ev(lambda r: m_layout(r, fixed=True))
    m = base("layout_mixer.fixed", "layout_mixer.py", "fixed", args + ["--fixed"], steps=LM["steps"], est=35)
    m["uses"] = uses("bf16 (weights and compute)", "none (inference)",
                     host_sync="event sync on the previous batch (lag 1: never idles the GPU)")
    m["techniques"] = techniques(None, ["a layout change (already time-major)", "bf16 (already)", "TF32 (no fp32 GEMMs)",
                                        "CUDA graphs (GPU-bound: ~10 launches per 1.4-2 ms batch)",
                                        "flash/fused attention (no attention in this run)", "optimizer changes (inference)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "the score's mean reduction", "cause": "elementwise_unfused", "max_severity": "low",
                       "share_pct": r2(b["mean_share"])}]
    m["expect_quiet"] = True
    m["question"] = "We now keep the activations time-major. Is anything still holding the batch time back?"
    m["diagnosis"] = (f"No: a batch is ~{rng(b, 'step', 2)} ms, {rng(b, 'gemm_share', 0)} % of it {L} bf16 GEMMs at tensor-core "
                      f"rate, one reduction ~{rng(b, 'mean_share', 1)} %; no copies, the host a batch ahead. Nothing above low.")
    m["measure"] = [{"what": "batch period", "query": Q6["step"], "expect_ms": r2(b["step"])},
                    {"what": "kernels", "query": Q6["kernels"] + " (divide by the steps)",
                     "expect": f"{L} GEMM kernels and one reduction per batch, no copy kernels"}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- ckpt_save (checkpoint_io) ---------------------------------------------------------------------------------
    Rk, kd = CK["rows"], CK["dims"]
    args = ["--rows", Rk, "--dims", ",".join(map(str, kd))]
    b, b2, keys = ev(m_ckpt)
    m = base("ckpt_save", "ckpt_save.py", "planted", args, steps=CK["steps"], est=50)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused",
                     host_sync="torch.save of CUDA tensors every step (synchronous D2H copies); event sync on the previous step")
    m["techniques"] = techniques(
        "checkpoint far less often (every few hundred steps or minutes), or asynchronously: copy the state_dict into "
        "pinned host buffers on a side stream and serialise / write it on a background thread (torch.distributed.checkpoint "
        "async_save), so the training loop never waits for the file",
        ["CUDA graphs / launch overhead (the GPU idles for the file write, not for launches)", "bf16 (already)",
         "fused optimizer (already)", "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory alone as the fix (the serialisation and write stay on the critical path)",
         "data loading (batches resident on the GPU)", "a faster disk as the top fix"])
    m["planted"] = [planted(
        "checkpoint_io", {"device": "GPU 0", "region": "step_N > checkpoint: three D2H copies of the weights, then a long "
                          "host-only span (serialise, CRC, write) with the GPU idle until the next step's forward"},
        "the checkpoint written once after the loop (--fixed; not captured)", b, "rm.checkpoint_io", "share.checkpoint_io",
        f"The model has {b['params_m'][0]:.1f} M fp32 parameters: torch.save(model.state_dict()) every step writes "
        f"{b['ckpt_mb'][0]:.1f} MB. The GPU tensors are first copied to pageable host memory (synchronous, after the step's "
        f"kernels finish: at 4-14 GB/s {rng(b, 'c.save_d2h_pageable')} ms), then pickled, CRC'd and written at 0.4-3 GB/s "
        f"plus 0.2-2 ms of fixed cost ({rng(b, 'c.save_serialise_write', 1)} ms) while no GPU work is queued. The step's own "
        f"GPU work: GEMMs {mlp_train_flops(Rk, kd) / 1e12:.2f} TFLOP at 550-800 = {rng(b, 'c.gemm_bf16')} ms, GELU / casts / "
        f"loss / fused AdamW {r2([b['c.gelu_bf16'][0] + b['c.input_cast_loss'][0] + b['c.amp_casts_adamw_fused'][0], b['c.gelu_bf16'][1] + b['c.input_cast_loss'][1] + b['c.amp_casts_adamw_fused'][1]])} ms: "
        f"{rng(b, 'gpu_busy_ms')} ms. Step {rng(b, 'step', 1)} ms; without the per-step save {rng(b, 'after', 2)} ms: removed "
        f"{rng(b, 'rm.checkpoint_io', 1)} ms = {rng(b, 'share.checkpoint_io', 1)} % -> critical (H200: "
        f"{rng(b2, 'share.checkpoint_io', 1)} %). New cause name: checkpoint_io.",
        accept=["checkpoint_io", "host_bound", "host_sync", "copy_bound_pageable"], b2=b2)]
    m["tolerated"] = [{"what": "the D2H copies of the state_dict (pageable)", "cause": "copy_bound_pageable",
                       "max_severity": "high"},
                      {"what": "GELU / casts / loss kernels", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("Our small regression MLP (8.4 M parameters, 32768 rows per step, bf16 autocast) trains on one H200 at "
                     "low GPU utilisation. The model is tiny but the steps are slow. Why?")
    m["diagnosis"] = (f"The checkpoint range: every step torch.save writes the model's state_dict ({b['ckpt_mb'][0]:.1f} MB): "
                      f"synchronous pageable D2H copies, then pickling, CRC and the file write on the main thread while "
                      f"nothing is queued on the GPU ({rng(b2, 'rm.checkpoint_io', 0)} ms of a {rng(b2, 'step', 0)} ms step on "
                      f"an H200). Checkpoint every few hundred steps, or asynchronously (pinned copies + a background writer): "
                      f"~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.checkpoint_io', 0)} %, critical). The GEMMs run at "
                      "tensor-core rate and AdamW is fused.")
    m["measure"] = [{"what": "step period", "query": Q6["step"], "expect_ms": r2(b["step"])},
                    {"what": "the checkpoint range", "query": Q6["nvtx_ranges"] + " (checkpoint)",
                     "expect": f"{rng(b, 'rm.checkpoint_io', 1)} ms per step of CPU time, 3 D2H pageable copies inside it"}]
    m["new_cause"] = {"name": "checkpoint_io", "why": "saving a checkpoint (torch.save / file write) synchronously inside "
                      "the training loop every step: D2H copies, serialisation and disk or page-cache writes on the "
                      "critical path with the GPU idle; host_bound / host_sync / copy_bound_pageable are accepted, but the "
                      "fix is saving less often or asynchronously"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- text_tagger (host_bound; no NVTX) --------------------------------------------------------------------------
    args = ["--docs", TT["docs"], "--words", TT["words"], "--vocab", TT["vocab"], "--d-model", TT["d"],
            "--hidden", TT["hidden"], "--tags", TT["tags"]]
    b, b2, keys = ev(m_text)
    N = TT["docs"] * TT["words"]
    m = base("text_tagger", "text_tagger.py", "planted", args, nvtx=False, steps=TT["steps"], est=50)
    m["uses"] = uses("bf16 autocast, fp32 parameters", "AdamW fused",
                     host_sync="pageable H2D of the token ids each step; event sync on the previous step")
    m["uses"]["data_loading"] = "Python tokenisation and collate on the main thread, no DataLoader workers"
    m["techniques"] = techniques(
        "take the tokenisation off the training thread: pre-tokenise the corpus once (a token-id dataset), or tokenise "
        "in DataLoader workers (num_workers > 0, pin_memory=True) or with a batched (Rust / C++) tokenizer, so the GPU "
        "step never waits for Python string work",
        ["CUDA graphs / launch overhead as the top fix (the host time is tokenisation, not kernel launches)",
         "bf16 (already)", "fused optimizer (already)", "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory as the top fix (the copy is 0.5 MB)", "activation checkpointing", "a larger batch as the top fix"])
    m["planted"] = [planted(
        "host_bound", {"device": "GPU 0", "region": "every iteration (no NVTX): a long gap with no kernel before each step's "
                       "small H2D copy of the token ids, the CPU busy in Python (no CUDA calls) throughout the gap"},
        "token ids pre-computed once (--fixed; not captured)", b, "rm.host_bound", "share.host_bound",
        f"Each step tokenises {TT['docs']} documents x {TT['words']} words = {N} words in Python on the main thread "
        f"(w.lower() + dict lookup, 120-400 ns per word) and builds the id tensor with torch.tensor on nested lists "
        f"(15-80 ns per element), then a {8 * N // 1024} KB pageable H2D copy: {rng(b, 'host_collate_ms', 1)} ms of host "
        f"time per step, during which the GPU, having finished the previous step, waits. The GPU step: GEMMs "
        f"{6 * N * (2 * TT['d'] * TT['hidden'] + TT['d'] * TT['tags']) / 1e12:.2f} TFLOP at 550-800 = {rng(b, 'c.gemm_bf16')} ms, "
        f"embedding / GELU / residual / cross-entropy {rng(b, 'c.elementwise')} ms, AMP casts + fused AdamW over the 51 M-"
        f"parameter table {rng(b, 'c.amp_casts_adamw_fused')} ms: {rng(b, 'gpu_busy_ms')} ms. Step = host time "
        f"{rng(b, 'step', 1)} ms; with ids ready {rng(b, 'after', 2)} ms: removed {rng(b, 'rm.host_bound', 1)} ms = "
        f"{rng(b, 'share.host_bound', 1)} % -> critical (H200: {rng(b2, 'share.host_bound', 1)} %).",
        accept=["host_bound", "data_loading", "launch_bound"], b2=b2)]
    m["tolerated"] = [{"what": "the small pageable H2D copy of the ids", "cause": "copy_bound_pageable", "max_severity": "low"},
                      {"what": "embedding / GELU / cross-entropy kernels", "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expect_quiet"] = False
    m["question"] = ("We fine-tune a token tagger (50k-word embedding, a small MLP, 256 tags) on raw text, 128 documents of "
                     "512 words per step, on one H200. nvidia-smi shows the GPU mostly idle. What is holding it back?")
    m["diagnosis"] = (f"The host: every step the main thread tokenises {N} words in Python and builds the id tensor from "
                      f"nested lists ({rng(b2, 'host_collate_ms', 0)} ms) with no DataLoader workers, while the GPU's own "
                      f"step is only {rng(b2, 'gpu_busy_ms', 1)} ms; the GPU waits in a long kernel-free gap before each "
                      f"tiny H2D copy. Pre-tokenise once, or tokenise in DataLoader workers / a batched tokenizer: "
                      f"~{rng(b2, 'step', 0)} -> ~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.host_bound', 0)} %, "
                      "critical). Not launch overhead: the host time is Python string work, not CUDA calls.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q6["anchor"] + " with ANCHOR = the fused AdamW kernel (once per "
                     "step), C = 1, WARM = 3", "expect_ms": r2(b["step"])},
                    {"what": "idle split", "query": Q6["starved"] + " over one step",
                     "expect": f"{rng(b, 'c.gpu_idle_waiting_for_host', 1)} ms of idle per step in one gap before the H2D "
                               "copy, the next kernel not yet launched"}]
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- ddp2_manual (per_tensor_allreduce) ------------------------------------------------------------------------
    args = ["--rows", DM["rows"], "--d-model", DM["d"], "--hidden", DM["hidden"], "--blocks", DM["blocks"]]
    b, b2, keys = ev(m_manual)
    Nt = len(dm_tensors())
    m = base("ddp2_manual", "ddp2_manual.py", "planted", args, ranks=2, steps=DM["steps"], est=80)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", ddp=False,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["data_parallel"] = f"hand-written: one dist.all_reduce(AVG) per parameter tensor ({Nt}) after the backward"
    m["techniques"] = techniques(
        "use DistributedDataParallel (25 MB buckets, all-reduces launched during the backward as gradients become ready), "
        f"or at least flatten the gradients into a few buckets: {Nt} tiny-to-medium serial NCCL calls after the backward "
        "become ~6 bucketed calls hidden under it",
        ["NCCL / interconnect tuning (per-call latency and serialisation after the backward are the problem)",
         "gradient compression", "a slow GPU or straggler rank (both ranks wait the same time)", "bf16 (already)",
         "fused optimizer (already)", "flash/fused attention (no attention in this run)", "CUDA graphs as the top fix",
         "pinned memory / data loading (batches resident on the GPU)"])
    m["planted"] = [planted(
        "per_tensor_allreduce", {"ranks": [0, 1], "region": f"step_N > allreduce: {Nt} NCCL AllReduce kernels back to back "
                                 "after the last backward kernel, none overlapping compute"},
        "DistributedDataParallel with default buckets (--fixed; not captured)", b, "rm.per_tensor_allreduce",
        "share.per_tensor_allreduce",
        f"{Nt} parameter tensors ({b['params_m'][0]:.1f} M bf16 parameters, {b['grad_mb'][0]:.0f} MB of gradients), each "
        f"averaged with its own dist.all_reduce after loss.backward() returns: {Nt} calls x 15-40 µs of per-call latency "
        f"({rng(b, 'latency_part_ms')} ms) plus {b['grad_mb'][0]:.0f} MB at 200-300 GB/s, serial on the NCCL stream and "
        f"after all backward work: {rng(b, 'c.per_tensor_allreduce_after_backward')} ms per step on both ranks. The host "
        f"issues {Nt} calls at 25-80 µs each; at its slowest corner it sets the pace ({rng(b, 'host_ms', 1)} ms of host work "
        f"per step). Compute: GEMMs at 550-800 {rng(b, 'c.gemm_bf16_fwd_bwd')} ms, LayerNorm / GELU / residual / bias "
        f"gradients {rng(b, 'c.block_elementwise')} ms, fused AdamW {rng(b, 'c.adamw_fused_bf16')} ms. Step "
        f"{rng(b, 'step', 1)} ms; with DDP ({int(b['ddp_buckets'][0])} buckets overlapped with the backward, a small tail, "
        f"bucket copies) {rng(b, 'after', 1)} ms: removed {rng(b, 'rm.per_tensor_allreduce', 1)} ms = "
        f"{rng(b, 'share.per_tensor_allreduce', 1)} % -> high, critical at the slow-host corner (H200: "
        f"{rng(b2, 'share.per_tensor_allreduce', 1)} %). New cause name: per_tensor_allreduce.",
        accept=["per_tensor_allreduce", "exposed_communication"], b2=b2)]
    m["tolerated"] = [{"what": "LayerNorm / GELU / residual / bias-gradient kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a 16-block residual MLP (d 1024, ~134 M bf16 parameters) data-parallel on 2 H200s with our own "
                     "gradient averaging loop instead of DDP, 4096 rows per GPU. Scaling from 1 to 2 GPUs looks poor. Where "
                     "does the time go?")
    m["diagnosis"] = (f"Into the allreduce range: after the backward the loop calls dist.all_reduce once per parameter tensor, "
                      f"{Nt} NCCL calls per step, mostly tiny (LayerNorm weights, biases), serial and after all compute "
                      f"({rng(b2, 'c.per_tensor_allreduce_after_backward', 1)} ms per step on an H200, the GPU computing nothing). "
                      f"Use DistributedDataParallel (25 MB buckets overlapped with the backward) or bucket the gradients: "
                      f"~{rng(b2, 'step', 1)} -> ~{rng(b2, 'after', 1)} ms ({rng(b2, 'share.per_tensor_allreduce', 0)} %, high). "
                      "Both ranks are equal: no straggler.")
    m["measure"] = [{"what": "step period per rank", "query": Q6["step"] + " (both ranks)", "expect_ms": r2(b["step"])},
                    {"what": "NCCL kernels", "query": Q6["nccl"],
                     "expect": f"{Nt} AllReduce kernels per step and rank, all after the backward's last kernel, "
                               f"{rng(b, 'c.per_tensor_allreduce_after_backward', 1)} ms together"}]
    m["new_cause"] = {"name": "per_tensor_allreduce", "why": "gradients synchronised with one collective per parameter "
                      "tensor, issued after the backward instead of bucketed and overlapped: per-call latency times the "
                      "tensor count, plus all the bytes, exposed; exposed_communication is accepted, but the fix is "
                      "bucketing / DDP rather than a faster link"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- pad_tagger (padding_waste) --------------------------------------------------------------------------------
    pd = PT["dims"]
    args = ["--batch", PT["batch"], "--min-len", PT["min_len"], "--max-len", PT["max_len"], "--pad-to", PT["pad_to"],
            "--dims", ",".join(map(str, pd))]
    b, b2, keys = ev(m_pad)
    real = PT["batch"] * (PT["min_len"] + PT["max_len"]) / 2
    m = base("pad_tagger", "pad_tagger.py", "planted", args, steps=PT["steps"], est=45)
    m["uses"] = uses("bf16 (parameters and compute)", "AdamW fused", sequences=True,
                     host_sync="event sync on the previous step (lag 1: never idles the GPU)")
    m["uses"]["padding"] = f"every batch padded to {PT['pad_to']} tokens; real lengths {PT['min_len']}-{PT['max_len']}"
    m["techniques"] = techniques(
        f"pad each batch only to its longest sequence (at most {PT['max_len']}; length bucketing), or pack the sequences "
        f"into dense rows / drop padded rows before the per-token MLP: {PT['batch']} x {PT['pad_to']} rows per step of "
        f"which ~{real:.0f} are real",
        ["CUDA graphs / launch overhead (GPU-bound: ~60 launches per 5-8 ms step)", "bf16 (already)", "fused optimizer (already)",
         "TF32 (no fp32 GEMMs)", "flash/fused attention (no attention in this run)",
         "pinned memory / data loading (batches resident on the GPU)", "activation checkpointing",
         "faster GEMMs / kernel tuning (the GEMMs run at rate on rows that need not exist)"])
    m["planted"] = [planted(
        "padding_waste", {"device": "GPU 0", "region": f"step_N > forward / backward: every GEMM has M = {PT['batch']} x "
                          f"{PT['pad_to']} = {PT['batch'] * PT['pad_to']} rows"},
        f"pad to {PT['max_len']} (--fixed; not captured)", b, "rm.padding_waste", "share.padding_waste",
        f"{PT['batch']} sequences of {PT['min_len']}-{PT['max_len']} real tokens (~{real:.0f} in all) padded to "
        f"{PT['pad_to']}: {PT['batch'] * PT['pad_to']} rows per step through a per-token MLP of {b['params_m'][0]:.1f} M "
        f"parameters, so all GEMM and GELU work scales with the padded rows. GEMMs "
        f"{mlp_train_flops(PT['batch'] * PT['pad_to'], pd) / 1e12:.2f} TFLOP at 550-800 = {rng(b, 'c.gemm_bf16')} ms, GELUs "
        f"{rng(b, 'c.gelu_bf16')} ms, cross-entropy {rng(b, 'c.cross_entropy')} ms, fused AdamW {rng(b, 'c.adamw_fused_bf16', 3)} "
        f"ms: step {rng(b, 'step')} ms. Padded to {PT['max_len']} ({PT['batch'] * PT['max_len']} rows, every row kept): "
        f"{rng(b, 'after')} ms (the host's {rng(b, 'host_ms')} ms of issue may set the pace there). Removed "
        f"{rng(b, 'rm.padding_waste')} ms = {rng(b, 'share.padding_waste', 1)} % -> critical (H200: "
        f"{rng(b2, 'share.padding_waste', 1)} %). Only the export's GEMM shapes (M = {PT['batch'] * PT['pad_to']}) and the "
        "question's lengths reveal it. New cause name: padding_waste.",
        accept=["padding_waste"], b2=b2)]
    m["tolerated"] = [{"what": "GELU kernels (epilogue fusion)", "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expect_quiet"] = False
    m["question"] = ("We train a per-token tagger (a 4-layer bf16 MLP over 1024-wide token features, 64 tags) on one H200, "
                     "16 sequences per step whose real lengths are 64-256 tokens. A step takes ~5-8 ms, which seems a lot "
                     "for ~2.5k tokens. The GEMMs look efficient. What's wrong?")
    m["diagnosis"] = (f"The GEMMs are efficient but work on {PT['batch'] * PT['pad_to']} rows per step (M = {PT['batch']} x "
                      f"{PT['pad_to']}): every batch is padded to {PT['pad_to']} tokens while at most {PT['max_len']} are real "
                      f"(~{real:.0f} real tokens of {PT['batch'] * PT['pad_to']}, ~{100 * (1 - real / (PT['batch'] * PT['pad_to'])):.0f} % "
                      f"padding). Pad to the batch's longest sequence (<= {PT['max_len']}) or pack: ~{rng(b2, 'step', 1)} -> "
                      f"~{rng(b2, 'after', 1)} ms per step ({rng(b2, 'share.padding_waste', 0)} %, critical).")
    m["measure"] = [{"what": "step period", "query": Q6["step"], "expect_ms": r2(b["step"])},
                    {"what": "GEMM shapes", "query": Q6["kernels"] + " (divide by the steps)",
                     "expect": f"5 forward and 9 backward GEMMs per step, {rng(b, 'c.gemm_bf16')} ms together, every one with "
                               f"{PT['batch'] * PT['pad_to']} rows"}]
    m["new_cause"] = {"name": "padding_waste", "why": "sequences padded far beyond their real lengths (a fixed maximum "
                      "length for every batch), so GEMMs and elementwise kernels run at full rate on rows that carry no "
                      "data; the kernels look efficient, the fix is dynamic padding, bucketing or packing"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.table)
