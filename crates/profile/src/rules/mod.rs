//! `rules`: findings in the style of `nsys analyze`, every one read from the
//! step ledger (`profile::ledger`), with the GPU time a fix would remove from
//! the critical path, the steady step it would leave, evidence, why it
//! matters, the fix and how to verify it.
//!
//! The findings contract (ARCHITECTURE.md, "Findings contract"):
//! - A rule reads ledger columns of one device's **steady window** (its steps
//!   after warm-up, on the GPU timeline) and states a **what-if**: the saving
//!   per steady step if its fix were applied alone. `time_at_stake_ns` is that
//!   saving summed over the steady steps; `share_pct` is its share of the
//!   steady window; `predicted_step_ns` the median steady period once each
//!   step is shortened by its saving; `then_limited_by` the largest ledger
//!   column left.
//! - Severity comes from the share, one set of thresholds for every input:
//!   info < 1 % ≤ low < 5 % ≤ medium < 15 % ≤ high < 40 % ≤ critical.
//! - Every device gets its own finding per rule.
//! - Idle causes are exclusive ledger columns, so findings on idle time never
//!   claim the same nanosecond; savings of busy time (kernels a fix would
//!   shorten) are bounded by the host: a step cannot become shorter than the
//!   time its host needs to issue it.
//! - Every number a finding prints is in its `data` (tests check each one).
//!
//! The rules themselves are one list, [`registry::RULES`]: id, doc, what-if and
//! the ledger columns each reads.

mod busy;
mod casts;
mod forward;
mod grid;
mod host;
mod reduced_twice;
pub mod registry;
mod repeats;
mod scaler;
mod slow_paths;
mod step_calls;
mod step_kernels;
mod step_regions;
mod steps;
mod transfer;
mod tuning;

pub use step_calls::{HOST_CALLS_MIN_IDLE_PCT, STEP_CALLS, StepCall};
pub use step_kernels::{STEP_KERNELS, StepKernel};
pub use step_regions::{STEP_REGIONS, StepRegion};

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::ledger::{self, Column, DeviceLedger, Group, Ledger, StepLedger, StepSource};
use super::model::Kernel;
use super::regions::RegionIndex;
use super::stats::pct2;
use super::windows::{Window, WindowKind};
use super::{Profile, ResolvedScope, Result, Scope};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    #[default]
    Info,
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    /// Its name as answers spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }

    /// The severity of a share (0–100) of the analysis window.
    pub fn from_share(share_pct: f64) -> Severity {
        match share_pct {
            s if s >= 40.0 => Severity::Critical,
            s if s >= 15.0 => Severity::High,
            s if s >= 5.0 => Severity::Medium,
            s if s >= 1.0 => Severity::Low,
            _ => Severity::Info,
        }
    }
}

// What `time_at_stake_ns` counts: measured GPU idle the cause explains, an
// estimate of busy time the fix shortens (`basis` says how), or nothing known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stake {
    GpuIdle,
    Estimate,
    #[default]
    None,
}

// Where a finding's time at stake sits: the innermost NVTX range open on the
// process's threads, numbering folded (`token_17` → `token_*`); `events` are
// the bubbles, calls or gaps counted there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RegionStake {
    pub region: String,
    pub at_stake_ns: i64,
    pub pct_of_finding: f64,
    pub events: u64,
}

/// One finding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// Stable rule id, e.g. `launch_bound_tiny_kernels`.
    pub id: String,
    pub title: String,
    pub severity: Severity,
    /// GPU time on `device` a fix would remove from the critical path, summed over the steady steps.
    pub time_at_stake_ns: i64,
    /// time_at_stake_ns / the steady window × 100.
    pub share_pct: f64,
    /// gpu_idle (measured), estimate or none.
    pub stake: Stake,
    /// How time_at_stake_ns was obtained: the what-if (left out of default `aisp_profile_rules` answers).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub basis: String,
    /// The median steady step period now (ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_ns: Option<i64>,
    /// The median steady step period if this finding's fix were applied alone (ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_step_ns: Option<i64>,
    /// What would then take most of the step: the largest ledger column left after the fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then_limited_by: Option<String>,
    /// The ledger columns the stake is read from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    /// NVTX regions holding the time at stake, most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<RegionStake>,
    pub device: Option<i64>,
    /// The rank the finding is about, where the input names one (a Kineto trace's `distributedInfo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    /// The window the share is of (the device's steady window on the GPU timeline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    /// The measured numbers the stake rests on, in one line (mostly per steady step); every figure is one of
    /// `data`'s, as `evidence` is. Kept in default answers, where `evidence` and `data` are left out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub gist: String,
    /// Facts with numbers, names and timestamps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    /// Why this costs time.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
    /// What to change.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fix: String,
    /// How to check the fix worked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub verify: String,
    /// The same facts as structured data (left out of `aisp_profile_rules` answers unless `detail`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
}

/// Whether a rule fired, and why not when it did not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RuleCheck {
    pub id: String,
    /// `finding`, `below_threshold` or `not_applicable`.
    pub status: String,
    pub detail: String,
}

// How one device's findings add up: Σ of their shares, the ledger columns they
// read (each column belongs to one rule, so idle stakes never overlap), and the
// estimated busy-time savings (bounded by the host, not additive with idle).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StakeOverlap {
    pub device: i64,
    pub sum_share_pct: f64,
    pub idle_union_ns: i64,
    pub idle_union_pct: f64,
    pub estimated_ns: i64,
    pub note: String,
}

/// Where one device's steady step goes, in short.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LedgerSummary {
    pub device: i64,
    /// The rank, for a set of ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// `nvtx`, `kernel_pattern` or `span`.
    pub steps_from: StepSource,
    /// What marks a step: the NVTX range (numbering folded) or the kernel whose occurrences delimit the steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_marker: Option<String>,
    pub steady_steps: usize,
    pub warmup_steps: usize,
    /// Median steady step period on the GPU timeline.
    pub step_ns: i64,
    /// Share of the steady window per group: compute, communication, copy, idle (sums to 100 up to rounding).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups_pct: BTreeMap<String, f64>,
    /// The largest ledger columns, share of the steady window, largest first: the first 4, and up to
    /// [`TOP_COLUMNS`] those of 0.5 % or more.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "ordered_map")]
    #[schemars(with = "BTreeMap<String, f64>")]
    pub top_columns: Vec<(String, f64)>,
    /// The kernels with the most time in the steady window, per steady step (read beside the export; none for a
    /// rank's digest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_kernels: Vec<StepKernel>,
    /// The NVTX ranges inside the steady steps with the most time, per steady step (read beside the export; none
    /// without ranges there). Answers give them a line each ([`StepRegion::line`]), never as fields: kept out of
    /// the output schemas.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(skip)]
    pub top_regions: Vec<StepRegion>,
    /// The host calls of the launching thread with the most time, per steady step (read beside the export); given
    /// a line each ([`StepCall::line`]), never as fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(skip)]
    pub top_calls: Vec<StepCall>,
}

/// `[(key, value)]` as a JSON object in that order (`{"gemm_tensor_core": 61.2, ...}`): a line per entry where a
/// client indents its JSON, where a list of pairs or of objects takes four or more.
pub mod ordered_map {
    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
    use serde::ser::{Serialize, SerializeMap, Serializer};
    use std::marker::PhantomData;

    pub fn serialize<S: Serializer, V: Serialize>(
        v: &[(String, V)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(v.len()))?;
        for (k, x) in v {
            m.serialize_entry(k, x)?;
        }
        m.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
        d: D,
    ) -> Result<Vec<(String, V)>, D::Error> {
        struct InOrder<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for InOrder<V> {
            type Value = Vec<(String, V)>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(e) = a.next_entry()? {
                    out.push(e);
                }
                Ok(out)
            }
        }
        d.deserialize_map(InOrder(PhantomData))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rules {
    /// Findings, the largest predicted saving of the step first (`step_ns − predicted_step_ns`), then the most
    /// severe.
    pub findings: Vec<Finding>,
    /// Per device: how the findings' shares add up.
    pub overlaps: Vec<StakeOverlap>,
    /// The highest severity found (`info` when none).
    pub highest: Severity,
    /// One sentence: the most important finding, or that nothing significant was found.
    pub verdict: String,
    /// Per device: where the steady step goes (the step ledger in short; `aisp_profile_ledger` has all of it).
    pub ledger: Vec<LedgerSummary>,
    /// The analysis window per device.
    pub windows: Vec<DeviceWindow>,
    /// Every rule and its outcome.
    pub checked: Vec<RuleCheck>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceWindow {
    pub device: i64,
    pub window: Window,
    /// Why this window.
    pub reason: String,
}

/// How much shorter the median steady step would be if this finding's fix were applied alone (ns; 0 without
/// a prediction).
pub fn predicted_saving_ns(f: &Finding) -> i64 {
    match (f.step_ns, f.predicted_step_ns) {
        (Some(s), Some(p)) => (s - p).max(0),
        _ => 0,
    }
}

/// The order findings are given in: the largest predicted saving of the step first (`step_ns −
/// predicted_step_ns`: what the user gains by fixing it alone), then severity, time at stake, id and device.
pub fn order(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        predicted_saving_ns(b)
            .cmp(&predicted_saving_ns(a))
            .then(b.severity.cmp(&a.severity))
            .then(b.time_at_stake_ns.cmp(&a.time_at_stake_ns))
            .then(a.id.cmp(&b.id))
            .then(a.device.cmp(&b.device))
    });
}

/// Evaluate every rule on a scope and return the findings (largest predicted saving first).
pub fn evaluate(p: &Profile, scope: &Scope) -> Result<Vec<Finding>> {
    let s = p.resolve(scope)?;
    Ok(run(p, &s)?.findings)
}

/// What a rule proposes for one device; [`Ctx::emit`] makes it a finding.
pub(crate) struct Draft {
    pub dev: usize,
    pub stake: Stake,
    pub basis: String,
    /// The saving per steady step (index into the device's steps) — the what-if.
    pub saving: Vec<(u32, i64)>,
    /// Columns the saving comes out of, for `then_limited_by`.
    pub from: Vec<Column>,
    pub regions: Vec<RegionStake>,
    /// Advice for the region at fault, put before the rule's generic fix.
    pub fix: Option<String>,
    /// The advice is the whole fix: the rule's generic one does not apply to what this finding measured.
    pub fix_replaces: bool,
    pub title: String,
    /// One line of the numbers the stake rests on ([`Finding::gist`]).
    pub gist: String,
    pub evidence: Vec<String>,
    pub data: serde_json::Value,
}

impl Draft {
    /// A draft whose saving per step is read from the step by `f`.
    pub fn new(
        dev: usize,
        d: &DeviceLedger,
        stake: Stake,
        basis: impl Into<String>,
        from: &[Column],
        f: impl Fn(&StepLedger) -> i64,
    ) -> Draft {
        Draft {
            dev,
            stake,
            basis: basis.into(),
            saving: d
                .steady_steps()
                .map(|s| (s.index, f(s).clamp(0, s.period_ns)))
                .collect(),
            from: from.to_vec(),
            regions: Vec::new(),
            fix: None,
            fix_replaces: false,
            title: String::new(),
            gist: String::new(),
            evidence: Vec::new(),
            data: serde_json::Value::Null,
        }
    }
    pub fn total(&self) -> i64 {
        self.saving.iter().map(|s| s.1).sum()
    }
    /// The finding's words: its title, its evidence in one line (`gist`, from the same figures as `data`) and in
    /// full (`evidence`), and the figures (`data`).
    pub fn text(
        mut self,
        title: String,
        gist: String,
        evidence: Vec<String>,
        data: serde_json::Value,
    ) -> Draft {
        self.title = title;
        self.gist = gist;
        self.evidence = evidence;
        self.data = data;
        self
    }
}

/// What every rule sees.
pub(crate) struct Ctx<'a> {
    /// The export, when the rules run beside it (a set's merge runs the ledger-only rules without it).
    p: Option<&'a Profile>,
    pub ledger: &'a Ledger,
    pub regions: Option<RegionIndex<'a>>,
    findings: Vec<Finding>,
    checked: Vec<RuleCheck>,
    /// Per device index, its launch waits: read once, by the first rule that asks.
    launch_waits: std::cell::OnceCell<BTreeMap<usize, host::LaunchWaits>>,
}

impl<'a> Ctx<'a> {
    /// The export; rules that need it are run only when it is there ([`registry::RuleSpec::needs_profile`]).
    pub fn p(&self) -> Result<&'a Profile> {
        self.p.ok_or_else(|| {
            super::ProfileError::Missing(
                "this rule needs the export itself, not only its ledger".into(),
            )
        })
    }

    /// The folded NVTX region of a thread's process at `t`.
    pub fn region(&self, global_tid: i64, t: i64) -> Option<String> {
        self.regions.as_ref().and_then(|r| r.region(global_tid, t))
    }

    pub fn devices(&self) -> impl Iterator<Item = (usize, &DeviceLedger)> {
        self.ledger
            .devices
            .iter()
            .enumerate()
            .filter(|(_, d)| d.steady.steps > 0)
    }

    pub fn skip(&mut self, id: &str, status: &str, detail: impl Into<String>) {
        self.checked.push(RuleCheck {
            id: id.into(),
            status: status.into(),
            detail: detail.into(),
        });
    }

    /// One finding per device draft whose stake reaches `min_share_pct` of the steady window (0: any stake).
    pub fn emit(
        &mut self,
        id: &str,
        drafts: Vec<Draft>,
        min_share_pct: f64,
        text: &registry::RuleText,
    ) {
        let mut shares = Vec::new();
        let mut below = Vec::new();
        for dr in drafts {
            let d = &self.ledger.devices[dr.dev];
            let total = dr.total();
            let share = d.share(total);
            if total <= 0 && dr.stake != Stake::None {
                continue;
            }
            // A stake of none (a dominant kernel, a one-time cost) is information, whatever the threshold.
            if share < min_share_pct && dr.stake != Stake::None {
                below.push(format!("device {}: {share}%", d.device));
                continue;
            }
            shares.push(format!("device {}: {share}%", d.device));
            let per_step: BTreeMap<u32, i64> = dr.saving.iter().copied().collect();
            let what_if = d.what_if(|s| per_step.get(&s.index).copied().unwrap_or(0));
            let then = limited_after(d, &dr.from, total);
            let mut data = dr.data;
            if let serde_json::Value::Object(m) = &mut data {
                m.insert("window_ns".into(), json!(d.steady.length_ns));
                m.insert("step_ns".into(), json!(d.steady.period_median_ns));
                m.insert("predicted_step_ns".into(), json!(what_if.predicted_step_ns));
                m.insert("at_stake_ns".into(), json!(total));
            }
            // Most of the stake in one NVTX range says where in the code to look: the title carries it, as it is
            // never left out of an answer. A range numbered per iteration (`step_*`) encloses whole steps: it says
            // no place within one.
            let place = dr.regions.iter().find(|r| !r.region.ends_with("_*"));
            let title = match place {
                Some(r) if r.pct_of_finding >= 50.0 => {
                    format!(
                        "{} ({}% of it in NVTX `{}`)",
                        dr.title, r.pct_of_finding, r.region
                    )
                }
                _ => dr.title,
            };
            self.findings.push(Finding {
                id: id.into(),
                title,
                severity: if dr.stake == Stake::None {
                    Severity::Info
                } else {
                    Severity::from_share(share)
                },
                time_at_stake_ns: total,
                share_pct: share,
                stake: dr.stake,
                basis: dr.basis,
                step_ns: Some(d.steady.period_median_ns),
                predicted_step_ns: (dr.stake != Stake::None).then_some(what_if.predicted_step_ns),
                then_limited_by: (dr.stake != Stake::None).then_some(then).flatten(),
                columns: dr.from.iter().map(|c| c.as_str().to_string()).collect(),
                regions: dr.regions,
                device: Some(d.device),
                rank: None,
                window: Some(steady_window(d)),
                gist: dr.gist,
                evidence: dr.evidence,
                why: text.why.into(),
                fix: match dr.fix {
                    Some(f) if dr.fix_replaces => f,
                    Some(f) => format!("{f} In general: {}", text.fix),
                    None => text.fix.into(),
                },
                verify: text.verify.into(),
                data,
            });
        }
        if shares.is_empty() {
            let detail = if below.is_empty() {
                text.quiet.to_string()
            } else {
                format!("{} (at stake: {})", text.quiet, below.join(", "))
            };
            self.skip(id, "below_threshold", detail);
            return;
        }
        self.checked.push(RuleCheck {
            id: id.into(),
            status: "finding".into(),
            detail: format!("of the steady window at stake: {}", shares.join(", ")),
        });
    }
}

/// The device's steady window as a [`Window`].
pub fn steady_window(d: &DeviceLedger) -> Window {
    let kind = if d.source == StepSource::Span {
        WindowKind::Span
    } else {
        WindowKind::Steady
    };
    Window::new(kind, d.steady.start_ns, d.steady.end_ns)
}

/// The largest ledger column once `saved` ns are taken out of `from` (largest first).
fn limited_after(d: &DeviceLedger, from: &[Column], saved: i64) -> Option<String> {
    let mut cols = d.steady.columns;
    let mut left = saved;
    let mut from: Vec<Column> = from.to_vec();
    from.sort_by_key(|&c| std::cmp::Reverse(cols.get(c)));
    for c in from {
        let take = left.min(cols.get(c));
        cols.add(c, -take);
        left -= take;
    }
    cols.largest(None).map(|(c, _)| c.as_str().to_string())
}

pub(crate) fn ms(ns: i64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

/// The kernels of `d` that start in its steady window, with their index into `kernels` (which is in start order:
/// the window is a slice, not a scan of the whole export).
pub(crate) fn steady_kernels<'k>(
    kernels: &'k [Kernel],
    d: &'k DeviceLedger,
) -> impl Iterator<Item = (usize, &'k Kernel)> + 'k {
    let first = kernels.partition_point(|k| k.start < d.steady.start_ns);
    kernels[first..]
        .iter()
        .enumerate()
        .take_while(|(_, k)| k.start < d.steady.end_ns)
        .filter(|(_, k)| k.device == d.device)
        .map(move |(i, k)| (first + i, k))
}

/// A [`Draft`]'s saving per step from savings found per steady step (by index), each bounded by the host's issue
/// time: a shorter kernel shortens the step only while the device, not the host, sets the pace.
pub(crate) fn bounded_savings(
    by_step: &std::collections::HashMap<u32, i64>,
) -> impl Fn(&StepLedger) -> i64 + '_ {
    move |s| {
        by_step
            .get(&s.index)
            .map_or(0, |&saving| ledger::bounded_by_host(s, saving))
    }
}

/// The steady step (of `steps`, in order) that time `t` falls in: the last to start at or before it, if it has not
/// ended.
pub(crate) fn step_at<'s>(steps: &[&'s StepLedger], t: i64) -> Option<&'s StepLedger> {
    steps[..steps.partition_point(|s| s.start_ns <= t)]
        .last()
        .copied()
        .filter(|s| t < s.start_ns + s.period_ns)
}

/// `ns` over the device's steady window as a mean per steady step: the unit of a finding's `gist`.
pub(crate) fn per_step(d: &DeviceLedger, ns: i64) -> i64 {
    ns / d.steady.steps.max(1) as i64
}

/// Ledger columns a device's step summary lists at most.
pub const TOP_COLUMNS: usize = 8;

/// A device's ledger in short.
pub fn summary(d: &DeviceLedger) -> LedgerSummary {
    let st = &d.steady;
    let groups_pct = [
        Group::Compute,
        Group::Communication,
        Group::Copy,
        Group::Idle,
    ]
    .iter()
    .map(|&g| (g.as_str().to_string(), d.share(st.columns.group(g))))
    .collect();
    let mut cols: Vec<(Column, i64)> = st.columns.iter().collect();
    cols.sort_by_key(|&(c, v)| (std::cmp::Reverse(v), c.index()));
    LedgerSummary {
        device: d.device,
        rank: None,
        steps_from: d.source.clone(),
        // An NVTX range's name as recorded; a kernel's without its template arguments and parameters.
        step_marker: d
            .family
            .as_deref()
            .map(|f| match d.source {
                StepSource::Nvtx => f.to_string(),
                _ => super::classify::bare_kernel_name(f),
            })
            .filter(|m| !m.is_empty()),
        steady_steps: st.steps,
        warmup_steps: d.warmup_steps,
        step_ns: st.period_median_ns,
        groups_pct,
        top_columns: cols
            .into_iter()
            .map(|(c, v)| (c.as_str().to_string(), d.share(v)))
            .enumerate()
            .take_while(|(i, (_, share))| *i < 4 || (*i < TOP_COLUMNS && *share >= 0.5))
            .map(|(_, c)| c)
            .collect(),
        top_kernels: Vec::new(),
        top_regions: Vec::new(),
        top_calls: Vec::new(),
    }
}

fn window_reason(d: &DeviceLedger) -> String {
    match d.source {
        StepSource::Nvtx => format!(
            "steady state on the GPU timeline: the periods of NVTX `{}` steps {}–{} (from each step's first GPU \
             operation to the next's), the first {} step(s) reported apart as warm-up",
            d.family.as_deref().unwrap_or("step"),
            d.warmup_steps,
            d.steps.len().saturating_sub(1),
            d.warmup_steps
        ),
        StepSource::KernelPattern => format!(
            "steady state on the GPU timeline: detected iterations {}–{} (between occurrences of one kernel), the \
             first {} reported apart as warm-up",
            d.warmup_steps,
            d.steps.len().saturating_sub(1),
            d.warmup_steps
        ),
        StepSource::KernelSequence => format!(
            "steady state on the GPU timeline: detected iterations {}–{} (repetitions of one kernel sequence), \
             the first {} reported apart as warm-up",
            d.warmup_steps,
            d.steps.len().saturating_sub(1),
            d.warmup_steps
        ),
        StepSource::Span => {
            "first to last GPU operation of the device (no steps found: one period)".to_string()
        }
    }
}

/// Build the ledger of a scope and run every rule on it.
pub fn run(p: &Profile, scope: &ResolvedScope) -> Result<Rules> {
    let t = std::time::Instant::now();
    let l = ledger::build(p, scope, None)?;
    tracing::debug!(ms = t.elapsed().as_millis() as u64, "step ledger built");
    run_on(p, &l)
}

/// Run every rule on a ledger already built (a rank of a set, with its collective waits).
pub fn run_on(p: &Profile, l: &Ledger) -> Result<Rules> {
    let windows: Vec<DeviceWindow> = l
        .devices
        .iter()
        .filter(|d| d.steady.steps > 0)
        .map(|d| DeviceWindow {
            device: d.device,
            window: steady_window(d),
            reason: window_reason(d),
        })
        .collect();
    let summaries: Vec<LedgerSummary> = l
        .devices
        .iter()
        .filter(|d| d.steady.steps > 0)
        .map(|d| {
            let mut s = summary(d);
            // Each part's own cost, for `RUST_LOG=aisp_profile=debug`, as each rule's below.
            let t = std::time::Instant::now();
            s.top_kernels = step_kernels::step_kernels(p, d, STEP_KERNELS)?;
            let kernels_ms = t.elapsed().as_millis() as u64;
            s.top_regions = step_regions::step_regions(p, d, STEP_REGIONS)?;
            let regions_ms = t.elapsed().as_millis() as u64 - kernels_ms;
            s.top_calls = step_calls::step_calls(p, d, STEP_CALLS)?;
            tracing::debug!(
                device = d.device,
                kernels_ms,
                regions_ms,
                calls_ms = t.elapsed().as_millis() as u64 - kernels_ms - regions_ms,
                "step summary"
            );
            Ok(s)
        })
        .collect::<Result<_>>()?;
    if windows.is_empty() {
        return Ok(Rules {
            findings: Vec::new(),
            overlaps: Vec::new(),
            highest: Severity::Info,
            verdict: "no GPU activity in scope: nothing to analyse".into(),
            ledger: summaries,
            windows,
            checked: Vec::new(),
        });
    }
    let mut cx = Ctx {
        p: Some(p),
        ledger: l,
        regions: Some(RegionIndex::new(p)?),
        findings: Vec::new(),
        checked: Vec::new(),
        launch_waits: Default::default(),
    };
    for rule in registry::RULES {
        let t = std::time::Instant::now();
        (rule.eval)(&mut cx, rule)?;
        // Each rule's own cost, for `RUST_LOG=aisp_profile=debug` (a slow rule on a large export shows here).
        tracing::debug!(
            rule = rule.id,
            ms = t.elapsed().as_millis() as u64,
            "rule evaluated"
        );
    }
    let overlaps = overlaps(&cx);
    let mut findings = cx.findings;
    order(&mut findings);
    let highest = findings
        .iter()
        .map(|f| f.severity)
        .max()
        .unwrap_or(Severity::Info);
    let verdict = verdict(&findings, &summaries);
    Ok(Rules {
        findings,
        overlaps,
        highest,
        verdict,
        ledger: summaries,
        windows,
        checked: cx.checked,
    })
}

/// The rules that read only the ledger (communication, waits, step variation, warm-up), for a rank of a set
/// whose collective time was split after its export was read. Returns their findings and outcomes.
pub fn run_ledger_only(l: &Ledger, earlier: &[Finding]) -> Result<(Vec<Finding>, Vec<RuleCheck>)> {
    let mut cx = Ctx {
        p: None,
        ledger: l,
        regions: None,
        findings: earlier.to_vec(),
        checked: Vec::new(),
        launch_waits: Default::default(),
    };
    let before = cx.findings.len();
    for rule in registry::RULES.iter().filter(|r| !r.needs_profile) {
        (rule.eval)(&mut cx, rule)?;
    }
    let new = cx.findings.split_off(before);
    Ok((new, cx.checked))
}

fn verdict(findings: &[Finding], summaries: &[LedgerSummary]) -> String {
    match findings.first() {
        Some(f) if f.severity > Severity::Info => format!(
            "{} ({:?}: {} of {} in the steady window at stake, {}% on device {}{}{})",
            f.title,
            f.severity,
            ms(f.time_at_stake_ns),
            f.window.map_or("?".into(), |w| ms(w.length_ns)),
            f.share_pct,
            f.device.unwrap_or(0),
            match (f.step_ns, f.predicted_step_ns) {
                (Some(a), Some(b)) => format!("; step {} → about {} if fixed", ms(a), ms(b)),
                _ => String::new(),
            },
            if f.stake == Stake::Estimate {
                "; an estimate"
            } else {
                ""
            }
        ),
        _ => {
            // With no finding, what the step is made of is the answer: its largest column and the kernel that
            // leads it, so that a step spent in one library kernel no rule knows reads as that, not as nothing.
            let top = summaries
                .iter()
                .filter_map(|s| {
                    let column = s.top_columns.first()?;
                    let kernel = s
                        .top_kernels
                        .first()
                        .map(|k| format!(", led by `{}` {} %", k.name, k.share_pct))
                        .unwrap_or_default();
                    Some(format!(
                        "device {}: {} {}%{kernel}",
                        s.device, column.0, column.1
                    ))
                })
                .collect::<Vec<_>>()
                .join("; ");
            format!(
                "nothing significant: no fix a rule knows would save 1% of a steady step (largest ledger column: {})",
                if top.is_empty() { "none".into() } else { top }
            )
        }
    }
}

/// Per device: the findings' shares summed, the idle they claim (exclusive ledger columns), and the estimates.
fn overlaps(cx: &Ctx) -> Vec<StakeOverlap> {
    let mut out = Vec::new();
    for (_, d) in cx.devices() {
        let mine: Vec<&Finding> = cx
            .findings
            .iter()
            .filter(|f| f.device == Some(d.device) && f.time_at_stake_ns > 0)
            .collect();
        if mine.is_empty() {
            continue;
        }
        let sum: f64 = mine.iter().map(|f| f.share_pct).sum();
        let idle: i64 = mine
            .iter()
            .filter(|f| f.stake == Stake::GpuIdle)
            .map(|f| f.time_at_stake_ns)
            .sum();
        let estimated: i64 = mine
            .iter()
            .filter(|f| f.stake == Stake::Estimate)
            .map(|f| f.time_at_stake_ns)
            .sum();
        let sum = (sum * 100.0).round() / 100.0;
        out.push(StakeOverlap {
            device: d.device,
            sum_share_pct: sum,
            idle_union_ns: idle,
            idle_union_pct: pct2(idle, d.steady.length_ns.max(1)),
            estimated_ns: estimated,
            note: format!(
                "idle stakes are exclusive ledger columns and add up ({} in all, {}% of the steady window); \
                 estimated savings of busy time ({}) are each bounded by the host's issue time, so two of them \
                 applied together may save less than their sum",
                ms(idle),
                pct2(idle, d.steady.length_ns.max(1)),
                ms(estimated)
            ),
        });
    }
    out
}

/// The numbers a finding's sentence prints, with their decimals (for the findings contract's check that each is one
/// of the numbers behind it): digits inside words (fp32, H2D, sm80), `backquoted` names and "quoted" keys are not
/// numbers.
pub fn printed_numbers(text: &str) -> Vec<(f64, usize, String)> {
    let mut clean = String::new();
    let (mut tick, mut quote) = (false, false);
    for c in text.chars() {
        match c {
            '`' if !quote => tick = !tick,
            '"' if !tick => quote = !quote,
            _ if tick || quote => {}
            _ => clean.push(c),
        }
    }
    let chars: Vec<char> = clean.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let prev = if start > 0 { chars[start - 1] } else { ' ' };
            let tok: String = chars[start..i].iter().collect();
            let tok = tok.trim_end_matches('.').to_string();
            let next = chars.get(i).copied().unwrap_or(' ');
            if prev.is_alphanumeric() || prev == '_' || next == '_' || tok.is_empty() {
                continue;
            }
            let decimals = tok.split('.').nth(1).map_or(0, str::len);
            if let Ok(v) = tok.parse::<f64>() {
                out.push((v, decimals, tok));
            }
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_follows_share_thresholds() {
        assert_eq!(Severity::from_share(0.99), Severity::Info);
        assert_eq!(Severity::from_share(1.0), Severity::Low);
        assert_eq!(Severity::from_share(5.0), Severity::Medium);
        assert_eq!(Severity::from_share(15.0), Severity::High);
        assert_eq!(Severity::from_share(40.0), Severity::Critical);
        assert!(Severity::Critical > Severity::High && Severity::Low > Severity::Info);
    }
}
