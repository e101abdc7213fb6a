//! `events`: every event of a window, per track, at the resolution a drawing
//! needs — the data behind the dashboard's zoomable timeline.
//!
//! Tracks are GPU streams (kernels, memcpys, memsets) and, per CPU thread, its
//! NVTX ranges (one lane per nesting depth) and its CUDA API calls. The window
//! is cut into `buckets` equal slices (one per pixel of the drawing): an event
//! at least one slice long is returned as itself; neighbouring events shorter
//! than a slice are returned as one *cluster* with their count and busy time.
//! So an answer holds at most a few entries per slice and lane however many
//! events the window covers, and panning over 100k+ events stays fast.
//!
//! The per-track event lists are built once per file (by identity) and kept in
//! a small process-wide cache: a window is then a binary search and one pass.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calls;
use super::model;
use super::{Profile, ProfileError, ResolvedScope, Result, Scope};

/// Slices per window when the caller names none, and the bounds.
pub const DEFAULT_BUCKETS: usize = 1000;
pub const MAX_BUCKETS: usize = 8192;
/// An event without a known launch call.
const NO_LAUNCH: u32 = u32::MAX;
/// Files whose event index stays in memory.
const CACHED_FILES: usize = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Launch {
    /// Start of the launch call, ns after the window start.
    pub t_ns: i64,
    pub dur_ns: i64,
    pub tid: i64,
    /// Index into `names`.
    pub name: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    /// Start, ns after the window start (negative when it began before it).
    pub t_ns: i64,
    /// First start → last end (of the cluster).
    pub dur_ns: i64,
    /// Index into `names` (a cluster: its longest event).
    pub name: u32,
    /// NVTX nesting depth (0 = outermost; 0 on other tracks).
    pub lane: u32,
    /// 1, or the events of a cluster.
    pub count: u32,
    /// Σ durations of a cluster's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_ns: Option<i64>,
    /// A kernel's launch call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Track {
    /// `gpu`, `nvtx` or `api`.
    pub kind: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<i64>,
    pub pid: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<i64>,
    /// Lanes (NVTX nesting depths) on this track.
    pub lanes: u32,
    /// Events overlapping the window, before clustering.
    pub in_window: u64,
    pub events: Vec<Event>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Events {
    /// The window drawn: absolute ns in the export's timebase.
    pub start_ns: i64,
    pub end_ns: i64,
    /// First start → last end of all events of the file (the zoom-out limit).
    pub extent_start_ns: i64,
    pub extent_end_ns: i64,
    /// Length of one slice: shorter events are clustered.
    pub bucket_ns: i64,
    /// Events overlapping the window on all tracks, and entries returned.
    pub in_window: u64,
    pub returned: u64,
    pub names: Vec<String>,
    pub tracks: Vec<Track>,
}

/// One event of the index.
#[derive(Debug, Clone, Copy)]
struct Ev {
    start: i64,
    end: i64,
    name: u32,
    /// Index into `EventIndex::launches`, or `NO_LAUNCH`.
    launch: u32,
    kernel: bool,
}

#[derive(Debug, Clone, Copy)]
struct LaunchRec {
    start: i64,
    end: i64,
    tid: i64,
    name: u32,
}

#[derive(Debug)]
struct Lane {
    /// Sorted by start.
    events: Vec<Ev>,
    /// The longest event: a window search starts this far before its start.
    max_dur: i64,
}

impl Lane {
    fn new(mut events: Vec<Ev>) -> Lane {
        events.sort_by_key(|e| (e.start, e.end));
        let max_dur = events.iter().map(|e| e.end - e.start).max().unwrap_or(0);
        Lane { events, max_dur }
    }

    /// Events overlapping `[ws, we)`, in start order.
    fn window(&self, ws: i64, we: i64) -> impl Iterator<Item = &Ev> {
        let lo = self
            .events
            .partition_point(|e| e.start < ws.saturating_sub(self.max_dur));
        self.events[lo..]
            .iter()
            .take_while(move |e| e.start < we)
            .filter(move |e| e.end.max(e.start + 1) > ws)
    }
}

#[derive(Debug)]
struct IndexedTrack {
    kind: &'static str,
    label: String,
    device: Option<i64>,
    stream: Option<i64>,
    pid: i64,
    tid: Option<i64>,
    /// Processes whose work is on this track (GPU tracks: the launching ones).
    pids: Vec<i64>,
    lanes: Vec<Lane>,
}

/// Every event of one file, per track.
#[derive(Debug)]
pub struct EventIndex {
    names: Vec<String>,
    launches: Vec<LaunchRec>,
    tracks: Vec<IndexedTrack>,
    extent: (i64, i64),
    /// First start → last end of the kernels (else of all GPU work): the default window.
    gpu_extent: Option<(i64, i64)>,
}

struct Interner {
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Interner {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }
}

impl EventIndex {
    /// Read every kernel, memcpy, memset, NVTX range and CUDA API call of `p`.
    pub fn build(p: &Profile) -> Result<EventIndex> {
        let mut names = Interner {
            names: Vec::new(),
            ids: HashMap::new(),
        };
        let api = p.api()?;
        let kernels = p.kernels()?;
        let launch_index = p.launch_index()?;
        let mut launches = Vec::new();
        let mut launch_of_api: HashMap<u32, u32> = HashMap::new();
        let mut gpu: BTreeMap<(i64, i64), (Vec<Ev>, Vec<i64>)> = BTreeMap::new();
        for (i, k) in kernels.iter().enumerate() {
            let launch = match launch_index.kernel_launch.get(i).copied().flatten() {
                Some(ai) => *launch_of_api.entry(ai).or_insert_with(|| {
                    let a = &api[ai as usize];
                    launches.push(LaunchRec {
                        start: a.start,
                        end: a.end,
                        tid: model::tid_of(a.global_tid),
                        name: names.id(calls::api_display_name(p.string(a.name))),
                    });
                    (launches.len() - 1) as u32
                }),
                None => NO_LAUNCH,
            };
            let t = gpu.entry((k.device, k.stream)).or_default();
            t.0.push(Ev {
                start: k.start,
                end: k.end,
                name: names.id(p.string(k.short_name)),
                launch,
                kernel: true,
            });
            let pid = model::pid_of(k.global_pid);
            if k.global_pid != 0 && !t.1.contains(&pid) {
                t.1.push(pid);
            }
        }
        let opers = p.memcpy_oper_labels()?;
        for m in p.memcpys()? {
            let label = opers.get(&m.copy_kind).map(String::as_str).unwrap_or("");
            let t = gpu.entry((m.device, m.stream)).or_default();
            t.0.push(Ev {
                start: m.start,
                end: m.end,
                name: names.id(&format!("[CUDA memcpy {label}]")),
                launch: NO_LAUNCH,
                kernel: false,
            });
        }
        for m in p.memsets()? {
            let t = gpu.entry((m.device, m.stream)).or_default();
            t.0.push(Ev {
                start: m.start,
                end: m.end,
                name: names.id("[CUDA memset]"),
                launch: NO_LAUNCH,
                kernel: false,
            });
        }
        let thread_names = super::info::thread_names(p)?;
        let mut tracks = Vec::new();
        for ((device, stream), (events, pids)) in gpu {
            tracks.push(IndexedTrack {
                kind: "gpu",
                label: format!("GPU {device} · stream {stream}"),
                device: Some(device),
                stream: Some(stream),
                pid: pids.first().copied().unwrap_or(0),
                tid: None,
                pids,
                lanes: vec![Lane::new(events)],
            });
        }
        // NVTX ranges per thread, one lane per nesting depth.
        let mut nvtx: BTreeMap<i64, Vec<Vec<Ev>>> = BTreeMap::new();
        let mut stacks: HashMap<i64, Vec<i64>> = HashMap::new();
        for r in &p.nvtx()?.ranges {
            let stack = stacks.entry(r.global_tid).or_default();
            while stack.last().is_some_and(|&end| end <= r.start) {
                stack.pop();
            }
            let depth = stack.len();
            if r.is_push_pop() {
                stack.push(r.end);
            }
            let lanes = nvtx.entry(r.global_tid).or_default();
            if lanes.len() <= depth {
                lanes.resize_with(depth + 1, Vec::new);
            }
            lanes[depth].push(Ev {
                start: r.start,
                end: r.end,
                name: names.id(&r.name),
                launch: NO_LAUNCH,
                kernel: false,
            });
        }
        let mut api_by_thread: BTreeMap<i64, Vec<Ev>> = BTreeMap::new();
        for a in api {
            api_by_thread.entry(a.global_tid).or_default().push(Ev {
                start: a.start,
                end: a.end,
                name: names.id(calls::api_display_name(p.string(a.name))),
                launch: NO_LAUNCH,
                kernel: false,
            });
        }
        let mut threads: Vec<i64> = nvtx.keys().chain(api_by_thread.keys()).copied().collect();
        threads.sort_unstable();
        threads.dedup();
        for gtid in threads {
            let pid = model::pid_of(gtid);
            let tid = model::tid_of(gtid);
            let thread = thread_names
                .get(&gtid)
                .map(|n| format!("{n} ({tid})"))
                .unwrap_or_else(|| format!("thread {tid}"));
            if let Some(lanes) = nvtx.remove(&gtid) {
                tracks.push(IndexedTrack {
                    kind: "nvtx",
                    label: format!("{thread} · NVTX"),
                    device: None,
                    stream: None,
                    pid,
                    tid: Some(tid),
                    pids: vec![pid],
                    lanes: lanes.into_iter().map(Lane::new).collect(),
                });
            }
            if let Some(events) = api_by_thread.remove(&gtid) {
                tracks.push(IndexedTrack {
                    kind: "api",
                    label: format!("{thread} · CUDA API"),
                    device: None,
                    stream: None,
                    pid,
                    tid: Some(tid),
                    pids: vec![pid],
                    lanes: vec![Lane::new(events)],
                });
            }
        }
        let mut extent = (i64::MAX, i64::MIN);
        for t in &tracks {
            for l in &t.lanes {
                for e in &l.events {
                    extent.0 = extent.0.min(e.start);
                    extent.1 = extent.1.max(e.end);
                }
            }
        }
        if extent.0 > extent.1 {
            extent = (0, 0);
        }
        // The default window: the kernels' span (early copies of set-up often lie seconds before the
        // first kernel), else every GPU operation's.
        let span = |kernels_only: bool| {
            tracks
                .iter()
                .filter(|t| t.kind == "gpu")
                .flat_map(|t| t.lanes.iter().flat_map(|l| l.events.iter()))
                .filter(|e| !kernels_only || e.kernel)
                .fold(None, |acc: Option<(i64, i64)>, e| {
                    Some(acc.map_or((e.start, e.end), |(s, x)| (s.min(e.start), x.max(e.end))))
                })
        };
        let gpu_extent = span(true).or_else(|| span(false));
        Ok(EventIndex {
            names: names.names,
            launches,
            tracks,
            extent,
            gpu_extent,
        })
    }

    /// First start → last end of every event.
    pub fn extent(&self) -> (i64, i64) {
        self.extent
    }

    /// The scope of a window request, checked against this index: the device and process must
    /// have events; `nvtx_range` goes through [`Profile::resolve`]; `start_ns`/`end_ns` need only
    /// be in order (a window with no events answers empty tracks).
    pub fn resolve(&self, p: &Profile, scope: &Scope) -> Result<ResolvedScope> {
        if let Some(d) = scope.device {
            let mut devices: Vec<i64> = self.tracks.iter().filter_map(|t| t.device).collect();
            devices.dedup();
            if !devices.contains(&d) {
                return Err(ProfileError::BadArgument(format!(
                    "device {d} ran no kernels, copies or memsets in this profile; devices present: {devices:?}"
                )));
            }
        }
        if let Some(pid) = scope.process {
            let mut pids: Vec<i64> = self
                .tracks
                .iter()
                .flat_map(|t| t.pids.iter().copied())
                .collect();
            pids.sort_unstable();
            pids.dedup();
            if !pids.contains(&pid) {
                return Err(ProfileError::BadArgument(format!(
                    "process {pid} has no events in this profile; processes with events: {pids:?}"
                )));
            }
        }
        let mut out = if scope.nvtx_range.is_some() {
            p.resolve(&Scope {
                start_ns: None,
                end_ns: None,
                ..scope.clone()
            })?
        } else {
            ResolvedScope {
                device: scope.device,
                process: scope.process,
                trim: None,
                trim_source: None,
            }
        };
        if scope.start_ns.is_some() || scope.end_ns.is_some() {
            let (s0, e0) = out.trim.unwrap_or((i64::MIN, i64::MAX));
            let s = scope.start_ns.unwrap_or(i64::MIN).max(s0);
            let e = scope.end_ns.unwrap_or(i64::MAX).min(e0);
            if e <= s {
                return Err(ProfileError::BadArgument(format!(
                    "the window is empty: start_ns {} is not before end_ns {}",
                    scope.start_ns.map_or("-".into(), |v| v.to_string()),
                    scope.end_ns.map_or("-".into(), |v| v.to_string())
                )));
            }
            out.trim = Some((s, e));
            out.trim_source = Some(match out.trim_source {
                Some(src) => format!("{src} ∩ start_ns/end_ns"),
                None => "start_ns/end_ns".to_string(),
            });
        }
        Ok(out)
    }

    /// The events of the scope's window (without one: the span of GPU work, or of all events when
    /// there is none), clustered to `buckets` slices.
    pub fn window(&self, scope: &ResolvedScope, buckets: usize) -> Events {
        // A window may reach past the events (zoomed out) but not without bound.
        let len = (self.extent.1 - self.extent.0).max(1);
        let (ws, we) = scope.trim.or(self.gpu_extent).unwrap_or(self.extent);
        let ws = ws.max(self.extent.0.saturating_sub(len));
        let we = we.min(self.extent.1.saturating_add(len)).max(ws + 1);
        let buckets = buckets.clamp(1, MAX_BUCKETS) as i64;
        let bucket_ns = ((we - ws) / buckets).max(1);
        // Processes on the devices in scope: their CPU threads are the ones drawn.
        let device_pids: Vec<i64> = self
            .tracks
            .iter()
            .filter(|t| t.kind == "gpu" && scope.device.is_none_or(|d| t.device == Some(d)))
            .flat_map(|t| t.pids.iter().copied())
            .collect();
        let mut names_out: Vec<String> = Vec::new();
        let mut remap: HashMap<u32, u32> = HashMap::new();
        let mut name = |id: u32| -> u32 {
            *remap.entry(id).or_insert_with(|| {
                names_out.push(self.names[id as usize].clone());
                (names_out.len() - 1) as u32
            })
        };
        let mut tracks = Vec::new();
        let (mut in_window_all, mut returned) = (0u64, 0u64);
        for t in &self.tracks {
            let admitted = match t.kind {
                "gpu" => {
                    scope.device.is_none_or(|d| t.device == Some(d))
                        && scope
                            .process
                            .is_none_or(|p| t.pids.is_empty() || t.pids.contains(&p))
                }
                _ => match scope.process {
                    Some(p) => t.pid == p,
                    None => scope.device.is_none() || device_pids.contains(&t.pid),
                },
            };
            if !admitted {
                continue;
            }
            // Tracks without events in the window stay listed: rows do not jump while panning.
            let mut events = Vec::new();
            let mut in_window = 0u64;
            for (lane_no, lane) in t.lanes.iter().enumerate() {
                let mut cluster: Option<Cluster> = None;
                for e in lane.window(ws, we) {
                    in_window += 1;
                    let dur = e.end - e.start;
                    if dur >= bucket_ns {
                        if let Some(c) = cluster.take() {
                            events.push(c.finish(self, ws, lane_no, &mut name));
                        }
                        events.push(single(self, e, ws, lane_no, &mut name));
                        continue;
                    }
                    match &mut cluster {
                        Some(c) if e.start < c.end + bucket_ns => c.add(e),
                        _ => {
                            if let Some(c) = cluster.take() {
                                events.push(c.finish(self, ws, lane_no, &mut name));
                            }
                            cluster = Some(Cluster::new(e));
                        }
                    }
                }
                if let Some(c) = cluster.take() {
                    events.push(c.finish(self, ws, lane_no, &mut name));
                }
            }
            in_window_all += in_window;
            returned += events.len() as u64;
            tracks.push(Track {
                kind: t.kind.to_string(),
                label: t.label.clone(),
                device: t.device,
                stream: t.stream,
                pid: t.pid,
                tid: t.tid,
                lanes: t.lanes.len() as u32,
                in_window,
                events,
            });
        }
        Events {
            start_ns: ws,
            end_ns: we,
            extent_start_ns: self.extent.0,
            extent_end_ns: self.extent.1,
            bucket_ns,
            in_window: in_window_all,
            returned,
            names: names_out,
            tracks,
        }
    }
}

fn single(
    index: &EventIndex,
    e: &Ev,
    ws: i64,
    lane: usize,
    name: &mut impl FnMut(u32) -> u32,
) -> Event {
    let launch = index.launches.get(e.launch as usize).map(|l| Launch {
        t_ns: l.start - ws,
        dur_ns: l.end - l.start,
        tid: l.tid,
        name: name(l.name),
    });
    Event {
        t_ns: e.start - ws,
        dur_ns: e.end - e.start,
        name: name(e.name),
        lane: lane as u32,
        count: 1,
        busy_ns: None,
        launch,
    }
}

/// Neighbouring events shorter than a slice, drawn as one.
struct Cluster {
    first: Ev,
    start: i64,
    end: i64,
    count: u32,
    busy: i64,
    longest: (i64, u32),
}

impl Cluster {
    fn new(e: &Ev) -> Cluster {
        Cluster {
            first: *e,
            start: e.start,
            end: e.end,
            count: 1,
            busy: e.end - e.start,
            longest: (e.end - e.start, e.name),
        }
    }

    fn add(&mut self, e: &Ev) {
        self.end = self.end.max(e.end);
        self.count += 1;
        self.busy += e.end - e.start;
        if e.end - e.start > self.longest.0 {
            self.longest = (e.end - e.start, e.name);
        }
    }

    fn finish(
        self,
        index: &EventIndex,
        ws: i64,
        lane: usize,
        name: &mut impl FnMut(u32) -> u32,
    ) -> Event {
        if self.count == 1 {
            return single(index, &self.first, ws, lane, name);
        }
        Event {
            t_ns: self.start - ws,
            dur_ns: self.end - self.start,
            name: name(self.longest.1),
            lane: lane as u32,
            count: self.count,
            busy_ns: Some(self.busy),
            launch: None,
        }
    }
}

type CacheEntry = (String, Arc<EventIndex>);

fn cache() -> &'static Mutex<Vec<CacheEntry>> {
    static CACHE: OnceLock<Mutex<Vec<CacheEntry>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(Vec::new()))
}

/// The event index of `p`, built on first use and kept for the last few files.
pub fn index(p: &Profile) -> Result<Arc<EventIndex>> {
    let key = format!("{}|{}", p.db_path().display(), p.identity().key());
    {
        let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pos) = c.iter().position(|(k, _)| *k == key) {
            let entry = c.remove(pos);
            let found = Arc::clone(&entry.1);
            c.push(entry);
            return Ok(found);
        }
    }
    let built = Arc::new(EventIndex::build(p)?);
    let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
    c.retain(|(k, _)| *k != key);
    c.push((key, Arc::clone(&built)));
    while c.len() > CACHED_FILES {
        c.remove(0);
    }
    Ok(built)
}

/// The events of the scope's window (default: the span of GPU work), clustered to `buckets` slices.
pub fn events(p: &Profile, scope: &ResolvedScope, buckets: usize) -> Result<Events> {
    Ok(index(p)?.window(scope, buckets))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(start: i64, end: i64, name: u32) -> Ev {
        Ev {
            start,
            end,
            name,
            launch: NO_LAUNCH,
            kernel: true,
        }
    }

    fn index(events: Vec<Ev>) -> EventIndex {
        let extent = (
            events.iter().map(|e| e.start).min().unwrap(),
            events.iter().map(|e| e.end).max().unwrap(),
        );
        EventIndex {
            names: vec!["short".into(), "long".into()],
            launches: Vec::new(),
            tracks: vec![IndexedTrack {
                kind: "gpu",
                label: "GPU 0 · stream 7".into(),
                device: Some(0),
                stream: Some(7),
                pid: 1,
                tid: None,
                pids: vec![1],
                lanes: vec![Lane::new(events)],
            }],
            extent,
            gpu_extent: Some(extent),
        }
    }

    fn scope(trim: Option<(i64, i64)>) -> ResolvedScope {
        ResolvedScope {
            device: None,
            process: None,
            trim,
            trim_source: None,
        }
    }

    #[test]
    fn short_neighbours_cluster_and_long_events_stay_whole() {
        // 100 events of 10 ns every 20 ns, then one of 5000 ns, then 3 short ones far apart.
        let mut events: Vec<Ev> = (0..100).map(|k| ev(k * 20, k * 20 + 10, 0)).collect();
        events.push(ev(3000, 8000, 1));
        events.extend([ev(9000, 9010, 0), ev(9500, 9510, 0), ev(9990, 10000, 0)]);
        let idx = index(events);
        // 10 slices of 1000 ns: the first 100 are one cluster, the long one is itself, the last three
        // are within a slice of each other: one cluster.
        let w = idx.window(&scope(Some((0, 10_000))), 10);
        assert_eq!(w.bucket_ns, 1000);
        let t = &w.tracks[0];
        assert_eq!(t.in_window, 104);
        let shape: Vec<(i64, i64, u32)> = t
            .events
            .iter()
            .map(|e| (e.t_ns, e.dur_ns, e.count))
            .collect();
        assert_eq!(
            shape,
            vec![(0, 1990, 100), (3000, 5000, 1), (9000, 1000, 3)]
        );
        assert_eq!(t.events[0].busy_ns, Some(1000));
        assert_eq!(w.names[t.events[1].name as usize], "long");
        // Fine slices: every event is itself.
        let w = idx.window(&scope(Some((0, 10_000))), 8192);
        assert_eq!(w.tracks[0].events.len(), 104);
        assert!(w.tracks[0].events.iter().all(|e| e.count == 1));
    }

    #[test]
    fn a_window_finds_long_events_that_began_before_it() {
        let idx = index(vec![
            ev(0, 1_000_000, 1),
            ev(10, 20, 0),
            ev(500_000, 500_010, 0),
        ]);
        let w = idx.window(&scope(Some((400_000, 600_000))), 100);
        let t = &w.tracks[0];
        assert_eq!(t.in_window, 2);
        assert_eq!(t.events[0].t_ns, -400_000);
        // Without a window: the GPU span.
        let w = idx.window(&scope(None), 100);
        assert_eq!((w.start_ns, w.end_ns), (0, 1_000_000));
    }
}
