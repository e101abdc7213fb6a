//! Why the device was idle: each idle stretch is explained from the host side
//! of the operation that ended it. If that operation was already queued when
//! the device ran dry, the host is not to blame (`idle_queued`). Otherwise the
//! device waited for the thread that launched it, and what that thread was
//! doing during the stretch is the cause, by precedence:
//!
//! 1. a synchronizing call (stream/device/event sync, blocking memcpy/memset)
//!    → `idle_sync`; an allocation call → `idle_allocator`; a pageable copy
//!    call (it stages the data) → `idle_pageable_staging`. Each of these also
//!    takes the refill after it returns — until the next operation reaches the
//!    device, at most 1 ms past the return — since the pipeline it drained must
//!    fill again (the findings contract's drain rule): the launch calls in it
//!    and the host time no DataLoader range or OS wait of the thread explains
//!    (step 4 first): a thread that sleeps after a sync is not refilling, and
//!    without the sleep the refill would be short;
//! 2. module loading (`cuModuleLoad*`, `cuLibraryLoad*`) → `idle_module_loading`;
//! 3. other CUDA calls (launches, async copies, events) → `idle_launch_overhead`, except a launch call still
//!    running after 1 ms while the device is idle: no queue is full then, so the call is loading its kernel's
//!    module (CUDA lazy loading) or compiling it → `idle_module_loading`;
//! 4. for what is left of stretches of 100 µs or more: OS runtime calls of the
//!    thread — queue waits and reads (`sem_wait`, `poll`, `read`, ...) or a
//!    DataLoader NVTX range → `idle_data_loading` (Python's queues and locks
//!    wait in `sem_*` on Linux); sleeps and locks (`nanosleep`, `futex`,
//!    `pthread_mutex_lock`) → `idle_os_wait`. A condition-variable wait
//!    (`pthread_cond_*`) is a hand-off inside native code — the main thread
//!    waiting in `loss.backward()` while autograd's thread launches — so the
//!    device waits for the other thread's host work: it falls through to 5;
//! 5. the rest is host code outside any recorded call: `idle_launch_overhead`
//!    in stretches under 1 ms (the host's per-operation cost), else
//!    `idle_host_compute`.
//!
//! No launching call recorded for the next operation → `idle_unattributed`.

use rustc_hash::{FxHashMap, FxHashSet};

use super::super::calls::{self, CallKind};
use super::super::intervals::{self, Interval};
use super::super::model::ApiCall;
use super::super::{Profile, Result};
use super::columns::Column;
use super::ops::{DeviceOps, OpKind};

/// Stretches shorter than this are the host's per-operation cost; longer ones are host work of their own.
pub const HOST_STRETCH_NS: i64 = 1_000_000;
/// How long after a draining call returns its refill is still counted against it.
pub const DRAIN_NS: i64 = 1_000_000;
/// The OS runtime trace is read only for unexplained host time at least this long.
const OSRT_MIN_NS: i64 = 100_000;
/// Devices with at least this many idle stretches have them explained on several threads.
const PARALLEL_MIN: usize = 8192;
/// Threads that explain one device's stretches.
const MAX_THREADS: usize = 8;
/// How many earlier calls of a thread are checked for one still running at a stretch's start.
const LOOK_BACK: usize = 64;

/// A labelled piece of idle time (used while covering a stretch).
type Piece = (i64, i64, Column);

/// A piece of idle time with its cause and the thread the device waited for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdlePiece {
    pub start: i64,
    pub end: i64,
    pub column: Column,
    /// The thread that launched the operation ending the stretch (`None`: unattributed or queued).
    pub thread: Option<i64>,
}

/// What the ledger needs to know about the host: the profile (for the OS runtime trace) and its call tables.
pub struct Host<'p> {
    p: &'p Profile,
    calls: &'p Calls<'p>,
}

/// The host's CUDA calls by thread and kind, and its DataLoader ranges: plain tables, made once per profile and
/// shared by the threads that explain stretches or build devices' ledgers at once (a `Profile` is not `Sync`).
pub struct Calls<'p> {
    api: &'p [ApiCall],
    by_thread: FxHashMap<i64, Vec<u32>>,
    kinds: FxHashMap<i64, CallKind>,
    /// DataLoader NVTX ranges per thread, sorted.
    loader_ranges: FxHashMap<i64, Vec<Interval>>,
}

impl<'p> std::ops::Deref for Host<'p> {
    type Target = Calls<'p>;
    fn deref(&self) -> &Calls<'p> {
        self.calls
    }
}

impl<'p> Host<'p> {
    /// `calls` may come from another handle on the same export ([`Profile::sibling`]).
    pub fn new(p: &'p Profile, calls: &'p Calls<'p>) -> Host<'p> {
        Host { p, calls }
    }
}

impl<'p> Calls<'p> {
    pub fn new(p: &'p Profile) -> Result<Calls<'p>> {
        let api = p.api()?;
        let mut by_thread: FxHashMap<i64, Vec<u32>> = FxHashMap::default();
        let mut kinds: FxHashMap<i64, CallKind> = FxHashMap::default();
        for (i, a) in api.iter().enumerate() {
            by_thread.entry(a.global_tid).or_default().push(i as u32);
            kinds
                .entry(a.name)
                .or_insert_with(|| calls::api_kind(calls::api_display_name(p.string(a.name))));
        }
        let mut loader_ranges: FxHashMap<i64, Vec<Interval>> = FxHashMap::default();
        for r in &p.nvtx()?.ranges {
            if r.name.contains("DataLoader") {
                loader_ranges
                    .entry(r.global_tid)
                    .or_default()
                    .push((r.start, r.end));
            }
        }
        for v in loader_ranges.values_mut() {
            *v = intervals::union(std::mem::take(v));
        }
        Ok(Calls {
            api,
            by_thread,
            kinds,
            loader_ranges,
        })
    }
}

impl Calls<'_> {
    /// The kind of an API call.
    pub fn kind(&self, call: u32) -> CallKind {
        let a = &self.api[call as usize];
        self.kinds.get(&a.name).copied().unwrap_or(CallKind::Other)
    }

    pub fn call(&self, call: u32) -> &ApiCall {
        &self.api[call as usize]
    }

    /// The threads that made any call.
    pub fn threads(&self) -> impl Iterator<Item = i64> + '_ {
        self.by_thread.keys().copied()
    }

    /// The calls of a thread overlapping `[s, e)`.
    pub fn thread_calls(&self, tid: i64, s: i64, e: i64) -> impl Iterator<Item = u32> + '_ {
        let v: &[u32] = self.by_thread.get(&tid).map_or(&[], |v| v.as_slice());
        let api = self.api;
        let hi = v.partition_point(|&i| api[i as usize].start < e);
        // Calls starting before `s` may still run at `s`: look a few back.
        let lo = v[..hi]
            .partition_point(|&i| api[i as usize].start < s)
            .saturating_sub(LOOK_BACK);
        v[lo..hi]
            .iter()
            .copied()
            .filter(move |&i| api[i as usize].end > s)
    }
}

/// A launch call that runs this long while the device is idle is loading or compiling, not issuing.
pub const SLOW_LAUNCH_NS: i64 = 1_000_000;

/// The precedence of a CUDA call's cause (lower wins) and whether its refill counts against it.
fn call_cause(kind: CallKind, pageable: bool, dur: i64) -> (u8, Column, bool) {
    match kind {
        CallKind::HostSync | CallKind::SyncCopy => (0, Column::IdleSync, true),
        CallKind::Allocation => (1, Column::IdleAllocator, true),
        CallKind::AsyncCopy if pageable => (2, Column::IdlePageableStaging, true),
        CallKind::ModuleLoading => (3, Column::IdleModuleLoading, false),
        CallKind::Launch if dur >= SLOW_LAUNCH_NS => (3, Column::IdleModuleLoading, false),
        _ => (4, Column::IdleLaunchOverhead, false),
    }
}

/// The OS runtime's word on unexplained host time: queue waits and reads are waits for input.
fn osrt_cause(name: &str) -> Option<(u8, Column)> {
    const INPUT: &[&str] = &[
        "sem_wait",
        "sem_timedwait",
        "sem_clockwait",
        "poll",
        "ppoll",
        "epoll_wait",
        "epoll_pwait",
        "select",
        "pselect",
        "read",
        "readv",
        "pread",
        "pread64",
        "recv",
        "recvmsg",
        "recvfrom",
        "fread",
    ];
    if INPUT.contains(&name) {
        return Some((5, Column::IdleDataLoading));
    }
    if name.starts_with("pthread_cond_") {
        return None;
    }
    match calls::osrt_kind(name) {
        CallKind::OsWait => Some((6, Column::IdleOsWait)),
        _ => None,
    }
}

/// Covers `[s, e)` with labelled intervals by precedence: each level takes what earlier levels left.
fn cover(
    s: i64,
    e: i64,
    mut levels: Vec<(u8, Column, Interval)>,
    out: &mut Vec<Piece>,
) -> Vec<Interval> {
    levels.sort_by_key(|l| l.0);
    let mut free: Vec<Interval> = vec![(s, e)];
    let mut i = 0;
    while i < levels.len() && !free.is_empty() {
        let prio = levels[i].0;
        // Group by (level, column) so one union per label.
        let mut by_col: Vec<(Column, Vec<Interval>)> = Vec::new();
        while i < levels.len() && levels[i].0 == prio {
            let (_, c, iv) = levels[i];
            match by_col.iter_mut().find(|(x, _)| *x == c) {
                Some((_, v)) => v.push(iv),
                None => by_col.push((c, vec![iv])),
            }
            i += 1;
        }
        for (c, ivs) in by_col {
            let u = intervals::clip(&intervals::union(ivs), (s, e));
            let got = intervals::intersect(&free, &u);
            for &(a, b) in &got {
                out.push((a, b, c));
            }
            free = subtract(&free, &got);
        }
    }
    free
}

/// `a` minus `b` (both sorted and disjoint).
pub fn subtract(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::with_capacity(a.len());
    let mut j = 0;
    for &(mut s, e) in a {
        while j < b.len() && b[j].1 <= s {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].0 < e {
            if b[k].0 > s {
                out.push((s, b[k].0));
            }
            s = s.max(b[k].1);
            k += 1;
        }
        if s < e {
            out.push((s, e));
        }
    }
    out
}

/// A stretch whose leftover host time needs the OS runtime trace.
struct Pending {
    /// Leftover pieces (no CUDA call covers them).
    free: Vec<Interval>,
    tid: i64,
    /// The whole stretch's length, for the launch-overhead vs host-compute split.
    stretch: i64,
    /// The stretch's refills after draining calls, labelled by precedence, for what the OS runtime leaves.
    refills: Vec<Piece>,
}

/// Explain every idle stretch of a device; returns labelled pieces covering them exactly.
pub fn explain(host: &Host, d: &DeviceOps, idle: &[Interval]) -> Result<Vec<IdlePiece>> {
    let pageable: FxHashSet<u32> = d
        .ops
        .iter()
        .filter(|o| {
            matches!(
                o.kind,
                OpKind::Copy(Column::H2dPageable) | OpKind::Copy(Column::D2hPageable)
            )
        })
        .filter_map(|o| o.launch)
        .collect();
    let threads = if idle.len() < PARALLEL_MIN {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS))
    };
    explain_on(host, d, &pageable, idle, threads)
}

/// [`explain`] with the stretches split over `threads` threads (1: on the calling thread).
fn explain_on(
    host: &Host,
    d: &DeviceOps,
    pageable: &FxHashSet<u32>,
    idle: &[Interval],
    threads: usize,
) -> Result<Vec<IdlePiece>> {
    let calls: &Calls = host.calls;
    let (mut out, pending) = if threads < 2 {
        explain_stretches(calls, d, pageable, idle)
    } else {
        // Stretches are independent: explain runs of them at once, then join in time order.
        let chunk = idle.len().div_ceil(threads);
        let parts: Vec<(Vec<IdlePiece>, Vec<Pending>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = idle
                .chunks(chunk)
                .map(|part| scope.spawn(|| explain_stretches(calls, d, pageable, part)))
                .collect();
            handles
                .into_iter()
                // A panic on a helper thread is the caller's, as it would be without threads.
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        let mut out = Vec::new();
        let mut pending = Vec::new();
        for (o, p) in parts {
            out.extend(o);
            pending.extend(p);
        }
        (out, pending)
    };
    if !pending.is_empty() {
        let mut mine: Vec<(Piece, i64)> = Vec::new();
        osrt_pass(host.p, &pending, &mut mine)?;
        out.extend(mine.into_iter().map(|((a, b, column), tid)| IdlePiece {
            start: a,
            end: b,
            column,
            thread: Some(tid),
        }));
    }
    out.sort_unstable_by_key(|p| (p.start, p.end));
    Ok(out)
}

/// The first pass over idle stretches: each labelled from its thread's CUDA calls, DataLoader ranges and refills;
/// those with enough unexplained host time are left for the OS-runtime pass.
fn explain_stretches(
    host: &Calls,
    d: &DeviceOps,
    pageable: &FxHashSet<u32>,
    idle: &[Interval],
) -> (Vec<IdlePiece>, Vec<Pending>) {
    let mut out: Vec<IdlePiece> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let whole = |s: i64, e: i64, column: Column| IdlePiece {
        start: s,
        end: e,
        column,
        thread: None,
    };
    for &(s, e) in idle {
        let Some(next) = d.first_at_or_after(e) else {
            out.push(whole(s, e, Column::IdleUnattributed));
            continue;
        };
        let Some(launch) = next.launch else {
            out.push(whole(s, e, Column::IdleUnattributed));
            continue;
        };
        let call = host.call(launch);
        if call.end <= s {
            out.push(whole(s, e, Column::IdleQueued));
            continue;
        }
        let tid = call.global_tid;
        let mut mine: Vec<Piece> = Vec::new();
        let mut levels = Vec::new();
        let mut refills = Vec::new();
        for c in host.thread_calls(tid, s, e) {
            let a = host.call(c);
            let (prio, col, drains) =
                call_cause(host.kind(c), pageable.contains(&c), a.end - a.start);
            levels.push((prio, col, (a.start, a.end)));
            if drains {
                refills.push((prio, col, (a.end, a.end + DRAIN_NS)));
            }
        }
        if let Some(r) = host.loader_ranges.get(&tid) {
            for &iv in r.iter().filter(|iv| iv.0 < e && iv.1 > s) {
                levels.push((5, Column::IdleDataLoading, iv));
            }
        }
        let free = cover(s, e, levels, &mut mine);
        // The refills, labelled once per stretch by precedence, in time order.
        let mut refills = if refills.is_empty() {
            Vec::new()
        } else {
            let mut r = Vec::new();
            cover(s, e, refills, &mut r);
            r.sort_unstable_by_key(|p| p.0);
            r
        };
        refill_launches(&mut mine, &refills);
        // The OS runtime is read only where at least OSRT_MIN_NS is explained by nothing else, refills
        // included: a stretch a refill covers is the refill's unless the thread is seen waiting longer than that.
        let mut refilled = Vec::new();
        let rest = label(&free, &refills, &mut refilled);
        let long: i64 = rest.iter().map(|iv| iv.1 - iv.0).sum();
        if long >= OSRT_MIN_NS {
            pending.push(Pending {
                free,
                tid,
                stretch: e - s,
                refills: std::mem::take(&mut refills),
            });
        } else {
            mine.append(&mut refilled);
            leftover(&rest, e - s, &mut mine);
        }
        out.extend(mine.into_iter().map(|(a, b, column)| IdlePiece {
            start: a,
            end: b,
            column,
            thread: Some(tid),
        }));
    }
    (out, pending)
}

/// Launch calls inside a refill are the refill: the pipeline a draining call emptied fills again through them.
fn refill_launches(pieces: &mut Vec<Piece>, refills: &[Piece]) {
    if refills.is_empty() {
        return;
    }
    let mut launches: Vec<Interval> = Vec::new();
    pieces.retain(|&(a, b, c)| {
        let launch = c == Column::IdleLaunchOverhead;
        if launch {
            launches.push((a, b));
        }
        !launch
    });
    launches.sort_unstable();
    let rest = label(&launches, refills, pieces);
    pieces.extend(
        rest.into_iter()
            .map(|(a, b)| (a, b, Column::IdleLaunchOverhead)),
    );
}

/// The parts of `free` (sorted, disjoint) that the labelled pieces `by` (sorted, disjoint) cover, with their
/// labels, into `out`; returns the rest.
fn label(free: &[Interval], by: &[Piece], out: &mut Vec<Piece>) -> Vec<Interval> {
    if by.is_empty() {
        return free.to_vec();
    }
    let mut rest = Vec::new();
    let mut j = 0;
    for &(s, e) in free {
        while j < by.len() && by[j].1 <= s {
            j += 1;
        }
        let mut at = s;
        let mut k = j;
        while k < by.len() && by[k].0 < e {
            let (a, b) = (by[k].0.max(at), by[k].1.min(e));
            if a > at {
                rest.push((at, a));
            }
            if b > a {
                out.push((a, b, by[k].2));
                at = b;
            }
            k += 1;
        }
        if at < e {
            rest.push((at, e));
        }
    }
    rest
}

/// Host time outside any recorded call: per-operation cost in short stretches, host work in long ones.
fn leftover(free: &[Interval], stretch: i64, out: &mut Vec<Piece>) {
    let col = if stretch < HOST_STRETCH_NS {
        Column::IdleLaunchOverhead
    } else {
        Column::IdleHostCompute
    };
    out.extend(free.iter().map(|&(a, b)| (a, b, col)));
}

/// One read of the OS runtime calls near the pending stretches, then label them.
fn osrt_pass(p: &Profile, pending: &[Pending], out: &mut Vec<(Piece, i64)>) -> Result<()> {
    // Per thread, windows sorted and disjoint (stretches of one device are), each naming its stretch and its
    // free interval: a call of another thread never explains a stretch, and long calls of busy threads (a
    // TCPStore's accept poll, NCCL's proxy) would otherwise be matched against every window they span.
    let mut by_thread: FxHashMap<i64, Vec<Window>> = FxHashMap::default();
    for (i, pd) in pending.iter().enumerate() {
        let mine = by_thread.entry(pd.tid).or_default();
        mine.extend(pd.free.iter().enumerate().map(|(j, &(s, e))| (s, e, i, j)));
    }
    for windows in by_thread.values_mut() {
        windows.sort_unstable();
    }
    let spans: FxHashMap<i64, Vec<Interval>> = by_thread
        .iter()
        .map(|(&tid, w)| (tid, w.iter().map(|w| (w.0, w.1)).collect()))
        .collect();
    // Each name's cause once: a thread's ioctl and condition waits, most of its calls, have none and are not read.
    let causes: FxHashMap<i64, (u8, Column)> = p
        .osrt_name_ids()?
        .into_iter()
        .filter_map(|id| osrt_cause(p.string(id)).map(|c| (id, c)))
        .collect();
    let parts: Vec<Vec<Labelled>> = p.fold_osrt_threads_near(
        &spans,
        |name| causes.contains_key(&name),
        Vec::new,
        |acc, s, e, gtid, name| {
            let (Some(windows), Some(&(prio, col))) = (by_thread.get(&gtid), causes.get(&name))
            else {
                return;
            };
            let mut k = windows.partition_point(|w| w.1 <= s);
            while k < windows.len() && windows[k].0 < e {
                let (ws, we, i, j) = windows[k];
                acc.push((i, j, prio, col, (s.max(ws), e.min(we))));
                k += 1;
            }
        },
    )?;
    let mut per: Vec<Vec<Vec<Level>>> = pending
        .iter()
        .map(|pd| vec![Vec::new(); pd.free.len()])
        .collect();
    for (i, j, prio, col, iv) in parts.into_iter().flatten() {
        per[i][j].push((prio, col, iv));
    }
    for (pd, levels) in pending.iter().zip(per) {
        let mut rest = Vec::new();
        let mut mine = Vec::new();
        for (&(s, e), lv) in pd.free.iter().zip(levels) {
            rest.extend(cover(s, e, lv, &mut mine));
        }
        let rest = label(&rest, &pd.refills, &mut mine);
        leftover(&rest, pd.stretch, &mut mine);
        out.extend(mine.into_iter().map(|piece| (piece, pd.tid)));
    }
    Ok(())
}

/// A free interval of a pending stretch: start, end, the stretch's index and the interval's index in it.
type Window = (i64, i64, usize, usize);
/// A cause's priority, its column and the part of one window it covers.
type Level = (u8, Column, Interval);

/// A labelled part of a window: the stretch's index, the window's index in it, and the level.
type Labelled = (usize, usize, u8, Column, Interval);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtracting_intervals_leaves_the_gaps() {
        assert_eq!(
            subtract(&[(0, 10), (20, 30)], &[(2, 4), (8, 22), (25, 26)]),
            vec![(0, 2), (4, 8), (22, 25), (26, 30)]
        );
        assert_eq!(subtract(&[(0, 10)], &[]), vec![(0, 10)]);
        assert_eq!(subtract(&[(0, 10)], &[(0, 10)]), Vec::<Interval>::new());
    }

    #[test]
    fn precedence_decides_overlapping_causes() {
        let mut out = Vec::new();
        let free = cover(
            0,
            100,
            vec![
                (4, Column::IdleLaunchOverhead, (0, 50)),
                (0, Column::IdleSync, (20, 60)),
            ],
            &mut out,
        );
        out.sort_unstable_by_key(|p| p.0);
        assert_eq!(
            out,
            vec![
                (0, 20, Column::IdleLaunchOverhead),
                (20, 60, Column::IdleSync)
            ]
        );
        assert_eq!(free, vec![(60, 100)]);
    }

    #[test]
    fn stretches_explained_on_several_threads_are_explained_the_same() {
        // ddp.sqlite: two devices of a DDP run with syncs, launches, OS-runtime waits; every gap between a
        // device's operations is a stretch to explain.
        let (_tmp, p) = super::super::tests::ddp(None);
        let scope = p.resolve(&crate::Scope::default()).unwrap();
        let calls = Calls::new(&p).unwrap();
        let host = Host::new(&p, &calls);
        let no_pageable = FxHashSet::default();
        let mut compared = 0;
        for d in super::super::ops::device_ops(&p, &scope).unwrap().iter() {
            let busy = intervals::union(d.ops.iter().map(|o| (o.start, o.end)).collect());
            let idle: Vec<Interval> = busy.windows(2).map(|w| (w[0].1, w[1].0)).collect();
            let one = explain_on(&host, d, &no_pageable, &idle, 1).unwrap();
            for threads in [2, 3, 8] {
                assert_eq!(
                    explain_on(&host, d, &no_pageable, &idle, threads).unwrap(),
                    one
                );
            }
            compared += idle.len();
        }
        assert!(compared > 1000, "{compared} stretches");
    }

    #[test]
    fn labelled_pieces_take_their_part_of_the_free_time() {
        let by = [(5, 12, Column::IdleSync), (15, 18, Column::IdleAllocator)];
        let mut out = Vec::new();
        let rest = label(&[(0, 10), (11, 20)], &by, &mut out);
        assert_eq!(
            out,
            vec![
                (5, 10, Column::IdleSync),
                (11, 12, Column::IdleSync),
                (15, 18, Column::IdleAllocator)
            ]
        );
        assert_eq!(rest, vec![(0, 5), (12, 15), (18, 20)]);
        assert_eq!(label(&[(0, 10)], &[], &mut out), vec![(0, 10)]);
    }

    #[test]
    fn input_waits_and_sleeps_are_told_apart() {
        assert_eq!(
            osrt_cause("sem_timedwait").unwrap().1,
            Column::IdleDataLoading
        );
        assert_eq!(osrt_cause("poll").unwrap().1, Column::IdleDataLoading);
        assert_eq!(osrt_cause("clock_nanosleep").unwrap().1, Column::IdleOsWait);
        assert_eq!(
            osrt_cause("pthread_mutex_lock").unwrap().1,
            Column::IdleOsWait
        );
        assert_eq!(osrt_cause("ioctl"), None);
        assert_eq!(osrt_cause("pthread_cond_wait"), None);
        assert_eq!(osrt_cause("pthread_cond_timedwait"), None);
    }
}
