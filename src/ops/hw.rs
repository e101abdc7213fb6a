//! Operations of the `hw` domain: measured hardware roofs (memory, compute
//! per precision, PCIe, caches, tensor cores) and multi-GPU links (P2P, NCCL).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::benchmark::{Versions, bench_err, open_session, save, versions};
use super::errors::BenchErrorExt;
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, Hints, OpSpec, Operation};
use aisp_hw::bench::device::{DeviceInfo, Gpu};
use aisp_hw::bench::lesson::{self, Metric, RunEnv, Status, VariantResult};
use aisp_hw::bench::multi::{self, P2pPair};
use aisp_hw::bench::nccl::{self, AllReduceRow};
use aisp_hw::bench::record;
use aisp_hw::bench::roofs::{self, CacheLevels, CachePoint, PcieRow, Roofs};
use aisp_hw::bench::session;
use aisp_hw::bench::targets::gemm::Gemm;
use aisp_hw::bench::{BenchError, SizeClass, datasheet, libs, rng};

pub const OPERATIONS: &[&dyn DynOperation] = &[
    &Roofline,
    &Pcie,
    &Cache,
    &TensorCores,
    &P2p,
    &Nccl,
    &super::hw_host::Disk,
    &super::hw_host::Network,
    &super::hw_host::NetworkListen,
];

/// GEMM variant index per precision name (order of GEMM.variants).
const PRECISIONS: &[(&str, &[usize])] = &[
    ("fp32", &[3]),
    ("tf32", &[4]),
    ("bf16", &[5, 7]),
    ("fp16", &[6]),
    ("fp8", &[8]),
];

fn precision_variants(p: &str) -> Option<&'static [usize]> {
    PRECISIONS.iter().find(|(n, _)| *n == p).map(|(_, v)| *v)
}

fn bad_precision(p: &str) -> OpError {
    OpError::invalid_input(
        format!("unknown precision `{p}`"),
        "Use fp32 (cuBLAS SGEMM, no tensor cores), tf32, bf16, fp16 or fp8.",
    )
}

/// Run the cuBLAS GEMM variants of `indices` at size `dim`.
fn gemm_rows(
    ctx: &OpContext,
    gpu: &Gpu,
    nvml: Option<std::sync::Arc<nvml_wrapper::Nvml>>,
    dim: usize,
    indices: &[usize],
    budget: Duration,
    seed: u32,
) -> Result<Vec<VariantResult>, BenchError> {
    let mut g = Gemm::with_size(dim);
    let cancelled = || ctx.is_cancelled();
    let roofs = Roofs::default();
    let env = RunEnv {
        size: SizeClass::Large,
        budget,
        seed,
        cancelled: &cancelled,
        progress: &|m| ctx.progress(0.0, None, m),
        roofs: &roofs,
        datasheet: None,
        nvml,
    };
    lesson::run_lesson_where(&mut g, gpu, &env, &|i| indices.contains(&i))
}

// ---------------------------------------------------------------- roofline

pub struct Roofline;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RooflineInput {
    /// CUDA device ordinal (default 0).
    #[serde(default)]
    pub device: Option<u32>,
    /// Size of each copy buffer in MiB for the memory roof (default 1024; at least 64).
    #[serde(default)]
    pub copy_mib: Option<u64>,
    /// M = N = K of the tensor-core GEMMs (default 8192; a multiple of 64).
    #[serde(default)]
    pub gemm_size: Option<usize>,
    /// Measure the tensor-core precisions too (default true; false for memory and FMA only, ~5 s).
    #[serde(default)]
    pub tensor: Option<bool>,
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

#[derive(Debug, Serialize, JsonSchema)]
pub struct RooflineOutput {
    pub run_id: String,
    pub device: DeviceInfo,
    pub versions: Versions,
    pub memory: MemoryRoof,
    pub compute: Vec<ComputeRoof>,
    /// Every copy and GEMM variant measured, with checks and telemetry.
    pub results: Vec<VariantResult>,
    pub saved: bool,
    pub notes: Vec<String>,
}

impl Operation for Roofline {
    type Input = RooflineInput;
    type Output = RooflineOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Measured roofline",
        summary: "Measures device-memory bandwidth and compute peaks per precision on this GPU, and the ridge points between them.",
        description: "Measures this GPU's roofline: memory bandwidth and compute peaks per precision (FP64, FP32, TF32, BF16, FP16, FP8 GEMMs) and the ridge point, beside the datasheet; stored for later benchmarks. Needs a GPU; 20-40 s.",
        hints: Hints::MEASURES,
        needs_gpu: true,
        long_running: true,
        intents: &[
            "roofline",
            "peak memory bandwidth",
            "peak tflops",
            "ridge point",
            "measure hardware limits",
            "compute roof",
            "hardware ceilings",
        ],
        example: r#"{"gemm_size": 8192}"#,
        ..OpSpec::new("hw", "roofline")
    };

    fn run(&self, ctx: &OpContext, input: RooflineInput) -> Result<RooflineOutput, OpError> {
        let copy_mib = input.copy_mib.unwrap_or(1024);
        if copy_mib < 64 {
            return Err(OpError::invalid_input(
                format!("copy_mib must be at least 64, not {copy_mib}"),
                "Pass e.g. \"copy_mib\": 1024.",
            ));
        }
        let dim = input.gemm_size.unwrap_or(8192);
        if dim == 0 || !dim.is_multiple_of(64) || dim > 32768 {
            return Err(OpError::invalid_input(
                format!("gemm_size must be a multiple of 64 up to 32768, not {dim}"),
                "Pass e.g. \"gemm_size\": 8192.",
            ));
        }
        let _queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
        let seed = rng::fresh_seed();
        let s = open_session(ctx, input.device, SizeClass::Large, seed)?;
        let err = bench_err(ctx);
        let cancelled = || ctx.is_cancelled();
        let mut notes = Vec::new();
        let data = datasheet::lookup(&s.gpu.info.name);
        if data.is_none() {
            notes.push(datasheet::MISSING_NOTE.into());
        }
        ctx.progress(0.0, None, "memory bandwidth");
        let bytes = (copy_mib << 20).min(s.gpu.info.total_memory_bytes / 4);
        let mut results = roofs::copy_bandwidth(
            &s.gpu,
            bytes,
            seed,
            Duration::from_millis(700),
            &cancelled,
            s.nvml.clone(),
            None,
        )
        .map_err(&err)?;
        let dtod = results
            .iter()
            .find(|r| r.variant == "cuMemcpyDtoD")
            .and_then(|r| r.value);
        let best = results
            .iter()
            .filter(|r| r.variant != "cuMemcpyDtoD" && r.status == Status::Ok)
            .max_by(|a, b| a.value.unwrap_or(0.0).total_cmp(&b.value.unwrap_or(0.0)));
        let theory = roofs::theoretical_memory(&s.gpu, s.nvml.as_deref());
        let memory = MemoryRoof {
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
            datasheet_gb_per_s: data.as_ref().and_then(|d| d.memory_gb_per_s),
            dtod_pct_of_datasheet: match (dtod, data.as_ref().and_then(|d| d.memory_gb_per_s)) {
                (Some(d), Some(ds)) if ds > 0.0 => Some(d / ds * 100.0),
                _ => None,
            },
        };
        let mut roof_rows = Vec::new();
        if let Some(d) = dtod {
            roof_rows.push(record::roof_row(
                "memory",
                d,
                &format!("cuMemcpyDtoD, {} MiB", bytes >> 20),
                Metric::GbPerS,
            ));
        }
        let mut compute = Vec::new();
        let ridge = |tf: f64| dtod.map(|d| tf * 1e12 / (d * 1e9));
        for double in [true, false] {
            ctx.check_cancelled()?;
            ctx.progress(
                0.0,
                None,
                if double {
                    "FP64 FMA peak"
                } else {
                    "FP32 FMA peak"
                },
            );
            match roofs::fma_peak(&s.gpu, double, Duration::from_millis(500), &cancelled) {
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
                Err(BenchError::Cancelled) => return Err(ctx.stop_error()),
                Err(e) => notes.push(format!(
                    "{} FMA peak not measured: {e}",
                    if double { "FP64" } else { "FP32" }
                )),
            }
        }
        if input.tensor.unwrap_or(true) {
            ctx.progress(0.0, None, "tensor-core GEMMs");
            let indices: Vec<usize> = PRECISIONS
                .iter()
                .flat_map(|(_, v)| v.iter().copied())
                .collect();
            let rows = gemm_rows(
                ctx,
                &s.gpu,
                s.nvml.clone(),
                dim,
                &indices,
                Duration::from_millis(800),
                seed,
            )
            .map_err(&err)?;
            for (name, idx) in PRECISIONS {
                let best = rows
                    .iter()
                    .filter(|r| {
                        r.status == Status::Ok
                            && idx.iter().any(|&i| {
                                aisp_hw::bench::targets::GEMM.variants[i].name == r.variant
                            })
                    })
                    .max_by(|a, b| a.value.unwrap_or(0.0).total_cmp(&b.value.unwrap_or(0.0)));
                if let Some(b) = best.and_then(|b| b.value.map(|v| (v, b.variant.clone()))) {
                    let precision = if *name == "fp32" { "fp32_sgemm" } else { name };
                    let how = format!("{} at {dim}^3", b.1);
                    if *name != "fp32" {
                        roof_rows.push(record::roof_row(name, b.0, &how, Metric::TflopPerS));
                    }
                    let kind = aisp_hw::bench::targets::GEMM.variants[idx[0]].roof;
                    compute.push(ComputeRoof {
                        precision: precision.into(),
                        tflop_per_s: b.0,
                        how,
                        ridge_flop_per_byte: ridge(b.0),
                        datasheet_tflop_per_s: data.as_ref().and_then(|d| d.peak(kind)),
                    });
                }
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
        let mut all = roof_rows;
        all.extend(results.iter().cloned());
        let saved = save(ctx, &s, &all, &mut notes);
        Ok(RooflineOutput {
            run_id: s.meta.run_id.clone(),
            device: s.gpu.info.clone(),
            versions: versions(&s),
            memory,
            compute,
            results,
            saved,
            notes,
        })
    }
}

// ---------------------------------------------------------------- PCIe

pub struct Pcie;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PcieInput {
    /// CUDA device ordinal (default 0).
    #[serde(default)]
    pub device: Option<u32>,
    /// Transfer size in MiB (default 256, 1 to 8192).
    #[serde(default)]
    pub size_mib: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PcieOutput {
    pub run_id: String,
    pub device: DeviceInfo,
    pub rows: Vec<PcieRow>,
    /// PCIe link generation and width: the maximum the link supports and what it runs at now (NVML).
    pub link_max_gen: Option<u32>,
    pub link_max_width: Option<u32>,
    pub link_current_gen: Option<u32>,
    pub link_current_width: Option<u32>,
    /// Theoretical GB/s per direction at the maximum link.
    pub theoretical_gb_per_s: Option<f64>,
    pub saved: bool,
    pub notes: Vec<String>,
}

impl Operation for Pcie {
    type Input = PcieInput;
    type Output = PcieOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "PCIe bandwidth",
        summary: "Host-to-device and device-to-host bandwidth from pinned and pageable memory, one way and both ways at once.",
        description: "Measures copies between host and GPU: host-to-device and device-to-host from page-locked (pinned) \
and ordinary (pageable) memory, and pinned copies in both directions at once (their sum). Each transfer is checked \
(bytes arrive intact) before it is timed with CUDA events. Returns GB/s (10^9 bytes moved per second), timing spread, \
the PCIe link generation and width (maximum and current, from NVML) and the theoretical per-direction rate, so a GPU in \
a slot running at a lower generation or width shows up. The pinned H2D figure is stored as this GPU's PCIe roof. Takes \
the GPU to itself; about 5-10 s.",
        hints: Hints::MEASURES,
        needs_gpu: true,
        long_running: true,
        intents: &[
            "pcie bandwidth",
            "host to device bandwidth",
            "h2d d2h",
            "pinned vs pageable bandwidth",
            "transfer speed",
        ],
        example: r#"{"size_mib": 256}"#,
        ..OpSpec::new("hw", "pcie")
    };

    fn run(&self, ctx: &OpContext, input: PcieInput) -> Result<PcieOutput, OpError> {
        let mib = input.size_mib.unwrap_or(256);
        if !(1..=8192).contains(&mib) {
            return Err(OpError::invalid_input(
                format!("size_mib must be 1 to 8192, not {mib}"),
                "Pass e.g. \"size_mib\": 256.",
            ));
        }
        let _queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
        let s = open_session(ctx, input.device, SizeClass::Medium, rng::fresh_seed())?;
        let cancelled = || ctx.is_cancelled();
        let rows = roofs::pcie(
            &s.gpu,
            (mib << 20) as usize,
            Duration::from_millis(700),
            &cancelled,
            None,
        )
        .map_err(bench_err(ctx))?;
        let dev = s
            .nvml
            .as_deref()
            .and_then(|n| n.device_by_uuid(s.gpu.info.uuid.as_str()).ok());
        let (max_gen, max_width) = (
            dev.as_ref().and_then(|d| d.max_pcie_link_gen().ok()),
            dev.as_ref().and_then(|d| d.max_pcie_link_width().ok()),
        );
        let (cur_gen, cur_width) = (
            dev.as_ref().and_then(|d| d.current_pcie_link_gen().ok()),
            dev.as_ref().and_then(|d| d.current_pcie_link_width().ok()),
        );
        let theoretical = match (max_gen, max_width) {
            (Some(g), Some(w)) => roofs::pcie_theoretical_gb_per_s(g, w),
            _ => None,
        };
        let mut notes = Vec::new();
        if max_gen.is_none() {
            notes.push(
                "NVML did not report the PCIe link (no NVML, or an SXM/C2C-attached GPU)".into(),
            );
        }
        if let (Some(c), Some(m)) = (cur_gen, max_gen)
            && c < m
        {
            notes.push(format!("The link reads gen{c} now against gen{m} maximum; idle GPUs lower the link speed, so read this after load."));
        }
        let mut stored = Vec::new();
        if let Some(r) = rows
            .iter()
            .find(|r| r.direction == "h2d" && r.host_memory == "pinned")
        {
            stored.push(record::roof_row(
                "pcie_h2d",
                r.gb_per_s,
                &format!("pinned H2D, {mib} MiB"),
                Metric::GbPerS,
            ));
        }
        for r in &rows {
            let mut v = record::roof_row(
                &format!("{}_{}", r.direction, r.host_memory),
                r.gb_per_s,
                &format!("{mib} MiB"),
                Metric::GbPerS,
            );
            v.target = "pcie".into();
            v.median_ms = Some(r.median_ms);
            v.cv_pct = Some(r.cv_pct);
            stored.push(v);
        }
        let saved = save(ctx, &s, &stored, &mut notes);
        Ok(PcieOutput {
            run_id: s.meta.run_id.clone(),
            device: s.gpu.info.clone(),
            rows,
            link_max_gen: max_gen,
            link_max_width: max_width,
            link_current_gen: cur_gen,
            link_current_width: cur_width,
            theoretical_gb_per_s: theoretical,
            saved,
            notes,
        })
    }
}

// ---------------------------------------------------------------- cache

pub struct Cache;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheInput {
    /// CUDA device ordinal (default 0).
    #[serde(default)]
    pub device: Option<u32>,
    /// Largest working set in MiB (default 2048, at least 64; capped at a quarter of GPU memory).
    #[serde(default)]
    pub max_mib: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CacheOutput {
    pub run_id: String,
    pub device: DeviceInfo,
    /// L2 size from the device attributes.
    pub l2_bytes: u64,
    pub levels: CacheLevels,
    pub points: Vec<CachePoint>,
    pub saved: bool,
    pub notes: Vec<String>,
}

impl Operation for Cache {
    type Input = CacheInput;
    type Output = CacheOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Cache hierarchy bandwidth",
        summary: "Read bandwidth against working-set size: L1 per SM, L2, then device memory.",
        description: "Sweeps the working set of a read kernel (float4 loads) and reports GB/s at each size: per-SM \
working sets from 4 KiB to 1 MiB (every block rereads its buffer, so sets that fit in L1 are served from L1), then \
whole-GPU working sets from 1 MiB up to max_mib (shifted every pass so the data comes from L2 while it fits and from \
device memory beyond). Nothing is flushed between repetitions: this measures the caches on purpose. Returns every point, \
the L2 size, and the L1, L2 and device-memory levels read off the curve (medians of the points in each range). Reads \
only, so there is no output to verify; bytes counted are bytes read. Takes the GPU to itself; about 10-20 s.",
        hints: Hints::MEASURES,
        needs_gpu: true,
        long_running: true,
        intents: &[
            "cache bandwidth",
            "l2 bandwidth",
            "l1 bandwidth",
            "memory hierarchy",
            "working set size",
        ],
        example: r#"{"max_mib": 1024}"#,
        ..OpSpec::new("hw", "cache")
    };

    fn run(&self, ctx: &OpContext, input: CacheInput) -> Result<CacheOutput, OpError> {
        let max_mib = input.max_mib.unwrap_or(2048);
        if max_mib < 64 {
            return Err(OpError::invalid_input(
                format!("max_mib must be at least 64, not {max_mib}"),
                "Pass e.g. \"max_mib\": 2048.",
            ));
        }
        let _queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
        let s = open_session(ctx, input.device, SizeClass::Medium, rng::fresh_seed())?;
        let cancelled = || ctx.is_cancelled();
        let cap = (s.gpu.info.total_memory_bytes / 4).max(64 << 20);
        let max_bytes = (max_mib << 20)
            .min(cap)
            .next_power_of_two()
            .min(cap.next_power_of_two() / 2)
            .max(64 << 20);
        let progress = |m: &str| ctx.progress(0.0, None, m);
        let points = roofs::cache_sweep(
            &s.gpu,
            max_bytes,
            Duration::from_millis(150),
            &cancelled,
            &progress,
        )
        .map_err(bench_err(ctx))?;
        let levels = roofs::cache_levels(&points, s.gpu.info.l2_bytes);
        let mut notes = vec!["Read-only sweep: no output to check; each launch folds its loads into a value kept live.".to_string()];
        let mut rows = Vec::new();
        for p in &points {
            let mut r = record::roof_row(
                &format!("{}_{}", p.sweep, p.working_set_bytes),
                p.gb_per_s,
                &format!("{} bytes", p.working_set_bytes),
                Metric::GbPerS,
            );
            r.target = "cache".into();
            r.median_ms = Some(p.median_ms);
            r.cv_pct = Some(p.cv_pct);
            rows.push(r);
        }
        let saved = save(ctx, &s, &rows, &mut notes);
        Ok(CacheOutput {
            run_id: s.meta.run_id.clone(),
            device: s.gpu.info.clone(),
            l2_bytes: s.gpu.info.l2_bytes,
            levels,
            points,
            saved,
            notes,
        })
    }
}

// ---------------------------------------------------------------- tensor cores

pub struct TensorCores;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TensorCoresInput {
    /// CUDA device ordinal (default 0).
    #[serde(default)]
    pub device: Option<u32>,
    /// Square sizes M = N = K (default [1024, 2048, 4096, 8192]; multiples of 64, at most 32768).
    #[serde(default)]
    pub sizes: Option<Vec<usize>>,
    /// Precisions among fp32, tf32, bf16, fp16, fp8 (default all).
    #[serde(default)]
    pub precisions: Option<Vec<String>>,
    /// Seconds of timed repetitions per measurement (default 0.5).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 86400))]
    pub time_budget_s: Option<f64>,
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

#[derive(Debug, Serialize, JsonSchema)]
pub struct TensorCoresOutput {
    pub run_id: String,
    pub device: DeviceInfo,
    pub versions: Versions,
    pub rows: Vec<TensorRow>,
    /// Best TFLOP/s per precision over the sizes.
    pub best: Vec<TensorRow>,
    pub saved: bool,
    pub notes: Vec<String>,
}

impl Operation for TensorCores {
    type Input = TensorCoresInput;
    type Output = TensorCoresOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Tensor-core GEMM throughput",
        summary: "cuBLAS/cuBLASLt GEMM TFLOP/s per precision (FP32, TF32, BF16, FP16, FP8) and size.",
        description: "Runs square GEMMs through cuBLAS (cublasGemmEx) and cuBLASLt for each requested precision and \
size (default FP32 without tensor cores, TF32, BF16, FP16 and FP8 where the GPU has it, at 1024 to 8192), each checked \
on sampled entries against a float64 CPU reference before timing. Returns TFLOP/s (2·M·N·K per product) per precision \
and size, with the best per precision, so you can see how large a product must be to approach the peak and what each \
lower precision buys. Precisions the GPU lacks are reported with the reason. Takes the GPU to itself; about 1 s per \
precision and size at the default budget.",
        hints: Hints::MEASURES,
        needs_gpu: true,
        long_running: true,
        intents: &[
            "tensor core throughput",
            "tensor cores reach",
            "gemm tflops",
            "bf16 tflops",
            "fp8 gemm",
            "matmul speed per precision",
            "tflops per precision",
        ],
        example: r#"{"sizes": [4096, 8192], "precisions": ["bf16", "fp8"]}"#,
        ..OpSpec::new("hw", "tensor_cores")
    };

    fn run(&self, ctx: &OpContext, input: TensorCoresInput) -> Result<TensorCoresOutput, OpError> {
        let sizes = input.sizes.unwrap_or_else(|| vec![1024, 2048, 4096, 8192]);
        if sizes.is_empty()
            || sizes
                .iter()
                .any(|&d| d == 0 || !d.is_multiple_of(64) || d > 32768)
        {
            return Err(OpError::invalid_input(
                format!("sizes must be multiples of 64 up to 32768, not {sizes:?}"),
                "Pass e.g. \"sizes\": [4096, 8192].",
            ));
        }
        let precisions = input
            .precisions
            .unwrap_or_else(|| PRECISIONS.iter().map(|(n, _)| n.to_string()).collect());
        let mut indices = Vec::new();
        for p in &precisions {
            indices.extend_from_slice(precision_variants(p).ok_or_else(|| bad_precision(p))?);
        }
        let budget = Duration::from_secs_f64(input.time_budget_s.unwrap_or(0.5).clamp(0.05, 60.0));
        let _queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
        let seed = rng::fresh_seed();
        let s = open_session(ctx, input.device, SizeClass::Large, seed)?;
        let mut notes = Vec::new();
        let mut stored = Vec::new();
        let mut rows = Vec::new();
        for &dim in &sizes {
            ctx.check_cancelled()?;
            if (dim * dim * 4 * 5) as u64 > s.gpu.info.total_memory_bytes {
                notes.push(format!(
                    "size {dim} skipped: its buffers would not fit in GPU memory"
                ));
                continue;
            }
            ctx.progress(0.0, None, format!("GEMMs at {dim}^3"));
            let got = gemm_rows(ctx, &s.gpu, s.nvml.clone(), dim, &indices, budget, seed)
                .map_err(bench_err(ctx))?;
            for r in &got {
                let precision = PRECISIONS
                    .iter()
                    .find(|(_, idx)| {
                        idx.iter()
                            .any(|&i| aisp_hw::bench::targets::GEMM.variants[i].name == r.variant)
                    })
                    .map(|(n, _)| n.to_string())
                    .unwrap_or_default();
                rows.push(TensorRow {
                    precision,
                    size: dim,
                    variant: r.variant.clone(),
                    tflop_per_s: r.value,
                    median_ms: r.median_ms,
                    cv_pct: r.cv_pct,
                    verified: r.verified,
                    failure: r.failure.clone(),
                });
            }
            for mut r in got {
                r.target = "tensor_cores".into();
                r.variant = format!("{}_{dim}", r.variant);
                stored.push(r);
            }
        }
        let mut best: Vec<TensorRow> = Vec::new();
        for p in &precisions {
            if let Some(b) = rows
                .iter()
                .filter(|r| &r.precision == p && r.tflop_per_s.is_some())
                .max_by(|a, b| {
                    a.tflop_per_s
                        .unwrap_or(0.0)
                        .total_cmp(&b.tflop_per_s.unwrap_or(0.0))
                })
            {
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
        }
        let saved = save(ctx, &s, &stored, &mut notes);
        Ok(TensorCoresOutput {
            run_id: s.meta.run_id.clone(),
            device: s.gpu.info.clone(),
            versions: versions(&s),
            rows,
            best,
            saved,
            notes,
        })
    }
}

// ---------------------------------------------------------------- P2P

fn pick_devices(
    ctx: &OpContext,
    devices: Option<Vec<u32>>,
    tool: &str,
) -> Result<Vec<usize>, OpError> {
    super::benchmark::require_gpu(ctx)?;
    let n = session::device_count().map_err(|e| e.into_op_error(tool))?;
    let list: Vec<usize> = match devices {
        Some(d) => {
            let mut v: Vec<usize> = d.into_iter().map(|x| x as usize).collect();
            v.sort_unstable();
            v.dedup();
            if let Some(bad) = v.iter().find(|&&x| x >= n) {
                return Err(OpError::invalid_input(
                    format!("device {bad} does not exist: CUDA sees {n} device(s)"),
                    "Pass CUDA ordinals from 0.",
                ));
            }
            v
        }
        None => (0..n).collect(),
    };
    if list.len() < 2 {
        return Err(OpError::unsupported(
            format!(
                "{tool} needs at least two GPUs; {} selected (CUDA sees {n})",
                list.len()
            ),
            "Run it on a multi-GPU host, or pass two or more CUDA ordinals in `devices`.",
        ));
    }
    Ok(list)
}

pub struct P2p;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct P2pInput {
    /// CUDA ordinals to include (default all; at least two).
    #[serde(default)]
    pub devices: Option<Vec<u32>>,
    /// Bytes per bandwidth copy in MiB (default 256, 1 to 4096).
    #[serde(default)]
    pub size_mib: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct P2pOutput {
    pub devices: Vec<DeviceInfo>,
    pub pairs: Vec<P2pPair>,
    /// Unidirectional GB/s as a matrix: rows are sources, columns destinations (null on the diagonal).
    pub unidirectional_matrix: Vec<Vec<Option<f64>>>,
    pub latency_us_matrix: Vec<Vec<Option<f64>>>,
    pub notes: Vec<String>,
}

impl Operation for P2p {
    type Input = P2pInput;
    type Output = P2pOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU peer-to-peer bandwidth and latency",
        summary: "For every pair of GPUs: peer access, copy bandwidth one way and both ways, and small-copy latency.",
        description: "Measures copies between every ordered pair of GPUs on this host (cuMemcpyPeerAsync after enabling \
peer access where cuDeviceCanAccessPeer allows it; otherwise the driver stages through host memory, which the result \
shows): unidirectional GB/s (events on the source's stream), bidirectional GB/s (both directions at once, the sum), and \
the latency of a 4-byte copy (100 back to back). Each copy is checked once. Returns the pairs and N×N matrices, the \
numbers behind `nvidia-smi topo -m`'s NV#/PIX/SYS labels. Needs two or more GPUs; takes them to itself; about 1-2 s per \
pair.",
        hints: Hints::MEASURES,
        needs_gpu: true,
        long_running: true,
        intents: &[
            "p2p bandwidth",
            "peer to peer bandwidth",
            "gpu to gpu copy",
            "peer to peer latency",
            "copy between gpus",
            "multi gpu bandwidth",
        ],
        example: r#"{"size_mib": 256}"#,
        ..OpSpec::new("hw", "p2p")
    };

    fn run(&self, ctx: &OpContext, input: P2pInput) -> Result<P2pOutput, OpError> {
        let mib = input.size_mib.unwrap_or(256);
        if !(1..=4096).contains(&mib) {
            return Err(OpError::invalid_input(
                format!("size_mib must be 1 to 4096, not {mib}"),
                "Pass e.g. \"size_mib\": 256.",
            ));
        }
        let tool = ctx.tool().to_string();
        let ordinals = pick_devices(ctx, input.devices, &tool)?;
        if !libs::nvrtc_available() {
            return Err(BenchError::NoNvrtc.into_op_error(&tool));
        }
        let _queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
        let cache = ctx.app().config.cache_dir();
        let gpus: Vec<Gpu> = ordinals
            .iter()
            .map(|&o| Gpu::open(o, &cache))
            .collect::<Result<_, _>>()
            .map_err(bench_err(ctx))?;
        let cancelled = || ctx.is_cancelled();
        let progress = |m: &str| ctx.progress(0.0, None, m);
        let pairs = multi::p2p_matrix(
            &gpus,
            (mib << 20) as usize,
            Duration::from_millis(400),
            &cancelled,
            &progress,
        )
        .map_err(bench_err(ctx))?;
        let n = gpus.len();
        let pos = |ord: usize| ordinals.iter().position(|&o| o == ord).unwrap_or(0);
        let mut uni = vec![vec![None; n]; n];
        let mut lat = vec![vec![None; n]; n];
        for p in &pairs {
            uni[pos(p.src)][pos(p.dst)] = Some(p.unidirectional_gb_per_s);
            lat[pos(p.src)][pos(p.dst)] = Some(p.latency_us);
        }
        let mut notes = Vec::new();
        if pairs.iter().any(|p| !p.peer_access) {
            notes.push("Some pairs have no peer access: their copies are staged through host memory by the driver.".into());
        }
        Ok(P2pOutput {
            devices: gpus.iter().map(|g| g.info.clone()).collect(),
            pairs,
            unidirectional_matrix: uni,
            latency_us_matrix: lat,
            notes,
        })
    }
}

// ---------------------------------------------------------------- NCCL

pub struct Nccl;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NcclInput {
    /// CUDA ordinals to include (default all; at least two).
    #[serde(default)]
    pub devices: Option<Vec<u32>>,
    /// Smallest message in bytes (default 65536).
    #[serde(default)]
    pub min_bytes: Option<u64>,
    /// Largest message in bytes (default 1073741824 = 1 GiB, at most 8 GiB).
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Step between sizes as a factor (default 4, at least 2).
    #[serde(default)]
    pub step_factor: Option<u64>,
    /// Seconds of timed repetitions per size (default 0.3).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 86400))]
    pub time_budget_s: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NcclOutput {
    pub devices: Vec<usize>,
    pub nccl_version: String,
    pub nccl_library: String,
    pub rows: Vec<AllReduceRow>,
    /// Peak bus bandwidth over the sizes.
    pub peak_busbw_gb_per_s: Option<f64>,
    pub nvls_enable_env: Option<String>,
    pub notes: Vec<String>,
}

/// Message sizes from min to max multiplying by step (each a multiple of 4 bytes).
pub fn message_sizes(min: u64, max: u64, step: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = min.max(4) / 4 * 4;
    while s <= max {
        v.push(s);
        s = s.saturating_mul(step.max(2));
    }
    v
}

impl Operation for Nccl {
    type Input = NcclInput;
    type Output = NcclOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "NCCL all-reduce bandwidth",
        summary: "NCCL all-reduce (sum, float32) over the GPUs of this host, one thread per GPU: time, algbw and busbw per message size.",
        description: "Runs NCCL all-reduce across the selected GPUs of this host (one thread and communicator rank per \
GPU) for message sizes from min_bytes to max_bytes, checks the sums on sampled elements of every rank, and times \
back-to-back all-reduces with CUDA events. Reports per size the slowest rank's time per all-reduce, algbw = bytes / \
time and busbw = algbw × 2(n−1)/n, as nccl-tests defines them (GB = 10^9 bytes), and the peak busbw. libnccl is found \
through AISP_NCCL_LIB (or config nccl_lib), the loader path, or PyTorch's nvidia-nccl wheel in Python's site-packages. \
NCCL's own environment applies (e.g. NCCL_NVLS_ENABLE, NCCL_ALGO). Needs two or more GPUs; about 0.5 s per size.",
        hints: Hints::MEASURES,
        needs_gpu: true,
        long_running: true,
        intents: &[
            "nccl bandwidth",
            "all-reduce bandwidth",
            "allreduce bandwidth",
            "busbw",
            "nccl-tests",
            "collective performance",
            "measure nccl",
        ],
        example: r#"{"min_bytes": 1048576, "max_bytes": 1073741824}"#,
        ..OpSpec::new("hw", "nccl")
    };

    fn run(&self, ctx: &OpContext, input: NcclInput) -> Result<NcclOutput, OpError> {
        let min = input.min_bytes.unwrap_or(64 << 10);
        let max = input.max_bytes.unwrap_or(1 << 30);
        let step = input.step_factor.unwrap_or(4);
        if min == 0 || max < min || max > (8u64 << 30) || step < 2 {
            return Err(OpError::invalid_input(
                format!(
                    "need 0 < min_bytes <= max_bytes <= 8 GiB and step_factor >= 2 (got {min}, {max}, {step})"
                ),
                "Pass e.g. \"min_bytes\": 65536, \"max_bytes\": 1073741824, \"step_factor\": 4.",
            ));
        }
        let budget = Duration::from_secs_f64(input.time_budget_s.unwrap_or(0.3).clamp(0.05, 60.0));
        let tool = ctx.tool().to_string();
        let ordinals = pick_devices(ctx, input.devices, &tool)?;
        if !libs::nvrtc_available() {
            return Err(BenchError::NoNvrtc.into_op_error(&tool));
        }
        let path = libs::find_nccl(ctx.app().config.nccl_lib.as_deref()).ok_or_else(|| {
            BenchError::NoLibrary("NCCL (libnccl.so.2)".into()).into_op_error(&tool)
        })?;
        let lib = nccl::Nccl::load(&path).map_err(|e| e.into_op_error(&tool))?;
        let version = lib.version().map_err(|e| e.into_op_error(&tool))?;
        let _queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
        let sizes = message_sizes(min, max, step);
        let cancel = ctx.cancellation_token().clone();
        let deadline = ctx.deadline();
        let cancelled = move || {
            cancel.is_cancelled() || deadline.is_some_and(|d| std::time::Instant::now() >= d)
        };
        let total = sizes.len() as f64;
        let done = std::sync::atomic::AtomicUsize::new(0);
        let progress = |m: &str| {
            let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            ctx.progress(k as f64, Some(total), m);
        };
        let rows = nccl::allreduce_sweep(
            &lib,
            &ordinals,
            &ctx.app().config.cache_dir(),
            &sizes,
            budget,
            &cancelled,
            &progress,
        )
        .map_err(bench_err(ctx))?;
        let mut notes = Vec::new();
        if rows.iter().any(|r| !r.verified) {
            notes.push("Some sizes returned wrong sums on sampled elements: treat their bandwidth as invalid.".into());
        }
        Ok(NcclOutput {
            devices: ordinals,
            nccl_version: version,
            nccl_library: lib.path.clone(),
            peak_busbw_gb_per_s: rows
                .iter()
                .filter(|r| r.verified)
                .map(|r| r.busbw_gb_per_s)
                .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b)))),
            rows,
            nvls_enable_env: std::env::var("NCCL_NVLS_ENABLE").ok(),
            notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_message_sizes() {
        assert_eq!(
            message_sizes(65536, 1 << 20, 4),
            vec![65536, 262144, 1048576]
        );
        assert_eq!(message_sizes(6, 20, 2), vec![4, 8, 16]);
        assert!(message_sizes(10, 5, 2).is_empty());
    }

    #[test]
    fn precisions_map_to_gemm_variants() {
        assert_eq!(precision_variants("bf16"), Some(&[5usize, 7][..]));
        let names: Vec<&str> = PRECISIONS
            .iter()
            .flat_map(|(_, v)| {
                v.iter()
                    .map(|&i| aisp_hw::bench::targets::GEMM.variants[i].name)
            })
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
        assert_eq!(
            bad_precision("int4").kind,
            crate::error::ErrorKind::InvalidInput
        );
    }
}
