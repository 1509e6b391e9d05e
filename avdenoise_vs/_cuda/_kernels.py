"""Memoized kernel factories: one compiled kernel per :class:`~._source.NlmSpec` and device.

CuPy compiles on first launch and keeps the binary in its own on-disk cache, which already
handles several processes; nothing here writes files.
"""

from __future__ import annotations

import cupy

from ._source import CUDA_OPTIONS, NlmSpec, nlm_source

__all__ = ["get_nlm_main_kernel"]


@cupy.memoize(for_each_device=True)
def get_nlm_main_kernel(spec: NlmSpec) -> cupy.RawKernel:
    """The fused NLM kernel for `spec` on the current device (compiled on first launch)."""
    source, name = nlm_source(spec)
    return cupy.RawKernel(source, name, options=CUDA_OPTIONS)
