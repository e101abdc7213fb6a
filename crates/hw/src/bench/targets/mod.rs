//! The lessons: every target with its variants, and the code that runs them.
//!
//! The catalog ([`ALL`]) is plain data and needs no GPU
//! (`aisp_benchmark_targets` lists it). [`make`] builds a target's runner.

mod compute;
pub(crate) mod gemm;
mod launch;
pub(crate) mod memory;

use super::lesson::{Lesson, Metric, Needs, Role, RoofKind, TargetSpec, VariantSpec};

const fn v(name: &'static str, role: Role, roof: RoofKind, what: &'static str) -> VariantSpec {
    VariantSpec {
        name,
        role,
        what,
        roof,
    }
}

use Role::{Baseline as B, Optimized as O};

pub const MEMORY_COALESCING: TargetSpec = TargetSpec {
    id: "memory_coalescing",
    title: "Memory coalescing",
    lesson: "Neighbouring threads should touch neighbouring addresses: a strided warp fetches a 32-byte sector per 4-byte element and wastes most of the bandwidth.",
    chapter: "ch07 (copy_uncoalesced)",
    metric: Metric::GbPerS,
    variants: &[
        v(
            "strided_copy",
            B,
            RoofKind::Memory,
            "Copy where consecutive threads are n/32 elements apart (32 sectors per warp access).",
        ),
        v(
            "coalesced_copy",
            O,
            RoofKind::Memory,
            "The same copy with consecutive threads on consecutive elements (one 128-byte line per warp access).",
        ),
    ],
    needs: Needs::ANY,
    informational: None,
    when_no_win: "A strided copy can only tie when the data fits in L2, which the problem sizes here exceed.",
};

pub const VECTORIZED_LOADS: TargetSpec = TargetSpec {
    id: "vectorized_loads",
    title: "Vectorized 16-byte loads",
    lesson: "16-byte (float4) accesses move the same bytes with a quarter of the load/store instructions, and unrolling keeps more of them in flight per thread.",
    chapter: "ch07 (copy_scalar, memory_access), ch08 (hbm_cuda)",
    metric: Metric::GbPerS,
    variants: &[
        v(
            "scalar_copy",
            B,
            RoofKind::Memory,
            "Coalesced copy, one 4-byte float per thread (the grid covers the buffer).",
        ),
        v(
            "vec4_copy",
            O,
            RoofKind::Memory,
            "Copy of float4 (16 bytes per access), one per thread.",
        ),
        v(
            "vec4_unroll4_copy",
            O,
            RoofKind::Memory,
            "float4 copy with four independent loads in flight per thread.",
        ),
        v(
            "vec4_streaming_copy",
            O,
            RoofKind::Memory,
            "As vec4_unroll4_copy with evict-first cache hints (__ldcs/__stcs).",
        ),
    ],
    needs: Needs::ANY,
    informational: None,
    when_no_win: "On GPUs with deep memory queues (Hopper, Blackwell) a coalesced 4-byte copy with enough warps already nearly saturates HBM; wider accesses then save instructions, not bandwidth, and win only in kernels that also compute or run few threads.",
};

pub const TRANSPOSE: TargetSpec = TargetSpec {
    id: "transpose_bank_conflicts",
    title: "Shared-memory transpose and bank conflicts",
    lesson: "Stage tiles in shared memory so both reads and writes are coalesced, and pad each tile row by one word so column accesses spread over all 32 banks.",
    chapter: "ch07 (transpose), ch06 (bank_conflicts)",
    metric: Metric::GbPerS,
    variants: &[
        v(
            "naive",
            B,
            RoofKind::Memory,
            "Direct transpose: coalesced reads, writes strided by a whole row.",
        ),
        v(
            "smem_tiled",
            O,
            RoofKind::Memory,
            "32x32 tiles through shared memory; reading a tile column is a 32-way bank conflict.",
        ),
        v(
            "smem_tiled_padded",
            O,
            RoofKind::Memory,
            "The same tiles with one padding column: conflict-free.",
        ),
    ],
    needs: Needs::ANY,
    informational: None,
    when_no_win: "Large L1/L2 caches can absorb part of the strided writes of the naive version on some GPUs.",
};

pub const WARP_DIVERGENCE: TargetSpec = TargetSpec {
    id: "warp_divergence",
    title: "Warp divergence",
    lesson: "When lanes of a warp take different branches the warp runs both paths; make the branch select data (coefficients) rather than code.",
    chapter: "ch06 (warp_divergence_ilp), ch08 (threshold)",
    metric: Metric::TflopPerS,
    variants: &[
        v(
            "divergent_branch",
            B,
            RoofKind::Fp32,
            "A data-dependent branch into one of two FMA loops; random signs make every warp run both.",
        ),
        v(
            "predicated_select",
            O,
            RoofKind::Fp32,
            "The sign picks the loop's coefficients; one loop, identical results.",
        ),
    ],
    needs: Needs::ANY,
    informational: None,
    when_no_win: "If the compiler turns the branch into predication itself, both versions run the same instructions.",
};

pub const ILP: TargetSpec = TargetSpec {
    id: "ilp_unrolling",
    title: "Instruction-level parallelism and unrolling",
    lesson: "With few warps per SM, a single dependent chain leaves the FMA pipes idle for its latency; interleaving independent chains per thread fills them.",
    chapter: "ch06 (gemm_ilp, attention_ilp), ch08 (loop_unrolling)",
    metric: Metric::TflopPerS,
    variants: &[
        v(
            "one_chain",
            B,
            RoofKind::Fp32,
            "Each thread runs one chain of dependent FMAs (4 warps per SM).",
        ),
        v(
            "four_chains",
            O,
            RoofKind::Fp32,
            "Each thread interleaves four independent chains over the same elements (4 warps per SM).",
        ),
    ],
    needs: Needs::ANY,
    informational: None,
    when_no_win: "With many warps per SM the scheduler hides FMA latency across warps, and per-thread ILP adds nothing.",
};

pub const OCCUPANCY: TargetSpec = TargetSpec {
    id: "occupancy_launch_bounds",
    title: "Occupancy versus registers (launch bounds)",
    lesson: "__launch_bounds__ caps registers per thread so more warps fit on an SM; it pays when latency hiding comes from warps and the capped build does not spill.",
    chapter: "ch06 (launch_bounds), ch08 (occupancy_tuning)",
    metric: Metric::GbPerS,
    variants: &[
        v(
            "launch_bounds_256x1",
            B,
            RoofKind::Memory,
            "Compiled with __launch_bounds__(256, 1): the compiler may use up to 255 registers.",
        ),
        v(
            "launch_bounds_256x4",
            O,
            RoofKind::Memory,
            "The same body under __launch_bounds__(256, 4): at most 64 registers, four blocks per SM.",
        ),
    ],
    needs: Needs::ANY,
    informational: Some(
        "Whether more occupancy wins depends on the GPU and compiler: this kernel keeps 16 loads in flight per thread, so the register-rich build hides latency with ILP and can tie.",
    ),
    when_no_win: "The register-rich build keeps more loads in flight per thread, which hides memory latency as well as extra warps do; registers, spills and occupancy of both builds are in details.",
};

pub const KERNEL_FUSION: TargetSpec = TargetSpec {
    id: "kernel_fusion",
    title: "Kernel fusion",
    lesson: "Three elementwise kernels each read and write device memory; fused into one, intermediates stay in registers and the bytes moved fall from 28 to 8 per element.",
    chapter: "ch09 (fused_l2norm), ch12 (kernel_fusion)",
    metric: Metric::GbPerS,
    variants: &[
        v(
            "three_kernels",
            B,
            RoofKind::Memory,
            "y = a*x + b; z = y*y; w = z + x as three kernels (28 bytes moved per element).",
        ),
        v(
            "fused",
            O,
            RoofKind::Memory,
            "w = (a*x + b)^2 + x in one kernel (8 bytes per element); bit-identical results.",
        ),
    ],
    needs: Needs::ANY,
    informational: None,
    when_no_win: "Fusion always removes traffic; a tie means the problem fits in L2, which these sizes exceed.",
};

pub const REDUCTION: TargetSpec = TargetSpec {
    id: "reduction",
    title: "Reduction: atomics, shared memory, warp shuffles",
    lesson: "Reduce in registers and shared memory and touch the global atomic once per block; warp shuffles replace most of the shared-memory tree and its barriers.",
    chapter: "ch10 (atomic_reduction, dsmem_reduction)",
    metric: Metric::GbPerS,
    variants: &[
        v(
            "atomic_per_element",
            B,
            RoofKind::Memory,
            "Every element is an atomicAdd on one double in global memory.",
        ),
        v(
            "shared_tree",
            O,
            RoofKind::Memory,
            "One element per thread, a shared-memory tree per block, one atomic per block.",
        ),
        v(
            "warp_shuffle",
            O,
            RoofKind::Memory,
            "Grid-stride float4 sums in registers, warp shuffles, one atomic per block.",
        ),
    ],
    needs: Needs::ANY,
    informational: None,
    when_no_win: "Never expected: a tie would mean the atomic unit keeps up with memory bandwidth.",
};

pub const LAUNCH_OVERHEAD: TargetSpec = TargetSpec {
    id: "launch_overhead",
    title: "Launch overhead: launches vs a CUDA graph vs a persistent kernel",
    lesson: "Many tiny kernels are bound by launch cost; a CUDA graph submits them as one unit, and a persistent kernel that loops over the steps pays one launch.",
    chapter: "ch12 (kernel_launches, cuda_graphs)",
    metric: Metric::UsPerStep,
    variants: &[
        v(
            "separate_launches",
            B,
            RoofKind::None,
            "1000 launches of a 4096-element step kernel, one after another on a stream.",
        ),
        v(
            "cuda_graph",
            O,
            RoofKind::None,
            "The same 1000 launches captured once into a CUDA graph and replayed.",
        ),
        v(
            "persistent_kernel",
            O,
            RoofKind::None,
            "One launch that runs the 1000 steps in a loop (valid because each element's steps are independent).",
        ),
    ],
    needs: Needs::ANY,
    informational: None,
    when_no_win: "A graph of kernels that each run longer than the launch gap gains little.",
};

pub const STREAM_OVERLAP: TargetSpec = TargetSpec {
    id: "stream_overlap",
    title: "Streams: overlapping copies and compute",
    lesson: "Split the data into chunks on several streams with pinned buffers, and the host-to-device copy, the kernel and the device-to-host copy of different chunks run at once.",
    chapter: "ch11 (streams), ch03 (docker, kubernetes)",
    metric: Metric::GbPerS,
    variants: &[
        v(
            "serial_one_stream",
            B,
            RoofKind::None,
            "16 chunks: copy in, compute, copy out, one after another on one stream.",
        ),
        v(
            "overlapped_three_streams",
            O,
            RoofKind::None,
            "The same 16 chunks spread over three streams so copies and kernels overlap.",
        ),
    ],
    needs: Needs::ANY,
    informational: None,
    when_no_win: "Overlap needs separate copy engines and a kernel time comparable to the copy time (calibrated here); a GPU with one copy engine overlaps less.",
};

pub const PINNED_MEMORY: TargetSpec = TargetSpec {
    id: "pinned_memory",
    title: "Host-to-device copies: pageable vs pinned",
    lesson: "Copies from pageable memory are staged through a driver buffer; page-locked (pinned) memory lets the copy engine read host memory directly at full link speed.",
    chapter: "ch02 (memory_transfer), ch03 (numa_unaware)",
    metric: Metric::GbPerS,
    variants: &[
        v(
            "pageable_h2d",
            B,
            RoofKind::PcieH2d,
            "cuMemcpyHtoD from an ordinary (pageable) host allocation.",
        ),
        v(
            "pinned_h2d",
            O,
            RoofKind::PcieH2d,
            "cuMemcpyHtoD from page-locked host memory (cuMemHostAlloc).",
        ),
    ],
    needs: Needs::ANY,
    informational: None,
    when_no_win: "Hosts with very fast memory copies and large driver staging buffers narrow the gap.",
};

pub const STREAM_ORDERED_ALLOCATION: TargetSpec = TargetSpec {
    id: "stream_ordered_allocation",
    title: "Allocation in the loop: cuMemAlloc vs the stream-ordered pool",
    lesson: "cuMemAlloc and cuMemFree inside a hot loop map memory and synchronise the device every step; stream-ordered allocation (cuMemAllocAsync) reuses a pool without stalling the stream.",
    chapter: "ch11 (stream_ordered, stream_ordered_kv_cache)",
    metric: Metric::UsPerStep,
    variants: &[
        v(
            "malloc_free_each_step",
            B,
            RoofKind::None,
            "Each of 20 steps: cuMemAlloc a scratch buffer, copy through it, cuMemFree it.",
        ),
        v(
            "stream_ordered_pool",
            O,
            RoofKind::None,
            "The same steps with cuMemAllocAsync/cuMemFreeAsync from the device's pool (release threshold raised so memory stays mapped).",
        ),
    ],
    needs: Needs::ANY,
    informational: None,
    when_no_win: "When each step's kernels run much longer than an allocation, the allocator's cost disappears in the noise.",
};

pub const GEMM: TargetSpec = TargetSpec {
    id: "gemm",
    title: "Matrix multiply: from naive to tensor cores",
    lesson: "Reuse operands from shared memory and registers, then let cuBLAS use the tensor cores: each lower precision (TF32, BF16/FP16, FP8) multiplies throughput.",
    chapter: "ch07 (matmul), ch09 (cublaslt_gemm*), ch10 (matmul), ch02 (cublas)",
    metric: Metric::TflopPerS,
    variants: &[
        v(
            "naive_fp32",
            B,
            RoofKind::Fp32,
            "One thread per output, operands straight from global memory.",
        ),
        v(
            "smem_tiled_fp32",
            O,
            RoofKind::Fp32,
            "32x32 tiles staged in shared memory.",
        ),
        v(
            "register_tiled_fp32",
            O,
            RoofKind::Fp32,
            "64x64 block tiles with a 4x4 register block per thread.",
        ),
        v(
            "cublas_fp32",
            O,
            RoofKind::Fp32,
            "cublasGemmEx, FP32 in and out, FP32 compute (no tensor cores).",
        ),
        v(
            "cublas_tf32",
            O,
            RoofKind::Tf32,
            "cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32: FP32 data on TF32 tensor cores.",
        ),
        v(
            "cublas_bf16",
            O,
            RoofKind::Bf16,
            "cublasGemmEx, BF16 in and out, FP32 accumulation.",
        ),
        v(
            "cublas_fp16",
            O,
            RoofKind::Fp16,
            "cublasGemmEx, FP16 in and out, FP32 accumulation.",
        ),
        v(
            "cublaslt_bf16",
            O,
            RoofKind::Bf16,
            "cublasLtMatmul with the heuristic's first algorithm, BF16 in and out.",
        ),
        v(
            "cublaslt_fp8",
            O,
            RoofKind::Fp8,
            "cublasLtMatmul, FP8 E4M3 inputs (A row-major, B stored transposed), BF16 out (compute capability 8.9+).",
        ),
    ],
    needs: Needs {
        min_cc: (7, 0),
        cublas: true,
        gpus: 1,
    },
    informational: None,
    when_no_win: "Lower precisions need tensor cores for that type (BF16 from compute capability 8.0, FP8 from 8.9).",
};

pub const GEMM_BATCHED: TargetSpec = TargetSpec {
    id: "gemm_batched",
    title: "Many small GEMMs vs one batched call",
    lesson: "Hundreds of small matrix products launched one by one are bound by launch cost; one strided-batched call does the same work in a single launch.",
    chapter: "ch01 (gemm), ch10 (batch)",
    metric: Metric::TflopPerS,
    variants: &[
        v(
            "loop_of_gemms",
            B,
            RoofKind::Fp32,
            "256 cublasGemmEx calls of 128x128x128 FP32.",
        ),
        v(
            "strided_batched",
            O,
            RoofKind::Fp32,
            "One cublasGemmStridedBatchedEx call over the same 256 products.",
        ),
    ],
    needs: Needs {
        min_cc: (7, 0),
        cublas: true,
        gpus: 1,
    },
    informational: None,
    when_no_win: "When each product is large enough to fill the GPU, batching saves only the launch gaps.",
};

/// Every single-GPU lesson, in the order `aisp_benchmark_run` runs them.
pub const ALL: &[&TargetSpec] = &[
    &MEMORY_COALESCING,
    &VECTORIZED_LOADS,
    &TRANSPOSE,
    &WARP_DIVERGENCE,
    &ILP,
    &OCCUPANCY,
    &KERNEL_FUSION,
    &REDUCTION,
    &LAUNCH_OVERHEAD,
    &STREAM_OVERLAP,
    &PINNED_MEMORY,
    &STREAM_ORDERED_ALLOCATION,
    &GEMM,
    &GEMM_BATCHED,
];

pub fn spec(id: &str) -> Option<&'static TargetSpec> {
    ALL.iter().copied().find(|t| t.id == id)
}

/// A fresh runner for target `id`.
pub fn make(id: &str) -> Option<Box<dyn Lesson>> {
    Some(match id {
        "memory_coalescing" => Box::new(memory::Coalescing::default()),
        "vectorized_loads" => Box::new(memory::Vectorized::default()),
        "transpose_bank_conflicts" => Box::new(memory::Transpose::default()),
        "occupancy_launch_bounds" => Box::new(memory::Occupancy::default()),
        "kernel_fusion" => Box::new(memory::Fusion::default()),
        "warp_divergence" => Box::new(compute::Divergence::default()),
        "ilp_unrolling" => Box::new(compute::Ilp::default()),
        "reduction" => Box::new(compute::Reduction::default()),
        "launch_overhead" => Box::new(launch::LaunchOverhead::default()),
        "stream_overlap" => Box::new(launch::StreamOverlap::default()),
        "pinned_memory" => Box::new(launch::Pinned::default()),
        "stream_ordered_allocation" => Box::new(launch::StreamOrdered::default()),
        "gemm" => Box::new(gemm::Gemm::default()),
        "gemm_batched" => Box::new(gemm::Batched::default()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn catalog_is_well_formed() {
        let mut ids = HashSet::new();
        for t in ALL {
            assert!(ids.insert(t.id), "duplicate target {}", t.id);
            assert!(
                t.id.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{} is not snake_case",
                t.id
            );
            assert!(t.lesson.len() > 40, "{}: the lesson needs a sentence", t.id);
            assert!(!t.when_no_win.is_empty());
            let base = t
                .variants
                .iter()
                .filter(|v| v.role == Role::Baseline)
                .count();
            let opt = t
                .variants
                .iter()
                .filter(|v| v.role == Role::Optimized)
                .count();
            assert_eq!(base, 1, "{}: exactly one baseline", t.id);
            assert!(opt >= 1, "{}: at least one optimized variant", t.id);
            assert_eq!(
                t.variants[0].role,
                Role::Baseline,
                "{}: the baseline comes first",
                t.id
            );
            let mut names = HashSet::new();
            for v in t.variants {
                assert!(
                    names.insert(v.name),
                    "{}: duplicate variant {}",
                    t.id,
                    v.name
                );
                assert!(
                    v.name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                );
            }
            assert!(make(t.id).is_some(), "{} has no runner", t.id);
            assert_eq!(make(t.id).unwrap().spec().id, t.id);
        }
        assert_eq!(ALL.len(), 14);
        assert!(make("nope").is_none());
        assert_eq!(spec("gemm").unwrap().variants.len(), 9);
    }
}
