"""V-BM3D's group sizes: PSNR of the NumPy reference with each pair of most blocks per group.

For every picture, motion (a pan or a zoom, ``_bm3d_quality_runs.sequence``) and sigma, the
centre frame of a grey clip with white Gaussian noise is denoised by the clip-level V-BM3D
(:func:`~avdenoise_vs._bm3d.reference.vbm3d.vbm3d`, two stages, ``Denoise``'s defaults) with
each pair of ``--sizes`` (hard thresholding / Wiener). The table gives each pair's PSNR, the
pair ``maths.group_sizes`` picks for that sigma and block step, and each pair's mean per sigma:
the evidence behind that rule (docs/BENCHMARKS.md, "V-BM3D group sizes"). CPU only::

    PYTHONPATH=. python scripts/bench/bm3d_group_sizes.py --markdown sizes.md

Every noise draw has a fixed seed, so that two runs score the same noisy frames.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np
from _bm3d_quality_runs import noise, scores, sequence, video_reach

from avdenoise_vs._bm3d.maths import group_sizes
from avdenoise_vs._bm3d.reference.vbm3d import FrameList, vbm3d


def _pairs(text: str) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in pair.split("/")) for pair in text.split(",") if pair]


def _numbers(kind):
    return lambda text: [kind(v) for v in text.split(",") if v]


def scores_by_pair(image, motion, size, sigma, radius, pairs, **grid) -> dict[str, float]:
    """PSNR of the reference's estimate of the centre frame with each pair of group sizes, on
    one noisy clip; `grid`: ``block_step`` and ``bm_range``."""
    reach = video_reach([radius])
    clean = sequence(image, motion, size, reach)
    clip = FrameList(
        [c + noise(c.shape, sigma, seed=(11, k, int(sigma))) for k, c in enumerate(clean)]
    )
    psnr = {}
    for h, w in pairs:
        estimate = vbm3d(clip, reach, sigma, radius=radius, group_sizes=(h, w), **grid)
        psnr[f"{h}/{w}"] = scores(clean[reach], estimate[0])[0]
    return psnr


def markdown(rows: list[dict], pairs, command: str) -> str:
    """Per case: PSNR of each pair and the rule's pick; then the mean of each pair per sigma."""
    names = [f"{h}/{w}" for h, w in pairs]
    head = ["image", "motion", "sigma", *names, "rule picks"]
    lines = [f"`python scripts/bench/bm3d_group_sizes.py {command}`", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["image"], row["motion"], f"{row['sigma']:g}"]
        cells += [f"{row['psnr'][n]:.2f}" for n in names] + [row["rule"]]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| sigma | " + " | ".join(f"mean {n}" for n in names) + " |",
              "|" + "---|" * (len(names) + 1)]  # fmt: skip
    for sigma in sorted({r["sigma"] for r in rows}):
        picked = [r for r in rows if r["sigma"] == sigma]
        means = [np.mean([r["psnr"][n] for r in picked]) for n in names]
        lines.append(f"| {sigma:g} | " + " | ".join(f"{m:.2f}" for m in means) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", default="astronaut,camera,coffee,chelsea")
    parser.add_argument("--motions", default="pan,zoom")
    parser.add_argument("--sigmas", type=_numbers(float), default=[5.0, 10.0, 20.0, 25.0, 40.0])
    parser.add_argument("--radius", type=int, default=1)
    parser.add_argument("--size", type=int, default=128, help="frame side in pixels")
    parser.add_argument("--sizes", type=_pairs, default=[(16, 32), (8, 16)],
                        help="pairs hard/wiener, comma-separated")  # fmt: skip
    parser.add_argument("--block-step", type=int, default=3, help="Denoise's default: 3")
    parser.add_argument("--bm-range", type=int, default=19, help="Denoise's default: 19")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for image in args.images.split(","):
        for motion in args.motions.split(","):
            for sigma in args.sigmas:
                start = time.perf_counter()
                psnr = scores_by_pair(image, motion, args.size, sigma, args.radius, args.sizes,
                                      block_step=args.block_step, bm_range=args.bm_range)  # fmt: skip
                rule = "/".join(map(str, group_sizes(2 * args.radius + 1, sigma, args.block_step)))
                rows.append(dict(image=image, motion=motion, sigma=sigma, psnr=psnr, rule=rule))
                print(image, motion, sigma, psnr, f"({time.perf_counter() - start:.0f} s)",
                      file=sys.stderr, flush=True)  # fmt: skip
    command = shlex.join(argv if argv is not None else sys.argv[1:])
    table = markdown(rows, args.sizes, command)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)


if __name__ == "__main__":
    main()
