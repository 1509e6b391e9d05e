"""Memoized kernel factories: one compiled module per spec and device.

CuPy compiles on first launch and keeps the binary in its own on-disk cache, which already
handles several processes; nothing here writes files.
"""

from __future__ import annotations

import cupy

from .._environment import positive_int
from ._bm3d_source import BM3D_KERNELS, Bm3dSpec, bm3d_source
from ._source import CUDA_OPTIONS, NlmSpec, nlm_source

__all__ = ["get_bm3d_kernels", "get_nlm_main_kernel"]


@cupy.memoize(for_each_device=True)
def get_nlm_main_kernel(spec: NlmSpec) -> cupy.RawKernel:
    """The fused NLM kernel for `spec` on the current device (compiled on first launch)."""
    source, name = nlm_source(spec)
    return cupy.RawKernel(source, name, options=CUDA_OPTIONS)


@cupy.memoize(for_each_device=True)
def get_bm3d_kernels(spec: Bm3dSpec) -> dict[str, cupy.RawKernel]:
    """The BM3D kernels for `spec` on the current device, by name; one module, compiled once
    (CuPy shares the module of equal sources)."""
    source = bm3d_source(spec)
    threads = positive_int("split_compile")
    options = CUDA_OPTIONS + ((f"--split-compile={threads}",) if threads else ())
    return {name: cupy.RawKernel(source, name, options=options) for name in BM3D_KERNELS}
