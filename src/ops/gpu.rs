//! Operations of the `gpu` domain.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, Hints, OpSpec, Operation};

pub const OPERATIONS: &[&dyn DynOperation] = &[
    // One entry per line, so parallel branches merge cleanly.
    &Bandwidth,
];

// ---------------------------------------------------------------- bandwidth

pub struct Bandwidth;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BandwidthInput {
    /// CUDA device ordinal; default every GPU, one after another.
    #[serde(default)]
    pub device: Option<u32>,
    /// Buffer sizes in MiB (default [64, 256, 1024]; each 16 to 16384).
    #[serde(default)]
    pub sizes_mib: Option<Vec<u64>>,
    /// Seconds of timed repetitions per copy method and size (default 0.5).
    #[serde(default)]
    pub time_budget_s: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CopyMethod {
    /// `cuMemcpyDtoD` or a copy kernel (`copy_f32`, `copy_f32x4`, `copy_f32x4_unroll4`, `copy_f32x4_stream`).
    pub method: String,
    pub gb_per_s: Option<f64>,
    pub median_ms: Option<f64>,
    pub cv_pct: Option<f64>,
    pub repetitions: u32,
    /// The copy was checked element by element before it was timed.
    pub verified: bool,
    pub pct_of_dtod: Option<f64>,
    pub failure: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SizeResult {
    /// Bytes in each buffer; GB/s counts bytes read + written (2x this per copy).
    pub buffer_bytes: u64,
    pub dtod_gb_per_s: Option<f64>,
    pub best_kernel: Option<String>,
    pub best_kernel_gb_per_s: Option<f64>,
    /// The best kernel as a share of cuMemcpyDtoD in the same run (the bar: at least 95%).
    pub best_kernel_pct_of_dtod: Option<f64>,
    pub methods: Vec<CopyMethod>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DeviceBandwidth {
    pub device: usize,
    pub name: String,
    pub uuid: String,
    /// Memory clock × 2 (double data rate) × bus width, from NVML (or CUDA attributes).
    pub theoretical_gb_per_s: Option<f64>,
    pub theoretical_source: Option<String>,
    /// The best measured figure (any method, any size).
    pub best_gb_per_s: Option<f64>,
    pub best_pct_of_theoretical: Option<f64>,
    /// The vendor's figure from the GPU catalog, when it knows this GPU.
    pub datasheet_gb_per_s: Option<f64>,
    pub best_pct_of_datasheet: Option<f64>,
    pub sizes: Vec<SizeResult>,
    pub run_id: String,
    pub saved: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct BandwidthOutput {
    pub devices: Vec<DeviceBandwidth>,
    pub notes: Vec<String>,
}

impl Operation for Bandwidth {
    type Input = BandwidthInput;
    type Output = BandwidthOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU memory bandwidth test",
        summary: "Device-memory bandwidth: copy kernels and cuMemcpyDtoD at several sizes, against the theoretical figure.",
        description: "Measures device-memory bandwidth on each GPU (or `device`): for every size (default 64, 256 and \
1024 MiB buffers) a scalar, a float4, an unrolled float4 and a streaming float4 copy kernel (compiled at run time by \
NVRTC) and cuMemcpyDtoD, each checked element by element and then timed with CUDA events (median of repetitions, L2 \
flushed between them). GB/s counts bytes read + written with GB = 10^9. Returns per size each method's GB/s, the best \
kernel as a share of cuMemcpyDtoD in the same run, and the best figure against the theoretical bandwidth from NVML's \
memory clock × bus width. Results are stored (aisp_benchmark_history, target copy_bandwidth). Takes the GPU to itself; \
about 5-10 s per GPU.",
        hints: Hints::MEASURES,
        needs_gpu: true,
        long_running: true,
        intents: &[
            "memory bandwidth",
            "hbm bandwidth",
            "bandwidth test",
            "memcpy bandwidth",
            "how fast is gpu memory",
        ],
        example: r#"{"device": 0, "sizes_mib": [256, 1024]}"#,
        ..OpSpec::new("gpu", "bandwidth")
    };

    fn run(&self, ctx: &OpContext, input: BandwidthInput) -> Result<BandwidthOutput, OpError> {
        use crate::bench::lesson::Status;
        use crate::bench::{SizeClass, rng, roofs, session};
        let sizes = input.sizes_mib.unwrap_or_else(|| vec![64, 256, 1024]);
        if sizes.is_empty() || sizes.iter().any(|s| !(16..=16384).contains(s)) {
            return Err(OpError::invalid_input(
                format!("sizes_mib must list sizes from 16 to 16384 MiB, not {sizes:?}"),
                "Pass e.g. \"sizes_mib\": [256, 1024].",
            ));
        }
        let budget = input.time_budget_s.unwrap_or(0.5);
        if !(0.05..=60.0).contains(&budget) {
            return Err(OpError::invalid_input(
                format!("time_budget_s must be 0.05 to 60, not {budget}"),
                "Pass e.g. \"time_budget_s\": 0.5.",
            ));
        }
        let tool = ctx.tool().to_string();
        let ordinals: Vec<u32> = match input.device {
            Some(d) => vec![d],
            None => {
                (0..session::device_count().map_err(|e| e.into_op_error(&tool))? as u32).collect()
            }
        };
        let _queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
        let cancelled = || ctx.is_cancelled();
        let mut notes = Vec::new();
        let mut devices = Vec::new();
        let steps = (ordinals.len() * sizes.len()) as f64;
        let mut step = 0.0;
        for ord in ordinals {
            let seed = rng::fresh_seed();
            let s = super::benchmark::open_session(ctx, Some(ord), SizeClass::Medium, seed)?;
            let mut all_rows = Vec::new();
            let mut per_size = Vec::new();
            for &mib in &sizes {
                ctx.progress(step, Some(steps), format!("GPU {ord}: {mib} MiB"));
                step += 1.0;
                let bytes = mib << 20;
                if bytes * 2 + (256 << 20) > s.gpu.info.total_memory_bytes {
                    notes.push(format!(
                        "GPU {ord}: {mib} MiB skipped: two buffers would not fit in its memory"
                    ));
                    continue;
                }
                let rows = roofs::copy_bandwidth(
                    &s.gpu,
                    bytes,
                    seed,
                    Duration::from_secs_f64(budget),
                    &cancelled,
                    s.nvml.clone(),
                    None,
                )
                .map_err(super::benchmark::bench_err(ctx))?;
                let dtod = rows
                    .iter()
                    .find(|r| r.variant == "cuMemcpyDtoD")
                    .and_then(|r| r.value);
                let best = rows
                    .iter()
                    .filter(|r| r.variant != "cuMemcpyDtoD" && r.status == Status::Ok)
                    .max_by(|a, b| a.value.unwrap_or(0.0).total_cmp(&b.value.unwrap_or(0.0)));
                per_size.push(SizeResult {
                    buffer_bytes: bytes,
                    dtod_gb_per_s: dtod,
                    best_kernel: best.map(|b| b.variant.clone()),
                    best_kernel_gb_per_s: best.and_then(|b| b.value),
                    best_kernel_pct_of_dtod: best.and_then(|b| b.pct_of_roof),
                    methods: rows
                        .iter()
                        .map(|r| CopyMethod {
                            method: r.variant.clone(),
                            gb_per_s: r.value,
                            median_ms: r.median_ms,
                            cv_pct: r.cv_pct,
                            repetitions: r.repetitions,
                            verified: r.verified,
                            pct_of_dtod: r.pct_of_roof,
                            failure: r.failure.clone(),
                        })
                        .collect(),
                });
                all_rows.extend(rows);
            }
            let theory = roofs::theoretical_memory(&s.gpu, s.nvml.as_deref());
            let datasheet =
                crate::bench::datasheet::lookup(&s.gpu.info.name).and_then(|d| d.memory_gb_per_s);
            let best = all_rows
                .iter()
                .filter_map(|r| r.value)
                .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
            let saved = super::benchmark::save(ctx, &s, &all_rows, &mut notes);
            devices.push(DeviceBandwidth {
                device: s.gpu.info.ordinal,
                name: s.gpu.info.name.clone(),
                uuid: s.gpu.info.uuid.clone(),
                theoretical_gb_per_s: theory.as_ref().map(|t| t.0),
                theoretical_source: theory.as_ref().map(|t| t.1.clone()),
                best_gb_per_s: best,
                best_pct_of_theoretical: match (best, &theory) {
                    (Some(b), Some((t, _))) => Some(b / t * 100.0),
                    _ => None,
                },
                datasheet_gb_per_s: datasheet,
                best_pct_of_datasheet: match (best, datasheet) {
                    (Some(b), Some(d)) if d > 0.0 => Some(b / d * 100.0),
                    _ => None,
                },
                sizes: per_size,
                run_id: s.meta.run_id.clone(),
                saved,
            });
        }
        Ok(BandwidthOutput { devices, notes })
    }
}
