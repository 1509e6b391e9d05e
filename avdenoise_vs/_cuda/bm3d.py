"""One BM3D pass on the GPU: its kernels, work buffers, caches and launch sequence.

Spatial BM3D (``radius = 0``) is three to five launches per frame on the calling thread's
stream (bm3d.cuh): load the frame into float planes, hard thresholding into int64
accumulators, finish into basic estimates, Wiener filtering, finish into the output buffer.

V-BM3D (``radius > 0``) follows ``_reference/vbm3d.py``: the groups of frame ``m``, matched
across its window ``W(m)``, feed every frame of ``W(m)``, so they are filtered once and kept
as a *sum entry* (the weighted sums and weights they add to each frame of ``W(m)``) in a
device cache that the ``2r + 1`` output frames share, whichever threads compute them. Basic
estimates (two stages) are cached likewise. One output frame therefore costs, in steady
state, one stage of one frame's groups per stage, as BM3DCUDA's ``VAggregate`` does on the CPU.

Cached entries are produced by the thread that first asks for them and waited on by the
others (an event per entry, as for uploaded frames). A frame first references everything it
needs from the top level down (sum entries, the basic estimates fresh entries need, the sums
those need), then produces its fresh entries from the bottom up, so it only ever waits for
entries of a lower level, which their owners produce without waiting on higher ones: no
deadlock.

The work buffers (float planes, int64 accumulators) are large, so they live in a small pool of
*workspaces* shared by the VapourSynth threads rather than one per thread: a frame holds one
workspace from its first launch until its stream has synchronized.

Notes
-----
Cost per reference block (warp): ``N = (2 bm_range + 1)^2 + 2r ps_num (2 ps_range + 1)^2``
block distances of 64 multiply-adds each, a warp-wide selection of the ``K`` nearest, then per
channel two 2-D transforms of ``K`` blocks (16 multiply-adds per sample), the Haar transform
along the group and ``2 * 64 K`` int64 atomic adds. There are ``ceil(H / step) ceil(W / step)``
reference blocks per frame and stage.
"""

from __future__ import annotations

import queue
import threading
from collections import Counter

import numpy as np

from .._environment import positive_int
from .._options import Distance, FrameLayout, PlaneOptions
from .._reference._bm3d_stages import TAU_WIENER, ht_match_threshold
from .._reference.backend import bm3d_sigmas
from ._bm3d_source import BM3D_WARPS, Bm3dSpec
from ._cache import FrameCache, wait_for
from ._calls import KernelArgs, cuda_calls

__all__ = ["Bm3dPass", "bm3d_args_dtype"]

_ALIGN = 128  # work-plane pitch, elements
_PIXEL_BLOCK = (32, 8, 1)  # threads of the per-pixel kernels
_STAGE_BLOCK = (32 * BM3D_WARPS, 1, 1)
_DEFAULT_SHARED_LIMIT = 48 * 1024
#: Workspaces per pass: frames of one pass on the GPU at once. Spatial frames are light and
#: many keep the GPU busy. A V-BM3D workspace holds 2r + 1 frames of float planes and int64
#: sums (480 MB at 1080p 4:4:4, r = 1); at r = 1 on YUV444 (H200, 16 threads, vspipe) two
#: stages ran at 93 / 110 / 120 fps with 2 / 3 / 4 workspaces and CuPy's calls, and at
#: 96 / 146 / 146 fps with the calls that keep the GIL; one stage at 253 fps with 2 and
#: CuPy's calls, 292 with 3 and the GIL kept (docs/BENCHMARKS.md).
DEFAULT_WORKSPACES = (4, 3)  # (spatial, temporal)
#: Largest plane side: block keys pack positions into 13 bits (bm3d.cuh, ``bm_key``).
MAX_PLANE_SIDE = (1 << 13) + 7


def bm3d_args_dtype(window: int) -> np.dtype:
    """Host image of ``struct Bm3dArgs`` in bm3d.cuh (8-byte fields only: no padding)."""
    i8, f8 = np.int64, np.float64
    tables = ("noisy_at", "pilot_at", "acc_slot", "parts", "part_slot")
    return np.dtype(
        [("src", i8, (2, window))]
        + [(name, i8, (window,)) for name in tables]
        + [(name, i8) for name in ("nparts", "num", "den", "dst", "out")]
        + [("plane_off", i8, (3,))]
        + [(name, i8) for name in ("width", "height", "src_pitch", "pitch")]
        + [(name, i8) for name in ("refs_x", "refs_y", "step", "center", "to_pilot", "inputs")]
        + [("sigma", f8, (3,))]
        + [(name, f8) for name in ("lambda_ht", "threshold", "scale", "peak")]
    )


def _reference_count(length: int, step: int) -> int:
    """Reference positions along an axis of `length` pixels (the reference's grid)."""
    last = length - 8
    return -(-last // step) + 1


class _Workspace:
    """One frame's work buffers: float planes of the window (noisy, pilot), accumulators;
    for spatial BM3D also the argument record of each launch, built once."""

    __slots__ = ("memory", "noisy", "pilot", "num", "den", "spatial")


class _Lease:
    """What one frame of a pass holds until its stream has synchronized."""

    __slots__ = ("workspace", "held", "fresh", "entries")

    def __init__(self, workspace: _Workspace) -> None:
        self.workspace = workspace
        self.held = []  # (cache, entries) as acquired
        self.fresh = []  # (cache, entries) this frame must produce
        self.entries = {}  # key -> entry: sums by (stage, m), basic estimates by k


class _Window:
    """Frame numbers around the output frame n, as the bridge handed them over."""

    def __init__(self, numbers: tuple, slots: list, ref_slots: list, radius: int) -> None:
        self.first = numbers[len(numbers) // 2] - len(numbers) // 2
        self.numbers = numbers
        self.slot = dict(zip(numbers, slots, strict=True))
        self.ref_slot = dict(zip(numbers, ref_slots, strict=True))
        self.radius = radius

    def around(self, k: int) -> list[int]:
        """Frame numbers of ``W(k)``."""
        return [self.numbers[k + o - self.first] for o in range(-self.radius, self.radius + 1)]


class Bm3dPass:
    """Everything needed to run one BM3D :class:`PlaneOptions` pass, built once per backend.

    Parameters
    ----------
    options : PlaneOptions
    layout : FrameLayout
    offsets : dict of int to int
        Byte offset of each plane inside a frame slot and inside an output buffer.
    pitch : dict of int to int
        Row pitch in bytes of each plane (the same in slots and output buffers).
    workspaces : int, optional
        Most frames of this pass on the GPU at once; default ``DEFAULT_WORKSPACES``.
    """

    def __init__(
        self,
        options: PlaneOptions,
        layout: FrameLayout,
        offsets: dict[int, int],
        pitch: dict[int, int],
        workspaces: int | None = None,
    ) -> None:
        self.options = options
        planes = options.planes
        height, width = layout.plane_shape(planes[0])
        self.spec = Bm3dSpec(
            window=2 * options.radius + 1,
            channels=len(planes),
            joint=options.distance in (Distance.YUV, Distance.RGB),
            rgb=options.distance is Distance.RGB,
            dtype=layout.dtype.name,
            bm_range=options.bm_range,
            ps_num=options.ps_num,
            ps_range=options.ps_range,
        )
        self.window = self.spec.window
        self.run_hard = not options.has_ref
        self.run_wiener = options.stages == 2 or options.has_ref
        channels = self.spec.channels
        work_pitch = -(-width // _ALIGN) * _ALIGN
        self._frame_floats = channels * height * work_pitch  # one frame's planes
        self._frame_bytes = 4 * self._frame_floats
        self._acc_bytes = 8 * self.window * self._frame_floats
        self.workspace_bytes = 2 * self.window * self._frame_bytes + 2 * self._acc_bytes
        self._limit = (
            workspaces
            or positive_int("AVDENOISE_BM3D_WORKSPACES")
            or DEFAULT_WORKSPACES[self.window > 1]
        )
        self._pool: queue.SimpleQueue[_Workspace] = queue.SimpleQueue()
        self._created = 0
        self._lock = threading.Lock()
        self._kernels = None
        self._sums = self._basics = None  # V-BM3D caches, made on first use
        self._produced: Counter[str] = Counter()  # V-BM3D entries made, by kind

        itemsize = layout.dtype.itemsize
        refs = (_reference_count(width, options.block_step),
                _reference_count(height, options.block_step))  # fmt: skip
        template = np.zeros(1, dtype=bm3d_args_dtype(self.window))
        template["plane_off"][0, : len(planes)] = [offsets[p] // itemsize for p in planes]
        template["width"], template["height"] = width, height
        template["src_pitch"] = pitch[planes[0]] // itemsize
        template["pitch"] = work_pitch
        template["refs_x"], template["refs_y"] = refs
        template["step"] = options.block_step
        template["center"] = options.radius
        sigmas = bm3d_sigmas(options)
        template["sigma"][0, :channels] = sigmas
        template["lambda_ht"] = options.lambda_ht
        template["scale"] = 255.0 / layout.peak
        template["peak"] = layout.peak
        template["inputs"] = 1 + options.has_ref
        self._template = template
        self._pixel_grid = (-(-width // _PIXEL_BLOCK[0]), -(-height // _PIXEL_BLOCK[1]))
        self._load_grid = (*self._pixel_grid, self.window * (1 + options.has_ref))
        separate = 1 if self.spec.joint else channels
        self._stage_grid = (-(-refs[0] * refs[1] // BM3D_WARPS), 1, separate)
        self._thresholds = {
            "bm3d_hard": ht_match_threshold(sigmas[0]) * options.mismatch_scale,
            "bm3d_wiener": TAU_WIENER * options.mismatch_scale,
        }
        self._stage_shared = {
            "bm3d_hard": self.spec.shared_bytes(False),
            "bm3d_wiener": self.spec.shared_bytes(True),
        }

    # -- per frame --------------------------------------------------------------------------

    def new_args(self, out_ptr: int) -> int:
        """Per-thread launch state: the thread's output buffer."""
        return out_ptr

    def launch(self, out_ptr: int, numbers: tuple, values: list, guides: list, state) -> _Lease:
        """Queue one frame's work on the thread's stream; returns what to :meth:`release`
        once the stream has synchronized."""
        self._kernels or self._load_kernels()
        lease = _Lease(self._acquire())
        try:
            if self.window == 1:
                self._spatial(lease.workspace, out_ptr, values[0], guides[0], state.stream_ptr)
            else:
                window = _Window(numbers, values, guides, self.options.radius)
                self._temporal(lease, window, out_ptr, state)
        except BaseException:
            for cache, fresh in lease.fresh:  # none may wait for what this frame never made
                cache.abandon(fresh)
            self.release(lease)
            raise
        return lease

    def release(self, lease: _Lease) -> None:
        """Give back what a frame held (its stream has synchronized)."""
        for cache, entries in lease.held:
            for entry in entries:
                if entry.issued.is_set() and not entry.failed:
                    entry.complete = True
            cache.release(entries)
        self._pool.put(lease.workspace)

    def forget(self, numbers) -> None:
        """Drop the cached sums and basic estimates of frames `numbers` (warm-up frames)."""
        if self._sums is not None:
            self._sums.forget([(stage, f) for stage in ("hard", "wiener") for f in numbers])
            self._basics.forget(list(numbers))

    def produced(self) -> dict[str, int]:
        """V-BM3D entries made so far by kind ("hard", "wiener" sums, "basic" estimates).

        Once per frame and kind when nothing is evicted before its last use; more means the
        caches are too small for the order the frames come in (benchmarks report it).
        """
        with self._lock:
            return dict(self._produced)

    def memory_bytes(self) -> int:
        """Device memory of the workspaces and cached entries created so far."""
        caches = [c for c in (self._sums, self._basics) if c is not None]
        return self._created * self.workspace_bytes + sum(c.memory_bytes() for c in caches)

    # -- spatial BM3D -----------------------------------------------------------------------

    def _spatial(self, ws: _Workspace, out_ptr: int, slot: int, ref_slot: int, stream) -> None:
        """One frame, radius 0: load, stage(s), finish; accumulators in the workspace. Only
        the frame's slots and output buffer change from frame to frame."""
        records = ws.spatial
        records["load"].record["src"][0, :, 0] = slot, ref_slot
        records["out"].record["out"] = out_ptr
        self._run("bm3d_load", records["load"], stream)
        if self.run_hard:
            self._run("bm3d_hard", records["hard"], stream)
            if self.run_wiener:
                self._run("bm3d_finish", records["basic"], stream)
        if self.run_wiener:
            self._run("bm3d_wiener", records["wiener"], stream)
        self._run("bm3d_finish", records["out"], stream)

    def _spatial_records(self, ws: _Workspace) -> dict[str, KernelArgs]:
        """The argument records of a spatial frame, by launch (see :meth:`_spatial`)."""
        frame = dict(noisy_at=[ws.noisy], pilot_at=[ws.pilot])
        records = {
            "load": self._record(ws, **frame),
            "hard": self._stage_record(ws, "bm3d_hard", **frame),
            "basic": self._record(ws, to_pilot=1, dst=ws.pilot),
            "wiener": self._stage_record(ws, "bm3d_wiener", **frame),
            "out": self._record(ws),
        }
        return {launch: KernelArgs(record) for launch, record in records.items()}

    # -- V-BM3D ----------------------------------------------------------------------------

    def _temporal(self, lease: _Lease, window: _Window, out_ptr: int, state) -> None:
        """One frame, radius > 0: reference the sums and basic estimates it needs, top level
        first, produce the fresh ones bottom up, then add up the sums of W(n)."""
        sums, basics = self._caches()
        n = window.numbers[len(window.numbers) // 2]
        top = "wiener" if self.run_wiener else "hard"
        wanted = sorted(set(window.around(n)))
        top_entries, top_fresh = self._hold(lease, sums, [(top, m) for m in wanted])
        basic_fresh = hard_fresh = []
        if top == "wiener" and self.run_hard:
            needed = sorted({k for e in top_fresh for k in window.around(e.key[1])})
            _, basic_fresh = self._hold(lease, basics, needed)
            needed = sorted({m for e in basic_fresh for m in window.around(e.key)})
            _, hard_fresh = self._hold(lease, sums, [("hard", m) for m in needed])
        stream_ptr = state.stream_ptr
        for cache, fresh, make in (
            (sums, hard_fresh, self._sum_entry),
            (basics, basic_fresh, self._basic_entry),
            (sums, top_fresh, self._sum_entry),
        ):
            for entry in fresh:
                self._produce(cache, entry, make, lease, window, state)
        wait_for(top_entries, stream_ptr, self._calls)
        record = self._record(lease.workspace, out=out_ptr)
        self._set_parts(record, top_entries, n, window)
        self._run("bm3d_finish", KernelArgs(record), stream_ptr)

    def _sum_entry(self, lease: _Lease, window: _Window, entry, state) -> None:
        """Filter the groups of frame m = entry.key[1] once: load W(m), run the stage, export
        its sums to the entry."""
        stage, m = entry.key
        ws, stream = lease.workspace, state.stream_ptr
        numbers = window.around(m)
        noisy = [ws.noisy + t * self._frame_bytes for t in range(self.window)]
        pilot = [ws.pilot + t * self._frame_bytes for t in range(self.window)]
        has_ref = self.options.has_ref
        load = self._record(ws, noisy_at=noisy, pilot_at=pilot,
                            src=[[window.slot[f] for f in numbers],
                                 [window.ref_slot[f] for f in numbers]])  # fmt: skip
        self._run("bm3d_load", KernelArgs(load), stream)
        if stage == "wiener" and not has_ref:
            basics = {f: lease.entries[f] for f in numbers}
            wait_for(list(basics.values()), stream, self._calls)
            pilot = [basics[f].slot.ptr for f in numbers]
        # Window frames repeated at the clip ends share one accumulator frame.
        slots = [numbers.index(f) for f in numbers]
        name = "bm3d_" + stage
        record = self._stage_record(ws, name, noisy_at=noisy, pilot_at=pilot, acc_slot=slots)
        self._run(name, KernelArgs(record), stream)
        export = self._record(ws, dst=entry.slot.ptr)
        self._run("bm3d_export", KernelArgs(export), stream, frames=self.window)

    def _basic_entry(self, lease: _Lease, window: _Window, entry, state) -> None:
        """Basic estimate of frame k = entry.key: the hard-thresholding sums of W(k)."""
        k = entry.key
        wanted = sorted(set(window.around(k)))
        parts = [lease.entries["hard", m] for m in wanted]
        wait_for(parts, state.stream_ptr, self._calls)
        record = self._record(lease.workspace, to_pilot=1, dst=entry.slot.ptr)
        self._set_parts(record, parts, k, window)
        self._run("bm3d_finish", KernelArgs(record), state.stream_ptr)

    def _set_parts(self, record, entries, k: int, window: _Window) -> None:
        """Point bm3d_finish at the sum entries of W(k), each at its frame for k."""
        record["nparts"] = len(entries)
        for index, entry in enumerate(entries):
            record["parts"][0, index] = entry.slot.ptr
            record["part_slot"][0, index] = window.around(entry.key[1]).index(k)

    # -- internals ------------------------------------------------------------------------

    def _hold(self, lease: _Lease, cache, keys: list) -> tuple[list, list]:
        entries, fresh = cache.acquire(keys)
        lease.held.append((cache, entries))
        lease.fresh.append((cache, fresh))
        lease.entries.update((entry.key, entry) for entry in entries)
        return entries, fresh

    def _produce(self, cache, entry, make, lease: _Lease, window: _Window, state) -> None:
        """Queue an entry's work (``make``), then publish it: event, stream, issued."""
        with self._lock:
            kind = entry.key[0] if isinstance(entry.key, tuple) else "basic"
            self._produced[kind] += 1
        try:
            make(lease, window, entry, state)
            self._calls.eventRecord(entry.slot.event_ptr, state.stream_ptr)
            entry.stream = state.stream_ptr
        except BaseException:
            cache.fail(entry)
            raise
        finally:
            entry.issued.set()

    def _record(self, ws: _Workspace, **fields) -> np.ndarray:
        """An argument record: the template, the workspace's accumulators, `fields`."""
        record = self._template.copy()
        record["num"], record["den"] = ws.num, ws.den
        for name, value in fields.items():
            if name in ("noisy_at", "pilot_at", "acc_slot"):
                record[name][0, : len(value)] = value
            elif name == "src":
                for index, row in enumerate(value):
                    record["src"][0, index, : len(row)] = row
            else:
                record[name] = value
        return record

    def _stage_record(self, ws: _Workspace, name: str, **fields) -> np.ndarray:
        """The record of a stage kernel: :meth:`_record` with the stage's match threshold."""
        return self._record(ws, threshold=self._thresholds[name], **fields)

    def _run(self, name: str, args: KernelArgs, stream: int, frames: int = 1) -> None:
        """Launch kernel `name` on `stream`; per-pixel kernels other than load cover `frames`
        frames."""
        shared = self._stage_shared.get(name)
        if shared is not None:
            self._calls.launch(
                self._kernels[name], self._stage_grid, _STAGE_BLOCK, shared, stream, args
            )
            return
        grid = self._load_grid if name == "bm3d_load" else (*self._pixel_grid, frames)
        self._calls.launch(self._kernels[name], grid, _PIXEL_BLOCK, 0, stream, args)

    def _caches(self):
        """The V-BM3D caches: sum entries (both stages) and basic estimates."""
        if self._sums is None:
            with self._lock:
                if self._sums is None:
                    # Enough for 16 threads on consecutive frames; more are added when needed.
                    # Sum entries are large (2 (2r + 1) frames of floats each): their number is
                    # most of the memory V-BM3D takes, hence the switch, for comparisons.
                    kept = positive_int("AVDENOISE_BM3D_CACHE") or self.window + 16
                    self._basics = FrameCache(self._frame_bytes, 4 * self.window + 16)
                    self._sums = FrameCache(2 * self.window * self._frame_bytes, kept)
        return self._sums, self._basics

    def _acquire(self) -> _Workspace:
        try:
            return self._pool.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            create = self._created < self._limit
            if create:
                self._created += 1
        if create:
            try:
                return self._new_workspace()
            except BaseException:
                with self._lock:
                    self._created -= 1
                raise
        return self._pool.get()  # blocks without the GIL until a frame finishes

    def _new_workspace(self) -> _Workspace:
        """Allocate work buffers (accumulators zeroed: each finish or export leaves them zero)."""
        ws = _Workspace()
        ws.memory, base = self._device_buffer(self.workspace_bytes, zeroed=2 * self._acc_bytes)
        ws.num = base
        ws.den = ws.num + self._acc_bytes
        ws.noisy = ws.den + self._acc_bytes
        ws.pilot = ws.noisy + self.window * self._frame_bytes
        ws.spatial = self._spatial_records(ws) if self.window == 1 else None
        return ws

    @staticmethod
    def _device_buffer(nbytes: int, zeroed: int):
        """``(memory, address)`` of `nbytes` of device memory whose first `zeroed` are 0."""
        import cupy

        memory = cupy.cuda.alloc(nbytes)
        cupy.cuda.runtime.memset(memory.ptr, 0, zeroed)
        return memory, memory.ptr

    def prepare(self) -> None:
        """Compile (or load from CuPy's cache) the kernels now, on the current device."""
        self._load_kernels()

    def _load_kernels(self) -> dict[str, int]:
        """Compile (or load) the kernels; returns their ``CUfunction`` handles by name."""
        from ._kernels import get_bm3d_kernels

        with self._lock:
            if self._kernels is None:
                self._calls = cuda_calls()
                kernels = get_bm3d_kernels(self.spec)  # memoized: the modules stay loaded
                for name, shared in self._stage_shared.items():
                    if shared > _DEFAULT_SHARED_LIMIT:
                        kernels[name].max_dynamic_shared_size_bytes = shared
                self._kernels = {name: kernel.kernel.ptr for name, kernel in kernels.items()}
        return self._kernels
