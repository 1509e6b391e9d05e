"""The GPU stage of passes with large work buffers (BM3D): few frames at a time, in order.

A BM3D frame holds a workspace of float planes (and, for V-BM3D, the accumulators its jobs add
to) from its first launch until its output is back on the host, so only a few frames run on
the GPU at once (``frames_in_flight``). VapourSynth's threads still upload and copy out in
parallel; :class:`GpuGate` admits them to the GPU part one at a time as places free up, the
lowest frame number first, and lends each an output buffer for that part only. In frame order,
the frames on the GPU at once are neighbours: they share V-BM3D's accumulators and jobs
instead of each starting its own, which saves memory and work. (A thread that arrives late
with a lower number goes first; a frame waits for nothing that a frame behind the gate makes,
so the order cannot deadlock.)

V-BM3D's frames reach the gate out of order (each thread's upload takes its own time): a gate
that also waited briefly for lower frames still uploading filtered no group twice (1.01 jobs
an output frame against 1.26 with 16 threads, 1519 MiB against 1875 for radius 1, YUV444), but
a fleet ran slower with it (16 workers: 266 and 287 fps against 302 and 304; the chain of
V-BM3D and NLM 402 and 400 against 446 and 436; H200, docs/BENCHMARKS.md: "V-BM3D frames in
order"), so frames enter as they arrive.

Frames take their cache slots and upload before the gate, not after an admission that would
let only the gate's places and two more frames upload: that bounded the frame cache to those
frames' windows, but a V-BM3D r1 YUV444 fleet ran 20-25% slower with it and used more memory
per worker (16 workers x 240 frames: 296-302 fps and 2664 MiB against 368 fps and 2208 MiB;
H100, docs/BENCHMARKS.md: "gate admission"), since the uploads no longer overlapped the GPU
work of the frames ahead.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable

__all__ = ["GpuGate"]


class GpuGate:
    """Admit at most `limit` frames at once, lowest frame number first.

    Parameters
    ----------
    limit : int
        Frames on the GPU at once.
    new_buffer : callable
        Makes an output buffer (an object with ``ptr``); at most `limit` are ever made.
    """

    def __init__(self, limit: int, new_buffer: Callable[[], object]) -> None:
        self.limit = limit
        self._new_buffer = new_buffer
        self._buffers: list = []  # free output buffers
        self.made = 0  # output buffers made
        self._inside = 0
        self._waiting: list[int] = []  # heap of the frame numbers waiting
        self._turn = threading.Condition()

    def enter(self, n: int):
        """Wait (without the GIL) until frame `n` may use the GPU; returns its output buffer."""
        with self._turn:
            heapq.heappush(self._waiting, n)
            while self._inside >= self.limit or self._waiting[0] != n:
                self._turn.wait()
            heapq.heappop(self._waiting)
            self._inside += 1
            self._turn.notify_all()  # the next number may enter too if there is room
            if self._buffers:
                return self._buffers.pop()
            self.made += 1
        try:
            return self._new_buffer()
        except BaseException:
            with self._turn:
                self.made -= 1
            self.leave(None)
            raise

    def leave(self, buffer) -> None:
        """Give back a frame's place and its output buffer (None if it never got one)."""
        with self._turn:
            if buffer is not None:
                self._buffers.append(buffer)
            self._inside -= 1
            self._turn.notify_all()
