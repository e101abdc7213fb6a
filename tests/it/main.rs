//! The app's integration tests: one binary (one link per change), one module
//! per area. Tests here go through the API boundaries of the application:
//! `dispatch::invoke`, the CLI, and MCP and HTTP clients against the built
//! binary. Tests of a library's typed API live in that crate's `tests/it/`.

// Shared helpers.
mod common;
#[path = "../../examples/export_edit.rs"]
mod export_edit;
#[path = "../../crates/profile/tests/it/profile_common.rs"]
mod profile_common;

mod ai_llm;
mod ai_mcp;
mod ai_offline;
mod analyze_profile;
mod bad_input_matrix;
mod bench_scripts;
mod capture_ops;
mod cli;
mod crate_edges;
mod dashboard_http;
mod export_reports;
mod hf_model;
mod http_api;
mod hw_host;
mod kernel_lab;
mod mcp_http;
mod mcp_stdio;
mod planted_recommend;
mod planted_scorecard;
mod planted_sets;
mod profile_analyses;
mod profile_ops;
mod profile_output;
mod profile_ranks;
mod profile_tables;
mod profile_workloads;
mod reliability_http;
mod routing;
mod schemas;
mod store_upgrade;
mod tool_budgets;
