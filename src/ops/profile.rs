//! Operations of the `profile` domain: Nsight Systems exports read exactly.
//!
//! Each operation opens the profile read-only through [`aisp_profile`],
//! checks the scope (device, process, window), calls one analysis and wraps
//! the result with the export's version and the scope it answered for. The
//! work and its documentation live in `aisp_profile`.
//!
//! The capture operations (nsys, ncu, torch.profiler, Kineto trace analysis,
//! capture list) live in [`super::profile_capture`].

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::profile_capture as capture;
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, OpSpec, Operation};
use aisp_profile::{self as profile, ExportVersion, Profile, ProfileError, ResolvedScope, Scope};

pub const OPERATIONS: &[&dyn DynOperation] = &[
    &Info,
    &Summary,
    &Kernels,
    &Utilization,
    &Gaps,
    &Memory,
    &Nvtx,
    &Iterations,
    &Nccl,
    &Overlap,
    &Search,
    &Timeline,
    &Events,
    &Rules,
    &LedgerOp,
    &Compare,
    &Export,
    &super::profile_ranks::ProfileRanks,
    &capture::ProfileNsys,
    &capture::ProfileNcu,
    &capture::NcuSummaryOp,
    &super::profile_analyses::NcuCompareOp,
    &super::profile_analyses::FlameOp,
    &super::profile_analyses::CompileOp,
    &capture::ProfileTorch,
    &capture::ProfileTrace,
    &capture::ProfileList,
];

impl From<ProfileError> for OpError {
    fn from(e: ProfileError) -> OpError {
        let msg = e.to_string();
        match e {
            ProfileError::NotFound { .. } => OpError::not_found(
                msg,
                "Check the path (relative paths are resolved from the server's working directory). \
                 Profiles are .sqlite files from `nsys export --type sqlite` or .nsys-rep reports.",
            ),
            ProfileError::Invalid { .. } | ProfileError::Read { .. } => OpError::invalid_input(
                msg,
                "Pass an Nsight Systems SQLite export. Re-export the report if the file is damaged: \
                 `nsys export --type sqlite --force-overwrite true --output run.sqlite run.nsys-rep`.",
            ),
            ProfileError::Io { .. } => OpError::invalid_input(
                msg,
                "Check that the file is readable and, for .nsys-rep files, that $AISP_HOME/cache is writable.",
            ),
            ProfileError::NsysNotFound { searched, .. } => OpError::not_found(
                msg,
                format!(
                    "Install Nsight Systems (https://developer.nvidia.com/nsight-systems, or the CUDA toolkit's \
                     nsight-systems package) so that `nsys` is on PATH, or export on a machine that has it: \
                     `nsys export --type sqlite --output run.sqlite run.nsys-rep`, then pass run.sqlite. \
                     Searched: {}",
                    searched.join(", ")
                ),
            ),
            ProfileError::ExportTimeout { .. } => OpError::timeout(
                msg,
                "A large report can take minutes to export: raise `limits.nsys_export_timeout_s` in the config \
                 file (AISP_NSYS_EXPORT_TIMEOUT_S), or export it yourself (`nsys export --type sqlite --output \
                 run.sqlite run.nsys-rep`) and pass run.sqlite.",
            ),
            ProfileError::ExportFailed { .. } => OpError::invalid_input(
                msg,
                "The report may be damaged or from a newer Nsight Systems than the local `nsys`; export it \
                 where it was captured and pass the .sqlite.",
            ),
            ProfileError::BadArgument(_) => OpError::invalid_input(
                msg,
                "aisp_profile_info lists the devices, processes and time range of the profile; \
                 aisp_profile_nvtx lists range names.",
            ),
            ProfileError::BadSet(_) => OpError::invalid_input(
                msg,
                "Name a folder of per-rank exports (.sqlite or .nsys-rep), a glob in the file name such as \
                 run/rank_*.sqlite, or one export.",
            ),
            ProfileError::Missing(_) => OpError::invalid_input(
                msg,
                "Capture again with the needed trace enabled, e.g. `nsys profile -t cuda,nvtx,osrt`.",
            ),
            ProfileError::Cancelled => OpError::cancelled(),
            ProfileError::Input(e) => OpError::from(e),
            ProfileError::BadOutput(_) => OpError::invalid_input(
                msg,
                "Choose an output path that is a new file or a regular file (with overwrite: true).",
            ),
            ProfileError::OutputExists { .. } => OpError::invalid_input(
                msg,
                "Pass overwrite: true to replace it, or choose another output path.",
            ),
        }
    }
}

/// Open the profile named by `path` (a `.nsys-rep` is exported into `$AISP_HOME/cache`).
pub fn open_profile(ctx: &OpContext, path: &str) -> Result<Profile, OpError> {
    if path.trim().is_empty() {
        return Err(OpError::invalid_input(
            "path is empty",
            "Pass the path of an Nsight Systems export, e.g. {\"path\": \"run.sqlite\"}.",
        ));
    }
    if profile::ranks::is_set(path) {
        let op = ctx.tool().trim_start_matches("aisp_profile_");
        return Err(OpError::invalid_input(
            format!(
                "`{path}` names a set of exports (a folder or glob); {} reads one export",
                ctx.tool()
            ),
            format!(
                "Every rank at once: aisp_profile_ranks {{\"path\": \"{path}\", \"each\": \"{op}\"}} (its answer per export, with \
                 the ranks each holds and the cross-rank analysis); one rank: pass its file."
            ),
        ));
    }
    // The run id of an aisp_profile_nsys capture names its SQLite export.
    let path = capture::profile_ref(ctx, path)?;
    let options = profile::OpenOptions {
        tables: Some(ctx.app().profile_tables.clone()),
        progress: Some(scan_progress(ctx)),
        ..open_options(ctx)
    };
    profile::open_with(&PathBuf::from(&path), &options).map_err(|e| {
        let mut err = OpError::from(e);
        if let Some(hint) = compressed_hint(&path) {
            err.hint = hint;
        }
        err
    })
}

/// The hint for a compressed export: decompress it, not export it again.
pub fn compressed_hint(path: &str) -> Option<String> {
    let lower = path.to_ascii_lowercase();
    let (tool, ext) = [
        ("xz -dk", ".xz"),
        ("gunzip -k", ".gz"),
        ("zstd -d", ".zst"),
        ("bunzip2 -k", ".bz2"),
    ]
    .into_iter()
    .find(|(_, ext)| lower.ends_with(ext))?;
    let plain = &path[..path.len() - ext.len()];
    Some(format!(
        "The file is compressed: decompress it first (`{tool} {path}`) and pass the result ({plain})."
    ))
}

/// How this call opens exports: aisp's cache, the configured `nsys`
/// (`AISP_NSYS`, config `nsys`) and, for `.nsys-rep` reports, `nsys export` run
/// like a capture: in its own process group, stopped (the whole group) when
/// the call is cancelled or `limits.nsys_export_timeout_s` passes.
pub fn open_options(ctx: &OpContext) -> profile::OpenOptions {
    let config = &ctx.app().config;
    profile::OpenOptions {
        cache_dir: Some(config.cache_dir()),
        nsys: config.nsys.clone(),
        max_bytes: Some(config.limits.nsight_export_bytes),
        tables: None,
        progress: None,
        exporter: Some(exporter(ctx)),
    }
}

fn exporter(ctx: &OpContext) -> profile::nsysrep::Exporter {
    let ctx = ctx.clone();
    profile::nsysrep::Exporter(std::sync::Arc::new(
        move |nsys: &std::path::Path, args: &[String]| {
            use aisp_capture::process::{self, CommandSpec, RunLimits, Stop};
            let limit = ctx.app().config.nsys_export_timeout;
            let report = PathBuf::from(args.last().cloned().unwrap_or_default());
            let mut deadline = std::time::Instant::now() + limit;
            if let Some(d) = ctx.deadline() {
                deadline = deadline.min(d);
            }
            let spec = CommandSpec::new(nsys, args.to_vec());
            let limits = RunLimits {
                deadline: Some(deadline),
                tail_lines: 20,
                ..RunLimits::default()
            };
            let outcome = process::run(&spec, &limits, &|| ctx.is_cancelled(), &mut |p| {
                ctx.progress(
                    p.elapsed.as_secs_f64(),
                    None,
                    format!(
                        "exporting the report with nsys: {:.0} s (at most {:.0} s)",
                        p.elapsed.as_secs_f64(),
                        limit.as_secs_f64()
                    ),
                )
            })
            .map_err(|e| ProfileError::ExportFailed {
                path: report.clone(),
                message: e.to_string(),
            })?;
            match outcome.stopped {
                Some(Stop::Cancelled) => Err(ProfileError::Cancelled),
                Some(Stop::DeadlinePassed) if ctx.is_cancelled() => Err(ProfileError::Cancelled),
                Some(Stop::DeadlinePassed) => Err(ProfileError::ExportTimeout {
                    path: report,
                    seconds: limit.as_secs_f64(),
                }),
                None if outcome.succeeded() => Ok(()),
                None => Err(ProfileError::ExportFailed {
                    path: report,
                    message: format!(
                        "{} {}: {}",
                        nsys.display(),
                        outcome.status_text(),
                        outcome.stderr.tail.join(" | ")
                    ),
                }),
            }
        },
    ))
}

/// Progress of long table scans, sent as the call's progress notifications.
fn scan_progress(ctx: &OpContext) -> aisp_base::Progress {
    let ctx = ctx.clone();
    aisp_base::Progress::new(
        ctx.app().config.progress_after,
        move |table, done, total| {
            ctx.progress(
                done as f64,
                Some(total as f64),
                format!(
                    "reading {table}: {done} of {total} pages (decoded once, then kept in memory)"
                ),
            )
        },
    )
}

/// Every profile answer: the export's version, the scope it answers for, and the result.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Answer<T> {
    /// The file analysed.
    pub path: String,
    /// Product and schema version of the export.
    pub export: ExportVersion,
    /// The device/process/window filter applied, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<ResolvedScope>,
    #[serde(flatten)]
    pub result: T,
    /// What this default answer leaves out, and the argument that brings it back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

impl<T> Answer<T> {
    /// The same file, export and scope with the result reshaped by `f` (the result and what the answer leaves out
    /// so far, to what it is now and leaves out).
    fn reshape<U>(self, f: impl FnOnce(T, Vec<String>) -> (U, Vec<String>)) -> Answer<U> {
        let (result, left_out) = f(self.result, self.left_out);
        Answer {
            path: self.path,
            export: self.export,
            scope: self.scope,
            result,
            left_out,
        }
    }

    fn try_reshape<U>(
        self,
        f: impl FnOnce(T, Vec<String>) -> Result<(U, Vec<String>), OpError>,
    ) -> Result<Answer<U>, OpError> {
        let (result, left_out) = f(self.result, self.left_out)?;
        Ok(Answer {
            path: self.path,
            export: self.export,
            scope: self.scope,
            result,
            left_out,
        })
    }
}

fn answer<T>(p: &Profile, scope: Option<ResolvedScope>, result: T) -> Answer<T> {
    let scope = scope.filter(|s| s.device.is_some() || s.process.is_some() || s.trim.is_some());
    Answer {
        path: p.source().display().to_string(),
        export: p.version().clone(),
        scope,
        result,
        left_out: Vec::new(),
    }
}

/// Run `f` on the profile of a scoped input, with the result cache keyed by
/// the file identity and the arguments.
fn scoped<I, T>(
    ctx: &OpContext,
    op: &str,
    input: &I,
    f: impl FnOnce(&Profile, &ResolvedScope) -> Result<T, ProfileError>,
) -> Result<Answer<T>, OpError>
where
    I: ScopedInput + Serialize,
    T: Serialize + DeserializeOwned,
{
    let p = open_profile(ctx, input.path())?;
    let key = serde_json::to_string(input).unwrap_or_default();
    if let Some(hit) = ctx
        .app()
        .store()
        .ok()
        .and_then(|store| profile::cache::lookup_in::<Answer<T>>(store, &p, op, &key))
    {
        // The cache is keyed by the file's identity: the stored answer names the file as its first
        // caller spelt it; this caller gets its own spelling back.
        let mut hit = hit;
        hit.path = p.source().display().to_string();
        return Ok(hit);
    }
    let scope = p.resolve(&input.scope())?;
    ctx.check_cancelled()?;
    let result = f(&p, &scope)?;
    if ctx
        .app()
        .build_ahead
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        // The judging questions read the ledger; build it while the session asks others.
        profile::ledger::prefetch(&p);
    }
    let out = answer(&p, Some(scope), result);
    if let Ok(store) = ctx.app().store() {
        profile::cache::store_in(store, &p, op, &key, &out);
    }
    Ok(out)
}

/// Inputs that name a profile and a scope.
pub trait ScopedInput {
    fn path(&self) -> &str;
    fn scope(&self) -> Scope;
}

/// Defines an input struct with the common profile fields (path, device,
/// process, start_ns, end_ns, nvtx_range) plus its own.
macro_rules! scoped_input {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Nsight Systems export (.sqlite) or report (.nsys-rep).
            pub path: String,
            /// CUDA device id; default all.
            #[serde(default)]
            pub device: Option<i64>,
            /// OS process id; default all.
            #[serde(default)]
            pub process: Option<i64>,
            /// Window start, ns in the export's timebase.
            #[serde(default)]
            pub start_ns: Option<i64>,
            /// Window end, ns.
            #[serde(default)]
            pub end_ns: Option<i64>,
            /// Trim to the NVTX ranges of this name.
            #[serde(default)]
            pub nvtx_range: Option<String>,
            $($(#[$fm])* $f: $t,)*
        }

        impl ScopedInput for $name {
            fn path(&self) -> &str {
                &self.path
            }
            fn scope(&self) -> Scope {
                Scope {
                    device: self.device,
                    process: self.process,
                    start_ns: self.start_ns,
                    end_ns: self.end_ns,
                    nvtx_range: self.nvtx_range.clone(),
                }
            }
        }
    };
}

fn limit(l: Option<usize>, default: usize) -> Result<usize, OpError> {
    match l {
        None => Ok(default),
        Some(0) => Err(OpError::invalid_input(
            "limit must be at least 1",
            "Pass e.g. \"limit\": 20.",
        )),
        Some(n) => Ok(n.min(10_000)),
    }
}

// ---------------------------------------------------------------------------------------------
// info

pub struct Info;

/// Arguments of `info`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InfoInput {
    /// Path to an Nsight Systems export (.sqlite from `nsys export --type sqlite`) or report (.nsys-rep).
    pub path: String,
    /// Also list every table of the export and the capture's raw settings (default false).
    #[serde(default)]
    pub raw: Option<bool>,
}

impl ScopedInput for InfoInput {
    fn path(&self) -> &str {
        &self.path
    }
    fn scope(&self) -> Scope {
        Scope::default()
    }
}

impl Operation for Info {
    type Input = InfoInput;
    type Output = Answer<profile::info::Info>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Profile info",
        summary: "What an Nsight Systems export holds: versions, capture settings, GPUs, processes/threads, streams, event counts.",
        description: "What an Nsight Systems export (.sqlite or .nsys-rep) holds: capture settings, time range, GPUs, driver and CUDA, processes, threads, streams, and counts of kernels, copies, API calls and NVTX ranges. Use first on a new profile. Milliseconds; about a second on 1 GB.",
        positional: &["path"],
        intents: &[
            "what is in this profile",
            "profile overview",
            "which gpus in the trace",
            "nsys report info",
            "capture settings",
            "how many kernels",
        ],
        example: r#"{"path": "train.sqlite"}"#,
        tier: crate::registry::Tier::Default,
        leaves_out: true,
        ..OpSpec::new("profile", "info")
    };

    fn run(&self, ctx: &OpContext, input: InfoInput) -> Result<Self::Output, OpError> {
        let raw = input.raw.unwrap_or(false);
        let mut out = scoped(ctx, "info", &input, |p, _| profile::info::info(p))?;
        if !raw {
            let info = &mut out.result;
            let (tables, settings) = (info.tables.len(), info.capture.settings.len());
            info.tables.clear();
            info.capture.settings.clear();
            if tables + settings > 0 {
                out.left_out.push(format!(
                    "the export's {tables} table names and {settings} raw capture settings: pass \"raw\": true"
                ));
            }
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// summary

/// Rows per report in a default summary.
const SUMMARY_ROWS: usize = 3;

pub struct Summary;

scoped_input! {
    /// Arguments of `summary`.
    SummaryInput {
        /// Reports to produce: any of cuda_gpu_kern_sum, cuda_api_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum,
        /// nvtx_sum, osrt_sum; default all the export supports but cuda_gpu_mem_size_sum.
        #[serde(default)]
        reports: Option<Vec<String>>,
        /// Kernel names: `short` (default; e.g. vectorized_elementwise_kernel) or `demangled` (as nsys stats groups them).
        #[serde(default)]
        names: Option<profile::summary::NameKey>,
        /// Rows per report (default 3); Time % is always over all rows.
        #[serde(default)]
        limit: Option<usize>,
    }
}

impl Operation for Summary {
    type Input = SummaryInput;
    type Output = Answer<profile::summary::Summary>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Profile summary (nsys stats reports)",
        summary: "The nsys stats reports: kernels, CUDA API, memcpy time/size, NVTX and OS runtime, with exact nsys semantics.",
        description: "The `nsys stats` reports of an Nsight Systems export, exactly: GPU kernel, CUDA API, memory time and size, NVTX and OS runtime summaries (Time %, total, instances, avg, med, min, max, stddev). Use to see where GPU and CPU time goes at a glance. Under 0.3 s on a 56 MB export.",
        positional: &["path"],
        intents: &[
            "nsys stats",
            "stats summary",
            "where does gpu time go",
            "cuda api summary",
            "profile summary",
            "osrt summary",
            "memcpy summary",
            "api calls summary",
        ],
        example: r#"{"path": "train.sqlite", "limit": 10}"#,
        tier: crate::registry::Tier::Core,
        leaves_out: true,
        ..OpSpec::new("profile", "summary")
    };

    fn run(&self, ctx: &OpContext, input: SummaryInput) -> Result<Self::Output, OpError> {
        // By default every report but memory sizes (the bytes beside cuda_gpu_mem_time_sum's times).
        let default_reports = input.reports.is_none();
        let options = profile::summary::SummaryOptions {
            reports: input.reports.clone().or_else(|| {
                Some(
                    profile::summary::REPORTS
                        .iter()
                        .filter(|r| **r != "cuda_gpu_mem_size_sum")
                        .map(|r| r.to_string())
                        .collect(),
                )
            }),
            names: input.names.unwrap_or_default(),
            limit: Some(limit(input.limit, SUMMARY_ROWS)?),
        };
        let mut out = scoped(ctx, "summary", &input, |p, s| {
            profile::summary::summary(p, s, &options)
        })?;
        if input.limit.is_none() {
            let r = &out.result;
            let cut: Vec<(String, usize, usize)> = [
                &r.cuda_gpu_kern_sum,
                &r.cuda_api_sum,
                &r.cuda_gpu_mem_time_sum,
                &r.nvtx_sum,
                &r.osrt_sum,
            ]
            .into_iter()
            .flatten()
            .map(|t| (t.report.clone(), t.rows.len(), t.rows_total))
            .chain(
                r.cuda_gpu_mem_size_sum
                    .iter()
                    .map(|t| (t.report.clone(), t.rows.len(), t.rows_total)),
            )
            .filter(|(_, shown, total)| shown < total)
            .collect();
            if let Some(most) = cut.iter().map(|c| c.2).max() {
                let parts: Vec<String> = cut
                    .iter()
                    .map(|(name, shown, total)| format!("{name} {shown} of {total}"))
                    .collect();
                out.left_out.push(format!(
                    "rows past the top {SUMMARY_ROWS} of each report ({}; Time % counts all rows): pass \"limit\": {most}",
                    parts.join(", ")
                ));
            }
        }
        if default_reports {
            out.left_out.push(
                "cuda_gpu_mem_size_sum (bytes per copy kind): pass \"reports\" naming it".into(),
            );
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// kernels

pub struct Kernels;

scoped_input! {
    /// Arguments of `kernels`.
    KernelsInput {
        /// Group by `operation` (default: the short name, and for PyTorch's generic launchers the operation
        /// they carry, e.g. `vectorized_elementwise_kernel[CUDAFunctor_add]`), `short` (nsys's short name) or
        /// `demangled` (whole C++ signatures, hundreds of characters each).
        #[serde(default)]
        names: Option<profile::kernels::KernelNames>,
        /// Kernel groups to list (default 8).
        #[serde(default)]
        limit: Option<usize>,
        /// Each group in full (duration statistics, per-device split, launch configuration, class evidence,
        /// demangled name) and the time per class: about 2.9× the characters.
        #[serde(default)]
        detail: Option<bool>,
    }
}

impl Operation for Kernels {
    type Input = KernelsInput;
    type Output = Answer<super::profile_lean::KernelsView>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Top kernels with classes",
        summary: "Top kernels with the step ledger's class (tensor-core GEMM, fp32 SIMT GEMM, attention, optimizer, ...), share, calls, mean and grid × block; detail: p50/p90/p99, per-device split, full launch configuration.",
        description: "Which kernels take the most GPU time in an Nsight Systems export: per kernel its name, where the step ledger puts it (tensor-core or FP32 GEMM, attention, elementwise, reduction, optimizer, copy, communication), share, count, mean, grid and block, precision; time per class and the share of kernels under 5 us; Use to find what to optimize and whether GEMMs use tensor cores. Milliseconds to a second.",
        positional: &["path"],
        intents: &[
            "top kernels",
            "which kernels",
            "slowest kernels",
            "kernels take the most time",
            "most expensive kernels",
            "are gemms using tensor cores",
            "kernel classes",
            "kernel launch configuration",
            "tiny kernels",
        ],
        example: r#"{"path": "train.sqlite", "limit": 10}"#,
        tier: crate::registry::Tier::Default,
        leaves_out: true,
        ..OpSpec::new("profile", "kernels")
    };

    fn run(&self, ctx: &OpContext, input: KernelsInput) -> Result<Self::Output, OpError> {
        let l = limit(input.limit, super::profile_lean::DEFAULT_KERNEL_ROWS)?;
        let names = input.names.unwrap_or_default();
        let out = scoped(ctx, "kernels", &input, |p, s| {
            profile::kernels::kernels(p, s, names, l)
        })?;
        Ok(out.reshape(|r, mut left_out| {
            if input.limit.is_none() && r.rows.len() < r.rows_total {
                left_out.push(format!(
                    "kernel groups past the top {} of {} (time_pct and the classes count all): pass \"limit\": {}",
                    r.rows.len(),
                    r.rows_total,
                    r.rows_total
                ));
            }
            let (result, cut) =
                super::profile_lean::kernels_view(r, input.detail.unwrap_or(false));
            left_out.extend(cut);
            (result, left_out)
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// utilization

pub struct Utilization;

scoped_input! {
    /// Arguments of `utilization`.
    UtilizationInput {
        /// Number of equal chunks the span is cut into for time utilization (default 30, like nsys gpu_time_util).
        #[serde(default)]
        chunks: Option<usize>,
        /// Chunks below this busy % are reported as low-utilization stretches (default 50).
        #[serde(default)]
        threshold_pct: Option<f64>,
    }
}

impl Operation for Utilization {
    type Input = UtilizationInput;
    type Output = Answer<profile::utilization::Utilization>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU utilization per window",
        summary: "Per-device busy time as the union of kernel intervals over the span, steps and steady windows, plus time-utilization chunks.",
        description: "How busy each GPU is in an Nsight Systems export (the union of kernel intervals) over its span, its steps, the steady state or a chosen window: busy %, idle time, concurrency, streams, and busy % over time. Answers 'is my GPU busy?'. Milliseconds.",
        positional: &["path"],
        intents: &[
            "gpu utilization in the profile",
            "is the gpu busy",
            "how busy",
            "busy percent",
            "idle gpu",
            "steady state utilization",
            "gpu_time_util",
        ],
        example: r#"{"path": "train.sqlite", "device": 0}"#,
        tier: crate::registry::Tier::Default,
        leaves_out: true,
        ..OpSpec::new("profile", "utilization")
    };

    fn run(&self, ctx: &OpContext, input: UtilizationInput) -> Result<Self::Output, OpError> {
        let chunks = input.chunks.unwrap_or(30);
        if !(1..=1000).contains(&chunks) {
            return Err(OpError::invalid_input(
                "chunks must be between 1 and 1000",
                "Pass e.g. \"chunks\": 30.",
            ));
        }
        let threshold = input.threshold_pct.unwrap_or(50.0);
        scoped(ctx, "utilization", &input, |p, s| {
            profile::utilization::utilization(p, s, chunks, threshold)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// gaps

pub struct Gaps;

scoped_input! {
    /// Arguments of `gaps`.
    GapsInput {
        /// Report idle gaps longer than this many milliseconds (default 1.0).
        #[serde(default)]
        min_gap_ms: Option<f64>,
        /// Gaps to list per device: the steady-state window's largest first, then the largest of the rest
        /// (first step, warm-up) (default 4 over all devices, at least 1 per device); totals count all.
        #[serde(default)]
        limit: Option<usize>,
        /// Also what the launching thread did in each gap, call by call: about 1.6× the characters (the default
        /// names each gap's cause and main call).
        #[serde(default)]
        detail: Option<bool>,
    }
}

/// Keep `per_device` gaps: mostly the steady-state window's (what recurs every step), largest first, plus
/// the largest of the rest (first-step module loading, warm-up) so that a one-off stall is seen for what
/// it is. Explicit limits get the same mix, so the largest gaps are never hidden behind the steady ones.
fn mix_gaps(gaps: &mut Vec<profile::gaps::Gap>, per_device: usize) {
    // Stable: each group stays largest first.
    gaps.sort_by_key(|g| !g.windows.contains(&profile::WindowKind::Steady));
    let steady = gaps
        .iter()
        .take_while(|g| g.windows.contains(&profile::WindowKind::Steady))
        .count();
    let others = gaps.len() - steady;
    let reserve = if others > 0 && steady > 0 {
        (per_device / 5).max(1).min(per_device.saturating_sub(1))
    } else {
        0
    };
    let take_steady = steady.min(per_device - reserve.min(per_device));
    let take_others = others.min(per_device - take_steady);
    let rest = gaps.split_off(steady);
    gaps.truncate(take_steady);
    gaps.extend(rest.into_iter().take(take_others));
}

impl Operation for Gaps {
    type Input = GapsInput;
    type Output = Answer<profile::gaps::Gaps>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU idle gaps with CPU attribution",
        summary: "Idle gaps per device, steady state first, each with what the launching CPU thread was doing (sync, module loading, sleep, NVTX range).",
        description: "Finds where each GPU sat idle longer than min_gap_ms in an Nsight Systems export, largest first, and why: the kernels around each gap, its step, and what the launching thread did meanwhile (syncs, copies, module loading, sleeps, NVTX ranges); steady-state gaps are listed before first-step warm-up. Use to see why the GPU starves. Milliseconds; seconds on 1 GB.",
        positional: &["path"],
        intents: &[
            "gpu idle gaps",
            "why is the gpu idle",
            "gpu starvation",
            "bubbles in the timeline",
            "idle time",
            "what is the cpu doing",
        ],
        example: r#"{"path": "train.sqlite", "min_gap_ms": 1.0, "limit": 10}"#,
        tier: crate::registry::Tier::Default,
        leaves_out: true,
        ..OpSpec::new("profile", "gaps")
    };

    fn run(&self, ctx: &OpContext, input: GapsInput) -> Result<Self::Output, OpError> {
        let ms = input.min_gap_ms.unwrap_or(1.0);
        if !(ms.is_finite() && ms >= 0.0) {
            return Err(OpError::invalid_input(
                "min_gap_ms must be a number >= 0",
                "Pass e.g. \"min_gap_ms\": 1.0.",
            ));
        }
        const DEFAULT_LISTED: usize = 4;
        let l = limit(input.limit, DEFAULT_LISTED)?;
        // The library lists the largest first; explain enough of them that the
        // steady-state ones (what recurs every step) can come first here.
        let explained = l.clamp(200, 10_000);
        let mut out = scoped(ctx, "gaps", &input, |p, s| {
            profile::gaps::gaps(p, s, (ms * 1e6).round() as i64, explained)
        })?;
        // A limit is per device; the default shares one budget over the devices, so 8 GPUs do not
        // list 8x as much.
        let per_device = match input.limit {
            Some(_) => l,
            None => (DEFAULT_LISTED / out.result.devices.len().max(1)).max(1),
        };
        let mut parts = Vec::new();
        let mut most = 0;
        for d in &mut out.result.devices {
            mix_gaps(&mut d.gaps, per_device);
            if (d.gaps.len() as u64) < d.gaps_total {
                parts.push(format!(
                    "device {}: {} of {}",
                    d.device,
                    d.gaps.len(),
                    d.gaps_total
                ));
                most = most.max(d.gaps_total);
            }
        }
        if !parts.is_empty() {
            out.left_out.push(format!(
                "more gaps ({} listed: the steady-state window's largest first, then the largest of the rest; the window totals count all): pass \"limit\": {most}",
                parts.join(", ")
            ));
        }
        if !input.detail.unwrap_or(false) {
            let mut cut = false;
            for d in &mut out.result.devices {
                for g in &mut d.gaps {
                    cut |= !g.cpu.is_empty();
                    g.cpu.clear();
                }
            }
            if cut {
                out.left_out.push(
                    "each gap's CPU calls (the launching thread's activity, call by call; `explanation` names the main one): pass \"detail\": true"
                        .into(),
                );
            }
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// memory

pub struct Memory;

scoped_input! {
    /// Arguments of `memory`.
    MemoryInput {
        /// Flagged copies to list (default 3).
        #[serde(default)]
        limit: Option<usize>,
        /// Also GPU memory use over time per device and each class's per-device split: about 1.3× the characters
        /// (the default gives the peak and final use).
        #[serde(default)]
        detail: Option<bool>,
    }
}

impl Operation for Memory {
    type Input = MemoryInput;
    type Output = Answer<profile::memory::Memory>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Memory transfers and usage",
        summary: "Memcpy/memset by direction and memory kind, achieved bandwidth, pageable async copies, blocking copy APIs, GPU memory over time.",
        description: "Memory copies and memsets in an Nsight Systems export by direction (H2D, D2H, D2D, P2P) and memory kind (pageable, pinned, device): count, bytes, time, bandwidth; flags async copies from pageable memory and blocking copies, and shows GPU memory use over time. Use for data-movement questions. Milliseconds.",
        positional: &["path"],
        intents: &[
            "memcpy breakdown",
            "pageable memory",
            "pinned memory",
            "h2d transfers",
            "host to device copies",
            "memory copies",
            "gpu memory usage over time",
        ],
        example: r#"{"path": "train.sqlite"}"#,
        tier: crate::registry::Tier::Default,
        leaves_out: true,
        ..OpSpec::new("profile", "memory")
    };

    fn run(&self, ctx: &OpContext, input: MemoryInput) -> Result<Self::Output, OpError> {
        let l = limit(input.limit, 3)?;
        let mut out = scoped(ctx, "memory", &input, |p, s| {
            profile::memory::memory(p, s, l)
        })?;
        if !input.detail.unwrap_or(false) {
            let mut cut = false;
            for u in &mut out.result.usage {
                cut |= !u.timeline.is_empty();
                u.timeline.clear();
            }
            for c in &mut out.result.by_class {
                cut |= !c.per_device.is_empty();
                c.per_device.clear();
            }
            if cut {
                out.left_out.push(
                    "GPU memory use over time per device (peak and final are given) and each class's per-device split: pass \"detail\": true".into(),
                );
            }
        }
        let pa = &out.result.pageable_async;
        if input.limit.is_none() && pa.count > pa.largest.len() as u64 {
            out.left_out.push(
                format!(
                    "pageable async copies past the {} largest of {} (the totals count all): pass \"limit\": {}",
                    pa.largest.len(),
                    pa.count,
                    pa.count.min(10_000)
                ),
            );
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// nvtx

pub struct Nvtx;

scoped_input! {
    /// Arguments of `nvtx`.
    NvtxInput {
        /// Range names to list, largest CPU time first (default 5).
        #[serde(default)]
        limit: Option<usize>,
        /// Depth of the per-thread range tree (default 2).
        #[serde(default)]
        max_depth: Option<u32>,
        /// Children kept per tree node, largest first (default 2).
        #[serde(default)]
        max_children: Option<usize>,
        /// List numbered families (step_0, step_1, ...; any prefix) as one pattern `step_*` (default true).
        #[serde(default)]
        group_numbered: Option<bool>,
        /// Also each range name's GPU time per device: about 1.1× the characters.
        #[serde(default)]
        detail: Option<bool>,
    }
}

impl Operation for Nvtx {
    type Input = NvtxInput;
    type Output = Answer<profile::nvtx::Nvtx>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "NVTX ranges with GPU time",
        summary: "NVTX range tree per thread and GPU time projected onto each range name (process-wide attribution, same-thread beside it).",
        description: "GPU time per NVTX range in an Nsight Systems export: kernels attributed through their launching call on any thread of the process (PyTorch launches backward from its autograd thread), with instances, CPU time, GPU time and a range tree per thread. Use to see which code region owns GPU time. Milliseconds.",
        positional: &["path"],
        intents: &[
            "nvtx ranges",
            "nvtx range",
            "which code region takes gpu time",
            "time per layer",
            "nvtx tree",
            "forward vs backward time",
            "range attribution",
        ],
        example: r#"{"path": "train.sqlite", "limit": 10}"#,
        tier: crate::registry::Tier::Default,
        leaves_out: true,
        ..OpSpec::new("profile", "nvtx")
    };

    fn run(&self, ctx: &OpContext, input: NvtxInput) -> Result<Self::Output, OpError> {
        let options = profile::nvtx::NvtxOptions {
            limit: limit(input.limit, 5)?,
            max_depth: input.max_depth.unwrap_or(2).clamp(1, 64),
            max_children: input.max_children.unwrap_or(2).clamp(1, 1000),
            group_numbered: input.group_numbered.unwrap_or(true),
        };
        let mut out = scoped(ctx, "nvtx", &input, |p, s| {
            profile::nvtx::nvtx(p, s, &options)
        })?;
        let r = &out.result;
        if r.names.len() < r.names_total {
            out.left_out.push(format!(
                "range names past the top {} by CPU time ({} in all): pass \"limit\": {}",
                r.names.len(),
                r.names_total,
                r.names_total
            ));
        }
        if input.max_depth.is_none() && input.max_children.is_none() {
            out.left_out.push(
                "range-tree nodes deeper than 2 or past the 2 largest children (counted in `more`): pass `max_depth` and `max_children`"
                    .into(),
            );
        }
        if !input.detail.unwrap_or(false) {
            let mut cut = false;
            for n in &mut out.result.names {
                cut |= n.per_device.len() > 1;
                n.per_device.clear();
            }
            if cut {
                out.left_out
                    .push("each range name's GPU time per device: pass \"detail\": true".into());
            }
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// iterations

pub struct Iterations;

scoped_input! {
    /// Arguments of `iterations`.
    IterationsInput {
        /// NVTX range name (or numbered family prefix, e.g. `iter` for iter_0, iter_1, ...) marking one iteration;
        /// default: `step`/`step_N`, then other numbered families, then a repeating kernel pattern.
        #[serde(default)]
        marker: Option<String>,
        /// Steps to list in full (default 2); statistics and the slowest steps always use all steps.
        #[serde(default)]
        limit: Option<usize>,
        /// The three slowest steps with what differs (default: the slowest one): about 1.4× the characters.
        #[serde(default)]
        detail: Option<bool>,
    }
}

impl Operation for Iterations {
    type Input = IterationsInput;
    type Output = Answer<profile::iterations::Iterations>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Training/inference iterations",
        summary: "Detects steps (NVTX step_N, numbered ranges or a repeating kernel) and reports per-step CPU time, GPU-projected time, kernels, variance, slowest steps.",
        description: "Detects iterations from NVTX ranges named step/step_N (or a given marker, or another numbered family such \
as iter_N or request_N), or, without NVTX, from a kernel that repeats regularly. Per process: each step's CPU duration, \
GPU-projected time (union of the kernels launched inside it from any thread of the process), GPU span, first-kernel lag, kernel \
count (and the same-thread count beside it), NCCL kernels by collective; min/median/max/mean/CV over all steps and without the \
first (reported apart: lazy module loading and warm-up live there); the CPU/GPU ratio (well above 1 means host-bound); and the \
slowest steps with what differs (longest API calls, GPU idle, kernels with extra time). Milliseconds.",
        positional: &["path"],
        intents: &[
            "step time",
            "iteration time",
            "per step breakdown",
            "slowest iteration",
            "step variance",
            "is training host bound",
        ],
        example: r#"{"path": "train.sqlite"}"#,
        leaves_out: true,
        ..OpSpec::new("profile", "iterations")
    };

    fn run(&self, ctx: &OpContext, input: IterationsInput) -> Result<Self::Output, OpError> {
        let l = limit(input.limit, 2)?;
        let marker = input.marker.clone();
        let mut out = scoped(ctx, "iterations", &input, |p, s| {
            profile::iterations::iterations(p, s, marker.as_deref(), l)
        })?;
        let most = out
            .result
            .processes
            .iter()
            .filter(|p| (p.steps.len() as u64) < p.step_count as u64)
            .map(|p| p.step_count as u64)
            .max();
        if let Some(most) = most {
            out.left_out.push(format!(
                "steps past the first {} of each process in full (statistics and the slowest steps use all): pass \"limit\": {most}",
                l
            ));
        }
        for p in &mut out.result.processes {
            // Said once: the first step is also the first row of `steps`.
            if p.first_step
                .as_ref()
                .is_some_and(|f| p.steps.first().is_some_and(|s| s.index == f.index))
            {
                p.first_step = None;
            }
        }
        if !input.detail.unwrap_or(false) {
            let mut cut = 0;
            for p in &mut out.result.processes {
                cut += p.slowest.len().saturating_sub(1);
                p.slowest.truncate(1);
            }
            if cut > 0 {
                out.left_out.push(format!(
                    "{cut} more of the slowest steps with what differs: pass \"detail\": true"
                ));
            }
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// nccl

pub struct Nccl;

scoped_input! {
    /// Arguments of `nccl`.
    NcclInput {}
}

impl Operation for Nccl {
    type Input = NcclInput;
    type Output = Answer<profile::nccl::Nccl>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "NCCL communication",
        summary: "Communication kernels per device and stream by collective: counts, time, share, bandwidth when sizes are known, rank imbalance.",
        description: "Finds NCCL kernels (short name contains nccl) and groups them per device and stream by collective \
(all-reduce, all-gather, reduce-scatter, broadcast, send/recv, all-to-all, reduce): count, total, average, min and max time \
and share of the device's NCCL time; per device the NCCL share of kernel time and the streams used; per collective the devices \
with the most and least time (ranks wait for the slowest). Algorithm and bus bandwidth follow the nccl-tests definitions when \
message sizes are recorded (otherwise it says so). Use it for distributed-training questions. Milliseconds.",
        positional: &["path"],
        intents: &[
            "nccl time",
            "all-reduce time",
            "all-reduce kernels",
            "communication breakdown",
            "collectives",
            "rank imbalance",
            "time in communication",
        ],
        example: r#"{"path": "ddp.sqlite"}"#,
        leaves_out: true,
        ..OpSpec::new("profile", "nccl")
    };

    fn run(&self, ctx: &OpContext, input: NcclInput) -> Result<Self::Output, OpError> {
        scoped(ctx, "nccl", &input, profile::nccl::nccl)
    }
}

// ---------------------------------------------------------------------------------------------
// overlap

pub struct Overlap;

scoped_input! {
    /// Arguments of `overlap`.
    OverlapInput {}
}

impl Operation for Overlap {
    type Input = OverlapInput;
    type Output = Answer<profile::overlap::Overlap>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Compute/communication overlap",
        summary: "Per device: compute only, communication only, both, idle; overlap_pct = communication hidden behind compute.",
        description: "Splits each device's time into compute only, communication (NCCL) only, both, and idle, using unions of \
compute and communication kernel intervals, over the span, steps and steady windows. overlap_pct is the share of communication \
time hidden behind compute (|compute ∩ communication| / |communication|, the HTA definition). Also whether communication and \
compute share a stream (then they cannot overlap). Use it to see whether gradient all-reduce is hidden in data-parallel \
training. Milliseconds.",
        positional: &["path"],
        intents: &[
            "overlap of communication and compute",
            "overlapped with compute",
            "is nccl overlapped",
            "exposed communication",
            "compute communication overlap",
        ],
        example: r#"{"path": "ddp.sqlite", "device": 0}"#,
        leaves_out: true,
        ..OpSpec::new("profile", "overlap")
    };

    fn run(&self, ctx: &OpContext, input: OverlapInput) -> Result<Self::Output, OpError> {
        scoped(ctx, "overlap", &input, profile::overlap::overlap)
    }
}

// ---------------------------------------------------------------------------------------------
// rules

pub struct Rules;

scoped_input! {
    /// Arguments of `rules`.
    RulesInput {
        /// Every finding's evidence, basis, why, verify and data, the windows, how stakes add up and the rules
        /// that found nothing: about 2.5× the characters.
        #[serde(default)]
        detail: Option<bool>,
        /// One finding whole, by id, on each device it fired on.
        #[serde(default)]
        finding: Option<String>,
    }
}

impl Operation for Rules {
    type Input = RulesInput;
    type Output = Answer<super::profile_lean::RulesView>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Profile findings (expert rules)",
        summary: "Findings in the style of nsys analyze, each rated by the GPU time per device a fix would save: starvation, host-bound steps, syncs, copies, launch storms, allocator churn, fp32 GEMMs, exposed NCCL, variance.",
        description: "Start here with a profile (an export, or a folder of per-rank exports): the verdict, then findings ranked by the GPU time per device a fix would save, each with share of the steady window (severity <1 % info, 1 low, 5 medium, 15 high, 40 critical), the step now and predicted after the fix, its numbers (gist) and the fix; the step in short (split, columns, kernels, NVTX ranges, host calls); the next call. Under a second.",
        positional: &["path"],
        intents: &[
            "why is my training slow",
            "training step slow",
            "what is wrong with this profile",
            "find bottlenecks",
            "nsys analyze",
            "expert rules",
            "triage profile",
            "findings",
        ],
        example: r#"{"path": "train.sqlite"}"#,
        tier: crate::registry::Tier::Core,
        leaves_out: true,
        sheds: super::profile_lean::FINDING_SHEDS,
        one_whole: Some("`finding: <id>` gives one finding whole, every field"),
        ..OpSpec::new("profile", "rules")
    };

    fn run(&self, ctx: &OpContext, input: RulesInput) -> Result<Self::Output, OpError> {
        let detail = match input.finding.as_deref() {
            Some(id) => super::profile_lean::Detail::Finding(id),
            None if input.detail.unwrap_or(false) => super::profile_lean::Detail::All,
            None => super::profile_lean::Detail::Lean,
        };
        // A folder or glob of exports: the cross-rank findings of the set (profile::ranks).
        if profile::ranks::is_set(&input.path) {
            let rules = super::profile_ranks::rules_for_set(ctx, &input.path)?;
            // The first export's version; a folder of digests has none.
            let export = match profile::ranks::expand(&input.path)
                .ok()
                .and_then(|f| f.into_iter().next())
            {
                Some(first) => open_profile(ctx, &first.display().to_string())?
                    .version()
                    .clone(),
                None => ExportVersion {
                    product: None,
                    product_version: None,
                    schema_version: None,
                },
            };
            let (result, left_out) =
                super::profile_lean::rules_view(rules, &input.path, detail, true)?;
            return Ok(Answer {
                path: input.path.clone(),
                export,
                scope: None,
                result,
                left_out,
            });
        }
        let out = scoped(ctx, "rules", &input, profile::rules::run)?;
        out.try_reshape(|r, _| super::profile_lean::rules_view(r, &input.path, detail, false))
    }
}

// ---------------------------------------------------------------------------------------------
// ledger

pub struct LedgerOp;

scoped_input! {
    /// Arguments of `ledger`.
    LedgerInput {
        /// Steps listed per device (default 1: the first, often warm-up; none per rank for a set); the steady
        /// summary always covers every steady step.
        #[serde(default)]
        #[schemars(range(min = 1, max = 100000))]
        steps: Option<usize>,
    }
}

/// The step ledger of an export or of a set of ranks.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LedgerAnswer {
    /// How overlapping activity is attributed.
    pub precedence: String,
    /// Per device (one export) or per rank (a set): steps, the steady window's columns, notes.
    pub devices: Vec<LedgerDevice>,
    /// Who arrived last at the steady collectives, when the ranks are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<profile::ledger::Arrivals>,
}

/// One device's ledger with each steady column's share.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LedgerDevice {
    /// The rank, for a set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Share of the steady window per column, % (the same columns as `ledger.steady.columns`).
    pub steady_pct: std::collections::BTreeMap<String, f64>,
    #[serde(flatten)]
    pub ledger: profile::ledger::DeviceLedger,
}

fn ledger_device(
    rank: Option<u32>,
    mut l: profile::ledger::DeviceLedger,
    keep: usize,
) -> (LedgerDevice, usize) {
    let steady_pct = l
        .steady
        .columns
        .iter()
        .map(|(c, v)| (c.as_str().to_string(), l.share(v)))
        .collect();
    let cut = l.steps.len().saturating_sub(keep);
    l.steps.truncate(keep);
    (
        LedgerDevice {
            rank,
            steady_pct,
            ledger: l,
        },
        cut,
    )
}

impl Operation for LedgerOp {
    type Input = LedgerInput;
    type Output = Answer<LedgerAnswer>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Step ledger",
        summary: "Where each nanosecond of each step goes, per device or rank: compute by kernel class, communication (transfer vs waiting for ranks), copies, idle by cause; sums to the step exactly.",
        description: "Where each steady step goes, per device (or per rank for a folder of per-rank exports): the step split exactly into columns (GEMMs on tensor cores or fp32 SIMT, attention, elementwise, optimizer, communication transfer vs waiting for ranks, copies pageable or pinned, idle by cause: launch overhead, sync, host compute, data loading, OS wait, allocator), in ns and shares of the steady window, warm-up apart. What aisp_profile_rules reads. Under a second.",
        positional: &["path"],
        intents: &[
            "where does the step time go",
            "step breakdown",
            "time breakdown per step",
            "what is the step made of",
            "ledger",
        ],
        example: r#"{"path": "train.sqlite"}"#,
        tier: crate::registry::Tier::Default,
        leaves_out: true,
        ..OpSpec::new("profile", "ledger")
    };

    fn run(&self, ctx: &OpContext, input: LedgerInput) -> Result<Self::Output, OpError> {
        let set = profile::ranks::is_set(&input.path);
        // A set lists no step rows by default: every rank's steady summary is what compares them.
        let keep = match input.steps {
            None if set => 0,
            steps => limit(steps, 1)?,
        };
        if set {
            let files = profile::ranks::expand(&input.path)?;
            let threads = profile::ranks::default_threads(files.len());
            let total = files.len() as f64;
            let (set, digests) =
                profile::ranks::analyse(&files, threads, &|| ctx.is_cancelled(), &|done| {
                    ctx.progress(done as f64, Some(total), "digesting exports")
                })
                .map_err(|e| match e {
                    ProfileError::Cancelled => ctx.stop_error(),
                    e => e.into(),
                })?;
            let mut cut = 0;
            let devices = digests
                .into_iter()
                .filter_map(|d| {
                    let rank = d.identity.rank;
                    d.ledger.map(|l| {
                        let (dev, c) = ledger_device(Some(rank), l.ledger, keep);
                        cut += c;
                        dev
                    })
                })
                .collect();
            let mut left_out = Vec::new();
            if cut > 0 {
                left_out.push(if keep == 0 {
                    format!(
                        "the ranks' {cut} step rows (each rank's steady summary covers them): pass \"steps\": N"
                    )
                } else {
                    format!("{cut} step row(s) past the first {keep} per rank: pass \"steps\": N")
                });
            }
            return Ok(Answer {
                path: input.path.clone(),
                export: ExportVersion {
                    product: None,
                    product_version: None,
                    schema_version: None,
                },
                scope: None,
                result: LedgerAnswer {
                    precedence: profile::ledger::PRECEDENCE.to_string(),
                    devices,
                    arrivals: set.arrivals,
                },
                left_out,
            });
        }
        let mut out = scoped(ctx, "ledger", &input, |p, scope| {
            let l = profile::ledger::build(p, scope, None)?;
            Ok(LedgerAnswer {
                precedence: l.precedence,
                devices: l
                    .devices
                    .into_iter()
                    .map(|d| ledger_device(None, d, keep).0)
                    .collect(),
                arrivals: l.arrivals,
            })
        })?;
        // Steps not listed: all of a device's steps (warm-up and steady) minus those kept.
        let cut: usize = out
            .result
            .devices
            .iter()
            .map(|d| {
                let all = if d.ledger.source == profile::ledger::StepSource::Span {
                    1
                } else {
                    d.ledger.warmup_steps + d.ledger.steady.steps
                };
                all.saturating_sub(d.ledger.steps.len())
            })
            .sum();
        if cut > 0 {
            out.left_out.push(format!(
                "{cut} step row(s) past the first {keep} per device: pass \"steps\": N"
            ));
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// search

pub struct Search;

scoped_input! {
    /// Arguments of `search`.
    SearchInput {
        /// Case-insensitive substring, or a glob with `*` and `?` (e.g. `nccl*AllReduce*`).
        pattern: String,
        /// What to search: any of `kernel`, `nvtx`, `api`; default all three.
        #[serde(default)]
        kinds: Option<Vec<profile::search::SearchKind>>,
        /// Matches to list in time order (default 8); counts and per-name totals cover all.
        #[serde(default)]
        limit: Option<usize>,
    }
}

impl Operation for Search {
    type Input = SearchInput;
    type Output = Answer<profile::search::Search>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Search kernels, NVTX ranges and API calls",
        summary: "Finds kernels, NVTX ranges and CUDA API calls by name (substring or glob), with timestamps, counts and totals.",
        description: "Searches a profile by name: kernels (short or demangled name), NVTX ranges (text) and CUDA runtime/driver \
API calls, with a case-insensitive substring or a glob (`*`, `?`). Names are matched in SQL with bound parameters. Returns the \
number of matches per kind, each matching name with its count and total time, and the first matches in time order with start, \
end, duration, device, stream, process and thread. Use it to locate a kernel or range before zooming in with timeline or a \
window (start_ns/end_ns). Milliseconds.",
        positional: &["path", "pattern"],
        intents: &[
            "find kernel",
            "search profile",
            "where is this kernel",
            "find nvtx range",
            "when was cudamalloc called",
            "grep the trace",
        ],
        example: r#"{"path": "train.sqlite", "pattern": "gemm", "kinds": ["kernel"], "limit": 10}"#,
        leaves_out: true,
        ..OpSpec::new("profile", "search")
    };

    fn run(&self, ctx: &OpContext, input: SearchInput) -> Result<Self::Output, OpError> {
        let l = limit(input.limit, 8)?;
        let kinds = input
            .kinds
            .clone()
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| profile::search::ALL_KINDS.to_vec());
        let pattern = input.pattern.clone();
        // SQLite refuses LIKE patterns past 50,000 bytes ("pattern too complex");
        // no kernel, NVTX or API name comes near this.
        const MAX_PATTERN: usize = 4096;
        if pattern.len() > MAX_PATTERN {
            return Err(OpError::invalid_input(
                format!(
                    "the search pattern is {} bytes long; at most {MAX_PATTERN} are searched",
                    pattern.len()
                ),
                "Search for a distinctive part of the name, e.g. \"gemm\" or \"nccl*AllReduce*\".",
            ));
        }
        let mut out = scoped(ctx, "search", &input, |p, s| {
            profile::search::search(p, s, &pattern, &kinds, l)
        })?;
        if out.result.truncated {
            out.left_out.push(format!(
                "matches past the first {l} in time order (`counts` and `names` cover all): pass \"limit\": N"
            ));
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// timeline

pub struct Timeline;

scoped_input! {
    /// Arguments of `timeline`.
    TimelineInput {
        /// Entries per track after merging (default: 30 shared over the tracks, 2 to 20 each).
        #[serde(default)]
        limit: Option<usize>,
        /// Merge consecutive identical events on a track when the gap between them is at most this many ns (default 10000).
        #[serde(default)]
        merge_gap_ns: Option<i64>,
    }
}

impl Operation for Timeline {
    type Input = TimelineInput;
    type Output = Answer<profile::timeline::Timeline>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Timeline of a window",
        summary: "Events of a window per device/stream and per CPU thread, with runs of identical kernels merged, compact enough to read.",
        description: "Lays out what happened in a window: per device and stream the kernels, memcpys and memsets, and per CPU \
thread the NVTX ranges (with nesting depth) and CUDA API calls, as offsets from the window start. Runs of identical events \
on a track (same name, gaps under merge_gap_ns) become one entry with a count and busy time, and each track keeps at most \
`limit` entries. Without start_ns/end_ns or nvtx_range it shows a typical step (the median step after the first), or the \
device span when there are no steps. Use it to see the order of work inside a step, where the GPU waits and what the CPU does \
then. Milliseconds.",
        positional: &["path"],
        intents: &[
            "show the timeline",
            "what happens in a step",
            "zoom into window",
            "sequence of kernels",
            "trace view",
        ],
        example: r#"{"path": "train.sqlite", "limit": 30}"#,
        leaves_out: true,
        ..OpSpec::new("profile", "timeline")
    };

    fn run(&self, ctx: &OpContext, input: TimelineInput) -> Result<Self::Output, OpError> {
        let options = profile::timeline::TimelineOptions {
            limit: limit(input.limit, 40)?,
            merge_gap_ns: input.merge_gap_ns.unwrap_or(10_000).max(0),
        };
        let mut out = scoped(ctx, "timeline", &input, |p, s| {
            profile::timeline::timeline(p, s, &options)
        })?;
        if input.limit.is_none() {
            // One budget over all tracks: a 2-GPU export must not print 4x a 1-GPU one.
            let t = &mut out.result;
            let lists = t.gpu.len() + 2 * t.cpu.len();
            let per_list = (30 / lists.max(1)).clamp(2, 20);
            let mut cut = false;
            for g in &mut t.gpu {
                if g.entries.len() > per_list {
                    g.entries.truncate(per_list);
                    g.truncated = true;
                    cut = true;
                }
            }
            for c in &mut t.cpu {
                if c.ranges.len() > per_list || c.api.len() > per_list {
                    c.ranges.truncate(per_list);
                    c.api.truncate(per_list);
                    c.truncated = true;
                    cut = true;
                }
            }
            if cut {
                out.left_out.push(format!(
                    "entries past the first {per_list} of a track (marked truncated): pass \"limit\" (up to 10000), or narrow the window with start_ns/end_ns"
                ));
            }
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// events

pub struct Events;

scoped_input! {
    /// Arguments of `events`.
    EventsInput {
        /// Slices the window is cut into, one per pixel of the drawing (default 1000, at most 8192):
        /// events shorter than a slice are clustered.
        #[serde(default)]
        buckets: Option<usize>,
    }
}

impl Operation for Events {
    type Input = EventsInput;
    type Output = Answer<profile::events::Events>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Events of a window for drawing",
        summary: "Every event of a window per GPU stream and CPU thread (NVTX lanes, CUDA API), clustered to the drawing's resolution.",
        description: "Returns the kernels, memcpys and memsets per device and stream, and per CPU thread the NVTX ranges (a lane \
per nesting depth) and CUDA API calls, that overlap a window (start_ns/end_ns or nvtx_range; default the span of GPU work), for \
drawing a zoomable timeline: events shorter than one of `buckets` slices are merged with their neighbours into clusters with a \
count and busy time, so the answer stays small however many events the window covers. Kernels carry their launch call \
(name, thread, start, duration). Names are indexes into `names`; times are ns after the window start. The dashboard's \
timeline uses it; for reading a step, aisp_profile_timeline is more compact. Milliseconds once the file is indexed.",
        positional: &["path"],
        intents: &["events in a window", "draw the timeline", "zoomable trace"],
        example: r#"{"path": "train.sqlite", "start_ns": 7784516463, "end_ns": 7794516463, "buckets": 1200}"#,
        leaves_out: true,
        ..OpSpec::new("profile", "events")
    };

    fn run(&self, ctx: &OpContext, input: EventsInput) -> Result<Self::Output, OpError> {
        let buckets = match input.buckets {
            None => profile::events::DEFAULT_BUCKETS,
            Some(n) if (1..=profile::events::MAX_BUCKETS).contains(&n) => n,
            Some(n) => {
                return Err(OpError::invalid_input(
                    format!(
                        "buckets must be 1 to {}, not {n}",
                        profile::events::MAX_BUCKETS
                    ),
                    "Pass the drawing's width in pixels, e.g. \"buckets\": 1200.",
                ));
            }
        };
        let p = open_profile(ctx, &input.path)?;
        // Scope checked against the event index (built once per file) rather than through
        // `Profile::resolve`, which reads the event tables again on every call; a window away from
        // the events is not an error here: panning past the end draws nothing.
        let index = profile::events::index(&p)?;
        let asked = input.scope();
        let scope = index.resolve(&p, &asked)?;
        ctx.check_cancelled()?;
        let result = index.window(&scope, buckets);
        Ok(answer(&p, Some(scope), result))
    }
}

// ---------------------------------------------------------------------------------------------
// compare

pub struct Compare;

/// Arguments of `compare`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareInput {
    /// The baseline: an export (.sqlite or .nsys-rep), the run id of an aisp_profile_nsys capture, or a folder
    /// or glob of per-rank exports (a set of ranks compared as one run).
    pub before: String,
    /// The run after the change, in the same forms.
    pub after: String,
    /// Ledger columns and kernels per delta list (default 3).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Also every fact, each basis, both runs' steps and every prediction's measured lines: about 2× the
    /// characters.
    #[serde(default)]
    pub detail: Option<bool>,
}

impl Operation for Compare {
    type Input = CompareInput;
    type Output = super::profile_lean::CompareView;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Compare two profiles",
        summary: "Did the fix work: the step change with a 95% interval on the step ledger, comparability fact by fact, predicted vs measured step per finding, and what moved.",
        description: "Did the change help: compares two runs (exports, aisp run ids, or folders of per-rank exports) on the step ledger. Per-step GPU periods (NVTX steps, else a repeating unit of identical work) give the change with a 95% interval and a verdict (improved, regressed, no_change, not_comparable) with its basis; the facts that block or qualify the comparison (GPU, host, driver, world size, work per step); each before-run finding's predicted step beside the measured one; the findings and ledger columns that moved; next.",
        positional: &["before", "after"],
        intents: &[
            "compare profiles",
            "did my change help",
            "make it faster compare",
            "before and after",
            "regression between runs",
            "diff two traces",
        ],
        example: r#"{"before": "baseline.sqlite", "after": "optimized.sqlite"}"#,
        tier: crate::registry::Tier::Default,
        leaves_out: true,
        sheds: super::profile_lean::COMPARE_SHEDS,
        ..OpSpec::new("profile", "compare")
    };

    fn run(&self, ctx: &OpContext, input: CompareInput) -> Result<Self::Output, OpError> {
        let l = limit(input.limit, 3)?;
        let before = open_run(ctx, &input.before)?;
        ctx.check_cancelled()?;
        let after = open_run(ctx, &input.after)?;
        ctx.check_cancelled()?;
        Ok(super::profile_lean::compare_view(
            profile::compare::compare_runs(&before, &after, l),
            &input.after,
            input.detail.unwrap_or(false),
        ))
    }
}

/// One side of a comparison: a set of ranks (folder or glob) or one export (path, `.nsys-rep` or run id).
pub(crate) fn open_run(ctx: &OpContext, path: &str) -> Result<profile::compare::Run, OpError> {
    if profile::ranks::is_set(path) {
        let files = profile::ranks::expand(path)?;
        let threads = profile::ranks::default_threads(files.len());
        return profile::compare::Run::of_set(path, threads, &|| ctx.is_cancelled()).map_err(|e| {
            match e {
                ProfileError::Cancelled => ctx.stop_error(),
                e => e.into(),
            }
        });
    }
    let p = open_profile(ctx, path)?;
    Ok(profile::compare::Run::of_export(&p)?)
}

// ---------------------------------------------------------------------------------------------
// export

pub struct Export;

scoped_input! {
    /// Arguments of `export`.
    ExportInput {
        /// `perfetto` (Chrome/Perfetto trace JSON) or `csv` (one report). Reports with charts: aisp_export_html/pdf.
        /// (Not `format`: the CLI's `--format json|table` chooses how results print.)
        #[serde(alias = "format")]
        kind: profile::export::Format,
        /// File to write; default `$AISP_HOME/cache/exports/<name>.<ext>`. Over MCP/HTTP: under the output roots (relative: `$AISP_HOME/exports`).
        #[serde(default)]
        output: Option<String>,
        /// For csv: `kernels` (the kernel trace) or a summary report (cuda_gpu_kern_sum, cuda_api_sum,
        /// cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum, nvtx_sum, osrt_sum); default cuda_gpu_kern_sum.
        #[serde(default)]
        report: Option<String>,
        /// For csv summary reports: `short` (default) or `demangled` kernel names.
        #[serde(default)]
        names: Option<profile::summary::NameKey>,
        /// Replace `output` if it exists (default false: refuse).
        #[serde(default)]
        overwrite: Option<bool>,
    }
}

impl Operation for Export {
    type Input = ExportInput;
    type Output = Answer<profile::export::Exported>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Export a profile",
        summary: "Writes a Perfetto/Chrome trace JSON or a CSV of any report of a profile.",
        description: "Exports a profile (or its scope: device, process, window) to a file of the given `kind`: `perfetto` writes Chrome/Perfetto \
trace JSON with GPUs as processes and streams as tracks (kernels, memcpys, memsets), CPU threads with NVTX ranges and CUDA API \
calls, and flow arrows from each launch to its kernel, streamed to disk, loadable in ui.perfetto.dev; `csv` writes one report \
with all its rows (the kernel trace or any nsys stats report). Reports with charts (HTML, PDF) are aisp_export_html and \
aisp_export_pdf. Refuses to overwrite an existing file unless \
overwrite is true. Returns the path, size and record count. Seconds on large profiles.",
        positional: &["path"],
        intents: &[
            "export to perfetto",
            "perfetto",
            "chrome trace",
            "export csv",
            "open in perfetto",
            "save report",
        ],
        example: r#"{"path": "train.sqlite", "kind": "perfetto", "output": "train.perfetto.json"}"#,
        hints: crate::registry::Hints {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        leaves_out: true,
        ..OpSpec::new("profile", "export")
    };

    fn run(&self, ctx: &OpContext, input: ExportInput) -> Result<Self::Output, OpError> {
        let overwrite = input.overwrite.unwrap_or(false);
        // A named output is checked before the profile is read: refused paths cost nothing.
        let named = match input.output.as_deref().map(str::trim) {
            Some(o) if !o.is_empty() => {
                let t = crate::outputs::file(ctx, "output", o)?;
                t.check_free(overwrite)
                    .map_err(|e| crate::outputs::write_error("output", e))?;
                Some(t)
            }
            _ => None,
        };
        let p = open_profile(ctx, &input.path)?;
        let scope = p.resolve(&input.scope())?;
        let output = match named {
            Some(t) => t,
            None => crate::outputs::own_file(&profile::export::default_output(
                &ctx.app().config.cache_dir(),
                p.source(),
                input.kind,
                input.report.as_deref(),
            ))?,
        };
        let done = profile::export::export(
            &p,
            &scope,
            input.kind,
            &output,
            input.report.as_deref(),
            input.names.unwrap_or_default(),
            input.overwrite.unwrap_or(false),
        )?;
        Ok(answer(&p, Some(scope), done))
    }
}
