"""The BM3D stage kernels' launches: tiles, grids, shared memory and tile sums.

``avdenoise_vs/_bm3d/cuda/launch.py`` picks them from the pass's spec; the kernels
(bm3d_stage.cuh, bm3d_tile.cuh) trust the grid to cover every reference block and the shared
memory to hold the tile's sums. No GPU needed.
"""

from __future__ import annotations

import math

import pytest

from avdenoise_vs._bm3d.cuda.args import Bm3dRecords, reference_count
from avdenoise_vs._bm3d.cuda.launch import fit_occupancy, fit_tiles, stage_launches
from avdenoise_vs._bm3d.cuda.source import BM3D_TILES, Bm3dSpec
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType
from avdenoise_vs._params.settings import Bm3dSettings, Stages

__all__: list[str] = []

HOPPER_SHARED = 227 * 1024  # opt-in shared memory per thread block of an H100 / H200


def _spec(bm_range=9, window=1, channels=1, joint=False, tiles=None) -> Bm3dSpec:
    return Bm3dSpec(window, channels, joint, False, "float32", bm_range, 2, 4,
                    tiles=tiles or BM3D_TILES)  # fmt: skip


def _refs(width=1920, height=1080, step=8) -> tuple[int, int]:
    return reference_count(width, step), reference_count(height, step)


def test_shared_sums_are_the_default_with_taller_hard_thresholding_tiles():
    assert BM3D_TILES == ((4, 2), (4, 1))
    launches = stage_launches(_spec(), _refs(), 8, HOPPER_SHARED)
    hard, wiener = launches["bm3d_hard"], launches["bm3d_wiener"]
    assert hard.sums and hard.block == (256, 1, 1)
    assert hard.grid == (math.ceil(240 / 4) * math.ceil(135 / 2), 1, 1)
    assert hard.shared == _spec().shared_bytes(False, 8) > _spec().shared_bytes(False)
    # A Wiener warp holds two groups of 32 blocks (18 KiB): sums would leave an SM two thread
    # blocks of 4 x 1 warps instead of three.
    assert wiener.block == (128, 1, 1) and wiener.grid == (60 * 135, 1, 1)
    assert not wiener.sums and wiener.shared == _spec().shared_bytes(True)


def test_the_reach_holds_every_block_a_tile_can_group():
    """Reference blocks `step` apart, each searching bm_range around it, with blocks of 8."""
    spec = _spec(bm_range=9)
    assert spec.tile_reach(False, 8) == (8 + 18 + 8) * (3 * 8 + 18 + 8)
    assert spec.tile_reach(True, 3) == (18 + 8) * (3 * 3 + 18 + 8)


def test_sums_need_half_the_atomics_or_fewer():
    """Step 1 and a wide search: a reach larger than half what the groups add directly."""
    spec = _spec(bm_range=32)
    reach = spec.tile_reach(False, 1)
    assert 2 * reach > 8 * 16 * 64
    assert not stage_launches(spec, _refs(step=1), 1, HOPPER_SHARED)["bm3d_hard"].sums


def test_sums_never_cost_an_sm_a_thread_block():
    """Denoise's default search: 8 warps of 12 KiB of candidates, 2 thread blocks an SM;
    with 43 KiB of sums only one would fit."""
    spec = _spec(bm_range=19)
    launches = stage_launches(spec, _refs(step=3), 3, HOPPER_SHARED)
    assert not launches["bm3d_hard"].sums
    assert launches["bm3d_hard"].shared == spec.shared_bytes(False) <= HOPPER_SHARED // 2
    small = stage_launches(_spec(), _refs(), 8, 48 * 1024)  # a device with 48 KiB a block
    assert not small["bm3d_hard"].sums and small["bm3d_hard"].shared <= 48 * 1024


def test_tiles_narrow_when_the_device_lacks_the_shared_memory():
    spec = _spec(bm_range=32)  # 8 x 34 KiB of candidates for a 4 x 2 tile
    assert spec.shared_bytes(False) > HOPPER_SHARED
    fitted = fit_tiles(spec, HOPPER_SHARED)
    assert fitted.tiles == ((4, 1), (4, 1))
    assert fitted.shared_bytes(False) <= HOPPER_SHARED
    assert fit_tiles(_spec(), HOPPER_SHARED).tiles == BM3D_TILES


def test_joint_passes_launch_one_grid_separate_channels_one_a_channel():
    joint = stage_launches(_spec(channels=3, joint=True), _refs(), 8, HOPPER_SHARED)
    separate = stage_launches(_spec(channels=3), _refs(), 8, HOPPER_SHARED)
    assert joint["bm3d_hard"].grid[2] == 1 and separate["bm3d_hard"].grid[2] == 3


@pytest.mark.parametrize("sums", [False, True])
def test_each_stage_record_says_whether_it_has_tile_sums(sums):
    options = Bm3dSettings(
        planes=(0,), distance=Distance.LUMA, plane_strengths=(3.0,), radius=0,
        stages=Stages.from_parameter(2, has_ref=False), lambda_ht=2.7, mismatch_scale=1.0,
        block_step=8, bm_range=9, ps_num=2, ps_range=4,
    )  # fmt: skip
    layout = FrameLayout(width=64, height=48, color_family=ColorFamily("gray"), subsampling_w=0,
                         subsampling_h=0, bits=32, sample_type=SampleType.FLOAT)  # fmt: skip
    records = Bm3dRecords(options, layout, {0: 0}, {0: 256}, 64, {"bm3d_hard": sums})
    assert records.stage("bm3d_hard")["tile"] == int(sums)
    assert records.stage("bm3d_wiener")["tile"] == 0


def test_spatial_passes_get_registers_for_more_warps_where_three_blocks_fit():
    """Radius 0 at BM3DCUDA's settings: 66 KiB thread blocks with sums, three an SM, so 24
    warps of 80 registers; V-BM3D keeps 128, and so does a search so wide that two thread
    blocks fill the shared memory (Denoise's default, step 3 and range 19)."""
    spatial = fit_occupancy(_spec(), 8, HOPPER_SHARED)
    assert spatial.sm_warps == (24, 16)
    hard = stage_launches(spatial, _refs(), 8, HOPPER_SHARED)["bm3d_hard"]
    assert hard.sums and 3 * (hard.shared + 1024) <= HOPPER_SHARED + 1024
    assert fit_occupancy(_spec(window=3), 8, HOPPER_SHARED).sm_warps == (16, 16)
    assert fit_occupancy(_spec(bm_range=19), 3, HOPPER_SHARED).sm_warps == (16, 16)
