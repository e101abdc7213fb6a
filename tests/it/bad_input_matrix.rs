//! Every tool × bad input, over MCP stdio with rmcp's client: arguments
//! missing, of the wrong JSON type, 1 MB strings, bad paths (a FIFO, a
//! folder, /dev/zero, /proc/self/mem, a symlink loop, a traversal, a missing
//! file) and extreme numbers. Each call must come back within a time bound
//! as a clean error (a kind of the closed set, a message, a hint, no echo of
//! the megabyte) or as an answer valid against the tool's output schema; the
//! server must still be serving at the end.
//!
//! Calls run concurrently in one server, so the whole matrix takes seconds.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt, service::RunningService};
use serde_json::{Map, Value, json};

const PER_CALL: Duration = Duration::from_secs(60);
const HUGE: usize = 1 << 20;

/// Arguments that name files (or folders) the tool reads or writes.
const PATH_ARGS: &[&str] = &[
    "path",
    "details_path",
    "profile",
    "before",
    "after",
    "output",
    "cwd",
];

struct Case {
    tool: String,
    label: String,
    args: Map<String, Value>,
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn types_of(prop: &Value) -> Vec<String> {
    match prop.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect(),
        _ => vec![],
    }
}

/// A value of a JSON type the property does not accept.
fn wrong_type(types: &[String]) -> Value {
    if types.iter().any(|t| t == "string") {
        json!(12345)
    } else if types.iter().any(|t| t == "integer" || t == "number") {
        json!("not a number")
    } else if types.iter().any(|t| t == "boolean") {
        json!("yes")
    } else if types.iter().any(|t| t == "array") {
        json!({"an": "object"})
    } else {
        json!([1, 2])
    }
}

fn cases_for(tool: &Tool, bad_paths: &[(String, String)]) -> Vec<Case> {
    let schema = &tool.input_schema;
    let props: Map<String, Value> = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let example: Map<String, Value> = aisp::registry::find(&tool.name)
        .and_then(|t| serde_json::from_str(t.spec().example).ok())
        .unwrap_or_default();
    let mut out = Vec::new();
    let name = tool.name.to_string();
    let mut push = |label: String, args: Map<String, Value>| {
        out.push(Case {
            tool: name.clone(),
            label,
            args,
        })
    };
    push("missing: no arguments".into(), Map::new());
    push("unknown argument".into(), {
        let mut a = example.clone();
        a.insert("no_such_argument".into(), json!(1));
        a
    });
    for (key, prop) in &props {
        if key == "async" {
            continue; // an async job answers at once with a ticket; its run is not this call
        }
        let types = types_of(prop);
        let with = |v: Value| {
            let mut a = example.clone();
            a.insert(key.clone(), v);
            a
        };
        push(format!("{key}: wrong type"), with(wrong_type(&types)));
        if types.iter().any(|t| t == "string") || prop.get("enum").is_some() {
            push(format!("{key}: 1 MB string"), with(json!("A".repeat(HUGE))));
        }
        if types.iter().any(|t| t == "array")
            && prop
                .get("items")
                .is_some_and(|i| types_of(i).iter().any(|t| t == "string"))
        {
            push(
                format!("{key}: 1 MB string in a list"),
                with(json!(["B".repeat(HUGE)])),
            );
        }
        if types.iter().any(|t| t == "integer" || t == "number") {
            for (what, v) in [
                ("1e308", json!(1e308)),
                ("-1e308", json!(-1e308)),
                ("-1", json!(-1)),
                ("0", json!(0)),
                (
                    "2^64",
                    serde_json::from_str::<Value>("18446744073709551616").unwrap(),
                ),
                ("0.5", json!(0.5)),
            ] {
                if key == "timeout_s" && what == "1e308" {
                    continue;
                }
                push(format!("{key}: {what}"), with(v));
            }
        }
        let is_path = PATH_ARGS.contains(&key.as_str()) || key == "paths";
        if is_path {
            for (what, p) in bad_paths {
                let v = if key == "paths" { json!([p]) } else { json!(p) };
                push(format!("{key}: {what}"), with(v));
            }
        }
    }
    out
}

/// Whether `v` is a clean error envelope.
fn clean_error(v: &Value) -> Result<(), String> {
    let e = v.get("error").ok_or("no error object")?;
    let kind = e["kind"].as_str().ok_or("no kind")?;
    if !aisp::error::ErrorKind::ALL
        .iter()
        .any(|k| k.as_str() == kind)
    {
        return Err(format!("kind {kind} is not in the closed set"));
    }
    let message = e["message"].as_str().ok_or("no message")?;
    let hint = e["hint"].as_str().ok_or("no hint")?;
    if message.is_empty() || hint.is_empty() {
        return Err("empty message or hint".into());
    }
    if message.len() > 8192 || hint.len() > 8192 {
        return Err(format!(
            "message of {} bytes: an echo was not cut",
            message.len()
        ));
    }
    if kind == "internal" {
        return Err(format!("internal error: {message}"));
    }
    Ok(())
}

async fn start(home: &Path) -> RunningService<RoleClient, ()> {
    let home = home.to_path_buf();
    let cmd = tokio::process::Command::new(common::aisp_bin()).configure(|c| {
        // Every tool listed, not the default toolset.
        c.args(["serve", "--tools", "all"]);
        c.env("AISP_HOME", &home)
            .env("AISP_CONFIG", home.join("none.toml"))
            .env_remove("AISP_TOOLS")
            .env_remove("AISP_ALLOW_EXEC")
            .env_remove("OPENAI_API_KEY")
            .env_remove("AISP_LLM_API_KEY")
            .env_remove("AISP_LLM_BASE_URL")
            .env("RUST_LOG", "error");
    });
    ().serve(TokioChildProcess::new(cmd).expect("spawn aisp serve"))
        .await
        .expect("initialize")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_answers_bad_input_cleanly_and_in_time() {
    let started = Instant::now();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.sqlite");
    mkfifo(&fifo);
    let lp = dir.path().join("loop.sqlite");
    std::os::unix::fs::symlink(&lp, &lp).unwrap();
    let bad_paths: Vec<(String, String)> = [
        ("FIFO", fifo.display().to_string()),
        ("directory", dir.path().display().to_string()),
        ("/dev/zero", "/dev/zero".to_string()),
        ("/proc/self/mem", "/proc/self/mem".to_string()),
        ("symlink loop", lp.display().to_string()),
        (
            "traversal",
            "../../../../../../../../etc/shadow".to_string(),
        ),
        (
            "missing",
            dir.path().join("missing.sqlite").display().to_string(),
        ),
        ("NUL byte", "bad\0name.sqlite".to_string()),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b))
    .collect();

    let client = Arc::new(start(home.path()).await);
    let tools = client.list_all_tools().await.unwrap();
    let gpu_here = aisp_hw::gpu::GpuAvailability::probe().available;
    let mut cases = Vec::new();
    let mut skipped = Vec::new();
    for t in &tools {
        let def = aisp::registry::find(&t.name).expect("listed tools are registered");
        // On a GPU host the GPU tools would measure for real; without one they
        // answer gpu_unavailable at once and stay in the matrix.
        if gpu_here && def.spec().needs_gpu {
            skipped.push(t.name.to_string());
            continue;
        }
        cases.extend(cases_for(t, &bad_paths));
    }
    let output_schemas: BTreeMap<String, Map<String, Value>> = tools
        .iter()
        .map(|t| {
            (
                t.name.to_string(),
                t.output_schema.as_deref().cloned().unwrap_or_default(),
            )
        })
        .collect();
    let total = cases.len();
    let results: Vec<(String, Result<&'static str, String>, Duration)> =
        futures::stream::iter(cases.into_iter().map(|case| {
            let client = Arc::clone(&client);
            let schema = output_schemas[&case.tool].clone();
            async move {
                let t0 = Instant::now();
                let call = client.call_tool(
                    CallToolRequestParams::new(case.tool.clone()).with_arguments(case.args),
                );
                let label = format!("{} / {}", case.tool, case.label);
                let outcome = match tokio::time::timeout(PER_CALL, call).await {
                    Err(_) => Err("no answer in time (a hang)".to_string()),
                    Ok(Err(e)) => Err(format!("protocol error: {e}")),
                    Ok(Ok(r)) => {
                        let v = r.structured_content.clone().unwrap_or(Value::Null);
                        let size: usize = r
                            .content
                            .iter()
                            .filter_map(|c| c.as_text().map(|t| t.text.len()))
                            .sum();
                        if r.is_error == Some(true) {
                            clean_error(&v).map(|_| "error")
                        } else if size > HUGE / 2 {
                            Err(format!("an answer of {size} bytes echoes the megabyte"))
                        } else {
                            aisp::registry::validate::check(
                                &schema,
                                &v,
                                aisp::registry::validate::Mode::Output,
                            )
                            .map(|_| "answer")
                            .map_err(|e| format!("answer breaks the output schema: {e}"))
                        }
                    }
                };
                (label, outcome, t0.elapsed())
            }
        }))
        .buffer_unordered(8)
        .collect()
        .await;

    let mut failures = Vec::new();
    let (mut errors, mut answers) = (0, 0);
    let mut slowest = (String::new(), Duration::ZERO);
    for (label, outcome, took) in &results {
        if *took > slowest.1 {
            slowest = (label.clone(), *took);
        }
        match outcome {
            Ok("error") => errors += 1,
            Ok(_) => answers += 1,
            Err(e) => failures.push(format!("{label}: {e}")),
        }
    }
    // Still serving.
    let r = client
        .call_tool(CallToolRequestParams::new("aisp_status"))
        .await
        .expect("the server survived the matrix");
    assert_eq!(r.is_error, Some(false));
    eprintln!(
        "{total} calls over {} tools: {errors} clean errors, {answers} valid answers, {} failures; \
         slowest {:?} ({}); {:?} in all; skipped (GPU host): {skipped:?}",
        tools.len(),
        failures.len(),
        slowest.1,
        slowest.0,
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {total} calls failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(total > 1000, "{total}");
}

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
        .display()
        .to_string()
}

/// Call and return the error object (panics on success).
async fn error_of(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> Value {
    let r = client
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .expect("answered");
    assert_eq!(
        r.is_error,
        Some(true),
        "{tool} {args}: {:?}",
        r.structured_content
    );
    r.structured_content.unwrap()["error"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_argument_in_json_words_with_the_right_kind() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lp = dir.path().join("loop.sqlite");
    std::os::unix::fs::symlink(&lp, &lp).unwrap();
    let c = start(home.path()).await;
    let mock = data("mock.sqlite");

    // A link loop and /proc/self/mem exist: not "not_found".
    for p in [lp.display().to_string(), "/proc/self/mem".to_string()] {
        let e = error_of(&c, "aisp_profile_info", json!({"path": p})).await;
        assert_eq!(e["kind"], "invalid_input", "{p}: {e}");
        assert!(
            !e["message"].as_str().unwrap().contains("does not exist"),
            "{e}"
        );
    }
    // A huge search pattern: invalid_input with a hint about the pattern, not about re-exporting.
    let e = error_of(
        &c,
        "aisp_profile_search",
        json!({"path": mock, "pattern": "x".repeat(10_000)}),
    )
    .await;
    assert_eq!(e["kind"], "invalid_input");
    assert!(e["hint"].as_str().unwrap().contains("distinctive"), "{e}");
    assert!(!e["hint"].as_str().unwrap().contains("export"), "{e}");
    // An empty window names both ends in words, never "end_ns -".
    let e = error_of(
        &c,
        "aisp_profile_summary",
        json!({"path": mock, "start_ns": i64::MAX}),
    )
    .await;
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("window") && !m.contains("end_ns -"), "{m}");
    // JSON types and argument names, not Rust types.
    for (tool, args, name) in [
        (
            "aisp_analyze_scaling",
            json!({"model": "llama-3.1-8b", "architecture": "x"}),
            "architecture",
        ),
        ("aisp_gpu_info", json!({"device": "zero"}), "device"),
        (
            "aisp_profile_kernels",
            json!({"path": mock, "limit": -3}),
            "limit",
        ),
        (
            "aisp_system_monitor",
            json!({"duration_s": "5"}),
            "duration_s",
        ),
    ] {
        let e = error_of(&c, tool, args).await;
        let m = e["message"].as_str().unwrap();
        assert_eq!(e["kind"], "invalid_input", "{m}");
        assert!(m.contains(&format!("`{name}`")), "{m}");
        for rust in ["u32", "u64", "usize", "f64", "i64", "struct ", "Option"] {
            assert!(!m.contains(rust), "{tool}: {m}");
        }
    }
    // Physical ranges: a negative price, an absurd token count.
    let e = error_of(
        &c,
        "aisp_distributed_cost_estimate",
        json!({"model": "llama-3.1-8b", "gpus": 8, "price_usd_per_gpu_hour": -1}),
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("at least 0"), "{e}");
    let e = error_of(
        &c,
        "aisp_distributed_cost_estimate",
        json!({"model": "llama-3.1-8b", "gpus": 8, "tokens": 1e308}),
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("tokens"), "{e}");
    let e = error_of(
        &c,
        "aisp_inference_cost_per_token",
        json!({"gpu": "h100-sxm", "tokens_per_s": 1000, "electricity_usd_per_kwh": -0.1}),
    )
    .await;
    assert_eq!(e["kind"], "invalid_input", "{e}");
    // A long argument echoed back is cut, saying so.
    let e = error_of(
        &c,
        "aisp_profile_info",
        json!({"path": format!("/nonexistent/{}", "p".repeat(3000))}),
    )
    .await;
    let m = e["message"].as_str().unwrap();
    assert!(
        m.len() < 1500 && m.contains("[cut:"),
        "{} bytes: {m:.300}",
        m.len()
    );
    // An existing export output (under the output root, where MCP writes): the overwrite hint only.
    std::fs::create_dir_all(home.path().join("exports")).unwrap();
    std::fs::write(home.path().join("exports/trace.perfetto.json"), "x").unwrap();
    let e = error_of(
        &c,
        "aisp_profile_export",
        json!({"path": mock, "kind": "perfetto", "output": "trace.perfetto.json"}),
    )
    .await;
    let hint = e["hint"].as_str().unwrap();
    assert!(
        hint.contains("overwrite") && !hint.contains("aisp_profile_info"),
        "{hint}"
    );
    // Outside the output roots: refused, saying where writes may go.
    let e = error_of(
        &c,
        "aisp_profile_export",
        json!({"path": mock, "kind": "perfetto", "output": dir.path().join("t.json").display().to_string()}),
    )
    .await;
    assert_eq!(e["kind"], "invalid_input", "{e}");
    assert!(
        e["hint"].as_str().unwrap().contains("AISP_OUTPUT_ROOTS"),
        "{e}"
    );
    assert!(!dir.path().join("t.json").exists());
}
