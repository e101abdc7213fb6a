//! Holistic-Trace-Analysis-style answers from Kineto traces (one per rank).
//!
//! Definitions (all times integer ns; intervals [start, end), touching
//! intervals merge in unions):
//!
//! - **Window** of a device: first GPU operation start → last GPU operation end
//!   on that device (the profiler's active steps, with a schedule).
//! - **Temporal breakdown** (HTA's convention: overlapped time counts once, as
//!   the higher kind): compute = |∪ compute kernels|; communication (exposed) =
//!   |∪ compute ∪ NCCL| − |∪ compute|; memory (exposed) = |∪ all| − |∪ compute ∪
//!   NCCL|; idle = window − |∪ all|. The four add up to the window.
//! - **Idle breakdown**: each gap between islands of the device's union is
//!   attributed by the GPU operation that ends it: *kernel wait* when the gap is
//!   under 30 ns (HTA's consecutive-kernel delay); *host wait* when that
//!   operation's launch call returned at or after the gap began (the queue was
//!   empty: the GPU waited for the CPU); *other wait* otherwise (it was queued
//!   but waited on a dependency, a synchronisation or the launch latency).
//! - **Overlap**: |C ∩ N| / |N| with C the compute-kernel union and N the NCCL union.
//! - **Launch statistics** (HTA `get_cuda_kernel_launch_stats`, memory events
//!   included): per GPU operation with a launch call of the same correlation id,
//!   CPU duration = the call's duration, launch delay = operation start − call
//!   end. Short: CPU ≤ 50 µs and GPU < CPU; runtime outlier: CPU > 50 µs; launch
//!   delay outlier: delay > 100 µs (HTA's default cut-offs).
//! - **Steps**: `ProfilerStep#N`; a GPU operation belongs to a step when its
//!   launch call, from any thread of the step's process, lies inside the step.
//! - **Median** of an even count is the mean of the two middle values; **p90**
//!   is the nearest-rank value (⌈0.9·n⌉-th smallest).
//! - **Findings** have the one shape of the Nsight rules' (`rules::Finding`),
//!   severity on the same scale from the share of the device's window at
//!   stake: `stake` is `gpu_idle` for idle time the trace measured, `estimate`
//!   for time a fix would shorten, `none` when nothing is known; `device` is the
//!   GPU the finding is about, `rank` the trace's. A trace has no step ledger, so
//!   no predicted step.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::trace::{CpuOp, GpuOp, OpClass, RuntimeCall, Trace};
use crate::rules::{Finding, Severity, Stake};

/// HTA's consecutive-kernel delay: shorter gaps are the GPU's own overhead.
pub const KERNEL_WAIT_NS: i64 = 30;
/// HTA's `runtime_cutoff` (µs) in ns.
pub const RUNTIME_CUTOFF_NS: i64 = 50_000;
/// HTA's `launch_delay_cutoff` (µs) in ns.
pub const LAUNCH_DELAY_CUTOFF_NS: i64 = 100_000;
/// Kernels shorter than this are launch-bound candidates (as in the Nsight rules).
pub const SHORT_KERNEL_NS: i64 = 5_000;
/// Idle gaps longer than this are reported as starvation.
pub const LONG_GAP_NS: i64 = 1_000_000;

/// Synchronising runtime/driver calls (the host waits for the GPU).
const SYNC_CALLS: &[&str] = &[
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaStreamWaitEvent",
    "cudaMemcpy",
    "cudaMemset",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
];

fn union(mut v: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    v.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn total(v: &[(i64, i64)]) -> i64 {
    v.iter().map(|(s, e)| e - s).sum()
}

fn intervals<'a>(ops: impl Iterator<Item = &'a GpuOp>) -> Vec<(i64, i64)> {
    union(ops.map(|o| (o.start_ns, o.end_ns())).collect())
}

fn pct(part: i64, whole: i64) -> f64 {
    if whole > 0 {
        100.0 * part as f64 / whole as f64
    } else {
        0.0
    }
}

/// Median (mean of the middle pair for even counts) of sorted values.
fn median(sorted: &[i64]) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    Some(if n % 2 == 1 {
        sorted[n / 2] as f64
    } else {
        (sorted[n / 2 - 1] as f64 + sorted[n / 2] as f64) / 2.0
    })
}

fn p90(sorted: &[i64]) -> Option<i64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = (9 * n).div_ceil(10);
    Some(sorted[rank.max(1) - 1])
}

/// Where a device's window went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TemporalBreakdown {
    pub compute_ns: i64,
    pub communication_exposed_ns: i64,
    pub memory_exposed_ns: i64,
    pub idle_ns: i64,
    pub compute_pct: f64,
    pub communication_exposed_pct: f64,
    pub memory_exposed_pct: f64,
    pub idle_pct: f64,
}

/// Why the GPU was idle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IdleBreakdown {
    pub gaps: u64,
    pub host_wait_ns: i64,
    pub kernel_wait_ns: i64,
    pub other_wait_ns: i64,
    /// Share of the idle time that was host wait.
    pub host_wait_pct_of_idle: f64,
    pub gaps_over_1ms: u64,
    pub gaps_over_1ms_ns: i64,
    pub largest_gap_ns: i64,
    /// Where the largest gap starts (trace timebase, ns).
    pub largest_gap_start_ns: i64,
}

/// Compute/communication overlap on a device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Overlap {
    /// |∪ NCCL kernels|.
    pub communication_ns: i64,
    /// |∪ compute ∩ ∪ NCCL|.
    pub overlapped_ns: i64,
    /// Share of communication time hidden behind compute.
    pub overlap_pct: f64,
}

/// One GPU of one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceAnalysis {
    pub device: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub streams: Vec<i64>,
    pub window_start_ns: i64,
    pub window_end_ns: i64,
    pub window_ns: i64,
    pub kernels: u64,
    pub memcpys: u64,
    pub memsets: u64,
    /// Σ kernel durations (exceeds the union when streams overlap).
    pub kernel_sum_ns: i64,
    /// |∪ of every GPU operation|.
    pub busy_ns: i64,
    pub busy_pct: f64,
    pub temporal: TemporalBreakdown,
    pub idle: IdleBreakdown,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap: Option<Overlap>,
}

/// A kernel name's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelStat {
    pub name: String,
    pub class: OpClass,
    pub count: u64,
    pub total_ns: i64,
    pub avg_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
    /// Share of Σ kernel time of the rank.
    pub share_pct: f64,
}

/// An operator's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperatorStat {
    pub name: String,
    pub count: u64,
    /// Σ inclusive CPU durations.
    pub cpu_total_ns: i64,
    /// Σ CPU durations minus nested operators on the same thread.
    pub cpu_self_ns: i64,
    /// Σ durations of GPU operations launched directly by this operator.
    pub gpu_ns: i64,
    pub gpu_ops: u64,
    /// Σ FLOPs PyTorch counted (with_flops), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops: Option<f64>,
}

/// HTA's kernel launch statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LaunchStats {
    /// GPU operations matched to their launch call.
    pub launches: u64,
    /// CPU ≤ 50 µs and GPU time < CPU launch time.
    pub short_kernels: u64,
    /// Launch calls longer than 50 µs.
    pub runtime_outliers: u64,
    /// GPU start more than 100 µs after the launch call returned.
    pub launch_delay_outliers: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_launch_median_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_launch_p90_ns: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_delay_median_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_delay_p90_ns: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_delay_max_ns: Option<i64>,
    /// Kernels (not memcpy/memset) shorter than 5 µs, and their share of kernel time.
    pub kernels_under_5us: u64,
    pub kernels_under_5us_time_pct: f64,
    pub kernels_under_5us_count_pct: f64,
    /// Σ CPU launch time of the short kernels (time the host spent launching
    /// work that ran for less than it took to launch).
    pub short_kernels_cpu_ns: i64,
}

/// One profiler step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepStat {
    pub name: String,
    pub cpu_start_ns: i64,
    pub cpu_ns: i64,
    /// GPU operations launched inside the step (any thread of its process).
    pub gpu_ops: u64,
    /// |∪ of those operations| (the GPU time the step caused).
    pub gpu_busy_ns: i64,
    /// Synchronising calls made inside the step.
    pub sync_calls: u64,
}

/// Steps and their medians.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Steps {
    pub count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_median_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_busy_median_ns: Option<f64>,
    pub steps: Vec<StepStat>,
}

/// Copies or sets of one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryOpStat {
    /// As Kineto names it, e.g. `Memcpy HtoD (Pageable -> Device)`.
    pub name: String,
    pub count: u64,
    pub bytes: f64,
    pub total_ns: i64,
    /// bytes / Σ duration (GB = 10^9 B).
    pub gb_per_s: f64,
}

/// A synchronising call's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SyncStat {
    pub name: String,
    pub count: u64,
    pub total_ns: i64,
    pub max_ns: i64,
    pub in_steps: u64,
}

/// Peak memory the caching allocator reported (profile_memory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryPeak {
    pub device: i64,
    pub peak_allocated_bytes: i64,
    pub peak_reserved_bytes: i64,
}

/// Everything about one trace (one rank).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankAnalysis {
    /// The trace's file name (its full path is in the answer's `files`), or the full path
    /// where two traces share a file name.
    pub path: String,
    /// From the trace's `distributedInfo`, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    pub events: u64,
    pub devices: Vec<DeviceAnalysis>,
    pub steps: Steps,
    pub top_kernels: Vec<KernelStat>,
    /// Operators by GPU time they launched.
    pub top_operators_by_gpu: Vec<OperatorStat>,
    /// Operators by self CPU time.
    pub top_operators_by_cpu: Vec<OperatorStat>,
    pub launch_stats: LaunchStats,
    pub memory_ops: Vec<MemoryOpStat>,
    pub sync_calls: Vec<SyncStat>,
    pub memory_peaks: Vec<MemoryPeak>,
}

/// One rank in the cross-rank view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankLine {
    pub index: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    pub compute_ns: i64,
    pub communication_exposed_ns: i64,
    pub idle_ns: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_cpu_median_ns: Option<f64>,
}

/// Ranks side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CrossRank {
    pub ranks: Vec<RankLine>,
    /// (max − min) / max of compute time across ranks.
    pub compute_imbalance_pct: f64,
    /// Index (in `traces`) of the rank with the most compute time.
    pub slowest_index: u64,
}

/// The analysis of one or more traces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceAnalysis {
    pub traces: Vec<RankAnalysis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_rank: Option<CrossRank>,
    /// All findings, most severe (then most time at stake) first.
    pub findings: Vec<Finding>,
}

/// How many rows each top list keeps.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub top: usize,
    pub steps: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { top: 15, steps: 50 }
    }
}

fn device_analysis(
    t: &Trace,
    device: i64,
    ops: &[&GpuOp],
    launch_end: &HashMap<i64, i64>,
) -> DeviceAnalysis {
    let all = intervals(ops.iter().copied());
    let comp = intervals(ops.iter().copied().filter(|o| o.class == OpClass::Compute));
    let comm = intervals(
        ops.iter()
            .copied()
            .filter(|o| o.class == OpClass::Communication),
    );
    let comp_comm = intervals(ops.iter().copied().filter(|o| o.class != OpClass::Memory));
    let start = ops.iter().map(|o| o.start_ns).min().unwrap_or(0);
    let end = ops.iter().map(|o| o.end_ns()).max().unwrap_or(0);
    let window = end - start;
    let busy = total(&all);
    let compute = total(&comp);
    let comm_exposed = total(&comp_comm) - compute;
    let mem_exposed = busy - total(&comp_comm);
    let idle_ns = window - busy;

    // The earliest launch-call end among the operations starting each island.
    let mut island_launch: HashMap<i64, i64> = HashMap::new();
    for o in ops {
        if let Some(le) = o.correlation.and_then(|c| launch_end.get(&c)) {
            island_launch
                .entry(o.start_ns)
                .and_modify(|v| *v = (*v).min(*le))
                .or_insert(*le);
        }
    }
    let mut idle = IdleBreakdown {
        gaps: 0,
        host_wait_ns: 0,
        kernel_wait_ns: 0,
        other_wait_ns: 0,
        host_wait_pct_of_idle: 0.0,
        gaps_over_1ms: 0,
        gaps_over_1ms_ns: 0,
        largest_gap_ns: 0,
        largest_gap_start_ns: 0,
    };
    for w in all.windows(2) {
        let (gap_start, gap_end) = (w[0].1, w[1].0);
        let gap = gap_end - gap_start;
        idle.gaps += 1;
        if gap < KERNEL_WAIT_NS {
            idle.kernel_wait_ns += gap;
        } else if island_launch
            .get(&gap_end)
            .is_some_and(|le| *le >= gap_start)
        {
            idle.host_wait_ns += gap;
        } else {
            idle.other_wait_ns += gap;
        }
        if gap > LONG_GAP_NS {
            idle.gaps_over_1ms += 1;
            idle.gaps_over_1ms_ns += gap;
        }
        if gap > idle.largest_gap_ns {
            idle.largest_gap_ns = gap;
            idle.largest_gap_start_ns = gap_start;
        }
    }
    idle.host_wait_pct_of_idle = pct(idle.host_wait_ns, idle_ns);

    let overlap = (!comm.is_empty()).then(|| {
        let n = total(&comm);
        let overlapped = compute + n - total(&comp_comm);
        Overlap {
            communication_ns: n,
            overlapped_ns: overlapped,
            overlap_pct: pct(overlapped, n),
        }
    });
    let mut streams: Vec<i64> = ops.iter().map(|o| o.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    let is_kernel = |o: &&&GpuOp| o.class != OpClass::Memory;
    DeviceAnalysis {
        device,
        name: t.device_names.get(&device).cloned(),
        streams,
        window_start_ns: start,
        window_end_ns: end,
        window_ns: window,
        kernels: ops.iter().filter(is_kernel).count() as u64,
        memcpys: ops
            .iter()
            .filter(|o| o.class == OpClass::Memory && o.name.starts_with("Memcpy"))
            .count() as u64,
        memsets: ops
            .iter()
            .filter(|o| o.class == OpClass::Memory && o.name.starts_with("Memset"))
            .count() as u64,
        kernel_sum_ns: ops.iter().filter(is_kernel).map(|o| o.dur_ns).sum(),
        busy_ns: busy,
        busy_pct: pct(busy, window),
        temporal: TemporalBreakdown {
            compute_ns: compute,
            communication_exposed_ns: comm_exposed,
            memory_exposed_ns: mem_exposed,
            idle_ns,
            compute_pct: pct(compute, window),
            communication_exposed_pct: pct(comm_exposed, window),
            memory_exposed_pct: pct(mem_exposed, window),
            idle_pct: pct(idle_ns, window),
        },
        idle,
        overlap,
    }
}

fn top_kernels(t: &Trace, limit: usize) -> Vec<KernelStat> {
    let kernels: Vec<&GpuOp> = t
        .gpu_ops
        .iter()
        .filter(|o| o.class != OpClass::Memory)
        .collect();
    let sum: i64 = kernels.iter().map(|k| k.dur_ns).sum();
    let mut by: HashMap<&str, KernelStat> = HashMap::new();
    for k in kernels {
        let s = by.entry(&k.name).or_insert_with(|| KernelStat {
            name: k.name.clone(),
            class: k.class,
            count: 0,
            total_ns: 0,
            avg_ns: 0.0,
            min_ns: i64::MAX,
            max_ns: 0,
            share_pct: 0.0,
        });
        s.count += 1;
        s.total_ns += k.dur_ns;
        s.min_ns = s.min_ns.min(k.dur_ns);
        s.max_ns = s.max_ns.max(k.dur_ns);
    }
    let mut out: Vec<KernelStat> = by
        .into_values()
        .map(|mut s| {
            s.avg_ns = s.total_ns as f64 / s.count as f64;
            s.share_pct = pct(s.total_ns, sum);
            s
        })
        .collect();
    out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    out.truncate(limit);
    out
}

/// Self time per CPU operator (nested operators on the same thread subtracted).
fn self_times(ops: &[CpuOp]) -> Vec<i64> {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&ops[a], &ops[b]);
        (x.pid, x.tid, x.start_ns, std::cmp::Reverse(x.dur_ns)).cmp(&(
            y.pid,
            y.tid,
            y.start_ns,
            std::cmp::Reverse(y.dur_ns),
        ))
    });
    let mut self_ns: Vec<i64> = ops.iter().map(|o| o.dur_ns).collect();
    let mut stack: Vec<usize> = Vec::new();
    for i in order {
        let o = &ops[i];
        while let Some(&top) = stack.last() {
            let p = &ops[top];
            let same_thread = p.pid == o.pid && p.tid == o.tid;
            if same_thread
                && o.start_ns >= p.start_ns
                && o.start_ns + o.dur_ns <= p.start_ns + p.dur_ns
            {
                break;
            }
            stack.pop();
        }
        if let Some(&parent) = stack.last() {
            self_ns[parent] -= o.dur_ns;
        }
        stack.push(i);
    }
    self_ns
}

fn operators(t: &Trace, limit: usize) -> (Vec<OperatorStat>, Vec<OperatorStat>) {
    let self_ns = self_times(&t.cpu_ops);
    let by_ext: HashMap<i64, usize> = t
        .cpu_ops
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.external_id.map(|e| (e, i)))
        .collect();
    let mut gpu_ns = vec![0i64; t.cpu_ops.len()];
    let mut gpu_n = vec![0u64; t.cpu_ops.len()];
    for g in &t.gpu_ops {
        if let Some(&i) = g.external_id.and_then(|e| by_ext.get(&e)) {
            gpu_ns[i] += g.dur_ns;
            gpu_n[i] += 1;
        }
    }
    let mut by: BTreeMap<&str, OperatorStat> = BTreeMap::new();
    for (i, o) in t.cpu_ops.iter().enumerate() {
        let s = by.entry(&o.name).or_insert_with(|| OperatorStat {
            name: o.name.clone(),
            count: 0,
            cpu_total_ns: 0,
            cpu_self_ns: 0,
            gpu_ns: 0,
            gpu_ops: 0,
            flops: None,
        });
        s.count += 1;
        s.cpu_total_ns += o.dur_ns;
        s.cpu_self_ns += self_ns[i];
        s.gpu_ns += gpu_ns[i];
        s.gpu_ops += gpu_n[i];
        if let Some(f) = o.flops {
            *s.flops.get_or_insert(0.0) += f;
        }
    }
    let all: Vec<OperatorStat> = by.into_values().collect();
    let mut by_gpu: Vec<OperatorStat> = all.iter().filter(|s| s.gpu_ns > 0).cloned().collect();
    by_gpu.sort_by(|a, b| b.gpu_ns.cmp(&a.gpu_ns).then(a.name.cmp(&b.name)));
    by_gpu.truncate(limit);
    let mut by_cpu = all;
    by_cpu.sort_by(|a, b| b.cpu_self_ns.cmp(&a.cpu_self_ns).then(a.name.cmp(&b.name)));
    by_cpu.truncate(limit);
    (by_gpu, by_cpu)
}

fn launch_stats(t: &Trace, launches: &HashMap<i64, &RuntimeCall>) -> LaunchStats {
    let mut cpu = Vec::new();
    let mut delay = Vec::new();
    let (mut short, mut rt_out, mut delay_out, mut short_cpu) = (0u64, 0u64, 0u64, 0i64);
    for g in &t.gpu_ops {
        let Some(l) = g.correlation.and_then(|c| launches.get(&c)) else {
            continue;
        };
        let d = g.start_ns - l.end_ns();
        cpu.push(l.dur_ns);
        delay.push(d);
        if l.dur_ns <= RUNTIME_CUTOFF_NS && g.dur_ns < l.dur_ns {
            short += 1;
            short_cpu += l.dur_ns;
        }
        if l.dur_ns > RUNTIME_CUTOFF_NS {
            rt_out += 1;
        }
        if d > LAUNCH_DELAY_CUTOFF_NS {
            delay_out += 1;
        }
    }
    cpu.sort_unstable();
    delay.sort_unstable();
    let kernels: Vec<&GpuOp> = t
        .gpu_ops
        .iter()
        .filter(|o| o.class != OpClass::Memory)
        .collect();
    let ksum: i64 = kernels.iter().map(|k| k.dur_ns).sum();
    let small: Vec<&&GpuOp> = kernels
        .iter()
        .filter(|k| k.dur_ns < SHORT_KERNEL_NS)
        .collect();
    LaunchStats {
        launches: cpu.len() as u64,
        short_kernels: short,
        runtime_outliers: rt_out,
        launch_delay_outliers: delay_out,
        cpu_launch_median_ns: median(&cpu),
        cpu_launch_p90_ns: p90(&cpu),
        launch_delay_median_ns: median(&delay),
        launch_delay_p90_ns: p90(&delay),
        launch_delay_max_ns: delay.last().copied(),
        kernels_under_5us: small.len() as u64,
        kernels_under_5us_time_pct: pct(small.iter().map(|k| k.dur_ns).sum(), ksum),
        kernels_under_5us_count_pct: if kernels.is_empty() {
            0.0
        } else {
            100.0 * small.len() as f64 / kernels.len() as f64
        },
        short_kernels_cpu_ns: short_cpu,
    }
}

fn is_sync(name: &str) -> bool {
    SYNC_CALLS.contains(&name)
}

fn steps(t: &Trace, by_corr: &HashMap<i64, Vec<&GpuOp>>, limit: usize) -> Steps {
    let mut out = Vec::new();
    for s in &t.steps {
        let (s0, s1) = (s.start_ns, s.start_ns + s.dur_ns);
        let inside = |r: &&RuntimeCall| r.pid == s.pid && r.start_ns >= s0 && r.end_ns() <= s1;
        let mut ops: Vec<&GpuOp> = Vec::new();
        let mut syncs = 0;
        for r in t.runtime.iter().filter(inside) {
            if let Some(v) = r.correlation.and_then(|c| by_corr.get(&c)) {
                ops.extend(v.iter().copied());
            }
            if is_sync(&r.name) {
                syncs += 1;
            }
        }
        out.push(StepStat {
            name: s.name.clone(),
            cpu_start_ns: s0,
            cpu_ns: s.dur_ns,
            gpu_ops: ops.len() as u64,
            gpu_busy_ns: total(&intervals(ops.into_iter())),
            sync_calls: syncs,
        });
    }
    let mut cpu: Vec<i64> = out.iter().map(|s| s.cpu_ns).collect();
    let mut gpu: Vec<i64> = out.iter().map(|s| s.gpu_busy_ns).collect();
    cpu.sort_unstable();
    gpu.sort_unstable();
    let count = out.len() as u64;
    out.truncate(limit);
    Steps {
        count,
        cpu_median_ns: median(&cpu),
        gpu_busy_median_ns: median(&gpu),
        steps: out,
    }
}

fn memory_ops(t: &Trace) -> Vec<MemoryOpStat> {
    let mut by: BTreeMap<&str, MemoryOpStat> = BTreeMap::new();
    for o in t.gpu_ops.iter().filter(|o| o.class == OpClass::Memory) {
        let s = by.entry(&o.name).or_insert_with(|| MemoryOpStat {
            name: o.name.clone(),
            count: 0,
            bytes: 0.0,
            total_ns: 0,
            gb_per_s: 0.0,
        });
        s.count += 1;
        s.bytes += o.bytes.unwrap_or(0.0);
        s.total_ns += o.dur_ns;
    }
    let mut out: Vec<MemoryOpStat> = by
        .into_values()
        .map(|mut s| {
            if s.total_ns > 0 {
                s.gb_per_s = s.bytes / s.total_ns as f64;
            }
            s
        })
        .collect();
    out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    out
}

fn sync_calls(t: &Trace) -> Vec<SyncStat> {
    let mut by: BTreeMap<&str, SyncStat> = BTreeMap::new();
    for r in t.runtime.iter().filter(|r| is_sync(&r.name)) {
        let in_step = t.steps.iter().any(|s| {
            s.pid == r.pid && r.start_ns >= s.start_ns && r.end_ns() <= s.start_ns + s.dur_ns
        });
        let s = by.entry(&r.name).or_insert_with(|| SyncStat {
            name: r.name.clone(),
            count: 0,
            total_ns: 0,
            max_ns: 0,
            in_steps: 0,
        });
        s.count += 1;
        s.total_ns += r.dur_ns;
        s.max_ns = s.max_ns.max(r.dur_ns);
        s.in_steps += in_step as u64;
    }
    let mut out: Vec<SyncStat> = by.into_values().collect();
    out.sort_by_key(|s| std::cmp::Reverse(s.total_ns));
    out
}

/// Analyse one trace.
pub fn analyze_rank(t: &Trace, limits: Limits) -> RankAnalysis {
    let launches: HashMap<i64, &RuntimeCall> = t
        .runtime
        .iter()
        .filter_map(|r| r.correlation.map(|c| (c, r)))
        .collect();
    let launch_end: HashMap<i64, i64> = launches.iter().map(|(c, r)| (*c, r.end_ns())).collect();
    let mut by_corr: HashMap<i64, Vec<&GpuOp>> = HashMap::new();
    let mut by_device: BTreeMap<i64, Vec<&GpuOp>> = BTreeMap::new();
    for g in &t.gpu_ops {
        if let Some(c) = g.correlation {
            by_corr.entry(c).or_default().push(g);
        }
        by_device.entry(g.device).or_default().push(g);
    }
    let devices = by_device
        .iter()
        .map(|(d, ops)| device_analysis(t, *d, ops, &launch_end))
        .collect();
    let (by_gpu, by_cpu) = operators(t, limits.top);
    RankAnalysis {
        path: t.path.display().to_string(),
        rank: t.rank,
        events: t.events,
        devices,
        steps: steps(t, &by_corr, limits.steps),
        top_kernels: top_kernels(t, limits.top),
        top_operators_by_gpu: by_gpu,
        top_operators_by_cpu: by_cpu,
        launch_stats: launch_stats(t, &launches),
        memory_ops: memory_ops(t),
        sync_calls: sync_calls(t),
        memory_peaks: t
            .memory_peaks
            .iter()
            .map(|(d, (a, r))| MemoryPeak {
                device: *d,
                peak_allocated_bytes: *a,
                peak_reserved_bytes: *r,
            })
            .collect(),
    }
}

fn ms(ns: i64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

fn us(ns: f64) -> String {
    format!("{:.1} µs", ns / 1e3)
}

/// A finding in the one shape of the Nsight rules: severity from the share of
/// `window_ns` at stake, the evidence as one fact. A trace has no step ledger,
/// so no predicted step, columns or regions; where it is (device, rank) is the
/// caller's to say.
fn finding(
    id: &str,
    title: String,
    (time_at_stake_ns, stake): (i64, Stake),
    window_ns: i64,
    evidence: String,
    fix: &str,
) -> Finding {
    let share = pct(time_at_stake_ns, window_ns);
    Finding {
        id: id.into(),
        title,
        severity: Severity::from_share(share),
        time_at_stake_ns,
        share_pct: share,
        stake,
        evidence: vec![evidence],
        fix: fix.into(),
        ..Finding::default()
    }
}

/// Findings for one rank.
fn rank_findings(r: &RankAnalysis) -> Vec<Finding> {
    let mut out = Vec::new();
    // The device doing the most work frames the shares.
    let Some(dev) = r.devices.iter().max_by_key(|d| d.busy_ns) else {
        return out;
    };
    let window = dev.window_ns;
    let mut push =
        |id: &str, title: String, stake: (i64, Stake), device: i64, evidence: String, fix: &str| {
            out.push(Finding {
                device: Some(device),
                rank: r.rank,
                ..finding(id, title, stake, window, evidence, fix)
            });
        };

    let idle = &dev.idle;
    let idle_ns = dev.temporal.idle_ns;
    if idle_ns > 0 && dev.temporal.idle_pct >= 1.0 {
        let host_bound = idle.host_wait_ns * 2 >= idle_ns;
        let step_note = match (r.steps.cpu_median_ns, r.steps.gpu_busy_median_ns) {
            (Some(c), Some(g)) if c > 0.0 => format!(
                "; median step: {} on the CPU, {} of GPU work ({:.1} %)",
                ms(c as i64),
                ms(g as i64),
                100.0 * g / c
            ),
            _ => String::new(),
        };
        let (id, title, fix) = if host_bound {
            (
                "host_bound",
                format!(
                    "GPU {} idle {:.1} % of the window, mostly waiting for the host to enqueue work",
                    dev.device, dev.temporal.idle_pct
                ),
                "The CPU does not launch work fast enough. Find what the host does between steps (data \
                 loading, Python overhead, logging, .item()/.cpu() syncs): move data loading to DataLoader workers \
                 with pin_memory, remove per-step host syncs, batch small operations, or capture the step with \
                 CUDA Graphs / torch.compile(mode=\"reduce-overhead\").",
            )
        } else {
            (
                "gpu_idle",
                format!(
                    "GPU {} idle {:.1} % of the window",
                    dev.device, dev.temporal.idle_pct
                ),
                "The GPU had queued work but waited: look for cross-stream dependencies, event waits and \
                 synchronisations near the largest gaps.",
            )
        };
        push(
            id,
            title,
            (idle_ns - idle.kernel_wait_ns, Stake::GpuIdle),
            dev.device,
            format!(
                "idle {} of {} ({} gaps): host wait {}, other wait {}, kernel wait {}; {} gaps over 1 ms totalling \
                 {}, largest {} at {} ns{}",
                ms(idle_ns),
                ms(window),
                idle.gaps,
                ms(idle.host_wait_ns),
                ms(idle.other_wait_ns),
                ms(idle.kernel_wait_ns),
                idle.gaps_over_1ms,
                ms(idle.gaps_over_1ms_ns),
                ms(idle.largest_gap_ns),
                idle.largest_gap_start_ns,
                step_note
            ),
            fix,
        );
    }

    let ls = &r.launch_stats;
    if ls.short_kernels > 0 {
        push(
            "short_kernels",
            format!(
                "{} GPU operations ran shorter than their CPU launch ({} kernels under 5 µs, {:.1} % of kernel time)",
                ls.short_kernels, ls.kernels_under_5us, ls.kernels_under_5us_time_pct
            ),
            (ls.short_kernels_cpu_ns, Stake::Estimate),
            dev.device,
            format!(
                "{} launches matched; median launch call {}, p90 {}; the host spent {} launching work that ran for \
                 less time than the launch took",
                ls.launches,
                ls.cpu_launch_median_ns.map(us).unwrap_or_default(),
                ls.cpu_launch_p90_ns
                    .map(|v| us(v as f64))
                    .unwrap_or_default(),
                ms(ls.short_kernels_cpu_ns)
            ),
            "Fuse small operations (torch.compile, fused optimizers such as Adam(fused=True), foreach ops), \
             use larger batches, or capture repeated launch sequences with CUDA Graphs.",
        );
    }
    if ls.launch_delay_outliers > 0 {
        push(
            "launch_delay",
            format!(
                "{} GPU operations started more than 100 µs after their launch returned",
                ls.launch_delay_outliers
            ),
            (0, Stake::None),
            dev.device,
            format!(
                "launch delay median {}, p90 {}, max {}",
                ls.launch_delay_median_ns.map(us).unwrap_or_default(),
                ls.launch_delay_p90_ns
                    .map(|v| us(v as f64))
                    .unwrap_or_default(),
                ls.launch_delay_max_ns
                    .map(|v| us(v as f64))
                    .unwrap_or_default()
            ),
            "The GPU queue was already full (the CPU runs ahead, which is healthy) or the operation waited on \
             another stream; check the stream dependencies only if the GPU is also idle.",
        );
    }

    for d in &r.devices {
        if let Some(o) = &d.overlap {
            let exposed = d.temporal.communication_exposed_ns;
            push(
                "exposed_communication",
                format!(
                    "GPU {}: {:.1} % of NCCL time overlaps compute; {} of communication is exposed",
                    d.device,
                    o.overlap_pct,
                    ms(exposed)
                ),
                (exposed, Stake::Estimate),
                d.device,
                format!(
                    "NCCL union {}, overlapped with compute {}, exposed {} ({:.1} % of the window)",
                    ms(o.communication_ns),
                    ms(o.overlapped_ns),
                    ms(exposed),
                    d.temporal.communication_exposed_pct
                ),
                "Overlap gradient all-reduce with backward (DDP bucket_cap_mb, FSDP prefetch), avoid \
                 synchronisations that serialise communication, and check the interconnect with aisp_hw_nccl.",
            );
        }
    }

    let pageable: Vec<&MemoryOpStat> = r
        .memory_ops
        .iter()
        .filter(|m| m.name.contains("Pageable"))
        .collect();
    if !pageable.is_empty() {
        let n: u64 = pageable.iter().map(|m| m.count).sum();
        let t: i64 = pageable.iter().map(|m| m.total_ns).sum();
        let b: f64 = pageable.iter().map(|m| m.bytes).sum();
        push(
            "pageable_memcpy",
            format!("{n} copies use pageable host memory"),
            (t, Stake::Estimate),
            dev.device,
            format!(
                "{n} copies, {:.0} bytes, {} on the GPU ({})",
                b,
                ms(t),
                pageable
                    .iter()
                    .map(|m| format!("{} ×{}", m.name, m.count))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "Pageable copies are staged and synchronous: allocate host tensors with pin_memory() (DataLoader \
             pin_memory=True) and copy with non_blocking=True.",
        );
    }

    let in_steps: u64 = r.sync_calls.iter().map(|s| s.in_steps).sum();
    if in_steps > 0 {
        let t: i64 = r.sync_calls.iter().map(|s| s.total_ns).sum();
        // GPU time at stake, never the host's blocked time: a sync costs the GPU
        // only the idle time it leaves behind, so the stake is at most the
        // device's idle time spent waiting for the host (an upper bound).
        let stake = t.min(idle.host_wait_ns);
        push(
            "host_sync",
            format!(
                "{in_steps} synchronising calls inside profiler steps ({:.1} per step)",
                in_steps as f64 / r.steps.count.max(1) as f64
            ),
            (stake, Stake::Estimate),
            dev.device,
            format!(
                "{}; at stake: at most the GPU's idle time waiting for the host ({}), not the {} the host spent blocked",
                r.sync_calls
                    .iter()
                    .map(|s| {
                        format!(
                            "{} ×{} ({} in steps, {})",
                            s.name,
                            s.count,
                            s.in_steps,
                            ms(s.total_ns)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                ms(idle.host_wait_ns),
                ms(t)
            ),
            "Each synchronisation stops the CPU from running ahead of the GPU. Remove .item(), .cpu(), \
             print(tensor) and torch.cuda.synchronize() from the step, or do them every N steps.",
        );
    }
    out
}

/// Analyse several traces (one per rank) and compare them.
pub fn analyze(traces: &[Trace], limits: Limits) -> TraceAnalysis {
    let ranks: Vec<RankAnalysis> = traces.iter().map(|t| analyze_rank(t, limits)).collect();
    let mut findings: Vec<Finding> = ranks.iter().flat_map(rank_findings).collect();
    let cross_rank = (ranks.len() > 1).then(|| {
        let lines: Vec<RankLine> = ranks
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let sum = |f: &dyn Fn(&DeviceAnalysis) -> i64| r.devices.iter().map(f).sum::<i64>();
                RankLine {
                    index: i as u64,
                    rank: r.rank,
                    compute_ns: sum(&|d| d.temporal.compute_ns),
                    communication_exposed_ns: sum(&|d| d.temporal.communication_exposed_ns),
                    idle_ns: sum(&|d| d.temporal.idle_ns),
                    step_cpu_median_ns: r.steps.cpu_median_ns,
                }
            })
            .collect();
        let max = lines.iter().map(|l| l.compute_ns).max().unwrap_or(0);
        let min = lines.iter().map(|l| l.compute_ns).min().unwrap_or(0);
        let slowest = lines
            .iter()
            .max_by_key(|l| l.compute_ns)
            .map(|l| l.index)
            .unwrap_or(0);
        CrossRank {
            ranks: lines,
            compute_imbalance_pct: pct(max - min, max),
            slowest_index: slowest,
        }
    });
    if let Some(c) = &cross_rank
        && c.compute_imbalance_pct >= 5.0
    {
        let slow = &c.ranks[c.slowest_index as usize];
        let window = ranks[c.slowest_index as usize]
            .devices
            .iter()
            .map(|d| d.window_ns)
            .max()
            .unwrap_or(0);
        let stake = c.ranks.iter().map(|l| l.compute_ns).max().unwrap_or(0)
            - c.ranks.iter().map(|l| l.compute_ns).min().unwrap_or(0);
        let evidence = c
            .ranks
            .iter()
            .map(|l| {
                format!(
                    "trace {} (rank {}): compute {}, exposed communication {}, idle {}",
                    l.index,
                    l.rank.map(|r| r.to_string()).unwrap_or_else(|| "?".into()),
                    ms(l.compute_ns),
                    ms(l.communication_exposed_ns),
                    ms(l.idle_ns)
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        findings.push(Finding {
            rank: slow.rank,
            ..finding(
                "rank_imbalance",
                format!(
                    "Compute time differs by {:.1} % across ranks; the others wait for the slowest at each collective",
                    c.compute_imbalance_pct
                ),
                (stake, Stake::Estimate),
                window,
                evidence,
                "Balance the work per rank (uneven batches, sequence lengths or pipeline stages), and check \
                 that every GPU runs at the same clocks (aisp_gpu_clocks) and none is throttled.",
            )
        });
    }
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.time_at_stake_ns.cmp(&a.time_at_stake_ns))
    });
    TraceAnalysis {
        traces: ranks,
        cross_rank,
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, class: OpClass, stream: i64, start: i64, dur: i64, corr: i64) -> GpuOp {
        GpuOp {
            name: name.into(),
            class,
            device: 0,
            stream,
            start_ns: start,
            dur_ns: dur,
            correlation: Some(corr),
            external_id: None,
            bytes: None,
        }
    }

    fn call(corr: i64, start: i64, dur: i64) -> RuntimeCall {
        RuntimeCall {
            name: "cudaLaunchKernel".into(),
            pid: 1,
            tid: 1,
            start_ns: start,
            dur_ns: dur,
            correlation: Some(corr),
        }
    }

    /// A hand-built timeline whose every number is checkable by hand.
    #[test]
    fn breakdown_idle_and_overlap_on_a_small_timeline() {
        let t = Trace {
            gpu_ops: vec![
                op("gemm", OpClass::Compute, 7, 0, 100, 1),
                // NCCL overlaps the gemm by 50, then runs 50 alone.
                op(
                    "ncclDevKernel_AllReduce",
                    OpClass::Communication,
                    17,
                    50,
                    100,
                    2,
                ),
                // 10 ns after the NCCL kernel: kernel wait.
                op("relu", OpClass::Compute, 7, 160, 40, 3),
                // Gap 200..1200: launched at 1100-1150 (after the gap began): host wait.
                op(
                    "Memcpy HtoD (Pinned -> Device)",
                    OpClass::Memory,
                    7,
                    1200,
                    100,
                    4,
                ),
                // Gap 1300..1400: launched long before: other wait.
                op("gemm", OpClass::Compute, 7, 1400, 100, 5),
            ],
            runtime: vec![
                call(1, -50, 10),
                call(2, -40, 10),
                call(3, 100, 10),
                call(4, 1100, 50),
                call(5, 150, 60),
            ],
            ..Trace::default()
        };
        let r = analyze_rank(&t, Limits::default());
        let d = &r.devices[0];
        assert_eq!(
            (d.window_start_ns, d.window_end_ns, d.window_ns),
            (0, 1500, 1500)
        );
        assert_eq!(d.busy_ns, 150 + 40 + 100 + 100);
        assert_eq!(d.temporal.compute_ns, 100 + 40 + 100);
        assert_eq!(d.temporal.communication_exposed_ns, 50);
        assert_eq!(d.temporal.memory_exposed_ns, 100);
        assert_eq!(d.temporal.idle_ns, 1500 - 390);
        assert_eq!(d.idle.gaps, 3);
        assert_eq!(d.idle.kernel_wait_ns, 10);
        assert_eq!(d.idle.host_wait_ns, 1000);
        assert_eq!(d.idle.other_wait_ns, 100);
        assert_eq!(d.idle.largest_gap_ns, 1000);
        assert_eq!(d.idle.largest_gap_start_ns, 200);
        let o = d.overlap.as_ref().unwrap();
        assert_eq!(
            (o.communication_ns, o.overlapped_ns, o.overlap_pct),
            (100, 50, 50.0)
        );
        assert_eq!(d.kernels, 4);
        assert_eq!(d.memcpys, 1);
        // Launch delays: 40, 80, 50, 50, 1190.
        let ls = &r.launch_stats;
        assert_eq!(ls.launches, 5);
        assert_eq!(ls.launch_delay_median_ns, Some(50.0));
        assert_eq!(ls.launch_delay_max_ns, Some(1190));
        assert_eq!(ls.kernels_under_5us, 4);
        // GPU < CPU only for none: every op here runs longer than its launch call.
        assert_eq!(ls.short_kernels, 0);
        let top = &r.top_kernels[0];
        assert_eq!(
            (top.name.as_str(), top.count, top.total_ns),
            ("gemm", 2, 200)
        );
    }

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median(&[1, 2, 3, 10]), Some(2.5));
        assert_eq!(median(&[5]), Some(5.0));
        assert_eq!(median(&[]), None);
        assert_eq!(p90(&(1..=10).collect::<Vec<_>>()), Some(9));
        assert_eq!(p90(&[7]), Some(7));
        assert_eq!(Severity::from_share(0.5), Severity::Info);
        assert_eq!(Severity::from_share(40.0), Severity::Critical);
    }

    #[test]
    fn self_time_subtracts_nested_operators_on_the_same_thread() {
        let op = |name: &str, tid: i64, s: i64, d: i64| CpuOp {
            name: name.into(),
            pid: 1,
            tid,
            start_ns: s,
            dur_ns: d,
            external_id: None,
            flops: None,
        };
        let ops = vec![
            op("linear", 1, 0, 100),
            op("addmm", 1, 10, 50),
            op("copy", 1, 20, 10),
            op("other_thread", 2, 10, 50),
            op("after", 1, 150, 10),
        ];
        assert_eq!(self_times(&ops), vec![50, 40, 10, 50, 10]);
    }
}
