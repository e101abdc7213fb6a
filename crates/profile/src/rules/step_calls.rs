//! The host calls a steady step makes on the thread that launches its kernels: what an assistant asks when the
//! device waits for the host ("what is the host doing: allocating, capturing graphs, reading a pipe?"), answered in
//! a few rows so that the CUDA API and OS runtime summaries are needed only for more.
//!
//! The calls are those of the thread the device waits for (see [`launching_thread`]), CUDA API and OS runtime
//! alike, begun and ended inside the host side of the steady window (see
//! [`super::step_regions`]); each name's count and time over the steady steps. An OS call made inside a CUDA call
//! (the `ioctl` of a `cudaMalloc`) is that CUDA call's time and is not listed apart.

use rustc_hash::FxHashMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::Profile;
use super::super::Result;
use super::super::calls::api_display_name;
use super::super::ledger::{Column, DeviceLedger};

/// Calls a device's step summary lists.
pub const STEP_CALLS: usize = 5;

/// One host call name of a device's steady window, per steady step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepCall {
    /// As the export names it (CUDA API without its `_v2` suffix).
    pub name: String,
    /// An OS runtime call (else a CUDA API call).
    pub os: bool,
    /// Its calls over the steady steps.
    pub per_step: f64,
    /// Its time over the steady steps.
    pub ns_per_step: i64,
    /// That time, share of the host side of the steady steps (the window its calls are counted in).
    pub pct: f64,
}

impl StepCall {
    /// The call in one line: `cudaMalloc: 5.86 a step, 0.54 ms a step (8.6 % of the step)`, `read (OS): ...`.
    pub fn line(&self) -> String {
        format!(
            "{}{}: {} a step, {} a step ({} % of the step)",
            self.name,
            if self.os { " (OS)" } else { "" },
            self.per_step,
            super::step_regions::duration(self.ns_per_step),
            self.pct
        )
    }
}

/// The device's idle share of its steady window (%) from which its host calls are listed: below it the host is off
/// the critical path, and reading a busy thread's OS runtime calls costs a large export a third of a second.
pub const HOST_CALLS_MIN_IDLE_PCT: f64 = 10.0;

/// The `n` host calls with the most time on the thread `d` waits for in its steady window, most first; none where
/// the device idles less than [`HOST_CALLS_MIN_IDLE_PCT`] of it or the launches are not recorded.
pub fn step_calls(p: &Profile, d: &DeviceLedger, n: usize) -> Result<Vec<StepCall>> {
    let idle = d.share(d.steady.columns.group(super::super::ledger::Group::Idle));
    if idle < HOST_CALLS_MIN_IDLE_PCT {
        return Ok(Vec::new());
    }
    let Some((lo, hi)) = super::step_regions::host_window(p, d)? else {
        return Ok(Vec::new());
    };
    let Some(thread) = launching_thread(p, d)? else {
        return Ok(Vec::new());
    };
    // name → (os, calls, time)
    let mut by_name: FxHashMap<String, (bool, u64, i64)> = FxHashMap::default();
    let api = p.api()?;
    let first = api.partition_point(|a| a.start < lo);
    // The thread's CUDA calls, by start: an OS call inside one (the `ioctl` of a `cudaMalloc`) is that call's time.
    let mut cuda: Vec<(i64, i64)> = Vec::new();
    // By name id first: a name looked up per call costs a large export a third of a second.
    let mut by_id: FxHashMap<i64, (u64, i64)> = FxHashMap::default();
    for a in api[first..].iter().take_while(|a| a.start < hi) {
        if a.global_tid != thread || a.end > hi {
            continue;
        }
        cuda.push((a.start, a.end));
        let e = by_id.entry(a.name).or_default();
        e.0 += 1;
        e.1 += a.dur();
    }
    for (id, (calls, ns)) in by_id {
        let e = by_name
            .entry(api_display_name(p.string(id)).to_string())
            .or_insert((false, 0, 0));
        e.1 += calls;
        e.2 += ns;
    }
    let inside_cuda = |start: i64, end: i64| {
        let i = cuda.partition_point(|c| c.0 <= start);
        i.checked_sub(1).is_some_and(|i| cuda[i].1 >= end)
    };
    let windows: FxHashMap<i64, Vec<(i64, i64)>> = [(thread, vec![(lo, hi)])].into_iter().collect();
    let os = p.fold_osrt_threads_near(
        &windows,
        |_| true,
        FxHashMap::<i64, (u64, i64)>::default,
        |acc, start, end, _, name| {
            if start >= lo && end <= hi && !inside_cuda(start, end) {
                let e = acc.entry(name).or_default();
                e.0 += 1;
                e.1 += end - start;
            }
        },
    )?;
    for part in os {
        for (name, (calls, ns)) in part {
            let e = by_name
                .entry(p.string(name).to_string())
                .or_insert((true, 0, 0));
            e.1 += calls;
            e.2 += ns;
        }
    }
    let mut top: Vec<(String, (bool, u64, i64))> = by_name.into_iter().collect();
    top.sort_by_key(|(name, (_, _, ns))| (std::cmp::Reverse(*ns), name.clone()));
    let steps = d.steady.steps.max(1) as f64;
    // The calls are counted on the host side of the steady steps, which may be longer than the device's window (the
    // device catches up on a step the host finished early): their share is of that side, never over 100 %.
    let share = |ns: i64| super::super::stats::pct2(ns, (hi - lo).max(1));
    Ok(top
        .into_iter()
        .take(n)
        .map(|(name, (os, calls, ns))| StepCall {
            name,
            os,
            per_step: (calls as f64 / steps * 100.0).round() / 100.0,
            ns_per_step: (ns as f64 / steps).round() as i64,
            pct: share(ns),
        })
        .collect())
}

/// The thread the device waited for most in its steady steps (the launcher of the operations that ended its idle
/// stretches), else, on a device that hardly waits, the thread that launched most of its steady kernels. Not simply
/// the busiest launcher: PyTorch's autograd thread launches the backward while the main thread, which sleeps, loads
/// or syncs between steps, is the one the device waits for.
fn launching_thread(p: &Profile, d: &DeviceLedger) -> Result<Option<i64>> {
    if let Some(t) = waited_for(d, |_| true) {
        return Ok(Some(t));
    }
    let kernels = p.kernels()?;
    let api = p.api()?;
    let launches = &p.launch_index()?.kernel_launch;
    let mut count: FxHashMap<i64, u64> = FxHashMap::default();
    for (i, _) in super::steady_kernels(kernels, d) {
        if let Some(a) = launches.get(i).copied().flatten() {
            *count.entry(api[a as usize].global_tid).or_default() += 1;
        }
    }
    Ok(count
        .into_iter()
        .max_by_key(|&(tid, n)| (n, std::cmp::Reverse(tid)))
        .map(|(tid, _)| tid))
}

/// The thread whose launches ended most of `d`'s steady idle time in the columns `column` accepts.
pub(super) fn waited_for(d: &DeviceLedger, column: impl Fn(Column) -> bool) -> Option<i64> {
    let mut waited: FxHashMap<i64, i64> = FxHashMap::default();
    for piece in d.idle.iter().filter(|p| column(p.column)) {
        if let Some(t) = piece.thread {
            *waited.entry(t).or_default() += piece.end - piece.start;
        }
    }
    waited
        .into_iter()
        .max_by_key(|&(t, ns)| (ns, std::cmp::Reverse(t)))
        .map(|(t, _)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_os_calls_and_states_each_figure() {
        let mut c = StepCall {
            name: "cudaMalloc".into(),
            os: false,
            per_step: 5.86,
            ns_per_step: 541_000,
            pct: 8.6,
        };
        assert_eq!(
            c.line(),
            "cudaMalloc: 5.86 a step, 0.54 ms a step (8.6 % of the step)"
        );
        c.name = "read".into();
        c.os = true;
        c.ns_per_step = 16_200;
        assert_eq!(
            c.line(),
            "read (OS): 5.86 a step, 16.2 us a step (8.6 % of the step)"
        );
    }
}
