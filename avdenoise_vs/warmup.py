"""Warm-up queue: one process compiles the CUDA kernels while its siblings wait.

Av1an starts N ``vspipe`` workers within milliseconds, each on a chunk of the same script. On a
cold CuPy kernel cache every worker would compile the same kernels at once, N times the CPU for
one result. The queue lets the first process compile under an OS lock while the others wait;
they then load the warm cache. A stamp file written after a successful compile lets every later
process skip the queue without even opening the lock file.

Both files live beside the kernel cache, in CuPy's cache directory::

    warm-<key as 32 lowercase hex digits>.lock    flock-based lock, never deleted
    warm-<key as 32 lowercase hex digits>.stamp   written once the kernels are cached

Nothing here raises into the caller: an Av1an chunk that fails three times ends the whole
encode, so every problem with the queue itself is logged and the caller simply compiles as it
would have without a queue.

Environment variables
---------------------
CUPY_CACHE_DIR
    CuPy's kernel cache directory (default ``~/.cupy/kernel_cache``); the queue files go there.
CUPY_CACHE_IN_MEMORY
    ``1`` keeps CuPy's cache in memory; with no files to share, the queue is off.
AVDENOISE_WARMUP
    ``0`` (or ``false``, ``no``, ``off``) switches the queue off, for comparison benchmarks.
AVDENOISE_WARMUP_REPORT
    A directory. When set, each process records what the queue did for it in files named
    ``compiled-<pid>`` (compiled under a held place), ``waited-<pid>`` (waited, then found the
    cache warm), ``self-<pid>`` (gave up waiting and compiled for itself), ``warm-<pid>`` (found
    the stamp at once) and ``unqueued-<pid>`` (queue switched off or unusable); each line is a
    key. A file ``phases-<pid>`` holds ``<phase> <time.time()>`` lines marking the steps of a
    GPU filter's creation (see `record_phase`). ``scripts/fleet.py`` reads them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import logging
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import filelock

from avdenoise_vs import _version

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

__all__ = [
    "DEFAULT_WAIT_LIMIT_S",
    "WarmUp",
    "cache_dir",
    "environment_fingerprint",
    "kernel_key",
    "record_phase",
    "warm_up",
]

logger = logging.getLogger(__name__)

DEFAULT_WAIT_LIMIT_S: Final[float] = 180.0
"""How long a process waits for the one ahead of it before compiling for itself."""

_POLL_S: Final[float] = 0.1
_SWITCH_ENV: Final[str] = "AVDENOISE_WARMUP"
_REPORT_ENV: Final[str] = "AVDENOISE_WARMUP_REPORT"
_OFF_VALUES: Final[frozenset[str]] = frozenset({"0", "false", "no", "off"})

# Keys this process holds a place for. A second filter with the same settings in the same
# script would otherwise wait on its own process's flock (flock conflicts between two open
# file descriptions even inside one process) until the wait limit runs out.
_held_keys: set[int] = set()
_held_keys_lock = threading.Lock()

_WaitResult = Literal["held", "warm", "timeout"]


@functools.cache
def environment_fingerprint() -> str:
    """Describe what decides which files CuPy writes to its kernel cache.

    CuPy names a cached binary after its source, the NVRTC version and the target
    architecture, and a new CuPy release may change the scheme; a stamp written under one of
    these says nothing about the cache under another.

    Returns
    -------
    str
        ``"cupy=<version>;nvrtc=<major>.<minor>;sm=<compute capability>"``, with ``none`` for
        parts that cannot be found, or ``"no-cupy"`` when CuPy cannot be imported.

    Notes
    -----
    Cached for the life of the process, and CuPy is only imported on the first call, never at
    module import. The compute capability is that of the current device at that first call.
    """
    try:
        import cupy  # noqa: PLC0415  # optional: CPU-only installs have no CuPy
    except Exception:  # noqa: BLE001  # a broken CUDA install fails at import with anything
        return "no-cupy"
    return f"cupy={cupy.__version__};{_nvrtc_part(cupy)};{_arch_part(cupy)}"


def _nvrtc_part(cupy: object) -> str:
    """Return ``nvrtc=<major>.<minor>``, or ``nvrtc=none`` when NVRTC cannot be loaded."""
    try:
        major, minor = cupy.cuda.nvrtc.getVersion()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001  # missing library, no driver, old CuPy layout
        return "nvrtc=none"
    return f"nvrtc={major}.{minor}"


def _arch_part(cupy: object) -> str:
    """Return ``sm=<compute capability>``, or ``sm=none`` when there is no usable GPU."""
    try:
        capability = cupy.cuda.Device().compute_capability  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001  # no GPU, no driver, CUDA_VISIBLE_DEVICES=""
        return "sm=none"
    return f"sm={capability}"


def kernel_key(options: object, layout: object, *, environment: str | None = None) -> int:
    """Hash everything that decides which kernels a filter compiles into a 128-bit key.

    Parameters
    ----------
    options, layout : object
        The filter's frozen settings and frame layout. Their whole ``repr`` goes into the key,
        so it must show every field a kernel depends on.
    environment : str, optional
        Stands in for `environment_fingerprint` (CuPy, NVRTC and GPU); for tests.

    Returns
    -------
    int
        A key in ``[0, 2**128)``, the same in every process and on every run for the same
        inputs (BLAKE2b, not the per-process salted ``hash``).
    """
    env = environment_fingerprint() if environment is None else environment
    text = "\n".join((_version.__version__, repr(options), repr(layout), env))
    digest = hashlib.blake2b(text.encode("utf-8", "backslashreplace"), digest_size=16).digest()
    return int.from_bytes(digest, "big")


def _cache_in_memory() -> bool:
    """Mirror CuPy's reading of ``CUPY_CACHE_IN_MEMORY``: only an integer equal to 1 is on."""
    value = os.environ.get("CUPY_CACHE_IN_MEMORY")
    if not value:
        return False
    try:
        return int(value) == 1
    except ValueError:
        return False


def cache_dir() -> Path | None:
    """Return the directory where CuPy caches kernels in this process.

    Returns
    -------
    pathlib.Path or None
        ``CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache``; ``None`` when
        ``CUPY_CACHE_IN_MEMORY=1`` keeps the cache off disk. The directory may not exist yet.
    """
    if _cache_in_memory():
        return None
    # Same expression as CuPy's get_cache_dir: the variable's value is taken as is.
    return Path(os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache")))


def _queue_enabled() -> bool:
    """Return whether ``AVDENOISE_WARMUP`` leaves the queue on (the default)."""
    return os.environ.get(_SWITCH_ENV, "1").strip().lower() not in _OFF_VALUES


def _cupy_installed() -> bool:
    """Return whether CuPy can be found, without importing it."""
    try:
        return importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError):  # ValueError: a stub module without __spec__
        return False


def _usable_directory(explicit: str | os.PathLike[str] | None) -> Path | None:
    """Return the directory for the queue files, created if need be, or None when off."""
    if _cache_in_memory():
        logger.debug("warm-up queue off: CUPY_CACHE_IN_MEMORY=1, no cache to share")
        return None
    if explicit is None:
        # Without CuPy there is no cache to warm. An explicit directory skips this check so
        # the queue can be used (and tested) on machines without CuPy.
        if not _cupy_installed():
            logger.debug("warm-up queue off: CuPy is not installed")
            return None
        directory = cache_dir()
        if directory is None:
            return None
    else:
        directory = Path(explicit)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        logger.debug("warm-up queue off: cannot create %s (%s)", directory, exc)
        return None
    return directory


def _claim(key: int) -> bool:
    """Record that this process holds `key`; False when it already does."""
    with _held_keys_lock:
        if key in _held_keys:
            return False
        _held_keys.add(key)
        return True


def _unclaim(key: int) -> None:
    """Give `key` back so this process may queue for it again."""
    with _held_keys_lock:
        _held_keys.discard(key)


def _report(kind: str, key: int) -> None:
    """Record what the queue did for this process, for ``scripts/fleet.py``."""
    _append_report(f"{kind}-{os.getpid()}", f"{key:032x}")


def record_phase(name: str) -> None:
    """Note in the report folder (if any) that this process reached `name`, and when.

    The fleet benchmark turns these into where a worker's time to its first frame goes
    (package loaded, CUDA context up, kernels warm) without a profiler on every worker.
    """
    _append_report(f"phases-{os.getpid()}", f"{name} {time.time():.6f}")


def _append_report(filename: str, line: str) -> None:
    """Append `line` to `filename` in the report folder; never raises."""
    directory = os.environ.get(_REPORT_ENV)
    if not directory:
        return
    try:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, filename), "a", encoding="ascii") as report:
            report.write(line + "\n")
    except OSError as exc:
        logger.debug("cannot write the warm-up report in %s (%s)", directory, exc)


def _log_warning(message: str) -> None:
    """Warn through VapourSynth's log, which vspipe and Av1an show, else through logging."""
    # Only a process that already runs VapourSynth gets the VS log: importing it here would
    # start a core in processes that use the package without VapourSynth.
    vapoursynth = sys.modules.get("vapoursynth")
    try:
        vapoursynth.core.log_message(vapoursynth.MESSAGE_TYPE_WARNING, message)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001  # absent, or no core in this thread
        logger.warning(message)


def _new_lock(path: Path) -> filelock.BaseFileLock:
    """Make an flock-based lock object for `path` that any thread may release."""
    # thread_local=False: the place may be released by another thread than the one that took
    # it (VapourSynth worker threads, a garbage-collection finaliser); a thread-local lock
    # would look unlocked there and keep the flock until the process exits.
    try:
        # filelock >= 4 would fall back to a presence-based soft lock on filesystems without
        # flock; a killed holder would leave that behind, so treat it as "cannot lock".
        return filelock.FileLock(str(path), thread_local=False, fallback_to_soft=False)
    except TypeError:  # filelock 3.x has no soft fallback to switch off
        return filelock.FileLock(str(path), thread_local=False)


def _wait_for_lock(lock: filelock.BaseFileLock, stamp: Path, limit: float) -> _WaitResult:
    """Poll for the lock about every 100 ms until held, stamped or out of time.

    Raises
    ------
    OSError, NotImplementedError
        When the lock file cannot be opened or locked at all.
    """
    deadline = time.monotonic() + limit
    while True:
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:  # a subclass of OSError, so caught before the caller's
            pass
        else:
            return "held"
        # The stamp appears just before the holder unlocks; seeing it here spares the waiters
        # from taking the lock one after another only to release it again.
        if stamp.exists():
            return "warm"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        time.sleep(min(_POLL_S, remaining))


def _release_if_warm(lock: filelock.BaseFileLock, stamp: Path) -> bool:
    """Take a second look at the stamp once the lock is held; if it is there, unlock at once."""
    # The process ahead may have finished between our first look and our lock: this second look
    # is what lets one warm-up serve the whole queue.
    try:
        warm = stamp.exists()
    except BaseException:
        lock.release(force=True)
        raise
    if warm:
        lock.release(force=True)
    return warm


def _write_stamp(path: Path, key: int) -> bool:
    """Write the stamp atomically (temp file + replace); False and a debug log on failure."""
    try:
        fd, temp = tempfile.mkstemp(prefix=f"{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as stamp:
                stamp.write(f"{key:032x} avdenoise_vs {_version.__version__} pid {os.getpid()}\n")
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
    except OSError as exc:
        logger.debug("cannot write %s (%s); the next process compiles again", path, exc)
        return False
    return True


def _resolve_limit(wait_limit: float | None) -> float:
    """Return the wait limit in seconds: the default for None or NaN, never negative."""
    if wait_limit is None or math.isnan(wait_limit):
        return DEFAULT_WAIT_LIMIT_S
    return max(0.0, float(wait_limit))


def _check_key(key: int) -> None:
    """Raise ValueError unless `key` is a 128-bit key from `kernel_key` (caught by `begin`)."""
    if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key < 1 << 128:
        msg = f"avdenoise.warmup: key must be an int in [0, 2**128), got {key!r}"
        raise ValueError(msg)


class WarmUp:
    """A held place in the warm-up queue: this process compiles while its siblings wait.

    Get one from `begin`, compile, then call `finish`. Releasing it any other way (`close`,
    leaving a ``with`` block, garbage collection) leaves no stamp, so a half-failed warm-up
    does not convince the next process that the cache is warm. Use `warm_up` when
    `begin` may return None.

    Attributes
    ----------
    key : int
        The kernel key this place is for.
    lock_path, stamp_path : pathlib.Path
        The queue's files for this key.
    waited_s : float
        Seconds spent waiting before the lock was obtained.
    finished : bool
        Whether `finish` wrote the stamp.
    """

    def __init__(
        self, key: int, lock: filelock.BaseFileLock, stamp_path: Path, waited_s: float
    ) -> None:
        self.key = key
        self.lock_path = Path(lock.lock_file)
        self.stamp_path = stamp_path
        self.waited_s = waited_s
        self.finished = False
        self._lock: filelock.BaseFileLock | None = lock
        self._owner_pid = os.getpid()
        self._guard = threading.Lock()

    @classmethod
    def begin(
        cls,
        key: int,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        wait_limit: float | None = None,
    ) -> WarmUp | None:
        """Queue for the right to compile the kernels of `key`.

        Parameters
        ----------
        key : int
            From `kernel_key`.
        cache_dir : path-like, optional
            Where the queue files go; default: CuPy's cache directory (`cache_dir`). When
            given, CuPy need not be installed, so the queue works on CPU-only machines.
        wait_limit : float, optional
            Seconds to wait for the process ahead; default `DEFAULT_WAIT_LIMIT_S` (180).

        Returns
        -------
        WarmUp or None
            A held place: compile under it, then `finish`. None: compile as usual, because
            the queue is off (``CUPY_CACHE_IN_MEMORY=1``, ``AVDENOISE_WARMUP=0``, no CuPy, no
            usable directory), this process already holds `key`, the cache is already warm
            (found before or after waiting), the lock cannot be used, or `wait_limit` ran
            out (a warning is logged).

        Notes
        -----
        Never raises: problems with the queue are logged and give None.
        """
        try:
            return cls._begin(key, cache_dir, _resolve_limit(wait_limit))
        except Exception:
            logger.warning("warm-up queue failed; compiling without it", exc_info=True)
            return None

    @classmethod
    def _begin(
        cls, key: int, explicit_dir: str | os.PathLike[str] | None, limit: float
    ) -> WarmUp | None:
        """Do the work of `begin`; may raise on unexpected errors."""
        _check_key(key)
        if not _queue_enabled():
            logger.debug("warm-up queue off: %s=0", _SWITCH_ENV)
            _report("unqueued", key)
            return None
        directory = _usable_directory(explicit_dir)
        if directory is None:
            _report("unqueued", key)
            return None
        stamp = directory / f"warm-{key:032x}.stamp"
        # Checked before the lock file is even opened: once warm, no process touches the lock.
        if stamp.exists():
            _report("warm", key)
            logger.debug("kernel cache already warm for %032x", key)
            return None
        if not _claim(key):
            logger.debug("this process already holds the warm-up place for %032x", key)
            return None
        place = None
        try:
            place = cls._queue(key, directory / f"warm-{key:032x}.lock", stamp, limit)
        finally:
            if place is None:
                _unclaim(key)
        return place

    @classmethod
    def _queue(cls, key: int, lock_path: Path, stamp: Path, limit: float) -> WarmUp | None:
        """Wait for the lock and turn the outcome into a place or None."""
        lock = _new_lock(lock_path)
        started = time.monotonic()
        try:
            result = _wait_for_lock(lock, stamp, limit)
        except (OSError, NotImplementedError) as exc:  # read-only dir, no flock, odd filesystem
            logger.debug("warm-up queue off: cannot lock %s (%s)", lock_path, exc)
            _report("unqueued", key)
            return None
        waited = time.monotonic() - started
        if result == "timeout":
            _report("self", key)
            _log_warning(
                f"avdenoise: waited {waited:.0f} s for another process to compile the CUDA "
                f"kernels ({lock_path}); compiling in this process instead"
            )
            return None
        if result == "warm" or _release_if_warm(lock, stamp):
            _report("waited", key)
            logger.debug("waited %.2f s; kernel cache now warm for %032x", waited, key)
            return None
        _report("compiled", key)
        logger.debug("compiling under the warm-up lock %s (waited %.2f s)", lock_path, waited)
        return cls(key, lock, stamp, waited)

    @property
    def held(self) -> bool:
        """Whether this place still holds the lock."""
        return self._lock is not None

    def finish(self) -> bool:
        """Mark the cache warm and release the place.

        Returns
        -------
        bool
            Whether the stamp was written. A failure is logged at debug level, never raised:
            the next process just compiles again. False too once the place is released.
        """
        with self._guard:
            if self._lock is None:
                logger.debug("finish() after release of %032x: no stamp written", self.key)
                return False
            # The stamp must exist before the unlock so the next holder's second look sees it.
            self.finished = _write_stamp(self.stamp_path, self.key)
            self._release()
        return self.finished

    def close(self) -> None:
        """Release the place without a stamp, leaving the cache cold; idempotent."""
        with self._guard:
            if self._lock is not None:
                logger.debug("warm-up for %032x abandoned: no stamp written", self.key)
            self._release()

    def _release(self) -> None:
        """Unlock and give the key back; the caller holds ``self._guard``."""
        lock, self._lock = self._lock, None
        if lock is None:
            return
        try:
            # A forked child shares the parent's open file description: unlocking there would
            # unlock the parent too.
            if os.getpid() == self._owner_pid:
                lock.release(force=True)
        except Exception:  # the lock dies with the process anyway
            logger.debug("cannot release %s", self.lock_path, exc_info=True)
        finally:
            _unclaim(self.key)

    def __enter__(self) -> WarmUp:
        """Return the place; call `finish` inside the block to mark the cache warm."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Release the place; without an earlier `finish`, no stamp is written."""
        self.close()

    def __del__(self) -> None:
        """Release an abandoned place on garbage collection, without a stamp."""
        # Not contextlib.suppress: at interpreter shutdown module globals may already be None.
        try:  # noqa: SIM105
            self.close()
        except Exception:  # noqa: BLE001, S110
            pass

    def __repr__(self) -> str:
        """Show the key and whether the place is held or finished."""
        state = "held" if self.held else ("finished" if self.finished else "released")
        return f"<WarmUp {self.key:032x} {state}>"


def warm_up(
    key: int,
    compile_fn: Callable[[], object],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    wait_limit: float | None = None,
) -> bool:
    """Run `compile_fn` under a place in the warm-up queue, or directly when there is none.

    Parameters
    ----------
    key : int
        From `kernel_key`.
    compile_fn : callable
        Compiles (or loads from the cache) every kernel of `key`. Its result is discarded.
    cache_dir, wait_limit
        As for `WarmUp.begin`.

    Returns
    -------
    bool
        True when this process compiled under a held place (and, if `compile_fn` returned,
        wrote the stamp); False when it ran `compile_fn` without one.

    Raises
    ------
    Exception
        Whatever `compile_fn` raises; the place is then released without a stamp. The queue
        itself never raises.
    """
    place = WarmUp.begin(key, cache_dir=cache_dir, wait_limit=wait_limit)
    if place is None:
        compile_fn()
        return False
    try:
        compile_fn()
    except BaseException:
        place.close()
        raise
    place.finish()
    return True
