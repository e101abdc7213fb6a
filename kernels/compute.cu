// Arithmetic lessons: warp divergence, instruction-level parallelism, and the FMA peaks.
// Every floating-point step is an explicit __fmaf_rn so that variants and the CPU reference
// (f32::mul_add) round identically and can be compared bit for bit.

// Divergent: the path depends on the sign of random data, so almost every warp runs both
// loops one after the other with half its lanes masked off.
extern "C" __global__ void divergent_branch(const float* __restrict__ x, float* __restrict__ y,
                                            u64 n, u32 iters) {
    for (u64 i = aisp_tid(); i < n; i += aisp_nthreads()) {
        float v = x[i];
        float acc = v;
        if (v > 0.0f) {
            for (u32 k = 0; k < iters; ++k) acc = __fmaf_rn(acc, 0.9990f, 0.0010f);
        } else {
            for (u32 k = 0; k < iters; ++k) acc = __fmaf_rn(acc, 1.0005f, -0.0007f);
        }
        y[i] = acc;
    }
}

// The branch now selects data (the coefficients), not code: one loop, no divergence.
extern "C" __global__ void predicated_select(const float* __restrict__ x, float* __restrict__ y,
                                             u64 n, u32 iters) {
    for (u64 i = aisp_tid(); i < n; i += aisp_nthreads()) {
        float v = x[i];
        bool pos = v > 0.0f;
        float a = pos ? 0.9990f : 1.0005f;
        float b = pos ? 0.0010f : -0.0007f;
        float acc = v;
        for (u32 k = 0; k < iters; ++k) acc = __fmaf_rn(acc, a, b);
        y[i] = acc;
    }
}

// One dependent chain per thread: each FMA waits for the previous one (~4 cycles), and with
// few warps per SM nothing else fills the gap.
extern "C" __global__ void ilp_chain1(const float* __restrict__ x, float* __restrict__ y, u64 n, u32 iters) {
    for (u64 i = aisp_tid(); i < n; i += aisp_nthreads()) {
        float a = x[i];
#pragma unroll 1
        for (u32 k = 0; k < iters; ++k) a = __fmaf_rn(a, 0.9990f, 0.0010f);
        y[i] = a;
    }
}

// Four independent chains per thread, interleaved: the scheduler issues one while the others
// wait. Same elements, same arithmetic per element as ilp_chain1.
extern "C" __global__ void ilp_chain4(const float* __restrict__ x, float* __restrict__ y, u64 n, u32 iters) {
    u64 stride = aisp_nthreads();
    u64 i = aisp_tid();
    for (; i + 3 * stride < n; i += 4 * stride) {
        float a = x[i], b = x[i + stride], c = x[i + 2 * stride], d = x[i + 3 * stride];
#pragma unroll 4
        for (u32 k = 0; k < iters; ++k) {
            a = __fmaf_rn(a, 0.9990f, 0.0010f);
            b = __fmaf_rn(b, 0.9990f, 0.0010f);
            c = __fmaf_rn(c, 0.9990f, 0.0010f);
            d = __fmaf_rn(d, 0.9990f, 0.0010f);
        }
        y[i] = a;
        y[i + stride] = b;
        y[i + 2 * stride] = c;
        y[i + 3 * stride] = d;
    }
    for (; i < n; i += stride) {
        float a = x[i];
        for (u32 k = 0; k < iters; ++k) a = __fmaf_rn(a, 0.9990f, 0.0010f);
        y[i] = a;
    }
}

// FP32 peak: 8 independent FMA chains per thread, launched with many warps per SM.
// FLOPs = 2 * 8 * iters per thread.
extern "C" __global__ void fma_peak_f32(float* __restrict__ out, u32 iters, float a, float b) {
    float x0 = threadIdx.x * 1e-3f, x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
    float x4 = x0 + 0.4f, x5 = x0 + 0.5f, x6 = x0 + 0.6f, x7 = x0 + 0.7f;
#pragma unroll 8
    for (u32 k = 0; k < iters; ++k) {
        x0 = __fmaf_rn(x0, a, b); x1 = __fmaf_rn(x1, a, b); x2 = __fmaf_rn(x2, a, b); x3 = __fmaf_rn(x3, a, b);
        x4 = __fmaf_rn(x4, a, b); x5 = __fmaf_rn(x5, a, b); x6 = __fmaf_rn(x6, a, b); x7 = __fmaf_rn(x7, a, b);
    }
    out[aisp_tid()] = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
}

// FP64 peak, same shape.
extern "C" __global__ void fma_peak_f64(double* __restrict__ out, u32 iters, double a, double b) {
    double x0 = threadIdx.x * 1e-3, x1 = x0 + 0.1, x2 = x0 + 0.2, x3 = x0 + 0.3;
    double x4 = x0 + 0.4, x5 = x0 + 0.5, x6 = x0 + 0.6, x7 = x0 + 0.7;
#pragma unroll 8
    for (u32 k = 0; k < iters; ++k) {
        x0 = __fma_rn(x0, a, b); x1 = __fma_rn(x1, a, b); x2 = __fma_rn(x2, a, b); x3 = __fma_rn(x3, a, b);
        x4 = __fma_rn(x4, a, b); x5 = __fma_rn(x5, a, b); x6 = __fma_rn(x6, a, b); x7 = __fma_rn(x7, a, b);
    }
    out[aisp_tid()] = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
}
