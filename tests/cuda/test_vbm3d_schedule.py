"""The V-BM3D schedule of the CUDA backend, checked without a GPU.

``VBm3dSchedule`` decides which groups to filter for each output frame and adds them into
accumulators that the output frames share (see ``avdenoise_vs/_bm3d/cuda/vbm3d_schedule.py``).
Here the fakes of ``_bm3d_fakes.py`` (launches recorded, not run) stand in for CuPy, and the
real scheduling code runs: every frame's groups must be filtered once per stage however the frames
are requested, every accumulator finished must hold the groups of exactly the frames of its
window, each stage must run only after what it reads, and several threads must never
deadlock on each other's claims.
"""

from __future__ import annotations

import itertools
import random
import threading

import pytest

from avdenoise_vs._bm3d.cuda.vbm3d_jobs import Job
from avdenoise_vs._cuda import frame_cache as _cache

from . import _bm3d_fakes as fakes
from ._bm3d_fakes import LENGTH, check_sums, produced, render, render_on_threads

__all__: list[str] = []


@pytest.fixture
def schedule(monkeypatch):
    """A factory of BM3D passes on fakes, and the recorder they report to."""
    return fakes.install(monkeypatch)


@pytest.mark.parametrize("stages", [1, 2])
def test_every_frame_s_groups_are_filtered_once_per_stage(schedule, stages):
    make, recorder = schedule
    npass = make(radius=1, stages=stages)
    render(npass, range(LENGTH))
    hard = produced(recorder.log, "sum")
    assert sorted(k for k in hard if k[0] == "hard") == [("hard", m) for m in range(LENGTH)]
    if stages == 2:
        assert sorted(k for k in hard if k[0] == "wiener") == [("wiener", m) for m in range(LENGTH)]
        assert sorted(produced(recorder.log, "basic")) == list(range(LENGTH))
    kernels = produced(recorder.log, "kernel")
    # One output finish per frame, plus one per basic estimate with two stages.
    assert kernels.count("bm3d_finish") == LENGTH * stages
    counts = {"hard": LENGTH} if stages == 1 else dict.fromkeys(("hard", "wiener", "basic"), LENGTH)
    counts["zeroed"] = LENGTH * stages  # one accumulator per frame and stage
    assert npass.produced() == counts
    check_sums(recorder, 1, LENGTH, "hard" if stages == 1 else "wiener")


def test_a_smaller_cache_refilters_and_still_renders(schedule, monkeypatch):
    """Fewer accumulators (``AVDENOISE_DEBUG=bm3d_cache=3``): frames requested out of
    order then have some groups filtered again, which `produced` reports, and still the right
    sums."""
    make, recorder = schedule
    npass = make(radius=1, stages=1, accumulators=3)
    order = [0, 9, 1, 10, 2, 11, 3]
    render(npass, order)
    assert npass.produced()["hard"] > len({m for n in order for m in (n - 1, n, n + 1)} - {-1})
    assert produced(recorder.log, "kernel").count("bm3d_finish") == len(order)
    check_sums(recorder, 1, LENGTH, "hard")


def test_each_stage_runs_after_what_it_reads(schedule):
    """wiener(m) after the basic estimates of W(m); basic(k) after hard(m) for m in W(k)."""
    make, recorder = schedule
    npass = make(radius=2, stages=2)
    render(npass, [7, 3, 12, 0, 13, 5])
    order = {}  # first production of each entry (an evicted one may be computed again)
    for i, (kind, key) in enumerate(recorder.log):
        if kind in ("sum", "basic"):
            order.setdefault(key, i)

    window = fakes.windows(2)
    for key, position in order.items():
        if isinstance(key, tuple) and key[0] == "wiener":
            assert all(order[f] < position for f in window[key[1]]), key
        elif isinstance(key, int):
            assert all(order["hard", m] < position for m in window[key]), key


def test_ref_pilot_runs_the_wiener_stage_alone(schedule):
    make, recorder = schedule
    npass = make(radius=1, stages=2, ref=True)
    render(npass, range(LENGTH))
    sums = produced(recorder.log, "sum")
    assert sorted(sums) == [("wiener", m) for m in range(LENGTH)]
    assert not produced(recorder.log, "basic")


def test_threads_in_any_order_share_entries_without_deadlock(schedule, monkeypatch):
    make, recorder = schedule
    npass = make(radius=1, stages=2, accumulators=16)  # every accumulator kept: none twice
    length = 8
    frames = list(range(length)) * 3
    random.Random(4).shuffle(frames)
    render_on_threads(npass, frames, 6, length)
    sums = produced(recorder.log, "sum")
    assert sorted(sums) == sorted(
        [("hard", m) for m in range(length)] + [("wiener", m) for m in range(length)]
    )
    assert sorted(produced(recorder.log, "basic")) == list(range(length))
    check_sums(recorder, 1, length, "wiener")


def test_a_failed_frame_leaves_no_entry_for_others_to_wait_on(schedule):
    """A frame that fails while producing its entries fails the ones it never made, so the
    next frame that needs them makes them instead of waiting WAIT_LIMIT_S."""
    make, recorder = schedule
    npass = make(radius=1, stages=1)
    original = npass._schedule._filter_groups
    calls = []

    def fail_first(lease, window, job, accs, stream):
        calls.append(job.key)
        if len(calls) == 1:
            raise RuntimeError("fake kernel failure")
        original(lease, window, job, accs, stream)

    npass._schedule._filter_groups = fail_first
    with pytest.raises(RuntimeError, match="fake kernel failure"):
        render(npass, [4])
    render(npass, [4])  # would wait on the abandoned entries without abandon()
    assert sorted(calls[1:]) == [("hard", 3), ("hard", 4), ("hard", 5)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("radius", "stages"), [(1, 1), (1, 2), (2, 2)])
def test_threads_with_the_default_cache_render_right_sums(schedule, seed, radius, stages):
    """Frames in random order on many threads, accumulators evicted as the default limits
    say: some groups are filtered again, never into a sum twice, and no thread hangs."""
    make, recorder = schedule
    npass = make(radius=radius, stages=stages)
    frames = list(range(LENGTH)) * 2
    random.Random(seed).shuffle(frames)
    render_on_threads(npass, frames, 8)
    finishes = produced(recorder.log, "kernel").count("bm3d_finish")
    assert finishes == len(frames) + npass.produced().get("basic", 0)
    check_sums(recorder, radius, LENGTH, "hard" if stages == 1 else "wiener")


def test_jobs_give_their_events_back():
    """A job is freed, its event pooled, once no accumulator refers to it: no reference cycle
    (one would leave the event to the garbage collector, see _vbm3d_jobs.Job)."""
    import gc

    events: list = []
    made = itertools.count(1)
    job = Job(("hard", 3), events, lambda: next(made))
    assert job.event_ptr == 1 and events == []
    gc.disable()
    try:
        del job
        assert events == [1]
        again = Job(("hard", 4), events, lambda: next(made))
        assert again.event_ptr == 1 and events == []
    finally:
        gc.enable()


def test_a_long_render_reuses_a_few_events(schedule):
    """Jobs of frames long finished are freed as their accumulators are dropped: the events
    made stay bounded however long the clip (gc off: freed by reference counts alone)."""
    import gc

    make, recorder = schedule
    npass = make(radius=1, stages=2)
    gc.disable()
    try:
        render(npass, range(200), length=200)
    finally:
        gc.enable()
    assert npass.produced()["wiener"] == 200
    assert recorder.events < 40


def test_failures_on_threads_never_hang_and_later_frames_render(schedule, monkeypatch):
    """Two stages on eight threads with every seventh job failing: frames fail (here or in
    a thread that waited on the failed job) but none hangs, and once the failures stop every
    frame renders with the right sums."""
    monkeypatch.setattr(_cache, "WAIT_LIMIT_S", 2.0)
    make, recorder = schedule
    npass = make(radius=1, stages=2)
    original = npass._schedule._filter_groups
    count = itertools.count(1)
    failing = [True]

    def flaky(lease, window, job, accs, stream):
        if failing[0] and next(count) % 7 == 0:
            raise RuntimeError("fake kernel failure")
        original(lease, window, job, accs, stream)

    npass._schedule._filter_groups = flaky
    errors = []

    def render_catching(frames, stream_ptr):
        for n in frames:
            try:
                render(npass, [n], stream_ptr)
            except RuntimeError as error:
                errors.append(str(error))

    frames = list(range(LENGTH)) * 2
    random.Random(7).shuffle(frames)
    threads = [
        threading.Thread(target=render_catching, args=(frames[i::8], 100 + i)) for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "threads hung"
    assert errors and all("fake kernel failure" in e or "failed in another" in e for e in errors)
    failing[0] = False
    recorder.finished.clear()
    render(npass, range(LENGTH))
    assert len(recorder.finished) >= LENGTH
    check_sums(recorder, 1, LENGTH, "wiener")
