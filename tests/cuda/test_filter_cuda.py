"""Denoise and NLMeans on the GPU through VapourSynth against the CPU oracle; skip without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from ._gpu import require_cuda

vs = pytest.importorskip("vapoursynth")
require_cuda()

from ..vsclips import (  # noqa: E402
    FORMATS,
    assert_order_independent,
    clip_from_planes,
    frame_planes,
    random_planes,
)

pytestmark = pytest.mark.gpu


def make_clip(core, name, width=61, height=37, length=6, seed=0):
    fmt = core.get_video_format(FORMATS[name])
    width, height = (
        width & ~((1 << fmt.subsampling_w) - 1),
        height & ~((1 << fmt.subsampling_h) - 1),
    )
    frames = [random_planes(fmt, width, height, seed + n) for n in range(length)]
    return clip_from_planes(core, fmt, frames), fmt


def assert_close(fmt, got, want):
    for g, w in zip(got, want, strict=True):
        if fmt.sample_type == vs.FLOAT:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        else:
            assert np.abs(g.astype(np.int64) - w.astype(np.int64)).max() <= 1


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("radius", [0, 1, 3])
def test_every_format_matches_the_cpu(core, name, radius):
    clip, fmt = make_clip(core, name)
    kwargs = dict(radius=radius, strength=12.0, search_radius=2, patch_radius=2)
    gpu = core.avdenoise.Denoise(clip, device="cuda", **kwargs)
    cpu = core.avdenoise.Denoise(clip, device="cpu", **kwargs)
    for n in (0, 2, clip.num_frames - 1):
        assert_close(fmt, frame_planes(gpu.get_frame(n)), frame_planes(cpu.get_frame(n)))


@pytest.mark.parametrize("wmode", [0, 1, 2, 3])
@pytest.mark.parametrize(
    "channels, name",
    [("yuv", "YUV444P8"), ("chroma", "YUV420P10"), ("luma", "GRAY16"), ("rgb", "RGB24")],
)
def test_channels_wmodes_and_ref(core, wmode, channels, name):
    clip, fmt = make_clip(core, name)
    guide, _ = make_clip(core, name, seed=40)
    kwargs = dict(channels=channels, wmode=wmode, wref=0.7, strength=9.0, ref=guide)
    gpu = core.avdenoise.Denoise(clip, device="cuda", **kwargs)
    cpu = core.avdenoise.Denoise(clip, device="cpu", **kwargs)
    assert_close(fmt, frame_planes(gpu.get_frame(3)), frame_planes(cpu.get_frame(3)))


@pytest.mark.parametrize("name", ["YUV420P8", "GRAY16", "RGBS"])
def test_bridge_staged_one_frame_windows_match_the_cpu(core, name):
    """Radius 0 frames are staged: from each thread's second frame on, the bridge copies
    them (clip and ref) into the staging buffers and finishes them (host_step.c)."""
    clip, fmt = make_clip(core, name, width=160, height=90, length=40)
    guide, _ = make_clip(core, name, width=160, height=90, length=40, seed=70)
    kwargs = dict(radius=0, strength=9.0, ref=guide)
    gpu = core.avdenoise.Denoise(clip, device="cuda", **kwargs)
    cpu = core.avdenoise.Denoise(clip, device="cpu", **kwargs)
    order = [int(n) for n in np.random.default_rng(5).permutation(80) % 40]
    futures = [gpu.get_frame_async(n) for n in order]
    for n, future in zip(order, futures, strict=True):
        assert_close(fmt, frame_planes(future.result()), frame_planes(cpu.get_frame(n)))


def test_random_request_order_gives_identical_frames(core):
    clip, _ = make_clip(core, "YUV420P8", width=320, height=180, length=24)
    assert_order_independent(lambda: core.avdenoise.Denoise(clip, device="cuda", radius=2), 24)


def test_nlmeans_runs_on_the_gpu_by_default(core):
    clip, fmt = make_clip(core, "YUV420P8")
    gpu = core.avdenoise.NLMeans(clip, h=6.0)
    cpu = core.avdenoise.Denoise(clip, strength=6.0, channels="luma", device="cpu")
    assert_close(fmt, frame_planes(gpu.get_frame(1)), frame_planes(cpu.get_frame(1)))


def _mean_codes(fmt, got, want) -> float:
    """Mean absolute difference over all planes, in 8-bit codes."""
    peak = 1.0 if fmt.sample_type == vs.FLOAT else (1 << fmt.bits_per_sample) - 1
    diffs = [np.abs(g.astype(np.float64) - w).mean() for g, w in zip(got, want, strict=True)]
    return float(np.mean(diffs)) * 255 / peak


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("GRAYS", dict(sigma=10.0)),
        ("YUV444PS", dict(sigma=[10.0, 6.0], radius=1, chroma=True)),
        ("YUV420P8", dict(sigma=[10.0, 0.0], radius=1)),
        ("RGB24", dict(sigma=10.0, radius=2)),
    ],
)
def test_bm3d_function_on_the_gpu_matches_the_cpu(core, name, kwargs):
    """BM3D (BM3DCUDA's signature) through VapourSynth: CUDA within 0.1 code of the oracle,
    sigma-0 planes bit-identical, at the clip ends too (windows clamp there)."""
    clip, fmt = make_clip(core, name, width=64, height=48, length=5)
    gpu = core.avdenoise.BM3D(clip, device="cuda", **kwargs)
    cpu = core.avdenoise.BM3D(clip, device="cpu", **kwargs)
    for n in (0, 2, clip.num_frames - 1):
        got, want = frame_planes(gpu.get_frame(n)), frame_planes(cpu.get_frame(n))
        assert _mean_codes(fmt, got, want) <= 0.1, n
        sigma = kwargs["sigma"] if isinstance(kwargs["sigma"], list) else [kwargs["sigma"]]
        if sigma[-1] == 0.0:
            source = frame_planes(clip.get_frame(n))
            assert all(np.array_equal(g, s) for g, s in zip(got[1:], source[1:], strict=True))


def test_two_stage_vbm3d_is_order_independent_on_the_gpu(core):
    clip, _ = make_clip(core, "YUV420P8", width=64, height=48, length=6)

    def make():
        return core.avdenoise.Denoise(clip, algorithm="bm3d", radius=1, strength=8.0,
                                      device="cuda")  # fmt: skip

    assert_order_independent(make, clip.num_frames)
