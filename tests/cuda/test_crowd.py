"""How a process counts the other avdenoise processes on its host (``_cuda/_crowd.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from avdenoise_vs._cuda import _crowd


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid is gone, not a zombie
    return child.pid


def test_others_counts_live_processes_but_not_this_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_crowd, "_announced", None)
    folder = tmp_path / _crowd.FOLDER
    _crowd.announce(folder)
    assert (folder / f"{os.getpid()}.process").exists()
    assert _crowd.others(folder) == 0
    (folder / f"{os.getppid()}.process").touch()  # a live process
    (folder / "notes.txt").touch()  # not an announcement
    assert _crowd.others(folder) == 1


def test_stale_announcements_are_ignored_and_removed(tmp_path: Path) -> None:
    folder = tmp_path / _crowd.FOLDER
    folder.mkdir()
    stale = folder / f"{_dead_pid()}.process"
    stale.touch()
    assert _crowd.others(folder) == 0
    assert not stale.exists()


def test_a_process_announces_itself_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_crowd, "_announced", None)
    first, second = tmp_path / "a", tmp_path / "b"
    _crowd.announce(first)
    _crowd.announce(second)
    assert (first / f"{os.getpid()}.process").exists()
    assert not second.exists()


def test_without_a_usable_folder_a_process_is_alone(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_crowd, "_announced", None)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    _crowd.announce(blocked / _crowd.FOLDER)  # cannot be made: logged, not raised
    assert _crowd.others(blocked / _crowd.FOLDER) == 0
    assert _crowd.others(tmp_path / "missing") == 0
    monkeypatch.setattr(_crowd, "_folder", lambda: None)  # CUPY_CACHE_IN_MEMORY=1
    _crowd.announce()
    assert _crowd.others() == 0 and _crowd._announced is None


def test_the_announcement_goes_at_exit(tmp_path: Path) -> None:
    folder = tmp_path / _crowd.FOLDER
    code = (
        "import sys, os; from pathlib import Path; from avdenoise_vs._cuda import _crowd; "
        f"_crowd.announce(Path({str(folder)!r})); "
        f"assert (Path({str(folder)!r}) / f'{{os.getpid()}}.process').exists()"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
    assert list(folder.iterdir()) == []


def test_an_announcement_whose_pid_was_reused_is_stale(tmp_path: Path) -> None:
    """The file holds its process's start time: a live process under the same pid that
    started at another time is not the one that announced itself."""
    folder = tmp_path / _crowd.FOLDER
    folder.mkdir()
    parent = os.getppid()
    started = _crowd.start_time(parent)
    (folder / f"{parent}.process").write_text("1" if started != "1" else "2")
    if started is None:  # no /proc: the pid alone decides
        assert _crowd.others(folder) == 1
        return
    assert _crowd.others(folder) == 0
    (folder / f"{parent}.process").write_text(started)
    assert _crowd.others(folder) == 1
