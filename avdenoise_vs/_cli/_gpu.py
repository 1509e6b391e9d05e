"""``doctor``'s probes of the GPU side: the NVIDIA driver, CuPy and its GPUs, CUDA MPS.

Every probe returns plain JSON-ready values and never raises: a machine without a driver,
CuPy or GPU (or with a broken one) is what ``doctor`` is for. Each probe is cheap (no CUDA
context is created, no kernel compiled); ``nvidia-smi`` runs only when CuPy cannot list the
GPUs, with a time limit.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.metadata
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

from avdenoise_vs._errors import one_line as _error

__all__ = [
    "cuda_version",
    "cupy_packages",
    "probe_cupy",
    "probe_driver",
    "probe_mps",
    "probe_nvidia_smi",
]

logger = logging.getLogger(__name__)

#: Longest a subprocess probe may take, seconds: a hung driver must not hang ``doctor``.
PROBE_TIMEOUT_S: Final[float] = 20.0
#: CUDA_MPS_PIPE_DIRECTORY's default (NVIDIA's MPS documentation).
MPS_PIPE_DEFAULT: Final[str] = "/tmp/nvidia-mps"


def cuda_version(value: int) -> str:
    """CUDA's integer version as ``major.minor``: ``12040`` -> ``'12.4'``."""
    return f"{value // 1000}.{value % 1000 // 10}"


def probe_driver() -> dict[str, Any]:
    """The NVIDIA driver: its version, and the newest CUDA version it supports.

    Returns
    -------
    dict
        ``version`` (from ``/proc/driver/nvidia/version``, e.g. ``'580.95.05'``), ``cuda``
        (``cuDriverGetVersion`` of libcuda, e.g. ``'13.0'``), ``library`` (whether libcuda
        loads) and ``error`` (why libcuda could not be asked), each None when unknown.
    """
    info: dict[str, Any] = {"version": None, "cuda": None, "library": False, "error": None}
    try:
        text = Path("/proc/driver/nvidia/version").read_text(errors="replace")
        # "NVRM version: NVIDIA UNIX [Open Kernel Module for] x86_64  580.95.05  Release ..."
        if match := re.search(r"Module.*?\s(\d+\.\d+(?:\.\d+)?)\s", text):
            info["version"] = match.group(1)
    except OSError:
        pass
    # libcuda answers cuDriverGetVersion without cuInit and without CuPy: the one way to pick
    # the CuPy package (cuda12x or cuda13x) on a machine that has none yet.
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        library = ctypes.CDLL(name)
        version = ctypes.c_int(0)
        status = library.cuDriverGetVersion(ctypes.byref(version))
    except OSError as exc:
        info["error"] = str(exc) or f"{name} cannot be loaded"
        return info
    except AttributeError as exc:  # a stub library without the symbol
        info["error"] = _error(exc)
        return info
    info["library"] = True
    if status == 0 and version.value > 0:
        info["cuda"] = cuda_version(version.value)
    else:
        info["error"] = f"cuDriverGetVersion returned {status}"
    return info


def cupy_packages() -> list[str]:
    """The installed distributions that provide CuPy, as ``name version``."""
    found = []
    for dist in importlib.metadata.distributions():
        try:
            name = (dist.metadata.get("Name") or "").lower()
            if name == "cupy" or name.startswith(("cupy-cuda", "cupy-rocm", "amd-cupy")):
                found.append(f"{name} {dist.version}")
        # One broken distribution must not hide the others: an unreadable file, undecodable
        # text (UnicodeDecodeError), no Version field (KeyError where Python's metadata no
        # longer answers None).
        except (OSError, ValueError, KeyError) as exc:
            logger.debug("doctor: a distribution's metadata cannot be read: %s", _error(exc))
    return sorted(set(found))


def probe_cupy() -> dict[str, Any]:
    """CuPy, NVRTC and the GPUs CuPy sees.

    Returns
    -------
    dict
        ``installed``, ``packages`` (`cupy_packages`), ``version``, ``import_error``,
        ``nvrtc``, ``nvrtc_error``, ``runtime`` and ``driver_cuda`` (CUDA versions of CuPy's
        runtime and of the driver), ``gpus`` (index, name, compute capability, memory) and
        ``gpu_error``.

    Notes
    -----
    Imports CuPy (and ``cupy.cuda.compiler``, so that ``_warmup/cache.py``'s ``cache_dir`` reads the
    directory CuPy itself uses). ``cudaGetDeviceProperties`` starts the driver, not a context.
    """
    info: dict[str, Any] = {
        "installed": False,
        "packages": cupy_packages(),
        "version": None,
        "import_error": None,
        "nvrtc": None,
        "nvrtc_error": None,
        "runtime": None,
        "driver_cuda": None,
        "gpus": [],
        "gpu_error": None,
    }
    try:
        import cupy  # optional: the doctor runs where CuPy is missing
    except ModuleNotFoundError as exc:
        if exc.name != "cupy":  # installed, but something it needs is missing
            info.update(installed=True, import_error=_error(exc))
        return info
    # Anything: a broken CUDA install fails at import with OSError, RuntimeError... The
    # report names it (import_error).
    except Exception as exc:
        info.update(installed=True, import_error=_error(exc))
        return info
    info.update(installed=True, version=str(getattr(cupy, "__version__", "unknown")))
    try:
        importlib.import_module("cupy.cuda.compiler")
    except ImportError as exc:  # then the cache directory comes from the environment
        logger.debug("doctor: cupy.cuda.compiler cannot be imported: %s", _error(exc))
    try:
        major, minor = cupy.cuda.nvrtc.getVersion()
        info["nvrtc"] = f"{major}.{minor}"
    # "CuPy failed to load libnvrtc" and NVRTCError are RuntimeErrors; OSError from ctypes.
    except (RuntimeError, OSError) as exc:
        info["nvrtc_error"] = _error(exc)
    runtime = cupy.cuda.runtime
    for field, call in (("runtime", "runtimeGetVersion"), ("driver_cuda", "driverGetVersion")):
        try:
            version = int(getattr(runtime, call)())
        except (AttributeError, RuntimeError) as exc:  # an old CuPy without it, no runtime
            logger.debug("doctor: CuPy's %s failed: %s", call, _error(exc))
            continue
        # cudaDriverGetVersion answers 0 when no driver is installed: no version, not "0.0".
        info[field] = cuda_version(version) if version > 0 else None
    try:
        count = int(runtime.getDeviceCount())
        for index in range(count):
            info["gpus"].append(_gpu(runtime, index))
    except RuntimeError as exc:  # CUDARuntimeError: no driver, no device, driver too old
        info["gpu_error"] = _error(exc)
    return info


def _gpu(runtime: Any, index: int) -> dict[str, Any]:
    """Name, compute capability and memory of GPU `index`, from cudaGetDeviceProperties."""
    props = runtime.getDeviceProperties(index)
    name = props.get("name", b"?")
    return {
        "index": index,
        "name": name.decode(errors="replace") if isinstance(name, bytes) else str(name),
        "compute_capability": f"{props.get('major', '?')}.{props.get('minor', '?')}",
        "memory_bytes": int(props.get("totalGlobalMem", 0)),
    }


def probe_nvidia_smi() -> dict[str, Any]:
    """The GPUs and driver version ``nvidia-smi`` reports; for machines where CuPy cannot.

    Returns
    -------
    dict
        ``found`` (whether nvidia-smi is on PATH), ``gpus`` (index, name, compute capability,
        memory), ``driver_version`` and ``error``.
    """
    info: dict[str, Any] = {"found": False, "gpus": [], "driver_version": None, "error": None}
    program = shutil.which("nvidia-smi")
    if program is None:
        return info
    info["found"] = True
    fields = "index,name,compute_cap,memory.total,driver_version"
    try:
        done = subprocess.run(
            [program, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        info["error"] = _error(exc)
        return info
    if done.returncode != 0:
        lines = (done.stdout + done.stderr).strip().splitlines()
        info["error"] = lines[-1] if lines else f"exit status {done.returncode}"
        return info
    for line in done.stdout.strip().splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 5:
            continue
        index, name, capability, memory_mib, driver = parts
        info["driver_version"] = driver
        info["gpus"].append(
            {
                "index": int(index) if index.isdigit() else index,
                "name": name,
                "compute_capability": capability,
                "memory_bytes": int(memory_mib) * 2**20 if memory_mib.isdigit() else None,
            }
        )
    return info


def probe_mps() -> dict[str, Any]:
    """Whether a CUDA MPS control daemon serves this process's CUDA clients.

    A CUDA client joins MPS when it can reach the daemon's ``control`` socket in
    ``CUDA_MPS_PIPE_DIRECTORY`` (default ``/tmp/nvidia-mps``), so that socket is the test;
    ``nvidia-cuda-mps-*`` processes seen in ``/proc`` are reported beside it (a daemon of
    another PID namespace is not seen, a daemon with another pipe directory serves others).

    Returns
    -------
    dict
        ``running`` (whether the control socket is there), ``pipe_directory``,
        ``control_socket`` and ``daemons`` (pids of MPS control and server processes; None
        without ``/proc``).
    """
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or MPS_PIPE_DEFAULT
    control = Path(pipe) / "control"
    try:
        # A socket in practice; any file type counts, since what matters is that it is there.
        socket = control.exists()
    except OSError:
        socket = False
    daemons: list[int] | None = []
    try:
        entries = list(os.scandir("/proc"))
    except OSError:  # no /proc: not Linux
        entries, daemons = [], None
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            comm = Path(entry.path, "comm").read_text().strip()
        except OSError:
            continue
        # comm is cut at 15 characters: "nvidia-cuda-mps" for control and server alike.
        if comm.startswith("nvidia-cuda-mps"):
            daemons.append(int(entry.name))
    return {"running": socket, "pipe_directory": pipe, "control_socket": socket, "daemons": daemons}
