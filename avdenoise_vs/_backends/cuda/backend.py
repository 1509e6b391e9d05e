"""The CUDA backend: the bridge's frame protocol on the GPU through CuPy.

Importing this module never imports CuPy; :class:`CudaBackend` does, and raises
:class:`~avdenoise_vs._errors.BackendUnavailable` when CuPy or a device is missing. Making a
backend never waits for the device's CUDA context: its warm-up (or a thread's first frame)
does, so that the worker compiling for the warm-up queue runs NVRTC meanwhile
(:meth:`CudaBackend.compile_ahead`).

Per frame the bridge calls :meth:`CudaBackend.bridge_process` from one of VapourSynth's
threads, with the GIL serialising them, so the GIL-held time per frame bounds the frame rate.
A frame costs a handful of calls, and those that wait release the GIL: each window frame not
yet on the device goes into a cached slot, then one ``cudaEventRecord`` (the upload strategy,
``_cuda/transfer/``); a ``cudaStreamWaitEvent`` for cached frames another thread's stream
uploaded; one fused kernel launch per pass (launches and event calls only queue work, so they
keep the GIL: ``_cuda/calls.py``); the output comes back into the bridge's frame, or the
bridge's host step does that without the GIL (the download strategy).

The strategies are chosen when the backend is made and their methods bound then, so a frame
looks nothing up: about 90-150 us of GIL-held time per frame, single-threaded, against 250 us
of kernel time for 1080p luma with d=1, a=2, s=4. No CuPy array operation and no allocation
beyond a few small lists happen per frame: each thread gets its stream, output buffer and
argument records once (``_cuda/buffers.py``'s ``ThreadState``). Passes with large work buffers
(BM3D) run only a few frames on the GPU at once: threads upload in parallel, then enter the GPU
part through a :class:`~avdenoise_vs._cuda.gate.GpuGate`, in frame order, which lends each an
output buffer for that part, so that work memory follows the frames on the GPU rather than
VapourSynth's thread count. A GPU clip's frames (VapourSynth's Vulkan
frames) come in through :attr:`CudaBackend.gpu_frames`, already on the device.
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from avdenoise_vs._backends.cuda.device import (
    DEVICES_IN_USE,
    new_pass,
    open_device,
    shared_limit,
    wait_mode,
)
from avdenoise_vs._backends.cuda.gpu_frames import GpuFrames, plane_extents, untouched
from avdenoise_vs._backends.cuda.warm_frame import synthetic_frame
from avdenoise_vs._backends.protocol import HostStep
from avdenoise_vs._cuda import transfer as _transfer
from avdenoise_vs._cuda.buffers import SlotLayout, ThreadState
from avdenoise_vs._cuda.calls import cuda_calls, set_sync_mode
from avdenoise_vs._cuda.frame_cache import FrameCache, default_slots, wait_for
from avdenoise_vs._cuda.gate import GpuGate
from avdenoise_vs._cuda.vkimport import Imports, cuda_device_for
from avdenoise_vs._environment import check_cuda_settings, cuda_tuning, switch
from avdenoise_vs._errors import BackendUnavailable
from avdenoise_vs._params.options import FrameLayout
from avdenoise_vs._params.settings import PassSettings

__all__ = ["CudaBackend"]

_WARM_BASE = 1 << 20  # warm-up frames are cached under input numbers no clip uses


class CudaBackend:
    """Denoise frames with the NLM and BM3D kernels on one CUDA device.

    Parameters
    ----------
    passes : tuple of PassSettings
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
        "auto" stages frames of 3 MiB or more, those of one-frame windows and BM3D's (see
        ``_cuda/transfer/``), unless ``AVDENOISE_DEBUG``'s ``transfer`` key names another.
    vulkan_uuid : str, optional
        The Vulkan device's UUID of a GPU clip, whose frames the backend then takes on that
        device (:attr:`gpu_frames`); `device_index`, when given, must be that device.

    Raises
    ------
    BackendUnavailable
        Without CuPy, without a CUDA device, or when a pass needs more shared memory per
        block than the device has.
    """

    name = "cuda"

    def __init__(
        self,
        passes: tuple[PassSettings, ...],
        layout: FrameLayout,
        device_index: int | None = None,
        *,
        cache_slots: int | None = None,
        transfer: str = "auto",
        vulkan_uuid: str | None = None,
    ) -> None:
        sync = switch("AVDENOISE_CUDA_SYNC", lenient=True)
        mode = wait_mode(sync, passes)
        if vulkan_uuid is not None:  # a GPU clip runs on the CUDA device that holds it
            device_index = cuda_device_for(vulkan_uuid, device_index)
        cupy, device_id = open_device(device_index, mode)
        check_cuda_settings()  # the device is there: a bad setting is this filter's error
        self.tuning = cuda_tuning()
        transfer = _transfer.setting(self.tuning.transfer if transfer == "auto" else transfer)
        transfer = transfer if vulkan_uuid is None else _transfer.DEVICE
        set_sync_mode(device_id, mode)  # the early context's thread may not have got there
        self._cupy, self._runtime, self._calls = cupy, cupy.cuda.runtime, cuda_calls()
        self.passes, self.layout, self.device_id = passes, layout, device_id
        DEVICES_IN_USE.add(device_id)
        self._num_inputs = 2 if any(p.has_ref for p in passes) else 1
        self._window = 2 * max(options.window_radius for options in passes) + 1
        # Planes read (slots) and written (output buffers): the same set, one layout for all.
        # Nothing here needs the device's context, which may still be coming up (see _open).
        self._slots = SlotLayout(layout, passes)
        self._passes = self._fit_passes()
        self._gate = self._make_gate()
        self._cache = FrameCache(self._slots.nbytes, cache_slots or 0)  # sized by _open if None
        self._cache_slots = cache_slots
        self._opened = False
        self._open_lock = threading.Lock()
        self._ahead = None  # a CompileAhead while the warm-up compiles ahead of the context
        self._init_thread_states()
        self._bind_transfer(transfer, sleep=self._gate is not None and sync == "auto")
        #: The frame path of a GPU clip (its ``process`` is the bridge's), else None.
        self.gpu_frames = None if vulkan_uuid is None else self._gpu_frames()

    def _fit_passes(self) -> list:
        """The GPU pass of each :data:`PassSettings`, fitted to the device's shared memory."""
        shared_bytes = shared_limit(self._runtime, self.device_id)
        offsets, pitches = self._slots.offsets(), self._slots.pitches()
        return [
            new_pass(
                options, self.layout, offsets, pitches, shared_bytes, self.device_id, self.tuning
            )  # fmt: skip
            for options in self.passes
        ]

    def _make_gate(self) -> GpuGate | None:
        """Passes with large work buffers (BM3D) run a few frames on the GPU at a time, in
        frame order, each with an output buffer lent for that part (see _cuda/gate.py)."""
        limits = [getattr(p, "frames_in_flight", None) for p in self._passes]
        return GpuGate(min(limits), self._new_out) if all(limits) else None

    def _init_thread_states(self) -> None:
        """No thread has a state yet: each gets one on its first frame (``_thread_state``),
        taken from those :meth:`prepare_threads` made where it could."""
        self._local = threading.local()
        # Live threads' states only: a thread's buffers go with it (threading.local).
        self._states: weakref.WeakSet[ThreadState] = weakref.WeakSet()
        self._states_lock = threading.Lock()
        self._spare_states: list[ThreadState] = []  # made by the warm-up, for the first threads

    def _bind_transfer(self, transfer: str, sleep: bool) -> None:
        """Choose the transfer strategies and bind each frame's steps to them, once, so that
        a frame looks up nothing (see the module notes).

        Gated frames wait for the GPU asleep (`sleep`) rather than spinning, unless the user
        chose a wait mode: with the whole context set to block, V-BM3D at radius 1 ran 331
        fps against 249 spinning; sleeping before the download alone, 119 against 106 (H200,
        docs/BENCHMARKS.md: "Transfers and wait modes in a fleet", "Measurements behind
        design choices").
        """
        context = _transfer.Context(
            self._cupy, self._runtime, self._calls, self._cache, self._gate, self._slots,
            self._window, self._num_inputs, sleep=sleep,
        )  # fmt: skip
        chosen = _transfer.choose(transfer, context)
        self.transfer, self.uploader, self.downloader = chosen
        self._upload = self.uploader.upload
        self._download = self.downloader.download
        self._abort = self.downloader.abort
        self._release_pending = self.downloader.release_pending

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
        if self._ahead is not None:
            self._ahead.wait()
        self._open()
        self._prepare_passes()
        cupy = self._cupy if self.gpu_frames is not None else None  # planes on the device
        frame_numbers, windows, dst, _arrays = synthetic_frame(
            self.layout, self.passes, self._window, self._num_inputs, cupy
        )
        try:
            step = self.bridge_process(0, frame_numbers, windows, dst, base=_WARM_BASE)
            self._finish_here(step, dst)
        finally:  # a failed warm-up leaves no synthetic frame behind either
            self._cache.forget(
                [(_WARM_BASE + i, f) for i in range(self._num_inputs) for f in frame_numbers]
            )
            for npass in self._passes:
                npass.forget(frame_numbers)

    def compile_ahead(self) -> None:
        """Start compiling this backend's kernels into CuPy's cache without the device's
        context (``_backends/cuda/ahead.py``); :meth:`warm_up` waits for it. For the process that
        compiles for the warm-up queue: its context comes up meanwhile."""
        from avdenoise_vs._backends.cuda.ahead import CompileAhead

        self._ahead = CompileAhead(self._cupy, self.kernel_specs(), self.device_id)

    def prepare_threads(self, threads: int) -> None:
        """Make the states of `threads` VapourSynth threads now (after the warm-up, outside
        its queue): the thread that creates the filter renders no frame, and a worker's first
        frames otherwise wait while every thread makes its own streams and page-locked
        buffers. The warm-up's own state is the first of them."""
        state = getattr(self._local, "state", None)
        if state is not None and state.pending is None:
            del self._local.state
            self._spare_states.append(state)
        while len(self._spare_states) < threads:
            self._spare_states.append(self._make_state())

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

    def memory_parts(self) -> dict[str, int]:
        """Device memory this backend holds, bytes: cached frames, output buffers (per thread,
        or the gate's) and the passes' own buffers (``scripts/bench/gpu_memory.py``)."""
        with self._states_lock:
            outs = self._gate.made if self._gate else len(self._states)
        own = sum(npass.memory_bytes() for npass in self._passes)
        return {
            "cache": self._cache.memory_bytes(),
            "outs": outs * self._slots.nbytes,
            "passes": own,
        }

    def memory_bytes(self) -> int:
        """Device memory this backend holds, bytes (:meth:`memory_parts`)."""
        return sum(self.memory_parts().values())

    def bridge_process(
        self, n: int, frame_numbers: tuple, windows: tuple, dst: tuple, base: int = 0
    ) -> HostStep | None:
        """One frame, the bridge's frame protocol: upload missing window frames, launch every
        pass, download the output.

        Returns the thread's host step (``_native/host_step.h``) that the bridge then does without
        the GIL (waiting for the stream, copying the output planes into ``dst`` and this
        thread's next frame into its staging buffers), or None when ``dst`` is done. `base`
        numbers the inputs in the cache (the warm-up's frames use keys no clip uses).
        """
        state = self._thread_state()
        if state.pending is not None:  # the last frame's slots: the bridge has waited for it
            self._release_pending(state)
        distinct = list(dict.fromkeys(frame_numbers))
        keys = [(base + i, f) for i in range(self._num_inputs) for f in distinct]
        entries, fresh = self._cache.acquire(keys)
        leases, out = [], None  # held until the frame's stream has synchronized
        center = frame_numbers[len(frame_numbers) // 2]
        try:
            if fresh:
                self._upload(fresh, frame_numbers, windows, base, state)
            wait_for(entries, state.stream_ptr, self._calls)
            if self._gate is not None:  # an output buffer lent for the GPU part, in frame order
                out = self._gate.enter(center)
                state.out_ptr, state.args = out.ptr, [p.new_args(out.ptr) for p in self._passes]
            slots = dict(zip(keys, [entry.slot.ptr for entry in entries], strict=True))
            self._launch_passes(state, slots, frame_numbers, base, leases)
        except BaseException:
            self._cache.abandon(fresh)
            self._abort(state, entries, leases, out)
            raise
        return self._download(state, dst, entries, leases, out)

    # -- internals ------------------------------------------------------------------------

    def _thread_state(self) -> ThreadState:
        """The calling thread's state, made on its first frame, with its device current."""
        state = getattr(self._local, "state", None)
        # Each call that releases the GIL costs a wait to get it back under 16 threads
        # (docs/BENCHMARKS.md): set the device only on a thread's first frame, unless this
        # process runs backends on several devices.
        if state is None or len(DEVICES_IN_USE) > 1:
            self._runtime.setDevice(self.device_id)
            if state is None:
                self._open()
                state = self._new_state()
        return state

    def _launch_passes(
        self, state: ThreadState, slots: dict, frame_numbers: tuple, base: int, leases: list
    ) -> None:
        """Launch every pass on the frame's window, in order, on the thread's stream; the
        leases of their work buffers go into `leases` as they are taken, so that a failure
        part-way gives back what was taken."""
        values = [slots[base, f] for f in frame_numbers]
        guides = values if self._num_inputs == 1 else [slots[base + 1, f] for f in frame_numbers]
        for npass, args in zip(self._passes, state.args, strict=True):
            lease = npass.launch(args, frame_numbers, values, guides, state)
            if lease is not None:
                leases.append((npass, lease))

    def _open(self) -> None:
        """Make the device current, which waits for (or creates) its context, and size the
        frame cache from its free memory: once, by the warm-up or the first thread's frame."""
        with self._open_lock:
            if self._opened:
                return
            try:
                self._runtime.setDevice(self.device_id)
            except self._runtime.CUDARuntimeError as error:
                why = f"CUDA device {self.device_id} cannot start ({error})"
                raise BackendUnavailable(why) from error
            if self._cache_slots is None:
                free, _ = self._runtime.memGetInfo()
                gated = self._gate is not None
                size = self._slots.nbytes, self._window, self._num_inputs, gated
                self._cache.soft_limit = default_slots(free, *size)
            self._opened = True

    def _finish_here(self, host_step, dst: tuple) -> None:
        """Do a host step in Python, as the bridge would, and release what the frame held."""
        if host_step is not None:
            self.downloader.finish_here(self._local.state, host_step, dst)

    def _new_state(self) -> ThreadState:
        """The calling thread's state (its first frame only): one made during the warm-up,
        or a new one."""
        try:
            state = self._spare_states.pop()  # atomic: threads may start together
        except IndexError:
            state = self._make_state()
        self._local.state = state
        return state

    def _make_state(self) -> ThreadState:
        """A stream, output buffer, argument records and the strategies' buffers, for one
        thread."""
        state = ThreadState(self._cupy.cuda.Stream(non_blocking=True))
        if self._gate is None:  # else lent by the gate, frame by frame
            state.out = self._new_out()
            state.out_ptr = state.out.ptr
            state.args = [npass.new_args(state.out_ptr) for npass in self._passes]
        self.downloader.prepare(state, self.uploader)
        with self._states_lock:
            self._states.add(state)
        return state

    def _new_out(self):
        """A device output buffer laid out like a slot."""
        return self._cupy.cuda.alloc(self._slots.nbytes)

    def _gpu_frames(self) -> GpuFrames:
        """The frame path of a GPU clip, on this backend's device."""
        through = untouched(self.layout, self.passes)
        imports = Imports(self.device_id, plane_extents(self.layout))
        return GpuFrames(self.bridge_process, self._thread_state, self._runtime, imports, through)
