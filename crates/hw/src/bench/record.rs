//! Persisting results in the store table `benchmark_results` (one row per
//! measured variant, with everything needed to compare runs across days and
//! machines) and reading them back for history and comparisons.

use rusqlite::{OptionalExtension, params};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::device::DeviceInfo;
use super::lesson::{Role, Status, VariantResult};
use aisp_store::{Store, StoreError};

/// What is common to every row of one run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunMeta {
    pub run_id: String,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// The tool that produced the run (e.g. `aisp_benchmark_run`).
    pub tool: String,
    pub device: DeviceInfo,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub nvrtc_version: Option<String>,
    pub cublas_version: Option<String>,
    pub host: Option<String>,
    pub seed: u32,
    pub size_class: String,
}

/// A new run id: UTC time plus random hex, sortable by time.
pub fn new_run_id() -> String {
    let now = chrono::Utc::now();
    format!(
        "{}-{:08x}",
        now.format("%Y%m%dT%H%M%S"),
        aisp_base::random_u64() as u32
    )
}

pub fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Insert every row of a run in one transaction.
pub fn insert(store: &Store, meta: &RunMeta, rows: &[VariantResult]) -> Result<(), StoreError> {
    let mut conn = store.conn();
    let tx = conn.transaction().map_err(|e| store.err(e))?;
    {
        let mut stmt = tx
            .prepare(
                "INSERT INTO benchmark_results (
                    run_id, created_at, target, variant, role, verified, failure, size,
                    median_ms, p10_ms, p90_ms, min_ms, cv_pct, repetitions, metric, value,
                    pct_of_roof, pct_of_datasheet, energy_j, peak_memory_bytes,
                    device_index, device_name, device_uuid, compute_capability,
                    sm_clock_start_mhz, sm_clock_end_mhz, mem_clock_start_mhz, mem_clock_end_mhz,
                    throttle_reasons, driver_version, cuda_driver_version, nvrtc_version, host, details,
                    tool, status, roof, roof_value, datasheet_value, samples_ms, seed, size_class, cublas_version
                ) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20,
                          ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?37, ?38,
                          ?39, ?40, ?41, ?42, ?43)",
            )
            .map_err(|e| store.err(e))?;
        for r in rows {
            let t = r.telemetry.as_ref();
            let details = json!({
                "check": r.check,
                "telemetry": r.telemetry,
                "details": r.details,
            });
            let status = match r.status {
                Status::Ok => "ok",
                Status::Failed => "failed",
                Status::Skipped => "skipped",
            };
            stmt.execute(params![
                meta.run_id,
                meta.created_at,
                r.target,
                r.variant,
                r.role.as_str(),
                r.verified,
                r.failure,
                r.size,
                r.median_ms,
                r.p10_ms,
                r.p90_ms,
                r.min_ms,
                r.cv_pct,
                r.repetitions,
                r.metric,
                r.value,
                r.pct_of_roof,
                r.pct_of_datasheet,
                t.and_then(|t| t.energy_j),
                r.peak_memory_bytes.map(|b| b as i64),
                meta.device.ordinal as i64,
                meta.device.name,
                meta.device.uuid,
                meta.device.compute_capability,
                t.and_then(|t| t.sm_clock_start_mhz),
                t.and_then(|t| t.sm_clock_end_mhz),
                t.and_then(|t| t.mem_clock_start_mhz),
                t.and_then(|t| t.mem_clock_end_mhz),
                t.map(|t| serde_json::to_string(&t.throttle_reasons).unwrap_or_default()),
                meta.driver_version,
                meta.cuda_driver_version,
                meta.nvrtc_version,
                meta.host,
                details.to_string(),
                meta.tool,
                status,
                r.roof,
                r.roof_value,
                r.datasheet_value,
                serde_json::to_string(&r.samples_ms).unwrap_or_default(),
                meta.seed,
                meta.size_class,
                meta.cublas_version,
            ])
            .map_err(|e| store.err(e))?;
        }
    }
    tx.commit().map_err(|e| store.err(e))
}

/// A stored row, as history and comparisons read it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StoredRow {
    pub id: i64,
    pub run_id: String,
    pub created_at: String,
    pub tool: Option<String>,
    pub target: String,
    pub variant: String,
    pub role: String,
    pub status: Option<String>,
    pub verified: bool,
    pub failure: Option<String>,
    pub size: Option<String>,
    pub median_ms: Option<f64>,
    pub p10_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub cv_pct: Option<f64>,
    pub repetitions: Option<i64>,
    pub metric: Option<String>,
    pub value: Option<f64>,
    pub pct_of_roof: Option<f64>,
    pub pct_of_datasheet: Option<f64>,
    pub energy_j: Option<f64>,
    pub device_name: Option<String>,
    pub device_uuid: Option<String>,
    pub throttle_reasons: Option<String>,
    pub driver_version: Option<String>,
    pub nvrtc_version: Option<String>,
    pub host: Option<String>,
    /// Raw samples in ms (only when asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples_ms: Option<Vec<f64>>,
    /// GEMM variants: FLOP per byte of compulsory DRAM traffic, the x of the
    /// variant's point on a roofline (set by `aisp_benchmark_history`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intensity_flop_per_byte: Option<f64>,
}

const COLUMNS: &str = "id, run_id, created_at, tool, target, variant, role, status, verified, failure, size, \
median_ms, p10_ms, p90_ms, cv_pct, repetitions, metric, value, pct_of_roof, pct_of_datasheet, energy_j, \
device_name, device_uuid, throttle_reasons, driver_version, nvrtc_version, host, samples_ms";

fn row_of(r: &rusqlite::Row, with_samples: bool) -> rusqlite::Result<StoredRow> {
    let samples: Option<String> = r.get(27)?;
    Ok(StoredRow {
        id: r.get(0)?,
        run_id: r.get(1)?,
        created_at: r.get(2)?,
        tool: r.get(3)?,
        target: r.get(4)?,
        variant: r.get(5)?,
        role: r.get(6)?,
        status: r.get(7)?,
        verified: r.get(8)?,
        failure: r.get(9)?,
        size: r.get(10)?,
        median_ms: r.get(11)?,
        p10_ms: r.get(12)?,
        p90_ms: r.get(13)?,
        cv_pct: r.get(14)?,
        repetitions: r.get(15)?,
        metric: r.get(16)?,
        value: r.get(17)?,
        pct_of_roof: r.get(18)?,
        pct_of_datasheet: r.get(19)?,
        energy_j: r.get(20)?,
        device_name: r.get(21)?,
        device_uuid: r.get(22)?,
        throttle_reasons: r.get(23)?,
        driver_version: r.get(24)?,
        nvrtc_version: r.get(25)?,
        host: r.get(26)?,
        samples_ms: if with_samples {
            samples.and_then(|s| serde_json::from_str(&s).ok())
        } else {
            None
        },
        intensity_flop_per_byte: None,
    })
}

/// Filters for [`history`].
#[derive(Debug, Clone, Default)]
pub struct HistoryFilter {
    pub target: Option<String>,
    pub variant: Option<String>,
    pub run_id: Option<String>,
    /// Substring of the device name or the exact UUID.
    pub device: Option<String>,
    pub limit: usize,
    pub with_samples: bool,
}

/// Rows newest first.
pub fn history(store: &Store, f: &HistoryFilter) -> Result<Vec<StoredRow>, StoreError> {
    let conn = store.conn();
    let sql = format!(
        "SELECT {COLUMNS} FROM benchmark_results
         WHERE (?1 IS NULL OR target = ?1) AND (?2 IS NULL OR variant = ?2) AND (?3 IS NULL OR run_id = ?3)
           AND (?4 IS NULL OR device_uuid = ?4 OR instr(lower(device_name), lower(?4)) > 0)
         ORDER BY created_at DESC, id DESC LIMIT ?5"
    );
    let mut stmt = conn.prepare(&sql).map_err(|e| store.err(e))?;
    let rows = stmt
        .query_map(
            params![
                f.target,
                f.variant,
                f.run_id,
                f.device,
                f.limit.max(1) as i64
            ],
            |r| row_of(r, f.with_samples),
        )
        .map_err(|e| store.err(e))?;
    rows.collect::<Result<Vec<_>, _>>()
        .map_err(|e| store.err(e))
}

/// The `details` JSON of stored rows by id (check, telemetry, lesson
/// details and, for imported runs, the saved speedup).
pub fn details_by_id(
    store: &Store,
    ids: &[i64],
) -> Result<std::collections::HashMap<i64, serde_json::Value>, StoreError> {
    let conn = store.conn();
    let mut stmt = conn
        .prepare("SELECT details FROM benchmark_results WHERE id = ?1")
        .map_err(|e| store.err(e))?;
    let mut out = std::collections::HashMap::new();
    for id in ids {
        let d: Option<String> = stmt
            .query_row([id], |r| r.get(0))
            .optional()
            .map_err(|e| store.err(e))?
            .flatten();
        if let Some(v) = d.and_then(|d| serde_json::from_str(&d).ok()) {
            out.insert(*id, v);
        }
    }
    Ok(out)
}

/// The newest stored row of (run, target, variant), with samples.
pub fn find(
    store: &Store,
    run_id: Option<&str>,
    target: &str,
    variant: &str,
) -> Result<Option<StoredRow>, StoreError> {
    let conn = store.conn();
    let sql = format!(
        "SELECT {COLUMNS} FROM benchmark_results
         WHERE (?1 IS NULL OR run_id = ?1) AND target = ?2 AND variant = ?3 AND status = 'ok'
         ORDER BY created_at DESC, id DESC LIMIT 1"
    );
    conn.query_row(&sql, params![run_id, target, variant], |r| row_of(r, true))
        .optional()
        .map_err(|e| store.err(e))
}

/// The best value ever recorded on this device for (target, variant), with
/// its run id (higher is better for bandwidth and FLOP/s metrics).
pub fn best_value(
    store: &Store,
    device_uuid: &str,
    target: &str,
    variant: &str,
) -> Result<Option<(f64, String)>, StoreError> {
    let conn = store.conn();
    conn.query_row(
        "SELECT value, run_id FROM benchmark_results
         WHERE device_uuid = ?1 AND target = ?2 AND variant = ?3 AND status = 'ok' AND value IS NOT NULL
         ORDER BY value DESC LIMIT 1",
        params![device_uuid, target, variant],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .map_err(|e| store.err(e))
}

/// The most recent roof values measured on this device by hw tools
/// (target `roof`, variant = roof kind), newest first per kind.
pub fn latest_roofs(
    store: &Store,
    device_uuid: &str,
) -> Result<Vec<(String, f64, String)>, StoreError> {
    let conn = store.conn();
    let mut stmt = conn
        .prepare(
            "SELECT variant, value, run_id || ' ' || created_at FROM benchmark_results b
             WHERE device_uuid = ?1 AND target = 'roof' AND status = 'ok' AND value IS NOT NULL
               AND created_at = (SELECT MAX(created_at) FROM benchmark_results c
                                 WHERE c.device_uuid = b.device_uuid AND c.target = 'roof' AND c.variant = b.variant)",
        )
        .map_err(|e| store.err(e))?;
    let rows = stmt
        .query_map(params![device_uuid], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(|e| store.err(e))?;
    rows.collect::<Result<Vec<_>, _>>()
        .map_err(|e| store.err(e))
}

/// A result row for a roof (target `roof`), so later runs can find it.
pub fn roof_row(kind: &str, value: f64, how: &str, metric: super::lesson::Metric) -> VariantResult {
    let mut r = VariantResult::new("roof", kind, Role::Optimized, metric, how);
    r.status = Status::Ok;
    r.verified = true;
    r.value = Some(value);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::lesson::{Metric, Work};

    fn meta(run: &str) -> RunMeta {
        RunMeta {
            run_id: run.into(),
            created_at: format!("2026-11-22T00:00:0{}Z", run.len() % 10),
            tool: "aisp_benchmark_run".into(),
            device: DeviceInfo {
                ordinal: 0,
                name: "NVIDIA H100 80GB HBM3".into(),
                uuid: "GPU-1".into(),
                compute_capability: "9.0".into(),
                cc_major: 9,
                cc_minor: 0,
                sm_count: 132,
                l2_bytes: 50 << 20,
                total_memory_bytes: 80 << 30,
                memory_bus_width_bits: 5120,
                memory_clock_mhz: 2619,
                max_threads_per_sm: 2048,
                async_engines: 3,
                arch: "sm_90".into(),
            },
            driver_version: Some("580.159.04".into()),
            cuda_driver_version: Some("13.0".into()),
            nvrtc_version: Some("13.0".into()),
            cublas_version: None,
            host: Some("h".into()),
            seed: 7,
            size_class: "medium".into(),
        }
    }

    #[test]
    fn rows_round_trip_through_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let mut a = VariantResult::new(
            "memory_coalescing",
            "coalesced_copy",
            Role::Optimized,
            Metric::GbPerS,
            "n",
        );
        a.verified = true;
        a.set_samples(
            vec![1.0, 1.1, 0.9],
            Metric::GbPerS,
            Work {
                bytes: 3e9,
                flops: 0.0,
            },
            Some((4000.0, "dtod".into())),
            None,
        );
        let failed = VariantResult::new(
            "memory_coalescing",
            "strided_copy",
            Role::Baseline,
            Metric::GbPerS,
            "n",
        )
        .failed("bad");
        insert(&store, &meta("run1"), &[a.clone(), failed]).unwrap();
        let rows = history(
            &store,
            &HistoryFilter {
                limit: 10,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        let ok = rows.iter().find(|r| r.variant == "coalesced_copy").unwrap();
        assert_eq!(ok.value, Some(3000.0));
        assert_eq!(ok.pct_of_roof, Some(75.0));
        assert_eq!(ok.status.as_deref(), Some("ok"));
        assert!(ok.samples_ms.is_none());
        let found = find(&store, Some("run1"), "memory_coalescing", "coalesced_copy")
            .unwrap()
            .unwrap();
        assert_eq!(found.samples_ms.unwrap(), vec![1.0, 1.1, 0.9]);
        // Failed rows are never "found" for comparison.
        assert!(
            find(&store, None, "memory_coalescing", "strided_copy")
                .unwrap()
                .is_none()
        );
        let filtered = history(
            &store,
            &HistoryFilter {
                device: Some("h100".into()),
                target: Some("memory_coalescing".into()),
                limit: 1,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(filtered.len(), 1);
        assert_eq!(
            best_value(&store, "GPU-1", "memory_coalescing", "coalesced_copy")
                .unwrap()
                .unwrap()
                .0,
            3000.0
        );
        insert(
            &store,
            &meta("run22"),
            &[roof_row("memory", 3100.0, "dtod", Metric::GbPerS)],
        )
        .unwrap();
        let roofs = latest_roofs(&store, "GPU-1").unwrap();
        assert_eq!(roofs.len(), 1);
        assert_eq!((roofs[0].0.as_str(), roofs[0].1), ("memory", 3100.0));
        assert!(new_run_id().len() > 16);
    }
}
