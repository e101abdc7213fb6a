//! NVIDIA GPU access: availability (probed once per process), NVML queries and
//! guarded CUDA driver entry points.
//!
//! cudarc panics when libcuda cannot be loaded, so every cudarc entry in aisp
//! goes through [`cuda_driver_present`] first.

pub mod arch;
mod availability;
pub mod capabilities;
pub mod clocks;
pub mod cuda;
pub mod info;
pub mod nvlink;
pub(crate) mod nvml_util;
pub mod power;
pub mod topology;

pub use availability::{DeviceSummary, GpuAvailability};
pub use cuda::{cublas_version, cuda_driver_api_version, nvrtc_version};
pub use nvml_util::describe as describe_nvml_error;

/// True when the CUDA driver library (libcuda) can be loaded. Call before any
/// cudarc driver function: cudarc panics instead of returning an error.
pub fn cuda_driver_present() -> bool {
    // SAFETY: only dlopens the library and reports whether that worked.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// True when NVRTC (libnvrtc) can be loaded; guard every cudarc NVRTC call.
pub fn nvrtc_present() -> bool {
    // SAFETY: as above, for libnvrtc.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// True when cuBLAS (libcublas) can be loaded; guard every cudarc cuBLAS call.
pub fn cublas_present() -> bool {
    // SAFETY: as above, for libcublas.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}
