//! Is there a usable NVIDIA GPU? Answered once per process, off the async
//! runtime (loading NVML and libcuda blocks), and reported by `aisp_status`.

use std::sync::Arc;

use nvml_wrapper::Nvml;
use schemars::JsonSchema;
use serde::Serialize;

/// What the start-up probe found.
#[derive(Clone)]
pub struct GpuAvailability {
    /// A GPU can be used: NVML initialised and reports at least one device.
    pub available: bool,
    /// Why not, when not (a sentence naming the missing piece).
    pub reason: Option<String>,
    pub devices: Vec<DeviceSummary>,
    pub driver_version: Option<String>,
    /// CUDA driver API version as `major.minor` (e.g. `13.0`).
    pub cuda_driver_version: Option<String>,
    /// libcuda can be loaded (required before any cudarc call).
    pub cuda_driver_loadable: bool,
    /// The NVML handle, shared by every probe of this process.
    pub nvml: Option<Arc<Nvml>>,
}

impl std::fmt::Debug for GpuAvailability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuAvailability")
            .field("available", &self.available)
            .field("reason", &self.reason)
            .field("devices", &self.devices)
            .field("driver_version", &self.driver_version)
            .field("cuda_driver_version", &self.cuda_driver_version)
            .field("cuda_driver_loadable", &self.cuda_driver_loadable)
            .finish()
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DeviceSummary {
    pub index: u32,
    pub name: String,
    pub memory_total_mib: u64,
}

impl GpuAvailability {
    /// Probe NVML and libcuda. Never panics.
    pub fn probe() -> GpuAvailability {
        let cuda_driver_loadable = super::cuda_driver_present();
        let nvml = match Nvml::init() {
            Ok(nvml) => nvml,
            Err(err) => {
                let reason = match err {
                    nvml_wrapper::error::NvmlError::LibloadingError(_) => {
                        "the NVIDIA driver's NVML library (libnvidia-ml.so.1) could not be loaded: \
                         no NVIDIA driver is installed or visible to this process"
                            .to_string()
                    }
                    nvml_wrapper::error::NvmlError::DriverNotLoaded => {
                        "the NVIDIA kernel driver is not loaded".to_string()
                    }
                    other => format!("NVML failed to initialise: {other}"),
                };
                return GpuAvailability::unavailable(reason, cuda_driver_loadable);
            }
        };
        let driver_version = nvml.sys_driver_version().ok();
        let cuda_driver_version = nvml.sys_cuda_driver_version().ok().map(|v| {
            format!(
                "{}.{}",
                nvml_wrapper::cuda_driver_version_major(v),
                nvml_wrapper::cuda_driver_version_minor(v)
            )
        });
        let count = match nvml.device_count() {
            Ok(n) => n,
            Err(err) => {
                let mut a = GpuAvailability::unavailable(
                    format!("NVML could not count devices: {err}"),
                    cuda_driver_loadable,
                );
                a.driver_version = driver_version;
                return a;
            }
        };
        let mut devices = Vec::new();
        for index in 0..count {
            if let Ok(dev) = nvml.device_by_index(index) {
                devices.push(DeviceSummary {
                    index,
                    name: dev.name().unwrap_or_else(|_| "unknown".into()),
                    memory_total_mib: dev.memory_info().map(|m| m.total >> 20).unwrap_or(0),
                });
            }
        }
        if !devices.is_empty() && cuda_driver_loadable {
            // cuInit and the attribute reads cost tens of milliseconds; do them
            // now, off the caller's path, so aisp_gpu_info stays fast.
            std::thread::Builder::new()
                .name("aisp-cuda-attributes".into())
                .spawn(|| {
                    if let Err(e) = super::cuda::all_attributes() {
                        tracing::info!("CUDA device attributes unavailable: {e}");
                    }
                })
                .ok();
        }
        let (available, reason) = if devices.is_empty() {
            (
                false,
                Some("the NVIDIA driver is loaded but reports no GPU devices".to_string()),
            )
        } else {
            (true, None)
        };
        GpuAvailability {
            available,
            reason,
            devices,
            driver_version,
            cuda_driver_version,
            cuda_driver_loadable,
            nvml: Some(Arc::new(nvml)),
        }
    }

    pub fn unavailable(reason: impl Into<String>, cuda_driver_loadable: bool) -> GpuAvailability {
        GpuAvailability {
            available: false,
            reason: Some(reason.into()),
            devices: Vec::new(),
            driver_version: None,
            cuda_driver_version: None,
            cuda_driver_loadable,
            nvml: None,
        }
    }
}
