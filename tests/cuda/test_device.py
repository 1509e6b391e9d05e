"""Opening a CUDA device (``_cuda/_device.py``), without a GPU: the reasons a backend cannot
start, and the wait mode a process asks its context for."""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import types

import pytest

from avdenoise_vs._backends.cuda import device as _device
from avdenoise_vs._cuda import context as _context
from avdenoise_vs._environment import CudaTuning
from avdenoise_vs._errors import BackendUnavailable
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType, WeightMode
from avdenoise_vs._params.settings import Bm3dSettings, NlmSettings, Stages

__all__: list[str] = []

NLM = NlmSettings(
    planes=(0,), distance=Distance.LUMA, strength=1.2, radius=1, has_ref=False,
    search_radius=2, patch_radius=1, wmode=WeightMode.WELSCH, wref=1.0,
)  # fmt: skip
BM3D = Bm3dSettings(
    planes=(0,), distance=Distance.LUMA, plane_strengths=(3.0,), radius=0, stages=Stages.BOTH,
    lambda_ht=2.7, mismatch_scale=1.0, block_step=3, bm_range=4, ps_num=2, ps_range=4,
)  # fmt: skip
LAYOUT = FrameLayout(32, 24, ColorFamily.GRAY, 0, 0, 8, SampleType.INTEGER)


def _cupy(count: int | Exception, current: int = 0):
    """A CuPy whose runtime sees `count` devices (or raises it), `current` the current one."""

    class Runtime:
        CUDARuntimeError = RuntimeError

        @staticmethod
        def getDeviceCount() -> int:
            if isinstance(count, Exception):
                raise count
            return count

        @staticmethod
        def getDevice() -> int:
            return current

    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=Runtime))


@pytest.mark.parametrize(
    ("sync", "passes", "expected"),
    [
        ("auto", (NLM,), "auto"),
        ("auto", (NLM, BM3D), "block"),
        ("spin", (BM3D,), "spin"),
        ("block", (NLM,), "block"),
    ],
)
def test_auto_sleeps_only_for_bm3d(sync, passes, expected):
    assert _device.wait_mode(sync, passes) == expected


def test_the_device_is_the_current_one_or_the_one_asked_for():
    assert _device.device_number(_cupy(2, current=1), None) == 1
    assert _device.device_number(_cupy(2, current=1), 0) == 0


@pytest.mark.parametrize(
    ("count", "index", "reason"),
    [
        (RuntimeError("driver too old"), None, r"no usable CUDA driver \(driver too old\)"),
        (0, None, "no CUDA device found"),
        (2, 2, r"there is no CUDA device 2 \(2 found\)"),
        (2, -1, "there is no CUDA device -1"),
    ],
)
def test_missing_devices_are_unavailable_backends(count, index, reason):
    with pytest.raises(BackendUnavailable, match=reason):
        _device.device_number(_cupy(count), index)


def test_without_cupy_the_backend_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    monkeypatch.setattr(_device, "start_early_context", lambda *args: None)  # no thread
    with pytest.raises(BackendUnavailable, match="CuPy cannot be imported"):
        _device.open_device(None, "auto")
    assert os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"  # set before CuPy is looked for


def test_without_a_driver_the_early_context_logs_nothing_and_keeps_why(monkeypatch, caplog):
    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    monkeypatch.setattr(_context, "_STARTED", {})
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.delenv("AVDENOISE_DEBUG", raising=False)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(BackendUnavailable, match="CuPy cannot be imported") as raised:
        _device.open_device(None, "auto")
    assert raised.value.detail == (
        "no NVIDIA driver found (libcuda.so.1: cannot open shared object file)"
    )
    assert [r.getMessage() for r in caplog.records if r.threadName != "MainThread"] == []


def test_a_chosen_connection_count_is_kept(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _cupy(1))
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8")
    monkeypatch.setattr(_device, "start_early_context", lambda *args: None)  # no thread
    cupy, device_id = _device.open_device(None, "auto")
    assert cupy is sys.modules["cupy"] and device_id == 0
    assert os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] == "8"


@pytest.mark.parametrize(("options", "setting"), [(NLM, "search_radius=2"), (BM3D, "bm_range=4")])
def test_a_pass_needing_more_shared_memory_than_the_device_has(options, setting):
    offsets, pitches = {0: 0}, {0: 512}
    with pytest.raises(BackendUnavailable, match=f"{setting} .* than device 3 has \\(64 bytes\\)"):
        _device.new_pass(options, LAYOUT, offsets, pitches, 64, 3, CudaTuning())


def test_a_pass_that_fits_is_made():
    npass = _device.new_pass(NLM, LAYOUT, {0: 0}, {0: 512}, 227 * 1024, 0, CudaTuning())
    assert npass.options is NLM
