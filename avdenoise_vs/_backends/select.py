"""Choose the backend that runs a filter: ``device`` and ``accelerators`` decide.

Backends share one interface, :class:`~avdenoise_vs._backends.protocol.Backend` (the bridge's
frame protocol, see ``_native/bridge.c``); a GPU backend is a
:class:`~avdenoise_vs._backends.protocol.CompilingBackend`, warmed up before its first frame. A
GPU backend that cannot start (no CuPy, no device) is skipped by ``device='auto'`` and is an
error when it was asked for by name.

A GPU backend that starts but whose warm-up fails (NVRTC, out of memory while compiling, a
corrupt cache file, a CuPy bug) never fails the filter's creation, since a failed Av1an chunk
can end the whole encode:

- ``device='auto'`` moves on to the next of ``accelerators`` that can run (the CPU by
  default), with a warning in VapourSynth's log naming the cause: a GPU whose compile failed
  once is likely to fail on every frame, and the CPU backend is exact;
- ``device='cuda'`` / ``'cuda:N'``, or ``'auto'`` when no later accelerator can run, keeps
  the GPU backend, with a warning: its passes compile their kernels on first use, so its
  first frame compiles them again, and a second failure is that frame's error.

Filters defer the warm-up (``select_backend(..., defer=True)``, ``_backends/pending.py``): the
choice is the same, made on a thread of its own and waited for by the filter's first frame.

A GPU clip (VapourSynth's Vulkan frames, ``vulkan_uuid``) runs on CUDA alone, on the device that
holds it: ``device='auto'`` never falls back to the CPU for it, whose frames are the host's.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence

from avdenoise_vs._backends.protocol import Backend, CompilingBackend
from avdenoise_vs._errors import BackendUnavailable, one_line
from avdenoise_vs._install import cupy_install
from avdenoise_vs._log import script_core, vs_warning
from avdenoise_vs._params.device_choice import DeviceChoice
from avdenoise_vs._params.options import FrameLayout
from avdenoise_vs._params.settings import PassSettings

__all__ = ["chosen_backends", "select_backend"]

logger = logging.getLogger(__name__)

#: Most thread states made ahead of the first frames (each holds page-locked buffers).
_MAX_PREPARED_THREADS = 64
#: Longest cause quoted in a warning: an NVRTC log can run to pages.
_CAUSE_CHARS = 300
#: What a kept GPU backend whose warm-up failed does (see the module notes).
_RETRY = "its first frame compiles the kernels again"
#: Whether this process has already said that device='auto' fell back to the CPU.
_fallback_told = False
#: Filters of this process per backend chosen (:func:`chosen_backends`).
_chosen_counts: Counter[str] = Counter()
_chosen_lock = threading.Lock()


def select_backend(
    function: str,
    device: DeviceChoice | str,
    accelerators: Sequence[str],
    passes: tuple[PassSettings, ...],
    layout: FrameLayout,
    *,
    defer: bool = False,
    vulkan_uuid: str | None = None,
) -> Backend:
    """Build and warm up the backend for a call.

    `device` is the call's choice (a validated ``device`` string is read as Denoise's
    ``device`` argument); messages about it repeat the argument the script wrote.

    `vulkan_uuid` is a GPU clip's Vulkan device (see the module notes).

    With `defer`, a GPU backend's
    warm-up (its CUDA context and kernels) runs on a thread of its own and a
    :class:`~avdenoise_vs._backends.pending.PendingBackend` comes back at
    once: the script goes on and
    VapourSynth starts making the source's first frames while the GPU gets ready, and the
    first frame to reach the filter waits for the rest of the choice (its fallbacks and
    warnings included).

    Raises
    ------
    ValueError
        When the requested device cannot run (``device='cuda'`` without a usable GPU), or
        when no accelerator of ``accelerators`` can. A failed warm-up is never an error.
        A deferred choice raises it from its first frame instead when the only cause is a
        CUDA context that cannot be made.
    """
    if isinstance(device, str):
        device = DeviceChoice.parse("device", device)
    search = _Search(function, device, accelerators, passes, layout, vulkan_uuid)
    backend = search.next_built()
    if defer and isinstance(backend, CompilingBackend):
        from avdenoise_vs._backends.pending import PendingBackend

        return PendingBackend(function, lambda: search.settle(backend))
    return search.settle(backend)


class _Search:
    """The candidates of one call, tried in order: built, then warmed up (see the module
    notes for what a failure at either step leads to)."""

    def __init__(self, function, device, accelerators, passes, layout, vulkan_uuid) -> None:
        self.function, self.device = function, device
        self.passes, self.layout, self.vulkan_uuid = passes, layout, vulkan_uuid
        if device.is_auto:
            candidates = [(name, None) for name in accelerators]
        else:
            candidates = [(device.name, device.index)]
        if vulkan_uuid is not None:  # a GPU clip: CUDA or nothing
            candidates = [(name, index) for name, index in candidates if name == "cuda"]
        self.accelerators = accelerators
        self._candidates = iter(candidates)
        self._name = ""
        self.reasons: list[str] = []
        # (name, cause, backend) of the first backend whose warm-up failed
        self._cold: tuple[str, str, Backend] | None = None
        self._threads = _core_threads()  # read here: a deferred warm-up runs off the core's thread

    def next_built(self) -> Backend | None:
        """The next candidate that builds, or None when none is left."""
        for name, index in self._candidates:
            try:
                backend = _build(name, index, self.passes, self.layout, self.vulkan_uuid)
            except BackendUnavailable as error:
                self._unavailable(name, error)
                continue
            self._name = name
            return backend
        return None

    def settle(self, backend: Backend | None) -> Backend:
        """Warm `backend` (of :meth:`next_built`) up and go on down the candidates until one
        runs; the backend chosen."""
        while backend is not None:
            name = self._name
            try:
                cause = _warm_up(backend, self._threads)  # the context may be what is missing
            except BackendUnavailable as error:
                self._unavailable(name, error)
                backend = self.next_built()
                continue
            if cause is None:
                if self._cold is not None:
                    _warn(self.function, *self._cold[:2], f"device='auto' runs on {name} instead")
                elif self.reasons and name == "cpu":
                    _tell_fallback(self.function, self.reasons)
                logger.debug("avdenoise.%s: running on %s", self.function, name)
                return _chosen(name, backend)
            if not self.device.is_auto:
                _warn(self.function, name, cause, f"{self.device.said} stays on it; {_RETRY}")
                return _chosen(name, backend)
            self._cold = self._cold or (name, cause, backend)
            backend = self.next_built()
        if self._cold is not None:
            _warn(
                self.function,
                *self._cold[:2],
                f"no other of accelerators can run, so device='auto' stays on it; {_RETRY}",
            )
            return _chosen(self._cold[0], self._cold[2])
        if self.vulkan_uuid is not None:
            raise ValueError(_gpu_clip_cannot_run(self.function, self.accelerators, self.reasons))
        raise ValueError(_cannot_run(self.function, self.device, self.accelerators, self.reasons))

    def _unavailable(self, name: str, error: BackendUnavailable) -> None:
        logger.debug("avdenoise: backend %s unavailable: %s", name, error)
        # Asked for by name, the error says why the driver failed too; 'auto' falls back.
        detail = f"; {error.detail}" if error.detail and not self.device.is_auto else ""
        self.reasons.append(f"{name}: {error}{detail}")


def chosen_backends() -> Counter[str]:
    """How many filters of this process got each backend, so far.

    ``python -m avdenoise_vs prewarm`` counts those its script creates, to tell a script whose
    filters all run on the CPU, with nothing to compile, from one that creates no filter at all.
    """
    with _chosen_lock:
        return Counter(_chosen_counts)


def _chosen(name: str, backend: Backend) -> Backend:
    """Count the backend a filter got (:func:`chosen_backends`), and return it."""
    with _chosen_lock:  # deferred choices settle on threads of their own
        _chosen_counts[name] += 1
    return backend


def _cannot_run(function: str, device: DeviceChoice, accelerators: Sequence[str], reasons) -> str:
    """The error message when no backend of the call can run here: why, and what can."""
    why = "; ".join(reasons)
    if device.is_auto:
        return (
            f"avdenoise.{function}: device='auto' cannot run here with "
            f"accelerators={list(accelerators)!r} ({why}); 'cpu' runs anywhere"
        )
    return (
        f"avdenoise.{function}: {device.said} cannot run here ({why}); "
        "device='auto' or 'cpu' runs anywhere"
    )


def _gpu_clip_cannot_run(function: str, accelerators: Sequence[str], reasons) -> str:
    """The error message when a GPU clip's CUDA backend cannot run here."""
    why = "; ".join(reasons) or f"accelerators={list(accelerators)!r} leaves it out"
    return (
        f"avdenoise.{function}: a GPU clip runs on CUDA, which cannot run here ({why}); "
        "std.GPUDownload makes it a CPU clip, which device='cpu' takes"
    )


def _tell_fallback(function: str, reasons: list[str]) -> None:
    """Say once a process, in VapourSynth's log, that device='auto' runs on the CPU, why,
    and how to get the GPU: without it the first sign is a render a thousand times slower."""
    global _fallback_told
    if _fallback_told:
        return
    _fallback_told = True
    hint = f"; {cupy_install(None)}" if any("CuPy cannot be imported" in r for r in reasons) else ""
    vs_warning(
        logger,
        f"avdenoise.{function}: no GPU backend can run ({'; '.join(reasons)}), so "
        f"device='auto' runs on the CPU, which is exact but slow{hint}",
    )


def _warn(function: str, name: str, cause: str, consequence: str) -> None:
    """Warn in VapourSynth's log that a backend's warm-up failed, why, and what follows."""
    vs_warning(
        logger,
        f"avdenoise.{function}: warming up the {name} backend failed ({cause}); {consequence}",
    )


def _build(
    name: str, index: int | None, passes, layout: FrameLayout, vulkan_uuid: str | None = None
) -> Backend:
    if name == "cpu":
        from avdenoise_vs._backends.reference import NumpyBackend

        return NumpyBackend(passes, layout)
    try:
        from avdenoise_vs._backends.cuda.backend import CudaBackend
    except ImportError as error:
        raise BackendUnavailable(f"the CUDA backend cannot load ({error})") from error
    return CudaBackend(passes, layout, device_index=index, vulkan_uuid=vulkan_uuid)


def _warm_up(backend: Backend, threads: int) -> str | None:
    """Compile every kernel of a GPU backend now, one process at a time (the warm-up queue).

    Running the whole per-frame pipeline once on a synthetic frame also compiles CuPy's own
    kernels that it uses. Under the warm-up queue, the first of many Av1an workers compiles
    while the others wait and then load the warm cache.

    Returns
    -------
    str or None
        The cause when the warm-up failed (one line, shortened), else None; None too for a
        backend that compiles nothing (the CPU's).

    Raises
    ------
    BackendUnavailable
        When the device's context cannot be made (the warm-up is what first needs it).
    """
    if not isinstance(backend, CompilingBackend):
        return None
    from avdenoise_vs._warmup import queue as warmup

    key = warmup.kernel_key(backend.kernel_specs(), device=backend.device_id)
    error = warmup.warm_up(key, backend.warm_up, ahead=backend.compile_ahead).error
    if error is None:
        _prepare_threads(backend, threads)
        return None
    if isinstance(error, BackendUnavailable):
        raise error
    cause = one_line(error)
    return cause if len(cause) <= _CAUSE_CHARS else cause[: _CAUSE_CHARS - 3] + "..."


def _core_threads() -> int:
    """Threads of this thread's VapourSynth core; 1 without a core (a backend made outside a
    script)."""
    core = script_core()
    return core.num_threads if core is not None else 1


def _prepare_threads(backend: CompilingBackend, threads: int) -> None:
    """Give a warm GPU backend the states of the core's `threads`; a failure (out of
    page-locked memory) only leaves them to each thread's first frame."""
    try:
        backend.prepare_threads(min(threads, _MAX_PREPARED_THREADS))
    # Out of page-locked or device memory (CuPy's OutOfMemoryError is a MemoryError, a
    # refused allocation a CUDARuntimeError): nothing the threads need is lost, they make
    # their own.
    except (MemoryError, RuntimeError) as error:
        logger.debug("avdenoise: preparing the threads' states failed: %s", error)
