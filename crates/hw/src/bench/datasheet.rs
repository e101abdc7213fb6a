//! Vendor datasheet peaks, for `pct_of_datasheet`, read from the GPU catalog
//! (`aisp_knowledge::gpus`, every number with its source).
//!
//! The catalog's figures are dense tensor-core peaks (no 2:4 sparsity), the
//! non-tensor FP32 rate, decimal GB/s memory bandwidth and total
//! bidirectional PCIe bandwidth; host-to-device copies are compared with half
//! of the latter (one direction).

use aisp_knowledge::dtype::Precision;
use aisp_knowledge::gpus;

use super::lesson::RoofKind;

/// Dense (no sparsity) datasheet peaks of one GPU model.
#[derive(Debug, Clone, PartialEq)]
pub struct Datasheet {
    /// Catalog id (e.g. `h100-sxm`).
    pub gpu: String,
    pub memory_gb_per_s: Option<f64>,
    pub fp64_tflop_per_s: Option<f64>,
    pub fp32_tflop_per_s: Option<f64>,
    pub tf32_tflop_per_s: Option<f64>,
    pub bf16_tflop_per_s: Option<f64>,
    pub fp16_tflop_per_s: Option<f64>,
    pub fp8_tflop_per_s: Option<f64>,
    /// Per direction.
    pub pcie_gb_per_s: Option<f64>,
    /// Where the figures come from (the catalog entry's memory-bandwidth source).
    pub source: String,
}

impl Datasheet {
    pub fn peak(&self, roof: RoofKind) -> Option<f64> {
        match roof {
            RoofKind::None => None,
            RoofKind::Memory => self.memory_gb_per_s,
            RoofKind::Fp32 => self.fp32_tflop_per_s,
            RoofKind::Tf32 => self.tf32_tflop_per_s,
            RoofKind::Bf16 => self.bf16_tflop_per_s,
            RoofKind::Fp16 => self.fp16_tflop_per_s,
            RoofKind::Fp8 => self.fp8_tflop_per_s,
            RoofKind::PcieH2d => self.pcie_gb_per_s,
        }
    }
}

/// Said wherever `pct_of_datasheet` is null because the catalog does not
/// know the GPU.
pub const MISSING_NOTE: &str = "pct_of_datasheet is null: the GPU catalog has no entry matching this device name; \
pct_of_roof compares with roofs measured on this GPU.";

/// The datasheet of the GPU named `device_name` (as CUDA/NVML report it).
pub fn lookup(device_name: &str) -> Option<Datasheet> {
    let g = gpus::match_device_name(device_name)?;
    Some(Datasheet {
        gpu: g.id.clone(),
        memory_gb_per_s: g.memory_bandwidth_gb_per_s.value,
        fp64_tflop_per_s: g.peak_tflops(Precision::Fp64),
        fp32_tflop_per_s: g.peak_tflops(Precision::Fp32),
        tf32_tflop_per_s: g.peak_tflops(Precision::Tf32),
        bf16_tflop_per_s: g.peak_tflops(Precision::Bf16),
        fp16_tflop_per_s: g.peak_tflops(Precision::Fp16),
        fp8_tflop_per_s: g.peak_tflops(Precision::Fp8),
        pcie_gb_per_s: g.pcie_per_direction_gb_per_s(),
        source: format!(
            "GPU catalog entry {} ({})",
            g.id,
            g.memory_bandwidth_gb_per_s
                .source_url
                .as_deref()
                .unwrap_or("no source recorded")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_find_their_datasheet() {
        // The names CUDA and NVML report on the lent machines.
        let h100 = lookup("NVIDIA H100 80GB HBM3").expect("H100 SXM in the catalog");
        assert_eq!(h100.gpu, "h100-sxm");
        assert_eq!(h100.peak(RoofKind::Bf16), Some(989.4));
        assert_eq!(h100.peak(RoofKind::Memory), Some(3350.0));
        let h200 = lookup("NVIDIA H200").expect("H200 in the catalog");
        assert_eq!(h200.gpu, "h200");
        assert_eq!(h200.peak(RoofKind::Memory), Some(4800.0));
        assert!(h200.peak(RoofKind::None).is_none());
        assert!(lookup("Some Unknown Accelerator 9000").is_none());
    }
}
