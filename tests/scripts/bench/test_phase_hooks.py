"""scripts/bench/_phase_hooks/: the fleet's start-up phases, marked from outside the package in
a worker started with ``_fleet.worker_env``."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import _fleet
import pytest

HOOK = _fleet.PHASE_HOOKS / "sitecustomize.py"

CPU_SCRIPT = """
import vapoursynth as vs
core = vs.core
clip = core.std.BlankClip(width=32, height=24, format=vs.GRAY8, length=4)
core.avdenoise.Denoise(clip, radius=1, device="cpu").set_output()
"""

# The GPU path without a GPU: a stand-in CuPy, a stand-in backend for select's steps, the real
# class's methods on a bare instance, and the early context on a stand-in driver.
GPU_SCRIPT = """
import contextlib, ctypes, sys, threading, types

import avdenoise_vs
from avdenoise_vs._backends import select
from avdenoise_vs._backends.cuda import backend as cuda_backend
from avdenoise_vs._cuda import context

assert "cupy" not in sys.modules, "the hooks import no CuPy"
hooked = [
    select._chosen, select._build, select._warm_up, context.EarlyContext._run,
    *(getattr(cuda_backend.CudaBackend, name) for name in (
        "_prepare_passes", "warm_up", "prepare_threads", "_new_state", "_make_state")),
]
unhooked = [f.__qualname__ for f in hooked if not hasattr(f, "__wrapped__")]
assert not unhooked, unhooked
import cupy

class Fake:
    device_id = 0
    def __init__(self, passes, layout, device_index=None, vulkan_uuid=None): pass
    def kernel_specs(self): return ("fake-spec",)
    def compile_ahead(self): pass
    def warm_up(self): pass
    def prepare_threads(self, threads): pass

Real = cuda_backend.CudaBackend
cuda_backend.CudaBackend = Fake
assert isinstance(select.select_backend("Denoise", "cuda", ("cuda",), (), None), Fake)

bare = object.__new__(Real)
npass = types.SimpleNamespace(prepare=lambda: None)
device = types.SimpleNamespace(Device=lambda index: contextlib.nullcontext())
bare._passes, bare.device_id, bare._cupy = [npass], 0, types.SimpleNamespace(cuda=device)
bare._prepare_passes()
bare._spare_states, bare._local = ["made ahead", "made ahead too"], threading.local()
bare.prepare_threads(2)
bare._new_state(), bare._new_state()  # the first thread's first frame is marked, not the next

class Driver:
    def __getattr__(self, name): return lambda *args: 0
ctypes.CDLL = lambda name: Driver()
context.EarlyContext(0, lambda ordinal: None).release()
"""


def _run(command: list[str], tmp_path: Path, **more: str) -> list[str]:
    """Run `command` as a fleet worker (more variables: `more`) with its report in
    ``tmp_path/report``; the phases it marked, in order."""
    report = tmp_path / "report"
    env = _fleet.worker_env(dict(os.environ, **more), report)
    started = time.time()
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "not patched" not in done.stderr, done.stderr
    (marks,) = report.glob("phases-*")
    phases = [line.partition(" ")[0] for line in marks.read_text().splitlines()]
    seconds = _fleet.read_phases(report, started)
    assert set(seconds) == set(phases) and all(0 <= s < 120 for s in seconds.values())
    return phases


def test_a_cpu_worker_marks_the_import_and_its_backend(tmp_path: Path) -> None:
    pytest.importorskip("vapoursynth")
    vspipe = _fleet.find_vspipe(None)
    (tmp_path / "cpu.vpy").write_text(CPU_SCRIPT)
    command = [vspipe, "cpu.vpy", "--", "-e", "1"]
    assert _run(command, tmp_path) == ["import", "backend-cpu"]
    assert _fleet.read_report(tmp_path / "report") == [], "the CPU queues for nothing"


def test_the_gpu_steps_are_marked_where_the_package_reaches_them(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "cupy").mkdir(parents=True)
    (fake / "cupy" / "__init__.py").write_text('__version__ = "0+fake"\n')
    (tmp_path / "gpu.py").write_text(textwrap.dedent(GPU_SCRIPT))
    # The stand-in CuPy first on the path; the stand-in backend compiles unqueued.
    phases = _run([sys.executable, "gpu.py"], tmp_path, PYTHONPATH=str(fake), AVDENOISE_WARMUP="0")
    assert phases == [
        "import", "cupy", "script", "cuda", "warm", "backend-cuda", "modules", "first-frame",
        "context",
    ]  # fmt: skip


def _hook_module(monkeypatch: pytest.MonkeyPatch):
    """The hook's module, loaded here without its finder (the variable unset at its import)."""
    monkeypatch.delenv(_fleet.PHASES_ENV, raising=False)
    spec = importlib.util.spec_from_file_location("phase_hooks_under_test", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_mark_is_read_as_seconds_from_the_start_apart_from_the_queue(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from avdenoise_vs._warmup.queue import warm_up

    hooks = _hook_module(monkeypatch)
    report = tmp_path / "report"
    for name, value in _fleet.worker_env({}, report).items():
        monkeypatch.setenv(name, value)
    started = time.time()
    hooks.mark("cuda")
    assert warm_up(0xF1EE7, lambda: None, cache_dir=cache).queued
    hooks.mark("warm")
    assert _fleet.read_report(report) == ["compiled"]
    phases = _fleet.read_phases(report, started)
    assert list(phases) == ["cuda", "warm"]
    assert 0 <= phases["cuda"] <= phases["warm"] < 60


def test_a_mark_never_raises_nor_writes_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = _hook_module(monkeypatch)
    hooks.mark("cuda")  # no folder named: nothing to do
    victim = tmp_path / "victim"
    victim.write_text("kept\n")
    report = tmp_path / "report"
    report.mkdir()
    (report / f"phases-{os.getpid()}").symlink_to(victim)
    monkeypatch.setenv(_fleet.PHASES_ENV, str(report))
    hooks.mark("cuda")
    assert victim.read_text() == "kept\n"
    monkeypatch.setenv(_fleet.PHASES_ENV, str(victim / "not-a-folder"))
    hooks.mark("cuda")


def test_the_sitecustomize_it_hides_still_runs(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['HIDDEN_RAN'] = 'yes'\n")
    env = _fleet.worker_env(dict(os.environ, PYTHONPATH=str(other)), tmp_path / "report")
    command = [sys.executable, "-c", "import os; print(os.environ.get('HIDDEN_RAN'))"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "yes", done.stderr
