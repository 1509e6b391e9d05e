"""The package version: one place, read by pyproject.toml, by setup.py for the native plugin's
version (``core.avdenoise``), and by the warm-up key."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
