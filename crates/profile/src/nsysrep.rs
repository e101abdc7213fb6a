//! `.nsys-rep` reports: exported to SQLite through a local `nsys` binary into
//! `<cache>/<size>-<mtime>-<header-hash>.sqlite`, once per file version. When
//! no `nsys` can be found the error says what to install or run instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use super::db::FileIdentity;
use super::error::{ProfileError, Result};

/// Whether a path names an Nsight Systems report rather than an export.
pub fn is_report(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("nsys-rep") || e.eq_ignore_ascii_case("qdrep"))
}

/// Folders where Nsight Systems usually installs `nsys` (newest version first
/// within each pattern).
fn usual_locations() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let globs: &[(&str, &[&str])] = &[
        (
            "/opt/nvidia/nsight-systems",
            &["bin/nsys", "target-linux-x64/nsys"],
        ),
        (
            "/opt/nvidia/nsight-systems-cli",
            &["bin/nsys", "target-linux-x64/nsys"],
        ),
        ("/usr/local", &["bin/nsys"]),
    ];
    for (root, tails) in globs {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        if *root == "/usr/local" {
            dirs.retain(|d| {
                d.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("cuda"))
            });
        }
        dirs.sort();
        dirs.reverse();
        for d in dirs {
            for t in *tails {
                out.push(d.join(t));
            }
        }
    }
    out.push(PathBuf::from("/usr/lib/nsight-systems/bin/nsys"));
    out.push(PathBuf::from("/usr/local/bin/nsys"));
    out
}

/// Find an `nsys` binary: the explicit one, else PATH, else the usual folders.
/// On failure, the places searched.
pub fn find_nsys(explicit: Option<&Path>) -> std::result::Result<PathBuf, Vec<String>> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(vec![p.display().to_string()])
        };
    }
    let mut searched = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let c = dir.join("nsys");
            if c.is_file() {
                return Ok(c);
            }
        }
        searched.push("PATH".to_string());
    }
    for c in usual_locations() {
        if c.is_file() {
            return Ok(c);
        }
    }
    searched.extend(
        [
            "/opt/nvidia/nsight-systems/*/bin",
            "/opt/nvidia/nsight-systems-cli/*",
            "/usr/local/cuda*/bin",
            "/usr/lib/nsight-systems/bin",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    Err(searched)
}

/// Arguments of `nsys export` turning a report into SQLite. Blobs are kept:
/// NCCL's NVTX payloads (message sizes, peers) live there, and without them
/// bus bandwidth and per-link timing cannot be computed. Paths are made
/// absolute, so a report named `-x.nsys-rep` is never read as an option.
pub fn export_args(report: &Path, sqlite: &Path) -> Vec<String> {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    vec![
        "export".into(),
        "--type=sqlite".into(),
        "--include-blobs=true".into(),
        "--force-overwrite=true".into(),
        format!("--output={}", abs(sqlite).display()),
        abs(report).display().to_string(),
    ]
}

/// Runs `nsys export` (the program and its arguments): the caller's way of
/// running a process (its process group, time limit and cancellation).
/// Without one, the export runs to completion as a plain child process.
#[derive(Clone)]
pub struct Exporter(pub Arc<ExportFn>);

/// `(nsys, arguments)` → the export ran, or why not.
pub type ExportFn = dyn Fn(&Path, &[String]) -> Result<()> + Send + Sync;

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Exporter")
    }
}

/// The plain way: run `nsys` and wait for it.
fn run_plain(nsys: &Path, args: &[String], report: &Path) -> Result<()> {
    let output =
        Command::new(nsys)
            .args(args)
            .output()
            .map_err(|e| ProfileError::ExportFailed {
                path: report.to_path_buf(),
                message: format!("could not run {}: {e}", nsys.display()),
            })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: String = stderr
        .lines()
        .rev()
        .take(5)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join(" | ");
    Err(ProfileError::ExportFailed {
        path: report.to_path_buf(),
        message: format!("{} exited with {}: {tail}", nsys.display(), output.status),
    })
}

/// The cached SQLite export of a report, exporting it first when needed
/// (through `exporter` when given).
pub fn export_cached(
    path: &Path,
    cache_dir: &Path,
    nsys: Option<&Path>,
    exporter: Option<&Exporter>,
) -> Result<PathBuf> {
    let identity = FileIdentity::of(path)?;
    let out = cache_dir.join(format!("{}.sqlite", identity.key()));
    if out.is_file() {
        return Ok(out);
    }
    let nsys = find_nsys(nsys).map_err(|searched| ProfileError::NsysNotFound {
        path: path.to_path_buf(),
        searched,
    })?;
    std::fs::create_dir_all(cache_dir).map_err(|source| ProfileError::Io {
        what: "cannot create the cache folder",
        path: cache_dir.to_path_buf(),
        source,
    })?;
    // An unpredictable name: nsys writes it with --force-overwrite.
    let tmp = cache_dir.join(format!(
        "{}.tmp-{}-{:016x}.sqlite",
        identity.key(),
        std::process::id(),
        aisp_base::random_u64()
    ));
    tracing::info!(report = %path.display(), nsys = %nsys.display(), "exporting .nsys-rep to SQLite");
    let args = export_args(path, &tmp);
    let ran = match exporter {
        Some(run) => (run.0)(&nsys, &args),
        None => run_plain(&nsys, &args, path),
    };
    if let Err(e) = ran {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if !tmp.is_file() {
        let _ = std::fs::remove_file(&tmp);
        return Err(ProfileError::ExportFailed {
            path: path.to_path_buf(),
            message: format!("{} wrote no export", nsys.display()),
        });
    }
    std::fs::rename(&tmp, &out).map_err(|source| ProfileError::Io {
        what: "cannot move the export into the cache",
        path: out.clone(),
        source,
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_recognised_and_a_missing_nsys_is_not_found() {
        assert!(is_report(Path::new("a/run.nsys-rep")) && is_report(Path::new("old.QDREP")));
        assert!(!is_report(Path::new("run.sqlite")));
        let err = find_nsys(Some(Path::new("/definitely/not/nsys"))).unwrap_err();
        assert_eq!(err, vec!["/definitely/not/nsys".to_string()]);
    }

    #[test]
    fn export_uses_the_given_nsys_and_caches_by_identity() {
        let dir = tempfile::tempdir().unwrap();
        let rep = dir.path().join("run.nsys-rep");
        std::fs::write(&rep, b"not really a report").unwrap();
        // A stand-in `nsys` that writes a marker file where --output= points,
        // saying whether it was asked to keep the blobs (NCCL payloads).
        let fake = dir.path().join("nsys");
        std::fs::write(
            &fake,
            "#!/bin/sh\nb=no\nfor a in \"$@\"; do case \"$a\" in --include-blobs=true) b=blobs ;; \
             --output=*) o=\"${a#--output=}\" ;; esac; done\necho exported $b > \"$o\"\n",
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
            let cache = dir.path().join("cache");
            let out = export_cached(&rep, &cache, Some(&fake), None).unwrap();
            assert_eq!(
                std::fs::read_to_string(&out).unwrap().trim(),
                "exported blobs"
            );
            assert!(
                out.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with(&format!("{}-", "not really a report".len()))
            );
            // Second call: served from the cache even with a broken nsys.
            let again =
                export_cached(&rep, &cache, Some(Path::new("/definitely/not/nsys")), None).unwrap();
            assert_eq!(again, out);
        }
        let err = export_cached(
            &rep,
            &dir.path().join("c2"),
            Some(Path::new("/definitely/not/nsys")),
            None,
        )
        .unwrap_err();
        assert!(matches!(err, ProfileError::NsysNotFound { .. }));
    }
}
