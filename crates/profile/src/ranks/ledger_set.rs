//! The step ledger over a set of ranks. Each rank's collective time is split
//! into wait and transfer from the set's matched instances (the kernel
//! durations of every rank: `ledger::split`), the ledger-only rules run again
//! on the split ledgers, and the set's findings are read from those ledgers:
//! the straggler (who arrives last more often than chance, what the others
//! wait for it, and what it does more of than they do) and, per rule, the
//! findings the ranks share. So a set's verdict cannot contradict its ranks'
//! ledgers: it is made of them.

use std::collections::BTreeMap;

use serde_json::json;

use super::align::Alignment;
use super::digest::RankDigest;
use crate::ledger::{
    self, Arrivals, Column, Columns, DeviceLedger, Group, Ledger, RankCollectives,
};
use crate::rules::{self, Finding, LedgerSummary, Severity, Stake};
use crate::stats::pct2;
use crate::{Result, Window, WindowKind};

/// Split every rank's collective time at the last arrival and redo its ledger-only findings.
/// Returns who arrived last at the steady collectives (positions follow `digests`).
pub fn split(digests: &mut [RankDigest], alignment: &Alignment) -> Result<Option<Arrivals>> {
    let with: Vec<usize> = (0..digests.len())
        .filter(|&i| {
            digests[i].ledger.is_some() && digests[i].collectives.iter().any(|c| c.kernel.is_some())
        })
        .collect();
    if with.len() < 2 || with.len() != digests.len() {
        return Ok(None);
    }
    let mut ranks = Vec::new();
    let mut shifts = Vec::new();
    for &i in &with {
        let d = &digests[i];
        let l = &d.ledger.as_ref().expect("filtered").ledger;
        ranks.push(RankCollectives {
            kernels: d
                .collectives
                .iter()
                .filter_map(|c| c.kernel.map(|k| (c.kind, c.start_ns, c.end_ns, k)))
                .collect(),
            steady: (l.steady.start_ns, l.steady.end_ns),
        });
        shifts.push(
            alignment
                .domains
                .iter()
                .find(|c| c.file == d.identity.file)
                .map_or(0, |c| c.seq_shift),
        );
    }
    let s = ledger::split(&ranks, &shifts);
    let mut arrivals = s.arrivals;
    arrivals.names = with
        .iter()
        .map(|&i| format!("rank {}", digests[i].identity.rank))
        .collect();
    for (k, &i) in with.iter().enumerate() {
        let rl = digests[i].ledger.as_mut().expect("filtered");
        rl.ledger.comm = std::mem::take(&mut rl.comm);
        rl.ledger.apply_waits(&s.waits[k]);
        rl.comm = std::mem::take(&mut rl.ledger.comm);
        // The ledger-only rules read the collective pieces (the communication what-if simulates them).
        let mut device = rl.ledger.clone();
        device.comm = rl.comm.clone();
        let l = Ledger {
            devices: vec![device],
            precedence: ledger::PRECEDENCE.to_string(),
            arrivals: Some(arrivals.clone()),
        };
        let ledger_only: Vec<&str> = rules::registry::RULES
            .iter()
            .filter(|r| !r.needs_profile)
            .map(|r| r.id)
            .collect();
        rl.findings
            .retain(|f| !ledger_only.contains(&f.id.as_str()));
        let (new, _) = rules::run_ledger_only(&l, &rl.findings)?;
        rl.findings.extend(new);
    }
    Ok(Some(arrivals))
}

fn ms(ns: i64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Per-step average of each column over a ledger's steady steps.
fn per_step(l: &DeviceLedger) -> Columns {
    let n = l.steady.steps.max(1) as i64;
    let mut c = Columns::default();
    for (col, v) in l.steady.columns.iter() {
        c.add(col, v / n);
    }
    c
}

/// The set's findings: the straggler(s) from the arrivals, then each rule's findings across the ranks.
pub fn findings(digests: &[RankDigest], arrivals: Option<&Arrivals>) -> Vec<Finding> {
    let ledgers: Vec<(u32, &DeviceLedger, &[Finding])> = digests
        .iter()
        .filter_map(|d| {
            d.ledger
                .as_ref()
                .map(|l| (d.identity.rank, &l.ledger, l.findings.as_slice()))
        })
        .filter(|(_, l, _)| l.steady.steps > 0)
        .collect();
    if ledgers.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    // The rank that sets the step: the straggler when there is one (the others wait for it, so their own
    // problems are off the critical path), else none and each rule is judged at the median rank.
    let mut critical: Option<u32> = None;
    if let Some(a) = arrivals {
        for &r in &a.stragglers {
            if let Some(f) = straggler(&ledgers, a, r) {
                out.push(f);
                critical = critical.or(ledgers.get(r).map(|l| l.0));
            }
        }
    }
    let mut by_id: BTreeMap<&str, Vec<(u32, &Finding)>> = BTreeMap::new();
    for (rank, _, fs) in &ledgers {
        for f in fs.iter() {
            by_id.entry(f.id.as_str()).or_default().push((*rank, f));
        }
    }
    for (id, fs) in by_id {
        // The straggler finding holds the waiting time already.
        if id == "collective_wait" && critical.is_some() {
            continue;
        }
        out.push(match critical {
            Some(r) => on_critical_rank(&fs, r, ledgers.len()),
            None => shared(&fs, ledgers.len()),
        });
    }
    rules::order(&mut out);
    out
}

/// One finding for a rule the ranks share: the median rank's stake and step, every rank's share in evidence.
fn shared(fs: &[(u32, &Finding)], ranks: usize) -> Finding {
    let mut stakes: Vec<i64> = fs.iter().map(|(_, f)| f.time_at_stake_ns).collect();
    stakes.resize(ranks, 0);
    let stake = median(stakes);
    // The finding of the rank closest to the median stake speaks for the set.
    let (rep_rank, rep) = fs
        .iter()
        .min_by_key(|(r, f)| ((f.time_at_stake_ns - stake).abs(), *r))
        .copied()
        .expect("non-empty");
    let window = rep.window.map_or(1, |w| w.length_ns).max(1);
    let share = if fs.len() * 2 > ranks {
        pct2(stake, window)
    } else {
        0.0
    };
    let per_rank: Vec<String> = fs
        .iter()
        .map(|(r, f)| format!("rank {r}: {}%", f.share_pct))
        .collect();
    let mut f = rep.clone();
    f.evidence.insert(
        0,
        format!(
            "on {} of {ranks} ranks ({}); the set is judged at the median rank (rank {rep_rank}'s figures below)",
            fs.len(),
            per_rank.join(", ")
        ),
    );
    f.title = format!("{} — {} of {ranks} ranks", f.title, fs.len());
    if !f.gist.is_empty() {
        f.gist = format!("rank {rep_rank}, the median: {}", f.gist);
    }
    f.share_pct = share;
    f.time_at_stake_ns = if fs.len() * 2 > ranks { stake } else { 0 };
    f.severity = if f.stake == Stake::None {
        Severity::Info
    } else {
        Severity::from_share(share)
    };
    if let serde_json::Value::Object(m) = &mut f.data {
        m.insert(
            "ranks_with".into(),
            json!(fs.iter().map(|(r, _)| r).collect::<Vec<_>>()),
        );
        m.insert("share_pct_by_rank".into(), share_by_rank(fs));
        m.insert("median_rank".into(), json!(rep_rank));
        m.insert("median_at_stake_ns".into(), json!(stake));
    }
    f
}

/// Each rank's share of the rule's finding, as the set's evidence prints it.
fn share_by_rank(fs: &[(u32, &Finding)]) -> serde_json::Value {
    json!(
        fs.iter()
            .map(|(r, f)| json!({"rank": r, "share_pct": f.share_pct}))
            .collect::<Vec<_>>()
    )
}

/// One finding for a rule, read on the rank that sets the step (the straggler): the other ranks' stakes are
/// off the critical path while they wait for it.
fn on_critical_rank(fs: &[(u32, &Finding)], critical: u32, ranks: usize) -> Finding {
    let per_rank: Vec<String> = fs
        .iter()
        .map(|(r, f)| format!("rank {r}: {}%", f.share_pct))
        .collect();
    let mine = fs.iter().find(|(r, _)| *r == critical).map(|(_, f)| *f);
    let mut f = mine.cloned().unwrap_or_else(|| {
        let mut g = fs[0].1.clone();
        g.time_at_stake_ns = 0;
        g.share_pct = 0.0;
        g.severity = Severity::Info;
        g.predicted_step_ns = g.step_ns;
        g
    });
    f.evidence.insert(
        0,
        format!(
            "on {} of {ranks} ranks ({}); judged on rank {critical}, the straggler, which sets the step: the other \
             ranks wait for it, so their share of this is off the critical path{}",
            fs.len(),
            per_rank.join(", "),
            if mine.is_none() {
                format!(" (rank {critical} does not have it: nothing at stake)")
            } else {
                String::new()
            }
        ),
    );
    f.title = format!(
        "{} — on rank {critical}, the critical path ({} of {ranks} ranks have it)",
        f.title,
        fs.len()
    );
    if !f.gist.is_empty() {
        // The figures are the critical rank's, or (where it does not have the finding) the first rank's.
        let whose = if mine.is_some() { critical } else { fs[0].0 };
        f.gist = format!("rank {whose}: {}", f.gist);
    }
    if let serde_json::Value::Object(m) = &mut f.data {
        m.insert(
            "ranks_with".into(),
            json!(fs.iter().map(|(r, _)| r).collect::<Vec<_>>()),
        );
        m.insert("share_pct_by_rank".into(), share_by_rank(fs));
        m.insert("critical_rank".into(), json!(critical));
    }
    f
}

/// Of the rank at position `r`: the median other rank's total lead when last, and the rank's own lead beyond it
/// (every rank is late by turns; only the lateness it shows beyond the others' is the straggler's).
fn own_lead(a: &Arrivals, r: usize) -> (i64, i64) {
    let others = median(
        (0..a.lead_total_ns.len())
            .filter(|&i| i != r)
            .map(|i| a.lead_total_ns[i])
            .collect(),
    );
    (others, (a.lead_total_ns[r] - others).max(0))
}

/// The straggler at position `r` of the arrivals: the others' wait is at stake, its ledger says why it is late.
fn straggler(
    ledgers: &[(u32, &DeviceLedger, &[Finding])],
    a: &Arrivals,
    r: usize,
) -> Option<Finding> {
    let (rank, late, _) = *ledgers.get(r)?;
    let others: Vec<&DeviceLedger> = ledgers
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != r)
        .map(|(_, l)| l.1)
        .collect();
    // What the waiting ranks lose: their comm_wait over the steady window, at the median waiting rank.
    let waits: Vec<i64> = others
        .iter()
        .map(|l| l.steady.columns.get(Column::CommWait))
        .collect();
    let waited = median(waits.clone());
    // Were this rank on time, the others would still wait for the next-latest one: the fix removes at most
    // its lead over that rank (a slow host's ranks are all late, and each leads the next by microseconds).
    // And every rank is late by turns (host jitter, uneven small kernels): with the straggler on time, the ranks
    // would still lead one another about as much as the other ranks lead now, so only its lead beyond the
    // median other rank's is its own.
    let (others_lead, own_lead) = own_lead(a, r);
    let wait = waited.min(own_lead);
    let window = median(others.iter().map(|l| l.steady.length_ns).collect());
    let step = median(others.iter().map(|l| l.steady.period_median_ns).collect());
    let steps = median(others.iter().map(|l| l.steady.steps as i64).collect()).max(1);
    let wait_per_step = wait / steps;
    // What the late rank does more of, per step, than the median other rank.
    let mine = per_step(late);
    let theirs: Vec<Columns> = others.iter().map(|l| per_step(l)).collect();
    let mut deltas: Vec<(Column, i64)> = Column::ALL
        .iter()
        .map(|&c| {
            (
                c,
                mine.get(c) - median(theirs.iter().map(|t| t.get(c)).collect()),
            )
        })
        .filter(|(c, _)| !matches!(c.group(), Group::Communication))
        .collect();
    deltas.sort_by_key(|d| std::cmp::Reverse(d.1));
    let compute_delta: i64 = deltas
        .iter()
        .filter(|d| d.0.group() == Group::Compute)
        .map(|d| d.1)
        .sum();
    let host_delta: i64 = deltas
        .iter()
        .filter(|d| d.0.is_host_idle())
        .map(|d| d.1)
        .sum();
    let (cause, predicted, basis) = if compute_delta >= host_delta {
        let n = ledgers.len() as i64;
        (
            "more compute",
            step - wait_per_step * (n - 1) / n,
            format!(
                "the {} other ranks' comm_wait (time inside collectives before the last rank arrived, no compute beside \
                 it) over the steady window, at the median waiting rank, at most the rank's total lead over the next-latest \
                 rank beyond the median other rank's; the step after rebalancing the extra work over \
                 all {n} ranks: the median step minus (n − 1)/n of the wait per step",
                n - 1
            ),
        )
    } else {
        (
            "host delay",
            step - wait_per_step,
            format!(
                "the {} other ranks' comm_wait over the steady window, at the median waiting rank, at most the rank's total \
                 lead over the next-latest rank beyond the median other rank's; the step once the late \
                 rank's host delay is gone: the median step minus the wait per step",
                ledgers.len() - 1
            ),
        )
    };
    let top: Vec<String> = deltas
        .iter()
        .filter(|d| d.1 > 0)
        .take(3)
        .map(|(c, v)| format!("{} +{}", c.as_str(), ms(*v)))
        .collect();
    let share = pct2(wait, window.max(1));
    let title = format!(
        "Rank {rank} is the straggler ({cause}): the other ranks wait {share}% of the steady window for it"
    );
    let evidence = vec![
        format!(
            "rank {rank} arrived last at {} of {} decided steady collectives (chance allows {} for one of {} ranks), by a \
             median {}",
            a.last[r],
            a.decided,
            a.chance_limit,
            a.ranks,
            ms(a.lead_median_ns[r])
        ),
        format!(
            "its leads when last add up to {}, the median other rank's to {}: {} of lateness is its own",
            ms(a.lead_total_ns[r]),
            ms(others_lead),
            ms(own_lead)
        ),
        format!(
            "the other ranks wait {} per step for it inside collectives with no compute beside it (median waiting rank; \
             {} of a {} step)",
            ms(wait_per_step),
            ms(wait_per_step),
            ms(step)
        ),
        format!(
            "per steady step, rank {rank} spends more than the median other rank on: {}",
            if top.is_empty() {
                "nothing measurable".to_string()
            } else {
                top.join(", ")
            }
        ),
    ];
    let gist = format!(
        "rank {rank} last at {} of {} decided steady collectives (chance allows {:.1}), by a median {}; the others wait \
         {} per step of a {} step; rank {rank} spends more per step on {}",
        a.last[r],
        a.decided,
        a.chance_limit,
        ms(a.lead_median_ns[r]),
        ms(wait_per_step),
        ms(step),
        if top.is_empty() {
            "nothing measurable".to_string()
        } else {
            top.join(", ")
        }
    );
    let fix = if cause == "more compute" {
        format!(
            "Give rank {rank} the same work as the others: equal batch rows / sequence lengths / shards per rank (the same \
             global batch spread evenly); check the data sharding (DistributedSampler, uneven last shards) and any \
             rank-specific work."
        )
    } else {
        // The columns it spends more on are in the gist and the evidence: named once.
        format!(
            "Remove the host delay on rank {rank} (the idle it has more of than the others, per step): move logging, \
             checkpointing, evaluation or data work off rank {rank}'s training thread, or spread it over all ranks."
        )
    };
    Some(Finding {
        id: "cross_rank_straggler".into(),
        title,
        severity: Severity::from_share(share),
        time_at_stake_ns: wait,
        share_pct: share,
        stake: Stake::Estimate,
        basis,
        step_ns: Some(step),
        predicted_step_ns: Some(predicted),
        then_limited_by: late.steady.columns.largest(None).map(|(c, _)| c.as_str().to_string()),
        columns: vec![Column::CommWait.as_str().to_string()],
        regions: Vec::new(),
        device: None,
        rank: None,
        window: Some(Window::new(WindowKind::Steady, 0, window)),
        gist,
        evidence,
        why: "A collective cannot finish before its last rank arrives: the other ranks' devices sit inside the collective \
              for as long as the straggler is late, every step."
            .into(),
        fix,
        verify: "Re-profile every rank: aisp_profile_ranks should name no straggler and comm_wait should approach 0 on \
                 every rank."
            .into(),
        data: json!({"rank": rank, "cause": cause, "last": a.last[r], "decided": a.decided, "chance_limit": a.chance_limit,
            "lead_median_ns": a.lead_median_ns[r], "lead_total_ns": a.lead_total_ns[r], "others_lead_total_ns": others_lead,
            "own_lead_ns": own_lead, "waited_ns": waited, "wait_ns": wait, "wait_per_step_ns": wait_per_step, "waits_ns": waits,
            "window_ns": window, "step_ns": step, "predicted_step_ns": predicted,
            "compute_delta_per_step_ns": compute_delta, "host_idle_delta_per_step_ns": host_delta,
            "deltas": deltas.iter().filter(|d| d.1 > 0).take(3).map(|(c, v)| json!({"column": c.as_str(), "per_step_ns": v})).collect::<Vec<_>>()}),
    })
}

/// Each rank's ledger in short, rank order.
pub fn summaries(digests: &[RankDigest]) -> Vec<LedgerSummary> {
    digests
        .iter()
        .filter_map(|d| {
            d.ledger.as_ref().map(|l| {
                let mut s = rules::summary(&l.ledger);
                s.rank = Some(d.identity.rank);
                s.top_kernels = l.step_kernels.clone();
                s.top_regions = l.step_regions.clone();
                s.top_calls = l.step_calls.clone();
                s
            })
        })
        .collect()
}

/// One sentence on the set: the straggler, or that the set is balanced, with its basis.
pub fn balance_note(digests: &[RankDigest], arrivals: Option<&Arrivals>) -> Option<String> {
    let a = arrivals?;
    if !a.stragglers.is_empty() {
        return None;
    }
    let waits: Vec<f64> = digests
        .iter()
        .filter_map(|d| d.ledger.as_ref())
        .map(|l| {
            pct2(
                l.ledger.steady.columns.get(Column::CommWait),
                l.ledger.steady.length_ns.max(1),
            )
        })
        .collect();
    let max = waits.iter().copied().fold(0.0, f64::max);
    Some(format!(
        "balanced: no rank arrives last more often than chance over {} decided steady collectives (each rank last at {:?}; \
         chance allows {}), and no rank waits more than {max}% of its steady window for the others",
        a.decided, a.last, a.chance_limit
    ))
}

/// Make the set's cross-rank tables agree with the ledgers: stragglers from the arrivals (counted over the
/// steady collectives, by kernel durations), each rank's wait from its ledger, and the note on balance.
pub fn replace_stragglers(
    c: &mut super::analysis::CrossRank,
    digests: &[RankDigest],
    a: &Arrivals,
) {
    let by_rank: BTreeMap<u32, &DeviceLedger> = digests
        .iter()
        .filter_map(|d| d.ledger.as_ref().map(|l| (d.identity.rank, &l.ledger)))
        .collect();
    for (pos, d) in digests.iter().enumerate() {
        if let Some(row) = c.ranks.iter_mut().find(|r| r.rank == d.identity.rank) {
            row.collective_wait_ns = a.wait_ns.get(pos).copied().unwrap_or(0);
            row.exposed_wait_ns = by_rank
                .get(&d.identity.rank)
                .map_or(0, |l| l.steady.columns.get(Column::CommWait));
        }
    }
    let compute = |l: &DeviceLedger| l.steady.columns.group(Group::Compute);
    let median_compute = median(by_rank.values().map(|l| compute(l)).collect());
    let median_step = median(
        by_rank
            .values()
            .map(|l| l.steady.period_median_ns)
            .collect(),
    );
    c.stragglers = a
        .stragglers
        .iter()
        .filter_map(|&r| {
            let d = digests.get(r)?;
            let l = by_rank.get(&d.identity.rank)?;
            let others: Vec<i64> = digests
                .iter()
                .filter(|o| o.identity.rank != d.identity.rank)
                .filter_map(|o| by_rank.get(&o.identity.rank))
                .map(|o| o.steady.columns.get(Column::CommWait))
                .collect();
            // What the others would stop waiting were it on time: at most its own lead over the next-latest rank.
            let lead = own_lead(a, r).1;
            Some(super::analysis::Straggler {
                rank: d.identity.rank,
                hostname: d.identity.hostname.clone(),
                last_arrivals: a.last[r] as usize,
                of_instances: a.decided as usize,
                lateness_median_ns: a.lead_median_ns[r],
                lateness_total_ns: a.lead_total_ns[r],
                wait_caused_ns: others.iter().map(|w| (*w).min(lead)).sum(),
                exposed_wait_caused_max_ns: others.iter().copied().max().unwrap_or(0).min(lead),
                exposed_wait_caused_ns: median(others).min(lead),
                compute_excess_ns: compute(l) - median_compute,
                step_excess_ns: Some(l.steady.period_median_ns - median_step),
            })
        })
        .collect();
    c.notes.retain(|n| !n.starts_with("no straggler"));
    if let Some(n) = balance_note(digests, Some(a)) {
        c.notes.push(n);
    }
}

/// The set's findings: from the ranks' ledgers when every rank has one (Nsight Systems exports), with the
/// slow-node and slow-link findings of the clock-aligned analysis; the aligned analysis alone otherwise
/// (Kineto traces carry no ledger).
pub fn set_findings(set: &super::RankSet, digests: &[RankDigest]) -> Vec<Finding> {
    let aligned = super::findings::findings(&set.cross_rank);
    if set.ledger.is_empty() {
        return aligned;
    }
    let mut out = findings(digests, set.arrivals.as_ref());
    out.extend(aligned.into_iter().filter(|f| {
        !matches!(
            f.id.as_str(),
            "cross_rank_straggler" | "cross_rank_skew_dominated"
        )
    }));
    rules::order(&mut out);
    out
}
