"""Catches name what they expect, and a fallback says why: the logging helpers (``_log.py``)
and the warm-up key's probes (``_warmup_cache.py``). CPU only, on fake modules."""

from __future__ import annotations

import logging
import sys
import types

import pytest

from avdenoise_vs import _errors, _log
from avdenoise_vs._warmup import cache as _warmup_cache

__all__: list[str] = []


class _Error(Exception):
    """A stand-in for ``vapoursynth.Error``."""


def _vapoursynth(core) -> types.ModuleType:
    """A ``vapoursynth`` module whose ``core.core`` is `core`, or raises it (an exception)."""

    class Proxy:
        @property
        def core(self):
            if isinstance(core, BaseException):
                raise core
            return core

    module = types.ModuleType("vapoursynth")
    module.Error = _Error
    module.MESSAGE_TYPE_WARNING = 2
    module.core = Proxy()
    return module


def test_no_core_without_vapoursynth_or_on_a_thread_without_one(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "vapoursynth", raising=False)
    assert _log.script_core() is None
    monkeypatch.setitem(sys.modules, "vapoursynth", _vapoursynth(_Error("no environment")))
    assert _log.script_core() is None
    # A module still being imported has no `core` yet.
    monkeypatch.setitem(sys.modules, "vapoursynth", types.ModuleType("vapoursynth"))
    assert _log.script_core() is None


def test_a_bug_behind_the_core_is_not_taken_for_no_core(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "vapoursynth", _vapoursynth(ZeroDivisionError("bug")))
    with pytest.raises(ZeroDivisionError):
        _log.script_core()


def test_a_warning_without_a_core_goes_to_the_logger(monkeypatch, caplog) -> None:
    monkeypatch.setitem(sys.modules, "vapoursynth", _vapoursynth(_Error("no environment")))
    with caplog.at_level(logging.WARNING, logger="avdenoise_vs.test"):
        _log.vs_warning(logging.getLogger("avdenoise_vs.test"), "avdenoise.X: said")
    assert [r.getMessage() for r in caplog.records] == ["avdenoise.X: said"]


def test_a_warning_goes_to_the_core_where_there_is_one(monkeypatch, caplog) -> None:
    said: list[tuple[int, str]] = []
    core = types.SimpleNamespace(log_message=lambda kind, text: said.append((kind, text)))
    monkeypatch.setitem(sys.modules, "vapoursynth", _vapoursynth(core))
    with caplog.at_level(logging.WARNING, logger="avdenoise_vs.test"):
        _log.vs_warning(logging.getLogger("avdenoise_vs.test"), "avdenoise.X: said")
    assert said == [(2, "avdenoise.X: said")] and caplog.records == []


class _Raising(logging.Handler):
    """A handler that raises `error` on every record, as VapourSynth's bridge does (R79)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(logging.DEBUG)
        self.error = error

    def emit(self, record: logging.LogRecord) -> None:
        raise self.error


@pytest.mark.parametrize("error", [AttributeError("no attribute 'parent'"), KeyError("bug")])
def test_thread_debug_survives_the_bridges_error_only(error) -> None:
    logger = logging.getLogger("avdenoise_vs.test.thread_debug")
    handler = _Raising(error)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        if isinstance(error, AttributeError):
            _log.thread_debug(logger, "frame %d", 1)
        else:
            with pytest.raises(KeyError):
                _log.thread_debug(logger, "frame %d", 1)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


def test_a_key_without_cupy_says_why(monkeypatch, caplog) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    with caplog.at_level(logging.DEBUG, logger="avdenoise_vs._warmup.queue"):
        assert _warmup_cache.environment_fingerprint.__wrapped__() == "no-cupy"
    assert "it cannot be imported (ModuleNotFoundError: import of cupy halted" in caplog.text


def test_a_key_without_nvrtc_or_gpu_says_why(caplog) -> None:
    def fails(*args):
        raise RuntimeError("CuPy failed to load libnvrtc.so.13: OSError: no file\nmore")

    runtime = types.SimpleNamespace(getDevice=fails, deviceGetAttribute=fails)
    cupy = types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=runtime, nvrtc=types.SimpleNamespace(getVersion=fails))
    )
    with caplog.at_level(logging.DEBUG, logger="avdenoise_vs._warmup.queue"):
        assert _warmup_cache._nvrtc_part(cupy) == "nvrtc=none"
        assert _warmup_cache._arch_part(cupy, None) == "sm=none"
    cause = "RuntimeError: CuPy failed to load libnvrtc.so.13: OSError: no file"
    assert caplog.text.count(cause) == 2 and "more" not in caplog.text


def test_one_line() -> None:
    assert _errors.one_line(OSError("first\nsecond")) == "OSError: first"
    assert _errors.one_line(KeyError()) == "KeyError"
