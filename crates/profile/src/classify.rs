//! Kernel classes from the demangled name and the launch configuration.
//!
//! Short names hide what a kernel is (`Kernel2` can be a cutlass SIMT SGEMM or
//! a tensor-core GEMM), so the demangled name decides. Tensor-core use is read
//! from the instruction family in the name (`tensorop`, `s16816`, `hmma`,
//! `wgmma`, `gmma`, `nvjet`, `tf32`, ...); `ffma` and `simt` mean CUDA cores,
//! so `sm80_xmma_gemm_f32f32_..._ffma_...` is an fp32 SIMT GEMM despite
//! `xmma`. A GEMM whose name says neither is `gemm_unknown` (unknown is not
//! "no tensor cores").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum KernelClass {
    /// Matrix multiply (or implicit-GEMM convolution) on tensor cores.
    GemmTensorCore,
    /// fp32 matrix multiply on CUDA cores (FFMA): TF32/BF16 tensor cores could run it.
    GemmSimtFp32,
    /// Matrix multiply whose instruction family the name does not reveal.
    GemmUnknown,
    /// Attention (flash, fused MHA, SDPA, paged/decode attention).
    Attention,
    /// Pointwise work: activations, arithmetic, optimizer updates, RNG, fills.
    Elementwise,
    /// Reductions, softmax, normalization, sort/scan, split-K reduce.
    Reduction,
    /// Data movement: copies, concatenation, gather/scatter, transpose, casts.
    Copy,
    /// Collective communication (NCCL, NVSHMEM, custom all-reduce).
    Communication,
    /// Anything else.
    Other,
}

impl KernelClass {
    pub fn as_str(self) -> &'static str {
        match self {
            KernelClass::GemmTensorCore => "gemm_tensor_core",
            KernelClass::GemmSimtFp32 => "gemm_simt_fp32",
            KernelClass::GemmUnknown => "gemm_unknown",
            KernelClass::Attention => "attention",
            KernelClass::Elementwise => "elementwise",
            KernelClass::Reduction => "reduction",
            KernelClass::Copy => "copy",
            KernelClass::Communication => "communication",
            KernelClass::Other => "other",
        }
    }

    pub fn is_gemm(self) -> bool {
        matches!(
            self,
            KernelClass::GemmTensorCore | KernelClass::GemmSimtFp32 | KernelClass::GemmUnknown
        )
    }
}

/// Numeric precision read from a kernel's name, when it says: the one
/// precision vocabulary of aisp (`aisp_knowledge::dtype::Precision`).
pub use aisp_knowledge::dtype::Precision;

/// The schema of [`Classification::precision`]: the same names as
/// [`Precision`], listed in the order the kernel answers have always listed
/// them (`tool-schemas/aisp_profile_kernels.json` pins it).
#[derive(JsonSchema)]
#[schemars(rename = "Precision")]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)] // only its schema is used
enum KernelPrecisionSchema {
    Fp64,
    Fp32,
    Tf32,
    Bf16,
    Fp16,
    Fp8,
    Fp4,
    Int8,
}

/// A kernel's class with the evidence for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Classification {
    pub class: KernelClass,
    #[schemars(with = "Option<KernelPrecisionSchema>")]
    pub precision: Option<Precision>,
    /// Whether the kernel uses tensor cores: `None` when the name does not say.
    pub tensor_cores: Option<bool>,
    /// What in the name or launch configuration decided it.
    pub evidence: String,
}

fn any(hay: &str, needles: &[&str]) -> Option<String> {
    needles
        .iter()
        .find(|n| hay.contains(*n))
        .map(|n| n.to_string())
}

fn precision(l: &str) -> Option<Precision> {
    if l.contains("e4m3") || l.contains("e5m2") || l.contains("fp8") || l.contains("f8f8") {
        Some(Precision::Fp8)
    } else if l.contains("fp4") || l.contains("e2m1") || l.contains("nvf4") {
        Some(Precision::Fp4)
    } else if l.contains("tf32") {
        Some(Precision::Tf32)
    } else if l.contains("bf16") || l.contains("bfloat16") || l.contains("__nv_bfloat16") {
        Some(Precision::Bf16)
    } else if l.contains("f16f16")
        || l.contains("fp16")
        || l.contains("_f16")
        || l.contains("hgemm")
        || l.contains("h1688")
        || l.contains("h16816")
        || l.contains("__half")
        || l.contains("c10::half")
    {
        Some(Precision::Fp16)
    } else if l.contains("i8i8")
        || l.contains("imma")
        || l.contains("int8")
        || l.contains("s8s8")
        || l.contains("i8816")
    {
        Some(Precision::Int8)
    } else if l.contains("dgemm")
        || l.contains("f64f64")
        || l.contains("<double")
        || l.contains("dmma")
    {
        Some(Precision::Fp64)
    } else if l.contains("f32f32")
        || l.contains("sgemm")
        || l.contains("<float")
        || l.contains("ffma")
    {
        Some(Precision::Fp32)
    } else {
        None
    }
}

/// A kernel's name as a person reads it: no return type, parameter list, template arguments or namespaces before
/// the last (`void at::native::<unnamed>::multi_tensor_apply_kernel<...>(...)` → `multi_tensor_apply_kernel`). A
/// name without any of them (an Nsight short name, a cuBLAS kernel) comes back as it is; so does one it cannot read.
pub fn bare_kernel_name(demangled: &str) -> String {
    let chars: Vec<char> = demangled.trim().chars().collect();
    let mut out = String::new();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < chars.len() {
        match chars[i] {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            '(' if depth == 0 => {
                // `(anonymous namespace)::` is a namespace; any other parenthesis at the top ends the name.
                let close = chars[i..].iter().position(|&c| c == ')').map(|n| i + n);
                match close {
                    Some(c) if chars.get(c + 1) == Some(&':') && chars.get(c + 2) == Some(&':') => {
                        i = c
                    }
                    _ => break,
                }
            }
            ch if depth == 0 => out.push(ch),
            _ => {}
        }
        i += 1;
    }
    let out = out.trim();
    let out = out.rsplit(' ').next().unwrap_or(out);
    let out = out.rsplit("::").next().unwrap_or(out).trim();
    if out.is_empty() {
        demangled.trim().to_string()
    } else {
        out.to_string()
    }
}

/// What a kernel is, in a few words: its bare name, and for PyTorch's generic launchers (the elementwise, reduce and
/// multi-tensor templates, whose bare name says nothing of the operation) the operation they carry, in brackets:
/// `vectorized_elementwise_kernel[CUDAFunctor_add]`, `unrolled_elementwise_kernel[direct_copy_kernel_cuda]`.
pub fn kernel_label(demangled: &str) -> String {
    let bare = bare_kernel_name(demangled);
    // A kernel named only `kernel` (cuBLAS's `gemvx::kernel<...>`, for one) is told apart by its namespace.
    if bare == "kernel" {
        return enclosing_scope(demangled).map_or(bare, |scope| format!("{scope}::kernel"));
    }
    // CUTLASS's launchers (`cutlass::Kernel<...>`, `Kernel2<...>`) carry the kernel's identity as their template
    // argument: `Kernel2[cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1]` says the path, the precision,
    // the tile and the alignment that a bare `Kernel2` hides.
    if (bare == "Kernel" || bare == "Kernel2")
        && let Some(inner) = demangled
            .find(&format!("{bare}<cutlass_"))
            .map(|i| &demangled[i + bare.len() + 1..])
            .and_then(|a| {
                a.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
            })
    {
        return format!("{bare}[{inner}]");
    }
    const LAUNCHERS: [&str; 3] = [
        "elementwise_kernel",
        "reduce_kernel",
        "multi_tensor_apply_kernel",
    ];
    if !LAUNCHERS.iter().any(|l| bare.contains(l)) {
        return bare;
    }
    // Its template arguments: after the name itself (a namespace such as `<unnamed>` may come before it).
    let args = demangled
        .find(&format!("{bare}<"))
        .map_or("", |i| &demangled[i + bare.len()..]);
    match carried_operation(args) {
        Some(op) => format!("{bare}[{op}]"),
        None => bare,
    }
}

/// The scope a demangled kernel name's last part is in (`gemvx` of `void gemvx::kernel<int, ...>(...)`), at the
/// top level of the name: not inside template arguments.
fn enclosing_scope(demangled: &str) -> Option<String> {
    let mut depth = 0usize;
    let mut top = String::new();
    for c in demangled.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            '(' if depth == 0 => break,
            c if depth == 0 => top.push(c),
            _ => {}
        }
    }
    let name = top.trim().rsplit(' ').next()?;
    let mut parts = name.rsplit("::");
    parts.next()?;
    parts.next().filter(|s| !s.is_empty()).map(str::to_string)
}

/// The first name in a launcher's template arguments that says what it computes: a `*_kernel_cuda`, `*_kernel_impl`
/// or `*KernelImpl` function, a functor (not a generic wrapper such as `BinaryFunctor`), a reduction's `*Ops`, or an `*_out` op.
fn carried_operation(args: &str) -> Option<&str> {
    const WRAPPERS: [&str; 6] = [
        "BinaryFunctor",
        "UnaryFunctor",
        "AUnaryFunctor",
        "BUnaryFunctor",
        "gpu_kernel_impl_nocast",
        "gpu_kernel_impl",
    ];
    args.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty() && !WRAPPERS.contains(w))
        .find(|w| {
            w.ends_with("_kernel_cuda")
                || w.ends_with("_kernel_impl")
                || w.ends_with("KernelImpl")
                || w.ends_with("Functor")
                || w.ends_with("_functor")
                || w.ends_with("Ops")
                || w.starts_with("CUDAFunctor")
                || w.ends_with("_out")
                || w.ends_with("_kernel")
        })
}

/// [`bare_kernel_name`] cut to at most `max` characters, at an underscore where there is one, marked `...`: where a
/// line names kernels in passing (a finding's gist), the whole name being one argument away.
pub fn short_form(name: &str, max: usize) -> String {
    let r = bare_kernel_name(name);
    if r.chars().count() <= max {
        return r;
    }
    let head: String = r.chars().take(max.saturating_sub(3)).collect();
    let cut = match head.rfind('_') {
        Some(i) if i >= head.len() / 2 => &head[..i],
        _ => head.as_str(),
    };
    format!("{cut}...")
}

/// Classify a kernel from its demangled and short names and launch configuration.
pub fn classify(demangled: &str, short: &str, grid: [u32; 3], block: [u32; 3]) -> Classification {
    let name = if demangled.is_empty() {
        short
    } else {
        demangled
    };
    let l = name.to_ascii_lowercase();
    let prec = precision(&l);
    let threads: u64 = block.iter().map(|&b| b as u64).product();
    let c = |class, tc: Option<bool>, evidence: String| Classification {
        class,
        precision: prec,
        tensor_cores: tc,
        evidence,
    };
    if let Some(hit) = any(
        &l,
        &[
            "nccl",
            "nvshmem",
            "cross_device_reduce",
            "all_reduce",
            "allreduce",
            "all_gather",
            "reduce_scatter",
        ],
    ) {
        return c(
            KernelClass::Communication,
            Some(false),
            format!("name contains `{hit}`"),
        );
    }
    let tc_marker = any(
        &l,
        &[
            "tensorop",
            "tensor_op",
            "s1688",
            "s16816",
            "h1688",
            "h16816",
            "i8816",
            "hmma",
            "imma",
            "wgmma",
            "gmma",
            "wmma",
            "mma_sync",
            "nvjet",
            "_tf32",
            "tf32",
            "tcgen",
            "utcmma",
            "umma",
        ],
    );
    let simt_marker = any(
        &l,
        &["ffma", "simt", "sgemm", "dgemm", "gemv", "gemmsn", "gemmk1"],
    );
    if let Some(hit) = any(
        &l,
        &[
            "flash",
            "fmha",
            "sdpa",
            "attention",
            "attn",
            "mha_",
            "_mha",
            "xformers",
            "paged_attention",
        ],
    ) {
        let tc = tc_marker.as_ref().map(|_| true);
        return c(KernelClass::Attention, tc, format!("name contains `{hit}`"));
    }
    let gemm_marker = any(
        &l,
        &[
            "gemm",
            "xmma",
            "nvjet",
            "cutlass",
            "cublas",
            "matmul",
            "_mm_",
            "bmm",
            "gemv",
            // cuSPARSE's sparse × dense products: matrix multiplies, whose dense counterpart is a GEMM.
            "csrmm",
            "spmm",
            "implicit_convolve",
            "conv2d",
            "convolve",
            "dgrad",
            "wgrad",
            "fprop",
        ],
    );
    let splitk_reduce = l.contains("splitkreduce") || l.contains("split_k_reduce");
    if let Some(g) = gemm_marker.filter(|_| !splitk_reduce) {
        // cutlass also builds non-GEMM kernels; require a GEMM-ish hint for it.
        let cutlass_only = g == "cutlass"
            && tc_marker.is_none()
            && simt_marker.is_none()
            && !l.contains("kernel2");
        if !cutlass_only {
            if let Some(s) = &simt_marker {
                // `ffma`/`simt`/`sgemm` name CUDA cores even under an `xmma` family name,
                // unless an explicit tensor-core marker (`tf32`, `tensorop`) is also present.
                if tc_marker.is_none() {
                    let p = prec.unwrap_or(Precision::Fp32);
                    // A matrix-vector product reads its matrix once for two flops an element: bandwidth-bound in
                    // any precision, so no tensor core would speed it up (cuBLAS runs GEMVs on CUDA cores anyway).
                    if s == "gemv" {
                        return Classification {
                            class: KernelClass::GemmUnknown,
                            precision: Some(p),
                            tensor_cores: Some(false),
                            evidence: format!(
                                "matrix-vector product (`{s}` in the name): bound by memory, not by the math unit"
                            ),
                        };
                    }
                    let class = if p == Precision::Fp32 {
                        KernelClass::GemmSimtFp32
                    } else {
                        KernelClass::GemmUnknown
                    };
                    return Classification {
                        class,
                        precision: Some(p),
                        tensor_cores: Some(false),
                        evidence: format!("GEMM (`{g}`) on CUDA cores (`{s}` in the name)"),
                    };
                }
            }
            if let Some(t) = tc_marker {
                return c(
                    KernelClass::GemmTensorCore,
                    Some(true),
                    format!("GEMM (`{g}`) with tensor-core instructions (`{t}`)"),
                );
            }
            // Reduced-precision GEMMs run on tensor cores in cuBLAS/cutlass; fp32 without a marker is unknown.
            if matches!(
                prec,
                Some(
                    Precision::Bf16
                        | Precision::Fp16
                        | Precision::Fp8
                        | Precision::Int8
                        | Precision::Fp4
                )
            ) {
                return c(
                    KernelClass::GemmTensorCore,
                    Some(true),
                    format!(
                        "GEMM (`{g}`) in reduced precision, which cuBLAS/cutlass run on tensor cores"
                    ),
                );
            }
            // Hopper warpgroup MMA kernels launch whole warpgroups (multiples of 128 threads, ≥ 384 with producers).
            if threads >= 384
                && threads.is_multiple_of(128)
                && (l.contains("sm90") || l.contains("sm100"))
            {
                return c(
                    KernelClass::GemmTensorCore,
                    Some(true),
                    format!("GEMM (`{g}`) for sm90+ launched as {threads}-thread warpgroups"),
                );
            }
            return c(
                KernelClass::GemmUnknown,
                None,
                format!("GEMM (`{g}`) but the name does not say tensor cores or CUDA cores"),
            );
        }
    }
    if let Some(hit) = any(
        &l,
        &[
            "copy",
            "catarray",
            "concat",
            "gather",
            "scatter",
            "index_select",
            "indexselect",
            "transpose",
            "permute",
            "memcpy",
            "_cast",
            "to_copy",
            "flip",
            "roll",
            "repeat",
        ],
    ) {
        return c(
            KernelClass::Copy,
            Some(false),
            format!("name contains `{hit}`"),
        );
    }
    if l.contains("distribution") {
        return c(
            KernelClass::Elementwise,
            Some(false),
            "name contains `distribution` (random numbers)".into(),
        );
    }
    if let Some(hit) = any(
        &l,
        &[
            "reduce",
            "softmax",
            "norm",
            "argmax",
            "argmin",
            "topk",
            "sort",
            "scan",
            "cub::",
            "triton_red",
            "triton_per",
            "sum_kernel",
            "mean",
            "welford",
            "cross_entropy",
            "nll_loss",
            "logsumexp",
        ],
    ) {
        return c(
            KernelClass::Reduction,
            Some(false),
            format!("name contains `{hit}`"),
        );
    }
    if let Some(hit) = any(
        &l,
        &[
            "elementwise",
            "vectorized",
            "unrolled",
            "multi_tensor_apply",
            "functor",
            "triton_poi",
            "gelu",
            "relu",
            "silu",
            "sigmoid",
            "tanh",
            "dropout",
            "fill",
            "distribution",
            "adam",
            "sgd",
            "activation",
            "rotary",
            "rope",
            "clamp",
            "pointwise",
            "bias",
        ],
    ) {
        return c(
            KernelClass::Elementwise,
            Some(false),
            format!("name contains `{hit}`"),
        );
    }
    let blocks: u64 = grid.iter().map(|&g| g as u64).product();
    c(
        KernelClass::Other,
        None,
        format!("no known family in the name ({blocks} blocks × {threads} threads)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generic_launcher_is_labelled_with_the_operation_it_carries() {
        let cases = [
            (
                "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda(float) (instance 1)], std::array<char *, (unsigned long)2>, (int)4>(int, T1, T2)",
                "unrolled_elementwise_kernel[direct_copy_kernel_cuda]",
            ),
            (
                "void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char *, (unsigned long)3>>(int, T2, T3)",
                "vectorized_elementwise_kernel[CUDAFunctor_add]",
            ),
            (
                "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda(long) (instance 1)]>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)",
                "elementwise_kernel[direct_copy_kernel_cuda]",
            ),
            (
                "void at::native::vectorized_elementwise_kernel<(int)4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>, std::array<char *, (unsigned long)3>>(int, T2, T3)",
                "vectorized_elementwise_kernel[MulFunctor]",
            ),
            (
                "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, (int)4>>(T3)",
                "reduce_kernel[MeanOps]",
            ),
            (
                "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::FusedOptimizerTensorListMetadata<(int)4>, at::native::<unnamed>::FusedAdamMathFunctor<c10::BFloat16, (int)4, (at::native::ADAM_MODE)1, (bool)0>, const float *>(T1, T2, T3...)",
                "multi_tensor_apply_kernel[FusedAdamMathFunctor]",
            ),
            (
                "void at::native::vectorized_elementwise_kernel<(int)4, void at::native::<unnamed>::pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase &, T2)::[lambda(float) (instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)",
                "vectorized_elementwise_kernel[pow_tensor_scalar_kernel_impl]",
            ),
            // Not a launcher: the bare name already says what it is.
            (
                "void at::native::<unnamed>::cunn_SoftMaxBackward<(int)4, float, float, float, at::native::<unnamed>::LogSoftMaxBackwardEpilogue>(T2 *, const T4 *, const T4 *, long)",
                "cunn_SoftMaxBackward",
            ),
            (
                "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN",
                "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN",
            ),
            // A kernel named only `kernel`: its namespace tells which (cuBLAS's batched GEMV).
            (
                "std::enable_if<T7, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, (bool)1, (bool)1, (bool)1, (bool)0, (int)7, (bool)0, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<__nv_bfloat16>, float>>(T13, T6, T6)",
                "gemvx::kernel",
            ),
            // CUTLASS's launcher: the kernel it runs, with its alignment.
            (
                "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1>(T1::Params)",
                "Kernel2[cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1]",
            ),
        ];
        for (demangled, want) in cases {
            assert_eq!(kernel_label(demangled), want, "{demangled}");
        }
    }

    #[test]
    fn a_bare_kernel_name_keeps_the_last_name_only() {
        for (name, want) in [
            (
                "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctorOnSelf_add<float>, std::array<char *, (unsigned long)2>>(int, T2, T3)",
                "vectorized_elementwise_kernel",
            ),
            (
                "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(T1::Params)",
                "Kernel2",
            ),
            (
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            ),
            (
                "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false>(float *, const float *, int)",
                "softmax_warp_forward",
            ),
            (
                "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
                "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
            ),
            ("Kernel2", "Kernel2"),
            (
                "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::TensorListMetadata<(int)1>, float>(T1, T2, T3...)",
                "multi_tensor_apply_kernel",
            ),
            ("", ""),
            ("<<<", "<<<"),
        ] {
            assert_eq!(bare_kernel_name(name), want, "{name}");
        }
        assert_eq!(
            short_form(
                "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4",
                40
            ),
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn..."
        );
        assert_eq!(short_form("Kernel2", 40), "Kernel2");
    }

    fn cls(d: &str) -> Classification {
        classify(d, "", [1, 1, 1], [128, 1, 1])
    }

    #[test]
    fn xmma_with_ffma_is_simt_fp32_not_tensor_core() {
        let c = cls(
            "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
        );
        assert_eq!(c.class, KernelClass::GemmSimtFp32);
        assert_eq!(c.tensor_cores, Some(false));
        assert_eq!(c.precision, Some(Precision::Fp32));
    }

    /// cuBLAS's batched fp32 GEMV (a dot product per query and candidate) is not a GEMM tensor cores would speed
    /// up: it is a matrix product bound by memory.
    #[test]
    fn an_fp32_gemv_is_not_counted_as_a_gemm_for_tensor_cores() {
        let c = cls(
            "std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, float, float, float, float, (bool)0, (bool)1, (bool)1, (bool)0, (int)5, (bool)0, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const float>, cublasGemvTensorStridedBatched<const float>, cublasGemvTensorStridedBatched<float>, float>>(T13)",
        );
        assert_eq!(c.class, KernelClass::GemmUnknown);
        assert_eq!(c.tensor_cores, Some(false));
        assert!(
            c.evidence.contains("matrix-vector product"),
            "{}",
            c.evidence
        );
        let sgemm = cls("ampere_sgemm_128x64_nn");
        assert_eq!(sgemm.class, KernelClass::GemmSimtFp32);
    }

    #[test]
    fn kernel2_is_read_from_its_demangled_name() {
        let tc = classify(
            "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_64x64_tn_align1>(T1::Params)",
            "Kernel2",
            [8, 99, 1],
            [128, 1, 1],
        );
        assert_eq!(tc.class, KernelClass::GemmTensorCore);
        assert_eq!(tc.precision, Some(Precision::Bf16));
        let simt = classify(
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(T1::Params)",
            "Kernel2",
            [8, 8, 1],
            [256, 1, 1],
        );
        assert_eq!(simt.class, KernelClass::GemmSimtFp32);
    }

    #[test]
    fn a_sparse_times_dense_product_is_a_matrix_multiply() {
        let c = cls(
            "void cusparse::csrmm_alg2_kernel<(bool)0, (bool)1, (bool)0, long, long, long, long, float, float, float, \
             float>(T4, T4, T5, T4, int, int, cusparse::KernelCoeffs<T11>, int, int, const T4 *, const T7 *)",
        );
        assert!(c.class.is_gemm(), "{c:?}");
        assert_eq!(c.tensor_cores, None);
    }

    #[test]
    fn common_pytorch_kernels_get_their_classes() {
        assert_eq!(
            cls("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN").class,
            KernelClass::GemmTensorCore
        );
        assert_eq!(cls("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)").class, KernelClass::Communication);
        assert_eq!(cls("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x64_1x4x1_cga1x1x1_kernel0_0").class, KernelClass::Attention);
        assert_eq!(cls("void at::native::<unnamed>::CatArrayBatchedCopy<at::native::<unnamed>::OpaqueType<(unsigned int)2>>").class, KernelClass::Copy);
        assert_eq!(cls("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)>").class, KernelClass::Copy);
        assert_eq!(cls("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::MeanOps<float>>>(T3)").class, KernelClass::Reduction);
        assert_eq!(
            cls(
                "void at::native::vectorized_layer_norm_kernel<c10::BFloat16, float, (bool)0>(int)"
            )
            .class,
            KernelClass::Reduction
        );
        assert_eq!(
            cls("void cublasLt::splitKreduce_kernel<(int)32, (int)16, int, float, __nv_bfloat16>")
                .class,
            KernelClass::Reduction
        );
        assert_eq!(cls("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>>").class, KernelClass::Elementwise);
        assert_eq!(
            cls(
                "void at::native::<unnamed>::multi_tensor_apply_kernel<FusedAdamMathFunctor<float>>"
            )
            .class,
            KernelClass::Elementwise
        );
        assert_eq!(cls("gemm_nn_128x128").class, KernelClass::GemmUnknown);
        assert_eq!(
            cls("volta_sgemm_128x64_nn").class,
            KernelClass::GemmSimtFp32
        );
        assert_eq!(
            cls("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn").class,
            KernelClass::GemmTensorCore
        );
        assert_eq!(
            cls("sm80_xmma_gemm_tf32f32_tf32f32_f32_tn_n_tilesize128x128x16_ffma_execute").class,
            KernelClass::GemmTensorCore
        );
    }
}
