//! Vendor datasheet peaks, for `pct_of_datasheet`.
//!
//! The GPU catalog (with a source for every number) is being written in
//! `src/knowledge/` on another branch. Until it is merged, [`lookup`] finds
//! nothing and every result carries `pct_of_datasheet: null` with
//! [`MISSING_NOTE`]; measured roofs (`pct_of_roof`) do not depend on it.

use super::lesson::RoofKind;

/// Dense (no sparsity) datasheet peaks of one GPU model.
#[derive(Debug, Clone, PartialEq)]
pub struct Datasheet {
    pub gpu: String,
    pub memory_gb_per_s: Option<f64>,
    pub fp32_tflop_per_s: Option<f64>,
    pub tf32_tflop_per_s: Option<f64>,
    pub bf16_tflop_per_s: Option<f64>,
    pub fp16_tflop_per_s: Option<f64>,
    pub fp8_tflop_per_s: Option<f64>,
    /// Per direction.
    pub pcie_gb_per_s: Option<f64>,
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

/// Said wherever `pct_of_datasheet` is null because no catalog entry exists.
pub const MISSING_NOTE: &str = "pct_of_datasheet is null: this build has no datasheet entry for this GPU \
(the GPU catalog is not merged yet); pct_of_roof compares with roofs measured on this GPU.";

/// The datasheet of the GPU named `device_name` (as CUDA/NVML report it).
pub fn lookup(_device_name: &str) -> Option<Datasheet> {
    None
}
