"""scripts/bench/bm3d_group_sizes.py: a tiny CPU run scores each pair and names the rule's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bench" / "bm3d_group_sizes.py"


@pytest.mark.slow
def test_a_tiny_run_scores_each_pair_and_the_rules_pick(tmp_path: Path):
    pytest.importorskip("skimage")
    table = tmp_path / "sizes.md"
    command = [sys.executable, str(SCRIPT), "--images", "camera", "--motions", "pan",
               "--sigmas", "10,30", "--size", "32", "--sizes", "16/32,8/16,4/4",
               "--markdown", str(table)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = table.read_text().splitlines()
    rows = [line.split(" | ") for line in lines if line.startswith("| camera |")]
    assert [(r[2], r[-1]) for r in rows] == [("10", "8/16 |"), ("30", "16/32 |")]
    for r in rows:  # each pair's PSNR: a denoised 32 x 32 crop, distinct per pair
        psnr = [float(v) for v in r[3:6]]
        assert all(20 < v < 60 for v in psnr) and len(set(psnr)) == 3, r
    assert "| sigma | mean 16/32 | mean 8/16 | mean 4/4 |" in lines
