//! Operations of the `benchmark` domain: CUDA microbenchmark lessons
//! (baseline vs optimized variants), comparisons with a significance test,
//! history, and a 10-second health check.

use std::cell::Cell;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::errors::{BenchErrorExt, GpuCheck};
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, Hints, OpSpec, Operation};
use aisp_hw::bench::health::{self, HealthCheck};
use aisp_hw::bench::lesson::{self, Role, RunEnv, Speedup, Status, VariantResult};
use aisp_hw::bench::record::{self, HistoryFilter, StoredRow};
use aisp_hw::bench::roofline;
use aisp_hw::bench::roofs::Roofs;
use aisp_hw::bench::session::{self, Session};
use aisp_hw::bench::targets;
use aisp_hw::bench::{BenchError, DeviceInfo, Measured, SizeClass, datasheet, fresh_seed, stats};

pub const OPERATIONS: &[&dyn DynOperation] = &[
    &Targets,
    &Run,
    &Compare,
    &History,
    &Import,
    &SpeedTest,
    &crate::ops::kernel_lab::KernelLab,
    &crate::ops::kernel_lab::KernelImprove,
];

// ---------------------------------------------------------------- shared helpers

/// `gpu_unavailable` (with the probe's reason) when no GPU is usable. The
/// dispatcher checks this before calling; operations called directly check
/// again so they answer the same way.
pub(crate) fn require_gpu(ctx: &OpContext) -> Result<(), OpError> {
    let gpu = ctx.app().gpu();
    if gpu.available {
        Ok(())
    } else {
        Err(gpu.unavailable_error(ctx.tool()))
    }
}

/// Open CUDA device `device` (default 0) for a measuring tool: checks the
/// ordinal, finds NVRTC, and fills the run metadata.
pub(crate) fn open_session(
    ctx: &OpContext,
    device: Option<u32>,
    size: SizeClass,
    seed: u32,
) -> Result<Session, OpError> {
    require_gpu(ctx)?;
    let tool = ctx.tool().to_string();
    let ordinal =
        session::check_ordinal(device.unwrap_or(0)).map_err(|e| e.into_op_error(&tool))?;
    if !aisp_hw::bench::libs::nvrtc_available() {
        return Err(BenchError::NoNvrtc.into_op_error(&tool));
    }
    let gpu = ctx.app().gpu();
    Session::open(
        ordinal,
        &ctx.app().config.cache_dir(),
        &tool,
        gpu.nvml.clone(),
        gpu.driver_version.clone(),
        size,
        seed,
    )
    .map_err(|e| e.into_op_error(&tool))
}

/// Store rows; a store failure becomes a note rather than losing the measurements.
pub(crate) fn save(
    ctx: &OpContext,
    s: &Session,
    rows: &[VariantResult],
    notes: &mut Vec<String>,
) -> bool {
    match ctx.app().store() {
        Ok(store) => match record::insert(store, &s.meta, rows) {
            Ok(()) => true,
            Err(e) => {
                notes.push(format!("results were not saved to the store: {e}"));
                false
            }
        },
        Err(e) => {
            notes.push(format!(
                "results were not saved to the store: {}",
                e.message
            ));
            false
        }
    }
}

pub(crate) fn bench_err(ctx: &OpContext) -> impl Fn(BenchError) -> OpError + '_ {
    move |e| match e {
        BenchError::Cancelled => ctx.stop_error(),
        other => other.into_op_error(ctx.tool()),
    }
}

/// Versions every measuring tool reports.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Versions {
    pub driver: Option<String>,
    pub cuda_driver: Option<String>,
    pub nvrtc: Option<String>,
    pub cublas: Option<String>,
}

pub(crate) fn versions(s: &Session) -> Versions {
    Versions {
        driver: s.meta.driver_version.clone(),
        cuda_driver: s.meta.cuda_driver_version.clone(),
        nvrtc: s.meta.nvrtc_version.clone(),
        cublas: s.meta.cublas_version.clone(),
    }
}

fn check_budget(budget: Option<f64>, default: f64) -> Result<Duration, OpError> {
    let b = budget.unwrap_or(default);
    if !(b.is_finite() && (0.05..=120.0).contains(&b)) {
        return Err(OpError::invalid_input(
            format!("time_budget_s must be between 0.05 and 120 seconds, not {b}"),
            "Pass e.g. \"time_budget_s\": 1 (seconds of timed repetitions per variant).",
        ));
    }
    Ok(Duration::from_secs_f64(b))
}

// ---------------------------------------------------------------- targets

pub struct Targets;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetsInput {
    /// Only this target id (e.g. `memory_coalescing`); default all.
    #[serde(default)]
    pub target: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TargetInfo {
    /// snake_case id to pass to aisp_benchmark_run.
    pub id: String,
    pub title: String,
    /// The lesson in one sentence.
    pub lesson: String,
    /// Where the lesson comes from in the reference book.
    pub chapter: String,
    /// `gb_per_s`, `tflop_per_s` or `us_per_step`.
    pub metric: String,
    pub variants: Vec<VariantInfo>,
    pub needs: NeedsInfo,
    /// Set when the optimization is not expected to win on every GPU: why.
    pub informational: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct VariantInfo {
    pub name: String,
    /// `baseline` or `optimized`.
    pub role: String,
    pub what: String,
    /// The measured roof its pct_of_roof uses.
    pub roof: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NeedsInfo {
    /// Minimum compute capability, `major.minor`.
    pub min_compute_capability: String,
    pub cublas: bool,
    pub gpus: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TargetsOutput {
    pub targets: Vec<TargetInfo>,
    /// Multi-GPU measurements live in the hw domain.
    pub multi_gpu_tools: Vec<String>,
}

fn target_info(t: &lesson::TargetSpec) -> TargetInfo {
    TargetInfo {
        id: t.id.into(),
        title: t.title.into(),
        lesson: t.lesson.into(),
        chapter: t.chapter.into(),
        metric: t.metric.as_str().into(),
        variants: t
            .variants
            .iter()
            .map(|v| VariantInfo {
                name: v.name.into(),
                role: v.role.as_str().into(),
                what: v.what.into(),
                roof: v.roof.as_str().into(),
            })
            .collect(),
        needs: NeedsInfo {
            min_compute_capability: format!("{}.{}", t.needs.min_cc.0, t.needs.min_cc.1),
            cublas: t.needs.cublas,
            gpus: t.needs.gpus,
        },
        informational: t.informational.map(String::from),
    }
}

fn unknown_target(id: &str) -> OpError {
    let ids: Vec<&str> = targets::ALL.iter().map(|t| t.id).collect();
    OpError::invalid_input(
        format!("unknown benchmark target `{id}`"),
        format!(
            "Use one of: {}. aisp_benchmark_targets describes them.",
            ids.join(", ")
        ),
    )
}

impl Operation for Targets {
    type Input = TargetsInput;
    type Output = TargetsOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Benchmark targets",
        summary: "Lists the CUDA microbenchmark lessons: id, the lesson in one sentence, baseline and optimized variants, metric, requirements.",
        description: "Lists every single-GPU lesson aisp_benchmark_run can measure (memory coalescing, 16-byte loads, \
shared-memory transpose and bank conflicts, warp divergence, ILP, occupancy vs registers, kernel fusion, reductions, launch \
overhead vs CUDA graphs vs persistent kernels, stream overlap, pinned memory, GEMM from naive FP32 to FP8 tensor cores, \
batched GEMM). For each: id, title, the lesson in one sentence, the reference chapter, the metric (gb_per_s, tflop_per_s \
or us_per_step), the variants with their role (baseline|optimized) and the roof each is compared with, what it needs \
(compute capability, cuBLAS), and for lessons that may not win on every GPU, why. Needs no GPU; instant.",
        intents: &[
            "list benchmarks",
            "what benchmarks are there",
            "benchmark targets",
            "which lessons",
            "microbenchmarks",
            "what can i benchmark",
        ],
        example: r#"{"target": "gemm"}"#,
        ..OpSpec::new("benchmark", "targets")
    };

    fn run(&self, _ctx: &OpContext, input: TargetsInput) -> Result<TargetsOutput, OpError> {
        let list: Vec<TargetInfo> = match &input.target {
            Some(id) => vec![target_info(
                targets::spec(id).ok_or_else(|| unknown_target(id))?,
            )],
            None => targets::ALL.iter().map(|t| target_info(t)).collect(),
        };
        Ok(TargetsOutput {
            targets: list,
            multi_gpu_tools: vec!["aisp_hw_p2p".into(), "aisp_hw_nccl".into()],
        })
    }
}

// ---------------------------------------------------------------- run

pub struct Run;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunInput {
    /// Target ids (see aisp_benchmark_targets); default every target this GPU can run.
    #[serde(default)]
    pub targets: Option<Vec<String>>,
    /// Only these variant names (e.g. to repeat one variant); default all.
    #[serde(default)]
    pub variants: Option<Vec<String>>,
    /// Problem size: small, medium (default) or large (e.g. 8192^3 GEMMs, 1 GiB copies).
    #[serde(default)]
    pub size: Option<SizeClass>,
    /// Seconds of timed repetitions per variant after warm-up (default 1, 0.05 to 120).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 86400))]
    pub time_budget_s: Option<f64>,
    /// CUDA device ordinal (default 0).
    #[serde(default)]
    pub device: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct LessonNote {
    pub target: String,
    pub lesson: String,
    pub informational: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RunOutput {
    /// Key of this run in the store (aisp_benchmark_history, aisp_benchmark_compare).
    pub run_id: String,
    pub device: DeviceInfo,
    pub versions: Versions,
    pub size: SizeClass,
    /// Seed of the random inputs.
    pub seed: u32,
    pub time_budget_s: f64,
    /// Roofs the percentages refer to (measured now, or the latest stored by aisp_hw_*).
    pub roofs: Roofs,
    /// One row per variant: checked against a CPU reference, then timed.
    pub results: Vec<VariantResult>,
    /// Each optimized variant against its target's baseline.
    pub speedups: Vec<Speedup>,
    pub lessons: Vec<LessonNote>,
    pub saved: bool,
    pub notes: Vec<String>,
}

impl Operation for Run {
    type Input = RunInput;
    type Output = RunOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Run CUDA microbenchmarks",
        summary: "Runs baseline-vs-optimized CUDA lessons on the GPU: each variant checked against a CPU reference, then timed with CUDA events.",
        description: "Runs CUDA microbenchmark lessons (baseline vs optimized kernels, each checked against a CPU reference) on this GPU: timings, % of the measured and datasheet roofs, and each speedup with a confidence interval; results are stored. Needs a GPU; 1-3 minutes for all targets (async: true).",
        hints: Hints::MEASURES,
        needs_gpu: true,
        long_running: true,
        intents: &[
            "run benchmarks",
            "benchmark the gpu",
            "run microbenchmarks",
            "run the lessons",
            "run a lesson",
            "measure speedup",
            "coalescing benchmark",
            "gemm benchmark",
            "is cublas fast",
            "time my kernels",
        ],
        example: r#"{"targets": ["memory_coalescing", "gemm"], "size": "medium", "time_budget_s": 1}"#,
        ..OpSpec::new("benchmark", "run")
    };

    fn run(&self, ctx: &OpContext, input: RunInput) -> Result<RunOutput, OpError> {
        let budget = check_budget(input.time_budget_s, 1.0)?;
        let size = input.size.unwrap_or_default();
        let requested: Option<Vec<&'static lesson::TargetSpec>> = match &input.targets {
            Some(ids) if ids.is_empty() => {
                return Err(OpError::invalid_input(
                    "targets is empty",
                    "Omit targets for all, or name at least one.",
                ));
            }
            Some(ids) => Some(
                ids.iter()
                    .map(|id| targets::spec(id).ok_or_else(|| unknown_target(id)))
                    .collect::<Result<_, _>>()?,
            ),
            None => None,
        };
        if let Some(vs) = &input.variants {
            let pool: Vec<&lesson::TargetSpec> =
                requested.clone().unwrap_or_else(|| targets::ALL.to_vec());
            for v in vs {
                if !pool.iter().any(|t| t.variants.iter().any(|x| x.name == v)) {
                    return Err(OpError::invalid_input(
                        format!("no selected target has a variant `{v}`"),
                        "aisp_benchmark_targets lists each target's variants.",
                    ));
                }
            }
        }
        let _queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
        let seed = fresh_seed();
        let s = open_session(ctx, input.device, size, seed)?;
        let err = bench_err(ctx);
        ctx.progress(0.0, None, "measuring roofs");
        let Measured {
            found: roofs,
            rows: roof_rows,
            mut notes,
        } = roofline::lesson_roofs(&s, ctx.app().store().ok().map(|st| st.as_ref()), &|| {
            ctx.is_cancelled()
        })
        .map_err(&err)?;
        if roofs.tensor.is_empty() {
            notes.push("No tensor-core roofs stored for this GPU yet: run aisp_hw_roofline to get pct_of_roof for TF32/BF16/FP16/FP8 variants.".into());
        }
        if roofs.pcie_h2d.is_none() {
            notes.push("No PCIe roof stored for this GPU yet: run aisp_hw_pcie to get pct_of_roof for host-to-device copies.".into());
        }
        let cc = (s.gpu.info.cc_major, s.gpu.info.cc_minor);
        let chosen: Vec<&lesson::TargetSpec> = match requested {
            Some(list) => list,
            None => targets::ALL
                .iter()
                .copied()
                .filter(|t| {
                    let ok = cc >= t.needs.min_cc
                        && (!t.needs.cublas || aisp_hw::bench::libs::cublas_available());
                    if !ok {
                        notes.push(format!(
                            "{} skipped: needs compute capability {}.{}+{}",
                            t.id,
                            t.needs.min_cc.0,
                            t.needs.min_cc.1,
                            if t.needs.cublas { " and cuBLAS" } else { "" }
                        ));
                    }
                    ok
                })
                .collect(),
        };
        let data = datasheet::lookup(&s.gpu.info.name);
        if data.is_none() {
            notes.push(datasheet::MISSING_NOTE.into());
        }
        let total: usize = chosen.iter().map(|t| t.variants.len()).sum();
        let done = Cell::new(0usize);
        let progress = |m: &str| {
            if m.ends_with("(checking)") {
                done.set(done.get() + 1);
            }
            ctx.progress(done.get() as f64, Some(total as f64), m);
        };
        let cancelled = || ctx.is_cancelled();
        let env = RunEnv {
            size,
            budget,
            seed,
            cancelled: &cancelled,
            progress: &progress,
            roofs: &roofs,
            datasheet: data.as_ref(),
            nvml: s.nvml.clone(),
        };
        let mut results = Vec::new();
        let mut speedups = Vec::new();
        let mut lessons = Vec::new();
        for t in &chosen {
            let mut runner = targets::make(t.id).ok_or_else(|| unknown_target(t.id))?;
            let keep = |i: usize| {
                input
                    .variants
                    .as_ref()
                    .is_none_or(|vs| vs.iter().any(|v| v == t.variants[i].name))
            };
            let rows =
                lesson::run_lesson_where(runner.as_mut(), &s.gpu, &env, &keep).map_err(&err)?;
            speedups.extend(lesson::speedups(t, &rows));
            results.extend(rows);
            lessons.push(LessonNote {
                target: t.id.into(),
                lesson: t.lesson.into(),
                informational: t.informational.map(String::from),
            });
        }
        let failed = results
            .iter()
            .filter(|r| r.status == Status::Failed)
            .count();
        if failed > 0 {
            notes.push(format!("{failed} variant(s) failed their check or a CUDA call and were not timed; see `failure`."));
        }
        let mut all_rows = roof_rows;
        all_rows.extend(results.iter().cloned());
        let saved = save(ctx, &s, &all_rows, &mut notes);
        Ok(RunOutput {
            run_id: s.meta.run_id.clone(),
            device: s.gpu.info.clone(),
            versions: versions(&s),
            size,
            seed,
            time_budget_s: budget.as_secs_f64(),
            roofs,
            results,
            speedups,
            lessons,
            saved,
            notes,
        })
    }
}

// ---------------------------------------------------------------- compare

pub struct Compare;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareInput {
    /// Target id.
    pub target: String,
    /// Two variants of one run: the reference variant (default: the target's baseline).
    #[serde(default)]
    pub baseline_variant: Option<String>,
    /// Two variants of one run: the variant compared with it.
    #[serde(default)]
    pub candidate_variant: Option<String>,
    /// Two variants of one run: which run (default the newest run that has both).
    #[serde(default)]
    pub run_id: Option<String>,
    /// Two runs of one variant: the variant.
    #[serde(default)]
    pub variant: Option<String>,
    /// Two runs of one variant: the earlier/reference run id.
    #[serde(default)]
    pub baseline_run_id: Option<String>,
    /// Two runs of one variant: the run compared with it.
    #[serde(default)]
    pub candidate_run_id: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CompareSide {
    pub run_id: String,
    pub variant: String,
    pub created_at: String,
    pub device_name: Option<String>,
    pub median_ms: Option<f64>,
    pub value: Option<f64>,
    pub metric: Option<String>,
    pub samples: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CompareOutput {
    pub target: String,
    pub baseline: CompareSide,
    pub candidate: CompareSide,
    /// median(baseline) / median(candidate): above 1 means the candidate is faster.
    pub speedup: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Two-sided Mann-Whitney U p-value of the two sets of samples.
    pub p_value: f64,
    /// p < 0.05 and the 95% interval excludes 1.
    pub significant: bool,
    pub verdict: String,
    pub notes: Vec<String>,
}

fn side(r: &StoredRow) -> CompareSide {
    CompareSide {
        run_id: r.run_id.clone(),
        variant: r.variant.clone(),
        created_at: r.created_at.clone(),
        device_name: r.device_name.clone(),
        median_ms: r.median_ms,
        value: r.value,
        metric: r.metric.clone(),
        samples: r.samples_ms.as_ref().map_or(0, Vec::len),
    }
}

/// Compare two stored rows' samples.
pub fn compare_rows(
    target: &str,
    base: &StoredRow,
    cand: &StoredRow,
) -> Result<CompareOutput, OpError> {
    let (bs, cs) = (
        base.samples_ms.clone().unwrap_or_default(),
        cand.samples_ms.clone().unwrap_or_default(),
    );
    let ci = stats::speedup_ci(&bs, &cs, 2000, 0.95).ok_or_else(|| {
        OpError::not_found(
            "the stored rows have no timing samples to compare",
            "Run aisp_benchmark_run again; rows from failed variants have no samples.",
        )
    })?;
    let p = stats::mann_whitney(&bs, &cs)
        .map(|m| m.p_value)
        .unwrap_or(1.0);
    let significant = p < 0.05 && (ci.ci_low > 1.0 || ci.ci_high < 1.0);
    let pct = (ci.ratio - 1.0) * 100.0;
    let verdict = if !significant {
        format!(
            "No significant difference: speedup {:.3} (95% interval {:.3}..{:.3}, p = {:.3}).",
            ci.ratio, ci.ci_low, ci.ci_high, p
        )
    } else if ci.ratio > 1.0 {
        format!(
            "{} is {:.1}% faster than {} (95% interval {:.3}..{:.3}, p = {:.2e}).",
            cand.variant, pct, base.variant, ci.ci_low, ci.ci_high, p
        )
    } else {
        format!(
            "{} is {:.1}% slower than {} (95% interval {:.3}..{:.3}, p = {:.2e}).",
            cand.variant,
            -pct / ci.ratio,
            base.variant,
            ci.ci_low,
            ci.ci_high,
            p
        )
    };
    let mut notes = Vec::new();
    if base.device_uuid != cand.device_uuid {
        notes.push(format!(
            "The rows come from different GPUs ({} vs {}): the difference includes the hardware.",
            base.device_name.as_deref().unwrap_or("?"),
            cand.device_name.as_deref().unwrap_or("?")
        ));
    }
    if base.size != cand.size {
        notes.push("The problem sizes differ; compare like with like.".into());
    }
    Ok(CompareOutput {
        target: target.to_string(),
        baseline: side(base),
        candidate: side(cand),
        speedup: ci.ratio,
        ci_low: ci.ci_low,
        ci_high: ci.ci_high,
        p_value: p,
        significant,
        verdict,
        notes,
    })
}

impl Operation for Compare {
    type Input = CompareInput;
    type Output = CompareOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Compare benchmark results",
        summary: "Compares two variants of one run, or one variant across two runs, with a bootstrap interval and a Mann-Whitney test.",
        description: "Reads stored samples and says whether a difference is real: either two variants of a target in \
one run (baseline_variant, candidate_variant, optional run_id; the baseline defaults to the target's baseline), or one \
variant in two runs (variant, baseline_run_id, candidate_run_id; e.g. before and after a driver update or on two \
machines). Returns both sides' medians and metric values, the speedup (median ratio) with a 95% bootstrap interval, the \
Mann-Whitney U p-value, whether it is significant (p < 0.05 and the interval excludes 1), a one-line verdict, and notes \
when the GPUs or sizes differ. Kernel-lab targets (kernel_<name>) work too; their baseline defaults to the reference. Needs no GPU; instant.",
        intents: &[
            "compare benchmark runs",
            "is the speedup significant",
            "compare variants",
            "statistically significant",
            "regression between benchmark runs",
            "baseline vs optimized",
        ],
        example: r#"{"target": "vectorized_loads", "candidate_variant": "vec4_unroll4_copy"}"#,
        ..OpSpec::new("benchmark", "compare")
    };

    fn run(&self, ctx: &OpContext, input: CompareInput) -> Result<CompareOutput, OpError> {
        if input.target.starts_with("kernel_") && targets::spec(&input.target).is_none() {
            return compare_kernel_lab(ctx, &input);
        }
        let spec = targets::spec(&input.target).ok_or_else(|| unknown_target(&input.target))?;
        let store = ctx.app().store()?;
        let missing = |what: String| {
            OpError::not_found(
                format!("no stored successful result for {what}"),
                "aisp_benchmark_history lists what is stored; run aisp_benchmark_run first.",
            )
        };
        let two_runs = input.baseline_run_id.is_some()
            || input.candidate_run_id.is_some()
            || input.variant.is_some();
        if two_runs {
            let (Some(v), Some(b), Some(c)) = (
                &input.variant,
                &input.baseline_run_id,
                &input.candidate_run_id,
            ) else {
                return Err(OpError::invalid_input(
                    "comparing two runs needs variant, baseline_run_id and candidate_run_id",
                    "Pass all three, or compare two variants of one run with baseline_variant/candidate_variant.",
                ));
            };
            let base = record::find(store, Some(b), spec.id, v)?
                .ok_or_else(|| missing(format!("{}/{v} in run {b}", spec.id)))?;
            let cand = record::find(store, Some(c), spec.id, v)?
                .ok_or_else(|| missing(format!("{}/{v} in run {c}", spec.id)))?;
            return compare_rows(spec.id, &base, &cand);
        }
        let base_v = input.baseline_variant.clone().unwrap_or_else(|| {
            spec.variants
                .iter()
                .find(|v| v.role == Role::Baseline)
                .map(|v| v.name.to_string())
                .unwrap_or_default()
        });
        let Some(cand_v) = input.candidate_variant.clone() else {
            return Err(OpError::invalid_input(
                "candidate_variant is required to compare two variants",
                format!(
                    "Variants of {}: {}",
                    spec.id,
                    spec.variants
                        .iter()
                        .map(|v| v.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        for v in [&base_v, &cand_v] {
            if !spec.variants.iter().any(|x| x.name == v) {
                return Err(OpError::invalid_input(
                    format!("{} has no variant `{v}`", spec.id),
                    format!(
                        "Variants: {}",
                        spec.variants
                            .iter()
                            .map(|v| v.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        let run_id = match &input.run_id {
            Some(r) => r.clone(),
            None => record::find(store, None, spec.id, &cand_v)?
                .map(|r| r.run_id)
                .ok_or_else(|| missing(format!("{}/{cand_v}", spec.id)))?,
        };
        let base = record::find(store, Some(&run_id), spec.id, &base_v)?
            .ok_or_else(|| missing(format!("{}/{base_v} in run {run_id}", spec.id)))?;
        let cand = record::find(store, Some(&run_id), spec.id, &cand_v)?
            .ok_or_else(|| missing(format!("{}/{cand_v} in run {run_id}", spec.id)))?;
        compare_rows(spec.id, &base, &cand)
    }
}

/// Compare kernel-lab rows (target `kernel_<name>`): their variants are the
/// caller's kernels, so they are looked up in the store rather than in a
/// lesson's list; the baseline defaults to the reference row of the run.
fn compare_kernel_lab(ctx: &OpContext, input: &CompareInput) -> Result<CompareOutput, OpError> {
    let store = ctx.app().store()?;
    let target = input.target.as_str();
    let missing = |what: String| {
        OpError::not_found(
            format!("no stored successful result for {what}"),
            "aisp_benchmark_history with this target lists the stored kernel-lab rows.",
        )
    };
    if let (Some(v), Some(b), Some(c)) = (
        &input.variant,
        &input.baseline_run_id,
        &input.candidate_run_id,
    ) {
        let base = record::find(store, Some(b), target, v)?
            .ok_or_else(|| missing(format!("{target}/{v} in run {b}")))?;
        let cand = record::find(store, Some(c), target, v)?
            .ok_or_else(|| missing(format!("{target}/{v} in run {c}")))?;
        return compare_rows(target, &base, &cand);
    }
    let Some(cand_v) = &input.candidate_variant else {
        return Err(OpError::invalid_input(
            "compare needs candidate_variant (two kernels of one run) or variant, baseline_run_id and candidate_run_id",
            "aisp_benchmark_history with this target lists the stored kernels.",
        ));
    };
    let cand = record::find(store, input.run_id.as_deref(), target, cand_v)?
        .ok_or_else(|| missing(format!("{target}/{cand_v}")))?;
    let base_v = match &input.baseline_variant {
        Some(b) => b.clone(),
        None => record::history(
            store,
            &HistoryFilter {
                target: Some(target.to_string()),
                run_id: Some(cand.run_id.clone()),
                limit: 1000,
                ..Default::default()
            },
        )?
        .into_iter()
        .find(|r| r.role == "baseline" && r.size == cand.size)
        .map(|r| r.variant)
        .ok_or_else(|| missing(format!("the reference of run {}", cand.run_id)))?,
    };
    let base = record::find(store, Some(&cand.run_id), target, &base_v)?
        .ok_or_else(|| missing(format!("{target}/{base_v} in run {}", cand.run_id)))?;
    compare_rows(target, &base, &cand)
}

// ---------------------------------------------------------------- history

pub struct History;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryInput {
    /// Only this target (or `roof`, `copy_bandwidth`, `speed_test`, `tensor_cores`).
    #[serde(default)]
    pub target: Option<String>,
    /// Only this variant.
    #[serde(default)]
    pub variant: Option<String>,
    /// Only this run.
    #[serde(default)]
    pub run_id: Option<String>,
    /// GPU UUID, or part of its name (e.g. `H100`).
    #[serde(default)]
    pub device: Option<String>,
    /// Most rows to return, newest first (default 50, at most 1000).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Include each row's raw samples in ms (default false).
    #[serde(default)]
    pub include_samples: Option<bool>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct HistoryOutput {
    pub rows: Vec<StoredRow>,
    /// Distinct runs among the rows, newest first.
    pub runs: Vec<String>,
}

impl Operation for History {
    type Input = HistoryInput;
    type Output = HistoryOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Benchmark history",
        summary: "Stored benchmark and hardware-roof results, newest first, filtered by target, variant, run or GPU.",
        description: "Reads the store's benchmark_results table, where aisp_benchmark_run, aisp_benchmark_speed_test, \
aisp_gpu_bandwidth and the aisp_hw_* tools record every measured variant with its device, driver/CUDA/NVRTC versions, \
timing statistics, metric, % of roof, energy and throttle reasons. Filter by target, variant, run_id or device (UUID or \
part of the name); returns rows newest first (optionally with raw samples) and the distinct run ids. Use it to track a \
GPU over days or to find run ids for aisp_benchmark_compare. Needs no GPU; instant.",
        intents: &[
            "benchmark history",
            "previous benchmark results",
            "past benchmark results",
            "past runs",
            "trend",
            "what did we measure",
            "stored results",
        ],
        example: r#"{"target": "gemm", "limit": 20}"#,
        ..OpSpec::new("benchmark", "history")
    };

    fn run(&self, ctx: &OpContext, input: HistoryInput) -> Result<HistoryOutput, OpError> {
        let limit = input.limit.unwrap_or(50);
        if !(1..=1000).contains(&limit) {
            return Err(OpError::invalid_input(
                format!("limit must be 1 to 1000, not {limit}"),
                "Pass e.g. \"limit\": 50.",
            ));
        }
        let store = ctx.app().store()?;
        let mut rows = record::history(
            store,
            &HistoryFilter {
                target: input.target,
                variant: input.variant,
                run_id: input.run_id,
                device: input.device,
                limit: limit as usize,
                with_samples: input.include_samples.unwrap_or(false),
            },
        )?;
        // Each GEMM variant's point on a roofline: its intensity from the lesson's sizes.
        let ids: Vec<i64> = rows
            .iter()
            .filter(|r| r.metric.as_deref() == Some("tflop_per_s") && r.target != "roof")
            .map(|r| r.id)
            .collect();
        if !ids.is_empty() {
            let details = record::details_by_id(store, &ids)?;
            for r in rows.iter_mut() {
                r.intensity_flop_per_byte = details
                    .get(&r.id)
                    .and_then(|d| d.get("details"))
                    .and_then(|lesson| aisp_report::bench::gemm_intensity(&r.variant, lesson));
            }
        }
        let mut runs: Vec<String> = Vec::new();
        for r in &rows {
            if !runs.contains(&r.run_id) {
                runs.push(r.run_id.clone());
            }
        }
        Ok(HistoryOutput { rows, runs })
    }
}

// ---------------------------------------------------------------- import

pub struct Import;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportInput {
    /// A saved run.json, or a folder whose sub-folders hold them (e.g. `examples/benchmark`).
    pub path: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ImportOutput {
    pub runs: Vec<aisp_hw::bench::import::Imported>,
    /// Rows added in all (0 when every run was already stored).
    pub rows_added: usize,
}

impl Operation for Import {
    type Input = ImportInput;
    type Output = ImportOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Import saved benchmark runs",
        summary: "Loads saved aisp_benchmark_run answers (run.json) into the store, so history, analyses and reports use those measurements.",
        description: "Reads run.json files (the answers of aisp_benchmark_run kept from GPU hosts, e.g. examples/benchmark/h100) and stores their results, measured roofs and speedup intervals as the run itself would have; a run already stored is skipped. Needs no GPU; instant.",
        positional: &["path"],
        intents: &[
            "import benchmark results",
            "load run.json",
            "import saved runs",
        ],
        example: r#"{"path": "examples/benchmark"}"#,
        hints: Hints {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        ..OpSpec::new("benchmark", "import")
    };

    fn run(&self, ctx: &OpContext, input: ImportInput) -> Result<ImportOutput, OpError> {
        let path = std::path::PathBuf::from(input.path.trim());
        let files = aisp_hw::bench::import::find_runs(&path);
        if files.is_empty() {
            return Err(OpError::not_found(
                format!("no run.json at or under {}", path.display()),
                "Pass a run.json saved from aisp_benchmark_run, or a folder with such files one level down.",
            ));
        }
        let store = ctx.app().store()?;
        let mut runs = Vec::new();
        for f in files {
            ctx.check_cancelled()?;
            // Capped, and refused before being read whole when it does not start like JSON.
            let bytes = aisp_profile::input_file::read_capped_sniffed(
                &f,
                aisp_profile::input_file::InputKind::SavedRun,
                &Default::default(),
                aisp_profile::input_file::Sniff::Json,
            )?;
            let text = String::from_utf8(bytes).map_err(|_| {
                OpError::invalid_input(
                    format!("{} is not UTF-8 text", f.display()),
                    "Pass the JSON answer of aisp_benchmark_run unchanged.",
                )
            })?;
            runs.push(
                aisp_hw::bench::import::import_run(store, &f, &text).map_err(|e| {
                    OpError::invalid_input(
                        e.to_string(),
                        "Pass the JSON answer of aisp_benchmark_run unchanged.",
                    )
                })?,
            );
        }
        Ok(ImportOutput {
            rows_added: runs.iter().map(|r| r.rows).sum(),
            runs,
        })
    }
}

// ---------------------------------------------------------------- speed test

pub struct SpeedTest;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpeedTestInput {
    /// CUDA device ordinal (default 0).
    #[serde(default)]
    pub device: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SpeedTestOutput {
    pub run_id: String,
    pub device: DeviceInfo,
    pub versions: Versions,
    pub checks: Vec<HealthCheck>,
    /// false when any check is `low` or `failed`; null when none could be judged.
    pub healthy: Option<bool>,
    pub saved: bool,
    pub notes: Vec<String>,
}

impl Operation for SpeedTest {
    type Input = SpeedTestInput;
    type Output = SpeedTestOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU speed test (10-second health check)",
        summary: "Measures HBM copy bandwidth, BF16 GEMM TFLOP/s, launch latency and pinned H2D bandwidth, each against what this GPU should reach.",
        description: "A quick health check of one GPU, about 10 seconds: device-memory bandwidth (cuMemcpyDtoD over \
1 GiB, against 80% of the theoretical figure from NVML's memory clock and bus width), BF16 GEMM throughput (cuBLAS, \
8192^3 or 4096^3 on small GPUs, against 60% of the datasheet when the catalog knows the GPU, else against 90% of this \
GPU's best stored result), launch cost (1000 back-to-back empty kernels, and launch + synchronise round trip, against \
10 µs and 30 µs), and pinned host-to-device bandwidth (256 MiB, against 70% of the PCIe link's theoretical rate). Each \
check says ok, low (underperforms: look at clocks, power, thermals, PCIe link) or unknown, with the figures; results are \
stored so later runs can spot regressions. Takes the GPU to itself.",
        hints: Hints::MEASURES,
        needs_gpu: true,
        long_running: true,
        intents: &[
            "speed test",
            "is my gpu healthy",
            "gpu health check",
            "is the gpu underperforming",
            "quick gpu benchmark",
            "sanity check gpu",
            "performs as expected",
            "is this gpu slow",
        ],
        example: r#"{"device": 0}"#,
        ..OpSpec::new("benchmark", "speed_test")
    };

    fn run(&self, ctx: &OpContext, input: SpeedTestInput) -> Result<SpeedTestOutput, OpError> {
        let _queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
        let s = open_session(ctx, input.device, SizeClass::Large, fresh_seed())?;
        let progress =
            |check: usize, of: usize, what: &str| ctx.progress(check as f64, Some(of as f64), what);
        let test = health::speed_test(
            &s,
            ctx.app().store().ok().map(|st| st.as_ref()),
            &|| ctx.is_cancelled(),
            &progress,
        )
        .map_err(bench_err(ctx))?;
        let mut notes = test.notes;
        let saved = save(ctx, &s, &test.rows, &mut notes);
        progress(health::CHECKS, health::CHECKS, "done");
        Ok(SpeedTestOutput {
            run_id: s.meta.run_id.clone(),
            device: s.gpu.info.clone(),
            versions: versions(&s),
            checks: test.found.checks,
            healthy: test.found.healthy,
            saved,
            notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppState;
    use crate::error::ErrorKind;
    use aisp_hw::gpu::GpuAvailability;
    use serde_json::json;

    fn no_gpu_app() -> std::sync::Arc<AppState> {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(GpuAvailability::unavailable(
            "no NVIDIA driver in this test",
            false,
        ));
        app
    }

    async fn call(
        app: &std::sync::Arc<AppState>,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, OpError> {
        let t = crate::registry::find(tool).unwrap_or_else(|| panic!("{tool} not registered"));
        crate::dispatch::invoke(app, t, args, Default::default()).await
    }

    #[tokio::test]
    async fn targets_work_without_a_gpu() {
        let app = no_gpu_app();
        let out = call(&app, "aisp_benchmark_targets", json!({}))
            .await
            .unwrap();
        let list = out["targets"].as_array().unwrap();
        assert_eq!(list.len(), 14);
        assert_eq!(list[0]["id"], "memory_coalescing");
        assert_eq!(list[0]["variants"][0]["role"], "baseline");
        let gemm = call(&app, "aisp_benchmark_targets", json!({"target": "gemm"}))
            .await
            .unwrap();
        assert_eq!(gemm["targets"][0]["variants"].as_array().unwrap().len(), 9);
        assert_eq!(gemm["targets"][0]["needs"]["cublas"], true);
        let err = call(&app, "aisp_benchmark_targets", json!({"target": "nope"}))
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput);
        assert!(err.hint.contains("memory_coalescing"));
    }

    #[tokio::test]
    async fn gpu_tools_answer_gpu_unavailable_without_a_gpu() {
        let app = no_gpu_app();
        for (tool, args) in [
            ("aisp_benchmark_run", json!({})),
            ("aisp_benchmark_speed_test", json!({})),
            ("aisp_hw_roofline", json!({})),
            ("aisp_hw_pcie", json!({})),
            ("aisp_hw_cache", json!({})),
            ("aisp_hw_tensor_cores", json!({})),
            ("aisp_hw_p2p", json!({})),
            ("aisp_hw_nccl", json!({})),
            ("aisp_gpu_bandwidth", json!({})),
        ] {
            let err = call(&app, tool, args).await.unwrap_err();
            assert_eq!(err.kind, ErrorKind::GpuUnavailable, "{tool}: {err:?}");
            assert!(
                err.message.contains("no NVIDIA driver in this test"),
                "{tool}: {}",
                err.message
            );
        }
    }

    #[test]
    fn called_directly_gpu_tools_answer_like_the_dispatcher() {
        let ctx = OpContext::detached(no_gpu_app());
        let gpu_ops = crate::ops::hw::OPERATIONS
            .iter()
            .chain(OPERATIONS.iter())
            .filter(|op| op.spec().needs_gpu);
        let mut n = 0;
        for op in gpu_ops {
            let err = op.call_json(&ctx, json!({})).unwrap_err();
            assert_eq!(
                err.kind,
                ErrorKind::GpuUnavailable,
                "{}",
                op.spec().tool_name()
            );
            assert!(
                err.message.contains("no NVIDIA driver in this test"),
                "{}",
                err.message
            );
            n += 1;
        }
        assert_eq!(n, 8, "6 hw tools plus benchmark run and speed_test");
    }

    #[tokio::test]
    async fn arguments_are_validated_before_the_gpu_is_needed() {
        let app = no_gpu_app();
        for (tool, args) in [
            ("aisp_benchmark_run", json!({"size": "huge"})),
            ("aisp_benchmark_run", json!({"targets": "gemm"})),
            ("aisp_benchmark_run", json!({"bogus": 1})),
            ("aisp_benchmark_run", json!({"timeout_s": -1})),
            ("aisp_hw_tensor_cores", json!({"sizes": "big"})),
            ("aisp_benchmark_compare", json!({})),
        ] {
            let err = call(&app, tool, args.clone()).await.unwrap_err();
            assert_eq!(err.kind, ErrorKind::InvalidInput, "{tool} {args}: {err:?}");
        }
    }

    #[test]
    fn run_checks_its_own_arguments() {
        let ctx = OpContext::detached(no_gpu_app());
        let bad = |input: RunInput| Run.run(&ctx, input).unwrap_err();
        let e = bad(RunInput {
            targets: Some(vec!["nope".into()]),
            ..Default::default()
        });
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        let e = bad(RunInput {
            targets: Some(vec![]),
            ..Default::default()
        });
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        let e = bad(RunInput {
            time_budget_s: Some(0.0),
            ..Default::default()
        });
        assert!(e.message.contains("time_budget_s"));
        let e = bad(RunInput {
            targets: Some(vec!["gemm".into()]),
            variants: Some(vec!["strided_copy".into()]),
            ..Default::default()
        });
        assert!(e.message.contains("strided_copy"));
    }

    fn stored(run: &str, variant: &str, samples: Vec<f64>, uuid: &str) -> StoredRow {
        StoredRow {
            id: 1,
            run_id: run.into(),
            created_at: "t".into(),
            tool: None,
            target: "gemm".into(),
            variant: variant.into(),
            role: "optimized".into(),
            status: Some("ok".into()),
            verified: true,
            failure: None,
            size: Some("M = N = K = 4096".into()),
            median_ms: Some(stats::median(&samples)),
            p10_ms: None,
            p90_ms: None,
            cv_pct: None,
            repetitions: Some(samples.len() as i64),
            metric: Some("tflop_per_s".into()),
            value: None,
            pct_of_roof: None,
            pct_of_datasheet: None,
            energy_j: None,
            device_name: Some("NVIDIA H100".into()),
            device_uuid: Some(uuid.into()),
            throttle_reasons: None,
            driver_version: None,
            nvrtc_version: None,
            host: None,
            samples_ms: Some(samples),
            intensity_flop_per_byte: None,
        }
    }

    #[test]
    fn comparisons_say_whether_a_difference_is_real() {
        let slow: Vec<f64> = (0..20).map(|i| 2.0 + 0.002 * i as f64).collect();
        let fast: Vec<f64> = (0..20).map(|i| 1.0 + 0.002 * i as f64).collect();
        let out = compare_rows(
            "gemm",
            &stored("r1", "a", slow.clone(), "GPU-1"),
            &stored("r1", "b", fast, "GPU-1"),
        )
        .unwrap();
        assert!(out.significant);
        assert!(out.speedup > 1.9 && out.ci_low > 1.0);
        assert!(out.verdict.starts_with("b is "), "{}", out.verdict);
        assert!(out.notes.is_empty());
        let same: Vec<f64> = (0..20)
            .map(|i| 2.0 + 0.002 * ((i * 7) % 20) as f64)
            .collect();
        let out = compare_rows(
            "gemm",
            &stored("r1", "a", slow, "GPU-1"),
            &stored("r2", "a", same, "GPU-2"),
        )
        .unwrap();
        assert!(!out.significant);
        assert!(out.verdict.starts_with("No significant difference"));
        assert_eq!(out.notes.len(), 1);
    }

    #[test]
    fn compare_and_history_read_the_store() {
        let app = no_gpu_app();
        let ctx = OpContext::detached(app.clone());
        let e = Compare
            .run(
                &ctx,
                CompareInput {
                    target: "gemm".into(),
                    candidate_variant: Some("cublas_bf16".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        let e = Compare
            .run(
                &ctx,
                CompareInput {
                    target: "gemm".into(),
                    variant: Some("cublas_bf16".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        let e = Compare
            .run(
                &ctx,
                CompareInput {
                    target: "gemm".into(),
                    candidate_variant: Some("nope".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        let h = History.run(&ctx, HistoryInput::default()).unwrap();
        assert!(h.rows.is_empty() && h.runs.is_empty());
        let e = History
            .run(
                &ctx,
                HistoryInput {
                    limit: Some(0),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
    }
}
