//! Training layouts: per-GPU memory and step time for TP × PP × DP (× CP, EP)
//! with a ZeRO stage, recompute choice, micro-batch and accumulation; a
//! search over all of them, ranked by step time, with the reason each
//! rejected layout was rejected.
//!
//! Step time = compute (6·N·D plus the attention term, PaLM App. B, at a
//! stated fraction of the dense peak) stretched by the pipeline bubble, plus
//! the communication that does not overlap: tensor-parallel all-reduces (on
//! the critical path), data-parallel gradient sync beyond what the last
//! backward hides, expert all-to-alls and pipeline sends. Ring-collective
//! times use the nccl-tests bus factors over the group's slowest link.

use schemars::JsonSchema;
use serde::Serialize;

use super::collectives::{self, Collective};
use super::links::Links;
use super::memory::{self, ActivationLayout, Recompute, StateBytes};
use super::model::{ModelSpec, round};
use aisp_knowledge::Dtype;
use aisp_knowledge::gpus::Gpu;
use aisp_knowledge::models::Architecture;

/// Default fraction of the dense peak that training math reaches; the
/// llm-analysis README suggests at most 0.5 for training.
pub const DEFAULT_COMPUTE_EFFICIENCY: f64 = 0.5;
pub const LLM_ANALYSIS_URL: &str = "https://github.com/cli99/llm-analysis";
/// Default usable fraction of device memory (vLLM's default
/// gpu_memory_utilization is 0.9; the rest covers the CUDA context and fragmentation).
pub const DEFAULT_USABLE_MEMORY_FRACTION: f64 = 0.9;
/// Llama 3 trained with a 4M-token initial batch (arXiv 2407.21783 §3.4).
pub const DEFAULT_GLOBAL_BATCH_TOKENS: f64 = 4_194_304.0;
pub const LLAMA3_URL: &str = "https://arxiv.org/abs/2407.21783";

/// Everything a training estimate depends on.
#[derive(Debug, Clone)]
pub struct TrainingSetup<'a> {
    pub model: &'a ModelSpec,
    pub arch: &'a Architecture,
    pub gpu: &'a Gpu,
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub seq_len: u32,
    /// Sequences per optimizer step.
    pub global_batch: u32,
    pub dtype: Dtype,
    pub links: Links,
    /// Dense peak used for the math, TFLOP/s.
    pub peak_tflops: f64,
    pub compute_efficiency: f64,
    /// Usable device memory per GPU, bytes.
    pub usable_bytes: f64,
    pub flash_attention: bool,
    /// Pin any dimension of the search.
    pub fixed: Pins,
}

/// Dimensions the caller fixed (None: search over it).
#[derive(Debug, Clone, Default)]
pub struct Pins {
    pub tp: Option<u32>,
    pub pp: Option<u32>,
    pub cp: Option<u32>,
    pub ep: Option<u32>,
    pub zero_stage: Option<u8>,
    pub recompute: Option<Recompute>,
    pub micro_batch: Option<u32>,
}

/// One way to lay training out over the GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Layout {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub cp: u32,
    pub ep: u32,
    /// 0 = DDP (replicated), 1/2 = ZeRO-1/2, 3 = ZeRO-3 / FSDP full sharding.
    pub zero_stage: u8,
    pub recompute: Recompute,
    pub sequence_parallel: bool,
    pub micro_batch: u32,
    /// Micro-batches per optimizer step per pipeline (= gradient-accumulation steps).
    pub grad_accumulation: u32,
}

impl Layout {
    pub fn describe(&self) -> String {
        let mut s = format!("TP{} PP{} DP{}", self.tp, self.pp, self.dp);
        if self.cp > 1 {
            s.push_str(&format!(" CP{}", self.cp));
        }
        if self.ep > 1 {
            s.push_str(&format!(" EP{}", self.ep));
        }
        let shard = match self.zero_stage {
            0 => "DDP".to_string(),
            3 => "ZeRO-3/FSDP".to_string(),
            z => format!("ZeRO-{z}"),
        };
        s.push_str(&format!(
            ", {shard}, recompute {}, micro-batch {} x {} accumulation",
            self.recompute.as_str(),
            self.micro_batch,
            self.grad_accumulation
        ));
        s
    }
}

/// Memory on the most loaded GPU.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MemoryBreakdown {
    pub weights_gb: f64,
    pub gradients_gb: f64,
    pub optimizer_gb: f64,
    pub activations_gb: f64,
    pub logits_gb: f64,
    /// ZeRO-3 prefetch buffers for two unsharded layers.
    pub buffers_gb: f64,
    pub total_gb: f64,
    /// Device memory × usable fraction.
    pub usable_gb: f64,
    pub headroom_gb: f64,
}

/// Where a step's time goes.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StepTime {
    /// Math at the stated efficiency, no bubble.
    pub compute_ms: f64,
    /// Idle pipeline time: compute × (p − 1)/m.
    pub pipeline_bubble_ms: f64,
    /// Tensor-parallel all-reduces (not overlapped).
    pub tp_comm_ms: f64,
    /// Data-parallel gradient/parameter traffic.
    pub dp_comm_ms: f64,
    /// The part of dp_comm_ms that compute does not hide.
    pub dp_comm_exposed_ms: f64,
    /// Expert-parallel all-to-alls (not overlapped).
    pub ep_comm_ms: f64,
    /// Context-parallel K/V ring traffic.
    pub cp_comm_ms: f64,
    pub cp_comm_exposed_ms: f64,
    /// Pipeline point-to-point sends.
    pub pp_p2p_ms: f64,
    pub step_ms: f64,
}

/// A layout that fits, with its estimates.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LayoutEstimate {
    pub layout: Layout,
    pub description: String,
    pub memory: MemoryBreakdown,
    pub time: StepTime,
    pub tokens_per_s: f64,
    /// Model FLOPs utilization: model FLOPs / (step time × GPUs × dense peak), 0–100.
    pub mfu_pct: f64,
    /// Why this layout ranks where it does, with the numbers.
    pub reasons: Vec<String>,
}

/// A layout that was considered and rejected.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Rejection {
    pub layout: Layout,
    pub description: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchResult {
    pub evaluated: usize,
    pub feasible: usize,
    /// Best first (shortest step time).
    pub candidates: Vec<LayoutEstimate>,
    /// Representative rejections: the simplest layouts first.
    pub rejected: Vec<Rejection>,
    /// Rejection counts by kind (does not fit, indivisible, pipeline underfilled, ...).
    pub rejected_by_kind: Vec<(String, usize)>,
}

fn divisors(n: u32) -> Vec<u32> {
    (1..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

/// Parameters on the most loaded GPU: `(non_expert, expert)`.
fn params_on_gpu(arch: &Architecture, l: &Layout) -> (f64, f64) {
    let layers = arch.layers as f64;
    let lps = (arch.layers as f64 / l.pp as f64).ceil();
    let embed_one = arch.vocab as f64 * arch.hidden as f64;
    let expert_total = arch.routed_expert_params();
    let body = arch.total_params() - arch.embedding_params() - expert_total;
    // One stage holds the input embedding and the LM head when there is no
    // pipeline; with one, the first stage holds the embedding and the last the head.
    let embed = if l.pp == 1 {
        arch.embedding_params()
    } else {
        embed_one
    };
    let non_expert = lps * (body / layers) / l.tp as f64 + embed / l.tp as f64;
    let expert = lps * (expert_total / layers) / (l.tp as f64 * l.ep as f64);
    (non_expert, expert)
}

fn gb(bytes: f64) -> f64 {
    round(bytes / 1e9, 2)
}

fn ms(seconds: f64) -> f64 {
    round(seconds * 1e3, 3)
}

/// Estimate one layout. Err(reason) when it does not fit or cannot run.
/// Why a layout was rejected: kind, sentence, and its memory need in bytes
/// (infinite when it failed for another reason).
pub type Reject = (String, String, f64);

pub fn evaluate(s: &TrainingSetup, l: &Layout) -> Result<LayoutEstimate, Reject> {
    let arch = s.arch;
    let g = s.nodes * s.gpus_per_node;
    let bytes = StateBytes::adam(s.dtype).ok_or_else(|| {
        (
            "dtype".to_string(),
            format!(
                "{} is not a training format; use bf16, fp16, fp8 or fp32",
                s.dtype
            ),
            f64::INFINITY,
        )
    })?;
    // ---- memory
    let (p_ne, p_ex) = params_on_gpu(arch, l);
    let st_ne = memory::state_memory(p_ne, bytes, l.zero_stage, l.dp);
    let st_ex = memory::state_memory(p_ex, bytes, l.zero_stage, (l.dp / l.ep).max(1));
    let act_layout = ActivationLayout {
        seq: s.seq_len as f64,
        micro_batch: l.micro_batch as f64,
        tp: l.tp,
        sequence_parallel: l.sequence_parallel,
        cp: l.cp,
        recompute: l.recompute,
        flash_attention: s.flash_attention,
        element_scale: if s.dtype == Dtype::Fp32 { 2.0 } else { 1.0 },
    };
    let per_layer = memory::activation_bytes_per_layer(arch, &act_layout);
    let lps = (arch.layers as f64 / l.pp as f64).ceil();
    let in_flight = l.grad_accumulation.min(l.pp) as f64;
    let logits = memory::logits_bytes(arch, &act_layout);
    let (acts, logits_on_max) = if l.pp == 1 {
        (lps * per_layer, logits)
    } else {
        let first = lps * in_flight * per_layer;
        let last = lps * per_layer + logits;
        if first >= last {
            (first, 0.0)
        } else {
            (lps * per_layer, logits)
        }
    };
    let buffers = if l.zero_stage == 3 && l.dp > 1 {
        2.0 * (p_ne + p_ex) / lps.max(1.0) * bytes.weights
    } else {
        0.0
    };
    let total = st_ne.total() + st_ex.total() + acts + logits_on_max + buffers;
    let mem = MemoryBreakdown {
        weights_gb: gb(st_ne.weights_bytes + st_ex.weights_bytes),
        gradients_gb: gb(st_ne.gradients_bytes + st_ex.gradients_bytes),
        optimizer_gb: gb(st_ne.optimizer_bytes + st_ex.optimizer_bytes),
        activations_gb: gb(acts),
        logits_gb: gb(logits_on_max),
        buffers_gb: gb(buffers),
        total_gb: gb(total),
        usable_gb: gb(s.usable_bytes),
        headroom_gb: gb(s.usable_bytes - total),
    };
    if total > s.usable_bytes {
        let parts = [
            ("weights", mem.weights_gb),
            ("gradients", mem.gradients_gb),
            ("optimizer states", mem.optimizer_gb),
            ("activations", mem.activations_gb + mem.logits_gb),
        ];
        let (big, big_gb) = parts
            .iter()
            .copied()
            .fold(("", 0.0), |acc, p| if p.1 > acc.1 { p } else { acc });
        return Err((
            "does not fit".into(),
            format!(
                "does not fit: {:.1} GB > {:.1} GB usable ({} GB × {:.2}); largest part {big} {:.1} GB",
                total / 1e9,
                s.usable_bytes / 1e9,
                s.gpu.memory_gb.value.unwrap_or(0.0),
                s.usable_bytes / s.gpu.memory_bytes().unwrap_or(s.usable_bytes),
                big_gb
            ),
            total,
        ));
    }

    // ---- time
    let seq = s.seq_len as f64;
    let tokens_per_step = s.global_batch as f64 * seq;
    let attn_fwd = arch.attention_flops_per_token_forward(seq);
    let model_flops_per_token = 6.0 * s.model.active_params + 3.0 * attn_fwd;
    let recompute_flops = match l.recompute {
        Recompute::None => 0.0,
        Recompute::Selective => attn_fwd,
        Recompute::Full => 2.0 * s.model.active_params + attn_fwd,
    };
    let peak = s.peak_tflops * 1e12;
    let hw_flops_per_gpu = (model_flops_per_token + recompute_flops) * tokens_per_step / g as f64;
    let t_compute = hw_flops_per_gpu / (peak * s.compute_efficiency);
    let m = l.grad_accumulation as f64;
    let bubble = t_compute * (l.pp as f64 - 1.0) / m;

    let act_bytes = 2.0; // 16-bit activations on the wire
    let tokens_mb = seq / l.cp as f64 * l.micro_batch as f64;
    // TP: 2 all-reduces per layer forward, 2 backward, 2 more for a full-recompute forward.
    let tp_bw = s.links.group_bytes_per_s(l.tp, 1);
    let ars_per_layer = if l.recompute == Recompute::Full {
        6.0
    } else {
        4.0
    };
    let t_tp = m
        * lps
        * ars_per_layer
        * collectives::time_s(
            Collective::AllReduce,
            tokens_mb * arch.hidden as f64 * act_bytes,
            l.tp,
            tp_bw,
        );
    // DP: ranks ordered tp, cp, (ep within) dp, pp.
    let dp_bw = s.links.group_bytes_per_s(l.dp, l.tp * l.cp);
    let grad_bytes = |p: f64| p * bytes.gradients;
    let w_bytes = |p: f64| p * bytes.weights;
    let dp_time = |p: f64, n: u32| -> f64 {
        match l.zero_stage {
            3 => {
                m * (collectives::time_s(Collective::ReduceScatter, grad_bytes(p), n, dp_bw)
                    + 2.0 * collectives::time_s(Collective::AllGather, w_bytes(p), n, dp_bw))
            }
            _ => collectives::time_s(Collective::AllReduce, grad_bytes(p), n, dp_bw),
        }
    };
    let t_dp = dp_time(p_ne, l.dp) + dp_time(p_ex, (l.dp / l.ep).max(1));
    let hide = if l.zero_stage == 3 {
        t_compute
    } else {
        // Gradient sync happens once per step, during the last micro-batch's backward.
        t_compute * (2.0 / 3.0) / m
    };
    let t_dp_exposed = (t_dp - hide).max(0.0);
    // EP: dispatch + combine all-to-all, forward and backward, per MoE layer.
    let t_ep = if l.ep > 1 && arch.is_moe() {
        let ep_bw = s.links.group_bytes_per_s(l.ep, l.tp * l.cp);
        let moe_layers_stage =
            lps * (arch.layers - arch.dense_layers.unwrap_or(0)) as f64 / arch.layers as f64;
        let msg = tokens_mb * arch.hidden as f64 * act_bytes * arch.active_experts() as f64;
        m * moe_layers_stage * 4.0 * collectives::time_s(Collective::AllToAll, msg, l.ep, ep_bw)
    } else {
        0.0
    };
    // CP: K and V circulate the ring forward; K, V and their gradients backward.
    let (t_cp, t_cp_exposed) = if l.cp > 1 {
        let cp_bw = s.links.group_bytes_per_s(l.cp, l.tp);
        let kv = seq * l.micro_batch as f64 * arch.kv_elements_per_token_per_layer() * act_bytes
            / (l.tp.min(arch.kv_heads())) as f64;
        let t = m * lps * 3.0 * collectives::time_s(Collective::AllGather, kv, l.cp, cp_bw);
        let attn_share = 3.0 * attn_fwd / model_flops_per_token;
        (t, (t - t_compute * attn_share).max(0.0))
    } else {
        (0.0, 0.0)
    };
    // PP: one activation forward and one gradient backward per micro-batch per boundary.
    let t_pp = if l.pp > 1 {
        let pp_bw = s.links.group_bytes_per_s(l.pp, l.tp * l.cp * l.dp);
        let sp_div = if l.sequence_parallel {
            l.tp as f64
        } else {
            1.0
        };
        m * 2.0 * tokens_mb * arch.hidden as f64 * act_bytes / sp_div / pp_bw
    } else {
        0.0
    };
    let step = t_compute + bubble + t_tp + t_dp_exposed + t_ep + t_cp_exposed + t_pp;
    let tokens_per_s = tokens_per_step / step;
    let mfu = model_flops_per_token * tokens_per_step / (step * g as f64 * peak) * 100.0;
    let time = StepTime {
        compute_ms: ms(t_compute),
        pipeline_bubble_ms: ms(bubble),
        tp_comm_ms: ms(t_tp),
        dp_comm_ms: ms(t_dp),
        dp_comm_exposed_ms: ms(t_dp_exposed),
        ep_comm_ms: ms(t_ep),
        cp_comm_ms: ms(t_cp),
        cp_comm_exposed_ms: ms(t_cp_exposed),
        pp_p2p_ms: ms(t_pp),
        step_ms: ms(step),
    };
    let mut reasons = vec![format!(
        "fits: {:.1} GB of {:.1} GB usable ({:.1} GB headroom)",
        total / 1e9,
        s.usable_bytes / 1e9,
        (s.usable_bytes - total) / 1e9
    )];
    reasons.push(format!(
        "compute {:.0} ms per step ({:.3e} FLOPs per GPU at {:.0}% of {} TFLOP/s)",
        t_compute * 1e3,
        hw_flops_per_gpu,
        s.compute_efficiency * 100.0,
        s.peak_tflops
    ));
    if l.tp > 1 {
        reasons.push(format!(
            "TP{} all-reduces {:.0} ms on {} ({:.0} GB/s per direction)",
            l.tp,
            t_tp * 1e3,
            if s.links.crosses_nodes(l.tp, 1) {
                "the inter-node network"
            } else {
                "intra-node links"
            },
            tp_bw / 1e9
        ));
    }
    if l.pp > 1 {
        reasons.push(format!(
            "PP{} bubble {:.0}% of compute ((p−1)/m with {} micro-batches)",
            l.pp,
            (l.pp as f64 - 1.0) / m * 100.0,
            l.grad_accumulation
        ));
    }
    if l.dp > 1 {
        reasons.push(format!(
            "DP{} traffic {:.0} ms over {:.0} GB/s per direction, {:.0} ms not hidden by compute",
            l.dp,
            t_dp * 1e3,
            dp_bw / 1e9,
            t_dp_exposed * 1e3
        ));
    }
    Ok(LayoutEstimate {
        layout: *l,
        description: l.describe(),
        memory: mem,
        time,
        tokens_per_s: round(tokens_per_s, 1),
        mfu_pct: round(mfu, 2),
        reasons,
    })
}

/// Enumerate layouts (respecting pins), estimate each, rank the feasible ones.
pub fn search(s: &TrainingSetup, top: usize) -> SearchResult {
    let arch = s.arch;
    let g = s.nodes * s.gpus_per_node;
    let mut feasible: Vec<LayoutEstimate> = Vec::new();
    let mut rejected: Vec<(u32, f64, Rejection)> = Vec::new();
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    let mut evaluated = 0usize;
    let mut reject = |l: Layout,
                      kind: &str,
                      reason: String,
                      need: f64,
                      rejected: &mut Vec<(u32, f64, Rejection)>| {
        *kinds.entry(kind.to_string()).or_default() += 1;
        // Simpler layouts are the ones people try first: show those.
        let complexity = l.tp * l.pp * l.cp * l.ep * 10 + l.zero_stage as u32;
        rejected.push((
            complexity,
            need,
            Rejection {
                layout: l,
                description: l.describe(),
                reason,
            },
        ));
    };
    let pick = |pin: Option<u32>, all: Vec<u32>| -> Vec<u32> {
        match pin {
            Some(v) => vec![v],
            None => all,
        }
    };
    let cps: Vec<u32> = if s.seq_len >= 8192 {
        vec![1, 2, 4, 8]
    } else {
        vec![1]
    };
    for tp in pick(
        s.fixed.tp,
        divisors(g).into_iter().filter(|t| *t <= 64).collect(),
    ) {
        for cp in pick(s.fixed.cp, cps.clone()) {
            for pp in pick(s.fixed.pp, divisors(g)) {
                let base = Layout {
                    tp,
                    pp,
                    dp: 1,
                    cp,
                    ep: 1,
                    zero_stage: 0,
                    recompute: Recompute::None,
                    sequence_parallel: tp > 1,
                    micro_batch: 1,
                    grad_accumulation: 1,
                };
                if !g.is_multiple_of(tp * cp * pp) {
                    // Not a layout of these GPUs at all; only worth a word when pinned.
                    let pinned =
                        s.fixed.tp.is_some() || s.fixed.pp.is_some() || s.fixed.cp.is_some();
                    if !pinned {
                        continue;
                    }
                    evaluated += 1;
                    reject(
                        base,
                        "indivisible",
                        format!("TP{tp} × CP{cp} × PP{pp} does not divide {g} GPUs"),
                        f64::INFINITY,
                        &mut rejected,
                    );
                    continue;
                }
                evaluated += 1;
                if tp > s.gpus_per_node {
                    reject(
                        base,
                        "tp across nodes",
                        format!(
                            "TP{tp} exceeds {} GPUs per node: tensor parallelism needs NVLink-class links",
                            s.gpus_per_node
                        ),
                        f64::INFINITY,
                        &mut rejected,
                    );
                    continue;
                }
                if !arch.heads.is_multiple_of(tp)
                    || !(arch.kv_heads().is_multiple_of(tp) || tp.is_multiple_of(arch.kv_heads()))
                {
                    reject(
                        base,
                        "indivisible",
                        format!(
                            "TP{tp} does not divide {} attention heads / {} KV heads",
                            arch.heads,
                            arch.kv_heads()
                        ),
                        f64::INFINITY,
                        &mut rejected,
                    );
                    continue;
                }
                if pp > arch.layers {
                    reject(
                        base,
                        "indivisible",
                        format!("PP{pp} exceeds {} layers", arch.layers),
                        f64::INFINITY,
                        &mut rejected,
                    );
                    continue;
                }
                if cp > 1 && !(s.seq_len as u64).is_multiple_of(2 * cp as u64) {
                    reject(
                        base,
                        "indivisible",
                        format!("sequence {} does not split into 2×CP{cp} chunks", s.seq_len),
                        f64::INFINITY,
                        &mut rejected,
                    );
                    continue;
                }
                let dp = g / (tp * cp * pp);
                let eps: Vec<u32> = if arch.is_moe() {
                    divisors(dp)
                        .into_iter()
                        .filter(|e| arch.experts().is_multiple_of(*e))
                        .collect()
                } else {
                    vec![1]
                };
                for ep in pick(s.fixed.ep, eps) {
                    let zeros: Vec<u8> = match s.fixed.zero_stage {
                        Some(z) => vec![z],
                        None if dp == 1 => vec![0],
                        None => vec![0, 1, 2, 3],
                    };
                    for zero_stage in zeros {
                        for recompute in s
                            .fixed
                            .recompute
                            .map(|r| vec![r])
                            .unwrap_or(Recompute::ALL.to_vec())
                        {
                            for mb in pick(s.fixed.micro_batch, vec![1, 2, 4, 8, 16, 32]) {
                                let mut l = Layout {
                                    tp,
                                    pp,
                                    dp,
                                    cp,
                                    ep,
                                    zero_stage,
                                    recompute,
                                    sequence_parallel: tp > 1,
                                    micro_batch: mb,
                                    grad_accumulation: 1,
                                };
                                evaluated += 1;
                                if !dp.is_multiple_of(ep) {
                                    reject(
                                        l,
                                        "indivisible",
                                        format!("EP{ep} does not divide DP{dp}"),
                                        f64::INFINITY,
                                        &mut rejected,
                                    );
                                    continue;
                                }
                                if !s.global_batch.is_multiple_of(dp * mb) {
                                    reject(
                                        l,
                                        "indivisible",
                                        format!(
                                            "global batch {} is not a multiple of DP{dp} × micro-batch {mb}",
                                            s.global_batch
                                        ),
                                        f64::INFINITY,
                                        &mut rejected,
                                    );
                                    continue;
                                }
                                l.grad_accumulation = s.global_batch / (dp * mb);
                                if pp > 1 && l.grad_accumulation < pp {
                                    reject(
                                        l,
                                        "pipeline underfilled",
                                        format!(
                                            "{} micro-batches cannot fill {pp} pipeline stages",
                                            l.grad_accumulation
                                        ),
                                        f64::INFINITY,
                                        &mut rejected,
                                    );
                                    continue;
                                }
                                match evaluate(s, &l) {
                                    Ok(e) => feasible.push(e),
                                    Err((kind, reason, need)) => {
                                        reject(l, &kind, reason, need, &mut rejected)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    feasible.sort_by(|a, b| {
        a.time
            .step_ms
            .total_cmp(&b.time.step_ms)
            .then(a.memory.total_gb.total_cmp(&b.memory.total_gb))
    });
    let n_feasible = feasible.len();
    // Show the simplest rejected shapes (TP, PP, CP, EP, ZeRO) for which no
    // variant fits, each by its least memory-hungry variant: "even with full
    // recompute and micro-batch 1 it needs X GB".
    let fits: std::collections::HashSet<(u32, u32, u32, u32, u8)> = feasible
        .iter()
        .map(|e| {
            (
                e.layout.tp,
                e.layout.pp,
                e.layout.cp,
                e.layout.ep,
                e.layout.zero_stage,
            )
        })
        .collect();
    let shape = |l: &Layout| (l.tp, l.pp, l.cp, l.ep, l.zero_stage);
    rejected.retain(|(_, _, r)| !fits.contains(&shape(&r.layout)));
    rejected.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut seen = std::collections::HashSet::new();
    let rejected: Vec<Rejection> = rejected
        .into_iter()
        .filter(|(_, _, r)| seen.insert(shape(&r.layout)))
        .map(|(_, _, r)| r)
        .take(12)
        .collect();
    feasible.truncate(top.max(1));
    SearchResult {
        evaluated,
        feasible: n_feasible,
        candidates: feasible,
        rejected,
        rejected_by_kind: kinds.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aisp_knowledge::gpus;

    fn setup<'a>(
        model: &'a ModelSpec,
        gpu: &'a Gpu,
        nodes: u32,
        seq: u32,
        batch: u32,
    ) -> TrainingSetup<'a> {
        TrainingSetup {
            model,
            arch: model.arch.as_ref().unwrap(),
            gpu,
            nodes,
            gpus_per_node: 8,
            seq_len: seq,
            global_batch: batch,
            dtype: Dtype::Bf16,
            links: Links::for_gpu(gpu, 8, None, None).unwrap(),
            peak_tflops: gpu
                .peak_tflops(aisp_knowledge::dtype::Precision::Bf16)
                .unwrap(),
            compute_efficiency: DEFAULT_COMPUTE_EFFICIENCY,
            usable_bytes: gpu.memory_bytes().unwrap() * DEFAULT_USABLE_MEMORY_FRACTION,
            flash_attention: true,
            fixed: Pins::default(),
        }
    }

    #[test]
    fn six_n_d_sets_the_compute_time() {
        // Llama 3.1 8B, one H100, fixed TP1 PP1 DP1, batch 1 × 4096 tokens:
        // FLOPs = (6N + 12·L·H·Q·T)·T = (6 · 8.03e9 + 12·32·32·128·4096)·4096.
        let m = ModelSpec::resolve(Some("llama-3.1-8b"), None, None).unwrap();
        let h100 = gpus::by_id("h100-sxm").unwrap();
        let mut s = setup(&m, h100, 1, 4096, 1);
        s.gpus_per_node = 1;
        s.links = Links::for_gpu(h100, 1, None, None).unwrap();
        s.usable_bytes = 1e15; // isolate the time model from memory
        let l = Layout {
            tp: 1,
            pp: 1,
            dp: 1,
            cp: 1,
            ep: 1,
            zero_stage: 0,
            recompute: Recompute::None,
            sequence_parallel: false,
            micro_batch: 1,
            grad_accumulation: 1,
        };
        let e = evaluate(&s, &l).unwrap();
        let flops = (6.0 * 8_030_261_248.0 + 12.0 * 32.0 * 32.0 * 128.0 * 4096.0) * 4096.0;
        let want_ms = flops / (989.4e12 * 0.5) * 1e3;
        assert!(
            (e.time.compute_ms - want_ms).abs() < 1e-3,
            "{} vs {want_ms}",
            e.time.compute_ms
        );
        assert_eq!(e.time.step_ms, e.time.compute_ms);
        // One GPU, no communication: MFU is the efficiency, 50%.
        assert!((e.mfu_pct - 50.0).abs() < 0.01);
    }

    #[test]
    fn llama_8b_trains_with_fsdp_on_eight_80gb_gpus() {
        let m = ModelSpec::resolve(Some("llama-3.1-8b"), None, None).unwrap();
        let h100 = gpus::by_id("h100-sxm").unwrap();
        let s = setup(&m, h100, 1, 4096, 64);
        // FSDP (ZeRO-3) over 8 ranks, no TP/PP: 16 × 8.03e9 / 8 = 16.06 GB of states.
        let fsdp = Layout {
            tp: 1,
            pp: 1,
            dp: 8,
            cp: 1,
            ep: 1,
            zero_stage: 3,
            recompute: Recompute::Full,
            sequence_parallel: false,
            micro_batch: 1,
            grad_accumulation: 8,
        };
        let e = evaluate(&s, &fsdp).expect("8B fits with FSDP on 8 × 80 GB");
        let states = e.memory.weights_gb + e.memory.gradients_gb + e.memory.optimizer_gb;
        assert!((states - 16.06).abs() < 0.02, "{states}");
        // DDP replicates 16 B/param = 128.5 GB: rejected with the numbers.
        let ddp = Layout {
            zero_stage: 0,
            ..fsdp
        };
        let (kind, reason, _) = evaluate(&s, &ddp).unwrap_err();
        assert_eq!(kind, "does not fit");
        assert!(
            reason.starts_with("does not fit: 1")
                && reason.contains("> 72.0 GB usable (80 GB × 0.90)"),
            "{reason}"
        );
        let r = search(&s, 5);
        assert!(r.feasible > 0);
        assert!(r.candidates.iter().all(|c| c.memory.total_gb <= 72.0));
        assert!(r.rejected.iter().any(|x| x.layout.zero_stage == 0
            && x.layout.tp == 1
            && x.reason.starts_with("does not fit")));
    }

    #[test]
    fn llama_70b_needs_sharding_or_model_parallelism_on_80gb_gpus() {
        let m = ModelSpec::resolve(Some("llama-3.1-70b"), None, None).unwrap();
        let h100 = gpus::by_id("h100-sxm").unwrap();
        // One node of 8 × 80 GB: 16 B/param × 70.6e9 = 1,129 GB of states > 640 GB: nothing fits.
        let one_node = search(&setup(&m, h100, 1, 4096, 64), 5);
        assert_eq!(one_node.feasible, 0);
        // Eight nodes: layouts exist, and none of them replicates the weights
        // (TP1 PP1 with ZeRO 0-2 keeps 2 B/param = 141 GB of weights per GPU).
        let s = setup(&m, h100, 8, 4096, 256);
        let r = search(&s, 50);
        assert!(r.feasible > 0);
        for c in &r.candidates {
            let l = c.layout;
            assert!(
                l.tp > 1 || l.pp > 1 || l.zero_stage == 3,
                "{}",
                c.description
            );
        }
        let replicated = Layout {
            tp: 1,
            pp: 1,
            dp: 64,
            cp: 1,
            ep: 1,
            zero_stage: 2,
            recompute: Recompute::Full,
            sequence_parallel: false,
            micro_batch: 1,
            grad_accumulation: 4,
        };
        let (_, reason, _) = evaluate(&s, &replicated).unwrap_err();
        assert!(reason.contains("largest part weights 141"), "{reason}");
    }

    #[test]
    fn pins_restrict_the_search() {
        let m = ModelSpec::resolve(Some("llama-3.1-8b"), None, None).unwrap();
        let h100 = gpus::by_id("h100-sxm").unwrap();
        let mut s = setup(&m, h100, 1, 4096, 64);
        s.fixed.tp = Some(8);
        s.fixed.zero_stage = Some(1);
        let r = search(&s, 100);
        assert!(
            r.candidates
                .iter()
                .all(|c| c.layout.tp == 8 && c.layout.zero_stage == 1)
        );
        assert!(r.feasible > 0);
        // TP 8 with 8 KV heads keeps all-reduces on NVLink: each costs time.
        assert!(r.candidates[0].time.tp_comm_ms > 0.0);
    }
}
