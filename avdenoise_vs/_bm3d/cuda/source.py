"""CUDA source of the BM3D kernels: pure generators that never touch the GPU.

The fixed device code lives in the ``bm3d_*.cuh`` parts beside this module, one concern each,
joined in the order of :data:`BM3D_PARTS` (each part uses only what the parts before it
define). :func:`bm3d_source` puts a header in front of them: the ``#define`` values of one
:class:`Bm3dSpec`, the kernels' names (:func:`bm3d_kernel_name`) and the transform tables,
taken from the NumPy reference (``_bm3d/transforms.py``) so that the two can never
disagree on a constant.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

import numpy as np

from avdenoise_vs._bm3d.maths import (
    KAISER_BETA,
    OPP,
    OPP_INVERSE,
    SPATIAL_GROUP_SIZES,
    TRANSFORM_HT,
    TRANSFORM_WIENER,
)
from avdenoise_vs._bm3d.transforms import (
    BLOCK_SIZE,
    coefficient_std,
    forward_matrix,
    inverse_matrix,
    kaiser_window,
)
from avdenoise_vs._cuda.source import DTYPE_CODES, DTYPE_TAGS, ModuleSource, threaded_options

__all__ = [
    "BM3D_KERNELS",
    "BM3D_PARTS",
    "BM3D_TILES",
    "SM_WARPS",
    "Bm3dSpec",
    "bm3d_kernel_name",
    "bm3d_source",
]

#: The kernels of a BM3D module by role: the keys of ``get_bm3d_kernels`` and of the launches
#: (their C names are :func:`bm3d_kernel_name`'s).
BM3D_KERNELS = ("bm3d_load", "bm3d_hard", "bm3d_wiener", "bm3d_finish")
#: The device code's parts, in the order they are joined: definitions and the argument struct,
#: then one file per step of a frame (load, match, transform, filter and aggregate, finish).
BM3D_PARTS = (
    "bm3d_common.cuh",
    "bm3d_load.cuh",
    "bm3d_match.cuh",
    "bm3d_transform.cuh",
    "bm3d_tile.cuh",
    "bm3d_stage.cuh",
    "bm3d_finish.cuh",
)
#: Reference blocks per thread block (x, y), a warp each, of the hard-thresholding and the
#: Wiener kernel. With shared sums (``_bm3d.cuda.launch``), taller tiles share more of their reach;
#: a Wiener warp's shared memory is four times a hard-thresholding warp's, so its tile stays
#: one row high.
BM3D_TILES = ((4, 2), (4, 1))
#: Warps of a stage kernel an SM's registers may hold: 16 (128 registers a thread, room for
#: the reference block and the distances of matching) or 24 (80, some spilled), which ran the
#: hard-thresholding kernel of radius 0 faster (YUV444 727 us a frame against 788, luma 356
#: against 362; radius 1 YUV444 1247 against 1209: docs/BENCHMARKS.md, "BM3D kernels").
SM_WARPS = (16, 24)
#: Floats per block in shared memory: 8 rows of 9 (``BM_BS``), against bank conflicts.
_BLOCK_STRIDE = 72
#: Most vertically adjacent candidates a lane compares per matching task: each holds one
#: distance in a register beside the reference block's 64, within 128 a thread.
_MOST_TASK_ROWS = 4


@dataclass(frozen=True)
class Bm3dSpec:
    """Every compile-time value of one pass's BM3D kernels.

    Parameters
    ----------
    window : int
        Frames in the temporal window, ``2 * radius + 1``.
    channels : int
        Planes of the pass.
    joint : bool
        Group all channels on channel 0 (CBM3D); otherwise each channel on its own.
    rgb : bool
        RGB planes, filtered in the opponent colour space.
    dtype : str
        NumPy name of the sample type: ``uint8``, ``uint16`` or ``float32``.
    bm_range, ps_num, ps_range : int
        Full-search radius and predictive search, as in the reference.
    kernels : tuple of str
        The kernels the pass launches (of :data:`BM3D_KERNELS`): one module each, so that a
        pass compiles only what it runs, and its modules compile side by side.
    tiles : tuple of (int, int)
        Reference blocks per thread block (x, y) of the hard-thresholding and Wiener kernels.
    sm_warps : tuple of int
        Warps of each of those kernels an SM's registers are to hold (:data:`SM_WARPS`):
        the registers a thread gets, 65536 / (32 * warps) at most.
    groups : tuple of int
        Most blocks per group of the hard-thresholding and Wiener stages (``BM_K_HT``,
        ``BM_K_WIENER``): the reference's, ``maths.group_sizes`` of window, sigma and step.
    """

    window: int
    channels: int
    joint: bool
    rgb: bool
    dtype: str
    bm_range: int
    ps_num: int
    ps_range: int
    kernels: tuple[str, ...] = BM3D_KERNELS
    tiles: tuple[tuple[int, int], tuple[int, int]] = BM3D_TILES
    sm_warps: tuple[int, int] = (SM_WARPS[0], SM_WARPS[0])
    groups: tuple[int, int] = SPATIAL_GROUP_SIZES

    @property
    def candidates(self) -> int:
        """Blocks compared per reference block (``BM_NCAND``)."""
        full = (2 * self.bm_range + 1) ** 2
        return full + (self.window - 1) * self.ps_num * (2 * self.ps_range + 1) ** 2

    def shared_bytes(self, wiener: bool, step: int | None = None) -> int:
        """Dynamic shared memory of one thread block of a stage kernel (``BmShared``), with
        the tile's sums for reference blocks `step` apart unless `step` is None."""
        group = self.groups[wiener]
        blocks = (2 if wiener else 1) * group * _BLOCK_STRIDE
        per_warp = BLOCK_SIZE**2 + group + max(2 * self.candidates, blocks)
        sums = 0 if step is None else 2 * 8 * self.tile_reach(wiener, step)
        return 4 * self.warps(wiener) * per_warp + sums

    def warps(self, wiener: bool) -> int:
        """Warps per thread block of a stage kernel: one per reference block of its tile."""
        tile_x, tile_y = self.tiles[wiener]
        return tile_x * tile_y

    def tile_reach(self, wiener: bool, step: int) -> int:
        """Most pixels of a stage kernel's tile reach (bm3d_tile.cuh) for reference blocks
        `step` apart."""
        tile_x, tile_y = self.tiles[wiener]
        side = 2 * self.bm_range + BLOCK_SIZE
        return ((tile_y - 1) * step + side) * ((tile_x - 1) * step + side)

    def modules(self) -> tuple[ModuleSource, ...]:
        """What a pass of this spec compiles: one module per kernel it launches.

        The modules are compiled side by side: NVRTC releases the GIL, and in a cold fleet
        every other worker waits for this one. A one-stage pass compiles no Wiener kernel: off
        the GPU, NVRTC 13.0 took 1.9 s for the four kernels in one module and 1.05 s for load,
        hard and finish side by side (BM3D radius 0, luma, sm_90).
        """
        options = threaded_options()
        return tuple(
            ModuleSource(role, bm3d_source(self, (role,)), bm3d_kernel_name(self, role), options)
            for role in self.kernels
        )


def task_rows(side: int) -> int:
    """Candidates one lane compares per task in a search window of `side` x `side` blocks
    (``bm_window``'s ROWS): the fewest instructions for the window's slowest lane. A task of
    `rows` loads ``8 + rows - 1`` rows of 8 samples and takes two instructions per sample
    and candidate; the warp's 32 lanes take the window's tasks in rounds."""

    def slowest_lane(rows: int) -> int:
        tasks = side * -(-side // rows)
        rounds = -(-tasks // 32)
        return rounds * (BLOCK_SIZE * (BLOCK_SIZE + rows - 1) + 2 * BLOCK_SIZE**2 * rows)

    return min(range(1, _MOST_TASK_ROWS + 1), key=slowest_lane)


def bm3d_kernel_name(spec: Bm3dSpec, kernel: str) -> str:
    """C name of `kernel` (one of :data:`BM3D_KERNELS`) for `spec`: ``avdenoise_bm3d_<stage>_``
    followed by every specialisation value, the spec's and the compiled-in group sizes, so
    that two modules never share a kernel name."""
    stage = kernel.removeprefix("bm3d_")
    (hard_x, hard_y), (wiener_x, wiener_y) = spec.tiles
    group_ht, group_wiener = spec.groups
    return (
        f"avdenoise_bm3d_{stage}_t{spec.window}_c{spec.channels}_j{int(spec.joint)}"
        f"_rgb{int(spec.rgb)}_{DTYPE_TAGS[spec.dtype]}_bm{spec.bm_range}_pn{spec.ps_num}"
        f"_pr{spec.ps_range}_kh{group_ht}_kw{group_wiener}"
        f"_th{hard_x}x{hard_y}_tw{wiener_x}x{wiener_y}_o{spec.sm_warps[0]}x{spec.sm_warps[1]}"
    )


def _table(name: str, values: np.ndarray) -> str:
    """A ``__constant__ float`` array with the shape of `values`, exactly rounded."""
    dims = "".join(f"[{n}]" for n in values.shape)
    body = ", ".join(f"{float(v)!r}f" for v in np.asarray(values, dtype=np.float64).ravel())
    return f"__constant__ float {name}{dims} = {{{body}}};"


#: Matrix entries below this are the round-off of exact zeros (Bior1.5's are about 1e-17).
_STRUCTURAL_ZERO = 1e-12


def _matrix(name: str, values: np.ndarray) -> str:
    """A struct `name` whose ``apply(v, o)`` sets o = values @ v with the entries as literals,
    multiply-adding in column order and skipping the zero ones: Bior1.5's forward matrix has
    24 of 64, its inverse 16."""
    rows = []
    for j, row in enumerate(np.asarray(values, dtype=np.float64)):
        terms = "".join(
            f" s = fmaf({float(m)!r}f, v[{q}], s);"
            for q, m in enumerate(row)
            if abs(m) >= _STRUCTURAL_ZERO
        )
        rows.append(f"        {{ float s = 0.0f;{terms} o[{j}] = s; }}")
    body = "\n".join(rows)
    return (
        f"struct {name} {{\n    static __device__ __forceinline__ void apply("
        f"const float (&v)[{len(values)}], float (&o)[{len(values)}]) {{\n{body}\n    }}\n}};"
    )


@functools.cache
def _tables() -> str:
    """The constant tables and transform matrices of the device code, from the reference's."""
    return "\n".join(
        [
            _matrix("bm_ht_fwd", forward_matrix(TRANSFORM_HT)),
            _matrix("bm_ht_inv", inverse_matrix(TRANSFORM_HT)),
            _matrix("bm_wn_fwd", forward_matrix(TRANSFORM_WIENER)),
            _matrix("bm_wn_inv", inverse_matrix(TRANSFORM_WIENER)),
            _table("bm_ht_std", coefficient_std(TRANSFORM_HT).ravel()),
            _table("bm_kaiser", kaiser_window(BLOCK_SIZE, KAISER_BETA).ravel()),
            _table("bm_opp", OPP),
            _table("bm_opp_inv", OPP_INVERSE),
        ]
    )


def bm3d_source(spec: Bm3dSpec, kernels: tuple[str, ...] = BM3D_KERNELS) -> str:
    """The source of the module holding `kernels` (of :data:`BM3D_KERNELS`) for `spec` (see
    bm3d_common.cuh for the launch protocol).

    Only the name macros of `kernels` are defined, and each kernel is compiled only when its
    macro is: NVRTC then spends nothing on the others (the stage kernels are nearly all of a
    module's compile time).
    """
    unknown = set(kernels) - set(BM3D_KERNELS)
    if unknown:
        raise ValueError(f"kernels must be of {BM3D_KERNELS}, got {sorted(unknown)}")
    if spec.window > 63:
        raise ValueError(f"window must be at most 63 frames, got {spec.window}")
    header = [
        "// generated by avdenoise_vs._bm3d.cuda.source.bm3d_source",
        f"#define BM_T {spec.window}",
        f"#define BM_C {spec.channels}",
        f"#define BM_JOINT {int(spec.joint)}",
        f"#define BM_RGB {int(spec.rgb)}",
        f"#define BM_DTYPE {DTYPE_CODES[spec.dtype]}",
        f"#define BM_RANGE {spec.bm_range}",
        f"#define BM_PSNUM {spec.ps_num}",
        f"#define BM_PSR {spec.ps_range}",
        f"#define BM_ROWS_FULL {task_rows(2 * spec.bm_range + 1)}",
        f"#define BM_ROWS_PS {task_rows(2 * spec.ps_range + 1)}",
        f"#define BM_K_HT {spec.groups[0]}",
        f"#define BM_K_WIENER {spec.groups[1]}",
        f"#define BM_HARD_TX {spec.tiles[0][0]}",
        f"#define BM_HARD_TY {spec.tiles[0][1]}",
        f"#define BM_WIENER_TX {spec.tiles[1][0]}",
        f"#define BM_WIENER_TY {spec.tiles[1][1]}",
        f"#define BM_HARD_SM_WARPS {spec.sm_warps[0]}",
        f"#define BM_WIENER_SM_WARPS {spec.sm_warps[1]}",
        *(f"#define BM_NAME_{k[5:].upper()} {bm3d_kernel_name(spec, k)}" for k in kernels),
        _tables(),
        "",
    ]
    return "\n".join(header) + _device_code()


@functools.cache
def _device_code() -> str:
    """The device code: the parts of :data:`BM3D_PARTS` (package data), joined in order."""
    files = resources.files(__package__)
    return "".join(files.joinpath(part).read_text(encoding="utf-8") for part in BM3D_PARTS)
