"""Who holds the warm-up queue's lock files now, for ``doctor``.

A process holds ``warm-<key>.lock`` while it compiles; every other process that needs those
kernels waits for it, up to ``AVDENOISE_WARMUP_WAIT`` seconds. In a cache shared by several
users, a lock held by another user's process (hung, or held on purpose) costs each of this
user's renders that long, and this user cannot end it. The holders are read from
``/proc/locks`` (Linux), which names the pid of each flock; elsewhere a non-blocking shared
flock tells only whether the lock is held, and the lock file's owner stands for the holder.
Nothing here writes a file or takes a lock that another process could wait on for long.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

__all__ = ["held_locks", "lock_lines", "lock_problems"]

#: ``1: FLOCK  ADVISORY  WRITE 20327 fe:00:2149907 0 EOF``; waiters (``1: -> FLOCK ...``) do
#: not match.
_PROC_LOCK = re.compile(r"\d+: FLOCK\s+\S+\s+\S+\s+(-?\d+)\s+([0-9a-f]+):([0-9a-f]+):(\d+)\s")


def held_locks(locks: list[Path]) -> list[dict[str, Any]]:
    """The lock files of `locks` that some process holds now, each with who holds it.

    Returns
    -------
    list of dict
        ``path``, ``pid`` (None when it cannot be known), ``uid`` and ``user`` (the holder's,
        else the lock file's owner), ``own`` (whether that is this user).
    """
    table = _proc_locks()
    held = []
    for path in locks:
        try:
            info = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if table is None:
            if not _probe_held(path):
                continue
            pid = None
        else:
            pids = table.get((os.major(info.st_dev), os.minor(info.st_dev), info.st_ino))
            pids = pids or table.get((None, None, info.st_ino))  # overlayfs: another device
            if not pids:
                continue
            pid = next((p for p in pids if p > 0), None)  # 0: outside this pid namespace
        uid = _process_uid(pid) if pid is not None else None
        uid = info.st_uid if uid is None else uid
        held.append(
            {
                "path": str(path),
                "pid": pid,
                "uid": uid,
                "user": _user(uid),
                "own": uid == os.getuid(),
            }
        )
    return held


def _proc_locks() -> dict[tuple, list[int]] | None:
    """Pids holding flocks, by (device major, minor, inode) and by (None, None, inode);
    None where ``/proc/locks`` cannot be read."""
    try:
        text = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    table: dict[tuple, list[int]] = {}
    for match in _PROC_LOCK.finditer(text):
        pid, major, minor, inode = match.groups()
        for key in ((int(major, 16), int(minor, 16), int(inode)), (None, None, int(inode))):
            table.setdefault(key, []).append(int(pid))
    return table


def _probe_held(path: Path) -> bool:
    """Whether another process holds `path`'s flock: a shared one is refused then. Taken and
    dropped at once; a read-only descriptor, so another user's 0644 lock file can be tried."""
    try:
        import fcntl
    except ImportError:  # no flock here: the queue has no lock to hold either
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # drops the shared flock, if taken
    return False


def _process_uid(pid: int) -> int | None:
    """The real uid of process `pid` (``/proc/<pid>/status``), None when it cannot be read."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    match = re.search(r"^Uid:\s+(\d+)", status, re.MULTILINE)
    return int(match.group(1)) if match else None


def _user(uid: int) -> str:
    """The login name of `uid`, or ``uid <n>`` when it has none here."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def _holder(lock: dict[str, Any]) -> str:
    """``pid 123 of user alice (uid 1001)``, or the lock file's owner when the pid is unknown."""
    who = f"user {lock['user']} (uid {lock['uid']})"
    return f"pid {lock['pid']} of {who}" if lock["pid"] is not None else f"a process ({who}'s file)"


def lock_lines(cache: dict[str, Any], indent: str) -> list[str]:
    """The doctor's lines on held lock files: each, who holds it, how long waiters wait."""
    lines = []
    for lock in cache.get("held_locks") or []:
        lines.append(f"{indent}lock held now: {lock['path']}, by {_holder(lock)}")
    if lines:
        lines.append(
            f"{indent}  a process that needs those kernels waits up to {_limit_words(cache)}"
        )
    return lines


def _limit_words(cache: dict[str, Any]) -> str:
    """``180 s (AVDENOISE_WARMUP_WAIT)``."""
    limit = cache.get("wait_limit_s")
    return f"{limit:g} s (AVDENOISE_WARMUP_WAIT)" if limit is not None else "AVDENOISE_WARMUP_WAIT"


def lock_problems(cache: dict[str, Any], add) -> None:
    """A wait limit that is not a number; a lock another user holds."""
    if cache.get("wait_error"):
        add(cache["wait_error"], "set AVDENOISE_WARMUP_WAIT to a number of seconds, or unset it")
    for lock in cache.get("held_locks") or []:
        if lock["own"]:
            continue  # this user's own process compiling now: nothing to fix
        add(
            f"the warm-up lock {lock['path']} is held by {_holder(lock)}, another user: every "
            f"render here that needs those kernels waits up to {_limit_words(cache)} before "
            "it compiles them itself",
            f"ask {lock['user']} to end that process if it is not compiling; or give your "
            "renders a cache of their own, CUPY_CACHE_DIR set to a folder only you write "
            f"(e.g. {_private_cache(cache.get('directory'))}); or lower AVDENOISE_WARMUP_WAIT",
        )


def _private_cache(current: str | None) -> str:
    """A cache folder of this user's own to suggest: CuPy's default, unless that is the
    shared one."""
    default = os.path.join(os.path.expanduser("~"), ".cupy", "kernel_cache")
    if current and os.path.abspath(current) == os.path.abspath(default):
        return f"{default}-{_user(os.getuid())}"
    return default
