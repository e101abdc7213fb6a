//! Training memory per GPU: model states under ZeRO sharding and
//! activations after Korthikanti et al.
//!
//! Model states (mixed-precision Adam, Rajbhandari et al. 2019, "ZeRO",
//! arXiv 1910.02054): 2 bytes of bf16 weights + 2 of bf16 gradients + 12 of
//! fp32 optimizer state (master weights, momentum, variance) = 16 bytes per
//! parameter. Sharding over N_d data-parallel ranks: stage 1 → 4 + 12/N_d,
//! stage 2 → 2 + 14/N_d, stage 3 → 16/N_d.
//!
//! Activations per layer (Korthikanti et al. 2022, arXiv 2205.05198), bytes
//! with 16-bit activations, for sequence s, micro-batch b, hidden h, heads a,
//! tensor-parallel degree t: s·b·h·(10 + 24/t + 5·a·s/(h·t)) without sequence
//! parallelism, s·b·h·(34/t + 5·a·s/(h·t)) with it; selective recompute drops
//! the 5·a·s/h attention-score term; full recompute keeps only the layer input
//! 2·s·b·h. The published 34 = 10 + 24 assumes a 4h, non-gated MLP; for an
//! MLP of width f with k = 1 (standard) or 2 (gated, SwiGLU) stored
//! intermediates, the split part is 8 + 4·k·f/h (equal to 24 for f = 4h, k = 1).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use aisp_knowledge::Dtype;
use aisp_knowledge::models::{Architecture, MlpKind};

pub const ZERO_URL: &str = "https://arxiv.org/abs/1910.02054";
pub const KORTHIKANTI_URL: &str = "https://arxiv.org/abs/2205.05198";
pub const TRANSFORMER_MATH_URL: &str = "https://blog.eleuther.ai/transformer-math/";

/// Activation recomputation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    None,
    Selective,
    Full,
}

impl Recompute {
    pub const ALL: [Recompute; 3] = [Recompute::None, Recompute::Selective, Recompute::Full];
    pub fn as_str(self) -> &'static str {
        match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
        }
    }
}

/// Bytes per parameter of weights, gradients and optimizer state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, JsonSchema)]
pub struct StateBytes {
    pub weights: f64,
    pub gradients: f64,
    pub optimizer: f64,
}

impl StateBytes {
    /// Adam(W) training in `dtype`: mixed precision keeps fp32 master weights
    /// and both moments (2 + 2 + 12 = 16); pure fp32 has no master copy
    /// (4 + 4 + 8 = 16). FP8 training (Transformer Engine) keeps bf16/fp32
    /// states like mixed precision. Integer formats are not trainable.
    pub fn adam(dtype: Dtype) -> Option<StateBytes> {
        match dtype {
            Dtype::Fp32 => Some(StateBytes {
                weights: 4.0,
                gradients: 4.0,
                optimizer: 8.0,
            }),
            Dtype::Bf16 | Dtype::Fp16 | Dtype::Fp8 => Some(StateBytes {
                weights: 2.0,
                gradients: 2.0,
                optimizer: 12.0,
            }),
            Dtype::Int8 | Dtype::Int4 => None,
        }
    }

    pub fn total(&self) -> f64 {
        self.weights + self.gradients + self.optimizer
    }
}

/// Model-state bytes per GPU for `params` parameters held by this GPU
/// (after tensor/pipeline/expert splits), sharded over `dp` ranks at `zero_stage`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, JsonSchema)]
pub struct StateMemory {
    pub weights_bytes: f64,
    pub gradients_bytes: f64,
    pub optimizer_bytes: f64,
}

impl StateMemory {
    pub fn total(&self) -> f64 {
        self.weights_bytes + self.gradients_bytes + self.optimizer_bytes
    }
}

pub fn state_memory(params: f64, bytes: StateBytes, zero_stage: u8, dp: u32) -> StateMemory {
    let d = dp.max(1) as f64;
    let (w, g, o) = match zero_stage {
        0 => (1.0, 1.0, 1.0),
        1 => (1.0, 1.0, 1.0 / d),
        2 => (1.0, 1.0 / d, 1.0 / d),
        _ => (1.0 / d, 1.0 / d, 1.0 / d),
    };
    StateMemory {
        weights_bytes: params * bytes.weights * w,
        gradients_bytes: params * bytes.gradients * g,
        optimizer_bytes: params * bytes.optimizer * o,
    }
}

/// How activations are laid out across the tensor/sequence/context-parallel group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivationLayout {
    pub seq: f64,
    pub micro_batch: f64,
    pub tp: u32,
    /// Sequence parallelism on (only meaningful with tp > 1).
    pub sequence_parallel: bool,
    /// Context-parallel degree: the sequence is split over this many ranks.
    pub cp: u32,
    pub recompute: Recompute,
    /// Fused attention kernels (FlashAttention) that never store the s×s scores.
    pub flash_attention: bool,
    /// Bytes per activation element relative to 16-bit (1.0 for bf16/fp16, 2.0 for fp32).
    pub element_scale: f64,
}

/// Activation bytes of one transformer layer for one micro-batch on one GPU.
pub fn activation_bytes_per_layer(a: &Architecture, l: &ActivationLayout) -> f64 {
    let s = l.seq / l.cp.max(1) as f64;
    let b = l.micro_batch;
    let h = a.hidden as f64;
    let t = l.tp.max(1) as f64;
    let sbh = s * b * h;
    if l.recompute == Recompute::Full {
        let sp = if l.sequence_parallel && l.tp > 1 {
            t
        } else {
            1.0
        };
        return 2.0 * sbh / sp * l.element_scale;
    }
    let k = match a.mlp.unwrap_or_default() {
        MlpKind::Gated => 2.0,
        MlpKind::Standard => 1.0,
    };
    let split = 8.0 + 4.0 * k * a.ffn as f64 / h;
    let unsplit = 10.0;
    let linear = if l.sequence_parallel && l.tp > 1 {
        (split + unsplit) / t
    } else {
        unsplit + split / t
    };
    // The attention-score term: 5·a·s/(h·t) per s·b·h; gone with selective
    // recompute or a fused kernel that never materializes the scores.
    let scores = if l.recompute == Recompute::Selective || l.flash_attention {
        0.0
    } else {
        5.0 * a.heads as f64 * s / (h * t)
    };
    sbh * (linear + scores) * l.element_scale
}

/// Bytes of the output logits and the loss's fp32 copy for one micro-batch
/// (bf16 logits plus an fp32 upcast for cross-entropy: 6 bytes per logit),
/// vocabulary-parallel over TP and split over CP.
pub fn logits_bytes(a: &Architecture, l: &ActivationLayout) -> f64 {
    l.seq / l.cp.max(1) as f64 * l.micro_batch * a.vocab as f64 * 6.0 / l.tp.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use aisp_knowledge::models;

    #[test]
    fn mixed_precision_adam_is_16_bytes_per_parameter() {
        let b = StateBytes::adam(Dtype::Bf16).unwrap();
        assert_eq!(b.total(), 16.0);
        assert_eq!(StateBytes::adam(Dtype::Fp32).unwrap().total(), 16.0);
        assert!(StateBytes::adam(Dtype::Int4).is_none());
        // 7.5B parameters on one GPU: 120 GB (the ZeRO paper's example, Ψ = 7.5B).
        assert_eq!(state_memory(7.5e9, b, 0, 1).total(), 120e9);
    }

    #[test]
    fn zero_stages_follow_the_paper() {
        // ZeRO paper Figure 1: Ψ = 7.5B, N_d = 64, K = 12.
        let b = StateBytes::adam(Dtype::Bf16).unwrap();
        let psi = 7.5e9;
        let gb = |stage| state_memory(psi, b, stage, 64).total() / 1e9;
        assert_eq!(gb(0), 120.0);
        assert!((gb(1) - 31.40625).abs() < 1e-9); // 4Ψ + 12Ψ/64
        assert!((gb(2) - 16.640625).abs() < 1e-9); // 2Ψ + 14Ψ/64
        assert!((gb(3) - 1.875).abs() < 1e-9); // 16Ψ/64
    }

    fn gpt_like() -> Architecture {
        // A GPT-3-style layer: standard 4h MLP, where the published formula applies verbatim.
        models::by_id("gpt3-175b").unwrap().architecture.clone()
    }

    #[test]
    fn korthikanti_activation_formulas() {
        let a = gpt_like();
        let (s, b, h, heads) = (2048.0, 1.0, 12288.0, 96.0);
        let sbh = s * b * h;
        let base = ActivationLayout {
            seq: s,
            micro_batch: b,
            tp: 1,
            sequence_parallel: false,
            cp: 1,
            recompute: Recompute::None,
            flash_attention: false,
            element_scale: 1.0,
        };
        // No parallelism: sbh(34 + 5as/h).
        let want = sbh * (34.0 + 5.0 * heads * s / h);
        assert!((activation_bytes_per_layer(&a, &base) - want).abs() < 1.0);
        // TP 8 without SP: sbh(10 + 24/8 + 5as/(8h)).
        let tp8 = ActivationLayout { tp: 8, ..base };
        let want = sbh * (10.0 + 3.0 + 5.0 * heads * s / (h * 8.0));
        assert!((activation_bytes_per_layer(&a, &tp8) - want).abs() < 1.0);
        // TP 8 with SP: sbh(34/8 + 5as/(8h)).
        let sp = ActivationLayout {
            sequence_parallel: true,
            ..tp8
        };
        let want = sbh * (34.0 / 8.0 + 5.0 * heads * s / (h * 8.0));
        assert!((activation_bytes_per_layer(&a, &sp) - want).abs() < 1.0);
        // Selective recompute with SP: sbh·34/t.
        let sel = ActivationLayout {
            recompute: Recompute::Selective,
            ..sp
        };
        assert!((activation_bytes_per_layer(&a, &sel) - sbh * 34.0 / 8.0).abs() < 1.0);
        // Full recompute keeps the layer input: 2sbh.
        let full = ActivationLayout {
            recompute: Recompute::Full,
            ..tp8
        };
        assert_eq!(activation_bytes_per_layer(&a, &full), 2.0 * sbh);
    }

    #[test]
    fn gated_mlp_widens_the_split_term() {
        // Llama 3.1 8B: h = 4096, f = 14336, gated → split = 8 + 4·2·3.5 = 36, so 46·sbh.
        let a = models::by_id("llama-3.1-8b").unwrap().architecture.clone();
        let l = ActivationLayout {
            seq: 4096.0,
            micro_batch: 1.0,
            tp: 1,
            sequence_parallel: false,
            cp: 1,
            recompute: Recompute::None,
            flash_attention: true,
            element_scale: 1.0,
        };
        assert_eq!(activation_bytes_per_layer(&a, &l), 4096.0 * 4096.0 * 46.0);
    }
}
