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

from avdenoise_vs._backends.planes import plane_array
from avdenoise_vs._bm3d.maths import OPP, OPP_INVERSE, bm3d_sigmas
from avdenoise_vs._bm3d.reference.vbm3d import vbm3d
from avdenoise_vs._nlm.maths import temporal_radius_at
from avdenoise_vs._nlm.reference import nlm
from avdenoise_vs._params.options import Distance, FrameLayout, SampleType
from avdenoise_vs._params.settings import Bm3dSettings, NlmSettings, PassSettings

__all__ = ["NumpyBackend"]

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
    """Denoise each requested frame with the reference :func:`~avdenoise_vs._nlm.reference.nlm`
    or :func:`~avdenoise_vs._bm3d.reference.vbm3d.vbm3d`, in float64.

    Parameters
    ----------
    passes : tuple of PassSettings
        The passes to run, in order; each writes its own planes.
    layout : FrameLayout
        Layout of the clip (and of ``ref``).

    Notes
    -----
    A frame runs on the thread VapourSynth calls it on, with no thread pool of its own:
    VapourSynth already renders ``core.num_threads`` frames at once (one per CPU by default),
    and NumPy releases the GIL in the large array operations that take the time, so threads
    inside a frame would only compete with those frames for the same cores.
    """

    name = "cpu"
    gpu_frames = None

    def __init__(self, passes: tuple[PassSettings, ...], layout: FrameLayout) -> None:
        self.passes = passes
        self.layout = layout

    def process(self, n: int, frame_numbers: tuple, windows: tuple, dst: tuple) -> None:
        """Fill the processed planes of ``dst`` (the bridge's frame protocol)."""
        center = len(frame_numbers) // 2
        for options in self.passes:
            if isinstance(options, Bm3dSettings):
                self._bm3d_pass(options, n, frame_numbers, windows, dst)
            else:
                self._nlm_pass(options, n, center, windows, dst)

    def bridge_process(self, n: int, frame_numbers: tuple, windows: tuple, dst: tuple) -> None:
        """The bridge's call: :meth:`process`, since a CPU frame leaves nothing to do without
        the GIL (no host step, see :class:`~avdenoise_vs._backends.protocol.Backend`)."""
        self.process(n, frame_numbers, windows, dst)

    def _nlm_pass(
        self, options: NlmSettings, n: int, center: int, windows: tuple, dst: tuple
    ) -> None:
        """One NLM pass on samples in [0, 1] (integer) or as they are (float), over
        KNLMeansCL's window at frame `n` (the middle of the bridge's)."""
        radius = temporal_radius_at(n, options.radius)
        frames = slice(center - radius, center + radius + 1)
        values = [self._load(frame, options.planes) for frame in windows[0][frames]]
        guide = (
            [self._load(f, options.planes) for f in windows[1][frames]] if options.has_ref else None
        )
        out = nlm(
            values,
            center=radius,
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

    def _bm3d_pass(self, options: Bm3dSettings, n: int, numbers, windows: tuple, dst) -> None:
        """One BM3D pass in 8-bit scale: OPP for RGB, joint for YUV/RGB, else per plane.

        V-BM3D as :mod:`~avdenoise_vs._bm3d.reference.vbm3d` defines it, on the frames the bridge
        handed over (``options.window_radius`` on each side of n). With ``has_ref`` only the
        Wiener stage runs, piloted by the ``ref`` clip (see
        :attr:`~avdenoise_vs._params.settings.Stages.WIENER`).
        """
        clip = _WindowClip(n, numbers, self._bm3d_window(options, windows[0]))
        pilot = None
        if options.has_ref:
            pilot = _WindowClip(n, numbers, self._bm3d_window(options, windows[1]))
        out, kept = vbm3d(
            clip,
            n,
            bm3d_sigmas(options),
            radius=options.radius,
            stages=options.stages.parameter,
            pilot=pilot,
            lambda_ht=options.lambda_ht,
            block_step=options.block_step,
            bm_range=options.bm_range,
            ps_num=options.ps_num,
            ps_range=options.ps_range,
            mismatch_scale=options.mismatch_scale,
            joint=options.distance in (Distance.YUV, Distance.RGB),
            with_kept=True,
        )
        if options.distance is Distance.RGB:
            out = np.einsum("ij,jhw->ihw", OPP_INVERSE, out)
        # Pixels no group reached (NaN or infinities in every block over them; float clips
        # only) take the source samples themselves: scaling, or OPP and back, would change
        # them, and would spread a non-finite sample of one RGB plane to the other two.
        source = self._load(windows[0][len(numbers) // 2], options.planes)
        out = np.where(kept, source, out / _BM3D_SCALE)
        for index, plane in enumerate(options.planes):
            if plane in options.written_planes:
                self._store(dst[plane], plane, out[index])

    def _bm3d_window(self, options: Bm3dSettings, window: tuple) -> list[np.ndarray]:
        """A window's planes of the pass in 8-bit scale (``value * 255 / peak``), OPP for RGB.

        BM3D's sigma is the strength there. Float chroma (centred at 0) stays centred at 0,
        which BM3D does not mind: both stages keep the group DC, the local mean, whatever its
        value.
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
