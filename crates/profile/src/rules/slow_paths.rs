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
//! - 16-bit tensor-core GEMMs on CUTLASS's small-alignment kernels (`..._align1` / `align2` / `align4`): a matrix
//!   whose leading dimension is not a multiple of 8 elements (16 bytes), such as a vocabulary of 50257, which keeps
//!   cuBLAS off its fast kernels. At stake is half their time (the aligned kernels at least twice as fast).
//! - A plain softmax (not a log-softmax) in a step with no fused attention kernel: attention computed explicitly,
//!   its score and probability tensors written to memory. At stake is twice the softmax kernels' time (the score
//!   tensors pass through memory about twice as often in the whole explicit path as in its softmax).

use std::collections::HashMap;

use serde_json::json;

use super::super::Result;
use super::super::classify::kernel_label;
use super::super::ledger::{Column, StepLedger};
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
    /// How much of the matched kernels' time the fix removes.
    removed: Removed,
    /// A ledger column whose time on a device means the code already has the fast path there (the rule skips it).
    unless: Option<Column>,
}

/// The share of a slow path's kernel time its fix removes, and why: the stake is that multiple of their time.
struct Removed {
    times: f64,
    /// The basis's closing words: what the multiple rests on.
    why: &'static str,
}

/// All of the kernels' time: the faster path still does some of the work, so this is an upper bound.
const ALL_OF_IT: Removed = Removed {
    times: 1.0,
    why: "an upper bound (the faster path still does some of the work)",
};

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
            removed: ALL_OF_IT,
            unless: None,
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
            removed: ALL_OF_IT,
            unless: None,
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
            removed: ALL_OF_IT,
            unless: None,
        },
    )
}

pub const GEMM_MISALIGNED: RuleSpec = RuleSpec {
    id: "gemm_misaligned",
    doc: "16-bit tensor-core GEMMs on CUTLASS's small-alignment kernels (`_align1` / `_align2` / `_align4` in the \
          name) in the steady steps: a matrix whose leading dimension is not a multiple of 8 elements (16 bytes), \
          which keeps cuBLAS off its fast kernels.",
    what_if: "the dimension padded to a multiple of 8 (64 is safer): the GEMMs on the aligned kernels, half their \
              time per step goes if those are twice as fast, bounded by the host's issue time; an estimate",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "cuBLAS's fast bf16/fp16 kernels (nvjet, sm90 xmma) load tiles with 16-byte vector and TMA copies, which \
              need every matrix's leading dimension to be a multiple of 8 elements. When one is not (a vocabulary \
              of 50257, a feature size of 1000 + 3, a sequence of 750 in a batched GEMM over its keys), cuBLAS falls \
              back to CUTLASS kernels that load 2 or 4 bytes at a time (align1 / align2): the same math, often 2-7 \
              times slower.",
        fix: "Pad the dimension to a multiple of 8 (64 is better): a vocabulary of 50257 as 50304 with the extra \
              logits never targets (or masked), hidden and feature sizes chosen as multiples of 64, sequence \
              lengths padded to a multiple of 8; for attention, the fused kernel (F.scaled_dot_product_attention) \
              has no such GEMMs.",
        verify: "Re-profile: aisp_profile_kernels shows no cutlass ..._align1 / _align2 Kernel / Kernel2 rows (nvjet \
                 or sm90 kernels instead), and the step shrinks by about the time at stake.",
        quiet: "no 16-bit GEMM on a small-alignment kernel holds 1% of the steady window",
    },
    needs_profile: true,
    eval: gemm_misaligned,
};

/// A 16-bit tensor-core GEMM on a CUTLASS kernel that loads fewer than 8 elements at a time: its name says
/// `tensorop` (or `wmma`), a bf16/fp16 type and `_align1`, `_align2` or `_align4`. (fp32 SIMT kernels carry `align1`
/// whatever the shapes: they are not tensor-core kernels and are not matched.)
fn is_misaligned_gemm(demangled: &str) -> bool {
    let Some(at) = demangled.find("cutlass_") else {
        return false;
    };
    let name: &str = demangled[at..]
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("");
    let sixteen_bit = name.contains("bf16") || name.contains("f16") || name.contains("h16");
    let tensor_op = name.contains("tensorop") || name.contains("wmma");
    let narrow = ["_align1", "_align2", "_align4"]
        .iter()
        .any(|a| name.ends_with(a) || name.contains(&format!("{a}_")));
    sixteen_bit && tensor_op && narrow
}

fn gemm_misaligned(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    slow_path(
        cx,
        spec,
        &SlowPath {
            matches: is_misaligned_gemm,
            title: "Misaligned GEMMs: bf16/fp16 GEMMs on small-alignment kernels take",
            what: "small-alignment GEMM launches",
            meaning: "a matrix dimension not a multiple of 8 elements (cuBLAS's fast kernels need one)",
            removed: Removed {
                times: 0.5,
                why: "an estimate: the aligned kernels taken as twice as fast (2-7 times is usual), so the saving \
                      may be smaller or up to about their whole time",
            },
            unless: None,
        },
    )
}

pub const ATTENTION_MATERIALIZED: RuleSpec = RuleSpec {
    id: "attention_materialized",
    doc: "A plain softmax (not a log-softmax) holds time in steady steps that run no fused attention kernel: \
          attention computed explicitly (q @ k^T, softmax, @ v), its score and probability tensors written to \
          memory.",
    what_if: "the attention fused (F.scaled_dot_product_attention: flash or memory-efficient): the score tensors' \
              traffic goes, taken as twice the softmax kernels' time per step, bounded by the host's issue time; an \
              estimate",
    columns: &[],
    shown_in: Shown::Kernels,
    text: RuleText {
        why: "Explicit attention writes a batch × heads × queries × keys score tensor with one batched GEMM, reads and \
              writes it in the softmax (and any scale, mask, dropout or cast on the way), reads it again in the \
              second GEMM, and does the same in the backward. A fused kernel keeps each tile of scores on chip and \
              never writes them. nn.MultiheadAttention takes the explicit path when need_weights is True (its \
              default) or a mask it cannot fuse is passed; hand-written attention always does.",
        fix: "Call F.scaled_dot_product_attention(q, k, v, is_causal=..., attn_mask=...) instead of the softmax of \
              q @ k^T; with nn.MultiheadAttention pass need_weights=False (and a boolean or causal mask); if the \
              weights are needed for logging, compute them on a sample and rarely.",
        verify: "Re-profile: aisp_profile_kernels shows a flash / fmha / efficient attention kernel and no \
                 softmax_warp / cunn_SoftMax kernels of the score size, and the step shrinks by about the time at \
                 stake.",
        quiet: "no plain softmax holds 1% of a steady window without a fused attention kernel",
    },
    needs_profile: true,
    eval: attention_materialized,
};

/// PyTorch's softmax kernels computing a plain softmax (forward or backward), not the log-softmax of a cross-entropy
/// nor the spatial (per-pixel, over channels) softmax: `softmax_warp_*` whose fifth template argument
/// (`is_log_softmax`) is false, `cunn_SoftMax*` with a `SoftMax...Epilogue` rather than a `LogSoftMax...` one.
fn is_plain_softmax(demangled: &str) -> bool {
    if demangled.contains("cunn_SoftMax") {
        return !demangled.contains("LogSoftMax") && demangled.contains("SoftMax");
    }
    let Some(at) = demangled
        .find("softmax_warp_forward<")
        .or_else(|| demangled.find("softmax_warp_backward<"))
    else {
        return false;
    };
    let args = &demangled[at..];
    let args = &args[args.find('<').map_or(0, |i| i + 1)..];
    top_level_args(args)
        .get(4)
        .is_some_and(|a| a.trim() == "(bool)0")
}

/// The top-level template arguments of `a, b<c, d>, e>...` (after a name's `<`), up to its closing `>`.
fn top_level_args(after_open: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0usize, 0usize, Vec::new());
    for (i, c) in after_open.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '>' if depth == 0 => {
                out.push(&after_open[start..i]);
                return out;
            }
            '>' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&after_open[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

fn attention_materialized(cx: &mut Ctx, spec: &RuleSpec) -> Result<()> {
    slow_path(
        cx,
        spec,
        &SlowPath {
            matches: is_plain_softmax,
            title: "Attention not fused: plain softmax kernels, with no fused attention kernel in the step, take",
            what: "plain softmax launches",
            meaning: "attention computed explicitly, its scores and probabilities written to memory and read back \
                      (the softmax's passes are about half of that traffic)",
            removed: Removed {
                times: 2.0,
                why: "an estimate: the score tensors pass through memory about twice as often in the whole explicit \
                      path (the GEMM writing them, the softmax, the GEMM reading them, and the same in the backward) \
                      as in the softmax alone; the fused kernel's own time is that of the GEMMs it replaces",
            },
            unless: Some(Column::Attention),
        },
    )
}

/// A multiple of a time in words, before "the ...' time" in a basis: nothing, "half of ", "twice ".
fn times_in_words(times: f64) -> String {
    match times {
        1.0 => String::new(),
        0.5 => "half of ".to_string(),
        2.0 => "twice ".to_string(),
        t => format!("{t} times "),
    }
}

/// Per device: the slow path's kernels in the steady window, their time per step at stake.
fn slow_path(cx: &mut Ctx, spec: &RuleSpec, path: &SlowPath) -> Result<()> {
    let p = cx.p()?;
    let kernels = p.kernels()?;
    let mut drafts = Vec::new();
    for (i, d) in cx.devices() {
        if path.unless.is_some_and(|c| d.steady.columns.get(c) > 0) {
            continue;
        }
        let steps: Vec<&StepLedger> = d.steady_steps().collect();
        let mut matched: HashMap<i64, bool> = HashMap::new();
        let mut by_step: HashMap<u32, i64> = HashMap::new();
        // Per kernel (demangled name): launches and time, to name the largest by its label.
        let mut names: HashMap<i64, (u64, i64)> = HashMap::new();
        for (_, k) in steady_kernels(kernels, d) {
            let hit = *matched
                .entry(k.demangled_name)
                .or_insert_with(|| (path.matches)(p.string(k.demangled_name)));
            if !hit {
                continue;
            }
            let n = names.entry(k.demangled_name).or_default();
            n.0 += 1;
            n.1 += k.dur();
            if let Some(s) = step_at(&steps, k.start) {
                *by_step.entry(s.index).or_default() += k.dur();
            }
        }
        for t in by_step.values_mut() {
            *t = (*t as f64 * path.removed.times).round() as i64;
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
        let top_name = kernel_label(p.string(top_id));
        let dr = Draft::new(
            i,
            d,
            Stake::Estimate,
            format!(
                "estimate per steady step: {}the {}' time, no more than the step's period minus the host's issue \
                 time; {}",
                times_in_words(path.removed.times),
                path.what,
                path.removed.why
            ),
            &[],
            bounded_savings(&by_step),
        );
        let saving = dr.total();
        let launches_step = (launches as f64 / d.steady.steps.max(1) as f64 * 10.0).round() / 10.0;
        drafts.push(dr.text(
            if path.removed.times == 1.0 {
                format!("{} {}% of the steady window", path.title, d.share(time))
            } else {
                format!(
                    "{} {}% of the steady window; the fix saves about {}%",
                    path.title,
                    d.share(time),
                    d.share(saving)
                )
            },
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
                "saving_pct": d.share(saving), "saving_per_step_ns": per_step(d, saving)}),
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

    #[test]
    fn misaligned_gemms_are_sixteen_bit_tensor_core_kernels_with_narrow_loads() {
        assert!(is_misaligned_gemm(
            "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1>(T1::Params)"
        ));
        assert!(is_misaligned_gemm(
            "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_64x1_tn_align2>(T1::Params)"
        ));
        // Aligned (8 elements) and fp32 SIMT kernels are not.
        assert!(!is_misaligned_gemm(
            "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(T1::Params)"
        ));
        assert!(!is_misaligned_gemm(
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>(T1::Params)"
        ));
        assert!(!is_misaligned_gemm(
            "nvjet_sm90_tst_128x8_64x12_1x1_v_bz_TNT"
        ));
    }

    #[test]
    fn a_plain_softmax_is_told_from_a_log_softmax_and_a_spatial_one() {
        assert!(is_plain_softmax(
            "void <unnamed>::softmax_warp_forward<float, float, float, (int)10, (bool)0, (bool)0>(T2 *, const T1 *, \
             int, int, int, const bool *, int, bool)"
        ));
        assert!(is_plain_softmax(
            "void at::native::<unnamed>::cunn_SoftMaxForwardReg<float, float, float, \
             at::native::<unnamed>::SoftMaxForwardEpilogue, long, (int)8>(T3 *, const T1 *, T5)"
        ));
        assert!(!is_plain_softmax(
            "void <unnamed>::softmax_warp_backward<c10::BFloat16, c10::BFloat16, float, (int)9, (bool)1, (bool)0>(T2 \
             *, const T1 *, const T1 *, int, int, int, const bool *)"
        ));
        assert!(!is_plain_softmax(
            "void at::native::<unnamed>::cunn_SoftMaxBackward<(int)8, c10::BFloat16, float, c10::BFloat16, \
             at::native::<unnamed>::LogSoftMaxBackwardEpilogue>(T2 *, const T4 *, const T4 *, long)"
        ));
        assert!(!is_plain_softmax(
            "void at::native::<unnamed>::cunn_SpatialSoftMaxForward<float, float, float, \
             at::native::<unnamed>::SoftMaxForwardEpilogue>(T3 *, const T1 *, unsigned int, unsigned int, unsigned int)"
        ));
    }
}
