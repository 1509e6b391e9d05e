"""What every kernel source shares: sample type codes, compiler options and the record of one
module to compile. Pure data: importing this never imports CuPy.

Each spec (``NlmSpec``, ``Bm3dSpec``) says what it compiles through its ``modules()``; the
kernel factories (``kernels.py``) and the compile ahead of the context
(``backends/cuda/ahead.py``) both ask it, so they ask CuPy for the same binaries.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["CUDA_OPTIONS", "DTYPE_CODES", "DTYPE_TAGS", "ModuleSource", "threaded_options"]

#: Sample type codes (``NLM_DTYPE``, ``BM_DTYPE``) by NumPy dtype name.
DTYPE_CODES = {"uint8": 0, "uint16": 1, "float32": 2}
#: Sample type tags of kernel names by NumPy dtype name.
DTYPE_TAGS = {"uint8": "u8", "uint16": "u16", "float32": "f32"}
#: Compiler options. NVRTC picks the device's own architecture.
CUDA_OPTIONS = ("-std=c++17",)
#: The first NVRTC that takes ``--split-compile`` (CUDA 12.1).
_SPLIT_COMPILE_NVRTC = (12, 1)


class ModuleSource(NamedTuple):
    """One module to compile: its role in the pass, CUDA source, kernel name and options."""

    role: str
    source: str
    name: str
    options: tuple[str, ...]


def threaded_options() -> tuple[str, ...]:
    """`CUDA_OPTIONS`, plus NVRTC's own compile threads where this NVRTC has them.

    Within a module, NVRTC compiles on several threads: a cold fleet's worker compiled BM3D
    radius 0 in 2.5 s instead of 3.2 s on 16 cores, V-BM3D in 2.6 s instead of 4.1 s (H200,
    docs/BENCHMARKS.md: "Cold caches"), while the other workers wait for it.
    """
    import cupy  # only when a module is compiled

    if cupy.cuda.nvrtc.getVersion() >= _SPLIT_COMPILE_NVRTC:
        return (*CUDA_OPTIONS, "--split-compile=0")  # 0: as many threads as the machine has
    return CUDA_OPTIONS
