//! Benchmark history as CSV (RFC 4180 through the `csv` crate: comma
//! separated, CRLF line ends, fields quoted when they hold a comma, quote or
//! line break). One row per stored result; with `detailed`, one more row per
//! timed repetition (`record` = `repetition`). Column names are stable and
//! carry their unit; `value`'s unit is named by `metric`. The schema is
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
            r.run_id.clone(),
            r.created_at.clone(),
            opt(r.device_name.clone()),
            opt(r.device_uuid.clone()),
            opt(r.host.clone()),
            opt(r.driver_version.clone()),
            opt(r.nvrtc_version.clone()),
            r.target.clone(),
            r.variant.clone(),
            r.role.clone(),
            opt(r.status.clone()),
            r.verified.to_string(),
            opt(r.failure.clone()),
            opt(r.size.clone()),
            opt(r.metric.clone()),
            opt(r.value),
            opt(r.pct_of_roof),
            opt(r.pct_of_datasheet),
            opt(r.median_ms),
            opt(r.p10_ms),
            opt(r.p90_ms),
            opt(r.cv_pct),
            opt(r.repetitions),
            opt(r.energy_j),
            opt(s.map(|s| s.baseline.clone())),
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
