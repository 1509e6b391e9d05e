"""The CUDA backend: the bridge's frame protocol on the GPU through CuPy.

Importing this module never imports CuPy; :class:`CudaBackend` does, and raises
:class:`~avdenoise_vs._errors.BackendUnavailable` when CuPy or a device is missing.

Per frame the bridge calls :meth:`CudaBackend.process` from one of VapourSynth's threads, with
the GIL serialising them, so the GIL-held time per frame bounds the frame rate. A frame
therefore costs only a handful of calls; those that wait (copies, synchronisation) release
the GIL while they do:

1. for each window frame not yet on the device (in steady state one per input), its planes
   go into a cached device slot, then one ``cudaEventRecord``;
2. a ``cudaStreamWaitEvent`` for cached frames uploaded by another thread's stream and not
   yet seen complete;
3. one fused kernel launch per pass, its arguments one NumPy record per thread and pass
   (launches and event calls only queue work, so they keep the GIL: see ``_calls.py``);
4. the output comes back into the bridge's frame, then ``cudaStreamSynchronize``.

Staged frames leave the waiting to the bridge: :meth:`CudaBackend.bridge_process` queues the
download and returns the thread's *host step* (bridge.c's contract), and the bridge, with the
GIL released, waits on ``cuStreamSynchronize``, copies the output planes out of the staging
buffer and, for one-frame windows, copies the thread's next frame into its upload buffer
before that frame takes the GIL. Such a frame takes the GIL once instead of four times; the
slots it read are released by the thread's next frame (:meth:`_release_pending`). On the
H200, NLM Y d=0 under vspipe with 16 threads ran at 5141 and 4975 fps this way against 3500
and 3310 with Python's copies, interleaved in one call (docs/BENCHMARKS.md, session 6).

Frames cross the bus one of two ways (``transfer``). "direct": ``cudaMemcpy2DAsync`` straight
from and to the frames' pageable memory, one call per plane. "staged": NumPy copies (which
release the GIL, so threads copy in parallel) into per-thread page-locked buffers laid out
like a slot, then one asynchronous copy per frame, queued with the GIL kept (``_calls.py``),
and the same backwards. The driver serialises pageable copies across threads, so staging wins
for large frames, while its extra host copies cost more than they save for small ones.
Measured on an H200 with 16 threads (scripts/gpu_check.py, backend alone), frames per second
direct / staged: 1080p 8-bit luma 3224 / 2702, 1080p 4:2:0 8-bit all planes 1621 / 1779,
1080p 16-bit luma 1962 / 2576, 2160p 8-bit luma 759 / 1016. Under vspipe, 1080p 8-bit luma
with a one-frame window (NLM d=0) ran faster staged in every A/B run of session 5 (median
2735 fps in six runs against 2390 direct in four), and with d=1 slower (1825 against
2421-2593). "auto" (the default) therefore stages frames of 3 MiB or more, and frames of
one-frame windows.

Measured GIL-held time per frame, single-threaded: about 90-150 us (an upper bound, counting
the kernel launch as held), against 250 us of kernel time for 1080p luma with d=1, a=2, s=4.
No CuPy array operation and no allocation happen per frame: each thread gets its own
non-blocking stream, output buffer, staging buffers and argument records on its first frames.
Passes with large work buffers (BM3D) run only a few frames on the GPU at once
(``frames_in_flight``): threads upload and copy out in parallel, but enter the GPU part through
a :class:`~._gate.GpuGate`, in frame order, which lends each an output buffer for that part,
so that GPU memory follows the frames on the GPU rather than VapourSynth's thread count; they
wait for the GPU asleep (see ``AVDENOISE_CUDA_SYNC``).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._environment import debug_switch, default, switch
from .._errors import BackendUnavailable
from .._log import thread_debug
from .._options import FrameLayout, PlaneOptions
from ._cache import FrameCache, wait_for
from ._calls import cuda_calls, set_sync_mode
from ._gate import GpuGate

__all__ = ["CudaBackend"]

logger = logging.getLogger(__name__)

_ALIGN = 512  # plane pitch and offset alignment in device buffers, bytes
_WARM_BASE = 1 << 20  # warm-up frames are cached under input numbers no clip uses
_WARM_FRAME = 1 << 40  # ... and frame numbers
_H2D = 1  # cudaMemcpyHostToDevice
_D2H = 2  # cudaMemcpyDeviceToHost
_TRANSFERS = ("auto", "staged", "direct", "staged-upload", "staged-download")
#: "auto" stages frames (all planes a pass reads, device layout) of at least this many bytes,
#: and the frames of one-frame windows (module notes).
_STAGE_MIN_BYTES = 3 << 20
#: Devices that backends of this process run on (see ``bridge_process``).
_DEVICES_IN_USE: set[int] = set()


def _align(value: int) -> int:
    return -(-value // _ALIGN) * _ALIGN


class _ThreadState:
    """What one VapourSynth thread reuses for every frame: stream, buffers, arguments (the
    output buffer and the arguments come from the gate instead when the passes have one)."""

    __slots__ = ("stream", "stream_ptr", "out", "out_ptr", "args", "staging", "down", "done",
                 "host_step", "pending", "__weakref__")  # fmt: skip


class _Pinned:
    """A page-locked host buffer laid out like a device slot, with a NumPy view per plane."""

    __slots__ = ("memory", "ptr", "views")

    def __init__(self, cupy, nbytes: int, planes: dict, dtype: np.dtype) -> None:
        self.memory = cupy.cuda.alloc_pinned_memory(nbytes)
        self.ptr = self.memory.ptr
        raw = np.frombuffer(self.memory, dtype=np.uint8, count=nbytes)
        self.views = {
            plane: np.ndarray(
                shape, dtype, buffer=raw, offset=offset, strides=(pitch, dtype.itemsize)
            )
            for plane, (offset, pitch, shape) in planes.items()
        }


def _new_pass(options: PlaneOptions, layout, offsets, pitches, shared_limit: int, device_id):
    """The GPU pass object of one :class:`PlaneOptions`: NLM or BM3D.

    Raises BackendUnavailable when the device lacks the shared memory the pass needs.
    """
    if options.algorithm == "bm3d":
        from .bm3d import MAX_PLANE_SIDE, Bm3dPass

        npass = Bm3dPass(options, layout, offsets, pitches)
        if max(layout.width, layout.height) > MAX_PLANE_SIDE:
            raise BackendUnavailable(f"BM3D planes are at most {MAX_PLANE_SIDE} pixels a side")
        needed = npass.spec.shared_bytes(npass.run_wiener)
        setting = f"bm_range={options.bm_range} with radius={options.radius}"
    else:
        from .nlm import NlmPass, choose_tile_height

        probe = NlmPass(options, layout, offsets, offsets, pitches, 32)
        tile_height = choose_tile_height(probe.spec, shared_limit)
        if tile_height is not None:
            return NlmPass(options, layout, offsets, offsets, pitches, tile_height)
        npass, needed = None, shared_limit + 1
        setting = f"search_radius={options.search_radius} with patch_radius={options.patch_radius}"
    if needed > shared_limit:
        raise BackendUnavailable(
            f"{setting} needs more shared memory per block than device {device_id} has "
            f"({shared_limit} bytes)"
        )
    return npass


class CudaBackend:
    """Denoise frames with the NLM and BM3D kernels on one CUDA device.

    Parameters
    ----------
    passes : tuple of PlaneOptions
        The passes to run, in order; each writes its own planes.
    layout : FrameLayout
        Layout of the clip (and of ``ref``).
    device_index : int or None
        CUDA device number; None for the current device.
    cache_slots : int, optional
        Frames kept on the device (soft limit, per backend). Default: enough for 16 threads
        on consecutive frames, bounded by a quarter of the free device memory.
    transfer : {"auto", "staged", "direct", "staged-upload", "staged-download"}
        How frames cross the bus: through per-thread page-locked buffers, straight from and
        to the frames' pageable memory, or staged in one direction only (for benchmarks).
        "auto" stages frames of 3 MiB or more, and those of one-frame windows (see the module
        notes), unless ``AVDENOISE_DEBUG``'s ``transfer`` key names one of the others.

    Raises
    ------
    BackendUnavailable
        Without CuPy, without a CUDA device, or when a pass needs more shared memory per
        block than the device has.
    """

    name = "cuda"

    def __init__(
        self,
        passes: tuple[PlaneOptions, ...],
        layout: FrameLayout,
        device_index: int | None = None,
        *,
        cache_slots: int | None = None,
        transfer: str = "auto",
    ) -> None:
        if transfer == "auto":  # the environment may force one way, for benchmarks
            transfer = debug_switch("transfer")
        if transfer not in _TRANSFERS:
            raise ValueError(f"transfer must be one of {_TRANSFERS}, got {transfer!r}")
        # One hardware queue unless the user chose: contexts then start faster when an Av1an
        # fleet starts them all at once (see _environment.py). The driver reads it when the
        # context is created, so before CuPy first touches the device; a process whose
        # context already exists (another plugin's) keeps its setting.
        connections = "CUDA_DEVICE_MAX_CONNECTIONS"
        os.environ.setdefault(connections, default(connections))
        try:
            import cupy
        except Exception as error:  # ImportError, or CUDA libraries that fail to load
            raise BackendUnavailable(f"CuPy cannot be imported ({error})") from error
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError as error:
            raise BackendUnavailable(f"no usable CUDA driver ({error})") from error
        if count == 0:
            raise BackendUnavailable("no CUDA device found")
        device_id = cupy.cuda.runtime.getDevice() if device_index is None else device_index
        if not 0 <= device_id < count:
            raise BackendUnavailable(f"there is no CUDA device {device_id} ({count} found)")

        sync = switch("AVDENOISE_CUDA_SYNC")
        set_sync_mode(device_id, sync)  # before the context starts
        self._runtime = cupy.cuda.runtime
        self._calls = cuda_calls()  # launches and event calls that keep the GIL
        self._cupy = cupy
        self.passes = passes
        self.layout = layout
        self.device_id = device_id
        _DEVICES_IN_USE.add(device_id)
        self._num_inputs = 2 if any(p.has_ref for p in passes) else 1
        self._window = 2 * max(options.window_radius for options in passes) + 1
        itemsize = layout.dtype.itemsize

        # Planes read (slots) and written (output buffers): the same set, one layout for both.
        planes = sorted({plane for options in passes for plane in options.planes})
        self._geometry = {}  # plane -> (byte offset, pitch, row bytes, rows)
        offset = 0
        for plane in planes:
            height, width = layout.plane_shape(plane)
            pitch = _align(width * itemsize)
            self._geometry[plane] = (offset, pitch, width * itemsize, height)
            offset += _align(pitch * height)
        self._buffer_bytes = max(offset, _ALIGN)
        if transfer == "auto":
            large = self._buffer_bytes >= _STAGE_MIN_BYTES
            transfer = "staged" if large or self._window == 1 else "direct"
        self.transfer = transfer
        self._stage_up = transfer in ("staged", "staged-upload")
        self._stage_down = transfer in ("staged", "staged-download")
        self._dtype = layout.dtype
        # plane -> (byte offset, pitch, (rows, width)), for NumPy views of staging buffers
        self._pinned_planes = {
            p: (g[0], g[1], layout.plane_shape(p)) for p, g in self._geometry.items()
        }
        self._copy = np.copyto  # releases the GIL for large arrays; a seam for benchmarks
        # Staged frames: the bridge copies them and waits for the stream without the GIL,
        # where the driver's wait can be handed to it (see _new_host_step).
        self._bridge_copies = (
            self._stage_down
            and debug_switch("host_copies") == "bridge"
            and self._calls.synchronize_address is not None
        )
        offsets = {p: g[0] for p, g in self._geometry.items()}
        pitches = {p: g[1] for p, g in self._geometry.items()}

        with cupy.cuda.Device(device_id):
            runtime = cupy.cuda.runtime
            shared_limit = runtime.deviceGetAttribute(
                runtime.cudaDevAttrMaxSharedMemoryPerBlockOptin, device_id
            )
            self._passes = [
                _new_pass(options, layout, offsets, pitches, shared_limit, device_id)
                for options in passes
            ]
            # Passes with large work buffers (BM3D) run a few frames on the GPU at a time, in
            # frame order, each with an output buffer lent for that part (see _gate.py).
            limits = [getattr(p, "frames_in_flight", None) for p in self._passes]
            gated = all(limits)
            self._gate = GpuGate(min(limits), self._new_out) if gated else None
            # Those frames wait for the GPU asleep rather than spinning, unless the user chose
            # a wait mode: with the whole context set to block, V-BM3D at radius 1 ran 331 fps
            # against 249 spinning; sleeping before the download alone, 119 against 106 in a
            # later build (docs/BENCHMARKS.md, session 4).
            self._sleep_wait = gated and sync == "auto"
            if cache_slots is None:
                free, _ = cupy.cuda.runtime.memGetInfo()
                # BM3D windows are wide (up to 8r + 1 frames) but read once per frame.
                spare = 16 if gated else self._window + 24
                wanted = self._num_inputs * (self._window + spare)
                floor = self._num_inputs * (self._window + 2)
                cache_slots = max(floor, min(wanted, free // 4 // self._buffer_bytes))
        self._cache = FrameCache(self._buffer_bytes, cache_slots)
        self._local = threading.local()
        # Live threads' states only: a thread's buffers go with it (threading.local).
        self._states: weakref.WeakSet[_ThreadState] = weakref.WeakSet()
        self._states_lock = threading.Lock()
        # (plane, dst byte offset in the output buffer, pitch, row bytes, rows) per written plane
        self._downloads = [
            (plane, *self._geometry[plane])
            for options in passes
            for plane in options.written_planes
        ]
        self._written = tuple(plane for plane, *_ in self._downloads)

    # -- the bridge's frame protocol ------------------------------------------------------

    def process(self, n: int, frame_numbers: tuple, windows: tuple, dst: tuple) -> None:
        """Fill the processed planes of ``dst`` (the bridge's frame protocol, for Python
        callers: the host step is done here)."""
        self._finish_here(self.bridge_process(n, frame_numbers, windows, dst), dst)

    def warm_up(self) -> None:
        """Run the whole per-frame pipeline once on a synthetic frame of the layout.

        Compiles every kernel this backend launches (CuPy's on-disk cache keeps them for other
        processes) and creates the calling thread's stream and buffers. The synthetic frames
        are cached under keys no clip uses and dropped afterwards. A compile that raises leaves
        its pass's kernels unset, so the first frame compiles them again.
        """
        self._prepare_passes()
        layout = self.layout
        arrays = []  # keep every host array alive until the frame is done

        def plane(p: int):
            # Zeros: which kernels run does not depend on the samples, and a fleet of workers
            # starting at once should not spend CPU drawing random frames (0.1-0.4 s each).
            array = np.zeros(layout.plane_shape(p), layout.dtype)
            arrays.append(array)
            return array.ctypes.data, array.strides[0], memoryview(array).cast("B")

        # Frame numbers no clip reaches, so that nothing cached under them is ever reused.
        frame_numbers = tuple(range(_WARM_FRAME, _WARM_FRAME + self._window))
        windows = tuple(
            tuple(tuple(plane(p) for p in range(layout.num_planes)) for _ in frame_numbers)
            for _ in range(self._num_inputs)
        )
        written = {p for options in self.passes for p in options.written_planes}
        dst = tuple(plane(p) if p in written else None for p in range(layout.num_planes))
        try:
            step = self.bridge_process(0, frame_numbers, windows, dst, base=_WARM_BASE)
            self._finish_here(step, dst)
        finally:  # a failed warm-up leaves no synthetic frame behind either
            self._cache.forget(
                [(_WARM_BASE + i, f) for i in range(self._num_inputs) for f in frame_numbers]
            )
            for npass in self._passes:
                npass.forget(frame_numbers)

    def kernel_specs(self) -> tuple:
        """The compile-time specs of the kernels this backend launches, without repeats.

        One ``NlmSpec`` or ``Bm3dSpec`` per pass: everything its kernels are specialised on
        (radii, channels, dtype, tile height). Strengths, thresholds and frame sizes are
        launch arguments, so the warm-up queue keys on these and one warm cache serves them.
        """
        return tuple(dict.fromkeys(npass.spec for npass in self._passes))

    def _prepare_passes(self) -> None:
        """Compile the passes' kernels side by side: NVRTC runs without the GIL, and in a
        cold Av1an fleet every other worker waits for this process's compile."""

        def prepare(npass) -> None:
            with self._cupy.cuda.Device(self.device_id):
                npass.prepare()

        if len(self._passes) == 1:
            prepare(self._passes[0])
            return
        with ThreadPoolExecutor(len(self._passes), thread_name_prefix="avdenoise-compile") as pool:
            list(pool.map(prepare, self._passes))  # list(): re-raises a failed compile

    def memory_bytes(self) -> int:
        """Device memory this backend holds: cached frames, output buffers (per thread, or the
        gate's) and the passes' own buffers."""
        with self._states_lock:
            outs = self._gate.made if self._gate else len(self._states)
        own = sum(npass.memory_bytes() for npass in self._passes)
        return self._cache.memory_bytes() + outs * self._buffer_bytes + own

    def bridge_process(
        self, n: int, frame_numbers: tuple, windows: tuple, dst: tuple, base: int = 0
    ):
        """One frame, the bridge's frame protocol: upload missing window frames, launch every
        pass, download the output.

        Returns the thread's host step (see :meth:`_new_host_step`) that the bridge then does
        without the GIL (waiting for the stream, copying the output planes into ``dst`` and
        this thread's next frame into its staging buffers), or None when ``dst`` is done.
        `base` numbers the inputs in the cache (the warm-up's frames use keys no clip uses).
        """
        runtime = self._runtime
        # Each call that releases the GIL costs a wait to get it back under 16 threads
        # (docs/BENCHMARKS.md): set the device only on a thread's first frame, unless this
        # process runs backends on several devices.
        state = getattr(self._local, "state", None)
        if state is None or len(_DEVICES_IN_USE) > 1:
            runtime.setDevice(self.device_id)
        if state is None:
            state = self._new_state()
        self._release_pending(state)
        stream_ptr = state.stream_ptr
        distinct = list(dict.fromkeys(frame_numbers))
        keys = [(base + i, f) for i in range(self._num_inputs) for f in distinct]
        entries, fresh = self._cache.acquire(keys)
        synced = deferred = False
        leases = []  # per-pass resources held until the stream has synchronized
        out = None  # the gate's output buffer, while this frame has one
        try:
            for index, entry in enumerate(fresh):
                input_index, frame = entry.key
                planes = windows[input_index - base][frame_numbers.index(frame)]
                # A one-frame window's staging buffer is its input's: the bridge fills it.
                stage = input_index - base if self._window == 1 else index
                self._upload(entry, planes, state, stage)
            wait_for(entries, stream_ptr, self._calls)

            slots = dict(zip(keys, (entry.slot.ptr for entry in entries), strict=True))
            values = [slots[(base, f)] for f in frame_numbers]
            guides = (
                [slots[(base + 1, f)] for f in frame_numbers] if self._num_inputs == 2 else values
            )
            if self._gate is None:
                out_ptr, arguments = state.out_ptr, state.args
            else:
                out = self._gate.enter(frame_numbers[len(frame_numbers) // 2])
                out_ptr = out.ptr
                arguments = [npass.new_args(out_ptr) for npass in self._passes]
            for npass, args in zip(self._passes, arguments, strict=True):
                lease = npass.launch(args, frame_numbers, values, guides, state)
                if lease is not None:
                    leases.append((npass, lease))
            if self._sleep_wait:
                self._calls.eventRecord(state.done.ptr, stream_ptr)
                state.done.synchronize()  # without the GIL; the downloads below then start at once
            if self._stage_down:
                self._calls.copy_to_host(state.down.ptr, out_ptr, self._buffer_bytes, stream_ptr)
                # The bridge waits for an ungated stream; a gated frame's output buffer goes
                # back to the gate, so its copy must be done first.
                deferred = self._bridge_copies and self._gate is None
                if not deferred:
                    runtime.streamSynchronize(stream_ptr)
                    synced = True
            else:
                for plane, offset, pitch, row_bytes, rows in self._downloads:
                    address, stride, _ = dst[plane]
                    runtime.memcpy2DAsync(
                        address, stride, out_ptr + offset, pitch, row_bytes, rows, _D2H, stream_ptr
                    )
                # A copy into pageable host memory returns only once it has completed (CUDA's
                # API synchronisation rules), so the stream is idle here: no synchronise call.
                synced = True
            if synced:
                for entry in entries:
                    entry.complete = True
        except BaseException:
            self._cache.abandon(fresh)
            raise
        finally:
            if not synced and not deferred:
                try:  # nothing may still read a slot once it is released
                    runtime.streamSynchronize(stream_ptr)
                except Exception:  # the original error matters more
                    thread_debug(logger, "avdenoise: stream synchronize after an error failed")
            if deferred:  # released by this thread's next frame, once the bridge has waited
                state.pending = (entries, leases)
            else:
                self._cache.release(entries)
                for npass, lease in leases:
                    npass.release(lease)
            if out is not None:
                self._gate.leave(out)
        if not self._stage_down:
            return None
        if self._bridge_copies:
            return state.host_step
        # Copied out after the gate is left, so that the next frame enters meanwhile.
        self._copy_staged(state.down, dst, self._written, to_frame=True)
        return None

    # -- internals ------------------------------------------------------------------------

    def _release_pending(self, state: _ThreadState) -> None:
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

    def _finish_here(self, host_step, dst: tuple) -> None:
        """Do a host step in Python, as the bridge would (the staging requests aside), and
        release what the frame held."""
        if host_step is None:
            return
        state = self._local.state
        wait_address, stream_ptr, _, _ = host_step
        if wait_address:
            self._runtime.streamSynchronize(stream_ptr)
        self._copy_staged(state.down, dst, self._written, to_frame=True)
        self._release_pending(state)

    def _new_host_step(self, state: _ThreadState) -> tuple:
        """The thread's host step for the bridge, the same every frame (bridge.c's contract):
        wait for the stream (ungated: the gate's frames are waited for in :meth:`bridge_process`),
        copy the written planes out of the download buffer, and, for one-frame windows,
        copy the next frame's planes into the upload buffers before the GIL is taken."""
        wait = (self._calls.synchronize_address, state.stream_ptr) if self._gate is None else (0, 0)
        down = state.down.ptr
        outs = tuple((plane, down + offset, pitch) for plane, offset, pitch, *_ in self._downloads)
        staging = ()
        if self._stage_up and self._window == 1:
            self._staging_buffer(state, self._num_inputs - 1)
            staging = tuple(
                (i, plane, state.staging[i].ptr + offset, pitch)
                for i in range(self._num_inputs)
                for plane, (offset, pitch, _, _) in self._geometry.items()
            )
        return (*wait, outs, staging)

    def _copy_staged(self, pinned: _Pinned, frame: tuple, planes, to_frame: bool) -> None:
        """Copy `planes` between a staging buffer and one of the bridge's frames (its plane
        tuples), either way. NumPy releases the GIL for large copies, so threads copy in
        parallel."""
        dtype, itemsize, copy = self._dtype, self._dtype.itemsize, self._copy
        for plane in planes:
            _, stride, memory = frame[plane]
            view = pinned.views[plane]
            target = np.ndarray(view.shape, dtype, buffer=memory, strides=(stride, itemsize))
            if to_frame:
                copy(target, view)
            else:
                copy(view, target)

    def _upload(self, entry, planes, state: _ThreadState, index: int) -> None:
        """Queue the copies of one frame's planes into its slot and record the slot's event.

        `index` picks the thread's staging buffer, free again once the thread's stream
        synchronizes at the end of the frame. `planes` is None when the bridge has already
        copied the frame into that buffer (see :meth:`_new_host_step`).
        """
        runtime = self._runtime
        stream_ptr = state.stream_ptr
        try:
            base = entry.slot.ptr
            if self._stage_up:
                stage = self._staging_buffer(state, index)
                if planes is not None:  # else the bridge has filled the buffer
                    self._copy_staged(stage, planes, self._geometry, to_frame=False)
                self._calls.copy_to_device(base, stage.ptr, self._buffer_bytes, stream_ptr)
            else:
                for plane, (offset, pitch, row_bytes, rows) in self._geometry.items():
                    address, stride, _ = planes[plane]
                    runtime.memcpy2DAsync(
                        base + offset, pitch, address, stride, row_bytes, rows, _H2D, stream_ptr
                    )
            self._calls.eventRecord(entry.slot.event_ptr, stream_ptr)
            entry.stream = stream_ptr
        except BaseException:
            self._cache.fail(entry)
            raise
        finally:
            entry.issued.set()

    def _staging_buffer(self, state: _ThreadState, index: int) -> _Pinned:
        """The thread's upload staging buffer `index`, made on first use."""
        while len(state.staging) <= index:
            state.staging.append(self._new_pinned())
        return state.staging[index]

    def _new_pinned(self) -> _Pinned:
        """A staging buffer laid out like a slot (one thread's, on its first frames)."""
        return _Pinned(self._cupy, self._buffer_bytes, self._pinned_planes, self._dtype)

    def _new_state(self) -> _ThreadState:
        """The calling thread's stream, output buffer and argument records (first frame only)."""
        cupy = self._cupy
        state = _ThreadState()
        state.stream = cupy.cuda.Stream(non_blocking=True)
        state.stream_ptr = state.stream.ptr
        if self._gate is None:
            state.out = self._new_out()
            state.out_ptr = state.out.ptr
            state.args = [npass.new_args(state.out_ptr) for npass in self._passes]
        else:  # lent by the gate, frame by frame
            state.out = state.out_ptr = state.args = None
        state.staging = []
        state.down = self._new_pinned() if self._stage_down else None
        state.done = cupy.cuda.Event(block=True, disable_timing=True) if self._sleep_wait else None
        state.pending = None
        state.host_step = self._new_host_step(state) if self._bridge_copies else None
        self._local.state = state
        with self._states_lock:
            self._states.add(state)
        return state

    def _new_out(self):
        """A device output buffer laid out like a slot."""
        return self._cupy.cuda.alloc(self._buffer_bytes)
