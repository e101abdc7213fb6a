//! Operations of the `ai` domain: questions answered with evidence, concept
//! explanations, troubleshooting, tool suggestions and the LLM's status. The
//! work lives in `crate::llm` and `aisp_knowledge::concepts`.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::context::OpContext;
use crate::error::OpError;
use crate::llm::client::{
    ChatRequest, ClientOptions, ClientSettings, LlmClient, LlmError, endpoint,
};
use crate::llm::router::{self, Intent};
use crate::llm::{AskAnswer, AskOptions, AskRequest};
use crate::registry::{self, DynOperation, Hints, OpSpec, Operation};
use aisp_knowledge::concepts::{self, Concept, troubleshooting};

pub const OPERATIONS: &[&dyn DynOperation] =
    &[&Ask, &Explain, &SuggestTools, &AiTroubleshoot, &AiStatus];

/// Reaches an LLM endpoint when one is configured; writes only aisp's store.
const TALKS_TO_LLM: Hints = Hints {
    read_only: true,
    destructive: false,
    idempotent: false,
    open_world: true,
};

fn knowledge_error(e: concepts::KnowledgeError) -> OpError {
    OpError::internal(format!("the built-in knowledge base is damaged: {e}"))
}

// ---------------------------------------------------------------------------------------------
// ask

pub struct Ask;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskInput {
    /// The question, in plain words (e.g. "why is this training step slow?").
    pub question: String,
    /// Path to a profile to investigate: an Nsight Systems export (.sqlite) or report (.nsys-rep).
    /// Named `path` like every profile tool's; `profile` is accepted too.
    #[serde(default, alias = "profile")]
    pub path: Option<String>,
    /// Extra text the answer should consider: an error message, a log excerpt, code or a config.
    #[serde(default)]
    pub context: Option<String>,
    /// Continue an earlier conversation (the id an earlier answer returned).
    #[serde(default)]
    pub conversation_id: Option<String>,
    /// Most requests to the LLM (1–30, default 8); the last one must answer.
    #[serde(default)]
    pub max_steps: Option<u32>,
}

impl Operation for Ask {
    type Input = AskInput;
    type Output = AskAnswer;
    const SPEC: &'static OpSpec = &OpSpec {
        short: true,
        title: "Ask a performance question",
        summary: "Answers a GPU/AI performance question by investigating with aisp's own tools, citing the evidence; works with or without an LLM.",
        description: "Answers a performance question in plain words (slow training, out of memory, scaling, inference latency, an error, a concept) by running aisp's read-only tools, citing each fact's evidence ([E1], ...) apart from hypotheses, with next steps. Uses an LLM when one is configured, else aisp's own routing. Give a profile path for questions about a run. Seconds; with an LLM, as long as it takes.",
        hints: TALKS_TO_LLM,
        long_running: true,
        positional: &["question"],
        intents: &[
            "why is my training slow",
            "why is this slow",
            "ask a question",
            "explain this profile",
            "what is wrong with my run",
            "help me debug performance",
            "investigate",
            "answer with evidence",
        ],
        example: r#"{"question": "why is this training step slow?", "path": "train.sqlite"}"#,
        ..OpSpec::new("ai", "ask")
    };

    fn run(&self, ctx: &OpContext, input: AskInput) -> Result<AskAnswer, OpError> {
        crate::llm::ask(
            ctx,
            AskRequest {
                question: input.question,
                profile: input.path,
                context: input.context,
                conversation_id: input.conversation_id,
                max_steps: input.max_steps,
            },
            &AskOptions::default(),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// explain

pub struct Explain;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainInput {
    /// The concept, e.g. "occupancy", "bank conflicts", "ZeRO", "paged attention", or a question naming it.
    pub concept: String,
    /// Also ask the configured LLM to expand on the entry (default false); the entry and its sources stay as they are.
    #[serde(default)]
    pub expand: Option<bool>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ConceptBrief {
    pub id: String,
    pub name: String,
    pub category: String,
    /// Match strength 0–1 (1 = exact name); only the order is meaningful.
    pub score: f64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExplainOutput {
    pub query: String,
    /// Whether a concept matched well enough to answer.
    pub found: bool,
    /// The entry: definition, why it matters, how to detect it with aisp, how to fix it, sources.
    pub concept: Option<Concept>,
    /// How it matched (exact name, a mention, shared words).
    pub matched_by: Option<String>,
    /// Other candidates, best first.
    pub other_matches: Vec<ConceptBrief>,
    /// The LLM's expansion of the entry, when `expand` was set and an LLM answered.
    pub expansion: Option<String>,
    pub llm_used: bool,
    /// Why there is no entry or no expansion, when there is not.
    pub note: Option<String>,
}

impl Operation for Explain {
    type Input = ExplainInput;
    type Output = ExplainOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        short: true,
        title: "Explain a performance concept",
        summary: "Explains a GPU/AI performance concept from aisp's knowledge base: definition, why it matters, how to detect it with aisp, how to fix it, sources.",
        description: "Explains a GPU performance concept (occupancy, coalescing, bank conflicts, tensor cores, FlashAttention, CUDA graphs, NCCL, ZeRO, KV cache, roofline, ...) from aisp's knowledge base: what it is, why it matters, how to detect it with aisp, how to fix it, sources. Instant.",
        hints: TALKS_TO_LLM,
        positional: &["concept"],
        intents: &[
            "what is",
            "explain concept",
            "define",
            "what does it mean",
            "how does it work",
            "meaning of",
            "explain the term",
        ],
        example: r#"{"concept": "bank conflicts"}"#,
        ..OpSpec::new("ai", "explain")
    };

    fn run(&self, ctx: &OpContext, input: ExplainInput) -> Result<ExplainOutput, OpError> {
        let query = input.concept.trim().to_string();
        if query.is_empty() {
            return Err(OpError::invalid_input(
                "concept is empty",
                "Name a concept, e.g. {\"concept\": \"occupancy\"}.",
            ));
        }
        let matches = concepts::search(&query, 6).map_err(knowledge_error)?;
        let top = matches.first();
        let found = match (top, matches.get(1)) {
            (Some(t), _) if t.score >= 0.6 => true,
            (Some(t), Some(second)) => t.score >= 0.3 && t.score >= 1.5 * second.score,
            (Some(t), None) => t.score >= 0.3,
            (None, _) => false,
        };
        let concept = found.then(|| top.map(|m| m.concept.clone())).flatten();
        let other_matches = matches
            .iter()
            .skip(usize::from(found))
            .map(|m| ConceptBrief {
                id: m.concept.id.clone(),
                name: m.concept.name.clone(),
                category: m.concept.category.clone(),
                score: (m.score * 1000.0).round() / 1000.0,
            })
            .collect::<Vec<_>>();
        let mut note = (!found).then(|| {
            if other_matches.is_empty() {
                format!(
                    "No concept in the knowledge base matches \"{query}\". Try a shorter name (e.g. \"occupancy\"), \
                     or ask aisp_ask for an investigation."
                )
            } else {
                format!(
                    "No concept matches \"{query}\" clearly; the closest entries are listed in other_matches."
                )
            }
        });
        let mut expansion = None;
        let mut llm_used = false;
        if input.expand.unwrap_or(false)
            && let Some(c) = &concept
        {
            match expand(ctx, c) {
                Ok(text) => {
                    expansion = Some(text);
                    llm_used = true;
                }
                Err(e) => note = Some(format!("No expansion: {e}")),
            }
        }
        Ok(ExplainOutput {
            query,
            found,
            matched_by: found.then(|| top.map(|m| m.via.clone())).flatten(),
            concept,
            other_matches,
            expansion,
            llm_used,
            note,
        })
    }
}

/// Ask the model to expand on an entry, keeping to it and its sources.
fn expand(ctx: &OpContext, c: &Concept) -> Result<String, LlmError> {
    let mut client = LlmClient::new(
        &(&ctx.app().config.llm).into(),
        ClientOptions {
            request_timeout: Duration::from_secs(90),
            ..ClientOptions::default()
        },
        ctx.cancellation_token().clone(),
        ctx.deadline(),
        None,
    )?;
    let sources: Vec<String> = c
        .sources
        .iter()
        .enumerate()
        .map(|(i, s)| format!("[S{}] {} <{}>", i + 1, s.title, s.url))
        .collect();
    let entry = json!({
        "name": c.name, "definition": c.definition, "why_it_matters": c.why_it_matters,
        "detect": c.detect, "fix": c.fix,
    });
    let req = ChatRequest {
        messages: vec![
            async_openai::types::chat::ChatCompletionRequestMessage::System(
                "You expand entries of a GPU performance knowledge base for practitioners. Stay consistent with the \
                 entry; add a worked example and the common pitfalls; cite the entry's sources as [S1], [S2] where \
                 they support a statement; mark anything not supported by them as general knowledge. At most 300 words."
                    .into(),
            ),
            async_openai::types::chat::ChatCompletionRequestMessage::User(
                format!("Entry:\n{entry}\n\nSources:\n{}", sources.join("\n")).into(),
            ),
        ],
        max_completion_tokens: Some(1500),
        ..ChatRequest::default()
    };
    let reply = client.chat(&req)?;
    reply.content.ok_or(LlmError::Malformed {
        detail: "the model returned no text".into(),
    })
}

// ---------------------------------------------------------------------------------------------
// suggest_tools

pub struct SuggestTools;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SuggestToolsInput {
    /// What you want to do, in plain words (e.g. "why is my training step slow", "how much KV cache does llama 70b need").
    pub task: String,
    /// How many tools to suggest (default 5, at most 20).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Let the configured LLM re-rank the candidates (default false); falls back to the ranking without it.
    #[serde(default)]
    pub llm: Option<bool>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SuggestToolsOutput {
    pub task: String,
    /// The intent the task was routed by.
    pub intent: Intent,
    pub suggestions: Vec<Suggestion>,
    /// How the ranking was made.
    pub routing: String,
    pub llm_used: bool,
    /// Set when nothing matched, or when LLM ranking was asked for and could not be done.
    pub note: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Suggestion {
    pub tool: String,
    /// Relevance; only the order is meaningful.
    pub score: f64,
    pub reason: String,
    /// Arguments to start from: filled from the task where it names paths, models or GPUs, otherwise the tool's example.
    pub suggested_arguments: Map<String, Value>,
    /// The tool's domain: `aisp_list_domains` with `enable: [domain]` lists it in this session.
    pub domain: String,
    pub needs_gpu: bool,
    pub long_running: bool,
}

/// The tool's example arguments, with what the task names filled in.
fn suggested_arguments(
    tool: &registry::ToolDef,
    entities: &router::Entities,
) -> Map<String, Value> {
    let mut args: Map<String, Value> =
        serde_json::from_str(tool.spec().example).unwrap_or_default();
    let props = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let set = |args: &mut Map<String, Value>, k: &str, v: Value| {
        if props.contains_key(k) {
            args.insert(k.to_string(), v);
        }
    };
    if let Some(p) = entities.paths.first() {
        set(&mut args, "path", json!(p));
        set(&mut args, "profile", json!(p));
    }
    if entities.paths.len() >= 2 {
        set(&mut args, "before", json!(entities.paths[0]));
        set(&mut args, "after", json!(entities.paths[1]));
    }
    if let Some(m) = &entities.model {
        set(&mut args, "model", json!(m));
        args.remove("params_b");
    } else if let Some(p) = entities.params_b
        && props.contains_key("params_b")
    {
        args.remove("model");
        args.insert("params_b".into(), json!(p));
    }
    if let Some(g) = &entities.gpu {
        set(&mut args, "gpu", json!(g));
    }
    if let Some(n) = entities.gpus {
        set(&mut args, "gpus", json!(n));
    }
    if let Some(n) = entities.nodes {
        set(&mut args, "nodes", json!(n));
    }
    args
}

impl Operation for SuggestTools {
    type Input = SuggestToolsInput;
    type Output = SuggestToolsOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        short: true,
        title: "Suggest tools for a task",
        summary: "Ranks aisp's tools for a task described in plain words, with reasons and suggested arguments.",
        description: "Ranks aisp's tools (all of them, listed or not) for a task in plain words, each with the reason, arguments filled from the task (paths, model, GPU, counts), and the domain to enable when it is not listed. Use when unsure which tool answers a question. Instant.",
        hints: TALKS_TO_LLM,
        positional: &["task"],
        intents: &[
            "which tool",
            "suggest tool",
            "what tool should i use",
            "find a tool",
            "navigator",
        ],
        example: r#"{"task": "why is my training step slow", "limit": 5}"#,
        tier: crate::registry::Tier::Core,
        ..OpSpec::new("ai", "suggest_tools")
    };

    fn run(
        &self,
        ctx: &OpContext,
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
        let route = router::classify(task, false);
        // The intent router's plan (the tools `aisp_ask` would run) is a hint,
        // not the answer: it starts broad investigations with probes of the
        // machine, while the question usually names what it wants answered.
        let plan = if route.intent == Intent::General {
            Vec::new()
        } else {
            router::plan(&route, task, None)
        };
        let planned: Vec<&str> = plan
            .iter()
            .map(|c| c.tool)
            .filter(|t| registry::find(t).is_some())
            .collect();
        let gpu_available = ctx.app().gpu().available;
        let ranked = crate::suggest::rank_with(
            task,
            registry::tools(),
            &crate::suggest::Context {
                planned: &planned,
                gpu_available,
                paths: &route.entities.paths,
            },
        );
        let mut suggestions: Vec<Suggestion> = Vec::new();
        for r in ranked {
            let spec = r.tool.spec();
            let mut args = suggested_arguments(r.tool, &route.entities);
            if let Some(c) = plan.iter().find(|c| c.tool == r.tool.name)
                && let Value::Object(planned_args) = &c.arguments
            {
                for (k, v) in planned_args {
                    args.insert(k.clone(), v.clone());
                }
            }
            let mut reason = spec.summary.to_string();
            if let Some(intent) = r.intent {
                reason.push_str(&format!(" Matches \"{intent}\"."));
            }
            if !r.matched.is_empty() {
                reason.push_str(&format!(" Terms: {}.", r.matched.join(", ")));
            }
            if let Some(c) = plan.iter().find(|c| c.tool == r.tool.name) {
                reason.push_str(&format!(
                    " For {} questions: {}.",
                    route.intent.label(),
                    c.why
                ));
            }
            if spec.needs_gpu && !gpu_available {
                reason.push_str(" Needs a GPU, and this host has none usable.");
            }
            if spec.tier == registry::Tier::Domain {
                reason.push_str(&format!(
                    " Not in the default tool list: call aisp_list_domains with enable [\"{}\"] to list it, or call it directly.",
                    spec.domain
                ));
            }
            suggestions.push(Suggestion {
                tool: r.tool.name.clone(),
                score: (r.score * 1000.0).round() / 1000.0,
                reason,
                suggested_arguments: args,
                domain: spec.domain.to_string(),
                needs_gpu: spec.needs_gpu,
                long_running: spec.long_running,
            });
        }
        let mut routing = "bm25 over tool names, descriptions and intents, with the intent router's plan as a boost and GPU tools demoted on a host without a GPU".to_string();
        let mut note = None;
        let mut llm_used = false;
        if input.llm.unwrap_or(false) {
            match llm_rerank(ctx, task, &suggestions, limit as usize) {
                Ok(order) => {
                    let mut reranked = Vec::new();
                    for (name, reason) in order {
                        if let Some(pos) = suggestions.iter().position(|s| s.tool == name) {
                            let mut s = suggestions.remove(pos);
                            s.reason = format!("{reason} ({})", s.reason);
                            reranked.push(s);
                        }
                    }
                    let n = reranked.len();
                    for (i, s) in reranked.iter_mut().enumerate() {
                        s.score = (n - i) as f64;
                    }
                    if !reranked.is_empty() {
                        reranked.extend(suggestions.drain(..).map(|mut s| {
                            s.score = 0.0;
                            s
                        }));
                        suggestions = reranked;
                        routing = "llm re-ranking of the router and bm25 candidates".into();
                        llm_used = true;
                    } else {
                        note = Some("The LLM named none of the candidate tools; the ranking without it stands.".into());
                    }
                }
                Err(e) => {
                    note = Some(format!(
                        "LLM ranking was asked for but could not be done ({e}); the ranking without it stands."
                    ))
                }
            }
        }
        suggestions.truncate(limit as usize);
        if suggestions.is_empty() {
            note = Some(
                "No tool matched these words. Call aisp_list_domains for the full map, or start with aisp_triage."
                    .into(),
            );
        }
        Ok(SuggestToolsOutput {
            task: task.to_string(),
            intent: route.intent,
            suggestions,
            routing,
            llm_used,
            note,
        })
    }
}

/// Ask the model to pick and order tools among the candidates: `[(tool, reason)]`.
fn llm_rerank(
    ctx: &OpContext,
    task: &str,
    candidates: &[Suggestion],
    limit: usize,
) -> Result<Vec<(String, String)>, LlmError> {
    let mut client = LlmClient::new(
        &(&ctx.app().config.llm).into(),
        ClientOptions {
            request_timeout: Duration::from_secs(60),
            max_retries: 1,
            ..ClientOptions::default()
        },
        ctx.cancellation_token().clone(),
        ctx.deadline(),
        None,
    )?;
    let mut pool: Vec<Value> = candidates
        .iter()
        .take(20)
        .map(|s| json!({"tool": s.tool, "summary": registry::find(&s.tool).map(|t| t.spec().summary).unwrap_or("")}))
        .collect();
    if pool.len() < 20 {
        for t in registry::tools() {
            if pool.len() >= 30 {
                break;
            }
            if !candidates.iter().any(|s| s.tool == t.name) {
                pool.push(json!({"tool": t.name, "summary": t.spec().summary}));
            }
        }
    }
    let req = ChatRequest {
        messages: vec![
            async_openai::types::chat::ChatCompletionRequestMessage::System(
                "You route tasks to the tools of aisp, a GPU performance toolkit. Answer with JSON only: \
                 {\"suggestions\": [{\"tool\": \"<name from the list>\", \"reason\": \"<one sentence>\"}]}, best first."
                    .into(),
            ),
            async_openai::types::chat::ChatCompletionRequestMessage::User(
                format!(
                    "Task: {task}\nPick at most {limit} tools from this list:\n{}",
                    Value::Array(pool)
                )
                .into(),
            ),
        ],
        max_completion_tokens: Some(800),
        ..ChatRequest::default()
    };
    let reply = client.chat(&req)?;
    let text = reply.content.unwrap_or_default();
    // Models wrap JSON in prose or code fences; take the outermost object.
    let json_text = match (text.find('{'), text.rfind('}')) {
        (Some(a), Some(b)) if b > a => &text[a..=b],
        _ => {
            return Err(LlmError::Malformed {
                detail: "the model's answer holds no JSON object".into(),
            });
        }
    };
    let v: Value = serde_json::from_str(json_text).map_err(|e| LlmError::Malformed {
        detail: format!("the model's JSON does not parse: {e}"),
    })?;
    let picks = v
        .get("suggestions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok(picks
        .iter()
        .filter_map(|p| {
            let tool = p.get("tool")?.as_str()?.to_string();
            registry::find(&tool)?;
            let reason = p
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("chosen by the LLM")
                .to_string();
            Some((tool, reason))
        })
        .collect())
}

// ---------------------------------------------------------------------------------------------
// ai_troubleshoot

pub struct AiTroubleshoot;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TroubleshootInput {
    /// The error message or symptom, e.g. "CUDA out of memory", "NCCL timeout", or a pasted traceback.
    pub symptom: String,
    /// How many matching symptoms to return (default 3, at most 10).
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TroubleshootOutput {
    /// The text examined (shortened to 300 characters).
    pub symptom: String,
    /// Known symptoms the text matches, best first.
    pub matches: Vec<SymptomMatch>,
    /// What to do when nothing matched.
    pub note: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SymptomMatch {
    pub id: String,
    pub title: String,
    pub category: String,
    /// The phrases of the text that identified it.
    pub matched_patterns: Vec<String>,
    pub summary: String,
    /// Likely causes, most likely first.
    pub causes: Vec<RankedCause>,
    /// Knowledge-base concepts to read with aisp_explain.
    pub concepts: Vec<String>,
    pub sources: Vec<concepts::Source>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RankedCause {
    /// 1 = most likely.
    pub rank: u32,
    pub cause: String,
    pub why: String,
    /// Phrases of the text that point at this cause (they moved it up).
    pub matched_hints: Vec<String>,
    /// Checks to run, each naming an aisp tool.
    pub checks: Vec<CheckToRun>,
    pub fix: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CheckToRun {
    pub tool: String,
    pub arguments: Map<String, Value>,
    pub look_for: String,
    /// Whether this aisp build has the tool.
    pub available: bool,
}

impl Operation for AiTroubleshoot {
    type Input = TroubleshootInput;
    type Output = TroubleshootOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Troubleshoot an error or symptom",
        summary: "Matches an error message or symptom (CUDA OOM, NCCL timeout, illegal memory access, cuDNN errors, slow data loading, ...) to likely causes, ranked, with aisp checks to run.",
        description: "Matches an error message, traceback or symptom (CUDA out of memory, NCCL timeout, illegal memory access, Xid errors, slow data loading, low GPU utilization, ...) to its likely causes, ranked, each with the aisp check that confirms it and the fix. Paste the whole error. Instant; no LLM.",
        positional: &["symptom"],
        intents: &[
            "cuda out of memory",
            "out of memory error",
            "nccl timeout",
            "watchdog timeout",
            "illegal memory access",
            "cudnn error",
            "cublas error",
            "error message",
            "troubleshoot",
            "diagnose error",
            "why does it crash",
            "runtimeerror",
            "traceback",
            "xid error",
            "segfault",
            "hangs",
            "no kernel image",
        ],
        example: r#"{"symptom": "CUDA out of memory. Tried to allocate 2.00 GiB"}"#,
        tier: crate::registry::Tier::Default,
        ..OpSpec::new("ai", "troubleshoot")
    };

    fn run(
        &self,
        _ctx: &OpContext,
        input: TroubleshootInput,
    ) -> Result<TroubleshootOutput, OpError> {
        let text = input.symptom.trim();
        if text.is_empty() {
            return Err(OpError::invalid_input(
                "symptom is empty",
                "Paste the error message or describe the symptom, e.g. \"NCCL timeout\".",
            ));
        }
        let limit = input.limit.unwrap_or(3);
        if limit == 0 || limit > 10 {
            return Err(OpError::invalid_input(
                format!("limit must be between 1 and 10, not {limit}"),
                "Pass a limit from 1 to 10.",
            ));
        }
        let found = troubleshooting::diagnose(text).map_err(knowledge_error)?;
        let matches: Vec<SymptomMatch> = found
            .into_iter()
            .take(limit as usize)
            .map(|d| SymptomMatch {
                id: d.symptom.id.clone(),
                title: d.symptom.title.clone(),
                category: d.symptom.category.clone(),
                matched_patterns: d.matched.clone(),
                summary: d.symptom.summary.clone(),
                causes: d
                    .causes
                    .iter()
                    .enumerate()
                    .map(|(i, (c, hints))| RankedCause {
                        rank: i as u32 + 1,
                        cause: c.cause.clone(),
                        why: c.why.clone(),
                        matched_hints: hints.clone(),
                        checks: c
                            .checks
                            .iter()
                            .map(|k| CheckToRun {
                                tool: k.tool.clone(),
                                arguments: k.arguments_map(),
                                look_for: k.look_for.clone(),
                                available: registry::find(&k.tool).is_some(),
                            })
                            .collect(),
                        fix: c.fix.clone(),
                    })
                    .collect(),
                concepts: d.symptom.concepts.clone(),
                sources: d.symptom.sources.clone(),
            })
            .collect();
        let note = matches.is_empty().then(|| {
            "No known symptom matches this text. Paste the full error line (e.g. the line starting with RuntimeError \
             or the NCCL WARN line); or start with aisp_triage for this machine and aisp_ask for an investigation."
                .to_string()
        });
        Ok(TroubleshootOutput {
            symptom: crate::llm::client::truncate_chars(text, 300),
            matches,
            note,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// ai_status

pub struct AiStatus;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AiStatusInput {
    /// Send a tiny request to measure reachability and latency (default true).
    #[serde(default)]
    pub probe: Option<bool>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AiStatusOutput {
    /// An endpoint is configured (a base URL or an API key).
    pub configured: bool,
    /// The OpenAI-compatible base URL in use (OpenAI's when only a key is set).
    pub base_url: Option<String>,
    /// The model in use.
    pub model: Option<String>,
    /// Where the model name came from: configured, default (OpenAI) or discovered (the endpoint's first model).
    pub model_source: Option<String>,
    /// Whether an API key is set (the key itself is never shown).
    pub api_key_set: bool,
    /// Whether a request was sent.
    pub probed: bool,
    /// The endpoint answered a chat completion.
    pub reachable: Option<bool>,
    /// Round trip of the tiny request, ms.
    pub latency_ms: Option<f64>,
    /// The model the endpoint says answered.
    pub answered_model: Option<String>,
    /// What went wrong, when something did.
    pub error: Option<String>,
    /// What to do next.
    pub hint: String,
}

impl Operation for AiStatus {
    type Input = AiStatusInput;
    type Output = AiStatusOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "LLM backend status",
        summary: "Whether an LLM endpoint is configured and reachable, which model, and the latency of a tiny request.",
        description: "Reports the LLM backend aisp_ask, aisp_explain (expand) and aisp_suggest_tools (llm) use: whether one \
is configured (AISP_LLM_BASE_URL, AISP_LLM_MODEL, AISP_LLM_API_KEY or OPENAI_API_KEY, or the config file), its base \
URL and model (discovered from the endpoint's model list when none is set), whether a key is set (never the key), and, \
with probe (default), whether a tiny chat request succeeds and how long it takes. Without an LLM, aisp_ask still \
answers from aisp's own tools. Answers in milliseconds without probe; with probe, one short request (up to 20 s).",
        hints: TALKS_TO_LLM,
        intents: &[
            "llm status",
            "is the llm configured",
            "llm endpoint",
            "ai backend",
            "which model",
            "openai key",
            "api key configured",
        ],
        example: r#"{"probe": true}"#,
        ..OpSpec::new("ai", "status")
    };

    fn run(&self, ctx: &OpContext, input: AiStatusInput) -> Result<AiStatusOutput, OpError> {
        let cfg = &ClientSettings::from(&ctx.app().config.llm);
        let api_key_set = cfg.api_key.as_deref().is_some_and(|k| !k.trim().is_empty());
        let Some((base_url, model)) = endpoint(cfg) else {
            return Ok(AiStatusOutput {
                configured: false,
                base_url: None,
                model: None,
                model_source: None,
                api_key_set,
                probed: false,
                reachable: None,
                latency_ms: None,
                answered_model: None,
                error: None,
                hint: "No LLM is configured; aisp_ask answers from aisp's own tools without one. To add one, set \
                       AISP_LLM_BASE_URL (e.g. http://localhost:11434/v1 for Ollama, http://localhost:8000/v1 for vLLM) \
                       and AISP_LLM_MODEL, or AISP_LLM_API_KEY / OPENAI_API_KEY for OpenAI, then restart aisp."
                    .into(),
            });
        };
        let model_source = match (&cfg.model, &model) {
            (Some(m), _) if !m.trim().is_empty() => Some("configured"),
            (_, Some(_)) => Some("default"),
            _ => None,
        };
        let mut out = AiStatusOutput {
            configured: true,
            base_url: Some(base_url.clone()),
            model: model.clone(),
            model_source: model_source.map(str::to_string),
            api_key_set,
            probed: false,
            reachable: None,
            latency_ms: None,
            answered_model: None,
            error: None,
            hint: String::new(),
        };
        if !input.probe.unwrap_or(true) {
            out.hint = "Call again with probe: true to check that the endpoint answers.".into();
            return Ok(out);
        }
        out.probed = true;
        let started = Instant::now();
        let result = LlmClient::new(
            cfg,
            ClientOptions {
                request_timeout: Duration::from_secs(20),
                connect_timeout: Duration::from_secs(5),
                max_retries: 1,
                ..ClientOptions::default()
            },
            ctx.cancellation_token().clone(),
            ctx.deadline(),
            None,
        )
        .and_then(|mut client| {
            let resolved = client.resolve_model()?;
            let req = ChatRequest {
                messages: vec![
                    async_openai::types::chat::ChatCompletionRequestMessage::User(
                        "Reply with the single word OK.".into(),
                    ),
                ],
                max_completion_tokens: Some(16),
                ..ChatRequest::default()
            };
            let reply = client.chat(&req)?;
            Ok((resolved, reply))
        });
        match result {
            Ok((resolved, reply)) => {
                out.latency_ms = Some((started.elapsed().as_secs_f64() * 1e4).round() / 10.0);
                out.reachable = Some(true);
                if out.model.is_none() {
                    out.model = Some(resolved);
                    out.model_source = Some("discovered".into());
                }
                out.answered_model = reply.model;
                out.hint =
                    "The LLM answers; aisp_ask will use it to choose tools and write answers."
                        .into();
            }
            Err(LlmError::Cancelled) => return Err(OpError::cancelled()),
            Err(e) => {
                out.reachable = Some(false);
                out.hint = match &e {
                    LlmError::Unreachable { .. } | LlmError::Timeout { .. } => {
                        "Check that the server is running and that AISP_LLM_BASE_URL includes the /v1 prefix \
                         (e.g. http://localhost:8000/v1)."
                    }
                    LlmError::Http { status: 401 | 403, .. } => {
                        "The endpoint refused the key: check AISP_LLM_API_KEY (or OPENAI_API_KEY)."
                    }
                    LlmError::Http { status: 404, .. } => {
                        "The endpoint does not know this path or model: check the /v1 prefix of the base URL and \
                         AISP_LLM_MODEL."
                    }
                    LlmError::RateLimited { .. } => "The endpoint is rate-limiting; try again later.",
                    LlmError::BadConfig(_) => "Fix the configuration named in the error.",
                    _ => "aisp_ask falls back to answering from aisp's own tools while the LLM is unavailable.",
                }
                .into();
                out.error = Some(e.to_string());
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppState;

    fn ctx() -> OpContext {
        OpContext::detached(AppState::for_tests())
    }

    #[test]
    fn explain_finds_entries_and_says_when_it_cannot() {
        let out = Explain
            .run(
                &ctx(),
                ExplainInput {
                    concept: "Paged attention".into(),
                    expand: None,
                },
            )
            .unwrap();
        assert!(out.found);
        let c = out.concept.unwrap();
        assert_eq!(c.id, "paged_attention");
        assert!(c.sources.iter().all(|s| s.url.starts_with("https://")));
        assert!(!c.detect.is_empty());
        let out = Explain
            .run(
                &ctx(),
                ExplainInput {
                    concept: "quantum banana".into(),
                    expand: None,
                },
            )
            .unwrap();
        assert!(!out.found);
        assert!(out.concept.is_none());
        assert!(out.note.unwrap().contains("quantum banana"));
        // expand without an LLM: the entry stands, a note says why there is no expansion.
        let out = Explain
            .run(
                &ctx(),
                ExplainInput {
                    concept: "occupancy".into(),
                    expand: Some(true),
                },
            )
            .unwrap();
        assert!(out.found && !out.llm_used && out.expansion.is_none());
        assert!(out.note.unwrap().contains("no LLM endpoint is configured"));
    }

    #[test]
    fn troubleshoot_ranks_causes_with_checks() {
        let out = AiTroubleshoot
            .run(
                &ctx(),
                TroubleshootInput {
                    symptom: "NCCL WARN ... watchdog caught collective operation timeout".into(),
                    limit: None,
                },
            )
            .unwrap();
        assert_eq!(out.matches[0].id, "nccl_timeout");
        let causes = &out.matches[0].causes;
        assert_eq!(causes[0].rank, 1);
        assert!(causes.iter().all(|c| !c.checks.is_empty()));
        let out = AiTroubleshoot
            .run(
                &ctx(),
                TroubleshootInput {
                    symptom: "the sky is blue".into(),
                    limit: None,
                },
            )
            .unwrap();
        assert!(out.matches.is_empty());
        assert!(out.note.unwrap().contains("aisp_triage"));
    }

    #[test]
    fn status_without_an_llm_says_how_to_add_one() {
        let out = AiStatus.run(&ctx(), AiStatusInput { probe: None }).unwrap();
        assert!(!out.configured && !out.probed && !out.api_key_set);
        assert!(out.hint.contains("AISP_LLM_BASE_URL"));
    }

    #[test]
    fn suggestions_put_the_routed_tools_first_with_filled_arguments() {
        let out = SuggestTools
            .run(
                &ctx(),
                SuggestToolsInput {
                    task: "is my background job finished? poll job status".into(),
                    limit: Some(3),
                    llm: None,
                },
            )
            .unwrap();
        assert_eq!(out.suggestions[0].tool, "aisp_job_status");
        let out = SuggestTools
            .run(
                &ctx(),
                SuggestToolsInput {
                    task: "what does bank conflicts mean".into(),
                    limit: Some(5),
                    llm: Some(true),
                },
            )
            .unwrap();
        assert_eq!(out.intent, Intent::Concept);
        assert_eq!(out.suggestions[0].tool, "aisp_explain");
        assert_eq!(
            out.suggestions[0].suggested_arguments.get("concept"),
            Some(&json!("bank_conflicts"))
        );
        assert!(!out.llm_used);
        assert!(out.note.unwrap().contains("could not be done"));
    }
}
