//! `gaps`: idle stretches of each device longer than a threshold, with what
//! the CPU threads of the device's process(es) were doing meanwhile (CUDA API
//! calls, OS runtime calls, NVTX ranges), largest first, and totals per window.
//!
//! Over the span, gaps lie between islands of the kernel union; over the
//! steps, steady and trim windows they are the window minus the union, so a
//! leading or trailing idle stretch inside the window counts.

use std::collections::HashMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calls::{self, CallKind};
use super::intervals::{self, Interval, StreamingUnion};
use super::loaded::TableKind;
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
    /// gpu_copy (copies fill it), or the CPU side: module_loading, host_sync, allocation,
    /// sync_copy, async_copy, launch, os_wait, os_io, cpu_in_range, untraced_cpu.
    pub cause: String,
    /// One sentence of evidence for `cause`.
    pub explanation: String,
    /// Top CPU activities by time inside the gap (left out of default `aisp_profile_gaps` answers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
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
    type Pending = (
        i64,
        Vec<WindowGaps>,
        u64,
        Vec<i64>,
        Vec<Option<i64>>,
        Vec<Gap>,
    );
    let mut pending: Vec<Pending> = Vec::new();
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
        // Per position: the kernel with the latest end so far (the last of
        // equals, as `max_by_key` picks), so that a gap finds the kernel
        // before it without scanning every earlier kernel.
        let mut latest: Vec<usize> = Vec::with_capacity(dev_kernels.len());
        for (i, (_, k)) in dev_kernels.iter().enumerate() {
            let best = match latest.last() {
                Some(&b) if dev_kernels[b].1.end > k.end => b,
                _ => i,
            };
            latest.push(best);
        }
        let launches = &p.launch_index()?.kernel_launch;
        let api = p.api()?;
        let tnames = super::info::thread_names(p)?;
        let mut gap_threads: Vec<Option<i64>> = Vec::new();
        let out: Vec<Gap> = listed
            .iter()
            .map(|((gs, ge), kinds)| {
                let after = dev_kernels.partition_point(|(_, k)| k.start < *ge);
                let before = match after.checked_sub(1).map(|i| dev_kernels[latest[i]].1) {
                    // Every earlier kernel ends by the gap's start: the latest is the one.
                    Some(k) if k.end <= *gs => Some(k),
                    None => None,
                    // A kernel reaching into the gap (not from a kernel union): scan.
                    Some(_) => dev_kernels[..after]
                        .iter()
                        .map(|(_, k)| *k)
                        .filter(|k| k.end <= *gs)
                        .max_by_key(|k| k.end),
                };
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
        pending.push((d, wg, gaps_total, dw.global_pids.clone(), gap_threads, out));
    }
    // One pass over the CPU-side tables explains the gaps of every device.
    let mut groups: Vec<GapGroup> = pending
        .iter_mut()
        .map(|(_, _, _, pids, threads, out)| GapGroup {
            global_pids: pids,
            threads: std::mem::take(threads),
            gaps: std::mem::take(out),
        })
        .collect();
    attribute_cpu_groups(p, &mut groups)?;
    let explained: Vec<Vec<Gap>> = groups.into_iter().map(|g| g.gaps).collect();
    for ((d, wg, gaps_total, ..), mut out) in pending.into_iter().zip(explained) {
        let all_ops = device_union(p, scope, d, true)?;
        for g in &mut out {
            copy_cause(g, &all_ops);
        }
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

/// A gap between kernels that copies or memsets fill for at least half its
/// length is the GPU moving data, not waiting for the host: say so, whatever
/// the CPU side was doing (copy-bound, not launch-bound).
pub fn copy_cause(gap: &mut Gap, all_ops: &[Interval]) {
    let copying = intervals::clipped_length(all_ops, (gap.start_ns, gap.end_ns));
    if copying * 2 >= gap.length_ns && copying > 0 {
        gap.explanation = format!(
            "the GPU is copying (memcpy/memset) for {:.2} ms of the gap's {:.2} ms: busy with transfers, not idle{}",
            copying as f64 / 1e6,
            gap.length_ns as f64 / 1e6,
            if gap.cause.is_empty() {
                String::new()
            } else {
                format!(" (CPU side: {})", gap.explanation)
            }
        );
        gap.cause = "gpu_copy".into();
    }
}

/// The gaps of one device to explain, with who could explain them.
pub struct GapGroup<'a> {
    /// The device's processes (`globalPid` keys); empty = any process.
    pub global_pids: &'a [i64],
    /// Per gap: the thread (`globalTid`) that launched the kernel after it.
    pub threads: Vec<Option<i64>>,
    pub gaps: Vec<Gap>,
}

/// One group's gaps in start order, for the sweep.
struct Sorted {
    /// Gap bounds sorted by start (disjoint within a device, so ends are sorted too).
    bounds: Vec<Interval>,
    /// The launching thread of each, in the same order.
    thread: Vec<Option<i64>>,
    /// Index of each in the flat accumulator list.
    slot: Vec<usize>,
}

impl Sorted {
    /// Flat slots of the gaps that `[s, e)` of thread `gtid` overlaps.
    #[inline]
    fn overlapping(
        &self,
        finger: &mut usize,
        s: i64,
        e: i64,
        gtid: i64,
        mut each: impl FnMut(usize, i64, i64),
    ) {
        // The first gap ending after `s`. Rows come nearly in time order, so
        // the previous row's answer (`finger`) is usually still right: check
        // it in O(1) and search only when it is not.
        let n = self.bounds.len();
        let mut first = (*finger).min(n);
        let valid = (first == 0 || self.bounds[first - 1].1 <= s)
            && (first == n || self.bounds[first].1 > s);
        if !valid {
            first = self.bounds.partition_point(|&(_, ge)| ge <= s);
        }
        *finger = first;
        for j in first..self.bounds.len() {
            let (gs, ge) = self.bounds[j];
            if gs >= e {
                break;
            }
            if self.thread[j].is_some_and(|t| t != gtid) {
                continue;
            }
            each(self.slot[j], gs, ge);
        }
    }
}

/// Finds the gaps an event overlaps, over every device's gaps.
struct Visitor<'a> {
    sorted: &'a [Sorted],
    /// Per group, its processes (`globalPid` keys); empty = any.
    pids: Vec<&'a [i64]>,
}

impl Visitor<'_> {
    /// Every (gap slot, clipped start, clipped end) that `[s, e)` of `gtid` overlaps.
    ///
    /// `fingers` (one per group, kept by the caller between rows) speed up
    /// events that come in time order; any values give the same answer.
    #[inline]
    fn visit(
        &self,
        fingers: &mut Vec<usize>,
        s: i64,
        e: i64,
        gtid: i64,
        mut each: impl FnMut(usize, i64, i64),
    ) {
        fingers.resize(self.sorted.len(), 0);
        for (gi, sg) in self.sorted.iter().enumerate() {
            let pids = self.pids[gi];
            if pids.is_empty() || pids.contains(&model::process_key(gtid)) {
                sg.overlapping(&mut fingers[gi], s, e, gtid, |slot, gs, ge| {
                    each(slot, s.max(gs), e.min(ge))
                });
            }
        }
    }
}

/// Fill `cpu`, `cause` and `explanation` of each gap of every group from the
/// CPU-side events of the thread that launched the kernel after it (or of any
/// thread of the group's processes when that thread is unknown). Each event
/// table is read once for all groups (the OS runtime table can hold tens of
/// millions of rows).
pub fn attribute_cpu_groups(p: &Profile, groups: &mut [GapGroup]) -> Result<()> {
    // A gap's explanation depends only on its bounds, its launching thread
    // and its device's processes: gaps explained by an earlier question on
    // this file (gaps, rules) are taken from what was kept, the rest computed.
    let kept: Option<Arc<GapExplanations>> = p.kept(TableKind::GapExplanations);
    let mut todo: Vec<GapGroup> = Vec::new();
    let mut back: Vec<(usize, usize)> = Vec::new();
    for (gi, g) in groups.iter_mut().enumerate() {
        let mut rest = GapGroup {
            global_pids: g.global_pids,
            threads: Vec::new(),
            gaps: Vec::new(),
        };
        for (i, gap) in g.gaps.iter_mut().enumerate() {
            let thread = g.threads.get(i).copied().flatten();
            let key = explanation_key(gap, thread, g.global_pids);
            match kept.as_ref().and_then(|k| k.by_gap.get(&key)) {
                Some(e) => {
                    gap.cpu = e.cpu.clone();
                    gap.cause = e.cause.clone();
                    gap.explanation = e.explanation.clone();
                }
                None => {
                    back.push((gi, i));
                    rest.threads.push(thread);
                    rest.gaps.push(gap.clone());
                }
            }
        }
        todo.push(rest);
    }
    if back.is_empty() {
        return Ok(());
    }
    attribute_uncached(p, &mut todo)?;
    let mut grown = kept.map(|k| (*k).clone()).unwrap_or_default();
    let done = todo.iter().flat_map(|g| {
        g.gaps
            .iter()
            .zip(&g.threads)
            .map(move |(gap, t)| (gap, *t, g.global_pids))
    });
    for ((gap, thread, pids), &(gi, i)) in done.zip(&back) {
        grown.insert(
            explanation_key(gap, thread, pids),
            Explained {
                cpu: gap.cpu.clone(),
                cause: gap.cause.clone(),
                explanation: gap.explanation.clone(),
            },
        );
        let out = &mut groups[gi].gaps[i];
        out.cpu = gap.cpu.clone();
        out.cause = gap.cause.clone();
        out.explanation = gap.explanation.clone();
    }
    p.keep(TableKind::GapExplanations, Arc::new(grown));
    Ok(())
}

/// Gap bounds, launching thread and the device's processes.
type ExplanationKey = (i64, i64, Option<i64>, Vec<i64>);

fn explanation_key(gap: &Gap, thread: Option<i64>, pids: &[i64]) -> ExplanationKey {
    (gap.start_ns, gap.end_ns, thread, pids.to_vec())
}

/// What [`explain`] wrote for one gap.
#[derive(Debug, Clone)]
struct Explained {
    cpu: Vec<CpuActivity>,
    cause: String,
    explanation: String,
}

/// The gap explanations kept for one file (bounded: the oldest half goes
/// when it holds [`GapExplanations::MAX`]).
#[derive(Debug, Clone, Default)]
pub struct GapExplanations {
    by_gap: HashMap<ExplanationKey, Explained>,
    order: Vec<ExplanationKey>,
}

impl GapExplanations {
    const MAX: usize = 4096;

    fn insert(&mut self, key: ExplanationKey, e: Explained) {
        if self.by_gap.insert(key.clone(), e).is_none() {
            self.order.push(key);
        }
        if self.order.len() > Self::MAX {
            let old: Vec<ExplanationKey> = self.order.drain(..Self::MAX / 2).collect();
            for k in old {
                self.by_gap.remove(&k);
            }
        }
    }
}

impl super::loaded::Footprint for GapExplanations {
    fn footprint(&self) -> u64 {
        let key = std::mem::size_of::<ExplanationKey>() as u64;
        self.by_gap
            .iter()
            .map(|(k, e)| {
                2 * key
                    + 16 * k.3.capacity() as u64
                    + std::mem::size_of::<Explained>() as u64
                    + (e.cause.capacity() + e.explanation.capacity()) as u64
                    + e.cpu
                        .iter()
                        .map(|c| {
                            std::mem::size_of::<CpuActivity>() as u64
                                + (c.source.capacity() + c.kind.capacity() + c.name.capacity())
                                    as u64
                        })
                        .sum::<u64>()
            })
            .sum()
    }
}

fn attribute_uncached(p: &Profile, groups: &mut [GapGroup]) -> Result<()> {
    let mut sorted = Vec::new();
    let mut flat: Vec<(usize, usize)> = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let mut order: Vec<usize> = (0..g.gaps.len()).collect();
        order.sort_by_key(|&i| g.gaps[i].start_ns);
        let mut slot = Vec::with_capacity(order.len());
        for &i in &order {
            slot.push(flat.len());
            flat.push((gi, i));
        }
        sorted.push(Sorted {
            bounds: order
                .iter()
                .map(|&i| (g.gaps[i].start_ns, g.gaps[i].end_ns))
                .collect(),
            thread: order
                .iter()
                .map(|&i| g.threads.get(i).copied().flatten())
                .collect(),
            slot,
        });
    }
    if flat.is_empty() {
        return Ok(());
    }
    let visitor = Visitor {
        sorted: &sorted,
        pids: groups.iter().map(|g| g.global_pids).collect(),
    };
    let mut fingers = Vec::new();
    let lo = sorted
        .iter()
        .filter_map(|s| s.bounds.first().map(|b| b.0))
        .min()
        .unwrap_or(0);
    let hi = sorted
        .iter()
        .filter_map(|s| s.bounds.last().map(|b| b.1))
        .max()
        .unwrap_or(0);
    // Every gap of every group as one sorted union: OS runtime chunks far
    // from all of them are skipped whole.
    let near = intervals::union(
        sorted
            .iter()
            .flat_map(|s| s.bounds.iter().copied())
            .collect(),
    );
    // Per gap (flat slot): (source, name) → what those calls did in it.
    type Acc = HashMap<(&'static str, String), Activity>;
    let mut acc: Vec<Acc> = (0..flat.len()).map(|_| HashMap::new()).collect();
    let mut hits: Vec<(usize, Interval)> = Vec::new();
    let record = |src: &'static str,
                  hits: &[(usize, Interval)],
                  name: &dyn Fn() -> (String, CallKind),
                  acc: &mut Vec<Acc>| {
        if hits.is_empty() {
            return;
        }
        // Names are made only for the few calls that overlap a gap.
        let (name, kind) = name();
        for &(slot, iv) in hits {
            let entry = acc[slot].entry((src, name.clone())).or_insert(Activity {
                kind,
                calls: 0,
                intervals: Vec::new(),
                union_ns: None,
            });
            entry.calls += 1;
            entry.intervals.push(iv);
        }
    };
    for a in p.api()? {
        if a.end > lo && a.start < hi {
            hits.clear();
            visitor.visit(&mut fingers, a.start, a.end, a.global_tid, |slot, s, e| {
                hits.push((slot, (s, e)))
            });
            record(
                "cuda_api",
                &hits,
                &|| {
                    let name = calls::api_display_name(p.string(a.name)).to_string();
                    let kind = calls::api_kind(&name);
                    (name, kind)
                },
                &mut acc,
            );
        }
    }
    for r in &p.nvtx()?.ranges {
        if r.end > lo && r.start < hi {
            hits.clear();
            visitor.visit(&mut fingers, r.start, r.end, r.global_tid, |slot, s, e| {
                hits.push((slot, (s, e)))
            });
            record(
                "nvtx",
                &hits,
                &|| (r.name.clone(), CallKind::Other),
                &mut acc,
            );
        }
    }
    if p.tables().osrt.is_some() {
        // The OS runtime table can hold tens of millions of rows, and a long
        // gap can overlap millions of them (a thread polling in a loop):
        // aggregate per (gap, name id) inside the scan with a streaming union
        // (no interval lists, no strings) and make names once at the end.
        type OsrtAcc = (
            rustc_hash::FxHashMap<(usize, i64), (u64, StreamingUnion)>,
            Vec<usize>,
        );
        let parts = p.fold_osrt_near(
            &near,
            OsrtAcc::default,
            |(m, fingers): &mut OsrtAcc, s, e, gtid, name| {
                visitor.visit(fingers, s, e, gtid, |slot, cs, ce| {
                    let entry = m.entry((slot, name)).or_default();
                    entry.0 += 1;
                    entry.1.push(cs, ce);
                });
            },
        )?;
        // Parts come in leaf (row) order: chain them.
        let mut merged: rustc_hash::FxHashMap<(usize, i64), (u64, StreamingUnion)> =
            Default::default();
        for (part, _) in parts {
            for (key, (n, stream)) in part {
                let entry = merged.entry(key).or_default();
                entry.0 += n;
                entry.1 = entry.1.then(stream);
            }
        }
        // Rows out of time order inside a gap (rare): those keys get their
        // exact union from the intervals themselves, in a second pass that
        // keeps only their rows.
        let redo: rustc_hash::FxHashSet<(usize, i64)> = merged
            .iter()
            .filter(|(_, (_, u))| u.length().is_none())
            .map(|(k, _)| *k)
            .collect();
        let mut exact: HashMap<(usize, i64), i64> = HashMap::new();
        if !redo.is_empty() {
            tracing::debug!(
                keys = redo.len(),
                "OS runtime rows out of time order inside gaps: exact second pass"
            );
            type Redo = (
                rustc_hash::FxHashMap<(usize, i64), Vec<Interval>>,
                Vec<usize>,
            );
            let parts = p.fold_osrt_near(
                &near,
                Redo::default,
                |(m, fingers): &mut Redo, s, e, gtid, name| {
                    visitor.visit(fingers, s, e, gtid, |slot, cs, ce| {
                        if redo.contains(&(slot, name)) {
                            m.entry((slot, name)).or_default().push((cs, ce));
                        }
                    });
                },
            )?;
            let mut all: HashMap<(usize, i64), Vec<Interval>> = HashMap::new();
            for (part, _) in parts {
                for (k, v) in part {
                    all.entry(k).or_default().extend(v);
                }
            }
            for (k, v) in all {
                exact.insert(k, intervals::length(&intervals::union(v)));
            }
        }
        let mut names: HashMap<i64, (String, CallKind)> = HashMap::new();
        for ((slot, name), (calls_n, stream)) in merged {
            let (n, kind) = names
                .entry(name)
                .or_insert_with(|| {
                    let n = p.string(name).to_string();
                    let kind = calls::osrt_kind(&n);
                    (n, kind)
                })
                .clone();
            let union_ns = stream
                .length()
                .or_else(|| exact.get(&(slot, name)).copied())
                .unwrap_or(0);
            let entry = acc[slot].entry(("osrt", n)).or_insert(Activity {
                kind,
                calls: 0,
                intervals: Vec::new(),
                union_ns: Some(0),
            });
            entry.calls += calls_n;
            entry.union_ns = Some(entry.union_ns.unwrap_or(0) + union_ns);
        }
    }
    for (slot, &(gi, i)) in flat.iter().enumerate() {
        explain(&mut groups[gi].gaps[i], acc[slot].drain());
    }
    Ok(())
}

/// The calls of one name during one gap.
struct Activity {
    kind: CallKind,
    calls: u64,
    /// Their clipped intervals, when kept (CUDA API and NVTX: few per gap).
    intervals: Vec<Interval>,
    /// Their union length, when computed during the scan (OS runtime calls).
    union_ns: Option<i64>,
}

/// Choose a gap's cause from what the CPU threads did during it.
fn explain(gap: &mut Gap, activities: impl Iterator<Item = ((&'static str, String), Activity)>) {
    {
        let len = gap.length_ns.max(1);
        let mut acts: Vec<CpuActivity> = activities
            .map(|((src, name), a)| CpuActivity {
                source: src.to_string(),
                kind: if src == "nvtx" {
                    "range".into()
                } else {
                    a.kind.as_str().into()
                },
                name,
                calls: a.calls,
                overlap_ns: a
                    .union_ns
                    .unwrap_or_else(|| intervals::length(&intervals::union(a.intervals))),
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
}
