//! Benchmark history: the rows the benchmark and hw domains write to the
//! store table `benchmark_results`, read back for analysis (Pareto fronts,
//! leaderboards, power, scaling). Only columns of the table's first version
//! are read, so any store version works.

use schemars::JsonSchema;
use serde::Serialize;

use aisp_store::Store;

/// One measured variant.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Row {
    pub id: i64,
    pub run_id: String,
    pub created_at: String,
    pub target: String,
    pub variant: String,
    /// baseline or optimized.
    pub role: String,
    pub verified: bool,
    pub failure: Option<String>,
    /// Problem size as the benchmark names it (e.g. "n=16777216" or "4096").
    pub size: Option<String>,
    pub median_ms: Option<f64>,
    pub cv_pct: Option<f64>,
    pub repetitions: Option<i64>,
    /// Unit of `value`: gb_per_s, tflop_per_s, us_per_step, ...
    pub metric: Option<String>,
    pub value: Option<f64>,
    pub pct_of_roof: Option<f64>,
    pub energy_j: Option<f64>,
    pub peak_memory_bytes: Option<i64>,
    pub device_name: Option<String>,
    /// Mean board power over the measurement, from the recorded telemetry.
    pub avg_power_w: Option<f64>,
    /// Wall time of the measurement the energy covers, seconds.
    pub measurement_wall_s: Option<f64>,
}

impl Row {
    /// Whether a larger `value` is better (bandwidth, FLOP/s) rather than smaller (time).
    pub fn higher_is_better(&self) -> bool {
        self.metric.as_deref().is_some_and(|m| {
            let m = m.to_ascii_lowercase();
            m.contains("per_s") && !m.starts_with("us_per") && !m.starts_with("ms_per")
        })
    }

    /// A key naming what was measured (target, variant, size, device).
    pub fn key(&self) -> (String, String, String, String) {
        (
            self.target.clone(),
            self.variant.clone(),
            self.size.clone().unwrap_or_default(),
            self.device_name.clone().unwrap_or_default(),
        )
    }

    /// `target/variant [size] on device`.
    pub fn label(&self) -> String {
        let mut s = format!("{}/{}", self.target, self.variant);
        if let Some(z) = &self.size {
            s.push_str(&format!(" [{z}]"));
        }
        if let Some(d) = &self.device_name {
            s.push_str(&format!(" on {d}"));
        }
        s
    }
}

/// Which rows to read.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub target: Option<String>,
    /// Substring of the device name (case-insensitive).
    pub device: Option<String>,
    pub run_id: Option<String>,
    /// Keep unverified and failed rows too (default: verified successes only).
    pub include_unverified: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("reading benchmark history failed: {0}")]
pub struct HistoryError(pub String);

/// Rows matching `f`, oldest first.
pub fn load(store: &Store, f: &Filter) -> Result<Vec<Row>, HistoryError> {
    let conn = store.conn();
    let mut stmt = conn
        .prepare(
            "SELECT id, run_id, created_at, target, variant, role, verified, failure, size, median_ms,
                    cv_pct, repetitions, metric, value, pct_of_roof, energy_j, peak_memory_bytes,
                    device_name, details
             FROM benchmark_results
             WHERE (?1 IS NULL OR target = ?1) AND (?2 IS NULL OR run_id = ?2)
             ORDER BY created_at, id",
        )
        .map_err(|e| HistoryError(e.to_string()))?;
    let rows = stmt
        .query_map(rusqlite::params![f.target, f.run_id], |r| {
            let details: Option<String> = r.get(18)?;
            let tele = details
                .as_deref()
                .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                .and_then(|v| v.get("telemetry").cloned());
            Ok(Row {
                id: r.get(0)?,
                run_id: r.get(1)?,
                created_at: r.get(2)?,
                target: r.get(3)?,
                variant: r.get(4)?,
                role: r.get(5)?,
                verified: r.get::<_, i64>(6)? != 0,
                failure: r.get(7)?,
                size: r.get(8)?,
                median_ms: r.get(9)?,
                cv_pct: r.get(10)?,
                repetitions: r.get(11)?,
                metric: r.get(12)?,
                value: r.get(13)?,
                pct_of_roof: r.get(14)?,
                energy_j: r.get(15)?,
                peak_memory_bytes: r.get(16)?,
                device_name: r.get(17)?,
                avg_power_w: tele
                    .as_ref()
                    .and_then(|t| t.get("avg_power_w"))
                    .and_then(|v| v.as_f64()),
                measurement_wall_s: tele
                    .as_ref()
                    .and_then(|t| t.get("wall_s"))
                    .and_then(|v| v.as_f64()),
            })
        })
        .map_err(|e| HistoryError(e.to_string()))?;
    let mut out = Vec::new();
    for r in rows {
        let r = r.map_err(|e| HistoryError(e.to_string()))?;
        if !f.include_unverified && (!r.verified || r.failure.is_some()) {
            continue;
        }
        if let Some(d) = &f.device
            && !r
                .device_name
                .as_deref()
                .is_some_and(|n| n.to_ascii_lowercase().contains(&d.to_ascii_lowercase()))
        {
            continue;
        }
        out.push(r);
    }
    Ok(out)
}

/// The newest row per (target, variant, size, device).
pub fn latest(rows: Vec<Row>) -> Vec<Row> {
    let mut map: std::collections::BTreeMap<(String, String, String, String), Row> =
        Default::default();
    for r in rows {
        map.insert(r.key(), r); // rows come oldest first: later ones replace
    }
    map.into_values().collect()
}

/// The sentence to return when there is no history to analyze.
pub const NO_HISTORY: &str = "no verified benchmark results in the store yet: run aisp_benchmark_run (lessons) or the hw \
domain's roofs on this machine first; results are recorded automatically";

#[doc(hidden)]
pub mod testing {
    //! Insert rows the way the benchmark domain does, for tests (this crate's
    //! and the application's).
    use super::*;

    #[allow(clippy::too_many_arguments)]
    pub fn insert(
        store: &Store,
        run: &str,
        at: &str,
        target: &str,
        variant: &str,
        role: &str,
        size: &str,
        median_ms: f64,
        metric: &str,
        value: f64,
        energy_j: Option<f64>,
        peak_memory_bytes: Option<i64>,
        avg_power_w: Option<f64>,
        device: &str,
    ) {
        let details = serde_json::json!({"telemetry": {"avg_power_w": avg_power_w, "wall_s": 1.0}})
            .to_string();
        store
            .conn()
            .execute(
                "INSERT INTO benchmark_results (run_id, created_at, target, variant, role, verified, size, median_ms,
                     repetitions, metric, value, energy_j, peak_memory_bytes, device_name, details)
                 VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, 100, ?8, ?9, ?10, ?11, ?12, ?13)",
                rusqlite::params![run, at, target, variant, role, size, median_ms, metric, value, energy_j, peak_memory_bytes, device, details],
            )
            .unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::testing::insert;
    use super::*;

    #[test]
    fn loads_filters_and_keeps_the_latest() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let h100 = "NVIDIA H100 80GB HBM3";
        insert(
            &store,
            "r1",
            "2026-01-01T00:00:00Z",
            "copy_bandwidth",
            "naive",
            "baseline",
            "n=1",
            2.0,
            "gb_per_s",
            1000.0,
            None,
            None,
            None,
            h100,
        );
        insert(
            &store,
            "r2",
            "2026-01-02T00:00:00Z",
            "copy_bandwidth",
            "naive",
            "baseline",
            "n=1",
            1.5,
            "gb_per_s",
            1300.0,
            None,
            None,
            None,
            h100,
        );
        insert(
            &store,
            "r2",
            "2026-01-02T00:00:00Z",
            "copy_bandwidth",
            "vec4",
            "optimized",
            "n=1",
            1.0,
            "gb_per_s",
            2000.0,
            Some(0.7),
            None,
            Some(350.0),
            h100,
        );
        store
            .conn()
            .execute(
                "UPDATE benchmark_results SET verified = 0 WHERE variant = 'vec4'",
                [],
            )
            .unwrap();
        let all = load(&store, &Filter::default()).unwrap();
        assert_eq!(all.len(), 2); // the unverified row is left out
        let latest = latest(all);
        assert_eq!(latest.len(), 1);
        assert_eq!(latest[0].median_ms, Some(1.5));
        assert!(latest[0].higher_is_better());
        let with = load(
            &store,
            &Filter {
                include_unverified: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(with.len(), 3);
        assert_eq!(with[2].avg_power_w, Some(350.0));
        assert!(
            load(
                &store,
                &Filter {
                    device: Some("a100".into()),
                    ..Default::default()
                }
            )
            .unwrap()
            .is_empty()
        );
    }
}
