//! PCI devices from sysfs: NVIDIA GPUs and network adapters, their NUMA nodes,
//! links, and how two devices are connected through the PCIe tree (the
//! `PIX`/`PXB`/`PHB`/`NODE`/`SYS` levels `nvidia-smi topo -m` prints).

use super::{HostRoot, format_cpu_list, parse_cpu_list};

/// NVIDIA's PCI vendor id.
pub const NVIDIA_VENDOR: &str = "0x10de";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciDevice {
    /// `0000:18:00.0` (sysfs spelling: 4-digit domain, lower case).
    pub bus_id: String,
    pub vendor: Option<String>,
    pub device_id: Option<String>,
    pub class: Option<String>,
    pub numa_node: Option<u32>,
    pub local_cpus: Option<String>,
    pub current_link_speed: Option<String>,
    pub current_link_width: Option<u32>,
    pub max_link_speed: Option<String>,
    pub max_link_width: Option<u32>,
    /// Where the device sits in the PCI tree (`/sys/devices/pci0000:00/0000:00:01.0/...`).
    pub sysfs_path: Option<String>,
}

/// Normalise a PCI bus id to sysfs spelling: NVML writes `00000000:18:00.0`
/// (8-digit domain, upper case), sysfs `0000:18:00.0`.
pub fn normalize_bus_id(id: &str) -> Option<String> {
    let id = id.trim().to_ascii_lowercase();
    let mut parts = id.rsplitn(3, ':');
    let dev_fn = parts.next()?;
    let bus = parts.next()?;
    let domain = parts.next().unwrap_or("0");
    let (dev, func) = dev_fn.split_once('.')?;
    let domain = u32::from_str_radix(domain, 16).ok()?;
    let bus = u32::from_str_radix(bus, 16).ok()?;
    let dev = u32::from_str_radix(dev, 16).ok()?;
    let func = u32::from_str_radix(func, 16).ok()?;
    Some(format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

/// Read one PCI device's sysfs attributes.
pub fn read_device(host: &HostRoot, bus_id: &str) -> PciDevice {
    let base = format!("/sys/bus/pci/devices/{bus_id}");
    let numa: Option<i64> = host.read_num(&format!("{base}/numa_node"));
    PciDevice {
        bus_id: bus_id.to_string(),
        vendor: host.read_trim(&format!("{base}/vendor")),
        device_id: host.read_trim(&format!("{base}/device")),
        class: host.read_trim(&format!("{base}/class")),
        numa_node: numa.and_then(|n| u32::try_from(n).ok()),
        local_cpus: host
            .read(&format!("{base}/local_cpulist"))
            .and_then(|t| parse_cpu_list(&t))
            .map(|c| format_cpu_list(&c)),
        current_link_speed: host.read_trim(&format!("{base}/current_link_speed")),
        current_link_width: host.read_num(&format!("{base}/current_link_width")),
        max_link_speed: host.read_trim(&format!("{base}/max_link_speed")),
        max_link_width: host.read_num(&format!("{base}/max_link_width")),
        sysfs_path: host.resolve(&base),
    }
}

/// True for a display controller class: VGA (0x0300xx) or 3D (0x0302xx).
fn is_gpu_class(class: &str) -> bool {
    class.starts_with("0x0300") || class.starts_with("0x0302")
}

/// NVIDIA GPUs on the PCI bus, in bus order (NVML's default order).
pub fn nvidia_gpus(host: &HostRoot) -> Vec<PciDevice> {
    host.list("/sys/bus/pci/devices")
        .into_iter()
        .filter(|id| {
            let base = format!("/sys/bus/pci/devices/{id}");
            host.read_trim(&format!("{base}/vendor")).as_deref() == Some(NVIDIA_VENDOR)
                && host
                    .read_trim(&format!("{base}/class"))
                    .is_some_and(|c| is_gpu_class(&c))
        })
        .map(|id| read_device(host, &id))
        .collect()
}

/// The bus id of the PCI function a sysfs device path belongs to: the last
/// path component that looks like `dddd:bb:dd.f`.
pub fn bus_id_of_path(path: &str) -> Option<String> {
    path.split('/').rev().find_map(|c| {
        let n = normalize_bus_id(c)?;
        (n == c.to_ascii_lowercase()).then_some(n)
    })
}

/// How two PCI devices reach each other, in `nvidia-smi topo -m` words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PcieLevel {
    /// Through at most one PCIe switch.
    Pix,
    /// Through several PCIe switches, not through the host bridge.
    Pxb,
    /// Through a PCIe host bridge (the CPU's root complex).
    Phb,
    /// Between host bridges of the same NUMA node.
    Node,
    /// Across the CPU interconnect between NUMA nodes (QPI/UPI/xGMI).
    Sys,
}

impl PcieLevel {
    pub fn label(self) -> &'static str {
        match self {
            PcieLevel::Pix => "PIX",
            PcieLevel::Pxb => "PXB",
            PcieLevel::Phb => "PHB",
            PcieLevel::Node => "NODE",
            PcieLevel::Sys => "SYS",
        }
    }
}

/// Classify the path between two devices from their sysfs paths
/// (`/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/...`) and NUMA nodes.
///
/// A PCIe switch appears in the path as two bridges (upstream port, then a
/// downstream port). Devices under one switch share the path down to its
/// upstream port, and each has at most two components (downstream port,
/// device) below the shared part: `PIX`. Deeper remainders mean more switches
/// on the way: `PXB`. Sharing only the root bus is `PHB`.
pub fn classify_pcie_path(a: &str, b: &str, numa_a: Option<u32>, numa_b: Option<u32>) -> PcieLevel {
    let comps = |p: &str| -> (Option<String>, Vec<String>) {
        let mut root = None;
        let mut funcs = Vec::new();
        for c in p.split('/') {
            if let Some(r) = c.strip_prefix("pci") {
                root = Some(r.to_string());
            } else if root.is_some() && bus_id_of_path(c).is_some() {
                funcs.push(c.to_ascii_lowercase());
            }
        }
        (root, funcs)
    };
    let (ra, fa) = comps(a);
    let (rb, fb) = comps(b);
    if ra.is_none() || ra != rb {
        return match (numa_a, numa_b) {
            (Some(x), Some(y)) if x == y => PcieLevel::Node,
            (None, None) => PcieLevel::Node,
            _ => PcieLevel::Sys,
        };
    }
    let common = fa.iter().zip(&fb).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return PcieLevel::Phb;
    }
    let (rest_a, rest_b) = (fa.len() - common, fb.len() - common);
    if rest_a <= 2 && rest_b <= 2 {
        PcieLevel::Pix
    } else {
        PcieLevel::Pxb
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_normalise_from_nvml_spelling() {
        assert_eq!(
            normalize_bus_id("00000000:18:00.0").as_deref(),
            Some("0000:18:00.0")
        );
        assert_eq!(
            normalize_bus_id("00000000:9A:00.0").as_deref(),
            Some("0000:9a:00.0")
        );
        assert_eq!(
            normalize_bus_id("0000:c1:00.1").as_deref(),
            Some("0000:c1:00.1")
        );
        assert_eq!(normalize_bus_id("18:00.0").as_deref(), Some("0000:18:00.0"));
        assert_eq!(normalize_bus_id("virtio2"), None);
        assert_eq!(
            bus_id_of_path("/sys/devices/pci0000:00/0000:00:03.0/virtio2").as_deref(),
            Some("0000:00:03.0")
        );
    }

    #[test]
    fn pcie_paths_classify_like_nvidia_smi() {
        // Two GPUs under one PCIe switch (root port 16:01.0, switch ports 17:00.0 → 18:0x.0).
        let g0 = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0";
        let g1 = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0";
        assert_eq!(classify_pcie_path(g0, g1, Some(0), Some(0)), PcieLevel::Pix);
        // A NIC one switch further down.
        let nic = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:1a:00.0/0000:1b:00.0/0000:1c:00.0";
        assert_eq!(
            classify_pcie_path(g0, nic, Some(0), Some(0)),
            PcieLevel::Pxb
        );
        // Different root ports of the same root bus.
        let g2 = "/sys/devices/pci0000:15/0000:15:03.0/0000:30:00.0";
        assert_eq!(classify_pcie_path(g0, g2, Some(0), Some(0)), PcieLevel::Phb);
        // Different root buses: same node, then other node.
        let g3 = "/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0";
        assert_eq!(
            classify_pcie_path(g0, g3, Some(0), Some(0)),
            PcieLevel::Node
        );
        assert_eq!(classify_pcie_path(g0, g3, Some(0), Some(1)), PcieLevel::Sys);
        assert_eq!(PcieLevel::Sys.label(), "SYS");
    }

    #[test]
    fn the_container_sample_has_no_gpus_but_reads_its_nic() {
        let host = HostRoot::at(format!(
            "{}/tests/data/host/container-vm-2cpu",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        ));
        assert!(nvidia_gpus(&host).is_empty());
        let d = read_device(&host, "0000:00:03.0");
        assert_eq!(d.vendor.as_deref(), Some("0x1af4"));
        assert_eq!(d.class.as_deref(), Some("0x020000"));
        assert_eq!(d.numa_node, None);
        assert_eq!(d.local_cpus.as_deref(), Some("0-1"));
        assert_eq!(
            d.sysfs_path.as_deref(),
            Some("/sys/devices/pci0000:00/0000:00:03.0")
        );
    }
}
