//! Rank digests from PyTorch profiler (Kineto) traces, so that per-rank
//! traces get the same cross-rank answers as Nsight Systems exports.
//!
//! What the trace allows: kernels with device, stream and exact times;
//! `ProfilerStep#N` annotations as steps, kernels attributed to a step when
//! their launching runtime call (by correlation id) starts inside it;
//! `distributedInfo.rank` as the recorded rank; `baseTimeNanoseconds` as the
//! session start (Kineto `ts` counts from it). What it lacks: hostname and
//! process-wide launch threads are not distinguished (a trace is one
//! process). Message sizes and send/recv peers come from the `record_param_comms` op that launched each
//! NCCL kernel (its `In/Out msg nelems`, `dtype` and `Rank` args).

use std::collections::{BTreeMap, HashMap};

use super::digest::{ClassRow, CollSpan, RankDigest, RankIdentity, StepRow, WindowFigures};
use crate::classify;
use crate::intervals::{self, Interval};
use crate::kineto::Trace;
use crate::kineto::trace::CommOp;
use crate::kineto::trace::OpClass;
use crate::nccl::Collective;
use crate::windows::{Window, WindowKind};

/// GPU op index → the `record_param_comms` op whose span holds the op's launching runtime call (same
/// thread; the innermost when they nest).
pub fn comm_of_kernels(t: &Trace) -> HashMap<usize, usize> {
    let mut out = HashMap::new();
    if t.comms.is_empty() {
        return out;
    }
    let launch: HashMap<i64, (i64, i64, i64)> = t
        .runtime
        .iter()
        .filter_map(|r| r.correlation.map(|c| (c, (r.pid, r.tid, r.start_ns))))
        .collect();
    let mut by_thread: HashMap<(i64, i64), Vec<usize>> = HashMap::new();
    for (i, c) in t.comms.iter().enumerate() {
        by_thread.entry((c.pid, c.tid)).or_default().push(i);
    }
    for (k, op) in t.gpu_ops.iter().enumerate() {
        if op.class != OpClass::Communication {
            continue;
        }
        let Some(&(pid, tid, at)) = op.correlation.and_then(|c| launch.get(&c)) else {
            continue;
        };
        let Some(cs) = by_thread.get(&(pid, tid)) else {
            continue;
        };
        // comms are in start order: the last one starting at or before the launch that still holds it.
        let n = cs.partition_point(|&i| t.comms[i].start_ns <= at);
        if let Some(&ci) = cs[..n]
            .iter()
            .rev()
            .find(|&&i| t.comms[i].start_ns + t.comms[i].dur_ns >= at)
        {
            out.insert(k, ci);
        }
    }
    out
}

/// Digest every device of a trace (one rank per device).
pub fn digest_trace(t: &Trace) -> Vec<RankDigest> {
    let launch: HashMap<i64, i64> = t
        .runtime
        .iter()
        .filter_map(|r| r.correlation.map(|c| (c, r.start_ns)))
        .collect();
    let pid = t.runtime.first().map_or(0, |r| r.pid);
    let comm_of = comm_of_kernels(t);
    let mut devices: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (i, op) in t.gpu_ops.iter().enumerate() {
        if op.class != OpClass::Memory {
            devices.entry(op.device).or_default().push(i);
        }
    }
    let single = devices.len() == 1;
    let mut steps_sorted: Vec<&crate::kineto::trace::CpuOp> = t.steps.iter().collect();
    steps_sorted.sort_by_key(|s| (s.start_ns, s.dur_ns));
    devices
        .into_iter()
        .enumerate()
        .map(|(i, (device, ops))| {
            let (mut compute, mut comm) = (Vec::<Interval>::new(), Vec::<Interval>::new());
            let mut coll = Vec::new();
            let mut classes: BTreeMap<&'static str, (u64, i64)> = BTreeMap::new();
            let mut sum = 0;
            for &k in &ops {
                let op = &t.gpu_ops[k];
                let iv = (op.start_ns, op.end_ns());
                sum += op.dur_ns;
                if op.class == OpClass::Communication {
                    comm.push(iv);
                    let c = comm_of.get(&k).map(|&ci| &t.comms[ci]);
                    coll.push(CollSpan {
                        kernel: None,
                        start: iv.0,
                        end: iv.1,
                        stream: op.stream,
                        kind: super::digest::p2p_direction(
                            Collective::of(&op.name),
                            c.and_then(|c| match c.collective.as_str() {
                                "send" => Some(Collective::Send),
                                "recv" | "recv_anysource" => Some(Collective::Recv),
                                _ => None,
                            }),
                        ),
                        bytes: c.and_then(CommOp::bytes),
                        peer: c.and_then(CommOp::peer).and_then(|p| u32::try_from(p).ok()),
                    });
                } else {
                    compute.push(iv);
                }
                let c = classify::classify(&op.name, &op.name, [0; 3], [0; 3]).class;
                let e = classes.entry(c.as_str()).or_default();
                e.0 += 1;
                e.1 += op.dur_ns;
            }
            let compute_u = intervals::union(compute);
            let comm_u = intervals::union(comm);
            let all_u = intervals::union(compute_u.iter().chain(&comm_u).copied().collect());
            let figures = |w: Window| {
                let b = w.bounds();
                let c = intervals::clip(&compute_u, b);
                let n = intervals::clip(&comm_u, b);
                let both = intervals::length(&intervals::intersect(&c, &n));
                let nl = intervals::length(&n);
                WindowFigures {
                    window: w,
                    busy_ns: intervals::clipped_length(&all_u, b),
                    compute_ns: intervals::length(&c),
                    communication_ns: nl,
                    overlap_ns: both,
                    exposed_communication_ns: nl - both,
                }
            };
            let mut windows = Vec::new();
            if let (Some(f), Some(l)) = (all_u.first(), all_u.last()) {
                windows.push(figures(Window::new(WindowKind::Span, f.0, l.1)));
            }
            if let Some(first) = steps_sorted.first() {
                let end = steps_sorted
                    .iter()
                    .map(|s| s.start_ns + s.dur_ns)
                    .max()
                    .unwrap_or(first.start_ns);
                windows.push(figures(Window::new(WindowKind::Steps, first.start_ns, end)));
                if let Some(second) = steps_sorted.get(1) {
                    windows.push(figures(Window::new(
                        WindowKind::Steady,
                        second.start_ns,
                        end,
                    )));
                }
            }
            let steps = steps_sorted
                .iter()
                .enumerate()
                .map(|(idx, s)| {
                    let (s0, s1) = (s.start_ns, s.start_ns + s.dur_ns);
                    let (mut c, mut n) = (Vec::new(), Vec::new());
                    let mut count = 0u32;
                    for &k in &ops {
                        let op = &t.gpu_ops[k];
                        let inside = op
                            .correlation
                            .and_then(|c| launch.get(&c))
                            .is_some_and(|&ls| ls >= s0 && ls < s1);
                        if !inside {
                            continue;
                        }
                        count += 1;
                        if op.class == OpClass::Communication {
                            n.push((op.start_ns, op.end_ns()));
                        } else {
                            c.push((op.start_ns, op.end_ns()));
                        }
                    }
                    let c = intervals::union(c);
                    let n = intervals::union(n);
                    let both = intervals::length(&intervals::intersect(&c, &n));
                    let (cl, nl) = (intervals::length(&c), intervals::length(&n));
                    StepRow {
                        index: idx as u32,
                        name: s.name.clone(),
                        cpu_start_ns: s0,
                        cpu_end_ns: s1,
                        gpu_union_ns: cl + nl - both,
                        compute_ns: cl,
                        communication_ns: nl,
                        exposed_communication_ns: nl - both,
                        kernels: count,
                    }
                })
                .collect();
            let collectives = super::digest::collective_rows(coll, &compute_u);
            let mut classes: Vec<ClassRow> = classes
                .into_iter()
                .map(|(c, (n, total))| ClassRow {
                    class: c.to_string(),
                    kernels: n,
                    total_ns: total,
                })
                .collect();
            classes.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.class.cmp(&b.class)));
            RankDigest {
                identity: RankIdentity {
                    rank: i as u32,
                    rank_source: "order".into(),
                    env_rank: if single {
                        t.rank.and_then(|r| u32::try_from(r).ok())
                    } else {
                        None
                    },
                    local_rank: None,
                    world_size: t.world_size.and_then(|w| u32::try_from(w).ok()),
                    file: t.path.display().to_string(),
                    pid,
                    device,
                    hostname: None,
                    gpu: t.device_names.get(&device).cloned(),
                    utc_epoch_ns: t.base_time_ns,
                },
                kernels: ops.len() as u64,
                kernel_sum_ns: sum,
                windows,
                steps,
                collectives,
                classes,
                ledger: None,
            }
        })
        .collect()
}
