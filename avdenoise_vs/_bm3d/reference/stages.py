"""The two collaborative-filtering stages of the NumPy BM3D reference.

Both stages follow one pattern: group the reference blocks of some window frames
(:mod:`avdenoise_vs._bm3d.reference.matching`), shrink each group's 3-D spectrum, and aggregate the
block estimates into the frames asked for. The public wrappers live in :mod:`.bm3d`.

The papers it follows are cited in :mod:`avdenoise_vs._bm3d.reference.bm3d`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from avdenoise_vs._bm3d.maths import (
    KAISER_BETA,
    TAU_WIENER,
    TRANSFORM_HT,
    TRANSFORM_WIENER,
    ht_match_threshold,
)
from avdenoise_vs._bm3d.reference.matching import (
    Groups,
    block_features,
    finite_blocks,
    match_groups,
    reference_grid,
)
from avdenoise_vs._bm3d.transforms import (
    BLOCK_SIZE,
    coefficient_std,
    forward_2d,
    group_transform,
    inverse_2d,
    kaiser_window,
)

__all__ = [
    "StageOptions",
    "Window",
    "basic_stage",
    "estimate",
    "final_stage",
    "stage_sums",
]

# Blocks filtered per batch, which bounds memory to about 100 MiB whatever the image size.
_BATCH_BLOCKS = 1 << 14


@dataclass(frozen=True)
class Window:
    """A temporal window of frames, normalised.

    Attributes
    ----------
    video : ndarray, shape (T, C, H, W)
        The frames as float64.
    sigma : ndarray, shape (C,)
        Noise standard deviation of each channel.
    """

    video: np.ndarray
    sigma: np.ndarray

    def channel(self, c: int) -> Window:
        """Return the one-channel window of channel ``c``."""
        return Window(self.video[:, c : c + 1], self.sigma[c : c + 1])


@dataclass(frozen=True)
class StageOptions:
    """Grouping options of one stage; see :func:`avdenoise_vs._bm3d.reference.bm3d.bm3d_basic`."""

    block_step: int
    bm_range: int
    ps_num: int
    ps_range: int
    group_size: int
    mismatch_scale: float


def _groups(guide, ref_frame, opts: StageOptions, threshold, usable) -> Groups:
    """Group the reference blocks of window frame ``ref_frame``, matching on ``guide``.

    Only `usable` blocks (:func:`finite_blocks`) take part: a reference block that is not
    gets no group, a candidate that is not is never matched.
    """
    h, w = guide.shape[1:]
    grid = (h - BLOCK_SIZE + 1, w - BLOCK_SIZE + 1)
    ref_y, ref_x = reference_grid(h, w, opts.block_step)
    keep = usable[ref_frame][ref_y * grid[1] + ref_x]
    # Unusable blocks' distances are never read, so their samples may be anything finite;
    # zeros keep NaN arithmetic (and its warnings) out of the distances.
    return match_groups(
        block_features(np.where(np.isfinite(guide), guide, 0.0)),
        ref_frame,
        (ref_y[keep], ref_x[keep]),
        grid,
        bm_range=opts.bm_range,
        ps_num=opts.ps_num,
        ps_range=opts.ps_range,
        max_size=opts.group_size,
        threshold=threshold * opts.mismatch_scale,
        usable=usable,
    )


def _gather(video: np.ndarray, groups: Groups, rows: np.ndarray, size: int) -> np.ndarray:
    """Return the first ``size`` members of groups ``rows``, shape (n, size, C, 8, 8)."""
    blocks = sliding_window_view(video, (BLOCK_SIZE, BLOCK_SIZE), axis=(2, 3))
    sel = (rows, slice(0, size))
    return blocks[groups.frame[sel], :, groups.y[sel], groups.x[sel]]


def _spectrum(group: np.ndarray, transform: str) -> np.ndarray:
    """3-D transform of groups: the 2-D transform of each block, then Haar along the group."""
    return group_transform(forward_2d(group, transform))


def _inverse_spectrum(spec: np.ndarray, transform: str) -> np.ndarray:
    """Invert :func:`_spectrum`."""
    return inverse_2d(group_transform(spec, inverse=True), transform)


def hard_threshold(spec: np.ndarray, sigma: np.ndarray, lambda_ht: float):
    """Zero the 3-D coefficients whose magnitude is at most ``lambda_ht`` noise deviations.

    Returns the thresholded spectrum and the weights ``1 / N_kept``, shape (n, C).

    The group DC (first Haar row of the 2-D DC) is always kept: it carries the local mean,
    and keeping it means no group is ever zeroed entirely (``N_kept >= 1``). the paper states the
    weight as ``1 / (sigma^2 N_kept)``; ``1 / sigma^2`` is common to every group of a channel
    and cancels when that channel is normalised, so it is left out, which also keeps
    ``sigma = 0`` finite.
    """
    # Haar is orthonormal, so a 3-D coefficient has the noise deviation of its 2-D one; the
    # Bior1.5 rows are not unit-norm, so that deviation is sigma times the row-norm product.
    std = sigma[:, None, None] * coefficient_std(TRANSFORM_HT)
    keep = np.abs(spec) > lambda_ht * std
    keep[:, 0, :, 0, 0] = True
    return spec * keep, 1.0 / keep.sum(axis=(1, 3, 4))


def wiener(spec: np.ndarray, pilot: np.ndarray, sigma: np.ndarray):
    """Shrink the noisy spectrum with the empirical Wiener attenuation of the pilot's.

    ``W = P^2 / (P^2 + sigma^2)``; returns ``W * spec`` and the weights ``1 / ||W||^2``, shape
    (n, C) (the ``1 / sigma^2`` of the paper cancels as in :func:`hard_threshold`). Where ``P`` and
    ``sigma`` are both zero ``W`` is 1, so ``sigma = 0`` gives back the input.

    The group DC keeps ``W = 1``, as :func:`hard_threshold` keeps it: it is the local mean,
    measured from the zero of the sample scale (black), not a signal around zero. Shrunk, it
    pulls the picture towards black once sigma nears the pilot's DC (8 sqrt(n) times the mean:
    at sigma 1e4 a mid-grey frame came out at a quarter of its brightness, at 1e6 black),
    where at usual deviations it is all but 1 (grey 128 in a group of 16 blocks, sigma 8:
    ``1 - 4e-6``). It also makes ``||W||^2 >= 1``, which bounds every aggregation weight by 1.
    """
    energy = pilot * pilot
    total = energy + (sigma * sigma)[:, None, None]
    atten = np.divide(energy, total, out=np.ones_like(total), where=total > 0)
    atten[:, 0, :, 0, 0] = 1.0
    return spec * atten, 1.0 / np.sum(atten * atten, axis=(1, 3, 4))


class _Accumulator:
    """Per-channel weighted sums of block estimates for some frames of a window."""

    def __init__(self, shape: tuple[int, ...], out_frames: np.ndarray) -> None:
        self.shape = shape  # (T, C, H, W)
        self.out = np.zeros(shape[0], dtype=bool)
        self.out[out_frames] = True
        t, c, h, w = shape
        self.num = np.zeros((c, t * h * w))
        self.den = np.zeros_like(self.num)
        i, j = np.meshgrid(np.arange(BLOCK_SIZE), np.arange(BLOCK_SIZE), indexing="ij")
        self._offsets = (i * w + j).ravel()
        self._kaiser = kaiser_window(BLOCK_SIZE, KAISER_BETA).ravel()

    def add(self, est, weight, frame, y, x) -> None:
        """Add blocks ``est`` (n, s, C, 8, 8) at ``frame, y, x`` (n, s), weights (n, C)."""
        _, channels, h, w = self.shape
        land = self.out[frame]
        base = (frame * h + y) * w + x
        flat = (base[land][:, None] + self._offsets).ravel()
        wgt = np.broadcast_to(weight[:, None, :], frame.shape + (channels,))[land]
        blocks = est[land].reshape(-1, channels, BLOCK_SIZE * BLOCK_SIZE)
        for c in range(channels):
            kw = wgt[:, c, None] * self._kaiser
            # bincount sums in input order, so the result is deterministic.
            size = self.num.shape[1]
            self.num[c] += np.bincount(flat, weights=(kw * blocks[:, c]).ravel(), minlength=size)
            self.den[c] += np.bincount(flat, weights=kw.ravel(), minlength=size)

    def sums(self) -> tuple[np.ndarray, np.ndarray]:
        """Return the weighted sums and the weights of every frame, each (T, C, H, W)."""
        t, c, h, w = self.shape
        return (self.num.reshape(c, t, h, w).swapaxes(0, 1),
                self.den.reshape(c, t, h, w).swapaxes(0, 1))  # fmt: skip

    def result(self, video: np.ndarray) -> np.ndarray:
        """Return the estimates of the output frames, shape (n_out, C, H, W); pixels that no
        group reached keep their value in `video` (T, C, H, W), see :func:`estimate`."""
        t, c, h, w = self.shape
        num = self.num.reshape(c, t, h, w).swapaxes(0, 1)[self.out]
        den = self.den.reshape(c, t, h, w).swapaxes(0, 1)[self.out]
        return estimate(num, den, video[self.out])


def estimate(num: np.ndarray, den: np.ndarray, frame: np.ndarray) -> np.ndarray:
    """Aggregated estimate ``num / den``, or `frame`'s own value where ``den`` is 0.

    Each frame's reference grid covers every pixel, so ``den`` is 0 only where each reference
    block over a pixel holds a NaN or an infinity (its own or a neighbour's) and no group took
    another block over it: those pixels are passed through, the non-finite ones unchanged.
    """
    out = frame.astype(np.float64, copy=True)
    np.divide(num, den, out=out, where=den > 0)
    return out


Shrink = Callable[[Groups, np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def _filter(window: Window, group_sets: list[Groups], shrink: Shrink, out_frames) -> _Accumulator:
    """Shrink every group and aggregate the estimates of ``out_frames``.

    ``shrink(groups, rows, size)`` returns the block estimates (n, size, C, 8, 8) and weights
    (n, C) of groups ``rows``, which all have ``size`` members; batching groups by size lets
    each batch use one Haar matrix.
    """
    acc = _Accumulator(window.video.shape, out_frames)
    for groups in group_sets:
        for size in np.unique(groups.size).tolist():
            rows = np.flatnonzero(groups.size == size)
            step = max(1, _BATCH_BLOCKS // size)
            for batch in (rows[s : s + step] for s in range(0, len(rows), step)):
                est, weight = shrink(groups, batch, size)
                sel = (batch, slice(0, size))
                acc.add(est, weight, groups.frame[sel], groups.y[sel], groups.x[sel])
    return acc


def _basic_sums(window, ref_frames, out_frames, opts: StageOptions, lambda_ht) -> _Accumulator:
    """Hard thresholding of the groups of ``ref_frames``, matched on the noisy channel 0."""
    tau = ht_match_threshold(float(window.sigma[0]))
    usable = finite_blocks(window.video)
    group_sets = [_groups(window.video[:, 0], f, opts, tau, usable) for f in ref_frames]

    def shrink(groups, rows, size):
        spec = _spectrum(_gather(window.video, groups, rows, size), TRANSFORM_HT)
        spec, weight = hard_threshold(spec, window.sigma, lambda_ht)
        return _inverse_spectrum(spec, TRANSFORM_HT), weight

    return _filter(window, group_sets, shrink, out_frames)


def _final_sums(window, pilot: Window, ref_frames, out_frames, opts: StageOptions) -> _Accumulator:
    """Wiener filtering of the groups of ``ref_frames``, matched on the pilot's channel 0."""
    usable = finite_blocks(window.video) & finite_blocks(pilot.video)
    group_sets = [_groups(pilot.video[:, 0], f, opts, TAU_WIENER, usable) for f in ref_frames]

    def shrink(groups, rows, size):
        spec = _spectrum(_gather(window.video, groups, rows, size), TRANSFORM_WIENER)
        ref = _spectrum(_gather(pilot.video, groups, rows, size), TRANSFORM_WIENER)
        spec, weight = wiener(spec, ref, window.sigma)
        return _inverse_spectrum(spec, TRANSFORM_WIENER), weight

    return _filter(window, group_sets, shrink, out_frames)


def basic_stage(window, ref_frames, out_frames, opts: StageOptions, lambda_ht) -> np.ndarray:
    """Hard-thresholding stage; all channels share the grouping of channel 0.

    Groups the reference blocks of ``ref_frames`` on the noisy channel 0 and returns the
    basic estimates of ``out_frames``, shape (len(out_frames), C, H, W).
    """
    return _basic_sums(window, ref_frames, out_frames, opts, lambda_ht).result(window.video)


def final_stage(window, pilot: Window, ref_frames, out_frames, opts: StageOptions) -> np.ndarray:
    """Wiener stage; all channels share the grouping of the pilot's channel 0.

    Groups on the basic estimates ``pilot``, filters the noisy ``window`` with Wiener
    attenuations from the pilot groups, and returns the estimates of ``out_frames``.
    """
    return _final_sums(window, pilot, ref_frames, out_frames, opts).result(window.video)


def stage_sums(window: Window, ref_frame: int, opts: StageOptions, *, lambda_ht=None, pilot=None):
    """Weighted sums and weights, each (T, C, H, W), that the groups of the reference blocks
    of window frame ``ref_frame`` add to every window frame: hard thresholding, or the Wiener
    stage when a ``pilot`` window is given."""
    frames = range(window.video.shape[0])
    if pilot is None:
        return _basic_sums(window, [ref_frame], frames, opts, lambda_ht).sums()
    return _final_sums(window, pilot, [ref_frame], frames, opts).sums()
