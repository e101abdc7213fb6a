//! Streamable HTTP: MCP at `/mcp` and the HTTP API at `POST /api/<domain>/<op>`
//! (`POST /api/<op>` for short-named operations), on one port, behind one
//! policy: Host allow-list (DNS-rebinding guard), Origin allow-list, and a
//! bearer token when one is configured (required off loopback).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{AispServer, ServeError};
use crate::app::AppState;
use crate::dispatch::{self, CallOptions};
use crate::error::OpError;
use crate::registry;

/// How the HTTP server is exposed.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub bind: SocketAddr,
    /// Extra `Host` values to accept besides loopback names and the bind address.
    pub allowed_hosts: Vec<String>,
    /// Extra browser origins to accept besides `http://localhost:*` and `http://127.0.0.1:*`.
    pub allowed_origins: Vec<String>,
}

/// The access policy shared by `/mcp` and `/api`.
#[derive(Debug, Clone)]
pub struct Policy {
    token: Option<String>,
    hosts: Vec<String>,
    origins: Vec<String>,
}

impl Policy {
    pub fn new(opts: &HttpOptions, token: Option<String>) -> Result<Policy, ServeError> {
        let loopback = opts.bind.ip().is_loopback();
        if !loopback && token.is_none() {
            return Err(ServeError::Config(format!(
                "refusing to serve on {} without a token: set AISP_TOKEN or pass --token when binding off loopback",
                opts.bind
            )));
        }
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        if !opts.bind.ip().is_unspecified() {
            hosts.push(host_string(opts.bind.ip()));
        }
        hosts.extend(opts.allowed_hosts.iter().cloned());
        let mut origins: Vec<String> = vec![
            "http://localhost:*".into(),
            "http://127.0.0.1:*".into(),
            "http://[::1]:*".into(),
        ];
        origins.extend(opts.allowed_origins.iter().cloned());
        Ok(Policy {
            token,
            hosts,
            origins,
        })
    }

    /// Check one request's headers; `Err` is the response to send instead.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), Box<Response>> {
        self.check_host_origin(headers)?;
        self.check_token(headers)
    }

    /// The DNS-rebinding and cross-origin guards alone (the dashboard's page
    /// shells, which hold no data, are served without the token).
    pub(crate) fn check_host_origin(&self, headers: &HeaderMap) -> Result<(), Box<Response>> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !self.host_allowed(host) {
            return Err(Box::new(denied(
                StatusCode::FORBIDDEN,
                "forbidden",
                &format!("Host header `{host}` is not allowed"),
                "Connect through localhost, or start aisp with --allowed-host for this name.",
            )));
        }
        if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok())
            && !self.origin_allowed(origin)
        {
            return Err(Box::new(denied(
                StatusCode::FORBIDDEN,
                "forbidden",
                &format!("Origin `{origin}` is not allowed"),
                "Browsers may call aisp only from an allowed origin; start aisp with --allowed-origin to add one.",
            )));
        }
        Ok(())
    }

    fn check_token(&self, headers: &HeaderMap) -> Result<(), Box<Response>> {
        if let Some(expected) = &self.token {
            let given = headers
                .get(header::AUTHORIZATION)
                .and_then(|a| a.to_str().ok())
                .and_then(|a| {
                    a.strip_prefix("Bearer ")
                        .or_else(|| a.strip_prefix("bearer "))
                })
                .unwrap_or("");
            if !constant_time_eq(given.as_bytes(), expected.as_bytes()) {
                let mut resp = denied(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "missing or wrong bearer token",
                    "Send `Authorization: Bearer <token>` with the token aisp was started with (AISP_TOKEN or --token).",
                );
                resp.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
                return Err(Box::new(resp));
            }
        }
        Ok(())
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = strip_port(host);
        self.hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host) || h.eq_ignore_ascii_case(name))
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        self.origins
            .iter()
            .any(|allowed| origin_matches(allowed, origin))
    }
}

fn host_string(ip: IpAddr) -> String {
    ip.to_string()
}

/// `host:port` → `host`; `[::1]:8765` → `::1`.
fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) && !name.contains(':') => {
            name
        }
        _ => host,
    }
}

/// `allowed` is `scheme://host` with `:*` (any port), `:N`, or no port (default port).
fn origin_matches(allowed: &str, origin: &str) -> bool {
    if allowed == origin {
        return true;
    }
    if let Some(prefix) = allowed.strip_suffix(":*") {
        return origin.strip_prefix(prefix).is_some_and(|rest| {
            rest.is_empty()
                || (rest.starts_with(':') && rest[1..].chars().all(|c| c.is_ascii_digit()))
        });
    }
    false
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn denied(status: StatusCode, code: &str, message: &str, hint: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"kind": code, "message": message, "hint": hint}})),
    )
        .into_response()
}

pub(crate) async fn guard(
    State(policy): State<Arc<Policy>>,
    request: Request,
    next: Next,
) -> Response {
    match policy.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(resp) => *resp,
    }
}

/// The router: `/mcp`, `/api/...`, `/healthz`, all behind the policy.
pub fn router(app: Arc<AppState>, policy: Policy, shutdown: CancellationToken) -> Router {
    let server = AispServer::for_http(Arc::clone(&app));
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(policy.hosts.clone())
        .with_allowed_origins(policy.origins.clone())
        .enforce_origin_validation()
        .with_cancellation_token(shutdown);
    let mcp = StreamableHttpService::new(
        move || Ok(server.new_session()),
        LocalSessionManager::default().into(),
        mcp_config,
    );
    let policy = Arc::new(policy);
    let mcp = Router::new()
        .fallback_service(mcp)
        .layer(middleware::from_fn(session_delete_status));
    Router::new()
        .nest_service("/mcp", mcp)
        .route("/api/tools", get(list_tools))
        .route("/api/{op}", post(call_short))
        .route("/api/{domain}/{op}", post(call_op))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(Arc::clone(&app))
        .layer(middleware::from_fn_with_state(Arc::clone(&policy), guard))
        // The dashboard guards its own routes: page shells without the token.
        .merge(crate::dashboard::router(app, policy))
}

/// Read a request's body within the body timeout (and under a size cap), so a
/// client that promises more than it sends cannot hold a connection and a
/// task. Responses are not limited: progress and SSE streams last as long as
/// the work.
async fn body_deadline(State(limits): State<BodyLimits>, request: Request, next: Next) -> Response {
    use http_body_util::BodyExt;
    let has_body = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() != "0")
        || request.headers().contains_key(header::TRANSFER_ENCODING);
    if !has_body {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, limits.max_body_bytes);
    match tokio::time::timeout(limits.timeout, limited.collect()).await {
        Ok(Ok(collected)) => {
            let request = Request::from_parts(parts, axum::body::Body::from(collected.to_bytes()));
            next.run(request).await
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => denied(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_input",
            &format!(
                "the request body is larger than {} MiB",
                limits.max_body_bytes >> 20
            ),
            "Send smaller arguments; files are passed by path, not by content.",
        ),
        Ok(Err(e)) => denied(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            &format!("the request body could not be read: {e}"),
            "Send the whole body that Content-Length announces.",
        ),
        Err(_) => denied(
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            &format!(
                "the request body did not arrive within {} s",
                limits.timeout.as_secs_f64()
            ),
            "Send the whole body at once; the limit is `http.body_timeout_s` (AISP_HTTP_BODY_TIMEOUT_S).",
        ),
    }
}

#[derive(Debug, Clone, Copy)]
struct BodyLimits {
    timeout: std::time::Duration,
    max_body_bytes: usize,
}

/// rmcp answers a session DELETE with 202; the streamable HTTP spec's clients
/// (the Python SDK among them) expect 200 or 204 and report anything else as
/// a failed termination.
async fn session_delete_status(request: Request, next: Next) -> Response {
    let is_delete = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if is_delete && response.status() == StatusCode::ACCEPTED {
        let (mut parts, _) = response.into_parts();
        parts.status = StatusCode::NO_CONTENT;
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.remove(header::CONTENT_TYPE);
        response = Response::from_parts(parts, axum::body::Body::empty());
    }
    response
}

/// Serve until `shutdown` is cancelled (Ctrl-C or SIGTERM at the CLI).
///
/// The accept loop is our own rather than `axum::serve` because that one
/// exposes neither a header read timeout nor a connection limit: a client
/// that sends half its headers (or nothing) is disconnected after
/// `http.header_timeout_s`, and at most `http.max_connections` connections
/// are served at once (more wait in the listen backlog, not refused).
pub async fn serve(
    app: Arc<AppState>,
    opts: HttpOptions,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let policy = Policy::new(&opts, app.config.token.clone())?;
    app.spawn_gpu_probe();
    let listener = tokio::net::TcpListener::bind(opts.bind)
        .await
        .map_err(|source| ServeError::Bind {
            addr: opts.bind.to_string(),
            source,
        })?;
    let local = listener.local_addr().map_err(ServeError::Http)?;
    tracing::info!(addr = %local, token = policy.token.is_some(), "serving MCP at /mcp and the API at /api");
    // Tests and scripts read the bound address from stderr when binding port 0.
    eprintln!("aisp: listening on http://{local} (dashboard at /, MCP at /mcp, API at /api)");
    let limits = app.config.http;
    let app_router = router(app, policy, shutdown.clone()).layer(middleware::from_fn_with_state(
        BodyLimits {
            timeout: limits.body_timeout,
            max_body_bytes: MAX_BODY_BYTES,
        },
        body_deadline,
    ));
    let max_connections = limits.max_connections.clamp(1, 1 << 20);
    let slots = Arc::new(tokio::sync::Semaphore::new(max_connections));
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&slots).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = shutdown.cancelled() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app_router.clone());
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let io = hyper_util::rt::TokioIo::new(stream);
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let conn = builder.serve_connection(io, service).with_upgrades();
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn).await;
                }
            }
        });
    }
    drop(listener);
    // Every slot back means every connection closed: idle ones close at once,
    // busy ones get a short grace.
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, slots.acquire_many(max_connections as u32)).await;
    Ok(())
}

/// The largest request body read (arguments are JSON; files go by path).
const MAX_BODY_BYTES: usize = 64 << 20;

/// How long shutdown waits for connections that are mid-request.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_millis(150);

async fn list_tools() -> Response {
    let tools: Vec<Value> = registry::tools()
        .iter()
        .map(|t| {
            let s = t.spec();
            json!({
                "tool": t.name,
                "path": s.http_path(),
                "summary": s.summary,
                "needs_gpu": s.needs_gpu,
                "long_running": s.long_running,
                "executes_commands": s.executes_commands,
            })
        })
        .collect();
    axum::Json(json!({ "tools": tools })).into_response()
}

async fn call_short(
    State(app): State<Arc<AppState>>,
    Path(op): Path<String>,
    body: Bytes,
) -> Response {
    let tool = registry::tools()
        .iter()
        .find(|t| t.spec().short && t.spec().name == op);
    call(app, tool, &format!("/api/{op}"), body).await
}

async fn call_op(
    State(app): State<Arc<AppState>>,
    Path((domain, op)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let tool = registry::find_op(&domain, &op).filter(|t| !t.spec().short);
    call(app, tool, &format!("/api/{domain}/{op}"), body).await
}

async fn call(
    app: Arc<AppState>,
    tool: Option<&'static registry::ToolDef>,
    path: &str,
    body: Bytes,
) -> Response {
    let Some(tool) = tool else {
        let hint = match registry::tools().iter().find(|t| {
            let s = t.spec();
            path == format!("/api/{}/{}", s.domain, s.name) || path == format!("/api/{}", s.name)
        }) {
            Some(t) => format!("This operation is served at {}.", t.spec().http_path()),
            None => "GET /api/tools lists every route.".to_string(),
        };
        return error_response(OpError::not_found(format!("no operation at {path}"), hint));
    };
    let args: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Object(Default::default())
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                return error_response(OpError::invalid_input(
                    format!("the request body is not valid JSON: {e}"),
                    "Send the operation's arguments as a JSON object (Content-Type: application/json).",
                ));
            }
        }
    };
    let opts = CallOptions::default();
    // A client that hangs up cancels the work: dropping this future drops the guard.
    let _cancel_on_drop = opts.cancel.clone().drop_guard();
    match dispatch::invoke(&app, tool, args, opts).await {
        Ok(value) => (StatusCode::OK, axum::Json(value)).into_response(),
        Err(err) => error_response(err),
    }
}

fn error_response(err: OpError) -> Response {
    let status =
        StatusCode::from_u16(err.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(err.to_json())).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(bind: &str) -> HttpOptions {
        HttpOptions {
            bind: bind.parse().unwrap(),
            allowed_hosts: vec![],
            allowed_origins: vec![],
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn loopback_needs_no_token_but_other_addresses_do() {
        assert!(Policy::new(&opts("127.0.0.1:8765"), None).is_ok());
        assert!(Policy::new(&opts("0.0.0.0:8765"), None).is_err());
        assert!(Policy::new(&opts("0.0.0.0:8765"), Some("t".into())).is_ok());
    }

    #[test]
    fn hosts_origins_and_tokens_are_checked() {
        let p = Policy::new(&opts("127.0.0.1:8765"), Some("s3cret".into())).unwrap();
        let ok = |h: &[(&str, &str)]| p.check(&headers(h)).is_ok();
        let auth = ("authorization", "Bearer s3cret");
        assert!(ok(&[("host", "127.0.0.1:8765"), auth]));
        assert!(ok(&[("host", "localhost:8765"), auth]));
        assert!(ok(&[("host", "[::1]:8765"), auth]));
        assert!(!ok(&[("host", "evil.example:8765"), auth]));
        assert!(!ok(&[("host", "localhost:8765")]));
        assert!(!ok(&[
            ("host", "localhost:8765"),
            ("authorization", "Bearer wrong")
        ]));
        assert!(ok(&[
            ("host", "localhost:8765"),
            ("origin", "http://localhost:3000"),
            auth
        ]));
        assert!(!ok(&[
            ("host", "localhost:8765"),
            ("origin", "http://evil.example"),
            auth
        ]));
        assert!(!ok(&[
            ("host", "localhost:8765"),
            ("origin", "http://localhost.evil.example"),
            auth
        ]));
    }

    #[test]
    fn ports_are_stripped_correctly() {
        assert_eq!(strip_port("localhost:80"), "localhost");
        assert_eq!(strip_port("[::1]:80"), "::1");
        assert_eq!(strip_port("::1"), "::1");
        assert_eq!(strip_port("example.com"), "example.com");
    }
}
