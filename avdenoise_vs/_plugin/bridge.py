"""The Python entry points that the native bridge (``_native/bridge.c``) calls.

Keep this module light: it is imported while VapourSynth loads plugins, so it must not
touch ``vapoursynth.core`` at import time.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS
from avdenoise_vs._params.spec import vs_signature
from avdenoise_vs._plugin.filter import FilterPlan, create_bm3d, create_denoise, create_nlmeans

__all__ = ["create", "gpu_signature", "plugin_functions", "vapoursynth_release"]

#: Registered function name -> (parameter table, factory).
FUNCTIONS = {
    "Denoise": (DENOISE_PARAMS, create_denoise),
    "NLMeans": (NLMEANS_PARAMS, create_nlmeans),
    "BM3D": (BM3D_PARAMS, create_bm3d),
}

#: A clip argument's type in a VapourSynth signature (``clip:vnode``, ``ref:vnode[]:opt``).
_CLIP_TYPE = re.compile(r"(:vnode(?:\[\])?)(?=[:;])")


def plugin_functions(gpu: bool = False) -> list[tuple[str, str]]:
    """(name, VapourSynth argument signature) of every function to register; with `gpu` (the
    bridge takes GPU clips here, ``_native/gpu_frames.h``) clips are declared ``vnode:all``."""
    functions = [(name, vs_signature(params)) for name, (params, _) in FUNCTIONS.items()]
    return [(name, gpu_signature(sig) if gpu else sig) for name, sig in functions]


def gpu_signature(signature: str) -> str:
    """`signature` with every clip argument taking CPU and GPU clips alike (``vnode:all``)."""
    return _CLIP_TYPE.sub(r"\1:all", signature)


def vapoursynth_release() -> int:
    """The running VapourSynth's release (81), which the bridge compares with the one its GPU
    frames were built for; 0 where the module is not loaded."""
    module = sys.modules.get("vapoursynth")
    version = getattr(module, "__version__", None)
    return int(getattr(version, "release_major", 0) or 0)


def create(name: str, args: Mapping[str, list[Any]]) -> FilterPlan:
    """Build the filter ``name`` from the bridge's arguments; errors become ``vs.Error``."""
    return FUNCTIONS[name][1](args)
