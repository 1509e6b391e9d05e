// BM3D / CBM3D / V-BM3D: the kernels of one pass. Maths: avdenoise_vs/_reference/ (the oracle):
// _bm3d_matching.py (grouping), _bm3d_stages.py (shrinkage, aggregation), _bm3d_transforms.py.
//
// A generated header (avdenoise_vs/_cuda/_bm3d_source.py, `bm3d_source`) defines, before this:
//   BM_T        frames in the temporal window (2r + 1)
//   BM_C        planes of the pass            BM_JOINT  1: grouped together on channel 0
//   BM_RGB      1: RGB planes, filtered in CBM3D's opponent space (OPP)
//   BM_DTYPE    0 uint8, 1 uint16, 2 float32 (the frames' sample type)
//   BM_RANGE    full-search radius            BM_PSNUM, BM_PSR  predictive search
//   BM_K_HT, BM_K_WIENER   most blocks per group in each stage
//   BM_WARPS    warps (reference blocks) per thread block
//   constant tables: bm_ht_fwd/bm_ht_inv (Bior1.5), bm_wn_fwd/bm_wn_inv (DCT), bm_ht_std
//   (coefficient deviation under unit noise), bm_kaiser, bm_opp and bm_opp_inv (3x3)
//
// The kernels (the host side, _cuda/bm3d.py, chains them on one stream):
//   bm3d_load      window frames -> float planes in 8-bit scale (OPP for RGB), at noisy_at[t],
//                  and at pilot_at[t] from the ref clip when it is the Wiener pilot
//   bm3d_hard      hard thresholding: one warp per reference block of window frame `center`:
//                  match across the window, 3-D transform, threshold, invert, aggregate into
//                  the int64 accumulator of the member's frame (acc_at; 0: not aggregated)
//   bm3d_wiener    the same, matched on pilot_at and shrunk by the pilot's spectra
//   bm3d_finish    the accumulator at acc_at[0] -> basic estimates (float planes at `dst`) or
//                  the output samples; float clips' pixels that no group reached (non-finite
//                  samples in every block over them) keep the values of src[0][0]
// Spatial BM3D: load, hard, finish (basic), wiener, finish, on the workspace's accumulator.
// V-BM3D per frame m's groups: load W(m), hard or wiener into the accumulators of the frames
// of W(m) that still lack them; per output frame: finish its accumulator once every frame of
// W(n) has added to it.
//
// Aggregation adds fixed-point int64 (value * 2^32): integer addition is associative, so the
// sums, and the output, are the same whatever order the warps run in (deterministic, unlike
// float atomics).

#define BM_B 8               // block side
#define BM_BB 64             // samples per block
#define BM_RP 9              // row pitch of a block in shared memory, and its stride:
#define BM_BS 72             // 8 rows of 9, so row and column passes are free of bank conflicts
#define BM_FIX 4294967296.0f // 2^32: fixed-point scale of the accumulators
#define BM_W0 (2 * BM_RANGE + 1)
#define BM_N0 (BM_W0 * BM_W0)        // full-search candidates
#define BM_WP (2 * BM_PSR + 1)
#define BM_NP (BM_PSNUM * BM_WP * BM_WP)  // predictive-search candidates per other frame
#define BM_NCAND (BM_N0 + (BM_T - 1) * BM_NP)
#define BM_INF __int_as_float(0x7f800000)
#define BM_NAN __int_as_float(0x7fc00000)
#define BM_GC (BM_JOINT ? BM_C : 1)  // channels one group filters

#if BM_DTYPE == 0
typedef unsigned char bm_sample;
#elif BM_DTYPE == 1
typedef unsigned short bm_sample;
#else
typedef float bm_sample;
#endif

// Kernel arguments, one NumPy structured scalar by value (8-byte fields: no padding rules).
struct Bm3dArgs {
    long long src[2][BM_T];     // bm3d_load: slot address of each window frame: clip, ref;
                                // bm3d_finish of float clips: src[0][0], the finished frame
    long long noisy_at[BM_T];   // float planes (C, H, pitch) of each window frame, 8-bit scale
    long long pilot_at[BM_T];   // ... of the Wiener stage's pilot
    long long acc_at[BM_T];     // int64 accumulator of each window frame: num (C, H, pitch),
                                // then den; repeats share one; 0: that frame's blocks are
                                // not aggregated (its sums are complete or not wanted)
    long long clear;            // bm3d_finish: 1 zeroes the accumulator as it reads it
    long long dst;              // bm3d_finish with to_pilot: float planes
    long long out;              // output buffer (the slot layout)
    long long plane_off[3];     // element offset of each plane in a slot / the output buffer
    long long width, height;    // plane size
    long long src_pitch;        // slot row pitch, elements
    long long pitch;            // work row pitch, elements
    long long refs_x, refs_y, step;  // reference grid: count per row / column, spacing
    long long center;           // window index of the frame holding the reference blocks
    long long to_pilot;         // bm3d_finish: 1 writes float planes at `dst`, 0 the output
    long long inputs;           // bm3d_load: 1 loads the clip, 2 also the ref (pilot_at)
    double sigma[3];            // noise deviation per channel, 8-bit units
    double lambda_ht;           // hard threshold, noise deviations
    double threshold;           // block-distance limit of the stage
    double scale;               // 255 / peak
    double peak;                // largest sample value (1 for float)
};

__device__ __forceinline__ long long bm_plane(const Bm3dArgs& a) { return a.height * a.pitch; }

// ---- load ------------------------------------------------------------------------------

__device__ __forceinline__ float bm_read(long long slot, long long off, long long idx) {
    return (float)((const bm_sample*)slot)[off + idx];
}

// Working values of one pixel of a frame slot: 8-bit scale, OPP for RGB.
//
// Float clips may hold NaN and infinities. A block with one in any grouped channel takes no
// part (_bm3d_matching.finite_blocks): it forms no group and is never matched, and pixels no
// group reaches keep their input (bm3d_finish). Joint passes put NaN into channel 0, which
// blocks are matched on, wherever any channel is not finite: such a block's distance is then
// NaN, failing every `d < limit` as an out-of-grid candidate's infinity does, and one test of
// the reference block suffices (bm3d_stage). Integer samples are always finite: no code.
__device__ __forceinline__ void bm_pixel(const Bm3dArgs& a, long long slot, long long idx,
                                         float (&v)[BM_C]) {
#pragma unroll
    for (int c = 0; c < BM_C; ++c) v[c] = bm_read(slot, a.plane_off[c], idx) * (float)a.scale;
#if BM_RGB
    float o[3];
#pragma unroll
    for (int i = 0; i < 3; ++i) o[i] = bm_opp[i][0] * v[0] + bm_opp[i][1] * v[1] + bm_opp[i][2] * v[2];
#pragma unroll
    for (int i = 0; i < 3; ++i) v[i] = o[i];
#endif
#if BM_DTYPE == 2 && BM_JOINT
    bool finite = true;
#pragma unroll
    for (int c = 0; c < BM_C; ++c) finite = finite && isfinite(v[c]);
    if (!finite) v[0] = BM_NAN;
#endif
}

// Thread per pixel, z = window frame (+ T for the ref clip): float planes in 8-bit scale.
extern "C" __global__ void bm3d_load(const Bm3dArgs a) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int input = blockIdx.z / BM_T, t = blockIdx.z % BM_T;
    if (x >= a.width || y >= a.height || input >= a.inputs) return;
    const long long slot = a.src[input][t];
    const long long idx = (long long)y * a.src_pitch + x;
    float v[BM_C];
    bm_pixel(a, slot, idx, v);
#if BM_DTYPE == 2
    if (input) {
        // The ref clip is the Wiener pilot, which blocks are matched on: the clip's non-finite
        // samples must exclude their blocks there too.
        float w[BM_C];
        bm_pixel(a, a.src[0][t], idx, w);
#pragma unroll
        for (int c = 0; c < BM_C; ++c)
            if (!isfinite(w[c])) v[c] = BM_NAN;
    }
#endif
    float* dst = (float*)(input ? a.pilot_at[t] : a.noisy_at[t]);
    const long long plane = bm_plane(a);
    const long long base = (long long)y * a.pitch + x;
#pragma unroll
    for (int c = 0; c < BM_C; ++c) dst[base + c * plane] = v[c];
}

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

// The smallest (d, k) of the warp's lanes, in every lane.
__device__ __forceinline__ void bm_warp_min(float& d, unsigned& k) {
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) {
        const float od = __shfl_xor_sync(0xffffffffu, d, s);
        const unsigned ok = __shfl_xor_sync(0xffffffffu, k, s);
        if (bm_less(od, ok, d, k)) {
            d = od;
            k = ok;
        }
    }
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

// Candidates one lane compares per task: vertically adjacent blocks share 7 of their 8 rows,
// so a task loads 8 + BM_ROWS - 1 rows once for BM_ROWS distances.
#define BM_ROWS 4

// Distances ||block - ref||^2 / 64 of the blocks at (y0 + j, x), j < BM_ROWS, on one guide
// plane; the reference block is in registers. Rows past the plane are clamped (those
// candidates are invalid and discarded by the caller).
__device__ __forceinline__ void bm_distances(const float* __restrict__ g, long long pitch,
                                             int height, int y0, int x, const float (&ref)[BM_BB],
                                             float (&out)[BM_ROWS]) {
    float acc[BM_ROWS];
#pragma unroll
    for (int j = 0; j < BM_ROWS; ++j) acc[j] = 0.0f;
#pragma unroll
    for (int r = 0; r < BM_B + BM_ROWS - 1; ++r) {
        const float* row = g + (long long)min(max(y0 + r, 0), height - 1) * pitch + x;
        float v[BM_B];
#pragma unroll
        for (int c = 0; c < BM_B; ++c) v[c] = __ldg(row + c);
#pragma unroll
        for (int j = 0; j < BM_ROWS; ++j) {
            if (r - j < 0 || r - j >= BM_B) continue;
#pragma unroll
            for (int c = 0; c < BM_B; ++c) {
                const float d = v[c] - ref[(r - j) * BM_B + c];
                acc[j] = fmaf(d, d, acc[j]);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < BM_ROWS; ++j) out[j] = acc[j] * (1.0f / BM_BB);
}

// Compare the candidates of one square search window of side `side` whose top-left block is
// (y0, x0), in frame t, and store them from entry `offset` in raster order. `usable(y, x)`
// says whether a block position takes part (inside the grid, not already searched).
template <typename Usable>
__device__ __forceinline__ void bm_window(const float* __restrict__ g, long long pitch, int height,
                                          int grid_w, int t, int y0, int x0, int side,
                                          const float (&ref)[BM_BB], float* sd, unsigned* sk,
                                          int offset, Usable usable, int lane) {
    const int groups = (side + BM_ROWS - 1) / BM_ROWS;
    for (int task = lane; task < side * groups; task += 32) {
        const int dx = task % side, dy0 = (task / side) * BM_ROWS;
        const int x = x0 + dx;
        float d[BM_ROWS];
        bm_distances(g, pitch, height, y0 + dy0, min(max(x, 0), grid_w - 1), ref, d);
#pragma unroll
        for (int j = 0; j < BM_ROWS; ++j) {
            const int dy = dy0 + j, y = y0 + dy;
            if (dy >= side) break;
            const bool ok = usable(y, x);
            sd[offset + dy * side + dx] = ok ? d[j] : BM_INF;
            sk[offset + dy * side + dx] = bm_key(t, ok ? y : 0, ok ? x : 0);
        }
    }
    __syncwarp();
}

// Fill the candidate list of one reference block: the full search in its own frame, then the
// predictive search outward through the window (_bm3d_matching.match_groups). Invalid
// candidates get an infinite distance.
__device__ void bm_search(const long long* frames, long long coff, long long pitch, int height,
                          int grid_h, int grid_w, int t_ref, int ry, int rx,
                          const float* ref_shared, float* sd, unsigned* sk, int lane) {
    float ref[BM_BB];
#pragma unroll
    for (int p = 0; p < BM_BB; ++p) ref[p] = ref_shared[p];
    auto in_grid = [=](int y, int x) { return y >= 0 && y < grid_h && x >= 0 && x < grid_w; };
    bm_window((const float*)frames[t_ref] + coff, pitch, height, grid_w, t_ref, ry - BM_RANGE,
              rx - BM_RANGE, BM_W0, ref, sd, sk, 0, in_grid, lane);
    int offset = BM_N0;
    // Past frames first (t_ref - 1 down to 0), then future ones; each side starts from the
    // reference frame's full search.
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
#pragma unroll
            for (int j = 0; j < BM_PSNUM; ++j) {
                // A block in the window of an earlier seed is that seed's candidate already.
                auto usable = [&](int y, int x) {
                    bool ok = in_grid(y, x) && sy[j] > -100000;
#pragma unroll
                    for (int i = 0; i < j; ++i)
                        ok = ok && !(abs(y - sy[i]) <= BM_PSR && abs(x - sx[i]) <= BM_PSR);
                    return ok;
                };
                bm_window(gt, pitch, height, grid_w, t, sy[j] - BM_PSR, sx[j] - BM_PSR, BM_WP,
                          ref, sd, sk, offset + j * BM_WP * BM_WP, usable, lane);
            }
            prev_begin = offset;
            prev_end = offset + BM_NP;
            offset += BM_NP;
        }
    }
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

// ---- transforms ----------------------------------------------------------------------------

// Shared-memory offset of sample p (raster order) of a block.
__device__ __forceinline__ int bm_at(int p) { return (p / BM_B) * BM_RP + p % BM_B; }

// Apply the 8x8 matrix m to every row (cols = 0) or column (cols = 1) of `n` blocks in shared.
__device__ __forceinline__ void bm_rows(float* blk, int n, const float (*m)[BM_B], bool cols,
                                        int lane) {
    for (int task = lane; task < n * BM_B; task += 32) {
        float* base = blk + (task / BM_B) * BM_BS + (cols ? task % BM_B : (task % BM_B) * BM_RP);
        const int stride = cols ? BM_RP : 1;
        float v[BM_B];
#pragma unroll
        for (int q = 0; q < BM_B; ++q) v[q] = base[q * stride];
#pragma unroll
        for (int j = 0; j < BM_B; ++j) {
            float s = 0.0f;
#pragma unroll
            for (int q = 0; q < BM_B; ++q) s = fmaf(m[j][q], v[q], s);
            base[j * stride] = s;
        }
    }
    __syncwarp();
}

// 2-D transform T B T^T of each block: rows then columns.
__device__ __forceinline__ void bm_2d(float* blk, int n, const float (*m)[BM_B], int lane) {
    bm_rows(blk, n, m, false, lane);
    bm_rows(blk, n, m, true, lane);
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

// ---- one stage -----------------------------------------------------------------------------

__device__ __forceinline__ float bm_warp_sum(float v) {
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
    return v;
}

// Copy the `size` blocks of `group` into `blk`, from channel offset `coff` of `frames`.
__device__ __forceinline__ void bm_gather(float* blk, const long long* frames, long long coff,
                                          long long pitch, const unsigned* group, int size,
                                          int lane) {
    for (int i = lane; i < size * BM_BB; i += 32) {
        const unsigned k = group[i / BM_BB];
        const int p = i % BM_BB;
        const float* src = (const float*)frames[bm_key_t(k)] + coff;
        blk[(i / BM_BB) * BM_BS + bm_at(p)] =
            src[(long long)(bm_key_y(k) + p / BM_B) * pitch + bm_key_x(k) + p % BM_B];
    }
    __syncwarp();
}

// Add `weight` * Kaiser * estimate of each block to num/den of its frame's accumulator.
__device__ __forceinline__ void bm_aggregate(const Bm3dArgs& a, const float* blk,
                                             const unsigned* group, int size, int c, float weight,
                                             int lane) {
    const long long plane = bm_plane(a);
    for (int i = lane; i < size * BM_BB; i += 32) {
        const unsigned k = group[i / BM_BB];
        unsigned long long* num = (unsigned long long*)a.acc_at[bm_key_t(k)];
        if (!num) continue;
        unsigned long long* den = num + BM_C * plane;
        const int p = i % BM_BB;
        const long long at = (long long)c * plane +
                             (long long)(bm_key_y(k) + p / BM_B) * a.pitch + bm_key_x(k) + p % BM_B;
        const float w = weight * bm_kaiser[p];
        const float v = blk[(i / BM_BB) * BM_BS + bm_at(p)];
        atomicAdd(num + at, (unsigned long long)__float2ll_rn(w * v * BM_FIX));
        atomicAdd(den + at, (unsigned long long)__float2ll_rn(w * BM_FIX));
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
// transformed); returns the aggregation weight 1 / ||W||^2.
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
            const float w = b < size ? (total > 0.0f ? energy / total : 1.0f) : 0.0f;
            v[b] *= w;
            norm = fmaf(w, w, norm);
        }
        bm_haar_inverse<BM_K_WIENER>(v, size);
#pragma unroll
        for (int b = 0; b < BM_K_WIENER; ++b)
            if (b < size) blk[b * BM_BS + bm_at(p)] = v[b];
    }
    __syncwarp();
    return 1.0f / fmaxf(bm_warp_sum(norm), 1e-12f);
}

// Shared floats per warp: the reference block, the group's keys, and a region that holds the
// candidate list while matching and the group's blocks (and the pilot's) while filtering.
template <int WIENER>
struct BmShared {
    static constexpr int K = WIENER ? BM_K_WIENER : BM_K_HT;
    static constexpr int GROUP = (WIENER ? 2 : 1) * K * BM_BS;
    static constexpr int REGION = 2 * BM_NCAND > GROUP ? 2 * BM_NCAND : GROUP;
    static constexpr int FLOATS = BM_BB + K + REGION;
};

// One warp per reference block of window frame `center`; blockIdx.z = channel when the
// channels are grouped separately. Stage 0 filters `noisy` matched on itself; stage 1 filters
// `noisy` by Wiener against `pilot`, matched on `pilot`.
template <int WIENER>
__device__ void bm3d_stage(const Bm3dArgs& a) {
    typedef BmShared<WIENER> S;
    extern __shared__ float shared[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long index = (long long)blockIdx.x * BM_WARPS + warp;
    if (index >= a.refs_x * a.refs_y) return;  // whole warps only
    float* ref = shared + warp * S::FLOATS;
    unsigned* group = (unsigned*)(ref + BM_BB);
    float* region = ref + BM_BB + S::K;
    float* sd = region;
    unsigned* sk = (unsigned*)(region + BM_NCAND);

    const int grid_h = (int)a.height - BM_B + 1, grid_w = (int)a.width - BM_B + 1;
    const int ry = min((int)(index / a.refs_x) * (int)a.step, grid_h - 1);
    const int rx = min((int)(index % a.refs_x) * (int)a.step, grid_w - 1);
    const int t_ref = (int)a.center;
    const int c0 = BM_JOINT ? 0 : blockIdx.z;  // the channel blocks are matched on
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
    if (!__all_sync(0xffffffffu, finite)) return;
#endif
    __syncwarp();
    bm_search(guide, c0 * plane, a.pitch, (int)a.height, grid_h, grid_w, t_ref, ry, rx, ref, sd,
              sk, lane);
    const int size = bm_select<S::K>(sd, sk, bm_key(t_ref, ry, rx), (float)a.threshold, group, lane);

    float* blk = region;
    float* pil = region + S::K * BM_BS;
    for (int g = 0; g < BM_GC; ++g) {
        const int c = c0 + g;
        const float sigma = (float)a.sigma[c];
        bm_gather(blk, a.noisy_at, c * plane, a.pitch, group, size, lane);
        float weight;
        if (WIENER) {
            bm_gather(pil, a.pilot_at, c * plane, a.pitch, group, size, lane);
            bm_2d(blk, size, bm_wn_fwd, lane);
            bm_2d(pil, size, bm_wn_fwd, lane);
            weight = bm_wiener(blk, pil, size, sigma, lane);
            bm_2d(blk, size, bm_wn_inv, lane);
        } else {
            bm_2d(blk, size, bm_ht_fwd, lane);
            weight = bm_hard_threshold(blk, size, sigma, (float)a.lambda_ht, lane);
            bm_2d(blk, size, bm_ht_inv, lane);
        }
        bm_aggregate(a, blk, group, size, c, weight, lane);
        __syncwarp();
    }
}

extern "C" __global__ void __launch_bounds__(BM_WARPS * 32) bm3d_hard(const Bm3dArgs a) {
    bm3d_stage<0>(a);
}

extern "C" __global__ void __launch_bounds__(BM_WARPS * 32) bm3d_wiener(const Bm3dArgs a) {
    bm3d_stage<1>(a);
}

// ---- export and finish --------------------------------------------------------------------

// Thread per pixel: num / den of the accumulator at acc_at[0] into float planes at `dst`
// (basic estimates) or into the output samples; `clear` leaves the accumulator zero. Float
// clips: a pixel that no group reached (den 0, see bm_pixel) keeps the value of frame src[0][0]
// there: its working value in a basic estimate, its very sample in the output.
extern "C" __global__ void bm3d_finish(const Bm3dArgs a) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= a.width || y >= a.height) return;
    const long long plane = bm_plane(a);
    const long long at = (long long)y * a.pitch + x;
    long long* num = (long long*)a.acc_at[0];
    long long* den = num + BM_C * plane;
    float v[BM_C];
#if BM_DTYPE == 2
    unsigned kept = 0;  // bit c: channel c was reached by no group
#endif
#pragma unroll
    for (int c = 0; c < BM_C; ++c) {
        const long long i = at + c * plane;
        v[c] = (float)((double)num[i] / (double)den[i]);
#if BM_DTYPE == 2
        if (den[i] == 0) kept |= 1u << c;
#endif
        if (a.clear) num[i] = den[i] = 0;
    }
    if (a.to_pilot) {
#if BM_DTYPE == 2
        if (kept) {
            float w[BM_C];
            bm_pixel(a, a.src[0][0], (long long)y * a.src_pitch + x, w);
#pragma unroll
            for (int c = 0; c < BM_C; ++c)
                if (kept & (1u << c)) v[c] = w[c];
        }
#endif
#pragma unroll
        for (int c = 0; c < BM_C; ++c) ((float*)a.dst)[at + c * plane] = v[c];
        return;
    }
#if BM_RGB
    float o[3];
#pragma unroll
    for (int i = 0; i < 3; ++i)
        o[i] = bm_opp_inv[i][0] * v[0] + bm_opp_inv[i][1] * v[1] + bm_opp_inv[i][2] * v[2];
#pragma unroll
    for (int i = 0; i < 3; ++i) v[i] = o[i];
#endif
    const long long idx = (long long)y * a.src_pitch + x;
    const float back = (float)(1.0 / a.scale);
#pragma unroll
    for (int c = 0; c < BM_C; ++c) {
        const float s = v[c] * back;
#if BM_DTYPE == 2
        const float* src = (const float*)a.src[0][0] + a.plane_off[c] + idx;
        ((float*)a.out)[a.plane_off[c] + idx] = kept & (1u << c) ? *src : s;
#else
        const float q = fminf(fmaxf(rintf(s), 0.0f), (float)a.peak);
        ((bm_sample*)a.out)[a.plane_off[c] + idx] = (bm_sample)q;
#endif
    }
}
