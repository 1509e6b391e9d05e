"""avdenoise_vs: GPU video denoisers for VapourSynth, called as ``core.avdenoise.Denoise``.

Importing the package is not needed in scripts: the native bridge is a VapourSynth plugin
that VapourSynth autoloads. In an editable (development) install, importing it loads the
in-tree bridge into the current core.
"""

from __future__ import annotations

from ._devload import load_into_core
from ._options import Distance, FrameLayout, PlaneOptions, WeightMode
from ._version import __version__

__all__ = ["Distance", "FrameLayout", "PlaneOptions", "WeightMode", "__version__"]

load_into_core()
