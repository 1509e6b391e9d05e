"""The argument records of the BM3D kernels: the host image of ``struct Bm3dArgs``.

Every BM3D kernel takes one ``Bm3dArgs`` by value (bm3d_common.cuh). Its NumPy image is a
structured dtype (:func:`bm3d_args_dtype`) whose field order and sizes follow the C struct
exactly; ``tests/cuda/test_bm3d_args.py`` parses the struct and checks that they do.
:class:`Bm3dRecords` holds one pass's template, the fields that never change between launches,
and builds each launch's record from it.
"""

from __future__ import annotations

import numpy as np

from avdenoise_vs._bm3d.maths import TAU_WIENER, bm3d_sigmas, ht_match_threshold
from avdenoise_vs._params.options import FrameLayout
from avdenoise_vs._params.settings import Bm3dSettings

__all__ = ["Bm3dRecords", "bm3d_args_dtype", "reference_count", "reference_grid"]

#: Fields that hold one value per window frame; a record sets the first ``len(value)``.
_PER_FRAME = ("noisy_at", "pilot_at", "acc_at")


def bm3d_args_dtype(window: int) -> np.dtype:
    """Host image of ``struct Bm3dArgs`` in bm3d_common.cuh (8-byte fields only: no padding)."""
    i8, f8 = np.int64, np.float64
    return np.dtype(
        [("src", i8, (2, window))]
        + [(name, i8, (window,)) for name in _PER_FRAME]
        + [(name, i8) for name in ("clear", "dst", "out")]
        + [("plane_off", i8, (3,))]
        + [(name, i8) for name in ("width", "height", "src_pitch", "pitch")]
        + [(name, i8) for name in ("refs_x", "refs_y", "step", "center", "to_pilot")]
        + [(name, i8) for name in ("inputs", "tile")]
        + [("sigma", f8, (3,))]
        + [(name, f8) for name in ("lambda_ht", "threshold", "scale", "peak")]
    )


def reference_count(length: int, step: int) -> int:
    """Reference positions along an axis of `length` pixels (the reference's grid)."""
    last = length - 8
    return -(-last // step) + 1


def reference_grid(options: Bm3dSettings, layout: FrameLayout) -> tuple[int, int]:
    """Reference positions of a pass along x and y (its first plane's size, its step)."""
    height, width = layout.plane_shape(options.planes[0])
    return (reference_count(width, options.block_step),
            reference_count(height, options.block_step))  # fmt: skip


class Bm3dRecords:
    """The argument records of one pass: a template with its constant fields, and the match
    threshold of each stage kernel.

    Parameters
    ----------
    options : Bm3dSettings
    layout : FrameLayout
    offsets, pitch : dict of int to int
        Byte offset and row pitch of each plane in a frame slot and an output buffer.
    work_pitch : int
        Row pitch of the float work planes, elements.
    tile_sums : dict of str to bool, optional
        The stage kernels (by name) that aggregate the reference frame through their tile's
        shared sums (``tile``); none by default.
    """

    def __init__(
        self,
        options: Bm3dSettings,
        layout: FrameLayout,
        offsets: dict[int, int],
        pitch: dict[int, int],
        work_pitch: int,
        tile_sums: dict[str, bool] | None = None,
    ) -> None:
        planes = options.planes
        height, width = layout.plane_shape(planes[0])
        itemsize = layout.dtype.itemsize
        self.refs = reference_grid(options, layout)
        template = np.zeros(1, dtype=bm3d_args_dtype(2 * options.radius + 1))
        template["plane_off"][0, : len(planes)] = [offsets[p] // itemsize for p in planes]
        template["width"], template["height"] = width, height
        template["src_pitch"] = pitch[planes[0]] // itemsize
        template["pitch"] = work_pitch
        template["refs_x"], template["refs_y"] = self.refs
        template["step"] = options.block_step
        template["center"] = options.radius
        sigmas = bm3d_sigmas(options)
        template["sigma"][0, : len(planes)] = sigmas
        template["lambda_ht"] = options.lambda_ht
        template["scale"] = 255.0 / layout.peak
        template["peak"] = layout.peak
        template["inputs"] = 1 + options.has_ref
        self.template = template
        self.tile_sums = tile_sums or {}
        self.thresholds = {
            "bm3d_hard": ht_match_threshold(sigmas[0]) * options.mismatch_scale,
            "bm3d_wiener": TAU_WIENER * options.mismatch_scale,
        }

    def record(self, **fields) -> np.ndarray:
        """An argument record: the template and `fields`."""
        record = self.template.copy()
        for name, value in fields.items():
            if name in _PER_FRAME:
                record[name][0, : len(value)] = value
            elif name == "src":
                for index, row in enumerate(value):
                    record["src"][0, index, : len(row)] = row
            else:
                record[name] = value
        return record

    def stage(self, name: str, **fields) -> np.ndarray:
        """The record of stage kernel `name`: :meth:`record` with the stage's match threshold."""
        tile = int(self.tile_sums.get(name, False))
        return self.record(threshold=self.thresholds[name], tile=tile, **fields)
