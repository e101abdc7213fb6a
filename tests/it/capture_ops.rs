//! The capture operations end to end through the dispatcher, with stand-ins
//! for nsys, ncu and torch (tests/fakes/) so that no GPU or profiler is
//! needed: refusal without --allow-exec, profilers not found, argument
//! checks, successful captures with records, the importer and counter
//! permission failures, timeouts and cancellation that end the whole process
//! group, and the analysis operations on real ncu CSV and Kineto data.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aisp::app::AppState;
use aisp::config::Config;
use aisp::dispatch::{CallOptions, invoke};
use aisp::error::ErrorKind;
use aisp::registry;
use aisp_capture::record;
use aisp_hw::gpu::GpuAvailability;
use serde_json::{Value, json};

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn fake(name: &str) -> PathBuf {
    repo("tests/fakes").join(name)
}

struct Env {
    app: Arc<AppState>,
    _home: tempfile::TempDir,
    work: tempfile::TempDir,
}

/// An aisp with its own home, command execution allowed, a GPU that reports
/// present, and the fake profilers configured.
fn env(allow_exec: bool) -> Env {
    let home = tempfile::tempdir().unwrap();
    let mut config = Config::with_home(home.path().to_path_buf());
    config.allow_exec = allow_exec;
    config.nsys = Some(fake("nsys"));
    config.ncu = Some(fake("ncu"));
    let app = AppState::new(config);
    let mut gpu = GpuAvailability::unavailable("", false);
    gpu.available = true;
    gpu.reason = None;
    app.set_gpu_for_tests(gpu);
    Env {
        app,
        _home: home,
        work: tempfile::tempdir().unwrap(),
    }
}

async fn call(e: &Env, tool: &str, args: Value) -> Result<Value, aisp::OpError> {
    let t = registry::find(tool).unwrap_or_else(|| panic!("no tool {tool}"));
    invoke(&e.app, t, args, CallOptions::default()).await
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            rest.split_whitespace()
                .next()
                .map(|st| st != "Z" && st != "X")
        })
        .unwrap_or(false)
}

fn capture_record(e: &Env, run_id: &str) -> record::CaptureRecord {
    record::get(e.app.store().unwrap(), run_id)
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captures_are_refused_without_allow_exec() {
    let e = env(false);
    for tool in [
        "aisp_profile_nsys",
        "aisp_profile_ncu",
        "aisp_profile_torch",
    ] {
        let err = call(&e, tool, json!({"command": ["python3", "train.py"]}))
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::ExecNotAllowed, "{tool}");
        assert!(err.hint.contains("--allow-exec"));
    }
    // Nothing was recorded.
    let list = call(&e, "aisp_profile_list", json!({})).await.unwrap();
    assert_eq!(list["captures"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_profiler_is_not_found_with_how_to_install() {
    let home = tempfile::tempdir().unwrap();
    let mut config = Config::with_home(home.path().to_path_buf());
    config.allow_exec = true;
    config.nsys = Some(home.path().join("no-nsys-here"));
    config.ncu = Some(home.path().join("no-ncu-here"));
    let app = AppState::new(config);
    let mut gpu = GpuAvailability::unavailable("", false);
    gpu.available = true;
    app.set_gpu_for_tests(gpu);
    let e = Env {
        app,
        _home: home,
        work: tempfile::tempdir().unwrap(),
    };
    let err = call(&e, "aisp_profile_nsys", json!({"command": ["true"]}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(err.message.contains("AISP_NSYS names"), "{}", err.message);
    assert!(err.hint.contains("Install Nsight Systems"), "{}", err.hint);
    let err = call(&e, "aisp_profile_ncu", json!({"command": ["true"]}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(err.hint.contains("Install Nsight Compute"), "{}", err.hint);
    // A .ncu-rep needs ncu; the hint offers the CSV route.
    let rep = e.work.path().join("x.ncu-rep");
    std::fs::write(&rep, "x").unwrap();
    let err = call(
        &e,
        "aisp_profile_ncu_summary",
        json!({"path": rep.display().to_string()}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(err.hint.contains("--csv --page raw"), "{}", err.hint);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_are_validated_before_anything_runs() {
    let e = env(true);
    let cases = [
        (
            "aisp_profile_nsys",
            json!({"command": []}),
            "`command` is empty",
        ),
        (
            "aisp_profile_nsys",
            json!({"command": ["-x"]}),
            "must start with a program",
        ),
        (
            "aisp_profile_nsys",
            json!({"command": ["true"], "trace": ["cuda", "nvtx --sample=cpu"]}),
            "is not a trace name",
        ),
        (
            "aisp_profile_nsys",
            json!({"command": ["true"], "nvtx_range": "step_3"}),
            "capture_range",
        ),
        (
            "aisp_profile_nsys",
            json!({"command": ["true"], "cwd": "/nonexistent/aisp"}),
            "not an existing directory",
        ),
        (
            "aisp_profile_ncu",
            json!({"command": ["true"], "kernel_regex": "("}),
            "does not compile",
        ),
        (
            "aisp_profile_ncu",
            json!({"command": ["true"], "launch_count": 0}),
            "launch_count",
        ),
        (
            "aisp_profile_torch",
            json!({"command": ["python3", "-m", "mod"]}),
            "-m module",
        ),
        (
            "aisp_profile_torch",
            json!({"command": ["python3", "t.py"], "active": 0}),
            "active",
        ),
        (
            "aisp_profile_trace",
            json!({"paths": []}),
            "`paths` is empty",
        ),
    ];
    for (tool, args, needle) in cases {
        let err = call(&e, tool, args.clone()).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput, "{tool} {args}: {err:?}");
        assert!(
            err.message.contains(needle),
            "{tool} {args}: {}",
            err.message
        );
    }
    // Unknown fields and wrong types are refused by the schema.
    let err = call(
        &e,
        "aisp_profile_nsys",
        json!({"command": ["true"], "presett": "full"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    let err = call(
        &e,
        "aisp_profile_nsys",
        json!({"command": "python3 train.py"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    let list = call(&e, "aisp_profile_list", json!({})).await.unwrap();
    assert_eq!(list["captures"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nsys_capture_is_run_exported_recorded_and_resolvable() {
    let e = env(true);
    let out = call(
        &e,
        "aisp_profile_nsys",
        json!({
            "command": ["sh", "-c", "echo step one; echo \"cwd=$(pwd) var=$MY_VAR\"; echo oops >&2"],
            "cwd": e.work.path().display().to_string(),
            "env": {"MY_VAR": "42"},
            "preset": "full",
            "duration_s": 30,
        }),
    )
    .await
    .unwrap();
    let run_id = out["run_id"].as_str().unwrap().to_string();
    assert!(run_id.starts_with("nsys-"));
    let run_dir = PathBuf::from(out["run_dir"].as_str().unwrap());
    assert!(run_dir.starts_with(e.app.config.runs_dir()));
    assert_eq!(out["profiler"]["version"], "2025.3.1.90");
    assert_eq!(out["profiler"]["found_in"], "AISP_NSYS");
    assert_eq!(out["exit_code"], 0);
    // The profiler command carries the preset, the duration and the output under the run folder.
    let pc: Vec<String> = serde_json::from_value(out["profiler_command"].clone()).unwrap();
    assert_eq!(pc[1], "profile");
    assert!(pc.contains(&"--trace=cuda,nvtx,osrt,cublas,cudnn".to_string()));
    assert!(pc.contains(&"--cuda-memory-usage=true".to_string()));
    assert!(pc.contains(&"--duration=30".to_string()));
    assert!(pc.contains(&format!("--output={}", run_dir.join("profile").display())));
    let cwd = std::fs::canonicalize(e.work.path()).unwrap();
    let stdout: Vec<String> = serde_json::from_value(out["stdout"]["tail"].clone()).unwrap();
    assert_eq!(
        stdout,
        vec![
            "Collecting data...".to_string(),
            "step one".to_string(),
            format!("cwd={} var=42", cwd.display()),
            "Generated:".to_string(),
            format!("    {}", run_dir.join("profile.nsys-rep").display()),
        ]
    );
    assert_eq!(out["stderr"]["tail"], json!(["oops"]));
    let sqlite = run_dir.join("profile.sqlite");
    assert_eq!(out["artifacts"]["sqlite"], sqlite.display().to_string());
    assert!(sqlite.is_file());
    assert!(run_dir.join("profile.nsys-rep").is_file());
    assert!(run_dir.join("nsys-profile.stdout.log").is_file());

    let rec = capture_record(&e, &run_id);
    assert_eq!(rec.state, record::CaptureState::Succeeded);
    assert_eq!(rec.exit_code, Some(0));
    assert_eq!(rec.command[0], "sh");
    assert_eq!(rec.profiler_version.as_deref(), Some("2025.3.1.90"));
    assert_eq!(
        record::resolve_profile_ref(e.app.store().unwrap(), &run_id).unwrap(),
        sqlite
    );

    let list = call(&e, "aisp_profile_list", json!({"kind": "nsys"}))
        .await
        .unwrap();
    assert_eq!(list["captures"][0]["run_id"], run_id);
    assert_eq!(list["captures"][0]["state"], "succeeded");
    let none = call(&e, "aisp_profile_list", json!({"kind": "ncu"}))
        .await
        .unwrap();
    assert_eq!(none["captures"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_importer_failure_names_the_missing_library_and_the_fix() {
    let e = env(true);
    let err = call(
        &e,
        "aisp_profile_nsys",
        json!({"command": ["true"], "env": {"FAKE_NSYS_MODE": "importer"}}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert!(
        err.message.contains("missing libdw.so.1"),
        "{}",
        err.message
    );
    assert!(err.message.contains("profile.qdstrm"), "{}", err.message);
    assert!(err.hint.contains("LD_LIBRARY_PATH"), "{}", err.hint);
    assert!(err.hint.contains("libdw1 libelf1"), "{}", err.hint);
    let list = call(&e, "aisp_profile_list", json!({"state": "failed"}))
        .await
        .unwrap();
    let rec = &list["captures"][0];
    assert_eq!(rec["state"], "failed");
    assert!(rec["error"].as_str().unwrap().contains("importer"));
    assert!(
        rec["artifacts"]["qdstrm"]
            .as_str()
            .unwrap()
            .ends_with("profile.qdstrm")
    );

    // A run that leaves no report at all says so, with the command's output.
    let err = call(
        &e,
        "aisp_profile_nsys",
        json!({"command": ["sh", "-c", "echo no cuda here; exit 3"], "env": {"FAKE_NSYS_MODE": "noreport"}}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    assert!(
        err.message.contains("nsys wrote no report (exit code 3)"),
        "{}",
        err.message
    );
    assert!(err.message.contains("no cuda here"), "{}", err.message);
}

/// The deadline passes while the profiled program runs: the answer is a
/// timeout carrying the output tails, and the program and its children are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_terminates_the_process_group_and_returns_the_tails() {
    let e = env(true);
    let pid_file = e.work.path().join("pids");
    let script = format!(
        "echo started; sleep 60 & echo $! > {p}; echo $$ >> {p}; wait",
        p = pid_file.display()
    );
    let started = Instant::now();
    let err = call(
        &e,
        "aisp_profile_nsys",
        json!({"command": ["sh", "-c", script], "timeout_s": 1.5}),
    )
    .await
    .unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err:?}");
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert!(
        err.message.contains("nsys profile ran past the time limit"),
        "{}",
        err.message
    );
    assert!(err.message.contains("--- stdout"), "{}", err.message);
    assert!(err.message.contains("started"), "{}", err.message);
    assert!(err.hint.contains("timeout_s"));
    let pids: Vec<i32> = std::fs::read_to_string(&pid_file)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    tokio::time::sleep(Duration::from_millis(200)).await;
    for pid in pids {
        assert!(!alive(pid), "process {pid} survived the timeout");
    }
    let list = call(&e, "aisp_profile_list", json!({})).await.unwrap();
    assert_eq!(list["captures"][0]["state"], "timed_out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_capture_ends_its_processes() {
    let e = env(true);
    let pid_file = e.work.path().join("pid");
    let script = format!("sleep 60 & echo $! > {}; wait", pid_file.display());
    let opts = CallOptions::default();
    let cancel = opts.cancel.clone();
    let pf = pid_file.clone();
    tokio::spawn(async move {
        for _ in 0..100 {
            if pf.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        cancel.cancel();
    });
    let tool = registry::find("aisp_profile_ncu").unwrap();
    let started = Instant::now();
    let err = invoke(&e.app, tool, json!({"command": ["sh", "-c", script]}), opts)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(10));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The dispatcher answers at once; the operation finishes terminating the group.
    for _ in 0..60 {
        if !alive(pid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(pid), "the grandchild survived the cancellation");
    let mut state = Value::Null;
    for _ in 0..60 {
        let list = call(&e, "aisp_profile_list", json!({})).await.unwrap();
        state = list["captures"][0]["state"].clone();
        if state != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(state, "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ncu_capture_is_parsed_into_kernel_records() {
    let e = env(true);
    let fake_env = json!({
        "FAKE_NCU_RAW": repo("tests/data/capture/train_good.ncu-raw.csv").display().to_string(),
        "FAKE_NCU_DETAILS": repo("tests/data/capture/train_good.ncu-details.csv").display().to_string(),
    });
    let out = call(
        &e,
        "aisp_profile_ncu",
        json!({"command": ["sh", "-c", "echo final loss 1.0"], "env": fake_env, "set": "detailed",
               "kernel_regex": "nvjet", "limit": 3}),
    )
    .await
    .unwrap();
    assert!(out["run_id"].as_str().unwrap().starts_with("ncu-"));
    assert_eq!(out["profiler"]["version"], "2025.3.1.0");
    let pc: Vec<String> = serde_json::from_value(out["profiler_command"].clone()).unwrap();
    let joined = pc[1..].join(" ");
    assert!(
        joined.starts_with("--set detailed --clock-control none --target-processes all --kernel-name regex:nvjet --launch-count 20"),
        "{joined}"
    );
    let s = &out["summary"];
    assert_eq!(s["pages"], json!(["raw", "details"]));
    assert_eq!(s["kernel_count"], 12);
    assert_eq!(s["kernels"].as_array().unwrap().len(), 3);
    // Raw values, with the details page's hit rates and rules merged by result id.
    let k0 = &s["kernels"][0];
    assert_eq!(k0["duration_ns"], 2848.0);
    assert_eq!(k0["l2_hit_rate_pct"], 99.64);
    assert_eq!(k0["rules"].as_array().unwrap().len(), 8);
    let dir = PathBuf::from(out["run_dir"].as_str().unwrap());
    assert!(dir.join("profile.raw.csv").is_file());
    assert!(dir.join("profile.details.csv").is_file());
    assert!(dir.join("profile.ncu-rep").is_file());
    let rec = capture_record(&e, out["run_id"].as_str().unwrap());
    assert_eq!(rec.state, record::CaptureState::Succeeded);
    assert!(
        rec.findings[0]
            .starts_with("HighPipeUtilization on void at::vectorized_elementwise_kernel")
    );

    // The same report again, by run id, through the summary operation.
    let again = call(
        &e,
        "aisp_profile_ncu_summary",
        json!({"path": out["run_id"], "limit": 1}),
    )
    .await
    .unwrap();
    assert_eq!(again["kernel_count"], 12);
    assert_eq!(again["kernels"][0]["l2_hit_rate_pct"], 99.64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_permission_and_empty_filters_are_explained() {
    let e = env(true);
    let err = call(
        &e,
        "aisp_profile_ncu",
        json!({"command": ["true"], "env": {"FAKE_NCU_MODE": "perm"}}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert!(err.message.contains("ERR_NVGPUCTRPERM"));
    assert!(err.hint.contains("NVreg_RestrictProfilingToAdminUsers=0"));
    let err = call(
        &e,
        "aisp_profile_ncu",
        json!({"command": ["true"], "env": {"FAKE_NCU_MODE": "nokernels"}, "kernel_regex": "nothing"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    assert!(
        err.message.contains("no kernel matched the filters"),
        "{}",
        err.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ncu_summary_reads_csv_pages() {
    let e = env(true);
    let raw = repo("tests/data/capture/train_good.ncu-raw.csv");
    let details = repo("tests/data/capture/train_good.ncu-details.csv");
    let out = call(
        &e,
        "aisp_profile_ncu_summary",
        json!({"path": details.display().to_string()}),
    )
    .await
    .unwrap();
    assert_eq!(out["pages"], json!(["details"]));
    assert_eq!(out["kernel_count"], 6);
    assert_eq!(out["total_duration_ns"], 35_648.0);
    assert_eq!(out["top_advice"][0]["rule"], "HighPipeUtilization");
    let both = call(
        &e,
        "aisp_profile_ncu_summary",
        json!({"path": raw.display().to_string(), "details_path": details.display().to_string()}),
    )
    .await
    .unwrap();
    assert_eq!(both["pages"], json!(["raw", "details"]));
    assert_eq!(both["device_name"], "NVIDIA H100 80GB HBM3");
    let err = call(&e, "aisp_profile_ncu_summary", json!({"path": "nope.csv"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    let not_ncu = e.work.path().join("x.csv");
    std::fs::write(&not_ncu, "a,b\n1,2\n").unwrap();
    let err = call(
        &e,
        "aisp_profile_ncu_summary",
        json!({"path": not_ncu.display().to_string()}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
}

fn decompressed_trace() -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ops_train_good.kineto.json");
    if !out.exists() {
        let mut bytes = Vec::new();
        lzma_rs::xz_decompress(
            &mut std::io::BufReader::new(
                std::fs::File::open(repo("tests/data/capture/train_good.kineto.json.xz")).unwrap(),
            ),
            &mut bytes,
        )
        .unwrap();
        let tmp = out.with_extension("tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torch_capture_runs_the_wrapper_and_analyses_the_trace() {
    let e = env(true);
    let out = call(
        &e,
        "aisp_profile_torch",
        json!({
            "command": ["python3", fake("train_fake.py").display().to_string(), "--lr", "0.1"],
            "env": {
                "PYTHONPATH": fake("faketorch").display().to_string(),
                "FAKE_TRACE": decompressed_trace().display().to_string(),
            },
            "wait": 1, "warmup": 1, "active": 3,
        }),
    )
    .await
    .unwrap();
    assert_eq!(out["stdout"]["tail"], json!(["trained ['--lr', '0.1']"]));
    let dir = PathBuf::from(out["run_dir"].as_str().unwrap());
    assert_eq!(
        out["traces"],
        json!([dir.join("trace.json").display().to_string()])
    );
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    // Six optimizer steps; the schedule (1 + 1 + 3) made the trace at the fifth.
    assert_eq!(meta["optimizer_steps"], 6);
    assert_eq!(meta["torch_version"], "0.0.0-fake");
    assert_eq!(
        meta["schedule"],
        json!({"wait": 1, "warmup": 1, "active": 3})
    );
    let a = &out["analysis"];
    assert_eq!(a["traces"][0]["devices"][0]["busy_ns"], 5_160_428);
    assert_eq!(a["findings"][0]["id"], "host_bound");
    let run_id = out["run_id"].as_str().unwrap();
    assert_eq!(
        capture_record(&e, run_id).findings[0].split(']').next(),
        Some("[critical")
    );

    // The trace again, by run id and by path.
    for reference in [
        run_id.to_string(),
        dir.join("trace.json").display().to_string(),
    ] {
        let t = call(
            &e,
            "aisp_profile_trace",
            json!({"paths": [reference], "top": 3}),
        )
        .await
        .unwrap();
        assert_eq!(t["traces"][0]["top_kernels"].as_array().unwrap().len(), 3);
        assert_eq!(t["traces"][0]["launch_stats"]["short_kernels"], 225);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torch_missing_is_reported_as_such() {
    let e = env(true);
    let script = e.work.path().join("train.py");
    std::fs::write(&script, "print('hi')\n").unwrap();
    // An empty PYTHONPATH entry cannot provide torch; this machine has none.
    let err = call(
        &e,
        "aisp_profile_torch",
        json!({"command": ["python3", script.display().to_string()], "env": {"PYTHONNOUSERSITE": "1"}}),
    )
    .await
    .unwrap_err();
    if err.message.contains("PyTorch is not installed") {
        assert_eq!(err.kind, ErrorKind::NotFound);
        assert!(err.hint.contains("pip install torch"));
    } else {
        // A machine with a real torch: the script steps no optimizer.
        assert_eq!(err.kind, ErrorKind::InvalidInput, "{err:?}");
        assert!(err.hint.contains("step_on"), "{err:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_analysis_of_files_folders_and_errors() {
    let e = env(false);
    let xz = repo("tests/data/capture/train_good.kineto.json.xz");
    // Two copies in a folder read as two ranks.
    let dir = e.work.path().join("ranks");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(&xz, dir.join("rank0.json.xz")).unwrap();
    std::fs::copy(&xz, dir.join("rank1.json.xz")).unwrap();
    std::fs::write(dir.join("notes.txt"), "ignored").unwrap();
    let out = call(
        &e,
        "aisp_profile_trace",
        json!({"paths": [dir.display().to_string()]}),
    )
    .await
    .unwrap();
    assert_eq!(out["files"].as_array().unwrap().len(), 2);
    assert_eq!(out["cross_rank"]["ranks"][1]["compute_ns"], 4_752_162);
    let err = call(
        &e,
        "aisp_profile_trace",
        json!({"paths": ["/nonexistent/trace.json"]}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    let bad = e.work.path().join("bad.json");
    std::fs::write(&bad, "{\"traceEvents\": 5}").unwrap();
    let err = call(
        &e,
        "aisp_profile_trace",
        json!({"paths": [bad.display().to_string()]}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
}

/// An `nsys` that records its arguments and process group, then hangs.
fn hanging_nsys(dir: &Path) -> PathBuf {
    let p = dir.join("nsys-hangs");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {dir}/argv\nsleep 300 &\necho $! > {dir}/sleeper\nwait\n",
            dir = dir.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn nsys_export_honours_aisp_nsys_and_is_stopped_at_its_timeout() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let nsys = hanging_nsys(work.path());
    // A report whose relative name starts with `-`: it must not reach nsys as an option.
    std::fs::write(work.path().join("-o.nsys-rep"), b"not really a report").unwrap();
    let started = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aisp"))
        .current_dir(work.path())
        .env("AISP_HOME", home.path())
        .env("AISP_CONFIG", home.path().join("none.toml"))
        .env("AISP_NSYS", &nsys)
        .env("AISP_NSYS_EXPORT_TIMEOUT_S", "2")
        .env("PATH", "/usr/bin:/bin")
        .args([
            "--format",
            "json",
            "profile",
            "info",
            "--json",
            r#"{"path": "-o.nsys-rep"}"#,
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["error"]["kind"], "timeout", "{v}");
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("nsys_export_timeout_s"),
        "{v}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    // The configured nsys ran, with the report as an absolute path (never an option).
    let argv = std::fs::read_to_string(work.path().join("argv")).unwrap();
    let args: Vec<&str> = argv.lines().collect();
    assert!(args.contains(&"export"), "{argv}");
    let report = args.last().unwrap();
    assert!(
        report.starts_with('/') && report.ends_with("/-o.nsys-rep"),
        "{argv}"
    );
    // Nothing it started outlives the call.
    let sleeper: i32 = std::fs::read_to_string(work.path().join("sleeper"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(sleeper), "nsys's child {sleeper} is still running");
}
