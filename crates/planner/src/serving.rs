//! Serving plans built on the roofline: a vLLM configuration, weight-format
//! trade-offs, replica sizing for a request rate, and cost per token.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::inference::{self, DecodeStep, Roofline};
use super::links::Links;
use super::model::{ModelSpec, round};
use super::peaks::Peaks;
use aisp_knowledge::Dtype;
use aisp_knowledge::dtype::Precision;
use aisp_knowledge::gpus::Gpu;
use aisp_knowledge::models::Architecture;
use aisp_knowledge::techniques::Goal;

pub const VLLM_ENGINE_ARGS_URL: &str =
    "https://docs.vllm.ai/en/latest/configuration/engine_args.html";
pub const VLLM_OPTIMIZATION_URL: &str =
    "https://docs.vllm.ai/en/latest/configuration/optimization.html";
/// vLLM's default `gpu_memory_utilization`.
pub const VLLM_DEFAULT_UTILIZATION: f64 = 0.9;

/// Weight formats a server can load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WeightFormat {
    /// Unquantized 16-bit weights.
    Bf16,
    /// FP8 weights and activations (W8A8).
    Fp8,
    /// INT8 weights and activations (W8A8, SmoothQuant-style).
    Int8,
    /// AWQ 4-bit weight-only.
    Awq,
    /// GPTQ 4-bit weight-only.
    Gptq,
}

impl WeightFormat {
    pub const ALL: [WeightFormat; 5] = [
        WeightFormat::Bf16,
        WeightFormat::Fp8,
        WeightFormat::Int8,
        WeightFormat::Awq,
        WeightFormat::Gptq,
    ];

    /// Storage dtype of the weights.
    pub fn dtype(self) -> Dtype {
        match self {
            WeightFormat::Bf16 => Dtype::Bf16,
            WeightFormat::Fp8 => Dtype::Fp8,
            WeightFormat::Int8 => Dtype::Int8,
            WeightFormat::Awq | WeightFormat::Gptq => Dtype::Int4,
        }
    }

    /// The vLLM `--quantization` value, if any.
    pub fn vllm_flag(self) -> Option<&'static str> {
        match self {
            WeightFormat::Bf16 => None,
            WeightFormat::Fp8 => Some("fp8"),
            WeightFormat::Int8 => Some("compressed-tensors"),
            WeightFormat::Awq => Some("awq_marlin"),
            WeightFormat::Gptq => Some("gptq_marlin"),
        }
    }

    /// The technique-catalog entry that documents its effect and risk.
    pub fn technique_id(self) -> Option<&'static str> {
        match self {
            WeightFormat::Bf16 => None,
            WeightFormat::Fp8 => Some("fp8-inference"),
            WeightFormat::Int8 => Some("smoothquant-int8"),
            WeightFormat::Awq => Some("awq-int4"),
            WeightFormat::Gptq => Some("gptq-int4"),
        }
    }

    /// Lowest compute capability with fast kernels for the format.
    pub fn min_compute_capability(self) -> f64 {
        match self {
            WeightFormat::Bf16 => 8.0,
            WeightFormat::Fp8 => 8.9,
            WeightFormat::Int8 | WeightFormat::Awq | WeightFormat::Gptq => 7.5,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WeightFormat::Bf16 => "bf16",
            WeightFormat::Fp8 => "fp8",
            WeightFormat::Int8 => "int8",
            WeightFormat::Awq => "awq",
            WeightFormat::Gptq => "gptq",
        }
    }
}

/// Compute capability as a number (8.9), None for non-CUDA parts.
pub fn compute_capability(gpu: &Gpu) -> Option<f64> {
    gpu.compute_capability.parse().ok()
}

/// The dense peak the matmuls of `dtype` run at on `gpu`, falling back to
/// FP16 when the part has no BF16 rate (T4), with the precision used.
pub fn compute_peak(gpu: &Gpu, dtype: Dtype) -> Option<(f64, Precision)> {
    let (p, _) = dtype.compute_precision();
    gpu.peak_tflops(p).map(|v| (v, p)).or_else(|| match p {
        Precision::Bf16 => gpu
            .peak_tflops(Precision::Fp16)
            .map(|v| (v, Precision::Fp16)),
        _ => None,
    })
}

/// One configuration choice and why it was made.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Choice {
    pub setting: String,
    pub value: String,
    pub why: String,
}

/// Activation workspace vLLM needs beside weights and KV: the hidden state
/// and the gated-MLP intermediates for `batched_tokens` tokens (in and out
/// buffers), plus fp32 logits for `seqs` sampled rows. A shape-derived
/// estimate; vLLM measures the real peak at start-up.
pub fn activation_reserve_bytes(
    arch: Option<&Architecture>,
    tp: u32,
    batched_tokens: u32,
    seqs: u32,
) -> f64 {
    let Some(a) = arch else { return 0.0 };
    let t = batched_tokens as f64;
    let tp = tp.max(1) as f64;
    t * (a.hidden as f64 + 2.0 * a.ffn as f64 / tp) * 2.0 * 2.0 + seqs as f64 * a.vocab as f64 * 4.0
}

/// The largest power-of-two batch whose decode step stays within `slack` of batch 1.
pub fn latency_batch(r: &Roofline, context: u64, cap: u32, slack: f64) -> u32 {
    let base = r.decode(1, context).step_ms;
    let mut best = 1;
    let mut b = 2;
    while b <= cap {
        if r.decode(b, context).step_ms <= base * slack {
            best = b;
        } else {
            break;
        }
        b *= 2;
    }
    best
}

/// Tensor-parallel degrees a model allows: powers of two up to `max` that divide the heads.
pub fn tp_options(arch: Option<&Architecture>, max: u32) -> Vec<u32> {
    let mut v = Vec::new();
    let mut t = 1;
    while t <= max.max(1) {
        let ok = arch.is_none_or(|a| a.heads.is_multiple_of(t));
        if ok {
            v.push(t);
        }
        t *= 2;
    }
    v
}

/// Cost of serving `tokens_per_s` on `gpus` GPUs at a price per GPU-hour.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TokenCost {
    pub price_usd_per_gpu_hour: f64,
    pub usd_per_hour: f64,
    pub usd_per_million_tokens: f64,
}

pub fn token_cost(tokens_per_s: f64, gpus: u32, price_per_gpu_hour: f64) -> TokenCost {
    let per_hour = price_per_gpu_hour * gpus as f64;
    TokenCost {
        price_usd_per_gpu_hour: price_per_gpu_hour,
        usd_per_hour: round(per_hour, 4),
        usd_per_million_tokens: round(per_hour / (tokens_per_s * 3600.0) * 1e6, 4),
    }
}

/// Replica sizing for a request rate under latency targets.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReplicaPlan {
    pub tp: u32,
    /// Concurrent sequences per replica.
    pub batch: u32,
    pub decode: DecodeStep,
    /// Prefill of one prompt (time to first token without queueing).
    pub prefill_ms: f64,
    /// Requests per second one replica sustains.
    pub requests_per_s_per_replica: f64,
    pub replicas: u32,
    pub gpus: u32,
    /// What limited the batch (KV memory, latency target, crossover).
    pub batch_limited_by: String,
}

/// Size replicas: for each TP that fits, the largest batch within the ITL
/// target and KV memory; requests/s per replica = 1 / (prefill + output ×
/// step / batch); replicas to cover `rate`. Returns the plan using the fewest GPUs.
#[allow(clippy::too_many_arguments)]
pub fn plan_replicas(
    base: &Roofline,
    usable_bytes: f64,
    max_tp: u32,
    prompt: u64,
    output: u64,
    rate_per_s: f64,
    itl_ms: Option<f64>,
    ttft_ms: Option<f64>,
) -> Result<ReplicaPlan, String> {
    let context = prompt + output;
    let mut best: Option<ReplicaPlan> = None;
    let mut why_not: Vec<String> = Vec::new();
    for tp in tp_options(base.model.arch.as_ref(), max_tp) {
        let r = Roofline { tp, ..base.clone() };
        let reserve = activation_reserve_bytes(base.model.arch.as_ref(), tp, 8192, 256);
        let kv_fit = r.max_batch(context, usable_bytes - reserve);
        if kv_fit == 0 {
            why_not.push(format!(
                "TP{tp}: weights {:.1} GB per GPU leave no room for one {context}-token sequence",
                r.weight_bytes() / tp as f64 / 1e9
            ));
            continue;
        }
        let prefill = r.prefill(1, prompt).time_ms;
        if let Some(t) = ttft_ms
            && prefill > t
        {
            why_not.push(format!(
                "TP{tp}: prefill of {prompt} tokens takes {prefill:.1} ms > TTFT target {t} ms"
            ));
            continue;
        }
        let one = r.decode(1, context);
        if let Some(t) = itl_ms
            && one.step_ms > t
        {
            why_not.push(format!(
                "TP{tp}: even batch 1 decodes in {:.2} ms > ITL target {t} ms",
                one.step_ms
            ));
            continue;
        }
        // Largest batch within the ITL target and KV, doubling.
        let cap = kv_fit.min(4096);
        let mut batch = 1;
        let mut limited = "KV memory".to_string();
        let mut b = 2;
        while b <= cap {
            let d = r.decode(b, context);
            if let Some(t) = itl_ms
                && d.step_ms > t
            {
                limited = format!("ITL target {t} ms");
                break;
            }
            batch = b;
            b *= 2;
        }
        if b > cap && limited == "KV memory" && cap == 4096 {
            limited = "search cap of 4096 sequences".into();
        }
        let d = r.decode(batch, context);
        let per_req_s = prefill / 1e3 + output as f64 * d.step_ms / 1e3 / batch as f64;
        let rps = 1.0 / per_req_s;
        let replicas = (rate_per_s / rps).ceil().max(1.0) as u32;
        let plan = ReplicaPlan {
            tp,
            batch,
            prefill_ms: prefill,
            requests_per_s_per_replica: round(rps, 3),
            replicas,
            gpus: replicas * tp,
            batch_limited_by: limited,
            decode: d,
        };
        if best.as_ref().is_none_or(|b| plan.gpus < b.gpus) {
            best = Some(plan);
        }
    }
    best.ok_or_else(|| why_not.join("; "))
}

/// Expected KV capacity in tokens per replica.
pub fn kv_capacity_tokens(r: &Roofline, usable_bytes: f64, reserve_bytes: f64) -> u64 {
    let free = usable_bytes - reserve_bytes - r.weight_bytes() / r.tp.max(1) as f64;
    let per_token = r.memory_per_gpu_bytes(1, 1) - r.weight_bytes() / r.tp.max(1) as f64;
    if free <= 0.0 || per_token <= 0.0 {
        return 0;
    }
    (free / per_token).floor() as u64
}

/// Whether the goal favours many cheap replicas over fast single streams.
pub fn prefers_throughput(goal: Goal) -> bool {
    matches!(goal, Goal::Throughput | Goal::Cost | Goal::Memory)
}

pub use inference::DEFAULT_INFERENCE_COMPUTE_EFFICIENCY;

/// The decode roofline of `model` in `weights` on `gpu` at `tp` with `kv`,
/// from `peaks` and the default efficiencies.
pub fn roofline_for<'a>(
    model: &'a ModelSpec,
    weights: WeightFormat,
    peaks: &Peaks,
    tp: u32,
    kv: Dtype,
    gpu: &Gpu,
) -> Roofline<'a> {
    Roofline {
        model,
        weight_dtype: weights.dtype(),
        kv_dtype: kv,
        tp,
        peak_tflops: peaks.tflops.value,
        memory_gb_per_s: peaks.memory_gb_per_s.value,
        compute_efficiency: inference::DEFAULT_INFERENCE_COMPUTE_EFFICIENCY,
        memory_efficiency: inference::DEFAULT_MEMORY_EFFICIENCY,
        tp_link_gb_per_s: Links::for_gpu(gpu, tp.max(1), None, None)
            .map(|l| l.intra_node_gb_per_s)
            .unwrap_or(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelSpec;
    use aisp_knowledge::gpus;

    fn roof<'a>(m: &'a ModelSpec, gpu: &Gpu, fmt: WeightFormat) -> Roofline<'a> {
        let (peak, _) = compute_peak(gpu, fmt.dtype()).unwrap();
        Roofline {
            model: m,
            weight_dtype: fmt.dtype(),
            kv_dtype: Dtype::Bf16,
            tp: 1,
            peak_tflops: peak,
            memory_gb_per_s: gpu.memory_bandwidth_gb_per_s.value.unwrap(),
            compute_efficiency: 0.7,
            memory_efficiency: 0.9,
            tp_link_gb_per_s: gpu.nvlink_per_direction_gb_per_s().unwrap_or(32.0),
        }
    }

    #[test]
    fn cost_per_million_tokens() {
        // 1,000 tokens/s on one GPU at $2/h: 3.6M tokens per hour → $0.5556 per million.
        let c = token_cost(1000.0, 1, 2.0);
        assert_eq!(c.usd_per_hour, 2.0);
        assert_eq!(c.usd_per_million_tokens, 0.5556);
    }

    #[test]
    fn t4_falls_back_to_fp16_peak_and_has_no_fp8() {
        let t4 = gpus::by_id("t4").unwrap();
        assert_eq!(compute_peak(t4, Dtype::Bf16), Some((65.0, Precision::Fp16)));
        assert_eq!(compute_peak(t4, Dtype::Fp8), None);
    }

    #[test]
    fn replicas_cover_the_rate_with_the_fewest_gpus() {
        let m = ModelSpec::resolve(Some("llama-3.1-8b"), None, None).unwrap();
        let h100 = gpus::by_id("h100-sxm").unwrap();
        let r = roof(&m, h100, WeightFormat::Bf16);
        let usable = 80e9 * 0.9;
        let p = plan_replicas(&r, usable, 8, 1000, 200, 50.0, Some(50.0), None).unwrap();
        assert_eq!(p.tp, 1);
        assert!(p.decode.step_ms <= 50.0);
        assert!(p.requests_per_s_per_replica * p.replicas as f64 >= 50.0);
        // A target no configuration meets is explained, not papered over.
        let err = plan_replicas(&r, usable, 8, 1000, 200, 50.0, Some(0.5), None).unwrap_err();
        assert!(err.contains("ITL target 0.5 ms"), "{err}");
    }

    #[test]
    fn latency_batch_stays_within_slack() {
        let m = ModelSpec::resolve(Some("llama-3.1-8b"), None, None).unwrap();
        let h100 = gpus::by_id("h100-sxm").unwrap();
        let r = roof(&m, h100, WeightFormat::Bf16);
        let b = latency_batch(&r, 2048, 1024, 1.1);
        assert!(r.decode(b, 2048).step_ms <= r.decode(1, 2048).step_ms * 1.1);
        assert!(r.decode(b * 2, 2048).step_ms > r.decode(1, 2048).step_ms * 1.1);
    }
}
