//! Decoded profile tables kept between calls (`profile::loaded`): answers from
//! kept tables equal a cold read, a changed file is read again, the budget
//! evicts the least recently used tables, long scans send progress.

mod profile_common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use aisp::app::AppState;
use aisp::config::Config;
use aisp::context::{OpContext, Progress};
use aisp::registry;
use serde_json::{Value, json};

/// The nine questions an assistant asks first about one export.
const NINE: [&str; 9] = [
    "aisp_profile_info",
    "aisp_profile_summary",
    "aisp_profile_kernels",
    "aisp_profile_gaps",
    "aisp_profile_rules",
    "aisp_profile_memory",
    "aisp_profile_nvtx",
    "aisp_profile_iterations",
    "aisp_profile_nccl",
];

fn tmp_home(tag: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("profile-tables")
        .join(format!("{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn app(tag: &str, budget: u64) -> Arc<AppState> {
    let mut cfg = Config::with_home(tmp_home(tag));
    cfg.profile_tables_bytes = budget;
    AppState::new(cfg)
}

fn call(app: &Arc<AppState>, tool: &str, args: Value) -> Value {
    let t = registry::find(tool).unwrap_or_else(|| panic!("no tool {tool}"));
    t.op.call_json(&OpContext::detached(app.clone()), args)
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// The answer without the parts that name the file (copies differ only there).
fn body(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("path");
        m.remove("sqlite_path");
    }
    v
}

#[test]
fn kept_tables_give_the_answers_of_a_cold_read() {
    for name in ["train_good.sqlite", "ddp.sqlite", "h100_2gpu_1s.sqlite"] {
        let path = profile_common::fixture(name).display().to_string();
        let cold = app(&format!("cold-{name}"), 0);
        let warm = app(&format!("warm-{name}"), 1 << 30);
        for (round, extra) in [json!({}), json!({"device": 0})].into_iter().enumerate() {
            for tool in NINE {
                let mut args = json!({"path": path});
                if tool != "aisp_profile_info" && tool != "aisp_profile_rules" {
                    for (k, v) in extra.as_object().unwrap() {
                        args[k] = v.clone();
                    }
                }
                // The cold app keeps nothing; its answer cache never hits
                // (each tool once per round, rounds differ in arguments).
                let want = call(&cold, tool, args.clone());
                let got = call(&warm, tool, args);
                assert_eq!(got, want, "{name} {tool} round {round}");
            }
        }
        let cold_status = cold.profile_tables.status();
        assert_eq!(cold_status.used_bytes, 0);
        assert_eq!(cold_status.hits, 0);
        let s = warm.profile_tables.status();
        assert!(s.hits > 20, "{name}: {s:?}");
        assert_eq!(s.files.len(), 1);
        assert!(s.used_bytes > 0 && s.used_bytes <= s.budget_bytes);
        // Each table was decoded once for the 18 questions.
        assert_eq!(s.loads as usize, s.files[0].tables.len(), "{name}: {s:?}");
    }
}

fn copy_fixture(name: &str, to: &Path) -> PathBuf {
    let dst = to.join(name);
    std::fs::copy(profile_common::fixture(name), &dst).unwrap();
    dst
}

#[test]
fn a_changed_file_is_read_again_and_its_old_tables_dropped() {
    let dir = tmp_home("changed-files");
    let file = copy_fixture("train_good.sqlite", &dir);
    let path = file.display().to_string();
    let warm = app("changed", 1 << 30);
    let args = json!({"path": path, "limit": 3});
    let before = call(&warm, "aisp_profile_kernels", args.clone());
    // Rewrite the copy: every kernel twice as long.
    {
        let conn = rusqlite::Connection::open(&file).unwrap();
        conn.execute(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = \"end\" + (\"end\" - start)",
            [],
        )
        .unwrap();
    }
    let after = call(
        &warm,
        "aisp_profile_kernels",
        json!({"path": path, "limit": 4}),
    );
    let cold = call(
        &app("changed-cold", 0),
        "aisp_profile_kernels",
        json!({"path": path, "limit": 4}),
    );
    assert_eq!(after, cold);
    // Every kernel twice as long: the total doubles.
    assert_eq!(
        after["total_ns"].as_i64().unwrap(),
        2 * before["total_ns"].as_i64().unwrap()
    );
    let s = warm.profile_tables.status();
    assert_eq!(s.files.len(), 1, "{s:?}");
    assert!(s.dropped_changed > 0, "{s:?}");
}

#[test]
fn the_budget_evicts_the_least_recently_used_file() {
    let dir = tmp_home("lru-files");
    // Two copies: same content, different files (different inodes).
    let a = copy_fixture("train_good.sqlite", &dir.join("a").tap_mkdir());
    let b = copy_fixture("train_good.sqlite", &dir.join("b").tap_mkdir());
    let probe = app("lru-probe", 1 << 30);
    call(&probe, "aisp_profile_info", json!({"path": a}));
    let one_file = probe.profile_tables.status().used_bytes;
    assert!(one_file > 0);

    // Room for one file's tables, not two.
    let tiny = app("lru", one_file + one_file / 2);
    call(&tiny, "aisp_profile_info", json!({"path": a}));
    call(&tiny, "aisp_profile_info", json!({"path": b}));
    let s = tiny.profile_tables.status();
    assert!(s.evictions > 0, "{s:?}");
    assert!(s.used_bytes <= s.budget_bytes);
    assert_eq!(
        s.files[0].path,
        b.display().to_string(),
        "newest first: {s:?}"
    );
    let loads = s.loads;
    // b is kept whole: asking again decodes nothing.
    call(&tiny, "aisp_profile_kernels", json!({"path": b}));
    assert_eq!(tiny.profile_tables.status().loads, loads);
    // a lost tables to b: asking about a decodes them again.
    call(&tiny, "aisp_profile_kernels", json!({"path": a}));
    assert!(tiny.profile_tables.status().loads > loads);

    // A budget smaller than a table: decoded for the call, not kept, and said so.
    let none = app("lru-none", 1);
    let got = call(&none, "aisp_profile_kernels", json!({"path": a}));
    let want = call(
        &app("lru-none-cold", 0),
        "aisp_profile_kernels",
        json!({"path": a}),
    );
    assert_eq!(body(got), body(want));
    let s = none.profile_tables.status();
    assert_eq!(s.used_bytes, 0);
    assert!(
        s.not_kept
            .iter()
            .any(|n| n.table == aisp::profile::loaded::TableKind::Kernels),
        "{s:?}"
    );
    // aisp_status shows the same.
    let status = call(&none, "aisp_status", json!({}));
    assert_eq!(status["profile_tables"]["budget_bytes"], 1);
    assert!(status["profile_tables"]["not_kept"].as_array().is_some());
}

#[test]
fn scans_past_the_threshold_send_progress() {
    let mut cfg = Config::with_home(tmp_home("progress"));
    cfg.progress_after = std::time::Duration::ZERO;
    let app = AppState::new(cfg);
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let sink = seen.clone();
    let ctx = OpContext::new(
        app.clone(),
        "aisp_profile_info",
        tokio_util::sync::CancellationToken::new(),
        None,
        Some(Arc::new(move |p| sink.lock().unwrap().push(p))),
    );
    let path = profile_common::fixture("ddp.sqlite").display().to_string();
    registry::find("aisp_profile_info")
        .unwrap()
        .op
        .call_json(&ctx, json!({"path": path}))
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    let osrt: Vec<&Progress> = seen
        .iter()
        .filter(|p| p.message.as_deref().unwrap_or("").contains("OSRT_API"))
        .collect();
    assert!(!osrt.is_empty(), "{seen:?}");
    let last = osrt.last().unwrap();
    assert_eq!(
        Some(last.progress),
        last.total,
        "the last report says done: {seen:?}"
    );

    // Below the threshold: no progress.
    let mut cfg = Config::with_home(tmp_home("progress-quiet"));
    cfg.progress_after = std::time::Duration::from_secs(3600);
    let quiet = AppState::new(cfg);
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let sink = seen.clone();
    let ctx = OpContext::new(
        quiet,
        "aisp_profile_info",
        tokio_util::sync::CancellationToken::new(),
        None,
        Some(Arc::new(move |p| sink.lock().unwrap().push(p))),
    );
    registry::find("aisp_profile_info")
        .unwrap()
        .op
        .call_json(&ctx, json!({"path": path}))
        .unwrap();
    let seen = seen.lock().unwrap();
    assert!(
        seen.iter()
            .all(|p| !p.message.as_deref().unwrap_or("").contains("reading")),
        "{seen:?}"
    );
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}
