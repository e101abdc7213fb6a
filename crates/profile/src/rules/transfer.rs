//! Rules on moving data: copies on the critical path, exposed communication,
//! and time spent inside collectives waiting for another rank.

use std::collections::BTreeMap;

use serde_json::json;

use super::super::Result;
use super::super::info;
use super::super::ledger::{Column, DeviceLedger, Group};
use super::super::memory;
use super::registry::{RuleSpec, RuleText};
use super::{Ctx, Draft, Stake, ms};
use aisp_knowledge::gpus;

const MIN_SHARE_PCT: f64 = 1.0;

const COPY_COLUMNS: &[Column] = &[
    Column::H2dPageable,
    Column::H2dPinned,
    Column::D2hPageable,
    Column::D2hPinned,
    Column::IdlePageableStaging,
];

pub const COPIES: RuleSpec = RuleSpec {
    id: "exposed_copies",
    doc: "Host-to-device and device-to-host copies on the critical path (no kernel runs beside them), and the idle \
          while the host stages pageable copies: ledger columns h2d_*, d2h_*, idle_pageable_staging.",
    what_if: "copies from pinned memory on a side stream, overlapped with the step's compute: the step becomes the \
              longer of (the step without its exposed copies) and (the copies at pinned bandwidth)",
    columns: COPY_COLUMNS,
    text: RuleText {
        why: "While the device copies over PCIe with nothing else running, the step waits for the copy; pageable \
              memory is staged through a driver bounce buffer, slower than pinned memory and blocking the host.",
        fix: "Keep the data on the device across steps where it fits; otherwise copy from pinned memory \
              (DataLoader(pin_memory=True) or tensor.pin_memory()) with .to(device, non_blocking=True), prefetch the \
              next batch on a side stream (torch.cuda.Stream + wait_stream) while this step computes, and copy results \
              back into a preallocated pinned buffer.",
        verify: "Re-profile: aisp_profile_ledger h2d_*/d2h_* and idle_pageable_staging should shrink (copies move to \
                 hidden_copy_ns).",
        quiet: "exposed host copies under 1% of the steady window",
    },
    needs_profile: true,
    eval: copies,
};

/// The best pinned bandwidth of a direction in this export (copies of 1 MB or more), in bytes per ns.
fn pinned_rate(p: &super::super::Profile, copy_kind: i64) -> Result<Option<f64>> {
    let kinds = p.mem_kind_labels()?;
    let pinned = kinds
        .iter()
        .find(|(_, l)| l.eq_ignore_ascii_case("Pinned"))
        .map(|(k, _)| *k);
    let best = p
        .memcpys()?
        .iter()
        .filter(|m| {
            m.copy_kind == copy_kind
                && pinned.is_some()
                && (m.src_kind == pinned || m.dst_kind == pinned)
        })
        .filter(|m| m.bytes >= 1 << 20)
        .map(|m| m.bytes as f64 / (m.end - m.start).max(1) as f64)
        .fold(0.0, f64::max);
    Ok((best > 0.0).then_some(best))
}

fn copies(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let opers = cx.p()?.memcpy_oper_labels()?;
    let kind_of = |label: &str| {
        opers
            .iter()
            .find(|(_, l)| l.as_str() == label)
            .map(|(k, _)| *k)
    };
    let (h2d, d2h) = (
        kind_of("Host-to-Device").unwrap_or(1),
        kind_of("Device-to-Host").unwrap_or(2),
    );
    let pageable = memory::pageable_kind(cx.p()?)?;
    let gpus_info = info::gpus(cx.p()?)?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let exposed: i64 = COPY_COLUMNS.iter().map(|&c| d.steady.columns.get(c)).sum();
        if exposed == 0 {
            continue;
        }
        // Bytes per step and direction, and the pinned rate to move them at.
        let fallback = info::gpu_name(&gpus_info, d.device)
            .as_deref()
            .and_then(gpus::match_device_name)
            .and_then(|g| g.pcie_per_direction_gb_per_s())
            .map(|gb| {
                (
                    gb * 0.8,
                    format!("80% of the GPU's PCIe datasheet rate ({gb} GB/s per direction)"),
                )
            });
        let mut rate_note = Vec::new();
        let mut rates: BTreeMap<i64, f64> = BTreeMap::new();
        for (k, label) in [(h2d, "H2D"), (d2h, "D2H")] {
            let r = match pinned_rate(cx.p()?, k)? {
                Some(r) => {
                    rate_note.push(format!(
                        "{label}: best pinned copy in this export, {:.1} GB/s",
                        r
                    ));
                    r
                }
                None => match &fallback {
                    Some((gb, why)) => {
                        rate_note.push(format!("{label}: {why}"));
                        *gb
                    }
                    None => {
                        rate_note.push(format!(
                            "{label}: 20 GB/s assumed (no pinned copy, GPU not in the catalog)"
                        ));
                        20.0
                    }
                },
            };
            rates.insert(k, r);
        }
        let starts: Vec<i64> = d.steps.iter().map(|s| s.start_ns).collect();
        let mut pinned_time = vec![0i64; d.steps.len()];
        let (mut bytes, mut n, mut n_pageable) = (0i64, 0u64, 0u64);
        for m in cx
            .p()?
            .memcpys()?
            .iter()
            .filter(|m| m.device == d.device && (m.copy_kind == h2d || m.copy_kind == d2h))
        {
            let si = starts.partition_point(|&s| s <= m.start);
            let Some(step) = si.checked_sub(1).and_then(|i| d.steps.get(i)) else {
                continue;
            };
            if step.warmup || m.start >= step.start_ns + step.period_ns {
                continue;
            }
            pinned_time[si - 1] += (m.bytes as f64 / rates[&m.copy_kind]) as i64;
            bytes += m.bytes;
            n += 1;
            if pageable.is_some() && (m.src_kind == pageable || m.dst_kind == pageable) {
                n_pageable += 1;
            }
        }
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            format!(
                "estimate per steady step: its exposed copy time (h2d_*, d2h_*, idle_pageable_staging) minus nothing \
                 the overlap cannot hide: saving = min(exposed, period − the step's copies at pinned bandwidth) [{}]",
                rate_note.join("; ")
            ),
            COPY_COLUMNS,
            |s| {
                let e: i64 = COPY_COLUMNS.iter().map(|&c| s.columns.get(c)).sum();
                e.min(s.period_ns - pinned_time[s.index as usize])
            },
        );
        let saving = dr.total();
        let steps = d.steady.steps.max(1) as i64;
        let pinned_median = {
            let mut v: Vec<i64> = d
                .steady_steps()
                .map(|s| pinned_time[s.index as usize])
                .collect();
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or(0)
        };
        let pageable_ns = d.steady.columns.get(Column::H2dPageable)
            + d.steady.columns.get(Column::D2hPageable)
            + d.steady.columns.get(Column::IdlePageableStaging);
        let mut evidence = vec![
            format!(
                "{n} host copies in the steady window ({} MB per step), {n_pageable} of them from/to pageable memory",
                bytes / steps / 1_000_000
            ),
            format!(
                "{} of copy time with no kernel beside it ({}% of the steady window), {} of it pageable copies and their staging",
                ms(exposed),
                d.share(exposed),
                ms(pageable_ns)
            ),
            format!(
                "at pinned bandwidth the copies would take {} per step (median), hidden behind compute when prefetched",
                ms(pinned_median)
            ),
        ];
        if d.steady.hidden_copy_ns > 0 {
            evidence.push(format!(
                "{} of copy time already overlaps kernels",
                ms(d.steady.hidden_copy_ns)
            ));
        }
        let title = format!(
            "Copies on the critical path: {}% of the steady window moves data over PCIe with nothing else running ({} MB per step)",
            d.share(exposed),
            bytes / steps / 1_000_000
        );
        drafts.push(dr.text(
            title,
            evidence,
            json!({"copies": n, "pageable_copies": n_pageable, "bytes": bytes, "mb_per_step": bytes / steps / 1_000_000,
                "exposed_ns": exposed, "exposed_pct": d.share(exposed), "pageable_ns": pageable_ns,
                "hidden_copy_ns": d.steady.hidden_copy_ns, "saving_ns": saving, "pinned_median_ns": pinned_median,
                "rates": rate_note}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

// ---------------------------------------------------------------------------------------------

pub const COMMUNICATION: RuleSpec = RuleSpec {
    id: "communication_not_overlapped",
    doc: "Collective kernel time with no compute kernel beside it: the transfer (comm_transfer) when the set's ranks \
          are known, else all exposed collective time (comm, which then includes waiting for other ranks).",
    what_if: "communication overlapped with the step's compute (bucketed gradient all-reduce during backward): the \
              exposed transfer goes, up to the compute time available to hide it, except the last collective of the \
              step, which has no compute after it",
    columns: &[Column::CommTransfer, Column::Comm],
    text: RuleText {
        why: "Communication that no compute overlaps adds directly to the step: the device moves data while its \
              compute units wait.",
        fix: "Overlap gradient communication with backward: use DDP (it all-reduces buckets as their gradients are \
              ready) rather than all-reducing after backward; tune bucket_cap_mb, gradient_as_bucket_view=True, no \
              find_unused_parameters; with FSDP use backward/forward prefetch; keep NCCL on its own stream (never \
              all-reduce on the compute stream).",
        verify: "Re-profile: aisp_profile_ledger comm_transfer (or comm) should shrink and hidden_communication_ns grow.",
        quiet: "exposed communication under 1% of the steady window",
    },
    needs_profile: false,
    eval: communication,
};

/// Per step: exposed collective time, the compute it could hide behind, the last collective's exposed part.
fn comm_parts(d: &DeviceLedger, col: Column) -> BTreeMap<u32, (i64, i64)> {
    // Last collective of each step: the kernel with the latest start among its pieces.
    let mut last: BTreeMap<u32, (i64, u32)> = BTreeMap::new();
    for c in &d.comm {
        let e = last.entry(c.step).or_insert((c.kernel_start, c.kernel));
        if c.kernel_start > e.0 {
            *e = (c.kernel_start, c.kernel);
        }
    }
    let mut out = BTreeMap::new();
    for s in d.steady_steps() {
        let exposed = s.columns.get(col);
        let tail: i64 = match last.get(&s.index) {
            Some(&(_, k)) => d
                .comm
                .iter()
                .filter(|c| c.step == s.index && c.kernel == k)
                .map(|c| c.transfer_ns())
                .sum::<i64>()
                .min(exposed),
            None => 0,
        };
        out.insert(s.index, (exposed, tail));
    }
    out
}

fn communication(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let split = d.steady.columns.get(Column::CommTransfer) > 0
            || d.steady.columns.get(Column::CommWait) > 0;
        let col = if split {
            Column::CommTransfer
        } else {
            Column::Comm
        };
        let parts = comm_parts(d, col);
        let exposed = d.steady.columns.get(col);
        if exposed == 0 {
            continue;
        }
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            if split {
                "estimate per steady step: its comm_transfer (collective time after the last rank arrived, with no \
                 compute beside it) minus the last collective's part, at most the step's compute time"
            } else {
                "estimate per steady step: its exposed collective time (comm) minus the last collective's part, at most \
                 the step's compute time — an upper bound: without the other ranks' exports, the time waiting for them \
                 inside the collectives is counted too, and overlap cannot remove waiting"
            },
            &[col],
            |s| {
                let (e, tail) = parts.get(&s.index).copied().unwrap_or((0, 0));
                (e - tail).min(s.columns.group(Group::Compute))
            },
        );
        let saving = dr.total();
        let hidden = d.steady.hidden_communication_ns;
        let wait_col = if split {
            d.steady.columns.get(Column::CommWait)
        } else {
            0
        };
        let exposed_all = exposed + wait_col;
        let total_comm = exposed_all + hidden;
        let mut evidence = vec![format!(
            "collective kernels run {} in the steady window; {} of it overlaps compute (hidden), {} has no compute beside \
             it ({}% of the steady window)",
            ms(total_comm),
            ms(hidden),
            ms(exposed_all),
            d.share(exposed_all)
        )];
        if split {
            evidence.push(format!(
                "of the exposed time, {} is transfer after the last rank arrived and {} waiting for it (collective_wait)",
                ms(exposed),
                ms(d.steady.columns.get(Column::CommWait))
            ));
        } else {
            evidence.push(
                "the other ranks' exports are not given: waiting for them inside the collectives cannot be told from \
                 transfer (aisp_profile_ranks with every rank's export splits it)"
                    .into(),
            );
        }
        let title = if hidden * 10 < total_comm {
            format!(
                "Communication serialized with compute: {}% of the steady window is collective {} with nothing to overlap it",
                d.share(exposed),
                if split { "transfer" } else { "time" }
            )
        } else {
            format!(
                "Exposed communication: {}% of the steady window is collective {} not hidden behind compute",
                d.share(exposed),
                if split { "transfer" } else { "time" }
            )
        };
        drafts.push(dr.text(
            title,
            evidence,
            json!({"exposed_ns": exposed, "exposed_pct": d.share(exposed), "hidden_ns": hidden, "total_ns": total_comm,
                "wait_ns": wait_col, "exposed_all_ns": exposed_all, "exposed_all_pct": d.share(exposed_all),
                "split": split, "saving_ns": saving}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

pub const WAIT: RuleSpec = RuleSpec {
    id: "collective_wait",
    doc: "Time inside collectives before the last rank arrived, with no compute beside it (comm_wait): this rank \
          waits for a slower one.",
    what_if: "the ranks arrive together (the late rank's extra work or host delay removed): the wait goes",
    columns: &[Column::CommWait],
    text: RuleText {
        why: "A collective cannot finish before its last rank arrives: every other rank's device sits inside the \
              collective, doing nothing useful, for as long as the last rank is late.",
        fix: "Make the late rank as fast as the others: balance the work per rank (equal batch/sequence lengths, \
              equal shards), find what the late rank does more of (aisp_profile_ranks compares the ranks' ledgers), \
              or remove its host delays; do not tune NCCL for this — the time is waiting, not transfer.",
        verify: "Re-profile every rank: aisp_profile_ranks comm_wait should approach 0 on every rank.",
        quiet: "waiting for other ranks under 1% of the steady window",
    },
    needs_profile: false,
    eval: wait,
};

fn wait(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let arrivals = cx.ledger.arrivals.clone();
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let w = d.steady.columns.get(Column::CommWait);
        if w == 0 {
            continue;
        }
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            "measured per steady step: comm_wait — each collective kernel's duration minus the shortest duration of the \
             same instance on any rank (the last to arrive), where no compute runs beside it",
            &[Column::CommWait],
            |s| s.columns.get(Column::CommWait),
        );
        let mut evidence = vec![format!(
            "{} of the steady window ({}%) inside collectives waiting for the last rank to arrive",
            ms(w),
            d.share(w)
        )];
        let mut late = serde_json::Value::Null;
        if let Some(a) = &arrivals
            && !a.stragglers.is_empty()
        {
            let names: Vec<String> = a
                .stragglers
                .iter()
                .map(|&r| {
                    a.names
                        .get(r)
                        .cloned()
                        .unwrap_or_else(|| format!("position {r}"))
                })
                .collect();
            evidence.push(format!(
                "last to arrive more often than chance: {} ({:?} of {} decided instances; chance allows {})",
                names.join(", "),
                a.last,
                a.decided,
                a.chance_limit
            ));
            late = json!({"last": a.last, "decided": a.decided, "chance_limit": a.chance_limit});
        }
        drafts.push(dr.text(
            format!("Waiting for other ranks: {}% of the steady window inside collectives before the last rank arrives", d.share(w)),
            evidence,
            json!({"wait_ns": w, "wait_pct": d.share(w), "arrivals": late}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}
