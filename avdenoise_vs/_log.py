"""Logging that must never fail a frame or a filter's creation."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading

__all__ = [
    "OWN_THREAD_PREFIX",
    "logging_to",
    "script_core",
    "shield_vs_logging_bridge",
    "thread_debug",
    "vs_warning",
]

#: Name prefix of the package's own threads (``_backends.pending``'s warm-ups).
OWN_THREAD_PREFIX = "avdenoise."

#: The core that :func:`vs_warning` logs to on a thread other than the script's.
_bound = threading.local()


def thread_debug(logger: logging.Logger, message: str, *args) -> None:
    """``logger.debug`` that never raises.

    Under vspipe (R79) a log record from a VapourSynth worker thread can raise inside
    VapourSynth's logging bridge (``'PythonVSScriptLoggingBridge' object has no attribute
    'parent'``), which would turn a debug message into a failed frame. The record is lost
    then: the logging that would say so is what failed.
    """
    try:
        logger.debug(message, *args)
    except AttributeError:  # the bridge's own bug, on a thread without a VapourSynth core
        pass


def vs_warning(logger: logging.Logger, message: str) -> None:
    """Warn through VapourSynth's log, which vspipe and Av1an show, else through `logger`.

    Parameters
    ----------
    logger : logging.Logger
        Where the warning goes when VapourSynth is not loaded or has no core here.
    message : str
        The whole message, ``avdenoise...: `` prefix included.
    """
    vapoursynth = sys.modules.get("vapoursynth")
    core = getattr(_bound, "core", None) or script_core()
    if core is None or vapoursynth is None:
        logger.warning(message)
        return
    try:
        core.log_message(vapoursynth.MESSAGE_TYPE_WARNING, message)
    except vapoursynth.Error:  # the core refuses it: the message must still be seen
        logger.warning(message)


def script_core():
    """The VapourSynth core of the calling thread's script (a ``vapoursynth.Core``), or None
    where VapourSynth is not loaded or this thread has no core."""
    # Only a process that already runs VapourSynth has a core: importing it here would start
    # one in processes that use the package without VapourSynth.
    vapoursynth = sys.modules.get("vapoursynth")
    if vapoursynth is None:
        return None
    try:
        return vapoursynth.core.core
    # vapoursynth.Error: no environment on this thread (under vspipe, a thread that its script
    # did not start); AttributeError: a module still being imported, without `core` yet.
    except (AttributeError, getattr(vapoursynth, "Error", AttributeError)):
        return None


@contextlib.contextmanager
def logging_to(core):
    """Within the block, :func:`vs_warning` on this thread logs to `core` (of
    :func:`script_core`; None: the thread's own): under vspipe a thread that the script did
    not start has no core of its own."""
    previous = getattr(_bound, "core", None)
    _bound.core = core
    try:
        yield
    finally:
        _bound.core = previous


class _OwnThreads(logging.Filter):
    """Lets through only the records of threads that are not the package's own."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.threadName.startswith(OWN_THREAD_PREFIX)


def shield_vs_logging_bridge() -> None:
    """Keep the records of the package's own threads from VapourSynth's logging bridge.

    Under vspipe (R79) the bridge, a handler of the root logger while the script runs, raises
    on a record from a thread the script did not start (see :func:`thread_debug`), which would
    fail every frame of a warm-up run on a thread of its own. Other handlers still get them.
    Call it on the script's thread, before starting such a thread.
    """
    for handler in logging.getLogger().handlers:
        if "VSScriptLoggingBridge" in type(handler).__name__ and not any(
            isinstance(f, _OwnThreads) for f in handler.filters
        ):
            handler.addFilter(_OwnThreads())
