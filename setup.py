"""Builds the native VapourSynth bridge where VapourSynth autoloads plugins.

A regular install puts ``libavdenoise.so`` and its ``manifest.vs`` in
``site-packages/vapoursynth/plugins/avdenoise/`` (as other plugin wheels do), so any script
run by vspipe finds ``core.avdenoise`` without importing this package. An editable install
builds the library inside the package (``avdenoise_vs/_native/``) instead, and
``import avdenoise_vs`` loads it into the current core.

Where the vapoursynth it builds against ships ``VSVulkan4.h`` (R80+), the bridge also takes
GPU clips (``_native/gpu_frames.c``): that file is compiled against a stand-in
``vulkan/vulkan_core.h`` written into the build folder (``_native/vulkan_stand_in.py``), with
the release the header came with, which the bridge checks against the running library.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

PLUGIN_DIR = Path("vapoursynth", "plugins", "avdenoise")
LIBRARY = "libavdenoise.so"
GPU_SOURCE = "avdenoise_vs/_native/gpu_frames.c"
STAND_IN = Path("avdenoise_vs", "_native", "vulkan_stand_in.py")


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


def vapoursynth_release() -> int | None:
    """The release of the vapoursynth distribution whose headers the build uses (81), or None
    where its metadata cannot say."""
    try:
        match = re.match(r"(\d+)", importlib.metadata.version("vapoursynth"))
    except importlib.metadata.PackageNotFoundError:
        return None
    return int(match.group(1)) if match else None


def add_gpu_frames(ext: Extension, include: str, build_temp: str) -> bool:
    """Add GPU frames to the bridge where VSVulkan4.h and the release are known: the source,
    the stand-in Vulkan header (written into `build_temp`) and the macros; whether it did."""
    header = Path(include, "VSVulkan4.h")
    release = vapoursynth_release()
    if not header.is_file() or release is None or not STAND_IN.is_file():
        return False
    spec = importlib.util.spec_from_file_location("_vulkan_stand_in", STAND_IN)
    stand_in = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stand_in)
    try:
        text = stand_in.vulkan_stand_in(header.read_text())
    except ValueError as error:  # a header this build cannot lay out: CPU clips only
        print(f"avdenoise-vs: building without GPU clips: {error}")
        return False
    folder = Path(build_temp, "vulkan_stand_in")
    (folder / "vulkan").mkdir(parents=True, exist_ok=True)
    (folder / "vulkan" / "vulkan_core.h").write_text(text)
    # Before the vapoursynth headers and the system's: an older vulkan_core.h lacks 1.4's types.
    ext.include_dirs.insert(0, str(folder))
    ext.sources.append(GPU_SOURCE)
    ext.define_macros += [("AVDENOISE_GPU_FRAMES", "1"), ("AVDENOISE_VS_RELEASE", str(release))]
    return True


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

    def build_extension(self, ext: Extension) -> None:
        if GPU_SOURCE not in ext.sources:
            add_gpu_frames(ext, vapoursynth_include(), self.build_temp)
        super().build_extension(ext)

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
    # bridge.c hands frames to Python, through frame_steps.c's steps; host_step.c does the
    # native part of a frame; values.c converts arguments and frame properties; exit_guard.c
    # keeps frames out of an exiting interpreter; gpu_frames.c (added by add_gpu_frames where
    # it can build) takes GPU clips.
    sources=[
        "avdenoise_vs/_native/bridge.c",
        "avdenoise_vs/_native/exit_guard.c",
        "avdenoise_vs/_native/frame_steps.c",
        "avdenoise_vs/_native/host_step.c",
        "avdenoise_vs/_native/values.c",
    ],
    # shipped in the sdist, rebuilds on change
    depends=[
        "avdenoise_vs/_native/frame_steps.h",
        "avdenoise_vs/_native/exit_guard.h",
        "avdenoise_vs/_native/gpu_frames.c",
        "avdenoise_vs/_native/gpu_frames.h",
        "avdenoise_vs/_native/vulkan_stand_in.py",
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
