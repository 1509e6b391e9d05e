"""How many other avdenoise processes render on this host now: an Av1an fleet, or alone.

How BM3D frames should cross the bus depends on it (``_transfer``). A process alone is
held back by the driver, which serialises one context's copies from pageable memory; many
processes share the host's CPU and memory bandwidth, where the driver's small staging buffer
beats whole-frame page-locked ones.

Each CUDA backend's process announces itself with a file ``<pid>.process`` in the
folder ``processes/`` inside CuPy's kernel cache directory (``_warmup_cache.cache_dir``), the
folder a fleet already shares for the warm-up queue; it holds the process's start time. It
is removed at exit; one left behind by a killed process is stale once its pid is dead or
belongs to a process started at another time, and the next process that counts removes it.
Av1an starts its workers at once, so every worker of a fleet has announced itself by the time
any of them has its context: the backend counts the others again in its warm-up, then.

Nothing here raises: without a usable folder a process counts as alone, with a debug log. The
folder and its files are made, read and removed through ``_safefiles``: a link planted there
is never followed, and a folder that is a link is not used.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from .._safefiles import discard, read_file, remove_at_exit, subfolder, write_file
from ._placement import pid_alive

__all__ = ["FOLDER", "announce", "others", "start_time"]

logger = logging.getLogger(__name__)

FOLDER = "processes"
_ANNOUNCEMENT = re.compile(r"(\d+)\.process")

#: This process's announcement, and the pid that made it: a forked child announces again.
_announced: tuple[int, Path] | None = None


def _folder() -> Path | None:
    from .._warmup_cache import cache_dir

    directory = cache_dir()
    return None if directory is None else directory / FOLDER


def announce(folder: Path | None = None) -> None:
    """Tell other processes that this one renders here, until it exits (once per process)."""
    global _announced
    pid = os.getpid()
    if _announced is not None and _announced[0] == pid:
        return
    folder = _folder() if folder is None else folder
    if folder is None:
        return
    name = f"{pid}.process"
    try:
        with subfolder(folder) as fd:
            write_file(name, (start_time(pid) or "").encode("ascii"), dir_fd=fd)
    except OSError as error:
        logger.debug("avdenoise: cannot announce this process in %s: %s", folder, error)
        return
    _announced = (pid, folder / name)
    remove_at_exit(folder, name)


def others(folder: Path | None = None) -> int:
    """Live avdenoise processes other than this one that have announced themselves."""
    folder = _folder() if folder is None else folder
    if folder is None:
        return 0
    try:
        with subfolder(folder, create=False) as fd:
            return _count(fd)
    except OSError as error:
        logger.debug("avdenoise: cannot count processes in %s: %s", folder, error)
        return 0


def _count(fd: int) -> int:
    """Count the live announcements in the open folder `fd`; remove the stale ones."""
    own, count = os.getpid(), 0
    for entry in list(os.scandir(fd)):
        match = _ANNOUNCEMENT.fullmatch(entry.name)
        # Only regular files are announcements: a link under such a name was planted.
        if match is None or int(match.group(1)) == own or not entry.is_file(follow_symlinks=False):
            continue
        if _live(int(match.group(1)), entry.name, fd):
            count += 1
        else:
            discard(entry.name, dir_fd=fd)
    return count


def start_time(pid: int) -> str | None:
    """When process `pid` started, in clock ticks since boot (``/proc/<pid>/stat``); None
    where there is no such file (another system, a process gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after the name, which may hold spaces
    return fields[19] if len(fields) > 19 else None


def _live(pid: int, name: str, fd: int) -> bool:
    """Whether the process that wrote the announcement `name` (in the folder `fd`) still runs:
    its pid is alive and, where both are known, started when the announcement says (pids are
    reused)."""
    if not pid_alive(pid):
        return False
    try:
        announced = read_file(name, 64, dir_fd=fd).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return True  # being written, or unreadable: the pid is alive
    started = start_time(pid)
    return not announced or started is None or announced == started
