"""core.avdenoise.BM3D: BM3DCUDA's signature and meaning, run by the NumPy BM3D reference."""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs._bm3d.reference.vbm3d import FrameList, vbm3d
from avdenoise_vs._params import BM3D_PARAMS, DENOISE_PARAMS, NLMEANS_PARAMS
from avdenoise_vs._params.options import Distance
from avdenoise_vs._params.settings import Stages
from avdenoise_vs._params.spec import parse_arguments
from avdenoise_vs._plugin.bridge import plugin_functions
from avdenoise_vs._plugin.layout import layout_from_info
from avdenoise_vs._plugin.passes import plan_bm3d_passes

from .vsclips import clip_from_planes, frame_planes, random_planes

WIDTH, HEIGHT, LENGTH = 48, 40, 3
#: BM3DCUDA's grid defaults, which Denoise must be given to compute the same thing.
BM3DCUDA_GRID = dict(block_step=8, bm_range=9)


def make_clip(core, format_id, seed=0):
    fmt = core.get_video_format(format_id)
    frames = [random_planes(fmt, WIDTH, HEIGHT, seed + n) for n in range(LENGTH)]
    return clip_from_planes(core, fmt, frames), frames


def expected_frame(fmt, frames, n, sigma, radius=0, chroma=False, ref_frames=None):
    """BM3DCUDA's meaning, from the reference: planes on their own (or jointly with `chroma`),
    in 8-bit scale, sigma per plane (the last repeated), sigma-0 planes copied; the basic
    estimate alone, or with `ref_frames` the Wiener stage alone, piloted by them."""
    peak = 1.0 if fmt.sample_type == vs.FLOAT else (1 << fmt.bits_per_sample) - 1
    sigma = (list(sigma) + [sigma[-1]] * 3)[: fmt.num_planes]
    groups = [((0, 1, 2), True)] if chroma else [((p,), False) for p in range(fmt.num_planes)]
    out = [p.copy() for p in frames[n]]
    for planes, joint in groups:
        if not any(sigma[p] for p in planes):
            continue

        def clip(source, planes=planes):
            return FrameList(
                [np.stack([f[p].astype(np.float64) for p in planes]) * 255 / peak for f in source]
            )

        s = [sigma[p] for p in planes]
        pilot = None if ref_frames is None else clip(ref_frames)
        result = vbm3d(
            clip(frames),
            n,
            s,
            radius=radius,
            stages=1 if pilot is None else 2,
            pilot=pilot,
            joint=joint,
            **BM3DCUDA_GRID,
        )
        for i, p in enumerate(planes):
            if sigma[p] > 0:
                out[p] = _to_format(fmt, result[i] / 255, peak)
    return out


def _to_format(fmt, values, peak):
    if fmt.sample_type == vs.FLOAT:
        return values.astype(np.float32)
    return np.clip(np.rint(values * peak), 0, peak)


def assert_frames_equal(got, want):
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_signature_and_defaults_are_bm3dcuda_s(core):
    gpu = core.avdenoise.BM3D.return_signature == "clip:vnode:all;"  # GPU clips taken too
    registered = dict(plugin_functions(gpu))["BM3D"]
    assert core.avdenoise.BM3D.signature.replace(" ", "") == registered
    names = [param.name for param in BM3D_PARAMS]
    assert names[:12] == [
        "clip",
        "ref",
        "sigma",
        "block_step",
        "bm_range",
        "radius",
        "ps_num",
        "ps_range",
        "chroma",
        "device_id",
        "fast",
        "extractor_exp",
    ]
    assert registered.replace(":all", "").startswith(
        "clip:vnode;ref:vnode:opt;sigma:float[]:opt;block_step:int[]:opt;"
    )
    want = dict(
        sigma=[3.0],
        block_step=[8],
        bm_range=[9],
        radius=0,
        ps_num=[2],
        ps_range=[4],
        chroma=False,
        fast=True,
        extractor_exp=0,
    )
    defaults = {param.name: param.default for param in BM3D_PARAMS}
    assert {name: defaults[name] for name in want} == want


def passes_of(core, format_id, **kwargs):
    """The passes a BM3D call plans, with the arguments as the bridge hands them over."""
    fmt = core.get_video_format(format_id)
    info = dict(
        color_family=int(fmt.color_family),
        sample_type=int(fmt.sample_type),
        bits=fmt.bits_per_sample,
        subsampling_w=fmt.subsampling_w,
        subsampling_h=fmt.subsampling_h,
        width=WIDTH,
        height=HEIGHT,
        num_frames=1,
    )
    args = {"clip": [info]}
    args.update(
        {name: value if isinstance(value, list) else [value] for name, value in kwargs.items()}
    )
    values = parse_arguments("BM3D", BM3D_PARAMS, args, algorithm="bm3d")
    return plan_bm3d_passes("BM3D", values, layout_from_info("BM3D", "clip", info))


@pytest.mark.parametrize(
    "kwargs, groups",
    [
        (dict(), [((0,), Distance.LUMA, 3.0, 8), ((1, 2), Distance.CHROMA, 3.0, 8)]),
        (dict(sigma=[3, 4]), [((0,), Distance.LUMA, 3.0, 8), ((1, 2), Distance.CHROMA, 4.0, 8)]),
        (
            dict(sigma=[3, 4, 5]),
            [
                ((0,), Distance.LUMA, 3.0, 8),
                ((1,), Distance.CHROMA, 4.0, 8),
                ((2,), Distance.CHROMA, 5.0, 8),
            ],
        ),
        (
            dict(block_step=[8, 4]),
            [((0,), Distance.LUMA, 3.0, 8), ((1, 2), Distance.CHROMA, 3.0, 4)],
        ),
        (dict(sigma=[0, 2, 0]), [((1,), Distance.CHROMA, 2.0, 8)]),
        (dict(sigma=0.0), []),
        (dict(chroma=True, block_step=[4, 8]), [((0, 1, 2), Distance.YUV, 3.0, 4)]),
    ],
)
def test_planes_with_equal_settings_share_a_pass(core, kwargs, groups):
    passes = passes_of(core, vs.YUV444P8, **kwargs)
    got = [(o.planes, o.distance, o.strength, o.block_step) for o in passes]
    assert got == groups
    assert all(o.stages is Stages.HARD_THRESHOLD and not o.has_ref for o in passes)
    assert all(o.plane_strengths == (o.strength,) * len(o.planes) for o in passes)


def test_chroma_sigmas_go_to_one_joint_pass(core):
    (joint,) = passes_of(core, vs.YUV444P8, chroma=True, sigma=[0.0, 5.0])
    assert joint.plane_strengths == (0.0, 5.0, 5.0) and joint.strength == 0.0
    assert joint.written_planes == (1, 2)


CASES = {
    # name: (format, BM3D arguments, the same filter through Denoise)
    "GRAY8-r1": (vs.GRAY8, dict(sigma=12.0, radius=1), dict(strength=12.0, radius=1)),
    "YUV420P10-per-plane": (
        vs.YUV420P10,
        dict(sigma=[12.0, 8.0]),
        dict(luma_strength=12.0, chroma_strength=8.0),
    ),
    "YUV444PS-chroma": (
        vs.YUV444PS,
        dict(sigma=10.0, chroma=True),
        dict(strength=10.0, channels="yuv"),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_same_filter_as_denoise_stage_one(core, name):
    format_id, ours, theirs = CASES[name]
    clip, _ = make_clip(core, format_id)
    got = core.avdenoise.BM3D(clip, device="cpu", **ours)
    want = core.avdenoise.Denoise(
        clip, algorithm="bm3d", stages=1, device="cpu", **BM3DCUDA_GRID, **theirs
    )
    assert (got.format.id, got.width, got.height, got.num_frames) == (
        clip.format.id,
        clip.width,
        clip.height,
        clip.num_frames,
    )
    for n in (0, 1) if ours.get("radius") else (1,):
        assert_frames_equal(frame_planes(got.get_frame(n)), frame_planes(want.get_frame(n)))


@pytest.mark.parametrize(
    "format_id, kwargs",
    [
        (vs.GRAY16, dict(sigma=15.0)),
        (vs.YUV420P8, dict(sigma=[10.0, 6.0, 14.0])),
        (vs.YUV422P8, dict(sigma=[10.0, 6.0])),
        (vs.YUV444P16, dict(sigma=[8.0, 12.0], chroma=True)),
        (vs.RGB24, dict(sigma=[9.0, 0.0, 12.0])),
        (vs.RGBS, dict(sigma=9.0)),
    ],
)
def test_integer_and_float_clips_match_the_reference(core, format_id, kwargs):
    clip, frames = make_clip(core, format_id)
    got = frame_planes(core.avdenoise.BM3D(clip, device="cpu", **kwargs).get_frame(1))
    sigma = kwargs["sigma"] if isinstance(kwargs["sigma"], list) else [kwargs["sigma"]]
    want = expected_frame(clip.format, frames, 1, sigma, chroma=kwargs.get("chroma", False))
    assert_frames_equal(got, want)
    assert not np.array_equal(got[0], frames[1][0])


@pytest.mark.parametrize("format_id, chroma", [(vs.GRAY8, False), (vs.YUV444PS, True)])
def test_ref_runs_the_wiener_stage_alone(core, format_id, chroma):
    clip, frames = make_clip(core, format_id)
    basic = core.avdenoise.BM3D(clip, sigma=10.0, radius=1, chroma=chroma, device="cpu")
    final = core.avdenoise.BM3D(clip, ref=basic, sigma=10.0, radius=1, chroma=chroma, device="cpu")
    pilots = [frame_planes(basic.get_frame(m)) for m in range(LENGTH)]
    for n in (0, 1):
        got = frame_planes(final.get_frame(n))
        want = expected_frame(clip.format, frames, n, [10.0], 1, chroma, ref_frames=pilots)
        assert_frames_equal(got, want)
    assert not np.array_equal(got[0], pilots[1][0])


def test_ref_means_the_same_in_denoise(core):
    clip, _ = make_clip(core, vs.YUV420P8)
    basic, _ = make_clip(core, vs.YUV420P8, seed=7)
    ours = core.avdenoise.BM3D(clip, ref=basic, sigma=[9.0, 5.0], device="cpu")
    theirs = core.avdenoise.Denoise(
        clip,
        ref=basic,
        algorithm="bm3d",
        luma_strength=9.0,
        chroma_strength=5.0,
        device="cpu",
        **BM3DCUDA_GRID,
    )
    assert_frames_equal(frame_planes(ours.get_frame(1)), frame_planes(theirs.get_frame(1)))


@pytest.mark.parametrize(
    "format_id, kwargs, untouched",
    [
        (vs.YUV420P8, dict(sigma=[20.0, 0.0]), (1, 2)),
        (vs.YUV420P16, dict(sigma=[0.0, 20.0, 0.0]), (0, 2)),
        (vs.YUV420PS, dict(sigma=[0.0, 20.0]), (0,)),
        (vs.YUV444PS, dict(sigma=[0.0, 20.0], chroma=True), (0,)),
        (vs.RGBS, dict(sigma=0.0, radius=1), (0, 1, 2)),
    ],
)
def test_sigma_zero_passes_planes_through_bit_identical(core, format_id, kwargs, untouched):
    clip, frames = make_clip(core, format_id)
    got = frame_planes(core.avdenoise.BM3D(clip, device="cpu", **kwargs).get_frame(1))
    for p in range(clip.format.num_planes):
        assert np.array_equal(got[p], frames[1][p]) == (p in untouched), p


def test_compatibility_arguments_change_nothing(core):
    clip, _ = make_clip(core, vs.GRAY8)
    plain = core.avdenoise.BM3D(clip, sigma=12.0, device="cpu")
    compat = core.avdenoise.BM3D(
        clip, sigma=12.0, fast=False, extractor_exp=6, num_streams=2, device="cpu"
    )
    assert_frames_equal(frame_planes(compat.get_frame(1)), frame_planes(plain.get_frame(1)))


def test_extras_reach_the_passes(core):
    (luma,) = passes_of(core, vs.GRAY8, lambda_ht=3.5, mismatch_scale=0.5, ps_num=3, ps_range=5)
    assert (luma.lambda_ht, luma.mismatch_scale, luma.ps_num, luma.ps_range) == (3.5, 0.5, 3, 5)


BAD_ARGUMENTS = [
    (
        dict(sigma=-1.0),
        r"sigma must be a list of 1 to 3 items, each item a number from 0 to 1e6, "
        r"got \[-1.0\]",
    ),
    (dict(sigma=[1.0, 2.0, 3.0, 4.0]), r"sigma must be a list of 1 to 3 items.*got \[1.0, 2.0, "),
    (
        dict(block_step=[8, 9]),
        r"block_step must be a list of 1 to 3 items, each item an "
        r"integer from 1 to 8, got \[8, 9\]",
    ),
    (dict(bm_range=0), r"bm_range must be .*an integer from 1 to 32, got \[0\]"),
    (dict(ps_num=9), r"ps_num must be .*an integer from 1 to 8, got \[9\]"),
    (dict(ps_range=0), r"ps_range must be .*an integer from 1 to 16, got \[0\]"),
    (dict(radius=9), r"radius must be an integer from 0 to 8, got 9"),
    (dict(chroma=2), r"chroma must be True or False, got 2"),
    (
        dict(chroma=True),
        r"chroma=True needs a YUV 4:4:4 clip \(all planes are matched on luma\), "
        r"got YUV 4:2:0",
    ),
    (dict(extractor_exp=-1), r"extractor_exp must be an integer >= 0, got -1"),
    (dict(num_streams=0), r"num_streams must be an integer from 1 to 64, got 0"),
    (dict(device_id=64), r"device_id must be an integer from 0 to 63, got 64"),
    (
        dict(device_id=0, device="cpu"),
        r"device_id and device cannot both be given, "
        r"got device_id=0 and device='cpu'",
    ),
    (dict(device="gpu"), r"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'gpu'"),
    (dict(lambda_ht=0.0), r"lambda_ht must be a number > 0 and at most 1e6, got 0.0"),
    (
        dict(ref="same", lambda_ht=2.0),
        r"lambda_ht is not used with ref \(only the Wiener stage "
        r"runs\)",
    ),
    (dict(ref="gray"), r"ref must have the same format, size and length as clip"),
]


@pytest.mark.parametrize("kwargs, message", BAD_ARGUMENTS, ids=lambda v: str(v)[:40])
def test_bad_argument(core, kwargs, message):
    clip = core.std.BlankClip(width=32, height=24, format=vs.YUV420P8, length=3)
    refs = {"same": clip, "gray": core.std.BlankClip(clip, format=vs.GRAY8)}
    kwargs = {k: refs[v] if k == "ref" else v for k, v in kwargs.items()}
    with pytest.raises(vs.Error, match=r"avdenoise\.BM3D: " + message):
        core.avdenoise.BM3D(clip, **kwargs)


@pytest.mark.parametrize("format_id", [vs.GRAY8, vs.RGBS, vs.YUV420P8])
def test_chroma_needs_yuv444(core, format_id):
    clip = core.std.BlankClip(width=32, height=24, format=format_id, length=3)
    name = {vs.GRAY8: "GRAY", vs.RGBS: "RGB", vs.YUV420P8: "YUV 4:2:0"}[format_id]
    with pytest.raises(vs.Error, match=f"chroma=True needs a YUV 4:4:4 clip .*got {name}$"):
        core.avdenoise.BM3D(clip, chroma=True)


def test_only_processed_planes_need_one_block(core):
    clip = core.std.BlankClip(width=32, height=12, format=vs.YUV420P8, length=3)
    with pytest.raises(
        vs.Error,
        match=r"avdenoise\.BM3D: sigma > 0 needs planes of at least "
        r"8x8 pixels, got 16x6 \(plane 2\)",
    ):
        core.avdenoise.BM3D(clip)
    # Chroma of sigma 0 is passed through, so only luma (32x12) needs blocks: no error, the
    # chroma planes bit-identical and the noisy luma plane filtered.
    fmt = core.get_video_format(vs.YUV420P8)
    noisy = clip_from_planes(core, fmt, [random_planes(fmt, 32, 12, seed=5)])
    out = core.avdenoise.BM3D(noisy, sigma=[10.0, 0.0], device="cpu").get_frame(0)
    source = noisy.get_frame(0)
    for plane in (1, 2):
        assert np.array_equal(np.asarray(out[plane]), np.asarray(source[plane]))
    assert not np.array_equal(np.asarray(out[0]), np.asarray(source[0]))


def test_compatibility_arguments_are_accepted_with_a_warning(core):
    """fast, extractor_exp and num_streams change nothing: the script runs, and VapourSynth's
    log says so once per argument given (none for arguments left out), for every argument the
    tables mark ignored."""
    messages: list[str] = []

    def handler(kind: int, text: str) -> None:
        if kind >= vs.MESSAGE_TYPE_WARNING and "changes nothing" in text:
            messages.append(text)

    handle = core.add_log_handler(handler)
    try:
        clip = core.std.BlankClip(width=32, height=32, format=vs.GRAYS, length=1)
        core.avdenoise.BM3D(clip, fast=False, extractor_exp=3, num_streams=4, device="cpu")
        core.avdenoise.BM3D(clip, device="cpu")
        core.avdenoise.NLMeans(core.std.BlankClip(format=vs.GRAY8, length=1), num_streams=2)
    finally:
        core.remove_log_handler(handle)
    assert [m.split(":")[1].strip() for m in messages] == [
        "fast=False changes nothing here",
        "extractor_exp=3 changes nothing here",
        "num_streams=4 changes nothing here",
        "num_streams=2 changes nothing here",
    ]
    assert "BM3DCUDA" in messages[0] and "vszipcu" in messages[2] and "vszipcu" in messages[3]
    tables = {"Denoise": DENOISE_PARAMS, "NLMeans": NLMEANS_PARAMS, "BM3D": BM3D_PARAMS}
    ignored = {(f, p.name) for f, table in tables.items() for p in table if p.ignored}
    assert ignored == {
        ("BM3D", "fast"),
        ("BM3D", "extractor_exp"),
        ("BM3D", "num_streams"),
        ("NLMeans", "num_streams"),
    }, "an ignored argument without a case above"
