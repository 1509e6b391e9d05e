// BM3D / CBM3D / V-BM3D: the kernels of one pass. Maths: avdenoise_vs/_bm3d/reference/ (the oracle):
// _bm3d/reference/matching.py (grouping), _bm3d/reference/stages.py (shrinkage, aggregation), _bm3d/transforms.py.
//
// A generated header (avdenoise_vs/_bm3d/cuda/source.py, `bm3d_source`) defines, before this:
//   BM_T        frames in the temporal window (2r + 1)
//   BM_C        planes of the pass            BM_JOINT  1: grouped together on channel 0
//   BM_RGB      1: RGB planes, filtered in CBM3D's opponent space (OPP)
//   BM_DTYPE    0 uint8, 1 uint16, 2 float32 (the frames' sample type)
//   BM_RANGE    full-search radius            BM_PSNUM, BM_PSR  predictive search
//   BM_K_HT, BM_K_WIENER   most blocks per group in each stage
//   BM_HARD_TX, BM_HARD_TY, BM_WIENER_TX, BM_WIENER_TY   reference blocks per thread block
//               along x and y of each stage kernel, one warp each (its tile)
//   BM_NAME_LOAD, BM_NAME_HARD, BM_NAME_WIENER, BM_NAME_FINISH   the C names of the kernels
//               below (avdenoise_bm3d_<kernel>_<every specialisation value>); a module
//               defines only its own kernel's, and only that kernel is compiled
//   transform matrices (structs whose apply(v, o) multiplies by literals): bm_ht_fwd/bm_ht_inv
//   (Bior1.5), bm_wn_fwd/bm_wn_inv (DCT); constant tables: bm_ht_std
//   (coefficient deviation under unit noise), bm_kaiser, bm_opp and bm_opp_inv (3x3)
//
// The kernels (the host side, _bm3d/cuda/bm3d_pass.py, chains them on one stream):
//   bm3d_load      window frames -> float planes in 8-bit scale (OPP for RGB), at noisy_at[t],
//                  and at pilot_at[t] from the ref clip when it is the Wiener pilot
//   bm3d_hard      hard thresholding: one warp per reference block of window frame `center`:
//                  match across the window, 3-D transform, threshold, invert, aggregate into
//                  the int64 accumulator of the member's frame (acc_at; 0: not aggregated),
//                  through the thread block's shared copy over its tile's reach for the
//                  centre frame when `tile` is 1 (bm3d_tile.cuh)
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
    long long tile;             // stage kernels: 1 aggregates the centre frame through the
                                // shared sums of the tile's reach (the launch gives them room)
    double sigma[3];            // noise deviation per channel, 8-bit units
    double lambda_ht;           // hard threshold, noise deviations
    double threshold;           // block-distance limit of the stage
    double scale;               // 255 / peak
    double peak;                // largest sample value (1 for float)
};

__device__ __forceinline__ long long bm_plane(const Bm3dArgs& a) { return a.height * a.pitch; }

