"""What a backend is: the calls that a filter's frames and its creation make on one.

:class:`Backend` is what every frame needs, and every backend has it:
:class:`~avdenoise_vs._backends.reference.NumpyBackend` ('cpu'),
:class:`~avdenoise_vs._backends.cuda.backend.CudaBackend` ('cuda'), and
:class:`~avdenoise_vs._backends.pending.PendingBackend`, which stands in for the one being
chosen. :class:`CompilingBackend` adds what ``select_backend`` does with a backend whose kernels
compile before its first frame (the warm-up); only the CUDA backend has it, and the choice asks
``isinstance(backend, CompilingBackend)`` for it.

Both are ``runtime_checkable``, for that question and for the tests. A static type checker holds
the backends, and the tests' stand-ins for them, to these Protocols:
``tests/backend_conformance.py`` assigns each to the Protocol it implements, and
``tests/test_backend_protocol.py`` runs mypy on it and on the modules that make and call
backends (``[tool.mypy]`` in pyproject.toml lists them).

The frame arguments are the bridge's (``_native/bridge.c``): ``windows[i][t][plane]`` is the
``(address, stride, memoryview)`` of input ``i`` (the clip, then ``ref``) at window position
``t``, the centre frame in the middle, or ``windows[i][t]`` is None where the bridge already
copied that frame into the backend's own buffer (asked for by the thread's last host step);
``dst[plane]`` likewise, writable, or None for a plane passed through from the centre frame.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from avdenoise_vs._backends.cuda.gpu_frames import GpuFrames

__all__ = ["Backend", "CompilingBackend", "HostStep"]

#: The part of a frame a backend leaves to the bridge, done without the GIL:
#: ``(wait_address, wait_argument, out_copies, next_staging[, done_address])``, every field
#: as ``_native/host_step.h`` describes it.
type HostStep = tuple


@runtime_checkable
class Backend(Protocol):
    """A filter's backend: the frames' calls (the bridge's frame protocol) and its name.

    Every method may run on several of VapourSynth's threads at once, one frame each, with
    the GIL held except where the backend releases it itself, so a backend keeps what a frame
    changes per thread (``threading.local``) or under its own locks.
    """

    @property
    def name(self) -> str:
        """'cpu' or 'cuda': the ``AvdenoiseBackend`` frame property of every output frame.

        Read by ``FilterPlan`` when it takes the backend: on the thread that creates the
        filter, or on the first frame's for a backend still being chosen. It does not change.
        """
        ...

    @property
    def gpu_frames(self) -> GpuFrames | None:
        """The frame path of VapourSynth's GPU clips, which take it instead of
        :meth:`bridge_process`; None for a backend that takes host frames only (all but the
        CUDA backend made for a GPU clip). ``FilterPlan`` closes it with the filter."""
        ...

    def process(
        self, n: int, frame_numbers: tuple[int, ...], windows: tuple, dst: tuple, /
    ) -> None:
        """Fill the written planes of `dst` with frame `n` denoised: the whole frame, for
        Python callers (tests, benchmarks).

        `frame_numbers` are the window's frame numbers (clamped at the clip's ends, so they
        may repeat), `windows` and `dst` as the module notes say. On any thread.

        Raises
        ------
        Exception
            Whatever fails the frame; the backend stays usable for other frames.
        """
        ...

    def bridge_process(
        self, n: int, frame_numbers: tuple[int, ...], windows: tuple, dst: tuple, /
    ) -> HostStep | None:
        """The bridge's call for frame `n` (``FilterPlan.process``, on a VapourSynth worker
        thread): as :meth:`process`, but the backend may leave the end of the frame to the
        bridge.

        Returns
        -------
        HostStep or None
            None when `dst` is done; else the host step that the bridge does without the GIL
            before the frame is delivered (the CUDA backend's stream wait and copies out).
            A backend that never returns one calls :meth:`process` here.

        Raises
        ------
        Exception
            Whatever fails the frame: the bridge makes its message the frame's error. The
            backend stays usable for other frames.
        """
        ...


@runtime_checkable
class CompilingBackend(Backend, Protocol):
    """A backend whose kernels compile before its first frame: ``select_backend`` warms it
    up under the warm-up queue (``_warmup/queue.py``), and moves on to another backend when
    that fails (see ``_backends/select.py``).

    Its methods are called in this order, once each, on the thread that chooses the backend
    (the one creating the filter, or a deferred choice's own): :meth:`kernel_specs` and
    :attr:`device_id` (the queue's key), :meth:`compile_ahead` (only when this process
    compiles for the queue), :meth:`warm_up`, then :meth:`prepare_threads` if it succeeded.
    No frame has run yet.
    """

    @property
    def device_id(self) -> int:
        """The CUDA device the backend runs on: part of the warm-up queue's key (the
        device's architecture and driver decide what the compile gives)."""
        ...

    def kernel_specs(self) -> tuple[Hashable, ...]:
        """The compile-time specs of the kernels the backend launches, without repeats:
        frozen values whose ``repr`` shows every compile-time value, which the warm-up queue
        hashes into its key. Needs no device context."""
        ...

    def compile_ahead(self) -> None:
        """Start compiling the kernels without the device's context, for :meth:`warm_up` to
        wait for: called only by the process that compiles for the queue, just before its
        warm-up. What it raises is only logged (the head start is lost)."""
        ...

    def warm_up(self) -> None:
        """Compile (or load from the cache) every kernel the frames launch, making the
        device's context.

        Raises
        ------
        BackendUnavailable
            When the device's context cannot be made: the choice moves on to the next
            accelerator, or fails when this one was asked for by name.
        Exception
            A failed compile (NVRTC, out of memory, a corrupt cache file): the backend is kept
            or passed over as ``select_backend`` says, and stays usable; its first frame then
            compiles again.
        """
        ...

    def prepare_threads(self, threads: int, /) -> None:
        """Make ahead, after a successful :meth:`warm_up`, what each of `threads` threads
        needs for its first frame (streams, buffers), so that first frames do not wait.

        Raises
        ------
        MemoryError, RuntimeError
            Out of page-locked or device memory: only logged; each thread then makes its own
            on its first frame.
        """
        ...
