//! Kernel settings that affect GPU hosts: each with its value, the value
//! recommended for training/inference hosts, and why. The catalog lives in
//! `data/system/kernel_parameters.toml`; the CPU governor and the IOMMU mode
//! are checked here because they are not single files.

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::host::HostRoot;

const CATALOG: &str = include_str!("../../../../data/system/kernel_parameters.toml");

#[derive(Debug, Clone, Deserialize)]
struct Catalog {
    parameter: Vec<CatalogEntry>,
}

#[derive(Debug, Clone, Deserialize)]
struct CatalogEntry {
    name: String,
    path: String,
    check: Check,
    recommended: String,
    #[serde(default)]
    field: usize,
    applies: Applies,
    fix: String,
    why: String,
    source: String,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Check {
    Equals,
    AtMost,
    AtLeast,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Applies {
    Always,
    MultiNuma,
}

fn catalog() -> &'static [CatalogEntry] {
    static C: OnceLock<Vec<CatalogEntry>> = OnceLock::new();
    C.get_or_init(|| match toml::from_str::<Catalog>(CATALOG) {
        Ok(c) => c.parameter,
        Err(e) => {
            // Covered by a unit test; never reached in a released build.
            tracing::error!("kernel_parameters.toml does not parse: {e}");
            Vec::new()
        }
    })
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ParamStatus {
    /// The value meets the recommendation.
    Ok,
    /// The value differs from the recommendation.
    Differs,
    /// The setting does not matter on this host (e.g. NUMA settings with one node).
    NotApplicable,
    /// The setting could not be read here (no such file, or hidden in a container).
    Unavailable,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Parameter {
    /// sysctl-style name.
    pub name: String,
    /// Where it was read.
    pub path: String,
    /// The value as read (for `[x] y` selections, the selected word); null when unreadable.
    pub value: Option<String>,
    /// The recommendation, as `0`, `<= 10`, `>= 4096`, ...
    pub recommended: String,
    pub status: ParamStatus,
    /// Why it matters for GPU work.
    pub why: String,
    /// How to set it (as root; persist it in /etc/sysctl.d/ or the boot configuration).
    pub fix: Option<String>,
    /// Where the behaviour is documented.
    pub source: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ParametersReport {
    pub parameters: Vec<Parameter>,
    /// Count of parameters that differ from the recommendation.
    pub differs: usize,
    pub notes: Vec<String>,
}

/// The selected word of a sysfs selection such as `always [madvise] never`;
/// other text is returned trimmed.
pub fn selected_word(text: &str) -> String {
    let t = text.trim();
    match (t.find('['), t.find(']')) {
        (Some(a), Some(b)) if b > a => t[a + 1..b].to_string(),
        _ => t.to_string(),
    }
}

/// The CPU frequency governors in use: `performance` or `powersave (96), performance (16)`.
pub fn governors(host: &HostRoot) -> Option<String> {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for cpu in host.list("/sys/devices/system/cpu") {
        if !cpu
            .strip_prefix("cpu")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        if let Some(g) = host.read_trim(&format!(
            "/sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor"
        )) {
            *counts.entry(g).or_default() += 1;
        }
    }
    match counts.len() {
        0 => None,
        1 => counts.into_keys().next(),
        _ => {
            let mut v: Vec<(String, usize)> = counts.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            Some(
                v.iter()
                    .map(|(g, n)| format!("{g} ({n})"))
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        }
    }
}

/// The IOMMU mode from the kernel command line: `pt`, `off`, `on`, or `default`.
pub fn iommu_mode(cmdline: &str) -> String {
    let mut mode = "default".to_string();
    for tok in cmdline.split_whitespace() {
        match tok {
            "iommu=pt" | "iommu.passthrough=1" => return "pt".to_string(),
            "iommu=off" | "intel_iommu=off" | "amd_iommu=off" => mode = "off".to_string(),
            "intel_iommu=on" | "amd_iommu=on" | "iommu=on" | "iommu=force" => {
                mode = "on".to_string()
            }
            _ => {}
        }
    }
    mode
}

fn number_field(text: &str, field: usize) -> Option<f64> {
    text.split_whitespace().nth(field)?.parse().ok()
}

/// Read and judge every parameter. `numa_nodes_with_cpus` decides whether the
/// NUMA settings apply.
pub fn inspect(host: &HostRoot, numa_nodes_with_cpus: usize) -> ParametersReport {
    let mut notes = Vec::new();
    if catalog().is_empty() {
        notes.push("the parameter catalog failed to load (a bug in this build)".to_string());
    }
    let mut parameters: Vec<Parameter> = catalog()
        .iter()
        .map(|e| {
            let raw = host.read_trim(&e.path);
            let value = raw.as_deref().map(|t| match e.check {
                Check::Equals => selected_word(t),
                _ => t.split_whitespace().collect::<Vec<_>>().join(" "),
            });
            let recommended = match e.check {
                Check::Equals => e.recommended.clone(),
                Check::AtMost => format!("<= {}", e.recommended),
                Check::AtLeast => format!(">= {}", e.recommended),
            };
            let status = if e.applies == Applies::MultiNuma && numa_nodes_with_cpus <= 1 {
                ParamStatus::NotApplicable
            } else {
                match value.as_deref() {
                    None => ParamStatus::Unavailable,
                    Some(v) => {
                        let ok = match e.check {
                            Check::Equals => v == e.recommended,
                            Check::AtMost | Check::AtLeast => {
                                match (number_field(v, e.field), e.recommended.parse::<f64>().ok())
                                {
                                    (Some(x), Some(r)) => {
                                        if e.check == Check::AtMost {
                                            x <= r
                                        } else {
                                            x >= r
                                        }
                                    }
                                    _ => false,
                                }
                            }
                        };
                        if ok {
                            ParamStatus::Ok
                        } else {
                            ParamStatus::Differs
                        }
                    }
                }
            };
            Parameter {
                name: e.name.clone(),
                path: e.path.clone(),
                value,
                recommended,
                fix: (status == ParamStatus::Differs).then(|| e.fix.clone()),
                status,
                why: e.why.clone(),
                source: e.source.clone(),
            }
        })
        .collect();

    let gov = governors(host);
    let gov_status = match gov.as_deref() {
        None => ParamStatus::Unavailable,
        Some("performance") => ParamStatus::Ok,
        Some(_) => ParamStatus::Differs,
    };
    parameters.push(Parameter {
        name: "cpufreq.scaling_governor".to_string(),
        path: "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor".to_string(),
        value: gov,
        recommended: "performance".to_string(),
        fix: (gov_status == ParamStatus::Differs)
            .then(|| "cpupower frequency-set -g performance".to_string()),
        status: gov_status,
        why: "The CPU launches every kernel: with powersave or ondemand, cores clock down between bursts and \
              kernel-launch latency, Python overhead and data loading slow down, which shows as gaps between GPU \
              kernels in small-batch and inference workloads."
            .to_string(),
        source: "Linux kernel Documentation/admin-guide/pm/cpufreq.rst (scaling governors: performance keeps \
                 the highest frequency within the policy limits)."
            .to_string(),
    });

    let cmdline = host.read("/proc/cmdline");
    let iommu = cmdline.as_deref().map(iommu_mode);
    let iommu_status = match iommu.as_deref() {
        None => ParamStatus::Unavailable,
        Some("on") => ParamStatus::Differs,
        Some(_) => ParamStatus::Ok,
    };
    parameters.push(Parameter {
        name: "iommu".to_string(),
        path: "/proc/cmdline".to_string(),
        value: iommu,
        recommended: "pt, off or default".to_string(),
        fix: (iommu_status == ParamStatus::Differs)
            .then(|| "add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX) and reboot".to_string()),
        status: iommu_status,
        why: "With the IOMMU translating DMA, peer-to-peer traffic between GPUs and GPUDirect RDMA between NICs and \
              GPUs is redirected through the root complex or fails, so NCCL P2P is slow or hangs; passthrough mode \
              keeps device isolation without translating DMA."
            .to_string(),
        source: "NCCL documentation, Troubleshooting: PCI Access Control Services (ACS) and IOMMU \
                 (disable IOMMU or use iommu=pt for GPU Direct)."
            .to_string(),
    });
    if !host.is_live() && cmdline.is_none() {
        notes.push("the captured sample has no /proc/cmdline".to_string());
    }
    let differs = parameters
        .iter()
        .filter(|p| p.status == ParamStatus::Differs)
        .count();
    ParametersReport {
        parameters,
        differs,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_parses_and_every_entry_has_a_source() {
        assert_eq!(catalog().len(), 13);
        for e in catalog() {
            assert!(!e.source.is_empty() && !e.why.is_empty(), "{}", e.name);
            if e.check != Check::Equals {
                assert!(e.recommended.parse::<f64>().is_ok(), "{}", e.name);
            }
        }
    }

    #[test]
    fn the_captured_container_sample_is_judged_exactly() {
        let host = HostRoot::at(format!(
            "{}/tests/data/host/container-vm-2cpu",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        ));
        let r = inspect(&host, 1);
        let get = |n: &str| r.parameters.iter().find(|p| p.name == n).unwrap();
        let numa = get("kernel.numa_balancing");
        assert_eq!(
            (numa.value.as_deref(), numa.status),
            (Some("0"), ParamStatus::NotApplicable)
        );
        let thp = get("transparent_hugepage.enabled");
        assert_eq!(
            (thp.value.as_deref(), thp.status),
            (Some("madvise"), ParamStatus::Ok)
        );
        let swp = get("vm.swappiness");
        assert_eq!(
            (swp.value.as_deref(), swp.status),
            (Some("60"), ParamStatus::Differs)
        );
        assert_eq!(swp.fix.as_deref(), Some("sysctl -w vm.swappiness=10"));
        assert_eq!(get("vm.dirty_ratio").status, ParamStatus::Ok);
        assert_eq!(
            get("vm.dirty_background_ratio").status,
            ParamStatus::Differs
        );
        assert_eq!(get("kernel.perf_event_paranoid").status, ParamStatus::Ok);
        let rmem = get("net.core.rmem_max");
        assert_eq!(
            (rmem.value.as_deref(), rmem.status),
            (Some("4194304"), ParamStatus::Differs)
        );
        let tcp = get("net.ipv4.tcp_rmem");
        assert_eq!(
            (tcp.value.as_deref(), tcp.status),
            (Some("4096 131072 33554432"), ParamStatus::Ok)
        );
        assert_eq!(get("net.ipv4.tcp_wmem").status, ParamStatus::Differs);
        assert_eq!(get("net.core.somaxconn").status, ParamStatus::Ok);
        assert_eq!(
            get("cpufreq.scaling_governor").status,
            ParamStatus::Unavailable
        );
        let iommu = get("iommu");
        assert_eq!(
            (iommu.value.as_deref(), iommu.status),
            (Some("default"), ParamStatus::Ok)
        );
        // swappiness, dirty_background_ratio, rmem_max, wmem_max, tcp_wmem.
        assert_eq!(r.differs, 5);
        // With two NUMA nodes the NUMA settings are judged.
        let r2 = inspect(&host, 2);
        assert_eq!(
            r2.parameters
                .iter()
                .find(|p| p.name == "kernel.numa_balancing")
                .unwrap()
                .status,
            ParamStatus::Ok
        );
    }

    #[test]
    fn selections_governors_and_iommu_parse() {
        assert_eq!(selected_word("always [madvise] never\n"), "madvise");
        assert_eq!(
            selected_word("always defer defer+madvise [madvise] never"),
            "madvise"
        );
        assert_eq!(selected_word("60"), "60");
        assert_eq!(
            iommu_mode("BOOT_IMAGE=/vmlinuz intel_iommu=on iommu=pt"),
            "pt"
        );
        assert_eq!(iommu_mode("intel_iommu=on"), "on");
        assert_eq!(iommu_mode("quiet splash"), "default");
        assert_eq!(number_field("4096 131072 33554432", 2), Some(33_554_432.0));
    }
}
