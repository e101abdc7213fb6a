//! The NVTX ranges a steady step holds: what an assistant asks after the findings and the kernels ("how is a step
//! made up: how many micro-batches, how long the forward takes"), answered in a few rows so that the NVTX listing
//! is needed only for more.
//!
//! A range belongs to the steady window when the host opened and closed it between the launches of the steps beside
//! the window, on the device's process (any thread). Its kernels are those launched inside
//! it by any thread of the process, as the NVTX listing attributes them; only this device's steady kernels count. The step's own
//! ranges (the family the steps were found from) are the steps themselves and are not listed.

use rustc_hash::FxHashMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::Profile;
use super::super::Result;
use super::super::ledger::DeviceLedger;
use super::super::model::{self, NvtxRange};
use super::super::nvtx::group_name;
use super::super::regions::fold_name;

/// Ranges a device's step summary lists.
pub const STEP_REGIONS: usize = 4;

/// One NVTX range name (numbering folded: `micro_*`) of a device's steady window, per steady step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepRegion {
    pub name: String,
    /// Its occurrences in the steady window over the steady steps.
    pub per_step: f64,
    /// The host time of one occurrence, mean.
    pub host_ns_each: i64,
    /// The device's kernel time launched inside it, over the steady steps.
    pub kernel_ns_per_step: i64,
    /// That kernel time, share of the steady window.
    pub kernel_pct: f64,
}

impl StepRegion {
    /// The range in one line: `micro_*: 16 a step, 46.94 ms on the host each, 4.27 ms of kernels a step (0.7 % of
    /// the step)`.
    pub fn line(&self) -> String {
        let kernels = match self.kernel_ns_per_step {
            0 => "no kernels".to_string(),
            ns => format!(
                "{} of kernels a step ({} % of the step)",
                duration(ns),
                self.kernel_pct
            ),
        };
        format!(
            "{}: {} a step, {} on the host each, {kernels}",
            self.name,
            self.per_step,
            duration(self.host_ns_each),
        )
    }
}

pub(super) fn duration(ns: i64) -> String {
    if ns >= 100_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} us", ns as f64 / 1e3)
    }
}

/// The `n` ranges with the most time in `d`'s steady window, kernel or host time whichever is larger, most first;
/// none where the export has no ranges in the window or the launches are not recorded.
pub fn step_regions(p: &Profile, d: &DeviceLedger, n: usize) -> Result<Vec<StepRegion>> {
    let Some(process) = d.process_key else {
        return Ok(Vec::new());
    };
    let Some((lo, hi)) = host_window(p, d)? else {
        return Ok(Vec::new());
    };
    // The family as the ledger names it (`step`) or as recorded (`step_3`, folded to `step_*`).
    let family = d.family.as_deref().map(fold_name);
    let is_step = |name: &str| {
        family.as_deref().is_some_and(|f| {
            name == f
                || name
                    .trim_end_matches('*')
                    .trim_end_matches(['_', '.', ' ', '-', '#', ':'])
                    == f
        })
    };
    // Ranges are sorted by start: those of the window are one run of them.
    let all = &p.nvtx()?.ranges;
    let first = all.partition_point(|r| r.start < lo);
    let ranges: Vec<&NvtxRange> = all[first..]
        .iter()
        .take_while(|r| r.start < hi)
        .filter(|r| r.is_push_pop() && r.end <= hi && model::process_key(r.global_tid) == process)
        .collect();
    if ranges.is_empty() {
        return Ok(Vec::new());
    }
    let kernel_ns = kernel_time_inside(p, d, process, &ranges)?;
    // Per folded name: occurrences, host time, kernel time on this device.
    let mut by_name: FxHashMap<String, (u64, i64, i64)> = FxHashMap::default();
    for (r, k) in ranges.iter().zip(&kernel_ns) {
        let name = fold_name(group_name(&r.name));
        if is_step(&name) {
            continue;
        }
        let e = by_name.entry(name).or_default();
        e.0 += 1;
        e.1 += r.dur();
        e.2 += k;
    }
    // A range matters for the kernels launched in it or for the host time it takes (a data-loading range launches
    // none): the larger of the two first.
    let mut top: Vec<(String, (u64, i64, i64))> = by_name.into_iter().collect();
    top.sort_by_key(|(name, (_, host, kernel))| {
        (std::cmp::Reverse((*host).max(*kernel)), name.clone())
    });
    let steps = d.steady.steps.max(1) as f64;
    Ok(top
        .into_iter()
        .take(n)
        .map(|(name, (count, host, kernel))| StepRegion {
            name,
            per_step: (count as f64 / steps * 100.0).round() / 100.0,
            host_ns_each: host / count.max(1) as i64,
            kernel_ns_per_step: (kernel as f64 / steps).round() as i64,
            kernel_pct: d.share(kernel),
        })
        .collect())
}

/// Per range, the time of the device's steady kernels whose launch call (by any thread of `process`) lies inside it,
/// as `crate::attribution` attributes kernels to ranges, swept over the steady window's launches only (a sweep over every
/// launch of the process costs a large export a tenth of a second per device).
fn kernel_time_inside(
    p: &Profile,
    d: &DeviceLedger,
    process: i64,
    ranges: &[&NvtxRange],
) -> Result<Vec<i64>> {
    let kernels = p.kernels()?;
    let api = p.api()?;
    let launches = &p.launch_index()?.kernel_launch;
    let mut calls: Vec<(i64, i64, i64)> = super::steady_kernels(kernels, d)
        .filter_map(|(i, k)| {
            let a = &api[launches.get(i).copied().flatten()? as usize];
            (model::process_key(a.global_tid) == process).then_some((a.start, a.end, k.dur()))
        })
        .collect();
    calls.sort_unstable();
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| (ranges[i].start, std::cmp::Reverse(ranges[i].end)));
    let mut out = vec![0i64; ranges.len()];
    let (mut next, mut active) = (0, Vec::new());
    for &(start, end, dur) in &calls {
        while next < order.len() && ranges[order[next]].start <= start {
            active.push(order[next]);
            next += 1;
        }
        active.retain(|&r| ranges[r].end >= start);
        for &r in &active {
            if ranges[r].end >= end {
                out[r] += dur;
            }
        }
    }
    Ok(out)
}

/// The host side of the steady window: from the end of the launch of the device's last kernel before the window
/// (else the launch of its first kernel in it) to the start of the launch of its first kernel after the window (else
/// the window's end: with no step after it, what the host does once the device has finished is the run's teardown,
/// not a step's). A step's ranges open before its first launch and close after its last, so the launches that bound
/// the window are those of the steps beside it.
pub(super) fn host_window(p: &Profile, d: &DeviceLedger) -> Result<Option<(i64, i64)>> {
    let kernels = p.kernels()?;
    let api = p.api()?;
    let launches = &p.launch_index()?.kernel_launch;
    let call = |i: usize| launches.get(i).copied().flatten().map(|a| &api[a as usize]);
    let on_device = |i: &usize| kernels[*i].device == d.device;
    let first = kernels.partition_point(|k| k.start < d.steady.start_ns);
    let after = kernels.partition_point(|k| k.start < d.steady.end_ns);
    let lo = match (0..first).rev().find(on_device).and_then(call) {
        Some(a) => a.end,
        None => match (first..after).find(on_device).and_then(call) {
            Some(a) => a.start,
            None => return Ok(None),
        },
    };
    let hi = (after..kernels.len())
        .find(on_device)
        .and_then(call)
        .map_or(d.steady.end_ns, |a| a.start);
    Ok(Some((lo, hi)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_states_each_field_in_milliseconds_or_microseconds() {
        let r = StepRegion {
            name: "micro_*".into(),
            per_step: 16.0,
            host_ns_each: 46_938_847,
            kernel_ns_per_step: 73_524,
            kernel_pct: 0.01,
        };
        assert_eq!(
            r.line(),
            "micro_*: 16 a step, 46.94 ms on the host each, 73.5 us of kernels a step (0.01 % of the step)"
        );
        let data = StepRegion {
            name: "data".into(),
            per_step: 1.0,
            host_ns_each: 5_190_000,
            kernel_ns_per_step: 0,
            kernel_pct: 0.0,
        };
        assert_eq!(
            data.line(),
            "data: 1 a step, 5.19 ms on the host each, no kernels"
        );
    }
}
