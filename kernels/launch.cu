// Launch overhead and streams.

// Does nothing: its launch-to-completion time is the launch latency.
extern "C" __global__ void empty_kernel() {}

// One tiny step of work: y = a*y + b on a few thousand elements.
extern "C" __global__ void tiny_step(float* __restrict__ y, u32 n, float a, float b) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __fmaf_rn(y[i], a, b);
}

// The same `steps` steps in one launch. Correct here because each element's steps depend
// only on that element; steps that read other blocks' results would need a grid barrier.
extern "C" __global__ void persistent_steps(float* __restrict__ y, u32 n, float a, float b, u32 steps) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = y[i];
        for (u32 s = 0; s < steps; ++s) v = __fmaf_rn(v, a, b);
        y[i] = v;
    }
}

// Per-chunk work for the streams lesson: `iters` dependent FMAs per element, calibrated by
// the host so that a chunk's compute takes about as long as its copy.
extern "C" __global__ void chunk_compute(const float* __restrict__ in, float* __restrict__ out,
                                         u64 n, u32 iters) {
    for (u64 i = aisp_tid(); i < n; i += aisp_nthreads()) {
        float v = in[i];
        for (u32 k = 0; k < iters; ++k) v = __fmaf_rn(v, 0.9990f, 0.0010f);
        out[i] = v;
    }
}
