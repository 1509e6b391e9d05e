"""``doctor`` names a warm-up lock that another user holds, and the queue's wait limit.

Another user's process holding ``warm-<key>.lock`` makes each of this user's renders wait the
whole limit (``AVDENOISE_WARMUP_WAIT``). The lock is held here from another open description
in this process (flock conflicts even within one) or, as root, from a child that gives up its
privileges for another user's.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from avdenoise_vs._cli import _locks, doctor

from .test_doctor import _report

__all__: list[str] = []

pytestmark = pytest.mark.timeout(60)

LOCK = "warm-0123456789abcdef0123456789abcdef.lock"
OTHER_UID = 65534  # nobody


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache directory with one lock file, the one CuPy's environment names."""
    directory = tmp_path / "kernel_cache"
    directory.mkdir()
    (directory / LOCK).touch()
    monkeypatch.setenv("CUPY_CACHE_DIR", str(directory))
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    monkeypatch.delenv("AVDENOISE_WARMUP_WAIT", raising=False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    return directory


def _problems(cache_info: dict) -> list[str]:
    return [
        f"{p['problem']} -> {p['fix']}" for p in doctor.find_problems(_report(cache=cache_info))
    ]


def test_a_lock_held_by_another_user_is_a_problem(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AVDENOISE_WARMUP_WAIT", "45")
    monkeypatch.setattr(_locks, "_process_uid", lambda pid: OTHER_UID)
    with (cache / LOCK).open("a") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        info = doctor._cache()
    (held,) = info["held_locks"]
    assert held["pid"] == os.getpid() and held["uid"] == OTHER_UID and not held["own"]
    (problem,) = _problems(info)
    assert f"the warm-up lock {cache / LOCK} is held by pid {os.getpid()} of user " in problem
    assert f"(uid {OTHER_UID}), another user" in problem
    assert "waits up to 45 s (AVDENOISE_WARMUP_WAIT)" in problem
    assert "CUPY_CACHE_DIR set to a folder only you write" in problem
    lines = _locks.lock_lines(info, "  ")
    assert lines[0].startswith(f"  lock held now: {cache / LOCK}, by pid {os.getpid()} of user ")
    assert (
        lines[1]
        == "    a process that needs those kernels waits up to 45 s (AVDENOISE_WARMUP_WAIT)"
    )


def test_this_users_own_lock_is_only_reported(cache: Path) -> None:
    with (cache / LOCK).open("a") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        info = doctor._cache()
    (held,) = info["held_locks"]
    assert held["own"] and held["uid"] == os.getuid()
    assert _problems(info) == []
    assert "180 s (AVDENOISE_WARMUP_WAIT)" in _locks.lock_lines(info, "")[1]


def test_a_free_lock_is_not_reported(cache: Path) -> None:
    info = doctor._cache()
    assert info["held_locks"] == [] and _locks.lock_lines(info, "") == []


def test_without_proc_locks_a_shared_flock_tells_whether_it_is_held(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_locks, "_proc_locks", lambda: None)
    assert doctor._cache()["held_locks"] == []
    with (cache / LOCK).open("a") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        (held,) = doctor._cache()["held_locks"]
    assert held["pid"] is None and held["uid"] == (cache / LOCK).stat().st_uid
    assert "by a process (user " in _locks.lock_lines({"held_locks": [held]}, "")[0]


def test_a_bad_wait_limit_is_a_problem(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AVDENOISE_WARMUP_WAIT", "forever")
    (problem,) = _problems(doctor._cache())
    assert "AVDENOISE_WARMUP_WAIT must be a number of seconds, at least 0, got 'forever'" in problem


_HOLDER = """
import fcntl, os, sys
lock = open(sys.argv[1], "a")
fcntl.flock(lock, fcntl.LOCK_EX)
os.setgid(int(sys.argv[2]))
os.setuid(int(sys.argv[2]))
print("held", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a process of another user needs root to make")
def test_a_real_process_of_another_user(cache: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(cache / LOCK), str(OTHER_UID)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline() == "held\n"
        info = doctor._cache()
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    (held,) = info["held_locks"]
    assert held["pid"] == child.pid and held["uid"] == OTHER_UID
    (problem,) = _problems(info)
    assert f"is held by pid {child.pid} of user {held['user']} (uid {OTHER_UID})" in problem
