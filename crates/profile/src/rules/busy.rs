//! Rules on busy time a fix would shorten: unfused elementwise chains and
//! fp32 GEMMs on CUDA cores. A shorter kernel shortens the step only while the
//! device, not the host, sets the pace: each step's saving is bounded by the
//! time its host needs to issue it (`ledger::bounded_by_host`).

use std::collections::HashMap;

use serde_json::json;

use super::super::Result;
use super::super::classify::KernelClass;
use super::super::info;
use super::super::kernels::Classifier;
use super::super::ledger::{self, CHAIN_COLUMNS, Column, DeviceLedger};
use super::super::stats::pct1;
use super::registry::{RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, Stake, ms, per_step, steady_kernels};
use aisp_knowledge::dtype::Precision;
use aisp_knowledge::gpus;

/// Shares below this are not findings.
const MIN_SHARE_PCT: f64 = 1.0;

pub const ELEMENTWISE: RuleSpec = RuleSpec {
    id: "elementwise_unfused",
    doc: "Chains of three or more memory-bound kernels in a row on one stream, at least two of them elementwise (the \
          reductions inside them and the casts that feed them included, other casts passed over, no GEMM or \
          attention kernel among them): each reads its inputs from device memory and writes its output back, where \
          one fused kernel would do it once.",
    what_if: "each chain fused into one kernel that moves, for each tensor size in the chain, the bytes of its widest \
              member: the chain's time minus that kernel's estimated time, bounded by the host's issue time",
    columns: &CHAIN_COLUMNS,
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "Elementwise kernels are memory-bound: each one moves its tensors through HBM at full bandwidth and does \
              almost no math. A chain of N of them moves the data N times; fused, the intermediate results stay in \
              registers and the data moves once.",
        fix: "Fuse the chain: torch.compile the function that holds it (Inductor fuses pointwise chains into one Triton \
              kernel), or write it as one custom kernel (Triton/CUDA); use fused library ops where they exist (fused \
              layer norm, fused bias+activation, fused optimizers).",
        verify: "Re-profile: aisp_profile_ledger elementwise should shrink by about the time at stake, and \
                 aisp_profile_kernels show one fused kernel where the chain was.",
        quiet: "no unfused elementwise chain saves 1% of the steady window",
    },
    needs_profile: true,
    eval: elementwise,
};

fn elementwise(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let ch = &d.steady.chains;
        if ch.chains == 0 {
            continue;
        }
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            "estimate per steady step: Σ over its elementwise chains of (chain time − the time of one fused kernel \
             moving, per tensor size, the bytes of the widest member at the members' bandwidth), no more than the \
             step's period minus the host's issue time",
            &CHAIN_COLUMNS,
            |s| ledger::bounded_by_host(s, s.chain_saving_ns),
        );
        let saving = dr.total();
        let raw: i64 = ch.time_ns - ch.fused_estimate_ns;
        let elem: i64 = CHAIN_COLUMNS.iter().map(|&c| d.steady.columns.get(c)).sum();
        let mut evidence = vec![
            format!(
                "{} chains of unfused elementwise kernels (with the reductions and feeding casts among them) in the steady window ({} kernels, {} per chain at the median), {} of kernel time = {}% of the steady window",
                ch.chains,
                ch.kernels,
                ch.median_length,
                ms(ch.time_ns),
                d.share(ch.time_ns)
            ),
            format!(
                "fused, each chain would take about its widest member's time per tensor size: {} in all, saving {} of \
                 kernel time",
                ms(ch.fused_estimate_ns),
                ms(raw)
            ),
            format!("most time in: {}", ch.top_kernels.join(", ")),
        ];
        if saving < raw.min(elem) {
            evidence.push(format!(
                "the host needs {} per step to issue it (median), so the step can shrink by {} in all, not {}",
                d.steady.host_median_ns.map_or("?".into(), ms),
                ms(saving),
                ms(raw.min(elem))
            ));
        }
        let title = format!(
            "Unfused elementwise chains: {} kernels in chains of {} take {}% of the steady window; fusing saves about {}%",
            ch.kernels,
            ch.median_length,
            d.share(ch.time_ns),
            d.share(saving)
        );
        let (chain_step, fused_step) = (per_step(d, ch.time_ns), per_step(d, ch.fused_estimate_ns));
        let gist = format!(
            "{} chains in {} steady steps: {} of kernel time per step, fused about {}{}; most time in {}",
            ch.chains,
            d.steady.steps,
            ms(chain_step),
            ms(fused_step),
            match d.steady.host_median_ns {
                Some(h) if saving < raw.min(elem) =>
                    format!("; the host needs {} to issue a step", ms(h)),
                _ => String::new(),
            },
            ch.top_kernels.first().map_or("-", String::as_str)
        );
        drafts.push(dr.text(
            title,
            gist,
            evidence,
            json!({"chains": ch.chains, "kernels": ch.kernels, "median_length": ch.median_length,
                "chain_time_ns": ch.time_ns, "chain_pct": d.share(ch.time_ns), "fused_estimate_ns": ch.fused_estimate_ns,
                "steps": d.steady.steps, "chain_time_per_step_ns": chain_step, "fused_per_step_ns": fused_step,
                "kernel_saving_ns": raw, "saving_ns": saving, "saving_pct": d.share(saving),
                "host_median_ns": d.steady.host_median_ns, "top_kernels": ch.top_kernels}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

pub const FP32_GEMM: RuleSpec = RuleSpec {
    id: "fp32_gemm_on_cuda_cores",
    doc: "fp32 matrix multiplies running on CUDA cores (FFMA/SIMT kernels): ledger column gemm_fp32_simt.",
    what_if: "the GEMMs on TF32 tensor cores: their time × (1 − FP32/TF32 peak ratio of this GPU), bounded by the \
              host's issue time",
    columns: &[Column::GemmFp32Simt],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "These matrix multiplies run on CUDA cores (FFMA) in full fp32; tensor cores do the same GEMM several \
              times faster in TF32 or BF16.",
        fix: "Allow TF32: torch.backends.cuda.matmul.allow_tf32 = True (or torch.set_float32_matmul_precision(\"high\")), \
              and torch.backends.cudnn.allow_tf32 = True; or run the model under torch.autocast(\"cuda\", \
              dtype=torch.bfloat16).",
        verify: "Re-profile: aisp_profile_ledger gemm_fp32_simt should move to gemm_tensor_core at a fraction of the time.",
        quiet: "no fp32 SIMT GEMM, or its saving under 1% of the steady window",
    },
    needs_profile: true,
    eval: fp32_gemm,
};

/// The catalog's dense peaks of the device's GPU for two precisions: (GPU name, `slow`, `fast`) TFLOP/s.
fn catalog_peaks(
    gpu: Option<&str>,
    slow: Precision,
    fast: Precision,
) -> Option<(String, f64, f64)> {
    let g = gpu.and_then(gpus::match_device_name)?;
    let (s, f) = (g.peak_tflops(slow)?, g.peak_tflops(fast)?);
    (f > 0.0).then(|| (g.name.to_string(), s, f))
}

/// FP32 over TF32 dense peak of the device's GPU, where it came from, and the catalog entry's figures.
fn fp32_ratio(gpu: Option<&str>) -> (f64, String, serde_json::Value) {
    if let Some((name, f, t)) = catalog_peaks(gpu, Precision::Fp32, Precision::Tf32) {
        return (
            f / t,
            format!("{name}: FP32 {f} / TF32 {t} TFLOP/s dense (datasheet)"),
            json!({"gpu": name, "fp32_tflops": f, "tf32_tflops": t}),
        );
    }
    // Unknown GPU: the smallest ratio advantage of the catalog's tensor-core GPUs (A10: 31.2 / 62.5).
    (
        0.5,
        "GPU model not recorded or not in the catalog: TF32 assumed 2x FP32 (the smallest ratio of the catalog's tensor-core GPUs)".into(),
        serde_json::Value::Null,
    )
}

fn fp32_gemm(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let p = cx.p()?;
    let gpus_info = info::gpus(p)?;
    let kernels = cx.p()?.kernels()?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let t = d.steady.columns.get(Column::GemmFp32Simt);
        if t == 0 {
            continue;
        }
        let name = info::gpu_name(&gpus_info, d.device);
        let (ratio, source, peaks) = fp32_ratio(name.as_deref());
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            format!(
                "estimate per steady step: its gemm_fp32_simt time × (1 − {ratio:.3}), the FP32/TF32 peak ratio ({source}), \
                 no more than the step's period minus the host's issue time"
            ),
            &[Column::GemmFp32Simt],
            |s| {
                ledger::bounded_by_host(
                    s,
                    (s.columns.get(Column::GemmFp32Simt) as f64 * (1.0 - ratio)) as i64,
                )
            },
        );
        let saving = dr.total();
        // The kernels behind the column, by name.
        let mut names: HashMap<i64, (u64, i64)> = HashMap::new();
        for (_, k) in steady_kernels(kernels, d) {
            let cls = super::super::classify::classify(
                cx.p()?.string(k.demangled_name),
                cx.p()?.string(k.short_name),
                k.grid,
                k.block,
            );
            if cls.class == super::super::classify::KernelClass::GemmSimtFp32 {
                let e = names.entry(k.short_name).or_default();
                e.0 += 1;
                e.1 += k.dur();
            }
        }
        let mut top: Vec<(i64, (u64, i64))> = names.into_iter().collect();
        top.sort_by_key(|(_, (_, t))| std::cmp::Reverse(*t));
        let count: u64 = top.iter().map(|t| t.1.0).sum();
        let mut evidence = vec![format!(
            "{count} fp32 SIMT GEMM kernels (FFMA, not tensor cores) hold {} of the steady window on the critical path ({}%)",
            ms(t),
            d.share(t)
        )];
        if let Some((n, (c, tt))) = top.first() {
            evidence.push(format!(
                "top: `{}` ({c} calls, {})",
                cx.p()?.string(*n),
                ms(*tt)
            ));
        }
        evidence.push(format!(
            "on TF32 tensor cores they would take {:.1}% of that ({source}): {} saved",
            ratio * 100.0,
            ms(saving)
        ));
        let t_step = per_step(d, t);
        let ratio_pct = (ratio * 1000.0).round() / 10.0;
        // The peaks in short: the catalog's figures, or the assumption.
        let peaks_short = match (&peaks["fp32_tflops"], &peaks["tf32_tflops"]) {
            (serde_json::Value::Number(f), serde_json::Value::Number(t)) => {
                format!("FP32 {f} / TF32 {t} TFLOP/s")
            }
            _ => "TF32 assumed twice FP32".to_string(),
        };
        let gist = format!(
            "{count} fp32 SIMT GEMM kernels in {} steady steps, {} per step{}; on TF32 tensor cores {ratio_pct}% of \
             that ({peaks_short})",
            d.steady.steps,
            ms(t_step),
            match top.first() {
                Some((n, (c, _))) => format!(
                    ", most in `{}` ({c} calls)",
                    super::super::classify::short_form(cx.p()?.string(*n), 48)
                ),
                None => String::new(),
            }
        );
        drafts.push(dr.text(
            format!(
                "fp32 GEMMs on CUDA cores take {}% of the steady window; TF32 tensor cores would save about {}%",
                d.share(t),
                d.share(saving)
            ),
            gist,
            evidence,
            json!({"kernels": count, "time_ns": t, "steps": d.steady.steps, "time_per_step_ns": t_step, "peaks": peaks, "time_pct": d.share(t), "ratio": ratio, "ratio_pct": ratio_pct,
                "saving_ns": saving, "saving_pct": d.share(saving),
                "top": top.iter().take(3).map(|(id, (c, t))| json!({"name": p.string(*id), "count": c, "time_ns": t})).collect::<Vec<_>>()}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

pub const FP64_GEMM: RuleSpec = RuleSpec {
    id: "fp64_gemm",
    doc: "Matrix multiplies in FP64 (double precision, by the kernel's name: dgemm, f64f64, dmma) in the steady window.",
    what_if: "the GEMMs in fp32 on TF32 tensor cores: their time × (1 − FP64/TF32 peak ratio of this GPU), bounded by \
              the host's issue time",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "FP64 runs at a small fraction of the tensor-core rate of TF32 or BF16 (H100/H200: 67 against 495 dense \
              TFLOP/s; most other GPUs 1/32–1/64 of their FP32 rate). Training rarely needs it; it usually arrives by \
              accident: NumPy float64 arrays through torch.from_numpy, or model.double().",
        fix: "If the model does not need double precision: cast the inputs and the model to float32 (tensor.float(), \
              model.float(); float32 NumPy arrays before torch.from_numpy) and allow TF32 \
              (torch.set_float32_matmul_precision(\"high\")) or run under torch.autocast(\"cuda\", dtype=torch.bfloat16); \
              keep FP64 only where the numerics need it.",
        verify: "Re-profile: aisp_profile_kernels should show no f64 GEMM, and the step shrink by about the time at stake.",
        quiet: "no FP64 GEMM, or its saving under 1% of the steady window",
    },
    needs_profile: true,
    eval: fp64_gemm,
};

/// FP64 over TF32 dense peak of the device's GPU, where it came from.
fn fp64_ratio(gpu: Option<&str>) -> (f64, String) {
    if let Some((name, f, t)) = catalog_peaks(gpu, Precision::Fp64, Precision::Tf32) {
        return (
            f / t,
            format!("{name}: FP64 {f} / TF32 {t} TFLOP/s dense (datasheet)"),
        );
    }
    // Unknown GPU: FP64 assumed as fast as FP32, TF32 twice that (the smallest advantage a tensor-core GPU has).
    (
        0.5,
        "GPU model not recorded or not in the catalog: FP64 assumed half the TF32 rate (the smallest advantage of a \
         tensor-core GPU)"
            .into(),
    )
}

fn fp64_gemm(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let p = cx.p()?;
    let gpus_info = info::gpus(p)?;
    let kernels = p.kernels()?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        // The FP64 GEMMs of the steady window: (start, duration), in start order; calls and time per name.
        let mut runs: Vec<(i64, i64)> = Vec::new();
        let mut names: HashMap<i64, (u64, i64)> = HashMap::new();
        // Classified once per demangled name, not per launch.
        let mut classifier = Classifier::new(p);
        for (_, k) in steady_kernels(kernels, d) {
            let c = classifier.of(k);
            let gemm = matches!(
                c.class,
                KernelClass::GemmTensorCore | KernelClass::GemmSimtFp32 | KernelClass::GemmUnknown
            );
            if gemm && c.precision == Some(Precision::Fp64) {
                runs.push((k.start, k.dur()));
                let e = names.entry(k.short_name).or_default();
                e.0 += 1;
                e.1 += k.dur();
            }
        }
        if runs.is_empty() {
            continue;
        }
        runs.sort_unstable();
        let t: i64 = runs.iter().map(|r| r.1).sum();
        let (ratio, source) = fp64_ratio(info::gpu_name(&gpus_info, d.device).as_deref());
        let in_step = |s: &ledger::StepLedger| -> i64 {
            let lo = runs.partition_point(|r| r.0 < s.start_ns);
            let hi = runs.partition_point(|r| r.0 < s.start_ns + s.period_ns);
            runs[lo..hi].iter().map(|r| r.1).sum()
        };
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            format!(
                "estimate per steady step: its FP64 GEMM time × (1 − {ratio:.3}), the FP64/TF32 peak ratio ({source}), \
                 no more than the step's period minus the host's issue time"
            ),
            &[Column::GemmOther, Column::GemmTensorCore],
            |s| ledger::bounded_by_host(s, (in_step(s) as f64 * (1.0 - ratio)) as i64),
        );
        let saving = dr.total();
        let count = runs.len();
        let top = names
            .iter()
            .max_by_key(|(id, (_, t))| (*t, std::cmp::Reverse(**id)))
            .map(|(n, (c, _))| (super::super::classify::short_form(p.string(*n), 48), *c));
        let ratio_pct = (ratio * 1000.0).round() / 10.0;
        let t_step = per_step(d, t);
        let gist = format!(
            "{count} FP64 GEMM kernels in {} steady steps, {} per step{}; in fp32 on TF32 tensor cores {ratio_pct}% of \
             that",
            d.steady.steps,
            ms(t_step),
            top.as_ref().map_or(String::new(), |(n, c)| format!(
                ", most in `{n}` ({c} calls)"
            ))
        );
        drafts.push(dr.text(
            format!(
                "FP64 GEMMs take {}% of the steady window; in fp32 on TF32 tensor cores they would save about {}%",
                d.share(t),
                d.share(saving)
            ),
            gist,
            vec![
                format!(
                    "{count} FP64 GEMM kernels hold {} of the steady window ({}%)",
                    ms(t),
                    d.share(t)
                ),
                format!(
                    "on TF32 tensor cores they would take {ratio_pct}% of that ({source}): {} saved",
                    ms(saving)
                ),
            ],
            json!({"kernels": count, "time_ns": t, "time_pct": d.share(t), "steps": d.steady.steps,
                "time_per_step_ns": t_step, "ratio": ratio, "ratio_pct": ratio_pct, "saving_ns": saving,
                "saving_pct": d.share(saving)}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

pub const GROWING_CONCAT: RuleSpec = RuleSpec {
    id: "growing_concat",
    doc: "A tensor grown by concatenation inside the step (`out = torch.cat([out, x])` in a loop): runs of 4 or more \
          concatenation kernels in a step, each at least as long as the one before (5 % jitter allowed) and the last \
          at least 3× the first. Each re-copies everything concatenated so far: the copies grow quadratically.",
    what_if: "the pieces collected and concatenated once (or written into a preallocated tensor): the run's time less \
              its longest copy, bounded by the host's issue time",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "torch.cat allocates a new tensor and copies every input into it: growing a tensor by one piece per \
              iteration copies the first piece n times, the second n − 1 times, and so on, O(n²) bytes for O(n) data.",
        fix: "Collect the pieces in a Python list and torch.cat them once after the loop, or preallocate the output \
              (torch.empty of the final size) and write each piece into its slice (out[i * k:(i + 1) * k] = x).",
        verify: "Re-profile: aisp_profile_kernels should show one concatenation per step instead of a growing run.",
        quiet: "no growing run of concatenations in a steady step",
    },
    needs_profile: true,
    eval: growing_concat,
};

/// A concatenation kernel, by its short name (PyTorch's `CatArrayBatchedCopy*`).
fn is_concat(short: &str) -> bool {
    short.starts_with("CatArrayBatchedCopy")
}

/// Concatenations a growing run needs: fewer could be a handful of pieces of different sizes.
const MIN_GROWING_RUN: usize = 4;
/// How much longer a growing run's last copy is than its first, at least.
const MIN_GROWTH: i64 = 3;

/// Runs of [`MIN_GROWING_RUN`] or more concatenations, in order, each at least 95 % as long as the one before and
/// the last at least [`MIN_GROWTH`]× the first: (kernels, time, longest) of each.
fn growing_runs(durations: &[i64]) -> Vec<(usize, i64, i64)> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=durations.len() {
        let grows = i < durations.len() && durations[i] * 100 >= durations[i - 1] * 95;
        if grows {
            continue;
        }
        let run = &durations[start..i];
        if run.len() >= MIN_GROWING_RUN && run[run.len() - 1] >= MIN_GROWTH * run[0].max(1) {
            out.push((run.len(), run.iter().sum(), *run.iter().max().unwrap_or(&0)));
        }
        start = i;
    }
    out
}

fn growing_concat(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let p = cx.p()?;
    let kernels = p.kernels()?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        // Per steady step (by index): the runs found in it.
        let mut runs_by_step: HashMap<u32, Vec<(usize, i64, i64)>> = HashMap::new();
        for s in d.steady_steps() {
            let (lo, hi) = (s.start_ns, s.start_ns + s.period_ns);
            let first = kernels.partition_point(|k| k.start < lo);
            let cats: Vec<i64> = kernels[first..]
                .iter()
                .take_while(|k| k.start < hi)
                .filter(|k| k.device == d.device && is_concat(p.string(k.short_name)))
                .map(|k| k.dur())
                .collect();
            let runs = growing_runs(&cats);
            if !runs.is_empty() {
                runs_by_step.insert(s.index, runs);
            }
        }
        if runs_by_step.is_empty() {
            continue;
        }
        let saving_of = |runs: &Vec<(usize, i64, i64)>| runs.iter().map(|r| r.1 - r.2).sum::<i64>();
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            "estimate per steady step: Σ over its growing runs of concatenations of (the run's time − its longest \
             copy), no more than the step's period minus the host's issue time",
            &[Column::CopyKernel],
            |s| {
                runs_by_step
                    .get(&s.index)
                    .map_or(0, |runs| ledger::bounded_by_host(s, saving_of(runs)))
            },
        );
        let saving = dr.total();
        let runs: Vec<&(usize, i64, i64)> = runs_by_step.values().flatten().collect();
        let (count, time) = runs
            .iter()
            .fold((0usize, 0i64), |(c, t), r| (c + r.0, t + r.1));
        let longest_run = runs.iter().map(|r| r.0).max().unwrap_or(0);
        let steps_with = runs_by_step.len();
        let time_step = per_step(d, time);
        let gist = format!(
            "{} growing runs of concatenations in {steps_with} of {} steady steps (up to {longest_run} kernels a run): \
             {} of copies per step, of which concatenating once would keep about {}",
            runs.len(),
            d.steady.steps,
            ms(time_step),
            ms(time_step - per_step(d, saving))
        );
        drafts.push(dr.text(
            format!(
                "A tensor grown by concatenation in a loop: {count} copies in growing runs take {}% of the steady \
                 window; concatenating once saves about {}%",
                d.share(time),
                d.share(saving)
            ),
            gist,
            vec![format!(
                "{} runs of at least {MIN_GROWING_RUN} concatenation kernels (`CatArrayBatchedCopy`), each copy at \
                 least as long as the one before and the last at least {MIN_GROWTH}× the first: {count} kernels, {} in \
                 the steady window ({}%)",
                runs.len(),
                ms(time),
                d.share(time)
            )],
            json!({"runs": runs.len(), "kernels": count, "longest_run": longest_run, "steps_with": steps_with,
                "min_run": MIN_GROWING_RUN, "growth": MIN_GROWTH,
                "steps": d.steady.steps, "time_ns": time, "time_pct": d.share(time), "time_per_step_ns": time_step,
                "kept_per_step_ns": time_step - per_step(d, saving), "saving_ns": saving,
                "saving_pct": d.share(saving)}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

pub const DOMINANT_KERNEL: RuleSpec = RuleSpec {
    id: "dominant_kernel",
    doc: "One kernel holds more than half of the steady window's compute time.",
    what_if: "none: how much faster the kernel could run is not in the trace",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "Optimization effort on this kernel pays most; the rest barely matters until it shrinks.",
        fix: "Check its class and precision with aisp_profile_kernels (tensor cores? fp32?), its shapes and launch \
              configuration; profile it with Nsight Compute (ncu --set full -k <name>) for its roofline position.",
        verify: "Re-profile: its share and total time in aisp_profile_kernels.",
        quiet: "no kernel holds half the steady compute time",
    },
    needs_profile: true,
    eval: dominant_kernel,
};

fn dominant_kernel(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let kernels = cx.p()?.kernels()?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let mut t: HashMap<i64, (u64, i64)> = HashMap::new();
        let mut all = 0i64;
        for (_, k) in steady_kernels(kernels, d) {
            all += k.dur();
            let e = t.entry(k.short_name).or_default();
            e.0 += 1;
            e.1 += k.dur();
        }
        let Some((name, (n, time))) = t
            .into_iter()
            .max_by_key(|(id, (_, t))| (*t, std::cmp::Reverse(*id)))
        else {
            continue;
        };
        if time * 2 <= all {
            continue;
        }
        let share = pct1(time, all);
        let dr = Draft::new(
            i,
            d,
            Stake::None,
            "none: how much faster the kernel could run is not in the trace",
            &[],
            |_| 0,
        );
        drafts.push(dr.text(
            format!("One kernel dominates: `{}` is {share}% of steady kernel time", cx.p()?.string(name)),
            format!("{n} calls, {} of {} kernel time in the steady window", ms(time), ms(all)),
            vec![format!(
                "`{}` runs {n} times for {} of {} kernel time in the steady window",
                cx.p()?.string(name),
                ms(time),
                ms(all)
            )],
            json!({"kernel": cx.p()?.string(name), "count": n, "time_ns": time, "all_ns": all, "share_of_kernel_time_pct": share}),
        ));
    }
    cx.emit(spec.id, drafts, 0.0, &spec.text);
    Ok(())
}

/// Whether a device's steady steps are host-bound: the host's issue time is most of the period.
#[allow(dead_code)]
pub fn host_bound(d: &DeviceLedger) -> bool {
    d.steady
        .host_median_ns
        .is_some_and(|h| h * 10 >= d.steady.period_median_ns * 9)
}

#[cfg(test)]
mod tests {
    use super::growing_runs;

    #[test]
    fn a_growing_run_of_concatenations_is_found_and_even_ones_are_not() {
        // out = cat([out, x]) eight times: each copy one piece longer.
        let growing: Vec<i64> = (1..=8).map(|i| i * 100).collect();
        assert_eq!(growing_runs(&growing), vec![(8, 3600, 800)]);
        // Attention's per-layer q/k/v concatenations: the same size each time, a little jitter.
        assert!(growing_runs(&[284, 284, 283, 284, 318, 339, 345]).is_empty());
        // Too short a run, however it grows.
        assert!(growing_runs(&[100, 400, 900]).is_empty());
        // Two runs, split where a copy shrinks.
        let two = [100, 200, 300, 400, 50, 100, 150, 200];
        assert_eq!(growing_runs(&two), vec![(4, 1000, 400), (4, 500, 200)]);
    }
}
