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
    pub fix: Vec<String>,
    pub per_step: Vec<StepWait>,
}

fn overlap(iv: &[&CpuOp], s: i64, e: i64) -> i64 {
    let mut parts: Vec<(i64, i64)> = iv
        .iter()
        .filter_map(|o| {
            let (a, b) = (o.start_ns.max(s), (o.start_ns + o.dur_ns).min(e));
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
    let per_step: Vec<StepWait> = steps
        .iter()
        .map(|s| {
            let w = overlap(&nexts, s.start_ns, s.start_ns + s.dur_ns);
            StepWait {
                step: s.name.clone(),
                step_ns: s.dur_ns,
                wait_ns: w,
                wait_pct: if s.dur_ns > 0 {
                    100.0 * w as f64 / s.dur_ns as f64
                } else {
                    0.0
                },
            }
        })
        .collect();
    let n = per_step.len() as f64;
    let total_step: i64 = per_step.iter().map(|s| s.step_ns).sum();
    let total_wait: i64 = per_step.iter().map(|s| s.wait_ns).sum();
    let wait_pct = if total_step > 0 {
        100.0 * total_wait as f64 / total_step as f64
    } else {
        0.0
    };
    let ready = per_step.iter().filter(|s| s.wait_ns < READY_NS).count() as u64;
    let multi = iterator.contains("MultiProcessing");
    // The pin-memory thread's work is not recorded by the profiler; the
    // copies' names say where their source was (`Memcpy HtoD (Pinned -> Device)`).
    let pin = {
        let h2d = trace
            .gpu_ops
            .iter()
            .filter(|o| o.name.starts_with("Memcpy HtoD"));
        let (mut pinned, mut pageable) = (0, 0);
        for o in h2d {
            if o.name.contains("Pinned") {
                pinned += 1;
            } else if o.name.contains("Pageable") {
                pageable += 1;
            }
        }
        match (pinned, pageable) {
            (0, 0) => "no_copies",
            (_, 0) => "pinned",
            (0, _) => "pageable",
            _ => "mixed",
        }
    };
    let bound = wait_pct > BOUND_PCT;
    let mean_step = total_step as f64 / n;
    let mean_wait = total_wait as f64 / n;
    let speedup = (bound && mean_step > mean_wait).then(|| mean_step / (mean_step - mean_wait));
    let workers = match (multi, bound) {
        (true, true) => format!(
            "saturated (inferred): {} of {} steps waited on an empty queue, so every worker was busy producing and \
             together they deliver a batch every {:.1} ms while the loop needs one every {:.1} ms",
            per_step.len() as u64 - ready,
            per_step.len(),
            mean_step / 1e6,
            (mean_step - mean_wait) / 1e6
        ),
        (true, false) => format!(
            "keeping up: {ready} of {} steps found a batch ready; worker processes are not in a Kineto trace, so \
             their idle share is not measured",
            per_step.len()
        ),
        (false, _) => {
            "no workers: batches are made in the loop's own thread (num_workers=0), so every load is on the \
             critical path"
                .into()
        }
    };
    let mut fix = Vec::new();
    if bound {
        if multi {
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
        fix.push(
            "Make each sample cheaper: decode and augment on the GPU (torchvision.transforms.v2 on CUDA tensors, \
             NVIDIA DALI), cache decoded data, or use a faster format (WebDataset/shards, memory-mapped arrays)."
                .into(),
        );
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
    let verdict_reason = format!(
        "the loop waited {:.1} ms of its {:.1} ms mean step on data ({wait_pct:.1} % of {} steps, threshold \
         {BOUND_PCT} %); {ready} steps found a batch ready",
        mean_wait / 1e6,
        mean_step / 1e6,
        per_step.len()
    );
    Ok(LoaderAnalysis {
        iterator,
        loading_in: if multi { "workers" } else { "main_process" }.into(),
        steps: per_step.len() as u64,
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
        fix,
        per_step,
    })
}
