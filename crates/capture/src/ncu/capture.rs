//! An Nsight Compute capture: `ncu` over the command into a report, its raw
//! and details pages imported as CSV beside it and read into a summary; and
//! the import of a report made elsewhere.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aisp_base::Cancel;
use aisp_profile::ncu::{self as ncu_read, NcuSummary};

use super::{NcuOptions, Page, import_args};
use crate::command::UserCommand;
use crate::diagnose;
use crate::error::CaptureError;
use crate::process::{self, CommandSpec, RunLimits, RunOutcome};
use crate::record::{self, CaptureKind};
use crate::session::{GRACE, Session, TAIL_LINES, output_text};
use crate::tools::ToolInfo;

/// The longest an import of a report may take when the caller sets no deadline.
const IMPORT_LIMIT: Duration = Duration::from_secs(300);
/// Lines of ncu's advice kept in the run's record.
const RECORDED_ADVICE: usize = 5;

/// A captured run and what its report says.
#[derive(Debug)]
pub struct NcuCapture {
    /// The full command aisp ran (ncu and its options first).
    pub profiler_command: Vec<String>,
    pub outcome: RunOutcome,
    /// The report's pages read, listing at most `limit` launches one by one;
    /// `None` when no page could be imported or read (a note says why).
    pub summary: Option<NcuSummary>,
}

/// Run `cmd` under ncu into the run folder, import the report's pages
/// (`profile.raw.csv`, `profile.details.csv`) and summarise them.
pub fn capture(
    s: &mut Session<'_>,
    cmd: &UserCommand,
    opts: &NcuOptions,
    ncu: &ToolInfo,
    limit: usize,
) -> Result<NcuCapture, CaptureError> {
    let base = s.dir.join("profile");
    let mut spec = CommandSpec::new(&ncu.path, opts.profile_args(&base, &cmd.argv));
    spec.cwd = cmd.cwd.clone();
    spec.env = cmd.env.clone();
    let profiler_command = spec.argv();
    let out = s.run_profiled("ncu", spec, "ncu-profile", "profile_")?;
    let report = base.with_extension("ncu-rep");
    check_report(&out, &report)?;
    s.artifact("ncu_rep", &report);
    s.note_exit(&out);
    let (raw, details) = import_pages(s, &ncu.path, &report, &cmd.env)?;
    let summary = summarize(s, [raw.as_deref(), details.as_deref()], limit);
    Ok(NcuCapture {
        profiler_command,
        outcome: out,
        summary,
    })
}

/// The failures ncu's output explains (counters not allowed, a profiler that
/// did not start), or no report at all.
fn check_report(out: &RunOutcome, report: &Path) -> Result<(), CaptureError> {
    let text = output_text(out);
    if diagnose::counter_permission_denied(&text) {
        return Err(CaptureError::CounterPermission {
            tails: out.tails_text(),
        });
    }
    if let Some(line) = diagnose::profiler_init_failure(&text) {
        return Err(CaptureError::ProfilerInit {
            line,
            tails: out.tails_text(),
        });
    }
    if !report.is_file() {
        let why = if text.contains("No kernels were profiled") {
            "no kernel matched the filters"
        } else {
            "the command may have failed or launched no CUDA kernel"
        };
        return Err(CaptureError::NoNcuReport {
            status: out.status_text(),
            why,
            tails: out.tails_text(),
        });
    }
    Ok(())
}

/// Import the raw and details pages of a report into CSV files next to it.
fn import_pages(
    s: &mut Session<'_>,
    ncu_path: &str,
    report: &Path,
    env: &[(String, String)],
) -> Result<(Option<String>, Option<String>), CaptureError> {
    let mut pages = (None, None);
    for (page, name) in [(Page::Raw, "raw"), (Page::Details, "details")] {
        let mut spec = CommandSpec::new(ncu_path, import_args(report, page));
        spec.env = env.to_vec();
        let log = format!("ncu-import-{name}");
        let out = s.run(&format!("ncu --import --page {name}"), spec, &log)?;
        let csv_path = s.dir.join(format!("{log}.stdout.log"));
        let text = std::fs::read_to_string(&csv_path).unwrap_or_default();
        if out.exit_code == Some(0) && !text.trim().is_empty() {
            let dest = s.dir.join(format!("profile.{name}.csv"));
            if std::fs::rename(&csv_path, &dest).is_ok() {
                s.artifact(&format!("{name}_csv"), &dest);
            }
            match page {
                Page::Raw => pages.0 = Some(text),
                Page::Details => pages.1 = Some(text),
            }
        } else {
            s.notes.push(format!(
                "`ncu --import --page {name}` failed ({}): {}",
                out.status_text(),
                out.stderr.text().lines().last().unwrap_or("")
            ));
        }
    }
    Ok(pages)
}

/// Read the imported pages; the advice with the most time to save goes into
/// the run's record.
fn summarize(s: &mut Session<'_>, pages: [Option<&str>; 2], limit: usize) -> Option<NcuSummary> {
    let pages: Vec<&str> = pages.into_iter().flatten().collect();
    if pages.is_empty() {
        return None;
    }
    let summary = match ncu_read::summarize(&pages, limit) {
        Ok(sum) => sum,
        Err(e) => {
            s.notes
                .push(format!("the report's CSV could not be read: {e}"));
            return None;
        }
    };
    for a in summary.top_advice.iter().take(RECORDED_ADVICE) {
        s.rec.findings.push(format!(
            "{} on {} ({} launches): up to {:.1} µs to save",
            a.rule,
            a.kernel_name.chars().take(80).collect::<String>(),
            a.launches,
            a.estimated_savings_ns / 1e3
        ));
    }
    Some(summary)
}

/// The raw and details pages of an existing report, through the ncu at
/// `ncu`: each page is written into a scratch folder under `scratch_root`,
/// read, and the folder removed. `deadline` (default five minutes from now)
/// and `cancel` stop the import.
pub fn import_report(
    ncu: &Path,
    report: &Path,
    scratch_root: &Path,
    deadline: Option<Instant>,
    cancel: Cancel<'_>,
) -> Result<Vec<String>, CaptureError> {
    let mut texts = Vec::new();
    for page in [Page::Raw, Page::Details] {
        let dir = scratch_dir(scratch_root)?;
        let log = dir.join("page.csv");
        let mut spec = CommandSpec::new(ncu, import_args(report, page));
        spec.stdout_log = Some(log.clone());
        let limits = RunLimits {
            deadline: Some(deadline.unwrap_or_else(|| Instant::now() + IMPORT_LIMIT)),
            grace: GRACE,
            tail_lines: TAIL_LINES,
        };
        let out = process::run(&spec, &limits, cancel, &mut |_| {}).map_err(|source| {
            CaptureError::Run {
                phase: "ncu --import".into(),
                source,
            }
        })?;
        if out.stopped.is_some() {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(CaptureError::Cancelled);
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        if out.exit_code != Some(0) {
            return Err(CaptureError::ImportFailed {
                report: report.to_path_buf(),
                status: out.status_text(),
                tails: out.tails_text(),
            });
        }
        texts.push(text);
    }
    Ok(texts)
}

fn scratch_dir(root: &Path) -> Result<PathBuf, CaptureError> {
    let dir = root.join(format!(
        "ncu-import-{}",
        record::new_run_id(CaptureKind::Ncu)
    ));
    std::fs::create_dir_all(&dir).map_err(|source| CaptureError::CreateDir {
        dir: dir.clone(),
        source,
    })?;
    Ok(dir)
}
