//! Result cache: answers keyed by the profile's file identity (size, mtime,
//! hash of the header pages), the operation, its arguments (without the path)
//! and the build of aisp that answered, kept in the store (component `profile_cache`). A
//! repeated question on an unchanged profile is answered without reading it.
//! Cache failures are never errors: they only cost the recomputation.

use rusqlite::OptionalExtension;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Profile;
use aisp_store::Store;

/// Rows kept; the oldest are dropped beyond this.
const MAX_ROWS: i64 = 5000;

/// The build that answers: the package version, and the size and modification time of the running executable. A
/// rebuild with other rules keeps the version number, so the version alone would hand back the old build's answers.
fn build_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let exe = std::env::current_exe()
            .and_then(std::fs::metadata)
            .ok()
            .map(|m| {
                let secs = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                format!("+{}-{secs}", m.len())
            })
            .unwrap_or_default();
        format!("{}{exe}", env!("CARGO_PKG_VERSION"))
    })
}

fn args_key(args: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(args) {
        Ok(serde_json::Value::Object(mut m)) => {
            m.remove("path");
            serde_json::Value::Object(m).to_string()
        }
        _ => args.to_string(),
    }
}

/// A cached answer, if one exists for this file, operation and arguments.
pub fn lookup_in<T: DeserializeOwned>(
    store: &Store,
    p: &Profile,
    op: &str,
    args: &str,
) -> Option<T> {
    let conn = store.conn();
    let text: Option<String> = conn
        .query_row(
            "SELECT result FROM profile_results WHERE file_key = ?1 AND op = ?2 AND args = ?3 AND aisp_version = ?4",
            rusqlite::params![p.identity().key(), op, args_key(args), build_id()],
            |r| r.get(0),
        )
        .optional()
        .ok()
        .flatten();
    let value = serde_json::from_str(&text?).ok()?;
    tracing::debug!(op, "profile cache hit");
    Some(value)
}

/// Remember an answer.
pub fn store_in<T: Serialize>(store: &Store, p: &Profile, op: &str, args: &str, value: &T) {
    let Ok(text) = serde_json::to_string(value) else {
        return;
    };
    let conn = store.conn();
    let res = conn.execute(
        "INSERT OR REPLACE INTO profile_results (file_key, op, args, aisp_version, result, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%dT%H:%M:%fZ','now'))",
        rusqlite::params![p.identity().key(), op, args_key(args), build_id(), text],
    );
    if let Err(e) = res {
        tracing::debug!(error = %e, "profile cache write failed");
        return;
    }
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM profile_results", [], |r| r.get(0))
        .unwrap_or(0);
    if n > MAX_ROWS {
        let _ = conn.execute(
            "DELETE FROM profile_results WHERE rowid IN \
             (SELECT rowid FROM profile_results ORDER BY created_at LIMIT ?1)",
            [n - MAX_ROWS + MAX_ROWS / 5],
        );
    }
}
