//! Retargeting a real profile to another GPU: each kernel group's measured
//! time is rescaled by the ratio of the peaks that bound it.
//!
//! A kernel's bound comes from its class (profile::classify, read from the
//! demangled name) and its measured duration:
//! - tensor-core GEMMs and attention → the dense tensor peak at the kernel's
//!   precision (bf16 when the name does not say);
//! - fp32 SIMT GEMMs (FFMA) → the FP32 vector peak;
//! - elementwise, reduction and copy kernels → device-memory bandwidth;
//! - collectives → kept as measured: NCCL kernel time includes each rank
//!   waiting for the others to arrive, which no link speed shortens, and the
//!   bytes moved are not in the trace; the two links' figures are shown;
//! - kernels shorter than 5 µs on average → launch/latency-bound: kept as
//!   measured (peaks do not shorten them);
//! - anything else → kept as measured, and said so.
//!
//! estimated = measured × source_peak / target_peak. The estimate assumes the
//! kernel reaches the same fraction of peak on the target as it did on the
//! source; CPU time, gaps and copies are not retargeted.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use aisp_knowledge::dtype::Precision;
use aisp_knowledge::gpus::Gpu;
use aisp_planner::round;
use aisp_profile::classify::KernelClass;
use aisp_profile::kernels::{KernelRow, Kernels, SHORT_KERNEL_NS};

/// What limits a kernel, for rescaling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Compute,
    Memory,
    Interconnect,
    Launch,
    Unknown,
}

/// One kernel group's estimate.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct KernelEstimate {
    pub name: String,
    pub class: KernelClass,
    pub instances: u64,
    pub measured_ns: i64,
    pub bound: Bound,
    /// The peak used: e.g. `bf16 tensor TFLOP/s`, `memory GB/s`.
    pub basis: String,
    pub source_peak: Option<f64>,
    pub target_peak: Option<f64>,
    /// measured / estimated (>1: faster on the target).
    pub speedup: f64,
    pub estimated_ns: i64,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BoundTotal {
    pub bound: Bound,
    pub measured_ns: i64,
    pub estimated_ns: i64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Retarget {
    pub source_gpu: String,
    pub target_gpu: String,
    pub kernels: Vec<KernelEstimate>,
    pub by_bound: Vec<BoundTotal>,
    /// Kernel time in the profile's scope.
    pub measured_kernel_ns: i64,
    pub estimated_kernel_ns: i64,
    /// measured / estimated kernel time.
    pub kernel_speedup: f64,
    /// Kernel groups not listed individually (beyond the row limit), rescaled together by class.
    pub groups_beyond_limit: usize,
    pub assumptions: Vec<String>,
}

fn tensor_precision(p: Option<Precision>) -> (Precision, bool) {
    match p {
        Some(Precision::Fp8) => (Precision::Fp8, true),
        Some(Precision::Fp4) => (Precision::Fp4, true),
        Some(Precision::Tf32) => (Precision::Tf32, true),
        Some(Precision::Fp16) => (Precision::Fp16, true),
        Some(Precision::Int8) => (Precision::Int8, true),
        Some(Precision::Fp64) => (Precision::Fp64, true),
        Some(Precision::Bf16) => (Precision::Bf16, true),
        // fp32 data on a tensor-core GEMM means TF32.
        Some(Precision::Fp32) => (Precision::Tf32, true),
        None => (Precision::Bf16, false),
    }
}

fn per_gpu_link(g: &Gpu) -> Option<f64> {
    g.nvlink_per_direction_gb_per_s()
        .or(g.pcie_per_direction_gb_per_s())
}

/// The bound of a kernel group and the (source, target) peaks that rescale it.
fn bound_of(
    row: &KernelRow,
    src: &Gpu,
    dst: &Gpu,
) -> (Bound, String, Option<f64>, Option<f64>, Option<String>) {
    let c = &row.class;
    if row.avg_ns < SHORT_KERNEL_NS as f64 && c.class != KernelClass::Communication {
        return (
            Bound::Launch,
            "launch latency".into(),
            None,
            None,
            Some(format!(
                "average {:.1} µs < 5 µs: launch overhead dominates, so faster peaks do not shorten it",
                row.avg_ns / 1e3
            )),
        );
    }
    match c.class {
        KernelClass::GemmTensorCore | KernelClass::GemmUnknown | KernelClass::Attention => {
            let (p, known) = tensor_precision(c.precision);
            let note = (!known).then(|| "precision not in the name: bf16 assumed".to_string());
            (Bound::Compute, format!("{} tensor TFLOP/s", p.as_str()), src.peak_tflops(p), dst.peak_tflops(p), note)
        }
        KernelClass::GemmSimtFp32 => (
            Bound::Compute,
            "fp32 CUDA-core TFLOP/s".into(),
            src.peak_tflops(Precision::Fp32),
            dst.peak_tflops(Precision::Fp32),
            dst.peak_tflops(Precision::Tf32).zip(dst.peak_tflops(Precision::Fp32)).map(|(tf, f)| {
                format!("fp32 on CUDA cores: with TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32) the target's peak is {tf} vs {f} TFLOP/s")
            }),
        ),
        KernelClass::Elementwise | KernelClass::Reduction | KernelClass::Copy => (
            Bound::Memory,
            "memory GB/s".into(),
            src.memory_bandwidth_gb_per_s.value,
            dst.memory_bandwidth_gb_per_s.value,
            None,
        ),
        KernelClass::Communication => (
            Bound::Interconnect,
            "GPU-to-GPU link GB/s per direction".into(),
            per_gpu_link(src),
            per_gpu_link(dst),
            Some(
                "kept as measured: NCCL kernel time includes waiting for the other ranks to arrive, which a faster \
                 link does not shorten, and the bytes moved are not in the trace (the links' per-direction figures are \
                 shown for reference)"
                    .into(),
            ),
        ),
        KernelClass::Other => (Bound::Unknown, "none".into(), None, None, Some("class unknown: kept as measured".into())),
    }
}

/// Rescale every kernel group of `k` from `src` to `dst`.
pub fn retarget(k: &Kernels, src: &Gpu, dst: &Gpu) -> Retarget {
    let mut rows = Vec::new();
    let mut totals: BTreeMap<Bound, (i64, i64)> = BTreeMap::new();
    for r in &k.rows {
        let (bound, basis, sp, tp, mut note) = bound_of(r, src, dst);
        let ratio = match (sp, tp) {
            _ if bound == Bound::Interconnect => 1.0,
            (Some(s), Some(t)) if s > 0.0 && t > 0.0 => s / t,
            (None, None) => 1.0,
            _ => {
                note = Some(format!(
                    "{} has no public {basis} figure: kept as measured",
                    if sp.is_none() { &src.id } else { &dst.id }
                ));
                1.0
            }
        };
        let est = (r.total_ns as f64 * ratio).round() as i64;
        let t = totals.entry(bound).or_default();
        t.0 += r.total_ns;
        t.1 += est;
        rows.push(KernelEstimate {
            name: r.name.clone(),
            class: r.class.class,
            instances: r.instances,
            measured_ns: r.total_ns,
            bound,
            basis,
            source_peak: sp,
            target_peak: tp,
            speedup: round(1.0 / ratio, 3),
            estimated_ns: est,
            note,
        });
    }
    let listed: i64 = k.rows.iter().map(|r| r.total_ns).sum();
    let rest = k.total_ns - listed;
    let beyond = k.rows_total.saturating_sub(k.rows.len());
    let mut est_total: i64 = rows.iter().map(|r| r.estimated_ns).sum();
    if rest > 0 {
        // Unlisted groups: kept as measured (their class split is not in the rows).
        est_total += rest;
        let t = totals.entry(Bound::Unknown).or_default();
        t.0 += rest;
        t.1 += rest;
    }
    Retarget {
        source_gpu: src.id.clone(),
        target_gpu: dst.id.clone(),
        kernels: rows,
        by_bound: totals
            .into_iter()
            .map(|(b, (m, e))| BoundTotal { bound: b, measured_ns: m, estimated_ns: e })
            .collect(),
        measured_kernel_ns: k.total_ns,
        estimated_kernel_ns: est_total,
        kernel_speedup: if est_total > 0 { round(k.total_ns as f64 / est_total as f64, 3) } else { 1.0 },
        groups_beyond_limit: beyond,
        assumptions: vec![
            "each kernel reaches the same fraction of the bounding peak on the target as it did on the source".into(),
            "peaks: dense datasheet figures from the GPU catalog (each with its source URL); memory-bound kernels scale with HBM bandwidth, compute-bound ones with the tensor (or FP32 vector) peak at their precision".into(),
            "kernels averaging < 5 µs are launch-bound and kept as measured; collectives scale with the per-direction NVLink (or PCIe) figure for the same GPU count".into(),
            "CPU time, idle gaps, memcpy and memset are not retargeted: the estimate is GPU kernel time".into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aisp_knowledge::gpus;
    use aisp_profile::summary::NameKey;
    use aisp_profile::{self as profile, Scope};

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("tests")
            .join("data")
            .join(name)
    }

    #[test]
    fn h200_fp32_matmuls_retargeted_to_b200_and_h100() {
        // h200_matmul_small: 20 fp32 SIMT GEMMs (53,242,485 ns) + relu + randn
        // (666,587 ns); 41 kernels, Σ 53,909,072 ns (fixtures README).
        let p = profile::open(&fixture("h200_matmul_small.sqlite")).unwrap();
        let s = p.resolve(&Scope::default()).unwrap();
        let k = profile::kernels::kernels(&p, &s, NameKey::Short, 100).unwrap();
        let h200 = gpus::by_id("h200").unwrap();
        let b200 = gpus::by_id("b200").unwrap();
        let r = retarget(&k, h200, b200);
        assert_eq!(r.measured_kernel_ns, 53_909_072);
        let gemm = &r.kernels[0];
        assert_eq!(gemm.class, KernelClass::GemmSimtFp32);
        assert_eq!(gemm.bound, Bound::Compute);
        assert_eq!(gemm.measured_ns, 53_242_485);
        // FP32 vector: H200 67 → B200 80 TFLOP/s.
        assert_eq!(
            gemm.estimated_ns,
            (53_242_485.0_f64 * 67.0 / 80.0).round() as i64
        );
        assert!(gemm.note.as_deref().unwrap().contains("TF32"));
        // The rest is memory-bound (elementwise relu, randn): 4,800 → 8,000 GB/s.
        let mem = r
            .by_bound
            .iter()
            .find(|b| b.bound == Bound::Memory)
            .unwrap();
        assert_eq!(mem.measured_ns, 666_587);
        assert!(
            (mem.estimated_ns as f64 - 666_587.0 * 0.6).abs() <= 2.0,
            "{}",
            mem.estimated_ns
        );
        assert_eq!(r.estimated_kernel_ns, gemm.estimated_ns + mem.estimated_ns);
        // To H100 SXM the GEMMs barely change (67 → 66.9) and memory work slows (4,800 → 3,350).
        let h = retarget(&k, h200, gpus::by_id("h100-sxm").unwrap());
        assert!(h.kernel_speedup < 1.0);
    }
}
