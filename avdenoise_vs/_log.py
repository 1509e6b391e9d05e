"""Logging that must never fail a frame or a filter's creation."""

from __future__ import annotations

import logging
import sys

__all__ = ["thread_debug", "vs_warning"]


def thread_debug(logger: logging.Logger, message: str, *args) -> None:
    """``logger.debug`` that never raises.

    Under vspipe (R79) a log record from a VapourSynth worker thread can raise inside
    VapourSynth's logging bridge (``'PythonVSScriptLoggingBridge' object has no attribute
    'parent'``), which would turn a debug message into a failed frame.
    """
    try:
        logger.debug(message, *args)
    except Exception:
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
    # Only a process that already runs VapourSynth gets the VS log: importing it here would
    # start a core in processes that use the package without VapourSynth.
    vapoursynth = sys.modules.get("vapoursynth")
    try:
        vapoursynth.core.log_message(vapoursynth.MESSAGE_TYPE_WARNING, message)  # type: ignore[union-attr]
    except Exception:  # absent, or no core in this thread
        logger.warning(message)
