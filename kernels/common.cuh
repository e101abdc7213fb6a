// Prepended by aisp to every kernel file before NVRTC compiles it (src/bench/kernels.rs).
// NVRTC has no standard headers here, so everything a kernel needs is defined below.
//
// Random inputs are drawn on the device from a counter-based hash. src/bench/rng.rs holds
// the same function for the CPU, bit for bit, so references are computed on the host
// without copying the inputs back, and every run can use a fresh seed.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;
typedef unsigned char u8;

// splitmix64 finaliser over (seed, index); the high 32 bits are returned.
__device__ __forceinline__ u32 aisp_hash(u32 seed, u64 i) {
    u64 z = (u64)seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (u32)(z >> 32);
}

// Uniform in [lo, hi): 24 random bits scaled, with an explicit fused multiply-add so the
// CPU mirror (f32::mul_add) rounds identically.
__device__ __forceinline__ float aisp_uniform(u32 seed, u64 i, float lo, float hi) {
    float t = (float)(aisp_hash(seed, i) >> 8) * (1.0f / 16777216.0f);
    return __fmaf_rn(hi - lo, t, lo);
}

__device__ __forceinline__ u64 aisp_tid() {
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ u64 aisp_nthreads() {
    return (u64)gridDim.x * blockDim.x;
}
