//! The device-memory bandwidth test of one GPU: every copy method at each
//! buffer size, the best kernel against cuMemcpyDtoD, and the best figure
//! against the theoretical and datasheet bandwidth.

use std::time::Duration;

use aisp_base::Cancel;
use schemars::JsonSchema;
use serde::Serialize;

use super::lesson::{Status, VariantResult};
use super::session::Session;
use super::{BenchError, Measured, datasheet, roofs};

/// Memory kept free beside the two buffers of a copy.
const HEADROOM_BYTES: u64 = 256 << 20;

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
    // False here: whoever stores the rows says whether they were saved.
    pub saved: bool,
}

/// Measure every copy method at each of `sizes_mib` on the session's GPU,
/// `budget` of timed repetitions each; `progress` gets each size before it is
/// measured. The rows are every copy measured; the notes, the sizes skipped.
pub fn measure(
    s: &Session,
    sizes_mib: &[u64],
    budget: Duration,
    cancelled: Cancel<'_>,
    progress: &dyn Fn(u64),
) -> Result<Measured<DeviceBandwidth>, BenchError> {
    let ordinal = s.gpu.info.ordinal;
    let mut rows = Vec::new();
    let mut sizes = Vec::new();
    let mut notes = Vec::new();
    for &mib in sizes_mib {
        progress(mib);
        let bytes = mib << 20;
        if bytes * 2 + HEADROOM_BYTES > s.gpu.info.total_memory_bytes {
            notes.push(format!(
                "GPU {ordinal}: {mib} MiB skipped: two buffers would not fit in its memory"
            ));
            continue;
        }
        let copies = roofs::copy_bandwidth(
            &s.gpu,
            bytes,
            s.meta.seed,
            budget,
            cancelled,
            s.nvml.clone(),
            None,
        )?;
        sizes.push(size_result(bytes, &copies));
        rows.extend(copies);
    }
    Ok(Measured {
        found: device_summary(s, &rows, sizes),
        rows,
        notes,
    })
}

/// cuMemcpyDtoD's GB/s among one size's copies, and the fastest copy kernel that passed its check.
pub(crate) fn dtod_and_best(copies: &[VariantResult]) -> (Option<f64>, Option<&VariantResult>) {
    let dtod = copies
        .iter()
        .find(|r| r.variant == "cuMemcpyDtoD")
        .and_then(|r| r.value);
    let best = copies
        .iter()
        .filter(|r| r.variant != "cuMemcpyDtoD" && r.status == Status::Ok)
        .max_by(|a, b| a.value.unwrap_or(0.0).total_cmp(&b.value.unwrap_or(0.0)));
    (dtod, best)
}

/// One size's copies: cuMemcpyDtoD, the fastest kernel, every method.
fn size_result(bytes: u64, copies: &[VariantResult]) -> SizeResult {
    let (dtod, best) = dtod_and_best(copies);
    SizeResult {
        buffer_bytes: bytes,
        dtod_gb_per_s: dtod,
        best_kernel: best.map(|b| b.variant.clone()),
        best_kernel_gb_per_s: best.and_then(|b| b.value),
        best_kernel_pct_of_dtod: best.and_then(|b| b.pct_of_roof),
        methods: copies
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
    }
}

/// The best figure over every size against the theoretical and datasheet bandwidth.
fn device_summary(s: &Session, rows: &[VariantResult], sizes: Vec<SizeResult>) -> DeviceBandwidth {
    let theory = roofs::theoretical_memory(&s.gpu, s.nvml.as_deref());
    let datasheet = datasheet::lookup(&s.gpu.info.name).and_then(|d| d.memory_gb_per_s);
    let best = rows
        .iter()
        .filter_map(|r| r.value)
        .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
    DeviceBandwidth {
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
        sizes,
        run_id: s.meta.run_id.clone(),
        saved: false,
    }
}
