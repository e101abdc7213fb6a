//! Operations of the `job` domain: follow, list and cancel background jobs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::OpContext;
use crate::error::OpError;
use crate::jobs::{JobRecord, JobState};
use crate::registry::{DynOperation, OpSpec, Operation};

pub const OPERATIONS: &[&dyn DynOperation] = &[&JobStatus, &JobList, &JobCancel];

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobIdInput {
    /// The id a long-running tool returned with `async: true` (e.g. `job_0123abcd4567ef89`).
    pub job_id: String,
}

pub struct JobStatus;

impl Operation for JobStatus {
    type Input = JobIdInput;
    type Output = JobRecord;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Job status",
        summary: "State, progress, result or error of a background job.",
        description: "A background job's state (queued, running, succeeded, failed, cancelled), progress, and result or error. Poll it every few seconds after calling a tool with async: true. Instant.",
        positional: &["job_id"],
        intents: &[
            "job status",
            "is my benchmark done",
            "poll job",
            "background task result",
            "job finished",
            "job progress",
        ],
        example: r#"{"job_id": "job_0123abcd4567ef89"}"#,
        tier: crate::registry::Tier::Core,
        ..OpSpec::new("job", "status")
    };

    fn run(&self, ctx: &OpContext, input: JobIdInput) -> Result<JobRecord, OpError> {
        let store = ctx.app().store()?;
        ctx.app().jobs.status(store, input.job_id.trim())
    }
}

pub struct JobList;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobListInput {
    /// How many jobs to return, newest first (default 20, at most 500).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Only jobs in this state.
    #[serde(default)]
    pub state: Option<JobState>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct JobListOutput {
    pub jobs: Vec<JobRecord>,
}

impl Operation for JobList {
    type Input = JobListInput;
    type Output = JobListOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "List jobs",
        summary: "Recent background jobs, newest first, optionally filtered by state.",
        description: "Lists background jobs recorded in the store (from this server and earlier runs), newest first, \
with their state, progress, result or error. Use it to find a job id you lost or to see what ran recently. \
Inputs: limit (default 20), state (queued|running|succeeded|failed|cancelled). Instant.",
        intents: &[
            "list jobs",
            "running jobs",
            "recent jobs",
            "what is running",
            "job history",
        ],
        example: r#"{"limit": 10, "state": "running"}"#,
        ..OpSpec::new("job", "list")
    };

    fn run(&self, ctx: &OpContext, input: JobListInput) -> Result<JobListOutput, OpError> {
        let limit = input.limit.unwrap_or(20);
        if limit == 0 || limit > 500 {
            return Err(OpError::invalid_input(
                format!("limit must be between 1 and 500, not {limit}"),
                "Pass a smaller limit.",
            ));
        }
        let store = ctx.app().store()?;
        Ok(JobListOutput {
            jobs: ctx.app().jobs.list(store, limit, input.state)?,
        })
    }
}

pub struct JobCancel;

impl Operation for JobCancel {
    type Input = JobIdInput;
    type Output = JobRecord;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Cancel a job",
        summary: "Stop a queued or running background job; its GPU memory and child processes are released.",
        description: "Stops a queued or running background job (and its child processes) and returns its record; poll aisp_job_status to see it end. Instant.",
        hints: crate::registry::Hints {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        positional: &["job_id"],
        intents: &[
            "cancel job",
            "stop the job",
            "stop benchmark",
            "abort",
            "kill job",
            "stop a running job",
        ],
        example: r#"{"job_id": "job_0123abcd4567ef89"}"#,
        ..OpSpec::new("job", "cancel")
    };

    fn run(&self, ctx: &OpContext, input: JobIdInput) -> Result<JobRecord, OpError> {
        let store = ctx.app().store()?;
        ctx.app().jobs.cancel(store, input.job_id.trim())
    }
}
