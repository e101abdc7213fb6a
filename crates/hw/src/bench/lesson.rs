//! The shape of a lesson (a target with a baseline and optimized variants),
//! the result row every measurement produces, and the driver that runs a
//! lesson's variants: check first, then time, with telemetry.

use aisp_base::Cancel;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cuda::Event;
use super::datasheet::Datasheet;
use super::device::Gpu;
use super::roofs::Roofs;
use super::stats::{self, Summary};
use super::telemetry::{Sampler, Telemetry};
use super::timing::{self, Phase, Plan};
use super::verify::Check;
use super::{BenchError, SizeClass};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Baseline,
    Optimized,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Baseline => "baseline",
            Role::Optimized => "optimized",
        }
    }
}

/// Which measured ceiling a variant's metric is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoofKind {
    None,
    /// Device memory bandwidth (cuMemcpyDtoD, bytes read + written).
    Memory,
    /// FP32 FMA throughput (CUDA cores).
    Fp32,
    Tf32,
    Bf16,
    Fp16,
    Fp8,
    /// Host-to-device bandwidth from pinned memory.
    PcieH2d,
}

impl RoofKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RoofKind::None => "none",
            RoofKind::Memory => "memory",
            RoofKind::Fp32 => "fp32",
            RoofKind::Tf32 => "tf32",
            RoofKind::Bf16 => "bf16",
            RoofKind::Fp16 => "fp16",
            RoofKind::Fp8 => "fp8",
            RoofKind::PcieH2d => "pcie_h2d",
        }
    }
}

/// The unit a target reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// GB/s with GB = 10^9 bytes; bytes = read + written (or moved over the link).
    GbPerS,
    /// 10^12 floating-point operations per second (an FMA counts as 2).
    TflopPerS,
    /// Microseconds per step.
    UsPerStep,
}

impl Metric {
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::GbPerS => "gb_per_s",
            Metric::TflopPerS => "tflop_per_s",
            Metric::UsPerStep => "us_per_step",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct VariantSpec {
    pub name: &'static str,
    pub role: Role,
    /// What this variant does, in one sentence.
    pub what: &'static str,
    pub roof: RoofKind,
}

/// What a target needs from the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Needs {
    /// Minimum compute capability (major, minor).
    pub min_cc: (u32, u32),
    pub cublas: bool,
    pub gpus: u32,
}

impl Needs {
    pub const ANY: Needs = Needs {
        min_cc: (7, 0),
        cublas: false,
        gpus: 1,
    };
}

#[derive(Debug, Clone, Copy)]
pub struct TargetSpec {
    /// snake_case id, e.g. `memory_coalescing`.
    pub id: &'static str,
    pub title: &'static str,
    /// The lesson in one sentence.
    pub lesson: &'static str,
    /// The reference book's chapter this lesson comes from.
    pub chapter: &'static str,
    pub metric: Metric,
    pub variants: &'static [VariantSpec],
    pub needs: Needs,
    /// Set when the optimization is not expected to win on every GPU: why.
    pub informational: Option<&'static str>,
    /// Said with a result whose optimized variant does not beat the baseline.
    pub when_no_win: &'static str,
}

/// Work done by one unit of a variant (what the metric divides by time).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Work {
    pub bytes: f64,
    pub flops: f64,
}

/// Knobs for one run of the lessons.
pub struct RunEnv<'a> {
    pub size: SizeClass,
    /// Time budget per variant's timed repetitions.
    pub budget: Duration,
    pub seed: u32,
    pub cancelled: Cancel<'a>,
    pub progress: &'a dyn Fn(&str),
    pub roofs: &'a Roofs,
    pub datasheet: Option<&'a Datasheet>,
    pub nvml: Option<std::sync::Arc<nvml_wrapper::Nvml>>,
}

/// A lesson's implementation. Variant indices follow `spec().variants`.
pub trait Lesson {
    fn spec(&self) -> &'static TargetSpec;
    /// Allocate buffers and draw inputs; returns the size in words.
    fn setup(&mut self, gpu: &Gpu, env: &RunEnv) -> Result<String, BenchError>;
    /// Why variant `v` cannot run on this machine, if it cannot.
    fn unavailable(&self, _gpu: &Gpu, _v: usize) -> Option<String> {
        None
    }
    /// Work per unit (per step when `plan().per_rep > 1`).
    fn work(&self, v: usize) -> Work;
    fn plan(&self, _v: usize, base: Plan) -> Plan {
        base
    }
    /// Untimed: poison outputs, reset state. Runs before the checked run and
    /// before every timed repetition.
    fn prepare(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError>;
    /// The measured work (enqueue only; the harness synchronises).
    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<(), BenchError>;
    /// Compare the output of one prepare + run with the CPU reference.
    fn check(&mut self, gpu: &Gpu, v: usize) -> Result<Check, BenchError>;
    /// Extra facts for the result (registers, occupancy, calibration, ...).
    fn details(&self, _gpu: &Gpu, _v: usize) -> Value {
        Value::Null
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Checked and timed.
    Ok,
    /// Failed its check or a CUDA call: never timed.
    Failed,
    /// Not runnable on this machine (reason in `failure`).
    Skipped,
}

/// One measured (or failed, or skipped) variant. Also a row of the store
/// table `benchmark_results`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct VariantResult {
    pub target: String,
    pub variant: String,
    pub role: Role,
    pub status: Status,
    /// Passed its check against the CPU reference before it was timed.
    pub verified: bool,
    /// Why it failed or was skipped.
    pub failure: Option<String>,
    pub median_ms: Option<f64>,
    pub p10_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub min_ms: Option<f64>,
    pub cv_pct: Option<f64>,
    pub repetitions: u32,
    /// `gb_per_s`, `tflop_per_s` or `us_per_step`.
    pub metric: String,
    /// The metric at the median time.
    pub value: Option<f64>,
    /// Which measured roof `pct_of_roof` refers to, and how it was measured.
    pub roof: Option<String>,
    pub roof_value: Option<f64>,
    pub pct_of_roof: Option<f64>,
    pub datasheet_value: Option<f64>,
    pub pct_of_datasheet: Option<f64>,
    /// Problem size in words (e.g. `268435456 f32 (1.07 GB read + written)`).
    pub size: String,
    pub check: Option<Check>,
    pub telemetry: Option<Telemetry>,
    /// Device memory this benchmark allocated (its buffers and library workspaces).
    pub peak_memory_bytes: Option<u64>,
    /// Facts specific to the lesson (registers, occupancy, calibration, sizes).
    pub details: serde_json::Map<String, Value>,
    /// Every sample in ms per unit (stored; left out of tool output).
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub samples_ms: Vec<f64>,
}

impl VariantResult {
    pub fn new(
        target: &str,
        variant: &str,
        role: Role,
        metric: Metric,
        size: &str,
    ) -> VariantResult {
        VariantResult {
            target: target.to_string(),
            variant: variant.to_string(),
            role,
            status: Status::Failed,
            verified: false,
            failure: None,
            median_ms: None,
            p10_ms: None,
            p90_ms: None,
            min_ms: None,
            cv_pct: None,
            repetitions: 0,
            metric: metric.as_str().to_string(),
            value: None,
            roof: None,
            roof_value: None,
            pct_of_roof: None,
            datasheet_value: None,
            pct_of_datasheet: None,
            size: size.to_string(),
            check: None,
            telemetry: None,
            peak_memory_bytes: None,
            details: serde_json::Map::new(),
            samples_ms: Vec::new(),
        }
    }

    pub fn skipped(mut self, why: impl Into<String>) -> Self {
        self.status = Status::Skipped;
        self.failure = Some(why.into());
        self
    }

    pub fn failed(mut self, why: impl Into<String>) -> Self {
        self.status = Status::Failed;
        self.failure = Some(why.into());
        self
    }

    /// Fill the timing fields, the metric, and the roof and datasheet
    /// percentages from samples (ms per unit of `work`).
    pub fn set_samples(
        &mut self,
        samples: Vec<f64>,
        metric: Metric,
        work: Work,
        roof: Option<(f64, String)>,
        datasheet: Option<f64>,
    ) {
        let Some(sum) = Summary::of(&samples) else {
            self.status = Status::Failed;
            self.failure = Some("no valid timing samples".into());
            return;
        };
        self.status = Status::Ok;
        self.median_ms = Some(sum.median_ms);
        self.p10_ms = Some(sum.p10_ms);
        self.p90_ms = Some(sum.p90_ms);
        self.min_ms = Some(sum.min_ms);
        self.cv_pct = Some(sum.cv_pct);
        self.repetitions = sum.n as u32;
        self.value = metric_value(metric, work, sum.median_ms);
        if let (Some(v), Some((r, name))) = (self.value, roof)
            && r > 0.0
        {
            self.roof = Some(name);
            self.roof_value = Some(r);
            self.pct_of_roof = Some(v / r * 100.0);
        }
        if let (Some(v), Some(d)) = (self.value, datasheet)
            && d > 0.0
        {
            self.datasheet_value = Some(d);
            self.pct_of_datasheet = Some(v / d * 100.0);
        }
        self.samples_ms = samples;
    }
}

/// The metric for `work` done in `ms` milliseconds.
pub fn metric_value(metric: Metric, work: Work, ms: f64) -> Option<f64> {
    if ms.is_nan() || ms <= 0.0 {
        return None;
    }
    let s = ms / 1000.0;
    match metric {
        Metric::GbPerS => (work.bytes > 0.0).then(|| work.bytes / s / 1e9),
        Metric::TflopPerS => (work.flops > 0.0).then(|| work.flops / s / 1e12),
        Metric::UsPerStep => Some(ms * 1000.0),
    }
}

/// Speedup of an optimized variant over its target's baseline.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Speedup {
    pub target: String,
    pub variant: String,
    pub baseline: String,
    /// median(baseline) / median(variant): above 1 means faster.
    pub speedup: f64,
    /// 95% bootstrap interval of the speedup.
    pub ci_low: f64,
    pub ci_high: f64,
    /// Mann-Whitney U two-sided p-value of the two sets of samples.
    pub p_value: Option<f64>,
    /// The interval lies entirely above 1.
    pub wins: bool,
    /// For a variant that does not win: why, for this lesson.
    pub note: Option<String>,
}

/// Speedups of every timed optimized variant over the timed baseline of the
/// same target.
pub fn speedups(spec: &TargetSpec, results: &[VariantResult]) -> Vec<Speedup> {
    let Some(base) = results
        .iter()
        .find(|r| r.target == spec.id && r.role == Role::Baseline && r.status == Status::Ok)
    else {
        return Vec::new();
    };
    results
        .iter()
        .filter(|r| r.target == spec.id && r.role == Role::Optimized && r.status == Status::Ok)
        .filter_map(|r| {
            let ci = stats::speedup_ci(&base.samples_ms, &r.samples_ms, 2000, 0.95)?;
            let p = stats::mann_whitney(&base.samples_ms, &r.samples_ms).map(|m| m.p_value);
            let wins = ci.ci_low > 1.0;
            Some(Speedup {
                target: spec.id.to_string(),
                variant: r.variant.clone(),
                baseline: base.variant.clone(),
                speedup: ci.ratio,
                ci_low: ci.ci_low,
                ci_high: ci.ci_high,
                p_value: p,
                wins,
                note: (!wins).then(|| {
                    format!(
                        "No reliable win on this GPU (95% interval {:.3}..{:.3}). {}",
                        ci.ci_low, ci.ci_high, spec.when_no_win
                    )
                }),
            })
        })
        .collect()
}

/// Run every variant of `lesson`: each is checked against its reference
/// first and timed only if the check passes.
pub fn run_lesson(
    lesson: &mut dyn Lesson,
    gpu: &Gpu,
    env: &RunEnv,
) -> Result<Vec<VariantResult>, BenchError> {
    run_lesson_where(lesson, gpu, env, &|_| true)
}

/// As [`run_lesson`], for the variants whose index `keep` accepts.
pub fn run_lesson_where(
    lesson: &mut dyn Lesson,
    gpu: &Gpu,
    env: &RunEnv,
    keep: &dyn Fn(usize) -> bool,
) -> Result<Vec<VariantResult>, BenchError> {
    let spec = lesson.spec();
    gpu.reset_tally();
    let blank = |v: &VariantSpec, size: &str| {
        VariantResult::new(spec.id, v.name, v.role, spec.metric, size)
    };
    let size = match lesson.setup(gpu, env) {
        Ok(s) => s,
        Err(BenchError::Unsupported(why)) => {
            return Ok(spec
                .variants
                .iter()
                .enumerate()
                .filter(|(i, _)| keep(*i))
                .map(|(_, v)| blank(v, "").skipped(why.clone()))
                .collect());
        }
        Err(BenchError::Cancelled) => return Err(BenchError::Cancelled),
        Err(e) => {
            let why = format!("setup failed: {e}");
            return Ok(spec
                .variants
                .iter()
                .enumerate()
                .filter(|(i, _)| keep(*i))
                .map(|(_, v)| blank(v, "").failed(why.clone()))
                .collect());
        }
    };
    let mut out = Vec::new();
    for (i, v) in spec.variants.iter().enumerate().filter(|(i, _)| keep(*i)) {
        if (env.cancelled)() {
            return Err(BenchError::Cancelled);
        }
        let mut row = blank(v, &size);
        if let Some(why) = lesson.unavailable(gpu, i) {
            out.push(row.skipped(why));
            continue;
        }
        (env.progress)(&format!("{}: {} (checking)", spec.id, v.name));
        match run_variant(lesson, gpu, env, i, v, &mut row) {
            Ok(()) => {}
            Err(BenchError::Cancelled) => return Err(BenchError::Cancelled),
            Err(e) => row = row.failed(e.to_string()),
        }
        row.peak_memory_bytes = Some(gpu.allocated_bytes());
        if let Value::Object(d) = lesson.details(gpu, i) {
            row.details = d;
        }
        out.push(row);
    }
    Ok(out)
}

fn run_variant(
    lesson: &mut dyn Lesson,
    gpu: &Gpu,
    env: &RunEnv,
    i: usize,
    v: &VariantSpec,
    row: &mut VariantResult,
) -> Result<(), BenchError> {
    let spec = lesson.spec();
    // Checked run, timed once to size the repetitions.
    lesson.prepare(gpu, i)?;
    let (e0, e1) = (Event::new(&gpu.ctx)?, Event::new(&gpu.ctx)?);
    e0.record(&gpu.stream)?;
    lesson.run(gpu, i)?;
    e1.record(&gpu.stream)?;
    let once_ms = e0.elapsed_ms(&e1)?;
    gpu.sync()?;
    let check = lesson.check(gpu, i)?;
    row.verified = check.passed;
    let passed = check.passed;
    let detail = check.detail.clone();
    row.check = Some(check);
    if !passed {
        row.status = Status::Failed;
        row.failure = Some(format!("failed its check, not timed: {detail}"));
        return Ok(());
    }
    (env.progress)(&format!("{}: {} (timing)", spec.id, v.name));
    let mut plan = lesson.plan(i, Plan::with_budget(env.budget));
    plan.min_reps = timing::min_reps_for(once_ms, env.budget, plan.min_reps);
    let sampler = Sampler::start(env.nvml.clone(), &gpu.info.uuid);
    let samples = timing::measure(gpu, &plan, env.cancelled, &mut |gpu, phase| match phase {
        Phase::Before => lesson.prepare(gpu, i),
        Phase::Body => lesson.run(gpu, i),
    });
    row.telemetry = Some(sampler.finish());
    let samples = samples?;
    let roof = env.roofs.get(v.roof);
    let datasheet = env.datasheet.and_then(|d| d.peak(v.roof));
    row.set_samples(samples, spec.metric, lesson.work(i), roof, datasheet);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: TargetSpec = TargetSpec {
        id: "demo",
        title: "Demo",
        lesson: "x",
        chapter: "ch00",
        metric: Metric::GbPerS,
        variants: &[],
        needs: Needs::ANY,
        informational: None,
        when_no_win: "Because.",
    };

    fn row(variant: &str, role: Role, samples: Vec<f64>) -> VariantResult {
        let mut r = VariantResult::new("demo", variant, role, Metric::GbPerS, "n");
        r.set_samples(
            samples,
            Metric::GbPerS,
            Work {
                bytes: 2e9,
                flops: 0.0,
            },
            Some((4000.0, "memcpy".into())),
            None,
        );
        r
    }

    #[test]
    fn metric_values() {
        let w = Work {
            bytes: 2e9,
            flops: 4e12,
        };
        assert_eq!(metric_value(Metric::GbPerS, w, 1000.0), Some(2.0));
        assert_eq!(metric_value(Metric::TflopPerS, w, 2000.0), Some(2.0));
        assert_eq!(metric_value(Metric::UsPerStep, w, 0.004), Some(4.0));
        assert_eq!(metric_value(Metric::GbPerS, w, 0.0), None);
    }

    #[test]
    fn samples_fill_the_row_and_percentages() {
        let r = row("fast", Role::Optimized, vec![1.0, 1.0, 1.0, 1.0]);
        assert_eq!(r.status, Status::Ok);
        assert_eq!(r.median_ms, Some(1.0));
        assert_eq!(r.value, Some(2000.0)); // 2e9 bytes in 1 ms = 2000 GB/s
        assert_eq!(r.pct_of_roof, Some(50.0));
        assert_eq!(r.roof.as_deref(), Some("memcpy"));
        assert_eq!(r.pct_of_datasheet, None);
        assert_eq!(r.repetitions, 4);
    }

    #[test]
    fn speedups_say_when_a_variant_does_not_win() {
        let base = row(
            "slow",
            Role::Baseline,
            (0..20).map(|i| 2.0 + 0.001 * i as f64).collect(),
        );
        let fast = row(
            "fast",
            Role::Optimized,
            (0..20).map(|i| 1.0 + 0.001 * i as f64).collect(),
        );
        let same = row(
            "same",
            Role::Optimized,
            (0..20)
                .map(|i| 2.0 + 0.001 * ((i * 7) % 20) as f64)
                .collect(),
        );
        let s = speedups(&SPEC, &[base, fast, same]);
        assert_eq!(s.len(), 2);
        assert!(s[0].wins && s[0].speedup > 1.9 && s[0].note.is_none());
        assert!(!s[1].wins);
        assert!(s[1].note.as_deref().unwrap().ends_with("Because."));
        assert!(s[0].p_value.unwrap() < 1e-6);
    }
}
