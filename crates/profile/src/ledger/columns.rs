//! The ledger's columns: one exclusive account of a device's time. Every
//! nanosecond of a step's period lands in exactly one column, chosen by a
//! fixed precedence (compute kernel > communication kernel > copy/memset >
//! idle), so the columns of a step always sum to its period.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a stretch of device time went.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Column {
    /// Matrix multiplies on tensor cores (TF32/BF16/FP16/FP8 ...).
    GemmTensorCore,
    /// fp32 matrix multiplies on CUDA cores (FFMA): tensor cores could run them.
    GemmFp32Simt,
    /// Matrix multiplies whose instruction family the kernel name does not reveal.
    GemmOther,
    /// Attention kernels (flash, fused MHA, SDPA, paged attention).
    Attention,
    /// Pointwise kernels: activations, arithmetic, casts, fills, per-tensor optimizer math.
    Elementwise,
    /// Reductions, softmax, normalization, sort/scan.
    Reduction,
    /// Multi-tensor and fused optimizer kernels (`multi_tensor_apply`, fused Adam).
    Optimizer,
    /// Data-movement kernels (copies, concatenation, gather/scatter, transposes).
    CopyKernel,
    /// Any other kernel.
    OtherKernel,
    /// Collective kernel time after the last rank arrived: the data transfer itself.
    CommTransfer,
    /// Collective kernel time before the last rank arrived: waiting for another rank.
    CommWait,
    /// Collective kernel time that cannot be split into wait and transfer (the other ranks' exports are not given).
    Comm,
    /// Point-to-point kernels (send, receive): a pipeline stage's exchange with its neighbour, whose wait no split
    /// can tell from its transfer.
    CommP2p,
    /// Host-to-device copies from pageable memory (staged through a bounce buffer).
    H2dPageable,
    /// Host-to-device copies from pinned (or unrecorded) memory.
    H2dPinned,
    /// Device-to-host copies into pageable memory.
    D2hPageable,
    /// Device-to-host copies into pinned (or unrecorded) memory.
    D2hPinned,
    /// Device-to-device copies.
    D2d,
    /// Peer-to-peer copies between devices.
    P2p,
    /// Memsets.
    Memset,
    /// Idle while the host issues work op by op (CUDA launch calls and the host code between them): bubbles under
    /// 1 ms before an op whose launch had not returned when the device ran dry.
    IdleLaunchOverhead,
    /// Idle while the launching thread runs host code for 1 ms or more (Python, preprocessing) outside any
    /// recorded call.
    IdleHostCompute,
    /// Idle while the host blocks in a synchronizing call (stream/device/event sync, blocking memcpy or memset),
    /// and the refill after it (at most 1 ms past its return).
    IdleSync,
    /// Idle while the host stages a pageable copy (inside the copy call, between its DMA chunks).
    IdlePageableStaging,
    /// Idle while the launching thread waits for input (queue waits: `sem_wait`, `poll`, `read`, DataLoader ranges).
    IdleDataLoading,
    /// Idle while the launching thread sleeps or waits on a lock (`nanosleep`, `futex`, `pthread_mutex_lock`).
    IdleOsWait,
    /// Idle while CUDA modules load (`cuModuleLoad*`, `cuLibraryLoad*`: lazy loading on first launch).
    IdleModuleLoading,
    /// Idle while the host allocates or frees device memory (`cudaMalloc`, `cudaFree`), and the refill after it.
    IdleAllocator,
    /// Idle although the next op was already queued (dependencies between streams or devices, graph scheduling).
    IdleQueued,
    /// Idle that no host record explains (no CUDA API trace for the next op).
    IdleUnattributed,
}

/// The four groups of columns.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    Compute,
    Communication,
    Copy,
    Idle,
}

impl Column {
    pub const COUNT: usize = 30;

    pub const ALL: [Column; Column::COUNT] = [
        Column::GemmTensorCore,
        Column::GemmFp32Simt,
        Column::GemmOther,
        Column::Attention,
        Column::Elementwise,
        Column::Reduction,
        Column::Optimizer,
        Column::CopyKernel,
        Column::OtherKernel,
        Column::CommTransfer,
        Column::CommWait,
        Column::Comm,
        Column::CommP2p,
        Column::H2dPageable,
        Column::H2dPinned,
        Column::D2hPageable,
        Column::D2hPinned,
        Column::D2d,
        Column::P2p,
        Column::Memset,
        Column::IdleLaunchOverhead,
        Column::IdleHostCompute,
        Column::IdleSync,
        Column::IdlePageableStaging,
        Column::IdleDataLoading,
        Column::IdleOsWait,
        Column::IdleModuleLoading,
        Column::IdleAllocator,
        Column::IdleQueued,
        Column::IdleUnattributed,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Column::GemmTensorCore => "gemm_tensor_core",
            Column::GemmFp32Simt => "gemm_fp32_simt",
            Column::GemmOther => "gemm_other",
            Column::Attention => "attention",
            Column::Elementwise => "elementwise",
            Column::Reduction => "reduction",
            Column::Optimizer => "optimizer",
            Column::CopyKernel => "copy_kernel",
            Column::OtherKernel => "other_kernel",
            Column::CommTransfer => "comm_transfer",
            Column::CommWait => "comm_wait",
            Column::Comm => "comm",
            Column::CommP2p => "comm_p2p",
            Column::H2dPageable => "h2d_pageable",
            Column::H2dPinned => "h2d_pinned",
            Column::D2hPageable => "d2h_pageable",
            Column::D2hPinned => "d2h_pinned",
            Column::D2d => "d2d",
            Column::P2p => "p2p",
            Column::Memset => "memset",
            Column::IdleLaunchOverhead => "idle_launch_overhead",
            Column::IdleHostCompute => "idle_host_compute",
            Column::IdleSync => "idle_sync",
            Column::IdlePageableStaging => "idle_pageable_staging",
            Column::IdleDataLoading => "idle_data_loading",
            Column::IdleOsWait => "idle_os_wait",
            Column::IdleModuleLoading => "idle_module_loading",
            Column::IdleAllocator => "idle_allocator",
            Column::IdleQueued => "idle_queued",
            Column::IdleUnattributed => "idle_unattributed",
        }
    }

    pub fn group(self) -> Group {
        match self.index() {
            0..=8 => Group::Compute,
            9..=12 => Group::Communication,
            13..=19 => Group::Copy,
            _ => Group::Idle,
        }
    }

    /// Idle columns whose cause is on the host (the device waited for the CPU to issue work).
    pub fn is_host_idle(self) -> bool {
        self.group() == Group::Idle
            && !matches!(self, Column::IdleQueued | Column::IdleUnattributed)
    }
}

impl Group {
    pub fn as_str(self) -> &'static str {
        match self {
            Group::Compute => "compute",
            Group::Communication => "communication",
            Group::Copy => "copy",
            Group::Idle => "idle",
        }
    }
}

/// Nanoseconds per column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Columns([i64; Column::COUNT]);

impl Columns {
    pub fn get(&self, c: Column) -> i64 {
        self.0[c.index()]
    }
    pub fn add(&mut self, c: Column, ns: i64) {
        self.0[c.index()] += ns;
    }
    pub fn total(&self) -> i64 {
        self.0.iter().sum()
    }
    pub fn group(&self, g: Group) -> i64 {
        Column::ALL
            .iter()
            .filter(|c| c.group() == g)
            .map(|&c| self.get(c))
            .sum()
    }
    /// The sum of the host-caused idle columns.
    pub fn host_idle(&self) -> i64 {
        Column::ALL
            .iter()
            .filter(|c| c.is_host_idle())
            .map(|&c| self.get(c))
            .sum()
    }
    pub fn accumulate(&mut self, other: &Columns) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += b;
        }
    }
    /// Non-zero columns, in column order.
    pub fn iter(&self) -> impl Iterator<Item = (Column, i64)> + '_ {
        Column::ALL
            .iter()
            .map(|&c| (c, self.get(c)))
            .filter(|(_, v)| *v != 0)
    }
    /// The largest column of a group (or of all, when `group` is None).
    pub fn largest(&self, group: Option<Group>) -> Option<(Column, i64)> {
        self.iter()
            .filter(|(c, _)| group.is_none_or(|g| c.group() == g))
            .max_by_key(|(c, v)| (*v, std::cmp::Reverse(c.index())))
    }
}

impl Serialize for Columns {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        for (c, v) in self.iter() {
            m.serialize_entry(c.as_str(), &v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Columns {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m: BTreeMap<String, i64> = BTreeMap::deserialize(d)?;
        let mut out = Columns::default();
        for (k, v) in m {
            let c = Column::ALL
                .iter()
                .find(|c| c.as_str() == k)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown ledger column `{k}`")))?;
            out.add(*c, v);
        }
        Ok(out)
    }
}

impl JsonSchema for Columns {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LedgerColumns".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "description": "Nanoseconds per ledger column (non-zero columns only); the columns of a step sum to its period.",
            "additionalProperties": {"type": "integer"}
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_listed_once_in_index_order() {
        for (i, c) in Column::ALL.iter().enumerate() {
            assert_eq!(c.index(), i, "{c:?}");
        }
        let mut names: Vec<&str> = Column::ALL.iter().map(|c| c.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Column::COUNT);
        assert_eq!(Column::Comm.group(), Group::Communication);
        assert_eq!(Column::Memset.group(), Group::Copy);
        assert_eq!(Column::IdleLaunchOverhead.group(), Group::Idle);
        assert!(!Column::IdleQueued.is_host_idle() && Column::IdleSync.is_host_idle());
    }

    #[test]
    fn columns_round_trip_through_json() {
        let mut c = Columns::default();
        c.add(Column::Elementwise, 5);
        c.add(Column::IdleSync, 7);
        let v = serde_json::to_value(c).unwrap();
        assert_eq!(v, serde_json::json!({"elementwise": 5, "idle_sync": 7}));
        let back: Columns = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.total(), 12);
        assert_eq!(back.group(Group::Idle), 7);
    }
}
