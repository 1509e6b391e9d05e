"""Every backend is a :class:`~avdenoise_vs._backends.protocol.Backend`: mypy holds the
backends and the tests' stand-ins for them to the Protocols (``backend_conformance.py``), and
at run time the choice and the filter's plan go by the Protocols. CPU only: the CUDA backend
runs on the fake CuPy of ``cuda/_fake_cuda.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from avdenoise_vs._backends.cuda.backend import CudaBackend
from avdenoise_vs._backends.pending import PendingBackend
from avdenoise_vs._backends.protocol import Backend, CompilingBackend
from avdenoise_vs._backends.reference import NumpyBackend
from avdenoise_vs._backends.select import select_backend
from avdenoise_vs._plugin.filter import FilterPlan

from .cuda._fake_cuda import install
from .fake_cuda_backend import LAYOUT, PASSES

ROOT = Path(__file__).resolve().parents[1]

#: Two stand-ins that miss the Protocols: one lacks the bridge's call, the other's
#: prepare_threads takes no thread count.
_NONCONFORMING = """
from avdenoise_vs._backends.protocol import Backend, CompilingBackend


class NoBridgeCall:
    name = "cpu"

    def process(self, n, frame_numbers, windows, dst) -> None:
        pass


class NoThreadCount:
    name = "cuda"
    device_id = 0
    gpu_frames = None

    def process(self, n, frame_numbers, windows, dst) -> None:
        pass

    def bridge_process(self, n, frame_numbers, windows, dst) -> None:
        pass

    def kernel_specs(self) -> tuple:
        return ()

    def compile_ahead(self) -> None:
        pass

    def warm_up(self) -> None:
        pass

    def prepare_threads(self) -> None:
        pass


cpu: Backend = NoBridgeCall()
gpu: CompilingBackend = NoThreadCount()
"""


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module's runs: the second reuses what the first analysed."""
    return tmp_path_factory.mktemp("mypy-cache")


def _mypy(cache: Path, *files: str) -> subprocess.CompletedProcess[str]:
    """mypy with pyproject.toml's settings (its ``files`` unless `files` are given), reading
    the package from this source tree rather than an installed copy."""
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    return subprocess.run(
        [*command, "--cache-dir", str(cache), *files],
        cwd=ROOT,
        env={**os.environ, "MYPYPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_mypy_finds_every_backend_and_stand_in_conforming(mypy_cache: Path) -> None:
    result = _mypy(mypy_cache)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_fails_a_backend_that_misses_a_member(mypy_cache: Path, tmp_path: Path) -> None:
    checked = tmp_path / "nonconforming.py"
    checked.write_text(_NONCONFORMING)
    result = _mypy(mypy_cache, str(checked))
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, result.stdout
    assert '"NoBridgeCall" is missing following "Backend" protocol member' in result.stdout
    assert "bridge_process" in result.stdout
    assert "def prepare_threads(self) -> None" in result.stdout  # the conflict, quoted


def _plane(array: np.ndarray) -> tuple:
    """A plane as the bridge hands it over: address, stride, the rows' bytes."""
    return array.ctypes.data, array.strides[0], memoryview(array).cast("B")


def _frame(call) -> np.ndarray:
    """Frame 1 of three random frames, denoised by `call` (a backend's ``process`` or
    ``bridge_process``, which must finish the frame)."""
    rng = np.random.default_rng(7)
    frames = [rng.integers(0, 256, LAYOUT.plane_shape(0), dtype=np.uint8) for _ in range(3)]
    out = np.zeros(LAYOUT.plane_shape(0), np.uint8)
    windows = (tuple((_plane(frame),) for frame in frames),)
    assert call(1, (0, 1, 2), windows, (_plane(out),)) is None
    return out


def test_the_cpu_backend_is_a_backend_that_compiles_nothing() -> None:
    backend = NumpyBackend(PASSES, LAYOUT)
    assert isinstance(backend, Backend) and not isinstance(backend, CompilingBackend)
    np.testing.assert_array_equal(_frame(backend.bridge_process), _frame(backend.process))
    chosen = select_backend("Denoise", "cpu", ["cpu"], PASSES, LAYOUT, defer=True)
    assert type(chosen) is NumpyBackend, "nothing to compile, so nothing to defer"


def test_the_cuda_backend_and_the_stand_in_compile(monkeypatch, fake_cuda) -> None:
    assert isinstance(fake_cuda(PASSES, LAYOUT), CompilingBackend)
    install(monkeypatch)  # CuPy, for the real backend
    assert isinstance(CudaBackend(PASSES, LAYOUT), CompilingBackend)


def test_a_pending_backend_passes_each_call_on_to_the_one_chosen(fake_cuda) -> None:
    pending = select_backend("Denoise", "cuda", ["cuda"], PASSES, LAYOUT, defer=True)
    assert isinstance(pending, PendingBackend) and isinstance(pending, Backend)
    assert not isinstance(pending, CompilingBackend), "its warm-up is under way already"
    assert pending.name == "cuda"
    expected = _frame(NumpyBackend(PASSES, LAYOUT).process)
    np.testing.assert_array_equal(_frame(pending.process), expected)
    np.testing.assert_array_equal(_frame(pending.bridge_process), expected)
    assert len(fake_cuda.built) == 1 and fake_cuda.built[0].compiled


def test_the_plan_calls_the_backends_bridge_call() -> None:
    backend = NumpyBackend(PASSES, LAYOUT)
    plan = FilterPlan(("clip",), 1, (), backend)
    assert plan.process == backend.bridge_process
    assert plan.props == {"AvdenoiseBackend": "cpu"}
