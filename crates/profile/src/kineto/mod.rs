//! PyTorch profiler (Kineto) traces: loading ([`trace`]) and analysis in the
//! spirit of Holistic Trace Analysis ([`analysis`]): temporal and idle-time
//! breakdowns, top kernels and operators, kernel launch statistics,
//! communication/compute overlap, per-step GPU time, and findings.

pub(crate) mod analysis;
pub(crate) mod trace;

use std::path::{Path, PathBuf};

pub use analysis::{Limits, TraceAnalysis, analyze};
pub use trace::{Trace, TraceError, load, parse};

/// The trace files a path names: the file itself, or every `*.json` /
/// `*.json.xz` file directly inside a folder (one per rank), sorted.
pub fn expand_paths(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(path)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(".json") || n.ends_with(".json.xz"))
                && !p
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("meta"))
        })
        .collect();
    out.sort();
    Ok(out)
}
