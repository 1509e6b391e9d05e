"""The spatial schedule of the CUDA BM3D pass, and what every finish reads, without a GPU.

``Bm3dPass`` hands each frame to its schedule (``avdenoise_vs/_bm3d/cuda/schedule.py`` for
radius 0); here the fakes of ``_bm3d_fakes.py`` record the launches instead of running them.
"""

from __future__ import annotations

import pytest

from avdenoise_vs._params.options import SampleType

from . import _bm3d_fakes as fakes
from ._bm3d_fakes import LENGTH, render

__all__: list[str] = []


@pytest.fixture
def schedule(monkeypatch):
    """A factory of BM3D passes on fakes, and the recorder they report to."""
    return fakes.install(monkeypatch)


@pytest.mark.parametrize("stages", [1, 2])
def test_spatial_frames_reuse_their_records(schedule, stages):
    """Radius 0: the launches of a frame in order, each record built once per workspace and
    only the frame's slot and output buffer rewritten per frame."""
    make, recorder = schedule
    npass = make(radius=0, stages=stages)
    for n in (3, 8):
        render(npass, [n], out=9000 + n)
    names = [name for name, _ in recorder.records]
    one = ["bm3d_load", "bm3d_hard", "bm3d_finish"]
    if stages == 2:
        one = ["bm3d_load", "bm3d_hard", "bm3d_finish", "bm3d_wiener", "bm3d_finish"]
    assert names == one * 2
    frames = [recorder.records[: len(one)], recorder.records[len(one) :]]
    for n, records in zip((3, 8), frames, strict=True):
        load, out = records[0][1], records[-1][1]
        assert load["src"][0, 0, 0] == 1000 + n
        assert out["out"][0] == 9000 + n and out["to_pilot"][0] == 0
        stage = records[1][1]
        assert stage["threshold"][0] == npass.records.thresholds["bm3d_hard"]
    assert npass._pool.created == 1  # one workspace served both frames
    assert npass.produced() == {}


@pytest.mark.parametrize("radius", [0, 1])
@pytest.mark.parametrize("stages", [1, 2])
def test_float_finishes_read_the_finished_frame(schedule, radius, stages):
    """Float clips: each finish is told the slot of the frame it finishes (src[0][0]), whose
    values the pixels that no group reached keep (bm3d_finish); integer clips' never are."""
    make, recorder = schedule
    windows = fakes.windows(radius)
    for sample_type in (SampleType.INTEGER, SampleType.FLOAT):
        recorder.records.clear()
        recorder.finished.clear()
        npass = make(radius=radius, stages=stages, sample_type=sample_type)
        render(npass, range(LENGTH))
        finishes = [r for name, r in recorder.records if name == "bm3d_finish"]
        assert len(finishes) == LENGTH * stages
        slots = [int(r["src"][0, 0, 0]) for r in finishes]
        if sample_type is SampleType.INTEGER:
            assert set(slots) == {0}
            continue
        outputs = [s - 1000 for s, r in zip(slots, finishes, strict=True) if not r["to_pilot"][0]]
        assert outputs == list(range(LENGTH))
        if radius:  # each accumulator finished holds the groups of W(k), k the frame read
            assert len(recorder.finished) == len(finishes)
            for slot, (_, sums) in zip(slots, recorder.finished, strict=True):
                assert {m for _, m in sums} == windows[slot - 1000]


@pytest.mark.parametrize("radius", [0, 1])
def test_memory_counts_workspaces_and_cached_sums(schedule, radius):
    """``memory_bytes``: the workspaces created, plus V-BM3D's cached entries."""
    make, _ = schedule
    npass = make(radius=radius, stages=2)
    assert npass.memory_bytes() == 0
    render(npass, [5])
    cached = npass._schedule.memory_bytes()
    assert npass.memory_bytes() == npass.workspace_bytes + cached
    assert (cached > 0) == (radius > 0)


@pytest.mark.parametrize(("stages", "ref", "pilots"), [(1, False, 0), (2, False, 1), (2, True, 1)])
def test_spatial_workspaces_hold_pilot_planes_only_for_a_wiener_stage(
    schedule, stages, ref, pilots
):
    """A one-stage spatial pass never reads a pilot: its workspace is the noisy planes and the
    accumulator alone; a basic estimate, or the ref clip, needs pilot planes beside them."""
    make, _ = schedule
    npass = make(radius=0, stages=stages, ref=ref)
    sizes = npass._pool.sizes
    assert npass.workspace_bytes == (1 + pilots) * sizes.frame_bytes + sizes.acc_bytes
    render(npass, [4])
    workspace = npass._pool._free.get_nowait()
    assert (workspace.pilot != 0) == bool(pilots)
