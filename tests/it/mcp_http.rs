//! MCP over streamable HTTP against the real binary: rmcp's client in both
//! protocol generations, Host and Origin checks, the bearer token, and the
//! refusal to serve off loopback without one.

use crate::common;

use std::time::Duration;

use common::HttpServer;
use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt};
use serde_json::{Value, json};

fn transport(
    server: &HttpServer,
    token: Option<&str>,
) -> StreamableHttpClientTransport<reqwest::Client> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp"));
    if let Some(t) = token {
        config = config.auth_header(t.to_string());
    }
    StreamableHttpClientTransport::from_config(config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_clients_list_and_call_over_http_in_both_protocol_generations() {
    let server = HttpServer::start(&["--tools", "all"], &[]);
    // Legacy: initialize handshake and a session.
    let client = ClientConfig::default()
        .serve(transport(&server, None))
        .await
        .unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), aisp::registry::tools().len());
    let r = client
        .call_tool(CallToolRequestParams::new("aisp_status"))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false));
    assert_eq!(
        r.structured_content.unwrap()["version"],
        env!("CARGO_PKG_VERSION")
    );
    client.cancel().await.unwrap();

    // 2026-07-28: stateless, server/discover.
    let client = ClientConfig::default()
        .serve_with_lifecycle(
            transport(&server, None),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    let r = client
        .call_tool(
            CallToolRequestParams::new("aisp_job_status")
                .with_arguments(json!({"job_id": "job_x"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert_eq!(r.structured_content.unwrap()["error"]["kind"], "not_found");
    // Jobs started over stateless HTTP survive across requests (state is server-side, not per connection).
    let r = client
        .call_tool(
            CallToolRequestParams::new("aisp_system_monitor").with_arguments(
                json!({"duration_s": 0.2, "interval_ms": 50, "async": true})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    let id = r.structured_content.unwrap()["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut state = Value::Null;
    for _ in 0..100 {
        let r = client
            .call_tool(
                CallToolRequestParams::new("aisp_job_status")
                    .with_arguments(json!({"job_id": id}).as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        state = r.structured_content.unwrap()["state"].clone();
        if state == "succeeded" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(state, "succeeded");
    client.cancel().await.unwrap();
}

fn raw_initialize() -> Value {
    json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})
}

async fn post_mcp(server: &HttpServer, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(server.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(raw_initialize().to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_host_and_origin_are_rejected() {
    let server = HttpServer::start(&[], &[]);
    assert_eq!(post_mcp(&server, &[]).await.status(), 200);
    assert_eq!(
        post_mcp(&server, &[("origin", "http://localhost:5173")])
            .await
            .status(),
        200
    );
    let r = post_mcp(&server, &[("origin", "http://evil.example")]).await;
    assert_eq!(r.status(), 403);
    let r = post_mcp(&server, &[("host", "evil.example")]).await;
    assert_eq!(r.status(), 403);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["kind"], "forbidden");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_when_configured() {
    let server = HttpServer::start(&["--token", "tok-123"], &[]);
    let r = post_mcp(&server, &[]).await;
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    assert_eq!(
        post_mcp(&server, &[("authorization", "Bearer nope")])
            .await
            .status(),
        401
    );
    assert_eq!(
        post_mcp(&server, &[("authorization", "Bearer tok-123")])
            .await
            .status(),
        200
    );
    // rmcp's client with the token works; without it the handshake fails.
    let client = ClientConfig::default()
        .serve(transport(&server, Some("tok-123")))
        .await
        .unwrap();
    assert!(!client.list_all_tools().await.unwrap().is_empty());
    client.cancel().await.unwrap();
    assert!(
        ClientConfig::default()
            .serve(transport(&server, None))
            .await
            .is_err()
    );

    // The environment variable works as well as the flag.
    let server = HttpServer::start(&[], &[("AISP_TOKEN", "env-tok")]);
    assert_eq!(post_mcp(&server, &[]).await.status(), 401);
    assert_eq!(
        post_mcp(&server, &[("authorization", "Bearer env-tok")])
            .await
            .status(),
        200
    );
}

#[test]
fn binding_off_loopback_without_a_token_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let out = common::aisp(home.path())
        .args(["serve", "--transport", "http", "--bind", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("token"), "{err}");
}
