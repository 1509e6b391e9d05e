"""A GPU backend's warm-up on a thread of its own: the filter comes back at once, and its first
frame waits for the choice (``_pending.PendingBackend``). CPU only, with the fake
CUDA backend (``fake_cuda_backend.py``), whose warm-up here waits for the test's word."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from avdenoise_vs._backends import pending as _pending
from avdenoise_vs._backends import select as _backends
from avdenoise_vs._plugin.filter import BACKEND_PROPERTY, FilterPlan

from .fake_cuda_backend import LAYOUT, PASSES, first_plane, random_clip

vs = pytest.importorskip("vapoursynth")


__all__: list[str] = []


@pytest.fixture
def held(fake_cuda):
    """The fake backend's warm-up blocks until the test sets the event it returns."""
    go = threading.Event()
    warm_up = fake_cuda.warm_up

    def held_warm_up(self) -> None:
        assert go.wait(10), "the test never let the warm-up go on"
        warm_up(self)

    fake_cuda.warm_up = held_warm_up
    return go


def test_the_filter_comes_back_before_its_warm_up_ends(core, fake_cuda, held) -> None:
    clip = random_clip(core)
    out = core.avdenoise.Denoise(clip)  # would hang here, were the warm-up the constructor's
    assert fake_cuda.built and not fake_cuda.built[0].compiled
    held.set()
    expected = first_plane(core.avdenoise.Denoise(clip, device="cpu").get_frame(1))
    frame = out.get_frame(1)
    np.testing.assert_array_equal(first_plane(frame), expected)
    assert frame.props[BACKEND_PROPERTY] == "cuda"
    assert fake_cuda.built[0].compiles == 1


def test_a_fallback_decided_on_the_first_frame_names_the_cpu(core, fake_cuda, held, vs_log):
    fake_cuda.failures = 1
    out = core.avdenoise.Denoise(random_clip(core))
    held.set()
    assert {out.get_frame(n).props[BACKEND_PROPERTY] for n in range(3)} == {"cpu"}
    assert any("device='auto' runs on cpu instead" in m for m in vs_log)


def test_frames_asked_at_once_wait_for_one_warm_up(core, fake_cuda, held) -> None:
    out = core.avdenoise.Denoise(random_clip(core))
    futures = [out.get_frame_async(n) for n in range(4)]
    held.set()
    assert len({f.result().props[BACKEND_PROPERTY] for f in futures}) == 1
    assert len(fake_cuda.built) == 1 and fake_cuda.built[0].compiles == 1


def test_a_device_that_cannot_start_fails_the_first_frame_naming_it(core, fake_cuda) -> None:
    fake_cuda.context_fails = "CUDA device 0 cannot start (cudaErrorDevicesUnavailable)"
    out = core.avdenoise.Denoise(random_clip(core), device="cuda")  # the context is the warm-up's
    with pytest.raises(vs.Error, match=r"device='cuda' cannot run here .*cannot start"):
        out.get_frame(0)


def test_auto_moves_to_the_cpu_when_the_device_cannot_start(core, fake_cuda) -> None:
    fake_cuda.context_fails = "CUDA device 0 cannot start (cudaErrorDevicesUnavailable)"
    out = core.avdenoise.Denoise(random_clip(core))
    assert out.get_frame(0).props[BACKEND_PROPERTY] == "cpu"


def test_closing_waits_for_the_warm_up(fake_cuda, held, monkeypatch) -> None:
    """A filter freed before its first frame (vspipe --info) ends its warm-up first."""
    pending = _backends.select_backend(
        "Denoise", "auto", ["cuda", "cpu"], PASSES, LAYOUT, defer=True
    )
    plan = FilterPlan(("clip",), 1, (), pending)
    assert isinstance(plan.backend, _pending.PendingBackend)
    threading.Timer(0.05, held.set).start()
    plan.close()
    assert fake_cuda.built[0].compiled


def test_prewarm_waits_for_every_pending_warm_up(fake_cuda, held) -> None:
    pending = [
        _backends.select_backend("Denoise", "cuda", ["cuda"], PASSES, LAYOUT, defer=True)
        for _ in range(2)
    ]
    threading.Timer(0.05, held.set).start()
    _pending.settle_all()
    assert all(p.resolved().compiled for p in pending)


class PythonVSScriptLoggingBridge(logging.Handler):
    """Stands in for vspipe's bridge, which raises on records of threads it did not start."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.threadName.startswith("avdenoise."):
            raise AttributeError("'PythonVSScriptLoggingBridge' object has no attribute 'parent'")


def test_the_warm_up_thread_logs_past_vapoursynths_bridge(fake_cuda, held, caplog) -> None:
    bridge = PythonVSScriptLoggingBridge(level=logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(bridge)
    try:
        with caplog.at_level(logging.DEBUG):
            pending = _backends.select_backend(
                "Denoise", "cuda", ["cuda"], PASSES, LAYOUT, defer=True
            )
            held.set()
            assert pending.resolved().compiled  # the choice's debug records did not fail it
        assert any("running on cuda" in r.getMessage() for r in caplog.records)
    finally:
        root.removeHandler(bridge)
