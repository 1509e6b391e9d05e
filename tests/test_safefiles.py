"""Links planted in a shared kernel cache are never followed (``_safefiles``).

Another user of a group's cache, or of a folder anyone may write, plants a symbolic link under
each name the package uses, pointing at a file of the victim's outside the cache, or replaces a
subfolder with a link to a folder of the victim's. The victim's process must leave both exactly
as they were, and its warm-up and render must still work. CPU only.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from avdenoise_vs import _safefiles
from avdenoise_vs._cuda import placement as _placement
from avdenoise_vs._warmup import cache as _warmup_cache
from avdenoise_vs._warmup import queue as warmup
from avdenoise_vs._warmup.queue import kernel_key, warm_up

from .fake_cuda_backend import FakeCuda, first_plane, random_clip

__all__: list[str] = []

pytestmark = pytest.mark.timeout(30)

SECRET = "the victim's own text\n"
KEY = kernel_key(["a planted-link spec"], environment="cupy=14.2.0;nvrtc=13.0;sm=90")
STAMP, LOCK = f"warm-{KEY:032x}.stamp", f"warm-{KEY:032x}.lock"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file of the victim's outside the cache (mode 0600), alone in its folder."""
    folder = tmp_path / "home"
    folder.mkdir()
    secret = folder / "secret"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    return secret


def _untouched(victim: Path, *others: str) -> None:
    """The victim's file holds what it held, and its folder nothing new."""
    assert victim.read_text() == SECRET
    assert sorted(p.name for p in victim.parent.iterdir()) == sorted(["secret", *others])


def _plant(link: Path, target: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid is gone, not a zombie
    return child.pid


def _regular(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


# --- the helpers ------------------------------------------------------------------------------


def test_write_file_replaces_a_link_instead_of_writing_through_it(
    tmp_path: Path, victim: Path
) -> None:
    link = _plant(tmp_path / "cache" / "name", victim)
    _safefiles.write_file(link, b"ours")
    _untouched(victim)
    assert _regular(link) and link.read_bytes() == b"ours"
    assert os.listdir(link.parent) == ["name"]  # no temporary left beside it


def test_read_refuses_a_link_and_a_fifo(tmp_path: Path, victim: Path) -> None:
    link = _plant(tmp_path / "cache" / "link", victim)
    fifo = tmp_path / "cache" / "fifo"
    os.mkfifo(fifo)
    for path in (link, fifo):  # a FIFO would block an ordinary open for reading forever
        with pytest.raises(OSError):
            _safefiles.read_file(path, 64)
    assert not _safefiles.is_file(link) and not _safefiles.is_file(fifo)


def test_remove_leaves_links_and_what_they_point_to(tmp_path: Path, victim: Path) -> None:
    link = _plant(tmp_path / "cache" / "123.process", victim)
    assert not _safefiles.remove_file(link)
    assert link.is_symlink()
    _untouched(victim)


def test_append_refuses_a_link(tmp_path: Path, victim: Path) -> None:
    link = _plant(tmp_path / "report" / "compiled-1", victim)
    with pytest.raises(OSError):
        _safefiles.append_line(link, "0123")
    _untouched(victim)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_append_refuses_another_users_file(tmp_path: Path) -> None:
    planted = tmp_path / "report" / "compiled-1"
    planted.parent.mkdir()
    planted.write_text("theirs\n")
    os.chown(planted, 12345, 12345)
    with pytest.raises(OSError, match="not this user's own file"):
        _safefiles.append_line(planted, "0123")
    assert planted.read_text() == "theirs\n"


# --- the warm-up queue's files ----------------------------------------------------------------


def test_a_stamp_link_is_not_a_stamp_and_is_replaced(cache: Path, victim: Path) -> None:
    _plant(cache / STAMP, victim)
    outcome = warm_up(KEY, lambda: None, cache_dir=cache)
    assert outcome.ok and outcome.queued  # the link did not pass for a warm cache
    _untouched(victim)
    assert _regular(cache / STAMP)
    assert (cache / STAMP).read_text().startswith(f"{KEY:032x} avdenoise_vs ")


def test_a_lock_link_is_not_opened(cache: Path, victim: Path) -> None:
    _plant(cache / LOCK, victim)
    compiled = []
    outcome = warm_up(KEY, lambda: compiled.append(1), cache_dir=cache)
    assert outcome.ok and compiled == [1]
    _untouched(victim)


def test_report_links_are_not_written_through(
    cache: Path, victim: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report"
    _plant(report / f"compiled-{os.getpid()}", victim)
    monkeypatch.setenv("AVDENOISE_WARMUP_REPORT", str(report))
    assert warm_up(KEY, lambda: None, cache_dir=cache).queued
    _untouched(victim)


# --- placement/ ----------------------------------------------------------------


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """No device choice made yet in this process."""
    monkeypatch.setattr(_placement, "_chosen", None)


def test_a_claim_link_is_replaced(cache: Path, victim: Path) -> None:
    folder = cache / _placement.FOLDER
    claim = _plant(folder / f"{os.getpid()}-0.claim", victim)
    stale = _plant(folder / f"{_dead_pid()}-1.claim", victim)
    assert _placement.claim_device(folder, 2, pid=os.getpid()) == 0
    _untouched(victim)
    assert _regular(claim) and stale.is_symlink()


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_planted_placement_lock_gives_device_0(
    cache: Path, victim: Path, fresh, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    folder = cache / _placement.FOLDER
    if kind == "link":
        _plant(folder / "placement.lock", victim)
    else:
        folder.mkdir()
        os.mkfifo(folder / "placement.lock")
    with pytest.raises(OSError):
        _placement.claim_device(folder, 2)
    _placing(monkeypatch, cache)
    assert _placement.device_for_process(None) == 0
    _untouched(victim)
    assert not list(folder.glob("*.claim"))


def _placing(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    """Make placement choose among two devices in `cache`, as it would on a 2-GPU host."""
    monkeypatch.setattr(_warmup_cache, "cupy_installed", lambda: True)
    monkeypatch.setattr(_warmup_cache, "cache_dir", lambda: cache)
    monkeypatch.setattr(_placement, "visible_count", lambda: 2)
    monkeypatch.setattr(_placement, "free_memory", lambda count: [None] * count)
    monkeypatch.delenv("AVDENOISE_DEBUG", raising=False)


@pytest.mark.parametrize("name", [_placement.FOLDER])
def test_a_subfolder_that_is_a_link_is_refused_with_one_warning(
    cache: Path, victim: Path, fresh, caplog, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(_safefiles, "_refused", set())
    # The victim's folder holds files under our names: stale-looking, so they would be removed.
    dead = _dead_pid()
    (victim.parent / f"{dead}-0.claim").write_text("")
    _plant(cache / name, victim.parent)
    _placing(monkeypatch, cache)
    with caplog.at_level(logging.WARNING, logger="avdenoise_vs"):
        for _ in range(2):
            assert _placement.device_for_process(None) in (0, 1)
            monkeypatch.setattr(_placement, "_chosen", None)
    _untouched(victim, f"{dead}-0.claim")
    warnings = [r.getMessage() for r in caplog.records if "symbolic link" in r.getMessage()]
    assert warnings == [f"avdenoise: {cache / name} is a symbolic link, which is never followed; "
                        "going on without it"]  # fmt: skip


# --- a render through it all ------------------------------------------------------------------


def test_a_render_in_a_cache_full_of_links_works(
    core, fake_cuda, cache: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CUDA filter (the fake) that places itself as the real one does, in a cache where
    every name of ours is a link to the victim's file."""
    monkeypatch.setenv("AVDENOISE_WARMUP", "1")
    monkeypatch.setenv("CUPY_CACHE_DIR", str(cache))
    monkeypatch.setattr(_placement, "_chosen", None)
    _placing(monkeypatch, cache)
    monkeypatch.setattr(warmup, "kernel_key", lambda specs, device=None: KEY)
    for name in (STAMP, LOCK):
        _plant(cache / name, victim)
    for name in ("placement.lock", f"{os.getpid()}-1.claim"):
        _plant(cache / _placement.FOLDER / name, victim)

    def start(self, *args, **kwargs) -> None:
        self.placed = _placement.device_for_process(None)
        FakeCuda.__init__(self, *args, **kwargs)

    monkeypatch.setattr(fake_cuda, "__init__", start)
    clip = random_clip(core)
    expected = first_plane(core.avdenoise.Denoise(clip, device="cpu").get_frame(2))
    got = first_plane(core.avdenoise.Denoise(clip, device="cuda").get_frame(2))
    np.testing.assert_array_equal(got, expected)
    (backend,) = fake_cuda.built
    assert backend.compiled and backend.placed == 0
    _untouched(victim)
