//! The speed test: a quick health check of one GPU (device-memory copy, BF16
//! GEMM, launch cost, pinned host-to-device copy), each against the figure a
//! healthy GPU of its kind reaches.

use std::time::Duration;

use aisp_base::Cancel;
use aisp_store::Store;
use schemars::JsonSchema;
use serde::Serialize;

use super::datasheet::{self, Datasheet};
use super::lesson::{self, Metric, RoofKind, RunEnv};
use super::record;
use super::roofs::{self, Roofs};
use super::session::Session;
use super::targets::gemm::Gemm;
use super::{BenchError, Measured, SizeClass};

/// Share of the theoretical memory bandwidth a healthy GPU's cuMemcpyDtoD
/// reaches at least: H100 SXM measures ~3.0 of 3.35 TB/s (90%), H200 ~4.3 of
/// 4.9 (88%); 80% leaves room for other parts while flagging a sick one.
const HBM_HEALTHY_FRACTION: f64 = 0.80;
/// Share of the PCIe link's theoretical rate a pinned 256 MiB H2D copy reaches
/// at least on a healthy host (typical: 80-90% after protocol overhead).
const PCIE_HEALTHY_FRACTION: f64 = 0.70;
/// Share of the datasheet dense BF16 rate a large cuBLAS GEMM reaches at least
/// (H100 SXM: ~800 of 989 TFLOP/s, 81%, on random data).
const GEMM_HEALTHY_FRACTION: f64 = 0.60;
/// aisp's ceilings for launch costs on a healthy Linux host: back-to-back
/// launches typically cost 2-5 µs each and launch + synchronise 5-15 µs.
const LAUNCH_THROUGHPUT_MAX_US: f64 = 10.0;
const LAUNCH_ROUND_TRIP_MAX_US: f64 = 30.0;
/// The checks, one progress step each.
pub const CHECKS: usize = 4;

#[derive(Debug, Serialize, JsonSchema)]
pub struct HealthCheck {
    /// `hbm_copy`, `bf16_gemm`, `launch_throughput`, `launch_round_trip`, `h2d_pinned`.
    pub name: String,
    pub value: Option<f64>,
    /// `gb_per_s`, `tflop_per_s` or `us`.
    pub unit: String,
    /// The figure this GPU should reach (a floor; a ceiling for latencies).
    pub expected: Option<f64>,
    /// Where `expected` comes from.
    pub expected_source: String,
    /// value / expected in percent (for latencies, expected / value).
    pub pct_of_expected: Option<f64>,
    /// `ok`, `low` (underperforms), `unknown` (no expected figure) or `failed`.
    pub status: String,
    pub detail: String,
}

/// A speed test's verdicts.
#[derive(Debug, Default)]
pub struct SpeedTest {
    pub checks: Vec<HealthCheck>,
    /// false when any check is `low` or `failed`; `None` when none could be judged.
    pub healthy: Option<bool>,
}

fn judge(
    name: &str,
    value: Option<f64>,
    unit: &str,
    expected: Option<(f64, String)>,
    lower_is_better: bool,
    detail: String,
) -> HealthCheck {
    let (status, pct) = match (value, &expected) {
        (None, _) => ("failed", None),
        (Some(_), None) => ("unknown", None),
        (Some(v), Some((e, _))) => {
            let pct = if lower_is_better {
                e / v * 100.0
            } else {
                v / e * 100.0
            };
            (if pct >= 100.0 { "ok" } else { "low" }, Some(pct))
        }
    };
    HealthCheck {
        name: name.into(),
        value,
        unit: unit.into(),
        expected: expected.as_ref().map(|e| e.0),
        expected_source: expected
            .map(|e| e.1)
            .unwrap_or_else(|| "none known for this GPU".into()),
        pct_of_expected: pct,
        status: status.into(),
        detail,
    }
}

/// Run the four checks on the session's GPU. `store` gives the GPU's best
/// earlier speed test when the catalog lacks its datasheet; `progress` gets
/// `(check, of CHECKS, what)` before each check. The rows (target
/// `speed_test`) are the measurements.
pub fn speed_test(
    s: &Session,
    store: Option<&Store>,
    cancelled: Cancel<'_>,
    progress: &dyn Fn(usize, usize, &str),
) -> Result<Measured<SpeedTest>, BenchError> {
    let mut test = Measured {
        found: SpeedTest::default(),
        rows: Vec::new(),
        notes: Vec::new(),
    };
    let data = datasheet::lookup(&s.gpu.info.name);
    progress(0, CHECKS, "device memory bandwidth");
    check_copy(s, cancelled, &mut test)?;
    stop_if(cancelled)?;
    progress(1, CHECKS, "BF16 GEMM");
    check_gemm(s, data.as_ref(), store, cancelled, &mut test)?;
    stop_if(cancelled)?;
    progress(2, CHECKS, "launch latency");
    check_launches(s, cancelled, &mut test)?;
    stop_if(cancelled)?;
    progress(3, CHECKS, "host-to-device bandwidth");
    check_h2d(s, cancelled, &mut test)?;
    // The copy and GEMM rows carry their own telemetry; the other checks are
    // stored as single-value rows.
    for c in test
        .found
        .checks
        .iter()
        .filter(|c| c.name != "hbm_copy" && c.name != "bf16_gemm")
    {
        if let Some(v) = c.value {
            let metric = match c.unit.as_str() {
                "tflop_per_s" => Metric::TflopPerS,
                "us" => Metric::UsPerStep,
                _ => Metric::GbPerS,
            };
            let mut r = record::roof_row(&c.name, v, &c.detail, metric);
            r.target = "speed_test".into();
            test.rows.push(r);
        }
    }
    if data.is_none() {
        test.notes.push(datasheet::MISSING_NOTE.into());
    }
    let judged: Vec<&HealthCheck> = test
        .found
        .checks
        .iter()
        .filter(|c| c.status != "unknown")
        .collect();
    test.found.healthy = (!judged.is_empty()).then(|| judged.iter().all(|c| c.status == "ok"));
    Ok(test)
}

fn stop_if(cancelled: Cancel<'_>) -> Result<(), BenchError> {
    if cancelled() {
        return Err(BenchError::Cancelled);
    }
    Ok(())
}

/// cuMemcpyDtoD of up to 1 GiB against 80% of the theoretical bandwidth.
fn check_copy(
    s: &Session,
    cancelled: Cancel<'_>,
    test: &mut Measured<SpeedTest>,
) -> Result<(), BenchError> {
    let copy_bytes = (1u64 << 30).min(s.gpu.info.total_memory_bytes / 8);
    let copy = roofs::copy_bandwidth(
        &s.gpu,
        copy_bytes,
        s.meta.seed,
        Duration::from_millis(1500),
        cancelled,
        s.nvml.clone(),
        Some(&["cuMemcpyDtoD"]),
    )?;
    let dtod = copy
        .iter()
        .find(|r| r.variant == "cuMemcpyDtoD")
        .and_then(|r| r.value);
    let theory = roofs::theoretical_memory(&s.gpu, s.nvml.as_deref());
    let expected = theory.as_ref().map(|(v, src)| {
        (
            v * HBM_HEALTHY_FRACTION,
            format!("80% of theoretical {v:.0} GB/s ({src})"),
        )
    });
    test.found.checks.push(judge(
        "hbm_copy",
        dtod,
        "gb_per_s",
        expected,
        false,
        format!(
            "cuMemcpyDtoD of {} MiB, bytes read + written",
            copy_bytes >> 20
        ),
    ));
    test.rows.extend(copy);
    Ok(())
}

/// A cuBLAS BF16 GEMM (8192^3, 4096^3 under 16 GiB) against 60% of the
/// datasheet, else against 90% of this GPU's best stored speed test.
fn check_gemm(
    s: &Session,
    data: Option<&Datasheet>,
    store: Option<&Store>,
    cancelled: Cancel<'_>,
    test: &mut Measured<SpeedTest>,
) -> Result<(), BenchError> {
    let dim = if s.gpu.info.total_memory_bytes >= (16u64 << 30) {
        8192
    } else {
        4096
    };
    let mut gemm = Gemm::with_size(dim);
    let roofs0 = Roofs::default();
    let env = RunEnv {
        size: SizeClass::Large,
        budget: Duration::from_millis(2000),
        seed: s.meta.seed,
        cancelled,
        progress: &|_| {},
        roofs: &roofs0,
        datasheet: None,
        nvml: s.nvml.clone(),
    };
    let g = lesson::run_lesson_where(&mut gemm, &s.gpu, &env, &|i| i == 5)?;
    let bf16 = g.first().and_then(|r| r.value);
    let stored_best = store.and_then(|st| {
        record::best_value(st, &s.gpu.info.uuid, "speed_test", "bf16_gemm")
            .ok()
            .flatten()
    });
    let expected = match (data, stored_best) {
        (Some(d), _) if d.peak(RoofKind::Bf16).is_some() => d.peak(RoofKind::Bf16).map(|p| {
            (
                p * GEMM_HEALTHY_FRACTION,
                format!(
                    "60% of the datasheet dense BF16 {p:.0} TFLOP/s ({})",
                    d.source
                ),
            )
        }),
        (_, Some((best, run))) => Some((
            best * 0.9,
            format!("90% of this GPU's best stored speed test ({best:.0} TFLOP/s, run {run})"),
        )),
        _ => None,
    };
    let detail = g
        .first()
        .map(|r| {
            r.failure
                .clone()
                .unwrap_or_else(|| format!("cuBLAS BF16 {dim}^3, FP32 accumulate"))
        })
        .unwrap_or_default();
    test.found.checks.push(judge(
        "bf16_gemm",
        bf16,
        "tflop_per_s",
        expected,
        false,
        detail,
    ));
    for mut r in g {
        r.target = "speed_test".into();
        r.variant = "bf16_gemm".into();
        test.rows.push(r);
    }
    Ok(())
}

/// Back-to-back launches and launch + synchronise against aisp's ceilings; a
/// failure to measure is a note.
fn check_launches(
    s: &Session,
    cancelled: Cancel<'_>,
    test: &mut Measured<SpeedTest>,
) -> Result<(), BenchError> {
    match roofs::launch_latency(&s.gpu, cancelled) {
        Ok((thr, trip)) => {
            test.found.checks.push(judge(
                "launch_throughput",
                Some(thr),
                "us",
                Some((
                    LAUNCH_THROUGHPUT_MAX_US,
                    "aisp's ceiling for back-to-back launches on a healthy host".into(),
                )),
                true,
                "empty kernel, 1000 launches back to back, events around the batch".into(),
            ));
            test.found.checks.push(judge(
                "launch_round_trip",
                Some(trip),
                "us",
                Some((
                    LAUNCH_ROUND_TRIP_MAX_US,
                    "aisp's ceiling for launch + synchronise on a healthy host".into(),
                )),
                true,
                "host clock around launch and stream synchronisation, median of 200".into(),
            ));
        }
        Err(BenchError::Cancelled) => return Err(BenchError::Cancelled),
        Err(e) => test.notes.push(format!("launch latency not measured: {e}")),
    }
    Ok(())
}

/// A pinned 256 MiB host-to-device copy against 70% of the PCIe link's rate.
fn check_h2d(
    s: &Session,
    cancelled: Cancel<'_>,
    test: &mut Measured<SpeedTest>,
) -> Result<(), BenchError> {
    let pcie = roofs::pcie(
        &s.gpu,
        256 << 20,
        Duration::from_millis(800),
        cancelled,
        Some(&[("h2d", "pinned")]),
    )?;
    let h2d = pcie
        .iter()
        .find(|r| r.direction == "h2d" && r.host_memory == "pinned")
        .map(|r| r.gb_per_s);
    let link = s
        .nvml
        .as_deref()
        .and_then(|n| n.device_by_uuid(s.gpu.info.uuid.as_str()).ok())
        .and_then(|d| Some((d.max_pcie_link_gen().ok()?, d.max_pcie_link_width().ok()?)));
    let expected = link.and_then(|(generation, width)| {
        roofs::pcie_theoretical_gb_per_s(generation, width).map(|t| {
            (
                t * PCIE_HEALTHY_FRACTION,
                format!("70% of PCIe gen{generation} x{width} ({t:.1} GB/s per direction)"),
            )
        })
    });
    test.found.checks.push(judge(
        "h2d_pinned",
        h2d,
        "gb_per_s",
        expected,
        false,
        "256 MiB from page-locked host memory".into(),
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_judgements() {
        let ok = judge(
            "hbm_copy",
            Some(3000.0),
            "gb_per_s",
            Some((2680.0, "x".into())),
            false,
            String::new(),
        );
        assert_eq!(ok.status, "ok");
        let low = judge(
            "hbm_copy",
            Some(2000.0),
            "gb_per_s",
            Some((2680.0, "x".into())),
            false,
            String::new(),
        );
        assert_eq!(low.status, "low");
        assert!((low.pct_of_expected.unwrap() - 74.626_865_671_641_8).abs() < 1e-9);
        let lat = judge(
            "launch_throughput",
            Some(20.0),
            "us",
            Some((10.0, "x".into())),
            true,
            String::new(),
        );
        assert_eq!(
            (lat.status.as_str(), lat.pct_of_expected),
            ("low", Some(50.0))
        );
        assert_eq!(
            judge("x", Some(1.0), "us", None, true, String::new()).status,
            "unknown"
        );
        assert_eq!(
            judge("x", None, "us", None, true, String::new()).status,
            "failed"
        );
    }
}
