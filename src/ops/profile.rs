//! Operations of the `profile` domain.
//!
//! The capture operations (nsys, ncu, torch.profiler, Kineto trace analysis,
//! capture list) live in [`super::profile_capture`].

use super::profile_capture as capture;
use crate::registry::DynOperation;

pub const OPERATIONS: &[&dyn DynOperation] = &[
    &capture::ProfileNsys,
    &capture::ProfileNcu,
    &capture::NcuSummaryOp,
    &capture::ProfileTorch,
    &capture::ProfileTrace,
    &capture::ProfileList,
];
