//! The GPU operations of one device — kernels, copies and memsets — with the
//! host call that launched each, in start order. Everything the ledger says
//! about a device is read from this list.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::super::classify::KernelClass;
use super::super::kernels::Classifier;
use super::super::loaded::TableKind;
use super::super::model::PID_MASK;
use super::super::nccl::{Collective, is_nccl};
use super::super::{Profile, ResolvedScope, Result};
use super::columns::Column;

/// What an operation is, as far as the ledger's precedence goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// A compute kernel, with its column.
    Compute(Column),
    /// A collective (NCCL) kernel.
    Collective,
    /// A point-to-point NCCL kernel (send, receive or both): it ends when its peer's data has moved.
    PointToPoint,
    /// A memcpy or memset, with its column.
    Copy(Column),
}

/// One GPU operation.
#[derive(Debug, Clone, Copy)]
pub struct Op {
    pub start: i64,
    pub end: i64,
    pub kind: OpKind,
    /// Index into `Profile::api` of the call that launched it.
    pub launch: Option<u32>,
    /// Index into `Profile::kernels` for kernels, `Profile::memcpys`/`memsets` otherwise.
    pub index: u32,
    pub stream: i64,
    /// globalPid key (`PID_MASK`ed) of the launching process.
    pub process: i64,
}

/// A device's operations in start order, and the processes that issued them.
pub struct DeviceOps {
    pub device: i64,
    pub ops: Vec<Op>,
    /// globalPid keys of the processes with operations here, most operations first.
    pub processes: Vec<i64>,
}

impl DeviceOps {
    /// The first op starting at or after `t`.
    pub fn first_at_or_after(&self, t: i64) -> Option<&Op> {
        let i = self.ops.partition_point(|o| o.start < t);
        self.ops.get(i)
    }
}

/// What the ledger makes of a kernel: a collective (its time split later into transfer and waiting) or compute
/// in a column, from its short name, class and demangled name.
pub fn kernel_kind(short: &str, class: KernelClass, demangled: &str) -> OpKind {
    if is_nccl(short) {
        match Collective::of(short) {
            Collective::SendRecv | Collective::Send | Collective::Recv => OpKind::PointToPoint,
            _ => OpKind::Collective,
        }
    } else {
        OpKind::Compute(compute_column(class, demangled))
    }
}

/// The name of what the ledger makes of a kernel, as kernel answers print it: its compute column, or
/// `communication` for a collective.
pub fn kernel_ledger_class(short: &str, class: KernelClass, demangled: &str) -> &'static str {
    match kernel_kind(short, class, demangled) {
        OpKind::Compute(c) => c.as_str(),
        _ => "communication",
    }
}

/// The ledger column of a kernel that is not a collective.
pub fn compute_column(class: KernelClass, demangled: &str) -> Column {
    if is_optimizer_kernel(demangled) {
        return Column::Optimizer;
    }
    match class {
        KernelClass::GemmTensorCore => Column::GemmTensorCore,
        KernelClass::GemmSimtFp32 => Column::GemmFp32Simt,
        KernelClass::GemmUnknown => Column::GemmOther,
        KernelClass::Attention => Column::Attention,
        KernelClass::Elementwise => Column::Elementwise,
        KernelClass::Reduction => Column::Reduction,
        KernelClass::Copy => Column::CopyKernel,
        KernelClass::Communication | KernelClass::Other => Column::OtherKernel,
    }
}

/// Multi-tensor and fused optimizer kernels, by the names PyTorch, Apex and
/// DeepSpeed give them. Per-tensor optimizer math (one `lerp`/`addcdiv` per
/// parameter) stays elementwise: that is what it is on the device.
pub fn is_optimizer_kernel(demangled: &str) -> bool {
    demangled.contains("multi_tensor_apply")
        || demangled.contains("fused_adam")
        || demangled.contains("FusedAdam")
        || demangled.contains("fused_sgd")
        || demangled.contains("_fused_adamw")
        || demangled.contains("FusedOptimizer")
        || demangled.contains("adam_kernel")
}

/// The ledger column of a copy from its direction label and host memory kind.
fn copy_column(direction: &str, host_kind: Option<&str>) -> Column {
    let pageable = host_kind.is_some_and(|k| k.eq_ignore_ascii_case("Pageable"));
    match direction {
        "Host-to-Device" => {
            if pageable {
                Column::H2dPageable
            } else {
                Column::H2dPinned
            }
        }
        "Device-to-Host" => {
            if pageable {
                Column::D2hPageable
            } else {
                Column::D2hPinned
            }
        }
        "Peer-to-Peer" => Column::P2p,
        "Device-to-Device" => Column::D2d,
        // Host-to-host and array copies are rare on the device timeline; they move host memory.
        d if d.contains("Host") => Column::H2dPinned,
        _ => Column::D2d,
    }
}

impl super::super::loaded::Footprint for Vec<DeviceOps> {
    fn footprint(&self) -> u64 {
        self.iter()
            .map(|d| {
                (std::mem::size_of::<DeviceOps>()
                    + d.ops.capacity() * std::mem::size_of::<Op>()
                    + d.processes.capacity() * 8) as u64
            })
            .sum()
    }
}

/// Every operation of each device in scope, launched by the scope's processes; kept with the export's
/// tables for the whole export (every question of a session reads them).
pub fn device_ops(p: &Profile, scope: &ResolvedScope) -> Result<Arc<Vec<DeviceOps>>> {
    if scope.is_whole() {
        p.derived(TableKind::DeviceOps, || read_device_ops(p, scope))
    } else {
        read_device_ops(p, scope).map(Arc::new)
    }
}

fn read_device_ops(p: &Profile, scope: &ResolvedScope) -> Result<Vec<DeviceOps>> {
    let kernels = p.kernels()?;
    let launches = &p.launch_index()?.kernel_launch;
    let mut classifier = Classifier::new(p);
    let mut columns: FxHashMap<i64, OpKind> = FxHashMap::default();
    let mut by_device: std::collections::BTreeMap<i64, Vec<Op>> = Default::default();
    for (i, k) in kernels.iter().enumerate() {
        if !scope.admits(k.device, k.global_pid, k.start, k.end) || k.end <= k.start {
            continue;
        }
        let kind = *columns.entry(k.demangled_name).or_insert_with(|| {
            let class = classifier.of(k).class;
            kernel_kind(p.string(k.short_name), class, p.string(k.demangled_name))
        });
        by_device.entry(k.device).or_default().push(Op {
            start: k.start,
            end: k.end,
            kind,
            launch: launches[i],
            index: i as u32,
            stream: k.stream,
            process: k.global_pid & PID_MASK,
        });
    }
    copies(p, scope, &mut by_device)?;
    let mut out = Vec::new();
    for (device, mut ops) in by_device {
        ops.sort_by_key(|o| (o.start, o.end, o.index));
        let mut count: FxHashMap<i64, usize> = FxHashMap::default();
        for o in &ops {
            *count.entry(o.process).or_default() += 1;
        }
        let mut processes: Vec<(i64, usize)> = count.into_iter().collect();
        processes.sort_by_key(|&(pid, n)| (std::cmp::Reverse(n), pid));
        out.push(DeviceOps {
            device,
            ops,
            processes: processes.into_iter().map(|(p, _)| p).collect(),
        });
    }
    Ok(out)
}

/// Memcpys and memsets, joined to their launching calls.
fn copies(
    p: &Profile,
    scope: &ResolvedScope,
    by_device: &mut std::collections::BTreeMap<i64, Vec<Op>>,
) -> Result<()> {
    let memcpys = p.memcpys()?;
    let memsets = p.memsets()?;
    if memcpys.is_empty() && memsets.is_empty() {
        return Ok(());
    }
    let api = p.api()?;
    let correlation_only = p
        .tables()
        .memcpy
        .as_ref()
        .or(p.tables().memset.as_ref())
        .is_none_or(|t| !t.has("globalPid"));
    let index = super::super::correlation_index_for(
        api,
        correlation_only,
        memcpys
            .iter()
            .map(|m| (m.global_pid, m.correlation))
            .chain(memsets.iter().map(|m| (m.global_pid, m.correlation))),
    );
    let opers = p.memcpy_oper_labels()?;
    let kinds = p.mem_kind_labels()?;
    for (i, m) in memcpys.iter().enumerate() {
        if !scope.admits(m.device, m.global_pid, m.start, m.end) || m.end <= m.start {
            continue;
        }
        let host = [m.src_kind, m.dst_kind]
            .into_iter()
            .flatten()
            .filter_map(|k| kinds.get(&k))
            .find(|l| !l.eq_ignore_ascii_case("Device"));
        let dir = opers.get(&m.copy_kind).map(String::as_str).unwrap_or("");
        by_device.entry(m.device).or_default().push(Op {
            start: m.start,
            end: m.end,
            kind: OpKind::Copy(copy_column(dir, host.map(String::as_str))),
            launch: index.find(m.global_pid, m.correlation),
            index: i as u32,
            stream: m.stream,
            process: m.global_pid & PID_MASK,
        });
    }
    for (i, m) in memsets.iter().enumerate() {
        if !scope.admits(m.device, m.global_pid, m.start, m.end) || m.end <= m.start {
            continue;
        }
        by_device.entry(m.device).or_default().push(Op {
            start: m.start,
            end: m.end,
            kind: OpKind::Copy(Column::Memset),
            launch: index.find(m.global_pid, m.correlation),
            index: i as u32,
            stream: m.stream,
            process: m.global_pid & PID_MASK,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_get_their_direction_and_memory_kind() {
        assert_eq!(
            copy_column("Host-to-Device", Some("Pageable")),
            Column::H2dPageable
        );
        assert_eq!(
            copy_column("Host-to-Device", Some("Pinned")),
            Column::H2dPinned
        );
        assert_eq!(copy_column("Host-to-Device", None), Column::H2dPinned);
        assert_eq!(
            copy_column("Device-to-Host", Some("Pageable")),
            Column::D2hPageable
        );
        assert_eq!(copy_column("Device-to-Device", None), Column::D2d);
        assert_eq!(copy_column("Peer-to-Peer", None), Column::P2p);
    }

    #[test]
    fn optimizer_kernels_are_recognized_by_name() {
        assert!(is_optimizer_kernel(
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...>"
        ));
        assert!(is_optimizer_kernel("void at::native::fused_adam_kernel"));
        assert!(!is_optimizer_kernel(
            "void at::native::vectorized_elementwise_kernel<4, at::native::lerp_kernel_scalar>"
        ));
        assert_eq!(
            compute_column(KernelClass::Elementwise, "multi_tensor_apply_kernel"),
            Column::Optimizer
        );
        assert_eq!(
            compute_column(KernelClass::GemmSimtFp32, "sgemm"),
            Column::GemmFp32Simt
        );
    }
}
