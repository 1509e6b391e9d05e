// ---- export and finish --------------------------------------------------------------------

// Thread per pixel: num / den of the accumulator at acc_at[0] into float planes at `dst`
// (basic estimates) or into the output samples; `clear` leaves the accumulator zero. Float
// clips: a pixel that no group reached (den 0, see bm_pixel) keeps the value of frame src[0][0]
// there: its working value in a basic estimate, its very sample in the output.
#ifdef BM_NAME_FINISH
extern "C" __global__ void BM_NAME_FINISH(const Bm3dArgs a) {
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
#endif
