//! Rules on the steps themselves: uneven steady periods, warm-up reported
//! apart, and idle the host did not cause.

use serde_json::json;

use super::super::Result;
use super::super::iterations;
use super::super::ledger::{Column, Columns};
use super::super::stats;
use super::registry::{self, RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, Stake, ms};

pub const VARIANCE: RuleSpec = RuleSpec {
    id: "step_time_variance",
    doc: "Steady steps of uneven length on the GPU timeline (slowest ≥ 1.5× the median, or CV ≥ 10%), with the \
          ledger column whose changes explain the variation.",
    what_if: "every steady step as fast as the median: the time above the median goes",
    columns: &[],
    shown_in: Shown::Steps,
    text: RuleText {
        why: "Uneven steps mean something intermittent (garbage collection, data stalls, allocator growth, \
              checkpointing, a straggler in collectives); in distributed training every rank waits for the slowest.",
        fix: "Look at the slowest steps in aisp_profile_ledger (the column that grows in them) and aisp_profile_iterations; \
              common fixes: gc.freeze()/disable gc in the loop, more DataLoader workers with persistent_workers=True, \
              preallocate (expandable segments).",
        verify: "Re-profile: the steady periods' CV in aisp_profile_ledger should fall under 10%.",
        quiet: "steady periods even (slowest under 1.5x the median and CV under 10%), or fewer than 5 steady steps",
    },
    needs_profile: false,
    eval: variance,
};

/// The column whose per-step values move most with the period: its share of the period's variance
/// (covariance with the period over the period's variance), %.
fn explaining_column(steps: &[(i64, Columns)]) -> Option<(Column, f64)> {
    let n = steps.len() as f64;
    let mean_p = steps.iter().map(|s| s.0 as f64).sum::<f64>() / n;
    let var: f64 = steps.iter().map(|s| (s.0 as f64 - mean_p).powi(2)).sum();
    if var <= 0.0 {
        return None;
    }
    Column::ALL
        .iter()
        .map(|&c| {
            let mean_c = steps.iter().map(|s| s.1.get(c) as f64).sum::<f64>() / n;
            let cov: f64 = steps
                .iter()
                .map(|s| (s.1.get(c) as f64 - mean_c) * (s.0 as f64 - mean_p))
                .sum();
            (c, cov / var * 100.0)
        })
        .max_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal))
        .filter(|(_, share)| *share > 0.0)
        .map(|(c, s)| (c, (s * 10.0).round() / 10.0))
}

fn variance(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        if d.steady.steps < 5 {
            continue;
        }
        let periods: Vec<i64> = d.steady_steps().map(|s| s.period_ns).collect();
        let med = stats::median(&mut periods.clone());
        let max = periods.iter().copied().max().unwrap_or(0);
        let cv = iterations::spread(&periods).map_or(0.0, |s| s.cv_pct);
        if (max as f64) < 1.5 * med && cv < 10.0 {
            continue;
        }
        let per: Vec<(i64, Columns)> = d.steady_steps().map(|s| (s.period_ns, s.columns)).collect();
        let explained = explaining_column(&per);
        // When the varying column is another rule's finding on this device, the variation is that finding's, at
        // the severity that rule judged (a one-time cost, say, is information, however uneven it made the steps).
        let owner = explained.and_then(|(c, _)| {
            registry::RULES
                .iter()
                .find(|r| r.columns.contains(&c))
                .filter(|r| {
                    cx.findings
                        .iter()
                        .any(|f| f.id == r.id && f.device == Some(d.device))
                })
                .map(|r| r.id)
        });
        let mut dr = Draft::new(
            i,
            d,
            if owner.is_some() {
                Stake::None
            } else {
                Stake::Estimate
            },
            "estimate: Σ over the steady steps of their period above the median period — what evening them out would \
             save at most",
            &[],
            |s| (s.period_ns - med as i64).max(0),
        );
        if owner.is_some() {
            dr.saving.iter_mut().for_each(|s| s.1 = 0);
        }
        let slowest = d
            .steady_steps()
            .max_by_key(|s| s.period_ns)
            .map(|s| s.name.clone())
            .unwrap_or_default();
        let excess: i64 = periods.iter().map(|&p| (p - med as i64).max(0)).sum();
        let mut evidence = vec![format!(
            "{} steady steps on the GPU timeline: median period {}, slowest {} ({slowest}), CV {cv}%; {} above the median in all",
            periods.len(),
            ms(med as i64),
            ms(max),
            ms(excess)
        )];
        if let Some((c, share)) = explained {
            evidence.push(format!(
                "the variation is in `{}`: it accounts for {share}% of the periods' variance",
                c.as_str()
            ));
        }
        if let Some(o) = owner {
            evidence.push(format!("that column is finding `{o}`'s: its fix evens the steps out; not counted again here"));
        }
        let ratio = max as f64 / med.max(1.0);
        let gist = format!(
            "median {}, slowest {} (`{slowest}`), CV {cv}%; {} above the median in all{}",
            ms(med as i64),
            ms(max),
            ms(excess),
            match explained {
                Some((c, share)) => format!("; {share}% of the variance in `{}`", c.as_str()),
                None => String::new(),
            }
        );
        drafts.push(dr.text(
            format!("Step time varies: slowest steady step {ratio:.2}x the median"),
            gist,
            evidence,
            json!({"steps": periods.len(), "median_ns": med, "max_ns": max, "cv_pct": cv, "slowest": slowest,
                "ratio": ratio, "excess_ns": excess,
                "explained_by": explained.map(|(c, s)| json!({"column": c.as_str(), "variance_pct": s})),
                "owner": owner}),
        ));
    }
    cx.emit(spec.id, drafts, 0.0, &spec.text);
    Ok(())
}

pub const WARMUP: RuleSpec = RuleSpec {
    id: "first_step_overhead",
    doc: "Warm-up steps, reported apart from the steady window: the first step always (lazy module loading, handle \
          creation), then each following step while its period exceeds 1.25× the median of the later half.",
    what_if: "none in the steady state: a one-time cost",
    columns: &[],
    shown_in: Shown::Steps,
    text: RuleText {
        why: "The first iterations load CUDA modules lazily, create library handles, autotune and grow the allocator: \
              a one-time cost that is not part of the steady step.",
        fix: "Ignore it for long runs and exclude it from timings; for short jobs warm up before timing, or set \
              CUDA_MODULE_LOADING=EAGER to pay module loading at startup.",
        verify: "Compare the warm-up steps with the steady median in aisp_profile_ledger.",
        quiet: "no warm-up step (a single period)",
    },
    needs_profile: false,
    eval: warmup,
};

fn warmup(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        if d.warmup_steps == 0 {
            continue;
        }
        let w: Vec<&super::super::ledger::StepLedger> =
            d.steps.iter().filter(|s| s.warmup).collect();
        let total: i64 = w.iter().map(|s| s.period_ns).sum();
        let first = w[0].period_ns;
        let med = d.steady.period_median_ns.max(1);
        let dr = Draft::new(
            i,
            d,
            Stake::None,
            "none: outside the steady window",
            &[],
            |_| 0,
        );
        let ratio = first as f64 / med as f64;
        let loading = w
            .iter()
            .map(|s| s.columns.get(Column::IdleModuleLoading))
            .sum::<i64>();
        drafts.push(dr.text(
            format!(
                "Warm-up: {} step(s) reported apart ({}); the first is {ratio:.1}x a steady step",
                w.len(),
                ms(total)
            ),
            format!(
                "`{}` {} vs a steady {}; module loading {} of the warm-up",
                w[0].name,
                ms(first),
                ms(med),
                ms(loading)
            ),
            vec![format!(
                "`{}` takes {} on the GPU timeline vs a steady median of {}; module loading idles the device {} in the warm-up",
                w[0].name,
                ms(first),
                ms(med),
                ms(loading)
            )],
            json!({"warmup_steps": w.len(), "warmup_ns": total, "first_ns": first, "median_ns": med, "ratio": ratio,
                "module_loading_ns": loading}),
        ));
    }
    cx.emit(spec.id, drafts, 0.0, &spec.text);
    Ok(())
}

pub const QUEUED: RuleSpec = RuleSpec {
    id: "queued_idle",
    doc: "The device idles although the next operation was already queued (idle_queued): dependencies between streams \
          or devices, or graph scheduling — not the host.",
    what_if: "none known from the trace: what the queued work waited for is not recorded",
    columns: &[Column::IdleQueued],
    shown_in: Shown::Gaps,
    text: RuleText {
        why: "Work was queued, yet the device ran nothing: it waited on an event from another stream or device, or on \
              scheduling between dependent kernels (a few microseconds each).",
        fix: "Check cross-stream waits (cudaStreamWaitEvent) and what they wait for in aisp_profile_timeline; inside CUDA \
              graphs, small gaps between dependent kernels are expected.",
        verify: "Re-profile: aisp_profile_ledger idle_queued.",
        quiet: "idle with work queued under 1% of the steady window",
    },
    needs_profile: false,
    eval: queued,
};

fn queued(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let q = d.steady.columns.get(Column::IdleQueued);
        if d.share(q) < 1.0 {
            continue;
        }
        let dr = Draft::new(
            i,
            d,
            Stake::None,
            "none: what the queued work waited for is not in the trace",
            &[Column::IdleQueued],
            |_| 0,
        );
        let q_step = super::per_step(d, q);
        drafts.push(dr.text(
            format!("The device idles {}% of the steady window with work already queued", d.share(q)),
            format!("{} per steady step idle with the next operation already queued", ms(q_step)),
            vec![format!("{} of idle time in the steady window ended with an operation launched before the device ran dry", ms(q))],
            json!({"queued_ns": q, "queued_pct": d.share(q), "queued_per_step_ns": q_step}),
        ));
    }
    cx.emit(spec.id, drafts, 0.0, &spec.text);
    Ok(())
}
