//! Finding the CUDA libraries that are not part of the driver: NVRTC, cuBLAS,
//! cuBLASLt and NCCL.
//!
//! cudarc opens libraries by bare name (`libnvrtc.so.13`, ...), which works
//! only when they are on the loader's path. On GPU hosts they often live in
//! Python wheels (`site-packages/nvidia/cu13/lib`, `nvidia/nccl/lib`) or under
//! `/usr/local/cuda/lib64` without being registered. [`preload`] looks in
//! those places and opens what it finds by full path with `RTLD_GLOBAL`; the
//! dynamic loader then answers cudarc's later open by the library's soname
//! (and NVRTC's own open of `libnvrtc-builtins.so.*`) with the copy already
//! loaded. Folders searched, in order: `AISP_CUDA_LIB_DIRS` (colon-separated),
//! `$CUDA_HOME`/`$CUDA_PATH` (`lib64`, `lib`), `/usr/local/cuda/lib64`,
//! `/usr/local/cuda/targets/x86_64-linux/lib`, and the `nvidia/*/lib` folders
//! of the site-packages of `python3` on PATH.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;

/// What [`preload`] found.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct LibraryReport {
    /// Libraries opened by full path (name → path).
    pub preloaded: Vec<(String, String)>,
    /// Folders searched.
    pub searched: Vec<String>,
}

/// Library families: the sonames to look for, most wanted first.
const FAMILIES: &[&[&str]] = &[
    &["libnvrtc.so.13", "libnvrtc.so.12"],
    &["libcublasLt.so.13", "libcublasLt.so.12"],
    &["libcublas.so.13", "libcublas.so.12"],
];

fn env_dirs(var: &str) -> Vec<PathBuf> {
    std::env::var_os(var)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Folders that may hold CUDA libraries, in search order, deduplicated.
pub fn candidate_dirs() -> Vec<PathBuf> {
    let mut dirs = env_dirs("AISP_CUDA_LIB_DIRS");
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            let root = PathBuf::from(root);
            dirs.push(root.join("lib64"));
            dirs.push(root.join("lib"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs.push(PathBuf::from("/usr/local/cuda/targets/x86_64-linux/lib"));
    dirs.push(PathBuf::from("/usr/local/cuda/targets/sbsa-linux/lib"));
    for site in python_site_dirs() {
        let nvidia = site.join("nvidia");
        if let Ok(entries) = std::fs::read_dir(&nvidia) {
            let mut libs: Vec<PathBuf> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.path().join("lib"))
                .filter(|p| p.is_dir())
                .collect();
            libs.sort();
            dirs.extend(libs);
        }
    }
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| d.is_dir() && seen.insert(d.clone()));
    dirs
}

/// site-packages folders of `python3` (and of an active virtual environment),
/// asked once with a 5-second limit.
pub fn python_site_dirs() -> Vec<PathBuf> {
    static DIRS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    DIRS.get_or_init(|| {
        let mut out = Vec::new();
        for python in ["python3", "python"] {
            let script = "import site, sys\n\
                          dirs = list(getattr(site, 'getsitepackages', lambda: [])())\n\
                          dirs.append(site.getusersitepackages())\n\
                          dirs += [p for p in sys.path if p.endswith('-packages')]\n\
                          print('\\n'.join(dirs))";
            if let Some(text) = run_with_timeout(python, &["-c", script], Duration::from_secs(5)) {
                out.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(PathBuf::from),
                );
                break;
            }
        }
        for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
            if let Some(root) = std::env::var_os(var)
                && let Ok(entries) = std::fs::read_dir(Path::new(&root).join("lib"))
            {
                for e in entries.filter_map(|e| e.ok()) {
                    out.push(e.path().join("site-packages"));
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|d| d.is_dir() && seen.insert(d.clone()));
        out
    })
    .clone()
}

/// Run a program and return its stdout, or `None` on failure or timeout.
fn run_with_timeout(program: &str, args: &[&str], limit: Duration) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if !status.success() {
                    return None;
                }
                let mut text = String::new();
                use std::io::Read;
                child.stdout.take()?.read_to_string(&mut text).ok()?;
                return Some(text);
            }
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// The first file in `dirs` whose name starts with one of `prefixes`
/// (prefix order first, then folder order).
pub fn find_in(dirs: &[PathBuf], prefixes: &[&str]) -> Option<PathBuf> {
    for prefix in prefixes {
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut names: Vec<PathBuf> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(prefix) && !n.contains(".alt."))
                })
                .collect();
            names.sort();
            if let Some(first) = names.into_iter().next() {
                return Some(first);
            }
        }
    }
    None
}

/// Can the dynamic loader open `name` by itself (LD_LIBRARY_PATH, ld.so.cache)?
fn loadable_by_name(name: &str) -> bool {
    // SAFETY: opening a shared library runs its initialisers; these are NVIDIA's libraries.
    unsafe { libloading::Library::new(name) }.is_ok()
}

/// Open a library by full path, globally, and keep it loaded for the life of
/// the process.
pub fn open_global(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
        // SAFETY: as above; the handle is leaked on purpose so the library stays loaded.
        match unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) } {
            Ok(lib) => {
                std::mem::forget(lib);
                true
            }
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "could not preload library");
                false
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// Preload NVRTC, cuBLAS and cuBLASLt from the usual places when the loader
/// cannot find them by name. Runs once per process; cheap afterwards.
pub fn preload() -> &'static LibraryReport {
    static REPORT: OnceLock<LibraryReport> = OnceLock::new();
    REPORT.get_or_init(|| {
        let mut report = LibraryReport::default();
        let needs_search = FAMILIES
            .iter()
            .any(|fam| !fam.iter().any(|n| loadable_by_name(n)));
        if !needs_search {
            return report;
        }
        let dirs = candidate_dirs();
        report.searched = dirs.iter().map(|d| d.display().to_string()).collect();
        let open = |path: PathBuf, report: &mut LibraryReport| {
            if open_global(&path) {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                tracing::info!(library = %name, path = %path.display(), "preloaded CUDA library");
                report.preloaded.push((name, path.display().to_string()));
            }
        };
        for family in FAMILIES {
            if family.iter().any(|n| loadable_by_name(n)) {
                continue;
            }
            let Some(path) = find_in(&dirs, family) else {
                continue;
            };
            // NVRTC opens its builtins library by name on first use: load the
            // one beside it first so that open is answered from memory.
            if family[0].starts_with("libnvrtc.")
                && let Some(dir) = path.parent()
                && let Some(builtins) = find_in(&[dir.to_path_buf()], &["libnvrtc-builtins.so."])
            {
                open(builtins, &mut report);
            }
            open(path, &mut report);
        }
        report
    })
}

/// NVRTC can be used (after preloading).
pub fn nvrtc_available() -> bool {
    preload();
    crate::gpu::nvrtc_present()
}

/// cuBLAS can be used (after preloading).
pub fn cublas_available() -> bool {
    preload();
    crate::gpu::cublas_present()
}

/// cuBLASLt can be used (after preloading).
pub fn cublaslt_available() -> bool {
    preload();
    // SAFETY: only tries to open the library.
    unsafe { cudarc::cublaslt::sys::is_culib_present() }
}

/// Where libnccl is: `configured` (AISP_NCCL_LIB / config `nccl_lib`) when
/// given, else `libnccl.so.2` by name, else the folders above (PyTorch's
/// `nvidia-nccl-cu*` wheel puts it in `site-packages/nvidia/nccl/lib`).
pub fn find_nccl(configured: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = configured {
        return Some(p.to_path_buf());
    }
    for name in ["libnccl.so.2", "libnccl.so"] {
        if loadable_by_name(name) {
            return Some(PathBuf::from(name));
        }
    }
    let mut dirs = candidate_dirs();
    dirs.push(PathBuf::from("/usr/lib/x86_64-linux-gnu"));
    dirs.push(PathBuf::from("/usr/lib64"));
    find_in(&dirs, &["libnccl.so.2", "libnccl.so"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_libraries_by_prefix_in_folder_order() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join("libnvrtc.so.12"), b"").unwrap();
        std::fs::write(b.path().join("libnvrtc.so.13"), b"").unwrap();
        std::fs::write(b.path().join("libnvrtc.alt.so.13"), b"").unwrap();
        std::fs::write(b.path().join("libnvrtc-builtins.so.13.0"), b"").unwrap();
        let dirs = vec![a.path().to_path_buf(), b.path().to_path_buf()];
        // The preferred version wins even in a later folder.
        assert_eq!(
            find_in(&dirs, &["libnvrtc.so.13", "libnvrtc.so.12"]).unwrap(),
            b.path().join("libnvrtc.so.13")
        );
        assert_eq!(
            find_in(&dirs, &["libnvrtc.so.12"]).unwrap(),
            a.path().join("libnvrtc.so.12")
        );
        assert_eq!(
            find_in(&dirs, &["libnvrtc-builtins.so.13."]).unwrap(),
            b.path().join("libnvrtc-builtins.so.13.0")
        );
        assert!(find_in(&dirs, &["libcublas.so.13"]).is_none());
    }

    #[test]
    fn configured_nccl_path_wins() {
        let p = Path::new("/opt/x/libnccl.so.2");
        assert_eq!(find_nccl(Some(p)).unwrap(), p);
    }

    #[test]
    fn a_missing_program_times_out_cleanly() {
        assert!(
            run_with_timeout(
                "/nonexistent/aisp-no-such-program",
                &[],
                Duration::from_millis(100)
            )
            .is_none()
        );
    }
}
