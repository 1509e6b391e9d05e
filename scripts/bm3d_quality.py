"""Measure BM3D denoising quality (PSNR, SSIM) on scikit-image's bundled pictures.

Compares the NumPy reference (``avdenoise_vs._reference.bm3d``) with the Tampere ``bm3d``
package (profile "np") on grey and colour crops with white Gaussian noise, and V-BM3D at
temporal radius 1 and 2 against spatial BM3D on pan and zoom sequences cut from the grey
pictures. Writes a Markdown report and, when matplotlib is installed, a PSNR-versus-sigma plot.

Run from the repository root::

    PYTHONPATH=. python scripts/bm3d_quality.py --size 96 --out docs/BM3D_QUALITY.md

Backends are looked up in :data:`BACKENDS`; a CUDA backend is added there as one more entry.
Estimates are clipped to [0, 255] before scoring; the noise is not clipped (the usual AWGN
protocol). Every noise draw has a fixed seed.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from skimage import data
from skimage.metrics import peak_signal_noise_ratio, structural_similarity
from skimage.transform import resize

from avdenoise_vs._reference.bm3d import bm3d

log = logging.getLogger("bm3d_quality")

GREY = ("camera", "moon", "coins")
COLOUR = ("astronaut", "coffee", "chelsea")
# Crop origins chosen on detailed areas; a crop of --size pixels starts here (clamped).
ORIGINS = {
    "camera": (100, 200), "moon": (200, 200), "coins": (80, 100),
    "astronaut": (40, 180), "coffee": (100, 200), "chelsea": (80, 100),
}  # fmt: skip
# OPP colour transform of CBM3D (Dabov et al., ICIP 2007).
OPP = np.array([[1 / 3, 1 / 3, 1 / 3], [1 / 2, 0, -1 / 2], [1 / 4, -1 / 2, 1 / 4]])
PAN_STEP = (1, 2)  # pixels per frame (down, right)
ZOOM_STEP = 0.03  # relative scale change per frame


@dataclass(frozen=True)
class Backend:
    """A denoiser under test.

    Attributes
    ----------
    image : callable
        ``image(noisy, sigma)``: ``noisy`` is ``H x W`` or RGB ``H x W x 3`` in 8-bit scale;
        returns the estimate in the same layout.
    video : callable or None
        ``video(frames, center, sigma)`` on a window of grey frames; None if unsupported.
    """

    image: Callable[[np.ndarray, float], np.ndarray]
    video: Callable[[list[np.ndarray], int, float], np.ndarray] | None


def _reference_image(noisy: np.ndarray, sigma: float) -> np.ndarray:
    """NumPy reference: grey BM3D, or CBM3D in OPP with per-channel sigma."""
    if noisy.ndim == 2:
        return bm3d([noisy], 0, sigma)
    opp = np.einsum("ij,hwj->ihw", OPP, noisy)
    est = bm3d([opp], 0, sigma * np.linalg.norm(OPP, axis=1), joint=True)
    return np.einsum("ij,jhw->hwi", np.linalg.inv(OPP), est)


def _tampere_image(noisy: np.ndarray, sigma: float) -> np.ndarray:
    """Tampere ``bm3d`` 4.x, profile "np" (``bm3d_rgb`` in its OPP space for colour)."""
    import bm3d as tampere  # optional dependency, imported only when asked for

    if noisy.ndim == 2:
        return tampere.bm3d(noisy / 255, sigma / 255, "np") * 255
    return tampere.bm3d_rgb(noisy / 255, sigma / 255, "np") * 255


BACKENDS: dict[str, Backend] = {
    "reference": Backend(image=_reference_image, video=lambda f, c, s: bm3d(f, c, s)),
    "tampere": Backend(image=_tampere_image, video=None),
}


def _crop(name: str, size: int) -> np.ndarray:
    """A ``size`` x ``size`` crop of a bundled picture, float64 in [0, 255]."""
    img = getattr(data, name)().astype(np.float64)
    y0 = min(ORIGINS[name][0], img.shape[0] - size)
    x0 = min(ORIGINS[name][1], img.shape[1] - size)
    return img[y0 : y0 + size, x0 : x0 + size]


def _sequence(name: str, motion: str, size: int, radius: int) -> list[np.ndarray]:
    """``2 radius + 1`` clean grey frames: a pan, or a zoom about the crop centre."""
    img = getattr(data, name)().astype(np.float64)
    # Keep every frame inside the picture: the pan travels radius * step pixels and the zoom
    # widens the region by radius * ZOOM_STEP of the size on each side.
    margin = size // 2 + radius * max(PAN_STEP) + int(np.ceil(size * ZOOM_STEP * radius)) + 1
    cy, cx = (
        int(np.clip(o + size // 2, margin, n - margin)) for o, n in zip(ORIGINS[name], img.shape)
    )
    frames = []
    for k in range(-radius, radius + 1):
        if motion == "pan":
            y, x = cy - size // 2 + k * PAN_STEP[0], cx - size // 2 + k * PAN_STEP[1]
            frames.append(img[y : y + size, x : x + size])
        else:
            half = int(round(size * (1 + ZOOM_STEP * k) / 2))
            region = img[cy - half : cy + half, cx - half : cx + half]
            frames.append(resize(region, (size, size), order=3, anti_aliasing=True) * 1.0)
    return frames


def _scores(clean: np.ndarray, est: np.ndarray) -> tuple[float, float]:
    """PSNR and SSIM of an estimate clipped to [0, 255]."""
    est = np.clip(est, 0, 255)
    axis = -1 if clean.ndim == 3 else None
    psnr = peak_signal_noise_ratio(clean, est, data_range=255)
    ssim = structural_similarity(clean, est, data_range=255, channel_axis=axis)
    return float(psnr), float(ssim)


def _noise(shape, sigma: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, sigma, shape)


def run_images(names, sigmas, size, backends) -> list[dict]:
    """Score every backend on every picture and sigma."""
    rows = []
    for ni, name in enumerate(names):
        clean = _crop(name, size)
        if clean.ndim == 3:
            clean = clean[..., :3]
        for sigma in sigmas:
            noisy = clean + _noise(clean.shape, sigma, seed=1000 * ni + int(sigma))
            row = {"image": name, "sigma": sigma, "noisy": _scores(clean, noisy)}
            for b in backends:
                start = time.perf_counter()
                row[b] = _scores(clean, BACKENDS[b].image(noisy, sigma))
                log.info("%s sigma %g %s: %.2f dB (%.1f s)", name, sigma, b, row[b][0],
                         time.perf_counter() - start)  # fmt: skip
            rows.append(row)
    return rows


def run_videos(names, sigmas, size, radii, backends) -> list[dict]:
    """Score V-BM3D at each radius (0 = spatial) on pan and zoom sequences."""
    rows = []
    top = max(radii)
    for ni, name in enumerate(names):
        for motion in ("pan", "zoom"):
            clean = _sequence(name, motion, size, top)
            for sigma in sigmas:
                noisy = [c + _noise(c.shape, sigma, seed=7000 + 100 * ni + 10 * k + int(sigma))
                         for k, c in enumerate(clean)]  # fmt: skip
                row = {"image": name, "motion": motion, "sigma": sigma,
                       "noisy": _scores(clean[top], noisy[top])}  # fmt: skip
                for b in backends:
                    if BACKENDS[b].video is None:
                        continue
                    for r in radii:
                        window = noisy[top - r : top + r + 1]
                        row[b, r] = _scores(clean[top], BACKENDS[b].video(window, r, sigma))
                        log.info("%s %s sigma %g %s r=%d: %.2f dB", name, motion, sigma, b, r,
                                 row[b, r][0])  # fmt: skip
                rows.append(row)
    return rows


def _cell(score) -> str:
    return f"{score[0]:.2f} / {score[1]:.3f}"


def markdown(image_rows, video_rows, backends, radii, args) -> str:
    """Render the report."""
    out = [
        "# BM3D quality",
        "",
        f"Generated by `scripts/bm3d_quality.py --size {args.size}`: crops of {args.size} x "
        f"{args.size} px from scikit-image's samples, white Gaussian noise (fixed seeds), "
        "estimates clipped to [0, 255]. Cells are PSNR (dB) / SSIM. `reference` is the NumPy "
        "implementation (`avdenoise_vs._reference.bm3d`, defaults: block_step 3, bm_range 19, "
        "groups of 16/32, lambda 2.7; colour = CBM3D in OPP), `tampere` is the `bm3d` package "
        'profile "np" (`bm3d_rgb` for colour).',
        "",
        "## Still images",
        "",
        "| image | sigma | noisy | " + " | ".join(backends) + " |",
        "|---|---|---|" + "---|" * len(backends),
    ]
    for r in image_rows:
        cells = [_cell(r[b]) for b in backends]
        out.append(
            f"| {r['image']} | {r['sigma']:g} | {_cell(r['noisy'])} | " + " | ".join(cells) + " |"
        )
    deltas = [f"{b} - {backends[0]}" for b in backends[1:]]
    out += ["", "### Mean PSNR per sigma (dB)", "", "| sigma | " + " | ".join(backends + deltas)
            + " |", "|---|" + "---|" * (len(backends) + len(deltas))]  # fmt: skip
    for sigma, means in _mean_psnr(image_rows, backends).items():
        cells = [f"{m:.2f}" for m in means] + [f"{m - means[0]:+.2f}" for m in means[1:]]
        out.append(f"| {sigma:g} | " + " | ".join(cells) + " |")
    video_backends = [b for b in backends if BACKENDS[b].video is not None]
    if video_rows and video_backends:
        cols = [(b, r) for b in video_backends for r in radii]
        out += ["", "## Video (V-BM3D)", "",
                f"Pan: {PAN_STEP[0]} px down and {PAN_STEP[1]} px right per frame. Zoom: "
                f"{ZOOM_STEP:.0%} scale change per frame (bicubic). Radius 0 is spatial BM3D; "
                "the centre frame of the window is scored.", "",
                "| image | motion | sigma | noisy | " + " | ".join(f"{b} r={r}" for b, r in cols)
                + " |", "|---|---|---|---|" + "---|" * len(cols)]  # fmt: skip
        for r in video_rows:
            out.append(f"| {r['image']} | {r['motion']} | {r['sigma']:g} | {_cell(r['noisy'])} | "
                       + " | ".join(_cell(r[c]) for c in cols) + " |")  # fmt: skip
    return "\n".join(out) + "\n"


def _mean_psnr(rows, keys) -> dict[float, list[float]]:
    """Mean PSNR over images for each sigma and key."""
    sigmas = sorted({r["sigma"] for r in rows})
    return {s: [float(np.mean([r[k][0] for r in rows if r["sigma"] == s])) for k in keys]
            for s in sigmas}  # fmt: skip


def plot(image_rows, video_rows, backends, radii, path: Path) -> None:
    """PSNR versus sigma: still-image means per backend, and video means per radius."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed; skipping the plot %s", path)
        return
    fig, axes = plt.subplots(1, 2 if video_rows else 1, figsize=(11 if video_rows else 6, 4))
    axes = np.atleast_1d(axes)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for kind, names in (("grey", GREY), ("colour", COLOUR)):
        rows = [r for r in image_rows if r["image"] in names]
        if not rows:
            continue
        means = _mean_psnr(rows, backends)
        for i, key in enumerate(backends):
            axes[0].plot(list(means), [m[i] for m in means.values()], marker="o",
                         color=colours[i % len(colours)],
                         linestyle="-" if kind == "grey" else "--", label=f"{key} ({kind})")  # fmt: skip
    axes[0].set(title="Still images (mean)", xlabel="sigma", ylabel="PSNR (dB)")
    axes[0].legend(fontsize=7)
    if video_rows:
        keys = [(b, r) for b in backends if BACKENDS[b].video is not None for r in radii]
        means = _mean_psnr(video_rows, keys)
        for i, (b, r) in enumerate(keys):
            axes[1].plot(
                list(means), [m[i] for m in means.values()], marker="o", label=f"{b} r={r}"
            )
        axes[1].set(title="Pan/zoom sequences (mean)", xlabel="sigma", ylabel="PSNR (dB)")
        axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    log.info("wrote %s", path)


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=128, help="crop side in pixels")
    parser.add_argument("--sigmas", type=_floats, default=[5, 10, 15, 25, 50])
    parser.add_argument("--video-sigmas", type=_floats, default=[10, 25],
                        help="noise levels for the sequences (empty to skip them)")  # fmt: skip
    parser.add_argument("--radii", type=lambda t: [int(v) for v in t.split(",")], default=[0, 1, 2])
    parser.add_argument("--images", default=",".join(GREY + COLOUR))
    parser.add_argument("--backends", default="reference,tampere",
                        help=f"comma-separated, from: {', '.join(BACKENDS)}")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("docs/BM3D_QUALITY.md"))
    parser.add_argument("--plot", type=Path, default=None,
                        help="PNG path (default: --out with suffix .png)")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    backends = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backends {unknown}; known: {sorted(BACKENDS)}")
    names = [n for n in args.images.split(",") if n]
    image_rows = run_images(names, args.sigmas, args.size, backends)
    grey = [n for n in names if n in GREY]
    video_rows = run_videos(grey, args.video_sigmas, args.size, args.radii, backends)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown(image_rows, video_rows, backends, args.radii, args))
    log.info("wrote %s", args.out)
    plot(image_rows, video_rows, backends, args.radii, args.plot or args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
