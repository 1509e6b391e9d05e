"""The parameter tables of the registered functions (the single source of truth).

Defaults, ranges, the algorithms that read each parameter and the documentation live here
and nowhere else: the bridge's signatures, validation, the Python API and the tables of
docs/PARAMETERS.md come from them. ``denoise.py`` holds Denoise's table, ``dropin.py`` those
of the drop-ins (NLMeans, BM3D), derived from it.
"""

from __future__ import annotations

from avdenoise_vs._params.denoise import (
    ACCELERATORS,
    ALGORITHMS,
    CHANNELS,
    DENOISE_PARAMS,
    MAX_SETTING,
    MIN_STRENGTH,
)
from avdenoise_vs._params.dropin import BM3D_PARAMS, KNLM_CHANNELS, NLMEANS_PARAMS

__all__ = [
    "ACCELERATORS",
    "ALGORITHMS",
    "BM3D_PARAMS",
    "CHANNELS",
    "DENOISE_PARAMS",
    "KNLM_CHANNELS",
    "MAX_SETTING",
    "MIN_STRENGTH",
    "NLMEANS_PARAMS",
]
