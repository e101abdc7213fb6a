#!/usr/bin/env python3
"""First-principles truth for the seventeenth held-out set (heldout17): writes heldout17/manifests/<case>.json from
FLOPs, bytes, call counts and rate bands alone (no capture, no aisp output, no GPU run), with the helpers of
../derive.py and the rate bands of heldout16/derive.py (which carry heldout15's and ../derive.py's).

    python3 workloads/planted/heldout17/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout17/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout17/derive.py --table    # the table only

Method: as ../derive.py and heldout11-16/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or calls x a host cost per call; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the GPU (for the 2-rank
case: of either rank, the ranks being symmetric).

Severity (as heldout11-16): info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical; each planted problem
also carries `severity_legacy` under the bands of the earlier sets (info < 1 % <= low < 5 % <= medium < 15 % <= high <
40 % <= critical), so that both readings are on record.

Made for H200s, like heldout11-16: four one-GPU programs, one of them with a captured fixed variant (a before/after
pair), and one 2-rank program (torchrun --nproc_per_node=2): the set needs an nvidia-h200-x2 host for its multi phase.
Every model gives the host time of a step (Python ops x an eager-op cost + view-like ops x view_op_us + backward nodes x
a node cost, plus the per-call costs of the planted mechanism) beside the GPU time and takes the larger (the throttle
lets the host run one step ahead), so that a GPU-bound case is checked at every corner (host_margin_ms). Three cases are
host-paced by design: query_embed (a CUDA graph captured inside every request: device synchronize, allocator release,
the capture's Python forward and cudaGraphInstantiate in series with the replay), photo_tagger (a DataLoader iterator
built and torn down every step: four forks, the first batch, the wait for the workers' second batch) and
policy_learner (every rollout unpickled from a pipe on the learner's main thread); in those the plant's host time is
in series with the step and the GPU work of step N overlaps the host's work for step N+1.
The classes planted here are new (none of heldout-heldout16's): an FFT on a prime grid (cuFFT's Bluestein path), a CUDA
graph re-captured per request, a DataLoader iterator re-created per step, rollouts pickled through a
multiprocessing.Queue, and DDP over a Gloo process group on GPUs.
Lessons of the earlier sets kept in mind: heldout16/measured.json found ~66 µs of host per launched kernel in a
launch-bound pass (37.8 ms per micro-batch of ~570 kernels, 1.75x the top of that model), so this set's host models use
a wider eager-op band (20-130 µs) and backward-node band (10-50 µs), which only widens the host-paced cases' shares
upward and is checked against the GPU-bound cases' margins; heldout14-16 measured memory-bound elementwise classes at
up to 1.4-2.8x their bands and library slow paths below their assumed floors (cuSPARSE 2.5x), so the FFT pair's
elementwise work runs at 50-95 % of HBM speed and its plant is a factor over cuFFT's own fast path (so that both move
together), and every one-GPU plant is sized to stay the largest removable item at every corner.
Peak memory: flow_surrogate ~6-10 GB (fp32 fields of 0.45 GB, complex spectra, cuFFT's Bluestein work area),
support_lm ~15 GB per rank, photo_tagger ~12 GB, the others < 5 GB; host: photo_tagger's workers hold at most 8
batches of 3.1 MB in shared memory, policy_learner's actors ~120 MB each.
Software assumed: the capture image's PyTorch 2.11 with CUDA 13 (cuFFT 12), cuDNN 9, NCCL 2.28 and Gloo, Python 3.10-3.13
(fork start method, pickle protocol 4-5), on sm_90.
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
H16 = _load("planted_derive16", os.path.join(os.path.dirname(HERE), "heldout16", "derive.py"))  # its rate bands
H15 = H16.H15
ADAM_B, GB, AMP_B, DDP_B = D.ADAM_B, D.GB, D.AMP_B, D.DDP_B
pct, r2, rng, techniques, uses = D.pct, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link
step_of, finish_gpu_host = H15.step_of, H15.finish_gpu_host
EVENT_SYNC = H15.EVENT_SYNC
BLOCK_BWD_NODES = H15.BLOCK_BWD_NODES

SET = "heldout17"

# ---------------------------------------------------------------------------------------------------
# Severity bands (heldout11-16's; see the docstring).
BANDS17 = [(1.0, "info"), (3.0, "low"), (10.0, "medium"), (25.0, "high"), (math.inf, "critical")]
SEV_DOC17 = H15.SEV_DOC15


def band17(p):
    for edge, name in BANDS17:
        if p < edge:
            return name
    return "critical"


def band_of17(b, key):
    lo, hi = b[key]
    return band17((lo + hi) / 2), [band17(lo), band17(hi)]


# ---------------------------------------------------------------------------------------------------
# Rate bands: heldout16's (with heldout15's and ../derive.py's), plus these. Units as there: TFLOP/s, TB/s, GB/s, µs,
# ms; fractions, factors and counts as named.
NEW_H100 = {
    "eager_op_wide_us": (20.0, 130.0),
    "bwd_node_wide_us": (10.0, 50.0),
    "bf16_small_tflops": (250.0, 600.0),
    "fft_good_b": (16.0, 28.0),
    "fft_blue_factor": (4.0, 12.0),
    "ew_fno_eff": (0.5, 0.95),
    "sdpa_hd32_tflops": (60.0, 250.0),
    "graph_gap_us": (0.5, 2.0),
    "graph_node_us": (2.0, 12.0),
    "graph_fixed_us": (100.0, 600.0),
    "graph_segments": (4.0, 8.0),
    "segment_api_us": (100.0, 600.0),
    "graph_launch_us": (10.0, 40.0),
    "fork_ms": (8.0, 50.0),
    "worker_item_us": (20.0, 100.0),
    "dl_fixed_ms": (3.0, 15.0),
    "ipc_pickle_gbs": (0.5, 2.0),
    "ipc_small_ms": (0.05, 0.5),
    "small_h2d_us": (25.0, 60.0),
    "conv_rl_tflops": (40.0, 150.0),
    "gloo_gbs": (1.0, 5.0),
    "gloo_overlap_frac": (0.6, 0.9),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "eager_op_wide_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing, "
                        "widened from heldout3-16's 20-70: heldout16/measured.json found 37.8 ms of host per micro-batch "
                        "pass of ~570 kernels (~66 µs per kernel, the pass modelled at 6.7-21.7 ms), 29-39 µs measured "
                        "in lighter loops; band 20-130 (assumption)",
    "bwd_node_wide_us": "host time of one backward node in the C++ autograd engine (the node, 1-3 launches under CUPTI, "
                        "the ready queue), widened from 10-30 for the same reason: 10-50 (assumption)",
    "bf16_small_tflops": "bf16 GEMMs with width 384 or 512 (the small dimension K or N = 384-512, M = 8k-66k tokens; "
                         "the MLP's 1536 / 2048): fewer, thinner tiles and a heavier epilogue than the mid band; 250-600 "
                         "(assumption, below bf16_mid_tflops)",
    "fft_good_b": "HBM bytes per real element that one batched 2-D real transform (rfft2 or irfft2, float32) moves when "
                  "both lengths factor into 2, 3, 5, 7 (432 = 2^4 x 3^3: each dimension fits one shared-memory "
                  "mixed-radix pass): R2C along the rows reads 4 B and writes the half spectrum (4 B per real), the "
                  "column pass reads and writes it (8 B): 16 B at one pass per dimension, up to 28 B with a second "
                  "pass or strided-access losses; at hbm_tbs (assumption)",
    "fft_blue_factor": "traffic and time of the same transforms when a length is prime (421), relative to fft_good_b: "
                       "cuFFT computes lengths with prime factors above its radix kernels by Bluestein's algorithm, a "
                       "convolution of zero-padded length m >= 2n - 1 (864-1024 for 421: 2.05-2.43x) done as a forward "
                       "and an inverse FFT of length m with chirp multiplies; even with the chirps fused into two "
                       "kernels per dimension that is ~2 + 2 x (2.05-2.43) complex elements moved per element instead "
                       "of 2 (3.0-3.4x), and an odd-length real transform cannot use the half-length complex trick "
                       "(the row pass ~5-6x); rustfft and cuFFTDx report prime sizes 5-10x slower than neighbouring "
                       "smooth sizes; band 4-12 (assumption, wide: the pair measures it)",
    "ew_fno_eff": "fraction of the HBM rate reached by the FNO's float32 memory-bound kernels (the spectrum's zero fill, "
                  "irfft2's input clone, the 1x1 convolution on NCHW, the residual add, GELU, the pad, the projection's "
                  "layout copy and 128-wide layer): 0.5-0.95 (assumption; heldout14-16 measured memory-bound classes "
                  "at up to 1.4-2.8x their bands, hence the low floor)",
    "sdpa_hd32_tflops": "F.scaled_dot_product_attention forward, bf16, head_dim 32, 128 tokens, counted as 4*B*S^2*d: "
                        "short sequences and a narrow head leave the flash / cuDNN kernels far below their long-sequence "
                        "rate; 60-250 (assumption)",
    "graph_gap_us": "GPU gap between consecutive kernel nodes of a replayed CUDA graph: 0.5-2 µs (assumption)",
    "graph_node_us": "host time of cudaGraphInstantiate per kernel node (dependency analysis, kernel-node parameter "
                     "copies, the executable graph's launch setup), for a graph of ~70-80 nodes: 2-12 µs (assumption)",
    "graph_fixed_us": "host time per capture besides the per-node and per-op costs: cudaStreamBeginCapture / "
                      "EndCapture, the graph's fixed instantiate cost, the first cudaGraphLaunch of a new executable "
                      "graph (its upload), torch.cuda.graph's Python context and the CUDAGraph object's creation and "
                      "destruction: 100-600 µs (assumption)",
    "graph_segments": "allocator segments that each capture gets anew: torch.cuda.graph empties the cache on entry "
                      "(cudaFree of the previous request's released private pool) and the capture's private pool "
                      "allocates its own (cudaMalloc): the encoder's activations (6-25 MB per tensor, ~60-80 MB live "
                      "at once) in 20 MB-rounded segments; 4-8 (assumption)",
    "segment_api_us": "one cudaMalloc plus one cudaFree of a 20-30 MB segment (cudaFree synchronizes the device): "
                      "100-600 µs the pair (assumption)",
    "graph_launch_us": "host time of one CUDAGraph.replay() (cudaGraphLaunch) of an instantiated, uploaded graph: "
                       "10-40 µs (assumption)",
    "fork_ms": "wall time of one DataLoader worker's start (multiprocessing fork context, Process.start): fork() of "
               "a CUDA-initialized PyTorch process with ~2-4 GB resident (its page tables copied, its heap marked "
               "copy-on-write), nsys's fork hooks, the child's first copy-on-write faults; the 4 workers start one "
               "after the other in the iterator's constructor. Measured before the capture on a 2-core development "
               "VM without CUDA or nsys: 11-25 ms per worker (iter(loader) with 1-4 workers); with the CUDA context "
               "and the profiler more: 8-50 ms each (assumption)",
    "worker_item_us": "worker time per thumbnail: np.pad (reflect) of 32 x 32 x 3 uint8, two NumPy random draws, the "
                      "crop and flip, transpose + ascontiguousarray, torch.from_numpy, the fetcher's per-item Python, "
                      "and default_collate's share (the stack into a shared-memory batch). Measured before the capture "
                      "on a 2-core development VM: 34 µs in-process, 85-110 µs through a freshly forked worker's first "
                      "batch (copy-on-write faults, cold caches) and 55-60 µs through its second; band 20-100 µs "
                      "(faster server cores, no contention for them)",
    "dl_fixed_ms": "per DataLoader iterator besides the forks and the batches: queues and events created, the "
                   "pin-memory thread started and joined, the first batch's shared-memory handle passed and pinned, "
                   "four workers' exits and joins, the queues closed: 3-15 ms (assumption)",
    "ipc_pickle_gbs": "learner-side rate of multiprocessing.Queue.get() for one rollout of NumPy arrays (29 MB): the "
                      "pipe between the actor's feeder thread and the learner (64 KB pipe buffer, 1.5-4 GB/s with the "
                      "wake-ups), Connection._recv's read loop (one os.read per <= 64 KB chunk, each allocating a "
                      "bytes object, and an io.BytesIO append with its growth) and the unpickling copy into fresh "
                      "arrays (page faults on first touch, 3-8 GB/s): ~0.8-1.6 GB/s in series. Measured before the "
                      "capture on a 2-core development VM (Python 3.11, pickle protocol 4, the real actor code): "
                      "queue.get() of a 29.0 MB rollout 32-56 ms (0.5-0.9 GB/s) with 1 or 2 actors, its unpickling "
                      "alone 4-13 ms; band 0.5-2.0 (a server host's faster copies reach above the measured rates)",
    "ipc_small_ms": "one multiprocessing.Queue get or put of a small int (an index) between processes: 0.05-0.5 ms "
                    "(assumption)",
    "small_h2d_us": "host time of a .to('cuda') of a small (4-74 KB) pageable NumPy-backed tensor: 25-60 µs "
                    "(heldout2's measured gaps)",
    "conv_rl_tflops": "cuDNN bf16 convolutions of the Nature-CNN on 84 x 84 frames (4 -> 32 -> 64 -> 64 channels, "
                      "8x8/4, 4x4/2, 3x3/1), forward and both backward passes, and its 3136 x 512 layer: small channel "
                      "counts; 40-150 (assumption, as conv_stem_tflops)",
    "gloo_gbs": "ProcessGroupGloo all-reduce of float32 CUDA tensors on 2 ranks of one host, counted as bytes per rank "
                "per second: each bucket staged to pinned host memory, a ring over TCP on the loopback interface "
                "(each rank sends and receives the message once: 2-6 GB/s per connection on a shared 16-core host) and "
                "the CPU sum of half of it, up to 2 buckets in flight (Gloo's 2 worker threads): 1-5 GB/s "
                "(assumption; NCCL does 200-300 here)",
    "gloo_overlap_frac": "fraction of the backward that can run beside the Gloo all-reduces (from the first bucket "
                         "ready to the last gradient): 0.6-0.9 (assumption)",
}
RATES_H100 = dict(H16.RATES_H100, **NEW_H100)
RATES_H200 = dict(H16.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(H16.RATE_SOURCES, **NEW_SOURCES)
Q17 = dict(H16.Q16)
Q17.update({
    "osrt": "OSRT_API joined to StringIds (nameId) and ThreadNames: OS-runtime calls per thread between T0 and T1 "
            "(count, total duration, by function name)",
    "cuda_api": "CUPTI_ACTIVITY_KIND_RUNTIME joined to StringIds (nameId): CUDA runtime calls by name (count, total "
                "duration), per step",
})


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# flow_surrogate: FNO-2D inference, float32 (TF32 for the matmuls), 20 fields of 421 x 421, width 32, 12 modes, 4 Fourier
# layers, projection 32 -> 128 -> 1. Planted: every rfft2 / irfft2 on the prime 421 x 421 grid (cuFFT's Bluestein path),
# unless fixed (padded to 432 x 432 before the Fourier layers, cropped after).
FS = dict(batch=20, grid=421, padded=432, width=32, modes=12, layers=4, hidden=128, steps=14, warmup=3)
FS_LAYER_EW_B = 12.0 + 8.0 + 12.0   # bytes per real element per Fourier layer: the spectrum's zero fill (w 4) and
# irfft2's clone of its complex input (r 4 w 4), the 1x1 convolution (r 4 w 4), the residual add (r 4 r 4 w 4)
FS_GELU_B = 8.0                     # GELU between layers (r 4 w 4), 3 of the 4 layers
FS_HEAD_B = 88.0                    # per real element of [B, C, S, S]: lifting writes (4) and its NCHW copy (8), the
# projection's NHWC layout copy (8), fc1 32 -> 128 (r 4 w 16), GELU on 128 (r 16 w 16), fc2 128 -> 1 (r 16)
FS_PAD_B = 8.0                      # F.pad to 432 (r 4 on 421^2, w 4 on 432^2), fixed only
FS_LAYER_SMALL = 12                 # small kernels per layer: the mode slices' layout copies, two complex bmm, the
# corner writes into the spectrum
FS_SMALL = 8                        # cat, grid expand, squeeze, mean, the step's write
FS_LAYER_OPS = 14                   # rfft2, zeros, 2 x (slice, view_as_complex, einsum, setitem), irfft2, conv, add, gelu
FS_OTHER_OPS = 13                   # cat, fc0, permute, contiguous, (pad), (crop), permute, fc1, gelu, fc2, squeeze,
# mean, the step's write, event record and wait
FS_VIEWS = 12


def m_fs(r, fixed=False):
    B, S, C, L = FS["batch"], FS["grid"], FS["width"], FS["layers"]
    P = FS["padded"] if fixed else S
    hbm, tiny, eff = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3, r["ew_fno_eff"]
    N = float(B * C * S * S)
    Nx = float(B * C * P * P)
    c = {}
    if fixed:
        c["fft_smooth"] = t_bytes(2 * L * Nx * r["fft_good_b"], hbm)
        c["pad"] = t_bytes(FS_PAD_B * Nx, hbm * eff)
    else:
        c["fft_bluestein"] = t_bytes(2 * L * N * r["fft_good_b"] * r["fft_blue_factor"], hbm)
    c["fourier_layer_elementwise"] = t_bytes((L * FS_LAYER_EW_B + (L - 1) * FS_GELU_B) * Nx, hbm * eff)
    c["lift_projection"] = t_bytes(FS_HEAD_B * N, hbm * eff)
    c["small_kernels"] = (L * FS_LAYER_SMALL + FS_SMALL) * tiny
    gpu = sum(c.values())
    host = ((L * FS_LAYER_OPS + FS_OTHER_OPS) * r["eager_op_wide_us"] + FS_VIEWS * r["view_op_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "n_g": N / 1e9, "field_gb": 4.0 * N / GB,
                           "ew_ms": c["fourier_layer_elementwise"] + c["lift_projection"] + c.get("pad", 0.0)}, gpu, host)
    if fixed:
        out["fft_share"] = pct(c["fft_smooth"], step)
        out["ew_share"] = pct(out["ew_ms"], step)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["fft_share"] = pct(c["fft_bluestein"], step)
    fx = m_fs(r, fixed=True)
    rm = {"fft_size_unfriendly": step - fx["step"]}
    # the plant must stay the largest removable item even if half the memory-bound work could be fused away
    out["plant_over_half_ew_ms"] = rm["fft_size_unfriendly"] - 0.5 * out["ew_ms"]
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "after_fft_ms": fx["c"]["fft_smooth"],
                "after_ew_ms": fx["ew_ms"]})
    return out


# ---------------------------------------------------------------------------------------------------
# query_embed: MiniLM-style encoder (6 post-LN layers, d 384, 12 heads of 32, MLP 1536), bf16, 64 queries x 128 tokens
# per request. Planted: a CUDA graph created, captured on the request's tensor, instantiated and replayed once in every
# request, unless fixed (one graph on a static buffer, replayed per request).
QE = dict(batch=64, seq=128, d=384, heads=12, ffn=1536, layers=6, vocab=30522, pool=8, ring=64, steps=40, warmup=3)
QE_LAYER_EW_B = 40.0    # bytes per token x d per layer, bf16: head-merge copy (r2 w2), two residual adds (r2 r2 w2 each),
# two LayerNorms (r2 w2 each), GELU on 4 x d (r2 w2 x 4)
QE_OTHER_EW_B = 16.0    # embedding gather (r2 w2), position add (r2 r2 w2), embedding LayerNorm (r2 w2), pooling read
QE_LAYER_KERNELS = 11   # qkv, attention, head-merge copy, proj, add, ln1, fc1, gelu, fc2, add, ln2
QE_OTHER_KERNELS = 7    # gather, position add, LayerNorm, mean, norm, clamp, divide
QE_LAYER_OPS = 11       # qkv, sdpa, reshape (copy), proj, add, ln1, fc1, gelu, fc2, add, ln2
QE_LAYER_VIEWS = 4      # view, permute, unbind, transpose
QE_OTHER_OPS = 5        # embedding, position slice add, LayerNorm, mean, normalize
QE_OTHER_VIEWS = 1
QE_HANDLER_OPS = 6      # planted: CUDAGraph(), graph context enter (synchronize, empty_cache calls) and exit, the
# previous graph's release, replay(), the ring copy
QE_FIXED_OPS = 5        # fixed: copy_ into the static ids, replay(), the ring copy, event record and wait


def m_qe(r, fixed=False):
    B, S, d, f, L = QE["batch"], QE["seq"], QE["d"], QE["ffn"], QE["layers"]
    T = float(B * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    nodes = L * QE_LAYER_KERNELS + QE_OTHER_KERNELS
    g = {"gemms_bf16": t_flops(L * 2.0 * T * d * (4 * d + 2 * f), r["bf16_small_tflops"]),
         "attention": t_flops(L * 4.0 * B * S * S * d, r["sdpa_hd32_tflops"]),
         "elementwise": t_bytes((L * QE_LAYER_EW_B + QE_OTHER_EW_B) * T * d, hbm),
         "graph_node_gaps": nodes * r["graph_gap_us"] / 1e3}
    fwd = sum(g.values())
    c = {"encoder_graph": fwd, "copies_small": 2 * tiny}
    if fixed:
        gpu = sum(c.values())
        host = (QE_FIXED_OPS * r["eager_op_wide_us"] + r["graph_launch_us"]) / 1e3
        step = step_of(c, gpu, host)
        out = finish_gpu_host({"c": c, "step": step, "g": g, "nodes": float(nodes)}, gpu, host)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    capture_py = ((L * QE_LAYER_OPS + QE_OTHER_OPS) * r["eager_op_wide_us"]
                  + (L * QE_LAYER_VIEWS + QE_OTHER_VIEWS) * r["view_op_us"]) / 1e3
    handler = QE_HANDLER_OPS * r["eager_op_wide_us"] / 1e3
    realloc = r["graph_segments"] * r["segment_api_us"] / 1e3
    inst = (nodes * r["graph_node_us"] + r["graph_fixed_us"]) / 1e3
    # in series: the synchronize on entry waits for the previous replay, so the GPU work is not overlapped
    c["capture_python_forward"] = capture_py
    c["handler_python"] = handler
    c["cache_release_realloc"] = realloc
    c["instantiate_upload"] = inst
    gpu = fwd + c["copies_small"]
    host = capture_py + handler + realloc + inst
    step = gpu + host
    out = finish_gpu_host({"c": c, "step": step, "g": g, "nodes": float(nodes), "capture_ms": host,
                           "gpu_busy_share": pct(gpu, step)}, gpu, host)
    fx = m_qe(r, fixed=True)
    rm = {"cuda_graph_recapture": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# photo_tagger: ViT (patch 4 on 32 x 32, d 384, 6 heads, 8 pre-LN blocks, MLP 1536, 100 tags), bf16 autocast, fused
# AdamW, 1024 images per step from a DataLoader (4 fork workers, pin_memory). Planted: next(iter(loader)) every step (a
# new iterator: 4 forks, the first batch, then the wait for the workers' second batch at teardown), unless fixed (one
# iterator kept).
PT = dict(batch=1024, workers=4, prefetch=2, images=20000, image=32, patch=4, d=384, heads=6, ffn=1536, blocks=8,
          classes=100, steps=14, warmup=3)
PT_BLOCK_OPS = 11       # ln1, qkv, sdpa, reshape (copy), proj, add, ln2, fc1, gelu, fc2, add
PT_BLOCK_VIEWS = 8      # view, permute, unbind, transpose; autocast's 4 weight casts
PT_OTHER_OPS = 21       # patch conv, cat, position add, final norm, head, cross-entropy, autocast enter / exit, backward
# call, fused AdamW (~3), zero_grad, loss write, event record and wait; data: 2 x .cuda, float, sub, div
PT_OTHER_VIEWS = 4      # flatten, transpose, class-token expand, [:, 0]
PT_OTHER_NODES = 15     # conv, flatten / transpose, cat, add, norm, select, head, log_softmax, nll and their views
PT_SMALL = 40           # small kernels per step: bias and LayerNorm parameter reductions, the loss, the head, the
# input normalization, the optimizer's launches


def pt_params():
    d, L, f, C = PT["d"], PT["blocks"], PT["ffn"], PT["classes"]
    n = (PT["image"] // PT["patch"]) ** 2
    block = 4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d
    return float(L * block + 3 * PT["patch"] ** 2 * d + d + d + (n + 1) * d + 2 * d + d * C + C)


def m_pt(r, fixed=False):
    B, d, L, W = PT["batch"], PT["d"], PT["blocks"], PT["workers"]
    n = (PT["image"] // PT["patch"]) ** 2
    S = n + 1
    T = float(B * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P = pt_params()
    c = {"block_gemm_bf16": t_flops(L * 3 * 2.0 * T * 12 * d * d, r["bf16_small_tflops"]),
         "attention": t_flops(L * 12.0 * B * S * S * d, r["attn_short_train_tflops"]),
         "block_elementwise": t_bytes(L * r["ew_amp_block_b"] * T * d, hbm),
         "patch_embed_head": t_flops(3 * 2.0 * B * n * 3 * PT["patch"] ** 2 * d, r["conv_stem_tflops"])
                             + t_bytes(40.0 * T * d + 20.0 * B * 3 * PT["image"] ** 2, hbm),
         "autocast_weight_casts": t_bytes(AMP_B * P, hbm),
         "adamw_fused_fp32": t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny,
         "small_kernels": PT_SMALL * tiny,
         "h2d_batch_pinned": t_link(B * 3 * PT["image"] ** 2 + 8.0 * B, r["h2d_pinned_gbs"])}
    gpu = sum(c.values())
    launch = ((L * PT_BLOCK_OPS + PT_OTHER_OPS) * r["eager_op_wide_us"]
              + (L * PT_BLOCK_VIEWS + PT_OTHER_VIEWS) * r["view_op_us"]
              + (L * BLOCK_BWD_NODES + PT_OTHER_NODES) * r["bwd_node_wide_us"]) / 1e3
    t_batch = B * r["worker_item_us"] / 1e3
    if fixed:
        # the workers stay up and prefetch: a batch every t_batch / W
        host = max(launch, t_batch / W)
        step = step_of(c, gpu, host)
        out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "tokens": T, "t_batch_ms": t_batch,
                               "launch_ms": launch}, gpu, host)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    forks = W * r["fork_ms"]
    # the iterator's constructor forks the W workers one after the other, then hands out prefetch x W index batches;
    # the first batch arrives t_batch later; dropping the iterator waits for the batch each worker has started since
    loader = forks + 2 * t_batch + r["dl_fixed_ms"]
    host = loader + launch
    step = max(gpu, host)  # step N's GPU work runs while the host builds step N+1's iterator
    c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "tokens": T, "t_batch_ms": t_batch,
                           "launch_ms": launch, "loader_ms": loader, "forks_ms": forks,
                           "gpu_busy_share": pct(gpu, step)}, gpu, host)
    fx = m_pt(r, fixed=True)
    rm = {"dataloader_recreated": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# policy_learner: Nature-CNN actor-critic learner on rollouts of 32 x 32 x 4 x 84 x 84 uint8 frames from 2 actor
# processes, bf16 autocast, fused Adam. Planted: every rollout through a multiprocessing.Queue (pickled, a pipe, unpickled
# on the learner's main thread), unless fixed (shared-memory slots, indices through the queue).
PL = dict(unroll=32, envs=32, frames=4, size=84, actions=18, actors=2, queue=4, steps=14, warmup=3)
PL_OPS = 51             # 4 .to('cuda'), forward (float, div, 3 conv, 3 relu, fc, relu, 2 heads), the loss (~24 ops:
# log_softmax x 2, gathers, ratio, clamp, advantages, the three terms), autocast enter / exit, backward call, fused Adam
# (~3), zero_grad, loss write, event record and wait
PL_VIEWS = 12
PL_NODES = 40
PL_SMALL = 50           # small kernels per update: the loss's elementwise ops on 1024 x 18, reductions, the optimizer


def pl_sizes():
    F_ = PL["unroll"] * PL["envs"]
    obs = float(F_ * PL["frames"] * PL["size"] ** 2)
    small = [8.0 * F_, 4.0 * F_ * PL["actions"], 4.0 * F_]  # actions int64, behaviour logits, returns
    return F_, obs, small


def pl_conv_flops():
    F_ = PL["unroll"] * PL["envs"]
    fr = PL["frames"]
    per = 2.0 * (20 * 20 * 32 * 8 * 8 * fr + 9 * 9 * 64 * 4 * 4 * 32 + 7 * 7 * 64 * 3 * 3 * 64 + 3136 * 512
                 + 512 * (PL["actions"] + 1))
    return 3 * per * F_


def m_pl(r, fixed=False):
    F_, obs, small = pl_sizes()
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    payload = obs + sum(small)
    # per frame: uint8 read and float32 write, the /255 (r4 w4), autocast's bf16 cast for conv1 (r4 w2), activations
    # (bf16, ~21.6 k values per frame) written, read by ReLU, saved and read back in the backward (~8 passes)
    ew = F_ * (PL["frames"] * PL["size"] ** 2 * 19.0 + 21600 * 2.0 * 8)
    c = {"h2d_obs_pageable": t_link(obs, r["h2d_pageable_gbs"]),
         "conv_fc_bf16": t_flops(pl_conv_flops(), r["conv_rl_tflops"]),
         "elementwise": t_bytes(ew, hbm),
         "small_kernels": PL_SMALL * tiny + 3 * tiny}
    gpu = sum(c.values())
    ops = (PL_OPS * r["eager_op_wide_us"] + PL_VIEWS * r["view_op_us"] + PL_NODES * r["bwd_node_wide_us"]
           + 3 * r["small_h2d_us"]) / 1e3
    copy_host = c["h2d_obs_pageable"]  # a pageable copy holds the host until it is staged
    if fixed:
        get = 2 * r["ipc_small_ms"]    # full_q.get and free_q.put of an index
    else:
        get = t_link(payload, r["ipc_pickle_gbs"])
    host = get + copy_host + ops
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    out = finish_gpu_host({"c": c, "step": step, "payload_mb": payload / 1e6, "get_ms": get, "ops_ms": ops,
                           "gpu_busy_share": pct(gpu, step), "h2d_share": pct(c["h2d_obs_pageable"], step)}, gpu, host)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fx = m_pl(r, fixed=True)
    rm = {"pickled_ipc_transfer": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# support_lm: 2 ranks, DDP, GPT-style LM (d 512, 8 blocks, 8 heads of 64, vocab 32768, tied head), 32 x 512 tokens per
# rank, bf16 autocast, fused AdamW. Planted: the process group is Gloo: DDP's bucket all-reduces staged through pinned
# host memory and reduced on the CPUs over TCP, unless fixed (NCCL).
SL = dict(batch=32, seq=512, vocab=32768, d=512, heads=8, blocks=8, ranks=2, steps=14, warmup=3)
SL_BLOCK_OPS = 11       # ln1, qkv, sdpa, reshape (copy), proj, add, ln2, fc1, gelu, fc2, add
SL_BLOCK_VIEWS = 8      # view, permute, unbind, transpose; autocast's 4 weight casts
SL_OTHER_OPS = 18       # embedding, position slice add, final norm, tied head, view, reshape, cross-entropy, autocast
# enter / exit, backward call, fused AdamW (~3), zero_grad, loss write, event record and wait
SL_OTHER_VIEWS = 6
SL_OTHER_NODES = 12
SL_DDP_OPS = 5          # DDP's forward prologue


def sl_params():
    V, S, d, L = SL["vocab"], SL["seq"], SL["d"], SL["blocks"]
    full = float(V * d + S * d + 2 * d + L * (12 * d * d + 13 * d))
    last = float(V * d + S * d)  # the tied embedding and the positions: ready only at the end of the backward
    return full, last, 4 + 12 * L


def m_sl(r, fixed=False):
    B, S, V, d, L = (SL[k] for k in ("batch", "seq", "vocab", "d", "blocks"))
    T = float(B * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P, P_last, n_tensors = sl_params()
    c = {"block_gemm_bf16": t_flops(L * 3 * 2.0 * T * 12 * d * d, r["bf16_small_tflops"]),
         "lm_head_gemm": t_flops(3 * 2.0 * T * d * V, r["bf16_mid_tflops"]),
         "attention_causal": t_flops(L * 7.0 * B * S * S * d, r["attn_short_train_tflops"]),
         "block_elementwise": t_bytes(L * r["ew_amp_block_b"] * T * d, hbm),
         "cross_entropy_fp32": t_bytes(r["ce_fp32_b"] * T * V, hbm) + 4 * tiny,
         "embeddings": t_bytes(32.0 * T * d + 16.0 * V * d, hbm) + 8 * tiny,
         "autocast_weight_casts": t_bytes(AMP_B * P, hbm),
         "ddp_bucket_copies": t_bytes(DDP_B * P, hbm),
         "adamw_fused_fp32": t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny}
    bwd = (2.0 / 3.0 * (c["block_gemm_bf16"] + c["lm_head_gemm"]) + 4.5 / 7.0 * c["attention_causal"]
           + 0.55 * c["block_elementwise"] + 0.5 * c["cross_entropy_fp32"] + 0.5 * c["embeddings"])
    host = ((L * SL_BLOCK_OPS + SL_OTHER_OPS + SL_DDP_OPS) * r["eager_op_wide_us"]
            + (L * SL_BLOCK_VIEWS + SL_OTHER_VIEWS) * r["view_op_us"]
            + (L * (BLOCK_BWD_NODES + 2) + SL_OTHER_NODES) * r["bwd_node_wide_us"]
            + n_tensors * r["ddp_hook_us"]) / 1e3
    lat = r["nccl_small_gpu_us"] / 1e3
    if fixed:
        c["ddp_allreduce_exposed"] = t_link(4.0 * P_last, r["ar2_algbw_gbs"]) + 2 * lat
        c["ddp_overlap_penalty"] = r["overlap_penalty"] * t_link(4.0 * (P - P_last), r["ar2_algbw_gbs"])
        gpu = sum(c.values())
        step = step_of(c, gpu, host)
        out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "grad_mb": 4.0 * P / 1e6, "bwd_ms": bwd},
                              gpu, host)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    gloo_all = t_link(4.0 * P, r["gloo_gbs"])
    gloo_last = t_link(4.0 * P_last, r["gloo_gbs"])
    staging_last = 2 * t_link(4.0 * P_last, r["h2d_pinned_gbs"])  # the last bucket's D2H before and H2D after
    exposed = max(gloo_all - r["gloo_overlap_frac"] * bwd, gloo_last) + staging_last
    compute = sum(c.values())
    base = max(compute, host)
    step = base + exposed  # backward() returns only when the last bucket's CPU all-reduce is done; the GPU idles
    c["gloo_allreduce_exposed"] = exposed
    if base > compute:
        c["gpu_waiting_for_host"] = base - compute
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "grad_mb": 4.0 * P / 1e6, "bwd_ms": bwd,
                           "gloo_all_ms": gloo_all, "gloo_last_ms": gloo_last, "compute_ms": compute,
                           "exposed_share": pct(exposed, step)}, compute, host)
    fx = m_sl(r, fixed=True)
    rm = {"gloo_gpu_collectives": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"],
                "after_allreduce_exposed_ms": fx["c"]["ddp_allreduce_exposed"]})
    return out


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=14, warmup=3, ranks=1):
    return D.base(name, f"heldout17/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def planted17(cause, where, fix, b, key_rm, key_share, derivation, accept, b2):
    sev, sev_rng = band_of17(b2, key_share)
    return {"cause": cause, "accept_causes": accept, "where": where, "fix": fix, "top": True,
            "removed_ms": {"h100": r2(b[key_rm]), "h200": r2(b2[key_rm])},
            "share_pct": {"h100": r2(b[key_share]), "h200": r2(b2[key_share])},
            "severity": sev, "severity_range": sev_rng,
            "severity_legacy": D.band_of(b2, key_share)[0], "severity_legacy_range": D.band_of(b2, key_share)[1],
            "derivation": derivation}


def finish(m, b, b2, keys, after=True, fixed_case=None):
    m["severity_bands"] = SEV_DOC17
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
    "flow_surrogate": "~95 per batch: per Fourier layer cuFFT's kernels for one batched 2-D R2C transform and one C2R "
                      "transform of 640 planes of 421 x 421 (Bluestein's path: chirp multiplies and zero-padded FFTs "
                      "of length >= 841, several kernels per dimension; the largest class), the spectrum's zero fill, "
                      "irfft2's input copy, a few small kernels for the 12 x 12 mode corners (layout copies, complex "
                      "bmm, writes), the 1x1 convolution (cuDNN), the residual add and GELU; the lifting GEMM and its "
                      "NCHW copy, the projection's layout copy, TF32 GEMMs 32 -> 128 -> 1 and GELU, a mean",
    "flow_surrogate.fixed": "~97 per batch: the same on 432 x 432 (cuFFT's mixed-radix kernels, one or two per "
                            "dimension), plus the pad copy before the Fourier layers; the projection reads the cropped "
                            "421 x 421 window",
    "query_embed": "per request (no NVTX): CUDA API cudaStreamSynchronize / cudaDeviceSynchronize, cudaFree x several "
                   "(the allocator's release), cudaStreamBeginCapture, ~73 cudaLaunchKernel recorded into the capture "
                   "(no GPU activity), cudaMalloc x several, cudaStreamEndCapture, cudaGraphInstantiate, "
                   "cudaGraphLaunch, one copy kernel into the ring; on the GPU one graph execution of ~73 kernels "
                   "(embedding gather, per layer 4 bf16 GEMMs, one attention kernel, LayerNorms, GELU, adds, the "
                   "head-merge copy; mean, norm, divide), then a long idle gap until the next request's graph",
    "query_embed.fixed": "per request: a small copy into the static ids, one cudaGraphLaunch of the same ~73 kernels, "
                         "the ring copy; no capture, no instantiate",
    "photo_tagger": "per step ~560 kernels (per block 4 bf16 GEMMs forward and 8 backward with d 384, SDPA forward and "
                    "backward over 65 tokens, LayerNorms, GELU, casts, adds, bias reductions; the patch convolution, "
                    "head, loss; fused AdamW) and one 3.1 MB pinned HtoD copy, all in step_N > forward / backward / "
                    "optimizer; step_N > data holds no GPU work for most of the step: the main thread in OS-runtime "
                    "waits (poll / pthread_cond / sem / futex) while 4 new worker processes are forked and a new "
                    "pin-memory thread starts and stops",
    "photo_tagger.fixed": "the same ~560 kernels per step; step_N > data only takes a ready pinned batch",
    "policy_learner": "per update ~90 kernels (3 cuDNN convolutions forward and 6 backward, the 3136 x 512 GEMMs, "
                      "ReLU, casts, the loss's elementwise and reduction kernels, fused Adam) and one pageable HtoD "
                      "memcpy of 28.9 MB plus 3 small pageable ones, all after step_N > rollout, in which the main "
                      "thread makes ~450 read() calls on a pipe (64 KB each) with no CUDA activity: ~15-60 ms per update",
    "policy_learner.fixed": "the same kernels and copies per update; step_N > rollout holds one small queue read",
    "support_lm": "per rank per step ~720 kernels (per block 4 bf16 GEMMs forward and 8 backward, causal SDPA forward "
                  "and backward, LayerNorms, GELU, casts, adds; the tied head's 3 GEMMs over [16384, 32768], the "
                  "float32 cross-entropy, the embedding backward, DDP's bucket copies, fused AdamW); no NCCL kernel: "
                  "instead ~7 DtoH and ~7 HtoD pinned memcpy of up to 67 MB per step on Gloo's own streams (the "
                  "gradient buckets staged to host memory and back) and a long GPU-idle stretch at the end of "
                  "step_N > backward while the CPUs all-reduce over TCP",
    "support_lm.fixed": "per rank per step the same ~720 kernels plus ~7 ncclDevKernel_AllReduce (float32, up to 67 MB) "
                        "overlapped with the backward but for the tied embedding's last bucket",
}


def build():
    out = {}

    # ---- flow_surrogate (fft_size_unfriendly) and flow_surrogate.fixed --------------------------------------------
    Bf, Sf, Cf, Lf, Pf = FS["batch"], FS["grid"], FS["width"], FS["layers"], FS["padded"]
    args = ["--batch", Bf, "--grid", Sf, "--width", Cf, "--modes", FS["modes"], "--layers", Lf, "--hidden",
            FS["hidden"]]
    b, b2, keys = ev(m_fs)
    bf, bf2, keys_f = ev(lambda r: m_fs(r, fixed=True))
    use_fs = dict(dtype="float32 (FFTs in complex64), TF32 matmuls, inference", optimizer="none (inference, "
                  "torch.inference_mode)", tf32=True, host_sync=EVENT_SYNC)
    m = base("flow_surrogate", "flow_surrogate.py", "planted", args, steps=FS["steps"], warmup=FS["warmup"], est=45)
    m["uses"] = uses(**use_fs)
    m["uses"]["fft"] = (f"torch.fft.rfft2 / irfft2 over [{Bf}, {Cf}, {Sf}, {Sf}] float32 in each of {Lf} Fourier layers, "
                        f"on the unpadded {Sf} x {Sf} grid ({Sf} is prime)")
    m["techniques"] = techniques(
        f"make the FFT lengths cuFFT-friendly: zero-pad the lifted fields to {Pf} = 2^4 x 3^3 points per side before "
        f"the Fourier layers and crop back after (the FNO's usual domain padding; any 2,3,5,7-smooth size >= {Sf} "
        f"will do), so cuFFT runs its mixed-radix kernels instead of Bluestein's algorithm for a prime length",
        ["CUDA graphs / launch overhead (GPU-bound, ~95 kernels of milliseconds)", "a larger batch",
         "half precision / bf16 FFTs as the top fix (cuFFT's half transforms need power-of-two sizes)",
         "fewer retained modes (the mode mixing is tiny; the full-grid FFTs are the cost)",
         "torch.compile as the top fix", "data loading (fields resident on the GPU)",
         "TF32 / matmul precision settings (the cost is in cuFFT)"])
    m["planted"] = [planted17(
        "fft_size_unfriendly", {"device": "GPU 0", "region": f"step_N > forward, every Fourier layer: the rfft2 and "
                                f"irfft2 of {Bf * Cf} planes of {Sf} x {Sf} run cuFFT's Bluestein path ({Sf} prime), "
                                f"its kernels the largest class of the step"},
        f"pad to {Pf} x {Pf} before the Fourier layers, crop after (--fixed, captured as flow_surrogate.fixed)", b,
        "rm.fft_size_unfriendly", "share.fft_size_unfriendly",
        f"{Bf} fields x {Cf} channels x {Sf}^2 = {b2['n_g'][0]:.3f} G real elements per activation "
        f"({b2['field_gb'][0]:.2f} GB). Per batch {2 * Lf} batched 2-D real transforms. On a 2,3,5,7-smooth grid one "
        f"moves 16-28 B per real element ({Pf}^2: {rng(bf2, 'c.fft_smooth')} ms in all); on the prime {Sf} cuFFT uses "
        f"Bluestein's algorithm (zero-padded length >= {2 * Sf - 1}, chirp multiplies, a forward and an inverse FFT "
        f"per dimension, the odd real transform without the half-length trick): 4-12x that traffic, "
        f"{rng(b2, 'c.fft_bluestein')} ms. The rest is memory-bound float32 work at 50-95 % of HBM: the Fourier layers' "
        f"zero fill, irfft2's input copy, 1x1 convolution, add and GELU ({rng(b2, 'c.fourier_layer_elementwise')} ms) "
        f"and the lifting / projection ({rng(b2, 'c.lift_projection')} ms). Step {rng(b2, 'step')} ms (GPU-bound: host "
        f"{rng(b2, 'host_ms')} ms); padded to {Pf}: {rng(b2, 'after')} ms (the pad and the 5 % larger grid included): "
        f"removed {rng(b2, 'rm.fft_size_unfriendly')} ms = {rng(b2, 'share.fft_size_unfriendly', 1)} % (H100 "
        f"{rng(b, 'share.fft_size_unfriendly', 1)} %), {rng(b2, 'speedup')}x; the removable FFT time exceeds half the "
        f"memory-bound work at every corner (margin {rng(b2, 'plant_over_half_ew_ms')} ms). The band is wide because "
        f"the Bluestein factor is an assumption; the pair measures it. New cause name: fft_size_unfriendly.",
        ["fft_size_unfriendly", "fft_prime_size", "bluestein_fft", "cufft_slow_size", "kernel_inefficient"], b2)]
    m["tolerated"] = [{"what": "the FNO's float32 memory-bound kernels (zero fill, irfft2's input copy, 1x1 convolution, "
                               "add, GELU, the projection's 128-wide layer): up to about half the batch by kernel time "
                               "at the fast-FFT corners, but ranked below the FFTs (less of it is removable)",
                       "cause": "elementwise_unfused", "max_severity": "critical"},
                      {"what": "float32 rather than half precision (cuFFT's half transforms need power-of-two sizes)",
                       "cause": "fp32_gemm_simt", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "step_N > forward, GPU-bound (the host a step ahead, no synchronization but the event wait)",
        f"cuFFT kernels {rng(b2, 'c.fft_bluestein', 0)} ms per step, {rng(b2, 'fft_share', 0)} % of it, the largest class; "
        f"several FFT kernels per transform (Bluestein's chirp / padded-length passes)",
        "in the after run the FFT kernels are a fraction of that, and the memory-bound float32 kernels lead"]
    m["must_not"] = [
        "CUDA graphs / launch overhead (GPU-bound)", "a host synchronization or a host-bound step",
        "bf16 / half FFTs or TF32 settings as the top fix", "fewer Fourier modes as the fix",
        "the elementwise / 1x1 convolution kernels as the main cost", "a larger batch as the fix",
        "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Here are two profiles of our Fourier-neural-operator surrogate for Darcy flow on one H200 "
                     f"({Lf} Fourier layers of width {Cf} keeping {FS['modes']} modes, {Bf} permeability fields of "
                     f"{Sf} x {Sf} per batch, float32 with TF32), before and after a one-line change to the model's "
                     f"forward. How much did the change buy per batch, where did the time go before, and what bounds a "
                     f"batch now?")
    m["diagnosis"] = (f"Before, every rfft2 / irfft2 ran on the unpadded {Sf} x {Sf} grid, and {Sf} is prime: cuFFT "
                      f"computes prime lengths with Bluestein's algorithm (chirp multiplies and FFTs of a zero-padded "
                      f"length >= {2 * Sf - 1}), several times the traffic of a smooth size: the cuFFT kernels took "
                      f"{rng(b2, 'c.fft_bluestein', 0)} ms of a {rng(b2, 'step', 0)} ms batch on the H200 "
                      f"(~{rng(b2, 'fft_share', 0)} %). After (the fields padded to {Pf} = 2^4 x 3^3 before the Fourier "
                      f"layers, cropped after): a batch ~{rng(b2, 'after', 1)} ms, "
                      f"{rng(b2, 'share.fft_size_unfriendly', 0)} % removed "
                      f"({band_of17(b2, 'share.fft_size_unfriendly')[0]}), {rng(b2, 'speedup', 1)}x. A batch is now "
                      f"bound by memory-bound float32 kernels (~{rng(bf2, 'ew_share', 0)} %: the 1x1 convolutions, adds, "
                      f"GELU, the spectrum's zero fill and the projection) and the smooth-size FFTs "
                      f"(~{rng(bf2, 'fft_share', 0)} %); GPU-bound, nothing planted left.")
    m["measure"] = [{"what": "step period", "query": Q17["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q17["kernels"],
                     "expect": f"cuFFT kernels {rng(b2, 'c.fft_bluestein', 0)} ms per step, the largest class"}]
    m["new_cause"] = {"name": "fft_size_unfriendly", "why": "FFTs whose lengths have a large prime factor (a prime grid, "
                      "n = 2L - 1 for a linear convolution, an odd window): cuFFT (and most FFT libraries) fall back to "
                      "Bluestein's algorithm, several times the traffic and time of a nearby 2,3,5,7-smooth length; "
                      "fixed by zero-padding (or choosing) the transform length to a smooth size"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="flow_surrogate.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("flow_surrogate.fixed", "flow_surrogate.py", "fixed", args + ["--fixed"], steps=FS["steps"],
             warmup=FS["warmup"], est=30)
    m["uses"] = uses(**use_fs)
    m["uses"]["fft"] = f"torch.fft.rfft2 / irfft2 on the fields padded to {Pf} x {Pf} (2^4 x 3^3)"
    m["techniques"] = techniques(
        "nothing planted is left: a batch is the memory-bound float32 work of the Fourier layers and projection, then "
        "the FFTs; fusing the 1x1 convolution, add and GELU (or a channels-last / bf16 design) would be the next, "
        "separate, gain",
        ["FFT sizes (done: smooth now)", "CUDA graphs / launch overhead (GPU-bound)", "data loading"])
    m["planted"] = []
    m["tolerated"] = [{"what": "the memory-bound float32 kernels, now the largest part of a batch",
                       "cause": "elementwise_unfused", "max_severity": "critical"},
                      {"what": "float32 rather than half precision", "cause": "fp32_gemm_simt", "max_severity": "medium"}]
    m["expected_in_trace"] = [
        "cuFFT mixed-radix kernels on 432-point transforms, a pad copy before the Fourier layers",
        f"FFTs ~{rng(b2, 'fft_share', 0)} % and memory-bound kernels ~{rng(b2, 'ew_share', 0)} % of the step, GPU-bound"]
    m["must_not"] = ["the FFT size still as the problem", "a host-bound or launch-bound step",
                     "a planted problem left (the remaining memory-bound work is the model's own)"]
    m["expect_quiet"] = False
    m["question"] = "After the change, is anything still holding a batch back?"
    m["diagnosis"] = (f"No planted problem is left: {rng(b2, 'step', 1)} ms per batch on the H200, GPU-bound (host "
                      f"{rng(b2, 'host_ms', 1)} ms): memory-bound float32 kernels ~{rng(b2, 'ew_share', 0)} % (1x1 "
                      f"convolutions, adds, GELU, the spectrum's zero fill, the projection), the smooth-size FFTs "
                      f"~{rng(b2, 'fft_share', 0)} %; fusing the pointwise work would be the next, separate, gain.")
    m["measure"] = [{"what": "step period", "query": Q17["step"], "expect_ms": r2(b2["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- query_embed (cuda_graph_recapture; no NVTX) ----------------------------------------------------------------
    Bq, Sq, dq, Lq = QE["batch"], QE["seq"], QE["d"], QE["layers"]
    args = ["--batch", Bq, "--seq", Sq, "--vocab", QE["vocab"], "--d-model", dq, "--heads", QE["heads"], "--ffn",
            QE["ffn"], "--layers", Lq, "--pool", QE["pool"], "--ring", QE["ring"]]
    b, b2, keys = ev(m_qe)
    bf2 = ev(lambda r: m_qe(r, fixed=True))[1]
    m = base("query_embed", "query_embed.py", "planted", args, nvtx=False, steps=QE["steps"], warmup=QE["warmup"],
             est=30)
    m["uses"] = uses("bf16 weights, inference", "none (inference, torch.no_grad)", graphs=True, attention=True,
                     sequences=f"{Bq} queries of {Sq} tokens per request (fixed shapes)", host_sync=EVENT_SYNC)
    m["uses"]["cuda_graphs"] = ("yes, but a new torch.cuda.CUDAGraph is created, captured on the request's tensor, "
                                "instantiated and replayed once in every request")
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, {QE['heads']} heads of {dq // QE['heads']}, non-causal"
    m["techniques"] = techniques(
        "capture the graph once (at start-up or per shape) on static input / output buffers and only replay it per "
        "request: copy the request's ids into the static input, replay, copy the embeddings out (or "
        "torch.compile(mode='reduce-overhead'), which does the same bookkeeping)",
        ["removing CUDA graphs / going back to eager as the fix (eager is launch-bound here)",
         "a faster GPU kernel / GEMM tuning (the GPU is idle most of the request)", "a larger or smaller batch",
         "FlashAttention / SDPA changes", "data loading (ids on the GPU)", "FP8 / quantization"])
    m["planted"] = [planted17(
        "cuda_graph_recapture", {"device": "GPU 0 (and the host)", "region": "every request (no NVTX): a device "
                                 "synchronize, cudaFree / cudaMalloc of the graph pools, a stream capture of the "
                                 f"encoder's ~{int(b2['nodes'][0])} launches, cudaGraphInstantiate, then one "
                                 "cudaGraphLaunch; the GPU idle through all of it"},
        "capture once on static buffers, replay per request (--fixed; not captured)", b, "rm.cuda_graph_recapture",
        "share.cuda_graph_recapture",
        f"{Bq} x {Sq} tokens per request through {Lq} layers of {dq}: {rng(b2, 'gpu_ms')} ms of GPU work as one graph "
        f"(bf16 GEMMs {rng(b2, 'g.gemms_bf16')} ms at 250-600 TFLOP/s, attention {rng(b2, 'g.attention')}, "
        f"memory-bound kernels {rng(b2, 'g.elementwise')}, node gaps {rng(b2, 'g.graph_node_gaps')}). Capturing it in "
        f"every request puts in series: the Python forward issued into the capture ({QE_LAYER_OPS * Lq + QE_OTHER_OPS} "
        f"ops at 20-130 µs: {rng(b2, 'c.capture_python_forward')} ms), the handler's graph bookkeeping "
        f"({rng(b2, 'c.handler_python')} ms), the allocator's release and re-allocation of 4-8 segments "
        f"({rng(b2, 'c.cache_release_realloc')} ms), cudaGraphInstantiate of ~{int(b2['nodes'][0])} nodes and the first "
        f"launch ({rng(b2, 'c.instantiate_upload')} ms), and, through the synchronize on entry, the previous replay: a "
        f"request {rng(b2, 'step')} ms on an H200 with the GPU busy {rng(b2, 'gpu_busy_share', 0)} %. Captured once "
        f"and replayed: {rng(b2, 'after')} ms (GPU-bound; host {rng(bf2, 'host_ms')} ms): removed "
        f"{rng(b2, 'rm.cuda_graph_recapture')} ms = {rng(b2, 'share.cuda_graph_recapture', 1)} % (H100 "
        f"{rng(b, 'share.cuda_graph_recapture', 1)} %), {rng(b2, 'speedup')}x. New cause name: cuda_graph_recapture.",
        ["cuda_graph_recapture", "graph_capture_per_step", "graph_instantiate_overhead", "host_bound", "launch_bound"],
        b2)]
    m["tolerated"] = [{"what": "the device synchronize at each capture's start: part of the planted mechanism (it "
                               "serializes the replay with the next capture), not a separate top cause; removing it "
                               "is not the fix", "cause": "host_sync", "max_severity": "critical"},
                      {"what": "cudaMalloc / cudaFree of the graph pools every request: part of the planted mechanism, "
                               "not a separate top cause", "cause": "allocator_churn", "max_severity": "critical"}]
    m["expected_in_trace"] = [
        "no NVTX; per request one cudaGraphInstantiate and one cudaGraphLaunch, a cudaStreamBeginCapture / "
        "EndCapture pair with ~73 kernel launches between them that produce no GPU activity, cudaMalloc / cudaFree "
        "calls and a device synchronize",
        f"the GPU busy ~{rng(b2, 'gpu_busy_share', 0)} % of a request: one short graph execution, then idle"]
    m["must_not"] = [
        "CUDA graphs themselves as the problem / eager as the fix", "the GEMMs, attention or kernel efficiency as the "
        "cause", "a larger batch as the fix", "data loading or host-to-device copies", "memory capacity",
        "removing the synchronize or allocator settings (empty_cache, PYTORCH_CUDA_ALLOC_CONF) as the top fix",
        "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Our query-embedding service runs a {Lq}-layer MiniLM-style encoder (width {dq}, bf16) on one "
                     f"H200; each request embeds {Bq} queries of {Sq} tokens. A request takes much longer than its GPU "
                     f"kernels add up to, and the GPU sits idle most of the time. Where does a request's time go, and "
                     f"what should we change?")
    m["diagnosis"] = (f"The handler builds a new CUDA graph in every request: torch.cuda.graph synchronizes the device, "
                      f"releases the allocator's cache, the whole encoder is issued from Python into a stream capture "
                      f"(~{QE_LAYER_OPS * Lq + QE_OTHER_OPS} ops, {rng(b2, 'c.capture_python_forward', 1)} ms), the "
                      f"private pool is re-allocated ({rng(b2, 'c.cache_release_realloc', 1)} ms) and "
                      f"cudaGraphInstantiate runs ({rng(b2, 'c.instantiate_upload', 1)} ms) before the graph is "
                      f"replayed once: a request {rng(b2, 'step', 1)} ms on the H200 for {rng(b2, 'gpu_ms', 1)} ms of "
                      f"GPU work. Capture once on static input / output buffers and replay per request (copy the ids "
                      f"in, replay, copy the embeddings out): ~{rng(b2, 'after', 1)} ms, "
                      f"{rng(b2, 'share.cuda_graph_recapture', 0)} % removed "
                      f"({band_of17(b2, 'share.cuda_graph_recapture')[0]}), {rng(b2, 'speedup', 0)}x. The kernels are "
                      f"fine; CUDA graphs are the right tool, used the wrong way.")
    m["measure"] = [{"what": "request period (no NVTX)", "query": Q17["anchor"] + " with ANCHOR = cudaGraphLaunch (one per "
                     "request; or the graph's embedding-gather kernel), C = 1, WARM = 3", "expect_ms": r2(b2["step"])},
                    {"what": "CUDA API per request", "query": Q17["cuda_api"],
                     "expect": "one cudaGraphInstantiate, one cudaStreamBeginCapture / EndCapture, one cudaGraphLaunch, "
                               "several cudaMalloc and cudaFree, a synchronize per request"}]
    m["new_cause"] = {"name": "cuda_graph_recapture", "why": "a CUDA graph captured (and instantiated) again on every "
                      "call instead of once on static buffers: each call pays a device synchronize, allocator churn, "
                      "the full Python forward into the capture and cudaGraphInstantiate, more than the launches the "
                      "graph was meant to save; fixed by capturing once and replaying with the inputs copied into "
                      "static buffers"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- photo_tagger (dataloader_recreated) ------------------------------------------------------------------------
    Bp, Wp, dp, Lp = PT["batch"], PT["workers"], PT["d"], PT["blocks"]
    args = ["--batch", Bp, "--workers", Wp, "--images", PT["images"], "--image", PT["image"], "--patch", PT["patch"],
            "--d-model", dp, "--heads", PT["heads"], "--ffn", PT["ffn"], "--blocks", Lp, "--classes", PT["classes"]]
    b, b2, keys = ev(m_pt)
    bf2 = ev(lambda r: m_pt(r, fixed=True))[1]
    m = base("photo_tagger", "photo_tagger.py", "planted", args, steps=PT["steps"], warmup=PT["warmup"], est=60)
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", attention=True,
                     sequences=f"{(PT['image'] // PT['patch']) ** 2 + 1} tokens per image, fixed", pinned=True,
                     host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, {PT['heads']} heads of {dp // PT['heads']}, non-causal"
    m["uses"]["data_loading"] = (f"torch.utils.data.DataLoader, {Wp} worker processes (fork), pin_memory=True, batch "
                                 f"{Bp}, NumPy crop / flip per image in the workers; the loop calls "
                                 f"next(iter(loader)) every step")
    m["techniques"] = techniques(
        "create the DataLoader iterator once and keep it (iterate with `for x, y in loader` or keep `it = iter(loader)` "
        "and call next(it), re-creating it only at the end of an epoch); persistent_workers=True keeps the workers "
        "across epochs too; then the 4 workers prefetch and the step is the model's",
        ["more DataLoader workers or a larger prefetch_factor as the fix (every new iterator forks and waits for them "
         "anyway)", "pinning / non_blocking copies (already pinned; the copy is 3 MB)",
         "CUDA graphs / launch overhead", "faster / fused model kernels, FP8 or torch.compile as the top fix",
         "moving augmentation to the GPU as the top fix (the per-batch work is not the problem)", "a larger batch"])
    m["planted"] = [planted17(
        "dataloader_recreated", {"device": "GPU 0 (and the host)", "region": f"step_N > data, every step: a new "
                                 f"DataLoader iterator: {Wp} worker processes forked and a pin-memory thread started, "
                                 f"the first batch awaited, then the workers' next batches awaited and the workers "
                                 f"joined when the iterator is dropped; the GPU idle meanwhile"},
        "keep one iterator (--fixed; not captured)", b, "rm.dataloader_recreated", "share.dataloader_recreated",
        f"{Bp} thumbnails per step through a ViT of {Lp} x {dp} ({b2['params_m'][0]:.1f} M parameters, "
        f"{int(b2['tokens'][0])} tokens): GPU {rng(b2, 'gpu_ms')} ms (bf16 GEMMs {rng(b2, 'c.block_gemm_bf16')} ms at "
        f"250-600 TFLOP/s, attention {rng(b2, 'c.attention')}, autocast elementwise {rng(b2, 'c.block_elementwise')}), "
        f"host launches {rng(b2, 'launch_ms')} ms. A worker needs {rng(b2, 't_batch_ms')} ms per batch (20-100 µs per "
        f"image). next(iter(loader)) every step forks {Wp} workers one after the other (8-50 ms each: "
        f"{rng(b2, 'forks_ms')} ms), hands them their first {PT['prefetch'] * Wp} index batches, waits for batch 0 "
        f"(one worker's batch), and on the iterator's release waits for the batch each worker has started since "
        f"(another batch time) and joins them (3-15 ms of queues, threads and joins): {rng(b2, 'loader_ms')} ms per "
        f"step with no GPU work but the previous step's. Step {rng(b2, 'step')} ms on an H200 (host-paced, the GPU "
        f"busy {rng(b2, 'gpu_busy_share', 0)} %). One iterator kept: the workers prefetch a batch every "
        f"{rng(bf2, 't_batch_ms')} / {Wp} ms and the step is {rng(b2, 'after')} ms (GPU {rng(bf2, 'gpu_ms')}, host "
        f"{rng(bf2, 'launch_ms')}): removed {rng(b2, 'rm.dataloader_recreated')} ms = "
        f"{rng(b2, 'share.dataloader_recreated', 1)} % (H100 {rng(b, 'share.dataloader_recreated', 1)} %), "
        f"{rng(b2, 'speedup')}x. New cause name: dataloader_recreated.",
        ["dataloader_recreated", "dataloader_reinit", "worker_startup", "input_pipeline_bound", "host_bound"], b2)]
    m["tolerated"] = [{"what": "autocast elementwise kernels and casts of a small ViT", "cause": "elementwise_unfused",
                       "max_severity": "low"},
                      {"what": "the 3.1 MB pinned batch copy", "cause": "copy_bound", "max_severity": "info"}]
    m["expected_in_trace"] = [
        f"step_N > data {rng(b2, 'loader_ms', 0)} ms per step with no GPU activity launched; the main thread in "
        f"OS-runtime waits (poll / pthread_cond / sem / futex) for the workers; a new pin-memory thread each step",
        "step_N > forward / backward / optimizer short (a few ms of launches); the GPU idle most of the step",
        "one 3.1 MB pinned HtoD copy per step; no synchronization but the event wait"]
    m["must_not"] = [
        "too few workers / slow augmentation as the root cause or top fix", "pinned memory or the HtoD copy as the "
        "cause", "the model's kernels, GEMMs or precision as the cause", "CUDA graphs / launch overhead",
        "a host synchronization (.item()) as the cause", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We train a small vision transformer ({Lp} blocks of width {dp}, 100 tags) on 32 x 32 photo "
                     f"thumbnails on one H200: {Bp} images per step from a PyTorch DataLoader with {Wp} workers and "
                     f"pinned memory, bf16 autocast, fused AdamW. A step takes far longer than the model's compute and "
                     f"the GPU is idle most of the time. Where does the time go, and what should we change?")
    m["diagnosis"] = (f"The loop gets every batch with next(iter(loader)), so each step builds a new DataLoader "
                      f"iterator: it forks {Wp} worker processes ({rng(b2, 'forks_ms', 0)} ms), waits for the first "
                      f"batch, and when the iterator is dropped waits for the workers' next batches and joins them: "
                      f"step_N > data takes {rng(b2, 'loader_ms', 0)} ms with the GPU idle, a step "
                      f"{rng(b2, 'step', 0)} ms on the H200 for {rng(b2, 'gpu_ms', 0)} ms of GPU work. Keep one iterator "
                      f"(iterate the loader, or it = iter(loader) once; persistent_workers=True across epochs): the "
                      f"workers prefetch and a step is ~{rng(b2, 'after', 0)} ms, "
                      f"{rng(b2, 'share.dataloader_recreated', 0)} % removed "
                      f"({band_of17(b2, 'share.dataloader_recreated')[0]}), {rng(b2, 'speedup', 1)}x. More workers would "
                      f"make it worse; the augmentation and the model are fine.")
    m["measure"] = [{"what": "step period", "query": Q17["step"], "expect_ms": r2(b2["step"])},
                    {"what": "NVTX ranges", "query": Q17["nvtx_ranges"],
                     "expect": f"data {rng(b2, 'loader_ms', 0)} ms per step, forward + backward + optimizer a few ms"},
                    {"what": "OS runtime", "query": Q17["osrt"] + ", T0 / T1 = one step_N > data range",
                     "expect": "the main thread blocked in poll / pthread_cond / sem waits; thread creation each step"}]
    m["new_cause"] = {"name": "dataloader_recreated", "why": "a DataLoader iterator built anew for every batch "
                      "(next(iter(loader)) in the loop, or a loop that breaks out of `for batch in loader` each step): "
                      "every step forks the worker processes, starts a pin-memory thread, waits for the first batch and "
                      "tears the workers down again, so the workers never prefetch; fixed by keeping one iterator "
                      "(and persistent_workers across epochs)"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- policy_learner (pickled_ipc_transfer) ----------------------------------------------------------------------
    F_, obs, small = pl_sizes()
    args = ["--unroll", PL["unroll"], "--envs", PL["envs"], "--frames", PL["frames"], "--size", PL["size"],
            "--actions", PL["actions"], "--actors", PL["actors"], "--queue", PL["queue"]]
    b, b2, keys = ev(m_pl)
    bf2 = ev(lambda r: m_pl(r, fixed=True))[1]
    m = base("policy_learner", "policy_learner.py", "planted", args, steps=PL["steps"], warmup=PL["warmup"], est=45)
    m["uses"] = uses("bf16 autocast over fp32 weights", "Adam fused", pinned=False, host_sync=EVENT_SYNC)
    m["uses"]["data_loading"] = (f"{PL['actors']} actor processes (fork) send rollouts ({F_} frames, "
                                 f"{obs / 1e6:.1f} MB of uint8 observations) as dicts of NumPy arrays through one "
                                 f"multiprocessing.Queue (pickled, through a pipe); the learner copies them with "
                                 f".to('cuda') from pageable memory")
    m["techniques"] = techniques(
        "pass the rollouts through shared memory instead of pickling them through the queue's pipe: preallocated "
        "shared-memory slots (torch tensors with share_memory_(), or multiprocessing.shared_memory / "
        "torch.multiprocessing queues of shared tensors) that the actors fill, with only a slot index sent; "
        "optionally register / pin the slots so the HtoD copy is asynchronous too",
        ["more actors as the fix (the learner's unpickling is the bottleneck)", "faster GPU kernels, "
         "CUDA graphs or torch.compile as the top fix (the GPU work is a few ms)", "a larger rollout / batch",
         "pinned memory as the top fix (the pageable copy is the smaller part)",
         "DataLoader workers (there is no DataLoader)"])
    m["planted"] = [planted17(
        "pickled_ipc_transfer", {"device": "GPU 0 (and the learner's main thread)", "region": "step_N > rollout, every "
                                 "update: queue.get() reads ~29 MB through a pipe in 64 KB read() calls and unpickles "
                                 "it into fresh arrays, with no CUDA activity; then the pageable copies"},
        "shared-memory slots, indices through the queue (--fixed; not captured)", b, "rm.pickled_ipc_transfer",
        "share.pickled_ipc_transfer",
        f"Rollouts of {PL['unroll']} steps x {PL['envs']} environments: {F_} observations of {PL['frames']} x "
        f"{PL['size']} x {PL['size']} uint8 = {obs / 1e6:.1f} MB, {b2['payload_mb'][0]:.1f} MB with actions, logits and "
        f"returns. Through a multiprocessing.Queue each is pickled by the actor's feeder thread, written through a pipe "
        f"and read back and unpickled on the learner's main thread at 0.5-2 GB/s: {rng(b2, 'get_ms')} ms per update "
        f"with the GPU idle. Then the pageable HtoD copy ({rng(b2, 'c.h2d_obs_pageable')} ms at 6-14 GB/s, holding the "
        f"host), the update's launches ({rng(b2, 'ops_ms')} ms) and {rng(b2, 'c.conv_fc_bf16')} ms of convolutions. "
        f"Update {rng(b2, 'step')} ms on an H200 (host-paced, the GPU busy {rng(b2, 'gpu_busy_share', 0)} %, its copy "
        f"included). With shared-memory slots and only an index through the queue: {rng(b2, 'after')} ms (the "
        f"pageable copy now the larger part): removed {rng(b2, 'rm.pickled_ipc_transfer')} ms = "
        f"{rng(b2, 'share.pickled_ipc_transfer', 1)} % (H100 {rng(b, 'share.pickled_ipc_transfer', 1)} %), "
        f"{rng(b2, 'speedup')}x. New cause name: pickled_ipc_transfer.",
        ["pickled_ipc_transfer", "ipc_pickle_copy", "multiprocessing_queue_copy", "host_copy_bound", "host_bound"], b2)]
    m["tolerated"] = [{"what": "the 28.9 MB pageable HtoD copy (stays with the fix unless the slots are pinned)",
                       "cause": "copy_bound_pageable", "max_severity": "high"},
                      {"what": "the 3 small pageable copies per update", "cause": "copy_many_small",
                       "max_severity": "low"},
                      {"what": "the small policy network's launches", "cause": "launch_bound", "max_severity": "medium"}]
    m["expected_in_trace"] = [
        f"step_N > rollout {rng(b2, 'get_ms', 0)} ms per update with no CUDA activity: the main thread in ~450 OS-runtime "
        f"read() calls on a pipe (64 KB each) and memory copies",
        f"then one pageable HtoD memcpy of {obs / 1e6:.1f} MB ({rng(b2, 'c.h2d_obs_pageable', 0)} ms) and 3 small ones, "
        f"then ~90 short kernels",
        f"the GPU busy ~{rng(b2, 'gpu_busy_share', 0)} % of an update"]
    m["must_not"] = [
        "pinned memory / the HtoD copy as the root cause or top fix", "the convolutions, GEMMs or precision as the "
        "cause", "more actors as the fix", "CUDA graphs / launch overhead as the top fix",
        "a host synchronization (.item()) as the cause", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Our actor-learner reinforcement-learning job runs its learner on one H200: {PL['actors']} actor "
                     f"processes play Atari-style games and send rollouts of {PL['unroll']} steps x {PL['envs']} "
                     f"environments ({PL['frames']} stacked {PL['size']} x {PL['size']} frames per observation) to the "
                     f"learner, which trains a Nature-CNN actor-critic (bf16 autocast, fused Adam) on each. The GPU "
                     f"work of an update should take a few milliseconds, yet each update takes several times that and "
                     f"the GPU is idle most of the time. Where does the learner's time go?")
    m["diagnosis"] = (f"The rollouts reach the learner through a multiprocessing.Queue as NumPy arrays: every "
                      f"{b2['payload_mb'][0]:.0f} MB rollout is pickled by the actor, pushed through a pipe and read "
                      f"back (~450 read() calls of 64 KB) and unpickled on the learner's main thread: "
                      f"{rng(b2, 'get_ms', 0)} ms of step_N > rollout per update with the GPU idle, an update "
                      f"{rng(b2, 'step', 0)} ms on the H200 for ~{rng(b2, 'gpu_ms', 0)} ms of GPU work (its copy "
                      f"included). Pass the rollouts through shared memory (preallocated shared slots the actors fill, "
                      f"only an index through the queue): ~{rng(b2, 'after', 0)} ms an update, "
                      f"{rng(b2, 'share.pickled_ipc_transfer', 0)} % removed "
                      f"({band_of17(b2, 'share.pickled_ipc_transfer')[0]}), {rng(b2, 'speedup', 1)}x; the 29 MB "
                      f"pageable HtoD copy ({rng(b2, 'c.h2d_obs_pageable', 1)} ms) is then the next item (pinned / "
                      f"registered slots). The network and the actors are not the problem.")
    m["measure"] = [{"what": "step period", "query": Q17["step"], "expect_ms": r2(b2["step"])},
                    {"what": "NVTX ranges", "query": Q17["nvtx_ranges"],
                     "expect": f"rollout {rng(b2, 'get_ms', 0)} ms per update"},
                    {"what": "OS runtime", "query": Q17["osrt"] + ", T0 / T1 = one step_N > rollout range",
                     "expect": "~450 read() calls on the main thread per update"},
                    {"what": "copies", "query": Q17["memcpy"],
                     "expect": f"one pageable HtoD copy of {obs / 1e6:.1f} MB and 3 small ones per update"}]
    m["new_cause"] = {"name": "pickled_ipc_transfer", "why": "large arrays passed between processes through a "
                      "multiprocessing.Queue / Pipe (pickled, copied through a pipe in small chunks, unpickled into "
                      "fresh memory) on the consumer's critical path; fixed by shared memory (preallocated shared "
                      "buffers or torch.multiprocessing shared tensors) with only handles or indices passed"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- support_lm (gloo_gpu_collectives; 2 ranks) -----------------------------------------------------------------
    Bs, Ss, Vs, ds, Ls = (SL[k] for k in ("batch", "seq", "vocab", "d", "blocks"))
    args = ["--batch", Bs, "--seq", Ss, "--vocab", Vs, "--d-model", ds, "--heads", SL["heads"], "--blocks", Ls]
    b, b2, keys = ev(m_sl)
    bf2 = ev(lambda r: m_sl(r, fixed=True))[1]
    P_s, P_last, _ = sl_params()
    m = base("support_lm", "support_lm.py", "planted", args, steps=SL["steps"], warmup=SL["warmup"], est=60,
             ranks=SL["ranks"])
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", attention=True,
                     sequences=f"{Bs} sequences of {Ss} tokens per GPU per step (no padding)", ddp=True,
                     host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, is_causal=True, {SL['heads']} heads of {ds // SL['heads']}"
    m["uses"]["process_group"] = ("torch.distributed backend 'gloo' for CUDA tensors: DDP's gradient all-reduce staged "
                                  "through pinned host memory and reduced on the CPUs over TCP (loopback); no NCCL")
    m["techniques"] = techniques(
        "initialize torch.distributed with backend='nccl' for the GPU tensors (or 'cpu:gloo,cuda:nccl' if CPU "
        "collectives are also needed): DDP's all-reduce then runs as NCCL kernels over NVLink at 200-300 GB/s, "
        "overlapped with the backward",
        ["DDP bucket size (bucket_cap_mb) or gradient_as_bucket_view as the fix", "gradient compression / bf16 "
         "all-reduce hooks as the top fix", "a straggler rank (the ranks are symmetric)", "FSDP / ZeRO",
         "NCCL tuning (no NCCL runs)", "CUDA graphs / launch overhead", "faster kernels / FP8 as the top fix",
         "gradient accumulation to hide the all-reduce as the top fix"])
    m["planted"] = [planted17(
        "gloo_gpu_collectives", {"ranks": [0, 1], "region": "both ranks, every step, the end of step_N > backward: "
                                 "DDP's bucket all-reduces through Gloo: pinned DtoH and HtoD copies of each bucket on "
                                 "Gloo's streams and a long stretch with no kernel while the CPUs reduce over TCP; no "
                                 "NCCL kernel anywhere"},
        "backend='nccl' (--fixed; not captured)", b, "rm.gloo_gpu_collectives", "share.gloo_gpu_collectives",
        f"{b2['params_m'][0]:.1f} M parameters: {b2['grad_mb'][0]:.0f} MB of float32 gradients per step and rank, the "
        f"tied embedding and positions ({4 * P_last / 1e6:.0f} MB) in the last bucket (ready only at the end of the "
        f"backward). Compute per rank {rng(b2, 'compute_ms')} ms (block GEMMs {rng(b2, 'c.block_gemm_bf16')}, tied head "
        f"{rng(b2, 'c.lm_head_gemm')}, attention {rng(b2, 'c.attention_causal')}, autocast elementwise "
        f"{rng(b2, 'c.block_elementwise')}, float32 cross-entropy {rng(b2, 'c.cross_entropy_fp32')}), backward "
        f"{rng(b2, 'bwd_ms')} ms; host {rng(b2, 'host_ms')} ms. Through Gloo the all-reduce is staged to pinned host "
        f"memory and summed on the CPUs over TCP at 1-5 GB/s: {rng(b2, 'gloo_all_ms')} ms in all, of which 60-90 % of the "
        f"backward can hide at most, and never less than the last bucket ({rng(b2, 'gloo_last_ms')} ms) plus its two "
        f"staging copies: {rng(b2, 'c.gloo_allreduce_exposed')} ms exposed. Step {rng(b2, 'step')} ms. With NCCL: the "
        f"last bucket {rng(b2, 'after_allreduce_exposed_ms', 2)} ms exposed, the rest overlapped: {rng(b2, 'after')} ms "
        f"(host {rng(bf2, 'host_ms')} ms): removed {rng(b2, 'rm.gloo_gpu_collectives')} ms = "
        f"{rng(b2, 'share.gloo_gpu_collectives', 1)} % (H100 {rng(b, 'share.gloo_gpu_collectives', 1)} %), "
        f"{rng(b2, 'speedup')}x. New cause name: gloo_gpu_collectives.",
        ["gloo_gpu_collectives", "wrong_dist_backend", "gloo_backend", "host_staged_allreduce",
         "exposed_communication"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / cast / GELU / residual kernels under autocast (memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "the float32 cross-entropy over 16384 x 32768 logits", "cause": "elementwise_unfused",
                       "max_severity": "medium"},
                      {"what": "Gloo's pinned DtoH / HtoD staging copies (part of the plant: 2 x 169 MB per step, "
                               "mostly beside the CPU reduction)", "cause": "copy_bound", "max_severity": "high"}]
    m["expected_in_trace"] = [
        "both ranks alike (no straggler); no ncclDevKernel anywhere",
        f"per step ~7 pinned DtoH and ~7 pinned HtoD memcpy of up to {4 * P_last / 1e6:.0f} MB on non-default streams "
        f"({b2['grad_mb'][0]:.0f} MB each way), during and after the backward",
        f"at the end of step_N > backward {rng(b2, 'c.gloo_allreduce_exposed', 0)} ms with no kernel running (the CPUs "
        f"all-reducing), then the optimizer"]
    m["must_not"] = [
        "a straggler or imbalanced rank", "NCCL configuration or NVLink as slow (NCCL is not used)",
        "DDP bucket size as the cause or the fix", "the compute (GEMMs, attention) as the cause",
        "a host synchronization or .item() as the cause", "FSDP / ZeRO as the fix", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We train a {b2['params_m'][0]:.0f} M-parameter GPT-style model (d {ds}, {Ls} layers, vocabulary "
                     f"{Vs}) on customer-support chat logs on 2 H200s with DistributedDataParallel ({Bs} x {Ss} tokens "
                     f"per GPU per step, bf16 autocast, fused AdamW). A step takes much longer than one GPU's forward and "
                     f"backward, and both GPUs sit idle for a long stretch of every step. What is holding them back?")
    m["diagnosis"] = (f"torch.distributed is initialized with the Gloo backend, so DDP's gradient all-reduce "
                      f"({b2['grad_mb'][0]:.0f} MB of float32 gradients per step) runs on the CPUs: every bucket is "
                      f"copied to pinned host memory, summed over TCP between the two processes at a few GB/s and "
                      f"copied back; no NCCL kernel runs. The backward waits for the last bucket (the tied embedding's "
                      f"{4 * P_last / 1e6:.0f} MB, ready only at the end): {rng(b2, 'c.gloo_allreduce_exposed', 0)} ms "
                      f"per step with the GPUs idle, a step {rng(b2, 'step', 0)} ms on the H200s for "
                      f"{rng(b2, 'compute_ms', 0)} ms of compute. Use backend='nccl' for the CUDA tensors: the all-reduce "
                      f"runs over NVLink at 200-300 GB/s, overlapped with the backward: ~{rng(b2, 'after', 0)} ms, "
                      f"{rng(b2, 'share.gloo_gpu_collectives', 0)} % removed "
                      f"({band_of17(b2, 'share.gloo_gpu_collectives')[0]}), {rng(b2, 'speedup', 1)}x. The ranks are "
                      f"balanced and the compute is ordinary.")
    m["measure"] = [{"what": "step period per rank", "query": Q17["step"] + " (both ranks)", "expect_ms": r2(b2["step"])},
                    {"what": "NCCL kernels", "query": Q17["nccl"], "expect": "none"},
                    {"what": "copies", "query": Q17["memcpy"],
                     "expect": f"pinned DtoH and HtoD copies of the gradient buckets, {b2['grad_mb'][0]:.0f} MB each way "
                               f"per step and rank"},
                    {"what": "idle stretch", "query": Q17["split"],
                     "expect": f"~{rng(b2, 'c.gloo_allreduce_exposed', 0)} ms idle per step at the end of step_N > "
                               f"backward"}]
    m["new_cause"] = {"name": "gloo_gpu_collectives", "why": "torch.distributed initialized with the Gloo backend for "
                      "CUDA tensors (a CPU-test default, a fallback after an NCCL error): every collective is staged "
                      "through pinned host memory and reduced on the CPUs over TCP, tens to hundreds of times slower than "
                      "NCCL on NVLink and not overlapped; fixed by the NCCL backend for CUDA tensors"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.h200_table)
