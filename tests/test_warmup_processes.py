"""Tests of the warm-up queue across real processes; CPU only, CuPy not needed.

They spawn real processes, because the lock is an OS flock whose behaviour across processes
(and on SIGKILL) is the point; threads would share one process's record.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from pathlib import Path

import pytest

# The helpers are imported by name in spawned children, so their folder must be importable
# whatever pytest's import mode; spawn passes this sys.path on to the children.
sys.path.insert(0, str(Path(__file__).parent))

import _process_helpers as helpers
from _process_helpers import key as _key
from _process_helpers import paths as _paths
from _process_helpers import reaping, recorded

from avdenoise_vs._warmup.queue import WarmUp, warm_up

__all__: list[str] = []

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
TAKEOVER_S = 1.0
"""A waiter must hold the place this soon after the holder is SIGKILLed."""
BLOCK_S = 0.5
"""Time given to a waiter to reach its polling loop; begin() has no observable 'waiting' point."""
LATE = 3
"""Processes started after the cache is warm."""


@pytest.fixture
def spawn() -> multiprocessing.context.SpawnContext:
    """The "spawn" start method: children share nothing with the test process but files."""
    return multiprocessing.get_context("spawn")


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
