//! aisp_benchmark_kernel and aisp_benchmark_kernel_improve without a GPU,
//! through the real binary: argument validation, the execution gate, NVRTC
//! compile errors with line numbers (CI has NVRTC from PyPI), the built-in
//! reference kernels compiling, the parent's handling of a worker that hangs
//! or crashes, and the LLM loop against a scripted OpenAI-compatible endpoint.
//!
//! The last two use tests/fakes/kernel_lab_worker.py in place of the GPU
//! worker (AISP_KERNEL_LAB_WORKER): they prove what the parent does with what
//! a worker reports (time limit, crash attribution, fresh workers, keeping
//! the best correct kernel, prompts carrying the measurements, stored rows),
//! not the GPU-side compile/check/timing, which examples/kernel-lab records
//! from an H100.

use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use aisp_hw::bench::lab::compile;
use aisp_hw::bench::lab::spec::Kernel;
use aisp_hw::bench::libs;
use serde_json::{Value, json};

fn nvrtc_or_skip() -> bool {
    if libs::nvrtc_available() {
        return true;
    }
    assert!(
        !std::env::var("AISP_REQUIRE_NVRTC").is_ok_and(|v| v == "1"),
        "AISP_REQUIRE_NVRTC=1 but NVRTC cannot be loaded"
    );
    eprintln!("NVRTC not found: compile checks skipped");
    false
}

fn fake_worker() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fakes/kernel_lab_worker.py")
        .display()
        .to_string()
}

/// Run `aisp [--allow-exec] benchmark <op> --json <args>`: (exit code, parsed stdout or null, all text).
fn call(
    home: &Path,
    op: &str,
    args: &Value,
    allow: bool,
    env: &[(&str, &str)],
) -> (i32, Value, String) {
    let mut cmd = common::aisp(home);
    if allow {
        cmd.arg("--allow-exec");
    }
    cmd.args([
        "--format",
        "json",
        "benchmark",
        op,
        "--json",
        &args.to_string(),
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let text = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        text,
    )
}

fn transpose_call(source: &str) -> Value {
    json!({
        "name": "t",
        "kernels": [{"name": "k", "entry": "tr", "source": source}],
        "reference": "transpose",
        "args": [
            {"name": "x", "dtype": "f32", "shape": ["R", "C"]},
            {"name": "y", "dtype": "f32", "shape": ["C", "R"], "role": "out"},
            {"name": "R", "dtype": "i32", "value": "R"},
            {"name": "C", "dtype": "i32", "value": "C"}
        ],
        "launch": {"grid": ["cdiv(C,32)", "cdiv(R,32)"], "block": [32, 8]},
        "sizes": [{"R": 64, "C": 96}]
    })
}

#[test]
fn bad_arguments_are_refused_with_the_field_and_the_reason() {
    let home = tempfile::tempdir().unwrap();
    let mut bad = transpose_call("extern \"C\" __global__ void tr() {}");
    bad["args"][2]["value"] = json!("cdiv(K, 2)");
    let (code, _, text) = call(home.path(), "kernel", &bad, true, &[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("invalid_input") && text.contains("args.R.value: unknown name `K`"),
        "{text}"
    );

    let mut bad = transpose_call("x");
    bad["launch"]["block"] = json!([64, 32]);
    let (_, _, text) = call(home.path(), "kernel", &bad, true, &[]);
    assert!(
        text.contains("block has 2048 threads; at most 1024"),
        "{text}"
    );

    let mut bad = transpose_call("x");
    bad["args"][1]["shape"] = json!(["R", "C"]);
    let (_, _, text) = call(home.path(), "kernel", &bad, true, &[]);
    assert!(
        text.contains("transpose needs in [R, C] and out [C, R]"),
        "{text}"
    );

    let mut bad = transpose_call("x");
    bad["kernels"][0]["options"] = json!(["-I/etc"]);
    let (_, _, text) = call(home.path(), "kernel", &bad, true, &[]);
    assert!(text.contains("option `-I/etc` is not allowed"), "{text}");
}

#[test]
fn running_supplied_kernels_needs_execution_allowed() {
    let home = tempfile::tempdir().unwrap();
    let (code, _, text) = call(home.path(), "kernel", &transpose_call("x"), false, &[]);
    assert_eq!(code, 1);
    assert!(text.contains("exec_not_allowed"), "{text}");
}

#[test]
fn compile_errors_come_back_with_line_numbers_and_the_log() {
    if !nvrtc_or_skip() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let src = "extern \"C\" __global__ void tr(const float* x, float* y, int R, int C) {\n    int c = blockIdx.x * 32 + threadIdx.x;\n    y[c] = x[c] * scale;\n}\n";
    let mut args = transpose_call(src);
    args["compile_only"] = json!(true);
    let (code, out, text) = call(home.path(), "kernel", &args, true, &[]);
    assert_eq!(code, 0, "{text}");
    let k = &out["results"][0]["kernels"][0];
    assert_eq!(k["status"], "compile_error", "{k}");
    let err = &k["compile"]["errors"][0];
    assert_eq!(err["line"], 3, "{k}");
    assert_eq!(err["message"], "identifier \"scale\" is undefined");
    assert_eq!(err["code"], "y[c] = x[c] * scale;");
    assert!(
        k["compile"]["log"]
            .as_str()
            .unwrap()
            .contains("k.cu(3): error"),
        "{k}"
    );
    assert_eq!(
        k["failure"],
        "compile error: line 3: identifier \"scale\" is undefined"
    );

    // A correct C++ (mangled) template entry compiles and is found by its name expression.
    let cpp = "template <typename T> __global__ void tr(const T* x, T* y, int R, int C) { }\ntemplate __global__ void tr<float>(const float*, float*, int, int);\n";
    let mut args = transpose_call(cpp);
    args["kernels"][0]["entry"] = json!("tr<float>");
    args["compile_only"] = json!(true);
    let (_, out, text) = call(home.path(), "kernel", &args, true, &[]);
    let k = &out["results"][0]["kernels"][0];
    assert_eq!(k["status"], "compiled", "{text}");
    assert!(
        k["compile"]["lowered_name"]
            .as_str()
            .unwrap()
            .starts_with("_Z"),
        "{k}"
    );

    // A wrong entry name is a compile failure that says so.
    let mut args = transpose_call(src.replace(" * scale", "").as_str());
    args["kernels"][0]["entry"] = json!("transpose");
    args["compile_only"] = json!(true);
    let (_, out, _) = call(home.path(), "kernel", &args, true, &[]);
    let k = &out["results"][0]["kernels"][0];
    assert!(
        k["failure"]
            .as_str()
            .unwrap()
            .contains("entry `transpose` is not a __global__ function"),
        "{k}"
    );
}

#[test]
fn the_built_in_reference_kernels_compile() {
    if !nvrtc_or_skip() {
        return;
    }
    let source = include_str!("../../kernels/lab_reference.cu");
    for entry in [
        "lab_transpose_u8",
        "lab_transpose_u16",
        "lab_transpose_u32",
        "lab_transpose_u64",
        "lab_reduce_rows",
        "lab_softmax_rows",
        "lab_layernorm_rows",
    ] {
        let k = Kernel {
            name: None,
            source: source.into(),
            entry: entry.into(),
            launch: None,
            options: vec![],
        };
        let archs: &[&str] = if entry == "lab_reduce_rows" {
            &["sm_80", "sm_90", "sm_100"]
        } else {
            &["sm_90"]
        };
        for arch in archs {
            let built = compile::compile(&k, arch, None).unwrap();
            assert!(built.is_ok(), "{entry} for {arch}: {:?}", built.err());
        }
    }
}

fn copy_call(kernels: Value, limit: f64) -> Value {
    json!({
        "name": "iso",
        "kernels": kernels,
        "reference": "copy",
        "args": [
            {"name": "x", "dtype": "f32", "shape": ["N"]},
            {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"},
            {"name": "n", "dtype": "i32", "value": "N"}
        ],
        "launch": {"grid": ["cdiv(N,256)"], "block": [256]},
        "sizes": [{"N": 1024}],
        "time_limit_s": limit
    })
}

#[test]
fn a_hung_or_crashed_kernel_is_its_own_failure_and_the_rest_run_in_a_fresh_worker() {
    let home = tempfile::tempdir().unwrap();
    let kernels = json!([
        {"name": "hangs", "entry": "k", "source": "// fake: hang"},
        {"name": "crashes", "entry": "k", "source": "// fake: crash"},
        {"name": "fine", "entry": "k", "source": "// fake: ms=0.5"}
    ]);
    let started = std::time::Instant::now();
    let (code, out, text) = call(
        home.path(),
        "kernel",
        &copy_call(kernels, 2.0),
        true,
        &[("AISP_KERNEL_LAB_WORKER", &fake_worker())],
    );
    assert_eq!(code, 0, "{text}");
    assert!(
        started.elapsed().as_secs_f64() < 20.0,
        "the hang was not cut at its time limit"
    );
    let rows = out["results"][0]["kernels"].as_array().unwrap();
    let by = |name: &str| rows.iter().find(|k| k["kernel"] == name).unwrap().clone();
    assert_eq!(by("hangs")["status"], "failed");
    assert!(
        by("hangs")["failure"]
            .as_str()
            .unwrap()
            .starts_with("killed after 2 s"),
        "{}",
        by("hangs")
    );
    assert!(
        by("crashes")["failure"]
            .as_str()
            .unwrap()
            .contains("killed by signal 11"),
        "{}",
        by("crashes")
    );
    assert_eq!(by("fine")["status"], "ok");
    // Speedup against the reference (1.0 ms in the fake) from the samples: 2x.
    let s = by("fine")["speedup"].as_f64().unwrap();
    assert!((s - 2.0).abs() < 0.01, "{s}");
    assert!(
        out["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("3 worker processes"),
        "{}",
        out["notes"]
    );
    assert_eq!(out["fastest"], "fine");
    assert_eq!(out["saved"], true);

    // The rows are in the store: compare works on kernel-lab targets, the baseline being the reference.
    let mut cmd = common::aisp(home.path());
    cmd.args([
        "--format",
        "json",
        "benchmark",
        "compare",
        "--json",
        r#"{"target":"kernel_iso","candidate_variant":"fine"}"#,
    ]);
    let o = cmd.output().unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    assert_eq!(
        v["baseline"]["variant"],
        "ref_copy",
        "{v} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        v["significant"].as_bool().unwrap() && (v["speedup"].as_f64().unwrap() - 2.0).abs() < 0.01,
        "{v}"
    );

    // And leaderboards rank them: the candidate and the reference of the run.
    let mut cmd = common::aisp(home.path());
    cmd.args([
        "--format",
        "json",
        "analyze",
        "leaderboards",
        "--json",
        r#"{"target":"kernel_iso"}"#,
    ]);
    let o = cmd.output().unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    let text = v.to_string();
    assert!(
        text.contains("\"fine\"") && text.contains("ref_copy"),
        "{text} {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

// ------------------------------------------------------------------ the LLM loop

#[derive(Default)]
struct Mock {
    replies: Mutex<Vec<String>>,
    seen: Mutex<Vec<Value>>,
}

async fn chat(
    axum::extract::State(m): axum::extract::State<Arc<Mock>>,
    body: String,
) -> axum::Json<Value> {
    m.seen
        .lock()
        .unwrap()
        .push(serde_json::from_str(&body).unwrap_or(Value::Null));
    let text = {
        let mut r = m.replies.lock().unwrap();
        if r.is_empty() {
            "(script exhausted)".to_string()
        } else {
            r.remove(0)
        }
    };
    axum::Json(json!({
        "id": "c", "object": "chat.completion", "created": 1, "model": "mock-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
    }))
}

/// An OpenAI-compatible endpoint on a free local port that answers with `replies` in order.
async fn serve_scripted_llm(replies: Vec<String>) -> (Arc<Mock>, std::net::SocketAddr) {
    let mock = Arc::new(Mock::default());
    *mock.replies.lock().unwrap() = replies;
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(chat))
        .with_state(Arc::clone(&mock));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (mock, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llm_loop_verifies_every_round_and_keeps_the_best_correct_kernel() {
    let (mock, addr) = serve_scripted_llm(vec![
        "Try this:\n```cuda\n// fake: wrong\n// fake: ms=0.2\n__global__ void k() {}\n```\nCHANGE: unrolled by 4 (drops the tail).".into(),
        "```cuda\n// fake: ms=0.5\n__global__ void k() {}\n```\nCHANGE: float4 loads and stores.".into(),
        "I think it is already optimal.".into(),
        "```cuda\n// fake: ms=0.6\n__global__ void k() {}\n```\nCHANGE: fewer blocks.".into(),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().to_path_buf();
    let args = json!({
        "lab": copy_call(json!([{"name": "start", "entry": "k", "source": "// fake: ms=1.0\n__global__ void k() {}"}]), 30.0),
        "rounds": 4,
        "goal": "reach the copy roof"
    });
    let base = format!("http://{addr}/v1");
    let (code, out, text) = tokio::task::spawn_blocking(move || {
        call(
            &home_path,
            "kernel-improve",
            &args,
            true,
            &[
                ("AISP_KERNEL_LAB_WORKER", &fake_worker()),
                ("AISP_LLM_BASE_URL", &base),
                ("AISP_LLM_MODEL", "mock-model"),
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{text}");
    let rounds = out["rounds"].as_array().unwrap();
    let st: Vec<(&str, bool)> = rounds
        .iter()
        .map(|r| (r["status"].as_str().unwrap(), r["kept"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        st,
        vec![
            ("incorrect", false),
            ("ok", true),
            ("no_code", false),
            ("ok", false)
        ],
        "{out}"
    );
    assert!(
        rounds[0]["failure"]
            .as_str()
            .unwrap()
            .contains("first at index 3"),
        "{out}"
    );
    assert_eq!(out["best_round"], 2);
    assert!(
        (out["speedup"].as_f64().unwrap() - 2.0).abs() < 0.01,
        "{out}"
    );
    assert!(out["best_source"].as_str().unwrap().contains("ms=0.5"));
    assert_eq!(
        out["explanation"],
        "Kept 1 change(s): round 2: float4 loads and stores."
    );
    // Round 4 is slower than the best (0.6 vs 0.5 ms in one run): measured side by side, not kept.
    assert!(
        (rounds[3]["best_median_ms"].as_f64().unwrap() - 0.5).abs() < 0.01,
        "{out}"
    );

    // What the model was told: the source and measurements of the best, the goal, and its last attempt's fate.
    let seen = mock.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    let user = |i: usize| {
        seen[i]["messages"][1]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        user(0).contains("median 1.0000 ms")
            && user(0).contains("fake: ms=1.0")
            && user(0).contains("Goal: reach the copy roof"),
        "{}",
        user(0)
    );
    assert!(
        user(1).contains("unrolled by 4 (drops the tail). -> status incorrect")
            && user(1).contains("first at index 3"),
        "{}",
        user(1)
    );
    assert!(
        user(2).contains("median 0.5000 ms") && user(2).contains("(kept: it is the new best)"),
        "{}",
        user(2)
    );
    assert!(
        user(3).contains("could not be used: the reply has no ``` code block"),
        "{}",
        user(3)
    );
}

// ------------------------------------------------------------------ the ncu section

fn repo(p: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(p)
        .display()
        .to_string()
}

/// A copy-shaped call whose fastest candidate is `transpose_tiled` (the kernel
/// the saved H100 report profiled), with `ncu` as given.
fn ncu_call(ncu: Value) -> Value {
    let mut c = copy_call(
        json!([
            {"name": "slow", "entry": "k", "source": "// fake: ms=1.0"},
            {"name": "tiled", "entry": "transpose_tiled", "source": "// fake: ms=0.2"}
        ]),
        30.0,
    );
    c["ncu"] = ncu;
    c
}

/// The fake worker, with the fake ncu around it reading back the pages of a
/// real one-launch report of the tiled transpose on an H100.
fn ncu_env(extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("AISP_KERNEL_LAB_WORKER", fake_worker()),
        ("AISP_NCU", repo("tests/fakes/ncu")),
        (
            "FAKE_NCU_RAW",
            repo("tests/data/capture/kernel_lab_tiled.ncu-raw.csv"),
        ),
        (
            "FAKE_NCU_DETAILS",
            repo("tests/data/capture/kernel_lab_tiled.ncu-details.csv"),
        ),
    ];
    v.extend(extra.iter().cloned());
    v
}

fn call_env(
    home: &Path,
    op: &str,
    args: &Value,
    env: &[(&'static str, String)],
) -> (i32, Value, String) {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    call(home, op, args, true, &env)
}

#[test]
fn ncu_profiles_the_fastest_correct_candidate_and_reports_its_numbers() {
    let home = tempfile::tempdir().unwrap();
    let (code, out, text) = call_env(home.path(), "kernel", &ncu_call(json!(true)), &ncu_env(&[]));
    assert_eq!(code, 0, "{text}");
    assert_eq!(out["fastest"], "tiled");
    let n = &out["ncu"];
    assert_eq!(n["status"], "ok", "{n}");
    assert_eq!(n["kernel"], "tiled");
    assert_eq!(n["profiled"], "transpose_tiled");
    // The capture is an ncu run like aisp_profile_ncu's: its folder holds the
    // job the profiled worker read, the command line, the report and pages.
    let run = n["run_id"].as_str().unwrap();
    assert!(run.starts_with("ncu-"), "{run}");
    let dir = home.path().join("runs").join(run);
    assert_eq!(
        n["report"],
        dir.join("profile.ncu-rep").display().to_string()
    );
    let job: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kernel-lab-job.json")).unwrap())
            .unwrap();
    assert_eq!(job["profile"], "tiled");
    assert!(job["spec"]["ncu"].is_null());
    let m = &n["metrics"];
    let raw =
        std::fs::read_to_string(repo("tests/data/capture/kernel_lab_tiled.ncu-raw.csv")).unwrap();
    assert!(raw.contains("transpose_tiled"));
    // Exact values of the saved report (see the unit test on the same pages).
    assert_eq!(m["duration_ns"], 193952.0);
    assert_eq!(m["dram_bytes"], 519_008_512.0);
    assert_eq!(m["sm_throughput_pct"], 59.882867);
    assert_eq!(m["memory_throughput_pct"], 79.835091);
    assert_eq!(m["achieved_occupancy_pct"], 94.575768);
    assert_eq!(n["bound"], "memory");
    assert!(
        n["stalls"][0]
            .as_str()
            .unwrap()
            .starts_with("long_scoreboard: 49.7%"),
        "{n}"
    );
    assert!(
        n["advice"][0].as_str().unwrap().starts_with("CPIStall:"),
        "{n}"
    );
    // The command line: one launch of the candidate's entry, clocks left alone.
    let rec = std::fs::read_to_string(dir.join("ncu-profile.stdout.log")).unwrap();
    assert!(rec.contains("==PROF== Connected"), "{rec}");
    // The timings stand beside it.
    let rows = out["results"][0]["kernels"].as_array().unwrap();
    assert!(rows.iter().all(|k| k["status"] == "ok"), "{rows:?}");

    // The same run again through aisp_profile_ncu_summary.
    let mut cmd = common::aisp(home.path());
    cmd.args(["--format", "json", "profile", "ncu-summary", "--json"])
        .arg(json!({"path": run}).to_string())
        .env("AISP_NCU", repo("tests/fakes/ncu"));
    let o = cmd.output().unwrap();
    let again: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    assert_eq!(
        again["kernel_count"],
        1,
        "{again} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(again["kernels"][0]["kernel_name"], "transpose_tiled");
    assert_eq!(again["kernels"][0]["dram_bytes"], m["dram_bytes"]);
}

#[test]
fn without_ncu_or_counters_the_timings_stand_and_the_section_says_why() {
    let home = tempfile::tempdir().unwrap();
    // ncu missing: the configured path does not exist.
    let missing = home.path().join("no-ncu").display().to_string();
    let (code, out, text) = call_env(
        home.path(),
        "kernel",
        &ncu_call(json!(true)),
        &ncu_env(&[("AISP_NCU", missing.clone())]),
    );
    assert_eq!(code, 0, "{text}");
    assert_eq!(out["fastest"], "tiled");
    assert_eq!(out["saved"], true);
    let n = &out["ncu"];
    assert_eq!(n["status"], "unavailable", "{n}");
    let why = n["why"].as_str().unwrap();
    assert!(
        why.contains(&missing) && why.contains("Nsight Compute"),
        "{why}"
    );
    assert!(n["metrics"].as_object().unwrap().is_empty());

    // Counters not permitted.
    let (code, out, text) = call_env(
        home.path(),
        "kernel",
        &ncu_call(json!(["SourceCounters"])),
        &ncu_env(&[("FAKE_NCU_MODE", "perm".into())]),
    );
    assert_eq!(code, 0, "{text}");
    let why = out["ncu"]["why"].as_str().unwrap();
    assert!(
        why.contains("ERR_NVGPUCTRPERM") && why.contains("NVreg_RestrictProfilingToAdminUsers=0"),
        "{why}"
    );
    assert_eq!(out["results"][0]["kernels"][2]["status"], "ok");

    // The report is of another kernel than the candidate: said, and no numbers of it are shown.
    let mut c = ncu_call(json!(true));
    c["kernels"][1]["entry"] = json!("other");
    let (code, out, text) = call_env(home.path(), "kernel", &c, &ncu_env(&[]));
    assert_eq!(code, 0, "{text}");
    let n = &out["ncu"];
    assert_eq!(n["status"], "unavailable");
    assert_eq!(n["profiled"], "transpose_tiled");
    assert!(
        n["why"]
            .as_str()
            .unwrap()
            .contains("ncu profiled `transpose_tiled`, not `other`"),
        "{n}"
    );
    assert!(n["metrics"].as_object().unwrap().is_empty());

    // No correct candidate: nothing to profile.
    let mut c = ncu_call(json!(true));
    c["kernels"] = json!([{"name": "bad", "entry": "k", "source": "// fake: wrong"}]);
    let (code, out, text) = call_env(home.path(), "kernel", &c, &ncu_env(&[]));
    assert_eq!(code, 0, "{text}");
    assert!(
        out["ncu"]["why"]
            .as_str()
            .unwrap()
            .contains("no candidate was correct"),
        "{out}"
    );
}

#[test]
fn bad_ncu_arguments_are_refused_before_any_work() {
    let home = tempfile::tempdir().unwrap();
    for (ncu, extra, want) in [
        (
            json!(["SpeedOfLight --launch-skip 9"]),
            json!({}),
            "not a section identifier",
        ),
        (json!("yes"), json!({}), "ncu"),
        (
            json!(true),
            json!({"compile_only": true}),
            "drop compile_only",
        ),
    ] {
        let mut c = ncu_call(ncu);
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        let (code, out, text) = call_env(home.path(), "kernel", &c, &ncu_env(&[]));
        assert_ne!(code, 0, "{out}");
        assert!(text.contains(want), "{want}: {text}");
        assert!(
            !home.path().join("runs").exists()
                || std::fs::read_dir(home.path().join("runs"))
                    .unwrap()
                    .next()
                    .is_none()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llm_loop_sends_the_best_kernels_ncu_findings() {
    let (mock, addr) = serve_scripted_llm(vec![
        "```cuda\n// fake: ms=0.5\n__global__ void transpose_tiled() {}\n```\nCHANGE: float4."
            .into(),
        "No further idea.".into(),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().to_path_buf();
    let mut lab = copy_call(
        json!([{"name": "start", "entry": "transpose_tiled", "source": "// fake: ms=1.0"}]),
        30.0,
    );
    lab["ncu"] = json!(true);
    let args = json!({"lab": lab, "rounds": 2});
    let mut env = ncu_env(&[]);
    env.push(("AISP_LLM_BASE_URL", format!("http://{addr}/v1")));
    env.push(("AISP_LLM_MODEL", "mock-model".into()));
    let (code, out, text) =
        tokio::task::spawn_blocking(move || call_env(&home_path, "kernel-improve", &args, &env))
            .await
            .unwrap();
    assert_eq!(code, 0, "{text}");
    assert_eq!(out["best_round"], 1, "{out}");
    assert_eq!(out["best_ncu"]["kernel"], "round1");
    assert_eq!(out["best_ncu"]["metrics"]["dram_bytes"], 519_008_512.0);
    // Two profiles: the starting kernel, then the kept one (not the rejected rounds).
    let runs = std::fs::read_dir(home.path().join("runs")).unwrap().count();
    assert_eq!(runs, 2);
    let seen = mock.seen.lock().unwrap().clone();
    let user = |i: usize| {
        seen[i]["messages"][1]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for (i, label) in [(0, "round0"), (1, "round1")] {
        assert!(
            user(i).contains(&format!(
                "Nsight Compute on one launch of {label}: duration 194.0 us; SM throughput 59.9% and memory throughput 79.8% of peak (memory bound); DRAM traffic 519.009 MB"
            )) && user(i).contains("Top warp stalls: long_scoreboard: 49.7%"),
            "{}",
            user(i)
        );
    }
}

/// Found by a call written from the description alone (bias + GELU with
/// `flops` and `roof: "memory"`): pct_of_roof divided TFLOP/s by the GB/s
/// roof (0.18 %). The metric now follows the roof.
#[test]
fn flops_with_the_memory_roof_compare_bytes_with_the_memory_roof() {
    let home = tempfile::tempdir().unwrap();
    let mut c = copy_call(
        json!([{"name": "k", "entry": "k", "source": "// fake: ms=0.5"}]),
        30.0,
    );
    c["flops"] = json!("20*N");
    c["roof"] = json!("memory");
    let (code, out, text) = call(
        home.path(),
        "kernel",
        &c,
        true,
        &[("AISP_KERNEL_LAB_WORKER", &fake_worker())],
    );
    assert_eq!(code, 0, "{text}");
    let k = &out["results"][0]["kernels"][1];
    let (gbs, pct) = (
        k["gb_per_s"].as_f64().unwrap(),
        k["pct_of_roof"].as_f64().unwrap(),
    );
    // The fake worker's memory roof is 3000 GB/s.
    assert!((pct - gbs / 3000.0 * 100.0).abs() < 1e-9, "{k}");
    assert!(k["tflop_per_s"].as_f64().unwrap() > 0.0, "{k}");
}
