//! `compare`: two captures side by side — per-kernel and per-range deltas,
//! utilization, overlap, memory traffic, step time — and a verdict
//! (`improved`, `regressed`, `neutral`) that accounts for run-to-run noise
//! and says how comparable the captures are.
//!
//! The primary metric is the median step time after the first step when both
//! captures have steps; the noise is the standard error of both medians
//! (robust σ = 1.4826 × MAD, SE(median) ≈ 1.2533 σ / √n), and a change must
//! exceed max(2 %, 2 × noise) to count. Without steps the metric is total
//! kernel time with a 5 % noise floor (run-to-run noise is unknown then).

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
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Side {
    pub path: String,
    pub export: ExportVersion,
    pub gpus: Vec<String>,
    pub devices: usize,
    pub kernels: u64,
    pub kernel_time_ns: i64,
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
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Compare {
    pub before: Side,
    pub after: Side,
    /// What the verdict is based on.
    pub metric: String,
    pub before_value_ns: f64,
    pub after_value_ns: f64,
    /// (after − before) / before × 100; negative is faster.
    pub delta_pct: f64,
    /// Estimated run-to-run noise of the metric, %.
    pub noise_pct: f64,
    /// |delta_pct| needed to call a change: max(2, 2 × noise) (5 without steps).
    pub threshold_pct: f64,
    pub verdict: Verdict,
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

struct Facts {
    side: Side,
    kernels: HashMap<String, (u64, i64)>,
    steps_after_first: Vec<i64>,
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
            steps,
            step_median_ns: step_median,
            step_gpu_median_ns: gpu_after.first().copied(),
        },
        kernels,
        steps_after_first: after_first,
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

pub fn compare(before: &Profile, after: &Profile, limit: usize) -> Result<Compare> {
    let b = facts(before)?;
    let a = facts(after)?;
    // Comparability.
    let mut score: f64 = 1.0;
    let mut reasons = Vec::new();
    if before.identity() == after.identity() {
        reasons.push("the same capture on both sides: every delta is zero by construction".into());
    }
    if b.side.export.schema_version != a.side.export.schema_version {
        score *= 0.9;
        reasons.push(format!(
            "export schemas differ ({:?} vs {:?})",
            b.side.export.schema_version, a.side.export.schema_version
        ));
    }
    if b.side.gpus != a.side.gpus {
        score *= 0.5;
        reasons.push(format!(
            "different GPUs: {:?} vs {:?}",
            b.side.gpus, a.side.gpus
        ));
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
    if overlap < 0.95 {
        score *= 0.5 + 0.5 * overlap;
        reasons.push(format!(
            "{:.0}% of kernel time is in kernels both captures share (different kernels: a different code path, precision or library)",
            overlap * 100.0
        ));
    }
    let both_steps = !b.steps_after_first.is_empty() && !a.steps_after_first.is_empty();
    if !both_steps && (b.side.steps > 0 || a.side.steps > 0) {
        score *= 0.6;
        reasons.push("only one capture has step ranges".into());
    }
    if both_steps && b.side.steps != a.side.steps {
        reasons.push(format!(
            "{} vs {} steps captured",
            b.side.steps, a.side.steps
        ));
    }
    if reasons.is_empty() {
        reasons.push("same GPUs, schema, device count and kernels".into());
    }
    let score = (score * 100.0).round() / 100.0;
    let level = if score >= 0.8 {
        "high"
    } else if score >= 0.5 {
        "medium"
    } else {
        "low"
    };
    // Metric and noise.
    let (metric, bv, av, noise, threshold) = if both_steps {
        let bv = b.side.step_median_ns.unwrap_or(0.0);
        let av = a.side.step_median_ns.unwrap_or(0.0);
        let nb = median_rse_pct(&b.steps_after_first).unwrap_or(2.5);
        let na = median_rse_pct(&a.steps_after_first).unwrap_or(2.5);
        let noise = (nb * nb + na * na).sqrt();
        (
            "median CPU step time after the first step".to_string(),
            bv,
            av,
            noise,
            (2.0 * noise).max(2.0),
        )
    } else {
        (
            "total kernel time (no steps in both captures: CPU-side time is not compared)"
                .to_string(),
            b.side.kernel_time_ns as f64,
            a.side.kernel_time_ns as f64,
            2.5,
            5.0,
        )
    };
    let delta_pct = if bv > 0.0 {
        (av - bv) / bv * 100.0
    } else {
        0.0
    };
    let delta_pct = (delta_pct * 100.0).round() / 100.0;
    let verdict = if delta_pct <= -threshold {
        Verdict::Improved
    } else if delta_pct >= threshold {
        Verdict::Regressed
    } else {
        Verdict::Neutral
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
            KernelDelta {
                name: n.clone(),
                before_ns: bt,
                after_ns: at,
                delta_ns: at - bt,
                delta_pct: (bt > 0).then(|| ((at - bt) as f64 / bt as f64 * 1000.0).round() / 10.0),
                before_count: bc,
                after_count: ac,
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
    let summary = format!(
        "{:?}: {} went from {:.3} ms to {:.3} ms ({:+.2}%, noise ±{:.2}%, threshold {:.2}%); comparability {level} ({score})",
        verdict,
        metric,
        bv / 1e6,
        av / 1e6,
        delta_pct,
        noise,
        threshold
    );
    Ok(Compare {
        before: b.side,
        after: a.side,
        metric,
        before_value_ns: bv,
        after_value_ns: av,
        delta_pct,
        noise_pct: (noise * 100.0).round() / 100.0,
        threshold_pct: (threshold * 100.0).round() / 100.0,
        verdict,
        comparability: Comparability {
            score,
            level: level.into(),
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
