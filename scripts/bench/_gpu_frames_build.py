"""Builds gpu_frames_probe.c, the probe's C plugin, against the installed VapourSynth's headers.

VSVulkan4.h includes ``<vulkan/vulkan_core.h>``, which neither the vapoursynth wheel nor the
GPU machine's image ships. Where no Vulkan headers are found, a stand-in is written beside the
build (``avdenoise_vs/_native/vulkan_stand_in.py``, which the bridge's build uses too): the
handle and scalar types VSVulkan4.h names, and one ``PFN_vk*`` per entry of its
``VS_VK_FUNCTION_LIST``. The table's layout is the same, and the probe calls no Vulkan
function itself.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("gpu_frames_probe.c")
LIBRARY = "libgpuprobe.so"
#: Where a system or SDK install puts vulkan/vulkan_core.h.
VULKAN_INCLUDES = [
    *(Path(os.environ[v], "include") for v in ("VULKAN_SDK",) if os.environ.get(v)),
    Path("/usr/include"),
    Path("/usr/local/include"),
]
#: The stand-in's generator, which setup.py uses for the bridge too (loaded by its path:
#: importing the package would start VapourSynth).
_STAND_IN = Path(__file__).resolve().parents[2] / "avdenoise_vs" / "_native" / "vulkan_stand_in.py"


def _load_stand_in():
    spec = importlib.util.spec_from_file_location("_vulkan_stand_in", _STAND_IN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_stand_in = _load_stand_in()
vulkan_entry_points = _stand_in.vulkan_entry_points
vulkan_stand_in = _stand_in.vulkan_stand_in


def vapoursynth_include() -> Path:
    """The include folder of the vapoursynth package (found without importing it)."""
    spec = importlib.util.find_spec("vapoursynth")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the vapoursynth package is not installed")
    return Path(list(spec.submodule_search_locations)[0], "include")


def system_vulkan_include() -> Path | None:
    for folder in VULKAN_INCLUDES:
        if (folder / "vulkan" / "vulkan_core.h").is_file():
            return folder
    return None


def find_compiler(requested: str | None) -> str:
    for name in [requested, os.environ.get("CC"), "cc", "gcc", "clang"]:
        if name and shutil.which(name):
            return name
    raise RuntimeError("no C compiler found (tried $CC, cc, gcc, clang; pass --cc)")


def build(out_dir: Path, compiler: str | None = None) -> tuple[Path, str]:
    """Compiles the plugin into `out_dir`; returns its path and how the Vulkan types came."""
    include = vapoursynth_include()
    header = include / "VSVulkan4.h"
    if not header.is_file():
        raise RuntimeError(f"{header} is missing: this VapourSynth has no GPU API (R80+ has)")
    out_dir.mkdir(parents=True, exist_ok=True)
    vulkan = system_vulkan_include()
    how = f"Vulkan headers from {vulkan}"
    if vulkan is None:
        vulkan = out_dir / "stand_in"
        (vulkan / "vulkan").mkdir(parents=True, exist_ok=True)
        (vulkan / "vulkan" / "vulkan_core.h").write_text(vulkan_stand_in(header.read_text()))
        how = "no Vulkan headers: the stand-in vulkan_core.h made from VSVulkan4.h"
    library = out_dir / LIBRARY
    command = [
        find_compiler(compiler),
        *("-shared -fPIC -O2 -std=gnu11 -Wall -Wextra -Werror".split()),
        f"-I{vulkan}",
        f"-I{include}",
        str(SOURCE),
        "-o",
        str(library),
        "-lpthread",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    return library, how
