//! `aisp_gpu_clocks`: current, application and maximum clocks, whether they
//! hold still under a short load, and locking/restoring SM and memory clocks.
//! The work lives in `aisp_hw::gpu::clocks`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::errors::GpuCheck;
use crate::context::OpContext;
use crate::error::{ErrorKind, OpError};
use crate::registry::{Hints, OpSpec, Operation};
use aisp_hw::gpu::clocks::{self, ClockError, GpuClocks, Locked, Stability};
use aisp_hw::host::HostRoot;

pub struct Clocks;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClocksInput {
    /// GPU index (NVML order); default all for the readings, 0 for the load and any lock.
    #[serde(default)]
    pub device: Option<u32>,
    /// Seconds of FMA load while sampling clocks every 50 ms (default 3; 0 reads only).
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 60.0))]
    pub load_s: Option<f64>,
    /// Lock the SM clock to this MHz for the check (needs root), restored afterwards.
    #[serde(default)]
    pub lock_sm_mhz: Option<u32>,
    /// Lock the memory clock to this MHz (needs root; Ampere or newer), restored afterwards.
    #[serde(default)]
    pub lock_memory_mhz: Option<u32>,
    /// Leave the lock in place after the call (undo later with reset: true).
    #[serde(default)]
    pub keep_locked: Option<bool>,
    /// Only reset locked SM and memory clocks to their defaults (needs root).
    #[serde(default)]
    pub reset: Option<bool>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct LockOutcome {
    pub device: u32,
    pub sm_mhz: Option<u32>,
    pub memory_mhz: Option<u32>,
    pub locked: Locked,
    /// The defaults were restored before the call returned.
    pub restored: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ClocksOutput {
    /// False when no usable NVIDIA GPU was found; `checked` says what was looked at.
    pub present: bool,
    pub checked: Vec<String>,
    pub gpus: Vec<GpuClocks>,
    /// Clocks sampled during the load on `device` (or 0).
    pub stability: Option<Stability>,
    pub lock: Option<LockOutcome>,
    pub notes: Vec<String>,
}

fn clock_error(e: ClockError, gpu: Option<&GpuClocks>) -> OpError {
    let hint = match &e {
        ClockError::NoPermission { .. } => "Run aisp as root (or ask an administrator to run `sudo nvidia-smi -lgc <MHz>,<MHz>` / `-lmc`), or benchmark unlocked and report clocks with each figure; reading clocks needs no privileges.".to_string(),
        ClockError::InvalidValue { .. } => match gpu {
            Some(g) => format!(
                "Pick supported values: SM {} MHz, memory {:?} MHz (call without a lock to read them).",
                g.supported_sm_range_mhz
                    .map(|(a, b)| format!("{a}-{b}"))
                    .unwrap_or_else(|| "range unknown".into()),
                g.supported_memory_mhz
            ),
            None => "Call without a lock first to read the supported clocks.".into(),
        },
        ClockError::RestoreFailed(_) => "Reset by hand: `sudo nvidia-smi -rgc -rmc`, then check with this tool.".into(),
        _ => "Locked clocks need a Volta or newer data-center/workstation GPU (memory locks: Ampere or newer) and a recent driver; read-only checks still work.".into(),
    };
    let kind = match e {
        ClockError::InvalidValue { .. } => ErrorKind::InvalidInput,
        _ => ErrorKind::Unsupported,
    };
    OpError::new(kind, e.to_string(), hint)
}

/// What was looked at when no GPU is usable.
fn checked(reason: Option<&str>) -> Vec<String> {
    let host = HostRoot::live();
    let pci = aisp_hw::host::pci::nvidia_gpus(&host).len();
    let dev_nodes = host
        .list("/dev")
        .into_iter()
        .filter(|n| n.starts_with("nvidia"))
        .count();
    vec![
        format!("NVML: {}", reason.unwrap_or("not usable")),
        format!("PCI bus: {pci} NVIDIA display/3D controller(s) under /sys/bus/pci/devices"),
        format!("/dev: {dev_nodes} nvidia* device node(s)"),
    ]
}

/// Sample `index` while an FMA loop runs on CUDA device `index`; no load if the harness cannot open it.
fn sample_under_load(
    ctx: &OpContext,
    nvml: Arc<nvml_wrapper::Nvml>,
    index: u32,
    load_s: f64,
    notes: &mut Vec<String>,
) -> Option<Stability> {
    let done = AtomicBool::new(false);
    let loading = AtomicBool::new(false);
    let load_for = Duration::from_secs_f64(load_s);
    let (samples, seconds, load) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            // Sample once the load runs: module compilation and warm-up come first.
            while !loading.load(Ordering::SeqCst) && !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            clocks::sample(
                &nvml,
                index,
                Duration::from_millis(50),
                load_for + Duration::from_secs(30),
                &|| done.load(Ordering::SeqCst),
            )
        });
        let cancelled = || ctx.is_cancelled();
        let load = match aisp_hw::bench::Gpu::open(index as usize, &ctx.app().config.cache_dir()) {
            Ok(gpu) => {
                let mut what = "an FP32 FMA loop on every SM".to_string();
                let mut started: Option<Instant> = None;
                while started.is_none_or(|t| t.elapsed() < load_for) && !cancelled() {
                    if let Err(e) = aisp_hw::bench::roofs::fma_peak(
                        &gpu,
                        false,
                        Duration::from_millis(250),
                        &cancelled,
                    ) {
                        what = format!("an FP32 FMA loop, stopped early: {e}");
                        break;
                    }
                    if started.is_none() {
                        started = Some(Instant::now());
                        loading.store(true, Ordering::SeqCst);
                    }
                }
                what
            }
            Err(e) => {
                loading.store(true, Ordering::SeqCst);
                let t = Instant::now();
                while t.elapsed() < load_for && !cancelled() {
                    std::thread::sleep(Duration::from_millis(50));
                }
                format!("no load (the CUDA harness could not start: {e}), idle clocks")
            }
        };
        done.store(true, Ordering::SeqCst);
        let (samples, seconds) = sampler.join().unwrap_or_default();
        (samples, seconds, load)
    });
    if samples.is_empty() {
        notes.push(format!("GPU {index}: NVML returned no clock samples"));
    }
    clocks::judge(&samples, seconds, &load)
}

impl Operation for Clocks {
    type Input = ClocksInput;
    type Output = ClocksOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU clocks: current, held, stable, locked",
        summary: "Current, application and max SM/memory clocks, whether a setting holds them, whether they stay stable under a short load; locks and restores clocks for benchmarks.",
        description: "Reads each GPU's current, application and maximum SM/memory clocks and whether a lock or application-clock setting holds them, then samples them under a short FMA load to say whether they stay stable (timings vary with them). Can lock SM/memory clocks through NVML for repeatable benchmarks and restores them afterwards (needs root). Without a GPU it says what it checked. Seconds.",
        hints: Hints {
            read_only: false,
            destructive: false,
            idempotent: false,
            open_world: false,
        },
        long_running: true,
        intents: &[
            "lock gpu clocks",
            "clock lock check",
            "are clocks stable",
            "application clocks",
            "nvidia-smi -lgc",
            "clock variance between runs",
            "benchmark results vary",
        ],
        example: r#"{"device": 0, "load_s": 3}"#,
        ..OpSpec::new("gpu", "clocks")
    };

    fn run(&self, ctx: &OpContext, i: ClocksInput) -> Result<ClocksOutput, OpError> {
        let gpu = ctx.app().gpu();
        let load_s = i.load_s.unwrap_or(3.0);
        if !(0.0..=60.0).contains(&load_s) {
            return Err(OpError::invalid_input(
                format!("load_s must be 0..=60, got {load_s}"),
                "Pass e.g. \"load_s\": 3 (0 for readings only).",
            ));
        }
        let (Some(nvml), true) = (gpu.nvml.clone(), gpu.available) else {
            return Ok(ClocksOutput {
                present: false,
                checked: checked(gpu.reason.as_deref()),
                gpus: vec![],
                stability: None,
                lock: None,
                notes: vec!["not present: no usable NVIDIA GPU, so no clocks were read".into()],
            });
        };
        let indices = gpu.check_device(i.device)?;
        let target = i.device.unwrap_or(indices.first().copied().unwrap_or(0));
        let mut notes = Vec::new();
        let dev_err = |e| {
            OpError::unsupported(
                format!(
                    "NVML could not open GPU {target}: {}",
                    aisp_hw::gpu::describe_nvml_error(&e)
                ),
                "Check nvidia-smi on this host.",
            )
        };
        if i.reset == Some(true) {
            let mut dev = nvml.device_by_index(target).map_err(dev_err)?;
            clocks::restore(
                &mut dev,
                Locked {
                    sm: true,
                    memory: true,
                },
            )
            .map_err(|e| clock_error(e, None))?;
            notes.push(format!(
                "GPU {target}: locked SM and memory clocks reset to defaults"
            ));
        }
        let mut lock = None;
        if i.reset != Some(true) && (i.lock_sm_mhz.is_some() || i.lock_memory_mhz.is_some()) {
            let before = clocks::read(&nvml, target);
            let mut dev = nvml.device_by_index(target).map_err(dev_err)?;
            let locked = clocks::lock(&mut dev, i.lock_sm_mhz, i.lock_memory_mhz)
                .map_err(|e| clock_error(e, Some(&before)))?;
            lock = Some(LockOutcome {
                device: target,
                sm_mhz: i.lock_sm_mhz,
                memory_mhz: i.lock_memory_mhz,
                locked,
                restored: false,
            });
        }
        let gpus: Vec<GpuClocks> = indices.iter().map(|&x| clocks::read(&nvml, x)).collect();
        let stability = if load_s > 0.0 {
            ctx.progress(
                0.0,
                None,
                format!("sampling GPU {target} clocks under load for {load_s} s"),
            );
            sample_under_load(ctx, Arc::clone(&nvml), target, load_s, &mut notes)
        } else {
            None
        };
        if let Some(l) = lock.as_mut() {
            if i.keep_locked == Some(true) {
                notes.push(format!(
                    "GPU {target}: clocks left locked as asked; undo with reset: true or `sudo nvidia-smi -rgc -rmc`"
                ));
            } else {
                let mut dev = nvml.device_by_index(target).map_err(dev_err)?;
                clocks::restore(&mut dev, l.locked).map_err(|e| clock_error(e, None))?;
                l.restored = true;
            }
        }
        if ctx.is_cancelled() {
            return Err(ctx.stop_error());
        }
        Ok(ClocksOutput {
            present: true,
            checked: vec![],
            gpus,
            stability,
            lock,
            notes,
        })
    }
}
