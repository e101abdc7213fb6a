//! `aisp_gpu_info`: what `nvidia-smi -q` reports that matters for performance
//! work, plus SM count and the theoretical memory bandwidth, per device.

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{
    Clock, ComputeMode, EccCounter, MemoryError, PerformanceState, TemperatureSensor,
    TemperatureThreshold,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::structs::device::FieldId;
use schemars::JsonSchema;
use serde::Serialize;

use super::nvml_util::{Notes, round1};

/// NVML field id of the memory (HBM) temperature.
const FI_MEMORY_TEMP: u32 = 82;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuInfo {
    /// NVML index (PCI bus order, as nvidia-smi numbers GPUs).
    pub index: u32,
    pub name: Option<String>,
    pub uuid: Option<String>,
    /// PCI address as nvidia-smi prints it (`00000000:18:00.0`).
    pub pci_bus_id: Option<String>,
    pub vbios_version: Option<String>,
    /// Architecture name (Hopper, Blackwell, ...).
    pub architecture: Option<String>,
    /// CUDA compute capability, `major.minor`.
    pub compute_capability: Option<String>,
    /// Streaming multiprocessors (from the CUDA driver).
    pub sm_count: Option<u32>,
    /// CUDA cores as NVML counts them.
    pub cuda_cores: Option<u32>,
    pub memory: MemoryUsage,
    pub clocks: Clocks,
    pub memory_bus_width_bits: Option<u32>,
    /// bus width / 8 × max memory clock × 2 (double data rate), in GB/s (10^9 bytes).
    pub memory_bandwidth_theoretical_gb_per_s: Option<f64>,
    pub temperature: Temperatures,
    pub power_draw_w: Option<f64>,
    pub power_limit_enforced_w: Option<f64>,
    /// Percent of the last sample period (1/6 s to 1 s) in which a kernel ran.
    pub utilization_gpu_pct: Option<u32>,
    /// Percent of the last sample period in which device memory was read or written.
    pub utilization_memory_pct: Option<u32>,
    pub ecc: Ecc,
    pub persistence_mode: Option<bool>,
    /// MIG mode now and after the next reset.
    pub mig_mode_current: Option<bool>,
    pub mig_mode_pending: Option<bool>,
    /// default, exclusive_process, exclusive_thread or prohibited.
    pub compute_mode: Option<String>,
    /// P0 (maximum performance) to P12 (idle).
    pub performance_state: Option<String>,
    pub pcie: Pcie,
    pub driver_version: Option<String>,
    /// Highest CUDA version the driver supports.
    pub cuda_driver_version: Option<String>,
    /// Processes with a context on this GPU.
    pub processes: Vec<GpuProcess>,
    /// Fields that are null, and why.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, Default)]
pub struct MemoryUsage {
    pub total_mib: Option<u64>,
    pub used_mib: Option<u64>,
    pub free_mib: Option<u64>,
    /// Set aside by the driver and firmware.
    pub reserved_mib: Option<u64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, Default)]
pub struct Clocks {
    pub sm_mhz: Option<u32>,
    pub sm_max_mhz: Option<u32>,
    pub graphics_mhz: Option<u32>,
    pub graphics_max_mhz: Option<u32>,
    pub memory_mhz: Option<u32>,
    pub memory_max_mhz: Option<u32>,
    /// Application clocks (the target when a kernel runs, unless locked clocks override).
    pub applications_sm_mhz: Option<u32>,
    pub applications_memory_mhz: Option<u32>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, Default)]
pub struct Temperatures {
    pub gpu_c: Option<u32>,
    /// HBM temperature, where reported.
    pub memory_c: Option<u32>,
    /// The GPU slows down above this.
    pub slowdown_c: Option<u32>,
    /// The GPU shuts down above this.
    pub shutdown_c: Option<u32>,
    /// Maximum operating temperature of the GPU.
    pub gpu_max_operating_c: Option<u32>,
    /// Maximum operating temperature of the memory.
    pub memory_max_operating_c: Option<u32>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, Default)]
pub struct Ecc {
    pub enabled: Option<bool>,
    /// ECC mode after the next reboot.
    pub enabled_pending: Option<bool>,
    /// Since the last driver load.
    pub corrected_volatile: Option<u64>,
    pub uncorrected_volatile: Option<u64>,
    /// Over the GPU's lifetime.
    pub corrected_aggregate: Option<u64>,
    pub uncorrected_aggregate: Option<u64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, Default)]
pub struct Pcie {
    pub generation_current: Option<u32>,
    pub generation_max: Option<u32>,
    pub width_current: Option<u32>,
    pub width_max: Option<u32>,
    /// Link-level retransmissions since driver load (a rising count means a bad link or riser).
    pub replay_count: Option<u32>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuProcess {
    pub pid: u32,
    /// From /proc/<pid>/comm; null when the process is in another PID namespace.
    pub name: Option<String>,
    pub used_memory_mib: Option<u64>,
    /// compute or graphics.
    pub kind: String,
}

/// bus width / 8 × memory clock × 2 (DDR), in GB/s.
pub fn theoretical_bandwidth_gb_per_s(bus_width_bits: u32, memory_clock_mhz: u32) -> f64 {
    round1(bus_width_bits as f64 / 8.0 * memory_clock_mhz as f64 * 1e6 * 2.0 / 1e9)
}

/// `P0` ... `P15`.
pub fn pstate_name(p: PerformanceState) -> Option<String> {
    use PerformanceState::*;
    let n = match p {
        Zero => 0,
        One => 1,
        Two => 2,
        Three => 3,
        Four => 4,
        Five => 5,
        Six => 6,
        Seven => 7,
        Eight => 8,
        Nine => 9,
        Ten => 10,
        Eleven => 11,
        Twelve => 12,
        Thirteen => 13,
        Fourteen => 14,
        Fifteen => 15,
        Unknown => return None,
    };
    Some(format!("P{n}"))
}

fn compute_mode_name(m: ComputeMode) -> String {
    match m {
        ComputeMode::Default => "default",
        ComputeMode::ExclusiveThread => "exclusive_thread",
        ComputeMode::Prohibited => "prohibited",
        ComputeMode::ExclusiveProcess => "exclusive_process",
    }
    .to_string()
}

/// What the process probe reads about the whole driver.
#[derive(Debug, Clone, Default)]
pub struct DriverVersions {
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
}

/// Probe one GPU. Never fails: unsupported fields are null with a note.
pub fn probe(nvml: &Nvml, index: u32, versions: &DriverVersions) -> GpuInfo {
    let mut n = Notes::new(format!("GPU {index}: "));
    let dev = match nvml.device_by_index(index) {
        Ok(d) => d,
        Err(e) => {
            n.push(format!(
                "cannot open the device: {}",
                super::nvml_util::describe(&e)
            ));
            return empty(index, versions, n.list);
        }
    };
    let name = n.take("name", dev.name());
    let pci = n.take("pci_bus_id", dev.pci_info());
    let pci_bus_id = pci.as_ref().map(|p| p.bus_id.clone());
    let cc = n
        .take("compute_capability", dev.cuda_compute_capability())
        .map(|c| format!("{}.{}", c.major, c.minor));
    let architecture = cc.as_deref().and_then(super::arch::name_for);

    // SM count and bus width from the CUDA driver, matched by PCI address.
    let attrs = match &pci_bus_id {
        Some(id) => match super::cuda::attributes_for_pci(id) {
            Ok(a) => Some(a),
            Err(e) => {
                n.push(format!("sm_count: {e}"));
                None
            }
        },
        None => None,
    };
    let mem = n.take("memory", dev.memory_info());
    let memory = MemoryUsage {
        total_mib: mem.as_ref().map(|m| m.total >> 20),
        used_mib: mem.as_ref().map(|m| m.used >> 20),
        free_mib: mem.as_ref().map(|m| m.free >> 20),
        reserved_mib: mem.as_ref().map(|m| m.reserved >> 20),
    };
    let clocks = Clocks {
        sm_mhz: n.take("clocks.sm_mhz", dev.clock_info(Clock::SM)),
        sm_max_mhz: n.take("clocks.sm_max_mhz", dev.max_clock_info(Clock::SM)),
        graphics_mhz: n.take("clocks.graphics_mhz", dev.clock_info(Clock::Graphics)),
        graphics_max_mhz: n.take(
            "clocks.graphics_max_mhz",
            dev.max_clock_info(Clock::Graphics),
        ),
        memory_mhz: n.take("clocks.memory_mhz", dev.clock_info(Clock::Memory)),
        memory_max_mhz: n.take("clocks.memory_max_mhz", dev.max_clock_info(Clock::Memory)),
        applications_sm_mhz: n.take(
            "clocks.applications_sm_mhz",
            dev.applications_clock(Clock::SM),
        ),
        applications_memory_mhz: n.take(
            "clocks.applications_memory_mhz",
            dev.applications_clock(Clock::Memory),
        ),
    };
    let memory_bus_width_bits = n
        .take("memory_bus_width_bits", dev.memory_bus_width())
        .or_else(|| attrs.as_ref().and_then(|a| a.memory_bus_width_bits));
    let memory_bandwidth_theoretical_gb_per_s = match (memory_bus_width_bits, clocks.memory_max_mhz)
    {
        (Some(w), Some(c)) if w > 0 && c > 0 => Some(theoretical_bandwidth_gb_per_s(w, c)),
        _ => None,
    };
    let memory_temp = match dev.field_values_for(&[FieldId(FI_MEMORY_TEMP)]) {
        Ok(mut v) => match v.pop() {
            Some(Ok(s)) => match s.value {
                Ok(nvml_wrapper::enums::device::SampleValue::U32(t)) if t > 0 => Some(t),
                Ok(nvml_wrapper::enums::device::SampleValue::U64(t)) if t > 0 => Some(t as u32),
                Ok(nvml_wrapper::enums::device::SampleValue::I64(t)) if t > 0 => Some(t as u32),
                _ => {
                    n.push("temperature.memory_c: not reported by this GPU");
                    None
                }
            },
            _ => {
                n.push("temperature.memory_c: not reported by this GPU");
                None
            }
        },
        Err(e) => n.take::<u32>("temperature.memory_c", Err(e)),
    };
    let temperature = Temperatures {
        gpu_c: n.take("temperature.gpu_c", dev.temperature(TemperatureSensor::Gpu)),
        memory_c: memory_temp,
        slowdown_c: n.take(
            "temperature.slowdown_c",
            dev.temperature_threshold(TemperatureThreshold::Slowdown),
        ),
        shutdown_c: n.take(
            "temperature.shutdown_c",
            dev.temperature_threshold(TemperatureThreshold::Shutdown),
        ),
        gpu_max_operating_c: n.take(
            "temperature.gpu_max_operating_c",
            dev.temperature_threshold(TemperatureThreshold::GpuMax),
        ),
        memory_max_operating_c: n.take(
            "temperature.memory_max_operating_c",
            dev.temperature_threshold(TemperatureThreshold::MemoryMax),
        ),
    };
    let util = n.take("utilization", dev.utilization_rates());
    let ecc_mode = n.take("ecc.enabled", dev.is_ecc_enabled());
    let ecc_on = ecc_mode.as_ref().is_some_and(|m| m.currently_enabled);
    let mut ecc_count = |field: &str, e: MemoryError, c: EccCounter| {
        if ecc_on {
            n.take(field, dev.total_ecc_errors(e, c))
        } else {
            None
        }
    };
    let ecc = Ecc {
        corrected_volatile: ecc_count(
            "ecc.corrected_volatile",
            MemoryError::Corrected,
            EccCounter::Volatile,
        ),
        uncorrected_volatile: ecc_count(
            "ecc.uncorrected_volatile",
            MemoryError::Uncorrected,
            EccCounter::Volatile,
        ),
        corrected_aggregate: ecc_count(
            "ecc.corrected_aggregate",
            MemoryError::Corrected,
            EccCounter::Aggregate,
        ),
        uncorrected_aggregate: ecc_count(
            "ecc.uncorrected_aggregate",
            MemoryError::Uncorrected,
            EccCounter::Aggregate,
        ),
        enabled: ecc_mode.as_ref().map(|m| m.currently_enabled),
        enabled_pending: ecc_mode.as_ref().map(|m| m.pending_enabled),
    };
    if ecc_mode.is_some() && !ecc_on {
        n.push("ecc counts: ECC is disabled");
    }
    let mig = n.take("mig_mode", dev.mig_mode());
    let pcie = Pcie {
        generation_current: n.take("pcie.generation_current", dev.current_pcie_link_gen()),
        generation_max: n.take("pcie.generation_max", dev.max_pcie_link_gen()),
        width_current: n.take("pcie.width_current", dev.current_pcie_link_width()),
        width_max: n.take("pcie.width_max", dev.max_pcie_link_width()),
        replay_count: n.take("pcie.replay_count", dev.pcie_replay_counter()),
    };
    let mut processes = Vec::new();
    for (kind, list) in [
        ("compute", dev.running_compute_processes()),
        ("graphics", dev.running_graphics_processes()),
    ] {
        match list {
            Ok(list) => {
                for p in list {
                    if processes.iter().any(|q: &GpuProcess| q.pid == p.pid) {
                        continue;
                    }
                    processes.push(GpuProcess {
                        pid: p.pid,
                        name: std::fs::read_to_string(format!("/proc/{}/comm", p.pid))
                            .ok()
                            .map(|s| s.trim().to_string()),
                        used_memory_mib: match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => Some(b >> 20),
                            UsedGpuMemory::Unavailable => None,
                        },
                        kind: kind.to_string(),
                    });
                }
            }
            Err(e) => n.push(format!(
                "processes ({kind}): {}",
                super::nvml_util::describe(&e)
            )),
        }
    }
    GpuInfo {
        index,
        uuid: n.take("uuid", dev.uuid()),
        vbios_version: n.take("vbios_version", dev.vbios_version()),
        sm_count: attrs.as_ref().and_then(|a| a.sm_count),
        cuda_cores: n.take("cuda_cores", dev.num_cores()),
        power_draw_w: n
            .take("power_draw_w", dev.power_usage())
            .map(|mw| round1(mw as f64 / 1000.0)),
        power_limit_enforced_w: n
            .take("power_limit_enforced_w", dev.enforced_power_limit())
            .map(|mw| round1(mw as f64 / 1000.0)),
        utilization_gpu_pct: util.as_ref().map(|u| u.gpu),
        utilization_memory_pct: util.as_ref().map(|u| u.memory),
        persistence_mode: n.take("persistence_mode", dev.is_in_persistent_mode()),
        mig_mode_current: mig.as_ref().map(|m| m.current == 1),
        mig_mode_pending: mig.as_ref().map(|m| m.pending == 1),
        compute_mode: n
            .take("compute_mode", dev.compute_mode())
            .map(compute_mode_name),
        performance_state: n
            .take("performance_state", dev.performance_state())
            .and_then(pstate_name),
        name,
        pci_bus_id,
        architecture,
        compute_capability: cc,
        memory,
        clocks,
        memory_bus_width_bits,
        memory_bandwidth_theoretical_gb_per_s,
        temperature,
        ecc,
        pcie,
        driver_version: versions.driver_version.clone(),
        cuda_driver_version: versions.cuda_driver_version.clone(),
        processes,
        notes: n.list,
    }
}

fn empty(index: u32, versions: &DriverVersions, notes: Vec<String>) -> GpuInfo {
    GpuInfo {
        index,
        name: None,
        uuid: None,
        pci_bus_id: None,
        vbios_version: None,
        architecture: None,
        compute_capability: None,
        sm_count: None,
        cuda_cores: None,
        memory: MemoryUsage::default(),
        clocks: Clocks::default(),
        memory_bus_width_bits: None,
        memory_bandwidth_theoretical_gb_per_s: None,
        temperature: Temperatures::default(),
        power_draw_w: None,
        power_limit_enforced_w: None,
        utilization_gpu_pct: None,
        utilization_memory_pct: None,
        ecc: Ecc::default(),
        persistence_mode: None,
        mig_mode_current: None,
        mig_mode_pending: None,
        compute_mode: None,
        performance_state: None,
        pcie: Pcie::default(),
        driver_version: versions.driver_version.clone(),
        cuda_driver_version: versions.cuda_driver_version.clone(),
        processes: Vec::new(),
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn theoretical_bandwidth_matches_datasheets() {
        // H100 SXM5: 5120-bit HBM3 at 2619 MHz → 3352 GB/s (datasheet 3.35 TB/s).
        assert_eq!(theoretical_bandwidth_gb_per_s(5120, 2619), 3352.3);
        // A100 80GB SXM4: 5120-bit at 1593 MHz → 2039 GB/s (datasheet 2,039 GB/s).
        assert_eq!(theoretical_bandwidth_gb_per_s(5120, 1593), 2039.0);
        // RTX 4090: 384-bit GDDR6X at 10501 MHz → 1008 GB/s (datasheet 1,008 GB/s).
        assert_eq!(theoretical_bandwidth_gb_per_s(384, 10501), 1008.1);
        assert_eq!(pstate_name(PerformanceState::Zero).as_deref(), Some("P0"));
        assert_eq!(
            pstate_name(PerformanceState::Twelve).as_deref(),
            Some("P12")
        );
        assert_eq!(
            compute_mode_name(ComputeMode::ExclusiveProcess),
            "exclusive_process"
        );
    }
}
