"""avdenoise_vs: GPU video denoisers for VapourSynth, called as ``core.avdenoise.Denoise``.

Importing the package is not needed in scripts: the native bridge is a VapourSynth plugin
that VapourSynth autoloads. In an editable (development) install, importing it loads the
in-tree bridge into the current core.

The package also holds a typed Python API beside the namespace: :func:`denoise`,
:func:`nlmeans` and :func:`bm3d` call ``core.avdenoise.Denoise``, ``NLMeans`` and ``BM3D``
with the same arguments, and their docstrings (``help(avdenoise_vs.denoise)``) document
every parameter, which VapourSynth's own functions cannot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from avdenoise_vs._params.options import Distance, FrameLayout, WeightMode
from avdenoise_vs._params.settings import Algorithm, Bm3dSettings, NlmSettings, PassSettings, Stages
from avdenoise_vs._plugin.devload import load_into_core
from avdenoise_vs._version import __version__

__all__ = [
    "Algorithm",
    "Bm3dSettings",
    "Distance",
    "FrameLayout",
    "NlmSettings",
    "PassSettings",
    "Stages",
    "WeightMode",
    "__version__",
    "bm3d",
    "denoise",
    "nlmeans",
]

if TYPE_CHECKING:
    from avdenoise_vs._api import bm3d, denoise, nlmeans

#: The typed API, imported on first use: VapourSynth imports this package in every process
#: that loads plugins, and building the functions' signatures and docs takes 30-60 ms.
_LAZY = ("bm3d", "denoise", "nlmeans")


def __getattr__(name: str):
    if name in _LAZY:
        from avdenoise_vs import _api

        return getattr(_api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


load_into_core()
