"""V-BM3D over a clip: the definition the filters and the CUDA kernels follow for ``radius > 0``.

Every frame ``m`` of the clip holds reference blocks; each is matched across ``m``'s own window
``W(m) = (m - r, ..., m + r)`` (frame numbers clamped to the clip, as VapourSynth serves them)
and its group is filtered once. Frame ``n``'s estimate then aggregates the blocks that the groups
of every frame of ``W(n)`` placed in ``n``: this is V-BM3D as Dabov et al. [1]_ run it (one
aggregation buffer for the whole sequence), and what BM3DCUDA computes with ``VAggregate``.

Because the groups of frame ``m`` do not depend on which output frame asks for them, a GPU can
filter them once and share the result with the ``2r + 1`` frames they feed. One frame needs the
input frames ``n - 2r .. n + 2r``; with two stages, the Wiener stage matches on basic estimates
of ``W(m)``, each of which needs its own window: ``n - 4r .. n + 4r``.

With ``r = 0`` this is spatial BM3D (:func:`~avdenoise_vs._bm3d.reference.bm3d.bm3d`).

References
----------
.. [1] K. Dabov, A. Foi and K. Egiazarian, "Video denoising by sparse 3D transform-domain
   collaborative filtering", Proc. 15th European Signal Processing Conference (EUSIPCO),
   145-149, 2007. https://webpages.tuni.fi/foi/GCF-BM3D/ (no DOI)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from avdenoise_vs._bm3d.maths import group_sizes as default_group_sizes
from avdenoise_vs._bm3d.reference.bm3d import _as_window, _options
from avdenoise_vs._bm3d.reference.stages import StageOptions, estimate, stage_sums

__all__ = ["ClipFrames", "FrameList", "vbm3d", "window_numbers"]


class ClipFrames(Protocol):
    """Frames of a clip by number, and which frame each position shows."""

    def number(self, position: int) -> int:
        """Frame number shown at `position` (positions past the ends show the end frames)."""

    def frame(self, number: int) -> np.ndarray:
        """Frame `number`, ``C x H x W`` float64 in 8-bit scale."""


class FrameList:
    """A whole (small) clip as a list of ``H x W`` or ``C x H x W`` frames."""

    def __init__(self, frames: Sequence[np.ndarray]) -> None:
        self.frames = [np.asarray(f, np.float64) for f in frames]

    def number(self, position: int) -> int:
        return min(max(position, 0), len(self.frames) - 1)

    def frame(self, number: int) -> np.ndarray:
        f = self.frames[number]
        return f if f.ndim == 3 else f[None]


def window_numbers(clip: ClipFrames, k: int, radius: int) -> list[int]:
    """Frame numbers of ``W(k)``, the window whose centre is frame `k`."""
    return [clip.number(k + offset) for offset in range(-radius, radius + 1)]


def vbm3d(
    clip: ClipFrames,
    n: int,
    sigma: float | Sequence[float],
    *,
    radius: int,
    stages: int = 2,
    pilot: ClipFrames | None = None,
    lambda_ht: float = 2.7,
    block_step: int = 3,
    bm_range: int = 19,
    ps_num: int = 2,
    ps_range: int = 4,
    mismatch_scale: float = 1.0,
    joint: bool = False,
    group_sizes: tuple[int, int] | None = None,
    with_kept: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Estimate frame `n` of `clip` with V-BM3D (see the module notes), ``C x H x W``.

    Parameters
    ----------
    clip : ClipFrames
        The noisy clip; frames ``n - 2r .. n + 2r`` are read (``4r`` with two stages).
    n : int
        The frame to denoise.
    sigma, lambda_ht, block_step, bm_range, ps_num, ps_range, mismatch_scale, joint
        As for :func:`avdenoise_vs._bm3d.reference.bm3d.bm3d_basic`.
    radius : int
        Temporal radius ``r``: each frame's reference blocks are matched across ``2r + 1``
        frames.
    stages : {1, 2}
        1: the hard-thresholding (basic) estimate; 2: then the Wiener stage against the basic
        estimates.
    pilot : ClipFrames, optional
        Basic estimates given by the caller (a ``ref`` clip): only the Wiener stage runs,
        matched on `pilot` and shrunk by its spectra.
    group_sizes : (int, int), optional
        Most blocks per group of the hard-thresholding and the Wiener stage, powers of two.
        Default :func:`avdenoise_vs._bm3d.maths.group_sizes` of the window and the sigma of
        channel 0, as the filters use.
    with_kept : bool
        Also return where the estimate is frame `n`'s own value: the pixels that no group
        reached because the blocks over them hold NaN or infinities (see
        :func:`avdenoise_vs._bm3d.reference.bm3d.bm3d_basic`, Notes).

    Returns
    -------
    ndarray
        The estimate of frame `n`, float64, ``C x H x W``; with `with_kept`, also a bool
        array of that shape.
    """
    if stages not in (1, 2):
        raise ValueError(f"avdenoise.BM3D: stages must be 1 or 2, got {stages}")
    grouping = (block_step, bm_range, ps_num, ps_range)
    if group_sizes is None:
        group_sizes = default_group_sizes(
            2 * radius + 1, float(np.atleast_1d(sigma)[0]), block_step
        )
    ht_size, wiener_size = group_sizes
    common = dict(clip=clip, radius=radius, sigma=sigma, joint=joint)
    if pilot is None:
        basic = _Estimates(
            _Sums(**common, opts=_options(*grouping, ht_size, mismatch_scale), lambda_ht=lambda_ht)
        )
        if stages == 1:
            return basic.with_kept(n) if with_kept else basic(n)
        pilot = _EstimateFrames(clip, basic)
    final = _Estimates(
        _Sums(**common, opts=_options(*grouping, wiener_size, mismatch_scale), pilot=pilot)
    )
    return final.with_kept(n) if with_kept else final(n)


class _Sums:
    """Per reference frame ``m``: what its groups add to each frame of ``W(m)``, memoized."""

    def __init__(self, *, clip, radius, sigma, joint, opts: StageOptions, lambda_ht=None,
                 pilot: ClipFrames | None = None) -> None:  # fmt: skip
        self.clip, self.radius, self.sigma, self.joint = clip, radius, sigma, joint
        self.opts, self.lambda_ht, self.pilot = opts, lambda_ht, pilot
        self.of = functools.cache(self._compute)

    def _compute(self, m: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """``{frame number: (weighted sums, weights)}``, each ``C x H x W``."""
        numbers = window_numbers(self.clip, m, self.radius)
        window = _as_window([self.clip.frame(f) for f in numbers], self.sigma)
        pilot = None
        if self.pilot is not None:
            pilot = _as_window([self.pilot.frame(f) for f in numbers], self.sigma)
        channels = [None] if self.joint else range(window.sigma.size)
        parts = [self._channel_sums(window, pilot, c) for c in channels]
        num = np.concatenate([p[0] for p in parts], axis=1)
        den = np.concatenate([p[1] for p in parts], axis=1)
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for index, f in enumerate(numbers):  # a frame repeated at the clip ends counts once
            prev = out.get(f, (0.0, 0.0))
            out[f] = (prev[0] + num[index], prev[1] + den[index])
        return out

    def _channel_sums(self, window, pilot, channel):
        if channel is not None:
            window = window.channel(channel)
            pilot = pilot.channel(channel) if pilot is not None else None
        return stage_sums(window, self.radius, self.opts, lambda_ht=self.lambda_ht, pilot=pilot)


class _Estimates:
    """Frame estimates: the normalised sums of the groups of every frame of ``W(k)``."""

    def __init__(self, sums: _Sums) -> None:
        self.sums = sums
        self._cache = functools.cache(self._compute)

    def __call__(self, k: int) -> np.ndarray:
        return self._cache(k)[0]

    def with_kept(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The estimate of frame k and where it is frame k's own value."""
        return self._cache(k)

    def _compute(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        num = den = 0.0
        for m in sorted(set(window_numbers(self.sums.clip, k, self.sums.radius))):
            part_num, part_den = self.sums.of(m)[k]
            num = num + part_num
            den = den + part_den
        return estimate(num, den, self.sums.clip.frame(k)), den == 0


class _EstimateFrames:
    """Basic estimates seen as a clip: the pilot of the Wiener stage."""

    def __init__(self, clip: ClipFrames, estimates: _Estimates) -> None:
        self.clip, self.estimates = clip, estimates

    def number(self, position: int) -> int:
        return self.clip.number(position)

    def frame(self, number: int) -> np.ndarray:
        return self.estimates(number)
