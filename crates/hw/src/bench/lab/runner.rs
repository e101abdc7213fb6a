//! The parent side of the kernel lab: start the worker process, feed it the
//! job, read its events with a time limit, and turn a hang (killed), a crash
//! (signal or exit without a report) or a CUDA error (the worker exits) into
//! that kernel's failure before starting a fresh worker for the rest. The
//! calling process never creates a CUDA context for caller code, so its own
//! GPU state stays healthy whatever the kernels do.

use aisp_base::Cancel;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::worker::{Event, ItemResult, Job, items_per_size};
use crate::bench::BenchError;
use crate::bench::device::DeviceInfo;
use crate::bench::roofs::Roofs;

/// Environment variable naming another worker program (tests use a fake
/// that needs no GPU); default: this binary's hidden subcommand.
pub const WORKER_ENV: &str = "AISP_KERNEL_LAB_WORKER";
pub const WORKER_SUBCOMMAND: &str = "__kernel-lab-worker";

pub struct Options<'a> {
    /// The longest a kernel (compile, check and timing) may go without reporting.
    pub time_limit: Duration,
    pub cancelled: Cancel<'a>,
    pub progress: &'a dyn Fn(usize, usize, &str),
}

/// Everything the workers reported.
#[derive(Debug, Default)]
pub struct Outcome {
    pub device: Option<DeviceInfo>,
    pub nvrtc: Option<String>,
    pub cublas: Option<String>,
    pub cuda_driver: Option<String>,
    pub roofs: Roofs,
    /// By item number: size * (1 + candidates) + (0 reference | 1 + candidate).
    pub items: Vec<Option<ItemResult>>,
    pub workers_started: u32,
    pub notes: Vec<String>,
}

/// The worker command: `$AISP_KERNEL_LAB_WORKER` or `<this exe> __kernel-lab-worker`.
pub fn worker_command() -> Result<(OsString, Vec<OsString>), BenchError> {
    if let Some(p) = std::env::var_os(WORKER_ENV).filter(|p| !p.is_empty()) {
        return Ok((p, Vec::new()));
    }
    let exe = std::env::current_exe().map_err(|e| {
        BenchError::Other(format!(
            "cannot find the aisp executable to start a worker: {e}"
        ))
    })?;
    Ok((exe.into_os_string(), vec![WORKER_SUBCOMMAND.into()]))
}

enum Msg {
    Line(String),
    Eof,
}

fn tail(s: &str, n: usize) -> String {
    let t: Vec<char> = s.chars().collect();
    t[t.len().saturating_sub(n)..]
        .iter()
        .collect::<String>()
        .trim()
        .to_string()
}

fn failed(job: &Job, item: usize, why: String) -> ItemResult {
    let per = items_per_size(&job.spec);
    let (size, k) = (item / per, item % per);
    let kernel = if k == 0 {
        job.spec.reference().map(|r| r.label()).unwrap_or_default()
    } else {
        job.spec
            .candidates()
            .get(k - 1)
            .map(|c| c.label().to_string())
            .unwrap_or_default()
    };
    ItemResult {
        size,
        kernel,
        reference: k == 0,
        failure: Some(why),
        ..Default::default()
    }
}

/// Run `job` to the end across as many workers as failures need.
pub fn run(mut job: Job, opts: &Options) -> Result<Outcome, BenchError> {
    let per = items_per_size(&job.spec);
    let total = per * job.spec.points().len();
    let mut out = Outcome {
        items: vec![None; total],
        ..Default::default()
    };
    let (program, args) = worker_command()?;
    job.start_at = 0;
    while job.start_at < total {
        if (opts.cancelled)() {
            return Err(BenchError::Cancelled);
        }
        if out.workers_started as usize > total + 1 {
            return Err(BenchError::Other(
                "the kernel-lab worker keeps failing; giving up".into(),
            ));
        }
        job.measure_roofs =
            job.measure_roofs && out.roofs.memory.is_none() && out.workers_started == 0;
        out.workers_started += 1;
        let mut child = Command::new(&program)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| BenchError::Other(format!("cannot start the kernel-lab worker: {e}")))?;
        let line = serde_json::to_string(&job).map_err(|e| BenchError::Other(e.to_string()))?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(line.as_bytes());
            let _ = stdin.write_all(b"\n");
        }
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take();
        std::thread::spawn(move || {
            if let Some(s) = stdout {
                for l in BufReader::new(s).lines() {
                    match l {
                        Ok(l) => {
                            if tx.send(Msg::Line(l)).is_err() {
                                return;
                            }
                        }
                        Err(_) => break,
                    }
                }
            }
            let _ = tx.send(Msg::Eof);
        });
        let stderr = child.stderr.take();
        let err_reader = std::thread::spawn(move || {
            let mut buf = String::new();
            if let Some(mut s) = stderr {
                // Bounded: keep reading (so the child never blocks) but hold the last 64 KiB.
                let mut chunk = [0u8; 8192];
                while let Ok(n) = s.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    buf.push_str(&String::from_utf8_lossy(&chunk[..n]));
                    if buf.len() > 65536 {
                        buf = tail(&buf, 32768);
                    }
                }
            }
            buf
        });
        let mut current: Option<usize> = None;
        let began_at = job.start_at;
        let mut last = Instant::now();
        let mut fatal: Option<String> = None;
        let mut killed = false;
        loop {
            if (opts.cancelled)() {
                let _ = child.kill();
                let _ = child.wait();
                return Err(BenchError::Cancelled);
            }
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Msg::Line(l)) => {
                    last = Instant::now();
                    let Ok(ev) = serde_json::from_str::<Event>(&l) else {
                        tracing::debug!(line = %l, "kernel-lab worker wrote a line that is not an event");
                        continue;
                    };
                    match ev {
                        Event::Device {
                            info,
                            nvrtc,
                            cublas,
                            cuda_driver,
                        } => {
                            out.device = Some(info);
                            out.nvrtc = Some(nvrtc);
                            out.cublas = cublas;
                            out.cuda_driver = cuda_driver;
                        }
                        Event::Roofs { roofs } => out.roofs = roofs,
                        Event::Start { item } => {
                            current = Some(item);
                            let label = failed(&job, item, String::new()).kernel;
                            (opts.progress)(item, total, &label);
                        }
                        Event::Item { item, result } => {
                            if item < total {
                                out.items[item] = Some(result);
                            }
                            current = None;
                            job.start_at = job.start_at.max(item + 1);
                        }
                        Event::Fatal { error } => fatal = Some(error),
                    }
                }
                Ok(Msg::Eof) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if last.elapsed() >= opts.time_limit {
                        let _ = child.kill();
                        killed = true;
                        break;
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        let status = child.wait().ok();
        let stderr = err_reader.join().unwrap_or_default();
        let limit = opts.time_limit.as_secs_f64();
        match current {
            Some(item) => {
                let why = if killed {
                    format!(
                        "killed after {limit:.0} s without finishing (time_limit_s): a hang, an endless loop, or too slow for the limit"
                    )
                } else {
                    let how = status
                        .map(|s| describe_exit(&s))
                        .unwrap_or_else(|| "ended".into());
                    let t = tail(&stderr, 600);
                    format!(
                        "the worker running this kernel crashed ({how}){}",
                        if t.is_empty() {
                            String::new()
                        } else {
                            format!(": {t}")
                        }
                    )
                };
                out.items[item] = Some(failed(&job, item, why));
                job.start_at = item + 1;
            }
            // Stopped after reporting a kernel's CUDA error: go on in a fresh worker.
            None if job.start_at < total && job.start_at > began_at => {}
            None if job.start_at < total => {
                // Ended between kernels without reporting anything: a setup failure.
                let why = fatal.unwrap_or_else(|| {
                    let how = status.map(|s| describe_exit(&s)).unwrap_or_else(|| "ended".into());
                    if killed {
                        format!("the worker was killed after {limit:.0} s without reporting (during setup)")
                    } else {
                        format!("the worker {how} before finishing: {}", tail(&stderr, 600))
                    }
                });
                return Err(BenchError::Other(why));
            }
            None => {}
        }
    }
    Ok(out)
}

fn describe_exit(s: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "ended".into(),
    }
}
