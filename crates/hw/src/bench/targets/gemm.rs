//! Matrix-multiply lessons: hand-written FP32 kernels, cuBLAS in each
//! precision, cuBLASLt BF16 and FP8, and batching small products.
//!
//! Checks: every output element must be written (the poison is NaN), and 256
//! sampled entries are compared with a float64 dot product of the exact
//! operands the GPU used (low-precision operands are downloaded after the
//! device converted them), by relative L2 error with a tolerance per precision.

use serde_json::json;

use super::{GEMM, GEMM_BATCHED};
use crate::bench::BenchError;
use crate::bench::blas::{Blas, Compute, DType, LtKind, LtMatmul};
use crate::bench::cuda::{DevBuf, arg};
use crate::bench::device::Gpu;
use crate::bench::lesson::{Lesson, RunEnv, TargetSpec, Work};
use crate::bench::rng;
use crate::bench::verify::{self, Check};

fn need<T>(b: &Option<T>) -> Result<&T, BenchError> {
    b.as_ref()
        .ok_or_else(|| BenchError::Other("benchmark used before setup".into()))
}

/// Entries sampled per check.
const SAMPLES: usize = 256;

/// (row, col) pairs to check, spread over the matrix, fixed by `seed`.
pub fn sample_points(m: usize, n: usize, seed: u32) -> Vec<(usize, usize)> {
    (0..SAMPLES as u64)
        .map(|s| {
            let r = rng::hash(seed ^ 0x5EED, 2 * s) as usize % m;
            let c = rng::hash(seed ^ 0x5EED, 2 * s + 1) as usize % n;
            (r, c)
        })
        .collect()
}

/// Row-major operands on the host, as f64, for references.
pub struct HostMat {
    pub cols: usize,
    pub data: Vec<f32>,
}

impl HostMat {
    pub fn get(&self, r: usize, c: usize) -> f64 {
        self.data[r * self.cols + c] as f64
    }
}

/// Reference C[r][c] = Σ_k A[r][k]·B[k][c], or Σ_k A[r][k]·Bt[c][k] when `b_transposed`.
pub fn reference_entry(a: &HostMat, b: &HostMat, r: usize, c: usize, b_transposed: bool) -> f64 {
    (0..a.cols)
        .map(|k| {
            a.get(r, k)
                * if b_transposed {
                    b.get(c, k)
                } else {
                    b.get(k, c)
                }
        })
        .sum()
}

/// Decode a downloaded output buffer to f32 by its type.
fn decode(raw: &[u8], t: DType) -> Vec<f32> {
    match t {
        DType::F32 => raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        DType::Bf16 => raw
            .chunks_exact(2)
            .map(|b| verify::bf16_to_f32(u16::from_le_bytes([b[0], b[1]])))
            .collect(),
        DType::F16 => raw
            .chunks_exact(2)
            .map(|b| verify::f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
            .collect(),
        DType::E4m3 => raw.iter().map(|&b| verify::e4m3_to_f32(b)).collect(),
    }
}

/// Check a full output: nothing unwritten, sampled entries within `tol`.
#[allow(clippy::too_many_arguments)]
fn check_output(
    what: &str,
    out: &[f32],
    cols: usize,
    a: &HostMat,
    b: &HostMat,
    b_t: bool,
    points: &[(usize, usize)],
    tol: f64,
) -> Check {
    let unwritten = out.iter().filter(|v| v.is_nan()).count();
    if unwritten > 0 {
        return Check {
            passed: false,
            detail: format!(
                "{what}: {unwritten} of {} outputs are NaN (never written or overflowed)",
                out.len()
            ),
            checked: out.len() as u64,
            mismatches: unwritten as u64,
            rel_err: None,
        };
    }
    let got: Vec<f64> = points
        .iter()
        .map(|&(r, c)| out[r * cols + c] as f64)
        .collect();
    let want: Vec<f64> = points
        .iter()
        .map(|&(r, c)| reference_entry(a, b, r, c, b_t))
        .collect();
    let mut ch = verify::rel_l2(what, &got, &want, tol);
    ch.detail = format!(
        "{} on {} sampled entries vs a float64 CPU reference; all {} outputs written",
        ch.detail,
        points.len(),
        out.len()
    );
    ch
}

// ---------------------------------------------------------------- GEMM

#[derive(Default)]
pub struct Gemm {
    /// Set before setup to override the size class (hw_tensor_cores sweeps sizes).
    pub dim_override: Option<usize>,
    dim: usize,
    seed: u32,
    a32: Option<DevBuf>,
    b32: Option<DevBuf>,
    bt32: Option<DevBuf>,
    c32: Option<DevBuf>,
    c16: Option<DevBuf>,
    a16: Option<DevBuf>,
    b16: Option<DevBuf>,
    a8: Option<DevBuf>,
    bt8: Option<DevBuf>,
    /// Which 16-bit type a16/b16 currently hold.
    half_kind: Option<DType>,
    blas: Option<Blas>,
    lt_bf16: Option<LtMatmul>,
    lt_fp8: Option<LtMatmul>,
    host_a: Option<HostMat>,
    host_b: Option<HostMat>,
    points: Vec<(usize, usize)>,
}

/// Variant indices (order of GEMM.variants).
const NAIVE: usize = 0;
const SMEM: usize = 1;
const REG: usize = 2;
const CUBLAS_F32: usize = 3;
const CUBLAS_TF32: usize = 4;
const CUBLAS_BF16: usize = 5;
const CUBLAS_F16: usize = 6;
const LT_BF16: usize = 7;
const LT_FP8: usize = 8;

impl Gemm {
    /// A GEMM lesson fixed at M = N = K = `dim` (ignores the size class).
    pub fn with_size(dim: usize) -> Gemm {
        Gemm {
            dim_override: Some(dim),
            ..Default::default()
        }
    }

    fn out_type(v: usize) -> DType {
        if v <= CUBLAS_TF32 {
            DType::F32
        } else if v == CUBLAS_F16 {
            DType::F16
        } else {
            DType::Bf16
        }
    }

    fn tolerance(v: usize) -> f64 {
        match v {
            NAIVE..=CUBLAS_F32 => 1e-4,
            CUBLAS_TF32 => 5e-3,
            _ => 1e-2,
        }
    }

    /// Convert a f32 buffer on the device into `t` (f32_to_bf16/f16/e4m3 kernels).
    fn convert(gpu: &Gpu, src: &DevBuf, dst: &DevBuf, t: DType) -> Result<(), BenchError> {
        let name = match t {
            DType::Bf16 => "f32_to_bf16",
            DType::F16 => "f32_to_f16",
            DType::E4m3 => "f32_to_e4m3",
            DType::F32 => return Err(BenchError::Other("no conversion to f32".into())),
        };
        let f = gpu.function("util", name)?;
        let (s, d, n) = (src.ptr(), dst.ptr(), src.len::<f32>() as u64);
        gpu.launch_grid_stride(&f, n, &mut [arg(&s), arg(&d), arg(&n)])
    }

    /// Make a16/b16 hold `t`, converting from the f32 operands when needed.
    fn ensure_half(&mut self, gpu: &Gpu, t: DType) -> Result<(), BenchError> {
        if self.half_kind == Some(t) {
            return Ok(());
        }
        let bytes = self.dim * self.dim * 2;
        if self.a16.is_none() {
            self.a16 = Some(gpu.alloc(bytes)?);
            self.b16 = Some(gpu.alloc(bytes)?);
        }
        Self::convert(gpu, need(&self.a32)?, need(&self.a16)?, t)?;
        Self::convert(gpu, need(&self.b32)?, need(&self.b16)?, t)?;
        gpu.sync()?;
        self.half_kind = Some(t);
        Ok(())
    }

    fn ensure_fp8(&mut self, gpu: &Gpu) -> Result<(), BenchError> {
        if self.a8.is_some() {
            return Ok(());
        }
        let d = self.dim;
        let bt32 = gpu.alloc(d * d * 4)?;
        gpu.fill_uniform(&bt32, self.seed.wrapping_add(2), -1.0, 1.0)?;
        let (a8, bt8) = (gpu.alloc(d * d)?, gpu.alloc(d * d)?);
        Self::convert(gpu, need(&self.a32)?, &a8, DType::E4m3)?;
        Self::convert(gpu, &bt32, &bt8, DType::E4m3)?;
        gpu.sync()?;
        self.bt32 = Some(bt32);
        self.a8 = Some(a8);
        self.bt8 = Some(bt8);
        Ok(())
    }

    /// Host copies of the low-precision operands variant `v` used, decoded
    /// to f32 (after the device converted them), and whether B is transposed.
    fn low_precision_operands(
        &self,
        gpu: &Gpu,
        v: usize,
    ) -> Result<(HostMat, HostMat, bool), BenchError> {
        let d = self.dim;
        let mat = |data: Vec<f32>| HostMat { cols: d, data };
        if v == LT_FP8 {
            return Ok((
                mat(decode(
                    &need(&self.a8)?.download::<u8>(&gpu.stream)?,
                    DType::E4m3,
                )),
                mat(decode(
                    &need(&self.bt8)?.download::<u8>(&gpu.stream)?,
                    DType::E4m3,
                )),
                true,
            ));
        }
        let t = self.half_kind.unwrap_or(DType::Bf16);
        Ok((
            mat(decode(&need(&self.a16)?.download::<u8>(&gpu.stream)?, t)),
            mat(decode(&need(&self.b16)?.download::<u8>(&gpu.stream)?, t)),
            false,
        ))
    }
}

impl Lesson for Gemm {
    fn spec(&self) -> &'static TargetSpec {
        &GEMM
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        let d = self
            .dim_override
            .unwrap_or_else(|| env.size.pick(1024, 4096, 8192));
        if d == 0 || !d.is_multiple_of(64) {
            return Err(BenchError::InvalidInput(format!(
                "GEMM size {d} must be a positive multiple of 64"
            )));
        }
        self.dim = d;
        self.seed = env.seed;
        let (sa, sb) = (self.seed, self.seed.wrapping_add(1));
        let a32 = gpu.alloc(d * d * 4)?;
        let b32 = gpu.alloc(d * d * 4)?;
        gpu.fill_uniform(&a32, sa, -1.0, 1.0)?;
        gpu.fill_uniform(&b32, sb, -1.0, 1.0)?;
        self.a32 = Some(a32);
        self.b32 = Some(b32);
        self.c32 = Some(gpu.alloc(d * d * 4)?);
        self.c16 = Some(gpu.alloc(d * d * 2)?);
        let host = |seed: u32| {
            let mut data = vec![0.0f32; d * d];
            super::launch::fill_host_uniform(&mut data, seed, -1.0, 1.0);
            HostMat { cols: d, data }
        };
        self.host_a = Some(host(sa));
        self.host_b = Some(host(sb));
        self.points = sample_points(d, d, self.seed);
        self.blas = if crate::bench::libs::cublas_available() {
            Some(Blas::new(gpu)?)
        } else {
            None
        };
        gpu.sync()?;
        Ok(format!(
            "M = N = K = {d}, row-major, operands uniform in [-1, 1)"
        ))
    }

    fn unavailable(&self, gpu: &Gpu, v: usize) -> Option<String> {
        let cc = (gpu.info.cc_major, gpu.info.cc_minor);
        if v >= CUBLAS_F32 && self.blas.is_none() {
            return Some("cuBLAS (libcublas) is not installed or not found".into());
        }
        match v {
            CUBLAS_TF32 | CUBLAS_BF16 | LT_BF16 if cc < (8, 0) => Some(format!(
                "TF32/BF16 tensor cores need compute capability 8.0+; this GPU is {}.{}",
                cc.0, cc.1
            )),
            LT_BF16 | LT_FP8 if !crate::bench::libs::cublaslt_available() => {
                Some("cuBLASLt (libcublasLt) is not found".into())
            }
            LT_FP8 if cc < (8, 9) => Some(format!(
                "FP8 tensor cores need compute capability 8.9+; this GPU is {}.{}",
                cc.0, cc.1
            )),
            _ => None,
        }
    }

    fn work(&self, _v: usize) -> Work {
        let d = self.dim as f64;
        Work {
            bytes: 0.0,
            flops: 2.0 * d * d * d,
        }
    }

    fn prepare(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        match v {
            CUBLAS_BF16 | LT_BF16 => self.ensure_half(gpu, DType::Bf16)?,
            CUBLAS_F16 => self.ensure_half(gpu, DType::F16)?,
            LT_FP8 => self.ensure_fp8(gpu)?,
            _ => {}
        }
        let out = if Self::out_type(v) == DType::F32 {
            need(&self.c32)?
        } else {
            need(&self.c16)?
        };
        gpu.poison(out)
    }

    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let d = self.dim;
        let (du, a, b, c) = (
            d as u32,
            need(&self.a32)?.ptr(),
            need(&self.b32)?.ptr(),
            need(&self.c32)?.ptr(),
        );
        let args = &mut [arg(&a), arg(&b), arg(&c), arg(&du), arg(&du), arg(&du)];
        match v {
            NAIVE => gpu.function("gemm", "sgemm_naive")?.launch(
                &gpu.stream,
                (du / 16, du / 16, 1),
                (16, 16, 1),
                args,
            ),
            SMEM => gpu.function("gemm", "sgemm_smem_tiled")?.launch(
                &gpu.stream,
                (du / 32, du / 32, 1),
                (32, 32, 1),
                args,
            ),
            REG => gpu.function("gemm", "sgemm_reg_tiled")?.launch(
                &gpu.stream,
                (du / 64, du / 64, 1),
                (16, 16, 1),
                args,
            ),
            CUBLAS_F32 => {
                need(&self.blas)?.gemm(d, d, d, a, b, c, DType::F32, DType::F32, Compute::F32)
            }
            CUBLAS_TF32 => {
                need(&self.blas)?.gemm(d, d, d, a, b, c, DType::F32, DType::F32, Compute::Tf32)
            }
            CUBLAS_BF16 | CUBLAS_F16 => {
                let t = if v == CUBLAS_BF16 {
                    DType::Bf16
                } else {
                    DType::F16
                };
                let (a16, b16, c16) = (
                    need(&self.a16)?.ptr(),
                    need(&self.b16)?.ptr(),
                    need(&self.c16)?.ptr(),
                );
                need(&self.blas)?.gemm(d, d, d, a16, b16, c16, t, t, Compute::F32)
            }
            LT_BF16 => {
                if self.lt_bf16.is_none() {
                    self.lt_bf16 = Some(LtMatmul::new(gpu, d, d, d, LtKind::Bf16)?);
                }
                let (a16, b16, c16) = (
                    need(&self.a16)?.ptr(),
                    need(&self.b16)?.ptr(),
                    need(&self.c16)?.ptr(),
                );
                need(&self.lt_bf16)?.run(gpu, a16, b16, c16)
            }
            _ => {
                if self.lt_fp8.is_none() {
                    self.lt_fp8 = Some(LtMatmul::new(gpu, d, d, d, LtKind::Fp8)?);
                }
                let (a8, bt8, c16) = (
                    need(&self.a8)?.ptr(),
                    need(&self.bt8)?.ptr(),
                    need(&self.c16)?.ptr(),
                );
                need(&self.lt_fp8)?.run(gpu, a8, bt8, c16)
            }
        }
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let t = Self::out_type(v);
        let raw: Vec<u8> = if t == DType::F32 {
            need(&self.c32)?
        } else {
            need(&self.c16)?
        }
        .download(&gpu.stream)?;
        let out = decode(&raw, t);
        let what = self.spec().variants[v].name;
        let tol = Self::tolerance(v);
        if v <= CUBLAS_TF32 {
            let (a, b) = (need(&self.host_a)?, need(&self.host_b)?);
            return Ok(check_output(
                what,
                &out,
                self.dim,
                a,
                b,
                false,
                &self.points,
                tol,
            ));
        }
        let (a, b, bt) = self.low_precision_operands(gpu, v)?;
        Ok(check_output(
            what,
            &out,
            self.dim,
            &a,
            &b,
            bt,
            &self.points,
            tol,
        ))
    }

    fn details(&self, gpu: &Gpu, v: usize) -> serde_json::Value {
        let mut d = json!({ "m": self.dim, "n": self.dim, "k": self.dim, "output": format!("{:?}", Self::out_type(v)).to_lowercase(), "tolerance_rel_l2": Self::tolerance(v) });
        if v <= REG {
            let name = ["sgemm_naive", "sgemm_smem_tiled", "sgemm_reg_tiled"][v];
            let block = [256, 1024, 256][v];
            d["kernel"] = super::memory::kernel_resources(gpu, "gemm", name, block);
        }
        if v >= CUBLAS_F32 {
            d["cublas_version"] = json!(crate::bench::blas::cublas_version());
        }
        d
    }
}

// ---------------------------------------------------------------- batched

const BATCH: usize = 256;
const BDIM: usize = 128;

#[derive(Default)]
pub struct Batched {
    seed: u32,
    a: Option<DevBuf>,
    b: Option<DevBuf>,
    c: Option<DevBuf>,
    blas: Option<Blas>,
}

impl Lesson for Batched {
    fn spec(&self) -> &'static TargetSpec {
        &GEMM_BATCHED
    }

    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError> {
        if !crate::bench::libs::cublas_available() {
            return Err(BenchError::Unsupported(
                "cuBLAS (libcublas) is not installed or not found".into(),
            ));
        }
        self.seed = env.seed;
        let bytes = BATCH * BDIM * BDIM * 4;
        let (a, b) = (gpu.alloc(bytes)?, gpu.alloc(bytes)?);
        gpu.fill_uniform(&a, self.seed, -1.0, 1.0)?;
        gpu.fill_uniform(&b, self.seed.wrapping_add(1), -1.0, 1.0)?;
        self.a = Some(a);
        self.b = Some(b);
        self.c = Some(gpu.alloc(bytes)?);
        self.blas = Some(Blas::new(gpu)?);
        gpu.sync()?;
        Ok(format!("{BATCH} products of {BDIM}x{BDIM}x{BDIM} FP32"))
    }

    fn work(&self, _v: usize) -> Work {
        Work {
            bytes: 0.0,
            flops: 2.0 * (BDIM * BDIM * BDIM * BATCH) as f64,
        }
    }

    fn plan(&self, _v: usize, base: crate::bench::timing::Plan) -> crate::bench::timing::Plan {
        // 48 MB of operands: flushing L2 keeps each repetition cold.
        base
    }

    fn prepare(&mut self, gpu: &Gpu, _v: usize) -> Result<(), BenchError> {
        gpu.poison(need(&self.c)?)
    }

    fn run(&mut self, _gpu: &Gpu, v: usize) -> Result<(), BenchError> {
        let (a, b, c, blas) = (
            need(&self.a)?.ptr(),
            need(&self.b)?.ptr(),
            need(&self.c)?.ptr(),
            need(&self.blas)?,
        );
        let stride = (BDIM * BDIM * 4) as u64;
        if v == 0 {
            for i in 0..BATCH as u64 {
                blas.gemm(
                    BDIM,
                    BDIM,
                    BDIM,
                    a + i * stride,
                    b + i * stride,
                    c + i * stride,
                    DType::F32,
                    DType::F32,
                    Compute::F32,
                )?;
            }
            Ok(())
        } else {
            blas.gemm_strided_batched_f32(BDIM, BDIM, BDIM, a, b, c, BATCH)
        }
    }

    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError> {
        let out: Vec<f32> = need(&self.c)?.download(&gpu.stream)?;
        let unwritten = out.iter().filter(|x| x.is_nan()).count();
        let what = self.spec().variants[v].name;
        if unwritten > 0 {
            return Ok(Check::fail(format!(
                "{what}: {unwritten} of {} outputs never written",
                out.len()
            )));
        }
        // Sample 8 entries in each of 32 spread-out matrices.
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let per = BDIM * BDIM;
        for s in 0..SAMPLES as u64 {
            let mat = (s as usize * 8) % BATCH;
            let r = rng::hash(self.seed, 3 * s) as usize % BDIM;
            let c = rng::hash(self.seed, 3 * s + 1) as usize % BDIM;
            let base = (mat * per) as u64;
            let a_at =
                |k: usize| rng::uniform(self.seed, base + (r * BDIM + k) as u64, -1.0, 1.0) as f64;
            let b_at = |k: usize| {
                rng::uniform(
                    self.seed.wrapping_add(1),
                    base + (k * BDIM + c) as u64,
                    -1.0,
                    1.0,
                ) as f64
            };
            want.push((0..BDIM).map(|k| a_at(k) * b_at(k)).sum::<f64>());
            got.push(out[mat * per + r * BDIM + c] as f64);
        }
        let mut ch = verify::rel_l2(what, &got, &want, 1e-5);
        ch.detail = format!(
            "{} on {SAMPLES} sampled entries; all {} outputs written",
            ch.detail,
            out.len()
        );
        Ok(ch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_products_and_layouts() {
        // A = [[1, 2], [3, 4]], B = [[5, 6], [7, 8]]: A·B = [[19, 22], [43, 50]].
        let a = HostMat {
            cols: 2,
            data: vec![1.0, 2.0, 3.0, 4.0],
        };
        let b = HostMat {
            cols: 2,
            data: vec![5.0, 6.0, 7.0, 8.0],
        };
        assert_eq!(reference_entry(&a, &b, 0, 0, false), 19.0);
        assert_eq!(reference_entry(&a, &b, 1, 1, false), 50.0);
        // With B stored transposed, A·Btᵀ = [[17, 23], [39, 53]].
        assert_eq!(reference_entry(&a, &b, 0, 0, true), 17.0);
        assert_eq!(reference_entry(&a, &b, 1, 1, true), 53.0);
        let c = check_output(
            "t",
            &[19.0, 22.0, 43.0, 50.0],
            2,
            &a,
            &b,
            false,
            &[(0, 0), (0, 1), (1, 0), (1, 1)],
            1e-12,
        );
        assert!(c.passed, "{}", c.detail);
        let nan = check_output(
            "t",
            &[19.0, f32::NAN, 43.0, 50.0],
            2,
            &a,
            &b,
            false,
            &[(0, 0)],
            1e-3,
        );
        assert!(!nan.passed && nan.mismatches == 1);
    }

    #[test]
    fn samples_are_in_range_and_spread() {
        let p = sample_points(1024, 512, 7);
        assert_eq!(p.len(), SAMPLES);
        assert!(p.iter().all(|&(r, c)| r < 1024 && c < 512));
        let rows: std::collections::HashSet<_> = p.iter().map(|x| x.0).collect();
        assert!(rows.len() > 200);
    }

    #[test]
    fn decoding_outputs() {
        assert_eq!(decode(&1.5f32.to_le_bytes(), DType::F32), vec![1.5]);
        assert_eq!(decode(&[0x80, 0x3f], DType::Bf16), vec![1.0]);
        assert_eq!(decode(&[0x00, 0x3c], DType::F16), vec![1.0]);
        assert_eq!(decode(&[0x38], DType::E4m3), vec![1.0]);
    }
}
