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
