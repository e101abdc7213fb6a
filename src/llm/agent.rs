//! The agent loop: the model investigates with aisp's tools, aisp runs them
//! and feeds the results back labelled `[E1]`, `[E2]`, ..., and the model's
//! final answer cites them.
//!
//! Budgets: a step is one request to the model; at `max_steps` the model is
//! told to answer with what it has (tools off). The token budget counts
//! prompt and completion tokens as the endpoint reports them (estimated at 4
//! characters a token when it does not): when two more requests the size of
//! the last would not fit, the next one is the forced answer, and a request
//! that would exceed the budget is not sent at all. Tool calls that name an unknown tool, carry arguments that are
//! not JSON, or fail their schema are answered with the error, so the model
//! can correct itself; they never end the loop.

use std::time::Instant;

use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestToolMessage, ChatCompletionRequestToolMessageContent,
    ChatCompletionRequestUserMessage, ChatCompletionTools, FunctionCall,
};
use serde_json::{Map, Value};

use super::client::{ChatReply, ChatRequest, ClientOptions, LlmClient, LlmError, estimate_tokens};
use super::evidence::{Ledger, cited_ids, render_for_model};
use super::tools;
use crate::context::OpContext;
use crate::error::{ErrorKind, OpError};

/// Limits of one investigation.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// Requests to the model, the last one forced to answer.
    pub max_steps: u32,
    /// Prompt + completion tokens over all requests.
    pub token_budget: u64,
    /// Characters of one tool result shown to the model.
    pub max_tool_result_chars: usize,
    /// Tools offered in the request (besides any the model calls by name).
    pub max_tools_offered: usize,
    /// Tokens one reply may use.
    pub max_completion_tokens: u32,
    pub client: ClientOptions,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            max_steps: 8,
            token_budget: 200_000,
            max_tool_result_chars: 12_000,
            max_tools_offered: 16,
            max_completion_tokens: 4096,
            client: ClientOptions::default(),
        }
    }
}

/// One earlier turn of the conversation.
#[derive(Debug, Clone)]
pub struct Turn {
    pub question: String,
    pub answer: String,
}

/// What the agent is asked.
#[derive(Debug, Clone, Default)]
pub struct AgentInput {
    pub question: String,
    /// Extra text from the caller (code, logs, config).
    pub context: Option<String>,
    /// The attached profile path.
    pub profile: Option<String>,
    pub history: Vec<Turn>,
    /// Tools to offer first (the route's plan).
    pub must_offer: Vec<String>,
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Answered,
    /// The last step came and the model still gave no text.
    StepBudget,
    /// The next request would have exceeded the token budget.
    TokenBudget,
    /// The endpoint failed (see `failure`).
    LlmFailed,
}

/// The loop's result. The evidence is in the ledger passed in.
#[derive(Debug, Clone)]
pub struct AgentOutcome {
    pub answer: Option<String>,
    pub stop: StopReason,
    pub failure: Option<LlmError>,
    /// Requests sent to the model.
    pub steps: u32,
    pub tokens_used: u64,
    /// True when some usage figures were estimated.
    pub tokens_estimated: bool,
    pub model: Option<String>,
    pub retries: u32,
    /// Labels the answer cites that no evidence carries.
    pub unknown_citations: Vec<String>,
    /// Tool calls the model made (valid or not).
    pub tool_calls: u32,
    /// Tool calls rejected before running (unknown tool, bad JSON, not allowed).
    pub rejected_calls: u32,
    /// The endpoint refused tool definitions; the model answered without tools.
    pub tools_refused: bool,
}

/// The system prompt: role, evidence rules, answer shape.
pub fn system_prompt(max_steps: u32) -> String {
    format!(
        "You are aisp's performance assistant, a senior GPU performance engineer. You answer questions about \
the speed, memory and scaling of GPU and AI workloads from evidence you gather with aisp's tools.\n\
\n\
Rules:\n\
- Investigate before concluding: call the tools that measure or read what the question is about. Every tool \
result comes back labelled [E1], [E2], ...; results already gathered are listed with their labels.\n\
- Cite the labels in your answer, e.g. \"the GPU is idle 91% of the steady state [E2]\". Never cite a label \
you were not given.\n\
- Every number you state must come from a cited result or from the user's text. Do not invent measurements.\n\
- Separate facts from hypotheses. Use these markdown sections, in order: \"## Answer\" (two to four \
sentences), \"## Facts\" (bullets, each with its citation), \"## Hypotheses\" (what likely explains the facts, \
each with a confidence of high, medium or low and what would confirm it), \"## Next steps\" (concrete \
actions, each with the aisp tool or capture that verifies it).\n\
- When the evidence cannot answer, say so plainly and name the tool or capture that would (for example an \
Nsight Systems capture: `nsys profile -t cuda,nvtx,osrt -o run python train.py`, then pass the exported \
.sqlite as `profile`; or Nsight Compute for per-kernel counters).\n\
- If a tool returns an error, read its hint, fix the arguments or choose another tool; do not repeat a call \
that failed the same way.\n\
- You have at most {max_steps} turns. Be concise: answers of a few hundred words are best."
    )
}

fn user_message(text: String) -> ChatCompletionRequestMessage {
    ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage::from(text))
}

fn assistant_text(text: String) -> ChatCompletionRequestMessage {
    ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
        content: Some(ChatCompletionRequestAssistantMessageContent::Text(text)),
        ..Default::default()
    })
}

fn assistant_calls(reply: &ChatReply) -> ChatCompletionRequestMessage {
    ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
        content: reply
            .content
            .clone()
            .map(ChatCompletionRequestAssistantMessageContent::Text),
        tool_calls: Some(
            reply
                .tool_calls
                .iter()
                .map(|c| {
                    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                        id: c.id.clone(),
                        function: FunctionCall {
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        },
                    })
                })
                .collect(),
        ),
        ..Default::default()
    })
}

fn tool_message(call_id: &str, text: String) -> ChatCompletionRequestMessage {
    ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
        content: ChatCompletionRequestToolMessageContent::Text(text),
        tool_call_id: call_id.to_string(),
    })
}

fn error_text(e: &OpError) -> String {
    serde_json::to_string(&e.envelope()).unwrap_or_else(|_| e.message.clone())
}

fn args_text(args: &Map<String, Value>) -> String {
    serde_json::to_string(args).unwrap_or_default()
}

/// The first user message: the question, the caller's context, and the
/// evidence gathered before the loop.
fn opening(input: &AgentInput, ledger: &Ledger, max_chars: usize) -> String {
    let mut text = format!("Question: {}\n", input.question.trim());
    if let Some(p) = &input.profile {
        text.push_str(&format!(
            "\nAttached profile: {p} (pass it as `path` to the aisp_profile_* tools).\n"
        ));
    }
    if let Some(c) = input.context.as_deref().filter(|c| !c.trim().is_empty()) {
        text.push_str(&format!(
            "\nContext from the user:\n{}\n",
            super::client::truncate_chars(c.trim(), 8000)
        ));
    }
    if !ledger.is_empty() {
        text.push_str("\nEvidence already gathered:\n");
        for e in ledger.items() {
            let body = match &e.result {
                Ok(v) => render_for_model(v, max_chars),
                Err(err) => error_text(err),
            };
            text.push_str(&format!(
                "[{}] {} {}\n{}\n",
                e.id,
                e.tool,
                args_text(&e.arguments),
                body
            ));
        }
    }
    text
}

/// Run one tool call the model asked for; the text to send back.
fn run_call(
    ctx: &OpContext,
    ledger: &mut Ledger,
    name: &str,
    raw_args: &str,
    max_chars: usize,
) -> Result<(String, bool), OpError> {
    let Some(tool) = crate::registry::find(name) else {
        let offered: Vec<String> = tools::eligible_tools()
            .iter()
            .take(40)
            .map(|t| t.name.clone())
            .collect();
        let e = OpError::not_found(
            format!("no tool named `{name}`"),
            format!(
                "Call aisp_suggest_tools to find one, or one of: {}",
                offered.join(", ")
            ),
        );
        return Ok((error_text(&e), false));
    };
    if let Some(why) = tools::refusal(tool) {
        let e = OpError::invalid_input(
            format!("{name} cannot be called during an investigation: {why}"),
            "Recommend it to the user in your answer, with the arguments to use.",
        );
        return Ok((error_text(&e), false));
    }
    let parsed: Value = match serde_json::from_str(if raw_args.trim().is_empty() {
        "{}"
    } else {
        raw_args
    }) {
        Ok(v) => v,
        Err(err) => {
            let e = OpError::invalid_input(
                format!("the arguments for {name} are not valid JSON: {err}"),
                format!(
                    "Send the arguments as one JSON object, e.g. {}",
                    tool.spec().example
                ),
            );
            return Ok((error_text(&e), false));
        }
    };
    let Value::Object(mut args) = parsed else {
        let e = OpError::invalid_input(
            format!("the arguments for {name} must be a JSON object"),
            format!("For example: {}", tool.spec().example),
        );
        return Ok((error_text(&e), false));
    };
    tools::sanitize_args(name, &mut args);
    if let Some(prev) = ledger.same_call(name, &args) {
        return Ok((
            format!(
                "This is the same call as [{}]; its result is above. Use it, or call with other arguments.",
                prev.id
            ),
            true,
        ));
    }
    let result = ctx.call_tool(name, Value::Object(args.clone()));
    if let Err(e) = &result
        && matches!(e.kind, ErrorKind::Cancelled | ErrorKind::Timeout)
    {
        return Err(e.clone());
    }
    let ev = ledger.record(name, args, result);
    let body = match &ev.result {
        Ok(v) => render_for_model(v, max_chars),
        Err(e) => error_text(e),
    };
    Ok((format!("[{}] {} result:\n{}", ev.id, name, body), true))
}

/// Ask the model, retrying once on a garbled answer.
fn ask_model(client: &mut LlmClient, req: &ChatRequest) -> Result<ChatReply, LlmError> {
    match client.chat(req) {
        Err(e) if e.is_transient() => {
            tracing::info!(error = %e, "LLM answer was garbled; asking once more");
            client.chat(req)
        }
        other => other,
    }
}

/// Investigate `input` with the model. Evidence (including anything gathered
/// beforehand) accumulates in `ledger`. Returns `Err` only when the caller
/// cancelled or its deadline passed; the client's own (earlier) deadline ends
/// the loop as an LLM failure, leaving time to answer without the model.
pub fn run(
    ctx: &OpContext,
    client: &mut LlmClient,
    input: &AgentInput,
    ledger: &mut Ledger,
    options: &AgentOptions,
) -> Result<AgentOutcome, OpError> {
    let started = Instant::now();
    let max_steps = options.max_steps.max(1);
    let mut out = AgentOutcome {
        answer: None,
        stop: StopReason::StepBudget,
        failure: None,
        steps: 0,
        tokens_used: 0,
        tokens_estimated: false,
        model: client.model().map(str::to_string),
        retries: 0,
        unknown_citations: Vec::new(),
        tool_calls: 0,
        rejected_calls: 0,
        tools_refused: false,
    };

    let must: Vec<&str> = input.must_offer.iter().map(String::as_str).collect();
    let offered: Vec<ChatCompletionTools> =
        tools::select(&input.question, &must, options.max_tools_offered)
            .into_iter()
            .map(tools::function_tool)
            .collect();
    let tools_chars = serde_json::to_string(&offered)
        .map(|s| s.len())
        .unwrap_or(0);

    let mut messages = vec![ChatCompletionRequestMessage::System(
        ChatCompletionRequestSystemMessage::from(system_prompt(max_steps)),
    )];
    for t in &input.history {
        // Earlier answers can be long; their gist is enough context.
        messages.push(user_message(t.question.clone()));
        messages.push(assistant_text(super::client::truncate_chars(
            &t.answer, 6000,
        )));
    }
    messages.push(user_message(opening(
        input,
        ledger,
        options.max_tool_result_chars,
    )));

    // Set when another round of tool calls would not leave room for an answer.
    let mut force_last = false;
    let mut tools_supported = true;
    for step in 1..=max_steps {
        ctx.check_cancelled()?;
        let last = step == max_steps || force_last;
        if last {
            messages.push(user_message(format!(
                "This is your last turn: tools are off. Write the final answer now from the evidence gathered ({}), \
                 in the sections asked for, and say what the evidence could not establish.",
                if ledger.is_empty() {
                    "none".to_string()
                } else {
                    ledger
                        .items()
                        .iter()
                        .map(|e| e.id.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
        }
        let messages_chars = serde_json::to_string(&messages)
            .map(|s| s.len())
            .unwrap_or(0);
        let projected = out.tokens_used
            + estimate_tokens(messages_chars + tools_chars)
            + u64::from(options.max_completion_tokens.min(1024));
        if projected > options.token_budget {
            out.stop = StopReason::TokenBudget;
            tracing::info!(
                used = out.tokens_used,
                budget = options.token_budget,
                "token budget reached"
            );
            break;
        }
        // Progress: [0, 1) is the evidence gathered before the loop, step k
        // runs from k to k + 1, and max_steps + 1 is done.
        ctx.progress(
            f64::from(step),
            Some(f64::from(max_steps + 1)),
            format!(
                "step {step}/{max_steps}: asking the model ({} evidence item(s) so far)",
                ledger.len()
            ),
        );
        let mut req = ChatRequest {
            messages: messages.clone(),
            tools: if tools_supported {
                offered.clone()
            } else {
                Vec::new()
            },
            no_tools: last,
            max_completion_tokens: Some(options.max_completion_tokens),
            temperature: None,
        };
        out.steps = step;
        let mut attempt = ask_model(client, &req);
        if let Err(LlmError::Http {
            status: 400,
            detail,
            ..
        }) = &attempt
            && tools_supported
            && detail.to_lowercase().contains("tool")
        {
            // Some models (and servers started without a tool parser) refuse
            // tool definitions: answer from the evidence gathered so far.
            tracing::info!(%detail, "the model refuses tools; asking without them");
            tools_supported = false;
            out.tools_refused = true;
            req.tools.clear();
            attempt = ask_model(client, &req);
        }
        let reply = match attempt {
            Ok(r) => r,
            Err(LlmError::Cancelled) => {
                out.retries = client.retries();
                return Err(if ctx.is_cancelled() {
                    ctx.stop_error()
                } else {
                    OpError::cancelled()
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, step, "LLM request failed");
                out.failure = Some(e);
                out.stop = StopReason::LlmFailed;
                break;
            }
        };
        out.tokens_used += reply.usage.total();
        out.tokens_estimated |= !reply.usage.reported;
        // The next request is at least as large as this one plus the tool
        // results; if two more would not fit, the next one must answer.
        if out.tokens_used + 2 * reply.usage.total() > options.token_budget {
            force_last = true;
        }
        if out.model.is_none() {
            out.model = reply.model.clone().or(client.model().map(str::to_string));
        }
        if reply.tool_calls.is_empty() || last {
            match reply.content.clone() {
                Some(text) => {
                    out.answer = Some(text);
                    out.stop = StopReason::Answered;
                    break;
                }
                None if last => {
                    out.stop = StopReason::StepBudget;
                    break;
                }
                None => {
                    // Neither text nor tool calls: ask for the answer.
                    messages.push(user_message(
                        "Your reply was empty. Call a tool or write the final answer.".into(),
                    ));
                    continue;
                }
            }
        }
        messages.push(assistant_calls(&reply));
        let n_calls = reply.tool_calls.len();
        for (i, call) in reply.tool_calls.iter().enumerate() {
            ctx.check_cancelled()?;
            out.tool_calls += 1;
            ctx.progress(
                f64::from(step) + (i as f64 + 0.5) / n_calls as f64,
                Some(f64::from(max_steps + 1)),
                format!("step {step}/{max_steps}: running {}", call.name),
            );
            let (text, ran) = run_call(
                ctx,
                ledger,
                &call.name,
                &call.arguments,
                options.max_tool_result_chars,
            )?;
            if !ran {
                out.rejected_calls += 1;
            }
            messages.push(tool_message(&call.id, text));
        }
    }
    out.retries = client.retries();
    if let Some(answer) = &out.answer {
        out.unknown_citations = cited_ids(answer)
            .into_iter()
            .filter(|id| ledger.get(id).is_none())
            .collect();
    }
    ctx.progress(
        f64::from(max_steps + 1),
        Some(f64::from(max_steps + 1)),
        format!(
            "model finished after {} step(s) in {:.1} s",
            out.steps,
            started.elapsed().as_secs_f64()
        ),
    );
    Ok(out)
}
