"""Validated, frozen settings that reach the backends and the kernels.

The CUDA passes derive their kernel specs (``_cuda/_source.py`` ``NlmSpec``,
``_cuda/_bm3d_source.py`` ``Bm3dSpec``) from these; the warm-up queue keys on those specs, so
a setting that changes a kernel's code must reach its spec, not only a field here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ColorFamily",
    "Distance",
    "FrameLayout",
    "PlaneOptions",
    "SampleType",
    "WeightMode",
]


class WeightMode(enum.IntEnum):
    """Weighting function of the patch distance (KNLMeansCL ``wmode``)."""

    WELSCH = 0
    """``exp(-d)``: smooth, never exactly zero; KNLMeansCL's default."""
    BISQUARE_A = 1
    """``max(1 - d, 0)``: patches further than the strength apart get no weight."""
    BISQUARE_B = 2
    """``max(1 - d, 0) ** 2``: sharper cut-off than A."""
    BISQUARE_C = 3
    """``max(1 - d, 0) ** 8``: the sharpest cut-off, keeps the most detail."""


class Distance(enum.Enum):
    """Which planes a pass compares and how each weighs in the patch distance."""

    LUMA = "luma"
    """One plane (luma, or the only plane of GRAY), weight 3."""
    CHROMA = "chroma"
    """The two chroma planes jointly, weight 1.5 each; they share their weights."""
    YUV = "yuv"
    """All three planes of a 4:4:4 clip jointly, weight 1 each."""
    RGB = "rgb"
    """All three planes of an RGB clip jointly, with KNLMeansCL's "redmean" weights."""


class ColorFamily(enum.Enum):
    """Colour family of a clip, as far as the denoisers care."""

    GRAY = "gray"
    YUV = "yuv"
    RGB = "rgb"


class SampleType(enum.Enum):
    """Integer or floating-point samples."""

    INTEGER = "int"
    FLOAT = "float"


@dataclass(frozen=True)
class FrameLayout:
    """Geometry and sample format of a clip's frames.

    Parameters
    ----------
    width, height : int
        Luma (plane 0) size in pixels.
    color_family : ColorFamily
    subsampling_w, subsampling_h : int
        log2 of the chroma subsampling (0 for GRAY, RGB and 4:4:4).
    bits : int
        Bits per sample: 8 to 16 for integer clips, 32 for float.
    sample_type : SampleType
    """

    width: int
    height: int
    color_family: ColorFamily
    subsampling_w: int
    subsampling_h: int
    bits: int
    sample_type: SampleType

    @property
    def num_planes(self) -> int:
        """Number of planes (1 for GRAY, else 3)."""
        return 1 if self.color_family is ColorFamily.GRAY else 3

    @property
    def dtype(self) -> np.dtype:
        """NumPy dtype of one sample."""
        # Imported here: VapourSynth loads the plugin, and with it this module, in every
        # process it starts, most of which never create one of our filters.
        import numpy as np

        if self.sample_type is SampleType.FLOAT:
            return np.dtype(np.float32)
        return np.dtype(np.uint8 if self.bits == 8 else np.uint16)

    @property
    def peak(self) -> float:
        """Largest sample value: integer samples are divided by it to reach [0, 1]."""
        return 1.0 if self.sample_type is SampleType.FLOAT else float((1 << self.bits) - 1)

    def plane_shape(self, plane: int) -> tuple[int, int]:
        """(height, width) of a plane."""
        if plane == 0 or self.color_family is not ColorFamily.YUV:
            return self.height, self.width
        return self.height >> self.subsampling_h, self.width >> self.subsampling_w


@dataclass(frozen=True)
class PlaneOptions:
    """One denoising pass: the planes it reads and writes jointly, and every setting it uses.

    A clip is denoised by one or two passes (luma, then chroma; or one joint pass). The NLM
    fields are None in BM3D passes and the BM3D fields (``stages`` onward, optional so that
    NLM passes are built as before) are None in NLM passes.

    For BM3D, `distance` says how the planes are grouped: ``LUMA`` one plane; ``CHROMA``
    each plane on its own (one pass, the reference filters channel by channel; ``BM3D`` also
    uses it for the second and third planes of RGB clips); ``YUV`` jointly with blocks
    matched on luma (CBM3D); ``RGB`` jointly in CBM3D's opponent colour space
    (``_reference.backend.OPP``), matched on its first (luminance) channel.

    BM3D stages and the guide clip (`stages`, `has_ref`), the one definition the filters,
    the backends and the kernels follow:

    - ``stages=1, has_ref=False``: the hard-thresholding stage alone; its basic estimate is
      the output.
    - ``stages=2, has_ref=False``: the hard-thresholding stage computes basic estimates of
      every window frame, then the Wiener stage uses them as its pilot.
    - ``stages=2, has_ref=True``: the Wiener stage alone, with the ``ref`` clip's frames (same
      planes, same scaling and colour transform) as its pilot: blocks are matched on ``ref``
      and the Wiener attenuations come from ``ref``'s spectra, while the filtered samples come
      from the clip. The hard-thresholding stage is skipped, so `lambda_ht` is not read. This
      is BM3DCUDA's ``BM3D(clip, ref=basic)`` and ``Denoise(algorithm='bm3d', ref=basic)``.
    - ``stages=1, has_ref=True`` does not exist (nothing would read ``ref``).

    `plane_strengths` gives a BM3D pass one noise deviation per plane (CBM3D with per-plane
    ``sigma``): ``strength`` is then that of ``planes[0]``, the plane blocks are matched on,
    and a plane with strength 0 is read (it may guide the matching) but not written; see
    :attr:`written_planes`.
    """

    algorithm: str
    planes: tuple[int, ...]
    distance: Distance
    strength: float
    radius: int
    search_radius: int | None
    patch_radius: int | None
    wmode: WeightMode | None
    wref: float | None
    has_ref: bool
    stages: int | None = None
    lambda_ht: float | None = None
    mismatch_scale: float | None = None
    block_step: int | None = None
    bm_range: int | None = None
    ps_num: int | None = None
    ps_range: int | None = None
    plane_strengths: tuple[float, ...] | None = None

    @property
    def window_radius(self) -> int:
        """Frames on each side of n that one output frame reads.

        NLM: `radius`. V-BM3D (see ``_reference/vbm3d.py``): each frame's groups span its own
        window of ``2 radius + 1``, so one stage reads ``2 radius`` on each side, and two
        stages, whose pilots are basic estimates of such frames, ``4 radius``.
        """
        if self.algorithm != "bm3d":
            return self.radius
        stages = 2 if self.stages == 2 and not self.has_ref else 1
        return 2 * stages * self.radius

    @property
    def written_planes(self) -> tuple[int, ...]:
        """Planes this pass writes: all of `planes` but those of `plane_strengths` 0."""
        if self.plane_strengths is None:
            return self.planes
        pairs = zip(self.planes, self.plane_strengths, strict=True)
        return tuple(plane for plane, strength in pairs if strength > 0)
