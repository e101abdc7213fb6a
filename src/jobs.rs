//! Background jobs for long-running operations called with `async: true`.
//!
//! A job lives in memory while this process runs it (state, progress, its
//! cancellation token) and in the store's `jobs` table, so a restarted server
//! still reports finished jobs. Jobs that were queued or running in a process
//! that no longer exists are marked failed when the store is opened.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::{OptionalExtension, params};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::context::Progress;
use crate::error::OpError;
use aisp_store::Store;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> JobState {
        match s {
            "queued" => JobState::Queued,
            "running" => JobState::Running,
            "succeeded" => JobState::Succeeded,
            "cancelled" => JobState::Cancelled,
            _ => JobState::Failed,
        }
    }

    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }
}

/// What a long-running operation answers with `async: true`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct JobTicket {
    pub job_id: String,
    pub tool: String,
    pub state: JobState,
    /// Call this tool with `{job_id}` to follow the job.
    pub status_tool: String,
}

/// A job as `aisp_job_status` reports it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct JobRecord {
    pub job_id: String,
    pub tool: String,
    pub state: JobState,
    pub progress: Option<Progress>,
    /// The operation's output once it succeeded.
    pub result: Option<Map<String, Value>>,
    /// `{kind, message, hint}` once it failed or was cancelled.
    pub error: Option<OpError>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// The arguments the job was started with.
    pub arguments: Map<String, Value>,
}

struct LiveJob {
    record: JobRecord,
    cancel: CancellationToken,
    last_persisted: Instant,
}

/// In-memory view of the jobs this process runs.
///
/// The table is the process's, shared by every `AppState` in it: the store
/// records jobs by process id (see [`JobManager::recover_orphans`]), and a
/// process may hold several states (Python engines created one after another
/// in a notebook), none of which may take another's running jobs for orphans.
pub struct JobManager {
    live: Arc<Mutex<HashMap<String, LiveJob>>>,
}

impl Default for JobManager {
    fn default() -> Self {
        static PROCESS_JOBS: OnceLock<Arc<Mutex<HashMap<String, LiveJob>>>> = OnceLock::new();
        JobManager {
            live: Arc::clone(PROCESS_JOBS.get_or_init(Default::default)),
        }
    }
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn new_job_id() -> String {
    aisp_base::new_id("job")
}

impl JobManager {
    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, LiveJob>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Jobs of this process not finished yet (queued or running).
    pub fn active(&self) -> usize {
        self.live()
            .values()
            .filter(|j| !j.record.state.is_finished())
            .count()
    }

    /// Record a new queued job and return its id and cancellation token;
    /// refused when `max` jobs are queued or running already.
    pub fn create(
        &self,
        store: &Store,
        tool: &str,
        arguments: &Value,
        max: usize,
    ) -> Result<(String, CancellationToken), OpError> {
        // Held until the job is in the table, so that concurrent calls cannot overshoot `max`.
        let mut live = self.live();
        let active = live
            .values()
            .filter(|j| !j.record.state.is_finished())
            .count();
        if active >= max {
            return Err(OpError::busy(
                format!(
                    "{active} background jobs are queued or running, the most this aisp takes at once ({max}); \
                     {tool} was not started"
                ),
                "Retry when a job has finished (aisp_job_list shows them; aisp_job_cancel stops one you no longer \
                 need), or call without async: true. The cap is `limits.max_jobs` in the config file \
                 (AISP_MAX_JOBS).",
            ));
        }
        let id = new_job_id();
        let record = JobRecord {
            job_id: id.clone(),
            tool: tool.to_string(),
            state: JobState::Queued,
            progress: None,
            result: None,
            error: None,
            created_at: now_rfc3339(),
            started_at: None,
            finished_at: None,
            arguments: as_object(arguments),
        };
        store
            .conn()
            .execute(
                "INSERT INTO jobs (id, tool, state, arguments, created_at, pid) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    id,
                    tool,
                    record.state.as_str(),
                    arguments.to_string(),
                    record.created_at,
                    std::process::id()
                ],
            )
            .map_err(|e| OpError::from(store.err(e)))?;
        let cancel = CancellationToken::new();
        live.insert(
            id.clone(),
            LiveJob {
                record,
                cancel: cancel.clone(),
                last_persisted: Instant::now(),
            },
        );
        Ok((id, cancel))
    }

    pub fn mark_running(&self, store: &Store, id: &str) {
        let started = now_rfc3339();
        if let Some(job) = self.live().get_mut(id) {
            job.record.state = JobState::Running;
            job.record.started_at = Some(started.clone());
        }
        let _ = store.conn().execute(
            "UPDATE jobs SET state = 'running', started_at = ?2 WHERE id = ?1 AND state = 'queued'",
            params![id, started],
        );
    }

    /// Keep the latest progress; write it through to the store at most once a second.
    pub fn update_progress(&self, store: &Store, id: &str, progress: Progress) {
        let mut live = self.live();
        let Some(job) = live.get_mut(id) else {
            return;
        };
        job.record.progress = Some(progress.clone());
        if job.last_persisted.elapsed() >= Duration::from_secs(1) {
            job.last_persisted = Instant::now();
            let text = serde_json::to_string(&progress).unwrap_or_default();
            drop(live);
            let _ = store.conn().execute(
                "UPDATE jobs SET progress = ?2 WHERE id = ?1",
                params![id, text],
            );
        }
    }

    pub fn finish(&self, store: &Store, id: &str, outcome: Result<Value, OpError>) {
        let finished = now_rfc3339();
        let (state, result, error) = match outcome {
            Ok(v) => (JobState::Succeeded, Some(as_object(&v)), None),
            Err(e) if e.kind == crate::error::ErrorKind::Cancelled => {
                (JobState::Cancelled, None, Some(e))
            }
            Err(e) => (JobState::Failed, None, Some(e)),
        };
        let progress = {
            let mut live = self.live();
            let job = live.get_mut(id);
            job.and_then(|job| {
                job.record.state = state;
                job.record.result = result.clone();
                job.record.error = error.clone();
                job.record.finished_at = Some(finished.clone());
                job.record.progress.clone()
            })
        };
        let _ = store.conn().execute(
            "UPDATE jobs SET state = ?2, result = ?3, error = ?4, finished_at = ?5, progress = ?6 WHERE id = ?1",
            params![
                id,
                state.as_str(),
                result.map(|v| Value::Object(v).to_string()),
                error.map(|e| serde_json::to_string(&e).unwrap_or_default()),
                finished,
                progress.map(|p| serde_json::to_string(&p).unwrap_or_default()),
            ],
        );
    }

    /// The job's current record: live first, then the store.
    pub fn status(&self, store: &Store, id: &str) -> Result<JobRecord, OpError> {
        if let Some(job) = self.live().get(id) {
            return Ok(job.record.clone());
        }
        let row = store
            .conn()
            .query_row(
                "SELECT id, tool, state, progress, result, error, created_at, started_at, finished_at, arguments FROM jobs WHERE id = ?1",
                [id],
                row_to_record,
            )
            .optional()
            .map_err(|e| OpError::from(store.err(e)))?;
        row.ok_or_else(|| {
            OpError::not_found(
                format!("no job with id `{id}`"),
                "List known jobs with aisp_job_list; ids look like job_0123abcd4567ef89.",
            )
        })
    }

    /// The most recent jobs, newest first.
    pub fn list(
        &self,
        store: &Store,
        limit: u32,
        state: Option<JobState>,
    ) -> Result<Vec<JobRecord>, OpError> {
        let conn = store.conn();
        let mut stmt = conn
            .prepare(
                "SELECT id, tool, state, progress, result, error, created_at, started_at, finished_at, arguments
                 FROM jobs WHERE (?1 IS NULL OR state = ?1) ORDER BY created_at DESC, rowid DESC LIMIT ?2",
            )
            .map_err(|e| OpError::from(store.err(e)))?;
        let rows = stmt
            .query_map(params![state.map(JobState::as_str), limit], row_to_record)
            .map_err(|e| OpError::from(store.err(e)))?;
        let mut out: Vec<JobRecord> = rows
            .collect::<Result<_, _>>()
            .map_err(|e| OpError::from(store.err(e)))?;
        drop(stmt);
        drop(conn);
        // Live jobs carry fresher progress than the store.
        let live = self.live();
        for rec in &mut out {
            if let Some(job) = live.get(&rec.job_id) {
                *rec = job.record.clone();
            }
        }
        Ok(out)
    }

    /// Ask a job to stop. Returns its record after the request.
    pub fn cancel(&self, store: &Store, id: &str) -> Result<JobRecord, OpError> {
        if let Some(job) = self.live().get(id) {
            if !job.record.state.is_finished() {
                job.cancel.cancel();
            }
            return Ok(job.record.clone());
        }
        let record = self.status(store, id)?;
        if record.state.is_finished() {
            return Ok(record);
        }
        Err(OpError::unsupported(
            format!(
                "job `{id}` is {} in another aisp process; only the process that runs a job can cancel it",
                record.state.as_str()
            ),
            "Call aisp_job_cancel through the server that started the job.",
        ))
    }

    /// Mark jobs left queued or running by a process that no longer exists.
    pub fn recover_orphans(&self, store: &Store) {
        let conn = store.conn();
        let rows: Vec<(String, i64)> = conn
            .prepare("SELECT id, pid FROM jobs WHERE state IN ('queued','running')")
            .and_then(|mut stmt| {
                stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect()
            })
            .unwrap_or_default();
        let me = std::process::id() as i64;
        // Not a bug: the server was stopped or killed while the job ran.
        let err = OpError::new(
            crate::error::ErrorKind::Internal,
            "the aisp process running this job exited (stopped or killed) before the job finished; \
             its result is lost",
            "Start the job again; keep the server running until aisp_job_status says it finished.",
        );
        let err_text = serde_json::to_string(&err).unwrap_or_default();
        for (id, pid) in rows {
            if pid != me && process_alive(pid) {
                continue;
            }
            if pid == me && self.live().contains_key(&id) {
                continue;
            }
            let _ = conn.execute(
                "UPDATE jobs SET state = 'failed', error = ?2, finished_at = ?3 WHERE id = ?1",
                params![id, err_text, now_rfc3339()],
            );
        }
    }
}

fn process_alive(pid: i64) -> bool {
    if pid <= 0 || pid > i32::MAX as i64 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Operation outputs and arguments are JSON objects; anything else is wrapped.
fn as_object(v: &Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        other => {
            let mut m = Map::new();
            m.insert("value".into(), other.clone());
            m
        }
    }
}

fn row_to_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<JobRecord> {
    let json = |s: Option<String>| s.and_then(|s| serde_json::from_str::<Value>(&s).ok());
    let state: String = r.get(2)?;
    Ok(JobRecord {
        job_id: r.get(0)?,
        tool: r.get(1)?,
        state: JobState::parse(&state),
        progress: r
            .get::<_, Option<String>>(3)?
            .and_then(|s| serde_json::from_str(&s).ok()),
        result: json(r.get(4)?).map(|v| as_object(&v)),
        error: r
            .get::<_, Option<String>>(5)?
            .and_then(|s| serde_json::from_str(&s).ok()),
        created_at: r.get(6)?,
        started_at: r.get(7)?,
        finished_at: r.get(8)?,
        arguments: json(r.get(9)?).map(|v| as_object(&v)).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_job_is_recorded_through_its_life_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let jobs = JobManager::default();
        let (id, _cancel) = jobs.create(&store, "aisp_x", &json!({"a": 1}), 32).unwrap();
        assert_eq!(jobs.status(&store, &id).unwrap().state, JobState::Queued);
        jobs.mark_running(&store, &id);
        jobs.update_progress(
            &store,
            &id,
            Progress {
                progress: 1.0,
                total: Some(4.0),
                message: Some("step".into()),
            },
        );
        jobs.finish(&store, &id, Ok(json!({"answer": 42})));

        // A new manager (a restarted server) reads the store.
        let fresh = JobManager::default();
        let rec = fresh.status(&store, &id).unwrap();
        assert_eq!(rec.state, JobState::Succeeded);
        assert_eq!(rec.result.map(Value::Object), Some(json!({"answer": 42})));
        assert_eq!(Value::Object(rec.arguments), json!({"a": 1}));
        assert_eq!(rec.progress.unwrap().total, Some(4.0));
        assert!(rec.finished_at.is_some());
        assert_eq!(fresh.list(&store, 10, None).unwrap().len(), 1);
        assert_eq!(
            fresh
                .list(&store, 10, Some(JobState::Failed))
                .unwrap()
                .len(),
            0
        );
        assert_eq!(
            fresh.status(&store, "job_nope").unwrap_err().kind,
            crate::error::ErrorKind::NotFound
        );
    }

    #[test]
    fn cancelling_trips_the_token_and_orphans_are_failed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let jobs = JobManager::default();
        let (id, cancel) = jobs.create(&store, "aisp_x", &json!({}), 32).unwrap();
        jobs.mark_running(&store, &id);
        jobs.cancel(&store, &id).unwrap();
        assert!(cancel.is_cancelled());
        jobs.finish(&store, &id, Err(OpError::cancelled()));
        assert_eq!(jobs.status(&store, &id).unwrap().state, JobState::Cancelled);

        // A running row from a dead process.
        store
            .conn()
            .execute(
                "INSERT INTO jobs (id, tool, state, arguments, created_at, pid) VALUES ('job_dead','aisp_x','running','{}','2026-01-01T00:00:00.000Z', 999999999)",
                [],
            )
            .unwrap();
        JobManager::default().recover_orphans(&store);
        let rec = JobManager::default().status(&store, "job_dead").unwrap();
        assert_eq!(rec.state, JobState::Failed);
        let err = rec.error.unwrap();
        assert!(err.message.contains("exited"));
        assert!(!err.hint.contains("bug"), "{}", err.hint);
        assert!(err.hint.contains("again"), "{}", err.hint);
    }
}
