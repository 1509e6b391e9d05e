"""Memoized kernel factories: one compiled module per kernel, spec and device.

CuPy compiles on first launch and keeps the binary in its own on-disk cache, which already
handles several processes; nothing here writes files. :func:`module_sources` is the one list
of what a spec compiles (source, kernel name, options), for the factories here and for the
compile ahead of the CUDA context (``_ahead.py``), which must ask CuPy for the same binaries.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import cupy

from ._bm3d_source import Bm3dSpec, bm3d_kernel_name, bm3d_source
from ._source import CUDA_OPTIONS, NlmSpec, nlm_source

__all__ = ["ModuleSource", "get_bm3d_kernels", "get_nlm_main_kernel", "module_sources"]

#: The first NVRTC that takes ``--split-compile`` (CUDA 12.1).
_SPLIT_COMPILE_NVRTC = (12, 1)


class ModuleSource(NamedTuple):
    """One module to compile: its role in the pass, CUDA source, kernel name and options."""

    role: str
    source: str
    name: str
    options: tuple[str, ...]


def module_sources(spec: NlmSpec | Bm3dSpec) -> tuple[ModuleSource, ...]:
    """What a pass of `spec` compiles: one module per kernel it launches.

    BM3D kernels are modules of their own, compiled side by side: NVRTC releases the GIL, and
    in a cold fleet every other worker waits for this one. A one-stage pass compiles no Wiener
    kernel: off the GPU, NVRTC 13.0 took 1.9 s for the four kernels in one module and 1.05 s
    for load, hard and finish side by side (BM3D radius 0, luma, sm_90).
    """
    if isinstance(spec, NlmSpec):
        source, name = nlm_source(spec)
        return (ModuleSource("nlm", source, name, CUDA_OPTIONS),)
    # Within a module, NVRTC compiles on several threads too: a cold fleet's worker compiled
    # BM3D radius 0 in 2.5 s instead of 3.2 s on 16 cores, V-BM3D in 2.6 s instead of 4.1 s
    # (H200, docs/BENCHMARKS.md: "Cold caches"), while the other workers wait for it.
    options = CUDA_OPTIONS
    if cupy.cuda.nvrtc.getVersion() >= _SPLIT_COMPILE_NVRTC:
        options = (*options, "--split-compile=0")  # 0: as many threads as the machine has
    return tuple(
        ModuleSource(role, bm3d_source(spec, (role,)), bm3d_kernel_name(spec, role), options)
        for role in spec.kernels
    )


@cupy.memoize(for_each_device=True)
def get_nlm_main_kernel(spec: NlmSpec) -> cupy.RawKernel:
    """The fused NLM kernel for `spec` on the current device (compiled on first launch)."""
    (module,) = module_sources(spec)
    return cupy.RawKernel(module.source, module.name, options=module.options)


@cupy.memoize(for_each_device=True)
def get_bm3d_kernels(spec: Bm3dSpec) -> dict[str, cupy.RawKernel]:
    """The kernels that a pass of `spec` launches (``spec.kernels``) on the current device, by
    role, compiled (or loaded from CuPy's cache) side by side before this returns."""
    kernels = {
        module.role: cupy.RawKernel(module.source, module.name, options=module.options)
        for module in module_sources(spec)
    }
    _compile_side_by_side(kernels.values(), cupy.cuda.runtime.getDevice())
    return kernels


def _compile_side_by_side(kernels, device: int) -> None:
    """Compile (or load) `kernels` on threads of their own; a failed compile re-raises here."""

    def load(kernel: cupy.RawKernel) -> None:
        with cupy.cuda.Device(device):
            kernel.kernel  # noqa: B018  (CuPy compiles on first access)

    if len(kernels) == 1:
        load(next(iter(kernels)))
        return
    with ThreadPoolExecutor(len(kernels), thread_name_prefix="avdenoise-nvrtc") as pool:
        list(pool.map(load, kernels))  # list(): re-raises
