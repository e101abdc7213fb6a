#!/usr/bin/env python3
"""First-principles truth for the fifteenth held-out set (heldout15): writes heldout15/manifests/<case>.json from FLOPs,
bytes, call counts and rate bands alone (no capture, no aisp output, no GPU run), with the helpers of ../derive.py.

    python3 workloads/planted/heldout15/derive.py            # write every manifest, print the table
    python3 workloads/planted/heldout15/derive.py --check    # fail if a manifest on disk differs
    python3 workloads/planted/heldout15/derive.py --table    # the table only

Method: as ../derive.py and heldout11-14/derive.py. Each case is a small model of one steady step; every part is FLOPs /
rate, bytes / bandwidth, or calls x a host cost per call; a quantity's band is its min and max over the corners of the
bands it uses. Shares are "time the fix removes from the critical path / steady step period" of the GPU (for the 2-rank
case: of either rank, the ranks being symmetric).

Severity (as heldout11-14): info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical; each planted problem
also carries `severity_legacy` under the bands of the earlier sets (info < 1 % <= low < 5 % <= medium < 15 % <= high <
40 % <= critical), so that both readings are on record.

Made for H200s, like heldout11-14: four one-GPU programs, one of them with a captured fixed variant (a before/after
pair), and one 2-rank DDP program (torchrun --nproc_per_node=2): the set needs an nvidia-h200-x2 host for its multi
phase. Every model gives the host time of a step (Python ops x eager_op_us + view-like ops x view_op_us + backward
nodes x bwd_node_us, plus the per-call costs of the planted mechanism where it has them) beside the GPU time and takes
the larger, so that a GPU-bound case is checked at every corner (host_margin_ms). Two cases are modelled otherwise, by
design: char_lstm, whose planted loop makes the host the pace-setter at most corners (step = max(GPU, host) over the
whole step, the throttle letting the host run a step ahead), and vit_finetune, whose planted offloading synchronizes the
host with the GPU at every saved tensor (its forward is host time + copies + round trips in series).
Lessons of the earlier sets kept in mind: no SDPA call whose shapes change every step (heldout11: per-shape cuDNN graph
builds turned a decode host-bound), shapes fixed in every program; the measured elementwise / layout-copy classes came
out 1.4-2.8x above their bands in heldout14, so the one-GPU plants are sized to stay the largest removable item even if those
tolerated classes run at twice their bands (in the 2-rank case the autocast elementwise class at twice its band would
match the plant by kernel time, though fusing it removes only part of it); host op costs of 30-40 µs measured on this
pool sit inside the 20-70 µs band.
Software assumed: the capture image's recent PyTorch (2.9-2.11) with CUDA 13, cuDNN 9 and NCCL 2.2x, on sm_90.
"""
import math
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
ADAM_B, GB, Q, AMP_B = D.ADAM_B, D.GB, D.Q, D.AMP_B
pct, r2, rng, techniques, uses = D.pct, D.r2, D.rng, D.techniques, D.uses
t_bytes, t_flops, t_link = D.t_bytes, D.t_flops, D.t_link

SET = "heldout15"

# ---------------------------------------------------------------------------------------------------
# Severity bands (heldout11-14's; see the docstring).
BANDS15 = [(1.0, "info"), (3.0, "low"), (10.0, "medium"), (25.0, "high"), (math.inf, "critical")]
SEV_DOC15 = ("info < 1 % <= low < 3 % <= medium < 10 % <= high < 25 % <= critical, of the device's steady step period "
             "(severity_legacy: the earlier sets' info < 1 % <= low < 5 % <= medium < 15 % <= high < 40 % <= critical)")


def band15(p):
    for edge, name in BANDS15:
        if p < edge:
            return name
    return "critical"


def band_of15(b, key):
    lo, hi = b[key]
    return band15((lo + hi) / 2), [band15(lo), band15(hi)]


# ---------------------------------------------------------------------------------------------------
# Rate bands: ../derive.py's, plus these. Units as there: TFLOP/s, TB/s, GB/s, µs, ms; fractions and bytes as named.
NEW_H100 = {
    # copied from heldout2-14 (sources below are theirs)
    "bf16_mid_tflops": (550.0, 800.0),
    "eager_op_us": (20.0, 70.0),
    "view_op_us": (3.0, 10.0),
    "tiny_kernel_us": (2.0, 6.0),
    "bwd_node_us": (10.0, 30.0),
    "ar2_algbw_gbs": (200.0, 300.0),
    "nccl_small_gpu_us": (8.0, 25.0),
    "ddp_hook_us": (2.0, 5.0),
    "sync_rtt_us": (10.0, 40.0),
    "ew_amp_block_b": (140.0, 220.0),
    "ce_fp32_b": (30.0, 42.0),
    "gemv_eff": (0.6, 0.9),
    "attn_short_train_tflops": (80.0, 250.0),
    "conv_stem_tflops": (40.0, 150.0),
    # new here
    "sdpa_fwd_bf16_tflops": (250.0, 550.0),
    "sdpa_fwd_fp32_tflops": (20.0, 80.0),
    "ew_dit_block_b": (56.0, 100.0),
    "gather_eff": (0.5, 0.85),
    "bcast_eff": (0.6, 0.9),
    "reduce_eff": (0.6, 0.9),
    "embbag_eff": (0.35, 0.8),
    "tf32_mid_tflops": (150.0, 350.0),
    "tf32_small_tflops": (60.0, 200.0),
    "lstm_cell_host_us": (35.0, 110.0),
    "cudnn_launch_us": (2.0, 5.0),
    "pack_host_us": (30.0, 100.0),
    "ag2_gbs": (220.0, 360.0),
    "argmax_eff": (0.7, 0.95),
}
NEW_H200 = dict(NEW_H100)
NEW_SOURCES = {
    "bf16_mid_tflops": "bf16 GEMMs with one dimension of 2048 or less: below the 8192^3 rate (732-787 measured) as tiles "
                       "and waves shrink and the epilogue's writes weigh more; an assumption widened down to 550 "
                       "(heldout2-14; heldout13/measured.json: ViT-B GEMMs at ~713; heldout14/measured.json: block GEMMs "
                       "of d 1024 at ~780). Used for every GEMM whose smallest dimension is 513-2048",
    "eager_op_us": "host cost of one eager PyTorch op issued from Python under nsys with cuda+nvtx+osrt tracing: 29-36 µs "
                   "measured (quoted by ../derive.py), ~70 implied by heldout2, ~39 in heldout13/measured.json; band "
                   "20-70 (heldout3-14)",
    "view_op_us": "host time of one view-like op issued from Python (view, transpose, unbind, chunk, unsqueeze, a .to() "
                  "that returns its input) or of an autocast weight cast made inside an op's dispatch: 3-10 µs "
                  "(heldout13-14)",
    "tiny_kernel_us": "GPU time of one tiny kernel (a scalar op, a reduction over a few thousand elements, an elementwise "
                      "op on a few MB) in a chain of dependent kernels, including the launch latency to the next one when "
                      "the host is ahead: 2-6 µs (assumption of heldout7-14)",
    "bwd_node_us": "host time of one backward node in the C++ autograd engine (the node's function, 1-3 kernel launches "
                   "at 4-10 µs under CUPTI, the ready-queue bookkeeping): 10-30 µs (assumption of heldout9-14)",
    "ar2_algbw_gbs": "NCCL ring all-reduce on 2 ranks (algbw = busbw for n = 2), NVLink, NVLS off, 16-270 MB messages: "
                     "torch busbw 206 (16 MiB), 253 (64 MiB), 285 (256 MiB) on 2 H200 (quoted by heldout2/derive.py); "
                     "band 200-300 (heldout3-14; heldout13/measured.json: ~316 GB/s for one 1.2 GB message)",
    "nccl_small_gpu_us": "fixed GPU time of one NCCL collective on 2 H200 (launch, the protocol's handshakes), charged "
                         "once per DDP bucket or tiny collective: 8-25 µs (heldout11-14)",
    "ddp_hook_us": "host time of DDP's autograd hook per parameter (marking it ready in its bucket): 2-5 µs "
                   "(heldout11-14)",
    "sync_rtt_us": "a device-to-host synchronization once the GPU has drained (a blocking copy's cudaStreamSynchronize "
                   "returning, the thread's wake-up): 10-40 µs (heldout11's assumption)",
    "ew_amp_block_b": "bytes per token x d_model per transformer block of the elementwise work around the GEMMs under bf16 "
                      "autocast with an fp32 residual stream, forward and backward (LayerNorms in fp32 and their casts, "
                      "residual adds, GELU on the 4 x d hidden, the head-merge copy, q/k/v gradient stacking): 140-220 "
                      "(heldout12-14; heldout14/measured.json found more, see the docstring)",
    "ce_fp32_b": "bytes per logit of F.cross_entropy under bf16 autocast (autocast runs it in float32): the cast of the "
                 "bf16 logits, log_softmax, nll, and the backward: 30-42 (heldout12-14; heldout14/measured.json: 6.9 ms "
                 "for 824 M logits = ~36 B per logit at 4.3 TB/s)",
    "gemv_eff": "fraction of the HBM rate reached by GEMMs that stream a weight matrix with few rows on the other side "
                "(M = 32-128: decode-like products, the LSTM's per-step GEMMs, the per-block adaLN linear on 32 rows, "
                "the scoring bmm over 100 candidates): 0.6-0.9 (heldout11-14's assumption)",
    "attn_short_train_tflops": "SDPA forward + backward, bf16, head_dim 64, non-causal, 197 tokens per image, counted as "
                               "12*B*S^2*d (forward 4, backward 8): 80-250 (heldout13's band)",
    "conv_stem_tflops": "cuDNN convolutions with 3 input channels (the 16 x 16 stride-16 patch embedding, K = 768 after "
                        "im2col): 40-150 (heldout11-13's stem band; heldout13/measured.json: ~41 TFLOP/s for the ViT-B "
                        "patch convolution plus its NCHW -> NHWC conversion)",
    "sdpa_fwd_bf16_tflops": "F.scaled_dot_product_attention forward only, bf16, head_dim 64, non-causal, 1024 tokens, "
                            "counted as 4*B*S^2*d: FlashAttention-2's sm80 kernels reach ~300-350 on an H100 at this "
                            "head size, cuDNN's sm90 flash kernels ~450-550 (the backend PyTorch picks on sm_90 is one "
                            "of the two); 250-550 (assumption)",
    "sdpa_fwd_fp32_tflops": "the same forward with float32 q, k, v: flash and cuDNN take only fp16 / bf16, so SDPA runs "
                            "PyTorch's memory-efficient (CUTLASS, xformers-derived) kernel, whose float32 instance on "
                            "sm80+ does its two GEMMs with 3xTF32 on the tensor cores (DefaultGemmType<Sm80, float>: "
                            "OpClassTensorOp, OpMultiplyAddFastF32: three TF32 mma.sync per product, no wgmma) in 64 x 64 "
                            "tiles with a float32 online softmax: about a third of an sm80-style bf16 kernel's rate, which "
                            "on an H100 is itself ~150-250; xformers PR 467's A100 table has its float32 kernels 3.8-4.2x "
                            "slower than the float16 ones. If the fallback were the math backend instead (float32 bmm "
                            "with TF32 off, a materialized [576, 1024, 1024] softmax), ~5-6 ms per block = ~28 TFLOP/s, "
                            "inside the band; 20-80 (assumption; the pair measures it)",
    "ew_dit_block_b": "bytes per token x d_model per DiT block of the elementwise work around the GEMMs in bf16 inference "
                      "(two LayerNorms r2 w2, two modulates x * (1 + scale) + shift as mul and add r2 w2 each, the "
                      "head-merge copy of the attention output r2 w2, two gate multiplies r2 w2, two residual adds r2 r2 "
                      "w2, GELU(tanh) on the 4 x d hidden r8 w8): 64 counted; 56-100 (assumption, widened upward after "
                      "heldout14's measured elementwise classes)",
    "gather_eff": "fraction of the HBM rate (read + write) reached by an embedding lookup, index_select of 512-byte "
                  "float32 rows at random from a 128-512 MB table into a contiguous [rows, 128] output (indexSelect / "
                  "vectorized_gather kernels): 0.5-0.85 (assumption)",
    "bcast_eff": "fraction of the HBM rate reached by the mask multiply emb * mask[..., None] on [16384, L, 128] float32 "
                 "(a broadcast operand with a zero stride: TensorIterator's non-vectorized elementwise_kernel with offset "
                 "arithmetic): 0.6-0.9 (assumption; heldout14/measured.json: strided elementwise_kernel copies at ~2.4 "
                 "TB/s = 0.56 of the copy rate on an H200 sits at its edge)",
    "reduce_eff": "fraction of the HBM rate reached by the sum over the middle dimension of a [16384, L, 128] float32 "
                  "tensor (reduce_kernel, outputs vectorized along the contiguous 128): 0.6-0.9 (assumption)",
    "embbag_eff": "fraction of the HBM rate reached by F.embedding_bag's sum kernel reading the same random rows once "
                  "(EmbeddingBag_updateOutputKernel_sum_mean: one thread per (bag, feature) looping over the bag's "
                  "indices with per_sample_weights, coalesced along the 128 features, latency-bound unless occupancy "
                  "hides it) and writing [16384, 128]: 0.35-0.8 (assumption)",
    "tf32_mid_tflops": "float32 GEMMs with TF32 allowed and a small output dimension (M = 16384 rows, N = 128-1024): "
                       "150-350, below the 8192^3 TF32 rate (383 measured) (assumption)",
    "tf32_small_tflops": "TF32 GEMMs with M = 128 rows (the LSTM cell's x W^T and h W^T, their input gradients, and the "
                         "weight gradients with K = 128): 32 output tiles of 128 x 128 for 132 SMs unless cuBLAS splits K; "
                         "60-200 (assumption); each such GEMM is also bounded below by streaming its float32 weight (16.8 "
                         "MB) at gemv_eff of HBM",
    "lstm_cell_host_us": "host time of one nn.LSTMCell call from Python: Module.__call__, LSTMCell.forward's checks and "
                         "tuple handling, _VF.lstm_cell (two t() views, two mm dispatches, _thnn_fused_lstm_cell), three "
                         "kernel launches at 4-10 µs under CUPTI, autograd recording of five nodes: 35-110 µs "
                         "(assumption: between one and two eager ops)",
    "cudnn_launch_us": "host time of one kernel launch issued from C++ inside cuDNN's RNN (per time step and layer a "
                       "recurrent GEMM and an elementwise kernel, forward and backward) under CUPTI: 2-5 µs "
                       "(assumption, below heldout13's launch_cpp_us since no ATen dispatch is involved)",
    "pack_host_us": "host time of one save_on_cpu(pin_memory=True) pack besides the copy itself: the Python hook call, "
                    "torch.empty(pin_memory=True) served by the caching host allocator, copy_'s dispatch, "
                    "cudaMemcpyAsync and the cudaStreamSynchronize call (its wait is the copy and sync_rtt_us): 30-100 "
                    "µs (assumption: one to two eager ops)",
    "ag2_gbs": "NCCL all-gather on 2 H200 (NVLink, NVLS off) of a 3.3 GB float32 tensor per rank: per-rank input bytes / "
               "time, each rank sending its part once over the link; the per-direction rate of a 2-rank all-reduce "
               "(ar2_algbw_gbs: each rank sends the message once in all), ~316 GB/s measured for 1.2 GB "
               "(heldout13/measured.json), up to NVLink 4's ~360 achievable; 220-360 (assumption)",
    "argmax_eff": "fraction of the HBM rate reached by argmax over the last dimension (50304 contiguous bf16 or float32 "
                  "values per row, one block per row, the reduction in registers): 0.7-0.95 (assumption)",
}
RATES_H100 = dict(D.RATES_H100, **NEW_H100)
RATES_H200 = dict(D.RATES_H200, **NEW_H200)
RATE_SOURCES = dict(D.RATE_SOURCES, **NEW_SOURCES)

Q15 = dict(Q)
Q15.update({
    "nvtx_ranges": "sql/nvtx_range_ms.sql: CPU duration of each NVTX range name (count, mean, min, max)",
    "starved": "sql/launch_starved_idle.sql: GPU idle split into gaps whose next kernel had not been launched yet "
               "(the GPU waits for the host) and other gaps, between T0 and T1",
})


def shares(rm, step):
    return {k: pct(v, step) for k, v in rm.items()}


def gemm(r, m, n, k, mult=1.0):
    """mult x 2*m*n*k bf16 FLOPs at the rate for this shape: bf16_tflops when every dimension exceeds 2048, else the
    mid band (no GEMM of this set has a dimension of 512 or less but the ones modelled on their own)."""
    rate = r["bf16_tflops"] if min(m, n, k) > 2048 else r["bf16_mid_tflops"]
    return t_flops(mult * 2.0 * m * n * k, rate)


def block_gemms(r, T, d, mult=1.0):
    """The four GEMMs of a block with a 4x MLP (fused QKV, output projection, fc1, fc2) over T tokens."""
    return (gemm(r, T, d, 3 * d, mult) + gemm(r, T, d, d, mult) + gemm(r, T, d, 4 * d, mult)
            + gemm(r, T, 4 * d, d, mult))


def finish_gpu_host(out, gpu_ms, host_ms):
    out["gpu_ms"] = gpu_ms
    out["host_ms"] = host_ms
    out["host_margin_ms"] = gpu_ms - host_ms
    return out


def step_of(c, gpu, host):
    """The step of a model whose host runs ahead: the larger of GPU and host; the difference is booked as GPU idle."""
    step = max(gpu, host)
    if step > gpu:
        c["gpu_waiting_for_host"] = step - gpu
    return step


BLOCK_OPS_FWD = 15  # Python ops of one pre-LN block's forward: ln1, qkv, view, permute, unbind (or split + views and
# transposes, counted alike), sdpa, transpose, reshape, proj, add, ln2, fc1, gelu, fc2, add (heldout13-14)
BLOCK_CASTS = 4     # autocast's weight casts per block (qkv, proj, fc1, fc2), made inside the linear's dispatch
BLOCK_BWD_NODES = 23  # backward nodes of one block under autocast (heldout13-14)
EVENT_SYNC = "event sync on the previous step (lag 1: never idles the GPU)"


# ---------------------------------------------------------------------------------------------------
# dit_sample: DiT-XL/2-style latent diffusion transformer, bf16 inference, 16 images of 512 px (4 x 64 x 64 latents,
# 1024 tokens) with classifier-free guidance (32 rows), d 1152, 18 heads of 64, 28 blocks with adaLN-Zero; one DDIM step
# per iteration. Planted: q, k, v cast to float32 before SDPA (memory-efficient float32 kernel) unless fixed.
DT = dict(images=16, latent=64, channels=4, patch=2, d=1152, heads=18, blocks=28, classes=1000, steps=14, warmup=3)
DT_BLOCK_HEAVY = 21  # silu, ada linear, norm1, modulate (1 + scale, mul, add), qkv, sdpa, the head-merge reshape (a copy),
# proj, gate mul, add, norm2, modulate (3), fc1, gelu, fc2, gate mul, add
DT_BLOCK_HEAVY_UPCAST = DT_BLOCK_HEAVY + 4  # + q.float(), k.float(), v.float(), o.to(bf16)
DT_BLOCK_VIEWS = 11  # chunk, 6 unsqueezes, view, permute, unbind, transpose (fixed: + o.to(bf16) returning its input)
DT_OTHER_OPS = 37    # cat + cast of the latents, torch.full of the timesteps, the sinusoidal embedding (~6), its cast,
# t_fc1 / silu / t_fc2, the class embedding and the add, patch convolution, position add, final silu / ada / norm /
# modulate (3) / out linear, the unpatchify copy, the sampler (float, chunk's arithmetic, x0 and x updates: ~10), event
# record and wait


def dt_dims():
    B = 2 * DT["images"]
    S = (DT["latent"] // DT["patch"]) ** 2
    return B, S, float(B * S)


def dt_params():
    d, L, C, p, K = DT["d"], DT["blocks"], DT["channels"], DT["patch"], DT["classes"]
    blocks = L * (18 * d * d + 15 * d)
    return float(blocks + C * p * p * d + d + 256 * d + d + d * d + d + (K + 1) * d + 2 * d * d + 2 * d
                 + d * p * p * 2 * C + p * p * 2 * C)


def m_dt(r, fixed=False):
    B, S, T = dt_dims()
    d, L = DT["d"], DT["blocks"]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    attn_flops = L * 4.0 * B * S * S * d
    c = {"block_gemm_bf16": L * block_gemms(r, T, d, 1.0),
         # the per-block adaLN Linear(d, 6d) on 32 rows streams its 15.9 MB of bf16 weights; the final one 5.3 MB
         "adaln_modulation": L * (t_bytes(2.0 * 6 * d * d, hbm * r["gemv_eff"]) + 2 * tiny)
                             + t_bytes(2.0 * 2 * d * d, hbm * r["gemv_eff"]),
         "block_elementwise": t_bytes(L * r["ew_dit_block_b"] * T * d, hbm),
         # patch convolution output (w2), position add (r2 r2 w2), final LayerNorm and modulate (r2 w2 + 2 x r2 w2), the
         # head's input read (r2); timestep / class embedders, the unpatchify copy and the sampler's float32 ops: tiny
         "embed_head_sampler": t_bytes(20.0 * T * d, hbm) + 25 * tiny}
    if fixed:
        c["attention_bf16"] = t_flops(attn_flops, r["sdpa_fwd_bf16_tflops"])
        heavy, views = DT_BLOCK_HEAVY, DT_BLOCK_VIEWS + 1
    else:
        c["attention_fp32_mem_efficient"] = t_flops(attn_flops, r["sdpa_fwd_fp32_tflops"])
        # q, k, v bf16 -> float32 (r2 w4 each) and the output float32 -> bf16 (r4 w2): 24 B per token x d per block
        c["attention_upcast_casts"] = t_bytes(L * 24.0 * T * d, hbm)
        heavy, views = DT_BLOCK_HEAVY_UPCAST, DT_BLOCK_VIEWS
    gpu = sum(c.values())
    host = ((L * heavy + DT_OTHER_OPS) * r["eager_op_us"] + L * views * r["view_op_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "params_m": dt_params() / 1e6, "tokens": T,
                           "attn_tflop": attn_flops / 1e12, "gemm_tflop": L * 24.0 * T * d * d / 1e12}, gpu, host)
    out["gemm_share"] = pct(c["block_gemm_bf16"], step)
    out["ew_share"] = pct(c["block_elementwise"], step)
    if fixed:
        out["attn_ms"] = c["attention_bf16"]
        out["attn_share"] = pct(c["attention_bf16"], step)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["attn_ms"] = c["attention_fp32_mem_efficient"] + c["attention_upcast_casts"]
    out["attn_share"] = pct(out["attn_ms"], step)
    out["cast_gb"] = L * 24.0 * T * d / GB
    fx = m_dt(r, fixed=True)
    rm = {"attention_fp32_upcast": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "after_attn_ms": fx["attn_ms"],
                "attn_slowdown": c["attention_fp32_mem_efficient"] / fx["attn_ms"]})
    return out


# ---------------------------------------------------------------------------------------------------
# rec_serve: two-tower recommender, user side, float32 inference with TF32; 16384 users per batch, masked-mean pooling of
# 512 watched items and 128 search tokens (tables 1 M x 128 and 250 k x 128), MLP 384 -> 1024 -> 512 -> 128, 100
# candidates scored, top 10. Planted: pooling as table(ids) * mask[..., None] summed over L (a [B, L, 128] gather output
# and a second [B, L, 128] product) unless fixed (F.embedding_bag with per_sample_weights).
RS = dict(batch=16384, hist=512, query=128, dim=128, items=1000000, tokens=250000, dense=32, cands=100, topk=10,
          mlp=[1024, 512], steps=30, warmup=3)
RS_OPS = 33       # per field: arange, lt, to (mask); clamp, to (length); embedding, mul, sum; div (9 x 2 = 18); dense
# linear, relu, cat, 3 MLP linears + 2 relus, candidate embedding, bmm, topk, the result write (2), event record and wait
RS_OPS_FIXED = RS_OPS - 4  # embedding_bag in place of embedding, mul and sum (x 2 fields)
RS_VIEWS = 6      # per field the two unsqueezes; the scoring unsqueeze / squeeze
RS_VIEWS_FIXED = RS_VIEWS - 2
RS_SMALL = 20     # small kernels: masks (arange, compare, cast) and lengths (clamp, cast, div) per field, dense linear and
# relu, cat, ReLUs, the top-k, the result copy


def rs_elems():
    B, d = RS["batch"], RS["dim"]
    return float(B * RS["hist"] * d), float(B * RS["query"] * d), float(B * RS["cands"] * d)


def m_rs(r, fixed=False):
    B, d = RS["batch"], RS["dim"]
    Ei, Eq, Ec = rs_elems()
    E = Ei + Eq
    ids = float(B * (RS["hist"] + RS["query"]))
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    mlp_flops = 2.0 * B * (RS["dense"] * d + 3 * d * RS["mlp"][0] + RS["mlp"][0] * RS["mlp"][1] + RS["mlp"][1] * d)
    c = {"candidates_gather_score": t_bytes(8.0 * Ec, hbm * r["gather_eff"]) + t_bytes(4.0 * Ec, hbm * r["gemv_eff"]),
         "mlp_tf32": t_flops(mlp_flops, r["tf32_mid_tflops"]),
         # the [B, L] masks (int64 arange compare, bool, float32: ~10 B per id) and the small kernels
         "masks_small_kernels": t_bytes(10.0 * ids, hbm) + RS_SMALL * tiny}
    if fixed:
        c["pool_embedding_bag"] = t_bytes(4.0 * E + 12.0 * ids, hbm * r["embbag_eff"])  # rows once; ids and weights
        ops, views = RS_OPS_FIXED, RS_VIEWS_FIXED
    else:
        c["pool_gather_materialized"] = t_bytes(8.0 * E + 8.0 * ids, hbm * r["gather_eff"])  # rows read, [B, L, d] written
        c["pool_mask_multiply"] = t_bytes(8.0 * E + 4.0 * ids, hbm * r["bcast_eff"])  # read, write the product
        c["pool_sum_over_history"] = t_bytes(4.0 * E, hbm * r["reduce_eff"])  # read it back, write [B, d]
        ops, views = RS_OPS, RS_VIEWS
    gpu = sum(c.values())
    host = (ops * r["eager_op_us"] + views * r["view_op_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "gathered_gb": 4.0 * E / GB,
                           "tables_gb": 4.0 * (RS["items"] + RS["tokens"]) * d / GB}, gpu, host)
    if fixed:
        out["pool_ms"] = c["pool_embedding_bag"]
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["pool_ms"] = c["pool_gather_materialized"] + c["pool_mask_multiply"] + c["pool_sum_over_history"]
    out["pool_share"] = pct(out["pool_ms"], step)
    out["materialized_gb"] = 16.0 * E / GB  # the gather's writes, the multiply's read and write, the sum's read
    fx = m_rs(r, fixed=True)
    rm = {"embedding_bag_materialized": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"], "after_pool_ms": fx["pool_ms"]})
    return out


# ---------------------------------------------------------------------------------------------------
# char_lstm: byte-level LM, embeddings 256 x 512, 2 LSTM layers of 1024, head 1024 -> 256, float32 with TF32, clip + fused
# Adam; 128 sequences x 128 time steps per step (truncated BPTT). Planted: the recurrence as a Python loop of nn.LSTMCell
# calls (256 cells per step) unless fixed (nn.LSTM, cuDNN).
CL = dict(batch=128, seq=128, emb=512, hidden=1024, layers=2, vocab=256, steps=14, warmup=3)
CL_CELL_NODES = 7    # backward per cell: ThnnFusedLstmCellBackward, 2 MmBackward, 2 TBackward, and the engine's two
# accumulations of the weights' gradients over the time steps (an add each, counted like a node)
CL_OTHER_OPS = 22    # embedding, unbind, 2 state unbinds, stack of outputs, head, 2 state stacks, reshape + cross-entropy,
# backward call, clip_grad_norm_ (~8), fused Adam (~2), zero_grad, 2 detaches, loss copy, event record and wait
CL_OTHER_VIEWS = 8
CL_OTHER_NODES = 10  # embedding, unbind, stack, the head (view, addmm, t), cross-entropy (log_softmax, nll, views)
CL_FIX_OPS = 18      # the same without the loop: embedding, nn.LSTM (flat weights, _cudnn_rnn), head, loss, backward,
# clip, Adam, zero_grad, detaches, loss copy, event record and wait
CL_FIX_NODES = 8
CL_FIX_KERNELS_PER_T = 4  # cuDNN, per time step and layer: forward recurrent GEMM + gate kernel, backward likewise


def cl_params():
    V, E, H, L = CL["vocab"], CL["emb"], CL["hidden"], CL["layers"]
    cells = sum(4 * H * ((E if i == 0 else H) + H) + 8 * H for i in range(L))
    return float(V * E + cells + H * V + V)


def gemm_w(r, m, g, k):
    """A TF32 GEMM with m rows against a g x k float32 weight (or producing a g x k weight gradient): its FLOPs at
    tf32_small_tflops, or its bytes (the weight, the rows in and out) at gemv_eff of HBM, whichever is longer."""
    return max(t_flops(2.0 * m * g * k, r["tf32_small_tflops"]),
               t_bytes(4.0 * g * k + 4.0 * m * (g + k), r["hbm_tbs"] * r["gemv_eff"]))


def m_cl(r, fixed=False):
    B, T, E, H, L, V = (CL[k] for k in ("batch", "seq", "emb", "hidden", "layers", "vocab"))
    G = 4 * H
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P = cl_params()
    ins = [E if i == 0 else H for i in range(L)]
    # head (3 GEMMs M = B*T, N = 256, K = 1024), cross-entropy over B*T x 256, the stack / unbind copies of the [B, T, H]
    # outputs and [B, T, E] inputs, clip (12 B per parameter) and fused Adam (28 B), ~30 small kernels
    other = (t_flops(3 * 2.0 * B * T * H * V, r["tf32_tflops"])
             + t_bytes(16.0 * B * T * (H + E) + 42.0 * B * T * V + 40.0 * P, hbm) + 30 * tiny)
    c = {"head_loss_optimizer": other}
    if fixed:
        big = sum(t_flops(2.0 * T * B * G * (3 * I + H), r["tf32_tflops"]) for I in ins)  # input proj., dgrad, wgrads
        c["cudnn_lstm_batched_gemms"] = big
        c["cudnn_lstm_recurrence"] = L * T * (2 * gemm_w(r, B, G, H) + 2 * tiny)
        gpu = sum(c.values())
        launches = L * T * CL_FIX_KERNELS_PER_T + 6 * L
        host = ((CL_FIX_OPS * r["eager_op_us"] + CL_OTHER_VIEWS * r["view_op_us"] + CL_FIX_NODES * r["bwd_node_us"]
                 + launches * r["cudnn_launch_us"]) / 1e3)
        step = step_of(c, gpu, host)
        out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "launches": launches}, gpu, host)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    fwd = sum(T * (gemm_w(r, B, G, I) + gemm_w(r, B, G, H) + tiny) for I in ins)
    bwd = sum(T * (2 * gemm_w(r, B, G, I) + 2 * gemm_w(r, B, G, H) + 4 * tiny) for I in ins)
    acc = sum((T - 1) * t_bytes(12.0 * G * (I + H), hbm) for I in ins)  # .grad contributions summed over time
    c["cells_forward"] = fwd
    c["cells_backward"] = bwd
    c["weight_grad_accumulation"] = acc
    gpu = sum(c.values())
    cells = L * T
    host_cells = cells * (r["lstm_cell_host_us"] + CL_CELL_NODES * r["bwd_node_us"]) / 1e3
    host = host_cells + (CL_OTHER_OPS * r["eager_op_us"] + CL_OTHER_VIEWS * r["view_op_us"]
                         + CL_OTHER_NODES * r["bwd_node_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "cells": cells, "host_cells_ms": host_cells,
                           "cell_gpu_us": 1e3 * (fwd + bwd + acc) / cells,
                           "cell_host_us": 1e3 * host_cells / cells}, gpu, host)
    out["idle_share"] = pct(step - gpu, step)
    fx = m_cl(r, fixed=True)
    rm = {"rnn_cell_loop": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# vit_finetune: ViT-B/16 fine-tuning, 64 images of 224 px (197 tokens), d 768, 12 blocks, bf16 autocast, fused AdamW.
# Planted: forward and loss under torch.autograd.graph.save_on_cpu(pin_memory=True): every saved tensor copied to pinned
# host memory in the forward (a blocking D2H copy each) and back in the backward (async H2D on the compute stream),
# unless fixed.
VT = dict(batch=64, image=224, patch=16, d=768, heads=12, blocks=12, classes=1000, steps=14, warmup=3)
VT_SAVED_BLOCK = 26  # tensors autograd saves per block: ln1 (input, mean, rstd, weight, bias), qkv addmm (bf16 input, bf16
# weight), SDPA (q, k, v, output, log-sum-exp, philox seed and offset), proj addmm (2), ln2 (5), fc1 addmm (2), GELU
# (input), fc2 addmm (2)
VT_SAVED_OTHER = 12  # patch convolution (bf16 input, weight), final LayerNorm (5), head addmm (2), log_softmax / nll (3)
VT_BLOCK_ACT_B = 38.0  # bytes per token x d saved per block: ln1 input fp32 4, qkv input 2, q k v 6, output 2, proj input
# 2, ln2 input fp32 4, fc1 input 2, GELU input 8, fc2 input 8
VT_OTHER_OPS = 22   # conv, flatten, transpose, expand, cat, position add, final norm, select, head, cross-entropy, autocast
# enter / exit, the offload context enter / exit, backward call, fused AdamW (~3), zero_grad, loss copy, event record
# and wait
VT_OTHER_NODES = 12


def vt_dims():
    B = VT["batch"]
    S = (VT["image"] // VT["patch"]) ** 2 + 1
    return B, S, float(B * S)


def vt_params():
    d, L, K, p = VT["d"], VT["blocks"], VT["classes"], VT["patch"]
    S = vt_dims()[1]
    return float(3 * p * p * d + d + d + S * d + L * (12 * d * d + 13 * d) + 2 * d + d * K + K)


def vt_saved():
    """(tensors, bytes) autograd saves per step."""
    B, S, T = vt_dims()
    d, L, K, H = VT["d"], VT["blocks"], VT["classes"], VT["heads"]
    img = float(B * 3 * VT["image"] ** 2)
    per_block = VT_BLOCK_ACT_B * T * d + 2.0 * 12 * d * d + 16.0 * T + 4.0 * T * H + 16.0 * d
    other = 2.0 * img + 2.0 * 3 * VT["patch"] ** 2 * d + 4.0 * T * d + 8.0 * T + 8.0 * d + 2.0 * B * d + 2.0 * d * K \
        + 8.0 * B * K
    return L * VT_SAVED_BLOCK + VT_SAVED_OTHER, L * per_block + other


def m_vt(r, fixed=False):
    B, S, T = vt_dims()
    d, L = VT["d"], VT["blocks"]
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P = vt_params()
    Np = float(B * (S - 1))
    g_all = L * block_gemms(r, T, d, 3.0)
    a_all = t_flops(L * 12.0 * B * S * S * d, r["attn_short_train_tflops"])
    e_all = t_bytes(L * r["ew_amp_block_b"] * T * d, hbm)
    conv = (t_flops(2 * 2.0 * Np * 768 * d, r["conv_stem_tflops"])  # forward and weight gradient (no input gradient)
            + t_bytes(10.0 * B * 3 * VT["image"] ** 2, hbm))  # the input's bf16 cast and NCHW -> NHWC conversion
    head = t_bytes(20.0 * T * d, hbm) + 8 * tiny  # final LayerNorm forward / backward; head and loss are tiny
    casts = t_bytes(AMP_B * P, hbm)
    adam = t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny
    fwd_gpu = g_all / 3 + a_all / 3 + 0.4 * e_all + conv / 2 + head / 2 + casts / 2
    bwd_gpu = 2 * g_all / 3 + 2 * a_all / 3 + 0.6 * e_all + conv / 2 + head / 2 + casts / 2
    host_fwd = ((L * BLOCK_OPS_FWD + VT_OTHER_OPS) * r["eager_op_us"] + L * BLOCK_CASTS * r["view_op_us"]) / 1e3
    host_bwd_nodes = (L * BLOCK_BWD_NODES + VT_OTHER_NODES) * r["bwd_node_us"] / 1e3
    n_saved, saved_b = vt_saved()
    base_out = {"params_m": P / 1e6, "tokens": T, "gemm_ms": g_all, "attention_ms": a_all, "elementwise_ms": e_all,
                "saved_tensors": float(n_saved), "saved_gb": saved_b / GB}
    if fixed:
        c = {"forward_compute": fwd_gpu, "backward_compute": bwd_gpu, "adamw_fused_fp32": adam}
        gpu = sum(c.values())
        host = host_fwd + host_bwd_nodes
        step = step_of(c, gpu, host)
        out = finish_gpu_host(dict(base_out, c=c, step=step), gpu, host)
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    d2h = t_link(saved_b, r["d2h_pinned_gbs"])
    h2d = t_link(saved_b, r["h2d_pinned_gbs"])
    round_trips = n_saved * (r["pack_host_us"] + r["sync_rtt_us"]) / 1e3
    # forward: every saved tensor is a blocking copy, so the host and the GPU take turns: the forward's ops (host issue or
    # GPU, the longer), then per saved tensor the pack's host work and the sync's round trip, and the copies themselves
    fwd_exec = max(host_fwd, fwd_gpu)
    # backward: each unpack is an async pinned H2D copy queued on the compute stream before the node that needs it; the
    # host issues nodes and unpacks (an op each) ahead of the GPU unless it is slower than copies + compute
    host_bwd = host_bwd_nodes + n_saved * r["eager_op_us"] / 1e3
    bwd_time = max(bwd_gpu + h2d, host_bwd)
    c = {"forward_compute_or_issue": fwd_exec, "offload_d2h_copies": d2h, "offload_pack_round_trips": round_trips,
         "backward_compute": bwd_gpu, "offload_h2d_copies": h2d, "adamw_fused_fp32": adam}
    if host_bwd > bwd_gpu + h2d:
        c["backward_host_excess"] = host_bwd - bwd_gpu - h2d
    step = sum(c.values())
    gpu = fwd_gpu + bwd_gpu + adam
    host = host_fwd + round_trips + host_bwd
    out = finish_gpu_host(dict(base_out, c=c, step=step), gpu, host)
    out["copies_ms"] = d2h + h2d
    out["copies_share"] = pct(d2h + h2d, step)
    out["offload_ms"] = d2h + h2d + round_trips
    out["gpu_busy_share"] = pct(gpu, step)
    fx = m_vt(r, fixed=True)
    rm = {"activation_offload": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"]})
    return out


# ---------------------------------------------------------------------------------------------------
# code_ddp: 2 ranks, DDP, GPT-2-style code LM (d 1024, 16 blocks, 16 heads of 64, vocabulary 50304, tied head), 16 x
# 1024 tokens per rank, bf16 autocast, clip + fused AdamW. Planted: after the optimizer, the logits [16, 1024, 50304] cast
# to float32 and the targets all-gathered (all_gather_into_tensor) for a global accuracy computed on every rank, unless
# fixed (a local count all-reduced).
CD = dict(batch=16, seq=1024, vocab=50304, d=1024, heads=16, blocks=16, ranks=2, steps=20, warmup=3)
CD_OTHER_OPS = 34    # DDP's forward prologue (~5), embedding, position slice, add, final norm, tied head, view, reshape,
# cross-entropy, autocast enter / exit, backward call, clip_grad_norm_ (~8), fused AdamW (~3), zero_grad, loss copy,
# event record and wait, the history write
CD_OTHER_VIEWS = 6   # the id / target slices, views of the logits and targets
CD_OTHER_NODES = 12  # embedding, position slice and add, final norm, head (mm + the weight cast), view, cross-entropy
# (log_softmax, nll) and its casts
CD_METRIC_OPS = 11   # planted: detach, float, 2 x (empty, contiguous, all_gather_into_tensor), argmax, eq, float, mean
CD_METRIC_OPS_FIXED = 7  # detach, argmax, eq, float, sum, all_reduce, division


def cd_params():
    V, S, d, L = CD["vocab"], CD["seq"], CD["d"], CD["blocks"]
    return float(V * d + S * d + L * (12 * d * d + 13 * d) + 2 * d), float(V * d + S * d)


def cd_tensors():
    return 4 + 12 * CD["blocks"]


def m_cd(r, fixed=False):
    B, S, V, d, L, W = (CD[k] for k in ("batch", "seq", "vocab", "d", "blocks", "ranks"))
    T = float(B * S)
    hbm, tiny = r["hbm_tbs"], r["tiny_kernel_us"] / 1e3
    P, P_last = cd_params()
    lat = r["nccl_small_gpu_us"] / 1e3
    c = {"block_gemm_bf16": L * block_gemms(r, T, d, 3.0),
         "attention_causal": t_flops(L * 7.0 * B * S * S * d, r["attn_tflops"]),
         "block_elementwise": t_bytes(L * r["ew_amp_block_b"] * T * d, hbm),
         "lm_head_gemm": gemm(r, T, d, V, 3.0),
         "cross_entropy_fp32": t_bytes(r["ce_fp32_b"] * T * V, hbm) + 4 * tiny,
         # forward: token gather (r4 w4), position add (r4 r4 w4); backward: the position gradient, the token rows summed
         # into a zero-filled [V, d] gradient and added to the tied head's weight gradient (as heldout14's gpt_pretrain)
         "embeddings": t_bytes(32.0 * T * d + 16.0 * V * d, hbm) + 8 * tiny,
         "autocast_weight_casts": t_bytes(AMP_B * P, hbm),
         "ddp_bucket_copies": t_bytes(16.0 * P, hbm),
         # DDP's buckets overlap the backward but the last: the tied embedding (its gradient is complete only after the
         # embedding's backward, at the very end) and the positions, ~157 MB, all-reduced after the backward
         "ddp_allreduce_exposed": t_link(4.0 * P_last, r["ar2_algbw_gbs"]) + 2 * lat,
         "clip_grad_norm": t_bytes(12.0 * P, hbm) + 6 * tiny,
         "adamw_fused_fp32": t_bytes(ADAM_B[4] * P, hbm) + 4 * tiny}
    train_gpu = sum(c.values())
    if fixed:
        c["metrics_local_count"] = t_bytes(2.0 * T * V, hbm * r["argmax_eff"]) + 4 * tiny + lat
        mops = CD_METRIC_OPS_FIXED
    else:
        c["metrics_logits_fp32_cast"] = t_bytes(6.0 * T * V, hbm)  # r2 w4
        c["metrics_all_gather_logits"] = t_link(4.0 * T * V, r["ag2_gbs"]) + lat
        c["metrics_all_gather_targets"] = t_link(8.0 * T, r["ag2_gbs"]) + lat
        c["metrics_argmax_gathered"] = t_bytes(4.0 * W * T * V, hbm * r["argmax_eff"]) + 3 * tiny
        mops = CD_METRIC_OPS
    gpu = sum(c.values())
    host = ((L * BLOCK_OPS_FWD + CD_OTHER_OPS + mops) * r["eager_op_us"]
            + (L * BLOCK_CASTS + CD_OTHER_VIEWS) * r["view_op_us"]
            + (L * BLOCK_BWD_NODES + CD_OTHER_NODES) * r["bwd_node_us"] + cd_tensors() * r["ddp_hook_us"]) / 1e3
    step = step_of(c, gpu, host)
    out = finish_gpu_host({"c": c, "step": step, "params_m": P / 1e6, "train_gpu_ms": train_gpu,
                           "logits_gb": 4.0 * T * V / GB, "gathered_gb": 4.0 * W * T * V / GB,
                           "grad_gb": 4.0 * P / GB}, gpu, host)
    out["elementwise_share"] = pct(c["block_elementwise"], step)
    if fixed:
        out.update({"rm": {}, "share": {}, "after": None})
        return out
    out["metrics_ms"] = (c["metrics_logits_fp32_cast"] + c["metrics_all_gather_logits"]
                         + c["metrics_all_gather_targets"] + c["metrics_argmax_gathered"])
    out["metrics_share"] = pct(out["metrics_ms"], step)
    fx = m_cd(r, fixed=True)
    rm = {"gather_full_outputs": step - fx["step"]}
    out.update({"rm": rm, "share": shares(rm, step), "after": fx["step"], "after_gpu_ms": fx["gpu_ms"],
                "after_host_ms": fx["host_ms"], "speedup": step / fx["step"],
                "after_metrics_ms": fx["c"]["metrics_local_count"]})
    return out


def ev(fn):
    b, keys = D.evaluate(fn, RATES_H100)
    b2, _ = D.evaluate(fn, RATES_H200)
    return b, b2, keys


# ---------------------------------------------------------------------------------------------------
# Manifests.
def base(name, workload, variant, args, nvtx=True, est=45, steps=25, warmup=3, ranks=1):
    return D.base(name, f"heldout15/{workload}", variant, SET, args, ranks=ranks, nvtx=nvtx, est=est, steps=steps,
                  warmup=warmup)


def planted15(cause, where, fix, b, key_rm, key_share, derivation, accept, b2):
    sev, sev_rng = band_of15(b2, key_share)
    return {"cause": cause, "accept_causes": accept, "where": where, "fix": fix, "top": True,
            "removed_ms": {"h100": r2(b[key_rm]), "h200": r2(b2[key_rm])},
            "share_pct": {"h100": r2(b[key_share]), "h200": r2(b2[key_share])},
            "severity": sev, "severity_range": sev_rng,
            "severity_legacy": D.band_of(b2, key_share)[0], "severity_legacy_range": D.band_of(b2, key_share)[1],
            "derivation": derivation}


def finish(m, b, b2, keys, after=True, fixed_case=None):
    m["severity_bands"] = SEV_DOC15
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
    "dit_sample": "~740 per denoising step: per block the adaLN GEMM on 32 rows, 2 LayerNorms, modulate / gate / residual "
                  "elementwise kernels, the QKV GEMM, three bf16 -> float32 casts of q, k, v, one memory-efficient "
                  "attention kernel in float32 (fmha_cutlassF_f32_aligned_64x64_rf_sm80 or similar, not the flash / "
                  "cuDNN bf16 kernels), a float32 -> bf16 cast of its output, the head-merge copy, the output projection, "
                  "the MLP's 2 GEMMs and GELU; then the final layer, the unpatchify copy and ~10 small float32 sampler "
                  "kernels",
    "dit_sample.fixed": "~630 per step: the same without the 4 casts per block, the attention on the flash or cuDNN bf16 "
                        "kernels (pytorch_flash::flash_fwd_kernel or cudnn_generated_fort_native_sdpa_sm90_flash_fprop)",
    "rec_serve": "per batch ~25, no NVTX: per pooled field an embedding gather writing [16384, L, 128] float32 (L = 512 "
                 "and 128), a broadcast multiply by the mask writing a second such tensor, a sum over L (reduce_kernel), "
                 "mask construction and a division; the candidates' gather [16384, 100, 128], the dense and tower GEMMs "
                 "(TF32), the scoring bmm, the top-k and the result copy",
    "rec_serve.fixed": "per batch ~20: per field one embedding_bag kernel (EmbeddingBag_updateOutputKernel_sum_mean) in "
                       "place of the gather, multiply and sum",
    "char_lstm": "~3000 per step: per time step and layer (256 cells) 2 small TF32 GEMMs (M = 128) and the fused LSTM "
                 "cell kernel forward; in the backward per cell the fused cell's backward and its bias reduction, 4 "
                 "small GEMMs (input and weight gradients) and the adds accumulating the weights' gradients over the time "
                 "steps; the head GEMMs, the cross-entropy, clip_grad_norm_'s foreach kernels and fused Adam",
    "char_lstm.fixed": "~1100 per step, most launched from C++ inside cuDNN: per layer one input-projection GEMM over all "
                       "128 time steps, per time step a recurrent GEMM and a gate kernel forward and backward, the weight "
                       "gradients as one GEMM per matrix; the head, loss, clipping and Adam as before",
    "vit_finetune": "~800 kernels and ~330 device-to-host copies per step: in step_N > forward each block's LayerNorm, "
                    "GEMMs, SDPA and GELU kernels interleaved with a blocking DtoH memcpy to pinned memory (and its "
                    "cudaStreamSynchronize) for every tensor autograd saves, 26 per block (a few bytes to 77 MB each); in step_N > "
                    "backward an HtoD memcpy from pinned memory before each node that needs them (~330, 4.7 GB), then "
                    "the backward kernels; fused AdamW",
    "vit_finetune.fixed": "~800 kernels per step, no memcpy: the ViT-B forward and backward (GEMMs, SDPA over 197 "
                          "tokens, LayerNorm / GELU / residual kernels) and fused AdamW",
    "code_ddp": "per rank per step ~900: per block forward 2 LayerNorms (fp32), 4 GEMMs, one causal SDPA, GELU, casts, "
                "adds; the backward about twice that; the tied head's 3 GEMMs and the float32 cross-entropy over "
                "[16384, 50304]; DDP's bucket all-reduces on NCCL's stream during the backward and the tied "
                "embedding's bucket after it; clip and fused AdamW; then step_N > metrics: a float32 cast of the "
                "logits, 2 ncclDevKernel_AllGather (3.3 GB of float32 logits per rank, and the targets) and an argmax "
                "over the gathered [32, 1024, 50304]",
    "code_ddp.fixed": "per rank the same, step_N > metrics as an argmax over the local logits, a compare and sum and one "
                      "tiny all-reduce",
}


def build():
    out = {}

    # ---- dit_sample (attention_fp32_upcast) and dit_sample.fixed ------------------------------------------------------
    Bt, St, _ = dt_dims()
    dt_, Ht, Lt = DT["d"], DT["heads"], DT["blocks"]
    args = ["--images", DT["images"], "--latent", DT["latent"], "--channels", DT["channels"], "--patch", DT["patch"],
            "--d-model", dt_, "--heads", Ht, "--blocks", Lt, "--classes", DT["classes"]]
    b, b2, keys = ev(m_dt)
    bf, bf2, keys_f = ev(lambda r: m_dt(r, fixed=True))
    m = base("dit_sample", "dit_sample.py", "planted", args, steps=DT["steps"], warmup=DT["warmup"], est=45)
    m["uses"] = uses("bf16 weights, inference", "none (inference, torch.inference_mode)", attention=True,
                     sequences=f"{DT['images']} images of 512 px as {St} latent tokens each, {Bt} rows with classifier-free "
                               f"guidance (fixed shapes)", host_sync=EVENT_SYNC)
    m["uses"]["attention"] = (f"F.scaled_dot_product_attention, non-causal, {Ht} heads of {dt_ // Ht}, {St} tokens, with "
                              f"q, k, v cast to float32 first (upcast_attention from an SD-2.x config)")
    m["techniques"] = techniques(
        "run the attention in the model's dtype: drop the float32 upcast of q, k and v (upcast_attention=False), so "
        "F.scaled_dot_product_attention takes its flash / cuDNN bf16 tensor-core kernels (they accumulate in float32 "
        "internally, which is the stability the upcast was meant to buy)",
        ["CUDA graphs / launch overhead (GPU-bound)", "FP8 / quantizing the GEMMs as the top fix",
         "a fused or flash attention library as such (SDPA already is one; its input dtype decides the kernel)",
         "TF32 settings (torch.backends.cuda.matmul.allow_tf32) as the fix (the attention kernel is not a cuBLAS GEMM)",
         "fewer sampling steps / a distilled sampler as the fix", "a smaller batch", "torch.compile as the top fix",
         "data loading (latents on the GPU)"])
    m["planted"] = [planted15(
        "attention_fp32_upcast", {"device": "GPU 0", "region": f"every block of every denoising step, step_N > forward: "
                                  f"three bf16 -> float32 casts of q, k, v ([{Bt}, {Ht}, {St}, {dt_ // Ht}] each), one "
                                  f"float32 memory-efficient attention kernel and the float32 -> bf16 cast of its output, "
                                  f"between the QKV and output projection GEMMs"},
        "attention in bf16, no upcast (--fixed, captured as dit_sample.fixed)", b, "rm.attention_fp32_upcast",
        "share.attention_fp32_upcast",
        f"{b2['params_m'][0]:.0f} M bf16 parameters, {Bt} rows x {St} tokens per step. Per step the blocks' GEMMs are "
        f"{b2['gemm_tflop'][0]:.1f} TFLOP ({rng(b2, 'c.block_gemm_bf16')} ms at 550-800 TFLOP/s), their elementwise work "
        f"{rng(b2, 'c.block_elementwise')} ms (56-100 B per token x d per block at HBM speed on an H200), and the attention "
        f"{b2['attn_tflop'][0]:.2f} TFLOP (4*B*S^2*d). In bf16 SDPA runs it on flash / cuDNN kernels at 250-550 TFLOP/s: "
        f"{rng(bf2, 'attn_ms')} ms. With q, k, v upcast to float32 neither of those applies and the memory-efficient "
        f"CUTLASS kernel runs in float32 (3xTF32 mma.sync, 64 x 64 tiles) at 20-80 TFLOP/s: "
        f"{rng(b2, 'c.attention_fp32_mem_efficient')} ms, plus the casts ({b2['cast_gb'][0]:.1f} GB, "
        f"{rng(b2, 'c.attention_upcast_casts')} ms). Step {rng(b2, 'step')} ms (GPU-bound: host {rng(b2, 'host_ms')} ms); "
        f"in bf16 {rng(b2, 'after')} ms (host {rng(bf2, 'host_ms')} ms): removed {rng(b2, 'rm.attention_fp32_upcast')} ms "
        f"= {rng(b2, 'share.attention_fp32_upcast', 1)} % (H100 {rng(b, 'share.attention_fp32_upcast', 1)} %), "
        f"{rng(b2, 'speedup')}x. The band is wide because the float32 kernel's rate is an assumption; the pair measures it. "
        f"New cause name: attention_fp32_upcast.",
        ["attention_fp32_upcast", "attention_fp32", "fp32_attention", "upcast_attention", "sdpa_fp32_fallback",
         "fp32_gemm_simt"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / modulate / gate / GELU / residual kernels of the blocks (bf16, memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "medium"},
                      {"what": "the per-block adaLN GEMMs on 32 rows (weight-streaming, tiny)", "cause": "small_batch",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        "step_N > forward / sampler, GPU-bound (the host a step ahead, no synchronization but the event wait)",
        f"in each of the {Lt} blocks, between the QKV and output projection GEMMs: 3 elementwise casts to float32, one "
        f"attention kernel of the memory-efficient family in float32 (fmha_cutlassF_f32_* / "
        f"mem_efficient ... f32), a cast back to bf16; {rng(b2, 'c.attention_fp32_mem_efficient', 0)} ms of attention per "
        f"step against {rng(b2, 'c.block_gemm_bf16', 0)} ms for all the GEMMs",
        "no flash / cuDNN attention kernel in the before run; in the after run the same place holds one bf16 flash or "
        "cuDNN kernel per block and no casts"]
    m["must_not"] = [
        "the GEMMs / projections as the cause, or FP8 / quantization as the top fix",
        "CUDA graphs / launch overhead (GPU-bound)", "a host synchronization or a host-bound step",
        "an attention mask or the head size as what rules out flash (no mask, head_dim 64: only the dtype does)",
        "the attention as materializing its score matrix (it is a fused kernel, in float32)",
        "TF32 settings as the fix", "fewer sampling steps or a smaller batch as the fix",
        "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Here are two profiles of our class-conditional image generator on one H200 (a DiT-XL/2-style "
                     f"latent diffusion transformer in bf16: {Lt} blocks of width {dt_}, {DT['images']} images of 512 px "
                     f"per batch with classifier-free guidance, a DDIM sampler), before and after a one-line change to the "
                     f"model's configuration. How much did the change buy per denoising step, where did the time go "
                     f"before, and what bounds a step now?")
    m["diagnosis"] = (f"Before, the attention ran in float32: the attention module inherited upcast_attention from an "
                      f"SD-2.x config and cast q, k and v to float32 before F.scaled_dot_product_attention, so SDPA could "
                      f"not use its flash / cuDNN bf16 kernels and ran the memory-efficient CUTLASS kernel in float32 "
                      f"(3xTF32, sm80-style), plus 4 casts per block: {rng(b2, 'attn_ms', 0)} ms of a "
                      f"{rng(b2, 'step', 0)} ms step on the H200 (~{rng(b2, 'attn_share', 0)} %), for "
                      f"{b2['attn_tflop'][0]:.1f} TFLOP that bf16 kernels do in {rng(bf2, 'attn_ms', 0)} ms. After: the "
                      f"attention in bf16 (the kernels accumulate in float32 anyway): a step {rng(b2, 'after', 0)} ms, "
                      f"{rng(b2, 'share.attention_fp32_upcast', 0)} % removed "
                      f"({band_of15(b2, 'share.attention_fp32_upcast')[0]}), {rng(b2, 'speedup', 1)}x. A step is now "
                      f"GPU-bound on the GEMMs (~{rng(bf2, 'gemm_share', 0)} %), then the memory-bound modulate / gate / "
                      f"LayerNorm / GELU kernels ({rng(bf2, 'c.block_elementwise', 0)} ms) and the bf16 attention "
                      f"({rng(bf2, 'attn_ms', 1)} ms); nothing planted is left.")
    m["measure"] = [{"what": "step period", "query": Q15["step"], "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q15["kernels"],
                     "expect": f"a float32 memory-efficient attention kernel {Lt} times per step, "
                               f"{rng(b2, 'c.attention_fp32_mem_efficient', 0)} ms per step, the largest class; "
                               f"{3 * Lt} + {Lt} cast kernels around it"}]
    m["new_cause"] = {"name": "attention_fp32_upcast", "why": "attention computed in float32 in a half-precision model (q, "
                      "k, v upcast 'for stability', an upcast_attention / attention_softmax_in_fp32 option, autocast "
                      "disabled around the attention): the fused flash / cuDNN kernels take only fp16 / bf16, so SDPA "
                      "falls back to a float32 kernel several times slower (and casts its inputs and output); fixed by "
                      "running the attention in the model's dtype (the fused kernels accumulate in float32)"}
    out[m["case"]] = finish(m, b, b2, keys, fixed_case="dit_sample.fixed")

    b, b2, keys = bf, bf2, keys_f
    m = base("dit_sample.fixed", "dit_sample.py", "fixed", args + ["--fixed"], steps=DT["steps"], warmup=DT["warmup"],
             est=35)
    m["uses"] = uses("bf16 weights, inference", "none (inference, torch.inference_mode)", attention=True,
                     sequences=f"{DT['images']} images of 512 px as {St} latent tokens each, {Bt} rows with classifier-free "
                               f"guidance (fixed shapes)", host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, non-causal, {Ht} heads of {dt_ // Ht}, {St} tokens, bf16"
    m["techniques"] = techniques(
        "nothing planted is left: a step is the GEMMs, then the memory-bound modulate / gate / LayerNorm / GELU kernels "
        "and the bf16 attention; the next gains would come from fusing the adaLN elementwise work or from FP8 GEMMs, "
        "each modest",
        ["the attention dtype (done)", "CUDA graphs / launch overhead (GPU-bound)", "flash attention (already)",
         "data loading (latents on the GPU)"])
    m["planted"] = []
    m["tolerated"] = [{"what": "LayerNorm / modulate / gate / GELU / residual kernels (bf16, memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "high"},
                      {"what": "the per-block adaLN GEMMs on 32 rows", "cause": "small_batch", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "one bf16 flash or cuDNN attention kernel per block, no float32 casts around it",
        f"GEMMs ~{rng(b2, 'gemm_share', 0)} % of the step, GPU-bound, no host synchronization but the event wait"]
    m["must_not"] = ["the attention as float32 or slow", "a host-bound or launch-bound step",
                     "a critical problem left"]
    m["expect_quiet"] = False
    m["question"] = "After the change, is anything still holding a denoising step back?"
    m["diagnosis"] = (f"No planted problem is left: {rng(b2, 'step', 1)} ms per step on the H200, GPU-bound (host "
                      f"{rng(b2, 'host_ms', 1)} ms), the GEMMs ~{rng(b2, 'gemm_share', 0)} % of it, the memory-bound "
                      f"adaLN / LayerNorm / GELU / residual kernels ({rng(b2, 'c.block_elementwise', 1)} ms) and the bf16 "
                      f"attention ({rng(b2, 'c.attention_bf16', 1)} ms); fusing the elementwise work is the next, "
                      f"modest, gain.")
    m["measure"] = [{"what": "step period", "query": Q15["step"], "expect_ms": r2(b2["step"])}]
    out[m["case"]] = finish(m, b, b2, keys, after=False)

    # ---- rec_serve (embedding_bag_materialized; no NVTX) ---------------------------------------------------------------
    Br, Lr, Lq, dr, Kr = RS["batch"], RS["hist"], RS["query"], RS["dim"], RS["cands"]
    args = ["--batch", Br, "--hist", Lr, "--query", Lq, "--dim", dr, "--items", RS["items"], "--tokens", RS["tokens"],
            "--dense", RS["dense"], "--cands", Kr, "--topk", RS["topk"]]
    b, b2, keys = ev(m_rs)
    bf2 = ev(lambda r: m_rs(r, fixed=True))[1]
    m = base("rec_serve", "rec_serve.py", "planted", args, nvtx=False, steps=RS["steps"], warmup=RS["warmup"], est=35)
    m["uses"] = uses("float32 weights, TF32 matmuls, inference", "none (inference, torch.inference_mode)", tf32=True,
                     sequences=f"id histories padded to {Lr} items ({Lr // 4}-{Lr} valid) and {Lq} tokens ({Lq // 4}-{Lq} "
                               f"valid) per user, fixed shapes", host_sync=EVENT_SYNC)
    m["uses"]["embeddings"] = (f"nn.Embedding tables {RS['items']:,} x {dr} (items) and {RS['tokens']:,} x {dr} (tokens), "
                               f"float32 ({b2['tables_gb'][0]:.2f} GB); histories of {Lr} items and {Lq} tokens per user, "
                               f"padded, pooled by masked means as table(ids) * mask[..., None] summed over the history")
    m["techniques"] = techniques(
        "pool with an embedding bag: F.embedding_bag(ids, table.weight, mode='sum', per_sample_weights=mask) / length "
        "(or nn.EmbeddingBag with offsets for ragged histories): each row is read once and only the pooled [B, 128] is "
        f"written, instead of materializing [{Br}, {Lr}, {dr}] and [{Br}, {Lq}, {dr}] float32 gathers and their masked "
        f"copies ({b2['materialized_gb'][0]:.0f} GB of traffic per batch)",
        ["CUDA graphs / launch overhead (GPU-bound)", "a faster GEMM / TF32 or bf16 MLP as the top fix (the MLP is "
         "~1 % of a batch)", "a larger batch", "caching hot rows / a smaller table as the top fix (the row reads stay "
         "with the fix)", "data loading or host-to-device copies (ids on the GPU)", "sparse gradients or optimizer "
         "changes (inference)", "torch.compile as the top fix"])
    m["planted"] = [planted15(
        "embedding_bag_materialized", {"device": "GPU 0", "region": f"every batch (no NVTX): per pooled field an embedding "
                                       f"gather writing [{Br}, L, {dr}] float32 (L = {Lr}, {Lq}), the mask multiply "
                                       f"writing a second tensor of that size and the sum over L reading it back"},
        "F.embedding_bag with per_sample_weights (--fixed; not captured)", b, "rm.embedding_bag_materialized",
        "share.embedding_bag_materialized",
        f"{Br} users per batch: the pooled histories gather {Br * (Lr + Lq):,} rows of {4 * dr} B "
        f"({b2['gathered_gb'][0]:.2f} GB read, needed in any form). Written as table(ids) * mask[..., None] summed over L, "
        f"each field materializes the gathered rows ([{Br}, L, {dr}] float32: the gather writes them, 50-85 % of HBM "
        f"for a random-row gather: {rng(b2, 'c.pool_gather_materialized')} ms), multiplies them by the broadcast mask "
        f"into a second tensor (read + write, 60-90 %: {rng(b2, 'c.pool_mask_multiply')} ms) and sums it over L (read, "
        f"60-90 %: {rng(b2, 'c.pool_sum_over_history')} ms): {b2['materialized_gb'][0]:.1f} GB of traffic beyond the row "
        f"reads. The candidates ({Kr} per user) and the MLP take {rng(b2, 'c.candidates_gather_score')} + "
        f"{rng(b2, 'c.mlp_tf32')} ms. Batch {rng(b2, 'step')} ms on an H200 (GPU-bound: host {rng(b2, 'host_ms')} ms). "
        f"An embedding bag reads each row once and writes [{Br}, {dr}] (its kernel at 35-80 % of HBM: "
        f"{rng(b2, 'after_pool_ms')} ms): batch {rng(b2, 'after')} ms, removed {rng(b2, 'rm.embedding_bag_materialized')} "
        f"ms = {rng(b2, 'share.embedding_bag_materialized', 1)} % (H100 {rng(b, 'share.embedding_bag_materialized', 1)} "
        f"%), {rng(b2, 'speedup')}x. New cause name: embedding_bag_materialized.",
        ["embedding_bag_materialized", "pooling_materialized", "embedding_bag", "materialized_intermediate",
         "elementwise_unfused"], b2)]
    m["tolerated"] = [{"what": f"the candidates' embedding gather [{Br}, {Kr}, {dr}] and the scoring bmm (needed work)",
                       "cause": "kernel_inefficient", "max_severity": "medium"},
                      {"what": "the small kernels (masks, lengths, divisions, ReLUs, the top-k)", "cause": "launch_bound",
                       "max_severity": "low"},
                      {"what": f"padded history positions (on average ~{100 * 3 // 8} % of the {Lr} and {Lq} slots; ragged "
                               f"bags with offsets would skip them, in both pooling forms)", "cause": "padding_waste",
                       "max_severity": "medium"}]
    m["expected_in_trace"] = [
        "no NVTX; a batch is 3 embedding gathers (history items, query tokens, candidates), 2 broadcast multiplies and 2 "
        "sums over L, the TF32 GEMMs, a bmm and a top-k",
        f"the two history-sized gathers (indexSelect / vectorized_gather kernels), the two elementwise multiplies and "
        f"the two reduce_kernel sums: {rng(b2, 'pool_ms', 0)} ms of a {rng(b2, 'step', 0)} ms batch, the GEMMs a few "
        f"hundredths of it",
        "GPU-bound, no host-to-device copies and no synchronization but the event wait"]
    m["must_not"] = [
        "the row gathers' random access / cache misses as the cause (the rows are read once with the fix too)",
        "the MLP, the GEMMs or TF32 as the cause", "CUDA graphs / launch overhead (GPU-bound)",
        "a host synchronization or data loading / host-to-device copies (everything is on the GPU)",
        "a larger batch as the fix", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"Our nightly job scores users for a two-tower recommender on one H200: each batch pools {Br} users' "
                     f"watch histories (up to {Lr} items) and search-token histories (up to {Lq}) through embedding "
                     f"tables, runs a small MLP and scores {Kr} candidates per user. The GPU is busy the whole time, but a "
                     f"batch takes several times what the MLP and the candidate scoring should cost. Where does the time "
                     f"go?")
    m["diagnosis"] = (f"Into the history pooling. It is written as table(ids) * mask[..., None] summed over the history, "
                      f"so each field's lookup materializes every gathered row ([{Br}, {Lr}, {dr}] float32 = "
                      f"{4.0 * Br * Lr * dr / GB:.1f} GB for the items), the mask multiply writes a second tensor of that "
                      f"size and the sum reads it back: {b2['materialized_gb'][0]:.0f} GB of traffic beyond the "
                      f"{b2['gathered_gb'][0]:.1f} GB of row reads, {rng(b2, 'pool_ms', 0)} ms of a {rng(b2, 'step', 0)} "
                      f"ms batch on the H200 (~{rng(b2, 'pool_share', 0)} %); the GEMMs are ~1 %. Pool with an "
                      f"embedding bag (F.embedding_bag with mode='sum' and per_sample_weights=mask, divided by the "
                      f"lengths; or nn.EmbeddingBag with offsets): each row read once, only [{Br}, {dr}] written: a batch "
                      f"~{rng(b2, 'after', 0)} ms, {rng(b2, 'share.embedding_bag_materialized', 0)} % removed "
                      f"({band_of15(b2, 'share.embedding_bag_materialized')[0]}), {rng(b2, 'speedup', 1)}x.")
    m["measure"] = [{"what": "batch period (no NVTX)", "query": Q15["anchor"] + " with ANCHOR = the top-k kernel (one per "
                     "batch: gatherTopK / sbtopk / mbtopk family; or the scoring bmm's GEMM), C = 1, WARM = 3",
                     "expect_ms": r2(b2["step"])},
                    {"what": "kernels", "query": Q15["kernels"],
                     "expect": f"gather (indexSelect / vectorized_gather, 3 per batch), broadcast multiply "
                               f"(elementwise_kernel, 2) and reduce_kernel (2) on [{Br}, L, {dr}] tensors "
                               f"{rng(b2, 'pool_ms', 0)} ms per batch, the largest classes"},
                    {"what": "elementwise bandwidth", "query": Q15["ew_bw"],
                     "expect": "the multiply and sum kernels near HBM speed (their existence, not their rate, is the "
                               "problem)"}]
    m["new_cause"] = {"name": "embedding_bag_materialized", "why": "a pooled embedding lookup (sum / mean / weighted sum "
                      "over a bag of ids: histories, multi-hot features, bags of n-grams) written as table(ids) followed "
                      "by elementwise weighting and a reduction: the [batch, bag, dim] gather output and its weighted copy "
                      "are materialized and re-read, several times the traffic of reading each row once; fixed by an "
                      "embedding bag (F.embedding_bag / nn.EmbeddingBag with per_sample_weights or offsets)"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- char_lstm (rnn_cell_loop) ----------------------------------------------------------------------------------
    Bc, Tc, Ec, Hc, Lc, Vc = (CL[k] for k in ("batch", "seq", "emb", "hidden", "layers", "vocab"))
    args = ["--batch", Bc, "--seq", Tc, "--emb", Ec, "--hidden", Hc, "--layers", Lc, "--vocab", Vc]
    b, b2, keys = ev(m_cl)
    bf2 = ev(lambda r: m_cl(r, fixed=True))[1]
    m = base("char_lstm", "char_lstm.py", "planted", args, steps=CL["steps"], warmup=CL["warmup"], est=40)
    m["uses"] = uses("float32 weights, TF32 matmuls", "Adam fused, clip_grad_norm_ (foreach)", tf32=True,
                     sequences=f"{Bc} sequences x {Tc} time steps per step (truncated BPTT, state carried detached)",
                     host_sync=EVENT_SYNC)
    m["uses"]["recurrence"] = (f"{Lc} nn.LSTMCell({Ec} / {Hc}, {Hc}) called in a Python loop over {Tc} time steps and "
                               f"{Lc} layers: {Lc * Tc} cell calls per step")
    m["techniques"] = techniques(
        f"replace the hand-written loop by one nn.LSTM({Ec}, {Hc}, num_layers={Lc}, batch_first=True) (cuDNN's fused "
        f"RNN: one input-projection GEMM per layer over all time steps, the recurrence launched from C++, one weight-"
        f"gradient GEMM per matrix), keeping the cell loop only where the cell is non-standard",
        ["a larger batch / more sequences as the only fix", "bf16 / FP8 / precision changes as the top fix",
         "the optimizer (fused) or clipping", "data loading (bytes on the GPU)",
         "CUDA graphs or torch.compile as the top fix (they hide launches but keep 256 sequential cells of small GEMMs "
         "and per-step weight-gradient adds)", "re-enabling cuDNN (it is enabled; the loop never calls it)"])
    m["planted"] = [planted15(
        "rnn_cell_loop", {"device": "GPU 0", "region": f"step_N > forward: {Lc * Tc} nn.LSTMCell calls (2 small GEMMs and "
                          f"the fused cell kernel each) issued one by one from Python; step_N > backward: the same cells "
                          f"walked back one by one (fused cell backward, 4 small GEMMs and 2 weight-gradient adds each)"},
        "nn.LSTM (cuDNN) in place of the LSTMCell loop (--fixed; not captured)", b, "rm.rnn_cell_loop",
        "share.rnn_cell_loop",
        f"{b2['params_m'][0]:.1f} M float32 parameters, {Bc} x {Tc} bytes per step. Unrolled in Python, each of the "
        f"{Lc * Tc} cells costs the host one LSTMCell call (35-110 µs: the module, _VF.lstm_cell, three launches) and "
        f"{CL_CELL_NODES} backward nodes or adds (10-30 µs each): {rng(b2, 'host_cells_ms')} ms of host per step, "
        f"{rng(b2, 'cell_host_us', 0)} µs per cell; on the GPU a cell is 6 TF32 GEMMs with M = {Bc} (each bounded by "
        f"60-200 TFLOP/s or by streaming its {4 * 4 * Hc * Hc / 1e6:.1f} MB weight at 60-90 % of HBM), the fused cell "
        f"kernels and the accumulation of both weights' gradients over the time steps (12 B per weight per step, "
        f"{rng(b2, 'c.weight_grad_accumulation')} ms per step): {rng(b2, 'cell_gpu_us', 0)} µs per cell, "
        f"{rng(b2, 'gpu_ms')} ms per step. The step is the larger of the two: {rng(b2, 'step')} ms on an H200 (host-paced "
        f"at most corners, GPU idle {rng(b2, 'idle_share', 0)} %). With nn.LSTM the input projections, weight gradients "
        f"and head are a few large TF32 GEMMs (330-400 TFLOP/s, {rng(bf2, 'c.cudnn_lstm_batched_gemms')} ms), the "
        f"recurrence {Lc * Tc} small GEMMs and gate kernels launched by cuDNN from C++ "
        f"({rng(bf2, 'c.cudnn_lstm_recurrence')} ms; host {rng(bf2, 'host_ms')} ms): step {rng(b2, 'after')} ms, removed "
        f"{rng(b2, 'rm.rnn_cell_loop')} ms = {rng(b2, 'share.rnn_cell_loop', 1)} % (H100 "
        f"{rng(b, 'share.rnn_cell_loop', 1)} %), {rng(b2, 'speedup')}x. New cause name: rnn_cell_loop.",
        ["rnn_cell_loop", "unfused_rnn", "python_time_loop", "launch_bound", "host_bound"], b2)]
    m["tolerated"] = [{"what": "the head, cross-entropy, clipping and fused Adam (small)", "cause": "elementwise_unfused",
                       "max_severity": "low"},
                      {"what": "TF32 (not bf16) matmuls of a float32 model", "cause": "fp32_gemm_simt",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        "step_N > forward / backward / optimizer",
        f"~{Lc * Tc * 3} kernels in step_N > forward and ~{Lc * Tc * 9} in the backward, almost all a few microseconds "
        f"long: GEMMs with M = {Bc} (nvjet / cutlass / sm80 TF32 kernels), _thnn_fused_lstm_cell (kernel / backward), "
        f"elementwise adds of [{4 * Hc}, {Hc}] gradients",
        "the GPU idle between them most of the step (launch-starved gaps: the next kernel not yet launched), no "
        "synchronization but the event wait; no cuDNN RNN kernel"]
    m["must_not"] = [
        "the GEMM rate, TF32 or precision as the cause (the GEMMs are small; their number and the host's pace are the "
        "problem)", "cuDNN disabled (it is enabled; the model never calls it)",
        "a host synchronization (.item(), synchronize) as the cause", "data loading or host-to-device copies",
        "the optimizer or clipping as the problem", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We train a byte-level {Lc}-layer LSTM language model (hidden {Hc}, {Bc} sequences x {Tc} steps per "
                     f"update, float32 with TF32, fused Adam, clipping) on one H200. Our dashboard shows the GPU mostly "
                     f"idle, and an update of this {b2['params_m'][0]:.0f} M-parameter model takes tens of milliseconds. "
                     f"What is going on, and what should we change?")
    m["diagnosis"] = (f"The LSTM is unrolled by hand: {Lc} nn.LSTMCell modules called in a Python loop over {Tc} time "
                      f"steps, {Lc * Tc} cell calls per update, each a Python-issued op with two small GEMMs (M = {Bc}) "
                      f"and a fused cell kernel, and a backward that walks the cells one by one (fused cell backward, 4 "
                      f"small GEMMs, the adds that sum each weight's gradient over the time steps). The host needs "
                      f"~{rng(b2, 'cell_host_us', 0)} µs per cell, {rng(b2, 'host_cells_ms', 0)} ms per update, while the "
                      f"GPU work is {rng(b2, 'gpu_ms', 0)} ms: an update takes {rng(b2, 'step', 0)} ms on the H200 with "
                      f"the GPU waiting for launches most of it. Use nn.LSTM({Ec}, {Hc}, num_layers={Lc}, "
                      f"batch_first=True): cuDNN batches the input projections and weight gradients into large GEMMs and "
                      f"runs the recurrence from C++: ~{rng(b2, 'after', 0)} ms per update, "
                      f"{rng(b2, 'share.rnn_cell_loop', 0)} % removed ({band_of15(b2, 'share.rnn_cell_loop')[0]}), "
                      f"{rng(b2, 'speedup', 1)}x.")
    m["measure"] = [{"what": "step period", "query": Q15["step"], "expect_ms": r2(b2["step"])},
                    {"what": "GPU idle and its cause", "query": Q15["starved"],
                     "expect": f"kernels ~{rng(b2, 'gpu_ms', 0)} ms per step, most of the rest launch-starved idle"},
                    {"what": "kernels", "query": Q15["kernels"],
                     "expect": f"~{Lc * Tc * 12} kernels per step: small TF32 GEMMs, _thnn_fused_lstm_cell forward / "
                               f"backward, elementwise adds; no cuDNN RNN kernel"}]
    m["new_cause"] = {"name": "rnn_cell_loop", "why": "a recurrent network unrolled in Python with cell modules (LSTMCell / "
                      "GRUCell, or a hand-written cell) where the fused layer (nn.LSTM / nn.GRU, cuDNN) would do: one "
                      "Python-issued op with microsecond-sized GEMMs per time step and layer, a backward that walks the "
                      "cells one by one and sums each weight's gradient over time with an add per step; launch- and "
                      "host-bound; fixed by the fused RNN layer (or, for custom cells, a compiled / scripted scan)"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- vit_finetune (activation_offload) ---------------------------------------------------------------------------
    Bv, dv, Hv, Lv = VT["batch"], VT["d"], VT["heads"], VT["blocks"]
    Sv = vt_dims()[1]
    args = ["--batch", Bv, "--image", VT["image"], "--patch", VT["patch"], "--d-model", dv, "--heads", Hv, "--blocks", Lv,
            "--classes", VT["classes"]]
    b, b2, keys = ev(m_vt)
    bf2 = ev(lambda r: m_vt(r, fixed=True))[1]
    m = base("vit_finetune", "vit_finetune.py", "planted", args, steps=VT["steps"], warmup=VT["warmup"], est=50)
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused", attention=True,
                     sequences=f"{Bv} images of {Sv} tokens (no padding)",
                     pinned="torch.autograd.graph.save_on_cpu(pin_memory=True): every saved tensor copied to pinned host "
                            "memory in the forward and back in the backward (the planted problem)",
                     host_sync="a blocking device-to-host copy for every tensor autograd saves (save_on_cpu), and the "
                               "event sync on the previous step")
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, non-causal, {Hv} heads of {dv // Hv}, {Sv} tokens"
    m["techniques"] = techniques(
        "remove the activation offloading (the torch.autograd.graph.save_on_cpu context around the forward): the saved "
        f"tensors ({b2['saved_gb'][0]:.1f} GB per step) fit on the GPU many times over, so keep them there; offload "
        "only when memory requires it, and then selectively and overlapped",
        ["pinning the host memory or non_blocking copies as the fix (they are pinned; the fix is not to copy)",
         "overlapping / prefetching the copies as the top fix", "activation checkpointing / recomputation",
         "CUDA graphs / launch overhead", "flash attention (already SDPA)", "fused optimizer (already)",
         "data loading (images on the GPU)", "a larger batch as the fix", "FP8 / precision changes"])
    m["planted"] = [planted15(
        "activation_offload", {"device": "GPU 0", "region": f"step_N > forward: a blocking DtoH memcpy into pinned memory "
                               f"(and a stream sync) after every op that saves tensors for the backward, "
                               f"~{b2['saved_tensors'][0]:.0f} per step; step_N > backward: an HtoD memcpy from pinned "
                               f"memory before each node that needs them"},
        "no save_on_cpu (--fixed; not captured)", b, "rm.activation_offload", "share.activation_offload",
        f"{b2['params_m'][0]:.0f} M parameters, {Bv} x {Sv} tokens per step. The training work: GEMMs "
        f"{rng(b2, 'gemm_ms')} ms at 550-800 TFLOP/s, attention over {Sv} tokens {rng(b2, 'attention_ms')} ms, "
        f"elementwise {rng(b2, 'elementwise_ms')} ms, AdamW: {rng(bf2, 'gpu_ms')} ms of GPU work per step on an H200 "
        f"(host {rng(bf2, 'host_ms')} ms; without the offloading a step takes {rng(b2, 'after')} ms). Under save_on_cpu(pin_memory="
        f"True) autograd's ~{b2['saved_tensors'][0]:.0f} saved tensors per step ({b2['saved_gb'][0]:.2f} GB: per block "
        f"the fp32 LayerNorm inputs, the bf16 inputs and weight casts of the 4 linears, q, k, v, the attention output, "
        f"the GELU input) are each copied to pinned host memory with a blocking copy_ in the forward "
        f"({rng(b2, 'c.offload_d2h_copies')} ms at 50-56 GB/s), every copy a host round trip with the GPU idle while the "
        f"host packs and issues (30-100 µs of hook, allocation and copy call plus a 10-40 µs sync each: "
        f"{rng(b2, 'c.offload_pack_round_trips')} ms), and copied back before the backward nodes that need them, on the "
        f"compute stream ({rng(b2, 'c.offload_h2d_copies')} ms). Step {rng(b2, 'step')} ms, the GPU computing "
        f"{rng(b2, 'gpu_busy_share', 0)} % of it: removed {rng(b2, 'rm.activation_offload')} ms = "
        f"{rng(b2, 'share.activation_offload', 1)} % (H100 {rng(b, 'share.activation_offload', 1)} %), "
        f"{rng(b2, 'speedup')}x. New cause name: activation_offload.",
        ["activation_offload", "cpu_offload", "save_on_cpu", "copy_not_overlapped", "host_sync"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / cast / GELU / residual kernels (memory-bound)", "cause": "elementwise_unfused",
                       "max_severity": "low"},
                      {"what": "SDPA on 197-token sequences (partly empty tiles)", "cause": "grid_underutilized",
                       "max_severity": "low"},
                      {"what": "the patch convolution's NCHW -> NHWC conversion", "cause": "layout_copy",
                       "max_severity": "low"}]
    m["expected_in_trace"] = [
        f"step_N > forward: ~{b2['saved_tensors'][0]:.0f} DtoH memcpys into pinned memory (a few bytes to 77 MB each, "
        f"{b2['saved_gb'][0]:.1f} GB in all, 50-56 GB/s), each followed by cudaStreamSynchronize on the main thread, the "
        f"forward kernels in between; the GPU idle most of the forward",
        f"step_N > backward: as many HtoD memcpys from pinned memory ({b2['saved_gb'][0]:.1f} GB) on the compute stream, "
        f"interleaved with the backward kernels",
        "no memory pressure to justify it: the model, its AdamW state and a batch's activations need a few GB of the "
        "141"]
    m["must_not"] = [
        "the GEMMs, attention or elementwise kernels as the cause", "pageable memory / pinning as the cause or the fix "
        "(the copies are pinned)", "overlapping or prefetching the copies as the top fix",
        "a data-loading or input pipeline problem (the images are on the GPU)",
        "activation checkpointing as the fix", "CUDA graphs / launch overhead", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We fine-tune a ViT-B/16 classifier on one H200 ({Bv} images of 224 px per step, bf16 autocast, "
                     f"fused AdamW). A step takes more than ten times what the model's FLOPs should need on this card, "
                     f"and the GPU shows long idle stretches inside every step. What is slowing it down?")
    m["diagnosis"] = (f"Activation offloading: the forward runs under torch.autograd.graph.save_on_cpu(pin_memory=True), "
                      f"kept from a large-model recipe, so each of the ~{b2['saved_tensors'][0]:.0f} tensors autograd "
                      f"saves per step ({b2['saved_gb'][0]:.1f} GB) is copied to pinned host memory with a blocking copy "
                      f"(a sync each) and copied back in the backward: {rng(b2, 'copies_ms', 0)} ms of PCIe copies and "
                      f"{rng(b2, 'c.offload_pack_round_trips', 0)} ms of host round trips in a {rng(b2, 'step', 0)} ms "
                      f"step on the H200, the GPU computing only ~{rng(b2, 'gpu_busy_share', 0)} % of it. The model and "
                      f"batch need a few GB of GPU memory: drop the save_on_cpu context and a step takes "
                      f"~{rng(b2, 'after', 0)} ms, {rng(b2, 'share.activation_offload', 0)} % removed "
                      f"({band_of15(b2, 'share.activation_offload')[0]}), {rng(b2, 'speedup', 0)}x. The copies are "
                      f"already pinned, so faster or overlapped copies are not the fix.")
    m["measure"] = [{"what": "step period", "query": Q15["step"], "expect_ms": r2(b2["step"])},
                    {"what": "copies", "query": Q15["memcpy"],
                     "expect": f"~{b2['saved_tensors'][0]:.0f} DtoH (pinned) and as many HtoD (pinned) copies per step, "
                               f"{b2['saved_gb'][0]:.1f} GB each way at 50-56 GB/s"},
                    {"what": "NVTX ranges", "query": Q15["nvtx_ranges"],
                     "expect": f"forward ~{rng(b2, 'c.offload_d2h_copies', 0)} ms + round trips of CPU time per step"}]
    m["new_cause"] = {"name": "activation_offload", "why": "tensors saved for the backward offloaded to host memory "
                      "(torch.autograd.graph.save_on_cpu, a CPU-offload option of a large-model recipe) in a run whose "
                      "activations fit on the GPU: every saved tensor crosses PCIe twice, the forward's copies block the "
                      "host one by one, and the GPU idles; pinning or overlapping makes it less bad, the fix is not "
                      "offloading (or offloading selectively and asynchronously when memory requires it)"}
    out[m["case"]] = finish(m, b, b2, keys)

    # ---- code_ddp (gather_full_outputs; 2 ranks) ---------------------------------------------------------------------
    Bd, Sd, Vd, dd, Hd, Ld = (CD[k] for k in ("batch", "seq", "vocab", "d", "heads", "blocks"))
    args = ["--batch", Bd, "--seq", Sd, "--vocab", Vd, "--d-model", dd, "--heads", Hd, "--blocks", Ld]
    b, b2, keys = ev(m_cd)
    bf2 = ev(lambda r: m_cd(r, fixed=True))[1]
    m = base("code_ddp", "code_ddp.py", "planted", args, steps=CD["steps"], warmup=CD["warmup"], est=60,
             ranks=CD["ranks"])
    m["uses"] = uses("bf16 autocast over fp32 weights", "AdamW fused, clip_grad_norm_ (foreach)", attention=True,
                     sequences=f"{Bd} sequences of {Sd} tokens per rank (no padding)", ddp=True, host_sync=EVENT_SYNC)
    m["uses"]["attention"] = f"F.scaled_dot_product_attention, is_causal=True, {Hd} heads of {dd // Hd}"
    m["uses"]["gradient_sync"] = "DDP defaults (25 MB buckets, overlapped with the backward)"
    m["uses"]["metrics"] = (f"per step: dist.all_gather_into_tensor of the logits [{Bd}, {Sd}, {Vd}] cast to float32 "
                            f"({b2['logits_gb'][0]:.1f} GB per rank) and of the targets, argmax over the gathered "
                            f"[{2 * Bd}, {Sd}, {Vd}] on every rank (the planted problem)")
    m["techniques"] = techniques(
        "compute the metric's sufficient statistics locally and reduce only those: argmax of the local logits compared "
        "with the local targets, the count of correct tokens (and of tokens) all-reduced as one or two numbers; never "
        f"gather full outputs ({b2['logits_gb'][0]:.1f} GB per rank per step) for a scalar metric",
        ["larger / fewer DDP buckets or gradient_as_bucket_view (DDP's all-reduce is hidden)",
         "a straggler rank (the ranks are symmetric)", "NCCL settings / a faster interconnect (the gather runs at link "
         "speed)", "gradient compression hooks", "FSDP / ZeRO", "CUDA graphs / launch overhead (GPU-bound)",
         "a fused cross-entropy as the top fix", "data loading (ids on the GPU)"])
    m["planted"] = [planted15(
        "gather_full_outputs", {"ranks": [0, 1], "region": f"step_N > metrics on both ranks, after the optimizer: a "
                                f"float32 cast of the logits, an ncclDevKernel_AllGather of them ({b2['logits_gb'][0]:.1f} "
                                f"GB per rank; and one of the targets), then an argmax over the gathered "
                                f"[{2 * Bd}, {Sd}, {Vd}] logits"},
        "local correct-token count all-reduced (--fixed; not captured)", b, "rm.gather_full_outputs",
        "share.gather_full_outputs",
        f"{b2['params_m'][0]:.0f} M parameters (head tied to a {Vd}-row embedding), {Bd} x {Sd} tokens per rank. Training "
        f"per rank: GEMMs {rng(b2, 'c.block_gemm_bf16')} ms + head {rng(b2, 'c.lm_head_gemm')} ms at 550-800 TFLOP/s, "
        f"causal attention {rng(b2, 'c.attention_causal')} ms, elementwise {rng(b2, 'c.block_elementwise')} ms, the "
        f"float32 cross-entropy over {Bd * Sd} x {Vd} logits {rng(b2, 'c.cross_entropy_fp32')} ms, clip and AdamW; DDP's "
        f"all-reduce hidden but for the tied embedding's bucket after the backward "
        f"({rng(b2, 'c.ddp_allreduce_exposed', 2)} ms): {rng(b2, 'train_gpu_ms')} ms on an H200. Then the metric: the "
        f"logits cast to float32 ({rng(b2, 'c.metrics_logits_fp32_cast')} ms), all-gathered to every rank "
        f"({b2['logits_gb'][0]:.2f} GB per rank at 220-360 GB/s per direction: {rng(b2, 'c.metrics_all_gather_logits')} "
        f"ms, on NCCL's stream with nothing left to overlap), and an argmax over the {b2['gathered_gb'][0]:.1f} GB "
        f"gathered ({rng(b2, 'c.metrics_argmax_gathered')} ms): "
        f"{rng(b2, 'metrics_ms')} ms. Step {rng(b2, 'step')} ms (GPU-bound: host {rng(b2, 'host_ms')} ms); with a local "
        f"count all-reduced ({rng(b2, 'after_metrics_ms')} ms) {rng(b2, 'after')} ms: removed "
        f"{rng(b2, 'rm.gather_full_outputs')} ms = {rng(b2, 'share.gather_full_outputs', 1)} % (H100 "
        f"{rng(b, 'share.gather_full_outputs', 1)} %). New cause name: gather_full_outputs.",
        ["gather_full_outputs", "oversized_collective", "metrics_gather", "gather_for_metrics",
         "exposed_communication"], b2)]
    m["tolerated"] = [{"what": "LayerNorm / cast / GELU / residual kernels under autocast (memory-bound)",
                       "cause": "elementwise_unfused", "max_severity": "high"},
                      {"what": f"the float32 cross-entropy over {Bd * Sd} x {Vd} logits", "cause": "elementwise_unfused",
                       "max_severity": "high"},
                      {"what": "DDP's bucket copies and the tied embedding's bucket all-reduced after the backward",
                       "cause": "exposed_communication", "max_severity": "low"},
                      {"what": "autocast's per-step weight casts", "cause": "autocast_weight_cast", "max_severity": "low"}]
    m["expected_in_trace"] = [
        "both ranks alike (no straggler)",
        "DDP's bucket all-reduces (ncclDevKernel_AllReduce) during step_N > backward, overlapped, the last one after it",
        f"step_N > metrics: an ncclDevKernel_AllGather of ~{rng(b2, 'c.metrics_all_gather_logits', 0)} ms per step on "
        f"each rank with no compute kernel beside it (after a logits-sized float32 cast), a small all-gather of the "
        f"targets, then an argmax reduce kernel over [{2 * Bd * Sd}, {Vd}] float32",
        "no host synchronization in the loop but the event wait; GPU-bound"]
    m["must_not"] = [
        "a straggler or imbalanced rank", "DDP's gradient all-reduce as exposed or too slow (it is hidden but its last "
        "bucket)", "bucket size, gradient_as_bucket_view or compression hooks as the main fix",
        "NCCL / NVLink / P2P configuration as slow (the gather runs at link speed)",
        "the compute (GEMMs, attention, cross-entropy) as the cause",
        "a host synchronization or .item() as the cause (there is none in the loop)", "nothing significant to fix"]
    m["expect_quiet"] = False
    m["question"] = (f"We fine-tune a {b2['params_m'][0]:.0f} M-parameter GPT-2-style code model (d {dd}, {Ld} "
                     f"layers) with DDP on 2 H200s ({Bd} x {Sd} tokens per GPU, bf16 autocast, fused AdamW, clipping). Per-GPU "
                     f"throughput is lower than our single-GPU runs of the same model. What costs the extra time on both "
                     f"GPUs, and is it worth fixing?")
    m["diagnosis"] = (f"The per-step accuracy metric. After the optimizer both ranks call the trainer's gather-for-metrics "
                      f"helper on the full logits: they are cast to float32 and all_gather_into_tensor'd, "
                      f"{b2['logits_gb'][0]:.1f} GB per rank (and the targets), then an argmax over the gathered [{2 * Bd}, {Sd}, {Vd}] on every "
                      f"rank: {rng(b2, 'metrics_ms', 1)} ms per step in step_N > metrics, with nothing to overlap it, "
                      f"{rng(b2, 'share.gather_full_outputs', 0)} % of a {rng(b2, 'step', 0)} ms step "
                      f"({band_of15(b2, 'share.gather_full_outputs')[0]}). Compute the correct-token count locally and "
                      f"all-reduce one number: ~{rng(b2, 'after', 0)} ms. The ranks are balanced and DDP's own all-reduce "
                      f"is hidden but for its last bucket; the rest of the step is GEMMs, the float32 cross-entropy and "
                      f"the memory-bound elementwise kernels of an autocast transformer.")
    m["measure"] = [{"what": "step period per rank", "query": Q15["step"] + " (both ranks)", "expect_ms": r2(b2["step"])},
                    {"what": "NCCL kernels", "query": Q15["nccl"],
                     "expect": f"per step and rank the DDP bucket all-reduces plus 2 all-gathers, the large one "
                               f"{rng(b2, 'c.metrics_all_gather_logits', 0)} ms"},
                    {"what": "exposed communication", "query": Q15["split"],
                     "expect": f"~{rng(b2, 'c.metrics_all_gather_logits', 0)} ms of NCCL-only time per step, inside "
                               f"step_N > metrics"},
                    {"what": "NVTX ranges", "query": Q15["nvtx_ranges"],
                     "expect": "metrics range short on the CPU (the gather is asynchronous); its cost is GPU time"}]
    m["new_cause"] = {"name": "gather_full_outputs", "why": "full model outputs (logits, embeddings, predictions) "
                      "all-gathered across ranks every step to compute a scalar metric or log (a gather-for-metrics "
                      "helper, torchmetrics-style state sync on raw outputs): gigabytes of collective traffic and a "
                      "metric pass over world-size copies, exposed after the optimizer; fixed by reducing the metric's "
                      "sufficient statistics (counts, sums) locally and all-reducing those"}
    out[m["case"]] = finish(m, b, b2, keys)
    return out


if __name__ == "__main__":
    D.set_main(__doc__, HERE, build, table=D.h200_table)
