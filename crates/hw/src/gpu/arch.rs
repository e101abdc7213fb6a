//! What a compute capability offers: the architecture table compiled in from
//! `data/gpu/architectures.toml`, and what each precision and feature enables.

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const TABLE: &str = include_str!("../../../../data/gpu/architectures.toml");

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ArchEntry {
    /// `major.minor`, e.g. `9.0`.
    pub compute_capability: String,
    pub name: String,
    /// Products with this compute capability.
    pub examples: String,
    pub tensor_core_generation: u32,
    /// Input precisions the tensor cores take (FP8 = E4M3 and E5M2; FP6/FP4 include the MX and NV block-scaled formats).
    pub tensor_precisions: Vec<String>,
    /// cp.async: asynchronous global→shared copies (multistage pipelines).
    pub async_copy: bool,
    /// Tensor Memory Accelerator: bulk tensor copies (cp.async.bulk.tensor).
    pub tma: bool,
    /// Thread block clusters.
    pub clusters: bool,
    /// Distributed shared memory across a cluster.
    pub distributed_shared_memory: bool,
    /// Warpgroup MMA (sm_90a).
    pub wgmma: bool,
    /// Fifth-generation tensor core MMA with tensor memory (sm_100a family).
    pub tcgen05: bool,
    pub shared_memory_per_sm_kib: Option<u32>,
    pub shared_memory_per_block_kib: Option<u32>,
    pub max_threads_per_sm: Option<u32>,
    pub max_blocks_per_sm: Option<u32>,
    pub registers_per_sm: Option<u32>,
    /// Where the entries come from.
    pub sources: String,
}

#[derive(Debug, Deserialize)]
struct Table {
    arch: Vec<ArchEntry>,
}

/// The whole table.
pub fn table() -> &'static [ArchEntry] {
    static T: OnceLock<Vec<ArchEntry>> = OnceLock::new();
    T.get_or_init(|| match toml::from_str::<Table>(TABLE) {
        Ok(t) => t.arch,
        Err(e) => {
            // Covered by a unit test; never reached in a released build.
            tracing::error!("architectures.toml does not parse: {e}");
            Vec::new()
        }
    })
}

/// Normalise `9`, `9.0`, `sm_90`, `sm90a`, `90` to `9.0`.
pub fn normalize_cc(text: &str) -> Option<String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t
        .strip_prefix("sm_")
        .or_else(|| t.strip_prefix("sm"))
        .or_else(|| t.strip_prefix("compute_"))
        .unwrap_or(&t);
    let t = t.trim_end_matches(['a', 'f']);
    if let Some((a, b)) = t.split_once('.') {
        let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
        return Some(format!("{a}.{b}"));
    }
    let n: u32 = t.parse().ok()?;
    match n {
        0..=20 => Some(format!("{n}.0")),
        _ => Some(format!("{}.{}", n / 10, n % 10)),
    }
}

/// The table entry for a compute capability.
pub fn lookup(cc: &str) -> Option<&'static ArchEntry> {
    let cc = normalize_cc(cc)?;
    table().iter().find(|e| e.compute_capability == cc)
}

/// The architecture name for a compute capability, also for ones not in the table.
pub fn name_for(cc: &str) -> Option<String> {
    if let Some(e) = lookup(cc) {
        return Some(e.name.clone());
    }
    let cc = normalize_cc(cc)?;
    let major: u32 = cc.split('.').next()?.parse().ok()?;
    Some(
        match major {
            3 => "Kepler",
            5 => "Maxwell",
            6 => "Pascal",
            7 => "Volta/Turing",
            8 => "Ampere/Ada",
            9 => "Hopper",
            10 | 11 => "Blackwell",
            12 => "Blackwell (GeForce/workstation)",
            _ => return None,
        }
        .to_string(),
    )
}

/// What a tensor-core precision enables.
pub fn precision_enables(p: &str) -> &'static str {
    match p {
        "FP64" => "FP64 matrix math on tensor cores (HPC solvers, double-precision GEMM).",
        "TF32" => {
            "FP32 matmuls and convolutions on tensor cores with a 10-bit mantissa: \
                   torch.set_float32_matmul_precision('high') or allow_tf32 makes FP32 training several times faster."
        }
        "BF16" => {
            "Mixed-precision training without loss scaling (FP32's range with 8 mantissa bits)."
        }
        "FP16" => {
            "Mixed-precision training (with loss scaling) and inference at full tensor-core rate."
        }
        "FP8" => {
            "FP8 (E4M3/E5M2) GEMMs at twice the BF16 rate: Transformer Engine FP8 training, FP8 inference \
                  in vLLM/TensorRT-LLM."
        }
        "FP6" => "6-bit block-scaled (MXFP6) weights and activations for inference.",
        "FP4" => {
            "4-bit block-scaled NVFP4/MXFP4 GEMMs at twice the FP8 rate: quantized LLM inference."
        }
        "INT8" => "INT8 GEMMs for quantized inference (SmoothQuant, W8A8).",
        "INT4" => {
            "INT4 tensor-core GEMMs (rarely used by frameworks; most INT4 LLM kernels dequantize to FP16/BF16)."
        }
        _ => "",
    }
}

/// What each architectural feature enables, for the capability report.
pub fn feature_enables(feature: &str) -> &'static str {
    match feature {
        "async_copy" => {
            "cp.async copies global memory into shared memory without staging in registers, so \
                         multistage GEMM and attention kernels overlap loads with math."
        }
        "tma" => {
            "The Tensor Memory Accelerator moves whole tensor tiles between global and shared memory in hardware \
                  (FlashAttention-3, CUTLASS 3 and cuBLAS Hopper/Blackwell kernels depend on it)."
        }
        "clusters" => {
            "Thread block clusters are scheduled together on neighbouring SMs, enabling TMA multicast (one \
                       load feeds several SMs) and cluster-wide synchronisation."
        }
        "distributed_shared_memory" => {
            "Blocks in a cluster read and write each other's shared memory, for \
                                        split-K reductions and cooperative attention without a round trip to L2."
        }
        "wgmma" => {
            "Warpgroup asynchronous MMA: the instruction that reaches Hopper's peak tensor throughput; kernels \
                    must be built for sm_90a."
        }
        "tcgen05" => {
            "Fifth-generation tensor core MMA with tensor memory (TMEM): Blackwell's peak path; Hopper wgmma \
                      kernels do not run here, so libraries need sm_100a builds."
        }
        "cluster_launch" => {
            "The driver reports cluster launch support (cudaLaunchKernelEx with a cluster dimension)."
        }
        "tensor_map_access" => "The driver reports TMA descriptor (cuTensorMapEncode*) support.",
        "cooperative_launch" => {
            "Grid-wide synchronisation (cooperative groups) for persistent kernels."
        }
        "memory_pools" => {
            "Stream-ordered allocation (cudaMallocAsync), which frameworks use to cut allocation cost."
        }
        "gpu_direct_rdma" => {
            "NICs can read and write this GPU's memory directly (needs nvidia_peermem or DMA-BUF)."
        }
        "multicast" => {
            "NVLink multicast objects: NVLS in-switch reductions for NCCL on NVSwitch systems."
        }
        "dma_buf" => {
            "DMA-BUF export of GPU memory: GPUDirect RDMA without the nvidia_peermem module."
        }
        "pageable_memory_access" => {
            "Kernels can touch ordinary (pageable) host memory: HMM, or Grace's coherent \
                                     NVLink-C2C on GH200/GB200."
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_is_consistent() {
        let t = table();
        assert_eq!(t.len(), 12);
        let ccs: Vec<&str> = t.iter().map(|e| e.compute_capability.as_str()).collect();
        let mut sorted = ccs.clone();
        sorted.dedup();
        assert_eq!(ccs.len(), sorted.len(), "duplicate compute capabilities");
        for e in t {
            assert!(!e.sources.is_empty());
            // TMA, clusters and DSMEM come together (sm_90 and later).
            assert_eq!(e.tma, e.clusters, "{}", e.compute_capability);
            assert_eq!(
                e.clusters, e.distributed_shared_memory,
                "{}",
                e.compute_capability
            );
            assert!(!(e.wgmma && e.tcgen05));
            if let (Some(sm), Some(b)) = (e.shared_memory_per_sm_kib, e.shared_memory_per_block_kib)
            {
                assert!(b <= sm);
            }
            for p in &e.tensor_precisions {
                assert!(!precision_enables(p).is_empty(), "no text for {p}");
            }
        }
    }

    #[test]
    fn compute_capabilities_normalise_and_resolve() {
        assert_eq!(normalize_cc("sm_90a").as_deref(), Some("9.0"));
        assert_eq!(normalize_cc("90").as_deref(), Some("9.0"));
        assert_eq!(normalize_cc("100").as_deref(), Some("10.0"));
        assert_eq!(normalize_cc("8.9").as_deref(), Some("8.9"));
        assert_eq!(normalize_cc("12").as_deref(), Some("12.0"));
        assert_eq!(normalize_cc("x"), None);
        let h = lookup("9.0").unwrap();
        assert_eq!((h.name.as_str(), h.tensor_core_generation), ("Hopper", 4));
        assert_eq!(
            (h.shared_memory_per_sm_kib, h.shared_memory_per_block_kib),
            (Some(228), Some(227))
        );
        assert!(h.wgmma && h.tma && !h.tcgen05);
        let b = lookup("sm_100a").unwrap();
        assert!(b.tcgen05 && !b.wgmma);
        assert!(b.tensor_precisions.contains(&"FP4".to_string()));
        assert!(
            !lookup("8.0")
                .unwrap()
                .tensor_precisions
                .contains(&"FP8".to_string())
        );
        assert!(
            lookup("8.9")
                .unwrap()
                .tensor_precisions
                .contains(&"FP8".to_string())
        );
        assert_eq!(name_for("6.0").as_deref(), Some("Pascal"));
        assert_eq!(
            name_for("12.0").as_deref(),
            Some("Blackwell (GeForce/workstation)")
        );
    }
}
