// ---- one stage -----------------------------------------------------------------------------

__device__ __forceinline__ float bm_warp_sum(float v) {
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
    return v;
}

// A lane's samples of every block: p = lane and p = lane + 32 (raster order), the same two
// in each block, so that a block's key is decoded once per lane and the weights of the
// lane's two positions once per group.
static_assert(BM_BB == 64, "a lane takes samples lane and lane + 32 of each block");
#define BM_LANE_SAMPLES 2

// Copy the `size` blocks of `group` into `blk`, from channel offset `coff` of `frames`.
__device__ __forceinline__ void bm_gather(float* blk, const long long* frames, long long coff,
                                          long long pitch, const unsigned* group, int size,
                                          int lane) {
    for (int b = 0; b < size; ++b) {
        const unsigned k = group[b];
        const float* src = (const float*)frames[bm_key_t(k)] + coff +
                           (long long)bm_key_y(k) * pitch + bm_key_x(k);
#pragma unroll
        for (int h = 0; h < BM_LANE_SAMPLES; ++h) {
            const int p = lane + 32 * h;
            blk[b * BM_BS + bm_at(p)] = src[(long long)(p / BM_B) * pitch + p % BM_B];
        }
    }
    __syncwarp();
}

// Add the lane's samples `v` of one block (key k), times their weights `w` (den: `ww`, the
// same in fixed point), to num/den of the block's frame: through the thread block's shared sums
// when the block lies in frame `center` and they exist, else straight to the accumulator.
__device__ __forceinline__ void bm_add_block(const Bm3dArgs& a, unsigned k,
                                             const float (&v)[BM_LANE_SAMPLES],
                                             const float (&w)[BM_LANE_SAMPLES],
                                             const unsigned long long (&ww)[BM_LANE_SAMPLES],
                                             int c, unsigned long long* tile_sums,
                                             const BmTile& tile, int lane) {
    const long long plane = bm_plane(a);
    const int t = bm_key_t(k), ky = bm_key_y(k), kx = bm_key_x(k);
    const bool shared_sums = tile_sums && t == (int)a.center;
    unsigned long long* num = (unsigned long long*)a.acc_at[t];
    if (!shared_sums && !num) return;
#pragma unroll
    for (int h = 0; h < BM_LANE_SAMPLES; ++h) {
        const int p = lane + 32 * h;
        const int y = ky + p / BM_B, x = kx + p % BM_B;
        const unsigned long long wv = (unsigned long long)__float2ll_rn(w[h] * v[h] * BM_FIX);
        if (shared_sums && bm_shared_fits(wv)) {
            const int at = (y - tile.y0) * tile.w + x - tile.x0;
            bm_shared_add(tile_sums + at, wv);
            bm_shared_add(tile_sums + tile.h * tile.w + at, ww[h]);
        } else {  // frame `center` has an accumulator whenever it has shared sums
            const long long at = (long long)c * plane + (long long)y * a.pitch + x;
            atomicAdd(num + at, wv);
            atomicAdd(num + BM_C * plane + at, ww[h]);
        }
    }
}

// Blocks whose samples a lane reads from shared memory before it adds any of them: the reads
// then overlap rather than each waiting behind the previous block's atomics (2-3 % of the
// hard-thresholding kernel, docs/BENCHMARKS.md "BM3D kernels").
#define BM_AGG_BATCH 4

// Add `weight` * Kaiser * estimate of each block to num/den of its frame (bm_add_block).
__device__ __forceinline__ void bm_aggregate(const Bm3dArgs& a, const float* blk,
                                             const unsigned* group, int size, int c, float weight,
                                             unsigned long long* tile_sums, const BmTile& tile,
                                             int lane) {
    float w[BM_LANE_SAMPLES];
    unsigned long long ww[BM_LANE_SAMPLES];
#pragma unroll
    for (int h = 0; h < BM_LANE_SAMPLES; ++h) {
        w[h] = weight * bm_kaiser[lane + 32 * h];
        ww[h] = (unsigned long long)__float2ll_rn(w[h] * BM_FIX);
    }
    for (int b0 = 0; b0 < size; b0 += BM_AGG_BATCH) {
        float v[BM_AGG_BATCH][BM_LANE_SAMPLES];
#pragma unroll
        for (int i = 0; i < BM_AGG_BATCH; ++i)
#pragma unroll
            for (int h = 0; h < BM_LANE_SAMPLES; ++h)
                v[i][h] = b0 + i < size ? blk[(b0 + i) * BM_BS + bm_at(lane + 32 * h)] : 0.0f;
#pragma unroll
        for (int i = 0; i < BM_AGG_BATCH; ++i)
            if (b0 + i < size) bm_add_block(a, group[b0 + i], v[i], w, ww, c, tile_sums, tile, lane);
    }
}

// Hard thresholding of one channel of a group in `blk` (already 2-D transformed); returns the
// aggregation weight 1 / N_kept (the group DC is always kept).
__device__ float bm_hard_threshold(float* blk, int size, float sigma, float lambda, int lane) {
    int kept = 0;
    for (int p = lane; p < BM_BB; p += 32) {
        float v[BM_K_HT];
#pragma unroll
        for (int b = 0; b < BM_K_HT; ++b) v[b] = b < size ? blk[b * BM_BS + bm_at(p)] : 0.0f;
        bm_haar<BM_K_HT>(v, size);
        const float limit = lambda * sigma * bm_ht_std[p];
#pragma unroll
        for (int b = 0; b < BM_K_HT; ++b) {
            const bool keep = b < size && (fabsf(v[b]) > limit || (b == 0 && p == 0));
            v[b] = keep ? v[b] : 0.0f;
            kept += keep;
        }
        bm_haar_inverse<BM_K_HT>(v, size);
#pragma unroll
        for (int b = 0; b < BM_K_HT; ++b)
            if (b < size) blk[b * BM_BS + bm_at(p)] = v[b];
    }
    __syncwarp();
    return 1.0f / bm_warp_sum((float)kept);
}

// Empirical Wiener shrinkage of the noisy group `blk` by the pilot group `pil` (both 2-D
// transformed); returns the aggregation weight 1 / ||W||^2. The group DC keeps W = 1, as in
// bm_hard_threshold (the reference's wiener says why), so ||W||^2 >= 1.
__device__ float bm_wiener(float* blk, const float* pil, int size, float sigma, int lane) {
    float norm = 0.0f;
    const float s2 = sigma * sigma;
    for (int p = lane; p < BM_BB; p += 32) {
        float v[BM_K_WIENER], e[BM_K_WIENER];
#pragma unroll
        for (int b = 0; b < BM_K_WIENER; ++b) {
            v[b] = b < size ? blk[b * BM_BS + bm_at(p)] : 0.0f;
            e[b] = b < size ? pil[b * BM_BS + bm_at(p)] : 0.0f;
        }
        bm_haar<BM_K_WIENER>(v, size);
        bm_haar<BM_K_WIENER>(e, size);
#pragma unroll
        for (int b = 0; b < BM_K_WIENER; ++b) {
            const float energy = e[b] * e[b], total = energy + s2;
            const bool dc = b == 0 && p == 0;
            const float w = b < size ? (dc ? 1.0f : total > 0.0f ? energy / total : 1.0f) : 0.0f;
            v[b] *= w;
            norm = fmaf(w, w, norm);
        }
        bm_haar_inverse<BM_K_WIENER>(v, size);
#pragma unroll
        for (int b = 0; b < BM_K_WIENER; ++b)
            if (b < size) blk[b * BM_BS + bm_at(p)] = v[b];
    }
    __syncwarp();
    return 1.0f / bm_warp_sum(norm);
}

// Shared floats per warp: the reference block, the group's keys, and a region that holds the
// candidate list while matching and the group's blocks (and the pilot's) while filtering. The
// thread block's tile sums, when it has them, follow its warps' floats. The tile: TX x TY
// reference blocks, a warp each; registers for SM_WARPS warps an SM (the spec's: 16, 128
// registers a thread, or 24, 80 registers, where a spatial pass's thread blocks fit three to
// an SM's shared memory; launch.py).
template <int WIENER>
struct BmShared {
    static constexpr int TX = WIENER ? BM_WIENER_TX : BM_HARD_TX;
    static constexpr int TY = WIENER ? BM_WIENER_TY : BM_HARD_TY;
    static constexpr int WARPS = TX * TY;
    static constexpr int SM_WARPS = WIENER ? BM_WIENER_SM_WARPS : BM_HARD_SM_WARPS;
    static constexpr int MIN_BLOCKS = WARPS >= SM_WARPS ? 1 : SM_WARPS / WARPS;
    static constexpr int K = WIENER ? BM_K_WIENER : BM_K_HT;
    static_assert(WARPS * K <= BM_SHARED_ADDS, "a tile's shared sums would overflow");
    static constexpr int GROUP = (WIENER ? 2 : 1) * K * BM_BS;
    static constexpr int REGION = 2 * BM_NCAND > GROUP ? 2 * BM_NCAND : GROUP;
    static constexpr int FLOATS = BM_BB + K + REGION;
    static_assert(FLOATS % 2 == 0, "the tile's int64 sums follow the warps' floats");
};

// Match the reference block at grid index (ix, iy) of window frame `center` and form its
// group (keys at `group`, candidates in `region`); returns the group's size, 0 when the
// reference block holds a non-finite sample.
template <int WIENER>
__device__ int bm_match(const Bm3dArgs& a, int ix, int iy, int c0, float* ref, unsigned* group,
                        float* region, int lane) {
    typedef BmShared<WIENER> S;
    float* sd = region;
    unsigned* sk = (unsigned*)(region + BM_NCAND);
    const int grid_h = (int)a.height - BM_B + 1, grid_w = (int)a.width - BM_B + 1;
    const int ry = bm_ref_at(iy, a.step, grid_h - 1), rx = bm_ref_at(ix, a.step, grid_w - 1);
    const int t_ref = (int)a.center;
    const long long plane = bm_plane(a);
    const long long* guide = WIENER ? a.pilot_at : a.noisy_at;

    const float* centre = (const float*)guide[t_ref] + c0 * plane;
#if BM_DTYPE == 2
    bool finite = true;
#endif
    for (int p = lane; p < BM_BB; p += 32) {
        const float v = centre[(long long)(ry + p / BM_B) * a.pitch + rx + p % BM_B];
        ref[p] = v;
#if BM_DTYPE == 2
        finite = finite && isfinite(v);
#endif
    }
#if BM_DTYPE == 2
    // A reference block holding a non-finite sample forms no group (see bm_pixel); the guide
    // shows every one that counts (joint passes mark channel 0, pilots the clip's as well).
    if (!__all_sync(0xffffffffu, finite)) return 0;
#endif
    __syncwarp();
    bm_search(guide, c0 * plane, a.pitch, (int)a.height, grid_h, grid_w, t_ref, ry, rx, ref, sd,
              sk, lane);
    return bm_select<S::K>(sd, sk, bm_key(t_ref, ry, rx), (float)a.threshold, group, lane);
}

// Filter channel c of a formed group of `size` blocks (`group`) in `region` and aggregate it.
template <int WIENER>
__device__ void bm_filter(const Bm3dArgs& a, int c, int size, const unsigned* group,
                          float* region, unsigned long long* tile_sums, const BmTile& tile,
                          int lane) {
    typedef BmShared<WIENER> S;
    const long long plane = bm_plane(a);
    const float sigma = (float)a.sigma[c];
    float* blk = region;
    float* pil = region + S::K * BM_BS;
    bm_gather(blk, a.noisy_at, c * plane, a.pitch, group, size, lane);
    float weight;
    if (WIENER) {
        bm_gather(pil, a.pilot_at, c * plane, a.pitch, group, size, lane);
        bm_2d<bm_wn_fwd>(blk, size, lane);
        bm_2d<bm_wn_fwd>(pil, size, lane);
        weight = bm_wiener(blk, pil, size, sigma, lane);
        bm_2d<bm_wn_inv>(blk, size, lane);
    } else {
        bm_2d<bm_ht_fwd>(blk, size, lane);
        weight = bm_hard_threshold(blk, size, sigma, (float)a.lambda_ht, lane);
        bm_2d<bm_ht_inv>(blk, size, lane);
    }
    bm_aggregate(a, blk, group, size, c, weight, tile_sums, tile, lane);
    __syncwarp();
}

// One thread block per tile of TX x TY reference blocks of window frame `center`, one warp
// each; blockIdx.z = channel when the channels are grouped separately. Stage 0 filters
// `noisy` matched on itself; stage 1 filters `noisy` by Wiener against `pilot`, matched on
// `pilot`. Every warp reaches the thread block's barriers, those past the grid's edge too.
template <int WIENER>
__device__ void bm3d_stage(const Bm3dArgs& a) {
    typedef BmShared<WIENER> S;
    extern __shared__ float shared[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const BmTile tile =
        bm_tile<S::TX, S::TY>(a, (int)a.height - BM_B + 1, (int)a.width - BM_B + 1);
    const int ix = tile.tx * S::TX + warp % S::TX, iy = tile.ty * S::TY + warp / S::TX;
    float* ref = shared + warp * S::FLOATS;
    unsigned* group = (unsigned*)(ref + BM_BB);
    float* region = ref + BM_BB + S::K;
    unsigned long long* tile_sums =
        a.tile && a.acc_at[a.center] ? (unsigned long long*)(shared + S::WARPS * S::FLOATS)
                                     : nullptr;
    if (tile_sums) {
        bm_tile_clear(tile_sums, tile);
        __syncthreads();
    }
    const int c0 = BM_JOINT ? 0 : blockIdx.z;  // the channel blocks are matched on
    const int size = ix < a.refs_x && iy < a.refs_y
                         ? bm_match<WIENER>(a, ix, iy, c0, ref, group, region, lane)
                         : 0;
    for (int g = 0; g < BM_GC; ++g) {
        if (size) bm_filter<WIENER>(a, c0 + g, size, group, region, tile_sums, tile, lane);
        if (tile_sums) {
            __syncthreads();
            bm_tile_flush(a, tile, tile_sums, c0 + g);
            if (g + 1 < BM_GC) __syncthreads();
        }
    }
}

typedef BmShared<0> BmHard;
typedef BmShared<1> BmWiener;

#ifdef BM_NAME_HARD
extern "C" __global__ void __launch_bounds__(BmHard::WARPS * 32, BmHard::MIN_BLOCKS) BM_NAME_HARD(const Bm3dArgs a) {
    bm3d_stage<0>(a);
}
#endif

#ifdef BM_NAME_WIENER
extern "C" __global__ void __launch_bounds__(BmWiener::WARPS * 32, BmWiener::MIN_BLOCKS) BM_NAME_WIENER(const Bm3dArgs a) {
    bm3d_stage<1>(a);
}
#endif

