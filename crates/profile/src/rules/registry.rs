//! The one list of rules. Each reads ledger columns of a device's steady
//! window and states its what-if; `aisp_profile_rules`, `aisp_analyze_bottlenecks`,
//! `aisp_profile_ranks`, `aisp_ask`, the dashboard and the reports all run this
//! list, so no answer can disagree with another about what a step is made of.

use super::super::Result;
use super::super::ledger::Column;
use super::{
    Ctx, busy, casts, forward, grid, host, reduced_twice, repeats, scaler, slow_paths, steps,
    transfer, tuning,
};

/// What a rule prints besides its numbers.
pub struct RuleText {
    pub why: &'static str,
    pub fix: &'static str,
    pub verify: &'static str,
    /// The `checked` detail when the rule finds nothing worth a finding.
    pub quiet: &'static str,
}

/// What shows a rule's time at stake row by row: where a reader looks after the finding. (The app names the
/// answer that gives it; a library names no tool.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// Kernel time: the kernels by time, with their ledger class, precision and launch shape.
    Kernels,
    /// Idle time: the gaps, with what the launching thread did meanwhile.
    Gaps,
    /// Copy time: the copies by direction and memory kind.
    Copies,
    /// Collective time: the collectives and how much of them compute hides (per rank, for a set).
    Communication,
    /// Uneven or one-time steps: each step's period, CPU and GPU time.
    Steps,
}

/// One rule.
pub struct RuleSpec {
    pub id: &'static str,
    /// What the rule looks for.
    pub doc: &'static str,
    /// The saving per steady step if the fix were applied alone.
    pub what_if: &'static str,
    /// The ledger columns the stake is read from.
    pub columns: &'static [Column],
    /// What shows the stake row by row.
    pub shown_in: Shown,
    pub text: RuleText,
    /// Whether the rule reads the export itself (regions, call names); the others read only the ledger and
    /// run again when a set splits collective time.
    pub needs_profile: bool,
    pub(crate) eval: fn(&mut Ctx, &RuleSpec) -> Result<()>,
}

pub static RULES: &[RuleSpec] = &[
    host::LAUNCH_BOUND,
    host::LAUNCH_BLOCKING,
    host::HOST_COMPUTE,
    host::SYNC,
    host::DATA_LOADING,
    host::OS_WAIT,
    host::ALLOCATOR,
    host::MODULE_LOADING,
    busy::ELEMENTWISE,
    busy::FP32_GEMM,
    busy::FP64_GEMM,
    busy::GROWING_CONCAT,
    grid::UNDERFILLED_GRID,
    tuning::TUNING_IN_STEP,
    slow_paths::CONV_FALLBACK,
    slow_paths::INDEX_BACKWARD,
    slow_paths::FULL_SORT,
    slow_paths::GEMM_MISALIGNED,
    slow_paths::ATTENTION_MATERIALIZED,
    forward::FORWARD_REPEATED,
    forward::BACKWARD_REPEATED,
    repeats::UNBATCHED,
    casts::WEIGHT_CASTS,
    casts::DATA_CASTS,
    scaler::LOSS_SCALING_BF16,
    transfer::COPIES,
    transfer::COMMUNICATION,
    reduced_twice::REDUCED_TWICE,
    transfer::WAIT,
    transfer::PIPELINE,
    steps::VARIANCE,
    busy::DOMINANT_KERNEL,
    steps::WARMUP,
    steps::QUEUED,
];

/// The rule with this id.
pub fn find(id: &str) -> Option<&'static RuleSpec> {
    RULES.iter().find(|r| r.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_has_a_distinct_id_and_ledger_columns_belong_to_one_rule() {
        let mut ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), RULES.len());
        // A column read by two rules would let two findings claim the same time.
        let mut seen = std::collections::BTreeMap::new();
        for r in RULES {
            for c in r.columns {
                if let Some(other) = seen.insert(*c, r.id) {
                    panic!("column {} read by {other} and {}", c.as_str(), r.id);
                }
            }
            assert!(!r.doc.is_empty() && !r.what_if.is_empty(), "{}", r.id);
        }
    }
}
