"""Frames through page-locked buffers laid out like a slot: each thread's, and a pool.

Host copies (NumPy's, which release the GIL, so threads copy in parallel; or the bridge's,
without the GIL at all) move a frame between VapourSynth's memory and the buffer, and one
asynchronous copy per frame, queued with the GIL kept (``_calls.py``), moves it between the
buffer and the device. The driver can overlap such copies across threads, which it cannot
for pageable memory.
"""

from __future__ import annotations

import numpy as np

from .._buffers import Pinned, ThreadState
from .base import Context, Download, Upload

__all__ = ["BridgeDownload", "StagedDownload", "StagedUpload", "UploadPool"]


class UploadPool:
    """Page-locked upload buffers shared by a backend's threads, for windows of several frames.

    A frame takes one buffer per fresh window frame and gives it back with its other leases
    once its stream is done (:meth:`.base.Download.release_pending`), so the pool holds about
    as many buffers as frames are uploaded at once, rather than a window's worth per thread:
    16 threads of V-BM3D at radius 1 would otherwise page-lock 48 frames, one by one on their
    first frames, and unlock them again at exit. ``list.pop`` and ``append`` are atomic, so
    threads share it without a lock.
    """

    def __init__(self, context: Context) -> None:
        self._new = context.new_pinned
        self._free: list[Pinned] = []
        self.made = 0

    def take(self) -> Pinned:
        """A free buffer, or a new one when every buffer is in use."""
        try:
            return self._free.pop()
        except IndexError:
            self.made += 1
            return self._new()

    def release(self, buffer: Pinned) -> None:
        """Give back a buffer whose copy is done (a frame lease, see ``Download._release``)."""
        self._free.append(buffer)


class StagedUpload:
    """A fresh window frame into a page-locked buffer, then into its slot.

    A one-frame window uses its thread's own buffer per input, which the bridge fills for
    the thread's next frame, the GIL released, when the host step asks it to
    (:meth:`requests`). Wider windows take buffers from the backend's :class:`UploadPool`.
    """

    def __init__(self, context: Context) -> None:
        self._context = context
        self._calls = context.calls
        self._cache = context.cache
        self._nbytes = context.slots.nbytes
        self._one_frame = context.window == 1
        self.pool = None if self._one_frame else UploadPool(context)
        self._copy = np.copyto  # Python's copies in; a seam for benchmarks and tests

    def upload(
        self, fresh: list, frame_numbers: tuple, windows: tuple, base: int, state, leases: list
    ) -> None:
        """See :meth:`.base.Upload.upload`."""
        calls, stream, pool = self._calls, state.stream_ptr, self.pool
        for entry in fresh:
            input_index, frame = entry.key
            planes = windows[input_index - base][frame_numbers.index(frame)]
            try:
                if pool is None:
                    buffer = self._buffer(state, input_index - base)
                else:
                    buffer = pool.take()
                    leases.append((pool, buffer))
                if planes is not None:  # else the bridge has filled the buffer
                    buffer.copy_in(planes, self._copy)
                calls.copy_to_device(entry.slot.ptr, buffer.ptr, self._nbytes, stream)
                calls.eventRecord(entry.slot.event_ptr, stream)
                entry.stream = stream
            except BaseException:
                self._cache.fail(entry)
                raise
            finally:
                entry.issued.set()

    def requests(self, state: ThreadState) -> tuple:
        """For one-frame windows: each input's planes into its staging buffer."""
        if not self._one_frame:
            return ()
        self._buffer(state, self._context.num_inputs - 1)
        return tuple(
            (i, plane, state.staging[i].ptr + offset, pitch)
            for i in range(self._context.num_inputs)
            for plane, (offset, pitch, _, _) in self._context.slots.planes.items()
        )

    def _buffer(self, state: ThreadState, index: int) -> Pinned:
        """The thread's staging buffer `index` (one-frame windows), made with those before it
        on first use."""
        while len(state.staging) <= index:
            state.staging.append(self._context.new_pinned())
        return state.staging[index]


class _ToPinned(Download):
    """The output buffer into the thread's page-locked download buffer, in one copy."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self._nbytes = context.slots.nbytes

    def prepare(self, state: ThreadState, upload: Upload) -> None:
        """The thread's download buffer, and whatever the base class gives."""
        super().prepare(state, upload)
        state.down = self._context.new_pinned()


class StagedDownload(_ToPinned):
    """Copy, wait for the stream, release, then copy out: Python's copies
    (``host_copies=python``, or a driver whose wait the bridge cannot call), or, for gated
    passes, the bridge's, whose host step then has no wait (the gate's output buffer goes
    back before the frame returns, so its copy must be done by then)."""

    def __init__(self, context: Context, bridge_copies: bool) -> None:
        super().__init__(context)
        self._bridge_copies = bridge_copies

    def prepare(self, state: ThreadState, upload: Upload) -> None:
        """See :meth:`.base.Download.prepare`; with the bridge's copies, the host step too."""
        super().prepare(state, upload)
        if self._bridge_copies:
            state.host_step = (0, 0, _out_copies(state.down, self._planes), upload.requests(state))

    def download(self, state: ThreadState, dst: tuple, entries, leases, out):
        """See :meth:`.base.Download.download`."""
        stream = state.stream_ptr
        try:
            if self._sleep:
                self._sleep_until_done(state)
            self._calls.copy_to_host(state.down.ptr, state.out_ptr, self._nbytes, stream)
            self._runtime.streamSynchronize(stream)
        except BaseException:
            self.abort(state, entries, leases, out)
            raise
        self._release(entries, leases, out, complete=True)
        step = state.host_step
        if step is None:  # copied out after the gate is left, so the next frame enters meanwhile
            state.down.copy_out(dst, self._written, self._copy)
        return step


class BridgeDownload(_ToPinned):
    """Copy, and leave the rest to the bridge: with the GIL released it waits for the stream
    (``cuStreamSynchronize`` through its address), copies the written planes out and fills
    the upload buffers of the thread's next frame. The frame's slots and leases stay held
    until that next frame releases them (:meth:`.base.Download.release_pending`). Ungated
    passes only."""

    def prepare(self, state: ThreadState, upload: Upload) -> None:
        """See :meth:`.base.Download.prepare`: the host step, the same for every frame."""
        super().prepare(state, upload)
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


def _out_copies(down: Pinned, planes: tuple) -> tuple:
    """The host step's output copies: ``(plane, address, pitch)`` in the download buffer."""
    return tuple((plane, down.ptr + offset, pitch) for plane, offset, pitch, *_ in planes)
