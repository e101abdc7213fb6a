//! aisp: the toolkit of a GPU performance engineer for AI assistants.
//!
//! One registry of operations ([`registry`]) served three ways: as MCP tools
//! ([`server`]), as CLI subcommands ([`cli`]) and as an HTTP API
//! ([`server::http`]). The work lives in the library crates under `crates/`
//! (`aisp_profile`, `aisp_hw`, `aisp_planner`, ...), which know nothing of
//! those front ends. See ARCHITECTURE.md for the map.

pub mod answer_cap;
pub mod app;
pub mod cli;
pub mod config;
pub mod context;
pub mod dashboard;
pub mod dispatch;
pub mod error;
pub mod jobs;
pub mod llm;
pub mod ops;
pub mod outputs;
pub mod prompts;
pub mod registry;
pub mod resources;
pub mod server;
pub mod suggest;
pub mod toolset;

pub use error::{ErrorKind, OpError};
