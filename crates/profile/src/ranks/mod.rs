//! Cross-rank analysis of a **set** of Nsight Systems exports (one per rank,
//! one per node, or one multi-process export): per-rank identity, clock
//! alignment, and the cross-rank answers.
//!
//! The work is split so that it scales out: each export is reduced to
//! per-rank **digests** ([`digest`]) in parallel with bounded memory (one
//! export per worker at a time), digests can be written where the files are
//! and read back ([`store`], Parquet), and the merge ([`align`], [`analysis`],
//! [`findings`]) reads only digests.

mod align;
mod analysis;
pub mod digest;
mod findings;
mod kineto;
mod ledger_set;
pub mod store;

use aisp_base::Cancel;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ProfileError, Result};
pub use align::{Alignment, DomainClock};
pub use analysis::{CollectiveSkew, CrossRank};
pub use digest::{RankDigest, RankIdentity, SkippedFile};
pub use findings::findings;
pub use kineto::digest_trace;
pub use ledger_set::{findings as ledger_findings, set_findings};

/// Whether a path names a profile file a set may hold.
fn is_export(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(".sqlite") || name.ends_with(".nsys-rep")
}

/// Match a file name against a glob with `*` and `?`.
fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob_match(&pattern[1..], name) || (!name.is_empty() && glob_match(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => glob_match(&pattern[1..], &name[1..]),
        (Some(a), Some(b)) if a == b => glob_match(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// Whether `path` names a set (a directory or a glob) rather than one export.
pub fn is_set(path: &str) -> bool {
    path.contains('*') || path.contains('?') || Path::new(path).is_dir()
}

/// The exports a `path` names: a directory (its `.sqlite` files, and
/// `.nsys-rep` reports without a `.sqlite` beside them), a glob in the file
/// name part (`runs/x/rank_*.sqlite`), or one file. Sorted by name.
pub fn expand(path: &str) -> Result<Vec<PathBuf>> {
    let p = Path::new(path);
    let mut files: Vec<PathBuf> = if p.is_dir() {
        read_dir(p, is_export)?
    } else if path.contains('*') || path.contains('?') {
        let dir = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let pat = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        if dir
            .to_str()
            .is_some_and(|d| d.contains('*') || d.contains('?'))
        {
            return Err(ProfileError::BadSet(format!(
                "`{path}`: wildcards are allowed in the file name only, not in folders"
            )));
        }
        read_dir(dir, |f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| glob_match(pat.as_bytes(), n.as_bytes()))
        })?
    } else if p.is_file() {
        vec![p.to_path_buf()]
    } else {
        return Err(ProfileError::NotFound {
            path: p.to_path_buf(),
        });
    };
    // A report whose export sits beside it is the same capture.
    let sqlite: Vec<PathBuf> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "sqlite"))
        .cloned()
        .collect();
    files.retain(|f| {
        !(f.extension().is_some_and(|e| e == "nsys-rep")
            && sqlite.contains(&f.with_extension("sqlite")))
    });
    files.sort();
    if files.is_empty() {
        return Err(ProfileError::BadSet(format!(
            "`{path}` names no Nsight Systems exports (.sqlite or .nsys-rep)"
        )));
    }
    Ok(files)
}

fn read_dir(dir: &Path, keep: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).map_err(|e| ProfileError::Io {
        what: "reading the folder",
        path: dir.to_path_buf(),
        source: e,
    })?;
    Ok(rd
        .flatten()
        .map(|e| e.path())
        .filter(|f| f.is_file() && keep(f))
        .collect())
}

/// A set of exports analysed as one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankSet {
    /// The exports, in rank order (left out where the answer lists them already).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Files that could not be read, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedFile>,
    /// Rank → (file, process, device, host): how each rank was identified (left out of a default answer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub identities: Vec<RankIdentity>,
    /// Why a rank source was rejected, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_note: Option<String>,
    pub alignment: Alignment,
    pub cross_rank: CrossRank,
    /// Who arrived last at the steady collectives, from the ranks' kernel durations (Nsight Systems exports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<crate::ledger::Arrivals>,
    /// Each rank's step ledger in short (collective time split into wait and transfer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ledger: Vec<crate::rules::LedgerSummary>,
}

/// Identify, align and compare digests (the merge step).
/// Rank numbers are settled in `digests` (sorted by rank).
pub fn merge(
    digests: &mut [RankDigest],
    files: Vec<String>,
    skipped: Vec<SkippedFile>,
) -> Result<RankSet> {
    if digests.is_empty() {
        return Err(ProfileError::Missing(
            "no rank ran kernels in these exports: nothing to compare".into(),
        ));
    }
    let rank_note = digest::resolve_ranks(digests);
    let alignment = align::align(digests);
    let mut cross_rank = analysis::cross_rank(digests, &alignment);
    let arrivals = ledger_set::split(digests, &alignment)?;
    if let Some(a) = &arrivals {
        ledger_set::replace_stragglers(&mut cross_rank, digests, a);
    }
    Ok(RankSet {
        files,
        skipped,
        identities: digests.iter().map(|d| d.identity.clone()).collect(),
        rank_note,
        alignment,
        cross_rank,
        ledger: ledger_set::summaries(digests),
        arrivals,
    })
}

/// Digest `files` on `threads` workers, then merge.
pub fn analyse(
    files: &[PathBuf],
    threads: usize,
    cancelled: Cancel<'_>,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<(RankSet, Vec<RankDigest>)> {
    let (mut digests, skipped) = digest::digest_files(files, threads, cancelled, progress)?;
    let names = files.iter().map(|f| f.display().to_string()).collect();
    let set = merge(&mut digests, names, skipped)?;
    Ok((set, digests))
}

/// Worker threads for digesting: the machine's cores, at most one per file.
pub fn default_threads(files: usize) -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(files.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_file_names() {
        assert!(glob_match(b"rank_*.sqlite", b"rank_12.sqlite"));
        assert!(glob_match(b"rank_?.sqlite", b"rank_1.sqlite"));
        assert!(!glob_match(b"rank_?.sqlite", b"rank_12.sqlite"));
        assert!(!glob_match(b"rank_*.sqlite", b"rank_1.nsys-rep"));
        assert!(glob_match(b"*", b"x"));
    }
}
