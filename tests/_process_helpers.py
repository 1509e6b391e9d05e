"""Child-process bodies and process plumbing for the warm-up queue tests.

The bodies live in this small module, not in the test file, so that children started with the
"spawn" method import only this and the package, not pytest and the test module.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from avdenoise_vs._warmup.queue import WarmUp, kernel_key, warm_up

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from multiprocessing.context import SpawnContext, SpawnProcess
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Barrier, Event

__all__ = [
    "ENVIRONMENT",
    "JOIN_S",
    "FakeSpec",
    "hold_place",
    "hold_until_killed",
    "key",
    "late_begin",
    "paths",
    "queue_worker",
    "reaping",
    "record",
    "recorded",
    "reference_key",
    "take_over",
]

JOIN_S = 10.0
"""Longest wait for a child to exit before it is killed."""
EVENT_S = 20.0
"""Longest wait a child spends on an Event from the parent before giving up."""
HOLD_FOREVER_S = 60.0
"""A 'compile' that only ends by SIGKILL (or, failing that, by this)."""


@dataclass(frozen=True)
class FakeSpec:
    """Stand-in for a kernel spec (``NlmSpec``, ``Bm3dSpec``): frozen compile-time values."""

    algorithm: str = "nlm"
    radius: int = 2
    dtype: str = "uint8"


ENVIRONMENT = "cupy=14.2.0;nvrtc=13.0;sm=90"
"""A stand-in for `environment_fingerprint`."""


def key(**changes: object) -> int:
    """Key of the stand-in spec with some fields changed."""
    return kernel_key([FakeSpec(**changes)], environment=ENVIRONMENT)


def paths(cache: Path, key: int) -> tuple[Path, Path]:
    """Return (lock, stamp) for `key` in `cache`."""
    return cache / f"warm-{key:032x}.lock", cache / f"warm-{key:032x}.stamp"


def reference_key() -> int:
    """Key of the default stand-in, computed the same way in every process."""
    return kernel_key([FakeSpec()])


def record(path: str, label: str) -> None:
    """Append one line to `path`; O_APPEND keeps concurrent short writes whole."""
    with open(path, "a", encoding="ascii") as file:
        file.write(f"{label}\n")


def recorded(path: str | Path) -> list[str]:
    """Lines appended by `record`, or none when nothing was recorded."""
    path = Path(path)
    return path.read_text(encoding="ascii").splitlines() if path.exists() else []


def _fake_compile(cache_dir: str, record_path: str, compile_s: float) -> Callable[[], None]:
    """Return a stand-in for CuPy: load the cached kernel if there is one, else compile it.

    Compiling records this process and takes `compile_s`; loading is instant, as a warm
    CuPy cache is.
    """
    binary = Path(cache_dir, "fake-kernel.cubin")

    def compile_kernels() -> None:
        if binary.exists():
            return
        record(record_path, str(os.getpid()))
        time.sleep(compile_s)
        binary.write_bytes(b"kernel")

    return compile_kernels


def queue_worker(  # a spawn target takes its arguments positionally
    cache_dir: str, key: int, record_path: str, compile_s: float, start: Barrier, results: Queue
) -> None:
    """Wait for the common start, then warm up like a vspipe worker; report when done."""
    start.wait(EVENT_S)
    outcome = warm_up(key, _fake_compile(cache_dir, record_path, compile_s), cache_dir=cache_dir)
    results.put((os.getpid(), outcome.queued, time.monotonic()))


def hold_place(cache_dir: str, key: int, held: Event, release: Event) -> None:
    """Hold the place for `key` until told to let go, then release it without a stamp."""
    place = WarmUp.begin(key, cache_dir=cache_dir, wait_limit=0)
    if place is None:
        return  # the parent sees `held` never set and fails
    held.set()
    release.wait(EVENT_S)
    place.close()


def hold_until_killed(cache_dir: str, key: int, record_path: str, holding: Event) -> None:
    """Take the place and 'compile' until SIGKILLed; never finishes."""
    place = WarmUp.begin(key, cache_dir=cache_dir, wait_limit=0)
    if place is None:
        return
    record(record_path, "holder")
    holding.set()
    time.sleep(HOLD_FOREVER_S)


def take_over(  # a spawn target takes its arguments positionally
    cache_dir: str,
    key: int,
    record_path: str,
    wait_limit: float,
    events: tuple[Event, Event, Event],
    results: Queue,
) -> None:
    """Queue behind a holder; once in, 'compile' and finish only when the parent says so.

    `events` is (ready: about to queue, compiling: holds the place, may_finish).
    """
    ready, compiling, may_finish = events
    ready.set()
    place = WarmUp.begin(key, cache_dir=cache_dir, wait_limit=wait_limit)
    results.put(("got", time.monotonic(), None if place is None else place.waited_s))
    if place is None:
        return
    record(record_path, "waiter")
    compiling.set()
    may_finish.wait(EVENT_S)
    results.put(("done", place.finish()))


def late_begin(cache_dir: str, key: int, results: Queue) -> None:
    """Report whether `begin` let this process straight through (returned None)."""
    place = WarmUp.begin(key, cache_dir=cache_dir, wait_limit=0)
    results.put(place is None)
    if place is not None:
        place.close()


@contextlib.contextmanager
def reaping(ctx: SpawnContext) -> Iterator[Callable[..., SpawnProcess]]:
    """Yield a function that starts children; on exit kill whatever still runs and join all.

    A failing assertion must not leave children holding locks (or the test run waiting on
    them), so cleanup kills first and asks questions never.
    """
    children: list[SpawnProcess] = []

    def start(target: Callable[..., None], *args: object) -> SpawnProcess:
        child = ctx.Process(target=target, args=args, daemon=True)
        child.start()
        children.append(child)
        return child

    try:
        yield start
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
        for child in children:
            child.join(JOIN_S)
