//! Cross-rank answers from aligned digests: per-rank figures, arrival skew
//! versus transfer per collective, stragglers with evidence, imbalance, and
//! the rank × step heat map.
//!
//! Per collective instance (kind, seq) present on every rank, with `a_r` the
//! aligned start of rank r's kernel (its **arrival**: the kernel cannot finish
//! before every rank has joined) and `L = max a_r` the last arrival:
//! - **wait** of rank r = L − a_r (its kernel runs, waiting for the last rank);
//! - **skew** = L − min a_r;
//! - **transfer** = median over ranks of (end_r − L): the time moving data once everyone is there;
//! - the **straggler** of the instance is the rank that arrived last, counted
//!   only when its lateness over the next-latest rank exceeds the clock residual;
//! - **exposed wait** of rank r = max(0, wait − compute overlapping its
//!   kernel): the part of the wait not hidden behind its own compute (compute
//!   overlapping the kernel is assumed to fall in the wait first, so this is a
//!   lower bound).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::align::Alignment;
use super::digest::RankDigest;
use crate::profile::nccl::{Collective, bandwidth_gb_per_s};

/// Figures of one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankRow {
    pub rank: u32,
    pub hostname: Option<String>,
    pub device: i64,
    pub pid: i64,
    pub file: String,
    /// Clock offset of the rank's export (ns added to its timestamps).
    pub offset_ns: i64,
    pub steps: usize,
    /// Median CPU step time after the first step (the first holds warm-up).
    pub step_median_ns: Option<i64>,
    /// Median GPU-projected step time after the first step.
    pub step_gpu_median_ns: Option<i64>,
    /// The window the next figures are over: `steady` when there are steps, else `span`.
    pub window: String,
    pub window_ns: i64,
    pub busy_ns: i64,
    pub busy_pct: f64,
    pub compute_ns: i64,
    pub communication_ns: i64,
    pub exposed_communication_ns: i64,
    /// Σ over matched collectives of the time this rank waited for the last arrival.
    pub collective_wait_ns: i64,
    /// The part of that wait not hidden behind the rank's compute.
    pub exposed_wait_ns: i64,
    /// Collectives where this rank arrived last (beyond the clock residual).
    pub last_arrivals: usize,
}

/// Skew and transfer of one collective kind over its matched instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollectiveSkew {
    pub kind: Collective,
    /// Instances present on every rank.
    pub instances: usize,
    /// Σ over instances of the mean wait per rank (GPU time per device spent waiting).
    pub wait_per_device_ns: i64,
    /// Σ of the mean exposed wait per rank.
    pub exposed_wait_per_device_ns: i64,
    /// Σ over instances of transfer time.
    pub transfer_ns: i64,
    /// wait / (wait + transfer) × 100.
    pub skew_share_pct: f64,
    /// Median and maximum arrival skew (last − first arrival).
    pub skew_median_ns: i64,
    pub skew_max_ns: i64,
    /// Instances whose skew is below the clock residual (no conclusion drawn).
    pub below_residual: usize,
    /// Σ bytes when sizes are recorded, and the bus bandwidth over transfer time.
    pub bytes: Option<i64>,
    pub bus_gb_per_s: Option<f64>,
}

/// A rank that arrives last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Straggler {
    pub rank: u32,
    pub hostname: Option<String>,
    /// Instances where it arrived last, and of how many matched.
    pub last_arrivals: usize,
    pub of_instances: usize,
    /// Median lateness over the next-latest rank when it was last.
    pub lateness_median_ns: i64,
    /// Σ lateness over the next-latest rank: the time per device the collectives
    /// would finish earlier if it arrived with the others (critical-path time).
    pub lateness_total_ns: i64,
    /// Σ over the other ranks of the time they waited for it (GPU time, all devices).
    pub wait_caused_ns: i64,
    /// Its compute time minus the median rank's, over the same window.
    pub compute_excess_ns: i64,
    /// Its median step time minus the median rank's.
    pub step_excess_ns: Option<i64>,
}

/// Spread of one per-rank figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Imbalance {
    pub figure: String,
    pub min: i64,
    pub min_rank: u32,
    pub median: i64,
    pub max: i64,
    pub max_rank: u32,
    /// (max − median) / median × 100.
    pub max_over_median_pct: f64,
}

/// Ranks × steps of one figure (aligned by step index).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HeatMap {
    /// `gpu_union_ns` (GPU-projected step time) or `cpu_ns`.
    pub figure: String,
    pub ranks: Vec<u32>,
    pub steps: Vec<String>,
    /// values[rank row][step column]; null where a rank lacks the step.
    pub values: Vec<Vec<Option<i64>>>,
    /// Rows or columns left out to keep the answer small.
    pub truncated: bool,
}

/// A node whose ranks are the late ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SlowNode {
    pub hostname: String,
    pub ranks: Vec<u32>,
    /// Share of the collective instances with skew above the residual at which at least two of this
    /// host's ranks arrived after every rank of the other hosts (by more than the residual).
    pub last_arrival_share_pct: f64,
    /// Its share of the ranks.
    pub rank_share_pct: f64,
    /// Σ over those instances of the host's last arrival minus the other hosts' last arrival.
    pub lateness_total_ns: i64,
}

/// The cross-rank answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CrossRank {
    pub ranks: Vec<RankRow>,
    pub collectives: Vec<CollectiveSkew>,
    pub stragglers: Vec<Straggler>,
    pub slow_nodes: Vec<SlowNode>,
    pub imbalance: Vec<Imbalance>,
    pub heat_map: Option<HeatMap>,
    /// The finest time difference this answer draws conclusions from.
    pub resolution_ns: Option<i64>,
    pub notes: Vec<String>,
}

/// A per-rank figure the imbalance summary spreads.
type Figure = fn(&RankRow) -> Option<i64>;

fn median_i64(v: &mut [i64]) -> i64 {
    v.sort_unstable();
    match v.len() {
        0 => 0,
        n if n % 2 == 1 => v[n / 2],
        n => ((v[n / 2 - 1] as i128 + v[n / 2] as i128) / 2) as i64,
    }
}

fn pct(part: i64, whole: i64) -> f64 {
    if whole <= 0 {
        0.0
    } else {
        (part as f64 * 10000.0 / whole as f64).round() / 100.0
    }
}

/// Heat map limits: the answer stays readable for an agent.
const HEAT_MAX_RANKS: usize = 128;
const HEAT_MAX_STEPS: usize = 64;

/// Compute the cross-rank answer.
pub fn cross_rank(digests: &[RankDigest], alignment: &Alignment) -> CrossRank {
    let mut notes = Vec::new();
    let mut ds: Vec<&RankDigest> = digests.iter().collect();
    ds.sort_by_key(|d| d.identity.rank);
    let n = ds.len();
    let offsets: Vec<i64> = ds
        .iter()
        .map(|d| alignment.offset_of(&d.identity.file))
        .collect();
    // The clock residual bounds every conclusion; without a refined alignment none is drawn.
    let resolution = alignment.residual_ns.map(|r| r.max(1_000));
    if n > 1 && resolution.is_none() {
        notes.push(
            "clocks could only be aligned by session start times (utcEpochNs, wrong by milliseconds): \
             no arrival skew, straggler or wait is concluded"
                .into(),
        );
    }
    let mut wait = vec![0i64; n];
    let mut exposed_wait = vec![0i64; n];
    let mut last = vec![0usize; n];
    let mut lateness: Vec<Vec<i64>> = vec![Vec::new(); n];
    let mut caused = vec![0i64; n];
    // Hosts: a slow node shows as several of one host's ranks arriving after every other host's
    // ranks; they arrive close together, so no one of them leads the next-latest rank by more
    // than the residual and the per-rank count above never sees them.
    let mut host_names: Vec<String> = Vec::new();
    let host_of: Vec<Option<usize>> = ds
        .iter()
        .map(|d| {
            d.identity.hostname.as_ref().map(|h| {
                host_names.iter().position(|x| x == h).unwrap_or_else(|| {
                    host_names.push(h.clone());
                    host_names.len() - 1
                })
            })
        })
        .collect();
    let mut host_last = vec![0usize; host_names.len()];
    let mut host_lateness = vec![0i64; host_names.len()];
    let mut above_residual = 0usize;
    let mut collectives = Vec::new();
    let mut matched_total = 0usize;
    if n > 1
        && let Some(res) = resolution
    {
        // Instances by kind: per rank, index by seq.
        let mut kinds: BTreeMap<Collective, usize> = BTreeMap::new();
        for d in &ds {
            let mut per: BTreeMap<Collective, usize> = BTreeMap::new();
            for c in &d.collectives {
                *per.entry(c.kind).or_default() += 1;
            }
            for (k, c) in per {
                kinds.entry(k).and_modify(|m| *m = (*m).min(c)).or_insert(c);
            }
        }
        kinds.retain(|k, _| {
            ds.iter()
                .all(|d| d.collectives.iter().any(|c| c.kind == *k))
        });
        let seq_shift: Vec<i64> = ds
            .iter()
            .map(|d| {
                alignment
                    .domains
                    .iter()
                    .find(|c| c.file == d.identity.file)
                    .map_or(0, |c| c.seq_shift)
            })
            .collect();
        for (kind, count) in kinds {
            let rows: Vec<BTreeMap<u32, &super::digest::CollectiveRow>> = ds
                .iter()
                .map(|d| {
                    d.collectives
                        .iter()
                        .filter(|c| c.kind == kind)
                        .map(|c| (c.seq, c))
                        .collect()
                })
                .collect();
            let mut skews = Vec::new();
            let (mut wsum, mut ewsum, mut tsum, mut below, mut bytes) =
                (0i64, 0i64, 0i64, 0, None::<i64>);
            let mut instances = 0;
            for seq in 0..count as i64 {
                let mut arr = Vec::with_capacity(n);
                for (r, row) in rows.iter().enumerate() {
                    let s = seq + seq_shift[r];
                    match (s >= 0).then(|| row.get(&(s as u32))).flatten() {
                        Some(c) => arr.push((
                            c.start_ns + offsets[r],
                            c.end_ns + offsets[r],
                            c.compute_overlap_ns,
                            c.bytes,
                        )),
                        None => break,
                    }
                }
                if arr.len() != n {
                    continue;
                }
                instances += 1;
                let l = arr.iter().map(|a| a.0).max().unwrap_or(0);
                let first = arr.iter().map(|a| a.0).min().unwrap_or(0);
                let skew = l - first;
                skews.push(skew);
                let mut transfers: Vec<i64> = arr.iter().map(|a| (a.1 - l).max(0)).collect();
                let transfer = median_i64(&mut transfers);
                tsum += transfer;
                if let Some(b) = arr[0].3 {
                    bytes = Some(bytes.unwrap_or(0) + b);
                }
                if skew <= res {
                    below += 1;
                    continue;
                }
                let (mut w_inst, mut ew_inst) = (0i64, 0i64);
                for (r, a) in arr.iter().enumerate() {
                    let w = l - a.0;
                    let ew = (w - a.2).max(0);
                    wait[r] += w;
                    exposed_wait[r] += ew;
                    w_inst += w;
                    ew_inst += ew;
                }
                wsum += w_inst / n as i64;
                ewsum += ew_inst / n as i64;
                // The last rank, and its lead over the next-latest.
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by_key(|&r| std::cmp::Reverse(arr[r].0));
                let (lr, second) = (order[0], arr[order[1]].0);
                let late = l - second;
                if late > res {
                    last[lr] += 1;
                    lateness[lr].push(late);
                    caused[lr] += arr.iter().map(|a| l - a.0).sum::<i64>();
                }
                above_residual += 1;
                if host_names.len() > 1
                    && let Some(h) = host_of[lr]
                {
                    // The last rank's host was late as a host when its second-latest rank too
                    // arrived after every rank of the other hosts, by more than the residual.
                    let others = (0..n)
                        .filter(|&r| host_of[r] != Some(h))
                        .map(|r| arr[r].0)
                        .max();
                    let second_of_host = order.iter().skip(1).find(|&&r| host_of[r] == Some(h));
                    if let (Some(others), Some(&r2)) = (others, second_of_host)
                        && arr[r2].0 - others > res
                    {
                        host_last[h] += 1;
                        host_lateness[h] += l - others;
                    }
                }
            }
            matched_total = matched_total.max(instances);
            if instances == 0 {
                continue;
            }
            let skew_max = skews.iter().copied().max().unwrap_or(0);
            let skew_median = median_i64(&mut skews);
            let bus = bytes.filter(|_| tsum > 0).map(|b| {
                let (_, bus) = bandwidth_gb_per_s(kind, b, tsum, n as u32);
                bus
            });
            collectives.push(CollectiveSkew {
                kind,
                instances,
                wait_per_device_ns: wsum,
                exposed_wait_per_device_ns: ewsum,
                transfer_ns: tsum,
                skew_share_pct: pct(wsum, wsum + tsum),
                skew_median_ns: skew_median,
                skew_max_ns: skew_max,
                below_residual: below,
                bytes,
                bus_gb_per_s: bus,
            });
        }
        if collectives.is_empty() {
            notes.push(
                "no collective kernel occurs on every rank: arrival skew cannot be measured".into(),
            );
        } else if collectives.iter().all(|c| c.bytes.is_none()) {
            notes.push(
                "message sizes are not recorded (NCCL NVTX payloads need `nsys export --include-blobs=true`): \
                 no bus bandwidth"
                    .into(),
            );
        }
    }
    // Per-rank rows.
    let window_of = |d: &RankDigest| d.window("steady").or_else(|| d.window("span")).cloned();
    let step_median = |d: &RankDigest, gpu: bool| {
        let mut v: Vec<i64> = d
            .steps
            .iter()
            .skip(1)
            .map(|s| {
                if gpu {
                    s.gpu_union_ns
                } else {
                    s.cpu_end_ns - s.cpu_start_ns
                }
            })
            .collect();
        (!v.is_empty()).then(|| median_i64(&mut v))
    };
    let ranks: Vec<RankRow> = ds
        .iter()
        .enumerate()
        .map(|(r, d)| {
            let w = window_of(d);
            RankRow {
                rank: d.identity.rank,
                hostname: d.identity.hostname.clone(),
                device: d.identity.device,
                pid: d.identity.pid,
                file: d.identity.file.clone(),
                offset_ns: offsets[r],
                steps: d.steps.len(),
                step_median_ns: step_median(d, false),
                step_gpu_median_ns: step_median(d, true),
                window: w
                    .as_ref()
                    .map_or("none".into(), |w| w.window.kind.as_str().into()),
                window_ns: w.as_ref().map_or(0, |w| w.window.length_ns),
                busy_ns: w.as_ref().map_or(0, |w| w.busy_ns),
                busy_pct: w
                    .as_ref()
                    .map_or(0.0, |w| pct(w.busy_ns, w.window.length_ns)),
                compute_ns: w.as_ref().map_or(0, |w| w.compute_ns),
                communication_ns: w.as_ref().map_or(0, |w| w.communication_ns),
                exposed_communication_ns: w.as_ref().map_or(0, |w| w.exposed_communication_ns),
                collective_wait_ns: wait[r],
                exposed_wait_ns: exposed_wait[r],
                last_arrivals: last[r],
            }
        })
        .collect();
    // Stragglers: ranks that were last in at least 10 % of the matched instances.
    let mut compute: Vec<i64> = ranks.iter().map(|r| r.compute_ns).collect();
    let compute_median = median_i64(&mut compute);
    let mut steps_m: Vec<i64> = ranks.iter().filter_map(|r| r.step_median_ns).collect();
    let step_m = (!steps_m.is_empty()).then(|| median_i64(&mut steps_m));
    let total_instances: usize = collectives.iter().map(|c| c.instances).sum();
    let mut stragglers: Vec<Straggler> = (0..n)
        .filter(|&r| last[r] > 0 && last[r] * 10 >= total_instances.max(1))
        .map(|r| {
            let mut l = lateness[r].clone();
            Straggler {
                rank: ranks[r].rank,
                hostname: ranks[r].hostname.clone(),
                last_arrivals: last[r],
                of_instances: total_instances,
                lateness_median_ns: median_i64(&mut l),
                lateness_total_ns: lateness[r].iter().sum(),
                wait_caused_ns: caused[r],
                compute_excess_ns: ranks[r].compute_ns - compute_median,
                step_excess_ns: ranks[r].step_median_ns.zip(step_m).map(|(a, b)| a - b),
            }
        })
        .collect();
    stragglers.sort_by_key(|s| std::cmp::Reverse(s.lateness_total_ns));
    // Slow nodes: a host whose ranks (at least two of them) arrived after every other host's ranks at
    // most (75 %) of the instances with skew above the residual.
    let mut slow_nodes = Vec::new();
    for (h, name) in host_names.iter().enumerate() {
        let rs: Vec<usize> = (0..n).filter(|&r| host_of[r] == Some(h)).collect();
        let share = pct(host_last[h] as i64, above_residual as i64);
        if rs.len() > 1 && above_residual > 0 && share >= 75.0 {
            slow_nodes.push(SlowNode {
                hostname: name.clone(),
                ranks: rs.iter().map(|&r| ranks[r].rank).collect(),
                last_arrival_share_pct: share,
                rank_share_pct: pct(rs.len() as i64, n as i64),
                lateness_total_ns: host_lateness[h],
            });
        }
    }
    // Imbalance of the per-rank figures.
    let mut imbalance = Vec::new();
    let figures: [(&str, Figure); 5] = [
        ("step_median_ns", |r| r.step_median_ns),
        ("busy_ns", |r| Some(r.busy_ns)),
        ("compute_ns", |r| Some(r.compute_ns)),
        ("exposed_communication_ns", |r| {
            Some(r.exposed_communication_ns)
        }),
        ("collective_wait_ns", |r| Some(r.collective_wait_ns)),
    ];
    if n > 1 {
        for (name, f) in figures {
            let vals: Vec<(i64, u32)> = ranks
                .iter()
                .filter_map(|r| f(r).map(|v| (v, r.rank)))
                .collect();
            if vals.len() < 2 {
                continue;
            }
            let (min, min_rank) = vals.iter().copied().min().unwrap_or((0, 0));
            let (max, max_rank) = vals
                .iter()
                .copied()
                .max_by_key(|v| (v.0, std::cmp::Reverse(v.1)))
                .unwrap_or((0, 0));
            let mut v: Vec<i64> = vals.iter().map(|v| v.0).collect();
            let med = median_i64(&mut v);
            imbalance.push(Imbalance {
                figure: name.into(),
                min,
                min_rank,
                median: med,
                max,
                max_rank,
                max_over_median_pct: pct(max - med, med),
            });
        }
    }
    // Heat map: GPU-projected step time, ranks × steps.
    let heat_map = ds.iter().any(|d| !d.steps.is_empty()).then(|| {
        let longest = ds.iter().map(|d| d.steps.len()).max().unwrap_or(0);
        let names: Vec<String> = ds
            .iter()
            .max_by_key(|d| d.steps.len())
            .map(|d| {
                d.steps
                    .iter()
                    .take(HEAT_MAX_STEPS)
                    .map(|s| s.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        HeatMap {
            figure: "gpu_union_ns".into(),
            ranks: ds
                .iter()
                .take(HEAT_MAX_RANKS)
                .map(|d| d.identity.rank)
                .collect(),
            steps: names,
            values: ds
                .iter()
                .take(HEAT_MAX_RANKS)
                .map(|d| {
                    (0..longest.min(HEAT_MAX_STEPS))
                        .map(|i| d.steps.get(i).map(|s| s.gpu_union_ns))
                        .collect()
                })
                .collect(),
            truncated: n > HEAT_MAX_RANKS || longest > HEAT_MAX_STEPS,
        }
    });
    let _ = matched_total;
    CrossRank {
        ranks,
        collectives,
        stragglers,
        slow_nodes,
        imbalance,
        heat_map,
        resolution_ns: resolution,
        notes,
    }
}
