//! Benchmark history as CSV (RFC 4180 through the `csv` crate: comma
//! separated, CRLF line ends, fields quoted when they hold a comma, quote or
//! line break). One row per stored result; with `detailed`, one more row per
//! timed repetition (`record` = `repetition`). Column names are stable and
//! carry their unit; `value`'s unit is named by `metric`. Text fields have
//! line breaks shown as `⏎` and a `'` before a leading `=`, `+`, `-`, `@`
//! (no spreadsheet formula, no line a line-based reader would take). The schema is
//! [`COLUMNS`] (documented in README.md, "CSV columns").

use super::bench::History;

/// The columns, in order.
pub const COLUMNS: &[&str] = &[
    "record",
    "run_id",
    "created_at_utc",
    "device_name",
    "device_uuid",
    "host",
    "driver_version",
    "nvrtc_version",
    "target",
    "variant",
    "role",
    "status",
    "verified",
    "failure",
    "size",
    "metric",
    "value",
    "pct_of_roof",
    "pct_of_datasheet",
    "median_ms",
    "p10_ms",
    "p90_ms",
    "cv_pct",
    "repetitions",
    "energy_j",
    "baseline_variant",
    "speedup_x",
    "speedup_ci_low_x",
    "speedup_ci_high_x",
    "speedup_p_value",
    "repetition",
    "sample_ms",
];

/// A text field: no line breaks, no formula start ([`aisp_base::safe_write::csv_text`]).
fn text(s: &str) -> String {
    aisp_base::safe_write::csv_text(s).into_owned()
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The history as CSV text and the number of data rows.
pub fn render(h: &History, detailed: bool) -> Result<(Vec<u8>, u64), csv::Error> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::new());
    w.write_record(COLUMNS)?;
    let mut n = 0u64;
    for r in &h.rows {
        let s = h.speedups.get(&r.id);
        let base = vec![
            text(&r.run_id),
            text(&r.created_at),
            text(&opt(r.device_name.clone())),
            text(&opt(r.device_uuid.clone())),
            text(&opt(r.host.clone())),
            text(&opt(r.driver_version.clone())),
            text(&opt(r.nvrtc_version.clone())),
            text(&r.target),
            text(&r.variant),
            text(&r.role),
            text(&opt(r.status.clone())),
            r.verified.to_string(),
            text(&opt(r.failure.clone())),
            text(&opt(r.size.clone())),
            text(&opt(r.metric.clone())),
            opt(r.value),
            opt(r.pct_of_roof),
            opt(r.pct_of_datasheet),
            opt(r.median_ms),
            opt(r.p10_ms),
            opt(r.p90_ms),
            opt(r.cv_pct),
            opt(r.repetitions),
            opt(r.energy_j),
            text(&opt(s.map(|s| s.baseline.clone()))),
            opt(s.map(|s| s.speedup)),
            opt(s.map(|s| s.ci_low)),
            opt(s.map(|s| s.ci_high)),
            opt(s.and_then(|s| s.p_value)),
        ];
        let mut row = vec!["result".to_string()];
        row.extend(base.iter().cloned());
        row.extend([String::new(), String::new()]);
        w.write_record(&row)?;
        n += 1;
        if detailed && let Some(samples) = &r.samples_ms {
            for (i, v) in samples.iter().enumerate() {
                let mut row = vec!["repetition".to_string()];
                row.extend(base.iter().cloned());
                row.extend([i.to_string(), v.to_string()]);
                w.write_record(&row)?;
                n += 1;
            }
        }
    }
    let bytes = w
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    Ok((bytes, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{Filter, collect};
    use aisp_hw::bench::lesson::{Metric, Role, VariantResult, Work};
    use aisp_store::Store;

    /// A run measured here keeps its samples: `detailed` writes one row per
    /// repetition, and every value reads back exactly.
    #[test]
    fn detailed_rows_round_trip_every_repetition() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let meta = aisp_hw::bench::record::RunMeta {
            run_id: "20261124T000000-00000001".into(),
            created_at: "2026-11-24T00:00:00Z".into(),
            tool: "aisp_benchmark_run".into(),
            device: serde_json::from_value(serde_json::json!({
                "ordinal": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1",
                "compute_capability": "9.0", "cc_major": 9, "cc_minor": 0, "sm_count": 132,
                "l2_bytes": 52428800, "total_memory_bytes": 85017493504u64,
                "memory_bus_width_bits": 5120, "memory_clock_mhz": 2619,
                "max_threads_per_sm": 2048, "async_engines": 3, "arch": "sm_90"
            }))
            .unwrap(),
            driver_version: Some("580.159.04".into()),
            cuda_driver_version: None,
            nvrtc_version: None,
            cublas_version: None,
            host: Some("h, \"quoted\"".into()),
            seed: 1,
            size_class: "small".into(),
        };
        let mut rows = Vec::new();
        for (variant, role, samples) in [
            ("strided_copy", Role::Baseline, vec![2.0, 2.1, 1.9, 2.05]),
            ("coalesced_copy", Role::Optimized, vec![0.5, 0.52, 0.49]),
        ] {
            let mut r = VariantResult::new("memory_coalescing", variant, role, Metric::GbPerS, "n");
            r.verified = true;
            r.set_samples(
                samples,
                Metric::GbPerS,
                Work {
                    bytes: 1e9,
                    flops: 0.0,
                },
                None,
                None,
            );
            rows.push(r);
        }
        aisp_hw::bench::record::insert(&store, &meta, &rows).unwrap();
        let h = collect(
            &store,
            &Filter {
                limit: 10,
                ..Default::default()
            },
        )
        .unwrap();
        let (plain, n) = render(&h, false).unwrap();
        assert_eq!(n, 2);
        let (bytes, n) = render(&h, true).unwrap();
        assert_eq!(n, 2 + 4 + 3);
        assert!(plain.len() < bytes.len());
        let mut rd = csv::Reader::from_reader(bytes.as_slice());
        assert_eq!(rd.headers().unwrap().len(), COLUMNS.len());
        let recs: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        let col = |n: &str| COLUMNS.iter().position(|c| *c == n).unwrap();
        let reps: Vec<f64> = recs
            .iter()
            .filter(|r| &r[col("record")] == "repetition" && &r[col("variant")] == "strided_copy")
            .map(|r| r[col("sample_ms")].parse().unwrap())
            .collect();
        assert_eq!(reps, vec![2.0, 2.1, 1.9, 2.05]);
        assert_eq!(
            &recs[0][col("host")],
            "h, \"quoted\"",
            "quoting round-trips"
        );
        let opt = recs
            .iter()
            .find(|r| &r[col("record")] == "result" && &r[col("variant")] == "coalesced_copy")
            .unwrap();
        // The speedup comes from the samples: median 2.025 / median 0.5.
        let s: f64 = opt[col("speedup_x")].parse().unwrap();
        assert!((s - 2.025 / 0.5).abs() < 1e-9, "{s}");
        assert_eq!(&opt[col("baseline_variant")], "strided_copy");
    }
}
