//! Captures in the store (`captures` table) and their run folders under
//! `$AISP_HOME/runs/<run-id>/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{OptionalExtension, params};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use aisp_store::{Store, StoreError};

/// Which profiler made a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CaptureKind {
    Nsys,
    Ncu,
    Torch,
}

impl CaptureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CaptureKind::Nsys => "nsys",
            CaptureKind::Ncu => "ncu",
            CaptureKind::Torch => "torch",
        }
    }

    pub fn parse(s: &str) -> Option<CaptureKind> {
        match s {
            "nsys" => Some(CaptureKind::Nsys),
            "ncu" => Some(CaptureKind::Ncu),
            "torch" => Some(CaptureKind::Torch),
            _ => None,
        }
    }

    /// The artifact other tools analyse: the SQLite export, the CSV of the
    /// raw page, the (first) Kineto trace.
    pub fn primary_artifact(self) -> &'static str {
        match self {
            CaptureKind::Nsys => "sqlite",
            CaptureKind::Ncu => "ncu_rep",
            CaptureKind::Torch => "trace",
        }
    }
}

/// Where a capture stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CaptureState {
    Running,
    Succeeded,
    Failed,
    Cancelled,
    TimedOut,
}

impl CaptureState {
    pub fn as_str(self) -> &'static str {
        match self {
            CaptureState::Running => "running",
            CaptureState::Succeeded => "succeeded",
            CaptureState::Failed => "failed",
            CaptureState::Cancelled => "cancelled",
            CaptureState::TimedOut => "timed_out",
        }
    }

    fn parse(s: &str) -> CaptureState {
        match s {
            "running" => CaptureState::Running,
            "succeeded" => CaptureState::Succeeded,
            "cancelled" => CaptureState::Cancelled,
            "timed_out" => CaptureState::TimedOut,
            _ => CaptureState::Failed,
        }
    }
}

/// One capture as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CaptureRecord {
    pub run_id: String,
    pub kind: CaptureKind,
    /// The MCP tool that made it.
    pub tool: String,
    pub state: CaptureState,
    /// The user's command (argv).
    pub command: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    pub run_dir: String,
    /// The profiler binary (or interpreter) used, and its version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profiler: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profiler_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// Artifact name → path (e.g. `nsys_rep`, `sqlite`, `raw_csv`, `trace`).
    pub artifacts: BTreeMap<String, String>,
    /// One-line findings of the analysis, most important first.
    pub findings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A new run id: `<kind>-<UTC yyyymmdd-hhmmss>-<6 hex>`, sortable by time.
pub fn new_run_id(kind: CaptureKind) -> String {
    format!(
        "{}-{}-{:06x}",
        kind.as_str(),
        chrono::Utc::now().format("%Y%m%d-%H%M%S"),
        aisp_base::random_u64() & 0xff_ffff
    )
}

/// Whether `s` looks like a run id (so that paths are never mistaken for one).
pub fn looks_like_run_id(s: &str) -> bool {
    s.split_once('-')
        .is_some_and(|(k, rest)| CaptureKind::parse(k).is_some() && !rest.is_empty())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Create `<runs_dir>/<run_id>/`.
pub fn create_run_dir(runs_dir: &Path, run_id: &str) -> std::io::Result<PathBuf> {
    let dir = runs_dir.join(run_id);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn to_json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// Record a capture that is starting.
pub fn insert(store: &Store, rec: &CaptureRecord) -> Result<(), StoreError> {
    store
        .conn()
        .execute(
            "INSERT INTO captures (run_id, kind, tool, state, command, cwd, run_dir, profiler, profiler_version,
                exit_code, created_at, finished_at, duration_ms, artifacts, findings, error, pid)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
            params![
                rec.run_id,
                rec.kind.as_str(),
                rec.tool,
                rec.state.as_str(),
                to_json(&rec.command),
                rec.cwd,
                rec.run_dir,
                rec.profiler,
                rec.profiler_version,
                rec.exit_code,
                rec.created_at,
                rec.finished_at,
                rec.duration_ms,
                to_json(&rec.artifacts),
                to_json(&rec.findings),
                rec.error,
                std::process::id(),
            ],
        )
        .map_err(|e| store.err(e))?;
    Ok(())
}

/// Write the final state of a capture.
pub fn update(store: &Store, rec: &CaptureRecord) -> Result<(), StoreError> {
    store
        .conn()
        .execute(
            "UPDATE captures SET state = ?2, profiler = ?3, profiler_version = ?4, exit_code = ?5,
                finished_at = ?6, duration_ms = ?7, artifacts = ?8, findings = ?9, error = ?10
             WHERE run_id = ?1",
            params![
                rec.run_id,
                rec.state.as_str(),
                rec.profiler,
                rec.profiler_version,
                rec.exit_code,
                rec.finished_at,
                rec.duration_ms,
                to_json(&rec.artifacts),
                to_json(&rec.findings),
                rec.error,
            ],
        )
        .map_err(|e| store.err(e))?;
    Ok(())
}

const COLUMNS: &str = "run_id, kind, tool, state, command, cwd, run_dir, profiler, profiler_version, exit_code, \
                       created_at, finished_at, duration_ms, artifacts, findings, error";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CaptureRecord> {
    let kind: String = r.get(1)?;
    let state: String = r.get(3)?;
    let command: String = r.get(4)?;
    let artifacts: Option<String> = r.get(13)?;
    let findings: Option<String> = r.get(14)?;
    Ok(CaptureRecord {
        run_id: r.get(0)?,
        kind: CaptureKind::parse(&kind).unwrap_or(CaptureKind::Nsys),
        tool: r.get(2)?,
        state: CaptureState::parse(&state),
        command: serde_json::from_str(&command).unwrap_or_default(),
        cwd: r.get(5)?,
        run_dir: r.get(6)?,
        profiler: r.get(7)?,
        profiler_version: r.get(8)?,
        exit_code: r.get(9)?,
        created_at: r.get(10)?,
        finished_at: r.get(11)?,
        duration_ms: r.get(12)?,
        artifacts: artifacts
            .and_then(|a| serde_json::from_str(&a).ok())
            .unwrap_or_default(),
        findings: findings
            .and_then(|f| serde_json::from_str(&f).ok())
            .unwrap_or_default(),
        error: r.get(15)?,
    })
}

/// One capture by run id.
pub fn get(store: &Store, run_id: &str) -> Result<Option<CaptureRecord>, StoreError> {
    store
        .conn()
        .query_row(
            &format!("SELECT {COLUMNS} FROM captures WHERE run_id = ?1"),
            [run_id],
            from_row,
        )
        .optional()
        .map_err(|e| store.err(e))
}

/// Captures, newest first, optionally of one kind and state.
pub fn list(
    store: &Store,
    kind: Option<CaptureKind>,
    state: Option<CaptureState>,
    limit: usize,
) -> Result<Vec<CaptureRecord>, StoreError> {
    let conn = store.conn();
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {COLUMNS} FROM captures
             WHERE (?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR state = ?2)
             ORDER BY created_at DESC, run_id DESC LIMIT ?3"
        ))
        .map_err(|e| store.err(e))?;
    let rows = stmt
        .query_map(
            params![
                kind.map(CaptureKind::as_str),
                state.map(CaptureState::as_str),
                limit as i64
            ],
            from_row,
        )
        .map_err(|e| store.err(e))?;
    rows.collect::<Result<_, _>>().map_err(|e| store.err(e))
}

/// Mark captures left `running` by a process that no longer exists as failed.
pub fn recover_orphans(store: &Store) -> Result<usize, StoreError> {
    let conn = store.conn();
    let mut stmt = conn
        .prepare("SELECT run_id, pid FROM captures WHERE state = 'running'")
        .map_err(|e| store.err(e))?;
    let rows: Vec<(String, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(|e| store.err(e))?
        .collect::<Result<_, _>>()
        .map_err(|e| store.err(e))?;
    drop(stmt);
    let mut n = 0;
    for (run_id, pid) in rows {
        let alive = pid as u32 == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        if !alive {
            n += conn
                .execute(
                    "UPDATE captures SET state = 'failed', error = 'the aisp process running this capture exited before it finished' WHERE run_id = ?1",
                    [&run_id],
                )
                .map_err(|e| store.err(e))?;
        }
    }
    Ok(n)
}

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("`{0}` is neither an existing file nor a recorded capture")]
    Unknown(String),
    #[error("capture {run_id} has no {artifact} artifact (state {state}); it has: {have}")]
    NoArtifact {
        run_id: String,
        artifact: String,
        state: String,
        have: String,
    },
    #[error("capture {run_id} names {path}, which no longer exists")]
    Gone { run_id: String, path: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Turn "a run id or a path" into the file to analyse: an existing path is
/// returned as it is; a run id gives that capture's primary artifact (the
/// SQLite export of an nsys capture, the report of an ncu capture, the trace
/// of a torch capture).
pub fn resolve_profile_ref(store: &Store, reference: &str) -> Result<PathBuf, ResolveError> {
    let reference = reference.trim();
    let as_path = PathBuf::from(reference);
    // A link loop or dangling link is "there" too: its reader says what is wrong with it.
    if aisp_profile::input_file::something_at(&as_path) {
        return Ok(as_path);
    }
    if !looks_like_run_id(reference) {
        return Err(ResolveError::Unknown(reference.to_string()));
    }
    let Some(rec) = get(store, reference)? else {
        return Err(ResolveError::Unknown(reference.to_string()));
    };
    let artifact = rec.kind.primary_artifact();
    let Some(path) = rec.artifacts.get(artifact) else {
        return Err(ResolveError::NoArtifact {
            run_id: rec.run_id,
            artifact: artifact.into(),
            state: rec.state.as_str().into(),
            have: if rec.artifacts.is_empty() {
                "none".into()
            } else {
                rec.artifacts.keys().cloned().collect::<Vec<_>>().join(", ")
            },
        });
    };
    let p = PathBuf::from(path);
    if !p.exists() {
        return Err(ResolveError::Gone {
            run_id: rec.run_id,
            path: path.clone(),
        });
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(store: &Store, kind: CaptureKind, run_dir: &Path, created: &str) -> CaptureRecord {
        let run_id = new_run_id(kind);
        let rec = CaptureRecord {
            run_id,
            kind,
            tool: format!("aisp_profile_{}", kind.as_str()),
            state: CaptureState::Running,
            command: vec!["python3".into(), "train.py".into()],
            cwd: Some("/work".into()),
            run_dir: run_dir.display().to_string(),
            profiler: None,
            profiler_version: None,
            exit_code: None,
            created_at: created.into(),
            finished_at: None,
            duration_ms: None,
            artifacts: BTreeMap::new(),
            findings: vec![],
            error: None,
        };
        insert(store, &rec).unwrap();
        rec
    }

    #[test]
    fn run_ids_name_their_kind_and_are_distinct() {
        let a = new_run_id(CaptureKind::Nsys);
        let b = new_run_id(CaptureKind::Nsys);
        assert_ne!(a, b);
        assert!(a.starts_with("nsys-"));
        assert_eq!(a.len(), "nsys-20250101-120000-abcdef".len());
        assert!(looks_like_run_id(&a));
        assert!(looks_like_run_id("torch-x"));
        assert!(!looks_like_run_id("train.sqlite"));
        assert!(!looks_like_run_id("nsys-../../etc"));
    }

    #[test]
    fn captures_are_recorded_updated_listed_and_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("aisp.sqlite")).unwrap();
        let run_dir = create_run_dir(&dir.path().join("runs"), "x").unwrap();
        let mut nsys = record(
            &store,
            CaptureKind::Nsys,
            &run_dir,
            "2025-01-01T00:00:01.000Z",
        );
        let torch = record(
            &store,
            CaptureKind::Torch,
            &run_dir,
            "2025-01-01T00:00:02.000Z",
        );

        // Before the capture finishes it has no export to resolve.
        let err = resolve_profile_ref(&store, &nsys.run_id).unwrap_err();
        assert!(
            err.to_string()
                .contains("has no sqlite artifact (state running); it has: none"),
            "{err}"
        );

        let sqlite = run_dir.join("profile.sqlite");
        std::fs::write(&sqlite, b"x").unwrap();
        nsys.state = CaptureState::Succeeded;
        nsys.exit_code = Some(0);
        nsys.finished_at = Some("2025-01-01T00:00:05.000Z".into());
        nsys.duration_ms = Some(4000);
        nsys.artifacts
            .insert("sqlite".into(), sqlite.display().to_string());
        nsys.findings = vec!["[high] GPU idle 91 % of the steady window".into()];
        update(&store, &nsys).unwrap();
        assert_eq!(get(&store, &nsys.run_id).unwrap().unwrap(), nsys);

        let all = list(&store, None, None, 10).unwrap();
        assert_eq!(
            all.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
            vec![torch.run_id.as_str(), nsys.run_id.as_str()]
        );
        assert_eq!(
            list(&store, Some(CaptureKind::Nsys), None, 10)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            list(&store, None, Some(CaptureState::Running), 10).unwrap()[0].run_id,
            torch.run_id
        );
        assert_eq!(list(&store, None, None, 1).unwrap().len(), 1);

        assert_eq!(resolve_profile_ref(&store, &nsys.run_id).unwrap(), sqlite);
        // A path is returned as it is.
        assert_eq!(
            resolve_profile_ref(&store, sqlite.to_str().unwrap()).unwrap(),
            sqlite
        );
        assert!(matches!(
            resolve_profile_ref(&store, "nsys-20990101-000000-000000"),
            Err(ResolveError::Unknown(_))
        ));
        assert!(matches!(
            resolve_profile_ref(&store, "missing.sqlite"),
            Err(ResolveError::Unknown(_))
        ));
        std::fs::remove_file(&sqlite).unwrap();
        assert!(matches!(
            resolve_profile_ref(&store, &nsys.run_id),
            Err(ResolveError::Gone { .. })
        ));
    }

    #[test]
    fn captures_of_dead_processes_are_marked_failed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("aisp.sqlite")).unwrap();
        let rec = record(
            &store,
            CaptureKind::Ncu,
            dir.path(),
            "2025-01-01T00:00:01.000Z",
        );
        // Our own running capture stays running.
        assert_eq!(recover_orphans(&store).unwrap(), 0);
        store
            .conn()
            .execute("UPDATE captures SET pid = 999999999", [])
            .unwrap();
        assert_eq!(recover_orphans(&store).unwrap(), 1);
        let got = get(&store, &rec.run_id).unwrap().unwrap();
        assert_eq!(got.state, CaptureState::Failed);
        assert!(got.error.unwrap().contains("exited before it finished"));
    }
}
