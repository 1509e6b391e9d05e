"""Frames through page-locked buffers laid out like a slot: each thread's, and two pools.

Host copies (NumPy's, which release the GIL, so threads copy in parallel; or the bridge's,
without the GIL at all) move a frame between VapourSynth's memory and the buffer, and one
asynchronous copy per frame, queued with the GIL kept (``_cuda/calls.py``), moves it between the
buffer and the device. The driver can overlap such copies across threads, which it cannot
for pageable memory.

Page-locking is slow: about 0.7 ms per MiB on an H200's host, and about a fifth of that again
to unlock at exit, one buffer after another (a 1080p YUV444 float frame is 25 MiB). So only
the ungated one-frame windows of NLM keep buffers per thread, which the bridge fills for the
thread's next frame without the GIL. Every other frame takes its buffers from a
:class:`PinnedPool` and lends them back as soon as its copy is done: an upload buffer once the
event recorded after its copy has completed, a download buffer once the bridge has copied it
out (the host step's done flag, host_step.h). A pool of a gated backend keeps to a limit of a
few frames and waits briefly for a buffer rather than page-locking one per thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from avdenoise_vs._cuda.buffers import Pinned, ThreadState
from avdenoise_vs._cuda.transfer.base import Context, Download, Upload

__all__ = ["BridgeDownload", "PinnedPool", "StagedDownload", "StagedUpload"]

#: How long a frame waits for a pool's buffer at its limit before it page-locks one more: a
#: lent buffer returns within a copy (milliseconds), a thread that stopped after its last
#: frame may never give one back.
PATIENCE_S = 0.02
_POLL_S = 0.0002


class PinnedPool:
    """Page-locked buffers shared by a backend's threads, each lent to one copy at a time.

    Parameters
    ----------
    new : callable
        Makes a buffer (page-locks it).
    returned : callable
        Whether a lent buffer's copy is done, so that it may be taken again.
    limit : int or None
        Buffers to make before a frame waits (up to :data:`PATIENCE_S`) for a lent one to
        come back; None: no limit.
    """

    def __init__(
        self, new: Callable[[], Pinned], returned: Callable[[Pinned], bool], limit: int | None
    ) -> None:
        self._new = new
        self._returned = returned
        self._limit = limit
        self._free: list[Pinned] = []
        self._lent: list[Pinned] = []
        self._lock = threading.Lock()
        self.made = 0

    def take(self) -> Pinned:
        """A free buffer: a returned one, a new one below the limit, or after waiting."""
        started = None
        while True:
            with self._lock:
                buffer = self._free_one()
                patient = started is not None and time.monotonic() - started >= PATIENCE_S
                make = buffer is None and (
                    self._limit is None or self.made < self._limit or patient
                )
                if make:
                    self.made += 1
            if buffer is not None:
                return buffer
            if make:  # outside the lock: page-locking takes milliseconds
                return self._new()
            started = time.monotonic() if started is None else started
            time.sleep(_POLL_S)

    def lend(self, buffer: Pinned) -> None:
        """`buffer` is in use until `returned` says its copy is done."""
        with self._lock:
            self._lent.append(buffer)

    def release(self, buffer: Pinned) -> None:
        """`buffer` is free now (nothing was queued on it)."""
        with self._lock:
            self._free.append(buffer)

    def _free_one(self) -> Pinned | None:
        """A free buffer, after taking back every lent one that has returned (lock held)."""
        if not self._free and self._lent:
            returned = [b for b in self._lent if self._returned(b)]
            if returned:
                self._lent = [b for b in self._lent if b not in returned]
                self._free += returned
        return self._free.pop() if self._free else None


class StagedUpload:
    """A fresh window frame into a page-locked buffer, then into its slot.

    An ungated one-frame window uses its thread's own buffer per input, which the bridge
    fills for the thread's next frame, the GIL released, when the host step asks it to
    (:meth:`requests`). Other frames take buffers from the backend's upload pool.
    """

    def __init__(self, context: Context) -> None:
        self._context = context
        self._calls = context.calls
        self._cache = context.cache
        self._nbytes = context.slots.nbytes
        self._per_thread = context.window == 1 and context.gate is None
        limit = None if context.gate is None else context.num_inputs * context.window + 2
        self.pool = None if self._per_thread else PinnedPool(self._new, self._returned, limit)
        self._copy = np.copyto  # Python's copies in; a seam for benchmarks and tests

    def upload(self, fresh: list, frame_numbers: tuple, windows: tuple, base: int, state) -> None:
        """See :meth:`.base.Upload.upload`."""
        calls, stream, pool = self._calls, state.stream_ptr, self.pool
        for entry in fresh:
            input_index, frame = entry.key
            planes = windows[input_index - base][frame_numbers.index(frame)]
            taken = None  # a pool's buffer, free again if its copy was never queued
            try:
                if pool is None:
                    buffer = self._buffer(state, input_index - base)
                else:
                    buffer = taken = pool.take()
                if planes is not None:  # else the bridge has filled the buffer
                    buffer.copy_in(planes, self._copy)
                calls.copy_to_device(entry.slot.ptr, buffer.ptr, self._nbytes, stream)
                if taken is not None:
                    taken = None  # queued: only its event may give it back
                    calls.eventRecord(buffer.event, stream)
                    pool.lend(buffer)
                calls.eventRecord(entry.slot.event_ptr, stream)
                entry.stream = stream
            except BaseException:
                if taken is not None:
                    pool.release(taken)
                self._cache.fail(entry)
                raise
            finally:
                entry.issued.set()

    def requests(self, state: ThreadState) -> tuple:
        """For ungated one-frame windows: each input's planes into its staging buffer."""
        if not self._per_thread:
            return ()
        self._buffer(state, self._context.num_inputs - 1)
        return tuple(
            (i, plane, state.staging[i].ptr + offset, pitch)
            for i in range(self._context.num_inputs)
            for plane, (offset, pitch, _, _) in self._context.slots.planes.items()
        )

    def _new(self) -> Pinned:
        """A pool's buffer, with the event that tells when its copy is done."""
        buffer = self._context.new_pinned()
        buffer.event = self._calls.event()
        return buffer

    def _returned(self, buffer: Pinned) -> bool:
        return self._calls.event_done(buffer.event)

    def _buffer(self, state: ThreadState, index: int) -> Pinned:
        """The thread's staging buffer `index` (one-frame windows), made with those before it
        on first use."""
        while len(state.staging) <= index:
            state.staging.append(self._context.new_pinned())
        return state.staging[index]


class StagedDownload(Download):
    """Gated passes: copy into a pool's buffer, wait for the stream, release (the gate's
    output buffer goes back before the frame returns, so its copy must be done by then), and
    leave the copies out to the bridge, which flags the buffer done after them."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self._nbytes = context.slots.nbytes
        limit = context.gate.limit + 2  # frames on the GPU, and two being copied out
        self.pool = PinnedPool(context.new_pinned, _copied_out, limit)

    def download(self, state: ThreadState, dst: tuple, entries, leases, out):
        """See :meth:`.base.Download.download`."""
        stream = state.stream_ptr
        buffer = self.pool.take()
        try:
            if self._sleep:
                self._sleep_until_done(state)
            self._calls.copy_to_host(buffer.ptr, state.out_ptr, self._nbytes, stream)
            self._runtime.streamSynchronize(stream)
        except BaseException:  # the buffer stays out of the pool: a copy may still run
            self.abort(state, entries, leases, out)
            raise
        self._release(entries, leases, out, complete=True)
        buffer.done[0] = 0
        self.pool.lend(buffer)
        state.down = buffer  # for finish_here
        if buffer.out_copies is None:
            buffer.out_copies = _out_copies(buffer, self._planes)
        return (0, 0, buffer.out_copies, (), buffer.done_address)

    def finish_here(self, state: ThreadState, host_step: tuple, dst: tuple) -> None:
        """Copy out in Python, as the bridge would, and flag the buffer done."""
        state.down.copy_out(dst, self._written, self._copy)
        state.down.done[0] = 1


class BridgeDownload(Download):
    """Copy into the thread's page-locked buffer, and leave the rest to the bridge: with the
    GIL released it waits for the stream (``cuStreamSynchronize`` through its address),
    copies the written planes out and fills the upload buffers of the thread's next frame.
    The frame's slots and leases stay held until that next frame releases them
    (:meth:`.base.Download.release_pending`). Ungated passes only."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self._nbytes = context.slots.nbytes

    def prepare(self, state: ThreadState, upload: Upload) -> None:
        """See :meth:`.base.Download.prepare`: the thread's buffer, and its host step, the
        same for every frame."""
        super().prepare(state, upload)
        state.down = self._context.new_pinned()
        wait = self._calls.synchronize_address, state.stream_ptr
        state.host_step = (*wait, _out_copies(state.down, self._planes), upload.requests(state))

    def download(self, state: ThreadState, dst: tuple, entries, leases, out):
        """See :meth:`.base.Download.download`; returns the thread's host step."""
        try:
            self._calls.copy_to_host(state.down.ptr, state.out_ptr, self._nbytes, state.stream_ptr)
        except BaseException:
            self.abort(state, entries, leases, out)
            raise
        state.pending = (entries, leases)  # released by the thread's next frame
        return state.host_step


def _copied_out(buffer: Pinned) -> bool:
    """Whether the bridge (or :meth:`StagedDownload.finish_here`) has copied `buffer` out."""
    return bool(buffer.done[0])


def _out_copies(down: Pinned, planes: tuple) -> tuple:
    """The host step's output copies: ``(plane, address, pitch)`` in the download buffer."""
    return tuple((plane, down.ptr + offset, pitch) for plane, offset, pitch, *_ in planes)
