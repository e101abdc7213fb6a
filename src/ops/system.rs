//! Operations of the `system` domain.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, OpSpec, Operation};
use crate::system::monitor;

pub const OPERATIONS: &[&dyn DynOperation] = &[&Monitor];

pub struct Monitor;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MonitorInput {
    /// How long to sample, in seconds (default 5, at most 3600).
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Time between samples in milliseconds (default 500, at least 50).
    #[serde(default)]
    pub interval_ms: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct MonitorOutput {
    pub duration_s: f64,
    pub interval_ms: u64,
    pub summary: monitor::Summary,
    pub samples: Vec<monitor::Sample>,
    /// What could not be sampled, and why.
    pub notes: Vec<String>,
}

impl Operation for Monitor {
    type Input = MonitorInput;
    type Output = MonitorOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Monitor CPU, memory and GPU utilization",
        summary: "Samples host CPU %, memory and load, and per-GPU utilization, memory, power and SM clock, over a period.",
        description: "Samples the machine while your workload runs: host CPU busy % (from /proc/stat), memory used and \
1-minute load, plus per GPU (through NVML, when a GPU is present) utilization %, memory-controller utilization %, \
memory used, power draw and SM clock. Returns every sample and a summary (averages and maxima). Use it to see whether \
a running job keeps the GPU busy or is starved by the CPU (high CPU, low GPU), without a profiler. Long-running: lasts \
duration_s (default 5 s), reports progress per sample, stops early when cancelled; with async: true it runs as a job.",
        hints: crate::registry::Hints {
            read_only: true,
            destructive: false,
            idempotent: false,
            open_world: false,
        },
        long_running: true,
        intents: &[
            "monitor gpu utilization",
            "watch utilization",
            "is the gpu busy",
            "cpu usage",
            "dmon",
            "sample utilization over time",
        ],
        example: r#"{"duration_s": 10, "interval_ms": 500}"#,
        ..OpSpec::new("system", "monitor")
    };

    fn run(&self, ctx: &OpContext, input: MonitorInput) -> Result<MonitorOutput, OpError> {
        let duration_s = input.duration_s.unwrap_or(5.0);
        if !(duration_s > 0.0 && duration_s <= 3600.0) {
            return Err(OpError::invalid_input(
                format!("duration_s must be in (0, 3600], not {duration_s}"),
                "Pass e.g. \"duration_s\": 10.",
            ));
        }
        let interval_ms = input.interval_ms.unwrap_or(500);
        if !(50..=60_000).contains(&interval_ms) {
            return Err(OpError::invalid_input(
                format!("interval_ms must be between 50 and 60000, not {interval_ms}"),
                "Pass e.g. \"interval_ms\": 500.",
            ));
        }
        let gpu = ctx.app().gpu();
        let mut notes = Vec::new();
        if !gpu.available {
            notes.push(format!(
                "GPU metrics not sampled: {}",
                gpu.reason.as_deref().unwrap_or("no GPU")
            ));
        }
        let nvml = gpu.nvml.as_deref().filter(|_| gpu.available);
        let duration = Duration::from_secs_f64(duration_s);
        let interval = Duration::from_millis(interval_ms);
        let expected = (duration.as_millis() / interval.as_millis()) as f64 + 1.0;
        let mut n = 0.0;
        let samples = monitor::run(nvml, duration, interval, &|| ctx.is_cancelled(), &mut |s| {
            n += 1.0;
            let msg = match s.cpu_util_pct {
                Some(c) => format!("sample {n:.0}: CPU {c:.1}%"),
                None => format!("sample {n:.0}"),
            };
            ctx.progress(n, Some(expected), msg);
        })
        .map_err(|_| ctx.stop_error())?;
        Ok(MonitorOutput {
            duration_s,
            interval_ms,
            summary: monitor::summarize(&samples),
            samples,
            notes,
        })
    }
}
