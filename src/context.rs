//! What an operation sees of the call it serves: shared state, cancellation,
//! the deadline and a progress channel. It knows nothing of MCP, HTTP or the
//! CLI, so library code and tests can build one directly.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::error::OpError;

/// A progress report: `progress` out of `total` (when known), with a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Progress {
    pub progress: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Receives progress reports. Called on the operation's thread; must not block.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

#[derive(Clone)]
pub struct OpContext {
    app: Arc<AppState>,
    tool: String,
    cancel: CancellationToken,
    timed_out: Arc<AtomicBool>,
    deadline: Option<Instant>,
    progress: Option<ProgressSink>,
    writes: crate::outputs::WriteScope,
    /// Set while this call holds a file-reading slot (nested calls share it).
    holds_read_slot: bool,
}

impl std::fmt::Debug for OpContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpContext")
            .field("tool", &self.tool)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl OpContext {
    pub fn new(
        app: Arc<AppState>,
        tool: impl Into<String>,
        cancel: CancellationToken,
        deadline: Option<Instant>,
        progress: Option<ProgressSink>,
    ) -> OpContext {
        OpContext {
            app,
            tool: tool.into(),
            cancel,
            timed_out: Arc::new(AtomicBool::new(false)),
            deadline,
            progress,
            writes: crate::outputs::WriteScope::default(),
            holds_read_slot: false,
        }
    }

    /// Where this call may write files (the front end decides; see [`crate::outputs`]).
    pub fn with_write_scope(mut self, writes: crate::outputs::WriteScope) -> OpContext {
        self.writes = writes;
        self
    }

    pub fn write_scope(&self) -> crate::outputs::WriteScope {
        self.writes
    }

    /// Mark this call as holding a file-reading slot (`limits.heavy_calls`).
    pub(crate) fn with_read_slot(mut self, held: bool) -> OpContext {
        self.holds_read_slot = held;
        self
    }

    /// Whether this call (or the call it is nested in) holds a file-reading slot.
    pub fn holds_read_slot(&self) -> bool {
        self.holds_read_slot
    }

    /// A context with no caller: never cancelled, no deadline, progress dropped.
    pub fn detached(app: Arc<AppState>) -> OpContext {
        OpContext::new(app, "aisp", CancellationToken::new(), None, None)
    }

    pub fn app(&self) -> &AppState {
        &self.app
    }

    pub fn app_arc(&self) -> &Arc<AppState> {
        &self.app
    }

    /// The MCP name of the tool being served.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Time left before the deadline, if there is one.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.cancel
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
            || self
                .deadline
                .is_some_and(|d| Instant::now() >= d && self.mark_timed_out())
    }

    fn mark_timed_out(&self) -> bool {
        self.timed_out.store(true, Ordering::SeqCst);
        true
    }

    /// Whether the stop came from the deadline rather than the caller.
    pub fn timed_out(&self) -> bool {
        self.timed_out.load(Ordering::SeqCst)
    }

    /// Stop the caller's way: the dispatcher calls this when the deadline passes.
    pub fn cancel_for_timeout(&self) {
        self.timed_out.store(true, Ordering::SeqCst);
        self.cancel.cancel();
    }

    /// `Err(cancelled)` or `Err(timeout)` once the call should stop.
    pub fn check_cancelled(&self) -> Result<(), OpError> {
        if !self.is_cancelled() {
            return Ok(());
        }
        Err(self.stop_error())
    }

    /// The error to return when stopping early.
    pub fn stop_error(&self) -> OpError {
        if self.timed_out() {
            OpError::timeout(
                format!("{} ran past its time limit and was stopped.", self.tool),
                "Call again with a larger `timeout_s`, a smaller workload, or `async: true`.",
            )
        } else {
            OpError::cancelled()
        }
    }

    /// Sleep up to `duration`, waking early (with an error) when cancelled.
    pub fn sleep(&self, duration: Duration) -> Result<(), OpError> {
        let end = Instant::now() + duration;
        loop {
            self.check_cancelled()?;
            let now = Instant::now();
            if now >= end {
                return Ok(());
            }
            std::thread::sleep((end - now).min(Duration::from_millis(20)));
        }
    }

    /// Report progress to whoever is listening (MCP client, job record).
    pub fn progress(&self, progress: f64, total: Option<f64>, message: impl Into<String>) {
        if let Some(sink) = &self.progress {
            let message = message.into();
            sink(Progress {
                progress,
                total,
                message: (!message.is_empty()).then_some(message),
            });
        }
    }

    /// Run another tool from inside this one (same cancellation, no progress),
    /// with the same checks as a direct call. Used by `aisp_ask` and `aisp_triage`.
    pub fn call_tool(&self, tool: &str, args: Value) -> Result<Value, OpError> {
        crate::dispatch::call_nested(self, tool, args)
    }

    /// A context for a nested call: shares cancellation and deadline.
    pub(crate) fn nested(&self, tool: &str) -> OpContext {
        OpContext {
            app: Arc::clone(&self.app),
            tool: tool.to_string(),
            cancel: self.cancel.clone(),
            timed_out: Arc::clone(&self.timed_out),
            deadline: self.deadline,
            progress: None,
            writes: self.writes,
            holds_read_slot: self.holds_read_slot,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn cancellation_and_deadline_are_distinguished() {
        let app = AppState::for_tests();
        let ctx = OpContext::new(app.clone(), "t", CancellationToken::new(), None, None);
        assert!(ctx.check_cancelled().is_ok());
        ctx.cancellation_token().cancel();
        assert_eq!(
            ctx.check_cancelled().unwrap_err().kind,
            crate::error::ErrorKind::Cancelled
        );

        let ctx = OpContext::new(
            app,
            "t",
            CancellationToken::new(),
            Some(Instant::now() + Duration::from_millis(30)),
            None,
        );
        let err = ctx.sleep(Duration::from_secs(5)).unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Timeout);
    }

    #[test]
    fn progress_reaches_the_sink() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        let sink: ProgressSink = Arc::new(move |p| seen2.lock().unwrap().push(p));
        let ctx = OpContext::new(
            AppState::for_tests(),
            "t",
            CancellationToken::new(),
            None,
            Some(sink),
        );
        ctx.progress(1.0, Some(2.0), "half");
        ctx.progress(2.0, Some(2.0), "");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].message.as_deref(), Some("half"));
        assert_eq!(seen[1].message, None);
    }
}
