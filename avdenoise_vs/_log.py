"""Logging from VapourSynth's worker threads, which must never fail a frame."""

from __future__ import annotations

import logging

__all__ = ["thread_debug"]


def thread_debug(logger: logging.Logger, message: str, *args) -> None:
    """``logger.debug`` that never raises.

    Under vspipe (R79) a log record from a VapourSynth worker thread can raise inside
    VapourSynth's logging bridge (``'PythonVSScriptLoggingBridge' object has no attribute
    'parent'``, seen on 2026-11-30), which would turn a debug message into a failed frame.
    """
    try:
        logger.debug(message, *args)
    except Exception:
        pass
