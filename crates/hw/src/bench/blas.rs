//! cuBLAS and cuBLASLt matrix products for the GEMM lessons and the tensor
//! core roofs, called through cudarc's raw bindings.
//!
//! Every matrix here is row-major. cuBLAS is column-major, so C = A·B
//! (A: m×k, B: k×n) is computed as Cᵀ = Bᵀ·Aᵀ, which in column-major terms is
//! "no transpose" on the same memory: gemm(n, m, k, B, ldb = n, A, lda = k,
//! C, ldc = n). FP8 through cuBLASLt needs the "TN" layout, so its B operand
//! is stored transposed (n×k row-major, `Bt`): C = A·Btᵀ.

use std::ffi::c_void;

use cudarc::cublas::sys as cb;
use cudarc::cublaslt::sys as lt;

use super::BenchError;
use super::cuda::DevBuf;
use super::device::Gpu;

fn cublas_check(call: &str, s: cb::cublasStatus_t) -> Result<(), BenchError> {
    if s == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(BenchError::Cublas {
            call: call.to_string(),
            status: format!("{s:?}"),
        })
    }
}

fn lt_check(call: &str, s: lt::cublasStatus_t) -> Result<(), BenchError> {
    if s == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(BenchError::Cublas {
            call: call.to_string(),
            status: format!("{s:?}"),
        })
    }
}

/// Element type of a GEMM operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    Bf16,
    F16,
    E4m3,
}

impl DType {
    fn cublas(self) -> cb::cudaDataType {
        match self {
            DType::F32 => cb::cudaDataType::CUDA_R_32F,
            DType::Bf16 => cb::cudaDataType::CUDA_R_16BF,
            DType::F16 => cb::cudaDataType::CUDA_R_16F,
            DType::E4m3 => cb::cudaDataType::CUDA_R_8F_E4M3,
        }
    }

    fn lt(self) -> lt::cudaDataType_t {
        match self {
            DType::F32 => lt::cudaDataType_t::CUDA_R_32F,
            DType::Bf16 => lt::cudaDataType_t::CUDA_R_16BF,
            DType::F16 => lt::cudaDataType_t::CUDA_R_16F,
            DType::E4m3 => lt::cudaDataType_t::CUDA_R_8F_E4M3,
        }
    }
}

/// The compute mode of a cublasGemmEx call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compute {
    /// FP32 arithmetic on CUDA cores.
    F32,
    /// FP32 data rounded to TF32 on the tensor cores.
    Tf32,
}

/// cuBLAS library version as `major.minor.patch`.
pub fn cublas_version() -> Option<String> {
    if !super::libs::cublas_available() {
        return None;
    }
    let mut v = [0i32; 3];
    for (i, p) in [
        cb::libraryPropertyType::MAJOR_VERSION,
        cb::libraryPropertyType::MINOR_VERSION,
        cb::libraryPropertyType::PATCH_LEVEL,
    ]
    .into_iter()
    .enumerate()
    {
        // SAFETY: writes one int.
        if unsafe { cb::cublasGetProperty(p, &mut v[i]) }
            != cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS
        {
            return None;
        }
    }
    Some(format!("{}.{}.{}", v[0], v[1], v[2]))
}

/// Workspace size NVIDIA recommends: 32 MiB on Hopper and later, 4 MiB before
/// (what PyTorch also gives cuBLAS).
fn workspace_bytes(gpu: &Gpu) -> usize {
    if gpu.info.cc_major >= 9 {
        32 << 20
    } else {
        4 << 20
    }
}

/// A cuBLAS handle bound to the harness stream, with its own workspace.
pub struct Blas {
    handle: cb::cublasHandle_t,
    _workspace: DevBuf,
}

impl Blas {
    pub fn new(gpu: &Gpu) -> Result<Blas, BenchError> {
        if !super::libs::cublas_available() {
            return Err(BenchError::NoLibrary(
                "cuBLAS (libcublas.so.13 or .12)".into(),
            ));
        }
        gpu.ctx.bind()?;
        let handle = cudarc::cublas::result::create_handle().map_err(|e| BenchError::Cublas {
            call: "cublasCreate".into(),
            status: format!("{e:?}"),
        })?;
        let ws = gpu.alloc(workspace_bytes(gpu))?;
        let blas = Blas {
            handle,
            _workspace: ws,
        };
        // SAFETY: valid handle and stream; the workspace outlives the handle (dropped after it).
        unsafe {
            cublas_check(
                "cublasSetStream",
                cb::cublasSetStream_v2(blas.handle, gpu.stream.raw() as _),
            )?;
            cublas_check(
                "cublasSetWorkspace",
                cb::cublasSetWorkspace_v2(
                    blas.handle,
                    blas._workspace.ptr() as *mut c_void,
                    blas._workspace.bytes(),
                ),
            )?;
        }
        Ok(blas)
    }

    /// Row-major C (m×n, `c_type`) = A (m×k) · B (k×n), alpha 1, beta 0.
    /// Operands `ab_type`; accumulation in FP32.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: u64,
        b: u64,
        c: u64,
        ab_type: DType,
        c_type: DType,
        compute: Compute,
    ) -> Result<(), BenchError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let ct = match compute {
            Compute::F32 => cb::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            Compute::Tf32 => cb::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        };
        // SAFETY: device pointers address buffers of the stated shapes; scalars are host f32.
        cublas_check("cublasGemmEx", unsafe {
            cb::cublasGemmEx(
                self.handle,
                cb::cublasOperation_t::CUBLAS_OP_N,
                cb::cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                &alpha as *const f32 as *const c_void,
                b as *const c_void,
                ab_type.cublas(),
                n as i32,
                a as *const c_void,
                ab_type.cublas(),
                k as i32,
                &beta as *const f32 as *const c_void,
                c as *mut c_void,
                c_type.cublas(),
                n as i32,
                ct,
                cb::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        })
    }

    /// `batch` row-major FP32 products C_i = A_i · B_i stored back to back.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_strided_batched_f32(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: u64,
        b: u64,
        c: u64,
        batch: usize,
    ) -> Result<(), BenchError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: as in `gemm`, for `batch` consecutive matrices.
        cublas_check("cublasGemmStridedBatchedEx", unsafe {
            cb::cublasGemmStridedBatchedEx(
                self.handle,
                cb::cublasOperation_t::CUBLAS_OP_N,
                cb::cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                &alpha as *const f32 as *const c_void,
                b as *const c_void,
                cb::cudaDataType::CUDA_R_32F,
                n as i32,
                (k * n) as i64,
                a as *const c_void,
                cb::cudaDataType::CUDA_R_32F,
                k as i32,
                (m * k) as i64,
                &beta as *const f32 as *const c_void,
                c as *mut c_void,
                cb::cudaDataType::CUDA_R_32F,
                n as i32,
                (m * n) as i64,
                batch as i32,
                cb::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cb::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        })
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: handle created above and destroyed once.
        let _ = unsafe { cudarc::cublas::result::destroy_handle(self.handle) };
    }
}

/// Which cuBLASLt product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LtKind {
    /// Row-major C = A·B, BF16 in and out.
    Bf16,
    /// Row-major C = A·Btᵀ with E4M3 inputs and BF16 output (Bt is n×k).
    Fp8,
}

/// A planned cuBLASLt matmul: descriptors, the heuristic's first algorithm
/// and a workspace, ready to run many times.
pub struct LtMatmul {
    handle: lt::cublasLtHandle_t,
    desc: lt::cublasLtMatmulDesc_t,
    a_layout: lt::cublasLtMatrixLayout_t,
    b_layout: lt::cublasLtMatrixLayout_t,
    c_layout: lt::cublasLtMatrixLayout_t,
    algo: lt::cublasLtMatmulAlgo_t,
    workspace: DevBuf,
    kind: LtKind,
}

impl LtMatmul {
    pub fn new(
        gpu: &Gpu,
        m: usize,
        n: usize,
        k: usize,
        kind: LtKind,
    ) -> Result<LtMatmul, BenchError> {
        if !super::libs::cublaslt_available() {
            return Err(BenchError::NoLibrary(
                "cuBLASLt (libcublasLt.so.13 or .12)".into(),
            ));
        }
        gpu.ctx.bind()?;
        let handle = cudarc::cublaslt::result::create_handle().map_err(|e| BenchError::Cublas {
            call: "cublasLtCreate".into(),
            status: format!("{e:?}"),
        })?;
        let workspace = gpu.alloc(workspace_bytes(gpu))?;
        let mut me = LtMatmul {
            handle,
            desc: std::ptr::null_mut(),
            a_layout: std::ptr::null_mut(),
            b_layout: std::ptr::null_mut(),
            c_layout: std::ptr::null_mut(),
            algo: lt::cublasLtMatmulAlgo_t { data: [0; 8] },
            workspace,
            kind,
        };
        // Column-major view: D (n×m, ld n) = op(X) · op(Y), X the first operand.
        // Bf16: X = B (n×k col-major = k×n row-major... stored row-major k×n, so
        //       col-major n×k with ld n), no transpose; Y = A (col-major k×m, ld k).
        // Fp8:  X = Bt stored row-major n×k = col-major k×n (ld k), transposed;
        //       Y = A as above (TN, what FP8 requires).
        let (in_type, x_rows, x_cols, x_ld, trans_x) = match kind {
            LtKind::Bf16 => (
                DType::Bf16,
                n,
                k,
                n,
                cb::cublasOperation_t::CUBLAS_OP_N as i32,
            ),
            LtKind::Fp8 => (
                DType::E4m3,
                k,
                n,
                k,
                cb::cublasOperation_t::CUBLAS_OP_T as i32,
            ),
        };
        let scale = lt::cudaDataType_t::CUDA_R_32F;
        // SAFETY: create/set calls on fresh descriptors owned by `me` (destroyed in Drop).
        unsafe {
            lt_check(
                "cublasLtMatmulDescCreate",
                lt::cublasLtMatmulDescCreate(
                    &mut me.desc,
                    lt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    scale,
                ),
            )?;
            let no = cb::cublasOperation_t::CUBLAS_OP_N as i32;
            lt_check(
                "cublasLtMatmulDescSetAttribute(TRANSA)",
                lt::cublasLtMatmulDescSetAttribute(
                    me.desc,
                    lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                    &trans_x as *const _ as *const c_void,
                    std::mem::size_of_val(&trans_x),
                ),
            )?;
            lt_check(
                "cublasLtMatmulDescSetAttribute(TRANSB)",
                lt::cublasLtMatmulDescSetAttribute(
                    me.desc,
                    lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
                    &no as *const _ as *const c_void,
                    std::mem::size_of_val(&no),
                ),
            )?;
            lt_check(
                "cublasLtMatrixLayoutCreate(X)",
                lt::cublasLtMatrixLayoutCreate(
                    &mut me.a_layout,
                    in_type.lt(),
                    x_rows as u64,
                    x_cols as u64,
                    x_ld as i64,
                ),
            )?;
            lt_check(
                "cublasLtMatrixLayoutCreate(Y)",
                lt::cublasLtMatrixLayoutCreate(
                    &mut me.b_layout,
                    in_type.lt(),
                    k as u64,
                    m as u64,
                    k as i64,
                ),
            )?;
            lt_check(
                "cublasLtMatrixLayoutCreate(D)",
                lt::cublasLtMatrixLayoutCreate(
                    &mut me.c_layout,
                    DType::Bf16.lt(),
                    n as u64,
                    m as u64,
                    n as i64,
                ),
            )?;
            let mut pref: lt::cublasLtMatmulPreference_t = std::ptr::null_mut();
            lt_check(
                "cublasLtMatmulPreferenceCreate",
                lt::cublasLtMatmulPreferenceCreate(&mut pref),
            )?;
            let ws = me.workspace.bytes() as u64;
            let set = lt::cublasLtMatmulPreferenceSetAttribute(
                pref,
                lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &ws as *const u64 as *const c_void,
                std::mem::size_of::<u64>(),
            );
            let mut result: lt::cublasLtMatmulHeuristicResult_t = std::mem::zeroed();
            let mut count = 0i32;
            let heur = lt::cublasLtMatmulAlgoGetHeuristic(
                me.handle,
                me.desc,
                me.a_layout,
                me.b_layout,
                me.c_layout,
                me.c_layout,
                pref,
                1,
                &mut result,
                &mut count,
            );
            lt::cublasLtMatmulPreferenceDestroy(pref);
            lt_check("cublasLtMatmulPreferenceSetAttribute", set)?;
            lt_check("cublasLtMatmulAlgoGetHeuristic", heur)?;
            if count < 1 {
                return Err(BenchError::Unsupported(format!(
                    "cuBLASLt has no algorithm for a {m}x{n}x{k} {kind:?} product on this GPU"
                )));
            }
            me.algo = result.algo;
        }
        Ok(me)
    }

    /// Run D = op(X)·op(Y) with `a` the row-major A operand, `b` B (or Bt
    /// for FP8) and `c` the BF16 output.
    pub fn run(&self, gpu: &Gpu, a: u64, b: u64, c: u64) -> Result<(), BenchError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let _ = self.kind;
        // SAFETY: descriptors built in `new` for these shapes; pointers address such buffers.
        lt_check("cublasLtMatmul", unsafe {
            lt::cublasLtMatmul(
                self.handle,
                self.desc,
                &alpha as *const f32 as *const c_void,
                b as *const c_void,
                self.a_layout,
                a as *const c_void,
                self.b_layout,
                &beta as *const f32 as *const c_void,
                c as *const c_void,
                self.c_layout,
                c as *mut c_void,
                self.c_layout,
                &self.algo,
                self.workspace.ptr() as *mut c_void,
                self.workspace.bytes(),
                gpu.stream.raw() as lt::cudaStream_t,
            )
        })
    }
}

impl Drop for LtMatmul {
    fn drop(&mut self) {
        // SAFETY: each handle was created in `new` (or is null) and is destroyed once.
        unsafe {
            if !self.a_layout.is_null() {
                lt::cublasLtMatrixLayoutDestroy(self.a_layout);
            }
            if !self.b_layout.is_null() {
                lt::cublasLtMatrixLayoutDestroy(self.b_layout);
            }
            if !self.c_layout.is_null() {
                lt::cublasLtMatrixLayoutDestroy(self.c_layout);
            }
            if !self.desc.is_null() {
                lt::cublasLtMatmulDescDestroy(self.desc);
            }
            let _ = cudarc::cublaslt::result::destroy_handle(self.handle);
        }
    }
}
