"""The settings of one denoising pass: :class:`NlmSettings` or :class:`Bm3dSettings`.

A clip is denoised by one or two passes (luma, then chroma; or one joint pass), built once
from the parameter table's validated values by ``_plugin/passes.py``. The backends and kernels read
them and trust them; ``__post_init__`` only checks that the builder kept each class's
invariants, since every value a script can give was checked, with a message naming what it
wrote, at the boundary (``_params/``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from avdenoise_vs._params.options import Distance, FrameLayout, WeightMode

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "Algorithm",
    "Bm3dSettings",
    "NlmSettings",
    "PassCommon",
    "PassSettings",
    "Stages",
    "untouched_planes",
]


class Algorithm(enum.Enum):
    """Denoising algorithm of a pass (``Denoise``'s ``algorithm``)."""

    NLM = "nlm"
    """Non-local means (Buades et al. 2005), as KNLMeansCL: :class:`NlmSettings`."""
    BM3D = "bm3d"
    """BM3D (Dabov et al. 2007), CBM3D on joint planes, V-BM3D when radius > 0:
    :class:`Bm3dSettings`."""


class Stages(enum.Flag):
    """The BM3D stages a pass runs: ``stages`` and ``ref`` together, the one definition the
    filters, the backends and the kernels follow.

    A flag, so that ``Stages.WIENER in stages`` reads "the Wiener stage runs".
    """

    HARD_THRESHOLD = 1
    """``stages=1``: the hard-thresholding stage alone; its basic estimate is the output."""
    WIENER = 2
    """``stages=2`` with ``ref``: the Wiener stage alone, with the ``ref`` clip's frames (same
    planes, same scaling and colour transform) as its pilot: blocks are matched on ``ref`` and
    the Wiener attenuations come from ``ref``'s spectra, while the filtered samples come from
    the clip; ``lambda_ht`` is not read. BM3DCUDA's ``BM3D(clip, ref=basic)``."""
    BOTH = HARD_THRESHOLD | WIENER
    """``stages=2``: the hard-thresholding stage computes basic estimates of every window
    frame, then the Wiener stage uses them as its pilot."""

    @classmethod
    def from_parameter(cls, stages: int, has_ref: bool) -> Stages:
        """The stages that the ``stages`` parameter (1 or 2) asks for, with or without ``ref``.

        ``stages=1`` with ``ref`` does not exist (nothing would read ``ref``); the filters
        reject it with a message before any pass is built.
        """
        if stages == 2:
            return cls.WIENER if has_ref else cls.BOTH
        if stages == 1 and not has_ref:
            return cls.HARD_THRESHOLD
        raise ValueError(f"no BM3D stages for stages={stages!r} with has_ref={has_ref}")

    @property
    def parameter(self) -> int:
        """The ``stages`` value that asks for these stages (:attr:`WIENER` with ``ref``)."""
        return 1 if self is Stages.HARD_THRESHOLD else 2


@runtime_checkable
class PassCommon(Protocol):
    """What every denoising pass has, whatever its algorithm (see :data:`PassSettings`).

    A clip is denoised by one or two passes (luma, then chroma; or one joint pass), each
    reading and writing its planes jointly. The planes that no pass writes are passed through
    untouched by the bridge.
    """

    #: The algorithm of every pass of this class.
    algorithm: ClassVar[Algorithm]

    @property
    def planes(self) -> tuple[int, ...]:
        """Planes the pass reads, ascending."""

    @property
    def distance(self) -> Distance:
        """How the planes are compared and grouped."""

    @property
    def strength(self) -> float:
        """Strength in 8-bit codes (NLM ``h``; BM3D sigma of the plane blocks are matched on)."""

    @property
    def radius(self) -> int:
        """Temporal radius in frames, as the script gave it."""

    @property
    def has_ref(self) -> bool:
        """Whether the pass reads the ``ref`` clip beside the clip."""

    @property
    def window_radius(self) -> int:
        """Frames on each side of n that one output frame reads."""

    @property
    def written_planes(self) -> tuple[int, ...]:
        """Planes the pass writes, a subset of :attr:`planes`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NlmSettings:
    """One NLM pass: every setting it reads, validated by the parameter table.

    Parameters
    ----------
    planes : tuple of int
        Planes compared and denoised jointly: ``(0,)`` for ``LUMA``, ``(1, 2)`` for
        ``CHROMA``, all three for ``YUV`` and ``RGB``.
    distance : Distance
        Channel weighting of the patch distance.
    strength : float
        ``h`` in 8-bit codes (KNLMeansCL ``h``).
    radius : int
        Temporal radius (KNLMeansCL ``d``).
    has_ref : bool
        Weights come from the ``ref`` clip (KNLMeansCL ``rclip``), samples from the clip.
    search_radius, patch_radius : int
        KNLMeansCL ``a`` and ``s``.
    wmode : WeightMode
    wref : float
        Weight of the centre pixel, as a multiple of the largest weight found.
    """

    algorithm: ClassVar[Algorithm] = Algorithm.NLM

    planes: tuple[int, ...]
    distance: Distance
    strength: float
    radius: int
    has_ref: bool
    search_radius: int
    patch_radius: int
    wmode: WeightMode
    wref: float

    def __post_init__(self) -> None:
        _check_common(self, _NLM_PLANE_COUNTS)
        _check(self, math.isfinite(self.strength) and self.strength > 0, "strength", "> 0")
        _check(self, self.search_radius >= 1, "search_radius", ">= 1")
        _check(self, self.patch_radius >= 0, "patch_radius", ">= 0")
        _check(self, isinstance(self.wmode, WeightMode), "wmode", "a WeightMode")
        _check(self, math.isfinite(self.wref) and self.wref >= 0, "wref", ">= 0")

    @property
    def window_radius(self) -> int:
        """Frames on each side of n that one output frame reads: `radius`."""
        return self.radius

    @property
    def written_planes(self) -> tuple[int, ...]:
        """Planes this pass writes: all of `planes`."""
        return self.planes


@dataclass(frozen=True, slots=True, kw_only=True)
class Bm3dSettings:
    """One BM3D pass: every setting it reads, validated by the parameter table.

    `distance` says how the planes are grouped: ``LUMA`` one plane; ``CHROMA`` each plane on
    its own (one pass, the reference filters channel by channel; ``BM3D`` also uses it for the
    second and third planes of RGB clips); ``YUV`` jointly with blocks matched on luma
    (CBM3D); ``RGB`` jointly in CBM3D's opponent colour space (``_bm3d/maths.py``'s ``OPP``),
    matched on its first (luminance) channel.

    `strength` and `has_ref`, which every pass has (:class:`PassCommon`), are derived from
    `plane_strengths` and `stages`, so that they can never disagree with them.

    Parameters
    ----------
    planes : tuple of int
        Planes read: one for ``LUMA``, one or two for ``CHROMA``, three for ``YUV`` and
        ``RGB``.
    distance : Distance
    plane_strengths : tuple of float
        Noise deviation (sigma) of each of `planes` in 8-bit codes (CBM3D with per-plane
        ``sigma``). A plane of strength 0 is read (it may guide the matching) but not
        written; see :attr:`written_planes`. RGB passes, filtered in the opponent space with
        :attr:`strength` (the deviation in each of R, G and B), hold it for every plane.
    radius : int
        Temporal radius: V-BM3D when > 0 (BM3DCUDA ``radius``).
    stages : Stages
        The stages that run; they also say whether the pass reads ``ref`` (:attr:`has_ref`).
    lambda_ht : float
        Hard threshold in noise deviations; not read by :attr:`Stages.WIENER`.
    mismatch_scale : float
        Multiplies the block-matching distance threshold.
    block_step, bm_range, ps_num, ps_range : int
        Reference block spacing, full-search radius and V-BM3D predictive search (BM3DCUDA's
        names).
    """

    algorithm: ClassVar[Algorithm] = Algorithm.BM3D

    planes: tuple[int, ...]
    distance: Distance
    plane_strengths: tuple[float, ...]
    radius: int
    stages: Stages
    lambda_ht: float
    mismatch_scale: float
    block_step: int
    bm_range: int
    ps_num: int
    ps_range: int

    def __post_init__(self) -> None:
        _check_common(self, _BM3D_PLANE_COUNTS)
        strengths = self.plane_strengths
        _check(self, len(strengths) == len(self.planes), "plane_strengths", "one per plane")
        finite = all(math.isfinite(s) and s >= 0 for s in strengths)
        _check(self, finite and any(strengths), "plane_strengths", ">= 0, one > 0")
        one = self.distance is not Distance.RGB or len(set(strengths)) == 1
        _check(self, one, "plane_strengths", "equal for Distance.RGB")
        _check(self, self.stages in _STAGES, "stages", "HARD_THRESHOLD, WIENER or BOTH")
        _check(self, math.isfinite(self.lambda_ht) and self.lambda_ht > 0, "lambda_ht", "> 0")
        scale = self.mismatch_scale
        _check(self, math.isfinite(scale) and scale > 0, "mismatch_scale", "> 0")
        for name in ("block_step", "bm_range", "ps_num", "ps_range"):
            _check(self, getattr(self, name) >= 1, name, ">= 1")

    @property
    def strength(self) -> float:
        """Sigma of ``planes[0]``, the plane blocks are matched on."""
        return self.plane_strengths[0]

    @property
    def has_ref(self) -> bool:
        """Whether the Wiener stage runs alone, piloted by the ``ref`` clip."""
        return self.stages is Stages.WIENER

    @property
    def window_radius(self) -> int:
        """Frames on each side of n that one output frame reads.

        V-BM3D (see ``_bm3d/reference/vbm3d.py``): each frame's groups span its own window of
        ``2 radius + 1``, so one stage reads ``2 radius`` on each side, and two stages, whose
        pilots are basic estimates of such frames, ``4 radius``.
        """
        return 2 * (2 if self.stages is Stages.BOTH else 1) * self.radius

    @property
    def written_planes(self) -> tuple[int, ...]:
        """Planes this pass writes: all of `planes` but those of strength 0."""
        pairs = zip(self.planes, self.plane_strengths, strict=True)
        return tuple(plane for plane, strength in pairs if strength > 0)


#: One pass of either algorithm; ``isinstance(options, Bm3dSettings)`` tells them apart.
PassSettings = NlmSettings | Bm3dSettings

_STAGES = (Stages.HARD_THRESHOLD, Stages.WIENER, Stages.BOTH)
#: Planes per pass for each distance (BM3D filters CHROMA planes each on its own).
_NLM_PLANE_COUNTS = {
    Distance.LUMA: (1,),
    Distance.CHROMA: (2,),
    Distance.YUV: (3,),
    Distance.RGB: (3,),
}
_BM3D_PLANE_COUNTS = {**_NLM_PLANE_COUNTS, Distance.CHROMA: (1, 2)}


def untouched_planes(layout: FrameLayout, passes: tuple[PassSettings, ...]) -> tuple[int, ...]:
    """Planes of `layout` that no pass writes: every output frame takes them from the source
    frame, bit for bit."""
    written = {plane for options in passes for plane in options.written_planes}
    return tuple(p for p in range(layout.num_planes) if p not in written)


def _check(settings: PassSettings, holds: bool, name: str, constraint: str) -> None:
    """Raise for a broken invariant: a bug in whatever built `settings`, since the
    parameter table has already rejected every bad value a script can give."""
    if not holds:
        value = getattr(settings, name)
        raise ValueError(f"{type(settings).__name__}: {name} must be {constraint}, got {value!r}")


def _check_common(settings: PassSettings, plane_counts: Mapping[Distance, tuple[int, ...]]) -> None:
    """The invariants of :class:`PassCommon` fields, with the plane count of each distance."""
    planes = settings.planes
    ordered = isinstance(planes, tuple) and list(planes) == sorted(set(planes))
    _check(settings, ordered and set(planes) <= {0, 1, 2}, "planes", "ascending planes of 0-2")
    _check(settings, isinstance(settings.distance, Distance), "distance", "a Distance")
    counts = plane_counts[settings.distance]
    words = " or ".join(map(str, counts))
    _check(settings, len(planes) in counts, "planes", f"{words} planes for {settings.distance}")
    _check(settings, settings.radius >= 0, "radius", ">= 0")
