//! Operations of the `distributed` domain: training layouts with memory and
//! step-time estimates, NCCL settings, FSDP2 / tensor-parallel / pipelining
//! configurations, Slurm scripts and training cost.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::advisor_inputs::{
    fraction, gpu_or_local, peaks_for, positive, resolve_gpu, resolve_model, topology,
};
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, OpSpec, Operation};
use aisp_knowledge::Dtype;
use aisp_knowledge::dtype::Precision;
use aisp_knowledge::gpus;
use aisp_knowledge::models::Architecture;
use aisp_planner::links::Links;
use aisp_planner::memory::{self, ActivationLayout, Recompute, StateBytes};
use aisp_planner::peaks::Peaks;
use aisp_planner::recipes::{self, EnvSetting, Launcher, NcclAdvice, Network, Stage};
use aisp_planner::round;
use aisp_planner::training::{self, LayoutEstimate, Pins, Rejection, TrainingSetup};
use aisp_planner::{ModelSpec, ModelSummary};

pub const OPERATIONS: &[&dyn DynOperation] = &[
    &Plan,
    &Nccl,
    &Fsdp,
    &TensorParallel,
    &Pipeline,
    &Slurm,
    &CostEstimate,
];

fn links_error(e: aisp_planner::links::LinkError) -> OpError {
    OpError::invalid_input(
        e.to_string(),
        "Pass intra_node_gb_per_s with your GPU-to-GPU bandwidth per direction.",
    )
}

// ------------------------------------------------------------------ plan

pub struct Plan;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanInput {
    /// Catalog model id or `hf:org/name`, e.g. `llama-3.1-70b` (or give `architecture`).
    #[serde(default)]
    pub model: Option<String>,
    /// A custom model shape instead of a catalog id.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Not enough here: give model or architecture.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e5))]
    pub params_b: Option<f64>,
    /// Catalog GPU id, e.g. `h100-sxm`; default: the local GPU.
    #[serde(default)]
    pub gpu: Option<String>,
    /// Total GPUs; default nodes x gpus_per_node.
    #[serde(default)]
    pub gpus: Option<u32>,
    /// Nodes (default gpus / gpus_per_node when both are given, else 1).
    #[serde(default)]
    pub nodes: Option<u32>,
    /// Default gpus / nodes, or 8.
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// Tokens per sequence (default 4096).
    #[serde(default)]
    pub seq_len: Option<u32>,
    /// Sequences per optimizer step (default 4M tokens / seq_len).
    #[serde(default)]
    pub global_batch: Option<u32>,
    /// Default bf16.
    #[serde(default)]
    pub dtype: Option<Dtype>,
    /// Fraction of dense peak reached (default 0.5).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1))]
    pub compute_efficiency: Option<f64>,
    /// Default 0.9.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1))]
    pub usable_memory_fraction: Option<f64>,
    /// GB/s per direction inside a node (default: catalog).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e6))]
    pub intra_node_gb_per_s: Option<f64>,
    /// GB/s per GPU per direction between nodes (default 50).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e6))]
    pub inter_node_gb_per_s: Option<f64>,
    /// Pin tensor parallel.
    #[serde(default)]
    pub tp: Option<u32>,
    /// Pin pipeline parallel.
    #[serde(default)]
    pub pp: Option<u32>,
    /// Pin context parallel.
    #[serde(default)]
    pub cp: Option<u32>,
    /// Pin expert parallel.
    #[serde(default)]
    pub ep: Option<u32>,
    /// Pin ZeRO stage (0 DDP .. 3 full FSDP).
    #[serde(default)]
    pub zero_stage: Option<u8>,
    /// Pin activation recomputation.
    #[serde(default)]
    pub recompute: Option<Recompute>,
    /// Pin micro-batch (sequences).
    #[serde(default)]
    pub micro_batch: Option<u32>,
    /// Fused attention, no s x s scores (default true).
    #[serde(default)]
    pub flash_attention: Option<bool>,
    /// Layouts to return (default 5).
    #[serde(default)]
    pub top: Option<usize>,
    /// Use measured roofs from benchmark history when they exist for this GPU (default true).
    #[serde(default)]
    pub use_measured_roofs: Option<bool>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PlanOutput {
    pub model: ModelSummary,
    pub gpu: String,
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub seq_len: u32,
    pub global_batch: u32,
    pub tokens_per_step: u64,
    pub peaks: Peaks,
    pub links: Links,
    /// How many layouts were considered.
    pub evaluated: usize,
    /// How many fit and can run.
    pub feasible: usize,
    /// Best first: shortest estimated step time.
    pub candidates: Vec<LayoutEstimate>,
    /// The simplest rejected layouts, with the reason.
    pub rejected: Vec<Rejection>,
    pub rejected_by_kind: Vec<(String, usize)>,
    /// One-paragraph answer.
    pub verdict: String,
    /// Every assumption behind the numbers, with sources.
    pub assumptions: Vec<String>,
}

/// Shared by plan, fsdp and cost: resolve inputs into a training setup.
struct Resolved {
    model: ModelSpec,
    gpu: &'static gpus::Gpu,
    nodes: u32,
    gpn: u32,
    seq: u32,
    batch: u32,
    dtype: Dtype,
    peaks: Peaks,
    links: Links,
    eff: f64,
    usable_frac: f64,
    flash: bool,
    assumptions: Vec<String>,
}

#[allow(clippy::too_many_arguments)]
fn resolve_training(
    ctx: &OpContext,
    model: Option<&str>,
    architecture: Option<&Architecture>,
    params_b: Option<f64>,
    gpu: Option<&str>,
    gpus: Option<u32>,
    nodes: Option<u32>,
    gpus_per_node: Option<u32>,
    seq_len: Option<u32>,
    global_batch: Option<u32>,
    dtype: Option<Dtype>,
    compute_efficiency: Option<f64>,
    usable_memory_fraction: Option<f64>,
    intra: Option<f64>,
    inter: Option<f64>,
    flash_attention: Option<bool>,
    use_measured: Option<bool>,
) -> Result<Resolved, OpError> {
    let model = resolve_model(model, architecture, params_b)?;
    let gpu = gpu_or_local(ctx, gpu)?;
    let (nodes, gpn) = topology(gpus, nodes, gpus_per_node)?;
    let seq = positive("seq_len", seq_len.unwrap_or(4096))?;
    let dtype = dtype.unwrap_or(Dtype::Bf16);
    if StateBytes::adam(dtype).is_none() {
        return Err(OpError::invalid_input(
            format!("{dtype} is not a training precision"),
            "Use bf16 (default), fp16, fp8 or fp32; int8/int4 are inference formats (see aisp_inference_quantization).",
        ));
    }
    let batch = match global_batch {
        Some(b) => positive("global_batch", b)?,
        None => ((training::DEFAULT_GLOBAL_BATCH_TOKENS / seq as f64).round() as u32).max(1),
    };
    let eff = fraction(
        "compute_efficiency",
        compute_efficiency,
        training::DEFAULT_COMPUTE_EFFICIENCY,
    )?;
    let usable_frac = fraction(
        "usable_memory_fraction",
        usable_memory_fraction,
        training::DEFAULT_USABLE_MEMORY_FRACTION,
    )?;
    if gpu.memory_bytes().is_none() {
        return Err(OpError::invalid_input(
            format!("the catalog has no memory size for {}", gpu.id),
            "Pick another GPU.",
        ));
    }
    let peaks = peaks_for(ctx, gpu, dtype, use_measured.unwrap_or(true))?;
    let links = Links::for_gpu(gpu, gpn, intra, inter).map_err(links_error)?;
    let flash = flash_attention.unwrap_or(true);
    let mut assumptions = vec![
        format!(
            "model states: Adam with {} weights — {} + {} + {} = {} bytes/parameter (ZeRO, {}; Transformer Math 101, {})",
            dtype,
            StateBytes::adam(dtype).map(|b| b.weights).unwrap_or(0.0),
            StateBytes::adam(dtype).map(|b| b.gradients).unwrap_or(0.0),
            StateBytes::adam(dtype).map(|b| b.optimizer).unwrap_or(0.0),
            StateBytes::adam(dtype).map(|b| b.total()).unwrap_or(0.0),
            memory::ZERO_URL,
            memory::TRANSFORMER_MATH_URL
        ),
        format!(
            "activations: Korthikanti et al. per-layer formulas ({}), generalized to the model's MLP width; sequence parallelism on whenever TP > 1; {}; dropout masks counted as in the paper (conservative for dropout-free models); GQA's smaller K/V activations not subtracted",
            memory::KORTHIKANTI_URL,
            if flash { "fused attention (FlashAttention) so the s×s scores are not stored" } else { "attention scores stored (no fused attention)" }
        ),
        "logits: bf16 logits plus an fp32 copy for the loss (6 bytes per vocabulary entry per token) on the last stage".into(),
        format!(
            "compute: 6·N·D plus the attention term 12·L·H·Q·T per token (PaLM App. B, https://arxiv.org/abs/2204.02311) at {:.0}% of the dense {} peak {} TFLOP/s ({}: {}); recompute adds its extra forward",
            eff * 100.0, peaks.precision.as_str(), peaks.tflops.value, peaks.tflops.origin, peaks.tflops.source
        ),
        format!(
            "default compute efficiency {:.2} follows llm-analysis's guidance for training ({})",
            training::DEFAULT_COMPUTE_EFFICIENCY,
            training::LLM_ANALYSIS_URL
        ),
        format!(
            "communication: ring collectives at the nccl-tests bus factors ({}) over the slowest link of each group; ranks ordered TP, CP, DP, PP (Megatron's default), so TP stays inside a node",
            aisp_planner::collectives::NCCL_TESTS_PERFORMANCE_URL
        ),
        "overlap: DP gradient sync (DDP/ZeRO-1/2) hides behind the last micro-batch's backward; ZeRO-3 gathers hide behind the whole step's compute; TP all-reduces, EP all-to-alls and pipeline sends are exposed; small-message latency is not modeled".into(),
        format!("usable memory: {:.0}% of {} GB per GPU", usable_frac * 100.0, gpu.memory_gb.value.unwrap_or(0.0)),
    ];
    if global_batch.is_none() {
        assumptions.push(format!(
            "global batch: {batch} sequences ≈ 4M tokens, Llama 3's initial batch ({})",
            training::LLAMA3_URL
        ));
    }
    if seq_len.is_none() {
        assumptions.push(format!(
            "sequence length 4096, Llama 3's pre-training length ({})",
            training::LLAMA3_URL
        ));
    }
    Ok(Resolved {
        model,
        gpu,
        nodes,
        gpn,
        seq,
        batch,
        dtype,
        peaks,
        links,
        eff,
        usable_frac,
        flash,
        assumptions,
    })
}

impl Resolved {
    fn setup<'a>(&'a self, arch: &'a Architecture, pins: Pins) -> TrainingSetup<'a> {
        TrainingSetup {
            model: &self.model,
            arch,
            gpu: self.gpu,
            nodes: self.nodes,
            gpus_per_node: self.gpn,
            seq_len: self.seq,
            global_batch: self.batch,
            dtype: self.dtype,
            links: self.links.clone(),
            peak_tflops: self.peaks.tflops.value,
            compute_efficiency: self.eff,
            usable_bytes: self.gpu.memory_bytes().unwrap_or(0.0) * self.usable_frac,
            flash_attention: self.flash,
            fixed: pins,
        }
    }
}

impl Operation for Plan {
    type Input = PlanInput;
    type Output = PlanOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Plan distributed training layouts",
        summary: "Ranks TP×PP×DP(×CP/EP) layouts with ZeRO stage, recompute and micro-batching by estimated step time; per-GPU memory, MFU, and why others were rejected.",
        description: "Finds the fastest training layout for a model on N GPUs (tensor, pipeline, data, context, expert parallel degrees, ZeRO stage, recomputation, micro-batch) with per-GPU memory, step time, tokens/s and MFU, rejected layouts with the reason (e.g. does not fit) and every assumption. Use before a multi-GPU run or to see why a layout runs out of memory. Instant.",
        intents: &[
            "plan parallelism",
            "how to shard my model",
            "fsdp or tensor parallel",
            "will it fit in memory",
            "training layout",
            "tp pp dp",
            "tp and pp",
            "zero stage",
            "parallelism strategy",
            "train on many gpus",
            "why does my training oom",
            "which parallelism",
        ],
        example: r#"{"model": "llama-3.1-70b", "gpu": "h100-sxm", "gpus": 64, "nodes": 8, "seq_len": 4096}"#,
        ..OpSpec::new("distributed", "plan")
    };

    fn run(&self, ctx: &OpContext, i: PlanInput) -> Result<PlanOutput, OpError> {
        let r = resolve_training(
            ctx,
            i.model.as_deref(),
            i.architecture.as_ref(),
            i.params_b,
            i.gpu.as_deref(),
            i.gpus,
            i.nodes,
            i.gpus_per_node,
            i.seq_len,
            i.global_batch,
            i.dtype,
            i.compute_efficiency,
            i.usable_memory_fraction,
            i.intra_node_gb_per_s,
            i.inter_node_gb_per_s,
            i.flash_attention,
            i.use_measured_roofs,
        )?;
        if let Some(z) = i.zero_stage
            && z > 3
        {
            return Err(OpError::invalid_input(
                format!("zero_stage {z} does not exist"),
                "Use 0 (DDP), 1, 2 or 3 (FSDP).",
            ));
        }
        let arch = r
            .model
            .arch_for("a training plan (activation memory)")
            .map_err(super::advisor_inputs::model_error)?
            .clone();
        let pins = Pins {
            tp: i.tp,
            pp: i.pp,
            cp: i.cp,
            ep: i.ep,
            zero_stage: i.zero_stage,
            recompute: i.recompute,
            micro_batch: i.micro_batch,
        };
        let setup = r.setup(&arch, pins);
        let res = training::search(&setup, i.top.unwrap_or(5).clamp(1, 50));
        let g = r.nodes * r.gpn;
        let verdict = match res.candidates.first() {
            Some(best) => format!(
                "Best of {} feasible layouts on {} × {}: {} — {:.0} ms per step, {:.0} tokens/s, MFU {:.1}%, {:.1} GB of {:.1} GB per GPU.",
                res.feasible,
                g,
                r.gpu.id,
                best.description,
                best.time.step_ms,
                best.tokens_per_s,
                best.mfu_pct,
                best.memory.total_gb,
                best.memory.usable_gb
            ),
            None => {
                let states = r.model.total_params
                    * StateBytes::adam(r.dtype).map(|b| b.total()).unwrap_or(16.0)
                    / 1e9;
                format!(
                    "No layout fits: the model states alone are {:.0} GB ({:.1}B parameters × {} bytes) against {:.0} GB usable over all {} GPUs. Add GPUs, or offload optimizer states (aisp_optimize_details cpu-offload).",
                    states,
                    r.model.total_params / 1e9,
                    StateBytes::adam(r.dtype).map(|b| b.total()).unwrap_or(16.0),
                    setup.usable_bytes * g as f64 / 1e9,
                    g
                )
            }
        };
        Ok(PlanOutput {
            model: r.model.summary(),
            gpu: r.gpu.id.clone(),
            nodes: r.nodes,
            gpus_per_node: r.gpn,
            seq_len: r.seq,
            global_batch: r.batch,
            tokens_per_step: r.batch as u64 * r.seq as u64,
            peaks: r.peaks.clone(),
            links: r.links.clone(),
            evaluated: res.evaluated,
            feasible: res.feasible,
            candidates: res.candidates,
            rejected: res.rejected,
            rejected_by_kind: res.rejected_by_kind,
            verdict,
            assumptions: r.assumptions,
        })
    }
}

// ------------------------------------------------------------------ nccl

pub struct Nccl;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NcclInput {
    /// Catalog GPU id (default: the local GPU).
    #[serde(default)]
    pub gpu: Option<String>,
    /// Nodes (default gpus / gpus_per_node when both are given, else 1).
    #[serde(default)]
    pub nodes: Option<u32>,
    /// GPUs per node (default 8).
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// Network between nodes: infiniband (default), roce or ethernet.
    #[serde(default)]
    pub network: Option<Network>,
    /// Network bandwidth per GPU per direction, GB/s (default 50).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e6))]
    pub inter_node_gb_per_s: Option<f64>,
    /// The job uses tensor/sequence parallelism (Megatron-style).
    #[serde(default)]
    pub tensor_parallel: Option<bool>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NcclOutput {
    pub gpu: String,
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub links: Links,
    pub advice: NcclAdvice,
    /// The settings as shell exports (placeholders commented out).
    pub exports: String,
}

fn exports(settings: &[EnvSetting]) -> String {
    settings
        .iter()
        .map(|e| {
            if e.value.starts_with('<') {
                format!(
                    "# export {}={}   # find with: {}",
                    e.name,
                    e.value,
                    e.find_with.as_deref().unwrap_or("see docs")
                )
            } else {
                format!("export {}={}", e.name, e.value)
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Operation for Nccl {
    type Input = NcclInput;
    type Output = NcclOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "NCCL settings for a topology",
        summary: "NCCL environment variables for your GPUs, nodes and network, each with why and its doc link, the bus bandwidth to expect, and how to verify.",
        description: "Derives NCCL environment settings from the topology: GPU model (NVLink or PCIe from the catalog), \
nodes, GPUs per node and network (InfiniBand, RoCE, Ethernet). Site-specific values (HCA names, interface, GID index) \
are returned as placeholders with the command that finds them, never invented. Also returns the peak bus bandwidth \
nccl-tests should approach inside and across nodes, the nccl-tests commands to check, and settings deliberately not \
recommended. Use it when setting up multi-GPU or multi-node training, or when collectives are slow. Instant.",
        intents: &[
            "nccl settings",
            "nccl environment variables",
            "multi node training network",
            "infiniband nccl",
            "slow allreduce",
            "tune nccl",
        ],
        example: r#"{"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8, "network": "infiniband"}"#,
        ..OpSpec::new("distributed", "nccl")
    };

    fn run(&self, ctx: &OpContext, i: NcclInput) -> Result<NcclOutput, OpError> {
        let gpu = gpu_or_local(ctx, i.gpu.as_deref())?;
        let (nodes, gpn) = topology(None, i.nodes, i.gpus_per_node)?;
        let links = Links::for_gpu(gpu, gpn, None, i.inter_node_gb_per_s).map_err(links_error)?;
        let advice = recipes::nccl_advice(
            gpu,
            &links,
            nodes,
            i.network,
            i.tensor_parallel.unwrap_or(false),
        );
        Ok(NcclOutput {
            gpu: gpu.id.clone(),
            nodes,
            gpus_per_node: gpn,
            exports: exports(&advice.settings),
            links,
            advice,
        })
    }
}

// ------------------------------------------------------------------ fsdp

pub struct Fsdp;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsdpInput {
    /// Catalog model id or `hf:org/name` (or give `architecture`).
    #[serde(default)]
    pub model: Option<String>,
    /// A custom model shape.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Parameters in billions: accepted, but this operation needs the shape (model or architecture).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e5))]
    pub params_b: Option<f64>,
    /// Catalog GPU id (default: the local GPU).
    #[serde(default)]
    pub gpu: Option<String>,
    /// Total GPUs (default nodes × gpus_per_node).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// Nodes (default gpus / gpus_per_node when both are given, else 1).
    #[serde(default)]
    pub nodes: Option<u32>,
    /// GPUs per node (default gpus / nodes, or 8).
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// Sequence length (default 4096).
    #[serde(default)]
    pub seq_len: Option<u32>,
    /// Micro-batch per GPU in sequences (default 1).
    #[serde(default)]
    pub micro_batch: Option<u32>,
    /// Training precision (default bf16).
    #[serde(default)]
    pub dtype: Option<Dtype>,
    /// Fraction of device memory usable (default 0.9).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1))]
    pub usable_memory_fraction: Option<f64>,
}

/// One FSDP2 configuration and its per-GPU memory.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FsdpOption {
    pub name: String,
    /// Ranks each parameter is sharded over.
    pub shard_group: u32,
    pub reshard_after_forward: bool,
    pub activation_checkpointing: bool,
    pub states_gb: f64,
    /// Unsharded parameters alive at peak (prefetch, or kept after forward).
    pub unsharded_params_gb: f64,
    pub activations_gb: f64,
    pub total_gb: f64,
    pub fits: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FsdpOutput {
    pub model: ModelSummary,
    pub gpu: String,
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub usable_gb: f64,
    /// Every option evaluated, fastest-communicating first.
    pub options: Vec<FsdpOption>,
    /// The chosen option (the first that fits), or null when none fits.
    pub chosen: Option<String>,
    pub why: String,
    /// PyTorch FSDP2 code for the chosen option.
    pub snippet: Option<String>,
    pub assumptions: Vec<String>,
}

impl Operation for Fsdp {
    type Input = FsdpInput;
    type Output = FsdpOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "FSDP2 configuration",
        summary: "Chooses PyTorch FSDP2 sharding (HSDP vs full shard, reshard_after_forward, activation checkpointing) from per-GPU memory, and writes the code.",
        description: "Evaluates FSDP2 options for a model on your GPUs, in order of least communication: hybrid sharding \
(shard within a node, replicate across nodes) without and with resharding after forward, then full sharding over all \
GPUs, each with and without activation checkpointing. Per option: model states (16 bytes/parameter sharded over the \
shard group), unsharded parameters alive at peak, activations (Korthikanti et al.), total vs usable memory. Picks the \
first that fits and returns a fully_shard / init_device_mesh / MixedPrecisionPolicy snippet for it, or says none fits \
and why. Use it when moving a model to FSDP2 or tuning an OOM. Instant.",
        intents: &[
            "fsdp config",
            "configure fsdp",
            "fsdp2",
            "fully_shard",
            "hybrid sharding",
            "fsdp sharding",
            "reshard_after_forward",
            "shard my model with fsdp",
        ],
        example: r#"{"model": "llama-3.1-8b", "gpu": "h100-sxm", "gpus": 8}"#,
        ..OpSpec::new("distributed", "fsdp")
    };

    fn run(&self, ctx: &OpContext, i: FsdpInput) -> Result<FsdpOutput, OpError> {
        let r = resolve_training(
            ctx,
            i.model.as_deref(),
            i.architecture.as_ref(),
            i.params_b,
            i.gpu.as_deref(),
            i.gpus,
            i.nodes,
            i.gpus_per_node,
            i.seq_len,
            Some(1),
            i.dtype,
            None,
            i.usable_memory_fraction,
            None,
            None,
            Some(true),
            Some(false),
        )?;
        let arch = r
            .model
            .arch_for("an FSDP plan (activation memory)")
            .map_err(super::advisor_inputs::model_error)?;
        let g = r.nodes * r.gpn;
        let mb = positive("micro_batch", i.micro_batch.unwrap_or(1))?;
        let bytes = StateBytes::adam(r.dtype).unwrap_or(StateBytes {
            weights: 2.0,
            gradients: 2.0,
            optimizer: 12.0,
        });
        let usable = r.gpu.memory_bytes().unwrap_or(0.0) * r.usable_frac;
        let p = r.model.total_params;
        let layer_params = arch.params_per_layer();
        let mut options = Vec::new();
        let mut shapes: Vec<(&str, u32, bool)> = Vec::new();
        if r.nodes > 1 {
            shapes.push((
                "HSDP: shard within each node, replicate across nodes, keep params after forward",
                r.gpn,
                false,
            ));
            shapes.push((
                "HSDP: shard within each node, reshard after forward",
                r.gpn,
                true,
            ));
        }
        shapes.push((
            "full shard over all GPUs, keep params after forward",
            g,
            false,
        ));
        shapes.push(("full shard over all GPUs, reshard after forward", g, true));
        for (name, shard, reshard) in shapes {
            for ckpt in [false, true] {
                let states = memory::state_memory(p, bytes, 3, shard).total();
                // Kept after forward: every layer's gathered params live until backward;
                // otherwise two layers (current + prefetch).
                let unsharded = if reshard {
                    2.0 * layer_params * bytes.weights
                } else {
                    p * bytes.weights
                };
                let l = ActivationLayout {
                    seq: r.seq as f64,
                    micro_batch: mb as f64,
                    tp: 1,
                    sequence_parallel: false,
                    cp: 1,
                    recompute: if ckpt {
                        Recompute::Full
                    } else {
                        Recompute::None
                    },
                    flash_attention: true,
                    element_scale: if r.dtype == Dtype::Fp32 { 2.0 } else { 1.0 },
                };
                let acts = arch.layers as f64 * memory::activation_bytes_per_layer(arch, &l)
                    + memory::logits_bytes(arch, &l);
                let total = states + unsharded + acts;
                options.push(FsdpOption {
                    name: format!(
                        "{name}{}",
                        if ckpt {
                            ", activation checkpointing"
                        } else {
                            ""
                        }
                    ),
                    shard_group: shard,
                    reshard_after_forward: reshard,
                    activation_checkpointing: ckpt,
                    states_gb: round(states / 1e9, 2),
                    unsharded_params_gb: round(unsharded / 1e9, 2),
                    activations_gb: round(acts / 1e9, 2),
                    total_gb: round(total / 1e9, 2),
                    fits: total <= usable,
                });
            }
        }
        let chosen = options.iter().find(|o| o.fits);
        let (why, snippet) = match chosen {
            Some(o) => {
                let why = format!(
                    "'{}' is the least-communicating option that fits: {:.1} GB of {:.1} GB usable per GPU (states {:.1} GB sharded over {} ranks, unsharded params {:.1} GB, activations {:.1} GB). Options listed before it do not fit.",
                    o.name,
                    o.total_gb,
                    usable / 1e9,
                    o.states_gb,
                    o.shard_group,
                    o.unsharded_params_gb,
                    o.activations_gb
                );
                (why, Some(fsdp_snippet(o, r.nodes, r.gpn, r.dtype)))
            }
            None => (
                format!(
                    "No FSDP option fits {:.1} GB usable: even full sharding with checkpointing needs {:.1} GB per GPU. Add GPUs, add tensor parallelism (aisp_distributed_plan), or offload optimizer states.",
                    usable / 1e9,
                    options.last().map(|o| o.total_gb).unwrap_or(0.0)
                ),
                None,
            ),
        };
        let mut assumptions = r.assumptions.clone();
        assumptions.retain(|a| {
            a.starts_with("model states")
                || a.starts_with("activations")
                || a.starts_with("logits")
                || a.starts_with("usable")
        });
        assumptions.push(format!("FSDP2 semantics: {}", recipes::FSDP2_URL));
        Ok(FsdpOutput {
            model: r.model.summary(),
            gpu: r.gpu.id.clone(),
            nodes: r.nodes,
            gpus_per_node: r.gpn,
            usable_gb: round(usable / 1e9, 2),
            chosen: chosen.map(|o| o.name.clone()),
            options,
            why,
            snippet,
            assumptions,
        })
    }
}

fn fsdp_snippet(o: &FsdpOption, nodes: u32, gpn: u32, dtype: Dtype) -> String {
    let param_dtype = match dtype {
        Dtype::Fp16 => "torch.float16",
        Dtype::Fp32 => "torch.float32",
        _ => "torch.bfloat16",
    };
    let mesh = if o.shard_group == gpn && nodes > 1 {
        format!(
            "mesh = init_device_mesh(\"cuda\", ({nodes}, {gpn}), mesh_dim_names=(\"replicate\", \"shard\"))  # HSDP"
        )
    } else {
        format!("mesh = init_device_mesh(\"cuda\", ({},))", nodes * gpn)
    };
    let ckpt = if o.activation_checkpointing {
        "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper\n\
for i, block in enumerate(model.layers):\n    model.layers[i] = checkpoint_wrapper(block)\n"
    } else {
        ""
    };
    format!(
        "import torch\n\
from torch.distributed.device_mesh import init_device_mesh\n\
from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy\n\n\
{mesh}\n\
mp = MixedPrecisionPolicy(param_dtype={param_dtype}, reduce_dtype=torch.float32)\n\
{ckpt}\
for block in model.layers:\n    fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward={})\n\
fully_shard(model, mesh=mesh, mp_policy=mp)\n\
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)\n",
        if o.reshard_after_forward {
            "True"
        } else {
            "False"
        }
    )
}

// ------------------------------------------------------------------ tensor parallel

pub struct TensorParallel;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TensorParallelInput {
    /// Catalog model id or `hf:org/name` (or give `architecture`).
    #[serde(default)]
    pub model: Option<String>,
    /// A custom model shape.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Parameters in billions: accepted, but this operation needs the shape (model or architecture).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e5))]
    pub params_b: Option<f64>,
    /// Catalog GPU id (default: the local GPU).
    #[serde(default)]
    pub gpu: Option<String>,
    /// Tensor-parallel degree (default: GPUs per node).
    #[serde(default)]
    pub tp: Option<u32>,
    /// GPUs per node (default 8).
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// Tokens per micro-batch on each TP group (sequence × micro-batch) for the communication estimate (default 4096).
    #[serde(default)]
    pub tokens: Option<u32>,
    /// Weight precision (default bf16).
    #[serde(default)]
    pub dtype: Option<Dtype>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TensorParallelOutput {
    pub model: ModelSummary,
    pub gpu: String,
    pub tp: u32,
    /// Query heads and KV heads each rank holds.
    pub heads_per_rank: u32,
    pub kv_heads_per_rank: f64,
    /// KV heads are replicated when tp exceeds them.
    pub kv_replicated: bool,
    pub weights_per_gpu_gb: f64,
    /// All-reduce per layer per direction of the pass, for `tokens` tokens.
    pub allreduce_bytes: f64,
    /// Forward + backward TP communication per layer, ms.
    pub comm_per_layer_ms: f64,
    /// Forward + backward math per layer at the dense peak, ms (100% efficiency: a lower bound).
    pub compute_per_layer_ms: f64,
    pub link: String,
    pub warnings: Vec<String>,
    /// DTensor parallelize_module plan for a Llama-style module tree.
    pub snippet: String,
}

impl Operation for TensorParallel {
    type Input = TensorParallelInput;
    type Output = TensorParallelOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Tensor-parallel configuration",
        summary: "Checks a TP degree against the model (heads, KV heads) and links, estimates per-layer all-reduce vs compute time, and writes the DTensor plan.",
        description: "For a model and TP degree: validates that TP divides the attention heads (and whether KV heads are \
split or replicated), computes weights per GPU, the per-layer all-reduce size and time over the real link (NVLink or \
PCIe from the catalog; across nodes when TP exceeds GPUs per node) against the per-layer math time at the dense peak, \
warns when communication rivals compute, and returns a torch.distributed.tensor.parallel plan \
(ColwiseParallel/RowwiseParallel/SequenceParallel) for Llama-style modules. Use it to pick a TP degree or write the \
TP code. Instant.",
        intents: &[
            "tensor parallel config",
            "tensor parallel degree",
            "dtensor plan",
            "parallelize_module",
            "tp degree",
            "megatron tensor parallel",
            "heads divisible",
        ],
        example: r#"{"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 8}"#,
        ..OpSpec::new("distributed", "tensor_parallel")
    };

    fn run(
        &self,
        ctx: &OpContext,
        i: TensorParallelInput,
    ) -> Result<TensorParallelOutput, OpError> {
        let model = resolve_model(i.model.as_deref(), i.architecture.as_ref(), i.params_b)?;
        let arch = model
            .arch_for("a tensor-parallel plan")
            .map_err(super::advisor_inputs::model_error)?;
        let gpu = gpu_or_local(ctx, i.gpu.as_deref())?;
        let gpn = positive("gpus_per_node", i.gpus_per_node.unwrap_or(8))?;
        let tp = positive("tp", i.tp.unwrap_or(gpn))?;
        if !arch.heads.is_multiple_of(tp) {
            return Err(OpError::invalid_input(
                format!("tp {tp} does not divide the {} attention heads", arch.heads),
                format!("Use a divisor of {}.", arch.heads),
            ));
        }
        let kv = arch.kv_heads();
        if !(kv.is_multiple_of(tp) || tp.is_multiple_of(kv)) {
            return Err(OpError::invalid_input(
                format!("tp {tp} neither divides nor is a multiple of the {kv} KV heads"),
                "Pick a TP degree that divides the KV heads, or a multiple of them (KV heads then replicate).",
            ));
        }
        let dtype = i.dtype.unwrap_or(Dtype::Bf16);
        let links = Links::for_gpu(gpu, gpn, None, None).map_err(links_error)?;
        let bw = links.group_bytes_per_s(tp, 1);
        let tokens = positive("tokens", i.tokens.unwrap_or(4096))? as f64;
        let ar_bytes = tokens * arch.hidden as f64 * 2.0;
        let comm = 4.0
            * aisp_planner::collectives::time_s(
                aisp_planner::collectives::Collective::AllReduce,
                ar_bytes,
                tp,
                bw,
            );
        let peak = super::advisor_inputs::peaks_for(ctx, gpu, dtype, true)?;
        let layer_flops = 6.0 * arch.params_per_layer() * tokens
            + 3.0 * arch.attention_flops_per_token_forward(tokens) / arch.layers as f64 * tokens;
        let compute = layer_flops / tp as f64 / (peak.tflops.value * 1e12);
        let mut warnings = Vec::new();
        if links.crosses_nodes(tp, 1) {
            warnings.push(format!("TP{tp} spans nodes ({gpn} GPUs per node): every layer's all-reduces cross the network at {:.0} GB/s", bw / 1e9));
        }
        if comm > 0.5 * compute {
            warnings.push(format!(
                "communication {:.2} ms per layer is {:.0}% of the math lower bound {:.2} ms: TP{tp} will be communication-heavy on this link",
                comm * 1e3, comm / compute * 100.0, compute * 1e3
            ));
        }
        if tp > kv {
            warnings.push(format!(
                "TP{tp} exceeds the {kv} KV heads: each KV head is replicated on {} ranks",
                tp / kv
            ));
        }
        let snippet = format!(
            "from torch.distributed.device_mesh import init_device_mesh\n\
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,\n    PrepareModuleInput, parallelize_module)\n\
from torch.distributed.tensor import Shard, Replicate\n\n\
tp_mesh = init_device_mesh(\"cuda\", ({tp},))\n\
for block in model.layers:\n\
    block.attention.n_heads = {} // {tp}\n\
    block.attention.n_kv_heads = max(1, {kv} // {tp})\n\
    parallelize_module(block, tp_mesh, {{\n\
        \"attention_norm\": SequenceParallel(),\n\
        \"attention\": PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),\n\
        \"attention.wq\": ColwiseParallel(),\n\
        \"attention.wk\": ColwiseParallel(),\n\
        \"attention.wv\": ColwiseParallel(),\n\
        \"attention.wo\": RowwiseParallel(output_layouts=Shard(1)),\n\
        \"ffn_norm\": SequenceParallel(),\n\
        \"feed_forward\": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),\n\
        \"feed_forward.w1\": ColwiseParallel(),\n\
        \"feed_forward.w3\": ColwiseParallel(),\n\
        \"feed_forward.w2\": RowwiseParallel(output_layouts=Shard(1)),\n\
    }})\n\
# Module names follow torchtitan's Llama; map them to your model's. Docs: {}\n",
            arch.heads,
            recipes::TP_URL
        );
        Ok(TensorParallelOutput {
            model: model.summary(),
            gpu: gpu.id.clone(),
            tp,
            heads_per_rank: arch.heads / tp,
            kv_heads_per_rank: (kv as f64 / tp as f64).max(1.0),
            kv_replicated: tp > kv,
            weights_per_gpu_gb: round(model.total_params * dtype.bytes() / tp as f64 / 1e9, 2),
            allreduce_bytes: ar_bytes,
            comm_per_layer_ms: round(comm * 1e3, 4),
            compute_per_layer_ms: round(compute * 1e3, 4),
            link: if links.crosses_nodes(tp, 1) {
                links.inter_node_kind.clone()
            } else {
                links.intra_node_kind.clone()
            },
            warnings,
            snippet,
        })
    }
}

// ------------------------------------------------------------------ pipeline

pub struct Pipeline;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PipelineInput {
    /// Catalog model id or `hf:org/name` (or give `architecture`).
    #[serde(default)]
    pub model: Option<String>,
    /// A custom model shape.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Parameters in billions: accepted, but this operation needs the shape (model or architecture).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e5))]
    pub params_b: Option<f64>,
    /// Pipeline stages.
    pub pp: u32,
    /// Micro-batches per step (default 4 × pp).
    #[serde(default)]
    pub microbatches: Option<u32>,
    /// Virtual stages per rank for the interleaved schedule (default 2 when layers allow, else 1).
    #[serde(default)]
    pub virtual_stages: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PipelineOutput {
    pub model: ModelSummary,
    pub pp: u32,
    pub microbatches: u32,
    pub stages: Vec<Stage>,
    /// Fraction of a step idle with plain 1F1B, 0–100.
    pub bubble_1f1b_pct: f64,
    pub virtual_stages: u32,
    /// With the interleaved schedule, 0–100.
    pub bubble_interleaved_pct: f64,
    pub schedule: String,
    pub snippet: String,
    pub notes: Vec<String>,
}

impl Operation for Pipeline {
    type Input = PipelineInput;
    type Output = PipelineOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Pipeline-parallel configuration",
        summary: "Splits a model's layers over pipeline stages balanced by compute, gives the 1F1B and interleaved bubble, and writes torch.distributed.pipelining code.",
        description: "For a model and a pipeline degree: assigns layers to stages so each does about the same forward \
FLOPs (the last stage also runs the LM head, the first holds the embedding), reports parameters per stage, the idle \
bubble for plain 1F1B, (p−1)/(m+p−1), and for the interleaved schedule with v virtual stages, (p−1)/(v·m+p−1) \
(Narayanan et al. 2021), and returns a torch.distributed.pipelining snippet with the split points. Use it to set up \
pipeline parallelism or choose the micro-batch count. Instant.",
        intents: &[
            "pipeline parallel config",
            "pipeline stages",
            "1f1b schedule",
            "pipeline bubble",
            "split layers across gpus",
            "stage balancing",
        ],
        example: r#"{"model": "llama-3.1-70b", "pp": 4, "microbatches": 16}"#,
        ..OpSpec::new("distributed", "pipeline")
    };

    fn run(&self, _ctx: &OpContext, i: PipelineInput) -> Result<PipelineOutput, OpError> {
        let model = resolve_model(i.model.as_deref(), i.architecture.as_ref(), i.params_b)?;
        let arch = model
            .arch_for("a pipeline split")
            .map_err(super::advisor_inputs::model_error)?;
        let pp = positive("pp", i.pp)?;
        if pp > arch.layers {
            return Err(OpError::invalid_input(
                format!("pp {pp} exceeds the model's {} layers", arch.layers),
                "Use at most one stage per layer.",
            ));
        }
        let m = positive("microbatches", i.microbatches.unwrap_or(4 * pp))?;
        let v = match i.virtual_stages {
            Some(v) => positive("virtual_stages", v)?,
            None if arch.layers >= 2 * pp => 2,
            None => 1,
        };
        let stages = recipes::split_pipeline(arch, pp);
        let mut notes = Vec::new();
        if m < pp {
            notes.push(format!("{m} micro-batches cannot fill {pp} stages: use at least {pp} (4×pp keeps the 1F1B bubble near 20%)"));
        }
        if v > 1 && arch.layers < v * pp {
            notes.push(format!(
                "{} layers do not split into {} virtual stages",
                arch.layers,
                v * pp
            ));
        }
        let split_points: Vec<String> = stages
            .iter()
            .skip(1)
            .filter_map(|s| {
                s.first_layer
                    .map(|l| format!("\"layers.{l}\": SplitPoint.BEGINNING"))
            })
            .collect();
        let schedule = if v > 1 {
            "ScheduleInterleaved1F1B"
        } else {
            "Schedule1F1B"
        };
        let snippet = format!(
            "from torch.distributed.pipelining import pipeline, SplitPoint, {schedule}\n\n\
pipe = pipeline(model, mb_args=(example_microbatch,), split_spec={{\n    {}\n}})\n\
stage = pipe.build_stage(stage_index=rank, device=device)\n\
schedule = {schedule}(stage, n_microbatches={m}, loss_fn=loss_fn)\n\
# rank 0 feeds inputs, the last rank gets losses:\n\
# schedule.step(x) / schedule.step(target=y, losses=losses)\n\
# Docs: {}\n",
            split_points.join(",\n    "),
            recipes::PIPELINING_URL
        );
        if v > 1 {
            notes.push(format!(
                "the interleaved schedule needs {} model chunks per rank; with the tracer-based pipeline() API build one stage per chunk (split into {} pieces) and pass the list of stages",
                v,
                v * pp
            ));
        }
        Ok(PipelineOutput {
            model: model.summary(),
            pp,
            microbatches: m,
            stages,
            bubble_1f1b_pct: round(recipes::bubble_fraction(pp, m, 1) * 100.0, 2),
            virtual_stages: v,
            bubble_interleaved_pct: round(recipes::bubble_fraction(pp, m, v) * 100.0, 2),
            schedule: schedule.into(),
            snippet,
            notes,
        })
    }
}

// ------------------------------------------------------------------ slurm

pub struct Slurm;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlurmInput {
    /// Training script to run (default train.py).
    #[serde(default)]
    pub script: Option<String>,
    /// Arguments for the script.
    #[serde(default)]
    pub script_args: Option<Vec<String>>,
    /// Nodes (default 1).
    #[serde(default)]
    pub nodes: Option<u32>,
    /// GPUs per node (default 8).
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// CPU cores per GPU (sets cpus-per-task and OMP_NUM_THREADS).
    #[serde(default)]
    pub cpus_per_gpu: Option<u32>,
    /// Job name (default aisp-train).
    #[serde(default)]
    pub job_name: Option<String>,
    /// Wall-clock limit, Slurm format (default 24:00:00).
    #[serde(default)]
    pub time_limit: Option<String>,
    /// Slurm partition.
    #[serde(default)]
    pub partition: Option<String>,
    /// Slurm account.
    #[serde(default)]
    pub account: Option<String>,
    /// torchrun (one per node, default) or srun (one task per GPU with NUMA binding).
    #[serde(default)]
    pub launcher: Option<Launcher>,
    /// Catalog GPU id for the NCCL settings (default: the local GPU; the exported settings do not depend on the GPU model).
    #[serde(default)]
    pub gpu: Option<String>,
    /// Network between nodes for the NCCL settings (default infiniband).
    #[serde(default)]
    pub network: Option<Network>,
    /// Profile every rank with Nsight Systems into this shared folder and digest on each node (then `aisp profile ranks DIR/digests`).
    #[serde(default)]
    pub profile_dir: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SlurmOutput {
    /// The sbatch script.
    pub script: String,
    /// Save it and submit with this.
    pub submit: String,
    pub notes: Vec<String>,
}

impl Operation for Slurm {
    type Input = SlurmInput;
    type Output = SlurmOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Slurm batch script for distributed training",
        summary: "Writes an sbatch script that launches your training script with torchrun (or one srun task per GPU with NUMA binding) and the NCCL settings for the topology.",
        description: "Generates a complete sbatch script: resources (nodes, GPUs per node, CPUs, time, partition, account, \
exclusive), rendezvous on the first node, OMP_NUM_THREADS, the NCCL exports from aisp_distributed_nccl (site-specific \
ones commented with the command that finds them) and the launch line — one torchrun per node with c10d rendezvous, or \
one srun task per GPU bound to its nearest CPU cores (--cpu-bind=cores --gpu-bind=closest). Arguments are shell-quoted. \
It does not submit anything. Use it to move a working single-node script onto a Slurm cluster. Instant.",
        intents: &[
            "slurm script",
            "sbatch",
            "srun torchrun",
            "launch multi node training",
            "cluster job script",
            "launch script",
        ],
        example: r#"{"script": "train.py", "nodes": 2, "gpus_per_node": 8, "cpus_per_gpu": 12}"#,
        ..OpSpec::new("distributed", "slurm")
    };

    fn run(&self, ctx: &OpContext, i: SlurmInput) -> Result<SlurmOutput, OpError> {
        let (nodes, gpn) = topology(None, i.nodes, i.gpus_per_node)?;
        let launcher = i.launcher.unwrap_or(Launcher::Torchrun);
        let mut notes = Vec::new();
        let env = match gpu_or_local(ctx, i.gpu.as_deref()) {
            Ok(gpu) => {
                let links = Links::for_gpu(gpu, gpn, None, None).map_err(links_error)?;
                recipes::nccl_advice(gpu, &links, nodes, i.network, false).settings
            }
            Err(e) if i.gpu.is_some() => return Err(e),
            Err(_) => {
                notes.push("no gpu given and none found locally: only GPU-independent NCCL settings are included".into());
                let h = resolve_gpu("h100-sxm")?; // only for the link object; the settings used do not depend on it
                let links = Links::for_gpu(h, gpn, None, None).map_err(links_error)?;
                recipes::nccl_advice(h, &links, nodes, i.network, false).settings
            }
        };
        let time = i.time_limit.unwrap_or_else(|| "24:00:00".into());
        if !time
            .chars()
            .all(|c| c.is_ascii_digit() || c == ':' || c == '-')
        {
            return Err(OpError::invalid_input(
                format!("time_limit `{time}` is not a Slurm time"),
                "Use minutes, HH:MM:SS or D-HH:MM:SS.",
            ));
        }
        let args = i.script_args.unwrap_or_default();
        let script = recipes::slurm_script(&recipes::SlurmJob {
            job_name: i.job_name.as_deref().unwrap_or("aisp-train"),
            nodes,
            gpus_per_node: gpn,
            cpus_per_gpu: i.cpus_per_gpu,
            time_limit: &time,
            partition: i.partition.as_deref(),
            account: i.account.as_deref(),
            script: i.script.as_deref().unwrap_or("train.py"),
            script_args: &args,
            launcher,
            env: &env,
            profile_dir: i.profile_dir.as_deref(),
        });
        notes.push(format!(
            "launcher docs: {} and {}",
            recipes::TORCHRUN_URL,
            recipes::SLURM_SRUN_URL
        ));
        if launcher == Launcher::Torchrun {
            notes.push("for NUMA binding with torchrun, pin each rank in the script (os.sched_setaffinity to its GPU's CPU list from `nvidia-smi topo -m`), or use launcher: srun".into());
        }
        Ok(SlurmOutput {
            script,
            submit: "sbatch job.sbatch".into(),
            notes,
        })
    }
}

// ------------------------------------------------------------------ cost estimate

pub struct CostEstimate;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CostEstimateInput {
    /// Catalog model id or `hf:org/name`.
    #[serde(default)]
    pub model: Option<String>,
    /// A custom model shape.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Parameters in billions (dense model), instead of model/architecture.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e5))]
    pub params_b: Option<f64>,
    /// Training tokens (default 20 × parameters, the Chinchilla-optimal count).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e18))]
    pub tokens: Option<f64>,
    /// GPUs the run uses, for wall-clock time (default 8).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// Model FLOPs utilization to assume, fraction (default 0.40; Llama 3 reports 38–43% in BF16).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1))]
    pub mfu: Option<f64>,
    /// Restrict to these catalog GPU ids (default: every GPU with a public BF16 peak).
    #[serde(default)]
    pub gpu_types: Option<Vec<String>>,
    /// Your price per GPU-hour in USD, applied to every GPU type instead of the catalog ranges.
    #[serde(default)]
    #[schemars(range(min = 0, max = 1e4))]
    pub price_usd_per_gpu_hour: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct GpuCost {
    pub gpu: String,
    pub bf16_tflops: f64,
    pub gpu_hours: f64,
    /// Wall-clock days on the requested GPU count.
    pub wall_clock_days: f64,
    /// GPUs needed just to hold 16 bytes/parameter of model states (before activations).
    pub min_gpus_for_states: u32,
    pub cost_low_usd: Option<f64>,
    pub cost_high_usd: Option<f64>,
    pub price_source: Option<String>,
    pub price_note: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CostEstimateOutput {
    pub model: ModelSummary,
    pub tokens: f64,
    /// 6·N·D.
    pub training_flops: f64,
    pub mfu: f64,
    pub gpus: u32,
    /// Cheapest first (by the low end of the range); GPUs without a public price last.
    pub by_gpu: Vec<GpuCost>,
    pub assumptions: Vec<String>,
}

impl Operation for CostEstimate {
    type Input = CostEstimateInput;
    type Output = CostEstimateOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Training cost on each GPU type",
        summary: "GPU-hours, wall-clock days and cost for a training run (6·N·D at a stated MFU) on every cataloged GPU, with the price sources.",
        description: "Computes training compute as 6·N·D FLOPs (Transformer Math 101; default D = 20·N, Chinchilla), \
then for every GPU in the catalog with a public BF16 peak (or the ones you list): GPU-hours at the assumed MFU \
(default 0.40, the 38–43% Llama 3 reports), wall-clock days on your GPU count, the minimum GPUs that hold 16 \
bytes/parameter of model states, and cost from the catalog's dated on-demand price range with its source — or from \
your own price. GPUs without a public price show null cost with a note rather than a guess. Use it to compare clouds \
and GPU generations for a run. Instant.",
        intents: &[
            "training cost",
            "cost to train",
            "how much to train",
            "gpu hours",
            "cloud cost",
            "compare gpu prices",
            "budget for training",
            "trillion tokens",
        ],
        example: r#"{"model": "llama-3.1-8b", "tokens": 1e12, "gpus": 64}"#,
        ..OpSpec::new("distributed", "cost_estimate")
    };

    fn run(&self, _ctx: &OpContext, i: CostEstimateInput) -> Result<CostEstimateOutput, OpError> {
        let model = resolve_model(i.model.as_deref(), i.architecture.as_ref(), i.params_b)?;
        let n = model.active_params;
        let tokens = i.tokens.unwrap_or(20.0 * model.total_params);
        if !(tokens.is_finite() && tokens > 0.0) {
            return Err(OpError::invalid_input(
                "tokens must be positive",
                "Pass tokens like 1e12.",
            ));
        }
        let mfu = fraction("mfu", i.mfu, 0.40)?;
        let gpus_n = positive("gpus", i.gpus.unwrap_or(8))?;
        if let Some(p) = i.price_usd_per_gpu_hour
            && !(p.is_finite() && p > 0.0)
        {
            return Err(OpError::invalid_input(
                "price_usd_per_gpu_hour must be positive",
                "Pass your price like 2.5.",
            ));
        }
        let flops = 6.0 * n * tokens;
        let list: Vec<&gpus::Gpu> = match &i.gpu_types {
            Some(ids) => ids
                .iter()
                .map(|id| resolve_gpu(id))
                .collect::<Result<_, _>>()?,
            None => gpus::all()
                .iter()
                .filter(|g| g.peak_tflops(Precision::Bf16).is_some())
                .collect(),
        };
        let mut by_gpu = Vec::new();
        for g in list {
            let Some(tf) = g.peak_tflops(Precision::Bf16) else {
                return Err(OpError::invalid_input(
                    format!("{} has no public BF16 peak in the catalog", g.id),
                    "Leave it out of gpu_types.",
                ));
            };
            let hours = flops / (tf * 1e12 * mfu) / 3600.0;
            let states = model.total_params * 16.0;
            let min_gpus = g
                .memory_bytes()
                .map(|m| (states / m).ceil() as u32)
                .unwrap_or(0);
            let (low, high, src, note) = match i.price_usd_per_gpu_hour {
                Some(p) => (
                    Some(p),
                    Some(p),
                    Some("given in the call".to_string()),
                    None,
                ),
                None => {
                    let pr = &g.price_usd_per_gpu_hour;
                    (
                        pr.low_usd,
                        pr.high_usd,
                        pr.source_url.clone(),
                        pr.note.clone().map(|n| match &pr.as_of {
                            Some(d) => format!("{n} (as of {d})"),
                            None => n,
                        }),
                    )
                }
            };
            by_gpu.push(GpuCost {
                gpu: g.id.clone(),
                bf16_tflops: tf,
                gpu_hours: round(hours, 1),
                wall_clock_days: round(hours / gpus_n as f64 / 24.0, 2),
                min_gpus_for_states: min_gpus,
                cost_low_usd: low.map(|p| round(p * hours, 0)),
                cost_high_usd: high.map(|p| round(p * hours, 0)),
                price_source: src,
                price_note: note,
            });
        }
        by_gpu.sort_by(|a, b| match (a.cost_low_usd, b.cost_low_usd) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.gpu_hours.total_cmp(&b.gpu_hours),
        });
        let mut assumptions = vec![
            format!(
                "training FLOPs = 6·N·D with N = {:.3e} active parameters (Transformer Math 101, {})",
                n,
                memory::TRANSFORMER_MATH_URL
            ),
            format!(
                "MFU {:.0}% of the dense BF16 datasheet peak; Llama 3 reports 38–43% BF16 MFU on 16K H100s ({})",
                mfu * 100.0,
                training::LLAMA3_URL
            ),
            "GPU-hours exclude restarts, evaluation and checkpointing".into(),
        ];
        if i.tokens.is_none() {
            assumptions.push("tokens = 20 × parameters, Chinchilla-optimal (Hoffmann et al. 2022, https://arxiv.org/abs/2203.15556)".into());
        }
        Ok(CostEstimateOutput {
            model: model.summary(),
            tokens,
            training_flops: flops,
            mfu,
            gpus: gpus_n,
            by_gpu,
            assumptions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppState;
    use crate::error::ErrorKind;

    fn ctx() -> OpContext {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(aisp_hw::gpu::GpuAvailability::unavailable(
            "test host",
            false,
        ));
        OpContext::detached(app)
    }

    fn plan(args: serde_json::Value) -> Result<PlanOutput, OpError> {
        let input: PlanInput = serde_json::from_value(args).unwrap();
        Plan.run(&ctx(), input)
    }

    #[test]
    fn plan_ranks_layouts_for_8b_on_one_node() {
        let out = plan(serde_json::json!({"model": "llama-3.1-8b", "gpu": "h100-sxm", "gpus": 8, "global_batch": 64})).unwrap();
        assert!(out.feasible > 0);
        let best = &out.candidates[0];
        assert!(best.memory.total_gb <= 72.0);
        assert!(out.verdict.starts_with("Best of"));
        assert!(
            out.rejected
                .iter()
                .any(|r| r.reason.starts_with("does not fit"))
        );
        assert!(out.assumptions.iter().any(|a| a.contains("2205.05198")));
        assert_eq!(out.peaks.tflops.value, 989.4);
    }

    #[test]
    fn plan_says_why_nothing_fits() {
        let out = plan(serde_json::json!({"model": "llama-3.1-70b", "gpu": "h100-sxm", "gpus": 8}))
            .unwrap();
        assert_eq!(out.feasible, 0);
        assert!(out.verdict.contains("1129 GB"), "{}", out.verdict);
    }

    #[test]
    fn plan_input_errors_are_actionable() {
        let e = plan(serde_json::json!({"model": "llama-3.1-8b", "gpus": 8})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        assert!(e.message.contains("no `gpu` was given"));
        let e = plan(serde_json::json!({"model": "nope", "gpu": "h100-sxm"})).unwrap_err();
        assert!(e.message.contains("known models"));
        let e =
            plan(serde_json::json!({"model": "llama-3.1-8b", "gpu": "h100-sxm", "dtype": "int4"}))
                .unwrap_err();
        assert!(e.message.contains("not a training precision"));
    }

    #[test]
    fn fsdp_picks_the_least_communicating_option_that_fits() {
        let input: FsdpInput = serde_json::from_value(
            serde_json::json!({"model": "llama-3.1-8b", "gpu": "h100-sxm", "gpus": 16, "nodes": 2}),
        )
        .unwrap();
        let out = Fsdp.run(&ctx(), input).unwrap();
        let chosen = out.chosen.clone().unwrap();
        let idx = out.options.iter().position(|o| o.name == chosen).unwrap();
        assert!(out.options[..idx].iter().all(|o| !o.fits));
        assert!(
            out.snippet
                .unwrap()
                .contains("fully_shard(model, mesh=mesh, mp_policy=mp)")
        );
        // HSDP states: 16 B × 8.03e9 / 8 = 16.06 GB.
        assert_eq!(out.options[0].states_gb, 16.06);
    }

    #[test]
    fn cost_estimate_is_six_n_d_over_peak_times_mfu() {
        let input: CostEstimateInput = serde_json::from_value(serde_json::json!({"params_b": 7, "tokens": 1e12, "gpu_types": ["h100-sxm"], "mfu": 0.4})).unwrap();
        let out = CostEstimate.run(&ctx(), input).unwrap();
        assert_eq!(out.training_flops, 4.2e22);
        let h = &out.by_gpu[0];
        // 4.2e22 / (989.4e12 · 0.4) / 3600 = 29,479.1 GPU-hours.
        assert_eq!(h.gpu_hours, 29479.1);
        assert_eq!(
            h.cost_low_usd,
            Some(round(1.99 * 4.2e22 / (989.4e12 * 0.4) / 3600.0, 0))
        );
        // A GPU without a public BF16 peak is refused, not guessed.
        let bad: CostEstimateInput =
            serde_json::from_value(serde_json::json!({"params_b": 7, "gpu_types": ["a10g"]}))
                .unwrap();
        assert!(CostEstimate.run(&ctx(), bad).is_err());
    }

    #[test]
    fn pipeline_and_tp_ops_validate_divisibility() {
        let tp: TensorParallelInput = serde_json::from_value(
            serde_json::json!({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 3}),
        )
        .unwrap();
        assert!(
            TensorParallel
                .run(&ctx(), tp)
                .unwrap_err()
                .message
                .contains("does not divide the 64 attention heads")
        );
        let tp: TensorParallelInput = serde_json::from_value(
            serde_json::json!({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 8}),
        )
        .unwrap();
        let out = TensorParallel.run(&ctx(), tp).unwrap();
        assert_eq!(out.heads_per_rank, 8);
        assert_eq!(out.kv_heads_per_rank, 1.0);
        assert!(!out.kv_replicated);
        let pp: PipelineInput = serde_json::from_value(
            serde_json::json!({"model": "llama-3.1-70b", "pp": 4, "microbatches": 16}),
        )
        .unwrap();
        let out = Pipeline.run(&ctx(), pp).unwrap();
        assert_eq!(out.bubble_1f1b_pct, round(3.0 / 19.0 * 100.0, 2));
        assert_eq!(out.bubble_interleaved_pct, round(3.0 / 35.0 * 100.0, 2));
        assert!(out.snippet.contains("SplitPoint.BEGINNING"));
    }
}
