//! The optimization technique catalog: what each technique trades, the
//! effect its own source measured (never a guess), preconditions, conflicts
//! and synergies. Data: `data/techniques.toml`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::RawSource;

const DATA: &str = include_str!("data/techniques.toml");

/// Training, inference or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Training,
    Inference,
    Both,
}

impl Workload {
    /// Whether a technique for `self` applies to a `wanted` workload.
    pub fn covers(self, wanted: Workload) -> bool {
        self == Workload::Both || wanted == Workload::Both || self == wanted
    }
}

/// What the user wants more of (or less of, for memory and cost).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Goal {
    Throughput,
    Latency,
    Memory,
    Cost,
}

/// aisp's qualitative rating of effort or risk (not a measured number).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Low,
    Medium,
    High,
}

impl Level {
    /// 1, 2, 3: the weight ROI divides by.
    pub fn weight(self) -> f64 {
        match self {
            Level::Low => 1.0,
            Level::Medium => 2.0,
            Level::High => 3.0,
        }
    }
}

/// A condition a technique needs, checked against what the caller told us.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// More than one GPU.
    MultiGpu,
    /// More than one node.
    MultiNode,
    /// A mixture-of-experts model.
    Moe,
    /// Sequences long enough that attention or KV dominate (≥ 8K tokens).
    LongContext,
    /// The workload does not fit, or barely fits, in GPU memory.
    MemoryPressure,
    /// Many small kernels: time goes to launches, not math.
    LaunchBound,
    /// A smaller draft model of the same family exists.
    DraftModel,
    /// Requests share long prefixes (system prompts, multi-turn).
    SharedPrefixes,
    /// Serving time is dominated by token generation.
    DecodeHeavy,
    /// Choosing or training the model architecture is on the table.
    GqaModelDesign,
    /// The workload runs its matrix multiplies in fp32.
    Fp32Math,
}

impl Requirement {
    pub fn as_str(self) -> &'static str {
        match self {
            Requirement::MultiGpu => "multi_gpu",
            Requirement::MultiNode => "multi_node",
            Requirement::Moe => "moe",
            Requirement::LongContext => "long_context",
            Requirement::MemoryPressure => "memory_pressure",
            Requirement::LaunchBound => "launch_bound",
            Requirement::DraftModel => "draft_model",
            Requirement::SharedPrefixes => "shared_prefixes",
            Requirement::DecodeHeavy => "decode_heavy",
            Requirement::GqaModelDesign => "gqa_model_design",
            Requirement::Fp32Math => "fp32_math",
        }
    }
}

/// The effect a technique's source measured.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Effect {
    /// Lower end of the measured speedup (×; <1 is a slowdown), when stated.
    pub speedup_low: Option<f64>,
    /// Upper end of the measured speedup (×), when stated.
    pub speedup_high: Option<f64>,
    /// Multiplier on the memory the technique targets (0.5 halves it).
    pub memory_factor: Option<f64>,
    /// What was measured: workload and baseline.
    pub scope: String,
    pub source_url: String,
    pub source_title: String,
    pub note: Option<String>,
}

impl Effect {
    /// Whether the source gives any speedup number.
    pub fn speedup_known(&self) -> bool {
        self.speedup_low.is_some() || self.speedup_high.is_some()
    }

    /// The conservative end of the speedup range (low if stated, else high).
    pub fn speedup_conservative(&self) -> Option<f64> {
        self.speedup_low.or(self.speedup_high)
    }

    /// The optimistic end (high if stated, else low).
    pub fn speedup_optimistic(&self) -> Option<f64> {
        self.speedup_high.or(self.speedup_low)
    }
}

/// A conflict or synergy with another technique, and why.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Relation {
    pub id: String,
    pub reason: String,
}

/// One optimization technique.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Technique {
    pub id: String,
    pub name: String,
    /// attention, compilation, precision, quantization, memory, parallelism, communication, data, serving.
    pub category: String,
    /// The part of the step it acts on; techniques on the same component do not multiply.
    pub component: String,
    pub workload: Workload,
    pub goals: Vec<Goal>,
    /// What it costs or gives up.
    pub trades: String,
    /// aisp's qualitative effort rating.
    pub effort: Level,
    /// aisp's qualitative risk rating (accuracy, stability).
    pub risk: Level,
    /// Lowest CUDA compute capability with hardware support.
    pub min_compute_capability: Option<f64>,
    pub requires: Vec<Requirement>,
    /// Frameworks and versions that provide it.
    pub frameworks: Vec<String>,
    /// How to turn it on.
    pub how: String,
    pub effect: Effect,
    pub conflicts: Vec<Relation>,
    pub synergies: Vec<Relation>,
    /// Techniques this one replaces when both apply (e.g. FlashAttention-3 on Hopper replaces FlashAttention-2).
    pub supersedes: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCatalog {
    sources: BTreeMap<String, RawSource>,
    techniques: Vec<RawTechnique>,
    playbooks: Vec<Playbook>,
    #[serde(default)]
    findings: Vec<FindingAdvice>,
}

/// What the catalog says about one profile finding (an `aisp_profile_rules` id):
/// the techniques that address it, and the step components whose techniques
/// cannot help while it holds. Data, not code: `[[findings]]` in techniques.toml.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindingAdvice {
    /// The rule id, e.g. `host_bound_steps`.
    pub id: String,
    /// Technique ids that remove the cause, best first.
    pub addressed_by: Vec<String>,
    /// Components (technique `component`) whose techniques cannot help while this finding holds.
    pub cannot_help: Vec<String>,
    /// Why those cannot help.
    pub why_not: String,
}

/// An ordered list of techniques for a goal.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Playbook {
    pub id: String,
    pub name: String,
    pub goal: Goal,
    pub workload: Workload,
    /// Technique ids, in the order to apply them.
    pub steps: Vec<String>,
    /// Why this order.
    pub why: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEffect {
    speedup_low: Option<f64>,
    speedup_high: Option<f64>,
    memory_factor: Option<f64>,
    scope: String,
    source: String,
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTechnique {
    id: String,
    name: String,
    category: String,
    component: String,
    workload: Workload,
    goals: Vec<Goal>,
    trades: String,
    effort: Level,
    risk: Level,
    min_compute_capability: Option<f64>,
    requires: Vec<Requirement>,
    frameworks: Vec<String>,
    how: String,
    effect: RawEffect,
    conflicts: Vec<Relation>,
    synergies: Vec<Relation>,
    #[serde(default)]
    supersedes: Vec<String>,
}

type Parsed = (Vec<Technique>, Vec<Playbook>);

fn parse(text: &str) -> Result<Parsed, String> {
    let raw: RawCatalog = toml::from_str(text).map_err(|e| format!("techniques.toml: {e}"))?;
    let playbooks = raw.playbooks;
    for f in &raw.findings {
        for t in &f.addressed_by {
            if !raw.techniques.iter().any(|x| &x.id == t) {
                return Err(format!("finding {}: unknown technique `{t}`", f.id));
            }
        }
        for c in &f.cannot_help {
            if !raw.techniques.iter().any(|x| &x.component == c) {
                return Err(format!(
                    "finding {}: no technique has component `{c}`",
                    f.id
                ));
            }
        }
    }
    let mut out: Vec<Technique> = Vec::with_capacity(raw.techniques.len());
    for t in raw.techniques {
        let src = raw
            .sources
            .get(&t.effect.source)
            .ok_or_else(|| format!("{}: unknown source `{}`", t.id, t.effect.source))?;
        if let (Some(l), Some(h)) = (t.effect.speedup_low, t.effect.speedup_high)
            && l > h
        {
            return Err(format!("{}: speedup_low > speedup_high", t.id));
        }
        out.push(Technique {
            effect: Effect {
                speedup_low: t.effect.speedup_low,
                speedup_high: t.effect.speedup_high,
                memory_factor: t.effect.memory_factor,
                scope: t.effect.scope,
                source_url: src.url.clone(),
                source_title: src.title.clone(),
                note: t.effect.note,
            },
            id: t.id,
            name: t.name,
            category: t.category,
            component: t.component,
            workload: t.workload,
            goals: t.goals,
            trades: t.trades,
            effort: t.effort,
            risk: t.risk,
            min_compute_capability: t.min_compute_capability,
            requires: t.requires,
            frameworks: t.frameworks,
            how: t.how,
            conflicts: t.conflicts,
            synergies: t.synergies,
            supersedes: t.supersedes,
        });
    }
    // Every relation must name a technique; conflicts are made symmetric so
    // that checking either side finds them.
    let ids: Vec<String> = out.iter().map(|t| t.id.clone()).collect();
    for t in &out {
        for r in t.conflicts.iter().chain(&t.synergies) {
            if !ids.contains(&r.id) {
                return Err(format!(
                    "{}: relation to unknown technique `{}`",
                    t.id, r.id
                ));
            }
        }
    }
    let mut extra: Vec<(usize, Relation)> = Vec::new();
    for t in &out {
        for c in &t.conflicts {
            if let Some(j) = out.iter().position(|o| o.id == c.id)
                && !out[j].conflicts.iter().any(|r| r.id == t.id)
            {
                extra.push((
                    j,
                    Relation {
                        id: t.id.clone(),
                        reason: c.reason.clone(),
                    },
                ));
            }
        }
    }
    for (j, r) in extra {
        if !out[j].conflicts.iter().any(|x| x.id == r.id) {
            out[j].conflicts.push(r);
        }
    }
    for p in &playbooks {
        for step in &p.steps {
            if !ids.contains(step) {
                return Err(format!("playbook {}: unknown technique `{step}`", p.id));
            }
        }
    }
    Ok((out, playbooks))
}

fn catalog() -> &'static Result<Parsed, String> {
    static CATALOG: OnceLock<Result<Parsed, String>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let parsed = parse(DATA);
        if let Err(e) = &parsed {
            tracing::error!("the compiled-in technique catalog failed to load: {e}");
        }
        parsed
    })
}

/// Every technique, in file order.
pub fn all() -> &'static [Technique] {
    match catalog() {
        Ok((v, _)) => v,
        Err(_) => &[],
    }
}

/// The catalog's advice for every profile finding it knows.
pub fn finding_advice() -> &'static [FindingAdvice] {
    static FINDINGS: OnceLock<Vec<FindingAdvice>> = OnceLock::new();
    FINDINGS.get_or_init(|| {
        toml::from_str::<RawCatalog>(DATA)
            .map(|r| r.findings)
            .unwrap_or_default()
    })
}

/// The catalog's advice for one finding id.
pub fn advice_for(finding: &str) -> Option<&'static FindingAdvice> {
    let f = finding.trim().to_ascii_lowercase();
    finding_advice().iter().find(|a| a.id == f)
}

/// Every playbook, in file order.
pub fn playbooks() -> &'static [Playbook] {
    match catalog() {
        Ok((_, p)) => p,
        Err(_) => &[],
    }
}

pub fn ids() -> Vec<&'static str> {
    all().iter().map(|t| t.id.as_str()).collect()
}

pub fn by_id(id: &str) -> Option<&'static Technique> {
    let id = id.trim().to_ascii_lowercase();
    all().iter().find(|t| t.id == id)
}

/// The reason two techniques conflict, if they do.
pub fn conflict(a: &str, b: &str) -> Option<&'static str> {
    by_id(a)?
        .conflicts
        .iter()
        .find(|r| r.id == b)
        .map(|r| r.reason.as_str())
}

/// The reason two techniques work well together, if they do (either side).
pub fn synergy(a: &str, b: &str) -> Option<&'static str> {
    let ab = by_id(a).and_then(|t| t.synergies.iter().find(|r| r.id == b));
    let ba = by_id(b).and_then(|t| t.synergies.iter().find(|r| r.id == a));
    ab.or(ba).map(|r| r.reason.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_has_forty_plus_sourced_techniques() {
        let (parsed, playbooks) = parse(DATA).expect("techniques.toml must load");
        assert!(parsed.len() >= 40, "{} techniques", parsed.len());
        assert!(playbooks.len() >= 5);
        for t in all() {
            assert!(t.effect.source_url.starts_with("https://"), "{}", t.id);
            assert!(!t.trades.is_empty() && !t.how.is_empty(), "{}", t.id);
            // A technique without a number says why in a note or scope.
            if !t.effect.speedup_known() && t.effect.memory_factor.is_none() {
                assert!(
                    t.effect.note.is_some(),
                    "{}: unquantified without a note",
                    t.id
                );
            }
        }
    }

    #[test]
    fn issue_named_techniques_are_present() {
        for id in [
            "flash-attention-2",
            "cuda-graphs",
            "torch-compile",
            "fused-optimizer",
            "activation-checkpointing",
            "zero-1",
            "zero-2",
            "zero-3",
            "fsdp",
            "tensor-parallel",
            "sequence-parallel",
            "pipeline-parallel",
            "context-parallel",
            "expert-parallel",
            "fp8-training",
            "awq-int4",
            "gptq-int4",
            "kv-cache-fp8",
            "paged-attention",
            "speculative-decoding",
            "chunked-prefill",
            "prefix-caching",
            "disaggregated-prefill",
            "pinned-memory",
            "nccl-tuning",
        ] {
            assert!(by_id(id).is_some(), "{id} missing");
        }
    }

    #[test]
    fn conflicts_are_symmetric_and_reasoned() {
        assert!(conflict("flash-attention-2", "flash-attention-3").is_some());
        assert!(conflict("flash-attention-3", "flash-attention-2").is_some());
        // Declared one way in the data (tf32 → bf16), found both ways.
        assert!(conflict("bf16-mixed-precision", "tf32").is_some());
        assert!(conflict("torch-compile", "cuda-graphs").is_none());
        assert!(synergy("torch-compile", "cuda-graphs").is_some());
        for t in all() {
            for c in &t.conflicts {
                assert!(conflict(&c.id, &t.id).is_some(), "{} <-> {}", t.id, c.id);
            }
        }
    }

    #[test]
    fn effects_are_the_sources_numbers() {
        let fa3 = by_id("flash-attention-3").unwrap();
        assert_eq!(
            (fa3.effect.speedup_low, fa3.effect.speedup_high),
            (Some(1.5), Some(2.0))
        );
        assert_eq!(fa3.min_compute_capability, Some(9.0));
        let gptq = by_id("gptq-int4").unwrap();
        assert_eq!(
            (gptq.effect.speedup_low, gptq.effect.speedup_high),
            (Some(3.25), Some(4.5))
        );
        assert!(
            by_id("fused-optimizer")
                .unwrap()
                .effect
                .speedup_conservative()
                .is_none()
        );
    }
}
