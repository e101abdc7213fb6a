//! Unfused elementwise chains: runs of three or more elementwise kernels that
//! follow each other on one stream with the same launch shape (grid and
//! block: the same element count, for PyTorch's elementwise launcher). Each
//! member reads its inputs from device memory and writes its output back; one
//! fused kernel would read the chain's inputs once and write its result once.
//!
//! The fused lower bound is estimated from the chain's own timings, at the
//! bandwidth its members reached: a member's time per tensor it touches (the
//! `std::array<char*, N>` / `Array<char*, N>` of PyTorch's kernel names: N
//! tensors; 2 when the name does not say) times the tensors the widest member
//! touches. A fused kernel touches at least those, so the estimate errs low on
//! the saving only when the chain reads more distinct tensors than its widest
//! member — it is a lower bound on the fused time when the chain's extra
//! inputs are few, as in activation and normalization chains.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::Profile;
use super::columns::Column;
use super::ops::{DeviceOps, OpKind};

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

/// The chains among the device's ops that start inside `[lo, hi)`.
pub fn find_chains(p: &Profile, d: &DeviceOps, lo: i64, hi: i64) -> Vec<Chain> {
    let kernels = match p.kernels() {
        Ok(k) => k,
        Err(_) => return Vec::new(),
    };
    // Per stream, kernel ops in start order.
    let mut by_stream: std::collections::BTreeMap<i64, Vec<usize>> = Default::default();
    for (i, o) in d.ops.iter().enumerate() {
        if o.start >= lo && o.start < hi && !matches!(o.kind, OpKind::Copy(_)) {
            by_stream.entry(o.stream).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for ops in by_stream.values() {
        let mut run: Vec<usize> = Vec::new();
        let flush = |run: &mut Vec<usize>, out: &mut Vec<Chain>| {
            if run.len() >= MIN_CHAIN {
                out.push(chain_of(p, d, kernels, run));
            }
            run.clear();
        };
        for &i in ops {
            let o = &d.ops[i];
            let k = &kernels[o.index as usize];
            let same_shape = run.last().is_some_and(|&j| {
                let prev = &kernels[d.ops[j].index as usize];
                prev.grid == k.grid && prev.block == k.block
            });
            if o.kind != OpKind::Compute(Column::Elementwise) {
                flush(&mut run, &mut out);
                continue;
            }
            if !run.is_empty() && !same_shape {
                flush(&mut run, &mut out);
            }
            run.push(i);
        }
        flush(&mut run, &mut out);
    }
    out.sort_by_key(|c| c.first_start);
    out
}

fn chain_of(
    p: &Profile,
    d: &DeviceOps,
    kernels: &[super::super::model::Kernel],
    run: &[usize],
) -> Chain {
    let members: Vec<(i64, Option<u32>)> = run
        .iter()
        .map(|&i| {
            let o = &d.ops[i];
            let k = &kernels[o.index as usize];
            (o.end - o.start, tensors_touched(p.string(k.demangled_name)))
        })
        .collect();
    let time: i64 = members.iter().map(|m| m.0).sum();
    let widest = members.iter().map(|m| m.1.unwrap_or(2)).max().unwrap_or(2) as f64;
    let mut per_tensor: Vec<f64> = members
        .iter()
        .map(|&(t, n)| t as f64 / n.unwrap_or(2) as f64)
        .collect();
    per_tensor.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let median = per_tensor[per_tensor.len() / 2];
    let fused = ((median * widest).round() as i64).min(time);
    Chain {
        first_start: d.ops[run[0]].start,
        kernels: run.len(),
        time_ns: time,
        fused_estimate_ns: fused,
        members: run
            .iter()
            .map(|&i| {
                let o = &d.ops[i];
                (kernels[o.index as usize].short_name, o.end - o.start)
            })
            .collect(),
    }
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
}
