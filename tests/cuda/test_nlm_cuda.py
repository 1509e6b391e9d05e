"""Parity of the CUDA NLM backend with the NumPy oracle, through the bridge's frame protocol.

Skipped without CuPy or without a CUDA device. Integer outputs must be within 1 code of the
oracle, float outputs within 1e-5 (relative, with the same absolute floor for chroma near 0).
"""

from __future__ import annotations

import random
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from ._gpu import require_cuda

require_cuda()

from avdenoise_vs._backends.cuda.backend import CudaBackend  # noqa: E402
from avdenoise_vs._backends.reference import NumpyBackend  # noqa: E402
from avdenoise_vs._params.options import Distance, WeightMode  # noqa: E402

# tests/cuda is not a package: a top-level 'cuda' package would shadow NVIDIA's, which CuPy uses.
sys.path.insert(0, str(Path(__file__).parent))

from _clips import SyntheticClip, layout, lumachroma, options, plane_values, run  # noqa: E402

pytestmark = pytest.mark.gpu

__all__: list[str] = []

FLOAT_TOLERANCE = 1e-5


def assert_matches(fmt, got: dict, want: dict, context: str) -> float:
    """Assert per-plane parity; returns the largest absolute difference (codes or float)."""
    worst = 0.0
    for plane, expected in want.items():
        actual = got[plane]
        diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        worst = max(worst, float(diff.max()))
        if fmt.bits == 32:
            limit = FLOAT_TOLERANCE * np.maximum(np.abs(expected), 1.0)
            bad = diff > limit
        else:
            bad = diff > 1
        assert not bad.any(), (
            f"{context}: plane {plane}: {int(bad.sum())} samples off, worst {diff.max()} at "
            f"{np.unravel_index(int(diff.argmax()), diff.shape)}"
        )
    return worst


def compare(
    fmt,
    passes,
    *,
    frames=(0, 1, 3),
    num_frames=4,
    noise=0.02,
    ref=False,
    seed=1,
    transfer="staged",
):
    """Run both backends on the same synthetic frames and assert parity (by default at the
    clip's first frames, where KNLMeansCL's window is shorter, and at its last)."""
    clips = [SyntheticClip(fmt, num_frames, seed=seed, noise=noise)]
    if ref:
        clips.append(SyntheticClip(fmt, num_frames, seed=seed + 7, noise=noise / 2))
    radius = passes[0].radius
    planes = sorted({p for o in passes for p in o.planes})
    cuda = CudaBackend(passes, fmt, device_index=None, transfer=transfer)
    cpu = NumpyBackend(passes, fmt)
    worst = 0.0
    for n in frames:
        got = run(cuda, clips, n, radius, planes)
        want = run(cpu, clips, n, radius, planes)
        worst = max(worst, assert_matches(fmt, got, want, f"frame {n}"))
    return worst


@pytest.mark.parametrize("radius", [0, 1, 2, 3])
@pytest.mark.parametrize("wmode", list(WeightMode))
def test_gray8_every_radius_and_wmode(radius, wmode):
    h = 4.0 if wmode == WeightMode.WELSCH else 14.0
    passes = (options((0,), Distance.LUMA, h=h, r=radius, a=2, s=2, wmode=wmode),)
    compare(layout("gray", bits=8), passes)


@pytest.mark.parametrize("ref", [False, True])
@pytest.mark.parametrize(
    ("sub", "bits"),
    [((1, 1), 8), ((1, 1), 10), ((1, 1), 16), ((1, 0), 8), ((1, 0), 12), ((0, 0), 32)],
    ids=["420p8", "420p10", "420p16", "422p8", "422p12", "444ps"],
)
def test_yuv_lumachroma(sub, bits, ref):
    fmt = layout("yuv", sub[0], sub[1], bits, width=37, height=29)
    compare(fmt, lumachroma(h=3.0, r=1, a=2, s=3, ref=ref), ref=ref)


@pytest.mark.parametrize("bits", [8, 16, 32])
@pytest.mark.parametrize("ref", [False, True])
def test_yuv444_joint(bits, ref):
    fmt = layout("yuv", 0, 0, bits, width=35, height=33)
    passes = (options((0, 1, 2), Distance.YUV, h=3.0, r=1, a=3, s=2, ref=ref),)
    compare(fmt, passes, ref=ref)


@pytest.mark.parametrize("bits", [8, 10, 32])
@pytest.mark.parametrize("wmode", [WeightMode.WELSCH, WeightMode.BISQUARE_B])
def test_rgb_redmean(bits, wmode):
    h = 3.0 if wmode == WeightMode.WELSCH else 12.0
    passes = (options((0, 1, 2), Distance.RGB, h=h, r=1, a=2, s=2, wmode=wmode),)
    compare(layout("rgb", bits=bits, width=41, height=27), passes)


@pytest.mark.parametrize("distance", [Distance.RGB, Distance.YUV])
def test_joint_small_patch(distance):
    # s=0: the centre samples of all three channels stay in registers (centre_registers).
    family = "rgb" if distance is Distance.RGB else "yuv"
    passes = (options((0, 1, 2), distance, h=4.0, r=1, a=2, s=0),)
    compare(layout(family, bits=16, width=39, height=21), passes)


@pytest.mark.parametrize("transfer", ["direct", "staged-upload", "staged-download"])
def test_other_transfers(transfer):
    compare(
        layout("yuv", 1, 1, 10),
        lumachroma(h=3.0, r=1, a=2, s=3, ref=True),
        ref=True,
        transfer=transfer,
    )
    passes = (options((0, 1, 2), Distance.YUV, h=3.0, r=2, a=2, s=2),)
    compare(layout("yuv", 0, 0, 16), passes, transfer=transfer)


@pytest.mark.parametrize("wmode", list(WeightMode))
@pytest.mark.parametrize("radius", [0, 2])
def test_ref_every_wmode(wmode, radius):
    h = 3.0 if wmode == WeightMode.WELSCH else 12.0
    passes = (options((0,), Distance.LUMA, h=h, r=radius, a=2, s=2, wmode=wmode, ref=True),)
    compare(layout("gray", bits=10), passes, ref=True)


@pytest.mark.parametrize(
    ("a", "s", "wref", "h"),
    [(1, 0, 1.0, 4.0), (3, 1, 0.0, 4.0), (4, 5, 0.5, 3.0), (2, 8, 1.0, 2.0), (6, 4, 1.0, 1.2)],
)
def test_geometry_and_wref(a, s, wref, h):
    passes = (options((0,), Distance.LUMA, h=h, r=1, a=a, s=s, wref=wref),)
    compare(layout("gray", bits=8, width=70, height=45), passes)


@pytest.mark.parametrize("bits", [8, 16, 32])
def test_weights_in_float32_underflow_band(bits):
    # h=1.2 with 10-code noise puts many pixels' largest weight near exp(-90), below float32's
    # smallest normal (zero, as in KNLMeansCL) and far below the floor of the maximum, 2^-23.
    passes = (options((0,), Distance.LUMA, h=1.2, r=1, a=2, s=2),)
    compare(layout("gray", bits=bits, width=40, height=32), passes, noise=0.035)


@pytest.mark.parametrize("shape", [(1, 1), (3, 2), (33, 9), (8, 65)])
def test_tiny_and_odd_frames(shape):
    height, width = shape
    passes = lumachroma(h=4.0, r=1, a=2, s=2)
    compare(layout("yuv", 1, 1, 8, width=width * 2 + 1, height=height * 2 + 1), passes)


@pytest.mark.parametrize("transfer", ["staged", "direct"])
def test_concurrent_random_order_with_eviction(transfer):
    fmt = layout("yuv", 1, 1, 8, width=45, height=31)
    passes = lumachroma(h=4.0, r=2, a=2, s=2, ref=True)
    clips = [SyntheticClip(fmt, 12, seed=3), SyntheticClip(fmt, 12, seed=4)]
    planes = (0, 1, 2)
    sequential = CudaBackend(passes, fmt, device_index=None)
    expected = {n: run(sequential, clips, n, 2, planes) for n in range(12)}
    # Fewer slots than the frames in flight: entries are evicted and re-uploaded under load.
    backend = CudaBackend(passes, fmt, device_index=None, cache_slots=6, transfer=transfer)
    order = [n for n in range(12) for _ in range(3)]
    random.Random(5).shuffle(order)
    results, errors = [], []
    lock = threading.Lock()

    def worker(chunk):
        try:
            for n in chunk:
                out = run(backend, clips, n, 2, planes)
                with lock:
                    results.append((n, out))
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(order[i::6],)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(results) == len(order)
    for n, out in results:
        for plane in planes:
            np.testing.assert_array_equal(out[plane], expected[n][plane], err_msg=f"frame {n}")
    assert backend.memory_bytes() > 0


def test_warm_up_does_not_disturb_frames():
    fmt = layout("yuv", 1, 1, 10, width=40, height=24)
    passes = lumachroma(h=3.0, r=1, a=2, s=2)
    backend = CudaBackend(passes, fmt, device_index=None)
    backend.warm_up()
    clips = [SyntheticClip(fmt, 3, seed=9)]
    cpu = NumpyBackend(passes, fmt)
    for n in range(3):
        got = run(backend, clips, n, 1, (0, 1, 2))
        assert_matches(fmt, got, run(cpu, clips, n, 1, (0, 1, 2)), f"frame {n}")
    assert backend.memory_bytes() > 0


def test_auto_transfer_stages_large_frames_and_one_frame_windows():
    luma8, luma16 = (layout("gray", bits=b, width=1920, height=1080) for b in (8, 16))
    temporal, spatial = ((options((0,), Distance.LUMA, r=r),) for r in (1, 0))
    chosen = [
        CudaBackend(p, f, None).transfer
        for p, f in ((temporal, luma8), (temporal, luma16), (spatial, luma8))
    ]
    assert chosen == ["direct", "staged", "staged"]


def test_unwritten_planes_are_left_alone():
    fmt = layout("yuv", 1, 1, 8, width=32, height=16)
    passes = (options((0,), Distance.LUMA, h=3.0, r=0),)
    backend = CudaBackend(passes, fmt, device_index=None)
    clips = [SyntheticClip(fmt, 1)]
    out = run(backend, clips, 0, 0, (0,))
    assert set(out) == {0}


@pytest.mark.parametrize("radius", [0, 2])
def test_interior_and_border_blocks(radius):
    """Frames large enough for blocks whose regions stay inside the frame (no border checks)
    beside those that reach past it."""
    passes = (options((0,), Distance.LUMA, h=3.0, r=radius, a=2, s=2),)
    compare(layout("gray", bits=8, width=160, height=120), passes)


@pytest.mark.parametrize("family", ["gray", "rgb"])
def test_non_finite_samples_do_not_spread(family):
    """NaN and inf samples pass through; every other output sample is finite and as the
    oracle computes it."""
    fmt = layout(family, bits=32, width=48, height=40)
    distance = Distance.LUMA if family == "gray" else Distance.RGB
    planes = (0,) if family == "gray" else (0, 1, 2)
    passes = (options(planes, distance, h=4.0, r=1, a=2, s=2),)
    clip = SyntheticClip(fmt, 3, seed=4, noise=0.02)
    poisoned = {0: (5, 30), 1: (20, 17), 2: (39, 0)}  # frame -> (y, x) in plane 0
    for n, value in zip(poisoned, (np.inf, np.nan, -np.inf), strict=True):
        plane_values(clip.frames[n][0], fmt.plane_shape(0))[poisoned[n]] = value
    cuda = CudaBackend(passes, fmt, device_index=None)
    cpu = NumpyBackend(passes, fmt)
    for n in range(3):
        got, want = run(cuda, [clip], n, 1, planes), run(cpu, [clip], n, 1, planes)
        for plane in planes:
            expected = want[plane]
            assert np.array_equal(np.isfinite(got[plane]), np.isfinite(expected))
            np.testing.assert_allclose(
                got[plane], expected, rtol=FLOAT_TOLERANCE, atol=FLOAT_TOLERANCE, equal_nan=True
            )
        assert not np.isfinite(want[0][poisoned[n]])
        assert all(int((~np.isfinite(want[p])).sum()) == (p == 0) for p in planes)
