//! The profile operations as the front ends call them: argument checks,
//! errors on bad files (never a panic), read-only access, the result cache.

use crate::profile_common;

use std::path::Path;

use aisp::app::AppState;
use aisp::context::OpContext;
use aisp::error::ErrorKind;
use aisp::registry;
use serde_json::{Value, json};

fn call(app: &std::sync::Arc<AppState>, tool: &str, args: Value) -> Result<Value, aisp::OpError> {
    let t = registry::find(tool).unwrap_or_else(|| panic!("no tool {tool}"));
    t.op.call_json(&OpContext::detached(app.clone()), args)
}

fn path_of(name: &str) -> String {
    profile_common::fixture(name).display().to_string()
}

#[test]
fn every_profile_tool_answers_on_a_real_export_with_version_and_scope() {
    let app = AppState::for_tests();
    let path = path_of("train_good.sqlite");
    for tool in [
        "aisp_profile_info",
        "aisp_profile_summary",
        "aisp_profile_kernels",
        "aisp_profile_utilization",
        "aisp_profile_gaps",
        "aisp_profile_memory",
        "aisp_profile_nvtx",
        "aisp_profile_iterations",
        "aisp_profile_nccl",
        "aisp_profile_overlap",
        "aisp_profile_rules",
    ] {
        let v = call(&app, tool, json!({"path": path})).unwrap_or_else(|e| panic!("{tool}: {e}"));
        assert_eq!(v["export"]["schema_version"], "3.20.3", "{tool}");
        assert_eq!(v["export"]["product_version"], "2025.3.2.0", "{tool}");
    }
    let v = call(
        &app,
        "aisp_profile_summary",
        json!({"path": path, "device": 0, "limit": 3, "reports": ["cuda_gpu_kern_sum"]}),
    )
    .unwrap();
    assert_eq!(v["scope"]["device"], 0);
    let rows = v["cuda_gpu_kern_sum"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(v["cuda_gpu_kern_sum"]["rows_total"], 9);
    assert_eq!(rows[0]["time_pct"], 32.9);
    assert!(v["cuda_api_sum"].is_null());
    let v = call(
        &app,
        "aisp_profile_gaps",
        json!({"path": path, "min_gap_ms": 5.0, "limit": 2}),
    )
    .unwrap();
    let steady = v["devices"][0]["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["window"]["kind"] == "steady")
        .unwrap()
        .clone();
    // sqlite3: gaps of 5 ms or more between the device's kernels, copies and memsets inside the steady window
    // [7789729648, 8142734358) → 38 (the sleeps).
    assert_eq!(steady["count"], 38);
    assert_eq!(v["devices"][0]["gaps"].as_array().unwrap().len(), 2);
}

#[test]
fn bad_arguments_are_invalid_input_with_hints() {
    let app = AppState::for_tests();
    let path = path_of("train_good.sqlite");
    let e = call(
        &app,
        "aisp_profile_summary",
        json!({"path": path, "reports": ["nope"]}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidInput);
    assert!(e.message.contains("cuda_gpu_kern_sum"));
    let e = call(
        &app,
        "aisp_profile_kernels",
        json!({"path": path, "device": 3}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidInput);
    assert!(e.message.contains("[0]"), "{}", e.message);
    let e = call(
        &app,
        "aisp_profile_kernels",
        json!({"path": path, "limit": 0}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidInput);
    let e = call(
        &app,
        "aisp_profile_kernels",
        json!({"path": path, "devcie": 0}),
    )
    .unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::InvalidInput,
        "unknown fields are refused"
    );
    let e = call(
        &app,
        "aisp_profile_utilization",
        json!({"path": path, "start_ns": 1, "end_ns": 2}),
    )
    .unwrap_err();
    assert!(e.message.contains("misses the capture"), "{}", e.message);
    let e = call(
        &app,
        "aisp_profile_nvtx",
        json!({"path": path, "nvtx_range": "nope"}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidInput);
    assert!(!e.hint.is_empty());
}

#[test]
fn broken_files_are_errors_not_panics() {
    let app = AppState::for_tests();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let e = call(
        &app,
        "aisp_profile_info",
        json!({"path": d.join("missing.sqlite")}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    std::fs::write(d.join("empty.sqlite"), b"").unwrap();
    std::fs::write(
        d.join("text.sqlite"),
        b"hello, this is not a database at all",
    )
    .unwrap();
    let good = std::fs::read(profile_common::fixture("train_good.sqlite")).unwrap();
    std::fs::write(d.join("truncated.sqlite"), &good[..good.len() / 2]).unwrap();
    // Damage pages 150–199 (kernel and runtime table leaves in this fixture),
    // keeping the schema readable, and separately the schema page itself.
    let mut corrupt = good.clone();
    for page in 150..200 {
        let off = (page - 1) * 4096;
        for b in corrupt[off + 8..off + 4096].iter_mut() {
            *b = 0xA5;
        }
    }
    std::fs::write(d.join("corrupt.sqlite"), &corrupt).unwrap();
    let mut bad_schema = good.clone();
    for b in bad_schema[100..4096].iter_mut() {
        *b = 0x5A;
    }
    std::fs::write(d.join("bad_schema.sqlite"), &bad_schema).unwrap();
    {
        let c = rusqlite::Connection::open(d.join("other.sqlite")).unwrap();
        c.execute_batch("CREATE TABLE customers (id INTEGER, name TEXT); INSERT INTO customers VALUES (1, 'a');").unwrap();
    }
    for name in [
        "empty.sqlite",
        "text.sqlite",
        "truncated.sqlite",
        "other.sqlite",
        "bad_schema.sqlite",
    ] {
        let e = call(&app, "aisp_profile_info", json!({"path": d.join(name)})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput, "{name}: {e}");
        assert!(e.hint.contains("nsys export"), "{name}");
    }
    // Corruption deep inside the file surfaces when a table is read.
    for tool in [
        "aisp_profile_summary",
        "aisp_profile_rules",
        "aisp_profile_kernels",
        "aisp_profile_info",
    ] {
        let e = call(&app, tool, json!({"path": d.join("corrupt.sqlite")})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput, "{tool}: {e}");
        assert!(e.message.contains("malformed"), "{tool}: {e}");
    }
    let e = call(&app, "aisp_profile_info", json!({"path": d})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidInput, "a directory");
    let e = call(&app, "aisp_profile_info", json!({"path": ""})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidInput);
}

fn fingerprint(dir: &Path) -> Vec<(String, u64, std::time::SystemTime, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let m = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                m.len(),
                m.modified().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn profiles_are_opened_read_only_and_never_modified() {
    let app = AppState::for_tests();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("train_good.sqlite");
    std::fs::copy(profile_common::fixture("train_good.sqlite"), &copy).unwrap();
    let mut perms = std::fs::metadata(&copy).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&copy, perms).unwrap();
    let before = fingerprint(dir.path());
    for tool in [
        "aisp_profile_info",
        "aisp_profile_summary",
        "aisp_profile_rules",
        "aisp_profile_nvtx",
        "aisp_profile_gaps",
    ] {
        call(&app, tool, json!({"path": copy})).unwrap_or_else(|e| panic!("{tool}: {e}"));
    }
    assert_eq!(
        before,
        fingerprint(dir.path()),
        "no byte, mtime or sidecar file changed"
    );
}

#[test]
fn answers_are_cached_by_file_identity() {
    let app = AppState::for_tests();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("h.sqlite");
    std::fs::copy(profile_common::fixture("healthy_1pct.sqlite"), &copy).unwrap();
    let a = call(
        &app,
        "aisp_profile_kernels",
        json!({"path": copy, "limit": 1}),
    )
    .unwrap();
    let rows: i64 = app
        .store()
        .unwrap()
        .conn()
        .query_row(
            "SELECT COUNT(*) FROM profile_results WHERE op = 'kernels'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 1);
    // Same file under another name: the same identity, served from the cache.
    let other = dir.path().join("h2.sqlite");
    std::fs::copy(&copy, &other).unwrap();
    let f = std::fs::File::options().write(true).open(&other).unwrap();
    f.set_modified(std::fs::metadata(&copy).unwrap().modified().unwrap())
        .unwrap();
    drop(f);
    let b = call(
        &app,
        "aisp_profile_kernels",
        json!({"path": other, "limit": 1}),
    )
    .unwrap();
    assert_eq!(a["rows"], b["rows"]);
    // A changed file (new mtime) is a new identity: recomputed, a second row.
    let f = std::fs::File::options().write(true).open(&copy).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    drop(f);
    call(
        &app,
        "aisp_profile_kernels",
        json!({"path": copy, "limit": 1}),
    )
    .unwrap();
    let rows: i64 = app
        .store()
        .unwrap()
        .conn()
        .query_row(
            "SELECT COUNT(*) FROM profile_results WHERE op = 'kernels'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 2);
}

#[test]
fn nsys_rep_without_nsys_says_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("run.nsys-rep");
    std::fs::write(&rep, b"fake report").unwrap();
    let opts = aisp_profile::OpenOptions {
        cache_dir: Some(dir.path().join("cache")),
        nsys: Some(dir.path().join("no-nsys-here")),
        ..Default::default()
    };
    let e = aisp_profile::open_with(&rep, &opts).unwrap_err();
    let op: aisp::OpError = e.into();
    assert_eq!(op.kind, ErrorKind::NotFound);
    assert!(op.hint.contains("Install Nsight Systems"), "{}", op.hint);
    assert!(op.hint.contains("nsys export --type sqlite"));
}

/// The answer cache is keyed by the file's identity, not its spelling: a cached answer names the file
/// as the caller spelt it, not as the first caller did.
#[test]
fn a_cached_answer_names_the_file_as_its_caller_spelt_it() {
    let app = AppState::for_tests();
    let abs = path_of("train_good.sqlite");
    let p = Path::new(&abs);
    let other = format!(
        "{}/./{}",
        p.parent().unwrap().display(),
        p.file_name().unwrap().to_str().unwrap()
    );
    for tool in [
        "aisp_profile_info",
        "aisp_profile_kernels",
        "aisp_profile_gaps",
        "aisp_profile_rules",
    ] {
        let first = call(&app, tool, json!({"path": abs})).unwrap();
        let cached = call(&app, tool, json!({"path": other})).unwrap();
        assert_eq!(first["path"], abs.as_str(), "{tool}");
        assert_eq!(
            cached["path"],
            other.as_str(),
            "{tool}: the cached answer echoes the first spelling"
        );
        let again = call(&app, tool, json!({"path": abs})).unwrap();
        assert_eq!(again["path"], abs.as_str(), "{tool}");
    }
}

/// A compressed export gets the hint to decompress it, not to export it again.
#[test]
fn a_compressed_export_is_told_to_decompress() {
    let app = AppState::for_tests();
    let xz = profile_common::data_dir()
        .join("ddp.sqlite.xz")
        .display()
        .to_string();
    let e = call(&app, "aisp_profile_info", json!({"path": xz})).unwrap_err();
    assert!(
        e.hint.contains("xz -dk") && e.hint.contains("decompress"),
        "{}",
        e.hint
    );
    assert!(!e.hint.contains("nsys export"), "{}", e.hint);
}

/// An explicit limit keeps the mix of the default (steady-state gaps and the largest of the rest), so
/// the largest gaps are never hidden behind the steady ones, and says what it left out.
#[test]
fn an_explicit_gap_limit_keeps_the_largest_gaps_and_says_what_is_left_out() {
    let app = AppState::for_tests();
    let path = path_of("train_good.sqlite");
    let all = call(
        &app,
        "aisp_profile_gaps",
        json!({"path": path, "limit": 10000}),
    )
    .unwrap();
    let largest = all["devices"][0]["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["length_ns"].as_i64().unwrap())
        .max()
        .unwrap();
    let v = call(
        &app,
        "aisp_profile_gaps",
        json!({"path": path, "limit": 15}),
    )
    .unwrap();
    let d = &v["devices"][0];
    let listed = d["gaps"].as_array().unwrap();
    assert!(listed.len() <= 15);
    assert!(
        listed
            .iter()
            .any(|g| g["length_ns"].as_i64() == Some(largest)),
        "the largest gap ({largest} ns) is listed"
    );
    if d["gaps_total"].as_u64().unwrap() > listed.len() as u64 {
        let notes = v["left_out"].to_string();
        assert!(notes.contains("more gaps"), "{notes}");
    }
}
