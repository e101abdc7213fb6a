//! One GPU opened for benchmarking: its context and stream, what it is, the
//! compiled kernels, an L2 flush buffer, and a tally of the device memory a
//! benchmark allocates.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute as Attr;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::BenchError;
use super::cuda::{Ctx, DevBuf, Function, Module, Stream, arg};
use super::kernels;
use super::nvrtc;

/// What the harness knows about the device (from CUDA device attributes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceInfo {
    /// CUDA device ordinal (as CUDA_VISIBLE_DEVICES exposes it).
    pub ordinal: usize,
    pub name: String,
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, the key NVML also uses.
    pub uuid: String,
    pub compute_capability: String,
    pub cc_major: u32,
    pub cc_minor: u32,
    pub sm_count: u32,
    pub l2_bytes: u64,
    pub total_memory_bytes: u64,
    pub memory_bus_width_bits: u32,
    /// Peak memory clock reported by CUDA (0 when the driver does not say).
    pub memory_clock_mhz: u32,
    pub max_threads_per_sm: u32,
    /// Copy engines that can run concurrently with kernels.
    pub async_engines: u32,
    /// The architecture kernels are compiled for (`sm_90`, ...).
    pub arch: String,
}

/// Format CUDA's 16-byte UUID the way NVML and nvidia-smi print it.
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let h: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

pub struct Gpu {
    pub ctx: Ctx,
    pub stream: Stream,
    pub info: DeviceInfo,
    pub nvrtc_version: (i32, i32),
    cache_root: PathBuf,
    modules: RefCell<HashMap<&'static str, Arc<Module>>>,
    functions: RefCell<HashMap<(String, String), Function>>,
    flush_buf: DevBuf,
    sink: DevBuf,
    allocated: Cell<usize>,
    /// Kernel files compiled in this session (file, arch, from cache?).
    pub builds: RefCell<Vec<(String, String, bool)>>,
}

impl Gpu {
    /// Open device `ordinal`: make its primary context current, create a
    /// stream, and allocate the L2 flush buffer (4x the L2 size, at least 64 MiB).
    pub fn open(ordinal: usize, cache_root: &Path) -> Result<Gpu, BenchError> {
        if !crate::gpu::cuda_driver_present() {
            return Err(BenchError::NoDriver);
        }
        let nvrtc_version = nvrtc::version()?;
        let ctx = Ctx::open(ordinal)?;
        let attr = |a| ctx.attribute(a).map(|v| v.max(0) as u32);
        let (cc_major, cc_minor) = (
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let uuid = ctx
            .inner
            .uuid()
            .map(|u| format_uuid(&u.bytes.map(|b| b as u8)))
            .map_err(|e| BenchError::cuda("cuDeviceGetUuid", e))?;
        let info = DeviceInfo {
            ordinal,
            name: ctx
                .inner
                .name()
                .map_err(|e| BenchError::cuda("cuDeviceGetName", e))?,
            uuid,
            compute_capability: format!("{cc_major}.{cc_minor}"),
            cc_major,
            cc_minor,
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
            total_memory_bytes: ctx
                .inner
                .total_mem()
                .map_err(|e| BenchError::cuda("cuDeviceTotalMem", e))?
                as u64,
            memory_bus_width_bits: attr(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
                .unwrap_or(0),
            memory_clock_mhz: attr(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).unwrap_or(0) / 1000,
            max_threads_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            async_engines: attr(Attr::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT).unwrap_or(0),
            arch: format!("sm_{cc_major}{cc_minor}"),
        };
        let stream = Stream::new(&ctx)?;
        let flush_bytes = ((info.l2_bytes as usize) * 4).max(64 << 20);
        let flush_buf = DevBuf::alloc(&ctx, flush_bytes)?;
        let sink = DevBuf::alloc(&ctx, 1 << 20)?;
        let gpu = Gpu {
            ctx,
            stream,
            info,
            nvrtc_version,
            cache_root: cache_root.to_path_buf(),
            modules: RefCell::new(HashMap::new()),
            functions: RefCell::new(HashMap::new()),
            flush_buf,
            sink,
            allocated: Cell::new(0),
            builds: RefCell::new(Vec::new()),
        };
        // Real data in the flush buffer (it is read, never written, afterwards).
        gpu.fill_uniform(&gpu.flush_buf, 1, 0.0, 1.0)?;
        gpu.sync()?;
        Ok(gpu)
    }

    pub fn nvrtc_version_string(&self) -> String {
        format!("{}.{}", self.nvrtc_version.0, self.nvrtc_version.1)
    }

    /// A kernel from an embedded file, compiling (or loading from the cache)
    /// the file on first use.
    pub fn function(&self, file: &str, name: &str) -> Result<Function, BenchError> {
        let key = (file.to_string(), name.to_string());
        if let Some(f) = self.functions.borrow().get(&key) {
            return Ok(f.clone());
        }
        let kf = kernels::file(file)
            .ok_or_else(|| BenchError::Other(format!("no kernel file {file}")))?;
        let module = self.module(kf)?;
        let f = module.function(name)?;
        self.functions.borrow_mut().insert(key, f.clone());
        Ok(f)
    }

    fn module(&self, kf: &'static kernels::KernelFile) -> Result<Arc<Module>, BenchError> {
        if let Some(m) = self.modules.borrow().get(kf.name) {
            return Ok(Arc::clone(m));
        }
        let arch =
            kernels::arch_for(kf, self.info.cc_major, self.info.cc_minor).ok_or_else(|| {
                BenchError::Unsupported(format!(
                    "kernels/{}.cu needs sm_90a (compute capability 9.0); this GPU is {}",
                    kf.name, self.info.compute_capability
                ))
            })?;
        let built = nvrtc::compile_cached(kf, &arch, &self.cache_root)?;
        self.builds
            .borrow_mut()
            .push((kf.name.to_string(), arch.clone(), built.from_cache));
        let module = match Module::load(&self.ctx, &built.cubin) {
            Ok(m) => m,
            // A CUBIN the driver refuses (unexpected) still has the PTX route.
            Err(cubin_err) => {
                Module::load(&self.ctx, &nvrtc::ptx_image(&built.ptx)).map_err(|ptx_err| {
                    BenchError::Other(format!(
                        "loading kernels/{}.cu failed: {cubin_err}; as PTX: {ptx_err}",
                        kf.name
                    ))
                })?
            }
        };
        let module = Arc::new(module);
        self.modules
            .borrow_mut()
            .insert(kf.name, Arc::clone(&module));
        Ok(module)
    }

    /// Allocate device memory, counted in the tally.
    pub fn alloc(&self, bytes: usize) -> Result<DevBuf, BenchError> {
        let buf = DevBuf::alloc(&self.ctx, bytes)?;
        self.allocated.set(self.allocated.get() + bytes);
        Ok(buf)
    }

    /// Start a new tally (each benchmark reports what it allocated).
    pub fn reset_tally(&self) {
        self.allocated.set(0);
    }

    /// Device memory allocated since the last reset (benchmarks hold all of
    /// their buffers until they finish, so this is also their peak).
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated.get() as u64
    }

    /// A grid that fills the GPU with `block`-thread blocks for a grid-stride
    /// kernel: as many blocks as fit at once, but no more than the work needs.
    pub fn grid_for(&self, f: &Function, block: u32, work_items: u64) -> Result<u32, BenchError> {
        let per_sm = f.max_active_blocks(block)?.max(1) as u64;
        let full = per_sm * self.info.sm_count as u64;
        let needed = work_items.div_ceil(block as u64).max(1);
        Ok(full.min(needed).min(u32::MAX as u64) as u32)
    }

    /// Launch a grid-stride kernel over `work_items` items.
    pub fn launch_grid_stride(
        &self,
        f: &Function,
        work_items: u64,
        args: &mut [*mut std::ffi::c_void],
    ) -> Result<(), BenchError> {
        let grid = self.grid_for(f, 256, work_items)?;
        f.launch(&self.stream, (grid, 1, 1), (256, 1, 1), args)
    }

    /// Launch a kernel over `work_items` items with a grid that covers them
    /// all at `per_thread` items per thread (no grid-stride reuse of threads).
    /// Streaming copies need this shape: measured on an H100 (1 GiB), a float4
    /// copy reached 3,008 GB/s with one item per thread against 2,804 GB/s
    /// from a persistent grid of SMs x occupancy blocks, whose last wave and
    /// fixed DRAM access order leave bandwidth unused.
    pub fn launch_covering(
        &self,
        f: &Function,
        work_items: u64,
        per_thread: u64,
        args: &mut [*mut std::ffi::c_void],
    ) -> Result<(), BenchError> {
        let block = 256u64;
        let grid = work_items
            .div_ceil(block * per_thread.max(1))
            .clamp(1, i32::MAX as u64) as u32;
        f.launch(&self.stream, (grid, 1, 1), (block as u32, 1, 1), args)
    }

    /// Fill a buffer's f32 elements with uniform random values in [lo, hi).
    pub fn fill_uniform(
        &self,
        buf: &DevBuf,
        seed: u32,
        lo: f32,
        hi: f32,
    ) -> Result<(), BenchError> {
        let f = self.function("util", "fill_uniform_f32")?;
        let (ptr, n) = (buf.ptr(), buf.len::<f32>() as u64);
        self.launch_grid_stride(
            &f,
            n,
            &mut [arg(&ptr), arg(&n), arg(&seed), arg(&lo), arg(&hi)],
        )
    }

    /// Fill every byte with 0xFF: NaN for f32, bf16 and f16 (and E4M3), so an
    /// element a kernel failed to write cannot pass a check.
    pub fn poison(&self, buf: &DevBuf) -> Result<(), BenchError> {
        buf.memset_async(0xFF, &self.stream)
    }

    /// Evict the previous repetition's data from L2 by reading a buffer 4x
    /// its size (clean lines only, so nothing is written back later).
    pub fn flush_l2(&self) -> Result<(), BenchError> {
        let f = self.function("util", "l2_flush_read")?;
        let (ptr, n4, sink) = (
            self.flush_buf.ptr(),
            (self.flush_buf.bytes() / 16) as u64,
            self.sink.ptr(),
        );
        self.launch_grid_stride(&f, n4, &mut [arg(&ptr), arg(&n4), arg(&sink)])
    }

    pub fn sync(&self) -> Result<(), BenchError> {
        self.stream.synchronize()
    }

    /// A scratch buffer of at least 1 MiB the harness owns (kernel sinks).
    pub fn sink(&self) -> &DevBuf {
        &self.sink
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_formatting_matches_nvidia_smi() {
        let b: [u8; 16] = [
            0x3f, 0x2a, 0x11, 0x00, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ];
        assert_eq!(format_uuid(&b), "GPU-3f2a1100-dead-beef-0123-456789abcdef");
    }
}
