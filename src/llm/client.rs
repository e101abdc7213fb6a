//! An OpenAI-compatible chat-completions client (OpenAI, vLLM, Ollama, LM
//! Studio, llama.cpp server, ...) built on async-openai.
//!
//! What it adds to async-openai:
//! - its own retry service in place of the built-in one: 429 and 5xx answers
//!   and refused connections are retried with exponential backoff, a
//!   `Retry-After` header is honoured (seconds or an HTTP date) but capped,
//!   waits end early on cancellation or at the caller's deadline, and every
//!   retry is counted and announced;
//! - lenient response types (async-openai's `byot` calls), because servers
//!   other than OpenAI omit `id`, `created` or `object`, invent finish reasons,
//!   or send tool-call arguments as an object instead of a string;
//! - blocking calls on a private runtime, so operations (which run on
//!   blocking threads) and tests can use it without an async context;
//! - errors and logs that never contain the API key: every body that comes
//!   back from the endpoint is scrubbed of it in the retry service, before
//!   async-openai parses (or logs) it, and every error text passes through
//!   [`Redactor`] again before it is returned.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionStreamOptions, ChatCompletionToolChoiceOption,
    ChatCompletionTools, CreateChatCompletionRequest, ToolChoiceOptions,
};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// OpenAI's endpoint, used when only an API key is configured.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used against OpenAI's endpoint when none is configured: cheap,
/// fast, and good at tool calling.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o-mini";

/// Timeouts and retry limits of one client.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Longest one HTTP attempt may take, body included.
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// Retries after the first attempt (429, 5xx, refused connection).
    pub max_retries: u32,
    /// The longest single wait between attempts; a `Retry-After` beyond it
    /// ends the retries instead of stalling the caller.
    pub max_retry_wait: Duration,
    /// First backoff step when the server gives no `Retry-After` (doubles each retry).
    pub base_backoff: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            request_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            max_retries: 3,
            max_retry_wait: Duration::from_secs(30),
            base_backoff: Duration::from_millis(500),
        }
    }
}

/// What can go wrong talking to the endpoint. Every text here is redacted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error(
        "no LLM endpoint is configured (set AISP_LLM_BASE_URL and AISP_LLM_MODEL, or AISP_LLM_API_KEY / OPENAI_API_KEY)"
    )]
    NotConfigured,
    #[error("the LLM configuration is invalid: {0}")]
    BadConfig(String),
    #[error("the LLM endpoint {base_url} could not be reached: {detail}")]
    Unreachable { base_url: String, detail: String },
    #[error("the LLM endpoint did not answer within {seconds:.1} s")]
    Timeout { seconds: f64 },
    #[error("the LLM endpoint is rate-limiting requests (HTTP 429{}){}", retries_text(*.retries), retry_after_text(*.retry_after_s))]
    RateLimited {
        retries: u32,
        retry_after_s: Option<f64>,
    },
    #[error("the LLM endpoint answered HTTP {status}{}: {detail}", retries_text(*.retries))]
    Http {
        status: u16,
        retries: u32,
        detail: String,
    },
    #[error("the LLM endpoint's answer is not a valid chat completion: {detail}")]
    Malformed { detail: String },
    #[error("the call was cancelled while waiting for the LLM endpoint")]
    Cancelled,
    #[error("the call's time limit ran out while waiting for the LLM endpoint")]
    DeadlineReached,
}

fn retries_text(n: u32) -> String {
    match n {
        0 => String::new(),
        1 => " after 1 retry".into(),
        n => format!(" after {n} retries"),
    }
}

fn retry_after_text(s: Option<f64>) -> String {
    match s {
        Some(s) => format!(" (it asked to wait {s:.0} s, longer than aisp waits)"),
        None => String::new(),
    }
}

impl LlmError {
    /// Errors worth one more try at the loop level (a garbled answer may be
    /// transient; HTTP-level retries already happened inside the client).
    pub fn is_transient(&self) -> bool {
        matches!(self, LlmError::Malformed { .. })
    }

    /// The caller stopped us; no fallback answer is wanted.
    pub fn is_stop(&self) -> bool {
        matches!(self, LlmError::Cancelled | LlmError::DeadlineReached)
    }
}

/// Removes a secret from any text before it leaves the client.
#[derive(Clone, Default)]
pub struct Redactor {
    secret: Option<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redactor(<redacted>)")
    }
}

impl Redactor {
    pub fn new(secret: Option<&str>) -> Redactor {
        Redactor {
            // Very short "keys" (e.g. a placeholder like "x") would shred
            // ordinary text; they are not secrets worth hiding either.
            secret: secret
                .map(str::trim)
                .filter(|s| s.len() >= 4)
                .map(str::to_string),
        }
    }

    pub fn clean(&self, text: &str) -> String {
        match &self.secret {
            Some(s) if text.contains(s.as_str()) => text.replace(s.as_str(), "<redacted>"),
            _ => text.to_string(),
        }
    }

    /// Redact and shorten to `max` characters (endpoint bodies can be pages of HTML).
    pub fn clean_short(&self, text: &str, max: usize) -> String {
        let cleaned = self.clean(text.trim());
        truncate_chars(&cleaned, max)
    }
}

pub fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

/// A chat request in the terms the agent needs.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    pub messages: Vec<ChatCompletionRequestMessage>,
    pub tools: Vec<ChatCompletionTools>,
    /// Forbid tool calls (the final, forced answer).
    pub no_tools: bool,
    pub max_completion_tokens: Option<u32>,
    pub temperature: Option<f32>,
}

/// One tool call the model asked for. `arguments` is the raw text the model
/// wrote (parsing it is the agent's job, so that bad JSON can be fed back).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Token counts as the endpoint reports them (or as estimated when it does not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// False when the endpoint sent no usage and the counts are estimates.
    pub reported: bool,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// The model's reply.
#[derive(Debug, Clone, Default)]
pub struct ChatReply {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCallRequest>,
    pub finish_reason: Option<String>,
    pub usage: Usage,
    /// The model the endpoint says answered.
    pub model: Option<String>,
}

/// Lenient view of a chat completion: every field optional.
#[derive(Debug, Deserialize)]
struct RawResponse {
    #[serde(default)]
    choices: Option<Vec<RawChoice>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct RawChoice {
    #[serde(default)]
    message: Option<RawMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<RawToolCall>>,
}

#[derive(Debug, Deserialize)]
struct RawToolCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<RawFunction>,
}

#[derive(Debug, Deserialize)]
struct RawFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// One server-sent event of a streamed chat completion.
#[derive(Debug, Deserialize)]
struct RawChunk {
    #[serde(default)]
    choices: Option<Vec<RawChunkChoice>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct RawChunkChoice {
    #[serde(default)]
    delta: Option<RawDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<RawToolDelta>>,
}

#[derive(Debug, Deserialize)]
struct RawToolDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<RawFunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct RawFunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// Join the deltas of a streamed answer into the shape of a whole one: content
/// pieces concatenated, tool calls gathered by `index` (their name and id come
/// once, their arguments in pieces), the last finish reason and usage kept.
fn assemble_stream(chunks: Vec<RawChunk>) -> Result<RawResponse, LlmError> {
    let mut content = String::new();
    let mut calls: Vec<(Option<String>, String, String)> = Vec::new();
    let mut finish_reason = None;
    let mut usage = None;
    let mut model = None;
    let mut saw_choice = false;
    for chunk in chunks {
        if let Some(err) = chunk.error {
            return Ok(RawResponse {
                choices: None,
                usage: None,
                model: chunk.model,
                error: Some(err),
            });
        }
        model = chunk.model.or(model);
        usage = chunk.usage.or(usage);
        for choice in chunk.choices.unwrap_or_default() {
            saw_choice = true;
            finish_reason = choice.finish_reason.or(finish_reason);
            let Some(delta) = choice.delta else { continue };
            if let Some(piece) = delta.content {
                content.push_str(&piece);
            }
            for (k, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                let i = call.index.unwrap_or(k);
                if i > 1024 {
                    return Err(LlmError::Malformed {
                        detail: format!("a streamed tool call has index {i}"),
                    });
                }
                if calls.len() <= i {
                    calls.resize_with(i + 1, || (None, String::new(), String::new()));
                }
                let slot = &mut calls[i];
                if let Some(id) = call.id.filter(|s| !s.is_empty()) {
                    slot.0 = Some(id);
                }
                if let Some(f) = call.function {
                    if let Some(name) = f.name {
                        slot.1.push_str(&name);
                    }
                    if let Some(args) = f.arguments {
                        slot.2.push_str(&args);
                    }
                }
            }
        }
    }
    if !saw_choice {
        return Err(LlmError::Malformed {
            detail: "the streamed answer has no choices".into(),
        });
    }
    let tool_calls: Vec<RawToolCall> = calls
        .into_iter()
        .map(|(id, name, arguments)| RawToolCall {
            id,
            function: Some(RawFunction {
                name: Some(name),
                arguments: Some(Value::String(arguments)),
            }),
        })
        .collect();
    Ok(RawResponse {
        choices: Some(vec![RawChoice {
            message: Some(RawMessage {
                content: (!content.is_empty()).then_some(Value::String(content)),
                tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
            }),
            finish_reason,
        }]),
        usage,
        model,
        error: None,
    })
}

#[derive(Debug, Deserialize)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct RawModels {
    #[serde(default)]
    data: Vec<RawModel>,
}

#[derive(Debug, Deserialize)]
struct RawModel {
    id: String,
}

/// Text content may be a string or an array of `{type: text, text}` parts.
fn content_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let text: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!text.is_empty()).then(|| text.join(""))
        }
        _ => None,
    }
}

/// Rough token count for endpoints that report no usage (4 characters a token).
pub fn estimate_tokens(text_len: usize) -> u64 {
    (text_len as u64).div_ceil(4)
}

/// Counters shared between the client and its retry service.
#[derive(Default)]
struct RetryState {
    /// Retries performed over the client's lifetime.
    retries: AtomicU32,
    /// Retries of the request in flight.
    retries_this_request: AtomicU32,
    /// The last status seen and the Retry-After that came with it (for errors).
    last: Mutex<Option<(u16, Option<Duration>)>>,
    /// A Retry-After that was longer than we are willing to wait.
    refused_wait: Mutex<Option<Duration>>,
}

type Notify = Arc<dyn Fn(String) + Send + Sync>;

/// The retry service installed into async-openai in place of its own.
#[derive(Clone)]
struct RetryService {
    http: reqwest::Client,
    options: ClientOptions,
    state: Arc<RetryState>,
    cancel: CancellationToken,
    deadline: Option<Instant>,
    notify: Option<Notify>,
    redactor: Redactor,
}

type HttpFuture = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send>>;

impl tower::Service<HttpRequestFactory> for RetryService {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = HttpFuture;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: HttpRequestFactory) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.run(request).await })
    }
}

/// `Retry-After` as seconds or an HTTP date.
fn parse_retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let text = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = text.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(text).ok()?;
    let delta = when.signed_duration_since(chrono::Utc::now());
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

impl RetryService {
    /// Build and send one attempt, with the key marked sensitive so that no
    /// HTTP-level debug output prints it.
    async fn send(&self, request: &HttpRequestFactory) -> Result<reqwest::Response, OpenAIError> {
        let mut req = request.build().await?;
        if let Some(auth) = req.headers_mut().get_mut(reqwest::header::AUTHORIZATION) {
            auth.set_sensitive(true);
        }
        self.http.execute(req).await.map_err(OpenAIError::Reqwest)
    }

    async fn run(&self, request: HttpRequestFactory) -> Result<reqwest::Response, OpenAIError> {
        self.state.retries_this_request.store(0, Ordering::SeqCst);
        *self
            .state
            .refused_wait
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        let mut attempt: u32 = 0;
        loop {
            let outcome = self.send(&request).await;
            let (retryable, retry_after, outcome) = match outcome {
                Ok(resp) if resp.status().is_success() => {
                    return scrub(resp, &self.redactor).await.map(|(r, _)| r);
                }
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let retry_after = parse_retry_after(resp.headers());
                    *self.state.last.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some((status, retry_after));
                    let server_error = resp.status().is_server_error();
                    let (resp, quota) = scrub(resp, &self.redactor).await?;
                    // A 429 for an exhausted quota never clears by waiting.
                    (
                        (status == 429 && !quota) || server_error,
                        retry_after,
                        Ok(resp),
                    )
                }
                Err(OpenAIError::Reqwest(e)) if e.is_connect() => {
                    (true, None, Err(OpenAIError::Reqwest(e)))
                }
                Err(e) => return Err(e),
            };
            if !retryable || attempt >= self.options.max_retries {
                return outcome;
            }
            let backoff = self
                .options
                .base_backoff
                .saturating_mul(2u32.saturating_pow(attempt));
            let wait = retry_after.unwrap_or(backoff);
            if wait > self.options.max_retry_wait {
                *self
                    .state
                    .refused_wait
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(wait);
                return outcome;
            }
            if let Some(deadline) = self.deadline
                && Instant::now() + wait >= deadline
            {
                return outcome;
            }
            attempt += 1;
            self.state.retries.fetch_add(1, Ordering::SeqCst);
            self.state
                .retries_this_request
                .fetch_add(1, Ordering::SeqCst);
            let status = match &outcome {
                Ok(r) => format!("HTTP {}", r.status().as_u16()),
                Err(_) => "connection refused".to_string(),
            };
            tracing::info!(%status, wait_ms = wait.as_millis() as u64, attempt, "LLM request will be retried");
            if let Some(notify) = &self.notify {
                notify(format!(
                    "LLM endpoint answered {status}; retry {attempt}/{} in {:.1} s",
                    self.options.max_retries,
                    wait.as_secs_f64()
                ));
            }
            drop(outcome);
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => {
                    return Err(OpenAIError::InvalidArgument("cancelled".into()));
                }
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// Read a response's body, remove the secret from it, and hand back an
/// equivalent response. async-openai logs bodies it cannot parse and the
/// bodies of 5xx answers; an endpoint that echoes the key would otherwise put
/// it in the log. Also says whether a 429 is an exhausted quota.
async fn scrub(
    resp: reqwest::Response,
    redactor: &Redactor,
) -> Result<(reqwest::Response, bool), OpenAIError> {
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.bytes().await.map_err(OpenAIError::Reqwest)?;
    let text = String::from_utf8_lossy(&bytes);
    let quota = status.as_u16() == 429 && text.contains("insufficient_quota");
    let body: Vec<u8> = match &redactor.secret {
        Some(secret) if text.contains(secret.as_str()) => {
            text.replace(secret.as_str(), "<redacted>").into_bytes()
        }
        _ => bytes.to_vec(),
    };
    let mut builder = http::Response::builder().status(status);
    for (k, v) in headers.iter() {
        if k != reqwest::header::CONTENT_LENGTH {
            builder = builder.header(k, v);
        }
    }
    let rebuilt = builder
        .body(body)
        .map_err(|e| OpenAIError::InvalidArgument(format!("rebuilding a response: {e}")))?;
    Ok((reqwest::Response::from(rebuilt), quota))
}

/// A chat-completions client bound to one configuration, one caller's
/// cancellation and deadline.
pub struct LlmClient {
    runtime: tokio::runtime::Runtime,
    client: async_openai::Client<OpenAIConfig>,
    base_url: String,
    model: Option<String>,
    redactor: Redactor,
    state: Arc<RetryState>,
    cancel: CancellationToken,
    deadline: Option<Instant>,
    options: ClientOptions,
    /// Ask for server-sent events and assemble the answer from its deltas.
    stream: bool,
}

impl std::fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// The endpoint the client talks to: its own settings, filled from the
/// application's `[llm]` configuration (`crate::config::LlmConfig`, converted
/// in `crate::llm`).
#[derive(Clone, Default)]
pub struct ClientSettings {
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<String>,
    /// Ask for streamed answers (`stream: true`, server-sent events).
    pub stream: bool,
}

impl std::fmt::Debug for ClientSettings {
    // The key must never reach logs, even at trace level.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("stream", &self.stream)
            .finish()
    }
}

impl ClientSettings {
    /// An endpoint is configured when a base URL or an API key is known.
    pub fn configured(&self) -> bool {
        self.base_url.is_some() || self.api_key.is_some()
    }
}

/// Where to talk to, from the configuration: the base URL (OpenAI's when only
/// a key is set) and the model, if one is named.
pub fn endpoint(cfg: &ClientSettings) -> Option<(String, Option<String>)> {
    if !cfg.configured() {
        return None;
    }
    let base = cfg
        .base_url
        .clone()
        .map(|b| b.trim().trim_end_matches('/').to_string())
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| OPENAI_BASE_URL.to_string());
    let model = cfg
        .model
        .clone()
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .or_else(|| (base == OPENAI_BASE_URL).then(|| DEFAULT_OPENAI_MODEL.to_string()));
    Some((base, model))
}

impl LlmClient {
    /// A client for the configured endpoint. `notify` hears about retries.
    pub fn new(
        cfg: &ClientSettings,
        options: ClientOptions,
        cancel: CancellationToken,
        deadline: Option<Instant>,
        notify: Option<Notify>,
    ) -> Result<LlmClient, LlmError> {
        let (base_url, model) = endpoint(cfg).ok_or(LlmError::NotConfigured)?;
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(LlmError::BadConfig(format!(
                "base URL `{base_url}` must start with http:// or https:// (e.g. http://localhost:11434/v1)"
            )));
        }
        let redactor = Redactor::new(cfg.api_key.as_deref());
        let http = reqwest::Client::builder()
            .timeout(options.request_timeout)
            .connect_timeout(options.connect_timeout)
            .user_agent(concat!("aisp/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::BadConfig(redactor.clean_short(&e.to_string(), 300)))?;
        // Explicit values so that OPENAI_* variables in the environment do not
        // silently change what the configuration says.
        let config = OpenAIConfig::new()
            .with_api_base(base_url.clone())
            .with_api_key(cfg.api_key.clone().unwrap_or_default())
            .with_org_id("")
            .with_project_id("");
        let state = Arc::new(RetryState::default());
        let service = RetryService {
            http: http.clone(),
            options: options.clone(),
            state: Arc::clone(&state),
            cancel: cancel.clone(),
            deadline,
            notify,
            redactor: redactor.clone(),
        };
        let client = async_openai::Client::build(http, config).with_http_service(service);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| LlmError::BadConfig(format!("cannot start an I/O runtime: {e}")))?;
        Ok(LlmClient {
            runtime,
            client,
            base_url,
            model,
            redactor,
            state,
            cancel,
            deadline,
            options,
            stream: cfg.stream,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The model in use, once known (configured, defaulted or discovered).
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Retries performed so far.
    pub fn retries(&self) -> u32 {
        self.state.retries.load(Ordering::SeqCst)
    }

    /// Run a future on the private runtime, stopping at cancellation or the deadline.
    fn block_on<T>(
        &self,
        fut: impl Future<Output = Result<T, OpenAIError>>,
    ) -> Result<T, LlmError> {
        let cancel = self.cancel.clone();
        let deadline = self.deadline;
        let started = Instant::now();
        let outcome = self.runtime.block_on(async move {
            let until_deadline = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(LlmError::Cancelled),
                _ = until_deadline => Err(LlmError::DeadlineReached),
                r = fut => Ok(r),
            }
        })?;
        outcome.map_err(|e| self.map_error(e, started.elapsed()))
    }

    fn map_error(&self, e: OpenAIError, elapsed: Duration) -> LlmError {
        if self.cancel.is_cancelled() {
            return LlmError::Cancelled;
        }
        let retries = self.state.retries_this_request.load(Ordering::SeqCst);
        let last = *self.state.last.lock().unwrap_or_else(|p| p.into_inner());
        let refused = *self
            .state
            .refused_wait
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let r = &self.redactor;
        match e {
            OpenAIError::Reqwest(e) if e.is_timeout() => LlmError::Timeout {
                seconds: elapsed.as_secs_f64(),
            },
            OpenAIError::Reqwest(e) if e.is_connect() => LlmError::Unreachable {
                base_url: self.base_url.clone(),
                detail: r.clean_short(&error_chain(&e), 300),
            },
            OpenAIError::Reqwest(e) => LlmError::Unreachable {
                base_url: self.base_url.clone(),
                detail: r.clean_short(&error_chain(&e), 300),
            },
            OpenAIError::ApiError(api) if api.status_code.as_u16() == 429 => {
                let quota = api.api_error.r#type.as_deref() == Some("insufficient_quota");
                if quota {
                    LlmError::Http {
                        status: 429,
                        retries,
                        detail: r.clean_short(&api.api_error.to_string(), 300),
                    }
                } else {
                    LlmError::RateLimited {
                        retries,
                        retry_after_s: refused.map(|d| d.as_secs_f64()),
                    }
                }
            }
            OpenAIError::ApiError(api) => LlmError::Http {
                status: api.status_code.as_u16(),
                retries,
                detail: r.clean_short(&api.api_error.to_string(), 300),
            },
            OpenAIError::JSONDeserialize(err, body) => match last {
                // An error status whose body is not OpenAI's error JSON.
                Some((429, _)) => LlmError::RateLimited {
                    retries,
                    retry_after_s: refused.map(|d| d.as_secs_f64()),
                },
                Some((status, _)) if status >= 400 => LlmError::Http {
                    status,
                    retries,
                    detail: r.clean_short(&body, 300),
                },
                _ => LlmError::Malformed {
                    detail: r.clean_short(&format!("{err}; body starts: {body}"), 300),
                },
            },
            OpenAIError::InvalidArgument(m) if m == "cancelled" => LlmError::Cancelled,
            other => LlmError::Malformed {
                detail: r.clean_short(&other.to_string(), 300),
            },
        }
    }

    /// Find the model to use when none is configured: the first one the
    /// endpoint lists (a vLLM or llama.cpp server serves exactly one).
    pub fn resolve_model(&mut self) -> Result<String, LlmError> {
        if let Some(m) = &self.model {
            return Ok(m.clone());
        }
        *self.state.last.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let client = self.client.clone();
        let models: RawModels =
            self.block_on(async move { client.models().list_byot::<RawModels>().await })?;
        let first = models
            .data
            .into_iter()
            .next()
            .map(|m| m.id)
            .ok_or_else(|| {
                LlmError::BadConfig(
                    "no model is configured and the endpoint lists none; set AISP_LLM_MODEL".into(),
                )
            })?;
        self.model = Some(first.clone());
        Ok(first)
    }

    /// One chat completion (blocking).
    pub fn chat(&mut self, req: &ChatRequest) -> Result<ChatReply, LlmError> {
        let model = self.resolve_model()?;
        let mut request = CreateChatCompletionRequest {
            model,
            messages: req.messages.clone(),
            max_completion_tokens: req.max_completion_tokens,
            temperature: req.temperature,
            ..Default::default()
        };
        if !req.tools.is_empty() {
            request.tools = Some(req.tools.clone());
            request.tool_choice = Some(ChatCompletionToolChoiceOption::Mode(if req.no_tools {
                ToolChoiceOptions::None
            } else {
                ToolChoiceOptions::Auto
            }));
        }
        let request_chars = serde_json::to_string(&request)
            .map(|s| s.len())
            .unwrap_or(0);
        *self.state.last.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let client = self.client.clone();
        let started = Instant::now();
        let raw: RawResponse = if self.stream {
            request.stream = Some(true);
            request.stream_options = Some(ChatCompletionStreamOptions {
                include_usage: Some(true),
                include_obfuscation: None,
            });
            let chunks = self.block_on(async move {
                let mut stream = client
                    .chat()
                    .create_stream_byot::<CreateChatCompletionRequest, RawChunk>(request)
                    .await?;
                let mut chunks = Vec::new();
                while let Some(chunk) = stream.next().await {
                    chunks.push(chunk?);
                }
                Ok(chunks)
            })?;
            assemble_stream(chunks)?
        } else {
            self.block_on(async move {
                client
                    .chat()
                    .create_byot::<CreateChatCompletionRequest, RawResponse>(request)
                    .await
            })?
        };
        tracing::debug!(
            ms = started.elapsed().as_millis() as u64,
            base_url = %self.base_url,
            "LLM request answered"
        );
        self.reply_from(raw, request_chars)
    }

    fn reply_from(&self, raw: RawResponse, request_chars: usize) -> Result<ChatReply, LlmError> {
        if let Some(err) = raw.error {
            let detail = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            return Err(LlmError::Http {
                status: 200,
                retries: 0,
                detail: self.redactor.clean_short(&detail, 300),
            });
        }
        let choice = raw
            .choices
            .and_then(|c| c.into_iter().next())
            .ok_or_else(|| LlmError::Malformed {
                detail: "the answer has no choices".into(),
            })?;
        let message = choice.message.ok_or_else(|| LlmError::Malformed {
            detail: "the first choice has no message".into(),
        })?;
        let content = message
            .content
            .as_ref()
            .and_then(content_text)
            .filter(|c| !c.trim().is_empty());
        let mut tool_calls = Vec::new();
        for (i, call) in message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let function = call.function.unwrap_or(RawFunction {
                name: None,
                arguments: None,
            });
            let arguments = match function.arguments {
                Some(Value::String(s)) => s,
                Some(Value::Null) | None => "{}".to_string(),
                Some(other) => other.to_string(),
            };
            tool_calls.push(ToolCallRequest {
                id: call
                    .id
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| format!("call_{i}")),
                name: function.name.unwrap_or_default(),
                arguments,
            });
        }
        let answer_chars = content.as_ref().map(|c| c.len()).unwrap_or(0)
            + tool_calls
                .iter()
                .map(|c| c.name.len() + c.arguments.len())
                .sum::<usize>();
        let usage = match raw.usage {
            Some(u) if u.prompt_tokens.is_some() || u.total_tokens.is_some() => {
                let prompt = u.prompt_tokens.unwrap_or(0);
                let completion = u
                    .completion_tokens
                    .or_else(|| u.total_tokens.map(|t| t.saturating_sub(prompt)))
                    .unwrap_or(0);
                Usage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    reported: true,
                }
            }
            _ => Usage {
                prompt_tokens: estimate_tokens(request_chars),
                completion_tokens: estimate_tokens(answer_chars),
                reported: false,
            },
        };
        Ok(ChatReply {
            content,
            tool_calls,
            finish_reason: choice.finish_reason,
            usage,
            model: raw.model,
        })
    }

    /// The client's options (tests and status reports).
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redactor_hides_the_key_and_ignores_trivial_ones() {
        let r = Redactor::new(Some("sk-abcdef123456"));
        assert_eq!(
            r.clean("Bearer sk-abcdef123456 rejected"),
            "Bearer <redacted> rejected"
        );
        let r = Redactor::new(Some("x"));
        assert_eq!(r.clean("x marks"), "x marks");
        assert_eq!(truncate_chars("ééééé", 3), "ééé…");
    }

    #[test]
    fn endpoints_default_sensibly() {
        let none = ClientSettings::default();
        assert!(endpoint(&none).is_none());
        let key_only = ClientSettings {
            api_key: Some("sk-1234".into()),
            ..ClientSettings::default()
        };
        assert_eq!(
            endpoint(&key_only),
            Some((OPENAI_BASE_URL.into(), Some(DEFAULT_OPENAI_MODEL.into())))
        );
        let local = ClientSettings {
            base_url: Some("http://localhost:11434/v1/".into()),
            ..ClientSettings::default()
        };
        assert_eq!(
            endpoint(&local),
            Some(("http://localhost:11434/v1".into(), None))
        );
    }

    #[test]
    fn retry_after_takes_seconds_and_dates() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(2)));
        let later = chrono::Utc::now() + chrono::Duration::seconds(30);
        h.insert(
            reqwest::header::RETRY_AFTER,
            later.to_rfc2822().parse().unwrap(),
        );
        let d = parse_retry_after(&h).unwrap();
        assert!(
            d > Duration::from_secs(25) && d <= Duration::from_secs(30),
            "{d:?}"
        );
        h.insert(reqwest::header::RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(parse_retry_after(&h), None);
    }

    #[test]
    fn lenient_replies_accept_what_local_servers_send() {
        let client = LlmClient::new(
            &ClientSettings {
                base_url: Some("http://127.0.0.1:9".into()),
                model: Some("m".into()),
                api_key: None,
                stream: false,
            },
            ClientOptions::default(),
            CancellationToken::new(),
            None,
            None,
        )
        .unwrap();
        // No id/created/object, arguments as an object, content as parts, no usage.
        let raw: RawResponse = serde_json::from_value(serde_json::json!({
            "choices": [{"message": {"content": [{"type": "text", "text": "hi"}],
                "tool_calls": [{"function": {"name": "aisp_status", "arguments": {"a": 1}}}]},
                "finish_reason": "eos"}]
        }))
        .unwrap();
        let reply = client.reply_from(raw, 400).unwrap();
        assert_eq!(reply.content.as_deref(), Some("hi"));
        assert_eq!(reply.tool_calls[0].name, "aisp_status");
        assert_eq!(reply.tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(reply.tool_calls[0].id, "call_0");
        assert_eq!(reply.finish_reason.as_deref(), Some("eos"));
        assert!(!reply.usage.reported);
        assert_eq!(reply.usage.prompt_tokens, 100);
        let raw: RawResponse = serde_json::from_value(serde_json::json!({"choices": []})).unwrap();
        assert!(matches!(
            client.reply_from(raw, 0),
            Err(LlmError::Malformed { .. })
        ));
    }
}
