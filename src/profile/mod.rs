//! Nsight Systems profile analysis: read `nsys export --type sqlite` files
//! exactly and fast, and turn them into evidence.
//!
//! # Public API (stable; other modules build on it)
//!
//! ```no_run
//! use aisp::profile::{self, Scope};
//! let p = profile::open("train.sqlite".as_ref())?;          // read-only, header-checked
//! let info = profile::info::info(&p)?;                       // versions, GPUs, processes, counts
//! let all = p.resolve(&Scope::default())?;                  // device/process/window filter
//! let sum = profile::summary::summary(&p, &all, &Default::default())?;   // nsys stats reports
//! let util = profile::utilization::utilization(&p, &all, 100, 50.0)?;    // busy % per window
//! let findings = profile::rules::evaluate(&p, &Scope::default())?;                   // nsys-analyze-style rules
//! # Ok::<(), profile::ProfileError>(())
//! ```
//!
//! - [`open`] / [`open_with`] open a `.sqlite` export (or export a `.nsys-rep`
//!   through a local `nsys`, cached by file identity) and return a [`Profile`].
//! - [`Profile`] loads tables lazily (kernels, CUDA API calls, memcpy, memset,
//!   NVTX) and joins kernels to their launch calls by correlationId **and**
//!   process. Columns and tables are discovered by introspection ([`schema`]).
//! - [`Scope`] narrows a question to a device, a process, and/or a time window
//!   (absolute ns or an NVTX range name); [`windows`] gives each device's
//!   `span`, `steps` and `steady` windows.
//! - One module per analysis: [`info`], [`summary`] (nsys stats reports),
//!   [`kernels`] (+ [`classify`]), [`utilization`], [`gaps`], [`memory`],
//!   [`nvtx`], [`iterations`], [`nccl`], [`overlap`], [`search`], [`timeline`],
//!   [`rules`], [`compare`], [`export`].
//! - Building blocks: [`stats`] (nsys statistics semantics) and [`intervals`]
//!   (unions, intersections, gaps).

pub mod attribution;
pub mod cache;
pub mod calls;
pub mod classify;
pub mod compare;
pub mod db;
pub mod error;
pub mod events;
pub mod export;
pub mod families;
pub mod fastscan;
pub mod gaps;
pub mod info;
pub mod intervals;
pub mod iterations;
pub mod kernels;
pub mod memory;
pub mod model;
pub mod nccl;
pub mod nsysrep;
pub mod nvtx;
pub mod overlap;
pub mod ranks;
pub mod regions;
pub mod rules;
pub mod schema;
pub mod search;
pub mod stats;
pub mod summary;
pub mod timeline;
pub mod utilization;
pub mod windows;

use std::cell::OnceCell;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use db::FileIdentity;
pub use error::{ProfileError, Result};
pub use model::{ApiCall, Kernel, Memcpy, Memset, NvtxRange};
pub use windows::{Window, WindowKind};

use model::{Nvtx, Strings};
use schema::{Schema, Tables};

/// Product and schema version of the export (every result carries them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExportVersion {
    /// `EXPORT_PRODUCT_NAME`, e.g. "NVIDIA Nsight Systems".
    pub product: Option<String>,
    /// `EXPORT_PRODUCT_VERSION`, e.g. "2025.3.2.0".
    pub product_version: Option<String>,
    /// `EXPORT_SCHEMA_VERSION`, e.g. "3.20.3".
    pub schema_version: Option<String>,
}

/// How to open a profile.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Where `.nsys-rep` exports are cached (`$AISP_HOME/cache`); default
    /// `~/.aisp/cache` through [`crate::config::default_home`].
    pub cache_dir: Option<PathBuf>,
    /// An explicit `nsys` binary; default: PATH, then the usual install folders.
    pub nsys: Option<PathBuf>,
    /// The largest export (or report) accepted; default [`crate::input_file::InputLimits`]'s.
    pub max_bytes: Option<u64>,
}

/// An opened Nsight Systems export. Not `Sync`: use one per thread.
pub struct Profile {
    source: PathBuf,
    db_path: PathBuf,
    identity: FileIdentity,
    conn: Connection,
    schema: Schema,
    tables: Tables,
    version: ExportVersion,
    strings: OnceCell<Strings>,
    kernels: OnceCell<Vec<Kernel>>,
    api: OnceCell<Vec<ApiCall>>,
    memcpy: OnceCell<Vec<Memcpy>>,
    memset: OnceCell<Vec<Memset>>,
    nvtx: OnceCell<Nvtx>,
    launch_index: OnceCell<LaunchIndex>,
    memcpy_oper: OnceCell<HashMap<i64, String>>,
    mem_kind: OnceCell<HashMap<i64, String>>,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile")
            .field("source", &self.source)
            .field("db_path", &self.db_path)
            .finish_non_exhaustive()
    }
}

/// Open an export (`.sqlite`) or a report (`.nsys-rep`, exported through a
/// local `nsys` into the default cache).
pub fn open(path: &Path) -> Result<Profile> {
    open_with(path, &OpenOptions::default())
}

/// Open with explicit options (cache folder, `nsys` binary).
pub fn open_with(path: &Path, options: &OpenOptions) -> Result<Profile> {
    let max_bytes = options
        .max_bytes
        .unwrap_or(crate::input_file::InputLimits::default().nsight_export_bytes);
    let db_path = if nsysrep::is_report(path) {
        crate::input_file::check_regular(
            path,
            crate::input_file::InputKind::NsightExport,
            &crate::input_file::InputLimits {
                nsight_export_bytes: max_bytes,
                ..Default::default()
            },
        )?;
        let cache_dir = options
            .cache_dir
            .clone()
            .unwrap_or_else(|| crate::config::default_home().join("cache"));
        nsysrep::export_cached(path, &cache_dir, options.nsys.as_deref())?
    } else {
        path.to_path_buf()
    };
    let opened = db::open_readonly(&db_path, max_bytes)?;
    let schema = Schema::load(&opened.conn, &db_path)?;
    let tables = Tables::from_schema(&schema);
    let has_events = tables.kernel.is_some()
        || tables.runtime.is_some()
        || tables.nvtx.is_some()
        || tables.osrt.is_some()
        || tables.memcpy.is_some();
    let looks_nsys = tables.string_ids.is_some() || tables.meta_export.is_some();
    if !has_events || !looks_nsys {
        return Err(ProfileError::invalid(
            &db_path,
            "it is an SQLite database but not an Nsight Systems export (no StringIds/META_DATA_EXPORT \
             table, or no CUPTI, NVTX or OSRT event tables)",
        ));
    }
    let version = read_version(&opened.conn, &tables, &db_path)?;
    Ok(Profile {
        source: path.to_path_buf(),
        db_path,
        identity: opened.identity,
        conn: opened.conn,
        schema,
        tables,
        version,
        strings: OnceCell::new(),
        kernels: OnceCell::new(),
        api: OnceCell::new(),
        memcpy: OnceCell::new(),
        memset: OnceCell::new(),
        nvtx: OnceCell::new(),
        launch_index: OnceCell::new(),
        memcpy_oper: OnceCell::new(),
        mem_kind: OnceCell::new(),
    })
}

fn read_version(conn: &Connection, tables: &Tables, path: &Path) -> Result<ExportVersion> {
    let mut v = ExportVersion {
        product: None,
        product_version: None,
        schema_version: None,
    };
    if let Some(t) = &tables.meta_export {
        let sql = format!(
            "SELECT name, value FROM {} WHERE name IN ('EXPORT_PRODUCT_NAME','EXPORT_PRODUCT_VERSION','EXPORT_SCHEMA_VERSION')",
            t.quoted()
        );
        let mut stmt = conn
            .prepare(&sql)
            .map_err(|e| ProfileError::read(path, e))?;
        let mut rows = stmt.query([]).map_err(|e| ProfileError::read(path, e))?;
        while let Some(r) = rows.next().map_err(|e| ProfileError::read(path, e))? {
            let name = model::text(r, 0).unwrap_or_default();
            let value = model::text(r, 1);
            match name.as_str() {
                "EXPORT_PRODUCT_NAME" => v.product = value,
                "EXPORT_PRODUCT_VERSION" => v.product_version = value,
                "EXPORT_SCHEMA_VERSION" => v.schema_version = value,
                _ => {}
            }
        }
    }
    Ok(v)
}

/// Kernel → launching API call, joined by correlationId and process.
#[derive(Debug, Default)]
pub struct LaunchIndex {
    /// For each kernel (index into `kernels()`), the index of its launch call in `api()`.
    pub kernel_launch: Vec<Option<u32>>,
    /// Whether the export lacks `globalPid` on kernels, so the join used correlationId alone.
    pub correlation_only: bool,
}

impl Profile {
    /// The path the user gave (a `.sqlite` or `.nsys-rep`).
    pub fn source(&self) -> &Path {
        &self.source
    }
    /// The SQLite file actually read.
    pub fn db_path(&self) -> &Path {
        &self.db_path
    }
    pub fn identity(&self) -> &FileIdentity {
        &self.identity
    }
    pub fn conn(&self) -> &Connection {
        &self.conn
    }
    pub fn schema(&self) -> &Schema {
        &self.schema
    }
    pub fn tables(&self) -> &Tables {
        &self.tables
    }
    pub fn version(&self) -> &ExportVersion {
        &self.version
    }

    pub(crate) fn read_err(&self, e: rusqlite::Error) -> ProfileError {
        ProfileError::read(&self.db_path, e)
    }

    pub fn strings(&self) -> Result<&Strings> {
        if let Some(s) = self.strings.get() {
            return Ok(s);
        }
        let s = Strings::load(&self.conn, &self.tables, &self.db_path)?;
        Ok(self.strings.get_or_init(|| s))
    }

    /// A string by id (empty when unknown or when StringIds cannot be read).
    pub fn string(&self, id: i64) -> &str {
        self.strings().map(|s| s.get(id)).unwrap_or("")
    }

    /// All kernels, sorted by start.
    pub fn kernels(&self) -> Result<&[Kernel]> {
        if let Some(k) = self.kernels.get() {
            return Ok(k);
        }
        let k = match &self.tables.kernel {
            Some(t) => model::load_kernels(&self.conn, t, &self.db_path)?,
            None => Vec::new(),
        };
        Ok(self.kernels.get_or_init(|| k))
    }

    /// All CUDA runtime/driver API calls, sorted by start.
    pub fn api(&self) -> Result<&[ApiCall]> {
        if let Some(a) = self.api.get() {
            return Ok(a);
        }
        let a = match &self.tables.runtime {
            Some(t) => model::load_api(&self.conn, t, &self.db_path)?,
            None => Vec::new(),
        };
        Ok(self.api.get_or_init(|| a))
    }

    pub fn memcpys(&self) -> Result<&[Memcpy]> {
        if let Some(m) = self.memcpy.get() {
            return Ok(m);
        }
        let m = match &self.tables.memcpy {
            Some(t) => model::load_memcpy(&self.conn, t, &self.db_path)?,
            None => Vec::new(),
        };
        Ok(self.memcpy.get_or_init(|| m))
    }

    pub fn memsets(&self) -> Result<&[Memset]> {
        if let Some(m) = self.memset.get() {
            return Ok(m);
        }
        let m = match &self.tables.memset {
            Some(t) => model::load_memset(&self.conn, t, &self.db_path)?,
            None => Vec::new(),
        };
        Ok(self.memset.get_or_init(|| m))
    }

    pub fn nvtx(&self) -> Result<&Nvtx> {
        if let Some(n) = self.nvtx.get() {
            return Ok(n);
        }
        let n = match &self.tables.nvtx {
            Some(t) => model::load_nvtx(&self.conn, t, self.strings()?, &self.db_path)?,
            None => Nvtx::default(),
        };
        Ok(self.nvtx.get_or_init(|| n))
    }

    /// `ENUM_CUDA_MEMCPY_OPER` labels from the export (defaults when absent).
    pub fn memcpy_oper_labels(&self) -> Result<&HashMap<i64, String>> {
        if let Some(m) = self.memcpy_oper.get() {
            return Ok(m);
        }
        let m = match &self.tables.memcpy_oper_enum {
            Some(t) => model::load_enum(&self.conn, t, &self.db_path)?,
            None => memory::default_memcpy_oper_labels(),
        };
        Ok(self.memcpy_oper.get_or_init(|| m))
    }

    /// `ENUM_CUDA_MEM_KIND` labels from the export (empty when absent: kinds unknown).
    pub fn mem_kind_labels(&self) -> Result<&HashMap<i64, String>> {
        if let Some(m) = self.mem_kind.get() {
            return Ok(m);
        }
        let m = match &self.tables.mem_kind_enum {
            Some(t) => model::load_enum(&self.conn, t, &self.db_path)?,
            None => HashMap::new(),
        };
        Ok(self.mem_kind.get_or_init(|| m))
    }

    /// The kernel → launch-call join (correlationId and process).
    pub fn launch_index(&self) -> Result<&LaunchIndex> {
        if let Some(l) = self.launch_index.get() {
            return Ok(l);
        }
        let kernels = self.kernels()?;
        let api = self.api()?;
        let correlation_only = self
            .tables
            .kernel
            .as_ref()
            .is_none_or(|t| !t.has("globalPid"));
        let index = correlation_index(api, correlation_only);
        let kernel_launch = kernels
            .iter()
            .map(|k| index.find(k.global_pid, k.correlation))
            .collect();
        Ok(self.launch_index.get_or_init(|| LaunchIndex {
            kernel_launch,
            correlation_only,
        }))
    }

    /// Devices that ran kernels, memcpys or memsets, ascending.
    pub fn devices(&self) -> Result<Vec<i64>> {
        let mut set = BTreeSet::new();
        for k in self.kernels()? {
            set.insert(k.device);
        }
        for m in self.memcpys()? {
            set.insert(m.device);
        }
        for m in self.memsets()? {
            set.insert(m.device);
        }
        Ok(set.into_iter().collect())
    }
}

/// `(process, correlationId) → API call index`.
pub(crate) struct CorrelationIndex {
    map: HashMap<(i64, i64), u32>,
    correlation_only: bool,
}

impl CorrelationIndex {
    /// The API call of a GPU activity with this globalPid and correlationId.
    pub fn find(&self, global_pid: i64, correlation: i64) -> Option<u32> {
        let key = if self.correlation_only {
            (0, correlation)
        } else {
            (global_pid & model::PID_MASK, correlation)
        };
        self.map.get(&key).copied()
    }
}

pub(crate) fn correlation_index(api: &[ApiCall], correlation_only: bool) -> CorrelationIndex {
    let mut map = HashMap::with_capacity(api.len());
    for (i, a) in api.iter().enumerate() {
        if a.correlation == 0 {
            continue;
        }
        let key = if correlation_only {
            (0, a.correlation)
        } else {
            (model::process_key(a.global_tid), a.correlation)
        };
        map.entry(key).or_insert(i as u32);
    }
    CorrelationIndex {
        map,
        correlation_only,
    }
}

/// What part of a profile a question is about. Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Scope {
    /// CUDA device id (`deviceId` in the export); default all devices.
    pub device: Option<i64>,
    /// OS process id; default all processes.
    pub process: Option<i64>,
    /// Window start, absolute ns in the export's timebase.
    pub start_ns: Option<i64>,
    /// Window end, absolute ns in the export's timebase.
    pub end_ns: Option<i64>,
    /// Trim to the first start and last end of the NVTX ranges with this name.
    pub nvtx_range: Option<String>,
}

/// A [`Scope`] checked against the profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResolvedScope {
    pub device: Option<i64>,
    pub process: Option<i64>,
    /// The trim window `[start_ns, end_ns)`, when one was asked for.
    pub trim: Option<(i64, i64)>,
    /// Where the trim came from (`start_ns/end_ns` or `nvtx_range NAME`).
    pub trim_source: Option<String>,
}

impl ResolvedScope {
    /// Whether an interval on `device` launched by `global_pid` is in scope.
    pub fn admits(&self, device: i64, global_pid: i64, start: i64, end: i64) -> bool {
        self.device.is_none_or(|d| d == device)
            && self
                .process
                .is_none_or(|p| global_pid == 0 || model::pid_of(global_pid) == p)
            && self.overlaps(start, end)
    }

    /// Whether `[start, end)` overlaps the trim (always true without one).
    pub fn overlaps(&self, start: i64, end: i64) -> bool {
        self.trim
            .is_none_or(|(s, e)| end.max(start + 1) > s && start < e)
    }

    /// Whether a CPU-side event of this globalTid is in scope (process + trim).
    pub fn admits_thread(&self, global_tid: i64, start: i64, end: i64) -> bool {
        self.process.is_none_or(|p| model::pid_of(global_tid) == p) && self.overlaps(start, end)
    }

    /// Clip an interval to the trim.
    pub fn clip(&self, start: i64, end: i64) -> (i64, i64) {
        match self.trim {
            Some((s, e)) => (start.max(s), end.min(e)),
            None => (start, end),
        }
    }
}

impl Profile {
    /// Check a scope: the device and process must exist, the window must be
    /// well-formed and meet the capture, an NVTX range name must occur.
    pub fn resolve(&self, scope: &Scope) -> Result<ResolvedScope> {
        if let Some(d) = scope.device {
            let devices = self.devices()?;
            if !devices.contains(&d) {
                return Err(ProfileError::BadArgument(format!(
                    "device {d} ran no kernels, copies or memsets in this profile; devices present: {devices:?}"
                )));
            }
        }
        if let Some(p) = scope.process {
            let pids: BTreeSet<i64> = self
                .kernels()?
                .iter()
                .map(|k| model::pid_of(k.global_pid))
                .chain(self.api()?.iter().map(|a| model::pid_of(a.global_tid)))
                .collect();
            if !pids.contains(&p) {
                return Err(ProfileError::BadArgument(format!(
                    "process {p} made no CUDA calls in this profile; processes with CUDA activity: {pids:?}"
                )));
            }
        }
        let mut trim = None;
        let mut trim_source = None;
        if let Some(name) = &scope.nvtx_range {
            let ranges: Vec<&NvtxRange> = self
                .nvtx()?
                .ranges
                .iter()
                .filter(|r| &r.name == name)
                .filter(|r| {
                    scope
                        .process
                        .is_none_or(|p| model::pid_of(r.global_tid) == p)
                })
                .collect();
            let (Some(s), Some(e)) = (
                ranges.iter().map(|r| r.start).min(),
                ranges.iter().map(|r| r.end).max(),
            ) else {
                return Err(ProfileError::BadArgument(format!(
                    "no NVTX range named `{name}` in this profile (names are case-sensitive; \
                     aisp_profile_nvtx lists them)"
                )));
            };
            trim = Some((s, e));
            trim_source = Some(format!("nvtx_range {name}"));
        }
        if scope.start_ns.is_some() || scope.end_ns.is_some() {
            let (s0, e0) = trim.unwrap_or((i64::MIN, i64::MAX));
            let s = scope.start_ns.unwrap_or(i64::MIN).max(s0);
            let e = scope.end_ns.unwrap_or(i64::MAX).min(e0);
            if e <= s {
                let from = trim_source.as_deref().unwrap_or("the profile");
                return Err(ProfileError::BadArgument(
                    match (scope.start_ns, scope.end_ns) {
                        (Some(a), Some(b)) if a >= b => {
                            format!("the window is empty: start_ns {a} is not before end_ns {b}")
                        }
                        (Some(a), _) => format!(
                            "the window is empty: start_ns {a} is not before the window's end, {e} ns (from {})",
                            if scope.end_ns.is_some() {
                                "end_ns"
                            } else {
                                from
                            }
                        ),
                        (None, Some(b)) => format!(
                            "the window is empty: end_ns {b} is not after the window's start, {s} ns (from {from})"
                        ),
                        (None, None) => "the window is empty".to_string(),
                    },
                ));
            }
            let (first, last) = self.activity_bounds()?;
            if first < last && (e <= first || s >= last) {
                let bound = |v: i64| match v {
                    i64::MIN => "the start".to_string(),
                    i64::MAX => "the end".to_string(),
                    v => v.to_string(),
                };
                return Err(ProfileError::BadArgument(format!(
                    "the window [{}, {}) misses the capture: its CUDA activity spans {first} to {last} ns \
                     (timestamps are absolute, in the export's own timebase)",
                    bound(s),
                    bound(e)
                )));
            }
            trim = Some((s, e));
            trim_source = Some(match trim_source {
                Some(src) => format!("{src} ∩ start_ns/end_ns"),
                None => "start_ns/end_ns".to_string(),
            });
        }
        Ok(ResolvedScope {
            device: scope.device,
            process: scope.process,
            trim,
            trim_source,
        })
    }

    /// First start and last end of kernels, copies, memsets and API calls.
    pub fn activity_bounds(&self) -> Result<(i64, i64)> {
        let mut first = i64::MAX;
        let mut last = i64::MIN;
        let mut see = |s: i64, e: i64| {
            first = first.min(s);
            last = last.max(e);
        };
        for k in self.kernels()? {
            see(k.start, k.end);
        }
        for m in self.memcpys()? {
            see(m.start, m.end);
        }
        for m in self.memsets()? {
            see(m.start, m.end);
        }
        for a in self.api()? {
            see(a.start, a.end);
        }
        if first > last {
            return Ok((0, 0));
        }
        Ok((first, last))
    }
}
