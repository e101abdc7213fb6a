//! `rules`: findings in the style of `nsys analyze`, each with the GPU time at
//! stake, its share of the analysis window, evidence, why it matters, the fix
//! and how to verify it.
//!
//! The findings contract (ARCHITECTURE.md, "Findings contract"):
//! - `time_at_stake_ns` is GPU time **per device** that a fix would remove from
//!   the critical path: either idle time of that device's GPU that the cause
//!   explains (`stake: gpu_idle`, measured from the union of kernels, copies and
//!   memsets), or busy time the fix would shorten (`stake: estimate`, with its
//!   `basis`). CPU time spent waiting while the GPU works is never at stake.
//! - Severity comes from the share of the device's analysis window at stake,
//!   one set of thresholds for every input: info < 1 % ≤ low < 5 % ≤ medium <
//!   15 % ≤ high < 40 % ≤ critical.
//! - Every device gets its own finding per rule (never only the worst one).
//! - Findings may explain the same idle time (a sync and the launch storm after
//!   it); `overlaps` gives, per device, the sum of the shares and the union of
//!   the measured idle time at stake, so no one adds shares past 100 %.
//! - Every number a finding prints is in its `data` (tests check each one).
//!
//! The analysis window of a device is its steady window (second step → last
//! step) when there are steps; the steps window when it holds most of the
//! device's kernel time; otherwise the span of all its GPU operations
//! (kernels, copies, memsets — the op set of `nsys analyze gpu_gaps`).

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::calls::{self, CallKind};
use super::classify::KernelClass;
use super::gaps;
use super::intervals::{self, Interval};
use super::iterations::{self, StepRanges};
use super::kernels::{Classifier, SHORT_KERNEL_NS};
use super::model::{self, Kernel};
use super::nccl::is_nccl;
use super::regions::RegionIndex;
use super::stats::{self, pct1, pct2};
use super::utilization::device_union;
use super::windows::{self, Window, WindowKind};
use super::{Profile, ResolvedScope, Result, Scope};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stake {
    GpuIdle,
    Estimate,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// Stable rule id, e.g. `cuda_memcpy_async_pageable`.
    pub id: String,
    pub title: String,
    pub severity: Severity,
    /// GPU time on `device` a fix would remove from the critical path in the window.
    pub time_at_stake_ns: i64,
    /// time_at_stake_ns / the analysis window × 100.
    pub share_pct: f64,
    /// gpu_idle (measured), estimate or none.
    pub stake: Stake,
    /// How time_at_stake_ns was obtained.
    pub basis: String,
    /// NVTX regions holding the time at stake, most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<RegionStake>,
    pub device: Option<i64>,
    /// The analysis window the share is of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
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

// How one device's findings overlap: Σ of their shares (can pass 100), the
// union of their measured idle time, the estimated time (not in the union).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StakeOverlap {
    pub device: i64,
    pub sum_share_pct: f64,
    pub idle_union_ns: i64,
    pub idle_union_pct: f64,
    pub estimated_ns: i64,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rules {
    /// Findings, most time at stake first.
    pub findings: Vec<Finding>,
    /// Per device: the findings' shares overlap (not additive).
    pub overlaps: Vec<StakeOverlap>,
    /// The highest severity found (`info` when none).
    pub highest: Severity,
    /// One sentence: the most important finding, or that nothing significant was found.
    pub verdict: String,
    /// The analysis window per device.
    pub windows: Vec<DeviceWindow>,
    /// Every rule and its outcome.
    pub checked: Vec<RuleCheck>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceWindow {
    pub device: i64,
    pub window: Window,
    /// Why this window: steady, steps or all-ops span.
    pub reason: String,
}

/// What every rule sees of one device.
struct Dev {
    device: i64,
    window: Window,
    global_pids: Vec<i64>,
    steps: Option<StepRanges>,
    /// Kernel indices inside the window (overlapping it), in start order.
    kernels: Vec<usize>,
    kernel_union: Vec<Interval>,
    /// Kernels ∪ memcpy ∪ memset.
    all_union: Vec<Interval>,
    /// The window minus `all_union`: when the GPU does nothing at all.
    idle: Vec<Interval>,
    kernel_time_in_window: i64,
}

impl Dev {
    fn len(&self) -> i64 {
        self.window.length_ns.max(1)
    }
    fn share(&self, ns: i64) -> f64 {
        pct2(ns, self.len())
    }
    fn contains(&self, s: i64, e: i64) -> bool {
        s < self.window.end_ns && e > self.window.start_ns
    }
    fn in_process(&self, global_id: i64) -> bool {
        self.global_pids.contains(&(global_id & model::PID_MASK))
    }
    /// GPU idle time a blocking host call explains: from when the host blocked
    /// (or the GPU ran dry during the call, if later) until the GPU got work
    /// again, at most [`MIN_GAP_NS`] past the call's return — idle beyond that
    /// is CPU work of its own (gpu_starvation reports it).
    fn drain(&self, calls: impl Iterator<Item = (i64, i64)>) -> Vec<Interval> {
        let mut out = Vec::new();
        for (s, e) in calls {
            let i = self.idle.partition_point(|g| g.1 <= e);
            if let Some(&(gs, ge)) = self.idle.get(i)
                && gs <= e
            {
                let (a, b) = (gs.max(s), ge.min(e + MIN_GAP_NS));
                if b > a {
                    out.push((a, b));
                }
            }
        }
        intervals::union(out)
    }
    /// Step ranges inside the window.
    fn steps_in_window(&self) -> Vec<&model::NvtxRange> {
        self.steps
            .as_ref()
            .map(|s| {
                s.ranges
                    .iter()
                    .filter(|r| r.start >= self.window.start_ns && r.end <= self.window.end_ns + 1)
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn devices(p: &Profile, scope: &ResolvedScope) -> Result<(Vec<Dev>, Vec<DeviceWindow>)> {
    let kernels = p.kernels()?;
    let mut out = Vec::new();
    let mut described = Vec::new();
    for dw in windows::device_windows(p, scope)? {
        let d = dw.device;
        let all_ops = device_union(p, scope, d, true)?;
        let ku = device_union(p, scope, d, false)?;
        let total_kernel: i64 = intervals::length(&ku);
        let (window, reason) = match (dw.steady, dw.steps, dw.trim) {
            (_, _, Some(t)) => (t, "the caller's window".to_string()),
            (Some(st), _, _) => (
                st,
                "steady state: second step to last step (the first step's warm-up excluded)"
                    .to_string(),
            ),
            (None, Some(st), _)
                if intervals::clipped_length(&ku, st.bounds()) * 2 >= total_kernel =>
            {
                (
                    st,
                    "the steps window (it holds most of the kernel time)".to_string(),
                )
            }
            _ => match (all_ops.first(), all_ops.last()) {
                (Some(f), Some(l)) => (
                    Window::new(WindowKind::Span, f.0, l.1),
                    "first to last GPU operation of the device (kernels, copies, memsets)"
                        .to_string(),
                ),
                _ => continue,
            },
        };
        let idx: Vec<usize> = kernels
            .iter()
            .enumerate()
            .filter(|(_, k)| k.device == d && scope.admits(d, k.global_pid, k.start, k.end))
            .filter(|(_, k)| k.start < window.end_ns && k.end > window.start_ns)
            .map(|(i, _)| i)
            .collect();
        let kt = intervals::clipped_length(&ku, window.bounds());
        let idle = intervals::gaps_in_window(&all_ops, window.bounds(), 0);
        described.push(DeviceWindow {
            device: d,
            window,
            reason,
        });
        out.push(Dev {
            device: d,
            window,
            global_pids: dw.global_pids,
            steps: dw.step_ranges,
            kernels: idx,
            kernel_union: ku,
            all_union: all_ops,
            idle,
            kernel_time_in_window: kt,
        });
    }
    Ok((out, described))
}

/// Evaluate every rule on a scope and return the findings (most at stake first).
pub fn evaluate(p: &Profile, scope: &Scope) -> Result<Vec<Finding>> {
    let s = p.resolve(scope)?;
    Ok(run(p, &s)?.findings)
}

struct Ctx<'a> {
    p: &'a Profile,
    devs: Vec<Dev>,
    regions: RegionIndex<'a>,
    findings: Vec<Finding>,
    /// Per finding (same order): the measured idle intervals behind its time at stake.
    idle_of: Vec<Vec<Interval>>,
    checked: Vec<RuleCheck>,
    /// What each CUDA API call is (same order as `Profile::api`), decided once
    /// per name id rather than by matching strings for each of millions of
    /// calls in every rule.
    call_facts: Vec<ApiFacts>,
    /// Per device (same order as `devs`): copy labels by (process, correlation),
    /// made on first use and shared by every blocking-call rule.
    copy_labels: Vec<std::cell::OnceCell<HashMap<(i64, i64), String>>>,
}

#[derive(Debug, Clone, Copy)]
struct ApiFacts {
    kind: CallKind,
    sync_memcpy: bool,
    sync_memset: bool,
}

impl Ctx<'_> {
    /// What CUDA API call `ai` (an index into `Profile::api`) is.
    fn facts(&self, ai: usize) -> ApiFacts {
        self.call_facts[ai]
    }
}

fn api_facts_of(p: &Profile, name: i64) -> ApiFacts {
    let n = calls::api_display_name(p.string(name));
    ApiFacts {
        kind: calls::api_kind(n),
        sync_memcpy: calls::is_sync_memcpy_api(n),
        sync_memset: calls::is_sync_memset_api(n),
    }
}

struct Draft {
    dev: usize,
    at_stake: i64,
    stake: Stake,
    basis: String,
    /// Measured idle intervals (for `Stake::GpuIdle`; their union length is `at_stake`).
    idle: Vec<Interval>,
    regions: Vec<RegionStake>,
    /// Advice for the region at fault, put before the rule's generic fix.
    fix: Option<String>,
    title: String,
    evidence: Vec<String>,
    data: serde_json::Value,
}

impl Draft {
    /// A finding whose time at stake is measured GPU idle time: `at_stake` is the union of `idle`.
    fn idle(dev: usize, idle: Vec<Interval>, basis: impl Into<String>) -> Draft {
        let idle = intervals::union(idle);
        Draft {
            dev,
            at_stake: intervals::length(&idle),
            stake: Stake::GpuIdle,
            basis: basis.into(),
            idle,
            regions: Vec::new(),
            fix: None,
            title: String::new(),
            evidence: Vec::new(),
            data: serde_json::Value::Null,
        }
    }
    /// A finding whose time at stake is an estimate of busy time the fix shortens.
    fn estimate(dev: usize, at_stake: i64, basis: impl Into<String>) -> Draft {
        Draft {
            dev,
            at_stake,
            stake: if at_stake > 0 {
                Stake::Estimate
            } else {
                Stake::None
            },
            basis: basis.into(),
            idle: Vec::new(),
            regions: Vec::new(),
            fix: None,
            title: String::new(),
            evidence: Vec::new(),
            data: serde_json::Value::Null,
        }
    }
    fn text(mut self, title: String, evidence: Vec<String>, data: serde_json::Value) -> Draft {
        self.title = title;
        self.evidence = evidence;
        self.data = data;
        self
    }
}

/// Sum `(region, ns)` pairs into the regions of a finding, most first (at most 5).
fn region_stakes(
    items: impl Iterator<Item = (Option<String>, i64)>,
    total: i64,
) -> Vec<RegionStake> {
    let mut m: BTreeMap<String, (i64, u64)> = BTreeMap::new();
    for (r, ns) in items {
        let Some(r) = r else { continue };
        let e = m.entry(r).or_default();
        e.0 += ns;
        e.1 += 1;
    }
    let mut v: Vec<RegionStake> = m
        .into_iter()
        .filter(|(_, (ns, _))| *ns > 0)
        .map(|(region, (ns, n))| RegionStake {
            region,
            at_stake_ns: ns,
            pct_of_finding: pct1(ns, total.max(1)),
            events: n,
        })
        .collect();
    v.sort_by(|a, b| {
        b.at_stake_ns
            .cmp(&a.at_stake_ns)
            .then(a.region.cmp(&b.region))
    });
    v.truncate(5);
    v
}

impl Ctx<'_> {
    fn skip(&mut self, id: &str, status: &str, detail: impl Into<String>) {
        self.checked.push(RuleCheck {
            id: id.into(),
            status: status.into(),
            detail: detail.into(),
        });
    }

    /// Where measured idle intervals sit: the region the device's process is in at each one's midpoint.
    fn idle_regions(&self, dev: usize, idle: &[Interval]) -> Vec<RegionStake> {
        let Some(&pid) = self.devs[dev].global_pids.first() else {
            return Vec::new();
        };
        let total = intervals::length(idle);
        region_stakes(
            idle.iter()
                .map(|&(s, e)| (self.regions.region(pid, s + (e - s) / 2), e - s)),
            total,
        )
    }

    /// One finding per device draft: every device with the problem is reported.
    fn emit(&mut self, id: &str, drafts: Vec<Draft>, why: &str, fix: &str, verify: &str) {
        let mut shares = Vec::new();
        for d in drafts {
            let dev = &self.devs[d.dev];
            let share = dev.share(d.at_stake);
            shares.push(format!("device {}: {share}%", dev.device));
            let mut data = d.data;
            if let serde_json::Value::Object(m) = &mut data {
                m.insert("window_ns".into(), json!(dev.window.length_ns));
            }
            self.findings.push(Finding {
                id: id.into(),
                title: d.title,
                severity: Severity::from_share(share),
                time_at_stake_ns: d.at_stake,
                share_pct: share,
                stake: d.stake,
                basis: d.basis,
                regions: d.regions,
                device: Some(dev.device),
                window: Some(dev.window),
                evidence: d.evidence,
                why: why.into(),
                fix: match d.fix {
                    Some(f) => format!("{f} {fix}"),
                    None => fix.into(),
                },
                verify: verify.into(),
                data,
            });
            self.idle_of.push(d.idle);
        }
        if shares.is_empty() {
            return;
        }
        self.checked.push(RuleCheck {
            id: id.into(),
            status: "finding".into(),
            detail: format!("of the analysis window at stake: {}", shares.join(", ")),
        });
    }
}

fn ms(ns: i64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

/// Run every rule: findings plus the outcome of each rule.
pub fn run(p: &Profile, scope: &ResolvedScope) -> Result<Rules> {
    let (devs, described) = devices(p, scope)?;
    let mut cx = Ctx {
        p,
        devs,
        regions: RegionIndex::new(p)?,
        findings: Vec::new(),
        idle_of: Vec::new(),
        checked: Vec::new(),
        call_facts: Vec::new(),
        copy_labels: Vec::new(),
    };
    let mut by_name: rustc_hash::FxHashMap<i64, ApiFacts> = Default::default();
    cx.call_facts = p
        .api()?
        .iter()
        .map(|a| {
            *by_name
                .entry(a.name)
                .or_insert_with(|| api_facts_of(p, a.name))
        })
        .collect();
    cx.copy_labels = (0..cx.devs.len()).map(|_| Default::default()).collect();
    if cx.devs.is_empty() {
        return Ok(Rules {
            findings: Vec::new(),
            overlaps: Vec::new(),
            highest: Severity::Info,
            verdict: "no GPU activity in scope: nothing to analyse".into(),
            windows: described,
            checked: Vec::new(),
        });
    }
    rule_gpu_starvation(&mut cx)?;
    rule_host_bound_steps(&mut cx)?;
    rule_low_utilization(&mut cx)?;
    rule_pageable_memcpy(&mut cx)?;
    rule_sync_memcpy(&mut cx)?;
    rule_sync_apis(&mut cx)?;
    rule_sync_every_iteration(&mut cx)?;
    rule_allocator_churn(&mut cx)?;
    rule_launch_bound(&mut cx)?;
    rule_fp32_simt_gemm(&mut cx)?;
    rule_exposed_communication(&mut cx)?;
    rule_h2d_per_step(&mut cx)?;
    rule_dominant_kernel(&mut cx)?;
    rule_step_variance(&mut cx)?;
    rule_first_step(&mut cx)?;
    let overlaps = overlaps(&cx);
    let mut findings = cx.findings;
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(
                b.share_pct
                    .partial_cmp(&a.share_pct)
                    .unwrap_or(std::cmp::Ordering::Equal),
            )
            .then(a.id.cmp(&b.id))
            .then(a.device.cmp(&b.device))
    });
    let highest = findings.first().map_or(Severity::Info, |f| f.severity);
    let verdict = match findings.first() {
        Some(f) if f.severity > Severity::Info => format!(
            "{} ({:?}: {} of GPU time at stake, {}% of the analysis window on device {}{})",
            f.title,
            f.severity,
            ms(f.time_at_stake_ns),
            f.share_pct,
            f.device.unwrap_or(0),
            if f.stake == Stake::Estimate {
                "; an estimate"
            } else {
                ""
            }
        ),
        Some(_) => {
            "nothing significant: every finding is below 1% of the analysis window (info only)"
                .into()
        }
        None => "nothing significant: no rule found evidence of a problem".into(),
    };
    Ok(Rules {
        findings,
        overlaps,
        highest,
        verdict,
        windows: described,
        checked: cx.checked,
    })
}

/// Per device: the findings' shares summed, and the union of their measured idle time.
fn overlaps(cx: &Ctx) -> Vec<StakeOverlap> {
    let mut out = Vec::new();
    for d in &cx.devs {
        let mine: Vec<usize> = (0..cx.findings.len())
            .filter(|&i| cx.findings[i].device == Some(d.device))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let sum: f64 = mine.iter().map(|&i| cx.findings[i].share_pct).sum();
        let union = intervals::length(&intervals::union(
            mine.iter()
                .flat_map(|&i| cx.idle_of[i].iter().copied())
                .collect(),
        ));
        let idle_sum: i64 = mine
            .iter()
            .filter(|&&i| cx.findings[i].stake == Stake::GpuIdle)
            .map(|&i| cx.findings[i].time_at_stake_ns)
            .sum();
        let estimated: i64 = mine
            .iter()
            .filter(|&&i| cx.findings[i].stake == Stake::Estimate)
            .map(|&i| cx.findings[i].time_at_stake_ns)
            .sum();
        let sum = (sum * 100.0).round() / 100.0;
        let note = if idle_sum > union {
            format!(
                "findings explain the same idle time: their measured idle sums to {} but its union is {} ({}% of the window); \
                 shares are not additive",
                ms(idle_sum),
                ms(union),
                d.share(union)
            )
        } else {
            format!(
                "the measured idle time at stake does not overlap between findings ({} in all, {}% of the window)",
                ms(union),
                d.share(union)
            )
        };
        out.push(StakeOverlap {
            device: d.device,
            sum_share_pct: sum,
            idle_union_ns: union,
            idle_union_pct: d.share(union),
            estimated_ns: estimated,
            note,
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------

const MIN_GAP_NS: i64 = 1_000_000;

fn rule_gpu_starvation(cx: &mut Ctx) -> Result<()> {
    let id = "gpu_starvation";
    // Per device that starves: its gaps and their figures, then one pass over
    // the CPU-side tables explains the largest gaps of all of them.
    // (device index, device, gaps, [total, copying, idle, min, max] in ns)
    type Starved<'d> = (usize, &'d Dev, Vec<Interval>, [i64; 5]);
    let mut starved: Vec<Starved> = Vec::new();
    let mut groups = Vec::new();
    for (i, d) in cx.devs.iter().enumerate() {
        let g = gaps::gaps_for(d.window, &d.kernel_union, MIN_GAP_NS);
        if g.is_empty() {
            continue;
        }
        let total: i64 = g.iter().map(|(s, e)| e - s).sum();
        // Time the GPU spent copying inside the gaps is not starvation.
        let copying: i64 = g
            .iter()
            .map(|&gap| intervals::clipped_length(&d.all_union, gap))
            .sum();
        let idle = total - copying;
        if idle * 1000 < d.window.length_ns {
            continue;
        }
        let lens: Vec<i64> = g.iter().map(|(s, e)| e - s).collect();
        let (min, max) = (
            lens.iter().min().copied().unwrap_or(0),
            lens.iter().max().copied().unwrap_or(0),
        );
        // Explain the largest gaps from the launching thread's side.
        let mut sorted = g.clone();
        sorted.sort_by_key(|(s, e)| std::cmp::Reverse(e - s));
        sorted.truncate(5);
        let kernels = cx.p.kernels()?;
        let api = cx.p.api()?;
        let launches = &cx.p.launch_index()?.kernel_launch;
        let mut listed: Vec<gaps::Gap> = Vec::new();
        let mut threads = Vec::new();
        for (gs, ge) in &sorted {
            let next = d.kernels.iter().copied().find(|&k| kernels[k].start >= *ge);
            threads.push(
                next.and_then(|k| launches[k])
                    .map(|a| api[a as usize].global_tid),
            );
            listed.push(gaps::Gap {
                device: d.device,
                start_ns: *gs,
                end_ns: *ge,
                length_ns: ge - gs,
                windows: vec![d.window.kind],
                step: None,
                kernel_before: None,
                kernel_after: next.map(|k| cx.p.string(kernels[k].short_name).to_string()),
                launch_tid: None,
                launch_thread: None,
                cause: String::new(),
                explanation: String::new(),
                cpu: Vec::new(),
            });
        }
        groups.push(gaps::GapGroup {
            global_pids: &d.global_pids,
            threads,
            gaps: listed,
        });
        starved.push((i, d, g, [total, copying, idle, min, max]));
    }
    gaps::attribute_cpu_groups(cx.p, &mut groups)?;
    let mut drafts = Vec::new();
    for (st, group) in starved.into_iter().zip(groups) {
        let (i, d, g, [total, copying, idle, min, max]) = st;
        let mut listed = group.gaps;
        for gp in &mut listed {
            gaps::copy_cause(gp, &d.all_union);
        }
        let mut causes: BTreeMap<String, usize> = BTreeMap::new();
        for gp in &listed {
            *causes.entry(gp.cause.clone()).or_default() += 1;
        }
        let top = &listed[0];
        let range = top
            .cpu
            .iter()
            .filter(|c| c.source == "nvtx")
            .min_by_key(|c| {
                (
                    std::cmp::Reverse(c.overlap_ns * 2 >= top.length_ns),
                    c.overlap_ns,
                )
            })
            .map(|c| c.name.clone());
        let idle_iv = intervals::intersect(&g, &d.idle);
        let mut evidence = vec![
            format!(
                "{} gaps > 1 ms between kernels on device {} in the {} window, {} in all ({}% of it), {}–{} each",
                g.len(),
                d.device,
                d.window.kind.as_str(),
                ms(total),
                d.share(total),
                ms(min),
                ms(max)
            ),
            format!(
                "largest at {} ns: {}; {}",
                top.start_ns,
                ms(top.length_ns),
                top.explanation
            ),
        ];
        if let Some(r) = &range {
            evidence.push(format!(
                "during the largest gap the launching thread is inside NVTX range `{r}`"
            ));
        }
        if copying > 0 {
            evidence.push(format!(
                "the GPU was copying (memcpy/memset) for {} of the gap time: not counted as at stake",
                ms(copying)
            ));
        }
        evidence.push(format!(
            "causes of the {} largest: {causes:?}",
            listed.len()
        ));
        let mut dr = Draft::idle(
            i,
            idle_iv,
            "GPU idle (no kernel, copy or memset) inside gaps longer than 1 ms between kernels",
        );
        dr.regions = cx.idle_regions(i, &dr.idle);
        drafts.push(dr.text(
            format!("GPU starvation: {} kernel gaps over 1 ms, GPU idle {}% of the window", g.len(), d.share(idle)),
            evidence,
            json!({
                "gaps": g.len(), "total_ns": total, "total_pct": d.share(total), "copying_ns": copying,
                "idle_ns": idle, "idle_pct": d.share(idle), "min_ns": min, "max_ns": max, "causes": causes,
                "listed": listed.len(),
                "largest": listed.iter().map(|g| json!({"start_ns": g.start_ns, "length_ns": g.length_ns,
                    "cause": g.cause, "explanation": g.explanation, "next_kernel": g.kernel_after})).collect::<Vec<_>>(),
            }),
        ));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "below_threshold",
            "no idle gap longer than 1 ms in the analysis window",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "While the GPU waits for the CPU to issue work, nothing runs: the step takes as long as the CPU side.",
        "Remove the CPU stall named in the evidence (move data loading to DataLoader workers with pin_memory=True and \
         prefetching, avoid host syncs such as .item()/.cpu() in the loop), or overlap it with GPU work \
         (CUDA graphs, torch.compile mode=\"reduce-overhead\", larger batches).",
        "Re-profile and check aisp_profile_gaps: the gap count and total in the steady window should drop, and \
         aisp_profile_utilization busy % rise.",
    );
    Ok(())
}

fn rule_host_bound_steps(cx: &mut Ctx) -> Result<()> {
    let id = "host_bound_steps";
    let kernels = cx.p.kernels()?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devs.iter().enumerate() {
        let steps = d.steps_in_window();
        if steps.len() < 2 {
            continue;
        }
        let attributed = super::attribution::attribute(cx.p, &steps)?;
        let mut cpu = Vec::new();
        let mut gpu = Vec::new();
        let mut excess = 0i64;
        for (r, a) in steps.iter().zip(&attributed) {
            let u = intervals::length(&intervals::union(
                a.any_thread
                    .iter()
                    .map(|&k| &kernels[k as usize])
                    .filter(|k| k.device == d.device)
                    .map(|k| (k.start, k.end))
                    .collect(),
            ));
            cpu.push(r.dur());
            gpu.push(u);
            excess += (r.dur() - u).max(0);
        }
        let cpu_med = stats::median(&mut cpu.clone());
        let gpu_med = stats::median(&mut gpu.clone());
        if gpu_med <= 0.0 || cpu_med < 1.5 * gpu_med {
            continue;
        }
        let ratio = stats::round_ratio((cpu_med * 100.0) as i128, (gpu_med * 100.0) as i128, 100);
        let step_iv = intervals::union(steps.iter().map(|r| (r.start, r.end)).collect());
        let mut dr = Draft::idle(
            i,
            intervals::intersect(&d.idle, &step_iv),
            "GPU idle (no kernel, copy or memset) inside the steps' CPU time ranges",
        );
        let idle_ns = dr.at_stake;
        dr.regions = cx.idle_regions(i, &dr.idle);
        drafts.push(dr.text(
            format!("Host-bound steps: CPU step time is {ratio}x the GPU time per step"),
            vec![
                format!(
                    "{} steps in the {} window: median CPU step {} vs median GPU-projected time {} (union of the kernels each step launches, any thread of the process)",
                    steps.len(),
                    d.window.kind.as_str(),
                    ms(cpu_med as i64),
                    ms(gpu_med as i64)
                ),
                format!("the GPU sits idle for {} of the steps' time ({}% of the window)", ms(idle_ns), d.share(idle_ns)),
            ],
            json!({"steps": steps.len(), "cpu_median_ns": cpu_med, "gpu_median_ns": gpu_med, "ratio": ratio,
                "excess_ns": excess, "idle_ns": idle_ns, "idle_pct": d.share(idle_ns)}),
        ));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "not_applicable",
            "no steps, or CPU step time is under 1.5x the GPU time per step",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "Each step's GPU work finishes long before the CPU issues the next step: the CPU (Python, data loading, \
         launch overhead) sets the step time, so faster kernels would not help.",
        "Find the CPU time in the step (aisp_profile_gaps names what the launching thread does during the idle \
         stretches): move data preparation off the critical path (DataLoader workers, prefetch, pinned memory), \
         cut Python overhead (torch.compile, CUDA graphs), or give the GPU more work per step (larger batch).",
        "Re-profile: aisp_profile_iterations cpu_to_gpu_ratio should approach 1 and the steady-state busy % rise.",
    );
    Ok(())
}

fn rule_low_utilization(cx: &mut Ctx) -> Result<()> {
    let id = "low_utilization";
    let mut drafts = Vec::new();
    for (i, d) in cx.devs.iter().enumerate() {
        if cx
            .findings
            .iter()
            .any(|f| f.id == "host_bound_steps" && f.device == Some(d.device))
        {
            continue;
        }
        let busy = d.kernel_time_in_window;
        let pct = pct2(busy, d.len());
        let all_busy = intervals::clipped_length(&d.all_union, d.window.bounds());
        let all_pct = pct2(all_busy, d.len());
        if all_pct >= 50.0 {
            continue;
        }
        // Idle stretches shorter than 1 ms (longer ones are gpu_starvation's), counted one by one.
        let short: Vec<Interval> = d
            .idle
            .iter()
            .copied()
            .filter(|(s, e)| e - s < MIN_GAP_NS)
            .collect();
        if short.is_empty() {
            continue;
        }
        let longest = short.iter().map(|(s, e)| e - s).max().unwrap_or(0);
        let n = short.len();
        let mut dr = Draft::idle(
            i,
            short,
            "GPU idle (no kernel, copy or memset) in stretches shorter than 1 ms",
        );
        let small = dr.at_stake;
        dr.regions = cx.idle_regions(i, &dr.idle);
        drafts.push(dr.text(
            format!("Low GPU utilization: kernels, copies and memsets busy {all_pct}% of the window, idle in many short bubbles"),
            vec![
                format!("kernels, copies and memsets busy {} of a {} {} window ({all_pct}%; kernels alone {pct}%)", ms(all_busy), ms(d.window.length_ns), d.window.kind.as_str()),
                format!("{n} idle stretches shorter than 1 ms hold {} of idle time (the longest {}); longer ones are gpu_starvation's", ms(small), ms(longest)),
            ],
            json!({"busy_ns": busy, "busy_pct": pct, "all_ops_busy_ns": all_busy, "all_ops_busy_pct": all_pct,
                "short_idle_ns": small, "short_gaps": n, "longest_short_ns": longest}),
        ));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "below_threshold",
            "kernels, copies and memsets busy at least 50% of the window, the idle time all in long gaps, \
             or host_bound_steps already accounts for it",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "Between kernels the GPU waits for launches: short kernels and per-launch CPU overhead leave bubbles.",
        "Fuse small kernels (torch.compile), capture the step in a CUDA graph, or raise the work per kernel (batch size).",
        "Re-profile: aisp_profile_utilization busy % in the same window should rise.",
    );
    Ok(())
}

fn pinned_bandwidth(p: &Profile, copy_kind: i64) -> Result<f64> {
    let kinds = p.mem_kind_labels()?;
    let pinned = kinds
        .iter()
        .find(|(_, l)| l.eq_ignore_ascii_case("Pinned"))
        .map(|(k, _)| *k);
    let best = p
        .memcpys()?
        .iter()
        .filter(|m| {
            m.copy_kind == copy_kind
                && pinned.is_some()
                && (m.src_kind == pinned || m.dst_kind == pinned)
        })
        .filter(|m| m.bytes >= 1 << 20)
        .map(|m| m.bytes as f64 / (m.end - m.start).max(1) as f64)
        .fold(0.0, f64::max);
    // Without a pinned copy to compare against, assume a conservative 20 GB/s (PCIe Gen4 x16 in practice).
    Ok(if best > 0.0 { best } else { 20.0 })
}

fn rule_pageable_memcpy(cx: &mut Ctx) -> Result<()> {
    let id = "cuda_memcpy_async_pageable";
    let Some(pageable) = super::memory::pageable_kind(cx.p)? else {
        cx.skip(
            id,
            "not_applicable",
            "the export does not record memory kinds (no ENUM_CUDA_MEM_KIND)",
        );
        return Ok(());
    };
    let api = cx.p.api()?;
    let correlation_only =
        cx.p.tables()
            .memcpy
            .as_ref()
            .is_none_or(|t| !t.has("globalPid"));
    let index = super::correlation_index_for(
        api,
        correlation_only,
        cx.p.memcpys()?
            .iter()
            .map(|m| (m.global_pid, m.correlation)),
    );
    let opers = cx.p.memcpy_oper_labels()?;
    // The best pinned bandwidth of a direction scans every copy: once per direction, not per copy.
    let mut bandwidth: HashMap<i64, f64> = HashMap::new();
    let mut drafts = Vec::new();
    let mut total_everywhere = 0u64;
    for (i, d) in cx.devs.iter().enumerate() {
        let mut n_all = 0u64;
        let mut n_in = 0u64;
        let mut bytes_in = 0i64;
        let mut at_stake = 0i64;
        let mut dirs: BTreeMap<String, (u64, i64)> = BTreeMap::new();
        let mut largest: Option<(i64, i64, i64, String)> = None;
        let mut per_region = Vec::new();
        for m in cx.p.memcpys()?.iter().filter(|m| m.device == d.device) {
            if m.src_kind != Some(pageable) && m.dst_kind != Some(pageable) {
                continue;
            }
            let Some(call) = index
                .find(m.global_pid, m.correlation)
                .map(|a| &api[a as usize])
            else {
                continue;
            };
            if !calls::is_async_memcpy_api(calls::api_display_name(cx.p.string(call.name))) {
                continue;
            }
            n_all += 1;
            let dir = opers.get(&m.copy_kind).cloned().unwrap_or_default();
            if largest.as_ref().is_none_or(|l| m.bytes > l.0) {
                largest = Some((m.bytes, m.start, m.end - m.start, dir.clone()));
            }
            if !d.contains(m.start, m.end) {
                continue;
            }
            n_in += 1;
            bytes_in += m.bytes;
            let e = dirs.entry(dir).or_default();
            e.0 += 1;
            e.1 += m.bytes;
            let bw = match bandwidth.get(&m.copy_kind) {
                Some(&bw) => bw,
                None => {
                    let bw = pinned_bandwidth(cx.p, m.copy_kind)?;
                    bandwidth.insert(m.copy_kind, bw);
                    bw
                }
            };
            let ideal = (m.bytes as f64 / bw) as i64;
            let (s, e) = (m.start.max(d.window.start_ns), m.end.min(d.window.end_ns));
            let excess = ((e - s) - ideal).max(0);
            at_stake += excess;
            per_region.push((cx.regions.region(call.global_tid, call.start), excess));
        }
        total_everywhere += n_all;
        if n_all == 0 {
            continue;
        }
        let mut evidence = vec![format!(
            "{n_all} async copies from/to pageable memory on device {} ({n_in} inside the {} window, {} bytes there)",
            d.device,
            d.window.kind.as_str(),
            bytes_in
        )];
        if !dirs.is_empty() {
            evidence.push(format!(
                "in the window by direction (count, bytes): {dirs:?}"
            ));
        }
        if let Some((b, s, dur, dir)) = &largest {
            evidence.push(format!(
                "largest: {dir} {b} bytes at {s} ns taking {}",
                ms(*dur)
            ));
        }
        let mut dr = Draft::estimate(
            i,
            at_stake,
            "the copies' time beyond what the same bytes take at the best pinned bandwidth of this profile \
             (20 GB/s when it has no pinned copy of 1 MB or more)",
        );
        dr.regions = region_stakes(per_region.into_iter(), at_stake);
        let largest_json = largest.as_ref().map(
            |(b, s, dur, dir)| json!({"bytes": b, "start_ns": s, "dur_ns": dur, "direction": dir}),
        );
        drafts.push(dr.text(
            format!(
                "Async memcpy with pageable host memory ({n_all} {}, {n_in} in the window)",
                if n_all == 1 { "copy" } else { "copies" }
            ),
            evidence,
            json!({"copies": n_all, "in_window": n_in, "bytes_in_window": bytes_in, "by_direction": dirs,
                "largest": largest_json}),
        ));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "below_threshold",
            format!("no async copy touches pageable memory ({total_everywhere} found)"),
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "An async copy from or to pageable memory is staged through a driver bounce buffer: it runs at a fraction of \
         pinned bandwidth, blocks the calling thread and cannot overlap with compute.",
        "Use pinned host memory: DataLoader(pin_memory=True) or tensor.pin_memory() with .to(device, non_blocking=True); \
         for results, copy into a preallocated torch.empty(..., pin_memory=True) buffer with copy_(non_blocking=True).",
        "Re-profile and check aisp_profile_memory: pageable_async.count should be 0 (or its in_steps 0).",
    );
    Ok(())
}

/// Blocking host calls of one device's process: what they cost the GPU.
struct Blocking {
    draft: Draft,
    /// name → (calls, total ns, max ns).
    names: BTreeMap<String, (u64, i64, i64)>,
    blocked_ns: i64,
    busy_while_blocked_ns: i64,
    /// "previous call → this call" → count: the API pattern producing the calls.
    patterns: BTreeMap<String, u64>,
}

/// The CUDA call made just before `api[idx]` on the same thread, with a copy's direction and memory kind.
fn preceding_call(cx: &Ctx, idx: usize, copies: &HashMap<(i64, i64), String>) -> Option<String> {
    let api = cx.p.api().ok()?;
    let me = &api[idx];
    let prev = api[..idx]
        .iter()
        .rev()
        .take(256)
        .find(|a| a.global_tid == me.global_tid)?;
    let name = calls::api_display_name(cx.p.string(prev.name));
    Some(
        match copies.get(&(model::process_key(prev.global_tid), prev.correlation)) {
            Some(c) => format!("{name} ({c})"),
            None => name.to_string(),
        },
    )
}

/// Copy labels of device `i`'s copies by (process, correlation): "Device-to-Host, Pageable".
fn copy_labels<'c>(cx: &'c Ctx, i: usize) -> Result<&'c HashMap<(i64, i64), String>> {
    if let Some(m) = cx.copy_labels[i].get() {
        return Ok(m);
    }
    let m = make_copy_labels(cx, &cx.devs[i])?;
    Ok(cx.copy_labels[i].get_or_init(|| m))
}

fn make_copy_labels(cx: &Ctx, d: &Dev) -> Result<HashMap<(i64, i64), String>> {
    let opers = cx.p.memcpy_oper_labels()?;
    let kinds = cx.p.mem_kind_labels()?;
    let mut m = HashMap::new();
    for c in cx.p.memcpys()?.iter().filter(|c| c.device == d.device) {
        let host = [c.src_kind, c.dst_kind]
            .into_iter()
            .flatten()
            .filter_map(|k| kinds.get(&k))
            .find(|l| !l.eq_ignore_ascii_case("Device"))
            .cloned();
        let dir = opers.get(&c.copy_kind).cloned().unwrap_or_default();
        m.insert(
            (c.global_pid, c.correlation),
            match host {
                Some(h) => format!("{dir}, {h}"),
                None => dir,
            },
        );
    }
    Ok(m)
}

/// Cost of the calls of `api` (by index) that `pick` selects, on device `i`'s GPU.
fn blocking(
    cx: &Ctx,
    i: usize,
    pick: impl Fn(usize) -> bool,
    basis: &str,
) -> Result<Option<Blocking>> {
    let d = &cx.devs[i];
    let api = cx.p.api()?;
    let copies = copy_labels(cx, i)?;
    // Per name id (display names are made once per name, at the end).
    let mut by_name: rustc_hash::FxHashMap<i64, (u64, i64, i64)> = Default::default();
    let mut blocked = Vec::new();
    let mut per_region = Vec::new();
    let mut patterns: BTreeMap<String, u64> = BTreeMap::new();
    let mut drains = Vec::new();
    for (ai, a) in api.iter().enumerate() {
        // `pick` first: it rejects almost every call for the price of an index.
        if !pick(ai) || !d.in_process(a.global_tid) || !d.contains(a.start, a.end) {
            continue;
        }
        let e = by_name.entry(a.name).or_default();
        e.0 += 1;
        e.1 += a.dur();
        e.2 = e.2.max(a.dur());
        let (s, en) = (a.start.max(d.window.start_ns), a.end.min(d.window.end_ns));
        blocked.push((s, en));
        let drain = d.drain(std::iter::once((s, en)));
        per_region.push((
            cx.regions.region(a.global_tid, a.start),
            intervals::length(&drain),
        ));
        drains.extend(drain);
        if let Some(prev) = preceding_call(cx, ai, copies) {
            let n = calls::api_display_name(cx.p.string(a.name));
            *patterns.entry(format!("{prev} → {n}")).or_default() += 1;
        }
    }
    let mut names: BTreeMap<String, (u64, i64, i64)> = BTreeMap::new();
    for (id, (n, total, max)) in by_name {
        // Two name ids can share a display name (`cudaMalloc` and `cudaMalloc_v3020`).
        let e = names
            .entry(calls::api_display_name(cx.p.string(id)).to_string())
            .or_default();
        e.0 += n;
        e.1 += total;
        e.2 = e.2.max(max);
    }
    if names.is_empty() {
        return Ok(None);
    }
    let blocked = intervals::union(blocked);
    let blocked_ns = intervals::length(&blocked);
    let busy = intervals::length(&intervals::intersect(&blocked, &d.all_union));
    let mut draft = Draft::idle(i, drains, basis);
    draft.regions = region_stakes(per_region.into_iter(), draft.at_stake);
    Ok(Some(Blocking {
        draft,
        names,
        blocked_ns,
        busy_while_blocked_ns: busy,
        patterns,
    }))
}

const DRAIN_BASIS: &str = "GPU idle (no kernel, copy or memset) from when the host blocked in the call, or the GPU ran \
     out of work during it, until new work reached the GPU, at most 1 ms past the call's return";

impl Blocking {
    /// The shared evidence: blocked time, how much of it the GPU worked through, the idle it explains, the pattern.
    fn evidence(&self, d: &Dev, what: &str) -> Vec<String> {
        let n: u64 = self.names.values().map(|v| v.0).sum();
        let mut ev = vec![
            format!(
                "{n} {what} in the {} window (count, total ns, max ns): {:?}",
                d.window.kind.as_str(),
                self.names
            ),
            format!(
                "the host is blocked {} in them; the GPU works through {} of that, so only the idle time counts: {} ({}% of the window)",
                ms(self.blocked_ns),
                ms(self.busy_while_blocked_ns),
                ms(self.draft.at_stake),
                d.share(self.draft.at_stake)
            ),
        ];
        let mut pats: Vec<(&String, &u64)> = self.patterns.iter().collect();
        pats.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (p, c) in pats.iter().take(2) {
            ev.push(format!("API pattern: {p} in {c} of {n} calls"));
        }
        ev
    }
    fn data(&self, d: &Dev) -> serde_json::Value {
        json!({"calls": self.names, "count": self.names.values().map(|v| v.0).sum::<u64>(),
            "blocked_ns": self.blocked_ns, "busy_while_blocked_ns": self.busy_while_blocked_ns,
            "idle_ns": self.draft.at_stake, "idle_pct": d.share(self.draft.at_stake), "patterns": self.patterns})
    }
}

fn rule_sync_memcpy(cx: &mut Ctx) -> Result<()> {
    let id = "sync_memcpy_memset";
    let mut drafts = Vec::new();
    for i in 0..cx.devs.len() {
        let pick = |ai: usize| {
            let f = cx.facts(ai);
            f.sync_memcpy || f.sync_memset
        };
        let Some(b) = blocking(cx, i, pick, DRAIN_BASIS)? else {
            continue;
        };
        let d = &cx.devs[i];
        let ev = b.evidence(d, "blocking memcpy/memset calls");
        let data = b.data(d);
        drafts.push(
            b.draft
                .text("Synchronous memcpy/memset API calls".into(), ev, data),
        );
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "below_threshold",
            "no blocking cudaMemcpy/cudaMemset API call in the window",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "A synchronous copy or memset blocks the host until the GPU finishes all earlier work, draining the pipeline.",
        "Use cudaMemcpyAsync/cudaMemsetAsync on a stream (in PyTorch: pinned memory and non_blocking=True) and synchronize only when the result is needed.",
        "Re-profile: aisp_profile_memory blocking.sync_memcpy_calls and sync_memset_calls should be 0.",
    );
    Ok(())
}

fn rule_sync_apis(cx: &mut Ctx) -> Result<()> {
    let id = "cuda_api_sync";
    let mut drafts = Vec::new();
    for i in 0..cx.devs.len() {
        let pick = |ai: usize| cx.facts(ai).kind == CallKind::HostSync;
        let Some(b) = blocking(cx, i, pick, DRAIN_BASIS)? else {
            continue;
        };
        let d = &cx.devs[i];
        let ev = b.evidence(d, "sync calls of the device's process");
        let data = b.data(d);
        let title = format!(
            "Host synchronization: the GPU idles {} around sync calls (host blocked {})",
            ms(b.draft.at_stake),
            ms(b.blocked_ns)
        );
        drafts.push(b.draft.text(title, ev, data));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "below_threshold",
            "no cudaDeviceSynchronize/cudaStreamSynchronize/cudaEventSynchronize in the window",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "While the host waits in a synchronization call it issues no work; once the GPU has drained its queue it sits idle \
         until the host returns and launches again. Blocking while the GPU is still busy costs the GPU nothing.",
        "Remove syncs from the loop: avoid .item(), .cpu(), print(tensor) and torch.cuda.synchronize() per step; \
         order work with CUDA events/cudaStreamWaitEvent instead of host waits; accumulate metrics on the GPU.",
        "Re-profile and check aisp_profile_rules: the GPU idle time at stake of cuda_api_sync should shrink.",
    );
    Ok(())
}

fn rule_sync_every_iteration(cx: &mut Ctx) -> Result<()> {
    let id = "host_sync_every_iteration";
    let api = cx.p.api()?;
    let mut drafts = Vec::new();
    for i in 0..cx.devs.len() {
        let steps = cx.devs[i].steps_in_window();
        if steps.len() < 3 {
            continue;
        }
        let mut with_sync = 0usize;
        let mut in_steps: Vec<bool> = vec![false; api.len()];
        for r in &steps {
            let lo = api.partition_point(|a| a.start < r.start);
            let mut any = false;
            for (k, a) in api[lo..]
                .iter()
                .enumerate()
                .take_while(|(_, a)| a.start < r.end)
            {
                if a.end > r.end
                    || model::process_key(a.global_tid) != model::process_key(r.global_tid)
                {
                    continue;
                }
                let f = cx.facts(lo + k);
                if f.kind == CallKind::HostSync || f.sync_memcpy {
                    in_steps[lo + k] = true;
                    any = true;
                }
            }
            if any {
                with_sync += 1;
            }
        }
        if with_sync * 5 < steps.len() * 4 {
            continue;
        }
        let n_steps = steps.len();
        let Some(b) = blocking(cx, i, |ai| in_steps[ai], DRAIN_BASIS)? else {
            continue;
        };
        let d = &cx.devs[i];
        let mut ev = vec![format!(
            "{with_sync} of {n_steps} steps in the window call a blocking API"
        )];
        ev.extend(b.evidence(d, "blocking calls inside the steps"));
        let mut data = b.data(d);
        data["steps"] = json!(n_steps);
        data["steps_with_sync"] = json!(with_sync);
        let title = format!("A host sync in every iteration ({with_sync} of {n_steps} steps)");
        drafts.push(b.draft.text(title, ev, data));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "not_applicable",
            "fewer than 3 steps, or fewer than 80% of steps synchronize",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "A sync per step drains the GPU queue each iteration: the CPU cannot run ahead, so every launch latency and CPU stall shows up as GPU idle time.",
        "Find the per-step sync (commonly loss.item(), metrics .cpu(), a print of a CUDA tensor, or torch.cuda.synchronize() for timing) \
         and move it out of the loop or do it every N steps; keep running sums on the GPU.",
        "Re-profile: aisp_profile_rules should no longer report host_sync_every_iteration, and steady-state busy % should rise.",
    );
    Ok(())
}

/// Allocation/release calls in the window below which allocation is setup, not churn.
const MIN_CHURN_CALLS: u64 = 10;

fn rule_allocator_churn(cx: &mut Ctx) -> Result<()> {
    let id = "allocator_churn";
    let mut drafts = Vec::new();
    for i in 0..cx.devs.len() {
        let pick = |ai: usize| cx.facts(ai).kind == CallKind::Allocation;
        let Some(b) = blocking(cx, i, pick, DRAIN_BASIS)? else {
            continue;
        };
        let d = &cx.devs[i];
        let n: u64 = b.names.values().map(|v| v.0).sum();
        // A few allocations are setup (a new shape, a first batch); churn repeats.
        if n < MIN_CHURN_CALLS {
            continue;
        }
        let ev = b.evidence(
            d,
            "allocation/release calls (cudaMalloc, cudaFree and kin) in the steady state",
        );
        let data = b.data(d);
        let title = format!(
            "Allocator churn: {n} allocation/release calls in the {} window, GPU idle {} around them",
            d.window.kind.as_str(),
            ms(b.draft.at_stake)
        );
        drafts.push(b.draft.text(title, ev, data));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "below_threshold",
            "fewer than 10 cudaMalloc/cudaFree (or driver allocation) calls in the analysis window",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "cudaMalloc and cudaFree in the steady state mean the caching allocator gives memory back and asks again: \
         each call costs tens to hundreds of microseconds of CPU, and cudaFree waits for the whole device to finish.",
        "Do not call torch.cuda.empty_cache() (or gc-driven frees) inside the loop; keep tensor shapes steady so blocks \
         are reused; preallocate buffers; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
        "Re-profile: aisp_profile_summary cuda_api_sum should show no cudaMalloc/cudaFree inside the steps.",
    );
    Ok(())
}

/// Kernels that update optimizer state one tensor at a time (PyTorch's
/// single-tensor Adam/AdamW/SGD paths: lerp, addcmul, addcdiv per parameter).
/// Matched on kernel names, never on NVTX range names.
fn is_per_tensor_optimizer_math(demangled: &str) -> bool {
    !demangled.contains("multi_tensor")
        && (demangled.contains("addcdiv")
            || demangled.contains("lerp_kernel")
            || demangled.contains("lerp_scalar"))
}

fn rule_launch_bound(cx: &mut Ctx) -> Result<()> {
    let id = "launch_bound_tiny_kernels";
    let kernels = cx.p.kernels()?;
    let api = cx.p.api()?;
    let launches = &cx.p.launch_index()?.kernel_launch;
    let mut drafts = Vec::new();
    for (i, d) in cx.devs.iter().enumerate() {
        let ks: Vec<&Kernel> = d.kernels.iter().map(|&k| &kernels[k]).collect();
        let tiny = ks.iter().filter(|k| k.dur() < SHORT_KERNEL_NS).count();
        if ks.is_empty() || tiny < 100 || tiny * 10 < ks.len() * 3 {
            continue;
        }
        let tiny_time: i64 = ks
            .iter()
            .filter(|k| k.dur() < SHORT_KERNEL_NS)
            .map(|k| k.dur())
            .sum();
        // Time at stake: idle bubbles under 1 ms that end with a kernel whose
        // launch call had not returned when the GPU ran out of work — the GPU
        // waited for that launch. Kernels of a replayed CUDA graph are launched
        // long before they run, so a graph's inter-kernel gaps never count.
        let mut bubbles = Vec::new();
        // region → (kernels launched, per-tensor optimizer kernels, occurrences by range start)
        let mut per_region: BTreeMap<String, (u64, u64, std::collections::BTreeSet<i64>)> =
            BTreeMap::new();
        let mut bubble_regions = Vec::new();
        for &k in &d.kernels {
            let kk = &kernels[k];
            let Some(a) = launches[k].map(|a| &api[a as usize]) else {
                continue;
            };
            let range = cx.regions.innermost(a.global_tid, a.start);
            if let Some(r) = range {
                let e = per_region
                    .entry(super::regions::fold_name(&r.name))
                    .or_default();
                e.0 += 1;
                if is_per_tensor_optimizer_math(cx.p.string(kk.demangled_name)) {
                    e.1 += 1;
                }
                e.2.insert(r.start);
            }
            let gi = d.idle.partition_point(|g| g.1 < kk.start);
            let Some(&(gs, ge)) = d.idle.get(gi) else {
                continue;
            };
            if ge != kk.start || ge - gs >= MIN_GAP_NS || a.end <= gs {
                continue;
            }
            bubbles.push((gs, ge));
            bubble_regions.push((range.map(|r| super::regions::fold_name(&r.name)), ge - gs));
        }
        let rate = tiny as f64 / (d.window.length_ns as f64 / 1e9);
        let mut dr = Draft::idle(
            i,
            bubbles,
            "GPU idle in bubbles under 1 ms that end when a kernel arrives whose launch call had not returned \
             when the GPU ran out of work (the GPU waited for the launch)",
        );
        let waited = dr.idle.len();
        dr.regions = region_stakes(bubble_regions.into_iter(), dr.at_stake);
        let mut evidence = vec![
            format!(
                "{tiny} of {} kernels in the {} window run under 5 us ({}% of their time), {:.0} tiny launches per second",
                ks.len(),
                d.window.kind.as_str(),
                pct1(tiny_time, ks.iter().map(|k| k.dur()).sum()),
                rate
            ),
            format!(
                "the GPU waited for a launch {waited} times, {} of idle in all ({}% of the window)",
                ms(dr.at_stake),
                d.share(dr.at_stake)
            ),
        ];
        let mut region_json = serde_json::Value::Null;
        if let Some(top) = dr.regions.first().cloned() {
            let (launched, optim, occ) = per_region
                .get(&top.region)
                .map(|(a, b, c)| (*a, *b, c.len() as u64))
                .unwrap_or((0, 0, 0));
            let per_occ = launched / occ.max(1);
            evidence.push(format!(
                "most of it in NVTX region `{}`: {} ({}% of the time at stake) over {occ} occurrences, {per_occ} kernels launched per occurrence",
                top.region,
                ms(top.at_stake_ns),
                top.pct_of_finding
            ));
            let advice = if optim * 4 >= launched && optim > 0 {
                evidence.push(format!(
                    "{optim} of the {launched} kernels launched in `{}` are per-tensor optimizer updates (lerp/addcdiv one parameter at a time)",
                    top.region
                ));
                format!(
                    "In `{}`: the optimizer updates one parameter tensor at a time; use the multi-tensor or fused \
                     implementation (torch.optim.Adam/AdamW/SGD with foreach=True, or fused=True), which launches a \
                     handful of kernels per step instead of {per_occ}.",
                    top.region
                )
            } else if occ >= 3 && per_occ >= 10 {
                format!(
                    "In `{}`: the same region runs {occ} times, launching {per_occ} kernels each while the GPU waits; \
                     capture one occurrence in a CUDA graph (torch.cuda.CUDAGraph with static input buffers, or \
                     torch.compile(mode=\"reduce-overhead\")) so it is launched once.",
                    top.region
                )
            } else {
                format!(
                    "In `{}`: fuse its small kernels (torch.compile) or give each kernel more work (batch size).",
                    top.region
                )
            };
            region_json = json!({"region": top.region, "at_stake_ns": top.at_stake_ns, "pct_of_finding": top.pct_of_finding,
                "occurrences": occ, "kernels_launched": launched, "kernels_per_occurrence": per_occ,
                "per_tensor_optimizer_kernels": optim});
            dr.fix = Some(advice);
        }
        let stake = dr.at_stake;
        drafts.push(dr.text(
            format!(
                "Launch-bound: {tiny} kernels under 5 us ({}% of kernels), the GPU waits on launches",
                pct1(tiny as i64, ks.len() as i64)
            ),
            evidence,
            json!({"tiny": tiny, "kernels": ks.len(), "tiny_pct": pct1(tiny as i64, ks.len() as i64),
                "tiny_time_ns": tiny_time, "tiny_time_pct": pct1(tiny_time, ks.iter().map(|k| k.dur()).sum()),
                "bubbles": waited, "bubbles_ns": stake, "idle_pct": d.share(stake),
                "tiny_per_s": rate, "top_region": region_json}),
        ));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "below_threshold",
            "fewer than 100 kernels under 5 us, or under 30% of kernels",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "A kernel that runs for a few microseconds costs about as much to launch (3–10 us of CPU per launch): the GPU waits for launches.",
        "Fuse elementwise chains (torch.compile), use fused optimizers (fused=True / foreach), capture the step in a CUDA graph \
         (torch.compile mode=\"reduce-overhead\"), or batch more work per kernel.",
        "Re-profile: aisp_profile_kernels devices[].short_kernels should fall and aisp_profile_utilization busy % rise.",
    );
    Ok(())
}

fn rule_fp32_simt_gemm(cx: &mut Ctx) -> Result<()> {
    let id = "fp32_gemm_on_cuda_cores";
    let kernels = cx.p.kernels()?;
    let mut classifier = Classifier::new(cx.p);
    let mut drafts = Vec::new();
    for (i, d) in cx.devs.iter().enumerate() {
        let mut time = 0i64;
        let mut n = 0u64;
        let mut names: HashMap<i64, (u64, i64)> = HashMap::new();
        let mut all = 0i64;
        for &k in &d.kernels {
            let kk = &kernels[k];
            all += kk.dur();
            if classifier.of(kk).class == KernelClass::GemmSimtFp32 {
                time += kk.dur();
                n += 1;
                let e = names.entry(kk.short_name).or_default();
                e.0 += 1;
                e.1 += kk.dur();
            }
        }
        if n == 0 || time * 100 < all {
            continue;
        }
        let mut top: Vec<(i64, (u64, i64))> = names.into_iter().collect();
        top.sort_by_key(|(_, (_, t))| std::cmp::Reverse(*t));
        let share_kernel = pct1(time, all);
        // TF32 tensor cores have 7–8x the dense FP32 peak on A100/H100/H200; assume 4x in practice.
        let at = time - time / 4;
        let dr = Draft::estimate(
            i,
            at,
            "three quarters of the fp32 SIMT GEMM time: TF32/BF16 tensor cores run these GEMMs at least 4x faster",
        );
        drafts.push(dr.text(
            format!("fp32 GEMMs on CUDA cores: {share_kernel}% of kernel time could run on tensor cores"),
            vec![
                format!("{n} fp32 SIMT GEMM kernels (FFMA, not tensor cores) take {} = {share_kernel}% of kernel time in the window", ms(time)),
                format!(
                    "top: `{}` ({} calls, {})",
                    cx.p.string(top[0].0),
                    top[0].1.0,
                    ms(top[0].1.1)
                ),
                "estimate: TF32 or BF16 tensor cores run them at least 4x faster (7–8x peak on A100/H100)".to_string(),
            ],
            json!({"kernels": n, "time_ns": time, "share_of_kernel_time_pct": share_kernel,
                "top": top.iter().take(3).map(|(id, (c, t))| json!({"name": cx.p.string(*id), "count": c, "time_ns": t})).collect::<Vec<_>>()}),
        ));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "below_threshold",
            "no fp32 SIMT GEMM, or under 1% of kernel time",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "These matrix multiplies run on CUDA cores (FFMA) in full fp32; tensor cores do the same GEMM several times faster in TF32 or BF16.",
        "Allow TF32: torch.backends.cuda.matmul.allow_tf32 = True (or torch.set_float32_matmul_precision(\"high\")), \
         and torch.backends.cudnn.allow_tf32 = True; or run the model under torch.autocast(\"cuda\", dtype=torch.bfloat16).",
        "Re-profile and check aisp_profile_kernels: the GEMM classes should be gemm_tensor_core and their time should drop.",
    );
    Ok(())
}

fn rule_exposed_communication(cx: &mut Ctx) -> Result<()> {
    let id = "communication_not_overlapped";
    let kernels = cx.p.kernels()?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devs.iter().enumerate() {
        let (mut c, mut n) = (Vec::new(), Vec::new());
        let (mut cs, mut ns) = (Vec::new(), Vec::new());
        for &k in &d.kernels {
            let kk = &kernels[k];
            if is_nccl(cx.p.string(kk.short_name)) {
                n.push((kk.start, kk.end));
                ns.push(kk.stream);
            } else {
                c.push((kk.start, kk.end));
                cs.push(kk.stream);
            }
        }
        if n.is_empty() {
            continue;
        }
        let o =
            super::overlap::window_overlap(d.window, &intervals::union(c), &intervals::union(n));
        if o.communication_only_ns * 100 < d.window.length_ns {
            continue;
        }
        ns.sort_unstable();
        ns.dedup();
        // Distinct streams only: one entry per kernel made this quadratic.
        cs.sort_unstable();
        cs.dedup();
        let shared = ns.iter().any(|s| cs.binary_search(s).is_ok());
        let dr = Draft::estimate(
            i,
            o.communication_only_ns,
            "NCCL kernel time not overlapped with compute kernels; an upper bound: part of it is this rank \
             waiting inside the collective for slower ranks, which overlap cannot remove",
        );
        drafts.push(dr.text(
            if shared {
                "Communication serialized with compute on the same stream".to_string()
            } else {
                format!("Exposed communication: only {}% of NCCL time hidden behind compute", o.overlap_pct)
            },
            vec![
                format!(
                    "device {}: NCCL {} in the {} window, {} of it overlapped with compute ({}%), {} exposed",
                    d.device,
                    ms(o.communication_ns),
                    d.window.kind.as_str(),
                    ms(o.overlap_ns),
                    o.overlap_pct,
                    ms(o.communication_only_ns)
                ),
                format!("NCCL streams {ns:?}; shares a stream with compute: {shared}"),
                "caveat: NCCL kernel time includes waiting for the other ranks to arrive at the collective; \
                 exposed time on a rank that arrives early is mostly that wait (aisp_profile_nccl, aisp_profile_ranks)"
                    .to_string(),
            ],
            {
                let mut v = serde_json::to_value(&o).unwrap_or_default();
                v["streams"] = json!(ns);
                v
            },
        ));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "not_applicable",
            "no NCCL kernels, or under 1% of the window exposed",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "Communication that does not overlap compute adds directly to step time; ranks also wait for the slowest one inside NCCL kernels.",
        "Overlap gradient communication with backward: DDP bucket_cap_mb tuning, gradient_as_bucket_view=True, no \
         find_unused_parameters; with FSDP use backward/forward prefetch; keep NCCL on its own stream; balance work across ranks.",
        "Re-profile and check aisp_profile_overlap: overlap_pct should rise and communication_only_ns fall in the steady window.",
    );
    Ok(())
}

fn rule_h2d_per_step(cx: &mut Ctx) -> Result<()> {
    let id = "heavy_h2d_per_step";
    let opers = cx.p.memcpy_oper_labels()?;
    let h2d = opers
        .iter()
        .find(|(_, l)| l.as_str() == "Host-to-Device")
        .map(|(k, _)| *k)
        .unwrap_or(1);
    let mut drafts = Vec::new();
    for (i, d) in cx.devs.iter().enumerate() {
        let copies: Vec<(i64, i64, i64)> = cx
            .p
            .memcpys()?
            .iter()
            .filter(|m| m.device == d.device && m.copy_kind == h2d && d.contains(m.start, m.end))
            .map(|m| {
                (
                    m.start.max(d.window.start_ns),
                    m.end.min(d.window.end_ns),
                    m.bytes,
                )
            })
            .collect();
        if copies.is_empty() {
            continue;
        }
        let bytes: i64 = copies.iter().map(|c| c.2).sum();
        let u = intervals::union(copies.iter().map(|c| (c.0, c.1)).collect());
        let copy_time = intervals::length(&u);
        // Copies overlapped by kernels are hidden; what is not is at stake.
        let hidden = intervals::length(&intervals::intersect(
            &u,
            &intervals::clip(&d.kernel_union, d.window.bounds()),
        ));
        let exposed = copy_time - hidden;
        if exposed * 100 < d.window.length_ns {
            continue;
        }
        let n_steps = d.steps_in_window().len() as i64;
        let dr = Draft::estimate(
            i,
            exposed,
            "host-to-device copy time not overlapped with kernels: hidden by prefetching on a side stream \
             (up to the compute time available) or gone when the data stays on the GPU",
        );
        let mb = bytes / 1_000_000;
        let mb_per_step = if n_steps > 0 {
            bytes / n_steps / 1_000_000
        } else {
            0
        };
        let mut evidence = vec![format!(
            "{} H2D copies, {bytes} bytes in the {} window: {} of copy time, {} not overlapped with kernels ({}% of the window)",
            copies.len(),
            d.window.kind.as_str(),
            ms(copy_time),
            ms(exposed),
            d.share(exposed)
        )];
        if n_steps > 0 {
            evidence.push(format!(
                "{n_steps} steps in the window: {mb_per_step} MB per step"
            ));
        }
        drafts.push(dr.text(
            if n_steps > 0 {
                format!("Heavy host-to-device traffic: {mb_per_step} MB per step, {} not overlapped with kernels", ms(exposed))
            } else {
                format!("Heavy host-to-device traffic: {mb} MB, {} not overlapped with kernels (no steps)", ms(exposed))
            },
            evidence,
            json!({"copies": copies.len(), "bytes": bytes, "mb": mb, "mb_per_step": mb_per_step, "copy_time_ns": copy_time,
                "exposed_ns": exposed, "exposed_pct": d.share(exposed), "steps": n_steps}),
        ));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "below_threshold",
            "host-to-device copies not overlapped with kernels take under 1% of the window",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "Host-to-device copies that the GPU waits for add their duration to the step; PCIe is 10–50x slower than HBM.",
        "Keep data on the GPU across steps, prefetch the next batch on a side stream with pinned memory and non_blocking=True, \
         and move preprocessing (decode, augment, normalize) to the GPU or into DataLoader workers.",
        "Re-profile and check aisp_profile_memory and aisp_profile_rules: H2D time not overlapped with kernels should shrink.",
    );
    Ok(())
}

fn rule_dominant_kernel(cx: &mut Ctx) -> Result<()> {
    let id = "dominant_kernel";
    let kernels = cx.p.kernels()?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devs.iter().enumerate() {
        let mut t: HashMap<i64, (u64, i64)> = HashMap::new();
        let mut all = 0i64;
        for &k in &d.kernels {
            let kk = &kernels[k];
            all += kk.dur();
            let e = t.entry(kk.short_name).or_default();
            e.0 += 1;
            e.1 += kk.dur();
        }
        let Some((name, (n, time))) = t
            .into_iter()
            .max_by_key(|(id, (_, t))| (*t, std::cmp::Reverse(*id)))
        else {
            continue;
        };
        if time * 2 <= all {
            continue;
        }
        let share = pct1(time, all);
        // Informational: how much faster the kernel could be is not in the trace.
        let dr = Draft::estimate(
            i,
            0,
            "none: how much faster the kernel could run is not in the trace",
        );
        drafts.push(dr.text(
            format!("One kernel dominates: `{}` is {share}% of kernel time", cx.p.string(name)),
            vec![format!("`{}` runs {n} times for {} of {} kernel time in the window", cx.p.string(name), ms(time), ms(all))],
            json!({"kernel": cx.p.string(name), "count": n, "time_ns": time, "all_ns": all, "share_of_kernel_time_pct": share}),
        ));
    }
    if drafts.is_empty() {
        cx.skip(id, "below_threshold", "no kernel over 50% of kernel time");
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "Optimization effort on this kernel pays most; the rest barely matters until it shrinks.",
        "Check its class and precision with aisp_profile_kernels (tensor cores? fp32?), its shapes and launch configuration; \
         profile it with Nsight Compute (ncu --set full -k <name>) for its roofline position.",
        "Re-profile: its share and total time in aisp_profile_kernels.",
    );
    Ok(())
}

fn rule_step_variance(cx: &mut Ctx) -> Result<()> {
    let id = "step_time_variance";
    let mut drafts = Vec::new();
    for (i, d) in cx.devs.iter().enumerate() {
        let steps = d.steps_in_window();
        if steps.len() < 5 {
            continue;
        }
        let mut steps: Vec<_> = steps.into_iter().collect();
        steps.sort_by_key(|r| r.start);
        // Warm-up often spills into the window's first step (allocator growth,
        // autotuning, a second lazy load): when that step is the slowest, it
        // is a one-time cost, not intermittent variance, so leave it out.
        let mut warmup_note = None;
        let first_of_window = steps[0].dur();
        if steps.len() >= 6 {
            let first = steps[0].dur();
            let mut rest: Vec<i64> = steps[1..].iter().map(|r| r.dur()).collect();
            let rest_med = stats::median(&mut rest);
            if steps[1..].iter().all(|r| r.dur() <= first) && first as f64 > 1.2 * rest_med {
                warmup_note = Some(format!(
                    "the window's first step ({}, {}) is left out as the tail of warm-up",
                    steps[0].name,
                    ms(first)
                ));
                steps.remove(0);
            }
        }
        let cpu: Vec<i64> = steps.iter().map(|r| r.dur()).collect();
        let med = stats::median(&mut cpu.clone());
        let max = cpu.iter().copied().max().unwrap_or(0);
        let sp = iterations::spread(&cpu);
        let cv = sp.as_ref().map_or(0.0, |s| s.cv_pct);
        if (max as f64) < 1.5 * med && cv < 10.0 {
            continue;
        }
        let excess: i64 = cpu.iter().map(|&c| (c - med as i64).max(0)).sum();
        let slowest = steps
            .iter()
            .max_by_key(|r| r.dur())
            .map(|r| r.name.clone())
            .unwrap_or_default();
        let mut evidence = vec![format!(
            "{} steps in the window: median {}, max {} ({slowest}), CV {cv}%",
            steps.len(),
            ms(med as i64),
            ms(max)
        )];
        evidence.extend(warmup_note);
        let dr = Draft::estimate(
            i,
            excess,
            "the steps' CPU time above the median step, summed: what evening them out would save at most",
        );
        let ratio = max as f64 / med.max(1.0);
        drafts.push(dr.text(
            format!("Step time varies: slowest step {ratio:.2}x the median"),
            evidence,
            json!({"steps": steps.len(), "median_ns": med, "max_ns": max, "cv_pct": cv, "slowest": slowest,
                "ratio": ratio, "excess_ns": excess, "first_ns": first_of_window}),
        ));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "below_threshold",
            "fewer than 5 steps, or max under 1.5x the median and CV under 10%",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "Uneven steps mean something intermittent (garbage collection, data loader stalls, allocator growth, checkpointing, \
         stragglers in collectives); in distributed training every rank waits for the slowest.",
        "Look at the slowest steps in aisp_profile_iterations (longest API calls, GPU idle, extra kernels); common fixes: \
         gc.freeze()/disable gc in the loop, more DataLoader workers with persistent_workers=True, preallocate (expandable segments).",
        "Re-profile: aisp_profile_iterations cv_pct after the first step should fall under 10%.",
    );
    Ok(())
}

fn rule_first_step(cx: &mut Ctx) -> Result<()> {
    let id = "first_step_overhead";
    let mut drafts = Vec::new();
    for (i, d) in cx.devs.iter().enumerate() {
        let Some(sr) = &d.steps else { continue };
        if sr.ranges.len() < 3 {
            continue;
        }
        let first = &sr.ranges[0];
        let mut rest: Vec<i64> = sr.ranges[1..].iter().map(|r| r.dur()).collect();
        let med = stats::median(&mut rest);
        if (first.dur() as f64) < 3.0 * med {
            continue;
        }
        // One-time cost outside the steady window: it matters only for short runs.
        let inside = d.contains(first.start, first.end);
        let dr = Draft::estimate(
            i,
            if inside { first.dur() - med as i64 } else { 0 },
            "the first step's CPU time above the median step, when it lies inside the analysis window",
        );
        let ratio = first.dur() as f64 / med.max(1.0);
        drafts.push(dr.text(
            format!("First step is {ratio:.1}x a typical step (warm-up, lazy module loading)"),
            vec![format!(
                "`{}` takes {} vs a median {} for the other steps; outside the analysis window: {}",
                first.name,
                ms(first.dur()),
                ms(med as i64),
                !inside
            )],
            json!({"first_ns": first.dur(), "median_ns": med, "ratio": ratio, "first": first.name}),
        ));
    }
    if drafts.is_empty() {
        cx.skip(
            id,
            "not_applicable",
            "fewer than 3 steps, or the first step under 3x the median",
        );
        return Ok(());
    }
    cx.emit(
        id,
        drafts,
        "The first iteration loads CUDA modules lazily (cuLibraryLoadData inside the first launch of each kernel), \
         creates cuBLAS handles and warms the allocator: a one-time cost.",
        "Ignore it for long runs and exclude it from timings; for short jobs warm up before timing, or set \
         CUDA_MODULE_LOADING=EAGER to pay it at startup instead.",
        "Compare steps after the first in aisp_profile_iterations (cpu_after_first).",
    );
    Ok(())
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
