//! Operations of the `optimize` domain.

use crate::registry::DynOperation;

pub const OPERATIONS: &[&dyn DynOperation] = &[];
