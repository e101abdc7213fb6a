//! The model catalog and the arithmetic of transformer shapes: parameter
//! counts (dense, MoE, MLA), KV-cache elements per token and FLOPs per token.
//!
//! Data: `data/models.toml`, each shape read from the model's published
//! config.json or paper, with that URL. [`Architecture`] is also the
//! `architecture` input object operations accept for custom models.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::RawSource;
use super::dtype::Dtype;

const DATA: &str = include_str!("data/models.toml");

/// MLP form: gated (SwiGLU/GeGLU, three matrices) or standard (two).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MlpKind {
    #[default]
    Gated,
    Standard,
}

/// A decoder-only transformer's shape (field names as in Hugging Face config.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Architecture {
    pub layers: u32,
    pub hidden: u32,
    pub heads: u32,
    /// KV heads (GQA); default `heads`.
    #[serde(default)]
    pub kv_heads: Option<u32>,
    /// Default hidden / heads.
    #[serde(default)]
    pub head_dim: Option<u32>,
    pub ffn: u32,
    pub vocab: u32,
    #[serde(default)]
    pub context: Option<u32>,
    /// Default gated (SwiGLU).
    #[serde(default)]
    pub mlp: Option<MlpKind>,
    /// Embedding and LM head shared; default false.
    #[serde(default)]
    pub tied_embeddings: Option<bool>,
    /// MoE routed experts per layer; default 1.
    #[serde(default)]
    pub experts: Option<u32>,
    /// MoE experts per token; default 1.
    #[serde(default)]
    pub active_experts: Option<u32>,
    /// MoE expert width; default `ffn`.
    #[serde(default)]
    pub moe_ffn: Option<u32>,
    /// MoE shared experts; default 0.
    #[serde(default)]
    pub shared_experts: Option<u32>,
    /// MoE: leading dense layers; default 0.
    #[serde(default)]
    pub dense_layers: Option<u32>,
    #[serde(default)]
    pub q_lora_rank: Option<u32>,
    /// MLA KV latent width (turns MLA on).
    #[serde(default)]
    pub kv_lora_rank: Option<u32>,
    #[serde(default)]
    pub qk_rope_head_dim: Option<u32>,
    #[serde(default)]
    pub qk_nope_head_dim: Option<u32>,
    #[serde(default)]
    pub v_head_dim: Option<u32>,
}

/// A cataloged model.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Model {
    /// Catalog id, e.g. `llama-3.1-70b`.
    pub id: String,
    pub name: String,
    pub family: String,
    /// Where the shape comes from.
    pub source_url: String,
    pub source_title: String,
    /// Parameter count the publisher states, billions.
    pub params_b_published: f64,
    /// Active parameters per token the publisher states (MoE), billions.
    pub active_params_b_published: Option<f64>,
    pub architecture: Architecture,
}

/// A shape that cannot describe a transformer (zero layers, heads not dividing).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid architecture: {0}")]
pub struct InvalidArchitecture(pub String);

impl Architecture {
    /// Check the shape is usable; every other method assumes it is.
    pub fn validate(&self) -> Result<(), InvalidArchitecture> {
        let bad = |m: &str| Err(InvalidArchitecture(m.to_string()));
        if self.layers == 0
            || self.hidden == 0
            || self.heads == 0
            || self.ffn == 0
            || self.vocab == 0
        {
            return bad("layers, hidden, heads, ffn and vocab must all be positive");
        }
        if self.head_dim.is_none() && !self.hidden.is_multiple_of(self.heads) {
            return bad("hidden is not a multiple of heads; give head_dim explicitly");
        }
        let kv = self.kv_heads();
        if kv == 0 || kv > self.heads || !self.heads.is_multiple_of(kv) {
            return bad("kv_heads must divide heads (GQA groups) and be at most heads");
        }
        let e = self.experts();
        if self.active_experts() == 0 || self.active_experts() > e {
            return bad("active_experts must be between 1 and experts");
        }
        if self.dense_layers.unwrap_or(0) > self.layers {
            return bad("dense_layers cannot exceed layers");
        }
        if self.is_mla()
            && (self.qk_rope_head_dim.is_none()
                || self.v_head_dim.is_none()
                || self.qk_nope_head_dim.is_none())
        {
            return bad(
                "multi-head latent attention (kv_lora_rank) also needs qk_rope_head_dim, qk_nope_head_dim and v_head_dim",
            );
        }
        Ok(())
    }

    pub fn kv_heads(&self) -> u32 {
        self.kv_heads.unwrap_or(self.heads)
    }

    pub fn head_dim(&self) -> u32 {
        self.head_dim.unwrap_or(self.hidden / self.heads.max(1))
    }

    pub fn experts(&self) -> u32 {
        self.experts.unwrap_or(1).max(1)
    }

    pub fn active_experts(&self) -> u32 {
        self.active_experts.unwrap_or(1)
    }

    pub fn is_moe(&self) -> bool {
        self.experts() > 1
    }

    /// Multi-head latent attention (DeepSeek-V2/V3): the KV cache holds a compressed latent.
    pub fn is_mla(&self) -> bool {
        self.kv_lora_rank.is_some()
    }

    fn mlp_matrices(&self) -> f64 {
        match self.mlp.unwrap_or_default() {
            MlpKind::Gated => 3.0,
            MlpKind::Standard => 2.0,
        }
    }

    /// Attention projection parameters in one layer.
    pub fn attention_params_per_layer(&self) -> f64 {
        let h = self.hidden as f64;
        let heads = self.heads as f64;
        if let (Some(kv_rank), Some(rope), Some(nope), Some(v)) = (
            self.kv_lora_rank,
            self.qk_rope_head_dim,
            self.qk_nope_head_dim,
            self.v_head_dim,
        ) {
            let (kv_rank, rope, nope, v) = (kv_rank as f64, rope as f64, nope as f64, v as f64);
            let q = match self.q_lora_rank {
                Some(r) => h * r as f64 + r as f64 * heads * (nope + rope),
                None => h * heads * (nope + rope),
            };
            let kv = h * (kv_rank + rope) + kv_rank * heads * (nope + v);
            let o = heads * v * h;
            return q + kv + o;
        }
        let d = self.head_dim() as f64;
        let kv = self.kv_heads() as f64;
        h * heads * d + 2.0 * h * kv * d + heads * d * h
    }

    /// Parameters of one dense MLP of width `ffn`.
    pub fn dense_mlp_params(&self) -> f64 {
        self.mlp_matrices() * self.hidden as f64 * self.ffn as f64
    }

    /// Parameters of one expert.
    pub fn expert_params(&self) -> f64 {
        self.mlp_matrices() * self.hidden as f64 * self.moe_ffn.unwrap_or(self.ffn) as f64
    }

    fn moe_layers(&self) -> f64 {
        if self.is_moe() {
            (self.layers - self.dense_layers.unwrap_or(0).min(self.layers)) as f64
        } else {
            0.0
        }
    }

    fn dense_mlp_layers(&self) -> f64 {
        self.layers as f64 - self.moe_layers()
    }

    /// Input embedding plus LM head (counted once when tied).
    pub fn embedding_params(&self) -> f64 {
        let e = self.vocab as f64 * self.hidden as f64;
        if self.tied_embeddings.unwrap_or(false) {
            e
        } else {
            2.0 * e
        }
    }

    fn norm_params(&self) -> f64 {
        (2.0 * self.layers as f64 + 1.0) * self.hidden as f64
    }

    /// All parameters (every expert).
    pub fn total_params(&self) -> f64 {
        let shared = self.shared_experts.unwrap_or(0) as f64;
        let moe = self.moe_layers()
            * ((self.experts() as f64 + shared) * self.expert_params()
                + self.hidden as f64 * self.experts() as f64);
        self.layers as f64 * self.attention_params_per_layer()
            + self.dense_mlp_layers() * self.dense_mlp_params()
            + moe
            + self.embedding_params()
            + self.norm_params()
    }

    /// Parameters one token passes through (MoE: active and shared experts only).
    pub fn active_params(&self) -> f64 {
        if !self.is_moe() {
            return self.total_params();
        }
        let shared = self.shared_experts.unwrap_or(0) as f64;
        let moe = self.moe_layers()
            * ((self.active_experts() as f64 + shared) * self.expert_params()
                + self.hidden as f64 * self.experts() as f64);
        self.layers as f64 * self.attention_params_per_layer()
            + self.dense_mlp_layers() * self.dense_mlp_params()
            + moe
            + self.embedding_params()
            + self.norm_params()
    }

    /// Routed-expert parameters over all MoE layers (0 for dense models); with
    /// expert parallelism these are the ones split over the EP group.
    pub fn routed_expert_params(&self) -> f64 {
        self.moe_layers() * self.experts() as f64 * self.expert_params()
    }

    /// Parameters in one transformer layer (averaged over dense and MoE layers),
    /// the unit pipeline stages are cut in.
    pub fn params_per_layer(&self) -> f64 {
        (self.total_params() - self.embedding_params() - self.hidden as f64) / self.layers as f64
    }

    /// Cached elements per token per layer: 2·kv_heads·head_dim (K and V), or
    /// kv_lora_rank + qk_rope_head_dim for MLA's compressed latent.
    pub fn kv_elements_per_token_per_layer(&self) -> f64 {
        match (self.kv_lora_rank, self.qk_rope_head_dim) {
            (Some(r), Some(rope)) => (r + rope) as f64,
            _ => 2.0 * self.kv_heads() as f64 * self.head_dim() as f64,
        }
    }

    /// KV-cache bytes per token of context, over all layers.
    pub fn kv_bytes_per_token(&self, dtype: Dtype) -> f64 {
        self.layers as f64 * self.kv_elements_per_token_per_layer() * dtype.bytes()
    }

    /// Attention-score FLOPs per token in a forward pass at context `seq`
    /// (QKᵀ and AV: 4·L·heads·head_dim·seq; PaLM App. B counts 12·L·H·Q·T for
    /// forward plus backward). Causal masking is not halved, as in PaLM.
    pub fn attention_flops_per_token_forward(&self, seq: f64) -> f64 {
        let qk_dim = match (self.qk_nope_head_dim, self.qk_rope_head_dim) {
            (Some(n), Some(r)) => (n + r) as f64,
            _ => self.head_dim() as f64,
        };
        let v_dim = self
            .v_head_dim
            .map(f64::from)
            .unwrap_or(self.head_dim() as f64);
        2.0 * self.layers as f64 * self.heads as f64 * (qk_dim + v_dim) * seq
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCatalog {
    sources: BTreeMap<String, RawSource>,
    models: Vec<RawModel>,
}

// No deny_unknown_fields here: serde does not support it with `flatten`;
// the flattened Architecture denies unknown keys itself.
#[derive(Debug, Deserialize)]
struct RawModel {
    id: String,
    name: String,
    family: String,
    source: String,
    params_b_published: f64,
    #[serde(default)]
    active_params_b_published: Option<f64>,
    #[serde(flatten)]
    architecture: Architecture,
}

fn parse(text: &str) -> Result<Vec<Model>, String> {
    let raw: RawCatalog = toml::from_str(text).map_err(|e| format!("models.toml: {e}"))?;
    raw.models
        .into_iter()
        .map(|m| {
            let src = raw
                .sources
                .get(&m.source)
                .ok_or_else(|| format!("{}: unknown source `{}`", m.id, m.source))?;
            m.architecture
                .validate()
                .map_err(|e| format!("{}: {e}", m.id))?;
            Ok(Model {
                source_url: src.url.clone(),
                source_title: src.title.clone(),
                id: m.id,
                name: m.name,
                family: m.family,
                params_b_published: m.params_b_published,
                active_params_b_published: m.active_params_b_published,
                architecture: m.architecture,
            })
        })
        .collect()
}

fn catalog() -> &'static Result<Vec<Model>, String> {
    static CATALOG: OnceLock<Result<Vec<Model>, String>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let parsed = parse(DATA);
        if let Err(e) = &parsed {
            tracing::error!("the compiled-in model catalog failed to load: {e}");
        }
        parsed
    })
}

/// Every cataloged model.
pub fn all() -> &'static [Model] {
    match catalog() {
        Ok(v) => v,
        Err(_) => &[],
    }
}

pub fn ids() -> Vec<&'static str> {
    all().iter().map(|m| m.id.as_str()).collect()
}

/// Look a model up by id (case-insensitive).
pub fn by_id(id: &str) -> Option<&'static Model> {
    let id = id.trim().to_ascii_lowercase();
    all().iter().find(|m| m.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_loads_with_required_models() {
        parse(DATA).expect("models.toml must load");
        for id in [
            "llama-3.1-8b",
            "llama-3.1-70b",
            "llama-3.1-405b",
            "mistral-7b",
            "mixtral-8x7b",
            "qwen2.5-7b",
            "qwen2.5-72b",
            "deepseek-v3",
            "gpt3-175b",
        ] {
            assert!(by_id(id).is_some(), "{id} missing");
        }
        for m in all() {
            assert!(m.source_url.starts_with("https://"), "{}", m.id);
        }
    }

    /// The count computed from each published shape agrees with the
    /// publisher's stated count to within 1% (2% for MoE active counts, where
    /// publishers round to whole billions).
    #[test]
    fn computed_parameter_counts_match_the_published_ones() {
        for m in all() {
            let a = &m.architecture;
            let total_b = a.total_params() / 1e9;
            let err = (total_b - m.params_b_published).abs() / m.params_b_published;
            assert!(
                err < 0.01,
                "{}: computed {total_b:.3}B vs published {}B",
                m.id,
                m.params_b_published
            );
            if let Some(active) = m.active_params_b_published {
                let got = a.active_params() / 1e9;
                let err = (got - active).abs() / active;
                assert!(
                    err < 0.02,
                    "{}: active {got:.3}B vs published {active}B",
                    m.id
                );
            }
        }
        // Exact worked values for Llama 3.1 8B: 8,030,261,248 parameters.
        let l8 = &by_id("llama-3.1-8b").unwrap().architecture;
        assert_eq!(l8.total_params(), 8_030_261_248.0);
    }

    #[test]
    fn kv_cache_bytes_per_token_follow_gqa_and_mla() {
        // 2 · 80 layers · 8 KV heads · 128 · 2 bytes = 327,680 B/token (peers.md §3b).
        let l70 = &by_id("llama-3.1-70b").unwrap().architecture;
        assert_eq!(l70.kv_bytes_per_token(Dtype::Fp16), 327_680.0);
        assert_eq!(l70.kv_bytes_per_token(Dtype::Fp8), 163_840.0);
        // Llama 3.1 8B: 2 · 32 · 8 · 128 · 2 = 131,072 B/token.
        let l8 = &by_id("llama-3.1-8b").unwrap().architecture;
        assert_eq!(l8.kv_bytes_per_token(Dtype::Bf16), 131_072.0);
        // GPT-3 uses full multi-head attention: 2 · 96 · 12288 · 2 = 4,718,592 B/token.
        let g = &by_id("gpt3-175b").unwrap().architecture;
        assert_eq!(g.kv_bytes_per_token(Dtype::Fp16), 4_718_592.0);
        // DeepSeek-V3 MLA caches (512 + 64) elements per layer: 61 · 576 · 2 = 70,272 B/token.
        let ds = &by_id("deepseek-v3").unwrap().architecture;
        assert_eq!(ds.kv_bytes_per_token(Dtype::Bf16), 70_272.0);
    }

    #[test]
    fn invalid_shapes_are_rejected() {
        let mut a = by_id("llama-3.1-8b").unwrap().architecture.clone();
        a.kv_heads = Some(5);
        assert!(a.validate().is_err());
        a.kv_heads = Some(8);
        a.layers = 0;
        assert!(a.validate().is_err());
    }
}
