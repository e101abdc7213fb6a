//! What-if serving search: every cataloged GPU (or the ones given) × TP ×
//! weight format × KV format, each at the largest batch whose memory per GPU
//! and decode step meet the limits, then the throughput limit; cheapest first.
//! When nothing qualifies, the limit that bound most configurations and the
//! techniques that relax it. (`aisp_analyze_whatif`.)

use aisp_knowledge::Dtype;
use aisp_knowledge::gpus::Gpu;
use aisp_knowledge::techniques;
use schemars::JsonSchema;
use serde::Serialize;

use crate::inference::{self, Roofline};
use crate::links::Links;
use crate::model::{ModelSpec, round};
use crate::serving::{self, WeightFormat};

/// The limits a configuration must meet.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Memory each GPU may use, GB.
    pub max_vram_gb: Option<f64>,
    /// Per-token decode latency limit, ms.
    pub max_latency_ms: Option<f64>,
    /// Total decode tokens/s required.
    pub min_tokens_per_s: Option<f64>,
    /// Tokens of context per sequence.
    pub context_tokens: u64,
    /// Most GPUs per replica.
    pub max_gpus: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct WhatifConfig {
    pub gpu: String,
    pub gpus: u32,
    pub weights: WeightFormat,
    pub kv_dtype: Dtype,
    /// Largest batch meeting every constraint.
    pub batch: u32,
    pub memory_per_gpu_gb: f64,
    pub latency_ms_per_token: f64,
    pub total_tokens_per_s: f64,
    pub usd_per_hour_low: Option<f64>,
}

/// What the search found.
#[derive(Debug)]
pub struct Search {
    /// Configurations meeting every limit, cheapest (or fewest GPUs) first, at most 50.
    pub configurations: Vec<WhatifConfig>,
    /// Configurations tried.
    pub considered: usize,
    /// When nothing meets the limits: the binding limit and techniques that move it.
    pub suggestions: Vec<String>,
}

/// Search the configurations of `model` on `gpus` that meet `limits`.
pub fn search(model: &ModelSpec, gpus: &[&Gpu], limits: &Limits) -> Search {
    let mut configs = Vec::new();
    let mut considered = 0usize;
    let mut binding: std::collections::BTreeMap<&str, usize> = Default::default();
    for &gpu in gpus {
        let cc = serving::compute_capability(gpu).unwrap_or(0.0);
        for w in WeightFormat::ALL {
            if gpu.vendor != "nvidia" && w != WeightFormat::Bf16 && w != WeightFormat::Fp8 {
                continue;
            }
            if cc < w.min_compute_capability() && gpu.vendor == "nvidia" {
                continue;
            }
            let Some((peak, _)) = serving::compute_peak(gpu, w.dtype()) else {
                continue;
            };
            for kv in [Dtype::Bf16, Dtype::Fp8] {
                if kv == Dtype::Fp8 && gpu.vendor == "nvidia" && cc < 8.9 {
                    continue;
                }
                for tp in serving::tp_options(model.arch.as_ref(), limits.max_gpus) {
                    considered += 1;
                    let r = Roofline {
                        model,
                        weight_dtype: w.dtype(),
                        kv_dtype: kv,
                        tp,
                        peak_tflops: peak,
                        memory_gb_per_s: gpu.memory_bandwidth_gb_per_s.value.unwrap_or(0.0),
                        compute_efficiency: inference::DEFAULT_INFERENCE_COMPUTE_EFFICIENCY,
                        memory_efficiency: inference::DEFAULT_MEMORY_EFFICIENCY,
                        tp_link_gb_per_s: Links::for_gpu(gpu, tp, None, None)
                            .map(|l| l.intra_node_gb_per_s)
                            .unwrap_or(0.0),
                    };
                    let cap = gpu.memory_bytes().unwrap_or(0.0) * serving::VLLM_DEFAULT_UTILIZATION;
                    let budget = limits
                        .max_vram_gb
                        .map(|v| (v * 1e9).min(cap))
                        .unwrap_or(cap);
                    let max_b = r.max_batch(limits.context_tokens, budget).min(4096);
                    if max_b == 0 {
                        *binding.entry("memory").or_default() += 1;
                        continue;
                    }
                    // Largest power-of-two batch within the latency limit.
                    let mut b = 0u32;
                    let mut k = 1u32;
                    while k <= max_b {
                        if limits
                            .max_latency_ms
                            .is_none_or(|m| r.decode(k, limits.context_tokens).step_ms <= m)
                        {
                            b = k;
                            k *= 2;
                        } else {
                            break;
                        }
                    }
                    if b == 0 {
                        *binding.entry("latency").or_default() += 1;
                        continue;
                    }
                    let d = r.decode(b, limits.context_tokens);
                    if limits
                        .min_tokens_per_s
                        .is_some_and(|m| d.total_tokens_per_s < m)
                    {
                        *binding.entry("throughput").or_default() += 1;
                        continue;
                    }
                    configs.push(WhatifConfig {
                        gpu: gpu.id.clone(),
                        gpus: tp,
                        weights: w,
                        kv_dtype: kv,
                        batch: b,
                        memory_per_gpu_gb: round(
                            r.memory_per_gpu_bytes(b, limits.context_tokens) / 1e9,
                            2,
                        ),
                        latency_ms_per_token: d.step_ms,
                        total_tokens_per_s: d.total_tokens_per_s,
                        usd_per_hour_low: gpu
                            .price_usd_per_gpu_hour
                            .low_usd
                            .map(|p| round(p * tp as f64, 3)),
                    });
                }
            }
        }
    }
    configs.sort_by(|a, b| match (a.usd_per_hour_low, b.usd_per_hour_low) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a
            .gpus
            .cmp(&b.gpus)
            .then(b.total_tokens_per_s.total_cmp(&a.total_tokens_per_s)),
    });
    configs.truncate(50);
    let mut suggestions = Vec::new();
    if configs.is_empty() {
        let top = binding
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(k, _)| *k)
            .unwrap_or("memory");
        let ids: &[&str] = match top {
            "memory" => &["awq-int4", "kv-cache-fp8", "tensor-parallel"],
            "latency" => &[
                "fp8-inference",
                "speculative-eagle",
                "tensor-parallel",
                "cuda-graphs",
            ],
            _ => &[
                "continuous-batching",
                "paged-attention",
                "kv-cache-fp8",
                "fp8-inference",
            ],
        };
        suggestions.push(format!(
            "the binding limit is {top} ({} of {considered} configurations failed on it)",
            binding.get(top).copied().unwrap_or(0)
        ));
        for id in ids {
            if let Some(t) = techniques::by_id(id) {
                suggestions.push(format!(
                    "{}: {} ({})",
                    t.name, t.effect.scope, t.effect.source_url
                ));
            }
        }
    }
    Search {
        configurations: configs,
        considered,
        suggestions,
    }
}
