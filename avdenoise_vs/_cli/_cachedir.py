"""What lies in CuPy's kernel cache directory: CuPy's binaries, our stamps and locks, the rest.

Only the top level is read, and links are never followed: CuPy keeps its cache flat, and a
command that deletes files must not wander out of the directory it was pointed at. A file
belongs to CuPy or to us only when its whole name has one of the shapes below; anything else
is left alone.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from avdenoise_vs._safefiles import read_file

__all__ = ["CacheListing", "Stamp", "human_bytes", "read_stamp", "scan", "spec_summary"]

STAMP_NAME: Final = re.compile(r"warm-([0-9a-f]{32})\.stamp")
LOCK_NAME: Final = re.compile(r"warm-([0-9a-f]{32})\.lock")
# `_warmup/files.py`'s `write_stamp` writes `<stamp>.<pid>.<8 hex>.tmp` (`_safefiles.write_file`)
# and replaces the stamp with it; a process killed in between leaves it behind.
STAMP_TEMP_NAME: Final = re.compile(r"warm-[0-9a-f]{32}\.stamp\.\d+\.[0-9a-f]{8}\.tmp")
# CuPy names a cached binary after the SHA-1 hex digest of its key (MD5, 32 digits, in old
# releases) and its kind: .cubin, .ltoir (link-time IR) or .hsaco (ROCm); with
# CUPY_CACHE_SAVE_CUDA_SOURCE=1 the source sits beside it as `<name>.cu` (cupy 14.2,
# cupy/cuda/compiler.py `_compile_with_cache_cuda`, _compiler_cache.py). Its own temporary
# files (tempfile's `tmpXXXXXXXX`) cannot be told from anyone else's, so they are not matched.
KERNEL_NAME: Final = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{32})\.(?:cubin|ltoir|hsaco)(?:\.cu)?")


@dataclass(frozen=True)
class Stamp:
    """One warm-up stamp and what its text says.

    Attributes
    ----------
    path : pathlib.Path
    key : str
        The kernel key, 32 hex digits (from the file name).
    size : int
        Bytes.
    mtime : float
        When it was written (``os.stat`` seconds).
    version : str or None
        The avdenoise_vs version that wrote it, when the text says.
    pid : int or None
        The process that compiled the kernels, when the text says.
    env : str or None
        CuPy, NVRTC and GPU architecture the kernels were compiled for
        (``_warmup/cache.py``'s ``environment_fingerprint``); stamps before this field have none.
    specs : tuple of str
        The kernel specs the key covers, one ``repr`` each; empty when the text does not say.
    """

    path: Path
    key: str
    size: int
    mtime: float
    version: str | None = None
    pid: int | None = None
    env: str | None = None
    specs: tuple[str, ...] = ()


@dataclass
class CacheListing:
    """The top level of a cache directory, sorted into what the CLI may touch and the rest.

    Attributes
    ----------
    directory : pathlib.Path
    exists : bool
    stamps : list of Stamp
        Newest first.
    locks, stamp_temps, kernels : list of pathlib.Path
        Our lock files, our orphaned stamp temporaries, CuPy's cached kernel files.
    kernel_bytes : int
        Size of `kernels`.
    total_bytes : int
        Size of every plain file at the top level, other files included.
    others : list of pathlib.Path
        Everything else (subfolders, links, unrelated files): never touched.
    error : str or None
        Why the directory could not be read, if it could not.
    """

    directory: Path
    exists: bool = False
    stamps: list[Stamp] = field(default_factory=list)
    locks: list[Path] = field(default_factory=list)
    stamp_temps: list[Path] = field(default_factory=list)
    kernels: list[Path] = field(default_factory=list)
    kernel_bytes: int = 0
    total_bytes: int = 0
    others: list[Path] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict:
        """The listing as JSON-ready values."""
        return {
            "directory": str(self.directory),
            "exists": self.exists,
            "error": self.error,
            "stamps": [_stamp_dict(stamp) for stamp in self.stamps],
            "locks": [p.name for p in self.locks],
            "stamp_temporaries": [p.name for p in self.stamp_temps],
            "kernel_files": len(self.kernels),
            "kernel_bytes": self.kernel_bytes,
            "total_bytes": self.total_bytes,
            "other_entries": len(self.others),
        }


def _stamp_dict(stamp: Stamp) -> dict:
    """A stamp as JSON-ready values."""
    return {
        "key": stamp.key,
        "path": str(stamp.path),
        "size": stamp.size,
        "mtime": stamp.mtime,
        "version": stamp.version,
        "pid": stamp.pid,
        "env": stamp.env,
        "specs": list(stamp.specs),
    }


def scan(directory: Path) -> CacheListing:
    """Sort the top-level entries of `directory`; never raises.

    Parameters
    ----------
    directory : pathlib.Path
        CuPy's kernel cache directory (``_warmup_cache.cache_dir()``) or another one.

    Returns
    -------
    CacheListing
        With ``exists=False`` when there is no such directory, and `error` set when it
        cannot be listed.
    """
    listing = CacheListing(directory)
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return listing
    except OSError as exc:  # not a directory, no permission
        listing.exists = os.path.isdir(directory)
        listing.error = f"{type(exc).__name__}: {exc}"
        return listing
    listing.exists = True
    for entry in sorted(entries, key=lambda e: e.name):
        _sort_entry(listing, entry)
    listing.stamps.sort(key=lambda stamp: stamp.mtime, reverse=True)
    return listing


def _sort_entry(listing: CacheListing, entry: os.DirEntry) -> None:
    """Put one directory entry where it belongs in `listing`."""
    path = Path(entry.path)
    try:
        # Links are "others" whatever their name: deleting one would be safe, but what it
        # points to is not ours to describe.
        if not entry.is_file(follow_symlinks=False):
            listing.others.append(path)
            return
        info = entry.stat(follow_symlinks=False)
    except OSError:
        listing.others.append(path)
        return
    listing.total_bytes += info.st_size
    name = entry.name
    if match := STAMP_NAME.fullmatch(name):
        listing.stamps.append(read_stamp(path, match.group(1), info.st_size, info.st_mtime))
    elif LOCK_NAME.fullmatch(name):
        listing.locks.append(path)
    elif STAMP_TEMP_NAME.fullmatch(name):
        listing.stamp_temps.append(path)
    elif KERNEL_NAME.fullmatch(name):
        listing.kernels.append(path)
        listing.kernel_bytes += info.st_size
    else:
        listing.others.append(path)


def read_stamp(path: Path, key: str, size: int = 0, mtime: float = 0.0) -> Stamp:
    """Parse a stamp's text (see ``_warmup/files.py`'s `write_stamp``); unreadable parts stay None.

    Parameters
    ----------
    path : pathlib.Path
    key : str
        The key from the file name.
    size, mtime
        From ``os.stat``.
    """
    try:
        # A stamp is a few hundred bytes; a larger file under that name is not one of ours
        # to read whole. Never through a link, nor from a FIFO, which would hang the CLI.
        lines = read_file(path, 64 * 1024).decode("utf-8", "replace").splitlines()
    except OSError:
        return Stamp(path, key, size, mtime)
    version = pid = env = None
    head = lines[0].split() if lines else []
    if len(head) >= 3 and head[1] == "avdenoise_vs":
        version = head[2]
    if len(head) >= 5 and head[3] == "pid" and head[4].isdigit():
        pid = int(head[4])
    specs = []
    for line in lines[1:]:
        word, _, rest = line.partition(" ")
        if word == "env":
            env = rest
        elif word == "spec":
            specs.append(rest)
    return Stamp(path, key, size, mtime, version, pid, env, tuple(specs))


_ENUM_REPR: Final = re.compile(r"<\w+\.(\w+): [^>]*>")


def spec_summary(spec: str) -> str:
    """A kernel spec's ``repr`` made shorter for people: enum members by name alone.

    Examples
    --------
    >>> spec_summary("NlmSpec(radius=1, distance=<Distance.LUMA: 'luma'>)")
    'NlmSpec(radius=1, distance=LUMA)'
    """
    return _ENUM_REPR.sub(r"\1", spec)


def human_bytes(count: int) -> str:
    """``1536`` -> ``'1.5 KiB'``; bytes below 1 KiB as they are.

    Examples
    --------
    >>> human_bytes(1536), human_bytes(12)
    ('1.5 KiB', '12 B')
    """
    if count < 1024:
        return f"{count} B"
    size = count / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
