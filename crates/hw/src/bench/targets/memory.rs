//! Memory lessons: coalescing, vectorized loads, the shared-memory transpose,
//! occupancy versus registers, and kernel fusion.

use serde_json::json;

use super::{KERNEL_FUSION, MEMORY_COALESCING, OCCUPANCY, TRANSPOSE, VECTORIZED_LOADS};
use crate::bench::cuda::{DevBuf, arg};
use crate::bench::device::Gpu;
use crate::bench::lesson::{Lesson, RunEnv, TargetSpec, Work};
use crate::bench::rng;
use crate::bench::verify::{self, Check};
use crate::bench::{BenchError, SizeClass};

/// Number of f32 elements of each copy buffer: 64 MiB, 256 MiB, 1 GiB.
pub fn copy_elements(size: SizeClass) -> u64 {
    size.pick(16 << 20, 64 << 20, 256 << 20)
}

/// The copy kernels, scalar first: (kernel, elements per thread access).
pub const COPY_KERNELS: &[(&str, u64)] = &[
    ("copy_f32", 1),
    ("copy_f32x4", 4),
    ("copy_f32x4_unroll4", 4),
    ("copy_f32x4_stream", 4),
];

/// An input filled with uniform [-1, 1) values and an output of the same size.
pub struct CopyBufs {
    pub n: u64,
    pub seed: u32,
    pub input: DevBuf,
    pub output: DevBuf,
}

impl CopyBufs {
    pub fn new(gpu: &Gpu, n: u64, seed: u32) -> Result<CopyBufs, BenchError> {
        let input = gpu.alloc(n as usize * 4)?;
        let output = gpu.alloc(n as usize * 4)?;
        gpu.fill_uniform(&input, seed, -1.0, 1.0)?;
        gpu.sync()?;
        Ok(CopyBufs {
            n,
            seed,
            input,
            output,
        })
    }

    /// Launch copy kernel `name` from `input` to `output` with a grid that
    /// covers the buffer: one access per thread, or four for the unrolled
    /// kernels (their loop issues four independent loads per iteration).
    pub fn launch(&self, gpu: &Gpu, name: &str, per_access: u64) -> Result<(), BenchError> {
        let f = gpu.function("memory", name)?;
        let (i, o, n) = (self.input.ptr(), self.output.ptr(), self.n / per_access);
        let per_thread = if name.ends_with("_unroll4") || name.ends_with("_stream") {
            4
        } else {
            1
        };
        gpu.launch_covering(&f, n, per_thread, &mut [arg(&i), arg(&o), arg(&n)])
    }

    /// Every output element equals its input (regenerated on the CPU).
    pub fn check_copy(&self, gpu: &Gpu, what: &str) -> Result<Check, BenchError> {
        let got: Vec<f32> = self.output.download(&gpu.stream)?;
        let seed = self.seed;
        Ok(verify::check_all(
            what,
            &got,
            |i| rng::uniform(seed, i as u64, -1.0, 1.0),
            verify::same_bits,
        ))
    }

    pub fn size_words(&self) -> String {
        format!(
            "{} f32 ({:.2} GB read + {:.2} GB written)",
            self.n,
            self.n as f64 * 4.0 / 1e9,
            self.n as f64 * 4.0 / 1e9
        )
    }
}

// ---------------------------------------------------------------- coalescing

#[derive(Default)]
pub struct Coalescing {
    bufs: Option<CopyBufs>,
}

impl Lesson for Coalescing {
    fn spec(&self) -> &'static TargetSpec {
        &MEMORY_COALESCING
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        let b = CopyBufs::new(gpu, copy_elements(env.size), env.seed)?;
        let words = format!("{}; stride 32 for the strided copy", b.size_words());
        self.bufs = Some(b);
        Ok(words)
    }

    fn work(&self, _v: usize) -> Work {
        let n = self.bufs.as_ref().map_or(0, |b| b.n) as f64;
        Work {
            bytes: 8.0 * n,
            flops: 0.0,
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.poison(&bufs(&self.bufs)?.output)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let b = bufs(&self.bufs)?;
        if v == 0 {
            let f = gpu.function("memory", "copy_f32_strided")?;
            let (i, o, n, stride) = (b.input.ptr(), b.output.ptr(), b.n, 32u32);
            gpu.launch_grid_stride(&f, n, &mut [arg(&i), arg(&o), arg(&n), arg(&stride)])
        } else {
            let f = gpu.function("memory", "copy_f32")?;
            let (i, o, n) = (b.input.ptr(), b.output.ptr(), b.n);
            gpu.launch_grid_stride(&f, n, &mut [arg(&i), arg(&o), arg(&n)])
        }
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        bufs(&self.bufs)?.check_copy(gpu, self.spec().variants[v].name)
    }
}

fn bufs(b: &Option<CopyBufs>) -> Result<&CopyBufs, BenchError> {
    b.as_ref()
        .ok_or_else(|| BenchError::Other("benchmark used before setup".into()))
}

// ---------------------------------------------------------------- vectorized

#[derive(Default)]
pub struct Vectorized {
    bufs: Option<CopyBufs>,
}

impl Lesson for Vectorized {
    fn spec(&self) -> &'static TargetSpec {
        &VECTORIZED_LOADS
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        let b = CopyBufs::new(gpu, copy_elements(env.size), env.seed)?;
        let words = b.size_words();
        self.bufs = Some(b);
        Ok(words)
    }

    fn work(&self, _v: usize) -> Work {
        let n = self.bufs.as_ref().map_or(0, |b| b.n) as f64;
        Work {
            bytes: 8.0 * n,
            flops: 0.0,
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.poison(&bufs(&self.bufs)?.output)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let (name, per) = COPY_KERNELS[v.min(COPY_KERNELS.len() - 1)];
        bufs(&self.bufs)?.launch(gpu, name, per)
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        bufs(&self.bufs)?.check_copy(gpu, self.spec().variants[v].name)
    }
}

// ---------------------------------------------------------------- transpose

#[derive(Default)]
pub struct Transpose {
    dim: u32,
    seed: u32,
    input: Option<DevBuf>,
    output: Option<DevBuf>,
}

const TRANSPOSE_KERNELS: [&str; 3] = [
    "transpose_naive",
    "transpose_tiled",
    "transpose_tiled_padded",
];

impl Lesson for Transpose {
    fn spec(&self) -> &'static TargetSpec {
        &TRANSPOSE
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        self.dim = env.size.pick(4096, 8192, 16384);
        self.seed = env.seed;
        let bytes = self.dim as usize * self.dim as usize * 4;
        let input = gpu.alloc(bytes)?;
        gpu.fill_uniform(&input, self.seed, -1.0, 1.0)?;
        self.output = Some(gpu.alloc(bytes)?);
        self.input = Some(input);
        gpu.sync()?;
        Ok(format!(
            "{0} x {0} f32 matrix ({1:.2} GB read + written)",
            self.dim,
            2.0 * bytes as f64 / 1e9
        ))
    }

    fn work(&self, _v: usize) -> Work {
        Work {
            bytes: 8.0 * self.dim as f64 * self.dim as f64,
            flops: 0.0,
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.poison(need(&self.output)?)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let f = gpu.function("transpose", TRANSPOSE_KERNELS[v.min(2)])?;
        let (i, o, d) = (
            need(&self.input)?.ptr(),
            need(&self.output)?.ptr(),
            self.dim,
        );
        f.launch(
            &gpu.stream,
            (d / 32, d / 32, 1),
            (32, 8, 1),
            &mut [arg(&i), arg(&o), arg(&d), arg(&d)],
        )
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let got: Vec<f32> = need(&self.output)?.download(&gpu.stream)?;
        let (d, seed) = (self.dim as u64, self.seed);
        // out[c][r] = in[r][c]: output index i = c * rows + r.
        Ok(verify::check_all(
            self.spec().variants[v].name,
            &got,
            |i| {
                let (c, r) = (i as u64 / d, i as u64 % d);
                rng::uniform(seed, r * d + c, -1.0, 1.0)
            },
            verify::same_bits,
        ))
    }
}

fn need(b: &Option<DevBuf>) -> Result<&DevBuf, BenchError> {
    b.as_ref()
        .ok_or_else(|| BenchError::Other("benchmark used before setup".into()))
}

// ---------------------------------------------------------------- occupancy

#[derive(Default)]
pub struct Occupancy {
    bufs: Option<CopyBufs>,
}

const OCC_KERNELS: [&str; 2] = ["occupancy_default", "occupancy_bounded"];

/// The polynomial of kernels/occupancy.cu, rounded the same way.
pub fn occ_poly(v: f32) -> f32 {
    let mut p = 0.03125f32;
    for c in [-0.0625f32, 0.125, -0.25, 0.5, 1.0] {
        p = p.mul_add(v, c);
    }
    p
}

impl Lesson for Occupancy {
    fn spec(&self) -> &'static TargetSpec {
        &OCCUPANCY
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        let b = CopyBufs::new(gpu, copy_elements(env.size), env.seed)?;
        let words = format!("{}; 256-thread blocks", b.size_words());
        self.bufs = Some(b);
        Ok(words)
    }

    fn work(&self, _v: usize) -> Work {
        let n = self.bufs.as_ref().map_or(0, |b| b.n) as f64;
        Work {
            bytes: 8.0 * n,
            flops: 10.0 * n,
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.poison(&bufs(&self.bufs)?.output)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let b = bufs(&self.bufs)?;
        let f = gpu.function("occupancy", OCC_KERNELS[v.min(1)])?;
        let (i, o, n4) = (b.input.ptr(), b.output.ptr(), b.n / 4);
        gpu.launch_grid_stride(&f, n4, &mut [arg(&i), arg(&o), arg(&n4)])
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let b = bufs(&self.bufs)?;
        let got: Vec<f32> = b.output.download(&gpu.stream)?;
        let seed = b.seed;
        Ok(verify::check_all(
            self.spec().variants[v].name,
            &got,
            |i| occ_poly(rng::uniform(seed, i as u64, -1.0, 1.0)),
            verify::same_bits,
        ))
    }

    fn details(&self, gpu: &Gpu, v: usize) -> serde_json::Value {
        kernel_resources(gpu, "occupancy", OCC_KERNELS[v.min(1)], 256)
    }
}

/// Registers, spills, shared memory and theoretical occupancy of a kernel.
pub fn kernel_resources(gpu: &Gpu, file: &str, name: &str, block: u32) -> serde_json::Value {
    let Ok(f) = gpu.function(file, name) else {
        return serde_json::Value::Null;
    };
    match (f.resources(), f.max_active_blocks(block)) {
        (Ok((regs, local, smem)), Ok(blocks)) => {
            let threads = blocks.max(0) as u32 * block;
            json!({
                "kernel": name,
                "registers_per_thread": regs,
                "spill_bytes_per_thread": local,
                "static_shared_bytes": smem,
                "blocks_per_sm": blocks,
                "theoretical_occupancy_pct": 100.0 * threads as f64 / gpu.info.max_threads_per_sm.max(1) as f64,
            })
        }
        _ => serde_json::Value::Null,
    }
}

// ---------------------------------------------------------------- fusion

#[derive(Default)]
pub struct Fusion {
    n: u64,
    seed: u32,
    x: Option<DevBuf>,
    y: Option<DevBuf>,
    z: Option<DevBuf>,
    w: Option<DevBuf>,
}

const FUSE_A: f32 = 1.5;
const FUSE_B: f32 = -0.25;

/// w = (a*x + b)^2 + x with the kernels' roundings.
pub fn fused_reference(x: f32) -> f32 {
    let y = FUSE_A.mul_add(x, FUSE_B);
    y * y + x
}

impl Lesson for Fusion {
    fn spec(&self) -> &'static TargetSpec {
        &KERNEL_FUSION
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        self.n = copy_elements(env.size);
        self.seed = env.seed;
        let bytes = self.n as usize * 4;
        let x = gpu.alloc(bytes)?;
        gpu.fill_uniform(&x, self.seed, -1.0, 1.0)?;
        self.x = Some(x);
        self.y = Some(gpu.alloc(bytes)?);
        self.z = Some(gpu.alloc(bytes)?);
        self.w = Some(gpu.alloc(bytes)?);
        gpu.sync()?;
        Ok(format!("{} f32 elements", self.n))
    }

    fn work(&self, v: usize) -> Work {
        // Bytes actually read + written: 3 kernels move 8 + 8 + 12 bytes per element.
        let per = if v == 0 { 28.0 } else { 8.0 };
        Work {
            bytes: per * self.n as f64,
            flops: 4.0 * self.n as f64,
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.poison(need(&self.w)?)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let (x, y, z, w, n) = (
            need(&self.x)?.ptr(),
            need(&self.y)?.ptr(),
            need(&self.z)?.ptr(),
            need(&self.w)?.ptr(),
            self.n,
        );
        let (a, b) = (FUSE_A, FUSE_B);
        if v == 0 {
            let f1 = gpu.function("fusion", "fuse_step1_affine")?;
            let f2 = gpu.function("fusion", "fuse_step2_square")?;
            let f3 = gpu.function("fusion", "fuse_step3_add")?;
            gpu.launch_grid_stride(&f1, n, &mut [arg(&x), arg(&y), arg(&n), arg(&a), arg(&b)])?;
            gpu.launch_grid_stride(&f2, n, &mut [arg(&y), arg(&z), arg(&n)])?;
            gpu.launch_grid_stride(&f3, n, &mut [arg(&z), arg(&x), arg(&w), arg(&n)])
        } else {
            let f = gpu.function("fusion", "fused_affine_square_add")?;
            gpu.launch_grid_stride(&f, n, &mut [arg(&x), arg(&w), arg(&n), arg(&a), arg(&b)])
        }
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let got: Vec<f32> = need(&self.w)?.download(&gpu.stream)?;
        let seed = self.seed;
        Ok(verify::check_all(
            self.spec().variants[v].name,
            &got,
            |i| fused_reference(rng::uniform(seed, i as u64, -1.0, 1.0)),
            verify::same_bits,
        ))
    }

    fn details(&self, _gpu: &Gpu, v: usize) -> serde_json::Value {
        json!({ "bytes_per_element": if v == 0 { 28 } else { 8 }, "kernels": if v == 0 { 3 } else { 1 } })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_round_like_the_kernels() {
        // (1.5 * 0.5 - 0.25)^2 + 0.5 = 0.75 exactly.
        assert_eq!(fused_reference(0.5), 0.75);
        // Horner with p = 1/32: at v = 1 the sum is 1/32 - 1/16 + 1/8 - 1/4 + 1/2 + 1.
        assert_eq!(occ_poly(1.0), 1.34375);
        assert_eq!(occ_poly(0.0), 1.0);
        assert_eq!(copy_elements(SizeClass::Large), 1 << 28);
    }
}
