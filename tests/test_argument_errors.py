"""Every bad input gets a vapoursynth.Error naming the parameter, the value and what is allowed."""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs._plugin.filter import BACKEND_PROPERTY

from .vsclips import frame_planes

BAD_ARGUMENTS = [
    (dict(radius=9), r"radius must be an integer from 0 to 8, got 9"),
    (dict(radius=-1), r"radius must be an integer from 0 to 8, got -1"),
    (dict(algorithm="wiener"), r"algorithm must be one of 'nlm', 'bm3d', got 'wiener'"),
    (dict(channels="y"), r"channels must be one of 'luma', .*got 'y'"),
    (dict(channels="yuv"), r"channels='yuv' needs a 4:4:4 clip"),
    (dict(channels="rgb"), r"channels='rgb' needs an RGB clip"),
    (dict(strength=0.0), r"strength must be a number from 1e-6 to 1e6, got 0.0"),
    (dict(strength=float("nan")), r"strength must be a number from 1e-6 to 1e6, got nan"),
    (dict(luma_strength=-2.0), r"luma_strength must be a number from 1e-6 to 1e6, got -2.0"),
    (dict(chroma_strength=2.0, channels="luma"), r"chroma_strength is not used with channels"),
    (dict(search_radius=0), r"search_radius must be an integer from 1 to 16, got 0"),
    (dict(patch_radius=9), r"patch_radius must be an integer from 0 to 8, got 9"),
    (dict(wmode=4), r"wmode must be an integer from 0 to 3, got 4"),
    (dict(wref=-0.5), r"wref must be a number from 0 to 1e6, got -0.5"),
    (dict(lambda_ht=2.0), r"lambda_ht is not used by algorithm='nlm' \(it applies to 'bm3d'\)"),
    (dict(stages=1), r"stages is not used by algorithm='nlm' \(it applies to 'bm3d'\)"),
    (
        dict(algorithm="bm3d", search_radius=3),
        r"search_radius is not used by algorithm='bm3d' \(it applies to 'nlm'\)",
    ),
    (dict(algorithm="bm3d", wref=0.5), r"wref is not used by algorithm='bm3d'"),
    (
        dict(algorithm="bm3d", lambda_ht=0.0),
        r"lambda_ht must be a number > 0 and at most 1e6, got 0.0",
    ),
    (dict(algorithm="bm3d", luma_lambda_ht=-1.0), r"luma_lambda_ht must be a number > 0"),
    (
        dict(algorithm="bm3d", mismatch_scale=0.0),
        r"mismatch_scale must be a number > 0 and at most 1e6, got 0.0",
    ),
    (
        dict(algorithm="bm3d", chroma_mismatch_scale=float("nan")),
        r"chroma_mismatch_scale must be a number > 0 and at most 1e6, got nan",
    ),
    (dict(algorithm="bm3d", stages=3), r"stages must be an integer from 1 to 2, got 3"),
    (dict(algorithm="bm3d", block_step=0), r"block_step must be an integer from 1 to 8, got 0"),
    (dict(algorithm="bm3d", bm_range=33), r"bm_range must be an integer from 1 to 32, got 33"),
    (dict(algorithm="bm3d", ps_num=9), r"ps_num must be an integer from 1 to 8, got 9"),
    (dict(algorithm="bm3d", ps_range=0), r"ps_range must be an integer from 1 to 16, got 0"),
    (
        dict(algorithm="bm3d", channels="chroma", luma_lambda_ht=2.0),
        r"luma_lambda_ht is not used with channels='chroma' on this clip; set lambda_ht instead",
    ),
    (
        dict(algorithm="bm3d", channels="luma", chroma_mismatch_scale=2.0),
        r"chroma_mismatch_scale is not used with channels='luma'",
    ),
    (dict(device="gpu"), r"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'gpu'"),
    (dict(device="cuda:x"), r"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'cuda:x'"),
    (dict(accelerators=["tpu"]), r"accelerators must be a non-empty list, each item one of"),
    (dict(accelerators=["cpu", "opencl"]), r"accelerators must .*got \['cpu', 'opencl'\]"),
]


@pytest.mark.parametrize("kwargs, message", BAD_ARGUMENTS, ids=lambda v: str(v)[:40])
def test_bad_argument(core, kwargs, message):
    clip = core.std.BlankClip(width=32, height=24, format=vs.YUV420P8, length=3)
    with pytest.raises(vs.Error, match=r"avdenoise\.Denoise: " + message):
        core.avdenoise.Denoise(clip, **kwargs)


@pytest.mark.parametrize(
    "fmt, problem",
    [
        (vs.YUV410P8, r"YUV subsampling \(2, 2\)"),
        (vs.YUV411P8, r"YUV subsampling \(2, 0\)"),
        (vs.YUV440P8, r"YUV subsampling \(0, 1\)"),
        (vs.GRAYH, r"16-bit float samples"),
        (vs.GRAY32, r"32-bit integer samples"),
    ],
)
def test_unsupported_format(core, fmt, problem):
    clip = core.std.BlankClip(width=32, height=24, format=fmt, length=3)
    with pytest.raises(
        vs.Error, match=r"clip must be GRAY, YUV 4:2:0 / 4:2:2 / 4:4:4 or RGB.*got " + problem
    ):
        core.avdenoise.Denoise(clip)


def test_variable_format_and_size(core):
    a = core.std.BlankClip(width=32, height=24, format=vs.YUV420P8, length=2)
    b = core.std.BlankClip(width=48, height=24, format=vs.YUV444P8, length=2)
    with pytest.raises(vs.Error, match="got a variable format or size"):
        core.avdenoise.Denoise(core.std.Splice([a, b], mismatch=True))


@pytest.mark.parametrize("channels", ["chroma", "yuv", "rgb"])
def test_gray_takes_luma_only(core, channels):
    clip = core.std.BlankClip(width=32, height=24, format=vs.GRAY8, length=3)
    with pytest.raises(vs.Error, match=f"channels='{channels}' needs"):
        core.avdenoise.Denoise(clip, channels=channels)


@pytest.mark.parametrize("channels", ["luma", "chroma", "lumachroma", "yuv"])
def test_rgb_takes_rgb_only(core, channels):
    clip = core.std.BlankClip(width=32, height=24, format=vs.RGB24, length=3)
    with pytest.raises(vs.Error, match=f"channels='{channels}' needs a GRAY or YUV clip"):
        core.avdenoise.Denoise(clip, channels=channels)


@pytest.mark.parametrize(
    "ref_args",
    [dict(format=vs.YUV420P10), dict(width=48), dict(length=5), dict(format=vs.YUV444P8)],
)
def test_ref_must_match_the_clip(core, ref_args):
    clip = core.std.BlankClip(width=32, height=24, format=vs.YUV420P8, length=3)
    ref = core.std.BlankClip(
        **{**dict(width=32, height=24, format=vs.YUV420P8, length=3), **ref_args}
    )
    with pytest.raises(vs.Error, match="ref must have the same format, size and length as clip"):
        core.avdenoise.Denoise(clip, ref=ref)


def test_unavailable_device_says_why(core):
    clip = core.std.BlankClip(width=32, height=24, format=vs.YUV420P8, length=3)
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            pytest.skip("a CUDA device is present")
    except Exception:
        pass
    with pytest.raises(vs.Error, match=r"device='cuda' cannot run here \(cuda: "):
        core.avdenoise.Denoise(clip, device="cuda")
    with pytest.raises(vs.Error, match=r"device='auto' cannot run here"):
        core.avdenoise.Denoise(clip, accelerators=["cuda"])


def test_frame_errors_do_not_crash_the_host(core, monkeypatch):
    """An exception while denoising a frame becomes that frame's error; the process lives on."""
    from avdenoise_vs._backends.reference import NumpyBackend

    def broken(self, *args):
        raise RuntimeError("simulated backend failure")

    clip = core.std.BlankClip(width=32, height=24, format=vs.YUV420P8, length=3)
    out = core.avdenoise.Denoise(clip, device="cpu")
    monkeypatch.setattr(NumpyBackend, "process", broken)
    failing = core.avdenoise.Denoise(clip, device="cpu")
    with pytest.raises(vs.Error, match="simulated backend failure"):
        failing.get_frame(0)
    monkeypatch.undo()
    # The filter made before the failure still works: a flat clip comes out unchanged.
    got, source = frame_planes(out.get_frame(1)), frame_planes(clip.get_frame(1))
    assert all(np.array_equal(g, s) for g, s in zip(got, source, strict=True))


def test_bm3d_needs_planes_of_one_block(core):
    clip = core.std.BlankClip(width=32, height=12, format=vs.YUV420P8, length=3)
    with pytest.raises(
        vs.Error,
        match=r"algorithm='bm3d' needs planes of at least 8x8 pixels, "
        r"got 16x6 \(plane 2\)",
    ):
        core.avdenoise.Denoise(clip, algorithm="bm3d")
    core.avdenoise.Denoise(clip, algorithm="bm3d", channels="luma")  # luma is 32x12


def test_bm3d_without_cuda_names_the_reason(core):
    """Without CuPy, device='cuda' says why and device='auto' falls back to the CPU."""
    try:
        import cupy  # noqa: F401
    except Exception:
        pass
    else:
        pytest.skip("CuPy is installed: the CUDA backend may run")
    clip = core.std.BlankClip(width=32, height=24, format=vs.YUV420P8, length=3)
    with pytest.raises(
        vs.Error,
        match=r"device='cuda' cannot run here "
        r"\(cuda: CuPy cannot be imported",
    ):
        core.avdenoise.Denoise(clip, algorithm="bm3d", device="cuda")
    frame = core.avdenoise.Denoise(clip, algorithm="bm3d").get_frame(0)
    assert frame.props[BACKEND_PROPERTY] == "cpu"
