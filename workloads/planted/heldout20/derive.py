#!/usr/bin/env python3
"""First-principles truth for the twentieth held-out set (heldout20): writes heldout20/manifests/<case>.json from
FLOPs, bytes, call counts and rate bands alone (no capture, no aisp output, no GPU run), with the helpers of
../derive.py and the rate bands of heldout19/derive.py (which carry heldout18's and the earlier sets').

    python3 workloads/planted/heldout20/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout20/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout20/derive.py --table    # the table only

Method: as heldout11-19/derive.py. Each case is a small model of one steady step; every part is FLOPs / rate, bytes /
bandwidth, or calls (elements) x a host cost per call; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period". In the host-paced
models the host chain of a step is serial and the previous step's GPU work hides under it (the throttle lets the host
run one step ahead); a step is the larger of its GPU and host time.

Severity (as heldout11-19): info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical; each planted problem
also carries `severity_legacy` under the earlier sets' bands (1 / 5 / 15 / 40 %).

Made for ONE H200: four one-GPU programs, one with a captured fixed variant (a before/after pair), no multi-rank case.
item_linker is GPU-bound (a two-hop propagation written (A @ A) @ V: a 24576^3 GEMM where A @ (A @ V) needs two
24576^2 x 256 ones); the other three are host-paced: ledger_classifier (nvidia-smi run with subprocess every step for
telemetry), claims_encoder (SHA-256 of the 134 MB pinned batch recomputed every step; no NVTX) and shelf_tagger (a
10 MB taxonomy JSON re-read with json.load every step). New classes (none of heldout-heldout19's):
matmul_chain_order, external_command_per_step, data_checksum_per_step, config_reload_per_step.
Peak GPU memory: item_linker ~4-5 GB (three 1.2 GB N x N bf16 matrices), ledger_classifier ~8-10 GB,
claims_encoder ~8-10 GB, shelf_tagger ~10-12 GB (fp32 logits 32768 x 4096 and their gradient); host: claims_encoder's
two pinned batches 268 MB.
Software assumed: the capture image's PyTorch 2.11 with CUDA 13, CPython 3.10-3.12, numpy, nvidia-smi on the PATH
(the driver's), on sm_90.
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


H19 = _load("planted_derive19", os.path.join(os.path.dirname(HERE), "heldout19", "derive.py"))  # its rate bands
D = H19.D
ADAM_B, AMP_B = D.ADAM_B, D.AMP_B
pct, r2, rng, techniques, uses = D.pct, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link
step_of, finish_gpu_host = H19.step_of, H19.finish_gpu_host
band_of, SEV_DOC = H19.band_of19, H19.SEV_DOC19
EVENT_SYNC = H19.EVENT_SYNC
mlp_params, mlp_train_flops = H19.mlp_params, H19.mlp_train_flops
Q = dict(H19.Q19)

SET = "heldout20"

NEW = {
    "smi_call_ms": (15.0, 400.0),
    "sha256_gbs": (0.4, 2.5),
    "json_node_us": (1.0, 6.0),
}
NEW_SOURCES = {
    "smi_call_ms": "one `nvidia-smi --query-gpu=... --format=csv` run from Python with subprocess.run (output captured): "
                   "the spawn (vfork/posix_spawn, 1-5 ms from a large process), the binary's start, NVML init (opening "
                   "the device nodes, driver attach; 10-50 ms with the persistence daemon, hundreds of ms without), "
                   "the query and the exit, the parent blocked in waitpid / poll throughout: 15-400 ms (assumption; "
                   "nsys's injection into the child adds to it)",
    "sha256_gbs": "hashlib.sha256 over one contiguous buffer (OpenSSL): 1.5-2.5 GB/s with the SHA extensions (SHA-NI, "
                  "on Sapphire Rapids / Genoa-class hosts), 0.4-0.6 GB/s without; measured 1.2 GB/s on the 2-core "
                  "development VM (SHA-NI) before any capture; band 0.4-2.5 GB/s",
    "json_node_us": "json.load of the taxonomy file per node (an object of 5 keys: 3 strings, a float, a bool and a "
                    "3-string list; ~166 bytes), the C scanner building the dicts, lists and strings plus the "
                    "allocator / cyclic GC work they trigger: measured 2.6-3.3 µs per node (10 MB, 60 k nodes) on the "
                    "2-core development VM, CPython 3.11; band 1-6 µs",
}
RATES = dict(H19.RATES_H200, **NEW)
RATES_H100 = dict(H19.RATES_H100, **NEW)
RATE_SOURCES = dict(H19.RATE_SOURCES, **NEW_SOURCES)


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES)
    return b, b2, keys


def mlp_gpu(r, B, dims, extra_b=0.0, small=12, mid=True):
    """GPU kernels of one bf16-autocast MLP training step: GEMMs, GELU / casts, fused AdamW, small kernels."""
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P = mlp_params(dims)
    hidden = float(B * sum(dims[1:-1]))
    return {"gemms_bf16": t_flops(mlp_train_flops(B, dims), r["bf16_mid_tflops" if mid else "bf16_small_tflops"]),
            "elementwise": t_bytes(hidden * 10.0 + P * AMP_B + extra_b, hbm * r["ew_mlp_eff"]),
            "adamw_fused": t_bytes(P * ADAM_B[4], hbm),
            "small_kernels": small * tiny}


def host_paced(name, c, ops, plant_ms, fixed_fn, r, fixed, extra=None):
    """A host-paced step: host chain = launches + the planted host work; the fix drops the planted work."""
    gpu = sum(c.values())
    host = ops + plant_ms
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "plant_ms": plant_ms, "ops_ms": ops, "compute_ms": gpu,
                           "gpu_busy_share": pct(gpu, step)}, gpu, host)
    out.update(extra or {})
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = fixed_fn(r, fixed=True)
    rm = {name: step - fx["step"]}
    out.update({"rm": rm, "share": {name: pct(rm[name], step)}, "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "plant_share": pct(plant_ms, step)})
    return out


# ---------------------------------------------------------------------------------------------------
# item_linker: A = softmax(E E^T) over N = 24576 items (bf16), h = (A @ A) @ V with V [N, 256]; inference.
IL = dict(items=24576, dim=128, signals=256, steps=14, warmup=3)
IL_OPS = 12        # matmul, t, softmax, 2 matmuls, float x2, mul, sum, amax, the store, NVTX, event record / wait


def m_il(r, fixed=False):
    N, Dm, S = float(IL["items"]), float(IL["dim"]), float(IL["signals"])
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    nn_b = N * N * 2.0  # one N x N bf16 matrix
    hop = max(t_flops(2 * N * N * S, r["bf16_mid_tflops"]), t_bytes(nn_b, hbm))
    c = {"affinity_gemm": max(t_flops(2 * N * N * Dm, r["bf16_mid_tflops"]), t_bytes(nn_b, hbm)),
         "softmax": t_bytes(2 * nn_b, hbm * r["reduce_eff"]),
         "score_small": t_bytes(N * S * 16.0, hbm) + 4 * tiny}
    if fixed:
        c["hop_gemms"] = 2 * hop
    else:
        c["square_gemm"] = t_flops(2 * N ** 3, r["bf16_tflops"])
        c["hop_gemm"] = hop
    gpu = sum(c.values())
    host = (IL_OPS * r["eager_op_wide_us"] + 3 * r["view_op_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = m_il(r, fixed=True)
    rm = {"matmul_chain_order": step - fx["step"]}
    out.update({"rm": rm, "share": {k: pct(v, step) for k, v in rm.items()}, "after": fx["step"],
                "after_gpu_ms": fx["gpu_ms"], "after_host_ms": fx["host_ms"], "speedup": step / fx["step"],
                "square_share": pct(c["square_gemm"], step)})
    return out


# ---------------------------------------------------------------------------------------------------
# ledger_classifier: MLP 1024 -> 4096 -> 4096 -> 512 over 32768 rows, CE over 512; nvidia-smi per step.
LC = dict(batch=32768, features=1024, hidden=4096, classes=512, steps=14, warmup=3)
LC_DIMS = [1024, 4096, 4096, 512]
LC_OPS, LC_NODES = 22, 12


def m_lc(r, fixed=False):
    B, C = LC["batch"], LC["classes"]
    c = mlp_gpu(r, B, LC_DIMS, extra_b=B * C * 36.0, small=14)
    ops = (LC_OPS * r["eager_op_wide_us"] + LC_NODES * r["bwd_node_wide_us"]) / 1e3
    smi = 0.0 if fixed else r["smi_call_ms"]
    return host_paced("external_command_per_step", c, ops, smi, m_lc, r, fixed)


# ---------------------------------------------------------------------------------------------------
# claims_encoder: MLP 2048 -> 4096 -> 4096 -> 256 over 32768 rows, a 134 MB pinned fp16 batch copied per step;
# SHA-256 of the batch recomputed per step. No NVTX.
CE = dict(batch=32768, features=2048, hidden=4096, out=256, steps=14, warmup=3)
CE_DIMS = [2048, 4096, 4096, 256]
CE_OPS, CE_NODES = 18, 10


def m_ce(r, fixed=False):
    B, F_ = CE["batch"], CE["features"]
    nb = float(B * F_ * 2)
    c = mlp_gpu(r, B, CE_DIMS, extra_b=B * F_ * 4.0 + B * CE["out"] * 24.0, small=10)
    c["h2d_pinned"] = t_link(nb, r["h2d_pinned_gbs"])
    ops = (CE_OPS * r["eager_op_wide_us"] + CE_NODES * r["bwd_node_wide_us"]) / 1e3
    sha = 0.0 if fixed else t_link(nb, r["sha256_gbs"])
    return host_paced("data_checksum_per_step", c, ops, sha, m_ce, r, fixed, {"batch_mb": nb / 1e6})


# ---------------------------------------------------------------------------------------------------
# shelf_tagger: MLP 768 -> 4096 -> 4096 -> 4096 over 32768 rows, weighted CE over 4096 (fp32 logits); the
# 60000-node taxonomy JSON re-read per step.
ST = dict(batch=32768, features=768, hidden=4096, classes=4096, nodes=60000, steps=14, warmup=3)
ST_DIMS = [768, 4096, 4096, 4096]
ST_OPS, ST_NODES = 24, 12


def m_st(r, fixed=False):
    B, C = ST["batch"], ST["classes"]
    c = mlp_gpu(r, B, ST_DIMS, extra_b=B * C * 36.0, small=12)
    ops = (ST_OPS * r["eager_op_wide_us"] + ST_NODES * r["bwd_node_wide_us"]) / 1e3
    if fixed:
        plant = 0.0
        ops += 2.0 / 1e3  # one os.stat
    else:
        plant = (ST["nodes"] * r["json_node_us"] + C * r["list_tensor_ns"] / 1e3 + r["small_h2d_us"]) / 1e3
    return host_paced("config_reload_per_step", c, ops, plant, m_st, r, fixed)


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=14, warmup=3):
    return D.base(name, f"heldout20/{workload}", variant, SET, args, ranks=1, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def planted(cause, where, fix, b, b2, derivation, accept):
    return D.h200_planted(cause, where, fix, b, b2, f"rm.{cause}", f"share.{cause}", derivation, accept, band_of)


KERNELS = {
    "item_linker": "per step ~10 kernels: the E E^T GEMM (24576 x 24576 x 128), a softmax over 24576 x 24576 bf16, "
                   "ONE 24576 x 24576 x 24576 bf16 GEMM (A @ A, 29.7 TFLOP, the largest kernel by far), the 24576 x "
                   "256 x 24576 GEMM, a few small score kernels; GPU-bound (host well ahead)",
    "item_linker.fixed": "the same, with the square GEMM replaced by two 24576 x 256 x 24576 GEMMs; the step ~2 ms",
    "ledger_classifier": "per step ~45 kernels (3 bf16 GEMMs forward and 5 backward over 32768 rows, GELU, casts, "
                         "cross-entropy, fused AdamW), 6-9 ms of GPU work; in step_N > telemetry the main thread "
                         "spawns nvidia-smi and waits for it (tens to hundreds of ms, no CUDA call), the GPU idle",
    "claims_encoder": "per step (no NVTX) ~40 kernels (3 bf16 GEMMs forward and 5 backward, GELU, casts, MSE, fused "
                      "AdamW) and one 134 MB pinned HtoD copy; before each step's copy the main thread spends tens to "
                      "hundreds of ms hashing the batch (no CUDA call), the GPU idle",
    "shelf_tagger": "per step ~45 kernels (3 bf16 GEMMs forward and 5 backward, GELU, casts, a 4096-class weighted "
                    "cross-entropy over fp32 logits, fused AdamW) and one 16 KB pageable HtoD copy (the class "
                    "weights); in step_N > taxonomy the main thread parses the 10 MB JSON (tens to hundreds of ms, "
                    "no CUDA call), the GPU idle",
}


def finish(m, b, b2, keys, fixed_case=None):
    return D.h200_finish(m, b, b2, keys, SEV_DOC, KERNELS, RATES_H100, RATES, RATE_SOURCES, fixed_case=fixed_case)


MLP_MUST_NOT = ["CUDA graphs / launch overhead as the fix", "the GEMMs, precision or kernel efficiency as the cause",
                "a larger batch as the fix", "the Python garbage collector as the cause", "nothing significant to fix"]
MLP_WRONG = ["CUDA graphs / launch overhead", "a faster GEMM / FP8", "a larger batch as the fix", "torch.compile"]


def host_case(m, b, b2, keys, cause, what):
    sh = f"share.{cause}"
    m["diagnosis"] = (f"{what}: a step {rng(b2, 'step', 0)} ms on the H200 for {rng(b2, 'compute_ms', 1)} ms of GPU "
                      f"work (GPU busy {rng(b2, 'gpu_busy_share', 0)} %). After the fix ~{rng(b2, 'after', 1)} ms, "
                      f"{rng(b2, sh, 0)} % removed ({band_of(b2, sh)[0]}), {rng(b2, 'speedup', 0)}x.")
    m["expect_quiet"] = False
    return finish(m, b, b2, keys)


def build():
    out = {}

    # ---- item_linker (matmul_chain_order) and item_linker.fixed --------------------------------------------------
    b, b2, keys = ev(m_il)
    bf, bf2, keys_f = ev(lambda r: m_il(r, fixed=True))
    N, S = IL["items"], IL["signals"]
    args = ["--items", N, "--dim", IL["dim"], "--signals", S]
    use_il = dict(dtype="bf16 (inference)", optimizer="none (inference)", host_sync=EVENT_SYNC)
    m = base("item_linker", "item_linker.py", "planted", args, est=35)
    m["uses"] = uses(**use_il)
    m["uses"]["propagation"] = "h = (A @ A) @ V with A a dense 24576 x 24576 bf16 affinity, V 24576 x 256"
    m["techniques"] = techniques(
        "reassociate the matrix chain: A @ (A @ V) (or torch.linalg.multi_dot([A, A, V]), which picks the cheapest "
        "order): two N x N x 256 GEMMs instead of an N^3 one",
        ["CUDA graphs / launch overhead (GPU-bound, ~10 kernels)", "FP8 / a faster GEMM as the top fix",
         "a smaller batch or sparse graph as the top fix", "flash attention / SDPA (A is also multiplied by itself)",
         "data loading or host-to-device copies (everything is resident)", "torch.compile as the top fix"])
    m["planted"] = [planted(
        "matmul_chain_order",
        {"device": "GPU 0", "region": "step_N > propagate, every step: one 24576^3 bf16 GEMM (A @ A), the largest "
         "kernel by far"},
        "the chain applied right to left, A @ (A @ V) (--fixed, captured as item_linker.fixed)", b, b2,
        f"(A @ A) @ V with N = {N}, S = {S}: the square costs 2 N^3 = {2 * N ** 3 / 1e12:.2f} TFLOP at 650-820 TFLOP/s "
        f"(a large square bf16 GEMM) = {rng(b2, 'c.square_gemm')} ms, {rng(b2, 'square_share', 0)} % of a "
        f"{rng(b2, 'step')} ms step on the H200 (GPU-bound; host {rng(b2, 'host_ms')} ms); the rest: E E^T "
        f"({rng(b2, 'c.affinity_gemm')} ms), the softmax over N^2 bf16 ({rng(b2, 'c.softmax')} ms), the N x S x N hop "
        f"({rng(b2, 'c.hop_gemm')} ms). A @ (A @ V): two 2 N^2 S = {2 * N * N * S / 1e9:.0f} GFLOP GEMMs "
        f"({rng(bf2, 'c.hop_gemms')} ms): step {rng(b2, 'after')} ms; removed {rng(b2, 'rm.matmul_chain_order')} ms = "
        f"{rng(b2, 'share.matmul_chain_order', 1)} % (H100 {rng(b, 'share.matmul_chain_order', 1)} %), "
        f"{rng(b2, 'speedup')}x. New cause name: matmul_chain_order.",
        ["matmul_chain_order", "matrix_chain_order", "inefficient_contraction_order", "algorithmic_waste",
         "redundant_compute"])]
    m["tolerated"] = [{"what": "the N x N softmax and E E^T (memory-bound over 1.2 GB matrices)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "one 24576 x 24576 x 24576 bf16 GEMM per step in step_N > propagate, >85 % of GPU time",
        "GPU-bound: the next step's kernels queued behind (event sync on the previous step only)",
        "in the after run: two 24576 x 256 x 24576 GEMMs, the softmax now comparable, the step about 2 ms"]
    m["must_not"] = ["a host-bound or launch-bound step / CUDA graphs", "the GEMM's precision or kernel efficiency as "
                     "the cause (it runs near peak; it is the wrong GEMM)", "a larger batch as the fix",
                     "data loading or host-to-device copies", "a host synchronization as the cause",
                     "attention / SDPA as the fix", "the after run as host-bound, launch-bound or with a planted "
                     "problem of high or critical severity left", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = ("Here are two profiles of our catalogue near-duplicate linker on one H200 (24576 items per batch, "
                     "a dense softmax affinity graph over the batch, two hops of propagation of 256 signal features), "
                     "before and after we rewrote the propagation line. Did the change help, how much per step, and is "
                     "anything still holding it back?")
    m["diagnosis"] = (f"Before: the two hops were computed as (A @ A) @ V, squaring the 24576 x 24576 graph every step "
                      f"(a {2 * N ** 3 / 1e12:.1f} TFLOP GEMM, {rng(b2, 'c.square_gemm', 1)} ms of a "
                      f"{rng(b2, 'step', 1)} ms step on the H200, GPU-bound, the GEMM itself near peak). After, "
                      f"A @ (A @ V): ~{rng(b2, 'after', 2)} ms, {rng(b2, 'share.matmul_chain_order', 0)} % removed "
                      f"({band_of(b2, 'share.matmul_chain_order')[0]}), {rng(b2, 'speedup', 0)}x. Now the step is the "
                      f"E E^T GEMM, the N x N softmax and two thin GEMMs, about 2 ms; nothing planted is left.")
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q["kernels"],
                     "expect": f"the square GEMM {rng(b2, 'c.square_gemm', 1)} ms per step before, absent after"}]
    m["new_cause"] = {"name": "matmul_chain_order", "why": "a chain of matrix products evaluated in a costly order "
                      "((A @ A) @ V with V thin), so an N^3 GEMM runs where two N^2 k ones give the same result; fixed by "
                      "reassociating (right to left) or torch.linalg.multi_dot"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="item_linker.fixed")

    m = base("item_linker.fixed", "item_linker.py", "fixed", args + ["--fixed"], est=30)
    m["uses"] = uses(**use_il)
    m["uses"]["propagation"] = "h = A @ (A @ V)"
    m["techniques"] = techniques(None, ["CUDA graphs / launch overhead", "a larger batch", "torch.compile as the top fix"])
    m["planted"] = []
    m["tolerated"] = [{"what": "the N x N softmax and E E^T (memory-bound over 1.2 GB matrices), now a large part of a "
                               "short step", "cause": "elementwise_unfused", "max_severity": "high"},
]
    m["expected_in_trace"] = ["no N^3 GEMM; two thin GEMMs, the softmax and E E^T; the step about 2 ms"]
    m["must_not"] = ["a planted problem of high or critical severity", "the GEMM order as still wrong"]
    m["expect_quiet"] = True
    m["question"] = "After reassociating the propagation, is anything still holding a step back?"
    m["diagnosis"] = (f"Nothing large: {rng(bf2, 'step', 2)} ms per step on the H200, the E E^T GEMM, the softmax over "
                      f"the N x N graph and two thin GEMMs ({rng(bf2, 'c.hop_gemms', 2)} ms).")
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(bf2["step"])}]
    out[m["case"]] = finish(m, bf, bf2, keys_f)

    # ---- ledger_classifier (external_command_per_step) -----------------------------------------------------------
    b, b2, keys = ev(m_lc)
    m = base("ledger_classifier", "ledger_classifier.py", "planted",
             ["--batch", LC["batch"], "--features", LC["features"], "--hidden", LC["hidden"], "--classes", LC["classes"]],
             est=40)
    m["uses"] = uses(dtype="bf16 autocast on float32 weights", optimizer="AdamW (fused)", host_sync=EVENT_SYNC)
    m["uses"]["telemetry"] = "subprocess.run(['nvidia-smi', '--query-gpu=...', ...]) every step, output captured"
    m["techniques"] = techniques(
        "stop spawning a tool per step: read GPU telemetry in-process with NVML (pynvml / torch.cuda.utilization, "
        "temperature, power_draw) from a background sampler, or sample rarely (every N steps / seconds)",
        MLP_WRONG + ["DataLoader workers (the inputs are resident)"])
    m["planted"] = [planted(
        "external_command_per_step",
        {"device": "GPU 0 (and the host)", "region": "step_N > telemetry, every step: subprocess.run of nvidia-smi, the "
         "main thread waiting for the child (fork/exec, waitpid / poll), no CUDA call; the GPU idle"},
        "sample telemetry every 100 steps (--fixed; not captured)", b, b2,
        f"GPU per step: the MLP's bf16 GEMMs ({mlp_train_flops(LC['batch'], LC_DIMS) / 1e12:.2f} TFLOP at 550-800 "
        f"TFLOP/s: {rng(b2, 'c.gemms_bf16')} ms), GELU / casts / CE ({rng(b2, 'c.elementwise')} ms), AdamW: "
        f"{rng(b2, 'compute_ms')} ms. Host: {LC_OPS} ops / {LC_NODES} backward nodes ({rng(b2, 'ops_ms')} ms) and one "
        f"nvidia-smi run (spawn, NVML init, query, exit: 15-400 ms), the previous step's GPU work hiding under it: a "
        f"step {rng(b2, 'step')} ms on the H200, the GPU busy {rng(b2, 'gpu_busy_share', 0)} %. Sampling rarely: "
        f"{rng(b2, 'after')} ms: removed {rng(b2, 'rm.external_command_per_step')} ms = "
        f"{rng(b2, 'share.external_command_per_step', 1)} % (H100 {rng(b, 'share.external_command_per_step', 1)} %), "
        f"{rng(b2, 'speedup')}x. New cause name: external_command_per_step.",
        ["external_command_per_step", "subprocess_per_step", "monitoring_overhead", "logging_overhead", "host_bound"])]
    m["tolerated"] = [{"what": "autocast's GELU and weight-cast kernels (memory-bound, bf16)",
                       "cause": "elementwise_unfused", "max_severity": "low"}]
    m["expected_in_trace"] = ["step_N > telemetry the longest range: a child process (nvidia-smi) spawned per step, the "
                              "main thread in waitpid / poll / read", f"the GPU busy {rng(b2, 'gpu_busy_share', 0)} %"]
    m["must_not"] = MLP_MUST_NOT + ["a host synchronization / .item() as the cause", "DataLoader workers as the fix"]
    m["question"] = ("We train a transaction classifier on one H200: a bias-free MLP 1024 -> 4096 -> 4096 -> 512 over "
                     "32768 embeddings per step, bf16 autocast, fused AdamW, and we log the GPU's temperature and power "
                     "with each step. The GPU looks idle most of the time. Where does the time go, and what should we "
                     "change?")
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(b2["step"])},
                    {"what": "OS runtime", "query": Q["osrt"], "expect": "fork / exec / waitpid or poll per step"}]
    m["new_cause"] = {"name": "external_command_per_step", "why": "an external program (nvidia-smi, a shell command) "
                      "spawned and awaited in every step; fixed by in-process APIs (NVML), a background sampler, or "
                      "sampling rarely"}
    out[m["case"]] = host_case(m, b, b2, keys, "external_command_per_step",
                               "step_N > telemetry: nvidia-smi is spawned and awaited every step "
                               f"({rng(b2, 'plant_ms', 0)} ms, no CUDA call); sample telemetry in-process via NVML "
                               "from a background thread, or every N steps")

    # ---- claims_encoder (data_checksum_per_step), no NVTX --------------------------------------------------------
    b, b2, keys = ev(m_ce)
    m = base("claims_encoder", "claims_encoder.py", "planted",
             ["--batch", CE["batch"], "--features", CE["features"], "--hidden", CE["hidden"], "--out", CE["out"]],
             nvtx=False, est=40)
    m["uses"] = uses(dtype="bf16 autocast on float32 weights (fp16 inputs)", optimizer="AdamW (fused)", pinned=True,
                     host_sync=EVENT_SYNC)
    m["uses"]["audit"] = "hashlib.sha256 over the 134 MB pinned batch every step"
    m["techniques"] = techniques(
        "verify each batch (shard) once when it is loaded, or in the loader's workers, not in the training step; if a "
        "per-step check is required, use a cheap GPU-side checksum",
        MLP_WRONG + ["pinned memory / a faster copy (the batch is already pinned, the copy ~2.5 ms)"])
    m["planted"] = [planted(
        "data_checksum_per_step",
        {"device": "GPU 0 (and the host)", "region": "the top of every step (no NVTX): SHA-256 of the 134 MB pinned "
         "batch on the main thread, no CUDA call; the GPU idle"},
        "verify each batch once at load (--fixed; not captured)", b, b2,
        f"GPU per step: the MLP's bf16 GEMMs ({mlp_train_flops(CE['batch'], CE_DIMS) / 1e12:.2f} TFLOP at 550-800 "
        f"TFLOP/s: {rng(b2, 'c.gemms_bf16')} ms), GELU / casts / MSE ({rng(b2, 'c.elementwise')} ms), AdamW and the "
        f"134 MB pinned copy ({rng(b2, 'c.h2d_pinned')} ms): {rng(b2, 'compute_ms')} ms. Host: sha256 over 134 MB at "
        f"0.4-2.5 GB/s ({rng(b2, 'plant_ms')} ms) and {CE_OPS} ops / {CE_NODES} backward nodes; the previous step's GPU "
        f"work hides under the hash: a step {rng(b2, 'step')} ms on the H200, the GPU busy "
        f"{rng(b2, 'gpu_busy_share', 0)} %. Verified once at load: {rng(b2, 'after')} ms: removed "
        f"{rng(b2, 'rm.data_checksum_per_step')} ms = {rng(b2, 'share.data_checksum_per_step', 1)} % (H100 "
        f"{rng(b, 'share.data_checksum_per_step', 1)} %), {rng(b2, 'speedup')}x. New cause name: "
        f"data_checksum_per_step.",
        ["data_checksum_per_step", "host_preprocessing", "host_data_validation", "host_bound"])]
    m["tolerated"] = [{"what": "autocast's GELU and cast kernels (memory-bound, bf16)", "cause": "elementwise_unfused",
                       "max_severity": "low"},
                      {"what": "the 134 MB pinned HtoD copy (full PCIe rate)", "cause": "copy_not_overlapped",
                       "max_severity": "medium"}]
    m["expected_in_trace"] = ["no NVTX; per step a long CPU stretch of the main thread with no CUDA call, then the "
                              "134 MB pinned HtoD copy and the step's kernels",
                              f"the GPU busy {rng(b2, 'gpu_busy_share', 0)} %"]
    m["must_not"] = MLP_MUST_NOT + ["pageable memory / the copy's bandwidth as the top cause",
                                    "a host synchronization / .item() as the cause"]
    m["question"] = ("We train an insurance-claims encoder on one H200: a bias-free MLP 2048 -> 4096 -> 4096 -> 256 over "
                     "32768 claims per step, bf16 autocast, fused AdamW; each batch comes from pinned host memory and is "
                     "audited before use. The run has no NVTX ranges. Training is far slower than the model's size "
                     "suggests. Where does the time go, and what should we change?")
    m["measure"] = [{"what": "step period (no NVTX)", "query": Q["anchor"] + " with ANCHOR = the 134 MB HtoD copy, "
                     "C = 1, WARM = 3", "expect_ms": r2(b2["step"])},
                    {"what": "GPU idle", "query": Q["split"], "expect": f"GPU busy {rng(b2, 'gpu_busy_share', 0)} %"}]
    m["new_cause"] = {"name": "data_checksum_per_step", "why": "a cryptographic checksum of the whole input batch "
                      "recomputed on the host in every step (hundreds of MB at 0.4-2.5 GB/s) while the GPU waits; "
                      "fixed by verifying once at load or in loader workers"}
    out[m["case"]] = host_case(m, b, b2, keys, "data_checksum_per_step",
                               "The per-step audit recomputes SHA-256 over the 134 MB batch on the main thread "
                               f"({rng(b2, 'plant_ms', 0)} ms, no CUDA call) before the copy; verify once at load")

    # ---- shelf_tagger (config_reload_per_step) -------------------------------------------------------------------
    b, b2, keys = ev(m_st)
    m = base("shelf_tagger", "shelf_tagger.py", "planted",
             ["--batch", ST["batch"], "--features", ST["features"], "--hidden", ST["hidden"], "--classes",
              ST["classes"], "--nodes", ST["nodes"]], est=40)
    m["uses"] = uses(dtype="bf16 autocast on float32 weights", optimizer="AdamW (fused)", pinned=False,
                     host_sync=EVENT_SYNC)
    m["uses"]["config"] = "json.load of a 10 MB, 60000-node taxonomy file every step; class weights rebuilt from it"
    m["techniques"] = techniques(
        "load the taxonomy once and re-read it only when it changes (an mtime check, a file watcher, or every N "
        "steps), parsing off the training thread if it must be fresh",
        MLP_WRONG + ["pinned memory (the only copy is 16 KB)"])
    m["planted"] = [planted(
        "config_reload_per_step",
        {"device": "GPU 0 (and the host)", "region": "step_N > taxonomy, every step: json.load of the 10 MB taxonomy "
         "and the class-weight rebuild on the main thread, no CUDA call until a 16 KB copy at its end; the GPU idle"},
        "re-read only on a modification-time change (--fixed; not captured)", b, b2,
        f"GPU per step: the MLP's bf16 GEMMs ({mlp_train_flops(ST['batch'], ST_DIMS) / 1e12:.2f} TFLOP at 550-800 "
        f"TFLOP/s: {rng(b2, 'c.gemms_bf16')} ms), GELU / casts / the 4096-class CE over fp32 logits "
        f"({rng(b2, 'c.elementwise')} ms), AdamW: {rng(b2, 'compute_ms')} ms. Host: json.load of {ST['nodes']} nodes "
        f"at 1-6 µs each plus the 4096-weight rebuild ({rng(b2, 'plant_ms')} ms) and {ST_OPS} ops / {ST_NODES} "
        f"backward nodes; the previous step's GPU work hides under the parse: a step {rng(b2, 'step')} ms on the H200, "
        f"the GPU busy {rng(b2, 'gpu_busy_share', 0)} %. Re-read on change only: {rng(b2, 'after')} ms: removed "
        f"{rng(b2, 'rm.config_reload_per_step')} ms = {rng(b2, 'share.config_reload_per_step', 1)} % (H100 "
        f"{rng(b, 'share.config_reload_per_step', 1)} %), {rng(b2, 'speedup')}x. New cause name: "
        f"config_reload_per_step.",
        ["config_reload_per_step", "host_file_parsing", "host_preprocessing", "host_bound"])]
    m["tolerated"] = [{"what": "autocast's GELU and cast kernels and the fp32 cross-entropy (memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "the 16 KB pageable class-weight copy", "cause": "copy_bound_pageable",
                       "max_severity": "info"}]
    m["expected_in_trace"] = ["step_N > taxonomy the longest range: CPU work (file read, parse) with no CUDA call, "
                              "one 16 KB HtoD copy at its end", f"the GPU busy {rng(b2, 'gpu_busy_share', 0)} %"]
    m["must_not"] = MLP_MUST_NOT + ["a host synchronization / .item() / the small copy as the cause",
                                    "disk I/O bandwidth as the cause (the file is in the page cache; parsing is the "
                                    "cost)"]
    m["question"] = ("We train a product-category tagger on one H200: a bias-free MLP 768 -> 4096 -> 4096 -> 4096 over "
                     "32768 product embeddings per step, bf16 autocast, fused AdamW, class-weighted cross-entropy whose "
                     "weights follow our category taxonomy. A step takes far longer than the model's FLOPs suggest. "
                     "Where does the time go, and what should we change?")
    m["measure"] = [{"what": "step period", "query": Q["step"], "expect_ms": r2(b2["step"])},
                    {"what": "NVTX ranges", "query": Q["nvtx_ranges"], "expect": "step_N > taxonomy the longest range"}]
    m["new_cause"] = {"name": "config_reload_per_step", "why": "a configuration / metadata file re-read and parsed "
                      "(JSON / YAML) in every step to pick up edits, on the launching thread; fixed by loading once "
                      "and reloading only on change"}
    out[m["case"]] = host_case(m, b, b2, keys, "config_reload_per_step",
                               "step_N > taxonomy: the 10 MB taxonomy JSON is re-parsed every step "
                               f"({rng(b2, 'plant_ms', 0)} ms, no CUDA call); load it once and re-read on change")
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.h200_table)
