"""Turn a clip's video info (as the bridge passes it) into a :class:`FrameLayout`.

The formats this package supports are decided here, once, with one message that lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from avdenoise_vs._params.options import ColorFamily, FrameLayout, SampleType

__all__ = ["SUPPORTED_FORMATS", "check_same_layout", "family_name", "layout_from_info"]

#: VapourSynth API4 colour family and sample type codes (VapourSynth4.h).
_COLOR_FAMILIES = {1: ColorFamily.GRAY, 2: ColorFamily.RGB, 3: ColorFamily.YUV}
_SAMPLE_TYPES = {0: SampleType.INTEGER, 1: SampleType.FLOAT}
_YUV_SUBSAMPLING = {(1, 1): "4:2:0", (1, 0): "4:2:2", (0, 0): "4:4:4"}

SUPPORTED_FORMATS = (
    "GRAY, YUV 4:2:0 / 4:2:2 / 4:4:4 or RGB with 8- to 16-bit integer or 32-bit float "
    "samples, of constant format and size"
)


def layout_from_info(function: str, name: str, info: Mapping[str, Any]) -> FrameLayout:
    """Check a clip's format and return its layout.

    Raises
    ------
    NotImplementedError
        For a variable format or size, or a format outside :data:`SUPPORTED_FORMATS`.
    """
    family = _COLOR_FAMILIES.get(info["color_family"])
    sample_type = _SAMPLE_TYPES.get(info["sample_type"])
    subsampling = (info["subsampling_w"], info["subsampling_h"])
    bits = info["bits"]
    if family is None or info["width"] == 0 or info["height"] == 0:
        problem = "a variable format or size"
    elif family is ColorFamily.YUV and subsampling not in _YUV_SUBSAMPLING:
        problem = f"YUV subsampling ({subsampling[0]}, {subsampling[1]})"
    elif sample_type is SampleType.FLOAT and bits != 32:
        problem = f"{bits}-bit float samples"
    elif sample_type is SampleType.INTEGER and not 8 <= bits <= 16:
        problem = f"{bits}-bit integer samples"
    else:
        problem = None
    if problem:
        raise NotImplementedError(
            f"avdenoise.{function}: {name} must be {SUPPORTED_FORMATS}, got {problem}"
        )
    return FrameLayout(
        width=info["width"],
        height=info["height"],
        color_family=family,
        subsampling_w=subsampling[0] if family is ColorFamily.YUV else 0,
        subsampling_h=subsampling[1] if family is ColorFamily.YUV else 0,
        bits=bits,
        sample_type=sample_type,
    )


def check_same_layout(
    function: str, name: str, clip: Mapping[str, Any], ref: Mapping[str, Any], layout: FrameLayout
) -> None:
    """A guide clip (argument `name`) must match the clip's layout and length exactly."""
    ref_layout = layout_from_info(function, name, ref)
    if ref_layout != layout or ref["num_frames"] != clip["num_frames"]:
        raise ValueError(
            f"avdenoise.{function}: {name} must have the same format, size and length as clip, "
            f"got {_describe(ref_layout, ref)} for clip {_describe(layout, clip)}"
        )


def family_name(layout: FrameLayout) -> str:
    """The colour family in words, with the subsampling of YUV: 'GRAY', 'YUV 4:2:0', 'RGB'."""
    family = layout.color_family.value.upper()
    if layout.color_family is ColorFamily.YUV:
        family += " " + _YUV_SUBSAMPLING[(layout.subsampling_w, layout.subsampling_h)]
    return family


def _describe(layout: FrameLayout, info: Mapping[str, Any]) -> str:
    return (
        f"{family_name(layout)} {layout.bits}-bit {layout.sample_type.value} "
        f"{layout.width}x{layout.height}, {info['num_frames']} frames"
    )
