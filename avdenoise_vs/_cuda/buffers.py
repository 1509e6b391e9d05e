"""The buffers of the CUDA frame path: where planes lie in a slot, page-locked host buffers
laid out the same way, and what each VapourSynth thread keeps for every frame.

Device slots (``_cuda/frame_cache.py``), output buffers and staging buffers all share one
:class:`SlotLayout`, so a frame crosses between any two of them in one contiguous copy.
"""

from __future__ import annotations

import numpy as np

from avdenoise_vs._params.options import FrameLayout
from avdenoise_vs._params.settings import PassSettings

__all__ = ["ALIGN", "Pinned", "SlotLayout", "ThreadState"]

#: Plane pitch and offset alignment in device buffers, bytes: rows start where the kernels'
#: coalesced loads want them.
ALIGN = 512


def _align(value: int) -> int:
    return -(-value // ALIGN) * ALIGN


class SlotLayout:
    """Where the planes that a backend's passes read and write lie in a device slot.

    Parameters
    ----------
    layout : FrameLayout
        The clip's layout.
    passes : tuple of PassSettings
        The passes; the slot holds every plane one of them reads (and writes: the same).

    Attributes
    ----------
    planes : dict
        plane -> (byte offset, pitch, row bytes, rows).
    copies : tuple
        ``(plane, byte offset, pitch, row bytes, rows)`` of every plane, for the uploads.
    written : tuple
        The same of every plane a pass writes, in pass order, for the downloads.
    nbytes : int
        Size of a slot (and of every buffer laid out like one).
    """

    __slots__ = ("copies", "dtype", "nbytes", "planes", "shapes", "written")

    def __init__(self, layout: FrameLayout, passes: tuple[PassSettings, ...]) -> None:
        itemsize = layout.dtype.itemsize
        self.dtype = layout.dtype
        self.planes: dict[int, tuple[int, int, int, int]] = {}
        self.shapes: dict[int, tuple[int, int]] = {}
        offset = 0
        for plane in sorted({plane for options in passes for plane in options.planes}):
            height, width = layout.plane_shape(plane)
            pitch = _align(width * itemsize)
            self.planes[plane] = (offset, pitch, width * itemsize, height)
            self.shapes[plane] = (height, width)
            offset += _align(pitch * height)
        self.nbytes = max(offset, ALIGN)
        self.copies = tuple((plane, *geometry) for plane, geometry in self.planes.items())
        self.written = tuple(
            (plane, *self.planes[plane]) for options in passes for plane in options.written_planes
        )

    def offsets(self) -> dict[int, int]:
        """plane -> byte offset in the slot."""
        return {plane: geometry[0] for plane, geometry in self.planes.items()}

    def pitches(self) -> dict[int, int]:
        """plane -> pitch in bytes."""
        return {plane: geometry[1] for plane, geometry in self.planes.items()}


class Pinned:
    """A page-locked host buffer laid out like a slot, with a NumPy view per plane.

    Only page-locked memory lets one asynchronous copy of the whole frame overlap other
    threads' work; from pageable memory the driver copies synchronously.
    """

    __slots__ = ("memory", "ptr", "views", "event", "done", "done_address", "out_copies",
                 "_items", "_dtype", "_itemsize")  # fmt: skip

    def __init__(self, cupy, slots: SlotLayout) -> None:
        self.memory = cupy.cuda.alloc_pinned_memory(slots.nbytes)
        self.ptr = self.memory.ptr
        self.event = 0  # a pool's upload buffer: recorded after its copy (staged.py)
        # A pool's download buffer: the bridge sets done[0] once it has copied it out.
        self.done = np.zeros(1, np.int32)
        self.done_address = self.done.ctypes.data
        self.out_copies = None  # a download buffer's host-step copies, made on first use
        raw = np.frombuffer(self.memory, dtype=np.uint8, count=slots.nbytes)
        self._dtype, self._itemsize = slots.dtype, slots.dtype.itemsize
        self.views = {
            plane: np.ndarray(
                slots.shapes[plane],
                self._dtype,
                buffer=raw,
                offset=offset,
                strides=(pitch, self._itemsize),
            )  # fmt: skip
            for plane, (offset, pitch, _, _) in slots.planes.items()
        }
        self._items = tuple(self.views.items())  # iterated per frame without a dict call

    def copy_in(self, frame: tuple, copy) -> None:
        """Copy every plane of `frame` (the bridge's plane tuples) into this buffer.

        `copy` is ``np.copyto`` (or a stand-in that times or counts it), which releases the
        GIL for large arrays, so that threads copy in parallel.
        """
        dtype, itemsize = self._dtype, self._itemsize
        for plane, view in self._items:
            _, stride, memory = frame[plane]
            copy(view, np.ndarray(view.shape, dtype, buffer=memory, strides=(stride, itemsize)))

    def copy_out(self, frame: tuple, planes: tuple, copy) -> None:
        """Copy `planes` of this buffer into `frame` (the bridge's plane tuples)."""
        dtype, itemsize, views = self._dtype, self._itemsize, self.views
        for plane in planes:
            _, stride, memory = frame[plane]
            view = views[plane]
            copy(np.ndarray(view.shape, dtype, buffer=memory, strides=(stride, itemsize)), view)


class ThreadState:
    """What one VapourSynth thread reuses for every frame: its stream, its output buffer and
    argument records, and its buffers of the transfer strategies.

    The output buffer and the arguments come from the gate instead, frame by frame, when the
    passes have one (``_cuda/gate.py``); ``out_ptr`` and ``args`` are then the current frame's.
    """

    __slots__ = ("stream", "stream_ptr", "out", "out_ptr", "args", "staging", "down", "done",
                 "host_step", "pending", "__weakref__")  # fmt: skip

    def __init__(self, stream) -> None:
        self.stream = stream
        self.stream_ptr = stream.ptr
        self.out = None  # the thread's own output buffer (ungated passes)
        self.out_ptr = 0
        self.args = None  # one argument record per pass, writing to out_ptr
        self.staging: list[Pinned] = []  # ungated one-frame windows' upload buffers
        self.down: Pinned | None = None  # own (ungated) or last lent (gated) download buffer
        self.done = None  # an event to sleep on until the GPU is done (gated passes)
        self.host_step = None  # the bridge's part of every frame (host_step.h), or None
        self.pending = None  # (entries, leases) the last frame holds until the bridge waited
