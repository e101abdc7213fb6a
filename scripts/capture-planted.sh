#!/usr/bin/env bash
# Issue 31/32: capture every planted workload (workloads/planted, manifests beside them) through aisp's own
# capture operation on a 4-GPU H100/H200 host (SET=heldout2 ... SET=heldout8: a 2-GPU host; SET=heldout9, SET=heldout10: one H200;
# SET=heldout11, SET=heldout12, SET=heldout13, SET=heldout14, SET=heldout15, SET=heldout16, SET=heldout17: 2 H200s;
# SET=heldout18, SET=heldout19, SET=heldout20: one H200), in
# two phases that each end inside 540 s of wall time.
#
#   scripts/capture-planted.sh CARRY smoke      optional first: every program for 5 steps, no profiler (~2 min)
#   scripts/capture-planted.sh CARRY single     all one-GPU cases, four at a time, one per GPU
#   scripts/capture-planted.sh CARRY multi      the 4-rank cases (torchrun), one after another
#   ONLY=case1,case2 scripts/capture-planted.sh CARRY single|multi     a subset (e.g. to redo skipped ones)
#
# The second held-out set (workloads/planted/heldout2: one-GPU cases and 2-rank cases) is made for a 2-GPU host
# and is picked with SET=heldout2 (default SET=tuned,heldout: the sets above, for a 4-GPU host); the phases
# use every GPU the host has (two one-GPU cases at a time on 2 GPUs, torchrun --nproc_per_node=2 for the
# multi-rank ones):
#
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout2 bash scripts/capture-planted.sh CARRY smoke")     # ~3-4 min, no profiler
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout2 bash scripts/capture-planted.sh CARRY single")    # 9 captures, ~4-6 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout2 bash scripts/capture-planted.sh CARRY multi")     # 5 two-rank captures, ~4-5 min
#
# The third held-out set (workloads/planted/heldout3: 5 one-GPU cases, one 2-rank case) runs the same way on the
# same 2-GPU host, with SET=heldout3:
#
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout3 bash scripts/capture-planted.sh CARRY smoke")     # 6 programs, no profiler, ~2 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout3 bash scripts/capture-planted.sh CARRY single")    # 5 captures, two at a time, ~2-3 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout3 bash scripts/capture-planted.sh CARRY multi")     # 1 two-rank capture, ~1-1.5 min
#
# The fourth held-out set (workloads/planted/heldout4: 5 one-GPU captures, one a before/after pair, and one 2-rank
# case) runs the same way on the same 2-GPU host, with SET=heldout4:
#
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout4 bash scripts/capture-planted.sh CARRY smoke")     # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout4 bash scripts/capture-planted.sh CARRY single")    # 5 captures, two at a time, ~2-3 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout4 bash scripts/capture-planted.sh CARRY multi")     # ddp2_history, torchrun --nproc_per_node=2, ~1-1.5 min
#
# The fifth held-out set (workloads/planted/heldout5: 5 one-GPU captures, one a before/after pair, and one 2-rank
# case) runs the same way on the same 2-GPU host, with SET=heldout5 (weight_upload and its fixed variant share the
# PCIe slot):
#
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout5 bash scripts/capture-planted.sh CARRY smoke")     # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout5 bash scripts/capture-planted.sh CARRY single")    # 5 captures, two at a time, ~2-4 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout5 bash scripts/capture-planted.sh CARRY multi")     # ddp2_buffers, torchrun --nproc_per_node=2, ~1-1.5 min
#
# The sixth held-out set (workloads/planted/heldout6: 5 one-GPU captures, one a before/after pair, and one 2-rank
# case) runs the same way on the same 2-GPU host, with SET=heldout6 (ckpt_save writes its checkpoint file into the
# case's own folder):
#
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout6 bash scripts/capture-planted.sh CARRY smoke")     # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout6 bash scripts/capture-planted.sh CARRY single")    # 5 captures, two at a time, ~2-4 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout6 bash scripts/capture-planted.sh CARRY multi")     # ddp2_manual, torchrun --nproc_per_node=2, ~1-1.5 min
#
# The seventh held-out set (workloads/planted/heldout7: 5 one-GPU captures, one a before/after pair, and one 2-rank
# case) runs the same way on the same 2-GPU host, with SET=heldout7 (offload_adam, whose optimizer runs on the CPU
# with pageable copies, and tower_cache, which frees and reallocates device memory every step, share the host-heavy
# slot; score_loop holds 4.3 GB of bf16 weights):
#
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout7 bash scripts/capture-planted.sh CARRY smoke")     # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout7 bash scripts/capture-planted.sh CARRY single")    # 5 captures, two at a time, ~2-4 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout7 bash scripts/capture-planted.sh CARRY multi")     # pipe2_split, torchrun --nproc_per_node=2, ~1-1.5 min
#
# The eighth held-out set (workloads/planted/heldout8: 5 one-GPU captures, one a before/after pair, and one 2-rank
# case) runs the same way on the same 2-GPU host, with SET=heldout8 (emb_loop and its fixed variant, whose step is set
# by the host, and layer_timer, which synchronizes around every layer, share the host-heavy slot; full_logits writes
# 6 GB of logits per step):
#
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout8 bash scripts/capture-planted.sh CARRY smoke")     # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout8 bash scripts/capture-planted.sh CARRY single")    # 5 captures, two at a time, ~2-4 min
#   run(kind="nvidia-h100-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout8 bash scripts/capture-planted.sh CARRY multi")     # accum_ddp, torchrun --nproc_per_node=2, ~1-1.5 min
#
# The ninth held-out set (workloads/planted/heldout9: 6 one-GPU captures, one of them a before/after pair, no
# multi-rank case) is made for ONE H200: only the smoke and single phases, with SET=heldout9 on kind nvidia-h200
# (anomaly_fit, whose step is set by the host, runs alone in the host-heavy slot; with one GPU every case runs in
# turn anyway; tower_serve holds 3.2 GB of fp32 weights, onehot_tagger builds a 2.1 GB one-hot matrix per step):
#
#   run(kind="nvidia-h200", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout9 bash scripts/capture-planted.sh CARRY smoke")     # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h200", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout9 bash scripts/capture-planted.sh CARRY single")    # 6 captures, one at a time, ~4-6 min
#
# The tenth held-out set (workloads/planted/heldout10: 6 one-GPU captures, one of them a before/after pair, no
# multi-rank case) is made for ONE H200 too: only the smoke and single phases, with SET=heldout10 on kind nvidia-h200
# (pixel_stream, copying 1.23 GB of pinned float32 images per step, and resmlp_fit, whose launches block, run in the
# host-heavy slot; pixel_stream pins ~2.5 GB of host memory and monitored_lm's step is the longest, ~18-25 ms):
#
#   run(kind="nvidia-h200", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout10 bash scripts/capture-planted.sh CARRY smoke")    # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h200", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout10 bash scripts/capture-planted.sh CARRY single")   # 6 captures, one at a time, ~4-6 min
#
# The eleventh held-out set (workloads/planted/heldout11: 5 one-GPU captures, one of them a before/after pair, and one
# 2-rank DDP case) is made for 2 H200s: all three phases, with SET=heldout11 on kind nvidia-h200-x2 (chat_decode and its
# fixed variant, whose fixed step is set by the host, share the host-heavy slot; resnet_ddp's planted step is host-paced
# by SyncBatchNorm's synchronizations, ~45-145 ms, and its first step runs cuDNN's benchmark; chat_decode holds 2.2 GB
# of bf16 weights; long_lm keeps an 8192 x 8192 bias per block for its backward):
#
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout11 bash scripts/capture-planted.sh CARRY smoke")    # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout11 bash scripts/capture-planted.sh CARRY single")   # 5 captures, two at a time, ~3-5 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout11 bash scripts/capture-planted.sh CARRY multi")    # resnet_ddp, torchrun --nproc_per_node=2, ~1.5-2 min
#
# The twelfth held-out set (workloads/planted/heldout12: 5 one-GPU captures, one of them a before/after pair, and one
# 2-rank DDP case) is made for 2 H200s like the eleventh: all three phases, with SET=heldout12 on kind nvidia-h200-x2
# (lidar_seg re-runs Triton's autotuning every batch, ~0.5 s a step for 12 steps, and compiles 4 kernel configurations
# first; moe_lm and prop_mlp hold 1.3 and 1.65 B parameters; lm_ddp disables NCCL's peer-to-peer path itself, so its
# all-reduces go through /dev/shm: a step of ~90-270 ms):
#
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout12 bash scripts/capture-planted.sh CARRY smoke")    # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout12 bash scripts/capture-planted.sh CARRY single")   # 5 captures, two at a time, ~2.5-4 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout12 bash scripts/capture-planted.sh CARRY multi")    # lm_ddp, torchrun --nproc_per_node=2, ~1-1.5 min
#
# The thirteenth held-out set (workloads/planted/heldout13: 5 one-GPU captures, one of them a before/after pair, and one
# 2-rank DDP case) is made for 2 H200s like the eleventh and twelfth: all three phases, with SET=heldout13 on kind
# nvidia-h200-x2 (seg_unet runs every convolution through PyTorch's per-image fallback, ~490 launches a step from C++;
# dense_retrieval sorts a [512, 524288] float32 score matrix every batch, ~10 GB of sort buffers; multilingual_lm holds
# 737 M fp32 parameters with their AdamW state, a step of ~150-230 ms; vit_ddp all-reduces its 1.2 GB of gradients twice
# per step):
#
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout13 bash scripts/capture-planted.sh CARRY smoke")    # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout13 bash scripts/capture-planted.sh CARRY single")   # 5 captures, two at a time, ~2.5-4 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout13 bash scripts/capture-planted.sh CARRY multi")    # vit_ddp, torchrun --nproc_per_node=2, ~1-1.5 min
#
# The fourteenth held-out set (workloads/planted/heldout14: 5 one-GPU captures, one of them a before/after pair, and one
# 2-rank DDP case) is made for 2 H200s like the eleventh to thirteenth: all three phases, with SET=heldout14 on kind
# nvidia-h200-x2 (serve_decode keeps a 52 GB float32 key/value cache and fills 48 GB of it before its loop; speech_ssl
# materializes [256, 750, 750] attention scores per block, ~7 GB kept for the backward; gpt_pretrain runs its LM head on
# cuBLAS's slow small-alignment kernels, a step of ~50-90 ms; nli_ddp reads metrics back to the host and calls
# dist.all_gather_object every step):
#
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout14 bash scripts/capture-planted.sh CARRY smoke")    # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout14 bash scripts/capture-planted.sh CARRY single")   # 5 captures, two at a time, ~2.5-4 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout14 bash scripts/capture-planted.sh CARRY multi")    # nli_ddp, torchrun --nproc_per_node=2, ~1-1.5 min
#
# The fifteenth held-out set (workloads/planted/heldout15: 5 one-GPU captures, one of them a before/after pair, and one
# 2-rank DDP case) is made for 2 H200s like the eleventh to fourteenth: all three phases, with SET=heldout15 on kind
# nvidia-h200-x2 (vit_finetune offloads 4.7 GB of saved tensors to pinned host memory and back every step, ~0.2-0.26 s
# a step, and pins ~5-10 GB of host memory in its first step; char_lstm's step is set by the host, ~3000 launches a
# step; the two share the host-heavy slot; dit_sample's planted step runs its attention in float32, ~0.1-0.3 s a step,
# 1.35 GB of bf16 weights; rec_serve materializes ~11 GB of gathered embeddings and masked copies per batch; code_ddp
# all-gathers 3.3 GB of float32 logits per rank every step, ~20-30 GB of GPU memory per rank):
#
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout15 bash scripts/capture-planted.sh CARRY smoke")    # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout15 bash scripts/capture-planted.sh CARRY single")   # 5 captures, two at a time, ~2.5-4 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout15 bash scripts/capture-planted.sh CARRY multi")    # code_ddp, torchrun --nproc_per_node=2, ~1-1.5 min
#
# The sixteenth held-out set (workloads/planted/heldout16: 5 one-GPU captures, one of them a before/after pair, and one
# 2-rank case) is made for 2 H200s like the eleventh to fifteenth: all three phases, with SET=heldout16 on kind
# nvidia-h200-x2 (relevance_mlp's planted run multiplies its pruned weights with cuSPARSE, ~0.1-0.55 s a step;
# summ_decode holds a 34 GB static KV cache and copies 8.6 GB per layer per token, ~45 GB of GPU memory; ctr_batch keeps
# a 4 GB table in host memory, gathers on the CPU and copies 436 MB from pageable memory every batch; intent_finetune
# launches ~12000 kernels per update from the host; the two share the host-heavy slot; news_lm splits a 337 M model over
# both GPUs and all-reduces 9.7 GB of activations and gradients per step, ~40 GB of GPU memory per rank):
#
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout16 bash scripts/capture-planted.sh CARRY smoke")    # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout16 bash scripts/capture-planted.sh CARRY single")   # 5 captures, two at a time, ~2.5-4 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout16 bash scripts/capture-planted.sh CARRY multi")    # news_lm, torchrun --nproc_per_node=2, ~1-1.5 min
#
# The seventeenth held-out set (workloads/planted/heldout17: 5 one-GPU captures, one of them a before/after pair, and one
# 2-rank case) is made for 2 H200s like the eleventh to sixteenth: all three phases, with SET=heldout17 on kind
# nvidia-h200-x2 (flow_surrogate's planted run computes its FFTs on a prime 421 x 421 grid, ~20-90 ms a step, ~6-10 GB of
# GPU memory; query_embed captures and instantiates a CUDA graph in every request; photo_tagger forks 4 DataLoader
# workers every step (~0.07-0.35 s a step, a few batches of 3.1 MB in /dev/shm); policy_learner forks 2 actor processes
# before CUDA starts and reads ~29 MB rollouts through a pipe every update; the three share the host-heavy slot;
# support_lm runs DDP over a Gloo process group on both GPUs, its gradient all-reduce on the CPUs over TCP, ~0.05-0.2 s
# a step, ~15 GB of GPU memory per rank):
#
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout17 bash scripts/capture-planted.sh CARRY smoke")    # 6 programs, no profiler, ~2-3 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout17 bash scripts/capture-planted.sh CARRY single")   # 5 captures, two at a time, ~2.5-4 min
#   run(kind="nvidia-h200-x2", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout17 bash scripts/capture-planted.sh CARRY multi")    # support_lm, torchrun --nproc_per_node=2, ~1-1.5 min
#
# The eighteenth held-out set (workloads/planted/heldout18: 5 one-GPU captures, one of them a before/after pair, no
# multi-rank case) is made for ONE H200 like the ninth and tenth: only the smoke and single phases, with SET=heldout18
# on kind nvidia-h200 (crop_watch page-locks a fresh 134 MB host array with cudaHostRegister every step, ~25-130 ms a
# step, ~0.5 GB of host memory; session_ranker runs a full gc.collect() over ~1.7 M Python objects every step, ~65-275
# ms a step, its fixed variant ~7-10 ms; answer_rerank computes its loss query by query, ~5600 launches and ~60-340 ms
# a step; the three share the host-heavy slot; churn_scorer's index_add_ atomics pile onto one address, ~10-52 ms a
# batch, ~9-11 GB of GPU memory):
#
#   run(kind="nvidia-h200", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout18 bash scripts/capture-planted.sh CARRY smoke")    # 5 programs, no profiler, ~2 min
#   run(kind="nvidia-h200", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout18 bash scripts/capture-planted.sh CARRY single")   # 5 captures, one at a time, ~3-5 min
#
# The nineteenth held-out set (workloads/planted/heldout19: 5 one-GPU captures, one of them a before/after pair, no
# multi-rank case) is made for ONE H200 like the eighteenth: only the smoke and single phases, with SET=heldout19 on
# kind nvidia-h200 (catalog_recall gathers 2.1 GB of rows per step from a transposed table view, ~6-31 ms a step, its
# fixed variant ~2-3 ms, ~4-5 GB of GPU memory; review_tagger's serializer thread holds the GIL ~40-130 ms a step;
# fare_forecast builds its batch with torch.tensor from a 2.1 M-item Python list, ~33-260 ms a step, ~2-5 s of list
# building at start-up; sensor_denoise draws 134 MB of noise on the CPU and copies it pageable, ~27-360 ms a step; the
# three host-paced ones share the host-heavy slot):
#
#   run(kind="nvidia-h200", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout19 bash scripts/capture-planted.sh CARRY smoke")    # 5 programs, no profiler, ~2 min
#   run(kind="nvidia-h200", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout19 bash scripts/capture-planted.sh CARRY single")   # 5 captures, one at a time, ~3-5 min
#
# The twentieth held-out set (workloads/planted/heldout20: 5 one-GPU captures, one of them a before/after pair, no
# multi-rank case) is made for ONE H200 like the nineteenth: only the smoke and single phases, with SET=heldout20 on
# kind nvidia-h200 (item_linker squares a 24576 x 24576 bf16 graph per step, ~38-48 ms a step, its fixed variant
# ~2-3 ms, ~4-5 GB of GPU memory; ledger_classifier spawns nvidia-smi every step, ~16-400 ms a step;
# claims_encoder hashes a 134 MB pinned batch every step, ~54-340 ms a step, ~1-2 s of batch building at start-up;
# shelf_tagger re-parses a 10 MB JSON every step, ~60-365 ms a step; the three host-paced ones share the host-heavy
# slot):
#
#   run(kind="nvidia-h200", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout20 bash scripts/capture-planted.sh CARRY smoke")    # 5 programs, no profiler, ~2 min
#   run(kind="nvidia-h200", carry=["CARRY"], timeout_s=600,
#       command="SET=heldout20 bash scripts/capture-planted.sh CARRY single")   # 5 captures, one at a time, ~3-5 min
#
# CARRY is a folder holding aisp.xz (the release binary, xz-compressed) and lib/ (the Nsight Systems runtime
# libraries: a copy of ../shared/nsys-runtime/lib), carried to the device machine. How the lead calls it:
#
#   run(kind="nvidia-h100-x4", carry=["CARRY"], timeout_s=600,
#       command="bash scripts/capture-planted.sh CARRY single")
#   run(kind="nvidia-h100-x4", carry=["CARRY"], timeout_s=600,
#       command="bash scripts/capture-planted.sh CARRY multi")
#
#   (smoke needs no aisp or nsys; it still reads CARRY/aisp.xz, so pass the same folder:
#    run(kind="nvidia-h100-x4", carry=["CARRY"], timeout_s=420, command="bash scripts/capture-planted.sh CARRY smoke"))
#
# (CARRY: an ignored folder of the checkout, e.g. .carry-planted, listed in .git/info/exclude.) Both phases
# should run on the same kind of card; the reply says which (H100 80GB HBM3 or H200) and the summary's
# nvidia-smi line records it, since the manifests give H100 and H200 bands separately.
#
# Writes under $OUT at most 8 files, none deeper than $OUT/file: <phase>_summary.md (versions, then each
# case's exit, wall time, export sizes and the program's own "mean step" line), <phase>_results.json,
# <phase>_logs.tar.xz (aisp answers, stderr), and the exports: <phase>_tuned.tar and <phase>_heldout.tar
# (split into _1, _2... past 15 MiB) holding <case>.sqlite.xz (one GPU) or <case>.rank<N>.sqlite.xz.
# Each case runs as `python3 train.py` from a folder named by a hash with its arguments in run_args.json,
# so the command line, folder and environment nsys records name neither the workload nor the variant.
# NVLink multicast stays off in every run (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
# NVSHMEM_DISABLE_NVLS=1); clocks are never touched. A failing case is logged and the phase goes on; a case
# that would not end inside the budget is skipped and listed ("skipped (time)"): send it again with ONLY=.
set -u
CARRY="$(cd "${1:?usage: capture-planted.sh CARRY smoke|single|multi}" && pwd)"
PHASE="${2:?usage: capture-planted.sh CARRY smoke|single|multi}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${OUT:?set OUT to the output folder}"
W=/tmp/pl
rm -rf "$W"; mkdir -p "$W"
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export AISP_NSYS="${AISP_NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}"
export LD_LIBRARY_PATH="$CARRY/lib:${LD_LIBRARY_PATH:-}"
xz -dc "$CARRY/aisp.xz" > "$W/aisp" && chmod +x "$W/aisp" || { echo "no aisp binary in $CARRY" >&2; exit 2; }
exec python3 "$REPO/scripts/capture_planted.py" --phase "$PHASE" --aisp "$W/aisp" --lib "$CARRY/lib" \
  --work "$W" --out "$DEST" --budget "${BUDGET_S:-540}" --set "${SET:-tuned,heldout}"
