"""scripts/bench/bm3d_sweep.py: a tiny CPU run sweeps our sigma and scores it fairly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bench" / "bm3d_sweep.py"


@pytest.mark.slow
def test_a_tiny_cpu_run_sweeps_the_factors_and_denoises_at_the_true_sigma(tmp_path: Path):
    pytest.importorskip("vapoursynth")
    pytest.importorskip("skimage")
    out, table = tmp_path / "sweep.json", tmp_path / "sweep.md"
    command = [sys.executable, str(SCRIPT), "--device", "cpu", "--backends", "avdenoise",
               "--size", "48", "--sigmas", "20", "--radii", "0", "--factors", "0.5,1,2",
               "--json", str(out), "--markdown", str(table)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(out.read_text())["rows"]
    psnr = {float(factor): value for factor, value in row["psnr"]["avdenoise"].items()}
    assert sorted(psnr) == [0.5, 1.0, 2.0]
    # Our strength is calibrated: the true sigma denoises, and beats half of it.
    assert psnr[1.0] > row["noisy"] + 3 and psnr[1.0] > psnr[0.5], (row["noisy"], psnr)
    assert f"| 20 | 0 | {row['noisy']:.2f} | {psnr[1.0]:.2f} |" in table.read_text()


def test_factors_without_the_true_sigma_are_refused():
    command = [sys.executable, str(SCRIPT), "--factors", "0.5,2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--factors must include 1" in done.stderr
