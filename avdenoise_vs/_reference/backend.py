"""The NumPy backend: runs the reference algorithms on frames handed over by the bridge.

Slow but exact and dependency-free; it runs anywhere and is the oracle the GPU backends are
tested against.

References
----------
.. [1] K. Dabov, A. Foi, V. Katkovnik and K. Egiazarian, "Color image denoising via sparse 3D
   collaborative filtering with grouping constraint in luminance-chrominance space", Proc. IEEE
   Int. Conf. Image Processing (ICIP), I-313-I-316, 2007. doi:10.1109/ICIP.2007.4378954
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._options import Distance, FrameLayout, PlaneOptions, SampleType
from .._planes import plane_array
from .nlm import nlm
from .vbm3d import vbm3d

__all__ = ["OPP", "NumpyBackend"]

#: RGB to opponent colour space (rows: luminance, red-blue, green-magenta), the orthonormal
#: version of CBM3D's [1]_ transform: each row of [1]_'s matrix scaled to unit length. Being
#: orthogonal, it maps white noise of deviation sigma in each RGB channel to white noise of
#: the same sigma in each OPP channel, so every channel takes sigma = strength; its inverse
#: is its transpose.
OPP = np.array(
    [
        [1.0, 1.0, 1.0] / np.sqrt(3.0),
        [1.0, 0.0, -1.0] / np.sqrt(2.0),
        [1.0, -2.0, 1.0] / np.sqrt(6.0),
    ]
)

#: BM3D works in 8-bit units (its thresholds and sigma are calibrated there).
_BM3D_SCALE = 255.0


class _WindowClip:
    """The frames the bridge handed over for frame n, as a clip (see ``vbm3d.ClipFrames``)."""

    def __init__(self, n: int, numbers: Sequence[int], frames: list[np.ndarray]) -> None:
        self.first = n - len(numbers) // 2
        self.numbers = numbers
        self.by_number = dict(zip(numbers, frames, strict=True))

    def number(self, position: int) -> int:
        return self.numbers[position - self.first]

    def frame(self, number: int) -> np.ndarray:
        return self.by_number[number]


class NumpyBackend:
    """Denoise each requested frame with the reference :func:`~avdenoise_vs._reference.nlm.nlm`
    or :func:`~avdenoise_vs._reference.vbm3d.vbm3d`, in float64.

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
            if options.algorithm == "bm3d":
                self._bm3d_pass(options, n, frame_numbers, windows, dst)
            else:
                self._nlm_pass(options, center, windows, dst)

    def _nlm_pass(self, options: PlaneOptions, center: int, windows: tuple, dst: tuple) -> None:
        """One NLM pass on samples in [0, 1] (integer) or as they are (float)."""
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

    def _bm3d_pass(self, options: PlaneOptions, n: int, numbers, windows: tuple, dst) -> None:
        """One BM3D pass in 8-bit scale: OPP for RGB, joint for YUV/RGB, else per plane.

        V-BM3D as :mod:`~avdenoise_vs._reference.vbm3d` defines it, on the frames the bridge
        handed over (``options.window_radius`` on each side of n). With ``has_ref`` only the
        Wiener stage runs, piloted by the ``ref`` clip (see
        :class:`~avdenoise_vs._options.PlaneOptions`).
        """
        clip = _WindowClip(n, numbers, self._bm3d_window(options, windows[0]))
        pilot = None
        if options.has_ref:
            pilot = _WindowClip(n, numbers, self._bm3d_window(options, windows[1]))
        out = vbm3d(
            clip,
            n,
            options.plane_strengths or options.strength,
            radius=options.radius,
            stages=options.stages,
            pilot=pilot,
            lambda_ht=options.lambda_ht,
            block_step=options.block_step,
            bm_range=options.bm_range,
            ps_num=options.ps_num,
            ps_range=options.ps_range,
            mismatch_scale=options.mismatch_scale,
            joint=options.distance in (Distance.YUV, Distance.RGB),
        )
        if options.distance is Distance.RGB:
            out = np.einsum("ij,ihw->jhw", OPP, out)  # OPP^-1 = OPP^T
        for index, plane in enumerate(options.planes):
            if plane in options.written_planes:
                self._store(dst[plane], plane, out[index] / _BM3D_SCALE)

    def _bm3d_window(self, options: PlaneOptions, window: tuple) -> list[np.ndarray]:
        """A window's planes of the pass in 8-bit scale (``value * 255 / peak``), OPP for RGB.

        BM3D's sigma is the strength there. Float chroma (centred at 0) stays centred at 0,
        which BM3D does not mind: hard thresholding keeps the group DC, and the Wiener gain of
        a DC of 8 sqrt(N) times the local mean (N blocks) is 1 unless that mean is within a
        small fraction of a code of 0.
        """
        peak = self.layout.peak
        frames = [self._stack(frame, options.planes) * _BM3D_SCALE / peak for frame in window]
        if options.distance is Distance.RGB:
            frames = [np.einsum("ij,jhw->ihw", OPP, f) for f in frames]
        return frames

    def _stack(self, frame: Sequence, planes: tuple[int, ...]) -> np.ndarray:
        """The pass's planes of one frame, stacked, as float64 sample values."""
        layout = self.layout
        arrays = [plane_array(frame[p], layout.plane_shape(p), layout.dtype) for p in planes]
        return np.stack(arrays).astype(np.float64)

    def _load(self, frame: Sequence, planes: tuple[int, ...]) -> np.ndarray:
        """Stack the pass's planes of one frame as float64 in [0, 1] (integer) or as is (float)."""
        return self._stack(frame, planes) / self.layout.peak

    def _store(self, view: tuple, plane: int, values: np.ndarray) -> None:
        """Write one plane given in [0, 1] (integer clips) or as is (float)."""
        layout = self.layout
        out = plane_array(view, layout.plane_shape(plane), layout.dtype)
        if layout.sample_type is SampleType.FLOAT:
            out[...] = values
        else:
            # Round half to even, as KNLMeansCL's convert_*_sat_rte does.
            out[...] = np.clip(np.rint(values * layout.peak), 0, layout.peak)
