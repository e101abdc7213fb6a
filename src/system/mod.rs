//! The host around the GPUs, read from /proc and /sys. No MCP knowledge here.

pub mod monitor;
pub mod procfs;
