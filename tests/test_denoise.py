"""core.avdenoise.Denoise through VapourSynth, on the CPU backend: plumbing and guarantees."""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs._nlm.maths import temporal_radius_at
from avdenoise_vs._nlm.reference import nlm
from avdenoise_vs._params.options import Distance, WeightMode
from avdenoise_vs.sample import psnr

from .vsclips import (
    FORMATS,
    assert_order_independent,
    clip_from_planes,
    frame_planes,
    random_planes,
)

WIDTH, HEIGHT, LENGTH = 24, 16, 4
#: channels value -> (plane groups, distance) the filter must run for each colour family.
EXPECTED_PASSES = {
    vs.GRAY: [((0,), Distance.LUMA)],
    vs.YUV: [((0,), Distance.LUMA), ((1, 2), Distance.CHROMA)],
    vs.RGB: [((0, 1, 2), Distance.RGB)],
}


def make_clip(core, fmt, length=LENGTH, seed=0, **props):
    frames = [random_planes(fmt, WIDTH, HEIGHT, seed + n) for n in range(length)]
    return clip_from_planes(core, fmt, frames, **props), frames


def expected_frame(fmt, frames, n, radius, strength, planes_distance, a=2, s=1):
    """What Denoise must output for frame n: the reference maths on KNLMeansCL's window."""
    peak = 1.0 if fmt.sample_type == vs.FLOAT else (1 << fmt.bits_per_sample) - 1
    radius = temporal_radius_at(n, radius)
    numbers = [min(n + t, len(frames) - 1) for t in range(-radius, radius + 1)]
    out = [p.copy() for p in frames[n]]
    for planes, distance in planes_distance:
        # float64 before the division: NumPy 1.x keeps float32 / np.float64(...) in float32.
        window = [
            np.stack([frames[m][p].astype(np.float64) / peak for p in planes]) for m in numbers
        ]
        result = nlm(
            window,
            center=radius,
            h=strength,
            search_radius=a,
            patch_radius=s,
            wmode=WeightMode.WELSCH,
            wref=1.0,
            distance=distance,
        )
        for i, p in enumerate(planes):
            out[p] = result[i] if fmt.sample_type == vs.FLOAT else np.rint(result[i] * peak)
    return out


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_matches_the_reference(core, name):
    fmt = core.get_video_format(FORMATS[name])
    clip, frames = make_clip(core, fmt)
    out = core.avdenoise.Denoise(clip, strength=20.0, search_radius=2, patch_radius=1, device="cpu")
    assert (out.format.id, out.width, out.height, out.num_frames) == (
        clip.format.id,
        clip.width,
        clip.height,
        clip.num_frames,
    )
    for n in (0, 2, LENGTH - 1):  # the clip's ends shorten or repeat the temporal window
        got = frame_planes(out.get_frame(n))
        want = expected_frame(fmt, frames, n, 1, 20.0, EXPECTED_PASSES[fmt.color_family])
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.astype(np.float64), w, atol=1e-6 if fmt.sample_type else 0)


def test_joint_yuv_on_444_matches_the_reference(core):
    fmt = core.get_video_format(vs.YUV444P8)
    clip, frames = make_clip(core, fmt)
    out = core.avdenoise.Denoise(
        clip, channels="yuv", radius=0, strength=15.0, search_radius=2, patch_radius=1, device="cpu"
    )
    want = expected_frame(fmt, frames, 1, 0, 15.0, [((0, 1, 2), Distance.YUV)])
    for g, w in zip(frame_planes(out.get_frame(1)), want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_properties_are_kept(core):
    fmt = core.get_video_format(vs.YUV420P8)
    clip, _ = make_clip(core, fmt, _Matrix=1, MyProp=42, _SceneChangeNext=1)
    frame = core.avdenoise.Denoise(clip, device="cpu").get_frame(1)
    assert frame.props["MyProp"] == 42
    assert frame.props["_Matrix"] == 1
    assert frame.props["_SceneChangeNext"] == 1


@pytest.mark.parametrize("channels, untouched", [("luma", (1, 2)), ("chroma", (0,))])
def test_planes_not_processed_are_bit_identical(core, channels, untouched):
    fmt = core.get_video_format(vs.YUV420P10)
    clip, frames = make_clip(core, fmt)
    out = core.avdenoise.Denoise(clip, channels=channels, strength=30.0, device="cpu")
    got = frame_planes(out.get_frame(2))
    for plane in untouched:
        np.testing.assert_array_equal(got[plane], frames[2][plane])
    processed = [p for p in range(3) if p not in untouched]
    assert any(not np.array_equal(got[p], frames[2][p]) for p in processed)


def test_request_order_does_not_change_the_output(core):
    fmt = core.get_video_format(vs.YUV420P8)
    clip, _ = make_clip(core, fmt, length=8)
    assert_order_independent(lambda: core.avdenoise.Denoise(clip, radius=2, device="cpu"), 8)


def test_ref_gives_weights_and_clip_gives_values(core):
    fmt = core.get_video_format(vs.GRAY16)
    clip, frames = make_clip(core, fmt)
    guide, guides = make_clip(core, fmt, seed=50)
    out = core.avdenoise.Denoise(
        clip, ref=guide, strength=25.0, search_radius=2, patch_radius=1, radius=0, device="cpu"
    )
    peak = 65535.0
    want = nlm(
        [frames[1][0][None] / peak],
        guide=[guides[1][0][None] / peak],
        center=0,
        h=25.0,
        search_radius=2,
        patch_radius=1,
        wmode=WeightMode.WELSCH,
        wref=1.0,
        distance=Distance.LUMA,
    )[0]
    np.testing.assert_array_equal(np.asarray(out.get_frame(1)[0]), np.rint(want * peak))
    same = core.avdenoise.Denoise(clip, ref=clip, strength=25.0, device="cpu").get_frame(1)
    plain = core.avdenoise.Denoise(clip, strength=25.0, device="cpu").get_frame(1)
    np.testing.assert_array_equal(np.asarray(same[0]), np.asarray(plain[0]))


def test_tiny_strength_returns_the_input(core):
    fmt = core.get_video_format(vs.GRAYS)
    clip, frames = make_clip(core, fmt)
    out = np.asarray(core.avdenoise.Denoise(clip, strength=1e-5, device="cpu").get_frame(1)[0])
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, frames[1][0], atol=1e-6)


def test_denoising_a_real_picture_raises_psnr(core):
    skimage = pytest.importorskip("skimage")
    clean = skimage.data.camera()[128:320, 96:352]
    rng = np.random.default_rng(1)
    frames = [
        [np.clip(np.rint(clean + rng.normal(0, 8, clean.shape)), 0, 255).astype(np.uint8)]
        for _ in range(3)
    ]
    clip = clip_from_planes(core, core.get_video_format(vs.GRAY8), frames)
    out = np.asarray(core.avdenoise.Denoise(clip, strength=3.0, device="cpu").get_frame(1)[0])
    before, after = psnr(frames[1][0], clean, 255), psnr(out, clean, 255)
    assert after > before + 3.0, (before, after)


def test_thread_local_state_lives_across_frames(core, monkeypatch):
    """Each VapourSynth worker thread keeps one Python thread state (see bridge.c take_gil).

    Backends keep per-thread streams and buffers in ``threading.local``; were the thread
    state created and destroyed around every frame, they would be rebuilt every frame.
    """
    import threading

    from avdenoise_vs._backends.reference import NumpyBackend

    local, fresh = threading.local(), []
    original = NumpyBackend.process

    def process(self, *args):
        if not hasattr(local, "seen"):
            local.seen = True
            fresh.append(threading.get_ident())
        return original(self, *args)

    monkeypatch.setattr(NumpyBackend, "process", process)
    clip = core.std.BlankClip(width=32, height=24, format=vs.GRAY8, length=60)
    out = core.avdenoise.Denoise(clip, radius=0, device="cpu")
    for future in [out.get_frame_async(n) for n in range(60)]:
        future.result()
    assert 1 <= len(fresh) <= core.num_threads


def test_non_finite_samples_pass_through_and_do_not_spread(core):
    """NaN and inf samples come out as they went in; every other sample is finite, and
    pixels further than search_radius + patch_radius from them are as without them."""
    fmt = core.get_video_format(vs.GRAYS)
    frames = [random_planes(fmt, 40, 32, seed) for seed in range(3)]
    poisoned = [[p.copy() for p in frame] for frame in frames]
    spots = {0: (5, 30), 1: (16, 12), 2: (31, 0)}
    for n, value in zip(spots, (np.inf, np.nan, -np.inf), strict=True):
        poisoned[n][0][spots[n]] = value
    kwargs = dict(radius=1, search_radius=2, patch_radius=2, strength=4.0, device="cpu")
    clean = core.avdenoise.Denoise(clip_from_planes(core, fmt, frames), **kwargs)
    dirty = core.avdenoise.Denoise(clip_from_planes(core, fmt, poisoned), **kwargs)
    reach = 2 + 2
    for n in range(3):
        got, want = frame_planes(dirty.get_frame(n))[0], frame_planes(clean.get_frame(n))[0]
        expected_bad = np.zeros(got.shape, bool)
        expected_bad[spots[n]] = True
        np.testing.assert_array_equal(~np.isfinite(got), expected_bad)
        assert np.array_equal(got[spots[n]], poisoned[n][0][spots[n]], equal_nan=True)
        far = np.ones(got.shape, bool)
        for y, x in spots.values():  # any window frame's spot reaches this frame's pixels
            far[max(y - reach, 0) : y + reach + 1, max(x - reach, 0) : x + reach + 1] = False
        np.testing.assert_allclose(got[far], want[far], rtol=0, atol=1e-6)
