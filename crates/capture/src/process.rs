//! Running a user's command for a capture: in its own process group, with
//! stdout/stderr streamed to log files while bounded tails and line counts are
//! kept, progress reported about once a second, and the whole group
//! terminated (SIGTERM, then SIGKILL after a grace period) when the caller
//! cancels or the deadline passes.
//!
//! A process group rather than the child alone because profilers and
//! launchers fork: `nsys` starts the application, `torchrun` starts one
//! worker per GPU, and a worker may start data-loader processes. Killing only
//! the leader would leave those holding the GPU and the output pipes.

use aisp_base::Cancel;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Longest line kept in a tail; longer lines are cut (the log keeps them whole).
const MAX_LINE_CHARS: usize = 2_000;
/// Most bytes written to one log file; the rest is counted but not written.
const LOG_CAP_BYTES: u64 = 1 << 30;
/// How long to wait for the output readers once the processes are gone. A
/// process that left the group (setsid) may hold a pipe open for ever.
const READER_JOIN: Duration = Duration::from_secs(1);
/// How often progress is reported while the command runs.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(20);

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct CommandSpec {
    /// The program: a path, or a name looked up on PATH.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Working directory; default the server's.
    pub cwd: Option<PathBuf>,
    /// Variables added to (or replacing in) the inherited environment.
    pub env: Vec<(String, String)>,
    /// Where to write the whole stdout, when wanted.
    pub stdout_log: Option<PathBuf>,
    /// Where to write the whole stderr, when wanted.
    pub stderr_log: Option<PathBuf>,
}

impl CommandSpec {
    pub fn new(program: impl Into<PathBuf>, args: Vec<String>) -> CommandSpec {
        CommandSpec {
            program: program.into(),
            args,
            ..CommandSpec::default()
        }
    }

    /// The argv as one list of strings (for records and messages).
    pub fn argv(&self) -> Vec<String> {
        std::iter::once(self.program.display().to_string())
            .chain(self.args.iter().cloned())
            .collect()
    }
}

/// Bounds on a run.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// Stop the command when this instant passes.
    pub deadline: Option<Instant>,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Lines kept at the end of each stream.
    pub tail_lines: usize,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            deadline: None,
            grace: Duration::from_secs(2),
            tail_lines: 40,
        }
    }
}

/// Why a run was stopped before it finished on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The caller cancelled.
    Cancelled,
    /// The deadline passed.
    DeadlinePassed,
}

/// One output stream as seen by the end of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutputTail {
    /// Lines written (a final line without a newline counts).
    pub lines: u64,
    pub bytes: u64,
    /// The last lines, oldest first, each cut at 2,000 characters.
    pub tail: Vec<String>,
    /// The file holding the whole stream, when it was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_path: Option<String>,
}

impl OutputTail {
    /// The tail as one block of text.
    pub fn text(&self) -> String {
        self.tail.join("\n")
    }
}

/// What happened to a run.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Exit status of the command, when it exited (not killed by a signal).
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    pub duration: Duration,
    pub stdout: OutputTail,
    pub stderr: OutputTail,
    /// Set when the run was stopped by cancellation or the deadline.
    pub stopped: Option<Stop>,
    /// Processes of the group outlived the command and were terminated.
    pub stragglers_terminated: bool,
}

impl RunOutcome {
    pub fn succeeded(&self) -> bool {
        self.stopped.is_none() && self.exit_code == Some(0)
    }

    /// stdout and stderr tails, labelled, for error messages.
    pub fn tails_text(&self) -> String {
        let mut out = String::new();
        for (name, t) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if t.tail.is_empty() {
                continue;
            }
            out.push_str(&format!("\n--- {name} (last {} lines) ---\n", t.tail.len()));
            out.push_str(&t.text());
        }
        out
    }

    /// How it ended, in words ("exit code 3", "killed by signal 9").
    pub fn status_text(&self) -> String {
        match (self.exit_code, self.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            (None, None) => "unknown status".into(),
        }
    }
}

/// A progress report while the command runs.
#[derive(Debug, Clone)]
pub struct RunProgress {
    pub elapsed: Duration,
    pub stdout_lines: u64,
    pub stderr_lines: u64,
    /// The newest line on either stream (cut), to say what the program is doing.
    pub last_line: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("cannot create the log file {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("lost track of the process: {0}")]
    Wait(std::io::Error),
}

/// The state one reader thread shares with the runner.
#[derive(Default)]
struct Stream {
    lines: u64,
    bytes: u64,
    tail: VecDeque<String>,
    last: Option<String>,
}

type Shared = Arc<Mutex<Stream>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Stream> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

fn cut_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    // Progress bars rewrite one line with \r: the last rewrite is what a person saw.
    let text = text.rsplit('\r').next().unwrap_or(text);
    if text.chars().count() > MAX_LINE_CHARS {
        let mut s: String = text.chars().take(MAX_LINE_CHARS).collect();
        s.push('…');
        s
    } else {
        text.to_string()
    }
}

/// Read a stream to its end, keeping counts and a tail, and writing the log.
fn pump(
    source: impl Read,
    shared: Shared,
    tail_lines: usize,
    mut log: Option<BufWriter<File>>,
    done: mpsc::Sender<()>,
) {
    let mut reader = BufReader::new(source);
    let mut buf = Vec::with_capacity(4096);
    let mut logged: u64 = 0;
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if let Some(w) = log.as_mut()
                    && logged < LOG_CAP_BYTES
                {
                    let room = (LOG_CAP_BYTES - logged).min(n as u64) as usize;
                    if w.write_all(&buf[..room]).is_err() {
                        log = None;
                    }
                    logged += room as u64;
                }
                let line = cut_line(&buf);
                let mut s = lock(&shared);
                s.lines += 1;
                s.bytes += n as u64;
                if s.tail.len() == tail_lines.max(1) {
                    s.tail.pop_front();
                }
                if !line.trim().is_empty() {
                    s.last = Some(line.clone());
                }
                s.tail.push_back(line);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    if let Some(mut w) = log {
        let _ = w.flush();
    }
    let _ = done.send(());
}

fn open_log(path: &Option<PathBuf>) -> Result<Option<BufWriter<File>>, RunError> {
    match path {
        None => Ok(None),
        Some(p) => File::create(p)
            .map(|f| Some(BufWriter::new(f)))
            .map_err(|source| RunError::Log {
                path: p.clone(),
                source,
            }),
    }
}

/// Run `spec` to completion, or until `cancelled()` says stop or the deadline
/// passes; then terminate the whole process group. `progress` is called on
/// this thread about once a second.
pub fn run(
    spec: &CommandSpec,
    limits: &RunLimits,
    cancelled: Cancel<'_>,
    progress: &mut dyn FnMut(&RunProgress),
) -> Result<RunOutcome, RunError> {
    let stdout_log = open_log(&spec.stdout_log)?;
    let stderr_log = open_log(&spec.stderr_log)?;

    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A new process group whose id is the child's pid: one signal reaches
        // every process the command starts (unless one calls setsid).
        .process_group(0);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|source| RunError::Spawn {
        program: spec.program.display().to_string(),
        source,
    })?;
    let pgid = child.id() as i32;
    tracing::debug!(pid = pgid, argv = ?spec.argv(), "capture command started");

    let (done_tx, done_rx) = mpsc::channel();
    let out_state: Shared = Arc::default();
    let err_state: Shared = Arc::default();
    let mut readers = 0;
    if let Some(out) = child.stdout.take() {
        let (s, tx) = (out_state.clone(), done_tx.clone());
        let tail = limits.tail_lines;
        std::thread::Builder::new()
            .name("aisp-capture-stdout".into())
            .spawn(move || pump(out, s, tail, stdout_log, tx))
            .ok();
        readers += 1;
    }
    if let Some(err) = child.stderr.take() {
        let (s, tx) = (err_state.clone(), done_tx.clone());
        let tail = limits.tail_lines;
        std::thread::Builder::new()
            .name("aisp-capture-stderr".into())
            .spawn(move || pump(err, s, tail, stderr_log, tx))
            .ok();
        readers += 1;
    }
    drop(done_tx);

    let report = |progress: &mut dyn FnMut(&RunProgress)| {
        let (o, e) = (lock(&out_state), lock(&err_state));
        progress(&RunProgress {
            elapsed: started.elapsed(),
            stdout_lines: o.lines,
            stderr_lines: e.lines,
            last_line: e.last.clone().or_else(|| o.last.clone()),
        });
    };

    let mut stopped = None;
    let mut last_report = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                terminate_group(pgid, &mut child, limits.grace);
                return Err(RunError::Wait(e));
            }
        }
        if cancelled() {
            stopped = Some(Stop::Cancelled);
        } else if limits.deadline.is_some_and(|d| Instant::now() >= d) {
            stopped = Some(Stop::DeadlinePassed);
        }
        if stopped.is_some() {
            tracing::info!(pid = pgid, reason = ?stopped, "stopping capture command");
            break terminate_group(pgid, &mut child, limits.grace);
        }
        if last_report.elapsed() >= PROGRESS_EVERY {
            report(progress);
            last_report = Instant::now();
        }
        std::thread::sleep(POLL);
    };

    // The command is done; anything left in its group would keep the GPU and
    // the pipes. Give it a moment to exit on its own, then terminate it.
    let mut stragglers_terminated = false;
    if stopped.is_none() {
        let until = Instant::now() + Duration::from_millis(200);
        while !group_members(pgid).is_empty() && Instant::now() < until {
            std::thread::sleep(POLL);
        }
        if !group_members(pgid).is_empty() {
            stragglers_terminated = true;
            tracing::info!(
                pid = pgid,
                "terminating processes left by the capture command"
            );
            terminate_group(pgid, &mut child, limits.grace);
        }
    }

    let join_until = Instant::now() + READER_JOIN;
    for _ in 0..readers {
        let left = join_until.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            tracing::warn!(
                pid = pgid,
                "an output pipe is still open after the command ended"
            );
            break;
        }
    }

    let finish = |s: &Shared, log: &Option<PathBuf>| {
        let s = lock(s);
        OutputTail {
            lines: s.lines,
            bytes: s.bytes,
            tail: s.tail.iter().cloned().collect(),
            log_path: log.as_ref().map(|p| p.display().to_string()),
        }
    };
    Ok(RunOutcome {
        exit_code: status.code(),
        signal: status.signal(),
        duration: started.elapsed(),
        stdout: finish(&out_state, &spec.stdout_log),
        stderr: finish(&err_state, &spec.stderr_log),
        stopped,
        stragglers_terminated,
    })
}

/// Send `signal` to every process of the group.
fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; it has no
    // memory-safety preconditions.
    let rc = unsafe { libc::kill(-pgid, signal) };
    if rc != 0 {
        tracing::debug!(pgid, signal, err = %std::io::Error::last_os_error(), "kill(-pgid) failed");
    }
}

/// SIGTERM the group, wait up to `grace` for it to empty, then SIGKILL it.
/// Returns the leader's exit status (reaped).
fn terminate_group(pgid: i32, child: &mut Child, grace: Duration) -> ExitStatus {
    signal_group(pgid, libc::SIGTERM);
    let until = Instant::now() + grace;
    let mut status = None;
    while Instant::now() < until {
        if status.is_none() {
            status = child.try_wait().ok().flatten();
        }
        if status.is_some() && group_members(pgid).is_empty() {
            return status.unwrap_or_else(|| ExitStatus::from_raw(0));
        }
        std::thread::sleep(POLL);
    }
    signal_group(pgid, libc::SIGKILL);
    match status {
        Some(s) => s,
        // SIGKILL cannot be caught: the wait returns promptly.
        None => child
            .wait()
            .unwrap_or_else(|_| ExitStatus::from_raw(libc::SIGKILL)),
    }
}

/// Live (non-zombie) processes whose process group is `pgid`, from /proc.
/// Zombies are excluded: they hold nothing and, in containers whose init does
/// not reap, never go away.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        // No /proc: fall back to asking the kernel whether the group exists.
        // SAFETY: signal 0 only checks for existence and permission.
        let alive = unsafe { libc::kill(-pgid, 0) } == 0;
        return if alive { vec![pgid] } else { Vec::new() };
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        if let Some((state, pgrp)) = parse_stat(&stat)
            && pgrp == pgid
            && state != 'Z'
            && state != 'X'
        {
            out.push(pid);
        }
    }
    out
}

/// State and process group from a /proc/<pid>/stat line. The command name is
/// in parentheses and may itself contain spaces or parentheses, so fields are
/// counted after the last `)`.
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn sh(script: &str) -> CommandSpec {
        CommandSpec::new("/bin/sh", vec!["-c".into(), script.into()])
    }

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| parse_stat(&s))
            .is_some_and(|(state, _)| state != 'Z' && state != 'X')
    }

    #[test]
    fn output_is_counted_tailed_and_logged() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = sh(
            "i=1; while [ $i -le 100 ]; do echo line $i; i=$((i+1)); done; echo oops >&2; printf 'no newline'; exit 3",
        );
        spec.stdout_log = Some(dir.path().join("out.log"));
        let limits = RunLimits {
            tail_lines: 5,
            ..RunLimits::default()
        };
        let out = run(&spec, &limits, &|| false, &mut |_| {}).unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert!(!out.succeeded());
        assert_eq!(out.stdout.lines, 101);
        assert_eq!(
            out.stdout.tail,
            vec!["line 97", "line 98", "line 99", "line 100", "no newline"]
        );
        assert_eq!(out.stderr.lines, 1);
        assert_eq!(out.stderr.tail, vec!["oops"]);
        let log = std::fs::read_to_string(dir.path().join("out.log")).unwrap();
        assert_eq!(log.lines().count(), 101);
        assert!(log.ends_with("line 100\nno newline"));
        // 9 lines "line N\n" of 7 bytes, 90 of 8, "line 100\n" 9, and 10 bytes.
        assert_eq!(out.stdout.bytes, 9 * 7 + 90 * 8 + 9 + 10);
        assert_eq!(out.status_text(), "exit code 3");
    }

    #[test]
    fn cwd_and_added_environment_reach_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = sh("pwd; echo \"$AISP_TEST_VAR\"");
        spec.cwd = Some(dir.path().to_path_buf());
        spec.env = vec![("AISP_TEST_VAR".into(), "hello world".into())];
        let out = run(&spec, &RunLimits::default(), &|| false, &mut |_| {}).unwrap();
        let cwd = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            out.stdout.tail,
            vec![cwd.display().to_string(), "hello world".to_string()]
        );
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let spec = CommandSpec::new("/nonexistent/aisp-no-such-program", vec![]);
        let err = run(&spec, &RunLimits::default(), &|| false, &mut |_| {}).unwrap_err();
        assert!(matches!(err, RunError::Spawn { .. }), "{err}");
    }

    /// A child that starts a grandchild: cancelling must end both, and
    /// promptly even though the shell ignores nothing.
    #[test]
    fn cancellation_terminates_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        let spec = sh(&format!(
            "sleep 300 & echo $! > {p}.tmp; echo $$ >> {p}.tmp; mv {p}.tmp {p}; echo started; wait",
            p = pids.display()
        ));
        let stop = AtomicBool::new(false);
        let pids2 = pids.clone();
        let started = Instant::now();
        let mut reports = 0;
        let out = run(
            &spec,
            &RunLimits::default(),
            &|| {
                if pids2.exists() && started.elapsed() > Duration::from_millis(1200) {
                    stop.store(true, Ordering::SeqCst);
                }
                stop.load(Ordering::SeqCst)
            },
            &mut |p| {
                reports += 1;
                assert_eq!(p.stdout_lines, 1);
                assert_eq!(p.last_line.as_deref(), Some("started"));
            },
        )
        .unwrap();
        assert_eq!(out.stopped, Some(Stop::Cancelled));
        assert!(reports >= 1, "progress was reported");
        assert!(started.elapsed() < Duration::from_secs(10));
        let text = std::fs::read_to_string(&pids).unwrap();
        let ids: Vec<i32> = text.lines().map(|l| l.trim().parse().unwrap()).collect();
        assert_eq!(ids.len(), 2);
        // The shell is the leader: its pid is the group id.
        std::thread::sleep(Duration::from_millis(100));
        for pid in &ids {
            assert!(!alive(*pid), "process {pid} survived the cancellation");
        }
        assert!(group_members(ids[1]).is_empty());
    }

    /// A command that ignores SIGTERM is killed after the grace period.
    #[test]
    fn the_deadline_stops_a_command_that_ignores_sigterm() {
        let spec = sh("trap '' TERM; echo waiting; while true; do sleep 0.1; done");
        let limits = RunLimits {
            deadline: Some(Instant::now() + Duration::from_millis(500)),
            grace: Duration::from_millis(500),
            tail_lines: 10,
        };
        let started = Instant::now();
        let out = run(&spec, &limits, &|| false, &mut |_| {}).unwrap();
        let took = started.elapsed();
        assert_eq!(out.stopped, Some(Stop::DeadlinePassed));
        assert_eq!(out.signal, Some(libc::SIGKILL));
        assert!(took >= Duration::from_millis(1000), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        assert_eq!(out.stdout.tail, vec!["waiting"]);
        assert!(
            out.tails_text()
                .contains("--- stdout (last 1 lines) ---\nwaiting")
        );
    }

    /// A background process the command leaves behind is terminated too.
    #[test]
    fn processes_left_behind_are_terminated() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let spec = sh(&format!(
            "sleep 300 > /dev/null 2>&1 & echo $! > {}; exit 0",
            pid_file.display()
        ));
        let out = run(&spec, &RunLimits::default(), &|| false, &mut |_| {}).unwrap();
        assert_eq!(out.exit_code, Some(0));
        assert!(out.stragglers_terminated);
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(!alive(pid));
    }

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        assert_eq!(
            parse_stat("1234 (my (odd) name) S 1 1234 1234 0 -1"),
            Some(('S', 1234))
        );
        assert_eq!(parse_stat("garbage"), None);
    }
}
