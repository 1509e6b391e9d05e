"""A built-in test clip: a real picture with real motion and known noise, no download needed.

The picture is scikit-image's ``rocket`` sample (NASA, public domain), shipped in
``_data/rocket.npz``. A crop window pans across it, so consecutive frames hold the same
content at different positions, as in real video; white Gaussian noise with a fixed seed per
frame is added on top. The clean clip is returned too, for PSNR.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

__all__ = ["noisy_sample", "psnr", "sample_frames"]

_PICTURE = Path(__file__).with_name("_data") / "rocket.npz"
#: Crop size and pan speed (pixels per frame, x and y) of the sample's camera motion.
_CROP = (320, 480)
_PAN = (2, 3)
MAX_LENGTH = 48


@cache
def _picture() -> np.ndarray:
    with np.load(_PICTURE) as data:
        return data["rgb"]


def sample_frames(length: int = 24) -> list[np.ndarray]:
    """Clean RGB frames (height, width, 3) uint8 of the panning crop."""
    if not 1 <= length <= MAX_LENGTH:
        raise ValueError(f"length must be from 1 to {MAX_LENGTH}, got {length}")
    picture = _picture()
    (h, w), (dy, dx) = _CROP, _PAN
    return [picture[n * dy : n * dy + h, n * dx : n * dx + w] for n in range(length)]


def noisy_sample(core, *, length: int = 24, format_id: int | None = None, sigma: float = 6.0):
    """Return ``(clean, noisy)`` clips of the panning sample.

    Parameters
    ----------
    core : vapoursynth.Core
    length : int
        Number of frames, 1 to 48.
    format_id : int, optional
        VapourSynth format of the clips (default YUV420P8); the clean RGB frames are converted
        with BT.709 coefficients.
    sigma : float
        Standard deviation of the added white Gaussian noise, in 8-bit code values whatever
        the format's depth (the noise is added per plane, with a fixed seed per frame).
    """
    import vapoursynth as vs

    frames = sample_frames(length)
    height, width = frames[0].shape[:2]
    rgb = core.std.BlankClip(width=width, height=height, format=vs.RGB24, length=length)

    def fill_rgb(n: int, f):
        out = f.copy()
        for plane in range(3):
            np.asarray(out[plane])[...] = frames[n][..., plane]
        return out

    rgb = core.std.ModifyFrame(rgb, rgb, fill_rgb)
    fmt = core.get_video_format(format_id if format_id is not None else vs.YUV420P8)
    if fmt.color_family == vs.RGB:
        clean = core.resize.Point(rgb, format=fmt.id)
    else:
        clean = core.resize.Bicubic(rgb, format=fmt.id, matrix_s="709")
    return clean, _add_noise(core, clean, sigma)


def _add_noise(core, clip, sigma: float):
    import vapoursynth as vs

    fmt = clip.format
    is_float = fmt.sample_type == vs.FLOAT
    peak = 1.0 if is_float else float((1 << fmt.bits_per_sample) - 1)
    scale = sigma / 255.0 * peak

    def noise(n: int, f):
        out = f.copy()
        rng = np.random.default_rng(1000 + n)
        for plane in range(fmt.num_planes):
            array = np.asarray(out[plane])
            noisy = array + rng.normal(0.0, scale, array.shape)
            array[...] = noisy if is_float else np.clip(np.rint(noisy), 0, peak)
        return out

    return core.std.ModifyFrame(clip, clip, noise)


def psnr(a: np.ndarray, b: np.ndarray, peak: float) -> float:
    """Peak signal-to-noise ratio in dB of two arrays of the same shape."""
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(peak * peak / mse))
