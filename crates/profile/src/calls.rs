//! Names of CPU-side calls: display names of CUDA API functions (nsys strips
//! the `_v<version>` suffix) and what kind of wait or work a call is.
//! API names are matched case-sensitively (SQLite's `LIKE 'cuMemset%'` would
//! also match `cuMemSetAccess`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `cudaLaunchKernel_v7000` → `cudaLaunchKernel`, exactly as `nsys stats`
/// does it: drop the last 6 characters when they are `_v` and 4 digits.
pub fn api_display_name(name: &str) -> &str {
    let b = name.as_bytes();
    if b.len() > 6
        && &b[b.len() - 6..b.len() - 4] == b"_v"
        && b[b.len() - 4..].iter().all(u8::is_ascii_digit)
    {
        &name[..name.len() - 6]
    } else {
        name
    }
}

/// What a CPU-side call means for the GPU.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// Lazy module loading / JIT (`cuLibraryLoadData`, `cuModuleLoad*`).
    ModuleLoading,
    /// The host waits for the GPU (`cudaDeviceSynchronize`, `cudaStreamSynchronize`, `cudaEventSynchronize`).
    HostSync,
    /// Device or pinned memory allocation and release.
    Allocation,
    /// A blocking (non-async) memcpy or memset API.
    SyncCopy,
    /// An async memcpy/memset API call.
    AsyncCopy,
    /// Kernel launch.
    Launch,
    /// OS waits: sleep, poll, locks, condition variables.
    OsWait,
    /// OS I/O: read, write, open, recv, send.
    OsIo,
    /// Anything else.
    Other,
}

impl CallKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::ModuleLoading => "module_loading",
            CallKind::HostSync => "host_sync",
            CallKind::Allocation => "allocation",
            CallKind::SyncCopy => "sync_copy",
            CallKind::AsyncCopy => "async_copy",
            CallKind::Launch => "launch",
            CallKind::OsWait => "os_wait",
            CallKind::OsIo => "os_io",
            CallKind::Other => "other",
        }
    }
}

/// Synchronous (blocking) memcpy APIs: `cudaMemcpy*` without `Async`.
pub fn is_sync_memcpy_api(display: &str) -> bool {
    (display.starts_with("cudaMemcpy") && !display.contains("Async"))
        || (display.starts_with("cuMemcpy") && !display.contains("Async"))
}

/// Synchronous memset APIs: `cudaMemset*` without `Async` (case-sensitive:
/// `cuMemSetAccess` is not a memset).
pub fn is_sync_memset_api(display: &str) -> bool {
    (display.starts_with("cudaMemset") && !display.contains("Async"))
        || (display.starts_with("cuMemset") && !display.contains("Async"))
}

/// Async memcpy APIs (`cudaMemcpy%Async%`).
pub fn is_async_memcpy_api(display: &str) -> bool {
    (display.starts_with("cudaMemcpy") || display.starts_with("cuMemcpy"))
        && display.contains("Async")
}

/// Classify a CUDA API call by its display name.
pub fn api_kind(display: &str) -> CallKind {
    let host_sync = display.starts_with("cudaDeviceSynchronize")
        || display.starts_with("cudaStreamSynchronize")
        || display.starts_with("cudaEventSynchronize")
        || display == "cuCtxSynchronize"
        || display == "cuStreamSynchronize"
        || display == "cuEventSynchronize";
    if display.starts_with("cuLibraryLoad")
        || display.starts_with("cuModuleLoad")
        || display.starts_with("cuLink")
    {
        CallKind::ModuleLoading
    } else if host_sync {
        CallKind::HostSync
    } else if is_sync_memcpy_api(display) || is_sync_memset_api(display) {
        CallKind::SyncCopy
    } else if is_async_memcpy_api(display)
        || display.starts_with("cudaMemsetAsync")
        || display.starts_with("cuMemsetD")
    {
        CallKind::AsyncCopy
    } else if display.starts_with("cudaMalloc")
        || display.starts_with("cudaFree")
        || display.starts_with("cudaHostAlloc")
        || display.starts_with("cudaMallocHost")
        || display.starts_with("cudaFreeHost")
        || display.starts_with("cudaHostRegister")
        || display.starts_with("cudaHostUnregister")
        || display.starts_with("cuMemHostRegister")
        || display.starts_with("cuMemHostUnregister")
        || display.starts_with("cuMemHostAlloc")
        || display.starts_with("cuMemAlloc")
        || display.starts_with("cuMemFree")
        || display == "cuMemCreate"
        || display == "cuMemMap"
        || display == "cuMemUnmap"
        || display == "cuMemRelease"
        || display == "cuMemAddressReserve"
        || display == "cuMemAddressFree"
        || display == "cuMemSetAccess"
    {
        CallKind::Allocation
    } else if display.starts_with("cudaLaunch")
        || display.starts_with("cuLaunch")
        || display.starts_with("cudaGraphLaunch")
    {
        CallKind::Launch
    } else {
        CallKind::Other
    }
}

/// Classify an OS runtime call by name.
pub fn osrt_kind(name: &str) -> CallKind {
    const WAIT: &[&str] = &[
        "nanosleep",
        "clock_nanosleep",
        "usleep",
        "sleep",
        "select",
        "pselect",
        "poll",
        "ppoll",
        "epoll_wait",
        "epoll_pwait",
        "pthread_cond_wait",
        "pthread_cond_timedwait",
        "pthread_mutex_lock",
        "pthread_join",
        "sem_wait",
        "sem_timedwait",
        "futex",
        "sched_yield",
        "waitpid",
        "wait",
    ];
    const IO: &[&str] = &[
        "read", "write", "pread", "pwrite", "pread64", "pwrite64", "readv", "writev", "open",
        "open64", "openat", "fopen", "fread", "fwrite", "recv", "recvmsg", "recvfrom", "send",
        "sendmsg", "sendto", "ioctl", "fsync", "mmap", "munmap", "stat", "fstat",
    ];
    if WAIT.contains(&name) {
        CallKind::OsWait
    } else if IO.contains(&name) {
        CallKind::OsIo
    } else {
        CallKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_drop_version_suffixes() {
        assert_eq!(
            api_display_name("cudaLaunchKernel_v7000"),
            "cudaLaunchKernel"
        );
        assert_eq!(
            api_display_name("cudaStreamGetCaptureInfo_v12030"),
            "cudaStreamGetCaptureInfo_v12030"
        );
        assert_eq!(
            api_display_name("cuGetProcAddress_v2"),
            "cuGetProcAddress_v2"
        );
        assert_eq!(api_display_name("cuKernelGetName"), "cuKernelGetName");
    }

    #[test]
    fn memset_matching_is_case_sensitive() {
        assert!(!is_sync_memset_api("cuMemSetAccess"));
        assert!(is_sync_memset_api("cudaMemset"));
        assert!(!is_sync_memset_api("cudaMemsetAsync"));
        assert!(is_sync_memcpy_api("cudaMemcpy"));
        assert!(!is_sync_memcpy_api("cudaMemcpyAsync"));
        assert!(is_async_memcpy_api("cudaMemcpyAsync"));
        assert_eq!(api_kind("cuLibraryLoadData"), CallKind::ModuleLoading);
        assert_eq!(api_kind("cudaStreamSynchronize"), CallKind::HostSync);
        assert_eq!(api_kind("cudaStreamWaitEvent"), CallKind::Other);
        assert_eq!(osrt_kind("nanosleep"), CallKind::OsWait);
    }
}
