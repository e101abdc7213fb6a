//! Inference arithmetic: KV-cache size, and prefill/decode time from a
//! roofline — bytes over HBM bandwidth against FLOPs over the tensor peak,
//! plus tensor-parallel all-reduces — with a batch sweep that shows where
//! decode turns compute-bound.
//!
//! KV cache: bytes = 2 · L · kv_heads · head_dim · bytes_per_element per token
//! (K and V; GQA/MQA use kv_heads < heads; MLA caches its latent instead).
//! Decode at batch B reads the weights once and each sequence's KV; it does
//! 2·N_active FLOPs per token plus attention. Crossover to compute-bound at
//! B ≈ bytes_per_param · peak / (2 · bandwidth) (H100 bf16: ≈ 295).

use schemars::JsonSchema;
use serde::Serialize;

use super::collectives::{self, Collective};
use super::model::{ModelSpec, round};
use aisp_knowledge::Dtype;
use aisp_knowledge::models::Architecture;

/// llm-analysis's suggested efficiencies for inference: 0.7 of peak FLOP/s,
/// 0.9 of peak memory bandwidth.
pub const DEFAULT_INFERENCE_COMPUTE_EFFICIENCY: f64 = 0.7;
pub const DEFAULT_MEMORY_EFFICIENCY: f64 = 0.9;

/// KV-cache size for a batch of sequences.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct KvCache {
    /// Elements cached per token per layer (2·kv_heads·head_dim, or the MLA latent).
    pub elements_per_token_per_layer: f64,
    pub bytes_per_token: f64,
    pub bytes_per_sequence: f64,
    pub total_bytes: f64,
    pub total_gb: f64,
    /// The formula with this model's numbers.
    pub formula: String,
}

pub fn kv_cache(arch: &Architecture, dtype: Dtype, seq_len: u64, batch: u64) -> KvCache {
    let per_token = arch.kv_bytes_per_token(dtype);
    let per_seq = per_token * seq_len as f64;
    let total = per_seq * batch as f64;
    let formula = if arch.is_mla() {
        format!(
            "MLA latent: L·(kv_lora_rank + qk_rope_head_dim)·bytes = {}·({} + {})·{} = {} B/token",
            arch.layers,
            arch.kv_lora_rank.unwrap_or(0),
            arch.qk_rope_head_dim.unwrap_or(0),
            dtype.bytes(),
            per_token
        )
    } else {
        format!(
            "2·L·kv_heads·head_dim·bytes = 2·{}·{}·{}·{} = {} B/token",
            arch.layers,
            arch.kv_heads(),
            arch.head_dim(),
            dtype.bytes(),
            per_token
        )
    };
    KvCache {
        elements_per_token_per_layer: arch.kv_elements_per_token_per_layer(),
        bytes_per_token: per_token,
        bytes_per_sequence: per_seq,
        total_bytes: total,
        total_gb: round(total / 1e9, 3),
        formula,
    }
}

/// The hardware and precision an estimate runs on.
#[derive(Debug, Clone)]
pub struct Roofline<'a> {
    pub model: &'a ModelSpec,
    pub weight_dtype: Dtype,
    pub kv_dtype: Dtype,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Dense peak at the compute precision, TFLOP/s.
    pub peak_tflops: f64,
    /// Device-memory bandwidth, GB/s.
    pub memory_gb_per_s: f64,
    pub compute_efficiency: f64,
    pub memory_efficiency: f64,
    /// Link bandwidth for TP all-reduces, GB/s per direction.
    pub tp_link_gb_per_s: f64,
}

/// One decode step (one new token for each of `batch` sequences).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DecodeStep {
    pub batch: u32,
    pub context_tokens: u64,
    /// Bytes each GPU reads per step (weights + KV).
    pub bytes_read_per_gpu: f64,
    pub flops_per_gpu: f64,
    pub memory_ms: f64,
    pub compute_ms: f64,
    pub tp_comm_ms: f64,
    pub step_ms: f64,
    /// `memory` or `compute`: which roof sets the step time.
    pub bound: String,
    /// Tokens per second per sequence (1 / step time).
    pub per_sequence_tokens_per_s: f64,
    /// All sequences together.
    pub total_tokens_per_s: f64,
}

/// Prefill of `batch` prompts of `prompt_tokens`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Prefill {
    pub batch: u32,
    pub prompt_tokens: u64,
    pub flops_per_gpu: f64,
    pub memory_ms: f64,
    pub compute_ms: f64,
    pub tp_comm_ms: f64,
    pub time_ms: f64,
    pub bound: String,
    pub tokens_per_s: f64,
}

impl Roofline<'_> {
    fn kv_split(&self) -> f64 {
        match &self.model.arch {
            Some(a) if a.is_mla() => 1.0,
            Some(a) => self.tp.min(a.kv_heads()).max(1) as f64,
            None => self.tp.max(1) as f64,
        }
    }

    /// Weight bytes a decode step at `batch` reads across all GPUs: MoE layers
    /// touch the experts the batch routes to — E·(1 − (1 − k/E)^B) of them
    /// under uniform routing — plus shared experts.
    pub fn weight_bytes_read(&self, batch: u32) -> f64 {
        let b = self.weight_dtype.bytes();
        match &self.model.arch {
            Some(a) if a.is_moe() => {
                let e = a.experts() as f64;
                let k = a.active_experts() as f64;
                let touched = e * (1.0 - (1.0 - k / e).powi(batch.max(1) as i32));
                let routed = a.routed_expert_params();
                let per_expert_total = routed / e;
                (self.model.total_params - routed + touched * per_expert_total) * b
            }
            _ => self.model.total_params * b,
        }
    }

    /// Total weight bytes held (every expert).
    pub fn weight_bytes(&self) -> f64 {
        self.model.total_params * self.weight_dtype.bytes()
    }

    fn kv_bytes_per_token(&self) -> f64 {
        self.model
            .arch
            .as_ref()
            .map(|a| a.kv_bytes_per_token(self.kv_dtype))
            .unwrap_or(0.0)
    }

    fn attention_flops(&self, context: f64) -> f64 {
        self.model
            .arch
            .as_ref()
            .map(|a| a.attention_flops_per_token_forward(context))
            .unwrap_or(0.0)
    }

    fn allreduce_ms(&self, tokens: f64) -> f64 {
        let Some(a) = &self.model.arch else {
            return 0.0;
        };
        let per = collectives::time_s(
            Collective::AllReduce,
            tokens * a.hidden as f64 * 2.0,
            self.tp,
            self.tp_link_gb_per_s * 1e9,
        );
        2.0 * a.layers as f64 * per * 1e3
    }

    pub fn decode(&self, batch: u32, context: u64) -> DecodeStep {
        let tp = self.tp.max(1) as f64;
        let bt = batch.max(1) as f64;
        let kv = bt * context as f64 * self.kv_bytes_per_token() / self.kv_split();
        let bytes = self.weight_bytes_read(batch) / tp + kv;
        let flops =
            bt * (2.0 * self.model.active_params + self.attention_flops(context as f64)) / tp;
        let mem_ms = bytes / (self.memory_gb_per_s * 1e9 * self.memory_efficiency) * 1e3;
        let comp_ms = flops / (self.peak_tflops * 1e12 * self.compute_efficiency) * 1e3;
        let comm = self.allreduce_ms(bt);
        let step = mem_ms.max(comp_ms) + comm;
        DecodeStep {
            batch,
            context_tokens: context,
            bytes_read_per_gpu: bytes.round(),
            flops_per_gpu: flops,
            memory_ms: round(mem_ms, 4),
            compute_ms: round(comp_ms, 4),
            tp_comm_ms: round(comm, 4),
            step_ms: round(step, 4),
            bound: if comp_ms > mem_ms {
                "compute"
            } else {
                "memory"
            }
            .into(),
            per_sequence_tokens_per_s: round(1e3 / step, 2),
            total_tokens_per_s: round(bt * 1e3 / step, 1),
        }
    }

    pub fn prefill(&self, batch: u32, prompt: u64) -> Prefill {
        let tp = self.tp.max(1) as f64;
        let tokens = batch.max(1) as f64 * prompt as f64;
        // Attention over a prompt: average context is prompt/2 per token (causal).
        let flops = tokens
            * (2.0 * self.model.active_params + self.attention_flops(prompt as f64 / 2.0))
            / tp;
        let bytes = self.weight_bytes() / tp;
        let mem_ms = bytes / (self.memory_gb_per_s * 1e9 * self.memory_efficiency) * 1e3;
        let comp_ms = flops / (self.peak_tflops * 1e12 * self.compute_efficiency) * 1e3;
        let comm = self.allreduce_ms(tokens);
        let t = mem_ms.max(comp_ms) + comm;
        Prefill {
            batch,
            prompt_tokens: prompt,
            flops_per_gpu: flops,
            memory_ms: round(mem_ms, 4),
            compute_ms: round(comp_ms, 4),
            tp_comm_ms: round(comm, 4),
            time_ms: round(t, 4),
            bound: if comp_ms > mem_ms {
                "compute"
            } else {
                "memory"
            }
            .into(),
            tokens_per_s: round(tokens * 1e3 / t, 1),
        }
    }

    /// Batch where decode math time equals weight-read time (KV ignored):
    /// bytes_per_param · peak·ce / (2 · bandwidth·me), for dense models.
    pub fn crossover_batch(&self) -> f64 {
        self.weight_dtype.bytes() * self.peak_tflops * 1e12 * self.compute_efficiency
            / (2.0 * self.memory_gb_per_s * 1e9 * self.memory_efficiency)
    }

    /// Decode at batch 1, 2, 4, … up to `max_batch`.
    pub fn sweep(&self, context: u64, max_batch: u32) -> Vec<DecodeStep> {
        let mut out = Vec::new();
        let mut b = 1u32;
        while b <= max_batch.max(1) {
            out.push(self.decode(b, context));
            if b > u32::MAX / 2 {
                break;
            }
            b *= 2;
        }
        out
    }

    /// GPU memory per GPU for weights plus `batch` sequences of `context` tokens.
    pub fn memory_per_gpu_bytes(&self, batch: u32, context: u64) -> f64 {
        self.weight_bytes() / self.tp.max(1) as f64
            + batch as f64 * context as f64 * self.kv_bytes_per_token() / self.kv_split()
    }

    /// Sequences of `context` tokens that fit in `usable_bytes` per GPU after the weights.
    pub fn max_batch(&self, context: u64, usable_bytes: f64) -> u32 {
        let free = usable_bytes - self.weight_bytes() / self.tp.max(1) as f64;
        let per_seq = context as f64 * self.kv_bytes_per_token() / self.kv_split();
        if free <= 0.0 {
            0
        } else if per_seq <= 0.0 {
            u32::MAX
        } else {
            (free / per_seq).floor().min(u32::MAX as f64) as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100<'a>(m: &'a ModelSpec, tp: u32) -> Roofline<'a> {
        Roofline {
            model: m,
            weight_dtype: Dtype::Bf16,
            kv_dtype: Dtype::Bf16,
            tp,
            peak_tflops: 989.4,
            memory_gb_per_s: 3350.0,
            compute_efficiency: 1.0,
            memory_efficiency: 1.0,
            tp_link_gb_per_s: 450.0,
        }
    }

    #[test]
    fn llama_70b_fp16_kv_is_327680_bytes_per_token() {
        let m = ModelSpec::resolve(Some("llama-3.1-70b"), None, None).unwrap();
        let kv = kv_cache(m.arch.as_ref().unwrap(), Dtype::Fp16, 4096, 1);
        assert_eq!(kv.bytes_per_token, 327_680.0);
        // A 4K context: 1.342 GB (peers.md: "a 4K context is 1.34 GB").
        assert_eq!(kv.total_bytes, 1_342_177_280.0);
        assert_eq!(kv.total_gb, 1.342);
        assert!(kv.formula.contains("2·80·8·128·2"));
    }

    #[test]
    fn decode_is_bounded_by_bandwidth_at_batch_one() {
        // Llama 3.1 8B in bf16 on one H100 at full bandwidth: 16.06 GB read per
        // token → 3350e9 / 16.06e9 = 208.6 tokens/s (context 1 so KV is negligible).
        let m = ModelSpec::resolve(Some("llama-3.1-8b"), None, None).unwrap();
        let r = h100(&m, 1);
        let d = r.decode(1, 1);
        assert_eq!(d.bound, "memory");
        let want = 3350e9 / (8_030_261_248.0 * 2.0 + 131_072.0);
        assert!(
            (d.per_sequence_tokens_per_s - want).abs() < 0.01,
            "{} vs {want}",
            d.per_sequence_tokens_per_s
        );
        assert!((want - 208.6).abs() < 0.05);
    }

    #[test]
    fn decode_turns_compute_bound_near_the_crossover() {
        let m = ModelSpec::resolve(Some("llama-3.1-8b"), None, None).unwrap();
        let r = h100(&m, 1);
        // 2 bytes · 989.4e12 / (2 · 3.35e12) = 295.3 (peers.md §3b).
        assert!((r.crossover_batch() - 295.34).abs() < 0.01);
        let sweep = r.sweep(1, 1024);
        let first_compute = sweep.iter().find(|d| d.bound == "compute").unwrap();
        assert_eq!(first_compute.batch, 512);
        assert!(
            sweep
                .iter()
                .filter(|d| d.batch <= 256)
                .all(|d| d.bound == "memory")
        );
    }

    #[test]
    fn tensor_parallel_splits_weights_and_adds_all_reduces() {
        let m = ModelSpec::resolve(Some("llama-3.1-70b"), None, None).unwrap();
        let one = h100(&m, 1).decode(1, 1);
        let eight = h100(&m, 8).decode(1, 1);
        assert!(eight.memory_ms < one.memory_ms / 7.9);
        // 2 all-reduces per layer × 80 layers of 8192·2 bytes at 450 GB/s, factor 1.75.
        let want = 160.0 * (8192.0 * 2.0 * 1.75 / 450e9) * 1e3;
        assert!((eight.tp_comm_ms - want).abs() < 1e-4);
    }

    #[test]
    fn moe_decode_reads_only_touched_experts() {
        let m = ModelSpec::resolve(Some("mixtral-8x7b"), None, None).unwrap();
        let r = h100(&m, 1);
        let a = m.arch.as_ref().unwrap();
        // Batch 1 touches 2 of 8 experts: reads the active parameters.
        assert!(
            (r.weight_bytes_read(1) / 2.0 - a.active_params()).abs() / a.active_params() < 1e-9
        );
        // Large batches touch every expert.
        assert!(
            (r.weight_bytes_read(256) / 2.0 - a.total_params()).abs() / a.total_params() < 1e-6
        );
    }
}
