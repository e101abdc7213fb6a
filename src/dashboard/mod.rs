//! The dashboard: a web UI served by `aisp serve --transport http` at `/`,
//! beside `/mcp` and `/api`, behind the same policy.
//!
//! There is no second list of operations: the pages call the registry's HTTP
//! API (`POST /api/<domain>/<op>`, `GET /api/tools`) and two thin views over
//! the registry (`GET /api/tools/<tool>` for a tool's input schema, and the
//! profile page's sections, rendered here from operations called through
//! [`dispatch`]). Tool forms are generated in the browser from each input
//! schema, so a new operation appears without page code.
//!
//! Page *shells* (HTML and the embedded scripts, no data) pass the Host/Origin
//! guards without the bearer token, so that a token-protected server can show
//! its login page; every request that reads or does anything carries the
//! token (kept in the browser's `sessionStorage` only) and is checked by the
//! same [`Policy`] as `/api`.

mod assets;
mod benchmarks;
mod compare;
mod html;
mod overview;
mod planner;
mod profile_page;

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::app::AppState;
use crate::dispatch::{self, CallOptions};
use crate::error::OpError;
use crate::registry;
use crate::server::http::Policy;

/// The largest export the upload form accepts (the server keeps it under
/// `$AISP_HOME/uploads/`): the HTTP server's request-body limit. Lowered (or,
/// where the body limit allows, raised) by `AISP_UPLOAD_MAX_MB`. Exports on the
/// server's own disk are opened by path, whatever their size.
pub const DEFAULT_UPLOAD_MAX_BYTES: u64 = 64 << 20;

/// The dashboard's routes, each with its guard.
pub fn router(app: Arc<AppState>, policy: Arc<Policy>) -> Router {
    let shells = Router::new()
        .route("/", get(|| async { assets::page(assets::Page::Home) }))
        .route(
            "/profiles",
            get(|| async { assets::page(assets::Page::Profiles) }),
        )
        .route(
            "/compare",
            get(|| async { assets::page(assets::Page::Compare) }),
        )
        .route(
            "/benchmarks",
            get(|| async { assets::page(assets::Page::Benchmarks) }),
        )
        .route(
            "/planner",
            get(|| async { assets::page(assets::Page::Planner) }),
        )
        .route("/ask", get(|| async { assets::page(assets::Page::Ask) }))
        .route(
            "/tools",
            get(|| async { assets::page(assets::Page::Tools) }),
        )
        .route(
            "/tools/{tool}",
            get(|| async { assets::page(assets::Page::Tool) }),
        )
        .route("/login", get(login))
        .route("/assets/{file}", get(asset))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&policy),
            shell_guard,
        ));
    // GETs that read files: a browser sends them cross-site without asking, so
    // they need the token or a sign that the dashboard itself asks.
    let reads = Router::new()
        .route("/dashboard/profile/{section}", get(profile_section))
        .route("/dashboard/download/{file}", get(download))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&policy),
            same_origin_guard,
        ));
    let data = Router::new()
        .route("/api/tools/{tool}", get(tool_schema))
        .route("/dashboard/view/{view}", post(view))
        .route(
            "/dashboard/upload",
            post(upload).layer(DefaultBodyLimit::disable()),
        )
        .merge(reads)
        .with_state(app)
        .layer(middleware::from_fn_with_state(
            policy,
            crate::server::http::guard,
        ));
    shells.merge(data)
}

async fn same_origin_guard(
    State(policy): State<Arc<Policy>>,
    request: Request,
    next: Next,
) -> Response {
    match policy.check_same_origin(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(resp) => *resp,
    }
}

#[derive(Debug, Deserialize)]
struct LoginQuery {
    #[serde(default)]
    next: Option<String>,
}

/// `GET /login[?next=<path>]`: the sign-in page; a `next` that is not a path
/// on this server is dropped (redirect to `/login`), so signing in never
/// leads off-site.
async fn login(Query(q): Query<LoginQuery>) -> Response {
    match q.next {
        Some(next) if !local_next(&next) => (
            StatusCode::SEE_OTHER,
            [
                (header::LOCATION, "/login"),
                (header::CACHE_CONTROL, "no-store"),
            ],
        )
            .into_response(),
        _ => assets::page(assets::Page::Login),
    }
}

/// A path on this server: `/` then anything but `/` or `\\` (browsers read
/// `/\\host` as `//host`), with no backslash and no control character
/// anywhere (browsers drop tabs and line breaks from URLs).
pub fn local_next(next: &str) -> bool {
    let mut chars = next.chars();
    chars.next() == Some('/')
        && !matches!(chars.next(), Some('/') | Some('\\'))
        && !next.contains('\\')
        && !next.chars().any(char::is_control)
}

async fn shell_guard(State(policy): State<Arc<Policy>>, request: Request, next: Next) -> Response {
    match policy.check_host_origin(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(resp) => *resp,
    }
}

async fn asset(Path(file): Path<String>) -> Response {
    assets::asset(&file)
}

/// `GET /api/tools/<tool>`: what a form needs to call one operation.
async fn tool_schema(Path(tool): Path<String>) -> Response {
    let Some(t) = registry::find(&tool) else {
        return error_json(OpError::not_found(
            format!("no tool named {tool}"),
            "GET /api/tools lists every tool.",
        ));
    };
    let s = t.spec();
    axum::Json(json!({
        "tool": t.name,
        "title": s.title,
        "domain": s.domain,
        "path": s.http_path(),
        "summary": s.summary,
        "description": s.description,
        "example": serde_json::from_str::<Value>(s.example).ok(),
        "needs_gpu": s.needs_gpu,
        "long_running": s.long_running,
        "executes_commands": s.executes_commands,
        "read_only": s.hints.read_only,
        "input_schema": t.input_schema.as_ref(),
    }))
    .into_response()
}

fn error_json(err: OpError) -> Response {
    let status =
        StatusCode::from_u16(err.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(err.to_json())).into_response()
}

/// Call one operation through the dispatcher, as `/api` does.
pub(crate) async fn call(app: &Arc<AppState>, tool: &str, args: Value) -> Result<Value, OpError> {
    let Some(t) = registry::find(tool) else {
        return Err(OpError::not_found(
            format!("this aisp has no {tool}"),
            "The dashboard and the binary come from the same build; rebuild aisp.",
        ));
    };
    let opts = CallOptions::default();
    let _cancel_on_drop = opts.cancel.clone().drop_guard();
    dispatch::invoke(app, t, args, opts).await
}

#[derive(Debug, Deserialize)]
struct SectionQuery {
    path: String,
    #[serde(default)]
    device: Option<i64>,
    #[serde(default)]
    process: Option<i64>,
}

/// `GET /dashboard/profile/<section>?path=...`: one section of the profile page as HTML.
async fn profile_section(
    State(app): State<Arc<AppState>>,
    Path(section): Path<String>,
    Query(q): Query<SectionQuery>,
) -> Response {
    let mut scope = serde_json::Map::new();
    scope.insert("path".into(), json!(q.path));
    if let Some(d) = q.device {
        scope.insert("device".into(), json!(d));
    }
    if let Some(p) = q.process {
        scope.insert("process".into(), json!(p));
    }
    let html = profile_page::section(&app, &section, scope).await;
    match html {
        Ok(body) => html_response(StatusCode::OK, body),
        Err(err) => {
            let status = StatusCode::from_u16(err.kind.http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            html_response(status, profile_page::error_box(&err))
        }
    }
}

/// `POST /dashboard/view/<view>` with the view's arguments as a JSON object:
/// one server-rendered part of a page (HTML with SVG charts), made from the
/// answers of registry operations called through [`dispatch`]. A client that
/// goes away (the page's Cancel aborts the request) cancels the call.
async fn view(
    State(app): State<Arc<AppState>>,
    Path(view): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let args: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            // A view renders an answer: `async` (a job ticket instead) is the tool pages' to use.
            Ok(Value::Object(mut m)) => {
                m.remove("async");
                Value::Object(m)
            }
            _ => {
                return view_error(OpError::invalid_input(
                    "the view's arguments must be a JSON object",
                    "Send the form's arguments as {\"name\": value, ...}.",
                ));
            }
        }
    };
    let html = match view.as_str() {
        "overview" => overview::render(&app).await,
        "compare" => compare::render(&app, args).await,
        "benchmarks" => benchmarks::render(&app, args).await,
        "plan" => planner::plan(&app, args).await,
        "estimate" => planner::estimate(&app, args).await,
        other => Err(OpError::not_found(
            format!("the dashboard has no view `{other}`"),
            "Views: overview, compare, benchmarks, plan, estimate.",
        )),
    };
    match html {
        Ok(body) => html_response(StatusCode::OK, body),
        Err(err) => view_error(err),
    }
}

fn view_error(err: OpError) -> Response {
    let status =
        StatusCode::from_u16(err.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    html_response(status, html::error_box(&err))
}

fn html_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

fn upload_cap() -> u64 {
    std::env::var("AISP_UPLOAD_MAX_MB")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|mb| mb.saturating_mul(1 << 20))
        .unwrap_or(DEFAULT_UPLOAD_MAX_BYTES)
}

/// Where uploaded exports are kept.
pub fn uploads_dir(app: &AppState) -> PathBuf {
    app.config.home.join("uploads")
}

#[derive(Debug, Deserialize)]
struct UploadQuery {
    name: String,
}

/// The longest upload name kept (file systems allow 255 bytes; the stored
/// name adds a time stamp and a random part).
const MAX_UPLOAD_NAME: usize = 200;

/// A file name safe to keep: letters, digits, `._-`, with the export's extension.
fn safe_upload_name(name: &str) -> Result<String, OpError> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let cleaned = cleaned.trim_start_matches('.').to_string();
    let lower = cleaned.to_ascii_lowercase();
    if cleaned.is_empty() || !(lower.ends_with(".sqlite") || lower.ends_with(".nsys-rep")) {
        return Err(OpError::invalid_input(
            format!("`{name}` is not an Nsight Systems export"),
            "Upload a .sqlite export (nsys export --type sqlite) or a .nsys-rep report.",
        ));
    }
    if cleaned.len() > MAX_UPLOAD_NAME {
        return Err(OpError::invalid_input(
            format!(
                "the file name is {} characters long; uploads keep names of at most {MAX_UPLOAD_NAME}",
                cleaned.len()
            ),
            "Rename the file to a shorter name and upload it again.",
        ));
    }
    Ok(cleaned)
}

/// `POST /dashboard/upload?name=<file>`: the raw body is stored under
/// `$AISP_HOME/uploads/<unix-ms>-<random>-<file>`, at most [`upload_cap`]
/// bytes; the oldest uploads are removed to keep the folder under
/// `limits.uploads_total_mib`.
async fn upload(
    State(app): State<Arc<AppState>>,
    Query(q): Query<UploadQuery>,
    body: Body,
) -> Response {
    match store_upload(&app, &q.name, body).await {
        Ok((path, bytes)) => axum::Json(json!({
            "path": path.display().to_string(),
            "size_bytes": bytes,
            "stored_in": uploads_dir(&app).display().to_string(),
        }))
        .into_response(),
        Err(e) => error_json(e),
    }
}

/// Uploads are written one chunk at a time; pruning is one at a time.
static PRUNING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn store_upload(app: &AppState, name: &str, body: Body) -> Result<(PathBuf, u64), OpError> {
    let name = safe_upload_name(name)?;
    let cap = upload_cap().min(app.config.uploads_total_bytes);
    let dir_path = uploads_dir(app);
    let dir = aisp_base::safe_write::Dir::open(&dir_path, true)
        .map_err(|e| OpError::internal(format!("cannot keep uploads: {e}")))?;
    // A temporary file of its own (random name, O_EXCL), put in place under a
    // name no other upload has: same-name uploads in the same millisecond
    // never share a file.
    let stamp = chrono::Utc::now().timestamp_millis();
    let final_name = format!("{stamp}-{:08x}-{name}", aisp_base::random_u64() as u32);
    let pending = dir
        .create(std::ffi::OsStr::new(&final_name), false)
        .map_err(|e| OpError::internal(format!("cannot keep the upload: {e}")))?;
    let file = pending
        .file()
        .try_clone()
        .map_err(|e| OpError::internal(format!("cannot write the upload: {e}")))?;
    let mut file = tokio::fs::File::from_std(file);
    let mut stream = body.into_data_stream();
    let idle = app.config.http.body_timeout;
    let mut total: u64 = 0;
    let result: Result<(), OpError> = async {
        loop {
            let chunk = match tokio::time::timeout(idle, stream.next()).await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(_) => {
                    return Err(OpError::timeout(
                        format!("the upload stalled: nothing arrived for {} s", idle.as_secs_f64()),
                        "Upload the file again; the limit is `http.body_timeout_s` (AISP_HTTP_BODY_TIMEOUT_S).",
                    ));
                }
            };
            let chunk = chunk.map_err(|e| {
                OpError::invalid_input(
                    format!("the upload broke off: {e}"),
                    "Upload the file again.",
                )
            })?;
            total += chunk.len() as u64;
            if total > cap {
                // Read (and drop) a little more so that a client still sending gets the
                // answer rather than a reset connection; past twice the cap, stop reading.
                while total <= cap.saturating_mul(2) {
                    match tokio::time::timeout(idle, stream.next()).await {
                        Ok(Some(Ok(more))) => total += more.len() as u64,
                        _ => break,
                    }
                }
                return Err(OpError::invalid_input(
                    format!("the upload is larger than the {} MiB limit", cap >> 20),
                    "Open the export by its path on the server instead, or raise AISP_UPLOAD_MAX_MB \
                     (and `limits.uploads_total_mib`, AISP_UPLOADS_TOTAL_MIB).",
                ));
            }
            file.write_all(&chunk)
                .await
                .map_err(|e| OpError::internal(format!("cannot write the upload: {e}")))?;
        }
        file.flush()
            .await
            .map_err(|e| OpError::internal(format!("cannot write the upload: {e}")))?;
        Ok(())
    }
    .await;
    drop(file);
    // On any failure the temporary file goes with `pending`.
    result?;
    if total == 0 {
        return Err(OpError::invalid_input(
            "the upload is empty",
            "Choose a .sqlite or .nsys-rep file.",
        ));
    }
    let path = pending.path().to_path_buf();
    tokio::task::spawn_blocking(move || pending.commit())
        .await
        .map_err(|e| OpError::internal(format!("cannot keep the upload: {e}")))?
        .map_err(|e| OpError::internal(format!("cannot keep the upload: {e}")))?;
    let _one_at_a_time = PRUNING.lock().await;
    prune_uploads(&dir_path, &path, app.config.uploads_total_bytes);
    Ok((path, total))
}

/// Keep the uploads folder under `quota` bytes: remove the oldest uploads
/// (never `keep`, the one just stored), and temporary files an interrupted
/// server left (older than an hour).
fn prune_uploads(dir: &FsPath, keep: &FsPath, quota: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let hour = std::time::Duration::from_secs(3600);
    let mut kept: Vec<(std::time::SystemTime, u64, PathBuf)> = Vec::new();
    for e in entries.flatten() {
        let Ok(meta) = e.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let path = e.path();
        let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        let hidden = e.file_name().to_string_lossy().starts_with('.');
        if hidden {
            if modified.elapsed().is_ok_and(|age| age > hour) {
                let _ = std::fs::remove_file(&path);
            }
            continue;
        }
        kept.push((modified, meta.len(), path));
    }
    kept.sort();
    let mut total: u64 = kept.iter().map(|k| k.1).sum();
    for (_, len, path) in kept {
        if total <= quota {
            break;
        }
        if path == keep {
            continue;
        }
        if std::fs::remove_file(&path).is_ok() {
            tracing::info!(path = %path.display(), "removed an old upload to stay under limits.uploads_total_mib");
            total = total.saturating_sub(len);
        }
    }
}

/// The folder trace downloads are served from: where `aisp_profile_export`
/// writes by default.
fn exports_dir(app: &AppState) -> PathBuf {
    app.config.cache_dir().join("exports")
}

/// `GET /dashboard/download/<file>`: a file aisp_profile_export wrote into its
/// default folder (nothing else can be named).
async fn download(State(app): State<Arc<AppState>>, Path(file): Path<String>) -> Response {
    let dir = exports_dir(&app);
    match resolve_download(&dir, &file) {
        Some(path) => match tokio::fs::File::open(&path).await {
            Ok(f) => {
                let len = f.metadata().await.map(|m| m.len()).unwrap_or(0);
                let stream = tokio_util::io::ReaderStream::new(f);
                (
                    [
                        (header::CONTENT_TYPE, "application/octet-stream".to_string()),
                        (header::CONTENT_LENGTH, len.to_string()),
                        (
                            header::CONTENT_DISPOSITION,
                            format!("attachment; filename=\"{file}\""),
                        ),
                    ],
                    Body::from_stream(stream),
                )
                    .into_response()
            }
            Err(e) => error_json(OpError::not_found(
                format!("cannot open {}: {e}", path.display()),
                "Export the trace again.",
            )),
        },
        None => error_json(OpError::not_found(
            format!("no exported file `{file}`"),
            "Only files aisp_profile_export wrote to its default folder can be downloaded.",
        )),
    }
}

fn resolve_download(dir: &FsPath, file: &str) -> Option<PathBuf> {
    if file.is_empty()
        || file.starts_with('.')
        || !file
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return None;
    }
    let path = dir.join(file);
    let canon = path.canonicalize().ok()?;
    let canon_dir = dir.canonicalize().ok()?;
    (canon.starts_with(&canon_dir) && canon.is_file()).then_some(canon)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_is_a_local_path_only() {
        for ok in [
            "/",
            "/profiles",
            "/profiles?path=/x",
            "/tools/aisp_status#top",
        ] {
            assert!(local_next(ok), "{ok}");
        }
        for bad in [
            "//evil.example",
            "/\\evil.example",
            "https://evil.example",
            "evil",
            "/\t/evil.example",
            "/x\\y",
            "",
        ] {
            assert!(!local_next(bad), "{bad:?}");
        }
    }

    #[test]
    fn upload_names_are_cleaned_and_checked() {
        assert_eq!(
            safe_upload_name("../../etc/run 1.sqlite").unwrap(),
            "run_1.sqlite"
        );
        assert_eq!(safe_upload_name("C:\\x\\a.nsys-rep").unwrap(), "a.nsys-rep");
        assert!(safe_upload_name("notes.txt").is_err());
        assert!(safe_upload_name("").is_err());
        assert!(safe_upload_name("...sqlite").is_err());
        assert_eq!(safe_upload_name(".x.sqlite").unwrap(), "x.sqlite");
        let long = format!("{}.sqlite", "n".repeat(300));
        assert_eq!(
            safe_upload_name(&long).unwrap_err().kind,
            crate::error::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn downloads_stay_inside_the_exports_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.json"), b"{}").unwrap();
        assert!(resolve_download(dir.path(), "t.json").is_some());
        assert!(resolve_download(dir.path(), "../t.json").is_none());
        assert!(resolve_download(dir.path(), "missing.json").is_none());
        assert!(resolve_download(dir.path(), ".hidden").is_none());
    }
}
