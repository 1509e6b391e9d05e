"""The warm-up queue's files: where they go, their modes, an unusable lock, a quiet stderr.

CPU only, CuPy not needed: an imported CuPy is a fake module in ``sys.modules``. CI also runs
this file against the filelock floor declared in pyproject.toml (``.ci/run``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from avdenoise_vs import _version
from avdenoise_vs._warmup import cache as _warmup_cache
from avdenoise_vs._warmup import files as _warmup_files
from avdenoise_vs._warmup import queue as warmup
from avdenoise_vs._warmup.queue import WarmUp, kernel_key, warm_up

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__: list[str] = []

pytestmark = pytest.mark.timeout(30)

RESULT_S = 15.0
"""Longest wait for a child process doing a warm-up."""
KEY = kernel_key(["a stand-in spec"], environment="cupy=14.2.0;nvrtc=13.0;sm=90")


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    """Run the block under `mask`, then restore the process's umask."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _paths(cache: Path) -> tuple[Path, Path]:
    return cache / f"warm-{KEY:032x}.lock", cache / f"warm-{KEY:032x}.stamp"


# --- where: the directory CuPy's cache uses ---------------------------------------------------


def _import_fake_cupy(monkeypatch: pytest.MonkeyPatch, compiler: object) -> None:
    """Put a CuPy with this ``cupy.cuda.compiler`` in sys.modules, as if imported."""
    cuda = types.SimpleNamespace(compiler=compiler)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))


def _disk_cache(directory: Path) -> object:
    """CuPy 14's disk cache backend: it holds the directory read at import."""
    return types.SimpleNamespace(_cache_dir=str(directory))


def test_cache_dir_is_the_one_cupy_read_at_import(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    read_at_import = tmp_path / "read-at-import"
    _import_fake_cupy(
        monkeypatch, types.SimpleNamespace(_kernel_cache_backend=_disk_cache(read_at_import))
    )
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "set-later"))
    assert warmup.cache_dir() == read_at_import
    monkeypatch.delenv("CUPY_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home-set-later"))
    assert warmup.cache_dir() == read_at_import


def test_cache_dir_prefers_cupys_public_getter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    compiler = types.SimpleNamespace(
        get_cache_dir=lambda: str(tmp_path / "public"),
        _kernel_cache_backend=_disk_cache(tmp_path / "private"),
    )
    _import_fake_cupy(monkeypatch, compiler)
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    assert warmup.cache_dir() == tmp_path / "public"


def test_cache_dir_of_a_cupy_without_a_disk_cache_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    memory_backend = types.SimpleNamespace(load=lambda name: None)  # a custom cache backend
    _import_fake_cupy(monkeypatch, types.SimpleNamespace(_kernel_cache_backend=memory_backend))
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    assert warmup.cache_dir() is None


def test_cache_dir_of_an_unknown_cupy_layout_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _import_fake_cupy(monkeypatch, types.SimpleNamespace())
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    assert warmup.cache_dir() == tmp_path


def test_queue_files_go_beside_cupys_cache(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _import_fake_cupy(monkeypatch, types.SimpleNamespace(_kernel_cache_backend=_disk_cache(cache)))
    monkeypatch.setattr(_warmup_cache, "cupy_installed", lambda: True)
    elsewhere = tmp_path / "environment"
    monkeypatch.setenv("CUPY_CACHE_DIR", str(elsewhere))
    assert warm_up(KEY, lambda: None).queued  # no explicit directory: CuPy's
    assert _paths(cache)[1].exists()
    assert not elsewhere.exists()


def test_cache_dir_origin_names_who_decides(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.delenv("CUPY_CACHE_DIR", raising=False)
    assert _warmup_cache.cache_dir_origin() == "default"
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    assert _warmup_cache.cache_dir_origin() == "CUPY_CACHE_DIR"
    _import_fake_cupy(monkeypatch, types.SimpleNamespace())  # a layout we cannot read
    assert _warmup_cache.cache_dir_origin() == "CUPY_CACHE_DIR"
    _import_fake_cupy(
        monkeypatch, types.SimpleNamespace(_kernel_cache_backend=_disk_cache(tmp_path))
    )
    assert _warmup_cache.cache_dir_origin() == "cupy"
    monkeypatch.setenv("CUPY_CACHE_IN_MEMORY", "1")
    assert _warmup_cache.cache_dir_origin() == "in-memory"


@pytest.mark.parametrize(
    "compiler",
    [
        None,  # CuPy not imported yet: the environment decides
        types.SimpleNamespace(get_cache_dir=lambda: ""),  # CuPy 13 re-reads it
        types.SimpleNamespace(_kernel_cache_backend=_disk_cache("")),  # CuPy 14, made at import
    ],
    ids=["environment", "cupy-13", "cupy-14"],
)
def test_an_empty_cupy_cache_dir_is_no_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, compiler
) -> None:
    """Not the working folder, which ``Path("")`` is: nothing of the queue or the device
    claims may land there."""
    from avdenoise_vs._cuda import placement as _placement

    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    if compiler is not None:
        _import_fake_cupy(monkeypatch, compiler)
    monkeypatch.setenv("CUPY_CACHE_DIR", "")
    monkeypatch.chdir(tmp_path)
    assert _warmup_cache.cache_dir() is None
    assert _warmup_cache.cache_dir_origin() == _warmup_cache.EMPTY_ORIGIN
    monkeypatch.setattr(_warmup_cache, "cupy_installed", lambda: True)
    assert warm_up(KEY, lambda: None).ok and not warm_up(KEY, lambda: None).queued
    monkeypatch.setattr(_placement, "_chosen", None)
    monkeypatch.setattr(_placement, "visible_count", lambda: 2)
    monkeypatch.setattr(_placement, "free_memory", lambda count: [None] * count)
    assert _placement.device_for_process(None) == 0
    assert list(tmp_path.iterdir()) == []


def test_the_stamp_says_what_its_key_is_for(cache: Path) -> None:
    assert warm_up(KEY, lambda: None, cache_dir=cache).queued
    head, *detail = _paths(cache)[1].read_text().splitlines()
    assert head == f"{KEY:032x} avdenoise_vs {_version.__version__} pid {os.getpid()}"
    assert detail == ["env cupy=14.2.0;nvrtc=13.0;sm=90", "spec 'a stand-in spec'"]
    assert _warmup_cache.describe_key(KEY) == tuple(detail)
    assert _warmup_cache.describe_key(KEY ^ 1) == ()


# --- modes: a cache directory shared by a group -----------------------------------------------


@pytest.mark.parametrize(("mask", "expected"), [(0o002, 0o664), (0o022, 0o644)])
def test_queue_files_follow_the_umask(cache: Path, mask: int, expected: int) -> None:
    lock_path, stamp_path = _paths(cache)
    with umask(mask):
        place = WarmUp.begin(KEY, cache_dir=cache)
        assert place is not None
        lock_mode = _mode(lock_path)  # while held: some filelock releases unlink the file
        assert place.finish()
    assert lock_mode == expected
    assert _mode(stamp_path) == expected
    assert list(cache.glob("*.tmp")) == [], "the stamp's temporary file must be gone"


def _refuse_opening_for_writing(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[str]:
    """Make `path` fail to open for writing, as another user's 0o644 lock file does.

    Root opens any file, so the refusal is simulated where filelock meets it, ``os.open``.
    Returns the list that records every refused attempt.
    """
    refused: list[str] = []
    real_open = os.open

    def guarded_open(name: object, flags: int, *args: object, **kwargs: object) -> int:
        if os.fspath(name) == str(path) and flags & (os.O_WRONLY | os.O_RDWR):
            refused.append(str(name))
            raise PermissionError(13, "Permission denied", str(name))
        return real_open(name, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)
    return refused


def test_unopenable_lock_degrades_to_the_stamp_and_logs_once(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lock_path, stamp_path = _paths(cache)
    lock_path.touch()
    monkeypatch.setattr(_warmup_files, "_unusable_locks", set())
    refused = _refuse_opening_for_writing(monkeypatch, lock_path)
    compiles: list[int] = []
    with caplog.at_level(logging.DEBUG, logger=warmup.__name__):
        first = warm_up(KEY, lambda: compiles.append(1), cache_dir=cache)
        second = warm_up(KEY, lambda: compiles.append(2), cache_dir=cache)
    assert refused, "the lock file must have been tried"
    assert (first.queued, first.ok, second.queued, second.ok) == (False, True, False, True)
    assert compiles == [1, 2], "without the lock each process compiles for itself"
    assert not stamp_path.exists(), "no stamp without the lock: the next one cannot trust it"
    notes = [r for r in caplog.records if "cannot lock" in r.getMessage()]
    assert len(notes) == 1
    assert notes[0].levelno == logging.DEBUG
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_unopenable_lock_still_sees_a_stamp_written_meanwhile(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Another user's process finishes between this one's first look and its failed open.
    lock_path, stamp_path = _paths(cache)
    report = tmp_path / "report"
    monkeypatch.setenv("AVDENOISE_WARMUP_REPORT", str(report))
    real_new_lock = _warmup_files.new_lock

    def stamped_meanwhile(path: Path) -> object:
        stamp_path.write_text("written by another user\n")
        return real_new_lock(path)

    monkeypatch.setattr(warmup, "new_lock", stamped_meanwhile)
    lock_path.touch()
    _refuse_opening_for_writing(monkeypatch, lock_path)
    assert WarmUp.begin(KEY, cache_dir=cache) is None
    assert (report / f"warm-{os.getpid()}").read_text() == f"{KEY:032x}\n"


# --- stderr: a warm-up prints nothing ---------------------------------------------------------

_WARM_UP_CHILD = textwrap.dedent(
    """
    import gc, sys
    from avdenoise_vs._warmup.queue import WarmUp, warm_up
    cache = sys.argv[1]
    assert warm_up(1, lambda: None, cache_dir=cache).queued
    assert not warm_up(2, lambda: 1 / 0, cache_dir=cache).ok
    place = WarmUp.begin(3, cache_dir=cache)
    place.close()
    del place
    gc.collect()
    place = WarmUp.begin(4, cache_dir=cache)
    del place
    gc.collect()
    held_at_exit = WarmUp.begin(5, cache_dir=cache)
    """
)


def test_a_warm_up_prints_nothing_on_stderr(cache: Path) -> None:
    root = Path(__file__).parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    run = subprocess.run(
        [sys.executable, "-c", _WARM_UP_CHILD, str(cache)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=RESULT_S,
    )
    assert run.returncode == 0, run.stderr
    assert "Exception ignored" not in run.stderr
    assert run.stderr == ""
