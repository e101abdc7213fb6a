//! The agent loop of `aisp_ask` against a local OpenAI-compatible server
//! started by each test, with scripted answers: tool calls, unknown tools,
//! arguments that are not JSON, rate limits with Retry-After, server errors,
//! garbled JSON, a hung endpoint, budgets, cancellation, conversations — and a
//! check that the API key never reaches logs, results or errors.

use std::collections::VecDeque;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use aisp::app::AppState;
use aisp::config::{Config, LlmConfig};
use aisp::context::{OpContext, Progress, ProgressSink};
use aisp::llm::agent::AgentOptions;
use aisp::llm::client::ClientOptions;
use aisp::llm::{AskAnswer, AskOptions, AskRequest};
use aisp::{ErrorKind, OpError};
use aisp_hw::gpu::GpuAvailability;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-aisp-test-0123456789abcdefSECRET";

// ---------------------------------------------------------------------------------------------
// Log capture: every log line of this test binary, at trace level, all targets.

#[derive(Clone)]
struct LogSink(Arc<Mutex<Vec<u8>>>);

impl Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = LogSink(Arc::clone(&buf));
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .try_init();
        buf
    })
}

// ---------------------------------------------------------------------------------------------
// The scripted endpoint.

#[derive(Clone)]
enum Step {
    Json(Value),
    /// A streamed answer: each value one `data:` event, then `data: [DONE]`.
    Sse(Vec<Value>),
    Status(u16, Vec<(&'static str, String)>, String),
    Raw(String),
    Delay(Duration, Box<Step>),
}

#[derive(Clone, Debug)]
struct Seen {
    auth: Option<String>,
    body: Value,
}

#[derive(Default)]
struct MockState {
    script: Mutex<VecDeque<Step>>,
    seen: Mutex<Vec<Seen>>,
}

#[derive(Clone)]
struct Mock {
    state: Arc<MockState>,
    addr: SocketAddr,
}

impl Mock {
    async fn start(script: Vec<Step>) -> Mock {
        let state = Arc::new(MockState {
            script: Mutex::new(script.into()),
            seen: Mutex::default(),
        });
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(chat))
            .route("/v1/models", axum::routing::get(models))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Mock { state, addr }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }
}

async fn models() -> impl IntoResponse {
    axum::Json(json!({"object": "list", "data": [{"id": "discovered-model", "object": "model"}]}))
}

async fn chat(State(state): State<Arc<MockState>>, headers: HeaderMap, body: String) -> Response {
    state.seen.lock().unwrap().push(Seen {
        auth: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        body: serde_json::from_str(&body).unwrap_or(Value::Null),
    });
    let mut step = state
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| Step::Json(answer("(script exhausted)")));
    loop {
        match step {
            Step::Delay(d, inner) => {
                tokio::time::sleep(d).await;
                step = *inner;
            }
            Step::Json(v) => return axum::Json(v).into_response(),
            Step::Sse(events) => {
                let mut body = String::new();
                for e in events {
                    body.push_str(&format!("data: {e}\n\n"));
                }
                body.push_str("data: [DONE]\n\n");
                return (
                    StatusCode::OK,
                    [("content-type", "text/event-stream")],
                    body,
                )
                    .into_response();
            }
            Step::Raw(text) => {
                return (StatusCode::OK, [("content-type", "application/json")], text)
                    .into_response();
            }
            Step::Status(code, headers, body) => {
                let mut resp = (StatusCode::from_u16(code).unwrap(), body).into_response();
                for (k, v) in headers {
                    resp.headers_mut().insert(k, v.parse().unwrap());
                }
                return resp;
            }
        }
    }
}

fn completion(message: Value, finish: &str, tokens: (u64, u64)) -> Value {
    json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1, "model": "mock-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": tokens.0, "completion_tokens": tokens.1, "total_tokens": tokens.0 + tokens.1}
    })
}

fn answer(text: &str) -> Value {
    completion(
        json!({"role": "assistant", "content": text}),
        "stop",
        (900, 100),
    )
}

fn calls(list: &[(&str, &str)]) -> Value {
    let tool_calls: Vec<Value> = list
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": name, "arguments": args}})
        })
        .collect();
    completion(
        json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
        "tool_calls",
        (800, 50),
    )
}

// ---------------------------------------------------------------------------------------------
// Running aisp_ask.

fn app_for(mock: &Mock) -> Arc<AppState> {
    app_with(mock, false)
}

/// An app whose LLM endpoint is `mock`, asking for streamed answers or not.
fn app_with(mock: &Mock, stream: bool) -> Arc<AppState> {
    logs();
    let home = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "aisp-ai-test-{}-{}",
        std::process::id(),
        mock.addr.port()
    ));
    let mut config = Config::with_home(home);
    config.llm = LlmConfig {
        base_url: Some(mock.base_url()),
        model: Some("mock-model".into()),
        api_key: Some(KEY.into()),
        stream,
    };
    let app = AppState::new(config);
    app.set_gpu_for_tests(GpuAvailability::unavailable("no GPU in this test", false));
    app
}

fn quick_options() -> AskOptions {
    AskOptions {
        agent: AgentOptions {
            client: ClientOptions {
                request_timeout: Duration::from_secs(5),
                base_backoff: Duration::from_millis(50),
                ..ClientOptions::default()
            },
            ..AgentOptions::default()
        },
    }
}

struct Run {
    result: Result<AskAnswer, OpError>,
    progress: Vec<Progress>,
    elapsed: Duration,
}

async fn ask_with(
    app: &Arc<AppState>,
    req: AskRequest,
    options: AskOptions,
    cancel: CancellationToken,
) -> Run {
    let progress = Arc::new(Mutex::new(Vec::new()));
    let sink: ProgressSink = {
        let p = Arc::clone(&progress);
        Arc::new(move |x| p.lock().unwrap().push(x))
    };
    let ctx = OpContext::new(Arc::clone(app), "aisp_ask", cancel, None, Some(sink));
    let started = Instant::now();
    let result = tokio::task::spawn_blocking(move || aisp::llm::ask(&ctx, req, &options))
        .await
        .unwrap();
    let progress = progress.lock().unwrap().clone();
    Run {
        result,
        progress,
        elapsed: started.elapsed(),
    }
}

async fn ask(app: &Arc<AppState>, question: &str, options: AskOptions) -> Run {
    ask_with(
        app,
        AskRequest {
            question: question.into(),
            ..AskRequest::default()
        },
        options,
        CancellationToken::new(),
    )
    .await
}

fn tool_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

fn no_key_in(what: &str, text: &str) {
    assert!(!text.contains(KEY), "the API key leaked into {what}");
    assert!(
        !text.contains("SECRET"),
        "part of the API key leaked into {what}"
    );
}

// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_run_and_the_answer_cites_their_evidence() {
    let mock = Mock::start(vec![
        Step::Json(calls(&[
            ("aisp_status", "{}"),
            ("aisp_ai_troubleshoot", r#"{"symptom": "NCCL timeout"}"#),
        ])),
        Step::Json(answer(
            "## Answer\nOccupancy is resident warps over the maximum [E1].\n## Facts\n- No LLM key is involved [E2].\n\
             - NCCL timeouts have ranked causes [E3].\n- Made up [E9].\n## Hypotheses\n- none\n## Next steps\n- none",
        )),
    ])
    .await;
    let app = app_for(&mock);
    let run = ask(&app, "what is occupancy?", quick_options()).await;
    let out = run.result.expect("an answer");
    assert!(out.llm_used);
    assert_eq!(out.model.as_deref(), Some("mock-model"));
    assert_eq!(out.steps, 2, "two requests to the model");
    assert_eq!(
        out.tokens_used,
        850 + 1000,
        "usage as the endpoint reported it"
    );
    let ids: Vec<&str> = out.citations.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["E1", "E2", "E3"], "E9 cites nothing and is left out");
    assert_eq!(
        out.citations[0].tool, "aisp_explain",
        "E1 was gathered before the loop"
    );
    assert_eq!(
        out.citations[0].arguments,
        *json!({"concept": "occupancy"}).as_object().unwrap()
    );
    assert_eq!(out.citations[1].tool, "aisp_status");
    assert_eq!(out.citations[2].tool, "aisp_ai_troubleshoot");
    assert!(out.citations.iter().all(|c| c.ok && !c.quote.is_empty()));
    assert!(
        out.citations[2].quote.contains("matches"),
        "{}",
        out.citations[2].quote
    );
    assert!(
        out.notes
            .iter()
            .any(|n| n.contains("E9") && n.contains("unsupported")),
        "{:?}",
        out.notes
    );

    let seen = mock.seen();
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s.auth.as_deref(), Some(format!("Bearer {KEY}").as_str()));
        assert_eq!(s.body["model"], "mock-model");
    }
    // The first request: system prompt, the question with the primed evidence, the offered tools.
    let first = &seen[0].body;
    let user = first["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("Question: what is occupancy?"));
    assert!(
        user.contains("[E1] aisp_explain {\"concept\":\"occupancy\"}"),
        "{user}"
    );
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"aisp_explain") && offered.contains(&"aisp_suggest_tools"));
    assert!(!offered.contains(&"aisp_ask") && !offered.contains(&"aisp_system_monitor"));
    assert_eq!(first["tool_choice"], "auto");
    // The second request carries the tool results, labelled.
    let tools = tool_messages(&seen[1].body);
    assert_eq!(tools.len(), 2);
    assert!(
        tools[0].starts_with("[E2] aisp_status result:"),
        "{}",
        tools[0]
    );
    assert!(tools[1].starts_with("[E3] aisp_ai_troubleshoot result:"));
    // Progress per step.
    assert!(run.progress.iter().any(|p| {
        p.message
            .as_deref()
            .is_some_and(|m| m.starts_with("step 1/8: asking the model"))
    }));
    assert!(
        run.progress
            .iter()
            .any(|p| p.message.as_deref() == Some("step 1/8: running aisp_status"))
    );
    assert!(
        run.progress
            .windows(2)
            .all(|w| w[0].progress <= w[1].progress),
        "progress never goes back"
    );

    // A follow-up continues the conversation with the earlier turn.
    let mock2 = mock.clone();
    mock2
        .state
        .script
        .lock()
        .unwrap()
        .push_back(Step::Json(answer("## Answer\nStill occupancy [E1].")));
    let run = ask_with(
        &app,
        AskRequest {
            question: "and how do I raise it?".into(),
            conversation_id: Some(out.conversation_id.clone()),
            ..AskRequest::default()
        },
        quick_options(),
        CancellationToken::new(),
    )
    .await;
    let follow = run.result.unwrap();
    assert_eq!(follow.conversation_id, out.conversation_id);
    let last = mock.seen().pop().unwrap().body;
    let msgs = last["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["content"], "what is occupancy?");
    assert!(
        msgs[2]["content"]
            .as_str()
            .unwrap()
            .starts_with("## Answer\nOccupancy")
    );
    // An unknown conversation is an error, not a silent new one.
    let run = ask_with(
        &app,
        AskRequest {
            question: "x".into(),
            conversation_id: Some("conv_nope".into()),
            ..AskRequest::default()
        },
        quick_options(),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(run.result.unwrap_err().kind, ErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tools_bad_json_and_bad_arguments_are_fed_back_not_fatal() {
    let mock = Mock::start(vec![
        Step::Json(calls(&[
            ("aisp_no_such_tool", "{}"),
            ("aisp_explain", "{not json"),
            ("aisp_explain", r#"{"nope": 1}"#),
            ("aisp_system_monitor", r#"{"duration_s": 1}"#),
            ("aisp_explain", "[1, 2]"),
        ])),
        Step::Json(answer("## Answer\nDone [E1].")),
    ])
    .await;
    let app = app_for(&mock);
    let out = ask(&app, "compare the runs", quick_options())
        .await
        .result
        .unwrap();
    assert!(out.llm_used);
    let seen = mock.seen();
    assert_eq!(seen.len(), 2);
    let tools = tool_messages(&seen[1].body);
    assert_eq!(tools.len(), 5, "every call gets an answer");
    assert!(
        tools[0].contains("no tool named `aisp_no_such_tool`"),
        "{}",
        tools[0]
    );
    assert!(tools[0].contains("not_found"));
    assert!(tools[1].contains("are not valid JSON"), "{}", tools[1]);
    assert!(
        tools[2].contains("invalid arguments for aisp_explain"),
        "{}",
        tools[2]
    );
    assert!(tools[2].contains("unknown field"), "{}", tools[2]);
    assert!(
        tools[3].contains("cannot be called during an investigation"),
        "{}",
        tools[3]
    );
    assert!(tools[3].contains("long-running"));
    assert!(tools[4].contains("must be a JSON object"), "{}", tools[4]);
    // The schema error ran (and is evidence E1); the others never reached a tool.
    assert_eq!(out.citations[0].tool, "aisp_explain");
    assert!(!out.citations[0].ok);
    assert!(
        out.notes
            .iter()
            .any(|n| n.starts_with("4 of the model's 5 tool call(s) were rejected")),
        "{:?}",
        out.notes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_honour_retry_after_and_server_errors_are_retried() {
    let mock = Mock::start(vec![
        Step::Status(
            429,
            vec![
                ("retry-after", "1".into()),
                ("content-type", "application/json".into()),
            ],
            r#"{"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}"#.into(),
        ),
        Step::Status(500, vec![], "upstream exploded".into()),
        Step::Json(answer("## Answer\nRecovered.")),
    ])
    .await;
    let app = app_for(&mock);
    let run = ask(&app, "compare the runs", quick_options()).await;
    let out = run.result.unwrap();
    assert!(out.llm_used);
    assert_eq!(out.answer, "## Answer\nRecovered.");
    assert_eq!(mock.seen().len(), 3);
    assert!(
        run.elapsed >= Duration::from_secs(1),
        "waited for Retry-After: {:?}",
        run.elapsed
    );
    assert!(run.elapsed < Duration::from_secs(4), "{:?}", run.elapsed);
    assert!(
        out.notes.iter().any(|n| n.contains("needed 2 retries")),
        "{:?}",
        out.notes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_longer_than_aisp_waits_ends_the_retries() {
    let mock = Mock::start(vec![Step::Status(
        429,
        vec![("retry-after", "3600".into())],
        "slow down".into(),
    )])
    .await;
    let app = app_for(&mock);
    let run = ask(&app, "compare the runs", quick_options()).await;
    let out = run.result.unwrap();
    assert!(!out.llm_used);
    assert_eq!(mock.seen().len(), 1, "no retry when asked to wait an hour");
    assert!(run.elapsed < Duration::from_secs(3));
    assert!(
        out.answer.contains("rate-limiting") && out.answer.contains("3600 s"),
        "{}",
        out.answer
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_endpoint_falls_back_to_an_answer_without_the_llm() {
    let failing = (0..4)
        .map(|_| Step::Status(503, vec![], "overloaded".into()))
        .collect();
    let mock = Mock::start(failing).await;
    let app = app_for(&mock);
    let run = ask(&app, "what is occupancy?", quick_options()).await;
    let out = run.result.unwrap();
    assert!(!out.llm_used);
    assert_eq!(
        out.model.as_deref(),
        Some("mock-model"),
        "the model that was tried"
    );
    assert_eq!(mock.seen().len(), 4, "one attempt and three retries");
    assert!(
        out.answer
            .starts_with("> **No LLM was used.** The LLM endpoint at http://127.0.0.1:")
    );
    assert!(
        out.answer.contains("HTTP 503 after 3 retries: overloaded"),
        "{}",
        out.answer
    );
    assert!(out.answer.contains("## Facts"));
    assert_eq!(out.citations[0].tool, "aisp_explain");
    assert!(
        out.notes
            .iter()
            .any(|n| n.starts_with("Answered without the LLM"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbled_answers_are_retried_once_then_given_up() {
    let mock = Mock::start(vec![
        Step::Raw("this is not json".into()),
        Step::Json(answer("## Answer\nSecond try worked.")),
    ])
    .await;
    let app = app_for(&mock);
    let out = ask(&app, "compare the runs", quick_options())
        .await
        .result
        .unwrap();
    assert!(out.llm_used);
    assert_eq!(out.answer, "## Answer\nSecond try worked.");

    let mock = Mock::start(vec![
        Step::Raw("{\"choices\": 5".into()),
        Step::Raw("<html>gateway</html>".into()),
    ])
    .await;
    let app = app_for(&mock);
    let out = ask(&app, "compare the runs", quick_options())
        .await
        .result
        .unwrap();
    assert!(!out.llm_used);
    assert_eq!(mock.seen().len(), 2);
    assert!(
        out.answer.contains("is not a valid chat completion"),
        "{}",
        out.answer
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_endpoint_times_out_and_the_answer_comes_without_it() {
    let mock = Mock::start(vec![Step::Delay(
        Duration::from_secs(30),
        Box::new(Step::Json(answer("too late"))),
    )])
    .await;
    let app = app_for(&mock);
    let mut options = quick_options();
    options.agent.client.request_timeout = Duration::from_millis(400);
    let run = ask(&app, "compare the runs", options).await;
    let out = run.result.unwrap();
    assert!(!out.llm_used);
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
    assert!(
        out.answer.contains("did not answer within"),
        "{}",
        out.answer
    );
    assert_eq!(mock.seen().len(), 1, "timeouts are not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_budget_forces_a_final_answer_and_then_stops() {
    // The model keeps calling tools; the last step has tools off and it still
    // answers with a tool call and no text.
    let mock = Mock::start(vec![
        Step::Json(calls(&[("aisp_status", "{}")])),
        Step::Json(calls(&[("aisp_list_domains", "{}")])),
    ])
    .await;
    let app = app_for(&mock);
    let mut options = quick_options();
    options.agent.max_steps = 2;
    let out = ask(&app, "compare the runs", options).await.result.unwrap();
    assert!(!out.llm_used);
    let seen = mock.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body["tool_choice"], "auto");
    assert_eq!(
        seen[1].body["tool_choice"], "none",
        "tools are off on the last step"
    );
    let last_user = seen[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        last_user.contains("This is your last turn") && last_user.contains("E1"),
        "{last_user}"
    );
    assert!(
        out.answer
            .contains("used all 2 step(s) without writing an answer"),
        "{}",
        out.answer
    );
    assert_eq!(
        out.citations[0].tool, "aisp_status",
        "what the model gathered is still cited"
    );

    // max_steps from the request wins over the default.
    let mock = Mock::start(vec![Step::Json(answer("## Answer\nOne step."))]).await;
    let app = app_for(&mock);
    let out = ask_with(
        &app,
        AskRequest {
            question: "compare the runs".into(),
            max_steps: Some(1),
            ..AskRequest::default()
        },
        quick_options(),
        CancellationToken::new(),
    )
    .await
    .result
    .unwrap();
    assert_eq!(mock.seen()[0].body["tool_choice"], "none");
    assert_eq!(out.steps, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_budget_stops_requests_before_they_exceed_it() {
    let heavy = |list: &[(&str, &str)]| {
        let mut v = calls(list);
        v["usage"] = json!({"prompt_tokens": 19000, "completion_tokens": 0, "total_tokens": 19000});
        v
    };
    let mock = Mock::start(vec![
        Step::Json(heavy(&[("aisp_status", "{}")])),
        Step::Json(answer("never sent")),
    ])
    .await;
    let app = app_for(&mock);
    let mut options = quick_options();
    options.agent.token_budget = 20_000;
    let out = ask(&app, "compare the runs", options).await.result.unwrap();
    assert_eq!(
        mock.seen().len(),
        1,
        "the second request would exceed the budget"
    );
    assert_eq!(out.tokens_used, 19_000);
    assert!(!out.llm_used);
    assert!(
        out.answer.contains("token budget (20000 tokens)"),
        "{}",
        out.answer
    );

    // With room for one more request but not two, the next one is the forced answer.
    let heavy25 = {
        let mut v = calls(&[("aisp_status", "{}")]);
        v["usage"] = json!({"prompt_tokens": 25000, "completion_tokens": 0, "total_tokens": 25000});
        v
    };
    let mock = Mock::start(vec![
        Step::Json(heavy25),
        Step::Json(answer("## Answer\nAnswered within budget [E1].")),
    ])
    .await;
    let app = app_for(&mock);
    let mut options = quick_options();
    options.agent.token_budget = 60_000;
    let out = ask(&app, "compare the runs", options).await.result.unwrap();
    assert!(out.llm_used);
    let seen = mock.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[1].body["tool_choice"], "none",
        "the budget made step 2 the last"
    );
    assert_eq!(out.tokens_used, 26_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_a_call_waiting_on_the_model() {
    let mock = Mock::start(vec![Step::Delay(
        Duration::from_secs(30),
        Box::new(Step::Json(answer("too late"))),
    )])
    .await;
    let app = app_for(&mock);
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c2.cancel();
    });
    let run = ask_with(
        &app,
        AskRequest {
            question: "compare the runs".into(),
            ..AskRequest::default()
        },
        quick_options(),
        cancel,
    )
    .await;
    assert_eq!(run.result.unwrap_err().kind, ErrorKind::Cancelled);
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_never_appears_in_logs_results_or_errors() {
    // The endpoint echoes the key in its errors, the way careless proxies do.
    let echo = format!(
        r#"{{"error": {{"message": "Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}}}"#
    );
    let mock = Mock::start(vec![
        Step::Status(500, vec![], format!("proxy failure for key {KEY}")),
        Step::Status(
            401,
            vec![("content-type", "application/json".into())],
            echo.clone(),
        ),
    ])
    .await;
    let app = app_for(&mock);
    let out = ask(&app, "what is occupancy?", quick_options())
        .await
        .result
        .unwrap();
    assert!(!out.llm_used);
    assert!(out.answer.contains("HTTP 401"), "{}", out.answer);
    assert!(out.answer.contains("<redacted>"), "{}", out.answer);
    let json = serde_json::to_string(&out).unwrap();
    no_key_in("the result", &json);

    // aisp_ai_status: configured, unreachable with the reason, never the key.
    let mock = Mock::start(vec![Step::Status(401, vec![], echo)]).await;
    let app = app_for(&mock);
    let tool = aisp::registry::find("aisp_ai_status").unwrap();
    let status = aisp::dispatch::invoke(&app, tool, json!({}), Default::default())
        .await
        .unwrap();
    assert_eq!(status["configured"], true);
    assert_eq!(status["api_key_set"], true);
    assert_eq!(status["reachable"], false);
    assert!(status["hint"].as_str().unwrap().contains("refused the key"));
    no_key_in("aisp_ai_status", &status.to_string());

    // And with a working endpoint, the status reports latency and the model.
    let mock = Mock::start(vec![Step::Json(answer("OK"))]).await;
    let mut config = Config::with_home(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("aisp-ai-status-ok"),
    );
    config.llm = LlmConfig {
        base_url: Some(mock.base_url()),
        model: None,
        api_key: Some(KEY.into()),
        stream: false,
    };
    let app = AppState::new(config);
    let status = aisp::dispatch::invoke(&app, tool, json!({"probe": true}), Default::default())
        .await
        .unwrap();
    assert_eq!(status["reachable"], true);
    assert_eq!(
        status["model"], "discovered-model",
        "found through /v1/models"
    );
    assert_eq!(status["model_source"], "discovered");
    assert!(status["latency_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(mock.seen()[0].body["model"], "discovered-model");
    no_key_in("aisp_ai_status", &status.to_string());

    let logs = String::from_utf8_lossy(&logs().lock().unwrap()).to_string();
    assert!(
        logs.contains("LLM request"),
        "the capture works: {} bytes",
        logs.len()
    );
    no_key_in("the logs", &logs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_llm_the_operation_answers_and_says_so() {
    let mut config = Config::with_home(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("aisp-ai-nollm-{}", std::process::id())),
    );
    config.llm = LlmConfig::default();
    let app = AppState::new(config);
    app.set_gpu_for_tests(GpuAvailability::unavailable("no GPU in this test", false));
    let tool = aisp::registry::find("aisp_ask").unwrap();
    let out = aisp::dispatch::invoke(
        &app,
        tool,
        json!({"question": "RuntimeError: CUDA error: an illegal memory access was encountered"}),
        Default::default(),
    )
    .await
    .unwrap();
    assert_eq!(out["llm_used"], false);
    assert_eq!(out["model"], Value::Null);
    assert_eq!(out["intent"], "error_message");
    let answer = out["answer"].as_str().unwrap();
    assert!(answer.starts_with("> **No LLM was used.** No LLM endpoint is configured"));
    assert!(answer.contains("Out-of-bounds indexing"), "{answer}");
    assert!(answer.contains("## Facts") && answer.contains("## Hypotheses"));
    let cited: Vec<&str> = out["citations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["tool"].as_str().unwrap())
        .collect();
    assert!(cited.contains(&"aisp_ai_troubleshoot"), "{cited:?}");
    assert!(
        out["notes"].as_array().unwrap().is_empty(),
        "{}",
        out["notes"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_profile_the_model_starts_from_the_rules_and_its_findings_are_returned() {
    let mock = Mock::start(vec![
        Step::Json(calls(&[(
            "aisp_profile_gaps",
            &format!(
                r#"{{"path": "{}", "min_gap_ms": 2}}"#,
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/data/train_good.sqlite")
                    .display()
            ),
        )])),
        Step::Json(answer(
            "## Answer\nThe run is host-bound: `host_os_wait` [E1], gaps of about 5 ms [E3].\n## Facts\n- busy [E2]",
        )),
    ])
    .await;
    let app = app_for(&mock);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/train_good.sqlite")
        .display()
        .to_string();
    let run = ask_with(
        &app,
        AskRequest {
            question: "why is this training slow?".into(),
            profile: Some(path.clone()),
            ..AskRequest::default()
        },
        quick_options(),
        CancellationToken::new(),
    )
    .await;
    let out = run.result.unwrap();
    assert!(out.llm_used);
    let first = &mock.seen()[0].body;
    let user = first["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains(&format!("Attached profile: {path}")));
    assert!(
        user.contains("[E1] aisp_profile_rules"),
        "the rules are gathered first"
    );
    assert!(user.contains("host_os_wait") && user.contains("[E2] aisp_profile_utilization"));
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        offered[0], "aisp_profile_rules",
        "the plan's tools are offered first"
    );
    assert!(offered.contains(&"aisp_profile_gaps"), "{offered:?}");
    // The model's own call ran on the real file.
    let tools = tool_messages(&mock.seen()[1].body);
    assert!(
        tools[0].starts_with("[E3] aisp_profile_gaps result:"),
        "{}",
        tools[0]
    );
    assert!(
        tools[0].contains("5132000") || tools[0].contains("gaps"),
        "{}",
        tools[0]
    );
    // Findings relied on: the medium-or-above findings of the cited rules result.
    let ids: Vec<&str> = out.findings.iter().map(|f| f.finding.id.as_str()).collect();
    assert_eq!(ids, ["host_os_wait", "launch_bound_tiny_kernels"]);
    assert!(out.findings.iter().all(|f| f.evidence_id == "E1"));
    let cited: Vec<&str> = out.citations.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(
        cited,
        [
            "aisp_profile_rules",
            "aisp_profile_gaps",
            "aisp_profile_utilization"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suggest_tools_and_explain_use_the_llm_when_asked() {
    let mock = Mock::start(vec![
        Step::Json(answer(
            "Here you go:\n```json\n{\"suggestions\": [{\"tool\": \"aisp_profile_gaps\", \"reason\": \"idle gaps name the stall\"}, \
             {\"tool\": \"aisp_made_up\", \"reason\": \"x\"}, {\"tool\": \"aisp_profile_rules\", \"reason\": \"triage\"}]}\n```",
        )),
        Step::Json(answer("Occupancy, expanded: an example with 255 registers per thread [S1].")),
    ])
    .await;
    let app = app_for(&mock);
    let tool = aisp::registry::find("aisp_suggest_tools").unwrap();
    let out = aisp::dispatch::invoke(
        &app,
        tool,
        json!({"task": "why does my GPU sit idle between steps", "llm": true, "limit": 4}),
        Default::default(),
    )
    .await
    .unwrap();
    assert_eq!(out["llm_used"], true, "{out}");
    assert_eq!(
        out["routing"],
        "llm re-ranking of the router and bm25 candidates"
    );
    let names: Vec<&str> = out["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        &names[..2],
        ["aisp_profile_gaps", "aisp_profile_rules"],
        "unknown names dropped"
    );
    assert_eq!(names.len(), 4);
    assert!(
        out["suggestions"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("idle gaps name the stall")
    );

    let tool = aisp::registry::find("aisp_explain").unwrap();
    let out = aisp::dispatch::invoke(
        &app,
        tool,
        json!({"concept": "occupancy", "expand": true}),
        Default::default(),
    )
    .await
    .unwrap();
    assert_eq!(out["llm_used"], true);
    assert_eq!(out["concept"]["id"], "occupancy");
    assert!(out["expansion"].as_str().unwrap().contains("[S1]"));
    let sent = &mock.seen()[1].body;
    let user = sent["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("[S1]") && user.contains("https://"),
        "the sources go to the model: {user}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_tool_support_answers_from_the_first_evidence() {
    let mock = Mock::start(vec![
        Step::Status(
            400,
            vec![("content-type", "application/json".into())],
            r#"{"error": {"message": "registry.ollama.ai/library/tiny:1b does not support tools", "type": "api_error"}}"#.into(),
        ),
        Step::Json(answer("## Answer\nOccupancy is resident warps over the maximum [E1].")),
    ])
    .await;
    let app = app_for(&mock);
    let out = ask(&app, "what is occupancy?", quick_options())
        .await
        .result
        .unwrap();
    assert!(out.llm_used);
    let seen = mock.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].body.get("tools").is_some());
    assert!(
        seen[1].body.get("tools").is_none(),
        "asked again without tools"
    );
    assert_eq!(out.citations[0].tool, "aisp_explain");
    assert!(
        out.notes
            .iter()
            .any(|n| n.contains("refused tool definitions")),
        "{:?}",
        out.notes
    );
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// With `stream` configured, requests ask for server-sent events and the loop
/// works on the assembled answer: a tool call whose name and arguments arrive
/// in pieces runs once with the joined arguments, the answer's content pieces
/// join in order, and the usage chunk before `[DONE]` is what gets counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_answers_are_assembled_from_their_deltas() {
    let mock = Mock::start(vec![
        Step::Sse(vec![
            chunk(json!({"role": "assistant", "content": null, "tool_calls": [
                {"index": 0, "id": "call_s0", "type": "function",
                 "function": {"name": "aisp_ai_troubleshoot", "arguments": ""}}]}), None),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"symptom\": "}}]}), None),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"NCCL timeout\"}"}}]}), None),
            chunk(json!({}), Some("tool_calls")),
            json!({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
                   "choices": [], "usage": {"prompt_tokens": 700, "completion_tokens": 40, "total_tokens": 740}}),
        ]),
        Step::Sse(vec![
            chunk(json!({"role": "assistant", "content": "## Answer\nNCCL timeouts have "}), None),
            chunk(json!({"content": "ranked causes [E4]."}), None),
            chunk(json!({}), Some("stop")),
            json!({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
                   "choices": [], "usage": {"prompt_tokens": 900, "completion_tokens": 60, "total_tokens": 960}}),
        ]),
    ])
    .await;
    let app = app_with(&mock, true);
    let run = ask(&app, "my job dies with an NCCL timeout", quick_options()).await;
    let out = run.result.expect("an answer");
    assert!(out.llm_used);
    assert_eq!(out.steps, 2);
    assert_eq!(
        out.tokens_used,
        740 + 960,
        "usage from the streams' last chunks"
    );
    assert!(
        out.answer.contains("NCCL timeouts have ranked causes"),
        "{}",
        out.answer
    );
    let seen = mock.seen();
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s.body["stream"], true, "{}", s.body);
        assert_eq!(s.body["stream_options"]["include_usage"], true);
    }
    // The tool ran once, with the arguments joined from two pieces (E1–E3 are
    // what the router gathers before the loop for an NCCL question; the
    // model's own call is E4).
    let fed_back = tool_messages(&seen[1].body);
    assert!(fed_back.iter().any(|m| m.contains("NCCL")), "{fed_back:?}");
    assert!(
        out.citations
            .iter()
            .any(|c| c.tool == "aisp_ai_troubleshoot" && c.arguments["symptom"] == "NCCL timeout"),
        "{:?}",
        out.citations
    );
}
