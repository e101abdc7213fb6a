//! The capture crate's integration tests: one binary, one module per area.

mod sessions;
