//! Weights cast to the compute precision on every inference step. Under `torch.autocast`, a linear layer whose
//! weight is fp32 casts that weight to bf16 (or fp16) each time it runs; in training autocast keeps the cast for the
//! step (and the fp32 master weights are wanted), but under `torch.no_grad` / `torch.inference_mode` nothing is kept,
//! so a serving loop reads and writes every weight again for each request. The trace shows it as fp32 → bf16/fp16
//! conversion kernels in a step without a backward, at least one per GEMM: autocast's signature (a cast per weight
//! operand). Storing the model in the compute precision once removes them.
//!
//! The same conversions, fewer than one per GEMM, are data kept in fp32 and read in bf16/fp16 each step: a key/value
//! cache or a buffer allocated without a dtype (`torch.zeros` makes float32) and cast where it is used. Allocating it
//! in the compute precision removes them (`data_cast_every_step`).

use std::collections::HashMap;

use serde_json::json;

use super::super::Result;
use super::super::classify;
use super::super::ledger::{self, Column, StepLedger};
use super::registry::{RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, Stake, ms, per_step, steady_kernels};

/// Shares below this are not findings.
const MIN_SHARE_PCT: f64 = 1.0;

/// PyTorch's fp32 → bf16 / fp16 conversion kernels (`Tensor.to`, autocast's casts).
fn is_down_cast(demangled: &str) -> bool {
    demangled.contains("bfloat16_copy_kernel_cuda")
        || demangled.contains("float16_copy_kernel_cuda")
}

/// Kernels whose presence makes a step a training step: the backward of the kinds that pair with a forward.
fn is_backward(demangled: &str) -> bool {
    demangled.contains("Backward")
        || demangled.contains("backward")
        || demangled.contains("grad_input")
        || demangled.contains("flash_bwd")
}

pub const WEIGHT_CASTS: RuleSpec = RuleSpec {
    id: "weights_cast_every_step",
    doc: "An inference step (no optimizer, no backward kernel) runs fp32 → bf16/fp16 conversion kernels, at least one \
          per GEMM: autocast casting fp32 weights for every request.",
    what_if: "the model stored in its compute precision once: the conversion kernels' time per step goes, bounded by \
              the host's issue time",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "Under torch.no_grad or torch.inference_mode, autocast keeps no cast between calls: each linear layer \
              reads its fp32 weight and writes a bf16 copy on every request, moving 6 bytes per parameter before the \
              GEMM reads the copy again.",
        fix: "Convert the model once after loading (model.to(torch.bfloat16), or .half() for fp16) and feed inputs in \
              that dtype; drop torch.autocast around serving (or keep it only for the few ops that need fp32).",
        verify: "Re-profile: aisp_profile_kernels should show no bfloat16_copy_kernel_cuda / float16_copy_kernel_cuda \
                 per request, and the step should shrink by about the time at stake.",
        quiet: "no inference step casts fp32 to bf16/fp16 once per GEMM or more",
    },
    needs_profile: true,
    eval: weight_casts,
};

pub const DATA_CASTS: RuleSpec = RuleSpec {
    id: "data_cast_every_step",
    doc: "An inference step (no optimizer, no backward kernel) runs fp32 → bf16/fp16 conversion kernels, fewer than \
          one per GEMM (not autocast's weight casts): data kept in fp32 (a key/value cache, a buffer) converted where \
          it is used, every step.",
    what_if: "the data stored in its compute precision: the conversion kernels' time per step goes (the consumers read \
              the stored data as they read the converted copy), bounded by the host's issue time",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "A conversion reads every fp32 element and writes a bf16/fp16 copy, 6 bytes moved per element, before the \
              consumer reads the copy again. Data that lives across steps, such as a key/value cache allocated with \
              torch.zeros / torch.empty and no dtype (float32 by default) and read with .to(torch.bfloat16), pays \
              this on every step, growing with the data.",
        fix: "Allocate the persistent tensor in the compute precision (torch.zeros(..., dtype=torch.bfloat16), or \
              .to(dtype) once after creating it) and drop the per-step .to() / .half() / .bfloat16(); under autocast, \
              make sure the cache is written in the dtype it is read in.",
        verify: "Re-profile: aisp_profile_kernels should show no bfloat16_copy_kernel_cuda / float16_copy_kernel_cuda \
                 of the data's size per step, and the step should shrink by about the time at stake.",
        quiet: "no inference step casts fp32 to bf16/fp16 fewer than once per GEMM for 1% of a step",
    },
    needs_profile: true,
    eval: data_casts,
};

/// Per steady step of one device: the conversion kernels' time and count, and the GEMMs' count; `None` when the
/// window holds a backward kernel (a training step).
fn per_step_casts(
    cx: &Ctx,
    d: &ledger::DeviceLedger,
    steps: &[&StepLedger],
) -> Result<Option<Vec<(i64, u64, u64)>>> {
    let p = cx.p()?;
    let mut per = vec![(0i64, 0u64, 0u64); steps.len()];
    // Per kernel name: down-cast, GEMM, backward (matched once per name, not per launch).
    let mut kind: HashMap<i64, (bool, bool, bool)> = HashMap::new();
    for (_, k) in steady_kernels(p.kernels()?, d) {
        let (cast, gemm, backward) = *kind.entry(k.demangled_name).or_insert_with(|| {
            let demangled = p.string(k.demangled_name);
            let short = p.string(k.short_name);
            let class = classify::classify(demangled, short, k.grid, k.block).class;
            (
                is_down_cast(demangled),
                class.is_gemm(),
                is_backward(demangled),
            )
        });
        if backward {
            return Ok(None);
        }
        let s = steps
            .partition_point(|s| s.start_ns <= k.start)
            .saturating_sub(1);
        if cast {
            per[s].0 += k.dur();
            per[s].1 += 1;
        }
        if gemm {
            per[s].2 += 1;
        }
    }
    Ok(Some(per))
}

fn weight_casts(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    casts(cx, spec, CastsOf::Weights)
}

fn data_casts(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    casts(cx, spec, CastsOf::Data)
}

/// What an inference step's conversions are, told by their count against the GEMMs'.
#[derive(Clone, Copy, PartialEq)]
enum CastsOf {
    /// At least one per GEMM: autocast casting each fp32 weight operand.
    Weights,
    /// Fewer than one per GEMM: fp32 data converted where it is read.
    Data,
}

fn casts(cx: &mut Ctx, spec: &RuleSpec, of: CastsOf) -> Result<()> {
    let mut drafts = Vec::new();
    let devs: Vec<usize> = cx.devices().map(|(i, _)| i).collect();
    for i in devs {
        let d = &cx.ledger.devices[i];
        // A training step updates weights: its casts are autocast's per-step copies of the fp32 master weights.
        if d.steady.columns.get(Column::Optimizer) > 0 || d.steady.steps == 0 {
            continue;
        }
        let steps: Vec<&StepLedger> = d.steady_steps().collect();
        let Some(per) = per_step_casts(cx, d, &steps)? else {
            continue;
        };
        let (cast_ns, casts, gemms) = per
            .iter()
            .fold((0i64, 0u64, 0u64), |(t, c, g), &(a, b, e)| {
                (t + a, c + b, g + e)
            });
        // Autocast casts each GEMM's weight operand (and its bias): at least one cast per GEMM.
        let per_gemm = casts >= gemms;
        if cast_ns == 0 || gemms == 0 || per_gemm != (of == CastsOf::Weights) {
            continue;
        }
        let by_step: HashMap<u32, i64> = steps
            .iter()
            .zip(&per)
            .map(|(s, &(t, _, _))| (s.index, t))
            .collect();
        let stored = match of {
            CastsOf::Weights => "in a model stored",
            CastsOf::Data => "for data stored",
        };
        let basis = format!(
            "measured: the fp32 → bf16/fp16 conversion kernels' time in each steady step (none {stored} in its compute \
             precision), no more than the step's period minus the host's issue time"
        );
        let dr = Draft::new(i, d, Stake::Estimate, basis, &[], |s| {
            ledger::bounded_by_host(s, by_step.get(&s.index).copied().unwrap_or(0))
        });
        let at_stake = dr.total();
        let n = d.steady.steps.max(1) as f64;
        let per_req = |x: u64| (x as f64 / n * 10.0).round() / 10.0;
        let (title, gist, count_line) = match of {
            CastsOf::Weights => (
                format!(
                    "Weights cast every step: fp32 → bf16/fp16 conversions take {}% of the steady window in an \
                     inference step ({} casts for {} GEMMs per step)",
                    d.share(cast_ns),
                    per_req(casts),
                    per_req(gemms)
                ),
                format!(
                    "per steady step: {} casts ({}) for {} GEMMs, no backward; stored in bf16/fp16 once, about {} a \
                     step goes",
                    per_req(casts),
                    ms(per_step(d, cast_ns)),
                    per_req(gemms),
                    ms(per_step(d, at_stake))
                ),
                format!(
                    "{gemms} GEMMs in the same steps: at least one cast per GEMM, as autocast casts each fp32 weight \
                     operand every call"
                ),
            ),
            CastsOf::Data => (
                format!(
                    "fp32 data cast every step: fp32 → bf16/fp16 conversions take {}% of the steady window in an \
                     inference step ({} casts per step, fewer than its {} GEMMs: not the weights)",
                    d.share(cast_ns),
                    per_req(casts),
                    per_req(gemms)
                ),
                format!(
                    "per steady step: {} casts ({}, {} each) for {} GEMMs, no backward: data kept in fp32 and \
                     converted where it is read; stored in bf16/fp16, about {} a step goes",
                    per_req(casts),
                    ms(per_step(d, cast_ns)),
                    ms(cast_ns / casts.max(1) as i64),
                    per_req(gemms),
                    ms(per_step(d, at_stake))
                ),
                format!(
                    "{gemms} GEMMs in the same steps: fewer casts than GEMMs, so not autocast's cast of each fp32 \
                     weight operand"
                ),
            ),
        };
        drafts.push(dr.text(
            title,
            gist,
            vec![
                format!(
                    "{} steady steps without a backward kernel or an optimizer (inference): {casts} fp32 → bf16/fp16 \
                     conversion kernels (bfloat16_copy_kernel_cuda / float16_copy_kernel_cuda) take {} ({}% of the \
                     steady window)",
                    d.steady.steps,
                    ms(cast_ns),
                    d.share(cast_ns)
                ),
                count_line,
            ],
            json!({"steps": d.steady.steps, "casts": casts, "gemms": gemms, "casts_per_step": per_req(casts), "gemms_per_step": per_req(gemms),
                "cast_ns": cast_ns, "cast_pct": d.share(cast_ns), "cast_per_step_ns": per_step(d, cast_ns),
                "cast_each_ns": cast_ns / casts.max(1) as i64,
                "saving_ns": at_stake, "saving_per_step_ns": per_step(d, at_stake)}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_casts_and_backward_kernels_are_told_by_name() {
        assert!(is_down_cast(
            "void at::native::vectorized_elementwise_kernel<(int)8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda(float) (instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)"
        ));
        assert!(!is_down_cast(
            "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]"
        ));
        assert!(is_backward(
            "void at::native::vectorized_elementwise_kernel<(int)8, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase &, at::native::GeluType)"
        ));
        assert!(is_backward(
            "void at::native::layer_norm_grad_input_kernel<float>"
        ));
        assert!(!is_backward(
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"
        ));
    }
}
