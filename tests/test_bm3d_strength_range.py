"""BM3D across the whole accepted strength range (CPU): any strength keeps the picture's
brightness, however smooth the result (the Wiener stage keeps the group DC)."""

from __future__ import annotations

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs._params.denoise import MAX_SETTING

from .vsclips import clip_from_planes, frame_planes

WIDTH, HEIGHT, LENGTH = 32, 24, 3
STRENGTHS = (100.0, 1e4, MAX_SETTING)
#: A small search keeps each call fast; the range bug does not depend on it.
FAST = dict(block_step=4, bm_range=4)


def grey_clip(core, fmt_id, mean=0.5, seed=0):
    """A mid-grey clip with noise of deviation 0.05 (about 13 codes at 8 bits)."""
    fmt = core.get_video_format(fmt_id)
    rng = np.random.default_rng(seed)
    peak = 1.0 if fmt.sample_type == vs.FLOAT else (1 << fmt.bits_per_sample) - 1
    shapes = [(HEIGHT, WIDTH)] + [(HEIGHT >> fmt.subsampling_h, WIDTH >> fmt.subsampling_w)] * (
        fmt.num_planes - 1
    )
    dtype = np.float32 if fmt.sample_type == vs.FLOAT else np.uint8
    frames = []
    for _ in range(LENGTH):
        planes = [np.clip(mean + rng.normal(0, 0.05, shape), 0, 1) * peak for shape in shapes]
        frames.append([(p if dtype is np.float32 else np.rint(p)).astype(dtype) for p in planes])
    return clip_from_planes(core, fmt, frames), frames, peak


def assert_brightness_kept(out, frames, peak):
    for n in range(LENGTH):
        for got, was in zip(frame_planes(out.get_frame(n)), frames[n], strict=False):
            assert np.all(np.isfinite(got)), f"frame {n}: non-finite samples"
            gap = abs(float(np.mean(got)) - float(np.mean(was))) / peak
            assert gap < 0.01, (
                f"frame {n}: mean {np.mean(got) / peak:.3f}, input {np.mean(was) / peak:.3f}"
            )


@pytest.mark.parametrize("strength", STRENGTHS)
@pytest.mark.parametrize("stages", [1, 2])
@pytest.mark.parametrize("radius", [0, 1])
@pytest.mark.parametrize(
    "fmt_id, channels", [(vs.GRAYS, "luma"), (vs.YUV444PS, "yuv")], ids=["GRAYS", "YUV444PS"]
)
def test_denoise_keeps_brightness_at_any_strength(core, fmt_id, channels, radius, stages, strength):
    clip, frames, peak = grey_clip(core, fmt_id)
    out = core.avdenoise.Denoise(
        clip, algorithm="bm3d", channels=channels, radius=radius, stages=stages,
        strength=strength, device="cpu", **FAST,
    )  # fmt: skip
    assert_brightness_kept(out, frames, peak)


@pytest.mark.parametrize("fmt_id", [vs.GRAY8, vs.YUV420P8], ids=["GRAY8", "YUV420P8"])
def test_denoise_integer_clip_at_max_strength(core, fmt_id):
    clip, frames, peak = grey_clip(core, fmt_id, mean=0.3)
    out = core.avdenoise.Denoise(clip, algorithm="bm3d", strength=MAX_SETTING, device="cpu", **FAST)
    assert_brightness_kept(out, frames, peak)


@pytest.mark.parametrize("with_ref", [False, True])
@pytest.mark.parametrize("radius", [0, 1])
def test_bm3d_dropin_keeps_brightness_at_max_sigma(core, radius, with_ref):
    """The drop-in without ref is the basic estimate, with it the Wiener stage alone."""
    clip, frames, peak = grey_clip(core, vs.YUV444PS)
    ref = grey_clip(core, vs.YUV444PS, seed=1)[0] if with_ref else None
    for chroma in (False, True):
        out = core.avdenoise.BM3D(
            clip, ref=ref, sigma=[MAX_SETTING], radius=radius, chroma=chroma, device="cpu",
            block_step=[4], bm_range=[4],
        )  # fmt: skip
        assert_brightness_kept(out, frames, peak)
