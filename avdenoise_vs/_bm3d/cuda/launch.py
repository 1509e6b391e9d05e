"""How the BM3D stage kernels are launched: tiles, grids, shared memory and tile sums.

A stage kernel's thread block filters a tile of neighbouring reference blocks, a warp each
(bm3d_stage.cuh). Its groups' blocks in the reference frame lie within the tile's reach, and
with *tile sums* the thread block adds them into a shared copy of the accumulator over the
reach, then adds that copy to the accumulator once (bm3d_tile.cuh). On the H200 (1080p,
BM3DCUDA's settings) that cut the hard-thresholding kernel's L2 reductions tenfold; the
backend with 16 host threads ran 963 fps against 840 with global sums, one kernel alone took
407 us against 386, and fleets of 16 workers ran alike (docs/BENCHMARKS.md, "BM3D kernels").
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from avdenoise_vs._bm3d.cuda.source import SM_WARPS, Bm3dSpec

__all__ = ["StageLaunch", "fit_occupancy", "fit_tiles", "stage_launches"]

#: Shared memory the CUDA runtime reserves per thread block (Ampere on), bytes; an SM holds
#: about one reservation more than a thread block may opt in to.
_RESERVED = 1024
#: The tile a stage falls back to when its preferred one does not fit the device.
_NARROW_TILE = (4, 1)
_STAGES = {"bm3d_hard": False, "bm3d_wiener": True}  # kernel: its `wiener` flag


class StageLaunch(NamedTuple):
    """The launch of one stage kernel: grid, block, dynamic shared bytes, tile sums or not."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    sums: bool


def fit_tiles(spec: Bm3dSpec, shared_limit: int) -> Bm3dSpec:
    """`spec` with each stage's tile narrowed to 4 x 1 reference blocks where its thread block
    would take more than `shared_limit` bytes of shared memory (a wide search range)."""
    tiles = tuple(
        tile if spec.shared_bytes(wiener) <= shared_limit else _NARROW_TILE
        for wiener, tile in enumerate(spec.tiles)
    )
    return dataclasses.replace(spec, tiles=tiles)


def fit_occupancy(spec: Bm3dSpec, step: int, shared_limit: int) -> Bm3dSpec:
    """`spec` with registers for more warps of the hard-thresholding kernel an SM where that
    pays: a spatial pass (one frame: its matching is short) whose thread blocks, tile sums
    included where they pay, fit more to an SM's shared memory than the fewer registers
    allow. V-BM3D keeps the registers (its kernel ran slower with fewer)."""
    if spec.window != 1:
        return spec
    wide = dataclasses.replace(spec, sm_warps=(SM_WARPS[1], spec.sm_warps[1]))
    sums = _sums_pay(wide, False, step, shared_limit)
    shared = wide.shared_bytes(False, step if sums else None)
    if _blocks_per_sm(wide, False, shared, shared_limit) * wide.warps(False) <= SM_WARPS[0]:
        return spec
    return wide


def _blocks_per_sm(spec: Bm3dSpec, wiener: bool, shared: int, shared_limit: int) -> int:
    """Thread blocks of a stage kernel one SM holds, by its registers and shared memory."""
    if shared > shared_limit:
        return 0
    by_registers = max(1, spec.sm_warps[wiener] // spec.warps(wiener))
    return min(by_registers, (shared_limit + _RESERVED) // (shared + _RESERVED))


def _sums_pay(spec: Bm3dSpec, wiener: bool, step: int, shared_limit: int) -> bool:
    """Whether tile sums take at most half the global atomics of the tile's groups without
    costing an SM a thread block: with 4 x 1 Wiener tiles at BM3DCUDA's settings they did
    (3 thread blocks an SM down to 2), and the kernel took 864 us a frame instead of 642."""
    direct = spec.warps(wiener) * spec.groups[wiener] * 64
    with_sums = _blocks_per_sm(spec, wiener, spec.shared_bytes(wiener, step), shared_limit)
    without = _blocks_per_sm(spec, wiener, spec.shared_bytes(wiener), shared_limit)
    return 2 * spec.tile_reach(wiener, step) <= direct and with_sums >= without


def stage_launches(
    spec: Bm3dSpec, refs: tuple[int, int], step: int, shared_limit: int
) -> dict[str, StageLaunch]:
    """The launch of each stage kernel for a reference grid of `refs` (x, y) blocks `step`
    apart; tile sums only where they pay."""
    separate = 1 if spec.joint else spec.channels  # blockIdx.z: the channel
    launches = {}
    for name, wiener in _STAGES.items():
        tile_x, tile_y = spec.tiles[wiener]
        sums = _sums_pay(spec, wiener, step, shared_limit)
        tiles = -(-refs[0] // tile_x) * -(-refs[1] // tile_y)
        shared = spec.shared_bytes(wiener, step if sums else None)
        block = (32 * tile_x * tile_y, 1, 1)
        launches[name] = StageLaunch((tiles, 1, separate), block, shared, sums)
    return launches
