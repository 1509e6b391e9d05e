"""A GPU backend being chosen while the script goes on: its warm-up on a thread of its own.

VapourSynth asks a filter's inputs for frames only once the whole script has run. A filter
that warms its GPU up in its constructor (the CUDA context, and the kernels under the warm-up
queue, about a second when 16 workers start at once) holds back the source's first frames as
well: in a fleet of V-BM3D workers the first frame reached the filter a second after its
kernels were warm (docs/BENCHMARKS.md: "The warm-up on a thread of its own"). A deferred choice
(``select_backend(..., defer=True)``) comes back at once; the first frame that reaches the
filter waits for the warm-up and for the rest of the choice: the fallback to the CPU, its
warnings, and the frame property that names the backend, which the bridge reads once the first
frame's ``process`` has returned.

It is a :class:`~avdenoise_vs._backends.protocol.Backend` itself, each of its calls waiting for
the choice and passing on to the backend chosen; ``FilterPlan`` puts that backend in its place
on the first frame, so that later frames skip the indirection.

A filter that is freed before any frame reached it (``vspipe --info``, an unused clip) first
waits for its warm-up (``close``), as its constructor would have: nothing is left running
CUDA or NVRTC while the process exits.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from avdenoise_vs._backends.protocol import Backend, HostStep
from avdenoise_vs._log import OWN_THREAD_PREFIX, logging_to, script_core, shield_vs_logging_bridge

__all__ = ["PendingBackend", "settle_all"]

#: Every pending backend of the process, for :func:`settle_all`.
_PENDING: weakref.WeakSet[PendingBackend] = weakref.WeakSet()


class PendingBackend:
    """The backend that `settle` chooses, being chosen on a thread of its own.

    Parameters
    ----------
    function : str
        The filter's name, for the thread's name.
    settle : callable
        Warms the first built backend up and returns the backend chosen (or raises).
    """

    gpu_frames = None  # a GPU clip's frames wait for the backend chosen, which has them

    def __init__(self, function: str, settle: Callable[[], Backend]) -> None:
        self._done = threading.Event()
        self._backend: Backend | None = None
        self._error: BaseException | None = None
        # A thread of our own has no VapourSynth core under vspipe: its warnings go to the
        # script's (``vs_warning``), and its log records past VapourSynth's bridge.
        shield_vs_logging_bridge()
        self._thread = threading.Thread(
            target=self._settle,
            args=(settle, script_core()),
            name=f"{OWN_THREAD_PREFIX}{function} warm-up",
        )
        _PENDING.add(self)
        self._thread.start()

    def resolved(self) -> Backend:
        """The backend chosen, once the warm-up is done (waiting for it).

        Raises
        ------
        ValueError
            When no backend of the call can run (``select_backend``'s error).
        RuntimeError
            When the choice failed in some other way (a bug); its message is the cause's.
        """
        self._done.wait()
        error = self._error
        if error is None:
            assert self._backend is not None  # set before _done, unless settle raised
            return self._backend
        kind = ValueError if isinstance(error, ValueError) else RuntimeError
        # A new exception for each frame that asks: frames run on several threads at once.
        raise kind(str(error) or type(error).__name__) from error

    @property
    def name(self) -> str:
        """The chosen backend's name (waiting for the choice; raises as :meth:`resolved`)."""
        return self.resolved().name

    def process(self, n: int, frame_numbers: tuple, windows: tuple, dst: tuple) -> None:
        """The chosen backend's :meth:`~avdenoise_vs._backends.protocol.Backend.process`,
        once chosen; raises as :meth:`resolved` when no backend can run."""
        self.resolved().process(n, frame_numbers, windows, dst)

    def bridge_process(
        self, n: int, frame_numbers: tuple, windows: tuple, dst: tuple
    ) -> HostStep | None:
        """The chosen backend's
        :meth:`~avdenoise_vs._backends.protocol.Backend.bridge_process`, once chosen; raises as
        :meth:`resolved` when no backend can run."""
        return self.resolved().bridge_process(n, frame_numbers, windows, dst)

    def close(self) -> None:
        """Wait for the warm-up; what it raised is the frames' to report, not the caller's."""
        self._thread.join()

    def _settle(self, settle: Callable[[], Backend], core) -> None:
        with logging_to(core):
            try:
                self._backend = settle()
            except BaseException as error:  # raised again by every frame that asks
                self._error = error
            finally:
                self._done.set()


def settle_all() -> None:
    """Wait for every pending backend of the process (``prewarm``: the kernels it reports on
    must be compiled)."""
    for pending in list(_PENDING):
        pending.close()
