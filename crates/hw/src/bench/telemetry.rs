//! What the GPU was doing while a variant was measured: SM and memory clocks
//! at the start and end (and their range), every clock-throttle reason NVML
//! reported, the energy the board used (NVML's total-energy counter, read
//! before and after) and the peak temperature. A background thread samples
//! NVML every 20 ms for the duration of the measurement.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::gpu::nvml_util::throttle_words;

/// GPU state during one measurement.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Telemetry {
    pub sm_clock_start_mhz: Option<u32>,
    pub sm_clock_end_mhz: Option<u32>,
    pub sm_clock_min_mhz: Option<u32>,
    pub sm_clock_max_mhz: Option<u32>,
    pub mem_clock_start_mhz: Option<u32>,
    pub mem_clock_end_mhz: Option<u32>,
    /// Every throttle reason seen in any sample, in words (`gpu_idle` alone
    /// is normal between repetitions and is left out).
    pub throttle_reasons: Vec<String>,
    /// Energy the board used from start to end of the measurement, in joules
    /// (includes the L2 flushes and gaps between repetitions).
    pub energy_j: Option<f64>,
    /// Mean board power over the measurement (energy over wall time).
    pub avg_power_w: Option<f64>,
    pub temperature_max_c: Option<u32>,
    pub wall_s: f64,
    pub samples: u32,
}

#[derive(Default)]
struct Acc {
    sm_min: Option<u32>,
    sm_max: Option<u32>,
    temp_max: Option<u32>,
    reasons: u64,
    samples: u32,
}

/// A running sampler; [`Sampler::finish`] stops it and returns the record.
pub struct Sampler {
    nvml: Option<Arc<Nvml>>,
    uuid: String,
    start: Instant,
    energy_start_mj: Option<u64>,
    sm_start: Option<u32>,
    mem_start: Option<u32>,
    stop: Arc<AtomicBool>,
    acc: Arc<Mutex<Acc>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Start sampling the device with `uuid` (`GPU-...`). Without NVML the
    /// sampler still measures wall time and returns empty fields.
    pub fn start(nvml: Option<Arc<Nvml>>, uuid: &str) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let acc = Arc::new(Mutex::new(Acc::default()));
        let (mut energy_start_mj, mut sm_start, mut mem_start) = (None, None, None);
        let mut thread = None;
        if let Some(n) = &nvml
            && let Ok(dev) = n.device_by_uuid(uuid)
        {
            energy_start_mj = dev.total_energy_consumption().ok();
            sm_start = dev.clock_info(Clock::SM).ok();
            mem_start = dev.clock_info(Clock::Memory).ok();
            let (n2, uuid2, stop2, acc2) = (
                Arc::clone(n),
                uuid.to_string(),
                Arc::clone(&stop),
                Arc::clone(&acc),
            );
            thread = std::thread::Builder::new()
                .name("aisp-telemetry".into())
                .spawn(move || sample_loop(&n2, &uuid2, &stop2, &acc2))
                .ok();
        }
        Sampler {
            nvml,
            uuid: uuid.to_string(),
            start: Instant::now(),
            energy_start_mj,
            sm_start,
            mem_start,
            stop,
            acc,
            thread,
        }
    }

    pub fn finish(mut self) -> Telemetry {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let wall_s = self.start.elapsed().as_secs_f64();
        let mut t = Telemetry {
            sm_clock_start_mhz: self.sm_start,
            mem_clock_start_mhz: self.mem_start,
            wall_s,
            ..Telemetry::default()
        };
        if let Some(n) = &self.nvml
            && let Ok(dev) = n.device_by_uuid(self.uuid.as_str())
        {
            t.sm_clock_end_mhz = dev.clock_info(Clock::SM).ok();
            t.mem_clock_end_mhz = dev.clock_info(Clock::Memory).ok();
            if let (Some(a), Ok(b)) = (self.energy_start_mj, dev.total_energy_consumption()) {
                let j = b.saturating_sub(a) as f64 / 1000.0;
                t.energy_j = Some(j);
                t.avg_power_w = (wall_s > 0.0).then(|| j / wall_s);
            }
        }
        let acc = self.acc.lock().unwrap_or_else(|p| p.into_inner());
        t.sm_clock_min_mhz = acc.sm_min;
        t.sm_clock_max_mhz = acc.sm_max;
        t.temperature_max_c = acc.temp_max;
        t.samples = acc.samples;
        t.throttle_reasons = throttle_words(ThrottleReasons::from_bits_truncate(acc.reasons))
            .into_iter()
            .filter(|w| *w != "gpu_idle")
            .map(String::from)
            .collect();
        t
    }
}

fn sample_loop(nvml: &Nvml, uuid: &str, stop: &AtomicBool, acc: &Mutex<Acc>) {
    let Ok(dev) = nvml.device_by_uuid(uuid) else {
        return;
    };
    while !stop.load(Ordering::SeqCst) {
        let sm = dev.clock_info(Clock::SM).ok();
        let reasons = dev.current_throttle_reasons().ok();
        let temp = dev.temperature(TemperatureSensor::Gpu).ok();
        {
            let mut a = acc.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(sm) = sm {
                a.sm_min = Some(a.sm_min.map_or(sm, |m| m.min(sm)));
                a.sm_max = Some(a.sm_max.map_or(sm, |m| m.max(sm)));
            }
            if let Some(r) = reasons {
                a.reasons |= r.bits();
            }
            if let Some(t) = temp {
                a.temp_max = Some(a.temp_max.map_or(t, |m| m.max(t)));
            }
            a.samples += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_bits_become_words() {
        let r = ThrottleReasons::SW_POWER_CAP
            | ThrottleReasons::HW_THERMAL_SLOWDOWN
            | ThrottleReasons::GPU_IDLE;
        assert_eq!(
            throttle_words(r),
            vec!["sw_power_cap", "hw_thermal_slowdown", "gpu_idle"]
        );
        assert!(throttle_words(ThrottleReasons::NONE).is_empty());
    }

    #[test]
    fn a_sampler_without_nvml_still_times() {
        let s = Sampler::start(None, "GPU-none");
        std::thread::sleep(Duration::from_millis(5));
        let t = s.finish();
        assert!(t.wall_s >= 0.005);
        assert_eq!(t.samples, 0);
        assert!(t.energy_j.is_none());
    }
}
