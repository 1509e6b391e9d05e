"""The warm-up queue's two files: an flock-based lock (filelock) and a stamp.

Both are created through the umask and default ACLs, like the files of the directory they sit
in, so that in a directory shared by one group (umask 002) each member can lock and replace
them. Neither is opened through a link planted under its name: the stamp is written under a
fresh name and renamed into place and only a regular file counts as one (``_safefiles``), and
filelock (from 3.30, pyproject's floor) opens the lock file with ``O_NOFOLLOW``. Nothing
here knows about keys or places; `avdenoise_vs._warmup.queue` does.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Final, Literal

import filelock

from avdenoise_vs import _version
from avdenoise_vs._safefiles import is_file, write_file

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = [
    "WaitResult",
    "new_lock",
    "note_unusable_lock",
    "release_if_warm",
    "stamp_exists",
    "wait_for_lock",
    "write_stamp",
]

logger = logging.getLogger("avdenoise_vs._warmup.queue")

#: How often a waiting process looks for the lock and the stamp. In a cold fleet every waiter
#: starts its first frame only once it sees the stamp; a look is two system calls.
_POLL_S: Final[float] = 0.02

# Lock files already reported as unusable: a script with many filters logs each once.
_unusable_locks: set[str] = set()

WaitResult = Literal["held", "warm", "timeout"]
"""How waiting for the lock ended: it is held, the stamp appeared, or time ran out."""


def new_lock(path: Path) -> filelock.BaseFileLock:
    """Make an flock-based lock object for `path` that any thread may release.

    Notes
    -----
    Needs filelock >= 3.30, pyproject's floor. Given no mode, filelock creates the file
    through the umask and default ACLs from 3.24 on (before, it forced 0o644, which kept the
    other users of a shared cache out of the queue without a word; an explicit mode is still
    forced with fchmod). From 3.30 it can be told not to fall back to a presence-based soft
    lock on filesystems without flock, as 3.24 to 3.29 do unasked: a SIGKILLed holder would
    leave that lock behind for every later worker to wait the full limit on.
    """
    # thread_local=False: the place may be released by another thread than the one that took
    # it (VapourSynth worker threads, a garbage-collection finaliser); a thread-local lock
    # would look unlocked there and keep the flock until the process exits.
    return filelock.FileLock(str(path), thread_local=False, fallback_to_soft=False)


def note_unusable_lock(path: Path, exc: BaseException) -> None:
    """Log at debug level, once per lock file and process, that `path` cannot be locked."""
    name = str(path)
    if name in _unusable_locks:
        return
    _unusable_locks.add(name)
    logger.debug("warm-up queue off: cannot lock %s (%s); checking its stamp only", path, exc)


def wait_for_lock(lock: filelock.BaseFileLock, stamp: Path, limit: float) -> WaitResult:
    """Poll for the lock every ``_POLL_S`` until held, stamped or out of time.

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
        if is_file(stamp):
            return "warm"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        time.sleep(min(_POLL_S, remaining))


def stamp_exists(stamp: Path) -> bool:
    """Whether the stamp is there: a regular file, not a link planted under its name; False
    when it cannot be looked at."""
    return is_file(stamp)


def release_if_warm(lock: filelock.BaseFileLock, stamp: Path) -> bool:
    """Take a second look at the stamp once the lock is held; if it is there, unlock at once."""
    # The process ahead may have finished between our first look and our lock: this second look
    # is what lets one warm-up serve the whole queue.
    try:
        warm = is_file(stamp)
    except BaseException:
        lock.release(force=True)
        raise
    if warm:
        lock.release(force=True)
    return warm


def write_stamp(path: Path, key: int, detail: Sequence[str] = ()) -> bool:
    """Write the stamp atomically (`_safefiles.write_file`); False and a debug log on failure.

    Its first line is ``<key> avdenoise_vs <version> pid <pid>``; `detail` lines follow, which say
    what the key is for (``_warmup/cache.py``'s ``describe_key``). Only the stamp's presence counts
    for the queue; the text is for people and ``python -m avdenoise_vs cache list``.
    """
    head = f"{key:032x} avdenoise_vs {_version.__version__} pid {os.getpid()}"
    text = "".join(f"{line}\n" for line in (head, *detail))
    try:
        # Made through the umask and default ACLs (mkstemp would make it 0o600), so the stamp
        # is as readable as the cache directory means it to be.
        write_file(path, text.encode("utf-8", "backslashreplace"))
    except OSError as exc:
        logger.debug("cannot write %s (%s); the next process compiles again", path, exc)
        return False
    return True
