"""``python -m avdenoise_vs cache list|clear``: the warm-up stamps and CuPy's kernel cache.

``clear`` deletes only files whose whole name is one of ours (``warm-<key>.stamp``,
``warm-<key>.lock`` and a stamp's orphaned temporary) or CuPy's (``<sha1>.cubin`` and its
kin, see `_cachedir`), at the top level of the directory, regular files only, never through
a link; and only in a folder that holds at least one of them, so a folder that is no kernel
cache is refused whole. Without ``--yes`` it only says what it would delete. An empty
``CUPY_CACHE_DIR`` names no folder (not the working folder): both commands refuse it.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from avdenoise_vs._cli._cachedir import CacheListing, human_bytes, scan, spec_summary
from avdenoise_vs._cli._manual import filled, option_help
from avdenoise_vs._safefiles import remove_file
from avdenoise_vs._warmup import cache as _warmup_cache

__all__ = ["add_parser", "recognised", "resolve_dir", "run"]

_LIST_EPILOG = """\
examples:
  python -m avdenoise_vs cache list
  python -m avdenoise_vs cache list --dir /scratch/cupy-cache --json
"""
_CLEAR_EPILOG = """\
examples:
  python -m avdenoise_vs cache clear
      list what would be deleted, deleting nothing
  python -m avdenoise_vs cache clear --stamps-only --yes
      delete the stamps and lock files: the next run compiles under the queue again
  python -m avdenoise_vs cache clear --yes
      delete them and CuPy's cached kernels too
"""
_EPILOG = _LIST_EPILOG + _CLEAR_EPILOG.removeprefix("examples:\n")


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``cache`` and its two subcommands to the CLI."""
    parser = commands.add_parser(
        "cache",
        help="list or clear the warm-up stamps and CuPy's kernel cache",
        description=filled(
            "List or clear the warm-up stamps and CuPy's kernel cache. 'clear' deletes only "
            "files whose whole name is one of ours (warm-<key>.stamp, warm-<key>.lock) or "
            "CuPy's (<sha1>.cubin and its kin), at the top level of the directory, never "
            "through a link; without --yes it only says what it would delete."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="stamps (with what each is for), lock files and CuPy's cached kernels",
        description=filled(
            "List the warm-up stamps in CuPy's kernel cache directory, with the kernels each "
            "one is for, and the size of CuPy's cached kernels there."
        ),
        epilog=_LIST_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    clear = actions.add_parser(
        "clear",
        help="delete the stamps and lock files, and CuPy's cached kernels",
        description=filled(
            "Delete our warm-up stamps and lock files and, unless --stamps-only, CuPy's cached "
            "kernel files, from the top level of CuPy's kernel cache directory. Nothing else "
            "is touched. Without --yes, only print what would be deleted."
        ),
        epilog=_CLEAR_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    clear.add_argument(
        "--stamps-only",
        action="store_true",
        help=option_help(
            "keep CuPy's kernels: the next run loads them, but queues again once",
            "CuPy's kernels are deleted too", "--stamps-only",
        ),
    )  # fmt: skip
    clear.add_argument(
        "--yes",
        action="store_true",
        help=option_help("really delete", "a dry run, which only lists", "--yes"),
    )
    for sub in (listing, clear):
        sub.add_argument(
            "--dir",
            type=_folder,
            help=option_help(
                "the cache directory", "the one CuPy uses: CUPY_CACHE_DIR, else "
                "~/.cupy/kernel_cache", "--dir /scratch/cupy-cache",
            ),
        )  # fmt: skip
        sub.add_argument(
            "--json",
            action="store_true",
            help=option_help("print the listing as JSON", "text", "--json"),
        )
        sub.set_defaults(run=run)


def _folder(text: str) -> Path:
    """``--dir``'s value as a path; ``''`` is refused, which ``Path`` would read as ``'.'``."""
    if not text:
        raise argparse.ArgumentTypeError("must name a folder, got ''")
    return Path(text)


def resolve_dir(explicit: Path | None) -> tuple[Path | None, str]:
    """The directory to work on and where it came from (``--dir``, CuPy, the environment).

    Returns
    -------
    (pathlib.Path or None, str)
        None when ``CUPY_CACHE_IN_MEMORY=1`` keeps CuPy's cache off disk, or when
        ``CUPY_CACHE_DIR`` is set but empty (origin ``_warmup/cache.py``'s ``EMPTY_ORIGIN``).
    """
    if explicit is not None:
        return explicit, "--dir"
    return _warmup_cache.cache_dir(), _warmup_cache.cache_dir_origin()


def run(args: argparse.Namespace) -> int:
    """Run ``cache list`` or ``cache clear``; return the exit code."""
    directory, origin = resolve_dir(args.dir)
    if directory is None:
        if origin == _warmup_cache.EMPTY_ORIGIN:
            text = (
                f"{_warmup_cache.EMPTY_WHY}; nothing listed or deleted: {_warmup_cache.EMPTY_FIX}"
            )
            _say(args, {"directory": None, "origin": origin, "error": text}, text)
            return 1
        text = "CUPY_CACHE_IN_MEMORY=1: CuPy keeps its kernels in memory; no directory, no stamp"
        _say(args, {"directory": None, "origin": origin}, text)
        return 0
    listing = scan(directory)
    if args.action == "list":
        return _list(args, listing, origin)
    return _clear(args, listing, origin)


def _say(args: argparse.Namespace, data: dict, text: str) -> None:
    """Print `data` as JSON with ``--json``, else `text`."""
    print(json.dumps(data, indent=2) if args.json else text)


def _list(args: argparse.Namespace, listing: CacheListing, origin: str) -> int:
    """``cache list``: exit 1 when the directory exists but cannot be read."""
    if args.json:
        print(json.dumps({"origin": origin, **listing.as_dict()}, indent=2))
        return 1 if listing.error else 0
    print("\n".join(describe(listing, origin)))
    return 1 if listing.error else 0


def describe(
    listing: CacheListing, origin: str, *, indent: str = "", most: int | None = None
) -> list[str]:
    """Lines that describe a cache directory, for ``cache list`` and ``doctor``; `most` stamps
    at most, the newest first (a long-used cache holds one stamp per script shape)."""
    lines = [f"{indent}cache directory: {listing.directory} (from {_origin_words(origin)})"]
    if listing.error:
        return [*lines, f"{indent}  cannot be read: {listing.error}"]
    if not listing.exists:
        return [*lines, f"{indent}  does not exist yet (CuPy creates it on its first compile)"]
    lines.append(
        f"{indent}  CuPy's cached kernels: {_count(len(listing.kernels), 'file')}, "
        f"{human_bytes(listing.kernel_bytes)} (all files: {human_bytes(listing.total_bytes)})"
    )
    count = len(listing.stamps)
    newest = f", newest {_when(listing.stamps[0].mtime)}" if count else ""
    lines.append(f"{indent}  warm-up stamps: {count}{newest}; lock files: {len(listing.locks)}")
    shown = listing.stamps if most is None else listing.stamps[:most]
    for stamp in shown:
        writer = f"avdenoise_vs {stamp.version}" if stamp.version else "unknown writer"
        lines.append(f"{indent}    {stamp.key}  {_when(stamp.mtime)}  {writer}")
        if stamp.env:
            lines.append(f"{indent}      compiled for {stamp.env}")
        lines.extend(f"{indent}      {spec_summary(spec)}" for spec in stamp.specs)
        if not stamp.env and not stamp.specs:
            lines.append(f"{indent}      (its text does not say what it is for)")
    if len(shown) < count:
        lines.append(
            f"{indent}    ... and {count - len(shown)} older: python -m avdenoise_vs cache list"
        )
    if listing.stamp_temps:
        lines.append(f"{indent}  orphaned stamp temporaries: {len(listing.stamp_temps)}")
    if listing.others:
        lines.append(f"{indent}  other entries, never touched: {len(listing.others)}")
    return lines


def _count(number: int, noun: str) -> str:
    """``1 file``, ``2 files``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _origin_words(origin: str) -> str:
    """How `resolve_dir`'s origin reads in a sentence."""
    return {
        "cupy": "CuPy",
        "CUPY_CACHE_DIR": "the environment, CUPY_CACHE_DIR",
        "default": "CuPy's default, as CUPY_CACHE_DIR is unset",
        "--dir": "--dir",
    }.get(origin, origin)


def _when(mtime: float) -> str:
    """A file time as local ``YYYY-MM-DD HH:MM:SS``."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(mtime))


@dataclass
class _Cleared:
    """What ``cache clear --yes`` did."""

    deleted: list[Path] = field(default_factory=list)
    in_use: list[Path] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)


def _clear(args: argparse.Namespace, listing: CacheListing, origin: str) -> int:
    """``cache clear``: a dry run without ``--yes``; exit 1 when a file could not go."""
    if listing.error:
        _say(args, {"origin": origin, **listing.as_dict()}, "\n".join(describe(listing, origin)))
        return 1
    if listing.others and not recognised(listing):
        text = (
            f"{listing.directory} does not look like a CuPy kernel cache: nothing at its top "
            "level is a cached kernel, a warm-up stamp or a lock file, so nothing was deleted "
            "(--dir names another folder)"
        )
        _say(args, {"origin": origin, "directory": str(listing.directory), "error": text}, text)
        return 1
    ours = [stamp.path for stamp in listing.stamps] + listing.stamp_temps + listing.locks
    kernels = [] if args.stamps_only else listing.kernels
    kernel_bytes = sum(_size(path) for path in kernels)
    failed = False
    if not args.yes:
        data = {"files": [p.name for p in ours + kernels], "kernel_bytes": kernel_bytes}
        lines = [f"would delete from {listing.directory}:"]
        lines += [f"  {path.name}" for path in ours]
        if kernels:
            lines.append(
                f"  {len(kernels)} of CuPy's cached kernel files ({human_bytes(kernel_bytes)})"
            )
        lines.append("run again with --yes to delete them" if ours or kernels else "  nothing")
    else:
        done = _Cleared()
        for path in ours + kernels:
            (_remove_lock if path in listing.locks else _remove)(path, done)
        data = {
            "deleted": [p.name for p in done.deleted],
            "locks_in_use": [p.name for p in done.in_use],
            "failed": [{"file": p.name, "error": why} for p, why in done.failed],
        }
        lines = [f"deleted from {listing.directory}: {_counts(done.deleted, listing)}"]
        lines += [f"kept {p.name}: another process holds it (compiling now)" for p in done.in_use]
        lines += [f"could not delete {p.name}: {why}" for p, why in done.failed]
        failed = bool(done.failed)
    if args.stamps_only:
        lines.append(f"CuPy's {len(listing.kernels)} cached kernel files stay (--stamps-only)")
    info = {"origin": origin, "directory": str(listing.directory), "dry_run": not args.yes}
    _say(args, {**info, "stamps_only": args.stamps_only, **data}, "\n".join(lines))
    return 1 if failed else 0


def recognised(listing: CacheListing) -> bool:
    """Whether the folder of `listing` holds any of CuPy's cache files or our stamps and
    locks at its top level: ``clear`` deletes nothing in a folder that does not."""
    return bool(listing.kernels or listing.stamps or listing.locks or listing.stamp_temps)


def _counts(deleted: list[Path], listing: CacheListing) -> str:
    """``2 stamps, 2 lock files, 12 of CuPy's cached kernel files`` for what was deleted."""
    gone = set(deleted)
    stamps = sum(stamp.path in gone for stamp in listing.stamps)
    temps = sum(path in gone for path in listing.stamp_temps)
    parts = [
        _count(stamps, "stamp"),
        f"{temps} stamp temporar{'y' if temps == 1 else 'ies'}",
        _count(sum(path in gone for path in listing.locks), "lock file"),
        f"{sum(path in gone for path in listing.kernels)} of CuPy's cached kernel files",
    ]
    return ", ".join(part for part in parts if not part.startswith("0 ")) or "nothing"


def _size(path: Path) -> int:
    """A file's size, 0 when it is gone."""
    try:
        return path.stat(follow_symlinks=False).st_size
    except OSError:
        return 0


def _remove(path: Path, done: _Cleared) -> None:
    """Unlink one file; a file already gone counts as deleted."""
    try:
        gone = remove_file(path)  # a regular file only: a link swapped in since the scan stays
    except OSError as exc:
        done.failed.append((path, exc.strerror or type(exc).__name__))
        return
    if gone:
        done.deleted.append(path)
    else:
        done.failed.append((path, "no longer a regular file"))


def _remove_lock(path: Path, done: _Cleared) -> None:
    """Unlink a lock file only while holding it.

    A worker waiting on a lock would otherwise lock a new file under the same name while the
    compiling process still holds the old one, and two processes would compile at once.
    """
    import filelock

    from avdenoise_vs._warmup.files import new_lock

    lock = new_lock(path)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        done.in_use.append(path)
        return
    except (OSError, NotImplementedError) as exc:  # another user's lock, no flock here
        done.failed.append((path, str(exc)))
        return
    try:
        _remove(path, done)
    finally:
        lock.release(force=True)
