//! Operations of the `gpu` domain: NVML probes (info, topology, power,
//! NVLink). The memory bandwidth test (`aisp_gpu_bandwidth`) is built on the
//! shared CUDA benchmark harness and is added to this list next to them.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::OpContext;
use crate::error::OpError;
use crate::gpu::info::{DriverVersions, GpuInfo};
use crate::gpu::nvlink::GpuNvlink;
use crate::gpu::power::GpuPower;
use crate::gpu::topology::Topology;
use crate::registry::{DynOperation, OpSpec, Operation};
use crate::system::host::HostRoot;

pub const OPERATIONS: &[&dyn DynOperation] = &[&Info, &TopologyOp, &Power, &Nvlink];

/// The `device` argument every GPU probe takes.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceInput {
    /// GPU index as nvidia-smi numbers it (NVML order); default all GPUs.
    #[serde(default)]
    pub device: Option<u32>,
}

fn elapsed_ms(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1e4).round() / 10.0
}

pub struct Info;

#[derive(Debug, Serialize, JsonSchema)]
pub struct InfoOutput {
    pub gpus: Vec<GpuInfo>,
    pub driver_version: Option<String>,
    /// Highest CUDA version the driver supports.
    pub cuda_driver_version: Option<String>,
    /// How long the probe took.
    pub elapsed_ms: f64,
}

impl Operation for Info {
    type Input = DeviceInput;
    type Output = InfoOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU inventory and state",
        summary: "Per GPU: name, UUID, PCI bus, architecture and compute capability, SMs, memory, clocks vs max, theoretical bandwidth, temperatures, power, utilization, ECC, modes, PCIe link, processes.",
        description: "Reads each NVIDIA GPU through NVML (and SM count through the CUDA driver): name, UUID, PCI bus id, \
architecture and compute capability, SM count, memory total/used/free, current and maximum SM, graphics and memory clocks, \
memory bus width and the theoretical memory bandwidth derived from them (bus width / 8 × max memory clock × 2, GB = 10^9 bytes), \
GPU and memory temperature with slowdown/shutdown thresholds, power draw and enforced limit, GPU and memory utilization, \
ECC mode and error counts, persistence, MIG and compute modes, performance state, PCIe generation and width (current and max), \
driver and CUDA versions, and the processes using each GPU with their memory. Fields a GPU does not support are null with the \
reason in `notes`. Use it first on a GPU machine, or to check what `nvidia-smi -q` would say. `device` picks one GPU; default all. \
Fast: under 200 ms on a GPU host.",
        needs_gpu: true,
        intents: &[
            "gpu info",
            "what gpu do I have",
            "nvidia-smi",
            "gpu memory",
            "gpu clocks",
            "sm count",
            "gpu utilization",
            "which processes use the gpu",
            "memory bandwidth theoretical",
        ],
        example: r#"{"device": 0}"#,
        ..OpSpec::new("gpu", "info")
    };

    fn run(&self, ctx: &OpContext, input: DeviceInput) -> Result<InfoOutput, OpError> {
        let t = Instant::now();
        let gpu = ctx.app().gpu();
        let nvml = gpu.require_nvml("aisp_gpu_info")?;
        let indices = gpu.check_device(input.device)?;
        let versions = DriverVersions {
            driver_version: gpu.driver_version.clone(),
            cuda_driver_version: gpu.cuda_driver_version.clone(),
        };
        let gpus = indices
            .iter()
            .map(|&i| crate::gpu::info::probe(nvml, i, &versions))
            .collect();
        Ok(InfoOutput {
            gpus,
            driver_version: gpu.driver_version.clone(),
            cuda_driver_version: gpu.cuda_driver_version.clone(),
            elapsed_ms: elapsed_ms(t),
        })
    }
}

pub struct TopologyOp;

#[derive(Debug, Serialize, JsonSchema)]
pub struct TopologyOutput {
    #[serde(flatten)]
    pub topology: Topology,
    pub elapsed_ms: f64,
}

impl Operation for TopologyOp {
    type Input = DeviceInput;
    type Output = TopologyOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU topology (nvidia-smi topo -m)",
        summary: "The GPU/NIC link matrix as nvidia-smi topo -m draws it (X, NV#, PIX, PXB, PHB, NODE, SYS), P2P read/write/atomics per pair, CPU and NUMA affinity, and a one-line summary.",
        description: "Builds the connection matrix between GPUs (and RDMA NICs) exactly as `nvidia-smi topo -m` draws it: X (self), \
NV# (a bonded set of # NVLinks, counting NVSwitch links as nvidia-smi does), PIX/PXB (one or several PCIe switches), PHB (through a \
PCIe host bridge), NODE (between host bridges of one NUMA node), SYS (across the CPU interconnect). Adds, for every GPU pair, \
the PCIe level and NVML's peer-to-peer read, write, atomics and NVLink status; for every GPU its CPU affinity, NUMA affinity and \
own NUMA id; a text rendering of the matrix; and a summary such as \"8 GPUs, all pairs NVLink ×18; peer-to-peer read/write on all pairs\". \
Use it to place tensor-parallel groups on the fastest links and to see why NCCL is slow between some GPUs. `device` limits `gpus` \
and `pairs` to one GPU (the matrix stays whole). Fast: under 200 ms.",
        needs_gpu: true,
        intents: &[
            "gpu topology",
            "nvlink or pcie",
            "nvidia-smi topo",
            "p2p",
            "peer to peer",
            "numa affinity",
            "which gpus are connected",
            "nvswitch",
        ],
        example: "{}",
        ..OpSpec::new("gpu", "topology")
    };

    fn run(&self, ctx: &OpContext, input: DeviceInput) -> Result<TopologyOutput, OpError> {
        let t = Instant::now();
        let gpu = ctx.app().gpu();
        let nvml = gpu.require_nvml("aisp_gpu_topology")?;
        let selected = gpu.check_device(input.device)?;
        let all = gpu.check_device(None)?;
        let mut topology = crate::gpu::topology::probe(nvml, &all, &HostRoot::live());
        if let Some(d) = input.device {
            topology.gpus.retain(|g| g.index == d);
            topology.pairs.retain(|p| p.gpu_a == d || p.gpu_b == d);
            debug_assert_eq!(selected, vec![d]);
        }
        Ok(TopologyOutput {
            topology,
            elapsed_ms: elapsed_ms(t),
        })
    }
}

pub struct Power;

#[derive(Debug, Serialize, JsonSchema)]
pub struct PowerOutput {
    pub gpus: Vec<GpuPower>,
    pub elapsed_ms: f64,
}

impl Operation for Power {
    type Input = DeviceInput;
    type Output = PowerOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU power, thermals and throttling",
        summary: "Power draw vs limits (default, enforced, min/max), energy, temperatures, fans, clocks vs max, and the active throttle reasons in words.",
        description: "Reads each GPU's power state through NVML: power draw (averaged and instantaneous), the enforced, \
configured, default, minimum and maximum power limits, draw as a percentage of the limit, energy used since driver load, GPU and \
memory temperatures with slowdown/shutdown thresholds, fan speeds, SM/memory/graphics clocks against their maxima, the performance \
state, and the clock event (throttle) reasons decoded into words with what each means (power cap, thermal slowdown, sync boost, \
idle, ...), plus the cumulative time each policy has held clocks down. A one-sentence summary per GPU says whether clocks are held \
down and why. Use it when a job runs slower than expected or clocks look low. Fast: under 200 ms.",
        needs_gpu: true,
        intents: &[
            "gpu power",
            "is the gpu throttling",
            "thermal throttling",
            "power limit",
            "clock speed low",
            "gpu temperature",
            "energy consumption",
        ],
        example: r#"{"device": 0}"#,
        ..OpSpec::new("gpu", "power")
    };

    fn run(&self, ctx: &OpContext, input: DeviceInput) -> Result<PowerOutput, OpError> {
        let t = Instant::now();
        let gpu = ctx.app().gpu();
        let nvml = gpu.require_nvml("aisp_gpu_power")?;
        let gpus = gpu
            .check_device(input.device)?
            .iter()
            .map(|&i| crate::gpu::power::probe(nvml, i))
            .collect();
        Ok(PowerOutput {
            gpus,
            elapsed_ms: elapsed_ms(t),
        })
    }
}

pub struct Nvlink;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NvlinkInput {
    /// GPU index as nvidia-smi numbers it (NVML order); default all GPUs.
    #[serde(default)]
    pub device: Option<u32>,
    /// Read the data counters twice this many milliseconds apart and report throughput (0-2000; default 0: counters only).
    #[serde(default)]
    pub sample_ms: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NvlinkOutput {
    pub gpus: Vec<GpuNvlink>,
    pub elapsed_ms: f64,
}

impl Operation for Nvlink {
    type Input = NvlinkInput;
    type Output = NvlinkOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "NVLink state per link",
        summary: "Per NVLink: active, version, speed, remote device (GPU or NVSwitch) and PCI bus, error counters, and data counters or throughput where supported.",
        description: "Reads every NVLink of each GPU through NVML: whether it is active, its NVLink version, the common link \
speed (GB/s per direction) and the total bidirectional bandwidth, the PCI bus id and type of the device at the other end (GPU, \
NVSwitch) and the GPU index when it is local, replay/recovery/CRC error counters, and the data transmitted and received since \
driver load where the GPU reports it. With `sample_ms` it reads the data counters twice and reports throughput in GB/s. Unsupported \
counters are null with a note. Use it to check that all links are up and error-free, or to see NVLink traffic during a collective. \
Fast: under 200 ms plus sample_ms.",
        needs_gpu: true,
        intents: &[
            "nvlink status",
            "nvlink errors",
            "nvlink bandwidth",
            "nvidia-smi nvlink",
            "nvswitch links",
            "link down",
        ],
        example: r#"{"device": 0, "sample_ms": 100}"#,
        ..OpSpec::new("gpu", "nvlink")
    };

    fn run(&self, ctx: &OpContext, input: NvlinkInput) -> Result<NvlinkOutput, OpError> {
        let t = Instant::now();
        let sample_ms = input.sample_ms.unwrap_or(0);
        if sample_ms > 2000 {
            return Err(OpError::invalid_input(
                format!("sample_ms must be at most 2000, not {sample_ms}"),
                "Pass e.g. \"sample_ms\": 200, or leave it out for counters only.",
            ));
        }
        let gpu = ctx.app().gpu();
        let nvml = gpu.require_nvml("aisp_gpu_nvlink")?;
        let all = gpu.check_device(None)?;
        let bus: Vec<Option<String>> = (0..=all.iter().copied().max().unwrap_or(0))
            .map(|i| {
                nvml.device_by_index(i)
                    .ok()
                    .and_then(|d| d.pci_info().ok())
                    .and_then(|p| crate::system::pci::normalize_bus_id(&p.bus_id))
            })
            .collect();
        let sample = (sample_ms > 0).then(|| Duration::from_millis(sample_ms));
        let mut gpus = Vec::new();
        for i in gpu.check_device(input.device)? {
            ctx.check_cancelled()?;
            gpus.push(crate::gpu::nvlink::probe(nvml, i, &bus, sample));
        }
        Ok(NvlinkOutput {
            gpus,
            elapsed_ms: elapsed_ms(t),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppState;
    use crate::error::ErrorKind;
    use crate::gpu::GpuAvailability;

    #[test]
    fn without_a_gpu_every_gpu_tool_answers_gpu_unavailable() {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(GpuAvailability::unavailable(
            "no NVIDIA driver on this test host",
            false,
        ));
        let ctx = OpContext::detached(app);
        for op in OPERATIONS {
            assert!(op.spec().needs_gpu, "{}", op.spec().tool_name());
            let err = op.call_json(&ctx, serde_json::json!({})).unwrap_err();
            assert_eq!(
                err.kind,
                ErrorKind::GpuUnavailable,
                "{}",
                op.spec().tool_name()
            );
            assert!(
                err.message.contains("no NVIDIA driver on this test host"),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn arguments_are_checked() {
        let ctx = OpContext::detached(AppState::for_tests());
        let err = Nvlink
            .call_json(&ctx, serde_json::json!({"sample_ms": 5000}))
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput);
        let err = Info
            .call_json(&ctx, serde_json::json!({"devices": 0}))
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput);
    }

    #[tokio::test]
    async fn the_dispatcher_refuses_gpu_tools_without_a_gpu() {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(GpuAvailability::unavailable("none here", false));
        for name in [
            "aisp_gpu_info",
            "aisp_gpu_topology",
            "aisp_gpu_power",
            "aisp_gpu_nvlink",
        ] {
            let tool = crate::registry::find(name).expect(name);
            let err =
                crate::dispatch::invoke(&app, tool, serde_json::json!({}), Default::default())
                    .await
                    .unwrap_err();
            assert_eq!(err.kind, ErrorKind::GpuUnavailable, "{name}");
        }
    }
}
