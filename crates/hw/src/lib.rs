//! The machine: NVIDIA GPUs ([`gpu`]: availability, NVML, guarded CUDA driver
//! entry points, clocks, topology), the host ([`system`]: /proc and /sys
//! readers, disk and network measurements, the machine context) and the CUDA
//! microbenchmarks with their roofs and the kernel lab ([`bench`]).
//!
//! Layering inside the crate: [`host`] (the /proc, /sys and PCI readers) sits
//! below [`gpu`]; [`system::context`] combines both; [`bench`] builds on
//! [`gpu`]. Nothing here knows about MCP or the application: long work takes a
//! cancellation check and reports progress through `aisp_base`, and errors are
//! this crate's own.

pub mod bench;
pub mod gpu;
pub mod host;
pub mod system;
