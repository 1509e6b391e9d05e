"""The clip's frame layout and the fixed option sets that the passes and the kernels share.

The passes themselves are ``_params/settings.py``'s. The CUDA passes derive their kernel specs
(``_nlm/cuda/source.py`` ``NlmSpec``, ``_bm3d/cuda/source.py`` ``Bm3dSpec``) from both; the
warm-up queue keys on those specs, so a setting that changes a kernel's code must reach its
spec, not only a field of a pass.
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
