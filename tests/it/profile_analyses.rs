//! The five profile analyses of issue 23 through the real binary (CLI with
//! `--format json`, and MCP over stdio), on captures made on an H100
//! (tests/data/capture/README.md). Every expected number was computed
//! independently from the same files with Python (csv, json with Decimal
//! timestamps, lzma).

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/capture")
        .join(name)
        .display()
        .to_string()
}

fn run(home: &Path, args: &[&str]) -> (bool, Value) {
    let out = common::aisp(home)
        .args(["--format", "json"])
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), v)
}

fn ok(home: &Path, args: &[&str]) -> Value {
    let (success, v) = run(home, args);
    assert!(success, "{args:?} failed: {v}");
    v
}

fn close(a: &Value, b: f64, tol: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() <= tol)
}

fn kernel<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kernel_name"] == name)
        .unwrap_or_else(|| panic!("no kernel {name} in {v}"))
}

#[test]
fn memory_patterns_flag_each_lesson_baseline_and_clear_the_fixed_variants() {
    let home = tempfile::tempdir().unwrap();
    let v = ok(
        home.path(),
        &[
            "analyze",
            "memory-patterns",
            &data("lessons.ncu-raw.csv.xz"),
            "--details-path",
            &data("lessons.ncu-details.csv.xz"),
        ],
    );
    assert_eq!(v["kernel_count"], 7);
    assert_eq!(v["flagged"], 4);
    assert_eq!(v["missing_metrics"], json!([]));

    // memory_coalescing: the strided copy's loads and stores each touch 32 sectors per request.
    let k = kernel(&v, "copy_f32_strided");
    assert_eq!(k["verdict"], "flagged");
    assert!(close(&k["global_loads"]["sectors_per_request"], 32.0, 1e-9));
    assert!(close(&k["global_loads"]["efficiency_pct"], 12.5, 1e-9));
    assert!(close(
        &k["global_stores"]["sectors_per_request"],
        32.248_908_996_582_03,
        1e-9
    ));
    assert!(close(
        &k["global_stores"]["efficiency_pct"],
        12.403_520_380_872_26,
        1e-9
    ));
    let p = &k["problems"][0];
    assert_eq!(p["pattern"], "uncoalesced_global");
    assert_eq!(p["severity"], "high");
    assert_eq!(p["ncu_rule"], "UncoalescedGlobalAccess");
    assert!(close(&p["ncu_estimated_speedup_pct"], 85.42, 1e-9));
    // 85.42 % of 78.528 µs.
    assert!(close(&p["stake_ns"], 78_528.0 * 0.8542, 1e-6));
    assert_eq!(
        p["evidence"],
        "global loads: 32.0 sectors per request, 12.5 % of the fetched bytes used (3670016 excess sectors); \
         global stores: 32.2 sectors per request, 12.4 % of the fetched bytes used (3702641 excess sectors)"
    );
    assert_eq!(kernel(&v, "copy_f32")["verdict"], "clean");
    assert!(close(
        &kernel(&v, "copy_f32")["global_stores"]["sectors_per_request"],
        4.0,
        1e-9
    ));

    // warp_divergence: half the lanes masked off on average.
    let k = kernel(&v, "divergent_branch");
    assert_eq!(k["verdict"], "flagged");
    assert!(close(
        &k["divergence"]["threads_per_instruction"],
        16.922_316_245_738_99,
        1e-9
    ));
    assert_eq!(k["divergence"]["divergent_branches"], 131_072.0);
    assert_eq!(k["problems"][0]["pattern"], "warp_divergence");
    assert_eq!(k["problems"][0]["ncu_rule"], "ThreadDivergence");
    assert!(close(
        &k["problems"][0]["ncu_estimated_speedup_pct"],
        38.76,
        1e-9
    ));
    let k = kernel(&v, "predicated_select");
    assert_eq!(k["verdict"], "clean");
    assert!(close(
        &k["divergence"]["threads_per_instruction"],
        32.0,
        1e-9
    ));
    assert_eq!(k["divergence"]["divergent_branches"], 0.0);

    // transpose_bank_conflicts: naive has strided stores; smem_tiled fixes them
    // but reads a tile column (32-way conflicts); the padded tile is clean.
    let k = kernel(&v, "transpose_naive");
    assert_eq!(k["problems"][0]["pattern"], "uncoalesced_global");
    assert!(close(
        &k["global_stores"]["sectors_per_request"],
        32.219_932_556_152_344,
        1e-9
    ));
    assert!(close(&k["global_loads"]["efficiency_pct"], 100.0, 1e-9));
    let k = kernel(&v, "transpose_tiled");
    assert_eq!(k["problems"].as_array().unwrap().len(), 1);
    assert_eq!(k["problems"][0]["pattern"], "bank_conflicts");
    assert_eq!(k["problems"][0]["ncu_rule"], "UncoalescedSharedAccess");
    assert!(close(
        &k["shared_loads"]["conflicts_per_request"],
        31.313_179_016_113_28,
        1e-9
    ));
    assert!(close(
        &k["shared_loads"]["wavefronts_per_request"],
        32.313_179_016_113_28,
        1e-9
    ));
    assert_eq!(
        k["problems"][0]["evidence"],
        "shared loads: 31.3 bank conflicts per request (32.3 wavefronts per request; 1 is conflict-free)"
    );
    let k = kernel(&v, "transpose_tiled_padded");
    assert_eq!(k["verdict"], "clean");
    assert!(close(
        &k["shared_loads"]["conflicts_per_request"],
        0.040_830_612_182_617_19,
        1e-9
    ));
    // Flagged kernels come first, by time at stake.
    let order: Vec<&str> = v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kernel_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        order[..4],
        [
            "transpose_naive",
            "transpose_tiled",
            "copy_f32_strided",
            "divergent_branch"
        ]
    );
}

#[test]
fn memory_patterns_without_the_counters_say_insufficient_signal() {
    let home = tempfile::tempdir().unwrap();
    let v = ok(
        home.path(),
        &[
            "analyze",
            "memory-patterns",
            &data("train_good.ncu-raw.csv"),
        ],
    );
    assert_eq!(v["flagged"], 0);
    assert!(
        v["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["verdict"] == "insufficient_signal")
    );
    // The basic set measures the duration, none of the pattern counters.
    assert_eq!(v["missing_metrics"].as_array().unwrap().len(), 17);
    assert!(v["left_out"][0].as_str().unwrap().contains("not collected"));
}

#[test]
fn memory_patterns_run_nothing_unless_execution_is_allowed() {
    let home = tempfile::tempdir().unwrap();
    let (success, v) = run(
        home.path(),
        &[
            "analyze",
            "memory-patterns",
            "--json",
            r#"{"command": ["python3", "train.py"]}"#,
        ],
    );
    assert!(!success);
    assert_eq!(v["error"]["kind"], "exec_not_allowed", "{v}");
    let (success, v) = run(home.path(), &["analyze", "memory-patterns"]);
    assert!(!success);
    assert_eq!(v["error"]["kind"], "invalid_input");
}

#[test]
fn ncu_compare_reports_each_lesson_fix_per_kernel() {
    let home = tempfile::tempdir().unwrap();
    let v = ok(
        home.path(),
        &[
            "profile",
            "ncu-compare",
            &data("lesson_pair_before.ncu-raw.csv.xz"),
            &data("lesson_pair_after.ncu-raw.csv.xz"),
            "--before-details",
            &data("lesson_pair_before.ncu-details.csv.xz"),
            "--after-details",
            &data("lesson_pair_after.ncu-details.csv.xz"),
        ],
    );
    assert_eq!(v["verdict"], "faster");
    assert!(close(&v["matched_before_ns"], 420_128.0, 1e-6));
    assert!(close(&v["matched_after_ns"], 100_992.0, 1e-6));
    let names: Vec<&str> = v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kernel_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lesson_transpose", "lesson_copy", "lesson_branch"]);
    for (name, before, after) in [
        ("lesson_transpose", 283_808.0, 44_032.0),
        ("lesson_copy", 78_688.0, 12_768.0),
        ("lesson_branch", 57_632.0, 44_192.0),
    ] {
        let k = kernel(&v, name);
        assert_eq!(k["verdict"], "faster", "{k}");
        assert!(close(&k["speedup"], before / after, 1e-12));
        let d = &k["deltas"][0];
        assert_eq!(d["metric"], "duration_ns");
        assert!(close(&d["before"], before, 1e-6) && close(&d["after"], after, 1e-6));
    }
    assert_eq!(
        kernel(&v, "lesson_transpose")["top_stall"],
        "lg_throttle → long_scoreboard"
    );
    assert!(
        kernel(&v, "lesson_copy")["verdict_reason"]
            .as_str()
            .unwrap()
            .starts_with("mean duration 78.7 → 12.8 µs (-83.8 %)")
    );
    // A report against itself: nothing moved.
    let same = ok(
        home.path(),
        &[
            "profile",
            "ncu-compare",
            &data("lesson_pair_after.ncu-raw.csv.xz"),
            &data("lesson_pair_after.ncu-raw.csv.xz"),
        ],
    );
    assert_eq!(same["verdict"], "unchanged");
    // Different kernels: listed on each side, not comparable.
    let other = ok(
        home.path(),
        &[
            "profile",
            "ncu-compare",
            &data("lesson_pair_after.ncu-raw.csv.xz"),
            &data("lessons.ncu-raw.csv.xz"),
        ],
    );
    assert_eq!(other["verdict"], "not_comparable");
    assert_eq!(other["only_before"].as_array().unwrap().len(), 3);
    assert_eq!(other["only_after"].as_array().unwrap().len(), 7);
}

#[test]
fn flame_graph_of_a_stack_trace_finds_the_planted_hot_function() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("flame");
    let v = ok(
        home.path(),
        &[
            "profile",
            "flame",
            &data("flame_stacks.kineto.json.xz"),
            "--output-dir",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(v["unit"], "ns");
    assert_eq!(v["total"], 27_260_390);
    let top = &v["top_self"][0];
    assert_eq!(top["frame"], "flame_stacks.py(26): build_features");
    assert_eq!(top["self_count"], 10_971_272);
    assert!(close(&top["self_pct"], 40.246, 5e-4));
    assert_eq!(top["calls"], 2);
    assert_eq!(
        v["top_self"][1]["frame"],
        "<built-in method get of dict object>"
    );
    assert_eq!(v["top_self"][1]["self_count"], 5_422_451);
    // The folded file holds every stack; its counts add up to the total.
    let folded = std::fs::read_to_string(v["folded_path"].as_str().unwrap()).unwrap();
    let sum: u64 = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, 27_260_390);
    assert_eq!(folded.lines().count() as u64, v["stacks"].as_u64().unwrap());
    let svg = std::fs::read_to_string(v["svg_path"].as_str().unwrap()).unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("build_features"));
    // A trace recorded without stacks says how to get them.
    let (success, e) = run(
        home.path(),
        &["profile", "flame", &data("train_good.kineto.json.xz")],
    );
    assert!(!success);
    assert_eq!(e["error"]["kind"], "invalid_input");
    assert!(e["error"]["hint"].as_str().unwrap().contains("with_stack"));
}

#[test]
fn compile_analysis_finds_the_planted_graph_break_and_recompiles() {
    let home = tempfile::tempdir().unwrap();
    let v = ok(
        home.path(),
        &[
            "profile",
            "compile",
            "--log",
            &data("compile_graph_break.torch_logs.txt.xz"),
            "--trace",
            &data("compile_graph_break.kineto.json.xz"),
        ],
    );
    let b = &v["graph_breaks"];
    assert_eq!(b.as_array().unwrap().len(), 1);
    assert!(
        b[0]["location"]
            .as_str()
            .unwrap()
            .ends_with("compile_graph_break.py:36")
    );
    assert_eq!(
        b[0]["reason"],
        "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    );
    assert_eq!(b[0]["code"], "if h.mean().item() > 0.0:");
    assert_eq!(b[0]["count"], 2);
    assert_eq!(b[0]["compile_ids"], json!(["0/0", "0/1"]));
    assert!(
        b[0]["fix"]
            .as_str()
            .unwrap()
            .contains("capture_scalar_outputs")
    );
    let r: Vec<(&str, &str)> = v["recompiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["compile_id"].as_str().unwrap(),
                r["cause"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(r, [("1/1", "value"), ("0/1", "shape"), ("1/2", "shape")]);
    assert_eq!(
        v["recompiles"][1]["reasons"][0],
        "0/0: tensor 'x' size mismatch at index 0. expected 64, actual 96"
    );
    let t = &v["timing"];
    assert_eq!(t["compile_ns"], 9_712_350_625_i64);
    assert_eq!(
        (t["frames"].as_u64(), t["graphs"].as_u64()),
        (Some(2), Some(5))
    );
    assert_eq!(t["recompiled_graphs"], 3);
    assert_eq!(t["steady_step_ns"], 3_603_955);
    assert_eq!(t["steps"][0]["compile_ns"], 6_144_367_109_i64);
    assert_eq!(t["steps"][4]["compile_ns"], 3_476_557_452_i64);
    let f = v["findings"].as_array().unwrap();
    assert_eq!(f.len(), 5);
    assert!(f[4].as_str().unwrap().starts_with(
        "Compiling took 9.71 s, 95.7 % of the profiled steps (0.44 s running); 2 frames compiled into 5 graphs, 3 of them recompilations"
    ));
    let (success, e) = run(home.path(), &["profile", "compile"]);
    assert!(!success);
    assert_eq!(e["error"]["kind"], "invalid_input");
}

#[test]
fn dataloader_wait_per_step_of_a_loader_bound_run() {
    let home = tempfile::tempdir().unwrap();
    let v = ok(
        home.path(),
        &[
            "analyze",
            "dataloader",
            &data("dataloader_bound.kineto.json.xz"),
        ],
    );
    assert_eq!(v["iterator"], "_MultiProcessingDataLoaderIter");
    assert_eq!(v["loading_in"], "workers");
    assert_eq!(v["steps"], 8);
    let waits: Vec<i64> = v["per_step"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["wait_ns"].as_i64().unwrap())
        .collect();
    assert_eq!(
        waits,
        [
            58_607, 33_174_474, 13_054_094, 38_307_461, 15_347_227, 37_354_769, 14_441_894,
            38_097_092
        ]
    );
    assert!(close(&v["mean_wait_ns"], 23_729_452.25, 1e-6));
    assert!(close(&v["mean_step_ns"], 26_294_249.25, 1e-6));
    assert!(close(&v["wait_pct"], 90.245_787_298_909_1, 1e-9));
    assert_eq!(v["ready_steps"], 1);
    assert_eq!(v["verdict"], "loader_bound");
    assert!(close(
        &v["loader_speedup_needed"],
        26_294_249.25 / (26_294_249.25 - 23_729_452.25),
        1e-9
    ));
    assert_eq!(v["h2d_copies_from"], "pinned");
    let fixes = v["fix"].as_array().unwrap();
    assert!(fixes[0].as_str().unwrap().starts_with("Raise num_workers"));
    assert!(
        !fixes
            .iter()
            .any(|f| f.as_str().unwrap().contains("pin_memory=True"))
    );
    assert_eq!(
        v["verdict_reason"],
        "the loop waited 23.7 ms of its 26.3 ms mean step on data (90.2 % of 8 steps, threshold 10 %); 1 steps found a batch ready"
    );
    // A trace with no DataLoader: a clear error, not a verdict.
    let (success, e) = run(
        home.path(),
        &["analyze", "dataloader", &data("train_good.kineto.json.xz")],
    );
    assert!(!success);
    assert_eq!(e["error"]["kind"], "invalid_input");
}

/// One tools/call over a fresh `aisp serve` on stdio (initialize, initialized, the call): the JSON-RPC answer.
fn call_over_stdio(home: &Path, tool: &str, arguments: Value) -> Value {
    let mut child = common::aisp(home)
        .args(["serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for l in [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":tool,"arguments":arguments}}),
    ] {
        writeln!(stdin, "{l}").unwrap();
    }
    stdin.flush().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let answer = loop {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "server closed");
        let v: Value = serde_json::from_str(line.trim()).unwrap();
        if v["id"] == 2 {
            break v;
        }
    };
    drop(stdin);
    let _ = child.wait();
    answer
}

/// The same analysis over MCP stdio: the tool is reachable by tools/call
/// (Domain tier) and answers with structured content.
#[test]
fn memory_patterns_over_mcp_stdio() {
    let home = tempfile::tempdir().unwrap();
    let raw: PathBuf = data("lessons.ncu-raw.csv.xz").into();
    let answer = call_over_stdio(
        home.path(),
        "aisp_analyze_memory_patterns",
        // Every kernel: the MCP answer cap would keep the first few.
        json!({"path": raw, "max_chars": 20000}),
    );
    let s = &answer["result"]["structuredContent"];
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(s["flagged"], 4);
    // Without the details page there is no ncu rule: the stake is the upper bound.
    let k = kernel(s, "copy_f32_strided");
    assert!(k["problems"][0].get("ncu_rule").is_none());
    assert!(
        k["problems"][0]["stake_basis"]
            .as_str()
            .unwrap()
            .starts_with("upper bound")
    );
}

// ---------------------------------------------------------------------------------------------
// Nsight Systems exports captured on the H100 by scripts/capture-nsys-analyses.sh
// (tests/data/capture/README.md). Every expected figure is computed here by SQL written
// independently of the code under test (window functions over the same tables).

/// Decompress a fixture into `dir` (the `.sqlite` name is what selects the nsys path).
fn unxz(name: &str, dir: &Path) -> PathBuf {
    let out = dir.join(name.trim_end_matches(".xz"));
    let mut r = BufReader::new(std::fs::File::open(data(name)).unwrap());
    let mut w = std::fs::File::create(&out).unwrap();
    lzma_rs::xz_decompress(&mut r, &mut w).unwrap();
    out
}

fn sql(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

/// Per step (name, span, wait): steps are the `step_N` ranges, each spanning to the next
/// one's start; the wait is the overlap with `waits` (a SELECT of start, end).
fn sql_step_waits(c: &rusqlite::Connection, waits: &str) -> Vec<(String, i64, i64)> {
    let q = format!(
        "WITH r AS (SELECT n.start, n.end, COALESCE(n.text, s.value) AS name FROM NVTX_EVENTS n \
                    LEFT JOIN StringIds s ON s.id = n.textId WHERE n.end IS NOT NULL), \
              st AS (SELECT name, start, MAX(COALESCE(LEAD(start) OVER (ORDER BY start), end), end) AS stop \
                     FROM r WHERE name GLOB 'step_[0-9]*'), \
              w AS ({waits}) \
         SELECT st.name, st.stop - st.start, \
                COALESCE((SELECT SUM(MIN(w.end, st.stop) - MAX(w.start, st.start)) FROM w \
                          WHERE w.start < st.stop AND w.end > st.start), 0) \
         FROM st ORDER BY st.start"
    );
    let mut s = c.prepare(&q).unwrap();
    s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

const NEXT_RANGES: &str = "SELECT start, end FROM r WHERE name LIKE 'enumerate(DataLoader)#%'";
/// The loop thread's semaphore/poll waits that are not inside a CUDA API call.
const QUEUE_WAITS: &str = "SELECT o.start, o.end FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId \
     WHERE o.globalTid = (SELECT globalTid FROM NVTX_EVENTS n LEFT JOIN StringIds s2 ON s2.id = n.textId \
                          WHERE COALESCE(n.text, s2.value) = 'step_1') \
       AND s.value IN ('sem_wait','sem_timedwait','sem_clockwait','poll','ppoll','select','pselect','pselect6','epoll_wait','epoll_pwait') \
       AND NOT EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME a WHERE a.globalTid = o.globalTid \
                       AND a.start <= o.start AND a.end >= o.end)";

/// Running time of each worker process's main thread within [w0, w1): every
/// schedule-in to the thread's next scheduling event.
fn sql_worker_running(c: &rusqlite::Connection, w0: i64, w1: i64) -> Vec<(i64, i64)> {
    let mut s = c
        .prepare(
            "SELECT globalTid & 16777215, SUM(MAX(0, MIN(nxt, ?2) - MAX(start, ?1))) FROM \
               (SELECT globalTid, start, isSchedIn, \
                       LEAD(start) OVER (PARTITION BY globalTid ORDER BY start, rowid) AS nxt FROM SCHED_EVENTS) \
             WHERE isSchedIn = 1 AND nxt IS NOT NULL AND globalTid IN \
               (SELECT t.globalTid FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId \
                WHERE s.value = 'pt_data_worker' AND (t.globalTid >> 24) & 16777215 = t.globalTid & 16777215) \
             GROUP BY globalTid ORDER BY 1",
        )
        .unwrap();
    s.query_map([w0, w1], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn analyze_loader(home: &Path, export: &Path, extra: &[&str]) -> Value {
    let p = export.display().to_string();
    let mut args = vec!["analyze", "dataloader", p.as_str(), "--limit", "1000"];
    args.extend(extra);
    ok(home, &args)
}

/// Checks one answer against the SQL: every step's span and wait, the first step
/// left out, the totals, the ready steps and the workers' running time.
fn check_loader(v: &Value, c: &rusqlite::Connection, waits: &str) -> f64 {
    let rows = sql_step_waits(c, waits);
    assert!(rows.len() >= 3);
    let first = &v["excluded_first_step"];
    assert_eq!(first["step"], rows[0].0.as_str());
    assert_eq!(first["step_ns"], rows[0].1);
    assert_eq!(first["wait_ns"], rows[0].2);
    let counted = &rows[1..];
    let per_step = v["per_step"].as_array().unwrap();
    assert_eq!(per_step.len(), counted.len());
    for (s, (name, span, wait)) in per_step.iter().zip(counted) {
        assert_eq!(s["step"], name.as_str());
        assert_eq!(s["step_ns"], *span, "{name}");
        assert_eq!(s["wait_ns"], *wait, "{name}");
    }
    let total_step: i64 = counted.iter().map(|r| r.1).sum();
    let total_wait: i64 = counted.iter().map(|r| r.2).sum();
    assert_eq!(v["steps"], counted.len());
    assert_eq!(v["total_wait_ns"], total_wait);
    let pct = 100.0 * total_wait as f64 / total_step as f64;
    assert!(
        close(&v["wait_pct"], pct, 1e-9),
        "{} vs {pct}",
        v["wait_pct"]
    );
    assert_eq!(
        v["ready_steps"],
        counted.iter().filter(|r| r.2 < 200_000).count()
    );
    assert_eq!(v["max_wait_ns"], counted.iter().map(|r| r.2).max().unwrap());
    // Workers: measured over the counted steps' span.
    let (w0, w1) = {
        let mut s = c
            .prepare(
                "WITH r AS (SELECT n.start, n.end, COALESCE(n.text, s.value) AS name FROM NVTX_EVENTS n \
                            LEFT JOIN StringIds s ON s.id = n.textId WHERE n.end IS NOT NULL) \
                 SELECT (SELECT start FROM r WHERE name = 'step_1'), \
                        (SELECT MAX(end) FROM r WHERE name GLOB 'step_[0-9]*')",
            )
            .unwrap();
        s.query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .unwrap()
    };
    let workers: Vec<&Value> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "worker")
        .collect();
    let expected = sql_worker_running(c, w0, w1);
    assert_eq!(workers.len(), expected.len());
    for (t, (tid, run)) in workers.iter().zip(&expected) {
        assert_eq!(t["tid"], *tid);
        assert_eq!(t["running_ns"], *run, "worker {tid}");
        assert!(close(
            &t["running_pct"],
            100.0 * *run as f64 / (w1 - w0) as f64,
            1e-9
        ));
    }
    check_loader_sentences(v);
    pct
}

/// Every sentence of the answer, rebuilt from the numbers the SQL checked.
fn check_loader_sentences(v: &Value) {
    let f = |k: &str| v[k].as_f64().unwrap();
    let (mean_wait, mean_step) = (f("mean_wait_ns"), f("mean_step_ns"));
    let (n, ready) = (
        v["steps"].as_u64().unwrap(),
        v["ready_steps"].as_u64().unwrap(),
    );
    let first = &v["excluded_first_step"];
    assert_eq!(
        v["verdict_reason"],
        format!(
            "the loop waited {:.1} ms of its {:.1} ms mean step on data ({:.1} % of {n} steps, threshold 10 %); \
             {ready} steps found a batch ready; the first step ({}, {:.1} ms, {:.1} ms of it waiting) is left out: \
             it includes the workers' start",
            mean_wait / 1e6,
            mean_step / 1e6,
            f("wait_pct"),
            first["step"].as_str().unwrap(),
            first["step_ns"].as_f64().unwrap() / 1e6,
            first["wait_ns"].as_f64().unwrap() / 1e6,
        )
    );
    let pcts: Vec<f64> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "worker")
        .map(|t| t["running_pct"].as_f64().unwrap())
        .collect();
    let lo = pcts.iter().cloned().fold(f64::MAX, f64::min);
    let hi = pcts.iter().cloned().fold(f64::MIN, f64::max);
    let mean = pcts.iter().sum::<f64>() / pcts.len() as f64;
    let range = format!(
        "the {} worker processes ran {lo:.1}-{hi:.1} % of the steps' span (mean {mean:.1} %, measured from context \
         switches)",
        pcts.len()
    );
    let bound = v["verdict"] == "loader_bound";
    let prefetch = "not derivable from this export: batches cross from the worker processes through pipes and \
                    shared memory, not as events";
    if mean >= 80.0 {
        assert!(bound, "saturated workers but not loader-bound: {v}");
        assert_eq!(
            v["workers"],
            format!(
                "saturated: {range}, so they were producing nearly all the time and together deliver a batch every \
                 {:.1} ms while the loop needs one every {:.1} ms",
                mean_step / 1e6,
                (mean_step - mean_wait) / 1e6
            )
        );
        assert_eq!(
            v["prefetch_depth"],
            format!("{prefetch}; {ready} of {n} steps found a batch ready")
        );
    } else {
        assert_eq!(
            v["workers"],
            format!(
                "{}: {range}; they idle the rest, waiting for the next index while the queue is full",
                if bound {
                    "not the bottleneck"
                } else {
                    "keeping up"
                }
            )
        );
        assert_eq!(
            v["prefetch_depth"],
            format!(
                "{prefetch}; {ready} of {n} steps found a batch ready; the workers idled {:.1} % of the steps' span, \
                 when their queue was full",
                100.0 - mean
            )
        );
    }
    if bound && mean >= 80.0 {
        assert!(v["fix"][0].as_str().unwrap().starts_with(&format!(
            "Raise num_workers (the loader must get about {:.1}x faster",
            mean_step / (mean_step - mean_wait)
        )));
    }
}

#[test]
fn dataloader_from_nsys_flags_the_loader_bound_run_with_sql_checked_numbers() {
    let home = tempfile::tempdir().unwrap();
    let export = unxz("dataloader_bound.nsys.sqlite.xz", home.path());
    let c = sql(&export);
    // emit_nvtx ranges: the wait, exactly.
    let v = analyze_loader(home.path(), &export, &[]);
    let pct = check_loader(&v, &c, NEXT_RANGES);
    assert!(pct > 80.0, "{pct}");
    assert_eq!(v["iterator"], "_MultiProcessingDataLoaderIter");
    assert_eq!(v["loading_in"], "workers");
    assert_eq!(v["verdict"], "loader_bound");
    assert!(v["wait_basis"].as_str().unwrap().starts_with("NVTX"));
    assert_eq!(v["h2d_copies_from"], "pinned");
    let workers = v["workers"].as_str().unwrap();
    assert!(
        workers.starts_with("saturated: the 2 worker processes ran"),
        "{workers}"
    );
    let fixes = v["fix"].as_array().unwrap();
    assert!(fixes[0].as_str().unwrap().starts_with("Raise num_workers"));
    assert!(
        v["prefetch_depth"]
            .as_str()
            .unwrap()
            .starts_with("not derivable from this export")
    );
    // The verdict sentence carries the same numbers.
    let (mean_wait, mean_step) = (
        v["mean_wait_ns"].as_f64().unwrap(),
        v["mean_step_ns"].as_f64().unwrap(),
    );
    assert!(v["verdict_reason"].as_str().unwrap().starts_with(&format!(
        "the loop waited {:.1} ms of its {:.1} ms mean step on data ({pct:.1} % of {} steps",
        mean_wait / 1e6,
        mean_step / 1e6,
        v["steps"]
    )));
    assert!(close(
        &v["loader_speedup_needed"],
        mean_step / (mean_step - mean_wait),
        1e-9
    ));
    // The same file read from the OS runtime alone (as a capture without emit_nvtx
    // would be): the queue waits agree with the ranges within 5 % and give the same verdict.
    let o = analyze_loader(home.path(), &export, &["--wait-source", "osrt"]);
    let opct = check_loader(&o, &c, QUEUE_WAITS);
    assert!(o["wait_basis"].as_str().unwrap().starts_with("OS runtime"));
    assert_eq!(o["verdict"], "loader_bound");
    let (a, b) = (
        v["total_wait_ns"].as_f64().unwrap(),
        o["total_wait_ns"].as_f64().unwrap(),
    );
    assert!((a - b).abs() / a < 0.05, "nvtx {a} vs osrt {b}");
    assert!((pct - opct).abs() < 5.0);
}

#[test]
fn dataloader_from_an_osrt_only_capture_and_a_healthy_run() {
    let home = tempfile::tempdir().unwrap();
    // A capture without emit_nvtx: step ranges and OS runtime only.
    let export = unxz("dataloader_bound_osrt.nsys.sqlite.xz", home.path());
    let c = sql(&export);
    let v = analyze_loader(home.path(), &export, &[]);
    let pct = check_loader(&v, &c, QUEUE_WAITS);
    assert!(pct > 80.0);
    assert_eq!(v["verdict"], "loader_bound");
    assert!(
        v["wait_basis"].as_str().unwrap().starts_with(
            "OS runtime: the loop thread blocked on the loader's queue (sem_clockwait"
        )
    );
    // The healthy run (4 workers, cheap samples, a longer GPU step) is not flagged, from
    // either source, and its workers are measured idle most of the time.
    let export = unxz("dataloader_healthy.nsys.sqlite.xz", home.path());
    let c = sql(&export);
    for extra in [&[][..], &["--wait-source", "osrt"][..]] {
        let v = analyze_loader(home.path(), &export, extra);
        let pct = check_loader(
            &v,
            &c,
            if extra.is_empty() {
                NEXT_RANGES
            } else {
                QUEUE_WAITS
            },
        );
        assert!(pct < 2.0, "{pct}");
        assert_eq!(v["verdict"], "not_loader_bound");
        assert!(v["fix"].as_array().unwrap().is_empty());
        let w = v["workers"].as_str().unwrap();
        assert!(
            w.starts_with("keeping up: the 4 worker processes ran"),
            "{w}"
        );
        for t in v["threads"].as_array().unwrap() {
            if t["role"] == "worker" {
                assert!(t["running_pct"].as_f64().unwrap() < 50.0);
            }
        }
    }
    // An export with no DataLoader at all: a clear error.
    let other = unxz("flame_cpu_samples.nsys.sqlite.xz", home.path());
    let (success, e) = run(
        home.path(),
        &["analyze", "dataloader", &other.display().to_string()],
    );
    assert!(!success);
    assert_eq!(e["error"]["kind"], "invalid_input");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no DataLoader")
    );
}

#[test]
fn flame_of_nsys_cpu_samples_matches_sql() {
    let home = tempfile::tempdir().unwrap();
    let export = unxz("flame_cpu_samples.nsys.sqlite.xz", home.path());
    let c = sql(&export);
    let out = home.path().join("flame");
    let v = ok(
        home.path(),
        &[
            "profile",
            "flame",
            &export.display().to_string(),
            "--top",
            "10",
            "--output-dir",
            &out.display().to_string(),
        ],
    );
    assert_eq!(v["unit"], "samples");
    // A sample's leaf frame is its self frame; an unresolved address is named by its module.
    const FRAME: &str = "CASE WHEN c.unresolved = 1 \
         THEN '[' || replace(m.value, rtrim(m.value, replace(m.value, '/', '')), '') || ']' ELSE s.value END";
    // Samples of Nsight Systems' own threads are the profiler's, not the program's.
    c.execute_batch(
        "CREATE TEMP TABLE own AS SELECT e.id FROM COMPOSITE_EVENTS e LEFT JOIN ThreadNames t ON t.globalTid = e.globalTid \
         LEFT JOIN StringIds n ON n.id = t.nameId WHERE n.value IS NULL OR NOT (n.value GLOB '[[]NSys*' OR n.value GLOB 'NSys *')",
    )
    .unwrap();
    let profiler: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM COMPOSITE_EVENTS WHERE id NOT IN (SELECT id FROM own)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(profiler > 0);
    let mut st = c
        .prepare(&format!(
            "SELECT {FRAME} AS frame, COUNT(*) AS n FROM SAMPLING_CALLCHAINS c \
             JOIN StringIds s ON s.id = c.symbol JOIN StringIds m ON m.id = c.module \
             WHERE c.stackDepth = 0 AND c.id IN (SELECT id FROM own) GROUP BY frame ORDER BY n DESC, frame LIMIT 10"
        ))
        .unwrap();
    let top: Vec<(String, i64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let total: i64 = c
        .query_row(
            "SELECT COUNT(DISTINCT id) FROM SAMPLING_CALLCHAINS WHERE id IN (SELECT id FROM own)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(v["total"], total);
    let got = v["top_self"].as_array().unwrap();
    assert_eq!(got.len(), 10);
    for (g, (frame, n)) in got.iter().zip(&top) {
        assert_eq!(g["frame"], frame.as_str());
        assert_eq!(g["self_count"], *n, "{frame}");
        assert!(close(
            &g["self_pct"],
            100.0 * *n as f64 / total as f64,
            1e-9
        ));
    }
    // The top frame's total: the samples whose chain holds it anywhere.
    let (frame, _) = &top[0];
    let inclusive: i64 = c
        .query_row(
            &format!(
                "SELECT COUNT(DISTINCT c.id) FROM SAMPLING_CALLCHAINS c JOIN StringIds s ON s.id = c.symbol \
                 JOIN StringIds m ON m.id = c.module WHERE {FRAME} = ?1 AND c.id IN (SELECT id FROM own)"
            ),
            [frame],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(got[0]["total_count"], inclusive);
    // Samples whose backtrace stopped at the leaf are counted and said.
    let leaf_only: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM (SELECT id FROM SAMPLING_CALLCHAINS WHERE id IN (SELECT id FROM own) \
             GROUP BY id HAVING MAX(stackDepth) = 0)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let note = v["notes"][0].as_str().unwrap();
    assert!(
        note.starts_with(&format!(
            "{leaf_only} of {total} samples ({:.1} %) have only their leaf frame",
            100.0 * leaf_only as f64 / total as f64
        )),
        "{note}"
    );
    assert_eq!(
        v["notes"][1],
        format!(
            "{profiler} samples of Nsight Systems' own threads in the process ([NSys], NSys PySampling) are left out"
        )
    );
    let svg = std::fs::read_to_string(v["svg_path"].as_str().unwrap()).unwrap();
    assert!(svg.starts_with("<?xml"));
    let folded = std::fs::read_to_string(v["folded_path"].as_str().unwrap()).unwrap();
    let folded_total: u64 = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(folded_total as i64, total);
}

/// The Nsight Systems path over MCP stdio: the same answer as the CLI's.
#[test]
fn dataloader_from_nsys_over_mcp_stdio_equals_the_cli() {
    let home = tempfile::tempdir().unwrap();
    let export = unxz("dataloader_bound_osrt.nsys.sqlite.xz", home.path());
    let path = export.display().to_string();
    let cli = ok(
        home.path(),
        &["analyze", "dataloader", &path, "--limit", "5"],
    );
    let answer = call_over_stdio(
        home.path(),
        "aisp_analyze_dataloader",
        json!({"path": export, "limit": 5}),
    );
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let s = &answer["result"]["structuredContent"];
    assert_eq!(s["verdict"], "loader_bound");
    assert_eq!(s["per_step"].as_array().unwrap().len(), 5);
    assert_eq!(*s, cli);
}
