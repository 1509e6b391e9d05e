"""Skip a GPU test module cleanly where CuPy or a CUDA device is missing."""

from __future__ import annotations

import pytest

__all__ = ["require_cuda"]


def require_cuda():
    """Return CuPy, or skip the calling module: no CuPy, or no usable CUDA device (CI)."""
    cupy = pytest.importorskip("cupy")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no driver at all, or a broken one
        count = 0
    if count == 0:
        pytest.skip("no CUDA device", allow_module_level=True)
    return cupy
