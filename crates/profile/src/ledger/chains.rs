//! Unfused elementwise chains: runs of three or more memory-bound kernels —
//! elementwise kernels and the reductions inside them (a hand-written norm:
//! square, mean, rsqrt, scale) — that follow each other on one stream with no
//! compute-bound kernel (a GEMM, attention, a fused optimizer) between them,
//! at least two of them elementwise. Each member reads its inputs from device
//! memory and writes its output back; one fused kernel (what torch.compile or
//! a hand-written kernel makes of the run) would read the run's inputs once
//! and write its result once.
//!
//! A pass of a multi-pass algorithm (a radix sort's, a scan's, a stream
//! compaction's: `torch.randperm`, `torch.sort`, `nonzero`) ends a chain like
//! a GEMM: memory-bound, but no fused pointwise kernel absorbs it. So does an
//! atomic accumulation by index (`index_add_`, `index_reduce_`: PyTorch's
//! `indexFunc*Index` kernels): its time is the atomics on the rows it adds
//! into, which a fused kernel would still perform.
//!
//! A cast or copy (`direct_copy_kernel`, concatenation) joins a chain when
//! the next kernel on its stream is a member: it feeds the chain (a norm's
//! cast to fp32 before its square, the cast back before the weight). One
//! that feeds anything else is passed over without ending the chain: under
//! autocast most casts are of the weights, each right before its GEMM,
//! distinct tensors a fusion of the activations would not remove.
//!
//! The fused lower bound is estimated from the chain's own timings, at the
//! bandwidth its members reached, per **data family**: members with the same
//! launch size (blocks × threads: PyTorch's launchers size the grid by element
//! count) work on tensors of one size. A family's fused time is a member's
//! time per tensor it touches (the `std::array<char*, N>` / `Array<char*, N>`
//! of PyTorch's kernel names: N tensors; 2 when the name does not say), at the
//! family's median, times the tensors its widest member touches. Members far
//! smaller than the largest (under 1/8: a per-row statistic, a broadcast
//! scale) and reductions (whose launch shape is not their input's size; what
//! they read, the family's members read too) join no family: their data costs
//! a fused kernel nothing extra.
//!
//! Kernel names do not say which tensors a kernel touched, so the estimate
//! leans low on the saving where it must guess: an fp32 and a bf16 pass over
//! one tensor (a vectorized and an unrolled launch differ in size) count as
//! two passes, and tensors of other sizes each keep a pass of their own. It
//! errs high only when one family holds distinct tensors of the same size
//! (two weights cast one after the other), which casts that feed a GEMM, not
//! counted, mostly are.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::Profile;
use super::columns::Column;
use super::ops::{DeviceOps, OpKind};

/// The ledger columns a chain's members are counted in: elementwise kernels, the reductions inside a chain and
/// the casts that feed it. A chain's saving in a step is at most what these columns hold there.
pub const CHAIN_COLUMNS: [Column; 3] = [Column::Elementwise, Column::Reduction, Column::CopyKernel];

/// Chains shorter than this are left alone (one or two kernels between GEMMs are usual).
pub const MIN_CHAIN: usize = 3;

/// The elementwise chains of a device's steady steps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChainSummary {
    pub chains: u64,
    pub kernels: u64,
    /// Median kernels per chain.
    pub median_length: u64,
    /// Σ kernel time of the chains' members.
    pub time_ns: i64,
    /// Σ over chains of the estimated time of one fused kernel.
    pub fused_estimate_ns: i64,
    /// The most frequent member kernels (short names), most time first, at most 3.
    pub top_kernels: Vec<String>,
}

/// One chain, before it is summed.
#[derive(Debug, Clone)]
pub struct Chain {
    pub first_start: i64,
    pub kernels: usize,
    pub time_ns: i64,
    pub fused_estimate_ns: i64,
    /// (short name id, kernel time) of each member.
    pub members: Vec<(i64, i64)>,
}

/// Tensors an elementwise kernel touches, from PyTorch's name (`std::array<char*, 3ul>` → 3).
pub fn tensors_touched(demangled: &str) -> Option<u32> {
    for marker in ["std::array<char*, ", "Array<char*, ", "array<char *, "] {
        if let Some(i) = demangled.find(marker) {
            let rest = &demangled[i + marker.len()..];
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            if let Ok(n) = digits.parse::<u32>()
                && n > 0
            {
                return Some(n);
            }
        }
    }
    None
}

/// Members a chain needs, and how many of them elementwise: one or two kernels between GEMMs are usual.
const MIN_ELEMENTWISE: usize = 2;
/// Members whose launch is under 1/`SMALL` of the chain's largest join no family.
const SMALL: u64 = 8;

/// Whether a kernel of this kind is a chain member (memory-bound work a fused kernel would absorb).
fn member(kind: OpKind) -> bool {
    matches!(
        kind,
        OpKind::Compute(Column::Elementwise | Column::Reduction)
    )
}

/// Whether a kernel of this kind is a cast or a copy: a member when it feeds one, passed over otherwise.
fn cast(kind: OpKind) -> bool {
    kind == OpKind::Compute(Column::CopyKernel)
}

/// Whether a kernel ends a chain though memory-bound like its neighbours, because no fused pointwise kernel can
/// absorb it: a pass of a multi-pass algorithm (a radix or merge sort, a scan, a stream compaction, a histogram) or
/// an atomic accumulation by index.
fn unfusable(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    // `deviceselect`: CUB's stream compaction (`DeviceSelectSweepKernel`), not a gather such as `index_select`;
    // `indexfunc`: index_add_'s atomic accumulation (`indexFuncLargeIndex`), not a pass a fusion shares.
    [
        "sort",
        "scan",
        "deviceselect",
        "histogram",
        "unique",
        "indexfunc",
    ]
    .iter()
    .any(|w| l.contains(w))
}

/// The chains among the device's ops that start inside `[lo, hi)`; `sm_count`, the device's SMs when recorded.
pub fn find_chains(
    p: &Profile,
    d: &DeviceOps,
    lo: i64,
    hi: i64,
    sm_count: Option<i64>,
) -> Vec<Chain> {
    let kernels = match p.kernels() {
        Ok(k) => k,
        Err(_) => return Vec::new(),
    };
    // Per stream, the kernel ops in start order.
    let mut by_stream: std::collections::BTreeMap<i64, Vec<usize>> = Default::default();
    for (i, o) in d.ops.iter().enumerate() {
        if o.start >= lo && o.start < hi && !matches!(o.kind, OpKind::Copy(_)) {
            by_stream.entry(o.stream).or_default().push(i);
        }
    }
    // Multi-pass algorithms and atomic accumulations break chains; their names decide, once per name. A launch that leaves most SMs without
    // a block is passed over (neither a member nor a break): its time is the under-filled grid's
    // (`underfilled_grid`), not the chain's to claim, and fusing its neighbours still pays.
    let sms = sm_count.filter(|&s| s > 1).map(|s| s as u64);
    let mut passes: std::collections::HashMap<i64, bool> = Default::default();
    let mut breaks = |i: usize| {
        let name = kernels[d.ops[i].index as usize].short_name;
        *passes
            .entry(name)
            .or_insert_with(|| unfusable(p.string(name)))
    };
    let underfilled =
        |i: usize| sms.is_some_and(|s| kernels[d.ops[i].index as usize].underfills(s));
    // An autotuner's benchmark runs are the tuner's time (`tuning_in_step`), not a chain of the model's.
    let tuned =
        super::tuning::tuned_kernels(&super::tuning::tuning_runs(p, kernels, d.device, lo, hi));
    let mut out = Vec::new();
    for ops in by_stream.values() {
        let ops: Vec<(usize, bool)> = ops
            .iter()
            .filter(|&&i| !underfilled(i) && !tuned.contains(&(d.ops[i].index as usize)))
            .map(|&i| (i, breaks(i)))
            .collect();
        for run in runs(d, &ops) {
            let elementwise = run
                .iter()
                .filter(|&&i| d.ops[i].kind == OpKind::Compute(Column::Elementwise))
                .count();
            if run.len() >= MIN_CHAIN && elementwise >= MIN_ELEMENTWISE {
                out.push(chain_of(p, d, kernels, &run));
            }
        }
    }
    out.sort_by_key(|c| c.first_start);
    out
}

/// One stream's runs of members: casts that feed a member join, other casts are passed over, any other
/// kernel (and a pass of a multi-pass algorithm: `ops[n].1`) ends the run.
fn runs(d: &DeviceOps, ops: &[(usize, bool)]) -> Vec<Vec<usize>> {
    let member_at = |i: usize, breaks: bool| member(d.ops[i].kind) && !breaks;
    // For each op, whether the first kernel after it that is not a cast is a member.
    let mut feeds_member = vec![false; ops.len()];
    let mut next_is_member = false;
    for (n, &(i, breaks)) in ops.iter().enumerate().rev() {
        feeds_member[n] = next_is_member;
        if !cast(d.ops[i].kind) {
            next_is_member = member_at(i, breaks);
        }
    }
    let mut out = vec![Vec::new()];
    for (n, &(i, breaks)) in ops.iter().enumerate() {
        let kind = d.ops[i].kind;
        if member_at(i, breaks) || (cast(kind) && feeds_member[n]) {
            if let Some(run) = out.last_mut() {
                run.push(i);
            }
        } else if !cast(kind) {
            out.push(Vec::new());
        }
    }
    out
}

/// One member's figures for the fused estimate.
struct Member {
    time: i64,
    tensors: u32,
    /// Threads launched (blocks × threads per block): the data size it works on.
    threads: u64,
    reduction: bool,
}

fn chain_of(
    p: &Profile,
    d: &DeviceOps,
    kernels: &[super::super::model::Kernel],
    run: &[usize],
) -> Chain {
    let members: Vec<Member> = run
        .iter()
        .map(|&i| {
            let o = &d.ops[i];
            let k = &kernels[o.index as usize];
            Member {
                time: o.end - o.start,
                tensors: tensors_touched(p.string(k.demangled_name)).unwrap_or(2),
                threads: k.blocks() * k.threads_per_block(),
                reduction: o.kind == OpKind::Compute(Column::Reduction),
            }
        })
        .collect();
    let time: i64 = members.iter().map(|m| m.time).sum();
    Chain {
        first_start: d.ops[run[0]].start,
        kernels: run.len(),
        time_ns: time,
        fused_estimate_ns: fused_estimate(&members).min(time),
        members: run
            .iter()
            .map(|&i| {
                let o = &d.ops[i];
                (kernels[o.index as usize].short_name, o.end - o.start)
            })
            .collect(),
    }
}

/// Σ over the chain's data families of (median time per tensor × the widest member's tensors).
fn fused_estimate(members: &[Member]) -> i64 {
    let largest = members
        .iter()
        .filter(|m| !m.reduction)
        .map(|m| m.threads)
        .max()
        .unwrap_or(0);
    let mut sized: Vec<&Member> = members
        .iter()
        .filter(|m| !m.reduction && m.threads * SMALL >= largest)
        .collect();
    sized.sort_by_key(|m| m.threads);
    let mut total = 0.0;
    for family in sized.chunk_by(|a, b| a.threads == b.threads) {
        let mut per_tensor: Vec<f64> = family
            .iter()
            .map(|m| m.time as f64 / m.tensors as f64)
            .collect();
        per_tensor.sort_by(f64::total_cmp);
        let widest = family.iter().map(|m| m.tensors).max().unwrap_or(2) as f64;
        total += per_tensor[per_tensor.len() / 2] * widest;
    }
    total.round() as i64
}

/// Sum the chains, naming the members that take most time.
pub fn summarize(p: &Profile, chains: &[&Chain]) -> ChainSummary {
    if chains.is_empty() {
        return ChainSummary::default();
    }
    let mut lengths: Vec<u64> = chains.iter().map(|c| c.kernels as u64).collect();
    lengths.sort_unstable();
    let mut names: std::collections::BTreeMap<i64, i64> = Default::default();
    for c in chains {
        for &(name, t) in &c.members {
            *names.entry(name).or_default() += t;
        }
    }
    let mut top: Vec<(String, i64)> = names
        .into_iter()
        .map(|(n, t)| (p.string(n).to_string(), t))
        .collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ChainSummary {
        chains: chains.len() as u64,
        kernels: chains.iter().map(|c| c.kernels as u64).sum(),
        median_length: lengths[lengths.len() / 2],
        time_ns: chains.iter().map(|c| c.time_ns).sum(),
        fused_estimate_ns: chains.iter().map(|c| c.fused_estimate_ns).sum(),
        top_kernels: top.into_iter().take(3).map(|t| t.0).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sort, a scan, a compaction or an index_add_ ends a chain (no pointwise fusion absorbs it); a gather does not.
    #[test]
    fn multi_pass_algorithms_and_atomic_accumulations_are_named_apart_from_gathers() {
        for name in [
            "DeviceRadixSortOnesweepKernel",
            "DeviceRadixSortHistogramKernel",
            "DeviceScanKernel",
            "DeviceSelectSweepKernel",
            "randperm_handle_duplicate_keys_kernel_unique",
            "segmented_sort_kernel",
            "indexFuncLargeIndex",
            "indexFuncSmallIndex",
        ] {
            assert!(unfusable(name), "{name}");
        }
        for name in [
            "index_select_kernel",
            "vectorized_elementwise_kernel",
            "reduce_kernel",
            "DeviceReduceKernel",
        ] {
            assert!(!unfusable(name), "{name}");
        }
    }

    #[test]
    fn the_tensor_count_comes_from_pytorch_kernel_names() {
        assert_eq!(
            tensors_touched(
                "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
            ),
            Some(3)
        );
        assert_eq!(
            tensors_touched(
                "void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<float>, at::detail::Array<char*, 1>, ...>"
            ),
            Some(1)
        );
        assert_eq!(tensors_touched("ampere_sgemm_128x64_nn"), None);
    }

    fn figures(time: i64, tensors: u32, threads: u64, reduction: bool) -> Member {
        Member {
            time,
            tensors,
            threads,
            reduction,
        }
    }

    #[test]
    fn a_norm_chain_fuses_to_one_pass_over_its_tensor() {
        // square, mean (a reduction), + eps and rsqrt on one value per row, scale, weight: the full-size
        // members move 2 tensors in ~100 µs (3 in 150 µs); the row statistics are tiny.
        let m = [
            figures(100, 2, 1 << 19, false),
            figures(60, 2, 4096, true),
            figures(3, 2, 1024, false),
            figures(3, 2, 1024, false),
            figures(150, 3, 1 << 19, false),
            figures(150, 3, 1 << 19, false),
        ];
        // One family: 50 per tensor × 3 tensors.
        assert_eq!(fused_estimate(&m), 150);
    }

    #[test]
    fn tensors_of_different_sizes_are_separate_passes() {
        // Two sizes, and one pass over the same tensor launched at half the size (a bf16 vectorized kernel):
        // three passes.
        let m = [
            figures(100, 2, 1 << 20, false),
            figures(100, 2, 1 << 20, false),
            figures(50, 2, 1 << 19, false),
            figures(40, 2, 1 << 17, false),
            figures(40, 2, 1 << 17, false),
        ];
        assert_eq!(fused_estimate(&m), 100 + 50 + 40);
    }
}
