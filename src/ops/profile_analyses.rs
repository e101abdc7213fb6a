//! Profile analyses over existing artifacts: two ncu results compared
//! (`aisp_profile_ncu_compare`), flame graphs (`aisp_profile_flame`),
//! torch.compile behaviour (`aisp_profile_compile`) and DataLoader waits
//! (`aisp_analyze_dataloader`). The work lives in [`aisp_profile::ncu::compare`],
//! [`aisp_profile::flame`], [`aisp_profile::torch_compile`] and [`aisp_profile::dataloader`].

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::profile_capture::read_ncu_sources;
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{OpSpec, Operation};
use aisp_capture::record;
use aisp_profile::input_file::{self, InputKind};
use aisp_profile::{dataloader, flame, kineto, ncu, torch_compile};

fn resolve(ctx: &OpContext, reference: &str, what: &str) -> Result<PathBuf, OpError> {
    let store = ctx.app().store()?;
    record::resolve_profile_ref(store, reference).map_err(|e| {
        OpError::not_found(
            e.to_string(),
            format!("Pass an existing {what} path, or a run id from aisp_profile_list."),
        )
    })
}

fn load_trace(ctx: &OpContext, path: &Path) -> Result<kineto::Trace, OpError> {
    kineto::load(path, &ctx.app().config.limits).map_err(|e| {
        OpError::invalid_input(
            e.to_string(),
            "Pass a PyTorch profiler trace (the JSON from prof.export_chrome_trace, plain or .xz).",
        )
    })
}

// ---------------------------------------------------------------------------------------------
// aisp_profile_ncu_compare

pub struct NcuCompareOp;

/// Arguments of `aisp_profile_ncu_compare`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NcuCompareInput {
    /// The baseline: an ncu report (.ncu-rep), a CSV page (raw or details, plain or .xz) or an ncu run id.
    pub before: String,
    /// The changed version, same forms.
    pub after: String,
    /// The other CSV page of `before`'s report (details when `before` is the raw page).
    #[serde(default)]
    pub before_details: Option<String>,
    /// The other CSV page of `after`'s report.
    #[serde(default)]
    pub after_details: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NcuCompareOutput {
    pub before_sources: Vec<String>,
    pub after_sources: Vec<String>,
    #[serde(flatten)]
    pub comparison: ncu::compare::NcuComparison,
}

fn ncu_side(
    ctx: &OpContext,
    main: &str,
    other: Option<&str>,
) -> Result<(Vec<String>, ncu::NcuSummary), OpError> {
    let mut refs = vec![main];
    refs.extend(other);
    let (src, texts) = read_ncu_sources(ctx, &refs)?;
    let pages: Vec<&str> = texts.iter().map(String::as_str).collect();
    let s = ncu::summarize(&pages, usize::MAX).map_err(|e| {
        OpError::invalid_input(
            format!("{main}: {e}"),
            "Pass a report (.ncu-rep) or the CSV of `ncu --csv --page raw` or `--page details`.",
        )
    })?;
    Ok((src.iter().map(|p| p.display().to_string()).collect(), s))
}

impl Operation for NcuCompareOp {
    type Input = NcuCompareInput;
    type Output = NcuCompareOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Compare two Nsight Compute results",
        summary: "Per-kernel deltas between two ncu reports or runs of the same kernels (duration, SOL %, occupancy, DRAM traffic, top stall) with a faster/slower/unchanged verdict.",
        description: "Answers 'did my kernel change help, and why?' from two Nsight Compute results of the same \
kernels (before/after: .ncu-rep, CSV pages or ncu run ids): kernels matched by name, the mean per launch of \
duration, SM and memory throughput % of peak, DRAM throughput, achieved occupancy, DRAM bandwidth and MB moved, hit \
rates and registers on each side, the deltas, the top warp stall before → after (full set), and a verdict per \
kernel and overall (faster/slower beyond a ±5 % noise band, else unchanged; not_comparable without durations). Kernels \
on one side only are listed. For Nsight Systems exports use aisp_profile_compare.",
        positional: &["before", "after"],
        intents: &[
            "compare ncu reports",
            "ncu before and after",
            "did my kernel change help",
            "compare nsight compute kernel metrics",
            "ncu diff",
        ],
        example: r#"{"before": "baseline.ncu-rep", "after": "optimized.ncu-rep"}"#,
        ..OpSpec::new("profile", "ncu_compare")
    };

    fn run(&self, ctx: &OpContext, input: NcuCompareInput) -> Result<NcuCompareOutput, OpError> {
        let (bs, b) = ncu_side(ctx, &input.before, input.before_details.as_deref())?;
        let (as_, a) = ncu_side(ctx, &input.after, input.after_details.as_deref())?;
        Ok(NcuCompareOutput {
            before_sources: bs,
            after_sources: as_,
            comparison: ncu::compare::compare(&b, &a),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// aisp_profile_flame

pub struct FlameOp;

/// Arguments of `aisp_profile_flame`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlameInput {
    /// A PyTorch profiler trace recorded with_stack=True (.json or .json.xz), an Nsight Systems export with CPU samples (.sqlite), or a torch run id.
    pub path: String,
    /// Folder for the .folded and .svg files (default: aisp's cache folder). Over MCP/HTTP: under the output roots.
    #[serde(default)]
    pub output_dir: Option<String>,
    /// Replace the .folded and .svg files if they exist (default false: refuse).
    #[serde(default)]
    pub overwrite: Option<bool>,
    /// Frames in the self-time list (default 15).
    #[serde(default)]
    #[schemars(range(min = 1, max = 200))]
    pub top: Option<usize>,
    /// Kineto: include PyTorch operators and record_function ranges as frames (default true).
    #[serde(default)]
    pub operators: Option<bool>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FlameOutput {
    pub source: String,
    /// `ns` (Kineto wall time on each thread) or `samples` (nsys CPU samples).
    pub unit: flame::CountUnit,
    /// Σ of all stack counts.
    pub total: u64,
    /// Distinct stacks.
    pub stacks: u64,
    /// The frames with the most self time, largest first.
    pub top_self: Vec<flame::FrameTime>,
    /// The heaviest stacks (folded, root first) with their counts.
    pub heaviest_stacks: Vec<(String, u64)>,
    /// Folded stacks file (flamegraph.pl / speedscope / inferno input).
    pub folded_path: String,
    /// Interactive SVG flame graph (open in a browser).
    pub svg_path: String,
    /// What limits the stacks (nsys: samples whose backtrace stopped at the leaf).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Operation for FlameOp {
    type Input = FlameInput;
    type Output = FlameOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Flame graph of CPU stacks",
        summary: "Aggregated call stacks as folded text and an SVG flame graph, plus the frames with the most self time, from a PyTorch trace recorded with stacks or an Nsight Systems export with CPU samples.",
        description: "Answers 'where does the host-side (Python) time go?': aggregates the call stacks of a PyTorch \
profiler trace recorded with_stack=True (Python calls, operators and record_function ranges nested by time on each \
thread; counts are ns of wall time) or of an Nsight Systems export's CPU samples (counts are samples; unresolved \
addresses grouped by module, nsys's own threads left out, backtraces cut at the leaf counted) into folded \
stacks and an interactive SVG flame graph (written to files), and lists the frames with the most self time and the \
heaviest stacks. Capture stacks with aisp_profile_torch with_stack: true.",
        hints: crate::registry::Hints {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        positional: &["path"],
        intents: &[
            "flame graph",
            "where is python time spent",
            "self time by function",
            "cpu stacks",
            "folded stacks",
            "hot python functions",
        ],
        example: r#"{"path": "trace.json", "top": 10}"#,
        ..OpSpec::new("profile", "flame")
    };

    fn run(&self, ctx: &OpContext, input: FlameInput) -> Result<FlameOutput, OpError> {
        let path = resolve(ctx, &input.path, "trace or export")?;
        let overwrite = input.overwrite.unwrap_or(false);
        let stem = path
            .file_name()
            .and_then(|n| n.to_str())
            .map(|n| {
                n.trim_end_matches(".xz")
                    .trim_end_matches(".json")
                    .trim_end_matches(".sqlite")
            })
            .unwrap_or("flame")
            .to_string();
        let folded_name = std::ffi::OsString::from(format!("{stem}.folded"));
        let svg_name = std::ffi::OsString::from(format!("{stem}.svg"));
        // Where the files go, checked before the work: a refused folder or an
        // existing file costs nothing, and nothing is half written.
        let dir = match &input.output_dir {
            Some(d) => crate::outputs::folder(ctx, "output_dir", d)?,
            None => crate::outputs::own_folder(&ctx.app().config.cache_dir().join(format!(
                "flame-{}",
                record::new_run_id(record::CaptureKind::Torch)
            )))?,
        };
        for name in [&folded_name, &svg_name] {
            dir.check_free(name, overwrite)
                .map_err(|e| crate::outputs::write_error("output_dir", e))?;
        }
        let is_sqlite = path.extension().is_some_and(|e| e == "sqlite");
        let (stacks, unit) = if is_sqlite {
            input_file::check_regular(&path, InputKind::NsightExport, &ctx.app().config.limits)?;
            let conn = flame::open_export(&path).map_err(flame_error)?;
            (
                flame::from_nsys(&conn).map_err(flame_error)?,
                flame::CountUnit::Samples,
            )
        } else {
            let trace = load_trace(ctx, &path)?;
            let frames = flame::KinetoFrames {
                operators: input.operators.unwrap_or(true),
            };
            (
                flame::from_kineto(&trace, frames).map_err(flame_error)?,
                flame::CountUnit::Ns,
            )
        };
        let title = format!(
            "{stem} ({})",
            if is_sqlite {
                "CPU samples"
            } else {
                "wall time, ns"
            }
        );
        let svg = flame::svg(&stacks, &title, unit).map_err(flame_error)?;
        let write = |name: &std::ffi::OsStr, bytes: &[u8]| {
            dir.write(name, bytes, overwrite)
                .map_err(|e| crate::outputs::write_error("output_dir", e))
        };
        write(&folded_name, stacks.folded_text().as_bytes())?;
        write(&svg_name, &svg)?;
        let folded_path = dir.path().join(&folded_name);
        let svg_path = dir.path().join(&svg_name);
        let mut heaviest: Vec<(String, u64)> =
            stacks.folded.iter().map(|(k, v)| (k.clone(), *v)).collect();
        heaviest.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        heaviest.truncate(10);
        let mut notes = Vec::new();
        if stacks.leaf_only > 0 {
            notes.push(format!(
                "{} of {} samples ({:.1} %) have only their leaf frame: the backtrace stopped there (code without \
                 frame pointers or unwind tables, e.g. a stripped interpreter), so their callers are unknown and \
                 they hang directly from the thread; their self counts are exact, totals of callers are low by at \
                 most that much",
                stacks.leaf_only,
                stacks.total(),
                100.0 * stacks.leaf_only as f64 / stacks.total().max(1) as f64
            ));
        }
        if stacks.profiler_samples > 0 {
            notes.push(format!(
                "{} samples of Nsight Systems' own threads in the process ([NSys], NSys PySampling) are left out",
                stacks.profiler_samples
            ));
        }
        Ok(FlameOutput {
            notes,
            source: path.display().to_string(),
            unit,
            total: stacks.total(),
            stacks: stacks.folded.len() as u64,
            top_self: flame::top_self(&stacks, input.top.unwrap_or(15)),
            heaviest_stacks: heaviest,
            folded_path: folded_path.display().to_string(),
            svg_path: svg_path.display().to_string(),
        })
    }
}

fn flame_error(e: flame::FlameError) -> OpError {
    match e {
        flame::FlameError::NoKinetoStacks => OpError::invalid_input(
            e.to_string(),
            "Record the trace with stacks: aisp_profile_torch with \"with_stack\": true, or \
             torch.profiler.profile(..., with_stack=True).",
        ),
        flame::FlameError::NoSamples => OpError::invalid_input(
            e.to_string(),
            "Capture with CPU sampling (nsys profile -s cpu --backtrace=dwarf), or pass a PyTorch trace recorded \
             with_stack=True.",
        ),
        other => OpError::invalid_input(other.to_string(), "Re-export the file if it is damaged."),
    }
}

// ---------------------------------------------------------------------------------------------
// aisp_profile_compile

pub struct CompileOp;

/// Arguments of `aisp_profile_compile`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompileInput {
    /// The run's stderr with TORCH_LOGS=graph_breaks,recompiles (plain or .xz).
    #[serde(default)]
    pub log: Option<String>,
    /// A PyTorch profiler trace recorded while it compiled (.json or .json.xz).
    #[serde(default)]
    pub trace: Option<String>,
    /// Instead: the run id of an aisp_profile_torch capture made with compile_logs: true.
    #[serde(default)]
    pub run_id: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct BreakWithFix {
    #[serde(flatten)]
    pub graph_break: torch_compile::GraphBreak,
    pub fix: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RecompileWithFix {
    #[serde(flatten)]
    pub recompile: torch_compile::Recompile,
    pub fix: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CompileOutput {
    pub sources: Vec<String>,
    /// Distinct graph breaks (place and reason), most frequent first.
    pub graph_breaks: Vec<BreakWithFix>,
    pub recompiles: Vec<RecompileWithFix>,
    /// Compile vs run time from the trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<torch_compile::TraceCompile>,
    /// The answer in a few sentences, each backed by the numbers above.
    pub findings: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

impl Operation for CompileOp {
    type Input = CompileInput;
    type Output = CompileOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "torch.compile graph breaks, recompiles and compile time",
        summary: "Graph breaks and recompilations with their reasons and fixes from TORCH_LOGS output, and compile time vs run time from a trace of a torch.compile run.",
        description: "Answers 'why is torch.compile not helping?': reads the log a run printed with \
TORCH_LOGS=graph_breaks,recompiles (each distinct graph break with its place, the construct Dynamo could not trace, \
PyTorch's hint and a fix; each recompilation with the guard failures that triggered it, their kind — shape, value, \
dtype — and a fix) and a PyTorch profiler trace recorded while it compiled (compile time as the union of Dynamo's \
timed phases, run time outside it, compiled frames and graphs, the steady step time and how many steady steps the \
compile time costs). Capture both at once with aisp_profile_torch compile_logs: true and pass its run_id.",
        positional: &["log"],
        intents: &[
            "torch.compile graph breaks",
            "why does torch compile recompile",
            "compile time vs run time",
            "dynamo graph break reason",
            "torch compile slow",
        ],
        example: r#"{"log": "compile.log", "trace": "compile.kineto.json"}"#,
        leaves_out: true,
        ..OpSpec::new("profile", "compile")
    };

    fn run(&self, ctx: &OpContext, input: CompileInput) -> Result<CompileOutput, OpError> {
        let (mut log, mut trace) = (input.log.clone(), input.trace.clone());
        if let Some(id) = &input.run_id {
            let store = ctx.app().store()?;
            let rec = record::get(store, id)?.ok_or_else(|| {
                OpError::not_found(
                    format!("no capture with run id {id}"),
                    "List captures with aisp_profile_list.",
                )
            })?;
            log = log.or_else(|| rec.artifacts.get("stderr").cloned());
            trace = trace.or_else(|| rec.artifacts.get("trace").cloned());
        }
        if log.is_none() && trace.is_none() {
            return Err(OpError::invalid_input(
                "`log`, `trace` or `run_id` is required",
                "Example: {\"log\": \"compile.log\", \"trace\": \"trace.json\"}; capture them with aisp_profile_torch \
                 compile_logs: true.",
            ));
        }
        let mut sources = Vec::new();
        let mut left_out = Vec::new();
        let logs = match &log {
            Some(l) => {
                let p = resolve(ctx, l, "log")?;
                let text = input_file::read_text_capped_xz(
                    &p,
                    InputKind::NcuCsv,
                    &ctx.app().config.limits,
                )?;
                sources.push(p.display().to_string());
                let a = torch_compile::parse_logs(&text);
                if a.graph_breaks.is_empty()
                    && a.recompiles.is_empty()
                    && !text.contains("[__graph_breaks]")
                    && !text.contains("[__recompiles]")
                {
                    left_out.push(
                        "the log has no graph_breaks/recompiles records: run with TORCH_LOGS=graph_breaks,recompiles \
                         (no break or recompile may also mean none happened)"
                            .into(),
                    );
                }
                a
            }
            None => {
                left_out.push(
                    "no log: graph break and recompile reasons need TORCH_LOGS output".into(),
                );
                torch_compile::LogAnalysis::default()
            }
        };
        let timing = match &trace {
            Some(t) => {
                let p = resolve(ctx, t, "trace")?;
                let tr = load_trace(ctx, &p)?;
                sources.push(p.display().to_string());
                let tc = torch_compile::analyze_trace(&tr);
                if tc.is_none() {
                    left_out.push(
                        "the trace has no compile events or compiled regions: it was not recorded while torch.compile \
                         ran (start the profiler before the first call)"
                            .into(),
                    );
                }
                tc
            }
            None => None,
        };
        let mut findings = Vec::new();
        for b in &logs.graph_breaks {
            findings.push(format!(
                "Graph break at {} ({}), hit {} times: {}",
                b.location,
                b.code.as_deref().unwrap_or("source not logged"),
                b.count,
                b.reason
            ));
        }
        for r in &logs.recompiles {
            findings.push(format!(
                "Recompilation {} of {} ({} guard): {}",
                r.compile_id,
                r.function,
                r.cause,
                r.reasons
                    .first()
                    .map(String::as_str)
                    .unwrap_or("reason not logged")
            ));
        }
        if let Some(t) = &timing {
            findings.push(format!(
                "Compiling took {:.2} s, {:.1} % of the profiled steps ({:.2} s running); {} frames compiled into {} \
                 graphs, {} of them recompilations{}",
                t.compile_ns as f64 / 1e9,
                t.compile_share_pct,
                t.run_ns as f64 / 1e9,
                t.frames,
                t.graphs,
                t.recompiled_graphs,
                t.compile_in_steady_steps
                    .map(|n| format!("; the compile time equals {n:.0} steady steps"))
                    .unwrap_or_default()
            ));
        }
        let mut timing = timing;
        if let Some(t) = &mut timing
            && t.steps.len() > 30
        {
            left_out.push(format!(
                "{} more steps in `timing.steps`",
                t.steps.len() - 30
            ));
            t.steps.truncate(30);
        }
        Ok(CompileOutput {
            sources,
            graph_breaks: logs
                .graph_breaks
                .into_iter()
                .map(|b| BreakWithFix {
                    fix: torch_compile::break_fix(&b),
                    graph_break: b,
                })
                .collect(),
            recompiles: logs
                .recompiles
                .into_iter()
                .map(|r| RecompileWithFix {
                    fix: torch_compile::recompile_fix(&r).into(),
                    recompile: r,
                })
                .collect(),
            timing,
            findings,
            left_out,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// aisp_analyze_dataloader

pub struct DataloaderOp;

/// Arguments of `aisp_analyze_dataloader`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataloaderInput {
    /// A PyTorch profiler trace (.json or .json.xz) or an Nsight Systems export (.sqlite, .nsys-rep) of the training loop, or a run id.
    pub path: String,
    /// Steps listed one by one (default 20).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Nsight Systems: where the waits come from: `auto` (DataLoader NVTX ranges when present, else OS runtime) or `osrt`.
    #[serde(default)]
    pub wait_source: Option<WaitSource>,
}

/// Where an Nsight Systems export's waits are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitSource {
    Auto,
    Osrt,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DataloaderOutput {
    pub source: String,
    #[serde(flatten)]
    pub analysis: dataloader::LoaderAnalysis,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

impl Operation for DataloaderOp {
    type Input = DataloaderInput;
    type Output = DataloaderOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "DataLoader bottleneck analysis",
        summary: "Time the training loop loses waiting on its DataLoader, whether the loader workers keep up (prefetch, worker utilisation) and the fix, from a PyTorch profiler trace or an Nsight Systems export.",
        description: "Answers 'is my training input-bound?': from a PyTorch profiler trace or an Nsight Systems export \
of the training loop, the wait for data per step (mean, max, share of the loop's time; nsys: DataLoader NVTX ranges \
under emit_nvtx, else the loop thread's OS runtime queue waits), the iterator (worker processes or the main process), \
how often a batch was ready, the workers' utilisation (nsys: measured from context switches of the pt_data_worker \
processes and the pin-memory thread; Kineto: inferred), whether batches arrive from pinned memory, a loader_bound \
verdict (waits over 10 % of the time) with its basis, how much faster loading must get, and the fix.",
        positional: &["path"],
        intents: &[
            "dataloader bottleneck",
            "input pipeline slow",
            "waiting on data",
            "num_workers",
            "is data loading the bottleneck",
        ],
        example: r#"{"path": "trace.json"}"#,
        leaves_out: true,
        ..OpSpec::new("analyze", "dataloader")
    };

    fn run(&self, ctx: &OpContext, input: DataloaderInput) -> Result<DataloaderOutput, OpError> {
        let path = resolve(ctx, &input.path, "trace or export")?;
        let is_nsys = path
            .extension()
            .is_some_and(|e| e == "sqlite" || e == "nsys-rep");
        let mut analysis = if is_nsys {
            let p = super::profile::open_profile(ctx, &path.display().to_string())?;
            let opts = dataloader::nsys::NsysOptions {
                nvtx_ranges: input.wait_source != Some(WaitSource::Osrt),
            };
            dataloader::nsys::analyze(p.conn(), opts).map_err(|e| {
                let hint = match e {
                    dataloader::LoaderError::NoLoader => {
                        "Capture the training loop with nsys profile -t cuda,nvtx,osrt (DataLoader workers show as \
                         pt_data_worker threads); with num_workers=0 run the loop under \
                         torch.autograd.profiler.emit_nvtx() so that each next() is an NVTX range."
                    }
                    dataloader::LoaderError::NoSteps => {
                        "Mark each training step with an NVTX range named step_N (torch.cuda.nvtx.range_push), or \
                         run under torch.autograd.profiler.emit_nvtx() so that each next() is a range."
                    }
                    dataloader::LoaderError::NoWaitSignal => {
                        "Capture with -t osrt (OS runtime), or run under torch.autograd.profiler.emit_nvtx()."
                    }
                    _ => "Re-export the file if it is damaged.",
                };
                OpError::invalid_input(e.to_string(), hint)
            })?
        } else {
            let trace = load_trace(ctx, &path)?;
            dataloader::analyze_kineto(&trace).map_err(|e| {
                OpError::invalid_input(
                    e.to_string(),
                    "Profile the training loop itself (iterating the DataLoader inside the profiler, with prof.step() \
                     per step), e.g. aisp_profile_torch on the training script.",
                )
            })?
        };
        let limit = input.limit.unwrap_or(20).max(1);
        let mut left_out = Vec::new();
        if analysis.per_step.len() > limit {
            left_out.push(format!(
                "{} more steps in `per_step` (raise `limit`)",
                analysis.per_step.len() - limit
            ));
            analysis.per_step.truncate(limit);
        }
        Ok(DataloaderOutput {
            source: path.display().to_string(),
            analysis,
            left_out,
        })
    }
}
