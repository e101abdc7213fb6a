//! Decoded profile tables kept between calls (`profile::loaded`): answers from
//! kept tables equal a cold read, a changed file is read again, the budget
//! evicts the least recently used tables, long scans send progress.

use crate::profile_common;

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
            .any(|n| n.table == aisp_profile::loaded::TableKind::Kernels),
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

/// Products derived from the tables (per-name OS runtime statistics, gap
/// explanations) are kept with them: counted against the budget, shared by
/// the questions that need them, equal to a cold answer, and dropped with the
/// tables when the file changes.
#[test]
fn derived_products_are_kept_counted_shared_and_dropped_with_the_file() {
    use aisp_profile::loaded::TableKind;
    let dir = tmp_home("derived");
    let file = copy_fixture("ddp.sqlite", &dir);
    let path = file.display().to_string();
    let warm = app("derived-warm", 1 << 30);
    let kept = |app: &Arc<AppState>| -> Vec<(TableKind, u64)> {
        let s = app.profile_tables.status();
        assert_eq!(
            s.used_bytes,
            s.files
                .iter()
                .flat_map(|f| &f.tables)
                .map(|t| t.1)
                .sum::<u64>(),
            "every kept product is counted: {s:?}"
        );
        s.files
            .first()
            .map(|f| f.tables.clone())
            .unwrap_or_default()
    };
    let ask = |app: &Arc<AppState>, tool: &str, extra: Value| {
        let mut args = json!({"path": path});
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        call(app, tool, args)
    };
    let summary = ask(&warm, "aisp_profile_summary", json!({}));
    let stats = kept(&warm)
        .into_iter()
        .find(|t| t.0 == TableKind::OsrtNameStats)
        .expect("osrt_sum's statistics kept");
    assert!(stats.1 > 0);
    // Another limit is answered from the kept statistics, equal to a cold read.
    let loads = warm.profile_tables.status().loads;
    let five = ask(&warm, "aisp_profile_summary", json!({"limit": 5}));
    assert_eq!(
        warm.profile_tables.status().loads,
        loads,
        "nothing decoded again"
    );
    let cold = app("derived-cold", 0);
    assert_eq!(
        five,
        ask(&cold, "aisp_profile_summary", json!({"limit": 5}))
    );
    assert_eq!(summary, ask(&cold, "aisp_profile_summary", json!({})));
    // One device's processes cannot use the whole-file statistics: they are
    // listed and counted as before, the same answer as cold.
    let one = ask(&warm, "aisp_profile_summary", json!({"device": 0}));
    assert_eq!(
        one,
        ask(&cold, "aisp_profile_summary", json!({"device": 0}))
    );

    // gaps explains gaps; rules explains the largest again: from what gaps kept.
    let gaps = ask(&warm, "aisp_profile_gaps", json!({}));
    let explained = kept(&warm)
        .into_iter()
        .find(|t| t.0 == TableKind::GapExplanations)
        .expect("gap explanations kept");
    assert!(explained.1 > 0);
    let rules = ask(&warm, "aisp_profile_rules", json!({}));
    assert_eq!(gaps, ask(&cold, "aisp_profile_gaps", json!({})));
    assert_eq!(rules, ask(&cold, "aisp_profile_rules", json!({})));
    assert_eq!(
        kept(&cold),
        vec![],
        "a zero budget keeps no derived product"
    );

    // The file changes (every OS runtime call twice as long): recomputed.
    {
        let conn = rusqlite::Connection::open(&file).unwrap();
        conn.execute(
            "UPDATE OSRT_API SET \"end\" = \"end\" + (\"end\" - start)",
            [],
        )
        .unwrap();
    }
    let after = ask(&warm, "aisp_profile_summary", json!({}));
    assert_ne!(after["osrt_sum"], summary["osrt_sum"]);
    assert_eq!(
        after,
        ask(&app("derived-cold2", 0), "aisp_profile_summary", json!({}))
    );
    let total = |v: &Value| v["osrt_sum"]["rows"][0]["total_ns"].as_i64().unwrap();
    assert_eq!(total(&after), 2 * total(&summary));
    let s = warm.profile_tables.status();
    assert_eq!(
        s.files.len(),
        1,
        "the old version's products are gone: {s:?}"
    );
    assert!(
        !s.files[0]
            .tables
            .iter()
            .any(|t| t.0 == TableKind::GapExplanations),
        "{s:?}"
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
