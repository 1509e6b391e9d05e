"""vsdenoise.bm3d through avdenoise_vs.vsjetpack: the drop-in's calls, bit for bit on the CPU.

vsjetpack 2.2.6 runs a basic estimate, ``BM3Dv2(clip, pre, sigma, **basic)``, unless `ref` is
given, then `refine` final ones, ``BM3Dv2(clip, previous, sigma, **final)``; each step's
settings are the profile's spatial ones, with its temporal ones over them unless tr=0.
"""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs.vsjetpack import Backend

from .test_vsjetpack import make_clip
from .vsclips import assert_same_frames

vsdenoise = pytest.importorskip("vsdenoise", reason="vsjetpack is not installed")

#: vsjetpack's profiles: per step, (block_step, spatial bm_range, temporal bm_range, radius,
#: ps_range), copied from its source so that a change there shows here.
PROFILES = {
    "fast": {"basic": (8, 9, 7, 1, 4), "final": (7, 9, 7, 1, 5)},
    "lc": {"basic": (6, 9, 9, 2, 4), "final": (5, 9, 9, 2, 5)},
    "np": {"basic": (4, 16, 12, 3, 5), "final": (3, 16, 12, 3, 6)},
    "high": {"basic": (3, 16, 16, 4, 7), "final": (2, 16, 16, 4, 8)},
}

CPU = Backend(device="cpu")


def step_args(profile: str, step: str, tr: int | None) -> dict:
    """The BM3Dv2 settings vsjetpack passes for one step."""
    block_step, spatial_range, temporal_range, radius, ps_range = PROFILES[profile][step]
    if tr == 0:
        return dict(block_step=block_step, bm_range=spatial_range, radius=0)
    radius = radius if tr is None else tr
    return dict(block_step=block_step, bm_range=temporal_range, radius=radius, ps_range=ps_range)


def direct(core, clip, sigma, profile="fast", tr=None, refine=1, pre=None, ref=None, device="cpu"):
    """vsjetpack's bm3d written as drop-in calls on `device`."""
    fmt = clip.format
    chroma = fmt.color_family == vs.YUV and fmt.subsampling_w == fmt.subsampling_h == 0
    basic_tr, final_tr = tr if isinstance(tr, tuple) else (tr, tr)

    def call(guide, step, radius):
        args = step_args(profile, step, radius)
        return core.avdenoise.BM3D(clip, guide, sigma, chroma=chroma, device=device, **args)

    out = ref if ref is not None else call(pre, "basic", basic_tr)
    for _ in range(refine):
        out = call(out, "final", final_tr)
    return out


@pytest.mark.parametrize("profile", ["fast", "lc", "np"])
def test_profiles(core, profile):
    clip = make_clip(core, vs.YUV444PS, length=2, width=40, height=32)
    got = vsdenoise.bm3d(clip, sigma=2.0, profile=vsdenoise.bm3d.Profile(profile), backend=CPU)
    assert_same_frames(got, direct(core, clip, [2.0] * 3, profile))
    changed = np.asarray(got.get_frame(0)[0]) != np.asarray(clip.get_frame(0)[0])
    assert changed.mean() > 0.9  # the comparison is of denoised frames


def test_high_profile_spatial(core):
    clip = make_clip(core, vs.GRAYS, length=2, width=40, height=32)
    high = vsdenoise.bm3d.Profile.HIGH
    got = vsdenoise.bm3d(clip, sigma=2.0, tr=0, profile=high, backend=CPU)
    assert_same_frames(got, direct(core, clip, [2.0], "high", tr=0))


@pytest.mark.parametrize("tr", [0, 1, 2, 3, (1, 0)])
def test_temporal_radius(core, tr):
    clip = make_clip(core, vs.YUV444PS, length=4, width=48, height=32)
    got = vsdenoise.bm3d(clip, sigma=0.8, tr=tr, backend=CPU)
    assert_same_frames(got, direct(core, clip, [0.8] * 3, tr=tr))


@pytest.mark.parametrize("refine", [0, 2])
def test_refine(core, refine):
    clip = make_clip(core, vs.YUV420PS)
    got = vsdenoise.bm3d(clip, sigma=3.0, tr=0, refine=refine, backend=CPU)
    assert_same_frames(got, direct(core, clip, [3.0] * 3, tr=0, refine=refine))


def test_ref_is_the_basic_estimate(core):
    clip, ref = make_clip(core, vs.YUV444PS), make_clip(core, vs.YUV444PS, seed=7)
    lc = vsdenoise.bm3d.Profile.LOW_COMPLEXITY
    got = vsdenoise.bm3d(clip, sigma=[3.0, 1.0], ref=ref, profile=lc, backend=CPU)
    assert_same_frames(got, direct(core, clip, [3.0, 1.0, 1.0], "lc", ref=ref))


def test_pre_guides_the_basic_estimate(core):
    clip, pre = make_clip(core, vs.GRAYS), make_clip(core, vs.GRAYS, seed=7)
    got = vsdenoise.bm3d(clip, sigma=3.0, tr=1, pre=pre, backend=CPU)
    assert_same_frames(got, direct(core, clip, [3.0], tr=1, pre=pre))


@pytest.mark.parametrize(
    "format_id, planes, sigma",
    [
        (vs.YUV420PS, 0, [3.0, 0.0, 0.0]),
        (vs.YUV420PS, [1, 2], [0.0, 3.0, 3.0]),
        (vs.YUV444PS, [0, 2], [3.0, 0.0, 3.0]),  # chroma: luma still leads block matching
        (vs.GRAYS, None, [3.0]),
    ],
)
def test_planes(core, format_id, planes, sigma):
    clip = make_clip(core, format_id)
    got = vsdenoise.bm3d(clip, sigma=3.0, tr=0, planes=planes, backend=CPU)
    assert_same_frames(got, direct(core, clip, sigma, tr=0))


def test_integer_clips_go_through_float(core):
    """vsjetpack takes only 32-bit float clips for this backend; converted, they run."""
    vstools = pytest.importorskip("vstools")
    clip = make_clip(core, vs.YUV420P10)
    with pytest.raises(RuntimeError, match=r"Backend\(device='cpu'\) only supports 32 bit float"):
        vsdenoise.bm3d(clip, sigma=3.0, backend=CPU)
    clip = vstools.depth(clip, 32)
    got = vsdenoise.bm3d(clip, sigma=3.0, tr=0, backend=CPU)
    assert_same_frames(got, direct(core, clip, [3.0] * 3, tr=0))


def test_very_noisy_profile_is_refused_by_name(core):
    clip = make_clip(core, vs.YUV444PS, length=1)
    with pytest.raises(ValueError, match=r"VERY_NOISY profile is only supported with "):
        vsdenoise.bm3d(clip, sigma=3.0, profile=vsdenoise.bm3d.Profile.VERY_NOISY, backend=CPU)


def test_extra_kwargs_reach_the_drop_in(core):
    """bm3d's own kwargs go to every BM3Dv2 call; the drop-in checks them."""
    clip = make_clip(core, vs.GRAYS, length=1)
    got = vsdenoise.bm3d(clip, sigma=3.0, tr=0, refine=0, ps_num=3, backend=CPU)
    want = core.avdenoise.BM3D(clip, sigma=3.0, block_step=8, bm_range=9, ps_num=3, device="cpu")
    assert_same_frames(got, want)
    with pytest.raises(vs.Error, match=r"^avdenoise\.BM3D: bm_range must be "):
        vsdenoise.bm3d(clip, sigma=3.0, tr=0, basic_args=dict(bm_range=0), backend=CPU)
