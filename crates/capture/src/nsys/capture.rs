//! An Nsight Systems capture: `nsys profile` of the command (or of every rank
//! inside a launcher), then `nsys export` of each report to SQLite. What the
//! exports say is for the profile tools to answer.

use std::path::{Path, PathBuf};

use super::{NsysOptions, export_args, per_rank_argv};
use crate::command::UserCommand;
use crate::diagnose;
use crate::error::CaptureError;
use crate::process::{CommandSpec, RunOutcome};
use crate::session::{Session, output_text};
use crate::tools::ToolInfo;

/// A captured and exported run.
#[derive(Debug)]
pub struct NsysCapture {
    /// The full command aisp ran (nsys and its options first).
    pub profiler_command: Vec<String>,
    pub outcome: RunOutcome,
    /// The SQLite export.
    pub sqlite: PathBuf,
}

/// A per-rank capture: the launcher's run and the exports that were written.
#[derive(Debug)]
pub struct RankCaptures {
    pub profiler_command: Vec<String>,
    pub outcome: RunOutcome,
    /// One SQLite export per rank that wrote a report, in rank-file order.
    pub exports: Vec<String>,
}

/// Run `cmd` under `nsys profile` into the run folder, then export the report.
pub fn capture(
    s: &mut Session<'_>,
    cmd: &UserCommand,
    opts: &NsysOptions,
    nsys: &ToolInfo,
) -> Result<NsysCapture, CaptureError> {
    let base = s.dir.join("profile");
    let args = opts.profile_args(&base, &cmd.argv);
    let mut spec = CommandSpec::new(&nsys.path, args);
    spec.cwd = cmd.cwd.clone();
    spec.env = cmd.env.iter().cloned().chain(opts.env()).collect();
    let profiler_command = spec.argv();
    let out = s.run_profiled("nsys profile", spec, "nsys-profile", "profile_")?;

    let report = base.with_extension("nsys-rep");
    if !report.is_file() {
        return Err(no_report(s, &base, &out));
    }
    s.artifact("nsys_rep", &report);
    s.note_exit(&out);

    let sqlite = base.with_extension("sqlite");
    let mut export = CommandSpec::new(&nsys.path, export_args(&report, &sqlite));
    export.env = cmd.env.clone();
    let ex = s.run("nsys export", export, "nsys-export")?;
    if !sqlite.is_file() {
        return Err(CaptureError::ExportFailed {
            sqlite,
            report,
            status: ex.status_text(),
            tails: ex.tails_text(),
        });
    }
    s.artifact("sqlite", &sqlite);
    Ok(NsysCapture {
        profiler_command,
        outcome: out,
        sqlite,
    })
}

/// Why nsys left no report: its importer's missing libraries (the raw
/// capture is kept), or a run that never reached CUDA.
fn no_report(s: &mut Session<'_>, base: &Path, out: &RunOutcome) -> CaptureError {
    let text = output_text(out);
    let qdstrm = base.with_extension("qdstrm");
    let Some(failure) = diagnose::importer_failure(&text) else {
        return CaptureError::NoNsysReport {
            status: out.status_text(),
            tails: out.tails_text(),
        };
    };
    if qdstrm.is_file() {
        s.artifact("qdstrm", &qdstrm);
    }
    CaptureError::ImporterMissing {
        failure,
        qdstrm,
        run_id: s.rec.run_id.clone(),
        tails: out.tails_text(),
    }
}

/// Per-rank capture: nsys inside the launcher, one report per rank, each
/// exported (a rank whose export wrote nothing is a note).
pub fn capture_per_rank(
    s: &mut Session<'_>,
    cmd: &UserCommand,
    launcher: &[String],
    opts: &NsysOptions,
    nsys: &ToolInfo,
) -> Result<RankCaptures, CaptureError> {
    let argv = per_rank_argv(launcher, Path::new(&nsys.path), opts, &s.dir, &cmd.argv);
    let mut spec = CommandSpec::new(PathBuf::from(&argv[0]), argv[1..].to_vec());
    spec.cwd = cmd.cwd.clone();
    spec.env = cmd.env.iter().cloned().chain(opts.env()).collect();
    let profiler_command = spec.argv();
    let out = s.run_profiled(
        "launcher with nsys per rank",
        spec,
        "nsys-profile",
        "profile_",
    )?;
    let reports = rank_reports(&s.dir);
    if reports.is_empty() {
        return Err(CaptureError::NoRankReport {
            status: out.status_text(),
            tails: out.tails_text(),
        });
    }
    s.note_exit(&out);
    let mut exports = Vec::new();
    for report in &reports {
        s.check_cancelled()?;
        let stem = report
            .file_stem()
            .and_then(|n| n.to_str())
            .unwrap_or("rank")
            .to_string();
        let sqlite = report.with_extension("sqlite");
        s.artifact(&format!("nsys_rep_{stem}"), report);
        let mut export = CommandSpec::new(&nsys.path, export_args(report, &sqlite));
        export.env = cmd.env.clone();
        let ex = s.run("nsys export", export, &format!("nsys-export-{stem}"))?;
        if sqlite.is_file() {
            s.artifact(&format!("sqlite_{stem}"), &sqlite);
            exports.push(sqlite.display().to_string());
        } else {
            s.notes.push(format!(
                "nsys export of {} wrote nothing ({})",
                report.display(),
                ex.status_text()
            ));
        }
    }
    Ok(RankCaptures {
        profiler_command,
        outcome: out,
        exports,
    })
}

/// The `rank_*.nsys-rep` reports in `dir`, sorted.
fn rank_reports(dir: &Path) -> Vec<PathBuf> {
    let mut reports: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.extension().is_some_and(|e| e == "nsys-rep")
                        && p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("rank_"))
                })
                .collect()
        })
        .unwrap_or_default();
    reports.sort();
    reports
}
