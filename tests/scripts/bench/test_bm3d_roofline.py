"""scripts/bench/bm3d_roofline.py and its model: counts against the NumPy reference's own
enumeration of the grid, growth with frame size and radius, and the offline table."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace

import _gpu_timing
import _roofline_model as model
import bm3d_roofline
import numpy as np
import pytest
from bench_bm3d import SETTINGS

from avdenoise_vs._bm3d.maths import ht_match_threshold
from avdenoise_vs._bm3d.reference.matching import (
    _window,
    block_features,
    match_groups,
    reference_grid,
)

CUDA = Path(model.__file__).resolve().parents[2] / "avdenoise_vs" / "_bm3d" / "cuda"
STEP = dict(SETTINGS)["block_step"]


def case(width, height, radius=0, chroma=False, step=STEP) -> model.Case:
    settings = tuple({**SETTINGS, "block_step": step}.items())
    return model.Case(width, height, chroma, radius, settings=settings)


@pytest.mark.parametrize("name", sorted(model.ANCHORS))
def test_each_counted_line_is_in_the_device_code(name) -> None:
    part, text = model.ANCHORS[name]
    assert text in (CUDA / part).read_text(), f"{part} no longer has {text!r}: recount {name}"


def test_the_cases_are_bench_bm3ds() -> None:
    for c in bm3d_roofline.CASES.values():
        assert dict(c.settings) == SETTINGS
    assert {(c.radius, c.chroma) for c in bm3d_roofline.CASES.values()} == {
        (0, False), (0, True), (1, True), (2, True)
    }  # fmt: skip


@pytest.mark.parametrize(("width", "height", "step"), [(37, 29, 8), (64, 48, 8), (70, 45, 3)])
def test_reference_blocks_and_candidates_match_the_reference_grid(width, height, step) -> None:
    geom = model.Geometry.of(case(width, height, step=step))
    ys, xs = reference_grid(height, width, step)
    assert geom.refs[0] * geom.refs[1] == len(ys)
    grid = (height - 7, width - 7)
    windows = _window(ys[:, None], xs[:, None], geom.spec.bm_range, grid)
    assert model.in_grid_candidates(geom) == int((windows >= 0).sum())
    assert model.distances(geom.spec) * len(ys) >= int((windows >= 0).sum())


@pytest.mark.parametrize(("width", "height", "step"), [(70, 45, 8), (101, 60, 3)])
def test_tile_reach_is_the_bounding_box_of_the_tiles_candidates(width, height, step) -> None:
    geom = model.Geometry.of(case(width, height, step=step))
    tile_x, tile_y = geom.spec.tiles[0]
    ys, xs = reference_grid(height, width, step)
    grid = (height - 7, width - 7)
    iy, ix = np.divmod(np.arange(len(ys)), geom.refs[0])  # raster order of the grid
    total, tiles = 0, set(zip(iy // tile_y, ix // tile_x, strict=True))
    for ty, tx in tiles:
        mine = (iy // tile_y == ty) & (ix // tile_x == tx)
        found = _window(ys[mine, None], xs[mine, None], geom.spec.bm_range, grid)
        by, bx = np.divmod(found[found >= 0], grid[1])
        total += (by.max() - by.min() + 8) * (bx.max() - bx.min() + 8)
    assert model.tile_reach(geom, False) == (len(tiles), total)


def test_aggregation_atomics_follow_the_references_groups() -> None:
    rng = np.random.default_rng(3)
    height, width, sigma = 48, 64, 40.0
    yy, xx = np.mgrid[0:height, 0:width]
    plane = 128 + 60 * np.sin(0.2 * xx) * np.cos(0.15 * yy) + rng.normal(0, sigma, (height, width))
    geom = model.Geometry.of(case(width, height))
    ys, xs = reference_grid(height, width, STEP)
    opts = dict(SETTINGS)
    groups = match_groups(
        block_features(plane[None]), 0, (ys, xs), (height - 7, width - 7),
        bm_range=opts["bm_range"], ps_num=opts["ps_num"], ps_range=opts["ps_range"],
        max_size=16, threshold=ht_match_threshold(3.0),
    )  # fmt: skip
    members = int(groups.size.sum())
    assert 1 < members / len(ys) < 16  # the noise leaves some groups short
    cost = model.stage_cost(geom, False, members / len(ys), 1.0)
    assert geom.launches["bm3d_hard"].sums
    assert cost.atom_shared == pytest.approx(4 * 64 * members)  # every member in tile sums
    _, reach = model.tile_reach(geom, False)
    assert cost.atom_global == pytest.approx(2 * reach)  # the flushes alone


def test_counts_grow_with_frame_size_and_radius() -> None:
    """Radii 1 to 3: windows group alike (``maths.group_sizes``), and a wider one matches and
    aggregates more."""

    def hard(c):
        return model.frame_costs(c)["hard"]

    sizes = [hard(case(w, h, chroma=True)) for w, h in ((640, 360), (1280, 720), (1920, 1080))]
    radii = [hard(case(1280, 720, r, chroma=True)) for r in (1, 2, 3)]
    for series in (sizes, radii):
        for field in ("dram", "l1", "fp32", "int32", "ops"):
            values = [getattr(c, field) for c in series]
            assert values == sorted(values) and len(set(values)) == 3, field
    ceilings = model.Ceilings()
    bounds = [model.bound(c, ceilings)[0] for c in radii]
    assert bounds == sorted(bounds)
    luma, yuv = (model.frame_costs(case(640, 360, chroma=c)) for c in (False, True))
    assert yuv["hard"].fp32 > luma["hard"].fp32 and yuv["load"].dram == 3 * luma["load"].dram


def test_v_bm3d_frames_have_their_memset_and_two_stages_their_wiener_kernel() -> None:
    assert set(model.frame_costs(case(640, 360))) == {"load", "hard", "finish"}
    two = dataclasses.replace(case(640, 360, 1, chroma=True), stages=2)
    roles = model.frame_costs(two)
    assert set(roles) == {"load", "hard", "wiener", "finish", "memset"}
    assert roles["load"].launches == roles["memset"].launches == roles["finish"].launches == 2


def test_bounds_are_the_largest_ceiling_time() -> None:
    cost = model.Cost(dram_read=4.8e9, fp32=0.0)
    seconds, limiter = model.bound(cost, model.Ceilings())
    assert limiter == "dram" and seconds == pytest.approx(1e-3)
    assert model.intensity(model.Cost(fp32=10, dram_read=5)) == 2


def test_the_offline_table_runs(capsys) -> None:
    bm3d_roofline.main(["--cases", "r0 luma 1080p,r1 yuv444 4K"])
    out = capsys.readouterr().out
    assert out.startswith("ceilings: HBM 4.8 TB/s")
    for text in ("r0 luma 1080p    hard", "r1 yuv444 4K     memset", "fps at the bound"):
        assert text in out
    bm3d_roofline.main(["--cases", "r0 yuv444 1080p", "--markdown", "--stages", "2"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| r0")]
    assert [row.split(" | ")[1] for row in rows] == ["load", "hard", "wiener", "finish", "frame"]


def test_ncu_csv_rows_map_to_the_launch_order() -> None:
    metrics = bm3d_roofline.NCU_METRICS
    head = '"ID","Kernel Name",' + ",".join(f'"{m}"' for m in metrics)
    units = '"","",' + ",".join('""' for _ in metrics)
    rows = [f'"{i}","k",' + ",".join(f'"{i},000"' for _ in metrics) for i in range(3)]
    text = "\n".join(["==PROF== Disconnected", head, units, *rows])
    found = bm3d_roofline.parse_ncu(text, {"a": ["load"], "b": ["hard", "finish"]})
    assert [role for role, _ in found["b"]] == ["hard", "finish"]
    assert found["b"][1][1]["gpu__time_duration.sum"] == 2000.0


def test_the_measured_tables_format_given_times() -> None:
    name = "r1 yuv444 1080p"
    args = bm3d_roofline.parse_args(["--cases", name])
    rows = {name: bm3d_roofline.case_model(bm3d_roofline.CASES[name], args)}
    roles = ("memset", "load", "hard", "finish")
    seconds = {name: {r: 2 * rows[name][r]["bound"] for r in roles}}
    lines = bm3d_roofline.measured_lines(seconds, rows)
    assert len(lines) == 6 and all(" 50%" in line for line in lines[1:5])
    table = bm3d_roofline.markdown(rows, seconds)
    assert f"| {name} | hard |" in table and "| 50% |" in table
    metrics = dict.fromkeys(bm3d_roofline.NCU_METRICS, 1e6)
    ncu = {name: [("load", metrics), ("hard", metrics), ("finish", metrics)]}
    assert len(bm3d_roofline.ncu_lines(ncu, rows, args.ceilings)) == 4


class _Event:
    def __init__(self) -> None:
        self.ptr = len(_Event.made)
        _Event.made.append(self)

    def synchronize(self) -> None:
        pass

    made: list = []


def test_timed_frames_skip_the_warm_ones_and_restore_the_pass(monkeypatch) -> None:
    cuda = SimpleNamespace(Event=_Event, runtime=SimpleNamespace(eventRecord=lambda e, s: None),
                           get_elapsed_time=lambda a, b: 1.0)  # fmt: skip
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=cuda))
    options, fmt = bm3d_roofline.CASES["r1 yuv444 1080p"].pass_settings()
    launched = []

    class Calls:
        def memset(self, address, nbytes, stream):
            launched.append("memset")

    class Pass:
        calls = Calls()

        def run(self, name, args, stream):
            launched.append(name)

    class Backend:
        _passes = [Pass()]

        def process(self, n, numbers, windows, dst):
            self._passes[0].calls.memset(0, 1, 0)
            for name in ("bm3d_load", "bm3d_hard", "bm3d_finish"):
                self._passes[0].run(name, None, 0)

    pool = SimpleNamespace(window=lambda n, radius, count: ((n,), ()))
    monkeypatch.setattr(_gpu_timing, "new_dst", lambda fmt, planes, poison: (None, ()))
    backend = Backend()
    seconds, order = bm3d_roofline._timed(backend, pool, fmt, (options,), 3, 2, False)
    assert seconds == {"memset": 1e-3, "load": 1e-3, "hard": 1e-3, "finish": 1e-3}
    assert order == ["load", "hard", "finish"] * 2
    assert len(launched) == 4 * 5  # warm frames run too, untimed
    assert "run" not in vars(backend._passes[0]) and "process" not in vars(backend)
