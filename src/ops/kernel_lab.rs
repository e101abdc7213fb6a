//! `aisp_benchmark_kernel`: the kernel lab as an operation. Thin: validation
//! and compilation come from `bench::lab`, the GPU work runs in a worker
//! process (`bench::lab::runner`), and this module turns what the workers
//! report into result rows (stored in `benchmark_results`, so history,
//! leaderboards and `aisp_benchmark_compare` see them) and an answer.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;

use super::errors::BenchErrorExt;
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{Hints, OpSpec, Operation};
use aisp_hw::bench::lab::Comparison;
use aisp_hw::bench::lab::compile::{self, CompileReport, Diagnostic};
use aisp_hw::bench::lab::runner::{self, Outcome};
use aisp_hw::bench::lab::spec::{LabSpec, Reference, Resolved, RoofChoice};
use aisp_hw::bench::lab::worker::{self, ItemResult, Job, Resources};
use aisp_hw::bench::lesson::{Metric, Role, Status, VariantResult, Work};
use aisp_hw::bench::record::{self, RunMeta};
use aisp_hw::bench::roofs::Roof;
use aisp_hw::bench::{BenchError, fresh_seed, stats};

use super::kernel_lab_ncu::{self, NcuFindings};

pub struct KernelLab;

/// One kernel at one size.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct KernelRow {
    pub kernel: String,
    /// reference or candidate.
    pub role: String,
    /// ok (checked and timed), incorrect, compile_error or failed.
    pub status: String,
    pub failure: Option<String>,
    /// Compile errors with line numbers (and NVRTC's log when it failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile: Option<CompileReport>,
    /// Outputs against the reference (the reference: a built-in op against float64 CPU).
    pub checks: Vec<Comparison>,
    pub median_ms: Option<f64>,
    pub p10_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub cv_pct: Option<f64>,
    pub repetitions: u32,
    pub gb_per_s: Option<f64>,
    pub tflop_per_s: Option<f64>,
    pub pct_of_roof: Option<f64>,
    /// median(reference) / median(this), with its 95% bootstrap interval.
    pub speedup: Option<f64>,
    pub speedup_ci: Option<[f64; 2]>,
    pub resources: Option<Resources>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SizeRows {
    pub sizes: BTreeMap<String, i64>,
    pub bytes: f64,
    pub flops: Option<f64>,
    /// The roof pct_of_roof uses: kind, value (GB/s or TFLOP/s) and how it was measured.
    pub roof: Option<String>,
    pub kernels: Vec<KernelRow>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct KernelOutput {
    /// Store key (aisp_benchmark_history, aisp_benchmark_compare with `target`).
    pub run_id: Option<String>,
    /// benchmark_results target of these rows.
    pub target: String,
    pub device: Option<String>,
    pub results: Vec<SizeRows>,
    /// The fastest correct candidate at the last size.
    pub fastest: Option<String>,
    pub saved: bool,
    pub notes: Vec<String>,
    /// With `ncu`: Nsight Compute on `fastest`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ncu: Option<NcuFindings>,
}

fn invalid(msg: String) -> OpError {
    OpError::invalid_input(
        msg,
        "Fix that field; the tool's example shows a complete call (aisp schemas shows the input schema).",
    )
}

fn row_status(r: &ItemResult) -> &'static str {
    if r.compile.as_ref().is_some_and(|c| !c.ok) {
        "compile_error"
    } else if r.passed() && !r.samples_ms.is_empty() {
        "ok"
    } else if r
        .failure
        .as_deref()
        .is_some_and(|f| f.starts_with("incorrect"))
    {
        "incorrect"
    } else {
        "failed"
    }
}

fn roof_for(out: &Outcome, kind: RoofChoice) -> Option<&Roof> {
    match kind {
        RoofChoice::Memory => out.roofs.memory.as_ref(),
        RoofChoice::Fp32 => out.roofs.fp32.as_ref(),
        other => out.roofs.tensor.get(other.as_str()),
    }
}

fn compile_only(spec: &LabSpec) -> Result<KernelOutput, OpError> {
    let arch = spec.arch.clone().unwrap_or_else(|| "sm_90".into());
    if aisp_hw::bench::nvrtc::parse_arch(&arch).is_none() {
        return Err(invalid(format!("arch `{arch}` is not sm_XY (e.g. sm_90)")));
    }
    let mut kernels = Vec::new();
    for k in &spec.kernels {
        let report = match compile::compile(k, &arch, None) {
            Ok(Ok(b)) => b.report,
            Ok(Err(r)) => r,
            Err(e) => return Err(e.into_op_error("aisp_benchmark_kernel")),
        };
        kernels.push(KernelRow {
            kernel: k.label().to_string(),
            role: if k.label() == spec.reference {
                "reference"
            } else {
                "candidate"
            }
            .into(),
            status: if report.ok {
                "compiled"
            } else {
                "compile_error"
            }
            .into(),
            failure: (!report.ok).then(|| first_errors(&report.errors)),
            compile: Some(report),
            checks: Vec::new(),
            median_ms: None,
            p10_ms: None,
            p90_ms: None,
            cv_pct: None,
            repetitions: 0,
            gb_per_s: None,
            tflop_per_s: None,
            pct_of_roof: None,
            speedup: None,
            speedup_ci: None,
            resources: None,
        });
    }
    Ok(KernelOutput {
        run_id: None,
        target: spec.target(),
        device: None,
        results: vec![SizeRows {
            sizes: BTreeMap::new(),
            bytes: 0.0,
            flops: None,
            roof: None,
            kernels,
        }],
        fastest: None,
        saved: false,
        ncu: None,
        notes: vec![format!(
            "compile_only: compiled for {arch} with NVRTC; nothing was run."
        )],
    })
}

fn first_errors(errors: &[Diagnostic]) -> String {
    let list: Vec<String> = errors
        .iter()
        .take(3)
        .map(|d| format!("line {}: {}", d.line, d.message))
        .collect();
    format!("compile error: {}", list.join("; "))
}

/// Run `spec` (already validated) and answer; shared with the LLM loop.
pub fn run_lab(ctx: &OpContext, spec: &LabSpec) -> Result<KernelOutput, OpError> {
    let resolved = spec.validate().map_err(invalid)?;
    let ncu_sections = spec.ncu.as_ref().and_then(|n| n.sections());
    if let Some(s) = &ncu_sections {
        kernel_lab_ncu::validate(s).map_err(invalid)?;
        if spec.compile_only {
            return Err(invalid("ncu profiles a run: drop compile_only".into()));
        }
    }
    if spec.compile_only {
        return compile_only(spec);
    }
    // AISP_KERNEL_LAB_WORKER names another worker program (the tests' fake,
    // which needs neither a GPU nor NVRTC); the real worker needs both.
    if std::env::var_os(runner::WORKER_ENV).is_none_or(|v| v.is_empty()) {
        crate::ops::benchmark::require_gpu(ctx)?;
        if !aisp_hw::bench::libs::nvrtc_available() {
            return Err(BenchError::NoNvrtc.into_op_error(ctx.tool()));
        }
    }
    let budget = spec.time_budget_s.unwrap_or(0.5);
    let limit = spec.time_limit_s.unwrap_or(30.0);
    if !(0.05..=30.0).contains(&budget) || !(2.0..=600.0).contains(&limit) {
        return Err(invalid(
            "time_budget_s must be 0.05..30 and time_limit_s 2..600".into(),
        ));
    }
    let queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
    let seed = fresh_seed();
    let job = Job {
        spec: spec.clone(),
        seed,
        time_budget_s: budget,
        device: spec.device.unwrap_or(0) as usize,
        cache_root: ctx.app().config.cache_dir(),
        start_at: 0,
        measure_roofs: true,
        profile: None,
    };
    let cancelled = || ctx.is_cancelled();
    let progress = |i: usize, n: usize, label: &str| {
        ctx.progress(
            i as f64,
            Some(n as f64),
            format!("{label} (compile, check, time)"),
        )
    };
    let opts = runner::Options {
        time_limit: Duration::from_secs_f64(limit),
        cancelled: &cancelled,
        progress: &progress,
    };
    let created_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut out = runner::run(job, &opts).map_err(|e| match e {
        BenchError::Cancelled => ctx.stop_error(),
        other => other.into_op_error(ctx.tool()),
    })?;
    let mut notes = Vec::new();
    if out.workers_started > 1 {
        notes.push(format!(
            "{} worker processes were used: a kernel that crashed, hung or hit a CUDA error ends its worker, and the next kernels ran in a fresh one.",
            out.workers_started
        ));
    }
    let store = ctx.app().store().ok();
    if let (Some(store), Some(dev)) = (store, &out.device)
        && let Ok(stored) = record::latest_roofs(store, &dev.uuid)
    {
        for (kind, value, when) in stored {
            if matches!(kind.as_str(), "tf32" | "bf16" | "fp16" | "fp8") {
                out.roofs.tensor.insert(
                    kind,
                    Roof {
                        value,
                        how: format!("stored by an earlier aisp_hw_* run ({when})"),
                    },
                );
            }
        }
    }
    // The ncu capture below takes the GPU queue itself.
    drop(queue);
    let (results, rows) = build(spec, &resolved, &out, &mut notes);
    let mut saved = false;
    let mut run_id = None;
    if let Some(dev) = &out.device {
        let meta = RunMeta {
            run_id: record::new_run_id(),
            created_at,
            tool: ctx.tool().to_string(),
            device: dev.clone(),
            driver_version: ctx.app().gpu().driver_version.clone(),
            cuda_driver_version: out.cuda_driver.clone(),
            nvrtc_version: out.nvrtc.clone(),
            cublas_version: out.cublas.clone(),
            host: record::hostname(),
            seed,
            size_class: "custom".into(),
        };
        let mut all = Vec::new();
        if let Some(m) = &out.roofs.memory {
            all.push(record::roof_row("memory", m.value, &m.how, Metric::GbPerS));
        }
        if let Some(f) = &out.roofs.fp32 {
            all.push(record::roof_row("fp32", f.value, &f.how, Metric::TflopPerS));
        }
        all.extend(rows);
        match ctx.app().store() {
            Ok(s) => match record::insert(s, &meta, &all) {
                Ok(()) => saved = true,
                Err(e) => notes.push(format!("results were not saved to the store: {e}")),
            },
            Err(e) => notes.push(format!(
                "results were not saved to the store: {}",
                e.message
            )),
        }
        run_id = Some(meta.run_id);
    }
    let fastest = results.last().and_then(|s| {
        s.kernels
            .iter()
            .filter(|k| k.role == "candidate" && k.status == "ok")
            .min_by(|a, b| {
                a.median_ms
                    .partial_cmp(&b.median_ms)
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
            .map(|k| k.kernel.clone())
    });
    let ncu = match (&ncu_sections, &fastest) {
        (None, _) => None,
        (Some(s), Some(best)) => Some(kernel_lab_ncu::profile(ctx, spec, best, s.clone())?),
        (Some(_), None) => Some(NcuFindings {
            status: "unavailable".into(),
            why: Some("no candidate was correct at the last size, so none was profiled".into()),
            ..Default::default()
        }),
    };
    Ok(KernelOutput {
        run_id,
        target: spec.target(),
        device: out
            .device
            .as_ref()
            .map(|d| format!("{} (sm_{}{})", d.name, d.cc_major, d.cc_minor)),
        results,
        fastest,
        saved,
        notes,
        ncu,
    })
}

fn size_label(vars: &BTreeMap<String, i64>) -> String {
    vars.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn build(
    spec: &LabSpec,
    resolved: &[Resolved],
    out: &Outcome,
    notes: &mut Vec<String>,
) -> (Vec<SizeRows>, Vec<VariantResult>) {
    let per = worker::items_per_size(spec);
    let target = spec.target();
    let mut sizes = Vec::new();
    let mut rows = Vec::new();
    let mut missing_roof = None;
    for (s, r) in resolved.iter().enumerate() {
        // The metric is the roof's, so pct_of_roof never divides GB/s by
        // TFLOP/s (flops given with roof memory: GB/s against the memory roof).
        let metric = if r.roof == RoofChoice::Memory {
            Metric::GbPerS
        } else {
            Metric::TflopPerS
        };
        let work = Work {
            bytes: r.bytes,
            flops: r.flops.unwrap_or(0.0),
        };
        let roof = roof_for(out, r.roof);
        if roof.is_none() {
            missing_roof = Some(r.roof);
        }
        let label = size_label(&r.vars);
        let ref_samples = out.items[s * per]
            .as_ref()
            .filter(|i| !i.samples_ms.is_empty())
            .map(|i| i.samples_ms.clone());
        let mut kernels = Vec::new();
        for k in 0..per {
            let Some(item) = &out.items[s * per + k] else {
                continue;
            };
            let variant = if resolved.len() > 1 {
                format!("{}@{label}", item.kernel)
            } else {
                item.kernel.clone()
            };
            let role = if item.reference {
                Role::Baseline
            } else {
                Role::Optimized
            };
            let mut vr = VariantResult::new(&target, &variant, role, metric, &label);
            let status = row_status(item);
            vr.verified = item.passed();
            vr.check = None;
            if status == "ok" {
                vr.set_samples(
                    item.samples_ms.clone(),
                    metric,
                    work,
                    roof.map(|x| (x.value, format!("{}: {}", r.roof.as_str(), x.how))),
                    None,
                );
            } else {
                vr.status = Status::Failed;
                vr.failure = item.failure.clone();
            }
            let mut details = serde_json::Map::new();
            details.insert(
                "checks".into(),
                serde_json::to_value(&item.checks).unwrap_or_default(),
            );
            details.insert(
                "resources".into(),
                serde_json::to_value(&item.resources).unwrap_or_default(),
            );
            details.insert(
                "sizes".into(),
                serde_json::to_value(&r.vars).unwrap_or_default(),
            );
            vr.details = details;
            let speedup = match (&ref_samples, item.reference, status == "ok") {
                (Some(base), false, true) => stats::speedup_ci(base, &item.samples_ms, 2000, 0.95),
                _ => None,
            };
            let secs = vr.median_ms.map(|m| m / 1000.0);
            kernels.push(KernelRow {
                kernel: item.kernel.clone(),
                role: if item.reference {
                    "reference"
                } else {
                    "candidate"
                }
                .into(),
                status: status.into(),
                failure: item.failure.clone(),
                compile: item
                    .compile
                    .clone()
                    .filter(|c| !c.ok || !c.warnings.is_empty()),
                checks: item.checks.clone(),
                median_ms: vr.median_ms,
                p10_ms: vr.p10_ms,
                p90_ms: vr.p90_ms,
                cv_pct: vr.cv_pct,
                repetitions: vr.repetitions,
                gb_per_s: secs.filter(|_| r.bytes > 0.0).map(|t| r.bytes / t / 1e9),
                tflop_per_s: secs.and_then(|t| r.flops.map(|f| f / t / 1e12)),
                pct_of_roof: vr.pct_of_roof,
                speedup: speedup.as_ref().map(|c| c.ratio),
                speedup_ci: speedup.as_ref().map(|c| [c.ci_low, c.ci_high]),
                resources: item.resources.clone(),
            });
            rows.push(vr);
        }
        sizes.push(SizeRows {
            sizes: r.vars.clone(),
            bytes: r.bytes,
            flops: r.flops,
            roof: roof.map(|x| format!("{} {:.1} ({})", r.roof.as_str(), x.value, x.how)),
            kernels,
        });
    }
    if let Some(kind) = missing_roof {
        notes.push(format!(
            "No {} roof is known for this GPU, so pct_of_roof is empty: run aisp_hw_roofline once (it stores the tensor-core roofs).",
            kind.as_str()
        ));
    }
    if matches!(spec.reference(), Ok(Reference::Kernel(_))) {
        notes.push("The reference is a kernel you supplied: candidates are checked against its outputs, which are taken as correct.".into());
    }
    (sizes, rows)
}

impl Operation for KernelLab {
    type Input = LabSpec;
    type Output = KernelOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Kernel lab: check and time CUDA kernels",
        summary: "Compiles CUDA C++ kernels with NVRTC, checks their outputs against a reference, times them and reports speedup, GB/s or TFLOP/s, % of roof, registers and occupancy.",
        description: "Is a CUDA kernel right and fast? Compiles each kernel (errors with line numbers), runs the reference and the candidates on the same random inputs, compares every out buffer (atol + rtol*|ref|; defaults f32 1e-4/1e-4, f16 1e-3/1e-2, bf16 1e-2/2e-2, ints exact; first bad index), then times the correct ones (CUDA events, L2 flushed): median, p10/p90, GB/s, TFLOP/s, % of the measured roof, speedup vs the reference with a 95% interval, registers, shared memory, occupancy. The reference is one of your kernels or a built-in op reading the in buffers in arg order and writing the first out buffer (row-major, rows = all dims but the last): copy, transpose (2-D), reduce_sum, softmax, layernorm (per row, f32, eps 1e-5, no affine), gemm (C[M,N] = A[M,K] @ B[K,N], cuBLAS, FP32 compute, no TF32). args are the kernel's parameters in order: buffers (shape, role in|out|inout) or scalars (value); sizes, shapes, values, grid, block, bytes and flops take expressions of the names in `sizes` (+ - * / % **, cdiv, min, max). `ncu: true` then profiles the fastest correct one under Nsight Compute (SOL %, occupancy, DRAM bytes, stalls, advice). Kernels run in a child process with a time limit: a crash, hang or illegal address is that kernel's failure. Results are stored (target kernel_<name>) for aisp_benchmark_compare. compile_only needs no GPU. Needs execution allowed.",
        hints: Hints::RUNS_COMMAND,
        needs_gpu: false,
        long_running: true,
        executes_commands: true,
        intents: &[
            "is my cuda kernel correct and fast",
            "benchmark my kernel",
            "test a cuda kernel",
            "compile my kernel",
            "kernel speedup vs cublas",
            "write a faster kernel",
        ],
        example: r#"{"name":"transpose","kernels":[{"name":"naive","entry":"tr","source":"extern \"C\" __global__ void tr(const float* x, float* y, int R, int C) { int c = blockIdx.x*32+threadIdx.x, r = blockIdx.y*32+threadIdx.y; if (r < R && c < C) y[(long)c*R+r] = x[(long)r*C+c]; }","launch":{"grid":["cdiv(C,32)","cdiv(R,32)"],"block":[32,32]}}],"reference":"transpose","args":[{"name":"x","dtype":"f32","shape":["R","C"]},{"name":"y","dtype":"f32","shape":["C","R"],"role":"out"},{"name":"R","dtype":"i32","value":"R"},{"name":"C","dtype":"i32","value":"C"}],"sizes":[{"R":4096,"C":4096}]}"#,
        ..OpSpec::new("benchmark", "kernel")
    };

    fn run(&self, ctx: &OpContext, input: LabSpec) -> Result<KernelOutput, OpError> {
        run_lab(ctx, &input)
    }
}

// ---------------------------------------------------------------- the LLM loop

pub struct KernelImprove;

#[derive(Debug, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImproveInput {
    /// An aisp_benchmark_kernel call with exactly one candidate: the kernel to improve.
    pub lab: LabSpec,
    /// Rounds of asking the model (default 3).
    #[serde(default)]
    #[schemars(range(min = 1, max = 8))]
    pub rounds: Option<u32>,
    /// What to aim for, e.g. "coalesce the writes" (optional).
    #[serde(default)]
    #[schemars(length(max = 2000))]
    pub goal: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Round {
    pub round: u32,
    /// The model's own sentence about what it changed.
    pub change: String,
    /// ok, incorrect, compile_error, failed, or no_code (the reply had no code block).
    pub status: String,
    pub failure: Option<String>,
    pub median_ms: Option<f64>,
    /// The best kernel's median in the same run.
    pub best_median_ms: Option<f64>,
    /// Kept as the new best (correct and faster, 95% interval above 1).
    pub kept: bool,
    pub run_id: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ImproveOutput {
    pub target: String,
    pub model: Option<String>,
    pub start_median_ms: Option<f64>,
    pub best_median_ms: Option<f64>,
    /// start / best: above 1 means the loop found a faster correct kernel.
    pub speedup: Option<f64>,
    /// Round whose kernel is best (0: the starting kernel).
    pub best_round: u32,
    pub best_source: String,
    pub rounds: Vec<Round>,
    /// What the kept changes were, in order.
    pub explanation: String,
    /// With lab.ncu: Nsight Compute on the best kernel (also sent to the model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_ncu: Option<NcuFindings>,
}

fn describe(row: &KernelRow, reference_median: Option<f64>) -> String {
    let mut parts = vec![format!("status {}", row.status)];
    if let Some(f) = &row.failure {
        parts.push(format!("failure: {f}"));
    }
    if let Some(m) = row.median_ms {
        parts.push(format!(
            "median {m:.4} ms (p10 {:.4}, p90 {:.4})",
            row.p10_ms.unwrap_or(m),
            row.p90_ms.unwrap_or(m)
        ));
    }
    if let Some(g) = row.gb_per_s {
        parts.push(format!("{g:.0} GB/s"));
    }
    if let Some(t) = row.tflop_per_s {
        parts.push(format!("{t:.2} TFLOP/s"));
    }
    if let Some(p) = row.pct_of_roof {
        parts.push(format!("{p:.1}% of the measured roof"));
    }
    if let (Some(r), Some(m)) = (reference_median, row.median_ms) {
        parts.push(format!("reference {r:.4} ms (speedup {:.2}x)", r / m));
    }
    if let Some(r) = &row.resources {
        parts.push(format!(
            "{} registers/thread, {} B static + {} B dynamic shared, {} B spills, theoretical occupancy {:.0}%",
            r.registers_per_thread, r.static_shared_bytes, r.dynamic_shared_bytes, r.local_bytes_per_thread, r.theoretical_occupancy_pct
        ));
    }
    parts.join("; ")
}

fn row_of<'a>(out: &'a KernelOutput, label: &str) -> Option<&'a KernelRow> {
    out.results
        .last()?
        .kernels
        .iter()
        .find(|k| k.kernel == label)
}

impl Operation for KernelImprove {
    type Input = ImproveInput;
    type Output = ImproveOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Improve a CUDA kernel with an LLM",
        summary: "Asks the configured LLM for faster variants of a kernel for N rounds, checking and timing each with aisp_benchmark_kernel; keeps the best correct one.",
        description: "Give the same arguments as aisp_benchmark_kernel (in `lab`) with one candidate. Each round sends the model the best kernel's source and its measurements (time, GB/s or TFLOP/s, % of roof, registers, occupancy, failures; Nsight Compute findings with lab.ncu), compiles, checks and times its answer side by side with the best, and keeps it only if it is correct and faster (95% interval above 1). Returns every round (the model's stated change, status, medians, kept), the best source and the overall speedup. Needs an LLM endpoint (aisp_ai_status), a GPU and execution allowed.",
        hints: Hints::RUNS_COMMAND,
        needs_gpu: false,
        long_running: true,
        executes_commands: true,
        intents: &[
            "make my kernel faster with an llm",
            "optimize this cuda kernel automatically",
            "llm kernel optimization loop",
        ],
        example: r#"{"lab": {"name": "tr", "kernels": [{"entry": "tr", "source": "...", "launch": {"grid": ["cdiv(C,32)", "cdiv(R,32)"], "block": [32, 8]}}], "reference": "transpose", "args": [{"name": "x", "dtype": "f32", "shape": ["R", "C"]}, {"name": "y", "dtype": "f32", "shape": ["C", "R"], "role": "out"}, {"name": "R", "dtype": "i32", "value": "R"}, {"name": "C", "dtype": "i32", "value": "C"}], "sizes": [{"R": 4096, "C": 4096}]}, "rounds": 3}"#,
        ..OpSpec::new("benchmark", "kernel_improve")
    };

    fn run(&self, ctx: &OpContext, input: ImproveInput) -> Result<ImproveOutput, OpError> {
        use crate::llm::client::{ChatRequest, ClientOptions, LlmClient};
        use aisp_hw::bench::lab::improve;
        use async_openai::types::chat::ChatCompletionRequestMessage as Msg;

        let mut lab = input.lab;
        lab.compile_only = false;
        lab.validate().map_err(invalid)?;
        // The loop profiles the best kernel itself, each time it changes.
        let ncu_sections = lab.ncu.take().and_then(|n| n.sections());
        if let Some(s) = &ncu_sections {
            kernel_lab_ncu::validate(s).map_err(invalid)?;
        }
        let profile = |spec: &LabSpec, label: &str| -> Result<Option<NcuFindings>, OpError> {
            match &ncu_sections {
                Some(s) => kernel_lab_ncu::profile(ctx, spec, label, s.clone()).map(Some),
                None => Ok(None),
            }
        };
        let cands: Vec<_> = lab.candidates().into_iter().cloned().collect();
        let [start] = cands.as_slice() else {
            return Err(invalid(format!(
                "lab needs exactly one candidate (the kernel to improve), not {}",
                cands.len()
            )));
        };
        let rounds = input.rounds.unwrap_or(3);
        if !(1..=8).contains(&rounds) {
            return Err(invalid(format!("rounds must be 1..=8, not {rounds}")));
        }
        let mut client = LlmClient::new(
            &(&ctx.app().config.llm).into(),
            ClientOptions { request_timeout: Duration::from_secs(180), max_retries: 2, ..ClientOptions::default() },
            ctx.cancellation_token().clone(),
            ctx.deadline(),
            None,
        )
        .map_err(|e| OpError::unsupported(format!("aisp_benchmark_kernel_improve needs an LLM: {e}"), "Configure one (AISP_LLM_BASE_URL and AISP_LLM_MODEL, or AISP_LLM_API_KEY); aisp_ai_status checks it."))?;
        let reference_kernel = match lab.reference() {
            Ok(Reference::Kernel(k)) => Some(k),
            _ => None,
        };
        let context = {
            let launch = start.launch.as_ref().or(lab.launch.as_ref());
            format!(
                "Launch: {}\nParameters (in order): {}\nSizes: {}\nReference: {}",
                serde_json::to_string(&launch).unwrap_or_default(),
                serde_json::to_string(&lab.args).unwrap_or_default(),
                serde_json::to_string(&lab.sizes).unwrap_or_default(),
                lab.reference
            )
        };
        let mut best = aisp_hw::bench::lab::spec::Kernel {
            name: Some("round0".into()),
            ..start.clone()
        };
        let mut best_round = 0;
        let start_label = start.label().to_string();
        // Round 0: measure the starting kernel.
        let mut spec0 = lab.clone();
        spec0.kernels = reference_kernel
            .iter()
            .cloned()
            .chain([best.clone()])
            .collect();
        let first = run_lab(ctx, &spec0)?;
        let reference_median = |o: &KernelOutput| {
            o.results
                .last()
                .and_then(|s| s.kernels.iter().find(|k| k.role == "reference"))
                .and_then(|k| k.median_ms)
        };
        let start_row = row_of(&first, "round0").cloned();
        let start_median = start_row
            .as_ref()
            .filter(|r| r.status == "ok")
            .and_then(|r| r.median_ms);
        let mut best_ncu = match &start_row {
            Some(r) if r.status == "ok" => profile(&spec0, "round0")?,
            _ => None,
        };
        let with_ncu = |desc: String, f: &Option<NcuFindings>| match f {
            Some(f) => format!("{desc}\n{}", kernel_lab_ncu::prompt_text(f)),
            None => desc,
        };
        let mut best_desc = with_ncu(
            start_row
                .as_ref()
                .map(|r| describe(r, reference_median(&first)))
                .unwrap_or_default(),
            &best_ncu,
        );
        let mut best_median = start_median;
        let mut last_attempt: Option<String> = None;
        let mut out_rounds = Vec::new();
        let mut kept_changes: Vec<String> = Vec::new();
        for round in 1..=rounds {
            ctx.check_cancelled()?;
            ctx.progress(
                round as f64,
                Some(rounds as f64),
                format!("round {round}: asking the model"),
            );
            let prompt = improve::round_prompt(
                &best.source,
                &best.entry,
                &context,
                &best_desc,
                last_attempt.as_deref(),
                input.goal.as_deref(),
            );
            let req = ChatRequest {
                messages: vec![
                    Msg::System(improve::SYSTEM_PROMPT.into()),
                    Msg::User(prompt.into()),
                ],
                no_tools: true,
                ..Default::default()
            };
            let reply = client.chat(&req).map_err(|e| {
                OpError::unsupported(
                    format!("the LLM did not answer: {e}"),
                    "aisp_ai_status checks the endpoint.",
                )
            })?;
            let text = reply.content.unwrap_or_default();
            let proposal = match improve::parse_reply(&text) {
                Ok(p) => p,
                Err(why) => {
                    last_attempt = Some(format!("your reply could not be used: {why}"));
                    out_rounds.push(Round {
                        round,
                        change: String::new(),
                        status: "no_code".into(),
                        failure: Some(why),
                        median_ms: None,
                        best_median_ms: best_median,
                        kept: false,
                        run_id: None,
                    });
                    continue;
                }
            };
            let label = format!("round{round}");
            let cand = aisp_hw::bench::lab::spec::Kernel {
                name: Some(label.clone()),
                source: proposal.source.clone(),
                ..best.clone()
            };
            let mut spec = lab.clone();
            spec.kernels = reference_kernel
                .iter()
                .cloned()
                .chain([best.clone(), cand.clone()])
                .collect();
            ctx.progress(
                round as f64,
                Some(rounds as f64),
                format!("round {round}: checking and timing"),
            );
            let res = run_lab(ctx, &spec)?;
            let row = row_of(&res, &label).cloned();
            let best_row = row_of(&res, best.label()).cloned();
            let (status, failure, median) = row.as_ref().map_or(
                ("failed".to_string(), Some("no result".to_string()), None),
                |r| (r.status.clone(), r.failure.clone(), r.median_ms),
            );
            let best_now = best_row
                .as_ref()
                .filter(|r| r.status == "ok")
                .and_then(|r| r.median_ms);
            // Kept when correct and reliably faster than the best in the same run.
            let kept = status == "ok"
                && match (best_now, median) {
                    (Some(b), Some(m)) => {
                        m < b && significantly_faster(ctx, &res, best.label(), &label)
                    }
                    (None, Some(_)) => true,
                    _ => false,
                };
            let attempt = row
                .as_ref()
                .map(|r| describe(r, reference_median(&res)))
                .unwrap_or_default();
            last_attempt = Some(format!(
                "{} -> {attempt}{}",
                proposal.change,
                if kept {
                    " (kept: it is the new best)"
                } else {
                    " (not kept)"
                }
            ));
            if kept {
                kept_changes.push(format!(
                    "round {round}: {}",
                    proposal.change.trim_end_matches('.')
                ));
                best_ncu = profile(&spec, &label)?;
                best = cand;
                best_round = round;
                best_median = median;
                best_desc = with_ncu(attempt, &best_ncu);
            } else if let Some(b) = best_now {
                best_median = Some(b);
            }
            out_rounds.push(Round {
                round,
                change: proposal.change,
                status,
                failure,
                median_ms: median,
                best_median_ms: best_now,
                kept,
                run_id: res.run_id.clone(),
            });
        }
        let explanation = if kept_changes.is_empty() {
            format!(
                "No round produced a correct kernel that was reliably faster than {start_label}; the starting kernel stays the best."
            )
        } else {
            format!(
                "Kept {} change(s): {}.",
                kept_changes.len(),
                kept_changes.join("; ")
            )
        };
        Ok(ImproveOutput {
            target: lab.target(),
            model: client.model().map(String::from),
            start_median_ms: start_median,
            best_median_ms: best_median,
            speedup: match (start_median, best_median) {
                (Some(s), Some(b)) if b > 0.0 => Some(s / b),
                _ => None,
            },
            best_round,
            best_source: best.source,
            rounds: out_rounds,
            explanation,
            best_ncu,
        })
    }
}

/// The candidate's speedup over `best` has a 95% interval above 1 (from the stored samples of that run).
fn significantly_faster(ctx: &OpContext, res: &KernelOutput, best: &str, cand: &str) -> bool {
    let (Some(run), Ok(store)) = (&res.run_id, ctx.app().store()) else {
        return false;
    };
    let target = &res.target;
    let suffix = res
        .results
        .last()
        .filter(|_| res.results.len() > 1)
        .map(|s| format!("@{}", size_label(&s.sizes)))
        .unwrap_or_default();
    let get = |v: &str| {
        record::find(store, Some(run), target, &format!("{v}{suffix}"))
            .ok()
            .flatten()
            .and_then(|r| r.samples_ms)
    };
    match (get(best), get(cand)) {
        (Some(b), Some(c)) => {
            stats::speedup_ci(&b, &c, 2000, 0.95).is_some_and(|ci| ci.ci_low > 1.0)
        }
        _ => false,
    }
}
