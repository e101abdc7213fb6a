//! The step ledger as a picture: one stacked bar per steady step (or per rank
//! of a set), split into what the device did — compute by kind, communication,
//! waiting for other ranks, copies — and what it waited for. The bars are the
//! ledger's own columns grouped into ten parts, so they sum to each period.

use aisp_profile::ledger::{Column, Columns, DeviceLedger};

use crate::chart::build::{self, StackedRow};
use crate::chart::{Paint, Scene};
use crate::profile::class_paint;
use aisp_profile::classify::KernelClass;

/// The parts of a ledger bar and the columns each holds.
pub fn parts() -> Vec<(&'static str, Paint, &'static [Column])> {
    use Column::*;
    vec![
        (
            "tensor-core GEMM",
            class_paint(KernelClass::GemmTensorCore),
            &[GemmTensorCore],
        ),
        (
            "fp32 / other GEMM",
            class_paint(KernelClass::GemmSimtFp32),
            &[GemmFp32Simt, GemmOther],
        ),
        (
            "attention",
            class_paint(KernelClass::Attention),
            &[Attention],
        ),
        (
            "elementwise",
            class_paint(KernelClass::Elementwise),
            &[Elementwise],
        ),
        (
            "reduction, optimizer, other kernels",
            class_paint(KernelClass::Reduction),
            &[Reduction, Optimizer, CopyKernel, OtherKernel],
        ),
        (
            "communication",
            class_paint(KernelClass::Communication),
            &[CommTransfer, Comm],
        ),
        (
            "waiting for other ranks",
            Paint::Rgb(0xf3, 0x9c, 0x12),
            &[CommWait],
        ),
        (
            "copies",
            Paint::Rgb(0xd3, 0x54, 0x9e),
            &[
                H2dPageable,
                H2dPinned,
                D2hPageable,
                D2hPinned,
                D2d,
                P2p,
                Memset,
            ],
        ),
        (
            "idle: waiting for the host",
            crate::chart::IDLE,
            &[
                IdleLaunchOverhead,
                IdleHostCompute,
                IdleSync,
                IdlePageableStaging,
                IdleDataLoading,
                IdleOsWait,
                IdleModuleLoading,
                IdleAllocator,
            ],
        ),
        (
            "idle: work queued or unknown",
            Paint::Muted,
            &[IdleQueued, IdleUnattributed],
        ),
    ]
}

fn row(label: String, c: &Columns, note: String) -> StackedRow {
    StackedRow {
        label,
        values: parts()
            .iter()
            .map(|(_, _, cols)| cols.iter().map(|&k| c.get(k)).sum::<i64>() as f64 / 1e6)
            .collect(),
        note,
    }
}

fn legend() -> Vec<(String, Paint)> {
    parts()
        .into_iter()
        .map(|(n, p, _)| (n.to_string(), p))
        .collect()
}

/// At most this many steps are drawn (the first steady ones).
pub const MAX_STEPS: usize = 40;

/// One bar per steady step of a device (warm-up left out: it is reported apart).
pub fn steps_chart(d: &DeviceLedger) -> Scene {
    let rows: Vec<StackedRow> = d
        .steady_steps()
        .take(MAX_STEPS)
        .map(|s| {
            row(
                s.name.clone(),
                &s.columns,
                format!("{:.2} ms", s.period_ns as f64 / 1e6),
            )
        })
        .collect();
    build::stacked(
        &format!(
            "Where each steady step goes on device {} (step ledger; {} warm-up step(s) apart)",
            d.device, d.warmup_steps
        ),
        "ms per step",
        &legend(),
        &rows,
        Some((d.steady.period_median_ns as f64 / 1e6, "median step")),
    )
}

/// One bar per rank: its mean steady step, so the ranks of a set can be compared at a glance.
pub fn ranks_chart(ranks: &[(u32, &DeviceLedger)]) -> Scene {
    let rows: Vec<StackedRow> = ranks
        .iter()
        .map(|(r, d)| {
            let n = d.steady.steps.max(1) as i64;
            let mut c = Columns::default();
            for (k, v) in d.steady.columns.iter() {
                c.add(k, v / n);
            }
            row(
                format!("rank {r}"),
                &c,
                format!("{:.2} ms", d.steady.period_median_ns as f64 / 1e6),
            )
        })
        .collect();
    build::stacked(
        "Where a steady step goes on each rank (step ledger, mean per step)",
        "ms per step",
        &legend(),
        &rows,
        None,
    )
}
