//! The measurement loop: warm up, then repeat until a time budget or a count,
//! timing each repetition with CUDA events around the measured work only.
//! Before each repetition (outside the events) the caller may reset state and
//! the harness flushes L2, unless the benchmark measures caches.

use aisp_base::Cancel;
use std::time::{Duration, Instant};

use super::BenchError;
use super::cuda::Event;
use super::device::Gpu;

/// How to repeat one variant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// Warm-up runs (at least this many, and at least `warmup_min_ms` of them).
    pub warmup: u32,
    pub warmup_min_ms: f64,
    /// At least this many timed repetitions...
    pub min_reps: u32,
    /// ...then stop once the budget is spent...
    pub budget: Duration,
    /// ...or at this many.
    pub max_reps: u32,
    /// Read a 4x-L2 buffer before each repetition.
    pub flush_l2: bool,
    /// Units of work per repetition (e.g. launches); samples are divided by it.
    pub per_rep: u32,
}

impl Plan {
    pub fn with_budget(budget: Duration) -> Plan {
        Plan {
            warmup: 3,
            warmup_min_ms: 20.0,
            min_reps: 10,
            budget,
            max_reps: 2000,
            flush_l2: true,
            per_rep: 1,
        }
    }
}

/// Which part of a repetition a step callback is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Untimed set-up before a repetition (poison outputs, reset state).
    Before,
    /// The measured work, enqueued between the two events.
    Body,
}

/// Run `step(gpu, Phase::Body)` under `plan`, with `step(gpu, Phase::Before)`
/// before each repetition (untimed); returns one sample per repetition in
/// milliseconds per unit of work. Stops with [`BenchError::Cancelled`] when
/// `cancelled` says so.
pub fn measure(
    gpu: &Gpu,
    plan: &Plan,
    cancelled: Cancel<'_>,
    step: &mut dyn FnMut(&Gpu, Phase) -> Result<(), BenchError>,
) -> Result<Vec<f64>, BenchError> {
    let start = Event::new(&gpu.ctx)?;
    let end = Event::new(&gpu.ctx)?;
    let mut one = |gpu: &Gpu| -> Result<f64, BenchError> {
        step(gpu, Phase::Before)?;
        if plan.flush_l2 {
            gpu.flush_l2()?;
        }
        start.record(&gpu.stream)?;
        step(gpu, Phase::Body)?;
        end.record(&gpu.stream)?;
        start.elapsed_ms(&end)
    };
    // Warm-up: module loads, first-touch page mapping, library heuristics and
    // clocks ramping up all land here, not in the samples.
    let mut warm_ms = 0.0;
    let mut warm_runs = 0;
    while warm_runs < plan.warmup || (warm_ms < plan.warmup_min_ms && warm_runs < 50) {
        if cancelled() {
            return Err(BenchError::Cancelled);
        }
        warm_ms += one(gpu)?;
        warm_runs += 1;
    }
    let began = Instant::now();
    let per = plan.per_rep.max(1) as f64;
    let mut samples = Vec::new();
    loop {
        if cancelled() {
            return Err(BenchError::Cancelled);
        }
        samples.push(one(gpu)? / per);
        let n = samples.len() as u32;
        if n >= plan.max_reps || (n >= plan.min_reps && began.elapsed() >= plan.budget) {
            break;
        }
    }
    Ok(samples)
}

/// The minimum repetitions scaled down for slow variants: at least 5, so a
/// 700 ms naive GEMM does not take 7 s when the budget is 1 s.
pub fn min_reps_for(one_rep_ms: f64, budget: Duration, wanted: u32) -> u32 {
    let fit = (budget.as_secs_f64() * 1000.0 / one_rep_ms.max(1e-6)).floor() as u32;
    wanted.min(fit.max(5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_variants_get_fewer_but_at_least_five_reps() {
        assert_eq!(min_reps_for(1.0, Duration::from_secs(1), 10), 10);
        assert_eq!(min_reps_for(150.0, Duration::from_secs(1), 10), 6);
        assert_eq!(min_reps_for(700.0, Duration::from_secs(1), 10), 5);
        let p = Plan::with_budget(Duration::from_secs(2));
        assert!(p.flush_l2 && p.min_reps == 10 && p.per_rep == 1);
    }
}
