//! Operations of the `hf` domain: Hugging Face model search and config.json
//! reading (`aisp_hf_model`). The work lives in `aisp_planner::hf`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

use serde_json::Value;

use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, Hints, OpSpec, Operation};
use aisp_planner::hf::{self, HfEnv, HfError, HubModel, ModelRef};
use aisp_planner::{ModelSpec, ModelSummary};

pub const OPERATIONS: &[&dyn DynOperation] = &[&Model];

/// The Hub client of this process: reqwest on a current-thread runtime for
/// each blocking request (operations run on blocking threads). [`AppState`]
/// installs it.
///
/// [`AppState`]: crate::app::AppState
pub struct HubHttp;

impl hf::HubClient for HubHttp {
    fn get(
        &self,
        env: &HfEnv,
        url: &str,
        limit: usize,
    ) -> Result<(u16, Option<String>, Vec<u8>), HfError> {
        let offline = |detail: String| HfError::Offline {
            endpoint: env.endpoint.clone(),
            detail,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| offline(format!("cannot start an I/O runtime: {e}")))?;
        let client = reqwest::Client::builder()
            .timeout(env.timeout)
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("aisp/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| offline(e.to_string()))?;
        rt.block_on(async {
            let mut req = client.get(url);
            if let Some(t) = &env.token {
                req = req.bearer_auth(t);
            }
            let mut resp = req.send().await.map_err(|e| offline(error_chain(&e)))?;
            let status = resp.status().as_u16();
            let commit = resp
                .headers()
                .get("x-repo-commit")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let mut body = Vec::new();
            while let Some(chunk) = resp.chunk().await.map_err(|e| offline(error_chain(&e)))? {
                body.extend_from_slice(&chunk);
                if body.len() > limit {
                    return Err(HfError::BadConfig(format!(
                        "the answer from {url} is larger than {limit} bytes"
                    )));
                }
            }
            Ok((status, commit, body))
        })
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// An `HfError` as the caller reads it: offline and auth problems say what to set.
pub fn hf_error(e: &HfError) -> OpError {
    let msg = e.to_string();
    match e {
        HfError::Offline { .. } => OpError::unsupported(
            format!("offline: {msg}"),
            "This machine cannot reach the Hub. Put the model in the local cache (huggingface-cli download <repo> config.json on a connected machine, then copy $HF_HOME/hub), pass a folder holding config.json (hf:/path/to/model), set HF_ENDPOINT to a reachable mirror, or use a catalog id / `architecture`.",
        ),
        HfError::OfflineNotCached { .. } => OpError::unsupported(
            format!("offline: {msg}"),
            "Unset HF_HUB_OFFLINE to fetch from the Hub, download the model's config.json into the cache, or pass a folder holding config.json (hf:/path/to/model).",
        ),
        HfError::Unauthorized { .. } => OpError::invalid_input(
            msg,
            "Gated or private model: accept its licence on huggingface.co, then set HF_TOKEN (or run huggingface-cli login) where aisp runs.",
        ),
        HfError::NotFound(_) => OpError::not_found(
            msg,
            "Check the repo id and revision (search with aisp_hf_model {\"search\": \"...\"}), or the folder path.",
        ),
        HfError::BadId(_) => OpError::invalid_input(
            msg,
            "Example: \"hf:meta-llama/Llama-3.1-8B\" or \"hf:/models/my-model\".",
        ),
        HfError::BadConfig(_) => OpError::invalid_input(
            msg,
            "The planners need a decoder-only transformer config (num_hidden_layers, hidden_size, num_attention_heads, intermediate_size, vocab_size); pass `architecture` for other models.",
        ),
        HfError::Http { .. } => OpError::unsupported(
            msg,
            "The Hub (or HF_ENDPOINT) answered with an error; retry later or use the local cache.",
        ),
    }
}

pub struct Model;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelInput {
    /// Repo id (org/name, optional @revision) or a folder holding config.json; `hf:` prefix allowed.
    #[serde(default)]
    #[schemars(length(max = 512))]
    pub model: Option<String>,
    /// Search the Hub's models for this text instead (most downloaded first).
    #[serde(default)]
    #[schemars(length(max = 200))]
    pub search: Option<String>,
    /// Search results to return (default 10, at most 100).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ModelDetails {
    /// Pass this as `model` to any planner.
    pub planner_model: String,
    /// `folder`, `cache` or `hub`, and the file or URL read.
    pub source: String,
    pub location: String,
    pub revision: Option<String>,
    pub model_type: Option<String>,
    pub torch_dtype: Option<String>,
    /// The shape the planners use, with parameter counts.
    pub summary: ModelSummary,
    /// The config.json as read.
    pub config: Value,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ModelOutput {
    pub results: Vec<HubModel>,
    pub model: Option<ModelDetails>,
    pub notes: Vec<String>,
}

impl Operation for Model {
    type Input = ModelInput;
    type Output = ModelOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Hugging Face model",
        summary: "Search Hugging Face models, or read a model's config.json (Hub, local HF cache or folder) into the shape and parameter count the planners use.",
        description: "Searches Hugging Face models, or reads one model's config.json from a folder, the local HF cache (HF_HOME) or the Hub (HF_ENDPOINT, HF_TOKEN) and returns its shape and parameter counts. Every planner takes the same model as `model: \"hf:org/name\"`. Use for models not in aisp's catalog. About a second.",
        hints: Hints {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: true,
        },
        positional: &["model"],
        intents: &[
            "hugging face model",
            "search huggingface",
            "config.json",
            "model architecture from the hub",
            "model not in the catalog",
            "hf model",
        ],
        example: r#"{"model": "meta-llama/Llama-3.1-8B"}"#,
        ..OpSpec::new("hf", "model")
    };

    fn run(&self, _ctx: &OpContext, i: ModelInput) -> Result<ModelOutput, OpError> {
        let env = HfEnv::from_env();
        let mut notes = Vec::new();
        if env.endpoint != hf::DEFAULT_ENDPOINT {
            notes.push(format!("Hub endpoint from HF_ENDPOINT: {}", env.endpoint));
        }
        let results = match i.search.as_deref() {
            Some(q) => hf::search(&env, q, i.limit.unwrap_or(10)).map_err(|e| hf_error(&e))?,
            None => vec![],
        };
        let model = match i.model.as_deref() {
            Some(m) => {
                let wanted = ModelRef::parse(m).map_err(|e| hf_error(&e))?;
                let fetched = hf::fetch_config(&env, &wanted).map_err(|e| hf_error(&e))?;
                let planner_model = format!("hf:{}", fetched.model);
                let spec = ModelSpec::from_fetched(&fetched)
                    .map_err(super::advisor_inputs::model_error)?;
                let s = |k: &str| {
                    fetched
                        .config
                        .get(k)
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                Some(ModelDetails {
                    planner_model,
                    model_type: s("model_type"),
                    torch_dtype: s("torch_dtype"),
                    source: fetched.source,
                    location: fetched.location,
                    revision: fetched.revision,
                    summary: spec.summary(),
                    config: fetched.config,
                })
            }
            None => None,
        };
        if i.search.is_none() && model.is_none() {
            return Err(OpError::invalid_input(
                "give `model` (repo id or folder) or `search` (text)",
                "Example: {\"search\": \"llama 3.1\"} or {\"model\": \"meta-llama/Llama-3.1-8B\"}.",
            ));
        }
        Ok(ModelOutput {
            results,
            model,
            notes,
        })
    }
}
