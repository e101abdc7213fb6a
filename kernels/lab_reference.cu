// Built-in references of the kernel lab (aisp_benchmark_kernel): a
// shared-memory transpose per element size and one-block-per-row f32
// reductions, softmax and layernorm. Written for correctness first and
// reasonable speed; their outputs are themselves checked against a CPU
// computation in float64 before any candidate is compared with them.
// Compiled without the common prelude: this file stands alone.

#define LAB_TILE 32
#define LAB_ROWS 8

#define LAB_TRANSPOSE(NAME, T)                                                         \
extern "C" __global__ void NAME(const T* __restrict__ x, T* __restrict__ y,            \
                                long long R, long long C) {                            \
    __shared__ T tile[LAB_TILE][LAB_TILE + 1];                                         \
    long long c0 = (long long)blockIdx.x * LAB_TILE, r0 = (long long)blockIdx.y * LAB_TILE; \
    for (int j = threadIdx.y; j < LAB_TILE; j += LAB_ROWS) {                           \
        long long r = r0 + j, c = c0 + threadIdx.x;                                    \
        if (r < R && c < C) tile[j][threadIdx.x] = x[r * C + c];                       \
    }                                                                                  \
    __syncthreads();                                                                   \
    for (int j = threadIdx.y; j < LAB_TILE; j += LAB_ROWS) {                           \
        long long c = c0 + j, r = r0 + threadIdx.x;                                    \
        if (r < R && c < C) y[c * R + r] = tile[threadIdx.x][j];                       \
    }                                                                                  \
}

LAB_TRANSPOSE(lab_transpose_u8, unsigned char)
LAB_TRANSPOSE(lab_transpose_u16, unsigned short)
LAB_TRANSPOSE(lab_transpose_u32, unsigned int)
LAB_TRANSPOSE(lab_transpose_u64, unsigned long long)

// Sum of `v` over the block (256 threads); every thread gets the result.
__device__ float lab_block_sum(float v, float* scratch) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += scratch[w];
    return t;
}

__device__ float lab_block_max(float v, float* scratch) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = __int_as_float(0xff800000);
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t = fmaxf(t, scratch[w]);
    return t;
}

extern "C" __global__ void lab_reduce_rows(const float* __restrict__ x, float* __restrict__ y,
                                           long long R, long long C) {
    __shared__ float scratch[32];
    for (long long r = blockIdx.x; r < R; r += gridDim.x) {
        const float* row = x + r * C;
        float s = 0.f;
        for (long long c = threadIdx.x; c < C; c += blockDim.x) s += row[c];
        s = lab_block_sum(s, scratch);
        if (threadIdx.x == 0) y[r] = s;
    }
}

extern "C" __global__ void lab_softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                                            long long R, long long C) {
    __shared__ float scratch[32];
    for (long long r = blockIdx.x; r < R; r += gridDim.x) {
        const float* row = x + r * C;
        float m = __int_as_float(0xff800000);
        for (long long c = threadIdx.x; c < C; c += blockDim.x) m = fmaxf(m, row[c]);
        m = lab_block_max(m, scratch);
        float s = 0.f;
        for (long long c = threadIdx.x; c < C; c += blockDim.x) s += expf(row[c] - m);
        s = lab_block_sum(s, scratch);
        for (long long c = threadIdx.x; c < C; c += blockDim.x) y[r * C + c] = expf(row[c] - m) / s;
    }
}

extern "C" __global__ void lab_layernorm_rows(const float* __restrict__ x, float* __restrict__ y,
                                              long long R, long long C, float eps) {
    __shared__ float scratch[32];
    for (long long r = blockIdx.x; r < R; r += gridDim.x) {
        const float* row = x + r * C;
        float s = 0.f;
        for (long long c = threadIdx.x; c < C; c += blockDim.x) s += row[c];
        float mean = lab_block_sum(s, scratch) / (float)C;
        float q = 0.f;
        for (long long c = threadIdx.x; c < C; c += blockDim.x) {
            float d = row[c] - mean;
            q += d * d;
        }
        float rstd = rsqrtf(lab_block_sum(q, scratch) / (float)C + eps);
        for (long long c = threadIdx.x; c < C; c += blockDim.x) y[r * C + c] = (row[c] - mean) * rstd;
    }
}
