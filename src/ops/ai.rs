//! Operations of the `ai` domain.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{self, DynOperation, OpSpec, Operation};

pub const OPERATIONS: &[&dyn DynOperation] = &[&SuggestTools];

pub struct SuggestTools;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SuggestToolsInput {
    /// What you want to do, in plain words (e.g. "why is my training step slow", "how much KV cache does llama 70b need").
    pub task: String,
    /// How many tools to suggest (default 5, at most 20).
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SuggestToolsOutput {
    pub task: String,
    pub suggestions: Vec<Suggestion>,
    /// How the ranking was made.
    pub routing: String,
    /// Set when nothing matched: what to try instead.
    pub note: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Suggestion {
    pub tool: String,
    /// Relevance (BM25 plus a bonus for matching a curated intent); only the order is meaningful.
    pub score: f64,
    pub reason: String,
    /// Arguments to start from (fill in your own paths and values).
    pub example_arguments: Map<String, Value>,
    pub needs_gpu: bool,
    pub long_running: bool,
}

impl Operation for SuggestTools {
    type Input = SuggestToolsInput;
    type Output = SuggestToolsOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        short: true,
        title: "Suggest tools for a task",
        summary: "Ranks aisp's tools for a task described in plain words, with reasons and example arguments.",
        description: "Given a task in plain words, ranks aisp's tools (all of them, including any hidden from tools/list by \
the server's toolset) by relevance, using BM25 over each tool's name, description and curated intents. Returns \
suggestions [{tool, score, reason, example_arguments, needs_gpu, long_running}]. Use it when you do not know which \
tool fits, or when the client shows only the core toolset. Inputs: task (required), limit (default 5). Instant.",
        positional: &["task"],
        intents: &[
            "which tool",
            "suggest tool",
            "what tool should i use",
            "find a tool",
            "navigator",
        ],
        example: r#"{"task": "why is my training step slow", "limit": 5}"#,
        ..OpSpec::new("ai", "suggest_tools")
    };

    fn run(
        &self,
        _ctx: &OpContext,
        input: SuggestToolsInput,
    ) -> Result<SuggestToolsOutput, OpError> {
        let task = input.task.trim();
        if task.is_empty() {
            return Err(OpError::invalid_input(
                "task is empty",
                "Describe what you want to do, e.g. \"find idle gaps in my profile\".",
            ));
        }
        let limit = input.limit.unwrap_or(5);
        if limit == 0 || limit > 20 {
            return Err(OpError::invalid_input(
                format!("limit must be between 1 and 20, not {limit}"),
                "Pass a limit from 1 to 20.",
            ));
        }
        let ranked = crate::suggest::rank(task, registry::tools());
        let suggestions: Vec<Suggestion> = ranked
            .into_iter()
            .take(limit as usize)
            .map(|r| {
                let spec = r.tool.spec();
                let reason = match r.intent {
                    Some(intent) => format!(
                        "{} (matches \"{intent}\"; terms: {})",
                        spec.summary,
                        r.matched.join(", ")
                    ),
                    None => format!("{} (terms: {})", spec.summary, r.matched.join(", ")),
                };
                Suggestion {
                    tool: r.tool.name.clone(),
                    score: (r.score * 1000.0).round() / 1000.0,
                    reason,
                    example_arguments: serde_json::from_str(spec.example).unwrap_or_default(),
                    needs_gpu: spec.needs_gpu,
                    long_running: spec.long_running,
                }
            })
            .collect();
        let note = suggestions.is_empty().then(|| {
            "No tool matched these words. Call aisp_list_domains for the full map, or start with aisp_triage.".to_string()
        });
        Ok(SuggestToolsOutput {
            task: task.to_string(),
            suggestions,
            routing: "bm25 over tool descriptions and curated intents".into(),
            note,
        })
    }
}
