//! The kernels a steady step spends its time in: what an assistant asks next
//! after the findings ("which kernels are these?"), answered in a few rows so
//! that the kernel listing is needed only for more.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::Profile;
use super::super::Result;
use super::super::classify::{Precision, kernel_label};
use super::super::kernels::Classifier;
use super::super::ledger::{DeviceLedger, kernel_ledger_class};

/// Kernels a device's step summary lists.
pub const STEP_KERNELS: usize = 8;

/// One kernel (by demangled name) of a device's steady window, per steady step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepKernel {
    /// The bare name; for PyTorch's generic launchers the operation they carry in brackets
    /// (`vectorized_elementwise_kernel[CUDAFunctor_add]`).
    pub name: String,
    /// Where the step ledger puts its time.
    pub ledger_class: String,
    /// When the name says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub precision: Option<Precision>,
    /// Its kernel time in the steady window over the steady steps.
    pub per_step_ns: i64,
    /// Its launches in the steady window over the steady steps.
    pub calls_per_step: f64,
    /// Its kernel time, share of the steady window.
    pub share_pct: f64,
}

impl StepKernel {
    /// The kernel in one line, as a default answer lists a step's kernels: `col2im_kernel: 43.26 ms a step in 80
    /// calls, 35.62 % of the step (other_kernel, bf16)`; under 0.1 ms a step the time is in microseconds.
    pub fn line(&self) -> String {
        let time = super::step_regions::duration(self.per_step_ns);
        let precision = self
            .precision
            .map(|p| format!(", {}", p.as_str()))
            .unwrap_or_default();
        format!(
            "{}: {time} a step in {} calls, {} % of the step ({}{precision})",
            self.name, self.calls_per_step, self.share_pct, self.ledger_class
        )
    }
}

/// The `n` kernels with the most time in `d`'s steady window (kernels starting inside it), most first.
pub fn step_kernels(p: &Profile, d: &DeviceLedger, n: usize) -> Result<Vec<StepKernel>> {
    let kernels = p.kernels()?;
    let mut by_name: HashMap<i64, (u64, i64, usize)> = HashMap::new();
    for (i, k) in super::steady_kernels(kernels, d) {
        let e = by_name.entry(k.demangled_name).or_insert((0, 0, i));
        e.0 += 1;
        e.1 += k.dur();
    }
    let mut top: Vec<(i64, (u64, i64, usize))> = by_name.into_iter().collect();
    top.sort_by_key(|&(id, (_, t, _))| (std::cmp::Reverse(t), id));
    let steps = d.steady.steps.max(1);
    let mut classifier = Classifier::new(p);
    Ok(top
        .into_iter()
        .take(n)
        .map(|(id, (calls, time, first))| {
            let k = &kernels[first];
            let c = classifier.of(k);
            let demangled = p.string(id);
            StepKernel {
                name: kernel_label(if demangled.is_empty() {
                    p.string(k.short_name)
                } else {
                    demangled
                }),
                ledger_class: kernel_ledger_class(p.string(k.short_name), c.class, demangled)
                    .to_string(),
                precision: c.precision,
                per_step_ns: time / steps as i64,
                calls_per_step: (calls as f64 / steps as f64 * 100.0).round() / 100.0,
                share_pct: d.share(time),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(per_step_ns: i64, precision: Option<Precision>) -> StepKernel {
        StepKernel {
            name: "col2im_kernel".into(),
            ledger_class: "other_kernel".into(),
            precision,
            per_step_ns,
            calls_per_step: 80.0,
            share_pct: 35.62,
        }
    }

    #[test]
    fn a_line_states_each_field_and_microseconds_under_a_tenth_of_a_millisecond() {
        assert_eq!(
            kernel(43_262_042, Some(Precision::Bf16)).line(),
            "col2im_kernel: 43.26 ms a step in 80 calls, 35.62 % of the step (other_kernel, bf16)"
        );
        assert_eq!(
            kernel(99_949, None).line(),
            "col2im_kernel: 99.9 us a step in 80 calls, 35.62 % of the step (other_kernel)"
        );
        let mut k = kernel(100_000, None);
        k.calls_per_step = 2.5;
        assert_eq!(
            k.line(),
            "col2im_kernel: 0.10 ms a step in 2.5 calls, 35.62 % of the step (other_kernel)"
        );
    }
}
