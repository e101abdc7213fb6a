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

    /// For GETs that read files (a browser sends them cross-site without
    /// asking, e.g. from an `<img>` on another page): the bearer token (when
    /// one is configured, [`Policy::check`] has verified it), or evidence that
    /// the request comes from a page of this server: `Sec-Fetch-Site:
    /// same-origin` (or `none`, a typed URL), an allowed `Origin`, or a
    /// `Referer` from an allowed origin.
    pub(crate) fn check_same_origin(&self, headers: &HeaderMap) -> Result<(), Box<Response>> {
        if self.token.is_some() {
            return Ok(());
        }
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let same = match header("sec-fetch-site") {
            Some(site) => matches!(site, "same-origin" | "none"),
            None => {
                header("origin").is_some_and(|o| self.origin_allowed(o))
                    || header("referer")
                        .and_then(origin_of)
                        .is_some_and(|o| self.origin_allowed(&o))
            }
        };
        if same {
            return Ok(());
        }
        Err(Box::new(denied(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this request reads a file and does not come from a page of this server",
            "Open it from the dashboard, send `Sec-Fetch-Site: same-origin` or an allowed Origin, or start aisp \
             with a token (AISP_TOKEN) and send it as `Authorization: Bearer <token>`.",
        )))
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

/// `scheme://host[:port]` of a URL (a Referer), if it has one.
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.is_empty() || authority.contains(['@', '\\']) {
        return None;
    }
    Some(format!("{scheme}://{authority}"))
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
    let limits = app.config.http;
    let mut sessions = LocalSessionManager::default();
    // A session with no request for this long is closed (and leaves the table).
    sessions.session_config.keep_alive = Some(limits.mcp_session_idle);
    let sessions = Arc::new(sessions);
    let mcp = StreamableHttpService::new(
        move || Ok(server.new_session()),
        Arc::clone(&sessions),
        mcp_config,
    );
    let policy = Arc::new(policy);
    let mcp = Router::new()
        .fallback_service(mcp)
        .layer(middleware::from_fn(session_delete_status))
        .layer(middleware::from_fn_with_state(
            SessionCap {
                sessions,
                max: limits.max_mcp_sessions.max(1),
            },
            session_cap,
        ));
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

/// What the body guard needs: the access policy and the limits.
#[derive(Clone)]
struct BodyGuard {
    policy: Arc<Policy>,
    timeout: std::time::Duration,
    max_body_bytes: usize,
}

/// The route whose body is a file, streamed to disk by its handler under its own cap.
const UPLOAD_ROUTE: &str = "/dashboard/upload";

/// In front of everything: a request that carries a body is checked against
/// the policy (Host, Origin, token) *before* a byte of the body is read, so
/// an unauthenticated client cannot make the server buffer anything. Then
/// the body is read within the body timeout and under the JSON routes' cap
/// (`http.max_body_mib`; the upload route streams its body to disk under its
/// own cap instead), so a client that promises more than it sends cannot
/// hold a connection and a task. Responses are not limited: progress and SSE
/// streams last as long as the work.
async fn body_guard(State(guard): State<BodyGuard>, request: Request, next: Next) -> Response {
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
    if let Err(resp) = guard.policy.check(request.headers()) {
        return *resp;
    }
    if request.uri().path() == UPLOAD_ROUTE {
        return next.run(request).await;
    }
    let max = guard.max_body_bytes;
    let too_large = || {
        denied(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_input",
            &format!("the request body is larger than {} KiB", max >> 10),
            "Send smaller arguments: files are passed by path, not by content (the limit is `http.max_body_mib`, \
             AISP_HTTP_MAX_BODY_MIB).",
        )
    };
    // Refused at once when the length is announced.
    if request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > max as u64)
    {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, max);
    match tokio::time::timeout(guard.timeout, limited.collect()).await {
        Ok(Ok(collected)) => {
            let request = Request::from_parts(parts, axum::body::Body::from(collected.to_bytes()));
            next.run(request).await
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => too_large(),
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
                guard.timeout.as_secs_f64()
            ),
            "Send the whole body at once; the limit is `http.body_timeout_s` (AISP_HTTP_BODY_TIMEOUT_S).",
        ),
    }
}

/// The MCP session table and its cap.
#[derive(Clone)]
struct SessionCap {
    sessions: Arc<LocalSessionManager>,
    max: usize,
}

/// A new MCP session (an `initialize` without a session id) is refused with
/// 503 while `http.max_mcp_sessions` sessions are open; idle sessions close
/// after `http.mcp_session_idle_s` and make room.
async fn session_cap(State(cap): State<SessionCap>, request: Request, next: Next) -> Response {
    if request.method() != axum::http::Method::POST
        || request.headers().contains_key("mcp-session-id")
    {
        return next.run(request).await;
    }
    // The body guard has read the body already: looking at it costs nothing.
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let initialize = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .is_some_and(|v| v.get("method").and_then(Value::as_str) == Some("initialize"));
    if initialize {
        let open = cap.sessions.sessions.read().await.len();
        if open >= cap.max {
            let mut resp = denied(
                StatusCode::SERVICE_UNAVAILABLE,
                "unsupported",
                &format!(
                    "{open} MCP sessions are open, the most this server keeps ({})",
                    cap.max
                ),
                "Close sessions you no longer use (HTTP DELETE /mcp with their Mcp-Session-Id), wait for idle ones to \
                 close (`http.mcp_session_idle_s`), or raise `http.max_mcp_sessions` (AISP_HTTP_MAX_MCP_SESSIONS).",
            );
            resp.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
            return resp;
        }
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
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
/// are served at once. At the limit the connection idle the longest (no
/// request in flight: a keep-alive connection between requests, or one that
/// has sent nothing yet) is closed to make room, so idle sockets cannot keep
/// real requests waiting; with none idle, new connections wait in the listen
/// backlog, not refused.
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
    let guard = BodyGuard {
        policy: Arc::new(policy.clone()),
        timeout: limits.body_timeout,
        max_body_bytes: limits.max_body_bytes,
    };
    let app_router = router(app, policy, shutdown.clone())
        .layer(middleware::from_fn_with_state(guard, body_guard));
    let max_connections = limits.max_connections.clamp(1, 1 << 20);
    let slots = Arc::new(tokio::sync::Semaphore::new(max_connections));
    let conns = Arc::new(Connections::default());
    loop {
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
        let permit = match Arc::clone(&slots).try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                // Full: close the connection idle the longest; with none idle, wait
                // for one to end or to fall idle.
                let mut got = None;
                let mut stop = false;
                while got.is_none() && !stop {
                    conns.evict_oldest_idle();
                    tokio::select! {
                        p = Arc::clone(&slots).acquire_owned() => match p {
                            Ok(p) => got = Some(p),
                            Err(_) => stop = true,
                        },
                        _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
                        _ = shutdown.cancelled() => stop = true,
                    }
                }
                match got {
                    Some(p) => p,
                    None => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let (id, evicted, flags) = conns.open();
        let stream = WatchedIo {
            inner: stream,
            flags,
        };
        let service = {
            let router = app_router.clone();
            let conns = Arc::clone(&conns);
            hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let busy = conns.begin(id);
                let mut router = router.clone();
                async move {
                    std::future::poll_fn(|cx| {
                        tower::Service::<Request<hyper::body::Incoming>>::poll_ready(
                            &mut router,
                            cx,
                        )
                    })
                    .await?;
                    let resp = tower::Service::call(&mut router, req).await?;
                    // Busy until the response body is sent (or dropped): streams count.
                    Ok::<_, std::convert::Infallible>(resp.map(|b| {
                        use http_body_util::BodyExt;
                        axum::body::Body::new(b.map_frame(move |f| {
                            let _busy = &busy;
                            f
                        }))
                    }))
                }
            })
        };
        let shutdown = shutdown.clone();
        let conns = Arc::clone(&conns);
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
                _ = evicted.cancelled() => {
                    // Idle: closes at once (a request that just began is finished first).
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
                _ = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn).await;
                }
            }
            conns.close(id);
        });
    }
    drop(listener);
    // Every slot back means every connection closed: idle ones close at once,
    // busy ones get a short grace.
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, slots.acquire_many(max_connections as u32)).await;
    Ok(())
}

/// How long a connection must have been idle after a response before it may
/// be closed for a new one.
const MIN_IDLE: std::time::Duration = std::time::Duration::from_millis(100);
/// How long a connection that has sent nothing yet must have been silent.
const MIN_IDLE_NEW: std::time::Duration = std::time::Duration::from_secs(1);

/// The open connections: how many requests each has in flight and since
/// when it has had none, for closing the longest-idle one at the limit.
#[derive(Default)]
struct Connections {
    next: std::sync::atomic::AtomicU64,
    table: std::sync::Mutex<std::collections::HashMap<u64, ConnState>>,
}

struct ConnState {
    in_flight: usize,
    /// It has had a request (a keep-alive connection between requests).
    served: bool,
    idle_since: std::time::Instant,
    evict: CancellationToken,
    flags: Arc<ReadFlags>,
}

/// What the connection's reads have seen since its last response.
#[derive(Default)]
struct ReadFlags {
    /// Bytes of a next request arrived (its head may not be parsed yet).
    got_bytes: std::sync::atomic::AtomicBool,
    /// A read found nothing to read: the client is silent.
    waiting: std::sync::atomic::AtomicBool,
}

impl ReadFlags {
    /// Idle: the client is silent, not in the middle of sending a request.
    fn silent(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.waiting.load(Relaxed) && !self.got_bytes.load(Relaxed)
    }
}

/// The connection's socket, noting whether the client is sending or silent.
struct WatchedIo {
    inner: tokio::net::TcpStream,
    flags: Arc<ReadFlags>,
}

impl tokio::io::AsyncRead for WatchedIo {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::sync::atomic::Ordering::Relaxed;
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        match &polled {
            std::task::Poll::Ready(Ok(())) if buf.filled().len() > before => {
                self.flags.got_bytes.store(true, Relaxed);
                self.flags.waiting.store(false, Relaxed);
            }
            std::task::Poll::Pending => self.flags.waiting.store(true, Relaxed),
            _ => {}
        }
        polled
    }
}

impl tokio::io::AsyncWrite for WatchedIo {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request in flight on a connection; ends when dropped.
struct Busy {
    conns: Arc<Connections>,
    id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(c) = self.conns.lock().get_mut(&self.id) {
            c.in_flight = c.in_flight.saturating_sub(1);
            if c.in_flight == 0 {
                c.idle_since = std::time::Instant::now();
                // The next bytes begin the next request.
                c.flags
                    .got_bytes
                    .store(false, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

impl Connections {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, ConnState>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new connection; its token asks it to close. It counts as idle once a
    /// read found the client silent (a request already on its way is not).
    fn open(&self) -> (u64, CancellationToken, Arc<ReadFlags>) {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let evict = CancellationToken::new();
        let flags = Arc::new(ReadFlags::default());
        self.lock().insert(
            id,
            ConnState {
                in_flight: 0,
                served: false,
                idle_since: std::time::Instant::now(),
                evict: evict.clone(),
                flags: Arc::clone(&flags),
            },
        );
        (id, evict, flags)
    }

    fn begin(self: &Arc<Self>, id: u64) -> Busy {
        if let Some(c) = self.lock().get_mut(&id) {
            c.in_flight += 1;
            c.served = true;
        }
        Busy {
            conns: Arc::clone(self),
            id,
        }
    }

    fn close(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Ask the connection idle the longest to close (unless one is closing
    /// already); false when none is idle.
    fn evict_oldest_idle(&self) -> bool {
        let table = self.lock();
        if table.values().any(|c| c.evict.is_cancelled()) {
            return true;
        }
        let oldest = table
            .values()
            .filter(|c| {
                c.in_flight == 0
                    && c.flags.silent()
                    && !c.evict.is_cancelled()
                    // The last response has surely left (hyper may still be flushing
                    // it), and a new connection had time to send its request.
                    && c.idle_since.elapsed() >= if c.served { MIN_IDLE } else { MIN_IDLE_NEW }
            })
            .min_by_key(|c| c.idle_since);
        match oldest {
            Some(c) => {
                c.evict.cancel();
                true
            }
            None => false,
        }
    }
}

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
    let mut response = (status, axum::Json(err.to_json())).into_response();
    if let Some(s) = err.kind.retry_after_s() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, axum::http::HeaderValue::from(s));
    }
    response
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
