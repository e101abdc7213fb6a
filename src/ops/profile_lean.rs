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

use aisp_profile::classify::{KernelClass, Precision, bare_kernel_name};
use aisp_profile::compare::{
    Basis, ColumnChange, Comparability, Compare, Evidence, FindingChange, KernelChange, Prediction,
    Side, StepChange, Verdict,
};
use aisp_profile::kernels::{
    ClassShare, DeviceKernels, DeviceShare, KernelNames, KernelRow, Kernels, LedgerClassShare,
};
use aisp_profile::ranks::RankSet;
use aisp_profile::rules::registry::Shown;
use aisp_profile::rules::{
    DeviceWindow, Finding, LedgerSummary, RuleCheck, Rules, Severity, StakeOverlap, registry,
};

/// About this many characters (Python `json.dumps`) for a default profile answer, on average.
pub const LEAN_BUDGET: usize = 4_000;

/// At most this many for one default answer of `aisp_profile_compare` or `aisp_profile_ranks` (each finding and
/// applied prediction carries a line of its numbers; a set's three findings can take the average's margin).
pub const LEAN_MAX: usize = 4_500;

/// Findings above `info` listed in a default `aisp_profile_rules` answer; the rest are counted in `left_out`.
pub const DEFAULT_FINDINGS: usize = 8;

/// Kernels a default rules answer lists per step, a line each (`detail` gives the summary's all, as fields).
pub const STEP_KERNEL_LINES: usize = 5;

/// Lines of evidence the top finding keeps in a default rules answer (the others keep none).
pub const TOP_EVIDENCE_LINES: usize = 3;

/// Findings above `info` listed in brief in a default `aisp_profile_ranks` answer: its set's parts (the
/// stragglers, the residual) share the budget; the rest are named in `left_out`.
pub const DEFAULT_SET_FINDINGS: usize = 3;

/// Predictions (before-run findings' predicted vs measured step) in a default `aisp_profile_compare`
/// answer, the applied ones first kept; the rest are counted in `left_out`.
pub const DEFAULT_PREDICTIONS: usize = 4;

/// Findings that changed, in a default `aisp_profile_compare` answer (those that moved most).
pub const DEFAULT_FINDING_CHANGES: usize = 6;

/// Devices (or ranks) whose step ledger in short a default `aisp_profile_rules` answer gives; the rest are counted
/// in `left_out`.
pub const DEFAULT_LEDGER_ROWS: usize = 4;

/// What an answer of findings leads with (`aisp_profile_rules`, `aisp_profile_ranks`): the verdict, the
/// findings ranked, the call to make next.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Lead {
    /// One sentence: the most important finding with its stake, or that nothing significant was found.
    pub verdict: String,
    /// The highest severity found (`info` when none).
    pub highest: Severity,
    /// Findings, most severe first, then most time at stake. By default the first few above info each give id,
    /// title, severity, device, share, time at stake, the step now and predicted after its fix alone, what
    /// would then limit the step, one line of the measured numbers its stake rests on (`gist`) and the fix
    /// (`left_out` names the rest); `detail` adds basis, columns, regions, window, evidence, why, verify and data.
    pub findings: Vec<Finding>,
    /// With two findings or more above info: each of them in one line (id, device, share, severity), ranked:
    /// the whole list in a few hundred characters, which stays when a long answer is held to the size cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranked: Option<String>,
    /// Info-level findings (under 1 % of their window each), by id, device and share, when not given in full.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub minor: Vec<String>,
    /// The calls to make next, with their arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next: Vec<String>,
}

/// `aisp_profile_rules`' answer: the verdict first, the findings ranked, the call to make next.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RulesView {
    #[serde(flatten)]
    pub lead: Lead,
    /// Per device (or rank), the steady step in short: how steps were found (`steps_from`, `step_marker`), how
    /// many, the median period and its split into compute, communication, copy and idle; `detail` adds the
    /// largest ledger columns and every device past the first few (`aisp_profile_ledger` has all of it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ledger: Vec<StepInShort>,
    /// With `detail`: the analysis window per device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<DeviceWindow>,
    /// With `detail`: per device with two findings or more above info, how their shares add up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlaps: Vec<StakeOverlap>,
    /// With `detail`: every rule that found nothing, by id, and why (`below threshold: ...` or
    /// `not applicable: ...`).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "aisp_profile::rules::ordered_map"
    )]
    #[schemars(with = "std::collections::BTreeMap<String, String>")]
    pub checked: Vec<(String, String)>,
}

/// A device's steady step in short, as an `aisp_profile_rules` answer gives it: the step ledger's summary and the
/// kernels the step spends most in, a line each by default (`detail` gives their figures as fields, in
/// `top_kernels`): a kernel as an object takes a line per field where a client indents its JSON.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct StepInShort {
    #[serde(flatten)]
    pub step: LedgerSummary,
    /// By default, the kernels with the most time per steady step, most first, a line each: name, time a step,
    /// calls a step, share of the step, ledger class and precision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_kernels: Vec<String>,
    /// By default, the NVTX ranges inside the steady steps with the most kernel time, a line each: name,
    /// occurrences a step, host time each, kernel time a step and its share of the step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_regions: Vec<String>,
    /// The host calls of the thread that launches the step's kernels with the most time, a line each: name (OS
    /// runtime calls marked), calls a step, time a step and its share; only where the device idles at least
    /// [`aisp_profile::rules::HOST_CALLS_MIN_IDLE_PCT`] % of the step (else the host is off the critical path).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_calls: Vec<String>,
    /// By default, the busy split in one line (`groups_pct` with `detail`): the groups above zero, largest first.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub split: String,
    /// By default, the largest ledger columns in one line (`top_columns` with `detail`), largest first.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub columns: String,
}

/// A step summary's NVTX ranges and host calls, taken out of it as lines (never given as fields).
fn host_lines(step: &mut LedgerSummary) -> (Vec<String>, Vec<String>) {
    (
        std::mem::take(&mut step.top_regions)
            .iter()
            .map(|r| r.line())
            .collect(),
        std::mem::take(&mut step.top_calls)
            .iter()
            .map(|c| c.line())
            .collect(),
    )
}

impl StepInShort {
    /// The summary with its kernels as fields (`detail`); its NVTX ranges a line each still (their fields are
    /// the line's figures).
    fn whole(mut step: LedgerSummary) -> Self {
        let (step_regions, step_calls) = host_lines(&mut step);
        StepInShort {
            step,
            step_kernels: Vec::new(),
            step_regions,
            step_calls,
            split: String::new(),
            columns: String::new(),
        }
    }

    /// The summary with its kernels, ranges, split and columns a line each: an object or a map takes a line per
    /// field where a client indents its JSON.
    fn in_lines(mut step: LedgerSummary) -> Self {
        let step_kernels = std::mem::take(&mut step.top_kernels)
            .iter()
            .take(STEP_KERNEL_LINES)
            .map(|k| k.line())
            .collect();
        let (step_regions, step_calls) = host_lines(&mut step);
        let mut groups: Vec<(String, f64)> = std::mem::take(&mut step.groups_pct)
            .into_iter()
            .filter(|(_, v)| *v > 0.0)
            .collect();
        groups.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
        let percent = |v: &[(String, f64)]| {
            v.iter()
                .map(|(k, v)| format!("{k} {v} %"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let split = percent(&groups);
        let columns = percent(&std::mem::take(&mut step.top_columns));
        StepInShort {
            step,
            step_kernels,
            step_regions,
            step_calls,
            split,
            columns,
        }
    }
}

/// A rule that found nothing, as `checked` gives it: its id, and its status in words, then what this export
/// adds to the rule's standing test (the stake it found below threshold, why it did not apply); the standing
/// test itself is the rule's `quiet` text, which `finding` with its id gives.
fn check_line(c: RuleCheck) -> (String, String) {
    let status = c.status.replace('_', " ");
    let quiet = registry::find(&c.id).map_or("", |r| r.text.quiet);
    let own = match c.detail.strip_prefix(quiet) {
        Some(rest) if !quiet.is_empty() => {
            rest.trim().trim_start_matches('(').trim_end_matches(')')
        }
        _ => c.detail.as_str(),
    };
    let line = if own.is_empty() {
        status
    } else {
        format!("{status}: {own}")
    };
    (c.id, line)
}

/// What an assistant repeats to a user of a finding: its stake, the predicted step, the numbers it rests on in one
/// line (`gist`) and the fix; the rest (basis, columns, regions, window, evidence, why, verify, data) is cleared.
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

/// A detailed answer's findings with nothing said twice: a rule's basis, why, fix and verify given again on
/// another device say "as for device N"; the copies `data` keeps of the finding's own fields (`step_ns`,
/// `predicted_step_ns`, `at_stake_ns`, `window_ns`) are dropped where they are equal. No figure goes: each is in
/// the answer once.
pub fn said_once(findings: &mut [Finding]) {
    for i in 0..findings.len() {
        let (earlier, rest) = findings.split_at_mut(i);
        let f = &mut rest[0];
        if let Some(first) = earlier
            .iter()
            .find(|e| e.id == f.id && e.device.is_some() && e.device != f.device)
        {
            let as_for = format!("as for device {}", first.device.unwrap_or_default());
            for (mine, theirs) in [
                (&mut f.basis, &first.basis),
                (&mut f.why, &first.why),
                (&mut f.fix, &first.fix),
                (&mut f.verify, &first.verify),
            ] {
                if !mine.is_empty() && mine == theirs {
                    *mine = as_for.clone();
                }
            }
        }
        if let serde_json::Value::Object(m) = &mut f.data {
            let own = [
                ("step_ns", f.step_ns),
                ("predicted_step_ns", f.predicted_step_ns),
                ("at_stake_ns", Some(f.time_at_stake_ns)),
            ];
            for (key, value) in own {
                if value.is_some() && m.get(key).and_then(|v| v.as_i64()) == value {
                    m.remove(key);
                }
            }
            let window = f.window.map(|w| w.length_ns);
            if window.is_some() && m.get("window_ns").and_then(|v| v.as_i64()) == window {
                m.remove("window_ns");
            }
        }
    }
}

/// `{"path": "<path>"}`, the arguments of a call a `next` line names.
pub fn path_arg(path: &str) -> String {
    format!("{{\"path\": {}}}", serde_json::Value::from(path))
}

/// The findings a default answer lists: those above info, the first `cap` of them in [`brief`] (a rule
/// repeated on another device says "as for device N" instead of its fix again); the info-level ones by id,
/// device and share in `minor`.
pub struct LeanFindings {
    pub findings: Vec<Finding>,
    pub minor: Vec<String>,
    /// Findings above info past the first `cap`, by id, device, severity and share.
    pub past_cap: Vec<String>,
    pub cap: usize,
    /// Lines of evidence the top finding kept (0: none, as the others).
    pub top_evidence: usize,
}

/// `id (device d, s %)`, or `id (s %)` for a finding of no one device; with its severity after the share when
/// it is above info.
fn short(f: &Finding) -> String {
    let severity = match serde_json::to_value(f.severity) {
        Ok(serde_json::Value::String(s)) if f.severity > Severity::Info => format!(", {s}"),
        _ => String::new(),
    };
    match f.device {
        Some(d) => format!("{} (device {d}, {} %{severity})", f.id, f.share_pct),
        None => format!("{} ({} %{severity})", f.id, f.share_pct),
    }
}

/// The findings above info in one line, ranked, when there are two or more (one is in view whatever the cap
/// leaves out).
fn ranked(findings: &[Finding]) -> Option<String> {
    let above: Vec<String> = findings
        .iter()
        .filter(|f| f.severity > Severity::Info)
        .map(short)
        .collect();
    (above.len() > 1).then(|| format!("{} findings above info: {}", above.len(), above.join("; ")))
}

pub fn lean_findings(all: Vec<Finding>, cap: usize) -> LeanFindings {
    let mut out = LeanFindings {
        findings: Vec::new(),
        minor: Vec::new(),
        past_cap: Vec::new(),
        cap,
        top_evidence: 0,
    };
    for f in all {
        if f.severity == Severity::Info {
            out.minor.push(short(&f));
            continue;
        }
        if out.findings.len() >= cap {
            out.past_cap.push(short(&f));
            continue;
        }
        let mut f = brief(f);
        // The same rule on another device: its fix was given once already.
        if let Some(first) = out
            .findings
            .iter()
            .find(|s| s.id == f.id && s.fix == f.fix && !s.fix.is_empty())
        {
            f.fix = format!(
                "as for device {}",
                first.device.map_or("-".to_string(), |d| d.to_string())
            );
        }
        out.findings.push(f);
    }
    out
}

impl LeanFindings {
    /// What `left_out` says of the findings (those past the cap, and what each lost) and of `what` else the
    /// answer cut.
    pub fn left_out(&self, what: &[&str], left_out: &mut Vec<String>) {
        if !self.past_cap.is_empty() {
            left_out.push(format!(
                "{} more finding(s) above info past the first {} ({}): pass \"detail\": true",
                self.past_cap.len(),
                self.cap,
                self.past_cap.join(", ")
            ));
        }
        let mut cut = Vec::new();
        if !self.findings.is_empty() || !self.minor.is_empty() {
            let evidence = match self.top_evidence {
                0 => "each finding's evidence".to_string(),
                n => format!("each finding's evidence (the top one's past {n} lines)"),
            };
            cut.push(format!(
                "{evidence}, why, verify, regions, data{}",
                if self.minor.is_empty() {
                    String::new()
                } else {
                    format!(", the {} minor ones", self.minor.len())
                }
            ));
        }
        cut.extend(what.iter().map(|w| w.to_string()));
        left_out.extend(pass_detail(&cut));
    }
}

/// The `left_out` line for the parts a default answer cut: what, and that `detail` brings them back.
fn pass_detail(cut: &[String]) -> Option<String> {
    (!cut.is_empty()).then(|| format!("{}: pass \"detail\": true", cut.join("; ")))
}

/// The one call to make next. With a finding above info, the answer holds the diagnosis (the top finding with its
/// first lines of evidence, its fix and predicted step), so what comes next is the fix and then the comparison of
/// the run after it with this one: the call that says whether the fix worked, as predicted. The rows the top
/// finding's stake is made of are one call away ([`more_of_top`], in `left_out`). With no finding above info, the
/// largest kernels whole (one export) or the ledger per rank (a set): the answer already holds the step's ledger in
/// short and its largest kernels a line each; what it lacks is what those kernels are (demangled names, launches),
/// which a rule could not judge. One line, not a menu: each suggested call is one an assistant tends to make.
fn next_calls(path: &str, findings: &[Finding], set: bool) -> Vec<String> {
    match findings.iter().find(|f| f.severity > Severity::Info) {
        Some(_) => vec![format!(
            "aisp_profile_compare {{\"before\": {}, \"after\": \"<the {} captured once the fix is in>\"}}: \
             whether the fix worked, predicted vs measured step",
            serde_json::Value::from(path),
            if set {
                "folder of per-rank exports"
            } else {
                "export"
            }
        )],
        None if set => vec![format!(
            "aisp_profile_ledger {}: each steady step, column by column, per rank",
            path_arg(path)
        )],
        None => vec![format!(
            "aisp_profile_kernels {{\"path\": {}, \"detail\": true, \"limit\": {DEFAULT_KERNEL_ROWS}}}: the largest \
             kernels whole (demangled names, launch configuration, duration statistics, class evidence)",
            serde_json::Value::from(path)
        )],
    }
}

/// The `left_out` line that names the call showing the top finding's stake row by row.
fn more_of_top(path: &str, findings: &[Finding], set: bool) -> Option<String> {
    let top = findings.iter().find(|f| f.severity > Severity::Info)?;
    let reader = reader_of(path, top, set);
    let call = reader
        .split_once("}: ")
        .map_or(reader.as_str(), |(call, _)| call);
    Some(format!("the rows of `{}`: {call}}}", top.id))
}

/// The call that shows what a finding is made of: the answer its rule's `shown_in` names (for a set, the set's
/// own reader: alignment and stragglers are what a set adds).
fn reader_of(path: &str, top: &Finding, set: bool) -> String {
    let shown = registry::find(&top.id).map_or(Shown::Gaps, |r| r.shown_in);
    let (tool, what) = match shown {
        _ if set => (
            "aisp_profile_ranks",
            "the set: clock alignment, stragglers, skew vs transfer per collective",
        ),
        Shown::Kernels => (
            "aisp_profile_kernels",
            "the kernels by time with their class and precision",
        ),
        Shown::Gaps => (
            "aisp_profile_gaps",
            "the idle gaps with what the launching thread did meanwhile",
        ),
        Shown::Copies => (
            "aisp_profile_memory",
            "copies by direction and memory kind, pageable ones listed",
        ),
        Shown::Communication => (
            "aisp_profile_overlap",
            "communication hidden behind compute, per device",
        ),
        Shown::Steps => (
            "aisp_profile_iterations",
            "each step's CPU and GPU time, the slowest steps",
        ),
    };
    format!("{tool} {}: {what}", path_arg(path))
}

/// What an answer of findings parts with under the MCP size cap before any row is cut
/// ([`crate::answer_cap::Shed`]), in order: findings under 1 %, each finding's `data` (the numbers its evidence
/// states, as fields), its rule's standing `why` and `verify`, its window (the device's, in `windows`), its ledger
/// column names, the rules that found nothing, the windows (each device's is in its ledger's steps), how shares
/// add up, and its NVTX regions (the top one is named in its evidence); a detailed answer's kernels as fields past
/// the first four; then the low findings' evidence, basis and fix, the next call (the comparison after a fix, said
/// in the tool's description too) and the minor findings' names, each device's kernel lines past the first three,
/// NVTX range lines past the first two and host call lines past the first three, every finding's evidence past its
/// first line, the medium findings' evidence and basis, the rest of the NVTX ranges, host calls and kernel lines, the
/// other devices' steps (the top finding's
/// comes first), the low findings' gist, what would limit the step and the step now and after (title, share and
/// stake stay), and the low findings themselves (`ranked` names every finding in a line), and each device's largest
/// ledger columns (its busy split stays), and last each device's step in short. Every finding at medium or above
/// keeps its stake, predicted step, gist and fix before any finding is cut; those above medium keep their basis and
/// first line of evidence too: a cut list of findings hides a problem, a shed field only its wording. `finding`
/// brings any one finding back whole. (A title is never shed: the output schema requires it.)
pub const FINDING_SHEDS: &[crate::answer_cap::Shed] = &[
    "findings[severity=info]",
    "findings[].data",
    "findings[].why",
    "findings[].verify",
    "findings[].window",
    "findings[].columns",
    "checked",
    "windows",
    "overlaps",
    "findings[].regions",
    "ledger[].top_kernels[:4]",
    "findings[severity=low].evidence",
    "findings[severity=low].basis",
    "findings[severity=low].fix",
    "next",
    "minor",
    "ledger[].step_kernels[:3]",
    "ledger[].step_regions[:2]",
    "ledger[].step_calls[:3]",
    "findings[].evidence[:1]",
    "findings[severity=medium].evidence",
    "findings[severity=medium].basis",
    "ledger[].step_regions",
    "ledger[].step_calls",
    "ledger[].step_kernels",
    "ledger[].top_kernels",
    "ledger[:1]",
    "findings[severity=low].gist",
    "findings[severity=low].then_limited_by",
    "findings[severity=low].predicted_step_ns",
    "findings[severity=low].step_ns",
    "findings[severity=low]",
    "ledger[].columns",
    "ledger[].top_columns",
    "ledger",
];

/// What a detailed `aisp_profile_compare` answer parts with under the MCP size cap before any row is cut, in
/// order: each side's steady periods (the step change's median and interval are computed from them), then what
/// each side says that `comparability.facts` says too (export, GPU models and UUIDs, hosts, driver), the facts
/// that bear on nothing (`effect` none: the same on both sides, or a difference that does not matter), and last the
/// kernels whose count per step changed. Each list then keeps its first rows: the verdict, its basis and the
/// summary always stay.
pub const COMPARE_SHEDS: &[crate::answer_cap::Shed] = &[
    "before.step_periods_ns",
    "after.step_periods_ns",
    "before.export",
    "after.export",
    "before.gpu_uuids",
    "after.gpu_uuids",
    "before.gpus",
    "after.gpus",
    "before.hosts",
    "after.hosts",
    "before.driver",
    "after.driver",
    "comparability.facts[effect=none]",
    "comparability.work.changed",
];

/// `aisp_profile_ranks` is read for the set (alignment, stragglers, skew): under the cap its findings go back to
/// what a default answer gives of them (the rules of the same set give each in full), then the set parts with its
/// heat map (the per-rank, per-step periods a chart draws), the GPUs' identities and the ledger in short (the
/// rules answer's), before any of its lists loses a row.
pub const RANKS_SHEDS: &[crate::answer_cap::Shed] = &[
    "findings[severity=info]",
    "findings[].data",
    "findings[].why",
    "findings[].verify",
    "findings[].window",
    "findings[].columns",
    "findings[].regions",
    "findings[].evidence",
    "findings[].basis",
    "set.cross_rank.heat_map",
    "set.identities",
    "set.ledger",
];

/// How much of the findings a rules answer gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Detail<'a> {
    /// The lead: the first findings in brief.
    Lean,
    /// Every finding in full, with the windows, overlaps and rule checks.
    All,
    /// The findings of one rule (on each device it fired on) in full, nothing else of the others.
    Finding(&'a str),
}

/// Present `rules` for `path` as `detail` asks; the notes for `left_out`. A `finding` no rule of this profile
/// raised is an error that lists those it did.
pub fn rules_view(
    rules: Rules,
    path: &str,
    detail: Detail,
    set: bool,
) -> Result<(RulesView, Vec<String>), crate::error::OpError> {
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
        lead: Lead {
            verdict,
            highest,
            ranked: ranked(&findings),
            findings: Vec::new(),
            minor: Vec::new(),
            next: Vec::new(),
        },
        ledger: Vec::new(),
        windows: Vec::new(),
        overlaps: Vec::new(),
        checked: Vec::new(),
    };
    if let Detail::Finding(id) = detail {
        let all = findings.len();
        // Each rule once, in the answer's order (a rule may fire on several devices).
        let mut ids: Vec<&str> = Vec::new();
        for f in &findings {
            if !ids.contains(&f.id.as_str()) {
                ids.push(&f.id);
            }
        }
        let hint = format!(
            "Pass one of this profile's findings: {}.",
            if ids.is_empty() {
                "(none)".to_string()
            } else {
                ids.join(", ")
            }
        );
        let mut findings: Vec<Finding> = findings.into_iter().filter(|f| f.id == id).collect();
        if findings.is_empty() {
            let check = checked.iter().find(|c| c.id == id);
            return Err(crate::error::OpError::invalid_input(
                match check {
                    Some(c) => format!("rule `{id}` raised no finding here: {}", c.detail),
                    None => format!("no rule `{id}`"),
                },
                hint,
            ));
        }
        said_once(&mut findings);
        view.lead.findings = findings;
        // The finding whole is the answer: each finding carries its window, and the call that asked for it has
        // already had the rules answer's next call, so neither is said again here.
        drop(windows);
        left_out.push(format!(
            "the other {} finding(s), the step ledger, how each window was chosen, overlaps and rule checks: the \
             call without \"finding\"",
            all - view.lead.findings.len()
        ));
        left_out.extend(more_of_top(path, &view.lead.findings, set));
        return Ok((view, left_out));
    }
    if detail == Detail::All {
        let mut findings = findings;
        // Beside findings above info, the info-level ones (under 1 % each) are named in `minor`, as by default:
        // whole they would be most of a detailed answer; `finding` gives any of them whole.
        if findings.iter().any(|f| f.severity > Severity::Info) {
            let (info, above): (Vec<Finding>, Vec<Finding>) = findings
                .into_iter()
                .partition(|f| f.severity == Severity::Info);
            if !info.is_empty() {
                left_out.push(format!(
                    "the {} minor finding(s) in full: pass \"finding\": its id",
                    info.len()
                ));
            }
            view.lead.minor = info.iter().map(short).collect();
            findings = above;
        }
        said_once(&mut findings);
        view.lead.findings = findings;
        // A rule that found something is in `findings`; `checked` says why the others did not, in this export's
        // words only: what each rule tests is standing text, given by `finding` with the rule's id.
        let checked: Vec<(String, String)> = checked
            .into_iter()
            .filter(|c| c.status != "finding")
            .map(check_line)
            .collect();
        if !checked.is_empty() {
            left_out.push(
                "what each rule in `checked` tests, in words: pass \"finding\": the rule's id"
                    .into(),
            );
        }
        // How shares add up matters where they could be added: two findings or more above info on a device.
        let overlaps = overlaps
            .into_iter()
            .filter(|o| {
                view.lead
                    .findings
                    .iter()
                    .filter(|f| f.device == Some(o.device) && f.severity > Severity::Info)
                    .count()
                    > 1
            })
            .collect();
        // Devices whose steps were found alike (every rank of a set, each GPU of one process): the reason once.
        let mut windows = windows;
        for i in 1..windows.len() {
            let (earlier, rest) = windows.split_at_mut(i);
            if let Some(first) = earlier.iter().find(|w| w.reason == rest[0].reason) {
                rest[0].reason = format!("as for device {}", first.device);
            }
        }
        view.ledger = ledger.into_iter().map(StepInShort::whole).collect();
        (view.windows, view.overlaps, view.checked) = (windows, overlaps, checked);
    } else {
        // The top finding keeps its first lines of evidence: what an assistant would otherwise call a reader for.
        let top_evidence = findings
            .iter()
            .find(|f| f.severity > Severity::Info)
            .map(|f| {
                (
                    f.id.clone(),
                    f.device,
                    f.evidence
                        .iter()
                        .take(TOP_EVIDENCE_LINES)
                        .cloned()
                        .collect::<Vec<_>>(),
                )
            });
        let mut lean = lean_findings(findings, DEFAULT_FINDINGS);
        if let Some((id, device, evidence)) = top_evidence
            && let Some(f) = lean
                .findings
                .iter_mut()
                .find(|f| f.id == id && f.device == device)
        {
            f.evidence = evidence;
            lean.top_evidence = TOP_EVIDENCE_LINES;
        }
        // A low finding past the first, and a medium one past the second, is named with its share and severity in
        // `ranked`: high and critical findings are each given.
        let named_only = |i: usize, f: &Finding| {
            (i >= 1 && f.severity == Severity::Low) || (i >= 2 && f.severity == Severity::Medium)
        };
        let ranked_only: Vec<String> = lean
            .findings
            .iter()
            .enumerate()
            .filter(|(i, f)| named_only(*i, f))
            .map(|(_, f)| f.id.clone())
            .collect();
        if !ranked_only.is_empty() {
            let mut i = 0;
            lean.findings.retain(|f| {
                i += 1;
                !named_only(i - 1, f)
            });
        }
        // Past the top finding, a fix is one `finding` call away: the title and gist say what each is, and the
        // fixes, general advice for their kind, would be most of the answer.
        let mut fixes = Vec::new();
        for f in lean.findings.iter_mut().skip(1) {
            if !f.fix.is_empty() && !f.fix.starts_with("as for device") {
                f.fix.clear();
                fixes.push(f.id.clone());
            }
        }
        // The step in short stays (the period, how steps were found, the busy split, the largest columns: what a
        // finding's share is of) with the kernels the step runs: on several devices, only the top finding's
        // device's (the critical path of a set), since what sets devices apart is in the findings and the other
        // devices' kernels are one argument away.
        let mut cut = Vec::new();
        let devices = ledger.len();
        let more_kernels = ledger
            .iter()
            .any(|s| s.top_kernels.len() > STEP_KERNEL_LINES);
        view.ledger = ledger
            .into_iter()
            .take(DEFAULT_LEDGER_ROWS)
            .map(StepInShort::in_lines)
            .collect();
        if devices > 1 {
            let top = lean.findings.iter().find(|f| f.severity > Severity::Info);
            let shown = top
                .and_then(|f| {
                    view.ledger.iter().position(|s| {
                        Some(s.step.device) == f.device
                            && (f.rank.is_none() || f.rank == s.step.rank.map(i64::from))
                    })
                })
                .unwrap_or(0);
            let mut others = false;
            for (i, s) in view.ledger.iter_mut().enumerate() {
                if i != shown
                    && !(s.step_kernels.is_empty()
                        && s.step_regions.is_empty()
                        && s.step_calls.is_empty())
                {
                    s.step_kernels.clear();
                    s.step_regions.clear();
                    s.step_calls.clear();
                    others = true;
                }
            }
            if others {
                cut.push(
                    "the other devices' largest kernels, NVTX ranges and host calls per step"
                        .to_string(),
                );
            }
            // The top finding's device first: under the size cap the other devices' steps go before a finding does.
            let top_row = view.ledger.remove(shown);
            view.ledger.insert(0, top_row);
        }
        if devices > view.ledger.len() {
            cut.push(format!(
                "the step ledger in short of {} more device(s) or rank(s)",
                devices - view.ledger.len()
            ));
        }
        if more_kernels {
            cut.push(format!(
                "the step's kernels past the first {STEP_KERNEL_LINES} (up to {})",
                aisp_profile::rules::STEP_KERNELS
            ));
        }
        cut.push("the windows, overlaps and rule checks".into());
        let cut: Vec<&str> = cut.iter().map(String::as_str).collect();
        lean.left_out(&cut, &mut left_out);
        if !lean.findings.is_empty() {
            let mut whole =
                "one finding whole, every field, on every device: pass \"finding\": its id"
                    .to_string();
            if !ranked_only.is_empty() {
                whole += &format!(" (named only in `ranked`: {})", ranked_only.join(", "));
            }
            if !fixes.is_empty() {
                whole += &format!("; the fix of {} is there", fixes.join(", "));
            }
            left_out.push(whole);
        }
        (view.lead.findings, view.lead.minor) = (lean.findings, lean.minor);
    }
    view.lead.next = next_calls(path, &view.lead.findings, set);
    left_out.extend(more_of_top(path, &view.lead.findings, set));
    Ok((view, left_out))
}

/// `aisp_profile_compare`'s answer: the verdict and its basis first, predicted vs measured per finding of the
/// before run, what moved, the call to make next; the sides and the rest with `detail`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct CompareView {
    pub verdict: Verdict,
    pub basis: Basis,
    /// Why, in one sentence with its numbers.
    pub verdict_reason: String,
    /// The verdict, the step change with its interval, comparability and the predictions, in a few lines.
    pub summary: String,
    /// The step (or unit) change; absent without a per-step basis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<StepChange>,
    /// Whether the runs compare. By default the facts that differ or are not recorded, and the work match
    /// without its kernel list; `detail` adds the facts the same on both sides and the kernels whose count
    /// per step changed.
    pub comparability: Comparability,
    /// Per finding of the before run with a prediction: predicted vs measured step (by default the first
    /// few, the applied ones kept), and the finding's measured numbers in one line in each run (`gist`,
    /// `after_gist`; by default for the first applied one).
    pub predictions: Vec<Prediction>,
    /// Findings gone, new, shrunk or grown, those that moved most first (by default those no prediction
    /// gives, at most a few).
    pub findings: Vec<FindingChange>,
    /// Ledger columns that moved most, per steady step (the device or rank that stands for each run).
    pub columns: Vec<ColumnChange>,
    /// The calls to make next, with their arguments.
    pub next: Vec<String>,
    /// The kernels whose time per step moved most (what the columns' change is made of): by default where no fixed
    /// finding's prediction explains the change, else with `detail`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<KernelChange>,
    /// With `detail`: every basis that could be computed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
    /// With `detail`: each run's export, GPUs and UUIDs, hosts, driver, unit, device, steps and steady periods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Side>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Side>,
    /// What this default answer leaves out, and the argument that brings it back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

/// Present the comparison of two runs (`after`: the after run's path as given): in full with `detail`, else lean.
pub fn compare_view(c: Compare, after: &str, detail: bool) -> CompareView {
    // The next call: the after run's findings whole (fix, evidence) where it still has one above info; the summary
    // already names each run's findings with the first one's numbers, so with none left there is no call to make.
    let next = if c.after_limited {
        vec![format!(
            "aisp_profile_rules {}: what limits the after run now (its findings ranked, each with its stake, \
             predicted step and fix)",
            path_arg(after)
        )]
    } else {
        Vec::new()
    };
    let mut view = CompareView {
        verdict: c.verdict,
        basis: c.basis,
        verdict_reason: c.verdict_reason,
        summary: c.summary,
        step: c.step,
        comparability: c.comparability,
        predictions: c.predictions,
        findings: c.findings,
        columns: c.columns,
        next,
        kernels: c.kernels,
        evidence: Vec::new(),
        before: None,
        after: None,
        left_out: Vec::new(),
    };
    if detail {
        view.evidence = c.evidence;
        (view.before, view.after) = (Some(c.before), Some(c.after));
        return view;
    }
    let mut cut = Vec::new();
    // Where no fixed finding's prediction explains the change (runs of different work, or a before run with nothing
    // applied), the kernels that moved are its why; where one does, the prediction and columns say it, and the
    // kernels are a detail.
    let explained = view.predictions.iter().any(|p| p.applied);
    if explained && !view.kernels.is_empty() {
        cut.push(format!(
            "the {} kernel(s) whose time per step moved most",
            std::mem::take(&mut view.kernels).len()
        ));
    }
    // Facts the same on both sides say nothing a reader repeats; the ones that differ or are not recorded stay.
    let facts = &mut view.comparability.facts;
    let same: Vec<String> = facts
        .iter()
        .filter(|f| f.same == Some(true) && f.effect == "none")
        .map(|f| f.fact.clone())
        .collect();
    facts.retain(|f| !(f.same == Some(true) && f.effect == "none"));
    if !same.is_empty() {
        cut.push(format!(
            "the {} fact(s) the same on both sides ({})",
            same.len(),
            same.join(", ")
        ));
    }
    // Where the runs compare, the summary says why the work matches and which findings' kernels changed.
    if view.verdict != Verdict::NotComparable {
        let work = &mut view.comparability.work;
        work.reason.clear();
        work.explained_by.clear();
    }
    let changed = std::mem::take(&mut view.comparability.work.changed).len();
    if changed > 0 {
        cut.push(format!(
            "the {changed} kernel(s) whose count per step changed (comparability.work.changed)"
        ));
    }
    // With no fix applied, predicted-vs-measured says nothing of the change, and the summary names each run's
    // findings (its `Before:` clause): the predictions are a detail.
    if !explained && !view.predictions.is_empty() {
        cut.push(format!(
            "the {} prediction(s) of the before run's findings, none of them applied (the summary names each run's \
             findings)",
            std::mem::take(&mut view.predictions).len()
        ));
    }
    // The applied predictions are kept (the summary names them), then the others in order.
    let predictions = &mut view.predictions;
    if predictions.len() > DEFAULT_PREDICTIONS {
        let all = predictions.len();
        let mut room =
            DEFAULT_PREDICTIONS.saturating_sub(predictions.iter().filter(|p| p.applied).count());
        predictions.retain(|p| {
            p.applied
                || (room > 0 && {
                    room -= 1;
                    true
                })
        });
        cut.push(format!(
            "{} more prediction(s) of findings not fixed",
            all - predictions.len()
        ));
    }
    // The numbers behind the first fix the summary names (its finding's line in each run); the other predictions'
    // lines are behind `detail`.
    let mut lines = 0;
    let first_applied = view.predictions.iter().position(|p| p.applied);
    for (i, p) in view.predictions.iter_mut().enumerate() {
        if Some(i) != first_applied && !(p.gist.is_empty() && p.after_gist.is_empty()) {
            lines += 1;
            p.gist.clear();
            p.after_gist.clear();
        }
    }
    if lines > 0 {
        cut.push(format!(
            "the measured lines (gist, after_gist) of {lines} more prediction(s)"
        ));
    }
    // A finding a prediction gives says its change there (`after`, `after_share_pct`): listed once.
    let all = view.findings.len();
    let predicted = &view.predictions;
    view.findings.retain(|f| {
        !predicted
            .iter()
            .any(|p| p.id == f.id && p.device == f.device)
    });
    if view.findings.len() < all {
        cut.push(format!(
            "{} finding change(s) the predictions give (their after and after_share_pct)",
            all - view.findings.len()
        ));
    }
    if view.findings.len() > DEFAULT_FINDING_CHANGES {
        cut.push(format!(
            "{} more finding change(s) past the {DEFAULT_FINDING_CHANGES} that moved most",
            view.findings.len() - DEFAULT_FINDING_CHANGES
        ));
        view.findings.truncate(DEFAULT_FINDING_CHANGES);
    }
    if !c.evidence.is_empty() {
        let bases: Vec<String> = c
            .evidence
            .iter()
            .filter_map(|e| serde_json::to_value(e.basis).ok())
            .filter_map(|v| v.as_str().map(String::from))
            .collect();
        cut.push(format!("the evidence per basis ({})", bases.join(", ")));
    }
    cut.push(
        "each run's export, GPUs and UUIDs, hosts, driver, unit, device, warm-up and steady steps and steady periods"
            .into(),
    );
    view.left_out.extend(pass_detail(&cut));
    view
}

/// Leave out of a set's answer what a reader does not repeat by default: the exports' list, the rank identities,
/// each export's clock domain and the reference, the per-rank rows, collectives, imbalance, arrivals and ledger,
/// the heat map, the basis of the slow-link search, and the straggler rows of the ranks in `named` (a listed
/// finding's gist gives their figures). The residual, the other stragglers, slow nodes and links and notes stay.
/// Returns what was cut, for `left_out`.
pub fn lean_set(set: &mut RankSet, named: &[u64]) -> Vec<&'static str> {
    fn gone<T: Default + PartialEq>(x: &mut T) -> bool {
        std::mem::take(x) != T::default()
    }
    let c = &mut set.cross_rank;
    let stragglers = c.stragglers.len();
    c.stragglers.retain(|s| !named.contains(&(s.rank as u64)));
    // Every part is taken (no short circuit): `|`, not `||`.
    let cut = [
        (
            gone(&mut set.files)
                | gone(&mut set.identities)
                | gone(&mut set.alignment.domains)
                | gone(&mut set.alignment.reference_file),
            "the exports, rank identities and clock offsets",
        ),
        (
            gone(&mut c.ranks)
                | gone(&mut set.arrivals)
                | gone(&mut set.ledger)
                | gone(&mut c.heat_map),
            "per rank: step, busy, compute, communication, wait, arrivals, ledger, heat map",
        ),
        (
            gone(&mut c.collectives),
            "per collective kind, its row (a line each in `collectives`)",
        ),
        (gone(&mut c.imbalance), "the imbalance"),
        (gone(&mut c.link_basis), "the slow-link basis"),
        (c.stragglers.len() < stragglers, "the named straggler's row"),
    ];
    cut.into_iter()
        .filter_map(|(gone, what)| gone.then_some(what))
        .collect()
}

/// Kernel groups in a default `aisp_profile_kernels` answer; `limit` takes more.
pub const DEFAULT_KERNEL_ROWS: usize = 8;

/// A kernel group as a default `aisp_profile_kernels` answer gives it: what the kernel is (its bare name, where the
/// step ledger puts it, its precision when the name says, its launch shape) and what it costs.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct KernelBrief {
    /// The group's name without namespaces, template arguments or parameters (short names are already so).
    pub name: String,
    /// Where the step ledger puts its time: `gemm_tensor_core`, `gemm_fp32_simt`, `gemm_other`, `attention`,
    /// `elementwise`, `reduction`, `optimizer`, `copy_kernel`, `other_kernel` or `communication`.
    pub ledger_class: String,
    /// Share of all kernel time in scope.
    pub time_pct: f64,
    pub total_ns: i64,
    pub instances: u64,
    pub avg_ns: f64,
    /// The most frequent launch: blocks per grid and threads per block, `XxYxZ` (one string each: an array
    /// takes a line per number where a client indents its JSON).
    pub grid: String,
    pub block: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub precision: Option<Precision>,
}

/// A kernel group in full, as `aisp_profile_kernels` with `detail` gives it: the brief row's figures, its
/// demangled name, duration statistics, the rest of its most frequent launch and its class with the evidence;
/// flat, with the launch shape as strings like the brief row's.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct KernelDetail {
    pub name: String,
    /// The demangled name of the group's largest member, when `name` is a short name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demangled: Option<String>,
    pub ledger_class: String,
    pub time_pct: f64,
    pub total_ns: i64,
    pub instances: u64,
    pub avg_ns: f64,
    /// Median: the mean of the two middle durations when the count is even (nsys stats' Med).
    pub med_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
    pub stddev_ns: f64,
    /// Nearest-rank percentiles (always an observed duration).
    pub p50_ns: i64,
    pub p90_ns: i64,
    pub p99_ns: i64,
    /// The most frequent launch: blocks per grid and threads per block, `XxYxZ`.
    pub grid: String,
    pub block: String,
    pub registers_per_thread: u32,
    pub static_shared_bytes: u32,
    pub dynamic_shared_bytes: u32,
    /// Distinct (grid, block, registers, shared memory) configurations in the group.
    pub configurations: u64,
    /// The classifier's class (what the name and launch say), with its precision and tensor-core use when the
    /// name says, and what decided it.
    pub class: KernelClass,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub precision: Option<Precision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_cores: Option<bool>,
    pub class_evidence: String,
    /// Per device, when the scope holds several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_device: Vec<DeviceShare>,
}

impl From<KernelRow> for KernelDetail {
    fn from(r: KernelRow) -> Self {
        let KernelRow {
            name,
            demangled,
            time_pct,
            total_ns,
            instances,
            avg_ns,
            med_ns,
            min_ns,
            max_ns,
            stddev_ns,
            p50_ns,
            p90_ns,
            p99_ns,
            per_device,
            launch,
            ledger_class,
            class,
        } = r;
        KernelDetail {
            name,
            demangled,
            ledger_class,
            time_pct,
            total_ns,
            instances,
            avg_ns,
            med_ns,
            min_ns,
            max_ns,
            stddev_ns,
            p50_ns,
            p90_ns,
            p99_ns,
            grid: dims(launch.grid),
            block: dims(launch.block),
            registers_per_thread: launch.registers_per_thread,
            static_shared_bytes: launch.static_shared_bytes,
            dynamic_shared_bytes: launch.dynamic_shared_bytes,
            configurations: launch.configurations,
            class: class.class,
            precision: class.precision,
            tensor_cores: class.tensor_cores,
            class_evidence: class.evidence,
            per_device,
        }
    }
}

/// A row of `aisp_profile_kernels`: in brief by default, in full (statistics, per device, launch, class and its
/// evidence) with `detail`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum KernelRowView {
    Full(Box<KernelDetail>),
    Brief(KernelBrief),
}

/// `aisp_profile_kernels`' answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct KernelsView {
    pub names: KernelNames,
    /// With `detail`: how the per-row statistics are defined.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub statistics: String,
    pub kernels: u64,
    pub total_ns: i64,
    /// Groups before `limit`.
    pub rows_total: usize,
    /// The groups by time: in brief by default (name, ledger class, share, total, calls, mean, launch shape,
    /// precision), in full with `detail` (duration statistics, per device, launch configuration, class evidence,
    /// the demangled name).
    pub rows: Vec<KernelRowView>,
    /// With `detail`: time per kernel class (the classifier's: what the name and launch say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassShare>,
    /// Share of all kernel time per ledger class (the rows' `ledger_class`), largest first (with `detail`, in
    /// `ledger_classes`).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "aisp_profile::rules::ordered_map"
    )]
    #[schemars(with = "std::collections::BTreeMap<String, f64>")]
    pub ledger_class_pct: Vec<(String, f64)>,
    /// With `detail`: per ledger class its kernels, time and share.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ledger_classes: Vec<LedgerClassShare>,
    /// Per device: kernels, time, and those under 5 us (by default only when there are several devices).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceKernels>,
}

/// A demangled kernel name without its return type and its parameter list (`void ns::k<float, (int)4>(const
/// long *, T1 *, long)` → `ns::k<float, (int)4>`): the name and template arguments that tell kernels apart. A name
/// that does not end in a balanced parameter list is returned whole.
fn without_parameters(demangled: &str) -> &str {
    let name = demangled.strip_prefix("void ").unwrap_or(demangled);
    let Some(body) = name.strip_suffix(')') else {
        return name;
    };
    let mut depth = 1usize;
    for (i, c) in body.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return if i == 0 { name } else { &name[..i] };
                }
            }
            _ => {}
        }
    }
    name
}

/// A launch dimension as `XxYxZ`.
fn dims([x, y, z]: [u32; 3]) -> String {
    format!("{x}x{y}x{z}")
}

/// Present `k` (grouped by `names`): in full with `detail`, else each row in brief; what was cut, for `left_out`.
pub fn kernels_view(k: Kernels, detail: bool) -> (KernelsView, Option<String>) {
    let Kernels {
        names,
        statistics,
        kernels,
        total_ns,
        rows_total,
        rows,
        classes,
        ledger_classes,
        devices,
    } = k;
    let mut view = KernelsView {
        names,
        statistics: String::new(),
        kernels,
        total_ns,
        rows_total,
        rows: Vec::new(),
        classes: Vec::new(),
        ledger_class_pct: ledger_classes
            .iter()
            .map(|c| (c.ledger_class.clone(), c.time_pct))
            .collect(),
        ledger_classes: Vec::new(),
        devices: Vec::new(),
    };
    if detail {
        view.statistics = statistics;
        view.classes = classes;
        // The shares are in the full rows per class: said once.
        view.ledger_class_pct.clear();
        view.ledger_classes = ledger_classes;
        // One device: each row's split per device is the row itself (`devices` names the device once).
        let one_device = devices.len() <= 1;
        view.devices = devices;
        view.rows = rows
            .into_iter()
            .map(|mut r| {
                if one_device {
                    r.per_device.clear();
                }
                KernelRowView::Full(Box::new(r.into()))
            })
            .collect();
        return (view, None);
    }
    view.rows = rows
        .into_iter()
        .map(|r| {
            KernelRowView::Brief(KernelBrief {
                // Grouped by demangled name on request: the name asked for, without its parameter list (the formal
                // parameters' types repeat the template arguments; `detail` gives the name whole).
                name: match names {
                    KernelNames::Short => bare_kernel_name(&r.name),
                    KernelNames::Operation => r.name,
                    KernelNames::Demangled => without_parameters(&r.name).to_string(),
                },
                ledger_class: r.ledger_class,
                time_pct: r.time_pct,
                total_ns: r.total_ns,
                instances: r.instances,
                avg_ns: r.avg_ns,
                grid: dims(r.launch.grid),
                block: dims(r.launch.block),
                precision: r.class.precision,
            })
        })
        .collect();
    let what = match names {
        KernelNames::Short | KernelNames::Operation => "each group's demangled name, ",
        KernelNames::Demangled => "each demangled name's parameter list, ",
    };
    // One device: its count of kernels under 5 us is a detail; several: how they differ is the answer.
    let one_device = devices.len() <= 1;
    if !one_device {
        view.devices = devices;
    }
    let kernels_under_5us = if one_device {
        "the count and time of kernels under 5 us, "
    } else {
        ""
    };
    (
        view,
        pass_detail(&[format!(
            "{what}duration statistics (median, min, max, stddev, p50/p90/p99), per-device split, registers and \
             shared memory, launch configurations, class evidence, {kernels_under_5us}the calls and time per \
             ledger class, and the time per kernel class"
        )]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_demangled_name_loses_its_parameter_list_only() {
        assert_eq!(
            without_parameters(
                "void at::native::<unnamed>::indexing_backward_kernel<float, (int)4>(const long *, const long *, \
                 const T1 *, T1 *, long, long, long, long, bool)"
            ),
            "at::native::<unnamed>::indexing_backward_kernel<float, (int)4>"
        );
        assert_eq!(
            without_parameters(
                "void at::native::vectorized_elementwise_kernel<(int)8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase &, at::native::GeluType)::[lambda() (instance 2)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)"
            ),
            "at::native::vectorized_elementwise_kernel<(int)8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase &, at::native::GeluType)::[lambda() (instance 2)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)], std::array<char *, (unsigned long)2>>"
        );
        assert_eq!(
            without_parameters("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"),
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
        );
        assert_eq!(without_parameters("unbalanced)"), "unbalanced)");
    }

    fn finding(id: &str, severity: &str, device: i64, share_pct: f64) -> Finding {
        serde_json::from_value(serde_json::json!({
            "id": id, "title": format!("{id} on {device}"), "severity": severity,
            "time_at_stake_ns": 1_000, "share_pct": share_pct, "stake": "gpu_idle",
            "device": device, "evidence": ["seen"], "why": "because", "fix": format!("fix {id}"),
        }))
        .unwrap()
    }

    /// The call named next is the answer that shows the top finding's stake row by row, as its rule says (a
    /// convolution fallback's kernels, not the idle gaps it has none of); a set's is the set's own.
    #[test]
    fn the_next_call_shows_what_the_top_findings_stake_is_made_of() {
        let next = |id: &str, set: bool| {
            let f = finding(id, "high", 0, 20.0);
            reader_of("p.sqlite", &f, set)
                .split_once(' ')
                .unwrap()
                .0
                .to_string()
        };
        for (id, tool) in [
            ("convolution_fallback", "aisp_profile_kernels"),
            ("underfilled_grid", "aisp_profile_kernels"),
            ("gradients_reduced_twice", "aisp_profile_overlap"),
            ("exposed_copies", "aisp_profile_memory"),
            ("data_loading_stall", "aisp_profile_gaps"),
            ("step_time_variance", "aisp_profile_iterations"),
        ] {
            assert_eq!(next(id, false), tool, "{id}");
        }
        assert_eq!(next("convolution_fallback", true), "aisp_profile_ranks");
        // A finding above info: the answer holds the diagnosis, so the call named next is the comparison with the
        // run after the fix; the reader of its rows is named in `left_out`.
        let top = [finding("exposed_copies", "high", 0, 20.0)];
        let after = next_calls("p.sqlite", &top, false);
        assert!(
            after[0].starts_with(
                r#"aisp_profile_compare {"before": "p.sqlite", "after": "<the export"#
            ),
            "{after:?}"
        );
        assert!(
            more_of_top("p.sqlite", &top, false)
                .unwrap()
                .contains(r#"aisp_profile_memory {"path": "p.sqlite"}"#)
        );
        assert!(next_calls("runs", &top, true)[0].contains("folder of per-rank exports"));
        // Nothing above info: one export's largest kernels whole (the answer has the ledger in short); a set's
        // ledger per rank.
        let quiet = [finding("dominant_kernel", "info", 0, 0.0)];
        let one = next_calls("p.sqlite", &quiet, false);
        assert!(
            one[0].starts_with(
                r#"aisp_profile_kernels {"path": "p.sqlite", "detail": true, "limit": 8}"#
            ),
            "{one:?}"
        );
        assert!(next_calls("runs", &quiet, true)[0].starts_with("aisp_profile_ledger"));
    }

    /// A detailed answer: how shares add up only where two findings above info share a device; each rule that
    /// found nothing as one `id: status: why` entry; one call named next.
    #[test]
    fn a_detailed_answer_adds_up_shares_only_where_findings_share_a_device() {
        let overlap = |device: i64| StakeOverlap {
            device,
            sum_share_pct: 1.0,
            idle_union_ns: 0,
            idle_union_pct: 0.0,
            estimated_ns: 0,
            note: String::new(),
        };
        let check = |id: &str, status: &str| RuleCheck {
            id: id.into(),
            status: status.into(),
            detail: format!("{id} detail"),
        };
        let rules = Rules {
            findings: vec![
                finding("a", "high", 0, 20.0),
                finding("b", "medium", 0, 6.5),
                finding("a", "high", 1, 18.0),
                finding("d", "info", 1, 0.5),
            ],
            overlaps: vec![overlap(0), overlap(1)],
            highest: Severity::High,
            verdict: "v".into(),
            ledger: Vec::new(),
            windows: Vec::new(),
            checked: vec![
                check("a", "finding"),
                check("x", "below_threshold"),
                check("y", "not_applicable"),
            ],
        };
        let (view, left_out) = rules_view(rules, "p.sqlite", Detail::All, false).unwrap();
        assert_eq!(
            view.overlaps.iter().map(|o| o.device).collect::<Vec<_>>(),
            vec![0]
        );
        let v = serde_json::to_value(&view).unwrap();
        assert_eq!(
            v["checked"],
            serde_json::json!({"x": "below threshold: x detail", "y": "not applicable: y detail"})
        );
        assert_eq!(view.lead.next.len(), 1);
        assert!(
            view.lead.next[0].starts_with("aisp_profile_compare"),
            "{:?}",
            view.lead.next
        );
        assert!(
            left_out
                .iter()
                .any(|l| l.starts_with("the rows of `a`: aisp_profile_gaps")),
            "{left_out:?}"
        );
    }

    #[test]
    fn findings_past_the_cap_are_named_and_a_repeated_fix_is_given_once() {
        let all = vec![
            finding("a", "high", 0, 20.0),
            finding("a", "high", 1, 18.0),
            finding("b", "medium", 0, 6.5),
            finding("c", "low", 1, 1.25),
            finding("d", "info", 0, 0.5),
        ];
        let lean = lean_findings(all, 2);
        let ids: Vec<&str> = lean.findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["a", "a"]);
        assert_eq!(lean.findings[1].fix, "as for device 0");
        assert!(
            lean.findings
                .iter()
                .all(|f| f.evidence.is_empty() && f.why.is_empty())
        );
        assert_eq!(lean.minor, ["d (device 0, 0.5 %)"]);
        let mut left_out = Vec::new();
        lean.left_out(&["the rest"], &mut left_out);
        assert_eq!(
            left_out,
            [
                "2 more finding(s) above info past the first 2 (b (device 0, 6.5 %, medium), c (device 1, 1.25 %, low)): pass \"detail\": true",
                "each finding's evidence, why, verify, regions, data, the 1 minor ones; the rest: pass \"detail\": true",
            ]
        );
        // Nothing found, nothing cut: nothing to say.
        let mut none = Vec::new();
        lean_findings(Vec::new(), 2).left_out(&[], &mut none);
        assert!(none.is_empty());
    }
}
