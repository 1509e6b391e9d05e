"""Fixtures of the CUDA backend's host-side tests, which run on the fakes of ``_fake_cuda.py``."""

from __future__ import annotations

import pytest

from ._fake_cuda import Bridge, install


@pytest.fixture
def fake_cupy(monkeypatch):
    """Install the fake CuPy, driver calls and NLM kernel; returns (runtime, calls)."""
    return install(monkeypatch)


@pytest.fixture(params=["python", "bridge"])
def caller(request):
    """Who finishes frames: Python (``process``) or the bridge (``bridge_process``)."""
    return Bridge() if request.param == "bridge" else None
