//! The roofs an estimate uses: datasheet peaks from the GPU catalog, replaced
//! by measured roofs from benchmark history when this machine measured that
//! GPU (a measured HBM copy or GEMM rate is what the hardware really gives).
//!
//! A benchmark row counts as a measured roof when it is verified, its
//! `device_name` maps to the catalog GPU, and its metric says what it is:
//! - memory bandwidth: metric in GB/s (`gb_per_s`, `gb/s`, `gbps`) on a target
//!   or variant about device memory (`hbm`, `dram`, `memory`, `mem`, `copy`,
//!   `triad`, `stream`, `bandwidth`) and not a link (`pcie`, `nvlink`, `p2p`,
//!   `h2d`, `d2h`, `nccl`);
//! - compute: metric in TFLOP/s (`tflop_per_s`, `tflops`) whose
//!   target/variant/metric names the precision (`bf16`, `fp16`, `fp8`, `tf32`,
//!   `fp32`, `int8`).
//!
//! The benchmark domain records its roofs exactly so: target `roof`, variant
//! `memory` (cuMemcpyDtoD, GB/s) or a precision (`bf16`, `fp32`, ... in
//! TFLOP/s); lesson rows such as `copy_bandwidth` also qualify.
//!
//! The best verified value wins (a roof is what was reached, not the average).

use schemars::JsonSchema;
use serde::Serialize;

use aisp_knowledge::dtype::Precision;
use aisp_knowledge::gpus::{self, Gpu};
use aisp_store::Store;

/// One roof and where it came from.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Roof {
    pub value: f64,
    /// `datasheet` or `measured`.
    pub origin: String,
    /// URL of the datasheet, or the benchmark row (run id, target, variant, time).
    pub source: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Peaks {
    pub gpu_id: String,
    /// Device-memory bandwidth, GB/s.
    pub memory_gb_per_s: Roof,
    /// Dense tensor peak at `precision`, TFLOP/s.
    pub tflops: Roof,
    pub precision: Precision,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PeakError {
    #[error(
        "the catalog has no public {what} figure for {gpu} ({note}); pass it explicitly or measure it with aisp's hw tools"
    )]
    Missing {
        gpu: String,
        what: String,
        note: String,
    },
}

#[derive(Debug, Clone)]
struct MeasuredRow {
    device_name: String,
    run_id: String,
    created_at: String,
    text: String,
    metric: String,
    value: f64,
}

fn measured_rows(store: &Store) -> Vec<MeasuredRow> {
    let conn = store.conn();
    let Ok(mut stmt) = conn.prepare(
        "SELECT device_name, run_id, created_at, target, variant, metric, value
         FROM benchmark_results
         WHERE verified = 1 AND value IS NOT NULL AND metric IS NOT NULL AND device_name IS NOT NULL",
    ) else {
        return Vec::new();
    };
    let rows = stmt.query_map([], |r| {
        let target: String = r.get(3)?;
        let variant: String = r.get(4)?;
        let metric: String = r.get(5)?;
        Ok(MeasuredRow {
            device_name: r.get(0)?,
            run_id: r.get(1)?,
            created_at: r.get(2)?,
            text: format!("{target} {variant} {metric}").to_ascii_lowercase(),
            metric: metric.to_ascii_lowercase(),
            value: r.get(6)?,
        })
    });
    match rows {
        Ok(rows) => rows.filter_map(Result::ok).collect(),
        Err(e) => {
            tracing::warn!("reading benchmark history for roofs failed: {e}");
            Vec::new()
        }
    }
}

fn is_memory_roof(r: &MeasuredRow) -> bool {
    let unit = ["gb_per_s", "gb/s", "gbps"]
        .iter()
        .any(|u| r.metric.contains(u));
    let mem = [
        "hbm",
        "dram",
        "memory",
        "mem",
        "copy",
        "triad",
        "stream",
        "bandwidth",
    ]
    .iter()
    .any(|w| r.text.contains(w));
    let link = [
        "pcie",
        "nvlink",
        "p2p",
        "h2d",
        "d2h",
        "nccl",
        "allreduce",
        "all_reduce",
    ]
    .iter()
    .any(|w| r.text.contains(w));
    unit && mem && !link
}

fn is_compute_roof(r: &MeasuredRow, p: Precision) -> bool {
    r.metric.contains("tflop") && r.text.contains(p.as_str())
}

fn best(rows: &[MeasuredRow], keep: impl Fn(&MeasuredRow) -> bool) -> Option<Roof> {
    rows.iter()
        .filter(|r| keep(r))
        .max_by(|a, b| a.value.total_cmp(&b.value))
        .map(|r| Roof {
            value: r.value,
            origin: "measured".into(),
            source: format!(
                "benchmark_results run {} ({}) on {}",
                r.run_id, r.created_at, r.device_name
            ),
        })
}

/// Datasheet roofs for `gpu` at `precision`, replaced by measured roofs from
/// `store` when it holds verified ones for the same GPU model.
pub fn resolve(gpu: &Gpu, precision: Precision, store: Option<&Store>) -> Result<Peaks, PeakError> {
    let bw = gpu
        .memory_bandwidth_gb_per_s
        .value
        .ok_or_else(|| PeakError::Missing {
            gpu: gpu.id.clone(),
            what: "memory bandwidth".into(),
            note: gpu
                .memory_bandwidth_gb_per_s
                .note
                .clone()
                .unwrap_or_default(),
        })?;
    let fig = gpu.peak_figure(precision);
    let tf = fig.value.ok_or_else(|| PeakError::Missing {
        gpu: gpu.id.clone(),
        what: format!("{} peak", precision.as_str()),
        note: fig.note.clone().unwrap_or_default(),
    });
    let rows: Vec<MeasuredRow> = store
        .map(measured_rows)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| gpus::match_device_name(&r.device_name).is_some_and(|g| g.id == gpu.id))
        .collect();
    let memory = best(&rows, is_memory_roof).unwrap_or(Roof {
        value: bw,
        origin: "datasheet".into(),
        source: gpu
            .memory_bandwidth_gb_per_s
            .source_url
            .clone()
            .unwrap_or_default(),
    });
    let tflops = match best(&rows, |r| is_compute_roof(r, precision)) {
        Some(m) => m,
        None => Roof {
            value: tf?,
            origin: "datasheet".into(),
            source: fig.source_url.clone().unwrap_or_default(),
        },
    };
    Ok(Peaks {
        gpu_id: gpu.id.clone(),
        memory_gb_per_s: memory,
        tflops,
        precision,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(
        store: &Store,
        device: &str,
        target: &str,
        variant: &str,
        metric: &str,
        value: f64,
        verified: i64,
    ) {
        store
            .conn()
            .execute(
                "INSERT INTO benchmark_results (run_id, created_at, target, variant, role, verified, metric, value, device_name)
                 VALUES ('run1', '2026-01-01T00:00:00Z', ?1, ?2, 'optimized', ?3, ?4, ?5, ?6)",
                rusqlite::params![target, variant, verified, metric, value, device],
            )
            .unwrap();
    }

    #[test]
    fn measured_roofs_override_the_datasheet_for_the_same_gpu() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let h100 = gpus::by_id("h100-sxm").unwrap();
        let p = resolve(h100, Precision::Bf16, Some(&store)).unwrap();
        assert_eq!(
            (p.memory_gb_per_s.value, p.memory_gb_per_s.origin.as_str()),
            (3350.0, "datasheet")
        );
        insert(
            &store,
            "NVIDIA H100 80GB HBM3",
            "hw_memory_bandwidth",
            "copy",
            "gb_per_s",
            2950.5,
            1,
        );
        insert(
            &store,
            "NVIDIA H100 80GB HBM3",
            "hw_memory_bandwidth",
            "copy",
            "gb_per_s",
            3100.0,
            0,
        ); // unverified
        insert(
            &store,
            "NVIDIA H100 80GB HBM3",
            "hw_pcie_bandwidth",
            "h2d",
            "gb_per_s",
            55.0,
            1,
        ); // a link, not HBM
        insert(
            &store,
            "NVIDIA H100 80GB HBM3",
            "hw_tensor_core",
            "bf16_gemm",
            "tflops",
            712.25,
            1,
        );
        insert(
            &store,
            "NVIDIA A100-SXM4-80GB",
            "hw_memory_bandwidth",
            "copy",
            "gb_per_s",
            1800.0,
            1,
        ); // another GPU
        let p = resolve(h100, Precision::Bf16, Some(&store)).unwrap();
        assert_eq!(
            (p.memory_gb_per_s.value, p.memory_gb_per_s.origin.as_str()),
            (2950.5, "measured")
        );
        assert_eq!(
            (p.tflops.value, p.tflops.origin.as_str()),
            (712.25, "measured")
        );
        // FP8 was not measured: datasheet.
        assert_eq!(
            resolve(h100, Precision::Fp8, Some(&store))
                .unwrap()
                .tflops
                .value,
            1978.9
        );
    }

    #[test]
    fn missing_datasheet_figures_are_errors_not_guesses() {
        let a10g = gpus::by_id("a10g").unwrap();
        let e = resolve(a10g, Precision::Bf16, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("no public bf16 peak figure for a10g"),
            "{e}"
        );
    }
}
