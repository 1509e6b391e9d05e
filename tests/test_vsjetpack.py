"""avdenoise_vs.vsjetpack: the backend object, and vsdenoise.nl_means through it.

Each output is compared with the drop-in called directly with the arguments vsjetpack 2.2.6
passes (written out here, not taken from vsjetpack), on the CPU, bit for bit.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs.vsjetpack import Backend, backend

from .vsclips import assert_same_frames, clip_from_planes, frame_planes, random_planes

#: KNLMeansCL's arguments that nl_means passes by default (h=1.2, tr=1, a=2, s=4, WELSCH).
NLM_DEFAULTS = dict(h=1.2, d=1, a=2, s=4, wmode=0)


def make_clip(core, format_id, length=3, seed=0, width=64, height=48):
    fmt = core.get_video_format(format_id)
    frames = [random_planes(fmt, width, height, seed + n) for n in range(length)]
    return clip_from_planes(core, fmt, frames)


@pytest.fixture
def vsdenoise():
    return pytest.importorskip("vsdenoise", reason="vsjetpack is not installed")


@pytest.fixture
def cpu():
    return Backend(device="cpu")


def nlm(core, clip, device="cpu", **kwargs):
    """The drop-in on `device` with nl_means's defaults, `kwargs` overriding them."""
    return core.avdenoise.NLMeans(clip, **(NLM_DEFAULTS | kwargs), device=device)


def test_module_imports_without_vsjetpack():
    """vsjetpack is not imported by the module (it is an optional extra)."""
    code = (
        "import sys; import avdenoise_vs.vsjetpack as m; "
        "assert not [n for n in sys.modules if n.split('.')[0] in ('vsdenoise', 'vstools', "
        "'vsjetpack', 'jetpytools')], sorted(sys.modules); print(m.backend)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "avdenoise_vs.vsjetpack.Backend(device='auto')"


def test_backends_and_their_devices():
    assert backend.device == "auto"
    assert Backend("CUDA:1").device == "cuda:1"  # Denoise's spelling, whatever the case
    assert (
        repr(Backend("cpu"))
        == str(Backend("cpu"))
        == "avdenoise_vs.vsjetpack.Backend(device='cpu')"
    )
    assert backend.resolve() is backend and backend.plugin is backend


@pytest.mark.parametrize(
    "device, error, message",
    [
        ("gpu", ValueError, r"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'.*, got 'gpu'$"),
        (0, TypeError, r"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'.*, got 0$"),
    ],
)
def test_bad_device_is_named(device, error, message):
    with pytest.raises(error, match=r"^avdenoise\.vsjetpack\.Backend: " + message):
        Backend(device)


def test_bm3dv2_signature_is_the_drop_ins():
    """vsjetpack keeps the profile settings that BM3Dv2's __signature__ names."""
    signature = backend.plugin.BM3Dv2.__signature__
    assert isinstance(signature, inspect.Signature)
    assert signature == inspect.signature(backend.plugin.BM3Dv2)
    names = list(signature.parameters)
    assert names[:3] == ["clip", "ref", "sigma"]
    assert {"block_step", "bm_range", "radius", "ps_range", "chroma", "device"} <= set(names)
    assert "block_size" not in names and "group_size" not in names  # vsjetpack drops them


def test_output_says_it_ran_on_the_cpu(core, cpu):
    clip = make_clip(core, vs.GRAYS, length=1)
    props = cpu.NLMeans(clip, h=2.0).get_frame(0).props
    assert props["AvdenoiseBackend"] == "cpu"
    assert cpu.BM3Dv2(clip, None, [3.0]).get_frame(0).props["AvdenoiseBackend"] == "cpu"


def test_a_call_may_choose_its_device(core):
    """device= in vsjetpack's kwargs wins; device_id with another backend device is an error."""
    clip = make_clip(core, vs.GRAYS, length=1)
    out = backend.NLMeans(clip, h=2.0, device="cpu").get_frame(0)
    assert out.props["AvdenoiseBackend"] == "cpu"
    with pytest.raises(vs.Error, match=r"^avdenoise\.NLMeans: device_id and device cannot both"):
        Backend("cpu").NLMeans(clip, device_id=0)


@pytest.mark.parametrize(
    "format_id, planes, direct",
    [
        (vs.YUV420P8, [0], dict(channels="Y")),
        (vs.YUV420P8, [1, 2], dict(channels="UV")),
        (vs.YUV420P10, [1, 2], dict(channels="UV")),
        (vs.YUV444P16, None, dict(channels="YUV")),  # scalars on 4:4:4: one joint call
        (vs.YUV444PS, [0, 1, 2], dict(channels="YUV")),
        (vs.GRAY8, None, dict(channels="AUTO")),
        (vs.GRAYS, [0], dict(channels="AUTO")),
    ],
)
def test_nl_means_is_one_drop_in_call(core, vsdenoise, cpu, format_id, planes, direct):
    clip = make_clip(core, format_id)
    got = vsdenoise.nl_means(clip, 0.6, planes=planes, backend=cpu)
    assert_same_frames(got, nlm(core, clip, h=0.6, **direct))


def assert_joined(got, luma, chroma, planes=(0, 1, 2)):
    """`got` holds luma's plane 0 and chroma's planes 1, 2 (of those in `planes`)."""
    for n in range(got.num_frames):
        out = frame_planes(got.get_frame(n))
        want = [frame_planes(luma.get_frame(n))[0], *frame_planes(chroma.get_frame(n))[1:]]
        for plane in planes:
            np.testing.assert_array_equal(out[plane], want[plane], err_msg=f"{n}, {plane}")


def test_nl_means_on_subsampled_yuv_is_luma_then_chroma(core, vsdenoise, cpu):
    """Every plane of 4:2:0, with a value per plane group: a Y call and a UV call."""
    clip = make_clip(core, vs.YUV420P8)
    got = vsdenoise.nl_means(clip, [0.6, 1.5], tr=[1, 0], a=[2, 1], s=[4, 2], backend=cpu)
    luma = nlm(core, clip, h=0.6, channels="Y")
    chroma = nlm(core, clip, h=1.5, d=0, a=1, s=2, channels="UV")
    assert_joined(got, luma, chroma)


def test_nl_means_on_one_chroma_plane(core, vsdenoise, cpu):
    """planes=[1]: U of the UV call (matched on both), V left as it was."""
    clip = make_clip(core, vs.YUV420P8)
    got = vsdenoise.nl_means(clip, 0.6, planes=[1], backend=cpu)
    assert_joined(got, clip, nlm(core, clip, h=0.6, channels="UV"), planes=(0, 1))
    assert_same_frames(core.std.ShufflePlanes(got, 2, vs.GRAY), clip.std.ShufflePlanes(2, vs.GRAY))


def test_nl_means_with_ref_and_weight_mode(core, vsdenoise, cpu):
    clip, guide = make_clip(core, vs.YUV444P8), make_clip(core, vs.YUV444P8, seed=9)
    wmode = vsdenoise.nl_means.WeightMode.BISQUARE_THR(0.5)
    got = vsdenoise.nl_means(clip, 2.0, tr=2, ref=guide, wmode=wmode, planes=0, backend=cpu)
    want = nlm(core, clip, h=2.0, d=2, channels="Y", rclip=guide, wmode=2, wref=0.5)
    assert_same_frames(got, want)


def test_nl_means_errors_are_the_drop_ins(core, vsdenoise, cpu):
    clip = make_clip(core, vs.YUV420P8, length=1)
    with pytest.raises(vs.Error, match=r"^avdenoise\.NLMeans: a must be an integer from 1 to 16"):
        vsdenoise.nl_means(clip, 1.0, a=20, backend=cpu)
    with pytest.raises(TypeError, match=r"^avdenoise\.NLMeans: unknown argument 'sigma'"):
        vsdenoise.nl_means(clip, 1.0, sigma=2, backend=cpu)


def test_prefilter_nlmeans_takes_the_backend(core, vsdenoise, cpu):
    """vsdenoise's Prefilter.NLMEANS passes its kwargs on to nl_means (h=7, s=2 its own)."""
    clip = make_clip(core, vs.GRAY16)
    got = vsdenoise.Prefilter.NLMEANS(clip, backend=cpu)
    assert_same_frames(got, nlm(core, clip, h=7.0, s=2, channels="AUTO"))
