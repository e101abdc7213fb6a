//! Rules on moving data: copies on the critical path, exposed communication,
//! and time spent inside collectives waiting for another rank.

use std::collections::BTreeMap;

use serde_json::json;

use super::super::Result;
use super::super::info;
use super::super::ledger::{Column, DeviceLedger, Group, StepLedger};
use super::super::memory;
use super::super::model::{ApiCall, Memcpy};
use super::super::nccl::Collective;
use super::super::{CorrelationIndex, correlation_index_for};
use super::registry::{RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, Stake, ms, per_step};
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
    shown_in: Shown::Copies,
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
        let mine: Vec<&Memcpy> = cx
            .p()?
            .memcpys()?
            .iter()
            .filter(|m| m.device == d.device && (m.copy_kind == h2d || m.copy_kind == d2h))
            .collect();
        let mut directions = Directions::new(cx, &mine)?;
        for m in mine {
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
            directions.add(cx, m, m.copy_kind == h2d);
            if pageable.is_some() && (m.src_kind == pageable || m.dst_kind == pageable) {
                n_pageable += 1;
            }
        }
        // A step whose copies, even at pinned bandwidth, outlast the rest of it is bound by the bytes it moves: no
        // overlap hides them, and only moving fewer bytes (a narrower dtype, the data kept on the device) shortens it.
        let exposed_of =
            |s: &StepLedger| -> i64 { COPY_COLUMNS.iter().map(|&c| s.columns.get(c)).sum() };
        let bound_by_bytes =
            |s: &StepLedger| pinned_time[s.index as usize] > s.period_ns - exposed_of(s);
        let bytes_bound_steps = d.steady_steps().filter(|s| bound_by_bytes(s)).count();
        let bytes_bound = bytes_bound_steps * 2 > d.steady.steps;
        let mut dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            format!(
                "estimate per steady step: its exposed copy time (h2d_*, d2h_*, idle_pageable_staging) minus what \
                 the overlap cannot hide: saving = min(exposed, period − the step's copies at pinned bandwidth); in a \
                 step whose copies at pinned bandwidth outlast the rest of it, the exposed copy time itself (only \
                 fewer bytes shorten it) [{}]",
                rate_note.join("; ")
            ),
            COPY_COLUMNS,
            |s| {
                let e = exposed_of(s);
                if bound_by_bytes(s) {
                    e
                } else {
                    e.min(s.period_ns - pinned_time[s.index as usize])
                }
            },
        );
        if bytes_bound {
            dr.fix = Some(
                "The copies outlast the rest of the step even at pinned bandwidth, so overlapping them cannot hide \
                 them: move fewer bytes. Keep the data (or a cache of it) on the device across steps where it fits; \
                 copy the narrowest dtype the data has (uint8 images, bf16/fp16 features, int32 ids) and convert, \
                 normalize or decode on the device; send only the rows a step uses."
                    .into(),
            );
            dr.fix_replaces = true;
        }
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
        if bytes_bound {
            evidence.push(format!(
                "in {bytes_bound_steps} of the {} steady steps the copies at pinned bandwidth outlast the rest of the \
                 step: the step is bound by the bytes it moves",
                d.steady.steps
            ));
        }
        let title = format!(
            "Copies on the critical path: {}% of the steady window moves data over PCIe with nothing else running ({} MB per step)",
            d.share(exposed),
            bytes / steps / 1_000_000
        );
        let (exposed_step, pageable_step) = (per_step(d, exposed), per_step(d, pageable_ns));
        let gb_per_s: BTreeMap<&str, f64> = [(h2d, "h2d"), (d2h, "d2h")]
            .iter()
            .map(|(k, label)| (*label, rates[k]))
            .collect();
        let split = directions.per_step(d.steady.steps);
        evidence.push(format!(
            "per step by direction: {}",
            split
                .iter()
                .map(DirectionStep::words)
                .collect::<Vec<_>>()
                .join("; ")
        ));
        let gist = format!(
            "per step: {}; {n_pageable} of {n} pageable; {} exposed, {} at pinned bandwidth",
            split
                .iter()
                .map(DirectionStep::words)
                .collect::<Vec<_>>()
                .join(", "),
            ms(exposed_step),
            ms(pinned_median),
        );
        drafts.push(dr.text(
            title,
            gist,
            evidence,
            json!({"copies": n, "pageable_copies": n_pageable, "bytes": bytes, "mb_per_step": bytes / steps / 1_000_000,
                "steps": d.steady.steps, "exposed_ns": exposed, "exposed_pct": d.share(exposed), "exposed_per_step_ns": exposed_step,
                "pageable_ns": pageable_ns, "pageable_per_step_ns": pageable_step,
                "hidden_copy_ns": d.steady.hidden_copy_ns, "saving_ns": saving, "pinned_median_ns": pinned_median,
                "pinned_gb_per_s": gb_per_s, "rates": rate_note, "bytes_bound_steps": bytes_bound_steps,
                "by_direction": split}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

/// A device's steady host copies per direction, with the NVTX region (of the launching thread) holding most of
/// each direction's bytes: an offload shows as copies down in the forward and up in the backward, an input pipeline
/// as copies up in a data range.
struct Directions<'a> {
    /// Copies, bytes, and bytes per region; `[0]` host to device, `[1]` device to host.
    per: [(u64, i64, BTreeMap<String, i64>); 2],
    /// The export's API calls, and the copies' launches among them.
    api: &'a [ApiCall],
    launches: CorrelationIndex,
}

impl<'a> Directions<'a> {
    fn new(cx: &Ctx<'a>, copies: &[&Memcpy]) -> Result<Directions<'a>> {
        let p = cx.p()?;
        let api = p.api()?;
        let correlation_only = p
            .tables()
            .memcpy
            .as_ref()
            .is_none_or(|t| !t.has("globalPid"));
        let launches = correlation_index_for(
            api,
            correlation_only,
            copies.iter().map(|m| (m.global_pid, m.correlation)),
        );
        Ok(Directions {
            per: Default::default(),
            api,
            launches,
        })
    }

    fn add(&mut self, cx: &Ctx, m: &Memcpy, to_device: bool) {
        let e = &mut self.per[usize::from(!to_device)];
        e.0 += 1;
        e.1 += m.bytes;
        let call = self
            .launches
            .find(m.global_pid, m.correlation)
            .and_then(|i| self.api.get(i as usize));
        if let Some(r) = call.and_then(|a| cx.region(a.global_tid, a.start)) {
            *e.2.entry(r).or_default() += m.bytes;
        }
    }

    /// Each direction with copies, per steady step.
    fn per_step(&self, steps: usize) -> Vec<DirectionStep> {
        let n = steps.max(1) as f64;
        self.per
            .iter()
            .zip(["H2D", "D2H"])
            .filter(|((count, _, _), _)| *count > 0)
            .map(|((count, bytes, regions), direction)| {
                // The region named only when it holds most of the direction's bytes; a per-iteration range
                // (`step_*`) encloses whole steps and says no place within one.
                let region = regions
                    .iter()
                    .filter(|(r, _)| !r.ends_with("_*"))
                    .max_by_key(|(r, b)| (**b, std::cmp::Reverse((*r).clone())))
                    .filter(|(_, b)| **b * 2 > *bytes)
                    .map(|(r, _)| r.clone());
                DirectionStep {
                    direction,
                    copies_per_step: (*count as f64 / n * 10.0).round() / 10.0,
                    mb_per_step: (*bytes as f64 / n / 1e6).round() as i64,
                    region,
                }
            })
            .collect()
    }
}

/// One copy direction of a device's steady window, per step.
#[derive(serde::Serialize)]
struct DirectionStep {
    direction: &'static str,
    copies_per_step: f64,
    mb_per_step: i64,
    /// The NVTX region holding most of its bytes, when one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    region: Option<String>,
}

impl DirectionStep {
    fn words(&self) -> String {
        let place = self
            .region
            .as_ref()
            .map_or(String::new(), |r| format!(" in NVTX `{r}`"));
        let noun = if self.copies_per_step == 1.0 {
            "copy"
        } else {
            "copies"
        };
        format!(
            "{} {} {noun} of {} MB{place}",
            self.direction, self.copies_per_step, self.mb_per_step
        )
    }
}

// ---------------------------------------------------------------------------------------------

pub const COMMUNICATION: RuleSpec = RuleSpec {
    id: "communication_not_overlapped",
    doc: "Collective kernel time with no compute kernel beside it: the transfer (comm_transfer) when the set's ranks \
          are known, else all exposed collective time (comm, which then includes waiting for other ranks).",
    what_if: "communication overlapped with the step's backward (DDP's bucketed all-reduce): each collective starts \
              once its gradients are produced (last-launched first, in proportion to their transfer), one at a time, \
              slowing the compute it overlaps by the SMs its thread blocks take; what the backward cannot hide, and \
              the last bucket, stay exposed",
    columns: &[Column::CommTransfer, Column::Comm],
    shown_in: Shown::Communication,
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

/// The share of a step's compute (outside the optimizer) that is backward: two GEMMs (input and weight
/// gradients) for each forward GEMM.
const BACKWARD_SHARE: f64 = 2.0 / 3.0;

/// What overlapping one step's serialized collectives with its backward would leave, in ns of the step: the
/// collectives become ready in the reverse of their launch order (gradients are produced last layer first, and
/// a per-parameter all-reduce loop launches them first layer first), each at the point of the backward where
/// its share of the transfer has been produced; they run one after another on the communication stream; while
/// one runs, the compute it overlaps loses the SMs its thread blocks take (slowdown SMs / (SMs − blocks)); what
/// is left when the backward ends is exposed. Returns (the old segment, the new one): backward + transfer, and
/// the simulated backward with its overlapped transfer and exposed tail.
pub(crate) fn overlapped_backward(
    backward_ns: i64,
    units: &[(i64, u32)],
    sm_count: Option<i64>,
) -> (i64, i64) {
    let total: i64 = units.iter().map(|u| u.0).sum();
    let bwd = backward_ns.max(0) as f64;
    if total <= 0 {
        return (backward_ns, backward_ns);
    }
    let (mut t, mut done, mut cum) = (0.0f64, 0.0f64, 0i64);
    for &(dur, ctas) in units.iter().rev() {
        cum += dur;
        let ready = bwd * cum as f64 / total as f64;
        if done < ready {
            t += ready - done;
            done = ready;
        }
        let slow = match sm_count {
            Some(sm) if sm > ctas as i64 && ctas > 0 => sm as f64 / (sm - ctas as i64) as f64,
            _ => 1.0,
        };
        let overlap = (dur as f64).min((bwd - done) * slow);
        done += overlap / slow;
        t += dur as f64;
    }
    if done < bwd {
        t += bwd - done;
    }
    (backward_ns + total, t.round() as i64)
}

/// Per steady step: its exposed collective time (the columns `cols`) and what a fix saves. An exposed broadcast
/// is saved whole: it re-sends the same data every step (DDP's buffer broadcast), needed only when that data
/// changed. Of the rest, a step whose collectives all run with no compute beside them (a hand-rolled all-reduce
/// after the backward) is simulated ([`overlapped_backward`]); a step that already overlaps some (DDP) can save the
/// exposed time except its last collective's, at most its compute time.
fn comm_savings(
    d: &DeviceLedger,
    cols: &[Column],
    broadcasts: &BTreeMap<u32, i64>,
) -> BTreeMap<u32, (i64, i64)> {
    // Per step, per collective kernel in launch order (kernel start, kernel): (exposed transfer, thread blocks).
    type Units = BTreeMap<(i64, u32), (i64, u32)>;
    let mut kernels: BTreeMap<u32, Units> = BTreeMap::new();
    for c in d.comm.iter().filter(|c| !c.point_to_point && !c.broadcast) {
        let e = kernels
            .entry(c.step)
            .or_default()
            .entry((c.kernel_start, c.kernel))
            .or_insert((0, c.ctas));
        e.0 += c.transfer_ns();
    }
    let mut out = BTreeMap::new();
    for s in d.steady_steps() {
        let all: i64 = cols.iter().map(|&c| s.columns.get(c)).sum();
        let broadcast = broadcasts.get(&s.index).copied().unwrap_or(0).min(all);
        let exposed = all - broadcast;
        let units: Vec<(i64, u32)> = kernels
            .get(&s.index)
            .map(|k| k.values().copied().filter(|u| u.0 > 0).collect())
            .unwrap_or_default();
        let compute = s.columns.group(Group::Compute);
        let saving = if s.hidden_communication_ns == 0 && units.len() >= 2 {
            let backward =
                ((compute - s.columns.get(Column::Optimizer)) as f64 * BACKWARD_SHARE) as i64;
            let (old, new) = overlapped_backward(backward, &units, d.sm_count);
            (old - new).clamp(0, exposed)
        } else {
            let tail = units.last().map_or(0, |u| u.0).min(exposed);
            (exposed - tail).min(compute)
        };
        out.insert(s.index, (all, broadcast + saving));
    }
    out
}

/// Per step: the exposed time of its broadcasts (their transfer: a broadcast is never split into wait).
fn broadcast_per_step(d: &DeviceLedger) -> BTreeMap<u32, i64> {
    let mut out = BTreeMap::new();
    for c in d.comm.iter().filter(|c| c.broadcast) {
        *out.entry(c.step).or_default() += c.transfer_ns();
    }
    out
}

fn communication(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let split = d.steady.columns.get(Column::CommTransfer) > 0
            || d.steady.columns.get(Column::CommWait) > 0;
        // In a set, collectives the split cannot divide (broadcasts, reductions to one rank) stay in `comm`.
        let cols: &[Column] = if split {
            &[Column::CommTransfer, Column::Comm]
        } else {
            &[Column::Comm]
        };
        let broadcasts = broadcast_per_step(d);
        let parts = comm_savings(d, cols, &broadcasts);
        let exposed: i64 = cols.iter().map(|&c| d.steady.columns.get(c)).sum();
        if exposed == 0 {
            continue;
        }
        let broadcast: i64 = d
            .steady_steps()
            .filter_map(|s| broadcasts.get(&s.index))
            .sum();
        let mut dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            if split {
                "estimate per steady step of its comm_transfer (collective time after the last rank arrived, with no \
                 compute beside it): where every collective of the step runs alone, the step's backward (2/3 of its \
                 compute outside the optimizer) overlapped with its collectives, ready last-launched first in \
                 proportion to their transfer, one at a time, the overlapped compute slowed by the SMs the \
                 collectives' thread blocks take; else the exposed transfer minus the last collective's, at most the \
                 step's compute time; collectives the split cannot divide (comm) counted whole; an exposed broadcast \
                 saved whole (not sent when its data has not changed)"
            } else {
                "estimate per steady step of its exposed collective time (comm): where every collective of the step \
                 runs alone, the step's backward (2/3 of its compute outside the optimizer) overlapped with its \
                 collectives, ready last-launched first in proportion to their time, one at a time, the overlapped \
                 compute slowed by the SMs the collectives' thread blocks take; else the exposed time minus the last \
                 collective's, at most the step's compute time — an upper bound: without the other ranks' exports, the \
                 time waiting for them inside the collectives is counted too, and overlap cannot remove waiting"
            },
            cols,
            |s| parts.get(&s.index).map_or(0, |p| p.1),
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
        if broadcast > 0 {
            evidence.push(format!(
                "{} of the exposed time ({} per steady step) is broadcasts: the same data sent to every rank again each \
                 step",
                ms(broadcast),
                ms(per_step(d, broadcast))
            ));
            if broadcast * 2 >= exposed {
                dr.fix = Some(
                    "Most of it is a broadcast every step: DistributedDataParallel re-sends every registered buffer at \
                     each forward (broadcast_buffers=True, the default). If the buffers do not change in training \
                     (constant tables, masks), pass broadcast_buffers=False or keep constant tensors out of the \
                     module's buffers; otherwise broadcast them only when they change. Not bucket or NCCL tuning: \
                     the data need not move at all."
                        .into(),
                );
                dr.fix_replaces = true;
            }
        }
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
        let kinds = exposed_by_kind(d);
        if !kinds.is_empty() {
            evidence.push(format!(
                "exposed per steady step by collective: {}",
                kinds
                    .iter()
                    .map(KindStep::words)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        // All-gathers that outweigh the rest of the exposed time are not the gradient all-reduce DDP overlaps.
        let gathers = kinds
            .iter()
            .find(|k| k.collective == Collective::AllGather)
            .map_or(0, |k| k.exposed_per_step_ns);
        if dr.fix.is_none() && gathers * 2 > per_step(d, exposed_all) {
            dr.fix = Some(
                "Most of it is all-gathers, not a gradient all-reduce. Outside FSDP / ZeRO (which gather parameters), \
                 an all-gather every step usually gathers outputs or metrics (all_gather / all_gather_into_tensor of \
                 logits, predictions or per-sample losses): reduce them on each rank first and all-reduce the few \
                 numbers, or gather only when logging. Under FSDP / ZeRO-3, prefetch the next gather \
                 (forward_prefetch, backward_prefetch) so that it overlaps compute."
                    .into(),
            );
            dr.fix_replaces = true;
        }
        // The split by kind says something only where there are several (the evidence names a lone one).
        let by_kind = match kinds.len() {
            0 | 1 => String::new(),
            _ => format!(
                "; most: {}",
                kinds
                    .iter()
                    .take(2)
                    .map(KindStep::words)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let gist = format!(
            "per steady step: collectives {}, {} of it hidden behind compute, {} exposed{}{by_kind}",
            ms(per_step(d, total_comm)),
            ms(per_step(d, hidden)),
            ms(per_step(d, exposed_all)),
            if split {
                format!(
                    " ({} transfer, {} waiting for the last rank)",
                    ms(per_step(d, exposed)),
                    ms(per_step(d, wait_col))
                )
            } else {
                " (waiting for other ranks included: their exports are not given)".to_string()
            }
        );
        drafts.push(dr.text(
            title,
            gist,
            evidence,
            json!({"total_per_step_ns": per_step(d, total_comm), "hidden_per_step_ns": per_step(d, hidden),
                "exposed_all_per_step_ns": per_step(d, exposed_all), "exposed_per_step_ns": per_step(d, exposed),
                "wait_per_step_ns": per_step(d, wait_col),
                "exposed_ns": exposed, "exposed_pct": d.share(exposed), "hidden_ns": hidden, "total_ns": total_comm,
                "wait_ns": wait_col, "exposed_all_ns": exposed_all, "exposed_all_pct": d.share(exposed_all),
                "split": split, "saving_ns": saving, "broadcast_ns": broadcast, "exposed_by_kind": kinds}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

/// One kind of collective's exposed time in a device's steady window, per step.
#[derive(serde::Serialize)]
struct KindStep {
    collective: Collective,
    exposed_per_step_ns: i64,
    launches_per_step: f64,
}

impl KindStep {
    fn words(&self) -> String {
        format!(
            "{:?} {} ({} launches)",
            self.collective,
            ms(self.exposed_per_step_ns),
            self.launches_per_step
        )
    }
}

/// The exposed time (wait included) of a device's steady collectives per kind, largest first; point-to-point
/// kernels are the pipeline rule's.
fn exposed_by_kind(d: &DeviceLedger) -> Vec<KindStep> {
    let mut m: BTreeMap<Collective, (i64, std::collections::BTreeSet<u32>)> = BTreeMap::new();
    for c in d.comm.iter().filter(|c| !c.point_to_point) {
        if d.steps.get(c.step as usize).is_none_or(|s| s.warmup) {
            continue;
        }
        let e = m
            .entry(c.collective.unwrap_or(Collective::Other))
            .or_default();
        e.0 += c.end - c.start;
        e.1.insert(c.kernel);
    }
    let n = d.steady.steps.max(1);
    let mut v: Vec<KindStep> = m
        .into_iter()
        .filter(|(_, (ns, _))| *ns > 0)
        .map(|(collective, (ns, kernels))| KindStep {
            collective,
            exposed_per_step_ns: ns / n as i64,
            launches_per_step: (kernels.len() as f64 / n as f64 * 10.0).round() / 10.0,
        })
        .collect();
    v.sort_by_key(|k| std::cmp::Reverse(k.exposed_per_step_ns));
    v
}

pub const WAIT: RuleSpec = RuleSpec {
    id: "collective_wait",
    doc: "Time inside collectives before the last rank arrived, with no compute beside it (comm_wait): this rank \
          waits for a slower one.",
    what_if: "the ranks arrive together (the late rank's extra work or host delay removed): the wait goes",
    columns: &[Column::CommWait],
    shown_in: Shown::Communication,
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
            let last_of_them: u64 = a.stragglers.iter().map(|&r| a.last[r]).sum();
            late = json!({"last": a.last, "decided": a.decided, "chance_limit": a.chance_limit,
                "names": names.join(", "), "last_of_them": last_of_them});
        }
        let gist = format!(
            "{} per steady step inside collectives before the last rank arrives{}",
            ms(per_step(d, w)),
            match &arrivals {
                Some(a) if !a.stragglers.is_empty() => format!(
                    "; last to arrive: {} at {} of {} decided instances (chance allows {:.1})",
                    late["names"].as_str().unwrap_or("-"),
                    late["last_of_them"],
                    a.decided,
                    a.chance_limit
                ),
                _ => String::new(),
            }
        );
        drafts.push(dr.text(
            format!("Waiting for other ranks: {}% of the steady window inside collectives before the last rank arrives", d.share(w)),
            gist,
            evidence,
            json!({"wait_ns": w, "wait_pct": d.share(w), "wait_per_step_ns": per_step(d, w), "arrivals": late}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

pub const PIPELINE: RuleSpec = RuleSpec {
    id: "pipeline_bubble",
    doc: "Point-to-point kernels (send/recv) that run far longer than their transfer, with no compute beside them: a \
          pipeline stage waiting inside the receive for its neighbouring stage to finish its part (comm_p2p).",
    what_if: "the stages kept busy together (micro-batches interleaved, or data parallelism where the model fits one \
              GPU): the wait inside send/recv goes, the transfers stay",
    columns: &[Column::CommP2p],
    shown_in: Shown::Communication,
    text: RuleText {
        why: "With one batch per step and no micro-batches, pipeline stages compute in turn: a stage that has passed \
              its activations on (or waits for their gradients) sits inside the receive kernel until its neighbour \
              has done its part, so each GPU idles for the others' compute.",
        fix: "Keep the stages busy together: split the batch into micro-batches and interleave them (GPipe or 1F1B \
              schedules, torch.distributed.pipelining): with m micro-batches over p stages the bubble is about \
              (p-1)/(m+p-1) of the step; or, where the whole model fits one GPU, use data parallelism (DDP) instead \
              of the split. Not NCCL tuning or a faster link: the time is waiting, not transfer.",
        verify: "Re-profile every rank: aisp_profile_ledger comm_p2p per step should shrink to the transfers.",
        quiet: "waiting inside point-to-point kernels under 1% of the steady window",
    },
    needs_profile: false,
    eval: pipeline,
};

/// One step's point-to-point kernels as (their exposed time each): the wait is what each runs beyond the step's
/// shortest, taken as one transfer (a lower bound on the wait: the shortest may wait too, and a message no larger
/// than the others moves no slower). Returns (exposed, wait).
pub(crate) fn point_to_point_wait(exposed: &[i64]) -> (i64, i64) {
    let total: i64 = exposed.iter().sum();
    let Some(&shortest) = exposed.iter().min() else {
        return (0, 0);
    };
    (total, exposed.iter().map(|e| e - shortest).sum())
}

fn pipeline(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        // Per steady step, per point-to-point kernel: its exposed time.
        let mut by_step: BTreeMap<u32, BTreeMap<u32, i64>> = BTreeMap::new();
        for c in d.comm.iter().filter(|c| c.point_to_point) {
            *by_step
                .entry(c.step)
                .or_default()
                .entry(c.kernel)
                .or_default() += c.end - c.start;
        }
        let split: BTreeMap<u32, (i64, i64, usize)> = by_step
            .iter()
            .map(|(&step, k)| {
                let exposed: Vec<i64> = k.values().copied().collect();
                let (total, wait) = point_to_point_wait(&exposed);
                (step, (total, wait, exposed.len()))
            })
            .collect();
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            "estimate per steady step: the exposed time of each point-to-point kernel (send/recv, no compute beside \
             it) beyond the step's shortest one, taken as a transfer",
            &[Column::CommP2p],
            |s| split.get(&s.index).map_or(0, |v| v.1),
        );
        let wait = dr.total();
        let steady: Vec<&(i64, i64, usize)> = d
            .steady_steps()
            .filter_map(|s| split.get(&s.index))
            .collect();
        let exposed: i64 = steady.iter().map(|v| v.0).sum();
        if wait == 0 || steady.is_empty() {
            continue;
        }
        let kernels = steady.iter().map(|v| v.2).max().unwrap_or(0);
        let gist = format!(
            "per steady step: send/recv {} with no compute beside it, about {} of it waiting for the other stage (up to \
             {kernels} point-to-point kernels a step, each beyond the step's shortest)",
            ms(per_step(d, exposed)),
            ms(per_step(d, wait))
        );
        drafts.push(dr.text(
            format!(
                "Pipeline stages waiting for each other: {}% of the steady window inside send/recv, waiting for the \
                 neighbouring stage",
                d.share(wait)
            ),
            gist,
            vec![format!(
                "point-to-point kernels run {} with no compute beside them in the steady window ({}%), {} of it beyond \
                 each step's shortest send/recv: waiting, not transfer",
                ms(exposed),
                d.share(exposed),
                ms(wait)
            )],
            json!({"exposed_ns": exposed, "exposed_pct": d.share(exposed), "wait_ns": wait, "wait_pct": d.share(wait),
                "exposed_per_step_ns": per_step(d, exposed), "wait_per_step_ns": per_step(d, wait),
                "kernels_per_step": kernels}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_waits_for_what_its_send_recv_runs_beyond_the_shortest() {
        // Rank 0 of two stages: its send of activations 0.10 ms, its receive of gradients 10.99 ms.
        assert_eq!(
            point_to_point_wait(&[100_000, 10_990_000]),
            (11_090_000, 10_890_000)
        );
        // Transfers of equal length wait for nothing; no kernels, nothing.
        assert_eq!(point_to_point_wait(&[100_000, 100_000]), (200_000, 0));
        assert_eq!(point_to_point_wait(&[]), (0, 0));
    }

    #[test]
    fn an_overlapped_backward_hides_what_it_can_and_pays_for_the_sms() {
        // 7 ms of backward, four 1.2 ms all-reduces, no SM cost: ready at 1.75, 3.5, 5.25, 7 ms; the last runs
        // after the backward.
        let units = [
            (1_200_000, 0),
            (1_200_000, 0),
            (1_200_000, 0),
            (1_200_000, 0),
        ];
        let (old, new) = overlapped_backward(7_000_000, &units, None);
        assert_eq!(old, 11_800_000);
        assert_eq!(new, 8_200_000);
        // NCCL on 24 of 132 SMs: the overlapped compute runs 132/108 slower, so the backward ends later.
        let units24: Vec<(i64, u32)> = units.iter().map(|u| (u.0, 24)).collect();
        let (_, slow) = overlapped_backward(7_000_000, &units24, Some(132));
        assert!(
            slow > new && slow < new + 3 * 1_200_000 * 24 / 108,
            "{slow}"
        );
        // One collective: nothing to overlap before its gradients are all produced.
        assert_eq!(
            overlapped_backward(7_000_000, &[(1_000_000, 24)], Some(132)),
            (8_000_000, 8_000_000)
        );
    }
}
