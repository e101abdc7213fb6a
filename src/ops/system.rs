//! Operations of the `system` domain.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::errors::GpuCheck;
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, OpSpec, Operation};
use aisp_hw::host::HostRoot;
use aisp_hw::system::{
    container, context, cpu_memory, dependencies, env, monitor, network, parameters, software,
    triage,
};

pub const OPERATIONS: &[&dyn DynOperation] = &[
    &Monitor,
    &Software,
    &Dependencies,
    &Capabilities,
    &Parameters,
    &Container,
    &CpuMemory,
    &Network,
    &Env,
    &Context,
    &Triage,
];

pub struct Monitor;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MonitorInput {
    /// How long to sample, in seconds (default 5, at most 3600).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 3600))]
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
            "watch the gpu",
            "cpu load",
            "cpu usage",
            "dmon",
            "sample utilization over time",
            "while my job runs",
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

// ---------------------------------------------------------------------------
// Probes of the host: each reads /proc, /sys and a few programs, works
// without a GPU, and returns in well under a second.
// ---------------------------------------------------------------------------

/// No arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoInput {}

fn live() -> HostRoot {
    HostRoot::live()
}

/// NVIDIA GPU count as the host sees it: NVML's when usable, else the PCI bus's.
fn gpu_count(ctx: &OpContext) -> Option<u32> {
    let gpu = ctx.app().gpu();
    if gpu.available {
        Some(gpu.devices.len() as u32)
    } else {
        let n = aisp_hw::host::pci::nvidia_gpus(&live()).len() as u32;
        (n > 0).then_some(n)
    }
}

pub struct Software;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SoftwareInput {
    /// Ask the Python interpreter on PATH for package versions (one subprocess reading package metadata; default true).
    #[serde(default)]
    pub python: Option<bool>,
}

impl Operation for Software {
    type Input = SoftwareInput;
    type Output = software::SoftwareReport;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Software stack",
        summary: "OS and kernel, NVIDIA driver and CUDA version, NVRTC/cuBLAS found, nvcc/nsys/ncu with versions, Python with torch (and its CUDA), triton, transformers, vllm, flash-attn, deepspeed, jax.",
        description: "Reports the software a GPU job runs on: OS and kernel, NVIDIA driver version and kernel module flavour \
(open/proprietary), the highest CUDA version the driver supports, the NVRTC and cuBLAS versions the loader finds (and their paths), \
nvcc, nsys and ncu with versions (searching PATH and the usual folders: /usr/local/cuda*/bin, /opt/nvidia/nsight-systems*, \
/opt/nvidia/nsight-compute/*), and, when a Python interpreter is found, its version and the versions of torch (with the CUDA \
version it was built for), torchvision, triton, transformers, accelerate, vllm, sglang, flash-attn, xformers, deepspeed, \
megatron-core, transformer-engine, jax/jaxlib, TensorRT(-LLM), NCCL/cuDNN/cuBLAS wheels and more — read from package metadata by \
one Python subprocess, never importing them. Findings say what each result means for performance work. Use it to see what is \
installed; aisp_system_dependencies judges whether it fits together. Takes under a second.",
        intents: &[
            "software versions",
            "versions installed",
            "what cuda version",
            "driver version",
            "torch version",
            "is nsys installed",
            "python packages",
            "cuda toolkit",
            "nvcc version",
        ],
        example: r#"{"python": true}"#,
        ..OpSpec::new("system", "software")
    };

    fn run(
        &self,
        ctx: &OpContext,
        input: SoftwareInput,
    ) -> Result<software::SoftwareReport, OpError> {
        let gpu = ctx.app().gpu();
        Ok(software::inspect(
            &live(),
            &env::process_env(),
            &software::SoftwareOptions {
                nvml_driver_version: gpu.driver_version.clone(),
                nvml_cuda_driver_version: gpu.cuda_driver_version.clone(),
                skip_python: input.python == Some(false),
                ..Default::default()
            },
        ))
    }
}

pub struct Dependencies;

impl Operation for Dependencies {
    type Input = NoInput;
    type Output = dependencies::DependenciesReport;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Dependency health",
        summary: "Judges the GPU software stack: torch/nvcc/NVRTC/jax built for a CUDA the driver supports, NCCL present, package pins satisfied, profilers found — each problem with a fix.",
        description: "Checks that the stack fits together: the NVIDIA driver is usable when GPUs are on the PCI bus; torch is a \
CUDA build whose CUDA version the driver supports (directly or through minor version compatibility, with the minimum driver per \
CUDA major from the CUDA release notes); exact pins of installed packages hold (e.g. vllm requires torch==2.5.1); triton is not \
installed twice; flash-attn has an Ampere or newer GPU; NCCL is present (pip wheel or system library); nvcc matches the driver and \
torch's CUDA major (needed to build extensions); NVRTC is loadable for aisp's benchmarks; nsys and ncu are installed and on PATH. \
Each check has a status (error, warning, info, ok) and a fix. Use it when imports fail, CUDA reports an insufficient driver, or \
before building extensions. Takes under a second (it runs the software probe).",
        intents: &[
            "dependency check",
            "cuda version mismatch",
            "torch cuda not available",
            "driver too old",
            "nccl missing",
            "package conflicts",
            "environment health",
        ],
        ..OpSpec::new("system", "dependencies")
    };

    fn run(
        &self,
        ctx: &OpContext,
        _input: NoInput,
    ) -> Result<dependencies::DependenciesReport, OpError> {
        let gpu = ctx.app().gpu();
        let host = live();
        let sw = software::inspect(
            &host,
            &env::process_env(),
            &software::SoftwareOptions {
                nvml_driver_version: gpu.driver_version.clone(),
                nvml_cuda_driver_version: gpu.cuda_driver_version.clone(),
                ..Default::default()
            },
        );
        let mut ccs = Vec::new();
        if let Some(nvml) = gpu.nvml.as_deref().filter(|_| gpu.available) {
            for d in &gpu.devices {
                if let Ok(c) = nvml
                    .device_by_index(d.index)
                    .and_then(|dev| dev.cuda_compute_capability())
                {
                    ccs.push(format!("{}.{}", c.major, c.minor));
                }
            }
        }
        let facts = dependencies::GpuFacts {
            pci_gpus: aisp_hw::host::pci::nvidia_gpus(&host).len(),
            compute_capabilities: ccs,
        };
        Ok(dependencies::check(
            &sw,
            &facts,
            &dependencies::system_nccl_libraries(),
        ))
    }
}

pub struct Capabilities;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilitiesInput {
    /// GPU index (NVML order); default all GPUs on this machine.
    #[serde(default)]
    pub device: Option<u32>,
    /// Describe a compute capability instead of a local GPU, e.g. "9.0", "sm_100a", "8.9" (works without a GPU).
    #[serde(default)]
    pub compute_capability: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CapabilitiesOutput {
    /// One entry per GPU described (or for the requested compute capability).
    pub devices: Vec<aisp_hw::gpu::capabilities::DeviceCapabilities>,
    /// The whole architecture table, when there is no GPU and no compute capability was given.
    pub architectures: Option<Vec<aisp_hw::gpu::arch::ArchEntry>>,
    pub notes: Vec<String>,
}

impl Operation for Capabilities {
    type Input = CapabilitiesInput;
    type Output = CapabilitiesOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU capabilities",
        summary: "From compute capability and device attributes: tensor core generation and precisions (TF32, BF16, FP16, FP8, FP6/FP4), TMA, clusters/DSMEM, wgmma/tcgen05, async copy, shared memory, L2, registers — and what each enables.",
        description: "Describes what each GPU can do: tensor core generation and the precisions its tensor cores take (FP64, \
TF32, BF16, FP16, FP8, FP6, FP4, INT8, INT4), architectural features (cp.async, TMA, thread block clusters, distributed shared \
memory, wgmma, tcgen05) from aisp's architecture table (compiled in, with sources), driver-reported features (cluster launch, \
tensor maps, multicast, GPUDirect RDMA, DMA-BUF, pageable memory access), and the exact limits from the CUDA driver (SMs, \
shared memory per block/SM with and without opt-in, L2 and persisting-L2 size, registers, threads and blocks per SM, warp size). \
Each capability says what it enables, and the arch to build for (e.g. 9.0a, with the nvcc -gencode flag). Without a GPU, pass \
`compute_capability` to look one up, or get the whole table. Fast.",
        intents: &[
            "gpu capabilities",
            "compute capability",
            "shared memory size",
            "tma",
            "bf16 support",
            "which arch flag",
            "supported precisions",
        ],
        example: r#"{"compute_capability": "9.0"}"#,
        ..OpSpec::new("system", "capabilities")
    };

    fn run(
        &self,
        ctx: &OpContext,
        input: CapabilitiesInput,
    ) -> Result<CapabilitiesOutput, OpError> {
        use aisp_hw::gpu::capabilities::describe;
        let mut notes = Vec::new();
        if let Some(cc) = &input.compute_capability {
            if aisp_hw::gpu::arch::normalize_cc(cc).is_none() {
                return Err(OpError::invalid_input(
                    format!("`{cc}` is not a compute capability"),
                    "Pass e.g. \"9.0\", \"8.9\", \"sm_100a\" or \"120\".",
                ));
            }
            return Ok(CapabilitiesOutput {
                devices: vec![describe(cc, None, None, None)],
                architectures: None,
                notes,
            });
        }
        let gpu = ctx.app().gpu();
        let Some(nvml) = gpu.nvml.as_deref().filter(|_| gpu.available) else {
            if input.device.is_some() {
                return Err(gpu.unavailable_error("aisp_system_capabilities"));
            }
            notes.push(format!(
                "No GPU here ({}): returning aisp's whole architecture table; pass compute_capability to describe one.",
                gpu.reason.as_deref().unwrap_or("unknown reason")
            ));
            return Ok(CapabilitiesOutput {
                devices: Vec::new(),
                architectures: Some(aisp_hw::gpu::arch::table().to_vec()),
                notes,
            });
        };
        let mut devices = Vec::new();
        for i in gpu.check_device(input.device)? {
            let dev = match nvml.device_by_index(i) {
                Ok(d) => d,
                Err(e) => {
                    notes.push(format!(
                        "GPU {i}: {}",
                        aisp_hw::gpu::describe_nvml_error(&e)
                    ));
                    continue;
                }
            };
            let Ok(cc) = dev.cuda_compute_capability() else {
                notes.push(format!(
                    "GPU {i}: NVML does not report its compute capability"
                ));
                continue;
            };
            let attrs = match dev.pci_info() {
                Ok(p) => match aisp_hw::gpu::cuda::attributes_for_pci(&p.bus_id) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        notes.push(format!("GPU {i}: device attributes: {e}"));
                        None
                    }
                },
                Err(_) => None,
            };
            devices.push(describe(
                &format!("{}.{}", cc.major, cc.minor),
                Some(i),
                dev.name().ok(),
                attrs.as_ref(),
            ));
        }
        Ok(CapabilitiesOutput {
            devices,
            architectures: None,
            notes,
        })
    }
}

pub struct Parameters;

impl Operation for Parameters {
    type Input = NoInput;
    type Output = parameters::ParametersReport;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Kernel parameters",
        summary: "NUMA balancing, transparent huge pages, swappiness, dirty ratios, zone reclaim, perf_event_paranoid, CPU governor, IOMMU, TCP buffers, somaxconn: value, recommended value for GPU hosts, why, and the fix.",
        description: "Reads the kernel settings that affect GPU training and inference hosts — kernel.numa_balancing, \
transparent hugepage enabled/defrag, vm.swappiness, vm.dirty_ratio and dirty_background_ratio, vm.zone_reclaim_mode, \
kernel.perf_event_paranoid (Nsight Systems CPU sampling), the CPU frequency governor, the IOMMU mode (P2P and GPUDirect RDMA), \
net.core.rmem_max/wmem_max, net.ipv4.tcp_rmem/tcp_wmem and net.core.somaxconn — and reports each value, the recommended value, \
whether it differs, why it matters, the command that fixes it and where the behaviour is documented. NUMA settings are only \
judged on hosts with several NUMA nodes. Read-only; instant.",
        intents: &[
            "kernel parameters",
            "kernel settings",
            "sysctl",
            "numa balancing",
            "transparent huge pages",
            "cpu governor",
            "tune the host",
            "perf_event_paranoid",
            "swappiness",
        ],
        ..OpSpec::new("system", "parameters")
    };

    fn run(
        &self,
        _ctx: &OpContext,
        _input: NoInput,
    ) -> Result<parameters::ParametersReport, OpError> {
        let host = live();
        let nodes = aisp_hw::system::cpu_memory::inspect(&host)
            .numa_nodes
            .iter()
            .filter(|n| n.cpu_count > 0)
            .count();
        Ok(parameters::inspect(&host, nodes))
    }
}

pub struct Container;

impl Operation for Container {
    type Input = NoInput;
    type Output = container::ContainerReport;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Container and cgroup limits",
        summary: "Whether aisp runs in a container, cgroup version, CPU quota, cpuset and affinity, memory and pids limits, /dev/shm size, memlock and open-files limits, and the mismatches that hurt GPU jobs.",
        description: "Detects a container (Docker, Podman, Kubernetes, containerd, LXC) and reads this process's cgroup \
limits (v1, v2 or hybrid, walking up the group's ancestors): CPU quota in CPUs, cpuset and affinity CPUs and the effective CPU \
count, memory limit against host memory, pids limit, the size of /dev/shm, and the locked-memory and open-files ulimits. Reports \
mismatches with their impact and fix: fewer CPUs than one rank plus DataLoader workers per GPU need, OMP_NUM_THREADS above the \
usable CPUs, a small /dev/shm (DataLoader 'bus error'), a memory limit below host memory, a low pids limit, a memlock limit that \
breaks RDMA, few open files. Works on bare hosts too. Instant.",
        intents: &[
            "am i in a container",
            "docker container",
            "running in docker",
            "cgroup limits",
            "docker shm size",
            "/dev/shm",
            "cpu quota",
            "memory limit",
            "dataloader bus error",
            "ulimit memlock",
        ],
        ..OpSpec::new("system", "container")
    };

    fn run(&self, ctx: &OpContext, _input: NoInput) -> Result<container::ContainerReport, OpError> {
        Ok(container::inspect(
            &live(),
            &env::process_env(),
            gpu_count(ctx),
        ))
    }
}

pub struct CpuMemory;

#[derive(Debug, Serialize, JsonSchema)]
pub struct CpuMemoryOutput {
    #[serde(flatten)]
    pub report: cpu_memory::CpuMemoryReport,
    /// NVML index of each GPU in `gpus` (same order), when NVML is usable.
    pub gpu_nvml_indices: Vec<Option<u32>>,
}

impl Operation for CpuMemory {
    type Input = NoInput;
    type Output = CpuMemoryOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "CPU, memory and NUMA",
        summary: "CPU model, sockets, cores, threads, caches, memory, NUMA nodes with their CPUs and memory, huge pages, and each GPU's NUMA node and local CPUs.",
        description: "Reads the host's CPU and memory layout from /proc and /sys: CPU model (including ARM parts such as \
NVIDIA Grace), sockets, physical cores, hardware threads, notable instruction-set extensions (AVX-512, AMX, SVE), the cache \
hierarchy (size, sharing, instances), memory and swap, every NUMA node with its CPUs, memory and distances, explicit huge pages, \
and each NVIDIA GPU on the PCI bus with its NUMA node, local CPUs and PCIe link (current vs max) — no GPU library needed. \
Findings say whether NUMA pinning is needed and flag degraded PCIe links. Use it to pin ranks and DataLoader workers next to their \
GPU. Instant.",
        intents: &[
            "cpu info",
            "numa nodes",
            "gpu numa affinity",
            "how many cores",
            "cache sizes",
            "memory size",
            "huge pages",
            "pin processes to numa",
        ],
        ..OpSpec::new("system", "cpu_memory")
    };

    fn run(&self, ctx: &OpContext, _input: NoInput) -> Result<CpuMemoryOutput, OpError> {
        let report = cpu_memory::inspect(&live());
        let gpu = ctx.app().gpu();
        let nvml_bus: Vec<(u32, String)> = match gpu.nvml.as_deref().filter(|_| gpu.available) {
            Some(nvml) => gpu
                .devices
                .iter()
                .filter_map(|d| {
                    let p = nvml.device_by_index(d.index).ok()?.pci_info().ok()?;
                    Some((d.index, aisp_hw::host::pci::normalize_bus_id(&p.bus_id)?))
                })
                .collect(),
            None => Vec::new(),
        };
        let gpu_nvml_indices = report
            .gpus
            .iter()
            .map(|g| {
                nvml_bus
                    .iter()
                    .find(|(_, b)| *b == g.pci_bus_id)
                    .map(|(i, _)| *i)
            })
            .collect();
        Ok(CpuMemoryOutput {
            report,
            gpu_nvml_indices,
        })
    }
}

pub struct Network;

impl Operation for Network {
    type Input = NoInput;
    type Output = network::NetworkReport;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Network and RDMA",
        summary: "Interfaces with state, speed and MTU; InfiniBand/RoCE adapters with port states and rates; GPUDirect RDMA modules (nvidia_peermem, gdrdrv, nvidia_fs); NCCL variables set.",
        description: "Reads the network side of multi-GPU and multi-node work: every interface with state, MTU, link speed, \
type and whether it is physical (with its PCI address and NUMA node), every RDMA device in /sys/class/infiniband with its ports' \
state, physical state, rate and link layer (InfiniBand or Ethernet/RoCE), whether the GPUDirect kernel modules are loaded \
(nvidia_peermem or nv_peer_mem for GPUDirect RDMA, gdrdrv for GDRCopy, nvidia_fs for GPUDirect Storage), and the NCCL_*/UCX_* \
variables set (secrets redacted). Findings flag missing RDMA, ports not ACTIVE, a missing peer-memory module, and fast Ethernet \
links without jumbo frames. Instant.",
        intents: &[
            "network interfaces",
            "infiniband",
            "roce",
            "gpudirect rdma",
            "gpudirect",
            "nvidia_peermem",
            "nccl network",
            "multi-node networking",
            "nic speed",
        ],
        ..OpSpec::new("system", "network")
    };

    fn run(&self, _ctx: &OpContext, _input: NoInput) -> Result<network::NetworkReport, OpError> {
        Ok(network::inspect(&live(), &env::process_env()))
    }
}

pub struct Env;

impl Operation for Env {
    type Input = NoInput;
    type Output = env::EnvReport;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Environment variables",
        summary: "The environment variables that change GPU jobs (CUDA_VISIBLE_DEVICES, NCCL_*, TORCH_*, PYTORCH_CUDA_ALLOC_CONF, OMP_NUM_THREADS, ...), explained, with secrets redacted and risky settings flagged.",
        description: "Lists the variables of aisp's environment that matter for GPU work — CUDA_*, NCCL_*, TORCH_*, \
TORCHINDUCTOR_*, PYTORCH_*, NVIDIA_*, OMP_*/MKL_*, UCX_*, HF_*, VLLM_*, TRITON_*, JAX/XLA, DeepSpeed, Slurm and MPI ranks, \
LD_LIBRARY_PATH/LD_PRELOAD, virtualenv/conda — each with its meaning for the well-known ones. Values of variables whose names \
suggest a secret (TOKEN, KEY, SECRET, PASSWORD, ...) and passwords inside URLs are redacted. Warnings flag settings that slow \
things down or hide problems (CUDA_LAUNCH_BLOCKING=1, NCCL_P2P_DISABLE=1, NVIDIA_TF32_OVERRIDE=0, ...). Note: this is the \
environment of the aisp process, which your job may not share. Instant.",
        intents: &[
            "environment variables",
            "env vars",
            "cuda_visible_devices",
            "nccl env",
            "pytorch_cuda_alloc_conf",
            "omp_num_threads",
        ],
        ..OpSpec::new("system", "env")
    };

    fn run(&self, _ctx: &OpContext, _input: NoInput) -> Result<env::EnvReport, OpError> {
        Ok(env::inspect(
            &env::process_env(),
            std::env::current_dir()
                .ok()
                .map(|p| p.display().to_string()),
        ))
    }
}

pub struct Context;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextInput {
    /// `summary` (default): a compact digest; `full`: the digest plus every underlying report.
    #[serde(default)]
    pub detail: Option<context::Detail>,
}

impl Operation for Context {
    type Input = ContextInput;
    type Output = context::ContextReport;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "System context",
        summary: "Everything about this machine in one call: host, GPUs (state, power, topology), software stack, and what is wrong (dependency problems, kernel parameters, container limits, environment, network).",
        description: "Every GPU and system probe condensed for a model's context: host (OS, CPU, memory, NUMA, container limits), GPUs (memory, bandwidth, utilization, power and throttling, topology), software (Python, torch, CUDA, nsys, ncu) and health problems; detail: full attaches every report. Works without a GPU; about a second.",
        intents: &[
            "system context",
            "describe this machine",
            "overview of this machine",
            "full system analysis",
            "environment summary",
            "everything about the system",
            "hardware and software",
        ],
        example: r#"{"detail": "summary"}"#,
        ..OpSpec::new("system", "context")
    };

    fn run(&self, ctx: &OpContext, input: ContextInput) -> Result<context::ContextReport, OpError> {
        let started = std::time::Instant::now();
        let gpu = ctx.app().gpu();
        let gathered = context::gather(&live(), &env::process_env(), gpu);
        ctx.check_cancelled()?;
        Ok(context::assemble(
            gathered,
            gpu,
            input.detail.unwrap_or_default(),
            started,
        ))
    }
}

pub struct Triage;

#[derive(Debug, Serialize, JsonSchema)]
pub struct TriageOutput {
    /// aisp version.
    pub version: String,
    pub gpu_available: bool,
    /// Why no GPU is usable, when none is.
    pub gpu_reason: Option<String>,
    /// Whether tools that run commands (profiler captures) may run.
    pub exec_allowed: bool,
    /// The compact system context.
    pub context: context::ContextReport,
    /// The three most useful next steps on this machine, each naming the tool to call.
    pub next_steps: Vec<triage::NextStep>,
}

impl Operation for Triage {
    type Input = NoInput;
    type Output = TriageOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        short: true,
        title: "Triage this machine",
        summary: "Status, a compact system context, and the three most useful next steps for this machine, each naming the tool to call and why.",
        description: "The first call on an unfamiliar machine: status, the compact system context (host, GPUs, power and throttling, topology, software, health) and the three most useful next steps, each naming the tool, its arguments and why. Works without a GPU; about a second.",
        intents: &[
            "triage",
            "where do i start",
            "what should i check",
            "check first",
            "health check",
            "first steps",
            "diagnose this machine",
            "new machine",
            "just got access",
        ],
        tier: crate::registry::Tier::Core,
        ..OpSpec::new("system", "triage")
    };

    fn run(&self, ctx: &OpContext, _input: NoInput) -> Result<TriageOutput, OpError> {
        let started = std::time::Instant::now();
        let app = ctx.app();
        let gpu = app.gpu();
        let gathered = context::gather(&live(), &env::process_env(), gpu);
        ctx.check_cancelled()?;
        let report = context::assemble(gathered, gpu, context::Detail::Summary, started);
        let exists = |t: &str| crate::registry::find(t).is_some();
        let next_steps = triage::next_steps(&report, &exists);
        Ok(TriageOutput {
            version: env!("CARGO_PKG_VERSION").to_string(),
            gpu_available: gpu.available,
            gpu_reason: gpu.reason.clone(),
            exec_allowed: app.config.allow_exec,
            context: report,
            next_steps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppState;
    use aisp_hw::gpu::GpuAvailability;

    fn no_gpu_ctx() -> OpContext {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(GpuAvailability::unavailable("no GPU in this test", false));
        OpContext::detached(app)
    }

    #[test]
    fn every_system_tool_returns_real_data_without_a_gpu() {
        let ctx = no_gpu_ctx();
        for op in OPERATIONS {
            let spec = op.spec();
            assert!(!spec.needs_gpu, "{}", spec.tool_name());
            let args = if spec.name == "monitor" {
                serde_json::json!({"duration_s": 0.1, "interval_ms": 50})
            } else {
                serde_json::json!({})
            };
            let out = op
                .call_json(&ctx, args)
                .unwrap_or_else(|e| panic!("{} failed: {e}", spec.tool_name()));
            assert!(out.is_object(), "{}", spec.tool_name());
        }
    }

    #[test]
    fn live_probes_read_this_host() {
        let ctx = no_gpu_ctx();
        let cm = CpuMemory.run(&ctx, NoInput {}).unwrap();
        let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|t| aisp_hw::host::parse_cpu_list(&t))
            .map(|c| c.len() as u32);
        assert_eq!(cm.report.cpu.threads, online);
        let p = Parameters.run(&ctx, NoInput {}).unwrap();
        let swappiness = std::fs::read_to_string("/proc/sys/vm/swappiness")
            .ok()
            .map(|s| s.trim().to_string());
        assert_eq!(
            p.parameters
                .iter()
                .find(|x| x.name == "vm.swappiness")
                .unwrap()
                .value,
            swappiness
        );
        let caps = Capabilities
            .run(&ctx, CapabilitiesInput::default())
            .unwrap();
        assert_eq!(caps.architectures.map(|a| a.len()), Some(12));
        let h = Capabilities
            .run(
                &ctx,
                CapabilitiesInput {
                    device: None,
                    compute_capability: Some("sm_90a".into()),
                },
            )
            .unwrap();
        assert_eq!(h.devices[0].architecture.as_deref(), Some("Hopper"));
        let bad = Capabilities.run(
            &ctx,
            CapabilitiesInput {
                device: None,
                compute_capability: Some("hopper".into()),
            },
        );
        assert_eq!(bad.unwrap_err().kind, crate::error::ErrorKind::InvalidInput);
    }

    #[test]
    fn triage_names_three_existing_tools_and_software_is_fast() {
        let ctx = no_gpu_ctx();
        let t = Triage.run(&ctx, NoInput {}).unwrap();
        assert_eq!(t.next_steps.len(), 3);
        for s in &t.next_steps {
            assert!(
                crate::registry::find(&s.tool).is_some(),
                "{} is not a tool",
                s.tool
            );
            assert!(!s.why.is_empty());
        }
        assert!(!t.gpu_available);
        assert_eq!(t.gpu_reason.as_deref(), Some("no GPU in this test"));
        let started = std::time::Instant::now();
        let sw = Software.run(&ctx, SoftwareInput::default()).unwrap();
        // The issue's budget is 1 s; allow slack for a loaded 2-core CI machine.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(sw.os.kernel.is_some());
        let full = Context
            .run(
                &ctx,
                ContextInput {
                    detail: Some(context::Detail::Full),
                },
            )
            .unwrap();
        assert!(full.full.is_some());
    }
}
