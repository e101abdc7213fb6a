//! Analysis over what aisp has measured and knows: benchmark history
//! (Pareto fronts, leaderboards, power, size scaling) and, once profile
//! analysis is available, retargeting a profile to another GPU.
//!
//! No MCP knowledge here: operations in `crate::ops::analyze` call these.

pub mod boards;
pub mod bottleneck;
pub mod history;
pub mod retarget;
