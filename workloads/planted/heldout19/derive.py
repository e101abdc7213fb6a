#!/usr/bin/env python3
"""First-principles truth for the nineteenth held-out set (heldout19): writes heldout19/manifests/<case>.json from
FLOPs, bytes, call counts and rate bands alone (no capture, no aisp output, no GPU run), with the helpers of
../derive.py and the rate bands of heldout18/derive.py (which carry heldout17's and the earlier sets').

    python3 workloads/planted/heldout19/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout19/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout19/derive.py --table    # the table only

Method: as ../derive.py and heldout11-18/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or calls (elements) x a host cost per call; a quantity's band is its min and max over the
corners of the bands it uses. Shares are "time the fix removes from the critical path / steady step period".

Severity (as heldout11-18): info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical; each planted problem
also carries `severity_legacy` under the earlier sets' bands (1 / 5 / 15 / 40 %).

Made for ONE H200 (like heldout9-10 and heldout18): four one-GPU programs, one of them with a captured fixed variant
(a before/after pair), no multi-rank case: only the smoke and single phases, on kind nvidia-h200.
catalog_recall is GPU-bound (inference: an index_select from a transposed, feature-major embedding table, every
4-byte read in its own DRAM sector); the other three are host-paced: review_tagger (a background thread's json.dumps
of a 262 k-float history holds the GIL every step, the main thread cannot launch), fare_forecast (torch.tensor of a
flat 2.1 M-element Python list per step; no NVTX) and sensor_denoise (the noise of a diffusion-style objective drawn
with torch.randn on the CPU, 33.5 M values, then a pageable 134 MB copy). In the host-paced models the host chain of a
step (the plant, the launches) is serial and the previous step's GPU work hides under it (the throttle lets the host
run one step ahead); the fix's step is the larger of its GPU and host time.
The classes are new (none of heldout-heldout18's): uncoalesced_gather, gil_contention, tensor_from_python_list,
cpu_rng_transfer. Every plant is sized to be the largest removable item at every corner with a wide margin (measured
memory-bound classes have run 1.4-2.8x their bands in earlier sets).
Peak GPU memory: catalog_recall ~4-5 GB (the 1.07 GB table, 2.1 GB of gathered rows; the fixed variant's transpose
copy at load), review_tagger ~8-10 GB, fare_forecast ~3 GB, sensor_denoise ~5-6 GB; host: fare_forecast's two flat
lists ~0.15 GB, sensor_denoise's CPU noise 134 MB.
Software assumed: the capture image's PyTorch 2.11 with CUDA 13, CPython 3.10-3.12 (GIL build; json's C encoder),
on sm_90.
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


H18 = _load("planted_derive18", os.path.join(os.path.dirname(HERE), "heldout18", "derive.py"))  # its rate bands
D = H18.D
ADAM_B, AMP_B = D.ADAM_B, D.AMP_B
pct, r2, rng, techniques, uses = D.pct, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link
step_of, finish_gpu_host = H18.step_of, H18.finish_gpu_host
band19, band_of19, SEV_DOC19 = H18.band18, H18.band_of18, H18.SEV_DOC18
EVENT_SYNC = H18.EVENT_SYNC
mlp_params, mlp_train_flops = H18.mlp_params, H18.mlp_train_flops

SET = "heldout19"

# ---------------------------------------------------------------------------------------------------
# Rate bands: heldout18's (with all the earlier ones), plus these. Units as there.
NEW_H100 = {
    "uncoal_sector_b": (32.0, 64.0),
    "random_sector_eff": (0.3, 0.8),
    "json_float_ns": (150.0, 500.0),
    "list_tensor_ns": (15.0, 120.0),
    "cpu_randn_ns": (0.5, 10.0),
    "history_item_us": (0.5, 3.0),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "uncoal_sector_b": "DRAM bytes moved per useful 4-byte element when a warp's 32 lanes read 32 elements V x 4 "
                       "bytes apart (index_select's source a transposed view: consecutive lanes walk the feature "
                       "dimension, stride 2.1 M elements): one 32-byte L2 sector per lane (Hopper's sector), or a "
                       "64-byte DRAM access (two sectors) per lane; neighbouring sectors are seldom reused (a 1.07 GB "
                       "table, random item ids, a 50-60 MB L2): 32-64 B (assumption)",
    "random_sector_eff": "fraction of the HBM rate reached by independent random 32-64 B sector reads (DRAM row "
                         "misses, no burst locality): 0.3-0.8 (assumption)",
    "json_float_ns": "json.dumps (CPython's C encoder, no indent) per float of a dict of float lists: float repr "
                     "(PyOS_double_to_string, shortest round-trip) plus the separators and the final join. Measured "
                     "before any capture on a 2-core development VM (CPython 3.11): 165 ms for 400 k floats in 400 "
                     "lists, ~410 ns per float; server cores 150-300 ns; band 150-500 ns. The C encoder never "
                     "releases the GIL inside one call (no eval-loop ticks), so the call holds it throughout",
    "list_tensor_ns": "torch.tensor(flat list of Python floats, dtype=float32) per element: the sequence walk, a type "
                      "check and unboxing per item, the store: 15-120 ns (assumption; array.array('f', list), the same "
                      "walk with no dispatch, measured 16 ns per element on the development VM as a floor)",
    "cpu_randn_ns": "torch.randn on the CPU (float32, default generator) per element: mt19937 uniforms and a "
                    "Box-Muller transform (AVX2 where available), serial on one core: 1.5-10 ns; down to 0.5 ns if the "
                    "build splits the fill over cores (assumption)",
    "history_item_us": "one metric's history update in Python (list.pop(0) of a 4096-item list, append, a dict "
                       "store): 0.5-3 µs (assumption)",
}
RATES_H100 = dict(H18.RATES_H100, **NEW_H100)
RATES_H200 = dict(H18.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(H18.RATE_SOURCES, **NEW_SOURCES)
Q19 = dict(H18.Q18)


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# catalog_recall: index_select of 32768 x 128 candidates from a 2.1 M x 128 fp32 table kept feature-major and read
# through its transpose view (uncoalesced), a small bf16 user tower, a bmm score and topk; inference. Fixed: the
# table made row-major once at load.
CR = dict(items=1 << 21, dim=128, queries=32768, candidates=128, user_features=256, keep=16, steps=14, warmup=3)
CR_OPS = 12        # 2 linear, gelu, float, index_select, view, bmm, unsqueeze / squeeze, topk, the store, NVTX,
# event record and wait
CR_SMALL = 6       # topk's passes over the [32768, 128] scores, the store, the user tower's tiny epilogues


def m_cr(r, fixed=False):
    Q, K, Dm = CR["queries"], CR["candidates"], CR["dim"]
    N = float(Q * K)
    el = N * Dm
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    tower = 2.0 * Q * (CR["user_features"] * 512 + 512 * Dm)
    c = {"user_tower": t_flops(tower, r["bf16_small_tflops"]) + t_bytes(Q * 512 * 2 * 3.0 + Q * Dm * 6.0, hbm),
         "score_bmm_fp32": t_bytes(el * 4.0, hbm * r["gemv_eff"]),
         "topk_and_small": t_bytes(Q * K * 4.0 * 2, hbm) + CR_SMALL * tiny}
    if fixed:
        c["gather_rows"] = t_bytes(el * 8.0, hbm * r["gather_eff"])
    else:
        c["gather_uncoalesced"] = (t_bytes(el * r["uncoal_sector_b"], hbm * r["random_sector_eff"])
                                   + t_bytes(el * 4.0, hbm))
    gpu = sum(c.values())
    host = (CR_OPS * r["eager_op_wide_us"] + 3 * r["view_op_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "gathered_gb": el * 4.0 / 1e9}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None, "score_share": pct(c["score_bmm_fp32"], step),
                    "gather_share": pct(c["gather_rows"], step)})
        return out
    fx = m_cr(r, fixed=True)
    rm = {"uncoalesced_gather": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"],
                "gather_share": pct(c["gather_uncoalesced"], step),
                "dram_gb": el * r["uncoal_sector_b"] / 1e9,
                "plant_over_rest_ms": rm["uncoalesced_gather"] - (gpu - c["gather_uncoalesced"])})
    return out


# ---------------------------------------------------------------------------------------------------
# review_tagger: bias-free MLP 1024 -> 4096 -> 4096 -> 64 over 32768 rows, bf16 autocast, fused AdamW, BCE per tag.
# Planted: a background thread json.dumps the whole 64 x 4096 history every step (holds the GIL). Fixed: only the
# step's 64 new values.
RT = dict(batch=32768, features=1024, hidden=4096, tags=64, window=4096, steps=14, warmup=3)
RT_DIMS = [1024, 4096, 4096, 64]
RT_GELU_B = 10.0
RT_OPS = 24        # autocast, 3 linears, 2 GELU, float, BCE, mean, sum, backward(), opt.step (~4), zero_grad, tolist,
# queue put, the pinned copy, NVTX pushes / pops, event record and wait
RT_NODES = 12
RT_SMALL = 16      # BCE forward / backward over [32768, 64], mean / sum, the metric copy, the tiny last layer's casts


def m_rt(r, fixed=False):
    B, T, W = RT["batch"], RT["tags"], RT["window"]
    hbm, tiny, eff = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3, r["ew_mlp_eff"]
    P = mlp_params(RT_DIMS)
    hidden = float(B * sum(RT_DIMS[1:-1]))
    c = {"gemms_bf16": t_flops(mlp_train_flops(B, RT_DIMS), r["bf16_mid_tflops"]),
         "elementwise": t_bytes(hidden * RT_GELU_B + P * AMP_B + B * T * 40.0, hbm * eff),
         "adamw_fused": t_bytes(P * ADAM_B[4], hbm),
         "small_kernels": RT_SMALL * tiny}
    gpu = sum(c.values())
    ops = (RT_OPS * r["eager_op_wide_us"] + RT_NODES * r["bwd_node_wide_us"] + T * r["history_item_us"]) / 1e3
    floats = T if fixed else T * W
    dumps = floats * r["json_float_ns"] / 1e6
    host = ops + dumps  # the dumps holds the GIL: the main thread's next launches wait for it
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "dumps_ms": dumps, "ops_ms": ops, "params_m": P / 1e6,
                           "gpu_busy_share": pct(gpu, step), "gemm_share": pct(c["gemms_bf16"], step)}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = m_rt(r, fixed=True)
    rm = {"gil_contention": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "dumps_share": pct(dumps, step)})
    return out


# ---------------------------------------------------------------------------------------------------
# fare_forecast: bias-free MLP 32 -> 2048 -> 2048 -> 1 over 65536 rows, bf16 autocast, fused AdamW, MSE. Planted:
# torch.tensor of a flat 2.1 M-float Python list per step plus its pageable copy. Fixed: pinned tensors made once.
FF = dict(batch=65536, features=32, hidden=2048, steps=14, warmup=3)
FF_DIMS = [32, 2048, 2048, 1]
FF_OPS = 18        # tensor / view / to (or to), autocast, 3 linears, 2 GELU, float, mse, backward(), opt.step (~4),
# zero_grad, the loss store, event record and wait
FF_NODES = 10
FF_SMALL = 12


def m_ff(r, fixed=False):
    B, F_ = FF["batch"], FF["features"]
    n = float(B * F_)
    hbm, tiny, eff = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3, r["ew_mlp_eff"]
    P = mlp_params(FF_DIMS)
    hidden = float(B * sum(FF_DIMS[1:-1]))
    c = {"gemms_bf16": t_flops(mlp_train_flops(B, FF_DIMS), r["bf16_small_tflops"]),
         "elementwise": t_bytes(hidden * 10.0 + P * AMP_B + n * 6.0, hbm * eff),
         "adamw_fused": t_bytes(P * ADAM_B[4], hbm),
         "small_kernels": FF_SMALL * tiny}
    ops = (FF_OPS * r["eager_op_wide_us"] + FF_NODES * r["bwd_node_wide_us"]) / 1e3
    compute = sum(c.values())
    if fixed:
        c["h2d_pinned"] = t_link(n * 4.0, r["h2d_pinned_gbs"])
        conv, copy = 0.0, 0.0
    else:
        conv = n * r["list_tensor_ns"] / 1e6
        copy = t_link(n * 4.0, r["h2d_pageable_gbs"])
        c["h2d_pageable"] = copy
    gpu = sum(c.values())
    host = ops + conv + copy
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "convert_ms": conv, "values_m": n / 1e6, "compute_ms": compute,
                           "gpu_busy_share": pct(gpu, step)}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = m_ff(r, fixed=True)
    rm = {"tensor_from_python_list": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "convert_share": pct(conv, step),
                "copy_share": pct(copy, step)})
    return out


# ---------------------------------------------------------------------------------------------------
# sensor_denoise: bias-free MLP 1024 -> 4096 -> 1024 over 32768 rows, bf16 autocast, fused AdamW, MSE on the noise.
# Planted: torch.randn(32768, 1024) on the CPU and a pageable 134 MB copy per step. Fixed: randn on the GPU.
SD = dict(batch=32768, window=1024, hidden=4096, steps=14, warmup=3)
SD_DIMS = [1024, 4096, 1024]
SD_EW_B = 60.0     # per fp32 window element: sigma * eps and the add (r4 w4, r4 r4 w4), autocast's cast of xt (r4 w2),
# pred.float() (r2 w4), the MSE forward and backward (r4 r4; r4 r4 w4), the output's bf16 gradient (w2)
SD_OPS = 22        # randn, to (or randn on the GPU), mul, add, autocast, 2 linears, GELU, float, mse, backward(),
# opt.step (~4), zero_grad, loss store, NVTX pushes / pops, event record and wait
SD_NODES = 9
SD_SMALL = 10


def m_sd(r, fixed=False):
    B, Wn = SD["batch"], SD["window"]
    n = float(B * Wn)
    hbm, tiny, eff = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3, r["ew_mlp_eff"]
    P = mlp_params(SD_DIMS)
    hidden = float(B * SD["hidden"])
    c = {"gemms_bf16": t_flops(mlp_train_flops(B, SD_DIMS), r["bf16_mid_tflops"]),
         "elementwise": t_bytes(hidden * 10.0 + P * AMP_B + n * SD_EW_B, hbm * eff),
         "adamw_fused": t_bytes(P * ADAM_B[4], hbm),
         "small_kernels": SD_SMALL * tiny}
    ops = (SD_OPS * r["eager_op_wide_us"] + SD_NODES * r["bwd_node_wide_us"]) / 1e3
    compute = sum(c.values())
    if fixed:
        c["randn_gpu"] = t_bytes(n * 4.0, hbm)
        rnd, copy = 0.0, 0.0
    else:
        rnd = n * r["cpu_randn_ns"] / 1e6
        copy = t_link(n * 4.0, r["h2d_pageable_gbs"])
        c["h2d_pageable_noise"] = copy
    gpu = sum(c.values())
    host = ops + rnd + copy
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "randn_ms": rnd, "copy_ms": copy, "noise_mb": n * 4.0 / 1e6,
                           "compute_ms": compute,
                           "gpu_busy_share": pct(gpu, step), "gemm_share": pct(c["gemms_bf16"], step)}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = m_sd(r, fixed=True)
    rm = {"cpu_rng_transfer": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "randn_share": pct(rnd, step),
                "copy_share": pct(copy, step)})
    return out


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=14, warmup=3):
    return D.base(name, f"heldout19/{workload}", variant, SET, args, ranks=1, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def planted19(cause, where, fix, b, key_rm, key_share, derivation, accept, b2):
    return D.h200_planted(cause, where, fix, b, b2, key_rm, key_share, derivation, accept, band_of19)


def finish(m, b, b2, keys, after=True, fixed_case=None):
    return D.h200_finish(m, b, b2, keys, SEV_DOC19, KERNELS, RATES_H100, RATES_H200, RATE_SOURCES, after, fixed_case)


KERNELS = {
    "catalog_recall": "per step ~12 kernels: the user tower's two bf16 GEMMs and GELU, a float cast, ONE index_select "
                      "kernel (run as at::gather for more than 16 ids: a scatter-gather elementwise kernel; "
                      "indexSelectLargeIndex in older builds) gathering 4.2 M rows x 128 fp32 (2.1 GB) from the "
                      "transposed "
                      "table view, the largest kernel by far, the fp32 bmm scoring, topk and a store; in step_N > "
                      "users / lookup / score; GPU-bound (host well ahead)",
    "catalog_recall.fixed": "the same ~12 kernels; the index_select now reads whole 512-byte rows (coalesced), "
                            "about as long as the bmm that reads its output",
    "review_tagger": "per step ~45 kernels (3 bf16 GEMMs forward and 5 backward over 32768 rows, GELU, casts, BCE, "
                     "fused AdamW, a 256-byte DtoH copy to pinned memory), 6-10 ms of GPU work; the main thread then "
                     "waits tens of ms for the GIL (pthread_cond_timedwait / futex in OS-runtime) while a second "
                     "Python thread runs json.dumps, the GPU idle",
    "review_tagger.fixed": "the same ~45 kernels; the dashboard thread's work under a millisecond; GPU-bound",
    "fare_forecast": "per step (no NVTX) ~35 kernels (3 bf16 GEMMs forward and 5 backward over 65536 rows, GELU, "
                     "casts, MSE, fused AdamW) and one 8.4 MB HtoD copy from pageable memory, 3-5 ms of GPU work; "
                     "before each step's first launch the main thread spends tens to hundreds of ms with no CUDA "
                     "call (torch.tensor walking a 2.1 M-item Python list), the GPU idle",
    "fare_forecast.fixed": "the same kernels and one 8.4 MB pinned HtoD copy per step; GPU-bound",
    "sensor_denoise": "per step ~35 kernels (2 bf16 GEMMs forward and 3 backward over 32768 rows, GELU, the noise "
                      "arithmetic, casts, MSE, fused AdamW), 3-5 ms of GPU work, and one 134 MB HtoD copy from "
                      "pageable memory (6-14 GB/s) in step_N > noise, which also holds tens to hundreds of ms of "
                      "CPU work (torch.randn on the CPU) with no CUDA call, the GPU idle",
    "sensor_denoise.fixed": "the same kernels plus one normal-distribution kernel (Philox) in step_N > noise; no "
                            "HtoD copy; GPU-bound",
}


def build():
    out = {}

    # ---- catalog_recall (uncoalesced_gather) and catalog_recall.fixed -------------------------------------------
    b, b2, keys = ev(m_cr)
    bf, bf2, keys_f = ev(lambda r: m_cr(r, fixed=True))
    args = ["--items", CR["items"], "--dim", CR["dim"], "--queries", CR["queries"], "--candidates", CR["candidates"]]
    use_cr = dict(dtype="float32 item table, bf16 user tower (inference)", optimizer="none (inference)",
                  host_sync=EVENT_SYNC)
    el = CR["queries"] * CR["candidates"] * CR["dim"]
    m = base("catalog_recall", "catalog_recall.py", "planted", args, steps=CR["steps"], warmup=CR["warmup"], est=40)
    m["uses"] = uses(**use_cr)
    m["uses"]["gather"] = ("torch.index_select(table, 0, ids) with table = table_fm.t(): a [2.1 M, 128] view of a "
                           "feature-major [128, 2.1 M] float32 array (strides (1, 2.1 M))")
    m["techniques"] = techniques(
        "store the table row-major (one table_fm.t().contiguous() at load, or export it item-major) so each "
        "looked-up row is one contiguous 512-byte read; optionally keep it in bf16",
        ["CUDA graphs / launch overhead (GPU-bound, ~12 kernels)", "a faster GEMM / TF32 / FP8 for the user tower",
         "a larger batch as the fix", "data loading or host-to-device copies (everything is resident)",
         "torch.compile as the top fix", "an approximate-nearest-neighbour index (the retrieval stage is not here)"])
    m["planted"] = [planted19(
        "uncoalesced_gather",
        {"device": "GPU 0", "region": "step_N > lookup, every step: one index_select kernel (a gather kernel) "
         "reading the transposed table view, the largest kernel"},
        "the table made row-major once at load (--fixed, captured as catalog_recall.fixed)", b,
        "rm.uncoalesced_gather", "share.uncoalesced_gather",
        f"{CR['queries']} x {CR['candidates']} = {CR['queries'] * CR['candidates'] / 1e6:.1f} M lookups of {CR['dim']} "
        f"fp32 features ({el * 4 / 1e9:.2f} GB gathered per step). The table is read through its transpose view: "
        f"consecutive threads of index_select read a row's features 2.1 M x 4 bytes apart, so every 4-byte element "
        f"costs its own 32-64 B sector ({rng(b2, 'dram_gb', 1)} GB of DRAM reads) at 30-80 % of HBM (random "
        f"sectors): {rng(b2, 'c.gather_uncoalesced')} ms, {rng(b2, 'gather_share', 0)} % of a {rng(b2, 'step')} ms "
        f"step on the H200 (GPU-bound; host {rng(b2, 'host_ms')} ms). The rest: the fp32 bmm reading the gathered rows "
        f"({rng(b2, 'c.score_bmm_fp32')} ms), topk and the user tower ({rng(b2, 'c.user_tower')} ms). Row-major, the "
        f"same gather reads {el * 4 / 1e9:.2f} GB and writes as much at 50-85 % of HBM ({rng(bf2, 'c.gather_rows')} "
        f"ms): step {rng(b2, 'after')} ms; removed {rng(b2, 'rm.uncoalesced_gather')} ms = "
        f"{rng(b2, 'share.uncoalesced_gather', 1)} % (H100 {rng(b, 'share.uncoalesced_gather', 1)} %), "
        f"{rng(b2, 'speedup')}x; the removable time exceeds all the other GPU work at every corner (margin "
        f"{rng(b2, 'plant_over_rest_ms')} ms). New cause name: uncoalesced_gather.",
        ["uncoalesced_gather", "uncoalesced_access", "strided_gather", "non_contiguous_source", "kernel_inefficient"],
        b2)]
    m["tolerated"] = [{"what": "the fp32 bmm scoring reading the gathered rows (memory-bound; bf16 rows would halve it)",
                       "cause": "elementwise_unfused", "max_severity": "high"}]
    m["expected_in_trace"] = [
        "one index_select per step in step_N > lookup (a scatter-gather elementwise kernel, possibly split into 2-4 "
        "launches by 32-bit indexing over the 2.1 GB output; indexSelectLargeIndex in older builds), several ms, the "
        "largest kernel class",
        "GPU-bound: the next step's kernels queued behind (event sync on the previous step only)",
        "in the after run: the index_select about as long as the bmm, the step a few ms"]
    m["must_not"] = [
        "a host-bound or launch-bound step / CUDA graphs", "the user tower's GEMMs or their precision as the cause",
        "a larger batch as the fix", "data loading or host-to-device copies", "a host synchronization as the cause",
        "a layout copy (there is none: the fix adds one transpose copy at load)",
        "random ids / cache misses of the retrieval as unavoidable (a row-major table reads each row in one piece)",
        "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = ("Here are two profiles of our recommendation service's candidate scoring on one H200 (32768 queries "
                     "x 128 candidates per step, a 2.1 M x 128 float32 item-embedding table, a small bf16 user tower, a "
                     "dot-product score and top-16), before and after we changed how the item table is stored at load "
                     "time. Did the change help, how much per step, and is anything still holding it back?")
    m["diagnosis"] = (f"Before: the item table was kept feature-major and looked up through its transpose view, so the "
                      f"one index_select kernel read every 4-byte feature from its own DRAM sector "
                      f"(~{rng(b2, 'dram_gb', 0)} GB of traffic for {el * 4 / 1e9:.1f} GB of rows): "
                      f"{rng(b2, 'c.gather_uncoalesced', 1)} ms of a {rng(b2, 'step', 1)} ms step on the H200, GPU-bound. "
                      f"After (row-major table): ~{rng(b2, 'after', 1)} ms, {rng(b2, 'share.uncoalesced_gather', 0)} % "
                      f"removed ({band_of19(b2, 'share.uncoalesced_gather')[0]}), {rng(b2, 'speedup', 1)}x. Now the "
                      f"step is memory-bound on the coalesced gather and the fp32 scoring bmm; nothing planted is left "
                      f"(bf16 features would halve what remains).")
    m["measure"] = [{"what": "step period", "query": Q19["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q19["kernels"],
                     "expect": f"the index_select's gather kernel {rng(b2, 'c.gather_uncoalesced', 0)} ms per step before, "
                               f"{rng(bf2, 'c.gather_rows', 1)} ms after"}]
    m["new_cause"] = {"name": "uncoalesced_gather", "why": "a gather / index_select / embedding lookup whose source is "
                      "a strided (transposed, feature-major) view, so the threads of a warp read elements far apart and "
                      "each 4-byte element costs a whole DRAM sector; fixed by storing the source in the gather's row "
                      "order (one contiguous copy at load)"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="catalog_recall.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("catalog_recall.fixed", "catalog_recall.py", "fixed", args + ["--fixed"], steps=CR["steps"],
             warmup=CR["warmup"], est=35)
    m["uses"] = uses(**use_cr)
    m["uses"]["gather"] = "torch.index_select(table, 0, ids) from a row-major [2.1 M, 128] float32 table"
    m["techniques"] = techniques(None, ["CUDA graphs / launch overhead", "a larger batch", "torch.compile as the top fix"])
    m["planted"] = []
    m["tolerated"] = [{"what": "the coalesced gather and the fp32 bmm scoring (memory-bound; bf16 features would halve "
                               "them)", "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expected_in_trace"] = ["index_select about as long as the bmm; the step a few ms, GPU-bound"]
    m["must_not"] = ["a host-bound or launch-bound step / CUDA graphs", "the gather as uncoalesced (it reads whole rows)",
                     "a planted problem of high or critical severity"]
    m["expect_quiet"] = True
    m["question"] = "After storing the item table row-major, is anything still holding a step back?"
    m["diagnosis"] = (f"Nothing large: {rng(b2, 'step', 1)} ms per step on the H200, GPU-bound, the coalesced gather "
                      f"({rng(b2, 'gather_share', 0)} %) and the fp32 scoring bmm ({rng(b2, 'score_share', 0)} %) both at "
                      f"memory speed; storing the features in bf16 would halve them.")
    m["measure"] = [{"what": "step period", "query": Q19["step"], "expect_ms": r2(b2["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- review_tagger (gil_contention) ------------------------------------------------------------------------
    b, b2, keys = ev(m_rt)
    args = ["--batch", RT["batch"], "--features", RT["features"], "--hidden", RT["hidden"], "--tags", RT["tags"],
            "--window", RT["window"]]
    m = base("review_tagger", "review_tagger.py", "planted", args, steps=RT["steps"], warmup=RT["warmup"], est=40)
    m["uses"] = uses(dtype="bf16 autocast on float32 weights", optimizer="AdamW (fused)", pinned=True,
                     host_sync=EVENT_SYNC + "; the per-tag losses copied to pinned memory non_blocking, read two "
                     "steps later (no wait)")
    m["uses"]["threads"] = ("a background Python thread json.dumps the 64 x 4096 metric history (262 k floats) every "
                            "step")
    m["techniques"] = techniques(
        "take the serialization off the training process's GIL: send only the new values (the dashboard appends), or "
        "serialize in a separate process (multiprocessing), or serialize the history rarely",
        ["CUDA graphs / launch overhead", "a faster GEMM / FP8", "a larger batch as the fix",
         "data loading (features resident on the GPU)", "pinned memory / async copies (already)",
         "torch.compile"])
    m["planted"] = [planted19(
        "gil_contention",
        {"device": "GPU 0 (and the host)", "region": "every step after step_N > metrics: a second Python thread holds "
         "the GIL in json.dumps while the main thread, its launches for the next step pending, waits for it; the GPU "
         "idle"},
        "serialize only the step's 64 new values (--fixed; not captured)", b, "rm.gil_contention",
        "share.gil_contention",
        f"GPU per step: the MLP's bf16 GEMMs ({mlp_train_flops(RT['batch'], RT_DIMS) / 1e12:.2f} TFLOP at 550-800 "
        f"TFLOP/s: {rng(b2, 'c.gemms_bf16')} ms), GELU / casts / BCE ({rng(b2, 'c.elementwise')} ms), fused AdamW over "
        f"{b2['params_m'][0]:.1f} M parameters: {rng(b2, 'gpu_ms')} ms. Host: {RT_OPS} ops at 20-130 µs, {RT_NODES} "
        f"backward nodes at 10-50 µs and {RT['tags']} history updates ({rng(b2, 'ops_ms')} ms). The dashboard thread "
        f"then serializes {RT['tags']} x {RT['window']} = {RT['tags'] * RT['window'] / 1e3:.0f} k floats with "
        f"json.dumps at 150-500 ns each ({rng(b2, 'dumps_ms')} ms); the C encoder holds the GIL for the whole call, so "
        f"the main thread, back from the throttle's event wait, cannot issue the next step until it ends: a step "
        f"{rng(b2, 'step')} ms on the H200 with the GPU busy {rng(b2, 'gpu_busy_share', 0)} %. Serializing only the "
        f"new values: {rng(b2, 'after')} ms (GPU-bound; host {rng(b2, 'after_host_ms')} ms): removed "
        f"{rng(b2, 'rm.gil_contention')} ms = {rng(b2, 'share.gil_contention', 1)} % (H100 "
        f"{rng(b, 'share.gil_contention', 1)} %), {rng(b2, 'speedup')}x. New cause name: gil_contention.",
        ["gil_contention", "background_thread_gil", "python_thread_contention", "logging_overhead", "host_bound"], b2)]
    m["tolerated"] = [{"what": "autocast's GELU and weight-cast kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "low"},
                      {"what": "the metrics' 256-byte DtoH copy to pinned memory (non_blocking, read two steps later)",
                       "cause": "host_sync", "max_severity": "info"}]
    m["expected_in_trace"] = [
        "the main thread idle between steps (waiting for the GIL: pthread_cond_timedwait / futex), a second thread "
        "busy on the CPU meanwhile; no CUDA call and no long NVTX range covers the wait",
        f"the GPU idle most of each step: busy {rng(b2, 'gpu_busy_share', 0)} %, step {rng(b2, 'step', 0)} ms"]
    m["must_not"] = [
        "CUDA graphs / launch overhead as the fix", "the GEMMs, precision or kernel efficiency as the cause",
        "a host synchronization / .item() / the metric copy as the cause", "data loading or host-to-device copies",
        "a larger batch as the fix", "the Python garbage collector as the cause", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = ("We fine-tune a review-tagging head on one H200: a bias-free MLP 1024 -> 4096 -> 4096 -> 64 over "
                     "32768 review embeddings per step, bf16 autocast, fused AdamW, and 64 per-tag BCE losses we publish "
                     "to a live dashboard. The GPU sits idle most of each step although the model is not small. "
                     "Where does the time go, and what should we change?")
    m["diagnosis"] = (f"The dashboard thread re-serializes the whole 64 x 4096 metric history with json.dumps every "
                      f"step ({rng(b2, 'dumps_ms', 0)} ms of CPU), and json's C encoder holds the GIL for the whole "
                      f"call, so the training thread cannot launch the next step until it ends: a step "
                      f"{rng(b2, 'step', 0)} ms on the H200 for {rng(b2, 'gpu_ms', 1)} ms of GPU work. Send only the "
                      f"new values (or serialize in another process): ~{rng(b2, 'after', 1)} ms, "
                      f"{rng(b2, 'share.gil_contention', 0)} % removed ({band_of19(b2, 'share.gil_contention')[0]}), "
                      f"{rng(b2, 'speedup', 0)}x.")
    m["measure"] = [{"what": "step period", "query": Q19["step"], "expect_ms": r2(b2["step"])},
                    {"what": "OS runtime", "query": Q19["osrt"],
                     "expect": f"the main thread waiting {rng(b2, 'dumps_ms', 0)} ms per step "
                               f"(pthread_cond_timedwait / futex) between steps"}]
    m["new_cause"] = {"name": "gil_contention", "why": "a second Python thread of the training process runs long "
                      "GIL-holding work (a C routine such as json.dumps, or pure-Python loops) every step, so the "
                      "thread that launches GPU work waits for the GIL and the GPU starves; fixed by moving that work "
                      "to another process, making it incremental, or doing it rarely"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- fare_forecast (tensor_from_python_list), no NVTX ------------------------------------------------------
    b, b2, keys = ev(m_ff)
    n = FF["batch"] * FF["features"]
    args = ["--batch", FF["batch"], "--features", FF["features"], "--hidden", FF["hidden"]]
    m = base("fare_forecast", "fare_forecast.py", "planted", args, nvtx=False, steps=FF["steps"], warmup=FF["warmup"],
             est=40)
    m["uses"] = uses(dtype="bf16 autocast on float32 weights", optimizer="AdamW (fused)", pinned=False,
                     host_sync=EVENT_SYNC)
    m["uses"]["input"] = (f"each batch a flat Python list of {n / 1e6:.1f} M floats turned into a tensor with "
                          f"torch.tensor(values, dtype=torch.float32), then copied from pageable memory")
    m["techniques"] = techniques(
        "never build tensors from Python lists in the step: have the feature service hand over a NumPy array / buffer "
        "(torch.from_numpy, no per-item walk) or a pinned tensor, converted once (or in DataLoader workers), and copy "
        "non_blocking from pinned memory",
        ["CUDA graphs / launch overhead", "a faster GEMM / FP8", "a larger batch as the fix",
         "pinned memory alone as the top fix (the copy is ~1 ms; the conversion is the cost)", "torch.compile"])
    m["planted"] = [planted19(
        "tensor_from_python_list",
        {"device": "GPU 0 (and the host)", "region": "the top of every step (no NVTX): torch.tensor over a flat "
         "2.1 M-item Python list on the main thread, no CUDA call, then a small pageable HtoD copy; the GPU idle"},
        "the batches converted to pinned tensors once, copied non_blocking (--fixed; not captured)", b,
        "rm.tensor_from_python_list", "share.tensor_from_python_list",
        f"GPU per step: the MLP's bf16 GEMMs ({mlp_train_flops(FF['batch'], FF_DIMS) / 1e12:.2f} TFLOP at 250-600 "
        f"TFLOP/s, K = 32 in the first layer: {rng(b2, 'c.gemms_bf16')} ms), GELU and casts "
        f"({rng(b2, 'c.elementwise')} ms), AdamW: {rng(b2, 'compute_ms')} ms of kernels. Host: torch.tensor walks {n / 1e6:.1f} M "
        f"Python floats at 15-120 ns each ({rng(b2, 'convert_ms')} ms), then the 8.4 MB pageable copy at 6-14 GB/s "
        f"({rng(b2, 'c.h2d_pageable')} ms) and {FF_OPS} ops / {FF_NODES} backward nodes; the previous step's GPU work "
        f"hides under the conversion, so a step is the host chain: {rng(b2, 'step')} ms on the H200, the GPU busy "
        f"{rng(b2, 'gpu_busy_share', 0)} %. Converted once to pinned tensors: {rng(b2, 'after')} ms (host "
        f"{rng(b2, 'after_host_ms')} ms): removed {rng(b2, 'rm.tensor_from_python_list')} ms = "
        f"{rng(b2, 'share.tensor_from_python_list', 1)} % (H100 {rng(b, 'share.tensor_from_python_list', 1)} %), "
        f"{rng(b2, 'speedup')}x; the pageable copy is {rng(b2, 'copy_share', 1)} % of it. New cause name: "
        f"tensor_from_python_list.",
        ["tensor_from_python_list", "python_list_conversion", "host_data_conversion", "host_bound"], b2)]
    m["tolerated"] = [{"what": "the 8.4 MB HtoD copy from pageable memory (part of the same input path; pinned it "
                               "would take ~0.2 ms)", "cause": "copy_bound_pageable", "max_severity": "low"},
                      {"what": "autocast's GELU and weight-cast kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "no NVTX; per step a long CPU stretch of the main thread with no CUDA call before the step's first launch "
        "and its 8.4 MB pageable HtoD copy",
        f"the GPU idle most of each step: busy {rng(b2, 'gpu_busy_share', 0)} %, step {rng(b2, 'step', 0)} ms"]
    m["must_not"] = [
        "CUDA graphs / launch overhead as the fix", "the GEMMs, precision or kernel efficiency as the cause",
        "pageable memory / the copy's bandwidth as the top cause", "a host synchronization / .item() as the cause",
        "a larger batch as the fix", "the Python garbage collector as the cause", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = ("We train a taxi-fare regressor on one H200: a bias-free MLP 32 -> 2048 -> 2048 -> 1 over 65536 "
                     "trips per step, bf16 autocast, fused AdamW; the trip features come from our feature service each "
                     "step. The run has no NVTX ranges. Training is far slower than the model's size suggests and "
                     "the GPU looks mostly idle. Where does the time go, and what should we change?")
    m["diagnosis"] = (f"Each batch arrives as a flat Python list of {n / 1e6:.1f} M floats and the loop turns it into "
                      f"a tensor with torch.tensor(values), which walks and unboxes every item on the main thread: "
                      f"{rng(b2, 'convert_ms', 0)} ms per step with no CUDA call, then a small pageable copy; a step "
                      f"{rng(b2, 'step', 0)} ms on the H200 for {rng(b2, 'compute_ms', 1)} ms of GPU kernels. Hand the batch "
                      f"over as an array / buffer (torch.from_numpy) or pinned tensors made once, copied non_blocking: "
                      f"~{rng(b2, 'after', 1)} ms, {rng(b2, 'share.tensor_from_python_list', 0)} % removed "
                      f"({band_of19(b2, 'share.tensor_from_python_list')[0]}), {rng(b2, 'speedup', 0)}x.")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q19["anchor"] + " with ANCHOR = the first GEMM of the "
                     "MLP (or the HtoD copy), C = 1, WARM = 3", "expect_ms": r2(b2["step"])},
                    {"what": "GPU idle", "query": Q19["split"],
                     "expect": f"GPU busy {rng(b2, 'gpu_busy_share', 0)} % of the step"}]
    m["new_cause"] = {"name": "tensor_from_python_list", "why": "a large tensor built in the step from Python lists "
                      "(torch.tensor(list), per-item conversion on the main thread), tens of ns per element, "
                      "while the GPU waits; fixed by handing data over as arrays / buffers (from_numpy) or pinned "
                      "tensors made once"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- sensor_denoise (cpu_rng_transfer) ---------------------------------------------------------------------
    b, b2, keys = ev(m_sd)
    n = SD["batch"] * SD["window"]
    args = ["--batch", SD["batch"], "--window", SD["window"], "--hidden", SD["hidden"]]
    m = base("sensor_denoise", "sensor_denoise.py", "planted", args, steps=SD["steps"], warmup=SD["warmup"], est=40)
    m["uses"] = uses(dtype="bf16 autocast on float32 weights", optimizer="AdamW (fused)", pinned=False,
                     host_sync=EVENT_SYNC + "; the pageable noise copy blocks the host")
    m["uses"]["rng"] = f"torch.randn({SD['batch']}, {SD['window']}) on the CPU every step ({n * 4 / 1e6:.0f} MB), .to('cuda')"
    m["techniques"] = techniques(
        "draw the noise on the GPU (torch.randn(..., device='cuda'), or torch.randn_like(x0)): no CPU generation and "
        "no copy",
        ["pinned memory / a faster copy as the top fix (the CPU generation is the larger part)",
         "CUDA graphs / launch overhead", "a faster GEMM / FP8", "a larger batch as the fix",
         "DataLoader workers (the noise is not data)", "torch.compile"])
    m["planted"] = [planted19(
        "cpu_rng_transfer",
        {"device": "GPU 0 (and the host)", "region": "step_N > noise, every step: torch.randn on the CPU (33.5 M "
         "values, no CUDA call) and a 134 MB HtoD copy from pageable memory; the GPU idle"},
        "draw the noise on the GPU (--fixed; not captured)", b, "rm.cpu_rng_transfer", "share.cpu_rng_transfer",
        f"GPU per step: the MLP's bf16 GEMMs ({mlp_train_flops(SD['batch'], SD_DIMS) / 1e12:.2f} TFLOP at 550-800 "
        f"TFLOP/s: {rng(b2, 'c.gemms_bf16')} ms), GELU / noise arithmetic / casts / MSE ({rng(b2, 'c.elementwise')} "
        f"ms), AdamW: {rng(b2, 'compute_ms')} ms of kernels. Host: torch.randn draws {n / 1e6:.1f} M normals on the CPU at 0.5-10 ns "
        f"each ({rng(b2, 'randn_ms')} ms), then .to('cuda') copies {n * 4 / 1e6:.0f} MB from pageable memory at 6-14 "
        f"GB/s ({rng(b2, 'copy_ms')} ms, the host blocked), then {SD_OPS} ops / {SD_NODES} backward nodes; the previous "
        f"step's GPU work hides under the generation, so a step is the host chain: {rng(b2, 'step')} ms on the H200, "
        f"the GPU busy {rng(b2, 'gpu_busy_share', 0)} %. Noise drawn on the GPU (a 134 MB write, ~0.03 ms): "
        f"{rng(b2, 'after')} ms (GPU-bound; host {rng(b2, 'after_host_ms')} ms): removed "
        f"{rng(b2, 'rm.cpu_rng_transfer')} ms = {rng(b2, 'share.cpu_rng_transfer', 1)} % (H100 "
        f"{rng(b, 'share.cpu_rng_transfer', 1)} %), {rng(b2, 'speedup')}x; of the step, the CPU generation is "
        f"{rng(b2, 'randn_share', 0)} % and the copy {rng(b2, 'copy_share', 0)} %. New cause name: cpu_rng_transfer.",
        ["cpu_rng_transfer", "cpu_random_generation", "host_rng", "host_bound", "copy_bound_pageable"], b2)]
    m["tolerated"] = [{"what": "autocast's GELU and weight-cast kernels and the fp32 noise arithmetic (memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "low"},
                      {"what": "the pageable copy's implied wait (part of the planted mechanism; gone with the fix)",
                       "cause": "host_sync", "max_severity": "high"}]
    m["expected_in_trace"] = [
        "step_N > noise holds most of every step: a long CPU stretch with no CUDA call, then one 134 MB pageable HtoD "
        "memcpy",
        f"the GPU idle most of each step: busy {rng(b2, 'gpu_busy_share', 0)} %, step {rng(b2, 'step', 0)} ms"]
    m["must_not"] = [
        "CUDA graphs / launch overhead as the fix", "the GEMMs, precision or kernel efficiency as the cause",
        "pinned memory as the top fix (the CPU generation dominates; the fix removes the copy too)",
        "a DataLoader / more workers as the fix", "a larger batch as the fix", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = ("We train a denoiser for vibration-sensor windows on one H200: a bias-free MLP 1024 -> 4096 -> 1024 "
                     "over 32768 windows of 1024 samples per step, predicting the Gaussian noise we add to clean "
                     "windows (bf16 autocast, fused AdamW, MSE). The clean windows are already on the GPU, yet a step "
                     "takes far longer than the model's FLOPs suggest. Where does the time go, and what should we "
                     "change?")
    m["diagnosis"] = (f"step_N > noise: the noise is drawn with torch.randn on the CPU ({n / 1e6:.1f} M values, "
                      f"{rng(b2, 'randn_ms', 0)} ms) and copied to the GPU from pageable memory ({n * 4 / 1e6:.0f} MB, "
                      f"{rng(b2, 'copy_ms', 0)} ms), all on the main thread: a step {rng(b2, 'step', 0)} ms on the "
                      f"H200 for {rng(b2, 'compute_ms', 1)} ms of GPU kernels. Draw it on the GPU (torch.randn(..., "
                      f"device='cuda') / randn_like): ~{rng(b2, 'after', 1)} ms, "
                      f"{rng(b2, 'share.cpu_rng_transfer', 0)} % removed "
                      f"({band_of19(b2, 'share.cpu_rng_transfer')[0]}), {rng(b2, 'speedup', 0)}x.")
    m["measure"] = [{"what": "step period", "query": Q19["step"], "expect_ms": r2(b2["step"])},
                    {"what": "NVTX ranges", "query": Q19["nvtx_ranges"],
                     "expect": "step_N > noise the longest range, one 134 MB pageable HtoD copy at its end"}]
    m["new_cause"] = {"name": "cpu_rng_transfer", "why": "random tensors for the GPU (noise, masks, dropout-like "
                      "draws) generated on the CPU every step and copied over: CPU generation at a few ns per value "
                      "plus a pageable copy, with the GPU idle; fixed by generating them on the GPU"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.h200_table)
