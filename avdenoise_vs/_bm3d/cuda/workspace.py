"""Device memory of a BM3D pass: work-plane sizes, workspaces and the leases frames hold.

The work buffers are large, so they live in a small pool of *workspaces*; the backend's gate
(``_cuda/gate.py``) lets no more frames onto the GPU at once than there are workspaces
(``frames_in_flight``), lowest frame number first, so that frames on the GPU, not
VapourSynth's threads, set the memory, and the frames there are neighbours that share work.
A frame holds its workspace, and the cache entries and jobs it uses, in a :class:`Lease`
until its stream has synchronized.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "DEFAULT_WORKSPACES", "SPATIAL_FRAMES_IN_FLIGHT", "Lease", "WorkSizes", "Workspace",
    "WorkspacePool",
]  # fmt: skip

_ALIGN = 128  # work-plane pitch, elements
#: Workspaces per pass. V-BM3D's are also how many of its frames the backend's gate lets onto
#: the GPU at once: a V-BM3D workspace holds the float planes of the 2r + 1 frames a job reads
#: (75 MB at 1080p 4:4:4, r = 1). At r = 1 on YUV444 (H200, 16 threads, vspipe, 2026-11-30),
#: two stages ran at 96 / 146 / 146 fps with 2 / 3 / 4 workspaces in an earlier design of the
#: sums; this one, with 3: one stage 430 fps, two stages 170. A spatial workspace is busy only
#: while its frame's kernels run (below), so two keep the GPU fed: r0 luma with 1 / 2 / 3
#: workspaces ran at 2108 / 2133 / 2200 fps (530 / 586 / 642 MiB; H100, R81, 2026-12-07,
#: ``bench_bm3d.py --seconds 2``), and 4 gave no more at 698 MiB.
DEFAULT_WORKSPACES = (2, 3)  # (spatial, temporal)
#: Frames of a spatial pass that the gate lets onto the GPU at once. A spatial workspace goes
#: back to its pool as soon as its frame's kernels are queued, with an event recorded after
#: them that the next frame's stream waits on, so it is busy only while those kernels run,
#: not while the frame's output crosses the bus and its thread wakes: more frames than
#: workspaces keep the GPU fed, each holding only an output buffer beyond them. With 4
#: workspaces and 4 frames in flight r0 luma ran at 1214-1730 fps; with 8 frames, 2016-2245.
SPATIAL_FRAMES_IN_FLIGHT = 8


@dataclass(frozen=True)
class WorkSizes:
    """Sizes of one pass's work buffers.

    Parameters
    ----------
    pitch : int
        Row pitch of the float work planes, elements (a multiple of 128).
    frame_bytes : int
        One frame's float planes.
    acc_bytes : int
        One frame's accumulator: numerators, then denominators, int64.
    """

    pitch: int
    frame_bytes: int
    acc_bytes: int

    @classmethod
    def of(cls, channels: int, height: int, width: int) -> WorkSizes:
        """The sizes for `channels` planes of ``height x width``."""
        pitch = -(-width // _ALIGN) * _ALIGN
        floats = channels * height * pitch
        return cls(pitch, 4 * floats, 2 * 8 * floats)


class Workspace:
    """One frame's work buffers: float planes of a job's window (noisy; pilot when the ref clip
    is the pilot or a spatial pass has a Wiener stage, else 0); for spatial BM3D also its
    accumulator and the argument record of each launch, built once, and the event recorded
    after the last frame's kernels that used it (0 before any: a spatial workspace is handed
    on on the GPU's timeline)."""

    __slots__ = ("memory", "noisy", "pilot", "acc", "spatial", "free_event")


class Lease:
    """What one frame of a pass holds until its stream has synchronized."""

    __slots__ = ("workspace", "held", "fresh", "jobs")

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.held = []  # (cache, entries) as acquired
        self.fresh = []  # (cache, entries) this frame must make
        self.jobs = []  # (job, its accumulators) this frame claimed

    def settle(self) -> None:
        """Mark what the frame made complete (its stream has synchronized) and give back its
        cache entries."""
        for job, _ in self.jobs:
            job.complete = job.issued.is_set() and not job.failed
        for cache, entries in self.held:
            for entry in entries:
                if entry.issued.is_set() and not entry.failed:
                    entry.complete = True
            cache.release(entries)


class WorkspacePool:
    """At most `limit` workspaces, created on demand and reused.

    Parameters
    ----------
    sizes : WorkSizes
    planes : tuple of int
        Frames of noisy planes and of pilot planes in a workspace.
    spatial : bool
        Spatial BM3D: a workspace also holds its accumulator, zeroed once (each finish leaves
        it zero), in front of its planes.
    limit : int
        Most workspaces.
    equip : callable
        Called with each new workspace (the schedule's records of it).
    """

    def __init__(
        self,
        sizes: WorkSizes,
        planes: tuple[int, int],
        spatial: bool,
        limit: int,
        equip: Callable[[Workspace], None],
    ) -> None:
        self.sizes = sizes
        self.planes = planes
        self.spatial = spatial
        self.limit = limit
        self.workspace_bytes = sum(planes) * sizes.frame_bytes + (sizes.acc_bytes if spatial else 0)
        self.created = 0
        self._equip = equip
        self._free: queue.SimpleQueue[Workspace] = queue.SimpleQueue()
        self._lock = threading.Lock()

    def acquire(self) -> Workspace:
        """A free workspace, a new one while fewer than `limit` exist, else the next given back."""
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            create = self.created < self.limit
            if create:
                self.created += 1
        if create:
            try:
                return self._new_workspace()
            except BaseException:
                with self._lock:
                    self.created -= 1
                raise
        return self._free.get()  # blocks without the GIL until a frame finishes

    def put(self, workspace: Workspace) -> None:
        """Give back a workspace acquired before."""
        self._free.put(workspace)

    def memory_bytes(self) -> int:
        """Device memory of the workspaces created so far."""
        return self.created * self.workspace_bytes

    def _new_workspace(self) -> Workspace:
        """Allocate work buffers (a spatial accumulator zeroed: each finish leaves it zero)."""
        ws = Workspace()
        acc_bytes = self.sizes.acc_bytes if self.spatial else 0
        ws.memory, base = self._device_buffer(self.workspace_bytes, zeroed=acc_bytes)
        ws.acc = base if self.spatial else 0
        ws.noisy = base + acc_bytes
        noisy, pilots = self.planes
        ws.pilot = ws.noisy + noisy * self.sizes.frame_bytes if pilots else 0
        ws.spatial = None
        ws.free_event = 0
        self._equip(ws)
        return ws

    @staticmethod
    def _device_buffer(nbytes: int, zeroed: int):
        """``(memory, address)`` of `nbytes` of device memory whose first `zeroed` are 0."""
        import cupy

        memory = cupy.cuda.alloc(nbytes)
        if zeroed:
            cupy.cuda.runtime.memset(memory.ptr, 0, zeroed)
        return memory, memory.ptr
