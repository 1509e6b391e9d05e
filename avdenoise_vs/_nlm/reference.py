"""Non-local means in NumPy: the reference backend and the oracle for the CUDA kernels.

The maths follows KNLMeansCL [2]_ so that results match it at equal parameters; the
algorithm itself is Buades, Coll and Morel's non-local means [1]_ with a spatio-temporal
search window.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from avdenoise_vs._nlm.maths import MAX_WEIGHT_FLOOR, ZERO_WEIGHT_BELOW, weight_scale
from avdenoise_vs._params.options import Distance, WeightMode

__all__ = ["nlm"]


def nlm(
    window: Sequence[np.ndarray],
    *,
    center: int,
    h: float,
    search_radius: int,
    patch_radius: int,
    wmode: int,
    wref: float,
    distance: Distance,
    guide: Sequence[np.ndarray] | None = None,
) -> np.ndarray:
    """Denoise one frame with spatio-temporal non-local means.

    Parameters
    ----------
    window : sequence of ndarray, each (C, H, W) float64
        The frames of the temporal window, an odd number of them with the frame to denoise in
        the middle (KNLMeansCL's window: see `temporal_radius_at`), each holding the C planes
        denoised jointly in this pass.
        Samples are in [0, 1] (integer clips divided by their peak value; chroma of a float
        clip may be in [-0.5, 0.5], which the maths does not mind).
    center : int
        Index of the frame to denoise in `window`: ``len(window) // 2``.
    h : float
        Strength, in 8-bit code values (KNLMeansCL ``h``). Larger smooths more.
    search_radius : int
        Spatial search radius in pixels (KNLMeansCL ``a``); the window is ``2a+1`` square.
    patch_radius : int
        Patch radius in pixels (KNLMeansCL ``s``); patches are ``2s+1`` square.
    wmode : int
        Weighting function, a :class:`~avdenoise_vs._params.options.WeightMode` value.
    wref : float
        Weight of the centre pixel, as a multiple of the largest weight found.
    distance : Distance
        How the channels of a pass weigh in the patch distance.
    guide : sequence of ndarray, optional
        Frames the weights are computed from (KNLMeansCL ``rclip``); same shapes as
        `window`. The output averages `window`'s samples. Defaults to `window`.

    Returns
    -------
    ndarray, (C, H, W) float64
        The denoised centre frame.

    Notes
    -----
    For every pixel ``x`` of the centre frame and every offset ``q = (t, dy, dx)`` of the
    ``(2d+1) x (2a+1) x (2a+1)`` search window except ``q = 0``, the weight is
    ``f(scale * sum_p dist(g_0(x + p), g_t(x + q + p)))`` over the patch offsets ``p``, with
    ``f`` the weighting function and ``dist`` the channel-weighted squared difference. The
    centre pixel gets ``wref`` times the largest weight, at least ``wref * 2^-23``.

    The frame borders follow KNLMeansCL exactly, which computes each pair of opposite
    offsets ``-q`` and ``+q`` once: samples outside the frame are zero, and

    - for ``q`` before the centre in ``(t, dy, dx)`` order, the patch sum leaves out the
      terms whose centre-frame pixel ``x + p`` lies outside the frame, and a candidate
      outside the frame takes part with the value 0;
    - for ``q`` after it, the sum leaves out the terms whose candidate pixel
      ``x + q + p`` lies outside, and a candidate outside the frame takes no part.

    Non-finite samples (NaN, inf: float clips only) never spread: patch terms that are not
    finite are left out of the sums, candidates with a non-finite sample take no part, and
    a non-finite centre sample comes out as it went in.

    Cost: ``O(C * H * W * (2d+1) * (2a+1)^2)``; each offset is a few whole-frame array
    operations, the patch sum an integral image.

    References
    ----------
    .. [1] A. Buades, B. Coll and J.-M. Morel, "A non-local algorithm for image denoising",
       CVPR 2005, doi:10.1109/CVPR.2005.38.
    .. [2] E. Khanattila, KNLMeansCL, https://github.com/Khanattila/KNLMeansCL (kernel
       source ``NLMKernel.cpp``, frame loop ``NLMVapoursynth.cpp``).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> noisy = np.clip(0.5 + rng.normal(0, 0.05, (1, 32, 32)), 0, 1)
    >>> out = nlm([noisy], center=0, h=12.0, search_radius=2, patch_radius=2,
    ...           wmode=0, wref=1.0, distance=Distance.LUMA)
    >>> bool(out.std() < noisy.std())
    True
    """
    guide = window if guide is None else guide
    a, s = search_radius, patch_radius
    _, height, width = window[center].shape
    scale = weight_scale(h, s)
    guides = [_pad_zero(g, a + s) for g in guide]
    values = [_pad_zero(v, a) for v in window]
    centre_guide = guides[center][:, a : a + height + 2 * s, a : a + width + 2 * s]
    region = (height + 2 * s, width + 2 * s, -s, height, width)  # the frame grown by s
    centre_inside = _inside(*region)

    finite = all(np.isfinite(frame).all() for frame in (*guide, *window))
    # Where a candidate has a non-finite sample (only looked at when the input has one).
    usable = None if finite else [np.isfinite(v).all(axis=0) for v in values]

    num = np.zeros(window[center].shape)
    den = np.zeros((height, width))
    best = np.full((height, width), MAX_WEIGHT_FLOOR)
    for k in range(len(window)):
        for dy in range(-a, a + 1):
            for dx in range(-a, a + 1):
                if k == center and dy == 0 and dx == 0:
                    continue
                before = (k - center, dy, dx) < (0, 0, 0)
                rows = slice(a + dy, a + dy + height + 2 * s)
                cols = slice(a + dx, a + dx + width + 2 * s)
                with np.errstate(invalid="ignore"):  # inf - inf, with non-finite samples
                    pixel = _pixel_distance(centre_guide, guides[k][:, rows, cols], distance)
                if not finite:
                    pixel[~np.isfinite(pixel)] = 0.0
                pixel *= centre_inside if before else _inside(*region, dy, dx)
                weight = _weight(_box_sum(pixel, s) * scale, wmode)
                if not before:
                    weight *= _inside(height, width, 0, height, width, dy, dx)
                shifted = values[k][:, a + dy : a + dy + height, a + dx : a + dx + width]
                if not finite:
                    take = usable[k][a + dy : a + dy + height, a + dx : a + dx + width]
                    weight = np.where(take, weight, 0.0)
                    shifted = np.where(take, shifted, 0.0)
                num += weight * shifted
                den += weight
                np.maximum(best, weight, out=best)

    centre_weight = wref * best
    total = den + centre_weight
    out = (num + centre_weight * window[center]) / np.where(total > 0, total, 1.0)
    # With wref = 0 and every weight zero (Bisquare) nothing was averaged: keep the input.
    # (KNLMeansCL divides 0 by 0 there.)
    return np.where(total > 0, out, window[center])


def _inside(
    rows: int, cols: int, first: int, height: int, width: int, dy: int = 0, dx: int = 0
) -> np.ndarray:
    """1 where pixel ``(first + i + dy, first + j + dx)`` of a (rows, cols) grid whose first
    pixel is ``(first, first)`` lies inside a ``height x width`` frame, else 0."""
    ys = np.arange(rows) + first + dy
    xs = np.arange(cols) + first + dx
    inside_rows = (ys >= 0) & (ys < height)
    inside_cols = (xs >= 0) & (xs < width)
    return (inside_rows[:, None] & inside_cols[None, :]).astype(np.float64)


def _pad_zero(frame: np.ndarray, pad: int) -> np.ndarray:
    """Pad the two spatial axes of a (C, H, W) frame with zeros (KNLMeansCL's border)."""
    return np.pad(frame, ((0, 0), (pad, pad), (pad, pad)))


def _pixel_distance(a: np.ndarray, b: np.ndarray, distance: Distance) -> np.ndarray:
    """Channel-weighted squared difference of two (C, H, W) stacks, KNLMeansCL's weighting.

    Luma counts 3x and each chroma plane 1.5x so that one plane or a chroma pair weighs
    as much as the three planes of a joint YUV distance. RGB uses the "redmean"
    approximation of perceived colour difference, with weights that also sum to 3.
    """
    diff2 = (a - b) ** 2
    if distance is Distance.LUMA:
        return 3.0 * diff2[0]
    if distance is Distance.CHROMA:
        return 1.5 * (diff2[0] + diff2[1])
    if distance is Distance.YUV:
        return diff2[0] + diff2[1] + diff2[2]
    mean_red = (a[0] + b[0]) / 6.0
    return (2.0 / 3.0 + mean_red) * diff2[0] + (4.0 / 3.0) * diff2[1] + (1.0 - mean_red) * diff2[2]


def _box_sum(image: np.ndarray, radius: int) -> np.ndarray:
    """Sum over every ``2r+1`` square of `image`, via an integral image (output shrinks by 2r)."""
    integral = np.zeros((image.shape[0] + 1, image.shape[1] + 1))
    integral[1:, 1:] = image.cumsum(axis=0).cumsum(axis=1)
    size = 2 * radius + 1
    return (
        integral[size:, size:]
        - integral[:-size, size:]
        - integral[size:, :-size]
        + integral[:-size, :-size]
    )


def _weight(arg: np.ndarray, wmode: int) -> np.ndarray:
    """KNLMeansCL's weighting functions of the normalised patch distance (denormals zero)."""
    if wmode == WeightMode.WELSCH:
        weight = np.exp(-arg)
    else:
        bisquare = np.maximum(1.0 - arg, 0.0)
        power = {WeightMode.BISQUARE_A: 1, WeightMode.BISQUARE_B: 2, WeightMode.BISQUARE_C: 8}
        weight = bisquare ** power[WeightMode(wmode)]
    return np.where(weight < ZERO_WEIGHT_BELOW, 0.0, weight)
