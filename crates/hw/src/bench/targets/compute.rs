//! Arithmetic lessons: warp divergence, instruction-level parallelism, and
//! reductions.

use serde_json::json;

use super::{ILP, REDUCTION, WARP_DIVERGENCE};
use crate::bench::BenchError;
use crate::bench::cuda::{DevBuf, arg};
use crate::bench::device::Gpu;
use crate::bench::lesson::{Lesson, RunEnv, TargetSpec, Work};
use crate::bench::rng;
use crate::bench::verify::{self, Check};

fn need(b: &Option<DevBuf>) -> Result<&DevBuf, BenchError> {
    b.as_ref()
        .ok_or_else(|| BenchError::Other("benchmark used before setup".into()))
}

/// `iters` steps of acc = acc * a + b, rounded like `__fmaf_rn`.
pub fn fma_chain(mut acc: f32, a: f32, b: f32, iters: u32) -> f32 {
    for _ in 0..iters {
        acc = acc.mul_add(a, b);
    }
    acc
}

/// The divergence kernels' per-element function.
pub fn divergence_reference(v: f32, iters: u32) -> f32 {
    if v > 0.0 {
        fma_chain(v, 0.9990, 0.0010, iters)
    } else {
        fma_chain(v, 1.0005, -0.0007, iters)
    }
}

/// Sum f(i) for i in 0..n in f64 on all cores.
pub fn par_sum(n: u64, f: impl Fn(u64) -> f64 + Sync) -> f64 {
    let parts = std::thread::available_parallelism()
        .map(|p| p.get())
        .unwrap_or(1)
        .min(32) as u64;
    let chunk = n.div_ceil(parts).max(1);
    std::thread::scope(|s| {
        let f = &f;
        let hs: Vec<_> = (0..parts)
            .map(|p| s.spawn(move || (p * chunk..((p + 1) * chunk).min(n)).map(f).sum::<f64>()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or(f64::NAN)).sum()
    })
}

// ---------------------------------------------------------------- divergence

const DIV_ITERS: u32 = 128;

#[derive(Default)]
pub struct Divergence {
    n: u64,
    seed: u32,
    x: Option<DevBuf>,
    y: Option<DevBuf>,
}

impl Lesson for Divergence {
    fn spec(&self) -> &'static TargetSpec {
        &WARP_DIVERGENCE
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        self.n = env.size.pick(4 << 20, 16 << 20, 32 << 20);
        self.seed = env.seed;
        let x = gpu.alloc(self.n as usize * 4)?;
        gpu.fill_uniform(&x, self.seed, -1.0, 1.0)?;
        self.x = Some(x);
        self.y = Some(gpu.alloc(self.n as usize * 4)?);
        gpu.sync()?;
        Ok(format!(
            "{} f32 elements, {DIV_ITERS} dependent FMAs each, signs random",
            self.n
        ))
    }

    fn work(&self, _v: usize) -> Work {
        Work {
            bytes: 8.0 * self.n as f64,
            flops: 2.0 * DIV_ITERS as f64 * self.n as f64,
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.poison(need(&self.y)?)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let name = if v == 0 {
            "divergent_branch"
        } else {
            "predicated_select"
        };
        let f = gpu.function("compute", name)?;
        let (x, y, n, it) = (
            need(&self.x)?.ptr(),
            need(&self.y)?.ptr(),
            self.n,
            DIV_ITERS,
        );
        gpu.launch_grid_stride(&f, n, &mut [arg(&x), arg(&y), arg(&n), arg(&it)])
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let got: Vec<f32> = need(&self.y)?.download(&gpu.stream)?;
        let seed = self.seed;
        Ok(verify::check_all(
            self.spec().variants[v].name,
            &got,
            |i| divergence_reference(rng::uniform(seed, i as u64, -1.0, 1.0), DIV_ITERS),
            verify::same_bits,
        ))
    }
}

// ---------------------------------------------------------------- ILP

const ILP_ITERS: u32 = 256;
const ILP_BLOCK: u32 = 128;

#[derive(Default)]
pub struct Ilp {
    n: u64,
    seed: u32,
    x: Option<DevBuf>,
    y: Option<DevBuf>,
}

impl Lesson for Ilp {
    fn spec(&self) -> &'static TargetSpec {
        &ILP
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        self.n = env.size.pick(4 << 20, 16 << 20, 32 << 20);
        self.seed = env.seed;
        let x = gpu.alloc(self.n as usize * 4)?;
        gpu.fill_uniform(&x, self.seed, -1.0, 1.0)?;
        self.x = Some(x);
        self.y = Some(gpu.alloc(self.n as usize * 4)?);
        gpu.sync()?;
        Ok(format!(
            "{} f32 elements, {ILP_ITERS} dependent FMAs each; one {ILP_BLOCK}-thread block per SM ({} blocks)",
            self.n, gpu.info.sm_count
        ))
    }

    fn work(&self, _v: usize) -> Work {
        Work {
            bytes: 8.0 * self.n as f64,
            flops: 2.0 * ILP_ITERS as f64 * self.n as f64,
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.poison(need(&self.y)?)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let name = if v == 0 { "ilp_chain1" } else { "ilp_chain4" };
        let f = gpu.function("compute", name)?;
        let (x, y, n, it) = (
            need(&self.x)?.ptr(),
            need(&self.y)?.ptr(),
            self.n,
            ILP_ITERS,
        );
        // Deliberately few warps per SM: the situation where ILP matters.
        f.launch(
            &gpu.stream,
            (gpu.info.sm_count, 1, 1),
            (ILP_BLOCK, 1, 1),
            &mut [arg(&x), arg(&y), arg(&n), arg(&it)],
        )
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let got: Vec<f32> = need(&self.y)?.download(&gpu.stream)?;
        let seed = self.seed;
        Ok(verify::check_all(
            self.spec().variants[v].name,
            &got,
            |i| {
                fma_chain(
                    rng::uniform(seed, i as u64, -1.0, 1.0),
                    0.9990,
                    0.0010,
                    ILP_ITERS,
                )
            },
            verify::same_bits,
        ))
    }

    fn details(&self, _gpu: &Gpu, _v: usize) -> serde_json::Value {
        json!({ "threads_per_sm": ILP_BLOCK, "warps_per_sm": ILP_BLOCK / 32, "chains_per_thread": if _v == 0 { 1 } else { 4 } })
    }
}

// ---------------------------------------------------------------- reduction

#[derive(Default)]
pub struct Reduction {
    n: u64,
    seed: u32,
    x: Option<DevBuf>,
    out: Option<DevBuf>,
    reference: f64,
}

impl Lesson for Reduction {
    fn spec(&self) -> &'static TargetSpec {
        &REDUCTION
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        self.n = env.size.pick(16 << 20, 64 << 20, 256 << 20);
        self.seed = env.seed;
        let x = gpu.alloc(self.n as usize * 4)?;
        // [0, 1): the sum grows with n, so a relative tolerance is meaningful.
        gpu.fill_uniform(&x, self.seed, 0.0, 1.0)?;
        self.x = Some(x);
        self.out = Some(gpu.alloc(8)?);
        let seed = self.seed;
        self.reference = par_sum(self.n, |i| rng::uniform(seed, i, 0.0, 1.0) as f64);
        gpu.sync()?;
        Ok(format!("sum of {} f32 in [0, 1) into one f64", self.n))
    }

    fn work(&self, _v: usize) -> Work {
        Work {
            bytes: 4.0 * self.n as f64,
            flops: self.n as f64,
        }
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        // The kernels accumulate into the output: it starts at zero (an
        // unwritten output then reads 0, which fails the check).
        need(&self.out)?.memset_async(0, &gpu.stream)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let (x, out, n) = (need(&self.x)?.ptr(), need(&self.out)?.ptr(), self.n);
        match v {
            0 => {
                let f = gpu.function("reduction", "reduce_atomic_global")?;
                gpu.launch_grid_stride(&f, n, &mut [arg(&x), arg(&n), arg(&out)])
            }
            1 => {
                let f = gpu.function("reduction", "reduce_shared_tree")?;
                let blocks = n.div_ceil(256) as u32;
                f.launch(
                    &gpu.stream,
                    (blocks, 1, 1),
                    (256, 1, 1),
                    &mut [arg(&x), arg(&n), arg(&out)],
                )
            }
            _ => {
                let f = gpu.function("reduction", "reduce_warp_shuffle")?;
                let n4 = n / 4;
                gpu.launch_grid_stride(&f, n4, &mut [arg(&x), arg(&n4), arg(&out)])
            }
        }
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let got: Vec<f64> = need(&self.out)?.download(&gpu.stream)?;
        let value = got.first().copied().unwrap_or(f64::NAN);
        Ok(verify::close_scalar(
            self.spec().variants[v].name,
            value,
            self.reference,
            1e-5,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references() {
        assert_eq!(fma_chain(1.0, 0.5, 0.5, 3), 1.0);
        assert_eq!(fma_chain(0.0, 0.5, 1.0, 2), 1.5);
        // Positive and negative inputs take different coefficient sets.
        assert_ne!(
            divergence_reference(0.5, 4),
            fma_chain(0.5, 1.0005, -0.0007, 4)
        );
        assert_eq!(
            divergence_reference(-0.5, 4),
            fma_chain(-0.5, 1.0005, -0.0007, 4)
        );
        assert_eq!(par_sum(1000, |i| i as f64), 499_500.0);
        assert_eq!(par_sum(0, |_| 1.0), 0.0);
    }
}
