//! The HTTP server against slow, idle and many clients, over raw TCP on
//! 127.0.0.1: a header timeout, a body timeout, a connection limit that
//! queues instead of refusing, calls queued behind the file-reading pool,
//! a session DELETE the SDKs accept, and a quick exit on SIGTERM.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::HttpServer;
use serde_json::{Value, json};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Read until the server closes the connection or `limit` passes.
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> (Vec<u8>, Duration, bool) {
    let started = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (out, started.elapsed(), true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, started.elapsed(), false),
        }
    }
}

#[test]
fn slow_clients_are_cut_off_and_streams_are_not() {
    let server = HttpServer::start(
        &[],
        &[
            ("AISP_HTTP_HEADER_TIMEOUT_S", "1"),
            ("AISP_HTTP_BODY_TIMEOUT_S", "1.5"),
        ],
    );
    // Half a request head, then silence: closed after the header timeout.
    let mut half = TcpStream::connect(server.addr).unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    // An idle connection that never sends a byte: closed too.
    let mut idle = TcpStream::connect(server.addr).unwrap();
    // A body shorter than its Content-Length: answered 408 after the body timeout.
    let mut short = TcpStream::connect(server.addr).unwrap();
    short
        .write_all(
            b"POST /api/status HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{}",
        )
        .unwrap();

    let (got, after, closed) = read_until_closed(&mut half, Duration::from_secs(10));
    assert!(closed && got.is_empty(), "half headers: {got:?}");
    assert!(after < Duration::from_secs(5), "closed after {after:?}");
    let (_, after, closed) = read_until_closed(&mut idle, Duration::from_secs(10));
    assert!(closed && after < Duration::from_secs(5), "idle: {after:?}");
    let (got, after, _) = read_until_closed(&mut short, Duration::from_secs(10));
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"kind\":\"timeout\""), "{text}");
    assert!(after < Duration::from_secs(6), "{after:?}");

    // A well-behaved client is served as before on the same server.
    let mut ok = TcpStream::connect(server.addr).unwrap();
    ok.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (got, _, _) = read_until_closed(&mut ok, Duration::from_secs(10));
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));

    // A response that streams longer than the body timeout is not cut: a
    // 3-second monitor call with progress over MCP's SSE finishes.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = reqwest::Client::new();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let r = client
            .post(server.url("/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .json(&body)
            .send()
            .await
            .unwrap();
        let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
        let _ = r.text().await;
        client
            .post(server.url("/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", &sid)
            .header("MCP-Protocol-Version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await
            .unwrap();
        let started = Instant::now();
        let r = client
            .post(server.url("/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", &sid)
            .header("MCP-Protocol-Version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "aisp_system_monitor", "arguments": {"duration_s": 2.5, "interval_ms": 500},
                "_meta": {"progressToken": "p1"}}}))
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        assert!(started.elapsed() >= Duration::from_secs(2), "{text}");
        assert!(text.contains("\"samples\""), "{text}");

        // Closing the session: 204, which the SDKs count as success.
        let r = client
            .delete(server.url("/mcp"))
            .header("Mcp-Session-Id", &sid)
            .header("MCP-Protocol-Version", "2025-06-18")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
    });
}

#[test]
fn many_concurrent_calls_queue_behind_the_limits_without_errors() {
    // Two connections and one file-reading slot: 24 concurrent profile calls
    // wait their turn (in the listen backlog, then in the pool) and all succeed.
    let server = HttpServer::start(
        &[],
        &[
            ("AISP_HTTP_MAX_CONNECTIONS", "2"),
            ("AISP_HEAVY_CALLS", "1"),
        ],
    );
    let path = data("mock.sqlite").display().to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut calls = Vec::new();
        for i in 0..24 {
            let url = server.url("/api/profile/kernels");
            let body = json!({"path": path, "limit": i + 1});
            calls.push(tokio::spawn(async move {
                // A fresh client per call: one connection each.
                let r = reqwest::Client::new()
                    .post(url)
                    .json(&body)
                    .send()
                    .await
                    .expect("the connection is served, not refused");
                (r.status().as_u16(), r.json::<Value>().await.unwrap())
            }));
        }
        for (i, c) in calls.into_iter().enumerate() {
            let (status, v) = c.await.unwrap();
            assert_eq!(status, 200, "call {i}: {v}");
            assert!(v["rows"].as_array().unwrap().len() <= i + 1, "{v}");
        }
    });
}

#[test]
fn sigterm_stops_an_idle_server_at_once() {
    let mut server = HttpServer::start(&[], &[]);
    // Served something first, so the runtime and its threads are up.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let _ = read_until_closed(&mut s, Duration::from_secs(5));
    let pid = server.child.id() as i32;
    let started = Instant::now();
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = loop {
        if let Some(st) = server.child.try_wait().unwrap() {
            break st;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "still running");
        std::thread::sleep(Duration::from_millis(2));
    };
    let took = started.elapsed();
    assert!(status.success(), "{status:?}");
    // The goal is 250 ms; the bound leaves room for a loaded 2-core CI machine.
    assert!(took < Duration::from_millis(1000), "exit took {took:?}");
    eprintln!("SIGTERM to exit: {took:?}");
}

/// Peak resident memory of a process (VmHWM), in MiB.
fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn api(client: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let r = client
        .post(url)
        .json(&body)
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("answered within 20 s");
    let code = r.status().as_u16();
    (code, r.json().await.unwrap_or(Value::Null))
}

#[test]
fn a_flood_of_jobs_is_capped_and_control_calls_still_answer() {
    let server = HttpServer::start(&[], &[]);
    rt().block_on(async {
        let client = reqwest::Client::new();
        let (mut accepted, mut refused) = (Vec::new(), Vec::new());
        for _ in 0..40 {
            let (code, v) = api(
                &client,
                server.url("/api/system/monitor"),
                json!({"duration_s": 60, "interval_ms": 1000, "async": true}),
            )
            .await;
            match code {
                200 => accepted.push(v["job_id"].as_str().unwrap().to_string()),
                _ => refused.push((code, v)),
            }
        }
        assert_eq!(accepted.len(), 32, "the default cap: {refused:?}");
        // A full queue is not bad input: `busy` (retry later), HTTP 429 with Retry-After.
        for (code, v) in &refused {
            assert_eq!(*code, 429, "{v}");
            assert_eq!(v["error"]["kind"], "busy", "{v}");
        }
        let r = client
            .post(server.url("/api/system/monitor"))
            .json(&json!({"duration_s": 60, "async": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 429);
        assert_eq!(
            r.headers().get("retry-after").and_then(|v| v.to_str().ok()),
            Some("5")
        );
        let e = &refused[0].1["error"];
        assert!(e["message"].as_str().unwrap().contains("32"), "{e}");
        assert!(e["hint"].as_str().unwrap().contains("max_jobs"), "{e}");
        assert!(
            e["hint"].as_str().unwrap().contains("aisp_job_cancel"),
            "{e}"
        );
        let t = Instant::now();
        let (code, _) = api(&client, server.url("/api/status"), json!({})).await;
        assert_eq!(code, 200);
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        for id in &accepted {
            let (code, v) = api(
                &client,
                server.url("/api/job/cancel"),
                json!({"job_id": id}),
            )
            .await;
            assert_eq!(code, 200, "{v}");
        }
        // Cancelled jobs free their places.
        let free = common::eventually(Duration::from_secs(20), || {
            let client = client.clone();
            let url = server.url("/api/system/monitor");
            async move {
                let (code, v) = api(&client, url, json!({"duration_s": 1, "async": true})).await;
                (code == 200).then_some(v)
            }
        })
        .await;
        assert!(free.is_some());
    });
}

#[test]
fn control_calls_answer_while_the_blocking_pool_is_full() {
    // More jobs than tokio's 512 blocking threads: every thread is taken.
    let server = HttpServer::start(&[], &[("AISP_MAX_JOBS", "600")]);
    rt().block_on(async {
        let client = reqwest::Client::new();
        let mut ids = Vec::new();
        for _ in 0..540 {
            let (code, v) = api(
                &client,
                server.url("/api/system/monitor"),
                json!({"duration_s": 120, "interval_ms": 1000, "async": true}),
            )
            .await;
            assert_eq!(code, 200, "{v}");
            ids.push(v["job_id"].as_str().unwrap().to_string());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        for (path, body) in [
            ("/api/status", json!({})),
            ("/api/job/list", json!({"limit": 5})),
            ("/api/job/status", json!({"job_id": ids[0]})),
            ("/api/list_domains", json!({})),
            ("/api/job/cancel", json!({"job_id": ids[1]})),
        ] {
            let t = Instant::now();
            let (code, v) = api(&client, server.url(path), body).await;
            let took = t.elapsed();
            assert_eq!(code, 200, "{path}: {v}");
            assert!(took < Duration::from_secs(1), "{path} took {took:?}");
        }
        for id in &ids {
            let _ = api(
                &client,
                server.url("/api/job/cancel"),
                json!({"job_id": id}),
            )
            .await;
        }
    });
}

/// A sparse file of `size` bytes that starts with `head`.
fn sparse(path: &std::path::Path, head: &[u8], size: u64) {
    let f = std::fs::File::create(path).unwrap();
    f.set_len(size).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(head, 0).unwrap();
}

#[test]
fn trace_inputs_are_sniffed_and_every_reader_waits_for_a_slot() {
    let dir = tempfile::tempdir().unwrap();
    let not_json = dir.path().join("not_json.json");
    sparse(&not_json, b"x", 512 << 20);
    let json_head = dir.path().join("json_head.json");
    sparse(&json_head, b"{\"traceEvents\": [", 256 << 20);
    let server = HttpServer::start(&[], &[("AISP_HEAVY_CALLS", "1")]);
    let pid = server.child.id();
    rt().block_on(async {
        let client = reqwest::Client::new();
        // Byte 0 is not JSON: refused before the file is read.
        let calls: Vec<_> = (0..4)
            .map(|i| {
                let client = client.clone();
                let (route, body) = if i % 2 == 0 {
                    ("/api/profile/compile", json!({"trace": not_json}))
                } else {
                    ("/api/profile/trace", json!({"paths": [not_json]}))
                };
                let url = server.url(route);
                tokio::spawn(async move { api(&client, url, body).await })
            })
            .collect();
        for c in calls {
            let (code, v) = c.await.unwrap();
            assert_eq!(code, 400, "{v}");
            assert!(
                v["error"]["message"].as_str().unwrap().contains("JSON"),
                "{v}"
            );
        }
        let after_sniff = peak_rss_mib(pid);
        assert!(
            after_sniff < 200,
            "peak RSS {after_sniff} MiB after refusing 4 × 512 MiB"
        );
        // JSON that must be read: one at a time (AISP_HEAVY_CALLS=1), whatever the tool.
        let calls: Vec<_> = [
            "/api/profile/compile",
            "/api/profile/trace",
            "/api/profile/compile",
        ]
        .into_iter()
        .map(|route| {
            let client = client.clone();
            let url = server.url(route);
            let path = json_head.display().to_string();
            tokio::spawn(async move {
                let body = if route.ends_with("trace") {
                    json!({"paths": [path]})
                } else {
                    json!({"trace": path})
                };
                api(&client, url, body).await
            })
        })
        .collect();
        for c in calls {
            let (code, v) = c.await.unwrap();
            assert_eq!(code, 400, "{v}");
        }
    });
    let peak = peak_rss_mib(pid);
    assert!(peak < 450, "peak RSS {peak} MiB: 3 × 256 MiB read at once");
}

/// Send a request head (no body) and read what comes back within `limit`.
fn head_only(addr: std::net::SocketAddr, head: &str, limit: Duration) -> (String, Duration) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(b"{\"a\": ").unwrap();
    let started = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !out.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    (String::from_utf8_lossy(&out).to_string(), started.elapsed())
}

#[test]
fn guards_run_before_a_body_is_read_and_json_bodies_are_small() {
    let server = HttpServer::start(&["--token", "s3cret"], &[("AISP_HTTP_BODY_TIMEOUT_S", "5")]);
    for (what, head) in [
        (
            "no token",
            "POST /api/status HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 60000000\r\n\r\n",
        ),
        (
            "no token, MCP",
            "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 60000000\r\n\r\n",
        ),
        (
            "foreign host",
            "POST /api/status HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer s3cret\r\nContent-Length: 60000000\r\n\r\n",
        ),
        (
            "foreign origin",
            "POST /dashboard/upload?name=a.sqlite HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.example\r\nAuthorization: Bearer s3cret\r\nContent-Length: 60000000\r\n\r\n",
        ),
    ] {
        let (got, took) = head_only(server.addr, head, Duration::from_secs(8));
        assert!(
            got.starts_with("HTTP/1.1 401") || got.starts_with("HTTP/1.1 403"),
            "{what}: {got:?} after {took:?}"
        );
        assert!(
            took < Duration::from_secs(2),
            "{what}: answered after {took:?}"
        );
    }
    // 8 unauthenticated 60 MB bodies at once: none is held in memory.
    let pid = server.child.id();
    let body = vec![b' '; 60_000_000];
    rt().block_on(async {
        let calls: Vec<_> = (0..8)
            .map(|_| {
                let url = server.url("/api/status");
                let body = body.clone();
                tokio::spawn(async move {
                    reqwest::Client::new()
                        .post(url)
                        .body(body)
                        .send()
                        .await
                        .map(|r| r.status().as_u16())
                        .unwrap_or(0)
                })
            })
            .collect();
        for c in calls {
            let code = c.await.unwrap();
            assert!(code == 401 || code == 0, "{code}");
        }
    });
    // Authenticated: /api takes small JSON bodies only, refused from the announced length.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(
        b"POST /api/status HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer s3cret\r\n\
          Content-Type: application/json\r\nConnection: close\r\nContent-Length: 5242900\r\n\r\n{\"pad\": \"xxxx",
    )
    .unwrap();
    let (got, took, _) = read_until_closed(&mut s, Duration::from_secs(8));
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("max_body_mib"), "{text}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let peak = peak_rss_mib(pid);
    assert!(peak < 200, "peak RSS {peak} MiB");
}

async fn mcp_initialize(client: &reqwest::Client, url: &str) -> (u16, Option<String>, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = client
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    let code = r.status().as_u16();
    let sid = r
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    (code, sid, r.text().await.unwrap_or_default())
}

#[test]
fn mcp_sessions_are_capped_and_idle_ones_closed() {
    let server = HttpServer::start(
        &[],
        &[
            ("AISP_HTTP_MAX_MCP_SESSIONS", "4"),
            ("AISP_HTTP_MCP_SESSION_IDLE_S", "2"),
        ],
    );
    rt().block_on(async {
        let client = reqwest::Client::new();
        let url = server.url("/mcp");
        for i in 0..4 {
            let (code, sid, text) = mcp_initialize(&client, &url).await;
            assert_eq!(code, 200, "session {i}: {text}");
            assert!(sid.is_some());
        }
        let (code, _, text) = mcp_initialize(&client, &url).await;
        assert_eq!(code, 503, "{text}");
        assert!(text.contains("max_mcp_sessions"), "{text}");
        // Idle sessions close after 2 s; then there is room again.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let (code, _, text) = mcp_initialize(&client, &url).await;
        assert_eq!(code, 200, "{text}");
    });
}

#[test]
fn idle_connections_do_not_starve_new_requests() {
    let server = HttpServer::start(&[], &[("AISP_HTTP_MAX_CONNECTIONS", "32")]);
    // Past the connection limit, every one silent.
    let idle: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    // Idle a while (a connection that has sent nothing is given a second to do so).
    std::thread::sleep(Duration::from_millis(1500));
    let started = Instant::now();
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (got, _, _) = read_until_closed(&mut s, Duration::from_secs(15));
    let took = started.elapsed();
    assert!(
        String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"),
        "{got:?}"
    );
    assert!(
        took < Duration::from_secs(1),
        "a real request waited {took:?}"
    );
    drop(idle);
}
