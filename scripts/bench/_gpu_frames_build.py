"""Builds gpu_frames_probe.c, the probe's C plugin, against the installed VapourSynth's headers.

VSVulkan4.h includes ``<vulkan/vulkan_core.h>``, which neither the vapoursynth wheel nor the
GPU machine's image ships. Where no Vulkan headers are found, a stand-in is written beside the
build: the handle and scalar types VSVulkan4.h names, and one ``PFN_vk*`` per entry of its
``VS_VK_FUNCTION_LIST`` (read from the installed header, so it follows the header). Every
``PFN_vk*`` is then a plain function pointer: the table's layout is the same, and the probe
calls no Vulkan function itself.
"""

from __future__ import annotations

import importlib.util
import os
import re
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
#: Types VSVulkan4.h takes by pointer only: declared, never defined.
STRUCTS = {"VkMemoryRequirements"}
SCALARS = {"VkDeviceSize": "uint64_t", "VkDeviceAddress": "uint64_t", "VkBool32": "uint32_t"}


def vapoursynth_include() -> Path:
    """The include folder of the vapoursynth package (found without importing it)."""
    spec = importlib.util.find_spec("vapoursynth")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the vapoursynth package is not installed")
    return Path(list(spec.submodule_search_locations)[0], "include")


def _without_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)


def vulkan_entry_points(header: str) -> list[str]:
    """The names of VS_VK_FUNCTION_LIST's entries, in order (``CreateInstance``, ...)."""
    return re.findall(r"FN\(\s*VS_VK_\w+\s*,\s*VS_VK_\w+\s*,\s*(\w+)\s*\)", header)


def _type_line(name: str) -> str:
    if name in SCALARS:
        return f"typedef {SCALARS[name]} {name};"
    if name.endswith("Flags2"):
        return f"typedef uint64_t {name};"
    if name.endswith("Flags") or name.endswith("FlagBits"):
        return f"typedef uint32_t {name};"
    if name in STRUCTS:
        return f"typedef struct {name} {name};"
    return f"typedef struct {name}_T *{name};"  # a handle: a pointer on 64-bit targets


def vulkan_stand_in(header: str) -> str:
    """A vulkan_core.h with what `header` (VSVulkan4.h's text) needs of it."""
    code = _without_comments(header)
    names = sorted(set(re.findall(r"\bVk[A-Z]\w*", code)) - {"VkResult"})
    lines = [
        "/* Written by scripts/bench/_gpu_frames_build.py: the part of vulkan_core.h that",
        "   VSVulkan4.h needs, for a build without the Vulkan headers. */",
        "#ifndef VULKAN_CORE_H_",
        "#define VULKAN_CORE_H_ 1",
        "#include <stdint.h>",
        "#define VK_UUID_SIZE 16U",
        "#define VK_LUID_SIZE 8U",
        "#define VK_MAKE_API_VERSION(variant, major, minor, patch) \\",
        "    ((((uint32_t)(variant)) << 29U) | (((uint32_t)(major)) << 22U) | \\",
        "     (((uint32_t)(minor)) << 12U) | ((uint32_t)(patch)))",
        "#define VK_API_VERSION_1_4 VK_MAKE_API_VERSION(0, 1, 4, 0)",
        "typedef int VkResult;",
        "typedef void (*PFN_vkVoidFunction)(void);",
        *(_type_line(name) for name in names),
        "typedef PFN_vkVoidFunction (*PFN_vkGetInstanceProcAddr)(VkInstance, const char *);",
    ]
    for name in vulkan_entry_points(header):
        if name != "GetInstanceProcAddr":
            lines.append(f"typedef void (*PFN_vk{name})(void);")
    lines.append("#endif")
    return "\n".join(lines) + "\n"


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
