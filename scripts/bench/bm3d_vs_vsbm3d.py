"""Our BM3D reference against VapourSynth-BM3D (CPU) at BM3DCUDA's settings, one stage.

    python scripts/bench/bm3d_vs_vsbm3d.py        (needs the `bm3d` VapourSynth plugin, e.g. the
                                             vapoursynth-bm3d wheel)

Two 128 x 128 crops of the bundled sample picture's luma, Gaussian noise of sigma 3 and 10
(fixed seed), ``block_step=8, bm_range=9``, the basic estimate alone; prints the mean PSNR of
each. VapourSynth-BM3D is the CPU filter BM3DCUDA follows, so this tells whether a PSNR gap
against the GPU rivals comes from the algorithm (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import vapoursynth as vs

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from avdenoise_vs._bm3d.reference.bm3d import bm3d
from avdenoise_vs.sample import _picture

SIZE = 128
GRID = dict(block_step=8, bm_range=9)


def _psnr(estimate: np.ndarray, clean: np.ndarray) -> float:
    return float(10 * np.log10(255**2 / np.mean((np.clip(estimate, 0, 255) - clean) ** 2)))


def _vsbm3d_basic(noisy: np.ndarray, sigma: float) -> np.ndarray:
    """VapourSynth-BM3D's Basic on a GRAYS frame in [0, 1] (matrix=0: sigma as given)."""
    core = vs.core
    blank = core.std.BlankClip(width=SIZE, height=SIZE, format=vs.GRAYS, length=1)

    def fill(n, f):
        out = f.copy()
        np.asarray(out[0])[...] = (noisy / 255).astype(np.float32)
        return out

    clip = core.std.ModifyFrame(blank, blank, fill)
    basic = core.bm3d.Basic(clip, sigma=sigma, matrix=0, **GRID)
    return np.asarray(basic.get_frame(0)[0]) * 255.0


def main() -> None:
    luma = _picture().astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    h, w = luma.shape
    crops = [luma[y : y + SIZE, x : x + SIZE] for y, x in ((h // 4, w // 4), (h - 140, w - 140))]
    rng = np.random.default_rng(1)
    for sigma in (3.0, 10.0):
        scores = []
        for clean in crops:
            noisy = clean + rng.normal(0.0, sigma, clean.shape)
            ours = bm3d([noisy], 0, sigma, stages=1, **GRID)
            theirs = _vsbm3d_basic(noisy, sigma)
            scores.append((_psnr(noisy, clean), _psnr(ours, clean), _psnr(theirs, clean)))
        noisy_db, ours_db, theirs_db = np.mean(scores, axis=0)
        print(f"sigma {sigma:g}: noisy {noisy_db:.2f} dB, ours (basic) {ours_db:.2f} dB, "
              f"VapourSynth-BM3D Basic {theirs_db:.2f} dB")  # fmt: skip


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    main()
