//! Operations of the `analyze` domain.

use crate::registry::DynOperation;

pub const OPERATIONS: &[&dyn DynOperation] = &[];
