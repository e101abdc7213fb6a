//! Numeric formats: how many bytes a value takes and which tensor-core rate
//! a computation in that format runs at.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The storage format of weights (and, for training, activations and gradients).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Fp32,
    Bf16,
    Fp16,
    Fp8,
    Int8,
    Int4,
}

/// A hardware arithmetic rate in the GPU catalog (`tflops_dense.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp64,
    Fp32,
    Tf32,
    Bf16,
    Fp16,
    Fp8,
    Int8,
    Fp4,
}

impl Dtype {
    pub const ALL: [Dtype; 6] = [
        Dtype::Fp32,
        Dtype::Bf16,
        Dtype::Fp16,
        Dtype::Fp8,
        Dtype::Int8,
        Dtype::Int4,
    ];

    /// Bytes per element (int4 packs two per byte).
    pub fn bytes(self) -> f64 {
        match self {
            Dtype::Fp32 => 4.0,
            Dtype::Bf16 | Dtype::Fp16 => 2.0,
            Dtype::Fp8 | Dtype::Int8 => 1.0,
            Dtype::Int4 => 0.5,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::Fp32 => "fp32",
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Fp8 => "fp8",
            Dtype::Int8 => "int8",
            Dtype::Int4 => "int4",
        }
    }

    /// The tensor-core rate matrix multiplies with weights in this format run
    /// at, and the assumption that choice makes.
    pub fn compute_precision(self) -> (Precision, &'static str) {
        match self {
            Dtype::Fp32 => (
                Precision::Fp32,
                "fp32 matmuls at the FP32 vector rate (TF32 not assumed; enable it with torch.backends.cuda.matmul.allow_tf32)",
            ),
            Dtype::Bf16 => (
                Precision::Bf16,
                "bf16 matmuls at the dense BF16 tensor rate",
            ),
            Dtype::Fp16 => (
                Precision::Fp16,
                "fp16 matmuls at the dense FP16 tensor rate",
            ),
            Dtype::Fp8 => (
                Precision::Fp8,
                "fp8 weights and activations (W8A8) at the dense FP8 tensor rate",
            ),
            Dtype::Int8 => (
                Precision::Int8,
                "int8 weights and activations (W8A8, SmoothQuant-style) at the dense INT8 tensor rate",
            ),
            Dtype::Int4 => (
                Precision::Fp16,
                "int4 weight-only quantization (W4A16, AWQ/GPTQ-style): weights are dequantized and multiplied at the FP16 rate",
            ),
        }
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Precision {
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp64 => "fp64",
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
            Precision::Fp8 => "fp8",
            Precision::Int8 => "int8",
            Precision::Fp4 => "fp4",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_per_element_follow_the_format_width() {
        let bytes: Vec<f64> = Dtype::ALL.iter().map(|d| d.bytes()).collect();
        assert_eq!(bytes, vec![4.0, 2.0, 2.0, 1.0, 1.0, 0.5]);
        assert_eq!(serde_json::to_value(Dtype::Bf16).unwrap(), "bf16");
        let d: Dtype = serde_json::from_value(serde_json::json!("int4")).unwrap();
        assert_eq!(d, Dtype::Int4);
        assert_eq!(Dtype::Int4.compute_precision().0, Precision::Fp16);
    }
}
