"""The Python entry points that the native bridge (``_native/bridge.c``) calls.

Keep this module light: it is imported while VapourSynth loads plugins, so it must not
touch ``vapoursynth.core`` at import time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS
from avdenoise_vs._params.spec import vs_signature
from avdenoise_vs._plugin.filter import FilterPlan, create_bm3d, create_denoise, create_nlmeans

__all__ = ["create", "plugin_functions"]

#: Registered function name -> (parameter table, factory).
FUNCTIONS = {
    "Denoise": (DENOISE_PARAMS, create_denoise),
    "NLMeans": (NLMEANS_PARAMS, create_nlmeans),
    "BM3D": (BM3D_PARAMS, create_bm3d),
}


def plugin_functions() -> list[tuple[str, str]]:
    """(name, VapourSynth argument signature) of every function to register."""
    return [(name, vs_signature(params)) for name, (params, _) in FUNCTIONS.items()]


def create(name: str, args: Mapping[str, list[Any]]) -> FilterPlan:
    """Build the filter ``name`` from the bridge's arguments; errors become ``vs.Error``."""
    return FUNCTIONS[name][1](args)
