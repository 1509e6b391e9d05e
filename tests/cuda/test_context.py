"""The early CUDA context (``_cuda/_context.py``): a driver's calls in order, without a GPU."""

from __future__ import annotations

import ctypes

import pytest

from avdenoise_vs._cuda import context as _context


class FakeDriver:
    """The driver calls the early context makes, recorded; `fail` names one that fails."""

    def __init__(self, calls: list, fail: str = "") -> None:
        self.calls, self.fail = calls, fail

    def __getattr__(self, name: str):
        def call(*args):
            self.calls.append(name)
            return 1 if name == self.fail else 0

        return call


@pytest.fixture
def driver(monkeypatch):
    calls: list[str] = []
    state = {"fail": ""}
    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeDriver(calls, state["fail"]))
    monkeypatch.setattr(_context, "_STARTED", {})
    return calls, state


def test_the_context_is_retained_after_the_flags_and_released_on_request(driver):
    calls, _ = driver
    early = _context.start_early_context(1, lambda ordinal: calls.append(("flags", ordinal)))
    assert _context.start_early_context(1, lambda ordinal: None) is early  # one a device
    early.release()
    assert calls == ["cuInit", "cuDeviceGet", ("flags", 1), "cuDevicePrimaryCtxRetain",
                     "cuCtxPushCurrent_v2", "cuCtxSetLimit", "cuCtxPopCurrent_v2",
                     "cuDevicePrimaryCtxRelease"]  # fmt: skip
    assert _context.start_early_context(1, lambda ordinal: None) is not early  # released: anew


@pytest.mark.parametrize("failing", ["cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain"])
def test_a_refusing_driver_leaves_the_context_to_cupy(driver, failing):
    calls, state = driver
    state["fail"] = failing
    early = _context.start_early_context(0, lambda ordinal: calls.append(("flags", ordinal)))
    early.release()
    assert "cuDevicePrimaryCtxRelease" not in calls
    assert (("flags", 0) in calls) == (failing == "cuDevicePrimaryCtxRetain")


def test_a_context_whose_stack_cannot_be_trimmed_is_kept(driver):
    """The stack limit saves memory only: a refused push leaves the default and the context."""
    calls, state = driver
    state["fail"] = "cuCtxPushCurrent_v2"
    early = _context.start_early_context(0, lambda ordinal: None)
    early.release()
    assert "cuCtxSetLimit" not in calls and calls[-1] == "cuDevicePrimaryCtxRelease"
    assert early.failure is None


def test_a_driver_without_the_stack_calls_still_gives_the_context(driver, monkeypatch):
    calls, _ = driver

    def missing(self, context):
        raise AttributeError("cuCtxPushCurrent_v2")

    monkeypatch.setattr(FakeDriver, "cuCtxPushCurrent_v2", missing, raising=False)
    early = _context.start_early_context(0, lambda ordinal: None)
    early.release()
    assert early.failure is None and calls[-1] == "cuDevicePrimaryCtxRelease"


def test_without_an_index_the_thread_places_the_process_after_cuinit(driver, monkeypatch):
    calls, _ = driver

    def placed(requested):
        calls.append(("placed", requested))
        return 1

    monkeypatch.setattr(_context, "device_for_process", placed)
    early = _context.start_early_context(None, lambda ordinal: calls.append(("flags", ordinal)))
    assert _context.start_early_context(None, lambda ordinal: None) is early
    early.release()
    assert calls[:4] == ["cuInit", ("placed", None), "cuDeviceGet", ("flags", 1)]


def test_no_driver_at_all_is_no_error(monkeypatch):
    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    monkeypatch.setattr(_context, "_STARTED", {})
    _context.start_early_context(
        None, lambda ordinal: pytest.fail("no flags without a driver")
    ).release()
