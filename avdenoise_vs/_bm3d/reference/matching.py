"""Block matching for the NumPy BM3D / V-BM3D reference.

Blocks are addressed by the position of their top-left pixel. In a plane of ``H x W`` pixels the
valid positions form a ``(H - 7) x (W - 7)`` grid, and a block's *index* is its raster index in
that grid, ``y * (W - 7) + x``. Candidates are always whole blocks inside the frame: search windows
are intersected with the valid grid, never padded or shifted.

The papers it follows are cited in :mod:`avdenoise_vs._bm3d.reference.bm3d`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from avdenoise_vs._bm3d.transforms import BLOCK_SIZE

__all__ = ["Groups", "block_features", "finite_blocks", "match_groups", "reference_grid"]

# Gather at most this many float64 values at once when computing distances (2 MiB): the
# gathered candidates, their differences and squares then stay in the CPU's cache, which made
# matching three times faster than chunks of 32 MiB. The distances do not depend on it.
# Match this many references at a time, so memory stays bounded whatever the image size; at
# 512 their candidate arrays (6 MiB each at bm_range=19) ran faster than at 2048. Groups do
# not depend on it.
_CHUNK_VALUES = 1 << 18
_REFS_PER_CHUNK = 512


@dataclass(frozen=True)
class Groups:
    """Block groups: row ``g`` lists the members of the group of reference block ``g``.

    Attributes
    ----------
    frame, y, x : ndarray of int, shape (n_refs, max_size)
        Window frame index and top-left position of each member, best match first; member 0
        is always the reference block itself. Entries past ``size[g]`` are not members: they
        hold the next candidates, or meaningless positions where there were none.
    size : ndarray of int, shape (n_refs,)
        Number of members, a power of two between 1 and ``max_size``.
    """

    frame: np.ndarray
    y: np.ndarray
    x: np.ndarray
    size: np.ndarray


def reference_grid(height: int, width: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the raster-ordered ``(y, x)`` positions of the reference blocks.

    The grid starts at 0 with the given step along each axis; the last valid position is added
    when the step skips it so that the bottom rows and right columns are covered too.
    """
    axes = []
    for length in (height - BLOCK_SIZE + 1, width - BLOCK_SIZE + 1):
        pos = np.arange(0, length, step)
        if pos[-1] != length - 1:
            pos = np.append(pos, length - 1)
        axes.append(pos)
    ys, xs = np.meshgrid(*axes, indexing="ij")
    return ys.ravel(), xs.ravel()


def block_features(planes: np.ndarray) -> np.ndarray:
    """Return the vectors compared by block matching: every block's pixels, (T, n_blocks, 64).

    Row ``i`` of frame ``t`` is the raster-ordered 8x8 block whose index is ``i``.
    """
    blocks = sliding_window_view(planes, (BLOCK_SIZE, BLOCK_SIZE), axis=(1, 2))
    return np.ascontiguousarray(blocks).reshape(planes.shape[0], -1, BLOCK_SIZE * BLOCK_SIZE)


def finite_blocks(video: np.ndarray) -> np.ndarray:
    """Whether each block of each frame of ``video`` (T, C, H, W) is finite in every channel.

    Returns a (T, n_blocks) bool array indexed like :func:`block_features`. A block holding a
    NaN or an infinity takes no part in grouping or filtering (see ``bm3d.bm3d_basic``).
    """
    bad = (~np.isfinite(video)).any(axis=1).astype(np.int32)
    windows = sliding_window_view(bad, (BLOCK_SIZE, BLOCK_SIZE), axis=(1, 2))
    return (windows.sum(axis=(3, 4)) == 0).reshape(video.shape[0], -1)


def _distances(
    feats: np.ndarray, ref_feats: np.ndarray, cand: np.ndarray, usable: np.ndarray
) -> np.ndarray:
    """Normalised squared L2 distance ``||a - b||^2 / 64`` of candidates to their reference.

    ``cand`` has shape ``(n, k)`` with indices into ``feats``; negative entries are invalid and
    get ``inf``, as do blocks that are not ``usable`` (one flag per block of ``feats``). The
    difference is formed explicitly (not via ``|a|^2 + |b|^2 - 2ab``) so that identical blocks
    are at distance exactly zero and ties are exact.
    """
    out = np.full(cand.shape, np.inf)
    rows = max(1, _CHUNK_VALUES // (cand.shape[1] * feats.shape[1]))
    for s in range(0, cand.shape[0], rows):
        c = cand[s : s + rows]
        index = np.maximum(c, 0)
        diff = feats[index] - ref_feats[s : s + rows, None, :]
        d = np.einsum("nkd,nkd->nk", diff, diff) / feats.shape[1]
        out[s : s + rows] = np.where((c >= 0) & usable[index], d, np.inf)
    return out


def _window(cy, cx, radius: int, grid: tuple[int, int]) -> np.ndarray:
    """Block indices in ``[c - radius, c + radius]^2`` around each centre, ``-1`` if outside.

    ``cy``, ``cx`` have shape ``(n, m)``; the result has shape ``(n, m * (2 r + 1)^2)`` and,
    for each centre, lists positions in raster order.
    """
    off = np.arange(-radius, radius + 1)
    dy, dx = (a.ravel() for a in np.meshgrid(off, off, indexing="ij"))
    y = cy[:, :, None] + dy
    x = cx[:, :, None] + dx
    inside = (y >= 0) & (y < grid[0]) & (x >= 0) & (x < grid[1])
    return np.where(inside, y * grid[1] + x, -1).reshape(cy.shape[0], -1)


def _unique_sorted(cand: np.ndarray) -> np.ndarray:
    """Sort each row ascending and mark repeated indices invalid (``-1``), invalid ones last.

    Predictive-search windows around nearby matches overlap; each block must count once.
    """
    big = np.iinfo(cand.dtype).max
    s = np.sort(np.where(cand >= 0, cand, big), axis=1)
    repeat = np.zeros(s.shape, dtype=bool)
    repeat[:, 1:] = s[:, 1:] == s[:, :-1]
    return np.where(repeat | (s == big), -1, s)


def _best(cand: np.ndarray, dist: np.ndarray, count: int) -> np.ndarray:
    """Indices of the ``count`` nearest candidates per row (ties: lower block index first);
    ``-1`` where a row has fewer than ``count`` candidates of finite distance."""
    # Rows are sorted by block index already, so a stable sort by distance breaks ties by
    # position; invalid and unusable candidates have inf distance and sort last.
    order = np.argsort(dist, axis=1, kind="stable")[:, :count]
    best = np.take_along_axis(cand, order, axis=1)
    return np.where(np.isfinite(np.take_along_axis(dist, order, axis=1)), best, -1)


def _frame_order(t_count: int, ref_frame: int) -> list[int]:
    """Other frames in predictive-search order: outward from the reference frame, past first."""
    return list(range(ref_frame - 1, -1, -1)) + list(range(ref_frame + 1, t_count))


def match_groups(
    feats: np.ndarray,
    ref_frame: int,
    refs: tuple[np.ndarray, np.ndarray],
    grid: tuple[int, int],
    *,
    bm_range: int,
    ps_num: int,
    ps_range: int,
    max_size: int,
    threshold: float,
    usable: np.ndarray | None = None,
) -> Groups:
    """Build the group of every reference block of window frame ``ref_frame``.

    Parameters
    ----------
    feats : ndarray, shape (T, n_blocks, 64)
        Matching vectors of every block of every window frame, from :func:`block_features`.
    ref_frame : int
        Window index of the frame that holds the reference blocks.
    refs : tuple of ndarray
        Reference positions ``(y, x)``, from :func:`reference_grid`.
    grid : tuple of int
        Shape of the valid block grid, ``(H - 7, W - 7)``.
    bm_range, ps_num, ps_range, max_size, threshold
        Full-search radius in the reference frame; number of matches that seed the next frame's
        search, and that search's radius; largest group; distance limit (exclusive).
    usable : ndarray of bool, shape (T, n_blocks), optional
        Blocks that may be candidates (:func:`finite_blocks`); the others are never members
        and never seed a search. The reference blocks must be usable. Default: every block.

    Returns
    -------
    Groups
        Members in order of (distance, window frame, block index), reference first.

    Notes
    -----
    The reference frame is searched exhaustively within ``bm_range``. Each other frame, visited
    outward from the reference frame, is searched within ``ps_range`` of the ``ps_num`` best
    blocks of the frame before it (the predictive search of V-BM3D), whether or not they pass
    the threshold. All candidates of all frames then compete for the group.
    """
    ref_y, ref_x = refs
    if usable is None:
        usable = np.ones(feats.shape[:2], dtype=bool)
    search = dict(bm_range=bm_range, ps_num=ps_num, ps_range=ps_range, max_size=max_size)
    parts = []
    for s in range(0, len(ref_y), _REFS_PER_CHUNK):
        chunk = (ref_y[s : s + _REFS_PER_CHUNK], ref_x[s : s + _REFS_PER_CHUNK])
        parts.append(_match_chunk(feats, ref_frame, chunk, grid, threshold, usable, **search))
    if not parts:  # every reference block of the frame holds a non-finite sample
        empty = np.zeros((0, max_size), dtype=int)
        return Groups(frame=empty, y=empty, x=empty, size=np.zeros(0, dtype=int))
    return Groups(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(Groups)))


def _match_chunk(
    feats, ref_frame, refs, grid, threshold, usable, *, bm_range, ps_num, ps_range, max_size
):
    """:func:`match_groups` for a few references, so that candidate arrays stay small."""
    ref_y, ref_x = refs
    ref_idx = ref_y * grid[1] + ref_x
    ref_feats = feats[ref_frame][ref_idx]
    cand = {ref_frame: _window(ref_y[:, None], ref_x[:, None], bm_range, grid)}
    dist = {ref_frame: _distances(feats[ref_frame], ref_feats, cand[ref_frame], usable[ref_frame])}
    for t in _frame_order(feats.shape[0], ref_frame):
        prev = t + 1 if t < ref_frame else t - 1
        seeds = _best(cand[prev], dist[prev], ps_num)
        # Missing seeds (fewer usable candidates than ps_num) become an off-grid centre, no hits.
        sy = np.where(seeds >= 0, seeds // grid[1], -2 * ps_range - 2)
        sx = np.where(seeds >= 0, seeds % grid[1], 0)
        cand[t] = _unique_sorted(_window(sy, sx, ps_range, grid))
        dist[t] = _distances(feats[t], ref_feats, cand[t], usable[t])
    return _select(cand, dist, ref_frame, ref_idx, grid, max_size, threshold)


def _select(cand, dist, ref_frame, ref_idx, grid, max_size, threshold) -> Groups:
    """Keep the best ``max_size`` candidates below ``threshold``, reference first."""
    frames = sorted(cand)
    all_dist = np.concatenate([dist[t] for t in frames], axis=1)
    all_frame = np.concatenate([np.full(cand[t].shape, t) for t in frames], axis=1)
    all_idx = np.concatenate([cand[t] for t in frames], axis=1)
    is_ref = (all_frame == ref_frame) & (all_idx == ref_idx[:, None])
    all_dist = np.where(all_dist < threshold, all_dist, np.inf)
    # The reference is always a member and always first, even among other zero distances.
    all_dist[is_ref] = -1.0
    order = np.argsort(all_dist, axis=1, kind="stable")[:, :max_size]
    valid = np.take_along_axis(np.isfinite(all_dist), order, axis=1).sum(axis=1)
    # Round down to a power of two, as the Haar transform along the group requires.
    size = 1 << (np.floor(np.log2(valid)).astype(int))
    idx = np.take_along_axis(all_idx, order, axis=1)
    frame = np.take_along_axis(all_frame, order, axis=1)
    return Groups(frame=frame, y=idx // grid[1], x=idx % grid[1], size=size)
