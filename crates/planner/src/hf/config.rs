//! A Hugging Face `config.json` as an [`Architecture`]: the field names of the
//! transformers families (Llama/Mistral/Qwen/Gemma, Mixtral and Qwen MoE,
//! DeepSeek MLA/MoE, GPT-2/NeoX/Falcon style) mapped onto the planners' shape.

use serde_json::Value;

use super::HfError;
use aisp_knowledge::models::{Architecture, MlpKind};

/// Model types whose MLP has two matrices (no gate).
const STANDARD_MLP: &[&str] = &[
    "gpt2",
    "gpt_neox",
    "gptj",
    "gpt_bigcode",
    "opt",
    "bloom",
    "falcon",
    "phi",
    "mpt",
    "starcoder2",
    "bert",
];

fn u32_of(c: &Value, keys: &[&str]) -> Option<u32> {
    keys.iter()
        .find_map(|k| c.get(*k).and_then(Value::as_u64))
        .and_then(|v| u32::try_from(v).ok())
}

/// The shape in `config`, with notes on every default taken.
pub fn architecture(config: &Value) -> Result<(Architecture, Vec<String>), HfError> {
    let mut notes = Vec::new();
    // Multimodal configs keep the language model under text_config.
    let c = match config.get("text_config") {
        Some(t) if t.is_object() && u32_of(config, &["num_hidden_layers"]).is_none() => {
            notes.push(
                "shape read from text_config (the language model of a multimodal config)".into(),
            );
            t
        }
        _ => config,
    };
    let model_type = c
        .get("model_type")
        .or_else(|| config.get("model_type"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let need = |name: &str, keys: &[&str]| {
        u32_of(c, keys).ok_or_else(|| {
            HfError::BadConfig(format!(
                "config.json has no {name} ({}){}",
                keys.join(" / "),
                if model_type.is_empty() {
                    String::new()
                } else {
                    format!(" for model_type {model_type}")
                }
            ))
        })
    };
    let layers = need(
        "layer count",
        &["num_hidden_layers", "n_layer", "num_layers"],
    )?;
    let hidden = need("hidden size", &["hidden_size", "n_embd", "d_model"])?;
    let heads = need("attention heads", &["num_attention_heads", "n_head"])?;
    let vocab = need("vocabulary size", &["vocab_size"])?;
    let ffn = match u32_of(
        c,
        &["intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"],
    ) {
        Some(f) => f,
        None => {
            notes.push("no intermediate_size: MLP width taken as 4 x hidden".into());
            hidden * 4
        }
    };
    let mut kv_heads = u32_of(c, &["num_key_value_heads", "num_kv_heads", "n_head_kv"]);
    if kv_heads.is_none() && c.get("multi_query").and_then(Value::as_bool) == Some(true) {
        kv_heads = Some(1);
    }
    let mlp = if STANDARD_MLP.contains(&model_type.as_str()) {
        MlpKind::Standard
    } else {
        MlpKind::Gated
    };
    let tied = match c
        .get("tie_word_embeddings")
        .or_else(|| config.get("tie_word_embeddings"))
        .and_then(Value::as_bool)
    {
        Some(t) => t,
        None => {
            notes.push("tie_word_embeddings absent: transformers' default (true) assumed".into());
            true
        }
    };
    let experts =
        u32_of(c, &["num_local_experts", "n_routed_experts", "num_experts"]).filter(|&e| e > 1);
    let a = Architecture {
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim: u32_of(c, &["head_dim"]),
        ffn,
        vocab,
        context: u32_of(c, &["max_position_embeddings", "n_positions", "seq_length"]),
        mlp: Some(mlp),
        tied_embeddings: Some(tied),
        experts,
        active_experts: experts.and(u32_of(c, &["num_experts_per_tok", "moe_top_k"])),
        moe_ffn: experts.and(u32_of(c, &["moe_intermediate_size"])),
        shared_experts: experts.and(u32_of(c, &["n_shared_experts"])),
        dense_layers: experts.and(u32_of(c, &["first_k_dense_replace"])),
        q_lora_rank: u32_of(c, &["q_lora_rank"]),
        kv_lora_rank: u32_of(c, &["kv_lora_rank"]),
        qk_rope_head_dim: u32_of(c, &["qk_rope_head_dim"]),
        qk_nope_head_dim: u32_of(c, &["qk_nope_head_dim"]),
        v_head_dim: u32_of(c, &["v_head_dim"]),
    };
    if experts.is_some() && c.get("shared_expert_intermediate_size").is_some() {
        notes.push("shared_expert_intermediate_size is not modelled: the shared expert is left out of the count".into());
    }
    a.validate()
        .map_err(|e| HfError::BadConfig(format!("config.json gives an unusable shape: {e}")))?;
    Ok((a, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aisp_knowledge::models;

    fn load(name: &str) -> Value {
        let p = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("tests/data/hf")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    }

    #[test]
    fn llama_3_1_8b_config_matches_the_catalog_shape() {
        let (a, notes) = architecture(&load("Llama-3.1-8B.config.json")).unwrap();
        let cat = &models::by_id("llama-3.1-8b").unwrap().architecture;
        assert_eq!(
            (a.layers, a.hidden, a.heads, a.kv_heads(), a.ffn, a.vocab),
            (32, 4096, 32, 8, 14336, 128256)
        );
        assert_eq!(a.context, Some(131072));
        assert_eq!(a.total_params(), cat.total_params());
        assert!(
            (a.total_params() / 1e9 - 8.03).abs() < 0.01,
            "{}",
            a.total_params()
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn mixtral_and_gpt2_map_their_own_field_names() {
        let (m, _) = architecture(&load("Mixtral-8x7B-v0.1.config.json")).unwrap();
        assert_eq!((m.experts(), m.active_experts()), (8, 2));
        let cat = &models::by_id("mixtral-8x7b").unwrap().architecture;
        assert_eq!(m.total_params(), cat.total_params());
        let gpt2 = serde_json::json!({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
            "n_inner": null, "vocab_size": 50257, "n_positions": 1024});
        let (g, notes) = architecture(&gpt2).unwrap();
        assert_eq!(
            (g.ffn, g.mlp, g.tied_embeddings),
            (3072, Some(MlpKind::Standard), Some(true))
        );
        // GPT-2 small: 124M parameters (wte + wpe + 12 blocks); without position embeddings 124.4 - 0.8.
        assert!(
            (g.total_params() / 1e6 - 123.5).abs() < 1.0,
            "{}",
            g.total_params()
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        let e = architecture(&serde_json::json!({"model_type": "resnet"})).unwrap_err();
        assert!(e.to_string().contains("no layer count"), "{e}");
    }
}
