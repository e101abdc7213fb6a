//! The capture half of the `profile` domain: run a command under Nsight
//! Systems, Nsight Compute or the PyTorch profiler and analyse what it wrote;
//! analyse existing ncu reports and Kineto traces; list captures.
//!
//! The work lives in [`aisp_capture`] (the checked command, the session with
//! its record and run folder, each profiler's capture, discovery, records),
//! [`aisp_profile::ncu`] and [`aisp_profile::kineto`]. This module turns
//! arguments into options, lends a capture the call's cancellation, deadline,
//! progress and GPU queue ([`Host`] for [`OpContext`]), and turns
//! [`CaptureError`] into `OpError` with what to do. Nsight Systems exports are
//! analysed by the profile tools (`aisp_profile_info`, `aisp_profile_rules`,
//! `aisp_profile_ranks`) through nested calls.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::context::OpContext;
use crate::error::{ErrorKind, OpError};
use crate::registry::{Hints, OpSpec, Operation};
use aisp_capture::ncu::{self as ncu_cmd, ClockControl, NcuOptions, NcuSet, ReplayMode};
use aisp_capture::nsys::{self as nsys_cmd, CaptureRange, NsysOptions, NsysPreset};
use aisp_capture::record::{self, CaptureKind, CaptureRecord, CaptureState};
use aisp_capture::tools::{self, Profiler, SearchPlaces, ToolError, ToolInfo};
use aisp_capture::torch::{self as torch_cmd, StepOn, TorchOptions};
use aisp_capture::{
    COUNTER_PERMISSION_FIX, CaptureError, CaptureInfo, CommandError, GpuTurn, Host,
    PROFILER_INIT_FIX, Session, UserCommand,
};
use aisp_profile::input_file::{self, InputKind};
use aisp_profile::kineto::{self, Limits};
use aisp_profile::ncu;

// ---------------------------------------------------------------------------------------------
// Shared pieces

/// The user's command, checked; the error says how to pass one.
fn check_command(
    command: &[String],
    cwd: Option<&str>,
    env: Option<&BTreeMap<String, String>>,
) -> Result<UserCommand, OpError> {
    UserCommand::check(command, cwd, env).map_err(|e| {
        let hint = match e {
            CommandError::Empty | CommandError::NotAProgram(_) | CommandError::NulByte => {
                "Pass the program and its arguments as an array, e.g. \"command\": [\"python3\", \"train.py\", \"--steps\", \"20\"]."
            }
            CommandError::NoSuchCwd(_) => {
                "Pass the directory the command should run in (absolute, or relative to the server's working directory)."
            }
            CommandError::BadEnvName(_) => {
                "Pass `env` as an object of NAME: value strings, e.g. {\"CUDA_VISIBLE_DEVICES\": \"0\"}."
            }
        };
        OpError::invalid_input(e.to_string(), hint)
    })
}

fn tool_error(e: ToolError, tool: Profiler) -> OpError {
    let install = match tool {
        Profiler::Nsys => {
            "Install Nsight Systems (https://developer.nvidia.com/nsight-systems, or the CUDA toolkit's nsight-systems \
             package) so that `nsys` is on PATH, or set AISP_NSYS (or `nsys = \"...\"` in the config file) to its path."
        }
        Profiler::Ncu => {
            "Install Nsight Compute (https://developer.nvidia.com/nsight-compute, or the CUDA toolkit's nsight-compute \
             package) so that `ncu` is on PATH, or set AISP_NCU (or `ncu = \"...\"` in the config file) to its path."
        }
    };
    OpError::not_found(e.to_string(), install)
}

pub(super) fn discover(
    ctx: &OpContext,
    tool: Profiler,
    env: &[(String, String)],
) -> Result<ToolInfo, OpError> {
    let configured = match tool {
        Profiler::Nsys => ctx.app().config.nsys.clone(),
        Profiler::Ncu => ctx.app().config.ncu.clone(),
    };
    tools::discover(tool, &SearchPlaces::system(configured), env).map_err(|e| tool_error(e, tool))
}

/// A capture borrows the call's cancellation, deadline and progress, and
/// waits on the app's GPU queue.
impl Host for OpContext {
    fn tool(&self) -> &str {
        OpContext::tool(self)
    }

    fn cancelled(&self) -> bool {
        self.is_cancelled()
    }

    fn timed_out(&self) -> bool {
        OpContext::timed_out(self)
    }

    fn deadline(&self) -> Option<Instant> {
        OpContext::deadline(self)
    }

    fn progress(&self, elapsed_s: f64, message: String) {
        OpContext::progress(self, elapsed_s, None, message);
    }

    fn gpu_turn(&self) -> Option<GpuTurn<'_>> {
        let turn = self.app().lock_gpu_queue(&|| self.is_cancelled()).ok()?;
        Some(Box::new(turn))
    }
}

/// Start a capture of `cmd`: its run folder under the configured runs folder, its record.
pub(super) fn start<'a>(
    ctx: &'a OpContext,
    kind: CaptureKind,
    cmd: &UserCommand,
    profiler: Option<&ToolInfo>,
) -> Result<Session<'a>, OpError> {
    let store = ctx.app().store()?;
    let runs_dir = ctx.app().config.runs_dir();
    Session::start(ctx, store, &runs_dir, kind, cmd, profiler).map_err(|e| capture_error(ctx, e))
}

/// Record how the capture ended: the state follows the error's kind (a
/// cancellation that the deadline caused is a timeout).
pub(super) fn finish<T>(ctx: &OpContext, s: &mut Session<'_>, result: &Result<T, OpError>) {
    match result {
        Ok(_) => s.finish(CaptureState::Succeeded, None),
        Err(e) => {
            let state = match e.kind {
                ErrorKind::Timeout => CaptureState::TimedOut,
                ErrorKind::Cancelled if ctx.timed_out() => CaptureState::TimedOut,
                ErrorKind::Cancelled => CaptureState::Cancelled,
                _ => CaptureState::Failed,
            };
            s.finish(state, Some(&e.message));
        }
    }
}

/// A capture's failure as the call's error, with what to do about it.
pub(super) fn capture_error(ctx: &OpContext, e: CaptureError) -> OpError {
    let message = e.to_string();
    match e {
        CaptureError::Cancelled => ctx.stop_error(),
        // The GPU queue's own answer, whatever stopped the wait.
        CaptureError::CancelledInQueue => OpError::cancelled(),
        CaptureError::Store(e) => e.into(),
        CaptureError::RunFolder { .. }
        | CaptureError::CreateDir { .. }
        | CaptureError::WriteFile { .. }
        | CaptureError::ListFolder { .. }
        | CaptureError::Run { .. } => OpError::internal(message),
        CaptureError::Spawn { .. } => OpError::not_found(
            message,
            "Check that the program exists and is executable (give its full path, or check PATH), \
             and that `cwd` is right.",
        ),
        CaptureError::TimedOut { .. } => OpError::timeout(
            message,
            "Call again with a larger `timeout_s` or `async: true`, or make the run shorter (a smaller workload, \
             nsys `duration_s` or a capture range, ncu `launch_count` or `kernel_regex`).",
        ),
        CaptureError::ImporterMissing { failure, .. } => {
            OpError::unsupported(message, failure.fix())
        }
        CaptureError::NoNsysReport { .. } => OpError::invalid_input(
            message,
            "Check the command runs on its own first, and that `capture_range`/`nvtx_range` match what the program \
             does. The logs are in the run folder.",
        ),
        CaptureError::ExportFailed { report, .. } => OpError::unsupported(
            message,
            format!(
                "The report {} is kept; export it by hand with `nsys export --type sqlite {}` to see why.",
                report.display(),
                report.display()
            ),
        ),
        CaptureError::NoRankReport { .. } => OpError::invalid_input(
            message,
            "Check that the launcher runs the program on its own first (torchrun needs the program as an \
             executable after --no-python, e.g. [\"python3\", \"train.py\"]). The logs are in the run folder.",
        ),
        CaptureError::CounterPermission { .. } => {
            OpError::unsupported(message, COUNTER_PERMISSION_FIX)
        }
        CaptureError::ProfilerInit { .. } => OpError::unsupported(message, PROFILER_INIT_FIX),
        CaptureError::NoNcuReport { .. } => OpError::invalid_input(
            message,
            "Check `kernel_regex` (it matches the function name, e.g. \"gemm\"), `launch_skip`, `nvtx_include` \
             (ranges need \"/\" at the end for push/pop ranges), and that the command runs on its own.",
        ),
        CaptureError::ImportFailed { .. } => OpError::invalid_input(
            message,
            "The report may be damaged or from a newer Nsight Compute than the local ncu.",
        ),
        CaptureError::NotAScript(_) => {
            OpError::invalid_input(message, "Pass a command that runs a .py script.")
        }
        CaptureError::NoTorch { .. } => OpError::not_found(
            message,
            "Run with the interpreter of the environment that has torch (e.g. \"command\": \
             [\"/path/to/venv/bin/python\", \"train.py\"]), or install it (pip install torch).",
        ),
        CaptureError::NoTrace { .. } => OpError::invalid_input(
            message,
            "Check that the script runs on its own; for scripts without an optimizer (inference, benchmarks) call \
             again with \"step_on\": \"none\"; make sure the run has at least wait + warmup + active optimizer steps.",
        ),
    }
}

fn as_object(v: Value) -> Option<Map<String, Value>> {
    match v {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// A profile reference as the Nsight Systems profile operations take it: the
/// run id of an aisp_profile_nsys capture becomes the path of its SQLite
/// export; anything else (a path, even a missing one, so that the caller's own
/// error names it) is returned as given.
pub fn profile_ref(ctx: &OpContext, reference: &str) -> Result<String, OpError> {
    if input_file::something_at(Path::new(reference)) || !record::looks_like_run_id(reference) {
        return Ok(reference.to_string());
    }
    let store = ctx.app().store()?;
    let Some(rec) = record::get(store, reference)? else {
        return Ok(reference.to_string());
    };
    if rec.kind != CaptureKind::Nsys {
        return Err(OpError::invalid_input(
            format!(
                "run {reference} is an {} capture; this tool reads Nsight Systems captures",
                rec.kind.as_str()
            ),
            "Use aisp_profile_ncu_summary for ncu runs and aisp_profile_trace for torch runs.",
        ));
    }
    match record::resolve_profile_ref(store, reference) {
        Ok(p) => Ok(p.display().to_string()),
        Err(record::ResolveError::Store(e)) => Err(e.into()),
        Err(e) => Err(OpError::not_found(
            e.to_string(),
            "Pick a succeeded nsys capture from aisp_profile_list, or pass the export's path.",
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// aisp_profile_nsys

pub struct ProfileNsys;

/// Arguments of `aisp_profile_nsys`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NsysInput {
    /// The program and its arguments (argv), e.g. ["python3", "train.py", "--steps", "20"]. Not run through a shell.
    pub command: Vec<String>,
    /// Working directory of the command; default the server's.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Environment variables added for the command, e.g. {"CUDA_VISIBLE_DEVICES": "0"}.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// `light` (default): CUDA and NVTX, no CPU sampling or context switches. `full`: adds OS runtime, cuBLAS, cuDNN and CUDA memory usage.
    #[serde(default)]
    pub preset: Option<NsysPreset>,
    /// Explicit nsys --trace list (e.g. ["cuda", "nvtx", "osrt"]); replaces the preset's.
    #[serde(default)]
    pub trace: Option<Vec<String>>,
    /// Collect only part of the run: `nvtx` (inside `nvtx_range`) or `cuda_profiler_api` (between cudaProfilerStart/Stop). Default the whole run.
    #[serde(default)]
    pub capture_range: Option<CaptureRange>,
    /// NVTX range name that starts collection with "capture_range": "nvtx" (e.g. "step_5"; `name@domain` for another domain).
    #[serde(default)]
    pub nvtx_range: Option<String>,
    /// Stop collecting after this many seconds (the program keeps running).
    #[serde(default)]
    pub duration_s: Option<u32>,
    /// Start collecting after this many seconds.
    #[serde(default)]
    pub delay_s: Option<u32>,
    /// Overwrite an existing report of the same name (default true; each run has its own folder).
    #[serde(default)]
    pub force_overwrite: Option<bool>,
    /// Run aisp_profile_info and aisp_profile_rules on the export (default true).
    #[serde(default)]
    pub analyze: Option<bool>,
    /// Per-rank capture: a launcher (["torchrun", "--nproc_per_node=8"], ["srun", "-n", "64"]) to run nsys inside, one report per rank.
    #[serde(default)]
    pub launcher: Option<Vec<String>>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NsysOutput {
    #[serde(flatten)]
    pub capture: CaptureInfo,
    /// `aisp_profile_info` of the export, when the profile tools are available.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub info: Option<Map<String, Value>>,
    /// The top findings of `aisp_profile_rules` (at most 5).
    pub top_findings: Vec<Map<String, Value>>,
    /// Per-rank capture: exports and aisp_profile_ranks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks: Option<Map<String, Value>>,
}

impl Operation for ProfileNsys {
    type Input = NsysInput;
    type Output = NsysOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Capture an Nsight Systems profile",
        summary: "Runs a command under nsys profile, exports the report to SQLite and returns the paths with the profile's info and top findings.",
        description: "Captures a new Nsight Systems profile of `command` (preset light or full, optionally only an NVTX range or a duration), exports it to SQLite under $AISP_HOME/runs/<run_id>/, and returns the paths, output tails, profile info and top findings. Needs --allow-exec and a GPU; takes the program's run time plus the export (timeout_s, async: true).",
        hints: Hints::RUNS_COMMAND,
        needs_gpu: true,
        long_running: true,
        executes_commands: true,
        positional: &["command"],
        intents: &[
            "profile my training script",
            "run nsys on this program",
            "capture a timeline",
            "nsight systems capture",
            "profile a command",
            "capture a profile",
            "with nsight systems",
        ],
        example: r#"{"command": ["python3", "train.py"], "preset": "light", "timeout_s": 600}"#,
        ..OpSpec::new("profile", "nsys")
    };

    fn run(&self, ctx: &OpContext, input: NsysInput) -> Result<NsysOutput, OpError> {
        let cmd = check_command(&input.command, input.cwd.as_deref(), input.env.as_ref())?;
        let opts = NsysOptions {
            preset: input.preset.unwrap_or_default(),
            trace: input.trace,
            capture_range: input.capture_range.unwrap_or_default(),
            nvtx_range: input.nvtx_range,
            duration_s: input.duration_s,
            delay_s: input.delay_s,
            force_overwrite: input.force_overwrite.unwrap_or(true),
        };
        opts.validate().map_err(|m| {
            OpError::invalid_input(
                m,
                "Example: {\"command\": [\"python3\", \"train.py\"], \"preset\": \"full\"} or \
                 {\"capture_range\": \"nvtx\", \"nvtx_range\": \"step_5\"}.",
            )
        })?;
        if let Some(l) = &input.launcher {
            check_command(l, None, None)?;
        }
        let nsys = discover(ctx, Profiler::Nsys, &cmd.env)?;
        let analyze = input.analyze.unwrap_or(true);
        let mut s = start(ctx, CaptureKind::Nsys, &cmd, Some(&nsys))?;
        let result = match &input.launcher {
            Some(l) => nsys_cmd::capture_per_rank(&mut s, &cmd, l, &opts, &nsys)
                .map_err(|e| capture_error(ctx, e))
                .map(|c| analyse_ranks(ctx, &mut s, c, &nsys, analyze)),
            None => nsys_cmd::capture(&mut s, &cmd, &opts, &nsys)
                .map_err(|e| capture_error(ctx, e))
                .and_then(|c| analyse_export(ctx, &mut s, c, &nsys, analyze)),
        };
        finish(ctx, &mut s, &result);
        result
    }
}

/// The export's info and top findings, through the profile tools; a tool
/// that fails leaves a note.
fn analyse_export(
    ctx: &OpContext,
    s: &mut Session<'_>,
    c: nsys_cmd::NsysCapture,
    nsys: &ToolInfo,
    analyze: bool,
) -> Result<NsysOutput, OpError> {
    let mut info = None;
    let mut top = Vec::new();
    if analyze {
        s.progress("analysing the export".into());
        let path = c.sqlite.display().to_string();
        match ctx.call_tool("aisp_profile_info", json!({ "path": path })) {
            Ok(v) => info = as_object(v),
            Err(e) => s.notes.push(analysis_note("aisp_profile_info", &e)),
        }
        match ctx.call_tool("aisp_profile_rules", json!({ "path": path })) {
            Ok(v) => top = top_findings(s, &v),
            Err(e) => s.notes.push(analysis_note("aisp_profile_rules", &e)),
        }
        if ctx.is_cancelled() {
            return Err(ctx.stop_error());
        }
    }
    Ok(NsysOutput {
        capture: s.info(c.profiler_command, Some(nsys.clone()), &c.outcome),
        info,
        top_findings: top,
        ranks: None,
    })
}

/// The set of rank exports, analysed by `aisp_profile_ranks`.
fn analyse_ranks(
    ctx: &OpContext,
    s: &mut Session<'_>,
    c: nsys_cmd::RankCaptures,
    nsys: &ToolInfo,
    analyze: bool,
) -> NsysOutput {
    let mut ranks = Map::new();
    ranks.insert("exports".into(), json!(c.exports));
    let mut top = Vec::new();
    if analyze && !c.exports.is_empty() {
        s.progress("analysing the set of rank exports".into());
        let dir = s.dir.display().to_string();
        match ctx.call_tool("aisp_profile_ranks", json!({ "path": dir, "detail": true })) {
            Ok(v) => {
                top = top_findings(s, &v);
                ranks.insert("analysis".into(), v);
            }
            Err(e) => s.notes.push(analysis_note("aisp_profile_ranks", &e)),
        }
    }
    NsysOutput {
        capture: s.info(c.profiler_command, Some(nsys.clone()), &c.outcome),
        info: None,
        top_findings: top,
        ranks: Some(ranks),
    }
}

/// The first five findings of a profile tool's answer; each is also recorded
/// as a `[severity] title` line.
fn top_findings(s: &mut Session<'_>, answer: &Value) -> Vec<Map<String, Value>> {
    let findings = answer
        .get("findings")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut top = Vec::new();
    for f in findings.into_iter().take(5) {
        s.rec.findings.push(format!(
            "[{}] {}",
            f.get("severity").and_then(Value::as_str).unwrap_or("?"),
            f.get("title").and_then(Value::as_str).unwrap_or("")
        ));
        if let Some(m) = as_object(f) {
            top.push(m);
        }
    }
    top
}

fn analysis_note(tool: &str, e: &OpError) -> String {
    if e.kind == ErrorKind::NotFound && e.message.contains("no tool named") {
        format!(
            "{tool} is not available in this build: the capture is returned without its analysis"
        )
    } else {
        format!("{tool} failed: {}", e.message)
    }
}

// ---------------------------------------------------------------------------------------------
// aisp_profile_ncu

pub struct ProfileNcu;

/// Arguments of `aisp_profile_ncu`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NcuInput {
    /// The program and its arguments (argv), e.g. ["python3", "train.py"]. Not run through a shell.
    pub command: Vec<String>,
    /// Working directory of the command; default the server's.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Environment variables added for the command.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Section set: `basic` (default, fastest), `detailed`, `full` (adds warp stall reasons; slowest) or `roofline`.
    #[serde(default)]
    pub set: Option<NcuSet>,
    /// Extra sections by identifier (e.g. ["WarpStateStats", "MemoryWorkloadAnalysis"]).
    #[serde(default)]
    pub sections: Option<Vec<String>>,
    /// Extra metrics by name (e.g. ["dram__bytes.sum.per_second"]).
    #[serde(default)]
    pub metrics: Option<Vec<String>>,
    /// Profile only kernels whose function name matches this regular expression (e.g. "gemm|nvjet").
    #[serde(default)]
    pub kernel_regex: Option<String>,
    /// Skip this many matching kernel launches first (skip warm-up).
    #[serde(default)]
    pub launch_skip: Option<u64>,
    /// Profile at most this many launches (default 20: every launch is replayed many times).
    #[serde(default)]
    pub launch_count: Option<u64>,
    /// Only kernels inside these NVTX ranges (ncu --nvtx-include syntax, e.g. "step_5/").
    #[serde(default)]
    pub nvtx_include: Option<Vec<String>>,
    /// How passes are replayed: `kernel` (ncu's default), `application`, `range` or `app_range`.
    #[serde(default)]
    pub replay_mode: Option<ReplayMode>,
    /// `none` (default: never change clocks unasked) or `base` (lock to base clocks for repeatability).
    #[serde(default)]
    pub clock_control: Option<ClockControl>,
    /// Kernel launches listed one by one in the result (default 50); groups by name cover all.
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NcuOutput {
    #[serde(flatten)]
    pub capture: CaptureInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<ncu::NcuSummary>,
}

fn ncu_error(e: ncu::NcuError) -> OpError {
    OpError::invalid_input(
        e.to_string(),
        "Pass a report (.ncu-rep) or the CSV of `ncu --csv --page raw` or `--page details`.",
    )
}

impl Operation for ProfileNcu {
    type Input = NcuInput;
    type Output = NcuOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Capture Nsight Compute kernel metrics",
        summary: "Runs a command under ncu (section set, kernel filter, launch skip/count, NVTX filter) and returns per-kernel speed of light, occupancy, memory and rule findings.",
        description: "Runs `command` under Nsight Compute (`ncu`) with a section set (`basic`, `detailed`, `full`, \
`roofline`) or extra sections/metrics, a kernel name regex, launch skip/count (default 20 launches), NVTX include \
filters and a replay mode, with `--clock-control none` unless asked (aisp never locks or changes clocks on its own). \
Then reads the report's raw and details pages into per-kernel records: duration, SM and memory throughput % of peak \
(speed of light) with a compute/memory/latency verdict, achieved and theoretical occupancy with the limiting resource, \
DRAM bandwidth, L1/L2 hit rates, FP32 roofline position when measured, top warp stall reasons (full set), and ncu's \
rule messages, plus kernels grouped by name and the advice with the most estimated time to save. Artifacts (.ncu-rep, \
CSV pages, logs) stay in $AISP_HOME/runs/<run_id>/. When the driver refuses performance counters \
(ERR_NVGPUCTRPERM) the error says how to allow them. Needs --allow-exec and a GPU. Slow: every profiled launch is \
replayed once per pass (seconds per kernel with `full`); honours timeout_s and async: true.",
        hints: Hints::RUNS_COMMAND,
        needs_gpu: true,
        long_running: true,
        executes_commands: true,
        positional: &["command"],
        intents: &[
            "profile kernels with nsight compute",
            "run ncu",
            "run nsight compute",
            "kernel occupancy",
            "roofline of my kernels",
        ],
        example: r#"{"command": ["python3", "train.py"], "set": "detailed", "kernel_regex": "gemm|nvjet", "launch_count": 10}"#,
        ..OpSpec::new("profile", "ncu")
    };

    fn run(&self, ctx: &OpContext, input: NcuInput) -> Result<NcuOutput, OpError> {
        let cmd = check_command(&input.command, input.cwd.as_deref(), input.env.as_ref())?;
        let opts = NcuOptions {
            set: input.set.unwrap_or_default(),
            sections: input.sections.unwrap_or_default(),
            metrics: input.metrics.unwrap_or_default(),
            kernel_regex: input.kernel_regex,
            launch_skip: input.launch_skip,
            launch_count: Some(input.launch_count.unwrap_or(20)),
            nvtx_include: input.nvtx_include.unwrap_or_default(),
            replay_mode: input.replay_mode,
            clock_control: input.clock_control.unwrap_or_default(),
        };
        opts.validate().map_err(|m| {
            OpError::invalid_input(
                m,
                "Example: {\"command\": [\"python3\", \"train.py\"], \"set\": \"detailed\", \"kernel_regex\": \"gemm\", \"launch_count\": 10}.",
            )
        })?;
        let limit = input.limit.unwrap_or(50).max(1);
        let ncu_tool = discover(ctx, Profiler::Ncu, &cmd.env)?;
        let mut s = start(ctx, CaptureKind::Ncu, &cmd, Some(&ncu_tool))?;
        let result = ncu_cmd::capture(&mut s, &cmd, &opts, &ncu_tool, limit)
            .map_err(|e| capture_error(ctx, e))
            .map(|c| NcuOutput {
                capture: s.info(c.profiler_command, Some(ncu_tool.clone()), &c.outcome),
                summary: c.summary,
            });
        finish(ctx, &mut s, &result);
        result
    }
}

// ---------------------------------------------------------------------------------------------
// aisp_profile_ncu_summary

pub struct NcuSummaryOp;

/// Arguments of `aisp_profile_ncu_summary`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NcuSummaryInput {
    /// An Nsight Compute report (.ncu-rep), a CSV page of one (`ncu --csv --page raw` or `--page details`), or the run id of an ncu capture.
    pub path: String,
    /// A second CSV page of the same report (the details page when `path` is the raw one, or the reverse).
    #[serde(default)]
    pub details_path: Option<String>,
    /// Kernel launches listed one by one (default 3); groups by name cover all.
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NcuSummaryOutput {
    /// The files read.
    pub sources: Vec<String>,
    #[serde(flatten)]
    pub summary: ncu::NcuSummary,
    /// What this default answer leaves out, and the argument that brings it back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

impl Operation for NcuSummaryOp {
    type Input = NcuSummaryInput;
    type Output = NcuSummaryOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Summarise an Nsight Compute report",
        summary: "Per-kernel speed of light, occupancy and limiter, DRAM bandwidth, cache hit rates, roofline, warp stalls and rule messages from an existing .ncu-rep or ncu CSV.",
        description: "Reads an existing Nsight Compute result — a .ncu-rep (imported through a local ncu), the CSV that \
`ncu --csv --page raw` or `--page details` printed (program output and ==PROF== lines mixed in are skipped), or the \
run id of an aisp_profile_ncu capture — into per-kernel records: duration, SM and memory throughput % of peak with a \
compute/memory/latency verdict (ncu's 60 % rule), achieved vs theoretical occupancy and the resource that limits it, \
DRAM bandwidth, L1/L2 hit rates, FP32 roofline position (arithmetic intensity, % of roof) when the roofline metrics \
were collected, the largest warp stall reasons when the warp state metrics were, and ncu's rule messages with their \
estimated speedups; plus kernels grouped by name and the advice with the most estimated time to save. Use it on \
reports made elsewhere or to look again at a capture. Milliseconds for CSV; a few seconds to import a report.",
        positional: &["path"],
        intents: &[
            "summarize ncu report",
            "ncu report",
            "read nsight compute csv",
            "ncu-rep",
            "kernel metrics from ncu",
            "occupancy limiter",
            "ncu rules",
        ],
        example: r#"{"path": "profile.ncu-rep"}"#,
        leaves_out: true,
        ..OpSpec::new("profile", "ncu_summary")
    };

    fn run(&self, ctx: &OpContext, input: NcuSummaryInput) -> Result<NcuSummaryOutput, OpError> {
        let limit = input.limit.unwrap_or(3).max(1);
        let mut refs = vec![input.path.as_str()];
        if let Some(d) = &input.details_path {
            refs.push(d);
        }
        let (sources, texts) = read_ncu_sources(ctx, &refs)?;
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let summary = ncu::summarize(&refs, limit).map_err(ncu_error)?;
        let mut left_out = Vec::new();
        if input.limit.is_none() && (summary.kernel_count as usize) > summary.kernels.len() {
            left_out.push(format!(
                "kernel launches past the first {} of {} one by one (`by_name` covers all): pass \"limit\": {}",
                summary.kernels.len(),
                summary.kernel_count,
                summary.kernel_count
            ));
        }
        Ok(NcuSummaryOutput {
            sources: sources.iter().map(|p| p.display().to_string()).collect(),
            summary,
            left_out,
        })
    }
}

/// The CSV pages behind ncu references: a .ncu-rep (both pages, imported
/// through a local ncu), a CSV page (plain or .xz), or an ncu run id.
pub(super) fn read_ncu_sources(
    ctx: &OpContext,
    refs: &[&str],
) -> Result<(Vec<PathBuf>, Vec<String>), OpError> {
    let store = ctx.app().store()?;
    let mut sources = Vec::new();
    for r in refs {
        sources.push(record::resolve_profile_ref(store, r).map_err(|e| {
            OpError::not_found(
                e.to_string(),
                "Pass an existing .ncu-rep or .csv path, or a run id from aisp_profile_list.",
            )
        })?);
    }
    let mut texts: Vec<String> = Vec::new();
    for src in &sources {
        if src.extension().is_some_and(|e| e == "ncu-rep") {
            // ncu would block on a FIFO just as we would.
            input_file::check_regular(src, InputKind::NsightExport, &ctx.app().config.limits)?;
            texts.extend(import_report(ctx, src)?);
        } else {
            texts.push(input_file::read_text_capped_xz(
                src,
                InputKind::NcuCsv,
                &ctx.app().config.limits,
            )?);
        }
    }
    Ok((sources, texts))
}

/// The raw and details pages of a report, through a local ncu.
/// The raw and details pages of a report, through a local ncu.
fn import_report(ctx: &OpContext, report: &Path) -> Result<Vec<String>, OpError> {
    let ncu_tool = discover(ctx, Profiler::Ncu, &[]).map_err(|mut e| {
        e.hint = format!(
            "{} Or pass the CSV pages instead: `ncu --import {} --csv --page raw > raw.csv`.",
            e.hint,
            report.display()
        );
        e
    })?;
    ncu_cmd::import_report(
        Path::new(&ncu_tool.path),
        report,
        &ctx.app().config.cache_dir(),
        ctx.deadline(),
        &|| ctx.is_cancelled(),
    )
    .map_err(|e| capture_error(ctx, e))
}

// ---------------------------------------------------------------------------------------------
// aisp_analyze_memory_patterns

pub struct MemoryPatternsOp;

/// Arguments of `aisp_analyze_memory_patterns`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryPatternsInput {
    /// An ncu report (.ncu-rep), its raw CSV page (plain or .xz), or an ncu run id. Either this or `command`.
    #[serde(default)]
    pub path: Option<String>,
    /// The details CSV page of the same report (adds ncu's rule estimates).
    #[serde(default)]
    pub details_path: Option<String>,
    /// Instead of `path`: run this program (argv) under ncu with the counters needed. Needs --allow-exec and a GPU.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// Working directory of `command`.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Environment variables added for `command`.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// With `command`: profile only kernels whose name matches this regex.
    #[serde(default)]
    pub kernel_regex: Option<String>,
    /// With `command`: skip this many matching launches first.
    #[serde(default)]
    pub launch_skip: Option<u64>,
    /// With `command`: profile at most this many launches (default 10).
    #[serde(default)]
    pub launch_count: Option<u64>,
    /// Kernels listed (default 30, flagged first).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct MemoryPatternsOutput {
    /// The files read.
    pub sources: Vec<String>,
    #[serde(flatten)]
    pub report: ncu::patterns::PatternReport,
    /// The ncu run, when `command` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

impl Operation for MemoryPatternsOp {
    type Input = MemoryPatternsInput;
    type Output = MemoryPatternsOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Memory access patterns per kernel (ncu)",
        summary: "Per kernel: uncoalesced global loads/stores (sectors per request, bytes used), branch efficiency (active threads per instruction) and shared-memory wavefronts per request, each with a verdict and the fix, from ncu counters.",
        description: "Answers 'are my kernels' memory accesses coalesced, do their branches leave lanes idle, do \
shared-memory accesses conflict?' from Nsight Compute counters: global load/store sectors per request and the share of fetched bytes used, \
active threads per instruction and divergent branch targets, bank conflicts and wavefronts per shared request. Each \
kernel gets flagged/clean/insufficient_signal with the numbers, the fix, ncu's own rule estimate when the details page \
is given, and the kernel time at stake. Reads an existing report or CSV (`path`), or runs `command` under ncu with \
exactly the counters needed (needs --allow-exec and a GPU). Cache hit rates: aisp_profile_ncu_summary.",
        hints: Hints::RUNS_COMMAND,
        long_running: true,
        positional: &["path"],
        intents: &[
            "are my kernel memory accesses coalesced",
            "uncoalesced memory access in my kernels",
            "branch efficiency of my kernels",
            "find shared memory bank conflicts in my kernels",
            "sectors per request",
        ],
        example: r#"{"path": "profile.ncu-rep"}"#,
        leaves_out: true,
        ..OpSpec::new("analyze", "memory_patterns")
    };

    fn run(
        &self,
        ctx: &OpContext,
        input: MemoryPatternsInput,
    ) -> Result<MemoryPatternsOutput, OpError> {
        let limit = input.limit.unwrap_or(30).max(1);
        let example = "Pass \"path\": \"profile.ncu-rep\" (or its raw CSV page), or \"command\": [\"python3\", \"train.py\"] with --allow-exec.";
        let (sources, texts, run_id) = match (&input.path, &input.command) {
            (Some(_), Some(_)) => {
                return Err(OpError::invalid_input(
                    "give `path` or `command`, not both",
                    example,
                ));
            }
            (None, None) => {
                return Err(OpError::invalid_input(
                    "`path` or `command` is required",
                    example,
                ));
            }
            (Some(p), None) => {
                let mut refs = vec![p.as_str()];
                if let Some(d) = &input.details_path {
                    refs.push(d);
                }
                let (src, texts) = read_ncu_sources(ctx, &refs)?;
                (src, texts, None)
            }
            (None, Some(command)) => {
                let (src, texts, run_id) = capture_for_patterns(ctx, command, &input, example)?;
                (src, texts, Some(run_id))
            }
        };
        let raw = texts
            .iter()
            .find(|t| ncu::detect_page(t) == Some(ncu::PageKind::Raw))
            .ok_or_else(|| {
                OpError::invalid_input(
                    "no raw page among the inputs: the counters are read from `ncu --csv --page raw` (or a .ncu-rep)",
                    "Pass the raw page (`ncu --import r.ncu-rep --csv --page raw > raw.csv`) as `path` and the details page as `details_path`.",
                )
            })?;
        let details = texts
            .iter()
            .find(|t| ncu::detect_page(t) == Some(ncu::PageKind::Details))
            .map(String::as_str);
        let mut report = ncu::patterns::analyze(raw, details).map_err(ncu_error)?;
        let mut left_out = Vec::new();
        if !report.missing_metrics.is_empty() {
            left_out.push(format!(
                "{} counters were not collected ({}): the questions they answer are insufficient_signal. Capture \
                 with this tool's `command`, or ncu --metrics with them.",
                report.missing_metrics.len(),
                report.missing_metrics.join(",")
            ));
        }
        report.flagged_first();
        if report.kernels.len() > limit {
            left_out.push(format!(
                "{} more kernels (raise `limit` to see them)",
                report.kernels.len() - limit
            ));
            report.kernels.truncate(limit);
        }
        Ok(MemoryPatternsOutput {
            sources: sources.iter().map(|p| p.display().to_string()).collect(),
            report,
            run_id,
            left_out,
        })
    }
}

/// Run `command` under ncu with the counters the analysis reads: the pages
/// it imported, their files, and the run id.
fn capture_for_patterns(
    ctx: &OpContext,
    command: &[String],
    input: &MemoryPatternsInput,
    example: &str,
) -> Result<(Vec<PathBuf>, Vec<String>, String), OpError> {
    if !ctx.app().config.allow_exec {
        return Err(OpError::exec_not_allowed(
            "aisp_analyze_memory_patterns with `command` runs a command you supply, and command \
             execution is not allowed in this aisp.",
        ));
    }
    let cmd = check_command(command, input.cwd.as_deref(), input.env.as_ref())?;
    let opts = NcuOptions::memory_patterns(
        input.kernel_regex.clone(),
        input.launch_skip,
        input.launch_count.unwrap_or(10),
    );
    opts.validate()
        .map_err(|m| OpError::invalid_input(m, example))?;
    let ncu_tool = discover(ctx, Profiler::Ncu, &cmd.env)?;
    let mut s = start(ctx, CaptureKind::Ncu, &cmd, Some(&ncu_tool))?;
    let result =
        ncu_cmd::capture(&mut s, &cmd, &opts, &ncu_tool, 1).map_err(|e| capture_error(ctx, e));
    finish(ctx, &mut s, &result);
    result?;
    let mut texts = Vec::new();
    let mut sources = Vec::new();
    for page in ["raw", "details"] {
        let p = s.dir.join(format!("profile.{page}.csv"));
        if let Ok(t) = std::fs::read_to_string(&p) {
            texts.push(t);
            sources.push(p);
        }
    }
    Ok((sources, texts, s.rec.run_id.clone()))
}

// ---------------------------------------------------------------------------------------------
// aisp_profile_torch

pub struct ProfileTorch;

/// Arguments of `aisp_profile_torch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TorchInput {
    /// The command running a Python script: the interpreter or launcher, the script (first argument ending in .py) and its arguments, e.g. ["python3", "train.py"] or ["torchrun", "--nproc_per_node=2", "ddp.py"].
    pub command: Vec<String>,
    /// Working directory of the command; default the server's.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Environment variables added for the command.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Profiler schedule: steps skipped first (default 1).
    #[serde(default)]
    pub wait: Option<u32>,
    /// Profiler schedule: warm-up steps, recorded but discarded (default 1).
    #[serde(default)]
    pub warmup: Option<u32>,
    /// Profiler schedule: steps recorded (default 3).
    #[serde(default)]
    pub active: Option<u32>,
    /// `optimizer` (default): a step is an optimizer.step() call. `none`: no schedule, the whole run is recorded (for scripts without an optimizer).
    #[serde(default)]
    pub step_on: Option<StepOn>,
    /// Record operator input shapes (default true).
    #[serde(default)]
    pub record_shapes: Option<bool>,
    /// Record allocator events and memory use (default true).
    #[serde(default)]
    pub profile_memory: Option<bool>,
    /// Record Python stacks (default false: large traces).
    #[serde(default)]
    pub with_stack: Option<bool>,
    /// Estimate FLOPs of matrix operators (default true).
    #[serde(default)]
    pub with_flops: Option<bool>,
    /// Rows in each top list of the analysis (default 15).
    #[serde(default)]
    pub top: Option<usize>,
    /// Log torch.compile graph breaks and recompilations (TORCH_LOGS=graph_breaks,recompiles) for aisp_profile_compile.
    #[serde(default)]
    pub compile_logs: Option<bool>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TorchOutput {
    #[serde(flatten)]
    pub capture: CaptureInfo,
    /// The Kineto trace files written (one per rank under torchrun).
    pub traces: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis: Option<kineto::TraceAnalysis>,
}

impl Operation for ProfileTorch {
    type Input = TorchInput;
    type Output = TorchOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Capture a PyTorch profiler trace",
        summary: "Runs a Python script under torch.profiler (schedule, shapes, memory, stack, FLOPs), writes the Kineto trace and analyses it.",
        description: "Runs a Python script (plain, or under a launcher such as torchrun) under torch.profiler through a \
small wrapper shipped with aisp: the schedule (wait/warmup/active, default 1/1/3) advances on every optimizer.step(), \
so training scripts need no change; `step_on: none` records the whole run instead. Records CPU and CUDA activity, \
operator shapes, memory and FLOPs (stacks on request) and writes Kineto trace JSON (one per rank) into \
$AISP_HOME/runs/<run_id>/, then analyses it as aisp_profile_trace does: temporal breakdown, idle-time causes, top \
kernels and operators, launch statistics, per-step GPU time, overlap, findings. Needs --allow-exec, a GPU and PyTorch \
in the command's Python. Takes the script's run time plus profiler overhead; honours timeout_s and async: true.",
        hints: Hints::RUNS_COMMAND,
        needs_gpu: true,
        long_running: true,
        executes_commands: true,
        positional: &["command"],
        intents: &[
            "profile with torch.profiler",
            "run torch profiler on my script",
            "capture a kineto trace of my training",
            "profile python training with torch",
            "record pytorch operators",
        ],
        example: r#"{"command": ["python3", "train.py"], "wait": 1, "warmup": 1, "active": 3}"#,
        ..OpSpec::new("profile", "torch")
    };

    fn run(&self, ctx: &OpContext, input: TorchInput) -> Result<TorchOutput, OpError> {
        let mut cmd = check_command(&input.command, input.cwd.as_deref(), input.env.as_ref())?;
        if input.compile_logs == Some(true) && !cmd.env.iter().any(|(k, _)| k == "TORCH_LOGS") {
            // Dynamo writes these records to stderr, which the capture keeps as the `stderr` artifact.
            cmd.env
                .push(("TORCH_LOGS".into(), "graph_breaks,recompiles".into()));
        }
        let d = TorchOptions::default();
        let opts = TorchOptions {
            wait: input.wait.unwrap_or(d.wait),
            warmup: input.warmup.unwrap_or(d.warmup),
            active: input.active.unwrap_or(d.active),
            step_on: input.step_on.unwrap_or(d.step_on),
            record_shapes: input.record_shapes.unwrap_or(d.record_shapes),
            profile_memory: input.profile_memory.unwrap_or(d.profile_memory),
            with_stack: input.with_stack.unwrap_or(d.with_stack),
            with_flops: input.with_flops.unwrap_or(d.with_flops),
        };
        let bad = |m: String| {
            OpError::invalid_input(
                m,
                "Example: {\"command\": [\"python3\", \"train.py\", \"--epochs\", \"1\"], \"active\": 3}.",
            )
        };
        opts.validate().map_err(bad)?;
        // Check the command's shape before creating a run.
        torch_cmd::wrap_command(&cmd.argv, Path::new("w.py"), Path::new("."), &opts)
            .map_err(bad)?;
        let limits = Limits {
            top: input.top.unwrap_or(15).clamp(1, 200),
            steps: 50,
        };
        let mut s = start(ctx, CaptureKind::Torch, &cmd, None)?;
        let result = torch_cmd::capture(&mut s, &cmd, &opts, limits, &ctx.app().config.limits)
            .map_err(|e| capture_error(ctx, e))
            .map(|c| TorchOutput {
                capture: s.info(c.profiler_command, None, &c.outcome),
                traces: c.traces.iter().map(|p| p.display().to_string()).collect(),
                analysis: c.analysis,
            });
        finish(ctx, &mut s, &result);
        result
    }
}

// ---------------------------------------------------------------------------------------------
// aisp_profile_trace

pub struct ProfileTrace;

/// Arguments of `aisp_profile_trace`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceInput {
    /// Kineto/Chrome trace JSON files (.json or .json.xz), folders of them (one file per rank), or run ids of aisp_profile_torch captures.
    pub paths: Vec<String>,
    /// Rows in each top list (default 2 for one rank, 1 per rank for several).
    #[serde(default)]
    pub top: Option<usize>,
    /// Steps listed one by one (default 3).
    #[serde(default)]
    pub steps: Option<usize>,
    /// Findings listed, most severe first (default 3 for one rank, 2 for several).
    #[serde(default)]
    pub findings: Option<usize>,
    /// Also each rank's memory operations, synchronizing calls and memory peaks, and the per-rank rows of
    /// the cross-rank analysis: about 1.2× the characters.
    #[serde(default)]
    pub detail: Option<bool>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TraceOutput {
    /// The trace files read, in rank order of the analysis.
    pub files: Vec<String>,
    #[serde(flatten)]
    pub analysis: kineto::TraceAnalysis,
    /// What this default answer leaves out, and the argument that brings it back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// Several ranks: aisp_profile_ranks' answer and findings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks: Option<TraceRanks>,
}

/// The cross-rank view of Kineto traces.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TraceRanks {
    /// As aisp_profile_ranks' `set`.
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub set: aisp_profile::ranks::RankSet,
    pub findings: Vec<aisp_profile::rules::Finding>,
}

impl Operation for ProfileTrace {
    type Input = TraceInput;
    type Output = TraceOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Analyse a PyTorch profiler (Kineto) trace",
        summary: "HTA-style analysis of Kineto traces (one per rank): temporal and idle breakdown, top kernels and operators, launch statistics, overlap, per-step GPU time, findings.",
        description: "Reads PyTorch profiler traces (Chrome/Kineto JSON from torch.profiler's export_chrome_trace, plain \
or .xz; one file, a folder with one per rank, or the run id of an aisp_profile_torch capture) and answers in the spirit \
of Holistic Trace Analysis: per rank and GPU the temporal breakdown (compute, exposed communication, exposed memory, \
idle), idle time split into host wait, kernel wait and other wait, communication/compute overlap, top kernels and \
operators (self CPU time and the GPU time they launched), kernel launch statistics (short kernels, runtime and \
launch-delay outliers, kernels under 5 µs), per-step CPU time vs GPU time, memcpy kinds and bandwidth, synchronising \
calls, peak memory, a cross-rank comparison, and findings with severity from the share of time at stake (host-bound, \
short kernels, exposed NCCL, pageable copies, syncs in steps, rank imbalance). Times are exact integer ns read from \
the JSON text. Under a second for traces of tens of MB.",
        positional: &["paths"],
        intents: &[
            "analyze pytorch trace",
            "pytorch profiler trace",
            "kineto json",
            "holistic trace analysis",
            "idle time breakdown",
            "chrome trace from torch profiler",
            "compare ranks",
            "per rank",
        ],
        example: r#"{"paths": ["trace.json"]}"#,
        leaves_out: true,
        ..OpSpec::new("profile", "trace")
    };

    fn run(&self, ctx: &OpContext, input: TraceInput) -> Result<TraceOutput, OpError> {
        if input.paths.is_empty() {
            return Err(OpError::invalid_input(
                "`paths` is empty",
                "Pass at least one trace: {\"paths\": [\"trace.json\"]}.",
            ));
        }
        let mut files: Vec<PathBuf> = Vec::new();
        for p in &input.paths {
            files.extend(resolve_traces(ctx, p)?);
        }
        if files.is_empty() {
            return Err(OpError::not_found(
                "no trace files (*.json, *.json.xz) in the folders given",
                "Pass the trace files themselves.",
            ));
        }
        let mut traces = load_traces(ctx, &files)?;
        // Default lists share one budget over the ranks, so 8 ranks do not answer 8x as much.
        // With several ranks the cross-rank answer comes too, so each rank lists less.
        let default_top = if traces.len() > 1 { 1 } else { 2 };
        let limits = Limits {
            top: input.top.unwrap_or(default_top).clamp(1, 500),
            steps: input.steps.unwrap_or(3).min(10_000),
        };
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        // `files` gives each path in full once; everything below names a trace by its file
        // name, so the answer's size does not grow with how deep the traces sit.
        for (trace, short) in traces.iter_mut().zip(short_names(&files)) {
            trace.path = short;
        }
        let mut left_out = Vec::new();
        let mut ranks = cross_rank(&traces, &mut left_out)?;
        let mut analysis = kineto::analyze(&traces, limits);
        if input.top.is_none() {
            left_out.push(format!(
                "kernels and operators past the top {default_top} of each rank: pass \"top\": 15 (or more)"
            ));
        }
        let steps_total = analysis
            .traces
            .iter()
            .map(|t| t.steps.count)
            .max()
            .unwrap_or(0);
        if input.steps.is_none() && steps_total > limits.steps as u64 {
            left_out.push(format!(
                "steps past the first {} of each rank: pass \"steps\": {steps_total}",
                limits.steps
            ));
        }
        let findings = input
            .findings
            .unwrap_or(if traces.len() > 1 { 2 } else { 3 })
            .max(1);
        if analysis.findings.len() > findings {
            left_out.push(format!(
                "{} less severe findings: pass \"findings\": {}",
                analysis.findings.len() - findings,
                analysis.findings.len()
            ));
            analysis.findings.truncate(findings);
        }
        if !input.detail.unwrap_or(false) && leave_out_detail(&mut analysis, ranks.as_mut()) {
            left_out.push(
                "each rank's memory operations, synchronizing calls and memory peaks; the cross-rank per-rank rows, imbalance and collectives: pass \"detail\": true"
                    .to_string(),
            );
        }
        Ok(TraceOutput {
            files: names,
            analysis,
            left_out,
            ranks,
        })
    }
}

/// Each file as a trace; a file that is not one is the call's error.
fn load_traces(ctx: &OpContext, files: &[PathBuf]) -> Result<Vec<kineto::Trace>, OpError> {
    let mut traces = Vec::new();
    for f in files {
        ctx.check_cancelled()?;
        traces.push(kineto::load(f, &ctx.app().config.limits).map_err(|e| match e {
            kineto::TraceError::Input(e) => OpError::from(e),
            other => OpError::invalid_input(
                other.to_string(),
                "Pass the JSON that torch.profiler's export_chrome_trace (or tensorboard_trace_handler) wrote.",
            ),
        })?);
    }
    Ok(traces)
}

/// With several ranks, aisp_profile_ranks' view of the set and its findings,
/// less what the traces already list or only `aisp_profile_ranks` needs.
fn cross_rank(
    traces: &[kineto::Trace],
    left_out: &mut Vec<String>,
) -> Result<Option<TraceRanks>, OpError> {
    let mut digests: Vec<_> = traces
        .iter()
        .flat_map(aisp_profile::ranks::digest_trace)
        .collect();
    if digests.len() < 2 {
        return Ok(None);
    }
    // The files are listed once, at the top of the answer.
    let mut set = aisp_profile::ranks::merge(&mut digests, Vec::new(), Vec::new())?;
    let findings = aisp_profile::ranks::findings(&set.cross_rank);
    // The rank × step heat map repeats the steps each trace lists (traces[].steps).
    if set.cross_rank.heat_map.take().is_some() {
        left_out
            .push("the rank × step heat map: each rank's steps are in traces[].steps".to_string());
    }
    if !set.identities.is_empty() || !set.alignment.domains.is_empty() {
        set.identities.clear();
        set.alignment.domains.clear();
        left_out.push(
            "the rank identities and each trace's clock domain: aisp_profile_ranks with these paths and \"detail\": true"
                .to_string(),
        );
    }
    Ok(Some(TraceRanks { set, findings }))
}

/// Drop each rank's memory operations, synchronizing calls and memory peaks,
/// and the cross-rank per-rank rows; whether there was any.
fn leave_out_detail(analysis: &mut kineto::TraceAnalysis, ranks: Option<&mut TraceRanks>) -> bool {
    let mut cut = false;
    for t in &mut analysis.traces {
        cut |= !t.memory_ops.is_empty() || !t.sync_calls.is_empty() || !t.memory_peaks.is_empty();
        t.memory_ops.clear();
        t.sync_calls.clear();
        t.memory_peaks.clear();
    }
    if let Some(r) = ranks {
        let c = &mut r.set.cross_rank;
        cut |= !c.ranks.is_empty() || !c.imbalance.is_empty() || !c.collectives.is_empty();
        c.ranks.clear();
        c.imbalance.clear();
        c.collectives.clear();
    }
    cut
}

/// Each file's name without its folder, or its full path where two files share a name
/// (`rank0/trace.json`, `rank1/trace.json`).
fn short_names(files: &[PathBuf]) -> Vec<PathBuf> {
    let base = |f: &PathBuf| f.file_name().map(PathBuf::from);
    files
        .iter()
        .map(|f| match base(f) {
            Some(name)
                if files
                    .iter()
                    .filter(|g| base(g).as_ref() == Some(&name))
                    .count()
                    == 1 =>
            {
                name
            }
            _ => f.clone(),
        })
        .collect()
}

fn resolve_traces(ctx: &OpContext, reference: &str) -> Result<Vec<PathBuf>, OpError> {
    let as_path = PathBuf::from(reference);
    if !input_file::something_at(&as_path) && record::looks_like_run_id(reference) {
        let store = ctx.app().store()?;
        if let Some(rec) = record::get(store, reference)? {
            if rec.kind != CaptureKind::Torch {
                return Err(OpError::invalid_input(
                    format!(
                        "run {reference} is an {} capture, not a PyTorch profiler one",
                        rec.kind.as_str()
                    ),
                    "Use aisp_profile_info/aisp_profile_rules for nsys runs and aisp_profile_ncu_summary for ncu runs.",
                ));
            }
            return kineto::expand_paths(Path::new(&rec.run_dir)).map_err(|e| {
                OpError::not_found(
                    format!("cannot list {}: {e}", rec.run_dir),
                    "The run folder is gone.",
                )
            });
        }
    }
    if !input_file::something_at(&as_path) {
        return Err(OpError::not_found(
            format!("{reference} does not exist"),
            "Pass a trace file, a folder of per-rank traces, or a run id from aisp_profile_list.",
        ));
    }
    kineto::expand_paths(&as_path).map_err(|e| {
        OpError::invalid_input(format!("cannot list {reference}: {e}"), "Check the folder.")
    })
}

// ---------------------------------------------------------------------------------------------
// aisp_profile_list

pub struct ProfileList;

/// Arguments of `aisp_profile_list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// Only captures of this profiler.
    #[serde(default)]
    pub kind: Option<CaptureKind>,
    /// Only captures in this state.
    #[serde(default)]
    pub state: Option<CaptureState>,
    /// At most this many, newest first (default 20).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListOutput {
    pub captures: Vec<CaptureRecord>,
    /// Where the run folders are.
    pub runs_dir: String,
}

impl Operation for ProfileList {
    type Input = ListInput;
    type Output = ListOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "List profile captures",
        summary: "Captures recorded by aisp_profile_nsys/ncu/torch: run ids, commands, times, state, artifacts and top findings.",
        description: "Lists the captures aisp made (newest first), optionally of one profiler (nsys, ncu, torch) or \
state (running, succeeded, failed, cancelled, timed_out): run id, the command, working directory, profiler and \
version, exit code, start and end times, duration, artifact paths, the top findings, and the error of failed ones. \
Use it to find the run ids to pass to aisp_profile_compare (before/after a change), aisp_profile_trace or \
aisp_profile_ncu_summary. Milliseconds.",
        intents: &[
            "list captures",
            "previous profiles",
            "profiles captured",
            "which runs did i profile",
            "profile history",
            "run ids",
        ],
        example: r#"{"kind": "nsys", "limit": 10}"#,
        ..OpSpec::new("profile", "list")
    };

    fn run(&self, ctx: &OpContext, input: ListInput) -> Result<ListOutput, OpError> {
        let store = ctx.app().store()?;
        if let Err(e) = record::recover_orphans(store) {
            tracing::warn!(error = %e, "could not check for abandoned captures");
        }
        let limit = input.limit.unwrap_or(20).clamp(1, 1000);
        Ok(ListOutput {
            captures: record::list(store, input.kind, input.state, limit)?,
            runs_dir: ctx.app().config.runs_dir().display().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_are_named_by_file_name_unless_two_share_it() {
        let files: Vec<PathBuf> = [
            "/a/rank0/trace.json",
            "/a/rank1/trace.json",
            "/b/r2.json.xz",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(
            short_names(&files),
            vec![
                PathBuf::from("/a/rank0/trace.json"),
                PathBuf::from("/a/rank1/trace.json"),
                PathBuf::from("r2.json.xz"),
            ]
        );
    }
}
