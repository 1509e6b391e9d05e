"""What the warm-up queue is keyed on, and where CuPy keeps the cache it warms.

CuPy names a cached kernel binary after its source, its compile options, the NVRTC version and the
target architecture. The queue's key therefore hashes the same things: the kernel specs a backend
compiles (every compile-time value of its kernels, see ``_nlm/cuda/source.py`` ``NlmSpec`` and
``_bm3d/cuda/source.py`` ``Bm3dSpec``), this package's version (the kernel sources ship with it) and
`environment_fingerprint`. Strengths, thresholds and frame sizes are launch arguments, not
compile-time values, so one warm cache serves them all.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from avdenoise_vs import _version
from avdenoise_vs._environment import default, seconds
from avdenoise_vs._errors import one_line

if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable

__all__ = [
    "DEFAULT_WAIT_LIMIT_S",
    "EMPTY_FIX",
    "EMPTY_ORIGIN",
    "EMPTY_WHY",
    "QUEUE_SWITCH",
    "WAIT_VARIABLE",
    "cache_dir",
    "cache_dir_origin",
    "cache_in_memory",
    "check_key",
    "configured_wait_s",
    "cupy_installed",
    "describe_key",
    "environment_fingerprint",
    "kernel_key",
    "queue_enabled",
    "usable_directory",
    "wait_limit_s",
]

logger = logging.getLogger("avdenoise_vs._warmup.queue")

# What each key made in this process hashes, so that its stamp can say what it is for: a key
# alone cannot be read back (``python -m avdenoise_vs cache list``). A process makes a handful
# of keys, one per distinct filter set-up, so this never grows large.
_descriptions: dict[int, tuple[str, ...]] = {}


@functools.cache
def environment_fingerprint(device: int | None = None) -> str:
    """Describe what, besides the sources, decides which binaries CuPy caches.

    A stamp written under one CuPy, NVRTC or GPU architecture says nothing about the cache
    under another, and a new CuPy release may change its naming scheme.

    Parameters
    ----------
    device : int, optional
        CUDA device whose compute capability counts; default: the current device.

    Returns
    -------
    str
        ``"cupy=<version>;nvrtc=<major>.<minor>;sm=<compute capability>"``, with ``none`` for
        parts that cannot be found, or ``"no-cupy"`` when CuPy cannot be imported.

    Notes
    -----
    Cached per device for the life of the process, so that each part that cannot be found is logged
    (at debug level) once. CuPy is only imported on the first call, never at module import. Never
    raises: the key is made on a filter's way to its first frame, and the warm-up queue must not
    fail a render.
    """
    try:
        import cupy  # optional: CPU-only installs have no CuPy
    # Anything: a broken CUDA install fails at import with ImportError, OSError, RuntimeError...
    except Exception as error:
        logger.debug("warm-up key without CuPy: it cannot be imported (%s)", one_line(error))
        return "no-cupy"
    return f"cupy={cupy.__version__};{_nvrtc_part(cupy)};{_arch_part(cupy, device)}"


def _nvrtc_part(cupy: object) -> str:
    """Return ``nvrtc=<major>.<minor>``, or ``nvrtc=none`` when NVRTC cannot be loaded."""
    try:
        major, minor = cupy.cuda.nvrtc.getVersion()  # type: ignore[attr-defined]
    except Exception as error:  # missing library, no driver, old CuPy layout, a CuPy bug
        logger.debug("warm-up key without NVRTC's version (%s)", one_line(error))
        return "nvrtc=none"
    return f"nvrtc={major}.{minor}"


def _arch_part(cupy: object, device: int | None) -> str:
    """Return ``sm=<compute capability>``, or ``sm=none`` when there is no usable GPU."""
    try:
        capability = device_capability(cupy, device)
    except Exception as error:  # no GPU, no driver, CUDA_VISIBLE_DEVICES="", a CuPy bug
        logger.debug("warm-up key without a compute capability (%s)", one_line(error))
        return "sm=none"
    return f"sm={capability}"


#: ``cudaDevAttrComputeCapabilityMajor`` and ``...Minor``, which CuPy's runtime module does
#: not export.
_CAPABILITY_ATTRIBUTES = (75, 76)


def device_capability(cupy: object, device: int | None) -> str:
    """The compute capability of `device` (None: the current one) as CuPy writes it ("90").

    Read from the device's attributes, which need no CUDA context: the key is made before a
    compiling worker's context is up (``_backends/cuda/ahead.py``), and
    ``Device.compute_capability``
    makes the device current, which creates its context.
    """
    runtime = cupy.cuda.runtime  # type: ignore[attr-defined]
    device = runtime.getDevice() if device is None else device
    major, minor = (runtime.deviceGetAttribute(a, device) for a in _CAPABILITY_ATTRIBUTES)
    return f"{major}{minor}"


#: The variable that switches the warm-up queue off (`queue_enabled`).
QUEUE_SWITCH: Final[str] = "AVDENOISE_WARMUP"
_OFF_VALUES: Final[frozenset[str]] = frozenset({"0", "false", "no", "off"})


def queue_enabled() -> bool:
    """Return whether ``AVDENOISE_WARMUP`` leaves the queue on (the default)."""
    return os.environ.get(QUEUE_SWITCH, "1").strip().lower() not in _OFF_VALUES


#: The variable that sets how long a process waits in the queue (`configured_wait_s`).
WAIT_VARIABLE: Final[str] = "AVDENOISE_WARMUP_WAIT"
DEFAULT_WAIT_LIMIT_S: Final[float] = float(default(WAIT_VARIABLE))
"""How long a process waits for the one ahead of it before compiling for itself, unless
``AVDENOISE_WARMUP_WAIT`` says otherwise."""


def configured_wait_s() -> float:
    """The wait limit in seconds that ``AVDENOISE_WARMUP_WAIT`` sets, else 180.

    Raises
    ------
    ValueError
        When the variable is not a number of seconds, at least 0. A CUDA filter checks it when
        it is created (``check_cuda_settings``), so that a bad value is an error there, not a
        silent default.
    """
    return seconds(WAIT_VARIABLE)


def wait_limit_s(limit: float | None) -> float:
    """The wait limit in seconds: `configured_wait_s` for None or NaN, never negative."""
    if limit is None or math.isnan(limit):
        return configured_wait_s()
    return max(0.0, float(limit))


def check_key(key: int) -> None:
    """Raise ValueError unless `key` is a 128-bit key from `kernel_key` (`begin` catches it)."""
    if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key < 1 << 128:
        msg = f"avdenoise.warmup: key must be an int in [0, 2**128), got {key!r}"
        raise ValueError(msg)


def kernel_key(
    specs: Iterable[Hashable], *, device: int | None = None, environment: str | None = None
) -> int:
    """Hash what a backend's kernels are compiled for into a 128-bit key.

    Parameters
    ----------
    specs : iterable of hashable
        The kernel specs the backend compiles (``CudaBackend.kernel_specs()``): frozen
        objects whose ``repr`` shows every compile-time value. Their order and repeats do
        not matter.
    device : int, optional
        The backend's CUDA device, for `environment_fingerprint`.
    environment : str, optional
        Stands in for `environment_fingerprint`; for tests.

    Returns
    -------
    int
        A key in ``[0, 2**128)``, the same in every process and on every run for the same
        inputs (BLAKE2b, not the per-process salted ``hash``).
    """
    env = environment_fingerprint(device) if environment is None else environment
    lines = sorted({repr(spec) for spec in specs})
    text = "\n".join((_version.__version__, *lines, env))
    digest = hashlib.blake2b(text.encode("utf-8", "backslashreplace"), digest_size=16).digest()
    key = int.from_bytes(digest, "big")
    _descriptions[key] = (f"env {env}", *(f"spec {line}" for line in lines))
    return key


def describe_key(key: int) -> tuple[str, ...]:
    """Return what `key` hashes, if this process made it with `kernel_key`.

    Returns
    -------
    tuple of str
        ``"env <environment_fingerprint>"``, then one ``"spec <repr>"`` line per kernel spec;
        empty for a key this process did not make.
    """
    return _descriptions.get(key, ())


def cache_in_memory() -> bool:
    """Mirror CuPy's reading of ``CUPY_CACHE_IN_MEMORY``: only an integer equal to 1 is on."""
    # CuPy reads this at every compile, not once at import, so the environment is the truth.
    value = os.environ.get("CUPY_CACHE_IN_MEMORY")
    if not value:
        return False
    try:
        return int(value) == 1
    except ValueError:
        return False


def cupy_installed() -> bool:
    """Return whether CuPy can be found, without importing it."""
    try:
        return importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError):  # ValueError: a stub module without __spec__
        return False


def cache_dir() -> Path | None:
    """Return the directory where CuPy caches kernels in this process.

    Returns
    -------
    pathlib.Path or None
        Once CuPy is imported, the directory its kernel cache uses; before that,
        ``CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache``, as CuPy will read them at import.
        ``None`` when ``CUPY_CACHE_IN_MEMORY=1`` keeps the cache off disk, when CuPy uses a
        cache backend that is not a directory, or when ``CUPY_CACHE_DIR`` is set but empty
        (`EMPTY_ORIGIN`). The directory may not exist yet.

    Notes
    -----
    An empty ``CUPY_CACHE_DIR`` is not CuPy's default: CuPy reads it as the folder ``''``,
    which ``os.makedirs`` cannot make, so ``import cupy`` fails (CuPy 14: its disk cache is
    made at import) or the first compile does (CuPy 13). As a path it would name the working
    folder, where the queue's files do not belong and ``cache clear`` must not delete.
    """
    if cache_in_memory():
        return None
    cupy = sys.modules.get("cupy")
    if cupy is None:  # not imported (or blocked with None)
        return _directory_from_environment()
    return _cupy_cache_dir(cupy)


#: `cache_dir_origin` when ``CUPY_CACHE_DIR`` is set but empty: no directory at all.
EMPTY_ORIGIN: Final[str] = "empty CUPY_CACHE_DIR"
#: What an empty ``CUPY_CACHE_DIR`` does, for the command line's messages.
EMPTY_WHY: Final[str] = (
    "CUPY_CACHE_DIR is set but empty, which names no folder: CuPy cannot make the folder '', "
    "so it fails at import (CuPy 14) or at its first compile"
)
#: What to do about it.
EMPTY_FIX: Final[str] = (
    "unset CUPY_CACHE_DIR (CuPy then uses ~/.cupy/kernel_cache), or set it to a folder"
)


def cache_dir_origin() -> str:
    """Say where `cache_dir` takes its answer from now.

    Returns
    -------
    str
        ``"in-memory"`` (``CUPY_CACHE_IN_MEMORY=1``), ``"cupy"`` (read from an imported
        CuPy), ``"CUPY_CACHE_DIR"``, `EMPTY_ORIGIN` (set but empty, so no directory) or
        ``"default"`` (``~/.cupy/kernel_cache``, what CuPy will use when it is imported).
    """
    if cache_in_memory():
        return "in-memory"
    if os.environ.get("CUPY_CACHE_DIR") == "" and cache_dir() is None:
        return EMPTY_ORIGIN
    cupy = sys.modules.get("cupy")
    compiler = getattr(getattr(cupy, "cuda", None), "compiler", None)
    if compiler is not None and (
        callable(getattr(compiler, "get_cache_dir", None))
        or getattr(compiler, "_kernel_cache_backend", None) is not None
    ):
        return "cupy"
    return "CUPY_CACHE_DIR" if "CUPY_CACHE_DIR" in os.environ else "default"


def _directory_from_environment() -> Path | None:
    """The directory CuPy would read from the environment now (its own expression); None for
    an empty ``CUPY_CACHE_DIR``, which names none."""
    return _directory(os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache")))


def _directory(name: str | os.PathLike[str]) -> Path | None:
    """`name` as a directory; None for ``''``, which ``Path`` would turn into ``'.'``."""
    return Path(name) if os.fspath(name) else None


def _cupy_cache_dir(cupy: object) -> Path | None:
    """The cache directory of an imported CuPy.

    CuPy reads ``CUPY_CACHE_DIR`` and ``HOME`` once, when ``cupy.cuda.compiler`` is imported,
    so a process that changes either afterwards must follow CuPy, not the environment.
    """
    compiler = getattr(getattr(cupy, "cuda", None), "compiler", None)
    public = getattr(compiler, "get_cache_dir", None)
    if callable(public):  # CuPy up to 13 (which re-read CUPY_CACHE_DIR at each call)
        return _directory(public())
    # CuPy 14.1 and 14.2 have no public getter: the directory lives only in the disk cache
    # backend that cupy.cuda.compiler creates at import. Read defensively: another layout
    # degrades to the environment, a backend without a directory turns the queue off.
    backend = getattr(compiler, "_kernel_cache_backend", None)
    if backend is None:
        logger.debug("cannot find CuPy's kernel cache directory; using the environment's")
        return _directory_from_environment()
    directory = getattr(backend, "_cache_dir", None)
    if not isinstance(directory, (str, os.PathLike)):
        logger.debug("CuPy's kernel cache (%s) is not a directory", type(backend).__name__)
        return None
    return _directory(directory)


def usable_directory(explicit: str | os.PathLike[str] | None) -> Path | None:
    """Return the directory for the queue files, created if need be, or None when off."""
    if cache_in_memory():
        logger.debug("warm-up queue off: CUPY_CACHE_IN_MEMORY=1, no cache to share")
        return None
    if explicit is None:
        # Without CuPy there is no cache to warm. An explicit directory skips this check so
        # the queue can be used (and tested) on machines without CuPy.
        if not cupy_installed():
            logger.debug("warm-up queue off: CuPy is not installed")
            return None
        directory = cache_dir()
        if directory is None:
            logger.debug(
                "warm-up queue off: CuPy's kernel cache is no directory (%s)", cache_dir_origin()
            )
            return None
    else:
        directory = Path(explicit)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        logger.debug("warm-up queue off: cannot create %s (%s)", directory, exc)
        return None
    return directory
