//! The embedded store: one SQLite database under `$AISP_HOME` (WAL mode)
//! holding jobs, benchmark history, captures, conversations and analysis
//! caches.
//!
//! Migrations are versioned per component (`jobs`, `benchmark`, ...) in
//! [`MIGRATIONS`]; each component's versions apply in order, once,
//! inside a transaction, and the applied set is recorded in
//! `schema_migrations`. Two aisp processes may open the store at once: WAL
//! plus a busy timeout serialize their writes, and migrating takes an
//! immediate (write) transaction so only one process applies a migration.

mod migrations;
mod recover;

pub use migrations::MIGRATIONS;
pub use recover::{StoreRecovery, is_corruption};

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the store directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("SQLite error on {path}: {source}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("the store {path} is damaged: {problem}")]
    Damaged { path: PathBuf, problem: String },
    #[error(
        "the store {path} was written by a newer aisp (component {component} is at version {found}, this build knows {known})"
    )]
    TooNew {
        path: PathBuf,
        component: String,
        found: i64,
        known: i64,
    },
}

/// How long opening the store waits for other aisp processes holding it.
const BUSY_WAIT: Duration = Duration::from_secs(10);

/// Whether SQLite refused because another connection holds the database.
fn is_busy(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Sqlite { source, .. } if matches!(
            source.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    )
}

/// Run `f` until it stops failing with SQLITE_BUSY/LOCKED or the deadline
/// passes. The busy timeout does not cover every case: SQLite returns BUSY
/// without calling the busy handler while another connection switches a new
/// database to WAL or recovers its WAL, which concurrent first opens hit.
fn retry_busy<T>(
    deadline: Instant,
    mut f: impl FnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    loop {
        match f() {
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// A migration: `sql` moves `component` from `version - 1` to `version`.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub component: &'static str,
    pub version: i64,
    pub sql: &'static str,
}

pub struct Store {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Open (creating if needed) the store at `path` and bring it up to date.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Self::open_with(path, migrations::MIGRATIONS)
    }

    pub fn open_with(path: &Path, migrations: &[Migration]) -> Result<Store, StoreError> {
        Self::open_healing(path, migrations).map(|(store, _)| store)
    }

    /// Open, and if the file is damaged move it aside, start a fresh store with
    /// every row that can still be read, and say what happened.
    pub fn open_healing(
        path: &Path,
        migrations: &[Migration],
    ) -> Result<(Store, Option<recover::StoreRecovery>), StoreError> {
        // SQLite takes an empty file for a new database: a store cut to 0 bytes
        // (a crash, a full disk) would silently start over. Moved aside and
        // reported instead, unless another process is creating it right now
        // (it writes the header within milliseconds).
        if recover::is_empty_file(path) {
            std::thread::sleep(std::time::Duration::from_millis(200));
            if recover::is_empty_file(path) {
                let (store, report) =
                    recover::recover(path, "the store file is empty (0 bytes)".into(), |p| {
                        Self::open_checked(p, migrations)
                    })?;
                return Ok((store, Some(report)));
            }
        }
        match Self::open_checked(path, migrations) {
            Ok(store) => Ok((store, None)),
            Err(e) if recover::is_corruption(&e) && path.exists() => {
                let problem = match &e {
                    StoreError::Damaged { problem, .. } => problem.clone(),
                    StoreError::Sqlite { source, .. } => source.to_string(),
                    other => other.to_string(),
                };
                let (store, report) =
                    recover::recover(path, problem, |p| Self::open_checked(p, migrations))?;
                Ok((store, Some(report)))
            }
            Err(e) => Err(e),
        }
    }

    fn open_checked(path: &Path, migrations: &[Migration]) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let sql = |source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql)?;
        conn.busy_timeout(BUSY_WAIT).map_err(sql)?;
        let deadline = Instant::now() + BUSY_WAIT;
        retry_busy(deadline, || {
            conn.pragma_update(None, "journal_mode", "WAL").map_err(sql)
        })?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(sql)?;
        // A damaged file is found here, before anything writes to it.
        if let Some(problem) = recover::check_integrity(&conn).map_err(sql)? {
            return Err(StoreError::Damaged {
                path: path.to_path_buf(),
                problem,
            });
        }
        let mut store = Store {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        };
        retry_busy(deadline, || store.migrate(migrations))?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection. Hold the guard briefly and never across an `.await`.
    pub fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock poisons it; the connection itself is
        // still consistent (SQLite rolled back), so keep serving.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Map a rusqlite error to a store error naming this database.
    pub fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn migrate(&mut self, migrations: &[Migration]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let sql = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let conn = self.conn.get_mut().unwrap_or_else(|p| p.into_inner());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                component TEXT NOT NULL,
                version INTEGER NOT NULL,
                applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                PRIMARY KEY (component, version)
            );",
        )
        .map_err(sql)?;
        let mut components: Vec<&str> = migrations.iter().map(|m| m.component).collect();
        components.sort_unstable();
        components.dedup();
        for component in components {
            let current: i64 = tx
                .query_row(
                    "SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE component = ?1",
                    [component],
                    |r| r.get(0),
                )
                .map_err(sql)?;
            let mut steps: Vec<&Migration> = migrations
                .iter()
                .filter(|m| m.component == component)
                .collect();
            steps.sort_by_key(|m| m.version);
            let known = steps.last().map(|m| m.version).unwrap_or(0);
            if current > known {
                return Err(StoreError::TooNew {
                    path: path.clone(),
                    component: component.to_string(),
                    found: current,
                    known,
                });
            }
            for m in steps.into_iter().filter(|m| m.version > current) {
                tx.execute_batch(m.sql).map_err(sql)?;
                tx.execute(
                    "INSERT INTO schema_migrations (component, version) VALUES (?1, ?2)",
                    rusqlite::params![m.component, m.version],
                )
                .map_err(sql)?;
            }
        }
        tx.commit().map_err(sql)?;
        Ok(())
    }

    /// The version each component is at (for `aisp status` and tests).
    pub fn versions(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT component, MAX(version) FROM schema_migrations GROUP BY component ORDER BY component",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: Migration = Migration {
        component: "demo",
        version: 1,
        sql: "CREATE TABLE demo (id INTEGER PRIMARY KEY, a TEXT);",
    };
    const V2: Migration = Migration {
        component: "demo",
        version: 2,
        sql: "ALTER TABLE demo ADD COLUMN b INTEGER NOT NULL DEFAULT 7;",
    };

    #[test]
    fn migrations_apply_once_in_order_and_keep_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        {
            let store = Store::open_with(&path, &[V1]).unwrap();
            store
                .conn()
                .execute("INSERT INTO demo (a) VALUES ('kept')", [])
                .unwrap();
            assert_eq!(store.versions().unwrap(), vec![("demo".into(), 1)]);
        }
        let store = Store::open_with(&path, &[V2, V1]).unwrap();
        let (a, b): (String, i64) = store
            .conn()
            .query_row("SELECT a, b FROM demo", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!((a.as_str(), b), ("kept", 7));
        assert_eq!(store.versions().unwrap(), vec![("demo".into(), 2)]);
        // Reopening applies nothing twice.
        drop(store);
        let store = Store::open_with(&path, &[V1, V2]).unwrap();
        let n: i64 = store
            .conn()
            .query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn a_store_from_a_newer_build_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        Store::open_with(&path, &[V1, V2]).unwrap();
        let err = Store::open_with(&path, &[V1]).unwrap_err();
        assert!(matches!(
            err,
            StoreError::TooNew {
                found: 2,
                known: 1,
                ..
            }
        ));
    }

    #[test]
    fn the_real_migrations_apply_and_two_processes_can_share_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("aisp.sqlite");
        let a = Store::open(&path).unwrap();
        let b = Store::open(&path).unwrap();
        let mode: String = a
            .conn()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        a.conn()
            .execute(
                "INSERT INTO jobs (id, tool, state, arguments, created_at, pid) VALUES ('j1','aisp_x','queued','{}','t',1)",
                [],
            )
            .unwrap();
        let n: i64 = b
            .conn()
            .query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn concurrent_opens_migrate_exactly_once() {
        // Several rounds on fresh databases: the race (BUSY from the switch
        // to WAL, which the busy handler does not cover) shows up only now and then.
        for _ in 0..20 {
            concurrent_first_opens();
        }
    }

    fn concurrent_first_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("aisp.sqlite");
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let p = path.clone();
                std::thread::spawn(move || Store::open(&p).map(|_| ()))
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        let store = Store::open(&path).unwrap();
        let dupes: i64 = store
            .conn()
            .query_row(
                "SELECT COUNT(*) - COUNT(DISTINCT component || ':' || version) FROM schema_migrations",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(dupes, 0);
    }
}
