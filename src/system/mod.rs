//! The host around the GPUs, read from /proc and /sys. No MCP knowledge here.
//!
//! Every reader takes a [`host::HostRoot`], so the same code runs on the live
//! host and on samples captured by `scripts/capture-host-samples.sh`
//! (tests/data/host/).

pub mod container;
pub mod context;
pub mod cpu_memory;
pub mod dependencies;
pub mod env;
pub mod exec;
pub mod host;
pub mod monitor;
pub mod network;
pub mod parameters;
pub mod pci;
pub mod procfs;
pub mod software;
pub mod triage;
