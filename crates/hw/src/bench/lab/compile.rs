//! NVRTC compilation of a caller's kernel source, with the compiler's
//! messages turned into (line, message) pairs and builds cached on disk.
//!
//! The source is compiled exactly as given (no prelude, so line numbers are
//! the caller's), as a program named `<label>.cu`, for one real architecture
//! so NVRTC returns a CUBIN. The entry is registered as a name expression, so
//! C++ (mangled) and template kernels are found as well as `extern "C"` ones.
//! Folders holding `cuda_fp16.h` (CUDA_HOME, /usr/local/cuda, the nvidia-*
//! pip wheels) go on the include path, since NVRTC has no built-in copy.

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

use cudarc::nvrtc::{result, sys};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::spec::Kernel;
use crate::bench::{BenchError, libs, nvrtc};

/// One compiler message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Diagnostic {
    /// 1-based line in the kernel's source.
    pub line: u32,
    /// `error` or `warning`.
    pub severity: String,
    pub message: String,
    /// The source line it points at.
    pub code: Option<String>,
}

/// What compiling one kernel gave.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompileReport {
    pub ok: bool,
    pub arch: String,
    /// The symbol loaded (the mangled name of a C++ entry).
    pub lowered_name: Option<String>,
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    /// NVRTC's log (first 4,000 characters).
    pub log: String,
    pub from_cache: bool,
}

/// A successful build.
#[derive(Debug, Clone)]
pub struct Built {
    pub cubin: Vec<u8>,
    pub report: CompileReport,
}

const LOG_LIMIT: usize = 4000;

/// Folders with the CUDA headers kernels commonly include (`cuda_fp16.h`,
/// `cuda_bf16.h`).
pub fn include_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(v) = std::env::var_os(var) {
            dirs.push(PathBuf::from(v).join("include"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/include"));
    for site in libs::python_site_dirs() {
        for sub in [
            "nvidia/cu13/include",
            "nvidia/cuda_runtime/include",
            "nvidia/cuda_nvrtc/include",
        ] {
            dirs.push(site.join(sub));
        }
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if d.join("cuda_fp16.h").is_file() && !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// Parse NVRTC's log: `name.cu(12): error: identifier "x" is undefined`,
/// followed by the source line and a caret.
/// Only messages about `file` (the kernel's own source) are kept: NVRTC also
/// reports on its generated `__nv_name_map` (a wrong entry name).
pub fn parse_log(log: &str, source: &str, file: &str) -> (Vec<Diagnostic>, Vec<Diagnostic>) {
    let re =
        regex::Regex::new(r"^([^\n]*?)\((\d+)\): (catastrophic error|error|warning)[^:]*: (.*)$")
            .expect("static regex");
    let lines: Vec<&str> = source.lines().collect();
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    for l in log.lines() {
        if let Some(c) = re.captures(l)
            && &c[1] == file
        {
            let line: u32 = c[2].parse().unwrap_or(0);
            let d = Diagnostic {
                line,
                severity: if c[3].contains("error") {
                    "error"
                } else {
                    "warning"
                }
                .to_string(),
                message: c[4].trim().to_string(),
                code: lines
                    .get((line as usize).wrapping_sub(1))
                    .map(|s| s.trim().chars().take(200).collect()),
            };
            if d.severity == "error" {
                errors.push(d);
            } else {
                warnings.push(d);
            }
        }
    }
    (errors, warnings)
}

fn options(k: &Kernel, arch: &str) -> Vec<String> {
    let mut o = vec![format!("-arch={arch}")];
    o.extend(nvrtc::OPTIONS.iter().map(|s| s.to_string()));
    o.extend(include_dirs().iter().map(|d| format!("-I{}", d.display())));
    o.extend(k.options.iter().cloned());
    o
}

fn cache_key(k: &Kernel, arch: &str, nvrtc: (i32, i32)) -> String {
    let mut h = Sha256::new();
    for part in [k.source.as_str(), k.entry.as_str(), arch] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for o in options(k, arch) {
        h.update(o.as_bytes());
        h.update([0]);
    }
    h.update(format!("{}.{}", nvrtc.0, nvrtc.1).as_bytes());
    h.finalize()
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn entry_missing(entry: &str) -> Diagnostic {
    Diagnostic {
        line: 0,
        severity: "error".into(),
        message: format!(
            "entry `{entry}` is not a __global__ function of this source (check the name; templates need their arguments, e.g. kern<float>)"
        ),
        code: None,
    }
}

/// Compile `k` for `arch`. `Ok(Err(report))` is a compile error in the
/// kernel (the caller's failure); `Err` is a missing or broken NVRTC.
pub fn compile(
    k: &Kernel,
    arch: &str,
    cache_root: Option<&Path>,
) -> Result<Result<Built, CompileReport>, BenchError> {
    if !libs::nvrtc_available() {
        return Err(BenchError::NoNvrtc);
    }
    let version = nvrtc::version()?;
    let key = cache_key(k, arch, version);
    let cached = cache_root.map(|root| {
        let dir = nvrtc::cache_dir(root, arch, version);
        (
            dir.join(format!("lab-{key}.cubin")),
            dir.join(format!("lab-{key}.name")),
        )
    });
    if let Some((cubin_path, name_path)) = &cached
        && let (Ok(cubin), Ok(name)) = (
            std::fs::read(cubin_path),
            std::fs::read_to_string(name_path),
        )
        && !cubin.is_empty()
    {
        return Ok(Ok(Built {
            cubin,
            report: CompileReport {
                ok: true,
                arch: arch.to_string(),
                lowered_name: Some(name),
                from_cache: true,
                ..Default::default()
            },
        }));
    }
    let built = compile_uncached(k, arch)?;
    if let (Ok(b), Some((cubin_path, name_path))) = (&built, &cached) {
        let written = cubin_path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(cubin_path, &b.cubin))
            .and_then(|_| {
                std::fs::write(name_path, b.report.lowered_name.as_deref().unwrap_or(""))
            });
        if let Err(e) = written {
            tracing::warn!(error = %e, "could not write the kernel-lab build cache");
        }
    }
    Ok(built)
}

fn compile_uncached(k: &Kernel, arch: &str) -> Result<Result<Built, CompileReport>, BenchError> {
    let label = k.label();
    let src = CString::new(k.source.as_str()).map_err(|_| {
        BenchError::InvalidInput(format!("{label}: the source contains a NUL byte"))
    })?;
    let name = CString::new(format!("{label}.cu"))
        .map_err(|_| BenchError::InvalidInput("bad kernel name".into()))?;
    let entry = CString::new(format!("&{}", k.entry))
        .map_err(|_| BenchError::InvalidInput("bad entry name".into()))?;
    let prog = result::create_program(src.as_c_str(), Some(name.as_c_str()))
        .map_err(|e| BenchError::Other(format!("nvrtcCreateProgram failed: {e:?}")))?;
    // SAFETY: `prog` is live until destroyed at the end of this function; the
    // name expression is NUL-terminated and outlives the program.
    let outcome = unsafe {
        let _ = sys::nvrtcAddNameExpression(prog, entry.as_ptr());
        let compiled = result::compile_program(prog, &options(k, arch));
        let log = result::get_program_log(prog)
            .map(nvrtc::c_text)
            .unwrap_or_default();
        let log = log.trim().to_string();
        let (errors, warnings) = parse_log(&log, &k.source, &format!("{label}.cu"));
        let mut report = CompileReport {
            ok: compiled.is_ok(),
            arch: arch.to_string(),
            lowered_name: None,
            errors,
            warnings,
            log: log.chars().take(LOG_LIMIT).collect(),
            from_cache: false,
        };
        if compiled.is_err() {
            if report.errors.is_empty() && log.contains("__nv_name_map") {
                report.errors.push(entry_missing(&k.entry));
            } else if report.errors.is_empty() {
                report.errors.push(Diagnostic {
                    line: 0,
                    severity: "error".into(),
                    message: log
                        .lines()
                        .next()
                        .unwrap_or("NVRTC failed without a message")
                        .to_string(),
                    code: None,
                });
            }
            Ok(Err(report))
        } else {
            let mut lowered: *const std::ffi::c_char = std::ptr::null();
            let r = sys::nvrtcGetLoweredName(prog, entry.as_ptr(), &mut lowered);
            if r != sys::nvrtcResult::NVRTC_SUCCESS || lowered.is_null() {
                report.ok = false;
                report.errors.push(entry_missing(&k.entry));
                Ok(Err(report))
            } else {
                report.lowered_name = Some(CStr::from_ptr(lowered).to_string_lossy().into_owned());
                let mut size = 0usize;
                if sys::nvrtcGetCUBINSize(prog, &mut size) != sys::nvrtcResult::NVRTC_SUCCESS
                    || size == 0
                {
                    Err(BenchError::Other("nvrtcGetCUBINSize failed".into()))
                } else {
                    let mut cubin = vec![0u8; size];
                    if sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut std::ffi::c_char)
                        != sys::nvrtcResult::NVRTC_SUCCESS
                    {
                        Err(BenchError::Other("nvrtcGetCUBIN failed".into()))
                    } else {
                        Ok(Ok(Built { cubin, report }))
                    }
                }
            }
        }
    };
    // SAFETY: destroys the program created above, once.
    let _ = unsafe { result::destroy_program(prog) };
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_become_diagnostics_with_the_source_line() {
        let src = "extern \"C\" __global__ void k(float* y) {\n  y[0] = x;\n}\n";
        let log = "k.cu(2): error: identifier \"x\" is undefined\n    y[0] = x;\n           ^\n\nk.cu(3): warning #177-D: variable \"z\" was declared but never referenced\n\n1 error detected in the compilation of \"k.cu\".";
        let (e, w) = parse_log(log, src, "k.cu");
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].line, 2);
        assert_eq!(e[0].message, "identifier \"x\" is undefined");
        assert_eq!(e[0].code.as_deref(), Some("y[0] = x;"));
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].line, w[0].severity.as_str()), (3, "warning"));
        // Messages about NVRTC's generated name map are not the kernel's lines.
        let (e, _) = parse_log(
            "__nv_name_map(2): error: identifier \"t\" is undefined",
            src,
            "k.cu",
        );
        assert!(e.is_empty());
    }
}
