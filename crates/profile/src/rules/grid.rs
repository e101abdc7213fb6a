//! A kernel launched with at most half as many blocks as the GPU has SMs leaves the rest
//! of the GPU idle while it runs: a normalization over a few huge rows (one
//! block per row), a reduction or a GEMM too small to split. The device is
//! "busy" in the timeline and no idle column shows it; only the launch's grid
//! against the SM count does.

use std::collections::HashMap;

use serde_json::json;

use super::super::Result;
use super::super::classify::{self, KernelClass};
use super::super::ledger::{self, DeviceLedger};
use super::super::model::Kernel;
use super::registry::{RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, Stake, bounded_savings, ms, per_step, steady_kernels, step_at};

/// Shares below this are not findings.
const MIN_SHARE_PCT: f64 = 1.0;

pub const UNDERFILLED_GRID: RuleSpec = RuleSpec {
    id: "underfilled_grid",
    doc: "Kernels of 20 us or more launched with at most half as many blocks as the GPU has SMs, running alone on the device \
          (no other kernel overlaps them): most SMs sit idle while they run.",
    what_if: "each such launch's work spread over every SM at the rate its blocks ran: its time times (1 − blocks / \
              SMs), bounded by the host's issue time; an upper bound (work that cannot be split saves nothing)",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "A block runs on one SM. A launch of B blocks on a GPU of S SMs keeps at most B of them busy, so while it \
              runs S − B SMs do nothing, however busy the timeline looks. Each block then has a large share of the \
              work, and the kernel takes up to S / B times longer than a launch that fills the GPU.",
        fix: "Give the kernel more blocks: normalize over a smaller trailing shape so that rows are many and short (a \
              LayerNorm over [C, H, W] is one block per sample, and so is GroupNorm(1, C): use GroupNorm with enough \
              groups that batch × groups covers the SMs, or LayerNorm over channels after a permute), split each \
              row's work over several blocks (a split or two-pass reduction, split-K for a GEMM), or batch several \
              small launches into one (a larger batch, grouped GEMMs).",
        verify: "Re-profile: aisp_profile_kernels shows the kernel with a grid of at least the SM count and a shorter \
                 time per call.",
        quiet: "no kernel with at most half as many blocks as SMs, alone on the device, holds 1% of the steady window",
    },
    needs_profile: true,
    eval: underfilled_grid,
};

/// A launch's saving if its blocks covered every SM: its time times the share of SMs its grid leaves idle.
fn saving_of(k: &Kernel, sms: u64) -> i64 {
    let blocks = k.blocks().min(sms);
    (k.dur() as f64 * (sms - blocks) as f64 / sms as f64) as i64
}

/// What one kernel name adds up to in the steady window.
#[derive(Default)]
struct Name {
    launches: u64,
    time_ns: i64,
    saving_ns: i64,
    blocks: u64,
}

fn underfilled_grid(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let p = cx.p()?;
    let kernels = p.kernels()?;
    let mut drafts = Vec::new();
    let mut no_sms = false;
    for (i, d) in cx.devices() {
        let Some(sms) = d.sm_count.filter(|&s| s > 1).map(|s| s as u64) else {
            no_sms = true;
            continue;
        };
        let (by_step, names) = underfilled(cx, kernels, d, sms)?;
        if by_step.is_empty() {
            continue;
        }
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            "estimate per steady step: Σ over its launches with at most half as many blocks as SMs, alone on the device, \
             of (time × (1 − blocks / SMs)), no more than the step's period minus the host's issue time; an upper \
             bound",
            &[],
            bounded_savings(&by_step),
        );
        let saving = dr.total();
        let (launches, time) = names
            .values()
            .fold((0u64, 0i64), |(n, t), x| (n + x.launches, t + x.time_ns));
        let Some((top, top_name)) = names
            .iter()
            .max_by_key(|(id, x)| (x.saving_ns, std::cmp::Reverse(**id)))
            .map(|(id, x)| (x, p.string(*id).to_string()))
        else {
            continue;
        };
        // One decimal, as the gist prints it and `data` holds it.
        let launches_step = (launches as f64 / d.steady.steps.max(1) as f64 * 10.0).round() / 10.0;
        let gist = format!(
            "{launches_step:.1} launches per steady step with at most half as many blocks as the {sms} SMs: {} per step; \
             most in `{top_name}` ({} blocks, {} in the steady window)",
            ms(per_step(d, time)),
            top.blocks,
            ms(top.time_ns)
        );
        drafts.push(dr.text(
            format!(
                "Under-filled grids: kernels that use at most half the {sms} SMs take {}% of the steady window; \
                 filling the GPU saves up to {}%",
                d.share(time),
                d.share(saving)
            ),
            gist,
            vec![
                format!(
                    "{launches} launches of {} kernel(s) in the steady window, each 20 us or more, alone on the \
                     device, with at most half as many blocks as the {sms} SMs: {} ({}% of the steady window)",
                    names.len(),
                    ms(time),
                    d.share(time)
                ),
                format!(
                    "`{top_name}`: {} launches of {} blocks, {} in all; spread over {sms} SMs about {} of it would \
                     go",
                    top.launches,
                    top.blocks,
                    ms(top.time_ns),
                    ms(top.saving_ns)
                ),
            ],
            json!({"sm_count": sms, "launches": launches, "launches_per_step": launches_step, "kernels": names.len(), "time_ns": time,
                "time_pct": d.share(time), "time_per_step_ns": per_step(d, time), "steps": d.steady.steps,
                "top_kernel": top_name, "top_blocks": top.blocks, "top_launches": top.launches,
                "top_time_ns": top.time_ns, "top_saving_ns": top.saving_ns, "kernel_saving_ns": names.values().map(|x| x.saving_ns).sum::<i64>(),
                "saving_ns": saving, "saving_pct": d.share(saving), "min_kernel_ns": super::super::model::UNDERFILL_MIN_NS}),
        ));
    }
    if drafts.is_empty() && no_sms {
        cx.skip(
            spec.id,
            "not_applicable",
            "the export does not record the GPU's SM count",
        );
        return Ok(());
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

/// Per steady step (by index), the saving of its under-filled launches; per kernel name, what they add up to.
fn underfilled(
    cx: &Ctx,
    kernels: &[Kernel],
    d: &DeviceLedger,
    sms: u64,
) -> Result<(HashMap<u32, i64>, HashMap<i64, Name>)> {
    let p = cx.p()?;
    // Whether a kernel name may count: not a collective (NCCL sizes its grid to its channels on purpose).
    let mut counts: HashMap<i64, bool> = HashMap::new();
    let on_device: Vec<&Kernel> = steady_kernels(kernels, d).map(|(_, k)| k).collect();
    let mut by_step: HashMap<u32, i64> = HashMap::new();
    let mut names: HashMap<i64, Name> = HashMap::new();
    let steps: Vec<&ledger::StepLedger> = d.steady_steps().collect();
    // The latest end among the kernels before each one: whether an earlier kernel still runs beside it.
    let mut latest_end = i64::MIN;
    for (j, k) in on_device.iter().enumerate() {
        let alone = latest_end <= k.start && on_device.get(j + 1).is_none_or(|n| n.start >= k.end);
        latest_end = latest_end.max(k.end);
        let blocks = k.blocks();
        if !alone || !k.underfills(sms) {
            continue;
        }
        let counted = *counts.entry(k.demangled_name).or_insert_with(|| {
            classify::classify(
                p.string(k.demangled_name),
                p.string(k.short_name),
                k.grid,
                k.block,
            )
            .class
                != KernelClass::Communication
        });
        if !counted {
            continue;
        }
        let Some(step) = step_at(&steps, k.start) else {
            continue;
        };
        let saving = saving_of(k, sms);
        *by_step.entry(step.index).or_default() += saving;
        let n = names.entry(k.short_name).or_default();
        n.launches += 1;
        n.time_ns += k.dur();
        n.saving_ns += saving;
        n.blocks = n.blocks.max(blocks);
    }
    Ok((by_step, names))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(blocks: u32, dur: i64) -> Kernel {
        Kernel {
            start: 0,
            end: dur,
            device: 0,
            stream: 7,
            correlation: 1,
            global_pid: 0,
            short_name: 0,
            demangled_name: 0,
            grid: [blocks, 1, 1],
            block: [128, 1, 1],
            registers: 32,
            static_smem: 0,
            dynamic_smem: 0,
        }
    }

    /// 16 blocks on 132 SMs leave 116 idle: spread over all of them, 116/132 of the time would go.
    #[test]
    fn the_saving_is_the_share_of_sms_the_grid_leaves_idle() {
        assert_eq!(saving_of(&kernel(16, 132_000), 132), 116_000);
        assert_eq!(saving_of(&kernel(132, 132_000), 132), 0);
        assert_eq!(saving_of(&kernel(1_000, 132_000), 132), 0);
    }
}
