//! The measured roofline of one GPU (device-memory bandwidth, compute peaks
//! per precision, the ridge points between them), the tensor-core GEMM sweep
//! per precision and size, and the roofs a lesson run's percentages refer to.
//! Every measurement comes back with the rows to store.

use std::time::Duration;

use aisp_base::Cancel;
use aisp_store::Store;
use schemars::JsonSchema;
use serde::Serialize;

use super::bandwidth::dtod_and_best;
use super::datasheet::{self, Datasheet};
use super::lesson::{self, Metric, RunEnv, Status, VariantResult};
use super::record;
use super::roofs::{self, Roof, Roofs};
use super::session::Session;
use super::targets::GEMM;
use super::targets::gemm::Gemm;
use super::{BenchError, Measured, SizeClass};

/// GEMM variant indices per precision name (order of `GEMM.variants`).
pub const PRECISIONS: &[(&str, &[usize])] = &[
    ("fp32", &[3]),
    ("tf32", &[4]),
    ("bf16", &[5, 7]),
    ("fp16", &[6]),
    ("fp8", &[8]),
];

/// The GEMM variants measuring precision `p`, if aisp knows it.
pub fn precision_variants(p: &str) -> Option<&'static [usize]> {
    PRECISIONS.iter().find(|(n, _)| *n == p).map(|(_, v)| *v)
}

/// The precision a GEMM variant measures (empty when none does).
fn precision_of(variant: &str) -> String {
    PRECISIONS
        .iter()
        .find(|(_, idx)| idx.iter().any(|&i| GEMM.variants[i].name == variant))
        .map(|(n, _)| n.to_string())
        .unwrap_or_default()
}

/// Run the cuBLAS GEMM variants of `indices` at size `dim`.
fn gemm_rows(
    s: &Session,
    dim: usize,
    indices: &[usize],
    budget: Duration,
    cancelled: Cancel<'_>,
    progress: &dyn Fn(&str),
) -> Result<Vec<VariantResult>, BenchError> {
    let mut g = Gemm::with_size(dim);
    let roofs = Roofs::default();
    let env = RunEnv {
        size: SizeClass::Large,
        budget,
        seed: s.meta.seed,
        cancelled,
        progress,
        roofs: &roofs,
        datasheet: None,
        nvml: s.nvml.clone(),
    };
    lesson::run_lesson_where(&mut g, &s.gpu, &env, &|i| indices.contains(&i))
}

/// What the roofline measures.
#[derive(Debug, Clone, Copy)]
pub struct RooflineOptions {
    /// Size of each copy buffer for the memory roof (capped at a quarter of the GPU's memory).
    pub copy_mib: u64,
    /// M = N = K of the tensor-core GEMMs.
    pub gemm_size: usize,
    /// Measure the tensor-core precisions too.
    pub tensor: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct MemoryRoof {
    pub dtod_gb_per_s: Option<f64>,
    /// The fastest copy kernel and its GB/s (bytes read + written).
    pub best_copy_kernel: Option<String>,
    pub best_copy_gb_per_s: Option<f64>,
    pub best_copy_pct_of_dtod: Option<f64>,
    /// From the memory clock and bus width.
    pub theoretical_gb_per_s: Option<f64>,
    pub theoretical_source: Option<String>,
    /// cuMemcpyDtoD as a share of the theoretical figure.
    pub dtod_pct_of_theoretical: Option<f64>,
    /// The vendor's figure from the GPU catalog, when it knows this GPU.
    pub datasheet_gb_per_s: Option<f64>,
    pub dtod_pct_of_datasheet: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ComputeRoof {
    /// `fp64`, `fp32` (FMA on CUDA cores), `fp32_sgemm` (cuBLAS), `tf32`, `bf16`, `fp16`, `fp8`.
    pub precision: String,
    pub tflop_per_s: f64,
    pub how: String,
    /// FLOP per byte of device memory traffic where this peak meets the memory roof.
    pub ridge_flop_per_byte: Option<f64>,
    pub datasheet_tflop_per_s: Option<f64>,
}

/// A measured roofline.
#[derive(Debug)]
pub struct Roofline {
    pub memory: MemoryRoof,
    pub compute: Vec<ComputeRoof>,
    /// Every copy and GEMM variant measured, with checks and telemetry.
    pub results: Vec<VariantResult>,
}

/// Measure the roofline of the session's GPU: copies for the memory roof,
/// FMA peaks for FP64 and FP32, and (with `tensor`) the best GEMM per
/// precision. The rows are one per roof (memory, fp64, fp32, each tensor
/// precision), then `results`.
pub fn measure(
    s: &Session,
    opts: RooflineOptions,
    cancelled: Cancel<'_>,
    progress: &dyn Fn(&str),
) -> Result<Measured<Roofline>, BenchError> {
    let mut notes = Vec::new();
    let data = datasheet::lookup(&s.gpu.info.name);
    if data.is_none() {
        notes.push(datasheet::MISSING_NOTE.into());
    }
    progress("memory bandwidth");
    let bytes = (opts.copy_mib << 20).min(s.gpu.info.total_memory_bytes / 4);
    let mut results = roofs::copy_bandwidth(
        &s.gpu,
        bytes,
        s.meta.seed,
        Duration::from_millis(700),
        cancelled,
        s.nvml.clone(),
        None,
    )?;
    let memory = memory_roof(s, &results, data.as_ref());
    let dtod = memory.dtod_gb_per_s;
    let mut roof_rows = Vec::new();
    if let Some(d) = dtod {
        roof_rows.push(record::roof_row(
            "memory",
            d,
            &format!("cuMemcpyDtoD, {} MiB", bytes >> 20),
            Metric::GbPerS,
        ));
    }
    let ridge = |tf: f64| dtod.map(|d| tf * 1e12 / (d * 1e9));
    let mut compute = Vec::new();
    for double in [true, false] {
        if cancelled() {
            return Err(BenchError::Cancelled);
        }
        let name = if double { "FP64" } else { "FP32" };
        progress(&format!("{name} FMA peak"));
        match roofs::fma_peak(&s.gpu, double, Duration::from_millis(500), cancelled) {
            Ok((tf, _, how)) => {
                let p = if double { "fp64" } else { "fp32" };
                roof_rows.push(record::roof_row(p, tf, &how, Metric::TflopPerS));
                compute.push(ComputeRoof {
                    precision: p.into(),
                    tflop_per_s: tf,
                    how,
                    ridge_flop_per_byte: ridge(tf),
                    datasheet_tflop_per_s: data.as_ref().and_then(|d| {
                        if double {
                            d.fp64_tflop_per_s
                        } else {
                            d.fp32_tflop_per_s
                        }
                    }),
                });
            }
            Err(BenchError::Cancelled) => return Err(BenchError::Cancelled),
            Err(e) => notes.push(format!("{name} FMA peak not measured: {e}")),
        }
    }
    if opts.tensor {
        progress("tensor-core GEMMs");
        let indices: Vec<usize> = PRECISIONS
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        let rows = gemm_rows(
            s,
            opts.gemm_size,
            &indices,
            Duration::from_millis(800),
            cancelled,
            progress,
        )?;
        for (name, idx) in PRECISIONS {
            let Some((value, variant)) = best_of(&rows, idx) else {
                continue;
            };
            let precision = if *name == "fp32" { "fp32_sgemm" } else { name };
            let how = format!("{variant} at {}^3", opts.gemm_size);
            if *name != "fp32" {
                roof_rows.push(record::roof_row(name, value, &how, Metric::TflopPerS));
            }
            compute.push(ComputeRoof {
                precision: precision.into(),
                tflop_per_s: value,
                how,
                ridge_flop_per_byte: ridge(value),
                datasheet_tflop_per_s: data
                    .as_ref()
                    .and_then(|d| d.peak(GEMM.variants[idx[0]].roof)),
            });
        }
        for r in rows.iter().filter(|r| r.status != Status::Ok) {
            notes.push(format!(
                "{}: {}",
                r.variant,
                r.failure.clone().unwrap_or_default()
            ));
        }
        results.extend(rows);
    }
    let mut rows = roof_rows;
    rows.extend(results.iter().cloned());
    Ok(Measured {
        found: Roofline {
            memory,
            compute,
            results,
        },
        rows,
        notes,
    })
}

/// The memory roof from the copy rows: cuMemcpyDtoD, the fastest kernel, and
/// both against the theoretical and datasheet figures.
fn memory_roof(s: &Session, copies: &[VariantResult], data: Option<&Datasheet>) -> MemoryRoof {
    let (dtod, best) = dtod_and_best(copies);
    let theory = roofs::theoretical_memory(&s.gpu, s.nvml.as_deref());
    MemoryRoof {
        dtod_gb_per_s: dtod,
        best_copy_kernel: best.map(|b| b.variant.clone()),
        best_copy_gb_per_s: best.and_then(|b| b.value),
        best_copy_pct_of_dtod: best.and_then(|b| b.pct_of_roof),
        theoretical_gb_per_s: theory.as_ref().map(|t| t.0),
        theoretical_source: theory.as_ref().map(|t| t.1.clone()),
        dtod_pct_of_theoretical: match (dtod, &theory) {
            (Some(d), Some((t, _))) => Some(d / t * 100.0),
            _ => None,
        },
        datasheet_gb_per_s: data.and_then(|d| d.memory_gb_per_s),
        dtod_pct_of_datasheet: match (dtod, data.and_then(|d| d.memory_gb_per_s)) {
            (Some(d), Some(ds)) if ds > 0.0 => Some(d / ds * 100.0),
            _ => None,
        },
    }
}

/// The fastest passing row among the GEMM variants `idx`: its TFLOP/s and name.
fn best_of(rows: &[VariantResult], idx: &[usize]) -> Option<(f64, String)> {
    rows.iter()
        .filter(|r| {
            r.status == Status::Ok && idx.iter().any(|&i| GEMM.variants[i].name == r.variant)
        })
        .max_by(|a, b| a.value.unwrap_or(0.0).total_cmp(&b.value.unwrap_or(0.0)))
        .and_then(|b| b.value.map(|v| (v, b.variant.clone())))
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TensorRow {
    pub precision: String,
    pub size: usize,
    /// The cuBLAS/cuBLASLt variant measured.
    pub variant: String,
    pub tflop_per_s: Option<f64>,
    pub median_ms: Option<f64>,
    pub cv_pct: Option<f64>,
    pub verified: bool,
    pub failure: Option<String>,
}

/// The tensor-core GEMM sweep.
#[derive(Debug)]
pub struct TensorSweep {
    /// One row per precision variant and size.
    pub rows: Vec<TensorRow>,
    /// Best TFLOP/s per precision over the sizes.
    pub best: Vec<TensorRow>,
}

/// Square GEMMs of each of `sizes` in each of `precisions` (names of
/// [`PRECISIONS`]; unknown ones are not measured), `budget` of timed
/// repetitions each. The rows to store are the measurements (variants named
/// `<variant>_<size>`) and a roof row per tensor precision; the notes, the
/// sizes skipped.
pub fn tensor_sweep(
    s: &Session,
    sizes: &[usize],
    precisions: &[String],
    budget: Duration,
    cancelled: Cancel<'_>,
    progress: &dyn Fn(&str),
) -> Result<Measured<TensorSweep>, BenchError> {
    let indices: Vec<usize> = precisions
        .iter()
        .filter_map(|p| precision_variants(p))
        .flatten()
        .copied()
        .collect();
    let mut notes = Vec::new();
    let mut stored = Vec::new();
    let mut rows = Vec::new();
    for &dim in sizes {
        if cancelled() {
            return Err(BenchError::Cancelled);
        }
        if (dim * dim * 4 * 5) as u64 > s.gpu.info.total_memory_bytes {
            notes.push(format!(
                "size {dim} skipped: its buffers would not fit in GPU memory"
            ));
            continue;
        }
        progress(&format!("GEMMs at {dim}^3"));
        let got = gemm_rows(s, dim, &indices, budget, cancelled, progress)?;
        rows.extend(got.iter().map(|r| TensorRow {
            precision: precision_of(&r.variant),
            size: dim,
            variant: r.variant.clone(),
            tflop_per_s: r.value,
            median_ms: r.median_ms,
            cv_pct: r.cv_pct,
            verified: r.verified,
            failure: r.failure.clone(),
        }));
        for mut r in got {
            r.target = "tensor_cores".into();
            r.variant = format!("{}_{dim}", r.variant);
            stored.push(r);
        }
    }
    let mut best: Vec<TensorRow> = Vec::new();
    for p in precisions {
        let Some(b) = rows
            .iter()
            .filter(|r| &r.precision == p && r.tflop_per_s.is_some())
            .max_by(|a, b| {
                a.tflop_per_s
                    .unwrap_or(0.0)
                    .total_cmp(&b.tflop_per_s.unwrap_or(0.0))
            })
        else {
            continue;
        };
        best.push(TensorRow {
            precision: b.precision.clone(),
            size: b.size,
            variant: b.variant.clone(),
            tflop_per_s: b.tflop_per_s,
            median_ms: b.median_ms,
            cv_pct: b.cv_pct,
            verified: b.verified,
            failure: None,
        });
        if p != "fp32" {
            stored.push(record::roof_row(
                p,
                b.tflop_per_s.unwrap_or(0.0),
                &format!("{} at {}^3", b.variant, b.size),
                Metric::TflopPerS,
            ));
        }
    }
    Ok(Measured {
        found: TensorSweep { rows, best },
        rows: stored,
        notes,
    })
}

/// Roofs for a lesson run: memory (cuMemcpyDtoD) and FP32 measured now
/// (their rows to store); tensor and PCIe roofs from the newest rows `store`
/// holds for this GPU.
pub fn lesson_roofs(
    s: &Session,
    store: Option<&Store>,
    cancelled: Cancel<'_>,
) -> Result<Measured<Roofs>, BenchError> {
    let mut roofs = Roofs::default();
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let copy = roofs::copy_bandwidth(
        &s.gpu,
        256 << 20,
        s.meta.seed,
        Duration::from_millis(300),
        cancelled,
        s.nvml.clone(),
        Some(&["cuMemcpyDtoD"]),
    );
    match copy {
        Ok(c) => {
            if let Some(d) = c
                .iter()
                .find(|r| r.variant == "cuMemcpyDtoD" && r.status == Status::Ok)
            {
                let v = d.value.unwrap_or(0.0);
                let how = format!(
                    "cuMemcpyDtoD, 256 MiB, bytes read + written, median of {}",
                    d.repetitions
                );
                roofs.memory = Some(Roof {
                    value: v,
                    how: how.clone(),
                });
                rows.push(record::roof_row("memory", v, &how, Metric::GbPerS));
            }
        }
        Err(BenchError::Cancelled) => return Err(BenchError::Cancelled),
        Err(e) => notes.push(format!("memory roof not measured: {e}")),
    }
    match roofs::fma_peak(&s.gpu, false, Duration::from_millis(300), cancelled) {
        Ok((tf, _, how)) => {
            roofs.fp32 = Some(Roof {
                value: tf,
                how: how.clone(),
            });
            rows.push(record::roof_row("fp32", tf, &how, Metric::TflopPerS));
        }
        Err(BenchError::Cancelled) => return Err(BenchError::Cancelled),
        Err(e) => notes.push(format!("FP32 roof not measured: {e}")),
    }
    if let Some(store) = store
        && let Ok(stored) = record::latest_roofs(store, &s.gpu.info.uuid)
    {
        for (kind, value, when) in stored {
            let how = format!("stored by an earlier aisp_hw_* run ({when})");
            match kind.as_str() {
                "tf32" | "bf16" | "fp16" | "fp8" => {
                    roofs.tensor.insert(kind, Roof { value, how });
                }
                "pcie_h2d" => roofs.pcie_h2d = Some(Roof { value, how }),
                _ => {}
            }
        }
    }
    Ok(Measured {
        found: roofs,
        rows,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precisions_map_to_gemm_variants() {
        assert_eq!(precision_variants("bf16"), Some(&[5usize, 7][..]));
        let names: Vec<&str> = PRECISIONS
            .iter()
            .flat_map(|(_, v)| v.iter().map(|&i| GEMM.variants[i].name))
            .collect();
        assert_eq!(
            names,
            vec![
                "cublas_fp32",
                "cublas_tf32",
                "cublas_bf16",
                "cublaslt_bf16",
                "cublas_fp16",
                "cublaslt_fp8"
            ]
        );
        assert!(precision_variants("int4").is_none());
        // Each measured variant is named back by its precision.
        for (name, idx) in PRECISIONS {
            for &i in *idx {
                assert_eq!(precision_of(GEMM.variants[i].name), *name);
            }
        }
        assert_eq!(precision_of("not_a_gemm"), "");
    }
}
