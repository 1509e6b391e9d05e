"""Memoized kernel factories: one compiled module per kernel, spec and device.

CuPy compiles on first launch and keeps the binary in its own on-disk cache, which already
handles several processes; nothing here writes files. What a spec compiles is its own
``modules()`` (``source.py``), which the compile ahead of the context asks too.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import cupy

__all__ = ["get_bm3d_kernels", "get_nlm_main_kernel"]


@cupy.memoize(for_each_device=True)
def get_nlm_main_kernel(spec) -> cupy.RawKernel:
    """The fused NLM kernel for `spec` (an ``NlmSpec``) on the current device, compiled on
    first launch."""
    (module,) = spec.modules()
    return cupy.RawKernel(module.source, module.name, options=module.options)


@cupy.memoize(for_each_device=True)
def get_bm3d_kernels(spec) -> dict[str, cupy.RawKernel]:
    """The kernels that a pass of `spec` (a ``Bm3dSpec``) launches on the current device, by
    role, compiled (or loaded from CuPy's cache) side by side before this returns."""
    kernels = {
        module.role: cupy.RawKernel(module.source, module.name, options=module.options)
        for module in spec.modules()
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
