//! `aisp_gpu_nvlink`: per NVLink of each GPU: state, version, speed, what is
//! at the other end, error counters, and data counters where the GPU reports
//! them. The same link scan feeds the `NV#` cells of the topology matrix.

use std::time::Duration;

use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use schemars::JsonSchema;
use serde::Serialize;

use super::nvml_util::{Notes, RemoteType, describe, field_values, remote_device_type, round2};
use crate::host::pci::normalize_bus_id;

/// NVML field ids (nvml.h).
const FI_LINK_COUNT: u32 = 91;
const FI_SPEED_COMMON_MBPS: u32 = 90;
/// Per-link speed (scope id = link), NVML_FI_DEV_NVLINK_GET_SPEED.
const FI_LINK_SPEED_MBPS: u32 = 164;
const FI_THROUGHPUT_DATA_TX_KIB: u32 = 138;
const FI_THROUGHPUT_DATA_RX_KIB: u32 = 139;
/// NVML_NVLINK_MAX_LINKS of the NVML headers this build knows (18 through Blackwell).
const MAX_LINKS: u32 = 18;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GpuNvlink {
    pub index: u32,
    pub name: Option<String>,
    /// Links the GPU has (NVML_FI_DEV_NVLINK_LINK_COUNT), where reported.
    pub link_count: Option<u32>,
    pub active_links: u32,
    /// Speed of each active link, per direction, in GB/s (NVML's common link speed, as `nvidia-smi nvlink -s` shows it).
    pub link_speed_gb_per_s: Option<f64>,
    /// Sum of the active links' speeds × 2 directions.
    pub total_bandwidth_bidirectional_gb_per_s: Option<f64>,
    pub links: Vec<LinkInfo>,
    /// Counter rates over `sample_ms`, when asked for and supported.
    pub sampled_throughput: Option<SampledThroughput>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LinkInfo {
    pub link: u32,
    pub active: bool,
    /// NVLink generation (4 on Hopper, 5 on Blackwell).
    pub version: Option<u32>,
    /// PCI address of the device at the other end (a GPU or an NVSwitch), as NVML prints it.
    pub remote_pci_bus_id: Option<String>,
    /// gpu, switch, npu or unknown.
    pub remote_device_type: Option<String>,
    /// NVML index of the GPU at the other end, when it is a GPU on this host.
    pub remote_gpu_index: Option<u32>,
    /// This link's speed per direction in GB/s, where the driver reports it per link.
    pub speed_gb_per_s: Option<f64>,
    /// Data-link replay errors (retransmissions) since driver load.
    pub replay_errors: Option<u64>,
    /// Link recoveries since driver load.
    pub recovery_errors: Option<u64>,
    /// Flow-control digit CRC errors.
    pub crc_flit_errors: Option<u64>,
    /// Data CRC errors.
    pub crc_data_errors: Option<u64>,
    /// Data sent over this link since driver load, in KiB.
    pub data_tx_kib: Option<u64>,
    /// Data received over this link since driver load, in KiB.
    pub data_rx_kib: Option<u64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SampledThroughput {
    pub sample_ms: u64,
    /// Sum over links, per direction, in GB/s.
    pub tx_gb_per_s: f64,
    pub rx_gb_per_s: f64,
}

/// A link's (data transmitted, data received) counters in KiB.
type Counters = (Option<u64>, Option<u64>);

/// What the topology needs from a link scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkEnd {
    /// Remote PCI address in sysfs spelling.
    pub remote_bus_id: Option<String>,
    pub remote_type: Option<RemoteType>,
}

fn remote_name(t: RemoteType) -> &'static str {
    match t {
        RemoteType::Gpu => "gpu",
        RemoteType::Switch => "switch",
        RemoteType::Npu => "npu",
        RemoteType::Unknown => "unknown",
    }
}

/// The link count the GPU reports, or None when it has no NVLink.
fn link_count(nvml: &Nvml, dev: &Device) -> Option<u32> {
    match field_values(nvml, dev, &[(FI_LINK_COUNT, 0)]).pop() {
        Some(Ok(n)) => Some(n as u32),
        _ => None,
    }
}

/// Scan the active links of a GPU: (active link ends, notes). An empty list
/// with no notes means the GPU has no NVLink.
pub fn scan_links(nvml: &Nvml, dev: &Device) -> (Vec<LinkEnd>, Vec<String>) {
    let mut ends = Vec::new();
    let mut notes = Vec::new();
    let max = link_count(nvml, dev).unwrap_or(MAX_LINKS).min(64);
    for l in 0..max {
        let link = dev.link_wrapper_for(l);
        match link.is_active() {
            Ok(true) => {}
            Ok(false) => continue,
            Err(NvmlError::NotSupported) if l == 0 => break,
            Err(NvmlError::NotSupported) | Err(NvmlError::InvalidArg) => continue,
            Err(e) => {
                notes.push(format!("link {l}: {}", describe(&e)));
                continue;
            }
        }
        ends.push(LinkEnd {
            remote_bus_id: link
                .remote_pci_info()
                .ok()
                .and_then(|p| normalize_bus_id(&p.bus_id)),
            remote_type: remote_device_type(nvml, dev, l),
        });
    }
    (ends, notes)
}

/// Probe every link of one GPU. `gpu_bus_ids[i]` is GPU i's PCI address
/// (sysfs spelling) so remote ends can be named. `sample_ms` > 0 reads the
/// data counters twice that far apart.
pub fn probe(
    nvml: &Nvml,
    index: u32,
    gpu_bus_ids: &[Option<String>],
    sample: Option<Duration>,
) -> GpuNvlink {
    let mut n = Notes::new(format!("GPU {index}: "));
    let mut out = GpuNvlink {
        index,
        name: None,
        link_count: None,
        active_links: 0,
        link_speed_gb_per_s: None,
        total_bandwidth_bidirectional_gb_per_s: None,
        links: Vec::new(),
        sampled_throughput: None,
        notes: Vec::new(),
    };
    let dev = match nvml.device_by_index(index) {
        Ok(d) => d,
        Err(e) => {
            n.push(format!("cannot open the device: {}", describe(&e)));
            out.notes = n.list;
            return out;
        }
    };
    out.name = n.take("name", dev.name());
    out.link_count = link_count(nvml, &dev);
    let max = out.link_count.unwrap_or(MAX_LINKS).min(64);
    let mut link_ids = Vec::new();
    for l in 0..max {
        let link = dev.link_wrapper_for(l);
        let active = match link.is_active() {
            Ok(a) => a,
            Err(NvmlError::NotSupported) if l == 0 => {
                n.push(
                    "this GPU has no NVLink, or the driver does not report it (links go over PCIe)",
                );
                break;
            }
            Err(NvmlError::InvalidArg) => break,
            Err(e) => {
                n.push(format!("link {l}: {}", describe(&e)));
                continue;
            }
        };
        let mut info = LinkInfo {
            link: l,
            active,
            version: None,
            remote_pci_bus_id: None,
            remote_device_type: None,
            remote_gpu_index: None,
            speed_gb_per_s: None,
            replay_errors: None,
            recovery_errors: None,
            crc_flit_errors: None,
            crc_data_errors: None,
            data_tx_kib: None,
            data_rx_kib: None,
        };
        if active {
            info.version = n.take(&format!("link {l} version"), link.version());
            if let Some(p) = n.take(
                &format!("link {l} remote_pci_bus_id"),
                link.remote_pci_info(),
            ) {
                let norm = normalize_bus_id(&p.bus_id);
                info.remote_gpu_index = norm.as_ref().and_then(|b| {
                    gpu_bus_ids
                        .iter()
                        .position(|g| g.as_ref() == Some(b))
                        .map(|i| i as u32)
                });
                info.remote_pci_bus_id = Some(p.bus_id);
            }
            info.remote_device_type =
                remote_device_type(nvml, &dev, l).map(|t| remote_name(t).to_string());
            let mut err = |what: &str, c: ErrorCounter| {
                match link.error_counter(c) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        // One note per counter kind, not per link.
                        let msg = format!("{what} errors: {}", describe(&e));
                        if !n.list.iter().any(|x| x.ends_with(&msg)) {
                            n.push(msg);
                        }
                        None
                    }
                }
            };
            info.replay_errors = err("replay", ErrorCounter::DlReplay);
            info.recovery_errors = err("recovery", ErrorCounter::DlRecovery);
            info.crc_flit_errors = err("crc_flit", ErrorCounter::DlCrcFlit);
            info.crc_data_errors = err("crc_data", ErrorCounter::DlCrcData);
            link_ids.push(l);
        }
        out.links.push(info);
    }
    out.active_links = link_ids.len() as u32;
    if out.links.is_empty() && n.list.is_empty() {
        n.push("no NVLinks reported: this GPU connects to its peers over PCIe");
    }
    if link_ids.is_empty() {
        out.notes = n.list;
        return out;
    }
    // The common speed of the active links, and each link's own speed (R525+).
    let mut req = vec![(FI_SPEED_COMMON_MBPS, 0)];
    req.extend(link_ids.iter().map(|&l| (FI_LINK_SPEED_MBPS, l)));
    let speeds = field_values(nvml, &dev, &req);
    for (&l, v) in link_ids.iter().zip(speeds.iter().skip(1)) {
        if let (Ok(mbps), Some(info)) = (v, out.links.iter_mut().find(|x| x.link == l))
            && *mbps > 0.0
        {
            info.speed_gb_per_s = Some(round2(mbps / 1000.0));
        }
    }
    let per_link: Vec<f64> = out.links.iter().filter_map(|l| l.speed_gb_per_s).collect();
    let common = match speeds.first() {
        Some(Ok(mbps)) if *mbps > 0.0 => Some(round2(mbps / 1000.0)),
        Some(Err(e)) if per_link.is_empty() => {
            n.push(format!("link_speed_gb_per_s: {e}"));
            None
        }
        _ => None,
    };
    out.link_speed_gb_per_s = common.or_else(|| {
        let mut v = per_link.clone();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    });
    if out.link_speed_gb_per_s.is_none()
        && !n.list.iter().any(|x| x.contains("link_speed_gb_per_s"))
    {
        n.push("link_speed_gb_per_s: not reported");
    }
    out.total_bandwidth_bidirectional_gb_per_s =
        if per_link.len() == link_ids.len() && !per_link.is_empty() {
            Some(round2(per_link.iter().sum::<f64>() * 2.0))
        } else {
            out.link_speed_gb_per_s
                .map(|g| round2(g * out.active_links as f64 * 2.0))
        };
    let read_counters = |n: &mut Notes| -> Vec<Counters> {
        let req: Vec<(u32, u32)> = link_ids
            .iter()
            .flat_map(|&l| {
                [
                    (FI_THROUGHPUT_DATA_TX_KIB, l),
                    (FI_THROUGHPUT_DATA_RX_KIB, l),
                ]
            })
            .collect();
        let vals = field_values(nvml, &dev, &req);
        if let Some(Err(e)) = vals.first() {
            let msg = format!("data_tx_kib/data_rx_kib: {e}");
            if !n.list.iter().any(|x| x.ends_with(&msg)) {
                n.push(msg);
            }
        }
        vals.chunks(2)
            .map(|c| {
                (
                    c[0].as_ref().ok().map(|v| *v as u64),
                    c.get(1).and_then(|v| v.as_ref().ok()).map(|v| *v as u64),
                )
            })
            .collect()
    };
    let first = read_counters(&mut n);
    if let Some(d) = sample.filter(|d| !d.is_zero()) {
        let t0 = std::time::Instant::now();
        std::thread::sleep(d);
        let second = read_counters(&mut n);
        let secs = t0.elapsed().as_secs_f64();
        let sum = |pick: fn(&Counters) -> Option<u64>| -> Option<f64> {
            let mut total = 0u64;
            for (a, b) in first.iter().zip(&second) {
                total += pick(b)?.saturating_sub(pick(a)?);
            }
            Some(total as f64 * 1024.0 / secs / 1e9)
        };
        if let (Some(tx), Some(rx)) = (sum(|x| x.0), sum(|x| x.1)) {
            out.sampled_throughput = Some(SampledThroughput {
                sample_ms: d.as_millis() as u64,
                tx_gb_per_s: round2(tx),
                rx_gb_per_s: round2(rx),
            });
        }
    }
    let mut active = out.links.iter_mut().filter(|l| l.active);
    for (tx, rx) in first {
        if let Some(l) = active.next() {
            l.data_tx_kib = tx;
            l.data_rx_kib = rx;
        }
    }
    out.notes = n.list;
    out
}
