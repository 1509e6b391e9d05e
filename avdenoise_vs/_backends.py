"""Choose the backend that runs a filter: ``device`` and ``accelerators`` decide.

Backends share one interface: ``process(n, frame_numbers, windows, dst)`` (the bridge's frame
protocol, see ``_native/bridge.c``). A GPU backend that cannot start (no CuPy, no device)
is skipped by ``device='auto'`` and reported when it was asked for by name.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ._options import FrameLayout, PlaneOptions

__all__ = ["BackendUnavailable", "select_backend"]

logger = logging.getLogger(__name__)


class BackendUnavailable(Exception):
    """A backend cannot run here; the message says why."""


def select_backend(
    function: str,
    device: str,
    accelerators: Sequence[str],
    passes: tuple[PlaneOptions, ...],
    layout: FrameLayout,
):
    """Build the backend for a call.

    Raises
    ------
    ValueError
        When the requested device cannot run (``device='cuda'`` without a usable GPU), or
        when no accelerator of ``accelerators`` can.
    """
    if device == "auto":
        candidates = [(name, None) for name in accelerators]
    else:
        name, _, index = device.partition(":")
        candidates = [(name, int(index) if index else None)]
    reasons = []
    for name, index in candidates:
        try:
            backend = _build(name, index, passes, layout)
        except BackendUnavailable as error:
            logger.debug("avdenoise: backend %s unavailable: %s", name, error)
            reasons.append(f"{name}: {error}")
            continue
        logger.debug("avdenoise.%s: running on %s", function, name)
        return backend
    raise ValueError(
        f"avdenoise.{function}: device={device!r} cannot run here ({'; '.join(reasons)})"
    )


def _build(name: str, index: int | None, passes, layout: FrameLayout):
    if name == "cpu":
        from ._reference.backend import NumpyBackend

        return NumpyBackend(passes, layout)
    from .warmup import record_phase

    record_phase("script")
    try:
        from ._cuda.backend import CudaBackend
    except ImportError as error:
        raise BackendUnavailable(f"the CUDA backend cannot load ({error})") from error
    backend = CudaBackend(passes, layout, device_index=index)
    record_phase("cuda")
    _warm_up(backend, (passes, index), layout)
    record_phase("warm")
    return backend


def _warm_up(backend, options, layout: FrameLayout) -> None:
    """Compile every kernel of the configuration now, one process at a time (issue #3).

    Running the whole per-frame pipeline once on a synthetic frame also compiles CuPy's own
    kernels that it uses. Under the warm-up queue, the first of many Av1an workers compiles
    while the others wait and then load the warm cache.
    """
    from . import warmup

    warmup.warm_up(warmup.kernel_key(options, layout), backend.warm_up)
