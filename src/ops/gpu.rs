//! Operations of the `gpu` domain: NVML probes (info, topology, power,
//! NVLink). The memory bandwidth test (`aisp_gpu_bandwidth`) is built on the
//! shared CUDA benchmark harness and is added to this list next to them.

use std::cell::Cell;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::errors::{BenchErrorExt, GpuCheck};
use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{DynOperation, Hints, OpSpec, Operation};
use aisp_hw::bench::bandwidth::{self, DeviceBandwidth};
use aisp_hw::gpu::info::{DriverVersions, GpuInfo};
use aisp_hw::gpu::nvlink::GpuNvlink;
use aisp_hw::gpu::power::GpuPower;
use aisp_hw::gpu::topology::Topology;
use aisp_hw::host::HostRoot;

pub const OPERATIONS: &[&dyn DynOperation] = &[
    // One entry per line, so parallel branches merge cleanly.
    &Info,
    &TopologyOp,
    &Power,
    &Nvlink,
    &Bandwidth,
    &super::gpu_clocks::Clocks,
];

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
        description: "Reads each NVIDIA GPU through NVML, like `nvidia-smi -q`: name, architecture, memory used and free, clocks, temperatures, power, utilization, ECC, PCIe link, driver and CUDA versions, and the processes on it. Use first on a GPU machine. Under 200 ms.",
        needs_gpu: true,
        intents: &[
            "gpu info",
            "what gpu do I have",
            "which gpu",
            "nvidia-smi",
            "gpu memory",
            "free memory on the gpu",
            "gpu clocks",
            "sm count",
            "which processes use the gpu",
            "memory bandwidth theoretical",
        ],
        example: r#"{"device": 0}"#,
        tier: crate::registry::Tier::Core,
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
            .map(|&i| aisp_hw::gpu::info::probe(nvml, i, &versions))
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
        description: "How GPUs and RDMA NICs connect, as `nvidia-smi topo -m` shows it (NVLink, PCIe switch, host bridge, NUMA node, SYS), with peer-to-peer support per pair and CPU/NUMA affinity. Use to place tensor-parallel groups or explain slow NCCL between some GPUs. Under 200 ms.",
        needs_gpu: true,
        intents: &[
            "gpu topology",
            "nvlink or pcie",
            "nvidia-smi topo",
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
        let mut topology = aisp_hw::gpu::topology::probe(nvml, &all, &HostRoot::live());
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
            "power capped",
            "clock speed low",
            "gpu temperature",
            "throttle reasons",
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
            .map(|&i| aisp_hw::gpu::power::probe(nvml, i))
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
            "nvlink error counters",
            "nvlinks up",
            "nvlink bandwidth counters",
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
                    .and_then(|p| aisp_hw::host::pci::normalize_bus_id(&p.bus_id))
            })
            .collect();
        let sample = (sample_ms > 0).then(|| Duration::from_millis(sample_ms));
        let mut gpus = Vec::new();
        for i in gpu.check_device(input.device)? {
            ctx.check_cancelled()?;
            gpus.push(aisp_hw::gpu::nvlink::probe(nvml, i, &bus, sample));
        }
        Ok(NvlinkOutput {
            gpus,
            elapsed_ms: elapsed_ms(t),
        })
    }
}

// ---------------------------------------------------------------- bandwidth

pub struct Bandwidth;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BandwidthInput {
    /// CUDA device ordinal; default every GPU, one after another.
    #[serde(default)]
    pub device: Option<u32>,
    /// Buffer sizes in MiB (default [64, 256, 1024]; each 16 to 16384).
    #[serde(default)]
    pub sizes_mib: Option<Vec<u64>>,
    /// Seconds of timed repetitions per copy method and size (default 0.5).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[schemars(range(max = 86400))]
    pub time_budget_s: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct BandwidthOutput {
    pub devices: Vec<DeviceBandwidth>,
    pub notes: Vec<String>,
}

impl Operation for Bandwidth {
    type Input = BandwidthInput;
    type Output = BandwidthOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "GPU memory bandwidth test",
        summary: "Device-memory bandwidth: copy kernels and cuMemcpyDtoD at several sizes, against the theoretical figure.",
        description: "Measures device-memory bandwidth on each GPU (or `device`): for every size (default 64, 256 and \
1024 MiB buffers) a scalar, a float4, an unrolled float4 and a streaming float4 copy kernel (compiled at run time by \
NVRTC) and cuMemcpyDtoD, each checked element by element and then timed with CUDA events (median of repetitions, L2 \
flushed between them). GB/s counts bytes read + written with GB = 10^9. Returns per size each method's GB/s, the best \
kernel as a share of cuMemcpyDtoD in the same run, and the best figure against the theoretical bandwidth from NVML's \
memory clock × bus width. Results are stored (aisp_benchmark_history, target copy_bandwidth). Takes the GPU to itself; \
about 5-10 s per GPU.",
        hints: Hints::MEASURES,
        needs_gpu: true,
        long_running: true,
        intents: &[
            "memory bandwidth",
            "hbm bandwidth",
            "bandwidth test",
            "memcpy bandwidth",
            "how fast is gpu memory",
            "measure memory bandwidth",
        ],
        example: r#"{"device": 0, "sizes_mib": [256, 1024]}"#,
        ..OpSpec::new("gpu", "bandwidth")
    };

    fn run(&self, ctx: &OpContext, input: BandwidthInput) -> Result<BandwidthOutput, OpError> {
        use aisp_hw::bench::{SizeClass, fresh_seed, session};
        let sizes = input.sizes_mib.unwrap_or_else(|| vec![64, 256, 1024]);
        if sizes.is_empty() || sizes.iter().any(|s| !(16..=16384).contains(s)) {
            return Err(OpError::invalid_input(
                format!("sizes_mib must list sizes from 16 to 16384 MiB, not {sizes:?}"),
                "Pass e.g. \"sizes_mib\": [256, 1024].",
            ));
        }
        let budget = input.time_budget_s.unwrap_or(0.5);
        if !(0.05..=60.0).contains(&budget) {
            return Err(OpError::invalid_input(
                format!("time_budget_s must be 0.05 to 60, not {budget}"),
                "Pass e.g. \"time_budget_s\": 0.5.",
            ));
        }
        super::benchmark::require_gpu(ctx)?;
        let tool = ctx.tool().to_string();
        let ordinals: Vec<u32> = match input.device {
            Some(d) => vec![d],
            None => {
                (0..session::device_count().map_err(|e| e.into_op_error(&tool))? as u32).collect()
            }
        };
        let _queue = ctx.app().lock_gpu_queue(&|| ctx.is_cancelled())?;
        let mut notes = Vec::new();
        let mut devices = Vec::new();
        let steps = (ordinals.len() * sizes.len()) as f64;
        let step = Cell::new(0.0);
        for ord in ordinals {
            let s =
                super::benchmark::open_session(ctx, Some(ord), SizeClass::Medium, fresh_seed())?;
            let progress = |mib: u64| {
                ctx.progress(step.get(), Some(steps), format!("GPU {ord}: {mib} MiB"));
                step.set(step.get() + 1.0);
            };
            let test = bandwidth::measure(
                &s,
                &sizes,
                Duration::from_secs_f64(budget),
                &|| ctx.is_cancelled(),
                &progress,
            )
            .map_err(super::benchmark::bench_err(ctx))?;
            notes.extend(test.notes);
            let mut device = test.found;
            device.saved = super::benchmark::save(ctx, &s, &test.rows, &mut notes);
            devices.push(device);
        }
        Ok(BandwidthOutput { devices, notes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppState;
    use crate::error::ErrorKind;
    use aisp_hw::gpu::GpuAvailability;

    #[test]
    fn without_a_gpu_every_gpu_tool_answers_gpu_unavailable() {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(GpuAvailability::unavailable(
            "no NVIDIA driver on this test host",
            false,
        ));
        let ctx = OpContext::detached(app);
        // aisp_gpu_clocks answers "not present" with what it checked instead (tested below).
        for op in OPERATIONS.iter().filter(|o| o.spec().name != "clocks") {
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
    fn without_a_gpu_clocks_says_not_present_and_what_was_checked() {
        let app = AppState::for_tests();
        app.set_gpu_for_tests(GpuAvailability::unavailable(
            "no NVIDIA driver on this test host",
            false,
        ));
        let ctx = OpContext::detached(app);
        let v = super::super::gpu_clocks::Clocks
            .call_json(&ctx, serde_json::json!({"lock_sm_mhz": 1980}))
            .unwrap();
        assert_eq!(v["present"], false);
        assert_eq!(v["checked"][0], "NVML: no NVIDIA driver on this test host");
        assert!(v["lock"].is_null() && v["gpus"].as_array().unwrap().is_empty());
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
