"""Shared fixture: a VapourSynth core with the bridge loaded."""

from __future__ import annotations

import pytest


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
