//! The kernel lab: compile a caller's CUDA C++ kernels with NVRTC, check their
//! outputs against a reference (another kernel or a built-in op), time them
//! with the harness's discipline, and report them against the measured roofs.
//!
//! [`spec`] is the request and its resolution per size point ([`expr`]
//! evaluates the size expressions), [`compile`] the NVRTC build with
//! line-numbered errors, [`tolerance`] dtypes and the comparison, [`worker`]
//! the child process that touches the GPU, and [`runner`] the parent side
//! that starts it with a time limit and survives its crashes.

pub mod compile;
mod expr;
pub mod improve;
pub mod runner;
pub mod spec;
mod tolerance;
pub mod worker;

pub use tolerance::Comparison;
