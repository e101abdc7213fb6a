//! The integration tests of `aisp-profile`: the readers and analyses through
//! their typed API on the repository's fixtures (`tests/data`). The seeded
//! corruption test has a binary of its own (`tests/corruption.rs`): it counts
//! panics with a process-wide hook and bounds the process's peak memory.

mod profile_common;

mod capture_parsers;
mod compare;
#[path = "../../../../examples/export_edit.rs"]
mod export_edit;
mod ledger;
mod profile_facts;
mod profile_rules;
mod profile_views;
