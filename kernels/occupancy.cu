// Occupancy versus registers. The same body is compiled twice: once with __launch_bounds__(256, 1)
// (one block per SM promised, so the compiler may use up to 255 registers; sm_90 build: 80),
// and once under __launch_bounds__(256, 4), which caps registers at 64 per thread so that four
// 256-thread blocks (1024 threads) fit on an SM with 64K registers. The body keeps 16 float4
// loads in flight per thread, which is what makes the default build register-hungry.

__device__ __forceinline__ float occ_poly(float v) {
    float p = 0.03125f;
    p = __fmaf_rn(p, v, -0.0625f);
    p = __fmaf_rn(p, v, 0.125f);
    p = __fmaf_rn(p, v, -0.25f);
    p = __fmaf_rn(p, v, 0.5f);
    p = __fmaf_rn(p, v, 1.0f);
    return p;
}

__device__ __forceinline__ float4 occ_poly4(float4 v) {
    return make_float4(occ_poly(v.x), occ_poly(v.y), occ_poly(v.z), occ_poly(v.w));
}

#define OCC_LOADS 16

__device__ __forceinline__ void occ_body(const float4* __restrict__ in, float4* __restrict__ out, u64 n4) {
    u64 stride = aisp_nthreads();
    u64 i = aisp_tid();
    for (; i + (OCC_LOADS - 1) * stride < n4; i += OCC_LOADS * stride) {
        float4 v[OCC_LOADS];
#pragma unroll
        for (int k = 0; k < OCC_LOADS; ++k) v[k] = in[i + k * stride];
#pragma unroll
        for (int k = 0; k < OCC_LOADS; ++k) out[i + k * stride] = occ_poly4(v[k]);
    }
    for (; i < n4; i += stride) out[i] = occ_poly4(in[i]);
}

extern "C" __global__ void __launch_bounds__(256, 1)
occupancy_default(const float4* __restrict__ in, float4* __restrict__ out, u64 n4) {
    occ_body(in, out, n4);
}

extern "C" __global__ void __launch_bounds__(256, 4)
occupancy_bounded(const float4* __restrict__ in, float4* __restrict__ out, u64 n4) {
    occ_body(in, out, n4);
}
