// Harness kernels: random fill, L2 flush, and the conversions the GEMM lessons need.

extern "C" __global__ void fill_uniform_f32(float* out, u64 n, u32 seed, float lo, float hi) {
    for (u64 i = aisp_tid(); i < n; i += aisp_nthreads()) out[i] = aisp_uniform(seed, i, lo, hi);
}

// Reads `n4` float4 and writes one value per block so the loads cannot be removed. Used
// between repetitions to evict the measured kernel's data from L2 with clean lines only
// (a write-based flush would leave dirty lines whose write-back lands in the next timing).
extern "C" __global__ void l2_flush_read(const float4* __restrict__ buf, u64 n4, float* sink) {
    float acc = 0.0f;
    for (u64 i = aisp_tid(); i < n4; i += aisp_nthreads()) {
        float4 v = buf[i];
        acc += v.x + v.y + v.z + v.w;
    }
    // The branch is never taken for finite data; it keeps the sum alive.
    if (acc == 1.2345678e30f) sink[blockIdx.x] = acc;
}

// Round-to-nearest-even conversions through PTX (no cuda_bf16.h under NVRTC).
extern "C" __global__ void f32_to_bf16(const float* __restrict__ in, u16* __restrict__ out, u64 n) {
    for (u64 i = aisp_tid(); i < n; i += aisp_nthreads()) {
        u16 h;
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(in[i]));
        out[i] = h;
    }
}

extern "C" __global__ void f32_to_f16(const float* __restrict__ in, u16* __restrict__ out, u64 n) {
    for (u64 i = aisp_tid(); i < n; i += aisp_nthreads()) {
        u16 h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(in[i]));
        out[i] = h;
    }
}

// FP8 E4M3 with saturation to the finite range. The instruction exists from sm_89 (Ada);
// aisp calls this kernel only on such GPUs, and older targets compile a trap.
extern "C" __global__ void f32_to_e4m3(const float* __restrict__ in, u8* __restrict__ out, u64 n) {
#if __CUDA_ARCH__ >= 890
    for (u64 i = aisp_tid(); i < n; i += aisp_nthreads()) {
        u16 pair;
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(in[i]));
        out[i] = (u8)(pair & 0xff);
    }
#else
    __trap();
#endif
}
