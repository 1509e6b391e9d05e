"""The parameter table of ``core.avdenoise.Denoise``, from which the drop-ins' are derived."""

from __future__ import annotations

from avdenoise_vs._params.options import WeightMode
from avdenoise_vs._params.settings import Algorithm
from avdenoise_vs._params.spec import Choice, Param, Pattern, Range

__all__ = [
    "ACCELERATORS",
    "ALGORITHMS",
    "CHANNELS",
    "DEFAULT_STRENGTH",
    "DENOISE_PARAMS",
    "MAX_SETTING",
    "MIN_STRENGTH",
]

#: Algorithms by name.
ALGORITHMS = tuple(algorithm.value for algorithm in Algorithm)
CHANNELS = ("luma", "chroma", "lumachroma", "yuv", "rgb")
ACCELERATORS = ("cuda", "cpu")
_NLM = (Algorithm.NLM.value,)
_BM3D = (Algorithm.BM3D.value,)

#: Largest float setting: far past any useful one (a deviation of 10^6 codes is 4000 times the
#: 8-bit range), small enough that what the float32 kernels derive from it stays finite (sigma^2,
#: match thresholds; wref times nlm.cuh's weights, 2^96 too large, overflowed above about 4e9).
MAX_SETTING = 1e6
#: Smallest strength: NLM's 1 / h^2 fails below about 1e-154 and overflows float32 below about
#: 1e-17 (NaN weights on the GPU); at 1e-6 both algorithms already return their input.
MIN_STRENGTH = 1e-6
_STRENGTH = Range(MIN_STRENGTH, MAX_SETTING)
#: Denoise's strength by algorithm: of those measured by scripts/bench/strength_table.py, each
#: has the largest smallest gain over noise of deviation 5, 8 and 10 (README, 'Strength').
DEFAULT_STRENGTH = {"nlm": 4.5, "bm3d": 7.0}
_POSITIVE = Range(0.0, MAX_SETTING, open_low=True)


def _plane_overrides(name: str, allowed: Range, what: str) -> tuple[Param, Param]:
    """``luma_<name>`` and ``chroma_<name>``: per-pass overrides of a BM3D float setting."""
    return tuple(
        Param(
            f"{group}_{name}",
            "float",
            f"{what} of the {group} pass, overriding `{name}`.",
            allowed=allowed,
            algorithms=_BM3D,
        )
        for group in ("luma", "chroma")
    )


#: What ``ref`` means to each algorithm (Denoise's ``ref``, NLMeans' ``rclip``, BM3D's ``ref``).
_NLM_REF_DOC = (
    "weights come from `ref`, sample values from `clip`. Use a pre-filtered clip for stronger, "
    "cleaner matching."
)
_BM3D_REF_DOC = (
    "the basic estimate, usually the output of a first BM3D pass: only the Wiener stage runs, "
    "with blocks matched on `ref` and `ref` as its pilot; sample values come from `clip`. "
    "That stage costs about as much as the hard-thresholding one."
)

DENOISE_PARAMS: tuple[Param, ...] = (
    Param(
        "clip",
        "clip",
        "The clip to denoise: GRAY, YUV 4:2:0 / 4:2:2 / 4:4:4 or RGB, 8- to 16-bit integer or "
        "32-bit float, constant format and size.",
        required=True,
    ),
    Param(
        "ref",
        "clip",
        f"Optional clip of the same format, size and length as `clip`. NLM: the guide; "
        f"{_NLM_REF_DOC} "
        f"BM3D: {_BM3D_REF_DOC} `stages=1` cannot take it.",
        alias="KNLMeansCL rclip, BM3DCUDA ref",
    ),
    Param(
        "algorithm",
        "str",
        "Denoising algorithm: 'nlm' (non-local means, KNLMeansCL-compatible) or 'bm3d' "
        "(BM3D, CBM3D for joint channels, V-BM3D when radius > 0).",
        default="nlm",
        allowed=Choice(ALGORITHMS),
    ),
    Param(
        "radius",
        "int",
        "Temporal radius in frames: 0 is spatial only; r searches 2r+1 frames (NLM, as "
        "KNLMeansCL: min(r, n) on each side of frame n, the last frame repeating past the "
        "clip's end; BM3D: clamped at the clip ends). Cost grows linearly with 2r+1. BM3D "
        "defaults to spatial, as BM3DCUDA does; "
        "V-BM3D groups each frame's blocks across its own 2r+1 frames, so a frame reads 2r "
        "frames on each side (4r with two stages), and on the GPU costs little more than r=0.",
        default={"nlm": 1, "bm3d": 0},
        allowed=Range(0, 8),
        alias="KNLMeansCL d, BM3DCUDA radius",
    ),
    Param(
        "channels",
        "str",
        "Planes to denoise: 'luma'; 'chroma' (both chroma planes: NLM jointly, BM3D each "
        "plane on its own); 'lumachroma' (luma, then chroma, each with its own strength); "
        "'yuv' (all three planes with one joint distance, 4:4:4 only; BM3D matches blocks on "
        "luma, as CBM3D); 'rgb' (RGB clips, joint; BM3D works in CBM3D's opponent colour "
        "space, strength being the deviation of the noise in R, G and B). Planes not denoised "
        "are passed through unchanged. RGB clips use 'rgb' when channels is not given.",
        default="lumachroma",
        allowed=Choice(CHANNELS),
        alias="KNLMeansCL channels",
    ),
    Param(
        "strength",
        "float",
        "Denoising strength in 8-bit code values whatever the clip's depth: NLM's h; BM3D's "
        "sigma, the noise standard deviation. Larger smooths more. Each algorithm's default "
        "has the best worst case over noise of deviation 5 to 10 codes: luma PSNR rose by "
        "5.3 to 6.5 dB with NLM, 6.5 to 8.5 dB with BM3D (Gaussian noise, six pictures; "
        "README, 'Strength'); at deviation 2 NLM lost 0.6 dB and BM3D nothing, so lower it "
        "for light noise. NLMeans keeps KNLMeansCL's 1.2 and BM3D BM3DCUDA's 3.0, which gain "
        "0 and 1 dB at deviation 8.",
        default=DEFAULT_STRENGTH,
        allowed=_STRENGTH,
        alias="KNLMeansCL h, BM3DCUDA sigma",
    ),
    Param(
        "luma_strength",
        "float",
        "Strength of the luma pass, overriding `strength`.",
        allowed=_STRENGTH,
    ),
    Param(
        "chroma_strength",
        "float",
        "Strength of the chroma pass, overriding `strength`.",
        allowed=_STRENGTH,
    ),
    Param(
        "search_radius",
        "int",
        "NLM spatial search radius in pixels: the search window is (2a+1)^2 pixels per frame. "
        "Cost grows with its area.",
        default=2,
        allowed=Range(1, 16),
        algorithms=_NLM,
        alias="KNLMeansCL a",
    ),
    Param(
        "patch_radius",
        "int",
        "NLM patch radius in pixels: patches of (2s+1)^2 pixels are compared. Larger is more "
        "robust to noise and slower to adapt to fine detail; cost barely depends on it.",
        default=4,
        allowed=Range(0, 8),
        algorithms=_NLM,
        alias="KNLMeansCL s",
    ),
    Param(
        "wmode",
        "int",
        "NLM weighting function: "
        + "; ".join(f"{m.value} = {m.name.lower()}" for m in WeightMode)
        + ". Bisquare modes give dissimilar patches no weight at all (sharper).",
        default=int(WeightMode.WELSCH),
        allowed=Range(0, 3),
        algorithms=_NLM,
        alias="KNLMeansCL wmode",
    ),
    Param(
        "wref",
        "float",
        "NLM weight of the pixel being denoised, as a multiple of the largest weight found. "
        "Smaller denoises more.",
        default=1.0,
        allowed=Range(0.0, MAX_SETTING),
        algorithms=_NLM,
        alias="KNLMeansCL wref",
    ),
    Param(
        "stages",
        "int",
        "BM3D stages: 1 returns the hard-thresholding (basic) estimate alone; 2 adds the "
        "Wiener stage, guided by the basic estimate: better, and about twice the cost.",
        default=2,
        allowed=Range(1, 2),
        algorithms=_BM3D,
    ),
    Param(
        "lambda_ht",
        "float",
        "BM3D hard threshold in noise deviations (lambda_3D of Dabov et al. 2007): transform "
        "coefficients up to lambda_ht * strength are zeroed. Larger removes more noise and "
        "more detail; no effect on speed.",
        default=2.7,
        allowed=_POSITIVE,
        algorithms=_BM3D,
        alias="VapourSynth-BM3D hard_thr",
    ),
    *_plane_overrides("lambda_ht", _POSITIVE, "Hard threshold"),
    Param(
        "mismatch_scale",
        "float",
        "BM3D: multiplies the block-matching distance threshold (a mean squared difference of "
        "2500 in 8-bit units, growing with strength above 25). Larger groups less similar "
        "blocks: more smoothing.",
        default=1.0,
        allowed=_POSITIVE,
        algorithms=_BM3D,
    ),
    *_plane_overrides("mismatch_scale", _POSITIVE, "Mismatch scale"),
    Param(
        "block_step",
        "int",
        "BM3D spacing of the reference blocks in pixels (N_step). Cost grows as "
        "1 / block_step^2; 3, the paper's value, is the default (BM3DCUDA uses 8, faster).",
        default=3,
        allowed=Range(1, 8),
        algorithms=_BM3D,
        alias="BM3DCUDA block_step",
    ),
    Param(
        "bm_range",
        "int",
        "BM3D block-matching search radius in pixels in each reference frame (search window "
        "2r+1 square; 19 is the paper's N_S = 39). Cost grows with its square.",
        default=19,
        allowed=Range(1, 32),
        algorithms=_BM3D,
        alias="BM3DCUDA bm_range",
    ),
    Param(
        "ps_num",
        "int",
        "V-BM3D predictive search: best matches of one frame whose neighbourhoods are searched "
        "in the next frame. Only used when radius > 0; cost grows linearly.",
        default=2,
        allowed=Range(1, 8),
        algorithms=_BM3D,
        alias="BM3DCUDA ps_num",
        temporal=True,
    ),
    Param(
        "ps_range",
        "int",
        "V-BM3D predictive search radius in pixels around each of those matches. Only used "
        "when radius > 0; cost grows with its square.",
        default=4,
        allowed=Range(1, 16),
        algorithms=_BM3D,
        alias="BM3DCUDA ps_range",
        temporal=True,
    ),
    Param(
        "device",
        "str",
        "Where to run: 'auto' (the first available of `accelerators`), 'cpu' (NumPy), 'cuda' "
        "(with several GPUs, the one the fewest other avdenoise processes use) or 'cuda:N' "
        "(device N).",
        default="auto",
        allowed=Pattern(r"auto|cpu|cuda(:[0-9]+)?", "'auto', 'cpu', 'cuda' or 'cuda:N'"),
    ),
    Param(
        "accelerators",
        "str[]",
        "Backends that device='auto' tries, in order.",
        default=list(ACCELERATORS),
        allowed=Choice(ACCELERATORS),
    ),
)
