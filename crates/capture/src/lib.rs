//! Profile captures: running a user's command under Nsight Systems, Nsight
//! Compute or the PyTorch profiler.
//!
//! - [`process`]: the runner (own process group, streamed output with bounded
//!   tails, progress, cancellation and deadline ending the whole group).
//! - [`tools`]: finding `nsys` and `ncu` and their versions.
//! - [`nsys`], [`ncu`], [`torch`]: the command lines of each profiler.
//! - [`diagnose`]: profiler failures with a known fix (importer libraries,
//!   counter permissions).
//! - [`record`]: run ids, run folders under `$AISP_HOME/runs/`, the `captures`
//!   table, and [`record::resolve_profile_ref`] (a run id or a path → a file).
//!
//! Analysis is not done here: nsys exports go to the profile tools, ncu CSV to
//! [`aisp_profile::ncu`], Kineto traces to [`aisp_profile::kineto`].

pub mod diagnose;
pub mod ncu;
pub mod nsys;
pub mod process;
pub mod record;
pub mod tools;
pub mod torch;

pub use record::{ResolveError, resolve_profile_ref};
