//! The one error type every operation returns.
//!
//! Library modules define their own `thiserror` enums and convert them into
//! [`OpError`] at the operation boundary. An `OpError` is what a model (or a
//! person at the CLI) reads: a machine-readable [`ErrorKind`], a sentence
//! saying what went wrong, and a hint saying what to do next. The same value
//! becomes an MCP `isError: true` result, an HTTP status with a JSON body, or
//! a CLI exit code 1.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What class of failure happened. The set is closed: clients and the HTTP
/// API map each kind to behaviour (status codes, retries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The arguments are wrong: fix them and call again.
    InvalidInput,
    /// A file, job, run, tool or program that the call names does not exist.
    NotFound,
    /// The operation needs an NVIDIA GPU and none is usable here.
    GpuUnavailable,
    /// This machine, GPU, driver or build cannot do what was asked.
    Unsupported,
    /// The operation would run a user-supplied command and execution is off.
    ExecNotAllowed,
    /// The operation ran past its time limit and was stopped.
    Timeout,
    /// The caller cancelled the operation.
    Cancelled,
    /// aisp is at a limit on work it takes at once (background jobs, control
    /// calls queued): nothing is wrong with the call; retry later.
    Busy,
    /// A bug or an unexpected failure inside aisp.
    Internal,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::InvalidInput,
        ErrorKind::NotFound,
        ErrorKind::GpuUnavailable,
        ErrorKind::Unsupported,
        ErrorKind::ExecNotAllowed,
        ErrorKind::Timeout,
        ErrorKind::Cancelled,
        ErrorKind::Busy,
        ErrorKind::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::NotFound => "not_found",
            ErrorKind::GpuUnavailable => "gpu_unavailable",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::ExecNotAllowed => "exec_not_allowed",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Busy => "busy",
            ErrorKind::Internal => "internal",
        }
    }

    /// The HTTP status the `/api` routes answer with for this kind.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::InvalidInput => 400,
            ErrorKind::ExecNotAllowed => 403,
            ErrorKind::NotFound => 404,
            ErrorKind::Timeout => 408,
            ErrorKind::Cancelled => 409,
            ErrorKind::Busy => 429,
            ErrorKind::Unsupported => 501,
            ErrorKind::GpuUnavailable => 503,
            ErrorKind::Internal => 500,
        }
    }
}

impl ErrorKind {
    /// Seconds an HTTP client should wait before calling again (`Retry-After`),
    /// for the kinds that mean "not now" rather than "not this way".
    pub fn retry_after_s(self) -> Option<u32> {
        match self {
            ErrorKind::Busy => Some(5),
            _ => None,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure an operation reports to its caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpError {
    pub kind: ErrorKind,
    /// What went wrong, in one or two sentences.
    pub message: String,
    /// What to do next (fix an argument, install a tool, call another tool).
    pub hint: String,
}

/// The wire form of a failed call: `{"error": {kind, message, hint}}`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ErrorEnvelope {
    pub error: OpError,
}

impl OpError {
    pub fn new(kind: ErrorKind, message: impl Into<String>, hint: impl Into<String>) -> Self {
        OpError {
            kind,
            message: message.into(),
            hint: hint.into(),
        }
    }

    pub fn invalid_input(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message, hint)
    }

    pub fn not_found(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message, hint)
    }

    pub fn gpu_unavailable(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::new(ErrorKind::GpuUnavailable, message, hint)
    }

    pub fn unsupported(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message, hint)
    }

    pub fn exec_not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            ErrorKind::ExecNotAllowed,
            message,
            "Command execution is off by default. Start aisp with --allow-exec, set AISP_ALLOW_EXEC=1, \
             or put `allow_exec = true` in the config file, then call again.",
        )
    }

    pub fn timeout(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, message, hint)
    }

    /// aisp is at a limit on work it takes at once; `hint` names the limit
    /// and what frees room.
    pub fn busy(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::new(ErrorKind::Busy, message, hint)
    }

    pub fn cancelled() -> Self {
        Self::new(
            ErrorKind::Cancelled,
            "The operation was cancelled before it finished.",
            "Call it again if you still need the result.",
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            ErrorKind::Internal,
            message,
            "This is a bug in aisp. Retry once; if it persists, report it with the message above.",
        )
    }

    pub fn envelope(&self) -> ErrorEnvelope {
        ErrorEnvelope {
            error: self.clone(),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.envelope()).unwrap_or_else(|_| serde_json::json!({}))
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for OpError {}

impl From<aisp_store::StoreError> for OpError {
    fn from(err: aisp_store::StoreError) -> Self {
        if aisp_store::is_corruption(&err) {
            return OpError::new(
                ErrorKind::Internal,
                format!("the aisp store is damaged: {err}"),
                "aisp repairs a damaged store when it opens it: restart the server (aisp_status then says what \
                 was kept), or move $AISP_HOME/aisp.sqlite aside yourself.",
            );
        }
        OpError::new(
            ErrorKind::Internal,
            format!("the aisp store failed: {err}"),
            "Check that $AISP_HOME is writable and not on a full disk; \
             `aisp status` shows the store path.",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_serialize_as_snake_case_and_map_to_statuses() {
        let expected = [
            ("invalid_input", 400),
            ("not_found", 404),
            ("gpu_unavailable", 503),
            ("unsupported", 501),
            ("exec_not_allowed", 403),
            ("timeout", 408),
            ("cancelled", 409),
            ("busy", 429),
            ("internal", 500),
        ];
        for (kind, (name, status)) in ErrorKind::ALL.iter().zip(expected) {
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
            assert_eq!(kind.as_str(), name);
            assert_eq!(kind.http_status(), status);
        }
    }

    #[test]
    fn envelope_has_the_documented_shape() {
        let err = OpError::invalid_input("bad", "fix it");
        assert_eq!(
            err.to_json(),
            serde_json::json!({"error": {"kind": "invalid_input", "message": "bad", "hint": "fix it"}})
        );
    }
}
