//! Is the training loop waiting on its DataLoader? From a PyTorch profiler
//! (Kineto) trace: every `next()` on a DataLoader iterator is a
//! `enumerate(DataLoader)#<iterator>.__next__` range on the loop's thread;
//! its time inside each step is time the step waited for data (the GPU had
//! nothing new to do unless work was already queued).
//!
//! The iterator's class says where batches are made: `_SingleProcessDataLoaderIter`
//! in the loop's own thread (`num_workers=0`), `_MultiProcessingDataLoaderIter`
//! in worker processes. Worker processes are not in a Kineto trace, so their
//! utilisation is inferred: when the loop waits at a `next()`, the queue of
//! prefetched batches was empty, so every worker was busy producing and the
//! workers together are slower than the loop. The measured prefetch depth is
//! how many steps found a batch ready (waited under [`READY_NS`]).
//!
//! From an Nsight Systems export ([`nsys`]) the same answer is built from what
//! that capture holds instead: the waits from DataLoader NVTX ranges or from
//! the loop thread's OS runtime queue waits, and the workers' utilisation
//! measured from the scheduler's context switches.

pub mod nsys;

use schemars::JsonSchema;
use serde::Serialize;

use crate::kineto::Trace;
use crate::kineto::trace::CpuOp;

/// A `next()` shorter than this found a batch ready.
pub const READY_NS: i64 = 200_000;
/// Waiting more than this share of the step time makes the loop loader-bound.
pub const BOUND_PCT: f64 = 10.0;

#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    #[error(
        "the trace has no DataLoader events (`enumerate(DataLoader)#...`): the loop does not iterate a torch DataLoader, or the profiler did not record CPU activity"
    )]
    NoLoader,
    #[error(
        "the trace has no steps (`ProfilerStep#N` from prof.step(), or `step_N` ranges): waits cannot be related to steps"
    )]
    NoSteps,
    #[error(
        "the export has no DataLoader NVTX ranges and no OS runtime calls on the loop's thread: the wait on data \
         cannot be measured"
    )]
    NoWaitSignal,
    #[error("cannot read the export: {0}")]
    Sql(#[from] rusqlite::Error),
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct StepWait {
    pub step: String,
    pub step_ns: i64,
    /// Time in DataLoader `next()` during the step.
    pub wait_ns: i64,
    pub wait_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct LoaderAnalysis {
    /// The iterator class (`_MultiProcessingDataLoaderIter`, `_SingleProcessDataLoaderIter`, ...).
    pub iterator: String,
    /// `workers` (multiprocessing) or `main_process` (num_workers=0).
    pub loading_in: String,
    pub steps: u64,
    pub mean_step_ns: f64,
    /// Mean time per step the loop waited on data.
    pub mean_wait_ns: f64,
    pub max_wait_ns: i64,
    /// Σ wait ÷ Σ step time, %.
    pub wait_pct: f64,
    /// Steps that found a batch ready (next() under 200 µs).
    pub ready_steps: u64,
    /// Σ of the waits: the loop's time at stake, ns.
    pub total_wait_ns: i64,
    /// `loader_bound` (waits over 10 % of step time) or `not_loader_bound`.
    pub verdict: String,
    pub verdict_reason: String,
    /// Inferred worker utilisation, with its basis.
    pub workers: String,
    /// How much faster the loader must produce batches to hide its time (step ÷ (step − wait)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loader_speedup_needed: Option<f64>,
    /// Where batches reach the GPU from: `pinned` or `pageable` (the host-to-device
    /// copies' source memory), `mixed`, or `no_copies`.
    pub h2d_copies_from: String,
    /// How deep the prefetch queue ran, or why this input cannot say.
    pub prefetch_depth: String,
    /// What the waits were measured from.
    pub wait_basis: String,
    /// The first step, left out of the figures above when it waited for the
    /// workers to start (Nsight Systems exports hold the whole run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded_first_step: Option<StepWait>,
    /// Measured running time of the loader's threads (Nsight Systems exports
    /// with context switches): worker processes, the pin-memory thread, the loop.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadUse>,
    pub fix: Vec<String>,
    pub per_step: Vec<StepWait>,
    /// What the figures above could not separate (e.g. several training processes in one export).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One thread's (or worker process's) running time over the measured steps.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ThreadUse {
    /// `worker` (a DataLoader worker process, all its threads), `pin_memory`
    /// or `loop` (the thread that iterates the loader).
    pub role: String,
    pub pid: i64,
    /// Thread id (the process id for a worker process).
    pub tid: i64,
    pub name: String,
    /// Time on a CPU within the measured steps, ns.
    pub running_ns: i64,
    /// running_ns ÷ the measured steps' span, %.
    pub running_pct: f64,
}

/// Analyse a Kineto trace's DataLoader waits.
pub fn analyze_kineto(trace: &Trace) -> Result<LoaderAnalysis, LoaderError> {
    let nexts: Vec<&CpuOp> = trace
        .annotations
        .iter()
        .chain(&trace.cpu_ops)
        .filter(|o| o.name.starts_with("enumerate(DataLoader)#"))
        .collect();
    if nexts.is_empty() {
        return Err(LoaderError::NoLoader);
    }
    let iterator = nexts[0]
        .name
        .trim_start_matches("enumerate(DataLoader)#")
        .trim_end_matches(".__next__")
        .to_string();
    let loop_tid = nexts[0].tid;
    let steps: Vec<&CpuOp> = if trace.steps.is_empty() {
        trace
            .annotations
            .iter()
            .filter(|a| {
                a.tid == loop_tid
                    && a.name
                        .strip_prefix("step_")
                        .is_some_and(|d| d.chars().all(|c| c.is_ascii_digit()))
            })
            .collect()
    } else {
        trace.steps.iter().filter(|s| s.tid == loop_tid).collect()
    };
    if steps.is_empty() {
        return Err(LoaderError::NoSteps);
    }
    let waits: Vec<(i64, i64)> = nexts
        .iter()
        .map(|o| (o.start_ns, o.start_ns + o.dur_ns))
        .collect();
    let per_step: Vec<StepWait> = steps
        .iter()
        .map(|s| step_wait(&s.name, s.start_ns, s.start_ns + s.dur_ns, &waits))
        .collect();
    let multi = iterator.contains("MultiProcessing");
    // The pin-memory thread's work is not recorded by the profiler; the
    // copies' names say where their source was (`Memcpy HtoD (Pinned -> Device)`).
    let (mut pinned, mut pageable) = (0, 0);
    for o in trace
        .gpu_ops
        .iter()
        .filter(|o| o.name.starts_with("Memcpy HtoD"))
    {
        if o.name.contains("Pinned") {
            pinned += 1;
        } else if o.name.contains("Pageable") {
            pageable += 1;
        }
    }
    Ok(assemble(Evidence {
        iterator,
        multi,
        per_step,
        excluded_first_step: None,
        h2d_copies_from: copies_from(pinned, pageable),
        wait_basis: "Kineto `enumerate(DataLoader)#...__next__` ranges on the loop's thread".into(),
        threads: Vec::new(),
        prefetch_unseen: "not in a Kineto trace: the worker processes and their queue are not traced",
        notes: Vec::new(),
    }))
}

/// `pinned`, `pageable`, `mixed` or `no_copies`: where the host-to-device copies read from.
pub(crate) fn copies_from(pinned: u64, pageable: u64) -> &'static str {
    match (pinned, pageable) {
        (0, 0) => "no_copies",
        (_, 0) => "pinned",
        (0, _) => "pageable",
        _ => "mixed",
    }
}

/// The wait inside `[start, end)`: the union of the wait intervals clipped to it.
pub(crate) fn step_wait(name: &str, start: i64, end: i64, waits: &[(i64, i64)]) -> StepWait {
    let w = union_within(waits, start, end);
    let dur = end - start;
    StepWait {
        step: name.to_string(),
        step_ns: dur,
        wait_ns: w,
        wait_pct: if dur > 0 {
            100.0 * w as f64 / dur as f64
        } else {
            0.0
        },
    }
}

/// Total length of the union of `iv` clipped to `[s, e)`.
pub(crate) fn union_within(iv: &[(i64, i64)], s: i64, e: i64) -> i64 {
    let mut parts: Vec<(i64, i64)> = iv
        .iter()
        .filter_map(|&(a, b)| {
            let (a, b) = (a.max(s), b.min(e));
            (a < b).then_some((a, b))
        })
        .collect();
    parts.sort_unstable();
    let (mut total, mut cur) = (0, None::<(i64, i64)>);
    for (a, b) in parts {
        match cur {
            Some((x, y)) if a <= y => cur = Some((x, y.max(b))),
            Some((x, y)) => {
                total += y - x;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    total + cur.map(|(x, y)| y - x).unwrap_or(0)
}

/// A worker process busier than this (% of the steps' span) was producing
/// all the time it could.
pub const WORKER_SATURATED_PCT: f64 = 80.0;

/// What a source knows, before the verdict.
pub(crate) struct Evidence {
    pub iterator: String,
    /// Batches made in worker processes.
    pub multi: bool,
    /// The steps the figures cover.
    pub per_step: Vec<StepWait>,
    pub excluded_first_step: Option<StepWait>,
    pub h2d_copies_from: &'static str,
    pub wait_basis: String,
    /// Measured thread running times (empty: not measured).
    pub threads: Vec<ThreadUse>,
    /// Why the queue's depth is not seen in this source.
    pub prefetch_unseen: &'static str,
    pub notes: Vec<String>,
}

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

/// The verdict, the workers' state and the fix from the evidence.
pub(crate) fn assemble(e: Evidence) -> LoaderAnalysis {
    let per_step = e.per_step;
    let n = per_step.len().max(1) as f64;
    let total_step: i64 = per_step.iter().map(|s| s.step_ns).sum();
    let total_wait: i64 = per_step.iter().map(|s| s.wait_ns).sum();
    let wait_pct = if total_step > 0 {
        100.0 * total_wait as f64 / total_step as f64
    } else {
        0.0
    };
    let ready = per_step.iter().filter(|s| s.wait_ns < READY_NS).count() as u64;
    let multi = e.multi;
    let pin = e.h2d_copies_from;
    let bound = wait_pct > BOUND_PCT;
    let mean_step = total_step as f64 / n;
    let mean_wait = total_wait as f64 / n;
    let speedup = (bound && mean_step > mean_wait).then(|| mean_step / (mean_step - mean_wait));
    let workers_measured: Vec<&ThreadUse> =
        e.threads.iter().filter(|t| t.role == "worker").collect();
    let pin_thread = e.threads.iter().find(|t| t.role == "pin_memory");
    let steps_n = per_step.len();
    let mean_worker_pct = (!workers_measured.is_empty()).then(|| {
        workers_measured.iter().map(|t| t.running_pct).sum::<f64>() / workers_measured.len() as f64
    });
    let saturated = mean_worker_pct.map(|p| p >= WORKER_SATURATED_PCT);
    let workers = match (multi, bound, mean_worker_pct) {
        (true, _, Some(p)) => {
            let (lo, hi) = workers_measured.iter().fold((f64::MAX, f64::MIN), |(lo, hi), t| {
                (lo.min(t.running_pct), hi.max(t.running_pct))
            });
            let range = format!(
                "the {} worker processes ran {lo:.1}-{hi:.1} % of the steps' span (mean {p:.1} %, measured from \
                 context switches)",
                workers_measured.len()
            );
            if p >= WORKER_SATURATED_PCT {
                format!(
                    "saturated: {range}, so they were producing nearly all the time{}",
                    if bound {
                        format!(
                            " and together deliver a batch every {:.1} ms while the loop needs one every {:.1} ms",
                            ms(mean_step),
                            ms(mean_step - mean_wait)
                        )
                    } else {
                        String::new()
                    }
                )
            } else {
                format!(
                    "{}: {range}; they idle the rest, waiting for the next index while the queue is full",
                    if bound { "not the bottleneck" } else { "keeping up" }
                )
            }
        }
        (true, true, None) => format!(
            "saturated (inferred): {} of {steps_n} steps waited on an empty queue, so every worker was busy \
             producing and together they deliver a batch every {:.1} ms while the loop needs one every {:.1} ms",
            steps_n as u64 - ready,
            ms(mean_step),
            ms(mean_step - mean_wait)
        ),
        (true, false, None) => format!(
            "keeping up: {ready} of {steps_n} steps found a batch ready; the workers' running time is not in this \
             input, so their idle share is not measured"
        ),
        (false, _, _) => "no workers: batches are made in the loop's own thread (num_workers=0), so every load is \
                          on the critical path"
            .into(),
    };
    let mut fix = Vec::new();
    if bound {
        if multi && saturated == Some(false) {
            fix.push(format!(
                "More workers will not help: they idle {:.0} % of the time. The hand-off is the bottleneck{}: return \
                 fewer, larger tensors per batch (one contiguous array rather than many small ones), keep collate \
                 cheap, and keep other Python threads of the main process off the GIL.",
                100.0 - mean_worker_pct.unwrap_or(0.0),
                pin_thread
                    .map(|t| format!(" (the pin-memory thread ran {:.1} % of the time)", t.running_pct))
                    .unwrap_or_default()
            ));
        } else if multi {
            fix.push(format!(
                "Raise num_workers (the loader must get about {:.1}x faster; workers scale until the CPU cores or \
                 storage run out) and keep persistent_workers=True.",
                speedup.unwrap_or(1.0)
            ));
        } else {
            fix.push("Set num_workers > 0 (start with the physical cores per GPU) so that batches are made in \
                      parallel with the step."
                .into());
        }
        if saturated != Some(false) {
            fix.push(
                "Make each sample cheaper: decode and augment on the GPU (torchvision.transforms.v2 on CUDA tensors, \
                 NVIDIA DALI), cache decoded data, or use a faster format (WebDataset/shards, memory-mapped arrays)."
                    .into(),
            );
        }
        if pin == "pageable" || pin == "mixed" {
            fix.push(
                "Set pin_memory=True and copy with .cuda(non_blocking=True) so host-to-device copies overlap."
                    .into(),
            );
        }
        fix.push(
            "Raise prefetch_factor only after the workers keep up: a deeper queue hides jitter, not a slow loader."
                .into(),
        );
    }
    let excluded = e
        .excluded_first_step
        .as_ref()
        .map(|s| {
            format!(
                "; the first step ({}, {:.1} ms, {:.1} ms of it waiting) is left out: it includes the workers' start",
                s.step,
                ms(s.step_ns as f64),
                ms(s.wait_ns as f64)
            )
        })
        .unwrap_or_default();
    let verdict_reason = format!(
        "the loop waited {:.1} ms of its {:.1} ms mean step on data ({wait_pct:.1} % of {steps_n} steps, threshold \
         {BOUND_PCT} %); {ready} steps found a batch ready{excluded}",
        ms(mean_wait),
        ms(mean_step),
    );
    let idle_note = mean_worker_pct
        .filter(|p| *p < WORKER_SATURATED_PCT)
        .map(|p| {
            format!(
                "; the workers idled {:.1} % of the steps' span, when their queue was full",
                100.0 - p
            )
        })
        .unwrap_or_default();
    let prefetch_depth = if multi {
        format!(
            "{}; {ready} of {steps_n} steps found a batch ready{idle_note}",
            e.prefetch_unseen
        )
    } else {
        "no prefetch: num_workers=0 loads each batch when it is asked for".into()
    };
    LoaderAnalysis {
        iterator: e.iterator,
        loading_in: if multi { "workers" } else { "main_process" }.into(),
        steps: steps_n as u64,
        mean_step_ns: mean_step,
        mean_wait_ns: mean_wait,
        max_wait_ns: per_step.iter().map(|s| s.wait_ns).max().unwrap_or(0),
        wait_pct,
        ready_steps: ready,
        total_wait_ns: total_wait,
        verdict: if bound {
            "loader_bound"
        } else {
            "not_loader_bound"
        }
        .into(),
        verdict_reason,
        workers,
        loader_speedup_needed: speedup,
        h2d_copies_from: pin.into(),
        prefetch_depth,
        wait_basis: e.wait_basis,
        excluded_first_step: e.excluded_first_step,
        threads: e.threads,
        fix,
        per_step,
        notes: e.notes,
    }
}
