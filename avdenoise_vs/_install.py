"""The pip commands this package advises (``doctor``'s fixes, the CPU fallback's warning).

avdenoise-vs is installed from its checkout, not from the package index, so every command
names packages on the index or the checkout (``.``), never ``avdenoise-vs`` itself;
tests/test_install_advice.py holds each against pyproject.toml.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CUPY", "VAPOURSYNTH", "cupy_install", "pip_install"]

#: What pyproject.toml's CUDA extras install. ``[ctk]`` brings NVIDIA's CUDA wheels (NVRTC,
#: which compiles the kernels, and the runtime), so a machine needs only the NVIDIA driver.
CUPY: Final[dict[str, str]] = {
    "cuda13": "cupy-cuda13x[ctk]>=14.1",
    "cuda12": "cupy-cuda12x[ctk]>=14.1",
}
#: pyproject.toml's VapourSynth dependency.
VAPOURSYNTH: Final[str] = "vapoursynth>=74"


def pip_install(*specs: str, options: str = "") -> str:
    """``pip install [options] 'spec'...``, each spec quoted for the shell (brackets, ``>``)."""
    return " ".join(["pip install", *options.split(), *(f"'{spec}'" for spec in specs)])


def cupy_install(extra: str | None, options: str = "") -> str:
    """The command that installs CuPy for the driver's CUDA version (`extra`, a key of
    :data:`CUPY`), or both commands when that version is unknown."""
    if extra is None:
        return (
            f"{pip_install(CUPY['cuda13'], options=options)} for a CUDA 13 driver, or "
            f"{pip_install(CUPY['cuda12'], options=options)} for CUDA 12 (nvidia-smi's header "
            "shows the driver's CUDA version)"
        )
    return pip_install(CUPY[extra], options=options)
