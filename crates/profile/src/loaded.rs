//! Decoded event tables kept between calls: an assistant asks five to ten
//! questions about one export in a session, and every question needs the same
//! kernels, CUDA API calls, NVTX ranges and OS-runtime calls. Each table of a
//! file is decoded once and kept here (behind an `Arc`, shared by every
//! [`super::Profile`] opened on that file) under a byte budget, least recently
//! used first out.
//!
//! - Keyed by [`FileIdentity`] (device, inode, size, mtime and a hash of the
//!   header pages) and the table: a file that changes gets a new identity, and
//!   opening it drops what was kept for its old version.
//! - Memory is accounted per table ([`Footprint`]: the bytes its rows and
//!   strings take). A table larger than the whole budget is decoded for the
//!   call that needs it and not kept; the other tables of that file still are
//!   ("kept partially"); [`TableCache::status`] says which.
//! - A budget of 0 keeps nothing: every question decodes what it needs, as
//!   before this cache existed.
//! - Two calls that need the same table at once decode it once: the second
//!   waits for the first.

use std::any::Any;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::db::FileIdentity;

/// Default budget: 1 GiB (`limits.profile_tables_mib`, `AISP_PROFILE_TABLES_MIB`).
pub const DEFAULT_BUDGET_BYTES: u64 = 1 << 30;

/// The tables this cache holds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TableKind {
    Strings,
    Kernels,
    CudaApi,
    Memcpy,
    Memset,
    Nvtx,
    LaunchIndex,
    OsRuntime,
    MemcpyOperLabels,
    MemKindLabels,
    // Derived products (plain comments: the status schema stays a plain enum):
    // exact per-name statistics of every OS runtime call (`osrt_sum`, whole table),
    OsrtNameStats,
    // and what the CPU threads did during each GPU gap explained so far
    // (`gaps` and `rules` explain many of the same gaps).
    GapExplanations,
    // and, for the whole export (no device, process or trim), each device's operations in start order and its
    // windows (every question reads them: the steady window is on the GPU timeline).
    DeviceOps,
    DeviceWindows,
    // and the whole export's step ledger (every judgment reads it; a server builds it ahead, `ledger::prefetch`).
    Ledger,
}

/// Bytes a decoded table holds in memory (rows, strings, index entries), an
/// honest estimate that the budget is checked against.
pub trait Footprint {
    fn footprint(&self) -> u64;
}

/// Rows without heap parts: their size is `size_of` each.
pub trait FlatRow {}

impl<T: FlatRow> Footprint for Vec<T> {
    fn footprint(&self) -> u64 {
        (self.capacity() * std::mem::size_of::<T>()) as u64
    }
}

impl Footprint for HashMap<i64, String> {
    fn footprint(&self) -> u64 {
        // Buckets (key, String header, control byte) at the table's capacity, plus the text.
        let bucket = std::mem::size_of::<(i64, String)>() + 1;
        (self.capacity() * bucket) as u64 + self.values().map(|v| v.capacity() as u64).sum::<u64>()
    }
}

impl<T: Footprint> Footprint for Option<T> {
    fn footprint(&self) -> u64 {
        self.as_ref().map_or(0, Footprint::footprint)
    }
}

type Key = (FileIdentity, TableKind);

struct Item {
    value: Arc<dyn Any + Send + Sync>,
    bytes: u64,
    /// Logical clock of the last use (LRU order).
    used: u64,
}

#[derive(Default)]
struct Inner {
    budget: u64,
    items: HashMap<Key, Item>,
    /// The path each kept file was last opened by (status and change detection).
    paths: HashMap<FileIdentity, PathBuf>,
    bytes: u64,
    clock: u64,
    hits: u64,
    loads: u64,
    evictions: u64,
    dropped_changed: u64,
    /// Recent tables decoded but not kept (too large for the budget), newest last.
    not_kept: Vec<NotKept>,
}

/// A table that was decoded for a call but not kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NotKept {
    pub path: String,
    pub table: TableKind,
    pub bytes: u64,
}

/// What the cache holds now (`aisp_status.profile_tables`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CacheStatus {
    /// The budget in bytes (0: nothing is kept).
    pub budget_bytes: u64,
    /// Bytes the kept tables hold.
    pub used_bytes: u64,
    /// Files with kept tables, most recently used first.
    pub files: Vec<FileStatus>,
    /// Tables served from memory / decoded from a file, since start.
    pub hits: u64,
    pub loads: u64,
    /// Tables dropped to make room, and dropped because their file changed.
    pub evictions: u64,
    pub dropped_changed: u64,
    /// Recent tables decoded but not kept because each alone is larger than the budget.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_kept: Vec<NotKept>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FileStatus {
    pub path: String,
    pub size_bytes: u64,
    /// The tables kept, with their bytes in memory.
    pub tables: Vec<(TableKind, u64)>,
}

/// Decoded tables of recently used exports under a byte budget.
pub struct TableCache {
    inner: Mutex<Inner>,
    /// One gate per table being decoded, so a second caller waits instead of decoding it again.
    loading: Mutex<HashMap<Key, Arc<Mutex<()>>>>,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache")
            .field("budget", &self.lock().budget)
            .finish_non_exhaustive()
    }
}

/// A poisoned lock only means another thread panicked mid-update of plain
/// counters and maps; the data stays usable, so never propagate the panic.
fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TableCache {
    pub fn new(budget_bytes: u64) -> TableCache {
        TableCache {
            inner: Mutex::new(Inner {
                budget: budget_bytes,
                ..Default::default()
            }),
            loading: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        relock(&self.inner)
    }

    pub fn budget(&self) -> u64 {
        self.lock().budget
    }

    /// Change the budget; what no longer fits is dropped, least recently used first.
    pub fn set_budget(&self, bytes: u64) {
        let mut g = self.lock();
        g.budget = bytes;
        g.evict_to(bytes);
    }

    /// A file was opened with this identity: drop what was kept for another
    /// version of the same file (same path, or same device and inode).
    pub fn opened(&self, id: &FileIdentity, path: &Path) {
        let mut g = self.lock();
        let stale: Vec<FileIdentity> = g
            .paths
            .iter()
            .filter(|(k, p)| {
                *k != id && (p.as_path() == path || (k.dev == id.dev && k.ino == id.ino))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            g.paths.remove(&k);
            let keys: Vec<Key> = g.items.keys().filter(|(f, _)| *f == k).cloned().collect();
            for key in keys {
                if let Some(item) = g.items.remove(&key) {
                    g.bytes -= item.bytes;
                    g.dropped_changed += 1;
                }
            }
        }
    }

    fn get<T: Send + Sync + 'static>(&self, key: &Key) -> Option<Arc<T>> {
        let mut g = self.lock();
        g.clock += 1;
        let now = g.clock;
        let item = g.items.get_mut(key)?;
        item.used = now;
        let value = item.value.clone().downcast::<T>().ok()?;
        g.hits += 1;
        Some(value)
    }

    /// The table `kind` of the file `id`: from memory, or decoded by `load`
    /// (then kept when it fits the budget).
    pub fn get_or_load<T, E>(
        &self,
        id: &FileIdentity,
        path: &Path,
        kind: TableKind,
        load: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E>
    where
        T: Footprint + Send + Sync + 'static,
    {
        let key = (id.clone(), kind);
        if self.budget() == 0 {
            self.lock().loads += 1;
            return load().map(Arc::new);
        }
        if let Some(v) = self.get::<T>(&key) {
            return Ok(v);
        }
        let gate = relock(&self.loading)
            .entry(key.clone())
            .or_default()
            .clone();
        let result = {
            let _turn = relock(&gate);
            match self.get::<T>(&key) {
                Some(v) => Ok(v),
                None => load().map(|v| {
                    let v = Arc::new(v);
                    self.insert(key.clone(), path, v.clone());
                    v
                }),
            }
        };
        relock(&self.loading).remove(&key);
        result
    }

    /// A kept value, if any (no decoding; counts as a use).
    pub fn peek<T: Send + Sync + 'static>(
        &self,
        id: &FileIdentity,
        kind: TableKind,
    ) -> Option<Arc<T>> {
        if self.budget() == 0 {
            return None;
        }
        self.get::<T>(&(id.clone(), kind))
    }

    /// Keep `value` as `kind` of the file `id`, replacing what was kept (a
    /// derived product that grows: its bytes are counted again).
    pub fn put<T: Footprint + Send + Sync + 'static>(
        &self,
        id: &FileIdentity,
        path: &Path,
        kind: TableKind,
        value: Arc<T>,
    ) {
        if self.budget() == 0 {
            return;
        }
        let key = (id.clone(), kind);
        // A replacement grows what was made once: not another load.
        let fresh = !self.lock().items.contains_key(&key);
        self.insert_counted(key, path, value, fresh);
    }

    fn insert<T: Footprint + Send + Sync + 'static>(&self, key: Key, path: &Path, value: Arc<T>) {
        self.insert_counted(key, path, value, true)
    }

    fn insert_counted<T: Footprint + Send + Sync + 'static>(
        &self,
        key: Key,
        path: &Path,
        value: Arc<T>,
        count_load: bool,
    ) {
        let bytes = value.footprint();
        let mut g = self.lock();
        if count_load {
            g.loads += 1;
        }
        if bytes > g.budget {
            tracing::info!(
                path = %path.display(),
                table = ?key.1,
                bytes,
                budget = g.budget,
                "decoded table larger than the profile table budget: used for this call, not kept"
            );
            g.not_kept.push(NotKept {
                path: path.display().to_string(),
                table: key.1,
                bytes,
            });
            if g.not_kept.len() > 8 {
                g.not_kept.remove(0);
            }
            return;
        }
        let budget = g.budget;
        g.evict_to(budget - bytes);
        g.clock += 1;
        let used = g.clock;
        g.paths.insert(key.0.clone(), path.to_path_buf());
        if let Some(old) = g.items.insert(key, Item { value, bytes, used }) {
            g.bytes -= old.bytes;
        }
        g.bytes += bytes;
    }

    /// What is kept now.
    pub fn status(&self) -> CacheStatus {
        let g = self.lock();
        type PerFile = (u64, Vec<(TableKind, u64)>);
        let mut files: HashMap<&FileIdentity, PerFile> = HashMap::new();
        for ((id, kind), item) in &g.items {
            let e = files.entry(id).or_default();
            e.0 = e.0.max(item.used);
            e.1.push((*kind, item.bytes));
        }
        let mut files: Vec<(u64, FileStatus)> = files
            .into_iter()
            .map(|(id, (used, mut tables))| {
                tables.sort();
                (
                    used,
                    FileStatus {
                        path: g
                            .paths
                            .get(id)
                            .map(|p| p.display().to_string())
                            .unwrap_or_default(),
                        size_bytes: id.size,
                        tables,
                    },
                )
            })
            .collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.0));
        CacheStatus {
            budget_bytes: g.budget,
            used_bytes: g.bytes,
            files: files.into_iter().map(|(_, f)| f).collect(),
            hits: g.hits,
            loads: g.loads,
            evictions: g.evictions,
            dropped_changed: g.dropped_changed,
            not_kept: g.not_kept.clone(),
        }
    }
}

impl Inner {
    /// Drop least recently used tables until at most `limit` bytes are kept.
    fn evict_to(&mut self, limit: u64) {
        while self.bytes > limit {
            let Some(oldest) = self
                .items
                .iter()
                .min_by_key(|(_, item)| item.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(item) = self.items.remove(&oldest) {
                self.bytes -= item.bytes;
                self.evictions += 1;
            }
            if !self.items.keys().any(|(f, _)| *f == oldest.0) {
                self.paths.remove(&oldest.0);
            }
        }
    }
}

/// The cache of opens that name none ([`super::OpenOptions::tables`] unset):
/// a budget of 0, so library callers that do not ask for sharing (rank digests
/// over many files, tests) keep nothing between opens. The server and the
/// Python API pass their own (`AppState::profile_tables`, sized from the configuration).
pub fn unshared() -> &'static Arc<TableCache> {
    static NONE: OnceLock<Arc<TableCache>> = OnceLock::new();
    NONE.get_or_init(|| Arc::new(TableCache::new(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Blob(u64);
    impl Footprint for Blob {
        fn footprint(&self) -> u64 {
            self.0
        }
    }

    fn id(n: u64) -> FileIdentity {
        FileIdentity {
            dev: 1,
            ino: n,
            size: n,
            mtime_ns: 0,
            header_hash: String::new(),
        }
    }

    fn load(c: &TableCache, f: u64, kind: TableKind, bytes: u64) -> bool {
        // true when `load` ran (a miss)
        let mut ran = false;
        let _ = c.get_or_load::<Blob, ()>(&id(f), Path::new("x"), kind, || {
            ran = true;
            Ok(Blob(bytes))
        });
        ran
    }

    #[test]
    fn least_recently_used_goes_first() {
        let c = TableCache::new(100);
        assert!(load(&c, 1, TableKind::Kernels, 40));
        assert!(load(&c, 2, TableKind::Kernels, 40));
        assert!(!load(&c, 1, TableKind::Kernels, 40)); // hit: file 1 is now the newest
        assert!(load(&c, 3, TableKind::Kernels, 40)); // evicts file 2
        assert!(!load(&c, 1, TableKind::Kernels, 40));
        assert!(load(&c, 2, TableKind::Kernels, 40));
        let s = c.status();
        assert!(s.used_bytes <= 100);
        assert_eq!(s.evictions, 2);
    }

    #[test]
    fn a_table_larger_than_the_budget_is_not_kept_and_others_stay() {
        let c = TableCache::new(100);
        assert!(load(&c, 1, TableKind::Kernels, 30));
        assert!(load(&c, 1, TableKind::OsRuntime, 500));
        assert!(load(&c, 1, TableKind::OsRuntime, 500));
        assert!(!load(&c, 1, TableKind::Kernels, 30));
        let s = c.status();
        assert_eq!(s.files.len(), 1);
        assert_eq!(s.files[0].tables, vec![(TableKind::Kernels, 30)]);
        assert_eq!(s.not_kept.len(), 2);
        assert_eq!(s.not_kept[0].table, TableKind::OsRuntime);
    }

    #[test]
    fn a_derived_product_put_again_is_counted_again_not_loaded_again() {
        let c = TableCache::new(100);
        let f = id(1);
        assert!(c.peek::<Blob>(&f, TableKind::GapExplanations).is_none());
        c.put(
            &f,
            Path::new("x"),
            TableKind::GapExplanations,
            Arc::new(Blob(10)),
        );
        c.put(
            &f,
            Path::new("x"),
            TableKind::GapExplanations,
            Arc::new(Blob(30)),
        );
        assert_eq!(
            c.peek::<Blob>(&f, TableKind::GapExplanations).unwrap().0,
            30
        );
        let s = c.status();
        assert_eq!(s.used_bytes, 30);
        assert_eq!(s.loads, 1);
        let none = TableCache::new(0);
        none.put(
            &f,
            Path::new("x"),
            TableKind::GapExplanations,
            Arc::new(Blob(1)),
        );
        assert!(none.peek::<Blob>(&f, TableKind::GapExplanations).is_none());
    }

    #[test]
    fn a_zero_budget_keeps_nothing() {
        let c = TableCache::new(0);
        assert!(load(&c, 1, TableKind::Kernels, 1));
        assert!(load(&c, 1, TableKind::Kernels, 1));
        assert_eq!(c.status().used_bytes, 0);
    }

    #[test]
    fn another_version_of_a_file_drops_the_old_tables() {
        let c = TableCache::new(100);
        assert!(load(&c, 1, TableKind::Kernels, 10));
        let mut changed = id(1);
        changed.mtime_ns = 5;
        c.opened(&changed, Path::new("y"));
        let s = c.status();
        assert!(s.files.is_empty());
        assert_eq!(s.dropped_changed, 1);
    }
}
