// FP32 matrix multiply C = A * B, row-major: A is M x K, B is K x N, C is M x N.
// FLOPs = 2 * M * N * K. The cuBLAS variants of the same lesson live in src/bench/blas.rs.

// One thread per output element, every operand straight from global memory: each A and B
// element is fetched from memory (or cache) once per use, K times per output tile.
// Launch: block 16 x 16, grid (N/16, M/16).
extern "C" __global__ void sgemm_naive(const float* __restrict__ A, const float* __restrict__ B,
                                       float* __restrict__ C, u32 M, u32 N, u32 K) {
    u32 col = blockIdx.x * blockDim.x + threadIdx.x;
    u32 row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (u32 k = 0; k < K; ++k) acc = __fmaf_rn(A[(u64)row * K + k], B[(u64)k * N + col], acc);
    C[(u64)row * N + col] = acc;
}

// 32 x 32 tiles staged in shared memory: each element loaded from global memory is reused 32
// times. Launch: block 32 x 32, grid (N/32, M/32); M, N, K multiples of 32.
extern "C" __global__ void sgemm_smem_tiled(const float* __restrict__ A, const float* __restrict__ B,
                                            float* __restrict__ C, u32 M, u32 N, u32 K) {
    __shared__ float As[32][32];
    __shared__ float Bs[32][32];
    u32 tx = threadIdx.x, ty = threadIdx.y;
    u32 row = blockIdx.y * 32 + ty;
    u32 col = blockIdx.x * 32 + tx;
    float acc = 0.0f;
    for (u32 k0 = 0; k0 < K; k0 += 32) {
        As[ty][tx] = A[(u64)row * K + k0 + tx];
        Bs[ty][tx] = B[(u64)(k0 + ty) * N + col];
        __syncthreads();
#pragma unroll
        for (u32 k = 0; k < 32; ++k) acc = __fmaf_rn(As[ty][k], Bs[k][tx], acc);
        __syncthreads();
    }
    C[(u64)row * N + col] = acc;
}

// 64 x 64 block tiles, 16-deep K slices, and a 4 x 4 block of outputs per thread held in
// registers: each shared-memory value read feeds 4 FMAs. Launch: block 16 x 16, grid
// (N/64, M/64); M, N multiples of 64, K a multiple of 16.
extern "C" __global__ void sgemm_reg_tiled(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, u32 M, u32 N, u32 K) {
    __shared__ float As[16][64 + 1];  // As[k][m], padded so the transposing store is conflict-free
    __shared__ float Bs[16][64];
    u32 tx = threadIdx.x, ty = threadIdx.y;
    u32 tid = ty * 16 + tx;
    u32 row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    for (u32 k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            u32 idx = tid + l * 256;
            u32 r = idx / 16, c = idx % 16;
            As[c][r] = A[(u64)(row0 + r) * K + k0 + c];
            u32 br = idx / 64, bc = idx % 64;
            Bs[br][bc] = B[(u64)(k0 + br) * N + col0 + bc];
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) C[(u64)(row0 + ty + 16 * i) * N + col0 + tx + 16 * j] = acc[i][j];
}
