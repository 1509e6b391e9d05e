"""Split a validated call into denoising passes, one per plane group: each an
:class:`~._settings.NlmSettings` or a :class:`~._settings.Bm3dSettings`.

``Denoise``: ``channels`` and the per-plane strengths decide which planes are denoised
together. BM3D uses the same groups; its chroma pass filters each chroma plane on its own (see
:class:`~._settings.Bm3dSettings`). ``BM3D``: planes with the same settings share a pass, and
``chroma`` makes one joint pass. The planes that no pass writes are passed through untouched
by the bridge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, WeightMode
from avdenoise_vs._params.settings import Algorithm, Bm3dSettings, NlmSettings, PassSettings, Stages
from avdenoise_vs._plugin.layout import family_name

__all__ = ["plan_bm3d_passes", "plan_passes"]

#: Plane groups and distances for each ``channels`` value on YUV and GRAY clips.
_YUV_GROUPS = {
    "luma": ((0,), Distance.LUMA),
    "chroma": ((1, 2), Distance.CHROMA),
    "yuv": ((0, 1, 2), Distance.YUV),
}


def plan_passes(
    function: str,
    values: Mapping[str, Any],
    layout: FrameLayout,
    written: str | None,
    spelling: Mapping[str, str] | None = None,
) -> tuple[PassSettings, ...]:
    """The passes a call runs, in order.

    Parameters
    ----------
    function : str
        Function name, for messages.
    values : mapping
        Denoise's validated settings (``channels`` in the table's spelling).
    layout : FrameLayout
        The clip's format and size.
    written : str or None
        ``channels`` as the script wrote it (NLMeans: its own value, such as 'YUV'), which
        messages repeat; None when the script left it out.
    spelling : mapping, optional
        The function's own name of each Denoise ``channels`` value it has, for the hints in
        messages; Denoise's names by default.

    Raises
    ------
    ValueError
        For a ``channels`` value the clip's colour family cannot take, or a luma_ / chroma_
        override that no pass would read.
    """
    channels = values["channels"]
    if layout.color_family is ColorFamily.RGB and written is None:
        channels = "rgb"
    said = _Said(function, channels if written is None else written, spelling)
    groups = _channel_groups(said, channels, layout)
    _check_overrides(function, values, groups, said.written)
    if Algorithm(values["algorithm"]) is Algorithm.BM3D:
        _check_bm3d_size(function, layout, groups)
    return tuple(_pass(values, planes, distance) for planes, distance in groups)


class _Said:
    """How a call spelled ``channels``, for messages: as written, and the function's names."""

    def __init__(self, function: str, written: str, spelling: Mapping[str, str] | None) -> None:
        self.function, self.written, self.spelling = function, written, spelling

    def names(self, *values: str) -> str:
        """Denoise ``channels`` values in the function's spelling ('a' or 'b'), leaving out
        those it has no name for."""
        spelling = self.spelling or {value: value for value in values}
        return " or ".join(repr(spelling[value]) for value in values if value in spelling)

    def reject(self, needs: str) -> None:
        raise ValueError(f"avdenoise.{self.function}: channels={self.written!r} needs {needs}")


def _channel_groups(
    said: _Said, channels: str, layout: FrameLayout
) -> list[tuple[tuple[int, ...], Distance]]:
    family = layout.color_family
    if family is ColorFamily.RGB:
        if channels != "rgb":
            said.reject(f"a GRAY or YUV clip; RGB clips take channels={said.names('rgb')}")
        return [((0, 1, 2), Distance.RGB)]
    if channels == "rgb":
        said.reject("an RGB clip")
    if family is ColorFamily.GRAY:
        if channels not in ("luma", "lumachroma"):
            said.reject(f"a YUV clip; GRAY clips take {said.names('luma', 'lumachroma')}")
        return [_YUV_GROUPS["luma"]]
    if channels == "yuv" and (layout.subsampling_w or layout.subsampling_h):
        said.reject("a 4:4:4 clip (the joint distance compares co-sited planes)")
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


def _check_bm3d_size(
    function: str, layout: FrameLayout, groups: list, setting: str = "algorithm='bm3d'"
) -> None:
    """Reject planes smaller than one BM3D block now rather than at the first frame.

    `setting` names what asks for BM3D on these planes, for the message.
    """
    for planes, _ in groups:
        height, width = layout.plane_shape(planes[-1])
        if min(height, width) < _BM3D_MIN_SIZE:
            raise ValueError(
                f"avdenoise.{function}: {setting} needs planes of at least "
                f"{_BM3D_MIN_SIZE}x{_BM3D_MIN_SIZE} pixels, got {width}x{height} "
                f"(plane {planes[-1]})"
            )


def _setting(values: Mapping[str, Any], base: str, distance: Distance) -> Any:
    """``<base>`` for a pass, or its luma_/chroma_ override where one is set."""
    prefix = _OVERRIDE_PREFIX.get(distance)
    override = values[prefix + base] if prefix else None
    return override if override is not None else values[base]


def _pass(values: Mapping[str, Any], planes: tuple[int, ...], distance: Distance) -> PassSettings:
    """One pass of Denoise's algorithm over `planes`."""
    strength = float(_setting(values, "strength", distance))
    if Algorithm(values["algorithm"]) is Algorithm.BM3D:
        return _bm3d_pass(
            values,
            planes,
            distance,
            (strength,) * len(planes),
            lambda_ht=float(_setting(values, "lambda_ht", distance)),
            mismatch_scale=float(_setting(values, "mismatch_scale", distance)),
            **{name: values[name] for name in _BM3D_GRID},
        )
    return NlmSettings(
        planes=planes,
        distance=distance,
        strength=strength,
        radius=values["radius"],
        has_ref=values["ref"] is not None,
        search_radius=values["search_radius"],
        patch_radius=values["patch_radius"],
        wmode=WeightMode(values["wmode"]),
        wref=float(values["wref"]),
    )


#: BM3D settings of the block grid and search, which BM3D takes per plane.
_BM3D_GRID = ("block_step", "bm_range", "ps_num", "ps_range")


def _bm3d_pass(
    values: Mapping[str, Any],
    planes: tuple[int, ...],
    distance: Distance,
    strengths: tuple[float, ...],
    **settings: Any,
) -> Bm3dSettings:
    """A BM3D pass; `settings` holds lambda_ht, mismatch_scale and the :data:`_BM3D_GRID`.

    With ``ref`` only the Wiener stage runs, with ``ref`` as its pilot (:attr:`Stages.WIENER`);
    lambda_ht is then kept but not read.
    """
    return Bm3dSettings(
        planes=planes,
        distance=distance,
        plane_strengths=strengths,
        radius=values["radius"],
        stages=Stages.from_parameter(values["stages"], has_ref=values["ref"] is not None),
        **settings,
    )


def plan_bm3d_passes(
    function: str, values: Mapping[str, Any], layout: FrameLayout
) -> tuple[Bm3dSettings, ...]:
    """The passes of a ``BM3D`` call, with BM3DCUDA's meaning of its arguments.

    Without ``ref`` the hard-thresholding stage runs (:attr:`Stages.HARD_THRESHOLD`), with it
    the Wiener stage alone (:attr:`Stages.WIENER`). Per-plane lists are padded with their last
    value; planes of sigma 0 get no pass (with ``chroma`` they are read but not written), and
    chroma planes of equal settings share one.

    Raises
    ------
    ValueError
        For ``chroma`` on a clip that is not YUV 4:4:4, or a processed plane smaller than
        one block.
    """
    count = layout.num_planes
    lists = {name: _pad(values[name], count) for name in ("sigma", *_BM3D_GRID)}
    sigma = lists["sigma"]
    if values["chroma"]:
        _check_joint_format(function, layout)
        groups = [((0, 1, 2), Distance.YUV)] if any(sigma) else []
    else:
        groups = _bm3d_plane_groups(lists)
    _check_bm3d_size(function, layout, groups, setting="sigma > 0")
    values = {**values, "stages": 2 if values["ref"] is not None else 1}
    return tuple(
        _bm3d_pass(
            values,
            planes,
            distance,
            tuple(float(sigma[p]) for p in planes),
            lambda_ht=float(values["lambda_ht"]),
            mismatch_scale=float(values["mismatch_scale"]),
            **{name: lists[name][planes[0]] for name in _BM3D_GRID},
        )
        for planes, distance in groups
    )


def _pad(items: list, count: int) -> list:
    """A per-plane list, one item per plane: the last item repeats, extra items are ignored."""
    return (list(items) + [items[-1]] * count)[:count]


def _bm3d_plane_groups(lists: Mapping[str, list]) -> list[tuple[tuple[int, ...], Distance]]:
    """Plane groups of ``BM3D(chroma=False)``: every plane on its own, sigma-0 planes left out.

    Plane 0 is a ``LUMA`` pass and the others ``CHROMA`` (each plane on its own, whatever the
    colour family); the two chroma planes share a pass when all their settings agree.
    """
    settings = [tuple(values[p] for values in lists.values()) for p in range(len(lists["sigma"]))]
    processed = [p for p, value in enumerate(lists["sigma"]) if value > 0]
    groups = [((0,), Distance.LUMA)] if 0 in processed else []
    chroma = [p for p in processed if p > 0]
    if len(chroma) == 2 and settings[1] == settings[2]:
        return [*groups, ((1, 2), Distance.CHROMA)]
    return groups + [((p,), Distance.CHROMA) for p in chroma]


def _check_joint_format(function: str, layout: FrameLayout) -> None:
    """CBM3D (``chroma=True``) matches blocks on luma for co-sited planes: YUV 4:4:4 only."""
    if layout.color_family is not ColorFamily.YUV or layout.subsampling_w or layout.subsampling_h:
        raise ValueError(
            f"avdenoise.{function}: chroma=True needs a YUV 4:4:4 clip (all planes are matched "
            f"on luma), got {family_name(layout)}"
        )
