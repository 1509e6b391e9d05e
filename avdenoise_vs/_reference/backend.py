"""The NumPy backend: runs the reference algorithms on frames handed over by the bridge.

Slow but exact and dependency-free; it runs anywhere and is the oracle the GPU backends are
tested against.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._options import FrameLayout, PlaneOptions, SampleType
from .._planes import plane_array
from .nlm import nlm

__all__ = ["NumpyBackend"]


class NumpyBackend:
    """Denoise each requested frame with :func:`~avdenoise_vs._reference.nlm.nlm` in float64.

    Parameters
    ----------
    passes : tuple of PlaneOptions
        The passes to run, in order; each writes its own planes.
    layout : FrameLayout
        Layout of the clip (and of ``ref``).
    """

    name = "cpu"

    def __init__(self, passes: tuple[PlaneOptions, ...], layout: FrameLayout) -> None:
        self.passes = passes
        self.layout = layout

    def process(self, n: int, frame_numbers: tuple, windows: tuple, dst: tuple) -> None:
        """Fill the processed planes of ``dst`` (the bridge's frame protocol)."""
        center = len(frame_numbers) // 2
        for options in self.passes:
            values = [self._load(frame, options.planes) for frame in windows[0]]
            guide = [self._load(f, options.planes) for f in windows[1]] if options.has_ref else None
            out = nlm(
                values,
                center=center,
                h=options.strength,
                search_radius=options.search_radius,
                patch_radius=options.patch_radius,
                wmode=options.wmode,
                wref=options.wref,
                distance=options.distance,
                guide=guide,
            )
            for index, plane in enumerate(options.planes):
                self._store(dst[plane], plane, out[index])

    def _load(self, frame: Sequence, planes: tuple[int, ...]) -> np.ndarray:
        """Stack the pass's planes of one frame as float64 in [0, 1] (integer) or as is (float)."""
        layout = self.layout
        arrays = [plane_array(frame[p], layout.plane_shape(p), layout.dtype) for p in planes]
        return np.stack(arrays).astype(np.float64) / layout.peak

    def _store(self, view: tuple, plane: int, values: np.ndarray) -> None:
        layout = self.layout
        out = plane_array(view, layout.plane_shape(plane), layout.dtype)
        if layout.sample_type is SampleType.FLOAT:
            out[...] = values
        else:
            # Round half to even, as KNLMeansCL's convert_*_sat_rte does.
            out[...] = np.clip(np.rint(values * layout.peak), 0, layout.peak)
