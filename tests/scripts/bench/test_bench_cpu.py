"""scripts/bench/bench_cpu.py: a whole run on a tiny clip writes the table and the JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "scripts" / "bench"


@pytest.mark.slow
def test_a_tiny_run_reports_every_case_and_size(tmp_path: Path) -> None:
    pytest.importorskip("vapoursynth")
    out = tmp_path / "cpu.json"
    command = [
        sys.executable, str(BENCH / "bench_cpu.py"), "--sizes", "48x32,40x24",
        "--frames", "1", "--json", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert document["machine"]["cpus"] >= 1
    assert list(document["fps"]) == ["BM3D r=0 luma", "BM3D r=0 YUV", "V-BM3D r=1 luma",
                                     "NLM defaults"]  # fmt: skip
    assert all(list(row) == ["48x32", "40x24"] for row in document["fps"].values())
    assert "V-BM3D r=1 luma" in done.stdout
