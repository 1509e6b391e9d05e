"""The parameter tables of the registered functions (the single source of truth).

Defaults, ranges, the algorithms that read each parameter and the documentation live here
and nowhere else: the bridge's signatures, validation and the README table come from them.
"""

from __future__ import annotations

from dataclasses import replace

from ._options import WeightMode
from ._paramspec import Choice, Param, Pattern, Range

__all__ = [
    "ACCELERATORS",
    "ALGORITHMS",
    "CHANNELS",
    "DENOISE_PARAMS",
    "KNLM_CHANNELS",
    "NLMEANS_PARAMS",
]

#: Algorithms by name; "bm3d" is accepted by the table and rejected until it ships.
ALGORITHMS = ("nlm", "bm3d")
CHANNELS = ("luma", "chroma", "lumachroma", "yuv", "rgb")
ACCELERATORS = ("cuda", "cpu")
_NLM = ("nlm",)

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
        "Optional guide clip of the same format, size and length: weights come from `ref`, "
        "sample values from `clip`. Use a pre-filtered clip for stronger, cleaner matching.",
        alias="KNLMeansCL rclip",
    ),
    Param(
        "algorithm",
        "str",
        "Denoising algorithm: 'nlm' (non-local means, KNLMeansCL-compatible). 'bm3d' is "
        "reserved for the coming BM3D / V-BM3D backend.",
        default="nlm",
        allowed=Choice(ALGORITHMS),
    ),
    Param(
        "radius",
        "int",
        "Temporal radius in frames: 0 is spatial only; r searches 2r+1 frames (clamped at the "
        "clip ends). Cost grows linearly with 2r+1.",
        default=1,
        allowed=Range(0, 8),
        alias="KNLMeansCL d",
    ),
    Param(
        "channels",
        "str",
        "Planes to denoise: 'luma'; 'chroma' (both chroma planes, jointly); 'lumachroma' "
        "(luma, then chroma jointly, each with its own strength); 'yuv' (all three planes with "
        "one joint distance, 4:4:4 only); 'rgb' (RGB clips, joint). Planes not denoised are "
        "passed through unchanged. RGB clips use 'rgb' when channels is not given.",
        default="lumachroma",
        allowed=Choice(CHANNELS),
        alias="KNLMeansCL channels",
    ),
    Param(
        "strength",
        "float",
        "Denoising strength in 8-bit code values whatever the clip's depth: NLM's h. Larger "
        "smooths more.",
        default={"nlm": 1.2},
        allowed=Range(0.0, open_low=True),
        alias="KNLMeansCL h",
    ),
    Param(
        "luma_strength",
        "float",
        "Strength of the luma pass, overriding `strength`.",
        allowed=Range(0.0, open_low=True),
    ),
    Param(
        "chroma_strength",
        "float",
        "Strength of the chroma pass, overriding `strength`.",
        allowed=Range(0.0, open_low=True),
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
        allowed=Range(0.0),
        algorithms=_NLM,
        alias="KNLMeansCL wref",
    ),
    Param(
        "device",
        "str",
        "Where to run: 'auto' (the first available of `accelerators`), 'cpu' (NumPy), 'cuda' "
        "(the current CUDA device) or 'cuda:N' (device N).",
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


def _as(name: str, new_name: str, **changes) -> Param:
    """A Denoise parameter under KNLMeansCL's name (same range and meaning)."""
    param = next(p for p in DENOISE_PARAMS if p.name == name)
    return replace(param, name=new_name, alias=f"Denoise {name}", algorithms=None, **changes)


#: KNLMeansCL's ``channels`` values and the Denoise ``channels`` each maps to ("auto" is
#: luma on GRAY and YUV clips, RGB on RGB clips, as in KNLMeansCL).
KNLM_CHANNELS = {"AUTO": None, "Y": "luma", "UV": "chroma", "YUV": "yuv", "RGB": "rgb"}

NLMEANS_PARAMS: tuple[Param, ...] = (
    _as("clip", "clip"),
    _as("radius", "d"),
    _as("search_radius", "a"),
    _as("patch_radius", "s"),
    _as("strength", "h", default=1.2),
    Param(
        "channels",
        "str",
        "KNLMeansCL's plane selection, any case: 'auto' (Y on GRAY and YUV clips, RGB on RGB "
        "clips), 'Y', 'UV' (chroma jointly), 'YUV' (joint, 4:4:4 only) or 'RGB'. Planes not "
        "selected are passed through.",
        default="auto",
        allowed=Choice(tuple(KNLM_CHANNELS), fold_case=True),
        alias="Denoise channels",
    ),
    _as("wmode", "wmode"),
    _as("wref", "wref"),
    _as("ref", "rclip"),
    Param(
        "device_id",
        "int",
        "CUDA device to run on; without it the first CUDA device is used, or the CPU when "
        "there is none.",
        allowed=Range(0, 63),
        alias="Denoise device='cuda:N'",
    ),
    Param(
        "num_streams",
        "int",
        "Accepted for compatibility with vszipcu and nlm_cuda; the CUDA backend already uses "
        "one stream per VapourSynth thread, so it changes nothing.",
        allowed=Range(1, 64),
    ),
)
