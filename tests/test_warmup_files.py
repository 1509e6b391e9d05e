"""The warm-up queue's files: where they go, and a quiet stderr.

CPU only, CuPy not needed: an imported CuPy is a fake module in ``sys.modules``. CI also runs
this file against the filelock floor declared in pyproject.toml (``.ci/run``).
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from avdenoise_vs import _warmup_cache, warmup
from avdenoise_vs.warmup import kernel_key, warm_up

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__: list[str] = []

pytestmark = pytest.mark.timeout(30)

RESULT_S = 15.0
"""Longest wait for a child process doing a warm-up."""
KEY = kernel_key(["a stand-in spec"], environment="cupy=14.2.0;nvrtc=13.0;sm=90")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cold cache directory, with the queue's switches in their default state."""
    for name in ("CUPY_CACHE_IN_MEMORY", "AVDENOISE_WARMUP", "AVDENOISE_WARMUP_REPORT"):
        monkeypatch.delenv(name, raising=False)
    directory = tmp_path / "kernel_cache"
    directory.mkdir()
    return directory


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


# --- stderr: a warm-up prints nothing ---------------------------------------------------------

_WARM_UP_CHILD = textwrap.dedent(
    """
    import gc, sys
    from avdenoise_vs.warmup import WarmUp, warm_up
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
