"""The NumPy NLM against a brute-force, pixel-by-pixel transcription of its definition."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from avdenoise_vs._nlm.maths import MAX_WEIGHT_FLOOR, ZERO_WEIGHT_BELOW
from avdenoise_vs._nlm.reference import nlm
from avdenoise_vs._params.options import Distance, WeightMode

CHANNELS = {Distance.LUMA: 1, Distance.CHROMA: 2, Distance.YUV: 3, Distance.RGB: 3}


def brute_force(window, center, h, a, s, wmode, wref, distance, guide=None):
    """Non-local means written as the formula reads, one pixel and one offset at a time."""
    guide = window if guide is None else guide
    channels, height, width = window[center].shape

    def inside(y, x):
        return 0 <= y < height and 0 <= x < width

    def sample(frame, c, y, x):  # zeros outside the frame, as KNLMeansCL reads
        return frame[c, y, x] if inside(y, x) else 0.0

    def pixel_distance(k, y, x, qy, qx):
        a_ = [sample(guide[center], c, y, x) for c in range(channels)]
        b_ = [sample(guide[k], c, y + qy, x + qx) for c in range(channels)]
        d2 = [(p - q) ** 2 for p, q in zip(a_, b_, strict=True)]
        if distance is Distance.LUMA:
            return 3 * d2[0]
        if distance is Distance.CHROMA:
            return 1.5 * (d2[0] + d2[1])
        if distance is Distance.YUV:
            return sum(d2)
        red = (a_[0] + b_[0]) / 6
        return (2 / 3 + red) * d2[0] + 4 / 3 * d2[1] + (1 - red) * d2[2]

    def weight(arg):
        if wmode == WeightMode.WELSCH:
            w = math.exp(-arg)
        else:
            power = {WeightMode.BISQUARE_A: 1, WeightMode.BISQUARE_B: 2, WeightMode.BISQUARE_C: 8}
            w = max(1 - arg, 0.0) ** power[wmode]
        return w if w >= ZERO_WEIGHT_BELOW else 0.0  # KNLMeansCL: denormals are zero

    scale = 255**2 / (3 * h * h * (2 * s + 1) ** 2)
    out = np.empty_like(window[center])
    for y, x in itertools.product(range(height), range(width)):
        num, den, best = np.zeros(channels), 0.0, MAX_WEIGHT_FLOOR
        for k, qy, qx in itertools.product(range(len(window)), range(-a, a + 1), range(-a, a + 1)):
            if (k, qy, qx) == (center, 0, 0):
                continue
            # KNLMeansCL's border: offsets before the centre (in (t, y, x) order) leave out the
            # patch terms outside the frame at the centre's side and keep a candidate outside
            # (its value 0); offsets after it do so at the candidate's side and drop such a
            # candidate.
            before = (k - center, qy, qx) < (0, 0, 0)
            if not before and not inside(y + qy, x + qx):
                continue
            ssd = sum(
                pixel_distance(k, y + py, x + px, qy, qx)
                for py, px in itertools.product(range(-s, s + 1), repeat=2)
                if (inside(y + py, x + px) if before else inside(y + qy + py, x + qx + px))
            )
            w = weight(ssd * scale)
            num += w * np.array([sample(window[k], c, y + qy, x + qx) for c in range(channels)])
            den += w
            best = max(best, w)
        centre = wref * best
        total = den + centre
        here = window[center][:, y, x]
        out[:, y, x] = (num + centre * here) / total if total > 0 else here
    return out


def random_window(rng, radius, channels, shape=(7, 9)):
    base = rng.random((channels, *shape))
    return [np.clip(base + rng.normal(0, 0.05, base.shape), 0, 1) for _ in range(2 * radius + 1)]


@pytest.mark.parametrize("wmode", list(WeightMode))
@pytest.mark.parametrize("radius", [0, 1, 2])
@pytest.mark.parametrize("distance", list(Distance))
def test_matches_brute_force(wmode, radius, distance):
    rng = np.random.default_rng([int(wmode), radius, list(Distance).index(distance)])
    window = random_window(rng, radius, CHANNELS[distance])
    kwargs = dict(center=radius, h=12.0, wmode=wmode, wref=1.0, distance=distance)
    expected = brute_force(window, a=1, s=1, **kwargs)
    got = nlm(window, search_radius=1, patch_radius=1, **kwargs)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_guide_gives_weights_and_window_gives_values():
    rng = np.random.default_rng(7)
    window = random_window(rng, 1, 1)
    guide = random_window(rng, 1, 1)
    kwargs = dict(center=1, h=20.0, wmode=WeightMode.WELSCH, wref=0.5, distance=Distance.LUMA)
    expected = brute_force(window, a=2, s=1, guide=guide, **kwargs)
    got = nlm(window, search_radius=2, patch_radius=1, guide=guide, **kwargs)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_tiny_strength_returns_the_input_not_nan():
    rng = np.random.default_rng(3)
    window = random_window(rng, 1, 1)
    for wmode, wref in [(WeightMode.WELSCH, 1.0), (WeightMode.BISQUARE_A, 0.0)]:
        out = nlm(
            window,
            center=1,
            h=1e-4,
            search_radius=2,
            patch_radius=1,
            wmode=wmode,
            wref=wref,
            distance=Distance.LUMA,
        )
        assert np.all(np.isfinite(out))
        np.testing.assert_allclose(out, window[1], atol=1e-12)


def test_denoising_lowers_the_error_on_a_real_picture():
    skimage = pytest.importorskip("skimage")
    clean = skimage.data.camera()[200:296, 200:328] / 255.0
    noisy = clean + np.random.default_rng(0).normal(0, 10 / 255, clean.shape)
    out = nlm(
        [noisy[None]],
        center=0,
        h=6.0,
        search_radius=3,
        patch_radius=2,
        wmode=WeightMode.WELSCH,
        wref=1.0,
        distance=Distance.LUMA,
    )[0]
    assert np.sqrt(np.mean((out - clean) ** 2)) < 0.7 * np.sqrt(np.mean((noisy - clean) ** 2))
