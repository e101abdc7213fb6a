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
use aisp_hw::bench::lesson::{Metric, VariantResult};
use aisp_hw::bench::multi::{self, P2pPair};
use aisp_hw::bench::nccl::{self, AllReduceRow};
use aisp_hw::bench::record;
use aisp_hw::bench::roofline::{self, ComputeRoof, MemoryRoof, RooflineOptions, TensorRow};
use aisp_hw::bench::roofs::{self, CacheLevels, CachePoint, PcieRow};
use aisp_hw::bench::session;
use aisp_hw::bench::{BenchError, DeviceInfo, Gpu, SizeClass, fresh_seed, libs};

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

fn bad_precision(p: &str) -> OpError {
    OpError::invalid_input(
        format!("unknown precision `{p}`"),
        "Use fp32 (cuBLAS SGEMM, no tensor cores), tf32, bf16, fp16 or fp8.",
    )
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
        let s = open_session(ctx, input.device, SizeClass::Large, fresh_seed())?;
        let opts = RooflineOptions {
            copy_mib,
            gemm_size: dim,
            tensor: input.tensor.unwrap_or(true),
        };
        let r = roofline::measure(&s, opts, &|| ctx.is_cancelled(), &|m| {
            ctx.progress(0.0, None, m)
        })
        .map_err(bench_err(ctx))?;
        let mut notes = r.notes;
        let saved = save(ctx, &s, &r.rows, &mut notes);
        Ok(RooflineOutput {
            run_id: s.meta.run_id.clone(),
            device: s.gpu.info.clone(),
            versions: versions(&s),
            memory: r.found.memory,
            compute: r.found.compute,
            results: r.found.results,
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
        let s = open_session(ctx, input.device, SizeClass::Medium, fresh_seed())?;
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
        let s = open_session(ctx, input.device, SizeClass::Medium, fresh_seed())?;
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
        let precisions = input.precisions.unwrap_or_else(|| {
            roofline::PRECISIONS
                .iter()
                .map(|(n, _)| n.to_string())
                .collect()
        });
        if let Some(p) = precisions
            .iter()
            .find(|p| roofline::precision_variants(p).is_none())
        {
            return Err(bad_precision(p));
        }
        let budget = Duration::from_secs_f64(input.time_budget_s.unwrap_or(0.5).clamp(0.05, 60.0));
        let _queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
        let s = open_session(ctx, input.device, SizeClass::Large, fresh_seed())?;
        let sweep = roofline::tensor_sweep(
            &s,
            &sizes,
            &precisions,
            budget,
            &|| ctx.is_cancelled(),
            &|m| ctx.progress(0.0, None, m),
        )
        .map_err(bench_err(ctx))?;
        let mut notes = sweep.notes;
        let saved = save(ctx, &s, &sweep.rows, &mut notes);
        Ok(TensorCoresOutput {
            run_id: s.meta.run_id.clone(),
            device: s.gpu.info.clone(),
            versions: versions(&s),
            rows: sweep.found.rows,
            best: sweep.found.best,
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
    fn unknown_precisions_are_invalid_input() {
        assert_eq!(
            bad_precision("int4").kind,
            crate::error::ErrorKind::InvalidInput
        );
    }
}
