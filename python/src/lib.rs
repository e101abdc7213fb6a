//! `aisp._native`: the aisp engine inside a Python process.
//!
//! This is a front end like the CLI, MCP and HTTP servers, and as thin: it
//! hands the registry (tools, input schemas, descriptions, domains) to the
//! Python package, which generates `engine.<domain>.<op>` from it at import,
//! and runs each call through [`aisp::dispatch::invoke`] — argument checks,
//! policies, timeouts, cancellation and jobs are the dispatcher's, exactly as
//! for every other front end. No operation is named here.
//!
//! A call runs on the engine's Tokio runtime while the calling thread waits
//! with the GIL released; every 50 ms (and on every progress report) it takes
//! the GIL back to run the Python progress callback and to check for signals,
//! so Ctrl-C cancels the call instead of waiting for it.

use std::mem::ManuallyDrop;
use std::path::PathBuf;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use aisp::app::AppState;
use aisp::config::{Config, Overrides};
use aisp::context::{Progress, ProgressSink};
use aisp::dispatch::{self, CallOptions};
use aisp::error::OpError;
use aisp::registry;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// How often a waiting call looks at signals (Ctrl-C) with the GIL held.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// What the call's task sends to the waiting Python thread.
enum Event {
    Progress(Progress),
    Done(Result<Value, OpError>),
}

/// One engine: configuration (the CLI's: `AISP_HOME`, the config file,
/// `AISP_*` variables), the store, jobs, and the runtime calls run on.
#[pyclass(frozen, module = "aisp._native")]
struct Engine {
    app: Arc<AppState>,
    /// Shut down in the background when the engine goes (see `Drop`).
    runtime: ManuallyDrop<tokio::runtime::Runtime>,
}

impl Drop for Engine {
    /// A dropped runtime waits for its blocking threads, which may be running
    /// a job for tens of seconds, while Python holds the GIL; let them finish
    /// (or see their cancellation) on their own instead.
    fn drop(&mut self) {
        // SAFETY: the runtime is taken once, here, and never used again.
        let runtime = unsafe { ManuallyDrop::take(&mut self.runtime) };
        runtime.shutdown_background();
    }
}

#[pymethods]
impl Engine {
    /// `home` overrides `AISP_HOME`; `allow_exec` overrides `AISP_ALLOW_EXEC`
    /// and the config file (operations that run commands are refused unless true).
    #[new]
    #[pyo3(signature = (home=None, allow_exec=None))]
    fn new(home: Option<PathBuf>, allow_exec: Option<bool>) -> PyResult<Engine> {
        let overrides = Overrides {
            home,
            allow_exec,
            ..Overrides::default()
        };
        let config = Config::load(&overrides).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("aisp-engine")
            .enable_all()
            .build()
            .map_err(|e| PyValueError::new_err(format!("cannot start the aisp runtime: {e}")))?;
        Ok(Engine {
            app: AppState::new(config),
            runtime: ManuallyDrop::new(runtime),
        })
    }

    /// The store, cache and run folder (`AISP_HOME`).
    #[getter]
    fn home(&self) -> PathBuf {
        self.app.config.home.clone()
    }

    /// Whether operations that run user commands are allowed.
    #[getter]
    fn allow_exec(&self) -> bool {
        self.app.config.allow_exec
    }

    /// Seconds per call of `tool` with `args` through `dispatch::invoke` alone,
    /// `n` calls made from Rust on this engine's runtime: what a call costs
    /// without this front end, for the per-call overhead in BENCHMARKS.md.
    fn _time_dispatch(&self, py: Python<'_>, tool: &str, args: &str, n: u32) -> PyResult<f64> {
        let tool = registry::find(tool)
            .ok_or_else(|| PyValueError::new_err(format!("no tool named `{tool}`")))?;
        let args: Value =
            serde_json::from_str(args).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let app = Arc::clone(&self.app);
        let n = n.max(1);
        py.detach(move || {
            self.runtime.block_on(async move {
                let started = std::time::Instant::now();
                for _ in 0..n {
                    dispatch::invoke(&app, tool, args.clone(), CallOptions::default())
                        .await
                        .map_err(|e| PyValueError::new_err(e.to_string()))?;
                }
                Ok(started.elapsed().as_secs_f64() / f64::from(n))
            })
        })
    }

    /// Call the tool `tool` with `args` (a JSON object as text) through the
    /// dispatcher. Answers `(True, result_json)` or `(False, error_json)`;
    /// raises what the progress callback raised, or `KeyboardInterrupt`,
    /// after cancelling the call and letting it wind down.
    ///
    /// `progress(report)` is called on this thread with `{"progress", "total",
    /// "message"}`; returning `False` cancels the call.
    #[pyo3(signature = (tool, args, progress=None))]
    fn call(
        &self,
        py: Python<'_>,
        tool: &str,
        args: &str,
        progress: Option<Bound<'_, PyAny>>,
    ) -> PyResult<(bool, String)> {
        let Some(tool) = registry::find(tool) else {
            return Ok(failure(OpError::not_found(
                format!("no tool named `{tool}`"),
                "List the operations with engine.list_domains() or aisp.tools().",
            )));
        };
        let args: Value = match serde_json::from_str(args) {
            Ok(v) => v,
            Err(e) => {
                return Ok(failure(OpError::invalid_input(
                    format!("the arguments are not JSON: {e}"),
                    "Pass JSON-serializable values (str, int, float, bool, None, list, dict).",
                )));
            }
        };
        let cancel = CancellationToken::new();
        let (tx, mut rx) = mpsc::channel::<Event>();
        let sink: Option<ProgressSink> = progress.as_ref().map(|_| {
            let tx = tx.clone();
            Arc::new(move |p: Progress| {
                let _ = tx.send(Event::Progress(p));
            }) as ProgressSink
        });
        let opts = CallOptions {
            cancel: cancel.clone(),
            progress: sink,
            // In process, for a local user, like the CLI: writes go where they say.
            writes: aisp::outputs::WriteScope::Anywhere,
            answer_cap: None,
        };
        let app = Arc::clone(&self.app);
        self.runtime.spawn(async move {
            let outcome = dispatch::invoke(&app, tool, args, opts).await;
            let _ = tx.send(Event::Done(outcome));
        });

        // Set once the call was interrupted from Python; raised when it has wound down.
        let mut raised: Option<PyErr> = None;
        loop {
            // The receiver is not `Sync`: move it into the GIL-free closure and back.
            let (event, back) = py.detach(move || (rx.recv_timeout(SIGNAL_POLL), rx));
            rx = back;
            match event {
                Ok(Event::Done(outcome)) => {
                    return match raised {
                        Some(err) => Err(err),
                        None => Ok(match outcome {
                            Ok(v) => (true, v.to_string()),
                            Err(e) => failure(e),
                        }),
                    };
                }
                Ok(Event::Progress(p)) if raised.is_none() => {
                    if let Some(callback) = &progress {
                        let report = PyDict::new(py);
                        report.set_item("progress", p.progress)?;
                        report.set_item("total", p.total)?;
                        report.set_item("message", p.message)?;
                        match callback.call1((report,)) {
                            Ok(answer) if answer.extract::<bool>().ok() == Some(false) => {
                                cancel.cancel()
                            }
                            Ok(_) => {}
                            Err(err) => {
                                cancel.cancel();
                                raised = Some(err);
                            }
                        }
                    }
                }
                Ok(Event::Progress(_)) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Ok(failure(OpError::internal(format!(
                        "{} ended without an answer",
                        tool.name
                    ))));
                }
            }
            if raised.is_none()
                && let Err(err) = py.check_signals()
            {
                cancel.cancel();
                raised = Some(err);
            }
        }
    }
}

fn failure(e: OpError) -> (bool, String) {
    (false, e.to_json().to_string())
}

/// The registry as the Python package needs it, as JSON text: domains in
/// `ops::DOMAINS` order with their tools' signatures and docstrings, and the
/// error classes (see `aisp::registry::python`).
#[pyfunction]
fn registry_json() -> String {
    let mut v = aisp::registry::python::registry_json();
    v["version"] = json!(env!("CARGO_PKG_VERSION"));
    v.to_string()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Logs go to stderr as at the CLI (`RUST_LOG` or `AISP_LOG`, warnings by default).
    let filter = std::env::var("AISP_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&filter)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
    m.add_class::<Engine>()?;
    m.add_function(wrap_pyfunction!(registry_json, m)?)?;
    Ok(())
}
