"""Files in a folder that other users may write: made, read and removed without following links.

An Av1an farm shares one CuPy kernel cache among the users of a group, or keeps it in a
folder anyone may write (mode 1777). Whoever can write there can plant a symbolic link under a
name this package is about to use, so that a victim's process writes through it into a file of
the victim's elsewhere. Hence, for every file the package makes in the cache:

* a file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``; one that may exist already is
  written under a fresh name beside it and renamed over it (a rename replaces a link, never
  what it points to);
* a file is read, locked or appended to only through ``O_NOFOLLOW | O_NONBLOCK`` (a planted
  FIFO must not hang a render), and only when it is a regular file;
* a file is removed only when it is a regular file, never through a link;
* a subfolder (``processes/``, ``placement/``) is opened with ``O_NOFOLLOW | O_DIRECTORY`` and
  everything in it is done relative to that descriptor (``dir_fd``), so a subfolder swapped
  for a link after the look still leads nowhere else. A subfolder that is a link is refused,
  with one warning per process.

The cache folder itself may be a link: it is the user's setting (``CUPY_CACHE_DIR`` or
``~/.cupy``), which CuPy follows too. Functions here raise OSError; each caller decides what
a failure costs (never a render).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import stat
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = [
    "append_line",
    "discard",
    "is_file",
    "locked",
    "read_file",
    "remove_at_exit",
    "remove_file",
    "subfolder",
    "write_file",
]

logger = logging.getLogger(__name__)

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NEW = os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
_CREATE = os.O_WRONLY | _NEW
_EXISTING = _NOFOLLOW | _NONBLOCK | _CLOEXEC
#: Through the umask and default ACLs, like every file of the folder it sits in.
_MODE = 0o666
_LOCK_POLL_S = 0.005

# Subfolders already reported as links: a process that counts often warns once.
_refused: set[str] = set()


def _temp_name(name: str | os.PathLike[str]) -> str:
    """A fresh name beside `name`: ``<name>.<pid>.<8 hex digits>.tmp``."""
    return f"{os.fspath(name)}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def write_file(name: str | os.PathLike[str], data: bytes, *, dir_fd: int | None = None) -> None:
    """Make `name` hold `data`: written under a fresh name, then renamed over `name`.

    Whatever was at `name` (a stale file, a planted link) is replaced, not written through.
    """
    temp = _temp_name(name)
    fd = os.open(temp, _CREATE, _MODE, dir_fd=dir_fd)
    try:
        with open(fd, "wb") as file:  # closes fd, even when the write fails
            file.write(data)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise


def _open_regular(name, flags: int, dir_fd: int | None, *, own: bool = False) -> int:
    """Open an existing `name` without following a link; refuse anything but a regular file
    (and, with `own`, one of another user's, or with other names: a planted hard link)."""
    fd = os.open(name, flags | _EXISTING, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{os.fspath(name)!r} is not a regular file")
        if own and (info.st_uid != os.geteuid() or info.st_nlink != 1):
            raise OSError(f"{os.fspath(name)!r} is not this user's own file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(name: str | os.PathLike[str], limit: int, *, dir_fd: int | None = None) -> bytes:
    """The first `limit` bytes of the regular file `name`; OSError for a link or a FIFO."""
    fd = _open_regular(name, os.O_RDONLY, dir_fd)
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def is_file(name: str | os.PathLike[str], *, dir_fd: int | None = None) -> bool:
    """Whether `name` is a regular file (a link to one is not); False when it cannot be seen."""
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except (OSError, ValueError):
        return False


def remove_file(name: str | os.PathLike[str], *, dir_fd: int | None = None) -> bool:
    """Remove `name` if it is a regular file; whether it is gone now. A link, a folder or a
    FIFO under a name of ours was not made by us: it stays."""
    try:
        if not stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            return False
        os.unlink(name, dir_fd=dir_fd)  # unlink never follows a link, should one be swapped in
    except FileNotFoundError:
        pass  # another process saw it stale first
    return True


def discard(name: str, *, dir_fd: int | None = None) -> None:
    """`remove_file`, with a failure logged at debug level instead of raised: for the stale
    files of processes gone, which the next process to look removes anyway."""
    try:
        remove_file(name, dir_fd=dir_fd)
    except OSError as error:
        logger.debug("avdenoise: cannot remove %s: %s", name, error)


def remove_at_exit(folder: Path, name: str) -> None:
    """Remove the regular file `name` from the subfolder `folder` when the process exits; a
    failure there is logged at debug level only."""
    atexit.register(_remove_from, folder, name)


def _remove_from(folder: Path, name: str) -> None:
    try:
        with subfolder(folder, create=False) as fd:
            remove_file(name, dir_fd=fd)
    except OSError as error:
        logger.debug("avdenoise: cannot remove %s from %s: %s", name, folder, error)


def append_line(path: Path, line: str) -> None:
    """Append `line` to the file `path`, created if need be, but only to a file of this
    user's own: a link or another user's file planted under the name is refused."""
    try:
        fd = os.open(path, _CREATE | os.O_APPEND, _MODE)
    except FileExistsError:
        fd = _open_regular(path, os.O_WRONLY | os.O_APPEND, None, own=True)
    try:
        os.write(fd, (line + "\n").encode("ascii", "backslashreplace"))
    finally:
        os.close(fd)


@contextlib.contextmanager
def subfolder(path: Path, *, create: bool = True) -> Iterator[int]:
    """Open the subfolder `path` of a cache folder (which is made if need be); yield its fd.

    Raises
    ------
    OSError
        When `path` cannot be made or opened, or is a link (refused, with one warning).
    """
    parent = path.parent
    if create:
        os.makedirs(parent, exist_ok=True)  # the cache folder: the user's, links followed
    parent_fd = os.open(parent, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(path.name, 0o777, dir_fd=parent_fd)
        try:
            fd = os.open(path.name, os.O_RDONLY | _DIRECTORY | _EXISTING, dir_fd=parent_fd)
        except OSError:
            _refuse_link(path, parent_fd)
            raise
    finally:
        os.close(parent_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _refuse_link(path: Path, parent_fd: int) -> None:
    """Warn once a process that the subfolder `path` is a link, and so is not used."""
    try:
        is_link = stat.S_ISLNK(os.stat(path.name, dir_fd=parent_fd, follow_symlinks=False).st_mode)
    except OSError:
        return
    if is_link and str(path) not in _refused:
        _refused.add(str(path))
        logger.warning(
            "avdenoise: %s is a symbolic link, which is never followed; going on without it",
            path,
        )


@contextlib.contextmanager
def locked(name: str, timeout: float, *, dir_fd: int | None = None) -> Iterator[None]:
    """Hold an flock on the lock file `name` (made if need be) for the block.

    Raises
    ------
    TimeoutError
        When another process holds it for `timeout` seconds.
    OSError
        When it cannot be made or opened, or is not a regular file.
    """
    import fcntl  # Unix only, like the flock itself

    try:
        fd = os.open(name, os.O_RDWR | _NEW, _MODE, dir_fd=dir_fd)
    except FileExistsError:
        fd = _open_regular(name, os.O_RDWR, dir_fd)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"{name} held for {timeout} s") from None
                time.sleep(_LOCK_POLL_S)
        yield
    finally:
        os.close(fd)  # closing the only descriptor drops the flock
