#!/usr/bin/env python3
"""First-principles truth for the eighteenth held-out set (heldout18): writes heldout18/manifests/<case>.json from
FLOPs, bytes, call counts and rate bands alone (no capture, no aisp output, no GPU run), with the helpers of
../derive.py and the rate bands of heldout17/derive.py (which carry heldout16's, heldout15's and ../derive.py's).

    python3 workloads/planted/heldout18/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout18/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout18/derive.py --table    # the table only

Method: as ../derive.py and heldout11-17/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or calls x a host cost per call; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the GPU.

Severity (as heldout11-17): info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical; each planted problem
also carries `severity_legacy` under the bands of the earlier sets (info < 1 % <= low < 5 % <= medium < 15 % <= high <
40 % <= critical).

Made for ONE H200 (like heldout9-10): four one-GPU programs, one of them with a captured fixed variant (a before/after
pair), no multi-rank case: only the smoke and single phases, on kind nvidia-h200. Every model gives the host time of a
step (Python ops x an eager-op cost + view-like ops x view_op_us + backward nodes x a node cost, plus the per-call costs
of the planted mechanism) beside the GPU time and takes the larger (the throttle lets the host run one step ahead),
except crop_watch, whose loader waits for its own copy every step (its step is modelled as that chain).
Three cases are host-paced by design: session_ranker (a full gc.collect() over ~1.7 M tracked objects at the end of
every step), answer_rerank (a listwise loss computed query by query in a Python loop: ~1500 forward ops and ~2500
backward nodes per step) and crop_watch (a fresh host array page-locked with cudaHostRegister, copied, waited for and
unregistered every step); churn_scorer is GPU-bound, one atomic-contended kernel pair dominating its batch.
The classes planted here are new (none of heldout-heldout17's): a full garbage collection per step, float atomics of
a scatter piling onto one address, host memory page-locked anew per step, and a per-sample Python loop in the loss.
Lessons of the earlier sets kept in mind: heldout16/measured.json found ~66 µs of host per launched kernel in a
launch-bound pass, so the host models use heldout17's wide eager-op band (20-130 µs) and backward-node band (10-50
µs); memory-bound classes were measured at up to 1.4-2.8x their bands, so every plant is sized to stay the largest
removable item at every corner with a wide margin, and the bands of the two hardware-rate plants (the contended
atomics, cudaHostRegister) are wide on purpose.
Peak memory: churn_scorer ~9-11 GB (two 1.07 GB bf16 feature batches, 2.1 GB hidden activations twice, the
generator's float32 temporaries at start-up), session_ranker ~4 GB, answer_rerank ~6 GB, crop_watch ~4-6 GB; host:
session_ranker's cache ~0.3-0.4 GB, crop_watch ~0.5 GB (two decoded batches, one staging array or two pinned buffers).
Software assumed: the capture image's PyTorch 2.11 with CUDA 13, cuDNN 9, CPython 3.10-3.13 (its cyclic garbage
collector), NumPy 1.26-2.x, glibc malloc (arrays above its 32 MB mmap threshold mapped and unmapped per allocation),
on sm_90.
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


H17 = _load("planted_derive17", os.path.join(os.path.dirname(HERE), "heldout17", "derive.py"))  # its rate bands
D = H17.D
ADAM_B, GB, AMP_B = D.ADAM_B, D.GB, D.AMP_B
pct, r2, rng, techniques, uses = D.pct, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link
step_of, finish_gpu_host = H17.step_of, H17.finish_gpu_host
band18, band_of18, SEV_DOC18 = H17.band17, H17.band_of17, H17.SEV_DOC17
EVENT_SYNC = H17.EVENT_SYNC

SET = "heldout18"

# ---------------------------------------------------------------------------------------------------
# Rate bands: heldout17's (with heldout16's, heldout15's and ../derive.py's), plus these. Units as there: TFLOP/s, TB/s,
# GB/s, µs, ns, ms; fractions and counts as named.
NEW_H100 = {
    "gc_obj_ns": (40.0, 150.0),
    "gc_base_objects": (100e3, 300e3),
    "cache_touch_us": (0.3, 1.5),
    "ew_mlp_eff": (0.6, 0.95),
    "conv_tile_tflops": (40.0, 150.0),
    "fill_mt_gbs": (15.0, 50.0),
    "fault_mt_gbs": (8.0, 40.0),
    "host_register_gbs": (2.0, 12.0),
    "host_unregister_gbs": (10.0, 60.0),
    "munmap_gbs": (10.0, 50.0),
    "hot_atomic_gops": (0.7, 4.0),
    "sector_serial_frac": (0.0, 1.0),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "gc_obj_ns": "time of CPython's full cyclic collection (gc.collect(), generation 2) per tracked container object: "
                 "update_refs, subtract_refs (tp_traverse of the object: a 3-item list visits 3 pointers), "
                 "move_unreachable's second traversal, the merge back into the old generation. Measured before "
                 "any capture on a 2-core development VM (CPython 3.11): 225 ms for a full collection over 2.01 M "
                 "tracked objects (a dict of 2 M three-item lists), ~112 ns per object; server cores with larger "
                 "caches and faster memory ~40-80 ns; band 40-150 ns (assumption)",
    "gc_base_objects": "container objects a PyTorch training process tracks besides the program's own data (modules, "
                       "functions, classes, dicts of torch, NumPy and the standard library): 100-300 k (assumption)",
    "cache_touch_us": "one session-cache update from Python (random.randrange, a dict lookup, two list item stores): "
                      "0.3-1.5 µs (assumption)",
    "ew_mlp_eff": "fraction of the HBM rate reached by the memory-bound kernels of an MLP or CNN step under bf16 "
                  "autocast (GELU / ReLU forward and backward, BatchNorm, the input's conversion and layout copy, "
                  "the weight casts, a K = 32-64 GEMM's activation stream): 0.6-0.95 (assumption)",
    "conv_tile_tflops": "cuDNN bf16 convolutions of a small strided encoder, channels-last (4 -> 32 4x4/4, 32 -> 64 -> "
                        "128 3x3/2, 128 -> 128 3x3), forward and both backward passes: few channels, small K; 40-150 "
                        "(assumption, as conv_stem_tflops)",
    "fill_mt_gbs": "aggregate rate of 8 NumPy copy threads (np.copyto without the GIL) writing a 134 MB uint8 batch "
                   "into already-mapped memory (a reused buffer), source and destination both in DRAM: 15-50 GB/s "
                   "(assumption: 3-8 GB/s per thread, the socket's copy bandwidth above)",
    "fault_mt_gbs": "extra cost of the same writes into a freshly mmap-ed array (glibc maps arrays above its 32 MB "
                    "threshold anew, NumPy advises huge pages): first-touch page faults, the kernel zeroing each page "
                    "before the copy writes it, by 8 threads: 8-40 GB/s of faulted memory (assumption: 2 MB huge "
                    "pages zeroed at 10-30 GB/s per thread with the mm's lock shared; 4 KB pages at 2-6 GB/s per "
                    "thread)",
    "host_register_gbs": "cudaHostRegister of an ordinary (pageable) 134 MB host range: the driver pins every 4 KB "
                         "page (pin_user_pages), maps them for DMA and into the GPU's address space, in one call on "
                         "the main thread: 2-12 GB/s (assumption; pinning 1 GB with cudaHostAlloc / cudaHostRegister "
                         "is commonly reported at 0.1-0.5 s)",
    "host_unregister_gbs": "cudaHostUnregister of the same range: the GPU mappings torn down, the pages unpinned: "
                           "10-60 GB/s (assumption)",
    "munmap_gbs": "the NumPy array's release (glibc munmap of the 134 MB mapping: page-table teardown, TLB "
                  "shootdown, pages freed): 10-50 GB/s of mapped memory (assumption)",
    "hot_atomic_gops": "rate of float32 atomicAdd (RED) updates onto ONE global address from a whole-GPU kernel "
                       "(index_add_'s indexFuncLargeIndex, one update per source element): the L2 slice that owns "
                       "the address applies them one after another, about one per L2 clock (the Kepler whitepaper's "
                       "'one operation per clock' for a common address, unchanged in kind since; ~1.5-2 G/s), with "
                       "no merging of a warp's same-address updates; band 0.7-4.0 G/s (assumption, wide: half to "
                       "twice that)",
    "sector_serial_frac": "fraction of the other bins' updates that queue behind the hot one: all 8 float32 bins "
                          "share one 32-byte sector, hence one L2 slice and atomic unit; 0 (different addresses "
                          "pipelined freely) to 1 (the sector serializes every update) (assumption)",
}
RATES_H100 = dict(H17.RATES_H100, **NEW_H100)
RATES_H200 = dict(H17.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(H17.RATE_SOURCES, **NEW_SOURCES)
Q18 = dict(H17.Q17)


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


def mlp_params(dims):
    return float(sum(x * y for x, y in zip(dims, dims[1:])))


def mlp_train_flops(rows, dims):
    """forward, weight-gradient and input-gradient GEMMs; no input gradient for the first layer"""
    f = 0.0
    for i, (x, y) in enumerate(zip(dims, dims[1:])):
        f += 2.0 * rows * x * y * (3 if i > 0 else 2)
    return f


# ---------------------------------------------------------------------------------------------------
# session_ranker: bias-free MLP 512 -> 4096 -> 4096 -> 1024 -> 1 (GELU), 32768 rows, bf16 autocast on fp32 weights,
# fused AdamW, BCE. Planted: gc.collect() at the end of every step, with a 1.5 M-entry dict of three-item lists alive,
# unless fixed (no per-step collection, gc.freeze() after start-up).
SR = dict(batch=32768, features=512, hidden=4096, users=1_500_000, touched=256, steps=14, warmup=3)
SR_DIMS = [512, 4096, 4096, 1024, 1]
SR_GELU_B = 10.0   # bytes per hidden activation (bf16): GELU forward (r2 w2) and backward (r2 r2 w2)
SR_OPS = 22        # autocast enter / exit, 4 linears, 3 GELU, .float(), BCE, backward(), opt.step (fused: ~4 ops of
# Python and one multi-tensor launch), zero_grad, the loss store, the NVTX pushes / pops, event record and wait
SR_NODES = 14      # 4 linear (mm + cast) nodes, 3 GELU, float, BCE, the casts' AccumulateGrad x 4
SR_SMALL = 14      # BCE forward / backward, the loss store, the autocast weight-cast kernels of the tiny last layer


def m_sr(r, fixed=False):
    B, U = SR["batch"], SR["users"]
    hbm, tiny, eff = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3, r["ew_mlp_eff"]
    P = mlp_params(SR_DIMS)
    hidden = float(B * sum(SR_DIMS[1:-1]))
    c = {"gemms_bf16": t_flops(mlp_train_flops(B, SR_DIMS), r["bf16_mid_tflops"]),
         "elementwise": t_bytes(hidden * SR_GELU_B + P * AMP_B, hbm * eff),
         "adamw_fused": t_bytes(P * ADAM_B[4], hbm),
         "small_kernels": SR_SMALL * tiny}
    gpu = sum(c.values())
    ops = (SR_OPS * r["eager_op_wide_us"] + SR_NODES * r["bwd_node_wide_us"]) / 1e3
    touch = SR["touched"] * r["cache_touch_us"] / 1e3
    objs = U + 1 + r["gc_base_objects"]
    gcms = 0.0 if fixed else objs * r["gc_obj_ns"] / 1e6
    host = ops + touch + gcms
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "gc_ms": gcms, "objects_m": objs / 1e6, "ops_ms": ops + touch,
                           "params_m": P / 1e6, "gpu_busy_share": pct(gpu, step),
                           "gemm_share": pct(c["gemms_bf16"], step)}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = m_sr(r, fixed=True)
    rm = {"gc_collect_per_step": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "gc_share": pct(gcms, step)})
    return out


# ---------------------------------------------------------------------------------------------------
# crop_watch: strided CNN encoder on 128 tiles of 4 x 512 x 512 uint8 (134 MB per step), bf16 autocast, channels-last,
# fused AdamW. Planted: a fresh NumPy array per batch, filled by 8 threads, cudaHostRegister-ed, copied, waited for,
# cudaHostUnregister-ed and freed, unless fixed (two pinned buffers reused, the copy non_blocking).
CW = dict(batch=128, bands=4, tile=512, classes=12, steps=14, warmup=3)
# convolutions: (cin, cout, k, output side)
CW_CONVS = [(4, 32, 4, 128), (32, 64, 3, 64), (64, 128, 3, 32), (128, 128, 3, 32), (128, 128, 3, 32), (128, 12, 1, 32)]
CW_IN_B = 35.0     # bytes per input element: uint8 -> float (r1 w4), subtract (r4 w4), divide (r4 w4), the channels-
# last copy (r4 w4), autocast's bf16 cast for the first convolution (r4 w2)
CW_ACT_B = 40.0    # bytes per bf16 activation of the 5 BatchNorm + ReLU layers, forward and backward (statistics
# read, normalize, ReLU in place; the backward's reduction, input gradient and ReLU mask)
CW_OPS = 34        # data: empty / fill / register / from_numpy / to / synchronize / unregister (or the copy and to);
# float, sub, div, contiguous, 6 conv, 5 BN, 5 ReLU, float, cross_entropy (2), backward(), opt.step (~4), zero_grad,
# loss store, NVTX, event record and wait
CW_NODES = 24      # 6 conv, 5 BN, 5 ReLU, the casts, float, cross_entropy (2), AccumulateGrad
CW_SMALL = 30      # BN statistics of small layers, the loss, the classifier's tiny kernels


def cw_sizes():
    n_tile = CW["bands"] * CW["tile"] ** 2
    nb = float(CW["batch"] * n_tile)
    fwd = sum(2.0 * co * ci * k * k * s * s for ci, co, k, s in CW_CONVS) * CW["batch"]
    first = 2.0 * CW_CONVS[0][1] * CW_CONVS[0][0] * 16 * CW_CONVS[0][3] ** 2 * CW["batch"]
    train = 3 * fwd - first  # no input gradient for the first convolution
    acts = float(CW["batch"] * sum(co * s * s for _, co, _, s in CW_CONVS[:5]))
    params = float(sum(co * ci * k * k for ci, co, k, _ in CW_CONVS) + 2 * sum(co for _, co, _, _ in CW_CONVS[:5]))
    return nb, train, acts, params


def m_cw(r, fixed=False):
    nb, train, acts, params = cw_sizes()
    hbm, tiny, eff = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3, r["ew_mlp_eff"]
    c = {"h2d_batch_pinned": t_link(nb, r["h2d_pinned_gbs"]),
         "conv_bf16": t_flops(train, r["conv_tile_tflops"]),
         "elementwise": t_bytes(nb * CW_IN_B + acts * CW_ACT_B + params * AMP_B, hbm * eff),
         "adamw_and_small": t_bytes(params * ADAM_B[4], hbm) + CW_SMALL * tiny}
    compute = c["conv_bf16"] + c["elementwise"] + c["adamw_and_small"]
    gpu = sum(c.values())
    launches = (CW_OPS * r["eager_op_wide_us"] + CW_NODES * r["bwd_node_wide_us"]) / 1e3
    fill = t_link(nb, r["fill_mt_gbs"])
    if fixed:
        host = fill + launches
        step = step_of(c, gpu, host)
        out = finish_gpu_host({"c": c, "step": step, "fill_ms": fill, "batch_mb": nb / 1e6}, gpu, host)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    faults = t_link(nb, r["fault_mt_gbs"])
    reg = t_link(nb, r["host_register_gbs"])
    unreg = t_link(nb, r["host_unregister_gbs"]) + t_link(nb, r["munmap_gbs"])
    # the chain of one step: the launches of step k (the GPU runs step k's compute meanwhile), the fill of a fresh
    # array (faults included) and its registration for step k+1, the copy (after step k's compute, same stream) waited
    # for, the unregistration and release; the compute of step k hides under the fill and registration when shorter
    pre = launches + fill + faults + reg
    step = max(pre, compute) + c["h2d_batch_pinned"] + unreg
    host = pre + unreg
    c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "fill_ms": fill + faults, "faults_ms": faults, "register_ms": reg,
                           "unregister_release_ms": unreg, "batch_mb": nb / 1e6, "gpu_busy_share": pct(gpu, step),
                           "plant_host_ms": faults + reg + unreg}, gpu, host)
    fx = m_cw(r, fixed=True)
    rm = {"host_register_per_step": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "register_share": pct(reg, step),
                # the plant must stay larger than the loader's own fill (kept by the fix) at every corner
                "plant_over_fill_ms": rm["host_register_per_step"] - fill})
    return out


# ---------------------------------------------------------------------------------------------------
# churn_scorer: bf16 MLP 32 -> 64 -> 1 over 16.8 M rows per batch, then per-region sums and counts with index_add_ into
# 8 bins, 85 % of the rows in bin 0, unless fixed (rows sorted by region once, one sum per contiguous slice).
CS = dict(rows=1 << 24, features=32, hidden=64, regions=8, home=0.85, steps=14, warmup=3)
CS_MLP_B = 64.0 + 128.0 + 256.0 + 128.0 + 4.0 + 6.0  # bytes per row: x read (32 bf16), h written (64 bf16), GELU
# (r w), the second GEMM's read of h, sigmoid (r2 w2), .float() (r2 w4)
CS_IA_B = 12.0     # per row and index_add_ call: the int64 index and the float32 source read
CS_OPS = 12        # linear, gelu, linear, sigmoid, float, squeeze, 2 zeros, 2 index_add_, clamp_min, div, 2 report
# stores, event record and wait (the squeeze and report views counted in CS_VIEWS)
CS_VIEWS = 3
CS_SMALL = 6       # zeros x 2, clamp, divide, two report stores
CS_FIX_OPS = 14    # split, 8 sums, stack, torch.tensor, .to(cuda)... in place of 2 zeros and 2 index_add_
CS_FIX_VIEWS = 8   # the 8 slices


def m_cs(r, fixed=False):
    N, R, home = float(CS["rows"]), CS["regions"], CS["home"]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    c = {"mlp_memory_bound": t_bytes(N * CS_MLP_B, hbm * r["ew_mlp_eff"]),
         "small_kernels": CS_SMALL * tiny}
    if fixed:
        c["slice_sums"] = t_bytes(N * 4.0, hbm) + (R + 2) * tiny
        host = ((CS_OPS - 4 + CS_FIX_OPS) * r["eager_op_wide_us"] + (CS_VIEWS + CS_FIX_VIEWS) * r["view_op_us"]
                + r["small_h2d_us"]) / 1e3
    else:
        serial = 2.0 * N * (home + (1.0 - home) * r["sector_serial_frac"])
        c["index_add_contended"] = serial / (r["hot_atomic_gops"] * 1e9) * 1e3 + t_bytes(2 * N * CS_IA_B, hbm)
        host = (CS_OPS * r["eager_op_wide_us"] + CS_VIEWS * r["view_op_us"]) / 1e3
    gpu = sum(c.values())
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "rows_m": N / 1e6}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["index_add_share"] = pct(c["index_add_contended"], step)
    out["hot_updates_m"] = 2.0 * N * home / 1e6
    fx = m_cs(r, fixed=True)
    rm = {"atomic_contention": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"],
                "plant_over_mlp_ms": rm["atomic_contention"] - c["mlp_memory_bound"]})
    return out


# ---------------------------------------------------------------------------------------------------
# answer_rerank: bias-free MLP 1024 -> 4096 -> 4096 -> 1 (GELU) over 512 x 64 candidates, bf16 autocast, fused AdamW.
# Planted: the listwise cross-entropy computed query by query in a Python loop, unless fixed (masked, batched).
AR = dict(queries=512, candidates=64, features=1024, hidden=4096, steps=14, warmup=3)
AR_DIMS = [1024, 4096, 4096, 1]
AR_GELU_B = 10.0
AR_OPS = 18        # autocast, 3 linears, 2 GELU, float, view, the division, backward(), opt.step (~4), zero_grad,
# loss store, NVTX, event record and wait
AR_NODES = 10
AR_SMALL = 10
AR_Q_OPS = 3       # per query: log_softmax and nll_loss (F.cross_entropy), the running sum's add
AR_Q_VIEWS = 2     # per query: scores[i, :n] (select + slice in one __getitem__), tgt[i]
AR_Q_NODES = 5     # per query: AddBackward, NllLossBackward, LogSoftmaxBackward, SliceBackward, SelectBackward
AR_Q_KERNELS = 11  # per query: 3 forward; backward: nll (zero fill + scatter), log_softmax, slice and select (zero
# fill + copy each), the gradient accumulation into the [512, 64] scores' gradient
AR_FIX_OPS = 2     # masked_fill, cross_entropy (2 kernels)
AR_FIX_NODES = 3
AR_FIX_KERNELS = 8


def m_ar(r, fixed=False):
    Q, C = AR["queries"], AR["candidates"]
    B = Q * C
    hbm, tiny, eff = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3, r["ew_mlp_eff"]
    P = mlp_params(AR_DIMS)
    hidden = float(B * sum(AR_DIMS[1:-1]))
    c = {"gemms_bf16": t_flops(mlp_train_flops(B, AR_DIMS), r["bf16_mid_tflops"]),
         "elementwise": t_bytes(hidden * AR_GELU_B + P * AMP_B, hbm * eff),
         "adamw_fused": t_bytes(P * ADAM_B[4], hbm),
         "small_kernels": AR_SMALL * tiny}
    base_host = (AR_OPS * r["eager_op_wide_us"] + AR_NODES * r["bwd_node_wide_us"]) / 1e3
    if fixed:
        c["loss_kernels"] = AR_FIX_KERNELS * tiny
        host = base_host + (AR_FIX_OPS * r["eager_op_wide_us"] + AR_FIX_NODES * r["bwd_node_wide_us"]) / 1e3
        loop = 0.0
    else:
        c["loss_kernels"] = Q * AR_Q_KERNELS * tiny
        loop = Q * (AR_Q_OPS * r["eager_op_wide_us"] + AR_Q_VIEWS * r["view_op_us"]
                    + AR_Q_NODES * r["bwd_node_wide_us"]) / 1e3
        host = base_host + loop
    gpu = sum(c.values())
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "loop_host_ms": loop, "gpu_busy_share": pct(gpu, step),
                           "params_m": P / 1e6}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = m_ar(r, fixed=True)
    rm = {"per_sample_python_loop": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"],
                "loop_kernels": float(Q * AR_Q_KERNELS)})
    return out


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=14, warmup=3):
    return D.base(name, f"heldout18/{workload}", variant, SET, args, ranks=1, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def planted18(cause, where, fix, b, key_rm, key_share, derivation, accept, b2):
    return D.h200_planted(cause, where, fix, b, b2, key_rm, key_share, derivation, accept, band_of18)


def finish(m, b, b2, keys, after=True, fixed_case=None):
    return D.h200_finish(m, b, b2, keys, SEV_DOC18, KERNELS, RATES_H100, RATES_H200, RATE_SOURCES, after, fixed_case)


KERNELS = {
    "session_ranker": "per step ~40 kernels (4 bf16 GEMMs forward and 7 backward over 32768 rows, 3 GELU forward and "
                      "backward, autocast's weight casts, the BCE, one fused AdamW launch) in step_N > forward / "
                      "backward / optimizer, 6-10 ms of GPU work; step_N > bookkeeping then holds the main thread for "
                      "~60-270 ms with no CUDA call and no OS-runtime wait (gc.collect() is pure CPU work), the GPU idle",
    "session_ranker.fixed": "the same ~40 kernels per step; step_N > bookkeeping a fraction of a millisecond; GPU-bound",
    "crop_watch": "per step ~80 kernels (6 cuDNN convolutions forward and ~11 backward, 5 BatchNorm + ReLU forward and "
                  "backward, the input's float / normalize / channels-last copies, the loss, fused AdamW) and one "
                  "134 MB HtoD memcpy from registered (pinned) host memory at ~50 GB/s; in step_N > data the CUDA API "
                  "shows one cudaHostRegister (11-67 ms) and one cudaHostUnregister per step, a cudaStreamSynchronize "
                  "waiting for the copy, and 8 decoder threads writing the fresh array",
    "crop_watch.fixed": "the same kernels and one 134 MB pinned HtoD memcpy per step, no cudaHostRegister / "
                        "Unregister and no stream synchronize in step_N > data",
    "churn_scorer": "per batch (no NVTX) ~12 kernels: two bf16 GEMMs (K = 32, N = 64; K = 64, N = 1) streaming 16.8 M "
                    "rows, GELU, sigmoid, a float cast, two zero fills, two index_add_ kernels "
                    "(indexFuncLargeIndex, 16.8 M float atomicAdds each onto 8 bins, 85 % onto bin 0: 3.6-24 ms "
                    "each, the largest class), a clamp, a divide and two small report copies",
    "churn_scorer.fixed": "the same MLP kernels; 8 reductions over contiguous slices and a stack in place of the two "
                          "index_add_ kernels, one tiny HtoD copy of the counts",
    "answer_rerank": "per step ~5700 tiny kernels from the loss loop (per query log_softmax, nll_loss, add forward; "
                     "nll / log_softmax backward, zero fills and slice copies of the select / slice backward, the "
                     "gradient accumulation into the [512, 64] scores), plus ~30 MLP kernels (3 bf16 GEMMs forward, "
                     "5 backward over 32768 rows, GELU, casts, fused AdamW); step_N > loss and the loss part of "
                     "step_N > backward hold most of the step, the GPU starved between 2-6 µs kernels",
    "answer_rerank.fixed": "the same MLP kernels and ~8 for the masked, batched cross-entropy",
}


def build():
    out = {}

    # ---- crop_watch (host_register_per_step) -----------------------------------------------------------------
    b, b2, keys = ev(m_cw)
    nb = cw_sizes()[0]
    args = ["--batch", CW["batch"], "--bands", CW["bands"], "--tile", CW["tile"], "--classes", CW["classes"]]
    m = base("crop_watch", "crop_watch.py", "planted", args, steps=CW["steps"], warmup=CW["warmup"], est=45)
    m["uses"] = uses(dtype="bf16 autocast on float32 weights, channels-last", optimizer="AdamW (fused)",
                     pinned="host memory page-locked per step with cudaHostRegister on a fresh NumPy array",
                     host_sync="a cudaStreamSynchronize per step in the loader (waits for its copy) and the event "
                               "throttle")
    m["uses"]["loader"] = "8 NumPy copy threads fill each 134 MB uint8 batch on the host (stand-in for decoding)"
    m["techniques"] = techniques(
        "stage batches in pinned memory allocated once and reused (two torch.empty(..., pin_memory=True) buffers "
        "filled in turn, or the DataLoader's pin_memory thread), and issue the copy non_blocking without waiting for "
        "it; never cudaHostRegister / cudaHostUnregister per batch",
        ["more loader threads or faster decoding as the top fix (the fill is the smaller part)",
         "a faster convolution / cuDNN settings (the GPU is idle most of the step)",
         "CUDA graphs / launch overhead", "a larger batch", "torch.compile", "FP8 / lower precision"])
    m["planted"] = [planted18(
        "host_register_per_step",
        {"device": "GPU 0 (and the host)", "region": "step_N > data, every step: np.empty + fill of a fresh 134 MB "
         "array, cudaHostRegister, the HtoD copy and a cudaStreamSynchronize, cudaHostUnregister, the array freed; "
         "the GPU idle through most of it"},
        "two pinned staging buffers allocated once and reused, the copy non_blocking (--fixed; not captured)", b,
        "rm.host_register_per_step", "share.host_register_per_step",
        f"{CW['batch']} tiles x {CW['bands']} x {CW['tile']}^2 uint8 = {nb / 1e6:.0f} MB per step. GPU: the strided "
        f"encoder's convolutions (forward and backward, {cw_sizes()[1] / 1e9:.0f} GFLOP at 40-150 TFLOP/s: "
        f"{rng(b2, 'c.conv_bf16')} ms), the memory-bound input conversion and BatchNorm / ReLU work "
        f"({rng(b2, 'c.elementwise')} ms), the pinned copy at 50-56 GB/s ({rng(b2, 'c.h2d_batch_pinned')} ms). "
        f"Host, per step: the 8 threads' fill of a freshly mapped array (copy at 15-50 GB/s plus first-touch faults at "
        f"8-40 GB/s: {rng(b2, 'fill_ms')} ms, of which faults {rng(b2, 'faults_ms')}), cudaHostRegister at 2-12 "
        f"GB/s ({rng(b2, 'register_ms')} ms), then the copy waited for, cudaHostUnregister and the munmap "
        f"({rng(b2, 'unregister_release_ms')} ms), all in one chain with the copy, the compute of the previous step "
        f"hidden under the fill: a step {rng(b2, 'step')} ms on the H200 with the GPU busy "
        f"{rng(b2, 'gpu_busy_share', 0)} %. With two pinned buffers reused (fill {rng(b2, 'after_host_ms')} ms of "
        f"host incl. launches, no faults, no registration, no wait): {rng(b2, 'after')} ms (GPU-bound at every "
        f"corner but the slowest fill): removed {rng(b2, 'rm.host_register_per_step')} ms = "
        f"{rng(b2, 'share.host_register_per_step', 1)} % (H100 {rng(b, 'share.host_register_per_step', 1)} %), "
        f"{rng(b2, 'speedup')}x; the removed time exceeds the loader's own fill at every corner (margin "
        f"{rng(b2, 'plant_over_fill_ms')} ms). New cause name: host_register_per_step.",
        ["host_register_per_step", "host_pinning_per_step", "pinned_buffer_churn", "cuda_host_register",
         "host_bound"], b2)]
    m["tolerated"] = [
        {"what": "the cudaStreamSynchronize in the loader: part of the planted mechanism (the pages must stay locked "
                 "until the copy ends), not a separate top cause; the fix drops it with the registration",
         "cause": "host_sync", "max_severity": "critical"},
        {"what": "the loader threads' fill of the batch (a copy the fix keeps, into the pinned buffer)",
         "cause": "host_bound", "max_severity": "high"},
        {"what": "the 134 MB HtoD copy on the compute stream, not overlapped with compute (pinned, at full PCIe rate)",
         "cause": "copy_not_overlapped", "max_severity": "medium"},
        {"what": "the normalization's float32 elementwise kernels and BatchNorm / ReLU (memory-bound)",
         "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expected_in_trace"] = [
        "per step one cudaHostRegister and one cudaHostUnregister in step_N > data (the register call tens of ms), "
        "a cudaStreamSynchronize after a 134 MB HtoD memcpy from pinned memory (~50 GB/s)",
        f"the GPU idle most of each step: busy {rng(b2, 'gpu_busy_share', 0)} %, step {rng(b2, 'step', 0)} ms",
        "OS-runtime: the main thread waiting on 8 worker threads (futex / pthread_cond) while they fill, munmap per step"]
    m["must_not"] = [
        "pageable memory / an unpinned copy as the cause (the copy runs from page-locked memory at full rate)",
        "the copy's bandwidth or the PCIe link as the cause",
        "the convolutions, cuDNN or precision as the cause",
        "more loader threads or a DataLoader with more workers as the top fix",
        "CUDA graphs / launch overhead",
        "removing the synchronize alone as the fix (the pages must stay locked until the copy ends)",
        "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = ("We train a small crop-type segmentation CNN on satellite tiles on one H200: 128 tiles of 4 bands x "
                     "512 x 512 uint8 per step (134 MB), decoded on the host by 8 threads and handed to the GPU by our "
                     "own loader, bf16 autocast, channels-last, fused AdamW. The GPU sits idle for most of every step "
                     "although the copy itself is fast. Where does the time go, and what should we change?")
    m["diagnosis"] = (f"The loader page-locks a freshly allocated host array for every batch: cudaHostRegister of "
                      f"134 MB ({rng(b2, 'register_ms', 0)} ms), the copy, a stream synchronize, cudaHostUnregister "
                      f"and the array's release, with the fresh array's page faults in the fill, all in series on the "
                      f"main thread: a step {rng(b2, 'step', 0)} ms on the H200 for {rng(b2, 'gpu_ms', 1)} ms of GPU "
                      f"work. Allocate two pinned buffers once (torch.empty(..., pin_memory=True)), fill them in turn "
                      f"and copy non_blocking: ~{rng(b2, 'after', 1)} ms, "
                      f"{rng(b2, 'share.host_register_per_step', 0)} % removed "
                      f"({band_of18(b2, 'share.host_register_per_step')[0]}), {rng(b2, 'speedup', 1)}x. The copy "
                      f"itself is already pinned and fast; the cost is pinning anew every step.")
    m["measure"] = [{"what": "step period", "query": Q18["step"], "expect_ms": r2(b2["step"])},
                    {"what": "CUDA API per step", "query": Q18["cuda_api"],
                     "expect": f"one cudaHostRegister ({rng(b2, 'register_ms', 0)} ms) and one cudaHostUnregister per "
                               f"step, one cudaStreamSynchronize, one 134 MB HtoD copy from pinned memory"}]
    m["new_cause"] = {"name": "host_register_per_step", "why": "host memory page-locked anew for every batch "
                      "(cudaHostRegister on a fresh array, or a new pin_memory() / cudaHostAlloc buffer per batch) and "
                      "released after the copy: pinning costs far more than the copy it speeds up; fixed by pinned "
                      "staging buffers allocated once and reused"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- session_ranker (gc_collect_per_step) and session_ranker.fixed ---------------------------------------
    b, b2, keys = ev(m_sr)
    bf, bf2, keys_f = ev(lambda r: m_sr(r, fixed=True))
    args = ["--batch", SR["batch"], "--features", SR["features"], "--hidden", SR["hidden"], "--users", SR["users"],
            "--touched", SR["touched"]]
    use_sr = dict(dtype="bf16 autocast on float32 weights", optimizer="AdamW (fused)", host_sync=EVENT_SYNC)
    m = base("session_ranker", "session_ranker.py", "planted", args, steps=SR["steps"], warmup=SR["warmup"], est=45)
    m["uses"] = uses(**use_sr)
    m["uses"]["host_objects"] = (f"a dict of {SR['users'] / 1e6:.1f} M three-item lists (the session cache) alive "
                                 f"for the whole run; gc.collect() called at the end of every step")
    m["techniques"] = techniques(
        "drop the per-step gc.collect() (let CPython's generational collector run on its own), and gc.freeze() the "
        "long-lived cache after start-up (or keep it out of tracked containers: arrays / a DataFrame); if host "
        "memory must be trimmed, collect every few thousand steps, not every step",
        ["CUDA graphs / launch overhead (the GPU part is ~40 kernels)", "a faster GPU kernel / GEMM tuning",
         "a larger batch as the fix", "data loading (features resident on the GPU)", "torch.compile",
         "pinned memory / copies (there are none)"])
    m["planted"] = [planted18(
        "gc_collect_per_step",
        {"device": "GPU 0 (and the host)", "region": "step_N > bookkeeping, every step: gc.collect() on the main "
         "thread, no CUDA call and no OS-runtime wait, the GPU idle"},
        "no per-step gc.collect(), gc.freeze() after start-up (--fixed, captured as session_ranker.fixed)", b,
        "rm.gc_collect_per_step", "share.gc_collect_per_step",
        f"GPU per step: the MLP's bf16 GEMMs ({mlp_train_flops(SR['batch'], SR_DIMS) / 1e12:.2f} TFLOP at 550-800 "
        f"TFLOP/s: {rng(b2, 'c.gemms_bf16')} ms), GELU and autocast casts ({rng(b2, 'c.elementwise')} ms), fused AdamW "
        f"over {b2['params_m'][0]:.1f} M parameters: {rng(b2, 'gpu_ms')} ms. Host: {SR_OPS} ops at 20-130 µs, "
        f"{SR_NODES} backward nodes at 10-50 µs and {SR['touched']} cache updates ({rng(b2, 'ops_ms')} ms), then "
        f"gc.collect(): a full collection walks every tracked container, the {SR['users'] / 1e6:.1f} M session lists "
        f"plus 0.1-0.3 M of the interpreter's and libraries' own ({rng(b2, 'objects_m')} M objects at 40-150 ns: "
        f"{rng(b2, 'gc_ms')} ms). The host is one step ahead at most, so a step is the host's: {rng(b2, 'step')} ms on "
        f"the H200 with the GPU busy {rng(b2, 'gpu_busy_share', 0)} %. Without the per-step collection: "
        f"{rng(b2, 'after')} ms (GPU-bound; host {rng(b2, 'after_host_ms')} ms): removed "
        f"{rng(b2, 'rm.gc_collect_per_step')} ms = {rng(b2, 'share.gc_collect_per_step', 1)} % (H100 "
        f"{rng(b, 'share.gc_collect_per_step', 1)} %), {rng(b2, 'speedup')}x. New cause name: gc_collect_per_step.",
        ["gc_collect_per_step", "python_gc_pause", "garbage_collection", "host_bound"], b2)]
    m["tolerated"] = [{"what": "autocast's GELU and weight-cast kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "step_N > bookkeeping holds most of every step on the main thread with no CUDA API call and no OS-runtime "
        "call (pure Python / C work of the collector)",
        f"the GPU idle most of each step: busy {rng(b2, 'gpu_busy_share', 0)} %, step {rng(b2, 'step', 0)} ms",
        "in the after run: step_N > bookkeeping under a millisecond, the GPU busy nearly all the step"]
    m["must_not"] = [
        "CUDA graphs / launch overhead as the fix", "the GEMMs, precision or kernel efficiency as the cause",
        "a host synchronization / .item() as the cause", "data loading or host-to-device copies",
        "a larger batch as the fix", "memory capacity / allocator settings", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = ("Here are two profiles of our click-through ranking model's training on one H200 (a bias-free MLP "
                     "512 -> 4096 -> 4096 -> 1024 -> 1, 32768 impressions per step, bf16 autocast, fused AdamW), "
                     "before and after a small change to the training loop's bookkeeping. Did the change help, how much "
                     "per step, and is anything still holding it back?")
    m["diagnosis"] = (f"Before: every step ended with gc.collect(), a full collection over ~1.7 M tracked objects (the "
                      f"1.5 M-entry session cache of lists, plus the libraries'): {rng(b2, 'gc_ms', 0)} ms of pure CPU "
                      f"work in step_N > bookkeeping while the GPU, done with its {rng(b2, 'gpu_ms', 1)} ms of work, "
                      f"waited: a step {rng(b2, 'step', 0)} ms on the H200. After (no per-step collection, the cache "
                      f"frozen): ~{rng(b2, 'after', 1)} ms, {rng(b2, 'share.gc_collect_per_step', 0)} % of the step "
                      f"removed ({band_of18(b2, 'share.gc_collect_per_step')[0]}), {rng(b2, 'speedup', 0)}x. Now the "
                      f"step is GPU-bound on the MLP's bf16 GEMMs (~{rng(bf2, 'gemm_share', 0)} %); nothing planted is "
                      f"left.")
    m["measure"] = [{"what": "step period", "query": Q18["step"], "expect_ms": r2(b2["step"])},
                    {"what": "NVTX ranges", "query": Q18["nvtx_ranges"],
                     "expect": f"step_N > bookkeeping {rng(b2, 'gc_ms', 0)} ms per step, the largest range"}]
    m["new_cause"] = {"name": "gc_collect_per_step", "why": "gc.collect() (a full cyclic garbage collection) called in "
                      "every step of a process holding millions of tracked Python objects: each call walks all of "
                      "them on the main thread, a stall of tens to hundreds of ms with the GPU idle; fixed by leaving "
                      "collection to the generational collector (gc.freeze() for long-lived data), or collecting rarely"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="session_ranker.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("session_ranker.fixed", "session_ranker.py", "fixed", args + ["--fixed"], steps=SR["steps"],
             warmup=SR["warmup"], est=30)
    m["uses"] = uses(**use_sr)
    m["uses"]["host_objects"] = "the same cache, frozen (gc.freeze()) after start-up; no gc.collect() in the loop"
    m["techniques"] = techniques(
        "nothing planted is left: the step is the MLP's bf16 GEMMs; only ordinary tuning remains",
        ["garbage collection (done)", "CUDA graphs / launch overhead (GPU-bound)", "data loading"])
    m["planted"] = []
    m["tolerated"] = [{"what": "autocast's GELU and weight-cast kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "medium"}]
    m["expected_in_trace"] = [f"GPU-bound: bf16 GEMMs ~{rng(b2, 'gemm_share', 0)} % of a {rng(b2, 'step', 1)} ms step",
                              "step_N > bookkeeping under a millisecond"]
    m["must_not"] = ["garbage collection still as the problem", "a host-bound or launch-bound step",
                     "a planted problem left"]
    m["expect_quiet"] = False
    m["question"] = "After the change, is anything still holding a step back?"
    m["diagnosis"] = (f"No planted problem is left: {rng(b2, 'step', 1)} ms per step on the H200, GPU-bound (host "
                      f"{rng(b2, 'host_ms', 1)} ms), the bf16 GEMMs ~{rng(b2, 'gemm_share', 0)} % of it.")
    m["measure"] = [{"what": "step period", "query": Q18["step"], "expect_ms": r2(b2["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- churn_scorer (atomic_contention), no NVTX ------------------------------------------------------------
    b, b2, keys = ev(m_cs)
    args = ["--rows", CS["rows"], "--features", CS["features"], "--hidden", CS["hidden"], "--regions", CS["regions"],
            "--home-share", CS["home"]]
    m = base("churn_scorer", "churn_scorer.py", "planted", args, nvtx=False, steps=CS["steps"], warmup=CS["warmup"],
             est=40)
    m["uses"] = uses(dtype="bf16 inference (torch.inference_mode)", optimizer="none (inference)", host_sync=EVENT_SYNC)
    m["uses"]["scatter"] = ("Tensor.index_add_ of 16.8 M float32 values into 8 bins, twice per batch, 85 % of the "
                            "indices equal to 0")
    m["techniques"] = techniques(
        "take the reduction off the atomics: the rows sorted (grouped) by region once when a batch is loaded and one "
        "sum per contiguous slice (or torch.segment_reduce), or a privatized histogram (torch.bincount(region, "
        "weights=p, minlength=8): per-block shared-memory bins), or a [N, 8] masked sum; the counts known per batch",
        ["CUDA graphs / launch overhead (GPU-bound, ~12 kernels)", "a faster GEMM / TF32 / FP8 for the MLP",
         "a larger batch as the fix", "torch.use_deterministic_algorithms as the fix",
         "data loading (features resident on the GPU)"])
    m["planted"] = [planted18(
        "atomic_contention",
        {"device": "GPU 0", "region": "every batch (no NVTX): the two index_add_ kernels (indexFuncLargeIndex) that "
         "roll the 16.8 M scores and ones up into 8 region bins, the largest kernel class"},
        "rows grouped by region at load, one sum per slice (--fixed; not captured)", b,
        "rm.atomic_contention", "share.atomic_contention",
        f"{CS['rows'] / 1e6:.1f} M rows per batch. The MLP is memory-bound ({CS_MLP_B:.0f} B per row: the features, the "
        f"64-wide hidden layer written, read by GELU and by the second GEMM, the scores) at 60-95 % of HBM: "
        f"{rng(b2, 'c.mlp_memory_bound')} ms. The roll-up's two index_add_ calls do one float atomicAdd per row onto 8 "
        f"bins; {CS['home'] * 100:.0f} % of them ({b2['hot_updates_m'][0]:.1f} M per batch) hit bin 0, whose L2 slice "
        f"applies same-address updates one after another at 0.7-4 G/s, and the other bins share its 32-byte sector "
        f"(0-100 % of their updates queued behind): {rng(b2, 'c.index_add_contended')} ms, "
        f"{rng(b2, 'index_add_share', 0)} % of a {rng(b2, 'step')} ms batch on the H200 (GPU-bound; host "
        f"{rng(b2, 'host_ms')} ms). Grouped by region with one sum per slice: {rng(b2, 'after')} ms: removed "
        f"{rng(b2, 'rm.atomic_contention')} ms = {rng(b2, 'share.atomic_contention', 1)} % (H100 "
        f"{rng(b, 'share.atomic_contention', 1)} %), {rng(b2, 'speedup')}x; the removable time exceeds the whole MLP at "
        f"every corner (margin {rng(b2, 'plant_over_mlp_ms')} ms). The band is wide because the same-address atomic "
        f"rate is an assumption. New cause name: atomic_contention.",
        ["atomic_contention", "scatter_contention", "hot_index_atomics", "index_add_contention", "kernel_inefficient"],
        b2)]
    m["tolerated"] = [{"what": "the MLP's memory-bound GEMMs and GELU (K = 32 / 64: no tensor-core-bound work; fusing "
                               "GELU into the first GEMM would save part of it)",
                       "cause": "elementwise_unfused", "max_severity": "high"}]
    m["expected_in_trace"] = [
        "no NVTX; per batch two index_add_ kernels (indexFuncLargeIndex) are the largest class, each several ms",
        "GPU-bound: the next batch's kernels queued behind (event sync on the previous batch only)"]
    m["must_not"] = [
        "a host-bound or launch-bound step / CUDA graphs", "the MLP's GEMMs or their precision as the cause",
        "memory bandwidth of the MLP as the top problem", "a larger batch as the fix",
        "data loading or host-to-device copies", "a host synchronization as the cause", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = ("Our nightly churn-scoring job runs a small bf16 MLP (32 -> 64 -> 1) over 16.8 M customers per batch "
                     "on one H200 and then rolls the scores up per sales region (8 regions) for a dashboard. A batch "
                     "takes several times longer than the MLP's memory traffic would suggest. Where does a batch's time "
                     "go, and what should we change?")
    m["diagnosis"] = (f"The per-region roll-up dominates: index_add_ into 8 bins does one float atomicAdd per customer, "
                      f"and 85 % of the customers are in one region, so ~{b2['hot_updates_m'][0]:.0f} M updates per "
                      f"batch serialize on a single address (the 8 bins in one 32-byte sector): the two index_add_ "
                      f"kernels take {rng(b2, 'c.index_add_contended', 0)} ms of a {rng(b2, 'step', 0)} ms batch on the "
                      f"H200 against {rng(b2, 'c.mlp_memory_bound', 1)} ms for the MLP. Group the rows by region once "
                      f"(sort at load) and sum contiguous slices, or use a privatized histogram "
                      f"(torch.bincount(..., weights=...)): ~{rng(b2, 'after', 1)} ms, "
                      f"{rng(b2, 'share.atomic_contention', 0)} % removed "
                      f"({band_of18(b2, 'share.atomic_contention')[0]}), {rng(b2, 'speedup', 1)}x.")
    m["measure"] = [{"what": "batch period (no NVTX)", "query": Q18["anchor"] + " with ANCHOR = the first GEMM of the MLP "
                     "(or the first index_add_ kernel), C = 1, WARM = 3", "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q18["kernels"],
                     "expect": f"indexFuncLargeIndex (index_add_) {rng(b2, 'c.index_add_contended', 0)} ms per batch, "
                               f"the largest class"}]
    m["new_cause"] = {"name": "atomic_contention", "why": "a scatter / index_add_ / histogram whose atomics pile onto a "
                      "few addresses (few bins, a skewed key): the L2 applies same-address atomics one at a time, so "
                      "one kernel runs orders of magnitude below memory speed; fixed by a privatized or segmented "
                      "reduction (sort / group once, per-block bins, a dense masked sum)"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- answer_rerank (per_sample_python_loop) --------------------------------------------------------------
    b, b2, keys = ev(m_ar)
    args = ["--queries", AR["queries"], "--candidates", AR["candidates"], "--features", AR["features"], "--hidden",
            AR["hidden"]]
    m = base("answer_rerank", "answer_rerank.py", "planted", args, steps=AR["steps"], warmup=AR["warmup"], est=45)
    m["uses"] = uses(dtype="bf16 autocast on float32 weights", optimizer="AdamW (fused)", sequences=True,
                     host_sync=EVENT_SYNC)
    m["uses"]["loss"] = "listwise softmax cross-entropy, one F.cross_entropy per query in a Python loop over 512 queries"
    m["techniques"] = techniques(
        "vectorize the loss: mask the padded candidates to -inf (scores.masked_fill(pad, -inf)) and call "
        "F.cross_entropy once on the [512, 64] score matrix (ignore_index / weights for anything else per-query)",
        ["CUDA graphs as the top fix (the loop's shapes vary per query; vectorizing removes the launches)",
         "a faster GEMM / FP8 (the GPU is idle most of the step)", "a larger batch as the fix",
         "data loading (features resident on the GPU)", "flash attention (no attention)",
         "torch.compile as the top fix"])
    m["planted"] = [planted18(
        "per_sample_python_loop",
        {"device": "GPU 0 (and the host)", "region": "step_N > loss (the per-query loop) and the loss's part of "
         "step_N > backward: ~5600 tiny kernels per step, each issued from Python or the autograd engine"},
        "one masked F.cross_entropy over the batch (--fixed; not captured)", b,
        "rm.per_sample_python_loop", "share.per_sample_python_loop",
        f"GPU per step: the MLP's bf16 GEMMs over {AR['queries'] * AR['candidates']} rows "
        f"({mlp_train_flops(AR['queries'] * AR['candidates'], AR_DIMS) / 1e12:.2f} TFLOP at 550-800 TFLOP/s: "
        f"{rng(b2, 'c.gemms_bf16')} ms), GELU and casts ({rng(b2, 'c.elementwise')} ms), AdamW. The loss loop: per "
        f"query {AR_Q_OPS} ops at 20-130 µs, {AR_Q_VIEWS} indexing calls at 3-10 µs, and {AR_Q_NODES} backward nodes at "
        f"10-50 µs: {rng(b2, 'loop_host_ms')} ms of host per step for {AR['queries']} queries, issuing "
        f"{int(b2['loop_kernels'][0])} kernels of 2-6 µs ({rng(b2, 'c.loss_kernels')} ms of GPU). The host paces the "
        f"step: {rng(b2, 'step')} ms on the H200, the GPU busy {rng(b2, 'gpu_busy_share', 0)} %. One masked "
        f"cross-entropy: {rng(b2, 'after')} ms (GPU-bound; host "
        f"{rng(b2, 'after_host_ms')} ms): removed {rng(b2, 'rm.per_sample_python_loop')} ms = "
        f"{rng(b2, 'share.per_sample_python_loop', 1)} % (H100 {rng(b, 'share.per_sample_python_loop', 1)} %), "
        f"{rng(b2, 'speedup')}x. New cause name: per_sample_python_loop.",
        ["per_sample_python_loop", "python_loop_loss", "unvectorized_loss", "launch_bound", "host_bound"], b2)]
    m["tolerated"] = [{"what": "autocast's GELU and weight-cast kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "step_N > loss long on the host with thousands of cudaLaunchKernel calls; the backward's loss part as long "
        "again in the autograd thread",
        f"~{int(b2['loop_kernels'][0])} tiny kernels per step (log_softmax, nll_loss, add, fills, copies); the GPU idle "
        f"between them: busy {rng(b2, 'gpu_busy_share', 0)} %"]
    m["must_not"] = [
        "the GEMMs, precision or kernel efficiency as the cause", "a host synchronization / .item() as the cause",
        "data loading or host-to-device copies", "a larger batch as the fix", "attention as the cause",
        "CUDA graphs as the top fix without vectorizing the loss", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = ("We train an answer re-ranker on one H200: 512 queries per step with up to 64 candidate answers each "
                     "(padded to 64), a bias-free MLP 1024 -> 4096 -> 4096 -> 1 scoring every (query, answer) pair, bf16 "
                     "autocast, fused AdamW, and a listwise softmax cross-entropy over each query's real candidates. A "
                     "step takes far longer than the MLP's FLOPs suggest and the GPU is mostly idle. Why, and what "
                     "should we change?")
    m["diagnosis"] = (f"The loss is computed query by query in a Python loop (F.cross_entropy on scores[i, :n_i] for "
                      f"each of the 512 queries, summed): ~{int(b2['loop_kernels'][0])} tiny kernels per step, each "
                      f"launched from Python or the autograd engine, {rng(b2, 'loop_host_ms', 0)} ms of host per step; "
                      f"a step {rng(b2, 'step', 0)} ms on the H200 for {rng(b2, 'after', 1)} ms of real work. Mask "
                      f"the padded candidates to -inf and call F.cross_entropy once on the [512, 64] scores: "
                      f"~{rng(b2, 'after', 1)} ms, {rng(b2, 'share.per_sample_python_loop', 0)} % removed "
                      f"({band_of18(b2, 'share.per_sample_python_loop')[0]}), {rng(b2, 'speedup', 0)}x.")
    m["measure"] = [{"what": "step period", "query": Q18["step"], "expect_ms": r2(b2["step"])},
                    {"what": "NVTX ranges", "query": Q18["nvtx_ranges"],
                     "expect": "step_N > loss and step_N > backward the longest ranges, thousands of launches each"}]
    m["new_cause"] = {"name": "per_sample_python_loop", "why": "a loss or metric computed by a Python loop over the "
                      "samples of a batch: each sample costs a few ops forward and a few autograd nodes backward, "
                      "thousands of tiny kernels per step paced by the host; fixed by the vectorized (masked / "
                      "padded) form over the whole batch"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.h200_table)
