//! The **step ledger**: where each nanosecond of each step goes, per device.
//!
//! Computed once per export (and per rank of a set), it is the one time model
//! every judgment reads:
//!
//! 1. **Steps on the GPU timeline** ([`steps`]): a step's period on a device
//!    runs from its first operation to the next step's first operation.
//!    Leading warm-up steps are reported apart; the **steady window** is the
//!    remaining steps' periods, on the GPU timeline.
//! 2. **An exclusive partition of every period** ([`sweep`], [`idle`]) into
//!    the ledger's [`Column`]s: compute by kernel class, communication
//!    (transfer vs wait when the set's other ranks are known), copies by
//!    direction and host memory kind, and idle by cause. Precedence: compute >
//!    communication > copy > idle, so the columns of a step sum to its period
//!    exactly and nothing is counted twice.
//! 3. **What a fix would save** is read from the columns by the rules
//!    (`profile::rules`), each with a stated what-if and the steady step it
//!    predicts.

mod chains;
mod collectives;
mod columns;
mod idle;
mod ops;
mod steps;
mod sweep;
pub mod tuning;

use rustc_hash::FxHashMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use chains::{CHAIN_COLUMNS, Chain, ChainSummary, tensors_touched};
pub use collectives::{Arrivals, DECIDED_NS, RankCollectives, WaitSplit, collectives_of, split};
pub use columns::{Column, Columns, Group};
pub use idle::{DRAIN_NS, HOST_STRETCH_NS, IdlePiece, SLOW_LAUNCH_NS};
pub use ops::{
    DeviceOps, Op, OpKind, compute_column, device_ops, is_optimizer_kernel, kernel_kind,
    kernel_ledger_class,
};
pub use steps::{DeviceSteps, StepSource, StepSpan, device_steps, warmup_steps};
pub use sweep::StepAccount;

use super::calls::CallKind;
use super::loaded::TableKind;
use super::nccl::Collective;
use super::stats;
use super::{Profile, ResolvedScope, Result};

/// The precedence rule, as answers state it.
pub const PRECEDENCE: &str = "each instant of a device's step goes to one column: a compute kernel if any runs (the one \
     that started first), else a collective kernel, else a copy or memset, else idle by its cause; the columns of a \
     step sum to its period";

/// Launch and copy calls longer than this are the host waiting on a full queue, not issuing work.
pub const BLOCKING_CALL_NS: i64 = 50_000;

/// One step of one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepLedger {
    /// Position in time order on this device, from 0.
    pub index: u32,
    /// The NVTX range's name, or `iteration N` for detected iterations.
    pub name: String,
    /// The step's first operation on the device.
    pub start_ns: i64,
    /// From this step's first operation to the next step's first operation (the last step: to its last
    /// operation's end).
    pub period_ns: i64,
    /// Leading warm-up step, not in the steady window.
    pub warmup: bool,
    /// Operations the step launched on the device.
    pub ops: u32,
    /// The host's time to issue the step: its NVTX range (or the launch interval between consecutive anchor
    /// kernels) minus the time the issuing thread blocked waiting for the device (syncs, blocking copies,
    /// launch/copy/allocation calls over 50 µs). `None` when the host side is not recorded.
    pub host_ns: Option<i64>,
    /// Where the period went (sums to `period_ns`).
    pub columns: Columns,
    /// Collective kernel time hidden behind compute kernels (not in `columns`).
    pub hidden_communication_ns: i64,
    /// Copy and memset time hidden behind kernels (not in `columns`).
    pub hidden_copy_ns: i64,
    /// Σ over the step's unfused elementwise chains of (chain time − estimated fused time), at most the step's
    /// [`CHAIN_COLUMNS`].
    pub chain_saving_ns: i64,
}

/// The steady window of a device: its steps after warm-up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Steady {
    pub steps: usize,
    pub start_ns: i64,
    pub end_ns: i64,
    /// Σ of the steady steps' periods.
    pub length_ns: i64,
    pub period_median_ns: i64,
    pub period_min_ns: i64,
    pub period_max_ns: i64,
    /// Coefficient of variation of the periods, %.
    pub period_cv_pct: f64,
    /// Median host time to issue a step (see `StepLedger::host_ns`).
    pub host_median_ns: Option<i64>,
    /// Σ over the steady steps, per column.
    pub columns: Columns,
    pub hidden_communication_ns: i64,
    pub hidden_copy_ns: i64,
    /// The unfused elementwise chains of the steady steps.
    pub chains: ChainSummary,
}

/// The ledger of one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceLedger {
    pub device: i64,
    /// The process whose steps mark the periods (the one with most operations on the device).
    pub pid: Option<i64>,
    /// How the steps were found.
    pub source: StepSource,
    /// The NVTX family (`step`) or the anchor kernel of detected iterations.
    pub family: Option<String>,
    pub steps: Vec<StepLedger>,
    /// Leading steps reported apart as warm-up.
    pub warmup_steps: usize,
    pub steady: Steady,
    pub notes: Vec<String>,
    /// The idle pieces of the steady steps with their causes and the thread the device waited for (for the
    /// rules' regions and evidence; not part of answers).
    #[serde(skip)]
    pub idle: Vec<IdlePiece>,
    /// Streaming multiprocessors of the device's GPU, when the export records them (what a collective's thread
    /// blocks take from the compute it overlaps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_count: Option<i64>,
    /// The globalPid key of `pid` (for matching threads; not part of answers).
    #[serde(skip)]
    pub process_key: Option<i64>,
    /// Exposed collective time by kernel, for the wait/transfer split (not part of answers).
    #[serde(skip)]
    pub comm: Vec<CommPiece>,
}

/// A piece of exposed collective time in one step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CommPiece {
    pub step: u32,
    /// Index into `Profile::kernels`.
    pub kernel: u32,
    pub kernel_start: i64,
    pub start: i64,
    pub end: i64,
    /// The kernel's wait for the last rank, once a set has split it.
    pub wait_ns: Option<i64>,
    /// Thread blocks of the collective kernel (NCCL runs one per channel, each on an SM of its own).
    #[serde(default)]
    pub ctas: u32,
    /// A point-to-point kernel (send, receive, or both), in `comm_p2p`: it ends when its peer's data has moved, not
    /// when every rank has arrived, so the collective split leaves it alone.
    #[serde(default)]
    pub point_to_point: bool,
    /// A broadcast: one rank's data sent to all, needed only when what it sends has changed.
    #[serde(default)]
    pub broadcast: bool,
    /// Which collective the kernel runs (by its name), when it names one.
    #[serde(default)]
    pub collective: Option<Collective>,
}

impl CommPiece {
    /// The part of the piece after the last rank arrived (all of it while unsplit).
    pub fn transfer_ns(&self) -> i64 {
        match self.wait_ns {
            Some(w) => self.end - (self.kernel_start + w).clamp(self.start, self.end),
            None => self.end - self.start,
        }
    }
}

/// Per collective kernel (index into `Profile::kernels`), how long it waited for the last rank.
pub type CollectiveWaits = FxHashMap<u32, i64>;

/// The ledgers of every device in scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ledger {
    pub devices: Vec<DeviceLedger>,
    /// How overlapping activity is attributed.
    pub precedence: String,
    /// When the export holds several ranks: who arrived last at the steady collectives (device order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<Arrivals>,
}

/// Build the ledger of every device in scope. `marker` names the step ranges (default: `step_N` and other
/// numbered families, then kernel patterns). Collective time stays `comm` until a set of ranks splits it
/// ([`DeviceLedger::apply_waits`]); several ranks in one export are split here.
pub fn build(p: &Profile, scope: &ResolvedScope, marker: Option<&str>) -> Result<Ledger> {
    if scope.is_whole() && marker.is_none() {
        // Made once per export and kept with its tables: rules, bottlenecks, ranks, ask and the report read it.
        return p
            .derived(TableKind::Ledger, || build_fresh(p, scope, None))
            .map(|l| (*l).clone());
    }
    build_fresh(p, scope, marker)
}

/// Start building the whole export's ledger on another thread, through another handle on the export, and keep
/// it with the export's tables, so that a later question finds it made (a question asking for it meanwhile
/// waits for this build instead of making another). Nothing starts when nothing may be kept, when it is kept
/// already, when another handle cannot be had, or while another export's ledger is being built ahead: one
/// build ahead at a time per process, so a server asked about many exports at once holds one extra working set
/// at most. A server calls this once an export is open; the answer of the question that opened it does not
/// wait for it.
pub fn prefetch(p: &Profile) -> Option<std::thread::JoinHandle<()>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static BUILDING: AtomicBool = AtomicBool::new(false);
    /// Clears the flag when the build ends, however it ends.
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            BUILDING.store(false, Ordering::Release);
        }
    }
    if !p.may_keep() || p.kept::<Ledger>(TableKind::Ledger).is_some() {
        return None;
    }
    if BUILDING.swap(true, Ordering::AcqRel) {
        return None;
    }
    let done = Done;
    let mut q = p.sibling().ok()?;
    // Progress belongs to the question that opened the export, which has its answer by now.
    q.progress = None;
    std::thread::Builder::new()
        .name("aisp-ledger-prefetch".into())
        .spawn(move || {
            let _done = done;
            // A failure here is met again, and reported, by the question that needs the ledger.
            if let Ok(scope) = q.resolve(&crate::Scope::default()) {
                let _ = build(&q, &scope, None);
            }
        })
        .ok()
}

impl super::loaded::Footprint for Ledger {
    fn footprint(&self) -> u64 {
        use std::mem::size_of;
        let devices: usize = self
            .devices
            .iter()
            .map(|d| {
                size_of::<DeviceLedger>()
                    + d.steps.capacity() * size_of::<StepLedger>()
                    + d.steps.iter().map(|s| s.name.capacity()).sum::<usize>()
                    + d.idle.capacity() * size_of::<IdlePiece>()
                    + d.comm.capacity() * size_of::<CommPiece>()
                    + d.notes.iter().map(|n| n.capacity()).sum::<usize>()
            })
            .sum();
        (size_of::<Ledger>() + devices) as u64
    }
}

fn build_fresh(p: &Profile, scope: &ResolvedScope, marker: Option<&str>) -> Result<Ledger> {
    let calls = idle::Calls::new(p)?;
    let all = ops::device_ops(p, scope)?;
    let gpus = super::info::gpus(p)?;
    let mut devices = device_ledgers(p, &calls, &all, &gpus, marker)?;
    let arrivals = collectives::split_within(p, &all, &mut devices)?;
    Ok(Ledger {
        devices,
        precedence: PRECEDENCE.to_string(),
        arrivals,
    })
}

/// Each device's ledger, in device order. Devices' timelines are independent, so with several devices each
/// is built on a thread of its own, through its own handle on the export ([`Profile::sibling`]); when a handle
/// cannot be had, one after another.
fn device_ledgers(
    p: &Profile,
    calls: &idle::Calls,
    all: &[DeviceOps],
    gpus: &[super::info::GpuInfo],
    marker: Option<&str>,
) -> Result<Vec<DeviceLedger>> {
    // Each device's SM count, when the export records it: what an under-filled launch is judged against.
    let sms = |d: &DeviceOps| {
        gpus.iter()
            .find(|g| g.device == d.device)
            .and_then(|g| g.sm_count)
    };
    let serial = || {
        let host = idle::Host::new(p, calls);
        all.iter()
            .map(|d| device_ledger(p, &host, d, sms(d), marker))
            .collect::<Result<Vec<_>>>()
    };
    let Some((first, rest)) = all.split_first() else {
        return Ok(Vec::new());
    };
    if rest.is_empty() {
        return serial();
    }
    // The OS runtime table is the largest the build may read: decoded here once, the handles share it, where a
    // cache that keeps nothing would have each decode its own.
    p.osrt()?;
    let Ok(siblings) = rest.iter().map(|_| p.sibling()).collect::<Result<Vec<_>>>() else {
        return serial();
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = rest
            .iter()
            .zip(siblings)
            .map(|(d, q)| {
                let sms = sms(d);
                scope.spawn(move || device_ledger(&q, &idle::Host::new(&q, calls), d, sms, marker))
            })
            .collect();
        let mut out = vec![device_ledger(
            p,
            &idle::Host::new(p, calls),
            first,
            sms(first),
            marker,
        )?];
        for h in handles {
            // A panic on a helper thread is the caller's, as it would be without threads.
            out.push(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))?);
        }
        Ok(out)
    })
}

fn device_ledger(
    p: &Profile,
    host: &idle::Host,
    d: &DeviceOps,
    sm_count: Option<i64>,
    marker: Option<&str>,
) -> Result<DeviceLedger> {
    let found = steps::device_steps(p, d, marker)?;
    let accounts = sweep::partition(host, d, &found.steps)?;
    let periods: Vec<i64> = found.steps.iter().map(|s| s.end - s.start).collect();
    let warmup = if found.source == StepSource::Span {
        0
    } else {
        steps::warmup_steps(&periods)
    };
    let mut notes = Vec::new();
    let all_chains = match (found.steps.get(warmup), found.steps.last()) {
        (Some(a), Some(b)) => chains::find_chains(p, d, a.start, b.end, sm_count),
        _ => Vec::new(),
    };
    let mut rows = Vec::with_capacity(found.steps.len());
    let mut steady_idle = Vec::new();
    let mut comm = Vec::new();
    let kernels = p.kernels()?;
    for (i, (s, mut a)) in found.steps.iter().zip(accounts).enumerate() {
        if i >= warmup {
            steady_idle.append(&mut a.idle);
        }
        comm.extend(a.comm.iter().map(|&(k, ks, s, e, point_to_point)| {
            let collective = kernels
                .get(k as usize)
                .map(|x| Collective::of(p.string(x.short_name)));
            CommPiece {
                step: i as u32,
                kernel: k,
                kernel_start: ks,
                start: s,
                end: e,
                wait_ns: None,
                ctas: kernels
                    .get(k as usize)
                    .map_or(0, |x| x.blocks().min(u32::MAX as u64) as u32),
                point_to_point,
                broadcast: collective == Some(Collective::Broadcast),
                collective,
            }
        }));
        let saving: i64 = all_chains
            .iter()
            .filter(|c| c.first_start >= s.start && c.first_start < s.end)
            .map(|c| c.time_ns - c.fused_estimate_ns)
            .sum();
        rows.push(StepLedger {
            index: i as u32,
            name: s.name.clone(),
            start_ns: s.start,
            period_ns: s.end - s.start,
            warmup: i < warmup,
            ops: s.ops,
            host_ns: s.cpu.map(|(cs, ce, tid)| host_time(host, cs, ce, tid)),
            // Chains take in reductions and casts: their saving is bounded by all three columns, not the
            // elementwise one alone.
            chain_saving_ns: saving.min(CHAIN_COLUMNS.iter().map(|&c| a.columns.get(c)).sum()),
            columns: a.columns,
            hidden_communication_ns: a.hidden_communication_ns,
            hidden_copy_ns: a.hidden_copy_ns,
        });
    }
    match found.source {
        StepSource::Span => notes.push(
            "no step ranges and no repeating kernel pattern: the device's whole span is one period".into(),
        ),
        StepSource::KernelPattern => notes.push(format!(
            "no NVTX step ranges: steps are the iterations between occurrences of `{}`, a kernel that runs once per \
             iteration",
            found.family.as_deref().unwrap_or("?")
        )),
        StepSource::KernelSequence => notes.push(format!(
            "no NVTX step ranges and no kernel that runs once per iteration: steps are the repetitions of a \
             sequence of {} kernels that opens with `{}` (kernels before its first repetition are start-up, \
             outside every step)",
            found.sequence_length.unwrap_or(0),
            found.family.as_deref().unwrap_or("?")
        )),
        StepSource::Nvtx => {}
    }
    if found.source != StepSource::Span && rows.len() < 3 {
        notes.push(format!(
            "only {} steps: the steady window has {} step(s), too few to judge step-to-step variation",
            rows.len(),
            rows.len().saturating_sub(warmup)
        ));
    }
    let steady = steady_of(p, &rows, &all_chains);
    Ok(DeviceLedger {
        device: d.device,
        pid: d.processes.first().map(|&g| super::model::pid_of(g)),
        source: found.source,
        family: found.family,
        steps: rows,
        warmup_steps: warmup,
        steady,
        notes,
        sm_count,
        idle: steady_idle,
        process_key: d.processes.first().copied(),
        comm,
    })
}

/// The host's issue time over `[cs, ce)` of thread `tid`: the interval minus the time it blocked on the device.
fn host_time(host: &idle::Host, cs: i64, ce: i64, tid: i64) -> i64 {
    let mut blocked = waits_of(host, tid, cs, ce);
    // The loop thread also waits, outside any CUDA call, for another thread of its process that issues the step's
    // kernels (autograd's backward thread): that thread's waits for the device are the loop's too. Without them a
    // GPU-bound step whose backward fills the launch queue reads as a host that needs the whole period.
    let process = super::model::pid_of(tid);
    for other in host.threads() {
        if other == tid || super::model::pid_of(other) != process {
            continue;
        }
        let issues = host
            .thread_calls(other, cs, ce)
            .any(|c| host.kind(c) == CallKind::Launch);
        if issues {
            blocked.extend(waits_of(host, other, cs, ce));
        }
    }
    let blocked = super::intervals::length(&super::intervals::union(blocked));
    (ce - cs - blocked).max(0)
}

/// The stretches of `[cs, ce)` in which thread `tid` waits for the device: syncs, blocking copies, and launch, copy
/// or allocation calls over [`BLOCKING_CALL_NS`] (a full launch queue, a caching allocator's `cudaMalloc`).
fn waits_of(host: &idle::Host, tid: i64, cs: i64, ce: i64) -> Vec<(i64, i64)> {
    let mut blocked = Vec::new();
    for c in host.thread_calls(tid, cs, ce) {
        let a = host.call(c);
        let waits = match host.kind(c) {
            CallKind::HostSync | CallKind::SyncCopy => true,
            CallKind::Launch | CallKind::AsyncCopy | CallKind::Allocation => {
                a.end - a.start > BLOCKING_CALL_NS
            }
            _ => false,
        };
        if waits {
            blocked.push((a.start.max(cs), a.end.min(ce)));
        }
    }
    blocked
}

fn steady_of(p: &Profile, rows: &[StepLedger], all_chains: &[Chain]) -> Steady {
    let st: Vec<&StepLedger> = rows.iter().filter(|r| !r.warmup).collect();
    let (Some(first), Some(last)) = (st.first(), st.last()) else {
        return Steady::default();
    };
    let mut columns = Columns::default();
    for r in &st {
        columns.accumulate(&r.columns);
    }
    let periods: Vec<i64> = st.iter().map(|r| r.period_ns).collect();
    let mut sorted = periods.clone();
    sorted.sort_unstable();
    let mut hosts: Vec<i64> = st.iter().filter_map(|r| r.host_ns).collect();
    let end = last.start_ns + last.period_ns;
    let chains: Vec<&Chain> = all_chains
        .iter()
        .filter(|c| c.first_start >= first.start_ns && c.first_start < end)
        .collect();
    Steady {
        steps: st.len(),
        start_ns: first.start_ns,
        end_ns: end,
        length_ns: periods.iter().sum(),
        period_median_ns: stats::median(&mut sorted.clone()) as i64,
        period_min_ns: sorted[0],
        period_max_ns: sorted[sorted.len() - 1],
        period_cv_pct: super::iterations::spread(&periods).map_or(0.0, |s| s.cv_pct),
        host_median_ns: (!hosts.is_empty()).then(|| stats::median(&mut hosts) as i64),
        columns,
        hidden_communication_ns: st.iter().map(|r| r.hidden_communication_ns).sum(),
        hidden_copy_ns: st.iter().map(|r| r.hidden_copy_ns).sum(),
        chains: chains::summarize(p, &chains),
    }
}

impl DeviceLedger {
    /// Split the exposed collective time (`comm`) at the last rank's arrival: the part of each collective
    /// kernel before `waits[kernel]` ns from its start is `comm_wait`, the rest `comm_transfer`. Kernels
    /// without a wait (not matched on every rank) stay `comm`.
    pub fn apply_waits(&mut self, waits: &CollectiveWaits) {
        // A piece is split once: a second call leaves it alone.
        for piece in self.comm.iter_mut() {
            let Some(&w) = waits.get(&piece.kernel).filter(|_| !piece.point_to_point) else {
                continue;
            };
            if piece.wait_ns.is_some() {
                continue;
            }
            piece.wait_ns = Some(w);
            let cut = (piece.kernel_start + w).clamp(piece.start, piece.end);
            let (wait, transfer) = (cut - piece.start, piece.end - cut);
            let step = &mut self.steps[piece.step as usize];
            step.columns.add(Column::Comm, -(wait + transfer));
            step.columns.add(Column::CommWait, wait);
            step.columns.add(Column::CommTransfer, transfer);
            if !step.warmup {
                self.steady.columns.add(Column::Comm, -(wait + transfer));
                self.steady.columns.add(Column::CommWait, wait);
                self.steady.columns.add(Column::CommTransfer, transfer);
            }
        }
    }

    /// The steady steps.
    pub fn steady_steps(&self) -> impl Iterator<Item = &StepLedger> {
        self.steps.iter().filter(|s| !s.warmup)
    }

    /// Σ over steady steps of a per-step saving, and the median steady period once each step is shortened by
    /// its saving — the step a fix would leave, applied alone.
    pub fn what_if(&self, saving: impl Fn(&StepLedger) -> i64) -> WhatIf {
        let mut total = 0i64;
        let mut after: Vec<i64> = Vec::new();
        for s in self.steady_steps() {
            let saved = saving(s).clamp(0, s.period_ns);
            total += saved;
            after.push(s.period_ns - saved);
        }
        let predicted = if after.is_empty() {
            0
        } else {
            stats::median(&mut after) as i64
        };
        WhatIf {
            saved_ns: total,
            share_pct: stats::pct2(total, self.steady.length_ns.max(1)),
            predicted_step_ns: predicted,
        }
    }

    /// A column's steady total as a share of the steady window, %.
    pub fn share(&self, ns: i64) -> f64 {
        stats::pct2(ns, self.steady.length_ns.max(1))
    }
}

/// What a fix saves over the steady window, and the step it would leave.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WhatIf {
    pub saved_ns: i64,
    pub share_pct: f64,
    pub predicted_step_ns: i64,
}

/// A saving of busy time, bounded by the host: a step cannot become shorter than the time its host needs
/// to issue it (when that is recorded).
pub fn bounded_by_host(step: &StepLedger, saving: i64) -> i64 {
    match step.host_ns {
        Some(h) => saving.min((step.period_ns - h).max(0)),
        None => saving,
    }
}

/// A saving of busy time by a fix that also removes that share of the host's work (the launches of the kernels it
/// removes): the step cannot become shorter than what is left of the host's issue time, `host_kept` (0-1) of it.
pub fn bounded_by_remaining_host(step: &StepLedger, saving: i64, host_kept: f64) -> i64 {
    match step.host_ns {
        Some(h) => saving.min((step.period_ns - (h as f64 * host_kept) as i64).max(0)),
        None => saving,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::loaded::TableCache;

    /// The two-device DDP export (`tests/data/ddp.sqlite.xz`), decompressed into a folder that lives as long as
    /// the first value; `tables` is the cache it is opened with (`None`: nothing kept).
    pub(crate) fn ddp(tables: Option<Arc<TableCache>>) -> (tempfile::TempDir, Profile) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("ddp.sqlite");
        let mut input =
            std::io::BufReader::new(std::fs::File::open(dir.join("ddp.sqlite.xz")).unwrap());
        let mut output = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        lzma_rs::xz_decompress(&mut input, &mut output).unwrap();
        drop(output);
        let options = crate::OpenOptions {
            tables,
            ..Default::default()
        };
        let p = crate::open_with(&path, &options).unwrap();
        (tmp, p)
    }

    #[test]
    fn devices_built_at_once_are_built_as_one_after_another() {
        let (_tmp, p) = ddp(None);
        let scope = p.resolve(&crate::Scope::default()).unwrap();
        let calls = idle::Calls::new(&p).unwrap();
        let all = ops::device_ops(&p, &scope).unwrap();
        assert_eq!(all.len(), 2);
        let host = idle::Host::new(&p, &calls);
        let serial: Vec<DeviceLedger> = all
            .iter()
            .map(|d| device_ledger(&p, &host, d, None, None).unwrap())
            .collect();
        assert_eq!(device_ledgers(&p, &calls, &all, &[], None).unwrap(), serial);
    }

    #[test]
    fn a_ledger_built_ahead_is_kept_and_is_the_one_a_question_would_build() {
        let (_tmp, p) = ddp(Some(Arc::new(TableCache::new(1 << 30))));
        let scope = p.resolve(&crate::Scope::default()).unwrap();
        prefetch(&p).expect("a build starts").join().unwrap();
        let kept = p.kept::<Ledger>(TableKind::Ledger).expect("kept");
        let fresh = build_fresh(&p, &scope, None).unwrap();
        assert_eq!(*kept, fresh);
        assert_eq!(build(&p, &scope, None).unwrap(), fresh);
        assert!(prefetch(&p).is_none(), "nothing starts once it is kept");
        // A cache that keeps nothing: nothing is built ahead.
        let (_tmp2, q) = ddp(None);
        assert!(prefetch(&q).is_none());
    }
}
