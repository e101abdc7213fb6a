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
use crate::nccl::{Collective, bandwidth_gb_per_s};

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
    /// Instances whose message size every rank recorded (Kineto `record_param_comms`, NCCL NVTX payloads).
    #[serde(default)]
    pub sized_instances: usize,
    /// Σ message size `S` over those instances (nccl-tests' definition).
    pub bytes: Option<i64>,
    /// Σ transfer time of those instances (after the last arrival: skew excluded).
    #[serde(default)]
    pub sized_transfer_ns: i64,
    /// Algorithm bandwidth S / transfer and bus bandwidth (× 2(n−1)/n for all-reduce, (n−1)/n for
    /// all-gather, reduce-scatter and all-to-all, 1 for broadcast, reduce and point-to-point; n = ranks of the set), GB/s.
    #[serde(default)]
    pub alg_gb_per_s: Option<f64>,
    pub bus_gb_per_s: Option<f64>,
}

/// Point-to-point traffic of one ordered rank pair (sender → receiver), from send/recv kernels whose peer is recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LinkRow {
    pub src: u32,
    pub dst: u32,
    pub instances: usize,
    /// Instances where both the send and the matching receive were seen (transfer = last end − last start);
    /// the others use the one kernel seen, which includes waiting for the peer.
    pub both_ends: usize,
    pub bytes: i64,
    pub transfer_ns: i64,
    pub gb_per_s: f64,
}

/// A rank pair whose transfers run well below the median pair's bandwidth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SlowLink {
    pub src: u32,
    pub dst: u32,
    pub src_host: Option<String>,
    pub dst_host: Option<String>,
    pub instances: usize,
    pub bytes: i64,
    pub transfer_ns: i64,
    pub gb_per_s: f64,
    /// Median bandwidth over the pairs measured.
    pub median_pair_gb_per_s: f64,
    pub pairs_measured: usize,
    /// transfer − bytes / median bandwidth: the time it would save at the median pair's speed (per device of the pair).
    pub time_lost_ns: i64,
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
    /// Σ lateness over the next-latest rank: how much earlier those collectives would end if it
    /// arrived with the others. Not all of it is critical-path time: where collectives overlap
    /// compute (DDP buckets), the other devices keep computing during part of the wait.
    pub lateness_total_ns: i64,
    /// Σ over the other ranks of the time they waited for it (GPU time, all devices).
    pub wait_caused_ns: i64,
    /// Per waiting device: Σ over the collectives it was last at of the part of its lead over the
    /// next-latest rank that the device spent idle in the collective (not overlapped by its own
    /// compute). The median over the other devices: the GPU time per device a fix gives back.
    #[serde(default)]
    pub exposed_wait_caused_ns: i64,
    /// The same for the device that lost the most.
    #[serde(default)]
    pub exposed_wait_caused_max_ns: i64,
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
    /// Per device of the other hosts: Σ over those instances of the part of that lead the device spent
    /// idle in the collective (not overlapped by its own compute); the median over those devices.
    #[serde(default)]
    pub exposed_wait_caused_ns: i64,
}

/// The cross-rank answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CrossRank {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankRow>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collectives: Vec<CollectiveSkew>,
    pub stragglers: Vec<Straggler>,
    pub slow_nodes: Vec<SlowNode>,
    /// Per rank pair point-to-point bandwidth, where send/recv peers are recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkRow>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slow_links: Vec<SlowLink>,
    /// Whether a slow link could be looked for, and on what basis (or what is missing).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub link_basis: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imbalance: Vec<Imbalance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heat_map: Option<HeatMap>,
    /// The finest time difference this answer draws conclusions from.
    pub resolution_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
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
    // Per last rank: per device, the exposed part of the wait its lead caused (made on first use).
    let mut exposed_caused: Vec<Option<Vec<i64>>> = vec![None; n];
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
    let mut host_exposed: Vec<Vec<i64>> = vec![vec![0; n]; host_names.len()];
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
            let (mut sized, mut sized_t) = (0usize, 0i64);
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
                // Bandwidth only over instances every rank sized (ranks agree on S for these collectives).
                if let Some(b) = arr[0].3.filter(|_| arr.iter().all(|a| a.3.is_some())) {
                    bytes = Some(bytes.unwrap_or(0) + b);
                    sized += 1;
                    sized_t += transfer;
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
                // A device's wait beyond what its own compute overlapped: GPU time idle in the collective.
                let exposed = |a: &(i64, i64, i64, Option<i64>)| ((l - a.0) - a.2).max(0);
                if late > res {
                    last[lr] += 1;
                    lateness[lr].push(late);
                    caused[lr] += arr.iter().map(|a| l - a.0).sum::<i64>();
                    let row = exposed_caused[lr].get_or_insert_with(|| vec![0; n]);
                    for (r, a) in arr.iter().enumerate().filter(|(r, _)| *r != lr) {
                        row[r] += late.min(exposed(a));
                    }
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
                        for (r, a) in arr
                            .iter()
                            .enumerate()
                            .filter(|(r, _)| host_of[*r] != Some(h))
                        {
                            host_exposed[h][r] += (l - others).min(exposed(a));
                        }
                    }
                }
            }
            matched_total = matched_total.max(instances);
            if instances == 0 {
                continue;
            }
            let skew_max = skews.iter().copied().max().unwrap_or(0);
            let skew_median = median_i64(&mut skews);
            let bw = bytes
                .filter(|_| sized_t > 0)
                .map(|b| bandwidth_gb_per_s(kind, b, sized_t, n as u32));
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
                sized_instances: sized,
                bytes,
                sized_transfer_ns: sized_t,
                alg_gb_per_s: bw.map(|b| b.0),
                bus_gb_per_s: bw.map(|b| b.1),
            });
        }
        if collectives.is_empty() {
            notes.push(
                "no collective kernel occurs on every rank: arrival skew cannot be measured".into(),
            );
        } else if collectives.iter().all(|c| c.bytes.is_none()) {
            notes.push(
                "message sizes are not recorded (NCCL NVTX payloads: `nsys export --include-blobs=true`; Kineto: \
                 record_param_comms): no bus bandwidth"
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
    // Stragglers: ranks last in at least 10 % of the matched instances and more often than chance
    // allows. Where every rank arrives in a random order, each is last at 1/n of the instances a last
    // rank was decided at (with two ranks, half of them), so a rank must be last more than three
    // standard deviations of that binomial count above it: a symmetric run names no straggler.
    let decided: usize = last.iter().sum();
    let chance = |k: usize| {
        let (p, m) = (1.0 / n.max(1) as f64, decided as f64);
        k as f64 <= m * p + 3.0 * (m * p * (1.0 - p)).sqrt()
    };
    let mut compute: Vec<i64> = ranks.iter().map(|r| r.compute_ns).collect();
    let compute_median = median_i64(&mut compute);
    let mut steps_m: Vec<i64> = ranks.iter().filter_map(|r| r.step_median_ns).collect();
    let step_m = (!steps_m.is_empty()).then(|| median_i64(&mut steps_m));
    let total_instances: usize = collectives.iter().map(|c| c.instances).sum();
    let mut stragglers: Vec<Straggler> = (0..n)
        .filter(|&r| last[r] > 0 && last[r] * 10 >= total_instances.max(1) && !chance(last[r]))
        .map(|r| {
            let mut l = lateness[r].clone();
            let mut per_device: Vec<i64> = exposed_caused[r]
                .as_ref()
                .map(|row| (0..n).filter(|&o| o != r).map(|o| row[o]).collect())
                .unwrap_or_default();
            Straggler {
                rank: ranks[r].rank,
                hostname: ranks[r].hostname.clone(),
                last_arrivals: last[r],
                of_instances: total_instances,
                lateness_median_ns: median_i64(&mut l),
                lateness_total_ns: lateness[r].iter().sum(),
                wait_caused_ns: caused[r],
                exposed_wait_caused_max_ns: per_device.iter().copied().max().unwrap_or(0),
                exposed_wait_caused_ns: if per_device.is_empty() {
                    0
                } else {
                    median_i64(&mut per_device)
                },
                compute_excess_ns: ranks[r].compute_ns - compute_median,
                step_excess_ns: ranks[r].step_median_ns.zip(step_m).map(|(a, b)| a - b),
            }
        })
        .collect();
    if stragglers.is_empty() && decided > 0 && n > 1 {
        let most = (0..n)
            .max_by_key(|&r| (last[r], std::cmp::Reverse(r)))
            .unwrap_or(0);
        notes.push(format!(
            "no straggler: no rank was last more often than chance over {n} ranks (rank {} the most: {} of the \
             {decided} instances with a last rank, of {total_instances} matched)",
            ranks[most].rank, last[most]
        ));
    }
    stragglers.sort_by_key(|s| {
        (
            std::cmp::Reverse(s.exposed_wait_caused_ns),
            std::cmp::Reverse(s.lateness_total_ns),
        )
    });
    // Slow nodes: a host whose ranks (at least two of them) arrived after every other host's ranks at
    // most (75 %) of the instances with skew above the residual.
    let mut slow_nodes = Vec::new();
    for (h, name) in host_names.iter().enumerate() {
        let rs: Vec<usize> = (0..n).filter(|&r| host_of[r] == Some(h)).collect();
        let share = pct(host_last[h] as i64, above_residual as i64);
        if rs.len() > 1 && above_residual > 0 && share >= 75.0 {
            let mut others: Vec<i64> = (0..n)
                .filter(|&r| host_of[r] != Some(h))
                .map(|r| host_exposed[h][r])
                .collect();
            slow_nodes.push(SlowNode {
                exposed_wait_caused_ns: if others.is_empty() {
                    0
                } else {
                    median_i64(&mut others)
                },
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
    // Said once, in `link_basis` (reports and the dashboard print it).
    let (links, slow_links, link_basis) = links(&ds, &offsets, resolution);
    CrossRank {
        ranks,
        collectives,
        stragglers,
        slow_nodes,
        links,
        slow_links,
        link_basis,
        imbalance,
        heat_map,
        resolution_ns: resolution,
        notes,
    }
}

/// A pair is slow below this share of the median pair's bandwidth.
pub const SLOW_LINK_PCT: f64 = 50.0;
/// Pairs needed for a median to compare against, and transfers a pair needs to be judged.
const LINK_MIN_PAIRS: usize = 3;
const LINK_MIN_INSTANCES: usize = 3;

/// Per-pair point-to-point bandwidth and slow links. A ring or tree collective's kernels do not say which
/// hop was slow, so only send/recv kernels with a recorded peer and size can name a link.
fn links(
    ds: &[&RankDigest],
    offsets: &[i64],
    resolution: Option<i64>,
) -> (Vec<LinkRow>, Vec<SlowLink>, String) {
    use crate::nccl::Collective as C;
    let index: BTreeMap<u32, usize> = ds
        .iter()
        .enumerate()
        .map(|(i, d)| (d.identity.rank, i))
        .collect();
    // (src, dst) → sends seen on src, receives seen on dst: (aligned start, aligned end, bytes).
    type Ends = Vec<(i64, i64, i64)>;
    let mut pairs: BTreeMap<(u32, u32), (Ends, Ends)> = BTreeMap::new();
    let mut p2p_kernels = 0usize;
    for (i, d) in ds.iter().enumerate() {
        for c in &d.collectives {
            if !matches!(c.kind, C::Send | C::Recv | C::SendRecv) {
                continue;
            }
            p2p_kernels += 1;
            let (Some(peer), Some(b)) = (c.peer, c.bytes) else {
                continue;
            };
            let me = d.identity.rank;
            let span = (c.start_ns + offsets[i], c.end_ns + offsets[i], b);
            match c.kind {
                C::Recv => pairs.entry((peer, me)).or_default().1.push(span),
                _ => pairs.entry((me, peer)).or_default().0.push(span),
            }
        }
    }
    if pairs.is_empty() {
        let basis = if p2p_kernels > 0 {
            format!(
                "slow link: not determinable: {p2p_kernels} send/recv kernels without a recorded peer and size \
                 (NCCL NVTX payloads: `nsys export --include-blobs=true`; Kineto record_param_comms)"
            )
        } else {
            "slow link: not determinable: no send/recv transfers (ring/tree collectives name no hop)".to_string()
        };
        return (Vec::new(), Vec::new(), basis);
    }
    let use_both = resolution.is_some();
    let mut rows = Vec::new();
    for ((src, dst), (sends, recvs)) in pairs {
        let both_seen = use_both && index.contains_key(&src) && index.contains_key(&dst);
        let n = sends.len().max(recvs.len());
        let (mut bytes, mut t, mut both) = (0i64, 0i64, 0usize);
        for k in 0..n {
            let (s, r) = (sends.get(k), recvs.get(k));
            let (b, dur) = match (s, r) {
                // Data moves once both ends are in: from the later start to the later end.
                (Some(s), Some(r)) if both_seen => {
                    both += 1;
                    (s.2, s.1.max(r.1) - s.0.max(r.0))
                }
                (Some(x), _) | (None, Some(x)) => (x.2, x.1 - x.0),
                (None, None) => continue,
            };
            bytes += b;
            t += dur.max(0);
        }
        if t > 0 {
            rows.push(LinkRow {
                src,
                dst,
                instances: n,
                both_ends: both,
                bytes,
                transfer_ns: t,
                gb_per_s: (bytes as f64 / t as f64 * 100.0).round() / 100.0,
            });
        }
    }
    let judged: Vec<&LinkRow> = rows
        .iter()
        .filter(|r| r.instances >= LINK_MIN_INSTANCES)
        .collect();
    if judged.len() < LINK_MIN_PAIRS {
        let basis = format!(
            "slow link: {} rank pairs with at least {LINK_MIN_INSTANCES} sized send/recv transfers; at least \
             {LINK_MIN_PAIRS} are needed to compare a pair with the median pair",
            judged.len()
        );
        return (rows, Vec::new(), basis);
    }
    let mut bws: Vec<f64> = judged.iter().map(|r| r.gb_per_s).collect();
    bws.sort_by(f64::total_cmp);
    let median = if bws.len() % 2 == 1 {
        bws[bws.len() / 2]
    } else {
        (bws[bws.len() / 2 - 1] + bws[bws.len() / 2]) / 2.0
    };
    let host = |r: u32| index.get(&r).and_then(|&i| ds[i].identity.hostname.clone());
    let mut slow: Vec<SlowLink> = judged
        .iter()
        .filter(|r| median > 0.0 && r.gb_per_s * 100.0 < median * SLOW_LINK_PCT)
        .map(|r| SlowLink {
            src: r.src,
            dst: r.dst,
            src_host: host(r.src),
            dst_host: host(r.dst),
            instances: r.instances,
            bytes: r.bytes,
            transfer_ns: r.transfer_ns,
            gb_per_s: r.gb_per_s,
            median_pair_gb_per_s: median,
            pairs_measured: judged.len(),
            // bytes / (GB/s) = ns.
            time_lost_ns: r.transfer_ns - (r.bytes as f64 / median).round() as i64,
        })
        .collect();
    slow.sort_by_key(|s| std::cmp::Reverse(s.time_lost_ns));
    let basis = format!(
        "slow link: {} rank pairs with sized send/recv transfers compared with the median pair ({median:.2} GB/s); \
         a pair below {SLOW_LINK_PCT:.0} % of it is slow",
        judged.len()
    );
    (rows, slow, basis)
}

#[cfg(test)]
mod tests {
    use super::super::align::Alignment;
    use super::super::digest::{CollectiveRow, RankDigest, RankIdentity, WindowFigures};
    use super::*;
    use crate::windows::{Window, WindowKind};

    /// Synthetic (no capture with real point-to-point peers exists here): four ranks on two hosts pass
    /// 64 MiB down a ring ten times; every hop takes 1 ms except rank 2 → rank 3, which takes 4 ms.
    fn ring(slow_hop_ns: i64, with_peers: bool) -> Vec<RankDigest> {
        const MIB64: i64 = 64 << 20;
        (0..4u32)
            .map(|r| {
                let mut collectives = Vec::new();
                for k in 0..10u32 {
                    let t0 = 10_000_000 * k as i64;
                    let hop = |from: u32| if from == 2 { slow_hop_ns } else { 1_000_000 };
                    let to = (r + 1) % 4;
                    let from = (r + 3) % 4;
                    for (kind, peer, dur) in [
                        (Collective::Send, to, hop(r)),
                        (Collective::Recv, from, hop(from)),
                    ] {
                        collectives.push(CollectiveRow {
                            kind,
                            seq: k,
                            start_ns: t0,
                            end_ns: t0 + dur,
                            stream: 7,
                            compute_overlap_ns: 0,
                            bytes: Some(MIB64),
                            peer: with_peers.then_some(peer),
                            kernel: None,
                        });
                    }
                }
                let w = Window::new(WindowKind::Span, 0, 100_000_000);
                RankDigest {
                    identity: RankIdentity {
                        rank: r,
                        rank_source: "order".into(),
                        env_rank: None,
                        local_rank: None,
                        world_size: Some(4),
                        file: format!("r{r}"),
                        pid: 1,
                        device: r as i64,
                        hostname: Some(format!("h{}", r / 2)),
                        gpu: None,
                        utc_epoch_ns: None,
                    },
                    kernels: 20,
                    kernel_sum_ns: 0,
                    windows: vec![WindowFigures {
                        window: w,
                        busy_ns: 50_000_000,
                        compute_ns: 40_000_000,
                        communication_ns: 10_000_000,
                        overlap_ns: 0,
                        exposed_communication_ns: 10_000_000,
                    }],
                    steps: Vec::new(),
                    collectives,
                    classes: Vec::new(),
                    ledger: None,
                }
            })
            .collect()
    }

    fn aligned() -> Alignment {
        Alignment {
            reference_file: "r0".into(),
            domains: Vec::new(),
            residual_ns: Some(1_000),
        }
    }

    #[test]
    fn a_slow_point_to_point_pair_is_named_with_the_time_it_loses() {
        let c = cross_rank(&ring(4_000_000, true), &aligned());
        assert_eq!(c.links.len(), 4, "{:?}", c.links);
        // Both ends of every transfer are seen: transfer = later end − later start.
        assert!(
            c.links
                .iter()
                .all(|l| l.instances == 10 && l.both_ends == 10)
        );
        let bytes = 10 * (64i64 << 20);
        let fast = &c.links[0];
        assert_eq!(
            (fast.src, fast.dst, fast.bytes, fast.transfer_ns),
            (0, 1, bytes, 10_000_000)
        );
        assert_eq!(fast.gb_per_s, 67.11);
        assert_eq!(c.slow_links.len(), 1, "{}", c.link_basis);
        let s = &c.slow_links[0];
        assert_eq!((s.src, s.dst, s.pairs_measured), (2, 3, 4));
        assert_eq!(
            (s.src_host.as_deref(), s.dst_host.as_deref()),
            (Some("h1"), Some("h1"))
        );
        assert_eq!(
            (s.transfer_ns, s.gb_per_s, s.median_pair_gb_per_s),
            (40_000_000, 16.78, 67.11)
        );
        // 40 ms against 671,088,640 B / 67.11 GB/s = 9,999,831 ns.
        assert_eq!(s.time_lost_ns, 40_000_000 - 9_999_831);
        let f = super::super::findings::findings(&c);
        let link = f
            .iter()
            .find(|x| x.id == "cross_rank_slow_link")
            .expect("slow-link finding");
        assert_eq!(link.title, "The link from rank 2 to rank 3 is slow");
        assert_eq!(link.time_at_stake_ns, s.time_lost_ns);
        assert_eq!(
            link.evidence[0],
            "rank 2 (h1) → rank 3 (h1): 10 transfers, 671088640 bytes in 40.000 ms: 16.78 GB/s against a \
             median of 67.11 GB/s over 4 rank pairs"
        );
        assert_eq!(
            link.evidence[1],
            "at the median pair's bandwidth these transfers would take 30.000 ms less"
        );
        // 30 ms of a 100 ms window.
        assert_eq!(link.share_pct, 30.0);
        // Even hops: no slow link, and the basis says what was compared.
        let even = cross_rank(&ring(1_000_000, true), &aligned());
        assert!(even.slow_links.is_empty());
        assert!(
            even.link_basis
                .starts_with("slow link: 4 rank pairs with sized send/recv transfers")
        );
    }

    #[test]
    fn without_peers_the_answer_says_a_link_cannot_be_determined() {
        let c = cross_rank(&ring(4_000_000, false), &aligned());
        assert!(c.links.is_empty() && c.slow_links.is_empty());
        assert!(
            c.link_basis.starts_with(
                "slow link: not determinable: 80 send/recv kernels without a recorded peer"
            ),
            "{}",
            c.link_basis
        );
        // Collectives alone: the ring/tree sentence.
        let mut ds = ring(1_000_000, false);
        for d in &mut ds {
            for c in &mut d.collectives {
                c.kind = Collective::AllReduce;
            }
        }
        let c = cross_rank(&ds, &aligned());
        assert!(
            c.link_basis
                .starts_with("slow link: not determinable: no send/recv transfers")
        );
        // Said once: in link_basis, not repeated in the notes.
        assert!(!c.notes.contains(&c.link_basis));
    }

    #[test]
    fn bus_bandwidth_counts_only_sized_instances_over_transfer_time() {
        // Synthetic sizes: the ring as all-reduces of 64 MiB, half of them unsized on one rank.
        let mut ds = ring(1_000_000, false);
        for d in &mut ds {
            d.collectives.retain(|c| c.kind == Collective::Send);
            for c in &mut d.collectives {
                c.kind = Collective::AllReduce;
                // Rank 3 arrives 0.5 ms late; everyone ends 1 ms after it.
                if d.identity.rank == 3 {
                    c.start_ns += 500_000;
                }
                c.end_ns = c.seq as i64 * 10_000_000 + 1_500_000;
                if d.identity.rank == 1 && c.seq % 2 == 1 {
                    c.bytes = None;
                }
            }
        }
        let c = cross_rank(&ds, &aligned());
        let k = &c.collectives[0];
        assert_eq!((k.instances, k.sized_instances), (10, 5));
        assert_eq!(k.bytes, Some(5 * (64 << 20)));
        // Transfer: 1 ms after the last arrival, per instance.
        assert_eq!(
            (k.transfer_ns, k.sized_transfer_ns),
            (10_000_000, 5_000_000)
        );
        // algbw 335,544,320 B / 5 ms = 67.11 GB/s; busbw × 2(4−1)/4 = 100.66 GB/s.
        assert_eq!(
            (k.alg_gb_per_s, k.bus_gb_per_s),
            (Some(67.11), Some(100.66))
        );
    }
}
