//! Compiled-in reference data.

pub mod concepts;
