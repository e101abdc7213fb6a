//! Operations of the `analyze` domain: Pareto fronts, leaderboards, scaling,
//! what-if constraints, technique stacking and power, over benchmark history
//! and the planner's models.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::advisor_inputs::{gpu_or_local, peaks_for, resolve_gpu, resolve_model};
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, OpSpec, Operation};
use aisp_knowledge::Dtype;
use aisp_knowledge::gpus::{self, Gpu};
use aisp_knowledge::models::Architecture;
use aisp_knowledge::techniques;
use aisp_planner::ModelSummary;
use aisp_planner::links::Links;
use aisp_planner::round;
use aisp_planner::training::{self, Pins, TrainingSetup};
use aisp_profile::rules::Finding;
use aisp_profile::summary::NameKey;
use aisp_report::analysis::boards::{
    self, Board, Objective, ParetoGroup, PowerEntry, ScalingSeries,
};
use aisp_report::analysis::bottleneck::{self, DeviceBottleneck};
use aisp_report::analysis::history::{self, Filter, NO_HISTORY, Row};
use aisp_report::analysis::retarget::{self, BoundTotal, KernelEstimate};

pub const OPERATIONS: &[&dyn DynOperation] = &[
    &BottlenecksOp,
    &Retarget,
    &Pareto,
    &Leaderboards,
    &Scaling,
    &Whatif,
    &Stacking,
    &Power,
    &super::profile_capture::MemoryPatternsOp,
    &super::profile_analyses::DataloaderOp,
];

fn history_rows(ctx: &OpContext, f: &Filter) -> Result<Vec<Row>, OpError> {
    let store = ctx.app().store()?;
    history::load(store, f).map_err(|e| OpError::internal(e.to_string()))
}

/// Filters shared by the history operations.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryInput {
    /// Only this benchmark target.
    #[serde(default)]
    pub target: Option<String>,
    /// Only devices whose name contains this (case-insensitive), e.g. "H100".
    #[serde(default)]
    pub device: Option<String>,
    /// Only this run.
    #[serde(default)]
    pub run_id: Option<String>,
}

impl HistoryInput {
    fn filter(&self) -> Filter {
        Filter {
            target: self.target.clone(),
            device: self.device.clone(),
            run_id: self.run_id.clone(),
            include_unverified: false,
        }
    }
}

// ------------------------------------------------------------------ bottlenecks

pub struct BottlenecksOp;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BottlenecksInput {
    /// Nsight Systems export (.sqlite, or .nsys-rep with nsys installed) of the workload.
    #[serde(default)]
    pub path: Option<String>,
    /// Only this CUDA device of the profile.
    #[serde(default)]
    pub device: Option<i64>,
    /// Only this process id.
    #[serde(default)]
    pub process: Option<i64>,
    /// Analyse inside the NVTX ranges with this name (first start → last end).
    #[serde(default)]
    pub nvtx_range: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct BottlenecksOutput {
    /// Per device: classification, time shares and evidence.
    pub devices: Vec<DeviceBottleneck>,
    /// Profile rule findings, most time at stake first.
    pub findings: Vec<Finding>,
    /// Measured roofs in benchmark history for the profiled GPU (what "memory-bound" is measured against).
    pub measured_roofs: Vec<String>,
    /// This machine's GPU, as probed.
    pub local_gpu: Option<String>,
    pub verdict: String,
    /// What data is missing and which tool gets it.
    pub missing: Vec<String>,
    pub method: String,
}

impl Operation for BottlenecksOp {
    type Input = BottlenecksInput;
    type Output = BottlenecksOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Classify the bottleneck",
        summary: "Host-, launch-, compute-, memory- or communication-bound, per GPU, from a profile's time accounting with evidence (busy %, kernel classes, short kernels, rule findings) plus measured roofs from benchmark history.",
        description: "Classifies what limits a profiled run on each device: host-bound (GPU idle; launch-bound when most kernels run under 5 us), compute, memory or communication, with busy %, kernel-class shares, the top kernel and the top findings as evidence. Use for 'why is my training slow?' with a profile path. Seconds on large profiles.",
        intents: &[
            "bottleneck",
            "am i compute bound",
            "memory bound or compute bound",
            "compute bound or memory bound",
            "what limits my run",
            "gpu underutilized",
            "host bound",
            "launch bound",
            "communication bound",
            "what is the bottleneck",
        ],
        example: r#"{"path": "train.sqlite"}"#,
        positional: &["path"],
        tier: crate::registry::Tier::Default,
        ..OpSpec::new("analyze", "bottlenecks")
    };

    fn run(&self, ctx: &OpContext, i: BottlenecksInput) -> Result<BottlenecksOutput, OpError> {
        let local = ctx.app().gpu().devices.first().map(|d| d.name.clone());
        let mut missing = Vec::new();
        let Some(path) = i.path.as_deref() else {
            missing.push("a profile of the workload: capture one with the profile domain (nsys) and pass its path; without it nothing here can say what bounds the workload".into());
            if local.is_none() {
                missing.push(format!(
                    "no local GPU: {}",
                    ctx.app().gpu().reason.clone().unwrap_or_default()
                ));
            }
            return Ok(BottlenecksOutput {
                devices: vec![],
                findings: vec![],
                measured_roofs: vec![],
                local_gpu: local,
                verdict: "insufficient data: no profile given".into(),
                missing,
                method: String::new(),
            });
        };
        let p = super::profile::open_profile(ctx, path)?;
        let scope = aisp_profile::Scope {
            device: i.device,
            process: i.process,
            start_ns: None,
            end_ns: None,
            nvtx_range: i.nvtx_range.clone(),
        };
        let b = bottleneck::analyze(&p, &scope).map_err(OpError::from)?;
        let mut roofs = Vec::new();
        if let Ok(store) = ctx.app().store() {
            let names: Vec<String> = b.devices.iter().filter_map(|d| d.gpu.clone()).collect();
            for r in history::load(
                store,
                &Filter {
                    target: Some("roof".into()),
                    ..Default::default()
                },
            )
            .unwrap_or_default()
            {
                if r.device_name.as_ref().is_some_and(|n| names.contains(n)) {
                    roofs.push(format!(
                        "{} {}: {:?} {} ({})",
                        r.device_name.clone().unwrap_or_default(),
                        r.variant,
                        r.value,
                        r.metric.clone().unwrap_or_default(),
                        r.created_at
                    ));
                }
            }
            if roofs.is_empty() && !names.is_empty() {
                missing.push(format!("no measured roofs for {}: run the hw domain's roofs on that GPU to compare kernels with what it really reaches", names.join(", ")));
            }
        }
        Ok(BottlenecksOutput {
            verdict: b.verdict,
            devices: b.devices,
            findings: b.findings,
            measured_roofs: roofs,
            local_gpu: local,
            missing,
            method: "window = the profile rules' analysis window per device; idle = window − GPU busy union; busy split by kernel class in proportion to class kernel time (compute: GEMM, attention; memory: elementwise, reduction, copy; communication: collectives); the largest share names the bottleneck".into(),
        })
    }
}

// ------------------------------------------------------------------ retarget

pub struct Retarget;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetargetInput {
    /// Nsight Systems export (.sqlite, or .nsys-rep with nsys installed).
    pub path: String,
    /// Catalog GPU id to estimate for, e.g. `b200`, `h100-sxm`, `l40s`.
    pub target_gpu: String,
    /// Catalog GPU id the profile ran on (default: read from the profile).
    #[serde(default)]
    pub source_gpu: Option<String>,
    /// Only this CUDA device of the profile.
    #[serde(default)]
    pub device: Option<i64>,
    /// Only inside the NVTX ranges with this name.
    #[serde(default)]
    pub nvtx_range: Option<String>,
    /// Kernel groups to list individually (default 30); the rest is kept as measured.
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RetargetOutput {
    pub source_gpu: String,
    /// How the source GPU was identified.
    pub source_from: String,
    pub target_gpu: String,
    pub kernels: Vec<KernelEstimate>,
    pub by_bound: Vec<BoundTotal>,
    pub measured_kernel_ms: f64,
    pub estimated_kernel_ms: f64,
    /// measured / estimated kernel time (>1: faster on the target).
    pub kernel_speedup: f64,
    pub groups_beyond_limit: usize,
    pub assumptions: Vec<String>,
}

impl Operation for Retarget {
    type Input = RetargetInput;
    type Output = RetargetOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Retarget a profile to another GPU",
        summary: "Estimates a real profile's kernel time on another GPU: each kernel classified compute-, memory-, interconnect- or launch-bound from its class and measured time, rescaled by the matching datasheet peak ratio.",
        description: "Takes an Nsight Systems profile and a target GPU from the catalog. The source GPU is read from the \
profile (or given). Each kernel group is classified from its demangled name and measured duration: tensor-core GEMMs \
and attention scale with the dense tensor peak at their precision, fp32 SIMT GEMMs with the FP32 vector peak, \
elementwise/reduction/copy kernels with HBM bandwidth, collectives with the per-direction NVLink figure, kernels under \
5 µs on average stay as measured (launch-bound), unknown classes stay as measured. Returns per-kernel and total \
estimates with the peaks used (each from the catalog with its source), totals per bound, and the assumptions — the \
main one being that each kernel reaches the same fraction of peak on the target. Use it to ask 'what would this step \
cost on an H200 / B200 / L40S?'. Seconds on large profiles.",
        intents: &[
            "retarget profile",
            "on another gpu",
            "estimate on another gpu",
            "would a faster gpu help",
            "run on a different gpu",
            "instead of my gpu",
            "upgrade the gpu",
            "how fast on h100",
            "port to b200",
        ],
        example: r#"{"path": "train.sqlite", "target_gpu": "b200"}"#,
        positional: &["path", "target_gpu"],
        ..OpSpec::new("analyze", "retarget")
    };

    fn run(&self, ctx: &OpContext, i: RetargetInput) -> Result<RetargetOutput, OpError> {
        let dst = resolve_gpu(&i.target_gpu)?;
        let p = super::profile::open_profile(ctx, &i.path)?;
        let scope = aisp_profile::Scope {
            device: i.device,
            process: None,
            start_ns: None,
            end_ns: None,
            nvtx_range: i.nvtx_range.clone(),
        };
        let rs = p.resolve(&scope).map_err(OpError::from)?;
        let (src, from) = match &i.source_gpu {
            Some(g) => (resolve_gpu(g)?, "given".to_string()),
            None => {
                let gpus_in = aisp_profile::info::gpus(&p).map_err(OpError::from)?;
                let names: Vec<String> = gpus_in
                    .iter()
                    .filter(|g| i.device.is_none_or(|d| d == g.device))
                    .filter_map(|g| g.name.clone())
                    .collect();
                let matched = names
                    .iter()
                    .find_map(|n| gpus::match_device_name(n).map(|g| (g, n.clone())));
                match matched {
                    Some((g, n)) => (g, format!("profile records \"{n}\"")),
                    None => {
                        return Err(OpError::invalid_input(
                            if names.is_empty() {
                                "the profile does not record its GPU's name".to_string()
                            } else {
                                format!(
                                    "the profile's GPU ({}) is not in the catalog",
                                    names.join(", ")
                                )
                            },
                            format!(
                                "Pass source_gpu with a catalog id: {}.",
                                gpus::ids().join(", ")
                            ),
                        ));
                    }
                }
            }
        };
        let k = aisp_profile::kernels::kernels(
            &p,
            &rs,
            NameKey::Short,
            i.limit.unwrap_or(30).clamp(1, 500),
        )
        .map_err(OpError::from)?;
        let r = retarget::retarget(&k, src, dst);
        Ok(RetargetOutput {
            source_gpu: r.source_gpu,
            source_from: from,
            target_gpu: r.target_gpu,
            kernels: r.kernels,
            by_bound: r.by_bound,
            measured_kernel_ms: round(r.measured_kernel_ns as f64 / 1e6, 4),
            estimated_kernel_ms: round(r.estimated_kernel_ns as f64 / 1e6, 4),
            kernel_speedup: r.kernel_speedup,
            groups_beyond_limit: r.groups_beyond_limit,
            assumptions: r.assumptions,
        })
    }
}

// ------------------------------------------------------------------ pareto

pub struct Pareto;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParetoInput {
    /// Only this benchmark target.
    #[serde(default)]
    pub target: Option<String>,
    /// Only devices whose name contains this.
    #[serde(default)]
    pub device: Option<String>,
    /// Only this run.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Objectives to minimize: time, memory, energy (default time and memory).
    #[serde(default)]
    pub objectives: Option<Vec<Objective>>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ParetoOutput {
    pub objectives: Vec<Objective>,
    /// One front per (target, size, device).
    pub groups: Vec<ParetoGroup>,
    pub rows_considered: usize,
    /// Set when there is nothing to analyze: what is missing and which tool gets it.
    pub missing: Option<String>,
}

impl Operation for Pareto {
    type Input = ParetoInput;
    type Output = ParetoOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Pareto fronts over benchmark history",
        summary: "Variants on the time / memory / energy Pareto front for each benchmark target, size and GPU, with which variant dominates each of the rest.",
        description: "Reads verified benchmark results from the store (the newest per target, variant, size and GPU) and, \
within each target+size+GPU group, finds the variants no other variant beats on every chosen objective — median time, \
peak memory, energy per run (mean board power × median time from the recorded NVML telemetry). Each dominated \
variant names the one that dominates it; variants missing an objective's measurement are listed, not dropped \
silently. With no history it says which tools record it. Instant.",
        intents: &[
            "pareto front",
            "best tradeoff",
            "speed vs memory",
            "time versus memory",
            "which variant is best",
            "speed vs memory vs energy",
            "dominated variants",
        ],
        example: r#"{"objectives": ["time", "memory"]}"#,
        ..OpSpec::new("analyze", "pareto")
    };

    fn run(&self, ctx: &OpContext, i: ParetoInput) -> Result<ParetoOutput, OpError> {
        let f = HistoryInput {
            target: i.target,
            device: i.device,
            run_id: i.run_id,
        }
        .filter();
        let rows = history::latest(history_rows(ctx, &f)?);
        let objectives = i
            .objectives
            .unwrap_or(vec![Objective::Time, Objective::Memory]);
        if objectives.is_empty() {
            return Err(OpError::invalid_input(
                "no objectives",
                "Pass objectives like [\"time\", \"energy\"].",
            ));
        }
        Ok(ParetoOutput {
            groups: boards::pareto(&rows, &objectives),
            rows_considered: rows.len(),
            missing: rows.is_empty().then(|| NO_HISTORY.to_string()),
            objectives,
        })
    }
}

// ------------------------------------------------------------------ leaderboards

pub struct Leaderboards;

#[derive(Debug, Serialize, JsonSchema)]
pub struct LeaderboardsOutput {
    pub boards: Vec<Board>,
    pub rows_considered: usize,
    pub missing: Option<String>,
}

impl Operation for Leaderboards {
    type Input = HistoryInput;
    type Output = LeaderboardsOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Benchmark leaderboards",
        summary: "Variants of each benchmark target ranked by median time per size and GPU, with speedup over the baseline, CV and percent of roof.",
        description: "Ranks the newest verified result of every variant within each benchmark target, size and GPU by \
median time, with its coefficient of variation, reported metric (GB/s, TFLOP/s), percent of the measured roof, the \
speedup over the target's baseline variant, and the run it came from. Filter by target, device or run. With no \
history it says which tools record it. Instant.",
        intents: &[
            "leaderboard",
            "fastest variant",
            "rank the variants",
            "benchmark ranking",
            "speedup over baseline",
            "best variant per size",
        ],
        example: r#"{"device": "H100"}"#,
        ..OpSpec::new("analyze", "leaderboards")
    };

    fn run(&self, ctx: &OpContext, i: HistoryInput) -> Result<LeaderboardsOutput, OpError> {
        let rows = history::latest(history_rows(ctx, &i.filter())?);
        Ok(LeaderboardsOutput {
            boards: boards::leaderboards(&rows),
            rows_considered: rows.len(),
            missing: rows.is_empty().then(|| NO_HISTORY.to_string()),
        })
    }
}

// ------------------------------------------------------------------ power

pub struct Power;

#[derive(Debug, Serialize, JsonSchema)]
pub struct PowerOutput {
    pub entries: Vec<PowerEntry>,
    /// Results without recorded power (no NVML energy counter during the run).
    pub without_power: usize,
    pub method: String,
    pub missing: Option<String>,
}

impl Operation for Power {
    type Input = HistoryInput;
    type Output = PowerOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Performance per watt",
        summary: "Energy per run, mean power and performance per watt (GB/s/W, TFLOP/s/W) for benchmark results, and energy relative to each target's baseline.",
        description: "Uses the NVML energy counter recorded with each benchmark result: mean board power over the \
measurement, energy per run (mean power × median time), efficiency (the result's GB/s or TFLOP/s per watt) and energy \
per run relative to the target's baseline variant (0.6 = 40% less). Results recorded without an energy counter are \
counted, not guessed. With no history it says which tools record it. Instant.",
        intents: &[
            "performance per watt",
            "energy efficiency",
            "power usage of benchmarks",
            "joules per run",
            "watts",
        ],
        example: r#"{"target": "copy_bandwidth"}"#,
        ..OpSpec::new("analyze", "power")
    };

    fn run(&self, ctx: &OpContext, i: HistoryInput) -> Result<PowerOutput, OpError> {
        let rows = history::latest(history_rows(ctx, &i.filter())?);
        let (entries, without) = boards::power(&rows);
        let missing = if rows.is_empty() {
            Some(NO_HISTORY.to_string())
        } else if entries.is_empty() {
            Some("no result has recorded power: run benchmarks where NVML's total-energy counter is available (Volta or newer, driver access)".into())
        } else {
            None
        };
        Ok(PowerOutput {
            entries,
            without_power: without,
            method: "mean power = board energy over the measurement / its wall time (includes L2 flushes and gaps between repetitions, so it slightly understates kernel power); energy per run = mean power × median time".into(),
            missing,
        })
    }
}

// ------------------------------------------------------------------ scaling

pub struct Scaling;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScalingInput {
    /// History mode: only this benchmark target.
    #[serde(default)]
    pub target: Option<String>,
    /// History mode: only devices whose name contains this.
    #[serde(default)]
    pub device: Option<String>,
    /// Planner mode: catalog model id or `hf:org/name` (with gpu and gpu_counts).
    #[serde(default)]
    pub model: Option<String>,
    /// Planner mode: a custom model shape.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Planner mode: catalog GPU id (default: the local GPU).
    #[serde(default)]
    pub gpu: Option<String>,
    /// Planner mode: GPU counts to compare (default 8, 16, 32, 64).
    #[serde(default)]
    pub gpu_counts: Option<Vec<u32>>,
    /// Planner mode: GPUs per node (default 8).
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// Planner mode: sequence length (default 4096).
    #[serde(default)]
    #[schemars(range(max = 100000000))]
    pub seq_len: Option<u32>,
    /// Planner mode: sequences per step, kept fixed across counts (default 4M tokens / seq_len).
    #[serde(default)]
    pub global_batch: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ScalePoint {
    pub gpus: u32,
    /// Best layout at this count, or why none fits.
    pub layout: Option<String>,
    pub tokens_per_s: Option<f64>,
    pub mfu_pct: Option<f64>,
    /// Tokens/s per GPU relative to the smallest count that fits, 0–100.
    pub scaling_efficiency_pct: Option<f64>,
    pub note: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ScalingOutput {
    /// `history` or `planner`.
    pub mode: String,
    pub series: Vec<ScalingSeries>,
    pub model: Option<ModelSummary>,
    pub gpu: Option<String>,
    pub points: Vec<ScalePoint>,
    pub missing: Option<String>,
    pub assumptions: Vec<String>,
}

impl Operation for Scaling {
    type Input = ScalingInput;
    type Output = ScalingOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Scaling with size or GPU count",
        summary: "How time scales with problem size (fit over benchmark history) or how training throughput scales with GPU count (the planner's best layout at each count).",
        description: "Two modes. History (default): for every benchmark target and variant measured at two or more sizes, \
fits log(time) against log(size) and reads the exponent (≈1 throughput-bound, <0.5 overhead-bound, >1 superlinear). \
Planner (when model is given): runs the distributed planner at each GPU count (default 8, 16, 32, 64) with the \
global batch fixed, and reports the best layout, tokens/s, MFU and scaling efficiency per GPU relative to the \
smallest count that fits — with the planner's assumptions. Use it to predict scale-out or to understand a kernel's \
size behaviour. History mode is instant; planner mode takes up to a few seconds.",
        intents: &[
            "scaling efficiency",
            "how does it scale with gpus",
            "scale to more gpus",
            "predict scaling",
            "scale out training",
            "throughput vs gpu count",
            "time vs problem size",
            "weak scaling",
            "strong scaling",
        ],
        example: r#"{"model": "llama-3.1-8b", "gpu": "h100-sxm", "gpu_counts": [8, 16, 32]}"#,
        ..OpSpec::new("analyze", "scaling")
    };

    fn run(&self, ctx: &OpContext, i: ScalingInput) -> Result<ScalingOutput, OpError> {
        if i.model.is_none() && i.architecture.is_none() {
            let rows = history::latest(history_rows(
                ctx,
                &Filter {
                    target: i.target,
                    device: i.device,
                    ..Default::default()
                },
            )?);
            let series = boards::size_scaling(&rows);
            let missing = if rows.is_empty() {
                Some(NO_HISTORY.to_string())
            } else if series.is_empty() {
                Some("no target was measured at two or more sizes: run aisp_benchmark_run with several sizes, or pass model for planner mode".into())
            } else {
                None
            };
            return Ok(ScalingOutput {
                mode: "history".into(),
                series,
                model: None,
                gpu: None,
                points: vec![],
                missing,
                assumptions: vec!["least-squares fit of log(median time) against log(size); size is the product of the numbers in the recorded size".into()],
            });
        }
        let model = resolve_model(i.model.as_deref(), i.architecture.as_ref(), None)?;
        let arch = model
            .arch_for("planner scaling")
            .map_err(super::advisor_inputs::model_error)?
            .clone();
        let gpu = gpu_or_local(ctx, i.gpu.as_deref())?;
        let gpn = i.gpus_per_node.unwrap_or(8).max(1);
        let counts = i.gpu_counts.unwrap_or(vec![8, 16, 32, 64]);
        if counts.is_empty() || counts.len() > 12 || counts.contains(&0) {
            return Err(OpError::invalid_input(
                "gpu_counts needs 1 to 12 positive counts",
                "Pass e.g. [8, 16, 32, 64].",
            ));
        }
        let seq = i.seq_len.unwrap_or(4096).max(1);
        let batch = i.global_batch.unwrap_or(
            ((training::DEFAULT_GLOBAL_BATCH_TOKENS / seq as f64).round() as u32).max(1),
        );
        let peaks = peaks_for(ctx, gpu, Dtype::Bf16, true)?;
        let mut points = Vec::new();
        let mut base: Option<(u32, f64)> = None;
        for &n in &counts {
            ctx.check_cancelled()?;
            let (nodes, per) = if n <= gpn {
                (1, n)
            } else if n.is_multiple_of(gpn) {
                (n / gpn, gpn)
            } else {
                points.push(ScalePoint {
                    gpus: n,
                    layout: None,
                    tokens_per_s: None,
                    mfu_pct: None,
                    scaling_efficiency_pct: None,
                    note: Some(format!("{n} is not a multiple of {gpn} GPUs per node")),
                });
                continue;
            };
            let links = Links::for_gpu(gpu, per, None, None).map_err(|e| {
                OpError::invalid_input(e.to_string(), "Pick a GPU with known links.")
            })?;
            let setup = TrainingSetup {
                model: &model,
                arch: &arch,
                gpu,
                nodes,
                gpus_per_node: per,
                seq_len: seq,
                global_batch: batch,
                dtype: Dtype::Bf16,
                links,
                peak_tflops: peaks.tflops.value,
                compute_efficiency: training::DEFAULT_COMPUTE_EFFICIENCY,
                usable_bytes: gpu.memory_bytes().unwrap_or(0.0)
                    * training::DEFAULT_USABLE_MEMORY_FRACTION,
                flash_attention: true,
                fixed: Pins::default(),
            };
            let r = training::search(&setup, 1);
            match r.candidates.first() {
                Some(best) => {
                    let per_gpu = best.tokens_per_s / n as f64;
                    if base.is_none() {
                        base = Some((n, per_gpu));
                    }
                    points.push(ScalePoint {
                        gpus: n,
                        layout: Some(best.description.clone()),
                        tokens_per_s: Some(best.tokens_per_s),
                        mfu_pct: Some(best.mfu_pct),
                        scaling_efficiency_pct: base.map(|(_, b)| round(per_gpu / b * 100.0, 1)),
                        note: None,
                    });
                }
                None => points.push(ScalePoint {
                    gpus: n,
                    layout: None,
                    tokens_per_s: None,
                    mfu_pct: None,
                    scaling_efficiency_pct: None,
                    note: Some(format!("no layout fits ({} evaluated)", r.evaluated)),
                }),
            }
        }
        Ok(ScalingOutput {
            mode: "planner".into(),
            series: vec![],
            model: Some(model.summary()),
            gpu: Some(gpu.id.clone()),
            points,
            missing: None,
            assumptions: vec![
                format!(
                    "global batch fixed at {batch} sequences of {seq} tokens at every count (strong scaling)"
                ),
                format!(
                    "planner defaults: compute efficiency {} of the {} TFLOP/s BF16 peak ({}), 90% usable memory, NVLink inside a node, 50 GB/s per GPU between nodes",
                    training::DEFAULT_COMPUTE_EFFICIENCY,
                    peaks.tflops.value,
                    peaks.tflops.origin
                ),
                "see aisp_distributed_plan for the full assumptions and the rejected layouts"
                    .into(),
            ],
        })
    }
}

// ------------------------------------------------------------------ whatif

pub struct Whatif;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WhatifInput {
    /// Catalog model id or `hf:org/name` to serve (or `architecture`); without one, only benchmark history is filtered.
    #[serde(default)]
    pub model: Option<String>,
    /// A custom model shape.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Memory each GPU may use, GB.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e6))]
    pub max_vram_gb: Option<f64>,
    /// Per-token decode latency limit, ms (history mode: median time limit).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e9))]
    pub max_latency_ms: Option<f64>,
    /// Total decode tokens/s required (history mode: not used).
    #[serde(default)]
    #[schemars(range(min = 0, max = 1e12))]
    pub min_tokens_per_s: Option<f64>,
    /// Most GPUs per replica (default 8).
    #[serde(default)]
    pub max_gpus: Option<u32>,
    /// Catalog GPU ids to consider (default: every GPU with public peaks).
    #[serde(default)]
    pub gpu_types: Option<Vec<String>>,
    /// Tokens of context per sequence (default 2048).
    #[serde(default)]
    #[schemars(range(max = 1000000000))]
    pub context_tokens: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct WhatifOutput {
    pub model: Option<ModelSummary>,
    /// Configurations meeting every constraint, cheapest (or fewest GPUs) first.
    pub configurations: Vec<aisp_planner::whatif::WhatifConfig>,
    pub configurations_considered: usize,
    /// Benchmark results meeting max_latency_ms / max_vram_gb.
    pub history_matches: Vec<String>,
    /// When nothing meets the constraints: techniques that move the binding constraint.
    pub suggestions: Vec<String>,
    pub assumptions: Vec<String>,
}

impl Operation for Whatif {
    type Input = WhatifInput;
    type Output = WhatifOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "What-if: configurations that meet constraints",
        summary: "Given limits on VRAM per GPU, per-token latency and required throughput, lists the GPU × count × weight format × KV format configurations that satisfy them (roofline), plus benchmark results that do.",
        description: "For a model, enumerates serving configurations — every cataloged GPU with public peaks (or the ones \
you list) × TP 1..max_gpus × weight format (bf16, fp8, int8, awq, gptq, where supported) × KV format (bf16, fp8) — and \
for each finds the largest batch whose memory per GPU stays under max_vram_gb (and the GPU), whose decode step stays \
under max_latency_ms, then checks min_tokens_per_s. Returns the configurations that satisfy everything, cheapest \
first when prices are public. Without a model it filters benchmark history by median time and peak memory instead. \
When nothing qualifies it names techniques that relax the binding limit. Instant.",
        intents: &[
            "what if",
            "meet latency target",
            "fit in vram budget",
            "which gpu meets my requirements",
            "constraints",
            "under a latency budget",
            "which gpu should i buy for serving",
        ],
        example: r#"{"model": "llama-3.1-70b", "max_latency_ms": 30, "min_tokens_per_s": 2000}"#,
        ..OpSpec::new("analyze", "whatif")
    };

    fn run(&self, ctx: &OpContext, i: WhatifInput) -> Result<WhatifOutput, OpError> {
        for (name, v) in [
            ("max_vram_gb", i.max_vram_gb),
            ("max_latency_ms", i.max_latency_ms),
            ("min_tokens_per_s", i.min_tokens_per_s),
        ] {
            if let Some(v) = v
                && !(v.is_finite() && v > 0.0)
            {
                return Err(OpError::invalid_input(
                    format!("{name} must be positive"),
                    "Pass a positive limit or leave it out.",
                ));
            }
        }
        let mut history_matches = Vec::new();
        if let Ok(store) = ctx.app().store()
            && (i.max_latency_ms.is_some() || i.max_vram_gb.is_some())
        {
            let rows =
                history::latest(history::load(store, &Filter::default()).unwrap_or_default());
            for r in rows {
                let lat_ok = i
                    .max_latency_ms
                    .is_none_or(|m| r.median_ms.is_some_and(|t| t <= m));
                let mem_ok = i
                    .max_vram_gb
                    .is_none_or(|m| r.peak_memory_bytes.is_some_and(|b| b as f64 / 1e9 <= m));
                if lat_ok && mem_ok {
                    history_matches.push(format!(
                        "{}: {:?} ms, {:?} bytes peak",
                        r.label(),
                        r.median_ms,
                        r.peak_memory_bytes
                    ));
                }
            }
        }
        if i.model.is_none() && i.architecture.is_none() {
            return Ok(WhatifOutput {
                model: None,
                configurations: vec![],
                configurations_considered: 0,
                suggestions: if history_matches.is_empty() { vec![format!("pass model to enumerate serving configurations; history: {NO_HISTORY}")] } else { vec![] },
                history_matches,
                assumptions: vec!["history mode: max_latency_ms compares with each result's median time, max_vram_gb with its peak memory".into()],
            });
        }
        let model = resolve_model(i.model.as_deref(), i.architecture.as_ref(), None)?;
        let context = i.context_tokens.unwrap_or(2048).max(1);
        let max_gpus = i.max_gpus.unwrap_or(8).max(1);
        let list: Vec<&Gpu> = match &i.gpu_types {
            Some(ids) => ids
                .iter()
                .map(|g| resolve_gpu(g))
                .collect::<Result<_, _>>()?,
            None => gpus::all()
                .iter()
                .filter(|g| {
                    g.memory_bandwidth_gb_per_s.value.is_some() && g.memory_bytes().is_some()
                })
                .collect(),
        };
        let search = aisp_planner::whatif::search(
            &model,
            &list,
            &aisp_planner::whatif::Limits {
                max_vram_gb: i.max_vram_gb,
                max_latency_ms: i.max_latency_ms,
                min_tokens_per_s: i.min_tokens_per_s,
                context_tokens: context,
                max_gpus,
            },
        );
        Ok(WhatifOutput {
            model: Some(model.summary()),
            configurations: search.configurations,
            configurations_considered: search.considered,
            history_matches,
            suggestions: search.suggestions,
            assumptions: vec![
                format!("decode roofline at {} tokens of context, efficiencies 0.7 (compute) / 0.9 (memory), datasheet peaks from the GPU catalog", context),
                "memory per GPU: weights / TP + KV for the batch; capped at 90% of the GPU and at max_vram_gb".into(),
                "prices: the low end of the catalog's dated on-demand range; null where no public price".into(),
            ],
        })
    }
}

// ------------------------------------------------------------------ stacking

pub struct Stacking;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StackingInput {
    /// Technique ids to check pairwise (default: the whole catalog).
    #[serde(default)]
    pub techniques: Option<Vec<String>>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Pair {
    pub a: String,
    pub b: String,
    pub reason: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct StackingOutput {
    pub techniques: usize,
    pub conflicts: Vec<Pair>,
    pub synergies: Vec<Pair>,
    /// Techniques sharing a component: they do not multiply (see aisp_optimize_compound).
    pub same_component: Vec<(String, Vec<String>)>,
}

impl Operation for Stacking {
    type Input = StackingInput;
    type Output = StackingOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Which techniques stack",
        summary: "Pairwise conflicts and synergies among techniques (given ids or the whole catalog), with reasons, and which ones act on the same component.",
        description: "Checks every pair of the given techniques (or the whole catalog) for conflicts (alternatives for the \
same thing, or combinations frameworks do not support, each with the reason) and synergies (with why they help each \
other), and groups techniques by the step component they act on — those do not multiply. For a combined effect \
estimate use aisp_optimize_compound. Instant.",
        intents: &[
            "which optimizations stack",
            "compatible techniques",
            "conflicting optimizations",
            "synergies",
            "pairwise conflicts",
        ],
        example: r#"{"techniques": ["flash-attention-2", "flash-attention-3", "torch-compile", "cuda-graphs"]}"#,
        ..OpSpec::new("analyze", "stacking")
    };

    fn run(&self, _ctx: &OpContext, i: StackingInput) -> Result<StackingOutput, OpError> {
        let ids: Vec<String> = match i.techniques {
            Some(v) => {
                let unknown = aisp_planner::advice::unknown_ids(&v);
                if !unknown.is_empty() {
                    return Err(OpError::invalid_input(
                        format!(
                            "unknown technique id(s): {}; known: {}",
                            unknown.join(", "),
                            techniques::ids().join(", ")
                        ),
                        "Use ids from aisp_optimize_techniques.",
                    ));
                }
                v
            }
            None => techniques::ids().into_iter().map(String::from).collect(),
        };
        let mut conflicts = Vec::new();
        let mut synergies = Vec::new();
        for (k, a) in ids.iter().enumerate() {
            for b in &ids[k + 1..] {
                if let Some(r) = techniques::conflict(a, b) {
                    conflicts.push(Pair {
                        a: a.clone(),
                        b: b.clone(),
                        reason: r.into(),
                    });
                }
                if let Some(r) = techniques::synergy(a, b) {
                    synergies.push(Pair {
                        a: a.clone(),
                        b: b.clone(),
                        reason: r.into(),
                    });
                }
            }
        }
        let mut comps: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for id in &ids {
            if let Some(t) = techniques::by_id(id) {
                comps
                    .entry(t.component.clone())
                    .or_default()
                    .push(id.clone());
            }
        }
        Ok(StackingOutput {
            techniques: ids.len(),
            conflicts,
            synergies,
            same_component: comps.into_iter().filter(|(_, v)| v.len() > 1).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppState;
    use aisp_report::analysis::history::testing::insert;

    fn ctx() -> OpContext {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(aisp_hw::gpu::GpuAvailability::unavailable(
            "test host",
            false,
        ));
        OpContext::detached(app)
    }

    fn run<O: Operation>(
        c: &OpContext,
        op: &O,
        v: serde_json::Value,
    ) -> Result<O::Output, OpError> {
        op.run(c, serde_json::from_value(v).unwrap())
    }

    #[test]
    fn history_ops_say_what_is_missing_then_use_the_rows() {
        let c = ctx();
        let p = run(&c, &Pareto, serde_json::json!({})).unwrap();
        assert!(p.missing.as_deref().unwrap().contains("aisp_benchmark_run"));
        let store = c.app().store().unwrap();
        let d = "NVIDIA H100 80GB HBM3";
        insert(
            store,
            "r1",
            "2026-01-01T00:00:00Z",
            "reduce",
            "atomic",
            "baseline",
            "n=1048576",
            0.8,
            "gb_per_s",
            5.2,
            None,
            Some(4_194_304),
            Some(250.0),
            d,
        );
        insert(
            store,
            "r1",
            "2026-01-01T00:00:00Z",
            "reduce",
            "warp_shuffle",
            "optimized",
            "n=1048576",
            0.2,
            "gb_per_s",
            21.0,
            None,
            Some(4_194_304),
            Some(300.0),
            d,
        );
        let l = run(&c, &Leaderboards, serde_json::json!({"target": "reduce"})).unwrap();
        assert_eq!(l.boards[0].entries[0].variant, "warp_shuffle");
        assert_eq!(l.boards[0].entries[0].speedup_vs_baseline, Some(4.0));
        let p = run(
            &c,
            &Pareto,
            serde_json::json!({"objectives": ["time", "energy"]}),
        )
        .unwrap();
        assert_eq!(p.groups[0].front.len(), 1);
        assert_eq!(
            p.groups[0].dominated[0].dominated_by.as_deref(),
            Some("warp_shuffle")
        );
        let w = run(&c, &Power, serde_json::json!({})).unwrap();
        // 300 W × 0.2 ms = 60 mJ vs 250 W × 0.8 ms = 200 mJ: 0.3 of the baseline's energy.
        let ws = w
            .entries
            .iter()
            .find(|e| e.variant == "warp_shuffle")
            .unwrap();
        assert_eq!(ws.energy_per_run_mj, Some(60.0));
        assert_eq!(ws.energy_vs_baseline, Some(0.3));
        let s = run(&c, &Scaling, serde_json::json!({})).unwrap();
        assert!(s.missing.unwrap().contains("two or more sizes"));
    }

    #[test]
    fn planner_scaling_reports_efficiency() {
        let out = run(&ctx(), &Scaling, serde_json::json!({"model": "llama-3.1-8b", "gpu": "h100-sxm", "gpu_counts": [8, 16], "global_batch": 512})).unwrap();
        assert_eq!(out.mode, "planner");
        assert_eq!(out.points[0].scaling_efficiency_pct, Some(100.0));
        let e = out.points[1].scaling_efficiency_pct.unwrap();
        assert!(e > 50.0 && e <= 100.5, "{e}");
    }

    #[test]
    fn whatif_finds_configurations_or_names_the_binding_limit() {
        let out = run(&ctx(), &Whatif, serde_json::json!({"model": "llama-3.1-8b", "max_latency_ms": 20, "gpu_types": ["h100-sxm", "l4"]})).unwrap();
        assert!(!out.configurations.is_empty());
        assert!(
            out.configurations
                .iter()
                .all(|c| c.latency_ms_per_token <= 20.0)
        );
        let none = run(
            &ctx(),
            &Whatif,
            serde_json::json!({"model": "llama-3.1-405b", "max_gpus": 1, "gpu_types": ["l4"]}),
        )
        .unwrap();
        assert!(none.configurations.is_empty());
        assert!(
            none.suggestions[0].contains("binding limit is memory"),
            "{:?}",
            none.suggestions
        );
    }

    fn fixture(name: &str) -> String {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join("data")
            .join(name)
            .display()
            .to_string()
    }

    #[test]
    fn retarget_reads_the_source_gpu_from_the_profile() {
        let out = run(
            &ctx(),
            &Retarget,
            serde_json::json!({"path": fixture("h200_matmul_small.sqlite"), "target_gpu": "b200"}),
        )
        .unwrap();
        assert_eq!(out.source_gpu, "h200");
        assert_eq!(out.source_from, "profile records \"NVIDIA H200\"");
        assert_eq!(out.measured_kernel_ms, 53.9091);
        assert!(
            out.kernel_speedup > 1.18 && out.kernel_speedup < 1.2,
            "{}",
            out.kernel_speedup
        );
        let e = run(
            &ctx(),
            &Retarget,
            serde_json::json!({"path": fixture("h200_matmul_small.sqlite"), "target_gpu": "v100"}),
        )
        .unwrap_err();
        assert!(e.message.contains("known GPUs"));
    }

    #[test]
    fn bottlenecks_with_and_without_a_profile() {
        let none = run(&ctx(), &BottlenecksOp, serde_json::json!({})).unwrap();
        assert!(none.verdict.starts_with("insufficient data"));
        assert!(none.missing[0].contains("profile"));
        let out = run(
            &ctx(),
            &BottlenecksOp,
            serde_json::json!({"path": fixture("train_good.sqlite")}),
        )
        .unwrap();
        assert_eq!(out.devices[0].classification, "host-bound");
        assert!(out.missing.iter().any(|m| m.contains("no measured roofs")));
    }

    #[test]
    fn stacking_lists_conflicts_and_shared_components() {
        let out = run(&ctx(), &Stacking, serde_json::json!({"techniques": ["flash-attention-2", "flash-attention-3", "torch-compile", "cuda-graphs"]})).unwrap();
        assert_eq!(out.conflicts.len(), 1);
        assert_eq!(out.synergies.len(), 1);
        assert!(
            out.same_component
                .iter()
                .any(|(c, v)| c == "attention" && v.len() == 2)
        );
    }
}
