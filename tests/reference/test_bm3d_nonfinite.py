"""NaN and infinities in float clips, through BM3D on the CPU backend (the reference).

The rule (docs/PARAMETERS.md, 'What BM3D computes'): a block holding a non-finite sample in
any plane a pass groups takes no part, neither matched nor filtered, and a pixel that no group
reaches keeps its input. So non-finite samples come out unchanged, every other sample is
finite, and far enough from them the output is the one the clip gives with finite samples in
their place: a group can change only if one of its candidates held one (see :func:`_reach`).
"""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from ..vsclips import clip_from_planes, frame_planes, random_planes

WIDTH, HEIGHT, LENGTH = 64, 48, 3
BM_RANGE = 2
#: (plane, y, x) and value of the samples made non-finite, in frame 1.
NAN_AT, INF_AT, NEG_INF_AT = (0, 10, 10), (0, 38, 52), (0, 40, 6)


def _reach(stages: int) -> int:
    """How far (Chebyshev, pixels) one sample's change can move the output.

    One stage: a group whose search window (``BM_RANGE`` around its reference block) holds a
    block over the sample may change, and so may every block of that group, up to
    ``2 BM_RANGE + 7`` pixels away. The Wiener stage matches on the basic estimate, which has
    changed that far: the same reach again from there.
    """
    return stages * (2 * BM_RANGE + 7)


def _frames(fmt, bad: dict):
    """Three frames of `fmt` (a preset), and the same with the samples of `bad` ((plane, y, x)
    -> value) set in frame 1."""
    fmt = vs.core.get_video_format(fmt)
    clean = [random_planes(fmt, WIDTH, HEIGHT, seed) for seed in range(LENGTH)]
    dirty = [[p.copy() for p in frame] for frame in clean]
    for (plane, y, x), value in bad.items():
        dirty[1][plane][y, x] = value
    return clean, dirty


def _render(core, fmt, frames, function: str, **kwargs) -> list[np.ndarray]:
    clip = clip_from_planes(core, core.get_video_format(fmt), frames)
    out = getattr(core.avdenoise, function)(clip, device="cpu", bm_range=BM_RANGE, **kwargs)
    return frame_planes(out.get_frame(1))


def _check_passed_through(out, frames, bad: dict, joint: bool) -> None:
    """Non-finite samples unchanged, and with `joint` the other planes' samples at their
    pixels too; everything else finite."""
    expected_bad = np.zeros((len(out), HEIGHT, WIDTH), dtype=bool)
    for (plane, y, x), value in bad.items():
        got = out[plane][y, x]
        assert np.isnan(got) if np.isnan(value) else got == value, (plane, y, x, got)
        expected_bad[plane, y, x] = True
        for other in range(len(out)) if joint else []:
            np.testing.assert_array_equal(out[other][y, x], frames[1][other][y, x])
    for plane, values in enumerate(out):
        finite = np.isfinite(values)
        assert np.all(finite | expected_bad[plane]), f"plane {plane}: {np.argwhere(~finite)}"


@pytest.mark.parametrize(
    "function, kwargs, stages",
    [
        ("Denoise", dict(algorithm="bm3d", stages=1), 1),
        ("Denoise", dict(algorithm="bm3d"), 2),
        ("Denoise", dict(algorithm="bm3d", block_step=1, stages=1), 1),
        ("BM3D", dict(block_step=3), 1),
    ],
)
def test_gray_nan_and_inf_stay_put_and_spread_nowhere(core, function, kwargs, stages):
    bad = {NAN_AT: np.nan, INF_AT: np.inf}
    clean, dirty = _frames(vs.GRAYS, bad)
    out = _render(core, vs.GRAYS, dirty, function, **kwargs)
    want = _render(core, vs.GRAYS, clean, function, **kwargs)
    _check_passed_through(out, dirty, bad, joint=False)
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    far = np.ones((HEIGHT, WIDTH), dtype=bool)
    for _, y, x in bad:
        far &= np.maximum(abs(yy - y), abs(xx - x)) > _reach(stages)
    assert far.sum() > 200  # the test would prove nothing on an empty region
    np.testing.assert_array_equal(out[0][far], want[0][far])
    assert not np.array_equal(want[0][far], clean[1][0][far])  # it did denoise there


@pytest.mark.parametrize(
    "fmt, function, kwargs, joint",
    [
        (vs.YUV444PS, "Denoise", dict(algorithm="bm3d", channels="yuv"), True),
        (vs.YUV444PS, "BM3D", dict(chroma=True, block_step=4), True),
        (vs.YUV444PS, "Denoise", dict(algorithm="bm3d", radius=1, stages=1), False),
        (vs.RGBS, "Denoise", dict(algorithm="bm3d"), True),
        (vs.RGBS, "BM3D", dict(block_step=4), False),
        (vs.GRAYS, "BM3D", dict(radius=1, block_step=4), False),
    ],
)
def test_planes_grouped_with_a_non_finite_sample_keep_their_input(
    core, fmt, function, kwargs, joint
):
    """Joint passes (CBM3D, RGB in the opponent space) exclude a block that is non-finite in
    any plane, so every plane keeps its input at that pixel; the others only that plane."""
    last = core.get_video_format(fmt).num_planes - 1
    bad = {(last, *NAN_AT[1:]): np.nan, INF_AT: np.inf, (last, *NEG_INF_AT[1:]): -np.inf}
    _, dirty = _frames(fmt, bad)
    out = _render(core, fmt, dirty, function, **kwargs)
    _check_passed_through(out, dirty, bad, joint)


def test_a_non_finite_pilot_keeps_the_clip_s_samples(core):
    """With `ref` the pilot's non-finite samples exclude their blocks as the clip's do; there
    the output is the clip's own (finite) sample."""
    clean, dirty = _frames(vs.GRAYS, {NAN_AT: np.nan})
    gray = core.get_video_format(vs.GRAYS)
    clip, ref = clip_from_planes(core, gray, clean), clip_from_planes(core, gray, dirty)
    out = core.avdenoise.BM3D(clip, ref=ref, device="cpu", bm_range=BM_RANGE, block_step=3)
    plane = frame_planes(out.get_frame(1))[0]
    assert np.all(np.isfinite(plane))
    assert plane[NAN_AT[1:]] == clean[1][0][NAN_AT[1:]]
