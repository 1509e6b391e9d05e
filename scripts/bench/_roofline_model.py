"""Analytical cost of the BM3D kernels per output frame, against the H200's ceilings.

Counts follow the device code (``avdenoise_vs/_bm3d/cuda/bm3d_*.cuh``; ``file:line`` below, and
:data:`ANCHORS`, whose lines a test finds in the code) and take the launch geometry from the
package itself (``_pass_spec``, ``stage_launches``), so that tiles, tile sums and task rows are
the ones a pass launches. Operations are thread-level ("lane") operations: an instruction a warp
executes with 32 lanes counts 32. FP32 counts FFMA, FADD and FMUL exactly as written; integer
counts (compares, selects, addresses, keys) are estimates per item (:data:`INT_PER`), so the
integer and issue bounds are leads: ``bm3d_roofline.py --measure --ncu`` counts the executed ones.

Bytes: ``dram`` is each buffer a kernel reads read once and each it writes written once (an
accumulator that atomics add to: read and written once), no reuse across kernels through the
L2; ``l1`` is what the kernel's global loads, stores and atomics request; ``shared`` what its
shared-memory accesses move. Data-dependent quantities are parameters: the group size (full
groups by default: the hard threshold 2500 on ``||a - b||^2 / 64`` passes nearly every
candidate) and the share of a group's members in the reference frame (V-BM3D).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from avdenoise_vs._bm3d.cuda.args import reference_grid
from avdenoise_vs._bm3d.cuda.bm3d_pass import HOPPER_SHARED_LIMIT, _pass_spec
from avdenoise_vs._bm3d.cuda.launch import stage_launches
from avdenoise_vs._bm3d.cuda.source import _STRUCTURAL_ZERO, task_rows
from avdenoise_vs._bm3d.cuda.workspace import WorkSizes
from avdenoise_vs._bm3d.maths import TRANSFORM_HT, TRANSFORM_WIENER
from avdenoise_vs._bm3d.transforms import forward_matrix, inverse_matrix
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType
from avdenoise_vs._params.settings import Bm3dSettings, Stages

#: Lines the counts rest on: (file, text); ``tests/scripts/bench/test_bm3d_roofline.py``
#: checks that each is still in the device code.
ANCHORS = {
    "distance": ("bm3d_match.cuh", "acc[j] = fmaf(d, d, acc[j]);"),
    "window load": ("bm3d_match.cuh", "v[c] = __ldg(row + c);"),
    "candidate": ("bm3d_match.cuh", "sd[offset + dy * side + dx] = ok ? d[j] : BM_INF;"),
    "scan": ("bm3d_match.cuh", "const float d = sd[i];"),
    "seed": ("bm3d_match.cuh", "bm_next(sd, sk, prev_begin, prev_end, last_d, last_k, BM_INF"),
    "round": ("bm3d_match.cuh", "bm_warp_min(d, k);"),
    "gather": ("bm3d_stage.cuh", "blk[b * BM_BS + bm_at(p)] = src[(long long)(p / BM_B)"),
    "matrix": ("bm3d_transform.cuh", "M::apply(v, o);"),
    "haar": ("bm3d_transform.cuh", "tmp[k] = (v[2 * k] + v[2 * k + 1]) * h;"),
    "threshold": ("bm3d_stage.cuh", "fabsf(v[b]) > limit"),
    "wiener": ("bm3d_stage.cuh", "energy / total"),
    "fixed point": ("bm3d_stage.cuh", "__float2ll_rn(w[h] * v[h] * BM_FIX)"),
    "global sum": ("bm3d_stage.cuh", "atomicAdd(num + BM_C * plane + at, ww[h]);"),
    "shared sum": ("bm3d_stage.cuh", "bm_shared_add(tile_sums + tile.h * tile.w + at, ww[h]);"),
    "high word": ("bm3d_tile.cuh", "if (high) atomicAdd((int*)words + 1, high);"),
    "flush": ("bm3d_tile.cuh", "atomicAdd(den + at, sd);"),
    "load": ("bm3d_load.cuh", "dst[base + c * plane] = v[c];"),
    "divide": ("bm3d_finish.cuh", "(float)((double)num[i] / (double)den[i])"),
    "clear": ("bm3d_finish.cuh", "if (a.clear) num[i] = den[i] = 0;"),
}
#: Integer lane-ops per item (compares, selects, address and key arithmetic), read off the
#: source, not the SASS.
INT_PER = dict(
    row=5,  # bm_distances: one row's clamped address (bm3d_match.cuh:68)
    store=14,  # bm_window: usable test, key, selects, two shared stores (bm3d_match.cuh:102-108)
    scan=10,  # bm_next / bm_refill: one entry's tests (bm3d_match.cuh:43-49, 227-234)
    round=18,  # bm_select: warp minimum, winner test, list shift, vote (bm3d_match.cuh:250-268)
    sample=8,  # gather / aggregation: one sample's position and index (bm3d_stage.cuh:19-27, 54-64)
    task=6,  # bm_rows: one row or column task's addressing (bm3d_transform.cuh:10-19)
    coefficient=4,  # hard threshold per coefficient: tests, select, count (bm3d_stage.cuh:83-87)
    wiener=5,  # Wiener shrinkage per coefficient: tests and selects (bm3d_stage.cuh:113-119)
    shared_add=3,  # bm_shared_add's mask, shift and test (bm3d_tile.cuh:57-62)
    flush=24,  # one reach pixel: zero test, i / w and i % w, address (bm3d_tile.cuh:62-69)
    pixel=6,  # per-pixel kernels' index arithmetic (bm3d_load.cuh:37-42, bm3d_finish.cuh:9-14)
)
#: FP32 lane-ops of one IEEE single division (reciprocal, two Newton steps, check): Wiener.
_FP32_DIVIDE = 6
#: FP64 lane-ops of one double division in bm3d_finish (reciprocal seed and Newton steps).
_FP64_DIVIDE = 8


@dataclass(frozen=True)
class Ceilings:
    """The H200's limits. Leads, not readings: KINDS.md's copy reached 4.3 TB/s.

    Sources: HBM3e 4.8 TB/s (H200.md, the datasheet); 132 SMs and the 1980 MHz SM clock seen
    under load (KINDS.md); lanes per SM and clock for compute capability 9.0 (CUDA C++
    Programming Guide, arithmetic instruction throughput): 128 FP32, 64 integer, 64 FP64, 16
    conversions to or from 64-bit types; 128 bytes per SM and clock of L1 / shared memory;
    4 warp instructions issued per SM and clock (one per scheduler).
    """

    hbm: float = 4.8e12
    sms: int = 132
    clock: float = 1.98e9
    fp32: int = 128
    int32: int = 64
    fp64: int = 64
    conv: int = 16
    l1_bytes: int = 128
    issue: int = 4

    def rate(self, per_sm_clock: float) -> float:
        """Whole-chip rate of a unit doing `per_sm_clock` per SM and clock, per second."""
        return self.sms * per_sm_clock * self.clock


@dataclass
class Cost:
    """Work of one kernel role: bytes (see the module notes) and lane-ops by unit."""

    launches: float = 0.0
    dram_read: float = 0.0
    dram_write: float = 0.0
    l1: float = 0.0
    shared: float = 0.0
    fp32: float = 0.0
    int32: float = 0.0
    conv: float = 0.0
    fp64: float = 0.0
    atom_global: float = 0.0  # 64-bit reductions into L2
    atom_shared: float = 0.0  # 32-bit shared-memory atomic adds

    def __add__(self, other: Cost) -> Cost:
        return Cost(*(a + b for a, b in zip(_values(self), _values(other), strict=True)))

    def __mul__(self, k: float) -> Cost:
        return Cost(*(a * k for a in _values(self)))

    @property
    def dram(self) -> float:
        return self.dram_read + self.dram_write

    @property
    def ops(self) -> float:
        """Arithmetic lane-ops of every unit."""
        return self.fp32 + self.int32 + self.conv + self.fp64

    @property
    def memory_ops(self) -> float:
        """Load, store and atomic lane-ops (4-byte accesses; 8 for atomics into L2)."""
        return (self.l1 + self.shared) / 4 - self.atom_global + self.atom_shared


def _values(cost: Cost) -> list[float]:
    return [getattr(cost, f.name) for f in dataclasses.fields(cost)]


@dataclass(frozen=True)
class Case:
    """One benchmark configuration: frame size, planes, temporal radius, stages, sample type."""

    width: int
    height: int
    chroma: bool  # YUV444 grouped on luma (CBM3D); otherwise luma alone
    radius: int
    stages: int = 1
    dtype: str = "float32"
    sigma: float = 3.0
    settings: tuple = (("block_step", 8), ("bm_range", 9), ("ps_num", 2), ("ps_range", 4))

    def pass_settings(self) -> tuple[Bm3dSettings, FrameLayout]:
        """The pass and frame layout the package builds for this case."""
        planes = (0, 1, 2) if self.chroma else (0,)
        bits = {"float32": 32, "uint8": 8, "uint16": 16}[self.dtype]
        layout = FrameLayout(
            self.width, self.height, ColorFamily("yuv" if self.chroma else "gray"), 0, 0, bits,
            SampleType.FLOAT if bits == 32 else SampleType.INTEGER,
        )  # fmt: skip
        options = Bm3dSettings(
            planes=planes, distance=Distance.YUV if self.chroma else Distance.LUMA,
            plane_strengths=(self.sigma,) * len(planes), radius=self.radius,
            stages=Stages.from_parameter(self.stages, has_ref=False), lambda_ht=2.7,
            mismatch_scale=1.0, **dict(self.settings),
        )  # fmt: skip
        return options, layout


@dataclass(frozen=True)
class Geometry:
    """What the package launches for a case: spec, reference grid, stage launches, sizes."""

    case: Case
    spec: object  # Bm3dSpec
    refs: tuple[int, int]
    launches: dict
    pitch: int
    step: int
    itemsize: int

    @classmethod
    def of(cls, case: Case) -> Geometry:
        options, layout = case.pass_settings()
        spec = _pass_spec(options, layout, HOPPER_SHARED_LIMIT)
        refs = reference_grid(options, layout)
        launches = stage_launches(spec, refs, options.block_step, HOPPER_SHARED_LIMIT)
        pitch = WorkSizes.of(spec.channels, case.height, case.width).pitch
        return cls(case, spec, refs, launches, pitch, options.block_step, layout.dtype.itemsize)

    @property
    def pixels(self) -> int:
        """Samples of one plane."""
        return self.case.width * self.case.height

    @property
    def matched(self) -> int:
        """Channels matched separately (``blockIdx.z``): 1 for joint passes."""
        return 1 if self.spec.joint else self.spec.channels


def window_tasks(side: int, rows: int) -> int:
    """Tasks of one search window (bm3d_match.cuh:95-96): ``side * ceil(side / rows)``; each
    computes `rows` distances (bm3d_match.cuh:73-80, also past the window's last row)."""
    return side * -(-side // rows)


def windows(spec) -> list[tuple[int, int, int]]:
    """``(side, rows, count)`` of the search windows of one reference block: the full search
    (bm3d_match.cuh:187) and ``ps_num`` predictive windows per other frame (:167)."""
    full = 2 * spec.bm_range + 1
    side = 2 * spec.ps_range + 1
    found = [(full, task_rows(full), 1)]
    if spec.window > 1:
        found.append((side, task_rows(side), (spec.window - 1) * spec.ps_num))
    return found


def distances(spec) -> int:
    """Block distances one reference block computes (candidates, edge ones included)."""
    return sum(window_tasks(s, r) * r * n for s, r, n in windows(spec))


def in_grid_candidates(geom: Geometry) -> int:
    """Full-search candidates inside the block grid, summed over a frame's reference blocks
    (the reference's windows, ``matching._window``): of the :func:`distances` the kernel
    computes, the others are discarded (bm3d_match.cuh:105-107)."""
    radius = geom.spec.bm_range

    def axis(length: int, count: int) -> int:
        last = length - 8
        at = np.minimum(np.arange(count) * geom.step, last)  # bm_ref_at, bm3d_tile.cuh:20-22
        return int((np.minimum(at + radius, last) - np.maximum(at - radius, 0) + 1).sum())

    return axis(geom.case.width, geom.refs[0]) * axis(geom.case.height, geom.refs[1]) * geom.matched


def matching_cost(spec, k: int) -> Cost:
    """One reference block's matching and grouping into at most `k` blocks (bm_match,
    bm3d_stage.cuh:151-182).

    Per task of a window: ``(8 + rows - 1) * 8`` loads (bm3d_match.cuh:71), a subtraction and an
    FMA per sample and candidate (:77-78) and a scale per candidate (:83); per candidate two
    shared stores (:106-107). Predictive seeds scan the previous frame's entries ``ps_num``
    times (:146); the selection scans every candidate once (:247) and runs ``K - 1`` rounds of a
    warp minimum (:253); later refills depend on the data and are not counted.
    """
    # The reference block: 64 loads and shared stores, then read by every lane (match.cuh:185).
    cost = Cost(l1=4 * 64, shared=4 * 64 + 4 * 64 * 32, int32=2 * 64)
    for side, rows, count in windows(spec):
        tasks = window_tasks(side, rows) * count
        cost.l1 += tasks * (7 + rows) * 8 * 4
        cost.fp32 += tasks * rows * (2 * 64 + 1)
        cost.int32 += tasks * (7 + rows) * INT_PER["row"] + count * side**2 * INT_PER["store"]
        cost.shared += count * side**2 * 8
    full, ps = (2 * spec.bm_range + 1) ** 2, (2 * spec.ps_range + 1) ** 2 * spec.ps_num
    radius = (spec.window - 1) // 2
    seeds = spec.ps_num * (2 * full + 2 * max(radius - 1, 0) * ps) if radius else 0
    scanned = seeds + spec.candidates
    cost.int32 += scanned * INT_PER["scan"] + 32 * (k - 1) * INT_PER["round"]
    cost.shared += scanned * 8
    return cost


def transform_cost(blocks: int, name: str, inverse: bool) -> Cost:
    """2-D transforms of `blocks` blocks (bm_2d, bm3d_transform.cuh:9-28): 8 row and 8 column
    tasks per block, each a matrix-vector product of its nonzero entries (:16) and 8 shared
    loads and stores."""
    matrix = (inverse_matrix if inverse else forward_matrix)(name)
    nnz = int((np.abs(matrix) >= _STRUCTURAL_ZERO).sum())  # the literals source.py writes
    return Cost(fp32=blocks * 16 * nnz, shared=blocks * 2 * 128 * 4,
                int32=blocks * 16 * INT_PER["task"])  # fmt: skip


def shrinkage_cost(group: float, wiener: bool, k: int) -> Cost:
    """One channel of a group along the group axis (bm3d_stage.cuh:74-127), per position of 64:
    Haar transforms of ``4 (group - 1)`` operations each (bm3d_transform.cuh:33-49; forward and
    inverse, and the pilot's forward for Wiener), then the shrinkage of each of the ``K``
    registers (predicated past `group`): a compare (:84), or Wiener's weight, division and
    norm (:114-118). `k`: the stage's most blocks per group (``Bm3dSpec.groups``)."""
    haar = 4 * (group - 1)
    if wiener:
        per = Cost(fp32=3 * haar + k * (4 + _FP32_DIVIDE), int32=k * INT_PER["wiener"])
        per.shared = 3 * group * 4
    else:
        per = Cost(fp32=2 * haar + 2, int32=k * INT_PER["coefficient"], shared=2 * group * 4)
    return per * 64 + Cost(fp32=5 * 32, int32=5 * 32)  # the warp sum of the weight (:3-7)


def aggregation_cost(group: float, centre_share: float, tile_sums: bool) -> Cost:
    """One channel of a group into the sums (bm_aggregate and bm_add_block, bm3d_stage.cuh:35-91),
    per sample: a shared load, two multiplies and a conversion to fixed point (:50), then two
    64-bit reductions into L2 (:57-58) or, for members of the reference frame with tile sums,
    two ``bm_shared_add`` (:53-54) of two 32-bit atomics each (both words take a part of the
    value: numerators and weights are at least 2^24 in fixed point but for the smallest)."""
    samples = 64 * group
    shared_part = centre_share if tile_sums else 0.0
    glob, shared = samples * (1 - shared_part), samples * shared_part
    return Cost(
        l1=16 * glob, shared=4 * samples, fp32=2 * samples + 4 * 32, conv=samples + 2 * 32,
        int32=samples * INT_PER["sample"] + shared * 2 * INT_PER["shared_add"],
        atom_global=2 * glob, atom_shared=4 * shared,
    )  # fmt: skip


def tile_reach(geom: Geometry, wiener: bool) -> tuple[int, int]:
    """``(tiles, reach pixels summed over tiles)`` of a stage launch per matched channel, the
    reach of each tile as bm_tile computes it (bm3d_tile.cuh:24-37)."""
    tile_x, tile_y = geom.spec.tiles[wiener]
    radius, step = geom.spec.bm_range, geom.step

    def axis(refs: int, tile: int, length: int) -> np.ndarray:
        grid = length - 7
        first = np.arange(-(-refs // tile)) * tile
        last = np.minimum(first + tile, refs) - 1
        low = np.maximum(np.minimum(first * step, grid - 1) - radius, 0)
        return np.minimum(np.minimum(last * step, grid - 1) + radius, grid - 1) + 8 - low

    ys = axis(geom.refs[1], tile_y, geom.case.height)
    xs = axis(geom.refs[0], tile_x, geom.case.width)
    return ys.size * xs.size, int(ys.sum() * xs.sum())


def stage_cost(geom: Geometry, wiener: bool, group: float, centre_share: float) -> Cost:
    """One launch of a stage kernel (bm3d_stage.cuh:216-245) filtering one frame's groups.

    Reference blocks: ``refs_x * refs_y`` per matched channel, each matched once and filtered
    in each of its group's channels. Tile sums (when the launch has them): the reach zeroed
    (bm3d_tile.cuh:52) and flushed per channel, one 64-bit reduction per pixel and sum (:66-67).
    DRAM: the window's float planes (noisy, and the pilot for Wiener) read once; the
    accumulators of the window's frames read and written once.
    """
    spec, n = geom.spec, geom.pixels
    refs = geom.refs[0] * geom.refs[1] * geom.matched
    name = TRANSFORM_WIENER if wiener else TRANSFORM_HT
    inputs = 2 if wiener else 1
    # bm_gather (bm3d_stage.cuh:16-30): each member's 64 samples, and the pilot's for Wiener
    per_group = Cost(l1=inputs * 256 * group, shared=inputs * 256 * group,
                     int32=inputs * 64 * group * INT_PER["sample"])  # fmt: skip
    per_group += transform_cost(inputs * group, name, False) + transform_cost(group, name, True)
    k = spec.groups[wiener]
    per_group += shrinkage_cost(group, wiener, k)
    sums = geom.launches["bm3d_" + ("wiener" if wiener else "hard")].sums
    per_group += aggregation_cost(group, centre_share, sums)
    cost = matching_cost(spec, k) * refs + per_group * (refs * (spec.channels // geom.matched))
    if sums:
        _, reach = tile_reach(geom, wiener)
        reach *= geom.matched
        flushes = reach * (spec.channels // geom.matched)
        cost += Cost(shared=16 * reach + 32 * flushes, l1=16 * flushes, atom_global=2 * flushes,
                     int32=flushes * INT_PER["flush"])  # fmt: skip
    planes = spec.window * spec.channels * n
    cost.dram_read = 4 * inputs * planes + 16 * planes
    cost.dram_write = 16 * planes
    cost.launches = 1
    return cost


def load_cost(geom: Geometry) -> Cost:
    """One bm3d_load of the window's frames (bm3d_load.cuh:36-61): per sample a read, a scale
    (:18) and a float store (:60)."""
    samples = geom.spec.window * geom.spec.channels * geom.pixels
    read = samples * geom.itemsize
    return Cost(launches=1, dram_read=read, dram_write=4 * samples, l1=read + 4 * samples,
                fp32=samples, int32=samples * INT_PER["pixel"])  # fmt: skip


def finish_cost(geom: Geometry, clear: bool, to_pilot: bool) -> Cost:
    """One bm3d_finish (bm3d_finish.cuh:8-64): per sample two int64 reads, a double division
    (:23: two conversions in, one out), zeroing when `clear` (:27), one output sample."""
    samples = geom.spec.channels * geom.pixels
    out = 4 if to_pilot else geom.itemsize
    written = samples * (out + 16 * clear)
    return Cost(launches=1, dram_read=16 * samples, dram_write=written, l1=16 * samples + written,
                fp32=samples, fp64=samples * _FP64_DIVIDE, conv=3 * samples,
                int32=samples * INT_PER["pixel"])  # fmt: skip


def frame_costs(case: Case, group: float | None = None, centre_share: float | None = None) -> dict:
    """Work per output frame by role (load, hard, wiener, finish; memset for V-BM3D's fresh
    accumulators), in the steady state of the schedules (schedule.py, vbm3d_schedule.py).

    `group`: members per group, a mean (default: full, ``K`` of each stage); `centre_share`:
    share of a group's members in the reference frame (default ``1 / (2 r + 1)``).
    """
    geom = Geometry.of(case)
    spatial = geom.spec.window == 1
    share = 1.0 if spatial else (1.0 / geom.spec.window if centre_share is None else centre_share)
    run = ["hard"] + ["wiener"] * (case.stages == 2)
    roles = {"load": load_cost(geom) * (1 if spatial else len(run))}
    for stage in run:
        size = group or geom.spec.groups[stage == "wiener"]
        roles[stage] = stage_cost(geom, stage == "wiener", size, share)
    roles["finish"] = finish_cost(geom, spatial, False)
    if case.stages == 2:
        roles["finish"] += finish_cost(geom, spatial, True)
    if not spatial:
        acc = 16 * geom.spec.channels * case.height * geom.pitch  # WorkSizes.acc_bytes
        roles["memset"] = Cost(launches=len(run), dram_write=acc * len(run), l1=acc * len(run))
    return roles


def bound_times(cost: Cost, ceilings: Ceilings) -> dict[str, float]:
    """Seconds the cost takes at each ceiling alone: DRAM, FP32, integer, conversion, FP64,
    L1 / shared bytes and instruction issue; the largest is the roofline bound."""
    c = ceilings
    return {
        "dram": cost.dram / c.hbm,
        "fp32": cost.fp32 / c.rate(c.fp32),
        "int": cost.int32 / c.rate(c.int32),
        "conv": cost.conv / c.rate(c.conv),
        "fp64": cost.fp64 / c.rate(c.fp64),
        "l1": (cost.l1 + cost.shared) / c.rate(c.l1_bytes),
        "issue": (cost.ops + cost.memory_ops) / 32 / c.rate(c.issue),
    }


def bound(cost: Cost, ceilings: Ceilings) -> tuple[float, str]:
    """``(seconds, limiter)``: the roofline bound of `cost` and the ceiling that sets it."""
    times = bound_times(cost, ceilings)
    limiter = max(times, key=times.get)
    return times[limiter], limiter


def intensity(cost: Cost) -> float:
    """Arithmetic lane-ops per DRAM byte (the FP32 ridge of the defaults: 7 per byte)."""
    return cost.ops / cost.dram if cost.dram else math.inf
