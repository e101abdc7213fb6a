//! Cross-rank findings under the findings contract: severity from the GPU time
//! per device that a fix would remove from the critical path, as a share of
//! the median rank's analysis window.
//!
//! - `cross_rank_straggler`: one rank arrives last at the collectives. At
//!   stake, per device: the part of its lead over the next-latest rank that
//!   another device spent idle in the collective (not overlapped by that
//!   device's own compute), summed over the collectives and taken at the
//!   median waiting device. Its whole lead is not critical-path time where
//!   collectives overlap compute (DDP buckets): measured on two H100s with a
//!   planted 1 ms straggler per bucket, the lead summed to 265.5 ms of a
//!   340 ms window while the other device's exposed wait was 208.4 ms.
//! - `cross_rank_skew_dominated`: most of a collective kind's time is waiting
//!   for the last rank, not moving data. At stake: the exposed wait per device
//!   (wait not hidden behind compute).
//! - `cross_rank_slow_node`: the late arrivals come from the ranks of one host.
//!   At stake, per device of the other hosts: the part of the host's lead that
//!   the device spent idle in the collective, at the median such device.
//! - `cross_rank_slow_link`: one rank pair's point-to-point transfers run below
//!   half the median pair's bandwidth (only where send/recv peers and sizes are
//!   recorded). At stake: its transfer time minus the time at the median pair's
//!   bandwidth.
//!
//! Each evidence sentence is built from the numbers in `data`.

use serde_json::json;

use super::analysis::CrossRank;
use crate::rules::{Finding, Severity, Stake};

fn ms(ns: i64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn share(ns: i64, window: i64) -> f64 {
    if window <= 0 {
        0.0
    } else {
        (ns as f64 * 1000.0 / window as f64).round() / 10.0
    }
}

/// The median rank's analysis window length (steady, else span).
fn window_ns(c: &CrossRank) -> i64 {
    let mut w: Vec<i64> = c.ranks.iter().map(|r| r.window_ns).collect();
    w.sort_unstable();
    w.get(w.len() / 2).copied().unwrap_or(0)
}

/// Share of the skew in a collective kind's time above which it is skew-dominated.
pub const SKEW_DOMINATED_PCT: f64 = 50.0;

/// What a cross-rank finding says; [`finding`] turns it into the `rules` shape.
struct Draft {
    id: &'static str,
    title: String,
    time_at_stake_ns: i64,
    /// How time_at_stake_ns was obtained.
    basis: String,
    window_ns: i64,
    /// The numbers the stake rests on, in one line ([`Finding::gist`]).
    gist: String,
    evidence: Vec<String>,
    why: String,
    fix: String,
    verify: String,
    data: serde_json::Value,
}

/// The one place a cross-rank finding becomes a `rules::Finding`: severity from the share of the median
/// rank's window at stake. The time at stake is critical-path time per device derived from aligned
/// collective arrivals (an estimate of what balancing would remove), not measured idle time.
fn finding(d: Draft) -> Finding {
    let sh = share(d.time_at_stake_ns, d.window_ns);
    Finding {
        id: d.id.into(),
        title: d.title,
        severity: Severity::from_share(sh),
        time_at_stake_ns: d.time_at_stake_ns,
        share_pct: sh,
        stake: Stake::Estimate,
        basis: d.basis,
        gist: d.gist,
        evidence: d.evidence,
        why: d.why,
        fix: d.fix,
        verify: d.verify,
        data: d.data,
        ..Finding::default()
    }
}

/// The cross-rank findings of a set, most time at stake first.
pub fn findings(c: &CrossRank) -> Vec<Finding> {
    let window = window_ns(c);
    let mut out = Vec::new();
    for s in &c.stragglers {
        let at_stake = s.exposed_wait_caused_ns;
        out.push(finding(Draft {
            id: "cross_rank_straggler",
            title: format!("Rank {} is the straggler", s.rank),
            time_at_stake_ns: at_stake,
            basis: "per device: Σ over the collectives the straggler reached last (clock-aligned kernel starts) of \
                    the part of its lead over the next-latest rank that the waiting device spent idle in the \
                    collective, not overlapped by its own compute; the median over the waiting devices"
                .into(),
            window_ns: window,
            gist: format!(
                "rank {} last at {} of {} matched collectives, by a median {}; a waiting device idled {} for it \
                 (the median device)",
                s.rank,
                s.last_arrivals,
                s.of_instances,
                ms(s.lateness_median_ns),
                ms(s.exposed_wait_caused_ns)
            ),
            evidence: vec![
                format!(
                    "rank {} arrived last at {} of {} matched collectives, by a median {} over the next-latest rank ({} in all)",
                    s.rank,
                    s.last_arrivals,
                    s.of_instances,
                    ms(s.lateness_median_ns),
                    ms(s.lateness_total_ns)
                ),
                format!(
                    "the other ranks waited {} of GPU time for it (all devices together); {} of its lead per \
                     device (the median device; {} at most) was idle time, not overlapped by the device's own compute",
                    ms(s.wait_caused_ns),
                    ms(s.exposed_wait_caused_ns),
                    ms(s.exposed_wait_caused_max_ns)
                ),
                match s.step_excess_ns {
                    Some(e) => format!(
                        "its compute time differs from the median rank's by {} and its median step by {}",
                        ms(s.compute_excess_ns),
                        ms(e)
                    ),
                    None => format!(
                        "its compute time differs from the median rank's by {}",
                        ms(s.compute_excess_ns)
                    ),
                },
            ],
            why: "A collective finishes only when the last rank joins: every other GPU idles in its \
                  communication kernel while the straggler finishes the work before it."
                .into(),
            fix: "Look at what the straggler does before each collective (aisp_profile_timeline on its \
                  export around a late collective): uneven data or sequence lengths, a slower GPU \
                  (clocks, thermals: aisp_gpu_power on its host), host-side stalls (data loading, \
                  Python) or a noisy neighbour."
                .into(),
            verify: "Re-profile the set: its last arrivals and the wait it causes should fall to the \
                     level of the other ranks."
                .into(),
            data: json!({
                "rank": s.rank, "hostname": s.hostname, "last_arrivals": s.last_arrivals,
                "of_instances": s.of_instances, "lateness_median_ns": s.lateness_median_ns,
                "lateness_total_ns": s.lateness_total_ns, "wait_caused_ns": s.wait_caused_ns,
                "exposed_wait_caused_ns": s.exposed_wait_caused_ns,
                "exposed_wait_caused_max_ns": s.exposed_wait_caused_max_ns,
                "compute_excess_ns": s.compute_excess_ns, "step_excess_ns": s.step_excess_ns,
                "window_ns": window,
            }),
        }));
    }
    for k in &c.collectives {
        if k.skew_share_pct < SKEW_DOMINATED_PCT || k.exposed_wait_per_device_ns <= 0 {
            continue;
        }
        let at_stake = k.exposed_wait_per_device_ns;
        let kind = serde_json::to_value(k.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        out.push(finding(Draft {
            id: "cross_rank_skew_dominated",
            title: format!("{kind} time is mostly waiting for the last rank"),
            time_at_stake_ns: at_stake,
            basis: "Σ over the instances of the mean per-device wait for the last arrival not overlapped by the \
                    device's own compute (a lower bound of the exposed wait)"
                .into(),
            window_ns: window,
            gist: format!(
                "{} {kind} instances: per device {} waiting for the last arrival ({} not hidden) and {} moving data",
                k.instances,
                ms(k.wait_per_device_ns),
                ms(k.exposed_wait_per_device_ns),
                ms(k.transfer_ns)
            ),
            evidence: vec![
                format!(
                    "over {} {kind} instances each device waited {} for the last arrival and moved data for {}: {:.1} % of the time is skew",
                    k.instances,
                    ms(k.wait_per_device_ns),
                    ms(k.transfer_ns),
                    k.skew_share_pct
                ),
                format!(
                    "{} of that wait per device was not hidden behind compute; arrival skew median {}, max {}",
                    ms(k.exposed_wait_per_device_ns),
                    ms(k.skew_median_ns),
                    ms(k.skew_max_ns)
                ),
            ],
            why: "Collective time is arrival skew (waiting for the slowest rank) plus transfer; faster \
                  links or algorithms only shrink the transfer part."
                .into(),
            fix: "Balance the work before the collective across ranks (the straggler findings name who \
                  arrives last); do not tune NCCL or the network for this."
                .into(),
            verify: "Re-profile: the skew share of this collective should drop and its transfer time stay."
                .into(),
            data: json!({
                "kind": kind, "instances": k.instances, "wait_per_device_ns": k.wait_per_device_ns,
                "exposed_wait_per_device_ns": k.exposed_wait_per_device_ns, "transfer_ns": k.transfer_ns,
                "skew_share_pct": k.skew_share_pct, "skew_median_ns": k.skew_median_ns,
                "skew_max_ns": k.skew_max_ns, "window_ns": window,
            }),
        }));
    }
    for s in &c.slow_nodes {
        let at_stake = s.exposed_wait_caused_ns;
        out.push(finding(Draft {
            id: "cross_rank_slow_node",
            title: format!("Host {} holds the late ranks", s.hostname),
            time_at_stake_ns: at_stake,
            basis: "per device of the other hosts: Σ over the collectives at which at least two of this host's ranks \
                    arrived after every other host's ranks of the part of the host's lead (its last arrival minus the \
                    other hosts' last) that the device spent idle in the collective; the median over those devices"
                .into(),
            window_ns: window,
            gist: format!(
                "ranks {:?} on {} last at {:.1} % of the collectives; a device of the other hosts idled {} for them",
                s.ranks,
                s.hostname,
                s.last_arrival_share_pct,
                ms(s.exposed_wait_caused_ns)
            ),
            evidence: vec![
                format!(
                    "ranks {:?} on {} ({:.1} % of the ranks) arrived after every other host's ranks at {:.1} % of the collectives with skew above the clock residual, {} of lateness in all",
                    s.ranks,
                    s.hostname,
                    s.rank_share_pct,
                    s.last_arrival_share_pct,
                    ms(s.lateness_total_ns)
                ),
                format!(
                    "a device of the other hosts spent {} of that lead idle in the collectives (the median device)",
                    ms(s.exposed_wait_caused_ns)
                ),
            ],
            why: "When every late rank sits on one host, the cause is the host (CPU contention, \
                  thermals, a slower NIC or PCIe path), not the model."
                .into(),
            fix: "Check the host: aisp_gpu_power and aisp_system_* on it, its NIC and PCIe link \
                  (aisp_gpu_topology), and compare with a healthy host; drain it if it stays slow."
                .into(),
            verify: "Re-run without that host (or after fixing it): the last arrivals should spread out."
                .into(),
            data: json!({
                "hostname": s.hostname, "ranks": s.ranks, "last_arrival_share_pct": s.last_arrival_share_pct,
                "rank_share_pct": s.rank_share_pct, "lateness_total_ns": s.lateness_total_ns,
                "exposed_wait_caused_ns": s.exposed_wait_caused_ns, "window_ns": window,
            }),
        }));
    }
    for l in &c.slow_links {
        let at_stake = l.time_lost_ns.max(0);
        let host = |h: &Option<String>| h.clone().unwrap_or_else(|| "?".into());
        out.push(finding(Draft {
            id: "cross_rank_slow_link",
            title: format!("The link from rank {} to rank {} is slow", l.src, l.dst),
            time_at_stake_ns: at_stake,
            basis: "the pair's point-to-point transfer time minus its bytes at the median pair's bandwidth (transfer \
                    from the later start to the later end of matched send/recv kernels)"
                .into(),
            window_ns: window,
            gist: format!(
                "rank {} → rank {}: {:.2} GB/s against a median pair's {:.2} GB/s over {} transfers",
                l.src, l.dst, l.gb_per_s, l.median_pair_gb_per_s, l.instances
            ),
            evidence: vec![
                format!(
                    "rank {} ({}) → rank {} ({}): {} transfers, {} bytes in {}: {:.2} GB/s against a median of {:.2} GB/s over {} rank pairs",
                    l.src,
                    host(&l.src_host),
                    l.dst,
                    host(&l.dst_host),
                    l.instances,
                    l.bytes,
                    ms(l.transfer_ns),
                    l.gb_per_s,
                    l.median_pair_gb_per_s,
                    l.pairs_measured
                ),
                format!(
                    "at the median pair's bandwidth these transfers would take {} less",
                    ms(at_stake)
                ),
            ],
            why: "A pipeline or point-to-point exchange runs at the pace of its slowest link: a degraded NVLink, \
                  a PCIe fallback, or a NIC on a congested path."
                .into(),
            fix: "Measure the pair directly (aisp_hw_nccl, aisp_gpu_nvlink, aisp_gpu_topology on its hosts); \
                  check link errors and the route; move the stage boundary off that pair if it stays slow."
                .into(),
            verify: "Re-profile: the pair's bandwidth should be near the median pair's.".into(),
            data: json!({
                "src": l.src, "dst": l.dst, "src_host": l.src_host, "dst_host": l.dst_host,
                "instances": l.instances, "bytes": l.bytes, "transfer_ns": l.transfer_ns,
                "gb_per_s": l.gb_per_s, "median_pair_gb_per_s": l.median_pair_gb_per_s,
                "pairs_measured": l.pairs_measured, "time_lost_ns": l.time_lost_ns, "window_ns": window,
            }),
        }));
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.time_at_stake_ns));
    out
}
