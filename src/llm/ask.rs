//! `aisp_ask` end to end: route the question, gather first evidence, let the
//! model investigate when one is configured and reachable, otherwise (or when
//! it fails) compose the answer from the evidence and the knowledge base;
//! cite, keep the conversation, report honestly what was and was not used.

use std::sync::Arc;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use super::agent::{self, AgentInput, AgentOptions, StopReason};
use super::client::{LlmClient, LlmError};
use super::conversation::{self, NewTurn};
use super::evidence::{Finding, Ledger, cited_ids};
use super::offline;
use super::router::{self, Intent};
use crate::context::OpContext;
use crate::error::{ErrorKind, OpError};
use aisp_knowledge::concepts::troubleshooting;

/// Turns of an earlier conversation shown to the model.
const HISTORY_TURNS: usize = 6;
/// Tools run before the model is asked (the route's first evidence).
const PRIME_WITH_LLM: usize = 3;
/// Tools run for an answer without the model.
const PRIME_WITHOUT_LLM: usize = 6;

/// Offered to the model whenever a profile is attached (those that exist).
const PROFILE_TOOLS: &[&str] = &[
    "aisp_profile_rules",
    "aisp_profile_utilization",
    "aisp_profile_gaps",
    "aisp_profile_iterations",
    "aisp_profile_kernels",
    "aisp_profile_nvtx",
    "aisp_profile_memory",
    "aisp_profile_overlap",
    "aisp_profile_nccl",
    "aisp_profile_info",
    "aisp_profile_summary",
    "aisp_profile_timeline",
];

/// A question.
#[derive(Debug, Clone, Default)]
pub struct AskRequest {
    pub question: String,
    pub profile: Option<String>,
    pub context: Option<String>,
    pub conversation_id: Option<String>,
    pub max_steps: Option<u32>,
}

/// Evidence an answer cites.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Citation {
    /// The label the answer uses, e.g. `E1`.
    pub id: String,
    /// The aisp tool that produced it.
    pub tool: String,
    /// The arguments it was called with.
    pub arguments: Map<String, Value>,
    /// A short excerpt of what it returned.
    pub quote: String,
    /// False when the call failed (the quote is then the error).
    pub ok: bool,
}

/// A rule finding an answer relies on, with the evidence that carries it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FindingRef {
    #[serde(flatten)]
    pub finding: Finding,
    /// The citation label of the tool result it comes from.
    pub evidence_id: String,
}

/// The answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AskAnswer {
    /// The answer in markdown: answer, facts (cited), hypotheses, what the data cannot answer, next steps.
    pub answer: String,
    /// The rule findings the answer relies on (severity medium or above, or named in the answer), with ids.
    pub findings: Vec<FindingRef>,
    /// The evidence the answer cites, by label.
    pub citations: Vec<Citation>,
    /// True when an LLM wrote the answer.
    pub llm_used: bool,
    /// The model that wrote it (or was tried), when one is configured.
    pub model: Option<String>,
    /// Investigation steps: requests to the model, or tools run when no model answered.
    pub steps: u32,
    /// Continue the conversation by passing this back.
    pub conversation_id: String,
    /// The intent the question was routed by.
    pub intent: Intent,
    /// Prompt + completion tokens used (0 without an LLM).
    pub tokens_used: u64,
    /// What happened on the way: fallbacks, retries, budgets, rejected tool calls.
    pub notes: Vec<String>,
}

/// Knobs for tests and embedding; the operation uses the defaults.
#[derive(Debug, Clone, Default)]
pub struct AskOptions {
    pub agent: AgentOptions,
}

fn clean_text(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn reason_for(e: &LlmError, base_url: Option<&str>) -> String {
    match e {
        LlmError::NotConfigured => "No LLM endpoint is configured (set AISP_LLM_BASE_URL and AISP_LLM_MODEL for a \
            local OpenAI-compatible server, or AISP_LLM_API_KEY / OPENAI_API_KEY for OpenAI; `aisp_ai_status` checks it)."
            .to_string(),
        other => format!(
            "The LLM endpoint{} could not answer: {other}.",
            base_url.map(|b| format!(" at {b}")).unwrap_or_default()
        ),
    }
}

/// Answer a question.
pub fn ask(ctx: &OpContext, req: AskRequest, options: &AskOptions) -> Result<AskAnswer, OpError> {
    let started = Instant::now();
    let question = req.question.trim().to_string();
    if question.is_empty() {
        return Err(OpError::invalid_input(
            "question is empty",
            "Ask something, e.g. {\"question\": \"why is my training step slow?\", \"profile\": \"run.sqlite\"}.",
        ));
    }
    if question.chars().count() > 20_000 {
        return Err(OpError::invalid_input(
            "question is longer than 20,000 characters",
            "Put logs and code in `context` and keep the question short.",
        ));
    }
    let max_steps = req.max_steps.unwrap_or(options.agent.max_steps);
    if !(1..=30).contains(&max_steps) {
        return Err(OpError::invalid_input(
            format!("max_steps must be between 1 and 30, not {max_steps}"),
            "Pass e.g. \"max_steps\": 8.",
        ));
    }
    let mut notes: Vec<String> = Vec::new();

    // The conversation so far.
    let store = ctx.app().store().ok();
    let (conversation_id, history) = match clean_text(req.conversation_id.as_deref()) {
        Some(id) => {
            let store = store.ok_or_else(|| {
                OpError::internal("the store is unavailable, so conversations cannot be continued")
            })?;
            if !conversation::exists(store, &id)? {
                return Err(OpError::not_found(
                    format!("no conversation `{id}`"),
                    "Leave out conversation_id to start a new conversation; each answer returns the id to continue it.",
                ));
            }
            (
                id.clone(),
                conversation::history(store, &id, HISTORY_TURNS)?,
            )
        }
        None => (conversation::new_id(), Vec::new()),
    };
    let mut profile = clean_text(req.profile.as_deref());
    if profile.is_none()
        && let Some(p) = history.iter().rev().find_map(|t| t.profile.clone())
    {
        notes.push(format!("Reusing the profile of the earlier turn: {p}."));
        profile = Some(p);
    }
    if let Some(p) = &profile
        && !std::path::Path::new(p).exists()
    {
        return Err(OpError::not_found(
            format!("profile {p} does not exist"),
            "Pass the path of an Nsight Systems export (.sqlite) or report (.nsys-rep), relative to the server's \
             working directory or absolute.",
        ));
    }
    let context_text = clean_text(req.context.as_deref());

    // Route.
    let mut route = router::classify(&question, profile.is_some());
    if let Some(c) = &context_text
        && let Ok(d) = troubleshooting::diagnose(c)
    {
        for x in d {
            route.error_message |= x.symptom.is_error();
            if !route.symptoms.contains(&x.symptom.id) {
                route.symptoms.push(x.symptom.id.clone());
            }
        }
    }
    let mut plan = router::plan(&route, &question, profile.as_deref());
    if let Some(c) = &context_text
        && let Some(t) = plan.iter_mut().find(|c| c.tool == "aisp_ai_troubleshoot")
    {
        // The error text usually lives in the context.
        t.arguments = serde_json::json!({
            "symptom": super::client::truncate_chars(&format!("{question}\n{c}"), 4000)
        });
    }

    // The LLM, when there is one.
    let cfg = &super::client::ClientSettings::from(&ctx.app().config.llm);
    let retry_notes: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let client = if cfg.configured() {
        // Keep a slice of the caller's time to answer without the model.
        let llm_deadline = ctx.deadline().map(|d| {
            let left = d.saturating_duration_since(Instant::now());
            d - (left / 5).min(Duration::from_secs(10))
        });
        let notify = {
            let retry_notes = Arc::clone(&retry_notes);
            Arc::new(move |msg: String| {
                if let Ok(mut n) = retry_notes.lock() {
                    n.push(msg);
                }
            }) as Arc<dyn Fn(String) + Send + Sync>
        };
        Some(LlmClient::new(
            cfg,
            options.agent.client.clone(),
            ctx.cancellation_token().clone(),
            llm_deadline,
            Some(notify),
        ))
    } else {
        None
    };

    // First evidence.
    let prime = if matches!(client, Some(Ok(_))) {
        PRIME_WITH_LLM
    } else {
        PRIME_WITHOUT_LLM
    };
    let mut ledger = Ledger::default();
    let planned: Vec<_> = plan.iter().take(prime).collect();
    for (i, call) in planned.iter().enumerate() {
        ctx.check_cancelled()?;
        ctx.progress(
            (i + 1) as f64 / (planned.len() + 1) as f64,
            Some(f64::from(max_steps + 1)),
            format!(
                "gathering evidence {}/{}: {} ({})",
                i + 1,
                planned.len(),
                call.tool,
                call.why
            ),
        );
        let args = call.arguments.as_object().cloned().unwrap_or_default();
        let result = ctx.call_tool(call.tool, call.arguments.clone());
        if let Err(e) = &result
            && matches!(e.kind, ErrorKind::Cancelled | ErrorKind::Timeout)
        {
            return Err(e.clone());
        }
        ledger.record(call.tool, args, result);
    }
    let primed = ledger.len() as u32;

    // Investigate with the model.
    let mut llm_used = false;
    let mut model: Option<String> = None;
    let mut steps = primed;
    let mut tokens_used = 0;
    let mut answer: Option<String> = None;
    let mut failure_reason: Option<String> = None;
    match client {
        None => failure_reason = Some(reason_for(&LlmError::NotConfigured, None)),
        Some(Err(e)) => failure_reason = Some(reason_for(&e, cfg.base_url.as_deref())),
        Some(Ok(mut client)) => {
            let input = AgentInput {
                question: question.clone(),
                context: context_text.clone(),
                profile: profile.clone(),
                history: history.iter().map(|t| t.as_turn()).collect(),
                must_offer: {
                    let mut must: Vec<String> = plan.iter().map(|c| c.tool.to_string()).collect();
                    if profile.is_some() {
                        // With a profile, the model investigates the profile first.
                        must.extend(PROFILE_TOOLS.iter().map(|t| t.to_string()));
                    }
                    must
                },
            };
            let agent_options = AgentOptions {
                max_steps,
                ..options.agent.clone()
            };
            let outcome = agent::run(ctx, &mut client, &input, &mut ledger, &agent_options)?;
            model = outcome.model.clone().or(client.model().map(str::to_string));
            steps = outcome.steps;
            tokens_used = outcome.tokens_used;
            if outcome.tokens_estimated && tokens_used > 0 {
                notes.push("The endpoint reported no token usage for some requests; those counts are estimates (4 characters a token).".into());
            }
            if outcome.retries > 0 {
                notes.push(format!(
                    "The LLM endpoint needed {} retr{} (rate limits or server errors).",
                    outcome.retries,
                    if outcome.retries == 1 { "y" } else { "ies" }
                ));
            }
            if outcome.tools_refused {
                notes.push(
                    "The model refused tool definitions (no tool-calling support); it answered from the evidence \
                     aisp gathered before asking it."
                        .into(),
                );
            }
            if outcome.rejected_calls > 0 {
                notes.push(format!(
                    "{} of the model's {} tool call(s) were rejected (unknown tool, arguments that were not JSON, \
                     or a tool it may not run); the errors were fed back to it.",
                    outcome.rejected_calls, outcome.tool_calls
                ));
            }
            match (outcome.answer, outcome.stop) {
                (Some(text), _) => {
                    llm_used = true;
                    if !outcome.unknown_citations.is_empty() {
                        notes.push(format!(
                            "The model cited {} which no tool result carries; treat those statements as unsupported.",
                            outcome.unknown_citations.join(", ")
                        ));
                    }
                    answer = Some(text);
                }
                (None, StopReason::LlmFailed) => {
                    let e = outcome.failure.unwrap_or(LlmError::Malformed {
                        detail: "no answer".into(),
                    });
                    failure_reason = Some(reason_for(&e, Some(client.base_url())));
                }
                (None, StopReason::TokenBudget) => {
                    failure_reason = Some(format!(
                        "The model used its token budget ({} tokens) before writing an answer.",
                        options.agent.token_budget
                    ));
                }
                (None, _) => {
                    failure_reason = Some(format!(
                        "The model used all {max_steps} step(s) without writing an answer."
                    ));
                }
            }
        }
    }
    if let Ok(n) = retry_notes.lock()
        && !n.is_empty()
        && !llm_used
        && failure_reason.is_some()
    {
        notes.push(format!("Retries before giving up: {}.", n.join("; ")));
    }

    // Without an answer from the model, compose one.
    let answer = match answer {
        Some(a) => a,
        None => {
            ctx.check_cancelled()?;
            // Run the rest of the plan if the model did not get to it.
            for call in plan.iter().skip(primed as usize).take(PRIME_WITHOUT_LLM) {
                let args = call.arguments.as_object().cloned().unwrap_or_default();
                if ledger.same_call(call.tool, &args).is_some() {
                    continue;
                }
                ctx.check_cancelled()?;
                let result = ctx.call_tool(call.tool, call.arguments.clone());
                if let Err(e) = &result
                    && matches!(e.kind, ErrorKind::Cancelled | ErrorKind::Timeout)
                {
                    return Err(e.clone());
                }
                ledger.record(call.tool, args, result);
                steps += 1;
            }
            let reason = failure_reason.unwrap_or_else(|| "No LLM answered.".into());
            if model.is_some() || cfg.configured() {
                notes.push(format!("Answered without the LLM: {reason}"));
            }
            let earlier = history
                .iter()
                .max_by_key(|t| t.turn)
                .map(|t| offline::EarlierTurn {
                    question: &t.question,
                    answer: &t.answer,
                });
            offline::compose(
                &question,
                &route,
                &ledger,
                profile.is_some(),
                &reason,
                earlier,
            )
        }
    };

    // Citations and findings.
    let cited = cited_ids(&answer);
    let mut citations: Vec<Citation> = cited
        .iter()
        .filter_map(|id| ledger.get(id))
        .map(|e| Citation {
            id: e.id.clone(),
            tool: e.tool.clone(),
            arguments: e.arguments.clone(),
            quote: e.quote(),
            ok: e.ok(),
        })
        .collect();
    if citations.is_empty() && llm_used && !ledger.is_empty() {
        notes.push(
            "The model cited no evidence label; the citations list everything it gathered.".into(),
        );
        citations = ledger
            .items()
            .iter()
            .map(|e| Citation {
                id: e.id.clone(),
                tool: e.tool.clone(),
                arguments: e.arguments.clone(),
                quote: e.quote(),
                ok: e.ok(),
            })
            .collect();
    }
    let cited_ids_set: Vec<&str> = citations.iter().map(|c| c.id.as_str()).collect();
    let mut findings: Vec<FindingRef> = Vec::new();
    for e in ledger.items() {
        if !cited_ids_set.contains(&e.id.as_str()) {
            continue;
        }
        for f in e.findings() {
            let named = answer.contains(&format!("`{}`", f.id)) || answer.contains(&f.id);
            if (f.at_least("medium") || (llm_used && named))
                && !findings
                    .iter()
                    .any(|x| x.finding.id == f.id && x.finding.device == f.device)
            {
                findings.push(FindingRef {
                    finding: f,
                    evidence_id: e.id.clone(),
                });
            }
        }
    }
    findings.sort_by_key(|f| std::cmp::Reverse(f.finding.rank()));

    // Keep the conversation.
    match ctx.app().store() {
        Ok(store) => {
            let citations_json = serde_json::to_string(&citations).unwrap_or_else(|_| "[]".into());
            if let Err(e) = conversation::append(
                store,
                &conversation_id,
                &NewTurn {
                    question: &question,
                    profile: profile.as_deref(),
                    answer: &answer,
                    llm_used,
                    model: model.as_deref(),
                    citations_json: &citations_json,
                },
            ) {
                notes.push(format!("The conversation could not be saved: {e}."));
            }
        }
        Err(e) => notes.push(format!(
            "The conversation could not be saved: {}.",
            e.message
        )),
    }
    if !llm_used {
        ctx.progress(
            f64::from(max_steps + 1),
            Some(f64::from(max_steps + 1)),
            "answer composed from aisp's tools",
        );
    }
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        llm_used,
        steps,
        evidence = ledger.len(),
        "ask answered"
    );
    Ok(AskAnswer {
        answer,
        findings,
        citations,
        llm_used,
        model,
        steps,
        conversation_id,
        intent: route.intent,
        tokens_used,
        notes,
    })
}
