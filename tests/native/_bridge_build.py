"""The bridge compiled here as setup.py compiles it, for the native tests that load a variant
of their own (``test_gpu_frames_build.py``, ``test_gpu_frames_native.py``)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

vs = pytest.importorskip("vapoursynth")

__all__ = ["COMPILER", "HAS_GPU_API", "NATIVE", "build", "needs_compiler", "needs_gpu_api"]

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "avdenoise_vs" / "_native"
VS_INCLUDE = Path(vs.__file__).parent / "include"
HAS_GPU_API = (VS_INCLUDE / "VSVulkan4.h").is_file()
COMPILER = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
needs_compiler = pytest.mark.skipif(COMPILER is None, reason="no C compiler")
needs_gpu_api = pytest.mark.skipif(not HAS_GPU_API, reason="this VapourSynth has no VSVulkan4.h")


def _gpu_headers(include: Path) -> None:
    """VSVulkan4.h and the stand-in vulkan_core.h that setup.py writes, into `include`."""
    shutil.copy(VS_INCLUDE / "VSVulkan4.h", include)
    spec = importlib.util.spec_from_file_location("_stand_in", NATIVE / "vulkan_stand_in.py")
    stand_in = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stand_in)
    (include / "vulkan").mkdir()
    header = (include / "VSVulkan4.h").read_text()
    (include / "vulkan" / "vulkan_core.h").write_text(stand_in.vulkan_stand_in(header))


def build(
    folder: Path, gpu_release: int | None, gpu_source: Path | None = None, included=()
) -> Path:
    """The bridge built into `folder` with setup.py's flags; with `gpu_release`, with GPU frames
    built for that VapourSynth release, else against headers without VSVulkan4.h (R79's).

    `gpu_source` replaces gpu_frames.c with a file that includes it, and the bridge's sources
    named in `included` (``exit_guard.c``), which it includes too."""
    include = folder / "include"
    include.mkdir()
    shutil.copy(VS_INCLUDE / "VapourSynth4.h", include)
    left_out = {"gpu_frames.c", *included}
    sources = sorted(str(p) for p in NATIVE.glob("*.c") if p.name not in left_out)
    defines = ["-DAVDENOISE_VERSION_MAJOR=0", "-DAVDENOISE_VERSION_MINOR=1",
               '-DAVDENOISE_VERSION="0.1.0"']  # fmt: skip
    if gpu_release is not None:
        _gpu_headers(include)
        sources.append(str(gpu_source or NATIVE / "gpu_frames.c"))
        defines += ["-DAVDENOISE_GPU_FRAMES=1", f"-DAVDENOISE_VS_RELEASE={gpu_release}"]
    library = folder / "libavdenoise.so"
    command = [
        COMPILER, "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror",
        "-fvisibility=hidden", *defines, f"-I{include}", f"-I{NATIVE}",
        f"-I{sysconfig.get_paths()['include']}", *sources, "-o", str(library), "-ldl",
        "-lpthread",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return library
