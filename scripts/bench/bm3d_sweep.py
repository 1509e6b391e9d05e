"""BM3D / V-BM3D quality against each rival at its best sigma: a pan over a real picture.

Each backend of ``bm3d_quality.py`` (:data:`BACKENDS`) denoises the centre frame of a grey pan
(the luma of scikit-image's astronaut by default; ``_bm3d_quality_runs.sequence``) with white
Gaussian noise of deviation ``sigma``, once per factor of ``--factors``: its sigma argument is
``factor * sigma``. The table gives each backend's PSNR at the true sigma (factor 1) and its best
PSNR over the factors, with the factor that gave it; a rival's sigma scale need not be ours, so a
fair comparison gives it its best. The last column is ours at the true sigma minus the best rival
at its best factor.

Run from the repository root; the Vulkan rivals need VapourSynth R80+ and a Vulkan device
(``core.vulkan_devices``; on a machine without a GPU, Mesa's lavapipe)::

    PYTHONPATH=. python scripts/bench/bm3d_sweep.py --device cpu \\
        --backends avdenoise,vsfeel,bm3dvk2 --json sweep.json --markdown sweep.md

Every noise draw has a fixed seed, so that two runs score the same noisy frames.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import time
from pathlib import Path

import _bm3d_quality_backends
from _bm3d_quality_backends import BACKENDS
from _bm3d_quality_runs import noise, scores, sequence, video_reach

log = logging.getLogger("bm3d_sweep")

OURS = "avdenoise"


def _numbers(kind):
    return lambda text: [kind(v) for v in text.split(",") if v]


def _clip(image: str, size: int, sigma: float, radii: list[int]):
    """Clean and noisy frames of the pan, and the index of the scored frame."""
    reach = video_reach(radii)
    clean = sequence(image, "pan", size, reach)
    noisy = [c + noise(c.shape, sigma, seed=(11, k, int(sigma))) for k, c in enumerate(clean)]
    return clean, noisy, reach


def sweep(backend: str, image: str, size: int, sigma: float, radius: int, factors, radii):
    """PSNR of `backend` at each factor of `factors` (its sigma argument: factor * sigma)."""
    clean, noisy, n = _clip(image, size, sigma, radii)
    psnr: dict[float, float] = {}
    for factor in factors:
        start = time.perf_counter()
        estimate = BACKENDS[backend].video(noisy, n, factor * sigma, radius)
        psnr[factor] = scores(clean[n], estimate)[0]
        log.info("%s sigma %g r=%d x%g: %.2f dB (%.1f s)", backend, sigma, radius, factor,
                 psnr[factor], time.perf_counter() - start)  # fmt: skip
    return psnr


def _best(psnr: dict[float, float]) -> tuple[float, float]:
    factor = max(psnr, key=psnr.get)
    return psnr[factor], factor


def markdown(rows: list[dict], backends: list[str], command: str) -> str:
    """The table: each backend at the true sigma and at its best factor."""
    head = ["sigma", "radius", "noisy"]
    for b in backends:
        head += [f"{b} at sigma", f"{b} best (factor)"]
    rivals = [b for b in backends if b != OURS]
    lines = [f"`python scripts/bench/bm3d_sweep.py {command}`", ""]
    if OURS in backends and rivals:
        head.append(f"{OURS} at sigma - best rival")
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"{row['sigma']:g}", str(row["radius"]), f"{row['noisy']:.2f}"]
        for b in backends:
            psnr = row["psnr"].get(b)
            if psnr is None:
                cells += ["n/a", "n/a"]
                continue
            best, factor = _best(psnr)
            cells += [f"{psnr[1.0]:.2f}", f"{best:.2f} ({factor:g})"]
        if OURS in backends and rivals:
            there = [_best(row["psnr"][b])[0] for b in rivals if b in row["psnr"]]
            ours = row["psnr"].get(OURS)
            cells.append(f"{ours[1.0] - max(there):+.2f}" if ours and there else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="astronaut", help="a scikit-image picture")
    parser.add_argument("--size", type=int, default=128, help="frame side in pixels")
    parser.add_argument("--sigmas", type=_numbers(float), default=[5.0, 10.0, 20.0])
    parser.add_argument("--radii", type=_numbers(int), default=[0, 1])
    parser.add_argument("--factors", type=_numbers(float),
                        default=[0.5, 0.7, 0.85, 1.0, 1.2, 1.4, 1.7, 2.0])  # fmt: skip
    parser.add_argument("--backends", default=f"{OURS},vsfeel,bm3dvk2",
                        help=f"comma-separated, from: {', '.join(BACKENDS)}")  # fmt: skip
    parser.add_argument("--device", default="cuda", help="device of the avdenoise backends")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    if 1.0 not in args.factors:
        parser.error("--factors must include 1 (the true sigma)")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    _bm3d_quality_backends.AVDENOISE_DEVICE = args.device
    asked = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(asked) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backends {unknown}; known: {sorted(BACKENDS)}")
    backends = []
    for b in asked:
        reason = BACKENDS[b].unavailable() if BACKENDS[b].video else "no video"
        if reason:
            log.warning("skipping %s: %s", b, reason)
        else:
            backends.append(b)
    rows = []
    for sigma in args.sigmas:
        for radius in args.radii:
            clean, noisy, n = _clip(args.image, args.size, sigma, args.radii)
            row = {"sigma": sigma, "radius": radius, "noisy": scores(clean[n], noisy[n])[0]}
            row["psnr"] = {
                b: sweep(b, args.image, args.size, sigma, radius, args.factors, args.radii)
                for b in backends
            }
            rows.append(row)
    command = shlex.join(argv if argv is not None else sys.argv[1:])
    table = markdown(rows, backends, command)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        args.json.write_text(json.dumps({"command": command, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
