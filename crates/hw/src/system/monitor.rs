//! Sample host CPU and memory, and GPU utilization when NVML is present, over
//! a period: a lightweight `nvidia-smi dmon` plus `vmstat`.

use aisp_base::Cancel;
use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use schemars::JsonSchema;
use serde::Serialize;

use super::procfs;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Sample {
    /// Milliseconds since the first sample.
    pub t_ms: u64,
    /// Host CPU busy % since the previous sample (all cores; null for the first sample).
    pub cpu_util_pct: Option<f64>,
    pub mem_used_mib: Option<u64>,
    pub load_1m: Option<f64>,
    pub gpus: Vec<GpuSample>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuSample {
    pub index: u32,
    /// Percent of the last sample period in which a kernel ran (NVML utilization.gpu).
    pub util_pct: Option<u32>,
    /// Percent of the period in which device memory was read or written.
    pub mem_util_pct: Option<u32>,
    pub mem_used_mib: Option<u64>,
    pub power_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Summary {
    pub samples: usize,
    pub cpu_util_avg_pct: Option<f64>,
    pub cpu_util_max_pct: Option<f64>,
    pub mem_total_mib: Option<u64>,
    pub mem_used_max_mib: Option<u64>,
    pub gpus: Vec<GpuSummary>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuSummary {
    pub index: u32,
    pub util_avg_pct: Option<f64>,
    pub util_max_pct: Option<u32>,
    pub mem_used_max_mib: Option<u64>,
    pub power_avg_w: Option<f64>,
}

struct Reader<'a> {
    nvml: Option<&'a Nvml>,
    gpu_count: u32,
    last_cpu: Option<procfs::CpuTimes>,
}

impl Reader<'_> {
    fn sample(&mut self, t_ms: u64) -> Sample {
        let cpu = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| procfs::parse_proc_stat(&t));
        let cpu_util_pct = match (cpu, self.last_cpu) {
            (Some(now), Some(before)) => now.util_pct_since(&before).map(round1),
            _ => None,
        };
        self.last_cpu = cpu.or(self.last_cpu);
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_used_mib = match (
            procfs::meminfo_kib(&meminfo, "MemTotal"),
            procfs::meminfo_kib(&meminfo, "MemAvailable"),
        ) {
            (Some(total), Some(avail)) => Some(total.saturating_sub(avail) / 1024),
            _ => None,
        };
        let load_1m = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|t| procfs::loadavg_1m(&t));
        let gpus = match self.nvml {
            Some(nvml) => (0..self.gpu_count)
                .filter_map(|i| {
                    let d = nvml.device_by_index(i).ok()?;
                    let util = d.utilization_rates().ok();
                    Some(GpuSample {
                        index: i,
                        util_pct: util.as_ref().map(|u| u.gpu),
                        mem_util_pct: util.as_ref().map(|u| u.memory),
                        mem_used_mib: d.memory_info().ok().map(|m| m.used >> 20),
                        power_w: d.power_usage().ok().map(|mw| mw as f64 / 1000.0),
                        sm_clock_mhz: d
                            .clock_info(nvml_wrapper::enum_wrappers::device::Clock::SM)
                            .ok(),
                    })
                })
                .collect(),
            None => Vec::new(),
        };
        Sample {
            t_ms,
            cpu_util_pct,
            mem_used_mib,
            load_1m,
            gpus,
        }
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Sample every `interval` for `duration`. `stop` is polled between samples
/// and ends sampling early with the samples taken so far.
pub fn run(
    nvml: Option<&Nvml>,
    duration: Duration,
    interval: Duration,
    stop: Cancel<'_>,
    on_sample: &mut dyn FnMut(&Sample),
) -> Result<Vec<Sample>, Stopped> {
    let gpu_count = nvml.and_then(|n| n.device_count().ok()).unwrap_or(0);
    let mut reader = Reader {
        nvml,
        gpu_count,
        last_cpu: None,
    };
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut next = start;
    loop {
        let s = reader.sample(start.elapsed().as_millis() as u64);
        on_sample(&s);
        samples.push(s);
        next += interval;
        if next > start + duration {
            return Ok(samples);
        }
        while Instant::now() < next {
            if stop() {
                return Err(Stopped);
            }
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(20)));
        }
    }
}

/// Sampling was stopped before the period ended.
#[derive(Debug)]
pub struct Stopped;

pub fn summarize(samples: &[Sample]) -> Summary {
    let cpu: Vec<f64> = samples.iter().filter_map(|s| s.cpu_util_pct).collect();
    let mem_total_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| procfs::meminfo_kib(&t, "MemTotal"))
        .map(|k| k / 1024);
    let mut indices: Vec<u32> = samples
        .iter()
        .flat_map(|s| s.gpus.iter().map(|g| g.index))
        .collect();
    indices.sort_unstable();
    indices.dedup();
    let gpus = indices
        .into_iter()
        .map(|index| {
            let of = || {
                samples
                    .iter()
                    .flat_map(|s| s.gpus.iter())
                    .filter(move |g| g.index == index)
            };
            let utils: Vec<u32> = of().filter_map(|g| g.util_pct).collect();
            let powers: Vec<f64> = of().filter_map(|g| g.power_w).collect();
            GpuSummary {
                index,
                util_avg_pct: mean(&utils.iter().map(|&u| u as f64).collect::<Vec<_>>())
                    .map(round1),
                util_max_pct: utils.iter().copied().max(),
                mem_used_max_mib: of().filter_map(|g| g.mem_used_mib).max(),
                power_avg_w: mean(&powers).map(round1),
            }
        })
        .collect();
    Summary {
        samples: samples.len(),
        cpu_util_avg_pct: mean(&cpu).map(round1),
        cpu_util_max_pct: cpu.iter().copied().reduce(f64::max),
        mem_total_mib,
        mem_used_max_mib: samples.iter().filter_map(|s| s.mem_used_mib).max(),
        gpus,
    }
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_the_host_at_the_requested_rate() {
        let mut seen = 0;
        let samples = run(
            None,
            Duration::from_millis(250),
            Duration::from_millis(50),
            &|| false,
            &mut |_| seen += 1,
        )
        .unwrap();
        assert_eq!(samples.len(), seen);
        assert!((5..=7).contains(&samples.len()), "{}", samples.len());
        assert!(samples[0].cpu_util_pct.is_none());
        if cfg!(target_os = "linux") {
            assert!(samples[1].cpu_util_pct.is_some());
            assert!(samples[1].mem_used_mib.unwrap() > 0);
        }
        let s = summarize(&samples);
        assert_eq!(s.samples, samples.len());
        assert!(s.gpus.is_empty());
    }

    #[test]
    fn stopping_ends_sampling() {
        let started = Instant::now();
        let r = run(
            None,
            Duration::from_secs(30),
            Duration::from_millis(100),
            &|| started.elapsed() > Duration::from_millis(150),
            &mut |_| {},
        );
        assert!(r.is_err());
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
