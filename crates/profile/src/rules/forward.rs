//! A forward or a backward that runs again in each training step. The trace
//! shows it through kernel kinds whose forward and backward kernels pair one to
//! one (attention, layer norm, softmax, GELU): forward kernels running more
//! often than their backward ones are a forward run twice (activation
//! checkpointing recomputing blocks, or a second forward of the same batch for
//! metrics); backward kernels running more often than their forward ones are a
//! backward run more than once through the same graph (several losses each
//! back-propagated with `retain_graph=True`).

use serde_json::json;

use super::super::Result;
use super::super::ledger::{self, Column, DeviceLedger, Group};
use super::registry::{RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, Stake, ms, per_step, steady_kernels};

/// Shares below this are not findings.
const MIN_SHARE_PCT: f64 = 1.0;

/// A family's forward kernels run at least this many times per backward kernel before the excess counts as a
/// repeated forward: recomputing or re-running whole blocks doubles them; one odd call does not.
const REPEAT_RATIO: f64 = 1.5;

/// Kernel kinds whose forward and backward kernels are launched once per call each, so their counts pair up in a
/// training step: (name, is a forward kernel, is a backward kernel), on the kernel's short name, or on its
/// demangled name where the kind is a functor of a generic elementwise kernel.
struct Family {
    name: &'static str,
    demangled: bool,
    forward: fn(&str) -> bool,
    backward: fn(&str) -> bool,
}

const FAMILIES: [Family; 4] = [
    Family {
        name: "attention",
        demangled: false,
        forward: |n| {
            n.contains("flash_fwd")
                || (n.contains("sdpa") && n.contains("fprop"))
                || n.contains("fmha_cutlassF")
        },
        backward: |n| {
            n.contains("flash_bwd_dq_dk_dv")
                || (n.contains("sdpa") && n.contains("bprop"))
                || n.contains("fmha_cutlassB")
        },
    },
    Family {
        name: "layer norm",
        demangled: false,
        forward: |n| {
            n.contains("vectorized_layer_norm_kernel") || n.contains("LayerNormForwardCUDAKernel")
        },
        backward: |n| n.contains("layer_norm_grad_input_kernel"),
    },
    Family {
        name: "softmax",
        demangled: false,
        forward: |n| n.contains("softmax_warp_forward") || n.contains("cunn_SoftMaxForward"),
        backward: |n| n.contains("softmax_warp_backward") || n.contains("cunn_SoftMaxBackward"),
    },
    Family {
        name: "GELU",
        demangled: true,
        forward: |n| n.contains("GeluCUDAKernelImpl"),
        backward: |n| n.contains("GeluBackwardCUDAKernelImpl"),
    },
];

pub const FORWARD_REPEATED: RuleSpec = RuleSpec {
    id: "forward_repeated",
    doc: "In a training step, forward kernels whose backward kernel runs once per call (attention, layer norm, \
          softmax) run at least 1.5 times as often as that backward kernel: part of the forward runs twice.",
    what_if: "the repeated part of the forward not run again: with a fraction f of the forward repeated, the step's \
              compute (optimizer apart) is forward × (3 + f) (the backward costs about twice the forward), so f / (3 + \
              f) of it goes, bounded by the host's issue time",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "A forward run twice costs its GEMMs, attention and elementwise work again: activation checkpointing trades \
              that time for activation memory; a second forward of the same batch for metrics or logging buys nothing \
              the first forward did not already compute.",
        fix: "If activation checkpointing is on: checkpoint fewer blocks, or only the cheap-to-recompute parts (selective \
              checkpointing), as far as memory allows (the trace does not record memory headroom). If the loop runs a \
              second forward of the same batch (accuracy, logging, an EMA model): take the metric from the training \
              forward's outputs (detached), or compute it every N steps. If part of the model runs without gradients \
              (a frozen encoder), its forward is not repeated and this finding does not apply.",
        verify: "Re-profile: aisp_profile_rules should no longer report forward_repeated, and the step should shrink by \
                 about the time at stake.",
        quiet: "in the training steps, no forward kernel runs 1.5 times as often as its backward kernel",
    },
    needs_profile: true,
    eval: forward_repeated,
};

/// Per family: (forward calls, backward calls) in the device's steady window.
fn family_counts(cx: &Ctx, d: &DeviceLedger) -> Result<Vec<(&'static str, u64, u64)>> {
    let p = cx.p()?;
    let mut counts = [(0u64, 0u64); FAMILIES.len()];
    // Per kernel name: the family and direction it counts for (matched once per name, not per launch).
    let mut kind: std::collections::HashMap<i64, Option<(usize, bool)>> = Default::default();
    for (_, k) in steady_kernels(p.kernels()?, d) {
        let counted = *kind.entry(k.demangled_name).or_insert_with(|| {
            let short = p.string(k.short_name);
            let demangled = p.string(k.demangled_name);
            FAMILIES.iter().enumerate().find_map(|(i, f)| {
                let name = if f.demangled { demangled } else { short };
                if (f.backward)(name) {
                    Some((i, false))
                } else if (f.forward)(name) {
                    Some((i, true))
                } else {
                    None
                }
            })
        });
        match counted {
            Some((i, true)) => counts[i].0 += 1,
            Some((i, false)) => counts[i].1 += 1,
            None => {}
        }
    }
    Ok(FAMILIES
        .iter()
        .zip(counts)
        .filter(|(_, (fw, bw))| *fw > 0 && *bw > 0)
        .map(|(f, (fw, bw))| (f.name, fw, bw))
        .collect())
}

/// Which way a pass repeats: a forward run again (forward kernels outnumber their backward ones), or a backward run
/// again (the other way round).
#[derive(Clone, Copy, PartialEq)]
enum Repeated {
    Forward,
    Backward,
}

/// What the counts say of a device whose passes repeat, and the draft of the time its repeats take.
struct Repeats {
    draft: Draft,
    /// Forward: the fraction f of the forward run again (at most 1); backward: the extra passes b.
    extra: f64,
    share_of_compute: f64,
    families: Vec<(&'static str, u64, u64)>,
    /// "attention 4 forward / 4 backward, ..." per steady step.
    pairs: String,
    compute_step: i64,
}

/// The repeats of device `i` in the `way` asked, or `None` when no family shows them. A repeated fraction f of the
/// forward is f / (3 + f) of the step's compute without the optimizer (the backward costs about twice the forward);
/// b extra backward passes are 2b / (3 + 2b) of it. Either fix also removes the repeats' launches, so the saving is
/// bounded by the host's issue time less the same share.
fn repeats_of(cx: &Ctx, i: usize, way: Repeated) -> Result<Option<Repeats>> {
    let d = &cx.ledger.devices[i];
    let families = family_counts(cx, d)?;
    let (ratio, cap) = match way {
        Repeated::Forward => (REPEAT_RATIO, 1.0),
        Repeated::Backward => (BACKWARD_REPEAT_RATIO, MAX_EXTRA_BACKWARDS),
    };
    // (more, fewer): the direction that repeats first.
    let oriented = |fw: u64, bw: u64| match way {
        Repeated::Forward => (fw, bw),
        Repeated::Backward => (bw, fw),
    };
    let (more, fewer) = families
        .iter()
        .map(|&(_, fw, bw)| oriented(fw, bw))
        .filter(|&(more, fewer)| more as f64 >= ratio * fewer as f64)
        .fold((0u64, 0u64), |(a, b), (m, f)| (a + m, b + f));
    if fewer == 0 {
        return Ok(None);
    }
    let extra = ((more - fewer) as f64 / fewer as f64).min(cap);
    let share_of_compute = match way {
        Repeated::Forward => extra / (3.0 + extra),
        Repeated::Backward => 2.0 * extra / (3.0 + 2.0 * extra),
    };
    let compute =
        |s: &ledger::StepLedger| s.columns.group(Group::Compute) - s.columns.get(Column::Optimizer);
    let basis = match way {
        Repeated::Forward => format!(
            "estimate per steady step: {share_of_compute:.3} (f / (3 + f), f = {extra:.2} of the forward repeated) of \
             the step's compute without the optimizer, no more than the step's period minus the host's issue time \
             left once the repeated forward's launches go (the same share of it)"
        ),
        Repeated::Backward => format!(
            "estimate per steady step: {share_of_compute:.3} (2b / (3 + 2b), b = {extra:.2} extra backward passes) of \
             the step's compute without the optimizer, no more than the step's period minus the host's issue time \
             left once the repeated passes' launches go (the same share of it)"
        ),
    };
    let draft = Draft::new(
        i,
        d,
        Stake::Estimate,
        basis,
        &[
            Column::GemmTensorCore,
            Column::Attention,
            Column::Elementwise,
        ],
        |s| {
            let saving = (compute(s) as f64 * share_of_compute) as i64;
            ledger::bounded_by_remaining_host(s, saving, 1.0 - share_of_compute)
        },
    );
    let steps = d.steady.steps.max(1) as f64;
    let per = |n: u64| (n as f64 / steps * 10.0).round() / 10.0;
    let pairs: Vec<String> = families
        .iter()
        .map(|(n, fw, bw)| format!("{n} {} forward / {} backward", per(*fw), per(*bw)))
        .collect();
    Ok(Some(Repeats {
        draft,
        extra,
        share_of_compute,
        pairs: pairs.join(", "),
        compute_step: per_step(d, d.steady_steps().map(compute).sum()),
        families,
    }))
}

/// The families' counts as a finding's data gives them.
fn families_json(r: &Repeats, steps: usize) -> serde_json::Value {
    let per = |n: u64| (n as f64 / steps.max(1) as f64 * 10.0).round() / 10.0;
    json!(
        r.families
            .iter()
            .map(
                |(n, fw, bw)| json!({"family": n, "forward": fw, "backward": bw,
        "forward_per_step": per(*fw), "backward_per_step": per(*bw)})
            )
            .collect::<Vec<_>>()
    )
}

fn forward_repeated(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let mut drafts = Vec::new();
    let devs: Vec<usize> = cx.devices().map(|(i, _)| i).collect();
    for i in devs {
        let Some(r) = repeats_of(cx, i, Repeated::Forward)? else {
            continue;
        };
        let d = &cx.ledger.devices[i];
        let saving = r.draft.total();
        let f_pct = (r.extra * 1000.0).round() / 10.0;
        let gist = format!(
            "per steady step: {}; {f_pct}% of the forward runs twice, about {} of {} of compute",
            r.pairs,
            ms(per_step(d, saving)),
            ms(r.compute_step)
        );
        let data = json!({"families": families_json(&r, d.steady.steps), "steps": d.steady.steps,
            "repeated_fraction": r.extra, "repeated_pct": f_pct, "share_of_compute": r.share_of_compute,
            "share_of_compute_pct": (r.share_of_compute * 1000.0).round() / 10.0,
            "compute_per_step_ns": r.compute_step, "saving_ns": saving, "saving_per_step_ns": per_step(d, saving),
            "saving_pct": d.share(saving)});
        let evidence = vec![
            format!(
                "in {} steady steps, per step: {} (a kernel of these kinds runs once per forward and once per \
                 backward call)",
                d.steady.steps, r.pairs
            ),
            format!(
                "so {f_pct}% of the forward runs twice; the step's compute without the optimizer is {} per step, \
                 and a repeated fraction f of the forward is f / (3 + f) = {:.1}% of it",
                ms(r.compute_step),
                r.share_of_compute * 100.0
            ),
        ];
        let title = format!(
            "Forward repeated: {f_pct}% of the forward runs again each step (recomputation or a second forward); \
             not running it saves about {}%",
            d.share(saving)
        );
        drafts.push(r.draft.text(title, gist, evidence, data));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

/// A family's backward kernels run at least this many times per forward kernel before the excess counts as a
/// repeated backward: a second pass through the graph doubles them; one odd call does not.
const BACKWARD_REPEAT_RATIO: f64 = 1.5;

/// At most this many extra backward passes are read from the counts (a larger ratio is not a repeated pass).
const MAX_EXTRA_BACKWARDS: f64 = 8.0;

pub const BACKWARD_REPEATED: RuleSpec = RuleSpec {
    id: "backward_repeated",
    doc: "In a training step, backward kernels whose forward kernel runs once per call (attention, layer norm, \
          softmax, GELU) run at least 1.5 times as often as that forward kernel: part of the backward runs more than \
          once through the same graph.",
    what_if: "the repeated backward passes run once: with b extra passes through the repeated part, the step's \
              compute (optimizer apart) is forward × (3 + 2b) (the backward costs about twice the forward), so 2b / (3 \
              + 2b) of it goes, bounded by the host's issue time",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "Each backward call through a shared part of the graph recomputes that part's gradients: several losses \
              back-propagated one by one (loss.backward(retain_graph=True) per loss) run the shared trunk's backward \
              once per loss, and accumulate into the same .grad the single backward of their sum would produce.",
        fix: "Back-propagate once: sum the losses (weighted as needed) and call backward on the sum, or \
              torch.autograd.backward([loss_a, loss_b, ...]); drop retain_graph=True. If the extra backward is \
              intended (a gradient penalty or other double backward with create_graph=True), this finding does not \
              apply.",
        verify: "Re-profile: aisp_profile_rules should no longer report backward_repeated, and the step should shrink \
                 by about the time at stake.",
        quiet: "in the training steps, no backward kernel runs 1.5 times as often as its forward kernel",
    },
    needs_profile: true,
    eval: backward_repeated,
};

fn backward_repeated(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let mut drafts = Vec::new();
    let devs: Vec<usize> = cx.devices().map(|(i, _)| i).collect();
    for i in devs {
        let Some(r) = repeats_of(cx, i, Repeated::Backward)? else {
            continue;
        };
        let d = &cx.ledger.devices[i];
        let saving = r.draft.total();
        let b = r.extra;
        let passes = format!("{:.2}", b + 1.0);
        let gist = format!(
            "per steady step: {}; the repeated part's backward runs {passes} times, about {} of {} of compute extra",
            r.pairs,
            ms(per_step(d, saving)),
            ms(r.compute_step)
        );
        let data = json!({"families": families_json(&r, d.steady.steps), "steps": d.steady.steps,
            "extra_passes": b, "passes": passes, "share_of_compute": r.share_of_compute,
            "share_of_compute_pct": (r.share_of_compute * 1000.0).round() / 10.0,
            "compute_per_step_ns": r.compute_step, "saving_ns": saving, "saving_per_step_ns": per_step(d, saving),
            "saving_pct": d.share(saving)});
        let evidence = vec![
            format!(
                "in {} steady steps, per step: {} (a kernel of these kinds runs once per forward and once per \
                 backward call)",
                d.steady.steps, r.pairs
            ),
            format!(
                "so the repeated part's backward runs {passes} times; the step's compute without the optimizer is \
                 {} per step, and b = {b:.2} extra passes are 2b / (3 + 2b) = {:.1}% of it",
                ms(r.compute_step),
                r.share_of_compute * 100.0
            ),
        ];
        let title = format!(
            "Backward repeated: part of the backward runs {passes} times each step (a backward per loss); one \
             backward saves about {}%",
            d.share(saving)
        );
        drafts.push(r.draft.text(title, gist, evidence, data));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}
