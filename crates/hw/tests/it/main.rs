//! The integration tests of `aisp-hw`: every CUDA kernel compiled by NVRTC
//! (where NVRTC is present).

mod kernels_compile;
