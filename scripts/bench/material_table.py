"""Measure NLM, BM3D and V-BM3D on four kinds of material: the tables behind README's guide.

    python scripts/bench/material_table.py              # 256x256 crops, about 10 minutes on 2 cores
    python scripts/bench/material_table.py --size 64 --quick --json /tmp/materials.json

Each material is made from three of scikit-image's pictures (``astronaut``, ``coffee``,
``chelsea``: their BT.709 luma, GRAY8), each seen through a crop from its middle panning
(2, 3) pixels a frame over 5 frames, so that V-BM3D's radius 2 has real frames on both sides
of the middle one, which is the frame measured:

- grain: film-like grain, Gaussian noise blurred to a correlation of about 1.5 pixels, its
  deviation 8 codes in the midtones and 3.2 at black and white, new every frame;
- compression: each frame a JPEG of quality 10 (Pillow), its blocks and ringing the damage;
- dark: the picture darkened to codes 16-80, with signal-dependent noise (deviation 3 codes
  at black, 6.4 at the brightest), so that the shadows are the noisiest part relative to
  their signal;
- anime: the picture flat-shaded (Felzenszwalb's segments filled with their mean colour,
  dark outlines along their borders), with white Gaussian noise of deviation 5 codes.

The clean reference is the undamaged frame of the same material (the darkened picture, the
flat-shaded one). Every configuration is ``core.avdenoise.Denoise(..., channels="luma",
device="cpu")`` at several strengths; the CPU backend computes what the GPU one does. BM3D
runs with the fleet benchmark's settings (block_step 8, bm_range 9, one stage: what
docs/BENCHMARKS.md's "Fleet" table times), and once at Denoise's own defaults (block_step 3,
bm_range 19, two stages). Printed: the gain in luma PSNR of the middle frame against the clean
one over the damaged one, the pictures' mean, per strength; then each configuration at the
strength of its largest gain, with the gain in SSIM there; ``--json`` writes every run.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import vapoursynth as vs

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from avdenoise_vs.sample import psnr

PAN, LENGTH, MIDDLE = (2, 3), 5, 2
#: scikit-image's bundled pictures the materials are made from.
PICTURES = ("astronaut", "coffee", "chelsea")
#: The fleet benchmark's BM3D settings (BM3DCUDA's), whose speed docs/BENCHMARKS.md gives.
FAST = {"block_step": 8, "bm_range": 9, "stages": 1}
#: Configuration name -> Denoise's arguments besides the clip and the strength.
CONFIGS: dict[str, dict] = {
    "NLM": {"algorithm": "nlm"},
    "BM3D r0": {"algorithm": "bm3d", "radius": 0, **FAST},
    "V-BM3D r1": {"algorithm": "bm3d", "radius": 1, **FAST},
    "V-BM3D r2": {"algorithm": "bm3d", "radius": 2, **FAST},
    "BM3D r0 defaults": {"algorithm": "bm3d", "radius": 0},
}
STRENGTHS = {
    "nlm": (1.5, 3.0, 4.5, 6.0, 8.0, 11.0, 15.0),
    "bm3d": (2.0, 3.5, 5.0, 7.0, 10.0, 14.0, 20.0),
}
QUICK_STRENGTHS = {"nlm": (4.5,), "bm3d": (7.0,)}
JPEG_QUALITY = 10


def luma(rgb: np.ndarray) -> np.ndarray:
    """BT.709 luma of an RGB picture, float in code values."""
    return rgb.astype(np.float64) @ np.array([0.2126, 0.7152, 0.0722])


def pan(picture: np.ndarray, size: int) -> list[np.ndarray]:
    """LENGTH crops of ``size`` x ``size`` pixels, the window moving PAN pixels a frame."""
    dy, dx = PAN
    return [picture[n * dy : n * dy + size, n * dx : n * dx + size] for n in range(LENGTH)]


def to_codes(frame: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(frame), 0, 255).astype(np.uint8)


def grain(picture: np.ndarray, size: int, rng: np.random.Generator):
    from scipy.ndimage import gaussian_filter

    clean = [to_codes(f) for f in pan(luma(picture), size)]
    noisy = []
    for frame in clean:
        field = gaussian_filter(rng.standard_normal(frame.shape), 0.75)
        x = frame / 255.0
        deviation = 8.0 * (0.4 + 2.4 * x * (1.0 - x))
        noisy.append(to_codes(frame + deviation * field / field.std()))
    return clean, noisy


def compression(picture: np.ndarray, size: int, rng: np.random.Generator):
    from PIL import Image

    clean = [to_codes(f) for f in pan(luma(picture), size)]
    damaged = []
    for frame in clean:
        buffer = io.BytesIO()
        Image.fromarray(frame, "L").save(buffer, "JPEG", quality=JPEG_QUALITY)
        damaged.append(np.asarray(Image.open(buffer)).copy())
    return clean, damaged


def dark(picture: np.ndarray, size: int, rng: np.random.Generator):
    clean = [to_codes(16.0 + 0.25 * f) for f in pan(luma(picture), size)]
    # Shot noise grows with the signal, read noise sets the floor: variance 9 + 0.5 (x - 16).
    noisy = [to_codes(f + rng.standard_normal(f.shape) * np.sqrt(9.0 + 0.5 * (f - 16.0)))
             for f in clean]  # fmt: skip
    return clean, noisy


def flat_shaded(picture: np.ndarray) -> np.ndarray:
    """The picture as flat colour regions with dark outlines, the look of cel animation."""
    from skimage.color import label2rgb
    from skimage.segmentation import felzenszwalb, find_boundaries

    # Segments of 150 pixels and more, following the picture's edges; +1: label 0 is no
    # background here.
    labels = felzenszwalb(picture, scale=250, sigma=0.8, min_size=150) + 1
    flat = label2rgb(labels, picture, kind="avg", bg_label=0).astype(np.float64)
    flat[find_boundaries(labels, mode="inner")] *= 0.25
    return flat


def anime(picture: np.ndarray, size: int, rng: np.random.Generator):
    clean = [to_codes(f) for f in pan(luma(flat_shaded(picture)), size)]
    noisy = [to_codes(f + rng.normal(0.0, 5.0, f.shape)) for f in clean]
    return clean, noisy


MATERIALS: dict[str, Callable] = {
    "grain": grain,
    "compression": compression,
    "dark": dark,
    "anime": anime,
}


def gray_clip(core, frames: list[np.ndarray]):
    """A GRAY8 clip of the frames."""
    height, width = frames[0].shape
    blank = core.std.BlankClip(width=width, height=height, format=vs.GRAY8, length=len(frames))

    def fill(n: int, f):
        out = f.copy()
        np.asarray(out[0])[...] = frames[n]
        return out

    return core.std.ModifyFrame(blank, blank, fill)


def scores(frame: np.ndarray, clean: np.ndarray) -> dict[str, float]:
    """PSNR, and SSIM where scikit-image has it, of a frame against the clean one."""
    result = {"psnr": round(psnr(frame, clean, 255.0), 3)}
    try:
        from skimage.metrics import structural_similarity
    except ImportError:
        return result
    result["ssim"] = round(float(structural_similarity(frame, clean, data_range=255)), 4)
    return result


def centre_pan(picture: np.ndarray, size: int) -> np.ndarray:
    """The middle of the picture, as much of it as the pan of a ``size`` crop covers."""
    height, width = picture.shape[:2]
    reach = [size + (LENGTH - 1) * step for step in PAN]
    if reach[0] > height or reach[1] > width:
        raise ValueError(f"size must leave room for the pan in {width}x{height}, got {size}")
    top, left = (height - reach[0]) // 2, (width - reach[1]) // 2
    return picture[top : top + reach[0], left : left + reach[1]]


def measure(core, material: str, size: int, strengths: dict, configs: dict) -> dict:
    """Per picture: the material's input scores and one run per configuration and strength."""
    from skimage import data

    results = {}
    for name in PICTURES:
        picture = centre_pan(getattr(data, name)(), size)
        clean, damaged = MATERIALS[material](picture, size, np.random.default_rng(7))
        clip, reference = gray_clip(core, damaged), clean[MIDDLE]
        given = scores(damaged[MIDDLE], reference)
        print(f"{material} {name}: input {given['psnr']:.2f} dB", flush=True)
        runs = []
        for config, arguments in configs.items():
            for strength in strengths[arguments["algorithm"]]:
                out = core.avdenoise.Denoise(
                    clip, strength=strength, channels="luma", device="cpu", **arguments
                )
                start = time.perf_counter()
                frame = np.array(out.get_frame(MIDDLE)[0], copy=True)
                seconds = round(time.perf_counter() - start, 2)
                run = {"config": config, "strength": strength, **scores(frame, reference)}
                runs.append({**run, "cpu_seconds": seconds})
                print(f"{material} {name} {config} strength {strength:g}: {run['psnr']:.2f} dB"
                      f" ({seconds:.1f} s)", flush=True)  # fmt: skip
        results[name] = {"input": given, "runs": runs}
    return results


def mean_gains(result: dict) -> dict[tuple[str, float], dict[str, float]]:
    """(configuration, strength) -> its gain of each score over the input, the pictures' mean."""
    gains: dict[tuple[str, float], dict[str, list[float]]] = {}
    for picture in result.values():
        given = picture["input"]
        for run in picture["runs"]:
            cell = gains.setdefault((run["config"], run["strength"]), {})
            for metric in given:
                cell.setdefault(metric, []).append(run[metric] - given[metric])
    return {key: {m: float(np.mean(v)) for m, v in cell.items()} for key, cell in gains.items()}


def best_strengths(gains: dict) -> dict[str, tuple[float, dict[str, float]]]:
    """Each configuration's strength of the largest mean PSNR gain, with its gains."""
    best: dict[str, tuple[float, dict[str, float]]] = {}
    for (config, strength), cell in gains.items():
        if config not in best or cell["psnr"] > best[config][1]["psnr"]:
            best[config] = (strength, cell)
    return best


def report(results: dict) -> str:
    """Markdown: per material, the mean PSNR gain by strength; then each configuration's best."""
    lines, summary = [], {}
    for material, result in results.items():
        gains = mean_gains(result)
        summary[material] = best_strengths(gains)
        given = np.mean([p["input"]["psnr"] for p in result.values()])
        lines += ["", f"{material}: input {given:.2f} dB (mean of {', '.join(result)})", ""]
        lines += ["| config | strength: mean PSNR gain, dB |", "|---|---|"]
        for config in dict.fromkeys(c for c, _ in gains):
            cells = [f"{h:g}: {g['psnr']:+.2f}" for (c, h), g in gains.items() if c == config]
            lines.append(f"| {config} | {', '.join(cells)} |")
    configs = list(dict.fromkeys(c for best in summary.values() for c in best))
    lines += ["", "Each configuration at its best strength: mean PSNR gain dB (SSIM gain)", ""]
    lines += ["| material | " + " | ".join(configs) + " |", "|---|" + "---|" * len(configs)]
    for material, best in summary.items():
        lines.append(f"| {material} | " + " | ".join(_cell(*best[c]) for c in configs) + " |")
    return "\n".join(lines)


def _cell(strength: float, gain: dict[str, float]) -> str:
    ssim = f" ({gain['ssim']:+.3f})" if "ssim" in gain else ""
    return f"{gain['psnr']:+.2f}{ssim} at {strength:g}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--size", type=int, default=256, help="crop side in pixels")
    parser.add_argument("--quick", action="store_true", help="each algorithm's default strength")
    parser.add_argument("--materials", default=",".join(MATERIALS), help="comma-separated")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated")
    parser.add_argument("--json", type=Path, help="write every run here")
    args = parser.parse_args(argv)
    materials = _names(parser, "--materials", args.materials, MATERIALS)
    configs = {name: CONFIGS[name] for name in _names(parser, "--configs", args.configs, CONFIGS)}
    if "compression" in materials and not _has_pillow():
        print("compression: skipped, Pillow is not installed (pip install pillow)")
        materials.remove("compression")
    import avdenoise_vs  # noqa: F401  (loads an editable checkout's bridge)

    core = vs.core
    strengths = QUICK_STRENGTHS if args.quick else STRENGTHS
    results = {m: measure(core, m, args.size, strengths, configs) for m in materials}
    print(report(results))
    if args.json:
        settings = {"pictures": PICTURES, "size": args.size, "pan": PAN, "length": LENGTH,
                    "frame": MIDDLE, "configs": configs, "jpeg_quality": JPEG_QUALITY}  # fmt: skip
        args.json.write_text(json.dumps({"settings": settings, "materials": results}, indent=1))


def _names(parser: argparse.ArgumentParser, option: str, given: str, known: dict) -> list[str]:
    """The comma-separated names of ``given``; a usage error names any unknown."""
    names = [name.strip() for name in given.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        parser.error(f"{option} must be names from {', '.join(known)}, got {given!r}")
    return names


def _has_pillow() -> bool:
    import importlib.util

    return importlib.util.find_spec("PIL") is not None


if __name__ == "__main__":
    main()
