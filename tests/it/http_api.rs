//! The HTTP API (`POST /api/<domain>/<op>`, `POST /api/<op>`): same inputs and
//! outputs as MCP, errors as status codes with the error object.

use crate::common;

use std::time::Duration;

use common::HttpServer;
use serde_json::{Value, json};

async fn post(server: &HttpServer, path: &str, body: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(server.url(path))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_answer_with_their_output_or_an_error_status() {
    let server = HttpServer::start(&[], &[]);
    let (code, v) = post(&server, "/api/status", "").await;
    assert_eq!(code, 200);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));

    let (code, v) = post(
        &server,
        "/api/suggest_tools",
        r#"{"task": "cancel my job", "limit": 1}"#,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(v["suggestions"][0]["tool"], "aisp_job_cancel");

    let (code, v) = post(&server, "/api/job/status", r#"{"job_id": "job_x"}"#).await;
    assert_eq!(code, 404);
    assert_eq!(v["error"]["kind"], "not_found");

    let (code, v) = post(&server, "/api/job/status", r#"{"id": 1}"#).await;
    assert_eq!(code, 400);
    assert_eq!(v["error"]["kind"], "invalid_input");

    let (code, v) = post(&server, "/api/job/list", "{not json").await;
    assert_eq!(code, 400);
    assert!(v["error"]["message"].as_str().unwrap().contains("JSON"));

    let (code, v) = post(&server, "/api/nope/nothing", "{}").await;
    assert_eq!(code, 404);
    assert_eq!(v["error"]["kind"], "not_found");
    // Short-named operations live at /api/<op> only, and the error says so.
    let (code, v) = post(&server, "/api/core/status", "{}").await;
    assert_eq!(code, 404);
    assert!(v["error"]["hint"].as_str().unwrap().contains("/api/status"));

    let (code, v) = post(
        &server,
        "/api/system/monitor",
        r#"{"duration_s": 30, "timeout_s": 0.3}"#,
    )
    .await;
    assert_eq!(code, 408);
    assert_eq!(v["error"]["kind"], "timeout");

    let tools: Value = reqwest::get(server.url("/api/tools"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        tools["tools"].as_array().unwrap().len(),
        aisp::registry::tools().len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_jobs_work_through_the_api() {
    let server = HttpServer::start(&[], &[]);
    let (code, ticket) = post(
        &server,
        "/api/system/monitor",
        r#"{"duration_s": 0.2, "interval_ms": 50, "async": true}"#,
    )
    .await;
    assert_eq!(code, 200);
    let id = ticket["job_id"].as_str().unwrap();
    let body = json!({"job_id": id}).to_string();
    let mut record = Value::Null;
    for _ in 0..100 {
        record = post(&server, "/api/job/status", &body).await.1;
        if record["state"] == "succeeded" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(record["state"], "succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_and_exec_errors_map_to_503_and_403() {
    let server = HttpServer::start(&[], &[]);
    let gpu = post(&server, "/api/status", "{}").await.1["gpu"]["available"]
        .as_bool()
        .unwrap();
    for tool in aisp::registry::tools() {
        let spec = tool.spec();
        if spec.executes_commands {
            let (code, v) = post(&server, &spec.http_path(), spec.example).await;
            assert_eq!(
                (code, v["error"]["kind"].as_str()),
                (403, Some("exec_not_allowed")),
                "{}",
                tool.name
            );
        } else if spec.needs_gpu && !gpu {
            let (code, v) = post(&server, &spec.http_path(), spec.example).await;
            assert_eq!(
                (code, v["error"]["kind"].as_str()),
                (503, Some("gpu_unavailable")),
                "{}",
                tool.name
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_shares_the_token_and_host_policy() {
    let server = HttpServer::start(&["--token", "abc"], &[]);
    let client = reqwest::Client::new();
    let r = client.post(server.url("/api/status")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = client
        .post(server.url("/api/status"))
        .bearer_auth("abc")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = client
        .post(server.url("/api/status"))
        .bearer_auth("abc")
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
}
