//! `gaps`: idle stretches of each device longer than a threshold, with what
//! the CPU threads of the device's process(es) were doing meanwhile (CUDA API
//! calls, OS runtime calls, NVTX ranges), largest first, and totals per window.
//!
//! Over the span, gaps lie between islands of the kernel union; over the
//! steps, steady and trim windows they are the window minus the union, so a
//! leading or trailing idle stretch inside the window counts.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calls::{self, CallKind};
use super::intervals::{self, Interval};
use super::model;
use super::utilization::device_union;
use super::windows::{self, Window, WindowKind};
use super::{Profile, ResolvedScope, Result};

/// Gap totals inside one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WindowGaps {
    pub window: Window,
    pub count: u64,
    pub total_ns: i64,
    pub largest_ns: i64,
    pub smallest_ns: i64,
    /// total_ns / window length × 100.
    pub share_pct: f64,
}

/// Something a CPU thread did during a gap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuActivity {
    /// `cuda_api`, `osrt` or `nvtx`.
    pub source: String,
    pub name: String,
    /// What kind of call (host_sync, module_loading, os_wait, ...); NVTX ranges are `range`.
    pub kind: String,
    pub calls: u64,
    /// Union of these calls' time inside the gap.
    pub overlap_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Gap {
    pub device: i64,
    pub start_ns: i64,
    pub end_ns: i64,
    pub length_ns: i64,
    /// Windows the gap lies in (span, steps, steady, trim).
    pub windows: Vec<WindowKind>,
    /// The step range (NVTX) the gap starts in, when any.
    pub step: Option<String>,
    pub kernel_before: Option<String>,
    pub kernel_after: Option<String>,
    /// The thread that launched `kernel_after` (its CPU activity explains the gap).
    pub launch_tid: Option<i64>,
    /// Name of that thread.
    pub launch_thread: Option<String>,
    /// Best explanation from the CPU side: module_loading, host_sync, allocation,
    /// sync_copy, async_copy, launch, os_wait, os_io, cpu_in_range, untraced_cpu.
    pub cause: String,
    /// One sentence of evidence for `cause`.
    pub explanation: String,
    /// Top CPU activities by time inside the gap.
    pub cpu: Vec<CpuActivity>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceGaps {
    pub device: i64,
    pub windows: Vec<WindowGaps>,
    /// Gaps largest first (at most `limit`).
    pub gaps: Vec<Gap>,
    /// Gaps found in any window before `limit`.
    pub gaps_total: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Gaps {
    pub min_gap_ns: i64,
    /// Kernel-only union (true) — copies do not close gaps here.
    pub kernels_only: bool,
    pub devices: Vec<DeviceGaps>,
}

fn window_gaps(window: Window, gaps: &[Interval]) -> WindowGaps {
    let total: i64 = gaps.iter().map(|(s, e)| e - s).sum();
    WindowGaps {
        window,
        count: gaps.len() as u64,
        total_ns: total,
        largest_ns: gaps.iter().map(|(s, e)| e - s).max().unwrap_or(0),
        smallest_ns: gaps.iter().map(|(s, e)| e - s).min().unwrap_or(0),
        share_pct: super::stats::pct2(total, window.length_ns),
    }
}

/// Gaps of the kernel union inside a window, by that window's rule.
pub fn gaps_for(window: Window, union: &[Interval], min_gap_ns: i64) -> Vec<Interval> {
    match window.kind {
        WindowKind::Span => {
            intervals::gaps_between(&intervals::clip(union, window.bounds()), min_gap_ns)
        }
        _ => intervals::gaps_in_window(union, window.bounds(), min_gap_ns),
    }
}

pub fn gaps(p: &Profile, scope: &ResolvedScope, min_gap_ns: i64, limit: usize) -> Result<Gaps> {
    let kernels = p.kernels()?;
    let mut devices = Vec::new();
    for dw in windows::device_windows(p, scope)? {
        let d = dw.device;
        let union = device_union(p, scope, d, false)?;
        let mut listed: Vec<(Interval, Vec<WindowKind>)> = Vec::new();
        let mut wg = Vec::new();
        for w in dw.all() {
            let g = gaps_for(w, &union, min_gap_ns);
            wg.push(window_gaps(w, &g));
            for gi in g {
                match listed.iter_mut().find(|(x, _)| *x == gi) {
                    Some((_, kinds)) => kinds.push(w.kind),
                    None => listed.push((gi, vec![w.kind])),
                }
            }
        }
        listed.sort_by_key(|(g, _)| std::cmp::Reverse(g.1 - g.0));
        let gaps_total = listed.len() as u64;
        listed.truncate(limit);
        let dev_kernels: Vec<(usize, &model::Kernel)> = kernels
            .iter()
            .enumerate()
            .filter(|(_, k)| k.device == d && scope.admits(d, k.global_pid, k.start, k.end))
            .collect();
        let steps = dw
            .step_ranges
            .as_ref()
            .map(|s| s.ranges.as_slice())
            .unwrap_or(&[]);
        let launches = &p.launch_index()?.kernel_launch;
        let api = p.api()?;
        let tnames = super::info::thread_names(p)?;
        let mut gap_threads: Vec<Option<i64>> = Vec::new();
        let mut out: Vec<Gap> = listed
            .iter()
            .map(|((gs, ge), kinds)| {
                let after = dev_kernels.partition_point(|(_, k)| k.start < *ge);
                let before = dev_kernels[..after]
                    .iter()
                    .map(|(_, k)| *k)
                    .filter(|k| k.end <= *gs)
                    .max_by_key(|k| k.end);
                let launch_gtid = dev_kernels
                    .get(after)
                    .and_then(|(i, _)| launches[*i])
                    .map(|ai| api[ai as usize].global_tid);
                gap_threads.push(launch_gtid);
                Gap {
                    device: d,
                    start_ns: *gs,
                    end_ns: *ge,
                    length_ns: ge - gs,
                    windows: kinds.clone(),
                    step: steps
                        .iter()
                        .find(|s| s.start <= *gs && *gs < s.end)
                        .map(|s| s.name.clone()),
                    kernel_before: before.map(|k| p.string(k.short_name).to_string()),
                    kernel_after: dev_kernels
                        .get(after)
                        .map(|(_, k)| p.string(k.short_name).to_string()),
                    launch_tid: launch_gtid.map(model::tid_of),
                    launch_thread: launch_gtid.and_then(|g| tnames.get(&g).cloned()),
                    cause: String::new(),
                    explanation: String::new(),
                    cpu: Vec::new(),
                }
            })
            .collect();
        attribute_cpu(p, &dw.global_pids, &gap_threads, &mut out)?;
        devices.push(DeviceGaps {
            device: d,
            windows: wg,
            gaps: out,
            gaps_total,
        });
    }
    Ok(Gaps {
        min_gap_ns,
        kernels_only: true,
        devices,
    })
}

/// Fill `cpu`, `cause` and `explanation` of each gap from the CPU-side events
/// of the thread that launched the kernel after it (`threads[i]`, a globalTid),
/// or of any thread of the given processes when that thread is unknown.
pub fn attribute_cpu(
    p: &Profile,
    global_pids: &[i64],
    threads: &[Option<i64>],
    gaps: &mut [Gap],
) -> Result<()> {
    if gaps.is_empty() {
        return Ok(());
    }
    let mut order: Vec<usize> = (0..gaps.len()).collect();
    order.sort_by_key(|&i| gaps[i].start_ns);
    let bounds: Vec<Interval> = order
        .iter()
        .map(|&i| (gaps[i].start_ns, gaps[i].end_ns))
        .collect();
    let gap_thread: Vec<Option<i64>> = order
        .iter()
        .map(|&i| threads.get(i).copied().flatten())
        .collect();
    let in_process =
        |gtid: i64| global_pids.is_empty() || global_pids.contains(&model::process_key(gtid));
    // Per gap (in `order` positions): (source, name) → (kind, calls, intervals).
    type Acc = HashMap<(&'static str, String), (CallKind, u64, Vec<Interval>)>;
    let mut acc: Vec<Acc> = vec![HashMap::new(); gaps.len()];
    let add = |src: &'static str,
               name: String,
               kind: CallKind,
               s: i64,
               e: i64,
               gtid: i64,
               acc: &mut Vec<Acc>| {
        // Gaps are disjoint and sorted: find those overlapping [s, e).
        let first = bounds.partition_point(|&(_, ge)| ge <= s);
        for (j, &(gs, ge)) in bounds.iter().enumerate().skip(first) {
            if gs >= e {
                break;
            }
            if gap_thread[j].is_some_and(|t| t != gtid) {
                continue;
            }
            let entry = acc[j]
                .entry((src, name.clone()))
                .or_insert((kind, 0, Vec::new()));
            entry.1 += 1;
            entry.2.push((s.max(gs), e.min(ge)));
        }
    };
    let lo = bounds.first().map_or(0, |b| b.0);
    let hi = bounds.iter().map(|b| b.1).max().unwrap_or(0);
    for a in p.api()? {
        if a.end > lo && a.start < hi && in_process(a.global_tid) {
            let name = calls::api_display_name(p.string(a.name)).to_string();
            let kind = calls::api_kind(&name);
            add(
                "cuda_api",
                name,
                kind,
                a.start,
                a.end,
                a.global_tid,
                &mut acc,
            );
        }
    }
    for r in &p.nvtx()?.ranges {
        if r.end > lo && r.start < hi && in_process(r.global_tid) {
            add(
                "nvtx",
                r.name.clone(),
                CallKind::Other,
                r.start,
                r.end,
                r.global_tid,
                &mut acc,
            );
        }
    }
    if let Some(t) = &p.tables().osrt {
        // The OS runtime table can hold tens of millions of rows: aggregate
        // per (gap, name id) inside the scan (no row list, no strings), and
        // turn name ids into names once at the end.
        type OsrtAcc = HashMap<(usize, i64), (u64, Vec<Interval>)>;
        let parts = super::model::fold_osrt(
            p.conn(),
            t,
            p.db_path(),
            Some((lo, hi)),
            HashMap::new,
            |m: &mut OsrtAcc, s, e, gtid, name| {
                if !in_process(gtid) {
                    return;
                }
                let first = bounds.partition_point(|&(_, ge)| ge <= s);
                for (j, &(gs, ge)) in bounds.iter().enumerate().skip(first) {
                    if gs >= e {
                        break;
                    }
                    if gap_thread[j].is_some_and(|t| t != gtid) {
                        continue;
                    }
                    let entry = m.entry((j, name)).or_insert((0, Vec::new()));
                    entry.0 += 1;
                    entry.1.push((s.max(gs), e.min(ge)));
                }
            },
        )?;
        let mut names: HashMap<i64, (String, CallKind)> = HashMap::new();
        for part in parts {
            for ((j, name), (calls_n, iv)) in part {
                let (n, kind) = names
                    .entry(name)
                    .or_insert_with(|| {
                        let n = p.string(name).to_string();
                        let kind = calls::osrt_kind(&n);
                        (n, kind)
                    })
                    .clone();
                let entry = acc[j].entry(("osrt", n)).or_insert((kind, 0, Vec::new()));
                entry.1 += calls_n;
                entry.2.extend(iv);
            }
        }
    }
    for (j, &gi) in order.iter().enumerate() {
        let gap = &mut gaps[gi];
        let len = gap.length_ns.max(1);
        let mut acts: Vec<CpuActivity> = acc[j]
            .drain()
            .map(|((src, name), (kind, n, iv))| CpuActivity {
                source: src.to_string(),
                kind: if src == "nvtx" {
                    "range".into()
                } else {
                    kind.as_str().into()
                },
                name,
                calls: n,
                overlap_ns: intervals::length(&intervals::union(iv)),
            })
            .collect();
        acts.sort_by(|a, b| b.overlap_ns.cmp(&a.overlap_ns).then(a.name.cmp(&b.name)));
        let cover = |k: &str| {
            acts.iter()
                .filter(|a| a.kind == k)
                .map(|a| a.overlap_ns)
                .max()
                .unwrap_or(0)
        };
        let top_of = |k: &str| {
            acts.iter()
                .find(|a| a.kind == k)
                .map(|a| a.name.clone())
                .unwrap_or_default()
        };
        let pct = |ns: i64| super::stats::pct1(ns, len);
        let priority = [
            "module_loading",
            "host_sync",
            "sync_copy",
            "allocation",
            "os_wait",
            "os_io",
            "async_copy",
            "launch",
        ];
        let chosen = priority
            .iter()
            .find(|k| cover(k) * 2 >= len)
            .or_else(|| {
                priority
                    .iter()
                    .filter(|k| cover(k) * 5 >= len)
                    .max_by_key(|k| cover(k))
            })
            .copied();
        let range = acts.iter().filter(|a| a.source == "nvtx").min_by_key(|a| {
            // The innermost range: the shortest one covering most of the gap.
            (std::cmp::Reverse(a.overlap_ns * 2 >= len), a.overlap_ns)
        });
        let (cause, explanation) = match chosen {
            Some(k) => (
                k.to_string(),
                format!(
                    "{} covers {}% of the gap ({})",
                    top_of(k),
                    pct(cover(k)),
                    match k {
                        "module_loading" => "lazy module loading: the first launch of a kernel loads its module",
                        "host_sync" => "the host waits for the GPU, then issues the next work late",
                        "sync_copy" => "a blocking copy/memset stalls the launching thread",
                        "allocation" => "memory allocation/release on the launch path",
                        "os_wait" => "the CPU thread sleeps or waits in the OS instead of launching work",
                        "os_io" => "the CPU thread does I/O instead of launching work",
                        "async_copy" => "copies are being issued",
                        _ => "the launch call itself is slow",
                    }
                ),
            ),
            None => match range {
                Some(r) if r.overlap_ns * 2 >= len => (
                    "cpu_in_range".to_string(),
                    format!(
                        "the CPU is inside NVTX range `{}` ({}% of the gap) without launching GPU work",
                        r.name,
                        pct(r.overlap_ns)
                    ),
                ),
                _ => (
                    "untraced_cpu".to_string(),
                    "no traced CUDA, OS or NVTX activity explains it: CPU work outside the traced APIs (Python, data loading)"
                        .to_string(),
                ),
            },
        };
        acts.truncate(5);
        gap.cpu = acts;
        gap.cause = cause;
        gap.explanation = explanation;
    }
    Ok(())
}
