//! Slow paths: kernels that are themselves the sign of a slower algorithm than the code could use, whatever their
//! launch looks like. Each rule here names its kernels, and at stake is their time per step (an upper bound: the
//! faster path still does some of the work):
//! - `im2col_kernel` / `col2im_kernel` (and the 3-D `vol2col` / `col2vol`): a convolution lowered to explicit column
//!   buffers, PyTorch's native fallback when cuDNN is off or does not take the convolution (or `F.unfold` /
//!   `F.fold` written by hand); cuDNN convolves without materializing them.
//! - `indexing_backward_kernel`: the backward of advanced indexing (`t[idx]`, `index_put_(accumulate=True)`), which
//!   sorts the indices and accumulates each run of equal indices serially; with many repeats it crawls where an
//!   embedding backward or `index_add_` spreads the work.
//! - CUB's segmented radix sort over long rows: a full sort of every row, where keeping the largest k needs only a
//!   selection (`torch.topk`).

use std::collections::HashMap;

use serde_json::json;

use super::super::Result;
use super::super::ledger::StepLedger;
use super::registry::{RuleSpec, RuleText, Shown};
use super::{Ctx, Draft, Stake, bounded_savings, ms, per_step, steady_kernels, step_at};

/// Shares below this are not findings.
const MIN_SHARE_PCT: f64 = 1.0;

/// What a slow path is made of, for one rule.
struct SlowPath {
    /// Whether a kernel (by its demangled name) belongs to the slow path.
    matches: fn(&str) -> bool,
    /// The title's lead, before the share.
    title: &'static str,
    /// The kernels in words, for the evidence.
    what: &'static str,
    /// What the matched kernels say about the code, for the evidence.
    meaning: &'static str,
}

pub const CONV_FALLBACK: RuleSpec = RuleSpec {
    id: "convolution_fallback",
    doc: "im2col / col2im (vol2col / col2vol) kernels in the steady steps: convolutions lowered to explicit column \
          buffers (PyTorch's native path when cuDNN is off or declines them, or F.unfold / F.fold by hand).",
    what_if: "the convolutions run by cuDNN (implicit GEMM, no column buffers): the column kernels' time per step goes, \
              bounded by the host's issue time; an upper bound (cuDNN's kernels do the math the GEMMs did)",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "PyTorch's native convolution (slow_conv2d / slow_conv3d) copies every input patch into a column buffer \
              (im2col: kernel size × channels times the input), multiplies it image by image with a thin GEMM, and \
              scatters gradients back with col2im. cuDNN convolves without that buffer, in one launch per \
              convolution. It is used unless torch.backends.cudnn.enabled is False, the code runs under \
              torch.backends.cudnn.flags(enabled=False), or cuDNN does not support the convolution (dtype, \
              dilation, groups).",
        fix: "Turn cuDNN back on (remove torch.backends.cudnn.enabled = False or cudnn.flags(enabled=False)); if it is \
              on, find the convolution cuDNN declines (unusual dtype, dilation or padding mode) and make it supported; \
              replace hand-written F.unfold + matmul with nn.Conv2d.",
        verify: "Re-profile: aisp_profile_kernels shows no im2col_kernel / col2im_kernel and cuDNN convolution kernels \
                 instead, and the step shrinks by up to the time at stake.",
        quiet: "no im2col / col2im kernel holds 1% of the steady window",
    },
    needs_profile: true,
    eval: conv_fallback,
};

fn is_column_lowering(demangled: &str) -> bool {
    [
        "im2col_kernel",
        "col2im_kernel",
        "vol2col_kernel",
        "col2vol_kernel",
    ]
    .iter()
    .any(|k| demangled.contains(k))
}

fn conv_fallback(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    slow_path(
        cx,
        spec,
        &SlowPath {
            matches: is_column_lowering,
            title: "Convolutions on column buffers: im2col / col2im kernels take",
            what: "im2col / col2im column kernels",
            meaning: "convolutions lowered to explicit column buffers (PyTorch's native convolution: cuDNN off or \
                      declining them, or F.unfold / F.fold)",
        },
    )
}

pub const INDEX_BACKWARD: RuleSpec = RuleSpec {
    id: "index_backward_serial",
    doc: "indexing_backward_kernel (the backward of advanced indexing, index_put_ with accumulate) holds time in the \
          steady steps: it accumulates each run of equal indices serially.",
    what_if: "the gather's backward done by an embedding backward, index_add_ or a broadcast instead: the kernel's \
              time per step goes, bounded by the host's issue time; an upper bound (the replacement still reads the \
              gradient once)",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "The backward of t[idx] (and index_put_ with accumulate=True) sorts the indices and gives each run of \
              equal indices to one warp, which adds the run's gradient rows one after another. When many positions \
              gather the same rows (a small table read for every token, a class or language embedding, tokens \
              dispatched to a few experts), a few warps do almost all the work while the GPU waits.",
        fix: "For a table lookup use F.embedding / nn.Embedding (its backward reduces repeated rows in parallel); for \
              a row shared by a whole sequence, look it up once per sequence and broadcast; for scatters use \
              index_add_ / scatter_add_ rather than index_put_(accumulate=True); for token dispatch, sort tokens by \
              destination and use contiguous slices.",
        verify: "Re-profile: aisp_profile_kernels shows no long indexing_backward_kernel (an embedding_backward or \
                 index_add kernel of a fraction of its time instead), and the step shrinks by about the time at \
                 stake.",
        quiet: "indexing_backward_kernel holds under 1% of the steady window",
    },
    needs_profile: true,
    eval: index_backward,
};

fn is_index_backward(demangled: &str) -> bool {
    demangled.contains("indexing_backward_kernel")
}

fn index_backward(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    slow_path(
        cx,
        spec,
        &SlowPath {
            matches: is_index_backward,
            title: "Serial index backward: indexing_backward_kernel takes",
            what: "indexing_backward_kernel launches",
            meaning: "the backward of advanced indexing accumulating each run of repeated indices serially",
        },
    )
}

pub const FULL_SORT: RuleSpec = RuleSpec {
    id: "full_sort",
    doc: "CUB's segmented radix sort holds time in the steady steps: every row sorted in full (argsort / sort), which \
          keeping the largest k of each row does not need.",
    what_if: "if only the first k of each sorted row are used: a selection (torch.topk) instead of a full sort, the \
              sort's time per step goes, bounded by the host's issue time; an upper bound (the selection still reads \
              every row once)",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "A radix sort passes over every key and its index several times (one pass per digit) and writes a full \
              permutation; argsort(...)[:, :k] then keeps k of them. A top-k selection reads each row once and keeps \
              only k candidates.",
        fix: "If only the first k of each row are used, call torch.topk(x, k, dim=...) (sorted=True keeps the order), \
              or a partial sort for nucleus sampling (top-k first, then sort the k); sort in the narrowest dtype and \
              skip the int64 index tensor when the values alone are needed.",
        verify: "Re-profile: aisp_profile_kernels shows no DeviceSegmentedRadixSortKernel (a topk / gatherTopK kernel of \
                 a fraction of its time instead), and the step shrinks by about the time at stake.",
        quiet: "segmented radix sorts hold under 1% of the steady window",
    },
    needs_profile: true,
    eval: full_sort,
};

fn is_segmented_sort(demangled: &str) -> bool {
    demangled.contains("DeviceSegmentedRadixSort") || demangled.contains("DeviceSegmentedSort")
}

fn full_sort(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    slow_path(
        cx,
        spec,
        &SlowPath {
            matches: is_segmented_sort,
            title: "Full sorts: segmented radix sorts take",
            what: "segmented radix sort launches",
            meaning: "every row sorted in full (argsort / sort along a dimension)",
        },
    )
}

/// Per device: the slow path's kernels in the steady window, their time per step at stake.
fn slow_path(cx: &mut Ctx, spec: &RuleSpec, path: &SlowPath) -> Result<()> {
    let p = cx.p()?;
    let kernels = p.kernels()?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        let steps: Vec<&StepLedger> = d.steady_steps().collect();
        let mut matched: HashMap<i64, bool> = HashMap::new();
        let mut by_step: HashMap<u32, i64> = HashMap::new();
        // Per short name: launches and time, to name the largest.
        let mut names: HashMap<i64, (u64, i64)> = HashMap::new();
        for (_, k) in steady_kernels(kernels, d) {
            let hit = *matched
                .entry(k.demangled_name)
                .or_insert_with(|| (path.matches)(p.string(k.demangled_name)));
            if !hit {
                continue;
            }
            let n = names.entry(k.short_name).or_default();
            n.0 += 1;
            n.1 += k.dur();
            if let Some(s) = step_at(&steps, k.start) {
                *by_step.entry(s.index).or_default() += k.dur();
            }
        }
        let (launches, time) = names
            .values()
            .fold((0u64, 0i64), |(n, t), x| (n + x.0, t + x.1));
        let Some((top_id, top)) = names
            .iter()
            .max_by_key(|(id, x)| (x.1, std::cmp::Reverse(**id)))
            .map(|(id, x)| (*id, *x))
        else {
            continue;
        };
        let top_name = p.string(top_id).to_string();
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            format!(
                "estimate per steady step: the {}' time, no more than the step's period minus the host's issue time; \
                 an upper bound",
                path.what
            ),
            &[],
            bounded_savings(&by_step),
        );
        let saving = dr.total();
        let launches_step = (launches as f64 / d.steady.steps.max(1) as f64 * 10.0).round() / 10.0;
        drafts.push(dr.text(
            format!("{} {}% of the steady window", path.title, d.share(time)),
            format!(
                "per steady step: {launches_step:.1} {} ({}), most in `{top_name}` ({} launches, {} in the steady \
                 window): {}",
                path.what,
                ms(per_step(d, time)),
                top.0,
                ms(top.1),
                path.meaning
            ),
            vec![
                format!(
                    "{launches} {} in {} steady steps: {} ({}% of the steady window)",
                    path.what,
                    d.steady.steps,
                    ms(time),
                    d.share(time)
                ),
                format!(
                    "`{top_name}`: {} launches, {}; these kernels mean {}",
                    top.0,
                    ms(top.1),
                    path.meaning
                ),
            ],
            json!({"launches": launches, "launches_per_step": launches_step, "time_ns": time, "time_pct": d.share(time),
                "time_per_step_ns": per_step(d, time), "steps": d.steady.steps, "top_kernel": top_name,
                "top_launches": top.0, "top_time_ns": top.1, "saving_ns": saving,
                "saving_per_step_ns": per_step(d, saving)}),
        ));
    }
    cx.emit(spec.id, drafts, MIN_SHARE_PCT, &spec.text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_slow_path_is_told_by_its_kernels_names() {
        assert!(is_column_lowering(
            "void at::native::im2col_kernel<c10::BFloat16>(long, const T1 *, long, long, long, long, long, long, \
             long, long, long, long, long, long, T1 *)"
        ));
        assert!(is_column_lowering(
            "void at::native::col2im_kernel<float, float>(long, const T1 *)"
        ));
        assert!(!is_column_lowering(
            "void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, (bool)0>"
        ));
        assert!(is_index_backward(
            "void at::native::<unnamed>::indexing_backward_kernel<float, (int)4>(const long *, const long *, const T1 *, \
             T1 *, long, long, long, long, bool)"
        ));
        assert!(!is_index_backward(
            "void at::native::<unnamed>::embedding_backward_feature_kernel<float, float, long>"
        ));
        assert!(is_segmented_sort(
            "void cub::CUB_300000_SM_900::DeviceSegmentedRadixSortKernel<cub::DeviceRadixSortPolicy<float, long, int>"
        ));
        assert!(!is_segmented_sort(
            "void at::native::sbtopk::gatherTopK<float, unsigned int, (int)2, (bool)0>"
        ));
    }
}
