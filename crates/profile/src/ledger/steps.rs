//! Steps on the GPU timeline.
//!
//! A step's GPU work is what its launches put on the device: every operation
//! whose launching call (any thread of the process, CUDA-graph launches
//! included) lies inside the step's NVTX range. The step's **period** on a
//! device runs from its first operation to the next step's first operation, so
//! consecutive periods tile the device's timeline whatever the CPU does: when
//! the CPU runs ahead of the GPU, its step ranges are short and early, but the
//! periods still follow the GPU. Without step ranges, the steps are the
//! iterations of a kernel that repeats once per iteration (the
//! kernel-pattern detection of `aisp_profile_iterations`); without either, the
//! device's whole span is one period.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::iterations::{self, IterationMark};
use super::super::model::{self, NvtxRange};
use super::super::{Profile, Result};
use super::ops::{DeviceOps, OpKind};

/// How a device's steps were found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepSource {
    /// NVTX step ranges (`step_N`, another numbered family, or the caller's marker).
    Nvtx,
    /// A kernel that occurs once per iteration (no step ranges).
    KernelPattern,
    /// A sequence of kernels that repeats each iteration, when no kernel runs once per iteration.
    KernelSequence,
    /// Neither: the device's whole span is one period.
    Span,
}

/// A step's bounds on the device and on the host.
#[derive(Debug, Clone)]
pub struct StepSpan {
    pub name: String,
    /// First operation of the step on the device.
    pub start: i64,
    /// The next step's first operation (the last step: its last operation's end).
    pub end: i64,
    /// The host interval the step was issued in and its thread: the NVTX range, or the launch calls of
    /// consecutive anchor kernels.
    pub cpu: Option<(i64, i64, i64)>,
    /// Operations the step launched on this device.
    pub ops: u32,
}

/// The steps of one device, in time order, and how they were found.
pub struct DeviceSteps {
    pub source: StepSource,
    /// The NVTX family (`step`), the anchor kernel's name, or the name of the kernel that opens a
    /// repeating sequence.
    pub family: Option<String>,
    /// The repeating sequence's length in kernels (`KernelSequence` only).
    pub sequence_length: Option<usize>,
    pub steps: Vec<StepSpan>,
}

/// Find the steps of a device.
pub fn device_steps(p: &Profile, d: &DeviceOps, marker: Option<&str>) -> Result<DeviceSteps> {
    if d.ops.is_empty() {
        return Ok(DeviceSteps {
            source: StepSource::Span,
            family: None,
            sequence_length: None,
            steps: Vec::new(),
        });
    }
    let process = d.processes.first().copied();
    if let Some(pid) = process
        && let Some(sr) = iterations::detect_steps(p, Some(&[pid]), marker)?
    {
        let steps = nvtx_steps(p, d, pid, &sr.ranges)?;
        if steps.len() >= 2 {
            return Ok(DeviceSteps {
                source: StepSource::Nvtx,
                family: Some(sr.family),
                sequence_length: None,
                steps,
            });
        }
    }
    if let Some(found) = pattern_steps(p, d)?
        && found.steps.len() >= 2
    {
        return Ok(found);
    }
    let start = d.ops.first().map_or(0, |o| o.start);
    let end = d.ops.iter().map(|o| o.end).max().unwrap_or(start);
    Ok(DeviceSteps {
        source: StepSource::Span,
        family: None,
        sequence_length: None,
        steps: vec![StepSpan {
            name: "span".into(),
            start,
            end,
            cpu: None,
            ops: d.ops.len() as u32,
        }],
    })
}

/// Steps from NVTX ranges: each range's first operation on the device opens its period.
fn nvtx_steps(
    p: &Profile,
    d: &DeviceOps,
    process: i64,
    ranges: &[NvtxRange],
) -> Result<Vec<StepSpan>> {
    let api = p.api()?;
    let mut ranges: Vec<&NvtxRange> = ranges
        .iter()
        .filter(|r| model::process_key(r.global_tid) == process)
        .collect();
    ranges.sort_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
    // Per range: first op start, last op end, op count.
    let mut first = vec![i64::MAX; ranges.len()];
    let mut last = vec![i64::MIN; ranges.len()];
    let mut count = vec![0u32; ranges.len()];
    for o in &d.ops {
        let Some(a) = o.launch.map(|a| &api[a as usize]) else {
            continue;
        };
        if model::process_key(a.global_tid) != process {
            continue;
        }
        let Some(r) = containing(&ranges, a.start, a.end) else {
            continue;
        };
        first[r] = first[r].min(o.start);
        last[r] = last[r].max(o.end);
        count[r] += 1;
    }
    let mut found: Vec<(i64, i64, usize)> = (0..ranges.len())
        .filter(|&r| count[r] > 0)
        .map(|r| (first[r], last[r], r))
        .collect();
    found.sort_unstable();
    let mut steps = Vec::with_capacity(found.len());
    for (i, &(start, last_end, r)) in found.iter().enumerate() {
        let end = found.get(i + 1).map_or(last_end, |n| n.0);
        let range = ranges[r];
        steps.push(StepSpan {
            name: range.name.clone(),
            start,
            end: end.max(start),
            cpu: Some((range.start, range.end, range.global_tid)),
            ops: count[r],
        });
    }
    Ok(steps)
}

/// The latest-starting range that holds the call `[s, e]`.
fn containing(ranges: &[&NvtxRange], s: i64, e: i64) -> Option<usize> {
    let i = ranges.partition_point(|r| r.start <= s);
    // Step ranges follow each other; a few steps back covers nested or overlapping families.
    (i.saturating_sub(4)..i)
        .rev()
        .find(|&j| ranges[j].start <= s && e <= ranges[j].end)
}

/// Steps from a kernel that occurs once per iteration, or else from a repeating kernel sequence: each
/// occurrence (repetition) opens a period.
fn pattern_steps(p: &Profile, d: &DeviceOps) -> Result<Option<DeviceSteps>> {
    let kernels = p.kernels()?;
    let api = p.api()?;
    let main = d.processes.first().copied();
    let idx: Vec<usize> = d
        .ops
        .iter()
        .filter(|o| !matches!(o.kind, OpKind::Copy(_)) && Some(o.process) == main)
        .map(|o| o.index as usize)
        .collect();
    let Some((starts, mark)) = iterations::iteration_starts(kernels, &idx) else {
        return Ok(None);
    };
    let anchors: Vec<usize> = starts.iter().map(|&pos| idx[pos]).collect();
    let (source, name, sequence_length) = match mark {
        IterationMark::Anchor(name) => (StepSource::KernelPattern, name, None),
        IterationMark::Sequence { length, opens } => {
            (StepSource::KernelSequence, opens, Some(length))
        }
    };
    // Ops per period, for the step's op count.
    let starts: Vec<i64> = anchors.iter().map(|&k| kernels[k].start).collect();
    let mut ops = vec![0u32; starts.len()];
    for o in &d.ops {
        let i = starts.partition_point(|&s| s <= o.start);
        if i > 0 && i < starts.len() {
            ops[i - 1] += 1;
        }
    }
    let launch = p.launch_index()?;
    let call = |k: usize| launch.kernel_launch[k].map(|a| &api[a as usize]);
    let issuer = loop_thread(&idx, |k| call(k).map(|a| a.global_tid));
    let mut steps = Vec::new();
    for (n, w) in anchors.windows(2).enumerate() {
        // The host's time is the loop thread's between the two anchors' launches: the anchor may be launched by
        // another thread (autograd's backward thread), which waits, outside any CUDA call, most of the step.
        let cpu = match (call(w[0]), call(w[1]), issuer) {
            (Some(a), Some(b), Some(tid)) if b.start > a.start => Some((a.start, b.start, tid)),
            _ => None,
        };
        steps.push(StepSpan {
            name: format!("iteration {n}"),
            start: kernels[w[0]].start,
            end: kernels[w[1]].start,
            cpu,
            ops: ops[n],
        });
    }
    Ok(Some(DeviceSteps {
        source,
        family: Some(p.string(name).to_string()),
        sequence_length,
        steps,
    }))
}

/// The thread that launched most of these kernels: the loop's own thread.
fn loop_thread(kernels: &[usize], thread_of: impl Fn(usize) -> Option<i64>) -> Option<i64> {
    let mut count: std::collections::HashMap<i64, usize> = Default::default();
    for &k in kernels {
        if let Some(t) = thread_of(k) {
            *count.entry(t).or_default() += 1;
        }
    }
    count
        .into_iter()
        .max_by_key(|&(t, n)| (n, std::cmp::Reverse(t)))
        .map(|(t, _)| t)
}

/// The leading steps that are warm-up: always the first (lazy module loading, handle creation, allocator
/// growth), then each following step while its period exceeds 1.25× the median period of the later half
/// of the steps (autotuning, compilation, a second lazy load), keeping at least half the steps steady.
pub fn warmup_steps(periods: &[i64]) -> usize {
    let n = periods.len();
    if n < 2 {
        return 0;
    }
    let mut later: Vec<i64> = periods[n / 2..].to_vec();
    later.sort_unstable();
    let median = later[later.len() / 2] as f64;
    let mut w = 1;
    while w < n / 2 && periods[w] as f64 > 1.25 * median {
        w += 1;
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_is_the_first_step_and_the_slow_ones_after_it() {
        assert_eq!(warmup_steps(&[]), 0);
        assert_eq!(warmup_steps(&[10]), 0);
        assert_eq!(warmup_steps(&[50, 10]), 1);
        assert_eq!(warmup_steps(&[50, 10, 10, 10, 10, 10]), 1);
        assert_eq!(warmup_steps(&[50, 30, 20, 10, 10, 10, 10, 10]), 3);
        // A steady first step is still warm-up: lazy loading lives there.
        assert_eq!(warmup_steps(&[10, 10, 10, 10]), 1);
        // Never more than half.
        assert_eq!(warmup_steps(&[90, 80, 70, 60, 10, 10]), 3);
    }
}
