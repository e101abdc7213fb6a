// Sum of n floats into one double. Launch with 256 threads per block.
// The accumulator is a double so that the per-element atomic baseline is still correct
// (a float accumulator would stop growing once the sum dwarfs each addend).

// One global atomic per element: every add serialises on one address in L2.
extern "C" __global__ void reduce_atomic_global(const float* __restrict__ x, u64 n, double* out) {
    for (u64 i = aisp_tid(); i < n; i += aisp_nthreads()) atomicAdd(out, (double)x[i]);
}

// Classic shared-memory tree: one element per thread, log2(256) steps with a barrier each,
// one atomic per block.
extern "C" __global__ void reduce_shared_tree(const float* __restrict__ x, u64 n, double* out) {
    __shared__ float s[256];
    u64 i = aisp_tid();
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (u32 half = blockDim.x / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, (double)s[0]);
}

// Each thread sums many float4s in registers (grid-stride), warps reduce with shuffles, the
// block combines its 8 warp sums in shared memory, and one atomic per block remains.
extern "C" __global__ void reduce_warp_shuffle(const float4* __restrict__ x4, u64 n4, double* out) {
    __shared__ float warp_sums[32];
    float acc = 0.0f;
    for (u64 i = aisp_tid(); i < n4; i += aisp_nthreads()) {
        float4 v = x4[i];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        u32 nwarps = (blockDim.x + 31) >> 5;
        float v = lane < nwarps ? warp_sums[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0) atomicAdd(out, (double)v);
    }
}
