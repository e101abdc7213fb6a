//! Operations of the `distributed` domain.

use crate::registry::DynOperation;

pub const OPERATIONS: &[&dyn DynOperation] = &[];
