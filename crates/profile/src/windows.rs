//! The windows every figure is stated over, per device:
//!
//! - `span`: first kernel start → last kernel end on the device;
//! - `steps`: the device's steps on the GPU timeline, as the step ledger finds
//!   them (`ledger::device_steps`: NVTX step ranges attributed by launch call,
//!   else iterations of a once-per-iteration kernel): the first step's first
//!   GPU operation → the last step's end;
//! - `steady`: the same after the warm-up steps (the first, and the slow ones
//!   after it: `ledger::warmup_steps`) — the steady window every finding uses;
//! - `trim`: the caller's own window, when one was given.
//!
//! All windows are clipped to the caller's trim.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::iterations::{self, StepRanges};
use super::{Profile, ResolvedScope, Result};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WindowKind {
    /// First kernel start → last kernel end on the device.
    Span,
    /// First step start → last step end (the device's process).
    Steps,
    /// Second step start → last step end.
    Steady,
    /// The caller's window (start_ns/end_ns or nvtx_range).
    Trim,
}

impl WindowKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WindowKind::Span => "span",
            WindowKind::Steps => "steps",
            WindowKind::Steady => "steady",
            WindowKind::Trim => "trim",
        }
    }
}

/// A named window `[start_ns, end_ns)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Window {
    pub kind: WindowKind,
    pub start_ns: i64,
    pub end_ns: i64,
    pub length_ns: i64,
}

impl Window {
    pub fn new(kind: WindowKind, start_ns: i64, end_ns: i64) -> Window {
        Window {
            kind,
            start_ns,
            end_ns,
            length_ns: (end_ns - start_ns).max(0),
        }
    }
    pub fn bounds(&self) -> (i64, i64) {
        (self.start_ns, self.end_ns)
    }
}

/// The windows of one device.
#[derive(Debug, Clone)]
pub struct DeviceWindows {
    pub device: i64,
    /// globalPids of the processes whose kernels ran on the device.
    pub global_pids: Vec<i64>,
    pub span: Option<Window>,
    pub steps: Option<Window>,
    pub steady: Option<Window>,
    pub trim: Option<Window>,
    /// The step ranges behind `steps`/`steady`.
    pub step_ranges: Option<StepRanges>,
}

impl DeviceWindows {
    /// The windows that exist, in the order span, steps, steady, trim.
    pub fn all(&self) -> Vec<Window> {
        [self.span, self.steps, self.steady, self.trim]
            .into_iter()
            .flatten()
            .collect()
    }
}

/// What the kept windows of the whole export hold.
struct KeptWindows(Vec<DeviceWindows>);

impl super::loaded::Footprint for KeptWindows {
    fn footprint(&self) -> u64 {
        self.0
            .iter()
            .map(|w| {
                let ranges = w.step_ranges.as_ref().map_or(0, |r| {
                    r.ranges
                        .iter()
                        .map(|n| std::mem::size_of_val(n) + n.name.capacity())
                        .sum::<usize>()
                });
                (std::mem::size_of::<DeviceWindows>() + w.global_pids.capacity() * 8 + ranges)
                    as u64
            })
            .sum()
    }
}

/// Windows of every device in scope (devices that ran kernels, copies or memsets); kept with the export's
/// tables for the whole export (every question of a session reads them).
pub fn device_windows(p: &Profile, scope: &ResolvedScope) -> Result<Vec<DeviceWindows>> {
    if scope.is_whole() {
        let kept = p.derived(super::loaded::TableKind::DeviceWindows, || {
            read_device_windows(p, scope).map(KeptWindows)
        })?;
        Ok(kept.0.clone())
    } else {
        read_device_windows(p, scope)
    }
}

fn read_device_windows(p: &Profile, scope: &ResolvedScope) -> Result<Vec<DeviceWindows>> {
    let kernels = p.kernels()?;
    let ops = super::ledger::device_ops(p, scope)?;
    let mut out = Vec::new();
    for device in p.devices()? {
        if scope.device.is_some_and(|d| d != device) {
            continue;
        }
        let mut first = i64::MAX;
        let mut last = i64::MIN;
        let mut pids = BTreeSet::new();
        for k in kernels
            .iter()
            .filter(|k| scope.admits(device, k.global_pid, k.start, k.end))
            .filter(|k| k.device == device)
        {
            first = first.min(k.start);
            last = last.max(k.end);
            pids.insert(k.global_pid & super::model::PID_MASK);
        }
        if pids.is_empty() {
            // A device with copies only: its processes come from the copies.
            for m in p.memcpys()?.iter().filter(|m| m.device == device) {
                pids.insert(m.global_pid & super::model::PID_MASK);
            }
        }
        let span = (first < last).then(|| {
            let (s, e) = scope.clip(first, last);
            Window::new(super::WindowKind::Span, s, e)
        });
        let global_pids: Vec<i64> = pids.into_iter().collect();
        let step_ranges = iterations::detect_steps(p, Some(&global_pids), None)?;
        // The steps on the GPU timeline (the ledger's), not the CPU's ranges: when the CPU runs ahead its
        // ranges are a sliver of the GPU's work.
        let (steps, steady) = match ops.iter().find(|d| d.device == device) {
            Some(d) => {
                let found = super::ledger::device_steps(p, d, None)?;
                match (found.source, found.steps.first(), found.steps.last()) {
                    (super::ledger::StepSource::Span, _, _) | (_, None, _) | (_, _, None) => {
                        (None, None)
                    }
                    (_, Some(first), Some(last)) => {
                        let periods: Vec<i64> =
                            found.steps.iter().map(|s| s.end - s.start).collect();
                        let w = super::ledger::warmup_steps(&periods);
                        (
                            clip_window(scope, WindowKind::Steps, first.start, last.end),
                            found.steps.get(w).and_then(|st| {
                                clip_window(scope, WindowKind::Steady, st.start, last.end)
                            }),
                        )
                    }
                }
            }
            None => (None, None),
        };
        let trim = scope.trim.map(|(s, e)| Window::new(WindowKind::Trim, s, e));
        out.push(DeviceWindows {
            device,
            global_pids,
            span,
            steps,
            steady,
            trim,
            step_ranges,
        });
    }
    Ok(out)
}

fn clip_window(scope: &ResolvedScope, kind: WindowKind, s: i64, e: i64) -> Option<Window> {
    let (s, e) = scope.clip(s, e);
    (e > s).then(|| Window::new(kind, s, e))
}
