"""core.avdenoise.Denoise(algorithm="bm3d") on the CPU backend: the reference maths, end to end."""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs._bm3d.reference.vbm3d import FrameList, vbm3d
from avdenoise_vs.sample import psnr

from .vsclips import clip_from_planes, frame_planes, random_planes

WIDTH, HEIGHT, LENGTH = 40, 32, 3
#: CBM3D's opponent colour transform, written out here independently of the backend; white RGB
#: noise of deviation sigma has deviation sigma * (its rows' lengths) in the OPP channels.
OPP = np.array([[1 / 3, 1 / 3, 1 / 3], [1 / 2, 0, -1 / 2], [1 / 4, -1 / 2, 1 / 4]])
OPP_SIGMA = np.sqrt([1 / 3, 1 / 2, 3 / 8])


def make_clip(core, fmt, seed=0):
    frames = [random_planes(fmt, WIDTH, HEIGHT, seed + n) for n in range(LENGTH)]
    return clip_from_planes(core, fmt, frames), frames


def expected_frame(fmt, frames, n, radius, groups, sigma, stages=2, ref_frames=None):
    """What Denoise must output for frame n: the clip-level reference (V-BM3D), 8-bit scale.

    `groups` lists (planes, joint, opp) per pass. With `ref_frames`, the Wiener stage alone,
    piloted by them.
    """
    peak = 1.0 if fmt.sample_type == vs.FLOAT else (1 << fmt.bits_per_sample) - 1
    out = [p.copy() for p in frames[n]]
    for planes, joint, opp in groups:

        def clip(source, planes=planes, opp=opp):
            stacked = [
                np.stack([f[p].astype(np.float64) for p in planes]) * 255 / peak for f in source
            ]
            return FrameList(
                [np.einsum("ij,jhw->ihw", OPP, w) for w in stacked] if opp else stacked
            )

        pilot = None if ref_frames is None else clip(ref_frames)
        sigmas = tuple(sigma * OPP_SIGMA) if opp else sigma
        result = vbm3d(
            clip(frames), n, sigmas, radius=radius, stages=stages, pilot=pilot, joint=joint
        )
        if opp:
            result = np.einsum("ij,jhw->ihw", np.linalg.inv(OPP), result)
        for i, p in enumerate(planes):
            value = result[i] / 255
            out[p] = (
                value if fmt.sample_type == vs.FLOAT else np.clip(np.rint(value * peak), 0, peak)
            )
    return out


CASES = {
    # name: (format, channels, radius, stages, passes as (planes, joint, opp))
    "GRAY8-luma-r1": (vs.GRAY8, "luma", 1, 2, [((0,), False, False)]),
    "YUV420P10-lumachroma-r0": (
        vs.YUV420P10,
        "lumachroma",
        0,
        2,
        [((0,), False, False), ((1, 2), False, False)],
    ),
    "YUV444PS-yuv-r1-s1": (vs.YUV444PS, "yuv", 1, 1, [((0, 1, 2), True, False)]),
    "RGB24-rgb-r0": (vs.RGB24, "rgb", 0, 2, [((0, 1, 2), True, True)]),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_the_reference(core, name):
    fmt_id, channels, radius, stages, groups = CASES[name]
    fmt = core.get_video_format(fmt_id)
    clip, frames = make_clip(core, fmt)
    out = core.avdenoise.Denoise(
        clip,
        algorithm="bm3d",
        channels=channels,
        radius=radius,
        stages=stages,
        strength=12.0,
        device="cpu",
    )
    assert (out.format.id, out.width, out.height, out.num_frames) == (
        clip.format.id,
        clip.width,
        clip.height,
        clip.num_frames,
    )
    for n in (0, 1) if radius else (1,):  # frame 0 clamps the temporal window
        got = frame_planes(out.get_frame(n))
        want = expected_frame(fmt, frames, n, radius, groups, 12.0, stages)
        for g, w in zip(got, want, strict=True):
            if fmt.sample_type == vs.FLOAT:
                np.testing.assert_allclose(g, w, atol=1e-5)
            else:
                # The OPP round trip may differ from ours in the last bit of a float64.
                assert np.max(np.abs(g.astype(np.int64) - w)) <= (1 if channels == "rgb" else 0)
        assert any(not np.array_equal(g, f) for g, f in zip(got, frames[n], strict=True))


def test_one_stage_is_the_basic_estimate_alone(core):
    fmt = core.get_video_format(vs.GRAY8)
    clip, frames = make_clip(core, fmt)
    one = core.avdenoise.Denoise(
        clip, algorithm="bm3d", stages=1, radius=0, strength=12.0, device="cpu"
    )
    two = core.avdenoise.Denoise(
        clip, algorithm="bm3d", stages=2, radius=0, strength=12.0, device="cpu"
    )
    basic = np.asarray(one.get_frame(1)[0])
    np.testing.assert_array_equal(
        basic, expected_frame(fmt, frames, 1, 0, [((0,), False, False)], 12.0, stages=1)[0]
    )
    assert not np.array_equal(basic, np.asarray(two.get_frame(1)[0]))


@pytest.mark.parametrize("channels, untouched", [("luma", (1, 2)), ("chroma", (0,))])
def test_planes_not_processed_are_bit_identical(core, channels, untouched):
    fmt = core.get_video_format(vs.YUV420P8)
    clip, frames = make_clip(core, fmt)
    out = core.avdenoise.Denoise(
        clip, algorithm="bm3d", channels=channels, radius=0, stages=1, strength=20.0, device="cpu"
    )
    got = frame_planes(out.get_frame(1))
    for plane in untouched:
        np.testing.assert_array_equal(got[plane], frames[1][plane])
    assert all(not np.array_equal(got[p], frames[1][p]) for p in range(3) if p not in untouched)


def test_per_pass_overrides_reach_their_pass_only(core):
    fmt = core.get_video_format(vs.YUV420P8)
    clip, _ = make_clip(core, fmt)
    common = dict(algorithm="bm3d", radius=0, stages=1, strength=10.0, device="cpu")
    base = frame_planes(core.avdenoise.Denoise(clip, **common).get_frame(1))
    for override, changed in [
        (dict(luma_lambda_ht=4.0), (0,)),
        (dict(chroma_strength=30.0), (1, 2)),
        (dict(chroma_mismatch_scale=0.1), (1, 2)),
    ]:
        got = frame_planes(core.avdenoise.Denoise(clip, **common, **override).get_frame(1))
        for p in range(3):
            assert np.array_equal(got[p], base[p]) != (p in changed), (override, p)


@pytest.mark.parametrize(
    "fmt_id, channels, groups",
    [
        (vs.GRAY16, "luma", [((0,), False, False)]),
        (vs.RGBS, "rgb", [((0, 1, 2), True, True)]),
    ],
)
def test_ref_pilots_the_wiener_stage_alone(core, fmt_id, channels, groups):
    """ref is the basic estimate: same scaling and colour transform as the clip."""
    fmt = core.get_video_format(fmt_id)
    clip, frames = make_clip(core, fmt)
    basic, pilots = make_clip(core, fmt, seed=10)
    out = core.avdenoise.Denoise(
        clip, ref=basic, algorithm="bm3d", channels=channels, radius=1, strength=12.0, device="cpu"
    )
    for n in (0, 1):
        got = frame_planes(out.get_frame(n))
        want = expected_frame(fmt, frames, n, 1, groups, 12.0, ref_frames=pilots)
        for g, w in zip(got, want, strict=True):
            if fmt.sample_type == vs.FLOAT:
                np.testing.assert_allclose(g, w, atol=1e-5)
            else:
                np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(stages=1), r"stages=1 cannot take ref \(ref is the pilot of the Wiener stage"),
        (dict(lambda_ht=3.0), r"lambda_ht is not used with ref \(only the Wiener stage runs\)"),
        (dict(chroma_lambda_ht=3.0), r"chroma_lambda_ht is not used with ref"),
    ],
)
def test_ref_skips_the_hard_thresholding_stage(core, kwargs, message):
    clip, _ = make_clip(core, core.get_video_format(vs.YUV420P8))
    with pytest.raises(vs.Error, match=r"avdenoise\.Denoise: " + message):
        core.avdenoise.Denoise(clip, ref=clip, algorithm="bm3d", **kwargs)


def test_denoising_a_real_picture_raises_psnr(core):
    skimage = pytest.importorskip("skimage")
    clean = skimage.data.camera()[160:256, 160:288].astype(np.float64)
    noisy = clean + np.random.default_rng(1).normal(0, 10, clean.shape)
    frames = [[np.clip(np.rint(noisy), 0, 255).astype(np.uint8)]]
    clip = clip_from_planes(core, core.get_video_format(vs.GRAY8), frames)
    out = core.avdenoise.Denoise(clip, algorithm="bm3d", radius=0, strength=10.0, device="cpu")
    denoised = np.asarray(out.get_frame(0)[0])
    before, after = psnr(frames[0][0], clean, 255), psnr(denoised, clean, 255)
    # Measured: 28.5 -> 34.7 dB.
    assert after > before + 5.0, (before, after)
