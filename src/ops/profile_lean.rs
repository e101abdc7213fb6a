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

use aisp_profile::rules::{
    DeviceWindow, Finding, LedgerSummary, RuleCheck, Rules, Severity, StakeOverlap,
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
    /// Findings, most severe first, then most time at stake. By default each gives id, title, severity,
    /// device, share, time at stake, the step now and predicted after its fix alone, what would then limit
    /// the step, and the fix; `detail` adds basis, columns, regions, window, evidence, why, verify and data.
    pub findings: Vec<Finding>,
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

/// What an assistant repeats to a user of a finding: its stake, the predicted step and the fix; the rest
/// (basis, columns, regions, window, evidence, why, verify, data) is cleared.
pub fn brief(mut f: Finding) -> Finding {
    f.basis.clear();
    f.columns.clear();
    f.regions.clear();
    f.window = None;
    f.evidence.clear();
    f.why.clear();
    f.verify.clear();
    f.data = serde_json::Value::Null;
    f
}

/// Where to look next after the findings: the ledger always, and the reader of what the top finding is made of.
fn next_calls(path: &str, findings: &[Finding], set: bool) -> Vec<String> {
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
    let mut view = RulesView {
        verdict,
        highest,
        findings: Vec::new(),
        minor: Vec::new(),
        ledger: Vec::new(),
        next: Vec::new(),
        windows: Vec::new(),
        overlaps: Vec::new(),
        checked: Vec::new(),
    };
    if detail {
        view.findings = findings;
        (view.ledger, view.windows, view.overlaps, view.checked) =
            (ledger, windows, overlaps, checked);
    } else {
        let mut past_cap = 0;
        for f in findings {
            if f.severity == Severity::Info {
                view.minor.push(match f.device {
                    Some(d) => format!("{} (device {d}, {} %)", f.id, f.share_pct),
                    None => format!("{} ({} %)", f.id, f.share_pct),
                });
                continue;
            }
            if view.findings.len() >= DEFAULT_FINDINGS {
                past_cap += 1;
                continue;
            }
            let mut f = brief(f);
            // The same rule on another device: its fix was given once already.
            if let Some(first) = view
                .findings
                .iter()
                .find(|s| s.id == f.id && s.fix == f.fix && !s.fix.is_empty())
            {
                f.fix = format!(
                    "as for device {}",
                    first.device.map_or("-".to_string(), |d| d.to_string())
                );
            }
            view.findings.push(f);
        }
        if past_cap > 0 {
            left_out.push(format!(
                "{past_cap} more finding(s) above info past the first {DEFAULT_FINDINGS}: pass \"detail\": true"
            ));
        }
        left_out.push(format!(
            "each finding's evidence, why, verify, regions and data{}; the per-device ledger summary, windows, \
             overlaps and rule checks: pass \"detail\": true",
            if view.minor.is_empty() {
                String::new()
            } else {
                format!(" (and the {} minor ones in full)", view.minor.len())
            }
        ));
    }
    view.next = next_calls(path, &view.findings, set);
    (view, left_out)
}
