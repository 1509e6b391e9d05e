"""Measure Denoise's NLM strength against Gaussian noise: the table behind its default.

    python scripts/strength_table.py                  # the README's table (a few minutes)
    python scripts/strength_table.py --quick          # one picture, fewer strengths

Each picture is seen through a crop panning 3 pixels a frame (3 frames, so that radius=1
has real motion to match), converted to YUV 4:2:0 8-bit (GRAY for gray pictures) and given
white Gaussian noise of each sigma on every plane. The middle frame is denoised with
Denoise's defaults (radius=1, search_radius=2, patch_radius=4, channels='lumachroma') on the
CPU backend at each strength; the table gives the luma PSNR gain in dB (output against the
clean frame, minus noisy against clean), averaged over the pictures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import vapoursynth as vs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from avdenoise_vs.sample import psnr, sample_frames

CROP, PAN, LENGTH = 192, 3, 3
SIGMAS = (2.0, 3.0, 4.0, 6.0, 8.0)
STRENGTHS = (1.2, 2.0, 2.4, 2.8, 3.0, 3.2, 3.6, 4.0, 5.0, 6.0, 8.0)


def pictures(quick: bool) -> dict[str, np.ndarray]:
    """Test pictures: the package's sample (rocket) and scikit-image's bundled ones."""
    found = {"rocket": sample_frames(1)[0]}
    if quick:
        return found
    from skimage import data

    for name in ("camera", "astronaut", "coffee", "brick", "grass"):
        found[name] = getattr(data, name)()
    return found


def clips(core, picture: np.ndarray, sigma: float):
    """(clean, noisy) clips of a picture panning under a crop window."""
    gray = picture.ndim == 2
    rng = np.random.default_rng(7)
    crops = [picture[n * PAN : n * PAN + CROP, n * PAN : n * PAN + CROP] for n in range(LENGTH)]
    source = core.std.BlankClip(
        width=CROP, height=CROP, format=vs.GRAY8 if gray else vs.RGB24, length=LENGTH
    )

    def fill(n: int, f):
        out = f.copy()
        for p in range(f.format.num_planes):
            np.asarray(out[p])[...] = crops[n] if gray else crops[n][..., p]
        return out

    clean = core.std.ModifyFrame(source, source, fill)
    if not gray:
        clean = core.resize.Bicubic(clean, format=vs.YUV420P8, matrix_s="709")
    noise = [
        [rng.normal(0.0, sigma, np.asarray(frame[p]).shape) for p in range(frame.format.num_planes)]
        for frame in (clean.get_frame(n) for n in range(LENGTH))
    ]

    def add(n: int, f):
        out = f.copy()
        for p in range(f.format.num_planes):
            plane = np.asarray(out[p])
            plane[...] = np.clip(np.rint(plane + noise[n][p]), 0, 255)
        return out

    return clean, core.std.ModifyFrame(clean, clean, add)


def luma(clip, n: int) -> np.ndarray:
    return np.array(clip.get_frame(n)[0], copy=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    core = vs.core
    import avdenoise_vs  # noqa: F401  (loads an editable checkout's bridge)

    strengths = STRENGTHS[::2] if args.quick else STRENGTHS
    gains = {(s, h): [] for s in SIGMAS for h in strengths}
    for name, picture in pictures(args.quick).items():
        for sigma in SIGMAS:
            clean, noisy = clips(core, picture, sigma)
            want, before = luma(clean, 1), luma(noisy, 1)
            for h in strengths:
                out = core.avdenoise.Denoise(noisy, strength=h, device="cpu")
                gain = psnr(luma(out, 1), want, 255.0) - psnr(before, want, 255.0)
                gains[sigma, h].append(gain)
                print(f"{name:10s} sigma {sigma:g} strength {h:g}: {gain:+.2f} dB", flush=True)
    print("\n| strength | " + " | ".join(f"sigma {s:g}" for s in SIGMAS) + " |")
    print("|---|" + "---|" * len(SIGMAS))
    for h in strengths:
        row = " | ".join(f"{np.mean(gains[s, h]):+.2f}" for s in SIGMAS)
        print(f"| {h:g} | {row} |")


if __name__ == "__main__":
    main()
