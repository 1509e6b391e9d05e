"""Device copies of source frames (and V-BM3D's accumulators and basic estimates), shared by
every window that needs them.

Each source frame (per input clip) is uploaded once into a device slot and stays while windows
still use it. Entries are used from several streams: the uploader records the slot's event
after its copies, and a reader on another stream makes its stream wait on that event until
some reader has seen the upload complete. A slot is reused only once no frame in flight
references it; since every caller synchronizes its stream before releasing, reuse never
races with a kernel still reading the slot.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence

from avdenoise_vs._errors import CudaError
from avdenoise_vs._log import thread_debug

__all__ = ["Entry", "FrameCache", "default_slots", "wait_for"]

logger = logging.getLogger(__name__)

#: A thread waits this long at most for an entry that another thread prepares; past it the
#: frame fails with an error instead of hanging the render (a bug, never a slow GPU: entries
#: are queued, not computed, by the time they are published).
WAIT_LIMIT_S = 300.0


class _Slot:
    """One device buffer for the planes of one frame, and the event of its last upload."""

    __slots__ = ("memory", "ptr", "event", "event_ptr")

    def __init__(self, nbytes: int) -> None:
        import cupy  # here, so that the cache's logic can be tested without a GPU

        self.memory = cupy.cuda.alloc(nbytes)
        self.ptr = self.memory.ptr
        self.event = cupy.cuda.Event(block=False, disable_timing=True)
        self.event_ptr = self.event.ptr


class Entry:
    """A cached frame: its slot and what readers need to know about its upload.

    ``issued`` is set once the uploader has queued the copies and recorded the event (or
    failed: then ``failed`` is true); ``stream`` is the uploader's stream; ``complete`` is
    set once some caller synchronized after the upload, so later readers need no wait.
    ``parts`` is the owner's record of what went into the slot (V-BM3D: the jobs that add to
    an accumulator), None in a fresh entry.
    """

    __slots__ = ("key", "slot", "refs", "issued", "failed", "complete", "stream", "parts")

    def __init__(self, key: Hashable, slot: _Slot) -> None:
        self.key = key
        self.slot = slot
        self.refs = 0
        self.issued = threading.Event()
        self.failed = False
        self.complete = False
        self.stream = 0
        self.parts = None

    @property
    def event_ptr(self) -> int:
        """The event recorded after the entry's upload (or computation)."""
        return self.slot.event_ptr


class FrameCache:
    """Bounded LRU map from (input, frame number) keys to device slots, with reference counts.

    Parameters
    ----------
    slot_bytes : int
        Size of one slot.
    soft_limit : int
        Slots kept at most while some are unreferenced; when every slot is referenced, more
        are allocated (correctness over memory), and kept.
    """

    def __init__(self, slot_bytes: int, soft_limit: int) -> None:
        self.slot_bytes = slot_bytes
        self.soft_limit = soft_limit
        self._entries: OrderedDict[Hashable, Entry] = OrderedDict()
        self._slots: list[_Slot] = []
        self._free: list[_Slot] = []
        self._lock = threading.Lock()
        self.uploads = 0  # statistics for benchmarks and tests

    def acquire(self, keys: Sequence[Hashable]) -> tuple[list[Entry], list[Entry]]:
        """Reference the entry of each (distinct) key; returns ``(entries, fresh)``.

        The caller must upload every entry of ``fresh`` (or :meth:`fail` it), and
        :meth:`release` all ``entries`` once its stream has synchronized.
        """
        entries = []
        fresh = []
        with self._lock:
            for key in keys:
                entry = self._entries.get(key)
                if entry is None:
                    entry = Entry(key, self._take_slot())
                    self._entries[key] = entry
                    fresh.append(entry)
                else:
                    self._entries.move_to_end(key)
                entry.refs += 1
                entries.append(entry)
            self.uploads += len(fresh)
        return entries, fresh

    def release(self, entries: Sequence[Entry]) -> None:
        """Drop the references taken by :meth:`acquire`."""
        with self._lock:
            for entry in entries:
                entry.refs -= 1
                if entry.failed and entry.refs == 0:
                    self._free.append(entry.slot)

    def fail(self, entry: Entry) -> None:
        """Forget an entry whose upload failed; its slot returns once unreferenced."""
        with self._lock:
            entry.failed = True
            if self._entries.get(entry.key) is entry:
                del self._entries[entry.key]

    def abandon(self, fresh: Sequence[Entry]) -> None:
        """Fail the entries of `fresh` (from :meth:`acquire`) that were never issued, or whose
        preparation failed.

        For a caller whose frame failed before it prepared all of them: left in the cache,
        every later frame that needs one would wait ``WAIT_LIMIT_S`` for it (or fail on it).
        """
        for entry in fresh:
            if not entry.issued.is_set() or entry.failed:
                self.fail(entry)
                entry.issued.set()

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def peek(self, key: Hashable) -> Entry:
        """The entry of `key`, neither referenced nor moved in the LRU order."""
        return self._entries[key]

    def has_room(self) -> bool:
        """Whether a new entry needs no slot beyond the soft limit."""
        with self._lock:
            if self._free or len(self._slots) < self.soft_limit:
                return True
            return any(entry.refs == 0 for entry in self._entries.values())

    def forget(self, keys: Sequence[Hashable]) -> None:
        """Drop unreferenced entries of `keys` (warm-up frames), freeing their slots."""
        with self._lock:
            for key in keys:
                entry = self._entries.get(key)
                if entry is not None and entry.refs == 0:
                    del self._entries[key]
                    self._free.append(entry.slot)

    def memory_bytes(self) -> int:
        """Device memory held by the slots."""
        return self.slot_bytes * len(self._slots)

    def _take_slot(self) -> _Slot:
        """A slot for a new entry: free, new under the limit, LRU-evicted, or new anyway."""
        if self._free:
            return self._free.pop()
        if len(self._slots) >= self.soft_limit:
            for key, entry in self._entries.items():  # oldest first
                if entry.refs == 0:
                    del self._entries[key]
                    return entry.slot
            thread_debug(
                logger, "avdenoise: every cached entry is in use; adding slot %d", len(self._slots)
            )
        slot = _Slot(self.slot_bytes)
        self._slots.append(slot)
        return slot


def default_slots(
    free_bytes: int, slot_bytes: int, window: int, num_inputs: int, gated: bool
) -> int:
    """Frames a backend keeps on the device, bounded by a quarter of the free device memory.

    Enough for 16 threads on consecutive frames: gated passes (BM3D) have wide windows (up to
    8r + 1 frames) read once per frame, so 16 frames beyond a window; the others a window and
    24 more. At least a window and two per input, whatever the memory.
    """
    spare = 16 if gated else window + 24
    wanted = num_inputs * (window + spare)
    floor = num_inputs * (window + 2)
    return max(floor, min(wanted, free_bytes // 4 // slot_bytes))


def wait_for(entries, stream_ptr: int, runtime) -> None:
    """Make a stream wait for the entries that another thread's stream uploads or computes.

    Entries some caller has seen complete, or queued on this very stream, need no wait.

    Raises
    ------
    CudaError
        When another thread's upload of an entry failed, or never came (``WAIT_LIMIT_S``).
    """
    for entry in entries:
        if entry.complete or entry.stream == stream_ptr:
            continue
        if not entry.issued.wait(WAIT_LIMIT_S):
            raise CudaError(
                f"avdenoise: waited {WAIT_LIMIT_S:.0f} s for {entry.key!r} from another thread"
            )
        if entry.failed:
            raise CudaError(
                f"avdenoise: preparing {entry.key!r} on the GPU failed in another thread"
            )
        runtime.streamWaitEvent(stream_ptr, entry.event_ptr, 0)
