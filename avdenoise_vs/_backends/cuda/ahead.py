"""NVRTC ahead of the CUDA context: fill CuPy's kernel cache while the context comes up.

In a cold Av1an fleet one worker compiles under the warm-up queue while the others wait for
it, so its compile is on every worker's critical path. NVRTC needs no CUDA context, only the
target architecture, but a ``cupy.RawKernel`` compiles on its first use, with the context
current, and a worker's context takes 0.5-1 s to come up when a whole fleet starts at once.
So the worker that holds the queue's place asks CuPy for each module's binary on threads of
its own before it touches the context: CuPy compiles and writes the binary into its disk
cache, then loads it (on the H200's driver the load succeeded on such a thread; where it
fails for want of a context, the file is written all the same), and the kernels' first use,
once the context is up, loads the cached binaries. In a cold fleet of BM3D radius 0 the
waiting workers had warm kernels 0.6 s sooner and the fleet ran 543-562 fps against
502-513 (H200, docs/BENCHMARKS.md: "Cold caches").

The binaries must be the ones the kernels' first use looks for: the same source and options
(each spec's ``modules()``), through the same CuPy function a ``RawKernel`` compiles with
(``cupy._core.core.compile_with_cache``), for the architecture CuPy's own ``_get_arch`` would
pick, read here from the device's attributes, which need no context. That function and the
architecture limits are CuPy's internals, so everything here is best effort: whatever is
missing or fails (another CuPy, an NVRTC error) leaves the compile to the kernels' first use,
as without this module, which then reports the error. Nothing here raises.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

from avdenoise_vs._warmup.cache import device_capability

__all__ = ["CompileAhead", "cupy_arch"]

logger = logging.getLogger(__name__)


def cupy_arch(cupy, device_id: int) -> str:
    """The architecture CuPy compiles for on `device_id` (``compiler._get_arch``), found
    without a context: ``Device.compute_capability`` would make the device current, which
    creates its context."""
    capability = device_capability(cupy, device_id)
    compiler = cupy.cuda.compiler
    if capability in compiler._tegra_archs:
        return capability
    return min(capability, compiler._get_max_compute_capability(), key=int)


class CompileAhead:
    """The modules of some kernel specs, being compiled into CuPy's cache on threads of their own.

    Parameters
    ----------
    cupy : module
    specs : iterable of NlmSpec or Bm3dSpec
        What the backend's passes compile (``CudaBackend.kernel_specs``).
    device_id : int
        The device the kernels will run on.
    """

    def __init__(self, cupy, specs, device_id: int) -> None:
        self._futures: list[Future] = []
        try:
            arch = cupy_arch(cupy, device_id)
            compile_with_cache = cupy._core.core.compile_with_cache
            modules = [module for spec in specs for module in spec.modules()]
        # Anything (another CuPy's internals, no device attributes): it only costs the head start.
        except Exception as error:
            logger.debug("avdenoise: no compile ahead of the context: %s", error)
            return
        pool = ThreadPoolExecutor(len(modules), thread_name_prefix="avdenoise-ahead")
        self._futures = [
            pool.submit(_compile_into_cache, compile_with_cache, module, arch) for module in modules
        ]
        pool.shutdown(wait=False)

    def wait(self) -> int:
        """Wait for every module; returns how many reached CuPy's cache (for tests and logs)."""
        return sum(future.result() for future in self._futures)


def _compile_into_cache(compile_with_cache, module, arch: str) -> bool:
    """Compile one module as its ``RawKernel`` would; True when the binary reached the cache
    (CuPy writes it before loading it, so a load that fails for want of a context counts)."""
    try:
        compile_with_cache(module.source, module.options, arch=arch, prepend_cupy_headers=False)
    except Exception as error:  # anything: the warm-up's own compile is what counts
        # A driver error comes from the load, after the file was written. A compile error is
        # raised again, with its log, by the kernel's own compile.
        compiled = type(error).__name__ == "CUDADriverError"
        if not compiled:
            logger.debug("avdenoise: compile ahead of %s failed: %s", module.name, error)
        return compiled
    return True
