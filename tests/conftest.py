"""Shared fixtures: a VapourSynth core with the bridge loaded, a cold cache directory, and the
fake CUDA backend's (``fake_cuda_backend.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .fake_cuda_backend import fake_cuda, vs_log  # noqa: F401  (fixtures for every test)


@pytest.fixture(scope="session")
def core():
    """The process's core, with ``avdenoise`` registered (autoloaded, or loaded by the import).

    VapourSynth is imported here, not at module level, so that the backend tests that need
    no VapourSynth (tests/cuda/test_nlm_cuda.py) still run where it is missing.
    """
    vs = pytest.importorskip("vapoursynth")
    import avdenoise_vs  # noqa: F401  (loads the in-tree bridge in an editable checkout)

    core = vs.core
    if not any(p.namespace == "avdenoise" for p in core.plugins()):
        pytest.fail("the avdenoise plugin is not registered: install the package (pip install .)")
    return core


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cold cache directory, with the queue's switches in their default state."""
    for name in ("CUPY_CACHE_IN_MEMORY", "AVDENOISE_WARMUP", "AVDENOISE_WARMUP_REPORT"):
        monkeypatch.delenv(name, raising=False)
    directory = tmp_path / "kernel_cache"
    directory.mkdir()
    return directory
