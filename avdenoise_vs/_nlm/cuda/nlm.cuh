// Fused spatio-temporal non-local means: one launch per pass and frame.
//
// A generated header (avdenoise_vs/_nlm/cuda/source.py, `nlm_source`) defines, before this text:
//   NLM_NAME      kernel name (avdenoise_nlm_main_<every specialisation value>)
//   NLM_A         search radius a          NLM_S   patch radius s
//   NLM_R         temporal radius r        NLM_TH  output rows per block (32, 16 or 8)
//   NLM_C         channels (1, 2 or 3)     NLM_DIST 0 luma, 1 chroma, 2 yuv, 3 rgb
//   NLM_WMODE     0 Welsch, 1/2/3 Bisquare A/B/C
//   NLM_DTYPE     0 uint8, 1 uint16, 2 float32
//   NLM_HAS_REF   1 when the weights come from a separate guide clip
//   NLM_CTR_REGS  1 to keep each phase-1 thread's centre samples in registers
//
// Maths: avdenoise_vs/_nlm/reference.py (the oracle). Integer samples are staged as float
// code values; the host folds the channel weights, the patch area, h and 1/peak^2 into
// `factor` (and log2(e) for Welsch), so the weight argument is `ssd * factor`.
//
// Frame borders as in KNLMeansCL (the oracle's Notes): samples outside the frame stage as
// zero; an offset before the centre in (t, dy, dx) order leaves out the patch terms whose
// centre pixel is outside the frame and keeps a candidate outside (its value 0), an offset
// after it leaves out the terms whose candidate pixel is outside and drops such a candidate.
// Only blocks whose region reaches past the frame (NLM_S + NLM_A of the tile) check.
// Float clips leave non-finite patch terms out and drop non-finite candidates, so that a
// NaN or inf sample never spreads; integer clips cannot have them and pay nothing.
//
// Every weight is computed 2^96 times too large and weights below the (scaled) smallest
// normal float32, 2^-126, are zero, as in the oracle and KNLMeansCL. The scaling keeps the
// cut-off exact: unscaled, exp2f would round and flush weights near 2^-126 on its own terms.
// Scaling num, den, the running maximum and its floor alike leaves the output unchanged.
// Largest weight 2^96, sums of <= 17*33*33 of them: no overflow.
//
// Block: NLM_TW x NLM_TH output pixels, NLM_THREADS threads. Per frame k of the window the
// guide tile plus patch and search halo is staged in shared memory; per search offset q:
//   phase 1  thread per (column of tile+patch halo, NLM_RB rows): pixel distances in
//            registers, vertical box sums by a sliding window -> vsum[buf]
//   phase 2  thread per (row, NLM_SEG columns) of the output tile: horizontal box sums by a
//            sliding window, weight, accumulate num/den/max in registers.
// vsum is double-buffered, so one barrier per offset suffices: phase 1 of q+1 writes the
// other buffer, and phase 1 of q+2 cannot start before every thread passed the barrier
// after phase 1 of q+1, that is, finished phase 2 of q.

#define NLM_TW 32
#define NLM_SEG 4
#define NLM_RB 8
#define NLM_WIN (2 * NLM_R + 1)
#define NLM_THREADS (NLM_TW * NLM_TH / NLM_SEG)
#define NLM_EW (NLM_TW + 2 * NLM_S)  // centre guide region: tile + patch halo
#define NLM_EH (NLM_TH + 2 * NLM_S)
#define NLM_NW (NLM_EW + 2 * NLM_A)  // neighbour guide region: + search halo
#define NLM_NH (NLM_EH + 2 * NLM_A)
#define NLM_NP (NLM_NW | 1)  // odd pitches: phase 2 walks down a column, one bank per row
#define NLM_VP (NLM_EW | 1)
#define NLM_QW (NLM_TW + 2 * NLM_A)  // value region (ref only): tile + search halo
#define NLM_QH (NLM_TH + 2 * NLM_A)
#define NLM_QP (NLM_QW | 1)
#define NLM_CS (NLM_EH * NLM_EW)  // channel strides of the staged regions
#define NLM_NS (NLM_NH * NLM_NP)
#define NLM_QS (NLM_QH * NLM_QP)

#if NLM_DTYPE == 0
typedef unsigned char nlm_sample;
#elif NLM_DTYPE == 1
typedef unsigned short nlm_sample;
#else
typedef float nlm_sample;
#endif

// Kernel arguments, passed by value as one NumPy structured scalar (all 8-byte fields, so
// the host dtype in _nlm/cuda/nlm_pass.py matches without padding rules).
struct NlmArgs {
    long long guide[NLM_WIN];  // device address of each window frame's guide slot
    long long value[NLM_WIN];  // ... and of its value slot (the same without ref)
    long long out;             // device address of the output buffer
    long long plane_off[3];    // element offset of each channel's plane inside a slot
    long long out_off[3];      // ... and inside the output buffer
    long long width, height, pitch, out_pitch;  // plane size; pitches in elements
    long long first;   // first window frame that takes part (KNLMeansCL's shorter window
                       // at the clip's start): frames first .. NLM_WIN - 1 - first
    double factor;     // weight argument per unit of channel-weighted squared code difference
    double wref;       // centre weight, as a multiple of the largest weight
    double peak;       // largest code value (integer output is clamped to it)
    double red_scale;  // 1 / (6 * peak): RGB "redmean" term per code value
};

// Stage a (rows x cols) region whose top-left frame coordinate is (gx0, gy0) as float code
// values, zero outside the frame; `PITCH_S` is the shared row pitch.
template <int ROWS, int COLS, int PITCH_S, int CSTRIDE>
__device__ __forceinline__ void nlm_stage(float* __restrict__ dst,
                                          const nlm_sample* __restrict__ base,
                                          const long long* plane_off, int gx0, int gy0,
                                          int width, int height, int pitch) {
    const nlm_sample* src[NLM_C];
#pragma unroll
    for (int ch = 0; ch < NLM_C; ++ch) src[ch] = base + plane_off[ch];
    for (int idx = threadIdx.x; idx < ROWS * COLS; idx += NLM_THREADS) {
        const int r = idx / COLS;
        const int c = idx - r * COLS;
        const int gy = gy0 + r;
        const int gx = gx0 + c;
        const bool inside = (unsigned)gy < (unsigned)height && (unsigned)gx < (unsigned)width;
        const long long off = inside ? (long long)gy * pitch + gx : 0;
#pragma unroll
        for (int ch = 0; ch < NLM_C; ++ch)
            dst[ch * CSTRIDE + r * PITCH_S + c] = inside ? (float)src[ch][off] : 0.0f;
    }
}

// Channel-weighted squared difference of the centre sample at `a` and the neighbour at `b`
// (channel weights of LUMA, CHROMA and YUV are folded into `factor` by the host). The
// centre's channel stride is NLM_CS in shared memory, NLM_P1_ROWS in registers.
#if NLM_CTR_REGS
#define NLM_ACS (NLM_RB + 2 * NLM_S)
#else
#define NLM_ACS NLM_CS
#endif
__device__ __forceinline__ float nlm_distance(const float* a, const float* b, float red_scale) {
#if NLM_DIST == 3
    const float d0 = a[0] - b[0];
    const float d1 = a[NLM_ACS] - b[NLM_NS];
    const float d2 = a[2 * NLM_ACS] - b[2 * NLM_NS];
    const float mean_red = (a[0] + b[0]) * red_scale;
    return (2.0f / 3.0f + mean_red) * (d0 * d0) + (4.0f / 3.0f) * (d1 * d1) +
           (1.0f - mean_red) * (d2 * d2);
#else
    float sum = 0.0f;
#pragma unroll
    for (int ch = 0; ch < NLM_C; ++ch) {
        const float d = a[ch * NLM_ACS] - b[ch * NLM_NS];
        sum += d * d;
    }
    return sum;
#endif
}

// The oracle's ZERO_WEIGHT_BELOW (float32's smallest normal, 2^-126) and MAX_WEIGHT_FLOOR
// (float32's epsilon, 2^-23, KNLMeansCL's start of the running maximum), times 2^96.
#define NLM_ZERO_WEIGHT_BELOW 0x1p-30f
#define NLM_MAX_WEIGHT_FLOOR 0x1p73f

// Weight of a patch at normalised distance `x`, times 2^96; zero under NLM_ZERO_WEIGHT_BELOW.
__device__ __forceinline__ float nlm_weight_scaled(float x) {
#if NLM_WMODE == 0
    return exp2f(96.0f - x);  // the host folded log2(e) into factor
#elif NLM_WMODE == 1
    return fmaxf(1.0f - x, 0.0f) * 0x1p96f;
#elif NLM_WMODE == 2
    const float b = fmaxf(1.0f - x, 0.0f) * 0x1p48f;
    return b * b;
#else
    float b = fmaxf(1.0f - x, 0.0f) * 0x1p12f;
    b = b * b;
    b = b * b;
    return b * b;
#endif
}

__device__ __forceinline__ float nlm_weight(float x) {
    const float w = nlm_weight_scaled(x);
    return w < NLM_ZERO_WEIGHT_BELOW ? 0.0f : w;
}

extern "C" __global__ void __launch_bounds__(NLM_THREADS)
    NLM_NAME(const __grid_constant__ NlmArgs args) {
    extern __shared__ float nlm_smem[];
    float* const ctr = nlm_smem;                    // NLM_C x NLM_EH x NLM_EW
    float* const nbr = ctr + NLM_C * NLM_CS;        // NLM_C x NLM_NH x NLM_NP
    float* const vsum = nbr + NLM_C * NLM_NS;       // 2 x NLM_TH x NLM_VP
#if NLM_HAS_REF
    float* const val = vsum + 2 * NLM_TH * NLM_VP;  // NLM_C x NLM_QH x NLM_QP
#endif
    const int tid = threadIdx.x;
    const int x0 = blockIdx.x * NLM_TW;
    const int y0 = blockIdx.y * NLM_TH;
    const int width = (int)args.width;
    const int height = (int)args.height;
    const int pitch = (int)args.pitch;
    const float factor = (float)args.factor;
    const float red_scale = (float)args.red_scale;
    const int first = (int)args.first;
    // Whether this block's staged regions reach past the frame (uniform across the block).
    const bool border = x0 < NLM_S + NLM_A || y0 < NLM_S + NLM_A ||
                        x0 + NLM_TW + NLM_S + NLM_A > width || y0 + NLM_TH + NLM_S + NLM_A > height;

    nlm_stage<NLM_EH, NLM_EW, NLM_EW, NLM_CS>(ctr, (const nlm_sample*)args.guide[NLM_R],
                                              args.plane_off, x0 - NLM_S, y0 - NLM_S, width,
                                              height, pitch);

    // Phase 1 ownership, fixed for the whole kernel (NLM_EW * NLM_TH / NLM_RB <= NLM_THREADS
    // for every tile height): column j of the centre region, rows i0 .. i0+RB+2S-1. The
    // centre samples of that column are the same for every offset; with NLM_CTR_REGS they
    // stay in registers, halving phase 1's shared loads at the cost of occupancy.
    const bool p1 = tid < NLM_EW * (NLM_TH / NLM_RB);
    const int j = tid % NLM_EW;
    const int i0 = (tid / NLM_EW) * NLM_RB;
#define NLM_P1_ROWS (NLM_RB + 2 * NLM_S)
#if NLM_CTR_REGS
    float cr[NLM_C * NLM_P1_ROWS];
    __syncthreads();  // ctr is staged
#pragma unroll
    for (int t = 0; t < NLM_P1_ROWS; ++t)
#pragma unroll
        for (int ch = 0; ch < NLM_C; ++ch)
            cr[ch * NLM_P1_ROWS + t] = p1 ? ctr[ch * NLM_CS + (i0 + t) * NLM_EW + j] : 0.0f;
#endif

    // Phase 2 ownership, fixed for the whole kernel: output row i, columns xs .. xs+SEG-1.
    const int i = tid % NLM_TH;
    const int xs = (tid / NLM_TH) * NLM_SEG;
    float num[NLM_C][NLM_SEG];
    float den[NLM_SEG];
    float best[NLM_SEG];
#pragma unroll
    for (int u = 0; u < NLM_SEG; ++u) {
        den[u] = 0.0f;
        best[u] = NLM_MAX_WEIGHT_FLOOR;
#pragma unroll
        for (int ch = 0; ch < NLM_C; ++ch) num[ch][u] = 0.0f;
    }

    int buf = 0;
#pragma unroll 1
    for (int k = first; k < NLM_WIN - first; ++k) {
        __syncthreads();  // everyone is done with the previous frame's nbr / val
        nlm_stage<NLM_NH, NLM_NW, NLM_NP, NLM_NS>(nbr, (const nlm_sample*)args.guide[k],
                                                  args.plane_off, x0 - NLM_S - NLM_A,
                                                  y0 - NLM_S - NLM_A, width, height, pitch);
#if NLM_HAS_REF
        nlm_stage<NLM_QH, NLM_QW, NLM_QP, NLM_QS>(val, (const nlm_sample*)args.value[k],
                                                  args.plane_off, x0 - NLM_A, y0 - NLM_A, width,
                                                  height, pitch);
#endif
        __syncthreads();
#pragma unroll 1
        for (int dy = -NLM_A; dy <= NLM_A; ++dy) {
#pragma unroll 1
            for (int dx = -NLM_A; dx <= NLM_A; ++dx) {
                if (k == NLM_R && dy == 0 && dx == 0) continue;  // uniform across the block
                // KNLMeansCL's side of the border rule (see the top); uniform too.
                const bool before = k < NLM_R || (k == NLM_R && (dy < 0 || (dy == 0 && dx < 0)));
                float* const vb = vsum + buf * (NLM_TH * NLM_VP);

                // Phase 1: vertical box sums of the pixel distances.
                if (p1) {
                    const float* np = nbr + (i0 + NLM_A + dy) * NLM_NP + (j + NLM_A + dx);
                    float d[NLM_P1_ROWS];
#pragma unroll
                    for (int t = 0; t < NLM_P1_ROWS; ++t) {
#if NLM_CTR_REGS
                        d[t] = nlm_distance(cr + t, np + t * NLM_NP, red_scale);
#else
                        d[t] = nlm_distance(ctr + (i0 + t) * NLM_EW + j, np + t * NLM_NP,
                                            red_scale);
#endif
#if NLM_DTYPE == 2
                        d[t] = d[t] <= 3.402823466e38f ? d[t] : 0.0f;  // NaN and inf terms out
#endif
                    }
                    if (border) {  // terms whose pixel on the rule's side is outside: out
                        const int ry = y0 - NLM_S + i0 + (before ? 0 : dy);
                        const int rx = x0 - NLM_S + j + (before ? 0 : dx);
                        const bool column_inside = (unsigned)rx < (unsigned)width;
#pragma unroll
                        for (int t = 0; t < NLM_P1_ROWS; ++t)
                            if (!column_inside || (unsigned)(ry + t) >= (unsigned)height) d[t] = 0.0f;
                    }
                    float v = 0.0f;
#pragma unroll
                    for (int t = 0; t <= 2 * NLM_S; ++t) v += d[t];
                    float* vp = vb + i0 * NLM_VP + j;
                    vp[0] = v;
#pragma unroll
                    for (int u = 1; u < NLM_RB; ++u) {
                        v += d[u + 2 * NLM_S] - d[u - 1];
                        vp[u * NLM_VP] = v;
                    }
                }
                __syncthreads();

                // Phase 2: horizontal box sums, weights, accumulation.
                const float* row = vb + i * NLM_VP + xs;
                float h = 0.0f;
#pragma unroll
                for (int t = 0; t <= 2 * NLM_S; ++t) h += row[t];
                float ssd[NLM_SEG];
                ssd[0] = h;
#pragma unroll
                for (int u = 1; u < NLM_SEG; ++u) {
                    h += row[u + 2 * NLM_S] - row[u - 1];
                    ssd[u] = h;
                }
#if NLM_HAS_REF
                const float* vrow = val + (i + NLM_A + dy) * NLM_QP + (xs + NLM_A + dx);
#define NLM_VSTRIDE NLM_QS
#else
                const float* vrow =
                    nbr + (i + NLM_S + NLM_A + dy) * NLM_NP + (xs + NLM_S + NLM_A + dx);
#define NLM_VSTRIDE NLM_NS
#endif
                // Candidates outside the frame: kept (value 0) before the centre, else dropped.
                const bool row_inside = before || (unsigned)(y0 + i + dy) < (unsigned)height;
#pragma unroll
                for (int u = 0; u < NLM_SEG; ++u) {
                    const bool take =
                        row_inside && (before || (unsigned)(x0 + xs + u + dx) < (unsigned)width);
                    float w = take ? nlm_weight(ssd[u] * factor) : 0.0f;
                    float value[NLM_C];
#pragma unroll
                    for (int ch = 0; ch < NLM_C; ++ch) value[ch] = vrow[ch * NLM_VSTRIDE + u];
#if NLM_DTYPE == 2
                    bool finite = true;  // a NaN or inf candidate takes no part
#pragma unroll
                    for (int ch = 0; ch < NLM_C; ++ch) finite &= fabsf(value[ch]) <= 3.402823466e38f;
                    if (!finite) {
                        w = 0.0f;
#pragma unroll
                        for (int ch = 0; ch < NLM_C; ++ch) value[ch] = 0.0f;
                    }
#endif
                    den[u] += w;
                    best[u] = fmaxf(best[u], w);
#pragma unroll
                    for (int ch = 0; ch < NLM_C; ++ch) num[ch][u] = fmaf(w, value[ch], num[ch][u]);
                }
#undef NLM_VSTRIDE
                buf ^= 1;
            }
        }
    }

    // Centre pixel weighted by wref times the largest weight, then the weighted average.
    const int y = y0 + i;
    if (y >= height) return;
    const float wref = (float)args.wref;
    const float peak = (float)args.peak;
    const nlm_sample* centre = (const nlm_sample*)args.value[NLM_R];
    nlm_sample* out = (nlm_sample*)args.out;
#pragma unroll
    for (int u = 0; u < NLM_SEG; ++u) {
        const int x = x0 + xs + u;
        if (x >= width) break;
        const float cw = wref * best[u];
        const float total = den[u] + cw;
#pragma unroll
        for (int ch = 0; ch < NLM_C; ++ch) {
            const float vc = (float)centre[args.plane_off[ch] + (long long)y * pitch + x];
            // With wref = 0 and every weight zero (Bisquare) nothing was averaged: keep vc.
            const float o = total > 0.0f ? (num[ch][u] + cw * vc) / total : vc;
            nlm_sample* dst = out + args.out_off[ch] + (long long)y * args.out_pitch + x;
#if NLM_DTYPE == 2
            *dst = o;
#else
            // Round half to even, clamp to [0, peak] (KNLMeansCL's convert_*_sat_rte).
            *dst = (nlm_sample)fminf(fmaxf(rintf(o), 0.0f), peak);
#endif
        }
    }
}
