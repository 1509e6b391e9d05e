"""What the transfer strategies share: their context, the protocol, and a frame's release.

A strategy's per-frame method is bound once, when the backend is made, so that a frame looks
up nothing: every Python call of a frame holds the GIL, which 16 VapourSynth threads share
(``backend.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from avdenoise_vs._cuda.buffers import Pinned, SlotLayout, ThreadState
from avdenoise_vs._log import thread_debug

__all__ = ["D2D", "D2H", "H2D", "Context", "Download", "Upload"]

logger = logging.getLogger(__name__)

H2D = 1  # cudaMemcpyHostToDevice
D2H = 2  # cudaMemcpyDeviceToHost
D2D = 3  # cudaMemcpyDeviceToDevice


@dataclass(frozen=True)
class Context:
    """What a strategy needs of its backend, given once at creation.

    Attributes
    ----------
    cupy : module
        CuPy, for page-locked buffers and events.
    runtime : module
        ``cupy.cuda.runtime``: copies from pageable memory and synchronisation, which
        release the GIL while they wait.
    calls : HeldCalls
        The calls that only queue work (``_cuda/calls.py``).
    cache : FrameCache
        The backend's device slots.
    gate : GpuGate or None
        The gate of passes with large work buffers (BM3D), else None.
    slots : SlotLayout
        Where planes lie in slots and in every buffer laid out like one.
    window : int
        Frames in the widest temporal window.
    num_inputs : int
        Clips whose windows each frame reads (2 with a guide clip).
    sleep : bool
        Whether gated frames sleep until the GPU is done before their download.
    """

    cupy: object
    runtime: object
    calls: object
    cache: object
    gate: object
    slots: SlotLayout
    window: int
    num_inputs: int
    sleep: bool

    def new_pinned(self) -> Pinned:
        """A page-locked buffer laid out like a slot (a thread's, on its first frames)."""
        return Pinned(self.cupy, self.slots)


class Upload(Protocol):
    """How a frame's planes reach their device slots."""

    def upload(self, fresh: list, frame_numbers: tuple, windows: tuple, base: int, state) -> None:
        """Queue the copies of every entry of `fresh` into its slot on the thread's stream and
        record the slot's event; an entry whose copies fail is failed in the cache.

        `windows` are the bridge's (a frame is None where the bridge has already copied it
        into the staging buffer that :meth:`requests` named); `base` numbers the inputs in
        the cache keys.
        """

    def requests(self, state: ThreadState) -> tuple:
        """The staging requests of the thread's host step (host_step.h): where the bridge
        copies the thread's next frame before that frame takes the GIL; () for none."""


class Download:
    """How a frame's output comes back, and how what the frame holds is released.

    Subclasses define :meth:`download`, called once the passes are queued: it queues the
    copy, waits for the stream (or leaves that to the bridge), releases the frame's cache
    entries, pass leases and gate buffer, and returns the thread's host step for the bridge,
    or None when ``dst`` is done.
    """

    def __init__(self, context: Context) -> None:
        self._context = context
        self._runtime = context.runtime
        self._calls = context.calls
        self._cache = context.cache
        self._gate = context.gate
        self._planes = context.slots.written
        self._written = tuple(plane for plane, *_ in context.slots.written)
        self._sleep = context.sleep
        self._copy = np.copyto  # Python's copies out; a seam for benchmarks and tests

    def download(self, state: ThreadState, dst: tuple, entries, leases, out):
        """Bring the frame's output into `dst` (the bridge's planes) and release the frame."""
        raise NotImplementedError

    def prepare(self, state: ThreadState, upload: Upload) -> None:
        """Give a new thread's state what this strategy needs (its first frame only)."""
        if self._sleep:
            state.done = self._context.cupy.cuda.Event(block=True, disable_timing=True)

    def abort(self, state: ThreadState, entries, leases, out) -> None:
        """Release what a failed frame holds, once nothing on its stream can still read it."""
        try:  # nothing may still read a slot once it is released
            self._runtime.streamSynchronize(state.stream_ptr)
        except self._runtime.CUDARuntimeError as error:  # the original error matters more
            thread_debug(logger, "avdenoise: stream synchronize after an error failed: %s", error)
        self._release(entries, leases, out)

    def _sleep_until_done(self, state: ThreadState) -> None:
        """Wait asleep for the frame's kernels (gated frames, AVDENOISE_CUDA_SYNC), so that
        its download starts at once."""
        self._calls.eventRecord(state.done.ptr, state.stream_ptr)
        state.done.synchronize()

    def _release(self, entries, leases, out, complete: bool = False) -> None:
        """Give back the frame's cache entries (marked complete when its stream is known to
        be done with them), its passes' leases and its gate buffer."""
        if complete:
            for entry in entries:
                entry.complete = True
        self._cache.release(entries)
        for npass, lease in leases:
            npass.release(lease)
        if out is not None:
            self._gate.leave(out)

    def release_pending(self, state: ThreadState) -> None:
        """Release the slots and leases of the thread's last frame, whose stream the bridge
        waited for (checked here: a failed wait must not let another frame reuse a slot that
        a kernel may still read)."""
        pending, state.pending = state.pending, None
        if pending is None:
            return
        entries, leases = pending
        try:
            if not self._calls.stream_idle(state.stream_ptr):
                self._runtime.streamSynchronize(state.stream_ptr)
            for entry in entries:
                entry.complete = True
        finally:
            self._cache.release(entries)
            for npass, lease in leases:
                npass.release(lease)

    def finish_here(self, state: ThreadState, host_step: tuple, dst: tuple) -> None:
        """Do a host step in Python, as the bridge would (the staging requests aside), and
        release what the frame held."""
        wait_address, stream_ptr, _, _ = host_step
        if wait_address:
            self._runtime.streamSynchronize(stream_ptr)
        state.down.copy_out(dst, self._written, self._copy)
        self.release_pending(state)
