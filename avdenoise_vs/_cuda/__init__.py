"""The CUDA (CuPy) backend. Importing this package never imports CuPy: the backend does, lazily."""

from __future__ import annotations

__all__: list[str] = []
