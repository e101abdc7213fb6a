// Transpose of a rows x cols row-major matrix into cols x rows. Launch with 32 x 8 threads
// per block and a (cols/32, rows/32) grid; rows and cols are multiples of 32.
#define TILE 32
#define BLOCK_ROWS 8

// Reads are coalesced, writes stride by `rows` elements: every store is its own sector.
extern "C" __global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out,
                                           u32 rows, u32 cols) {
    u32 x = blockIdx.x * TILE + threadIdx.x;
    u32 y = blockIdx.y * TILE + threadIdx.y;
    for (u32 j = 0; j < TILE; j += BLOCK_ROWS)
        out[(u64)x * rows + (y + j)] = in[(u64)(y + j) * cols + x];
}

// Staged through shared memory so both global reads and writes are coalesced, but reading a
// tile column hits one bank 32 times (a 32-way bank conflict).
extern "C" __global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out,
                                           u32 rows, u32 cols) {
    __shared__ float tile[TILE][TILE];
    u32 x = blockIdx.x * TILE + threadIdx.x;
    u32 y = blockIdx.y * TILE + threadIdx.y;
    for (u32 j = 0; j < TILE; j += BLOCK_ROWS)
        tile[threadIdx.y + j][threadIdx.x] = in[(u64)(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (u32 j = 0; j < TILE; j += BLOCK_ROWS)
        out[(u64)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

// One padding column shifts each row by one bank: column reads hit 32 different banks.
extern "C" __global__ void transpose_tiled_padded(const float* __restrict__ in, float* __restrict__ out,
                                                  u32 rows, u32 cols) {
    __shared__ float tile[TILE][TILE + 1];
    u32 x = blockIdx.x * TILE + threadIdx.x;
    u32 y = blockIdx.y * TILE + threadIdx.y;
    for (u32 j = 0; j < TILE; j += BLOCK_ROWS)
        tile[threadIdx.y + j][threadIdx.x] = in[(u64)(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (u32 j = 0; j < TILE; j += BLOCK_ROWS)
        out[(u64)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
