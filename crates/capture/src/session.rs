//! A capture in progress: its record in the store, its run folder, its clock
//! and progress, and each step (`phase`) run under the caller's cancellation
//! and deadline. What the capture borrows from whoever runs it (cancellation,
//! deadline, progress, the GPU to itself) comes through [`Host`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aisp_store::Store;
use schemars::JsonSchema;
use serde::Serialize;

use crate::command::UserCommand;
use crate::error::CaptureError;
use crate::process::{self, CommandSpec, OutputTail, RunLimits, RunOutcome, Stop};
use crate::record::{self, CaptureKind, CaptureRecord, CaptureState};
use crate::tools::ToolInfo;

/// Grace between SIGTERM and SIGKILL. The dispatcher waits 5 s after a
/// deadline for the operation's own error (with the output tails).
pub(crate) const GRACE: Duration = Duration::from_secs(2);
/// Lines of stdout/stderr kept in results.
pub(crate) const TAIL_LINES: usize = 40;
/// Most of a log read back to look for known failures.
const DIAGNOSE_BYTES: u64 = 4 << 20;

/// Holding one keeps the GPU to this capture; dropping it lets the next in.
pub trait Turn {}
impl<T> Turn for T {}
pub type GpuTurn<'a> = Box<dyn Turn + 'a>;

/// What a capture borrows from whoever runs it.
pub trait Host: Sync {
    /// The name the capture is recorded under (the tool that ran it).
    fn tool(&self) -> &str;
    /// Whether the caller gave up (or its deadline passed).
    fn cancelled(&self) -> bool;
    /// Whether a stop came from the caller's deadline rather than the caller.
    fn timed_out(&self) -> bool;
    /// The caller's deadline.
    fn deadline(&self) -> Option<Instant>;
    /// Progress: seconds since the capture started (strictly increasing) and what it does.
    fn progress(&self, elapsed_s: f64, message: String);
    /// Wait until the GPU is this capture's alone (one capture at a time);
    /// `None` when the caller gave up while waiting.
    fn gpu_turn(&self) -> Option<GpuTurn<'_>>;
}

/// A capture in progress: its record, folder, clock and progress.
pub struct Session<'a> {
    host: &'a dyn Host,
    store: &'a Store,
    pub rec: CaptureRecord,
    pub dir: PathBuf,
    started: Instant,
    last_progress: f64,
    /// What was not done or is worth knowing; the answer's `notes`.
    pub notes: Vec<String>,
    /// A limit of the capture's own, before the caller's deadline.
    pub deadline: Option<Instant>,
}

impl<'a> Session<'a> {
    /// Create the run folder under `runs_dir` and record the run as running.
    pub fn start(
        host: &'a dyn Host,
        store: &'a Store,
        runs_dir: &Path,
        kind: CaptureKind,
        cmd: &UserCommand,
        profiler: Option<&ToolInfo>,
    ) -> Result<Session<'a>, CaptureError> {
        let run_id = record::new_run_id(kind);
        let dir = record::create_run_dir(runs_dir, &run_id).map_err(|source| {
            CaptureError::RunFolder {
                runs_dir: runs_dir.to_path_buf(),
                source,
            }
        })?;
        let rec = CaptureRecord {
            run_id,
            kind,
            tool: host.tool().to_string(),
            state: CaptureState::Running,
            command: cmd.argv.clone(),
            cwd: cmd.cwd.as_ref().map(|c| c.display().to_string()),
            run_dir: dir.display().to_string(),
            profiler: profiler.map(|p| p.path.clone()),
            profiler_version: profiler.and_then(|p| p.version.clone()),
            exit_code: None,
            created_at: now_rfc3339(),
            finished_at: None,
            duration_ms: None,
            artifacts: BTreeMap::new(),
            findings: Vec::new(),
            error: None,
        };
        record::insert(store, &rec)?;
        Ok(Session {
            host,
            store,
            rec,
            dir,
            started: Instant::now(),
            last_progress: 0.0,
            notes: Vec::new(),
            deadline: None,
        })
    }

    /// Progress: elapsed seconds (strictly increasing), with the phase and output counts.
    pub fn progress(&mut self, message: String) {
        let mut p = (self.started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
        if p <= self.last_progress {
            p = self.last_progress + 0.001;
        }
        self.last_progress = p;
        self.host.progress(p, message);
    }

    /// Whether the caller gave up; `Err(Cancelled)` once it has.
    pub(crate) fn check_cancelled(&self) -> Result<(), CaptureError> {
        if self.host.cancelled() {
            return Err(CaptureError::Cancelled);
        }
        Ok(())
    }

    pub(crate) fn artifact(&mut self, name: &str, path: &Path) {
        self.rec
            .artifacts
            .insert(name.to_string(), path.display().to_string());
    }

    fn wait_for_gpu(&mut self) -> Result<GpuTurn<'a>, CaptureError> {
        self.progress("waiting for the GPU queue (one capture at a time)".into());
        self.host.gpu_turn().ok_or(CaptureError::CancelledInQueue)
    }

    /// Run the profiled command (`phase`) with the GPU to itself: its exit
    /// code goes into the record, its logs become the artifacts
    /// `<artifacts>stdout` and `<artifacts>stderr`.
    pub(crate) fn run_profiled(
        &mut self,
        phase: &str,
        spec: CommandSpec,
        log_name: &str,
        artifacts: &str,
    ) -> Result<RunOutcome, CaptureError> {
        let gpu = self.wait_for_gpu()?;
        let out = self.run(phase, spec, log_name)?;
        self.rec.exit_code = out.exit_code.map(i64::from);
        drop(gpu);
        for stream in ["stdout", "stderr"] {
            let log = self.dir.join(format!("{log_name}.{stream}.log"));
            self.artifact(&format!("{artifacts}{stream}"), &log);
        }
        Ok(out)
    }

    /// Run one step (`phase`) of the capture: logs in the run folder, the
    /// caller's cancellation and deadline, progress once a second.
    pub(crate) fn run(
        &mut self,
        phase: &str,
        mut spec: CommandSpec,
        log_name: &str,
    ) -> Result<RunOutcome, CaptureError> {
        spec.stdout_log = Some(self.dir.join(format!("{log_name}.stdout.log")));
        spec.stderr_log = Some(self.dir.join(format!("{log_name}.stderr.log")));
        let limits = RunLimits {
            deadline: match (self.host.deadline(), self.deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            grace: GRACE,
            tail_lines: TAIL_LINES,
        };
        let host = self.host;
        self.progress(format!("{phase}: starting"));
        let outcome = process::run(&spec, &limits, &|| host.cancelled(), &mut |p| {
            let last = p
                .last_line
                .as_deref()
                .map(|l| format!(" · last: {}", l.chars().take(120).collect::<String>()))
                .unwrap_or_default();
            let msg = format!(
                "{phase}: {:.0} s, {} output lines{last}",
                p.elapsed.as_secs_f64(),
                p.stdout_lines + p.stderr_lines
            );
            self.progress(msg);
        })
        .map_err(|source| match source {
            process::RunError::Spawn { .. } => CaptureError::Spawn {
                phase: phase.to_string(),
                source,
            },
            other => CaptureError::Run {
                phase: phase.to_string(),
                source: other,
            },
        })?;
        if let Some(stop) = outcome.stopped {
            return Err(self.stop_error(phase, stop, &outcome));
        }
        Ok(outcome)
    }

    fn stop_error(&self, phase: &str, stop: Stop, outcome: &RunOutcome) -> CaptureError {
        let timed_out = stop == Stop::DeadlinePassed || self.host.timed_out();
        if !timed_out {
            return CaptureError::Cancelled;
        }
        CaptureError::TimedOut {
            phase: phase.to_string(),
            secs: outcome.duration.as_secs_f64(),
            run_id: self.rec.run_id.clone(),
            dir: self.dir.clone(),
            tails: outcome.tails_text(),
        }
    }

    /// Record how the capture ended: `state`, and the error of one that failed.
    pub fn finish(&mut self, state: CaptureState, error: Option<&str>) {
        self.rec.finished_at = Some(now_rfc3339());
        self.rec.duration_ms = Some(self.started.elapsed().as_millis() as i64);
        self.rec.state = state;
        if let Some(e) = error {
            self.rec.error = Some(e.chars().take(4000).collect());
        }
        if let Err(e) = record::update(self.store, &self.rec) {
            tracing::warn!(run_id = %self.rec.run_id, error = %e, "could not record the capture's outcome");
        }
    }

    /// What the capture answers besides its analysis, as of now.
    pub fn info(
        &self,
        profiler_command: Vec<String>,
        profiler: Option<ToolInfo>,
        out: &RunOutcome,
    ) -> CaptureInfo {
        CaptureInfo {
            run_id: self.rec.run_id.clone(),
            run_dir: self.rec.run_dir.clone(),
            command: self.rec.command.clone(),
            profiler_command,
            profiler,
            exit_code: out.exit_code,
            duration_ms: self.started.elapsed().as_millis() as u64,
            stdout: out.stdout.clone(),
            stderr: out.stderr.clone(),
            artifacts: self.rec.artifacts.clone(),
            notes: self.notes.clone(),
        }
    }

    /// The note that the profiled command did not end well, if it did not.
    pub(crate) fn note_exit(&mut self, out: &RunOutcome) {
        if out.exit_code != Some(0) {
            self.notes.push(format!(
                "the profiled command ended with {}; the capture covers the run up to then",
                out.status_text()
            ));
        }
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// What every capture answers besides its analysis.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CaptureInfo {
    /// Id of this capture (`aisp_profile_list`, `aisp_profile_compare`).
    pub run_id: String,
    /// Folder holding the artifacts and logs.
    pub run_dir: String,
    /// The user's command.
    pub command: Vec<String>,
    /// The full command aisp ran (profiler and options included).
    pub profiler_command: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profiler: Option<ToolInfo>,
    /// Exit code of the profiled run (nsys and ncu pass the program's on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    pub stdout: OutputTail,
    pub stderr: OutputTail,
    /// Artifact name → path.
    pub artifacts: BTreeMap<String, String>,
    /// What was not done or is worth knowing (analysis unavailable, non-zero exit, ...).
    pub notes: Vec<String>,
}

/// The text of a run's output for diagnosis: the logs (their last 4 MiB), else the tails.
pub(crate) fn output_text(outcome: &RunOutcome) -> String {
    let mut text = String::new();
    for t in [&outcome.stdout, &outcome.stderr] {
        let from_log = t.log_path.as_ref().and_then(|p| {
            use std::io::{Read, Seek, SeekFrom};
            let mut f = std::fs::File::open(p).ok()?;
            let len = f.metadata().ok()?.len();
            f.seek(SeekFrom::Start(len.saturating_sub(DIAGNOSE_BYTES)))
                .ok()?;
            let mut buf = Vec::new();
            f.read_to_end(&mut buf).ok()?;
            Some(String::from_utf8_lossy(&buf).into_owned())
        });
        text.push_str(&from_log.unwrap_or_else(|| t.text()));
        text.push('\n');
    }
    text
}
