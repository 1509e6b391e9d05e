"""V-BM3D's temporal schedule: which groups each output frame filters, into which sums.

V-BM3D (``radius > 0``) follows ``_bm3d/reference/vbm3d.py``: the groups of frame ``m``, matched
across its window ``W(m)``, add to every frame of ``W(m)``. Each frame ``k`` of a stage has
an int64 *accumulator* in a device cache; a *job* filters one stage's groups of one frame
``m`` once and adds them to the accumulators of the frames of ``W(m)`` that still lack them,
and an accumulator is finished (into the output, or into a basic estimate for the Wiener
stage) once every frame of ``W(k)`` has added to it. Integer sums do not depend on the order
the jobs run in, so the output is the same whichever threads make which jobs. One output frame
costs, in steady state, one job per stage: BM3DCUDA's ``VAggregate`` does the same sums on the
CPU over a stacked clip. Keeping sums per output frame rather than per filtered frame (float
sums of 2r + 1 frames for each) takes the process from 5.3 GB of GPU memory to 2.2 GB at
radius 1 on 1080p 4:4:4 (H200, 2026-11-30).

A frame first *claims*, under one lock, everything it needs that nobody has claimed: fresh
accumulators (zeroed by their claimer), the jobs its output accumulator lacks, with two stages
the basic estimates those jobs read and the hard-thresholding jobs behind them. It then makes
what it claimed from the bottom level up (zeroing, hard jobs, basic estimates, top-stage jobs,
its output) and waits on other threads' claims through their events. Each level only waits on
lower ones, which their owners make before waiting on anything of a higher level: no deadlock.
"""

from __future__ import annotations

import threading
from collections import Counter

from avdenoise_vs._bm3d.cuda.schedule import Launcher
from avdenoise_vs._bm3d.cuda.vbm3d_jobs import Job, Plan, Window, distinct
from avdenoise_vs._bm3d.cuda.workspace import Lease, WorkSizes
from avdenoise_vs._cuda.calls import KernelArgs
from avdenoise_vs._cuda.frame_cache import FrameCache, wait_for

__all__ = ["VBm3dSchedule"]


class VBm3dSchedule:
    """The V-BM3D schedule of one pass (see the module notes).

    Parameters
    ----------
    launcher : Launcher
    radius : int
        Temporal radius, at least 1.
    sizes : WorkSizes
    frames_in_flight : int
        Most frames of the pass on the GPU at once (the caches hold what they share).
    accumulators : int, optional
        Accumulators to keep on the GPU (both stages); default: about what steady state uses.
    """

    def __init__(
        self, launcher: Launcher, radius: int, sizes: WorkSizes, frames_in_flight: int,
        accumulators: int | None = None,
    ) -> None:  # fmt: skip
        self._accumulators = accumulators
        self._launcher = launcher
        self._radius = radius
        self._window = 2 * radius + 1
        self._sizes = sizes
        self._in_flight = frames_in_flight
        self._top = "wiener" if launcher.run_wiener else "hard"
        self._lock = threading.Lock()  # the counters
        self._claims = threading.Lock()  # accumulators' jobs, claimed atomically
        self._accs = self._basics = None  # the caches, made once the kernels load
        self._events: list = []  # job events given back
        self._produced: Counter[str] = Counter()  # jobs and basic estimates made

    # -- the pass's side ----------------------------------------------------------------------

    def equip(self, ws) -> None:
        """A V-BM3D workspace holds planes only: each job builds its own records."""

    def start(self) -> None:
        """Make the caches: accumulators (both stages) and basic estimates."""
        # An accumulator is 2 C planes of int64, most of V-BM3D's memory; in steady state a
        # stage keeps about 2r + 1 + frames in flight of them.
        launcher = self._launcher
        stages = 1 + (launcher.run_hard and launcher.run_wiener)
        kept = self._accumulators or stages * (self._window + self._in_flight + 1)
        self._accs = FrameCache(self._sizes.acc_bytes, kept)
        self._basics = FrameCache(self._sizes.frame_bytes, 2 * self._window + self._in_flight)

    def frame(self, lease: Lease, numbers: tuple, slots: list, ref_slots: list, out_ptr: int,
              stream: int) -> None:  # fmt: skip
        """One frame: claim what it needs, make it bottom up, finish the output."""
        window = Window(numbers, slots, ref_slots, self._radius)
        plan = Plan()
        with self._claims:
            plan.out, plan.out_jobs = self._claim_sums(lease, plan, self._top, window.center,
                                                       window)  # fmt: skip
        self._make_plan(lease, plan, window, stream)
        self._wait([*plan.out_jobs, plan.out], stream)
        finish = self._finished_frame(window, window.center)
        record = self._launcher.records.record(acc_at=[plan.out.slot.ptr], out=out_ptr, **finish)
        self._launcher.run("bm3d_finish", KernelArgs(record), stream)

    def abandon(self, lease: Lease) -> None:
        """Fail what a failed frame claimed and never made, so that nobody waits for it, and
        take its jobs back from the accumulators, so that later frames claim them."""
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

    def forget(self, numbers) -> None:
        """Drop the accumulators and basic estimates of frames `numbers`."""
        if self._accs is not None:
            self._accs.forget([(stage, f) for stage in ("hard", "wiener") for f in numbers])
            self._basics.forget(list(numbers))

    def produced(self) -> dict[str, int]:
        """Work made so far by kind: "hard" and "wiener" jobs, "basic" estimates, "zeroed"
        accumulators."""
        with self._lock:
            return dict(self._produced)

    def memory_bytes(self) -> int:
        """Device memory of the cached accumulators and basic estimates."""
        caches = [c for c in (self._accs, self._basics) if c is not None]
        return sum(c.memory_bytes() for c in caches)

    # -- claiming ---------------------------------------------------------------------------

    def _claim_sums(self, lease: Lease, plan: Plan, stage: str, k: int, window: Window):
        """Hold the accumulator of frame k for `stage` and claim the jobs it lacks; returns it
        and every job it waits for. Called with the claims lock held."""
        (acc,) = self._hold_accs(lease, plan, [(stage, k)])
        for m in distinct(window.around(k)):
            if m not in acc.parts:
                self._claim_job(lease, plan, stage, m, window)
        return acc, list(acc.parts.values())

    def _claim_job(self, lease: Lease, plan: Plan, stage: str, m: int, window: Window):
        """A job for `stage`'s groups of frame m, aimed at every accumulator of W(m) that
        lacks them: held ones, and new ones while the cache has room (their frames are
        likely to come next; a frame whose accumulator was not made gets its own jobs)."""
        job = Job((stage, m), self._events, self._launcher.calls.event)
        accs = self._hold_accs(lease, plan, self._wanted(stage, m, window))
        for acc in accs:
            acc.parts[m] = job
            job.targets[acc.key[1]] = acc.slot.ptr
        lease.jobs.append((job, accs))
        if stage == "wiener" and self._launcher.run_hard:
            self._claim_pilot(lease, plan, job, window)
        (plan.top if stage == self._top else plan.hard).append((job, accs))

    def _wanted(self, stage: str, m: int, window: Window) -> list:
        """Keys of the accumulators of W(m) that a job for frame m should add to."""
        wanted = []
        for k in distinct(window.around(m)):
            key = (stage, k)
            if key in self._accs:
                if m not in self._accs.peek(key).parts:
                    wanted.append(key)
            elif self._accs.has_room() and (stage == self._top or k not in self._basics):
                wanted.append(key)
        return wanted

    def _claim_pilot(self, lease: Lease, plan: Plan, job: Job, window: Window) -> None:
        """The pilot of a Wiener job: the basic estimates of W(m), and what the fresh ones need."""
        basics, fresh = self._hold(lease, self._basics, distinct(window.around(job.key[1])))
        job.basics = {entry.key: entry for entry in basics}
        # Their accumulators first, so that each hard job claimed below aims at all of them.
        self._hold_accs(lease, plan, [("hard", entry.key) for entry in fresh])
        for entry in fresh:
            acc, jobs = self._claim_sums(lease, plan, "hard", entry.key, window)
            plan.basics.append((entry, acc, jobs))

    def _hold_accs(self, lease: Lease, plan: Plan, keys: list) -> list:
        """Hold the accumulators of `keys`; fresh ones start empty and are to be zeroed."""
        entries, fresh = self._hold(lease, self._accs, keys)
        for entry in fresh:
            entry.parts = {}
        plan.zero += fresh
        return entries

    @staticmethod
    def _hold(lease: Lease, cache, keys: list) -> tuple[list, list]:
        entries, fresh = cache.acquire(keys)
        lease.held.append((cache, entries))
        lease.fresh.append((cache, fresh))
        return entries, fresh

    # -- making -----------------------------------------------------------------------------

    def _make_plan(self, lease: Lease, plan: Plan, window: Window, stream: int) -> None:
        """Queue what the frame claimed, level by level from the bottom."""
        calls = self._launcher.calls
        acc_bytes = self._sizes.acc_bytes
        for acc in plan.zero:
            self._make(acc, "zeroed", stream, calls.memset, acc.slot.ptr, acc_bytes, stream)
        for job, accs in plan.hard:
            self._make(job, "hard", stream, self._filter_groups, lease, window, job, accs, stream)
        for entry, acc, jobs in plan.basics:
            self._make(entry, "basic", stream, self._basic_estimate, entry, acc, jobs, window,
                       stream)  # fmt: skip
        for job, accs in plan.top:
            self._make(job, self._top, stream, self._filter_groups, lease, window, job, accs,
                       stream)  # fmt: skip

    def _make(self, item, kind: str, stream: int, make, *args) -> None:
        """Queue an item's work, ``make(*args)``, then publish it: event, stream, issued.

        `item` is a job or a cache entry (a fresh accumulator, zeroed because its slot may
        have held another frame's sums, or a basic estimate); `kind` counts it in produced().
        """
        with self._lock:
            self._produced[kind] += 1
        try:
            make(*args)
            self._launcher.calls.eventRecord(item.event_ptr, stream)
            item.stream = stream
        except BaseException:
            item.failed = True
            raise
        finally:
            item.issued.set()

    def _filter_groups(self, lease: Lease, window: Window, job: Job, accs, stream) -> None:
        """Filter the groups of frame m = job.key[1] once: load W(m), run the stage into the
        accumulators of the job's targets (`accs`, their cache entries)."""
        stage, m = job.key
        ws, records, frame_bytes = lease.workspace, self._launcher.records, self._sizes.frame_bytes
        numbers = window.around(m)
        noisy = [ws.noisy + t * frame_bytes for t in range(self._window)]
        pilot = [ws.pilot + t * frame_bytes for t in range(self._window)] if ws.pilot else []
        load = records.record(noisy_at=noisy, pilot_at=pilot,
                              src=[[window.slot[f] for f in numbers],
                                   [window.ref_slot[f] for f in numbers]])  # fmt: skip
        self._launcher.run("bm3d_load", KernelArgs(load), stream)
        if job.basics:
            self._wait(list(job.basics.values()), stream)
            pilot = [job.basics[f].slot.ptr for f in numbers]
        self._wait(accs, stream)  # zeroed
        # Window frames repeated at the clip ends add to one accumulator; 0: not aggregated.
        acc_at = [job.targets.get(f, 0) for f in numbers]
        name = "bm3d_" + stage
        record = records.stage(name, noisy_at=noisy, pilot_at=pilot, acc_at=acc_at)
        self._launcher.run(name, KernelArgs(record), stream)

    def _basic_estimate(self, entry, acc, jobs: list, window: Window, stream: int) -> None:
        """Basic estimate of frame k = entry.key: its finished hard-thresholding sums."""
        self._wait([*jobs, acc], stream)
        finish = self._finished_frame(window, entry.key)
        record = self._launcher.records.record(
            acc_at=[acc.slot.ptr], to_pilot=1, dst=entry.slot.ptr, **finish
        )
        self._launcher.run("bm3d_finish", KernelArgs(record), stream)

    def _finished_frame(self, window: Window, k: int) -> dict:
        """The `src` field of a finish of frame k: its slot, which float clips read there."""
        return {"src": [[window.slot[k]]]} if self._launcher.finish_reads_source else {}

    def _wait(self, items: list, stream: int) -> None:
        wait_for(items, stream, self._launcher.calls)
