"""Equal-parameter agreement with an independent KNLMeansCL implementation on the CPU.

vszipcl's ``NLMeans`` (a KNLMeansCL port) runs on PoCL (Debian's pocl-opencl-icd). Measured
against it on 2026-11-30 (camera picture, noise sigma 5): identical away from the borders
(0.0000 to 0.0001 code on average, d = 0 to 2, h = 1.2 to 6) once our maths took KNLMeansCL's
float32 details: the running maximum weight starts at 2^-23 and denormal weights are zero.
Where the two still differ:

- borders: KNLMeansCL reads zeros outside the frame, which gives candidates there zero or,
  on dark pictures, too much weight (vszipcl returns 0 at some corner pixels); we leave
  such candidates out and clamp patch reads to the edge. On 448x384 frames our whole-frame
  PSNR was 0.035 dB lower at h = 1.2 and 0.01 to 0.12 dB higher at larger h; the test
  compares the pixels at least a + s from every edge, and the whole frame one-sidedly;
- at the clip ends it neither clamps the window (what issue #2 asks for and we do) nor drops
  or mirrors the missing frames, so frames there are left out here;
- with a = 1 it is 0.7 code off at every d (our a = 1 is checked against a brute-force
  transcription of the formula in tests/reference), so a >= 2 here.

vapoursynth-nlm-ispc 4.1 scales h differently (12 codes off at h = 1.2 on a clean picture)
and is not used.
"""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs.sample import psnr

from .vsclips import clip_from_planes

LENGTH = 7


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


@pytest.fixture(scope="module")
def sequence():
    """A real picture panning 2 px a frame, with white Gaussian noise (sigma 5)."""
    skimage = pytest.importorskip("skimage")
    picture = skimage.data.camera()[:384].astype(np.float64)
    clean = [picture[:, 2 * n : 2 * n + 448] for n in range(LENGTH)]
    rng = np.random.default_rng(11)
    noisy = [np.clip(np.rint(c + rng.normal(0, 5, c.shape)), 0, 255).astype(np.uint8)
             for c in clean]
    return clean, noisy


@pytest.mark.parametrize(
    "d, a, s, h, wref",
    [
        (1, 2, 4, 1.2, 1.0),
        (1, 2, 4, 4.0, 1.0),
        (1, 3, 2, 3.0, 1.0),
        (2, 2, 3, 3.0, 1.0),
        (3, 2, 2, 3.0, 1.0),
        (0, 2, 4, 2.4, 1.0),
        (0, 2, 2, 6.0, 0.0),
    ],
)
def test_matches_knlmeanscl(core, knlm, sequence, d, a, s, h, wref):
    clean, noisy = sequence
    clip = clip_from_planes(core, core.get_video_format(vs.GRAY8), [[f] for f in noisy])
    n = LENGTH // 2
    theirs = knlm(clip, d=d, a=a, s=s, h=h, wref=wref).get_frame(n)[0]
    ours = core.avdenoise.Denoise(clip, radius=d, search_radius=a, patch_radius=s, strength=h,
                                  wref=wref, device="cpu").get_frame(n)[0]
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    # Borders differ by design (module docstring): never more than 0.05 dB worse there.
    assert psnr(ours, clean[n], 255) > psnr(theirs, clean[n], 255) - 0.05
    inner = (slice(a + s, -(a + s)), slice(a + s, -(a + s)))
    ours, theirs, clean = ours[inner], theirs[inner], clean[n][inner]
    assert np.abs(ours - theirs).mean() < 0.01
    assert abs(psnr(ours, clean, 255) - psnr(theirs, clean, 255)) < 0.02


def test_nlmeans_is_a_drop_in(core, knlm, sequence):
    """The same call, only the namespace changed, gives the same picture."""
    _, noisy = sequence
    clip = clip_from_planes(core, core.get_video_format(vs.GRAY8), [[f] for f in noisy])
    kwargs = dict(d=1, a=2, s=4, h=3.0, channels="Y")
    n, inner = LENGTH // 2, (slice(6, -6), slice(6, -6))
    theirs = np.asarray(knlm(clip, **kwargs).get_frame(n)[0], np.float64)[inner]
    ours = np.asarray(core.avdenoise.NLMeans(clip, **kwargs).get_frame(n)[0], np.float64)[inner]
    assert np.abs(ours - theirs).mean() < 0.1
