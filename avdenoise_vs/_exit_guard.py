"""The native bridge's exit guard, kept at the head of ``atexit``'s queue.

At the interpreter's exit the bridge's guard (``_native/exit_guard.c``) stops frames from
entering Python and waits for those inside. ``atexit`` runs its callbacks last registered
first, and the bridge registers its guard when VapourSynth loads the plugin, before CuPy is
imported: CuPy's own callbacks (its memo and memory-pool shutdown flags) would then run while
frames are still in Python and on the GPU. :func:`put_first` registers the guard again after
CuPy's import, so that it runs before them.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable

__all__ = ["put_first", "register"]

_guard: list[Callable[[], None]] = []  # the bridge's callback, once registered


def register(callback: Callable[[], None]) -> None:
    """Register the bridge's guard with ``atexit`` (``_native/exit_guard.c`` calls this once, at
    plugin load)."""
    _guard[:] = [callback]
    atexit.register(callback)


def put_first() -> None:
    """Move the guard, if the bridge registered one, to the head of ``atexit``'s queue."""
    for callback in _guard:
        atexit.unregister(callback)
        atexit.register(callback)
