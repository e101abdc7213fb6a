//! `utilization`: per-device busy time as the **union** of kernel intervals
//! (and, beside it, of kernels ∪ memcpy ∪ memset: NVIDIA's gpu_gaps op set)
//! over the span, steps, steady and trim windows, plus time-utilization
//! chunks like `nsys analyze gpu_time_util` (union-based, so never above 100 %).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::intervals::{self, Interval};
use super::stats::pct2;
use super::windows::{self, Window};
use super::{Profile, ResolvedScope, Result};

/// Sorted, merged busy intervals of one device.
pub fn device_union(
    p: &Profile,
    scope: &ResolvedScope,
    device: i64,
    include_copies: bool,
) -> Result<Vec<Interval>> {
    let mut v: Vec<Interval> = p
        .kernels()?
        .iter()
        .filter(|k| k.device == device && scope.admits(device, k.global_pid, k.start, k.end))
        .map(|k| (k.start, k.end))
        .collect();
    if include_copies {
        v.extend(
            p.memcpys()?
                .iter()
                .filter(|m| {
                    m.device == device && scope.admits(device, m.global_pid, m.start, m.end)
                })
                .map(|m| (m.start, m.end)),
        );
        v.extend(
            p.memsets()?
                .iter()
                .filter(|m| {
                    m.device == device && scope.admits(device, m.global_pid, m.start, m.end)
                })
                .map(|m| (m.start, m.end)),
        );
    }
    Ok(intervals::union(v))
}

/// Busy time of a device inside one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WindowBusy {
    pub window: Window,
    /// Union of kernel intervals inside the window.
    pub busy_ns: i64,
    /// busy_ns / window length × 100 (2 decimals).
    pub busy_pct: f64,
    /// Window length minus busy_ns.
    pub idle_ns: i64,
    /// Union of kernels ∪ memcpy ∪ memset inside the window.
    pub all_ops_busy_ns: i64,
    pub all_ops_busy_pct: f64,
}

/// A stretch of the span whose union-based utilization is below the threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LowChunk {
    pub start_ns: i64,
    pub end_ns: i64,
    /// Kernel ∪ copy busy share of the stretch.
    pub busy_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceUtilization {
    pub device: i64,
    pub gpu: Option<String>,
    /// OS pids whose kernels ran on the device.
    pub pids: Vec<i64>,
    pub kernels: u64,
    /// Σ kernel durations (exceeds the union when streams run concurrently).
    pub kernel_sum_ns: i64,
    /// Σ kernel durations / union: above 1 when kernels overlap across streams.
    pub concurrency: f64,
    pub streams: Vec<i64>,
    pub windows: Vec<WindowBusy>,
    /// `[chunk_start_ns, chunk_end_ns)` cut into `chunks` parts of `chunk_ns` (the last one
    /// may be shorter), kernel ∪ copy busy % of each (the op set of `nsys analyze gpu_time_util`).
    pub chunk_busy_pct: Vec<f64>,
    pub chunk_ns: i64,
    /// Where the chunks start: the first kernel, memcpy or memset on the device (clipped to
    /// the trim). This is not the `span` window's start, which counts kernels only.
    pub chunk_start_ns: Option<i64>,
    /// Where the chunks end: the last kernel, memcpy or memset end (clipped to the trim).
    pub chunk_end_ns: Option<i64>,
    /// Consecutive chunks under `threshold_pct`, coalesced.
    pub low_utilization: Vec<LowChunk>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Utilization {
    pub devices: Vec<DeviceUtilization>,
    pub threshold_pct: f64,
}

pub fn busy_in(window: Window, kernels: &[Interval], all_ops: &[Interval]) -> WindowBusy {
    let b = window.bounds();
    let busy = intervals::clipped_length(kernels, b);
    let all = intervals::clipped_length(all_ops, b);
    WindowBusy {
        window,
        busy_ns: busy,
        busy_pct: pct2(busy, window.length_ns),
        idle_ns: window.length_ns - busy,
        all_ops_busy_ns: all,
        all_ops_busy_pct: pct2(all, window.length_ns),
    }
}

pub fn utilization(
    p: &Profile,
    scope: &ResolvedScope,
    chunks: usize,
    threshold_pct: f64,
) -> Result<Utilization> {
    let chunks = chunks.clamp(1, 1000);
    let gpus = super::info::gpus(p)?;
    let mut devices = Vec::new();
    for dw in windows::device_windows(p, scope)? {
        let d = dw.device;
        let ku = device_union(p, scope, d, false)?;
        let au = device_union(p, scope, d, true)?;
        let ks: Vec<&super::Kernel> = p
            .kernels()?
            .iter()
            .filter(|k| k.device == d && scope.admits(d, k.global_pid, k.start, k.end))
            .collect();
        let kernel_sum: i64 = ks.iter().map(|k| k.dur()).sum();
        let mut streams: Vec<i64> = ks.iter().map(|k| k.stream).collect();
        streams.sort_unstable();
        streams.dedup();
        let union_len = intervals::length(&ku);
        let windows: Vec<WindowBusy> = dw.all().into_iter().map(|w| busy_in(w, &ku, &au)).collect();
        // Chunks over the span of all ops (nsys: first op start → last op end).
        let (mut chunk_busy, mut low, mut chunk_ns) = (Vec::new(), Vec::new(), 0);
        let chunk_window = au
            .first()
            .zip(au.last())
            .map(|(first, last)| scope.clip(first.0, last.1))
            .filter(|(s, e)| e > s);
        if let Some((s, e)) = chunk_window {
            chunk_ns = ((e - s) + chunks as i64 - 1) / chunks as i64;
            if chunk_ns > 0 {
                let mut cur: Option<(i64, i64, i64)> = None; // start, end, busy
                for c in 0..chunks as i64 {
                    let cs = s + c * chunk_ns;
                    let ce = (cs + chunk_ns).min(e);
                    if ce <= cs {
                        break;
                    }
                    let busy = intervals::clipped_length(&au, (cs, ce));
                    let pct = pct2(busy, ce - cs);
                    chunk_busy.push(pct);
                    if pct < threshold_pct {
                        cur = Some(match cur {
                            Some((a, _, b)) => (a, ce, b + busy),
                            None => (cs, ce, busy),
                        });
                    } else if let Some((a, b, busy)) = cur.take() {
                        low.push(LowChunk {
                            start_ns: a,
                            end_ns: b,
                            busy_pct: pct2(busy, b - a),
                        });
                    }
                }
                if let Some((a, b, busy)) = cur {
                    low.push(LowChunk {
                        start_ns: a,
                        end_ns: b,
                        busy_pct: pct2(busy, b - a),
                    });
                }
            }
        }
        devices.push(DeviceUtilization {
            device: d,
            gpu: super::info::gpu_name(&gpus, d),
            pids: dw
                .global_pids
                .iter()
                .map(|g| super::model::pid_of(*g))
                .collect(),
            kernels: ks.len() as u64,
            kernel_sum_ns: kernel_sum,
            concurrency: if union_len > 0 {
                super::stats::round_ratio(kernel_sum as i128, union_len as i128, 1000)
            } else {
                0.0
            },
            streams,
            windows,
            chunk_busy_pct: chunk_busy,
            chunk_ns,
            chunk_start_ns: chunk_window.map(|w| w.0),
            chunk_end_ns: chunk_window.map(|w| w.1),
            low_utilization: low,
        });
    }
    Ok(Utilization {
        devices,
        threshold_pct,
    })
}
