"""The compile ahead of the CUDA context (``_cuda/_ahead.py``).

On a fake CuPy (CPU only, skipped where CuPy is installed): which architecture it asks for,
that it hands CuPy's compile exactly what the kernels' own compile hands it, and that nothing
it meets raises. On the GPU, in a fresh process with an empty cache: the binaries it leaves
are the very ones the kernels then load, so nothing compiles twice, and a fresh process names
the architecture in its warm-up key.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from avdenoise_vs._backends.cuda import ahead as _ahead

from .test_warmup_key import BM3D, NLM, _layout, _spec

__all__: list[str] = []

_KERNELS = "avdenoise_vs._cuda.kernels"
_REAL_CUPY = importlib.util.find_spec("cupy") is not None


class CUDADriverError(RuntimeError):
    """CuPy's error type for a failed driver call (matched by name, as the real one is)."""


class _FakeCompile:
    """``cupy._core.core.compile_with_cache``: records each call, then fails to load."""

    def __init__(self, error: type[Exception] = CUDADriverError) -> None:
        self.calls: list[tuple] = []
        self.error = error

    def __call__(self, source, options, *, arch, prepend_cupy_headers):
        self.calls.append((source, options, arch, prepend_cupy_headers))
        raise self.error("CUDA_ERROR_INVALID_CONTEXT")


def _fake_cupy(capability: str, compile_with_cache) -> types.SimpleNamespace:
    runtime = types.SimpleNamespace(
        getDevice=lambda: 0,
        deviceGetAttribute=lambda a, d: int(capability[:-1] if a == 75 else capability[-1]),
    )
    compiler = types.SimpleNamespace(
        _tegra_archs=("53", "62", "72", "87"), _get_max_compute_capability=lambda: "121"
    )
    cuda = types.SimpleNamespace(
        runtime=runtime, compiler=compiler, nvrtc=types.SimpleNamespace(getVersion=lambda: (13, 0))
    )
    return types.SimpleNamespace(
        cuda=cuda,
        _core=types.SimpleNamespace(
            core=types.SimpleNamespace(compile_with_cache=compile_with_cache)
        ),
        memoize=lambda for_each_device=False: lambda function: function,
        RawKernel=None,
    )


@pytest.fixture
def fake_cupy(monkeypatch):
    """Install a fake CuPy (and a ``_kernels`` imported under it, removed afterwards)."""
    if _REAL_CUPY:
        pytest.skip("CuPy is installed: the GPU test covers this")
    saved = sys.modules.pop(_KERNELS, None)

    def install(capability: str = "90", compile_with_cache=None):
        compile_with_cache = compile_with_cache or _FakeCompile()
        monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(capability, compile_with_cache))
        return importlib.import_module(_KERNELS), compile_with_cache

    yield install
    sys.modules.pop(_KERNELS, None)
    if saved is not None:
        sys.modules[_KERNELS] = saved


@pytest.mark.parametrize(("capability", "arch"), [("90", "90"), ("87", "87"), ("130", "121")])
def test_the_architecture_is_cupys_choice(fake_cupy, capability, arch):
    kernels, _ = fake_cupy(capability)
    assert _ahead.cupy_arch(sys.modules["cupy"], 0) == arch


def test_each_module_goes_to_cupys_compile_as_its_kernel_would(fake_cupy):
    kernels, compile_with_cache = fake_cupy()
    specs = [_spec(NLM, _layout()), _spec(BM3D, _layout(bits=32))]
    ahead = _ahead.CompileAhead(sys.modules["cupy"], specs, 0)
    modules = [m for spec in specs for m in spec.modules()]
    assert ahead.wait() == len(modules) == 1 + len(specs[1].kernels)
    expected = {(m.source, m.options, "90", False) for m in modules}
    assert set(compile_with_cache.calls) == expected


def test_a_compile_error_is_left_to_the_kernels_own_compile(fake_cupy):
    _, compile_with_cache = fake_cupy(compile_with_cache=_FakeCompile(error=ValueError))
    ahead = _ahead.CompileAhead(sys.modules["cupy"], [_spec(NLM, _layout())], 0)
    assert ahead.wait() == 0


def test_a_cupy_without_those_internals_gets_no_head_start(fake_cupy):
    fake_cupy()
    del sys.modules["cupy"].cuda.compiler._get_max_compute_capability
    ahead = _ahead.CompileAhead(sys.modules["cupy"], [_spec(NLM, _layout())], 0)
    assert ahead.wait() == 0


_GPU_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from avdenoise_vs._backends.cuda.backend import CudaBackend
    from tests.cuda.test_warmup_key import BM3D, NLM, _layout

    def cached():
        return sorted(n for n in os.listdir(os.environ["CUPY_CACHE_DIR"]) if n.endswith(".cubin"))

    report = {}
    for name, options, bits in (("nlm", NLM, 8), ("bm3d", BM3D, 32)):
        backend = CudaBackend((options,), _layout(bits=bits))
        backend.compile_ahead()
        reached = backend._ahead.wait()
        ahead = cached()
        backend.warm_up()
        report[name] = {"reached": reached, "ahead": ahead, "after": cached()}
    from avdenoise_vs._warmup.queue import environment_fingerprint
    json.dump({"environment": environment_fingerprint(0), "kernels": report}, sys.stdout)
    """
)


@pytest.mark.skipif(not _REAL_CUPY, reason="could not import 'cupy'")
def test_the_kernels_load_what_the_compile_ahead_left(tmp_path):
    pytest.importorskip("cupy")
    from ._gpu import require_cuda

    require_cuda()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "CUPY_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(root)}
    result = subprocess.run(
        [sys.executable, "-c", _GPU_SCRIPT], capture_output=True, text=True, env=env,
        timeout=300, check=False, cwd=root,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "sm=none" not in report["environment"]  # the key's architecture, found context-free
    for name, cells in report["kernels"].items():
        assert cells["reached"] >= 1, name
        assert cells["after"] == cells["ahead"], f"{name}: the kernels compiled again"


@pytest.mark.skipif(not _REAL_CUPY, reason="could not import 'cupy'")
def test_a_fresh_process_names_the_architecture_in_its_key():
    """The key's environment, made before anything else touched CUDA in that process (as a
    `prewarm` run or a test may), names the device's architecture like a worker's does."""
    from ._gpu import require_cuda

    cupy = require_cuda()
    code = (
        "from avdenoise_vs._warmup.queue import environment_fingerprint as f;"
        " print(f(None)); print(f(0))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    capability = cupy.cuda.Device(0).compute_capability
    lines = result.stdout.split()
    assert len(lines) == 2 and all(line.endswith(f";sm={capability}") for line in lines), lines
