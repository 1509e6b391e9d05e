"""The GPU stage's gate (``_cuda/_gate.py``): a few frames at a time, lowest number first."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from avdenoise_vs._cuda.gate import GpuGate


class _Buffer:
    addresses = itertools.count(1)

    def __init__(self) -> None:
        self.ptr = next(self.addresses)


def _wait_until(predicate, limit: float = 5.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_waiting_frames_enter_lowest_number_first() -> None:
    gate = GpuGate(1, _Buffer)
    first = gate.enter(100)
    entered = []
    lock = threading.Lock()

    def frame(n: int) -> None:
        buffer = gate.enter(n)
        with lock:
            entered.append(n)
        gate.leave(buffer)

    threads = []
    for n in (7, 3, 9, 5):
        threads.append(threading.Thread(target=frame, args=(n,)))
        threads[-1].start()
    _wait_until(lambda: len(gate._waiting) == 4)
    gate.leave(first)
    for thread in threads:
        thread.join(timeout=5)
    assert entered == [3, 5, 7, 9]


def test_at_most_limit_frames_inside_and_buffers_reused() -> None:
    gate = GpuGate(3, _Buffer)
    inside = peak = 0
    lock = threading.Lock()

    def frame(n: int) -> None:
        nonlocal inside, peak
        buffer = gate.enter(n)
        with lock:
            inside += 1
            peak = max(peak, inside)
        time.sleep(0.002)
        with lock:
            inside -= 1
        gate.leave(buffer)

    threads = [threading.Thread(target=frame, args=(n,)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(thread.is_alive() for thread in threads)
    assert peak <= 3
    assert gate.made <= 3


def test_a_failed_buffer_gives_the_place_back() -> None:
    def fail():
        raise MemoryError("out of device memory")

    gate = GpuGate(1, fail)
    with pytest.raises(MemoryError):
        gate.enter(1)
    gate._new_buffer = _Buffer
    buffer = gate.enter(2)  # would wait forever if the failed frame kept its place
    gate.leave(buffer)
    assert gate.made == 1


def _enter_on_thread(gate: GpuGate, n: int, entered: list) -> threading.Thread:
    """Frame `n` enters on a thread of its own, notes its entry and leaves."""

    def frame() -> None:
        buffer = gate.enter(n)
        entered.append((n, time.monotonic()))
        gate.leave(buffer)

    thread = threading.Thread(target=frame)
    thread.start()
    return thread
