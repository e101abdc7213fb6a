//! The real binary over stdio, spoken to by rmcp's client: listing, calling,
//! errors, progress, cancellation, jobs, toolsets, both protocol generations,
//! and a clean stdout.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ProgressNotificationParam,
    ProtocolVersion, Request, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{Map, Value, json};

#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

struct Session {
    client: RunningService<RoleClient, Client>,
    handler: Client,
    _home: tempfile::TempDir,
}

async fn start(args: &[&str], modern: bool) -> Session {
    start_with_env(args, modern, &[]).await
}

async fn start_with_env(args: &[&str], modern: bool, env: &[(&str, &str)]) -> Session {
    let home = tempfile::tempdir().unwrap();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let home_path = home.path().to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let cmd = tokio::process::Command::new(common::aisp_bin()).configure(|c| {
        c.arg("serve").args(&args);
        c.env("AISP_HOME", &home_path)
            .env("AISP_CONFIG", home_path.join("none.toml"))
            .env_remove("AISP_TOOLS")
            .env_remove("AISP_ALLOW_EXEC")
            .env_remove("OPENAI_API_KEY")
            .env_remove("AISP_LLM_API_KEY")
            .env_remove("AISP_LLM_BASE_URL")
            .env("RUST_LOG", "warn")
            .envs(env);
    });
    let transport = TokioChildProcess::new(cmd).expect("spawn aisp serve");
    let handler = Client::default();
    let client = if modern {
        handler
            .clone()
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .expect("discover handshake")
    } else {
        handler.clone().serve(transport).await.expect("initialize")
    };
    Session {
        client,
        handler,
        _home: home,
    }
}

fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

async fn call(s: &Session, name: &'static str, a: Value) -> CallToolResult {
    s.client
        .call_tool(CallToolRequestParams::new(name).with_arguments(args(a)))
        .await
        .expect("tools/call answered")
}

fn structured(r: &CallToolResult) -> &Value {
    r.structured_content.as_ref().expect("structuredContent")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_completely_and_deterministically() {
    for modern in [false, true] {
        let s = start(&["--tools", "all"], modern).await;
        let tools = s.client.list_all_tools().await.unwrap();
        assert_eq!(tools.len(), aisp::registry::tools().len());
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "tools/list order is deterministic (sorted)");
        for t in &tools {
            assert!(t.name.starts_with("aisp_"));
            assert!(t.description.as_ref().is_some_and(|d| d.len() >= 80));
            assert_eq!(t.input_schema.get("type"), Some(&json!("object")));
            let out = t
                .output_schema
                .as_ref()
                .expect("every tool has an output schema");
            assert_eq!(out.get("type"), Some(&json!("object")));
            let a = t.annotations.as_ref().expect("annotations");
            assert!(a.read_only_hint.is_some() && a.destructive_hint.is_some());
            assert!(a.idempotent_hint.is_some() && a.open_world_hint.is_some());
            assert!(t.title.is_some());
        }
        let again = s.client.list_all_tools().await.unwrap();
        assert_eq!(
            again.iter().map(|t| t.name.to_string()).collect::<Vec<_>>(),
            names.iter().map(|n| n.to_string()).collect::<Vec<_>>()
        );
        s.client.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_answers_with_structured_content_and_the_same_json_as_text() {
    let s = start(&[], true).await;
    let r = call(&s, "aisp_status", json!({})).await;
    assert_eq!(r.is_error, Some(false));
    let v = structured(&r);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert!(v["store_path"].as_str().unwrap().ends_with("aisp.sqlite"));
    assert_eq!(v["exec_allowed"], false);
    let available = v["gpu"]["available"].as_bool().unwrap();
    if !available {
        assert!(!v["gpu"]["reason"].as_str().unwrap().is_empty());
    }
    let text = r.content[0].as_text().expect("text block").text.clone();
    let parsed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(&parsed, v);
    s.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_tool_error_and_unknown_tools_are_protocol_errors() {
    let s = start(&[], false).await;
    let r = call(&s, "aisp_job_status", json!({"job_idd": "x"})).await;
    assert_eq!(r.is_error, Some(true));
    let e = &structured(&r)["error"];
    assert_eq!(e["kind"], "invalid_input");
    assert!(e["message"].as_str().unwrap().contains("job_idd"));
    assert!(!e["hint"].as_str().unwrap().is_empty());

    let r = call(&s, "aisp_job_status", json!({"job_id": "job_missing"})).await;
    assert_eq!(structured(&r)["error"]["kind"], "not_found");

    let r = call(&s, "aisp_system_monitor", json!({"duration_s": -1})).await;
    assert_eq!(structured(&r)["error"]["kind"], "invalid_input");

    let err = s
        .client
        .call_tool(CallToolRequestParams::new("aisp_no_such_tool"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("tool not found"), "{err}");
    // The server keeps serving after errors.
    let r = call(&s, "aisp_status", json!({})).await;
    assert_eq!(r.is_error, Some(false));
    s.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_reported_while_a_long_call_runs() {
    let s = start(&[], true).await;
    let r = call(
        &s,
        "aisp_system_monitor",
        json!({"duration_s": 0.6, "interval_ms": 100}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));
    assert!(structured(&r)["samples"].as_array().unwrap().len() >= 6);
    let progress = s.handler.progress.lock().unwrap().clone();
    assert!(
        progress.len() >= 5,
        "got {} progress notifications",
        progress.len()
    );
    assert!(progress.windows(2).all(|w| w[1].progress > w[0].progress));
    assert!(progress.iter().all(|p| p.total.is_some()));
    s.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_long_call_stops_it_and_the_server_keeps_serving() {
    let s = start(&[], false).await;
    let handle = s
        .client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(
                CallToolRequestParams::new("aisp_system_monitor")
                    .with_arguments(args(json!({"duration_s": 60, "interval_ms": 100}))),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let before = s.handler.progress.lock().unwrap().len();
    assert!(before >= 1, "the call was running");
    handle.cancel(Some("test".into())).await.unwrap();
    let started = Instant::now();
    let r = call(&s, "aisp_status", json!({})).await;
    assert_eq!(r.is_error, Some(false));
    assert!(started.elapsed() < Duration::from_secs(3));
    // No more progress for the cancelled request once it has stopped.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let settled = s.handler.progress.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        s.handler.progress.lock().unwrap().len(),
        settled,
        "progress kept coming after cancellation"
    );
    s.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_calls_become_jobs_that_can_be_polled_listed_and_cancelled() {
    let s = start(&[], true).await;
    let r = call(
        &s,
        "aisp_system_monitor",
        json!({"duration_s": 0.4, "interval_ms": 100, "async": true}),
    )
    .await;
    let ticket = structured(&r).clone();
    let id = ticket["job_id"].as_str().unwrap().to_string();
    assert_eq!(ticket["tool"], "aisp_system_monitor");
    assert_eq!(ticket["status_tool"], "aisp_job_status");

    let mut record = Value::Null;
    for _ in 0..100 {
        let r = s
            .client
            .call_tool(
                CallToolRequestParams::new("aisp_job_status")
                    .with_arguments(args(json!({"job_id": id}))),
            )
            .await
            .unwrap();
        record = r.structured_content.unwrap();
        if record["state"] == "succeeded" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(record["state"], "succeeded", "{record}");
    assert!(record["result"]["samples"].as_array().unwrap().len() >= 4);
    assert!(record["started_at"].is_string() && record["finished_at"].is_string());

    // A long job, cancelled.
    let r = call(
        &s,
        "aisp_system_monitor",
        json!({"duration_s": 60, "async": true}),
    )
    .await;
    let long_id = structured(&r)["job_id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = call(&s, "aisp_job_cancel", json!({"job_id": long_id})).await;
    assert_eq!(r.is_error, Some(false));
    let mut state = Value::Null;
    for _ in 0..100 {
        let r = s
            .client
            .call_tool(
                CallToolRequestParams::new("aisp_job_status")
                    .with_arguments(args(json!({"job_id": long_id}))),
            )
            .await
            .unwrap();
        state = r.structured_content.unwrap()["state"].clone();
        if state == "cancelled" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(state, "cancelled");

    let r = call(&s, "aisp_job_list", json!({"limit": 10})).await;
    let jobs = structured(&r)["jobs"].as_array().unwrap().clone();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0]["job_id"], long_id.as_str(), "newest first");
    s.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_job_queue_is_busy_not_bad_input() {
    let s = start_with_env(&[], false, &[("AISP_MAX_JOBS", "1")]).await;
    let monitor = json!({"duration_s": 30, "interval_ms": 1000, "async": true});
    let first = call(&s, "aisp_system_monitor", monitor.clone()).await;
    assert_eq!(
        first.is_error,
        Some(false),
        "{:?}",
        first.structured_content
    );
    let id = structured(&first)["job_id"].as_str().unwrap().to_string();
    let r = call(&s, "aisp_system_monitor", monitor.clone()).await;
    assert_eq!(r.is_error, Some(true));
    let e = &structured(&r)["error"];
    assert_eq!(e["kind"], "busy", "{e}");
    assert!(
        e["hint"].as_str().unwrap().contains("limits.max_jobs"),
        "{e}"
    );
    assert!(
        e["hint"].as_str().unwrap().contains("aisp_job_cancel"),
        "{e}"
    );
    // Control calls answer, and a cancelled job frees its place.
    let c = call(&s, "aisp_job_cancel", json!({"job_id": id})).await;
    assert_eq!(c.is_error, Some(false));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = call(&s, "aisp_system_monitor", monitor.clone()).await;
        if r.is_error == Some(false) {
            let id = structured(&r)["job_id"].as_str().unwrap().to_string();
            call(&s, "aisp_job_cancel", json!({"job_id": id})).await;
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cancelled job's place was not freed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_reported_as_timeout_errors() {
    let s = start(&[], false).await;
    let started = Instant::now();
    let r = call(
        &s,
        "aisp_system_monitor",
        json!({"duration_s": 30, "timeout_s": 0.3}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(structured(&r)["error"]["kind"], "timeout");
    assert!(started.elapsed() < Duration::from_secs(5));
    s.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_and_exec_policies_hold_for_every_such_tool() {
    let s = start(&[], true).await;
    let status = call(&s, "aisp_status", json!({})).await;
    let gpu = structured(&status)["gpu"]["available"].as_bool().unwrap();
    for tool in aisp::registry::tools() {
        let spec = tool.spec();
        let example: Value = serde_json::from_str(spec.example).unwrap();
        if spec.executes_commands {
            let r = s
                .client
                .call_tool(
                    CallToolRequestParams::new(tool.name.clone()).with_arguments(args(example)),
                )
                .await
                .unwrap();
            assert_eq!(
                r.structured_content.unwrap()["error"]["kind"],
                "exec_not_allowed",
                "{}",
                tool.name
            );
        } else if spec.needs_gpu && !gpu {
            let r = s
                .client
                .call_tool(
                    CallToolRequestParams::new(tool.name.clone()).with_arguments(args(example)),
                )
                .await
                .unwrap();
            let v = r.structured_content.unwrap();
            assert_eq!(v["error"]["kind"], "gpu_unavailable", "{}: {v}", tool.name);
            assert!(!v["error"]["message"].as_str().unwrap().is_empty());
        }
    }
    s.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_toolset_hides_tools_from_the_list_but_they_still_answer() {
    let s = start(&["--tools", "core"], false).await;
    let tools = s.client.list_all_tools().await.unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    for n in &names {
        assert_eq!(
            aisp::registry::find(n).unwrap().spec().tier,
            aisp::registry::Tier::Core,
            "{n}"
        );
    }
    assert!(names.contains(&"aisp_status".to_string()));
    assert!(!names.contains(&"aisp_system_monitor".to_string()));
    let r = call(
        &s,
        "aisp_system_monitor",
        json!({"duration_s": 0.1, "interval_ms": 50}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));
    s.client.cancel().await.unwrap();

    let s = start(&["--tools", "job"], true).await;
    let names: Vec<String> = s
        .client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        names,
        ["aisp_job_cancel", "aisp_job_list", "aisp_job_status"]
    );
    s.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_info_and_instructions_point_at_the_starting_tools() {
    let s = start(&[], false).await;
    let info = s.client.peer_info().expect("server info");
    let info = serde_json::to_value(info).unwrap();
    assert_eq!(info["serverInfo"]["name"], "aisp");
    let instructions = info["instructions"].as_str().unwrap();
    assert!(instructions.contains("aisp_triage") && instructions.contains("aisp_suggest_tools"));
    s.client.cancel().await.unwrap();
    let _ = ServerResult::empty(()); // keep the import honest across rmcp versions
}

/// `aisp serve` with piped stdin and stdout, for raw JSON-RPC.
fn serve_raw(
    home: &std::path::Path,
    args: &[&str],
    stderr: std::process::Stdio,
) -> std::process::Child {
    common::aisp(home)
        .arg("serve")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// Raw JSON-RPC over the pipes: every stdout line is a JSON-RPC message, even
/// with debug logging on, and the process exits when stdin closes.
#[test]
fn stdout_carries_only_json_rpc_and_stdin_eof_ends_the_server() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let home = tempfile::tempdir().unwrap();
    let mut child = serve_raw(home.path(), &["--log-level", "debug"], Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    // Drain stderr: debug logging of a large tools/list fills the pipe
    // (64 KiB) and would block the server otherwise.
    let mut stderr = child.stderr.take().unwrap();
    let stderr_reader = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
        err
    });
    let lines = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"aisp_status","arguments":{}}}),
        json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"aisp_job_status","arguments":{"nope":1}}}),
    ];
    for l in &lines {
        writeln!(stdin, "{l}").unwrap();
    }
    writeln!(stdin, "this is not json").unwrap();
    // Well-formed JSON that is no JSON-RPC message: answered "Invalid Request"
    // (written by the reader side of the transport, as a frame of its own).
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 9, "method": 42})
    )
    .unwrap();
    stdin.flush().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut seen_ids = Vec::new();
    let mut invalid_request = false;
    let mut line = String::new();
    while seen_ids.len() < 4 || !invalid_request {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let v: Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| {
            panic!("stdout line is not JSON ({e}): {line}");
        });
        assert_eq!(v["jsonrpc"], "2.0");
        if v["error"]["code"] == -32600 {
            invalid_request = true;
            continue;
        }
        if let Some(id) = v.get("id").and_then(Value::as_i64) {
            seen_ids.push(id);
            if id == 4 {
                assert_eq!(v["result"]["isError"], true);
            }
        }
    }
    // Requests are served concurrently, so answers may come in any order.
    seen_ids.sort();
    assert_eq!(seen_ids, [1, 2, 3, 4]);
    assert!(
        invalid_request,
        "a malformed request gets an Invalid Request answer"
    );
    drop(stdin);
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "server did not exit on EOF"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    // Whatever remains on stdout is still JSON-RPC (e.g. the parse-error reply).
    for rest in reader.lines().map_while(Result::ok) {
        if !rest.trim().is_empty() {
            let v: Value = serde_json::from_str(&rest).expect("JSON-RPC only");
            assert_eq!(v["jsonrpc"], "2.0");
        }
    }
    let err = stderr_reader.join().unwrap();
    assert!(
        err.contains("DEBUG") || err.contains("INFO"),
        "logs go to stderr"
    );
}

/// Every line the server cannot decode gets a JSON-RPC error (`id: null`
/// where no id can be read), and the server keeps serving the lines after it.
#[test]
fn every_undecodable_line_gets_a_json_rpc_error_and_the_server_goes_on() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let home = tempfile::tempdir().unwrap();
    let mut child = serve_raw(home.path(), &[], Stdio::null());
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let v: Value = serde_json::from_str(&line).expect("stdout is JSON-RPC only");
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("an answer within 10 s")
    };
    let mut send = |bytes: &[u8]| {
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    send(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string().as_bytes());
    assert_eq!(next()["id"], 1);
    send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":77,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(20 << 20)
    );
    let cases: Vec<(&str, Vec<u8>, i64, Value)> = vec![
        ("invalid JSON", b"this is not json".to_vec(), -32700, Value::Null),
        ("truncated JSON", br#"{"jsonrpc":"2.0","id":5,"method":"#.to_vec(), -32700, Value::Null),
        ("invalid UTF-8", b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\xff\xfe\"}".to_vec(), -32700, Value::Null),
        ("NUL", b"{\"jsonrpc\":\"2.0\",\"id\":7,\0\"method\":\"ping\"}".to_vec(), -32700, Value::Null),
        ("deep nesting", deep.into_bytes(), -32700, Value::Null),
        ("id 1e999", br#"{"jsonrpc":"2.0","id":1e999,"method":"ping"}"#.to_vec(), -32700, Value::Null),
        ("a fractional id", br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.to_vec(), -32600, Value::Null),
        ("an array", br#"[1, 2, 3]"#.to_vec(), -32600, Value::Null),
        ("no method", br#"{"jsonrpc":"2.0","id":8}"#.to_vec(), -32600, json!(8)),
        ("over-long line", long.into_bytes(), -32600, Value::Null),
        (
            "arguments as an array",
            br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"aisp_status","arguments":[1]}}"#.to_vec(),
            -32602,
            json!(9),
        ),
    ];
    for (what, bytes, code, id) in cases {
        send(&bytes);
        let v = next();
        assert_eq!(v["jsonrpc"], "2.0", "{what}: {v}");
        assert_eq!(v["error"]["code"], code, "{what}: {v}");
        assert_eq!(v["id"], id, "{what}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}: {v}"
        );
        // Still serving.
        send(br#"{"jsonrpc":"2.0","id":100,"method":"ping"}"#);
        let pong = next();
        assert_eq!(pong["id"], 100, "after {what}: {pong}");
        assert!(pong.get("result").is_some(), "after {what}: {pong}");
    }
    drop(stdin);
    let _ = child.wait();
}

/// With execution off, a command-running call is refused before a job ticket is issued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execution_is_refused_before_a_job_ticket() {
    let s = start(&["--tools", "all"], false).await;
    for (tool, a) in [
        (
            "aisp_analyze_memory_patterns",
            json!({"command": ["python3", "x.py"], "async": true}),
        ),
        (
            "aisp_hw_network_listen",
            json!({"bind": "0.0.0.0:5201", "duration_s": 1, "async": true}),
        ),
    ] {
        let r = call(&s, tool, a).await;
        let v = structured(&r);
        assert_eq!(r.is_error, Some(true), "{tool}: {v}");
        assert_eq!(v["error"]["kind"], "exec_not_allowed", "{tool}: {v}");
        assert!(v.get("job_id").is_none(), "{tool}: {v}");
    }
    let list = call(&s, "aisp_job_list", json!({})).await;
    assert_eq!(structured(&list)["jobs"], json!([]), "no job was started");
}
