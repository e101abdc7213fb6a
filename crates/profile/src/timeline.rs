//! `timeline`: the events of a window per device/stream and per CPU thread,
//! compact enough for a model: runs of identical kernels (same name, same
//! stream, gaps under `merge_gap_ns`) are merged into one entry with a count,
//! and each track keeps at most `limit` entries.
//!
//! Without a window the timeline shows a typical step: the step (after the
//! first) whose CPU duration is the median; without steps, the device span.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calls;
use super::model;
use super::windows::{self, Window, WindowKind};
use super::{Profile, ResolvedScope, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Entry {
    /// Start, relative to the window start.
    pub offset_ns: i64,
    /// First start → last end of the run.
    pub duration_ns: i64,
    pub name: String,
    /// `kernel`, `memcpy`, `memset` or `api`.
    pub kind: String,
    /// Events merged into this entry.
    pub count: u32,
    /// Σ durations of the merged events.
    pub busy_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuTrack {
    pub device: i64,
    pub stream: i64,
    /// Events on this stream in the window (before merging).
    pub events: u64,
    pub entries: Vec<Entry>,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RangeEntry {
    pub offset_ns: i64,
    pub duration_ns: i64,
    pub name: String,
    /// Nesting depth on this thread (0 = outermost).
    pub depth: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuTrack {
    pub pid: i64,
    pub tid: i64,
    pub thread: Option<String>,
    pub ranges: Vec<RangeEntry>,
    /// CUDA API calls of 5 us or more (launches of any API merged as `kernel launches`), runs merged
    /// when less than 10 × merge_gap_ns apart.
    pub api: Vec<Entry>,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Timeline {
    pub window: Window,
    /// Why this window: the caller's, a typical step, or the span.
    pub window_source: String,
    pub gpu: Vec<GpuTrack>,
    pub cpu: Vec<CpuTrack>,
}

#[derive(Debug, Clone)]
pub struct TimelineOptions {
    pub limit: usize,
    pub merge_gap_ns: i64,
}

impl Default for TimelineOptions {
    fn default() -> Self {
        TimelineOptions {
            limit: 40,
            merge_gap_ns: 10_000,
        }
    }
}

fn pick_window(p: &Profile, scope: &ResolvedScope) -> Result<Option<(Window, String)>> {
    if let Some((s, e)) = scope.trim {
        return Ok(Some((
            Window::new(WindowKind::Trim, s, e),
            scope.trim_source.clone().unwrap_or_default(),
        )));
    }
    let dws = windows::device_windows(p, scope)?;
    for dw in &dws {
        if let Some(sr) = &dw.step_ranges {
            let rest: Vec<&model::NvtxRange> = if sr.ranges.len() > 1 {
                sr.ranges[1..].iter().collect()
            } else {
                sr.ranges.iter().collect()
            };
            let mut by_dur: Vec<&model::NvtxRange> = rest;
            by_dur.sort_by_key(|r| (r.dur(), r.start));
            if let Some(r) = by_dur.get(by_dur.len() / 2) {
                return Ok(Some((
                    Window::new(WindowKind::Steps, r.start, r.end),
                    format!(
                        "a typical step: `{}` (median CPU duration after the first step)",
                        r.name
                    ),
                )));
            }
        }
    }
    Ok(dws
        .iter()
        .find_map(|d| d.span)
        .map(|w| (w, "the device span (no steps found)".to_string())))
}

/// start, end, name, kind.
type GpuEvent = (i64, i64, String, &'static str);

fn push_merged(entries: &mut Vec<Entry>, e: Entry, merge_gap: i64) {
    if let Some(last) = entries.last_mut()
        && last.name == e.name
        && last.kind == e.kind
        && e.offset_ns - (last.offset_ns + last.duration_ns) <= merge_gap
    {
        last.duration_ns =
            (e.offset_ns + e.duration_ns).max(last.offset_ns + last.duration_ns) - last.offset_ns;
        last.count += 1;
        last.busy_ns += e.busy_ns;
        return;
    }
    entries.push(e);
}

pub fn timeline(p: &Profile, scope: &ResolvedScope, options: &TimelineOptions) -> Result<Timeline> {
    let Some((window, source)) = pick_window(p, scope)? else {
        return Ok(Timeline {
            window: Window::new(WindowKind::Span, 0, 0),
            window_source: "no GPU activity in scope".into(),
            gpu: Vec::new(),
            cpu: Vec::new(),
        });
    };
    let (ws, we) = window.bounds();
    let inside = |s: i64, e: i64| s < we && e.max(s + 1) > ws;
    // GPU tracks: kernels, memcpys, memsets per (device, stream), in start order.
    let mut ev: BTreeMap<(i64, i64), Vec<GpuEvent>> = BTreeMap::new();
    for k in p.kernels()? {
        if scope.admits(k.device, k.global_pid, k.start, k.end) && inside(k.start, k.end) {
            ev.entry((k.device, k.stream)).or_default().push((
                k.start,
                k.end,
                p.string(k.short_name).to_string(),
                "kernel",
            ));
        }
    }
    let opers = p.memcpy_oper_labels()?;
    for m in p.memcpys()? {
        if scope.admits(m.device, m.global_pid, m.start, m.end) && inside(m.start, m.end) {
            let label = opers.get(&m.copy_kind).cloned().unwrap_or_default();
            ev.entry((m.device, m.stream)).or_default().push((
                m.start,
                m.end,
                format!("[CUDA memcpy {label}]"),
                "memcpy",
            ));
        }
    }
    for m in p.memsets()? {
        if scope.admits(m.device, m.global_pid, m.start, m.end) && inside(m.start, m.end) {
            ev.entry((m.device, m.stream)).or_default().push((
                m.start,
                m.end,
                "[CUDA memset]".into(),
                "memset",
            ));
        }
    }
    let mut gpu = Vec::new();
    let mut pids = std::collections::BTreeSet::new();
    for k in p.kernels()? {
        if scope.admits(k.device, k.global_pid, k.start, k.end) && inside(k.start, k.end) {
            pids.insert(k.global_pid & model::PID_MASK);
        }
    }
    for ((device, stream), mut list) in ev {
        list.sort_by_key(|e| (e.0, e.1));
        let mut entries = Vec::new();
        for (s, e, name, kind) in &list {
            push_merged(
                &mut entries,
                Entry {
                    offset_ns: s - ws,
                    duration_ns: e - s,
                    name: name.clone(),
                    kind: kind.to_string(),
                    count: 1,
                    busy_ns: e - s,
                },
                options.merge_gap_ns,
            );
        }
        let truncated = entries.len() > options.limit;
        entries.truncate(options.limit);
        gpu.push(GpuTrack {
            device,
            stream,
            events: list.len() as u64,
            entries,
            truncated,
        });
    }
    // CPU tracks: threads of the processes on the GPU tracks (or the process filter).
    let cpu_ok = |gtid: i64| match scope.process {
        Some(pid) => model::pid_of(gtid) == pid,
        None => pids.is_empty() || pids.contains(&model::process_key(gtid)),
    };
    let mut threads: BTreeMap<i64, (Vec<RangeEntry>, Vec<Entry>)> = BTreeMap::new();
    let mut stacks: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for r in &p.nvtx()?.ranges {
        if !cpu_ok(r.global_tid) || !inside(r.start, r.end) {
            continue;
        }
        let stack = stacks.entry(r.global_tid).or_default();
        while stack.last().is_some_and(|&end| end <= r.start) {
            stack.pop();
        }
        let depth = stack.len() as u32;
        if r.is_push_pop() {
            stack.push(r.end);
        }
        threads.entry(r.global_tid).or_default().0.push(RangeEntry {
            offset_ns: r.start - ws,
            duration_ns: r.dur(),
            name: r.name.clone(),
            depth,
        });
    }
    let api = p.api()?;
    let lo = api.partition_point(|a| a.start < ws - 10_000_000_000);
    for a in &api[lo..] {
        if a.start >= we {
            break;
        }
        if !cpu_ok(a.global_tid) || !inside(a.start, a.end) {
            continue;
        }
        let display = calls::api_display_name(p.string(a.name));
        let kind = calls::api_kind(display);
        // Bookkeeping calls around launches (cuKernelGetName, cudaStreamIsCapturing, ...)
        // are noise at this zoom; launches merge into one run whatever their API.
        if kind == calls::CallKind::Other && a.dur() < 5_000 {
            continue;
        }
        let name = if kind == calls::CallKind::Launch {
            "kernel launches"
        } else {
            display
        };
        let e = &mut threads.entry(a.global_tid).or_default().1;
        push_merged(
            e,
            Entry {
                offset_ns: a.start - ws,
                duration_ns: a.dur(),
                name: name.to_string(),
                kind: "api".into(),
                count: 1,
                busy_ns: a.dur(),
            },
            // CPU calls interleave with Python work: merge them at a coarser grain.
            options.merge_gap_ns.saturating_mul(10),
        );
    }
    let names = super::info::thread_names(p)?;
    let cpu = threads
        .into_iter()
        .map(|(gtid, (mut ranges, mut api))| {
            let truncated = ranges.len() > options.limit || api.len() > options.limit;
            ranges.truncate(options.limit);
            api.truncate(options.limit);
            CpuTrack {
                pid: model::pid_of(gtid),
                tid: model::tid_of(gtid),
                thread: names.get(&gtid).cloned(),
                ranges,
                api,
                truncated,
            }
        })
        .collect();
    Ok(Timeline {
        window,
        window_source: source,
        gpu,
        cpu,
    })
}
