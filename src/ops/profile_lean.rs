//! What a profile answer shows by default: what an assistant repeats to a user
//! (the verdict, the ranked findings with their stake and predicted step, the
//! next call) in about [`LEAN_BUDGET`] characters; the rest is one argument
//! away (`detail`, or the operation's own knobs) and `left_out` says what and
//! how. Numbers are never rounded here: only whole fields and rows are left
//! out.
//!
//! The findings of `aisp_profile_rules` keep the library's shape
//! ([`aisp_profile::rules::Finding`]); [`RulesView`] is how the operation
//! presents [`aisp_profile::rules::Rules`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use aisp_profile::Window;
use aisp_profile::rules::{
    DeviceWindow, Finding, LedgerSummary, RegionStake, RuleCheck, Rules, Severity, Stake,
    StakeOverlap,
};

/// About this many characters (Python `json.dumps`) for a default profile answer.
pub const LEAN_BUDGET: usize = 4_000;

/// Findings above `info` listed in a default `aisp_profile_rules` answer; the rest are counted in `left_out`.
pub const DEFAULT_FINDINGS: usize = 8;

/// `aisp_profile_rules`' answer: the verdict first, the findings ranked, the call to make next.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RulesView {
    /// One sentence: the most important finding, or that nothing significant was found.
    pub verdict: String,
    /// The highest severity found (`info` when none).
    pub highest: Severity,
    /// Findings, most severe first, then most time at stake. By default each gives id, severity, device,
    /// share, time at stake, the step now and predicted after its fix alone, what would then limit the step,
    /// title and fix; `detail` adds basis, columns, regions, window, evidence, why, verify and data.
    pub findings: Vec<FindingView>,
    /// Info-level findings (under 1 % of their window each), by id and device, when not given in full.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub minor: Vec<String>,
    /// With `detail`: per device (or rank), where the steady step goes in short (`aisp_profile_ledger` has
    /// all of it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ledger: Vec<LedgerSummary>,
    /// The calls to make next, with their arguments.
    pub next: Vec<String>,
    /// With `detail`: the analysis window per device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<DeviceWindow>,
    /// With `detail`: per device, how the findings' shares add up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlaps: Vec<StakeOverlap>,
    /// With `detail`: every rule and its outcome.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checked: Vec<RuleCheck>,
}

/// One finding as `aisp_profile_rules` presents it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FindingView {
    /// Stable rule id, e.g. `launch_bound_tiny_kernels`.
    pub id: String,
    pub severity: Severity,
    pub device: Option<i64>,
    /// time_at_stake_ns / the steady window × 100.
    pub share_pct: f64,
    /// GPU time on `device` a fix would remove from the critical path, summed over the steady steps.
    pub time_at_stake_ns: i64,
    /// gpu_idle (measured), estimate or none.
    pub stake: Stake,
    /// The median steady step period now (ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_ns: Option<i64>,
    /// The median steady step period if this finding's fix were applied alone (ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_step_ns: Option<i64>,
    /// What would then take most of the step: the largest ledger column left after the fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then_limited_by: Option<String>,
    pub title: String,
    /// What to change.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fix: String,
    /// With `detail`: how time_at_stake_ns was obtained (the what-if).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub basis: String,
    /// With `detail`: the ledger columns the stake is read from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    /// With `detail`: NVTX regions holding the time at stake, most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<RegionStake>,
    /// With `detail`: the window the share is of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    /// With `detail`: facts with numbers, names and timestamps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    /// With `detail`: why this costs time.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
    /// With `detail`: how to check the fix worked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub verify: String,
    /// With `detail`: the same facts as structured data.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
}

impl FindingView {
    /// The whole finding (`detail`).
    pub fn full(f: Finding) -> FindingView {
        // Destructured in full: a field the library adds must be placed here too.
        let Finding {
            id,
            title,
            severity,
            time_at_stake_ns,
            share_pct,
            stake,
            basis,
            step_ns,
            predicted_step_ns,
            then_limited_by,
            columns,
            regions,
            device,
            window,
            evidence,
            why,
            fix,
            verify,
            data,
        } = f;
        FindingView {
            id,
            severity,
            device,
            share_pct,
            time_at_stake_ns,
            stake,
            step_ns,
            predicted_step_ns,
            then_limited_by,
            title,
            fix,
            basis,
            columns,
            regions,
            window,
            evidence,
            why,
            verify,
            data,
        }
    }

    /// What an assistant repeats to a user.
    pub fn brief(f: Finding) -> FindingView {
        let mut v = FindingView::full(f);
        v.basis.clear();
        v.columns.clear();
        v.regions.clear();
        v.window = None;
        v.evidence.clear();
        v.why.clear();
        v.verify.clear();
        v.data = serde_json::Value::Null;
        v
    }
}

/// Where to look next after the findings: the ledger always, and the reader of what the top finding is made of.
fn next_calls(path: &str, findings: &[FindingView], set: bool) -> Vec<String> {
    let p = serde_json::to_string(path).unwrap_or_else(|_| format!("\"{path}\""));
    let mut next = vec![format!(
        "aisp_profile_ledger {{\"path\": {p}}}: where each steady step goes, column by column{}",
        if set { ", per rank" } else { "" }
    )];
    let top = findings.iter().find(|f| f.severity > Severity::Info);
    let Some(top) = top else {
        return next;
    };
    let id = top.id.as_str();
    let reader = if set {
        Some((
            "aisp_profile_ranks",
            "the set: clock alignment, stragglers, skew vs transfer per collective",
        ))
    } else if id.contains("nccl") || id.contains("communication") || id.contains("collective") {
        Some((
            "aisp_profile_overlap",
            "communication hidden behind compute, per device",
        ))
    } else if id.contains("fp32")
        || id.contains("gemm")
        || id.contains("kernel")
        || id.contains("elementwise")
    {
        Some((
            "aisp_profile_kernels",
            "the kernels by time with their class and precision",
        ))
    } else if id.contains("copy")
        || id.contains("pageable")
        || id.contains("h2d")
        || id.contains("d2h")
        || id.contains("memcpy")
    {
        Some((
            "aisp_profile_memory",
            "copies by direction and memory kind, pageable ones listed",
        ))
    } else if id.contains("step") || id.contains("variance") {
        Some((
            "aisp_profile_iterations",
            "each step's CPU and GPU time, the slowest steps",
        ))
    } else {
        Some((
            "aisp_profile_gaps",
            "the idle gaps with what the launching thread did meanwhile",
        ))
    };
    if let Some((tool, what)) = reader {
        next.push(format!("{tool} {{\"path\": {p}}}: {what}"));
    }
    next
}

/// Present `rules` for `path`: in full with `detail`, else lean; the notes for `left_out`.
pub fn rules_view(rules: Rules, path: &str, detail: bool, set: bool) -> (RulesView, Vec<String>) {
    let Rules {
        findings,
        overlaps,
        highest,
        verdict,
        ledger,
        windows,
        checked,
    } = rules;
    let mut left_out = Vec::new();
    if detail {
        let findings: Vec<FindingView> = findings.into_iter().map(FindingView::full).collect();
        let next = next_calls(path, &findings, set);
        return (
            RulesView {
                verdict,
                highest,
                findings,
                minor: Vec::new(),
                ledger,
                next,
                windows,
                overlaps,
                checked,
            },
            left_out,
        );
    }
    let mut shown: Vec<FindingView> = Vec::new();
    let mut minor = Vec::new();
    let mut past_cap = 0;
    for f in findings {
        if f.severity == Severity::Info {
            minor.push(match f.device {
                Some(d) => format!("{} (device {d}, {} %)", f.id, f.share_pct),
                None => format!("{} ({} %)", f.id, f.share_pct),
            });
            continue;
        }
        if shown.len() >= DEFAULT_FINDINGS {
            past_cap += 1;
            continue;
        }
        let mut v = FindingView::brief(f);
        // The same rule on another device: its fix was given once already.
        if let Some(first) = shown
            .iter()
            .find(|s| s.id == v.id && s.fix == v.fix && !s.fix.is_empty())
        {
            v.fix = format!(
                "as for device {}",
                first.device.map_or("-".to_string(), |d| d.to_string())
            );
        }
        shown.push(v);
    }
    if past_cap > 0 {
        left_out.push(format!(
            "{past_cap} more finding(s) above info past the first {DEFAULT_FINDINGS}: pass \"detail\": true"
        ));
    }
    left_out.push(format!(
        "each finding's evidence, why, verify, regions and data{}; the per-device ledger summary, windows, \
         overlaps and rule checks: pass \"detail\": true",
        if minor.is_empty() {
            String::new()
        } else {
            format!(" (and the {} minor ones in full)", minor.len())
        }
    ));
    let next = next_calls(path, &shown, set);
    (
        RulesView {
            verdict,
            highest,
            findings: shown,
            minor,
            ledger: Vec::new(),
            next,
            windows: Vec::new(),
            overlaps: Vec::new(),
            checked: Vec::new(),
        },
        left_out,
    )
}
