//! `aisp_gpu_power`: power draw against its limits, energy, temperatures, fans,
//! clocks against their maxima, and why clocks are held down (the throttle or
//! "clock event" reasons) in words.

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{
    Clock, PerformancePolicy, TemperatureSensor, TemperatureThreshold,
};
use schemars::JsonSchema;
use serde::Serialize;

use super::nvml_util::{Notes, field_values, round1};

/// NVML field id of the instantaneous power draw (the plain reading is a 1 s average on recent GPUs).
const FI_POWER_INSTANT: u32 = 186;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuPower {
    pub index: u32,
    pub name: Option<String>,
    /// Power draw as NVML reports it (averaged over about a second on Ampere and newer).
    pub power_draw_w: Option<f64>,
    /// Instantaneous power draw, where supported.
    pub power_draw_instant_w: Option<f64>,
    /// The limit the GPU obeys now (the lowest of all limits in force).
    pub power_limit_enforced_w: Option<f64>,
    /// The limit set by the administrator (`nvidia-smi -pl`).
    pub power_limit_w: Option<f64>,
    pub power_limit_default_w: Option<f64>,
    pub power_limit_min_w: Option<f64>,
    pub power_limit_max_w: Option<f64>,
    /// Draw as a percentage of the enforced limit.
    pub power_draw_pct_of_limit: Option<f64>,
    /// Energy used since the driver was loaded.
    pub energy_consumed_j: Option<f64>,
    pub temperature_c: Option<u32>,
    pub memory_temperature_c: Option<u32>,
    pub temperature_slowdown_c: Option<u32>,
    pub temperature_shutdown_c: Option<u32>,
    pub temperature_gpu_max_operating_c: Option<u32>,
    /// Fan speeds as a percentage of maximum (empty for passively cooled data-center GPUs).
    pub fans_pct: Vec<u32>,
    pub clocks: ClockState,
    /// P0 (maximum performance) to P12 (idle).
    pub performance_state: Option<String>,
    /// Raw clock event reason bits from NVML.
    pub throttle_reasons_bits: Option<u64>,
    /// The active reasons, decoded.
    pub throttle_reasons: Vec<ThrottleReason>,
    /// True when a reason other than idle or the application clock setting is active.
    pub throttled: Option<bool>,
    /// Time clocks were held down by each policy since the driver was loaded.
    pub violation_time_ms: ViolationTimes,
    /// One sentence: draw vs limit, temperature, clocks, throttling.
    pub summary: String,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, Default)]
pub struct ClockState {
    pub sm_mhz: Option<u32>,
    pub sm_max_mhz: Option<u32>,
    pub sm_pct_of_max: Option<f64>,
    pub memory_mhz: Option<u32>,
    pub memory_max_mhz: Option<u32>,
    pub memory_pct_of_max: Option<f64>,
    pub graphics_mhz: Option<u32>,
    pub graphics_max_mhz: Option<u32>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, Default)]
pub struct ViolationTimes {
    pub power: Option<u64>,
    pub thermal: Option<u64>,
    pub sync_boost: Option<u64>,
    pub board_limit: Option<u64>,
    pub low_utilization: Option<u64>,
    pub reliability: Option<u64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct ThrottleReason {
    /// NVML's name without the prefix (e.g. `SwPowerCap`).
    pub code: String,
    /// In words.
    pub reason: String,
    /// What it means for performance and what to do.
    pub meaning: String,
    /// True for reasons that lower clocks below what the workload could get.
    pub limits_performance: bool,
}

/// nvmlClocksEventReason* bits (nvml.h), with words and meaning.
const REASONS: &[(u64, &str, &str, &str, bool)] = &[
    (
        0x1,
        "GpuIdle",
        "idle",
        "Nothing is running, so clocks drop; expected between jobs.",
        false,
    ),
    (
        0x2,
        "ApplicationsClocksSetting",
        "application clocks setting",
        "Clocks are held at the configured application clocks (nvidia-smi -ac); reset with nvidia-smi -rac if unintended.",
        false,
    ),
    (
        0x4,
        "SwPowerCap",
        "power cap",
        "The GPU draws its power limit and the driver lowers clocks to stay under it: the workload is power-bound. \
         Check the limit (nvidia-smi -q -d POWER) and cooling; FP8/lower-precision kernels can do more work per watt.",
        true,
    ),
    (
        0x8,
        "HwSlowdown",
        "hardware slowdown",
        "Clocks cut by half or more because of high temperature, an external power brake or a power surge; \
         check cooling and power delivery.",
        true,
    ),
    (
        0x10,
        "SyncBoost",
        "sync boost",
        "This GPU is held to the clocks of the slowest GPU in its sync-boost group; look at the other GPUs' reasons.",
        true,
    ),
    (
        0x20,
        "SwThermalSlowdown",
        "thermal slowdown (software)",
        "GPU or memory temperature is above its maximum operating temperature, so the driver lowers clocks; \
         improve airflow or cooling.",
        true,
    ),
    (
        0x40,
        "HwThermalSlowdown",
        "thermal slowdown (hardware)",
        "The GPU is too hot and hardware cut clocks by half or more; the cooling is failing.",
        true,
    ),
    (
        0x80,
        "HwPowerBrakeSlowdown",
        "power brake (hardware)",
        "The system asserted the external power brake (power supply or chassis limit); clocks cut by half or more.",
        true,
    ),
    (
        0x100,
        "DisplayClockSetting",
        "display clock setting",
        "Clocks limited by the display clock setting (workstation and GeForce boards).",
        true,
    ),
];

/// Decode clock event reason bits into words. Unknown bits are reported as such.
pub fn decode_throttle_reasons(bits: u64) -> Vec<ThrottleReason> {
    let mut out: Vec<ThrottleReason> = REASONS
        .iter()
        .filter(|(b, ..)| bits & b != 0)
        .map(|&(_, code, reason, meaning, limits)| ThrottleReason {
            code: code.to_string(),
            reason: reason.to_string(),
            meaning: meaning.to_string(),
            limits_performance: limits,
        })
        .collect();
    let known: u64 = REASONS.iter().map(|(b, ..)| b).sum();
    let unknown = bits & !known;
    if unknown != 0 {
        out.push(ThrottleReason {
            code: format!("0x{unknown:x}"),
            reason: "reason unknown to aisp".to_string(),
            meaning:
                "A clock event reason newer than this aisp; nvidia-smi -q -d PERFORMANCE names it."
                    .to_string(),
            limits_performance: true,
        });
    }
    out
}

fn pct(a: Option<u32>, b: Option<u32>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0 => Some(round1(100.0 * a as f64 / b as f64)),
        _ => None,
    }
}

fn watts(mw: Option<u32>) -> Option<f64> {
    mw.map(|m| round1(m as f64 / 1000.0))
}

/// The one-sentence summary.
pub fn summarize(p: &GpuPower) -> String {
    let mut parts = Vec::new();
    match (p.power_draw_w, p.power_limit_enforced_w) {
        (Some(d), Some(l)) => parts.push(format!("{d:.0} W of {l:.0} W limit")),
        (Some(d), None) => parts.push(format!("{d:.0} W")),
        _ => {}
    }
    if let Some(t) = p.temperature_c {
        parts.push(format!("{t} C"));
    }
    if let (Some(c), Some(m)) = (p.clocks.sm_mhz, p.clocks.sm_max_mhz) {
        parts.push(format!("SM clock {c} of {m} MHz"));
    }
    let limiting: Vec<&str> = p
        .throttle_reasons
        .iter()
        .filter(|r| r.limits_performance)
        .map(|r| r.reason.as_str())
        .collect();
    match (p.throttled, limiting.is_empty()) {
        (Some(true), false) => parts.push(format!("clocks held down by {}", limiting.join(", "))),
        (Some(false), _) if p.throttle_reasons.iter().any(|r| r.code == "GpuIdle") => {
            parts.push("idle".to_string())
        }
        (Some(false), _) => parts.push("not throttled".to_string()),
        _ => {}
    }
    format!("GPU {}: {}", p.index, parts.join(", "))
}

/// Probe one GPU's power and thermal state. Never fails.
pub fn probe(nvml: &Nvml, index: u32) -> GpuPower {
    let mut n = Notes::new(format!("GPU {index}: "));
    let dev = match nvml.device_by_index(index) {
        Ok(d) => Some(d),
        Err(e) => {
            n.push(format!(
                "cannot open the device: {}",
                super::nvml_util::describe(&e)
            ));
            None
        }
    };
    let mut p = GpuPower {
        index,
        name: None,
        power_draw_w: None,
        power_draw_instant_w: None,
        power_limit_enforced_w: None,
        power_limit_w: None,
        power_limit_default_w: None,
        power_limit_min_w: None,
        power_limit_max_w: None,
        power_draw_pct_of_limit: None,
        energy_consumed_j: None,
        temperature_c: None,
        memory_temperature_c: None,
        temperature_slowdown_c: None,
        temperature_shutdown_c: None,
        temperature_gpu_max_operating_c: None,
        fans_pct: Vec::new(),
        clocks: ClockState::default(),
        performance_state: None,
        throttle_reasons_bits: None,
        throttle_reasons: Vec::new(),
        throttled: None,
        violation_time_ms: ViolationTimes::default(),
        summary: String::new(),
        notes: Vec::new(),
    };
    if let Some(dev) = dev {
        p.name = n.take("name", dev.name());
        p.power_draw_w = watts(n.take("power_draw_w", dev.power_usage()));
        let fields = field_values(nvml, &dev, &[(FI_POWER_INSTANT, 0), (82, 0)]);
        match &fields[0] {
            Ok(mw) if *mw > 0.0 => p.power_draw_instant_w = Some(round1(mw / 1000.0)),
            Ok(_) => n.push("power_draw_instant_w: not reported by this GPU"),
            Err(e) => n.push(format!("power_draw_instant_w: {e}")),
        }
        match &fields[1] {
            Ok(t) if *t > 0.0 => p.memory_temperature_c = Some(*t as u32),
            _ => n.push("memory_temperature_c: not reported by this GPU"),
        }
        p.power_limit_enforced_w =
            watts(n.take("power_limit_enforced_w", dev.enforced_power_limit()));
        p.power_limit_w = watts(n.take("power_limit_w", dev.power_management_limit()));
        p.power_limit_default_w = watts(n.take(
            "power_limit_default_w",
            dev.power_management_limit_default(),
        ));
        if let Some(c) = n.take(
            "power_limit_min_max",
            dev.power_management_limit_constraints(),
        ) {
            p.power_limit_min_w = watts(Some(c.min_limit));
            p.power_limit_max_w = watts(Some(c.max_limit));
        }
        p.power_draw_pct_of_limit = match (p.power_draw_w, p.power_limit_enforced_w) {
            (Some(d), Some(l)) if l > 0.0 => Some(round1(100.0 * d / l)),
            _ => None,
        };
        p.energy_consumed_j = n
            .take("energy_consumed_j", dev.total_energy_consumption())
            .map(|mj| round1(mj as f64 / 1000.0));
        p.temperature_c = n.take("temperature_c", dev.temperature(TemperatureSensor::Gpu));
        p.temperature_slowdown_c = n.take(
            "temperature_slowdown_c",
            dev.temperature_threshold(TemperatureThreshold::Slowdown),
        );
        p.temperature_shutdown_c = n.take(
            "temperature_shutdown_c",
            dev.temperature_threshold(TemperatureThreshold::Shutdown),
        );
        p.temperature_gpu_max_operating_c = n.take(
            "temperature_gpu_max_operating_c",
            dev.temperature_threshold(TemperatureThreshold::GpuMax),
        );
        match dev.num_fans() {
            Ok(count) => {
                for f in 0..count {
                    if let Some(s) = n.take(&format!("fan {f}"), dev.fan_speed(f)) {
                        p.fans_pct.push(s);
                    }
                }
            }
            Err(e) => {
                n.take::<u32>("fans_pct", Err(e));
            }
        }
        let sm = n.take("clocks.sm_mhz", dev.clock_info(Clock::SM));
        let sm_max = n.take("clocks.sm_max_mhz", dev.max_clock_info(Clock::SM));
        let mem = n.take("clocks.memory_mhz", dev.clock_info(Clock::Memory));
        let mem_max = n.take("clocks.memory_max_mhz", dev.max_clock_info(Clock::Memory));
        p.clocks = ClockState {
            sm_mhz: sm,
            sm_max_mhz: sm_max,
            sm_pct_of_max: pct(sm, sm_max),
            memory_mhz: mem,
            memory_max_mhz: mem_max,
            memory_pct_of_max: pct(mem, mem_max),
            graphics_mhz: n.take("clocks.graphics_mhz", dev.clock_info(Clock::Graphics)),
            graphics_max_mhz: n.take(
                "clocks.graphics_max_mhz",
                dev.max_clock_info(Clock::Graphics),
            ),
        };
        p.performance_state = n
            .take("performance_state", dev.performance_state())
            .and_then(super::info::pstate_name);
        if let Some(r) = n.take("throttle_reasons", dev.current_throttle_reasons()) {
            // from_bits_truncate drops bits the wrapper does not know; the
            // wrapper knows every reason in REASONS.
            let bits = r.bits();
            p.throttle_reasons_bits = Some(bits);
            p.throttle_reasons = decode_throttle_reasons(bits);
            p.throttled = Some(p.throttle_reasons.iter().any(|r| r.limits_performance));
        }
        let mut v = |field: &str, policy: PerformancePolicy| {
            n.take(field, dev.violation_status(policy))
                .map(|t| t.violation_time / 1_000_000)
        };
        p.violation_time_ms = ViolationTimes {
            power: v("violation_time_ms.power", PerformancePolicy::Power),
            thermal: v("violation_time_ms.thermal", PerformancePolicy::Thermal),
            sync_boost: v("violation_time_ms.sync_boost", PerformancePolicy::SyncBoost),
            board_limit: v(
                "violation_time_ms.board_limit",
                PerformancePolicy::BoardLimit,
            ),
            low_utilization: v(
                "violation_time_ms.low_utilization",
                PerformancePolicy::LowUtilization,
            ),
            reliability: v(
                "violation_time_ms.reliability",
                PerformancePolicy::Reliability,
            ),
        };
    }
    p.notes = n.list;
    p.summary = summarize(&p);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_bits_decode_into_words() {
        assert!(decode_throttle_reasons(0).is_empty());
        let idle = decode_throttle_reasons(0x1);
        assert_eq!(idle.len(), 1);
        assert_eq!(
            (idle[0].code.as_str(), idle[0].reason.as_str()),
            ("GpuIdle", "idle")
        );
        assert!(!idle[0].limits_performance);
        let r = decode_throttle_reasons(0x4 | 0x20);
        let words: Vec<&str> = r.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(words, vec!["power cap", "thermal slowdown (software)"]);
        assert!(r.iter().all(|r| r.limits_performance));
        let unknown = decode_throttle_reasons(0x4 | 0x1000);
        assert_eq!(unknown.len(), 2);
        assert_eq!(unknown[1].code, "0x1000");
        // The bit values are NVML's (nvml.h nvmlClocksEventReason*).
        use nvml_wrapper::bitmasks::device::ThrottleReasons as T;
        assert_eq!(T::SW_POWER_CAP.bits(), 0x4);
        assert_eq!(T::HW_POWER_BRAKE_SLOWDOWN.bits(), 0x80);
        assert_eq!(T::DISPLAY_CLOCK_SETTING.bits(), 0x100);
    }

    #[test]
    fn summaries_say_what_holds_clocks_down() {
        let mut p = probe_placeholder();
        p.power_draw_w = Some(698.4);
        p.power_limit_enforced_w = Some(700.0);
        p.temperature_c = Some(71);
        p.clocks.sm_mhz = Some(1755);
        p.clocks.sm_max_mhz = Some(1980);
        p.throttle_reasons = decode_throttle_reasons(0x4);
        p.throttled = Some(true);
        assert_eq!(
            summarize(&p),
            "GPU 0: 698 W of 700 W limit, 71 C, SM clock 1755 of 1980 MHz, clocks held down by power cap"
        );
        p.throttle_reasons = decode_throttle_reasons(0x1);
        p.throttled = Some(false);
        assert!(summarize(&p).ends_with(", idle"));
        assert_eq!(pct(Some(1755), Some(1980)), Some(88.6));
    }

    fn probe_placeholder() -> GpuPower {
        GpuPower {
            index: 0,
            name: None,
            power_draw_w: None,
            power_draw_instant_w: None,
            power_limit_enforced_w: None,
            power_limit_w: None,
            power_limit_default_w: None,
            power_limit_min_w: None,
            power_limit_max_w: None,
            power_draw_pct_of_limit: None,
            energy_consumed_j: None,
            temperature_c: None,
            memory_temperature_c: None,
            temperature_slowdown_c: None,
            temperature_shutdown_c: None,
            temperature_gpu_max_operating_c: None,
            fans_pct: vec![],
            clocks: ClockState::default(),
            performance_state: None,
            throttle_reasons_bits: None,
            throttle_reasons: vec![],
            throttled: None,
            violation_time_ms: ViolationTimes::default(),
            summary: String::new(),
            notes: vec![],
        }
    }
}
