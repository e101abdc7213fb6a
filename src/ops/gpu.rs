//! Operations of the `gpu` domain.

use crate::registry::DynOperation;

pub const OPERATIONS: &[&dyn DynOperation] = &[];
