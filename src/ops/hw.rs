//! Operations of the `hw` domain.

use crate::registry::DynOperation;

pub const OPERATIONS: &[&dyn DynOperation] = &[];
