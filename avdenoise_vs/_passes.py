"""Split a validated call into denoising passes (:class:`PlaneOptions`), one per plane group.

``channels`` and the per-plane strengths decide which planes are denoised together; the
planes that no pass writes are passed through untouched by the bridge. BM3D uses the same
groups; its chroma pass filters each chroma plane on its own (see :class:`PlaneOptions`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._options import ColorFamily, Distance, FrameLayout, PlaneOptions, WeightMode

__all__ = ["plan_passes", "untouched_planes"]

#: Plane groups and distances for each ``channels`` value on YUV and GRAY clips.
_YUV_GROUPS = {
    "luma": ((0,), Distance.LUMA),
    "chroma": ((1, 2), Distance.CHROMA),
    "yuv": ((0, 1, 2), Distance.YUV),
}


def plan_passes(
    function: str, values: Mapping[str, Any], layout: FrameLayout, channels_given: bool
) -> tuple[PlaneOptions, ...]:
    """The passes a call runs, in order.

    Raises
    ------
    ValueError
        For a ``channels`` value the clip's colour family cannot take, or a luma_ / chroma_
        override that no pass would read.
    """
    channels = values["channels"]
    if layout.color_family is ColorFamily.RGB and not channels_given:
        channels = "rgb"
    groups = _channel_groups(function, channels, layout)
    _check_overrides(function, values, groups, channels)
    if values["algorithm"] == "bm3d":
        _check_bm3d_size(function, layout, groups)
    return tuple(_pass(values, planes, distance) for planes, distance in groups)


def untouched_planes(layout: FrameLayout, passes: tuple[PlaneOptions, ...]) -> tuple[int, ...]:
    """Planes no pass writes: the bridge shares them with the source frame, bit for bit."""
    written = {plane for options in passes for plane in options.planes}
    return tuple(p for p in range(layout.num_planes) if p not in written)


def _channel_groups(
    function: str, channels: str, layout: FrameLayout
) -> list[tuple[tuple[int, ...], Distance]]:
    family = layout.color_family
    if family is ColorFamily.RGB:
        if channels != "rgb":
            _reject(function, channels, "a GRAY or YUV clip; RGB clips take channels='rgb'")
        return [((0, 1, 2), Distance.RGB)]
    if channels == "rgb":
        _reject(function, channels, "an RGB clip")
    if family is ColorFamily.GRAY:
        if channels not in ("luma", "lumachroma"):
            _reject(function, channels, "a YUV clip; GRAY clips take 'luma' or 'lumachroma'")
        return [_YUV_GROUPS["luma"]]
    if channels == "yuv" and (layout.subsampling_w or layout.subsampling_h):
        _reject(function, channels, "a 4:4:4 clip (the joint distance compares co-sited planes)")
    if channels == "lumachroma":
        return [_YUV_GROUPS["luma"], _YUV_GROUPS["chroma"]]
    return [_YUV_GROUPS[channels]]


#: Settings with per-pass overrides: ``luma_<name>`` and ``chroma_<name>`` replace ``<name>``
#: in the luma and chroma passes; joint passes read ``<name>``.
_OVERRIDABLE = ("strength", "lambda_ht", "mismatch_scale")
_OVERRIDE_PREFIX = {Distance.LUMA: "luma_", Distance.CHROMA: "chroma_"}

#: BM3D blocks are 8x8 pixels: every plane it reads must hold one.
_BM3D_MIN_SIZE = 8


def _check_overrides(function: str, values: Mapping[str, Any], groups: list, channels: str) -> None:
    distances = {distance for _, distance in groups}
    for distance, prefix in _OVERRIDE_PREFIX.items():
        for base in _OVERRIDABLE:
            name = prefix + base
            if values[name] is not None and distance not in distances:
                raise ValueError(
                    f"avdenoise.{function}: {name} is not used with channels={channels!r} on "
                    f"this clip; set {base} instead"
                )


def _check_bm3d_size(function: str, layout: FrameLayout, groups: list) -> None:
    """Reject planes smaller than one BM3D block now rather than at the first frame."""
    for planes, _ in groups:
        height, width = layout.plane_shape(planes[-1])
        if min(height, width) < _BM3D_MIN_SIZE:
            raise ValueError(
                f"avdenoise.{function}: algorithm='bm3d' needs planes of at least "
                f"{_BM3D_MIN_SIZE}x{_BM3D_MIN_SIZE} pixels, got {width}x{height} "
                f"(plane {planes[-1]})"
            )


def _setting(values: Mapping[str, Any], base: str, distance: Distance) -> Any:
    """``<base>`` for a pass, or its luma_/chroma_ override where one is set."""
    prefix = _OVERRIDE_PREFIX.get(distance)
    override = values[prefix + base] if prefix else None
    return override if override is not None else values[base]


def _pass(values: Mapping[str, Any], planes: tuple[int, ...], distance: Distance) -> PlaneOptions:
    common = dict(
        algorithm=values["algorithm"],
        planes=planes,
        distance=distance,
        strength=float(_setting(values, "strength", distance)),
        radius=values["radius"],
        has_ref=values["ref"] is not None,
    )
    if values["algorithm"] == "bm3d":
        return PlaneOptions(
            **common,
            search_radius=None,
            patch_radius=None,
            wmode=None,
            wref=None,
            stages=values["stages"],
            lambda_ht=float(_setting(values, "lambda_ht", distance)),
            mismatch_scale=float(_setting(values, "mismatch_scale", distance)),
            block_step=values["block_step"],
            bm_range=values["bm_range"],
            ps_num=values["ps_num"],
            ps_range=values["ps_range"],
        )
    return PlaneOptions(
        **common,
        search_radius=values["search_radius"],
        patch_radius=values["patch_radius"],
        wmode=WeightMode(values["wmode"]),
        wref=float(values["wref"]),
    )


def _reject(function: str, channels: str, needs: str) -> None:
    raise ValueError(f"avdenoise.{function}: channels={channels!r} needs {needs}")
