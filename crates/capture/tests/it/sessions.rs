//! Captures through the crate's API, with the fake profilers of
//! `tests/fakes/` (no GPU, no Nsight tools): a session lent by a test host,
//! each profiler's capture, and the failures they explain.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use aisp_capture::ncu::{self, NcuOptions};
use aisp_capture::nsys::{self, NsysOptions};
use aisp_capture::record::{self, CaptureKind, CaptureState};
use aisp_capture::tools::ToolInfo;
use aisp_capture::{CaptureError, GpuTurn, Host, Session, UserCommand};
use aisp_store::Store;

fn fake(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fakes")
        .join(name)
}

/// A host whose caller never gives up unless told, and whose GPU queue is one lock.
#[derive(Default)]
struct TestHost {
    given_up: AtomicBool,
    gpu: Mutex<()>,
    progress: Mutex<Vec<(f64, String)>>,
}

impl Host for TestHost {
    fn tool(&self) -> &str {
        "test_capture"
    }
    fn cancelled(&self) -> bool {
        self.given_up.load(Ordering::SeqCst)
    }
    fn timed_out(&self) -> bool {
        false
    }
    fn deadline(&self) -> Option<Instant> {
        None
    }
    fn progress(&self, elapsed_s: f64, message: String) {
        self.progress.lock().unwrap().push((elapsed_s, message));
    }
    fn gpu_turn(&self) -> Option<GpuTurn<'_>> {
        if self.cancelled() {
            return None;
        }
        Some(Box::new(self.gpu.lock().unwrap()))
    }
}

struct Place {
    store: Store,
    runs: tempfile::TempDir,
}

fn place() -> Place {
    let runs = tempfile::tempdir().unwrap();
    let store = Store::open(&runs.path().join("aisp.sqlite")).unwrap();
    Place { store, runs }
}

fn profiler(name: &str) -> ToolInfo {
    ToolInfo {
        path: fake(name).display().to_string(),
        version: None,
        found_in: "test".into(),
    }
}

fn command(argv: &[&str], env: &[(&str, &str)]) -> UserCommand {
    UserCommand {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        cwd: None,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn start<'a>(
    host: &'a TestHost,
    p: &'a Place,
    kind: CaptureKind,
    cmd: &UserCommand,
) -> Session<'a> {
    Session::start(host, &p.store, p.runs.path(), kind, cmd, None).unwrap()
}

fn nsys_options() -> NsysOptions {
    NsysOptions {
        force_overwrite: true,
        ..NsysOptions::default()
    }
}

#[test]
fn an_nsys_capture_runs_exports_and_records_its_end() {
    let (host, p) = (TestHost::default(), place());
    let nsys = profiler("nsys");
    let cmd = command(&["sh", "-c", "echo step; exit 2"], &[]);
    let mut s = Session::start(
        &host,
        &p.store,
        p.runs.path(),
        CaptureKind::Nsys,
        &cmd,
        Some(&nsys),
    )
    .unwrap();
    let c = nsys::capture(&mut s, &cmd, &nsys_options(), &nsys).unwrap();
    assert_eq!(c.sqlite, s.dir.join("profile.sqlite"));
    assert!(c.sqlite.is_file());
    assert_eq!(c.profiler_command[0], nsys.path);
    assert_eq!(c.outcome.exit_code, Some(2));
    assert_eq!(s.rec.exit_code, Some(2));
    for a in ["profile_stdout", "profile_stderr", "nsys_rep", "sqlite"] {
        assert!(
            s.rec.artifacts.contains_key(a),
            "{a}: {:?}",
            s.rec.artifacts
        );
    }
    assert_eq!(
        s.notes,
        vec!["the profiled command ended with exit code 2; the capture covers the run up to then"]
    );
    let info = s.info(c.profiler_command.clone(), Some(nsys.clone()), &c.outcome);
    assert_eq!(info.run_id, s.rec.run_id);
    assert_eq!(info.stdout.tail[1], "step");
    s.finish(CaptureState::Succeeded, None);
    let rec = record::get(&p.store, &s.rec.run_id).unwrap().unwrap();
    assert_eq!(rec.state, CaptureState::Succeeded);
    assert_eq!(rec.tool, "test_capture");
    assert!(rec.duration_ms.is_some());
    // Progress counts seconds since the start, strictly increasing.
    let progress = host.progress.lock().unwrap();
    assert!(progress.windows(2).all(|w| w[0].0 < w[1].0), "{progress:?}");
    assert!(progress.iter().any(|(_, m)| m == "nsys export: starting"));
}

#[test]
fn nsys_failures_say_what_happened() {
    let (host, p) = (TestHost::default(), place());
    let nsys = profiler("nsys");
    let run = |mode: &str| {
        let cmd = command(&["true"], &[("FAKE_NSYS_MODE", mode)]);
        let mut s = start(&host, &p, CaptureKind::Nsys, &cmd);
        let e = nsys::capture(&mut s, &cmd, &nsys_options(), &nsys).unwrap_err();
        (e, s.rec.artifacts.clone())
    };
    let (e, artifacts) = run("importer");
    let CaptureError::ImporterMissing {
        failure, qdstrm, ..
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(failure.missing_libraries, vec!["libdw.so.1"]);
    assert!(
        e.to_string().contains("its importer is missing libdw.so.1"),
        "{e}"
    );
    assert_eq!(artifacts["qdstrm"], qdstrm.display().to_string());
    let (e, _) = run("noreport");
    assert!(matches!(e, CaptureError::NoNsysReport { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("nsys wrote no report (exit code 0)"),
        "{e}"
    );
}

#[test]
fn ncu_failures_are_diagnosed_from_its_output() {
    let (host, p) = (TestHost::default(), place());
    let tool = profiler("ncu");
    let opts = NcuOptions {
        launch_count: Some(1),
        ..NcuOptions::default()
    };
    for (mode, want) in [
        ("perm", "ERR_NVGPUCTRPERM"),
        ("nokernels", "no kernel matched the filters"),
    ] {
        let cmd = command(&["true"], &[("FAKE_NCU_MODE", mode)]);
        let mut s = start(&host, &p, CaptureKind::Ncu, &cmd);
        let e = ncu::capture(&mut s, &cmd, &opts, &tool, 5).unwrap_err();
        assert!(e.to_string().contains(want), "{mode}: {e}");
    }
}

#[test]
fn a_caller_that_gave_up_is_not_queued_for_the_gpu() {
    let (host, p) = (TestHost::default(), place());
    let nsys = profiler("nsys");
    let cmd = command(&["true"], &[]);
    let mut s = start(&host, &p, CaptureKind::Nsys, &cmd);
    host.given_up.store(true, Ordering::SeqCst);
    let e = nsys::capture(&mut s, &cmd, &nsys_options(), &nsys).unwrap_err();
    assert!(matches!(e, CaptureError::CancelledInQueue), "{e:?}");
    s.finish(CaptureState::Cancelled, Some("cancelled"));
    let rec = record::get(&p.store, &s.rec.run_id).unwrap().unwrap();
    assert_eq!(rec.state, CaptureState::Cancelled);
    assert_eq!(rec.error.as_deref(), Some("cancelled"));
}
