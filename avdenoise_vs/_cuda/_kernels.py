"""Memoized kernel factories: one compiled module per spec and device.

CuPy compiles on first launch and keeps the binary in its own on-disk cache, which already
handles several processes; nothing here writes files.
"""

from __future__ import annotations

import cupy

from .._environment import positive_int
from ._bm3d_source import BM3D_KERNELS, Bm3dSpec, bm3d_kernel_name, bm3d_source
from ._source import CUDA_OPTIONS, NlmSpec, nlm_source

__all__ = ["get_bm3d_kernels", "get_nlm_main_kernel"]

#: The first NVRTC that takes ``--split-compile`` (CUDA 12.1).
_SPLIT_COMPILE_NVRTC = (12, 1)


@cupy.memoize(for_each_device=True)
def get_nlm_main_kernel(spec: NlmSpec) -> cupy.RawKernel:
    """The fused NLM kernel for `spec` on the current device (compiled on first launch)."""
    source, name = nlm_source(spec)
    return cupy.RawKernel(source, name, options=CUDA_OPTIONS)


@cupy.memoize(for_each_device=True)
def get_bm3d_kernels(spec: Bm3dSpec) -> dict[str, cupy.RawKernel]:
    """The BM3D kernels for `spec` on the current device, by role (``BM3D_KERNELS``); one
    module, compiled once (CuPy shares the module of equal sources)."""
    source = bm3d_source(spec)
    # NVRTC compiles the module's kernels on several threads: a cold fleet's worker compiled
    # BM3D radius 0 in 2.5 s instead of 3.2 s on 16 cores, V-BM3D in 2.6 s instead of 4.1 s
    # (H200, docs/BENCHMARKS.md: "Cold caches"), while the other workers wait for it.
    options = CUDA_OPTIONS
    if cupy.cuda.nvrtc.getVersion() >= _SPLIT_COMPILE_NVRTC:
        threads = positive_int("split_compile") or 0  # 0: as many as the machine has
        options = (*options, f"--split-compile={threads}")
    return {
        kernel: cupy.RawKernel(source, bm3d_kernel_name(spec, kernel), options=options)
        for kernel in BM3D_KERNELS
    }
