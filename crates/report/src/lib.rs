//! Reports: a document model ([`Report`]: title page facts, sections of
//! paragraphs, tables, charts and findings) filled from the analysis modules,
//! and three writers: self-contained HTML ([`render_html`]), PDF with vector
//! charts and an embedded OFL font ([`render_pdf`]), and CSV of benchmark
//! history ([`render_csv`]).
//!
//! - [`profile_report`], [`compare_report_of`]: a profile report, or a
//!   before/after comparison of two; [`ranks_report`]: a set of ranks.
//! - [`bench`]: benchmark history (speedups with intervals, roofline, Pareto
//!   fronts, energy).
//! - [`ledger`]: the step ledger's charts, [`chart`]: scenes drawn as SVG or
//!   PDF, [`analysis`]: benchmark history, bottlenecks and retargeting.
//!
//! Numbers come from `aisp_profile`, `crate::analysis` and the store; the
//! report code formats them and `crate::chart` draws them.

pub mod bench;
mod csv;
mod html;
pub mod ledger;
mod pdf;
mod profile;
mod ranks;

pub use csv::{COLUMNS as CSV_COLUMNS, render as render_csv};
pub use html::render as render_html;
pub use pdf::render as render_pdf;
pub use profile::{compare_report_of, profile_report};
pub use ranks::ranks_report;

/// Benchmark history, bottleneck classification and retargeting on top of
/// the profile analyses.
pub mod analysis;
/// The one chart module: scenes drawn as SVG or PDF.
pub mod chart;

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;

use crate::chart::Scene;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{0} exists; pass overwrite: true to replace it")]
    Exists(PathBuf),
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("PDF writer failed: {0}")]
    Pdf(String),
    #[error(transparent)]
    Profile(#[from] aisp_profile::ProfileError),
    #[error("reading the store failed: {0}")]
    Store(String),
    #[error("{0}")]
    Empty(String),
}

pub type Result<T> = std::result::Result<T, ReportError>;

/// A table: header cells, rows of text cells, and which columns are numbers
/// (right-aligned).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub headers: Vec<String>,
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Columns as (header, numeric).
    pub fn new(cols: &[(&str, bool)]) -> Table {
        Table {
            headers: cols.iter().map(|c| c.0.to_string()).collect(),
            numeric: cols.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
        }
    }
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

/// A finding as a report shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingBlock {
    /// critical, high, medium, low, info.
    pub severity: String,
    pub title: String,
    /// Evidence lines, then why / fix / verify.
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Para(String),
    /// Smaller, muted text (method notes, what a number means).
    Note(String),
    Table(Table),
    Chart(Scene),
    Finding(FindingBlock),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    pub heading: String,
    pub blocks: Vec<Block>,
}

impl Section {
    pub fn new(heading: impl Into<String>) -> Section {
        Section {
            heading: heading.into(),
            blocks: Vec::new(),
        }
    }
    pub fn para(&mut self, t: impl Into<String>) {
        self.blocks.push(Block::Para(t.into()));
    }
    pub fn note(&mut self, t: impl Into<String>) {
        self.blocks.push(Block::Note(t.into()));
    }
    pub fn chart(&mut self, s: Scene) {
        self.blocks.push(Block::Chart(s));
    }
    pub fn table(&mut self, t: Table) {
        self.blocks.push(Block::Table(t));
    }
}

/// A whole report.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub title: String,
    pub subtitle: String,
    /// Title-page facts: machine, GPU, versions, time, sources.
    pub facts: Vec<(String, String)>,
    /// The key sentence (verdict) shown on the title page.
    pub headline: String,
    pub sections: Vec<Section>,
}

impl Report {
    /// Every chart in the report.
    pub fn charts(&self) -> impl Iterator<Item = &Scene> {
        self.sections.iter().flat_map(|s| {
            s.blocks.iter().filter_map(|b| match b {
                Block::Chart(c) => Some(c),
                _ => None,
            })
        })
    }
}

/// The facts every title page carries: when, by which aisp, on which host.
pub fn common_facts() -> Vec<(String, String)> {
    let mut f = vec![
        (
            "Generated".to_string(),
            chrono::Utc::now()
                .format("%Y-%m-%d %H:%M:%S UTC")
                .to_string(),
        ),
        (
            "aisp version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
    ];
    if let Some(h) = aisp_hw::bench::record::hostname() {
        f.push(("Report written on".into(), h));
    }
    f
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Written {
    /// Absolute path of the file.
    pub path: String,
    pub bytes: u64,
    /// PDF pages (1 for HTML and CSV).
    pub pages: u32,
    /// Charts drawn (HTML and PDF) or rows written (CSV).
    pub charts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
}

/// `$AISP_HOME/reports/<stem>-<UTC time>.<ext>` unless `output` is given.
/// (Files are written by [`aisp_base::safe_write`]: no link followed, nothing replaced unasked.)
pub fn output_path(home: &Path, output: Option<&str>, stem: &str, ext: &str) -> PathBuf {
    match output.map(str::trim).filter(|o| !o.is_empty()) {
        Some(o) => PathBuf::from(o),
        None => {
            let stem: String = stem
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            home.join("reports").join(format!(
                "{stem}-{}.{ext}",
                chrono::Utc::now().format("%Y%m%dT%H%M%S%3f")
            ))
        }
    }
}

/// Absolute form of a path for answers.
pub fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// ns as ms with 3 decimals.
pub fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}
