//! aisp: the toolkit of a GPU performance engineer for AI assistants.
//!
//! One registry of operations ([`registry`]) served three ways: as MCP tools
//! ([`server`]), as CLI subcommands ([`cli`]) and as an HTTP API
//! ([`server::http`]). The work lives in library modules that know nothing of
//! those front ends. See ARCHITECTURE.md for the map.

pub mod analysis;
pub mod app;
pub mod bench;
pub mod capture;
pub mod chart;
pub mod cli;
pub mod config;
pub mod context;
pub mod dashboard;
pub mod dataloader;
pub mod dispatch;
pub mod error;
pub mod flame;
pub mod gpu;
pub mod hf;
pub mod input_file;
pub mod jobs;
pub mod kineto;
pub mod knowledge;
pub mod llm;
pub mod ncu;
pub mod ops;
pub mod outputs;
pub mod planner;
pub mod profile;
pub mod prompts;
pub mod registry;
pub mod report;
pub mod resources;
pub mod safe_write;
pub mod server;
pub mod store;
pub mod suggest;
pub mod system;
pub mod torch_compile;

pub use error::{ErrorKind, OpError};
