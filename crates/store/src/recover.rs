//! A store that heals: when `$AISP_HOME/aisp.sqlite` is damaged (truncated,
//! overwritten, a corrupt page), the file is moved aside, a fresh store is
//! created, every row that can still be read is copied over, and what was
//! lost is reported (`aisp_status`, the log).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};

use super::{Store, StoreError};

/// What happened to a damaged store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StoreRecovery {
    /// Why the store was judged damaged (SQLite's words).
    pub problem: String,
    /// Where the damaged file now lies (kept for inspection).
    pub moved_to: String,
    /// Rows copied into the fresh store, per table.
    pub kept_rows: BTreeMap<String, u64>,
    /// Tables whose rows could not all be read, with how many were read
    /// before the damage (the rest are lost).
    pub damaged_tables: Vec<String>,
    /// One sentence for the user.
    pub summary: String,
}

/// Whether an error says the database file itself is damaged.
pub fn is_corruption(e: &StoreError) -> bool {
    match e {
        StoreError::Sqlite { source, .. } => matches!(
            source.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        ),
        StoreError::Damaged { .. } => true,
        _ => false,
    }
}

/// `PRAGMA quick_check` (page structure, no index-content cross check):
/// `None` when the store is sound, else SQLite's first complaints.
pub fn check_integrity(conn: &Connection) -> Result<Option<String>, rusqlite::Error> {
    let mut stmt = conn.prepare("PRAGMA quick_check(5)")?;
    let rows: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    if rows.len() == 1 && rows[0] == "ok" {
        Ok(None)
    } else {
        Ok(Some(rows.join("; ")))
    }
}

/// Whether `path` is a regular file of 0 bytes (not a link, not missing).
pub fn is_empty_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0)
}

/// Move `path` (and its `-wal`/`-shm` companions) aside; returns the new path.
fn move_aside(path: &Path) -> std::io::Result<PathBuf> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "aisp.sqlite".into());
    let mut dest = path.with_file_name(format!("{name}.damaged-{stamp}"));
    let mut n = 1;
    while dest.exists() {
        dest = path.with_file_name(format!("{name}.damaged-{stamp}-{n}"));
        n += 1;
    }
    std::fs::rename(path, &dest)?;
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", path.display()));
        if side.exists() {
            let _ = std::fs::rename(&side, PathBuf::from(format!("{}{suffix}", dest.display())));
        }
    }
    Ok(dest)
}

/// Move the damaged store at `path` aside, open a fresh one, and copy in
/// whatever rows of the known tables can still be read.
pub fn recover(
    path: &Path,
    problem: String,
    open_fresh: impl FnOnce(&Path) -> Result<Store, StoreError>,
) -> Result<(Store, StoreRecovery), StoreError> {
    let moved = move_aside(path).map_err(|source| StoreError::CreateDir {
        path: path.to_path_buf(),
        source,
    })?;
    let store = open_fresh(path)?;
    let mut kept_rows = BTreeMap::new();
    let mut damaged_tables: Vec<String> = Vec::new();
    {
        let conn = store.conn();
        if let Ok(old) = Connection::open_with_flags(
            &moved,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        ) {
            // A truncated file (fewer pages than its header says) is refused
            // outright unless the schema is "writable"; reading is all we do.
            let _ = old.pragma_update(None, "writable_schema", true);
            for table in user_tables(&conn) {
                if table == "schema_migrations" {
                    continue;
                }
                let (copied, complete) = copy_table(&old, &conn, &table);
                if copied > 0 {
                    kept_rows.insert(table.clone(), copied);
                }
                if !complete {
                    damaged_tables.push(table);
                }
            }
        } else {
            damaged_tables.push("(all: the file cannot be opened)".into());
        }
    }
    let kept: u64 = kept_rows.values().sum();
    let empty = std::fs::metadata(&moved).is_ok_and(|m| m.len() == 0);
    if empty {
        damaged_tables = vec!["(all: the file was empty)".into()];
    }
    let summary = if empty {
        format!(
            "The aisp store was empty (0 bytes, cut short by a crash or a full disk); it was moved to {} and a \
             fresh store was started. Everything it held is lost: benchmark history, jobs, capture records and \
             conversations start over.",
            moved.display()
        )
    } else {
        format!(
            "The aisp store was damaged ({problem}); it was moved to {} and a fresh store was started. \
         {kept} rows were kept{}.",
            moved.display(),
            if damaged_tables.is_empty() {
                String::new()
            } else {
                format!(
                    "; rows past the damage in {} are lost",
                    damaged_tables.join(", ")
                )
            }
        )
    };
    tracing::warn!("{summary}");
    Ok((
        store,
        StoreRecovery {
            problem,
            moved_to: moved.display().to_string(),
            kept_rows,
            damaged_tables,
            summary,
        },
    ))
}

fn user_tables(conn: &Connection) -> Vec<String> {
    conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect())
        .unwrap_or_default()
}

fn columns(conn: &Connection, table: &str) -> Vec<String> {
    conn.prepare(&format!(
        "PRAGMA table_info(\"{}\")",
        table.replace('"', "\"\"")
    ))
    .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(1))?.collect())
    .unwrap_or_default()
}

/// Copy the rows of `table` that can be read, row by row (a damaged page
/// ends the scan; rows before it are kept). Returns (rows copied, whether the
/// whole table was read).
fn copy_table(old: &Connection, new: &Connection, table: &str) -> (u64, bool) {
    let new_cols = columns(new, table);
    let old_cols = columns(old, table);
    let cols: Vec<&String> = new_cols.iter().filter(|c| old_cols.contains(c)).collect();
    if cols.is_empty() {
        return (0, old_cols.is_empty());
    }
    let quoted: Vec<String> = cols
        .iter()
        .map(|c| format!("\"{}\"", c.replace('"', "\"\"")))
        .collect();
    let list = quoted.join(", ");
    let q = |t: &str| format!("\"{}\"", t.replace('"', "\"\""));
    let Ok(mut read) = old.prepare(&format!("SELECT {list} FROM {}", q(table))) else {
        return (0, false);
    };
    let placeholders = vec!["?"; cols.len()].join(", ");
    let Ok(mut write) = new.prepare(&format!(
        "INSERT OR IGNORE INTO {} ({list}) VALUES ({placeholders})",
        q(table)
    )) else {
        return (0, false);
    };
    let Ok(mut rows) = read.query([]) else {
        return (0, false);
    };
    let mut copied = 0u64;
    loop {
        match rows.next() {
            Ok(Some(row)) => {
                let values: Vec<rusqlite::types::Value> = (0..cols.len())
                    .map(|i| row.get(i).unwrap_or(rusqlite::types::Value::Null))
                    .collect();
                if write
                    .execute(rusqlite::params_from_iter(values.iter()))
                    .is_ok_and(|n| n > 0)
                {
                    copied += 1;
                }
            }
            Ok(None) => return (copied, true),
            Err(_) => return (copied, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Migration;

    const DEMO: Migration = Migration {
        component: "demo",
        version: 1,
        sql: "CREATE TABLE demo (id INTEGER PRIMARY KEY, a TEXT NOT NULL);
              CREATE TABLE other (id INTEGER PRIMARY KEY, b TEXT);",
    };

    /// A store of 4,000 rows over ~200 pages, closed (WAL checkpointed).
    fn filled(dir: &Path) -> PathBuf {
        let path = dir.join("aisp.sqlite");
        let store = Store::open_with(&path, &[DEMO]).unwrap();
        {
            let mut conn = store.conn();
            let tx = conn.transaction().unwrap();
            for i in 0..4000 {
                tx.execute(
                    "INSERT INTO demo (id, a) VALUES (?1, ?2)",
                    rusqlite::params![i, format!("row {i} {}", "x".repeat(150))],
                )
                .unwrap();
            }
            tx.execute("INSERT INTO other (b) VALUES ('kept')", [])
                .unwrap();
            tx.commit().unwrap();
        }
        drop(store);
        path
    }

    fn reopen(path: &Path) -> (Store, Option<StoreRecovery>) {
        Store::open_healing(path, &[DEMO]).expect("a damaged store is repaired, not an error")
    }

    fn rows(store: &Store) -> i64 {
        store
            .conn()
            .query_row("SELECT COUNT(*) FROM demo", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn an_empty_store_is_moved_aside_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = filled(dir.path());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        let (store, report) = reopen(&path);
        let report = report.expect("a 0-byte store is reported");
        assert!(report.problem.contains("0 bytes"), "{report:?}");
        assert!(report.summary.contains("lost"), "{report:?}");
        assert_eq!(report.damaged_tables, vec!["(all: the file was empty)"]);
        assert!(Path::new(&report.moved_to).is_file());
        assert_eq!(rows(&store), 0);
        // The fresh store is sound and stays so.
        drop(store);
        assert!(reopen(&path).1.is_none());
    }

    #[test]
    fn a_sound_store_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = filled(dir.path());
        let (store, report) = reopen(&path);
        assert!(report.is_none());
        assert_eq!(rows(&store), 4000);
    }

    #[test]
    fn a_garbage_store_is_moved_aside_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = filled(dir.path());
        let mut junk = vec![0u8; 64 * 1024];
        let mut x = 0x9e37_79b9_u32;
        for b in junk.iter_mut() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        std::fs::write(&path, &junk).unwrap();
        let (store, report) = reopen(&path);
        let report = report.expect("the damage is reported");
        assert_eq!(rows(&store), 0);
        assert!(Path::new(&report.moved_to).exists());
        assert_eq!(
            std::fs::read(&report.moved_to).unwrap(),
            junk,
            "the bad file is kept as it was"
        );
        assert!(report.summary.contains("moved to"), "{}", report.summary);
        // The fresh store is sound and writable.
        store
            .conn()
            .execute("INSERT INTO demo (a) VALUES ('new')", [])
            .unwrap();
    }

    #[test]
    fn a_truncated_store_keeps_the_rows_before_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = filled(dir.path());
        let len = std::fs::metadata(&path).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len / 2 / 4096 * 4096).unwrap();
        drop(f);
        let (store, report) = reopen(&path);
        let report = report.expect("the damage is reported");
        let kept = rows(&store);
        assert!(kept > 0 && kept < 4000, "kept {kept}: {report:?}");
        assert_eq!(report.kept_rows.get("demo").copied(), Some(kept as u64));
        assert!(
            report.damaged_tables.contains(&"demo".to_string()),
            "{report:?}"
        );
        assert!(report.summary.contains("lost"), "{}", report.summary);
    }

    #[test]
    fn a_corrupt_page_is_found_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = filled(dir.path());
        let mut bytes = std::fs::read(&path).unwrap();
        let page = 4096;
        // A leaf page in the middle of the demo table: scribble over its cell area.
        let at = (bytes.len() / page / 2) * page;
        for (i, b) in bytes[at..at + page].iter_mut().enumerate() {
            *b = (i * 7 % 251) as u8;
        }
        std::fs::write(&path, &bytes).unwrap();
        let (store, report) = reopen(&path);
        let report = report.expect("quick_check finds the page");
        let kept = rows(&store);
        assert!(kept > 0 && kept < 4000, "kept {kept}");
        assert!(!report.problem.is_empty());
        let other: String = store
            .conn()
            .query_row("SELECT b FROM other", [], |r| r.get(0))
            .unwrap_or_default();
        assert_eq!(other, "kept", "undamaged tables are kept whole");
    }
}
