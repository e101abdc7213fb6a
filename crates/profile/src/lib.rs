//! Nsight Systems profile analysis: read `nsys export --type sqlite` files
//! exactly and fast, and turn them into evidence.
//!
//! # Public API (stable; other modules build on it)
//!
//! ```no_run
//! use aisp_profile::{self as profile, Scope};
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

mod attribution;
pub mod cache;
mod calls;
pub mod classify;
pub mod compare;
mod db;
mod error;
pub mod events;
pub mod export;
mod families;
pub mod fastscan;
pub mod gaps;
pub mod info;
pub mod intervals;
pub mod iterations;
pub mod kernels;
pub mod ledger;
pub mod loaded;
pub mod memory;
mod model;
pub mod nccl;
pub mod nccl_payloads;
pub mod nsysrep;
pub mod nvtx;
mod osrt;
pub mod overlap;
pub mod ranks;
mod regions;
mod repeat;
pub mod rules;
mod schema;
pub mod search;
pub mod stats;
pub mod summary;
pub mod timeline;
pub mod usage;
pub mod utilization;
mod windows;

// The other readers of profiling data (PyTorch/Kineto traces, Nsight Compute
// CSV, flame graphs, DataLoader waits, torch.compile logs) and the capped
// reading of user files they all share.
pub mod dataloader;
pub mod flame;
pub mod input_file;
pub mod kineto;
pub mod ncu;
pub mod torch_compile;

use std::cell::OnceCell;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aisp_base::Progress;
use rusqlite::Connection;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use db::FileIdentity;
pub use error::{ProfileError, Result};
pub use model::{ApiCall, Kernel, Memcpy, Memset, NvtxRange, process_key};
pub use windows::{Window, WindowKind};

use loaded::{TableCache, TableKind};
use model::{Nvtx, Strings};
use osrt::OsrtCalls;
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
    /// `~/.aisp/cache` through [`aisp_base::default_home`].
    pub cache_dir: Option<PathBuf>,
    /// An explicit `nsys` binary; default: PATH, then the usual install folders.
    pub nsys: Option<PathBuf>,
    /// The largest export (or report) accepted; default [`crate::input_file::InputLimits`]'s.
    pub max_bytes: Option<u64>,
    /// Where decoded tables are kept between opens of the same file; default
    /// [`loaded::unshared`] (nothing kept).
    pub tables: Option<Arc<TableCache>>,
    /// Progress of table scans that run longer than its threshold.
    pub progress: Option<Progress>,
    /// How `nsys export` is run for a `.nsys-rep` (the caller's process group,
    /// time limit and cancellation); default: a plain child process.
    pub exporter: Option<nsysrep::Exporter>,
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
    /// Decoded tables shared with every other open of this file ([`loaded`]).
    cache: Arc<TableCache>,
    progress: Option<Progress>,
    strings: OnceCell<Arc<Strings>>,
    kernels: OnceCell<Arc<Vec<Kernel>>>,
    api: OnceCell<Arc<Vec<ApiCall>>>,
    memcpy: OnceCell<Arc<Vec<Memcpy>>>,
    memset: OnceCell<Arc<Vec<Memset>>>,
    nvtx: OnceCell<Arc<Nvtx>>,
    launch_index: OnceCell<Arc<LaunchIndex>>,
    osrt: OnceCell<Arc<OsrtCalls>>,
    osrt_stats: OnceCell<Arc<Option<osrt::NameStats>>>,
    memcpy_oper: OnceCell<Arc<HashMap<i64, String>>>,
    mem_kind: OnceCell<Arc<HashMap<i64, String>>>,
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
            .unwrap_or_else(|| aisp_base::default_home().join("cache"));
        nsysrep::export_cached(
            path,
            &cache_dir,
            options.nsys.as_deref(),
            options.exporter.as_ref(),
        )?
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
    let cache = options
        .tables
        .clone()
        .unwrap_or_else(|| loaded::unshared().clone());
    cache.opened(&opened.identity, &db_path);
    Ok(Profile {
        source: path.to_path_buf(),
        db_path,
        identity: opened.identity,
        conn: opened.conn,
        schema,
        tables,
        version,
        cache,
        progress: options.progress.clone(),
        osrt: OnceCell::new(),
        osrt_stats: OnceCell::new(),
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

impl Profile {
    /// Another handle on the same export for another thread (a `Profile` is `Send`, not `Sync`): its own
    /// read-only connection, the tables this one has decoded already, and the same shared cache. Fails when
    /// the file changed since this one was opened (its identity differs).
    pub fn sibling(&self) -> Result<Profile> {
        let opened = db::open_readonly(&self.db_path, u64::MAX)?;
        if opened.identity != self.identity {
            return Err(ProfileError::invalid(
                &self.db_path,
                "the file changed while it was being read; open it again",
            ));
        }
        fn copy<T>(cell: &OnceCell<Arc<T>>) -> OnceCell<Arc<T>> {
            cell.get().cloned().map(OnceCell::from).unwrap_or_default()
        }
        Ok(Profile {
            source: self.source.clone(),
            db_path: self.db_path.clone(),
            identity: opened.identity,
            conn: opened.conn,
            schema: self.schema.clone(),
            tables: self.tables.clone(),
            version: self.version.clone(),
            cache: self.cache.clone(),
            progress: self.progress.clone(),
            osrt: copy(&self.osrt),
            osrt_stats: copy(&self.osrt_stats),
            strings: copy(&self.strings),
            kernels: copy(&self.kernels),
            api: copy(&self.api),
            memcpy: copy(&self.memcpy),
            memset: copy(&self.memset),
            nvtx: copy(&self.nvtx),
            launch_index: copy(&self.launch_index),
            memcpy_oper: copy(&self.memcpy_oper),
            mem_kind: copy(&self.mem_kind),
        })
    }
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

impl loaded::Footprint for LaunchIndex {
    fn footprint(&self) -> u64 {
        (self.kernel_launch.capacity() * std::mem::size_of::<Option<u32>>()) as u64
    }
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

    /// A table from this profile's cell, else from the shared cache, else
    /// decoded by `load` (and offered to the cache).
    fn table<'a, T>(
        &'a self,
        cell: &'a OnceCell<Arc<T>>,
        kind: TableKind,
        load: impl FnOnce() -> Result<T>,
    ) -> Result<&'a T>
    where
        T: loaded::Footprint + Send + Sync + 'static,
    {
        if let Some(v) = cell.get() {
            return Ok(v);
        }
        let v = self
            .cache
            .get_or_load(&self.identity, &self.db_path, kind, load)?;
        Ok(cell.get_or_init(|| v))
    }

    /// A derived product of the whole file, made once and kept with its tables (under the same budget and file
    /// identity; made again when nothing may be kept).
    pub(crate) fn derived<T>(
        &self,
        kind: TableKind,
        make: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>>
    where
        T: loaded::Footprint + Send + Sync + 'static,
    {
        self.cache
            .get_or_load(&self.identity, &self.db_path, kind, make)
    }

    /// Whether derived products may be kept for this file (a zero budget keeps nothing).
    pub(crate) fn may_keep(&self) -> bool {
        self.cache.budget() > 0
    }

    /// A derived product kept for this file ([`loaded::TableCache::peek`]).
    pub(crate) fn kept<T: Send + Sync + 'static>(&self, kind: TableKind) -> Option<Arc<T>> {
        self.cache.peek(&self.identity, kind)
    }

    /// Keep a derived product for this file, replacing the previous one.
    pub(crate) fn keep<T: loaded::Footprint + Send + Sync + 'static>(
        &self,
        kind: TableKind,
        value: Arc<T>,
    ) {
        self.cache.put(&self.identity, &self.db_path, kind, value)
    }

    fn progress(&self) -> Option<&Progress> {
        self.progress.as_ref()
    }

    pub fn strings(&self) -> Result<&Strings> {
        self.table(&self.strings, TableKind::Strings, || {
            Strings::load(&self.conn, &self.tables, &self.db_path)
        })
    }

    /// A string by id (empty when unknown or when StringIds cannot be read).
    pub fn string(&self, id: i64) -> &str {
        self.strings().map(|s| s.get(id)).unwrap_or("")
    }

    /// All kernels, sorted by start.
    pub fn kernels(&self) -> Result<&[Kernel]> {
        self.table(&self.kernels, TableKind::Kernels, || {
            match &self.tables.kernel {
                Some(t) => model::load_kernels(&self.conn, t, &self.db_path, self.progress()),
                None => Ok(Vec::new()),
            }
        })
        .map(|v| v.as_slice())
    }

    /// All CUDA runtime/driver API calls, sorted by start.
    pub fn api(&self) -> Result<&[ApiCall]> {
        self.table(&self.api, TableKind::CudaApi, || {
            match &self.tables.runtime {
                Some(t) => model::load_api(&self.conn, t, &self.db_path, self.progress()),
                None => Ok(Vec::new()),
            }
        })
        .map(|v| v.as_slice())
    }

    pub fn memcpys(&self) -> Result<&[Memcpy]> {
        self.table(&self.memcpy, TableKind::Memcpy, || {
            match &self.tables.memcpy {
                Some(t) => model::load_memcpy(&self.conn, t, &self.db_path),
                None => Ok(Vec::new()),
            }
        })
        .map(|v| v.as_slice())
    }

    pub fn memsets(&self) -> Result<&[Memset]> {
        self.table(&self.memset, TableKind::Memset, || {
            match &self.tables.memset {
                Some(t) => model::load_memset(&self.conn, t, &self.db_path),
                None => Ok(Vec::new()),
            }
        })
        .map(|v| v.as_slice())
    }

    pub fn nvtx(&self) -> Result<&Nvtx> {
        self.table(&self.nvtx, TableKind::Nvtx, || match &self.tables.nvtx {
            Some(t) => model::load_nvtx(&self.conn, t, self.strings()?, &self.db_path),
            None => Ok(Nvtx::default()),
        })
    }

    /// The OS runtime calls (`None` when the export has no OSRT table).
    pub fn osrt(&self) -> Result<Option<&OsrtCalls>> {
        let Some(t) = &self.tables.osrt else {
            return Ok(None);
        };
        self.table(&self.osrt, TableKind::OsRuntime, || {
            model::load_osrt(&self.conn, t, &self.db_path, self.progress())
        })
        .map(Some)
    }

    /// Start decoding the OS runtime table (the largest) on another thread
    /// into the shared cache, so that a question that reads every table
    /// (info, the first of a session) overlaps it with decoding the others.
    /// Hand the handle to [`Profile::join_osrt`] before reading the table
    /// (the decoded table is used even when it is too large to keep). Nothing
    /// starts without an OSRT table, with a zero budget or when it is already
    /// kept.
    pub fn prefetch_osrt(&self) -> Option<std::thread::JoinHandle<Option<Arc<OsrtCalls>>>> {
        let t = self.tables.osrt.clone()?;
        if self.cache.budget() == 0
            || self.osrt.get().is_some()
            || self
                .cache
                .peek::<OsrtCalls>(&self.identity, TableKind::OsRuntime)
                .is_some()
        {
            return None;
        }
        let (cache, id, path) = (
            self.cache.clone(),
            self.identity.clone(),
            self.db_path.clone(),
        );
        let progress = self.progress.clone();
        std::thread::Builder::new()
            .name("aisp-osrt-prefetch".into())
            .spawn(move || {
                // The fast path only: if it gives up, `osrt()` reads through SQL later.
                cache
                    .get_or_load(&id, &path, TableKind::OsRuntime, || {
                        model::load_osrt_fast(&t, &path, progress.as_ref()).ok_or(())
                    })
                    .ok()
            })
            .ok()
    }

    /// Wait for [`Profile::prefetch_osrt`]'s thread and take what it decoded.
    pub fn join_osrt(&self, handle: Option<std::thread::JoinHandle<Option<Arc<OsrtCalls>>>>) {
        if let Some(v) = handle.and_then(|h| h.join().ok()).flatten() {
            let _ = self.osrt.set(v);
        }
    }

    /// Exact per-name statistics of all OS runtime calls (`osrt_sum` with no
    /// window or process filter), kept with the decoded tables so that asking
    /// again (another `limit`, another name key) costs nothing. `None` without
    /// an OSRT table, or when the sums overflow (then list durations instead).
    pub fn osrt_name_stats(&self) -> Result<Option<&osrt::NameStats>> {
        if self.tables.osrt.is_none() {
            return Ok(None);
        }
        let stats = self.table(&self.osrt_stats, TableKind::OsrtNameStats, || {
            Ok(match self.osrt()? {
                Some(calls) => osrt::name_stats(calls, fastscan::default_threads()),
                None => None,
            })
        })?;
        Ok(stats.as_ref())
    }

    /// Fold OS runtime calls as `(start, end, globalTid, nameId)`, optionally
    /// only those overlapping `[lo, hi)`, into per-thread accumulators that
    /// come back in row order (merge them afterwards). Empty without an OSRT table.
    pub fn fold_osrt<A, I, F>(&self, bounds: Option<(i64, i64)>, init: I, row: F) -> Result<Vec<A>>
    where
        A: Send,
        I: Fn() -> A + Sync,
        F: Fn(&mut A, i64, i64, i64, i64) + Sync,
    {
        Ok(match self.osrt()? {
            Some(calls) => calls.fold(bounds, fastscan::default_threads(), init, row),
            None => Vec::new(),
        })
    }

    /// [`Profile::fold_osrt`] for a fold that only uses calls overlapping
    /// `windows` (sorted, disjoint): chunks of calls far from all of them are skipped.
    pub fn fold_osrt_near<A, I, F>(&self, windows: &[(i64, i64)], init: I, row: F) -> Result<Vec<A>>
    where
        A: Send,
        I: Fn() -> A + Sync,
        F: Fn(&mut A, i64, i64, i64, i64) + Sync,
    {
        let bounds = windows
            .first()
            .map(|w| w.0)
            .zip(windows.last().map(|w| w.1));
        Ok(match self.osrt()? {
            Some(calls) => calls.fold_near(
                bounds,
                Some(windows),
                fastscan::default_threads(),
                init,
                row,
            ),
            None => Vec::new(),
        })
    }

    /// The name ids of the OS runtime calls (empty without that table).
    pub fn osrt_name_ids(&self) -> Result<Vec<i64>> {
        Ok(self.osrt()?.map(OsrtCalls::name_ids).unwrap_or_default())
    }

    /// [`Profile::fold_osrt_near`] with windows per thread (`globalTid` → sorted, disjoint windows), for
    /// the calls whose name id `wanted` accepts: only those threads' calls of those names are read.
    pub fn fold_osrt_threads_near<A, I, F, N>(
        &self,
        windows: &rustc_hash::FxHashMap<i64, Vec<(i64, i64)>>,
        wanted: N,
        init: I,
        row: F,
    ) -> Result<Vec<A>>
    where
        A: Send,
        I: Fn() -> A + Sync,
        F: Fn(&mut A, i64, i64, i64, i64) + Sync,
        N: Fn(i64) -> bool + Sync,
    {
        let threads = fastscan::default_threads();
        Ok(match self.osrt()? {
            Some(calls) => calls.fold_threads_near(windows, wanted, threads, init, row),
            None => Vec::new(),
        })
    }

    /// `ENUM_CUDA_MEMCPY_OPER` labels from the export (defaults when absent).
    pub fn memcpy_oper_labels(&self) -> Result<&HashMap<i64, String>> {
        self.table(
            &self.memcpy_oper,
            TableKind::MemcpyOperLabels,
            || match &self.tables.memcpy_oper_enum {
                Some(t) => model::load_enum(&self.conn, t, &self.db_path),
                None => Ok(memory::default_memcpy_oper_labels()),
            },
        )
    }

    /// `ENUM_CUDA_MEM_KIND` labels from the export (empty when absent: kinds unknown).
    pub fn mem_kind_labels(&self) -> Result<&HashMap<i64, String>> {
        self.table(&self.mem_kind, TableKind::MemKindLabels, || {
            match &self.tables.mem_kind_enum {
                Some(t) => model::load_enum(&self.conn, t, &self.db_path),
                None => Ok(HashMap::new()),
            }
        })
    }

    /// The kernel → launch-call join (correlationId and process).
    pub fn launch_index(&self) -> Result<&LaunchIndex> {
        self.table(&self.launch_index, TableKind::LaunchIndex, || {
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
            Ok(LaunchIndex {
                kernel_launch,
                correlation_only,
            })
        })
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
    map: rustc_hash::FxHashMap<(i64, i64), u32>,
    correlation_only: bool,
}

impl CorrelationIndex {
    /// The API call of a GPU activity with this globalPid and correlationId.
    pub fn find(&self, global_pid: i64, correlation: i64) -> Option<u32> {
        let key = index_key(
            self.correlation_only,
            global_pid & model::PID_MASK,
            correlation,
        );
        self.map.get(&key).copied().filter(|&i| i != NOT_FOUND)
    }
}

/// The key a GPU activity is joined to its launch by: the correlation id, and
/// the process unless the export's ids are unique across processes.
fn index_key(correlation_only: bool, process: i64, correlation: i64) -> (i64, i64) {
    if correlation_only {
        (0, correlation)
    } else {
        (process, correlation)
    }
}

/// Each API call that carries a correlation id, with its position and key.
fn call_keys(api: &[ApiCall], correlation_only: bool) -> impl Iterator<Item = (usize, (i64, i64))> {
    api.iter()
        .enumerate()
        .filter(|(_, a)| a.correlation != 0)
        .map(move |(i, a)| {
            let key = index_key(
                correlation_only,
                model::process_key(a.global_tid),
                a.correlation,
            );
            (i, key)
        })
}

/// A wanted key no API call carries ([`correlation_index_for`]).
const NOT_FOUND: u32 = u32::MAX;

/// [`correlation_index`] for a few GPU activities `(globalPid,
/// correlationId)` (the copies of an export: thousands, against millions of
/// API calls): one pass over the calls that only looks keys up, instead of
/// inserting every call. `find` answers the same for the wanted keys.
pub(crate) fn correlation_index_for(
    api: &[ApiCall],
    correlation_only: bool,
    wanted: impl IntoIterator<Item = (i64, i64)>,
) -> CorrelationIndex {
    let mut map: rustc_hash::FxHashMap<(i64, i64), u32> = wanted
        .into_iter()
        .map(|(pid, corr)| {
            let key = index_key(correlation_only, pid & model::PID_MASK, corr);
            (key, NOT_FOUND)
        })
        .collect();
    for (i, key) in call_keys(api, correlation_only) {
        // The first call with the key, as `correlation_index` keeps.
        if let Some(slot) = map.get_mut(&key)
            && *slot == NOT_FOUND
        {
            *slot = i as u32;
        }
    }
    CorrelationIndex {
        map,
        correlation_only,
    }
}

pub(crate) fn correlation_index(api: &[ApiCall], correlation_only: bool) -> CorrelationIndex {
    // FxHash: millions of integer keys; SipHash's DoS resistance buys nothing here.
    let mut map = rustc_hash::FxHashMap::with_capacity_and_hasher(api.len(), Default::default());
    for (i, key) in call_keys(api, correlation_only) {
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
    /// The whole export: no device, process or trim.
    pub fn is_whole(&self) -> bool {
        self.device.is_none() && self.process.is_none() && self.trim.is_none()
    }

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
