"""Builds the native VapourSynth bridge where VapourSynth autoloads plugins.

A regular install puts ``libavdenoise.so`` and its ``manifest.vs`` in
``site-packages/vapoursynth/plugins/avdenoise/`` (as other plugin wheels do), so any script
run by vspipe finds ``core.avdenoise`` without importing this package. An editable install
builds the library inside the package (``avdenoise_vs/_native/``) instead, and
``import avdenoise_vs`` loads it into the current core.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

PLUGIN_DIR = Path("vapoursynth", "plugins", "avdenoise")
LIBRARY = "libavdenoise.so"


def vapoursynth_include() -> str:
    """The headers the vapoursynth wheel ships (found without importing it)."""
    spec = importlib.util.find_spec("vapoursynth")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("building avdenoise-vs needs the vapoursynth package (>= 74)")
    return str(Path(list(spec.submodule_search_locations)[0], "include"))


def version_macros() -> list[tuple[str, str]]:
    """The package version (``_version.py``, read as text: importing the package would start
    VapourSynth) as the bridge's macros: VapourSynth's plugin version holds major and minor,
    the plugin's name the whole string."""
    text = Path("avdenoise_vs", "_version.py").read_text()
    version = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE).group(1)
    major, minor = re.match(r"(\d+)\.(\d+)", version).groups()
    return [
        ("AVDENOISE_VERSION_MAJOR", major),
        ("AVDENOISE_VERSION_MINOR", minor),
        ("AVDENOISE_VERSION", f'"{version}"'),
    ]


class BuildBridge(build_ext):
    """Place the bridge as a VapourSynth plugin rather than as a Python extension module.

    setuptools builds every extension into ``build_lib`` (it clears ``inplace`` while it
    builds) and, for ``build_ext --inplace`` and editable installs, copies the result from
    ``build_lib/<package path>`` to the package afterwards. So the library is built at the
    package path in that case, and in the plugin folder otherwise.
    """

    _into_package = False

    def get_ext_filename(self, fullname: str) -> str:
        # A plugin that VapourSynth loads, not a Python module: no ABI tag in its name.
        return str(Path(*fullname.split(".")).with_name(LIBRARY))

    def get_ext_fullpath(self, ext_name: str) -> str:
        if self._into_package:
            return super().get_ext_fullpath(ext_name)
        return str(Path(self.build_lib, PLUGIN_DIR, LIBRARY))

    def run(self) -> None:
        # Read before setuptools clears it for the build.
        self._into_package = bool(self.inplace)
        super().run()
        if not self._into_package:
            manifest = Path(self.build_lib, PLUGIN_DIR, "manifest.vs")
            manifest.write_text("[VapourSynth Manifest V1]\n" + Path(LIBRARY).stem + "\n")

    def get_outputs(self) -> list[str]:
        outputs = super().get_outputs()
        if not self.inplace:
            outputs.append(str(Path(self.build_lib, PLUGIN_DIR, "manifest.vs")))
        return outputs


bridge = Extension(
    "avdenoise_vs._native.libavdenoise",
    # bridge.c hands frames to Python; host_step.c does the native part of a frame; values.c
    # converts arguments and frame properties; exit_guard.c keeps frames out of an exiting
    # interpreter.
    sources=[
        "avdenoise_vs/_native/bridge.c",
        "avdenoise_vs/_native/exit_guard.c",
        "avdenoise_vs/_native/host_step.c",
        "avdenoise_vs/_native/values.c",
    ],
    # shipped in the sdist, rebuilds on change
    depends=[
        "avdenoise_vs/_native/exit_guard.h",
        "avdenoise_vs/_native/host_step.h",
        "avdenoise_vs/_native/values.h",
        "avdenoise_vs/_version.py",
    ],
    include_dirs=[vapoursynth_include()],
    define_macros=version_macros(),
    libraries=["dl"],  # dladdr and dlopen (bridge.c keeps itself loaded); in libc since 2.34
    # Hidden by default: the library exports VapourSynth's entry point alone (VS_EXTERNAL_API),
    # so the functions the two files share cannot be interposed by another library's.
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden"],
    py_limited_api=True,
)

setup(
    ext_modules=[bridge],
    cmdclass={"build_ext": BuildBridge},
    options={"bdist_wheel": {"py_limited_api": "cp312"}},
)
