//! Profile captures: running a user's command under Nsight Systems, Nsight
//! Compute or the PyTorch profiler.
//!
//! - [`command`]: the user's command, checked.
//! - [`session`]: a capture in progress (its record, run folder, progress and
//!   steps), and the [`session::Host`] that lends it cancellation, deadline,
//!   progress and the GPU.
//! - [`nsys`], [`ncu`], [`torch`]: the command lines of each profiler and the
//!   capture that runs them (`nsys::capture`, `ncu::capture`, `torch::capture`).
//! - [`process`]: the runner (own process group, streamed output with bounded
//!   tails, progress, cancellation and deadline ending the whole group).
//! - [`tools`]: finding `nsys` and `ncu` and their versions.
//! - [`diagnose`]: profiler failures with a known fix (importer libraries,
//!   counter permissions).
//! - [`record`]: run ids, run folders under `$AISP_HOME/runs/`, the `captures`
//!   table, and [`record::resolve_profile_ref`] (a run id or a path → a file).
//! - [`error`]: why a capture failed ([`CaptureError`]).
//!
//! Nsight Systems exports are analysed by the profile tools, not here; ncu CSV
//! is read by [`aisp_profile::ncu`], Kineto traces by [`aisp_profile::kineto`].

pub mod command;
pub mod diagnose;
pub mod error;
pub mod ncu;
pub mod nsys;
pub mod process;
pub mod record;
pub mod session;
pub mod tools;
pub mod torch;

pub use error::CaptureError;
pub use record::{ResolveError, resolve_profile_ref};
