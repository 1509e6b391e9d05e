"""core.avdenoise.NLMeans: KNLMeansCL's signature over the same filter as Denoise."""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from .vsclips import clip_from_planes, frame_planes, random_planes


def make_clip(core, format_id, length=3, seed=0):
    fmt = core.get_video_format(format_id)
    frames = [random_planes(fmt, 24, 16, seed + n) for n in range(length)]
    return clip_from_planes(core, fmt, frames)


@pytest.mark.parametrize(
    "format_id, knlm, denoise",
    [
        (vs.YUV420P8, dict(), dict(channels="luma")),
        (vs.YUV420P8, dict(channels="uv", h=5.0), dict(channels="chroma", strength=5.0)),
        (
            vs.YUV444P16,
            dict(channels="YUV", d=0, a=3, s=1, wmode=2, wref=0.5),
            dict(channels="yuv", radius=0, search_radius=3, patch_radius=1, wmode=2, wref=0.5),
        ),
        (vs.RGBS, dict(h=8.0), dict(strength=8.0)),
        (vs.GRAY8, dict(channels="Y", d=2), dict(radius=2)),
    ],
)
def test_same_filter_as_denoise(core, format_id, knlm, denoise):
    clip = make_clip(core, format_id)
    ours = core.avdenoise.NLMeans(clip, num_streams=4, **knlm)
    reference = core.avdenoise.Denoise(clip, strength=denoise.pop("strength", 1.2), **denoise)
    for n in range(clip.num_frames):
        got, want = frame_planes(ours.get_frame(n)), frame_planes(reference.get_frame(n))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


def test_auto_channels_leave_chroma_alone(core):
    clip = make_clip(core, vs.YUV420P10)
    out = frame_planes(core.avdenoise.NLMeans(clip, h=20.0).get_frame(1))
    src = frame_planes(clip.get_frame(1))
    assert not np.array_equal(out[0], src[0])
    np.testing.assert_array_equal(out[1], src[1])
    np.testing.assert_array_equal(out[2], src[2])


def test_rclip_is_the_guide(core):
    clip, guide = make_clip(core, vs.GRAY8), make_clip(core, vs.GRAY8, seed=9)
    ours = core.avdenoise.NLMeans(clip, rclip=guide, h=9.0).get_frame(1)
    want = core.avdenoise.Denoise(clip, ref=guide, strength=9.0).get_frame(1)
    np.testing.assert_array_equal(np.asarray(ours[0]), np.asarray(want[0]))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d=-1), r"d must be an integer from 0 to 8, got -1"),
        (dict(a=0), r"a must be an integer from 1 to 16, got 0"),
        (dict(h=0.0), r"h must be a number from 1e-6 to 1e6, got 0.0"),
        (dict(channels="Q"), r"channels must be one of 'AUTO', 'Y', 'UV', 'YUV', 'RGB'"),
        (dict(channels="YUV"), r"channels='YUV' needs a 4:4:4 clip"),
        (dict(num_streams=0), r"num_streams must be an integer from 1 to 64, got 0"),
        (dict(rclip="gray"), r"rclip must have the same format"),
        (dict(device="gpu"), r"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'"),
        (dict(accelerators=["opencl"]), r"accelerators must be a non-empty list"),
        (
            dict(device_id=0, device="cpu"),
            r"device_id and device cannot both be given, "
            r"got device_id=0 and device='cpu'",
        ),
    ],
)
def test_bad_arguments(core, kwargs, message):
    clip = make_clip(core, vs.YUV420P8)
    if kwargs.get("rclip") == "gray":
        kwargs["rclip"] = make_clip(core, vs.GRAY8)
    with pytest.raises(vs.Error, match=r"avdenoise\.NLMeans: " + message):
        core.avdenoise.NLMeans(clip, **kwargs)


@pytest.mark.parametrize("kwargs", [dict(device="cpu"), dict(accelerators=["cpu"])])
def test_device_chooses_the_backend(core, kwargs):
    """device and accelerators as Denoise's (and BM3D's): here the CPU, with Denoise's frames."""
    clip = make_clip(core, vs.YUV420P8)
    frame = core.avdenoise.NLMeans(clip, h=4.0, **kwargs).get_frame(1)
    assert frame.props["AvdenoiseBackend"] == "cpu"
    want = core.avdenoise.Denoise(clip, strength=4.0, channels="luma", device="cpu").get_frame(1)
    for got, expected in zip(frame_planes(frame), frame_planes(want), strict=True):
        np.testing.assert_array_equal(got, expected)
