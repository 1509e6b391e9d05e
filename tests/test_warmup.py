"""Tests of the warm-up queue within one process, one rule per test; CPU only, CuPy not needed.

Keys, a place taken and given back, the compile run under it, and the cases that give no
queue at all. The queue across real processes is ``test_warmup_processes.py``'s.
"""

from __future__ import annotations

import fcntl
import gc
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import filelock
import pytest

# _process_helpers is a top-level module (spawned children import it by name), so its folder
# must be importable whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).parent))

import _process_helpers as helpers
from _process_helpers import ENVIRONMENT, FakeSpec
from _process_helpers import key as _key
from _process_helpers import paths as _paths

from avdenoise_vs import _version
from avdenoise_vs._warmup import queue as warmup
from avdenoise_vs._warmup.queue import WarmUp, kernel_key, warm_up

__all__: list[str] = []

pytestmark = pytest.mark.timeout(30)

RESULT_S = 15.0
"""Longest wait for a child's result once it has started."""
SHORT_WAIT_S = 0.3
"""A wait limit short enough to run out in a test."""
QUICK_S = 0.5
"""Upper bound for a call that must not wait at all."""


# --- keys -------------------------------------------------------------------------------------


def test_same_settings_give_the_same_key() -> None:
    assert _key() == _key()
    assert 0 <= _key() < 1 << 128


def _key_in_a_fresh_process() -> tuple[str, str]:
    """The reference key and environment of a new interpreter, as an Av1an worker makes them."""
    code = (
        "import sys, _process_helpers as h; from avdenoise_vs._warmup.queue import "
        "environment_fingerprint as f; print('cupy' in sys.modules); "
        "print(f'{h.reference_key():032x}'); print(f())"
    )
    path = os.pathsep.join([str(Path(__file__).parent), *sys.path])
    env = {**os.environ, "PYTHONPATH": path, "PYTHONHASHSEED": "random"}
    run = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=RESULT_S,
    )
    assert run.returncode == 0, run.stderr
    cupy_imported, key_hex, environment = run.stdout.split()
    assert cupy_imported == "False", "importing the module must not import CuPy"
    return key_hex, environment


def test_same_key_across_processes() -> None:
    first = _key_in_a_fresh_process()
    assert _key_in_a_fresh_process() == first
    # This process's own key only where CuPy never ran here: after the GPU tests, its cached
    # environment may be a fake CuPy's.
    if "cupy" not in sys.modules:
        assert first[0] == f"{helpers.reference_key():032x}"


@pytest.mark.parametrize(
    "changes",
    [{"dtype": "uint16"}, {"radius": 3}, {"algorithm": "bm3d"}],
    ids=["dtype", "radius", "algorithm"],
)
def test_different_specs_give_different_keys(changes: dict[str, object]) -> None:
    assert _key(**changes) != _key()


def test_different_version_gives_a_different_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _key()
    monkeypatch.setattr(_version, "__version__", "99.0.0")
    assert _key() != before


def test_key_is_of_the_set_of_specs() -> None:
    first, second = FakeSpec(), FakeSpec(algorithm="bm3d")
    key = kernel_key([first, second], environment=ENVIRONMENT)
    assert kernel_key([second, first, second], environment=ENVIRONMENT) == key
    assert kernel_key([first], environment=ENVIRONMENT) != key


def test_different_cupy_environment_gives_a_different_key() -> None:
    specs = [FakeSpec()]
    old = kernel_key(specs, environment="cupy=13.0.0;nvrtc=12.4;sm=89")
    assert kernel_key(specs, environment="cupy=13.1.0;nvrtc=12.4;sm=89") != old
    assert kernel_key(specs, environment="cupy=13.0.0;nvrtc=12.4;sm=90") != old


def test_environment_without_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    assert warmup.environment_fingerprint.__wrapped__() == "no-cupy"


# --- one process ------------------------------------------------------------------------------


def test_one_place_per_key_per_process(cache: Path) -> None:
    place = WarmUp.begin(_key(), cache_dir=cache)
    assert place is not None
    started = time.monotonic()
    assert WarmUp.begin(_key(), cache_dir=cache, wait_limit=10) is None
    assert time.monotonic() - started < QUICK_S, "must not wait for its own process"
    place.close()
    again = WarmUp.begin(_key(), cache_dir=cache)
    assert again is not None
    again.close()


def test_released_place_is_unlocked(cache: Path) -> None:
    place = WarmUp.begin(_key(), cache_dir=cache)
    assert place is not None
    place.close()
    place.close()  # idempotent
    lock_path, _ = _paths(cache, _key())
    with lock_path.open("a") as other:  # a separate open file description, as another process
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_place_released_by_another_thread_is_unlocked(cache: Path) -> None:
    # VapourSynth worker threads and GC finalisers may release a place taken elsewhere.
    place = WarmUp.begin(_key(), cache_dir=cache)
    assert place is not None
    releaser = threading.Thread(target=place.close)
    releaser.start()
    releaser.join(RESULT_S)
    lock_path, _ = _paths(cache, _key())
    with lock_path.open("a") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_finished_warm_up_lets_the_next_caller_through(cache: Path) -> None:
    place = WarmUp.begin(_key(), cache_dir=cache)
    assert place is not None
    assert place.finish()
    lock_path, stamp_path = _paths(cache, _key())
    assert stamp_path.exists()
    lock_path.unlink()
    assert WarmUp.begin(_key(), cache_dir=cache) is None
    assert not lock_path.exists(), "a warm cache must not touch the lock file"


def _abandon_by_close(place: WarmUp) -> None:
    place.close()


def _abandon_by_exception(place: WarmUp) -> None:
    with pytest.raises(ZeroDivisionError), place:
        1 / 0  # noqa: B018


def _abandon_by_gc(place: WarmUp) -> None:
    """Do nothing: the test then drops the last reference, and that is the abandonment."""


@pytest.mark.parametrize(
    "abandon",
    [_abandon_by_close, _abandon_by_exception, _abandon_by_gc],
    ids=["close", "exc", "gc"],
)
def test_abandoned_warm_up_leaves_the_cache_cold(cache: Path, abandon: object) -> None:
    place = WarmUp.begin(_key(), cache_dir=cache)
    assert place is not None
    abandon(place)  # type: ignore[operator]
    del place
    gc.collect()
    _, stamp_path = _paths(cache, _key())
    assert not stamp_path.exists()
    again = WarmUp.begin(_key(), cache_dir=cache, wait_limit=0)
    assert again is not None
    again.close()


def test_different_keys_do_not_wait_for_each_other(cache: Path) -> None:
    first = WarmUp.begin(_key(), cache_dir=cache)
    assert first is not None
    started = time.monotonic()
    second = WarmUp.begin(_key(radius=5), cache_dir=cache, wait_limit=10)
    assert second is not None
    assert time.monotonic() - started < QUICK_S
    first.close()
    second.close()


def test_lock_held_in_another_description_times_out_through_logging(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # flock conflicts between two open descriptions even in one process, so this stands in
    # for another process; without VapourSynth loaded the warning goes through logging.
    monkeypatch.delitem(sys.modules, "vapoursynth", raising=False)
    lock_path, _ = _paths(cache, _key())
    with lock_path.open("a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        with caplog.at_level(logging.WARNING, logger=warmup.__name__):
            assert WarmUp.begin(_key(), cache_dir=cache, wait_limit=SHORT_WAIT_S) is None
    assert any("compiling in this process" in r.getMessage() for r in caplog.records)
    again = WarmUp.begin(_key(), cache_dir=cache, wait_limit=0)  # the key was given back
    assert again is not None
    again.close()


def test_the_wait_limit_comes_from_the_environment(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Another user's lock held on purpose costs each process this limit, not 180 s.
    monkeypatch.delitem(sys.modules, "vapoursynth", raising=False)
    monkeypatch.setenv("AVDENOISE_WARMUP_WAIT", str(SHORT_WAIT_S))
    lock_path, _ = _paths(cache, _key())
    with lock_path.open("a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger=warmup.__name__):
            assert WarmUp.begin(_key(), cache_dir=cache) is None
        waited = time.monotonic() - started
    assert SHORT_WAIT_S <= waited < SHORT_WAIT_S + 2
    assert any("AVDENOISE_WARMUP_WAIT sets how long" in r.getMessage() for r in caplog.records)


def test_a_bad_wait_limit_turns_the_queue_off_with_a_warning(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AVDENOISE_WARMUP_WAIT", "soon")
    with caplog.at_level(logging.WARNING, logger=warmup.__name__):
        outcome = warm_up(_key(), lambda: None, cache_dir=cache)
    assert outcome.ok and not outcome.queued
    assert "AVDENOISE_WARMUP_WAIT must be a number of seconds" in caplog.text


def test_warm_up_runs_compile_and_stamps(cache: Path) -> None:
    calls: list[int] = []
    assert warm_up(_key(), lambda: calls.append(1), cache_dir=cache).queued
    assert not warm_up(_key(), lambda: calls.append(2), cache_dir=cache).queued  # warm: direct
    assert calls == [1, 2]
    assert _paths(cache, _key())[1].exists()


def test_work_ahead_runs_first_and_only_under_a_held_place(cache: Path) -> None:
    calls: list[str] = []
    assert warm_up(
        _key(), lambda: calls.append("compile"), ahead=lambda: calls.append("ahead"),
        cache_dir=cache,
    ).queued  # fmt: skip
    assert warm_up(_key(), lambda: calls.append("warm"), ahead=lambda: calls.append("x"),
                   cache_dir=cache).ok  # fmt: skip
    assert calls == ["ahead", "compile", "warm"]


def test_failing_work_ahead_only_costs_the_head_start(cache: Path, caplog) -> None:
    def broken() -> None:
        raise RuntimeError("no NVRTC")

    calls: list[int] = []
    caplog.set_level(logging.DEBUG, logger="avdenoise_vs._warmup.queue")
    outcome = warm_up(_key(), lambda: calls.append(1), ahead=broken, cache_dir=cache)
    assert outcome.ok and outcome.queued and calls == [1]
    assert _paths(cache, _key())[1].exists()
    assert any("work ahead" in r.getMessage() for r in caplog.records)


def test_warm_up_failure_is_returned_and_leaves_no_stamp(cache: Path) -> None:
    error = KeyError("compile failed")

    def broken() -> None:
        raise error

    outcome = warm_up(_key(), broken, cache_dir=cache)
    assert outcome.queued
    assert not outcome.ok
    assert outcome.error is error
    assert not _paths(cache, _key())[1].exists()
    assert warm_up(_key(), lambda: None, cache_dir=cache).queued  # place and key given back


def test_warm_up_interrupt_propagates_and_releases(cache: Path) -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        warm_up(_key(), interrupted, cache_dir=cache)
    assert not _paths(cache, _key())[1].exists()
    assert warm_up(_key(), lambda: None, cache_dir=cache).queued


def test_report_files(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "report"
    monkeypatch.setenv("AVDENOISE_WARMUP_REPORT", str(report))
    assert warm_up(_key(), lambda: None, cache_dir=cache).queued
    assert WarmUp.begin(_key(), cache_dir=cache) is None
    pid = os.getpid()
    assert (report / f"compiled-{pid}").read_text() == f"{_key():032x}\n"
    assert (report / f"warm-{pid}").read_text() == f"{_key():032x}\n"


# --- no queue, no error -----------------------------------------------------------------------


def test_unusable_directory_gives_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A path under a regular file can be neither created nor opened, even by root (chmod is
    # no barrier to root in CI containers).
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    with caplog.at_level(logging.WARNING):
        assert WarmUp.begin(_key(), cache_dir=blocker / "cache") is None
    assert not caplog.records


def test_lock_permission_error_gives_none(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as patch, caplog.at_level(logging.WARNING):
        patch.setattr(filelock.FileLock, "acquire", refuse)
        assert WarmUp.begin(_key(), cache_dir=cache) is None
    assert not caplog.records, "an unusable lock is expected, not a warning"
    place = WarmUp.begin(_key(), cache_dir=cache)  # the key was given back
    assert place is not None
    place.close()


@pytest.mark.parametrize(
    ("name", "value"), [("CUPY_CACHE_IN_MEMORY", "1"), ("AVDENOISE_WARMUP", "0")]
)
def test_disabled_cache_or_queue_gives_none(
    cache: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    assert WarmUp.begin(_key(), cache_dir=cache) is None
    assert list(cache.iterdir()) == []


def test_no_cupy_without_explicit_directory_gives_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "cupy_cache"))
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    assert WarmUp.begin(_key()) is None
    assert not (tmp_path / "cupy_cache").exists()


def test_bad_key_gives_none(cache: Path) -> None:
    assert WarmUp.begin("not a key", cache_dir=cache) is None  # type: ignore[arg-type]
    assert WarmUp.begin(1 << 128, cache_dir=cache) is None


def test_cache_dir_before_cupy_is_imported_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    assert warmup.cache_dir() == tmp_path
    monkeypatch.delenv("CUPY_CACHE_DIR")
    assert warmup.cache_dir() == Path("~/.cupy/kernel_cache").expanduser()
    monkeypatch.setenv("CUPY_CACHE_IN_MEMORY", "1")
    assert warmup.cache_dir() is None
