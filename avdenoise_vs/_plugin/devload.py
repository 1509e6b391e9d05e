"""Load the in-tree bridge into the current core in an editable (development) install."""

from __future__ import annotations

import logging
from pathlib import Path

__all__ = ["load_into_core", "plugin_installed"]

logger = logging.getLogger(__name__)

#: Where ``pip install -e .`` builds the bridge: setup.py's extension
#: ``avdenoise_vs._native.libavdenoise``, in the package's own folder (this module's parent's).
_DEV_LIBRARY = Path(__file__).resolve().parent.parent / "_native" / "libavdenoise.so"


def plugin_installed() -> bool:
    """Whether a regular install put the bridge where VapourSynth autoloads plugins."""
    try:
        import vapoursynth
    except ImportError:
        return False
    return (Path(vapoursynth.get_plugin_dir()) / "avdenoise" / "manifest.vs").is_file()


def load_into_core() -> None:
    """Load ``_native/libavdenoise.so`` into ``vapoursynth.core`` if nothing registered it.

    Does nothing after a regular install: there VapourSynth autoloads the bridge, and this
    module may itself be imported while it does so, when touching the core would recurse
    into the core being created.
    """
    if plugin_installed() or not _DEV_LIBRARY.is_file():
        return
    try:
        import vapoursynth
    except ImportError:  # the backends also run without VapourSynth (GPU tests, benchmarks)
        return

    core = vapoursynth.core
    if any(plugin.namespace == "avdenoise" for plugin in core.plugins()):
        return
    logger.debug("avdenoise: loading the development bridge %s", _DEV_LIBRARY)
    core.std.LoadPlugin(str(_DEV_LIBRARY))
