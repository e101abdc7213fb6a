//! Two Nsight Compute results of the same kernels, before and after a
//! change: per kernel name, the mean of each metric over its launches on
//! either side, the deltas, and a verdict on duration.
//!
//! A kernel is faster or slower when its mean duration moved by more than
//! [`NOISE_PCT`] (ncu replays each launch under the same conditions, but
//! without locked clocks a few percent move between runs); otherwise
//! unchanged. Kernels on one side only are listed, never dropped.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use super::{KernelRecord, NcuSummary};

/// Duration changes within ± this percentage are "unchanged".
pub const NOISE_PCT: f64 = 5.0;

/// One metric on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Delta {
    pub metric: String,
    pub before: f64,
    pub after: f64,
    /// after − before.
    pub change: f64,
    /// (after − before) ÷ before, % (absent when before is 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct KernelDelta {
    pub kernel_name: String,
    pub launches_before: u64,
    pub launches_after: u64,
    /// `faster`, `slower`, `unchanged` or `not_comparable` (no duration on a side).
    pub verdict: String,
    /// The duration change and the metrics that moved most, in one sentence.
    pub verdict_reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// Mean per launch; time in ns, throughput and occupancy in %, DRAM in GB/s and MB.
    pub deltas: Vec<Delta>,
    /// Top warp stall reason before → after (full set only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_stall: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct NcuComparison {
    /// Kernels on both sides, by the time they took before, largest first.
    pub kernels: Vec<KernelDelta>,
    pub only_before: Vec<String>,
    pub only_after: Vec<String>,
    /// Σ duration of the matched kernels, ns.
    pub matched_before_ns: f64,
    pub matched_after_ns: f64,
    /// `faster`, `slower`, `unchanged` or `not_comparable` over the matched kernels.
    pub verdict: String,
    pub verdict_reason: String,
}

fn mean(ks: &[&KernelRecord], f: impl Fn(&KernelRecord) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = ks.iter().filter_map(|k| f(k)).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn group(s: &NcuSummary) -> BTreeMap<String, Vec<&KernelRecord>> {
    let mut m: BTreeMap<String, Vec<&KernelRecord>> = BTreeMap::new();
    for k in &s.kernels {
        m.entry(k.kernel_name.clone()).or_default().push(k);
    }
    m
}

type Getter = fn(&KernelRecord) -> Option<f64>;

const METRICS: &[(&str, Getter)] = &[
    ("duration_ns", |k| k.duration_ns),
    ("sm_throughput_pct", |k| k.sm_throughput_pct),
    ("memory_throughput_pct", |k| k.memory_throughput_pct),
    ("dram_throughput_pct", |k| k.dram_throughput_pct),
    ("achieved_occupancy_pct", |k| k.achieved_occupancy_pct),
    ("dram_bandwidth_gb_per_s", |k| k.dram_bandwidth_gb_per_s),
    ("dram_mb", |k| {
        Some(k.dram_bandwidth_gb_per_s? * k.duration_ns? / 1e3)
    }),
    ("l1_hit_rate_pct", |k| k.l1_hit_rate_pct),
    ("l2_hit_rate_pct", |k| k.l2_hit_rate_pct),
    ("registers_per_thread", |k| k.registers_per_thread),
];

fn pct(before: f64, after: f64) -> Option<f64> {
    (before != 0.0).then(|| 100.0 * (after - before) / before)
}

fn verdict(before: Option<f64>, after: Option<f64>) -> (&'static str, Option<f64>) {
    match (before, after) {
        (Some(b), Some(a)) if b > 0.0 && a > 0.0 => {
            let p = 100.0 * (a - b) / b;
            let v = if p < -NOISE_PCT {
                "faster"
            } else if p > NOISE_PCT {
                "slower"
            } else {
                "unchanged"
            };
            (v, Some(b / a))
        }
        _ => ("not_comparable", None),
    }
}

/// Compare two summaries kernel by kernel (by name).
pub fn compare(before: &NcuSummary, after: &NcuSummary) -> NcuComparison {
    let (b, a) = (group(before), group(after));
    let mut kernels = Vec::new();
    let (mut tb, mut ta) = (0.0, 0.0);
    let mut all_matched_timed = true;
    for (name, kb) in &b {
        let Some(ka) = a.get(name) else { continue };
        let mut deltas = Vec::new();
        for (metric, get) in METRICS {
            if let (Some(x), Some(y)) = (mean(kb, get), mean(ka, get)) {
                deltas.push(Delta {
                    metric: metric.to_string(),
                    before: x,
                    after: y,
                    change: y - x,
                    change_pct: pct(x, y),
                });
            }
        }
        let db = mean(kb, |k| k.duration_ns);
        let da = mean(ka, |k| k.duration_ns);
        let (v, speedup) = verdict(db, da);
        if let (Some(x), Some(y)) = (db, da) {
            tb += x * kb.len() as f64;
            ta += y * ka.len() as f64;
        } else {
            all_matched_timed = false;
        }
        // The metrics (other than duration) that moved most, in points or %.
        let mut moved: Vec<&Delta> = deltas
            .iter()
            .filter(|d| d.metric != "duration_ns" && d.metric != "dram_bandwidth_gb_per_s")
            .filter(|d| {
                if d.metric.ends_with("_pct") {
                    d.change.abs() >= 5.0
                } else {
                    d.change_pct.is_some_and(|p| p.abs() >= 10.0)
                }
            })
            .collect();
        moved.sort_by(|x, y| {
            let m = |d: &Delta| {
                if d.metric.ends_with("_pct") {
                    d.change.abs()
                } else {
                    d.change_pct.unwrap_or(0.0).abs()
                }
            };
            m(y).total_cmp(&m(x))
        });
        let moves: Vec<String> = moved
            .iter()
            .take(3)
            .map(|d| {
                if d.metric.ends_with("_pct") {
                    format!("{} {:.1} → {:.1}", d.metric, d.before, d.after)
                } else {
                    format!("{} {:+.0} %", d.metric, d.change_pct.unwrap_or(0.0))
                }
            })
            .collect();
        let reason = match (db, da) {
            (Some(x), Some(y)) => format!(
                "mean duration {:.1} → {:.1} µs ({:+.1} %){}",
                x / 1e3,
                y / 1e3,
                100.0 * (y - x) / x,
                if moves.is_empty() {
                    String::new()
                } else {
                    format!("; {}", moves.join(", "))
                }
            ),
            _ => "no duration on one side".into(),
        };
        let stall = |ks: &[&KernelRecord]| {
            ks.first()
                .and_then(|k| k.warp_stalls.first())
                .map(|s| s.reason.clone())
        };
        let top_stall = match (stall(kb), stall(ka)) {
            (Some(x), Some(y)) => Some(format!("{x} → {y}")),
            _ => None,
        };
        kernels.push(KernelDelta {
            kernel_name: name.clone(),
            launches_before: kb.len() as u64,
            launches_after: ka.len() as u64,
            verdict: v.into(),
            verdict_reason: reason,
            speedup,
            deltas,
            top_stall,
        });
    }
    kernels.sort_by(|x, y| {
        let d = |k: &KernelDelta| {
            k.deltas
                .iter()
                .find(|d| d.metric == "duration_ns")
                .map(|d| d.before * k.launches_before as f64)
                .unwrap_or(0.0)
        };
        d(y).total_cmp(&d(x))
    });
    let only_before: Vec<String> = b.keys().filter(|n| !a.contains_key(*n)).cloned().collect();
    let only_after: Vec<String> = a.keys().filter(|n| !b.contains_key(*n)).cloned().collect();
    let (verdict, reason) = if kernels.is_empty() {
        (
            "not_comparable".to_string(),
            "no kernel name appears in both results".to_string(),
        )
    } else if !all_matched_timed {
        (
            "not_comparable".into(),
            "a matched kernel has no duration on one side".into(),
        )
    } else {
        let (v, _) = verdict(Some(tb), Some(ta));
        (
            v.to_string(),
            format!(
                "{} matched kernels took {:.1} µs before and {:.1} µs after ({:+.1} %, noise band ±{NOISE_PCT} %){}",
                kernels.len(),
                tb / 1e3,
                ta / 1e3,
                100.0 * (ta - tb) / tb,
                if only_before.is_empty() && only_after.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} kernels only before and {} only after are not in the sum",
                        only_before.len(),
                        only_after.len()
                    )
                }
            ),
        )
    };
    NcuComparison {
        kernels,
        only_before,
        only_after,
        matched_before_ns: tb,
        matched_after_ns: ta,
        verdict,
        verdict_reason: reason,
    }
}
