//! A store written by the first release (jobs only) opens in this build: every
//! later migration applies, and the old job is still reported.

use std::path::Path;

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
    for m in aisp_store::migrations::MIGRATIONS {
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
