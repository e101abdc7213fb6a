//! `aisp_system_context`: the whole machine in one call — host, GPUs, software
//! and what is wrong — compact enough for a model's context (`summary`), or
//! with every report attached (`full`). The slow part (the software probe)
//! runs concurrently with the rest.

use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::container::{self, ContainerReport};
use super::cpu_memory::{self, CpuMemoryReport};
use super::dependencies::{self, DependenciesReport, GpuFacts, Health};
use super::env::{self, EnvReport};
use super::network::{self, NetworkReport};
use super::parameters::{self, ParamStatus, ParametersReport};
use super::software::{self, SoftwareOptions, SoftwareReport};
use crate::gpu::GpuAvailability;
use crate::gpu::capabilities::DeviceCapabilities;
use crate::gpu::info::{DriverVersions, GpuInfo};
use crate::gpu::power::GpuPower;
use crate::gpu::topology::Topology;
use crate::host::HostRoot;

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Detail {
    // Plain comments, not doc comments: schemars then emits a simple string
    // enum, which the CLI turns into `--detail summary|full`.
    // A compact digest (a few KB).
    #[default]
    Summary,
    // The digest plus every underlying report.
    Full,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ContextReport {
    pub detail: Detail,
    pub host: HostSummary,
    pub gpu: GpuSummary,
    pub software: SoftwareSummary,
    pub health: HealthSummary,
    /// Every report, with `detail: full`.
    pub full: Option<Box<FullContext>>,
    pub elapsed_ms: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HostSummary {
    pub os: Option<String>,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    pub sockets: Option<u32>,
    pub cores: Option<u32>,
    pub threads: Option<u32>,
    pub memory_total_mib: Option<u64>,
    pub numa_nodes_with_cpus: usize,
    pub in_container: bool,
    pub container_runtime: Option<String>,
    /// CPUs this process can really use.
    pub effective_cpus: Option<u32>,
    pub memory_limit_mib: Option<u64>,
    pub shm_size_mib: Option<u64>,
    pub rdma_ports_active: usize,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuSummary {
    pub available: bool,
    /// Why no GPU is usable, when none is.
    pub reason: Option<String>,
    /// NVIDIA GPUs on the PCI bus (seen even without a driver).
    pub pci_gpus: usize,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub devices: Vec<GpuBrief>,
    /// How the GPUs are connected (aisp_gpu_topology's summary).
    pub topology: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuBrief {
    pub index: u32,
    pub name: Option<String>,
    pub memory_total_mib: Option<u64>,
    pub memory_used_mib: Option<u64>,
    pub compute_capability: Option<String>,
    pub architecture: Option<String>,
    pub sm_count: Option<u32>,
    pub memory_bandwidth_theoretical_gb_per_s: Option<f64>,
    pub utilization_gpu_pct: Option<u32>,
    /// Power, temperature, clocks and throttling in one sentence.
    pub power: String,
    pub throttled: Option<bool>,
    pub processes: usize,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SoftwareSummary {
    pub python: Option<String>,
    pub torch: Option<String>,
    pub torch_cuda: Option<String>,
    /// Other ML packages found, as `name version`.
    pub packages: Vec<String>,
    pub nvcc: Option<String>,
    pub nsys: Option<String>,
    pub ncu: Option<String>,
    pub nvrtc: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HealthSummary {
    /// error, warning, info or ok (aisp_system_dependencies).
    pub dependencies: Health,
    /// Dependency errors and warnings, worst first.
    pub problems: Vec<String>,
    /// Kernel parameters that differ from the recommendation.
    pub parameters_differ: Vec<String>,
    pub container_mismatches: Vec<String>,
    pub env_warnings: Vec<String>,
    pub network: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FullContext {
    pub gpu_info: Vec<GpuInfo>,
    pub gpu_power: Vec<GpuPower>,
    pub topology: Option<Topology>,
    pub capabilities: Vec<DeviceCapabilities>,
    pub software: SoftwareReport,
    pub dependencies: DependenciesReport,
    pub cpu_memory: CpuMemoryReport,
    pub parameters: ParametersReport,
    pub container: ContainerReport,
    pub network: NetworkReport,
    pub env: EnvReport,
}

/// Everything the context is built from (shared with aisp_triage).
pub struct Gathered {
    pub gpu_info: Vec<GpuInfo>,
    pub gpu_power: Vec<GpuPower>,
    pub topology: Option<Topology>,
    pub software: SoftwareReport,
    pub dependencies: DependenciesReport,
    pub cpu_memory: CpuMemoryReport,
    pub parameters: ParametersReport,
    pub container: ContainerReport,
    pub network: NetworkReport,
    pub env: EnvReport,
    pub pci_gpus: usize,
}

/// Run every probe. GPU probes run only when `gpu` is available.
pub fn gather(host: &HostRoot, env_vars: &[(String, String)], gpu: &GpuAvailability) -> Gathered {
    let nvml = gpu.nvml.as_deref().filter(|_| gpu.available);
    let indices: Vec<u32> = gpu.devices.iter().map(|d| d.index).collect();
    let opts = SoftwareOptions {
        nvml_driver_version: gpu.driver_version.clone(),
        nvml_cuda_driver_version: gpu.cuda_driver_version.clone(),
        // Libraries are loaded into this process: only meaningful on the live host.
        skip_libraries: !host.is_live(),
        ..Default::default()
    };
    std::thread::scope(|s| {
        let sw = s.spawn(|| software::inspect(host, env_vars, &opts));
        let versions = DriverVersions {
            driver_version: gpu.driver_version.clone(),
            cuda_driver_version: gpu.cuda_driver_version.clone(),
        };
        let (gpu_info, gpu_power, topology) = match nvml {
            Some(nvml) => (
                indices
                    .iter()
                    .map(|&i| crate::gpu::info::probe(nvml, i, &versions))
                    .collect(),
                indices
                    .iter()
                    .map(|&i| crate::gpu::power::probe(nvml, i))
                    .collect(),
                (indices.len() > 1).then(|| crate::gpu::topology::probe(nvml, &indices, host)),
            ),
            None => (Vec::new(), Vec::new(), None),
        };
        let cpu_memory = cpu_memory::inspect(host);
        let numa_cpu_nodes = cpu_memory
            .numa_nodes
            .iter()
            .filter(|n| n.cpu_count > 0)
            .count();
        let parameters = parameters::inspect(host, numa_cpu_nodes);
        let pci_gpus = cpu_memory.gpus.len();
        let gpu_count = if gpu.available {
            Some(indices.len() as u32)
        } else {
            Some(pci_gpus as u32).filter(|&n| n > 0)
        };
        let container = container::inspect(host, env_vars, gpu_count);
        let network = network::inspect(host, env_vars);
        let env = env::inspect(
            env_vars,
            std::env::current_dir()
                .ok()
                .map(|p| p.display().to_string()),
        );
        let software = sw.join().unwrap_or_else(|_| {
            software::inspect(
                host,
                env_vars,
                &SoftwareOptions {
                    skip_python: true,
                    skip_libraries: true,
                    ..Default::default()
                },
            )
        });
        let facts = GpuFacts {
            pci_gpus,
            compute_capabilities: gpu_info
                .iter()
                .filter_map(|g| g.compute_capability.clone())
                .collect(),
        };
        let dependencies =
            dependencies::check(&software, &facts, &dependencies::system_nccl_libraries());
        Gathered {
            gpu_info,
            gpu_power,
            topology,
            software,
            dependencies,
            cpu_memory,
            parameters,
            container,
            network,
            env,
            pci_gpus,
        }
    })
}

/// Build the report from what was gathered.
pub fn assemble(
    g: Gathered,
    gpu: &GpuAvailability,
    detail: Detail,
    started: Instant,
) -> ContextReport {
    let cm = &g.cpu_memory;
    let host = HostSummary {
        os: g.software.os.name.clone(),
        kernel: g.software.os.kernel.clone(),
        cpu_model: cm.cpu.model.clone(),
        sockets: cm.cpu.sockets,
        cores: cm.cpu.cores,
        threads: cm.cpu.threads,
        memory_total_mib: cm.memory.total_mib,
        numa_nodes_with_cpus: cm.numa_nodes.iter().filter(|n| n.cpu_count > 0).count(),
        in_container: g.container.in_container,
        container_runtime: g.container.runtime.clone(),
        effective_cpus: g.container.effective_cpus,
        memory_limit_mib: g.container.memory_limit_bytes.map(|b| b >> 20),
        shm_size_mib: g.container.shm_size_bytes.map(|b| b >> 20),
        rdma_ports_active: g
            .network
            .rdma_devices
            .iter()
            .flat_map(|d| &d.ports)
            .filter(|p| p.state.as_deref() == Some("ACTIVE"))
            .count(),
    };
    let devices = g
        .gpu_info
        .iter()
        .map(|i| {
            let p = g.gpu_power.iter().find(|p| p.index == i.index);
            GpuBrief {
                index: i.index,
                name: i.name.clone(),
                memory_total_mib: i.memory.total_mib,
                memory_used_mib: i.memory.used_mib,
                compute_capability: i.compute_capability.clone(),
                architecture: i.architecture.clone(),
                sm_count: i.sm_count,
                memory_bandwidth_theoretical_gb_per_s: i.memory_bandwidth_theoretical_gb_per_s,
                utilization_gpu_pct: i.utilization_gpu_pct,
                power: p.map(|p| p.summary.clone()).unwrap_or_default(),
                throttled: p.and_then(|p| p.throttled),
                processes: i.processes.len(),
            }
        })
        .collect();
    let gpu_summary = GpuSummary {
        available: gpu.available,
        reason: gpu.reason.clone(),
        pci_gpus: g.pci_gpus,
        driver_version: g.software.driver.version.clone(),
        cuda_driver_version: g.software.driver.cuda_driver_version.clone(),
        devices,
        topology: g.topology.as_ref().map(|t| t.summary.clone()).or_else(|| {
            (gpu.available && gpu.devices.len() == 1).then(|| "1 GPU: no peers.".to_string())
        }),
    };
    let py = g.software.python.as_ref();
    let main = ["torch"];
    let software = SoftwareSummary {
        python: py.and_then(|p| p.version.clone()),
        torch: py.and_then(|p| p.package("torch").map(String::from)),
        torch_cuda: py.and_then(|p| p.torch_cuda.clone()),
        packages: py
            .map(|p| {
                p.packages
                    .iter()
                    .filter(|x| !main.contains(&x.name.as_str()) && !x.name.starts_with("nvidia-"))
                    .map(|x| format!("{} {}", x.name, x.version))
                    .collect()
            })
            .unwrap_or_default(),
        nvcc: g.software.tool("nvcc").and_then(|t| t.version.clone()),
        nsys: g.software.tool("nsys").and_then(|t| t.version.clone()),
        ncu: g.software.tool("ncu").and_then(|t| t.version.clone()),
        nvrtc: g
            .software
            .library("libnvrtc")
            .and_then(|l| l.version.clone()),
    };
    let health = HealthSummary {
        dependencies: g.dependencies.overall,
        problems: g
            .dependencies
            .checks
            .iter()
            .filter(|c| matches!(c.status, Health::Error | Health::Warning))
            .map(|c| format!("{}: {}", c.component, c.message))
            .collect(),
        parameters_differ: g
            .parameters
            .parameters
            .iter()
            .filter(|p| p.status == ParamStatus::Differs)
            .map(|p| {
                format!(
                    "{} = {} (recommended {})",
                    p.name,
                    p.value.as_deref().unwrap_or("?"),
                    p.recommended
                )
            })
            .collect(),
        container_mismatches: g
            .container
            .mismatches
            .iter()
            .map(|m| m.issue.clone())
            .collect(),
        env_warnings: g.env.warnings.clone(),
        network: g.network.findings.iter().take(3).cloned().collect(),
    };
    let full = (detail == Detail::Full).then(|| {
        let capabilities = g
            .gpu_info
            .iter()
            .filter_map(|i| {
                let cc = i.compute_capability.as_deref()?;
                let attrs = i
                    .pci_bus_id
                    .as_deref()
                    .and_then(|b| crate::gpu::cuda::attributes_for_pci(b).ok());
                Some(crate::gpu::capabilities::describe(
                    cc,
                    Some(i.index),
                    i.name.clone(),
                    attrs.as_ref(),
                ))
            })
            .collect();
        Box::new(FullContext {
            gpu_info: g.gpu_info,
            gpu_power: g.gpu_power,
            topology: g.topology,
            capabilities,
            software: g.software,
            dependencies: g.dependencies,
            cpu_memory: g.cpu_memory,
            parameters: g.parameters,
            container: g.container,
            network: g.network,
            env: g.env,
        })
    });
    ContextReport {
        detail,
        host,
        gpu: gpu_summary,
        software,
        health,
        full,
        elapsed_ms: started.elapsed().as_millis() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_container_sample_builds_a_context_without_a_gpu() {
        let host = HostRoot::at(format!(
            "{}/tests/data/host/container-vm-2cpu",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        ));
        let gpu = GpuAvailability::unavailable("test host without GPU", false);
        let started = Instant::now();
        let g = gather(&host, &[("PATH".into(), "/nonexistent".into())], &gpu);
        let r = assemble(g, &gpu, Detail::Summary, started);
        assert_eq!(r.host.os.as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
        assert_eq!(r.host.cpu_model.as_deref(), Some("AMD EPYC"));
        assert_eq!(r.host.threads, Some(2));
        assert_eq!(r.host.memory_total_mib, Some(24_105));
        assert!(r.host.in_container);
        assert_eq!(r.host.effective_cpus, Some(2));
        assert!(!r.gpu.available);
        assert_eq!(r.gpu.reason.as_deref(), Some("test host without GPU"));
        assert_eq!(r.gpu.pci_gpus, 0);
        assert!(r.gpu.devices.is_empty());
        assert_eq!(r.software.python, None, "no python on PATH=/nonexistent");
        assert_eq!(
            r.health
                .parameters_differ
                .iter()
                .filter(|p| p.starts_with("vm.swappiness = 60"))
                .count(),
            1
        );
        assert_eq!(r.health.container_mismatches.len(), 2);
        assert!(r.full.is_none());
        let size = serde_json::to_string(&r).unwrap().len();
        assert!(size < 8_000, "summary context is {size} bytes");
    }
}
