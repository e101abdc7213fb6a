//! The five profile analyses of issue 23 through the real binary (CLI with
//! `--format json`, and MCP over stdio), on captures made on an H100
//! (tests/data/capture/README.md). Every expected number was computed
//! independently from the same files with Python (csv, json with Decimal
//! timestamps, lzma).

mod common;

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

/// The same analysis over MCP stdio: the tool is reachable by tools/call
/// (Domain tier) and answers with structured content.
#[test]
fn memory_patterns_over_mcp_stdio() {
    let home = tempfile::tempdir().unwrap();
    let mut child = common::aisp(home.path())
        .args(["serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let raw: PathBuf = data("lessons.ncu-raw.csv.xz").into();
    for l in [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"aisp_analyze_memory_patterns","arguments":{"path": raw}}}),
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
