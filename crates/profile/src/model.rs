//! The events of an export, loaded into compact rows. Columns an export lacks
//! read as NULL/0 (and the analyses say so); string ids resolve through
//! [`Strings`]. Tables that can be huge (OSRT) are never loaded here: they are
//! streamed by the reports that need them.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row};

use super::error::{ProfileError, Result};
use super::schema::{TableInfo, Tables};

/// The process part of a serialized globalTid/globalPid.
pub const PID_MASK: i64 = 0xFFFF_FFFF_FF00_0000u64 as i64;

/// The OS process id inside a serialized global id.
pub fn pid_of(global: i64) -> i64 {
    (global >> 24) & 0xFF_FFFF
}

/// The OS thread id inside a serialized globalTid.
pub fn tid_of(global_tid: i64) -> i64 {
    global_tid & 0xFF_FFFF
}

/// The process key (globalPid) of a globalTid.
pub fn process_key(global_tid: i64) -> i64 {
    global_tid & PID_MASK
}

/// `StringIds`: id → string.
#[derive(Debug, Default)]
pub struct Strings {
    dense: Vec<Option<Box<str>>>,
    sparse: HashMap<i64, Box<str>>,
}

impl Strings {
    pub fn load(conn: &Connection, tables: &Tables, path: &Path) -> Result<Strings> {
        let mut s = Strings::default();
        let Some(t) = &tables.string_ids else {
            return Ok(s);
        };
        let sql = format!("SELECT id, value FROM {}", t.quoted());
        let mut stmt = conn
            .prepare(&sql)
            .map_err(|e| ProfileError::read(path, e))?;
        let mut rows = stmt.raw_query();
        while let Some(r) = rows.next().map_err(|e| ProfileError::read(path, e))? {
            let id = int(r, 0);
            let value: Box<str> = match r.get_ref(1) {
                Ok(ValueRef::Text(b)) => String::from_utf8_lossy(b).into(),
                _ => "".into(),
            };
            if (0..(1 << 22)).contains(&id) {
                let i = id as usize;
                if s.dense.len() <= i {
                    s.dense.resize(i + 1, None);
                }
                s.dense[i] = Some(value);
            } else {
                s.sparse.insert(id, value);
            }
        }
        Ok(s)
    }

    /// The string with this id; empty when the id is unknown.
    pub fn get(&self, id: i64) -> &str {
        if id >= 0
            && let Some(Some(v)) = self.dense.get(id as usize)
        {
            return v;
        }
        self.sparse.get(&id).map(|b| &**b).unwrap_or("")
    }

    /// Every (id, string), in id order for the dense part.
    pub fn iter(&self) -> impl Iterator<Item = (i64, &str)> {
        self.dense
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_deref().map(|v| (i as i64, v)))
            .chain(self.sparse.iter().map(|(k, v)| (*k, &**v)))
    }
}

/// An integer column (NULL, text or a float reads as 0 / truncated).
pub(crate) fn int(r: &Row<'_>, i: usize) -> i64 {
    match r.get_ref(i) {
        Ok(ValueRef::Integer(v)) => v,
        Ok(ValueRef::Real(f)) => f as i64,
        _ => 0,
    }
}

/// A nullable integer column.
pub(crate) fn opt_int(r: &Row<'_>, i: usize) -> Option<i64> {
    match r.get_ref(i) {
        Ok(ValueRef::Integer(v)) => Some(v),
        Ok(ValueRef::Real(f)) => Some(f as i64),
        _ => None,
    }
}

/// A text column.
pub(crate) fn text(r: &Row<'_>, i: usize) -> Option<String> {
    match r.get_ref(i) {
        Ok(ValueRef::Text(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        Ok(ValueRef::Integer(v)) => Some(v.to_string()),
        _ => None,
    }
}

/// One kernel execution.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub start: i64,
    pub end: i64,
    pub device: i64,
    pub stream: i64,
    pub correlation: i64,
    /// globalPid of the launching process (0 when the export lacks it).
    pub global_pid: i64,
    pub short_name: i64,
    pub demangled_name: i64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub registers: u32,
    pub static_smem: u32,
    pub dynamic_smem: u32,
}

impl Kernel {
    pub fn dur(&self) -> i64 {
        self.end - self.start
    }
    pub fn threads_per_block(&self) -> u64 {
        self.block.iter().map(|&b| b as u64).product()
    }
    pub fn blocks(&self) -> u64 {
        self.grid.iter().map(|&b| b as u64).product()
    }
    /// Whether the launch gives at most half of a GPU's `sms` streaming multiprocessors a block, for
    /// [`UNDERFILL_MIN_NS`] or more: most of the GPU idles while it runs, whatever its kind of work.
    pub fn underfills(&self, sms: u64) -> bool {
        let blocks = self.blocks();
        blocks > 0 && blocks * 2 <= sms && self.dur() >= UNDERFILL_MIN_NS
    }
}

/// Launches shorter than this do not count as under-filling the GPU: their time is launch latency and the tail of
/// the launch before, whatever their grid.
pub const UNDERFILL_MIN_NS: i64 = 20_000;

/// One CUDA runtime/driver API call.
#[derive(Debug, Clone)]
pub struct ApiCall {
    pub start: i64,
    pub end: i64,
    pub global_tid: i64,
    pub correlation: i64,
    pub name: i64,
}

impl ApiCall {
    pub fn dur(&self) -> i64 {
        self.end - self.start
    }
}

/// One memcpy.
#[derive(Debug, Clone)]
pub struct Memcpy {
    pub start: i64,
    pub end: i64,
    pub device: i64,
    pub stream: i64,
    pub correlation: i64,
    pub global_pid: i64,
    pub bytes: i64,
    pub copy_kind: i64,
    pub src_kind: Option<i64>,
    pub dst_kind: Option<i64>,
}

/// One memset.
#[derive(Debug, Clone)]
pub struct Memset {
    pub start: i64,
    pub end: i64,
    pub device: i64,
    pub stream: i64,
    pub correlation: i64,
    pub global_pid: i64,
    pub bytes: i64,
    pub mem_kind: Option<i64>,
}

/// NVTX range styles (`eventType`).
pub const NVTX_PUSH_POP: i64 = 59;
pub const NVTX_START_END: i64 = 60;
pub const NVTX_MARK: i64 = 34;
pub const NVTX_DOMAIN_CREATE: i64 = 75;

/// One NVTX range (push/pop or start/end) with a known end.
#[derive(Debug, Clone)]
pub struct NvtxRange {
    pub start: i64,
    pub end: i64,
    pub event_type: i64,
    /// `COALESCE(text, StringIds[textId])`.
    pub name: String,
    pub global_tid: i64,
    pub domain: i64,
}

impl NvtxRange {
    pub fn dur(&self) -> i64 {
        self.end - self.start
    }
    pub fn is_push_pop(&self) -> bool {
        self.event_type == NVTX_PUSH_POP
    }
}

/// NVTX ranges and domain names.
#[derive(Debug, Default)]
pub struct Nvtx {
    /// Ranges sorted by (start, end desc).
    pub ranges: Vec<NvtxRange>,
    pub domains: HashMap<i64, String>,
    /// Ranges that never ended (no `end`), not in `ranges`.
    pub unclosed: u64,
    /// Marks (instantaneous events).
    pub marks: u64,
    /// Every row of the table, all event types.
    pub rows: u64,
}

pub(crate) fn scan<F>(conn: &Connection, path: &Path, sql: &str, mut f: F) -> Result<()>
where
    F: FnMut(&Row<'_>),
{
    let mut stmt = conn.prepare(sql).map_err(|e| ProfileError::read(path, e))?;
    let mut rows = stmt.raw_query();
    while let Some(r) = rows.next().map_err(|e| ProfileError::read(path, e))? {
        f(r);
    }
    Ok(())
}

fn c(t: &TableInfo, col: &str) -> String {
    t.col_or(col, "NULL")
}

/// Whether the b-tree fast path ([`super::fastscan`]) may be used; set
/// `AISP_NO_FASTSCAN=1` to read everything through SQLite.
pub fn fastscan_enabled() -> bool {
    std::env::var_os("AISP_NO_FASTSCAN").is_none()
}

/// Column positions for the fast path (`usize::MAX` for a missing column: reads as 0).
fn positions(t: &TableInfo, cols: &[&str]) -> Vec<usize> {
    cols.iter()
        .map(|c| t.position(c).unwrap_or(usize::MAX))
        .collect()
}

/// Run a fast scan of `t`, or `None` when it is off or gave up (the caller then uses SQL).
pub(crate) fn fast_scan<A, I, F>(
    path: &Path,
    t: &TableInfo,
    cols: &[&str],
    progress: Option<&aisp_base::Progress>,
    init: I,
    row: F,
) -> Option<Vec<A>>
where
    A: Send,
    I: Fn() -> A + Sync,
    F: Fn(&mut A, &[i64]) + Sync,
{
    if !fastscan_enabled() || t.rootpage == 0 {
        return None;
    }
    let pos = positions(t, cols);
    match super::fastscan::scan_reporting(
        path,
        t.rootpage,
        &pos,
        super::fastscan::default_threads(),
        progress.map(|p| (t.name.as_str(), p)),
        init,
        row,
    ) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::debug!(table = %t.name, reason = %e.0, "fast scan gave up; reading through SQLite");
            None
        }
    }
}

const KERNEL_COLS: [&str; 17] = [
    "start",
    "end",
    "deviceId",
    "streamId",
    "correlationId",
    "globalPid",
    "shortName",
    "demangledName",
    "gridX",
    "gridY",
    "gridZ",
    "blockX",
    "blockY",
    "blockZ",
    "registersPerThread",
    "staticSharedMemory",
    "dynamicSharedMemory",
];

fn kernel_from(v: &[i64], has_demangled: bool) -> Kernel {
    Kernel {
        start: v[0],
        end: v[1],
        device: v[2],
        stream: v[3],
        correlation: v[4],
        global_pid: v[5],
        short_name: v[6],
        demangled_name: if has_demangled { v[7] } else { v[6] },
        grid: [v[8] as u32, v[9] as u32, v[10] as u32],
        block: [v[11] as u32, v[12] as u32, v[13] as u32],
        registers: v[14] as u32,
        static_smem: v[15] as u32,
        dynamic_smem: v[16] as u32,
    }
}

pub fn load_kernels(
    conn: &Connection,
    t: &TableInfo,
    path: &Path,
    progress: Option<&aisp_base::Progress>,
) -> Result<Vec<Kernel>> {
    let has_demangled = t.has("demangledName");
    if let Some(parts) = fast_scan(
        path,
        t,
        &KERNEL_COLS,
        progress,
        Vec::new,
        |acc: &mut Vec<Kernel>, v| acc.push(kernel_from(v, has_demangled)),
    ) {
        let mut out: Vec<Kernel> = parts.into_iter().flatten().collect();
        out.sort_by_key(|k| (k.start, k.end));
        out.shrink_to_fit();
        return Ok(out);
    }
    let sql = format!(
        "SELECT start, \"end\", {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {} FROM {}",
        c(t, "deviceId"),
        c(t, "streamId"),
        c(t, "correlationId"),
        c(t, "globalPid"),
        c(t, "shortName"),
        c(t, "demangledName"),
        c(t, "gridX"),
        c(t, "gridY"),
        c(t, "gridZ"),
        c(t, "blockX"),
        c(t, "blockY"),
        c(t, "blockZ"),
        c(t, "registersPerThread"),
        c(t, "staticSharedMemory"),
        c(t, "dynamicSharedMemory"),
        t.quoted()
    );
    let mut out = Vec::new();
    scan(conn, path, &sql, |r| {
        let short = int(r, 6);
        let demangled = opt_int(r, 7).unwrap_or(short);
        out.push(Kernel {
            start: int(r, 0),
            end: int(r, 1),
            device: int(r, 2),
            stream: int(r, 3),
            correlation: int(r, 4),
            global_pid: int(r, 5),
            short_name: short,
            demangled_name: demangled,
            grid: [int(r, 8) as u32, int(r, 9) as u32, int(r, 10) as u32],
            block: [int(r, 11) as u32, int(r, 12) as u32, int(r, 13) as u32],
            registers: int(r, 14) as u32,
            static_smem: int(r, 15) as u32,
            dynamic_smem: int(r, 16) as u32,
        })
    })?;
    out.sort_by_key(|k| (k.start, k.end));
    out.shrink_to_fit();
    Ok(out)
}

pub fn load_api(
    conn: &Connection,
    t: &TableInfo,
    path: &Path,
    progress: Option<&aisp_base::Progress>,
) -> Result<Vec<ApiCall>> {
    let cols = ["start", "end", "globalTid", "correlationId", "nameId"];
    if let Some(parts) = fast_scan(
        path,
        t,
        &cols,
        progress,
        Vec::new,
        |acc: &mut Vec<ApiCall>, v| {
            acc.push(ApiCall {
                start: v[0],
                end: v[1],
                global_tid: v[2],
                correlation: v[3],
                name: v[4],
            })
        },
    ) {
        let mut out: Vec<ApiCall> = parts.into_iter().flatten().collect();
        out.sort_by_key(|a| (a.start, a.end));
        out.shrink_to_fit();
        return Ok(out);
    }
    let sql = format!(
        "SELECT start, \"end\", {}, {}, {} FROM {}",
        c(t, "globalTid"),
        c(t, "correlationId"),
        c(t, "nameId"),
        t.quoted()
    );
    let mut out = Vec::new();
    scan(conn, path, &sql, |r| {
        out.push(ApiCall {
            start: int(r, 0),
            end: int(r, 1),
            global_tid: int(r, 2),
            correlation: int(r, 3),
            name: int(r, 4),
        })
    })?;
    out.sort_by_key(|a| (a.start, a.end));
    out.shrink_to_fit();
    Ok(out)
}

pub fn load_memcpy(conn: &Connection, t: &TableInfo, path: &Path) -> Result<Vec<Memcpy>> {
    let sql = format!(
        "SELECT start, \"end\", {}, {}, {}, {}, {}, {}, {}, {} FROM {}",
        c(t, "deviceId"),
        c(t, "streamId"),
        c(t, "correlationId"),
        c(t, "globalPid"),
        c(t, "bytes"),
        c(t, "copyKind"),
        c(t, "srcKind"),
        c(t, "dstKind"),
        t.quoted()
    );
    let mut out = Vec::new();
    scan(conn, path, &sql, |r| {
        out.push(Memcpy {
            start: int(r, 0),
            end: int(r, 1),
            device: int(r, 2),
            stream: int(r, 3),
            correlation: int(r, 4),
            global_pid: int(r, 5),
            bytes: int(r, 6),
            copy_kind: int(r, 7),
            src_kind: opt_int(r, 8),
            dst_kind: opt_int(r, 9),
        })
    })?;
    out.sort_by_key(|m| (m.start, m.end));
    out.shrink_to_fit();
    Ok(out)
}

pub fn load_memset(conn: &Connection, t: &TableInfo, path: &Path) -> Result<Vec<Memset>> {
    let sql = format!(
        "SELECT start, \"end\", {}, {}, {}, {}, {}, {} FROM {}",
        c(t, "deviceId"),
        c(t, "streamId"),
        c(t, "correlationId"),
        c(t, "globalPid"),
        c(t, "bytes"),
        c(t, "memKind"),
        t.quoted()
    );
    let mut out = Vec::new();
    scan(conn, path, &sql, |r| {
        out.push(Memset {
            start: int(r, 0),
            end: int(r, 1),
            device: int(r, 2),
            stream: int(r, 3),
            correlation: int(r, 4),
            global_pid: int(r, 5),
            bytes: int(r, 6),
            mem_kind: opt_int(r, 7),
        })
    })?;
    out.sort_by_key(|m| (m.start, m.end));
    out.shrink_to_fit();
    Ok(out)
}

pub fn load_nvtx(
    conn: &Connection,
    t: &TableInfo,
    strings: &super::model::Strings,
    path: &Path,
) -> Result<Nvtx> {
    let sql = format!(
        "SELECT start, \"end\", {}, {}, {}, {}, {} FROM {}",
        c(t, "eventType"),
        c(t, "text"),
        c(t, "textId"),
        c(t, "globalTid"),
        c(t, "domainId"),
        t.quoted()
    );
    let mut nvtx = Nvtx::default();
    scan(conn, path, &sql, |r| {
        nvtx.rows += 1;
        let event_type = int(r, 2);
        let name = || match text(r, 3) {
            Some(s) => s,
            None => opt_int(r, 4)
                .map(|id| strings.get(id).to_string())
                .unwrap_or_default(),
        };
        match event_type {
            NVTX_PUSH_POP | NVTX_START_END => match opt_int(r, 1) {
                Some(end) => nvtx.ranges.push(NvtxRange {
                    start: int(r, 0),
                    end,
                    event_type,
                    name: name(),
                    global_tid: int(r, 5),
                    domain: int(r, 6),
                }),
                None => nvtx.unclosed += 1,
            },
            NVTX_DOMAIN_CREATE => {
                nvtx.domains.insert(int(r, 6), name());
            }
            NVTX_MARK => nvtx.marks += 1,
            _ => {}
        }
    })?;
    nvtx.ranges
        .sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    nvtx.ranges.shrink_to_fit();
    Ok(nvtx)
}

/// `SELECT id, label FROM ENUM_...`: the labels of an enum table.
pub fn load_enum(conn: &Connection, t: &TableInfo, path: &Path) -> Result<HashMap<i64, String>> {
    let label = if t.has("label") { "label" } else { "name" };
    let sql = format!("SELECT id, \"{label}\" FROM {}", t.quoted());
    let mut out = HashMap::new();
    scan(conn, path, &sql, |r| {
        out.insert(int(r, 0), text(r, 1).unwrap_or_default());
    })?;
    Ok(out)
}

/// [`load_osrt`]'s b-tree fast path alone (no connection needed, so it can
/// run on another thread); `None` when it is off or gave up.
pub(crate) fn load_osrt_fast(
    t: &TableInfo,
    path: &Path,
    progress: Option<&aisp_base::Progress>,
) -> Option<super::osrt::OsrtCalls> {
    use super::osrt::Encoder;
    let class = t.has("eventClass");
    let cols = ["start", "end", "globalTid", "nameId", "eventClass"];
    fast_scan(
        path,
        t,
        &cols,
        progress,
        Encoder::default,
        |e: &mut Encoder, v| e.row(v[0], v[1], v[2], v[3], class.then_some(v[4])),
    )
    .map(Encoder::finish)
}

/// Decode the OS runtime calls (`OSRT_API`, eventClass 27 when the column
/// exists) into their compact form ([`super::osrt`]), through the b-tree fast
/// path when it applies, else SQL, keeping the rows in file order.
pub fn load_osrt(
    conn: &Connection,
    t: &TableInfo,
    path: &Path,
    progress: Option<&aisp_base::Progress>,
) -> Result<super::osrt::OsrtCalls> {
    use super::osrt::Encoder;
    if let Some(calls) = load_osrt_fast(t, path, progress) {
        return Ok(calls);
    }
    let class = t.has("eventClass");
    let sql = format!(
        "SELECT start, \"end\", {}, {}, {} FROM {}",
        c(t, "globalTid"),
        c(t, "nameId"),
        c(t, "eventClass"),
        t.quoted()
    );
    let mut e = Encoder::default();
    scan(conn, path, &sql, |r| {
        e.row(
            int(r, 0),
            int(r, 1),
            int(r, 2),
            int(r, 3),
            class.then(|| int(r, 4)),
        )
    })?;
    Ok(Encoder::finish(vec![e]))
}

impl super::loaded::FlatRow for Kernel {}
impl super::loaded::FlatRow for ApiCall {}
impl super::loaded::FlatRow for Memcpy {}
impl super::loaded::FlatRow for Memset {}

impl super::loaded::Footprint for Strings {
    fn footprint(&self) -> u64 {
        let text: u64 = self.iter().map(|(_, v)| v.len() as u64).sum();
        let slot = std::mem::size_of::<Option<Box<str>>>() as u64;
        self.dense.capacity() as u64 * slot + self.sparse.capacity() as u64 * (slot + 9) + text
    }
}

impl super::loaded::Footprint for Nvtx {
    fn footprint(&self) -> u64 {
        let names: u64 = self.ranges.iter().map(|r| r.name.capacity() as u64).sum();
        let domains: u64 = self
            .domains
            .values()
            .map(|v| v.capacity() as u64 + 33)
            .sum();
        (self.ranges.capacity() * std::mem::size_of::<NvtxRange>()) as u64 + names + domains
    }
}
