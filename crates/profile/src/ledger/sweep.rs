//! The exclusive partition of a device's timeline.
//!
//! Precedence: a compute kernel > a collective kernel > a copy or memset >
//! idle. At any instant the device's time goes to the highest class running;
//! inside a class, to the operation that started first among those running
//! (the "frontier" rule: walking operations in start order, each takes the
//! part of its interval past the latest end seen so far). So overlapped
//! communication and copies are not on the critical path (they are reported
//! as `hidden_*`), and every nanosecond is counted once.

use rustc_hash::FxHashMap;

use super::super::Result;
use super::super::intervals::{self, Interval};
use super::columns::{Column, Columns};
use super::idle::{self, Host, subtract};
use super::ops::{DeviceOps, OpKind};
use super::steps::StepSpan;

/// One step's account.
#[derive(Debug, Clone, Default)]
pub struct StepAccount {
    pub columns: Columns,
    /// The idle pieces of the step's period, with their causes.
    pub idle: Vec<idle::IdlePiece>,
    /// Exposed collective time: (kernel index, kernel start, piece start, piece end), for the wait/transfer split.
    pub comm: Vec<(u32, i64, i64, i64, bool)>,
    /// Collective kernel time hidden behind compute kernels.
    pub hidden_communication_ns: i64,
    /// Copy and memset time hidden behind kernels.
    pub hidden_copy_ns: i64,
}

/// A labelled stretch of the timeline.
type Seg = (i64, i64, Column);

/// The frontier rule over operations already in start order: disjoint labelled segments.
fn frontier<'a>(
    ops: impl Iterator<Item = (i64, i64, Column, u32)> + 'a,
) -> Vec<(i64, i64, Column, u32)> {
    let mut out = Vec::new();
    let mut f = i64::MIN;
    for (s, e, c, idx) in ops {
        let a = s.max(f);
        if e > a {
            out.push((a, e, c, idx));
        }
        f = f.max(e);
    }
    out
}

/// Labelled segments minus a mask (both sorted; segments disjoint).
fn subtract_labelled(
    segs: &[(i64, i64, Column, u32)],
    mask: &[Interval],
) -> Vec<(i64, i64, Column, u32)> {
    let mut out = Vec::with_capacity(segs.len());
    let mut j = 0;
    for &(mut s, e, c, idx) in segs {
        while j < mask.len() && mask[j].1 <= s {
            j += 1;
        }
        let mut k = j;
        while k < mask.len() && mask[k].0 < e {
            if mask[k].0 > s {
                out.push((s, mask[k].0, c, idx));
            }
            s = s.max(mask[k].1);
            k += 1;
        }
        if s < e {
            out.push((s, e, c, idx));
        }
    }
    out
}

fn union_of(segs: &[(i64, i64, Column, u32)]) -> Vec<Interval> {
    intervals::union_sorted(segs.iter().map(|s| (s.0, s.1)).collect())
}

/// Partition the device's time over `steps` (contiguous periods in order). Exposed collective time goes to
/// `comm`; a set of ranks splits it into wait and transfer afterwards (`DeviceLedger::apply_waits`).
pub fn partition(host: &Host, d: &DeviceOps, steps: &[StepSpan]) -> Result<Vec<StepAccount>> {
    let mut accounts = vec![StepAccount::default(); steps.len()];
    let (Some(first), Some(last)) = (steps.first(), steps.last()) else {
        return Ok(accounts);
    };
    let (t0, t1) = (first.start, last.end);
    let within = |s: i64, e: i64| e > t0 && s < t1;
    let compute = frontier(
        d.ops
            .iter()
            .filter(|o| within(o.start, o.end))
            .filter_map(|o| match o.kind {
                OpKind::Compute(c) => Some((o.start, o.end, c, o.index)),
                _ => None,
            }),
    );
    let comm = frontier(d.ops.iter().filter(|o| within(o.start, o.end)).filter_map(
        |o| match o.kind {
            OpKind::Collective => Some((o.start, o.end, Column::Comm, o.index)),
            OpKind::PointToPoint => Some((o.start, o.end, Column::CommP2p, o.index)),
            _ => None,
        },
    ));
    let copies = frontier(
        d.ops
            .iter()
            .filter(|o| within(o.start, o.end))
            .filter_map(|o| match o.kind {
                OpKind::Copy(c) => Some((o.start, o.end, c, o.index)),
                _ => None,
            }),
    );
    let uc = union_of(&compute);
    let un = union_of(&comm);
    let um = union_of(&copies);
    let comm_exposed = subtract_labelled(&comm, &uc);
    let ucn = intervals::union(uc.iter().chain(&un).copied().collect());
    let copy_exposed = subtract_labelled(&copies, &ucn);
    let busy = intervals::union(ucn.iter().chain(&um).copied().collect());
    let idle_iv = subtract(&[(t0, t1)], &busy);
    let idle_pieces = idle::explain(host, d, &idle_iv)?;

    let kernel_start: FxHashMap<u32, i64> = d
        .ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::Collective | OpKind::PointToPoint))
        .map(|o| (o.index, o.start))
        .collect();
    let mut segs: Vec<Seg> =
        Vec::with_capacity(compute.len() + comm_exposed.len() + idle_pieces.len());
    segs.extend(compute.iter().map(|s| (s.0, s.1, s.2)));
    segs.extend(comm_exposed.iter().map(|s| (s.0, s.1, s.2)));
    segs.extend(copy_exposed.iter().map(|s| (s.0, s.1, s.2)));
    segs.extend(idle_pieces.iter().map(|p| (p.start, p.end, p.column)));
    segs.sort_unstable_by_key(|s| (s.0, s.1));
    accumulate(&segs, steps, &mut accounts, |a, c, ns| a.columns.add(c, ns));
    // Exposed collective pieces, cut at step boundaries, with their kernel.
    let mut i = 0;
    for &(s, e, col, idx) in &comm_exposed {
        while i < steps.len() && steps[i].end <= s {
            i += 1;
        }
        let mut j = i;
        while j < steps.len() && steps[j].start < e {
            let (a, b) = (s.max(steps[j].start), e.min(steps[j].end));
            if b > a {
                let ks = kernel_start.get(&idx).copied().unwrap_or(s);
                accounts[j]
                    .comm
                    .push((idx, ks, a, b, col == Column::CommP2p));
            }
            j += 1;
        }
    }
    // Keep each idle piece with the step holding its start (cut at step boundaries for the columns above).
    for piece in idle_pieces {
        let i = steps.partition_point(|s| s.end <= piece.start);
        if let Some(a) = accounts.get_mut(i) {
            a.idle.push(piece);
        }
    }
    // Hidden time: what ran under a higher class.
    let hidden_comm = intervals::intersect(&un, &uc);
    let hidden_copy = intervals::intersect(&um, &ucn);
    let tag = |v: Vec<Interval>| -> Vec<Seg> {
        v.into_iter().map(|(s, e)| (s, e, Column::Comm)).collect()
    };
    accumulate(&tag(hidden_comm), steps, &mut accounts, |a, _, ns| {
        a.hidden_communication_ns += ns
    });
    accumulate(&tag(hidden_copy), steps, &mut accounts, |a, _, ns| {
        a.hidden_copy_ns += ns
    });
    Ok(accounts)
}

/// Add each segment's overlap with each step (sorted segments, contiguous steps).
fn accumulate(
    segs: &[Seg],
    steps: &[StepSpan],
    accounts: &mut [StepAccount],
    mut add: impl FnMut(&mut StepAccount, Column, i64),
) {
    let mut i = 0;
    for &(s, e, c) in segs {
        while i < steps.len() && steps[i].end <= s {
            i += 1;
        }
        let mut j = i;
        while j < steps.len() && steps[j].start < e {
            let ns = e.min(steps[j].end) - s.max(steps[j].start);
            if ns > 0 {
                add(&mut accounts[j], c, ns);
            }
            j += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frontier_gives_overlap_to_the_kernel_that_started_first() {
        let ops = vec![
            (0, 10, Column::GemmTensorCore, 0),
            (5, 8, Column::Elementwise, 1),
            (6, 20, Column::Reduction, 2),
            (25, 30, Column::Elementwise, 3),
        ];
        let f = frontier(ops.into_iter());
        assert_eq!(
            f,
            vec![
                (0, 10, Column::GemmTensorCore, 0),
                (10, 20, Column::Reduction, 2),
                (25, 30, Column::Elementwise, 3)
            ]
        );
    }

    #[test]
    fn labelled_segments_lose_what_the_mask_covers() {
        let segs = vec![(0, 10, Column::Comm, 7), (12, 20, Column::Comm, 8)];
        assert_eq!(
            subtract_labelled(&segs, &[(2, 4), (9, 14)]),
            vec![
                (0, 2, Column::Comm, 7),
                (4, 9, Column::Comm, 7),
                (14, 20, Column::Comm, 8)
            ]
        );
    }

    #[test]
    fn segments_are_cut_at_step_boundaries() {
        let steps = vec![
            StepSpan {
                name: "a".into(),
                start: 0,
                end: 10,
                cpu: None,
                ops: 1,
            },
            StepSpan {
                name: "b".into(),
                start: 10,
                end: 25,
                cpu: None,
                ops: 1,
            },
        ];
        let mut acc = vec![StepAccount::default(); 2];
        accumulate(
            &[
                (0, 4, Column::Elementwise),
                (4, 12, Column::IdleSync),
                (12, 25, Column::GemmTensorCore),
            ],
            &steps,
            &mut acc,
            |a, c, ns| a.columns.add(c, ns),
        );
        assert_eq!(acc[0].columns.get(Column::IdleSync), 6);
        assert_eq!(acc[1].columns.get(Column::IdleSync), 2);
        assert_eq!(acc[0].columns.total(), 10);
        assert_eq!(acc[1].columns.total(), 15);
    }
}
