//! CUDA microbenchmarks and hardware roofs.
//!
//! Kernels are CUDA C++ in `kernels/*.cu`, embedded in the binary
//! ([`kernels`]) and compiled at run time by NVRTC for the exact architecture
//! of the GPU found ([`nvrtc`], cached under `$AISP_HOME/cache/ptx/`). The
//! harness ([`device`], [`timing`], [`telemetry`], [`verify`]) times with CUDA
//! events after warm-up, flushes L2 between repetitions, draws random inputs
//! on the device ([`rng`] mirrors them on the host), poisons outputs and checks
//! every variant against a CPU reference before it is timed, and records
//! clocks, throttle reasons and energy while it measures.
//!
//! [`targets`] holds the lessons (baseline vs optimized variants), [`roofs`]
//! the hardware ceilings (memory, compute, PCIe, caches, tensor cores),
//! [`multi`] peer-to-peer and [`nccl`] collectives across GPUs, and
//! [`record`] the store table `benchmark_results` they all write to. Whole
//! measurements built on them: [`roofline`] (the measured roofline, the
//! tensor-core sweep, a lesson run's roofs), [`health`] (the speed test) and
//! [`bandwidth`] (the copy-bandwidth test).
//!
//! Nothing here knows about MCP; operations in `crate::ops::{benchmark, hw,
//! gpu}` convert [`BenchError`] into `OpError`.

pub mod bandwidth;
mod blas;
mod cuda;
pub mod datasheet;
mod device;
pub mod health;
pub mod import;
pub mod kernels;
pub mod lab;
pub mod lesson;
pub mod libs;
pub mod multi;
pub mod nccl;
pub mod nvrtc;
pub mod record;
mod rng;
pub mod roofline;
pub mod roofs;
pub mod session;
pub mod stats;
pub mod targets;
mod telemetry;
mod timing;
mod verify;

pub use device::{DeviceInfo, Gpu};
pub use rng::fresh_seed;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a benchmark could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("the CUDA driver library (libcuda) cannot be loaded")]
    NoDriver,
    #[error("NVRTC (libnvrtc) cannot be loaded, so kernels cannot be compiled")]
    NoNvrtc,
    #[error("{0} cannot be loaded")]
    NoLibrary(String),
    #[error("CUDA call {call} failed: {error}")]
    Cuda { call: String, error: String },
    #[error("cuBLAS call {call} failed with status {status}")]
    Cublas { call: String, status: String },
    #[error("NVRTC could not compile {file} for {arch}: {log}")]
    Compile {
        file: String,
        arch: String,
        log: String,
    },
    #[error("NCCL call {call} failed: {error}")]
    Nccl { call: String, error: String },
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    InvalidInput(String),
    #[error("cancelled")]
    Cancelled,
    #[error("{0}")]
    Other(String),
}

impl BenchError {
    /// Wrap a driver error with the call that produced it.
    pub fn cuda(call: &str, err: cudarc::driver::DriverError) -> BenchError {
        let name = err
            .error_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", err.0));
        let text = err
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        BenchError::Cuda {
            call: call.to_string(),
            error: if text.is_empty() {
                name
            } else {
                format!("{name} ({text})")
            },
        }
    }
}

/// What a whole measurement found, the rows it leaves to store
/// (`benchmark_results`) and what it could not measure.
#[derive(Debug)]
pub struct Measured<T> {
    pub found: T,
    pub rows: Vec<lesson::VariantResult>,
    /// What was not measured (or is worth knowing), and why.
    pub notes: Vec<String>,
}

/// Problem size class. Each target maps it to concrete sizes (reported with
/// every result).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SizeClass {
    /// Quick look: fits small GPUs, seconds per target.
    Small,
    /// Default: large enough to fill an H100 and leave L2 far behind.
    #[default]
    Medium,
    /// Big problems (e.g. 8192^3 GEMMs, 1 GiB copies).
    Large,
}

impl SizeClass {
    pub fn as_str(self) -> &'static str {
        match self {
            SizeClass::Small => "small",
            SizeClass::Medium => "medium",
            SizeClass::Large => "large",
        }
    }

    /// Pick one of three values by class.
    pub fn pick<T>(self, small: T, medium: T, large: T) -> T {
        match self {
            SizeClass::Small => small,
            SizeClass::Medium => medium,
            SizeClass::Large => large,
        }
    }
}

pub const MIB: usize = 1 << 20;
pub const GIB: usize = 1 << 30;
