//! `info`: what an export holds — versions, capture settings, duration,
//! processes and threads, GPUs, streams, event counts, tables.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::model::{self, int, opt_int, text};
use super::{ExportVersion, Profile, Result};

/// A GPU as the export records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuInfo {
    /// `deviceId` as the event tables use it.
    pub device: i64,
    /// Product name; `None` when the export does not record it (say "unknown", never guess).
    pub name: Option<String>,
    pub bus_location: Option<String>,
    /// The UUID the export records for this device (never a guess).
    pub uuid: Option<String>,
    /// A UUID inferred, not recorded: see `uuid_basis` for how, and treat it as a guess.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inferred_uuid: Option<String>,
    /// How `inferred_uuid` was inferred and why it may be wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid_basis: Option<String>,
    pub sm_count: Option<i64>,
    pub memory_bytes: Option<i64>,
    /// `major.minor`.
    pub compute_capability: Option<String>,
    pub chip: Option<String>,
    pub sm_clock_mhz: Option<i64>,
    /// Peak memory bandwidth as recorded (GB = 10^9 bytes).
    pub memory_bandwidth_gb_per_s: Option<f64>,
    /// CUDA device ordinal (TARGET_INFO_CUDA_DEVICE.cudaId or cuDevice).
    pub cuda_id: Option<i64>,
    /// Where the identity came from: `TARGET_INFO_GPU`, `TARGET_INFO_CUDA_DEVICE`, or `unknown` (then at
    /// most an `inferred_uuid`).
    pub source: String,
}

/// The GPUs of the export, one per device id seen in the events (plus any
/// recorded GPU), with fallbacks when `TARGET_INFO_GPU` is missing.
pub fn gpus(p: &Profile) -> Result<Vec<GpuInfo>> {
    let conn = p.conn();
    let mut by_device: BTreeMap<i64, GpuInfo> = BTreeMap::new();
    let blank = |device: i64, source: &str| GpuInfo {
        device,
        name: None,
        bus_location: None,
        uuid: None,
        inferred_uuid: None,
        uuid_basis: None,
        sm_count: None,
        memory_bytes: None,
        compute_capability: None,
        chip: None,
        sm_clock_mhz: None,
        memory_bandwidth_gb_per_s: None,
        cuda_id: None,
        source: source.to_string(),
    };
    let tables = p.tables();
    if let Some(t) = &tables.gpu_info {
        let c = |col: &str| t.col_or(col, "NULL");
        let sql = format!(
            "SELECT {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {} FROM {}",
            c("id"),
            c("name"),
            c("busLocation"),
            c("uuid"),
            c("smCount"),
            c("totalMemory"),
            c("computeMajor"),
            c("computeMinor"),
            c("chipName"),
            c("clockRate"),
            c("memoryBandwidth"),
            c("cuDevice"),
            c("isDiscrete"),
            t.quoted()
        );
        let mut stmt = conn.prepare(&sql).map_err(|e| p.read_err(e))?;
        let mut rows = stmt.query([]).map_err(|e| p.read_err(e))?;
        while let Some(r) = rows.next().map_err(|e| p.read_err(e))? {
            let device = int(r, 0);
            let mut g = blank(device, "TARGET_INFO_GPU");
            g.name = text(r, 1).filter(|s| !s.is_empty());
            g.bus_location = text(r, 2).filter(|s| !s.is_empty());
            g.uuid = text(r, 3).filter(|s| !s.is_empty());
            g.sm_count = opt_int(r, 4).filter(|v| *v > 0);
            g.memory_bytes = opt_int(r, 5).filter(|v| *v > 0);
            g.compute_capability = opt_int(r, 6)
                .zip(opt_int(r, 7))
                .filter(|(a, _)| *a > 0)
                .map(|(a, b)| format!("{a}.{b}"));
            g.chip = text(r, 8).filter(|s| !s.is_empty());
            g.sm_clock_mhz = opt_int(r, 9).filter(|v| *v > 0).map(|hz| hz / 1_000_000);
            g.memory_bandwidth_gb_per_s = opt_int(r, 10)
                .filter(|v| *v > 0)
                .map(|b| (b as f64 / 1e9 * 10.0).round() / 10.0);
            g.cuda_id = opt_int(r, 11);
            by_device.insert(device, g);
        }
    }
    if let Some(t) = &tables.cuda_device {
        // gpuId → cudaId; newer exports also carry uuid / numMultiprocessors here.
        let sql = format!(
            "SELECT {}, {}, {}, {} FROM {}",
            t.col_or("gpuId", "NULL"),
            t.col_or("cudaId", "NULL"),
            t.col_or("uuid", "NULL"),
            t.col_or("numMultiprocessors", "NULL"),
            t.quoted()
        );
        let mut stmt = conn.prepare(&sql).map_err(|e| p.read_err(e))?;
        let mut rows = stmt.query([]).map_err(|e| p.read_err(e))?;
        while let Some(r) = rows.next().map_err(|e| p.read_err(e))? {
            let Some(gpu_id) = opt_int(r, 0) else {
                continue;
            };
            let g = by_device
                .entry(gpu_id)
                .or_insert_with(|| blank(gpu_id, "TARGET_INFO_CUDA_DEVICE"));
            if g.cuda_id.is_none() {
                g.cuda_id = opt_int(r, 1);
            }
            if g.uuid.is_none() {
                g.uuid = text(r, 2).filter(|s| !s.is_empty());
            }
            if g.sm_count.is_none() {
                g.sm_count = opt_int(r, 3).filter(|v| *v > 0);
            }
        }
    }
    let env = environment(p)?;
    let devices: Vec<i64> = p.devices()?;
    let n_visible = env.visible_devices.len();
    // NVIDIA_VISIBLE_DEVICES lists the container's GPUs; deviceId k is *probably* its k-th
    // entry, but CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER or a partial list break that.
    // Infer only when every device is unrecorded and the counts agree, and label it.
    let infer = tables.gpu_info.is_none()
        && n_visible > 0
        && n_visible == devices.len()
        && devices.iter().all(|&d| d >= 0 && (d as usize) < n_visible);
    for d in devices {
        if by_device.contains_key(&d) {
            continue;
        }
        let mut g = blank(d, "unknown");
        if infer {
            g.inferred_uuid = env.visible_devices.get(d as usize).cloned();
            g.uuid_basis = Some(format!(
                "inferred: entry {d} of the {n_visible} UUIDs in the recorded NVIDIA_VISIBLE_DEVICES, assuming \
                 deviceId follows that order; the export records no GPU table, and CUDA_VISIBLE_DEVICES or \
                 CUDA_DEVICE_ORDER can change the mapping"
            ));
        }
        by_device.insert(d, g);
    }
    Ok(by_device.into_values().collect())
}

/// The GPU name of a device, `None` when unrecorded.
pub fn gpu_name(gpus: &[GpuInfo], device: i64) -> Option<String> {
    gpus.iter()
        .find(|g| g.device == device)
        .and_then(|g| g.name.clone())
}

/// Facts about the capture host from `TARGET_INFO_SYSTEM_ENV`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Environment {
    pub hostname: Option<String>,
    pub os: Option<String>,
    pub cpu_cores: Option<i64>,
    pub driver_version: Option<String>,
    /// CUDA version the driver supports, e.g. "13.0".
    pub cuda_driver_version: Option<String>,
    /// GPU UUIDs from NVIDIA_VISIBLE_DEVICES in the recorded environment.
    pub visible_devices: Vec<String>,
}

pub fn environment(p: &Profile) -> Result<Environment> {
    let mut env = Environment::default();
    let Some(t) = &p.tables().system_env else {
        return Ok(env);
    };
    if !t.has("name") || !t.has("value") {
        return Ok(env);
    }
    let sql = format!(
        "SELECT name, value FROM {} WHERE name IN ('Hostname','OsDescription','CpuCores','NvDriverVersion','CudaDriverVersion','DeviceEnvironment')",
        t.quoted()
    );
    let mut stmt = p.conn().prepare(&sql).map_err(|e| p.read_err(e))?;
    let mut rows = stmt.query([]).map_err(|e| p.read_err(e))?;
    while let Some(r) = rows.next().map_err(|e| p.read_err(e))? {
        let name = text(r, 0).unwrap_or_default();
        let value = text(r, 1).unwrap_or_default();
        match name.as_str() {
            "Hostname" => env.hostname = Some(value),
            "OsDescription" => env.os = Some(value),
            "CpuCores" => env.cpu_cores = value.parse().ok(),
            "NvDriverVersion" => env.driver_version = Some(value),
            "CudaDriverVersion" => {
                env.cuda_driver_version = value
                    .parse::<i64>()
                    .ok()
                    .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10))
            }
            "DeviceEnvironment" => {
                for kv in value.split(';') {
                    if let Some(list) = kv.strip_prefix("NVIDIA_VISIBLE_DEVICES=") {
                        env.visible_devices = list
                            .split(',')
                            .filter(|s| s.starts_with("GPU-"))
                            .map(str::to_string)
                            .collect();
                    }
                }
            }
            _ => {}
        }
    }
    Ok(env)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadInfo {
    pub tid: i64,
    pub name: Option<String>,
    /// CUDA API calls made by this thread.
    pub cuda_api_calls: u64,
    /// Kernels launched by this thread (correlationId + process join).
    pub kernels_launched: u64,
    /// NVTX ranges pushed/started by this thread.
    pub nvtx_ranges: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessInfo {
    pub pid: i64,
    pub name: Option<String>,
    /// Devices this process ran kernels, copies or memsets on.
    pub devices: Vec<i64>,
    pub kernels: u64,
    /// Threads with CUDA API calls or NVTX ranges.
    pub threads: Vec<ThreadInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StreamInfo {
    pub device: i64,
    pub stream: i64,
    pub kernels: u64,
    pub memcpys: u64,
    pub memsets: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Counts {
    pub kernels: u64,
    pub memcpys: u64,
    pub memsets: u64,
    pub cuda_api_calls: u64,
    /// NVTX push/pop and start/end ranges with an end.
    pub nvtx_ranges: u64,
    /// Every row of NVTX_EVENTS (all event types; nsys-ai's "NVTX" count).
    pub nvtx_rows: u64,
    pub osrt_calls: Option<u64>,
    pub sync_events: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Capture {
    /// What was traced (`CAPTURE_EVENT_TYPE`: Cuda, NvtxEvents, OSRuntime, ...).
    pub traced: Vec<String>,
    /// The profiled command line.
    pub command: Option<String>,
    pub start_trigger: Option<String>,
    pub stop_trigger: Option<String>,
    /// Capture duration as recorded (RUN_DURATION_MS), in ns.
    pub recorded_duration_ns: Option<i64>,
    /// UTC start of the session.
    pub session_start_utc: Option<String>,
    /// Other non-environment settings (`name = value`).
    pub settings: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Duration {
    /// First start of any kernel, copy, memset or CUDA API call.
    pub activity_start_ns: i64,
    pub activity_end_ns: i64,
    pub activity_span_ns: i64,
    /// First kernel start → last kernel end over all devices.
    pub kernel_start_ns: Option<i64>,
    pub kernel_end_ns: Option<i64>,
    pub kernel_span_ns: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Info {
    pub version: ExportVersion,
    /// The SQLite file read (the export of a .nsys-rep when one was given).
    pub sqlite_path: String,
    pub size_bytes: u64,
    pub capture: Capture,
    pub duration: Duration,
    pub gpus: Vec<GpuInfo>,
    pub environment: Environment,
    pub processes: Vec<ProcessInfo>,
    pub streams: Vec<StreamInfo>,
    pub counts: Counts,
    /// Every table in the export.
    pub tables: Vec<String>,
    /// Caveats (missing tables, join fallbacks).
    pub notes: Vec<String>,
}

fn count(p: &Profile, t: Option<&super::schema::TableInfo>) -> Result<Option<u64>> {
    let Some(t) = t else { return Ok(None) };
    let n: i64 = p
        .conn()
        .query_row(&format!("SELECT COUNT(*) FROM {}", t.quoted()), [], |r| {
            r.get(0)
        })
        .map_err(|e| p.read_err(e))?;
    Ok(Some(n as u64))
}

fn capture(p: &Profile) -> Result<Capture> {
    let mut c = Capture {
        traced: Vec::new(),
        command: None,
        start_trigger: None,
        stop_trigger: None,
        recorded_duration_ns: None,
        session_start_utc: None,
        settings: BTreeMap::new(),
    };
    if let Some(t) = &p.tables().meta_capture {
        let sql = format!("SELECT name, value FROM {}", t.quoted());
        let mut stmt = p.conn().prepare(&sql).map_err(|e| p.read_err(e))?;
        let mut rows = stmt.query([]).map_err(|e| p.read_err(e))?;
        let mut command = String::new();
        let mut args: BTreeMap<u32, String> = BTreeMap::new();
        while let Some(r) = rows.next().map_err(|e| p.read_err(e))? {
            let name = text(r, 0).unwrap_or_default();
            let value = text(r, 1).unwrap_or_default();
            if name.contains("ENVIRONMENT_VARIABLE") {
                continue;
            }
            match name.as_str() {
                "CAPTURE_EVENT_TYPE" => c.traced.push(value),
                "START_TRIGGER" => c.start_trigger = Some(value),
                "STOP_TRIGGER" => c.stop_trigger = Some(value),
                "RUN_DURATION_MS" => {
                    c.recorded_duration_ns = value.parse::<i64>().ok().map(|ms| ms * 1_000_000)
                }
                "PROCESS_0:COMMAND" => command = value,
                _ => {
                    if let Some(n) = name
                        .strip_prefix("PROCESS_0:ARGUMENT_")
                        .and_then(|n| n.parse().ok())
                    {
                        args.insert(n, value);
                    } else if !value.is_empty() && value != "false" && value != "0" {
                        c.settings.insert(name, value);
                    }
                }
            }
        }
        if !command.is_empty() {
            let mut full = command;
            for a in args.values() {
                full.push(' ');
                full.push_str(a);
            }
            c.command = Some(full);
        }
    }
    if let Some(t) = p.schema().resolve("TARGET_INFO_SESSION_START_TIME")
        && t.has("utcTime")
    {
        c.session_start_utc = p
            .conn()
            .query_row(
                &format!("SELECT utcTime FROM {} LIMIT 1", t.quoted()),
                [],
                |r| r.get::<_, Option<String>>(0),
            )
            .ok()
            .flatten();
    }
    Ok(c)
}

/// Process names from PROCESSES (pid → name).
pub fn process_names(p: &Profile) -> Result<HashMap<i64, String>> {
    let mut out = HashMap::new();
    if let Some(t) = &p.tables().processes
        && t.has("pid")
        && t.has("name")
    {
        let sql = format!("SELECT pid, name FROM {}", t.quoted());
        let mut stmt = p.conn().prepare(&sql).map_err(|e| p.read_err(e))?;
        let mut rows = stmt.query([]).map_err(|e| p.read_err(e))?;
        while let Some(r) = rows.next().map_err(|e| p.read_err(e))? {
            if let Some(name) = text(r, 1) {
                out.insert(int(r, 0), name);
            }
        }
    }
    Ok(out)
}

/// Thread names from ThreadNames (globalTid → name).
pub fn thread_names(p: &Profile) -> Result<HashMap<i64, String>> {
    let mut out = HashMap::new();
    if let Some(t) = &p.tables().thread_names
        && t.has("globalTid")
        && t.has("nameId")
    {
        let sql = format!("SELECT globalTid, nameId FROM {}", t.quoted());
        let mut stmt = p.conn().prepare(&sql).map_err(|e| p.read_err(e))?;
        let mut rows = stmt.query([]).map_err(|e| p.read_err(e))?;
        while let Some(r) = rows.next().map_err(|e| p.read_err(e))? {
            out.insert(int(r, 0), p.string(int(r, 1)).to_string());
        }
    }
    Ok(out)
}

pub fn info(p: &Profile) -> Result<Info> {
    // The OS runtime table decodes on other threads while this one reads the rest.
    let osrt = p.prefetch_osrt();
    let kernels = p.kernels()?;
    let api = p.api()?;
    let memcpys = p.memcpys()?;
    let memsets = p.memsets()?;
    let nvtx = p.nvtx()?;
    let launches = p.launch_index()?;
    let mut notes = Vec::new();
    if launches.correlation_only {
        notes.push(
            "the kernel table has no globalPid: kernels were matched to launch calls by correlationId alone \
             (correct for single-process captures only)"
                .to_string(),
        );
    }
    // Processes and threads with CUDA or NVTX activity.
    let mut threads: BTreeMap<i64, ThreadInfo> = BTreeMap::new();
    fn thread(threads: &mut BTreeMap<i64, ThreadInfo>, gtid: i64) -> &mut ThreadInfo {
        threads.entry(gtid).or_insert_with(|| ThreadInfo {
            tid: model::tid_of(gtid),
            name: None,
            cuda_api_calls: 0,
            kernels_launched: 0,
            nvtx_ranges: 0,
        })
    }
    for a in api {
        thread(&mut threads, a.global_tid).cuda_api_calls += 1;
    }
    for ai in launches.kernel_launch.iter().flatten() {
        thread(&mut threads, api[*ai as usize].global_tid).kernels_launched += 1;
    }
    for r in &nvtx.ranges {
        thread(&mut threads, r.global_tid).nvtx_ranges += 1;
    }
    let tnames = thread_names(p)?;
    let pnames = process_names(p)?;
    let mut procs: BTreeMap<i64, ProcessInfo> = BTreeMap::new();
    for (gtid, mut t) in threads {
        t.name = tnames.get(&gtid).cloned();
        let pid = model::pid_of(gtid);
        procs
            .entry(pid)
            .or_insert_with(|| ProcessInfo {
                pid,
                name: pnames.get(&pid).cloned(),
                devices: Vec::new(),
                kernels: 0,
                threads: Vec::new(),
            })
            .threads
            .push(t);
    }
    let mut devs: HashMap<i64, BTreeSet<i64>> = HashMap::new();
    for k in kernels {
        let pid = model::pid_of(k.global_pid);
        devs.entry(pid).or_default().insert(k.device);
        procs
            .entry(pid)
            .or_insert_with(|| ProcessInfo {
                pid,
                name: pnames.get(&pid).cloned(),
                devices: Vec::new(),
                kernels: 0,
                threads: Vec::new(),
            })
            .kernels += 1;
    }
    for m in memcpys {
        devs.entry(model::pid_of(m.global_pid))
            .or_default()
            .insert(m.device);
    }
    for (pid, d) in devs {
        if let Some(pr) = procs.get_mut(&pid) {
            pr.devices = d.into_iter().collect();
        }
    }
    // Streams.
    let mut streams: BTreeMap<(i64, i64), StreamInfo> = BTreeMap::new();
    let mut bump = |device: i64, s: i64, which: u8| {
        let e = streams.entry((device, s)).or_insert_with(|| StreamInfo {
            device,
            stream: s,
            kernels: 0,
            memcpys: 0,
            memsets: 0,
        });
        match which {
            0 => e.kernels += 1,
            1 => e.memcpys += 1,
            _ => e.memsets += 1,
        }
    };
    for k in kernels {
        bump(k.device, k.stream, 0);
    }
    for m in memcpys {
        bump(m.device, m.stream, 1);
    }
    for m in memsets {
        bump(m.device, m.stream, 2);
    }
    let (first, last) = p.activity_bounds()?;
    let kstart = kernels.iter().map(|k| k.start).min();
    let kend = kernels.iter().map(|k| k.end).max();
    let tables = p.tables();
    if tables.gpu_info.is_none() {
        notes.push(
            "no TARGET_INFO_GPU table: GPU names and UUIDs are not recorded (inferred_uuid, where present, is a guess from the order of NVIDIA_VISIBLE_DEVICES; uuid_basis says so)"
                .to_string(),
        );
    }
    Ok(Info {
        version: p.version().clone(),
        sqlite_path: p.db_path().display().to_string(),
        size_bytes: p.identity().size,
        capture: capture(p)?,
        duration: Duration {
            activity_start_ns: first,
            activity_end_ns: last,
            activity_span_ns: last - first,
            kernel_start_ns: kstart,
            kernel_end_ns: kend,
            kernel_span_ns: kstart.zip(kend).map(|(s, e)| e - s),
        },
        gpus: gpus(p)?,
        environment: environment(p)?,
        processes: procs.into_values().collect(),
        streams: streams.into_values().collect(),
        counts: Counts {
            kernels: kernels.len() as u64,
            memcpys: memcpys.len() as u64,
            memsets: memsets.len() as u64,
            cuda_api_calls: api.len() as u64,
            nvtx_ranges: nvtx.ranges.len() as u64,
            nvtx_rows: nvtx.rows,
            // Every row of the table, as COUNT(*) gives, from the decoded
            // calls that summary, gaps and rules read anyway.
            osrt_calls: {
                p.join_osrt(osrt);
                p.osrt()?.map(|o| o.table_rows)
            },
            sync_events: count(p, tables.sync.as_ref())?,
        },
        tables: p.schema().table_names(),
        notes,
    })
}
