//! Profile captures: running a user's command under Nsight Systems, Nsight
//! Compute or the PyTorch profiler.
//!
//! The crate's root holds what every capture shares: the checked
//! [`UserCommand`], the [`Session`] of a capture in progress (its record, run
//! folder, progress and steps) with the [`Host`] that lends it cancellation,
//! deadline, progress and the GPU, what every capture answers
//! ([`CaptureInfo`]), why one failed ([`CaptureError`]) and the fixes of the
//! profiler failures it recognises.
//!
//! - [`nsys`], [`ncu`], [`torch`]: the command lines of each profiler and the
//!   capture that runs them (`nsys::capture`, `ncu::capture`, `torch::capture`).
//! - [`process`]: the runner (own process group, streamed output with bounded
//!   tails, progress, cancellation and deadline ending the whole group).
//! - [`tools`]: finding `nsys` and `ncu` and their versions.
//! - [`record`]: run ids, run folders under `$AISP_HOME/runs/`, the `captures`
//!   table, and [`record::resolve_profile_ref`] (a run id or a path → a file).
//!
//! Nsight Systems exports are analysed by the profile tools, not here; ncu CSV
//! is read by [`aisp_profile::ncu`], Kineto traces by [`aisp_profile::kineto`].

mod command;
mod diagnose;
mod error;
pub mod ncu;
pub mod nsys;
pub mod process;
pub mod record;
mod session;
pub mod tools;
pub mod torch;

pub use command::{CommandError, UserCommand};
pub use diagnose::{COUNTER_PERMISSION_FIX, ImporterFailure, PROFILER_INIT_FIX};
pub use error::CaptureError;
pub use record::{ResolveError, resolve_profile_ref};
pub use session::{CaptureInfo, GpuTurn, Host, Session, Turn};
