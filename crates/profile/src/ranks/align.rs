//! Clock alignment of a set of exports. Every export counts ns from its own
//! session start; ranks of one export share that clock (a **clock domain**).
//!
//! 1. First estimate: the session starts' wall-clock times
//!    (`utcEpochNs`): offset = utc(domain) − utc(reference). Profiler
//!    start-up is not synchronous across ranks and host clocks drift, so this
//!    can be wrong by milliseconds.
//! 2. Refinement: instance `seq` of a collective kind is the same operation on
//!    every rank (NCCL requires every rank to issue collectives in the same
//!    order), and a ring/tree collective completes on all ranks within
//!    microseconds of each other, so its kernel **ends** mark one instant.
//!    The correction is the median of (reference end − domain end) over the
//!    matched instances; the **residual** is the 90th percentile of the
//!    remaining differences. A shift in instance numbering (a capture that
//!    started a few collectives late) is searched for and taken when it makes
//!    the ends agree better. Where both ranks recorded message sizes, a shift
//!    that pairs collectives of different sizes is not the same operation and
//!    is ruled out: evenly spaced collectives (a straggler's, one per DDP
//!    bucket) fit several shifts equally well by their ends alone, but the
//!    buckets' sizes tell them apart.
//!
//! Cross-rank conclusions finer than the residual are refused by the analysis.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::digest::{CollectiveRow, RankDigest};
use crate::nccl::Collective;

/// One clock domain's alignment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DomainClock {
    /// The export.
    pub file: String,
    /// Ranks in this export.
    pub ranks: Vec<u32>,
    /// Add to this export's timestamps to put them on the reference clock.
    pub offset_ns: i64,
    /// The utcEpochNs estimate alone (null without a session start time).
    pub utc_estimate_ns: Option<i64>,
    /// offset − utc estimate: how wrong the session start times were.
    pub correction_ns: Option<i64>,
    /// 90th percentile of |reference end − aligned end| over matched collectives.
    pub residual_ns: Option<i64>,
    /// Collective instances matched to the reference.
    pub matched: usize,
    /// Instance-number shift found against the reference (0 when both captured the same collectives).
    pub seq_shift: i64,
    /// `reference`, `collective_ends`, `ambiguous` (periodic collectives match equally well at several
    /// instance shifts: placed by utcEpochNs only), `utc_epoch_ns` (no collectives to match) or `none`.
    pub method: String,
}

/// The set's alignment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Alignment {
    /// The export whose clock is the reference (the one holding the lowest rank).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reference_file: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<DomainClock>,
    /// The largest residual over the domains: the finest cross-rank time the set supports.
    /// Null when some domain could only be placed by utcEpochNs (milliseconds of doubt).
    pub residual_ns: Option<i64>,
}

impl Alignment {
    /// The offset of a rank's export (0 when unknown).
    pub fn offset_of(&self, file: &str) -> i64 {
        self.domains
            .iter()
            .find(|d| d.file == file)
            .map_or(0, |d| d.offset_ns)
    }
}

fn median(v: &mut [i64]) -> i64 {
    v.sort_unstable();
    let n = v.len();
    if n == 0 {
        return 0;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        // Floor of the middle-pair mean, exact in i128.
        ((v[n / 2 - 1] as i128 + v[n / 2] as i128).div_euclid(2)) as i64
    }
}

fn p90_abs(v: &[i64], center: i64) -> i64 {
    let mut d: Vec<i64> = v.iter().map(|x| (x - center).abs()).collect();
    d.sort_unstable();
    if d.is_empty() {
        return 0;
    }
    let i = ((d.len() as f64) * 0.9).ceil() as usize;
    d[i.clamp(1, d.len()) - 1]
}

/// Collective ends and message sizes by (kind, seq).
fn ends(c: &[CollectiveRow]) -> BTreeMap<Collective, Vec<(i64, Option<i64>)>> {
    let mut m: BTreeMap<Collective, Vec<(i64, Option<i64>)>> = BTreeMap::new();
    for r in c {
        let v = m.entry(r.kind).or_default();
        if v.len() == r.seq as usize {
            v.push((r.end_ns, r.bytes));
        }
    }
    m
}

/// One instance shift's pairing of the reference's collectives with a domain's.
struct Pairing {
    /// reference end − domain end − estimate, per paired instance.
    diffs: Vec<i64>,
    /// Pairs whose message sizes both ranks recorded, and how many of them disagree.
    sized: usize,
    size_mismatches: usize,
}

impl Pairing {
    /// Whether the sizes say these pairs are not the same operations (more than
    /// a tenth disagree: uneven all-to-all sizes may differ now and then).
    fn sizes_disagree(&self) -> bool {
        self.sized > 0 && self.size_mismatches * 10 > self.sized
    }
}

fn pair(
    reference: &BTreeMap<Collective, Vec<(i64, Option<i64>)>>,
    other: &BTreeMap<Collective, Vec<(i64, Option<i64>)>>,
    estimate: i64,
    shift: i64,
) -> Pairing {
    let mut out = Pairing {
        diffs: Vec::new(),
        sized: 0,
        size_mismatches: 0,
    };
    for (kind, re) in reference {
        let Some(oe) = other.get(kind) else { continue };
        for (i, (r, rb)) in re.iter().enumerate() {
            let j = i as i64 + shift;
            if j >= 0
                && let Some((o, ob)) = oe.get(j as usize)
            {
                out.diffs.push(r - (o + estimate));
                if let (Some(a), Some(b)) = (rb, ob) {
                    out.sized += 1;
                    out.size_mismatches += usize::from(a != b);
                }
            }
        }
    }
    out
}

/// Median absolute deviation (the spread a wrong match inflates).
fn mad(v: &[i64]) -> i64 {
    let mut c = v.to_vec();
    let m = median(&mut c);
    let mut d: Vec<i64> = v.iter().map(|x| (x - m).abs()).collect();
    median(&mut d)
}

/// Align the clock domains of a set of rank digests.
pub fn align(digests: &[RankDigest]) -> Alignment {
    // Domains in rank order of their lowest rank.
    let mut domains: Vec<(String, Vec<&RankDigest>)> = Vec::new();
    let mut sorted: Vec<&RankDigest> = digests.iter().collect();
    sorted.sort_by_key(|d| d.identity.rank);
    for d in sorted {
        match domains.iter_mut().find(|(f, _)| *f == d.identity.file) {
            Some((_, v)) => v.push(d),
            None => domains.push((d.identity.file.clone(), vec![d])),
        }
    }
    let Some((ref_file, ref_ranks)) = domains.first().cloned() else {
        return Alignment {
            reference_file: String::new(),
            domains: Vec::new(),
            residual_ns: None,
        };
    };
    let ref_utc = ref_ranks[0].identity.utc_epoch_ns;
    let ref_ends = ends(&ref_ranks[0].collectives);
    let mut out = Vec::new();
    let mut worst: Option<i64> = Some(0);
    for (i, (file, ranks)) in domains.iter().enumerate() {
        let rank_ids: Vec<u32> = ranks.iter().map(|d| d.identity.rank).collect();
        if i == 0 {
            out.push(DomainClock {
                file: file.clone(),
                ranks: rank_ids,
                offset_ns: 0,
                utc_estimate_ns: ref_utc.map(|_| 0),
                correction_ns: ref_utc.map(|_| 0),
                residual_ns: Some(0),
                matched: 0,
                seq_shift: 0,
                method: "reference".into(),
            });
            continue;
        }
        let utc_estimate = match (ranks[0].identity.utc_epoch_ns, ref_utc) {
            (Some(a), Some(b)) => Some(a - b),
            _ => None,
        };
        let other = ends(&ranks[0].collectives);
        let estimate = utc_estimate.unwrap_or(0);
        // Try instance shifts; keep the one whose differences agree best.
        let n_ref: usize = ref_ends.values().map(Vec::len).sum();
        let max_shift = (n_ref / 4).min(8) as i64;
        let mut candidates: Vec<(i64, i64, Vec<i64>)> = Vec::new();
        for shift in std::iter::once(0).chain((1..=max_shift).flat_map(|s| [s, -s])) {
            let p = pair(&ref_ends, &other, estimate, shift);
            let d = p.diffs.len();
            if d < 3 || d * 2 < n_ref.min(other.values().map(Vec::len).sum()) || p.sizes_disagree()
            {
                continue;
            }
            candidates.push((mad(&p.diffs), shift, p.diffs));
        }
        // Stable: on equal spread the smaller shift (0 first) wins.
        candidates.sort_by_key(|c| c.0);
        // Periodic, identical collectives match equally well at several shifts: then the
        // instance pairing, and so the offset, is unknown beyond the period.
        let ambiguous = candidates.len() > 1 && candidates[1].0 <= 2 * candidates[0].0 + 1_000;
        let best = if ambiguous {
            None
        } else {
            candidates.into_iter().next()
        };
        let clock = match best {
            Some((_, shift, mut d)) => {
                let correction = median(&mut d);
                let residual = p90_abs(&d, correction);
                worst = worst.map(|w| w.max(residual));
                DomainClock {
                    file: file.clone(),
                    ranks: rank_ids,
                    offset_ns: estimate + correction,
                    utc_estimate_ns: utc_estimate,
                    correction_ns: utc_estimate.map(|_| correction),
                    residual_ns: Some(residual),
                    matched: d.len(),
                    seq_shift: shift,
                    method: "collective_ends".into(),
                }
            }
            None => {
                worst = None;
                DomainClock {
                    file: file.clone(),
                    ranks: rank_ids,
                    offset_ns: estimate,
                    utc_estimate_ns: utc_estimate,
                    correction_ns: None,
                    residual_ns: None,
                    matched: 0,
                    seq_shift: 0,
                    method: if ambiguous {
                        "ambiguous".into()
                    } else if utc_estimate.is_some() {
                        "utc_epoch_ns".into()
                    } else {
                        "none".into()
                    },
                }
            }
        };
        out.push(clock);
    }
    Alignment {
        reference_file: ref_file,
        domains: out,
        residual_ns: worst,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_percentile() {
        assert_eq!(median(&mut [3, 1, 2]), 2);
        assert_eq!(median(&mut [4, 1, 2, 3]), 2);
        assert_eq!(median(&mut [-3, -2]), -3);
        assert_eq!(p90_abs(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 100], 0), 8);
        assert_eq!(mad(&[10, 10, 10, 50]), 0);
    }
}
