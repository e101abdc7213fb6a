//! Operations of the `optimize` domain: recommendations ranked for a goal,
//! the technique catalog, details, ROI, compound effects and playbooks.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::advisor_inputs::{gpu_or_local, resolve_gpu, resolve_model};
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, OpSpec, Operation};
use aisp_knowledge::gpus::{self, Gpu};
use aisp_knowledge::models::{self, Architecture, Model};
use aisp_knowledge::techniques::{self, Goal, Level, Playbook, Requirement, Technique, Workload};
use aisp_planner::advice::{self, Compound, LeftOut, Recommendation, Roi, Situation};
use aisp_planner::serving;

pub const OPERATIONS: &[&dyn DynOperation] = &[
    &Recommend,
    &Techniques,
    &Details,
    &RoiOp,
    &CompoundOp,
    &Playbooks,
];

// ------------------------------------------------------------------ recommend

pub struct Recommend;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecommendInput {
    /// Catalog model id or `hf:org/name`, e.g. `llama-3.1-8b`.
    #[serde(default)]
    pub model: Option<String>,
    /// A custom model shape.
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// Parameters in billions (dense model).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 1e5))]
    pub params_b: Option<f64>,
    /// Catalog GPU id (default: the local GPU, if the catalog knows it).
    #[serde(default)]
    pub gpu: Option<String>,
    /// GPUs (default 1).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// Nodes (default 1).
    #[serde(default)]
    pub nodes: Option<u32>,
    /// throughput (default), latency, memory or cost.
    #[serde(default)]
    pub goal: Option<Goal>,
    /// training or inference (default: both).
    #[serde(default)]
    pub workload: Option<Workload>,
    /// Sequence length in tokens (decides long-context techniques).
    #[serde(default)]
    #[schemars(range(max = 100000000))]
    pub seq_len: Option<u32>,
    /// The precision the workload computes in now (fp32 makes TF32 and mixed precision relevant).
    #[serde(default)]
    pub dtype: Option<aisp_knowledge::Dtype>,
    /// aisp_profile_rules ids (e.g. "host_bound_steps") or symptoms ("oom").
    #[serde(default)]
    pub findings: Option<Vec<String>>,
    /// A profile (an export, a run id or a folder of per-rank exports): its findings (medium+) join
    /// `findings`, and what it has and already uses (attention kernels, bf16 GEMMs, fused optimizer, CUDA graphs,
    /// collectives, host copies ...) rules techniques in or out; each recommendation then states its ledger
    /// numbers and predicted step.
    #[serde(default)]
    pub profile: Option<String>,
    /// A draft model of the same family is available (speculative decoding).
    #[serde(default)]
    pub draft_model: Option<bool>,
    /// Requests share long prefixes (system prompts, multi-turn chat).
    #[serde(default)]
    pub shared_prefixes: Option<bool>,
    /// The model architecture may be changed or retrained (GQA, MLA, sliding window).
    #[serde(default)]
    pub can_change_model: Option<bool>,
    /// How many techniques to return (default 10).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Condition {
    pub condition: String,
    /// holds, fails or unknown.
    pub state: String,
    pub evidence: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RecommendOutput {
    pub goal: Goal,
    pub workload: Option<Workload>,
    pub gpu: Option<String>,
    /// What aisp knows about the situation, and from where.
    pub conditions: Vec<Condition>,
    /// Best first.
    pub recommendations: Vec<Recommendation>,
    /// Techniques for this goal left out, with the reason.
    pub left_out: Vec<LeftOut>,
    pub next_steps: Vec<String>,
}

fn finding_has(findings: &[String], words: &[&str]) -> Option<String> {
    findings
        .iter()
        .find(|f| {
            let f = f.to_ascii_lowercase();
            words.iter().any(|w| f.contains(w))
        })
        .cloned()
}

impl Operation for Recommend {
    type Input = RecommendInput;
    type Output = RecommendOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        short: true,
        title: "Recommend optimizations",
        summary: "Ranks optimization techniques for your model, GPUs and goal (throughput, latency, memory, cost) by measured effect, with why, preconditions met/unmet and conflicts resolved.",
        description: "Ranks optimization techniques for a goal given the model, GPU, counts, workload and profile findings: each with its measured effect range and source, effort, risk, why it applies and how to turn it on; techniques whose hardware or conditions fail are dropped with the reason. Use for 'how do I make this faster, fit or cheaper'. Instant.",
        intents: &[
            "how do i make training faster",
            "make it faster",
            "recommend optimizations",
            "speed up training",
            "speed up inference",
            "reduce memory",
            "what should i optimize",
            "lower serving cost",
            "optimization advice",
        ],
        example: r#"{"model": "llama-3.1-8b", "gpu": "h100-sxm", "gpus": 8, "goal": "throughput", "workload": "training"}"#,
        ..OpSpec::new("optimize", "recommend")
    };

    fn run(&self, ctx: &OpContext, i: RecommendInput) -> Result<RecommendOutput, OpError> {
        let goal = i.goal.unwrap_or(Goal::Throughput);
        let model = match (&i.model, &i.architecture, i.params_b) {
            (None, None, None) => None,
            _ => Some(resolve_model(
                i.model.as_deref(),
                i.architecture.as_ref(),
                i.params_b,
            )?),
        };
        let gpu: Option<&Gpu> = match &i.gpu {
            Some(g) => Some(resolve_gpu(g)?),
            None => gpu_or_local(ctx, None).ok(),
        };
        let mut findings = i.findings.clone().unwrap_or_default();
        let mut finding_steps = std::collections::BTreeMap::new();
        let mut profiled: Option<ProfiledRun> = None;
        if let Some(path) = &i.profile {
            // The findings in the rules' order: the largest predicted saving of the step first.
            let v = ctx.call_tool("aisp_profile_rules", serde_json::json!({ "path": path }))?;
            let body = v.get("result").unwrap_or(&v);
            for f in body["findings"].as_array().into_iter().flatten() {
                let sev = f["severity"].as_str().unwrap_or("info");
                if matches!(sev, "medium" | "high" | "critical")
                    && let Some(id) = f["id"].as_str()
                    && !findings.iter().any(|x| x == id)
                {
                    findings.push(id.to_string());
                    if let (Some(step), Some(pred)) =
                        (f["step_ns"].as_i64(), f["predicted_step_ns"].as_i64())
                    {
                        finding_steps.insert(
                            id.to_string(),
                            (
                                step,
                                pred,
                                format!(
                                    "{}% of the steady window at stake ({}){}",
                                    f["share_pct"],
                                    f["title"].as_str().unwrap_or(id),
                                    f["then_limited_by"]
                                        .as_str()
                                        .map(|c| format!("; then limited by {c}"))
                                        .unwrap_or_default()
                                ),
                            ),
                        );
                    }
                }
            }
            profiled = Some(profiled_run(ctx, path)?);
        }
        let gpus = match (i.gpus, &profiled) {
            (Some(g), _) => g,
            (None, Some(p)) => p.world_size as u32,
            (None, None) => 1,
        }
        .max(1);
        let nodes = match (i.nodes, &profiled) {
            (Some(n), _) => n,
            (None, Some(p)) => p.hosts.len() as u32,
            (None, None) => 1,
        }
        .max(1);
        let mut s = Situation {
            findings: findings
                .iter()
                .map(|f| f.trim().to_ascii_lowercase())
                .collect(),
            workload: i.workload,
            compute_capability: gpu.and_then(serving::compute_capability),
            gpu_label: gpu.map(|g| g.id.clone()),
            finding_steps,
            ..Default::default()
        };
        if let Some(p) = &profiled {
            profile_situation(&mut s, &p.usage);
        }
        let mut set = |r: Requirement, holds: bool, ev: String| {
            if holds {
                s.holds.insert(r, ev);
            } else {
                s.fails.insert(r, ev);
            }
        };
        set(Requirement::MultiGpu, gpus > 1, format!("{gpus} GPU(s)"));
        set(
            Requirement::MultiNode,
            nodes > 1,
            format!("{nodes} node(s)"),
        );
        if let Some(m) = &model {
            match &m.arch {
                Some(a) => set(
                    Requirement::Moe,
                    a.is_moe(),
                    format!("{} has {} expert(s)", m.label, a.experts()),
                ),
                None => set(
                    Requirement::Moe,
                    false,
                    "params_b describes a dense model".into(),
                ),
            }
        }
        if let Some(d) = i.dtype {
            set(
                Requirement::Fp32Math,
                d == aisp_knowledge::Dtype::Fp32,
                format!("dtype {d}"),
            );
        }
        if let Some(seq) = i.seq_len {
            set(
                Requirement::LongContext,
                seq >= 8192,
                format!("seq_len {seq}"),
            );
        }
        if let Some(f) = finding_has(&findings, &["oom", "out of memory", "memory_pressure"]) {
            set(Requirement::MemoryPressure, true, format!("finding `{f}`"));
        } else if let (Some(m), Some(g)) = (&model, gpu)
            && let Some(mem) = g.memory_bytes()
        {
            let usable = mem * 0.9 * gpus as f64;
            let (need, what) = match i.workload {
                Some(Workload::Inference) => (m.total_params * 2.0, "bf16 weights"),
                _ => (m.total_params * 16.0, "training states at 16 B/param"),
            };
            set(
                Requirement::MemoryPressure,
                need > 0.8 * usable,
                format!(
                    "{what} {:.1} GB vs {:.1} GB usable on {gpus} × {}",
                    need / 1e9,
                    usable / 1e9,
                    g.id
                ),
            );
        }
        if let Some(f) = finding_has(
            &findings,
            &["launch", "cpu_bound", "host_bound", "small kernel"],
        ) {
            set(Requirement::LaunchBound, true, format!("finding `{f}`"));
        } else if let Some(p) = &profiled {
            let idle = p
                .usage
                .columns
                .get("idle_launch_overhead")
                .copied()
                .unwrap_or(0);
            set(
                Requirement::LaunchBound,
                false,
                format!(
                    "no launch-bound finding: the device waits for launches {:.2} ms of a {:.2} ms steady step",
                    idle as f64 / 1e6,
                    p.usage.step_ns as f64 / 1e6
                ),
            );
        }
        if i.dtype.is_none()
            && let Some(p) = &profiled
            && let Some(f) = p.usage.fact("gemm_fp32_simt")
        {
            set(Requirement::Fp32Math, f.present, f.evidence.clone());
        }
        if let Some(d) = i.draft_model {
            set(Requirement::DraftModel, d, format!("draft_model: {d}"));
        }
        if let Some(p) = i.shared_prefixes {
            set(
                Requirement::SharedPrefixes,
                p,
                format!("shared_prefixes: {p}"),
            );
        }
        set(
            Requirement::GqaModelDesign,
            i.can_change_model.unwrap_or(false),
            if i.can_change_model.unwrap_or(false) {
                "can_change_model: true".into()
            } else {
                "the model architecture is fixed (pass can_change_model: true to include architecture changes)".into()
            },
        );
        if i.workload == Some(Workload::Inference) {
            set(
                Requirement::DecodeHeavy,
                true,
                "LLM serving generates tokens one step at a time".into(),
            );
        }
        let (recs, left) = advice::recommend(goal, &s, i.limit.unwrap_or(10).clamp(1, 60));
        let mut conditions: Vec<Condition> = Vec::new();
        for (r, ev) in &s.holds {
            conditions.push(Condition {
                condition: r.as_str().into(),
                state: "holds".into(),
                evidence: ev.clone(),
            });
        }
        for (r, ev) in &s.fails {
            conditions.push(Condition {
                condition: r.as_str().into(),
                state: "fails".into(),
                evidence: ev.clone(),
            });
        }
        for (what, ev) in &s.in_use {
            conditions.push(Condition {
                condition: what.clone(),
                state: "in_use".into(),
                evidence: ev.clone(),
            });
        }
        for (what, ev) in &s.absent {
            conditions.push(Condition {
                condition: what.clone(),
                state: "absent".into(),
                evidence: ev.clone(),
            });
        }
        if let Some(g) = gpu {
            conditions.push(Condition {
                condition: "compute_capability".into(),
                state: "holds".into(),
                evidence: format!("{}: {}", g.id, g.compute_capability),
            });
        } else {
            conditions.push(Condition {
                condition: "compute_capability".into(),
                state: "unknown".into(),
                evidence: "no gpu given and no cataloged local GPU: hardware preconditions are not checked".into(),
            });
        }
        let mut next = vec![
            "aisp_optimize_compound with the ids you pick: checks conflicts and combines effects"
                .to_string(),
        ];
        if findings.is_empty() {
            next.push("profile a step (profile domain) and pass its findings: launch-bound or memory-bound evidence sharpens the ranking".into());
        }
        if i.workload != Some(Workload::Inference) && model.is_some() && gpus > 1 {
            next.push(
                "aisp_distributed_plan for the parallel layout with memory and step-time numbers"
                    .into(),
            );
        }
        if i.workload == Some(Workload::Inference) && model.is_some() {
            next.push(
                "aisp_inference_estimate and aisp_inference_vllm for numbers and a server config"
                    .into(),
            );
        }
        Ok(RecommendOutput {
            goal,
            workload: i.workload,
            gpu: gpu.map(|g| g.id.clone()),
            conditions,
            recommendations: recs,
            left_out: left,
            next_steps: next,
        })
    }
}

/// What the profile says about the run beside its findings: what it has and uses, its world size and hosts.
struct ProfiledRun {
    usage: aisp_profile::usage::Usage,
    world_size: usize,
    hosts: std::collections::BTreeSet<String>,
}

/// Read a profile (one export, a run id, or a set of ranks: its first rank stands for the others) for what
/// the run has and uses.
fn profiled_run(ctx: &OpContext, path: &str) -> Result<ProfiledRun, OpError> {
    use super::profile::open_profile;
    let files: Vec<String> = if aisp_profile::ranks::is_set(path) {
        aisp_profile::ranks::expand(path)?
            .iter()
            .map(|f| f.display().to_string())
            .collect()
    } else {
        vec![path.to_string()]
    };
    let mut hosts = std::collections::BTreeSet::new();
    let mut usage = None;
    for f in &files {
        let p = open_profile(ctx, f)?;
        if let Some(h) = aisp_profile::info::environment(&p)?.hostname {
            hosts.insert(h);
        }
        if usage.is_none() {
            usage = Some(aisp_profile::usage::usage(&p)?);
        }
        ctx.check_cancelled()?;
    }
    let usage = usage.expect("at least one export");
    let world_size = if files.len() > 1 {
        files.len()
    } else {
        usage.devices
    };
    Ok(ProfiledRun {
        usage,
        world_size,
        hosts,
    })
}

/// The ledger's time per step of a component's columns (ns), and what they are.
fn component_ns(u: &aisp_profile::usage::Usage, cols: &[&str]) -> i64 {
    cols.iter()
        .map(|c| u.columns.get(*c).copied().unwrap_or(0))
        .sum()
}

/// What a profile tells the recommender: the components the run lacks, the techniques it already applies, and
/// the ledger time each component takes of the steady step.
fn profile_situation(s: &mut Situation, u: &aisp_profile::usage::Usage) {
    let ev = |f: &str| u.fact(f).map(|x| x.evidence.clone()).unwrap_or_default();
    // Components without their kernels or activity.
    if !u.has("attention") {
        let why = format!("{}: no sequence model", ev("attention"));
        for c in [
            "attention",
            "kv_cache",
            "prefill",
            "decode",
            "serving_scheduler",
            "padding",
        ] {
            s.absent.insert(c.into(), why.clone());
        }
        // Liger fuses transformer layers (RMSNorm, RoPE, SwiGLU, cross-entropy).
        s.absent.insert(
            "liger-kernels".into(),
            format!("it fuses transformer layers; {why}"),
        );
    }
    if !u.has("convolution") {
        s.absent.insert("conv".into(), ev("convolution"));
    }
    if !u.has("collectives") {
        s.absent.insert("communication".into(), ev("collectives"));
        s.absent.insert("pipeline_bubble".into(), ev("collectives"));
        s.absent.insert("load_balance".into(), ev("collectives"));
    }
    if !u.has("host_copies") {
        s.absent.insert("data_loading".into(), ev("host_copies"));
    }
    if !u.has("optimizer") {
        s.absent.insert("optimizer_step".into(), ev("optimizer"));
    }
    // Techniques already applied.
    if u.has("gemm_reduced_precision") && !u.has("gemm_fp32_simt") {
        s.in_use
            .insert("bf16-mixed-precision".into(), ev("gemm_reduced_precision"));
    }
    if u.has("gemm_tf32") && !u.has("gemm_fp32_simt") {
        s.in_use.insert("tf32".into(), ev("gemm_tf32"));
    }
    if u.has("fused_optimizer") {
        s.in_use
            .insert("fused-optimizer".into(), ev("fused_optimizer"));
    }
    if u.has("cuda_graphs") {
        s.in_use.insert("cuda-graphs".into(), ev("cuda_graphs"));
    }
    if u.has("fused_attention") {
        for t in ["flash-attention-2", "flash-attention-3"] {
            s.in_use.insert(t.into(), ev("fused_attention"));
        }
    }
    if u.has("overlapped_communication") {
        s.in_use
            .insert("ddp-overlap".into(), ev("overlapped_communication"));
    }
    if u.has("torch_compile") {
        s.in_use.insert("torch-compile".into(), ev("torch_compile"));
    }
    if u.has("host_copies") && !u.has("pageable_copies") && u.columns.contains_key("h2d_pinned") {
        s.in_use.insert(
            "pinned-memory".into(),
            format!("the host copies are pinned; {}", ev("host_copies")),
        );
    }
    // The ledger time each component acts on.
    s.step_ns = (u.step_ns > 0).then_some(u.step_ns);
    for (component, cols, what) in [
        (
            "gemm",
            &["gemm_tensor_core", "gemm_fp32_simt", "gemm_other"][..],
            "the GEMM columns",
        ),
        ("attention", &["attention"][..], "the attention column"),
        (
            "elementwise",
            &["elementwise"][..],
            "the elementwise column",
        ),
        ("optimizer_step", &["optimizer"][..], "the optimizer column"),
        (
            "communication",
            &["comm_transfer", "comm", "comm_p2p"][..],
            "the exposed communication columns",
        ),
        (
            "data_loading",
            &[
                "h2d_pageable",
                "h2d_pinned",
                "d2h_pageable",
                "d2h_pinned",
                "idle_pageable_staging",
                "idle_data_loading",
            ][..],
            "the exposed copy and input-wait columns",
        ),
        (
            "launch_overhead",
            &["idle_launch_overhead"][..],
            "the launch-overhead idle column",
        ),
    ] {
        let ns = component_ns(u, cols);
        if ns > 0 {
            s.component_ns.insert(component.into(), (ns, what.into()));
        }
    }
}

// ------------------------------------------------------------------ techniques

pub struct Techniques;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TechniquesInput {
    /// Only this category: attention, compilation, precision, quantization, memory, parallelism, communication, data, serving.
    #[serde(default)]
    pub category: Option<String>,
    /// Only techniques for training or inference.
    #[serde(default)]
    pub workload: Option<Workload>,
    /// Only techniques that serve this goal.
    #[serde(default)]
    pub goal: Option<Goal>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TechniqueRow {
    pub id: String,
    pub name: String,
    pub category: String,
    pub workload: Workload,
    pub goals: Vec<Goal>,
    pub effort: Level,
    pub risk: Level,
    pub speedup_low: Option<f64>,
    pub speedup_high: Option<f64>,
    pub memory_factor: Option<f64>,
    pub trades: String,
    pub source_url: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TechniquesOutput {
    pub count: usize,
    /// Category → number of techniques (after filters).
    pub categories: Vec<(String, usize)>,
    pub techniques: Vec<TechniqueRow>,
}

impl Operation for Techniques {
    type Input = TechniquesInput;
    type Output = TechniquesOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Optimization technique catalog",
        summary: "Lists the optimization techniques (attention, compilation, precision, quantization, memory, parallelism, serving, ...) with effect ranges and sources, filterable by category, workload and goal.",
        description: "Returns aisp's technique catalog — over 50 techniques from FlashAttention and CUDA graphs to ZeRO \
stages, TP/SP/PP/CP/EP, FP8, AWQ/GPTQ, KV-cache quantization, paged attention, speculative decoding, chunked prefill, \
prefix caching and disaggregated serving — one row each with category, workload, goals, aisp's effort and risk \
rating, what it trades, and the speedup/memory effect its source measured (null where no public source gives a \
figure), with the source URL. Filter by category, workload or goal. aisp_optimize_details gives one technique in \
full. Instant.",
        intents: &[
            "list optimization techniques",
            "optimization techniques",
            "what optimizations exist",
            "technique catalog",
            "optimization options",
        ],
        example: r#"{"category": "serving"}"#,
        ..OpSpec::new("optimize", "techniques")
    };

    fn run(&self, _ctx: &OpContext, i: TechniquesInput) -> Result<TechniquesOutput, OpError> {
        if let Some(c) = &i.category {
            let cats: Vec<&str> = {
                let mut v: Vec<&str> = techniques::all()
                    .iter()
                    .map(|t| t.category.as_str())
                    .collect();
                v.sort();
                v.dedup();
                v
            };
            if !cats.contains(&c.as_str()) {
                return Err(OpError::invalid_input(
                    format!("unknown category `{c}`; categories: {}", cats.join(", ")),
                    "Use one of the listed categories, or omit it.",
                ));
            }
        }
        let rows: Vec<TechniqueRow> = techniques::all()
            .iter()
            .filter(|t| i.category.as_deref().is_none_or(|c| t.category == c))
            .filter(|t| i.workload.is_none_or(|w| t.workload.covers(w)))
            .filter(|t| i.goal.is_none_or(|g| t.goals.contains(&g)))
            .map(|t| TechniqueRow {
                id: t.id.clone(),
                name: t.name.clone(),
                category: t.category.clone(),
                workload: t.workload,
                goals: t.goals.clone(),
                effort: t.effort,
                risk: t.risk,
                speedup_low: t.effect.speedup_low,
                speedup_high: t.effect.speedup_high,
                memory_factor: t.effect.memory_factor,
                trades: t.trades.clone(),
                source_url: t.effect.source_url.clone(),
            })
            .collect();
        let mut cats: std::collections::BTreeMap<String, usize> = Default::default();
        for r in &rows {
            *cats.entry(r.category.clone()).or_default() += 1;
        }
        Ok(TechniquesOutput {
            count: rows.len(),
            categories: cats.into_iter().collect(),
            techniques: rows,
        })
    }
}

// ------------------------------------------------------------------ details

pub struct Details;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DetailsInput {
    /// A technique id (e.g. `flash-attention-3`), GPU id (e.g. `h100-sxm`) or model id (e.g. `llama-3.1-70b`).
    pub id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RelationDetail {
    pub id: String,
    pub name: String,
    pub reason: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DetailsOutput {
    /// technique, gpu or model.
    pub kind: String,
    pub technique: Option<Technique>,
    pub conflicts: Vec<RelationDetail>,
    pub synergies: Vec<RelationDetail>,
    /// Playbooks that include the technique.
    pub playbooks: Vec<String>,
    pub gpu: Option<Gpu>,
    pub model: Option<Model>,
    /// For a model: computed total and active parameters, billions.
    pub computed_params_b: Option<(f64, f64)>,
}

impl Operation for Details {
    type Input = DetailsInput;
    type Output = DetailsOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Details of a technique, GPU or model",
        summary: "The full catalog record for a technique (effect, scope, source, preconditions, conflicts, synergies, how-to), a GPU (every datasheet figure with its source) or a model (shape and source).",
        description: "Looks an id up in aisp's catalogs. A technique returns everything: what it trades, the measured \
effect with its scope and source, minimum compute capability, required conditions, frameworks, how to enable it, and \
its conflicts and synergies with names and reasons, plus the playbooks using it. A GPU id (or device name) returns \
every datasheet figure with its source URL, nulls carrying a note. A model id returns the shape from its config.json \
and the computed parameter counts. Unknown ids list the known ones. Instant.",
        intents: &[
            "details of technique",
            "technique details",
            "gpu specs",
            "h100 datasheet",
            "model architecture",
        ],
        example: r#"{"id": "flash-attention-3"}"#,
        positional: &["id"],
        ..OpSpec::new("optimize", "details")
    };

    fn run(&self, _ctx: &OpContext, i: DetailsInput) -> Result<DetailsOutput, OpError> {
        let empty = DetailsOutput {
            kind: String::new(),
            technique: None,
            conflicts: vec![],
            synergies: vec![],
            playbooks: vec![],
            gpu: None,
            model: None,
            computed_params_b: None,
        };
        if let Some(t) = techniques::by_id(&i.id) {
            let rel = |list: &[techniques::Relation]| {
                list.iter()
                    .map(|r| RelationDetail {
                        id: r.id.clone(),
                        name: techniques::by_id(&r.id)
                            .map(|t| t.name.clone())
                            .unwrap_or_default(),
                        reason: r.reason.clone(),
                    })
                    .collect()
            };
            return Ok(DetailsOutput {
                kind: "technique".into(),
                conflicts: rel(&t.conflicts),
                synergies: rel(&t.synergies),
                playbooks: techniques::playbooks()
                    .iter()
                    .filter(|p| p.steps.contains(&t.id))
                    .map(|p| p.id.clone())
                    .collect(),
                technique: Some(t.clone()),
                ..empty
            });
        }
        if let Some(m) = models::by_id(&i.id) {
            return Ok(DetailsOutput {
                kind: "model".into(),
                computed_params_b: Some((
                    aisp_planner::round(m.architecture.total_params() / 1e9, 3),
                    aisp_planner::round(m.architecture.active_params() / 1e9, 3),
                )),
                model: Some(m.clone()),
                ..empty
            });
        }
        if let Ok(g) = gpus::lookup(&i.id) {
            return Ok(DetailsOutput {
                kind: "gpu".into(),
                gpu: Some(g.clone()),
                ..empty
            });
        }
        Err(OpError::invalid_input(
            format!(
                "`{}` is not a technique, model or GPU id. Techniques: {}. Models: {}. GPUs: {}",
                i.id,
                techniques::ids().join(", "),
                models::ids().join(", "),
                gpus::ids().join(", ")
            ),
            "Use one of the listed ids (aisp_optimize_techniques lists techniques with a summary).",
        ))
    }
}

// ------------------------------------------------------------------ roi

pub struct RoiOp;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoiInput {
    /// throughput (default), latency, memory or cost.
    #[serde(default)]
    pub goal: Option<Goal>,
    /// training or inference (default both).
    #[serde(default)]
    pub workload: Option<Workload>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RoiOutput {
    pub goal: Goal,
    /// Best return first; techniques without a public figure last.
    pub techniques: Vec<Roi>,
    pub method: String,
}

impl Operation for RoiOp {
    type Input = RoiInput;
    type Output = RoiOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Optimization ROI",
        summary: "Expected gain versus implementation effort for every technique serving a goal: (conservative measured gain − 1) / effort, with the basis of each gain.",
        description: "For a goal (throughput, latency, memory, cost) and workload, computes each technique's return on \
effort: gain is the geometric mean of its source's measured speedup range (an 'up to X' figure counts as 1–X; \
1 / memory factor for the memory goal), effort weighs aisp's rating (low 1, medium 2, high 3), ROI = (gain − 1) / effort. Techniques without a public \
figure get null ROI and sort last rather than an invented number. Each row carries the measurement's scope and \
source so you can judge whether it transfers to your workload. Instant.",
        intents: &[
            "optimization roi",
            "return on effort",
            "quick wins",
            "best bang for buck",
            "effort vs gain",
            "what to try first",
        ],
        example: r#"{"goal": "throughput", "workload": "training"}"#,
        ..OpSpec::new("optimize", "roi")
    };

    fn run(&self, _ctx: &OpContext, i: RoiInput) -> Result<RoiOutput, OpError> {
        let goal = i.goal.unwrap_or(Goal::Throughput);
        Ok(RoiOutput {
            goal,
            techniques: advice::roi(goal, i.workload),
            method: "ROI = (gain − 1) / effort weight; gain = the geometric mean of the source's stated speedup range (an \"up to X\" figure counts as 1–X), or 1/memory_factor for the memory goal. Effort is aisp's qualitative rating. Gains were measured on each source's workload: verify on yours.".into(),
        })
    }
}

// ------------------------------------------------------------------ compound

pub struct CompoundOp;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompoundInput {
    /// Technique ids to combine, in the order you would apply them.
    pub techniques: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CompoundOutput {
    #[serde(flatten)]
    pub compound: Compound,
    /// compatible, or conflicting when any pair conflicts.
    pub verdict: String,
}

impl Operation for CompoundOp {
    type Input = CompoundInput;
    type Output = CompoundOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Combine techniques",
        summary: "Checks a set of techniques for conflicts and synergies and computes their combined speedup range with diminishing returns (same-component techniques do not multiply).",
        description: "For a list of technique ids: every conflicting pair with the reason (two attention kernels, two \
weight formats, two ZeRO stages, ...), every synergy, the combined speedup range — techniques acting on the same \
component of the step count once (the best), different components multiply, and the high end is an explicit upper \
bound since each source measured end-to-end on its own workload — the running total as each is added, per-component \
memory factors, and which techniques have no public figure. Use it to check a plan before implementing it. Instant.",
        intents: &[
            "combine optimizations",
            "combine techniques",
            "are these compatible",
            "stack techniques",
            "combined speedup",
            "speedup together",
        ],
        example: r#"{"techniques": ["bf16-mixed-precision", "flash-attention-2", "torch-compile", "cuda-graphs"]}"#,
        ..OpSpec::new("optimize", "compound")
    };

    fn run(&self, _ctx: &OpContext, i: CompoundInput) -> Result<CompoundOutput, OpError> {
        if i.techniques.is_empty() {
            return Err(OpError::invalid_input(
                "no techniques given",
                "Pass techniques: [\"id\", ...].",
            ));
        }
        let unknown = advice::unknown_ids(&i.techniques);
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
        let c = advice::compound(&i.techniques);
        let verdict = if c.conflicts.is_empty() {
            "compatible"
        } else {
            "conflicting"
        }
        .to_string();
        Ok(CompoundOutput {
            compound: c,
            verdict,
        })
    }
}

// ------------------------------------------------------------------ playbooks

pub struct Playbooks;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlaybooksInput {
    /// Only playbooks for this goal.
    #[serde(default)]
    pub goal: Option<Goal>,
    /// Only playbooks for training or inference.
    #[serde(default)]
    pub workload: Option<Workload>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PlaybookResult {
    #[serde(flatten)]
    pub playbook: Playbook,
    pub steps_detail: Vec<PlaybookStep>,
    pub combined_speedup_low: f64,
    pub combined_speedup_high: f64,
    pub unquantified: Vec<String>,
    pub conflicts: Vec<(String, String, String)>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PlaybookStep {
    pub id: String,
    pub name: String,
    pub how: String,
    pub cumulative_speedup_high: f64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PlaybooksOutput {
    pub playbooks: Vec<PlaybookResult>,
}

impl Operation for Playbooks {
    type Input = PlaybooksInput;
    type Output = PlaybooksOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Optimization playbooks",
        summary: "Ordered technique recipes for training throughput, training memory, scale-out, inference latency, throughput and cost, with their combined effect computed, not asserted.",
        description: "Returns aisp's playbooks: ordered lists of techniques for a goal and workload, with why that order, \
each step's how-to, the combined speedup range computed by the compound rule (same-component techniques count once; \
upper bound from end-to-end measurements), the steps without a public figure, and any conflicts. Filter by goal or \
workload. Use it for a starting sequence, then check each step with a profile. Instant.",
        intents: &[
            "optimization playbook",
            "playbook",
            "step by step optimization",
            "recipe to speed up training",
            "reduce training memory",
            "inference optimization checklist",
        ],
        example: r#"{"workload": "inference"}"#,
        ..OpSpec::new("optimize", "playbooks")
    };

    fn run(&self, _ctx: &OpContext, i: PlaybooksInput) -> Result<PlaybooksOutput, OpError> {
        let out = techniques::playbooks()
            .iter()
            .filter(|p| i.goal.is_none_or(|g| p.goal == g))
            .filter(|p| i.workload.is_none_or(|w| p.workload.covers(w)))
            .map(|p| {
                let c = advice::compound(&p.steps);
                PlaybookResult {
                    steps_detail: p
                        .steps
                        .iter()
                        .zip(&c.incremental)
                        .map(|(id, step)| {
                            let t = techniques::by_id(id);
                            PlaybookStep {
                                id: id.clone(),
                                name: t.map(|t| t.name.clone()).unwrap_or_default(),
                                how: t.map(|t| t.how.clone()).unwrap_or_default(),
                                cumulative_speedup_high: step.cumulative_speedup_high,
                            }
                        })
                        .collect(),
                    combined_speedup_low: c.combined_speedup_low,
                    combined_speedup_high: c.combined_speedup_high,
                    unquantified: c.unquantified,
                    conflicts: c.conflicts,
                    playbook: p.clone(),
                }
            })
            .collect();
        Ok(PlaybooksOutput { playbooks: out })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppState;

    fn ctx() -> OpContext {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(aisp_hw::gpu::GpuAvailability::unavailable(
            "test host",
            false,
        ));
        OpContext::detached(app)
    }

    fn run<O: Operation>(op: &O, v: serde_json::Value) -> Result<O::Output, OpError> {
        op.run(&ctx(), serde_json::from_value(v).unwrap())
    }

    #[test]
    fn recommend_training_on_h100_uses_the_situation() {
        let out = run(&Recommend, serde_json::json!({"model": "llama-3.1-70b", "gpu": "h100-sxm", "gpus": 8, "goal": "memory", "workload": "training"})).unwrap();
        let mp = out
            .conditions
            .iter()
            .find(|c| c.condition == "memory_pressure")
            .unwrap();
        assert_eq!(mp.state, "holds");
        assert!(
            mp.evidence.contains("1128.9 GB vs 576.0 GB usable"),
            "{}",
            mp.evidence
        );
        assert!(!out.recommendations.is_empty());
        assert!(out.recommendations.iter().all(|r| !r.reason.is_empty()));
        // Memory goal: ranked by measured memory factor; adam-8bit (0.25) before LoRA (0.33).
        let pos = |id: &str| out.recommendations.iter().position(|r| r.id == id);
        if let (Some(a), Some(l)) = (pos("adam-8bit"), pos("lora")) {
            assert!(a < l);
        }
    }

    #[test]
    fn recommend_without_gpu_marks_hardware_unknown() {
        let out = run(
            &Recommend,
            serde_json::json!({"params_b": 7, "goal": "throughput", "workload": "inference"}),
        )
        .unwrap();
        assert!(
            out.conditions
                .iter()
                .any(|c| c.condition == "compute_capability" && c.state == "unknown")
        );
        // One GPU and a dense model: expert parallelism is left out with the evidence.
        let ep = out
            .left_out
            .iter()
            .find(|l| l.id == "expert-parallel")
            .unwrap();
        assert_eq!(ep.reason, "needs more than one GPU, but 1 GPU(s)");
        assert!(
            out.recommendations
                .iter()
                .all(|r| r.id != "tensor-parallel")
        );
    }

    #[test]
    fn details_resolves_each_catalog_and_lists_ids_on_miss() {
        let t = run(&Details, serde_json::json!({"id": "flash-attention-3"})).unwrap();
        assert_eq!(t.kind, "technique");
        assert!(t.conflicts.iter().any(|c| c.id == "flash-attention-2"));
        let g = run(&Details, serde_json::json!({"id": "NVIDIA H100 80GB HBM3"})).unwrap();
        assert_eq!(g.gpu.unwrap().id, "h100-sxm");
        let m = run(&Details, serde_json::json!({"id": "llama-3.1-8b"})).unwrap();
        assert_eq!(m.computed_params_b, Some((8.03, 8.03)));
        let e = run(&Details, serde_json::json!({"id": "warp-drive"})).unwrap_err();
        assert!(e.message.contains("Techniques: ") && e.message.contains("GPUs: "));
    }

    #[test]
    fn compound_and_playbooks_compute_effects() {
        let c = run(
            &CompoundOp,
            serde_json::json!({"techniques": ["awq-int4", "gptq-int4"]}),
        )
        .unwrap();
        assert_eq!(c.verdict, "conflicting");
        let e = run(
            &CompoundOp,
            serde_json::json!({"techniques": ["awq-int4", "nope"]}),
        )
        .unwrap_err();
        assert!(e.message.contains("nope"));
        let p = run(&Playbooks, serde_json::json!({"workload": "inference"})).unwrap();
        assert!(p.playbooks.len() >= 3);
        assert!(
            p.playbooks.iter().all(|pb| pb.conflicts.is_empty()),
            "a playbook contradicts itself"
        );
        let t = run(&Techniques, serde_json::json!({"category": "serving"})).unwrap();
        assert!(t.count >= 8);
        assert!(run(&Techniques, serde_json::json!({"category": "magic"})).is_err());
    }
}
