// ---- load ------------------------------------------------------------------------------

__device__ __forceinline__ float bm_read(long long slot, long long off, long long idx) {
    return (float)((const bm_sample*)slot)[off + idx];
}

// Working values of one pixel of a frame slot: 8-bit scale, OPP for RGB.
//
// Float clips may hold NaN and infinities. A block with one in any grouped channel takes no
// part (_bm3d/reference/matching.py, finite_blocks): it forms no group and is never matched, and pixels no
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
#ifdef BM_NAME_LOAD
extern "C" __global__ void BM_NAME_LOAD(const Bm3dArgs a) {
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
#endif
