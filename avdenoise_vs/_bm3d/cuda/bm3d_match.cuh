// ---- block matching ----------------------------------------------------------------------

// Candidate keys order ties as the oracle does: window frame, then raster position.
__device__ __forceinline__ unsigned bm_key(int t, int y, int x) {
    return ((unsigned)t << 26) | ((unsigned)y << 13) | (unsigned)x;
}
__device__ __forceinline__ int bm_key_t(unsigned k) { return k >> 26; }
__device__ __forceinline__ int bm_key_y(unsigned k) { return (k >> 13) & 0x1fff; }
__device__ __forceinline__ int bm_key_x(unsigned k) { return k & 0x1fff; }

__device__ __forceinline__ bool bm_less(float d0, unsigned k0, float d1, unsigned k1) {
    return d0 < d1 || (d0 == d1 && k0 < k1);
}

// The smallest (d, k) of the warp's lanes, in every lane. Distances are never negative (or
// NaN: those fail every comparison before they get here), so their bits order as unsigned
// integers do, and from Ampere on two single-instruction warp reductions find the minimum.
__device__ __forceinline__ void bm_warp_min(float& d, unsigned& k) {
#if __CUDA_ARCH__ >= 800
    const unsigned bits = __reduce_min_sync(0xffffffffu, __float_as_uint(d));
    k = __reduce_min_sync(0xffffffffu, __float_as_uint(d) == bits ? k : 0xffffffffu);
    d = __uint_as_float(bits);
#else
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) {
        const float od = __shfl_xor_sync(0xffffffffu, d, s);
        const unsigned ok = __shfl_xor_sync(0xffffffffu, k, s);
        if (bm_less(od, ok, d, k)) {
            d = od;
            k = ok;
        }
    }
#endif
}

// Smallest (distance, key) of entries [begin, end) that is larger than (after_d, after_k)
// and whose distance is below `limit`, across the warp; (inf, ~0) when there is none.
__device__ __forceinline__ void bm_next(const float* sd, const unsigned* sk, int begin, int end,
                                        float after_d, unsigned after_k, float limit, int lane,
                                        float& best_d, unsigned& best_k) {
    best_d = BM_INF;
    best_k = 0xffffffffu;
    for (int i = begin + lane; i < end; i += 32) {
        const float d = sd[i];
        const unsigned k = sk[i];
        if (d < limit && bm_less(after_d, after_k, d, k) && bm_less(d, k, best_d, best_k)) {
            best_d = d;
            best_k = k;
        }
    }
    bm_warp_min(best_d, best_k);
}

// Distances ||block - ref||^2 / 64 of the blocks at (y0 + j, x), j < ROWS, on one guide
// plane; the reference block is in registers. Vertically adjacent blocks share 7 of their 8
// rows, so a task loads 8 + ROWS - 1 rows once for ROWS distances (the generator picks ROWS
// for each window's side: BM_ROWS_FULL, BM_ROWS_PS). Rows past the plane are clamped (those
// candidates are invalid and discarded by the caller).
template <int ROWS>
__device__ __forceinline__ void bm_distances(const float* __restrict__ g, long long pitch,
                                             int height, int y0, int x, const float (&ref)[BM_BB],
                                             float (&out)[ROWS]) {
    float acc[ROWS];
#pragma unroll
    for (int j = 0; j < ROWS; ++j) acc[j] = 0.0f;
#pragma unroll
    for (int r = 0; r < BM_B + ROWS - 1; ++r) {
        const float* row = g + (long long)min(max(y0 + r, 0), height - 1) * pitch + x;
        float v[BM_B];
#pragma unroll
        for (int c = 0; c < BM_B; ++c) v[c] = __ldg(row + c);
#pragma unroll
        for (int j = 0; j < ROWS; ++j) {
            if (r - j < 0 || r - j >= BM_B) continue;
#pragma unroll
            for (int c = 0; c < BM_B; ++c) {
                const float d = v[c] - ref[(r - j) * BM_B + c];
                acc[j] = fmaf(d, d, acc[j]);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < ROWS; ++j) out[j] = acc[j] * (1.0f / BM_BB);
}

// Compare the candidates of one square search window of side `side` whose top-left block is
// (y0, x0), in frame t, and store them from entry `offset` in raster order, ROWS a task.
// `usable(y, x)` says whether a block position takes part (inside the grid, not already
// searched).
template <int ROWS, typename Usable>
__device__ __forceinline__ void bm_window(const float* __restrict__ g, long long pitch, int height,
                                          int grid_w, int t, int y0, int x0, int side,
                                          const float (&ref)[BM_BB], float* sd, unsigned* sk,
                                          int offset, Usable usable, int lane) {
    const int groups = (side + ROWS - 1) / ROWS;
    for (int task = lane; task < side * groups; task += 32) {
        const int dx = task % side, dy0 = (task / side) * ROWS;
        const int x = x0 + dx;
        float d[ROWS];
        bm_distances<ROWS>(g, pitch, height, y0 + dy0, min(max(x, 0), grid_w - 1), ref, d);
#pragma unroll
        for (int j = 0; j < ROWS; ++j) {
            const int dy = dy0 + j, y = y0 + dy;
            if (dy >= side) break;
            const bool ok = usable(y, x);
            sd[offset + dy * side + dx] = ok ? d[j] : BM_INF;
            sk[offset + dy * side + dx] = bm_key(t, ok ? y : 0, ok ? x : 0);
        }
    }
    __syncwarp();
}

// Element j of a small array indexed at run time, by selects, so that the array stays in
// registers.
template <int N>
__device__ __forceinline__ int bm_pick(const int (&v)[N], int j) {
    int out = v[0];
#pragma unroll
    for (int i = 1; i < N; ++i) out = i == j ? v[i] : out;
    return out;
}

// The predictive search outward through the window (_bm3d/reference/matching.py, match_groups): in each
// other frame, the windows around the BM_PSNUM best candidates of the frame before it, from
// entry BM_N0 on. Past frames first (t_ref - 1 down to 0), then future ones; each side starts
// from the reference frame's full search. The seeds' windows share one copy of the distance
// code (a loop, not unrolled): code size is what NVRTC's time in a cold fleet goes on.
__device__ void bm_predictive(const long long* frames, long long coff, long long pitch,
                              int height, int grid_h, int grid_w, int t_ref,
                              const float (&ref)[BM_BB], float* sd, unsigned* sk, int lane) {
    auto in_grid = [=](int y, int x) { return y >= 0 && y < grid_h && x >= 0 && x < grid_w; };
    int offset = BM_N0;
    for (int side = 0; side < 2; ++side) {
        int prev_begin = 0, prev_end = BM_N0;
        const int first = side == 0 ? t_ref - 1 : t_ref + 1;
        const int dir = side == 0 ? -1 : 1;
        for (int t = first; t >= 0 && t < BM_T; t += dir) {
            int sy[BM_PSNUM], sx[BM_PSNUM];
            float last_d = -BM_INF;
            unsigned last_k = 0;
#pragma unroll
            for (int j = 0; j < BM_PSNUM; ++j) {
                float d;
                unsigned k;
                // Seeds need not pass the threshold; invalid candidates never seed.
                bm_next(sd, sk, prev_begin, prev_end, last_d, last_k, BM_INF, lane, d, k);
                sy[j] = d < BM_INF ? bm_key_y(k) : -100000;
                sx[j] = d < BM_INF ? bm_key_x(k) : -100000;
                if (d < BM_INF) {
                    last_d = d;
                    last_k = k;
                }
            }
            const float* gt = (const float*)frames[t] + coff;
#pragma unroll 1
            for (int j = 0; j < BM_PSNUM; ++j) {
                const int seed_y = bm_pick(sy, j), seed_x = bm_pick(sx, j);
                // A block in the window of an earlier seed is that seed's candidate already.
                auto usable = [&](int y, int x) {
                    bool ok = in_grid(y, x) && seed_y > -100000;
#pragma unroll
                    for (int i = 0; i < BM_PSNUM - 1; ++i)
                        ok = ok && (i >= j || !(abs(y - sy[i]) <= BM_PSR &&
                                                abs(x - sx[i]) <= BM_PSR));
                    return ok;
                };
                bm_window<BM_ROWS_PS>(gt, pitch, height, grid_w, t, seed_y - BM_PSR,
                                      seed_x - BM_PSR, BM_WP, ref, sd, sk,
                                      offset + j * BM_WP * BM_WP, usable, lane);
            }
            prev_begin = offset;
            prev_end = offset + BM_NP;
            offset += BM_NP;
        }
    }
}

// Fill the candidate list of one reference block: the full search in its own frame, then the
// predictive search through the window. Invalid candidates get an infinite distance.
__device__ void bm_search(const long long* frames, long long coff, long long pitch, int height,
                          int grid_h, int grid_w, int t_ref, int ry, int rx,
                          const float* ref_shared, float* sd, unsigned* sk, int lane) {
    float ref[BM_BB];
#pragma unroll
    for (int p = 0; p < BM_BB; ++p) ref[p] = ref_shared[p];
    auto in_grid = [=](int y, int x) { return y >= 0 && y < grid_h && x >= 0 && x < grid_w; };
    bm_window<BM_ROWS_FULL>((const float*)frames[t_ref] + coff, pitch, height, grid_w, t_ref,
                            ry - BM_RANGE, rx - BM_RANGE, BM_W0, ref, sd, sk, 0, in_grid, lane);
    // A window of one frame compiles no predictive search at all.
    if constexpr (BM_T > 1)
        bm_predictive(frames, coff, pitch, height, grid_h, grid_w, t_ref, ref, sd, sk, lane);
}

// Candidates a lane keeps sorted in registers while the group is formed.
#define BM_KEEP 4

// Insert (d, k) into the ascending list (bd, bk) of BM_KEEP entries if it beats the last.
__device__ __forceinline__ void bm_keep(float (&bd)[BM_KEEP], unsigned (&bk)[BM_KEEP], float d,
                                        unsigned k) {
    if (!bm_less(d, k, bd[BM_KEEP - 1], bk[BM_KEEP - 1])) return;
    bool placed = false;
#pragma unroll
    for (int i = BM_KEEP - 1; i >= 0; --i) {
        if (placed) continue;
        if (i > 0 && bm_less(d, k, bd[i - 1], bk[i - 1])) {
            bd[i] = bd[i - 1];
            bk[i] = bk[i - 1];
        } else {
            bd[i] = d;
            bk[i] = k;
            placed = true;
        }
    }
}

// The lane's BM_KEEP smallest eligible entries after (after_d, after_k); returns whether it
// has more eligible entries than it kept.
__device__ __forceinline__ bool bm_refill(const float* sd, const unsigned* sk, float limit,
                                          unsigned ref_key, float after_d, unsigned after_k,
                                          float (&bd)[BM_KEEP], unsigned (&bk)[BM_KEEP], int lane) {
    int eligible = 0;
#pragma unroll
    for (int i = 0; i < BM_KEEP; ++i) {
        bd[i] = BM_INF;
        bk[i] = 0xffffffffu;
    }
    for (int i = lane; i < BM_NCAND; i += 32) {
        const float d = sd[i];
        const unsigned k = sk[i];
        if (d < limit && k != ref_key && bm_less(after_d, after_k, d, k)) {
            ++eligible;
            bm_keep(bd, bk, d, k);
        }
    }
    return eligible > BM_KEEP;
}

// The group: the reference block, then the nearest candidates under the threshold (ties by
// frame and position), at most K; returns its size rounded down to a power of two. Each lane
// keeps its few best entries sorted; each round takes the warp's smallest head, and a lane
// rescans its entries only when its list runs out.
template <int K>
__device__ int bm_select(const float* sd, const unsigned* sk, unsigned ref_key, float limit,
                         unsigned* group, int lane) {
    float bd[BM_KEEP];
    unsigned bk[BM_KEEP];
    bool more = bm_refill(sd, sk, limit, ref_key, -BM_INF, 0, bd, bk, lane);
    if (lane == 0) group[0] = ref_key;
    int count = 1;
    while (count < K) {
        float d = bd[0];
        unsigned k = bk[0];
        bm_warp_min(d, k);
        if (!(d < BM_INF)) break;
        if (lane == 0) group[count] = k;
        ++count;
        if (bk[0] == k) {  // keys are unique: this lane held the winner
#pragma unroll
            for (int i = 0; i < BM_KEEP - 1; ++i) {
                bd[i] = bd[i + 1];
                bk[i] = bk[i + 1];
            }
            bd[BM_KEEP - 1] = BM_INF;
            bk[BM_KEEP - 1] = 0xffffffffu;
        }
        const bool empty = more && !(bd[0] < BM_INF);
        if (__any_sync(0xffffffffu, empty) && empty)
            more = bm_refill(sd, sk, limit, ref_key, d, k, bd, bk, lane);
    }
    __syncwarp();
    int size = 1;
    while (size * 2 <= count) size *= 2;
    return size;
}

