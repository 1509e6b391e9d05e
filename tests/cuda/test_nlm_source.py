"""The CUDA kernel generator and backend construction, without a GPU (CuPy not needed).

The nvcc checks run where ``nvcc`` is on the PATH and are skipped elsewhere.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import sys

import pytest

from avdenoise_vs._errors import BackendUnavailable
from avdenoise_vs._nlm.cuda.nlm_pass import args_dtype, choose_tile_height
from avdenoise_vs._nlm.cuda.source import NlmSpec, nlm_kernel_name, nlm_shared_bytes, nlm_source
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType, WeightMode
from avdenoise_vs._params.settings import NlmSettings

__all__: list[str] = []

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _grid():
    for a, s, r, distance, wmode, dtype, ref, th, cr in itertools.product(
        (1, 2, 16),
        (0, 4, 8),
        (0, 1, 8),
        list(Distance),
        list(WeightMode),
        ("uint8", "uint16", "float32"),
        (False, True),
        (8, 16, 32),
        (False, True),
    ):
        yield NlmSpec(a, s, r, distance, wmode, dtype, ref, th, cr)


def test_kernel_names_are_unique_identifiers():
    specs = list(_grid())
    names = [nlm_kernel_name(spec) for spec in specs]
    assert len(set(names)) == len(specs)
    assert all(_IDENTIFIER.match(name) and name.startswith("avdenoise_nlm_main_") for name in names)


def test_source_names_its_kernel_and_is_deterministic():
    spec = NlmSpec(2, 4, 1, Distance.LUMA, WeightMode.WELSCH, "uint8", False)
    source, name = nlm_source(spec)
    assert source == nlm_source(spec)[0]
    assert f"#define NLM_NAME {name}\n" in source


def test_default_settings_fit_the_portable_shared_memory():
    spec = NlmSpec(2, 4, 1, Distance.LUMA, WeightMode.WELSCH, "uint8", False)
    assert nlm_shared_bytes(spec) <= 48 * 1024
    assert choose_tile_height(spec, 48 * 1024) == 32
    big = NlmSpec(16, 8, 3, Distance.RGB, WeightMode.WELSCH, "float32", True)
    assert choose_tile_height(big, 48 * 1024) is None
    assert choose_tile_height(big, 227 * 1024) == 32


def _nvcc_compile(source: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    return subprocess.run(
        ["nvcc", "-arch=sm_90", "-std=c++17", "-c", str(path), "-o", str(tmp_path / "k.o")],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize(
    "spec",
    [
        NlmSpec(2, 4, 1, Distance.LUMA, WeightMode.WELSCH, "uint8", False, 32, True),
        NlmSpec(2, 4, 1, Distance.RGB, WeightMode.WELSCH, "uint8", False, 32, True),
        NlmSpec(1, 0, 0, Distance.CHROMA, WeightMode.BISQUARE_A, "uint16", True, 16),
        NlmSpec(3, 2, 3, Distance.RGB, WeightMode.BISQUARE_C, "float32", True, 8),
    ],
    ids=nlm_kernel_name,
)
def test_source_compiles_and_args_match_the_host_dtype(spec, tmp_path):
    source, _ = nlm_source(spec)
    size = args_dtype(spec.window).itemsize
    source += f'\nstatic_assert(sizeof(NlmArgs) == {size}, "NlmArgs layout");\n'
    result = _nvcc_compile(source, tmp_path)
    assert result.returncode == 0, result.stderr


def test_backend_unavailable_without_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` raise ImportError
    from avdenoise_vs._backends.cuda.backend import CudaBackend

    fmt = FrameLayout(16, 16, ColorFamily.GRAY, 0, 0, 8, SampleType.INTEGER)
    passes = (
        NlmSettings(
            planes=(0,),
            distance=Distance.LUMA,
            strength=1.2,
            radius=1,
            has_ref=False,
            search_radius=2,
            patch_radius=4,
            wmode=WeightMode.WELSCH,
            wref=1.0,
        ),
    )
    with pytest.raises(BackendUnavailable, match="CuPy"):
        CudaBackend(passes, fmt, device_index=None)
