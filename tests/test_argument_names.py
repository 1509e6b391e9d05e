"""Messages name what the script wrote: unknown arguments, channels in any case, and NLMeans'
KNLMeansCL names (d, a, s, h, channels='YUV', rclip, device_id) after their translation."""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs._params.spec import Param, check_names, vs_signature

from .vsclips import clip_from_planes, frame_planes, random_planes


def make_clip(core, format_id, length=3, seed=0):
    fmt = core.get_video_format(format_id)
    return clip_from_planes(
        core, fmt, [random_planes(fmt, 24, 16, seed + n) for n in range(length)]
    )


def cuda_present() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@pytest.mark.parametrize(
    "function, kwargs, message",
    [
        (
            "Denoise",
            dict(strenght=2.0),
            r"unknown argument 'strenght' \(did you mean 'strength'\?\)$",
        ),
        ("Denoise", dict(radious=1), r"unknown argument 'radious' \(did you mean 'radius'\?\)"),
        ("Denoise", dict(h=2.0), r"unknown argument 'h'; Denoise takes clip, ref, algorithm, "),
        ("NLMeans", dict(strength=2.0), r"unknown argument 'strength'; NLMeans takes clip, d, a,"),
        ("NLMeans", dict(chanels="Y"), r"unknown argument 'chanels' \(did you mean 'channels'\?\)"),
        ("NLMeans", dict(device_type="gpu"), r"unknown argument 'device_type'"),
        ("BM3D", dict(sgima=[3.0]), r"unknown argument 'sgima' \(did you mean 'sigma'\?\)"),
    ],
)
def test_unknown_arguments_are_named(core, function, kwargs, message):
    clip = make_clip(core, vs.YUV420P8)
    with pytest.raises(vs.Error, match=rf"^avdenoise\.{function}: " + message):
        getattr(core.avdenoise, function)(clip, **kwargs)


def test_unknown_arguments_of_any_type_are_named(core):
    """Frames and functions reach the bridge only through the signature's `any`."""
    clip = make_clip(core, vs.YUV420P8)
    for value in (clip.get_frame(0), lambda: 1, [1, 2], "text"):
        with pytest.raises(vs.Error, match=r"^avdenoise\.Denoise: unknown argument 'extra';"):
            core.avdenoise.Denoise(clip, extra=value)


def test_several_unknown_arguments():
    params = (Param("strength", "float", "Strength."), Param("radius", "int", "Radius."))
    with pytest.raises(TypeError) as error:
        check_names("F", params, ["radius", "strenght", "zzz"])
    assert str(error.value) == (
        "avdenoise.F: unknown arguments 'strenght' (did you mean 'strength'?), 'zzz'; "
        "F takes strength, radius"
    )
    check_names("F", params, ["radius"])
    assert vs_signature(params).endswith(";any;")


def test_declared_arguments_keep_vapoursynths_signature(core):
    """The trailing `any` keeps every declared name, type and position."""
    signature = core.avdenoise.NLMeans.signature.replace(":vnode:all", ":vnode")  # GPU clips
    assert signature.startswith("clip:vnode;d:int:opt;a:int:opt;s:int:opt;h:float:opt;")
    assert signature.endswith(";any;")
    clip = make_clip(core, vs.GRAY8)
    positional = core.avdenoise.NLMeans(clip, 0, 1, 1, 9.0)  # KNLMeansCL's order: d, a, s, h
    named = core.avdenoise.NLMeans(clip, d=0, a=1, s=1, h=9.0)
    np.testing.assert_array_equal(
        np.asarray(positional.get_frame(1)[0]), np.asarray(named.get_frame(1)[0])
    )


@pytest.mark.parametrize("written", ["LUMA", "Chroma", "lumaChroma"])
def test_denoise_channels_take_any_case(core, written):
    clip = make_clip(core, vs.YUV420P8)
    got = core.avdenoise.Denoise(clip, channels=written, strength=9.0, device="cpu")
    want = core.avdenoise.Denoise(clip, channels=written.lower(), strength=9.0, device="cpu")
    for g, w in zip(frame_planes(got.get_frame(1)), frame_planes(want.get_frame(1)), strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("written", ["Y", "y", "uv", "Uv", "auto", "AUTO"])
def test_nlmeans_channels_take_any_case(core, written):
    clip = make_clip(core, vs.YUV420P8)
    got = core.avdenoise.NLMeans(clip, channels=written, h=9.0)
    want = core.avdenoise.NLMeans(clip, channels=written.upper(), h=9.0)
    for g, w in zip(frame_planes(got.get_frame(1)), frame_planes(want.get_frame(1)), strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(
    "format_id, function, written, message",
    [
        (vs.YUV420P8, "Denoise", "YUV", r"channels='YUV' needs a 4:4:4 clip"),
        (vs.GRAY8, "Denoise", "Chroma", r"channels='Chroma' needs a YUV clip; GRAY clips take "
         r"'luma' or 'lumachroma'"),
        (vs.RGB24, "Denoise", "Luma", r"channels='Luma' needs a GRAY or YUV clip; RGB clips take "
         r"channels='rgb'"),
        (vs.YUV420P8, "Denoise", "RGB", r"channels='RGB' needs an RGB clip"),
        (vs.YUV420P8, "NLMeans", "YUV", r"channels='YUV' needs a 4:4:4 clip"),
        (vs.YUV420P8, "NLMeans", "Yuv", r"channels='Yuv' needs a 4:4:4 clip"),
        (vs.GRAY8, "NLMeans", "UV", r"channels='UV' needs a YUV clip; GRAY clips take 'Y'$"),
        (vs.RGB24, "NLMeans", "y", r"channels='y' needs a GRAY or YUV clip; RGB clips take "
         r"channels='RGB'"),
        (vs.GRAY8, "NLMeans", "rgb", r"channels='rgb' needs an RGB clip"),
    ],
)  # fmt: skip
def test_channel_messages_repeat_what_was_written(core, format_id, function, written, message):
    clip = make_clip(core, format_id)
    with pytest.raises(vs.Error, match=rf"^avdenoise\.{function}: " + message):
        getattr(core.avdenoise, function)(clip, channels=written)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d=9), r"d must be an integer from 0 to 8, got 9"),
        (dict(a=17), r"a must be an integer from 1 to 16, got 17"),
        (dict(s=-1), r"s must be an integer from 0 to 8, got -1"),
        (dict(h=-3.0), r"h must be a number from 1e-6 to 1e6, got -3.0"),
        (dict(device_id=64), r"device_id must be an integer from 0 to 63, got 64"),
        (dict(channels="YUV"), r"channels='YUV' needs a 4:4:4 clip"),
        (dict(wref=-1.0), r"wref must be a number from 0 to 1e6, got -1.0"),
    ],
)
def test_nlmeans_messages_use_knlmeanscl_names(core, kwargs, message):
    clip = make_clip(core, vs.YUV420P8)
    with pytest.raises(vs.Error, match=r"^avdenoise\.NLMeans: " + message):
        core.avdenoise.NLMeans(clip, **kwargs)


@pytest.mark.parametrize("function", ["NLMeans", "BM3D"])
def test_device_id_is_named_when_it_cannot_run(core, function):
    if cuda_present():
        pytest.skip("a CUDA device is present")
    clip = make_clip(core, vs.YUV444PS)
    with pytest.raises(vs.Error, match=rf"^avdenoise\.{function}: device_id=3 cannot run here "):
        getattr(core.avdenoise, function)(clip, device_id=3)
