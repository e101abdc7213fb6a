//! The windows every figure is stated over, per device:
//!
//! - `span`: first kernel start → last kernel end on the device;
//! - `steps`: first start → last end of the step ranges of the process(es)
//!   whose kernels run on the device (see [`super::iterations::detect_steps`]);
//! - `steady`: the second step's start → the last step's end (skips the first
//!   step, where lazy module loading and warm-up live);
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

/// Windows of every device in scope (devices that ran kernels, copies or memsets).
pub fn device_windows(p: &Profile, scope: &ResolvedScope) -> Result<Vec<DeviceWindows>> {
    let kernels = p.kernels()?;
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
        let (steps, steady) = match &step_ranges {
            Some(sr) if !sr.ranges.is_empty() => {
                let s0 = sr.ranges[0].start;
                let e = sr.ranges.iter().map(|r| r.end).max().unwrap_or(s0);
                let steps = clip_window(scope, WindowKind::Steps, s0, e);
                let steady = sr
                    .ranges
                    .get(1)
                    .and_then(|second| clip_window(scope, WindowKind::Steady, second.start, e));
                (steps, steady)
            }
            _ => (None, None),
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
