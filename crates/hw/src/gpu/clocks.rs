//! GPU clocks for repeatable benchmarks: what they are now (current,
//! application, maximum), whether something holds them (the "applications
//! clocks setting" event reason, which locked and application clocks raise),
//! how much they move while the GPU works, and locking SM/memory clocks
//! through NVML with a guaranteed restore.
//!
//! NVML has no getter for locked clocks; a lock shows as the
//! `applications_clocks_setting` event reason and as a clock that does not
//! move under load, which is how this module reports it.
//!
//! Changing clocks goes through [`ClockControl`], so the lock/restore logic is
//! tested against NVML's error returns without touching a GPU.

use aisp_base::Cancel;
use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::enums::device::GpuLockedClocksSetting;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use schemars::JsonSchema;
use serde::Serialize;

use super::nvml_util::Notes;
use super::nvml_util::throttle_words;

/// Clocks of one kind (MHz).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct ClockSet {
    pub sm_mhz: Option<u32>,
    pub memory_mhz: Option<u32>,
    pub graphics_mhz: Option<u32>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuClocks {
    pub index: u32,
    pub name: Option<String>,
    pub current: ClockSet,
    /// Application clocks: what the GPU targets under load when nothing else limits it.
    pub application: ClockSet,
    pub default_application: ClockSet,
    pub max: ClockSet,
    /// Clock event (throttle) reasons active now, in words.
    pub reasons_now: Vec<String>,
    /// True when the `applications_clocks_setting` reason is active: clocks are held by
    /// locked clocks (nvidia-smi -lgc/-lmc) or application clocks (NVML has no locked-clock getter).
    pub held_by_setting: bool,
    /// Memory clocks the GPU supports (valid values for a memory lock).
    pub supported_memory_mhz: Vec<u32>,
    /// Lowest and highest SM clock supported at the highest memory clock (valid range for an SM lock).
    pub supported_sm_range_mhz: Option<(u32, u32)>,
    pub notes: Vec<String>,
}

/// Read every clock NVML reports for `index`; unsupported fields become null with a note.
pub fn read(nvml: &Nvml, index: u32) -> GpuClocks {
    let mut n = Notes::new(format!("GPU {index}: "));
    let dev = match nvml.device_by_index(index) {
        Ok(d) => d,
        Err(e) => {
            n.take::<()>("device", Err(e));
            return GpuClocks {
                index,
                name: None,
                current: ClockSet::default(),
                application: ClockSet::default(),
                default_application: ClockSet::default(),
                max: ClockSet::default(),
                reasons_now: vec![],
                held_by_setting: false,
                supported_memory_mhz: vec![],
                supported_sm_range_mhz: None,
                notes: n.list,
            };
        }
    };
    let set = |n: &mut Notes, what: &str, f: &dyn Fn(Clock) -> Result<u32, NvmlError>| ClockSet {
        sm_mhz: n.take(&format!("{what} SM clock"), f(Clock::SM)),
        memory_mhz: n.take(&format!("{what} memory clock"), f(Clock::Memory)),
        graphics_mhz: n.take(&format!("{what} graphics clock"), f(Clock::Graphics)),
    };
    let current = set(&mut n, "current", &|c| dev.clock_info(c));
    let application = set(&mut n, "application", &|c| dev.applications_clock(c));
    let default_application = set(&mut n, "default application", &|c| {
        dev.default_applications_clock(c)
    });
    let max = set(&mut n, "max", &|c| dev.max_clock_info(c));
    let reasons = n.take("clock event reasons", dev.current_throttle_reasons());
    let reasons_now: Vec<String> = reasons
        .map(|r| throttle_words(r).into_iter().map(String::from).collect())
        .unwrap_or_default();
    let supported_memory_mhz = n
        .take("supported memory clocks", dev.supported_memory_clocks())
        .unwrap_or_default();
    let supported_sm_range_mhz = supported_memory_mhz
        .iter()
        .max()
        .and_then(|&m| n.take("supported SM clocks", dev.supported_graphics_clocks(m)))
        .and_then(|v| Some((*v.iter().min()?, *v.iter().max()?)));
    GpuClocks {
        index,
        name: dev.name().ok(),
        held_by_setting: reasons_now
            .iter()
            .any(|r| r == "applications_clocks_setting"),
        current,
        application,
        default_application,
        max,
        reasons_now,
        supported_memory_mhz,
        supported_sm_range_mhz,
        notes: n.list,
    }
}

/// One sample of the clocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub sm_mhz: u32,
    pub mem_mhz: u32,
    pub reasons: u64,
}

/// How much the clocks moved during sampling.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Stability {
    /// Samples judged (those NVML did not flag `gpu_idle`).
    pub samples: u32,
    /// Samples flagged `gpu_idle` (the load had not reached the GPU yet), left out of the judgment.
    pub idle_samples: u32,
    pub seconds: f64,
    /// What ran on the GPU while sampling.
    pub load: String,
    pub sm_min_mhz: u32,
    pub sm_max_mhz: u32,
    pub sm_mean_mhz: f64,
    pub sm_stddev_mhz: f64,
    pub memory_min_mhz: u32,
    pub memory_max_mhz: u32,
    /// Event reasons seen in any sample (gpu_idle left out).
    pub reasons_seen: Vec<String>,
    /// SM clock range within max(15 MHz, 1% of its mean) and a constant memory clock.
    pub stable: bool,
    pub verdict: String,
}

/// Judge a series of samples (no GPU needed: tests feed it numbers).
pub fn judge(all: &[Sample], seconds: f64, load: &str) -> Option<Stability> {
    const GPU_IDLE: u64 = 1;
    if all.is_empty() {
        return None;
    }
    // Idle samples are the GPU waiting for work, not clocks under load; judge
    // them only when there is nothing else.
    let busy: Vec<Sample> = all
        .iter()
        .copied()
        .filter(|s| s.reasons & GPU_IDLE == 0)
        .collect();
    let idle_samples = if busy.is_empty() {
        0
    } else {
        (all.len() - busy.len()) as u32
    };
    let samples: &[Sample] = if busy.is_empty() { all } else { &busy };
    let sm: Vec<f64> = samples.iter().map(|s| s.sm_mhz as f64).collect();
    let mean = sm.iter().sum::<f64>() / sm.len() as f64;
    let var = sm.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / sm.len() as f64;
    let sm_min = samples.iter().map(|s| s.sm_mhz).min().unwrap_or(0);
    let sm_max = samples.iter().map(|s| s.sm_mhz).max().unwrap_or(0);
    let mem_min = samples.iter().map(|s| s.mem_mhz).min().unwrap_or(0);
    let mem_max = samples.iter().map(|s| s.mem_mhz).max().unwrap_or(0);
    let bits = samples.iter().fold(0u64, |a, s| a | s.reasons);
    let reasons_seen: Vec<String> =
        throttle_words(nvml_wrapper::bitmasks::device::ThrottleReasons::from_bits_truncate(bits))
            .into_iter()
            .filter(|w| *w != "gpu_idle")
            .map(String::from)
            .collect();
    let tolerance = (mean * 0.01).max(15.0);
    let stable = (sm_max - sm_min) as f64 <= tolerance && mem_min == mem_max;
    let spread_pct = if mean > 0.0 {
        (sm_max - sm_min) as f64 / mean * 100.0
    } else {
        0.0
    };
    let why = if reasons_seen.is_empty() {
        String::new()
    } else {
        format!("; reasons seen: {}", reasons_seen.join(", "))
    };
    let verdict = if stable {
        format!(
            "stable: SM clock held {sm_min}-{sm_max} MHz and memory {mem_max} MHz over {} samples under {load}{why}",
            samples.len()
        )
    } else {
        format!(
            "not stable: SM clock moved {sm_min}-{sm_max} MHz ({spread_pct:.1}% of its mean), memory {mem_min}-{mem_max} MHz under {load}{why}; benchmark timings will vary with it — lock clocks (nvidia-smi -lgc / this tool's lock_sm_mhz) or report clocks with every figure"
        )
    };
    Some(Stability {
        samples: samples.len() as u32,
        idle_samples,
        seconds: (seconds * 100.0).round() / 100.0,
        load: load.to_string(),
        sm_min_mhz: sm_min,
        sm_max_mhz: sm_max,
        sm_mean_mhz: (mean * 10.0).round() / 10.0,
        sm_stddev_mhz: (var.sqrt() * 10.0).round() / 10.0,
        memory_min_mhz: mem_min,
        memory_max_mhz: mem_max,
        reasons_seen,
        stable,
        verdict,
    })
}

/// Sample SM/memory clocks and event reasons every `interval` until `until()` says stop or `max` passes.
pub fn sample(
    nvml: &Nvml,
    index: u32,
    interval: Duration,
    max: Duration,
    until: Cancel<'_>,
) -> (Vec<Sample>, f64) {
    let started = Instant::now();
    let mut out = Vec::new();
    let Ok(dev) = nvml.device_by_index(index) else {
        return (out, 0.0);
    };
    while started.elapsed() < max && !until() {
        if let (Ok(sm), Ok(mem)) = (dev.clock_info(Clock::SM), dev.clock_info(Clock::Memory)) {
            out.push(Sample {
                sm_mhz: sm,
                mem_mhz: mem,
                reasons: dev
                    .current_throttle_reasons()
                    .map(|r| r.bits())
                    .unwrap_or(0),
            });
        }
        std::thread::sleep(interval);
    }
    (out, started.elapsed().as_secs_f64())
}

/// Changing clocks, as NVML offers it. Implemented for [`Device`]; tests use a fake.
pub trait ClockControl {
    fn set_sm_locked(&mut self, min_mhz: u32, max_mhz: u32) -> Result<(), NvmlError>;
    fn reset_sm_locked(&mut self) -> Result<(), NvmlError>;
    fn set_memory_locked(&mut self, min_mhz: u32, max_mhz: u32) -> Result<(), NvmlError>;
    fn reset_memory_locked(&mut self) -> Result<(), NvmlError>;
}

impl ClockControl for Device<'_> {
    fn set_sm_locked(&mut self, min_mhz: u32, max_mhz: u32) -> Result<(), NvmlError> {
        self.set_gpu_locked_clocks(GpuLockedClocksSetting::Numeric {
            min_clock_mhz: min_mhz,
            max_clock_mhz: max_mhz,
        })
    }
    fn reset_sm_locked(&mut self) -> Result<(), NvmlError> {
        self.reset_gpu_locked_clocks()
    }
    fn set_memory_locked(&mut self, min_mhz: u32, max_mhz: u32) -> Result<(), NvmlError> {
        self.set_mem_locked_clocks(min_mhz, max_mhz)
    }
    fn reset_memory_locked(&mut self) -> Result<(), NvmlError> {
        self.reset_mem_locked_clocks()
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClockError {
    #[error("locking the {what} clock needs root: NVML refused with no permission{restored}")]
    NoPermission { what: String, restored: String },
    #[error("this GPU or driver cannot lock the {what} clock (NVML: not supported){restored}")]
    NotSupported { what: String, restored: String },
    #[error(
        "{mhz} MHz is not a valid {what} clock for this GPU (NVML: invalid argument){restored}"
    )]
    InvalidValue {
        what: String,
        mhz: u32,
        restored: String,
    },
    #[error("locking the {what} clock failed: {message}{restored}")]
    Failed {
        what: String,
        message: String,
        restored: String,
    },
    #[error(
        "restoring the default clocks failed: {0}; run `sudo nvidia-smi -rgc -rmc` to reset them"
    )]
    RestoreFailed(String),
}

/// Which locks a call set (and so must undo).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Locked {
    pub sm: bool,
    pub memory: bool,
}

fn lock_error(what: &str, mhz: u32, e: NvmlError, restored: String) -> ClockError {
    let what = what.to_string();
    match e {
        NvmlError::NoPermission => ClockError::NoPermission { what, restored },
        NvmlError::NotSupported
        | NvmlError::FunctionNotFound
        | NvmlError::FailedToLoadSymbol(_) => ClockError::NotSupported { what, restored },
        NvmlError::InvalidArg => ClockError::InvalidValue {
            what,
            mhz,
            restored,
        },
        other => ClockError::Failed {
            what,
            message: super::nvml_util::describe(&other),
            restored,
        },
    }
}

/// Lock the SM and/or memory clock to fixed values. If the second lock fails
/// the first is undone before the error returns, so a failed call leaves the
/// clocks as it found them.
pub fn lock(
    ctl: &mut dyn ClockControl,
    sm_mhz: Option<u32>,
    memory_mhz: Option<u32>,
) -> Result<Locked, ClockError> {
    let mut locked = Locked::default();
    if let Some(m) = sm_mhz {
        ctl.set_sm_locked(m, m)
            .map_err(|e| lock_error("SM", m, e, String::new()))?;
        locked.sm = true;
    }
    if let Some(m) = memory_mhz {
        if let Err(e) = ctl.set_memory_locked(m, m) {
            let restored = match restore(ctl, locked) {
                Ok(()) if locked.sm => "; the SM lock set before it was undone".to_string(),
                Ok(()) => String::new(),
                Err(r) => format!("; undoing the SM lock also failed ({r})"),
            };
            return Err(lock_error("memory", m, e, restored));
        }
        locked.memory = true;
    }
    Ok(locked)
}

/// Undo what [`lock`] set; tries both resets and reports every failure.
pub fn restore(ctl: &mut dyn ClockControl, locked: Locked) -> Result<(), ClockError> {
    let mut failed = Vec::new();
    if locked.sm
        && let Err(e) = ctl.reset_sm_locked()
    {
        failed.push(format!("SM: {}", super::nvml_util::describe(&e)));
    }
    if locked.memory
        && let Err(e) = ctl.reset_memory_locked()
    {
        failed.push(format!("memory: {}", super::nvml_util::describe(&e)));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(ClockError::RestoreFailed(failed.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVML as a list of answers: each call pops the next result for its kind.
    #[derive(Default)]
    struct FakeNvml {
        set_sm: Vec<Result<(), NvmlError>>,
        set_mem: Vec<Result<(), NvmlError>>,
        reset_sm: Vec<Result<(), NvmlError>>,
        reset_mem: Vec<Result<(), NvmlError>>,
        calls: Vec<String>,
    }

    fn pop(v: &mut Vec<Result<(), NvmlError>>) -> Result<(), NvmlError> {
        if v.is_empty() { Ok(()) } else { v.remove(0) }
    }

    impl ClockControl for FakeNvml {
        fn set_sm_locked(&mut self, a: u32, b: u32) -> Result<(), NvmlError> {
            self.calls.push(format!("set_sm {a} {b}"));
            pop(&mut self.set_sm)
        }
        fn reset_sm_locked(&mut self) -> Result<(), NvmlError> {
            self.calls.push("reset_sm".into());
            pop(&mut self.reset_sm)
        }
        fn set_memory_locked(&mut self, a: u32, b: u32) -> Result<(), NvmlError> {
            self.calls.push(format!("set_mem {a} {b}"));
            pop(&mut self.set_mem)
        }
        fn reset_memory_locked(&mut self) -> Result<(), NvmlError> {
            self.calls.push("reset_mem".into());
            pop(&mut self.reset_mem)
        }
    }

    #[test]
    fn no_permission_is_named_and_nothing_is_left_locked() {
        let mut f = FakeNvml {
            set_sm: vec![Err(NvmlError::NoPermission)],
            ..Default::default()
        };
        let e = lock(&mut f, Some(1980), Some(2619)).unwrap_err();
        assert!(matches!(e, ClockError::NoPermission { ref what, .. } if what == "SM"));
        assert!(e.to_string().contains("needs root"), "{e}");
        // The memory lock is never tried and nothing needs undoing.
        assert_eq!(f.calls, vec!["set_sm 1980 1980"]);
    }

    #[test]
    fn a_failed_memory_lock_undoes_the_sm_lock() {
        let mut f = FakeNvml {
            set_mem: vec![Err(NvmlError::NotSupported)],
            ..Default::default()
        };
        let e = lock(&mut f, Some(1755), Some(1593)).unwrap_err();
        assert_eq!(
            f.calls,
            vec!["set_sm 1755 1755", "set_mem 1593 1593", "reset_sm"]
        );
        assert!(matches!(e, ClockError::NotSupported { ref what, .. } if what == "memory"));
        assert!(
            e.to_string().contains("SM lock set before it was undone"),
            "{e}"
        );
        // And when undoing fails too, both failures are reported.
        let mut f = FakeNvml {
            set_mem: vec![Err(NvmlError::InvalidArg)],
            reset_sm: vec![Err(NvmlError::GpuLost)],
            ..Default::default()
        };
        let e = lock(&mut f, Some(1755), Some(1)).unwrap_err();
        assert!(matches!(e, ClockError::InvalidValue { mhz: 1, .. }));
        assert!(
            e.to_string().contains("undoing the SM lock also failed"),
            "{e}"
        );
        assert!(e.to_string().contains("fallen off the bus"), "{e}");
    }

    #[test]
    fn restore_resets_what_was_locked_and_reports_each_failure() {
        let mut f = FakeNvml::default();
        let l = lock(&mut f, Some(1410), Some(1215)).unwrap();
        assert_eq!(
            l,
            Locked {
                sm: true,
                memory: true
            }
        );
        restore(&mut f, l).unwrap();
        assert_eq!(f.calls[2..], ["reset_sm", "reset_mem"]);
        let mut f = FakeNvml {
            reset_sm: vec![Err(NvmlError::NoPermission)],
            reset_mem: vec![Err(NvmlError::Unknown)],
            ..Default::default()
        };
        let e = restore(
            &mut f,
            Locked {
                sm: true,
                memory: true,
            },
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("SM: needs more privileges") && text.contains("memory:"),
            "{text}"
        );
        assert!(text.contains("nvidia-smi -rgc -rmc"));
        // Only SM locked: memory is left alone.
        let mut f = FakeNvml::default();
        let l = lock(&mut f, Some(1410), None).unwrap();
        restore(&mut f, l).unwrap();
        assert_eq!(f.calls, vec!["set_sm 1410 1410", "reset_sm"]);
    }

    #[test]
    fn stability_follows_the_spread() {
        let s = |sm, mem, reasons| Sample {
            sm_mhz: sm,
            mem_mhz: mem,
            reasons,
        };
        let steady: Vec<Sample> = (0..20).map(|i| s(1980 - (i % 2) * 15, 2619, 0)).collect();
        let j = judge(&steady, 2.0, "FMA load").unwrap();
        assert!(j.stable, "{}", j.verdict);
        assert_eq!((j.sm_min_mhz, j.sm_max_mhz), (1965, 1980));
        assert_eq!(j.sm_mean_mhz, 1972.5);
        // 4 = SW power cap: clocks dropped by 300 MHz.
        let capped = vec![s(1980, 2619, 0), s(1680, 2619, 4), s(1755, 2619, 4)];
        let j = judge(&capped, 1.0, "FMA load").unwrap();
        assert!(!j.stable);
        assert_eq!(j.reasons_seen, vec!["sw_power_cap"]);
        assert!(
            j.verdict.contains("1680-1980 MHz (16.6% of its mean)"),
            "{}",
            j.verdict
        );
        assert!(judge(&[], 0.0, "none").is_none());
        // Seen on an H100: the first sample is taken before the load reaches the GPU (345 MHz, gpu_idle).
        let mut ramp = vec![s(345, 2619, 1)];
        ramp.extend((0..47).map(|_| s(1980, 2619, 0)));
        let j = judge(&ramp, 2.4, "FMA load").unwrap();
        assert!(j.stable, "{}", j.verdict);
        assert_eq!((j.samples, j.idle_samples, j.sm_min_mhz), (47, 1, 1980));
        // All idle: judged as they are.
        let j = judge(&[s(345, 2619, 1), s(345, 2619, 1)], 1.0, "no load").unwrap();
        assert_eq!((j.samples, j.idle_samples), (2, 0));
    }
}
