//! Guarded CUDA queries through cudarc: driver API version, NVRTC and cuBLAS
//! versions, and device attributes. Every entry checks that the library can
//! be loaded first (cudarc panics when it cannot).
//!
//! Device attributes are read once per process (cuInit costs tens of
//! milliseconds) and matched to NVML devices by PCI address, because CUDA
//! orders devices fastest-first and honours CUDA_VISIBLE_DEVICES while NVML
//! numbers them by PCI bus.

use std::sync::OnceLock;

use cudarc::driver::sys::CUdevice_attribute as A;
use schemars::JsonSchema;
use serde::Serialize;

/// The CUDA version the driver supports, from `cuDriverGetVersion` (`13.0`).
pub fn cuda_driver_api_version() -> Option<String> {
    if !super::cuda_driver_present() {
        return None;
    }
    let mut v: std::ffi::c_int = 0;
    // SAFETY: libcuda is loadable (checked above); the call writes one int.
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    (r == cudarc::driver::sys::CUresult::CUDA_SUCCESS && v > 0)
        .then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// The NVRTC version the loader finds (`12.4`).
pub fn nvrtc_version() -> Option<String> {
    if !super::nvrtc_present() {
        return None;
    }
    let (mut major, mut minor): (std::ffi::c_int, std::ffi::c_int) = (0, 0);
    // SAFETY: libnvrtc is loadable (checked above); the call writes two ints.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS).then(|| format!("{major}.{minor}"))
}

/// The cuBLAS version the loader finds (`12.4.5`).
pub fn cublas_version() -> Option<String> {
    if !super::cublas_present() {
        return None;
    }
    use cudarc::cublas::sys::{cublasGetProperty, cublasStatus_t, libraryPropertyType};
    let mut parts = [0 as std::ffi::c_int; 3];
    for (i, prop) in [
        libraryPropertyType::MAJOR_VERSION,
        libraryPropertyType::MINOR_VERSION,
        libraryPropertyType::PATCH_LEVEL,
    ]
    .into_iter()
    .enumerate()
    {
        // SAFETY: libcublas is loadable (checked above); the call writes one int.
        let r = unsafe { cublasGetProperty(prop, &mut parts[i]) };
        if r != cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return None;
        }
    }
    Some(format!("{}.{}.{}", parts[0], parts[1], parts[2]))
}

/// Device attributes from the CUDA driver. A field is null when this driver
/// does not know the attribute (older than the CUDA version that added it).
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq, Default)]
pub struct CudaAttributes {
    /// The device's CUDA ordinal in this process (after CUDA_VISIBLE_DEVICES).
    pub cuda_ordinal: u32,
    /// PCI address in sysfs spelling (`0000:18:00.0`).
    pub pci_bus_id: String,
    pub sm_count: Option<u32>,
    pub compute_capability: Option<String>,
    pub warp_size: Option<u32>,
    pub max_threads_per_block: Option<u32>,
    pub max_threads_per_sm: Option<u32>,
    pub max_blocks_per_sm: Option<u32>,
    /// 32-bit registers per SM.
    pub registers_per_sm: Option<u32>,
    pub registers_per_block: Option<u32>,
    /// Shared memory a block gets without opting in.
    pub shared_memory_per_block_bytes: Option<u64>,
    /// Shared memory a block can get with cudaFuncAttributeMaxDynamicSharedMemorySize.
    pub shared_memory_per_block_optin_bytes: Option<u64>,
    pub shared_memory_per_sm_bytes: Option<u64>,
    pub l2_cache_bytes: Option<u64>,
    /// Largest L2 region that can be set aside for persisting accesses.
    pub l2_persisting_max_bytes: Option<u64>,
    /// Copy engines that can run concurrently with kernels.
    pub async_engine_count: Option<u32>,
    pub memory_bus_width_bits: Option<u32>,
    pub cluster_launch: Option<bool>,
    pub tensor_map_access: Option<bool>,
    pub cooperative_launch: Option<bool>,
    pub memory_pools: Option<bool>,
    pub gpu_direct_rdma: Option<bool>,
    pub multicast: Option<bool>,
    pub dma_buf: Option<bool>,
    /// GPU can access pageable host memory coherently (HMM or Grace's C2C).
    pub pageable_memory_access: Option<bool>,
    pub host_native_atomics: Option<bool>,
    pub integrated: Option<bool>,
    pub ecc_enabled: Option<bool>,
}

/// Every CUDA device visible to this process, read once.
pub fn all_attributes() -> &'static Result<Vec<CudaAttributes>, String> {
    static CACHE: OnceLock<Result<Vec<CudaAttributes>, String>> = OnceLock::new();
    CACHE.get_or_init(read_all)
}

/// The attributes of the CUDA device at `pci_bus_id` (any spelling).
pub fn attributes_for_pci(pci_bus_id: &str) -> Result<CudaAttributes, String> {
    let want = crate::host::pci::normalize_bus_id(pci_bus_id)
        .ok_or_else(|| format!("`{pci_bus_id}` is not a PCI address"))?;
    match all_attributes() {
        Err(e) => Err(e.clone()),
        Ok(devs) => devs.iter().find(|d| d.pci_bus_id == want).cloned().ok_or_else(|| {
            "this GPU is not visible to CUDA in this process (CUDA_VISIBLE_DEVICES hides it, or it is a MIG parent)"
                .to_string()
        }),
    }
}

fn read_all() -> Result<Vec<CudaAttributes>, String> {
    if !super::cuda_driver_present() {
        return Err("the CUDA driver library (libcuda.so) cannot be loaded".to_string());
    }
    cudarc::driver::result::init().map_err(|e| format!("cuInit failed: {e}"))?;
    let count = cudarc::driver::result::device::get_count()
        .map_err(|e| format!("cuDeviceGetCount failed: {e}"))?;
    let mut out = Vec::new();
    for ordinal in 0..count.max(0) {
        let dev = cudarc::driver::result::device::get(ordinal)
            .map_err(|e| format!("cuDeviceGet({ordinal}) failed: {e}"))?;
        // SAFETY: `dev` came from cuDeviceGet; an unknown attribute returns an error, not UB.
        let get = |a: A| unsafe { cudarc::driver::result::device::get_attribute(dev, a) }.ok();
        let u = |a: A| get(a).and_then(|v| u32::try_from(v).ok());
        let b = |a: A| get(a).map(|v| v != 0);
        let bytes = |a: A| get(a).and_then(|v| u64::try_from(v).ok());
        let (domain, bus, device) = (
            u(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID).unwrap_or(0),
            u(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID).unwrap_or(0),
            u(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID).unwrap_or(0),
        );
        let cc = match (
            u(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            u(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        ) {
            (Some(a), Some(b)) => Some(format!("{a}.{b}")),
            _ => None,
        };
        out.push(CudaAttributes {
            cuda_ordinal: ordinal as u32,
            pci_bus_id: format!("{domain:04x}:{bus:02x}:{device:02x}.0"),
            sm_count: u(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            compute_capability: cc,
            warp_size: u(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE),
            max_threads_per_block: u(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            max_threads_per_sm: u(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
            max_blocks_per_sm: u(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR),
            registers_per_sm: u(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR),
            registers_per_block: u(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
            shared_memory_per_block_bytes: bytes(
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
            ),
            shared_memory_per_block_optin_bytes: bytes(
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            ),
            shared_memory_per_sm_bytes: bytes(
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
            ),
            l2_cache_bytes: bytes(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
            l2_persisting_max_bytes: bytes(A::CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE),
            async_engine_count: u(A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT),
            memory_bus_width_bits: u(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
            cluster_launch: b(A::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH),
            tensor_map_access: b(A::CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED),
            cooperative_launch: b(A::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH),
            memory_pools: b(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED),
            gpu_direct_rdma: b(A::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED),
            multicast: b(A::CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED),
            dma_buf: b(A::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED),
            pageable_memory_access: b(A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS),
            host_native_atomics: b(A::CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED),
            integrated: b(A::CU_DEVICE_ATTRIBUTE_INTEGRATED),
            ecc_enabled: b(A::CU_DEVICE_ATTRIBUTE_ECC_ENABLED),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_without_a_driver_answer_none_instead_of_panicking() {
        // On a host without CUDA every query must degrade; on a GPU host they must answer.
        let v = cuda_driver_api_version();
        assert_eq!(v.is_some(), super::super::cuda_driver_present());
        let _ = nvrtc_version();
        let _ = cublas_version();
        match all_attributes() {
            Ok(devs) => {
                for d in devs {
                    assert!(d.sm_count.unwrap_or(0) > 0);
                    assert_eq!(d.warp_size, Some(32));
                }
            }
            Err(e) => assert!(!e.is_empty()),
        }
        assert!(attributes_for_pci("not a bus id").is_err());
    }
}
