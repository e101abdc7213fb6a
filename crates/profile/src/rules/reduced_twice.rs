//! Gradients all-reduced twice. DistributedDataParallel all-reduces every gradient in buckets during the backward;
//! a leftover hand-written average (flatten the gradients, `dist.all_reduce`, divide, copy back) then moves the
//! same bytes again after the backward, where nothing overlaps it. In a trace: in each step, one all-reduce whose
//! message is as large as all the step's other all-reduces together (NCCL's own record of each call's size), the
//! step's volume reduced twice. At stake is that all-reduce's time beside no compute kernel (the flatten, divide
//! and copies around it are not counted: a lower bound of what removing it saves).

use std::collections::HashMap;

use serde_json::json;

use super::super::Result;
use super::super::ledger::StepLedger;
use super::super::nccl::{self, Collective};
use super::super::nccl_payloads;
use super::super::stats::pct2;
use super::registry::{RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, Stake, bounded_savings, ms, per_step, steady_kernels, step_at};

/// Shares below this are not findings.
const MIN_SHARE_PCT: f64 = 1.0;

/// How close the large all-reduce's size must be to the others' sum: the same volume, within 10 %.
const SAME_VOLUME: (f64, f64) = (0.9, 1.1);

pub const REDUCED_TWICE: RuleSpec = RuleSpec {
    id: "gradients_reduced_twice",
    doc: "In each steady step one all-reduce carries as many bytes as all the step's other all-reduces together (NCCL's \
          recorded sizes): the step's gradients reduced twice, as a hand-written average after DDP's buckets does.",
    what_if: "the second reduction removed (DDP already averages the gradients): that all-reduce's time beside no \
              compute goes, bounded by the host's issue time; a lower bound (the flatten, divide and copies around it \
              go too)",
    columns: &[],
    shown_in: Shown::Communication,
    text: RuleText {
        why: "DistributedDataParallel all-reduces and averages every gradient during the backward, in buckets that \
              overlap the remaining backward compute. Reducing the gradients again afterwards (a helper that flattens \
              them, calls dist.all_reduce and divides by the world size, left over from before DDP) moves the same \
              bytes a second time with nothing to overlap it, and leaves the gradients unchanged: the average of \
              equal values.",
        fix: "Delete the manual gradient all-reduce (and its flatten / divide / copy-back) when the model is wrapped \
              in DistributedDataParallel; if a custom reduction is wanted, register it as a DDP communication hook \
              instead of running it after backward.",
        verify: "Re-profile every rank: aisp_profile_kernels shows one all-reduce kernel fewer per step, and the step \
                 shrinks by about the time at stake.",
        quiet: "no step has one all-reduce as large as all its other all-reduces together",
    },
    needs_profile: true,
    eval: reduced_twice,
};

/// One all-reduce kernel of a steady step.
struct Reduce {
    step: u32,
    bytes: i64,
    start: i64,
    end: i64,
}

/// Among a step's all-reduces, the one whose size matches all the others' together, if there is one. It must be
/// at least twice the next largest and have two others or more beside it: DDP's own buckets (a small first one,
/// then buckets of one cap size) can add up to their largest, but none is twice the size of another full bucket.
fn second_pass(reduces: &[&Reduce]) -> Option<usize> {
    let total: i64 = reduces.iter().map(|r| r.bytes).sum();
    let (i, largest) = reduces.iter().enumerate().max_by_key(|(_, r)| r.bytes)?;
    let rest = total - largest.bytes;
    let next = reduces
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, r)| r.bytes)
        .max()
        .unwrap_or(0);
    (reduces.len() >= 3
        && rest > 0
        && largest.bytes >= 2 * next
        && (largest.bytes as f64) >= SAME_VOLUME.0 * rest as f64
        && (largest.bytes as f64) <= SAME_VOLUME.1 * rest as f64)
        .then_some(i)
}

fn reduced_twice(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let p = cx.p()?;
    let kernels = p.kernels()?;
    let messages = nccl_payloads::kernel_messages(p)?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let steps: Vec<&StepLedger> = d.steady_steps().collect();
        let mut reduces: Vec<Reduce> = Vec::new();
        // Compute kernels of the window, for the time the second pass has nothing beside it.
        let mut compute: Vec<(i64, i64)> = Vec::new();
        for (ki, k) in steady_kernels(kernels, d) {
            let short = p.string(k.short_name);
            if !nccl::is_nccl(short) {
                compute.push((k.start, k.end));
                continue;
            }
            let Some(m) = messages.get(&(ki as u32)) else {
                continue;
            };
            let is_reduce =
                m.collective.unwrap_or_else(|| Collective::of(short)) == Collective::AllReduce;
            if let (true, Some(bytes), Some(s)) = (is_reduce, m.bytes, step_at(&steps, k.start)) {
                reduces.push(Reduce {
                    step: s.index,
                    bytes,
                    start: k.start,
                    end: k.end,
                });
            }
        }
        let compute = super::super::intervals::union(compute);
        let mut by_step: HashMap<u32, Vec<&Reduce>> = HashMap::new();
        for r in &reduces {
            by_step.entry(r.step).or_default().push(r);
        }
        // Per step with a second pass: its time beside no compute kernel, and its size.
        let mut saving: HashMap<u32, i64> = HashMap::new();
        let (mut bytes, mut others, mut time) = (0i64, 0i64, 0i64);
        for (step, rs) in &by_step {
            let Some(j) = second_pass(rs) else { continue };
            let r = rs[j];
            let alone = (r.end - r.start)
                - super::super::intervals::clipped_length(&compute, (r.start, r.end));
            saving.insert(*step, alone);
            bytes += r.bytes;
            others += rs.iter().map(|x| x.bytes).sum::<i64>() - r.bytes;
            time += r.end - r.start;
        }
        // Every steady step, or nearly: a pattern of the loop, not one odd step.
        let with = saving.len();
        if with == 0 || with * 10 < d.steady.steps * 9 {
            continue;
        }
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            "estimate per steady step: the time of the all-reduce as large as the step's other all-reduces together, \
             beside no compute kernel, no more than the step's period minus the host's issue time; a lower bound",
            &[],
            bounded_savings(&saving),
        );
        let at_stake = dr.total();
        let n = with as i64;
        let (gb, others_gb) = (
            bytes as f64 / n as f64 / 1e9,
            others as f64 / n as f64 / 1e9,
        );
        drafts.push(dr.text(
            format!(
                "Gradients all-reduced twice: one all-reduce per step as large as all the others together takes {}% of \
                 the steady window",
                d.share(time)
            ),
            format!(
                "per steady step ({with} of {}): one all-reduce of {gb:.2} GB ({}, {} beside no compute) besides the \
                 step's other all-reduces moved {others_gb:.2} GB: the same volume reduced again",
                d.steady.steps,
                ms(time / n),
                ms(at_stake / n)
            ),
            vec![
                format!(
                    "{with} of {} steady steps each hold one all-reduce whose NCCL message ({gb:.2} GB a step) is {}% \
                     of the step's other all-reduces together ({others_gb:.2} GB)",
                    d.steady.steps,
                    pct2(bytes, others)
                ),
                format!(
                    "those all-reduces take {} ({}% of the steady window), {} of it beside no compute kernel",
                    ms(time),
                    d.share(time),
                    ms(at_stake)
                ),
            ],
            json!({"steps_with": with, "steps": d.steady.steps, "bytes": bytes, "other_bytes": others,
                "bytes_per_step": bytes / n, "other_bytes_per_step": others / n, "time_ns": time,
                "time_per_step_ns": time / n, "time_pct": d.share(time), "saving_ns": at_stake,
                "saving_per_step_ns": per_step(d, at_stake)}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(bytes: i64) -> Reduce {
        Reduce {
            step: 0,
            bytes,
            start: 0,
            end: 1,
        }
    }

    #[test]
    fn a_second_pass_moves_the_volume_of_all_the_others() {
        // DDP's buckets (3 of 400 MB) and a helper's all-reduce of all 1.2 GB: the helper's.
        let (a, b, c, all) = (r(400), r(400), r(400), r(1200));
        assert_eq!(second_pass(&[&a, &b, &c, &all]), Some(3));
        // Buckets alone, or a small metric beside them: no second pass.
        assert_eq!(second_pass(&[&a, &b, &c]), None);
        let metric = r(4);
        assert_eq!(second_pass(&[&a, &b, &c, &metric]), None);
        // One all-reduce in the step: nothing to compare with.
        assert_eq!(second_pass(&[&all]), None);
        // DDP's own buckets: a small first one and two full ones add up to their largest, which is no second pass.
        let (first, full) = (r(1), r(25));
        assert_eq!(second_pass(&[&first, &full, &full]), None);
    }
}
