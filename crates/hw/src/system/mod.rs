//! The host around the GPUs, read from /proc and /sys. No MCP knowledge here.
//!
//! Every reader takes a [`crate::host::HostRoot`], so the same code runs on the live
//! host and on samples captured by `scripts/capture-host-samples.sh`
//! (tests/data/host/).

pub mod container;
pub mod context;
pub mod cpu_memory;
pub mod dependencies;
pub mod disk;
pub mod env;
mod exec;
pub mod monitor;
pub mod netbench;
pub mod network;
pub mod parameters;
mod procfs;
pub mod software;
pub mod triage;

pub use exec::which;

/// Every reader on every captured sample under tests/data/host/: samples
/// captured on GPU hosts with `scripts/capture-host-samples.sh` are picked up
/// here as soon as they are committed.
#[cfg(test)]
mod captured_samples {
    use super::*;
    use crate::host::HostRoot;
    use crate::host::pci::{self, PcieLevel};

    fn samples() -> Vec<(String, HostRoot)> {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("tests/data/host");
        let mut out: Vec<(String, HostRoot)> = std::fs::read_dir(&dir)
            .expect("tests/data/host exists")
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    HostRoot::at(e.path()),
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        assert!(!out.is_empty());
        out
    }

    #[test]
    fn every_reader_parses_every_sample() {
        for (name, host) in samples() {
            let cm = cpu_memory::inspect(&host);
            let threads = cm.cpu.threads.unwrap_or(0);
            assert!(threads > 0, "{name}: no CPUs");
            assert!(cm.cpu.model.is_some(), "{name}: no CPU model");
            assert!(cm.memory.total_mib.unwrap_or(0) > 0, "{name}: no memory");
            let numa_cpus: u32 = cm.numa_nodes.iter().map(|n| n.cpu_count).sum();
            if !cm.numa_nodes.is_empty() {
                // Node CPU lists may include offline CPUs.
                assert!(
                    numa_cpus >= threads,
                    "{name}: NUMA nodes do not cover the online CPUs"
                );
            }
            for g in &cm.gpus {
                assert_eq!(
                    pci::normalize_bus_id(&g.pci_bus_id).as_deref(),
                    Some(g.pci_bus_id.as_str()),
                    "{name}"
                );
            }
            let c = container::inspect(&host, &[], Some(cm.gpus.len() as u32).filter(|&n| n > 0));
            assert!(c.cgroup_version.is_some(), "{name}: no cgroup found");
            assert!(
                c.effective_cpus.unwrap_or(0) > 0 && c.effective_cpus <= c.host_cpus,
                "{name}"
            );
            let net = network::inspect(&host, &[]);
            assert!(!net.interfaces.is_empty(), "{name}: no interfaces");
            for d in &net.rdma_devices {
                assert!(!d.ports.is_empty(), "{name}: {} has no ports", d.name);
            }
            let p = parameters::inspect(
                &host,
                cm.numa_nodes.iter().filter(|n| n.cpu_count > 0).count(),
            );
            assert_eq!(p.parameters.len(), 15, "{name}");
            for param in &p.parameters {
                if param.path.starts_with("/proc/sys/vm/")
                    || param.path.starts_with("/proc/sys/kernel/")
                {
                    assert!(param.value.is_some(), "{name}: {} unreadable", param.name);
                }
            }
            let sw = software::inspect(
                &host,
                &[],
                &software::SoftwareOptions {
                    skip_python: true,
                    skip_libraries: true,
                    ..Default::default()
                },
            );
            assert!(sw.os.kernel.is_some(), "{name}: no kernel release");
            // A host with NVIDIA GPUs and a loaded driver names its version.
            if !cm.gpus.is_empty() && host.exists("/proc/driver/nvidia/version") {
                assert!(
                    sw.driver.version.is_some(),
                    "{name}: driver version not parsed"
                );
            }
        }
    }

    #[test]
    fn gpu_and_nic_paths_classify_on_every_sample() {
        for (name, host) in samples() {
            let gpus = pci::nvidia_gpus(&host);
            let nics: Vec<pci::PciDevice> = host
                .list("/sys/class/infiniband")
                .iter()
                .filter_map(|n| host.resolve(&format!("/sys/class/infiniband/{n}/device")))
                .filter_map(|p| pci::bus_id_of_path(&p))
                .map(|b| pci::read_device(&host, &b))
                .collect();
            for a in gpus.iter().chain(&nics) {
                let pa = a
                    .sysfs_path
                    .as_deref()
                    .unwrap_or_else(|| panic!("{name}: {} has no sysfs path", a.bus_id));
                assert!(pa.starts_with("/sys/devices/pci"), "{name}: {pa}");
                for b in gpus.iter().chain(&nics) {
                    if a.bus_id == b.bus_id {
                        continue;
                    }
                    let pb = b.sysfs_path.as_deref().unwrap_or("");
                    let l = pci::classify_pcie_path(pa, pb, a.numa_node, b.numa_node);
                    // Symmetric, and SYS only across NUMA nodes.
                    assert_eq!(
                        l,
                        pci::classify_pcie_path(pb, pa, b.numa_node, a.numa_node),
                        "{name}"
                    );
                    if l == PcieLevel::Sys {
                        assert_ne!(
                            a.numa_node, b.numa_node,
                            "{name}: {} {}",
                            a.bus_id, b.bus_id
                        );
                    }
                }
            }
        }
    }
}
