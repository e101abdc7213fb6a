//! Importing saved benchmark runs: the `run.json` answers of
//! `aisp_benchmark_run` kept under `examples/benchmark/*/` (real measurements
//! from GPU hosts) go into the store as the rows the run itself would have
//! written (its results, its measured roofs under target `roof`, and each
//! optimized variant's speedup with its 95% interval in the row's details,
//! since a saved answer carries the interval but not the samples). Importing
//! the same run twice adds nothing.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::device::DeviceInfo;
use super::lesson::{Metric, Speedup, VariantResult};
use super::record::{self, RunMeta};
use aisp_store::Store;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path} is not a saved aisp_benchmark_run answer: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("the store refused the rows: {0}")]
    Store(String),
}

#[derive(Debug, Deserialize)]
struct Roof {
    value: f64,
    how: String,
}

#[derive(Debug, Default, Deserialize)]
struct Roofs {
    memory: Option<Roof>,
    fp32: Option<Roof>,
    #[serde(default)]
    tensor: std::collections::BTreeMap<String, Roof>,
    pcie_h2d: Option<Roof>,
}

#[derive(Debug, Default, Deserialize)]
struct Versions {
    driver: Option<String>,
    cuda_driver: Option<String>,
    nvrtc: Option<String>,
    cublas: Option<String>,
}

#[derive(Debug, Deserialize)]
struct SavedRun {
    run_id: String,
    device: DeviceInfo,
    #[serde(default)]
    versions: Versions,
    #[serde(default)]
    size: Option<String>,
    #[serde(default)]
    seed: u32,
    #[serde(default)]
    roofs: Roofs,
    results: Vec<VariantResult>,
    #[serde(default)]
    speedups: Vec<Speedup>,
}

/// What one file gave.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Imported {
    pub path: String,
    pub run_id: String,
    pub device_name: String,
    /// Rows added (0 when the run was already in the store).
    pub rows: usize,
    pub already_present: bool,
}

/// `20261122T090249-4e8e1820` → `2026-11-22T09:02:49Z` (run ids start with their UTC time).
fn time_of_run_id(run_id: &str) -> Option<String> {
    let t = chrono::NaiveDateTime::parse_from_str(run_id.get(..15)?, "%Y%m%dT%H%M%S").ok()?;
    Some(t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// The `run.json` files under `dir` (one level of sub-folders, sorted), or `dir` itself if it is a file.
pub fn find_runs(dir: &Path) -> Vec<PathBuf> {
    if dir.is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut out = Vec::new();
    if dir.join("run.json").is_file() {
        out.push(dir.join("run.json"));
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path().join("run.json");
            if p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Import one saved run: `text` is the content of `path`, read by the
/// caller (capped, and refused before being read whole when it does not
/// start like JSON: the app reads it with `aisp_profile::input_file`).
pub fn import_run(store: &Store, path: &Path, text: &str) -> Result<Imported, ImportError> {
    let run: SavedRun = serde_json::from_str(text).map_err(|e| ImportError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let serr = |e: aisp_store::StoreError| ImportError::Store(e.to_string());
    let present: i64 = store
        .conn()
        .query_row(
            "SELECT COUNT(*) FROM benchmark_results WHERE run_id = ?1",
            [&run.run_id],
            |r| r.get(0),
        )
        .map_err(|e| ImportError::Store(e.to_string()))?;
    let imported = |rows, already_present| Imported {
        path: path.display().to_string(),
        run_id: run.run_id.clone(),
        device_name: run.device.name.clone(),
        rows,
        already_present,
    };
    if present > 0 {
        return Ok(imported(0, true));
    }
    let created_at = time_of_run_id(&run.run_id).ok_or_else(|| ImportError::Parse {
        path: path.to_path_buf(),
        message: format!("run_id `{}` does not start with its UTC time", run.run_id),
    })?;
    let meta = RunMeta {
        run_id: run.run_id.clone(),
        created_at,
        tool: "aisp_benchmark_run (imported)".into(),
        device: run.device.clone(),
        driver_version: run.versions.driver.clone(),
        cuda_driver_version: run.versions.cuda_driver.clone(),
        nvrtc_version: run.versions.nvrtc.clone(),
        cublas_version: run.versions.cublas.clone(),
        host: None,
        seed: run.seed,
        size_class: run.size.clone().unwrap_or_else(|| "medium".into()),
    };
    let mut rows: Vec<VariantResult> = Vec::new();
    let roofs = &run.roofs;
    for (kind, roof, metric) in [
        ("memory", &roofs.memory, Metric::GbPerS),
        ("fp32", &roofs.fp32, Metric::TflopPerS),
        ("pcie_h2d", &roofs.pcie_h2d, Metric::GbPerS),
    ] {
        if let Some(r) = roof {
            rows.push(record::roof_row(kind, r.value, &r.how, metric));
        }
    }
    for (kind, r) in &roofs.tensor {
        rows.push(record::roof_row(kind, r.value, &r.how, Metric::TflopPerS));
    }
    rows.extend(run.results.iter().cloned());
    record::insert(store, &meta, &rows).map_err(serr)?;
    for s in &run.speedups {
        let v = serde_json::to_string(s).unwrap_or_default();
        store
            .conn()
            .execute(
                "UPDATE benchmark_results SET details = json_set(COALESCE(details, '{}'), '$.speedup', json(?1))
                 WHERE run_id = ?2 AND target = ?3 AND variant = ?4",
                rusqlite::params![v, run.run_id, s.target, s.variant],
            )
            .map_err(|e| ImportError::Store(e.to_string()))?;
    }
    Ok(imported(rows.len(), false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_give_their_time() {
        assert_eq!(
            time_of_run_id("20261122T090249-4e8e1820").as_deref(),
            Some("2026-11-22T09:02:49Z")
        );
        assert_eq!(time_of_run_id("nope"), None);
    }

    #[test]
    fn the_h100_run_imports_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("examples/benchmark/h100/run.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let first = import_run(&store, &path, &text).unwrap();
        // 40 results and 7 roofs (memory, fp32, PCIe and 4 tensor-core precisions).
        assert!(!first.already_present);
        assert_eq!(first.rows, 40 + 7);
        let again = import_run(&store, &path, &text).unwrap();
        assert!(again.already_present && again.rows == 0);
        let speedup: f64 = store
            .conn()
            .query_row(
                "SELECT json_extract(details, '$.speedup.speedup') FROM benchmark_results
                 WHERE target = 'memory_coalescing' AND variant = 'coalesced_copy'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!((speedup - 7.894694712222879).abs() < 1e-12);
    }
}
