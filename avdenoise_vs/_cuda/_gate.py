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

V-BM3D's frames share work only when they come in order, and they reach the gate out of order:
each thread's upload takes its own time. An *ordered* gate therefore also knows the frames on
their way (``expect``, as a frame's processing starts, after its source frames are ready), and
admits the lowest of those, waiting up to ``patience_s`` for a lower frame still uploading.
Frames on their way only upload, which needs no other thread, so waiting for them cannot
deadlock, and the patience bounds what a frame that never arrives (a failed upload not
withdrawn) could cost. It filters no group twice, but a fleet runs slower with it, so it is a
choice for comparisons (``_device.gate_patience``).
"""

from __future__ import annotations

import heapq
import threading
import time
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
    patience_s : float or None
        None: admit the lowest frame waiting. Otherwise an ordered gate (see the module
        notes): admit the lowest frame expected, waiting at most this long for one below.
    """

    def __init__(
        self, limit: int, new_buffer: Callable[[], object], patience_s: float | None = None
    ) -> None:
        self.limit = limit
        self._new_buffer = new_buffer
        self._patience = patience_s
        self._buffers: list = []  # free output buffers
        self.made = 0  # output buffers made
        self._inside = 0
        self._waiting: list[int] = []  # heap of the frame numbers waiting
        self._expected: list[int] = []  # heap of those on their way or waiting (ordered gate)
        self._turn = threading.Condition()

    @property
    def ordered(self) -> bool:
        """Whether frames wait for lower ones still on their way (``expect``)."""
        return self._patience is not None

    def expect(self, n: int) -> None:
        """Frame `n` is on its way (ordered gates): it will `enter`, or be `withdraw`-n."""
        with self._turn:
            heapq.heappush(self._expected, n)

    def withdraw(self, n: int) -> None:
        """Frame `n`, expected, will not enter (it failed before): nobody waits for it."""
        with self._turn:
            self._forget_expected(n)
            self._turn.notify_all()

    def enter(self, n: int):
        """Wait (without the GIL) until frame `n` may use the GPU; returns its output buffer.
        On an ordered gate, `n` must have been expected."""
        with self._turn:
            heapq.heappush(self._waiting, n)
            deadline = None if self._patience is None else time.monotonic() + self._patience
            while True:
                if self._inside >= self.limit or self._waiting[0] != n:
                    self._turn.wait()
                elif self._behind(n, deadline):
                    self._turn.wait(deadline - time.monotonic())
                else:
                    break
            heapq.heappop(self._waiting)
            if deadline is not None:
                self._admitted_in_order(n)
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

    def _behind(self, n: int, deadline: float | None) -> bool:
        """Whether `n` still waits for a lower frame on its way: one is expected and the
        patience has not run out (None: an unordered gate)."""
        if deadline is None or not self._expected or self._expected[0] >= n:
            return False
        return time.monotonic() < deadline

    def _admitted_in_order(self, n: int) -> None:
        """`n` enters: it is expected no longer, nor are the lower frames it stopped waiting
        for, so that one late frame delays one frame behind it, not each of them."""
        self._forget_expected(n)
        while self._expected and self._expected[0] < n:
            heapq.heappop(self._expected)

    def _forget_expected(self, n: int) -> None:
        """Drop one `n` from the frames expected (a frame may be asked for twice)."""
        try:
            self._expected.remove(n)
        except ValueError:
            return
        heapq.heapify(self._expected)

    def leave(self, buffer) -> None:
        """Give back a frame's place and its output buffer (None if it never got one)."""
        with self._turn:
            if buffer is not None:
                self._buffers.append(buffer)
            self._inside -= 1
            self._turn.notify_all()
