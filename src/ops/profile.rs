//! Operations of the `profile` domain: Nsight Systems exports read exactly.
//!
//! Each operation opens the profile read-only through [`crate::profile`],
//! checks the scope (device, process, window), calls one analysis and wraps
//! the result with the export's version and the scope it answered for. The
//! work and its documentation live in `crate::profile`.
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
use crate::profile::{self, ExportVersion, Profile, ProfileError, ResolvedScope, Scope};
use crate::registry::{DynOperation, OpSpec, Operation};

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
    &Rules,
    &Compare,
    &Export,
    &capture::ProfileNsys,
    &capture::ProfileNcu,
    &capture::NcuSummaryOp,
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
    // The run id of an aisp_profile_nsys capture names its SQLite export.
    let path = capture::profile_ref(ctx, path)?;
    let options = profile::OpenOptions {
        cache_dir: Some(ctx.app().config.cache_dir()),
        nsys: None,
        max_bytes: Some(ctx.app().config.limits.nsight_export_bytes),
    };
    Ok(profile::open_with(&PathBuf::from(path), &options)?)
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
}

fn answer<T>(p: &Profile, scope: Option<ResolvedScope>, result: T) -> Answer<T> {
    let scope = scope.filter(|s| s.device.is_some() || s.process.is_some() || s.trim.is_some());
    Answer {
        path: p.source().display().to_string(),
        export: p.version().clone(),
        scope,
        result,
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
    if let Some(hit) = profile::cache::lookup::<Answer<T>>(ctx.app(), &p, op, &key) {
        return Ok(hit);
    }
    let scope = p.resolve(&input.scope())?;
    ctx.check_cancelled()?;
    let result = f(&p, &scope)?;
    let out = answer(&p, Some(scope), result);
    profile::cache::store(ctx.app(), &p, op, &key, &out);
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
            /// Path to an Nsight Systems export (.sqlite from `nsys export --type sqlite`) or report (.nsys-rep).
            pub path: String,
            /// CUDA device id (`deviceId` in the export); default all devices.
            #[serde(default)]
            pub device: Option<i64>,
            /// OS process id; default all processes.
            #[serde(default)]
            pub process: Option<i64>,
            /// Window start: absolute ns in the export's own timebase (as its tables use it).
            #[serde(default)]
            pub start_ns: Option<i64>,
            /// Window end: absolute ns in the export's own timebase.
            #[serde(default)]
            pub end_ns: Option<i64>,
            /// Trim to the first start and last end of the NVTX ranges with this exact name.
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
        description: "Opens an Nsight Systems export (.sqlite, or a .nsys-rep exported through a local nsys) read-only and \
reports its product and schema version, capture settings (what was traced, the command, triggers), the activity and kernel \
time range (absolute ns in the export's timebase), GPUs with name/SMs/memory/bus/UUID where recorded (\"unknown\" when the \
export lacks TARGET_INFO_GPU, never guessed), the environment (driver, CUDA), processes with their threads and devices, \
streams per device, counts of kernels, memcpys, memsets, CUDA API calls, NVTX ranges and OS runtime calls, and every table \
present. Use it first on a new profile to learn its devices, processes and time range before asking narrower questions. \
Milliseconds on small exports; about a second on a 1 GB export.",
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
        ..OpSpec::new("profile", "info")
    };

    fn run(&self, ctx: &OpContext, input: InfoInput) -> Result<Self::Output, OpError> {
        scoped(ctx, "info", &input, |p, _| profile::info::info(p))
    }
}

// ---------------------------------------------------------------------------------------------
// summary

pub struct Summary;

scoped_input! {
    /// Arguments of `summary`.
    SummaryInput {
        /// Reports to produce: any of cuda_gpu_kern_sum, cuda_api_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum,
        /// nvtx_sum, osrt_sum; default all the export supports.
        #[serde(default)]
        reports: Option<Vec<String>>,
        /// Kernel names: `short` (default; e.g. vectorized_elementwise_kernel) or `demangled` (as nsys stats groups them).
        #[serde(default)]
        names: Option<profile::summary::NameKey>,
        /// Rows per report (default 20); Time % is always over all rows.
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
        description: "Computes the `nsys stats` reports cuda_gpu_kern_sum, cuda_api_sum, cuda_gpu_mem_time_sum, \
cuda_gpu_mem_size_sum, nvtx_sum and osrt_sum with their exact semantics: Time % is a row's share of all rows of the report \
(before the limit), Total, Instances, Avg, Med (middle-pair mean), Min, Max and StdDev (sample, n-1), rounded half away from \
zero to 0.1 ns. Kernel names are short names by default or demangled names (the nsys default) with names=demangled. Filters by \
device, process and window; CPU-side reports keep the processes of the chosen device. Use it to see where GPU and CPU time \
goes at a glance. Reports the export lacks are listed with the reason. Under 0.3 s on a 56 MB export (1.3 M OS runtime rows).",
        positional: &["path"],
        intents: &[
            "nsys stats",
            "top kernels",
            "where does gpu time go",
            "cuda api summary",
            "profile summary",
            "osrt summary",
            "memcpy summary",
        ],
        example: r#"{"path": "train.sqlite", "limit": 10}"#,
        ..OpSpec::new("profile", "summary")
    };

    fn run(&self, ctx: &OpContext, input: SummaryInput) -> Result<Self::Output, OpError> {
        let options = profile::summary::SummaryOptions {
            reports: input.reports.clone(),
            names: input.names.unwrap_or_default(),
            limit: Some(limit(input.limit, 20)?),
        };
        scoped(ctx, "summary", &input, |p, s| {
            profile::summary::summary(p, s, &options)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// kernels

pub struct Kernels;

scoped_input! {
    /// Arguments of `kernels`.
    KernelsInput {
        /// Group by `short` (default) or `demangled` kernel names.
        #[serde(default)]
        names: Option<profile::summary::NameKey>,
        /// Kernel groups to list (default 20).
        #[serde(default)]
        limit: Option<usize>,
    }
}

impl Operation for Kernels {
    type Input = KernelsInput;
    type Output = Answer<profile::kernels::Kernels>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Top kernels with classes",
        summary: "Top kernels with per-device split, p50/p90/p99, launch configuration, and class (tensor-core GEMM, SIMT fp32 GEMM, attention, ...).",
        description: "Lists the kernels that take the most GPU time, grouped by short or demangled name, each with its share, \
count, Avg/Med/Min/Max/StdDev and p50/p90/p99 durations, the split per device, the most common launch configuration \
(grid, block, registers per thread, static and dynamic shared memory), and a class read from the demangled name and launch \
configuration: gemm_tensor_core, gemm_simt_fp32 (fp32 GEMM on CUDA cores, e.g. sm80_xmma_..._ffma_...), gemm_unknown, \
attention, elementwise, reduction, copy, communication or other, with precision and the evidence. Also the time per class and, \
per device, the count and time share of kernels shorter than 5 us. Use it to find what to optimize and whether GEMMs use \
tensor cores. Milliseconds to a second.",
        positional: &["path"],
        intents: &[
            "top kernels",
            "which kernels are slow",
            "are gemms using tensor cores",
            "kernel classes",
            "kernel launch configuration",
            "tiny kernels",
        ],
        example: r#"{"path": "train.sqlite", "limit": 10, "names": "demangled"}"#,
        ..OpSpec::new("profile", "kernels")
    };

    fn run(&self, ctx: &OpContext, input: KernelsInput) -> Result<Self::Output, OpError> {
        let l = limit(input.limit, 20)?;
        let names = input.names.unwrap_or_default();
        scoped(ctx, "kernels", &input, |p, s| {
            profile::kernels::kernels(p, s, names, l)
        })
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
        description: "Computes how busy each GPU is as the union of kernel intervals (never a sum of durations, which exceeds \
100 % with concurrent streams), and beside it the union of kernels, memcpys and memsets, over named windows: span (first to \
last kernel of the device), steps (first to last NVTX step range of the device's process), steady (second step to last step) \
and the caller's trim. Each window reports busy ns, busy %, idle ns. Also the kernel-time sum and concurrency, streams, and the \
span cut into equal chunks with their busy % and the coalesced stretches under the threshold (like nsys analyze gpu_time_util). \
Use it to answer \"is my GPU busy?\" with the window stated. Milliseconds.",
        positional: &["path"],
        intents: &[
            "gpu utilization",
            "is the gpu busy",
            "busy percent",
            "idle gpu",
            "steady state utilization",
            "gpu_time_util",
        ],
        example: r#"{"path": "train.sqlite", "device": 0}"#,
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
        /// Gaps to list per device, largest first (default 20); totals always count all.
        #[serde(default)]
        limit: Option<usize>,
    }
}

impl Operation for Gaps {
    type Input = GapsInput;
    type Output = Answer<profile::gaps::Gaps>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU idle gaps with CPU attribution",
        summary: "Idle gaps per device, largest first, each with what the launching CPU thread was doing (sync, module loading, sleep, NVTX range).",
        description: "Finds the stretches where a GPU ran no kernel for longer than min_gap_ms (default 1 ms) and totals them \
per window (span: between kernel islands; steps, steady, trim: the window minus the kernel union, so leading and trailing idle \
time inside the window counts). Each listed gap, largest first, names the kernels before and after, the step it falls in, the \
thread that launched the next kernel and what that thread did meanwhile: CUDA API calls (synchronizations, copies, lazy module \
loading, allocation), OS runtime calls (sleeps, polls, I/O) and NVTX ranges, with a cause and one sentence of evidence. Use it to \
see why the GPU starves (host-bound steps, host syncs, first-step warm-up). Milliseconds; streams OS runtime rows, so a 1 GB \
export takes seconds.",
        positional: &["path"],
        intents: &[
            "gpu idle gaps",
            "why is the gpu idle",
            "gpu starvation",
            "bubbles in the timeline",
            "host bound",
            "what is the cpu doing",
        ],
        example: r#"{"path": "train.sqlite", "min_gap_ms": 1.0, "limit": 10}"#,
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
        let l = limit(input.limit, 20)?;
        scoped(ctx, "gaps", &input, |p, s| {
            profile::gaps::gaps(p, s, (ms * 1e6).round() as i64, l)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// memory

pub struct Memory;

scoped_input! {
    /// Arguments of `memory`.
    MemoryInput {
        /// Flagged copies to list (default 10).
        #[serde(default)]
        limit: Option<usize>,
    }
}

impl Operation for Memory {
    type Input = MemoryInput;
    type Output = Answer<profile::memory::Memory>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Memory transfers and usage",
        summary: "Memcpy/memset by direction and memory kind, achieved bandwidth, pageable async copies, blocking copy APIs, GPU memory over time.",
        description: "Breaks down memcpy and memset traffic by direction (Host-to-Device, Device-to-Host, Device-to-Device, \
Peer-to-Peer, labels from the export's ENUM_CUDA_MEMCPY_OPER) and by source/destination memory kind (Pageable, Pinned, Device, \
... from the export's ENUM_CUDA_MEM_KIND, never assumed): count, bytes, time, achieved and peak bandwidth in GB/s. Flags async \
copies from or to pageable memory (the nsys cuda_memcpy_async rule: an Async API with a pageable side; they are staged and \
serialize), says how many ran inside the steps, counts blocking cudaMemcpy/cudaMemset API calls, and shows GPU memory usage \
over time with its peak when the export recorded it. Use it for data-movement questions (pinned memory, H2D in the loop). \
Milliseconds.",
        positional: &["path"],
        intents: &[
            "memcpy breakdown",
            "pageable memory",
            "pinned memory",
            "h2d transfers",
            "memory bandwidth of copies",
            "gpu memory usage",
        ],
        example: r#"{"path": "train.sqlite"}"#,
        ..OpSpec::new("profile", "memory")
    };

    fn run(&self, ctx: &OpContext, input: MemoryInput) -> Result<Self::Output, OpError> {
        let l = limit(input.limit, 10)?;
        scoped(ctx, "memory", &input, |p, s| {
            profile::memory::memory(p, s, l)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// nvtx

pub struct Nvtx;

scoped_input! {
    /// Arguments of `nvtx`.
    NvtxInput {
        /// Range names to list, largest CPU time first (default 20).
        #[serde(default)]
        limit: Option<usize>,
        /// Depth of the per-thread range tree (default 4).
        #[serde(default)]
        max_depth: Option<u32>,
        /// Children kept per tree node, largest first (default 8).
        #[serde(default)]
        max_children: Option<usize>,
    }
}

impl Operation for Nvtx {
    type Input = NvtxInput;
    type Output = Answer<profile::nvtx::Nvtx>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "NVTX ranges with GPU time",
        summary: "NVTX range tree per thread and GPU time projected onto each range name (process-wide attribution, same-thread beside it).",
        description: "Reads NVTX push/pop and start/end ranges and projects GPU work onto them: a kernel belongs to a range when \
its launching CUDA call (matched by correlationId and process) lies inside the range and comes from any thread of the same \
process (PyTorch launches backward kernels from an autograd thread that pushes no ranges); the same-thread figure (the nsys \
rule) is reported beside it. Per range name: instances, CPU time, GPU-projected time (union of the attributed kernels), kernel \
time and kernels launched; per thread a range tree (aggregated by path, PyTorch op_id/seq annotations stripped); totals of \
attributed kernels and the deepest nesting. An interval sweep, linear in events. Use it to see which code region owns GPU \
time. Milliseconds.",
        positional: &["path"],
        intents: &[
            "nvtx ranges",
            "which code region takes gpu time",
            "time per layer",
            "nvtx tree",
            "forward vs backward time",
            "range attribution",
        ],
        example: r#"{"path": "train.sqlite", "limit": 10}"#,
        ..OpSpec::new("profile", "nvtx")
    };

    fn run(&self, ctx: &OpContext, input: NvtxInput) -> Result<Self::Output, OpError> {
        let options = profile::nvtx::NvtxOptions {
            limit: limit(input.limit, 20)?,
            max_depth: input.max_depth.unwrap_or(4).clamp(1, 64),
            max_children: input.max_children.unwrap_or(8).clamp(1, 1000),
        };
        scoped(ctx, "nvtx", &input, |p, s| {
            profile::nvtx::nvtx(p, s, &options)
        })
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
        /// Steps to list in full (default 20); statistics always use all steps.
        #[serde(default)]
        limit: Option<usize>,
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
        ..OpSpec::new("profile", "iterations")
    };

    fn run(&self, ctx: &OpContext, input: IterationsInput) -> Result<Self::Output, OpError> {
        let l = limit(input.limit, 20)?;
        let marker = input.marker.clone();
        scoped(ctx, "iterations", &input, |p, s| {
            profile::iterations::iterations(p, s, marker.as_deref(), l)
        })
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
            "communication breakdown",
            "collectives",
            "rank imbalance",
            "bus bandwidth",
        ],
        example: r#"{"path": "ddp.sqlite"}"#,
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
            "is nccl overlapped",
            "exposed communication",
            "compute communication overlap",
        ],
        example: r#"{"path": "ddp.sqlite", "device": 0}"#,
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
    RulesInput {}
}

impl Operation for Rules {
    type Input = RulesInput;
    type Output = Answer<profile::rules::Rules>;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Profile findings (expert rules)",
        summary: "Findings in the style of nsys analyze with severity from the share of time at stake: starvation, host-bound steps, syncs, pageable copies, fp32 SIMT GEMMs, exposed NCCL, tiny kernels, variance.",
        description: "Runs expert rules over each device's analysis window (the steady window when there are steps, else the \
span of its GPU operations) and returns findings {id, title, severity info|low|medium|high|critical, time_at_stake_ns, \
share_pct, evidence, why, fix, verify}. Severity comes from the share of the window at stake (under 1 % info, 1 % low, 5 % \
medium, 15 % high, 40 % critical), never from the mere presence of a pattern. Rules: GPU starvation (idle gaps over 1 ms, \
with what the launching thread did), host-bound steps (CPU step time well above GPU time), low utilization, async memcpy \
with pageable memory, synchronous memcpy/memset, host synchronization APIs, a host sync every iteration, launch-bound runs \
of kernels under 5 us, fp32 GEMMs on CUDA cores where TF32/BF16 tensor cores could run them, communication not overlapped \
with compute, heavy host-to-device traffic, one dominating kernel, step-time variance, first-step overhead. Rules without \
evidence report nothing (`checked` says why) and the verdict says so when nothing is significant. Use it to triage a profile. \
Well under a second on small exports; seconds on 1 GB.",
        positional: &["path"],
        intents: &[
            "why is my training slow",
            "what is wrong with this profile",
            "find bottlenecks",
            "nsys analyze",
            "expert rules",
            "triage profile",
        ],
        example: r#"{"path": "train.sqlite"}"#,
        ..OpSpec::new("profile", "rules")
    };

    fn run(&self, ctx: &OpContext, input: RulesInput) -> Result<Self::Output, OpError> {
        scoped(ctx, "rules", &input, profile::rules::run)
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
        /// Matches to list in time order (default 20); counts and per-name totals cover all.
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
            "when was cudaMalloc called",
            "grep the trace",
        ],
        example: r#"{"path": "train.sqlite", "pattern": "gemm", "kinds": ["kernel"], "limit": 10}"#,
        ..OpSpec::new("profile", "search")
    };

    fn run(&self, ctx: &OpContext, input: SearchInput) -> Result<Self::Output, OpError> {
        let l = limit(input.limit, 20)?;
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
        scoped(ctx, "search", &input, |p, s| {
            profile::search::search(p, s, &pattern, &kinds, l)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// timeline

pub struct Timeline;

scoped_input! {
    /// Arguments of `timeline`.
    TimelineInput {
        /// Entries per track after merging (default 40).
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
        ..OpSpec::new("profile", "timeline")
    };

    fn run(&self, ctx: &OpContext, input: TimelineInput) -> Result<Self::Output, OpError> {
        let options = profile::timeline::TimelineOptions {
            limit: limit(input.limit, 40)?,
            merge_gap_ns: input.merge_gap_ns.unwrap_or(10_000).max(0),
        };
        scoped(ctx, "timeline", &input, |p, s| {
            profile::timeline::timeline(p, s, &options)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// compare

pub struct Compare;

/// Arguments of `compare`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareInput {
    /// The baseline export (.sqlite or .nsys-rep), or the run id of an aisp_profile_nsys capture.
    pub before: String,
    /// The export after the change, or the run id of an aisp_profile_nsys capture.
    pub after: String,
    /// Kernels and ranges to list in each delta list (default 10).
    #[serde(default)]
    pub limit: Option<usize>,
}

impl Operation for Compare {
    type Input = CompareInput;
    type Output = profile::compare::Compare;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Compare two profiles",
        summary: "Before/after deltas of kernels, ranges, utilization, overlap, memory traffic and step time, with a verdict per unit of work (step, call, second of window) and comparability.",
        description: "Compares two captures of the same workload, normalised per unit of work: median step time after \
the first step (NVTX steps, 3+ on both sides), time per call of identical launches (same kernel, grid, block) and work per \
second of capture window; `basis` and `evidence` say which decided. Verdict: improved/regressed only when the per-unit \
evidence says so, neutral, inconclusive (evidence disagrees, e.g. windows cut from different phases) or not_comparable \
(different GPUs or workloads), with `verdict_reason`. Also per-kernel deltas (total and per call), per-NVTX-range CPU/GPU \
deltas, busy % and overlap per device, memory traffic, findings resolved or new, and comparability (same_gpus is null when \
either side does not record its GPUs). Each side is a path or an aisp_profile_nsys run id. Use it after an optimization.",
        positional: &["before", "after"],
        intents: &[
            "compare profiles",
            "did my change help",
            "before and after",
            "regression between runs",
            "diff two traces",
        ],
        example: r#"{"before": "baseline.sqlite", "after": "optimized.sqlite"}"#,
        ..OpSpec::new("profile", "compare")
    };

    fn run(&self, ctx: &OpContext, input: CompareInput) -> Result<Self::Output, OpError> {
        let l = limit(input.limit, 10)?;
        let before = open_profile(ctx, &input.before)?;
        let after = open_profile(ctx, &input.after)?;
        ctx.check_cancelled()?;
        Ok(profile::compare::compare(&before, &after, l)?)
    }
}

// ---------------------------------------------------------------------------------------------
// export

pub struct Export;

scoped_input! {
    /// Arguments of `export`.
    ExportInput {
        /// `perfetto` (Chrome/Perfetto trace JSON), `csv` (one report) or `html` (self-contained report).
        format: profile::export::Format,
        /// File to write; default `$AISP_HOME/cache/exports/<name>.<ext>`.
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
        summary: "Writes a Perfetto/Chrome trace JSON, a CSV of any report, or a self-contained HTML report of a profile.",
        description: "Exports a profile (or its scope: device, process, window) to a file: `perfetto` writes Chrome/Perfetto \
trace JSON with GPUs as processes and streams as tracks (kernels, memcpys, memsets), CPU threads with NVTX ranges and CUDA API \
calls, and flow arrows from each launch to its kernel, streamed to disk, loadable in ui.perfetto.dev; `csv` writes one report \
with all its rows (the kernel trace or any nsys stats report); `html` writes a self-contained report (summary, findings, \
utilization per device with a chunk chart, top kernels) that opens offline. Refuses to overwrite an existing file unless \
overwrite is true. Returns the path, size and record count. Seconds on large profiles.",
        positional: &["path"],
        intents: &[
            "export to perfetto",
            "chrome trace",
            "export csv",
            "html report",
            "open in perfetto",
            "save report",
        ],
        example: r#"{"path": "train.sqlite", "format": "html", "output": "train_report.html"}"#,
        hints: crate::registry::Hints {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        ..OpSpec::new("profile", "export")
    };

    fn run(&self, ctx: &OpContext, input: ExportInput) -> Result<Self::Output, OpError> {
        let p = open_profile(ctx, &input.path)?;
        let scope = p.resolve(&input.scope())?;
        let output = match &input.output {
            Some(o) if !o.trim().is_empty() => PathBuf::from(o),
            _ => profile::export::default_output(
                &ctx.app().config.cache_dir(),
                p.source(),
                input.format,
                input.report.as_deref(),
            ),
        };
        let done = profile::export::export(
            &p,
            &scope,
            input.format,
            &output,
            input.report.as_deref(),
            input.names.unwrap_or_default(),
            input.overwrite.unwrap_or(false),
        )?;
        Ok(answer(&p, Some(scope), done))
    }
}
