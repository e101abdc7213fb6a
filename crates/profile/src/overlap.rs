//! `overlap`: per device, time computing only, communicating only, both, and
//! idle, over the span, steps and steady windows. `overlap_pct` = the share of
//! communication time hidden behind compute = |C ∩ N| / |N| × 100, with C and N
//! the unions of compute and NCCL kernels (HTA / nsys-ai definition).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::intervals::{self, Interval};
use super::nccl::is_nccl;
use super::stats::pct2;
use super::windows::{self, Window};
use super::{Profile, ResolvedScope, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WindowOverlap {
    pub window: Window,
    pub compute_ns: i64,
    pub communication_ns: i64,
    /// |compute ∩ communication|.
    pub overlap_ns: i64,
    pub compute_only_ns: i64,
    pub communication_only_ns: i64,
    /// Window − |compute ∪ communication|.
    pub idle_ns: i64,
    /// overlap / communication × 100 (0 without communication).
    pub overlap_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceOverlap {
    pub device: i64,
    pub compute_kernels: u64,
    pub communication_kernels: u64,
    pub compute_streams: Vec<i64>,
    pub communication_streams: Vec<i64>,
    /// Communication and compute share a stream, so they cannot overlap there.
    pub shared_stream: bool,
    pub windows: Vec<WindowOverlap>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Overlap {
    pub devices: Vec<DeviceOverlap>,
}

pub fn window_overlap(window: Window, c: &[Interval], n: &[Interval]) -> WindowOverlap {
    let b = window.bounds();
    let c = intervals::clip(c, b);
    let n = intervals::clip(n, b);
    let cl = intervals::length(&c);
    let nl = intervals::length(&n);
    let both = intervals::length(&intervals::intersect(&c, &n));
    WindowOverlap {
        window,
        compute_ns: cl,
        communication_ns: nl,
        overlap_ns: both,
        compute_only_ns: cl - both,
        communication_only_ns: nl - both,
        idle_ns: window.length_ns - (cl + nl - both),
        overlap_pct: if nl > 0 {
            super::stats::round_ratio(100 * both as i128, nl as i128, 100)
        } else {
            0.0
        },
    }
}

pub fn overlap(p: &Profile, scope: &ResolvedScope) -> Result<Overlap> {
    let kernels = p.kernels()?;
    let mut devices = Vec::new();
    for dw in windows::device_windows(p, scope)? {
        let d = dw.device;
        let (mut c, mut n) = (Vec::new(), Vec::new());
        let (mut cs, mut ns) = (Vec::new(), Vec::new());
        for k in kernels
            .iter()
            .filter(|k| k.device == d && scope.admits(d, k.global_pid, k.start, k.end))
        {
            if is_nccl(p.string(k.short_name)) {
                n.push((k.start, k.end));
                ns.push(k.stream);
            } else {
                c.push((k.start, k.end));
                cs.push(k.stream);
            }
        }
        let (ck, nk) = (c.len() as u64, n.len() as u64);
        let c = intervals::union(c);
        let n = intervals::union(n);
        cs.sort_unstable();
        cs.dedup();
        ns.sort_unstable();
        ns.dedup();
        let shared = ns.iter().any(|s| cs.contains(s));
        let _ = pct2;
        devices.push(DeviceOverlap {
            device: d,
            compute_kernels: ck,
            communication_kernels: nk,
            compute_streams: cs,
            communication_streams: ns,
            shared_stream: shared,
            windows: dw
                .all()
                .into_iter()
                .map(|w| window_overlap(w, &c, &n))
                .collect(),
        });
    }
    Ok(Overlap { devices })
}
