//! `aisp_gpu_topology`: the link matrix as `nvidia-smi topo -m` draws it
//! (`X`, `NV#`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`, with RDMA NICs as extra
//! rows and columns), peer-to-peer capability per pair, CPU and NUMA affinity
//! per GPU, and a summary in words.
//!
//! GPU-to-GPU PCIe levels come from NVML (`nvmlDeviceGetTopologyCommonAncestor`),
//! NVLink counts from the link scan, and NIC levels from the PCIe tree in
//! sysfs (NVML does not know NICs).

use std::collections::BTreeMap;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{P2pCapabilitiesIndex, P2pStatus, TopologyLevel};
use schemars::JsonSchema;
use serde::Serialize;

use super::nvlink::{LinkEnd, scan_links};
use super::nvml_util::{Notes, RemoteType, describe};
use crate::host::pci::{self, PcieLevel};
use crate::host::{HostRoot, format_cpu_list};

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Topology {
    pub gpu_count: u32,
    /// Row and column labels: GPU0..GPUn-1, then NIC0.. (RDMA devices).
    pub labels: Vec<String>,
    /// The matrix cells in label order: X, NV#, PIX, PXB, PHB, NODE or SYS.
    pub matrix: Vec<Vec<String>>,
    /// The matrix drawn as text, with the affinity columns, like `nvidia-smi topo -m`.
    pub matrix_text: String,
    pub gpus: Vec<GpuAffinity>,
    /// Every GPU pair (a < b) with its link and peer-to-peer capability.
    pub pairs: Vec<GpuPair>,
    /// NIC legend: which RDMA device each NIC label is.
    pub nics: Vec<NicLabel>,
    /// One line: how the GPUs are connected.
    pub summary: String,
    pub legend: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuAffinity {
    pub index: u32,
    pub name: Option<String>,
    /// As nvidia-smi prints it.
    pub pci_bus_id: Option<String>,
    /// CPUs close to the GPU as a kernel CPU list (nvidia-smi's "CPU Affinity").
    pub cpu_affinity: Option<String>,
    /// NUMA nodes close to the GPU (nvidia-smi's "NUMA Affinity").
    pub numa_affinity: Option<String>,
    /// The GPU's own NUMA node, for GPUs whose memory is a NUMA node (Grace Hopper); null otherwise.
    pub gpu_numa_id: Option<u32>,
    pub nvlinks_active: u32,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuPair {
    pub gpu_a: u32,
    pub gpu_b: u32,
    /// The matrix cell (NV18, PIX, SYS, ...).
    pub link: String,
    /// NVLinks between them (through NVSwitches counts the smaller side's switch links, as nvidia-smi does).
    pub nvlinks: u32,
    /// The PCIe path level, even when NVLink connects them.
    pub pcie_level: Option<String>,
    /// ok, or why not (chipset not supported, GPU not supported, topology not supported, disabled by regkey, not supported, unknown).
    pub p2p_read: Option<String>,
    pub p2p_write: Option<String>,
    pub p2p_atomics: Option<String>,
    pub p2p_nvlink: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NicLabel {
    pub label: String,
    pub name: String,
    pub pci_bus_id: Option<String>,
}

/// nvidia-smi's legend.
pub const LEGEND: &[&str] = &[
    "X    = Self",
    "SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
    "NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    "PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    "PIX  = Connection traversing at most a single PCIe bridge",
    "NV#  = Connection traversing a bonded set of # NVLinks",
];

/// NVML's common-ancestor level in nvidia-smi words. `Internal` (two GPUs on
/// one board, e.g. K80) is drawn as PIX.
pub fn level_label(l: TopologyLevel) -> PcieLevel {
    match l {
        TopologyLevel::Internal | TopologyLevel::Single => PcieLevel::Pix,
        TopologyLevel::Multiple => PcieLevel::Pxb,
        TopologyLevel::HostBridge => PcieLevel::Phb,
        TopologyLevel::Node => PcieLevel::Node,
        TopologyLevel::System => PcieLevel::Sys,
    }
}

/// NVLinks between each pair of GPUs from every GPU's active links. Direct
/// GPU links count per pair; links into NVSwitches connect every pair of
/// switch-attached GPUs, counted as the smaller of their switch link counts
/// (DGX H100: 18 each → NV18).
pub fn nvlink_counts(links: &[Vec<LinkEnd>], gpu_bus_ids: &[Option<String>]) -> Vec<Vec<u32>> {
    let n = links.len();
    let mut direct = vec![vec![0u32; n]; n];
    let mut switch = vec![0u32; n];
    for (i, ends) in links.iter().enumerate() {
        for e in ends {
            let remote_gpu = e
                .remote_bus_id
                .as_ref()
                .and_then(|b| gpu_bus_ids.iter().position(|g| g.as_ref() == Some(b)));
            match (e.remote_type, remote_gpu) {
                (_, Some(j)) if j != i => direct[i][j] += 1,
                (Some(RemoteType::Gpu), None) => {} // a GPU this process cannot see
                (Some(RemoteType::Npu), _) => {}
                _ => switch[i] += 1,
            }
        }
    }
    let mut counts = vec![vec![0u32; n]; n];
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            // Each direct link is seen from both ends; take the larger view.
            let d = direct[i][j].max(direct[j][i]);
            let s = if switch[i] > 0 && switch[j] > 0 {
                switch[i].min(switch[j])
            } else {
                0
            };
            counts[i][j] = d + s;
        }
    }
    counts
}

/// One cell of the matrix.
pub fn cell(i: usize, j: usize, nvlinks: u32, pcie: Option<PcieLevel>) -> String {
    if i == j {
        "X".to_string()
    } else if nvlinks > 0 {
        format!("NV{nvlinks}")
    } else {
        pcie.map(|l| l.label().to_string())
            .unwrap_or_else(|| "N/A".to_string())
    }
}

/// Draw the matrix with the affinity columns, aligned.
pub fn render(labels: &[String], matrix: &[Vec<String>], gpus: &[GpuAffinity]) -> String {
    let mut header = vec![String::new()];
    header.extend(labels.iter().cloned());
    header.extend(["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"].map(String::from));
    let mut rows = vec![header];
    for (i, label) in labels.iter().enumerate() {
        let mut r = vec![label.clone()];
        r.extend(matrix[i].iter().cloned());
        if let Some(g) = gpus.get(i) {
            r.push(g.cpu_affinity.clone().unwrap_or_else(|| "N/A".into()));
            r.push(g.numa_affinity.clone().unwrap_or_else(|| "N/A".into()));
            r.push(
                g.gpu_numa_id
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "N/A".into()),
            );
        }
        rows.push(r);
    }
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(String::len)
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .map(|(c, v)| format!("{v:<w$}", w = widths[c]))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// How the GPUs are connected, in one line.
pub fn summarize(gpu_count: usize, pairs: &[GpuPair]) -> String {
    if gpu_count == 0 {
        return "No GPUs.".to_string();
    }
    if gpu_count == 1 {
        return "1 GPU: no peers.".to_string();
    }
    let mut by_link: BTreeMap<&str, Vec<(u32, u32)>> = BTreeMap::new();
    for p in pairs {
        by_link
            .entry(p.link.as_str())
            .or_default()
            .push((p.gpu_a, p.gpu_b));
    }
    let describe_link = |l: &str| -> String {
        match l.strip_prefix("NV") {
            Some(n) => format!("NVLink ×{n}"),
            None => format!("PCIe {l}"),
        }
    };
    let mut text = if by_link.len() == 1 {
        let (l, _) = by_link
            .iter()
            .next()
            .map(|(l, v)| (*l, v.len()))
            .unwrap_or(("", 0));
        format!("{gpu_count} GPUs, all pairs {}", describe_link(l))
    } else {
        // Most common link first.
        let mut groups: Vec<(&str, &Vec<(u32, u32)>)> =
            by_link.iter().map(|(l, v)| (*l, v)).collect();
        groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
        let parts: Vec<String> = groups
            .iter()
            .map(|(l, v)| {
                let list: Vec<String> = v.iter().take(6).map(|(a, b)| format!("{a}-{b}")).collect();
                let more = if v.len() > 6 {
                    format!(" and {} more", v.len() - 6)
                } else {
                    String::new()
                };
                format!(
                    "{} {} ({}{more})",
                    v.len(),
                    describe_link(l),
                    list.join(", ")
                )
            })
            .collect();
        format!(
            "{gpu_count} GPUs, {} pairs: {}",
            pairs.len(),
            parts.join("; ")
        )
    };
    let p2p_ok = |f: fn(&GpuPair) -> &Option<String>| {
        pairs
            .iter()
            .filter(|p| f(p).as_deref() == Some("ok"))
            .count()
    };
    let (r, w, a) = (
        p2p_ok(|p| &p.p2p_read),
        p2p_ok(|p| &p.p2p_write),
        p2p_ok(|p| &p.p2p_atomics),
    );
    if pairs.iter().all(|p| p.p2p_read.is_none()) {
        text.push_str("; peer-to-peer status unknown.");
    } else if r == pairs.len() && w == pairs.len() {
        text.push_str(&format!(
            "; peer-to-peer read/write on all pairs{}.",
            if a == pairs.len() {
                ", atomics too"
            } else {
                ""
            }
        ));
    } else {
        text.push_str(&format!(
            "; peer-to-peer read on {r} of {} pairs, write on {w}, atomics on {a}: NCCL routes the others through host memory.",
            pairs.len()
        ));
    }
    text
}

fn p2p_word(s: P2pStatus) -> String {
    match s {
        P2pStatus::Ok => "ok",
        P2pStatus::ChipsetNotSupported => "chipset not supported",
        P2pStatus::GpuNotSupported => "GPU not supported",
        P2pStatus::IohTopologyNotSupported => "topology not supported",
        P2pStatus::DisabledByRegkey => "disabled by regkey",
        P2pStatus::NotSupported => "not supported",
        P2pStatus::Unknown => "unknown",
    }
    .to_string()
}

/// Turn NVML's CPU affinity bit mask (64-bit words, CPU 0 in bit 0 of word 0) into CPUs.
pub fn mask_to_cpus(words: &[u64]) -> Vec<u32> {
    let mut cpus = Vec::new();
    for (w, word) in words.iter().enumerate() {
        for b in 0..64 {
            if word & (1u64 << b) != 0 {
                cpus.push((w * 64 + b) as u32);
            }
        }
    }
    cpus
}

/// NVML's masks are `c_ulong` words: 64-bit on Linux x86_64/aarch64, 32-bit elsewhere.
#[allow(clippy::unnecessary_cast)]
fn words_u64(w: &[std::ffi::c_ulong]) -> Vec<u64> {
    if std::mem::size_of::<std::ffi::c_ulong>() == 8 {
        w.iter().map(|&x| x as u64).collect()
    } else {
        // Pair 32-bit words into 64-bit ones (low word first).
        w.chunks(2)
            .map(|c| c[0] as u64 | c.get(1).map_or(0, |&h| (h as u64) << 32))
            .collect()
    }
}

/// Probe the topology of every GPU plus the RDMA NICs in `host`.
pub fn probe(nvml: &Nvml, gpu_indices: &[u32], host: &HostRoot) -> Topology {
    let mut notes = Vec::new();
    let n = gpu_indices.len();
    let devs: Vec<Option<nvml_wrapper::Device>> = gpu_indices
        .iter()
        .map(|&i| match nvml.device_by_index(i) {
            Ok(d) => Some(d),
            Err(e) => {
                notes.push(format!("GPU {i}: cannot open the device: {}", describe(&e)));
                None
            }
        })
        .collect();
    let nvml_bus: Vec<Option<String>> = devs
        .iter()
        .map(|d| d.as_ref().and_then(|d| d.pci_info().ok()).map(|p| p.bus_id))
        .collect();
    let sysfs_bus: Vec<Option<String>> = nvml_bus
        .iter()
        .map(|b| b.as_deref().and_then(pci::normalize_bus_id))
        .collect();

    // NVLink scan.
    let mut links = Vec::new();
    for (k, d) in devs.iter().enumerate() {
        match d {
            Some(d) => {
                let (ends, ln) = scan_links(nvml, d);
                notes.extend(
                    ln.into_iter()
                        .map(|s| format!("GPU {}: {s}", gpu_indices[k])),
                );
                links.push(ends);
            }
            None => links.push(Vec::new()),
        }
    }
    let nv = nvlink_counts(&links, &sysfs_bus);

    // CPU and NUMA affinity.
    let cpu_words = {
        let online = host
            .read("/sys/devices/system/cpu/possible")
            .and_then(|t| crate::host::parse_cpu_list(&t))
            .and_then(|c| c.last().copied())
            .unwrap_or(1023);
        (online as usize / (8 * std::mem::size_of::<std::ffi::c_ulong>())) + 1
    };
    let mut gpus = Vec::new();
    for (k, d) in devs.iter().enumerate() {
        let index = gpu_indices[k];
        let mut nn = Notes::new(format!("GPU {index}: "));
        let (name, cpu, numa, gpu_numa) = match d {
            Some(d) => {
                let cpu = nn
                    .take("cpu_affinity", d.cpu_affinity(cpu_words))
                    .map(|w| format_cpu_list(&mask_to_cpus(&words_u64(&w))))
                    .filter(|s| !s.is_empty());
                let numa = nn
                    .take(
                        "numa_affinity",
                        d.memory_affinity(1, nvml_wrapper_sys::bindings::NVML_AFFINITY_SCOPE_NODE),
                    )
                    .map(|w| format_cpu_list(&mask_to_cpus(&words_u64(&w))))
                    .filter(|s| !s.is_empty())
                    .or_else(|| {
                        // Fall back to the PCI device's node in sysfs.
                        sysfs_bus[k]
                            .as_ref()
                            .and_then(|b| pci::read_device(host, b).numa_node)
                            .map(|n| n.to_string())
                    });
                // Only GPUs with coherent memory (Grace Hopper/Blackwell) have a NUMA id; others answer NotSupported.
                let gpu_numa = d.numa_node_id().ok();
                (d.name().ok(), cpu, numa, gpu_numa)
            }
            None => (None, None, None, None),
        };
        notes.extend(nn.list);
        gpus.push(GpuAffinity {
            index,
            name,
            pci_bus_id: nvml_bus[k].clone(),
            cpu_affinity: cpu,
            numa_affinity: numa,
            gpu_numa_id: gpu_numa,
            nvlinks_active: links[k].len() as u32,
        });
    }

    // RDMA NICs and their PCIe paths.
    let mut nics = Vec::new();
    let mut nic_paths = Vec::new();
    for name in host.list("/sys/class/infiniband") {
        let path = host.resolve(&format!("/sys/class/infiniband/{name}/device"));
        let bus = path.as_deref().and_then(pci::bus_id_of_path);
        let numa = bus
            .as_ref()
            .and_then(|b| pci::read_device(host, b).numa_node);
        nic_paths.push((path, numa));
        nics.push(NicLabel {
            label: format!("NIC{}", nics.len()),
            name,
            pci_bus_id: bus,
        });
    }
    let gpu_paths: Vec<(Option<String>, Option<u32>)> = sysfs_bus
        .iter()
        .map(|b| match b {
            Some(b) => {
                let d = pci::read_device(host, b);
                (d.sysfs_path, d.numa_node)
            }
            None => (None, None),
        })
        .collect();

    let total = n + nics.len();
    let mut labels: Vec<String> = gpu_indices.iter().map(|i| format!("GPU{i}")).collect();
    labels.extend(nics.iter().map(|x| x.label.clone()));
    let mut matrix = vec![vec![String::new(); total]; total];
    let mut pairs = Vec::new();
    let mut p2p_note_done = false;
    for a in 0..total {
        for b in 0..total {
            if a == b {
                matrix[a][b] = "X".into();
                continue;
            }
            if a < n && b < n {
                let level = match (&devs[a], &devs[b]) {
                    (Some(da), Some(_)) => match nvml.device_by_index(gpu_indices[b]) {
                        Ok(db) => match da.topology_common_ancestor(db) {
                            Ok(l) => Some(level_label(l)),
                            Err(e) => {
                                if a < b {
                                    notes.push(format!(
                                        "GPU {}-{}: PCIe level: {}",
                                        gpu_indices[a],
                                        gpu_indices[b],
                                        describe(&e)
                                    ));
                                }
                                None
                            }
                        },
                        Err(_) => None,
                    },
                    _ => None,
                };
                matrix[a][b] = cell(a, b, nv[a][b], level);
                if a < b {
                    let p2p = |idx: P2pCapabilitiesIndex| -> Option<String> {
                        let (da, db) = (devs[a].as_ref()?, devs[b].as_ref()?);
                        da.p2p_status(db, idx).ok().map(p2p_word)
                    };
                    let pair = GpuPair {
                        gpu_a: gpu_indices[a],
                        gpu_b: gpu_indices[b],
                        link: matrix[a][b].clone(),
                        nvlinks: nv[a][b],
                        pcie_level: level.map(|l| l.label().to_string()),
                        p2p_read: p2p(P2pCapabilitiesIndex::Read),
                        p2p_write: p2p(P2pCapabilitiesIndex::Write),
                        p2p_atomics: p2p(P2pCapabilitiesIndex::Atomics),
                        p2p_nvlink: p2p(P2pCapabilitiesIndex::NvLink),
                    };
                    if pair.p2p_read.is_none() && !p2p_note_done {
                        notes.push("peer-to-peer status: NVML did not answer".to_string());
                        p2p_note_done = true;
                    }
                    pairs.push(pair);
                }
            } else {
                let pa = if a < n {
                    &gpu_paths[a]
                } else {
                    &nic_paths[a - n]
                };
                let pb = if b < n {
                    &gpu_paths[b]
                } else {
                    &nic_paths[b - n]
                };
                matrix[a][b] = match (&pa.0, &pb.0) {
                    (Some(x), Some(y)) => pci::classify_pcie_path(x, y, pa.1, pb.1)
                        .label()
                        .to_string(),
                    _ => "N/A".to_string(),
                };
            }
        }
    }
    let summary = summarize(n, &pairs);
    let matrix_text = render(&labels, &matrix, &gpus);
    Topology {
        gpu_count: n as u32,
        labels,
        matrix,
        matrix_text,
        gpus,
        pairs,
        nics,
        summary,
        legend: LEGEND.iter().map(|s| s.to_string()).collect(),
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(bus: &str, t: Option<RemoteType>) -> LinkEnd {
        LinkEnd {
            remote_bus_id: Some(bus.to_string()),
            remote_type: t,
        }
    }

    fn pair(a: u32, b: u32, link: &str, p2p: &str) -> GpuPair {
        GpuPair {
            gpu_a: a,
            gpu_b: b,
            link: link.into(),
            nvlinks: link
                .strip_prefix("NV")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            pcie_level: Some("SYS".into()),
            p2p_read: Some(p2p.into()),
            p2p_write: Some(p2p.into()),
            p2p_atomics: Some(p2p.into()),
            p2p_nvlink: None,
        }
    }

    #[test]
    fn nvswitch_systems_count_switch_links_like_nvidia_smi() {
        // DGX H100: every GPU has 18 links into NVSwitches (remote ends are switch bus ids).
        let gpus: Vec<Option<String>> = (0..8)
            .map(|i| Some(format!("0000:{:02x}:00.0", 0x18 + i * 0x10)))
            .collect();
        let links: Vec<Vec<LinkEnd>> = (0..8)
            .map(|_| {
                (0..18)
                    .map(|l| {
                        end(
                            &format!("0000:0{}:00.0", l % 4 + 5),
                            Some(RemoteType::Switch),
                        )
                    })
                    .collect()
            })
            .collect();
        let nv = nvlink_counts(&links, &gpus);
        for (i, row) in nv.iter().enumerate() {
            for (j, &count) in row.iter().enumerate() {
                assert_eq!(count, if i == j { 0 } else { 18 });
            }
        }
        assert_eq!(cell(0, 1, nv[0][1], Some(PcieLevel::Sys)), "NV18");
        assert_eq!(cell(3, 3, 0, None), "X");
    }

    #[test]
    fn direct_links_count_per_pair() {
        // Two H100 NVL boards: GPU0-GPU1 bridged with 12 links, GPU2-GPU3 likewise, no links across.
        let gpus: Vec<Option<String>> = [
            "0000:18:00.0",
            "0000:2a:00.0",
            "0000:9a:00.0",
            "0000:ab:00.0",
        ]
        .iter()
        .map(|s| Some(s.to_string()))
        .collect();
        let to = |b: &str| {
            (0..12)
                .map(|_| end(b, Some(RemoteType::Gpu)))
                .collect::<Vec<_>>()
        };
        let links = vec![
            to("0000:2a:00.0"),
            to("0000:18:00.0"),
            to("0000:ab:00.0"),
            to("0000:9a:00.0"),
        ];
        let nv = nvlink_counts(&links, &gpus);
        assert_eq!(nv[0][1], 12);
        assert_eq!(nv[1][0], 12);
        assert_eq!(nv[2][3], 12);
        assert_eq!(nv[0][2], 0);
        assert_eq!(cell(0, 2, nv[0][2], Some(PcieLevel::Sys)), "SYS");
        // Without the remote type (older drivers), a GPU bus id still counts as a direct link.
        let untyped = vec![
            vec![end("0000:2a:00.0", None)],
            vec![end("0000:18:00.0", None)],
            vec![],
            vec![],
        ];
        assert_eq!(nvlink_counts(&untyped, &gpus)[0][1], 1);
    }

    #[test]
    fn summaries_name_the_links_and_p2p() {
        assert_eq!(summarize(1, &[]), "1 GPU: no peers.");
        let two = vec![pair(0, 1, "NV18", "ok")];
        assert_eq!(
            summarize(2, &two),
            "2 GPUs, all pairs NVLink ×18; peer-to-peer read/write on all pairs, atomics too."
        );
        let mixed = vec![
            pair(0, 1, "NV12", "ok"),
            pair(0, 2, "SYS", "chipset not supported"),
            pair(0, 3, "SYS", "chipset not supported"),
            pair(1, 2, "SYS", "chipset not supported"),
            pair(1, 3, "SYS", "chipset not supported"),
            pair(2, 3, "NV12", "ok"),
        ];
        assert_eq!(
            summarize(4, &mixed),
            "4 GPUs, 6 pairs: 4 PCIe SYS (0-2, 0-3, 1-2, 1-3); 2 NVLink ×12 (0-1, 2-3); peer-to-peer read on 2 of 6 \
             pairs, write on 2, atomics on 2: NCCL routes the others through host memory."
        );
    }

    #[test]
    fn affinity_masks_and_rendering() {
        // CPUs 0-55 and 112-167 of a 224-thread host: words of 64 bits.
        let mut words = vec![0u64; 4];
        for c in (0..56).chain(112..168) {
            words[c / 64] |= 1 << (c % 64);
        }
        assert_eq!(format_cpu_list(&mask_to_cpus(&words)), "0-55,112-167");
        let gpus = vec![
            GpuAffinity {
                index: 0,
                name: None,
                pci_bus_id: None,
                cpu_affinity: Some("0-55,112-167".into()),
                numa_affinity: Some("0".into()),
                gpu_numa_id: None,
                nvlinks_active: 18,
            },
            GpuAffinity {
                index: 1,
                name: None,
                pci_bus_id: None,
                cpu_affinity: Some("0-55,112-167".into()),
                numa_affinity: Some("0".into()),
                gpu_numa_id: None,
                nvlinks_active: 18,
            },
        ];
        let labels = vec!["GPU0".to_string(), "GPU1".to_string()];
        let m = vec![
            vec!["X".to_string(), "NV18".to_string()],
            vec!["NV18".to_string(), "X".to_string()],
        ];
        let text = render(&labels, &m, &gpus);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "      GPU0  GPU1  CPU Affinity  NUMA Affinity  GPU NUMA ID"
        );
        assert_eq!(
            lines[1],
            "GPU0  X     NV18  0-55,112-167  0              N/A"
        );
        assert_eq!(
            lines[2],
            "GPU1  NV18  X     0-55,112-167  0              N/A"
        );
        assert_eq!(level_label(TopologyLevel::HostBridge), PcieLevel::Phb);
        assert_eq!(level_label(TopologyLevel::Node).label(), "NODE");
    }
}
