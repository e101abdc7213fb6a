//! An autotuner benchmarking inside the steady loop (`ledger::tuning`): the
//! runs of identical launches in several configurations are the tuner timing
//! them, again in every step whose shapes it has not seen; the model needs
//! one launch of the configuration it picks.

use std::collections::HashMap;

use serde_json::json;

use super::super::Result;
use super::super::ledger::{self, tuning};
use super::registry::{RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, Stake, bounded_savings, ms, per_step, step_at};

/// Shares below this are not findings.
const MIN_SHARE_PCT: f64 = 1.0;

pub const TUNING_IN_STEP: RuleSpec = RuleSpec {
    id: "tuning_in_step",
    doc: "One kernel launched 8 times or more in a row with one launch configuration, and so again with another \
          (fill kernels between the launches passed over: a benchmark's cache flush), inside the steady window: an \
          autotuner timing its configurations in the loop.",
    what_if: "each run but its last launch (the configuration chosen, run once) and the fills inside it gone, bounded \
              by the host's issue time",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "An autotuner times every configuration of a kernel for each new key (Triton's `@triton.autotune(key=...)`: \
              the key's values, e.g. a size; `torch.backends.cudnn.benchmark` for each new input shape) and keeps \
              the fastest. When the key changes every step (a point count, a sequence length), it benchmarks again \
              every step: dozens of timed launches per configuration, a cache flush before each, and a device \
              synchronization per configuration.",
        fix: "Take what changes every step out of the tuning key (key on the feature width, not the row count), bucket \
              the shapes (pad to a few sizes), or pin one configuration once tuned; with cuDNN, turn \
              `cudnn.benchmark` off when input shapes vary.",
        verify: "Re-profile: aisp_profile_kernels shows the kernel launched once per use, with one configuration.",
        quiet: "no kernel is launched in runs of identical launches in two configurations or more",
    },
    needs_profile: true,
    eval: tuning_in_step,
};

/// What one tuned kernel adds up to in the steady window.
#[derive(Default)]
struct Tuned {
    runs: usize,
    launches: usize,
    configs: std::collections::BTreeSet<tuning::Config>,
    time_ns: i64,
}

fn tuning_in_step(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let p = cx.p()?;
    let kernels = p.kernels()?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let runs = tuning::tuning_runs(p, kernels, d.device, d.steady.start_ns, d.steady.end_ns);
        if runs.is_empty() {
            continue;
        }
        let steps: Vec<&ledger::StepLedger> = d.steady_steps().collect();
        let mut by_step: HashMap<u32, i64> = HashMap::new();
        let mut by_name: HashMap<i64, Tuned> = HashMap::new();
        for r in &runs {
            if let Some(step) = step_at(&steps, r.start) {
                *by_step.entry(step.index).or_default() += r.time_ns - r.last_ns;
            }
            let t = by_name.entry(r.name).or_default();
            t.runs += 1;
            t.launches += r.launches;
            t.configs.insert((r.grid, r.block));
            t.time_ns += r.time_ns;
        }
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            "estimate per steady step: Σ over its benchmark runs (a kernel launched 8 times or more in a row with one \
             configuration, in two configurations or more) of the run's time and the fills inside it less its last \
             launch, no more than the step's period minus the host's issue time",
            &[],
            bounded_savings(&by_step),
        );
        let saving = dr.total();
        let time: i64 = runs.iter().map(|r| r.time_ns).sum();
        let launches: usize = runs.iter().map(|r| r.launches).sum();
        let Some((top_id, top)) = by_name
            .iter()
            .max_by_key(|(id, t)| (t.time_ns, std::cmp::Reverse(**id)))
        else {
            continue;
        };
        let top_name = super::super::classify::bare_kernel_name(p.string(*top_id));
        let launches_step = (launches as f64 / d.steady.steps.max(1) as f64 * 10.0).round() / 10.0;
        drafts.push(dr.text(
            format!(
                "An autotuner benchmarks inside the loop: runs of identical launches in several configurations take \
                 {}% of the steady window; tuning once saves about {}%",
                d.share(time),
                d.share(saving)
            ),
            format!(
                "{launches_step} benchmark launches per steady step, {} per step with their cache flushes; most in \
                 `{top_name}` ({} configurations, {} runs)",
                ms(per_step(d, time)),
                top.configs.len(),
                top.runs
            ),
            vec![format!(
                "{} runs of 8 or more identical launches of {} kernel(s), each kernel in two configurations or more: \
                 {launches} launches, {} with the fills between them ({}% of the steady window); `{top_name}`: {} \
                 launches in {} configurations",
                runs.len(),
                by_name.len(),
                ms(time),
                d.share(time),
                top.launches,
                top.configs.len()
            )],
            json!({"runs": runs.len(), "kernels": by_name.len(), "launches": launches,
                "launches_per_step": launches_step, "time_ns": time, "time_pct": d.share(time),
                "time_per_step_ns": per_step(d, time), "steps": d.steady.steps, "top_kernel": top_name,
                "top_configurations": top.configs.len(), "top_runs": top.runs, "top_launches": top.launches,
                "min_run": tuning::MIN_RUN, "min_configurations": tuning::MIN_CONFIGS,
                "saving_ns": saving, "saving_pct": d.share(saving)}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}
