//! A PyTorch profiler capture: the script run through the wrapper, the Kineto
//! traces it wrote (one per rank) found and analysed.

use std::path::PathBuf;

use aisp_profile::input_file::InputLimits;
use aisp_profile::kineto::{self, Limits, TraceAnalysis};
use serde_json::Value;

use super::{TorchOptions, WRAPPER, WRAPPER_NAME, wrap_command};
use crate::command::UserCommand;
use crate::error::CaptureError;
use crate::process::{CommandSpec, RunOutcome};
use crate::session::{Session, output_text};

/// Findings kept in the run's record.
const RECORDED_FINDINGS: usize = 5;

/// A captured run and what its traces say.
#[derive(Debug)]
pub struct TorchCapture {
    /// The full command aisp ran (the wrapper in front of the script).
    pub profiler_command: Vec<String>,
    pub outcome: RunOutcome,
    /// The Kineto trace files written (one per rank under torchrun).
    pub traces: Vec<PathBuf>,
    /// The analysis of the traces that could be read (`None`: none could; notes say why).
    pub analysis: Option<TraceAnalysis>,
}

/// Run `cmd`'s script under torch.profiler into the run folder, then load
/// (each trace within `input_limits`) and analyse the traces.
pub fn capture(
    s: &mut Session<'_>,
    cmd: &UserCommand,
    opts: &TorchOptions,
    limits: Limits,
    input_limits: &InputLimits,
) -> Result<TorchCapture, CaptureError> {
    let wrapper = s.dir.join(WRAPPER_NAME);
    std::fs::write(&wrapper, WRAPPER).map_err(|source| CaptureError::WriteFile {
        path: wrapper.clone(),
        source,
    })?;
    let argv = wrap_command(&cmd.argv, &wrapper, &s.dir, opts).map_err(CaptureError::NotAScript)?;
    let mut spec = CommandSpec::new(&argv[0], argv[1..].to_vec());
    spec.cwd = cmd.cwd.clone();
    spec.env = cmd.env.clone();
    let profiler_command = spec.argv();
    let out = s.run_profiled("torch.profiler", spec, "torch", "")?;
    let traces = kineto::expand_paths(&s.dir).map_err(|source| CaptureError::ListFolder {
        dir: s.dir.clone(),
        source,
    })?;
    if traces.is_empty() {
        return Err(no_trace(s, cmd, &out));
    }
    for (i, t) in traces.iter().enumerate() {
        let name = if i == 0 {
            "trace".to_string()
        } else {
            format!("trace_{i}")
        };
        s.artifact(&name, t);
    }
    s.note_exit(&out);
    s.progress("analysing the trace".into());
    let mut loaded = Vec::new();
    for t in &traces {
        s.check_cancelled()?;
        match kineto::load(t, input_limits) {
            Ok(tr) => loaded.push(tr),
            Err(e) => s.notes.push(format!("{e}")),
        }
    }
    let analysis = (!loaded.is_empty()).then(|| kineto::analyze(&loaded, limits));
    if let Some(a) = &analysis {
        s.rec.findings = finding_lines(a);
    }
    Ok(TorchCapture {
        profiler_command,
        outcome: out,
        traces,
        analysis,
    })
}

/// Why the profiler wrote no trace: no PyTorch for that Python, a schedule
/// that never reached its active steps, or a script that failed.
fn no_trace(s: &Session<'_>, cmd: &UserCommand, out: &RunOutcome) -> CaptureError {
    if output_text(out).contains("No module named 'torch'") {
        return CaptureError::NoTorch {
            python: cmd.argv[0].clone(),
            tails: out.tails_text(),
        };
    }
    let stepped_no_optimizer = std::fs::read_to_string(s.dir.join("meta.json"))
        .ok()
        .and_then(|m| serde_json::from_str::<Value>(&m).ok())
        .is_some_and(|m| m.get("optimizer_steps").and_then(Value::as_u64) == Some(0));
    CaptureError::NoTrace {
        status: out.status_text(),
        stepped_no_optimizer,
        tails: out.tails_text(),
    }
}

/// The most severe findings as `[severity] title` lines.
fn finding_lines(a: &TraceAnalysis) -> Vec<String> {
    a.findings
        .iter()
        .take(RECORDED_FINDINGS)
        .map(|f| {
            format!(
                "[{}] {}",
                serde_json::to_value(f.severity)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                f.title
            )
        })
        .collect()
}
