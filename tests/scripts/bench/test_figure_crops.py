"""scripts/bench/_figure_crops.py: the before/after strip, on a small crop of the sample clip."""

from __future__ import annotations

import numpy as np
import pytest
from _figure_crops import DEFAULT_CROP, Crop, strip_size, write_crops, write_strengths
from PIL import Image

from avdenoise_vs._plugin.devload import plugin_installed
from avdenoise_vs.sample import sample_frames

#: A window across the rocket, its edges against the sky, small enough for the CPU backend's
#: BM3D to take about a second.
SMALL = Crop(frame=1, x=290, y=150, width=40, height=32, margin=8)


@pytest.fixture(scope="module")
def strip(tmp_path_factory: pytest.TempPathFactory):
    """The strip of SMALL, written once: its path and panels."""
    if not plugin_installed():
        pytest.skip("the plugin is not installed where VapourSynth autoloads (editable install?)")
    path = tmp_path_factory.mktemp("figures") / "crops.png"
    return path, write_crops(path, SMALL, sigma=8.0)


def test_the_png_holds_four_zoomed_panels(strip) -> None:
    path, panels = strip
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size == strip_size(4, SMALL.width, SMALL.height)
    assert [p.label for p in panels] == [
        "clean (the reference)",
        "noisy, sigma 8",
        "NLM, strength 5",
        "BM3D, strength 8",
    ]
    assert all(p.pixels.shape == (SMALL.height, SMALL.width, 3) for p in panels)


def test_the_clean_panel_is_the_window_of_the_sample_frame(strip) -> None:
    _, panels = strip
    frame = sample_frames(SMALL.frame + 1)[SMALL.frame]
    window = frame[SMALL.y : SMALL.y + SMALL.height, SMALL.x : SMALL.x + SMALL.width]
    np.testing.assert_array_equal(panels[0].pixels, window)


def test_both_denoisers_raise_psnr_over_the_noisy_panel(strip) -> None:
    _, (clean, noisy, nlm, bm3d) = strip
    assert clean.psnr is None
    # White noise of deviation 8 codes: 20 log10(255 / 8) = 30.07 dB, less a little clipping.
    assert 29.0 < noisy.psnr < 31.5
    assert nlm.psnr > noisy.psnr + 1.0
    assert bm3d.psnr > noisy.psnr + 1.0


@pytest.mark.parametrize(
    "crop",
    [
        Crop(frame=1, x=4, y=40, width=16, height=16, margin=8),  # margin left of the frame
        Crop(frame=1, x=460, y=40, width=16, height=16, margin=8),  # past the right edge
        Crop(frame=47, x=40, y=40, width=16, height=16),  # no frame after it
    ],
)
def test_a_crop_outside_the_clip_is_an_error(crop: Crop) -> None:
    with pytest.raises(ValueError, match="frame"):
        crop.check(480, 320)


def test_the_default_crop_fits_the_sample() -> None:
    height, width = sample_frames(1)[0].shape[:2]
    DEFAULT_CROP.check(width, height)


def test_strip_size_counts_zoom_gaps_and_label() -> None:
    assert strip_size(4, 128, 136) == (2 * 8 + 4 * 256 + 3 * 8, 2 * 8 + 24 + 272)


@pytest.fixture(scope="module")
def strengths(tmp_path_factory: pytest.TempPathFactory):
    """The strength figure of a small window of the astronaut's face, written once."""
    if not plugin_installed():
        pytest.skip("the plugin is not installed where VapourSynth autoloads (editable install?)")
    pytest.importorskip("skimage")
    path = tmp_path_factory.mktemp("figures") / "strengths.png"
    return path, write_strengths(path, window=(200, 100, 32), margin=8, strengths=(0.0, 2.0, 7.0))


def test_the_strength_figure_holds_two_rows_of_panels(strengths) -> None:
    path, rows = strengths
    assert [[p.label for p in row] for row in rows] == [
        ["noisy, sigma 7", "NLM 2", "NLM 7"],
        ["clean", "BM3D 2", "BM3D 7"],
    ]
    with Image.open(path) as image:
        width, height = strip_size(3, 32, 32)
        assert image.size == (width, 2 * height)


def test_a_strength_near_the_noise_raises_psnr_and_the_clean_panel_has_none(strengths) -> None:
    _, (nlm, bm3d) = strengths
    noisy, clean = nlm[0], bm3d[0]
    assert clean.psnr is None
    assert 30.0 < noisy.psnr < 32.5  # deviation 7: 20 log10(255 / 7) = 31.2 dB
    assert nlm[2].psnr > noisy.psnr + 0.5
    assert bm3d[2].psnr > noisy.psnr + 0.5
    # Strength 2 is far below the noise: NLM leaves it nearly as it was.
    assert abs(nlm[1].psnr - noisy.psnr) < 0.5
