// ---- thread-block tiles --------------------------------------------------------------------
//
// A thread block filters TX x TY neighbouring reference blocks of window frame `center`, one
// warp each (BmShared: the stage's BM_*_TX and BM_*_TY). Their groups' blocks in that frame lie within the tile's reach: each reference
// block's full search spans BM_RANGE around it. With `a.tile`, the thread block adds those
// blocks into a shared copy of the frame's accumulator over the reach, then adds the copy to
// the accumulator once: one global atomic per pixel of the reach and sum instead of one per
// sample of every group (BM3DCUDA's settings, 4 x 2 warps: 3400 instead of 16384). The copy is
// int64 fixed point like the accumulator, so the sums, and the output, stay the same whatever
// order the warps run in.

struct BmTile {
    int tx, ty;  // position in the grid of tiles
    int y0, x0;  // top-left pixel of the reach
    int h, w;    // size of the reach, pixels
};

// Top-left pixel of the reference block at grid index i along an axis whose last block
// position is `last` (the last one is clamped to the plane, as the oracle's grid is).
__device__ __forceinline__ int bm_ref_at(int i, long long step, int last) {
    return min(i * (int)step, last);
}

template <int TX, int TY>
__device__ __forceinline__ BmTile bm_tile(const Bm3dArgs& a, int grid_h, int grid_w) {
    const int tiles_x = ((int)a.refs_x + TX - 1) / TX;
    BmTile t;
    t.tx = blockIdx.x % tiles_x;
    t.ty = blockIdx.x / tiles_x;
    const int iy0 = t.ty * TY, iy1 = min(iy0 + TY, (int)a.refs_y) - 1;
    const int ix0 = t.tx * TX, ix1 = min(ix0 + TX, (int)a.refs_x) - 1;
    t.y0 = max(bm_ref_at(iy0, a.step, grid_h - 1) - BM_RANGE, 0);
    t.x0 = max(bm_ref_at(ix0, a.step, grid_w - 1) - BM_RANGE, 0);
    t.h = min(bm_ref_at(iy1, a.step, grid_h - 1) + BM_RANGE, grid_h - 1) + BM_B - t.y0;
    t.w = min(bm_ref_at(ix1, a.step, grid_w - 1) + BM_RANGE, grid_w - 1) + BM_B - t.x0;
    return t;
}

// Shared sums as two 32-bit words an entry, each added to by a 32-bit atomic (Hopper has no
// native 64-bit shared atomic add; CUDA's spins on a compare-and-swap, which made the
// hard-thresholding kernel 13 % slower): the low word adds each value's low BM_SPLIT bits, the
// high word the rest (value >> BM_SPLIT, signed), and the entry's sum is high * 2^BM_SPLIT +
// low, the int64 sum exactly. No add waits for another's result, as a carry from the low word
// would (its old value): a lane's atomics overlap. Neither word overflows: an entry takes at
// most a tile's WARPS * K <= BM_SHARED_ADDS adds (BmShared asserts it), the low word at most
// 256 * (2^24 - 1) < 2^32, and values below BM_SHARED_MAX in magnitude keep the high word
// within 256 * 2^23 = 2^31. Larger ones (estimates beyond 2^15 in 8-bit scale, 128 times a
// float clip's peak, at weight 1) go straight to the accumulator (bm_add_block).
#define BM_SPLIT 24
#define BM_SHARED_ADDS 256
#define BM_SHARED_MAX (1ll << 47)

__device__ __forceinline__ bool bm_shared_fits(unsigned long long v) {
    return llabs((long long)v) < BM_SHARED_MAX;
}

__device__ __forceinline__ void bm_shared_add(unsigned long long* p, unsigned long long v) {
    unsigned* words = (unsigned*)p;
    atomicAdd(words, (unsigned)v & ((1u << BM_SPLIT) - 1u));
    const int high = (int)((long long)v >> BM_SPLIT);
    if (high) atomicAdd((int*)words + 1, high);
}

// The int64 sum an entry of shared sums holds.
__device__ __forceinline__ unsigned long long bm_shared_value(unsigned long long entry) {
    const long long high = (int)(entry >> 32);
    return (unsigned long long)(high * (1ll << BM_SPLIT) + (long long)(unsigned)entry);
}

// Zero the shared sums of the reach: num (h w entries), then den.
__device__ __forceinline__ void bm_tile_clear(unsigned long long* sums, const BmTile& t) {
    for (int i = threadIdx.x; i < 2 * t.h * t.w; i += blockDim.x) sums[i] = 0;
}

// Add the shared sums of channel c to the accumulator of frame `center`, leaving them zero.
__device__ __forceinline__ void bm_tile_flush(const Bm3dArgs& a, const BmTile& t,
                                              unsigned long long* sums, int c) {
    const long long plane = bm_plane(a);
    unsigned long long* num = (unsigned long long*)a.acc_at[a.center] + c * plane;
    unsigned long long* den = num + BM_C * plane;
    const int n = t.h * t.w;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        if (!(sums[i] | sums[n + i])) continue;
        const unsigned long long sn = bm_shared_value(sums[i]), sd = bm_shared_value(sums[n + i]);
        const long long at = (long long)(t.y0 + i / t.w) * a.pitch + t.x0 + i % t.w;
        atomicAdd(num + at, sn);
        atomicAdd(den + at, sd);
        sums[i] = sums[n + i] = 0;
    }
}
