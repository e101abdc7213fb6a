//! `aisp_system_capabilities`: what a GPU can do, from its compute capability
//! (the architecture table) and the CUDA driver's device attributes (exact
//! limits of this device), with what each capability enables.

use schemars::JsonSchema;
use serde::Serialize;

use super::arch::{self, ArchEntry};
use super::cuda::CudaAttributes;

/// Precisions reported for every device, supported or not.
const PRECISIONS: &[&str] = &[
    "FP64", "TF32", "BF16", "FP16", "FP8", "FP6", "FP4", "INT8", "INT4",
];

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DeviceCapabilities {
    /// NVML index; null when looked up by compute capability alone.
    pub index: Option<u32>,
    pub name: Option<String>,
    pub compute_capability: String,
    pub architecture: Option<String>,
    /// Products with this compute capability.
    pub examples: Option<String>,
    /// False when aisp's table does not know this compute capability (only live attributes are reported).
    pub in_table: bool,
    pub tensor_core_generation: Option<u32>,
    pub precisions: Vec<PrecisionSupport>,
    pub features: Vec<FeatureSupport>,
    pub limits: Limits,
    /// The arch to build for so that arch-specific instructions (wgmma, tcgen05) are usable, e.g. `9.0a` for TORCH_CUDA_ARCH_LIST.
    pub build_arch: String,
    /// nvcc flag for that arch.
    pub nvcc_gencode: String,
    pub sources: Option<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PrecisionSupport {
    pub precision: String,
    /// Tensor cores take this input precision.
    pub supported: bool,
    /// What it enables (empty when unsupported).
    pub enables: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FeatureSupport {
    pub feature: String,
    /// Null when neither the table nor the driver says.
    pub supported: Option<bool>,
    /// `device attribute` (asked the driver) or `architecture table`.
    pub source: String,
    pub enables: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema, Default)]
pub struct Limits {
    pub sm_count: Option<u32>,
    pub warp_size: Option<u32>,
    pub max_threads_per_block: Option<u32>,
    pub max_threads_per_sm: Option<u32>,
    pub max_blocks_per_sm: Option<u32>,
    /// 32-bit registers per SM.
    pub registers_per_sm: Option<u32>,
    pub registers_per_block: Option<u32>,
    /// Registers one thread may use (255 on every architecture since Kepler).
    pub max_registers_per_thread: u32,
    pub shared_memory_per_sm_bytes: Option<u64>,
    /// Without opting in (48 KiB).
    pub shared_memory_per_block_bytes: Option<u64>,
    /// With cudaFuncAttributeMaxDynamicSharedMemorySize.
    pub shared_memory_per_block_optin_bytes: Option<u64>,
    pub l2_cache_bytes: Option<u64>,
    pub l2_persisting_max_bytes: Option<u64>,
    pub memory_bus_width_bits: Option<u32>,
    /// Copy engines usable concurrently with kernels.
    pub async_engine_count: Option<u32>,
    /// `device attributes`, `architecture table` or both.
    pub source: String,
}

fn kib(v: Option<u32>) -> Option<u64> {
    v.map(|k| k as u64 * 1024)
}

/// Build the capability report from a compute capability, the table and (on a live GPU) the attributes.
pub fn describe(
    cc: &str,
    index: Option<u32>,
    name: Option<String>,
    attrs: Option<&CudaAttributes>,
) -> DeviceCapabilities {
    let mut notes = Vec::new();
    let norm = arch::normalize_cc(cc).unwrap_or_else(|| cc.to_string());
    let entry: Option<&ArchEntry> = arch::lookup(&norm);
    if entry.is_none() {
        notes.push(format!(
            "compute capability {norm} is not in aisp's architecture table: precisions and instruction families are \
             unknown; limits come from the driver only"
        ));
    }
    let precisions = PRECISIONS
        .iter()
        .map(|p| {
            let supported = entry.is_some_and(|e| e.tensor_precisions.iter().any(|x| x == p));
            PrecisionSupport {
                precision: p.to_string(),
                supported,
                enables: if supported {
                    arch::precision_enables(p).to_string()
                } else {
                    String::new()
                },
            }
        })
        .collect();

    let table_feature = |f: &str| -> Option<bool> {
        let e = entry?;
        Some(match f {
            "async_copy" => e.async_copy,
            "tma" => e.tma,
            "clusters" => e.clusters,
            "distributed_shared_memory" => e.distributed_shared_memory,
            "wgmma" => e.wgmma,
            "tcgen05" => e.tcgen05,
            _ => return None,
        })
    };
    let mut features = Vec::new();
    for f in [
        "async_copy",
        "tma",
        "clusters",
        "distributed_shared_memory",
        "wgmma",
        "tcgen05",
    ] {
        features.push(FeatureSupport {
            feature: f.to_string(),
            supported: table_feature(f),
            source: "architecture table".to_string(),
            enables: arch::feature_enables(f).to_string(),
        });
    }
    let attr_features: [(&str, Option<bool>); 9] = match attrs {
        Some(a) => [
            ("cluster_launch", a.cluster_launch),
            ("tensor_map_access", a.tensor_map_access),
            ("cooperative_launch", a.cooperative_launch),
            ("memory_pools", a.memory_pools),
            ("gpu_direct_rdma", a.gpu_direct_rdma),
            ("multicast", a.multicast),
            ("dma_buf", a.dma_buf),
            ("pageable_memory_access", a.pageable_memory_access),
            ("host_native_atomics", a.host_native_atomics),
        ],
        None => [
            ("cluster_launch", None),
            ("tensor_map_access", None),
            ("cooperative_launch", None),
            ("memory_pools", None),
            ("gpu_direct_rdma", None),
            ("multicast", None),
            ("dma_buf", None),
            ("pageable_memory_access", None),
            ("host_native_atomics", None),
        ],
    };
    if attrs.is_some() {
        for (f, v) in attr_features {
            features.push(FeatureSupport {
                feature: f.to_string(),
                supported: v,
                source: "device attribute".to_string(),
                enables: arch::feature_enables(f).to_string(),
            });
        }
    }

    let t = entry;
    let limits = match attrs {
        Some(a) => Limits {
            sm_count: a.sm_count,
            warp_size: a.warp_size,
            max_threads_per_block: a.max_threads_per_block,
            max_threads_per_sm: a.max_threads_per_sm,
            max_blocks_per_sm: a.max_blocks_per_sm,
            registers_per_sm: a.registers_per_sm,
            registers_per_block: a.registers_per_block,
            max_registers_per_thread: 255,
            shared_memory_per_sm_bytes: a.shared_memory_per_sm_bytes,
            shared_memory_per_block_bytes: a.shared_memory_per_block_bytes,
            shared_memory_per_block_optin_bytes: a.shared_memory_per_block_optin_bytes,
            l2_cache_bytes: a.l2_cache_bytes,
            l2_persisting_max_bytes: a.l2_persisting_max_bytes,
            memory_bus_width_bits: a.memory_bus_width_bits,
            async_engine_count: a.async_engine_count,
            source: "device attributes".to_string(),
        },
        None => Limits {
            sm_count: None,
            warp_size: Some(32),
            max_threads_per_block: Some(1024),
            max_threads_per_sm: t.and_then(|e| e.max_threads_per_sm),
            max_blocks_per_sm: t.and_then(|e| e.max_blocks_per_sm),
            registers_per_sm: t.and_then(|e| e.registers_per_sm),
            registers_per_block: t.map(|_| 65536),
            max_registers_per_thread: 255,
            shared_memory_per_sm_bytes: kib(t.and_then(|e| e.shared_memory_per_sm_kib)),
            shared_memory_per_block_bytes: t.map(|_| 48 * 1024),
            shared_memory_per_block_optin_bytes: kib(t.and_then(|e| e.shared_memory_per_block_kib)),
            l2_cache_bytes: None,
            l2_persisting_max_bytes: None,
            memory_bus_width_bits: None,
            async_engine_count: None,
            source: "architecture table (no live device: SM count and L2 size are per product)"
                .to_string(),
        },
    };
    if let (Some(a), Some(e)) = (attrs, t)
        && let (Some(live), Some(table)) = (
            a.shared_memory_per_block_optin_bytes,
            kib(e.shared_memory_per_block_kib),
        )
        && live != table
    {
        notes.push(format!(
            "the driver reports {live} bytes of opt-in shared memory per block; aisp's table says {table}"
        ));
    }
    let suffix = if entry.is_some_and(|e| e.wgmma || e.tcgen05) || norm == "12.0" || norm == "12.1"
    {
        "a"
    } else {
        ""
    };
    let digits = norm.replace('.', "");
    DeviceCapabilities {
        index,
        name,
        architecture: arch::name_for(&norm),
        examples: entry.map(|e| e.examples.clone()),
        in_table: entry.is_some(),
        tensor_core_generation: entry.map(|e| e.tensor_core_generation),
        precisions,
        features,
        limits,
        build_arch: format!("{norm}{suffix}"),
        nvcc_gencode: format!("-gencode arch=compute_{digits}{suffix},code=sm_{digits}{suffix}"),
        sources: entry.map(|e| e.sources.clone()),
        compute_capability: norm,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hopper_from_the_table_alone() {
        let c = describe("9.0", None, None, None);
        assert_eq!(c.architecture.as_deref(), Some("Hopper"));
        assert_eq!(c.tensor_core_generation, Some(4));
        let supported: Vec<&str> = c
            .precisions
            .iter()
            .filter(|p| p.supported)
            .map(|p| p.precision.as_str())
            .collect();
        assert_eq!(
            supported,
            vec!["FP64", "TF32", "BF16", "FP16", "FP8", "INT8"]
        );
        let f = |n: &str| {
            c.features
                .iter()
                .find(|f| f.feature == n)
                .unwrap()
                .supported
        };
        assert_eq!(f("tma"), Some(true));
        assert_eq!(f("wgmma"), Some(true));
        assert_eq!(f("tcgen05"), Some(false));
        assert_eq!(
            c.limits.shared_memory_per_block_optin_bytes,
            Some(227 * 1024)
        );
        assert_eq!(c.limits.shared_memory_per_sm_bytes, Some(228 * 1024));
        assert_eq!(c.limits.max_threads_per_sm, Some(2048));
        assert_eq!(c.build_arch, "9.0a");
        assert_eq!(c.nvcc_gencode, "-gencode arch=compute_90a,code=sm_90a");
        assert!(c.limits.source.starts_with("architecture table"));
    }

    #[test]
    fn live_attributes_override_the_table() {
        // The attributes an H100 SXM5 reports (deviceQuery): 132 SMs, 50 MiB L2, 227 KiB opt-in.
        let a = CudaAttributes {
            cuda_ordinal: 0,
            pci_bus_id: "0000:18:00.0".into(),
            sm_count: Some(132),
            compute_capability: Some("9.0".into()),
            warp_size: Some(32),
            max_threads_per_block: Some(1024),
            max_threads_per_sm: Some(2048),
            max_blocks_per_sm: Some(32),
            registers_per_sm: Some(65536),
            registers_per_block: Some(65536),
            shared_memory_per_block_bytes: Some(49152),
            shared_memory_per_block_optin_bytes: Some(232448),
            shared_memory_per_sm_bytes: Some(233472),
            l2_cache_bytes: Some(52_428_800),
            cluster_launch: Some(true),
            tensor_map_access: Some(true),
            ..Default::default()
        };
        let c = describe(
            "9.0",
            Some(0),
            Some("NVIDIA H100 80GB HBM3".into()),
            Some(&a),
        );
        assert_eq!(c.limits.sm_count, Some(132));
        assert_eq!(c.limits.l2_cache_bytes, Some(52_428_800));
        assert_eq!(c.limits.source, "device attributes");
        assert!(c.notes.is_empty(), "{:?}", c.notes);
        let cl = c
            .features
            .iter()
            .find(|f| f.feature == "cluster_launch")
            .unwrap();
        assert_eq!(
            (cl.supported, cl.source.as_str()),
            (Some(true), "device attribute")
        );
    }

    #[test]
    fn unknown_and_blackwell_capabilities() {
        let b = describe("10.0", None, None, None);
        assert_eq!(b.build_arch, "10.0a");
        assert!(
            b.precisions
                .iter()
                .any(|p| p.precision == "FP4" && p.supported)
        );
        let u = describe("13.7", None, None, None);
        assert!(!u.in_table);
        assert!(u.precisions.iter().all(|p| !p.supported));
        assert_eq!(u.notes.len(), 1);
        let t = describe("7.5", None, None, None);
        assert_eq!(t.build_arch, "7.5");
        assert!(
            !t.precisions
                .iter()
                .any(|p| p.precision == "BF16" && p.supported)
        );
    }
}
