"""Measure BM3D denoising quality (PSNR, SSIM) on scikit-image's bundled pictures.

Scores BM3D / CBM3D on grey and colour crops with white Gaussian noise, and V-BM3D at each
temporal radius on pan and zoom sequences cut from the grey pictures, for every backend asked
for. Writes a Markdown report and, when matplotlib is installed, a PSNR-versus-sigma plot.

Run from the repository root (the CPU columns, the default backends; about 10 minutes)::

    PYTHONPATH=. python scripts/bench/bm3d_quality.py --size 96

Backends (:data:`BACKENDS`):

reference
    The NumPy reference: :func:`~avdenoise_vs._bm3d.reference.bm3d.bm3d` for still pictures
    (CBM3D in OPP for colour) and :func:`~avdenoise_vs._bm3d.reference.vbm3d.vbm3d`, the clip-level
    V-BM3D that ``Denoise`` follows, for sequences (radius 0 is spatial BM3D).
tampere
    The Tampere ``bm3d`` package, profile "np" (``bm3d_rgb`` for colour); still pictures only.
vsbm3d
    VapourSynth-BM3D (``bm3d`` namespace, CPU; ``pip install vapoursynth-bm3d``) at its
    defaults (profile "fast") except ``matrix=0`` on grey clips (see :func:`_vsbm3d`):
    ``Basic`` then ``Final``, or ``VBasic`` / ``VFinal`` each followed by ``VAggregate``.
avdenoise
    ``avdenoise.Denoise(algorithm="bm3d")`` at its defaults (the paper's settings, two stages)
    on ``--device`` (default ``cuda``); should match ``reference``.
avdenoise_bm3d
    ``avdenoise.BM3D`` at BM3DCUDA's defaults on ``--device``: a first call for the basic
    estimate, a second with ``ref`` for the final one, as the two rivals below are called.
bm3dcuda
    BM3DCUDA, loaded from ``$BM3DCUDA_PLUGIN``, at its defaults, two calls likewise; radius > 0
    through ``BM3Dv2`` (``BM3D`` with the temporal aggregation in the same call).
vszipcu
    vszipcu's ``BM3Dv2`` (a port of BM3DCUDA) at its defaults, two calls likewise.

The VapourSynth backends get float32 clips in [0, 1] (GRAYS; RGBS for ``vsbm3d`` and
``avdenoise``, which convert to an opponent colour space themselves; for the BM3DCUDA-style
calls, the OPP planes as YUV444PS with ``chroma=True`` and each plane's noise deviation) and
sigma in 8-bit units, as their documentation asks. A backend that cannot run here (plugin
absent, no GPU) is skipped with the reason logged and written into the report.

The GPU columns come from a second run on the GPU machine that merges the CPU columns of the
committed report instead of recomputing them::

    python3 scripts/bench/bm3d_quality.py --size 96 --merge docs/BM3D_QUALITY.md \\
        --backends avdenoise,avdenoise_bm3d,bm3dcuda,vszipcu --out "$OUT/BM3D_QUALITY.md"

Estimates are clipped to [0, 255] before scoring; the noise is not clipped (the usual AWGN
protocol). Every noise draw has a fixed seed.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shlex
import sys
import time
from pathlib import Path

import _bm3d_quality_backends
from _bm3d_quality_backends import BACKENDS
from _bm3d_quality_report import markdown, merge, plot, report_size
from _bm3d_quality_runs import COLOUR, GREY, run_images, run_videos

log = logging.getLogger("bm3d_quality")


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )  # fmt: skip
    parser.add_argument("--size", type=int, default=128, help="crop side in pixels")
    parser.add_argument("--sigmas", type=_floats, default=[5, 10, 15, 25, 50])
    parser.add_argument("--video-sigmas", type=_floats, default=[10, 25],
                        help="noise levels for the sequences (empty to skip them)")  # fmt: skip
    parser.add_argument("--radii", type=lambda t: [int(v) for v in t.split(",")], default=[0, 1, 2])
    parser.add_argument("--images", default=",".join(GREY + COLOUR))
    parser.add_argument("--backends", default="reference,tampere,vsbm3d",
                        help=f"comma-separated, from: {', '.join(BACKENDS)}")  # fmt: skip
    parser.add_argument("--device", default="cuda",
                        help="device of the avdenoise backends: cuda, cuda:N or cpu")  # fmt: skip
    parser.add_argument("--merge", type=Path, action="append", default=[],
                        help="an earlier report whose columns of other backends are kept")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("docs/BM3D_QUALITY.md"))
    parser.add_argument("--plot", type=Path, default=None,
                        help="PNG path (default: --out with suffix .png)")  # fmt: skip
    args = parser.parse_args(argv)
    args.command = shlex.join(argv if argv is not None else sys.argv[1:])
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    _bm3d_quality_backends.AVDENOISE_DEVICE = args.device  # read at each call
    asked = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(asked) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backends {unknown}; known: {sorted(BACKENDS)}")
    for path in args.merge:  # before the long run, not after it
        if report_size(path) != args.size:
            parser.error(f"{path} scored crops of {report_size(path)} px, not --size {args.size}")
    notes, backends = [], []
    for b in asked:
        reason = BACKENDS[b].unavailable()
        if reason:
            log.warning("skipping %s: %s", b, reason)
            notes.append(f"Skipped `{b}`: {reason}.")
        else:
            backends.append(b)
    start = time.perf_counter()
    names = [n for n in args.images.split(",") if n]
    image_rows = run_images(names, args.sigmas, args.size, backends)
    grey = [n for n in names if n in GREY]
    video_rows = run_videos(grey, args.video_sigmas, args.size, args.radii, backends)
    minutes = (time.perf_counter() - start) / 60
    notes.append(f"This run computed {', '.join(f'`{b}`' for b in backends) or 'nothing'} in "
                 f"{minutes:.1f} min ({os.cpu_count()} CPUs).")  # fmt: skip
    for path in args.merge:
        merged = merge(image_rows, video_rows, path, skip=backends)
        earlier = re.search(r"^This run (computed .*)$", path.read_text(), re.MULTILINE)
        notes.append(f"Columns {', '.join(f'`{b}`' for b in merged)} are copied from an earlier "
                     f"report ({path.name}), as printed there"
                     + (f"; that run {earlier[1]}" if earlier else "."))  # fmt: skip
        backends += [b for b in merged if b not in backends]
    backends.sort(key=list(BACKENDS).index)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown(image_rows, video_rows, backends, args.radii, args, notes))
    log.info("wrote %s (%.1f min)", args.out, minutes)
    plot(image_rows, video_rows, backends, args.radii, args.plot or args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
