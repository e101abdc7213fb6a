//! Network interfaces, InfiniBand/RoCE adapters and their ports, GPUDirect
//! RDMA kernel modules, and the NCCL settings in the environment.

use schemars::JsonSchema;
use serde::Serialize;

use crate::host::HostRoot;
use crate::host::pci;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NetworkReport {
    pub interfaces: Vec<Interface>,
    pub rdma_devices: Vec<RdmaDevice>,
    pub gpudirect: GpuDirect,
    /// NCCL_* variables set in this process's environment (secrets redacted).
    pub nccl_env: Vec<super::env::EnvVar>,
    /// What this means for multi-GPU and multi-node communication.
    pub findings: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Interface {
    pub name: String,
    /// up, down, unknown, ... (`operstate`).
    pub state: Option<String>,
    pub mtu: Option<u32>,
    /// Link speed; null when the link is down or the driver does not report it (virtual NICs).
    pub speed_mbps: Option<u64>,
    /// ethernet, infiniband, loopback or the ARPHRD number.
    pub link_type: String,
    /// False for virtual interfaces (bridges, veth, loopback, tunnels).
    pub physical: bool,
    /// PCI address of the adapter behind it.
    pub pci_bus_id: Option<String>,
    pub numa_node: Option<u32>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RdmaDevice {
    /// Verbs device name (mlx5_0, ...), as NCCL_IB_HCA names it.
    pub name: String,
    pub hca_type: Option<String>,
    pub firmware: Option<String>,
    pub pci_bus_id: Option<String>,
    pub numa_node: Option<u32>,
    pub ports: Vec<RdmaPort>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RdmaPort {
    pub port: u32,
    /// ACTIVE, DOWN, INIT, ... (the word after the number in `state`).
    pub state: Option<String>,
    /// LinkUp, Polling, Disabled, ...
    pub physical_state: Option<String>,
    /// Signalling rate as the kernel reports it (e.g. `400 Gb/sec (4X NDR)`).
    pub rate: Option<String>,
    pub rate_gbps: Option<f64>,
    /// InfiniBand or Ethernet (RoCE).
    pub link_layer: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuDirect {
    /// `nvidia_peermem` (or the older `nv_peer_mem`) is loaded: NICs can DMA to GPU memory.
    pub peermem_loaded: bool,
    /// The loaded peer-memory module's name.
    pub peermem_module: Option<String>,
    /// `gdrdrv` (GDRCopy) is loaded: low-latency CPU-mapped GPU memory (used by UCX/NVSHMEM).
    pub gdrcopy_loaded: bool,
    /// `nvidia_fs` (GPUDirect Storage) is loaded.
    pub gds_loaded: bool,
    /// Whether the module list could be read at all (`/proc/modules` is hidden in some containers).
    pub modules_readable: bool,
}

/// ARPHRD numbers of `/sys/class/net/*/type` (include/uapi/linux/if_arp.h).
fn link_type(n: Option<u32>) -> String {
    match n {
        Some(1) => "ethernet".into(),
        Some(32) => "infiniband".into(),
        Some(772) => "loopback".into(),
        Some(776) => "sit".into(),
        Some(65534) => "none".into(),
        Some(other) => format!("arphrd_{other}"),
        None => "unknown".into(),
    }
}

/// `4: ACTIVE` → `ACTIVE`.
fn after_colon(s: String) -> String {
    s.split_once(':')
        .map(|(_, w)| w.trim().to_string())
        .unwrap_or(s)
}

/// `400 Gb/sec (4X NDR)` → 400.0.
pub fn parse_rate_gbps(rate: &str) -> Option<f64> {
    let mut it = rate.split_whitespace();
    let n: f64 = it.next()?.parse().ok()?;
    match it.next()? {
        "Gb/sec" => Some(n),
        "Mb/sec" => Some(n / 1000.0),
        _ => None,
    }
}

/// Names of the loaded kernel modules (first field of each /proc/modules line).
pub fn loaded_modules(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

pub fn inspect(host: &HostRoot, env: &[(String, String)]) -> NetworkReport {
    let mut notes = Vec::new();
    let mut interfaces = Vec::new();
    for name in host.list("/sys/class/net") {
        let base = format!("/sys/class/net/{name}");
        let device = host.resolve(&format!("{base}/device"));
        let pci_bus_id = device.as_deref().and_then(pci::bus_id_of_path);
        let numa_node = pci_bus_id
            .as_ref()
            .and_then(|id| pci::read_device(host, id).numa_node);
        let speed: Option<i64> = host.read_num(&format!("{base}/speed"));
        interfaces.push(Interface {
            state: host.read_trim(&format!("{base}/operstate")),
            mtu: host.read_num(&format!("{base}/mtu")),
            speed_mbps: speed.and_then(|s| u64::try_from(s).ok()).filter(|&s| s > 0),
            link_type: link_type(host.read_num(&format!("{base}/type"))),
            physical: device.is_some(),
            pci_bus_id,
            numa_node,
            name,
        });
    }
    if interfaces.is_empty() {
        notes.push("/sys/class/net lists no interfaces".to_string());
    }

    let mut rdma_devices = Vec::new();
    for name in host.list("/sys/class/infiniband") {
        let base = format!("/sys/class/infiniband/{name}");
        let pci_bus_id = host
            .resolve(&format!("{base}/device"))
            .as_deref()
            .and_then(pci::bus_id_of_path);
        let numa_node = pci_bus_id
            .as_ref()
            .and_then(|id| pci::read_device(host, id).numa_node);
        let mut ports = Vec::new();
        for p in host.list(&format!("{base}/ports")) {
            let Ok(port) = p.parse::<u32>() else { continue };
            let pb = format!("{base}/ports/{p}");
            let rate = host.read_trim(&format!("{pb}/rate"));
            ports.push(RdmaPort {
                port,
                state: host.read_trim(&format!("{pb}/state")).map(after_colon),
                physical_state: host.read_trim(&format!("{pb}/phys_state")).map(after_colon),
                rate_gbps: rate.as_deref().and_then(parse_rate_gbps),
                rate,
                link_layer: host.read_trim(&format!("{pb}/link_layer")),
            });
        }
        rdma_devices.push(RdmaDevice {
            hca_type: host.read_trim(&format!("{base}/hca_type")),
            firmware: host.read_trim(&format!("{base}/fw_ver")),
            pci_bus_id,
            numa_node,
            ports,
            name,
        });
    }

    let modules_text = host.read("/proc/modules");
    let modules = modules_text
        .as_deref()
        .map(loaded_modules)
        .unwrap_or_default();
    let has = |m: &str| modules.contains(&m);
    let peermem_module = ["nvidia_peermem", "nv_peer_mem"]
        .into_iter()
        .find(|m| has(m))
        .map(str::to_string);
    if modules_text.is_none() {
        notes
            .push("/proc/modules is not readable here: GPUDirect module state unknown".to_string());
    }
    let gpudirect = GpuDirect {
        peermem_loaded: peermem_module.is_some(),
        peermem_module,
        gdrcopy_loaded: has("gdrdrv"),
        gds_loaded: has("nvidia_fs"),
        modules_readable: modules_text.is_some(),
    };
    let nccl_env = super::env::select(env, |k| k.starts_with("NCCL_") || k.starts_with("UCX_"));

    let mut report = NetworkReport {
        interfaces,
        rdma_devices,
        gpudirect,
        nccl_env,
        findings: Vec::new(),
        notes,
    };
    report.findings = findings(&report);
    report
}

fn findings(r: &NetworkReport) -> Vec<String> {
    let mut out = Vec::new();
    let active: Vec<(&RdmaDevice, &RdmaPort)> = r
        .rdma_devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .filter(|(_, p)| p.state.as_deref() == Some("ACTIVE"))
        .collect();
    if r.rdma_devices.is_empty() {
        out.push(
            "No RDMA (InfiniBand/RoCE) adapters: multi-node NCCL traffic goes over TCP sockets, which reach a \
             fraction of an RDMA NIC's bandwidth and cost CPU time. Single-node jobs are unaffected."
                .to_string(),
        );
    } else {
        let ib = active
            .iter()
            .filter(|(_, p)| p.link_layer.as_deref() == Some("InfiniBand"))
            .count();
        let roce = active.len() - ib;
        let total_gbps: f64 = active.iter().filter_map(|(_, p)| p.rate_gbps).sum();
        out.push(format!(
            "{} RDMA adapters, {} active ports ({ib} InfiniBand, {roce} RoCE), {total_gbps:.0} Gb/s in total.",
            r.rdma_devices.len(),
            active.len()
        ));
        let down: Vec<String> = r
            .rdma_devices
            .iter()
            .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
            .filter(|(_, p)| p.state.as_deref() != Some("ACTIVE"))
            .map(|(d, p)| format!("{}/{}", d.name, p.port))
            .collect();
        if !down.is_empty() {
            out.push(format!(
                "RDMA ports not ACTIVE: {}. NCCL skips them; check cabling and the subnet manager (ibstat).",
                down.join(", ")
            ));
        }
        if r.gpudirect.modules_readable && !r.gpudirect.peermem_loaded {
            out.push(
                "nvidia_peermem is not loaded: NCCL cannot use GPUDirect RDMA and stages through host memory. \
                 Load it with `modprobe nvidia_peermem` (or use DMA-BUF: NCCL 2.19+ with kernel 5.12+ and \
                 NCCL_DMABUF_ENABLE=1)."
                    .to_string(),
            );
        }
    }
    for i in &r.interfaces {
        if i.physical
            && i.link_type == "ethernet"
            && i.state.as_deref() == Some("up")
            && i.mtu.is_some_and(|m| m < 9000)
            && i.speed_mbps.is_some_and(|s| s >= 100_000)
        {
            out.push(format!(
                "{} is a {} Gb/s Ethernet link with MTU {}: for RoCE or NCCL sockets use jumbo frames (MTU 9000) \
                 end to end.",
                i.name,
                i.speed_mbps.unwrap_or(0) / 1000,
                i.mtu.unwrap_or(0)
            ));
        }
    }
    if r.nccl_env.is_empty() {
        out.push("No NCCL_* variables set: NCCL picks interfaces and transports itself (usually right on a \
                  single node; on multiple nodes set NCCL_SOCKET_IFNAME and check NCCL_IB_HCA)."
            .to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_captured_container_sample_reads_exactly() {
        let host = HostRoot::at(format!(
            "{}/tests/data/host/container-vm-2cpu",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        ));
        let env = vec![
            ("NCCL_DEBUG".to_string(), "INFO".to_string()),
            ("HOME".to_string(), "/root".to_string()),
        ];
        let r = inspect(&host, &env);
        let names: Vec<&str> = r.interfaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, vec!["eth0", "ifb0", "ifb1", "lo"]);
        let eth0 = &r.interfaces[0];
        assert_eq!(eth0.state.as_deref(), Some("up"));
        assert_eq!(eth0.mtu, Some(1400));
        assert_eq!(eth0.speed_mbps, None, "virtio reports -1");
        assert_eq!(eth0.link_type, "ethernet");
        assert!(eth0.physical);
        assert_eq!(eth0.pci_bus_id.as_deref(), Some("0000:00:03.0"));
        let lo = &r.interfaces[3];
        assert_eq!(
            (lo.link_type.as_str(), lo.physical, lo.mtu),
            ("loopback", false, Some(65536))
        );
        assert!(r.rdma_devices.is_empty());
        assert!(!r.gpudirect.modules_readable);
        assert_eq!(r.nccl_env.len(), 1);
        assert_eq!(r.nccl_env[0].name, "NCCL_DEBUG");
        assert!(r.findings[0].starts_with("No RDMA"));
    }

    #[test]
    fn ib_port_files_parse() {
        assert_eq!(parse_rate_gbps("400 Gb/sec (4X NDR)"), Some(400.0));
        assert_eq!(parse_rate_gbps("100 Gb/sec (4X EDR)"), Some(100.0));
        assert_eq!(parse_rate_gbps("garbage"), None);
        assert_eq!(after_colon("4: ACTIVE".into()), "ACTIVE");
        assert_eq!(after_colon("5: LinkUp".into()), "LinkUp");
        let mods = "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\nnvidia 56000000 2 nvidia_peermem, Live 0x0\n";
        assert_eq!(loaded_modules(mods), vec!["nvidia_peermem", "nvidia"]);
    }
}
