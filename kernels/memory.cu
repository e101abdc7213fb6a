// Memory-access lessons and the device-memory bandwidth roof.
// Bytes counted for every copy: n elements read + n elements written.

// Baseline for coalescing: consecutive threads touch addresses n/stride elements apart,
// so each warp's 32 loads land in 32 different 32-byte sectors (8x the bytes fetched).
extern "C" __global__ void copy_f32_strided(const float* __restrict__ in, float* __restrict__ out,
                                            u64 n, u32 stride) {
    u64 rows = n / stride;
    for (u64 t = aisp_tid(); t < n; t += aisp_nthreads()) {
        u64 idx = (t % stride) * rows + t / stride;
        out[idx] = in[idx];
    }
}

// Coalesced 4-byte copy: a warp reads 128 contiguous bytes.
extern "C" __global__ void copy_f32(const float* __restrict__ in, float* __restrict__ out, u64 n) {
    for (u64 i = aisp_tid(); i < n; i += aisp_nthreads()) out[i] = in[i];
}

// 16-byte accesses: a quarter of the load/store instructions for the same bytes.
extern "C" __global__ void copy_f32x4(const float4* __restrict__ in, float4* __restrict__ out, u64 n4) {
    for (u64 i = aisp_tid(); i < n4; i += aisp_nthreads()) out[i] = in[i];
}

// 16-byte accesses with four independent loads in flight per thread before the first store.
extern "C" __global__ void copy_f32x4_unroll4(const float4* __restrict__ in, float4* __restrict__ out,
                                              u64 n4) {
    u64 stride = aisp_nthreads();
    u64 i = aisp_tid();
    for (; i + 3 * stride < n4; i += 4 * stride) {
        float4 a = in[i];
        float4 b = in[i + stride];
        float4 c = in[i + 2 * stride];
        float4 d = in[i + 3 * stride];
        out[i] = a;
        out[i + stride] = b;
        out[i + 2 * stride] = c;
        out[i + 3 * stride] = d;
    }
    for (; i < n4; i += stride) out[i] = in[i];
}

// As above with streaming cache hints (evict-first): the data is touched once.
extern "C" __global__ void copy_f32x4_stream(const float4* __restrict__ in, float4* __restrict__ out,
                                             u64 n4) {
    u64 stride = aisp_nthreads();
    u64 i = aisp_tid();
    for (; i + 3 * stride < n4; i += 4 * stride) {
        float4 a = __ldcs(in + i);
        float4 b = __ldcs(in + i + stride);
        float4 c = __ldcs(in + i + 2 * stride);
        float4 d = __ldcs(in + i + 3 * stride);
        __stcs(out + i, a);
        __stcs(out + i + stride, b);
        __stcs(out + i + 2 * stride, c);
        __stcs(out + i + 3 * stride, d);
    }
    for (; i < n4; i += stride) __stcs(out + i, __ldcs(in + i));
}

// Cache sweep, whole-GPU working set: every pass shifts each thread's starting point by a
// block's worth of float4s times a large odd factor, so an SM reads different lines on every
// pass and the data must come from L2 (working set <= L2) or device memory (larger).
// Four passes are interleaved (four independent loads in flight per thread) so that small
// working sets, which give each thread few elements, are not limited by load latency.
// `passes` must be a multiple of 4.
__device__ __forceinline__ u64 sweep_shift(u32 p, u64 n4) {
    return ((u64)p * 7919ull * blockDim.x) % n4;
}

__device__ __forceinline__ u64 sweep_wrap(u64 j, u64 n4) {
    return j >= n4 ? j - n4 : j;
}

extern "C" __global__ void read_sweep_global(const float4* __restrict__ buf, u64 n4, u32 passes,
                                            float* __restrict__ sink) {
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    u64 stride = aisp_nthreads();
    for (u32 p = 0; p + 3 < passes; p += 4) {
        u64 s0 = sweep_shift(p, n4), s1 = sweep_shift(p + 1, n4);
        u64 s2 = sweep_shift(p + 2, n4), s3 = sweep_shift(p + 3, n4);
        for (u64 i = aisp_tid(); i < n4; i += stride) {
            float4 v0 = buf[sweep_wrap(i + s0, n4)];
            float4 v1 = buf[sweep_wrap(i + s1, n4)];
            float4 v2 = buf[sweep_wrap(i + s2, n4)];
            float4 v3 = buf[sweep_wrap(i + s3, n4)];
            a0 += v0.x + v0.y + v0.z + v0.w;
            a1 += v1.x + v1.y + v1.z + v1.w;
            a2 += v2.x + v2.y + v2.z + v2.w;
            a3 += v3.x + v3.y + v3.z + v3.w;
        }
    }
    float acc = (a0 + a1) + (a2 + a3);
    if (acc == 1.2345678e30f) sink[blockIdx.x] = acc;
}

// Cache sweep, per-SM working set: every block reads the same n4 float4s `passes` times, so
// a set that fits in L1 is served from L1 after the first pass.
extern "C" __global__ void read_sweep_block(const float4* __restrict__ buf, u64 n4, u32 passes,
                                           float* __restrict__ sink) {
    float acc = 0.0f;
    for (u32 p = 0; p < passes; ++p) {
        for (u64 i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 v = buf[i];
            acc += v.x + v.y + v.z + v.w;
        }
    }
    if (acc == 1.2345678e30f) sink[blockIdx.x] = acc;
}
