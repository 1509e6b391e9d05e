"""One BM3D pass on the GPU: its kernels, work buffers, accumulators and launch sequence.

Spatial BM3D (``radius = 0``) is three to five launches per frame on the calling thread's
stream (bm3d.cuh): load the frame into float planes, hard thresholding into int64
accumulators, finish into basic estimates, Wiener filtering, finish into the output buffer.

V-BM3D (``radius > 0``) follows ``_reference/vbm3d.py``: the groups of frame ``m``, matched
across its window ``W(m)``, add to every frame of ``W(m)``. Each frame ``k`` of a stage has
an int64 *accumulator* in a device cache; a *job* filters one stage's groups of one frame
``m`` once and adds them to the accumulators of the frames of ``W(m)`` that still lack them,
and an accumulator is finished (into the output, or into a basic estimate for the Wiener
stage) once every frame of ``W(k)`` has added to it. Integer sums do not depend on the order
the jobs run in, so the output is the same whichever threads make which jobs. One output frame
costs, in steady state, one job per stage: BM3DCUDA's ``VAggregate`` does the same sums on the
CPU over a stacked clip. Keeping sums per output frame rather than per filtered frame (the
first design: float sums of 2r + 1 frames for each) took the process from 5.3 GB of GPU
memory to 2.2 GB at radius 1 on 1080p 4:4:4 (H200, 2026-11-30).

A frame first *claims*, under one lock, everything it needs that nobody has claimed: fresh
accumulators (zeroed by their claimer), the jobs its output accumulator lacks, with two stages
the basic estimates those jobs read and the hard-thresholding jobs behind them. It then makes
what it claimed from the bottom level up (zeroing, hard jobs, basic estimates, top-stage jobs,
its output) and waits on other threads' claims through their events. Each level only waits on
lower ones, which their owners make before waiting on anything of a higher level: no deadlock.

The work buffers are large, so they live in a small pool of *workspaces*; the backend's gate
(``_gate.py``) lets no more frames onto the GPU at once than there are workspaces
(``frames_in_flight``), lowest frame number first, so that frames on the GPU, not
VapourSynth's threads, set the memory, and the frames there are neighbours that share jobs.

Notes
-----
Cost per reference block (warp): ``N = (2 bm_range + 1)^2 + 2r ps_num (2 ps_range + 1)^2``
block distances of 64 multiply-adds each, a warp-wide selection of the ``K`` nearest, then per
channel two 2-D transforms of ``K`` blocks (16 multiply-adds per sample), the Haar transform
along the group and ``2 * 64 K`` int64 atomic adds. There are ``ceil(H / step) ceil(W / step)``
reference blocks per frame and stage.
"""

from __future__ import annotations

import queue
import threading
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .._environment import positive_int
from .._options import Distance, FrameLayout, SampleType
from .._reference._bm3d_stages import TAU_WIENER, ht_match_threshold
from .._reference.backend import bm3d_sigmas
from .._settings import Bm3dSettings, Stages
from ._bm3d_source import BM3D_WARPS, Bm3dSpec
from ._cache import FrameCache, wait_for
from ._calls import KernelArgs, cuda_calls

__all__ = ["Bm3dPass", "bm3d_args_dtype"]

_ALIGN = 128  # work-plane pitch, elements
_PIXEL_BLOCK = (32, 8, 1)  # threads of the per-pixel kernels
_STAGE_BLOCK = (32 * BM3D_WARPS, 1, 1)
_DEFAULT_SHARED_LIMIT = 48 * 1024
#: Workspaces per pass, which is also how many frames of the pass the backend's gate lets onto
#: the GPU at once. Spatial frames are light and several keep the GPU busy. A V-BM3D workspace
#: holds the float planes of the 2r + 1 frames a job reads (75 MB at 1080p 4:4:4, r = 1). At
#: r = 1 on YUV444 (H200, 16 threads, vspipe, 2026-11-30), two stages ran at 96 / 146 / 146
#: fps with 2 / 3 / 4 workspaces in an earlier design of the sums; this one, with 3: one stage
#: 430 fps, two stages 170.
DEFAULT_WORKSPACES = (4, 3)  # (spatial, temporal)
#: Largest plane side: block keys pack positions into 13 bits (bm3d.cuh, ``bm_key``).
MAX_PLANE_SIDE = (1 << 13) + 7


def bm3d_args_dtype(window: int) -> np.dtype:
    """Host image of ``struct Bm3dArgs`` in bm3d.cuh (8-byte fields only: no padding)."""
    i8, f8 = np.int64, np.float64
    return np.dtype(
        [("src", i8, (2, window))]
        + [(name, i8, (window,)) for name in ("noisy_at", "pilot_at", "acc_at")]
        + [(name, i8) for name in ("clear", "dst", "out")]
        + [("plane_off", i8, (3,))]
        + [(name, i8) for name in ("width", "height", "src_pitch", "pitch")]
        + [(name, i8) for name in ("refs_x", "refs_y", "step", "center", "to_pilot", "inputs")]
        + [("sigma", f8, (3,))]
        + [(name, f8) for name in ("lambda_ht", "threshold", "scale", "peak")]
    )


def _reference_count(length: int, step: int) -> int:
    """Reference positions along an axis of `length` pixels (the reference's grid)."""
    last = length - 8
    return -(-last // step) + 1


def _distinct(numbers) -> list[int]:
    """Frame numbers without the repeats of a window clamped at the clip's ends."""
    return sorted(set(numbers))


class _Workspace:
    """One frame's work buffers: float planes of a job's window (noisy; pilot when the ref clip
    is the pilot or the pass is spatial); for spatial BM3D also its accumulator and the
    argument record of each launch, built once."""

    __slots__ = ("memory", "noisy", "pilot", "acc", "spatial")


class _Job:
    """One stage's groups of one frame m, filtered once into the accumulators of the frames of
    W(m) that lacked them when it was claimed (``targets``: frame number -> accumulator
    address).

    Others wait for it as for a cache entry (see ``_cache.wait_for``): ``issued`` once its
    launch is queued and its event recorded (or it failed), ``complete`` once its producer's
    stream has synchronized. It owns its event, a raw ``CUevent``, while it lives: a job is
    dropped only when no accumulator refers to it any more, so nobody can still wait on the
    event it gives back. A job refers to no cache entry (they refer to it): no reference
    cycle, so it is freed, and its event given back, as soon as the last one drops it. (A
    CuPy ``Event`` would not do here: the garbage collector destroys the CUDA event of one
    found in a cycle even when a finalizer keeps the object.)
    """

    __slots__ = ("key", "targets", "basics", "issued", "failed", "complete", "stream",
                 "event_ptr", "_events")  # fmt: skip

    def __init__(self, key: tuple, events: list, new_event) -> None:
        self.key = key
        self.targets = {}
        self.basics = {}  # Wiener jobs of two stages: frame number -> basic-estimate entry
        self.issued = threading.Event()
        self.failed = False
        self.complete = False
        self.stream = 0
        self.event_ptr = events.pop() if events else new_event()
        self._events = events

    def __del__(self) -> None:
        self._events.append(self.event_ptr)  # list.append is atomic: no lock


@dataclass
class _Plan:
    """What one V-BM3D frame claimed, by the level it is made at (see the module notes)."""

    zero: list = field(default_factory=list)  # fresh accumulators
    hard: list = field(default_factory=list)  # (job, accumulators) behind fresh basic estimates
    basics: list = field(default_factory=list)  # (fresh basic entry, its hard accumulator, jobs)
    top: list = field(default_factory=list)  # (job, its accumulators) of the output's stage
    out: object = None  # the output's accumulator ...
    out_jobs: list = field(default_factory=list)  # ... and the jobs it waits for


class _Lease:
    """What one frame of a pass holds until its stream has synchronized."""

    __slots__ = ("workspace", "held", "fresh", "jobs")

    def __init__(self, workspace: _Workspace) -> None:
        self.workspace = workspace
        self.held = []  # (cache, entries) as acquired
        self.fresh = []  # (cache, entries) this frame must make
        self.jobs = []  # (job, its accumulators) this frame claimed


class _Window:
    """Frame numbers around the output frame n, as the bridge handed them over."""

    def __init__(self, numbers: tuple, slots: list, ref_slots: list, radius: int) -> None:
        self.first = numbers[len(numbers) // 2] - len(numbers) // 2
        self.numbers = numbers
        self.center = numbers[len(numbers) // 2]
        self.slot = dict(zip(numbers, slots, strict=True))
        self.ref_slot = dict(zip(numbers, ref_slots, strict=True))
        self.radius = radius

    def around(self, k: int) -> list[int]:
        """Frame numbers of ``W(k)``."""
        return [self.numbers[k + o - self.first] for o in range(-self.radius, self.radius + 1)]


class Bm3dPass:
    """Everything needed to run one :class:`Bm3dSettings` pass, built once per backend.

    Parameters
    ----------
    options : Bm3dSettings
    layout : FrameLayout
    offsets : dict of int to int
        Byte offset of each plane inside a frame slot and inside an output buffer.
    pitch : dict of int to int
        Row pitch in bytes of each plane (the same in slots and output buffers).
    workspaces : int, optional
        Most frames of this pass on the GPU at once; default ``DEFAULT_WORKSPACES``.
    """

    def __init__(
        self,
        options: Bm3dSettings,
        layout: FrameLayout,
        offsets: dict[int, int],
        pitch: dict[int, int],
        workspaces: int | None = None,
    ) -> None:
        self.options = options
        planes = options.planes
        height, width = layout.plane_shape(planes[0])
        self.spec = Bm3dSpec(
            window=2 * options.radius + 1,
            channels=len(planes),
            joint=options.distance in (Distance.YUV, Distance.RGB),
            rgb=options.distance is Distance.RGB,
            dtype=layout.dtype.name,
            bm_range=options.bm_range,
            ps_num=options.ps_num,
            ps_range=options.ps_range,
        )
        self.window = self.spec.window
        # Float frames may hold NaN or infinities: bm3d_finish then reads the finished frame's
        # slot (src[0][0]) for the pixels that no group reached. Integer frames never need it.
        self._finish_reads_source = layout.sample_type is SampleType.FLOAT
        self.run_hard = not options.has_ref
        self.run_wiener = Stages.WIENER in options.stages
        self._top = "wiener" if self.run_wiener else "hard"
        channels = self.spec.channels
        work_pitch = -(-width // _ALIGN) * _ALIGN
        self._frame_floats = channels * height * work_pitch  # one frame's planes
        self._frame_bytes = 4 * self._frame_floats
        self._acc_bytes = 2 * 8 * self._frame_floats  # num, then den: int64
        spatial = self.window == 1
        pilots = self.window if (spatial or options.has_ref) else 0
        self._ws_planes = (self.window, pilots)
        self.workspace_bytes = (self.window + pilots) * self._frame_bytes + (
            self._acc_bytes if spatial else 0
        )
        self.frames_in_flight = (
            workspaces or positive_int("bm3d_workspaces") or DEFAULT_WORKSPACES[not spatial]
        )
        self._pool: queue.SimpleQueue[_Workspace] = queue.SimpleQueue()
        self._created = 0
        self._lock = threading.Lock()  # counters, kernels, workspaces
        self._claims = threading.Lock()  # V-BM3D: accumulators' jobs, claimed atomically
        self._kernels = None
        self._accs = self._basics = None  # V-BM3D caches, made on first use
        self._events: list = []  # V-BM3D: job events given back
        self._produced: Counter[str] = Counter()  # V-BM3D jobs and basic estimates made

        itemsize = layout.dtype.itemsize
        refs = (_reference_count(width, options.block_step),
                _reference_count(height, options.block_step))  # fmt: skip
        template = np.zeros(1, dtype=bm3d_args_dtype(self.window))
        template["plane_off"][0, : len(planes)] = [offsets[p] // itemsize for p in planes]
        template["width"], template["height"] = width, height
        template["src_pitch"] = pitch[planes[0]] // itemsize
        template["pitch"] = work_pitch
        template["refs_x"], template["refs_y"] = refs
        template["step"] = options.block_step
        template["center"] = options.radius
        sigmas = bm3d_sigmas(options)
        template["sigma"][0, :channels] = sigmas
        template["lambda_ht"] = options.lambda_ht
        template["scale"] = 255.0 / layout.peak
        template["peak"] = layout.peak
        template["inputs"] = 1 + options.has_ref
        self._template = template
        self._pixel_grid = (-(-width // _PIXEL_BLOCK[0]), -(-height // _PIXEL_BLOCK[1]))
        self._load_grid = (*self._pixel_grid, self.window * (1 + options.has_ref))
        separate = 1 if self.spec.joint else channels
        self._stage_grid = (-(-refs[0] * refs[1] // BM3D_WARPS), 1, separate)
        self._thresholds = {
            "bm3d_hard": ht_match_threshold(sigmas[0]) * options.mismatch_scale,
            "bm3d_wiener": TAU_WIENER * options.mismatch_scale,
        }
        self._stage_shared = {
            "bm3d_hard": self.spec.shared_bytes(False),
            "bm3d_wiener": self.spec.shared_bytes(True),
        }

    # -- per frame --------------------------------------------------------------------------

    def new_args(self, out_ptr: int) -> int:
        """Launch state: the output buffer (a thread's, or the one the gate lent a frame)."""
        return out_ptr

    def launch(self, out_ptr: int, numbers: tuple, values: list, guides: list, state) -> _Lease:
        """Queue one frame's work on the thread's stream; returns what to :meth:`release`
        once the stream has synchronized."""
        self._kernels or self._load_kernels()
        lease = _Lease(self._acquire())
        try:
            if self.window == 1:
                self._spatial(lease.workspace, out_ptr, values[0], guides[0], state.stream_ptr)
            else:
                window = _Window(numbers, values, guides, self.options.radius)
                self._temporal(lease, window, out_ptr, state)
        except BaseException:
            self._abandon(lease)
            self.release(lease)
            raise
        return lease

    def release(self, lease: _Lease) -> None:
        """Give back what a frame held (its stream has synchronized)."""
        for job, _ in lease.jobs:
            job.complete = job.issued.is_set() and not job.failed
        for cache, entries in lease.held:
            for entry in entries:
                if entry.issued.is_set() and not entry.failed:
                    entry.complete = True
            cache.release(entries)
        self._pool.put(lease.workspace)

    def forget(self, numbers) -> None:
        """Drop the accumulators and basic estimates of frames `numbers` (warm-up frames)."""
        if self._accs is not None:
            self._accs.forget([(stage, f) for stage in ("hard", "wiener") for f in numbers])
            self._basics.forget(list(numbers))

    def produced(self) -> dict[str, int]:
        """V-BM3D work made so far by kind: "hard" and "wiener" jobs, "basic" estimates.

        Once per frame and kind when no accumulator is dropped before it is finished; more
        means the caches are too small for the order the frames come in (benchmarks report it).
        """
        with self._lock:
            return dict(self._produced)

    def memory_bytes(self) -> int:
        """Device memory of the workspaces and cached entries created so far."""
        caches = [c for c in (self._accs, self._basics) if c is not None]
        return self._created * self.workspace_bytes + sum(c.memory_bytes() for c in caches)

    # -- spatial BM3D -----------------------------------------------------------------------

    def _spatial(self, ws: _Workspace, out_ptr: int, slot: int, ref_slot: int, stream) -> None:
        """One frame, radius 0: load, stage(s), finish; accumulators in the workspace. Only
        the frame's slots and output buffer change from frame to frame."""
        records = ws.spatial
        records["load"].record["src"][0, :, 0] = slot, ref_slot
        records["out"].record["out"] = out_ptr
        if self._finish_reads_source:
            records["basic"].record["src"][0, 0, 0] = slot
            records["out"].record["src"][0, 0, 0] = slot
        self._run("bm3d_load", records["load"], stream)
        if self.run_hard:
            self._run("bm3d_hard", records["hard"], stream)
            if self.run_wiener:
                self._run("bm3d_finish", records["basic"], stream)
        if self.run_wiener:
            self._run("bm3d_wiener", records["wiener"], stream)
        self._run("bm3d_finish", records["out"], stream)

    def _spatial_records(self, ws: _Workspace) -> dict[str, KernelArgs]:
        """The argument records of a spatial frame, by launch (see :meth:`_spatial`)."""
        frame = dict(noisy_at=[ws.noisy], pilot_at=[ws.pilot], acc_at=[ws.acc], clear=1)
        records = {
            "load": self._record(**frame),
            "hard": self._stage_record("bm3d_hard", **frame),
            "basic": self._record(to_pilot=1, dst=ws.pilot, **frame),
            "wiener": self._stage_record("bm3d_wiener", **frame),
            "out": self._record(**frame),
        }
        return {launch: KernelArgs(record) for launch, record in records.items()}

    # -- V-BM3D: claiming -------------------------------------------------------------------

    def _temporal(self, lease: _Lease, window: _Window, out_ptr: int, state) -> None:
        """One frame, radius > 0: claim what it needs, make it bottom up, finish the output."""
        plan = _Plan()
        with self._claims:
            plan.out, plan.out_jobs = self._claim_sums(lease, plan, self._top, window.center,
                                                       window)  # fmt: skip
        stream = state.stream_ptr
        for acc in plan.zero:
            self._make(acc, "zeroed", stream, self._calls.memset, acc.slot.ptr, self._acc_bytes,
                       stream)  # fmt: skip
        for job, accs in plan.hard:
            self._make(job, "hard", stream, self._filter_groups, lease, window, job, accs, stream)
        for entry, acc, jobs in plan.basics:
            self._make(entry, "basic", stream, self._basic_estimate, entry, acc, jobs, window,
                       stream)  # fmt: skip
        for job, accs in plan.top:
            self._make(job, self._top, stream, self._filter_groups, lease, window, job, accs,
                       stream)  # fmt: skip
        self._wait([*plan.out_jobs, plan.out], stream)
        record = self._record(acc_at=[plan.out.slot.ptr], out=out_ptr,
                              **self._finished_frame(window, window.center))  # fmt: skip
        self._run("bm3d_finish", KernelArgs(record), stream)

    def _claim_sums(self, lease: _Lease, plan: _Plan, stage: str, k: int, window: _Window):
        """Hold the accumulator of frame k for `stage` and claim the jobs it lacks; returns it
        and every job it waits for. Called with the claims lock held."""
        (acc,) = self._hold_accs(lease, plan, [(stage, k)])
        for m in _distinct(window.around(k)):
            if m not in acc.parts:
                self._claim_job(lease, plan, stage, m, window)
        return acc, list(acc.parts.values())

    def _claim_job(self, lease: _Lease, plan: _Plan, stage: str, m: int, window: _Window):
        """A job for `stage`'s groups of frame m, aimed at every accumulator of W(m) that
        lacks them: held ones, and new ones while the cache has room (their frames are
        likely to come next; a frame whose accumulator was not made gets its own jobs)."""
        job = _Job((stage, m), self._events, self._calls.event)
        wanted = []
        for k in _distinct(window.around(m)):
            key = (stage, k)
            if key in self._accs:
                if m not in self._accs.peek(key).parts:
                    wanted.append(key)
            elif self._accs.has_room() and (stage == self._top or k not in self._basics):
                wanted.append(key)
        accs = self._hold_accs(lease, plan, wanted)
        for acc in accs:
            acc.parts[m] = job
            job.targets[acc.key[1]] = acc.slot.ptr
        lease.jobs.append((job, accs))
        if stage == "wiener" and self.run_hard:  # the pilot: basic estimates of W(m)
            basics, fresh = self._hold(lease, self._basics, _distinct(window.around(m)))
            job.basics = {entry.key: entry for entry in basics}
            # Their accumulators first, so that each hard job claimed below aims at all of them.
            self._hold_accs(lease, plan, [("hard", entry.key) for entry in fresh])
            for entry in fresh:
                acc, jobs = self._claim_sums(lease, plan, "hard", entry.key, window)
                plan.basics.append((entry, acc, jobs))
        (plan.top if stage == self._top else plan.hard).append((job, accs))

    def _hold_accs(self, lease: _Lease, plan: _Plan, keys: list) -> list:
        """Hold the accumulators of `keys`; fresh ones start empty and are to be zeroed."""
        entries, fresh = self._hold(lease, self._accs, keys)
        for entry in fresh:
            entry.parts = {}
        plan.zero += fresh
        return entries

    @staticmethod
    def _hold(lease: _Lease, cache, keys: list) -> tuple[list, list]:
        entries, fresh = cache.acquire(keys)
        lease.held.append((cache, entries))
        lease.fresh.append((cache, fresh))
        return entries, fresh

    def _abandon(self, lease: _Lease) -> None:
        """After a failed frame: fail what it claimed and never made, so that nobody waits for
        it, and take its jobs back from the accumulators, so that later frames claim them."""
        for cache, fresh in lease.fresh:
            cache.abandon(fresh)
        with self._claims:
            for job, accs in lease.jobs:
                if job.issued.is_set() and not job.failed:
                    continue
                for acc in accs:
                    if acc.parts.get(job.key[1]) is job:
                        del acc.parts[job.key[1]]
                job.failed = True
                job.issued.set()

    # -- V-BM3D: making ---------------------------------------------------------------------

    def _make(self, item, kind: str, stream: int, make, *args) -> None:
        """Queue an item's work, ``make(*args)``, then publish it: event, stream, issued.

        `item` is a job or a cache entry (a fresh accumulator, zeroed because its slot may
        have held another frame's sums, or a basic estimate); `kind` counts it in produced().
        """
        with self._lock:
            self._produced[kind] += 1
        try:
            make(*args)
            self._calls.eventRecord(item.event_ptr, stream)
            item.stream = stream
        except BaseException:
            item.failed = True
            raise
        finally:
            item.issued.set()

    def _filter_groups(self, lease: _Lease, window: _Window, job: _Job, accs, stream) -> None:
        """Filter the groups of frame m = job.key[1] once: load W(m), run the stage into the
        accumulators of the job's targets (`accs`, their cache entries)."""
        stage, m = job.key
        ws = lease.workspace
        numbers = window.around(m)
        noisy = [ws.noisy + t * self._frame_bytes for t in range(self.window)]
        pilot = [ws.pilot + t * self._frame_bytes for t in range(self.window)] if ws.pilot else []
        load = self._record(noisy_at=noisy, pilot_at=pilot,
                            src=[[window.slot[f] for f in numbers],
                                 [window.ref_slot[f] for f in numbers]])  # fmt: skip
        self._run("bm3d_load", KernelArgs(load), stream)
        if job.basics:
            self._wait(list(job.basics.values()), stream)
            pilot = [job.basics[f].slot.ptr for f in numbers]
        self._wait(accs, stream)  # zeroed
        # Window frames repeated at the clip ends add to one accumulator; 0: not aggregated.
        acc_at = [job.targets.get(f, 0) for f in numbers]
        name = "bm3d_" + stage
        record = self._stage_record(name, noisy_at=noisy, pilot_at=pilot, acc_at=acc_at)
        self._run(name, KernelArgs(record), stream)

    def _basic_estimate(self, entry, acc, jobs: list, window: _Window, stream: int) -> None:
        """Basic estimate of frame k = entry.key: its finished hard-thresholding sums."""
        self._wait([*jobs, acc], stream)
        record = self._record(acc_at=[acc.slot.ptr], to_pilot=1, dst=entry.slot.ptr,
                              **self._finished_frame(window, entry.key))  # fmt: skip
        self._run("bm3d_finish", KernelArgs(record), stream)

    def _finished_frame(self, window: _Window, k: int) -> dict:
        """The `src` field of a finish of frame k: its slot, which float clips read there."""
        return {"src": [[window.slot[k]]]} if self._finish_reads_source else {}

    def _wait(self, items: list, stream: int) -> None:
        wait_for(items, stream, self._calls)

    # -- internals ------------------------------------------------------------------------

    def _record(self, **fields) -> np.ndarray:
        """An argument record: the template and `fields`."""
        record = self._template.copy()
        for name, value in fields.items():
            if name in ("noisy_at", "pilot_at", "acc_at"):
                record[name][0, : len(value)] = value
            elif name == "src":
                for index, row in enumerate(value):
                    record["src"][0, index, : len(row)] = row
            else:
                record[name] = value
        return record

    def _stage_record(self, name: str, **fields) -> np.ndarray:
        """The record of a stage kernel: :meth:`_record` with the stage's match threshold."""
        return self._record(threshold=self._thresholds[name], **fields)

    def _run(self, name: str, args: KernelArgs, stream: int) -> None:
        """Launch kernel `name` on `stream`."""
        shared = self._stage_shared.get(name)
        if shared is not None:
            self._calls.launch(
                self._kernels[name], self._stage_grid, _STAGE_BLOCK, shared, stream, args
            )
            return
        grid = self._load_grid if name == "bm3d_load" else (*self._pixel_grid, 1)
        self._calls.launch(self._kernels[name], grid, _PIXEL_BLOCK, 0, stream, args)

    def _caches(self) -> None:
        """Make the V-BM3D caches: accumulators (both stages) and basic estimates."""
        # An accumulator is 2 C planes of int64, most of V-BM3D's memory; in steady state a
        # stage keeps about 2r + 1 + frames in flight of them, the switch is for comparisons.
        in_flight = self.frames_in_flight
        stages = 1 + (self.run_hard and self.run_wiener)
        kept = positive_int("bm3d_cache") or stages * (self.window + in_flight + 1)
        self._accs = FrameCache(self._acc_bytes, kept)
        self._basics = FrameCache(self._frame_bytes, 2 * self.window + in_flight)

    def _acquire(self) -> _Workspace:
        try:
            return self._pool.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            create = self._created < self.frames_in_flight
            if create:
                self._created += 1
        if create:
            try:
                return self._new_workspace()
            except BaseException:
                with self._lock:
                    self._created -= 1
                raise
        return self._pool.get()  # blocks without the GIL until a frame finishes

    def _new_workspace(self) -> _Workspace:
        """Allocate work buffers (a spatial accumulator zeroed: each finish leaves it zero)."""
        ws = _Workspace()
        noisy, pilots = self._ws_planes
        spatial = self.window == 1
        ws.memory, base = self._device_buffer(
            self.workspace_bytes, zeroed=self._acc_bytes if spatial else 0
        )
        ws.acc = base if spatial else 0
        ws.noisy = base + (self._acc_bytes if spatial else 0)
        ws.pilot = ws.noisy + noisy * self._frame_bytes if pilots else 0
        ws.spatial = self._spatial_records(ws) if spatial else None
        return ws

    @staticmethod
    def _device_buffer(nbytes: int, zeroed: int):
        """``(memory, address)`` of `nbytes` of device memory whose first `zeroed` are 0."""
        import cupy

        memory = cupy.cuda.alloc(nbytes)
        if zeroed:
            cupy.cuda.runtime.memset(memory.ptr, 0, zeroed)
        return memory, memory.ptr

    def prepare(self) -> None:
        """Compile (or load from CuPy's cache) the kernels now, on the current device."""
        self._load_kernels()

    def _load_kernels(self) -> dict[str, int]:
        """Compile (or load) the kernels; returns their ``CUfunction`` handles by name."""
        from ._kernels import get_bm3d_kernels

        with self._lock:
            if self._kernels is None:
                self._calls = cuda_calls()
                kernels = get_bm3d_kernels(self.spec)  # memoized: the modules stay loaded
                for name, shared in self._stage_shared.items():
                    if shared > _DEFAULT_SHARED_LIMIT:
                        kernels[name].max_dynamic_shared_size_bytes = shared
                if self.window > 1:
                    self._caches()
                self._kernels = {name: kernel.kernel.ptr for name, kernel in kernels.items()}
        return self._kernels
