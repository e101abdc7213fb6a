//! Choosing and combining techniques: recommendations for a situation and
//! goal, the combined effect of a set (compatibility, diminishing returns),
//! and gain versus effort.
//!
//! Combination rule: techniques that act on the same component of a step
//! (two attention kernels, two weight formats) do not multiply — the best of
//! them counts; techniques on different components multiply. Each source
//! measured its technique end-to-end on its own workload, so the product is
//! an upper bound (Amdahl: a part's speedup only helps its share of the step).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use super::model::round;
use aisp_knowledge::techniques::{self, Goal, Level, Requirement, Technique, Workload};

/// What the recommender knows about the situation.
#[derive(Debug, Clone, Default)]
pub struct Situation {
    pub workload: Option<Workload>,
    /// Compute capability of the GPU, when known.
    pub compute_capability: Option<f64>,
    pub gpu_label: Option<String>,
    /// Conditions known to hold, each with the evidence that says so.
    pub holds: BTreeMap<Requirement, String>,
    /// Conditions known not to hold, with evidence.
    pub fails: BTreeMap<Requirement, String>,
    /// Profile findings (aisp_profile_rules ids) that hold, the largest predicted saving first: the catalog's
    /// `[[findings]]` advice moves techniques that address them first (those of the first finding before those
    /// of the second) and those that cannot help last.
    pub findings: Vec<String>,
    /// What the profile says each finding's fix leaves: id → (the step now, the step predicted, the numbers
    /// that justify it), ns.
    pub finding_steps: BTreeMap<String, (i64, i64, String)>,
    /// Components (technique `component`) the profiled run does not have, with the evidence: their
    /// techniques are left out (attention techniques for a run without attention kernels).
    pub absent: BTreeMap<String, String>,
    /// Techniques the profiled run already applies, with the evidence: left out.
    pub in_use: BTreeMap<String, String>,
    /// The profiled run's median steady step and, per component, the ledger time per step it acts on (ns):
    /// with a profile, techniques that address no finding are ranked by what they could save of it.
    pub step_ns: Option<i64>,
    pub component_ns: BTreeMap<String, (i64, String)>,
}

/// How a technique relates to the findings: 0 addresses one (with the finding's rank times 100 plus the
/// technique's position in its list: the first finding's techniques come first), 1 neutral, 2 cannot help;
/// plus the sentence saying so and the finding it addresses.
fn finding_tier(t: &Technique, findings: &[String]) -> (u8, usize, Option<String>, Option<String>) {
    let mut best: Option<(usize, String, String)> = None;
    let mut against: Option<String> = None;
    for (rank, f) in findings.iter().enumerate() {
        let Some(a) = techniques::advice_for(f) else {
            continue;
        };
        if let Some(pos) = a.addressed_by.iter().position(|x| x == &t.id) {
            let key = rank * 100 + pos;
            if best.as_ref().is_none_or(|b| key < b.0) {
                best = Some((
                    key,
                    format!("addresses profile finding `{}`", a.id),
                    a.id.clone(),
                ));
            }
        } else if a.cannot_help.contains(&t.component) && against.is_none() {
            against = Some(format!(
                "cannot help profile finding `{}`: {}",
                a.id, a.why_not
            ));
        }
    }
    match (best, against) {
        (Some((key, why, id)), _) => (0, key, Some(why), Some(id)),
        (None, Some(why)) => (2, 0, Some(why), None),
        (None, None) => (1, 0, None, None),
    }
}

/// What a technique that addresses no finding could save of the profiled step: its component's ledger time per
/// step × (1 − 1 / its lower measured speedup) — Amdahl on the part it acts on. `None` without a profile, a
/// ledger time for the component or a measured speedup.
fn ledger_saving(t: &Technique, s: &Situation) -> Option<(i64, i64, String)> {
    let step = s.step_ns?;
    let (ns, what) = s.component_ns.get(&t.component)?;
    let speedup = t.effect.speedup_conservative()?;
    if *ns <= 0 || speedup <= 1.0 {
        return None;
    }
    let saving = (*ns as f64 * (1.0 - 1.0 / speedup)) as i64;
    Some((
        saving,
        step - saving,
        format!(
            "acts on {what}: {:.2} ms of the {:.2} ms steady step ({:.1}%); at its lower measured speedup ({speedup}×) \
             that part would take {:.2} ms, the step about {:.2} ms",
            *ns as f64 / 1e6,
            step as f64 / 1e6,
            100.0 * *ns as f64 / step.max(1) as f64,
            (*ns - saving) as f64 / 1e6,
            (step - saving) as f64 / 1e6
        ),
    ))
}

/// A ranked technique.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Recommendation {
    pub rank: usize,
    pub id: String,
    pub name: String,
    pub category: String,
    /// The measured effect from the technique's source.
    pub speedup_low: Option<f64>,
    pub speedup_high: Option<f64>,
    pub memory_factor: Option<f64>,
    pub effect_scope: String,
    pub source_url: String,
    pub effort: Level,
    pub risk: Level,
    /// Why it is recommended, with the numbers used.
    pub reason: String,
    pub preconditions_met: Vec<String>,
    /// Conditions nobody told us about: check them before relying on the effect.
    pub preconditions_unknown: Vec<String>,
    pub how: String,
    /// With a profile: the steady step this technique would leave (ns), from the ledger — the addressed
    /// finding's `predicted_step_ns`, or Amdahl on the ledger time of the component it acts on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_step_ns: Option<i64>,
    /// With a profile: the ledger numbers that justify it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger: Option<String>,
}

/// A technique left out, and why.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LeftOut {
    pub id: String,
    pub reason: String,
}

/// The ranking value of a technique for a goal: the geometric mean of its
/// stated speedup range, where an "up to X" figure counts as the range 1–X
/// (and a lone lower bound L as L); for memory, 1 / memory factor.
fn goal_value(t: &Technique, goal: Goal) -> Option<f64> {
    let e = &t.effect;
    let speed = match (e.speedup_low, e.speedup_high) {
        (Some(l), Some(h)) => Some((l * h).sqrt()),
        (Some(l), None) => Some(l),
        (None, Some(h)) if h >= 1.0 => Some(h.sqrt()),
        (None, Some(h)) => Some(h),
        (None, None) => None,
    };
    match goal {
        Goal::Memory => e.memory_factor.map(|m| 1.0 / m),
        Goal::Throughput | Goal::Latency => speed,
        Goal::Cost => speed.or(e.memory_factor.map(|m| 1.0 / m)),
    }
}

fn describe_req(r: Requirement) -> &'static str {
    match r {
        Requirement::MultiGpu => "more than one GPU",
        Requirement::MultiNode => "more than one node",
        Requirement::Moe => "a mixture-of-experts model",
        Requirement::LongContext => "long sequences (≥ 8K tokens)",
        Requirement::MemoryPressure => "memory pressure (the workload does not fit or barely fits)",
        Requirement::LaunchBound => "launch-bound steps (many small kernels)",
        Requirement::DraftModel => "a draft model of the same family",
        Requirement::SharedPrefixes => "requests sharing prefixes",
        Requirement::DecodeHeavy => "generation-dominated serving",
        Requirement::GqaModelDesign => "freedom to change the model architecture",
        Requirement::Fp32Math => "matrix multiplies in fp32",
    }
}

/// Rank the catalog for a goal in a situation.
pub fn recommend(goal: Goal, s: &Situation, limit: usize) -> (Vec<Recommendation>, Vec<LeftOut>) {
    let mut picked: Vec<(f64, &Technique, Vec<String>, Vec<String>)> = Vec::new();
    let mut left = Vec::new();
    for t in techniques::all() {
        if let Some(w) = s.workload
            && !t.workload.covers(w)
        {
            continue;
        }
        if !t.goals.contains(&goal) {
            continue;
        }
        if let Some(ev) = s.in_use.get(&t.id) {
            left.push(LeftOut {
                id: t.id.clone(),
                reason: format!("already in use: {ev}"),
            });
            continue;
        }
        if let Some(ev) = s.absent.get(&t.id) {
            left.push(LeftOut {
                id: t.id.clone(),
                reason: format!("not for this run: {ev}"),
            });
            continue;
        }
        if let Some(ev) = s.absent.get(&t.component) {
            left.push(LeftOut {
                id: t.id.clone(),
                reason: format!(
                    "acts on {}, which this run does not have: {ev}",
                    t.component.replace('_', " ")
                ),
            });
            continue;
        }
        if let (Some(min), Some(cc)) = (t.min_compute_capability, s.compute_capability)
            && cc < min
        {
            left.push(LeftOut {
                id: t.id.clone(),
                reason: format!(
                    "needs compute capability {min}; {} is {cc}",
                    s.gpu_label.as_deref().unwrap_or("the GPU")
                ),
            });
            continue;
        }
        let mut met = Vec::new();
        let mut unknown = Vec::new();
        let mut blocked = None;
        for r in &t.requires {
            if let Some(ev) = s.holds.get(r) {
                met.push(format!("{}: {ev}", describe_req(*r)));
            } else if let Some(ev) = s.fails.get(r) {
                blocked = Some(format!("needs {}, but {ev}", describe_req(*r)));
                break;
            } else {
                unknown.push(describe_req(*r).to_string());
            }
        }
        if let Some(b) = blocked {
            left.push(LeftOut {
                id: t.id.clone(),
                reason: b,
            });
            continue;
        }
        if let (Some(min), Some(cc)) = (t.min_compute_capability, s.compute_capability) {
            met.push(format!("compute capability {cc} ≥ {min}"));
        }
        let value = goal_value(t, goal).unwrap_or(0.0);
        picked.push((value, t, met, unknown));
    }
    // Techniques that address a profile finding come first (in the catalog's
    // order for that finding) and those that cannot help it last; then
    // techniques whose preconditions all hold, then those with unchecked ones;
    // within each, known larger effects first, then lower effort and risk.
    // With a profile, techniques that address no finding follow what they could save of the profiled step
    // (their component's ledger time), those the ledger cannot price after them.
    picked.sort_by(|a, b| {
        let ka = a.0 > 0.0;
        let kb = b.0 > 0.0;
        let (ta, pa, _, _) = finding_tier(a.1, &s.findings);
        let (tb, pb, _, _) = finding_tier(b.1, &s.findings);
        let la = ledger_saving(a.1, s).map(|x| x.0);
        let lb = ledger_saving(b.1, s).map(|x| x.0);
        ta.cmp(&tb)
            .then(if ta == 0 {
                pa.cmp(&pb)
            } else {
                std::cmp::Ordering::Equal
            })
            .then(a.3.is_empty().cmp(&b.3.is_empty()).reverse())
            .then(lb.is_some().cmp(&la.is_some()))
            .then(lb.unwrap_or(0).cmp(&la.unwrap_or(0)))
            .then(kb.cmp(&ka))
            .then(b.0.total_cmp(&a.0))
            .then(a.1.effort.cmp(&b.1.effort))
            .then(a.1.risk.cmp(&b.1.risk))
    });
    // A technique that supersedes another applicable one replaces it.
    let applicable: Vec<String> = picked.iter().map(|p| p.1.id.clone()).collect();
    let mut superseded: BTreeMap<String, String> = BTreeMap::new();
    for p in &picked {
        for s in &p.1.supersedes {
            if applicable.contains(s) {
                superseded.insert(s.clone(), p.1.id.clone());
            }
        }
    }
    let mut out: Vec<Recommendation> = Vec::new();
    for (value, t, met, unknown) in picked {
        if let Some(by) = superseded.get(&t.id) {
            left.push(LeftOut {
                id: t.id.clone(),
                reason: format!("superseded by {by}, which applies here"),
            });
            continue;
        }
        if let Some(c) = out
            .iter()
            .find_map(|r| techniques::conflict(&r.id, &t.id).map(|why| (r.id.clone(), why)))
        {
            left.push(LeftOut {
                id: t.id.clone(),
                reason: format!("conflicts with higher-ranked {}: {}", c.0, c.1),
            });
            continue;
        }
        if out.len() >= limit {
            break;
        }
        let e = &t.effect;
        let effect = match (e.speedup_low, e.speedup_high, e.memory_factor) {
            (Some(l), Some(h), _) if l != h => format!("{l}–{h}× measured"),
            (Some(l), _, _) | (None, Some(l), _) if value > 0.0 && goal != Goal::Memory => {
                format!("{l}× measured")
            }
            (_, _, Some(m)) => format!("memory × {m} of the part it targets"),
            _ => "effect not quantified by a public source".to_string(),
        };
        let reason = format!(
            "helps {:?} ({effect}: {}); effort {:?}, risk {:?}{}",
            goal,
            e.scope,
            t.effort,
            t.risk,
            if met.is_empty() {
                String::new()
            } else {
                format!("; applies because {}", met.join(", "))
            }
        )
        .to_lowercase();
        let (_, key, why, addressed) = finding_tier(t, &s.findings);
        // The finding's predicted step is its own fix's: the first technique it lists.
        let addressed = addressed.filter(|_| key % 100 == 0);
        let reason = match why {
            Some(why) => format!("{why}. {reason}"),
            None => reason,
        };
        // The ledger's numbers: the addressed finding's predicted step, else Amdahl on the component's time.
        let (predicted_step_ns, ledger) = match addressed
            .and_then(|id| s.finding_steps.get(&id).map(|x| (id, x)))
        {
            Some((id, (step, pred, why))) => (
                Some(*pred),
                Some(format!(
                    "fixing `{id}` leaves a steady step of about {:.2} ms (now {:.2} ms): {why}",
                    *pred as f64 / 1e6,
                    *step as f64 / 1e6
                )),
            ),
            None => match ledger_saving(t, s) {
                Some((_, pred, why)) => (Some(pred), Some(why)),
                None => (None, None),
            },
        };
        out.push(Recommendation {
            rank: out.len() + 1,
            id: t.id.clone(),
            name: t.name.clone(),
            category: t.category.clone(),
            speedup_low: e.speedup_low,
            speedup_high: e.speedup_high,
            memory_factor: e.memory_factor,
            effect_scope: e.scope.clone(),
            source_url: e.source_url.clone(),
            effort: t.effort,
            risk: t.risk,
            reason,
            preconditions_met: met,
            preconditions_unknown: unknown,
            how: t.how.clone(),
            predicted_step_ns,
            ledger,
        });
    }
    (out, left)
}

/// The effect of a set of techniques together.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Compound {
    pub techniques: Vec<String>,
    /// Pairs that should not be combined, with the reason.
    pub conflicts: Vec<(String, String, String)>,
    /// Pairs that reinforce each other, with the reason.
    pub synergies: Vec<(String, String, String)>,
    /// Product over components of each component's best stated lower bound.
    pub combined_speedup_low: f64,
    /// Product over components of each component's best upper bound: an upper bound.
    pub combined_speedup_high: f64,
    /// Techniques with no public speedup figure (not in the product).
    pub unquantified: Vec<String>,
    /// Per component: which technique counts, and its memory factor when stated.
    pub by_component: Vec<ComponentEffect>,
    /// Running combined range in the given order.
    pub incremental: Vec<Step>,
    pub method: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ComponentEffect {
    pub component: String,
    pub techniques: Vec<String>,
    /// The technique whose effect counts for this component.
    pub counted: Option<String>,
    pub speedup_low: Option<f64>,
    pub speedup_high: Option<f64>,
    /// Smallest memory factor among them, on this component's memory.
    pub memory_factor: Option<f64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Step {
    pub added: String,
    pub cumulative_speedup_low: f64,
    pub cumulative_speedup_high: f64,
}

fn combine(ts: &[&Technique]) -> (f64, f64, Vec<ComponentEffect>) {
    let mut comps: BTreeMap<String, Vec<&Technique>> = BTreeMap::new();
    for t in ts {
        comps.entry(t.component.clone()).or_default().push(t);
    }
    let (mut low, mut high) = (1.0, 1.0);
    let mut by = Vec::new();
    for (c, list) in comps {
        // Within a component the best one counts: by optimistic end, then conservative.
        let counted = list
            .iter()
            .filter(|t| t.effect.speedup_known())
            .max_by(|a, b| {
                a.effect
                    .speedup_optimistic()
                    .unwrap_or(1.0)
                    .total_cmp(&b.effect.speedup_optimistic().unwrap_or(1.0))
                    .then(
                        a.effect
                            .speedup_low
                            .unwrap_or(0.0)
                            .total_cmp(&b.effect.speedup_low.unwrap_or(0.0)),
                    )
            })
            .copied();
        let (l, h) = match counted {
            Some(t) => (t.effect.speedup_low, t.effect.speedup_optimistic()),
            None => (None, None),
        };
        // Slowdowns (e.g. recompute) count at their stated value on both ends.
        low *= l.unwrap_or(if h.is_some_and(|h| h < 1.0) {
            h.unwrap_or(1.0)
        } else {
            1.0
        });
        high *= h.unwrap_or(1.0);
        by.push(ComponentEffect {
            component: c,
            techniques: list.iter().map(|t| t.id.clone()).collect(),
            counted: counted.map(|t| t.id.clone()),
            speedup_low: l,
            speedup_high: h,
            memory_factor: list
                .iter()
                .filter_map(|t| t.effect.memory_factor)
                .min_by(f64::total_cmp),
        });
    }
    (low, high, by)
}

/// Unknown technique ids in `ids`.
pub fn unknown_ids(ids: &[String]) -> Vec<String> {
    ids.iter()
        .filter(|i| techniques::by_id(i).is_none())
        .cloned()
        .collect()
}

/// Combine known techniques (callers check `unknown_ids` first).
pub fn compound(ids: &[String]) -> Compound {
    let ts: Vec<&Technique> = ids.iter().filter_map(|i| techniques::by_id(i)).collect();
    let mut conflicts = Vec::new();
    let mut synergies = Vec::new();
    for (i, a) in ts.iter().enumerate() {
        for b in &ts[i + 1..] {
            if let Some(why) = techniques::conflict(&a.id, &b.id) {
                conflicts.push((a.id.clone(), b.id.clone(), why.to_string()));
            }
            if let Some(why) = techniques::synergy(&a.id, &b.id) {
                synergies.push((a.id.clone(), b.id.clone(), why.to_string()));
            }
        }
    }
    let (low, high, by) = combine(&ts);
    let mut incremental = Vec::new();
    for k in 1..=ts.len() {
        let (l, h, _) = combine(&ts[..k]);
        incremental.push(Step {
            added: ts[k - 1].id.clone(),
            cumulative_speedup_low: round(l, 3),
            cumulative_speedup_high: round(h, 3),
        });
    }
    Compound {
        techniques: ts.iter().map(|t| t.id.clone()).collect(),
        conflicts,
        synergies,
        combined_speedup_low: round(low, 3),
        combined_speedup_high: round(high, 3),
        unquantified: ts.iter().filter(|t| !t.effect.speedup_known()).map(|t| t.id.clone()).collect(),
        by_component: by,
        incremental,
        method: "Techniques on the same component do not multiply (the best one counts); different components multiply. \
Each figure was measured end-to-end on its source's own workload and baseline, so the high end is an upper bound: a \
component's speedup only helps its share of your step (Amdahl). Measure after each step."
            .into(),
    }
}

/// Gain versus effort for one technique.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Roi {
    pub id: String,
    pub name: String,
    /// The gain used: geometric mean of the stated speedup range ("up to X" counts as 1–X), or 1/memory factor for the memory goal.
    pub gain: Option<f64>,
    pub effort: Level,
    pub risk: Level,
    /// (gain − 1) / effort weight (low 1, medium 2, high 3); null without a public figure.
    pub roi: Option<f64>,
    pub basis: String,
}

pub fn roi(goal: Goal, workload: Option<Workload>) -> Vec<Roi> {
    let mut out: Vec<Roi> = techniques::all()
        .iter()
        .filter(|t| t.goals.contains(&goal) && workload.is_none_or(|w| t.workload.covers(w)))
        .map(|t| {
            let gain = goal_value(t, goal);
            Roi {
                id: t.id.clone(),
                name: t.name.clone(),
                gain,
                effort: t.effort,
                risk: t.risk,
                roi: gain.map(|g| round((g - 1.0) / t.effort.weight(), 3)),
                basis: format!("{} ({})", t.effect.scope, t.effect.source_url),
            }
        })
        .collect();
    out.sort_by(|a, b| match (a.roi, b.roi) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.effort.cmp(&b.effort),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn same_component_does_not_multiply() {
        // FA2 (1.15–3.0) and FA3 (1.5–2.0) both act on attention: the best counts, and they conflict.
        let c = compound(&ids(&["flash-attention-2", "flash-attention-3"]));
        assert_eq!(c.combined_speedup_high, 3.0);
        assert_eq!(c.conflicts.len(), 1);
        // Different components multiply: torch.compile (1.21–1.51) × CUDA graphs (1.12–1.70).
        let c = compound(&ids(&["torch-compile", "cuda-graphs"]));
        assert_eq!(c.combined_speedup_low, round(1.21 * 1.12, 3));
        assert_eq!(c.combined_speedup_high, round(1.51 * 1.7, 3));
        assert_eq!(c.synergies.len(), 1);
        assert_eq!(c.incremental.len(), 2);
        assert_eq!(c.incremental[0].cumulative_speedup_high, 1.51);
    }

    #[test]
    fn unquantified_techniques_stay_out_of_the_product() {
        let c = compound(&ids(&["fused-optimizer", "torch-compile"]));
        assert_eq!(c.unquantified, vec!["fused-optimizer".to_string()]);
        assert_eq!(c.combined_speedup_high, 1.51);
        assert_eq!(
            unknown_ids(&ids(&["nope", "torch-compile"])),
            vec!["nope".to_string()]
        );
    }

    #[test]
    fn a_profiled_run_gets_the_top_finding_s_fix_first_and_nothing_it_lacks_or_uses() {
        let mut s = Situation {
            workload: Some(Workload::Training),
            findings: ids(&["elementwise_unfused", "exposed_copies"]),
            step_ns: Some(6_000_000),
            ..Default::default()
        };
        s.finding_steps.insert(
            "elementwise_unfused".into(),
            (
                6_000_000,
                1_300_000,
                "78% of the steady window at stake".into(),
            ),
        );
        s.component_ns
            .insert("gemm".into(), (1_000_000, "the GEMM columns".into()));
        s.absent
            .insert("attention".into(), "no attention kernels".into());
        s.in_use
            .insert("bf16-mixed-precision".into(), "bf16 GEMM kernels".into());
        let (recs, left) = recommend(Goal::Throughput, &s, 60);
        // The first finding's techniques before the second's, its own fix first with the finding's predicted
        // step (the others it lists do not carry it).
        assert_eq!(recs[0].id, "torch-compile");
        assert_eq!(recs[0].predicted_step_ns, Some(1_300_000));
        let at = |id: &str| recs.iter().position(|r| r.id == id).unwrap();
        assert!(at("liger-kernels") < at("pinned-memory"));
        assert!(
            recs[at("pinned-memory")]
                .reason
                .starts_with("addresses profile finding `exposed_copies`")
        );
        assert!(
            recs.iter()
                .all(|r| r.id != "flash-attention-2" && r.id != "bf16-mixed-precision")
        );
        let why = |id: &str| {
            left.iter()
                .find(|l| l.id == id)
                .map(|l| l.reason.clone())
                .unwrap()
        };
        assert!(
            why("flash-attention-3").starts_with("acts on attention, which this run does not have")
        );
        assert!(why("bf16-mixed-precision").starts_with("already in use"));
        // A technique on a ledger column is priced by Amdahl on it: fp8 (1.5× measured) on 1 ms of GEMMs.
        let fp8 = recs.iter().find(|r| r.id == "fp8-training").unwrap();
        assert_eq!(fp8.predicted_step_ns, Some(6_000_000 - 333_333));
    }

    #[test]
    fn recommend_respects_hardware_and_conditions() {
        let mut s = Situation {
            workload: Some(Workload::Inference),
            compute_capability: Some(8.0),
            gpu_label: Some("a100-80gb".into()),
            ..Default::default()
        };
        s.fails
            .insert(Requirement::DraftModel, "no draft model was given".into());
        let (recs, left) = recommend(Goal::Latency, &s, 50);
        assert!(
            recs.iter()
                .all(|r| r.id != "flash-attention-3" && r.id != "fp8-inference")
        );
        assert!(
            left.iter()
                .any(|l| l.id == "fp8-inference"
                    && l.reason.contains("needs compute capability 8.9"))
        );
        assert!(
            left.iter()
                .any(|l| l.id == "speculative-decoding" && l.reason.contains("no draft model"))
        );
        // Ranked by measured effect: the first has a known speedup.
        assert!(recs[0].speedup_low.or(recs[0].speedup_high).is_some());
        // No two conflicting techniques are both recommended.
        for (i, a) in recs.iter().enumerate() {
            for b in &recs[i + 1..] {
                assert!(
                    techniques::conflict(&a.id, &b.id).is_none(),
                    "{} vs {}",
                    a.id,
                    b.id
                );
            }
        }
    }

    #[test]
    fn roi_divides_gain_by_effort() {
        let r = roi(Goal::Throughput, Some(Workload::Training));
        let tc = r.iter().find(|x| x.id == "torch-compile").unwrap();
        // Gain = geometric mean of 1.21–1.51 = 1.3517; ROI = (1.3517 − 1) / 1.
        assert_eq!(tc.roi, Some(0.352));
        assert!(r.windows(2).all(|w| match (w[0].roi, w[1].roi) {
            (Some(a), Some(b)) => a >= b,
            (None, Some(_)) => false,
            _ => true,
        }));
    }
}
