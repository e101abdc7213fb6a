//! A measuring session on one GPU: the opened device, the versions and
//! metadata every stored row carries, and saving rows to the store.

use std::path::Path;
use std::sync::Arc;

use nvml_wrapper::Nvml;

use super::device::Gpu;
use super::record::{self, RunMeta};
use super::{BenchError, SizeClass};

pub struct Session {
    pub gpu: Gpu,
    pub meta: RunMeta,
    pub nvml: Option<Arc<Nvml>>,
}

/// Number of CUDA devices, or an error naming what is missing.
pub fn device_count() -> Result<usize, BenchError> {
    if !crate::gpu::cuda_driver_present() {
        return Err(BenchError::NoDriver);
    }
    cudarc::driver::result::init().map_err(|e| BenchError::cuda("cuInit", e))?;
    cudarc::driver::result::device::get_count()
        .map(|n| n.max(0) as usize)
        .map_err(|e| BenchError::cuda("cuDeviceGetCount", e))
}

/// Check a CUDA ordinal.
pub fn check_ordinal(device: u32) -> Result<usize, BenchError> {
    let n = device_count()?;
    if (device as usize) < n {
        Ok(device as usize)
    } else {
        Err(BenchError::InvalidInput(format!(
            "device {device} does not exist: CUDA sees {n} device(s) (ordinals 0..{})",
            n.saturating_sub(1)
        )))
    }
}

impl Session {
    /// Open CUDA device `ordinal` for `tool`.
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        ordinal: usize,
        cache_root: &Path,
        tool: &str,
        nvml: Option<Arc<Nvml>>,
        driver_version: Option<String>,
        size: SizeClass,
        seed: u32,
    ) -> Result<Session, BenchError> {
        super::libs::preload();
        let gpu = Gpu::open(ordinal, cache_root)?;
        let meta = RunMeta {
            run_id: record::new_run_id(),
            created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            tool: tool.to_string(),
            device: gpu.info.clone(),
            driver_version,
            cuda_driver_version: super::cuda::driver_version(),
            nvrtc_version: Some(gpu.nvrtc_version_string()),
            cublas_version: super::blas::cublas_version(),
            host: record::hostname(),
            seed,
            size_class: size.as_str().to_string(),
        };
        Ok(Session { gpu, meta, nvml })
    }
}
