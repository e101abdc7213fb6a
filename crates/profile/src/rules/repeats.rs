//! Inference steps that run the same unit once per input: a serving loop that scores its queued requests one at a
//! time. Every kernel of such a step runs a multiple of k times (k repeats of one unit), and its GEMMs are
//! matrix-vector shaped: a tile a few rows wide, picked by cuBLAS for a handful of rows. A narrow GEMM's time is the
//! time to read its weights, so batching the k inputs into one pass reads them once and costs about what one input
//! does.

use std::collections::HashMap;

use serde_json::json;

use super::super::Result;
use super::super::ledger::{Column, StepLedger};
use super::registry::{RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, Stake, ms, per_step, steady_kernels};

/// Shares below this are not findings.
const MIN_SHARE_PCT: f64 = 1.0;

/// A GEMM tile at most this many rows (or columns) wide is matrix-vector shaped.
const NARROW_TILE: u32 = 16;

pub const UNBATCHED: RuleSpec = RuleSpec {
    id: "unbatched_repeats",
    doc: "An inference step (no optimizer) made of k identical repeats — every kernel's count per step a multiple of \
          k — whose GEMMs are matrix-vector shaped (a tile at most 16 rows wide, or a GEMV): the same weights read k \
          times, once per input.",
    what_if: "the k inputs batched into one pass of k rows: a narrow GEMM's time is its weight read, so the pass costs \
              about what one input's does and (k-1)/k of the narrow GEMMs' time goes",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "A GEMM a few rows wide reads its whole weight matrix to do a few rows of arithmetic: its time is the \
              weight read. Running k inputs one after another reads the same weights k times; one pass over all k \
              rows reads them once, at nearly the same cost as one row, until the batch reaches a few hundred rows.",
        fix: "Batch the inputs: concatenate the k requests' rows, run the model once and split the outputs (dynamic \
              batching in a serving loop; a larger batch elsewhere). If the repeats are separate layers with \
              weights of their own, they cannot be batched and this finding does not apply. Not kernel tuning or \
              lower precision first: the kernels already stream the weights.",
        verify: "Re-profile: the step's kernel counts drop by the factor k, and aisp_profile_kernels shows wider GEMM \
                 tiles.",
        quiet: "no inference step made of repeats with matrix-vector GEMMs",
    },
    needs_profile: true,
    eval: unbatched,
};

/// Whether a GEMM kernel's name says it is matrix-vector shaped: a GEMV, or a cuBLAS `nvjet` tile (`_tst_256x8_`)
/// at most [`NARROW_TILE`] wide.
pub(crate) fn narrow_gemm(name: &str) -> bool {
    if name.contains("gemv") {
        return true;
    }
    let Some(rest) = name.strip_prefix("nvjet_") else {
        return false;
    };
    // nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT: the first MxN field is the output tile.
    rest.split('_')
        .find_map(|field| {
            let (m, n) = field.split_once('x')?;
            Some((m.parse::<u32>().ok()?, n.parse::<u32>().ok()?))
        })
        .is_some_and(|(m, n)| m.min(n) <= NARROW_TILE)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The repeats of a step: the greatest common divisor of its kernels' counts.
pub(crate) fn repeats(counts: impl IntoIterator<Item = u64>) -> u64 {
    counts.into_iter().fold(0, gcd)
}

fn unbatched(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    let p = cx.p()?;
    let kernels = p.kernels()?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        // A training step (an optimizer) repeats micro-batches on purpose.
        if d.steady.columns.get(Column::Optimizer) > 0 || d.steady.steps == 0 {
            continue;
        }
        let steps: Vec<&StepLedger> = d.steady_steps().collect();
        // Per step: kernel counts by name, and the narrow GEMMs' time.
        let mut counts: Vec<HashMap<i64, u64>> = vec![HashMap::new(); steps.len()];
        let mut narrow_ns = vec![0i64; steps.len()];
        let mut narrow_name: HashMap<i64, bool> = HashMap::new();
        for (_, k) in steady_kernels(kernels, d) {
            let s = steps
                .partition_point(|s| s.start_ns <= k.start)
                .saturating_sub(1);
            *counts[s].entry(k.short_name).or_default() += 1;
            let narrow = *narrow_name
                .entry(k.short_name)
                .or_insert_with(|| narrow_gemm(p.string(k.short_name)));
            if narrow {
                narrow_ns[s] += k.dur();
            }
        }
        let per_step_repeats: Vec<u64> = counts
            .iter()
            .map(|c| repeats(c.values().copied()))
            .collect();
        let k = per_step_repeats.iter().copied().min().unwrap_or(0);
        let narrow_total: i64 = narrow_ns.iter().sum();
        if k < 2 || narrow_total == 0 {
            continue;
        }
        let saving: HashMap<u32, i64> = steps
            .iter()
            .zip(&narrow_ns)
            .map(|(s, &n)| (s.index, n * (k as i64 - 1) / k as i64))
            .collect();
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            format!(
                "estimate per steady step: every kernel of the step runs a multiple of {k} times ({k} repeats of one \
                 unit) and its matrix-vector GEMMs (a tile at most {NARROW_TILE} rows wide, or a GEMV) take their \
                 time reading weights; batched into one pass, the weights are read once: ({k}-1)/{k} of those GEMMs' \
                 time — if the repeats are separate inputs over the same weights"
            ),
            &[],
            |s| saving.get(&s.index).copied().unwrap_or(0),
        );
        let at_stake = dr.total();
        drafts.push(dr.text(
            format!(
                "Unbatched inputs: each step runs one unit {k} times with matrix-vector GEMMs ({}% of the steady \
                 window)",
                d.share(narrow_total)
            ),
            format!(
                "per steady step: {} in matrix-vector GEMMs, every kernel a multiple of {k} times a step; batching the \
                 {k} repeats saves about {}",
                ms(per_step(d, narrow_total)),
                ms(per_step(d, at_stake))
            ),
            vec![format!(
                "{} steady steps: each is {k} repeats of one unit (the greatest common divisor of its kernels' counts); \
                 GEMMs with a tile at most {NARROW_TILE} rows wide run {} ({}% of the steady window)",
                d.steady.steps,
                ms(narrow_total),
                d.share(narrow_total)
            )],
            json!({"repeats": k, "narrow_gemm_ns": narrow_total, "narrow_gemm_pct": d.share(narrow_total),
                "narrow_gemm_per_step_ns": per_step(d, narrow_total), "saving_ns": at_stake,
                "saving_per_step_ns": per_step(d, at_stake)}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_tiles_and_gemvs_are_matrix_vector_shaped() {
        assert!(narrow_gemm("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT"));
        assert!(narrow_gemm("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_splitK_TNT"));
        assert!(narrow_gemm("gemv2T_kernel_val"));
        assert!(!narrow_gemm(
            "nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_bias_TNT"
        ));
        assert!(!narrow_gemm(
            "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_TNN"
        ));
        assert!(!narrow_gemm(
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
        ));
        assert!(!narrow_gemm("vectorized_elementwise_kernel"));
    }

    #[test]
    fn the_repeats_of_a_step_divide_every_count() {
        // 16 requests: 32 + 32 GEMMs, 16 dot products, 80 elementwise kernels.
        assert_eq!(repeats([32, 32, 16, 80, 16]), 16);
        // A transformer: the embedding and the head once, each layer's kernels 24 times.
        assert_eq!(repeats([1, 24, 48, 24, 1]), 1);
        assert_eq!(repeats([]), 0);
    }
}
