"""Measure Denoise's strength against Gaussian noise, per algorithm: the tables behind its
defaults.

    python scripts/bench/strength_table.py                  # the README's tables (about 5 minutes)
    python scripts/bench/strength_table.py --quick          # one picture, fewer strengths
    python scripts/bench/strength_table.py --algorithm bm3d --crop 96

Each picture is seen through a crop panning 3 pixels a frame (3 frames, so that NLM's
radius=1 has real motion to match), converted to YUV 4:2:0 8-bit (GRAY for gray pictures)
and given white Gaussian noise of each sigma on every plane. The middle frame's luma is
denoised with Denoise's other defaults for the algorithm (NLM: radius=1, search_radius=2,
patch_radius=4; BM3D: radius=0, stages=2, block_step=3, bm_range=19) on the CPU backend at
each strength; luma alone, since the luma pass does not depend on the chroma ones. Each table
gives the luma PSNR gain in dB (output against the clean frame, minus noisy against clean),
averaged over the pictures, with the algorithm's default strength in bold, and the strength
whose smallest gain over sigma 5 to 10 is largest.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import vapoursynth as vs

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from avdenoise_vs._params import DENOISE_PARAMS
from avdenoise_vs.sample import psnr, sample_frames

CROP, PAN, LENGTH = 128, 3, 3
SIGMAS = (2.0, 3.0, 5.0, 8.0, 10.0)
#: The noise the defaults are chosen for (the pick: best worst case over these sigmas).
TARGET_SIGMAS = (5.0, 8.0, 10.0)
STRENGTHS = {
    "nlm": (1.2, 2.0, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 8.0),
    "bm3d": (2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0),
}


def pictures(quick: bool) -> dict[str, np.ndarray]:
    """Test pictures: the package's sample (rocket) and scikit-image's bundled ones."""
    found = {"rocket": sample_frames(1)[0]}
    if quick:
        return found
    from skimage import data

    for name in ("camera", "astronaut", "coffee", "brick", "grass"):
        found[name] = getattr(data, name)()
    return found


def clips(core, picture: np.ndarray, sigma: float, crop: int = CROP):
    """(clean, noisy) clips of a picture panning under a `crop`-pixel square window."""
    gray = picture.ndim == 2
    rng = np.random.default_rng(7)
    crops = [picture[n * PAN : n * PAN + crop, n * PAN : n * PAN + crop] for n in range(LENGTH)]
    source = core.std.BlankClip(
        width=crop, height=crop, format=vs.GRAY8 if gray else vs.RGB24, length=LENGTH
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


def default_strength(algorithm: str) -> float:
    """Denoise's default strength for `algorithm`, from the parameter table."""
    return next(p for p in DENOISE_PARAMS if p.name == "strength").default_for(algorithm)


def measure(core, algorithm: str, strengths, pics, crop: int) -> dict:
    """Gains by (sigma, strength), one per picture."""
    gains = {(s, h): [] for s in SIGMAS for h in strengths}
    for name, picture in pics.items():
        for sigma in SIGMAS:
            clean, noisy = clips(core, picture, sigma, crop)
            want, before = luma(clean, 1), luma(noisy, 1)
            for h in strengths:
                out = core.avdenoise.Denoise(
                    noisy, algorithm=algorithm, channels="luma", strength=h, device="cpu"
                )
                gain = psnr(luma(out, 1), want, 255.0) - psnr(before, want, 255.0)
                gains[sigma, h].append(gain)
                print(f"{algorithm} {name:10s} sigma {sigma:g} strength {h:g}: {gain:+.2f} dB",
                      flush=True)  # fmt: skip
    return gains


def table(algorithm: str, strengths, gains: dict) -> str:
    """The markdown table of mean gains, the default in bold, and the pick below it."""
    default = default_strength(algorithm)
    lines = [f"{algorithm.upper()}:", ""]
    lines.append("| strength | " + " | ".join(f"sigma {s:g}" for s in SIGMAS) + " |")
    lines.append("|---|" + "---|" * len(SIGMAS))
    for h in strengths:
        row = " | ".join(f"{np.mean(gains[s, h]):+.2f}" for s in SIGMAS)
        lines.append(f"| {f'**{h:g}**' if h == default else f'{h:g}'} | {row} |")
    worst = {h: min(np.mean(gains[s, h]) for s in TARGET_SIGMAS) for h in strengths}
    pick = max(worst, key=worst.get)
    target = ", ".join(f"{s:g}" for s in TARGET_SIGMAS)
    lines += ["", f"Best worst case over sigma {target}: strength {pick:g} ({worst[pick]:+.2f} dB)"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one picture, fewer strengths")
    parser.add_argument("--algorithm", choices=("nlm", "bm3d", "both"), default="both")
    parser.add_argument("--crop", type=int, default=CROP, help=f"crop side (default {CROP})")
    args = parser.parse_args()
    core = vs.core
    import avdenoise_vs  # noqa: F401  (loads an editable checkout's bridge)

    algorithms = ("nlm", "bm3d") if args.algorithm == "both" else (args.algorithm,)
    pics = pictures(args.quick)
    tables = []
    for algorithm in algorithms:
        strengths = STRENGTHS[algorithm][::2] if args.quick else STRENGTHS[algorithm]
        tables.append(
            table(algorithm, strengths, measure(core, algorithm, strengths, pics, args.crop))
        )
    print("\n" + "\n\n".join(tables))


if __name__ == "__main__":
    main()
