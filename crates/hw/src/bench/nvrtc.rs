//! Run-time compilation of the embedded kernels with NVRTC, and the on-disk
//! cache of the results.
//!
//! Each kernel file is compiled for one real architecture (`-arch=sm_XY`, or
//! `sm_90a`), which makes NVRTC produce both PTX and a CUBIN: the CUBIN is
//! loaded (no driver JIT, no dependency on the driver accepting this NVRTC's
//! PTX version), the PTX is kept for inspection. Both are cached under
//! `<cache>/ptx/<arch>/<nvrtc-version>/<file>-<hash>.{ptx,cubin}`, where the
//! hash covers the source and the options, so an edited kernel or a new NVRTC
//! never reuses a stale build.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use cudarc::nvrtc::{result, sys};
use sha2::{Digest, Sha256};

use super::BenchError;
use super::kernels::{self, KernelFile};

/// Options every kernel is compiled with (besides `-arch`). No fast-math: the
/// lessons compare results bit for bit against CPU references.
pub const OPTIONS: &[&str] = &["-std=c++17", "-lineinfo"];

/// A compiled kernel file.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub file: String,
    pub arch: String,
    pub ptx: String,
    pub cubin: Vec<u8>,
    /// Compiler messages (warnings; `-Xptxas -v` resource usage when asked).
    pub log: String,
    pub from_cache: bool,
}

/// NVRTC version as (major, minor).
pub fn version() -> Result<(i32, i32), BenchError> {
    if !super::libs::nvrtc_available() {
        return Err(BenchError::NoNvrtc);
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints.
    let r = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    if r != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(BenchError::Other(format!("nvrtcVersion failed: {r:?}")));
    }
    Ok((major, minor))
}

/// The architectures this NVRTC can compile for (e.g. `[75, 80, 86, ...]`).
pub fn supported_archs() -> Result<Vec<i32>, BenchError> {
    if !super::libs::nvrtc_available() {
        return Err(BenchError::NoNvrtc);
    }
    let mut n = 0;
    // SAFETY: writes one int, then that many ints.
    unsafe {
        if sys::nvrtcGetNumSupportedArchs(&mut n) != sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(BenchError::Other("nvrtcGetNumSupportedArchs failed".into()));
        }
        let mut archs = vec![0i32; n.max(0) as usize];
        if sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) != sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(BenchError::Other("nvrtcGetSupportedArchs failed".into()));
        }
        Ok(archs)
    }
}

/// An NVRTC log or name buffer (NUL-terminated C chars) as text.
pub(crate) fn c_text(bytes: Vec<std::ffi::c_char>) -> String {
    let bytes: Vec<u8> = bytes
        .into_iter()
        .map(|c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Compile `file` for `arch` (e.g. `sm_90`), with `extra` options appended.
/// No cache.
pub fn compile(file: &KernelFile, arch: &str, extra: &[&str]) -> Result<Compiled, BenchError> {
    if !super::libs::nvrtc_available() {
        return Err(BenchError::NoNvrtc);
    }
    let source = kernels::program_source(file);
    let src =
        CString::new(source).map_err(|_| BenchError::Other("kernel source contains NUL".into()))?;
    let name = CString::new(format!("{}.cu", file.name))
        .map_err(|_| BenchError::Other("bad kernel file name".into()))?;
    let prog = result::create_program(src.as_c_str(), Some(name.as_c_str()))
        .map_err(|e| BenchError::Other(format!("nvrtcCreateProgram failed: {e:?}")))?;
    let mut opts: Vec<String> = vec![format!("-arch={arch}")];
    opts.extend(OPTIONS.iter().map(|s| s.to_string()));
    opts.extend(extra.iter().map(|s| s.to_string()));
    // SAFETY: `prog` is a live program; it is destroyed on every path below.
    let compiled = unsafe { result::compile_program(prog, &opts) };
    // SAFETY: as above.
    let log = unsafe { result::get_program_log(prog) }
        .map(c_text)
        .unwrap_or_default();
    let out = match compiled {
        Err(_) => Err(BenchError::Compile {
            file: file.name.to_string(),
            arch: arch.to_string(),
            log: log.trim().to_string(),
        }),
        // SAFETY: compiled program; PTX and CUBIN are read into owned buffers.
        Ok(()) => unsafe { read_outputs(prog) }.map(|(ptx, cubin)| Compiled {
            file: file.name.to_string(),
            arch: arch.to_string(),
            ptx,
            cubin,
            log: log.trim().to_string(),
            from_cache: false,
        }),
    };
    // SAFETY: destroys the program created above, once.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

/// # Safety
/// `prog` must be a successfully compiled program.
unsafe fn read_outputs(prog: sys::nvrtcProgram) -> Result<(String, Vec<u8>), BenchError> {
    // SAFETY: guaranteed by the caller.
    let ptx = unsafe { result::get_ptx(prog) }
        .map(c_text)
        .map_err(|e| BenchError::Other(format!("nvrtcGetPTX failed: {e:?}")))?;
    let mut size = 0usize;
    // SAFETY: writes one size; then fills a buffer of that size.
    let cubin = unsafe {
        if sys::nvrtcGetCUBINSize(prog, &mut size) != sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(BenchError::Other("nvrtcGetCUBINSize failed".into()));
        }
        let mut buf = vec![0u8; size];
        if size > 0
            && sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut std::ffi::c_char)
                != sys::nvrtcResult::NVRTC_SUCCESS
        {
            return Err(BenchError::Other("nvrtcGetCUBIN failed".into()));
        }
        buf
    };
    Ok((ptx, cubin))
}

/// The cache folder for one architecture and NVRTC version.
pub fn cache_dir(cache_root: &Path, arch: &str, nvrtc: (i32, i32)) -> PathBuf {
    cache_root
        .join("ptx")
        .join(arch)
        .join(format!("{}.{}", nvrtc.0, nvrtc.1))
}

/// Short hash of everything that determines the build.
pub fn build_key(file: &KernelFile, arch: &str) -> String {
    let mut h = Sha256::new();
    h.update(kernels::program_source(file).as_bytes());
    h.update(arch.as_bytes());
    for o in OPTIONS {
        h.update(o.as_bytes());
    }
    let digest = h.finalize();
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Compile `file` for `arch`, reusing a cached build when one exists. A cache
/// that cannot be written is not an error (the build is used from memory).
pub fn compile_cached(
    file: &KernelFile,
    arch: &str,
    cache_root: &Path,
) -> Result<Compiled, BenchError> {
    let nvrtc = version()?;
    let dir = cache_dir(cache_root, arch, nvrtc);
    let stem = format!("{}-{}", file.name, build_key(file, arch));
    let (ptx_path, cubin_path) = (
        dir.join(format!("{stem}.ptx")),
        dir.join(format!("{stem}.cubin")),
    );
    if let (Ok(ptx), Ok(cubin)) = (
        std::fs::read_to_string(&ptx_path),
        std::fs::read(&cubin_path),
    ) && !cubin.is_empty()
    {
        return Ok(Compiled {
            file: file.name.to_string(),
            arch: arch.to_string(),
            ptx,
            cubin,
            log: String::new(),
            from_cache: true,
        });
    }
    let compiled = compile(file, arch, &[])?;
    let written = std::fs::create_dir_all(&dir)
        .and_then(|_| write_atomic(&ptx_path, compiled.ptx.as_bytes()))
        .and_then(|_| write_atomic(&cubin_path, &compiled.cubin));
    if let Err(e) = written {
        tracing::warn!(dir = %dir.display(), error = %e, "could not write the kernel cache");
    }
    Ok(compiled)
}

/// Write through a temporary file and rename, so a concurrent reader never
/// sees half a file.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// `.entry` names in a PTX text (the kernels it defines).
pub fn ptx_entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l
                .strip_prefix(".visible .entry ")
                .or_else(|| l.strip_prefix(".entry "))?;
            Some(rest.split(['(', ' ']).next().unwrap_or("").to_string())
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// NUL-terminated copy of a PTX text (what cuModuleLoadData wants).
pub fn ptx_image(ptx: &str) -> Vec<u8> {
    let mut v = ptx.as_bytes().to_vec();
    v.push(0);
    v
}

/// Parse a `sm_XY[a]` string into (major, minor).
pub fn parse_arch(arch: &str) -> Option<(u32, u32)> {
    let digits = arch.strip_prefix("sm_")?.trim_end_matches(['a', 'f']);
    let n: u32 = digits.parse().ok()?;
    Some((n / 10, n % 10))
}

/// The message NVRTC gives, shortened to its first lines (for errors).
pub fn short_log(log: &str) -> String {
    log.lines().take(12).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_read_from_ptx() {
        let ptx = ".version 9.0\n.target sm_90\n.visible .entry copy_f32(\n\t.param .u64 a\n)\n{\n}\n.visible .entry empty_kernel()\n{\n}\n";
        assert_eq!(ptx_entries(ptx), vec!["copy_f32", "empty_kernel"]);
    }

    #[test]
    fn arch_strings_parse() {
        assert_eq!(parse_arch("sm_90a"), Some((9, 0)));
        assert_eq!(parse_arch("sm_100"), Some((10, 0)));
        assert_eq!(parse_arch("sm_89"), Some((8, 9)));
        assert_eq!(parse_arch("compute_90"), None);
    }

    #[test]
    fn cache_layout_and_keys() {
        let f = kernels::file("memory").unwrap();
        let dir = cache_dir(Path::new("/h/cache"), "sm_90", (13, 0));
        assert_eq!(dir, PathBuf::from("/h/cache/ptx/sm_90/13.0"));
        let k90 = build_key(f, "sm_90");
        assert_eq!(k90.len(), 16);
        assert_ne!(k90, build_key(f, "sm_80"));
        assert_eq!(k90, build_key(f, "sm_90"));
    }
}
