"""Tests of the NumPy BM3D / CBM3D / V-BM3D reference (avdenoise_vs._bm3d.reference.bm3d)."""

from __future__ import annotations

import numpy as np
import pytest
from skimage import data
from skimage.metrics import peak_signal_noise_ratio

from avdenoise_vs._bm3d import transforms
from avdenoise_vs._bm3d.maths import group_sizes
from avdenoise_vs._bm3d.reference import matching
from avdenoise_vs._bm3d.reference.bm3d import (
    _options,
    basic_estimates,
    bm3d,
    bm3d_basic,
    bm3d_final,
)
from avdenoise_vs._bm3d.reference.vbm3d import FrameList, _Sums, vbm3d

pytestmark = pytest.mark.timeout(180)

# OPP colour transform of CBM3D (Dabov et al., ICIP 2007); rows are Y, U, V.
OPP = np.array([[1 / 3, 1 / 3, 1 / 3], [1 / 2, 0, -1 / 2], [1 / 4, -1 / 2, 1 / 4]])


def _psnr(clean: np.ndarray, estimate: np.ndarray) -> float:
    return float(peak_signal_noise_ratio(clean, estimate, data_range=255))


def _noisy(clean: np.ndarray, sigma: float, seed: int) -> np.ndarray:
    return clean + np.random.default_rng(seed).normal(0.0, sigma, clean.shape)


@pytest.fixture(scope="module")
def camera() -> np.ndarray:
    return data.camera()[100:228, 200:328].astype(np.float64)


# --- quality -------------------------------------------------------------------------------------

# Measured on this crop (seed = sigma), ours vs Tampere bm3d 4.0.3 profile "np": 33.91 vs 34.02 dB
# at sigma 10 and 28.71 vs 28.77 dB at sigma 25 (-0.11 / -0.06 dB). Over four 128x128 crops
# (camera, coins, astronaut, moon) the mean gap is -0.05 dB and the worst -0.11 dB, so the
# assertion allows 0.15 dB, not the 0.1 dB aimed for. Our basic estimate is 0.14 dB better on
# average (lambda 2.7 against Tampere's 3.0); the gap comes from the Wiener stage.
TAMPERE_TOLERANCE_DB = 0.15


@pytest.mark.slow
@pytest.mark.parametrize(("sigma", "basic_gain_db"), [(10.0, 4.5), (25.0, 7.0)])
def test_quality_close_to_tampere(camera, sigma, basic_gain_db):
    tampere = pytest.importorskip("bm3d")
    noisy = _noisy(camera, sigma, seed=int(sigma))
    basic = bm3d_basic([noisy], 0, sigma)
    final = bm3d_final([noisy], [basic], 0, sigma)
    reference = tampere.bm3d(noisy / 255, sigma / 255, "np") * 255
    assert _psnr(camera, basic) > _psnr(camera, noisy) + basic_gain_db
    assert _psnr(camera, final) > _psnr(camera, basic)
    assert _psnr(camera, final) >= _psnr(camera, reference) - TAMPERE_TOLERANCE_DB


def test_high_noise_profile_denoises():
    clean = data.camera()[200:264, 200:264].astype(np.float64)
    noisy = _noisy(clean, 60.0, seed=3)
    out = bm3d([noisy], 0, 60.0)
    assert _psnr(clean, out) > _psnr(clean, noisy) + 8.0


def _pan(radius: int, size: int = 96, step: tuple[int, int] = (1, 2)) -> list[np.ndarray]:
    """A crop panning across the camera image by ``step`` pixels per frame."""
    big = data.camera().astype(np.float64)
    y0, x0 = 120, 200
    return [
        big[y0 + k * step[0] : y0 + k * step[0] + size, x0 + k * step[1] : x0 + k * step[1] + size]
        for k in range(-radius, radius + 1)
    ]


@pytest.mark.slow
def test_vbm3d_beats_spatial():
    sigma = 25.0
    clean = _pan(1)
    rng = np.random.default_rng(7)
    noisy = [c + rng.normal(0.0, sigma, c.shape) for c in clean]
    spatial = bm3d([noisy[1]], 0, sigma)
    temporal = bm3d(noisy, 1, sigma)
    # Measured: 28.36 dB spatial, 30.20 dB radius 1 (29.82 with window_refs=False); the
    # target is at least 0.5 dB.
    assert _psnr(clean[1], temporal) > _psnr(clean[1], spatial) + 0.5


@pytest.mark.slow
def test_joint_colour_beats_per_channel():
    sigma = 25.0
    rgb = data.coffee()[100:196, 200:296].astype(np.float64)
    noisy = _noisy(rgb, sigma, seed=11)
    opp = np.einsum("ij,hwj->ihw", OPP, noisy)
    opp_sigma = sigma * np.linalg.norm(OPP, axis=1)
    to_rgb = np.linalg.inv(OPP)
    fast = dict(bm_range=9)  # a smaller search keeps the five runs below a few seconds

    def in_rgb(opp_estimate):
        return np.einsum("ij,jhw->hwi", to_rgb, opp_estimate)

    joint = in_rgb(bm3d([opp], 0, opp_sigma, joint=True, **fast))
    separate = in_rgb(bm3d([opp], 0, opp_sigma, joint=False, **fast))
    per_rgb = np.stack([bm3d([noisy[..., c]], 0, sigma, **fast) for c in range(3)], axis=-1)
    # Measured: noisy 20.2, per-RGB-channel 33.02, per-OPP-channel 33.56, joint 33.92 dB.
    assert _psnr(rgb, joint) > _psnr(rgb, noisy) + 10.0
    assert _psnr(rgb, joint) > _psnr(rgb, per_rgb) + 0.5
    assert _psnr(rgb, joint) > _psnr(rgb, separate) + 0.2


# --- properties ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def odd_frame() -> np.ndarray:
    return data.camera()[150:187, 220:273].astype(np.float64)  # 37 x 53


def test_deterministic(odd_frame):
    noisy = _noisy(odd_frame, 20.0, seed=1)
    first = bm3d([noisy], 0, 20.0)
    second = bm3d([noisy], 0, 20.0)
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("sigma", [0.0, 1e-6])
def test_near_zero_sigma_returns_input(odd_frame, sigma):
    noisy = _noisy(odd_frame, 5.0, seed=2)
    np.testing.assert_allclose(bm3d([noisy], 0, sigma), noisy, atol=1e-6)


def test_odd_size_shape_and_noise_drop(odd_frame):
    noisy = _noisy(odd_frame, 20.0, seed=4)
    out = bm3d([noisy], 0, 20.0)
    assert out.shape == odd_frame.shape and out.dtype == np.float64
    assert np.std(out - odd_frame) < 0.6 * np.std(noisy - odd_frame)


@pytest.mark.parametrize("sigma", [25.0, 60.0])
def test_flat_black_frame_is_finite(sigma):
    out = bm3d([np.zeros((24, 24))], 0, sigma)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, 0.0, atol=1e-9)


def test_no_nan_and_shapes_for_colour_window():
    rng = np.random.default_rng(6)
    frames = [rng.uniform(0, 255, (3, 19, 27)) for _ in range(3)]
    for joint in (False, True):
        out = bm3d(frames, 2, [20.0, 10.0, 10.0], joint=joint, block_step=4, bm_range=6)
        assert out.shape == (3, 19, 27) and np.all(np.isfinite(out))


def test_minimal_frame():
    frame = np.arange(64, dtype=np.float64).reshape(8, 8)
    out = bm3d([frame, frame], 0, 10.0)
    assert out.shape == (8, 8) and np.all(np.isfinite(out))


@pytest.mark.parametrize("stages", [1, 2])
def test_non_finite_samples_take_no_part(stages):
    """NaN and infinities: blocks holding one are never grouped, and a pixel keeps its input
    exactly when every block over it holds one (block_step=1, every block a reference). Near
    the top border that is a whole column above the sample."""
    frame = np.random.default_rng(21).uniform(0, 255, (24, 30))
    frame[2, 12], frame[15, 20], frame[20, 3] = np.nan, np.inf, -np.inf
    options = dict(stages=stages, block_step=1, bm_range=3)
    out, kept = vbm3d(FrameList([frame]), 0, 20.0, radius=0, with_kept=True, **options)
    usable = matching.finite_blocks(frame[None, None]).reshape(24 - 7, 30 - 7)
    reached = np.zeros(frame.shape, dtype=bool)
    for y, x in np.argwhere(usable):
        reached[y : y + 8, x : x + 8] = True
    assert not reached[:3, 12].any() and reached[3, 12]
    np.testing.assert_array_equal(kept[0], ~reached)
    np.testing.assert_array_equal(out[0][~reached], frame[~reached])  # NaN equals NaN here
    assert np.all(np.isfinite(out[0][reached]))
    np.testing.assert_array_equal(bm3d([frame], 0, 20.0, **options), out[0])


def test_unusable_blocks_are_never_members_nor_seeds():
    """On constant frames every distance ties at 0, so only the mask keeps blocks out. The
    search of reference block (5, 5) in frame 0 (radius 1) has one usable block, itself, so
    the predictive search into frame 1 has one seed: the unusable (4, 4) must not be a second
    one, whose window would reach frame 1's one usable block, (2, 2)."""
    frames = [np.full((20, 20), 7.0)] * 2
    usable = np.zeros((2, 13 * 13), dtype=bool)
    usable[0, 5 * 13 + 5] = usable[1, 2 * 13 + 2] = True
    ref = 5  # reference_grid(20, 20, 5): (5, 5) is the sixth reference block

    def row():
        groups = _groups(frames, bm_range=1, ps_range=2, usable=usable)
        entries = zip(groups.frame[ref], groups.y[ref], groups.x[ref], strict=True)
        return int(groups.size[ref]), [tuple(map(int, e)) for e in entries]

    size, entries = row()
    assert size == 1 and entries[0] == (0, 5, 5) and (1, 2, 2) not in entries
    usable[0, 4 * 13 + 4] = True  # (4, 4) usable: a second seed, whose window reaches (2, 2)
    size, entries = row()
    assert size == 2 and entries[:3] == [(0, 5, 5), (0, 4, 4), (1, 2, 2)]


def test_basic_estimates_match_per_frame_calls():
    rng = np.random.default_rng(8)
    frames = [rng.uniform(0, 255, (20, 20)) for _ in range(3)]
    options = dict(block_step=4, bm_range=5)
    pilots = basic_estimates(frames, 15.0, **options)
    for i, pilot in enumerate(pilots):
        np.testing.assert_allclose(pilot, bm3d_basic(frames, i, 15.0, **options), atol=1e-9)


def test_centre_only_references():
    sigma = 20.0
    clean = _pan(1, size=48)
    rng = np.random.default_rng(9)
    noisy = [c + rng.normal(0.0, sigma, c.shape) for c in clean]
    out = bm3d(noisy, 1, sigma, window_refs=False)
    assert _psnr(clean[1], out) > _psnr(clean[1], noisy[1]) + 5.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(frames=[np.zeros((8, 8)), np.zeros((9, 8))]), "share one"),
        (dict(frames=[np.zeros((7, 9))]), "at least 8x8"),
        (dict(sigma=-1.0), "sigma"),
        (dict(sigma=[1.0, 2.0]), "sigma"),
        (dict(center=1), "center"),
        (dict(stages=3), "stages"),
        (dict(group_size=12), "group_size"),
    ],
)
def test_validation(kwargs, match):
    args = dict(frames=[np.zeros((16, 16))], center=0, sigma=10.0) | kwargs
    function = bm3d_basic if "group_size" in args else bm3d
    with pytest.raises(ValueError, match=match):
        function(**args)


# --- building blocks -----------------------------------------------------------------------------


def test_transforms_are_exact_inverses():
    for key in ("dct", "bior1.5"):
        block = np.random.default_rng(10).normal(size=(5, 8, 8))
        np.testing.assert_allclose(
            transforms.inverse_2d(transforms.forward_2d(block, key), key), block, atol=1e-12
        )
    for n in (1, 2, 4, 8, 16, 32):
        h = transforms.haar_matrix(n)
        np.testing.assert_allclose(h @ h.T, np.eye(n), atol=1e-12)
        np.testing.assert_allclose(h[0], np.full(n, 1 / np.sqrt(n)))
    np.testing.assert_allclose(transforms.coefficient_std("dct"), np.ones((8, 8)), atol=1e-12)


def test_reference_grid_covers_borders():
    ys, xs = matching.reference_grid(37, 53, 8)
    assert set(ys) == {0, 8, 16, 24, 29} and set(xs) == {0, 8, 16, 24, 32, 40, 45}


def _groups(frames, *, ref_frame=0, bm_range=3, ps_range=2, threshold=1e9, max_size=8,
            usable=None):  # fmt: skip
    planes = np.stack(frames)
    h, w = planes.shape[1:]
    refs = matching.reference_grid(h, w, 5)
    return matching.match_groups(
        matching.block_features(planes), ref_frame, refs, (h - 7, w - 7),
        bm_range=bm_range, ps_num=2, ps_range=ps_range, max_size=max_size, threshold=threshold,
        usable=usable,
    )  # fmt: skip


def test_ties_break_by_raster_position():
    # On a constant frame every distance is zero: the group is the reference block, then the
    # search-window positions in raster order.
    groups = _groups([np.full((20, 20), 7.0)])
    ref = 0  # reference block at (0, 0); its window is [0, 3] x [0, 3]
    assert groups.size[ref] == 8
    got = list(zip(groups.y[ref, :8].tolist(), groups.x[ref, :8].tolist(), strict=True))
    assert got == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)]


def test_group_size_is_power_of_two_and_reference_first():
    frame = np.random.default_rng(12).uniform(0, 255, (30, 30))
    groups = _groups([frame], threshold=2000.0)
    ys, xs = matching.reference_grid(30, 30, 5)
    np.testing.assert_array_equal(groups.y[:, 0], ys)
    np.testing.assert_array_equal(groups.x[:, 0], xs)
    assert np.all(groups.size & (groups.size - 1) == 0)


def test_predictive_search_follows_motion():
    big = np.random.default_rng(13).uniform(0, 255, (60, 60))
    frames = [big[10 + k : 40 + k, 10 + 2 * k : 40 + 2 * k] for k in range(-2, 3)]
    groups = _groups(frames, ref_frame=2, bm_range=1, ps_range=3, threshold=1e-9, max_size=4)
    # A noise-free pan by (1, 2) px/frame: the exact copies of a block sit (1, 2) px further
    # per frame into the past. Predictive search must chain from frame to frame to reach
    # them (the full search only covers +-1 px). Five copies exist; the group keeps four:
    # the reference, then ties at distance 0 broken by window frame.
    ys, xs = matching.reference_grid(30, 30, 5)
    inner = (ys >= 2) & (ys <= 20) & (xs >= 4) & (xs <= 18)
    assert inner.sum() > 10
    for g in np.flatnonzero(inner):
        y, x = int(ys[g]), int(xs[g])
        members = list(
            zip(*(a[g].tolist() for a in (groups.frame, groups.y, groups.x)), strict=True)
        )
        assert groups.size[g] == 4
        assert members == [(2, y, x), (0, y + 2, x + 4), (1, y + 1, x + 2), (3, y - 1, x - 2)]


def test_chunking_does_not_change_groups(monkeypatch):
    frames = [np.random.default_rng(14).uniform(0, 255, (30, 30)) for _ in range(2)]
    whole = _groups(frames, threshold=3000.0)
    monkeypatch.setattr(matching, "_REFS_PER_CHUNK", 3)
    monkeypatch.setattr(matching, "_CHUNK_VALUES", 100)
    chunked = _groups(frames, threshold=3000.0)
    for name in ("frame", "y", "x", "size"):
        np.testing.assert_array_equal(getattr(chunked, name), getattr(whole, name))


# -- V-BM3D over a clip (avdenoise_vs._bm3d.reference.vbm3d), the definition Denoise follows ------


@pytest.mark.slow
def test_clip_vbm3d_beats_spatial():
    """Each frame's groups span its own window; frame 2 of a 5-frame pan uses all of them."""
    sigma = 25.0
    clean = _pan(2)
    rng = np.random.default_rng(7)
    clip = FrameList([c + rng.normal(0.0, sigma, c.shape) for c in clean])
    spatial = vbm3d(clip, 2, sigma, radius=0)[0]
    temporal = vbm3d(clip, 2, sigma, radius=1)[0]
    gain = _psnr(clean[2], temporal) - _psnr(clean[2], spatial)
    # Measured: +1.8 dB (28.36 -> 30.2); the target is at least 0.5 dB.
    assert gain > 0.5, gain


def test_clip_vbm3d_radius_0_is_spatial_bm3d(odd_frame):
    clip = FrameList([odd_frame, odd_frame[::-1]])
    for stages in (1, 2):
        want = bm3d([odd_frame[::-1]], 0, 20.0, stages=stages)
        got = vbm3d(clip, 1, 20.0, radius=0, stages=stages)[0]
        np.testing.assert_array_equal(got, want)


def test_clip_vbm3d_aggregates_every_window_frame_s_groups(odd_frame):
    """Frame n's sums come from the groups of every frame of W(n), each over its own window,
    and a frame repeated at the clip start counts once."""
    rng = np.random.default_rng(3)
    frames = [odd_frame + rng.normal(0.0, 10.0, odd_frame.shape) for _ in range(3)]
    clip = FrameList(frames)
    sums = _Sums(clip=clip, radius=1, sigma=10.0, joint=False,
                 opts=_options(3, 19, 2, 4, group_sizes(3, 10.0, 3)[0], 1.0),
                 lambda_ht=2.7)  # fmt: skip
    assert sorted(sums.of(0)) == [0, 1]  # W(0) = (0, 0, 1)
    num = sums.of(0)[0][0] + sums.of(1)[0][0]
    den = sums.of(0)[0][1] + sums.of(1)[0][1]
    np.testing.assert_allclose(vbm3d(clip, 0, 10.0, radius=1, stages=1), num / den)


def test_a_window_groups_fewer_blocks_at_low_noise_on_a_dense_grid():
    """maths.group_sizes: 8 / 16 for a window up to sigma 20 and block_step 4, else 16 / 32;
    vbm3d follows it unless told, and an explicit pair changes the estimate."""
    assert group_sizes(1, 3.0, 3) == (16, 32)
    assert group_sizes(3, 3.0, 3) == group_sizes(5, 20.0, 4) == (8, 16)
    assert group_sizes(3, 20.5, 3) == group_sizes(3, 3.0, 5) == (16, 32)
    rng = np.random.default_rng(5)
    clean = np.tile(np.linspace(0.0, 255.0, 24), (24, 1))
    clip = FrameList([clean + rng.normal(0.0, 10.0, clean.shape) for _ in range(3)])
    default = vbm3d(clip, 1, 10.0, radius=1, bm_range=4)
    np.testing.assert_array_equal(default, vbm3d(clip, 1, 10.0, radius=1, bm_range=4,
                                                 group_sizes=(8, 16)))  # fmt: skip
    assert not np.array_equal(default, vbm3d(clip, 1, 10.0, radius=1, bm_range=4,
                                             group_sizes=(16, 32)))  # fmt: skip
