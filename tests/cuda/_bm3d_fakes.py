"""Fakes that run a BM3D pass's real schedule without a GPU (no CuPy needed).

Fake slots and fake CUDA calls (launches recorded, not run) stand in for CuPy: the schedules
(``avdenoise_vs/_bm3d/cuda/schedule.py``, ``_vbm3d_schedule.py``) run as they are and the
:class:`Recorder` sees every launch, with a copy of its argument record, in issue order.
"""

from __future__ import annotations

import itertools
import threading
from types import SimpleNamespace

from avdenoise_vs._bm3d.cuda import bm3d_pass as gpu_bm3d
from avdenoise_vs._bm3d.cuda import vbm3d_schedule as _vbm3d_schedule
from avdenoise_vs._bm3d.cuda import workspace as _bm3d_workspace
from avdenoise_vs._bm3d.cuda.source import BM3D_KERNELS
from avdenoise_vs._cuda import frame_cache as _cache
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType
from avdenoise_vs._params.settings import Bm3dSettings, Stages

__all__ = [
    "LENGTH",
    "Recorder",
    "check_sums",
    "install",
    "produced",
    "render",
    "render_on_threads",
    "windows",
]

LENGTH = 14


class _FakeSlot:
    """A device slot with a made-up address."""

    addresses = itertools.count(1 << 32, 1 << 24)

    def __init__(self, nbytes: int) -> None:
        self.memory = self.event = None
        self.ptr = next(self.addresses)
        self.event_ptr = self.ptr + 1


class Recorder:
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


def install(monkeypatch):
    """Put the fakes in place; returns a factory of BM3D passes on them, and their recorder."""
    recorder = Recorder()
    monkeypatch.setattr(_cache, "_Slot", _FakeSlot)
    monkeypatch.setattr(_cache, "WAIT_LIMIT_S", 5.0)  # a scheduling bug fails, not hangs

    def load_kernels(self):
        self.calls = recorder
        self._schedule.start()
        self._kernels = {name: name for name in BM3D_KERNELS}
        return self._kernels

    addresses = itertools.count(1 << 48, 1 << 40)

    def device_buffer(nbytes, zeroed):
        return None, next(addresses)

    monkeypatch.setattr(gpu_bm3d.Bm3dPass, "_load_kernels", load_kernels)
    monkeypatch.setattr(
        _bm3d_workspace.WorkspacePool, "_device_buffer", staticmethod(device_buffer)
    )
    _spy_on_jobs(monkeypatch, recorder)
    return _pass_factory, recorder


def _spy_on_jobs(monkeypatch, recorder: Recorder) -> None:
    """Log each V-BM3D job ("sum", its key) and basic estimate ("basic", its frame)."""
    schedule = _vbm3d_schedule.VBm3dSchedule
    filter_groups, basic_estimate = schedule._filter_groups, schedule._basic_estimate

    def spy_filter(self, lease, window, job, accs, stream):
        recorder.add("sum", job.key)
        filter_groups(self, lease, window, job, accs, stream)

    def spy_basic(self, entry, *args):
        recorder.add("basic", entry.key)
        basic_estimate(self, entry, *args)

    monkeypatch.setattr(schedule, "_filter_groups", spy_filter)
    monkeypatch.setattr(schedule, "_basic_estimate", spy_basic)


def _pass_factory(
    radius: int, stages: int, ref: bool = False, sample_type=SampleType.INTEGER,
    accumulators: int | None = None,
):  # fmt: skip
    """A BM3D pass over a 40 x 32 luma clip (keeping `accumulators`, if given)."""
    options = Bm3dSettings(
        planes=(0,), distance=Distance.LUMA, plane_strengths=(5.0,), radius=radius,
        stages=Stages.from_parameter(stages, ref), lambda_ht=2.7, mismatch_scale=1.0,
        block_step=8, bm_range=4, ps_num=2, ps_range=2,
    )  # fmt: skip
    bits = 32 if sample_type is SampleType.FLOAT else 8
    layout = FrameLayout(40, 32, ColorFamily.GRAY, 0, 0, bits, sample_type)
    return gpu_bm3d.Bm3dPass(options, layout, {0: 0}, {0: 64}, accumulators=accumulators)


def render(npass, frames, stream_ptr: int = 7, length: int = LENGTH, out: int = 5000) -> None:
    """Process output frames as the backend does, with the bridge's clamped windows."""
    reach = npass.options.window_radius
    state = SimpleNamespace(stream=None, stream_ptr=stream_ptr)
    for n in frames:
        numbers = tuple(min(max(n + o, 0), length - 1) for o in range(-reach, reach + 1))
        slots = [1000 + f for f in numbers]
        lease = npass.launch(out, numbers, slots, slots, state)
        npass.release(lease)


def render_on_threads(npass, frames, threads: int, length: int = LENGTH) -> None:
    """Render `frames` split over `threads` threads (each its own stream); none may hang."""
    workers = [
        threading.Thread(target=render, args=(npass, frames[i::threads], 100 + i, length))
        for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert not any(worker.is_alive() for worker in workers), "threads deadlocked"


def produced(log, what):
    """The keys of the log's entries of kind `what`, in issue order."""
    return [key for kind, key in log if kind == what]


def windows(radius: int, length: int = LENGTH) -> dict[int, set[int]]:
    """The frames of ``W(k)`` for every frame k, clamped at the clip's ends."""
    return {
        k: {min(max(k + o, 0), length - 1) for o in range(-radius, radius + 1)}
        for k in range(length)
    }


def check_sums(recorder, radius: int, length: int, top: str) -> None:
    """Every accumulator finished held the groups of exactly the frames of one window W(k),
    each added once, all of one stage: the hard stage's for basic estimates."""
    assert recorder.finished
    for to_pilot, sums in recorder.finished:
        frames = [m for _, m in sums]
        assert len(frames) == len(set(frames)), sums
        assert {stage for stage, _ in sums} == {"hard" if to_pilot else top}, sums
        assert set(frames) in windows(radius, length).values(), sums
