//! Running a probe program (`nvcc --version`, one Python interpreter) with a
//! time limit, and finding programs on PATH and in the usual install folders.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOutput {
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("could not start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{program} did not finish within {timeout_ms} ms and was stopped")]
    Timeout { program: String, timeout_ms: u128 },
}

/// Run `program args...` from `/` with stdin closed; kill it after `timeout`.
pub fn run_with_timeout(
    program: &Path,
    args: &[&str],
    timeout: Duration,
) -> Result<ProbeOutput, ProbeError> {
    let name = program.display().to_string();
    let mut child = Command::new(program)
        .args(args)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ProbeError::Spawn {
            program: name.clone(),
            source,
        })?;
    // Read both pipes on threads so a chatty program cannot block on a full pipe.
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let out_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = p.take(4 << 20).read_to_end(&mut s);
        }
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.take(1 << 20).read_to_end(&mut s);
        }
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ProbeError::Timeout {
                    program: name,
                    timeout_ms: timeout.as_millis(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(source) => {
                let _ = child.kill();
                return Err(ProbeError::Spawn {
                    program: name,
                    source,
                });
            }
        }
    };
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    Ok(ProbeOutput {
        status: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

/// True for an executable regular file.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first `name` on `path_var` (a PATH value).
pub fn which(name: &str, path_var: &str) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

/// Expand a pattern whose components may end in `*` (a prefix match), such as
/// `/opt/nvidia/nsight-systems*/*/bin`. Results are sorted.
pub fn glob_prefix(pattern: &str) -> Vec<PathBuf> {
    let mut current = vec![PathBuf::from("/")];
    for comp in pattern.split('/').filter(|c| !c.is_empty()) {
        let mut next = Vec::new();
        for dir in &current {
            match comp.strip_suffix('*') {
                Some(prefix) => {
                    if let Ok(rd) = std::fs::read_dir(dir) {
                        let mut names: Vec<String> = rd
                            .filter_map(|e| e.ok())
                            .filter_map(|e| e.file_name().into_string().ok())
                            .filter(|n| n.starts_with(prefix))
                            .collect();
                        names.sort_by(|a, b| crate::host::natural_cmp(a, b));
                        next.extend(names.into_iter().map(|n| dir.join(n)));
                    }
                }
                None => {
                    let p = dir.join(comp);
                    if p.exists() {
                        next.push(p);
                    }
                }
            }
        }
        current = next;
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_programs_and_stops_slow_ones() {
        let sh = Path::new("/bin/sh");
        let out = run_with_timeout(
            sh,
            &["-c", "echo hi; echo err >&2; exit 3"],
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(out.stdout, "hi\n");
        assert_eq!(out.stderr, "err\n");
        assert_eq!(out.status, Some(3));
        let t = Instant::now();
        let err = run_with_timeout(sh, &["-c", "sleep 5"], Duration::from_millis(100)).unwrap_err();
        assert!(matches!(err, ProbeError::Timeout { .. }));
        assert!(t.elapsed() < Duration::from_secs(2));
        assert!(matches!(
            run_with_timeout(Path::new("/nonexistent/x"), &[], Duration::from_secs(1)),
            Err(ProbeError::Spawn { .. })
        ));
    }

    #[test]
    fn finds_programs_on_path_and_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("nsight-systems-2024.1/bin");
        let b = dir.path().join("nsight-systems-2024.5/bin");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let found = glob_prefix(&format!("{}/nsight-systems*/bin", dir.path().display()));
        assert_eq!(found, vec![a.clone(), b]);
        assert_eq!(
            which("sh", "/nonexistent:/bin"),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(which("definitely-not-a-program", "/bin"), None);
    }
}
