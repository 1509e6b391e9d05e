"""Which GPU a process lands on (``_cuda/_placement.py``), mostly without a GPU.

The choice runs on fake device lists; the claims on a temporary kernel cache; a fleet is real
processes choosing among an injected device count. The last test needs a GPU and skips
without one (it does not skip this module: the rest runs anywhere).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import avdenoise_vs
from avdenoise_vs._cuda import placement as _placement
from avdenoise_vs._cuda.placement import Candidate, choose
from avdenoise_vs._warmup import cache as _warmup_cache

from ._gpu import device_count

__all__: list[str] = []

PACKAGE_ROOT = str(Path(avdenoise_vs.__file__).resolve().parents[1])


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No device chosen yet, CuPy "installed", a cold cache; returns the placement folder."""
    monkeypatch.setattr(_placement, "_chosen", None)
    monkeypatch.setattr(_warmup_cache, "cupy_installed", lambda: True)
    monkeypatch.setattr(_placement, "free_memory", lambda count: [None] * count)
    for name in ("AVDENOISE_DEBUG", "CUDA_VISIBLE_DEVICES", "CUPY_CACHE_IN_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "kernel_cache"))
    # Once CuPy is imported (GPU tests before these), cache_dir answers CuPy's own directory.
    monkeypatch.setattr(_warmup_cache, "cache_dir", lambda: tmp_path / "kernel_cache")
    return tmp_path / "kernel_cache" / _placement.FOLDER


def _claims(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.claim")) if folder.is_dir() else []


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid is gone, not a zombie
    return child.pid


# -- the pure choice --------------------------------------------------------------------


def test_fewest_claims_wins() -> None:
    assert choose([Candidate(0, 3), Candidate(1, 1), Candidate(2, 2)]) == 1


def test_a_tie_goes_to_the_most_free_memory() -> None:
    devices = [Candidate(0, 1, 10), Candidate(1, 1, 30), Candidate(2, 1, 20), Candidate(3, 2, 99)]
    assert choose(devices) == 1


def test_free_memory_counts_only_when_known_for_all() -> None:
    assert choose([Candidate(0, 0, None), Candidate(1, 0, 50)]) == 0
    assert choose([Candidate(0, 0), Candidate(1, 0), Candidate(2, 0)]) == 0


def test_claims_come_before_free_memory() -> None:
    assert choose([Candidate(0, 1, 1000), Candidate(1, 0, 1)]) == 1


def test_no_candidate_is_an_error() -> None:
    with pytest.raises(ValueError):
        choose([])


# -- claims -----------------------------------------------------------------------------


def test_stale_claims_are_ignored_and_removed(tmp_path: Path) -> None:
    folder = tmp_path / "placement"
    folder.mkdir()
    for name in (f"{_dead_pid()}-0.claim", f"{_dead_pid()}-1.claim", "0-0.claim"):
        (folder / name).touch()
    (folder / f"{os.getppid()}-1.claim").touch()  # a live process on device 1
    (folder / "unrelated.txt").touch()
    assert _placement.count_claims(folder, os.getpid()) == {1: 1}
    assert _claims(folder) == [f"{os.getppid()}-1.claim"]
    assert (folder / "unrelated.txt").exists()
    device = _placement.claim_device(folder, 2, pid=os.getpid())
    assert device == 0
    assert f"{os.getpid()}-0.claim" in _claims(folder)


def test_own_claims_do_not_count(tmp_path: Path) -> None:
    folder = tmp_path / "placement"
    folder.mkdir()
    (folder / f"{os.getpid()}-0.claim").touch()
    assert _placement.count_claims(folder, os.getpid()) == {}


def test_free_memory_breaks_the_tie(tmp_path: Path) -> None:
    assert _placement.claim_device(tmp_path / "p", 3, [5, 9, 7], pid=_dead_pid()) == 1


# -- device_for_process -----------------------------------------------------------------


def test_an_explicit_index_is_returned_untouched(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_placement, "visible_count", lambda: pytest.fail("no look needed"))
    assert _placement.device_for_process(3) == 3
    assert _placement.device_for_process(0) == 0
    assert not fresh.exists()
    assert _placement._chosen is None  # a later filter without an index still places


def test_the_choice_is_kept_for_the_process(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    live = os.getppid()
    fresh.mkdir(parents=True)
    (fresh / f"{live}-0.claim").touch()
    monkeypatch.setattr(_placement, "visible_count", lambda: 2)
    assert _placement.device_for_process(None) == 1
    # Device 1 now the busier one: a new choice would be 0, but the process keeps its own.
    (fresh / f"{live}-1.claim").touch()
    (fresh / "1-1.claim").touch()  # init: always alive
    assert _placement.device_for_process(None) == 1
    assert [name for name in _claims(fresh) if name.startswith(f"{os.getpid()}-")] == [
        f"{os.getpid()}-1.claim"
    ]


def test_one_visible_device_touches_no_file(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_placement, "visible_count", lambda: 1)
    assert _placement.device_for_process(None) == 0
    assert not fresh.exists()


@pytest.mark.parametrize(("visible", "count"), [("", 0), ("3", 1), ("GPU-1234abcd", 1)])
def test_cuda_visible_devices_of_one_needs_no_driver(
    monkeypatch: pytest.MonkeyPatch, visible: str, count: int
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr(_placement, "_driver_count", lambda: pytest.fail("driver loaded"))
    assert _placement.visible_count() == count


def test_cuda_visible_devices_of_several_asks_the_driver(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver numbers the listed devices 0, 1: claims name those ordinals, not "2", "3".
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setattr(_placement, "_driver_count", lambda: 2)
    assert _placement.visible_count() == 2
    fresh.mkdir(parents=True)
    (fresh / f"{os.getppid()}-0.claim").touch()
    assert _placement.device_for_process(None) == 1


def test_cuda_visible_devices_of_one_places_nothing(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert _placement.device_for_process(None) == 0
    assert not fresh.exists()


def test_an_unwritable_cache_falls_back_to_0(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(_warmup_cache, "cache_dir", lambda: blocker / "kernel_cache")
    monkeypatch.setattr(_placement, "visible_count", lambda: 4)
    # A placement that worked would pick device 2, the freest; mkdir fails, even as root.
    monkeypatch.setattr(_placement, "free_memory", lambda count: [1, 1, 9, 1])
    assert _placement.device_for_process(None) == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_cache_falls_back_to_0(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cache = fresh.parent
    cache.mkdir()
    cache.chmod(0o500)
    try:
        monkeypatch.setattr(_placement, "visible_count", lambda: 4)
        assert _placement.device_for_process(None) == 0
    finally:
        cache.chmod(0o700)


def test_a_held_lock_falls_back_to_0(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh.mkdir(parents=True)
    (fresh / f"{os.getppid()}-0.claim").touch()  # device 1 would be chosen
    monkeypatch.setattr(_placement, "visible_count", lambda: 2)
    monkeypatch.setattr(_placement, "LOCK_TIMEOUT_S", 0.2)
    with open(fresh / "placement.lock", "a") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)  # what filelock takes, from another description
        assert _placement.device_for_process(None) == 0
    assert f"{os.getpid()}-1.claim" not in _claims(fresh)


def test_no_driver_falls_back_to_0(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_driver() -> int:
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(_placement, "_driver_count", no_driver)
    assert _placement.device_for_process(None) == 0
    assert not fresh.exists()


def test_no_cupy_gives_0(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_warmup_cache, "cupy_installed", lambda: False)
    monkeypatch.setattr(_placement, "visible_count", lambda: pytest.fail("no look needed"))
    assert _placement.device_for_process(None) == 0
    assert not fresh.exists()


# -- a fleet: real processes starting together ------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys
    from avdenoise_vs._warmup import cache as _warmup_cache
    from avdenoise_vs._cuda import placement as _placement

    _warmup_cache.cupy_installed = lambda: True
    _placement.visible_count = lambda: int(sys.argv[1])
    _placement.free_memory = lambda count: [None] * count
    first = _placement.device_for_process(None)
    print(first, _placement.device_for_process(None), flush=True)
    sys.stdin.read()  # keep the claim until every sibling has chosen
    """
)


@pytest.mark.parametrize(("workers", "devices"), [(8, 2), (12, 3)])
def test_a_fleet_spreads_evenly_and_cleans_up(
    fresh: Path, tmp_path: Path, workers: int, devices: int
) -> None:
    env = os.environ | {
        "CUPY_CACHE_DIR": str(fresh.parent),
        "PYTHONPATH": PACKAGE_ROOT,
        "AVDENOISE_DEBUG": "",
    }
    env.pop("CUDA_VISIBLE_DEVICES", None)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(devices)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        for _ in range(workers)
    ]
    try:
        lines = [child.stdout.readline().split() for child in children]
        assert len(_claims(fresh)) == workers
    finally:
        for child in children:
            child.stdin.close()
        codes = [child.wait(timeout=30) for child in children]
    assert codes == [0] * workers
    chosen = [int(first) for first, again in lines if first == again]
    assert len(chosen) == workers, lines
    assert sorted(chosen.count(d) for d in range(devices)) == [workers // devices] * devices
    assert _claims(fresh) == []  # each removed its claim at exit


# -- on a GPU ---------------------------------------------------------------------------


@pytest.mark.gpu
def test_auto_picks_a_visible_device_and_0_on_one_gpu(fresh: Path) -> None:
    count = device_count(pytest.importorskip("cupy"))
    if count == 0:
        pytest.skip("no CUDA device")
    assert _placement.visible_count() == count
    device = _placement.device_for_process(None)
    assert 0 <= device < count
    if count == 1:
        assert device == 0
        assert not fresh.exists()


def test_opening_the_device_runs_on_the_chosen_one(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an index, ``open_device`` hands CuPy the placed device (the early context's
    thread places first when it runs; here it is off, so the main thread does)."""
    import types

    from avdenoise_vs._backends.cuda import device as _device

    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 2, getDevice=lambda: 0, CUDARuntimeError=RuntimeError
    )
    fake_cupy = types.ModuleType("cupy")
    fake_cupy.cuda = types.SimpleNamespace(runtime=runtime)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(_device, "start_early_context", lambda *args: None)  # no thread
    monkeypatch.setattr(_placement, "visible_count", lambda: 2)
    fresh.mkdir(parents=True)
    (fresh / f"{os.getppid()}-0.claim").touch()  # a live process holds device 0
    assert _device.open_device(None, "auto") == (fake_cupy, 1)
    assert _device.open_device(0, "auto") == (fake_cupy, 0)  # an index is kept
