"""Split a validated call into denoising passes (:class:`PlaneOptions`), one per plane group.

``channels`` and the per-plane strengths decide which planes are denoised together; the
planes that no pass writes are passed through untouched by the bridge.
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
        For a ``channels`` value the clip's colour family cannot take, or a per-plane
        strength that no pass would read.
    """
    channels = values["channels"]
    if layout.color_family is ColorFamily.RGB and not channels_given:
        channels = "rgb"
    groups = _channel_groups(function, channels, layout)
    _check_strength_overrides(function, values, groups, channels)
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


def _check_strength_overrides(
    function: str, values: Mapping[str, Any], groups: list, channels: str
) -> None:
    distances = {distance for _, distance in groups}
    for name, distance in (("luma_strength", Distance.LUMA), ("chroma_strength", Distance.CHROMA)):
        if values[name] is not None and distance not in distances:
            raise ValueError(
                f"avdenoise.{function}: {name} is not used with channels={channels!r} on this "
                f"clip; set strength instead"
            )


def _pass(values: Mapping[str, Any], planes: tuple[int, ...], distance: Distance) -> PlaneOptions:
    override = {Distance.LUMA: "luma_strength", Distance.CHROMA: "chroma_strength"}.get(distance)
    strength = values[override] if override and values[override] is not None else None
    return PlaneOptions(
        algorithm=values["algorithm"],
        planes=planes,
        distance=distance,
        strength=float(strength if strength is not None else values["strength"]),
        radius=values["radius"],
        search_radius=values["search_radius"],
        patch_radius=values["patch_radius"],
        wmode=WeightMode(values["wmode"]),
        wref=float(values["wref"]),
        has_ref=values["ref"] is not None,
    )


def _reject(function: str, channels: str, needs: str) -> None:
    raise ValueError(f"avdenoise.{function}: channels={channels!r} needs {needs}")
