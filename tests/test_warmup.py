"""Tests of the warm-up queue, one rule per test; CPU only, CuPy not needed.

The process tests use real spawned processes, because the lock is an OS flock whose behaviour
across processes (and on SIGKILL) is the point; threads would share one process's record.
"""

from __future__ import annotations

import argparse
import fcntl
import gc
import importlib.util
import logging
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import filelock
import pytest

# The helpers are imported by name in spawned children, so their folder must be importable
# whatever pytest's import mode; spawn passes this sys.path on to the children.
sys.path.insert(0, str(Path(__file__).parent))

import _process_helpers as helpers
from _process_helpers import FakeSpec, reaping, recorded

from avdenoise_vs import _version, warmup
from avdenoise_vs.warmup import WarmUp, kernel_key, record_phase, warm_up

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__: list[str] = []

pytestmark = pytest.mark.timeout(30)

PROCESS_TIMEOUT_S = 40
"""pytest-timeout for the tests that start processes."""
SPAWN_S = 30.0
"""Longest wait for spawned children to import and reach their start line (2-core CI)."""
RESULT_S = 15.0
"""Longest wait for a child's result once it has started."""
COMPILE_S = 1.0
"""Duration of the fake compile."""
FLEET = 8
"""Workers started together, as Av1an does."""
FLEET_WALL_S = 2.5
"""Whole fleet, from the common start: one compile plus polling and slack for 2 cores."""
SHORT_WAIT_S = 0.3
"""A wait limit short enough to run out in a test."""
QUICK_S = 0.5
"""Upper bound for a call that must not wait at all."""
TAKEOVER_S = 1.0
"""A waiter must hold the place this soon after the holder is SIGKILLed."""
BLOCK_S = 0.5
"""Time given to a waiter to reach its polling loop; begin() has no observable 'waiting' point."""
LATE = 3
"""Processes started after the cache is warm."""


ENVIRONMENT = "cupy=14.2.0;nvrtc=13.0;sm=90"
"""A stand-in for `environment_fingerprint`."""


def _key(**changes: object) -> int:
    """Key of the stand-in spec with some fields changed."""
    return kernel_key([FakeSpec(**changes)], environment=ENVIRONMENT)


def _paths(cache: Path, key: int) -> tuple[Path, Path]:
    """Return (lock, stamp) for `key` in `cache`."""
    return cache / f"warm-{key:032x}.lock", cache / f"warm-{key:032x}.stamp"


@pytest.fixture
def spawn() -> multiprocessing.context.SpawnContext:
    """The "spawn" start method: children share nothing with the test process but files."""
    return multiprocessing.get_context("spawn")


# --- keys -------------------------------------------------------------------------------------


def test_same_settings_give_the_same_key() -> None:
    assert _key() == _key()
    assert 0 <= _key() < 1 << 128


def test_same_key_across_processes() -> None:
    code = (
        "import sys, _process_helpers as h; "
        "print('cupy' in sys.modules); print(f'{h.reference_key():032x}')"
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
    cupy_imported, key_hex = run.stdout.split()
    assert cupy_imported == "False", "importing the module must not import CuPy"
    assert key_hex == f"{helpers.reference_key():032x}"


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


def test_warm_up_runs_compile_and_stamps(cache: Path) -> None:
    calls: list[int] = []
    assert warm_up(_key(), lambda: calls.append(1), cache_dir=cache).queued
    assert not warm_up(_key(), lambda: calls.append(2), cache_dir=cache).queued  # warm: direct
    assert calls == [1, 2]
    assert _paths(cache, _key())[1].exists()


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


# --- real processes ---------------------------------------------------------------------------


@pytest.mark.timeout(PROCESS_TIMEOUT_S)
def test_lock_held_by_another_process_keeps_this_one_out(
    cache: Path, spawn: multiprocessing.context.SpawnContext
) -> None:
    vs = pytest.importorskip("vapoursynth")
    messages: list[str] = []
    handle = vs.core.add_log_handler(lambda kind, text: messages.append(text))
    held, release = spawn.Event(), spawn.Event()
    try:
        with reaping(spawn) as start:
            holder = start(helpers.hold_place, str(cache), _key(), held, release)
            assert held.wait(SPAWN_S)
            started = time.monotonic()
            assert WarmUp.begin(_key(), cache_dir=cache, wait_limit=SHORT_WAIT_S) is None
            assert time.monotonic() - started >= SHORT_WAIT_S
            release.set()
            holder.join(RESULT_S)
    finally:
        vs.core.remove_log_handler(handle)
    assert any("compiling in this process" in text for text in messages)
    place = WarmUp.begin(_key(), cache_dir=cache, wait_limit=0)  # released elsewhere: free
    assert place is not None
    place.close()


@pytest.mark.timeout(PROCESS_TIMEOUT_S)
def test_fleet_compiles_once(
    cache: Path, tmp_path: Path, spawn: multiprocessing.context.SpawnContext
) -> None:
    record_path = str(tmp_path / "compiles.txt")
    start_line, results = spawn.Barrier(FLEET + 1), spawn.Queue()
    with reaping(spawn) as start:
        for _ in range(FLEET):
            start(
                helpers.queue_worker,
                str(cache),
                _key(),
                record_path,
                COMPILE_S,
                start_line,
                results,
            )
        start_line.wait(SPAWN_S)
        started = time.monotonic()
        outcomes = [results.get(timeout=RESULT_S) for _ in range(FLEET)]
    assert len(recorded(record_path)) == 1
    assert sum(compiled for _, compiled, _ in outcomes) == 1
    wall = max(done for _, _, done in outcomes) - started
    assert wall < FLEET_WALL_S, f"fleet took {wall:.2f} s"
    assert _paths(cache, _key())[1].exists()


@pytest.mark.timeout(PROCESS_TIMEOUT_S)
def test_killed_holder_hands_over_to_a_waiter(
    cache: Path, tmp_path: Path, spawn: multiprocessing.context.SpawnContext
) -> None:
    record_path = str(tmp_path / "compiles.txt")
    _, stamp_path = _paths(cache, _key())
    holding, ready, compiling, may_finish = (spawn.Event() for _ in range(4))
    results = spawn.Queue()
    with reaping(spawn) as start:
        holder = start(helpers.hold_until_killed, str(cache), _key(), record_path, holding)
        assert holding.wait(SPAWN_S)
        events = (ready, compiling, may_finish)
        start(helpers.take_over, str(cache), _key(), record_path, SPAWN_S, events, results)
        assert ready.wait(SPAWN_S)
        time.sleep(BLOCK_S)
        holder.kill()
        killed = time.monotonic()
        kind, got, waited = results.get(timeout=RESULT_S)
        assert kind == "got"
        assert waited is not None, "the waiter must get the place, not time out"
        assert got - killed < TAKEOVER_S
        assert waited >= BLOCK_S / 2, "the waiter must have been waiting"
        assert compiling.wait(RESULT_S)
        assert not stamp_path.exists(), "the killed holder must leave no stamp"
        may_finish.set()
        assert results.get(timeout=RESULT_S) == ("done", True)
    assert stamp_path.exists()
    assert recorded(record_path) == ["holder", "waiter"]
    assert holder.exitcode == -9


@pytest.mark.timeout(PROCESS_TIMEOUT_S)
def test_later_processes_skip_the_lock(
    cache: Path, spawn: multiprocessing.context.SpawnContext
) -> None:
    assert warm_up(_key(), lambda: None, cache_dir=cache).queued
    lock_path, _ = _paths(cache, _key())
    lock_path.unlink()
    results = spawn.Queue()
    with reaping(spawn) as start:
        for _ in range(LATE):
            start(helpers.late_begin, str(cache), _key(), results)
        assert [results.get(timeout=SPAWN_S) for _ in range(LATE)] == [True] * LATE
    assert not lock_path.exists(), "a warm cache must not recreate the lock file"


# --- the fleet runner's chunk split (scripts/fleet.py is a CLI, not a package module) ---------


@pytest.fixture(scope="module")
def fleet() -> Iterator[object]:
    """scripts/fleet.py, loaded from its file, with scripts/ importable for its _fleet."""
    scripts = Path(__file__).parents[1] / "scripts"
    spec = importlib.util.spec_from_file_location("_fleet_script", scripts / "fleet.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    # Registered while it runs: dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = module  # type: ignore[union-attr]
    sys.path.insert(0, str(scripts))
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        yield module
    finally:
        sys.path.remove(str(scripts))
        del sys.modules[spec.name]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("start", "end", "workers", "expected"),
    [
        (0, 10, 3, [(0, 4), (4, 7), (7, 10)]),
        (5, 9, 4, [(5, 6), (6, 7), (7, 8), (8, 9)]),
        (0, 2, 8, [(0, 1), (1, 2)]),
        (3, 3, 2, []),
    ],
)
def test_fleet_splits_frames_into_contiguous_chunks(
    fleet: object, start: int, end: int, workers: int, expected: list[tuple[int, int]]
) -> None:
    assert fleet.split_frames(start, end, workers) == expected  # type: ignore[attr-defined]


def test_fleet_parses_frame_ranges(fleet: object) -> None:
    assert fleet.parse_range("10:250") == (10, 250)  # type: ignore[attr-defined]
    with pytest.raises(argparse.ArgumentTypeError, match="A < B"):
        fleet.parse_range("9:9")  # type: ignore[attr-defined]


def test_fleet_reads_phases_apart_from_queue_kinds(
    fleet: object, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report"
    monkeypatch.setenv("AVDENOISE_WARMUP_REPORT", str(report))
    started = time.time()
    record_phase("cuda")
    assert warm_up(_key(), lambda: None, cache_dir=cache).queued
    record_phase("warm")
    assert fleet.read_report(report) == ["compiled"]  # type: ignore[attr-defined]
    phases = fleet.read_phases(report, started)  # type: ignore[attr-defined]
    assert list(phases) == ["cuda", "warm"]
    assert 0 <= phases["cuda"] <= phases["warm"] < 60
