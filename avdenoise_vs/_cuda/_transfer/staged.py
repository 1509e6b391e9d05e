"""Frames through each thread's page-locked buffers, laid out like a slot.

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

__all__ = ["BridgeDownload", "StagedDownload", "StagedUpload"]


class StagedUpload:
    """A fresh window frame into one of the thread's staging buffers, then into its slot.

    A thread's buffer `i` is free again once its stream has synchronized at the end of the
    frame, so a frame with k fresh entries uses the thread's buffers 0 to k - 1. A one-frame
    window uses its input's buffer instead, which the bridge fills for the thread's next
    frame, the GIL released, when the host step asks it to (:meth:`requests`).
    """

    def __init__(self, context: Context) -> None:
        self._context = context
        self._calls = context.calls
        self._cache = context.cache
        self._nbytes = context.slots.nbytes
        self._one_frame = context.window == 1
        self._copy = np.copyto  # Python's copies in; a seam for benchmarks and tests

    def upload(self, fresh: list, frame_numbers: tuple, windows: tuple, base: int, state) -> None:
        """See :meth:`.base.Upload.upload`."""
        calls, staging, stream = self._calls, state.staging, state.stream_ptr
        for index, entry in enumerate(fresh):
            input_index, frame = entry.key
            planes = windows[input_index - base][frame_numbers.index(frame)]
            if self._one_frame:
                index = input_index - base
            try:
                buffer = staging[index] if index < len(staging) else self._buffer(state, index)
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
        """The thread's staging buffer `index`, made with those before it on first use."""
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
