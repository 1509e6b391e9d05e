"""The test material of ``bm3d_quality.py`` and its runs: crops, pan and zoom clips, scores.

Every noise draw has a fixed seed, so that two runs (and a run merged with an earlier report)
score the same noisy inputs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
from _bm3d_quality_backends import BACKENDS
from skimage import data
from skimage.metrics import peak_signal_noise_ratio, structural_similarity
from skimage.transform import resize

__all__ = [
    "COLOUR",
    "GREY",
    "PAN_STEP",
    "ZOOM_STEP",
    "noise",
    "run_images",
    "run_videos",
    "scores",
    "sequence",
    "video_reach",
]

log = logging.getLogger("bm3d_quality")

GREY = ("camera", "moon", "coins")
COLOUR = ("astronaut", "coffee", "chelsea")
# Crop origins chosen on detailed areas; a crop of --size pixels starts here (clamped).
ORIGINS = {
    "camera": (100, 200), "moon": (200, 200), "coins": (80, 100),
    "astronaut": (40, 180), "coffee": (100, 200), "chelsea": (80, 100),
}  # fmt: skip
PAN_STEP = (1, 2)  # pixels per frame (down, right)
LUMA = np.array([0.299, 0.587, 0.114])
ZOOM_STEP = 0.03  # relative scale change per frame


def _crop(name: str, size: int) -> np.ndarray:
    """A ``size`` x ``size`` crop of a bundled picture, float64 in [0, 255]."""
    img = getattr(data, name)().astype(np.float64)
    y0 = min(ORIGINS[name][0], img.shape[0] - size)
    x0 = min(ORIGINS[name][1], img.shape[1] - size)
    return img[y0 : y0 + size, x0 : x0 + size]


def sequence(name: str, motion: str, size: int, reach: int) -> list[np.ndarray]:
    """``2 reach + 1`` clean grey frames: a pan, or a zoom about the crop centre (the luma of
    a colour picture, BT.601 weights)."""
    img = getattr(data, name)().astype(np.float64)
    if img.ndim == 3:
        img = img[..., :3] @ LUMA
    # Keep every frame inside the picture: the pan travels reach * step pixels and the zoom
    # widens the region by reach * ZOOM_STEP of the size on each side.
    margin = size // 2 + reach * max(PAN_STEP) + int(np.ceil(size * ZOOM_STEP * reach)) + 1
    cy, cx = (
        int(np.clip(o + size // 2, margin, n - margin)) for o, n in zip(ORIGINS[name], img.shape)
    )
    frames = []
    for k in range(-reach, reach + 1):
        if motion == "pan":
            y, x = cy - size // 2 + k * PAN_STEP[0], cx - size // 2 + k * PAN_STEP[1]
            frames.append(img[y : y + size, x : x + size])
        else:
            half = int(round(size * (1 + ZOOM_STEP * k) / 2))
            region = img[cy - half : cy + half, cx - half : cx + half]
            frames.append(resize(region, (size, size), order=3, anti_aliasing=True) * 1.0)
    return frames


def scores(clean: np.ndarray, est: np.ndarray) -> tuple[float, float]:
    """PSNR and SSIM of an estimate clipped to [0, 255]."""
    est = np.clip(est, 0, 255)
    axis = -1 if clean.ndim == 3 else None
    psnr = peak_signal_noise_ratio(clean, est, data_range=255)
    ssim = structural_similarity(clean, est, data_range=255, channel_axis=axis)
    return float(psnr), float(ssim)


def noise(shape, sigma: float, seed: int | Sequence[int]) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, sigma, shape)


def run_images(names, sigmas, size, backends) -> list[dict]:
    """Score every backend on every picture and sigma."""
    rows = []
    for ni, name in enumerate(names):
        clean = _crop(name, size)
        if clean.ndim == 3:
            clean = clean[..., :3]
        for sigma in sigmas:
            noisy = clean + noise(clean.shape, sigma, seed=1000 * ni + int(sigma))
            row = {"image": name, "sigma": sigma, "noisy": scores(clean, noisy)}
            for b in backends:
                start = time.perf_counter()
                row[b] = scores(clean, BACKENDS[b].image(noisy, sigma))
                log.info("%s sigma %g %s: %.2f dB (%.1f s)", name, sigma, b, row[b][0],
                         time.perf_counter() - start)  # fmt: skip
            rows.append(row)
    return rows


def video_reach(radii) -> int:
    """Frames needed on each side of the scored one: two stages read ``n - 4r .. n + 4r``."""
    return 4 * max(radii)


def run_videos(names, sigmas, size, radii, backends) -> list[dict]:
    """Score V-BM3D at each radius (0 = spatial) on the centre frame of pan and zoom clips."""
    rows = []
    reach = video_reach(radii)
    for ni, name in enumerate(names):
        for motion in ("pan", "zoom"):
            clean = sequence(name, motion, size, reach)
            for sigma in sigmas:
                noisy = [c + noise(c.shape, sigma, seed=(7, ni, k, int(sigma)))
                         for k, c in enumerate(clean)]  # fmt: skip
                row = {"image": name, "motion": motion, "sigma": sigma,
                       "noisy": scores(clean[reach], noisy[reach])}  # fmt: skip
                for b in backends:
                    if BACKENDS[b].video is None:
                        continue
                    for r in radii:
                        start = time.perf_counter()
                        est = BACKENDS[b].video(noisy, reach, sigma, r)
                        row[b, r] = scores(clean[reach], est)
                        log.info("%s %s sigma %g %s r=%d: %.2f dB (%.1f s)", name, motion, sigma,
                                 b, r, row[b, r][0], time.perf_counter() - start)  # fmt: skip
                rows.append(row)
    return rows
