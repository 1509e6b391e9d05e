"""Skip a GPU test module cleanly where CuPy or a CUDA device is missing."""

from __future__ import annotations

import pytest

__all__ = ["device_count", "require_cuda"]


def device_count(cupy) -> int:
    """CUDA devices CuPy sees; 0 without a driver, or with a broken one."""
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def require_cuda():
    """Return CuPy, or skip the calling module: no CuPy, or no usable CUDA device (CI)."""
    cupy = pytest.importorskip("cupy")
    if device_count(cupy) == 0:
        pytest.skip("no CUDA device", allow_module_level=True)
    return cupy
