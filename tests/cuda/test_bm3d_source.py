"""The BM3D kernel generator, without a GPU (CuPy not needed): names and source assembly.

The nvcc checks run where ``nvcc`` is on the PATH and are skipped elsewhere.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import shutil
import subprocess
from importlib import resources

import numpy as np
import pytest

from avdenoise_vs._bm3d.cuda.args import bm3d_args_dtype
from avdenoise_vs._bm3d.cuda.bm3d_pass import HOPPER_SHARED_LIMIT, _pass_spec
from avdenoise_vs._bm3d.cuda.launch import fit_occupancy, fit_tiles
from avdenoise_vs._bm3d.cuda.source import (
    BM3D_KERNELS,
    BM3D_PARTS,
    BM3D_TILES,
    Bm3dSpec,
    bm3d_kernel_name,
    bm3d_source,
    task_rows,
)
from avdenoise_vs._bm3d.maths import SPATIAL_GROUP_SIZES, TEMPORAL_GROUP_SIZES, group_sizes
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType
from avdenoise_vs._params.settings import Bm3dSettings, Stages

__all__: list[str] = []

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _grid():
    """Specs over every field; channels with their joint / RGB combinations."""
    colours = [(1, False, False), (2, False, False), (3, False, False), (3, True, False),
               (3, True, True)]  # fmt: skip
    for window, (channels, joint, rgb), dtype, bm_range, ps_num, ps_range in itertools.product(
        (1, 3, 5, 63), colours, ("uint8", "uint16", "float32"), (1, 4, 12), (1, 2, 13), (1, 4, 11)
    ):
        yield Bm3dSpec(window, channels, joint, rgb, dtype, bm_range, ps_num, ps_range)


def test_kernel_names_are_unique_identifiers():
    specs = list(_grid())
    names = [bm3d_kernel_name(spec, kernel) for spec in specs for kernel in BM3D_KERNELS]
    assert len(set(names)) == len(specs) * len(BM3D_KERNELS)
    for name in names:
        assert _IDENTIFIER.match(name) and name.startswith("avdenoise_bm3d_"), name


@pytest.mark.parametrize("kernel", BM3D_KERNELS)
def test_names_start_with_their_stage(kernel):
    spec = Bm3dSpec(3, 3, True, False, "uint16", 4, 2, 4)
    assert bm3d_kernel_name(spec, kernel).startswith(f"avdenoise_{kernel}_t3_")


_BOUNDS = r"__launch_bounds__\([^)]*\)\s+"  # a kernel's launch bounds, if any


def test_source_defines_and_uses_every_kernel_name():
    spec = Bm3dSpec(3, 1, False, False, "float32", 4, 2, 4)
    source = bm3d_source(spec)
    assert source == bm3d_source(spec)
    for kernel in BM3D_KERNELS:
        macro = f"BM_NAME_{kernel.removeprefix('bm3d_').upper()}"
        assert f"#define {macro} {bm3d_kernel_name(spec, kernel)}\n" in source
        assert re.search(rf"__global__ void ({_BOUNDS})?{macro}\(", source)
    assert not re.search(rf"__global__ void ({_BOUNDS})?bm3d_", source)


@pytest.mark.parametrize("kernel", BM3D_KERNELS)
def test_a_module_of_one_kernel_names_only_that_kernel(kernel):
    """The other kernels' name macros stay undefined, and the device code compiles each kernel
    only under its own macro, so NVRTC builds nothing else."""
    spec = Bm3dSpec(3, 1, False, False, "float32", 4, 2, 4)
    source = bm3d_source(spec, (kernel,))
    defined = re.findall(r"^#define (BM_NAME_\w+) ", source, re.M)
    assert defined == [f"BM_NAME_{kernel.removeprefix('bm3d_').upper()}"]
    lines = source.splitlines()
    guarded = [
        (lines[i - 1], re.search(r"(BM_NAME_\w+)\(", line)[1])
        for i, line in enumerate(lines)
        if "__global__ void" in line
    ]
    assert len(guarded) == len(BM3D_KERNELS)
    assert all(guard == f"#ifdef {name}" for guard, name in guarded)


def test_unknown_kernels_are_refused():
    with pytest.raises(ValueError, match="bm3d_sharpen"):
        bm3d_source(Bm3dSpec(1, 1, False, False, "uint8", 4, 2, 4), ("bm3d_sharpen",))


def test_source_is_the_parts_in_order():
    """The device code is every shipped part once, in BM3D_PARTS order, each whole lines."""
    files = resources.files("avdenoise_vs._bm3d.cuda")
    shipped = sorted(p.name for p in files.iterdir() if re.fullmatch(r"bm3d_\w+\.cuh", p.name))
    assert sorted(BM3D_PARTS) == shipped
    parts = [files.joinpath(part).read_text(encoding="utf-8") for part in BM3D_PARTS]
    assert all(part.endswith("\n") for part in parts)
    source = bm3d_source(Bm3dSpec(1, 1, False, False, "uint8", 4, 2, 4))
    assert source.endswith("".join(parts))
    assert "struct Bm3dArgs {" in parts[0]


def test_windows_past_the_key_limit_are_refused():
    with pytest.raises(ValueError, match="at most 63"):
        bm3d_source(Bm3dSpec(65, 1, False, False, "uint8", 4, 2, 4))


@pytest.mark.parametrize(("side", "rows"), [(19, 4), (9, 3), (39, 3), (3, 1)])
def test_matching_tasks_fit_the_window(side, rows):
    """The window sides of BM3DCUDA's, the predictive search's and Denoise's default searches:
    4 rows of 19 x 5 tasks fill three rounds of 32 lanes, 3 rows of 9 one round exactly."""
    assert task_rows(side) == rows


def test_the_register_budget_is_compiled_in_and_named():
    """Two budgets compile to different code, so they must not share a kernel name."""
    spec = Bm3dSpec(1, 1, False, False, "float32", 9, 2, 4)
    wide = dataclasses.replace(spec, sm_warps=(24, 16))
    assert bm3d_kernel_name(spec, "bm3d_hard") != bm3d_kernel_name(wide, "bm3d_hard")
    source = bm3d_source(wide, ("bm3d_hard",))
    assert "#define BM_HARD_SM_WARPS 24\n" in source
    assert "#define BM_WIENER_SM_WARPS 16\n" in source


def _shared_sum_constants() -> dict[str, int]:
    text = resources.files("avdenoise_vs._bm3d.cuda").joinpath("bm3d_tile.cuh").read_text()
    found = dict(re.findall(r"#define (BM_SPLIT|BM_SHARED_ADDS) (\d+)", text))
    (shift,) = re.findall(r"#define BM_SHARED_MAX \(1ll << (\d+)\)", text)
    return {name: int(value) for name, value in found.items()} | {"BM_SHARED_MAX": 1 << int(shift)}


def test_every_tile_fits_the_shared_sums_bound():
    """bm3d_stage.cuh asserts it at compile time; here for every tile a pass can pick."""
    most = _shared_sum_constants()["BM_SHARED_ADDS"]
    largest = max(*SPATIAL_GROUP_SIZES, *TEMPORAL_GROUP_SIZES)
    for tile_x, tile_y in (*BM3D_TILES, (4, 1)):
        assert tile_x * tile_y * largest <= most


def test_split_shared_sums_add_up_to_the_exact_int64_sum():
    """The words bm_shared_add keeps (low BM_SPLIT bits unsigned, the rest signed), modelled
    with NumPy at the bound: BM_SHARED_ADDS values just inside BM_SHARED_MAX, both signs."""
    constants = _shared_sum_constants()
    split, adds = constants["BM_SPLIT"], constants["BM_SHARED_ADDS"]
    rng = np.random.default_rng(7)
    largest = constants["BM_SHARED_MAX"] - 1
    for values in (
        rng.integers(-largest, largest, adds, dtype=np.int64),
        np.full(adds, largest, dtype=np.int64),
        np.full(adds, -largest, dtype=np.int64),
    ):
        low = int(np.sum(values & ((1 << split) - 1)))
        high = int(np.sum(values >> split))
        assert 0 <= low < 1 << 32 and -(1 << 31) <= high < 1 << 31
        assert high * (1 << split) + low == int(np.sum(values.astype(object)))


def test_matching_task_rows_are_defined_per_window():
    source = bm3d_source(Bm3dSpec(3, 1, False, False, "float32", 9, 2, 4))
    assert "#define BM_ROWS_FULL 4\n" in source
    assert "#define BM_ROWS_PS 3\n" in source
    assert all(1 <= task_rows(side) <= 4 for side in range(1, 80, 2))


def _nvcc_compile(source: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    command = ["nvcc", "-arch=sm_90", "-std=c++17", "-c", str(path), "-o", str(tmp_path / "k.o")]
    return subprocess.run(command, capture_output=True, text=True, check=False)


#: The shapes users run (BM3D luma and YUV444, V-BM3D, RGB, every sample type), with the tiles
#: a pass picks on Hopper; each module of each spec is compiled on its own, as a pass does.
_COMPILED_SPECS = [
    Bm3dSpec(1, 1, False, False, "float32", 4, 2, 4),
    Bm3dSpec(1, 3, True, False, "float32", 4, 2, 4),
    Bm3dSpec(3, 3, True, False, "float32", 4, 2, 4),
    Bm3dSpec(5, 3, True, True, "uint8", 4, 2, 4),
    Bm3dSpec(3, 2, False, False, "uint16", 12, 2, 4),
]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize(
    ("spec", "kernel"),
    list(itertools.product(_COMPILED_SPECS, BM3D_KERNELS)),
    ids=lambda value: value if isinstance(value, str) else bm3d_kernel_name(value, "bm3d_load"),
)
def test_every_module_compiles_and_its_args_match_the_host_dtype(spec, kernel, tmp_path):
    """What the GPU compiles with NVRTC compiles with nvcc too, and ``struct Bm3dArgs`` is
    exactly the record the host fills (``bm3d_args_dtype``): a layout slip would misplace
    every field after it."""
    spec = fit_occupancy(fit_tiles(spec, HOPPER_SHARED_LIMIT), 8, HOPPER_SHARED_LIMIT)
    size = bm3d_args_dtype(spec.window).itemsize
    source = bm3d_source(spec, (kernel,))
    source += f'\nstatic_assert(sizeof(Bm3dArgs) == {size}, "Bm3dArgs layout");\n'
    result = _nvcc_compile(source, tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]


def test_a_pass_compiles_the_reference_group_sizes():
    """The kernels group as many blocks as the oracle does (``maths.group_sizes``): 8 / 16 for
    a window up to sigma 20 on a grid of step 4 at most, else 16 / 32, in the defines and the
    kernels' names."""
    layout = FrameLayout(64, 48, ColorFamily.GRAY, 0, 0, 32, SampleType.FLOAT)
    cases = [(0, 3.0, 3, (16, 32)), (1, 3.0, 3, (8, 16)), (2, 20.0, 4, (8, 16)),
             (1, 25.0, 3, (16, 32)), (1, 3.0, 8, (16, 32))]  # fmt: skip
    for radius, sigma, step, sizes in cases:
        options = Bm3dSettings(
            planes=(0,), distance=Distance.LUMA, plane_strengths=(sigma,), radius=radius,
            stages=Stages.BOTH, lambda_ht=2.7, mismatch_scale=1.0, block_step=step, bm_range=9,
            ps_num=2, ps_range=4,
        )  # fmt: skip
        spec = _pass_spec(options, layout, HOPPER_SHARED_LIMIT)
        assert spec.groups == group_sizes(2 * radius + 1, sigma, step) == sizes
        source = bm3d_source(spec, ("bm3d_hard",))
        assert f"#define BM_K_HT {sizes[0]}\n#define BM_K_WIENER {sizes[1]}\n" in source
        assert f"_kh{sizes[0]}_kw{sizes[1]}_" in bm3d_kernel_name(spec, "bm3d_hard")
