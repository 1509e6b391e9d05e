"""NaN and infinities in float clips: the CUDA BM3D kernels follow the NumPy oracle's rule.

A block holding a non-finite sample in any plane a pass groups takes no part, and a pixel that
no group reaches keeps its input (``_reference/_bm3d_stages.estimate``). The GPU must put the
non-finite samples back exactly where the oracle does, keep every other sample finite, agree
with the oracle elsewhere within the parity limits of test_bm3d_cuda.py, and, far from the
non-finite samples, give the very bytes it gives for the same clip without them.

Skipped without CuPy or without a CUDA device.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from ._gpu import require_cuda

require_cuda()

from avdenoise_vs._backends.cuda.backend import CudaBackend  # noqa: E402
from avdenoise_vs._backends.reference import NumpyBackend  # noqa: E402
from avdenoise_vs._params.options import Distance  # noqa: E402
from avdenoise_vs._params.settings import Stages  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

from _clips import SyntheticClip, layout, plane_values, run  # noqa: E402

from .test_bm3d_cuda import MEAN_CODES, NOISE, bm3d_options  # noqa: E402

pytestmark = pytest.mark.gpu

__all__: list[str] = []

BM_RANGE, PS_RANGE = 3, 3  # bm3d_options' ps_range
WIDTH, HEIGHT = 128, 112
#: (frame, plane, y, x) -> value of the samples made non-finite.
BAD = {(1, 0, 9, 11): np.nan, (1, 0, 30, 40): np.inf, (2, 0, 20, 6): -np.inf}


def _clip(fmt, bad: dict, seed: int = 3) -> SyntheticClip:
    """The synthetic clip of test_bm3d_cuda.py with the samples of `bad` set."""
    clip = SyntheticClip(fmt, 4, seed=seed, noise=NOISE)
    for (n, plane, y, x), value in bad.items():
        plane_values(clip.frames[n][plane], fmt.plane_shape(plane))[y, x] = value
    return clip


def _kinds(values: np.ndarray) -> np.ndarray:
    """0 finite, 1 NaN, 2 +inf, 3 -inf."""
    return np.select([np.isnan(values), values == np.inf, values == -np.inf], [1, 2, 3], 0)


def _reach(options) -> int:
    """How far (Chebyshev, pixels) a changed sample can move the output: a group whose search
    holds a block over it may change, and so may all of that group's blocks; candidates lie
    up to bm_range + r ps_range from their reference block. The Wiener stage of two stages
    matches on the basic estimate, changed that far: as far again."""
    one = 2 * (BM_RANGE + options.radius * PS_RANGE) + 7
    return one * (2 if options.stages is Stages.BOTH else 1)


def _compare(fmt, passes, bad: dict, *, ref_bad: dict | None = None, frames=(1, 2)):
    """Both backends on a clip with `bad` (and a ref clip with `ref_bad`): the oracle's rule."""
    clips = [_clip(fmt, bad)] + ([_clip(fmt, ref_bad, seed=4)] if ref_bad is not None else [])
    clean = [_clip(fmt, {})] + ([_clip(fmt, {}, seed=4)] if ref_bad is not None else [])
    radius = passes[0].window_radius
    planes = sorted({p for o in passes for p in o.planes})
    # Separate backends: V-BM3D keeps each frame's sums, which must not mix the two clips.
    cuda, plain_cuda = (CudaBackend(passes, fmt, device_index=None) for _ in range(2))
    cpu = NumpyBackend(passes, fmt)
    reach = max(_reach(o) for o in passes)
    near = np.zeros(fmt.plane_shape(0), dtype=bool)
    for _, _, y, x in [*bad, *(ref_bad or {})]:
        near[max(y - reach, 0) : y + reach + 1, max(x - reach, 0) : x + reach + 1] = True
    assert (~near).sum() > 1000, "the far region is (nearly) empty: it would prove nothing"
    for n in frames:
        got = run(cuda, clips, n, radius, planes)
        want = run(cpu, clips, n, radius, planes)
        plain = run(plain_cuda, clean, n, radius, planes)
        kept = _kept(fmt, passes, clips[0], n)
        for p in planes:
            kinds = _kinds(got[p])
            np.testing.assert_array_equal(kinds, _kinds(want[p]), err_msg=f"frame {n} plane {p}")
            source = plane_values(clips[0].frames[n][p], fmt.plane_shape(p))
            np.testing.assert_array_equal(got[p][kept[p]], source[kept[p]])
            finite = kinds == 0
            mean = np.mean(np.abs(got[p][finite] * 1.0 - want[p][finite])) * 255
            assert mean <= MEAN_CODES, f"frame {n} plane {p}: mean |cuda - oracle| {mean:.4f}"
            np.testing.assert_array_equal(got[p][~near], plain[p][~near])


def _kept(fmt, passes, clip: SyntheticClip, n: int) -> dict:
    """Samples of frame n that must come out as they went in: the non-finite ones and, in
    joint passes, the other planes' samples at their pixels."""
    values = {p: plane_values(clip.frames[n][p], fmt.plane_shape(p)) for p in range(fmt.num_planes)}
    kept = {}
    for options in passes:
        joint = options.distance in (Distance.YUV, Distance.RGB)
        bad = [~np.isfinite(values[p]) for p in options.planes]
        for p, own in zip(options.planes, bad, strict=True):
            kept[p] = np.logical_or.reduce(bad) if joint else own
    return kept


def _gray(**kwargs):
    return (bm3d_options((0,), Distance.LUMA, bm_range=BM_RANGE, **kwargs),)


def _float(family: str):
    return layout(family, bits=32, width=WIDTH, height=HEIGHT)


@pytest.mark.parametrize("stages", [1, 2])
@pytest.mark.parametrize("radius", [0, 1])
def test_gray(stages, radius):
    fmt = _float("gray")
    _compare(fmt, _gray(radius=radius, stages=stages), BAD)


def test_gray_block_step_1():
    """Every block a reference block: a pixel is reached unless every block over it is bad."""
    fmt = _float("gray")
    _compare(fmt, _gray(stages=2, step=1), BAD)


@pytest.mark.parametrize("radius", [0, 2])
def test_non_finite_ref_clip(radius):
    """The ref clip (the Wiener pilot) excludes its own non-finite blocks and the clip's."""
    fmt = _float("gray")
    ref_bad = {(1, 0, 12, 60): np.nan, (2, 0, 34, 24): np.inf}
    _compare(fmt, _gray(radius=radius, ref=True), BAD, ref_bad=ref_bad)


@pytest.mark.parametrize("radius", [0, 1])
def test_yuv444_joint(radius):
    """CBM3D: a NaN in one chroma plane excludes the block in every plane."""
    fmt = _float("yuv")
    bad = {(1, 2, 9, 11): np.nan, (1, 0, 30, 40): np.inf, (2, 1, 20, 6): -np.inf}
    passes = (bm3d_options((0, 1, 2), Distance.YUV, radius=radius, bm_range=BM_RANGE),)
    _compare(fmt, passes, bad)


def test_yuv444_separate_chroma():
    """Chroma planes filtered each on its own: a NaN in U leaves V's blocks in."""
    fmt = _float("yuv")
    bad = {(1, 1, 9, 11): np.nan, (1, 2, 30, 40): np.inf, (2, 0, 20, 6): -np.inf}
    passes = (bm3d_options((0,), Distance.LUMA, radius=1, bm_range=BM_RANGE),
              bm3d_options((1, 2), Distance.CHROMA, radius=1, bm_range=BM_RANGE))  # fmt: skip
    _compare(fmt, passes, bad)


@pytest.mark.parametrize("stages", [1, 2])
def test_rgb_opp(stages):
    """RGB in the opponent space: a non-finite R, G or B reaches all three OPP channels, and the
    other two planes at that pixel come out as they went in, not through OPP and back."""
    fmt = _float("rgb")
    bad = {(1, 1, 9, 11): np.nan, (1, 0, 30, 40): np.inf, (2, 2, 20, 6): -np.inf}
    passes = (bm3d_options((0, 1, 2), Distance.RGB, stages=stages, bm_range=BM_RANGE),)
    _compare(fmt, passes, bad)
