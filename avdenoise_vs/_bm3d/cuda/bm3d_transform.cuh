// ---- transforms ----------------------------------------------------------------------------

// Shared-memory offset of sample p (raster order) of a block.
__device__ __forceinline__ int bm_at(int p) { return (p / BM_B) * BM_RP + p % BM_B; }

// Apply the 8x8 matrix M (a generated struct: M::apply) to every row (cols = 0) or column
// (cols = 1) of `n` blocks in shared memory.
template <typename M>
__device__ __forceinline__ void bm_rows(float* blk, int n, bool cols, int lane) {
    for (int task = lane; task < n * BM_B; task += 32) {
        float* base = blk + (task / BM_B) * BM_BS + (cols ? task % BM_B : (task % BM_B) * BM_RP);
        const int stride = cols ? BM_RP : 1;
        float v[BM_B], o[BM_B];
#pragma unroll
        for (int q = 0; q < BM_B; ++q) v[q] = base[q * stride];
        M::apply(v, o);
#pragma unroll
        for (int j = 0; j < BM_B; ++j) base[j * stride] = o[j];
    }
    __syncwarp();
}

// 2-D transform M B M^T of each block: rows then columns.
template <typename M>
__device__ __forceinline__ void bm_2d(float* blk, int n, int lane) {
    bm_rows<M>(blk, n, false, lane);
    bm_rows<M>(blk, n, true, lane);
}

// Orthonormal dyadic Haar along the group (rows in wavedec order) on the first `size` of K
// values: levels of S = size, size/2, ..., 2 values, each turning pairs into S/2 sums then
// S/2 differences. Levels are template parameters so every index is static (registers).
template <int S>
__device__ __forceinline__ void bm_haar_level(float* v, bool inverse) {
    const float h = 0.70710678118654752f;
    float tmp[S];
#pragma unroll
    for (int k = 0; k < S / 2; ++k) {
        if (inverse) {
            tmp[2 * k] = (v[k] + v[S / 2 + k]) * h;
            tmp[2 * k + 1] = (v[k] - v[S / 2 + k]) * h;
        } else {
            tmp[k] = (v[2 * k] + v[2 * k + 1]) * h;
            tmp[S / 2 + k] = (v[2 * k] - v[2 * k + 1]) * h;
        }
    }
#pragma unroll
    for (int k = 0; k < S; ++k) v[k] = tmp[k];
}

template <int S>
__device__ __forceinline__ void bm_haar(float* v, int size) {
    if constexpr (S > 1) {
        if (S <= size) bm_haar_level<S>(v, false);
        bm_haar<S / 2>(v, size);
    }
}

template <int S>
__device__ __forceinline__ void bm_haar_inverse(float* v, int size) {
    if constexpr (S > 1) {
        bm_haar_inverse<S / 2>(v, size);
        if (S <= size) bm_haar_level<S>(v, true);
    }
}

