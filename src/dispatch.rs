//! Calling an operation: the checks and policies every front end shares.
//!
//! MCP, HTTP and the CLI all call [`invoke`]. It validates the arguments,
//! refuses command execution unless allowed, answers `gpu_unavailable` for GPU
//! operations without a GPU, runs the operation on a blocking thread, turns a
//! panic into an `internal` error, enforces `timeout_s`, honours cancellation
//! and, for `async: true`, starts a job (up to `limits.max_jobs` at once)
//! and answers its ticket at once.
//!
//! Control operations (status, jobs, listing) run on a small pool of their
//! own, so that a blocking pool filled by long calls cannot keep them from
//! answering; calls that read user files wait for a slot of the reading pool
//! (`limits.heavy_calls`), nested calls included.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::context::{OpContext, ProgressSink};
use crate::error::OpError;
use crate::jobs::{JobState, JobTicket};
use crate::ops::errors::GpuCheck;
use crate::outputs::WriteScope;
use crate::registry::{self, ToolDef, validate};

/// How long an operation may take to wind down after its deadline or a
/// cancellation before the caller is answered without it.
const WIND_DOWN: Duration = Duration::from_secs(5);

/// Who is calling and how to reach them.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Cancelled when the caller gives up (MCP `notifications/cancelled`,
    /// a closed HTTP stream, Ctrl-C at the CLI).
    pub cancel: CancellationToken,
    pub progress: Option<ProgressSink>,
    /// Where the call may write files: under the output roots (MCP, HTTP:
    /// the default) or wherever it says (the CLI and the Python API).
    pub writes: WriteScope,
    /// The most characters an answer takes when the call gives no `max_chars`: [`crate::answer_cap::MCP_ANSWER_CAP`]
    /// over MCP, none for the CLI, the HTTP API and Python.
    pub answer_cap: Option<usize>,
}

/// The arguments every long-running operation takes besides its own.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunControl {
    pub timeout: Option<Duration>,
    pub run_async: bool,
    /// `max_chars`, for operations whose answers say what they leave out.
    pub max_chars: Option<usize>,
}

/// Split `timeout_s` and `async` off a long-running operation's arguments, and `max_chars` off those of an
/// operation whose answers say what they leave out.
pub fn split_run_control(tool: &ToolDef, args: Value) -> Result<(Value, RunControl), OpError> {
    let mut obj = match args {
        Value::Null => Map::new(),
        Value::Object(obj) => obj,
        _ => {
            return Err(OpError::invalid_input(
                format!("arguments for {} must be a JSON object", tool.name),
                "Pass the arguments as an object, e.g. {}.",
            ));
        }
    };
    let mut control = RunControl::default();
    if tool.spec().leaves_out
        && let Some(v) = obj.remove(crate::answer_cap::MAX_CHARS)
    {
        control.max_chars = max_chars(v)?;
    }
    if tool.spec().long_running {
        if let Some(v) = obj.remove("async") {
            control.run_async = match v {
                Value::Bool(b) => b,
                Value::Null => false,
                other => {
                    return Err(OpError::invalid_input(
                        format!("`async` must be true or false, not {other}"),
                        "Pass \"async\": true to run in the background.",
                    ));
                }
            };
        }
        if let Some(v) = obj.remove("timeout_s") {
            match v {
                Value::Null => {}
                Value::Number(n) => match n.as_f64() {
                    Some(s) if s > 0.0 && s.is_finite() && s <= 7.0 * 86_400.0 => {
                        control.timeout = Some(Duration::from_secs_f64(s));
                    }
                    _ => {
                        return Err(OpError::invalid_input(
                            format!("`timeout_s` must be a positive number of seconds, not {n}"),
                            "Pass e.g. \"timeout_s\": 120.",
                        ));
                    }
                },
                other => {
                    return Err(OpError::invalid_input(
                        format!("`timeout_s` must be a number, not {other}"),
                        "Pass e.g. \"timeout_s\": 120.",
                    ));
                }
            }
        }
    }
    Ok((Value::Object(obj), control))
}

fn max_chars(v: Value) -> Result<Option<usize>, OpError> {
    use crate::answer_cap::MIN_ANSWER_CAP;
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => match n.as_u64() {
            Some(c) if c >= MIN_ANSWER_CAP as u64 => {
                Ok(Some(usize::try_from(c).unwrap_or(usize::MAX)))
            }
            _ => Err(OpError::invalid_input(
                format!("`max_chars` must be a whole number of at least {MIN_ANSWER_CAP}, not {n}"),
                "Pass e.g. \"max_chars\": 20000 (left_out names the number that gives a whole answer).",
            )),
        },
        other => Err(OpError::invalid_input(
            format!("`max_chars` must be a number, not {other}"),
            "Pass e.g. \"max_chars\": 20000.",
        )),
    }
}

/// Echoed input strings longer than this are cut in answers and errors.
pub const ECHO_LIMIT: usize = 256;

/// `s` as an answer may repeat it: whole up to [`ECHO_LIMIT`] characters, else
/// its start and how long it was.
pub fn cut_for_echo(s: &str) -> String {
    let n = s.chars().count();
    if n <= ECHO_LIMIT {
        return s.to_string();
    }
    let head: String = s.chars().take(ECHO_LIMIT).collect();
    format!("{head}… [cut: {n} characters in all]")
}

/// The argument strings too long to echo whole.
fn long_strings(args: &Value, out: &mut Vec<String>) {
    match args {
        Value::String(s) if s.chars().count() > ECHO_LIMIT => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| long_strings(v, out)),
        Value::Object(obj) => {
            for (k, v) in obj {
                if k.chars().count() > ECHO_LIMIT {
                    out.push(k.clone());
                }
                long_strings(v, out);
            }
        }
        _ => {}
    }
}

/// Replace every copy of a long argument in `text` by its cut form.
fn cut_echoes_in(text: &mut String, long: &[String]) {
    for l in long {
        if text.contains(l.as_str()) {
            *text = text.replace(l.as_str(), &cut_for_echo(l));
        }
        // serde and Debug quote strings with escapes; match the escaped form too.
        let escaped = serde_json::to_string(l).unwrap_or_default();
        let escaped = escaped.trim_matches('"');
        if escaped != l && text.contains(escaped) {
            *text = text.replace(escaped, &cut_for_echo(escaped));
        }
    }
    // A message is prose: whatever else made it long (a long path inside a
    // longer argument, an escaped form we did not foresee) is cut too.
    const MESSAGE_LIMIT: usize = 4 * ECHO_LIMIT;
    if text.chars().count() > MESSAGE_LIMIT {
        let n = text.chars().count();
        let head: String = text.chars().take(MESSAGE_LIMIT).collect();
        *text = format!("{head}… [cut: {n} characters in all]");
    }
}

fn cut_echoes_in_value(v: &mut Value, long: &[String]) {
    match v {
        Value::String(s) => {
            for l in long {
                if s.contains(l.as_str()) {
                    *s = s.replace(l.as_str(), &cut_for_echo(l));
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| cut_echoes_in_value(x, long)),
        Value::Object(obj) => obj.values_mut().for_each(|x| cut_echoes_in_value(x, long)),
        _ => {}
    }
}

/// Cut echoed long arguments out of an answer or error (the one place that does).
fn cut_echoes(result: &mut Result<Value, OpError>, args: &Value) {
    let mut long = Vec::new();
    long_strings(args, &mut long);
    match result {
        Ok(v) if !long.is_empty() => cut_echoes_in_value(v, &long),
        Ok(_) => {}
        Err(e) => {
            cut_echoes_in(&mut e.message, &long);
            cut_echoes_in(&mut e.hint, &long);
        }
    }
}

/// Hold an answer to its tool's output schema. A number that overflowed to
/// infinity or NaN serializes as `null`, which a client rejects as invalid
/// structured content: say which argument magnitudes to fix instead.
fn check_output(tool: &ToolDef, value: &Value) -> Result<(), OpError> {
    match validate::check(tool.output_schema(), value, validate::Mode::Output) {
        Ok(()) => Ok(()),
        Err(v) => {
            tracing::warn!(tool = %tool.name, violation = %v, "answer does not match its output schema");
            let overflow = value
                .pointer(&json_pointer(&v.path))
                .is_some_and(Value::is_null);
            if overflow {
                Err(OpError::invalid_input(
                    format!(
                        "{} could not compute `{}`: the arguments lead to a number out of range                          (infinite or undefined)",
                        tool.name, v.path
                    ),
                    "Check the magnitudes of the numeric arguments (e.g. 1e308 overflows) and pass realistic values.",
                ))
            } else {
                Err(OpError::internal(format!(
                    "{} produced an answer that does not match its output schema: {v}",
                    tool.name
                )))
            }
        }
    }
}

/// `a.b[2].c` → `/a/b/2/c`.
fn json_pointer(path: &str) -> String {
    let mut out = String::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(i) = rest.find('[') {
            out.push('/');
            out.push_str(&rest[..i]);
            rest = &rest[i..];
        } else {
            out.push('/');
            out.push_str(rest);
            continue;
        }
        for idx in rest.split('[').filter(|s| !s.is_empty()) {
            out.push('/');
            out.push_str(idx.trim_end_matches(']'));
        }
    }
    out
}

/// Check arguments against the input schema: JSON types, ranges, names.
fn check_schema(tool: &ToolDef, args: &Value) -> Result<(), OpError> {
    validate::check(&tool.input_schema, args, validate::Mode::Input).map_err(|v| {
        OpError::invalid_input(
            format!("invalid arguments for {}: {v}", tool.name),
            format!(
                "Fix that argument and call again (the input schema is in tools/list and `aisp schemas`). \
                 Example: {}",
                tool.spec().example
            ),
        )
    })
}

/// Whether this call would run a command or open the host to others: the
/// tool always does (`executes_commands`), or these arguments make it (a
/// `command` to profile, a listener on a non-loopback address).
fn needs_exec(tool: &ToolDef, args: &Value) -> Option<String> {
    if tool.spec().executes_commands {
        return Some(format!(
            "{} runs a command you supply, and command execution is not allowed in this aisp.",
            tool.name
        ));
    }
    if args.get("command").is_some_and(|c| !c.is_null()) {
        return Some(format!(
            "{} with `command` runs a command you supply, and command execution is not allowed in this aisp.",
            tool.name
        ));
    }
    if tool.name == "aisp_hw_network_listen"
        && let Some(bind) = args.get("bind").and_then(Value::as_str)
        && !crate::ops::hw_host::is_loopback_bind(bind)
    {
        return Some(format!(
            "listening on {bind} opens a port to other hosts, which this aisp does not allow"
        ));
    }
    None
}

/// The checks that come before running anything (and before a job ticket).
fn preflight(app: &AppState, tool: &ToolDef, args: &Value) -> Result<(), OpError> {
    let spec = tool.spec();
    check_schema(tool, args)?;
    tool.op.check_args(args.clone())?;
    if !app.config.allow_exec
        && let Some(why) = needs_exec(tool, args)
    {
        return Err(OpError::exec_not_allowed(why));
    }
    if spec.needs_gpu {
        let gpu = app.gpu();
        if !gpu.available {
            return Err(gpu.unavailable_error(&tool.name));
        }
    }
    Ok(())
}

/// Call a tool. The single entry point of every front end.
pub async fn invoke(
    app: &Arc<AppState>,
    tool: &'static ToolDef,
    args: Value,
    opts: CallOptions,
) -> Result<Value, OpError> {
    let echo_source = args.clone();
    let mut result = invoke_inner(app, tool, args, opts).await;
    cut_echoes(&mut result, &echo_source);
    result
}

async fn invoke_inner(
    app: &Arc<AppState>,
    tool: &'static ToolDef,
    args: Value,
    opts: CallOptions,
) -> Result<Value, OpError> {
    let (args, control) = split_run_control(tool, args)?;
    if tool.spec().needs_gpu {
        // Preflight probes the GPU (blocking on first use).
        let app = Arc::clone(app);
        let args = args.clone();
        tokio::task::spawn_blocking(move || preflight(&app, tool, &args))
            .await
            .map_err(|e| OpError::internal(format!("preflight failed: {e}")))??;
    } else {
        // Schema checks only: answered here, whatever the blocking pool holds.
        preflight(app, tool, &args)?;
    }
    if is_control(tool) {
        return run_control(app, tool, args, opts).await;
    }
    if control.run_async {
        return start_job(app, tool, args, control.timeout, opts.writes);
    }
    let deadline = control.timeout.map(|t| Instant::now() + t);
    let cap = control.max_chars.or(opts.answer_cap);
    let mut answer = run(
        app,
        tool,
        args,
        opts.cancel,
        deadline,
        opts.progress,
        opts.writes,
    )
    .await?;
    if tool.spec().leaves_out
        && let Some(cap) = cap
    {
        let spec = tool.spec();
        crate::answer_cap::fit(&mut answer, cap, spec.sheds, spec.one_whole);
    }
    Ok(answer)
}

/// Operations that only look at the server's own state (status, jobs,
/// listings): quick, and what a client needs most when everything else is
/// busy. They run on [`CONTROL_THREADS`] threads of their own.
pub fn is_control(tool: &ToolDef) -> bool {
    const CONTROL: [&str; 6] = [
        "aisp_status",
        "aisp_job_status",
        "aisp_job_list",
        "aisp_job_cancel",
        "aisp_list_domains",
        "aisp_profile_list",
    ];
    CONTROL.contains(&tool.name.as_str())
}

/// Threads of the control pool.
const CONTROL_THREADS: usize = 2;

/// Control calls waiting for a control thread; more are refused as `busy`.
const CONTROL_QUEUE: usize = 1024;

type ControlTask = Box<dyn FnOnce() + Send>;

/// The control pool's queue (threads started on first use).
fn control_pool() -> &'static std::sync::mpsc::SyncSender<ControlTask> {
    static POOL: std::sync::OnceLock<std::sync::mpsc::SyncSender<ControlTask>> =
        std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<ControlTask>(CONTROL_QUEUE);
        let rx = Arc::new(std::sync::Mutex::new(rx));
        for i in 0..CONTROL_THREADS {
            let rx = Arc::clone(&rx);
            let _ = std::thread::Builder::new()
                .name(format!("aisp-control-{i}"))
                .spawn(move || {
                    loop {
                        let task = match rx.lock() {
                            Ok(guard) => guard.recv(),
                            Err(p) => p.into_inner().recv(),
                        };
                        match task {
                            Ok(task) => task(),
                            Err(_) => return,
                        }
                    }
                });
        }
        tx
    })
}

/// Run a control operation on the control pool.
async fn run_control(
    app: &Arc<AppState>,
    tool: &'static ToolDef,
    args: Value,
    opts: CallOptions,
) -> Result<Value, OpError> {
    let ctx = OpContext::new(
        Arc::clone(app),
        tool.name.clone(),
        opts.cancel.child_token(),
        None,
        opts.progress,
    )
    .with_write_scope(opts.writes);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task: ControlTask = Box::new(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let out = tool.op.call_json(&ctx, args)?;
            check_output(tool, &out)?;
            Ok(out)
        }))
        .unwrap_or_else(|payload| {
            let msg = panic_message(payload.as_ref());
            tracing::error!(tool = %tool.name, panic = %msg, "operation panicked");
            Err(OpError::internal(format!("{} panicked: {msg}", tool.name)))
        });
        let _ = tx.send(out);
    });
    control_pool().try_send(task).map_err(|_| {
        OpError::busy(
            format!(
                "{} could not be queued: {CONTROL_QUEUE} status and job calls are waiting already",
                tool.name
            ),
            "Retry in a moment; a client calling aisp_status or aisp_job_status in a tight loop fills this queue.",
        )
    })?;
    tokio::select! {
        out = rx => out.unwrap_or_else(|_| Err(OpError::internal(format!("{} did not complete", tool.name)))),
        _ = opts.cancel.cancelled() => Err(OpError::cancelled()),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Run an operation to completion on a blocking thread.
async fn run(
    app: &Arc<AppState>,
    tool: &'static ToolDef,
    args: Value,
    cancel: CancellationToken,
    deadline: Option<Instant>,
    progress: Option<ProgressSink>,
    writes: WriteScope,
) -> Result<Value, OpError> {
    // The operation gets a child token so that a deadline can stop it without
    // cancelling the caller's token.
    let op_cancel = cancel.child_token();
    let ctx = OpContext::new(
        Arc::clone(app),
        tool.name.clone(),
        op_cancel.clone(),
        deadline,
        progress,
    )
    .with_write_scope(writes);
    let started = Instant::now();
    // Calls that read user files wait for a slot: memory stays bounded by the
    // pool, not by how many clients call at once. The slot goes with the work
    // and is freed when it ends, even if the caller stopped waiting.
    let permit = if is_heavy_call(tool, &args) {
        match acquire_heavy(app, &ctx, &cancel, deadline).await {
            Ok(p) => Some(p),
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    let ctx = ctx.with_read_slot(permit.is_some());
    let ctx_for_stop = ctx.clone();
    tracing::debug!(tool = %tool.name, "call started");
    let mut handle = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let out = tool.op.call_json(&ctx, args)?;
        check_output(tool, &out)?;
        Ok(out)
    });

    let deadline_sleep = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
            None => std::future::pending().await,
        }
    };

    let outcome = tokio::select! {
        joined = &mut handle => joined_to_result(&tool.name, joined),
        _ = cancel.cancelled() => {
            op_cancel.cancel();
            // Give the operation a moment to release GPU memory and children.
            let _ = tokio::time::timeout(WIND_DOWN, &mut handle).await;
            Err(OpError::cancelled())
        }
        _ = deadline_sleep => {
            ctx_for_stop.cancel_for_timeout();
            match tokio::time::timeout(WIND_DOWN, &mut handle).await {
                // An operation that winds down with its own error (e.g. a capture
                // returning its output tails) says more than the generic one.
                Ok(joined) => match joined_to_result(&tool.name, joined) {
                    Err(e) if e.kind == crate::error::ErrorKind::Cancelled => Err(ctx_for_stop.stop_error()),
                    other => other,
                },
                Err(_) => Err(ctx_for_stop.stop_error()),
            }
        }
    };
    tracing::debug!(
        tool = %tool.name,
        ms = started.elapsed().as_millis() as u64,
        ok = outcome.is_ok(),
        "call finished"
    );
    outcome
}

/// Arguments that name files an operation reads whole or in large part
/// (profiles, traces, logs, CSV pages, saved answers).
const FILE_ARGS: [&str; 11] = [
    "path",
    "paths",
    "details_path",
    "profile",
    "compare_to",
    "before",
    "after",
    "before_details",
    "after_details",
    "trace",
    "log",
];

/// Tools with a file argument that read nothing big themselves: `aisp_ask`
/// (an investigation that may wait minutes on an LLM; the profile tools it
/// calls take their slots) and `aisp_hw_disk` (its `path` is a folder to measure).
const NOT_FILE_READERS: [&str; 2] = ["aisp_ask", "aisp_hw_disk"];

/// Operations that may read files the user names (profiles, traces, logs,
/// CSV pages), long-running ones included. Captures and GPU work queue on
/// the GPU lock instead.
pub fn is_heavy(tool: &ToolDef) -> bool {
    let spec = tool.spec();
    if spec.executes_commands || spec.needs_gpu || NOT_FILE_READERS.contains(&tool.name.as_str()) {
        return false;
    }
    tool.input_schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| FILE_ARGS.iter().any(|k| p.contains_key(*k)))
}

/// Whether this call reads user files: a file-reading tool given a file
/// argument (or, for `aisp_profile_compile`, a run whose files it reads), and
/// not a `command` to run instead.
pub fn is_heavy_call(tool: &ToolDef, args: &Value) -> bool {
    if !is_heavy(tool) {
        return false;
    }
    let given = |k: &str| args.get(k).is_some_and(|v| !v.is_null());
    if given("command") {
        return false;
    }
    FILE_ARGS.iter().any(|k| given(k)) || (tool.name == "aisp_profile_compile" && given("run_id"))
}

/// Wait for a heavy-call slot, telling the caller where it stands.
async fn acquire_heavy(
    app: &Arc<AppState>,
    ctx: &OpContext,
    cancel: &CancellationToken,
    deadline: Option<Instant>,
) -> Result<tokio::sync::OwnedSemaphorePermit, OpError> {
    let pool = Arc::clone(app.heavy_pool());
    if let Ok(p) = Arc::clone(&pool).try_acquire_owned() {
        return Ok(p);
    }
    let waiting = app
        .heavy_waiting
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        + 1;
    let _left = scopeguard(|| {
        app.heavy_waiting
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    });
    ctx.progress(
        0.0,
        None,
        format!(
            "queued: {} file-reading calls run at once, {waiting} waiting",
            app.config.heavy_calls
        ),
    );
    let deadline_sleep = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        p = pool.acquire_owned() => p.map_err(|_| OpError::internal("the call pool was closed")),
        _ = cancel.cancelled() => Err(OpError::cancelled()),
        _ = deadline_sleep => {
            ctx.cancel_for_timeout();
            Err(ctx.stop_error())
        }
    }
}

/// Run `f` when dropped.
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

fn joined_to_result(
    tool: &str,
    joined: Result<Result<Value, OpError>, tokio::task::JoinError>,
) -> Result<Value, OpError> {
    match joined {
        Ok(result) => result,
        Err(e) if e.is_panic() => {
            let msg = panic_message(e.into_panic().as_ref());
            tracing::error!(%tool, panic = %msg, "operation panicked");
            Err(OpError::internal(format!("{tool} panicked: {msg}")))
        }
        Err(e) => Err(OpError::internal(format!("{tool} did not complete: {e}"))),
    }
}

/// Start a job and answer its ticket at once.
fn start_job(
    app: &Arc<AppState>,
    tool: &'static ToolDef,
    args: Value,
    timeout: Option<Duration>,
    writes: WriteScope,
) -> Result<Value, OpError> {
    let store = Arc::clone(app.store()?);
    let (job_id, cancel) = app
        .jobs
        .create(&store, &tool.name, &args, app.config.max_jobs)?;
    let app2 = Arc::clone(app);
    let id2 = job_id.clone();
    tokio::spawn(async move {
        let app = app2;
        app.jobs.mark_running(&store, &id2);
        let sink: ProgressSink = {
            let app = Arc::clone(&app);
            let store = Arc::clone(&store);
            let id = id2.clone();
            Arc::new(move |p| app.jobs.update_progress(&store, &id, p))
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        let outcome = run(&app, tool, args, cancel, deadline, Some(sink), writes).await;
        app.jobs.finish(&store, &id2, outcome);
    });
    let ticket = JobTicket {
        job_id,
        tool: tool.name.clone(),
        state: JobState::Queued,
        status_tool: "aisp_job_status".into(),
    };
    serde_json::to_value(ticket).map_err(|e| OpError::internal(e.to_string()))
}

/// A tool called from inside another operation (synchronous, same thread).
pub fn call_nested(parent: &OpContext, tool_name: &str, args: Value) -> Result<Value, OpError> {
    let tool = registry::find(tool_name).ok_or_else(|| {
        OpError::not_found(
            format!("no tool named `{tool_name}`"),
            "List tools with aisp_list_domains.",
        )
    })?;
    if tool.spec().long_running && tool.spec().needs_gpu {
        // Nested calls are for analysis and probes, not for starting GPU runs.
        return Err(OpError::invalid_input(
            format!(
                "{tool_name} is a long-running GPU operation and cannot be called from inside another tool"
            ),
            "Call it directly, with async: true if it takes long.",
        ));
    }
    let (args, _control) = split_run_control(tool, args)?;
    preflight(parent.app(), tool, &args)?;
    parent.check_cancelled()?;
    // A nested call that reads files takes a reading slot unless its parent
    // holds one already (a second slot could wait for ever on the first).
    let permit = if is_heavy_call(tool, &args) && !parent.holds_read_slot() {
        Some(acquire_heavy_blocking(parent)?)
    } else {
        None
    };
    let ctx = parent
        .nested(&tool.name)
        .with_read_slot(permit.is_some() || parent.holds_read_slot());
    let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tool.op.call_json(&ctx, args)
    })) {
        Ok(result) => result,
        Err(payload) => {
            let msg = panic_message(payload.as_ref());
            Err(OpError::internal(format!("{tool_name} panicked: {msg}")))
        }
    };
    drop(permit);
    result
}

/// Wait for a reading slot on an operation's own (blocking) thread.
fn acquire_heavy_blocking(ctx: &OpContext) -> Result<tokio::sync::OwnedSemaphorePermit, OpError> {
    let pool = Arc::clone(ctx.app().heavy_pool());
    let mut told = false;
    loop {
        match Arc::clone(&pool).try_acquire_owned() {
            Ok(p) => return Ok(p),
            Err(tokio::sync::TryAcquireError::Closed) => {
                return Err(OpError::internal("the call pool was closed"));
            }
            Err(tokio::sync::TryAcquireError::NoPermits) => {}
        }
        ctx.check_cancelled()?;
        if !told {
            told = true;
            ctx.progress(
                0.0,
                None,
                format!(
                    "queued: {} file-reading calls run at once",
                    ctx.app().config.heavy_calls
                ),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An operation that panics, standing in for an unguarded library call.
    struct Panics;

    impl crate::registry::Operation for Panics {
        type Input = crate::ops::core::NoInput;
        type Output = crate::ops::core::NoInput;
        const SPEC: &'static crate::registry::OpSpec = &crate::registry::OpSpec {
            title: "panics",
            summary: "panics",
            description: "panics",
            ..crate::registry::OpSpec::new("test", "panics")
        };
        fn run(
            &self,
            _ctx: &OpContext,
            _input: crate::ops::core::NoInput,
        ) -> Result<crate::ops::core::NoInput, OpError> {
            panic!("Unable to dynamically load the \"cuda\" shared library")
        }
    }

    fn panicking_tool() -> &'static ToolDef {
        static OP: Panics = Panics;
        Box::leak(Box::new(ToolDef {
            name: "aisp_test_panics".into(),
            op: &OP,
            input_schema: Default::default(),
            output_schema: Default::default(),
        }))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_becomes_an_internal_error_and_the_caller_is_answered() {
        let app = AppState::for_tests();
        let tool = panicking_tool();
        let err = run(
            &app,
            tool,
            json!({}),
            CancellationToken::new(),
            None,
            None,
            WriteScope::default(),
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Internal);
        assert!(err.message.contains("panicked") && err.message.contains("cuda"));
        // The process keeps serving.
        let ok = invoke(
            &app,
            registry::find("aisp_list_domains").unwrap(),
            json!({}),
            CallOptions::default(),
        )
        .await;
        assert!(ok.is_ok());
    }

    fn long_running_tool() -> &'static ToolDef {
        registry::tools()
            .iter()
            .find(|t| t.spec().long_running && !t.spec().needs_gpu && !t.spec().executes_commands)
            .expect("at least one GPU-free long-running tool")
    }

    #[test]
    fn run_control_is_split_and_validated() {
        let tool = long_running_tool();
        let (rest, c) =
            split_run_control(tool, json!({"async": true, "timeout_s": 2.5, "x": 1})).unwrap();
        assert_eq!(rest, json!({"x": 1}));
        assert!(c.run_async);
        assert_eq!(c.timeout, Some(Duration::from_millis(2500)));
        assert!(split_run_control(tool, json!({"timeout_s": -1})).is_err());
        assert!(split_run_control(tool, json!({"timeout_s": "10"})).is_err());
        assert!(split_run_control(tool, json!({"async": "yes"})).is_err());
        assert!(split_run_control(tool, json!([1])).is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn gpu_operations_without_a_gpu_are_refused_with_the_reason() {
        // Execution allowed, so that a GPU tool that runs commands reaches the GPU check.
        let mut config =
            crate::config::Config::with_home(AppState::for_tests().config.home.clone());
        config.allow_exec = true;
        let app = AppState::new(config);
        app.set_gpu_for_tests(aisp_hw::gpu::GpuAvailability::unavailable(
            "no driver in this test",
            false,
        ));
        let Some(tool) = registry::tools().iter().find(|t| t.spec().needs_gpu) else {
            return;
        };
        let args: Value = serde_json::from_str(tool.spec().example).unwrap();
        let err = invoke(&app, tool, args, CallOptions::default())
            .await
            .unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::GpuUnavailable);
        assert!(err.message.contains("no driver in this test"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn command_execution_is_refused_unless_allowed() {
        let app = AppState::for_tests();
        let Some(tool) = registry::tools()
            .iter()
            .find(|t| t.spec().executes_commands)
        else {
            return;
        };
        let args: Value = serde_json::from_str(tool.spec().example).unwrap();
        let err = invoke(&app, tool, args, CallOptions::default())
            .await
            .unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::ExecNotAllowed);
        assert!(err.hint.contains("--allow-exec"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn timeouts_and_cancellation_stop_a_long_call() {
        let app = AppState::for_tests();
        let tool = registry::find("aisp_system_monitor").unwrap();
        let started = Instant::now();
        let err = invoke(
            &app,
            tool,
            json!({"duration_s": 30, "timeout_s": 0.3}),
            CallOptions::default(),
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Timeout);
        assert!(started.elapsed() < Duration::from_secs(5));

        let opts = CallOptions::default();
        let cancel = opts.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            cancel.cancel();
        });
        let started = Instant::now();
        let err = invoke(&app, tool, json!({"duration_s": 30}), opts)
            .await
            .unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Cancelled);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn file_reading_calls_are_the_pooled_ones() {
        let heavy = |n: &str| is_heavy(registry::find(n).unwrap());
        assert!(heavy("aisp_profile_summary"));
        assert!(heavy("aisp_profile_trace"));
        assert!(heavy("aisp_profile_ncu_summary"));
        assert!(heavy("aisp_profile_compare"));
        assert!(!heavy("aisp_status"));
        assert!(
            !heavy("aisp_ask"),
            "long-running: would hold a slot while waiting on an LLM"
        );
        assert!(!heavy("aisp_profile_nsys"), "runs a command");
        // Every file-reading argument counts, long-running tools included.
        for t in [
            "aisp_profile_compile",
            "aisp_profile_ranks",
            "aisp_analyze_memory_patterns",
            "aisp_benchmark_import",
            "aisp_recommend",
            "aisp_export_html",
            "aisp_profile_ncu_compare",
        ] {
            assert!(heavy(t), "{t}");
        }
        assert!(!heavy("aisp_hw_disk"), "its path is a folder to measure");
        let call = |n: &str, a: Value| is_heavy_call(registry::find(n).unwrap(), &a);
        assert!(call("aisp_profile_compile", json!({"trace": "t.json"})));
        assert!(call("aisp_profile_compile", json!({"run_id": "r"})));
        assert!(call(
            "aisp_analyze_memory_patterns",
            json!({"path": "p.csv"})
        ));
        assert!(!call(
            "aisp_analyze_memory_patterns",
            json!({"command": ["python3", "x.py"]})
        ));
        assert!(!call("aisp_recommend", json!({"model": "llama-3.1-8b"})));
        assert!(call("aisp_recommend", json!({"profile": "p.sqlite"})));
        assert!(!call("aisp_export_html", json!({"target": "gemm"})));
    }

    #[test]
    fn control_calls_are_the_server_state_ones() {
        let control = |n: &str| is_control(registry::find(n).unwrap());
        for t in [
            "aisp_status",
            "aisp_job_status",
            "aisp_job_list",
            "aisp_job_cancel",
            "aisp_list_domains",
        ] {
            assert!(control(t), "{t}");
        }
        assert!(!control("aisp_profile_info") && !control("aisp_system_monitor"));
    }

    #[test]
    fn arguments_that_run_commands_need_execution() {
        let app = AppState::for_tests();
        let tool = registry::find("aisp_analyze_memory_patterns").unwrap();
        let err = preflight(&app, tool, &json!({"command": ["python3", "x.py"]})).unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::ExecNotAllowed);
        assert!(preflight(&app, tool, &json!({"path": "p.csv"})).is_ok());
        let listen = registry::find("aisp_hw_network_listen").unwrap();
        let err = preflight(
            &app,
            listen,
            &json!({"bind": "0.0.0.0:5201", "duration_s": 1}),
        )
        .unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::ExecNotAllowed);
        assert!(
            preflight(
                &app,
                listen,
                &json!({"bind": "127.0.0.1:5201", "duration_s": 1})
            )
            .is_ok()
        );
    }

    #[test]
    fn echoed_long_arguments_are_cut_once_saying_so() {
        let long = "z".repeat(5000);
        let args = json!({"path": long});
        let mut r: Result<Value, OpError> = Err(OpError::not_found(
            format!("{long} does not exist"),
            "Check the path.",
        ));
        cut_echoes(&mut r, &args);
        let e = r.unwrap_err();
        assert!(
            e.message.contains("[cut: 5000 characters in all]"),
            "{}",
            e.message
        );
        assert!(e.message.len() < 400, "{}", e.message.len());
        let mut ok: Result<Value, OpError> = Ok(json!({"path": long, "n": 1}));
        cut_echoes(&mut ok, &args);
        assert!(ok.unwrap()["path"].as_str().unwrap().len() < 400);
    }

    #[test]
    fn an_answer_with_an_overflowed_number_is_an_error_not_null() {
        let tool = registry::find("aisp_status").unwrap();
        // `tool_count` is an integer in the schema; infinity would serialize as null.
        let good = invoke_blocking_status();
        assert!(check_output(tool, &good).is_ok());
        let mut bad = good.clone();
        bad["tool_count"] = Value::Null;
        let err = check_output(tool, &bad).unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::InvalidInput);
        assert!(err.message.contains("tool_count"), "{}", err.message);
    }

    fn invoke_blocking_status() -> Value {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(aisp_hw::gpu::GpuAvailability::unavailable("test", false));
        let ctx = OpContext::new(
            Arc::clone(&app),
            "aisp_status",
            CancellationToken::new(),
            None,
            None,
        );
        registry::find("aisp_status")
            .unwrap()
            .op
            .call_json(&ctx, json!({}))
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn async_calls_return_a_ticket_and_finish_as_jobs() {
        let app = AppState::for_tests();
        let tool = registry::find("aisp_system_monitor").unwrap();
        let ticket = invoke(
            &app,
            tool,
            json!({"duration_s": 0.3, "interval_ms": 100, "async": true}),
            CallOptions::default(),
        )
        .await
        .unwrap();
        let id = ticket["job_id"].as_str().unwrap().to_string();
        assert_eq!(ticket["state"], "queued");
        let store = app.store().unwrap();
        let mut rec = app.jobs.status(store, &id).unwrap();
        for _ in 0..100 {
            if rec.state.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            rec = app.jobs.status(store, &id).unwrap();
        }
        assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
        assert!(rec.result.unwrap()["samples"].as_array().unwrap().len() >= 2);
    }
}
