"""The parameter tables of the drop-ins: ``NLMeans`` (KNLMeansCL's signature) and ``BM3D``
(BM3DCUDA's), each parameter derived from Denoise's where the meaning is the same.

Every parameter but the ignored ones says which Denoise parameter it sets and how
(``maps_to``, a :class:`~avdenoise_vs._params.spec.MapsTo`): ``_params/translate.py`` applies
that translation,
and the docs' aliases are its words.
"""

from __future__ import annotations

from dataclasses import replace

from avdenoise_vs._params.denoise import (
    _BM3D_REF_DOC,
    _NLM_REF_DOC,
    DEFAULT_STRENGTH,
    DENOISE_PARAMS,
    MAX_SETTING,
)
from avdenoise_vs._params.device_choice import DeviceChoice
from avdenoise_vs._params.spec import Choice, MapsTo, Param, Range

__all__ = ["BM3D_PARAMS", "KNLM_CHANNELS", "NLMEANS_PARAMS"]


def _maps(param: Param, maps_to: MapsTo) -> Param:
    """`param` as the drop-in's parameter that sets Denoise's `maps_to.target`."""
    return replace(param, maps_to=maps_to, alias=maps_to.alias())


def _as(name: str, new_name: str, **changes) -> Param:
    """A Denoise parameter under the drop-in's name (same range and meaning): a rename."""
    param = next(p for p in DENOISE_PARAMS if p.name == name)
    return _maps(replace(param, name=new_name, algorithms=None, **changes), MapsTo(name))


#: KNLMeansCL's ``channels`` values and the Denoise ``channels`` each maps to ("auto" leaves
#: it to the clip: luma on GRAY and YUV clips, RGB on RGB clips, as in KNLMeansCL).
KNLM_CHANNELS = {"AUTO": None, "Y": "luma", "UV": "chroma", "YUV": "yuv", "RGB": "rgb"}

#: ``device_id=N`` is Denoise's device='cuda:N', the number kept as it is.
_DEVICE_ID = MapsTo("device", convert=DeviceChoice.numbered, words="device='cuda:N'")

NLMEANS_PARAMS: tuple[Param, ...] = (
    _as("clip", "clip"),
    _as("radius", "d", default=1),
    _as("search_radius", "a"),
    _as("patch_radius", "s"),
    _as(
        "strength",
        "h",
        default=1.2,
        doc="NLM strength in 8-bit code values whatever the clip's depth. Larger smooths more. "
        "The default is KNLMeansCL's, so that a drop-in call gives its output; it leaves noise "
        f"of deviation 6 codes and more unchanged, where Denoise's default "
        f"{DEFAULT_STRENGTH['nlm']} removes it (README, 'Strength').",
    ),
    _maps(
        Param(
            "channels",
            "str",
            "KNLMeansCL's plane selection: 'auto' (Y on GRAY and YUV clips, RGB on RGB "
            "clips), 'Y', 'UV' (chroma jointly), 'YUV' (joint, 4:4:4 only) or 'RGB'. Planes not "
            "selected are passed through.",
            default="auto",
            allowed=Choice(tuple(KNLM_CHANNELS)),
        ),
        MapsTo("channels", values=KNLM_CHANNELS, unset="luma"),
    ),
    _as("wmode", "wmode"),
    _as("wref", "wref"),
    _as(
        "ref",
        "rclip",
        doc=f"Optional guide clip of the same format, size and length: {_NLM_REF_DOC}",
    ),
    _maps(
        Param(
            "device_id",
            "int",
            "CUDA device to run on, as device='cuda:N'; without it `device` decides.",
            allowed=Range(0, 63),
        ),
        _DEVICE_ID,
    ),
    Param(
        "num_streams",
        "int",
        "Accepted for compatibility with vszipcu and nlm_cuda; the CUDA backend already uses "
        "one stream per VapourSynth thread, so it changes nothing.",
        allowed=Range(1, 64),
        ignored=True,
    ),
    _maps(_as("device", "device"), MapsTo("device", convert=DeviceChoice.parse)),
    _as("accelerators", "accelerators"),
)


def _per_plane(name: str, new_name: str, default: float, doc: str, **changes) -> Param:
    """Denoise's `name` as a BM3DCUDA per-plane list (same range unless `changes` say)."""
    kind = _as(name, name).kind + "[]"
    doc += " One value per plane, up to 3; missing ones repeat the last."
    return _as(name, new_name, kind=kind, default=[default], doc=doc, max_items=3, **changes)


_ONLY_FIRST = "With `chroma`, only the first value counts."

BM3D_PARAMS: tuple[Param, ...] = (
    _as("clip", "clip"),
    _as(
        "ref",
        "ref",
        doc=f"Optional clip of the same format, size and length as `clip`: {_BM3D_REF_DOC}",
    ),
    _per_plane(
        "strength",
        "sigma",
        3.0,
        "Noise standard deviation in 8-bit code values whatever the clip's depth (on float "
        "clips in units of 1/255, as in BM3DCUDA). 0 passes a plane through bit-identical "
        "(with `chroma`, luma still guides block matching). Larger smooths more. The default "
        "is BM3DCUDA's, so that a drop-in call gives its output; it barely touches noise of "
        f"deviation 8 codes, where Denoise's default {DEFAULT_STRENGTH['bm3d']} removes it "
        "(README, 'Strength').",
        allowed=Range(0.0, MAX_SETTING),
    ),
    _per_plane(
        "block_step",
        "block_step",
        8,
        "Spacing of the reference blocks in pixels (N_step). Cost grows as 1 / block_step^2; "
        f"smaller shows fewer block artefacts (Denoise's default 3 is the paper's). {_ONLY_FIRST}",
    ),
    _per_plane(
        "bm_range",
        "bm_range",
        9,
        "Block-matching search radius in pixels in each reference frame (search window 2r+1 "
        f"square). Cost grows with its square. {_ONLY_FIRST}",
    ),
    _as(
        "radius",
        "radius",
        default=0,
        doc="Temporal radius in frames: 0 is BM3D, r > 0 V-BM3D over 2r+1 frames (clamped at "
        "the clip ends), aggregated within this call as in vszipcu's BM3Dv2 (no "
        "bm3d.VAggregate after it, unlike BM3DCUDA's BM3D). A frame reads 2r frames on each "
        "side; on the GPU each frame's groups are filtered once and shared.",
    ),
    _per_plane("ps_num", "ps_num", 2, _as("ps_num", "ps_num").doc + " " + _ONLY_FIRST),
    _per_plane("ps_range", "ps_range", 4, _as("ps_range", "ps_range").doc + " " + _ONLY_FIRST),
    _maps(
        Param(
            "chroma",
            "bool",
            "CBM3D: the three planes of a YUV 4:4:4 clip are filtered jointly, blocks matched "
            "on luma, each plane with its own sigma. False filters every plane on its own (RGB "
            "too: Denoise(algorithm='bm3d') filters RGB jointly in an opponent colour space).",
            default=False,
        ),
        # False: Denoise's 'lumachroma' on GRAY and YUV clips (BM3D filters each chroma plane
        # on its own there too); on RGB clips plan_bm3d_passes keeps BM3DCUDA's meaning.
        MapsTo("channels", values={True: "yuv", False: "lumachroma"}, words="channels='yuv'"),
    ),
    next(p for p in NLMEANS_PARAMS if p.name == "device_id"),
    Param(
        "fast",
        "bool",
        "Accepted for compatibility with BM3DCUDA, where it overlaps CPU-GPU copies at 4x the "
        "memory; it changes nothing here.",
        default=True,
        ignored=True,
    ),
    Param(
        "extractor_exp",
        "int",
        "Accepted for compatibility with BM3DCUDA, where it makes GPU sums deterministic; ours "
        "always are, so it changes nothing.",
        default=0,
        allowed=Range(0),
        ignored=True,
    ),
    replace(
        next(p for p in NLMEANS_PARAMS if p.name == "num_streams"),
        doc="Accepted for compatibility with vszipcu's BM3Dv2; it changes nothing here.",
    ),
    _as("lambda_ht", "lambda_ht", doc=_as("lambda_ht", "x").doc + " Not used with `ref`."),
    _as("mismatch_scale", "mismatch_scale"),
    # Read once into a device and a number, as Denoise's own (``_params/translate.py``).
    _maps(_as("device", "device"), MapsTo("device", convert=DeviceChoice.parse)),
    _as("accelerators", "accelerators"),
)
