//! Operations of the `inference` domain: KV-cache sizing, roofline latency
//! and throughput estimates, vLLM configuration, weight-format trade-offs,
//! replica sizing and cost per token.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::advisor_inputs::{fraction, gpu_or_local, peaks_for, positive, resolve_model};
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, OpSpec, Operation};
use aisp_knowledge::Dtype;
use aisp_knowledge::gpus::Gpu;
use aisp_knowledge::models::Architecture;
use aisp_knowledge::techniques::{self, Goal, Level};
use aisp_planner::inference::{self, DecodeStep, KvCache, Prefill, Roofline};
use aisp_planner::links::Links;
use aisp_planner::peaks::Peaks;
use aisp_planner::round;
use aisp_planner::serving::{self, Choice, ReplicaPlan, TokenCost, WeightFormat};
use aisp_planner::{ModelSpec, ModelSummary};

pub const OPERATIONS: &[&dyn DynOperation] = &[
    &KvCacheOp,
    &Estimate,
    &Vllm,
    &Quantization,
    &Deploy,
    &CostPerToken,
];

fn kv_dtype_check(d: Dtype) -> Result<Dtype, OpError> {
    match d {
        Dtype::Int4 => Err(OpError::invalid_input(
            "int4 is not a KV-cache format aisp models",
            "Use fp32, bf16, fp16, fp8 or int8 for the KV cache.",
        )),
        d => Ok(d),
    }
}

// ------------------------------------------------------------------ kv_cache

pub struct KvCacheOp;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KvCacheInput {
    /// Catalog model id or `hf:org/name`, e.g. `llama-3.1-70b` (or give `architecture`).
    #[serde(default)]
    pub model: Option<String>,
    /// A custom model shape (layers, hidden, heads, kv_heads, ...).
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Parameters in billions: accepted, but this operation needs the shape (model or architecture).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e5))]
    pub params_b: Option<f64>,
    /// Tokens per sequence (prompt + output); default 4096.
    #[serde(default)]
    #[schemars(range(max = 100000000))]
    pub seq_len: Option<u64>,
    /// Concurrent sequences (default 1).
    #[serde(default)]
    #[schemars(range(max = 1000000))]
    pub batch: Option<u64>,
    /// KV-cache element format (default fp16).
    #[serde(default)]
    pub dtype: Option<Dtype>,
    /// Catalog GPU id: also report how many sequences of seq_len fit beside the weights.
    #[serde(default)]
    pub gpu: Option<String>,
    /// Tensor-parallel degree for the fit check (default 1).
    #[serde(default)]
    pub tp: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct KvCacheOutput {
    pub model: ModelSummary,
    pub dtype: Dtype,
    pub seq_len: u64,
    pub batch: u64,
    pub bytes_per_token: f64,
    pub total_bytes: f64,
    pub kv: KvCache,
    /// KV bytes relative to full multi-head attention (kv_heads / heads; MLA: latent vs 2·heads·head_dim).
    pub vs_full_mha: f64,
    /// With `gpu`: sequences of seq_len that fit per replica beside bf16 weights at 90% memory.
    pub max_sequences_on_gpu: Option<u64>,
    pub notes: Vec<String>,
}

impl Operation for KvCacheOp {
    type Input = KvCacheInput;
    type Output = KvCacheOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "KV-cache size",
        summary: "KV-cache bytes per token and for batch × seq_len, GQA/MQA/MLA-aware, per dtype; optionally how many sequences fit on a GPU.",
        description: "How much KV cache a transformer needs: bytes per token (2 x layers x kv_heads x head_dim x bytes; GQA and MLA aware), per sequence and for batch x seq_len in the chosen dtype, and with a gpu how many sequences fit beside the weights. Instant.",
        intents: &[
            "kv cache",
            "kv cache size",
            "how much memory for context",
            "kv cache per token",
            "gqa memory",
            "context length memory",
            "memory for long context",
        ],
        example: r#"{"model": "llama-3.1-70b", "seq_len": 8192, "batch": 16, "dtype": "fp16"}"#,
        ..OpSpec::new("inference", "kv_cache")
    };

    fn run(&self, ctx: &OpContext, i: KvCacheInput) -> Result<KvCacheOutput, OpError> {
        let model = resolve_model(i.model.as_deref(), i.architecture.as_ref(), i.params_b)?;
        let arch = model
            .arch_for("the KV cache")
            .map_err(super::advisor_inputs::model_error)?;
        let dtype = kv_dtype_check(i.dtype.unwrap_or(Dtype::Fp16))?;
        let seq = i.seq_len.unwrap_or(4096);
        let batch = i.batch.unwrap_or(1);
        if seq == 0 || batch == 0 {
            return Err(OpError::invalid_input(
                "seq_len and batch must be at least 1",
                "Pass positive numbers.",
            ));
        }
        let kv = inference::kv_cache(arch, dtype, seq, batch);
        let full = 2.0 * arch.heads as f64 * arch.head_dim() as f64;
        let vs = arch.kv_elements_per_token_per_layer() / full;
        let mut notes = Vec::new();
        let max_seq = match &i.gpu {
            Some(g) => {
                let gpu = gpu_or_local(ctx, Some(g))?;
                let tp = positive("tp", i.tp.unwrap_or(1))?;
                let r = Roofline {
                    model: &model,
                    weight_dtype: Dtype::Bf16,
                    kv_dtype: dtype,
                    tp,
                    peak_tflops: 1.0,
                    memory_gb_per_s: 1.0,
                    compute_efficiency: 1.0,
                    memory_efficiency: 1.0,
                    tp_link_gb_per_s: 1.0,
                };
                let usable = gpu.memory_bytes().unwrap_or(0.0) * serving::VLLM_DEFAULT_UTILIZATION;
                notes.push(format!(
                    "fit check: bf16 weights {:.1} GB per GPU (TP{tp}) within {:.1} GB (90% of {} GB); activation workspace not subtracted",
                    r.weight_bytes() / tp as f64 / 1e9, usable / 1e9, gpu.memory_gb.value.unwrap_or(0.0)
                ));
                Some(r.max_batch(seq, usable) as u64)
            }
            None => None,
        };
        Ok(KvCacheOutput {
            model: model.summary(),
            dtype,
            seq_len: seq,
            batch,
            bytes_per_token: kv.bytes_per_token,
            total_bytes: kv.total_bytes,
            vs_full_mha: round(vs, 4),
            kv,
            max_sequences_on_gpu: max_seq,
            notes,
        })
    }
}

// ------------------------------------------------------------------ estimate

pub struct Estimate;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EstimateInput {
    /// Catalog model id or `hf:org/name` (or `architecture`, or `params_b` for a weights-only estimate).
    #[serde(default)]
    pub model: Option<String>,
    /// A custom model shape.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Parameters in billions (dense); no KV or attention terms then.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e5))]
    pub params_b: Option<f64>,
    /// Catalog GPU id (default: the local GPU).
    #[serde(default)]
    pub gpu: Option<String>,
    /// Tensor-parallel GPUs serving one replica (default 1).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// Weight format: bf16 (default), fp8, int8, awq or gptq.
    #[serde(default)]
    pub weights: Option<WeightFormat>,
    /// KV-cache format (default bf16).
    #[serde(default)]
    pub kv_dtype: Option<Dtype>,
    /// Prompt tokens (default 1024).
    #[serde(default)]
    #[schemars(range(max = 100000000))]
    pub prompt_tokens: Option<u64>,
    /// Generated tokens (default 256).
    #[serde(default)]
    #[schemars(range(max = 100000000))]
    pub output_tokens: Option<u64>,
    /// Concurrent sequences for the headline numbers (default 1).
    #[serde(default)]
    pub batch: Option<u32>,
    /// Fraction of peak FLOP/s reached (default 0.7, llm-analysis's inference guidance).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1))]
    pub compute_efficiency: Option<f64>,
    /// Fraction of peak memory bandwidth reached (default 0.9).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1))]
    pub memory_efficiency: Option<f64>,
    /// Use measured roofs from benchmark history when they exist (default true).
    #[serde(default)]
    pub use_measured_roofs: Option<bool>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct EstimateOutput {
    pub model: ModelSummary,
    pub gpu: String,
    pub tp: u32,
    pub weights: WeightFormat,
    pub peaks: Peaks,
    pub weights_per_gpu_gb: f64,
    pub prefill: Prefill,
    /// Decode at the mean context of generation (prompt + output/2).
    pub decode: DecodeStep,
    /// Time to first token (prefill) plus output_tokens decode steps.
    pub request_latency_ms: f64,
    /// Batch 1, 2, 4, … until memory runs out (or 1024).
    pub batch_sweep: Vec<DecodeStep>,
    /// Dense crossover batch where weight reads and math take equal time.
    pub crossover_batch: f64,
    /// First batch in the sweep that is compute-bound, if any.
    pub first_compute_bound_batch: Option<u32>,
    /// Sequences of prompt+output tokens that fit beside the weights at 90% memory.
    pub max_batch_by_memory: u32,
    pub fits: bool,
    pub assumptions: Vec<String>,
}

/// Shared roofline construction for the inference operations.
#[allow(clippy::too_many_arguments)]
fn roofline<'a>(
    ctx: &OpContext,
    model: &'a ModelSpec,
    gpu: &Gpu,
    tp: u32,
    weights: WeightFormat,
    kv: Dtype,
    ce: Option<f64>,
    me: Option<f64>,
    measured: bool,
) -> Result<(Roofline<'a>, Peaks, Vec<String>), OpError> {
    if let Some(cc) = serving::compute_capability(gpu)
        && cc < weights.min_compute_capability()
    {
        return Err(OpError::invalid_input(
            format!(
                "{} needs compute capability {} or newer; {} is {}",
                weights.as_str(),
                weights.min_compute_capability(),
                gpu.id,
                gpu.compute_capability
            ),
            "Pick another weight format (aisp_inference_quantization lists what this GPU supports).",
        ));
    }
    let peaks = peaks_for(ctx, gpu, weights.dtype(), measured)?;
    let ce = fraction(
        "compute_efficiency",
        ce,
        inference::DEFAULT_INFERENCE_COMPUTE_EFFICIENCY,
    )?;
    let me = fraction(
        "memory_efficiency",
        me,
        inference::DEFAULT_MEMORY_EFFICIENCY,
    )?;
    let links = Links::for_gpu(gpu, tp.max(1), None, None).map_err(|e| {
        OpError::invalid_input(e.to_string(), "Pick a GPU with a known link bandwidth.")
    })?;
    let (_, compute_note) = weights.dtype().compute_precision();
    let assumptions = vec![
        format!(
            "roofline: step time = max(bytes / ({:.0} GB/s × {me}), FLOPs / ({} TFLOP/s {} × {ce})) + TP all-reduces; bandwidth {} ({}), peak {} ({})",
            peaks.memory_gb_per_s.value, peaks.tflops.value, peaks.precision.as_str(),
            peaks.memory_gb_per_s.origin, peaks.memory_gb_per_s.source, peaks.tflops.origin, peaks.tflops.source
        ),
        format!("efficiencies {ce} (compute) and {me} (memory) follow llm-analysis's inference guidance (https://github.com/cli99/llm-analysis)"),
        format!("weights: {}; {compute_note}", weights.as_str()),
        "decode reads all weights once per step plus each sequence's KV; MoE reads the experts the batch routes to (uniform routing)".into(),
        format!(
            "TP all-reduces: 2 per layer over {:.0} GB/s per direction at the nccl-tests factor 2(n−1)/n; small-message latency not modeled (it dominates tiny decode all-reduces: measure with the hw domain)",
            links.intra_node_gb_per_s
        ),
        "not modeled: scheduler and kernel-launch overhead, sampling, queueing".into(),
    ];
    Ok((
        Roofline {
            compute_efficiency: ce,
            memory_efficiency: me,
            tp_link_gb_per_s: links.intra_node_gb_per_s,
            ..serving::roofline_for(model, weights, &peaks, tp, kv, gpu)
        },
        peaks,
        assumptions,
    ))
}

impl Operation for Estimate {
    type Input = EstimateInput;
    type Output = EstimateOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Inference latency and throughput from a roofline",
        summary: "Prefill and decode time, tokens/s and a batch sweep showing where decode turns compute-bound, from weights/KV bytes over HBM bandwidth and FLOPs over the tensor peak.",
        description: "Estimates LLM serving speed for a model on a GPU (and tensor-parallel degree) from first principles: prefill time (TTFT), decode tokens/s per sequence and in total, request latency, and a batch sweep marking memory- vs compute-bound steps and the largest batch that fits. Use to size batches, compare GPUs or check measured numbers. Instant.",
        intents: &[
            "inference estimate",
            "tokens per second",
            "decode latency",
            "time to first token",
            "memory bound decode",
            "batch size throughput",
            "serving speed",
            "how fast will it generate",
        ],
        example: r#"{"model": "llama-3.1-8b", "gpu": "h100-sxm", "prompt_tokens": 1024, "output_tokens": 256}"#,
        ..OpSpec::new("inference", "estimate")
    };

    fn run(&self, ctx: &OpContext, i: EstimateInput) -> Result<EstimateOutput, OpError> {
        let model = resolve_model(i.model.as_deref(), i.architecture.as_ref(), i.params_b)?;
        let gpu = gpu_or_local(ctx, i.gpu.as_deref())?;
        let tp = positive("gpus", i.gpus.unwrap_or(1))?;
        let weights = i.weights.unwrap_or(WeightFormat::Bf16);
        let kv = kv_dtype_check(i.kv_dtype.unwrap_or(Dtype::Bf16))?;
        let (r, peaks, mut assumptions) = roofline(
            ctx,
            &model,
            gpu,
            tp,
            weights,
            kv,
            i.compute_efficiency,
            i.memory_efficiency,
            i.use_measured_roofs.unwrap_or(true),
        )?;
        if model.arch.is_none() {
            assumptions.push("params_b only: KV-cache reads and attention FLOPs are not included (give model or architecture)".into());
        }
        let prompt = i.prompt_tokens.unwrap_or(1024);
        let output = i.output_tokens.unwrap_or(256);
        let batch = positive("batch", i.batch.unwrap_or(1))?;
        let usable = gpu.memory_bytes().unwrap_or(0.0) * serving::VLLM_DEFAULT_UTILIZATION;
        let ctx_len = prompt + output;
        let max_b = r.max_batch(ctx_len, usable);
        let prefill = r.prefill(batch, prompt);
        let decode = r.decode(batch, prompt + output / 2);
        let latency = prefill.time_ms + output as f64 * decode.step_ms;
        let sweep = r.sweep(prompt + output / 2, max_b.clamp(1, 1024));
        let first_cb = sweep.iter().find(|d| d.bound == "compute").map(|d| d.batch);
        Ok(EstimateOutput {
            model: model.summary(),
            gpu: gpu.id.clone(),
            tp,
            weights,
            weights_per_gpu_gb: round(r.weight_bytes() / tp as f64 / 1e9, 2),
            peaks,
            prefill,
            decode,
            request_latency_ms: round(latency, 2),
            crossover_batch: round(r.crossover_batch(), 1),
            first_compute_bound_batch: first_cb,
            max_batch_by_memory: max_b,
            fits: max_b >= batch,
            batch_sweep: sweep,
            assumptions,
        })
    }
}

// ------------------------------------------------------------------ vllm

pub struct Vllm;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VllmInput {
    /// Catalog model id or `hf:org/name` (or `architecture` with `hf_model`).
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
    /// The model path or Hugging Face id to put on the command line (default: derived from the catalog source).
    #[serde(default)]
    pub hf_model: Option<String>,
    /// Catalog GPU id (default: the local GPU).
    #[serde(default)]
    pub gpu: Option<String>,
    /// GPUs available for one server (default 1).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// GPUs per node (default min(gpus, 8)).
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// Longest context to serve (default: the model's maximum).
    #[serde(default)]
    pub max_model_len: Option<u32>,
    /// Typical tokens per request (prompt + output), for max_num_seqs (default max_model_len / 4).
    #[serde(default)]
    pub avg_request_tokens: Option<u32>,
    /// throughput (default), latency, memory or cost.
    #[serde(default)]
    pub goal: Option<Goal>,
    /// Weight format: bf16 (default), fp8, int8, awq or gptq.
    #[serde(default)]
    pub weights: Option<WeightFormat>,
    /// KV-cache format: bf16 or fp8 (default: chosen for the goal and GPU).
    #[serde(default)]
    pub kv_dtype: Option<Dtype>,
    /// gpu_memory_utilization (default 0.9, vLLM's default; 0.95 for the memory goal).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1))]
    pub gpu_memory_utilization: Option<f64>,
    /// A smaller draft model for speculative decoding (latency goal only).
    #[serde(default)]
    pub draft_model: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct VllmOutput {
    pub model: ModelSummary,
    pub gpu: String,
    pub goal: Goal,
    /// The launch command.
    pub command: String,
    /// The same settings as a JSON object of engine arguments.
    pub engine_args: serde_json::Map<String, serde_json::Value>,
    /// Every choice, with why and the numbers used.
    pub choices: Vec<Choice>,
    /// KV tokens per replica after weights and workspace.
    pub kv_capacity_tokens: u64,
    /// Decode at max_num_seqs sequences of avg_request_tokens.
    pub decode_at_max_seqs: Option<DecodeStep>,
    /// Replicas that fit on the GPUs given (each tp × pp GPUs).
    pub replicas: u32,
    pub warnings: Vec<String>,
    pub assumptions: Vec<String>,
}

impl Operation for Vllm {
    type Input = VllmInput;
    type Output = VllmOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "vLLM configuration",
        summary: "A vLLM launch command and engine arguments for a model, GPU and goal: TP/PP, gpu_memory_utilization, max_model_len and max_num_seqs from the KV budget, KV dtype, chunked prefill, prefix caching, speculative decoding — each explained.",
        description: "Derives a vLLM serving configuration: tensor (and if needed pipeline) parallel size from weight \
bytes vs usable memory, gpu_memory_utilization, the KV budget left after weights and an activation workspace, \
max_model_len (clamped to what the KV budget holds), max_num_seqs (throughput: up to the decode crossover batch the \
KV allows; latency: the largest batch within 10% of batch-1 step time), kv_cache_dtype (fp8 on Ada/Hopper/Blackwell \
when the goal or budget calls for it), max_num_batched_tokens and chunked prefill (2048 for latency, 8192 for \
throughput, per vLLM's tuning guide), prefix caching and optional speculative decoding. Every choice comes with the \
numbers behind it; outputs include the command, engine args and a decode estimate. Use it to start a server that \
fits, or to understand a config. Instant.",
        intents: &[
            "vllm config",
            "vllm command",
            "vllm serve",
            "serve model with vllm",
            "gpu_memory_utilization",
            "max_num_seqs",
            "tensor parallel size vllm",
            "engine arguments",
        ],
        example: r#"{"model": "llama-3.1-70b", "gpu": "h100-sxm", "gpus": 4, "goal": "throughput"}"#,
        ..OpSpec::new("inference", "vllm")
    };

    fn run(&self, ctx: &OpContext, i: VllmInput) -> Result<VllmOutput, OpError> {
        let model = resolve_model(i.model.as_deref(), i.architecture.as_ref(), i.params_b)?;
        let arch = model
            .arch_for("a vLLM configuration (KV budget)")
            .map_err(super::advisor_inputs::model_error)?
            .clone();
        let gpu = gpu_or_local(ctx, i.gpu.as_deref())?;
        let gpus = positive("gpus", i.gpus.unwrap_or(1))?;
        let gpn = positive("gpus_per_node", i.gpus_per_node.unwrap_or(gpus.min(8)))?;
        let goal = i.goal.unwrap_or(Goal::Throughput);
        let weights = i.weights.unwrap_or(WeightFormat::Bf16);
        let util = match i.gpu_memory_utilization {
            Some(u) => fraction("gpu_memory_utilization", Some(u), 0.9)?,
            None if goal == Goal::Memory => 0.95,
            None => serving::VLLM_DEFAULT_UTILIZATION,
        };
        let kv_requested = i.kv_dtype.map(kv_dtype_check).transpose()?;
        // TP (and PP) choice.
        let kv_try = kv_requested.unwrap_or(Dtype::Bf16);
        let (r_probe, peaks, mut assumptions) =
            roofline(ctx, &model, gpu, 1, weights, kv_try, None, None, true)?;
        let _ = r_probe;
        let plan = aisp_planner::vllm::plan(
            &aisp_planner::vllm::Request {
                model: &model,
                arch: &arch,
                gpu,
                peaks: &peaks,
                gpus,
                gpus_per_node: gpn,
                goal,
                weights,
                utilization: util,
                utilization_given: i.gpu_memory_utilization.is_some(),
                kv_requested,
                max_model_len: i.max_model_len,
                avg_request_tokens: i.avg_request_tokens,
                hf_model: i.hf_model.clone(),
                draft_model: i.draft_model.clone(),
            },
            &mut assumptions,
        )
        .map_err(|e| match e {
            aisp_planner::vllm::VllmError::DoesNotFit(msg) => OpError::invalid_input(
                msg,
                "Give more GPUs, or a smaller weight format (weights: fp8, awq or gptq).",
            ),
        })?;
        Ok(VllmOutput {
            model: model.summary(),
            gpu: gpu.id.clone(),
            goal,
            command: plan.command,
            engine_args: plan.engine_args,
            choices: plan.choices,
            kv_capacity_tokens: plan.kv_capacity_tokens,
            decode_at_max_seqs: plan.decode_at_max_seqs,
            replicas: plan.replicas,
            warnings: plan.warnings,
            assumptions,
        })
    }
}

// ------------------------------------------------------------------ quantization

pub struct Quantization;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuantizationInput {
    /// Catalog model id or `hf:org/name` (or `architecture`, or `params_b`).
    #[serde(default)]
    pub model: Option<String>,
    /// A custom model shape.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Parameters in billions (dense).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e5))]
    pub params_b: Option<f64>,
    /// Catalog GPU id (default: the local GPU).
    #[serde(default)]
    pub gpu: Option<String>,
    /// GPUs available (default 1).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// Tokens per sequence for the KV and batch figures (default 4096).
    #[serde(default)]
    #[schemars(range(max = 100000000))]
    pub seq_len: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FormatOption {
    pub weights: WeightFormat,
    pub kv_dtype: Dtype,
    pub weights_gb: f64,
    /// Whether this GPU has fast kernels for the format.
    pub supported: bool,
    pub support_note: String,
    /// Smallest TP degree (power of two ≤ gpus) that holds weights + one sequence; null if none.
    pub min_gpus: Option<u32>,
    /// Sequences of seq_len that fit at that TP.
    pub max_batch: Option<u32>,
    /// Batch-1 decode tokens/s at that TP.
    pub batch1_tokens_per_s: Option<f64>,
    /// Total tokens/s at max_batch (capped at 256).
    pub max_batch_tokens_per_s: Option<f64>,
    /// Quality risk (aisp's rating from the technique catalog) and the source's measured effect.
    pub quality_risk: Option<Level>,
    pub evidence: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct QuantizationOutput {
    pub model: ModelSummary,
    pub gpu: String,
    pub gpus: u32,
    pub seq_len: u64,
    pub options: Vec<FormatOption>,
    pub recommendation: String,
    pub assumptions: Vec<String>,
}

impl Operation for Quantization {
    type Input = QuantizationInput;
    type Output = QuantizationOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Quantization trade-offs",
        summary: "BF16 vs FP8 vs INT8 vs AWQ/GPTQ 4-bit, with and without FP8 KV: memory, GPUs needed, batch that fits, decode speed from the roofline, hardware support and quality risk with sources.",
        description: "For a model on a GPU, evaluates each weight format (bf16, fp8 W8A8, int8 W8A8, AWQ and GPTQ 4-bit \
weight-only) with bf16 and fp8 KV cache: weight GB, whether the GPU has kernels for it (compute capability), the \
fewest GPUs that hold it, sequences of seq_len that fit, batch-1 and large-batch decode tokens/s from the roofline, \
and quality risk with the published measurement behind it (GPTQ, AWQ, SmoothQuant, vLLM FP8 docs). Recommends the \
highest-precision format that fits on the GPUs you have. Unlike tools that only print a fit table, every number \
here is computed for your model and GPU. Instant.",
        intents: &[
            "quantization",
            "quantize",
            "fp8 vs int4",
            "awq or gptq",
            "should i quantize",
            "int8 inference",
            "fit model in memory",
            "weight format",
        ],
        example: r#"{"model": "llama-3.1-70b", "gpu": "h100-sxm", "gpus": 2}"#,
        ..OpSpec::new("inference", "quantization")
    };

    fn run(&self, ctx: &OpContext, i: QuantizationInput) -> Result<QuantizationOutput, OpError> {
        let model = resolve_model(i.model.as_deref(), i.architecture.as_ref(), i.params_b)?;
        let gpu = gpu_or_local(ctx, i.gpu.as_deref())?;
        let gpus = positive("gpus", i.gpus.unwrap_or(1))?;
        let seq = i.seq_len.unwrap_or(4096).max(1);
        let cc = serving::compute_capability(gpu).unwrap_or(0.0);
        let usable = gpu.memory_bytes().unwrap_or(0.0) * serving::VLLM_DEFAULT_UTILIZATION;
        let mut options = Vec::new();
        let mut assumptions = Vec::new();
        for w in WeightFormat::ALL {
            for kv in [Dtype::Bf16, Dtype::Fp8] {
                let supported = cc >= w.min_compute_capability() && (kv != Dtype::Fp8 || cc >= 8.9);
                let support_note = if supported {
                    format!(
                        "{} (compute capability {}) supports it",
                        gpu.id, gpu.compute_capability
                    )
                } else {
                    format!(
                        "needs compute capability {} (fp8 KV: 8.9); {} is {}",
                        w.min_compute_capability(),
                        gpu.id,
                        gpu.compute_capability
                    )
                };
                let t = w.technique_id().and_then(techniques::by_id);
                let mut opt = FormatOption {
                    weights: w,
                    kv_dtype: kv,
                    weights_gb: round(model.total_params * w.dtype().bytes() / 1e9, 2),
                    supported,
                    support_note,
                    min_gpus: None,
                    max_batch: None,
                    batch1_tokens_per_s: None,
                    max_batch_tokens_per_s: None,
                    quality_risk: t.map(|t| t.risk),
                    evidence: t.map(|t| format!("{} ({})", t.effect.scope, t.effect.source_url)),
                };
                if supported {
                    let peaks = peaks_for(ctx, gpu, w.dtype(), true)?;
                    for tp in serving::tp_options(model.arch.as_ref(), gpus) {
                        let r = serving::roofline_for(&model, w, &peaks, tp, kv, gpu);
                        let b = r.max_batch(seq, usable);
                        if b >= 1 {
                            opt.min_gpus = Some(tp);
                            opt.max_batch = Some(b);
                            opt.batch1_tokens_per_s =
                                Some(r.decode(1, seq).per_sequence_tokens_per_s);
                            opt.max_batch_tokens_per_s =
                                Some(r.decode(b.min(256), seq).total_tokens_per_s);
                            break;
                        }
                    }
                    if assumptions.is_empty() {
                        assumptions.push(format!(
                            "decode from the roofline at efficiencies 0.7/0.9 with peaks {} TFLOP/s-class ({}) and {} GB/s ({}); memory at 90% of {} GB; activation workspace not subtracted",
                            peaks.tflops.value, peaks.tflops.origin, peaks.memory_gb_per_s.value, peaks.memory_gb_per_s.origin, gpu.memory_gb.value.unwrap_or(0.0)
                        ));
                    }
                }
                options.push(opt);
            }
        }
        if model.arch.is_none() {
            assumptions.push("params_b only: KV cache not counted, so max_batch is unbounded by KV (give model or architecture)".into());
        }
        assumptions.push(
            "4-bit formats: 0.5 byte/parameter, ignoring per-group scales (a few percent more)"
                .into(),
        );
        let rec = options
            .iter()
            .filter(|o| o.supported && o.min_gpus.is_some() && o.kv_dtype == Dtype::Bf16)
            .min_by(|a, b| {
                b.weights
                    .dtype()
                    .bytes()
                    .total_cmp(&a.weights.dtype().bytes())
                    .then(a.min_gpus.cmp(&b.min_gpus))
            });
        let recommendation = match rec {
            Some(o) => format!(
                "{} is the highest-precision format that fits {} on {} × {} ({:.1} GB of weights, {} sequences of {seq} tokens); lower precisions buy batch and speed at the quality risk listed",
                o.weights.as_str(),
                model.label,
                o.min_gpus.unwrap_or(1),
                gpu.id,
                o.weights_gb,
                o.max_batch.unwrap_or(0)
            ),
            None => format!(
                "no supported format fits {} on {gpus} × {}: the smallest, 4-bit, needs {:.1} GB of weights",
                model.label,
                gpu.id,
                model.total_params * 0.5 / 1e9
            ),
        };
        Ok(QuantizationOutput {
            model: model.summary(),
            gpu: gpu.id.clone(),
            gpus,
            seq_len: seq,
            options,
            recommendation,
            assumptions,
        })
    }
}

// ------------------------------------------------------------------ deploy

pub struct Deploy;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeployInput {
    /// Catalog model id or `hf:org/name` (or `architecture`).
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
    /// Requests per second to serve.
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e9))]
    pub requests_per_s: f64,
    /// Mean prompt tokens (default 1024).
    #[serde(default)]
    #[schemars(range(max = 100000000))]
    pub prompt_tokens: Option<u64>,
    /// Mean output tokens (default 256).
    #[serde(default)]
    #[schemars(range(max = 100000000))]
    pub output_tokens: Option<u64>,
    /// Inter-token latency target, ms.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e7))]
    pub itl_ms: Option<f64>,
    /// Time-to-first-token target, ms (prefill only; queueing not modeled).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e7))]
    pub ttft_ms: Option<f64>,
    /// Weight format (default bf16).
    #[serde(default)]
    pub weights: Option<WeightFormat>,
    /// KV-cache format (default bf16).
    #[serde(default)]
    pub kv_dtype: Option<Dtype>,
    /// Largest TP per replica (default 8).
    #[serde(default)]
    pub max_gpus_per_replica: Option<u32>,
    /// Your price per GPU-hour in USD (default: the catalog range).
    #[serde(default)]
    #[schemars(range(min = 0, max = 1e4))]
    pub price_usd_per_gpu_hour: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DeployOutput {
    pub model: ModelSummary,
    pub gpu: String,
    pub plan: ReplicaPlan,
    pub total_output_tokens_per_s: f64,
    pub cost_low: Option<TokenCost>,
    pub cost_high: Option<TokenCost>,
    pub price_source: Option<String>,
    pub assumptions: Vec<String>,
}

impl Operation for Deploy {
    type Input = DeployInput;
    type Output = DeployOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Deployment sizing",
        summary: "Replicas and GPUs to serve a request rate within inter-token and first-token latency targets, with hourly cost and cost per million tokens.",
        description: "Sizes a serving deployment from the roofline: for each TP degree that holds the model, the largest \
batch whose decode step meets the inter-token latency target and whose KV fits, the prefill time of one prompt \
(TTFT without queueing), requests per second per replica = 1 / (prefill + output × step / batch), and the replicas \
needed for your rate; returns the plan using the fewest GPUs with cost per hour and per million output tokens from \
the catalog's dated price range or your price. When no configuration meets a target, it says which and by how much. \
Instant.",
        intents: &[
            "how many gpus to serve",
            "deployment sizing",
            "replicas for qps",
            "capacity planning inference",
            "serve requests per second",
            "latency slo",
        ],
        example: r#"{"model": "llama-3.1-8b", "gpu": "h100-sxm", "requests_per_s": 20, "itl_ms": 50}"#,
        ..OpSpec::new("inference", "deploy")
    };

    fn run(&self, ctx: &OpContext, i: DeployInput) -> Result<DeployOutput, OpError> {
        let model = resolve_model(i.model.as_deref(), i.architecture.as_ref(), i.params_b)?;
        model
            .arch_for("deployment sizing (KV capacity)")
            .map_err(super::advisor_inputs::model_error)?;
        let gpu = gpu_or_local(ctx, i.gpu.as_deref())?;
        if !(i.requests_per_s.is_finite() && i.requests_per_s > 0.0) {
            return Err(OpError::invalid_input(
                "requests_per_s must be positive",
                "Pass the request rate, e.g. 20.",
            ));
        }
        let weights = i.weights.unwrap_or(WeightFormat::Bf16);
        let kv = kv_dtype_check(i.kv_dtype.unwrap_or(Dtype::Bf16))?;
        let (r, _, assumptions) = roofline(ctx, &model, gpu, 1, weights, kv, None, None, true)?;
        let usable = gpu.memory_bytes().unwrap_or(0.0) * serving::VLLM_DEFAULT_UTILIZATION;
        let prompt = i.prompt_tokens.unwrap_or(1024);
        let output = i.output_tokens.unwrap_or(256).max(1);
        let plan = serving::plan_replicas(
            &r, usable, i.max_gpus_per_replica.unwrap_or(8).max(1), prompt, output, i.requests_per_s, i.itl_ms, i.ttft_ms,
        )
        .map_err(|why| OpError::invalid_input(
            format!("no configuration of {} on {} meets the targets: {why}", model.label, gpu.id),
            "Relax itl_ms/ttft_ms, allow more GPUs per replica, pick a faster GPU or a smaller weight format.",
        ))?;
        let tokens_per_s = i.requests_per_s * output as f64;
        let price = &gpu.price_usd_per_gpu_hour;
        let (low, high, src) = match i.price_usd_per_gpu_hour {
            Some(p) => (Some(p), Some(p), Some("given in the call".to_string())),
            None => (price.low_usd, price.high_usd, price.source_url.clone()),
        };
        Ok(DeployOutput {
            model: model.summary(),
            gpu: gpu.id.clone(),
            total_output_tokens_per_s: round(tokens_per_s, 1),
            cost_low: low.map(|p| serving::token_cost(tokens_per_s, plan.gpus, p)),
            cost_high: high.map(|p| serving::token_cost(tokens_per_s, plan.gpus, p)),
            price_source: src.or_else(|| price.note.clone()),
            plan,
            assumptions,
        })
    }
}

// ------------------------------------------------------------------ cost per token

pub struct CostPerToken;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CostPerTokenInput {
    /// Measured tokens/s for the whole deployment; if absent, estimated from model + gpu.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e12))]
    pub tokens_per_s: Option<f64>,
    /// GPUs the deployment uses (default 1).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// Catalog GPU id, for the price range and the estimate (default: the local GPU).
    #[serde(default)]
    pub gpu: Option<String>,
    /// Catalog model id or `hf:org/name`, for an estimate when tokens_per_s is absent.
    #[serde(default)]
    pub model: Option<String>,
    /// A custom model shape, for an estimate.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Parameters in billions, for an estimate.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e5))]
    pub params_b: Option<f64>,
    /// Concurrent sequences for the estimate (default: the decode crossover batch, capped by memory).
    #[serde(default)]
    pub batch: Option<u32>,
    /// Context tokens per sequence for the estimate (default 2048).
    #[serde(default)]
    #[schemars(range(max = 100000000))]
    pub context_tokens: Option<u64>,
    /// Weight format for the estimate (default bf16).
    #[serde(default)]
    pub weights: Option<WeightFormat>,
    /// Your price per GPU-hour in USD (default: the catalog range).
    #[serde(default)]
    #[schemars(range(min = 0, max = 1e4))]
    pub price_usd_per_gpu_hour: Option<f64>,
    /// Electricity price per kWh, to add energy at the GPUs' board power.
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub electricity_usd_per_kwh: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CostPerTokenOutput {
    pub tokens_per_s: f64,
    /// `measured` (given) or `estimated` (roofline).
    pub tokens_per_s_origin: String,
    pub gpus: u32,
    pub cost_low: Option<TokenCost>,
    pub cost_high: Option<TokenCost>,
    pub price_source: Option<String>,
    /// Energy cost per million tokens at the board power limit (an upper bound), when a kWh price is given.
    pub energy_usd_per_million_tokens: Option<f64>,
    pub estimate: Option<DecodeStep>,
    pub assumptions: Vec<String>,
}

impl Operation for CostPerToken {
    type Input = CostPerTokenInput;
    type Output = CostPerTokenOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Cost per token",
        summary: "Dollars per million tokens from a measured or roofline-estimated throughput and a dated GPU price (or yours), optionally with energy.",
        description: "Computes cost per million tokens = GPUs × price per GPU-hour / (tokens/s × 3600) × 10^6. Throughput \
is yours (measured) or estimated from the decode roofline for a model on the GPU at a batch (default the crossover \
batch the memory allows). Price is yours or the catalog's on-demand range with its source and date; without either \
the cost is null, not guessed. With an electricity price, adds energy at the board power limit (an upper bound). \
Instant.",
        intents: &[
            "cost per token",
            "price per million tokens",
            "cost per million tokens",
            "inference cost",
            "serving cost",
            "tokens per dollar",
        ],
        example: r#"{"model": "llama-3.1-8b", "gpu": "h100-sxm"}"#,
        ..OpSpec::new("inference", "cost_per_token")
    };

    fn run(&self, ctx: &OpContext, i: CostPerTokenInput) -> Result<CostPerTokenOutput, OpError> {
        let gpus = positive("gpus", i.gpus.unwrap_or(1))?;
        let gpu = gpu_or_local(ctx, i.gpu.as_deref())?;
        let mut assumptions = Vec::new();
        let (tps, origin, estimate) = match i.tokens_per_s {
            Some(t) if t.is_finite() && t > 0.0 => (t, "measured", None),
            Some(_) => {
                return Err(OpError::invalid_input(
                    "tokens_per_s must be positive",
                    "Pass your measured throughput.",
                ));
            }
            None => {
                if i.model.is_none() && i.architecture.is_none() && i.params_b.is_none() {
                    return Err(OpError::invalid_input(
                        "give tokens_per_s (measured) or a model to estimate it",
                        "Pass tokens_per_s, or model/architecture/params_b with gpu.",
                    ));
                }
                let model = resolve_model(i.model.as_deref(), i.architecture.as_ref(), i.params_b)?;
                let weights = i.weights.unwrap_or(WeightFormat::Bf16);
                let (r, _, a) = roofline(
                    ctx,
                    &model,
                    gpu,
                    gpus,
                    weights,
                    Dtype::Bf16,
                    None,
                    None,
                    true,
                )?;
                assumptions.extend(a);
                let context = i.context_tokens.unwrap_or(2048).max(1);
                let usable = gpu.memory_bytes().unwrap_or(0.0) * serving::VLLM_DEFAULT_UTILIZATION;
                let max_b = r.max_batch(context, usable);
                if max_b == 0 {
                    return Err(OpError::invalid_input(
                        format!(
                            "{} does not fit on {gpus} × {} with a {context}-token sequence",
                            model.label, gpu.id
                        ),
                        "Use more GPUs or a smaller weight format.",
                    ));
                }
                let b = match i.batch {
                    Some(b) => positive("batch", b)?,
                    None => (r.crossover_batch().ceil() as u32).clamp(1, max_b),
                };
                assumptions.push(format!("throughput estimated at batch {b} (memory allows {max_b}) and {context} tokens of context"));
                let d = r.decode(b, context);
                (d.total_tokens_per_s, "estimated", Some(d))
            }
        };
        let price = &gpu.price_usd_per_gpu_hour;
        let (low, high, src) = match i.price_usd_per_gpu_hour {
            Some(p) if p.is_finite() && p > 0.0 => {
                (Some(p), Some(p), Some("given in the call".to_string()))
            }
            Some(_) => {
                return Err(OpError::invalid_input(
                    "price_usd_per_gpu_hour must be positive",
                    "Pass e.g. 2.5.",
                ));
            }
            None => (
                price.low_usd,
                price.high_usd,
                price
                    .source_url
                    .clone()
                    .map(|u| format!("{u} (as of {})", price.as_of.clone().unwrap_or_default())),
            ),
        };
        if low.is_none() {
            assumptions.push(format!(
                "{}: {}; pass price_usd_per_gpu_hour",
                gpu.id,
                price
                    .note
                    .clone()
                    .unwrap_or_else(|| "no public price".into())
            ));
        }
        let energy = match (i.electricity_usd_per_kwh, gpu.tdp_w.value) {
            (Some(kwh), Some(w)) => {
                assumptions.push(format!(
                    "energy at the {w} W board power limit per GPU: an upper bound on draw"
                ));
                Some(round(
                    w * gpus as f64 / 1000.0 * kwh / (tps * 3600.0) * 1e6,
                    4,
                ))
            }
            (Some(_), None) => {
                assumptions.push(format!(
                    "{} has no public board power: energy not computed",
                    gpu.id
                ));
                None
            }
            _ => None,
        };
        Ok(CostPerTokenOutput {
            tokens_per_s: tps,
            tokens_per_s_origin: origin.into(),
            gpus,
            cost_low: low.map(|p| serving::token_cost(tps, gpus, p)),
            cost_high: high.map(|p| serving::token_cost(tps, gpus, p)),
            price_source: src,
            energy_usd_per_million_tokens: energy,
            estimate,
            assumptions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppState;

    fn ctx() -> OpContext {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(aisp_hw::gpu::GpuAvailability::unavailable(
            "test host",
            false,
        ));
        OpContext::detached(app)
    }

    fn run<O: Operation>(op: &O, v: serde_json::Value) -> Result<O::Output, OpError> {
        op.run(&ctx(), serde_json::from_value(v).unwrap())
    }

    #[test]
    fn kv_cache_op_reports_the_worked_example() {
        let out = run(
            &KvCacheOp,
            serde_json::json!({"model": "llama-3.1-70b", "seq_len": 4096, "dtype": "fp16"}),
        )
        .unwrap();
        assert_eq!(out.bytes_per_token, 327_680.0);
        assert_eq!(out.total_bytes, 1_342_177_280.0);
        assert_eq!(out.vs_full_mha, 0.125); // 8 of 64 heads
        let e = run(&KvCacheOp, serde_json::json!({"params_b": 7})).unwrap_err();
        assert!(
            e.message.contains("needs the model's shape"),
            "{}",
            e.message
        );
    }

    #[test]
    fn estimate_sweeps_batch_and_flags_the_crossover() {
        let out = run(
            &Estimate,
            serde_json::json!({"model": "llama-3.1-8b", "gpu": "h100-sxm"}),
        )
        .unwrap();
        assert_eq!(out.decode.bound, "memory");
        // 2 · 989.4 · 0.7 / (2 · 3.35 · 0.9) = 229.7
        assert!(
            (out.crossover_batch - 229.7).abs() < 0.1,
            "{}",
            out.crossover_batch
        );
        assert!(out.batch_sweep.len() >= 8);
        assert!(out.fits);
        assert!(out.request_latency_ms > out.prefill.time_ms);
    }

    #[test]
    fn vllm_config_for_70b_on_four_h100s() {
        let out = run(
            &Vllm,
            serde_json::json!({"model": "llama-3.1-70b", "gpu": "h100-sxm", "gpus": 4}),
        )
        .unwrap();
        let tp = out.engine_args["tensor_parallel_size"].as_u64().unwrap();
        // 141 GB of bf16 weights: TP2 leaves 72 − 70.6 − 1.3 (workspace) GB per GPU, under
        // one 4K-token sequence, so the smallest TP that fits is 4.
        assert_eq!(tp, 4);
        assert_eq!(out.replicas, 1);
        assert_eq!(out.engine_args["kv_cache_dtype"], "fp8");
        assert!(
            out.command
                .starts_with("vllm serve meta-llama/Llama-3.1-70B")
        );
        assert!(out.choices.iter().all(|c| !c.why.is_empty()));
        let e = run(
            &Vllm,
            serde_json::json!({"model": "llama-3.1-70b", "gpu": "h100-sxm", "gpus": 1}),
        )
        .unwrap_err();
        assert!(e.message.contains("does not fit"), "{}", e.message);
    }

    #[test]
    fn quantization_recommends_the_highest_precision_that_fits() {
        let out = run(
            &Quantization,
            serde_json::json!({"model": "llama-3.1-70b", "gpu": "h100-sxm", "gpus": 1}),
        )
        .unwrap();
        // bf16 (141 GB) does not fit one 80 GB GPU; fp8 (70.6 GB) does at 90%? 72 GB usable: yes, barely.
        let bf16 = out
            .options
            .iter()
            .find(|o| o.weights == WeightFormat::Bf16 && o.kv_dtype == Dtype::Bf16)
            .unwrap();
        assert_eq!(bf16.min_gpus, None);
        assert!(
            out.recommendation.starts_with("fp8") || out.recommendation.starts_with("int8"),
            "{}",
            out.recommendation
        );
        // T4 has no FP8.
        let t4 = run(
            &Quantization,
            serde_json::json!({"model": "llama-3.1-8b", "gpu": "t4"}),
        )
        .unwrap();
        assert!(
            t4.options
                .iter()
                .filter(|o| o.weights == WeightFormat::Fp8)
                .all(|o| !o.supported)
        );
    }

    #[test]
    fn cost_per_token_from_a_measured_rate_and_price() {
        let out = run(&CostPerToken, serde_json::json!({"tokens_per_s": 1000.0, "gpus": 2, "gpu": "h100-sxm", "price_usd_per_gpu_hour": 2.0})).unwrap();
        // 2 GPUs × $2 / (1000 × 3600) × 1e6 = $1.1111 per million.
        assert_eq!(out.cost_low.unwrap().usd_per_million_tokens, 1.1111);
        let none = run(
            &CostPerToken,
            serde_json::json!({"tokens_per_s": 1000.0, "gpu": "t4"}),
        )
        .unwrap();
        assert!(none.cost_low.is_none());
        assert!(
            none.assumptions
                .iter()
                .any(|a| a.contains("no public source"))
        );
    }

    #[test]
    fn deploy_sizes_replicas_for_a_rate() {
        let out = run(&Deploy, serde_json::json!({"model": "llama-3.1-8b", "gpu": "h100-sxm", "requests_per_s": 20, "itl_ms": 50})).unwrap();
        assert!(out.plan.requests_per_s_per_replica * out.plan.replicas as f64 >= 20.0);
        assert!(out.plan.decode.step_ms <= 50.0);
        assert!(out.cost_low.is_some());
    }
}
