"""Draw the pictures of the docs into docs/images: before/after crops, strengths, speed charts.

python scripts/bench/make_figures.py                 # all, into docs/images
python scripts/bench/make_figures.py --only speed    # the charts alone (quick: no denoising)
python scripts/bench/make_figures.py --only crops --out /tmp/figures

crops.png: the sample clip's launch pad, clean, with white Gaussian noise, and through
`core.avdenoise.Denoise` (NLM, then algorithm='bm3d') on the CPU backend, whose maths the GPU
backend shares; each panel names its PSNR against the clean crop. strengths.png: scikit-image's
astronaut with white Gaussian noise, through NLM and BM3D at several strengths (0: the noisy
and the clean picture), the same way. speed-fleet.svg and
speed-one-process.svg: bar charts of the tables of docs/BENCHMARKS.md ("Fleet", "One
process: NLM", "One process: BM3D"), drawn from their cells, each panel under its date, GPU
and command line. Run it again after changing those tables; tests/scripts/bench fails while the
charts differ from what the tables give.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _bench_tables import gpu_name, parse_tables, section_tables
from _figure_crops import DEFAULT_CROP, write_crops, write_strengths
from _speed_svg import Panel, panel_of, render_svg

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "docs" / "BENCHMARKS.md"
CROPS = "crops.png"
STRENGTHS = "strengths.png"
#: Chart file -> its title and the headings of docs/BENCHMARKS.md whose tables it draws.
CHARTS = {
    "speed-fleet.svg": (
        "Fleet: 16 vspipe workers at once, the way Av1an runs us",
        ("Fleet: the way Av1an runs us (headline)",),
    ),
    "speed-one-process.svg": (
        "One vspipe process",
        ("One process: NLM", "One process: BM3D"),
    ),
}


def speed_charts(markdown: str) -> dict[str, str]:
    """Each chart's file name and SVG text, drawn from the tables of ``markdown``."""
    tables = parse_tables(markdown)
    gpu = gpu_name(markdown)
    charts = {}
    for name, (title, sections) in CHARTS.items():
        panels: list[Panel] = []
        for section in sections:
            found = section_tables(tables, section)
            for table in found:
                # A heading over several runs: the date tells their panels apart.
                heading = f"{section}, {table.date}" if len(found) > 1 else section
                panels.append(panel_of(table, heading, gpu))
        charts[name] = render_svg(title, panels)
    return charts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs" / "images", help="folder of the figures"
    )
    parser.add_argument(
        "--only", choices=("crops", "strengths", "speed"), help="draw one kind of figure"
    )
    parser.add_argument(
        "--benchmarks",
        type=Path,
        default=BENCHMARKS,
        help="the markdown whose tables the charts draw",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="where the crops are denoised (cpu: no GPU needed, same maths)",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "speed"):
        for name, svg in speed_charts(args.benchmarks.read_text()).items():
            (args.out / name).write_text(svg)
            print(f"wrote {args.out / name}")
    if args.only in (None, "crops"):
        path = args.out / CROPS
        panels = write_crops(path, DEFAULT_CROP, device=args.device)
        scores = "; ".join(f"{p.label}: {p.psnr:.2f} dB" for p in panels if p.psnr is not None)
        print(f"wrote {path} ({scores})")
    if args.only in (None, "strengths"):
        path = args.out / STRENGTHS
        rows = write_strengths(path, device=args.device)
        scores = "; ".join(
            f"{p.label}: {p.psnr:.2f} dB" for row in rows for p in row if p.psnr is not None
        )
        print(f"wrote {path} ({scores})")


if __name__ == "__main__":
    main()
