//! Loss scaling where nothing needs it. `torch.amp.GradScaler` exists for fp16, whose 5-bit exponent flushes
//! small gradients to zero; bf16 has fp32's 8-bit exponent, so scaling a bf16 loss changes nothing but the time:
//! each step the scaler reads and writes every gradient to unscale it and check it for inf / NaN
//! (`_amp_foreach_non_finite_check_and_unscale_`) and updates its scale (`amp_update_scale`). The trace shows
//! those kernels in steps whose reduced-precision kernels are all bf16; one fp16 kernel, or no bf16 kernel at
//! all, and the rule says nothing (the scaler may be what keeps fp16 training alive).

use std::collections::HashMap;

use serde_json::json;

use super::super::Result;
use super::super::classify::{self, Precision};
use super::super::ledger::{self, StepLedger};
use super::registry::{RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, Stake, bounded_savings, ms, per_step, steady_kernels, step_at};

/// Shares below this are not findings.
const MIN_SHARE_PCT: f64 = 1.0;

pub const LOSS_SCALING_BF16: RuleSpec = RuleSpec {
    id: "loss_scaling_without_fp16",
    doc: "GradScaler's unscale / inf-check and scale-update kernels run in steps whose reduced-precision kernels are \
          all bf16 (none fp16): loss scaling that bf16's fp32-sized exponent does not need.",
    what_if: "the GradScaler removed (bf16 needs no loss scaling): the scaler's kernels' time per step goes, bounded \
              by the host's issue time",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "Loss scaling keeps small fp16 gradients from flushing to zero: fp16 has a 5-bit exponent. bf16 has \
              fp32's 8-bit exponent, so its gradients do not underflow and the scaler's work buys nothing: every \
              step it reads and writes each gradient to unscale it and check it for inf / NaN, updates the scale, \
              and scaler.step() waits on the device for the inf flag.",
        fix: "Under torch.autocast(dtype=torch.bfloat16) (or a bf16 model), drop the GradScaler: loss.backward(); \
              optimizer.step() (or construct it with enabled=False). Keep it only where fp16 is used.",
        verify: "Re-profile: aisp_profile_kernels shows no _amp_foreach_non_finite_check_and_unscale_ or \
                 amp_update_scale kernels, and the step shrinks by about the time at stake.",
        quiet: "no GradScaler kernels in steps whose reduced-precision kernels are all bf16",
    },
    needs_profile: true,
    eval: loss_scaling_bf16,
};

/// GradScaler's own kernels: the unscale with its inf / NaN check (foreach or per tensor) and the scale update.
fn is_scaler(demangled: &str) -> bool {
    demangled.contains("non_finite_check_and_unscale") || demangled.contains("amp_update_scale")
}

/// What the steady window of one device holds: the scaler's time per step (by index) and launches, and the
/// launches of bf16 and fp16 kernels.
#[derive(Default)]
struct Window {
    by_step: HashMap<u32, i64>,
    scaler_ns: i64,
    scaler_launches: u64,
    bf16: u64,
    fp16: u64,
}

fn window_of(cx: &Ctx, d: &ledger::DeviceLedger) -> Result<Window> {
    let p = cx.p()?;
    let steps: Vec<&StepLedger> = d.steady_steps().collect();
    // Per kernel name: whether it is the scaler's, and its precision (matched once per name, not per launch).
    let mut kind: HashMap<i64, (bool, Option<Precision>)> = HashMap::new();
    let mut w = Window::default();
    for (_, k) in steady_kernels(p.kernels()?, d) {
        let (scaler, precision) = *kind.entry(k.demangled_name).or_insert_with(|| {
            let demangled = p.string(k.demangled_name);
            let short = p.string(k.short_name);
            let precision = classify::classify(demangled, short, k.grid, k.block).precision;
            (is_scaler(demangled), precision)
        });
        match precision {
            Some(Precision::Bf16) => w.bf16 += 1,
            Some(Precision::Fp16) => w.fp16 += 1,
            _ => {}
        }
        if !scaler {
            continue;
        }
        w.scaler_ns += k.dur();
        w.scaler_launches += 1;
        if let Some(s) = step_at(&steps, k.start) {
            *w.by_step.entry(s.index).or_default() += k.dur();
        }
    }
    Ok(w)
}

fn loss_scaling_bf16(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let w = window_of(cx, d)?;
        // fp16 anywhere: the scaler may be needed. No bf16 evidence: the precision is unknown, say nothing.
        if w.scaler_ns == 0 || w.fp16 > 0 || w.bf16 == 0 {
            continue;
        }
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            "measured: the GradScaler kernels' time in each steady step (none without the scaler), no more than the \
             step's period minus the host's issue time",
            &[],
            bounded_savings(&w.by_step),
        );
        let saving = dr.total();
        let n = d.steady.steps.max(1) as f64;
        let per = |x: u64| (x as f64 / n * 10.0).round() / 10.0;
        drafts.push(dr.text(
            format!(
                "Loss scaling under bf16: GradScaler's unscale and inf checks take {}% of the steady window, and no \
                 kernel runs in fp16",
                d.share(w.scaler_ns)
            ),
            format!(
                "per steady step: {} GradScaler launches ({}); {} bf16 kernels and none in fp16: without the scaler \
                 about {} a step goes",
                per(w.scaler_launches),
                ms(per_step(d, w.scaler_ns)),
                per(w.bf16),
                ms(per_step(d, saving))
            ),
            vec![
                format!(
                    "{} launches of _amp_foreach_non_finite_check_and_unscale_ / amp_update_scale in {} steady steps: \
                     {} ({}% of the steady window)",
                    w.scaler_launches,
                    d.steady.steps,
                    ms(w.scaler_ns),
                    d.share(w.scaler_ns)
                ),
                format!(
                    "{} bf16 kernel launches and no fp16 kernel in the same window: the compute is bf16, whose exponent \
                     is fp32's",
                    w.bf16
                ),
            ],
            json!({"scaler_launches": w.scaler_launches, "scaler_launches_per_step": per(w.scaler_launches),
                "scaler_ns": w.scaler_ns, "scaler_pct": d.share(w.scaler_ns), "scaler_per_step_ns": per_step(d, w.scaler_ns),
                "bf16_launches": w.bf16, "bf16_launches_per_step": per(w.bf16), "fp16_launches": w.fp16,
                "steps": d.steady.steps, "saving_ns": saving, "saving_per_step_ns": per_step(d, saving)}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scaler_kernels_are_told_by_name() {
        assert!(is_scaler(
            "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::TensorListMetadata<(int)1>, \
             at::native::<unnamed>::UnaryOpFunctor<float, (int)1, (int)1, (int)0>, \
             at::native::_amp_foreach_non_finite_check_and_unscale_cuda_(c10::ArrayRef<at::Tensor>, at::Tensor &, \
             const at::Tensor &)::[lambda() (instance 1)]"
        ));
        assert!(is_scaler(
            "at::native::amp_update_scale_cuda_kernel(float *, int *, const float *, double, double, int)"
        ));
        assert!(!is_scaler(
            "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::FusedOptimizerTensorListMetadata<(int)4>, \
             at::native::<unnamed>::FusedAdamMathFunctor<float, (int)4, (at::native::ADAM_MODE)1, (bool)0>>"
        ));
    }
}
