//! Library errors → [`OpError`]: the kind, message and hint an operation
//! answers with. The library crates return their own errors and know nothing of
//! tools or front ends; the hints that say what to do (and name tools) are
//! written here, once.

use aisp_hw::bench::BenchError;
use aisp_hw::gpu::GpuAvailability;
use aisp_profile::input_file::InputFileError;
use nvml_wrapper::Nvml;

use crate::error::OpError;

/// What GPU operations check before they start, as [`OpError`]s.
pub trait GpuCheck {
    /// The error GPU operations return when there is no GPU.
    fn unavailable_error(&self, tool: &str) -> OpError;
    /// The NVML handle or a `gpu_unavailable` error.
    fn require_nvml(&self, tool: &str) -> Result<&Nvml, OpError>;
    /// Check a `device` argument against the devices found.
    fn check_device(&self, device: Option<u32>) -> Result<Vec<u32>, OpError>;
}

impl GpuCheck for GpuAvailability {
    fn unavailable_error(&self, tool: &str) -> OpError {
        OpError::gpu_unavailable(
            format!(
                "{tool} needs an NVIDIA GPU, and none is usable here: {}.",
                self.reason.as_deref().unwrap_or("unknown reason")
            ),
            "Run aisp on a machine with an NVIDIA GPU and driver (check with `nvidia-smi`). \
             Profile analysis (aisp_profile_*), planners and catalogs work without a GPU.",
        )
    }

    fn require_nvml(&self, tool: &str) -> Result<&Nvml, OpError> {
        match (&self.nvml, self.available) {
            (Some(nvml), true) => Ok(nvml),
            _ => Err(self.unavailable_error(tool)),
        }
    }

    fn check_device(&self, device: Option<u32>) -> Result<Vec<u32>, OpError> {
        let all: Vec<u32> = self.devices.iter().map(|d| d.index).collect();
        match device {
            None => Ok(all),
            Some(d) if all.contains(&d) => Ok(vec![d]),
            Some(d) => Err(OpError::invalid_input(
                format!("device {d} does not exist; this machine has devices {all:?}"),
                "Pass a device index from aisp_status, or omit `device` for all devices.",
            )),
        }
    }
}

/// [`BenchError`] as an operation's error.
pub trait BenchErrorExt {
    /// Convert into the error an operation returns, with a hint.
    fn into_op_error(self, tool: &str) -> OpError;
}

impl BenchErrorExt for BenchError {
    fn into_op_error(self, tool: &str) -> OpError {
        match self {
            BenchError::NoDriver => OpError::gpu_unavailable(
                format!("{tool} needs the CUDA driver (libcuda.so.1), which cannot be loaded."),
                "Install the NVIDIA driver and check `nvidia-smi`.",
            ),
            BenchError::NoNvrtc => OpError::unsupported(
                format!(
                    "{tool} compiles its kernels with NVRTC (libnvrtc.so.13 or .12), which was not found."
                ),
                "Install NVRTC: `pip install nvidia-cuda-nvrtc` (aisp finds it in Python's site-packages), \
                 install the CUDA toolkit, or set AISP_CUDA_LIB_DIRS to the folder holding libnvrtc.so.*.",
            ),
            BenchError::NoLibrary(lib) => OpError::unsupported(
                format!("{tool} needs {lib}, which cannot be loaded."),
                "Install it (CUDA toolkit or the matching nvidia-* pip wheel) or set AISP_CUDA_LIB_DIRS \
                 (or AISP_NCCL_LIB for NCCL) to where it is.",
            ),
            BenchError::Unsupported(msg) => OpError::unsupported(
                msg,
                "Run it on a GPU that has the feature, or pick other targets (aisp_benchmark_targets lists them).",
            ),
            BenchError::InvalidInput(msg) => {
                OpError::invalid_input(msg, "Check the arguments against the input schema.")
            }
            BenchError::Cancelled => OpError::cancelled(),
            other => OpError::internal(format!("{tool} failed: {other}")),
        }
    }
}

impl From<InputFileError> for OpError {
    fn from(e: InputFileError) -> OpError {
        let message = e.to_string();
        match &e {
            InputFileError::NotFound { .. } => OpError::not_found(
                message,
                "Check the path (relative paths are resolved from the server's working directory).",
            ),
            InputFileError::NotRegular { .. } => OpError::invalid_input(
                message,
                "Pass the path of a regular file; pipes, devices, sockets and folders are not read.",
            ),
            InputFileError::SymlinkLoop { .. } => OpError::invalid_input(
                message,
                "Fix the link (`ls -l` shows where it points) or pass the file's real path.",
            ),
            InputFileError::PermissionDenied { .. } => OpError::invalid_input(
                message,
                "Make the file readable by the user aisp runs as, or copy it somewhere readable.",
            ),
            InputFileError::NameTooLong { .. } => OpError::invalid_input(
                message,
                "Pass the path of an existing file; paths are at most 4096 bytes.",
            ),
            InputFileError::TooLarge { kind, .. } => {
                let (key, env) = kind.setting();
                OpError::invalid_input(
                    message,
                    format!(
                        "If the file is what you meant, raise the cap: `{key}` in the config file or {env} \
                         (in MiB)."
                    ),
                )
            }
            InputFileError::WrongContent { .. } => OpError::invalid_input(
                message,
                "Pass the file the argument asks for (a trace is JSON, plain or .xz; a log or CSV page is text); \
                 nothing more of this file was read.",
            ),
            InputFileError::Io { .. } => OpError::invalid_input(
                message,
                "Pass a readable regular file; files under /proc and /sys are not inputs.",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use aisp_hw::gpu::DeviceSummary;
    use aisp_profile::input_file::{InputKind, InputLimits, read_capped};
    use std::path::Path;
    use std::time::{Duration, Instant};

    const MIB: u64 = 1 << 20;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn probing_never_panics_and_explains_itself() {
        let a = GpuAvailability::probe();
        if !a.available {
            let reason = a
                .reason
                .clone()
                .expect("an unavailable GPU carries a reason");
            assert!(!reason.is_empty());
            let err = a.unavailable_error("aisp_gpu_info");
            assert_eq!(err.kind, ErrorKind::GpuUnavailable);
            assert!(err.message.contains(&reason));
            assert!(a.require_nvml("aisp_gpu_info").is_err());
        } else {
            assert!(!a.devices.is_empty());
        }
    }

    #[test]
    fn device_arguments_are_checked() {
        let mut a = GpuAvailability::unavailable("none", false);
        a.devices = vec![DeviceSummary {
            index: 0,
            name: "X".into(),
            memory_total_mib: 1,
        }];
        assert_eq!(a.check_device(None).unwrap(), vec![0]);
        assert_eq!(a.check_device(Some(0)).unwrap(), vec![0]);
        assert_eq!(
            a.check_device(Some(3)).unwrap_err().kind,
            ErrorKind::InvalidInput
        );
    }

    #[test]
    fn fifos_devices_folders_and_loops_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        let lp = dir.path().join("loop");
        std::os::unix::fs::symlink(&lp, &lp).unwrap();
        let limits = InputLimits::default();
        let started = Instant::now();
        let cases: [(&Path, ErrorKind, &str); 5] = [
            (&fifo, ErrorKind::InvalidInput, "FIFO"),
            (
                Path::new("/dev/zero"),
                ErrorKind::InvalidInput,
                "character device",
            ),
            (dir.path(), ErrorKind::InvalidInput, "directory"),
            (&lp, ErrorKind::InvalidInput, "loops"),
            (
                &dir.path().join("nope"),
                ErrorKind::NotFound,
                "does not exist",
            ),
        ];
        for (path, kind, words) in cases {
            let err =
                OpError::from(read_capped(path, InputKind::KinetoTrace, &limits).unwrap_err());
            assert_eq!(err.kind, kind, "{path:?}: {err:?}");
            assert!(err.message.contains(words), "{path:?}: {}", err.message);
        }
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn caps_are_checked_before_and_while_reading() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("big.csv");
        std::fs::write(&f, vec![b'x'; 3 * MIB as usize]).unwrap();
        let limits = InputLimits {
            ncu_csv_bytes: 2 * MIB,
            ..InputLimits::default()
        };
        let err = OpError::from(read_capped(&f, InputKind::NcuCsv, &limits).unwrap_err());
        assert_eq!(err.kind, ErrorKind::InvalidInput);
        assert!(err.message.contains("2 MiB"), "{}", err.message);
        assert!(err.hint.contains("AISP_MAX_NCU_CSV_MIB"), "{}", err.hint);
        assert_eq!(
            read_capped(&f, InputKind::KinetoTrace, &limits)
                .unwrap()
                .len(),
            3 * MIB as usize
        );
        // /proc files report size 0: the cap holds while reading.
        let tiny = InputLimits {
            ncu_csv_bytes: 16,
            ..InputLimits::default()
        };
        let err = read_capped(Path::new("/proc/self/maps"), InputKind::NcuCsv, &tiny).unwrap_err();
        assert!(
            matches!(err, InputFileError::TooLarge { size: None, .. }),
            "{err:?}"
        );
        // /proc/self/mem cannot be read from offset 0: an I/O error, not "not found".
        let err = OpError::from(
            read_capped(Path::new("/proc/self/mem"), InputKind::NcuCsv, &limits).unwrap_err(),
        );
        assert_eq!(err.kind, ErrorKind::InvalidInput, "{err:?}");
    }

    #[test]
    fn content_that_is_not_what_was_asked_for_is_bad_input_with_a_hint() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("trace.json");
        std::fs::write(&f, b"<html>not a trace").unwrap();
        let err = OpError::from(
            aisp_profile::input_file::read_capped_sniffed(
                &f,
                InputKind::KinetoTrace,
                &InputLimits::default(),
                aisp_profile::input_file::Sniff::Json,
            )
            .unwrap_err(),
        );
        assert_eq!(err.kind, ErrorKind::InvalidInput, "{err:?}");
        assert!(err.message.contains("is not JSON"), "{}", err.message);
        assert!(
            err.hint.contains("nothing more of this file was read"),
            "{}",
            err.hint
        );
    }
}
