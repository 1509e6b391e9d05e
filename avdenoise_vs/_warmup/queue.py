"""Warm-up queue: one process compiles the CUDA kernels while its siblings wait.

Av1an starts N ``vspipe`` workers within milliseconds, each on a chunk of the same script. On a
cold CuPy kernel cache every worker would compile the same kernels at once, N times the CPU for
one result. The queue lets the first process compile under an OS lock while the others wait;
they then load the warm cache. A stamp file written after a successful compile lets every later
process skip the queue without even opening the lock file.

Both files live beside the kernel cache, in the directory CuPy's cache uses (`cache_dir`)::

    warm-<key as 32 lowercase hex digits>.lock    flock-based lock
    warm-<key as 32 lowercase hex digits>.stamp   written once the kernels are cached, saying
                                                  what for (`describe_key`)

The key (`kernel_key`) hashes what the kernels are compiled for, not the filter's settings:
every strength and frame size shares one stamp. Both files are created through the umask; a
lock file this process cannot open (another user's, made under umask 022) degrades to a look
at the stamp.

Nothing here raises into the caller: an Av1an chunk that fails three times ends the whole
encode, so every problem with the queue is logged and the caller compiles as it would have
without a queue, and `warm_up` hands back what the compile raised instead of raising it.

Environment variables
---------------------
CUPY_CACHE_DIR
    CuPy's kernel cache directory (default ``~/.cupy/kernel_cache``), read by CuPy at import;
    the queue files go where CuPy's cache is.
CUPY_CACHE_IN_MEMORY
    ``1`` keeps CuPy's cache in memory; with no files to share, the queue is off.
AVDENOISE_WARMUP
    ``0`` (or ``false``, ``no``, ``off``) switches the queue off, for comparison benchmarks.
AVDENOISE_WARMUP_WAIT
    Seconds a process waits for the one ahead of it (default 180): a lock file held without
    end, by a hung process or another user's, costs each process this long.
AVDENOISE_WARMUP_REPORT
    A directory where each process records what the queue did for it
    (`avdenoise_vs._warmup.report`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from avdenoise_vs._log import vs_warning
from avdenoise_vs._warmup.cache import (
    DEFAULT_WAIT_LIMIT_S,
    QUEUE_SWITCH,
    WAIT_VARIABLE,
    cache_dir,
    check_key,
    configured_wait_s,
    describe_key,
    environment_fingerprint,
    kernel_key,
    queue_enabled,
    usable_directory,
    wait_limit_s,
)
from avdenoise_vs._warmup.files import (
    new_lock,
    note_unusable_lock,
    release_if_warm,
    stamp_exists,
    wait_for_lock,
    write_stamp,
)
from avdenoise_vs._warmup.report import record_outcome as _report

if TYPE_CHECKING:
    from collections.abc import Callable

    import filelock

__all__ = [
    "DEFAULT_WAIT_LIMIT_S",
    "WAIT_VARIABLE",
    "WarmUp",
    "WarmUpOutcome",
    "cache_dir",
    "configured_wait_s",
    "environment_fingerprint",
    "kernel_key",
    "warm_up",
]

logger = logging.getLogger(__name__)


# Keys this process holds a place for. A second filter with the same settings in the same
# script would otherwise wait on its own process's flock (flock conflicts between two open
# file descriptions even inside one process) until the wait limit runs out.
_held_keys: set[int] = set()
_held_keys_lock = threading.Lock()


def _claim(key: int) -> bool:
    """Record that this process holds `key`; False when it already does."""
    with _held_keys_lock:
        fresh = key not in _held_keys
        _held_keys.add(key)
        return fresh


def _unclaim(key: int) -> None:
    """Give `key` back so this process may queue for it again."""
    with _held_keys_lock:
        _held_keys.discard(key)


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
            Seconds to wait for the process ahead; default: ``AVDENOISE_WARMUP_WAIT``, else
            `DEFAULT_WAIT_LIMIT_S` (180).

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
            return cls._begin(key, cache_dir, wait_limit_s(wait_limit))
        except Exception:
            logger.warning("warm-up queue failed; compiling without it", exc_info=True)
            return None

    @classmethod
    def _begin(
        cls, key: int, explicit_dir: str | os.PathLike[str] | None, limit: float
    ) -> WarmUp | None:
        """Do the work of `begin`; may raise on unexpected errors."""
        check_key(key)
        if not queue_enabled():
            logger.debug("warm-up queue off: %s=0", QUEUE_SWITCH)
            _report("unqueued", key)
            return None
        directory = usable_directory(explicit_dir)
        if directory is None:
            _report("unqueued", key)
            return None
        stamp = directory / f"warm-{key:032x}.stamp"
        # Checked before the lock file is even opened: once warm, no process touches the lock.
        if stamp_exists(stamp):
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
        lock = new_lock(lock_path)
        started = time.monotonic()
        try:
            result = wait_for_lock(lock, stamp, limit)
        except (OSError, NotImplementedError) as exc:
            # A read-only directory, another user's lock file made under umask 022, no flock.
            # This process cannot wait its turn, but the stamp still says whether the cache
            # is warm: its own look, since the process ahead may have just finished.
            note_unusable_lock(lock_path, exc)
            _report("warm" if stamp_exists(stamp) else "unqueued", key)
            return None
        waited = time.monotonic() - started
        if result == "timeout":
            _report("self", key)
            vs_warning(
                logger,
                f"avdenoise: waited {waited:.0f} s for another process to compile the CUDA "
                f"kernels ({lock_path}); compiling in this process instead ({WAIT_VARIABLE} "
                "sets how long to wait)",
            )
            return None
        if result == "warm" or release_if_warm(lock, stamp):
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
            self.finished = write_stamp(self.stamp_path, self.key, describe_key(self.key))
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
        except OSError:  # the lock dies with the process anyway
            logger.debug("cannot release %s", self.lock_path, exc_info=True)
        finally:
            _unclaim(self.key)

    def __enter__(self) -> WarmUp:
        """Return the place; call `finish` inside the block to mark the cache warm."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Release the place; without an earlier `finish`, no stamp is written."""
        self.close()

    def __del__(self) -> None:
        """Release an abandoned place on garbage collection, without a stamp."""
        # Not contextlib.suppress: at interpreter shutdown module globals may already be None.
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        """Show the key and whether the place is held or finished."""
        state = "held" if self.held else ("finished" if self.finished else "released")
        return f"<WarmUp {self.key:032x} {state}>"


@dataclass(frozen=True)
class WarmUpOutcome:
    """What `warm_up` did.

    Attributes
    ----------
    queued : bool
        Whether this process compiled under a held place in the queue.
    error : Exception or None
        What the compile raised, None when it returned. The place, if any, was then released
        without a stamp, so the next process compiles again.
    """

    queued: bool
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        """Whether the compile returned."""
        return self.error is None


def warm_up(
    key: int,
    compile_fn: Callable[[], object],
    *,
    ahead: Callable[[], object] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    wait_limit: float | None = None,
) -> WarmUpOutcome:
    """Run `compile_fn` under a place in the warm-up queue, or directly when there is none.

    Parameters
    ----------
    key : int
        From `kernel_key`.
    compile_fn : callable
        Compiles (or loads from the cache) every kernel of `key`. Its result is discarded.
    ahead : callable, optional
        Called first, only under a held place: starts work that `compile_fn` waits for (the
        CUDA backend's compile ahead of its context). What it raises is logged only.
    cache_dir, wait_limit
        As for `WarmUp.begin`.

    Returns
    -------
    WarmUpOutcome
        Whether this process compiled under a held place (stamped if `compile_fn` returned),
        and what `compile_fn` raised, if anything.

    Raises
    ------
    BaseException
        Only what `compile_fn` raises that is not an ``Exception`` (``KeyboardInterrupt``,
        ``SystemExit``). Everything else, the queue's problems and the compile's, is returned
        or logged: deciding what a failed warm-up means is the caller's business.
    """
    place = WarmUp.begin(key, cache_dir=cache_dir, wait_limit=wait_limit)
    queued = place is not None
    try:
        if queued and ahead is not None:
            _start_ahead(key, ahead)
        compile_fn()
    except Exception as error:  # NVRTC, out of memory, a corrupt cache file, a CuPy bug
        logger.debug("warm-up of %032x failed", key, exc_info=True)
        return WarmUpOutcome(queued, error)
    else:
        if place is not None:
            place.finish()
        return WarmUpOutcome(queued)
    finally:
        if place is not None:
            place.close()  # after finish(), nothing; after a failure, released without a stamp


def _start_ahead(key: int, ahead: Callable[[], object]) -> None:
    """Call `warm_up`'s `ahead`; a failure only costs the head start."""
    try:
        ahead()
    except Exception:
        logger.debug("work ahead of the warm-up of %032x failed", key, exc_info=True)
