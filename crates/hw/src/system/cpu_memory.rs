//! CPUs, caches, memory, NUMA nodes, huge pages, and which NUMA node and CPUs
//! each NVIDIA GPU is attached to — read from /proc and /sys (no GPU library).

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::Serialize;

use crate::host::pci;
use crate::host::{HostRoot, format_cpu_list, parse_cpu_list, parse_size_bytes};

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CpuMemoryReport {
    pub cpu: CpuInfo,
    pub caches: Vec<CacheInfo>,
    pub memory: MemoryInfo,
    pub numa_nodes: Vec<NumaNode>,
    pub huge_pages: Vec<HugePages>,
    /// NVIDIA GPUs on the PCI bus with their NUMA node and local CPUs (from sysfs).
    pub gpus: Vec<GpuAffinity>,
    /// What the layout means for GPU work.
    pub findings: Vec<String>,
    /// What could not be read, and why.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CpuInfo {
    /// Marketing name (`model name`), or the ARM implementer and part (e.g. `NVIDIA Grace (Arm Neoverse-V2)`).
    pub model: Option<String>,
    /// CPU packages (sockets).
    pub sockets: Option<u32>,
    /// Physical cores across all sockets.
    pub cores: Option<u32>,
    /// Logical CPUs online (hardware threads).
    pub threads: Option<u32>,
    pub threads_per_core: Option<u32>,
    /// Online CPUs as a kernel CPU list.
    pub online_cpus: Option<String>,
    /// Highest frequency the CPU reports (cpufreq `cpuinfo_max_freq` of CPU 0).
    pub max_frequency_mhz: Option<u32>,
    /// Instruction-set extensions that matter for CPU-side ML work (avx512f, amx_bf16, sve, ...).
    pub notable_flags: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CacheInfo {
    pub level: u32,
    /// Data, Instruction or Unified.
    pub kind: String,
    /// Size of one instance.
    pub size_bytes: Option<u64>,
    /// Logical CPUs sharing one instance.
    pub shared_by_cpus: Option<u32>,
    /// Number of instances across the machine (online threads / CPUs sharing one).
    pub instances: Option<u32>,
    pub line_size_bytes: Option<u32>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MemoryInfo {
    pub total_mib: Option<u64>,
    pub available_mib: Option<u64>,
    pub swap_total_mib: Option<u64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NumaNode {
    pub node: u32,
    /// The node's CPUs as a kernel CPU list (empty for memory-only nodes).
    pub cpus: String,
    pub cpu_count: u32,
    pub memory_total_mib: Option<u64>,
    pub memory_free_mib: Option<u64>,
    /// SLIT distances to every node, in node order (10 = local).
    pub distances: Vec<u32>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HugePages {
    pub page_size_kib: u64,
    pub total: u64,
    pub free: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuAffinity {
    /// PCI address as sysfs writes it (`0000:18:00.0`).
    pub pci_bus_id: String,
    /// PCI device id (e.g. `0x2330` for H100 SXM5).
    pub pci_device_id: Option<String>,
    /// NUMA node the GPU is attached to; null when the platform does not say (single-node hosts and many VMs).
    pub numa_node: Option<u32>,
    /// CPUs local to the GPU as a kernel CPU list.
    pub local_cpus: Option<String>,
    /// PCIe link now (e.g. `32.0 GT/s PCIe` x16); links idle down to lower speeds.
    pub pcie_link_speed: Option<String>,
    pub pcie_link_width: Option<u32>,
    pub pcie_max_link_speed: Option<String>,
    pub pcie_max_link_width: Option<u32>,
}

/// CPU flags worth reporting for CPU-side work (data loading, CPU offload).
const NOTABLE_FLAGS: &[&str] = &[
    "avx2",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "avx512_vnni",
    "amx_bf16",
    "amx_int8",
    "amx_tile",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
    "asimd",
];

/// ARM `CPU implementer` / `CPU part` pairs for the CPUs found next to GPUs.
fn arm_cpu_name(implementer: &str, part: &str) -> Option<&'static str> {
    let imp = u32::from_str_radix(implementer.trim_start_matches("0x"), 16).ok()?;
    let part = u32::from_str_radix(part.trim_start_matches("0x"), 16).ok()?;
    Some(match (imp, part) {
        // Arm Ltd. part numbers (Arm Technical Reference Manuals, MIDR_EL1.PartNum).
        (0x41, 0xd4f) => "NVIDIA Grace (Arm Neoverse-V2)",
        (0x41, 0xd40) => "Arm Neoverse-V1",
        (0x41, 0xd0c) => "Arm Neoverse-N1",
        (0x41, 0xd49) => "Arm Neoverse-N2",
        (0x41, 0xd8e) => "Arm Neoverse-N3",
        (0x41, 0xd83) => "Arm Neoverse-V3AE",
        (0x41, 0xd84) => "Arm Neoverse-V3",
        (0x41, 0xd42) => "Arm Cortex-A78AE",
        (0x4e, 0x004) => "NVIDIA Carmel",
        _ => return None,
    })
}

/// Parse /proc/cpuinfo into the model name and the notable flags.
pub fn parse_cpuinfo(text: &str) -> (Option<String>, Vec<String>) {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let model = field("model name").or_else(|| {
        let imp = field("CPU implementer")?;
        let part = field("CPU part")?;
        Some(
            arm_cpu_name(&imp, &part)
                .map(str::to_string)
                .unwrap_or_else(|| format!("ARM implementer {imp} part {part}")),
        )
    });
    let flags: BTreeSet<String> = field("flags")
        .or_else(|| field("Features"))
        .unwrap_or_default()
        .split_whitespace()
        .filter(|f| NOTABLE_FLAGS.contains(f))
        .map(str::to_string)
        .collect();
    (model, flags.into_iter().collect())
}

/// `Node 0 MemTotal:  263856672 kB` lines of a node's meminfo.
fn node_meminfo_kib(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (left, right) = l.split_once(':')?;
        if !left.trim_end().ends_with(key) {
            return None;
        }
        right.split_whitespace().next()?.parse().ok()
    })
}

/// Read every CPU and memory fact of the host.
pub fn inspect(host: &HostRoot) -> CpuMemoryReport {
    let mut notes = Vec::new();
    let cpuinfo = host.read("/proc/cpuinfo");
    if cpuinfo.is_none() {
        notes.push("/proc/cpuinfo could not be read: CPU model unknown".to_string());
    }
    let (model, notable_flags) = parse_cpuinfo(cpuinfo.as_deref().unwrap_or(""));
    let online = host
        .read("/sys/devices/system/cpu/online")
        .and_then(|t| parse_cpu_list(&t));

    // Sockets and cores from sysfs topology (present on x86 and ARM alike).
    let mut packages = BTreeSet::new();
    let mut cores = BTreeSet::new();
    let mut topology_complete = online.is_some();
    for cpu in online.iter().flatten() {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let pkg: Option<i64> = host.read_num(&format!("{base}/physical_package_id"));
        let core: Option<i64> = host.read_num(&format!("{base}/core_id"));
        match (pkg, core) {
            (Some(p), Some(c)) => {
                packages.insert(p);
                cores.insert((p, c));
            }
            _ => topology_complete = false,
        }
    }
    if !topology_complete {
        notes.push(
            "CPU topology (sockets, cores) is incomplete in /sys/devices/system/cpu".to_string(),
        );
    }
    let threads = online.as_ref().map(|o| o.len() as u32);
    let (sockets, core_count) = if topology_complete && !cores.is_empty() {
        (Some(packages.len() as u32), Some(cores.len() as u32))
    } else {
        (None, None)
    };
    let threads_per_core = match (threads, core_count) {
        (Some(t), Some(c)) if c > 0 => Some(t.div_ceil(c)),
        _ => None,
    };
    let max_frequency_mhz = host
        .read_num::<u64>("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
        .map(|khz| (khz / 1000) as u32);

    // Caches of CPU 0; instances assume every CPU has the same layout.
    let mut caches = Vec::new();
    for index in host.list("/sys/devices/system/cpu/cpu0/cache") {
        if !index.starts_with("index") {
            continue;
        }
        let base = format!("/sys/devices/system/cpu/cpu0/cache/{index}");
        let Some(level) = host.read_num::<u32>(&format!("{base}/level")) else {
            continue;
        };
        let shared = host
            .read(&format!("{base}/shared_cpu_list"))
            .and_then(|t| parse_cpu_list(&t))
            .map(|c| c.len() as u32)
            .filter(|&n| n > 0);
        caches.push(CacheInfo {
            level,
            kind: host
                .read_trim(&format!("{base}/type"))
                .unwrap_or_else(|| "Unknown".into()),
            size_bytes: host
                .read_trim(&format!("{base}/size"))
                .and_then(|s| parse_size_bytes(&s)),
            shared_by_cpus: shared,
            instances: match (threads, shared) {
                (Some(t), Some(s)) => Some(t.div_ceil(s)),
                _ => None,
            },
            line_size_bytes: host.read_num(&format!("{base}/coherency_line_size")),
        });
    }

    let meminfo = host.read("/proc/meminfo").unwrap_or_default();
    let mib = |k: &str| super::procfs::meminfo_kib(&meminfo, k).map(|v| v / 1024);
    let memory = MemoryInfo {
        total_mib: mib("MemTotal"),
        available_mib: mib("MemAvailable"),
        swap_total_mib: mib("SwapTotal"),
    };

    let mut numa_nodes = Vec::new();
    for name in host.list("/sys/devices/system/node") {
        let Some(node) = name
            .strip_prefix("node")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let base = format!("/sys/devices/system/node/{name}");
        let cpus = host
            .read(&format!("{base}/cpulist"))
            .and_then(|t| parse_cpu_list(&t))
            .unwrap_or_default();
        let meminfo = host.read(&format!("{base}/meminfo")).unwrap_or_default();
        numa_nodes.push(NumaNode {
            node,
            cpus: format_cpu_list(&cpus),
            cpu_count: cpus.len() as u32,
            memory_total_mib: node_meminfo_kib(&meminfo, "MemTotal").map(|k| k / 1024),
            memory_free_mib: node_meminfo_kib(&meminfo, "MemFree").map(|k| k / 1024),
            distances: host
                .read(&format!("{base}/distance"))
                .map(|t| {
                    t.split_whitespace()
                        .filter_map(|d| d.parse().ok())
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    if numa_nodes.is_empty() {
        notes.push(
            "no NUMA information in /sys/devices/system/node (kernel without NUMA support?)"
                .to_string(),
        );
    }

    let mut huge_pages = Vec::new();
    for name in host.list("/sys/kernel/mm/hugepages") {
        let Some(size) = name
            .strip_prefix("hugepages-")
            .and_then(|s| s.strip_suffix("kB"))
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        let base = format!("/sys/kernel/mm/hugepages/{name}");
        huge_pages.push(HugePages {
            page_size_kib: size,
            total: host.read_num(&format!("{base}/nr_hugepages")).unwrap_or(0),
            free: host
                .read_num(&format!("{base}/free_hugepages"))
                .unwrap_or(0),
        });
    }
    huge_pages.sort_by_key(|h| h.page_size_kib);

    let gpus: Vec<GpuAffinity> = pci::nvidia_gpus(host)
        .into_iter()
        .map(|d| GpuAffinity {
            numa_node: d.numa_node,
            local_cpus: d.local_cpus.clone(),
            pcie_link_speed: d.current_link_speed.clone(),
            pcie_link_width: d.current_link_width,
            pcie_max_link_speed: d.max_link_speed.clone(),
            pcie_max_link_width: d.max_link_width,
            pci_device_id: d.device_id.clone(),
            pci_bus_id: d.bus_id,
        })
        .collect();

    let mut report = CpuMemoryReport {
        cpu: CpuInfo {
            model,
            sockets,
            cores: core_count,
            threads,
            threads_per_core,
            online_cpus: online.as_deref().map(format_cpu_list),
            max_frequency_mhz,
            notable_flags,
        },
        caches,
        memory,
        numa_nodes,
        huge_pages,
        gpus,
        findings: Vec::new(),
        notes,
    };
    report.findings = findings(&report);
    report
}

fn findings(r: &CpuMemoryReport) -> Vec<String> {
    let mut out = Vec::new();
    let cpu_nodes: Vec<&NumaNode> = r.numa_nodes.iter().filter(|n| n.cpu_count > 0).collect();
    let memory_only: Vec<u32> = r
        .numa_nodes
        .iter()
        .filter(|n| n.cpu_count == 0 && n.memory_total_mib.unwrap_or(0) > 0)
        .map(|n| n.node)
        .collect();
    if cpu_nodes.len() > 1 {
        out.push(format!(
            "{} NUMA nodes with CPUs: pin each rank's process and DataLoader workers to the node of its GPU \
             (numactl --cpunodebind=N --membind=N, or torchrun with --numa-binding in recent PyTorch); \
             cross-node host-to-device copies lose bandwidth.",
            cpu_nodes.len()
        ));
    } else if cpu_nodes.len() == 1 {
        out.push("One NUMA node with CPUs: no NUMA pinning needed.".to_string());
    }
    if !memory_only.is_empty() {
        out.push(format!(
            "NUMA nodes {memory_only:?} have memory but no CPUs: GPU memory exposed as NUMA memory \
             (Grace Hopper/Blackwell coherent mode) or CXL memory."
        ));
    }
    let mut by_node: std::collections::BTreeMap<Option<u32>, usize> = Default::default();
    for g in &r.gpus {
        *by_node.entry(g.numa_node).or_default() += 1;
    }
    if !r.gpus.is_empty() {
        let parts: Vec<String> = by_node
            .iter()
            .map(|(n, c)| match n {
                Some(n) => format!("{c} on node {n}"),
                None => format!("{c} with no NUMA node reported"),
            })
            .collect();
        out.push(format!(
            "{} NVIDIA GPUs: {}.",
            r.gpus.len(),
            parts.join(", ")
        ));
    }
    for g in &r.gpus {
        if let (Some(w), Some(mw)) = (g.pcie_link_width, g.pcie_max_link_width)
            && w < mw
        {
            out.push(format!(
                "GPU {} runs its PCIe link at x{w} of x{mw}: check the slot/riser (idle GPUs may also lower the \
                 link speed, but not usually the width).",
                g.pci_bus_id
            ));
        }
    }
    let hp_total: u64 = r.huge_pages.iter().map(|h| h.total).sum();
    if hp_total > 0 {
        out.push(format!(
            "{hp_total} explicit huge pages reserved: memory the kernel cannot use for anything else."
        ));
    }
    if r.memory.swap_total_mib.unwrap_or(0) > 0 {
        out.push("Swap is enabled: pinned memory cannot swap, but pageable host buffers and data loading can, \
                  which makes step times erratic under memory pressure."
            .to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str) -> HostRoot {
        HostRoot::at(format!(
            "{}/tests/data/host/{name}",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        ))
    }

    #[test]
    fn the_captured_container_sample_reads_exactly() {
        let r = inspect(&sample("container-vm-2cpu"));
        assert_eq!(r.cpu.model.as_deref(), Some("AMD EPYC"));
        assert_eq!(r.cpu.sockets, Some(1));
        assert_eq!(r.cpu.cores, Some(2));
        assert_eq!(r.cpu.threads, Some(2));
        assert_eq!(r.cpu.threads_per_core, Some(1));
        assert_eq!(r.cpu.online_cpus.as_deref(), Some("0-1"));
        assert_eq!(r.cpu.notable_flags, vec!["avx2".to_string()]);
        assert_eq!(r.caches.len(), 4);
        let l3 = r.caches.iter().find(|c| c.level == 3).unwrap();
        assert_eq!(l3.size_bytes, Some(32 * 1024 * 1024));
        assert_eq!(l3.shared_by_cpus, Some(2));
        assert_eq!(l3.instances, Some(1));
        let l1d = &r.caches[0];
        assert_eq!(
            (l1d.level, l1d.kind.as_str(), l1d.size_bytes),
            (1, "Data", Some(32 * 1024))
        );
        assert_eq!(r.memory.total_mib, Some(24_105));
        assert_eq!(r.numa_nodes.len(), 1);
        assert_eq!(r.numa_nodes[0].cpus, "0-1");
        assert_eq!(r.numa_nodes[0].distances, vec![10]);
        assert_eq!(r.huge_pages.len(), 2);
        assert_eq!(r.huge_pages[0].page_size_kib, 2048);
        assert_eq!(r.huge_pages[1].page_size_kib, 1_048_576);
        assert!(r.gpus.is_empty());
        assert!(r.findings.iter().any(|f| f.starts_with("One NUMA node")));
    }

    #[test]
    fn arm_cpuinfo_names_grace() {
        // The shape of /proc/cpuinfo on aarch64 (no `model name`).
        let text = "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes sve sve2 bf16 i8mm\n\
                    CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n";
        let (model, flags) = parse_cpuinfo(text);
        assert_eq!(model.as_deref(), Some("NVIDIA Grace (Arm Neoverse-V2)"));
        assert_eq!(flags, vec!["asimd", "bf16", "i8mm", "sve", "sve2"]);
        assert_eq!(
            node_meminfo_kib("Node 1 MemTotal:       263856672 kB\n", "MemTotal"),
            Some(263_856_672)
        );
    }
}
