"""The V-BM3D schedule of the CUDA backend, checked without a GPU.

``Bm3dPass`` decides which groups to filter for each output frame and adds them into
accumulators that the output frames share (see ``avdenoise_vs/_cuda/bm3d.py``). Here fake
slots and fake CUDA calls (launches recorded, not run) stand in for CuPy, and the real
scheduling code runs: every frame's groups must be filtered once per stage however the frames
are requested, every accumulator finished must hold the groups of exactly the frames of its
window, each stage must run only after what it reads, and several threads must never
deadlock on each other's claims.
"""

from __future__ import annotations

import itertools
import random
import threading
from types import SimpleNamespace

import pytest

from avdenoise_vs._cuda import _cache
from avdenoise_vs._cuda import bm3d as gpu_bm3d
from avdenoise_vs._cuda._bm3d_source import BM3D_KERNELS
from avdenoise_vs._options import ColorFamily, Distance, FrameLayout, SampleType
from avdenoise_vs._settings import Bm3dSettings, Stages

LENGTH = 14


class _FakeSlot:
    """A device slot with a made-up address."""

    addresses = itertools.count(1 << 32, 1 << 24)

    def __init__(self, nbytes: int) -> None:
        self.memory = self.event = None
        self.ptr = next(self.addresses)
        self.event_ptr = self.ptr + 1


class _Recorder:
    """Kernels and runtime calls, in the order threads issue them, and what each accumulator
    holds: the (stage, frame) of every job added since it was zeroed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log = []  # (what, key) in issue order
        self.records = []  # (kernel name, copy of its argument record)
        self.sums = {}  # accumulator address -> [(stage, m)]
        self.finished = []  # (to_pilot, [(stage, m)]) of every finish of an accumulator
        self._loaded = {}  # stream -> the frame m whose window it loaded last
        self.events = 0  # events made

    def add(self, what, key) -> None:
        with self.lock:
            self.log.append((what, key))

    def launch(self, name, grid, block, shared, stream, args) -> None:
        """Stands in for ``cuda_calls().launch``; the fake kernel handles are their names."""
        self.add("kernel", name)
        record = args.record.copy()
        with self.lock:
            self.records.append((name, record))
            center = int(record["center"][0])
            if name == "bm3d_load":
                self._loaded[stream] = int(record["src"][0, 0, center]) - 1000
            elif name in ("bm3d_hard", "bm3d_wiener"):
                for acc in {int(a) for a in record["acc_at"][0] if a}:
                    self.sums.setdefault(acc, []).append((name[5:], self._loaded[stream]))
            elif name == "bm3d_finish" and record["clear"][0] == 0:
                acc = int(record["acc_at"][0, 0])
                self.finished.append((int(record["to_pilot"][0]), list(self.sums.get(acc, []))))

    def memset(self, address, nbytes, stream) -> None:
        with self.lock:
            self.sums[address] = []

    def event(self) -> int:
        with self.lock:
            self.events += 1
            return 1 << 20 | self.events

    def eventRecord(self, event, stream) -> None:
        pass

    def streamWaitEvent(self, stream, event, flags=0) -> None:
        pass


@pytest.fixture
def schedule(monkeypatch):
    """A factory of BM3D passes on fakes, and the recorder they report to."""
    recorder = _Recorder()
    monkeypatch.setattr(_cache, "_Slot", _FakeSlot)
    monkeypatch.setattr(_cache, "WAIT_LIMIT_S", 5.0)  # a scheduling bug fails, not hangs

    def load_kernels(self):
        self._calls = recorder
        if self.window > 1:
            self._caches()
        self._kernels = {name: name for name in BM3D_KERNELS}
        return self._kernels

    addresses = itertools.count(1 << 48, 1 << 40)

    def device_buffer(nbytes, zeroed):
        return None, next(addresses)

    monkeypatch.setattr(gpu_bm3d.Bm3dPass, "_load_kernels", load_kernels)
    monkeypatch.setattr(gpu_bm3d.Bm3dPass, "_device_buffer", staticmethod(device_buffer))
    filter_groups = gpu_bm3d.Bm3dPass._filter_groups
    basic_estimate = gpu_bm3d.Bm3dPass._basic_estimate

    def spy_filter(self, lease, window, job, accs, stream):
        recorder.add("sum", job.key)
        filter_groups(self, lease, window, job, accs, stream)

    def spy_basic(self, entry, *args):
        recorder.add("basic", entry.key)
        basic_estimate(self, entry, *args)

    monkeypatch.setattr(gpu_bm3d.Bm3dPass, "_filter_groups", spy_filter)
    monkeypatch.setattr(gpu_bm3d.Bm3dPass, "_basic_estimate", spy_basic)

    def make(radius: int, stages: int, ref: bool = False, sample_type=SampleType.INTEGER):
        options = Bm3dSettings(
            planes=(0,), distance=Distance.LUMA, plane_strengths=(5.0,), radius=radius,
            stages=Stages.from_parameter(stages, ref), lambda_ht=2.7, mismatch_scale=1.0,
            block_step=8, bm_range=4, ps_num=2, ps_range=2,
        )  # fmt: skip
        bits = 32 if sample_type is SampleType.FLOAT else 8
        layout = FrameLayout(40, 32, ColorFamily.GRAY, 0, 0, bits, sample_type)
        return gpu_bm3d.Bm3dPass(options, layout, {0: 0}, {0: 64})

    return make, recorder


def _render(npass, frames, stream_ptr: int = 7, length: int = LENGTH, out: int = 5000) -> None:
    """Process output frames as the backend does, with the bridge's clamped windows."""
    reach = npass.options.window_radius
    state = SimpleNamespace(stream=None, stream_ptr=stream_ptr)
    for n in frames:
        numbers = tuple(min(max(n + o, 0), length - 1) for o in range(-reach, reach + 1))
        slots = [1000 + f for f in numbers]
        lease = npass.launch(out, numbers, slots, slots, state)
        npass.release(lease)


def _render_on_threads(npass, frames, threads: int, length: int = LENGTH) -> None:
    """Render `frames` split over `threads` threads (each its own stream); none may hang."""
    workers = [
        threading.Thread(target=_render, args=(npass, frames[i::threads], 100 + i, length))
        for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert not any(worker.is_alive() for worker in workers), "threads deadlocked"


def _produced(log, what):
    return [key for kind, key in log if kind == what]


def _check_sums(recorder, radius: int, length: int, top: str) -> None:
    """Every accumulator finished held the groups of exactly the frames of one window W(k),
    each added once, all of one stage: the hard stage's for basic estimates."""
    windows = {
        k: {min(max(k + o, 0), length - 1) for o in range(-radius, radius + 1)}
        for k in range(length)
    }
    assert recorder.finished
    for to_pilot, sums in recorder.finished:
        frames = [m for _, m in sums]
        assert len(frames) == len(set(frames)), sums
        assert {stage for stage, _ in sums} == {"hard" if to_pilot else top}, sums
        assert set(frames) in windows.values(), sums


@pytest.mark.parametrize("stages", [1, 2])
def test_every_frame_s_groups_are_filtered_once_per_stage(schedule, stages):
    make, recorder = schedule
    npass = make(radius=1, stages=stages)
    _render(npass, range(LENGTH))
    hard = _produced(recorder.log, "sum")
    assert sorted(k for k in hard if k[0] == "hard") == [("hard", m) for m in range(LENGTH)]
    if stages == 2:
        assert sorted(k for k in hard if k[0] == "wiener") == [("wiener", m) for m in range(LENGTH)]
        assert sorted(_produced(recorder.log, "basic")) == list(range(LENGTH))
    kernels = _produced(recorder.log, "kernel")
    # One output finish per frame, plus one per basic estimate with two stages.
    assert kernels.count("bm3d_finish") == LENGTH * stages
    counts = {"hard": LENGTH} if stages == 1 else dict.fromkeys(("hard", "wiener", "basic"), LENGTH)
    counts["zeroed"] = LENGTH * stages  # one accumulator per frame and stage
    assert npass.produced() == counts
    _check_sums(recorder, 1, LENGTH, "hard" if stages == 1 else "wiener")


@pytest.mark.parametrize("radius", [0, 1])
@pytest.mark.parametrize("stages", [1, 2])
def test_float_finishes_read_the_finished_frame(schedule, radius, stages):
    """Float clips: each finish is told the slot of the frame it finishes (src[0][0]), whose
    values the pixels that no group reached keep (bm3d_finish); integer clips' never are."""
    make, recorder = schedule
    windows = {
        k: {min(max(k + o, 0), LENGTH - 1) for o in range(-radius, radius + 1)}
        for k in range(LENGTH)
    }
    for sample_type in (SampleType.INTEGER, SampleType.FLOAT):
        recorder.records.clear()
        recorder.finished.clear()
        npass = make(radius=radius, stages=stages, sample_type=sample_type)
        _render(npass, range(LENGTH))
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


def test_a_smaller_cache_refilters_and_still_renders(schedule, monkeypatch):
    """``AVDENOISE_DEBUG=bm3d_cache=3`` keeps fewer accumulators: frames requested out of
    order then have some groups filtered again, which `produced` reports, and still the right
    sums."""
    monkeypatch.setenv("AVDENOISE_DEBUG", "bm3d_cache=3")
    make, recorder = schedule
    npass = make(radius=1, stages=1)
    order = [0, 9, 1, 10, 2, 11, 3]
    _render(npass, order)
    assert npass.produced()["hard"] > len({m for n in order for m in (n - 1, n, n + 1)} - {-1})
    assert _produced(recorder.log, "kernel").count("bm3d_finish") == len(order)
    _check_sums(recorder, 1, LENGTH, "hard")


def test_each_stage_runs_after_what_it_reads(schedule):
    """wiener(m) after the basic estimates of W(m); basic(k) after hard(m) for m in W(k)."""
    make, recorder = schedule
    npass = make(radius=2, stages=2)
    _render(npass, [7, 3, 12, 0, 13, 5])
    order = {}  # first production of each entry (an evicted one may be computed again)
    for i, (kind, key) in enumerate(recorder.log):
        if kind in ("sum", "basic"):
            order.setdefault(key, i)

    def window(k):
        return {min(max(k + o, 0), LENGTH - 1) for o in range(-2, 3)}

    for key, position in order.items():
        if isinstance(key, tuple) and key[0] == "wiener":
            assert all(order[f] < position for f in window(key[1])), key
        elif isinstance(key, int):
            assert all(order["hard", m] < position for m in window(key)), key


def test_ref_pilot_runs_the_wiener_stage_alone(schedule):
    make, recorder = schedule
    npass = make(radius=1, stages=2, ref=True)
    _render(npass, range(LENGTH))
    sums = _produced(recorder.log, "sum")
    assert sorted(sums) == [("wiener", m) for m in range(LENGTH)]
    assert not _produced(recorder.log, "basic")


def test_threads_in_any_order_share_entries_without_deadlock(schedule, monkeypatch):
    monkeypatch.setenv("AVDENOISE_DEBUG", "bm3d_cache=16")  # every accumulator kept: none twice
    make, recorder = schedule
    npass = make(radius=1, stages=2)
    length = 8
    frames = list(range(length)) * 3
    random.Random(4).shuffle(frames)
    _render_on_threads(npass, frames, 6, length)
    sums = _produced(recorder.log, "sum")
    assert sorted(sums) == sorted(
        [("hard", m) for m in range(length)] + [("wiener", m) for m in range(length)]
    )
    assert sorted(_produced(recorder.log, "basic")) == list(range(length))
    _check_sums(recorder, 1, length, "wiener")


@pytest.mark.parametrize("stages", [1, 2])
def test_spatial_frames_reuse_their_records(schedule, stages):
    """Radius 0: the launches of a frame in order, each record built once per workspace and
    only the frame's slot and output buffer rewritten per frame."""
    make, recorder = schedule
    npass = make(radius=0, stages=stages)
    for n in (3, 8):
        _render(npass, [n], out=9000 + n)
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
        assert stage["threshold"][0] == npass._thresholds["bm3d_hard"]
    assert npass._created == 1  # one workspace served both frames


def test_kernel_args_point_at_their_record() -> None:
    import ctypes

    import numpy as np

    from avdenoise_vs._cuda._calls import KernelArgs

    record = np.zeros(1, dtype=[("a", np.int64), ("b", np.float32)])
    args = KernelArgs(record)
    pointers = (ctypes.c_void_p * 1).from_address(args.address)
    assert pointers[0] == record.ctypes.data


def test_a_failed_frame_leaves_no_entry_for_others_to_wait_on(schedule):
    """A frame that fails while producing its entries fails the ones it never made, so the
    next frame that needs them makes them instead of waiting WAIT_LIMIT_S."""
    make, recorder = schedule
    npass = make(radius=1, stages=1)
    original = npass._filter_groups
    calls = []

    def fail_first(lease, window, job, accs, stream):
        calls.append(job.key)
        if len(calls) == 1:
            raise RuntimeError("fake kernel failure")
        original(lease, window, job, accs, stream)

    npass._filter_groups = fail_first
    with pytest.raises(RuntimeError, match="fake kernel failure"):
        _render(npass, [4])
    _render(npass, [4])  # would wait on the abandoned entries without abandon()
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
    _render_on_threads(npass, frames, 8)
    finishes = _produced(recorder.log, "kernel").count("bm3d_finish")
    assert finishes == len(frames) + npass.produced().get("basic", 0)
    _check_sums(recorder, radius, LENGTH, "hard" if stages == 1 else "wiener")


def test_jobs_give_their_events_back():
    """A job is freed, its event pooled, once no accumulator refers to it: no reference cycle
    (one would leave the event to the garbage collector, see bm3d._Job)."""
    import gc

    events: list = []
    made = itertools.count(1)
    job = gpu_bm3d._Job(("hard", 3), events, lambda: next(made))
    assert job.event_ptr == 1 and events == []
    gc.disable()
    try:
        del job
        assert events == [1]
        again = gpu_bm3d._Job(("hard", 4), events, lambda: next(made))
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
        _render(npass, range(200), length=200)
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
    original = npass._filter_groups
    count = itertools.count(1)
    failing = [True]

    def flaky(lease, window, job, accs, stream):
        if failing[0] and next(count) % 7 == 0:
            raise RuntimeError("fake kernel failure")
        original(lease, window, job, accs, stream)

    npass._filter_groups = flaky
    errors = []

    def render(frames, stream_ptr):
        for n in frames:
            try:
                _render(npass, [n], stream_ptr)
            except RuntimeError as error:
                errors.append(str(error))

    frames = list(range(LENGTH)) * 2
    random.Random(7).shuffle(frames)
    threads = [threading.Thread(target=render, args=(frames[i::8], 100 + i)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "threads hung"
    assert errors and all("fake kernel failure" in e or "failed in another" in e for e in errors)
    failing[0] = False
    recorder.finished.clear()
    _render(npass, range(LENGTH))
    assert len(recorder.finished) >= LENGTH
    _check_sums(recorder, 1, LENGTH, "wiener")
