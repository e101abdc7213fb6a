//! A store written by the first release (jobs only) opens in this build: every
//! later migration applies, and the old job is still reported. A store cut to
//! 0 bytes is moved aside and reported, not silently started over.

use std::path::{Path, PathBuf};

use crate::common;

#[test]
fn a_first_release_store_upgrades_and_keeps_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("aisp.sqlite");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/store-v1.sqlite"),
        &path,
    )
    .unwrap();
    let store = aisp_store::Store::open(&path).unwrap();
    let versions = store.versions().unwrap();
    for m in aisp_store::MIGRATIONS {
        let (_, v) = versions
            .iter()
            .find(|(c, _)| c == m.component)
            .unwrap_or_else(|| panic!("component {} not migrated", m.component));
        assert!(*v >= m.version);
    }
    let jobs = aisp::jobs::JobManager::default();
    let rec = jobs.status(&store, "job_00000000000000aa").unwrap();
    assert_eq!(rec.state, aisp::jobs::JobState::Succeeded);
    assert_eq!(
        rec.result.map(serde_json::Value::Object),
        Some(serde_json::json!({"samples": []}))
    );
    assert_eq!(rec.tool, "aisp_system_monitor");
}

/// `aisp --format json <args>` with a private home.
fn aisp_json(home: &Path, args: &[&str]) -> serde_json::Value {
    let out = common::aisp(home)
        .env("RUST_LOG", "error")
        .args(["--format", "json"])
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

#[test]
fn an_empty_store_file_is_moved_aside_and_reported() {
    let home = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/benchmark");
    let imported = aisp_json(
        home.path(),
        &["benchmark", "import", examples.to_str().unwrap()],
    );
    assert_eq!(imported["rows_added"], 47, "{imported}");
    let store = home.path().join("aisp.sqlite");
    // The store file truncated to nothing (a crash at the wrong moment, a full disk).
    std::fs::OpenOptions::new()
        .write(true)
        .open(&store)
        .unwrap()
        .set_len(0)
        .unwrap();
    let status = aisp_json(home.path(), &["status"]);
    let repaired = &status["store"]["repaired"];
    assert!(repaired.is_object(), "a 0-byte store is reported: {status}");
    let moved = PathBuf::from(repaired["moved_to"].as_str().unwrap());
    assert!(moved.is_file(), "{moved:?} kept for inspection");
    assert!(
        repaired["problem"].as_str().unwrap().contains("0 bytes"),
        "{repaired}"
    );
    assert!(
        repaired["summary"].as_str().unwrap().contains("lost"),
        "{repaired}"
    );
    assert_eq!(status["store"]["ok"], true);
    // The fresh store works.
    let again = aisp_json(
        home.path(),
        &["benchmark", "import", examples.to_str().unwrap()],
    );
    assert_eq!(again["rows_added"], 47, "{again}");
}
