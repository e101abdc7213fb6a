//! `compare`: two captures side by side — per-kernel and per-range deltas,
//! utilization, overlap, memory traffic, step time — and a verdict that is
//! normalised per unit of work and says which basis it rests on.
//!
//! Totals are never the basis: two windows of one run hold different amounts
//! of work, so "less kernel time" can mean "less work captured". The bases:
//!
//! - **per step** (NVTX steps on both sides): median CPU step time after the
//!   first step; noise = standard error of both medians (robust σ = 1.4826 ×
//!   MAD, SE(median) ≈ 1.2533 σ / √n); a change must exceed max(2 %, 2 × noise).
//! - **per call**: the after side's time per call of every *identical launch*
//!   (same demangled kernel, grid and block on both sides), weighted by the
//!   before side's call counts: Σ n_b·μ_a / Σ n_b·μ_b − 1. Noise from the
//!   per-launch spread (standard error of each mean); threshold max(2 %, 2 ×
//!   noise). Only used when identical launches cover ≥ 50 % of the before
//!   side's kernel time.
//! - **per second of window**: work done per second of the capture window
//!   (`ANALYSIS_DETAILS` start → stop, else first → last activity), counting
//!   identical launches at the before side's time per call; a 5 % threshold
//!   (partial iterations at the window's edges).
//!
//! Verdict: `not_comparable` when the GPUs differ (both known) or the
//! workloads differ (< 50 % of kernel time in shared kernel names *and* < 50 %
//! of calls in identical launches); with steps on both sides the per-step
//! basis decides, but only when ≥ 80 % of calls are identical launches (else
//! `inconclusive`: the work per step differs); without steps `improved` /
//! `regressed` need per call and per second of window to agree, a flat per
//! call time with a different amount of work per second is `inconclusive`
//! (windows that are cuts of different work). Comparability's score is a
//! summary; the verdict's `verdict_reason` says what decided it.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::iterations;
use super::stats;
use super::summary::NameKey;
use super::{ExportVersion, Profile, Result, Scope};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Improved,
    Regressed,
    Neutral,
    /// The evidence disagrees or does not suffice; `verdict_reason` says why.
    Inconclusive,
    /// Different GPUs or different workloads; `verdict_reason` says which.
    NotComparable,
}

/// Per-unit evidence behind a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    /// `per_step`, `per_step_gpu`, `per_call` or `per_second_of_window`.
    pub basis: String,
    /// What is measured, with its unit.
    pub metric: String,
    pub before: f64,
    pub after: f64,
    /// (after − before) / before × 100.
    pub delta_pct: f64,
    /// Whether a lower or a higher value is better (`lower` / `higher`).
    pub better: String,
    /// Estimated noise of delta_pct; null where it cannot be estimated (a fixed threshold applies).
    pub noise_pct: Option<f64>,
    /// |delta_pct| needed to call a change.
    pub threshold_pct: f64,
    /// What this basis alone says: improved, regressed or neutral.
    pub says: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Side {
    pub path: String,
    pub export: ExportVersion,
    pub gpus: Vec<String>,
    pub devices: usize,
    pub kernels: u64,
    pub kernel_time_ns: i64,
    /// The capture window the per-second basis divides by.
    pub window_ns: i64,
    /// `ANALYSIS_DETAILS` (the recorded trace window) or `activity span` (first → last CUDA event).
    pub window_source: String,
    pub steps: usize,
    /// Median CPU step time after the first step.
    pub step_median_ns: Option<f64>,
    /// Median GPU-projected time per step after the first step.
    pub step_gpu_median_ns: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelDelta {
    pub name: String,
    pub before_ns: i64,
    pub after_ns: i64,
    pub delta_ns: i64,
    /// None when the kernel is new.
    pub delta_pct: Option<f64>,
    pub before_count: u64,
    pub after_count: u64,
    /// Mean time per call on each side, and its change: totals follow the amount of work
    /// captured, time per call follows the speed of the kernel.
    pub before_per_call_ns: Option<f64>,
    pub after_per_call_ns: Option<f64>,
    pub per_call_delta_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RangeDelta {
    pub name: String,
    pub before_cpu_ns: i64,
    pub after_cpu_ns: i64,
    pub before_gpu_ns: i64,
    pub after_gpu_ns: i64,
    pub delta_gpu_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceDelta {
    pub device: i64,
    /// The window both busy figures are over (steady when both have it, else span).
    pub window: String,
    pub busy_pct_before: Option<f64>,
    pub busy_pct_after: Option<f64>,
    pub overlap_pct_before: Option<f64>,
    pub overlap_pct_after: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrafficDelta {
    pub direction: String,
    pub before_bytes: i64,
    pub after_bytes: i64,
    pub before_ns: i64,
    pub after_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Comparability {
    /// 0–1: 1 = same GPUs, schema, workload shape.
    pub score: f64,
    /// `high` (≥ 0.8), `medium` (≥ 0.5) or `low`.
    pub level: String,
    /// true / false when both sides record their GPU models; null when either side does not.
    pub same_gpus: Option<bool>,
    /// Share of kernel time in kernel names both sides ran (the smaller of the two sides), %.
    pub shared_kernel_time_pct: f64,
    /// Share of calls that are identical launches (same demangled kernel, grid and block on
    /// both sides; the smaller of the two sides), %.
    pub identical_launch_calls_pct: f64,
    /// How much the mix of calls over identical launches differs (total variation distance), %:
    /// high means the captures hold different proportions of the same work (different phases).
    pub call_mix_difference_pct: f64,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Compare {
    pub before: Side,
    pub after: Side,
    /// The basis the verdict rests on: `per_step`, `per_call`, `per_call+per_second_of_window`, or
    /// `none` (not comparable).
    pub basis: String,
    /// What the verdict's basis measures (the per-step or per-call metric).
    pub metric: String,
    pub before_value_ns: f64,
    pub after_value_ns: f64,
    /// (after − before) / before × 100 of the basis metric; negative is faster.
    pub delta_pct: f64,
    /// Estimated run-to-run noise of the metric, %.
    pub noise_pct: f64,
    /// |delta_pct| needed to call a change: max(2, 2 × noise).
    pub threshold_pct: f64,
    pub verdict: Verdict,
    /// Why the verdict is what it is, in one sentence with its numbers.
    pub verdict_reason: String,
    /// Every per-unit basis that could be computed (per step, per call, per second of window).
    pub evidence: Vec<Evidence>,
    pub comparability: Comparability,
    /// Kernels that got slower the most, then those that got faster the most.
    pub kernel_regressions: Vec<KernelDelta>,
    pub kernel_improvements: Vec<KernelDelta>,
    pub ranges: Vec<RangeDelta>,
    pub devices: Vec<DeviceDelta>,
    pub memory: Vec<TrafficDelta>,
    /// Rule ids found in only one of the captures (at low severity or above).
    pub findings_resolved: Vec<String>,
    pub findings_new: Vec<String>,
    pub summary: String,
}

/// Steady busy %, span busy %, steady overlap %, span overlap %.
type DeviceFacts = (Option<f64>, Option<f64>, Option<f64>, Option<f64>);

/// An identical launch: demangled name, grid, block.
type LaunchKey = (String, [u32; 3], [u32; 3]);

/// Calls, Σ ns and Σ ns² of one launch key.
#[derive(Default, Clone, Copy)]
struct LaunchStats {
    n: u64,
    sum: f64,
    sumsq: f64,
}

impl LaunchStats {
    fn mean(&self) -> f64 {
        self.sum / self.n as f64
    }
    /// Sample variance of one call's duration.
    fn var(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let n = self.n as f64;
        ((self.sumsq - self.sum * self.sum / n) / (n - 1.0)).max(0.0)
    }
}

struct Facts {
    side: Side,
    kernels: HashMap<String, (u64, i64)>,
    launches: HashMap<LaunchKey, LaunchStats>,
    steps_after_first: Vec<i64>,
    /// GPU-projected time (union of the step's kernels) of the same steps.
    gpu_steps_after_first: Vec<i64>,
    ranges: HashMap<String, (i64, i64)>,
    devices: BTreeMap<i64, DeviceFacts>,
    traffic: BTreeMap<String, (i64, i64)>,
    findings: Vec<String>,
}

fn facts(p: &Profile) -> Result<Facts> {
    let scope = p.resolve(&Scope::default())?;
    let gpus: Vec<String> = super::info::gpus(p)?
        .into_iter()
        .map(|g| g.name.unwrap_or_else(|| "unknown".into()))
        .collect();
    let k = super::kernels::kernels(p, &scope, NameKey::Short, usize::MAX)?;
    let kernels = k
        .rows
        .iter()
        .map(|r| (r.name.clone(), (r.instances, r.total_ns)))
        .collect();
    let it = iterations::iterations(p, &scope, None, usize::MAX)?;
    let mut after_first = Vec::new();
    let mut gpu_after = Vec::new();
    let mut gpu_steps: Vec<i64> = Vec::new();
    let mut steps = 0;
    if it.rule != "kernel_pattern" && it.rule != "none" {
        // Ranks step together: the process with the slowest median step stands for the run.
        let mut best: Option<&iterations::ProcessSteps> = None;
        for ps in &it.processes {
            steps = steps.max(ps.step_count);
            let m = ps.cpu_after_first.as_ref().map(|c| c.median);
            if m.is_some() && best.is_none_or(|b| m > b.cpu_after_first.as_ref().map(|c| c.median))
            {
                best = Some(ps);
            }
        }
        if let Some(ps) = best {
            after_first = ps.steps.iter().skip(1).map(|s| s.cpu_ns).collect();
            gpu_steps = ps.steps.iter().skip(1).map(|s| s.gpu_union_ns).collect();
            if let Some(g) = &ps.gpu_union_after_first {
                gpu_after.push(g.median);
            }
        }
    }
    let mut cpu = after_first.clone();
    let step_median = (!cpu.is_empty()).then(|| stats::median(&mut cpu));
    let nv = super::nvtx::nvtx(
        p,
        &scope,
        &super::nvtx::NvtxOptions {
            limit: usize::MAX,
            max_depth: 1,
            max_children: 1,
            group_numbered: false,
        },
    )?;
    let ranges = nv
        .names
        .iter()
        .map(|n| (n.name.clone(), (n.cpu_total_ns, n.gpu_union_ns)))
        .collect();
    let util = super::utilization::utilization(p, &scope, 1, 0.0)?;
    let ov = super::overlap::overlap(p, &scope)?;
    let mut devices = BTreeMap::new();
    for d in &util.devices {
        let get = |kind| {
            d.windows
                .iter()
                .find(|w| w.window.kind == kind)
                .map(|w| w.busy_pct)
        };
        let o = ov.devices.iter().find(|x| x.device == d.device);
        let og = |kind| {
            o.and_then(|o| o.windows.iter().find(|w| w.window.kind == kind))
                .filter(|w| w.communication_ns > 0)
                .map(|w| w.overlap_pct)
        };
        devices.insert(
            d.device,
            (
                get(super::WindowKind::Steady),
                get(super::WindowKind::Span),
                og(super::WindowKind::Steady),
                og(super::WindowKind::Span),
            ),
        );
    }
    let mut launches: HashMap<LaunchKey, LaunchStats> = HashMap::new();
    for kr in p.kernels()? {
        let e = launches
            .entry((p.string(kr.demangled_name).to_string(), kr.grid, kr.block))
            .or_default();
        let d = kr.dur() as f64;
        e.n += 1;
        e.sum += d;
        e.sumsq += d * d;
    }
    let (window_ns, window_source) = capture_window(p)?;
    let m = super::memory::memory(p, &scope, 0)?;
    let mut traffic: BTreeMap<String, (i64, i64)> = m
        .by_direction
        .iter()
        .map(|d| (d.direction.clone(), (d.bytes, d.time_ns)))
        .collect();
    if m.pageable_async.kinds_recorded {
        traffic.insert(
            "pageable async copies".into(),
            (m.pageable_async.bytes, m.pageable_async.time_ns),
        );
    }
    let findings = super::rules::run(p, &scope)?
        .findings
        .into_iter()
        .filter(|f| f.severity >= super::rules::Severity::Low)
        .map(|f| f.id)
        .collect();
    Ok(Facts {
        side: Side {
            path: p.source().display().to_string(),
            export: p.version().clone(),
            gpus,
            devices: util.devices.len(),
            kernels: k.kernels,
            kernel_time_ns: k.total_ns,
            window_ns,
            window_source,
            steps,
            step_median_ns: step_median,
            step_gpu_median_ns: gpu_after.first().copied(),
        },
        kernels,
        launches,
        steps_after_first: after_first,
        gpu_steps_after_first: gpu_steps,
        ranges,
        devices,
        traffic,
        findings,
    })
}

/// Relative standard error (%) of a median: 1.2533 × 1.4826 × MAD / √n / median.
fn median_rse_pct(v: &[i64]) -> Option<f64> {
    if v.len() < 3 {
        return None;
    }
    let mut x = v.to_vec();
    let med = stats::median(&mut x);
    let mut dev: Vec<i64> = v
        .iter()
        .map(|&a| (a as f64 - med).abs().round() as i64)
        .collect();
    let mad = stats::median(&mut dev);
    let sigma = 1.4826 * mad;
    Some(100.0 * 1.2533 * sigma / (v.len() as f64).sqrt() / med.max(1.0))
}

/// The capture window: `ANALYSIS_DETAILS` start → stop when the export records one that holds
/// every CUDA event, else the first → last CUDA event.
fn capture_window(p: &Profile) -> Result<(i64, String)> {
    let (first, last) = p.activity_bounds()?;
    if let Some(t) = p.schema().exact("ANALYSIS_DETAILS")
        && t.has("startTime")
        && t.has("stopTime")
    {
        let sql = format!("SELECT startTime, stopTime FROM {} LIMIT 1", t.quoted());
        let got: Option<(i64, i64)> = p
            .conn()
            .query_row(&sql, [], |r| Ok((r.get(0)?, r.get(1)?)))
            .ok();
        if let Some((s, e)) = got
            && e > s
            && s <= first
            && last <= e
        {
            return Ok((e - s, "ANALYSIS_DETAILS".into()));
        }
    }
    Ok(((last - first).max(0), "activity span".into()))
}

const MIN_STEPS: usize = 3;
const SAME_WORK_LAUNCH_PCT: f64 = 80.0;
const DIFFERENT_WORKLOAD_PCT: f64 = 50.0;
const PER_CALL_MIN_COVERAGE_PCT: f64 = 50.0;
const PER_SECOND_THRESHOLD_PCT: f64 = 5.0;

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn says(delta_pct: f64, threshold: f64, lower_is_better: bool) -> Verdict {
    let d = if lower_is_better {
        delta_pct
    } else {
        -delta_pct
    };
    if d <= -threshold {
        Verdict::Improved
    } else if d >= threshold {
        Verdict::Regressed
    } else {
        Verdict::Neutral
    }
}

/// The per-call and per-second-of-window evidence over identical launches, and the before
/// side's kernel time those launches cover (%).
fn launch_evidence(b: &Facts, a: &Facts) -> (Option<Evidence>, Option<Evidence>, f64) {
    let shared: Vec<(&LaunchStats, &LaunchStats)> = b
        .launches
        .iter()
        .filter_map(|(k, x)| a.launches.get(k).map(|y| (x, y)))
        .collect();
    let before_total: f64 = b.launches.values().map(|x| x.sum).sum();
    let den: f64 = shared.iter().map(|(x, _)| x.sum).sum();
    let coverage = if before_total > 0.0 {
        100.0 * den / before_total
    } else {
        0.0
    };
    if shared.is_empty() || den <= 0.0 {
        return (None, None, coverage);
    }
    // Σ n_b·μ_a: the before side's calls at the after side's time per call.
    let num: f64 = shared.iter().map(|(x, y)| x.n as f64 * y.mean()).sum();
    if num <= 0.0 {
        return (None, None, coverage);
    }
    let var_num: f64 = shared
        .iter()
        .map(|(x, y)| (x.n as f64).powi(2) * y.var() / y.n as f64)
        .sum();
    let var_den: f64 = shared.iter().map(|(x, _)| x.n as f64 * x.var()).sum();
    let noise = 100.0 * (var_num / (num * num) + var_den / (den * den)).sqrt();
    let delta = round2((num / den - 1.0) * 100.0);
    let threshold = (2.0 * noise).max(2.0);
    let per_call = (coverage >= PER_CALL_MIN_COVERAGE_PCT).then(|| Evidence {
        basis: "per_call".into(),
        metric: "time per call of identical launches (same kernel, grid, block), weighted by the before \
                 side's calls: ns of kernel time for the before side's mix"
            .into(),
        before: den.round(),
        after: num.round(),
        delta_pct: delta,
        better: "lower".into(),
        noise_pct: Some(round2(noise)),
        threshold_pct: round2(threshold),
        says: says(delta, threshold, true),
    });
    // Work per second of window, each call priced at the before side's time per call.
    let work_a: f64 = shared.iter().map(|(x, y)| y.n as f64 * x.mean()).sum();
    let per_second = (b.side.window_ns > 0 && a.side.window_ns > 0).then(|| {
        let rb = den / (b.side.window_ns as f64 / 1e9);
        let ra = work_a / (a.side.window_ns as f64 / 1e9);
        let d = round2((ra / rb - 1.0) * 100.0);
        Evidence {
            basis: "per_second_of_window".into(),
            metric: "work per second of capture window: ns of identical-launch kernel time (priced at the before \
                     side's time per call) per s of window"
                .into(),
            before: rb.round(),
            after: ra.round(),
            delta_pct: d,
            better: "higher".into(),
            noise_pct: None,
            threshold_pct: PER_SECOND_THRESHOLD_PCT,
            says: says(d, PER_SECOND_THRESHOLD_PCT, false),
        }
    });
    (per_call, per_second, coverage)
}

/// Share of calls in identical launches (smaller side) and the total variation distance of
/// the two call mixes over all launch keys, both %.
fn launch_match(b: &Facts, a: &Facts) -> (f64, f64) {
    let calls = |x: &Facts| x.launches.values().map(|v| v.n).sum::<u64>() as f64;
    let (cb, ca) = (calls(b), calls(a));
    if cb == 0.0 || ca == 0.0 {
        return (0.0, 100.0);
    }
    let shared = |x: &Facts, y: &Facts| {
        x.launches
            .iter()
            .filter(|(k, _)| y.launches.contains_key(*k))
            .map(|(_, v)| v.n)
            .sum::<u64>() as f64
    };
    let matched = (shared(b, a) / cb).min(shared(a, b) / ca) * 100.0;
    let mut keys: Vec<&LaunchKey> = b.launches.keys().chain(a.launches.keys()).collect();
    keys.sort();
    keys.dedup();
    let tvd: f64 = keys
        .into_iter()
        .map(|k| {
            let pb = b.launches.get(k).map_or(0.0, |v| v.n as f64 / cb);
            let pa = a.launches.get(k).map_or(0.0, |v| v.n as f64 / ca);
            (pb - pa).abs()
        })
        .sum::<f64>()
        / 2.0;
    (round2(matched), round2(tvd * 100.0))
}

pub fn compare(before: &Profile, after: &Profile, limit: usize) -> Result<Compare> {
    let b = facts(before)?;
    let a = facts(after)?;
    // Comparability.
    let mut score: f64 = 1.0;
    let mut reasons = Vec::new();
    let same_capture = before.identity() == after.identity();
    if same_capture {
        reasons.push("the same capture on both sides: every delta is zero by construction".into());
    }
    if b.side.export.schema_version != a.side.export.schema_version {
        score *= 0.9;
        reasons.push(format!(
            "export schemas differ ({:?} vs {:?})",
            b.side.export.schema_version, a.side.export.schema_version
        ));
    }
    let known = |g: &[String]| !g.is_empty() && g.iter().all(|n| n != "unknown");
    let same_gpus = (known(&b.side.gpus) && known(&a.side.gpus)).then(|| {
        let set = |g: &[String]| {
            let mut v = g.to_vec();
            v.sort();
            v.dedup();
            v
        };
        set(&b.side.gpus) == set(&a.side.gpus)
    });
    match same_gpus {
        Some(false) => {
            score *= 0.5;
            reasons.push(format!(
                "different GPUs: {:?} vs {:?}",
                b.side.gpus, a.side.gpus
            ));
        }
        None => {
            score *= 0.9;
            reasons.push(format!(
                "GPU models not recorded ({:?} vs {:?}): the same hardware is not verified",
                b.side.gpus, a.side.gpus
            ));
        }
        Some(true) => {}
    }
    if b.side.devices != a.side.devices {
        score *= 0.7;
        reasons.push(format!("{} vs {} devices", b.side.devices, a.side.devices));
    }
    let shared = |x: &Facts, y: &Facts| {
        let total: i64 = x.kernels.values().map(|v| v.1).sum();
        let common: i64 = x
            .kernels
            .iter()
            .filter(|(n, _)| y.kernels.contains_key(*n))
            .map(|(_, v)| v.1)
            .sum();
        if total > 0 {
            common as f64 / total as f64
        } else {
            1.0
        }
    };
    let overlap = shared(&b, &a).min(shared(&a, &b));
    let shared_time_pct = round2(overlap * 100.0);
    if overlap < 0.95 {
        score *= 0.5 + 0.5 * overlap;
        reasons.push(format!(
            "{:.0}% of kernel time is in kernels both captures share (different kernels: a different code path, precision or library)",
            overlap * 100.0
        ));
    }
    let (launch_pct, mix_pct) = launch_match(&b, &a);
    if launch_pct < SAME_WORK_LAUNCH_PCT {
        score *= 0.5 + 0.5 * launch_pct / 100.0;
        reasons.push(format!(
            "{launch_pct:.0}% of calls are identical launches (same kernel, grid and block on both sides): the work \
             differs (model size, batch, precision or code path)"
        ));
    }
    // A median over fewer than 3 steps has no noise estimate (and 2-range "families" such as
    // `cublasCreate_v2` are not iterations): the per-step basis needs 3 steps after the first.
    let both_steps =
        b.steps_after_first.len() >= MIN_STEPS && a.steps_after_first.len() >= MIN_STEPS;
    if !both_steps && (b.side.steps > 0 || a.side.steps > 0) {
        score *= 0.6;
        reasons.push(format!(
            "{} vs {} steps: the per-step basis needs {} steps after the first on both sides",
            b.side.steps, a.side.steps, MIN_STEPS
        ));
    }
    if both_steps && b.side.steps != a.side.steps {
        reasons.push(format!(
            "{} vs {} steps captured",
            b.side.steps, a.side.steps
        ));
    }
    if reasons.is_empty() {
        reasons.push("same GPUs, schema, device count, kernels and launch shapes".into());
    }
    let score = (score * 100.0).round() / 100.0;
    let level = if score >= 0.8 {
        "high"
    } else if score >= 0.5 {
        "medium"
    } else {
        "low"
    };
    // Evidence.
    let mut evidence = Vec::new();
    if both_steps {
        let bv = b.side.step_median_ns.unwrap_or(0.0);
        let av = a.side.step_median_ns.unwrap_or(0.0);
        let nb = median_rse_pct(&b.steps_after_first).unwrap_or(2.5);
        let na = median_rse_pct(&a.steps_after_first).unwrap_or(2.5);
        let noise = (nb * nb + na * na).sqrt();
        let threshold = (2.0 * noise).max(2.0);
        let delta = if bv > 0.0 {
            round2((av - bv) / bv * 100.0)
        } else {
            0.0
        };
        evidence.push(Evidence {
            basis: "per_step".into(),
            metric: "median CPU step time after the first step, ns".into(),
            before: bv,
            after: av,
            delta_pct: delta,
            better: "lower".into(),
            noise_pct: Some(round2(noise)),
            threshold_pct: round2(threshold),
            says: says(delta, threshold, true),
        });
    }
    if both_steps {
        // The GPU side of the same steps: a kernel-speed change shows here even when the step
        // is host-bound and its CPU time does not move (supporting evidence, not the verdict).
        let (mut gb, mut ga) = (
            b.gpu_steps_after_first.clone(),
            a.gpu_steps_after_first.clone(),
        );
        let (bv, av) = (stats::median(&mut gb), stats::median(&mut ga));
        if bv > 0.0 {
            let nb = median_rse_pct(&b.gpu_steps_after_first).unwrap_or(2.5);
            let na = median_rse_pct(&a.gpu_steps_after_first).unwrap_or(2.5);
            let noise = (nb * nb + na * na).sqrt();
            let threshold = (2.0 * noise).max(2.0);
            let delta = round2((av - bv) / bv * 100.0);
            evidence.push(Evidence {
                basis: "per_step_gpu".into(),
                metric:
                    "median GPU-projected time per step after the first (union of its kernels), ns"
                        .into(),
                before: bv,
                after: av,
                delta_pct: delta,
                better: "lower".into(),
                noise_pct: Some(round2(noise)),
                threshold_pct: round2(threshold),
                says: says(delta, threshold, true),
            });
        }
    }
    let (per_call, per_second, coverage) = launch_evidence(&b, &a);
    evidence.extend(per_call.iter().cloned());
    evidence.extend(per_second.iter().cloned());
    let step_ev = evidence.iter().find(|e| e.basis == "per_step").cloned();
    let pct = |e: &Evidence| format!("{:+.2}% (threshold {:.2}%)", e.delta_pct, e.threshold_pct);
    let different_workloads =
        shared_time_pct < DIFFERENT_WORKLOAD_PCT && launch_pct < DIFFERENT_WORKLOAD_PCT;
    let (verdict, basis, reason) = if same_capture {
        (
            Verdict::Neutral,
            if both_steps { "per_step" } else { "per_call" },
            "the same capture on both sides".to_string(),
        )
    } else if same_gpus == Some(false) {
        (
            Verdict::NotComparable,
            "none",
            format!(
                "different GPUs ({:?} vs {:?}): a delta would mix the code change with the hardware change",
                b.side.gpus, a.side.gpus
            ),
        )
    } else if different_workloads {
        (
            Verdict::NotComparable,
            "none",
            format!(
                "different workloads: {shared_time_pct:.0}% of kernel time is in shared kernel names and \
                 {launch_pct:.0}% of calls are identical launches (both under {DIFFERENT_WORKLOAD_PCT:.0}%)"
            ),
        )
    } else if let Some(st) = &step_ev {
        if launch_pct < SAME_WORK_LAUNCH_PCT {
            (
                Verdict::Inconclusive,
                "per_step",
                format!(
                    "median step time changed {} but only {launch_pct:.0}% of calls are identical launches (under \
                     {SAME_WORK_LAUNCH_PCT:.0}%): the work per step differs, so the step-time change mixes a change \
                     of work with a change of speed",
                    pct(st)
                ),
            )
        } else {
            let mut r = format!("median step time after the first step changed {}", pct(st));
            if let Some(pc) = &per_call
                && pc.says != Verdict::Neutral
                && pc.says != st.says
            {
                r.push_str(&format!(
                    "; time per call of identical launches changed {}, so the step-time change is not kernel speed \
                     (host, launch or synchronisation time)",
                    pct(pc)
                ));
            }
            (st.says, "per_step", r)
        }
    } else {
        match (&per_call, &per_second) {
            (None, _) => (
                Verdict::Inconclusive,
                "per_call",
                format!(
                    "no per-step basis (a side lacks 3+ steps) and identical launches cover only {coverage:.0}% of the before side's \
                     kernel time (under {PER_CALL_MIN_COVERAGE_PCT:.0}%): no per-unit basis; wrap each iteration \
                     in an NVTX range `step_N`"
                ),
            ),
            (Some(pc), ps) => {
                let rate = ps.as_ref().map_or(Verdict::Neutral, |e| e.says);
                let rate_txt = ps.as_ref().map_or(String::new(), |e| {
                    format!("; work per second of window changed {}", pct(e))
                });
                let agree = match pc.says {
                    Verdict::Improved => rate != Verdict::Regressed,
                    Verdict::Regressed => rate != Verdict::Improved,
                    _ => rate == Verdict::Neutral,
                };
                if agree {
                    (
                        pc.says,
                        "per_call+per_second_of_window",
                        format!(
                            "no per-step basis (a side lacks 3+ steps): time per call changed {}{rate_txt}",
                            pct(pc)
                        ),
                    )
                } else {
                    let mix = if mix_pct > 20.0 {
                        format!(
                            "; the call mix differs by {mix_pct:.0}%, so the windows hold different phases of work"
                        )
                    } else {
                        String::new()
                    };
                    (
                        Verdict::Inconclusive,
                        "per_call+per_second_of_window",
                        format!(
                            "no per-step basis (a side lacks 3+ steps): time per call changed {}{rate_txt}: the windows are cuts of \
                             different work (or the host fed the GPU differently){mix}; compare NVTX steps or whole runs",
                            pct(pc)
                        ),
                    )
                }
            }
        }
    };
    let primary = if basis == "per_step" {
        step_ev.clone()
    } else if basis.starts_with("per_call") {
        per_call.clone()
    } else {
        None
    };
    let (metric, bv, av, delta_pct, noise, threshold) = match &primary {
        Some(e) => (
            e.metric.clone(),
            e.before,
            e.after,
            e.delta_pct,
            e.noise_pct.unwrap_or(0.0),
            e.threshold_pct,
        ),
        None => (
            "none: the captures are not comparable".to_string(),
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
        ),
    };
    // Kernel deltas.
    let mut names: Vec<&String> = b.kernels.keys().chain(a.kernels.keys()).collect();
    names.sort();
    names.dedup();
    let mut deltas: Vec<KernelDelta> = names
        .into_iter()
        .map(|n| {
            let (bc, bt) = b.kernels.get(n).copied().unwrap_or((0, 0));
            let (ac, at) = a.kernels.get(n).copied().unwrap_or((0, 0));
            let per_call = |c: u64, t: i64| (c > 0).then(|| round2(t as f64 / c as f64));
            let (bp, ap) = (per_call(bc, bt), per_call(ac, at));
            KernelDelta {
                name: n.clone(),
                before_ns: bt,
                after_ns: at,
                delta_ns: at - bt,
                delta_pct: (bt > 0).then(|| ((at - bt) as f64 / bt as f64 * 1000.0).round() / 10.0),
                before_count: bc,
                after_count: ac,
                before_per_call_ns: bp,
                after_per_call_ns: ap,
                per_call_delta_pct: bp
                    .zip(ap)
                    .map(|(x, y)| ((y - x) / x * 1000.0).round() / 10.0),
            }
        })
        .collect();
    deltas.sort_by_key(|d| std::cmp::Reverse(d.delta_ns));
    let kernel_regressions: Vec<KernelDelta> = deltas
        .iter()
        .filter(|d| d.delta_ns > 0)
        .take(limit)
        .cloned()
        .collect();
    deltas.sort_by_key(|d| d.delta_ns);
    let kernel_improvements: Vec<KernelDelta> = deltas
        .iter()
        .filter(|d| d.delta_ns < 0)
        .take(limit)
        .cloned()
        .collect();
    let mut rnames: Vec<&String> = b.ranges.keys().chain(a.ranges.keys()).collect();
    rnames.sort();
    rnames.dedup();
    let mut ranges: Vec<RangeDelta> = rnames
        .into_iter()
        .map(|n| {
            let (bc, bg) = b.ranges.get(n).copied().unwrap_or((0, 0));
            let (ac, ag) = a.ranges.get(n).copied().unwrap_or((0, 0));
            RangeDelta {
                name: n.clone(),
                before_cpu_ns: bc,
                after_cpu_ns: ac,
                before_gpu_ns: bg,
                after_gpu_ns: ag,
                delta_gpu_ns: ag - bg,
            }
        })
        .collect();
    ranges.sort_by_key(|r| {
        std::cmp::Reverse((
            r.delta_gpu_ns.abs(),
            (r.after_cpu_ns - r.before_cpu_ns).abs(),
        ))
    });
    ranges.truncate(limit);
    let mut devs: Vec<i64> = b.devices.keys().chain(a.devices.keys()).copied().collect();
    devs.sort_unstable();
    devs.dedup();
    let devices = devs
        .into_iter()
        .map(|d| {
            let x = b.devices.get(&d).copied().unwrap_or_default();
            let y = a.devices.get(&d).copied().unwrap_or_default();
            let steady = x.0.is_some() && y.0.is_some();
            DeviceDelta {
                device: d,
                window: if steady { "steady" } else { "span" }.into(),
                busy_pct_before: if steady { x.0 } else { x.1 },
                busy_pct_after: if steady { y.0 } else { y.1 },
                overlap_pct_before: if steady { x.2 } else { x.3 },
                overlap_pct_after: if steady { y.2 } else { y.3 },
            }
        })
        .collect();
    let mut dirs: Vec<&String> = b.traffic.keys().chain(a.traffic.keys()).collect();
    dirs.sort();
    dirs.dedup();
    let memory = dirs
        .into_iter()
        .map(|d| {
            let x = b.traffic.get(d).copied().unwrap_or_default();
            let y = a.traffic.get(d).copied().unwrap_or_default();
            TrafficDelta {
                direction: d.clone(),
                before_bytes: x.0,
                after_bytes: y.0,
                before_ns: x.1,
                after_ns: y.1,
            }
        })
        .collect();
    let findings_resolved: Vec<String> = b
        .findings
        .iter()
        .filter(|f| !a.findings.contains(f))
        .cloned()
        .collect();
    let findings_new: Vec<String> = a
        .findings
        .iter()
        .filter(|f| !b.findings.contains(f))
        .cloned()
        .collect();
    let summary = match verdict {
        Verdict::NotComparable => {
            format!("not comparable: {reason}; comparability {level} ({score})")
        }
        _ => format!(
            "{}: {reason} [basis {basis}]; comparability {level} ({score})",
            match verdict {
                Verdict::Improved => "improved",
                Verdict::Regressed => "regressed",
                Verdict::Neutral => "neutral",
                _ => "inconclusive",
            }
        ),
    };
    Ok(Compare {
        before: b.side,
        after: a.side,
        basis: basis.into(),
        metric,
        before_value_ns: bv,
        after_value_ns: av,
        delta_pct,
        noise_pct: noise,
        threshold_pct: threshold,
        verdict,
        verdict_reason: reason,
        evidence,
        comparability: Comparability {
            score,
            level: level.into(),
            same_gpus,
            shared_kernel_time_pct: shared_time_pct,
            identical_launch_calls_pct: launch_pct,
            call_mix_difference_pct: mix_pct,
            reasons,
        },
        kernel_regressions,
        kernel_improvements,
        ranges,
        devices,
        memory,
        findings_resolved,
        findings_new,
        summary,
    })
}
