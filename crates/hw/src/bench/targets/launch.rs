//! Host-side lessons: launch overhead (launches, CUDA graphs, a persistent
//! kernel), overlapping copies with compute on streams, and pinned memory.

use serde_json::json;

use super::compute::fma_chain;
use super::{LAUNCH_OVERHEAD, PINNED_MEMORY, STREAM_ORDERED_ALLOCATION, STREAM_OVERLAP};
use crate::bench::BenchError;
use crate::bench::cuda::{DevBuf, Event, Graph, HostBuf, Stream, arg};
use crate::bench::device::Gpu;
use crate::bench::lesson::{Lesson, RunEnv, TargetSpec, Work};
use crate::bench::rng;
use crate::bench::timing::Plan;
use crate::bench::verify::{self, Check};

fn need<T>(b: &Option<T>) -> Result<&T, BenchError> {
    b.as_ref()
        .ok_or_else(|| BenchError::Other("benchmark used before setup".into()))
}

/// Fill a host slice with the same values `fill_uniform_f32` draws, on all cores.
pub fn fill_host_uniform(out: &mut [f32], seed: u32, lo: f32, hi: f32) {
    let parts = std::thread::available_parallelism()
        .map(|p| p.get())
        .unwrap_or(1)
        .min(32);
    let chunk = out.len().div_ceil(parts).max(1);
    std::thread::scope(|s| {
        for (p, slice) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let base = (p * chunk) as u64;
                for (j, v) in slice.iter_mut().enumerate() {
                    *v = rng::uniform(seed, base + j as u64, lo, hi);
                }
            });
        }
    });
}

/// Compare every `stride`-th element (and check all for NaN poison).
fn check_sampled(
    what: &str,
    got: &[f32],
    stride: usize,
    want: impl Fn(usize) -> f32 + Sync,
) -> Check {
    let unwritten = got.iter().filter(|v| v.is_nan()).count() as u64;
    let sampled: Vec<f32> = got.iter().step_by(stride).copied().collect();
    let mut c = verify::check_all(what, &sampled, |k| want(k * stride), verify::same_bits);
    if unwritten > 0 {
        c.passed = false;
        c.mismatches += unwritten;
        c.detail = format!(
            "{what}: {unwritten} of {} elements were never written; {}",
            got.len(),
            c.detail
        );
    } else {
        c.detail = format!(
            "{} (every {stride}th element compared; all {} written)",
            c.detail,
            got.len()
        );
    }
    c
}

// ---------------------------------------------------------------- launch overhead

const STEP_N: u32 = 4096;
const STEP_A: f32 = 0.999;
const STEP_B: f32 = 0.001;

#[derive(Default)]
pub struct LaunchOverhead {
    steps: u32,
    seed: u32,
    y: Option<DevBuf>,
    graph: Option<Graph>,
}

impl LaunchOverhead {
    fn enqueue_steps(gpu: &Gpu, stream: &Stream, y: u64, steps: u32) -> Result<(), BenchError> {
        let f = gpu.function("launch", "tiny_step")?;
        let (n, a, b) = (STEP_N, STEP_A, STEP_B);
        for _ in 0..steps {
            f.launch(
                stream,
                (STEP_N / 256, 1, 1),
                (256, 1, 1),
                &mut [arg(&y), arg(&n), arg(&a), arg(&b)],
            )?;
        }
        Ok(())
    }
}

impl Lesson for LaunchOverhead {
    fn spec(&self) -> &'static TargetSpec {
        &LAUNCH_OVERHEAD
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        self.steps = env.size.pick(250, 1000, 4000);
        self.seed = env.seed;
        self.y = Some(gpu.alloc(STEP_N as usize * 4)?);
        self.graph = None;
        Ok(format!(
            "{} steps of y = 0.999*y + 0.001 over {STEP_N} f32 (16 blocks of 256)",
            self.steps
        ))
    }

    fn work(&self, _v: usize) -> Work {
        Work {
            bytes: 8.0 * STEP_N as f64,
            flops: 2.0 * STEP_N as f64,
        }
    }

    fn plan(&self, _v: usize, base: Plan) -> Plan {
        // Samples are per step; the data is 16 KB, so no L2 flush.
        Plan {
            per_rep: self.steps,
            flush_l2: false,
            ..base
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.fill_uniform(need(&self.y)?, self.seed, -1.0, 1.0)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let y = need(&self.y)?.ptr();
        match v {
            0 => Self::enqueue_steps(gpu, &gpu.stream, y, self.steps),
            1 => {
                if self.graph.is_none() {
                    // Load the module before capturing: nothing but launches
                    // should happen while the stream records.
                    gpu.function("launch", "tiny_step")?;
                    let steps = self.steps;
                    let g = Graph::capture(&gpu.stream, &mut |s| {
                        Self::enqueue_steps(gpu, s, y, steps)
                    })?;
                    g.upload(&gpu.stream)?;
                    self.graph = Some(g);
                }
                need(&self.graph)?.launch(&gpu.stream)
            }
            _ => {
                let f = gpu.function("launch", "persistent_steps")?;
                let (n, a, b, s) = (STEP_N, STEP_A, STEP_B, self.steps);
                f.launch(
                    &gpu.stream,
                    (STEP_N / 256, 1, 1),
                    (256, 1, 1),
                    &mut [arg(&y), arg(&n), arg(&a), arg(&b), arg(&s)],
                )
            }
        }
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let got: Vec<f32> = need(&self.y)?.download(&gpu.stream)?;
        let (seed, steps) = (self.seed, self.steps);
        Ok(verify::check_all(
            self.spec().variants[v].name,
            &got,
            |i| {
                fma_chain(
                    rng::uniform(seed, i as u64, -1.0, 1.0),
                    STEP_A,
                    STEP_B,
                    steps,
                )
            },
            verify::same_bits,
        ))
    }

    fn details(&self, _gpu: &Gpu, v: usize) -> serde_json::Value {
        json!({ "steps_per_repetition": self.steps, "launches_per_repetition": if v == 2 { 1 } else { self.steps }, "graph": v == 1 })
    }
}

// ---------------------------------------------------------------- streams

const CHUNKS: u64 = 16;
const SIDE_STREAMS: usize = 3;

#[derive(Default)]
pub struct StreamOverlap {
    n: u64,
    seed: u32,
    iters: u32,
    host_in: Option<HostBuf>,
    host_out: Option<HostBuf>,
    dev_in: Option<DevBuf>,
    dev_out: Option<DevBuf>,
    streams: Vec<Stream>,
    start: Option<Event>,
    done: Vec<Event>,
    calibration: serde_json::Value,
}

impl StreamOverlap {
    fn chunk(&self) -> u64 {
        self.n / CHUNKS
    }

    /// Copy in, compute, copy out chunk `c` on `stream`.
    fn enqueue_chunk(&self, gpu: &Gpu, stream: &Stream, c: u64) -> Result<(), BenchError> {
        let len = self.chunk();
        let bytes = (len * 4) as usize;
        let off = (c * len * 4) as usize;
        let (hin, hout) = (need(&self.host_in)?, need(&self.host_out)?);
        let (din, dout) = (need(&self.dev_in)?, need(&self.dev_out)?);
        // SAFETY: the host ranges lie inside pinned buffers that outlive the stream's work
        // (every run ends with a synchronisation before buffers can be dropped).
        unsafe {
            stream.copy_htod(
                din.at(off),
                (hin.ptr() as *const u8).add(off) as *const _,
                bytes,
            )?;
        }
        let f = gpu.function("launch", "chunk_compute")?;
        let (i, o, n, it) = (din.at(off), dout.at(off), len, self.iters);
        let grid = gpu.grid_for(&f, 256, len)?;
        f.launch(
            stream,
            (grid, 1, 1),
            (256, 1, 1),
            &mut [arg(&i), arg(&o), arg(&n), arg(&it)],
        )?;
        // SAFETY: as above.
        unsafe {
            stream.copy_dtoh(
                (hout.ptr() as *mut u8).add(off) as *mut _,
                dout.at(off),
                bytes,
            )
        }
    }

    /// Pick the kernel's iteration count so that computing a chunk takes
    /// about as long as copying it in (the case where overlap pays most).
    fn calibrate(&mut self, gpu: &Gpu) -> Result<(), BenchError> {
        let (e0, e1) = (Event::new(&gpu.ctx)?, Event::new(&gpu.ctx)?);
        let len = self.chunk();
        let bytes = (len * 4) as usize;
        let (hin, din, dout) = (
            need(&self.host_in)?,
            need(&self.dev_in)?,
            need(&self.dev_out)?,
        );
        let f = gpu.function("launch", "chunk_compute")?;
        let grid = gpu.grid_for(&f, 256, len)?;
        let probe_iters = 64u32;
        let mut copy_ms = f64::INFINITY;
        let mut kernel_ms = f64::INFINITY;
        for _ in 0..3 {
            e0.record(&gpu.stream)?;
            // SAFETY: pinned source of `bytes` bytes; synchronised by elapsed_ms.
            unsafe {
                gpu.stream
                    .copy_htod(din.ptr(), hin.ptr() as *const _, bytes)?
            };
            e1.record(&gpu.stream)?;
            copy_ms = copy_ms.min(e0.elapsed_ms(&e1)?);
            let (i, o, n, it) = (din.ptr(), dout.ptr(), len, probe_iters);
            e0.record(&gpu.stream)?;
            f.launch(
                &gpu.stream,
                (grid, 1, 1),
                (256, 1, 1),
                &mut [arg(&i), arg(&o), arg(&n), arg(&it)],
            )?;
            e1.record(&gpu.stream)?;
            kernel_ms = kernel_ms.min(e0.elapsed_ms(&e1)?);
        }
        let scaled = (probe_iters as f64 * copy_ms / kernel_ms.max(1e-6)).round();
        self.iters = scaled.clamp(1.0, 256.0) as u32;
        self.calibration = json!({
            "chunk_h2d_ms": copy_ms,
            "kernel_ms_at_64_iters": kernel_ms,
            "iters_chosen": self.iters,
            "chunks": CHUNKS,
            "streams": SIDE_STREAMS,
        });
        Ok(())
    }
}

impl Lesson for StreamOverlap {
    fn spec(&self) -> &'static TargetSpec {
        &STREAM_OVERLAP
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        self.n = env.size.pick(16 << 20, 64 << 20, 128 << 20);
        self.seed = env.seed;
        let bytes = self.n as usize * 4;
        let mut hin = HostBuf::alloc(&gpu.ctx, bytes)?;
        fill_host_uniform(hin.as_mut_slice::<f32>(), self.seed, -1.0, 1.0);
        self.host_in = Some(hin);
        self.host_out = Some(HostBuf::alloc(&gpu.ctx, bytes)?);
        self.dev_in = Some(gpu.alloc(bytes)?);
        self.dev_out = Some(gpu.alloc(bytes)?);
        self.streams = (0..SIDE_STREAMS)
            .map(|_| Stream::new(&gpu.ctx))
            .collect::<Result<_, _>>()?;
        self.start = Some(Event::new(&gpu.ctx)?);
        self.done = (0..SIDE_STREAMS)
            .map(|_| Event::new(&gpu.ctx))
            .collect::<Result<_, _>>()?;
        self.calibrate(gpu)?;
        Ok(format!(
            "{} f32 ({:.0} MB) in {CHUNKS} chunks, pinned host buffers, {} FMAs per element (calibrated)",
            self.n,
            bytes as f64 / 1e6,
            self.iters
        ))
    }

    fn work(&self, _v: usize) -> Work {
        Work {
            bytes: 8.0 * self.n as f64,
            flops: 2.0 * self.iters as f64 * self.n as f64,
        }
    }

    fn plan(&self, _v: usize, base: Plan) -> Plan {
        Plan {
            flush_l2: false,
            ..base
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.poison(need(&self.dev_out)?)?;
        gpu.sync()?;
        if let Some(h) = self.host_out.as_mut() {
            h.as_mut_slice::<u8>().fill(0xFF);
        }
        Ok(())
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        if v == 0 {
            for c in 0..CHUNKS {
                self.enqueue_chunk(gpu, &gpu.stream, c)?;
            }
            return Ok(());
        }
        // Fork: side streams start after the main stream's start point, and
        // the main stream ends after all of them (so its events bracket all work).
        let start = need(&self.start)?;
        start.record(&gpu.stream)?;
        for s in &self.streams {
            s.wait(start)?;
        }
        for c in 0..CHUNKS {
            let s = &self.streams[c as usize % SIDE_STREAMS];
            self.enqueue_chunk(gpu, s, c)?;
        }
        for (s, e) in self.streams.iter().zip(&self.done) {
            e.record(s)?;
            gpu.stream.wait(e)?;
        }
        Ok(())
    }

    fn check(&mut self, _gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let got = need(&self.host_out)?.as_slice::<f32>();
        let (seed, iters) = (self.seed, self.iters);
        let stride = (got.len() / (4 << 20)).max(1);
        Ok(check_sampled(
            self.spec().variants[v].name,
            got,
            stride,
            |i| {
                fma_chain(
                    rng::uniform(seed, i as u64, -1.0, 1.0),
                    0.9990,
                    0.0010,
                    iters,
                )
            },
        ))
    }

    fn details(&self, gpu: &Gpu, _v: usize) -> serde_json::Value {
        let mut d = self.calibration.clone();
        d["copy_engines"] = json!(gpu.info.async_engines);
        d
    }
}

// ---------------------------------------------------------------- pinned

#[derive(Default)]
pub struct Pinned {
    n: u64,
    seed: u32,
    pageable: Vec<f32>,
    pinned: Option<HostBuf>,
    dev: Option<DevBuf>,
}

impl Lesson for Pinned {
    fn spec(&self) -> &'static TargetSpec {
        &PINNED_MEMORY
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        self.n = env.size.pick(16 << 20, 64 << 20, 256 << 20);
        self.seed = env.seed;
        let bytes = self.n as usize * 4;
        self.pageable = vec![0.0f32; self.n as usize];
        fill_host_uniform(&mut self.pageable, self.seed, -1.0, 1.0);
        let mut pinned = HostBuf::alloc(&gpu.ctx, bytes)?;
        pinned.as_mut_slice::<f32>().copy_from_slice(&self.pageable);
        self.pinned = Some(pinned);
        self.dev = Some(gpu.alloc(bytes)?);
        Ok(format!("{:.0} MB host-to-device", bytes as f64 / 1e6))
    }

    fn work(&self, _v: usize) -> Work {
        Work {
            bytes: 4.0 * self.n as f64,
            flops: 0.0,
        }
    }

    fn plan(&self, _v: usize, base: Plan) -> Plan {
        Plan {
            flush_l2: false,
            ..base
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.poison(need(&self.dev)?)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let dev = need(&self.dev)?;
        let bytes = self.n as usize * 4;
        let src = if v == 0 {
            self.pageable.as_ptr() as *const std::ffi::c_void
        } else {
            need(&self.pinned)?.ptr() as *const std::ffi::c_void
        };
        // SAFETY: both sources hold `bytes` bytes and live until the benchmark ends;
        // every repetition is synchronised before the next.
        unsafe { gpu.stream.copy_htod(dev.ptr(), src, bytes) }
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let got: Vec<f32> = need(&self.dev)?.download(&gpu.stream)?;
        let seed = self.seed;
        Ok(verify::check_all(
            self.spec().variants[v].name,
            &got,
            |i| rng::uniform(seed, i as u64, -1.0, 1.0),
            verify::same_bits,
        ))
    }
}

// ---------------------------------------------------------------- stream-ordered allocation

const ALLOC_STEPS: u32 = 20;

#[derive(Default)]
pub struct StreamOrdered {
    n: u64,
    seed: u32,
    input: Option<DevBuf>,
    output: Option<DevBuf>,
}

impl StreamOrdered {
    /// input -> scratch -> output with the copy kernel.
    fn copy_through(&self, gpu: &Gpu, scratch: u64) -> Result<(), BenchError> {
        let f = gpu.function("memory", "copy_f32")?;
        let (i, o, n) = (need(&self.input)?.ptr(), need(&self.output)?.ptr(), self.n);
        gpu.launch_grid_stride(&f, n, &mut [arg(&i), arg(&scratch), arg(&n)])?;
        gpu.launch_grid_stride(&f, n, &mut [arg(&scratch), arg(&o), arg(&n)])
    }
}

impl Lesson for StreamOrdered {
    fn spec(&self) -> &'static TargetSpec {
        &STREAM_ORDERED_ALLOCATION
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        use cudarc::driver::{result, sys};
        self.n = env.size.pick(1 << 20, 4 << 20, 16 << 20);
        self.seed = env.seed;
        let bytes = self.n as usize * 4;
        let input = gpu.alloc(bytes)?;
        gpu.fill_uniform(&input, self.seed, -1.0, 1.0)?;
        self.input = Some(input);
        self.output = Some(gpu.alloc(bytes)?);
        let pools = gpu
            .ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)?;
        if pools == 0 {
            return Err(BenchError::Unsupported(
                "this GPU or driver has no stream-ordered memory pools".into(),
            ));
        }
        // Keep freed pool memory mapped between synchronisations, as caching
        // allocators (PyTorch's among them) do.
        gpu.ctx.bind()?;
        let mut threshold = u64::MAX;
        // SAFETY: the device's default pool; the value is a u64 as the attribute requires.
        unsafe {
            let pool = result::device::get_default_mem_pool(gpu.ctx.device())
                .map_err(|e| BenchError::cuda("cuDeviceGetDefaultMemPool", e))?;
            result::mem_pool::set_attribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                &mut threshold as *mut u64 as *mut std::ffi::c_void,
            )
            .map_err(|e| BenchError::cuda("cuMemPoolSetAttribute", e))?;
        }
        gpu.sync()?;
        Ok(format!(
            "{ALLOC_STEPS} steps, each through a fresh {:.0} MB scratch buffer",
            bytes as f64 / 1e6
        ))
    }

    fn work(&self, _v: usize) -> Work {
        Work {
            bytes: 16.0 * self.n as f64,
            flops: 0.0,
        }
    }

    fn plan(&self, _v: usize, base: Plan) -> Plan {
        Plan {
            per_rep: ALLOC_STEPS,
            ..base
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.poison(need(&self.output)?)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        use cudarc::driver::result;
        let bytes = self.n as usize * 4;
        for _ in 0..ALLOC_STEPS {
            if v == 0 {
                // cuMemAlloc, then cuMemFree when `scratch` drops (which waits for the GPU).
                let scratch = DevBuf::alloc(&gpu.ctx, bytes)?;
                self.copy_through(gpu, scratch.ptr())?;
            } else {
                // SAFETY: stream-ordered allocation on the harness stream, freed on the same
                // stream after the kernels that use it.
                unsafe {
                    let p = result::malloc_async(gpu.stream.raw(), bytes)
                        .map_err(|e| BenchError::cuda("cuMemAllocAsync", e))?;
                    let used = self.copy_through(gpu, p);
                    result::free_async(p, gpu.stream.raw())
                        .map_err(|e| BenchError::cuda("cuMemFreeAsync", e))?;
                    used?;
                }
            }
        }
        Ok(())
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let got: Vec<f32> = need(&self.output)?.download(&gpu.stream)?;
        let seed = self.seed;
        Ok(verify::check_all(
            self.spec().variants[v].name,
            &got,
            |i| rng::uniform(seed, i as u64, -1.0, 1.0),
            verify::same_bits,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_fill_matches_the_device_formula() {
        let mut v = vec![0.0f32; 1000];
        fill_host_uniform(&mut v, 42, -1.0, 1.0);
        for (i, x) in v.iter().enumerate() {
            assert_eq!(*x, rng::uniform(42, i as u64, -1.0, 1.0));
        }
    }

    #[test]
    fn sampled_check_catches_unwritten_elements() {
        let good: Vec<f32> = (0..100).map(|i| i as f32).collect();
        assert!(check_sampled("x", &good, 7, |i| i as f32).passed);
        let mut bad = good.clone();
        bad[3] = f32::NAN; // not on the sample grid, still caught
        let c = check_sampled("x", &bad, 7, |i| i as f32);
        assert!(!c.passed && c.detail.contains("never written"));
    }
}
