//! Operations of the `export` domain: reports with charts (HTML, PDF) of a
//! profile, of two profiles before/after, or of benchmark history, and
//! benchmark history as CSV. The work is in [`aisp_report`].

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::profile::open_profile;
use crate::context::OpContext;
use crate::error::OpError;
use crate::outputs;
use crate::registry::{DynOperation, Hints, OpSpec, Operation};
use aisp_base::safe_write::Target;
use aisp_profile::Scope;
use aisp_report::{self as report, Report, ReportError, bench};

pub const OPERATIONS: &[&dyn DynOperation] = &[&Csv, &Html, &Pdf];

/// Writes a file under `$AISP_HOME/reports` or where asked (over MCP and HTTP:
/// under the output roots, see [`crate::outputs`]); changes nothing else.
const WRITES_FILE: Hints = Hints {
    read_only: false,
    destructive: false,
    idempotent: false,
    open_world: false,
};

impl From<ReportError> for OpError {
    fn from(e: ReportError) -> OpError {
        let msg = e.to_string();
        match e {
            ReportError::Exists(_) => OpError::invalid_input(
                msg,
                "Pass overwrite: true to replace it, or another output path.",
            ),
            ReportError::Io { .. } => OpError::invalid_input(
                msg,
                "Check that the output folder is writable, or pass another output path.",
            ),
            ReportError::Profile(p) => p.into(),
            ReportError::Empty(_) => OpError::not_found(msg, bench::NO_HISTORY_HINT),
            ReportError::Pdf(_) | ReportError::Store(_) => OpError::internal(msg),
        }
    }
}

/// Arguments of the HTML and PDF reports.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportInput {
    /// Nsight Systems export (.sqlite/.nsys-rep) or capture run id: a profile report; a folder or glob of per-rank exports: a cross-rank report. Omit for benchmark history.
    #[serde(default)]
    pub profile: Option<String>,
    /// A second profile: a before/after report (`profile` is before).
    #[serde(default)]
    pub compare_to: Option<String>,
    /// Profile: CUDA device id. History: GPU UUID or part of its name.
    #[serde(default)]
    pub device: Option<String>,
    /// Profile: OS process id.
    #[serde(default)]
    pub process: Option<i64>,
    /// Profile window start/end, absolute ns in the export's timebase.
    #[serde(default)]
    pub start_ns: Option<i64>,
    #[serde(default)]
    pub end_ns: Option<i64>,
    /// Profile: trim to the NVTX ranges with this name.
    #[serde(default)]
    pub nvtx_range: Option<String>,
    /// History: only this target / variant / run.
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub variant: Option<String>,
    #[serde(default)]
    pub run_id: Option<String>,
    /// History: most rows, newest first (default 500, at most 10000).
    #[serde(default)]
    pub limit: Option<u32>,
    /// File to write; default `$AISP_HOME/reports/<name>-<time>.<ext>`. Over MCP/HTTP: under the output roots (relative: `$AISP_HOME/exports`).
    #[serde(default)]
    pub output: Option<String>,
    /// Replace `output` if it exists (default false: refuse).
    #[serde(default)]
    pub overwrite: Option<bool>,
}

/// What a report export wrote.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ExportOutput {
    /// `profile`, `comparison`, `ranks` (a folder or glob of per-rank exports) or `benchmarks`.
    pub report: String,
    /// Absolute path of the file written.
    pub path: String,
    pub bytes: u64,
    /// Pages (PDF); 1 for HTML and CSV.
    pub pages: u32,
    /// Charts drawn (HTML, PDF).
    pub charts: u32,
    /// Data rows (CSV).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// The report's key sentence (verdict or top finding).
    pub headline: String,
}

fn limit(l: Option<u32>) -> Result<usize, OpError> {
    match l.unwrap_or(500) {
        n @ 1..=10_000 => Ok(n as usize),
        n => Err(OpError::invalid_input(
            format!("limit must be 1 to 10000, not {n}"),
            "Pass e.g. \"limit\": 500.",
        )),
    }
}

fn history_filter(i: &ReportInput) -> Result<bench::Filter, OpError> {
    Ok(bench::Filter {
        target: i.target.clone(),
        variant: i.variant.clone(),
        run_id: i.run_id.clone(),
        device: i.device.clone(),
        limit: limit(i.limit)?,
    })
}

fn stem(path: &str) -> String {
    Path::new(path)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("profile")
        .to_string()
}

/// Build the report the input asks for, with its kind and file-name stem.
fn build(ctx: &OpContext, i: &ReportInput) -> Result<(Report, &'static str, String), OpError> {
    let history_only = [&i.target, &i.variant, &i.run_id]
        .iter()
        .any(|f| f.is_some())
        || i.limit.is_some();
    match (&i.profile, &i.compare_to) {
        (None, Some(_)) => Err(OpError::invalid_input(
            "compare_to needs profile (the before side)",
            "Pass {\"profile\": \"before.sqlite\", \"compare_to\": \"after.sqlite\"}.",
        )),
        (Some(_), _) if history_only => Err(OpError::invalid_input(
            "target, variant, run_id and limit filter benchmark history, not a profile",
            "Omit profile for a benchmark report, or drop the history filters.",
        )),
        (Some(before), Some(after)) => {
            // Exports, run ids or sets of ranks, as aisp_profile_compare takes them.
            let b = super::profile::open_run(ctx, before)?;
            ctx.check_cancelled()?;
            let a = super::profile::open_run(ctx, after)?;
            ctx.check_cancelled()?;
            let r = report::compare_report_of(&aisp_profile::compare::compare_runs(&b, &a, 12));
            Ok((
                r,
                "comparison",
                format!("{}-vs-{}", stem(before), stem(after)),
            ))
        }
        (Some(path), None) if aisp_profile::ranks::is_set(path) => {
            // A folder or glob of per-rank exports: the cross-rank report.
            if i.device.is_some()
                || i.process.is_some()
                || i.start_ns.is_some()
                || i.end_ns.is_some()
                || i.nvtx_range.is_some()
            {
                return Err(OpError::invalid_input(
                    "device, process, start_ns, end_ns and nvtx_range scope one export, not a set of them",
                    "Drop them for the cross-rank report, or pass one rank's file.",
                ));
            }
            let out = super::profile_ranks::analyse_set(
                ctx,
                &super::profile_ranks::RanksInput::for_set(path),
            )?;
            let set = out
                .set
                .as_ref()
                .ok_or_else(|| OpError::internal("the rank set was digested but not merged"))?;
            let r = report::ranks_report(path, set, &out.lead.findings);
            Ok((r, "ranks", stem(path.trim_end_matches('/'))))
        }
        (Some(path), None) => {
            let p = open_profile(ctx, path)?;
            let device = match i.device.as_deref().map(str::trim) {
                None | Some("") => None,
                Some(d) => Some(d.parse::<i64>().map_err(|_| {
                    OpError::invalid_input(
                        format!("device `{d}` is not a CUDA device id"),
                        "For a profile, device is the export's deviceId, e.g. \"0\".",
                    )
                })?),
            };
            let scope = p
                .resolve(&Scope {
                    device,
                    process: i.process,
                    start_ns: i.start_ns,
                    end_ns: i.end_ns,
                    nvtx_range: i.nvtx_range.clone(),
                })
                .map_err(OpError::from)?;
            ctx.check_cancelled()?;
            let r = report::profile_report(&p, &scope)?;
            Ok((r, "profile", stem(path)))
        }
        (None, None) => {
            if i.process.is_some()
                || i.start_ns.is_some()
                || i.end_ns.is_some()
                || i.nvtx_range.is_some()
            {
                return Err(OpError::invalid_input(
                    "process, start_ns, end_ns and nvtx_range scope a profile",
                    "Pass profile too, or drop them for a benchmark report.",
                ));
            }
            let store = ctx.app().store()?;
            let r = bench::bench_report(store, &history_filter(i)?)?;
            Ok((r, "benchmarks", "benchmarks".into()))
        }
    }
}

/// Where a report goes: the caller's `output` (under the output roots over
/// MCP and HTTP), else `$AISP_HOME/reports/<stem>-<time>.<ext>`.
fn target(ctx: &OpContext, output: Option<&str>, stem: &str, ext: &str) -> Result<Target, OpError> {
    match output.map(str::trim).filter(|o| !o.is_empty()) {
        Some(o) => outputs::file(ctx, "output", o),
        None => outputs::own_file(&report::output_path(
            &ctx.app().config.home,
            None,
            stem,
            ext,
        )),
    }
}

fn write_report(ctx: &OpContext, i: &ReportInput, pdf: bool) -> Result<ExportOutput, OpError> {
    let ext = if pdf { "pdf" } else { "html" };
    let overwrite = i.overwrite.unwrap_or(false);
    // A named output is checked before the work: refused paths cost nothing.
    let named = match i.output.as_deref().map(str::trim).filter(|o| !o.is_empty()) {
        Some(o) => {
            let t = outputs::file(ctx, "output", o)?;
            t.check_free(overwrite)
                .map_err(|e| outputs::write_error("output", e))?;
            Some(t)
        }
        None => None,
    };
    let (r, kind, stem) = build(ctx, i)?;
    ctx.check_cancelled()?;
    let target = match named {
        Some(t) => t,
        None => target(ctx, None, &stem, ext)?,
    };
    let (bytes, pages) = if pdf {
        report::render_pdf(&r)?
    } else {
        (report::render_html(&r).into_bytes(), 1)
    };
    let size = target
        .write(&bytes, overwrite)
        .map_err(|e| outputs::write_error("output", e))?;
    Ok(ExportOutput {
        report: kind.into(),
        path: target.path().display().to_string(),
        bytes: size,
        pages,
        charts: r.charts().count() as u32,
        rows: None,
        headline: r.headline,
    })
}

// ---------------------------------------------------------------- html

pub struct Html;

impl Operation for Html {
    type Input = ReportInput;
    type Output = ExportOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "HTML report with charts",
        summary: "Writes a self-contained HTML report with SVG charts: of a profile, of two profiles before/after, or of benchmark history.",
        description: "With profile: findings, utilization over time, a timeline strip per device (kernels by class, copies, \
NCCL, idle gaps), step times, top kernels and classes, GPU time per NVTX range. With profile and compare_to: the \
before/after verdict and deltas. Without profile: benchmark history (speedups with 95% intervals, roofline with measured \
roofs, Pareto fronts, energy). One file, no network, light and dark, prints well. Returns path, size and charts. Seconds.",
        intents: &[
            "html report",
            "report with charts",
            "share a profile report",
            "benchmark report html",
        ],
        example: r#"{"profile": "train.sqlite"}"#,
        hints: WRITES_FILE,
        ..OpSpec::new("export", "html")
    };

    fn run(&self, ctx: &OpContext, input: ReportInput) -> Result<ExportOutput, OpError> {
        write_report(ctx, &input, false)
    }
}

// ---------------------------------------------------------------- pdf

pub struct Pdf;

impl Operation for Pdf {
    type Input = ReportInput;
    type Output = ExportOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "PDF report with charts",
        summary: "Writes a PDF report with vector charts and searchable text: of a profile, of two profiles before/after, or of benchmark history.",
        description: "The same report as aisp_export_html as A4 PDF: a title page (machine, GPU, versions, time, verdict), \
vector charts, selectable text in an embedded open-licence font, page numbers. profile: a profile report; plus \
compare_to: before/after; neither: benchmark history (filters of aisp_benchmark_history). Returns path, size and \
pages. Seconds.",
        intents: &[
            "pdf report",
            "export pdf",
            "benchmark report",
            "printable report",
        ],
        example: r#"{"profile": "before.sqlite", "compare_to": "after.sqlite"}"#,
        hints: WRITES_FILE,
        cli_aliases: &["bench report"],
        ..OpSpec::new("export", "pdf")
    };

    fn run(&self, ctx: &OpContext, input: ReportInput) -> Result<ExportOutput, OpError> {
        write_report(ctx, &input, true)
    }
}

// ---------------------------------------------------------------- csv

pub struct Csv;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CsvInput {
    /// Only this target / variant / run.
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub variant: Option<String>,
    #[serde(default)]
    pub run_id: Option<String>,
    /// GPU UUID or part of its name.
    #[serde(default)]
    pub device: Option<String>,
    /// Most results, newest first (default 1000, at most 10000).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Add one row per timed repetition (default false).
    #[serde(default)]
    pub detailed: Option<bool>,
    /// File to write; default `$AISP_HOME/reports/benchmarks-<time>.csv`. Over MCP/HTTP: under the output roots (relative: `$AISP_HOME/exports`).
    #[serde(default)]
    pub output: Option<String>,
    /// Replace `output` if it exists (default false: refuse).
    #[serde(default)]
    pub overwrite: Option<bool>,
}

impl Operation for Csv {
    type Input = CsvInput;
    type Output = ExportOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Benchmark history as CSV",
        summary: "Writes benchmark history as RFC 4180 CSV: one row per result with units in the column names; detailed adds every repetition.",
        description: "Rows of the store's benchmark results (filters of aisp_benchmark_history), newest first: run, GPU, \
versions, target, variant, role, check, metric and value, % of roof, median/p10/p90 ms, CV, repetitions, energy, and \
the speedup over the baseline with its 95% interval. detailed adds a row per timed repetition (record = repetition). \
Columns are documented in README.md. Profiles: aisp_profile_export. Instant.",
        intents: &["export csv", "benchmark csv", "spreadsheet of results"],
        example: r#"{"target": "gemm", "detailed": true}"#,
        hints: WRITES_FILE,
        cli_aliases: &["bench export"],
        ..OpSpec::new("export", "csv")
    };

    fn run(&self, ctx: &OpContext, i: CsvInput) -> Result<ExportOutput, OpError> {
        let limit = match i.limit.unwrap_or(1000) {
            n @ 1..=10_000 => n as usize,
            n => {
                return Err(OpError::invalid_input(
                    format!("limit must be 1 to 10000, not {n}"),
                    "Pass e.g. \"limit\": 1000.",
                ));
            }
        };
        let store = ctx.app().store()?;
        let h = bench::collect(
            store,
            &bench::Filter {
                target: i.target,
                variant: i.variant,
                run_id: i.run_id,
                device: i.device,
                limit,
            },
        )?;
        if h.rows.is_empty() {
            return Err(ReportError::Empty(bench::NO_HISTORY.into()).into());
        }
        let overwrite = i.overwrite.unwrap_or(false);
        let target = target(ctx, i.output.as_deref(), "benchmarks", "csv")?;
        target
            .check_free(overwrite)
            .map_err(|e| outputs::write_error("output", e))?;
        let (bytes, rows) = report::render_csv(&h, i.detailed.unwrap_or(false))
            .map_err(|e| OpError::internal(format!("CSV writer failed: {e}")))?;
        let size = target
            .write(&bytes, overwrite)
            .map_err(|e| outputs::write_error("output", e))?;
        Ok(ExportOutput {
            report: "benchmarks".into(),
            path: target.path().display().to_string(),
            bytes: size,
            pages: 1,
            charts: 0,
            rows: Some(rows),
            headline: format!("{rows} rows of {} results from {} runs", h.rows.len(), {
                let mut r: Vec<&str> = h.rows.iter().map(|r| r.run_id.as_str()).collect();
                r.sort_unstable();
                r.dedup();
                r.len()
            }),
        })
    }
}
