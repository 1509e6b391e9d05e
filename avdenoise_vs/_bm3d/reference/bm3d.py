"""NumPy reference implementation of BM3D, CBM3D and V-BM3D.

This is the oracle that the CUDA kernels are tested against, so every step is explicit and
deterministic: no randomness, and block matching breaks distance ties by position. Samples are
float64 in 8-bit scale (0-255) and ``sigma`` is in the same units; callers convert.

One call filters one *window*: a sequence of ``2r + 1`` frames (``r`` the temporal radius,
``r = 0`` for spatial BM3D), each 2-D (one plane) or 3-D (``C x H x W``), of which the frame
``center`` is returned.

References
----------
.. [1] K. Dabov, A. Foi, V. Katkovnik and K. Egiazarian, "Image denoising by sparse 3-D
   transform-domain collaborative filtering", IEEE Trans. Image Process. 16(8), 2080-2095,
   2007. doi:10.1109/TIP.2007.901238
.. [2] K. Dabov, A. Foi and K. Egiazarian, "Video denoising by sparse 3D transform-domain
   collaborative filtering", Proc. 15th European Signal Processing Conference (EUSIPCO),
   145-149, 2007. https://webpages.tuni.fi/foi/GCF-BM3D/ (no DOI)
.. [3] K. Dabov, A. Foi, V. Katkovnik and K. Egiazarian, "Color image denoising via sparse 3D
   collaborative filtering with grouping constraint in luminance-chrominance space", Proc. IEEE
   Int. Conf. Image Processing (ICIP), I-313-I-316, 2007. doi:10.1109/ICIP.2007.4378954
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from avdenoise_vs._bm3d.maths import group_sizes
from avdenoise_vs._bm3d.reference.stages import StageOptions, Window, basic_stage, final_stage
from avdenoise_vs._bm3d.transforms import BLOCK_SIZE

__all__ = ["basic_estimates", "bm3d", "bm3d_basic", "bm3d_final"]


def _as_window(frames: Sequence[np.ndarray], sigma: float | Sequence[float]) -> Window:
    """Stack and check the frames; a 2-D frame becomes one channel."""
    arrays = [np.asarray(f, dtype=np.float64) for f in frames]
    if not arrays:
        raise ValueError("avdenoise.BM3D: frames must hold at least one frame, got 0")
    shape = arrays[0].shape
    if len(shape) not in (2, 3) or any(a.shape != shape for a in arrays):
        shapes = [a.shape for a in arrays]
        raise ValueError(f"avdenoise.BM3D: frames must share one 2-D or 3-D shape, got {shapes}")
    video = np.stack([a if a.ndim == 3 else a[None] for a in arrays])
    if min(video.shape[2:]) < BLOCK_SIZE:
        raise ValueError(f"avdenoise.BM3D: frames must be at least 8x8, got {video.shape[2:]}")
    sig = np.asarray(sigma, dtype=np.float64).ravel()
    if sig.size not in (1, video.shape[1]) or np.any(sig < 0) or not np.all(np.isfinite(sig)):
        raise ValueError(
            f"avdenoise.BM3D: sigma must be one or {video.shape[1]} finite values >= 0, got {sigma}"
        )
    return Window(video=video, sigma=np.broadcast_to(sig, (video.shape[1],)).copy())


def _check_center(center: int, count: int) -> None:
    """Raise unless ``center`` indexes one of ``count`` frames."""
    if not 0 <= center < count:
        raise ValueError(f"avdenoise.BM3D: center must be in [0, {count}), got {center}")


def _options(block_step, bm_range, ps_num, ps_range, group_size, mismatch_scale) -> StageOptions:
    """Check the grouping options and freeze them."""
    checks = {
        "block_step": (block_step, block_step >= 1),
        "bm_range": (bm_range, bm_range >= 0),
        "ps_num": (ps_num, ps_num >= 1),
        "ps_range": (ps_range, ps_range >= 0),
        "group_size": (group_size, group_size >= 1 and group_size & (group_size - 1) == 0),
        "mismatch_scale": (mismatch_scale, mismatch_scale >= 0),
    }
    for name, (value, ok) in checks.items():
        if not ok:
            raise ValueError(f"avdenoise.BM3D: {name} is out of range, got {value}")
    return StageOptions(
        int(block_step), int(bm_range), int(ps_num), int(ps_range), int(group_size),
        float(mismatch_scale),
    )  # fmt: skip


def _per_channel_set(stage, window: Window, *others: Window, joint: bool) -> np.ndarray:
    """Run ``stage`` once with all channels grouped together, or once per channel.

    ``stage(window, *others)`` returns (n_out, C, H, W); results are joined on the channel axis.
    """
    if joint:
        return stage(window, *others)
    parts = range(window.sigma.size)
    return np.concatenate(
        [stage(window.channel(c), *(o.channel(c) for o in others)) for c in parts], axis=1
    )


def _shaped(estimates: np.ndarray, frames: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Give each estimate (C, H, W) the shape of the input frames."""
    return [e[0] if np.ndim(frames[0]) == 2 else e for e in estimates]


def bm3d_basic(
    frames: Sequence[np.ndarray],
    center: int,
    sigma: float | Sequence[float],
    *,
    lambda_ht: float = 2.7,
    block_step: int = 3,
    bm_range: int = 19,
    ps_num: int = 2,
    ps_range: int = 4,
    mismatch_scale: float = 1.0,
    joint: bool = False,
    group_size: int | None = None,
    window_refs: bool = True,
) -> np.ndarray:
    """Basic estimate of one frame: the hard-thresholding stage of BM3D / V-BM3D [1]_ [2]_.

    Parameters
    ----------
    frames : sequence of ndarray
        The temporal window: frames of one shape, ``H x W`` or ``C x H x W``, in 8-bit scale,
        at least 8x8. One frame gives spatial BM3D.
    center : int
        Index in ``frames`` of the frame to denoise.
    sigma : float or sequence of float
        Noise standard deviation in 8-bit units, one value or one per channel; 0 or more.
        It sets the hard thresholds and, through the sigma of channel 0, the block-distance
        threshold ``max(2500, 1250 + 2 sigma^2)``: [1]_'s 2500 up to sigma 25, then growing
        with the noise-only distance ``2 sigma^2`` (see Notes).
    lambda_ht : float
        Hard threshold in noise deviations (``lambda_3D`` of [1]_). Larger removes more noise
        and more detail. Default 2.7, as in [1]_.
    block_step : int
        Spacing of the reference blocks in pixels (``N_step``); the last row and column are
        always included. Cost grows as ``1 / block_step**2``. Default 3, as in [1]_.
    bm_range : int
        Radius of the full search in each reference frame, in pixels (search window
        ``2 * bm_range + 1``, ``N_S = 39`` in [1]_). Cost grows with its square. Default 19.
    ps_num : int
        Predictive search ([2]_): number of best matches in one frame whose neighbourhoods
        are searched in the next frame outward. Default 2.
    ps_range : int
        Predictive search radius in pixels around each of those matches. Default 4.
    mismatch_scale : float
        Multiplies the block-distance threshold; larger accepts less similar blocks.
        Default 1.0.
    joint : bool
        For ``C x H x W`` frames: group all channels with the matches of channel 0, as in
        CBM3D [3]_ (pass a luma-chroma image such as YUV or OPP, sigma per channel). False
        filters each channel on its own.
    group_size : int, optional
        Most blocks per group, a power of two (``N_2``). Default: 16 as in [1]_, 8 for a
        window of several frames at low noise (``maths.group_sizes``).
    window_refs : bool
        True: reference blocks are taken in every frame of the window, and the groups of all
        of them that land in ``center`` are aggregated, as V-BM3D [2]_ does. False: only the
        centre frame holds reference blocks, which costs ``len(frames)`` times less but was
        0.2-0.4 dB worse at radius 1-2 in our tests. Same result for one frame.

    Returns
    -------
    ndarray
        The basic estimate of ``frames[center]``, float64, same shape.

    Raises
    ------
    ValueError
        If the frames differ in shape or are smaller than 8x8, or an option is out of range.

    Notes
    -----
    Each reference frame is searched exhaustively within ``bm_range``; the other frames are
    searched by predictive search outward from it, over the whole window. Block distance is
    ``||a - b||^2 / 64`` on the noisy channel 0; the group is the reference block plus the
    nearest blocks under the threshold (ties: window frame, then raster position), at most
    ``group_size`` and rounded down to a power of two. [1]_ keeps the threshold at 2500 up to
    sigma 40 and then matches on pre-filtered blocks with 5000; the noise-following threshold
    used here instead was 0.2-0.5 dB better against the Tampere ``bm3d`` at sigma 40-60 in
    our tests (see ``bm3d/maths.py``'s ``ht_match_threshold``).

    The 3-D transform is the Bior1.5 2-D transform of each block followed by Haar along the
    group; coefficients at most ``lambda_ht`` noise deviations are zeroed (the group DC is
    kept), and blocks are aggregated with weight ``1 / N_kept`` times an 8x8 Kaiser window
    (beta 2), per channel.

    A block holding a NaN or an infinity in any channel (of the frames, or of the pilot in
    the Wiener stage) takes no part: it is never matched, never seeds a search, and as a
    reference block it forms no group. A pixel that no group reaches keeps its input value,
    so non-finite samples come out unchanged and spread nowhere; with ``block_step=1`` these
    are exactly the pixels that every block over them holds a non-finite sample.

    Each reference block costs ``(2 bm_range + 1)^2 + (T - 1) ps_num (2 ps_range + 1)^2``
    block comparisons for ``T`` frames, and there are about ``H W / block_step^2`` reference
    blocks per reference frame: ``T`` frames with ``window_refs``, one without.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> clean = np.tile(np.linspace(0.0, 255.0, 32), (32, 1))
    >>> noisy = clean + rng.normal(0.0, 20.0, clean.shape)
    >>> basic = bm3d_basic([noisy], 0, 20.0)
    >>> bool(np.std(basic - clean) < np.std(noisy - clean) / 2)
    True
    """
    _check_center(center, len(frames))
    window = _as_window(frames, sigma)
    if group_size is None:
        group_size = group_sizes(len(frames), float(window.sigma[0]), block_step)[0]
    opts = _options(block_step, bm_range, ps_num, ps_range, group_size, mismatch_scale)
    refs = range(len(frames)) if window_refs else [center]

    def stage(w):
        return basic_stage(w, refs, [center], opts, lambda_ht)

    return _shaped(_per_channel_set(stage, window, joint=joint), frames)[0]


def basic_estimates(
    frames: Sequence[np.ndarray],
    sigma: float | Sequence[float],
    *,
    lambda_ht: float = 2.7,
    block_step: int = 3,
    bm_range: int = 19,
    ps_num: int = 2,
    ps_range: int = 4,
    mismatch_scale: float = 1.0,
    joint: bool = False,
    group_size: int | None = None,
    window_refs: bool = True,
) -> list[np.ndarray]:
    """Basic estimates of every frame of the window, the pilots of :func:`bm3d_final`.

    Each equals ``bm3d_basic(frames, i, sigma, ...)``: every frame is matched over the whole
    window. With ``window_refs`` the groups do not depend on the output frame, so one pass
    aggregates all frames at the cost of one :func:`bm3d_basic` call.

    Parameters
    ----------
    frames, sigma, lambda_ht, block_step, bm_range, ps_num, ps_range, mismatch_scale, joint, \
group_size, window_refs
        As for :func:`bm3d_basic`.

    Returns
    -------
    list of ndarray
        One basic estimate per frame, each shaped like the frames.
    """
    window = _as_window(frames, sigma)
    if group_size is None:
        group_size = group_sizes(len(frames), float(window.sigma[0]), block_step)[0]
    opts = _options(block_step, bm_range, ps_num, ps_range, group_size, mismatch_scale)
    count = len(frames)
    if window_refs:
        passes = [(range(count), list(range(count)))]
    else:
        passes = [([i], [i]) for i in range(count)]
    out = []
    for refs, outs in passes:

        def stage(w, refs=refs, outs=outs):
            return basic_stage(w, refs, outs, opts, lambda_ht)

        out.extend(_shaped(_per_channel_set(stage, window, joint=joint), frames))
    return out


def bm3d_final(
    frames: Sequence[np.ndarray],
    basic_frames: Sequence[np.ndarray],
    center: int,
    sigma: float | Sequence[float],
    *,
    block_step: int = 3,
    bm_range: int = 19,
    ps_num: int = 2,
    ps_range: int = 4,
    mismatch_scale: float = 1.0,
    joint: bool = False,
    group_size: int | None = None,
    window_refs: bool = True,
) -> np.ndarray:
    """Final estimate of one frame: the Wiener stage of BM3D / V-BM3D [1]_ [2]_.

    Parameters
    ----------
    frames : sequence of ndarray
        The noisy window, as for :func:`bm3d_basic`.
    basic_frames : sequence of ndarray
        Basic estimates of every frame of ``frames`` (see :func:`basic_estimates`).
    center, sigma, block_step, bm_range, ps_num, ps_range, mismatch_scale, joint, window_refs
        As for :func:`bm3d_basic`. The distance threshold is 400 at every sigma, as in [1]_'s
        normal profile: the basic estimates it compares carry little noise.
    group_size : int, optional
        Most blocks per group, a power of two. Default: 32 as in [1]_, 16 for a window of
        several frames at low noise (``maths.group_sizes``).

    Returns
    -------
    ndarray
        The final estimate of ``frames[center]``, float64, same shape.

    Raises
    ------
    ValueError
        As for :func:`bm3d_basic`, or if ``basic_frames`` does not match ``frames``.

    Notes
    -----
    Groups are matched on the basic estimates. Each group of noisy blocks and its pilot group
    of basic blocks get the 3-D transform DCT (2-D) then Haar; the noisy spectrum is multiplied
    by ``W = P^2 / (P^2 + sigma^2)``, except the group DC, kept as in the basic stage, and
    blocks are aggregated with weight ``1 / ||W||^2`` times the Kaiser window, per channel.
    """
    _check_center(center, len(frames))
    window = _as_window(frames, sigma)
    pilot = _as_window(basic_frames, sigma)
    if pilot.video.shape != window.video.shape:
        raise ValueError(
            "avdenoise.BM3D: basic_frames must match frames, "
            f"got {pilot.video.shape} for {window.video.shape}"
        )
    if group_size is None:
        group_size = group_sizes(len(frames), float(window.sigma[0]), block_step)[1]
    opts = _options(block_step, bm_range, ps_num, ps_range, group_size, mismatch_scale)
    refs = range(len(frames)) if window_refs else [center]

    def stage(w, p):
        return final_stage(w, p, refs, [center], opts)

    return _shaped(_per_channel_set(stage, window, pilot, joint=joint), frames)[0]


def bm3d(
    frames: Sequence[np.ndarray],
    center: int,
    sigma: float | Sequence[float],
    *,
    stages: int = 2,
    lambda_ht: float = 2.7,
    block_step: int = 3,
    bm_range: int = 19,
    ps_num: int = 2,
    ps_range: int = 4,
    mismatch_scale: float = 1.0,
    joint: bool = False,
    window_refs: bool = True,
) -> np.ndarray:
    """Denoise one frame with BM3D [1]_, CBM3D [3]_ (``joint``) or V-BM3D [2]_ (a window).

    Parameters
    ----------
    frames, center, sigma, lambda_ht, block_step, bm_range, ps_num, ps_range, \
mismatch_scale, joint, window_refs
        As for :func:`bm3d_basic`; both stages use the same grouping options, with groups of
        at most 16 (hard thresholding) and 32 (Wiener) blocks, 8 and 16 for a window of
        several frames at low noise (``maths.group_sizes``).
    stages : {1, 2}
        1 returns the basic estimate; 2 (default) adds the Wiener stage.

    Returns
    -------
    ndarray
        The estimate of ``frames[center]``, float64, same shape.

    Raises
    ------
    ValueError
        As for :func:`bm3d_basic`, or if ``stages`` is not 1 or 2.

    Notes
    -----
    The Wiener stage needs basic estimates of every window frame; they come from
    :func:`basic_estimates`, which with ``window_refs`` costs one basic pass, so the two
    stages cost about twice one stage.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> clean = np.tile(np.linspace(0.0, 255.0, 32), (32, 1))
    >>> noisy = clean + rng.normal(0.0, 20.0, clean.shape)
    >>> out = bm3d([noisy], 0, 20.0)
    >>> out.shape, bool(np.std(out - clean) < np.std(noisy - clean) / 2)
    ((32, 32), True)
    """
    if stages not in (1, 2):
        raise ValueError(f"avdenoise.BM3D: stages must be 1 or 2, got {stages}")
    common = dict(
        block_step=block_step, bm_range=bm_range, ps_num=ps_num, ps_range=ps_range,
        mismatch_scale=mismatch_scale, joint=joint, window_refs=window_refs,
    )  # fmt: skip
    if stages == 1:
        return bm3d_basic(frames, center, sigma, lambda_ht=lambda_ht, **common)
    _check_center(center, len(frames))
    basic = basic_estimates(frames, sigma, lambda_ht=lambda_ht, **common)
    return bm3d_final(frames, basic, center, sigma, **common)
