//! Why a capture failed. Each failure says what happened, with the profiled
//! command's output tails where they explain it; what the caller should do
//! about it (the hint) is the application's to say.

use std::path::PathBuf;

use aisp_store::StoreError;

use crate::diagnose::ImporterFailure;
use crate::process::RunError;

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The caller cancelled, or its deadline passed, between steps.
    #[error("cancelled")]
    Cancelled,
    /// The caller gave up while the capture waited for the GPU.
    #[error("cancelled while waiting for the GPU")]
    CancelledInQueue,
    #[error("cannot create the run folder under {}: {source}", .runs_dir.display())]
    RunFolder {
        runs_dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create {}: {source}", .dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", .path.display())]
    WriteFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot list {}: {source}", .dir.display())]
    ListFolder {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A step's program could not be started.
    #[error("{phase}: {source}")]
    Spawn {
        phase: String,
        #[source]
        source: RunError,
    },
    /// A step's logs could not be written, or its process was lost.
    #[error("{phase}: {source}")]
    Run {
        phase: String,
        #[source]
        source: RunError,
    },
    #[error(
        "{phase} ran past the time limit after {secs:.1} s and was stopped (its whole process group was \
         terminated; run {run_id} kept its logs in {}).{tails}",
        .dir.display()
    )]
    TimedOut {
        phase: String,
        secs: f64,
        run_id: String,
        dir: PathBuf,
        tails: String,
    },
    #[error(
        "nsys captured the run but could not turn it into a report: its importer is missing {} \
         (`Unable to retrieve the importer version`). The raw capture is {} (run {run_id}).{tails}",
        missing_libraries(.failure),
        .qdstrm.display()
    )]
    ImporterMissing {
        failure: ImporterFailure,
        qdstrm: PathBuf,
        run_id: String,
        tails: String,
    },
    #[error(
        "nsys wrote no report ({status}); the command may have failed to start or ended before any CUDA \
         activity (a capture range that never opened also leaves no report).{tails}"
    )]
    NoNsysReport { status: String, tails: String },
    #[error("nsys export did not write {} ({status}).{tails}", .sqlite.display())]
    ExportFailed {
        sqlite: PathBuf,
        /// The report that stays in the run folder.
        report: PathBuf,
        status: String,
        tails: String,
    },
    #[error(
        "no rank wrote a report ({status}): the launcher or the program may have failed before any CUDA activity.{tails}"
    )]
    NoRankReport { status: String, tails: String },
    #[error(
        "ncu may not read the GPU performance counters on this machine (ERR_NVGPUCTRPERM).{tails}"
    )]
    CounterPermission { tails: String },
    #[error("ncu could not start its profiler: {line}.{tails}")]
    ProfilerInit { line: String, tails: String },
    #[error("ncu wrote no report ({status}; {why}).{tails}")]
    NoNcuReport {
        status: String,
        why: &'static str,
        tails: String,
    },
    #[error("ncu could not import {} ({status}).{tails}", .report.display())]
    ImportFailed {
        report: PathBuf,
        status: String,
        tails: String,
    },
    /// The command has no Python script for the profiler wrapper to run.
    #[error("{0}")]
    NotAScript(String),
    #[error("PyTorch is not installed for the Python that ran the script ({python}).{tails}")]
    NoTorch { python: String, tails: String },
    #[error(
        "the profiler wrote no trace ({status}).{}{tails}",
        if *.stepped_no_optimizer { " The script stepped no optimizer, so the schedule never reached its active steps." } else { "" }
    )]
    NoTrace {
        status: String,
        stepped_no_optimizer: bool,
        tails: String,
    },
}

fn missing_libraries(f: &ImporterFailure) -> String {
    if f.missing_libraries.is_empty() {
        "libdw.so.1/libelf.so.1".to_string()
    } else {
        f.missing_libraries.join(", ")
    }
}
