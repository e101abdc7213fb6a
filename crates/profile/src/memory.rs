//! `memory`: memcpy and memset traffic by direction and by memory kinds (the
//! labels come from the export's own `ENUM_CUDA_MEMCPY_OPER` and
//! `ENUM_CUDA_MEM_KIND`), achieved bandwidth, async copies from pageable
//! memory (the `nsys analyze cuda_memcpy_async` rule: an Async API and a
//! pageable source or destination), blocking copy/memset API calls, and GPU
//! memory usage over time when the export recorded it.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calls;
use super::model::{self, int, opt_int};
use super::windows;
use super::{Profile, ResolvedScope, Result};

/// Labels used when an export has no `ENUM_CUDA_MEMCPY_OPER` table
/// (the values of every Nsight Systems 2024–2026 export we have seen).
pub fn default_memcpy_oper_labels() -> HashMap<i64, String> {
    [
        (0, "Unknown"),
        (1, "Host-to-Device"),
        (2, "Device-to-Host"),
        (3, "Host-to-Array"),
        (4, "Array-to-Host"),
        (5, "Array-to-Array"),
        (6, "Array-to-Device"),
        (7, "Device-to-Array"),
        (8, "Device-to-Device"),
        (9, "Host-to-Host"),
        (10, "Peer-to-Peer"),
        (11, "Unified Host-to-Device"),
        (12, "Unified Device-to-Host"),
        (13, "Unified Device-to-Device"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .collect()
}

/// (copyKind, srcKind, dstKind).
type ClassKey = (i64, Option<i64>, Option<i64>);

/// The id of the pageable memory kind in this export, when its enum says so.
pub fn pageable_kind(p: &Profile) -> Result<Option<i64>> {
    Ok(p.mem_kind_labels()?
        .iter()
        .find(|(_, l)| l.eq_ignore_ascii_case("Pageable"))
        .map(|(k, _)| *k))
}

/// Achieved bandwidth in GB/s (10^9 bytes per second), 2 decimals.
pub fn gb_per_s(bytes: i64, ns: i64) -> f64 {
    if ns <= 0 {
        return 0.0;
    }
    super::stats::round_ratio(bytes as i128, ns as i128, 100)
}

/// One transfer class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TransferClass {
    /// Direction label from ENUM_CUDA_MEMCPY_OPER, e.g. "Host-to-Device", or "Memset".
    pub direction: String,
    /// Source memory kind label (ENUM_CUDA_MEM_KIND), when recorded.
    pub src_kind: Option<String>,
    pub dst_kind: Option<String>,
    pub count: u64,
    pub bytes: i64,
    pub time_ns: i64,
    /// Σ bytes / Σ time.
    pub bandwidth_gb_per_s: f64,
    /// The fastest single transfer of the class.
    pub peak_gb_per_s: f64,
    /// The class split by the device that ran the transfers (every device, never only the largest; left out
    /// of default `aisp_profile_memory` answers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_device: Vec<DeviceTraffic>,
}

/// One device's share of a transfer class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceTraffic {
    pub device: i64,
    pub count: u64,
    pub bytes: i64,
    pub time_ns: i64,
    pub bandwidth_gb_per_s: f64,
}

/// Per device: (count, bytes, time).
type DeviceSplit = BTreeMap<i64, (u64, i64, i64)>;

fn device_split(split: DeviceSplit) -> Vec<DeviceTraffic> {
    split
        .into_iter()
        .map(|(device, (count, bytes, time_ns))| DeviceTraffic {
            device,
            count,
            bytes,
            time_ns,
            bandwidth_gb_per_s: gb_per_s(bytes, time_ns),
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Direction {
    pub direction: String,
    pub count: u64,
    pub bytes: i64,
    pub time_ns: i64,
    pub bandwidth_gb_per_s: f64,
}

/// A copy flagged by a rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlaggedCopy {
    pub start_ns: i64,
    pub duration_ns: i64,
    pub bytes: i64,
    pub direction: String,
    pub src_kind: Option<String>,
    pub dst_kind: Option<String>,
    pub device: i64,
    pub stream: i64,
    pub pid: i64,
    /// The launching API call (correlationId + process).
    pub api: Option<String>,
    /// Duration of the API call.
    pub api_duration_ns: Option<i64>,
    /// Whether it ran inside the device's steps window.
    pub in_steps: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PageableAsync {
    /// Whether the export records memory kinds at all (srcKind/dstKind + ENUM_CUDA_MEM_KIND).
    pub kinds_recorded: bool,
    pub count: u64,
    pub bytes: i64,
    pub time_ns: i64,
    /// How many ran inside the steps window of their device.
    pub in_steps: u64,
    /// The largest ones (at most `limit`).
    pub largest: Vec<FlaggedCopy>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlockingCalls {
    /// Calls of blocking (non-Async) memcpy APIs, e.g. `cudaMemcpy`.
    pub sync_memcpy_calls: u64,
    pub sync_memcpy_ns: i64,
    /// Calls of blocking memset APIs, e.g. `cudaMemset`.
    pub sync_memset_calls: u64,
    pub sync_memset_ns: i64,
    /// API names seen, with counts.
    pub apis: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UsagePoint {
    pub t_ns: i64,
    pub bytes: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceMemoryUsage {
    pub device: i64,
    pub allocations: u64,
    pub frees: u64,
    /// Highest net allocated bytes seen (allocations − frees, from the start of the capture).
    pub peak_bytes: i64,
    pub peak_at_ns: i64,
    pub final_bytes: i64,
    /// Net allocated bytes over time, downsampled to at most 50 points (left out of default
    /// `aisp_profile_memory` answers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<UsagePoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Memory {
    pub by_direction: Vec<Direction>,
    /// By direction and source/destination memory kind.
    pub by_class: Vec<TransferClass>,
    pub memset: TransferClass,
    pub pageable_async: PageableAsync,
    pub blocking: BlockingCalls,
    /// GPU memory usage over time (CUDA_GPU_MEMORY_USAGE_EVENTS); empty when not recorded.
    pub usage: Vec<DeviceMemoryUsage>,
    /// The memory-kind labels read from the export.
    pub mem_kind_labels: BTreeMap<i64, String>,
    pub notes: Vec<String>,
}

pub fn memory(p: &Profile, scope: &ResolvedScope, limit: usize) -> Result<Memory> {
    let opers = p.memcpy_oper_labels()?;
    let kinds = p.mem_kind_labels()?;
    let pageable = pageable_kind(p)?;
    let api = p.api()?;
    let label = |id: Option<i64>| {
        id.map(|k| {
            kinds
                .get(&k)
                .cloned()
                .unwrap_or_else(|| format!("kind {k}"))
        })
    };
    let dir = |k: i64| {
        opers
            .get(&k)
            .cloned()
            .unwrap_or_else(|| format!("copyKind {k}"))
    };
    let memcpys: Vec<&model::Memcpy> = p
        .memcpys()?
        .iter()
        .filter(|m| scope.admits(m.device, m.global_pid, m.start, m.end))
        .collect();
    let correlation_only = p
        .tables()
        .memcpy
        .as_ref()
        .is_none_or(|t| !t.has("globalPid"));
    let index = super::correlation_index_for(
        api,
        correlation_only,
        memcpys.iter().map(|m| (m.global_pid, m.correlation)),
    );
    let steps: HashMap<i64, (i64, i64)> = windows::device_windows(p, scope)?
        .into_iter()
        .filter_map(|w| w.steps.map(|s| (w.device, s.bounds())))
        .collect();
    let mut by_dir: BTreeMap<i64, (u64, i64, i64)> = BTreeMap::new();
    let mut by_class: BTreeMap<ClassKey, (u64, i64, i64, f64, DeviceSplit)> = BTreeMap::new();
    let mut flagged = Vec::new();
    let mut pa = PageableAsync {
        kinds_recorded: pageable.is_some()
            && p.tables()
                .memcpy
                .as_ref()
                .is_some_and(|t| t.has("srcKind") && t.has("dstKind")),
        count: 0,
        bytes: 0,
        time_ns: 0,
        in_steps: 0,
        largest: Vec::new(),
    };
    for m in &memcpys {
        let d = m.end - m.start;
        let e = by_dir.entry(m.copy_kind).or_default();
        e.0 += 1;
        e.1 += m.bytes;
        e.2 += d;
        let c = by_class
            .entry((m.copy_kind, m.src_kind, m.dst_kind))
            .or_default();
        c.0 += 1;
        c.1 += m.bytes;
        c.2 += d;
        c.3 = c.3.max(gb_per_s(m.bytes, d));
        let dv = c.4.entry(m.device).or_default();
        dv.0 += 1;
        dv.1 += m.bytes;
        dv.2 += d;
        let Some(pk) = pageable else { continue };
        if m.src_kind != Some(pk) && m.dst_kind != Some(pk) {
            continue;
        }
        let call = index
            .find(m.global_pid, m.correlation)
            .map(|i| &api[i as usize]);
        let api_name = call.map(|a| calls::api_display_name(p.string(a.name)).to_string());
        if !api_name.as_deref().is_some_and(calls::is_async_memcpy_api) {
            continue;
        }
        let in_steps = steps
            .get(&m.device)
            .is_some_and(|&(s, e)| m.start >= s && m.start < e);
        pa.count += 1;
        pa.bytes += m.bytes;
        pa.time_ns += d;
        pa.in_steps += in_steps as u64;
        flagged.push(FlaggedCopy {
            start_ns: m.start,
            duration_ns: d,
            bytes: m.bytes,
            direction: dir(m.copy_kind),
            src_kind: label(m.src_kind),
            dst_kind: label(m.dst_kind),
            device: m.device,
            stream: m.stream,
            pid: model::pid_of(m.global_pid),
            api: api_name,
            api_duration_ns: call.map(|a| a.dur()),
            in_steps,
        });
    }
    flagged.sort_by_key(|f| (std::cmp::Reverse(f.bytes), f.start_ns));
    flagged.truncate(limit);
    pa.largest = flagged;
    let memsets: Vec<&model::Memset> = p
        .memsets()?
        .iter()
        .filter(|m| scope.admits(m.device, m.global_pid, m.start, m.end))
        .collect();
    let ms_bytes: i64 = memsets.iter().map(|m| m.bytes).sum();
    let ms_time: i64 = memsets.iter().map(|m| m.end - m.start).sum();
    let mut blocking = BlockingCalls {
        sync_memcpy_calls: 0,
        sync_memcpy_ns: 0,
        sync_memset_calls: 0,
        sync_memset_ns: 0,
        apis: BTreeMap::new(),
    };
    for a in api
        .iter()
        .filter(|a| scope.admits_thread(a.global_tid, a.start, a.end))
    {
        let name = calls::api_display_name(p.string(a.name));
        if calls::is_sync_memcpy_api(name) {
            blocking.sync_memcpy_calls += 1;
            blocking.sync_memcpy_ns += a.dur();
            *blocking.apis.entry(name.to_string()).or_default() += 1;
        } else if calls::is_sync_memset_api(name) {
            blocking.sync_memset_calls += 1;
            blocking.sync_memset_ns += a.dur();
            *blocking.apis.entry(name.to_string()).or_default() += 1;
        }
    }
    let mut notes = Vec::new();
    if !pa.kinds_recorded {
        notes.push(
            "this export does not record memory kinds (no srcKind/dstKind or no ENUM_CUDA_MEM_KIND): \
             pageable copies cannot be identified"
                .to_string(),
        );
    }
    Ok(Memory {
        by_direction: by_dir
            .into_iter()
            .map(|(k, (n, b, t))| Direction {
                direction: dir(k),
                count: n,
                bytes: b,
                time_ns: t,
                bandwidth_gb_per_s: gb_per_s(b, t),
            })
            .collect(),
        by_class: by_class
            .into_iter()
            .map(|((k, s, d), (n, b, t, peak, split))| TransferClass {
                direction: dir(k),
                src_kind: label(s),
                dst_kind: label(d),
                count: n,
                bytes: b,
                time_ns: t,
                bandwidth_gb_per_s: gb_per_s(b, t),
                peak_gb_per_s: peak,
                per_device: device_split(split),
            })
            .collect(),
        memset: TransferClass {
            direction: "Memset".into(),
            src_kind: None,
            dst_kind: None,
            count: memsets.len() as u64,
            bytes: ms_bytes,
            time_ns: ms_time,
            bandwidth_gb_per_s: gb_per_s(ms_bytes, ms_time),
            peak_gb_per_s: memsets
                .iter()
                .map(|m| gb_per_s(m.bytes, m.end - m.start))
                .fold(0.0, f64::max),
            per_device: device_split(memsets.iter().fold(DeviceSplit::new(), |mut acc, m| {
                let e = acc.entry(m.device).or_default();
                e.0 += 1;
                e.1 += m.bytes;
                e.2 += m.end - m.start;
                acc
            })),
        },
        pageable_async: pa,
        blocking,
        usage: usage(p, scope)?,
        mem_kind_labels: kinds.iter().map(|(k, v)| (*k, v.clone())).collect(),
        notes,
    })
}

fn usage(p: &Profile, scope: &ResolvedScope) -> Result<Vec<DeviceMemoryUsage>> {
    let Some(t) = &p.tables().memory_usage else {
        return Ok(Vec::new());
    };
    if !(t.has("start") && t.has("deviceId") && t.has("bytes") && t.has("memoryOperationType")) {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT start, deviceId, bytes, memoryOperationType, {} FROM {} ORDER BY start",
        t.col_or("globalPid", "NULL"),
        t.quoted()
    );
    let mut stmt = p.conn().prepare(&sql).map_err(|e| p.read_err(e))?;
    let mut rows = stmt.query([]).map_err(|e| p.read_err(e))?;
    let mut per: BTreeMap<i64, (DeviceMemoryUsage, Vec<UsagePoint>, i64)> = BTreeMap::new();
    while let Some(r) = rows.next().map_err(|e| p.read_err(e))? {
        let (t_ns, device, bytes, op) = (int(r, 0), int(r, 1), int(r, 2), int(r, 3));
        let gpid = opt_int(r, 4).unwrap_or(0);
        if scope.device.is_some_and(|d| d != device)
            || scope
                .process
                .is_some_and(|pp| gpid != 0 && model::pid_of(gpid) != pp)
        {
            continue;
        }
        let e = per.entry(device).or_insert_with(|| {
            (
                DeviceMemoryUsage {
                    device,
                    allocations: 0,
                    frees: 0,
                    peak_bytes: 0,
                    peak_at_ns: t_ns,
                    final_bytes: 0,
                    timeline: Vec::new(),
                },
                Vec::new(),
                0,
            )
        });
        // ENUM_CUDA_DEV_MEM_EVENT_OPER: 0 allocation, 1 deallocation.
        if op == 0 {
            e.0.allocations += 1;
            e.2 += bytes;
        } else {
            e.0.frees += 1;
            e.2 -= bytes;
        }
        if e.2 > e.0.peak_bytes {
            e.0.peak_bytes = e.2;
            e.0.peak_at_ns = t_ns;
        }
        e.1.push(UsagePoint { t_ns, bytes: e.2 });
    }
    Ok(per
        .into_values()
        .map(|(mut u, points, last)| {
            u.final_bytes = last;
            let step = points.len().div_ceil(50).max(1);
            u.timeline = points
                .iter()
                .enumerate()
                .filter(|(i, _)| i % step == 0 || *i + 1 == points.len())
                .map(|(_, pt)| pt.clone())
                .collect();
            u
        })
        .collect())
}
