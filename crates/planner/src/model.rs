//! The model an estimate is about: a catalog id, a custom architecture, or a
//! bare parameter count. Estimates that need the shape (KV cache,
//! activations) refuse a bare count instead of inventing one.

use schemars::JsonSchema;
use serde::Serialize;

use aisp_knowledge::models::{self, Architecture, InvalidArchitecture};

/// A resolved model.
#[derive(Debug, Clone)]
pub struct ModelSpec {
    /// Catalog id, when it came from the catalog.
    pub id: Option<String>,
    /// What to call it in output.
    pub label: String,
    /// The shape, when known.
    pub arch: Option<Architecture>,
    /// All parameters.
    pub total_params: f64,
    /// Parameters each token passes through (MoE: active experts only).
    pub active_params: f64,
    /// Where the shape or count comes from.
    pub source: String,
}

/// How the model was described, for the output's `assumptions`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ModelSummary {
    /// Catalog id, or null for a custom architecture / bare parameter count.
    pub id: Option<String>,
    pub label: String,
    /// All parameters, billions.
    pub total_params_b: f64,
    /// Active parameters per token, billions (equals total for dense models).
    pub active_params_b: f64,
    /// Where the shape or count comes from.
    pub source: String,
    /// The shape used, when known.
    pub architecture: Option<Architecture>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("unknown model `{wanted}`{}; known models: {}", suggest(.suggestions), .known.join(", "))]
    Unknown {
        wanted: String,
        known: Vec<String>,
        suggestions: Vec<String>,
    },
    #[error("give exactly one of `model`, `architecture` or `params_b` (got {0})")]
    Ambiguous(String),
    #[error("no model given: pass `model` (a catalog id), `architecture` or `params_b`")]
    Missing,
    #[error(transparent)]
    Invalid(#[from] InvalidArchitecture),
    #[error("params_b must be a positive number of billions, got {0}")]
    BadParams(f64),
    #[error(
        "{what} needs the model's shape (layers, heads, kv_heads, hidden); a bare params_b does not give it — pass `model` or `architecture`"
    )]
    NeedsShape { what: String },
    /// `model: "hf:org/name"` could not be read from a folder, the cache or the Hub.
    #[error(transparent)]
    Hf(#[from] crate::hf::HfError),
}

fn suggest(s: &[String]) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", s.join(" or "))
    }
}

impl ModelSpec {
    /// Resolve the three ways of naming a model; exactly one must be given.
    pub fn resolve(
        model: Option<&str>,
        architecture: Option<&Architecture>,
        params_b: Option<f64>,
    ) -> Result<ModelSpec, ModelError> {
        let given = [model.is_some(), architecture.is_some(), params_b.is_some()];
        let n = given.iter().filter(|g| **g).count();
        if n == 0 {
            return Err(ModelError::Missing);
        }
        if n > 1 {
            let names: Vec<&str> = ["model", "architecture", "params_b"]
                .iter()
                .zip(given)
                .filter(|(_, g)| *g)
                .map(|(n, _)| *n)
                .collect();
            return Err(ModelError::Ambiguous(names.join(" and ")));
        }
        if let Some(id) = model {
            if id.trim_start().starts_with("hf:") {
                return Self::from_hf(id, &crate::hf::HfEnv::from_env());
            }
            let m = models::by_id(id).ok_or_else(|| ModelError::Unknown {
                wanted: id.to_string(),
                known: models::ids().into_iter().map(String::from).collect(),
                suggestions: aisp_knowledge::closest(id, models::ids().into_iter())
                    .into_iter()
                    .map(String::from)
                    .collect(),
            })?;
            let a = &m.architecture;
            return Ok(ModelSpec {
                id: Some(m.id.clone()),
                label: m.name.clone(),
                total_params: a.total_params(),
                active_params: a.active_params(),
                arch: Some(a.clone()),
                source: m.source_url.clone(),
            });
        }
        if let Some(a) = architecture {
            a.validate()?;
            return Ok(ModelSpec {
                id: None,
                label: format!("custom {}-layer, hidden {} transformer", a.layers, a.hidden),
                total_params: a.total_params(),
                active_params: a.active_params(),
                arch: Some(a.clone()),
                source: "architecture given in the call".into(),
            });
        }
        let p = params_b.unwrap_or(0.0);
        if !(p.is_finite() && p > 0.0) {
            return Err(ModelError::BadParams(p));
        }
        Ok(ModelSpec {
            id: None,
            label: format!("{p}B-parameter dense model"),
            total_params: p * 1e9,
            active_params: p * 1e9,
            arch: None,
            source: "params_b given in the call (dense model assumed)".into(),
        })
    }

    /// A model from a Hugging Face config.json (`hf:org/name[@rev]` or `hf:/folder`).
    pub fn from_hf(id: &str, env: &crate::hf::HfEnv) -> Result<ModelSpec, ModelError> {
        let wanted = crate::hf::ModelRef::parse(id)?;
        Self::from_fetched(&crate::hf::fetch_config(env, &wanted)?)
    }

    /// A model from a config.json already read.
    pub fn from_fetched(fetched: &crate::hf::FetchedConfig) -> Result<ModelSpec, ModelError> {
        let (arch, notes) = crate::hf::config::architecture(&fetched.config)?;
        let mut source = format!(
            "config.json from the {} ({}",
            fetched.source, fetched.location
        );
        if let Some(r) = &fetched.revision {
            source.push_str(&format!(", revision {r}"));
        }
        source.push(')');
        for n in notes {
            source.push_str("; ");
            source.push_str(&n);
        }
        Ok(ModelSpec {
            id: Some(format!("hf:{}", fetched.model)),
            label: fetched.model.clone(),
            total_params: arch.total_params(),
            active_params: arch.active_params(),
            arch: Some(arch),
            source,
        })
    }

    /// The shape, or an error naming what needed it.
    pub fn arch_for(&self, what: &str) -> Result<&Architecture, ModelError> {
        self.arch.as_ref().ok_or_else(|| ModelError::NeedsShape {
            what: what.to_string(),
        })
    }

    pub fn summary(&self) -> ModelSummary {
        ModelSummary {
            id: self.id.clone(),
            label: self.label.clone(),
            total_params_b: round(self.total_params / 1e9, 3),
            active_params_b: round(self.active_params / 1e9, 3),
            source: self.source.clone(),
            architecture: self.arch.clone(),
        }
    }
}

/// Round to `digits` decimals for presentation (never used inside formulas).
pub fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_each_form_and_rejects_ambiguity() {
        let m = ModelSpec::resolve(Some("llama-3.1-8b"), None, None).unwrap();
        assert_eq!(m.total_params, 8_030_261_248.0);
        let p = ModelSpec::resolve(None, None, Some(7.0)).unwrap();
        assert_eq!(p.total_params, 7e9);
        assert!(matches!(
            p.arch_for("KV cache"),
            Err(ModelError::NeedsShape { .. })
        ));
        assert!(matches!(
            ModelSpec::resolve(Some("llama-3.1-8b"), None, Some(7.0)),
            Err(ModelError::Ambiguous(_))
        ));
        let e = ModelSpec::resolve(Some("llama-3-8b"), None, None).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("known models:") && text.contains("llama-3.1-8b"),
            "{text}"
        );
        assert!(matches!(
            ModelSpec::resolve(None, None, Some(-1.0)),
            Err(ModelError::BadParams(_))
        ));
    }
}
