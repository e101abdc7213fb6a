//! Finding the profilers: `nsys` (Nsight Systems) and `ncu` (Nsight Compute).
//!
//! Order: the configured path (`AISP_NSYS` / `AISP_NCU` or the config file),
//! then PATH, then the folders NVIDIA's installers and CUDA images use. Many
//! containers ship the CLIs without putting them on PATH; one seen in practice
//! keeps `nsys` only inside the Nsight Compute tree
//! (`/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::process::{CommandSpec, RunLimits, run};

/// A profiler aisp drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Profiler {
    Nsys,
    Ncu,
}

impl Profiler {
    pub fn binary(self) -> &'static str {
        match self {
            Profiler::Nsys => "nsys",
            Profiler::Ncu => "ncu",
        }
    }

    /// The variable (and config key, lower-cased without the prefix) naming it.
    pub fn env_var(self) -> &'static str {
        match self {
            Profiler::Nsys => "AISP_NSYS",
            Profiler::Ncu => "AISP_NCU",
        }
    }

    pub fn product(self) -> &'static str {
        match self {
            Profiler::Nsys => "Nsight Systems",
            Profiler::Ncu => "Nsight Compute",
        }
    }

    /// Usual install locations, as patterns whose components may hold one `*`.
    fn patterns(self) -> &'static [&'static str] {
        match self {
            Profiler::Nsys => &[
                "usr/local/cuda*/bin/nsys",
                "opt/nvidia/nsight-systems*/bin/nsys",
                "opt/nvidia/nsight-systems*/target-linux-x64/nsys",
                "opt/nvidia/nsight-systems*/*/bin/nsys",
                "opt/nvidia/nsight-systems*/*/target-linux-x64/nsys",
                "usr/local/cuda*/nsight-systems*/bin/nsys",
                "opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
                "usr/lib/nsight-systems/bin/nsys",
            ],
            Profiler::Ncu => &[
                "usr/local/cuda*/bin/ncu",
                "opt/nvidia/nsight-compute/*/ncu",
                "opt/nvidia/nsight-compute*/ncu",
                "usr/local/cuda*/nsight-compute*/ncu",
                "usr/lib/nsight-compute/ncu",
            ],
        }
    }
}

/// A profiler found on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolInfo {
    pub path: String,
    /// Where it was found: `AISP_NSYS`/`AISP_NCU`, `PATH` or `usual folder`.
    pub found_in: String,
    /// The version it reports (`--version`), e.g. `2025.3.1.90`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{product} (`{binary}`) was not found; searched {}", searched.join(", "))]
    NotFound {
        product: &'static str,
        binary: &'static str,
        searched: Vec<String>,
    },
    #[error("{var} names {path}, which is not an executable file")]
    BadConfigured { var: &'static str, path: PathBuf },
}

/// Where to look (injectable for tests).
#[derive(Debug, Clone)]
pub struct SearchPlaces {
    /// The configured path, if any (it must exist: no silent fallback).
    pub configured: Option<PathBuf>,
    /// The PATH value to search.
    pub path_var: Option<OsString>,
    /// The root the usual-folder patterns are relative to (`/` normally).
    pub root: PathBuf,
}

impl SearchPlaces {
    /// The real machine: PATH from the environment, patterns under `/`.
    pub fn system(configured: Option<PathBuf>) -> SearchPlaces {
        SearchPlaces {
            configured,
            path_var: std::env::var_os("PATH"),
            root: PathBuf::from("/"),
        }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Find `tool`. Returns the path and where it was found.
pub fn locate(tool: Profiler, places: &SearchPlaces) -> Result<(PathBuf, String), ToolError> {
    if let Some(p) = &places.configured {
        return if is_executable(p) {
            Ok((p.clone(), tool.env_var().to_string()))
        } else {
            Err(ToolError::BadConfigured {
                var: tool.env_var(),
                path: p.clone(),
            })
        };
    }
    if let Some(path) = &places.path_var {
        for dir in std::env::split_paths(path) {
            let c = dir.join(tool.binary());
            if is_executable(&c) {
                return Ok((c, "PATH".into()));
            }
        }
    }
    for pattern in tool.patterns() {
        if let Some(found) = expand(&places.root, pattern)
            .into_iter()
            .find(|c| is_executable(c))
        {
            return Ok((found, "usual folder".into()));
        }
    }
    let mut searched = vec![format!("${}", tool.env_var()), "PATH".to_string()];
    searched.extend(tool.patterns().iter().map(|p| format!("/{p}")));
    Err(ToolError::NotFound {
        product: tool.product(),
        binary: tool.binary(),
        searched,
    })
}

/// Expand a pattern whose components may contain one `*`, newest version
/// first (components compared as version numbers where they are numbers).
pub fn expand(root: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut current = vec![root.to_path_buf()];
    for comp in pattern.split('/').filter(|c| !c.is_empty()) {
        let mut next = Vec::new();
        for base in &current {
            match comp.split_once('*') {
                None => next.push(base.join(comp)),
                Some((prefix, suffix)) => {
                    let Ok(entries) = std::fs::read_dir(base) else {
                        continue;
                    };
                    let mut names: Vec<String> = entries
                        .flatten()
                        .filter_map(|e| e.file_name().into_string().ok())
                        .filter(|n| {
                            n.len() >= prefix.len() + suffix.len()
                                && n.starts_with(prefix)
                                && n.ends_with(suffix)
                        })
                        .collect();
                    names.sort_by(|a, b| version_order(b, a));
                    next.extend(names.into_iter().map(|n| base.join(n)));
                }
            }
        }
        current = next;
    }
    current
}

/// Compare two names as sequences of numbers and text (`cuda-12.10` > `cuda-12.9`).
fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn parts(s: &str) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        let mut num = String::new();
        let mut text = String::new();
        for c in s.chars() {
            if c.is_ascii_digit() {
                if !text.is_empty() {
                    out.push((0, std::mem::take(&mut text)));
                }
                num.push(c);
            } else {
                if !num.is_empty() {
                    out.push((num.parse().unwrap_or(u64::MAX), String::new()));
                    num.clear();
                }
                text.push(c);
            }
        }
        if !num.is_empty() {
            out.push((num.parse().unwrap_or(u64::MAX), String::new()));
        }
        if !text.is_empty() {
            out.push((0, text));
        }
        out
    }
    parts(a).cmp(&parts(b))
}

/// The version a profiler prints for `--version` (first `YYYY.N[.N...]`).
pub fn parse_version(text: &str) -> Option<String> {
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let re = RE
        .get_or_init(|| regex::Regex::new(r"\b(20\d\d\.\d+(?:\.\d+)*)").ok())
        .as_ref()?;
    re.captures(text).map(|c| c[1].to_string())
}

/// Ask the binary for its version (10 s at most; None when it does not say).
pub fn version(path: &Path, env: &[(String, String)]) -> Option<String> {
    let mut spec = CommandSpec::new(path, vec!["--version".into()]);
    spec.env = env.to_vec();
    let limits = RunLimits {
        deadline: Some(Instant::now() + Duration::from_secs(10)),
        grace: Duration::from_millis(500),
        tail_lines: 20,
    };
    let out = run(&spec, &limits, &|| false, &mut |_| {}).ok()?;
    parse_version(&format!("{}\n{}", out.stdout.text(), out.stderr.text()))
}

/// Locate `tool` and read its version.
pub fn discover(
    tool: Profiler,
    places: &SearchPlaces,
    env: &[(String, String)],
) -> Result<ToolInfo, ToolError> {
    let (path, found_in) = locate(tool, places)?;
    let version = version(&path, env);
    Ok(ToolInfo {
        path: path.display().to_string(),
        found_in,
        version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch_exe(p: &Path) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(
            p,
            "#!/bin/sh\necho 'NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0'\n",
        )
        .unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn places(root: &Path) -> SearchPlaces {
        SearchPlaces {
            configured: None,
            path_var: Some(OsString::from(root.join("empty-bin"))),
            root: root.to_path_buf(),
        }
    }

    #[test]
    fn usual_folders_are_searched_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // The layout of the CUDA 13 image: nsys inside the Nsight Compute tree only.
        touch_exe(&root.join("opt/nvidia/nsight-compute/2025.1.0/host/target-linux-x64/nsys"));
        touch_exe(&root.join("opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys"));
        touch_exe(&root.join("opt/nvidia/nsight-compute/2025.3.1/ncu"));
        let (p, from) = locate(Profiler::Nsys, &places(root)).unwrap();
        assert_eq!(
            p,
            root.join("opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys")
        );
        assert_eq!(from, "usual folder");
        let (p, _) = locate(Profiler::Ncu, &places(root)).unwrap();
        assert_eq!(p, root.join("opt/nvidia/nsight-compute/2025.3.1/ncu"));

        // A CUDA toolkit's bin wins over the Nsight Compute tree, newest CUDA first.
        touch_exe(&root.join("usr/local/cuda-12.9/bin/nsys"));
        touch_exe(&root.join("usr/local/cuda-12.10/bin/nsys"));
        let (p, _) = locate(Profiler::Nsys, &places(root)).unwrap();
        assert_eq!(p, root.join("usr/local/cuda-12.10/bin/nsys"));

        // PATH wins over the usual folders.
        touch_exe(&root.join("mybin/nsys"));
        let mut pl = places(root);
        pl.path_var = Some(OsString::from(root.join("mybin")));
        assert_eq!(
            locate(Profiler::Nsys, &pl).unwrap(),
            (root.join("mybin/nsys"), "PATH".into())
        );
        // The configured path wins over everything, and must exist.
        pl.configured = Some(root.join("usr/local/cuda-12.9/bin/nsys"));
        assert_eq!(
            locate(Profiler::Nsys, &pl).unwrap(),
            (
                root.join("usr/local/cuda-12.9/bin/nsys"),
                "AISP_NSYS".into()
            )
        );
        pl.configured = Some(root.join("nope/nsys"));
        assert!(matches!(
            locate(Profiler::Nsys, &pl),
            Err(ToolError::BadConfigured {
                var: "AISP_NSYS",
                ..
            })
        ));
    }

    #[test]
    fn not_found_names_what_was_searched() {
        let dir = tempfile::tempdir().unwrap();
        let err = locate(Profiler::Ncu, &places(dir.path())).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("Nsight Compute (`ncu`) was not found"),
            "{msg}"
        );
        assert!(msg.contains("$AISP_NCU"), "{msg}");
        assert!(msg.contains("/opt/nvidia/nsight-compute/*/ncu"), "{msg}");
    }

    #[test]
    fn versions_are_read_from_the_usual_banners() {
        assert_eq!(
            parse_version("NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0").as_deref(),
            Some("2025.3.1.90")
        );
        assert_eq!(
            parse_version(
                "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA Corporation\nVersion 2025.3.1.0 (build 36398880) (public-release)"
            )
            .as_deref(),
            Some("2025.3.1.0")
        );
        assert_eq!(parse_version("no version here"), None);
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("nsys");
        touch_exe(&exe);
        assert_eq!(version(&exe, &[]).as_deref(), Some("2025.3.1.90"));
    }

    #[test]
    fn version_order_compares_numbers_as_numbers() {
        use std::cmp::Ordering::*;
        assert_eq!(version_order("cuda-12.10", "cuda-12.9"), Greater);
        assert_eq!(version_order("2025.3.1", "2025.3.1"), Equal);
        assert_eq!(version_order("2024.7", "2025.1"), Less);
    }
}
