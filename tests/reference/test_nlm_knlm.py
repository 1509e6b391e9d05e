"""Equal-parameter agreement with an independent KNLMeansCL implementation on the CPU.

vszipcl's ``NLMeans`` (a KNLMeansCL port) runs on PoCL (Debian's pocl-opencl-icd). Every
pixel of every frame is compared, the frame borders and the clip's ends included: there our
maths follows KNLMeansCL's (zero samples outside the frame, the temporal window shortened at
the clip's start and repeating the last frame at its end; see ``_reference/nlm.py``). The
only differences left are float32 rounding in theirs, which moves a few samples by one code.

One case is left out on purpose: with ``wref=0`` and a Bisquare weighting, pixels whose every
weight is zero are ``0 / 0`` in KNLMeansCL (vszipcl returns 0 there); ours keeps the input.

vapoursynth-nlm-ispc 4.1 scales h differently (12 codes off at h = 1.2 on a clean picture)
and is not used.
"""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs.sample import psnr

from ..vsclips import clip_from_planes

WIDTH, HEIGHT = 56, 40
#: Mean absolute difference allowed per plane, in codes (float clips: in units of 1/255).
MEAN_CODES = 0.02


@pytest.fixture(scope="module")
def knlm(core):
    if not hasattr(core, "vszipcl"):
        pytest.skip("vapoursynth-vszipcl is not installed")
    probe = core.std.BlankClip(width=16, height=16, format=vs.GRAY8, length=1)
    try:
        core.vszipcl.NLMeans(probe).get_frame(0)
    except vs.Error as error:
        pytest.skip(f"vszipcl has no OpenCL device (install pocl-opencl-icd): {error}")
    return core.vszipcl.NLMeans


def noisy_sequence(length: int, channels: int = 1, sigma: float = 8.0, seed: int = 11):
    """A real picture panning 3 px right and 2 px down a frame, with white Gaussian noise:
    (clean, noisy) lists of (channels, HEIGHT, WIDTH) float64 arrays in 8-bit codes."""
    skimage = pytest.importorskip("skimage")
    picture = skimage.data.astronaut().astype(np.float64).transpose(2, 0, 1)[:channels]
    clean = [
        picture[:, 100 + 2 * n : 100 + 2 * n + HEIGHT, 200 + 3 * n : 200 + 3 * n + WIDTH]
        for n in range(length)
    ]
    rng = np.random.default_rng(seed)
    noisy = [np.clip(np.rint(c + rng.normal(0, sigma, c.shape)), 0, 255) for c in clean]
    return clean, noisy


def make_clip(core, fmt_id, frames):
    """A clip of `fmt_id` from 8-bit-code frames (16-bit: times 257; float: over 255)."""
    fmt = core.get_video_format(fmt_id)
    if fmt.sample_type == vs.FLOAT:
        planes = [[(p / 255.0).astype(np.float32) for p in f] for f in frames]
    elif fmt.bits_per_sample == 16:
        planes = [[(p * 257).astype(np.uint16) for p in f] for f in frames]
    else:
        planes = [[p.astype(np.uint8) for p in f] for f in frames]
    return clip_from_planes(core, fmt, planes)


def assert_every_frame_agrees(ours, theirs, planes, scale=1.0, max_codes=1.0):
    """Every listed plane of every frame within float32 rounding of theirs."""
    assert ours.num_frames == theirs.num_frames
    for n in range(ours.num_frames):
        a, b = ours.get_frame(n), theirs.get_frame(n)
        for p in planes:
            diff = np.abs(np.asarray(a[p], np.float64) - np.asarray(b[p], np.float64)) * scale
            assert diff.mean() < MEAN_CODES, (n, p, diff.mean())
            assert diff.max() <= max_codes + 1e-3, (n, p, diff.max())


@pytest.mark.parametrize("length", [1, 2, 3, 5])
@pytest.mark.parametrize("d", [0, 1, 2, 3])
def test_every_frame_of_short_clips(core, knlm, length, d):
    """Frame 0 with d >= 1 is spatial only in KNLMeansCL; the end repeats the last frame."""
    _, noisy = noisy_sequence(length)
    clip = make_clip(core, vs.GRAY8, noisy)
    kwargs = dict(d=d, a=2, s=2, h=3.0)
    assert_every_frame_agrees(core.avdenoise.NLMeans(clip, **kwargs), knlm(clip, **kwargs), [0])


@pytest.mark.parametrize(
    "a, s, h, wmode, wref, max_codes",
    [
        (2, 4, 1.2, 0, 1.0, 1),  # KNLMeansCL's defaults
        (1, 2, 3.0, 0, 1.0, 1),
        (3, 1, 5.0, 0, 1.0, 1),
        (3, 2, 5.0, 1, 1.0, 1),
        (2, 2, 6.0, 2, 0.5, 1),
        (2, 3, 8.0, 3, 1.0, 1),
        # Pixels left with a few tiny weights are ill-conditioned: float32 rounding in theirs
        # moves them by a few codes (small patches with Bisquare, or no centre weight).
        (3, 1, 5.0, 1, 1.0, 3),
        (2, 2, 6.0, 0, 0.0, 4),
    ],
)
def test_settings(core, knlm, a, s, h, wmode, wref, max_codes):
    _, noisy = noisy_sequence(4)
    clip = make_clip(core, vs.GRAY8, noisy)
    kwargs = dict(d=1, a=a, s=s, h=h, wmode=wmode, wref=wref)
    assert_every_frame_agrees(
        core.avdenoise.NLMeans(clip, **kwargs), knlm(clip, **kwargs), [0], max_codes=max_codes
    )


@pytest.mark.parametrize(
    "fmt_id, channels, planes, scale",
    [
        (vs.YUV444P8, "UV", [1, 2], 1.0),
        (vs.YUV444P8, "YUV", [0, 1, 2], 1.0),
        (vs.RGB24, "RGB", [0, 1, 2], 1.0),
        (vs.GRAY16, "Y", [0], 1.0),
        (vs.GRAYS, "Y", [0], 255.0),
    ],
)
def test_formats_and_channels(core, knlm, fmt_id, channels, planes, scale):
    _, noisy = noisy_sequence(3, channels=1 if channels == "Y" else 3)
    clip = make_clip(core, fmt_id, noisy)
    kwargs = dict(d=1, a=2, s=2, h=3.0, channels=channels)
    assert_every_frame_agrees(
        core.avdenoise.NLMeans(clip, **kwargs), knlm(clip, **kwargs), planes, scale
    )


def test_guide_clip(core, knlm):
    _, noisy = noisy_sequence(3)
    _, other = noisy_sequence(3, seed=5)
    clip, guide = make_clip(core, vs.GRAY8, noisy), make_clip(core, vs.GRAY8, other)
    kwargs = dict(d=1, a=2, s=2, h=4.0)
    assert_every_frame_agrees(
        core.avdenoise.NLMeans(clip, rclip=guide, **kwargs), knlm(clip, rclip=guide, **kwargs), [0]
    )


def test_same_psnr_at_the_first_frame(core, knlm):
    """The user-visible symptom: frame 0 denoised as much as KNLMeansCL denoises it."""
    clean, noisy = noisy_sequence(3, sigma=12.0)
    clip = make_clip(core, vs.GRAY8, noisy)
    kwargs = dict(d=1, a=2, s=4, h=4.0)
    ours = np.asarray(core.avdenoise.NLMeans(clip, **kwargs).get_frame(0)[0], np.float64)
    theirs = np.asarray(knlm(clip, **kwargs).get_frame(0)[0], np.float64)
    assert psnr(ours, clean[0][0], 255) == pytest.approx(psnr(theirs, clean[0][0], 255), abs=0.01)
    assert psnr(ours, clean[0][0], 255) > psnr(noisy[0][0], clean[0][0], 255) + 1.0
