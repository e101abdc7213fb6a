//! A thin owning layer over the CUDA driver API (through cudarc's `result`
//! and `sys` modules): device buffers, pinned host buffers, streams, events,
//! modules and graphs that free themselves, and a launch that takes raw
//! argument pointers.
//!
//! Why not cudarc's safe types: they record an event for every argument of
//! every launch when several streams exist (which would distort the launch
//! overhead lesson), and a few of their destructors unwrap. Here every call
//! returns a [`BenchError`] naming the call, and destructors ignore errors
//! (the context may be gone when the process exits).
//!
//! Callers must have checked [`crate::gpu::cuda_driver_present`] first:
//! cudarc panics when libcuda is missing.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::CudaContext;
use cudarc::driver::result;
use cudarc::driver::sys;

use super::BenchError;

pub type Result<T> = std::result::Result<T, BenchError>;

/// Map a driver result to a [`BenchError`] naming the call.
pub fn check(call: &str, r: std::result::Result<(), cudarc::driver::DriverError>) -> Result<()> {
    r.map_err(|e| BenchError::cuda(call, e))
}

/// Check a raw `CUresult`.
pub fn check_raw(call: &str, r: sys::CUresult) -> Result<()> {
    check(call, r.result())
}

/// A primary context on one device, current on the calling thread after
/// [`Ctx::open`] and [`Ctx::bind`].
#[derive(Clone)]
pub struct Ctx {
    pub inner: Arc<CudaContext>,
}

impl Ctx {
    pub fn open(ordinal: usize) -> Result<Ctx> {
        if !crate::gpu::cuda_driver_present() {
            return Err(BenchError::NoDriver);
        }
        let inner =
            CudaContext::new(ordinal).map_err(|e| BenchError::cuda("cuCtxCreate (primary)", e))?;
        Ok(Ctx { inner })
    }

    /// Make this context current on the calling thread.
    pub fn bind(&self) -> Result<()> {
        self.inner
            .bind_to_thread()
            .map_err(|e| BenchError::cuda("cuCtxSetCurrent", e))
    }

    pub fn raw(&self) -> sys::CUcontext {
        self.inner.cu_ctx()
    }

    pub fn device(&self) -> sys::CUdevice {
        self.inner.cu_device()
    }

    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        self.inner
            .attribute(attr)
            .map_err(|e| BenchError::cuda("cuDeviceGetAttribute", e))
    }

    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        check("cuCtxSynchronize", result::ctx::synchronize())
    }

    /// (free, total) device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        result::mem_get_info().map_err(|e| BenchError::cuda("cuMemGetInfo", e))
    }
}

/// Device memory, freed on drop.
pub struct DevBuf {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: Ctx,
}

impl DevBuf {
    pub fn alloc(ctx: &Ctx, bytes: usize) -> Result<DevBuf> {
        ctx.bind()?;
        // SAFETY: plain allocation; the memory is uninitialised and only used as raw bytes.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }
            .map_err(|e| BenchError::cuda("cuMemAlloc", e))?;
        Ok(DevBuf {
            ptr,
            bytes,
            ctx: ctx.clone(),
        })
    }

    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// Address `offset` bytes into the buffer.
    pub fn at(&self, offset: usize) -> sys::CUdeviceptr {
        debug_assert!(offset <= self.bytes);
        self.ptr + offset as u64
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Number of `T` elements the buffer holds.
    pub fn len<T>(&self) -> usize {
        self.bytes / std::mem::size_of::<T>()
    }

    /// Fill every byte with `value` on `stream` (asynchronous).
    pub fn memset_async(&self, value: u8, stream: &Stream) -> Result<()> {
        stream.ctx.bind()?;
        // SAFETY: the range lies inside this allocation.
        check("cuMemsetD8Async", unsafe {
            result::memset_d8_async(self.ptr, value, self.bytes, stream.raw())
        })
    }

    /// Copy the whole buffer to a new host vector (synchronous on `stream`).
    pub fn download<T: Copy + Default>(&self, stream: &Stream) -> Result<Vec<T>> {
        self.download_range::<T>(0, self.len::<T>(), stream)
    }

    /// Copy `count` elements starting at element `first` to the host.
    pub fn download_range<T: Copy + Default>(
        &self,
        first: usize,
        count: usize,
        stream: &Stream,
    ) -> Result<Vec<T>> {
        let size = std::mem::size_of::<T>();
        if (first + count) * size > self.bytes {
            return Err(BenchError::Other(format!(
                "download of elements {first}..{} past the end of a {}-byte buffer",
                first + count,
                self.bytes
            )));
        }
        let mut out = vec![T::default(); count];
        self.ctx.bind()?;
        // SAFETY: `out` has room for `count` elements; the stream is synchronised before return.
        unsafe {
            check_raw(
                "cuMemcpyDtoHAsync",
                sys::cuMemcpyDtoHAsync_v2(
                    out.as_mut_ptr() as *mut c_void,
                    self.ptr + (first * size) as u64,
                    count * size,
                    stream.raw(),
                ),
            )?;
        }
        stream.synchronize()?;
        Ok(out)
    }

    /// Copy host data into the start of the buffer (synchronous on `stream`).
    pub fn upload<T: Copy>(&self, data: &[T], stream: &Stream) -> Result<()> {
        let bytes = std::mem::size_of_val(data);
        if bytes > self.bytes {
            return Err(BenchError::Other(
                "upload larger than the device buffer".into(),
            ));
        }
        self.ctx.bind()?;
        // SAFETY: both ranges are valid for `bytes`; synchronised before `data` can go away.
        unsafe {
            check_raw(
                "cuMemcpyHtoDAsync",
                sys::cuMemcpyHtoDAsync_v2(
                    self.ptr,
                    data.as_ptr() as *const c_void,
                    bytes,
                    stream.raw(),
                ),
            )?;
        }
        stream.synchronize()
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: allocated by cuMemAlloc in this context and freed once.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// Page-locked host memory, freed on drop.
pub struct HostBuf {
    ptr: *mut c_void,
    bytes: usize,
    ctx: Ctx,
}

// SAFETY: the buffer is plain memory owned by this value.
unsafe impl Send for HostBuf {}

impl HostBuf {
    pub fn alloc(ctx: &Ctx, bytes: usize) -> Result<HostBuf> {
        ctx.bind()?;
        // SAFETY: returns page-locked memory of `bytes` bytes or an error. Flag 0: portable off,
        // default caching (what cudaMallocHost gives).
        let ptr = unsafe { result::malloc_host(bytes.max(1), 0) }
            .map_err(|e| BenchError::cuda("cuMemHostAlloc", e))?;
        Ok(HostBuf {
            ptr,
            bytes,
            ctx: ctx.clone(),
        })
    }

    pub fn ptr(&self) -> *mut c_void {
        self.ptr
    }

    pub fn as_slice<T: Copy>(&self) -> &[T] {
        // SAFETY: page-locked allocation of `bytes` bytes, aligned to a page; T is plain data.
        unsafe {
            std::slice::from_raw_parts(self.ptr as *const T, self.bytes / std::mem::size_of::<T>())
        }
    }

    pub fn as_mut_slice<T: Copy>(&mut self) -> &mut [T] {
        // SAFETY: as above, and `&mut self` gives exclusive access.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr as *mut T,
                self.bytes / std::mem::size_of::<T>(),
            )
        }
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: allocated by cuMemHostAlloc and freed once.
            let _ = unsafe { result::free_host(self.ptr) };
        }
    }
}

/// A non-blocking stream.
pub struct Stream {
    raw: sys::CUstream,
    ctx: Ctx,
}

impl Stream {
    pub fn new(ctx: &Ctx) -> Result<Stream> {
        ctx.bind()?;
        let raw = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| BenchError::cuda("cuStreamCreate", e))?;
        Ok(Stream {
            raw,
            ctx: ctx.clone(),
        })
    }

    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }

    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: valid stream owned by this value.
        check("cuStreamSynchronize", unsafe {
            result::stream::synchronize(self.raw)
        })
    }

    /// Make this stream wait for `event`.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: both handles are valid.
        check("cuStreamWaitEvent", unsafe {
            result::stream::wait_event(
                self.raw,
                event.raw,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        })
    }

    /// Copy between devices (through NVLink/PCIe peer access when enabled,
    /// else staged through the host by the driver).
    pub fn copy_peer(
        &self,
        dst: sys::CUdeviceptr,
        dst_ctx: &Ctx,
        src: sys::CUdeviceptr,
        src_ctx: &Ctx,
        bytes: usize,
    ) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: callers pass ranges inside live allocations of the named contexts.
        check_raw("cuMemcpyPeerAsync", unsafe {
            sys::cuMemcpyPeerAsync(dst, dst_ctx.raw(), src, src_ctx.raw(), bytes, self.raw)
        })
    }

    /// Device-to-device copy of `bytes` bytes.
    pub fn copy_dtod(
        &self,
        dst: sys::CUdeviceptr,
        src: sys::CUdeviceptr,
        bytes: usize,
    ) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: callers pass ranges inside live allocations.
        check_raw("cuMemcpyDtoDAsync", unsafe {
            sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, self.raw)
        })
    }

    /// Host-to-device copy from any host memory (pageable or pinned).
    ///
    /// # Safety
    /// `src` must be valid for `bytes` bytes until the stream has finished the copy.
    pub unsafe fn copy_htod(
        &self,
        dst: sys::CUdeviceptr,
        src: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: guaranteed by the caller.
        check_raw("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src, bytes, self.raw)
        })
    }

    /// Device-to-host copy into any host memory.
    ///
    /// # Safety
    /// `dst` must be valid for `bytes` bytes until the stream has finished the copy.
    pub unsafe fn copy_dtoh(
        &self,
        dst: *mut c_void,
        src: sys::CUdeviceptr,
        bytes: usize,
    ) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: guaranteed by the caller.
        check_raw("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(dst, src, bytes, self.raw)
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created by cuStreamCreate and destroyed once.
            let _ = unsafe { result::stream::destroy(self.raw) };
        }
    }
}

/// A timing event.
pub struct Event {
    raw: sys::CUevent,
    ctx: Ctx,
}

impl Event {
    pub fn new(ctx: &Ctx) -> Result<Event> {
        ctx.bind()?;
        let raw = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map_err(|e| BenchError::cuda("cuEventCreate", e))?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
        })
    }

    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: both handles are valid and belong to the same context.
        check("cuEventRecord", unsafe {
            result::event::record(self.raw, stream.raw)
        })
    }

    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: valid event.
        check("cuEventSynchronize", unsafe {
            result::event::synchronize(self.raw)
        })
    }

    /// Milliseconds from `self` to `end`, waiting for both.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f64> {
        self.synchronize()?;
        end.synchronize()?;
        // SAFETY: both events recorded and complete.
        unsafe { result::event::elapsed(self.raw, end.raw) }
            .map(f64::from)
            .map_err(|e| BenchError::cuda("cuEventElapsedTime", e))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created by cuEventCreate and destroyed once.
            let _ = unsafe { result::event::destroy(self.raw) };
        }
    }
}

/// A loaded module (CUBIN or PTX image).
pub struct Module {
    raw: sys::CUmodule,
    ctx: Ctx,
}

// SAFETY: module and function handles are plain driver handles the driver
// lets any thread use; nothing here is tied to the creating thread.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Module {
    /// Load a CUBIN or a NUL-terminated PTX image.
    pub fn load(ctx: &Ctx, image: &[u8]) -> Result<Module> {
        ctx.bind()?;
        // SAFETY: `image` is a complete CUBIN, or PTX text that ends with a NUL byte.
        let raw = unsafe { result::module::load_data(image.as_ptr() as *const c_void) }
            .map_err(|e| BenchError::cuda("cuModuleLoadData", e))?;
        Ok(Module {
            raw,
            ctx: ctx.clone(),
        })
    }

    pub fn function(self: &Arc<Self>, name: &str) -> Result<Function> {
        let cname = std::ffi::CString::new(name)
            .map_err(|_| BenchError::Other("kernel name with NUL".into()))?;
        self.ctx.bind()?;
        // SAFETY: valid module; the name is NUL-terminated.
        let raw = unsafe { result::module::get_function(self.raw, cname) }
            .map_err(|e| BenchError::cuda(&format!("cuModuleGetFunction({name})"), e))?;
        Ok(Function {
            raw,
            name: name.to_string(),
            _module: Arc::clone(self),
        })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: loaded by cuModuleLoadData and unloaded once.
            let _ = unsafe { result::module::unload(self.raw) };
        }
    }
}

/// A kernel; keeps its module loaded.
#[derive(Clone)]
pub struct Function {
    raw: sys::CUfunction,
    name: String,
    _module: Arc<Module>,
}

/// A kernel argument: a pointer to the value, as cuLaunchKernel wants.
pub fn arg<T>(value: &T) -> *mut c_void {
    value as *const T as *mut c_void
}

impl Function {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn raw(&self) -> sys::CUfunction {
        self.raw
    }

    /// Launch on `stream`. Each element of `args` points at one argument
    /// value (see [`arg`]); the values are copied at launch.
    pub fn launch(
        &self,
        stream: &Stream,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &mut [*mut c_void],
    ) -> Result<()> {
        stream.ctx.bind()?;
        // SAFETY: the caller passes pointers to values of the kernel's parameter types, in order.
        unsafe { result::launch_kernel(self.raw, grid, block, 0, stream.raw, args) }
            .map_err(|e| BenchError::cuda(&format!("cuLaunchKernel({})", self.name), e))
    }

    fn attr(&self, a: sys::CUfunction_attribute) -> Result<i32> {
        // SAFETY: valid function handle.
        unsafe { result::function::get_function_attribute(self.raw, a) }
            .map_err(|e| BenchError::cuda("cuFuncGetAttribute", e))
    }

    /// Registers per thread, spill (local) bytes per thread, static shared memory bytes.
    pub fn resources(&self) -> Result<(i32, i32, i32)> {
        Ok((
            self.attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            self.attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            self.attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
        ))
    }

    /// Launch with `shared_bytes` of dynamic shared memory.
    pub fn launch_shared(
        &self,
        stream: &Stream,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_bytes: u32,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        stream.ctx.bind()?;
        // SAFETY: the caller passes pointers to values of the kernel's parameter types, in order.
        unsafe { result::launch_kernel(self.raw, grid, block, shared_bytes, stream.raw, args) }
            .map_err(|e| BenchError::cuda(&format!("cuLaunchKernel({})", self.name), e))
    }

    /// The most threads a block of this kernel may have (registers permitting).
    pub fn max_threads_per_block(&self) -> Result<i32> {
        self.attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
    }

    /// Allow up to `bytes` of dynamic shared memory (needed above 48 KiB).
    pub fn set_max_dynamic_shared(&self, bytes: u32) -> Result<()> {
        // SAFETY: valid function handle.
        check_raw("cuFuncSetAttribute", unsafe {
            sys::cuFuncSetAttribute(
                self.raw,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        })
    }

    /// Blocks of `block_threads` threads with `shared_bytes` of dynamic shared
    /// memory that fit on one SM at once.
    pub fn max_active_blocks_shared(&self, block_threads: u32, shared_bytes: u32) -> Result<i32> {
        // SAFETY: valid function handle.
        unsafe {
            result::occupancy::max_active_block_per_multiprocessor(
                self.raw,
                block_threads as i32,
                shared_bytes as usize,
            )
        }
        .map_err(|e| BenchError::cuda("cuOccupancyMaxActiveBlocksPerMultiprocessor", e))
    }

    /// Blocks of `block_threads` threads that fit on one SM at once.
    pub fn max_active_blocks(&self, block_threads: u32) -> Result<i32> {
        // SAFETY: valid function handle.
        unsafe {
            result::occupancy::max_active_block_per_multiprocessor(
                self.raw,
                block_threads as i32,
                0,
            )
        }
        .map_err(|e| BenchError::cuda("cuOccupancyMaxActiveBlocksPerMultiprocessor", e))
    }
}

/// A graph captured from a stream and instantiated.
pub struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    ctx: Ctx,
}

impl Graph {
    /// Capture everything `record` enqueues on `stream` into a graph.
    pub fn capture(
        stream: &Stream,
        record: &mut dyn FnMut(&Stream) -> Result<()>,
    ) -> Result<Graph> {
        stream.ctx.bind()?;
        // SAFETY: valid stream; capture is ended below on every path.
        check("cuStreamBeginCapture", unsafe {
            result::stream::begin_capture(
                stream.raw,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        })?;
        let recorded = record(stream);
        // SAFETY: ends the capture begun above.
        let graph = unsafe { result::stream::end_capture(stream.raw) };
        recorded?;
        let graph = graph.map_err(|e| BenchError::cuda("cuStreamEndCapture", e))?;
        // SAFETY: graph is a valid captured graph.
        let exec =
            match unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) } {
                Ok(exec) => exec,
                Err(e) => {
                    // SAFETY: destroy the graph we own.
                    let _ = unsafe { result::graph::destroy(graph) };
                    return Err(BenchError::cuda("cuGraphInstantiate", e));
                }
            };
        Ok(Graph {
            graph,
            exec,
            ctx: stream.ctx.clone(),
        })
    }

    pub fn launch(&self, stream: &Stream) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: valid executable graph and stream.
        check("cuGraphLaunch", unsafe {
            result::graph::launch(self.exec, stream.raw)
        })
    }

    pub fn upload(&self, stream: &Stream) -> Result<()> {
        // SAFETY: as above.
        check("cuGraphUpload", unsafe {
            result::graph::upload(self.exec, stream.raw)
        })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: owned handles destroyed once.
            unsafe {
                let _ = result::graph::exec_destroy(self.exec);
                let _ = result::graph::destroy(self.graph);
            }
        }
    }
}

/// CUDA driver API version as `major.minor` (e.g. `13.0`).
pub fn driver_version() -> Option<String> {
    if !crate::gpu::cuda_driver_present() {
        return None;
    }
    let mut v = 0i32;
    // SAFETY: writes one int.
    let r = unsafe { sys::cuDriverGetVersion(&mut v) };
    (r == sys::CUresult::CUDA_SUCCESS).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
}
