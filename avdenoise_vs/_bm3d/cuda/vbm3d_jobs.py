"""The records of V-BM3D's schedule: window frames, jobs and what a frame claimed.

They hold no logic of their own beyond their bookkeeping; ``_bm3d/cuda/vbm3d_schedule.py`` claims
and makes them. A :class:`Job` is kept apart from the cache entries it adds to so that nothing
refers back from it: see its notes on events.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

__all__ = ["Job", "Plan", "Window", "distinct"]


def distinct(numbers) -> list[int]:
    """Frame numbers without the repeats of a window clamped at the clip's ends."""
    return sorted(set(numbers))


class Job:
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
class Plan:
    """What one V-BM3D frame claimed, by the level it is made at (see
    _bm3d/cuda/vbm3d_schedule.py)."""

    zero: list = field(default_factory=list)  # fresh accumulators
    hard: list = field(default_factory=list)  # (job, accumulators) behind fresh basic estimates
    basics: list = field(default_factory=list)  # (fresh basic entry, its hard accumulator, jobs)
    top: list = field(default_factory=list)  # (job, its accumulators) of the output's stage
    out: object = None  # the output's accumulator ...
    out_jobs: list = field(default_factory=list)  # ... and the jobs it waits for


class Window:
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
