//! Wait versus transfer inside collectives, from the ranks' own kernel
//! durations — no clock alignment needed.
//!
//! In an all-reduce, all-gather, reduce-scatter or all-to-all, no rank can
//! finish before the last one has arrived, and every rank finishes within the
//! protocol's last exchange: the instance's ends coincide. So the rank whose
//! kernel is shortest arrived last, and its duration is the transfer; every
//! other rank's extra duration is time spent waiting for it. Matching is by
//! kind and occurrence (the n-th all-reduce of every rank is the same
//! collective, after the set's instance shift). Broadcasts, sends and
//! receives end at different times on different ranks and stay unsplit.
//!
//! Lateness is counted statistically over the steady instances: a rank that
//! arrives last far more often than chance (1/n of the decided instances,
//! three standard deviations) is a straggler even when each lead is small.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::nccl::Collective;
use super::super::{Profile, Result};
use super::ops::{DeviceOps, OpKind};
use super::{CollectiveWaits, DeviceLedger};

/// A last arrival is decided when the last rank's kernel is at least this much shorter than the next one.
pub const DECIDED_NS: i64 = 2_000;

/// The collective kernels of one rank, and its steady window.
#[derive(Debug, Clone, Default)]
pub struct RankCollectives {
    /// (kind, start, end, kernel index) in start order.
    pub kernels: Vec<(Collective, i64, i64, u32)>,
    /// The rank's steady window `[start, end)` on its own clock.
    pub steady: (i64, i64),
}

/// The collectives of a device's operations.
pub fn collectives_of(
    p: &Profile,
    d: &DeviceOps,
    ledger: &DeviceLedger,
) -> Result<RankCollectives> {
    let kernels = p.kernels()?;
    Ok(RankCollectives {
        kernels: d
            .ops
            .iter()
            .filter(|o| o.kind == OpKind::Collective)
            .map(|o| {
                let k = &kernels[o.index as usize];
                (
                    Collective::of(p.string(k.short_name)),
                    o.start,
                    o.end,
                    o.index,
                )
            })
            .collect(),
        steady: (ledger.steady.start_ns, ledger.steady.end_ns),
    })
}

/// Who arrived last, over the steady instances matched on every rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Arrivals {
    /// Ranks (positions in the set) in order.
    pub ranks: usize,
    /// What to call each position (`rank 2`, `device 1`).
    #[serde(default)]
    pub names: Vec<String>,
    /// Steady instances matched on every rank.
    pub instances: u64,
    /// Instances whose last rank is decided (its kernel at least 2 µs shorter than the next one).
    pub decided: u64,
    /// Per rank: decided instances it was last at.
    pub last: Vec<u64>,
    /// Per rank: median lead when last (the next rank's duration minus its own), ns.
    pub lead_median_ns: Vec<i64>,
    /// Per rank: Σ of those leads over the instances it was last at, ns.
    pub lead_total_ns: Vec<i64>,
    /// Per rank: Σ over steady instances of its wait (its duration minus the instance's shortest), ns.
    pub wait_ns: Vec<i64>,
    /// The most last-arrivals chance allows for one rank (1/n of the decided, plus three standard deviations).
    pub chance_limit: f64,
    /// Ranks last more often than chance allows.
    pub stragglers: Vec<usize>,
    /// Warm-up and set-up instances (outside some rank's steady window), matched but not counted above.
    pub outside_steady: u64,
}

/// Per rank, the waits of its collective kernels; and the arrival statistics.
#[derive(Debug, Clone, Default)]
pub struct WaitSplit {
    pub waits: Vec<CollectiveWaits>,
    pub arrivals: Arrivals,
}

fn synchronizing(kind: Collective) -> bool {
    matches!(
        kind,
        Collective::AllReduce
            | Collective::AllGather
            | Collective::ReduceScatter
            | Collective::AllToAll
    )
}

/// Match instances across ranks (rank `r`'s occurrence `j + shifts[r]` is instance `j`) and split them.
pub fn split(ranks: &[RankCollectives], shifts: &[i64]) -> WaitSplit {
    let n = ranks.len();
    let mut out = WaitSplit {
        waits: vec![CollectiveWaits::default(); n],
        arrivals: Arrivals {
            ranks: n,
            last: vec![0; n],
            lead_median_ns: vec![0; n],
            lead_total_ns: vec![0; n],
            wait_ns: vec![0; n],
            ..Arrivals::default()
        },
    };
    if n < 2 {
        return out;
    }
    let mut leads: Vec<Vec<i64>> = vec![Vec::new(); n];
    let kinds = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllToAll,
    ];
    for kind in kinds {
        let seqs: Vec<Vec<&(Collective, i64, i64, u32)>> = ranks
            .iter()
            .map(|r| r.kernels.iter().filter(|k| k.0 == kind).collect())
            .collect();
        let count = seqs.iter().map(Vec::len).max().unwrap_or(0) as i64;
        for j in 0..count {
            let mut inst = Vec::with_capacity(n);
            for (r, seq) in seqs.iter().enumerate() {
                let at = j + shifts.get(r).copied().unwrap_or(0);
                match (at >= 0).then(|| seq.get(at as usize)).flatten() {
                    Some(k) => inst.push(**k),
                    None => break,
                }
            }
            if inst.len() != n {
                continue;
            }
            debug_assert!(synchronizing(kind));
            let durs: Vec<i64> = inst.iter().map(|k| k.2 - k.1).collect();
            let (last, &min) = durs
                .iter()
                .enumerate()
                .min_by_key(|(i, d)| (**d, *i))
                .unwrap_or((0, &0));
            for (r, k) in inst.iter().enumerate() {
                out.waits[r].insert(k.3, durs[r] - min);
            }
            let steady = inst
                .iter()
                .zip(ranks)
                .all(|(k, r)| k.1 >= r.steady.0 && k.1 < r.steady.1);
            if !steady {
                out.arrivals.outside_steady += 1;
                continue;
            }
            out.arrivals.instances += 1;
            for (w, d) in out.arrivals.wait_ns.iter_mut().zip(&durs) {
                *w += d - min;
            }
            let second = durs
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != last)
                .map(|(_, d)| *d)
                .min()
                .unwrap_or(min);
            if second - min >= DECIDED_NS {
                out.arrivals.decided += 1;
                out.arrivals.last[last] += 1;
                leads[last].push(second - min);
            }
        }
    }
    let a = &mut out.arrivals;
    for (r, l) in leads.iter_mut().enumerate() {
        a.lead_total_ns[r] = l.iter().sum();
        if !l.is_empty() {
            l.sort_unstable();
            a.lead_median_ns[r] = l[l.len() / 2];
        }
    }
    let p = 1.0 / n as f64;
    let m = a.decided as f64;
    a.chance_limit = ((m * p + 3.0 * (m * p * (1.0 - p)).sqrt()) * 100.0).round() / 100.0;
    a.stragglers = (0..n)
        .filter(|&r| a.decided >= 5 && a.last[r] as f64 > a.chance_limit)
        .collect();
    out
}

/// Several ranks in one export (one clock): split their collectives and apply the waits to their ledgers.
pub fn split_within(
    p: &Profile,
    all: &[DeviceOps],
    devices: &mut [DeviceLedger],
) -> Result<Option<Arrivals>> {
    let with: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].ops.iter().any(|o| o.kind == OpKind::Collective))
        .collect();
    if with.len() < 2 {
        return Ok(None);
    }
    let mut ranks = Vec::new();
    for &i in &with {
        ranks.push(collectives_of(p, &all[i], &devices[i])?);
    }
    let mut s = split(&ranks, &vec![0; ranks.len()]);
    for (k, &i) in with.iter().enumerate() {
        devices[i].apply_waits(&s.waits[k]);
    }
    s.arrivals.names = with
        .iter()
        .map(|&i| format!("device {}", devices[i].device))
        .collect();
    Ok(Some(s.arrivals))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(durs: &[i64], start: i64) -> RankCollectives {
        RankCollectives {
            kernels: durs
                .iter()
                .enumerate()
                .map(|(i, &d)| {
                    let s = start + i as i64 * 1_000_000;
                    (Collective::AllReduce, s, s + d, i as u32)
                })
                .collect(),
            steady: (0, i64::MAX),
        }
    }

    #[test]
    fn the_shortest_kernel_arrived_last_and_the_others_waited_for_it() {
        // Rank 2 is always last by 37 µs: each lead is small, the pattern is not.
        let r0 = rank(&[100_000; 20], 0);
        let r1 = rank(&[99_000; 20], 0);
        let r2 = rank(&[62_000; 20], 0);
        let s = split(&[r0, r1, r2], &[0, 0, 0]);
        assert_eq!(s.waits[0][&0], 38_000);
        assert_eq!(s.waits[2][&0], 0);
        assert_eq!(s.arrivals.instances, 20);
        assert_eq!(s.arrivals.last, vec![0, 0, 20]);
        assert_eq!(s.arrivals.lead_median_ns[2], 37_000);
        assert_eq!(s.arrivals.stragglers, vec![2]);
    }

    #[test]
    fn a_balanced_set_names_no_straggler() {
        // Arrival order rotates: each rank last a third of the time.
        let durs = |k: usize| -> Vec<i64> {
            (0..30)
                .map(|i| {
                    if i % 3 == k {
                        50_000
                    } else {
                        60_000 + (i as i64 % 2) * 3_000
                    }
                })
                .collect()
        };
        let s = split(
            &[rank(&durs(0), 0), rank(&durs(1), 0), rank(&durs(2), 0)],
            &[0, 0, 0],
        );
        assert_eq!(s.arrivals.last, vec![10, 10, 10]);
        assert!(s.arrivals.stragglers.is_empty());
    }

    #[test]
    fn instances_outside_the_steady_window_are_split_but_not_counted() {
        let mut r0 = rank(&[100_000, 100_000], 0);
        let r1 = rank(&[50_000, 50_000], 0);
        r0.steady = (1_000_000, i64::MAX);
        let s = split(&[r0, r1], &[0, 0]);
        assert_eq!(s.waits[0][&0], 50_000);
        assert_eq!(s.arrivals.instances, 1);
        assert_eq!(s.arrivals.outside_steady, 1);
    }
}
